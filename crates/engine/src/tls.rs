//! TLS client configuration (rustls): bundled and system roots, `--cacert`,
//! client certificates, and `--insecure` (verification off, said in the report).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The three signature methods of a `rustls` `ServerCertVerifier` that only
/// hand over to the crypto provider's algorithms (`$($algs)+`: the path to
/// them from `self`). Every verifier of the project (`--insecure` here,
/// `page`'s trust store and the audit's certificate check in `redline-web`)
/// differs only in `verify_server_cert`. The impl must have
/// `CertificateDer`, `DigitallySignedStruct`, `HandshakeSignatureValid` and
/// `SignatureScheme` in scope.
#[macro_export]
macro_rules! rustls_signature_checks {
    ($($algs:tt)+) => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.$($algs)+)
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.$($algs)+)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.$($algs)+.supported_schemes()
        }
    };
}

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
    let verifier: Arc<dyn ServerCertVerifier> = if a.insecure {
        Arc::new(NoVerify(provider()))
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
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| format!("TLS setup: {e}"))?
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Counted(verifier, provider())));
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

thread_local! {
    /// Server certificates this thread checked ([`Counted`]).
    static VERIFIED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many server certificates this thread's handshakes checked so far. A
/// TLS 1.3 handshake that resumed a session gets no certificate, so a
/// handshake that moved on this thread without the count changing resumed
/// (the QUIC session reads it around each datagram it hands to rustls).
pub(crate) fn certificates_checked() -> u64 {
    VERIFIED.with(std::cell::Cell::get)
}

/// The run's verifier (`--insecure`'s or the trust store's), counting the
/// certificates it is asked to check on the calling thread.
#[derive(Debug)]
struct Counted(
    Arc<dyn ServerCertVerifier>,
    Arc<rustls::crypto::CryptoProvider>,
);

impl ServerCertVerifier for Counted {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        VERIFIED.with(|v| v.set(v.get() + 1));
        self.0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
    }
    rustls_signature_checks!(1.signature_verification_algorithms);
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
    rustls_signature_checks!(0.signature_verification_algorithms);
}

/// Why no TLS connection to a target can succeed, known from one handshake
/// before the run (`refused`): every connection would fail the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The server's certificate was refused; rustls' reason (`UnknownIssuer`,
    /// `Other(OtherError(CaUsedAsEndEntity))`, `NotValidForName`, `Expired`…).
    Certificate(String),
    /// The server answered the ClientHello in plain HTTP (`HTTP/1.1 400 …`).
    PlainHttp,
    /// The server answered, but not in TLS.
    NotTls(String),
}

impl Refusal {
    /// The one line a user reads: what is wrong, and the flag or change that
    /// fixes it. `url` is the target as shown (credentials redacted), `host`
    /// the name checked against the certificate.
    pub fn line(&self, url: &str, host: &str) -> String {
        let cert = |why: &str, fix: &str| format!("{url}: the server's certificate {why}: {fix}");
        match self {
            Refusal::PlainHttp => {
                let plain = url.replacen("https://", "http://", 1);
                format!("{url}: the server answered in plain HTTP, not TLS: use {plain}")
            }
            Refusal::NotTls(what) => format!(
                "{url}: the server did not answer in TLS ({what}): is it an https port? (plain HTTP: use http://)"
            ),
            Refusal::Certificate(r) if r.contains("CaUsedAsEndEntity") => cert(
                "is a CA certificate used as the server's own (a self-signed certificate made with CA:TRUE), refused even with --cacert",
                "give the server a certificate signed by that CA, or skip the check with --insecure",
            ),
            Refusal::Certificate(r) if r.contains("UnknownIssuer") => cert(
                "is not signed by a CA this machine trusts (self-signed, or a private CA)",
                "trust that CA with --cacert FILE (PEM), or skip the check with --insecure",
            ),
            Refusal::Certificate(r) if r.contains("NotValidForName") => cert(
                &format!("is not valid for the name '{host}'"),
                "use a name it was issued for, or skip the check with --insecure",
            ),
            Refusal::Certificate(r) if r.contains("NotValidYet") => cert(
                "is not valid yet (or a clock is wrong)",
                "check the server's and this machine's clocks, or skip the check with --insecure",
            ),
            Refusal::Certificate(r) if r.contains("Expired") => cert(
                "has expired (or this machine's clock is wrong)",
                "renew it, or skip the check with --insecure",
            ),
            Refusal::Certificate(r) => cert(
                &format!("was refused ({r})"),
                "trust its CA with --cacert FILE (PEM), or skip the check with --insecure",
            ),
        }
    }
}

/// One TLS handshake with `setup` to `addr` within `limit`: the reason every
/// connection of a run would fail, or `None` (the handshake worked, or failed
/// for a reason that may not last: refused, timed out, closed, an alert; the
/// run then shows it request by request).
pub fn refused(setup: &TlsSetup, addr: std::net::SocketAddr, limit: Duration) -> Option<Refusal> {
    handshake(setup, addr, limit).refusal
}

/// What one TLS handshake offering `h2, http/1.1` told: the protocol the
/// server picked (ALPN) when it completed, or why every connection would
/// be refused. The ALPN probe of an https run without a version flag and
/// the certificate check before any worker starts are this one handshake.
#[derive(Debug, Clone, Default)]
pub struct Handshake {
    /// The server's ALPN pick, when the handshake completed with one.
    pub alpn: Option<Vec<u8>>,
    /// Why no connection of the run could succeed ([`refused`]).
    pub refusal: Option<Refusal>,
}

/// The handshake behind [`refused`] and the ALPN probe.
pub fn handshake(setup: &TlsSetup, addr: std::net::SocketAddr, limit: Duration) -> Handshake {
    // A server that speaks only h2 is not refused for ALPN.
    let alpn = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    match connect(setup, addr, limit, alpn) {
        Ok((mut conn, mut sock)) => {
            use std::io::Write;
            let alpn = conn.alpn_protocol().map(<[u8]>::to_vec);
            conn.send_close_notify();
            let _ = conn.write_tls(&mut sock);
            let _ = sock.flush();
            Handshake {
                alpn,
                refusal: None,
            }
        }
        Err(f) => Handshake {
            alpn: None,
            refusal: f.refusal,
        },
    }
}

/// Why [`connect`] has no TLS connection to give.
#[derive(Debug)]
pub(crate) struct NoTls {
    /// Every connection of a run would be refused for this.
    pub refusal: Option<Refusal>,
    /// What happened, for a message (`connection refused`, `timed out`…).
    pub why: String,
}

/// One TCP connection to `addr` and a TLS handshake on it with `setup`
/// offering `alpn`, all within `limit`: the connection, ready for a
/// request, or why not. The one handshake of [`handshake`] and of the
/// `--http3` Alt-Svc probe (`plan::h3::probe`), so either is also the run's
/// certificate check.
pub(crate) fn connect(
    setup: &TlsSetup,
    addr: std::net::SocketAddr,
    limit: Duration,
    alpn: Vec<Vec<u8>>,
) -> Result<(rustls::ClientConnection, std::net::TcpStream), NoTls> {
    use std::io::Read;
    let fail = |refusal, why: &str| NoTls {
        refusal,
        why: why.to_string(),
    };
    let deadline = Instant::now() + limit;
    let mut cfg = (*setup.config).clone();
    cfg.alpn_protocols = alpn;
    let mut conn = rustls::ClientConnection::new(Arc::new(cfg), setup.server_name.clone())
        .map_err(|e| fail(None, &format!("no TLS ({e})")))?;
    let mut sock = std::net::TcpStream::connect_timeout(&addr, limit)
        .map_err(|e| fail(None, &crate::sys::io_msg(&e)))?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut first = true;
    for _ in 0..1000 {
        if !conn.is_handshaking() {
            return Ok((conn, sock));
        }
        while conn.wants_write() {
            conn.write_tls(&mut sock)
                .map_err(|e| fail(None, &crate::sys::io_msg(&e)))?;
        }
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| fail(None, "timed out"))?;
        sock.set_read_timeout(Some(left))
            .map_err(|e| fail(None, &crate::sys::io_msg(&e)))?;
        let n = match sock.read(&mut buf) {
            Ok(0) => return Err(fail(None, "closed by the server")),
            Err(e) => return Err(fail(None, &crate::sys::io_msg(&e))),
            Ok(n) => n,
        };
        if std::mem::take(&mut first) && buf[..n].starts_with(b"HTTP/") {
            return Err(fail(Some(Refusal::PlainHttp), "a plain-HTTP answer"));
        }
        let mut rd = &buf[..n];
        while !rd.is_empty() {
            conn.read_tls(&mut rd)
                .map_err(|e| fail(None, &crate::sys::io_msg(&e)))?;
            if let Err(e) = conn.process_new_packets() {
                // The alert rustls queued for the server.
                let _ = conn.write_tls(&mut sock);
                let why = format!("TLS: {e}");
                return Err(match e {
                    rustls::Error::InvalidCertificate(c) => {
                        fail(Some(Refusal::Certificate(format!("{c:?}"))), &why)
                    }
                    rustls::Error::InvalidMessage(m) => {
                        fail(Some(Refusal::NotTls(format!("{m:?}"))), &why)
                    }
                    _ => fail(None, &why),
                });
            }
        }
    }
    Err(fail(None, "the handshake did not end"))
}

/// [`refused`] for a plan's target (https plans only): the one line to stop
/// the run with, before any worker starts.
pub(crate) fn refused_plan(plan: &crate::Plan) -> Option<String> {
    // The ALPN probe of the build was this check already.
    if let Some(checked) = &plan.tls_checked {
        return checked.clone();
    }
    let tls = plan.tls.as_ref()?;
    let limit = plan
        .connect_timeout
        .min(plan.timeout)
        .min(Duration::from_secs(5));
    refused(tls, plan.target.addr, limit).map(|r| r.line(&plan.target.display, &plan.target.host))
}
