//! Transport checks: the page over HTTPS with plain http redirecting to it
//! on the same host, and what a TLS handshake with the page's origin shows:
//! the protocol version, the certificate's days to expiry (warning under
//! 30, error under 7), whether the chain the server sends is complete,
//! OCSP stapling, session resumption on a second connection, and `Alt-Svc`
//! advertising HTTP/3 (information; checked and probed in `alt_svc.rs`). The probes ([`probe`]) connect on
//! their own, send no credentials, and are bounded by the time-outs given.

use super::{check, note, Check, Ctx, Fix, Severity};
use crate::http::{ClientOpts, TlsArgs};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use url::Url;

/// Certificate expiry: a warning under this many days (Mozilla, Let's Encrypt's renewal window).
pub const CERT_WARN_DAYS: i64 = 30;
/// Certificate expiry: an error under this many days.
pub const CERT_ERROR_DAYS: i64 = 7;

/// What `http://host[:port]/path` answered (the https page's plain-http twin).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct HttpProbe {
    /// The URL asked.
    pub url: String,
    /// Its status.
    pub status: Option<u16>,
    /// Its `Location`, for a redirect.
    pub location: Option<String>,
    /// Why nothing answered.
    pub error: Option<String>,
}

/// What TLS handshakes with the page's origin showed.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TlsProbe {
    /// `scheme://host:port`.
    pub origin: String,
    /// `TLSv1.3`, `TLSv1.2` (none: the handshake failed).
    pub version: Option<String>,
    /// Why the first handshake failed.
    pub error: Option<String>,
    /// Certificates the server sent (leaf first).
    pub certs_sent: usize,
    /// The chain verified against the trusted roots and `--cacert` (also under `--insecure`; none: not probed).
    pub verified: Option<bool>,
    /// Why verification failed.
    pub verify_error: Option<String>,
    /// The leaf certificate is self-signed (issuer = subject).
    pub self_signed: bool,
    /// Days until the leaf certificate expires (negative: expired).
    pub days_left: Option<i64>,
    /// The leaf certificate names an OCSP responder.
    pub ocsp_responder: bool,
    /// The server stapled an OCSP response.
    pub ocsp_stapled: bool,
    /// A second connection resumed the first one's session (none: the
    /// second connection failed).
    pub resumed: Option<bool>,
}

/// The audit's own probes of a loaded page: TLS (https pages) and the
/// plain-http redirect (https pages, `http_port` on the same host). `url`
/// is the URL that finally answered.
pub fn probe(url: &str, opts: &ClientOpts, tls: &TlsArgs, http_port: u16) -> super::Probes {
    let Ok(u) = Url::parse(url) else {
        return super::Probes::default();
    };
    if u.scheme() != "https" {
        return super::Probes::default();
    }
    let mut plain = u.clone();
    let _ = plain.set_scheme("http");
    let _ = plain.set_port(if http_port == 80 {
        None
    } else {
        Some(http_port)
    });
    super::Probes {
        tls: Some(probe_tls(&u, tls, opts.connect_timeout)),
        http: Some(probe_http(&plain, opts)),
        h3: Some(super::alt_svc::probe_h3(&u, opts)),
        dpr: None,
        browser: false,
        trace: None,
    }
}

/// One GET of `u` (no redirects followed, no credentials sent).
pub fn probe_http(u: &Url, opts: &ClientOpts) -> HttpProbe {
    let mut p = HttpProbe {
        url: crate::http::display_url(u),
        ..Default::default()
    };
    let mut o = opts.clone();
    o.headers.clear();
    // One small answer: the connect time-out bounds it too.
    o.timeout = o.timeout.min(o.connect_timeout);
    match crate::http::connect(u, &o, 1) {
        Ok((crate::http::Connected::H1(mut c), _)) => {
            match c.get(u, crate::http::Dest::Document, &[], &o) {
                Ok((r, _)) => {
                    p.status = Some(r.status);
                    p.location = r
                        .header("location")
                        .and_then(|l| u.join(l).ok())
                        .map(|l| crate::http::display_url(&l));
                }
                Err(e) => p.error = Some(e.to_string()),
            }
        }
        Ok(_) => p.error = Some("not HTTP/1.1".into()),
        Err(e) => p.error = Some(e.to_string()),
    }
    p
}

/// What the certificate verifier saw, kept for the report.
#[derive(Debug, Default)]
struct Seen {
    leaf: Vec<u8>,
    sent: usize,
    ocsp: bool,
    verdict: Option<Result<(), String>>,
}

/// Records the server's certificates and stapled OCSP response and the
/// real verifier's verdict, then lets the handshake go on (the probe sends
/// nothing secret; the page's own load verifies for real).
#[derive(Debug)]
struct Recorder {
    inner: Option<Arc<dyn ServerCertVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    seen: Mutex<Seen>,
}

impl ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verdict = self.inner.as_ref().map(|v| {
            v.verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        if let Ok(mut s) = self.seen.lock() {
            if s.leaf.is_empty() {
                *s = Seen {
                    leaf: end_entity.to_vec(),
                    sent: 1 + intermediates.len(),
                    ocsp: !ocsp.is_empty(),
                    verdict,
                };
            }
        }
        Ok(ServerCertVerified::assertion())
    }
    redline_engine::rustls_signature_checks!(provider.signature_verification_algorithms);
}

fn tcp(u: &Url, timeout: Duration) -> Result<TcpStream, String> {
    let host = u.host_str().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = u.port_or_known_default().unwrap_or(443);
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .take(8)
        .collect();
    let mut last = format!("no address for {host}");
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                let _ = s.set_read_timeout(Some(timeout));
                let _ = s.set_write_timeout(Some(timeout));
                return Ok(s);
            }
            Err(e) => last = format!("connect to {a}: {e}"),
        }
    }
    Err(last)
}

/// One TLS connection: handshake, then (TLS 1.3 sends session tickets after
/// the handshake) a request or a short read so the tickets are taken in.
fn one(
    u: &Url,
    cfg: &Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, String> {
    let host = u.host_str().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let name =
        ServerName::try_from(host.to_string()).map_err(|_| format!("bad server name {host}"))?;
    let sock = tcp(u, timeout)?;
    let conn = rustls::ClientConnection::new(cfg.clone(), name).map_err(|e| e.to_string())?;
    let mut s = rustls::StreamOwned::new(conn, sock);
    let deadline = Instant::now() + timeout;
    while s.conn.is_handshaking() {
        if Instant::now() > deadline {
            return Err("TLS handshake timed out".into());
        }
        s.conn
            .complete_io(&mut s.sock)
            .map_err(|e| format!("TLS handshake: {e}"))?;
    }
    Ok(s)
}

fn take_tickets(s: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>, u: &Url) {
    let h1 = s.conn.alpn_protocol() != Some(b"h2");
    if h1 {
        let host = u.host_str().unwrap_or("");
        let req = format!(
            "HEAD {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: redline-audit\r\nConnection: close\r\n\r\n",
            u.path()
        );
        let _ = s.write_all(req.as_bytes());
    }
    let _ = s.sock.set_read_timeout(Some(Duration::from_millis(300)));
    let end = Instant::now() + Duration::from_secs(2);
    let mut buf = [0u8; 16 * 1024];
    let mut got = 0usize;
    while Instant::now() < end && got < 1 << 20 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    s.conn.send_close_notify();
    let _ = s.conn.complete_io(&mut s.sock);
}

/// Two TLS connections to the page's origin: what the first negotiated and
/// the certificate it was shown; whether the second resumed the session.
pub fn probe_tls(u: &Url, args: &TlsArgs, timeout: Duration) -> TlsProbe {
    let mut p = TlsProbe {
        origin: crate::http::host_key(u),
        ..Default::default()
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Verified even under --insecure: the probe only reports (it sends
    // nothing secret), and whether the chain holds is what the check is for.
    let inner = match crate::http::verifier(args, provider.clone()) {
        Ok(v) => Some(v),
        Err(e) => {
            p.error = Some(e);
            return p;
        }
    };
    let rec = Arc::new(Recorder {
        inner,
        provider: provider.clone(),
        seen: Mutex::new(Seen::default()),
    });
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| {
            b.dangerous()
                .with_custom_certificate_verifier(rec.clone())
                .with_no_client_auth()
        });
    let mut cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            p.error = Some(e.to_string());
            return p;
        }
    };
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let cfg = Arc::new(cfg);
    match one(u, &cfg, timeout) {
        Ok(mut s) => {
            p.version = s.conn.protocol_version().map(|v| match v {
                rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_string(),
                rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_string(),
                other => format!("{other:?}"),
            });
            take_tickets(&mut s, u);
        }
        Err(e) => {
            p.error = Some(e);
            return p;
        }
    }
    if let Ok(seen) = rec.seen.lock() {
        p.certs_sent = seen.sent;
        p.ocsp_stapled = seen.ocsp;
        match &seen.verdict {
            Some(Ok(())) => p.verified = Some(true),
            Some(Err(e)) => {
                p.verified = Some(false);
                p.verify_error = Some(e.clone());
            }
            None => {}
        }
        if let Ok((_, cert)) = x509_parser::parse_x509_certificate(&seen.leaf) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            p.self_signed = cert.issuer() == cert.subject();
            p.days_left = Some((cert.validity().not_after.timestamp() - now).div_euclid(86_400));
            p.ocsp_responder = cert.extensions().iter().any(|e| {
                matches!(e.parsed_extension(),
                    x509_parser::extensions::ParsedExtension::AuthorityInfoAccess(a)
                        if a.iter().any(|d| d.access_method.to_id_string() == "1.3.6.1.5.5.7.48.1"))
            });
        }
    }
    p.resumed = one(u, &cfg, timeout).ok().map(|mut s| {
        let r = s.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        s.conn.send_close_notify();
        let _ = s.conn.complete_io(&mut s.sock);
        r
    });
    p
}

/// The transport checks.
pub(super) fn checks(cx: &Ctx) -> Vec<Check> {
    let mut v = vec![https(cx)];
    v.extend(tls_checks(cx));
    v.push(super::alt_svc::check_alt_svc(cx));
    v
}

/// The same host name exactly, ports aside (HSTS is per host name).
fn same_host(a: &str, b: &str) -> bool {
    match (Url::parse(a), Url::parse(b)) {
        (Ok(a), Ok(b)) => a.host_str() == b.host_str(),
        _ => false,
    }
}

pub(super) const FIX_HTTPS: Fix = Fix {
    apache: "# mod_rewrite, in the port-80 virtual host\nRewriteEngine On\nRewriteRule ^ https://%{HTTP_HOST}%{REQUEST_URI} [R=301,L]",
    nginx: "# the port-80 server block\nreturn 301 https://$host$request_uri;",
    lighttpd: "server.modules += ( \"mod_redirect\" )\n$HTTP[\"scheme\"] == \"http\" {\n    url.redirect = ( \"\" => \"https://${url.authority}${url.path}${qsa}\" )\n}",
};

fn https(cx: &Ctx) -> Check {
    const T: &str = "HTTPS, and http redirects to it on the same host";
    const TH: &str = "the page over https; http://host/ answers with a redirect to https://host/ (Mozilla Observatory)";
    if !cx.page.ok {
        return check(
            "https",
            T,
            TH,
            None,
            super::security_na(),
            Vec::new(),
            FIX_HTTPS,
        );
    }
    let loopback = Url::parse(&cx.page.url).is_ok_and(|u| match u.host() {
        Some(url::Host::Domain(d)) => d == "localhost" || d.ends_with(".localhost"),
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    });
    if cx.page.url.starts_with("http:") && loopback {
        return check(
            "https",
            T,
            TH,
            None,
            "not applicable: a loopback address over http (browsers treat it as secure; Lighthouse too)".into(),
            Vec::new(),
            FIX_HTTPS,
        );
    }
    if cx.page.url.starts_with("http:") {
        return check(
            "https",
            T,
            TH,
            Some(0),
            "the page is served over plain http".into(),
            vec![note(
                Severity::Error,
                format!(
                    "{} is plain http and does not redirect to https: anyone on the path can read and change it",
                    cx.page.url
                ),
            )],
            FIX_HTTPS,
        );
    }
    let Some(h) = &cx.probes.http else {
        return check(
            "https",
            T,
            TH,
            Some(100),
            "the page is served over https (plain http not probed)".into(),
            Vec::new(),
            FIX_HTTPS,
        );
    };
    let (score, sev, why) = match (h.status, &h.location, &h.error) {
        (_, _, Some(e)) => (
            100,
            Severity::Info,
            format!("{}: nothing answered ({e})", h.url),
        ),
        (Some(s), Some(l), _) if (300..400).contains(&s) && l.starts_with("https:") => {
            if same_host(l, &cx.page.url) {
                (100, Severity::Ok, format!("{} → {s} {l}", h.url))
            } else {
                (
                    70,
                    Severity::Warning,
                    format!(
                        "{} → {s} {l}: to another host, so the first hop cannot set HSTS for this one",
                        h.url
                    ),
                )
            }
        }
        (Some(s), l, _) => (
            40,
            Severity::Error,
            format!(
                "{} answered {s}{}: plain http is served, not redirected to https",
                h.url,
                l.as_deref().map(|l| format!(" → {l}")).unwrap_or_default()
            ),
        ),
        (None, _, None) => (100, Severity::Info, format!("{}: no answer", h.url)),
    };
    let f = if sev > Severity::Ok {
        vec![note(sev, why.clone())]
    } else {
        Vec::new()
    };
    check("https", T, TH, Some(score), why, f, FIX_HTTPS)
}

pub(super) const FIX_TLS_PROTO: Fix = Fix {
    apache: "# mod_ssl\nSSLProtocol -all +TLSv1.2 +TLSv1.3",
    nginx: "ssl_protocols TLSv1.2 TLSv1.3;",
    lighttpd: "# := replaces an existing ssl.openssl.ssl-conf-cmd: merge its other entries in\nssl.openssl.ssl-conf-cmd := ( \"MinProtocol\" => \"TLSv1.2\" )",
};

pub(super) const FIX_CERT: Fix = Fix {
    apache: "# renew the certificate (certbot renew, or your CA), then: apachectl graceful\nSSLCertificateFile /etc/ssl/certs/site-fullchain.pem\nSSLCertificateKeyFile /etc/ssl/private/site.key",
    nginx: "# renew the certificate (certbot renew, or your CA), then: nginx -s reload\nssl_certificate /etc/ssl/certs/site-fullchain.pem;\nssl_certificate_key /etc/ssl/private/site.key;",
    lighttpd: "# renew the certificate (certbot renew, or your CA), then restart lighttpd\nssl.pemfile := \"/etc/ssl/certs/site-fullchain.pem\"\nssl.privkey := \"/etc/ssl/private/site.key\"",
};

pub(super) const FIX_CHAIN: Fix = Fix {
    apache: "# send the intermediates too: the full chain file (leaf first), Apache 2.4.8+\nSSLCertificateFile /etc/ssl/certs/site-fullchain.pem",
    nginx: "# send the intermediates too: the full chain file (leaf first)\nssl_certificate /etc/ssl/certs/site-fullchain.pem;",
    lighttpd: "# send the intermediates too\nssl.ca-file := \"/etc/ssl/certs/site-chain.pem\"",
};

pub(super) const FIX_OCSP: Fix = Fix {
    apache: "# mod_ssl and mod_socache_shmcb, in the server config (not a virtual host);\n# ${APACHE_RUN_DIR} is Debian's (elsewhere e.g. shmcb:/run/httpd/ocsp(128000))\nSSLUseStapling On\nSSLStaplingCache \"shmcb:${APACHE_RUN_DIR}/ocsp(128000)\"",
    nginx: "ssl_stapling on;\nssl_stapling_verify on;\nresolver 127.0.0.53;",
    lighttpd: "# lighttpd staples a response fetched by cron (openssl ocsp … -respout)\nssl.stapling-file := \"/etc/lighttpd/ocsp.der\"",
};

pub(super) const FIX_RESUME: Fix = Fix {
    apache: "# mod_ssl and mod_socache_shmcb, in the server config (not a virtual host);\n# ${APACHE_RUN_DIR} is Debian's (elsewhere e.g. shmcb:/run/httpd/sslcache(512000))\nSSLSessionCache \"shmcb:${APACHE_RUN_DIR}/ssl_scache(512000)\"\nSSLSessionCacheTimeout 300",
    nginx: "ssl_session_cache shared:SSL:10m;\nssl_session_timeout 1d;\nssl_session_tickets on;",
    lighttpd: "# session tickets are on by default (lighttpd 1.4.56+); do not turn them off\n# (:= replaces an existing ssl.openssl.ssl-conf-cmd: merge its other entries in)\nssl.openssl.ssl-conf-cmd := ( \"Options\" => \"SessionTicket\" )",
};

fn tls_checks(cx: &Ctx) -> Vec<Check> {
    const TP: &str = "TLS protocol version";
    const TPT: &str =
        "TLS 1.3 or 1.2 negotiated (Mozilla intermediate configuration); 1.3 saves a round trip";
    const TC: &str = "TLS certificate valid and not about to expire";
    const TCT: &str =
        "a warning under 30 days to expiry, an error under 7 (and when verification fails)";
    const TH: &str = "TLS certificate chain complete";
    const THT: &str = "the server sends the intermediates: the chain verifies from what it sent";
    const TO: &str = "OCSP stapling";
    const TOT: &str =
        "a stapled OCSP response when the certificate names an OCSP responder (a note)";
    const TR: &str = "TLS session resumption";
    const TRT: &str =
        "a second connection resumes the first one's session (tickets or a session cache)";
    let na = |id, t, th, why: &str, fix| check(id, t, th, None, why.to_string(), Vec::new(), fix);
    let Some(p) = &cx.probes.tls else {
        let why = if cx.page.url.starts_with("https:") {
            "not applicable: TLS not probed"
        } else {
            "not applicable: the page is not https"
        };
        return vec![
            na("tls-protocol", TP, TPT, why, FIX_TLS_PROTO),
            na("tls-certificate", TC, TCT, why, FIX_CERT),
            na("tls-chain", TH, THT, why, FIX_CHAIN),
            na("ocsp-stapling", TO, TOT, why, FIX_OCSP),
            na("tls-resumption", TR, TRT, why, FIX_RESUME),
        ];
    };
    let origin = p.origin.clone();
    let mut out = Vec::new();
    // Protocol.
    let (score, sev, why) = match (&p.version, &p.error) {
        (Some(v), _) if v == "TLSv1.3" => (100, Severity::Ok, format!("{origin}: {v}")),
        (Some(v), _) => (
            90,
            Severity::Info,
            format!("{origin}: {v} (TLS 1.3 would save a round trip per new connection)"),
        ),
        (None, Some(e)) => (
            0,
            Severity::Error,
            format!("{origin}: no TLS 1.2 or 1.3 handshake: {e}"),
        ),
        (None, None) => (0, Severity::Error, format!("{origin}: no handshake")),
    };
    let f = if sev > Severity::Ok {
        vec![note(sev, why.clone())]
    } else {
        Vec::new()
    };
    out.push(check(
        "tls-protocol",
        TP,
        TPT,
        Some(score),
        why,
        f,
        FIX_TLS_PROTO,
    ));
    if p.version.is_none() {
        let why = "not applicable: no TLS handshake";
        out.extend([
            na("tls-certificate", TC, TCT, why, FIX_CERT),
            na("tls-chain", TH, THT, why, FIX_CHAIN),
            na("ocsp-stapling", TO, TOT, why, FIX_OCSP),
            na("tls-resumption", TR, TRT, why, FIX_RESUME),
        ]);
        return out;
    }
    // Certificate: expiry, and verification failures other than the chain.
    let chain_err = p
        .verify_error
        .as_deref()
        .is_some_and(|e| e.contains("UnknownIssuer"));
    let (score, sev, why) = match (p.days_left, &p.verify_error) {
        (_, Some(e)) if !chain_err => (
            0,
            Severity::Error,
            format!("the certificate does not verify: {e}"),
        ),
        (Some(d), _) if d < 0 => (0, Severity::Error, format!("expired {} days ago", -d)),
        (Some(d), _) if d < CERT_ERROR_DAYS => {
            (40, Severity::Error, format!("expires in {d} days"))
        }
        (Some(d), _) if d < CERT_WARN_DAYS => {
            (70, Severity::Warning, format!("expires in {d} days"))
        }
        (Some(d), _) => (100, Severity::Ok, format!("expires in {d} days")),
        (None, _) => (100, Severity::Info, "expiry not readable".to_string()),
    };
    let f = if sev > Severity::Ok {
        vec![note(sev, format!("{origin}: {why}"))]
    } else {
        Vec::new()
    };
    out.push(check(
        "tls-certificate",
        TC,
        TCT,
        Some(score),
        why,
        f,
        FIX_CERT,
    ));
    // Chain.
    out.push(match p.verified {
        None => na(
            "tls-chain",
            TH,
            THT,
            "not applicable: the chain was not checked",
            FIX_CHAIN,
        ),
        Some(true) => check(
            "tls-chain",
            TH,
            THT,
            Some(100),
            format!("{} certificate(s) sent; the chain verifies", p.certs_sent),
            Vec::new(),
            FIX_CHAIN,
        ),
        Some(false) if chain_err => {
            let why = if p.self_signed {
                "a self-signed certificate: no browser trusts it".to_string()
            } else if p.certs_sent <= 1 {
                "the server sends only its own certificate, no intermediate: the chain does not reach a trusted root (browsers that have not cached the intermediate refuse the site)".to_string()
            } else {
                format!(
                    "{} certificates sent, but the chain does not reach a trusted root (an intermediate missing, or an unknown CA)",
                    p.certs_sent
                )
            };
            check(
                "tls-chain",
                TH,
                THT,
                Some(40),
                why.clone(),
                vec![note(Severity::Error, format!("{origin}: {why}"))],
                FIX_CHAIN,
            )
        }
        Some(false) => na(
            "tls-chain",
            TH,
            THT,
            "not applicable: the certificate itself does not verify (see tls-certificate)",
            FIX_CHAIN,
        ),
    });
    // OCSP stapling.
    out.push(if p.ocsp_stapled {
        check(
            "ocsp-stapling",
            TO,
            TOT,
            Some(100),
            "an OCSP response is stapled".into(),
            Vec::new(),
            FIX_OCSP,
        )
    } else if p.ocsp_responder {
        let why = "the certificate names an OCSP responder, but no response is stapled: browsers may ask the CA themselves (slower, and it tells the CA who visits)";
        check(
            "ocsp-stapling",
            TO,
            TOT,
            Some(85),
            why.into(),
            vec![note(Severity::Info, format!("{origin}: {why}"))],
            FIX_OCSP,
        )
    } else {
        na(
            "ocsp-stapling",
            TO,
            TOT,
            "not applicable: the certificate names no OCSP responder",
            FIX_OCSP,
        )
    });
    // Resumption.
    out.push(match p.resumed {
        Some(true) => check(
            "tls-resumption",
            TR,
            TRT,
            Some(100),
            "a second connection resumed the session".into(),
            Vec::new(),
            FIX_RESUME,
        ),
        Some(false) => {
            let why = "a second connection did a full handshake: no session ticket or session cache, every new connection pays the whole handshake";
            check(
                "tls-resumption",
                TR,
                TRT,
                Some(70),
                why.into(),
                vec![note(Severity::Warning, format!("{origin}: {why}"))],
                FIX_RESUME,
            )
        }
        None => na(
            "tls-resumption",
            TR,
            TRT,
            "not applicable: the second connection failed",
            FIX_RESUME,
        ),
    });
    out
}
