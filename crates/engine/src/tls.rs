//! TLS client configuration (rustls): bundled and system roots, `--cacert`,
//! client certificates, and `--insecure` (verification off, said in the report).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

/// What a connection needs to start TLS.
#[derive(Debug, Clone)]
pub struct TlsSetup {
    /// The client configuration, shared by every connection.
    pub config: Arc<ClientConfig>,
    /// The name sent in SNI and checked against the certificate.
    pub server_name: ServerName<'static>,
    /// Certificate verification is off.
    pub insecure: bool,
}

/// TLS options as given on the command line.
#[derive(Debug, Clone, Default)]
pub struct TlsArgs {
    /// Do not verify the server's certificate.
    pub insecure: bool,
    /// Extra CA certificates (PEM) to trust.
    pub cacert: Option<std::path::PathBuf>,
    /// Client certificate chain (PEM).
    pub cert: Option<std::path::PathBuf>,
    /// Client private key (PEM).
    pub key: Option<std::path::PathBuf>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(p: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = redline_stats::files::read(p, redline_stats::files::Kind::Pem, what)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what} {} is not PEM: {e}", p.display()))?;
    if certs.is_empty() {
        return Err(format!("{what} {} holds no certificate", p.display()));
    }
    Ok(certs)
}

/// Builds the TLS setup for `host` (a name or an IP literal).
pub fn setup(host: &str, a: &TlsArgs) -> Result<TlsSetup, String> {
    let server_name = ServerName::try_from(host.to_string())
        .map_err(|_| format!("'{host}' is not a valid TLS server name"))?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let builder = if a.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider())))
    } else {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for c in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(c);
        }
        if let Some(p) = &a.cacert {
            for c in read_certs(p, "--cacert")? {
                roots
                    .add(c)
                    .map_err(|e| format!("--cacert {}: {e}", p.display()))?;
            }
        }
        builder.with_root_certificates(roots)
    };
    let config = match (&a.cert, &a.key) {
        (Some(c), Some(k)) => {
            let chain = read_certs(c, "--cert")?;
            let pem = redline_stats::files::read(k, redline_stats::files::Kind::Pem, "--key")?;
            let key = PrivateKeyDer::from_pem_slice(&pem)
                .map_err(|e| format!("--key {} is not a PEM private key: {e}", k.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("--cert/--key: {e}"))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("--cert and --key go together".into()),
    };
    let mut config = config;
    // The HTTP/1 engine says what it speaks (HTTP/2 runs offer h2 instead):
    // a server offering both then never answers in HTTP/2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsSetup {
        config: Arc::new(config),
        server_name,
        insecure: a.insecure,
    })
}

/// `--insecure`: accepts any certificate (signatures are still checked).
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
