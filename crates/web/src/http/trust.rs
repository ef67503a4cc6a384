//! Certificate trust for the page loader and the audit's probes: the
//! bundled and system roots plus `--cacert`, as the engine trusts them, and
//! one case more, as `curl --cacert` does: a self-signed certificate given
//! with `--cacert` that the server presents as its own (one made with
//! `openssl req -x509`, which marks it `CA:TRUE`) is trusted for its names
//! and validity period. webpki refuses a CA certificate as an end entity
//! (`CaUsedAsEndEntity`); OpenSSL accepts a trust anchor as the whole chain.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::Arc;

use super::TlsArgs;

/// The roots a connection trusts: bundled (webpki-roots), the system's and
/// the `--cacert` file's.
fn roots(args: &TlsArgs) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for c in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(c);
    }
    for c in cacerts(args)? {
        roots
            .add(c)
            .map_err(|e| format!("--cacert {}: {e}", shown(args)))?;
    }
    Ok(roots)
}

fn shown(args: &TlsArgs) -> String {
    args.cacert
        .as_ref()
        .map_or(String::new(), |p| p.display().to_string())
}

/// The certificates of the `--cacert` file (none without one).
fn cacerts(args: &TlsArgs) -> Result<Vec<CertificateDer<'static>>, String> {
    let Some(p) = &args.cacert else {
        return Ok(Vec::new());
    };
    CertificateDer::pem_file_iter(p)
        .map_err(|e| format!("cannot read --cacert {}: {e}", p.display()))?
        .map(|c| c.map_err(|e| format!("--cacert {}: {e}", p.display())))
        .collect()
}

/// The verifier of a load (not under `--insecure`): webpki over [`roots`],
/// and a `--cacert` certificate the server presents itself trusted as curl
/// trusts it.
pub(crate) fn verifier(
    args: &TlsArgs,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn ServerCertVerifier>, String> {
    let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots(args)?),
        provider.clone(),
    )
    .build()
    .map_err(|e| format!("TLS setup: {e}"))?;
    Ok(Arc::new(Trust {
        inner,
        pinned: cacerts(args)?,
        provider,
    }))
}

#[derive(Debug)]
struct Trust {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    /// The `--cacert` certificates, byte for byte.
    pinned: Vec<CertificateDer<'static>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl Trust {
    /// The server's own certificate is one the user gave with `--cacert`:
    /// trusted when it names `name` and `now` is within its validity.
    fn pinned_ok(
        &self,
        end_entity: &CertificateDer<'_>,
        name: &ServerName<'_>,
        now: UnixTime,
    ) -> Option<Result<(), rustls::Error>> {
        if !self
            .pinned
            .iter()
            .any(|p| p.as_ref() == end_entity.as_ref())
        {
            return None;
        }
        let parsed = match rustls::server::ParsedCertificate::try_from(end_entity) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        if let Err(e) = rustls::client::verify_server_name(&parsed, name) {
            return Some(Err(e));
        }
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(end_entity.as_ref()) else {
            return Some(Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::BadEncoding,
            )));
        };
        let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        let v = cert.validity();
        Some(if secs < v.not_before.timestamp() {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidYet,
            ))
        } else if secs > v.not_after.timestamp() {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Expired,
            ))
        } else {
            Ok(())
        })
    }
}

impl ServerCertVerifier for Trust {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Ok(v) => Ok(v),
            Err(e) => match self.pinned_ok(end_entity, server_name, now) {
                Some(Ok(())) => Ok(ServerCertVerified::assertion()),
                Some(Err(pinned)) => Err(pinned),
                None => Err(e),
            },
        }
    }
    redline_engine::rustls_signature_checks!(provider.signature_verification_algorithms);
}
