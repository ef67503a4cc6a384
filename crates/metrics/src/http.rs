//! The small HTTP/1.1 pieces the exporters need: a POST client for the push
//! URLs (plain or rustls with the webpki roots; user information in the URL
//! becomes Basic authentication and is never shown), and the scrape
//! endpoint's listener. Every read and write has a time-out and a size bound.

use base64::Engine as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// Time-out of a push's connect, write and read.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// A push URL, checked once.
#[derive(Clone)]
pub struct PushUrl {
    https: bool,
    host: String,
    port: u16,
    path: String,
    auth: Option<String>,
    shown: String,
}

impl std::fmt::Debug for PushUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl PushUrl {
    /// Parses an http(s) URL (Err: one line, without the URL's secrets).
    pub fn parse(s: &str) -> Result<PushUrl, String> {
        let u = url::Url::parse(s)
            .map_err(|e| format!("not a URL ({e}); give http://HOST:PORT/PATH"))?;
        let https = match u.scheme() {
            "http" => false,
            "https" => true,
            other => return Err(format!("scheme {other:?} is not http or https")),
        };
        let host = match u.host() {
            Some(url::Host::Domain(d)) => d.to_string(),
            Some(url::Host::Ipv4(a)) => a.to_string(),
            Some(url::Host::Ipv6(a)) => a.to_string(),
            None => return Err("the URL has no host".into()),
        };
        let port = u.port_or_known_default().unwrap_or(80);
        let mut path = u.path().to_string();
        if let Some(q) = u.query() {
            path.push('?');
            path.push_str(q);
        }
        let auth = (!u.username().is_empty() || u.password().is_some()).then(|| {
            let user = percent_decode(u.username());
            let pass = percent_decode(u.password().unwrap_or(""));
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
        });
        Ok(PushUrl {
            https,
            host,
            port,
            path,
            auth,
            shown: crate::model::target_label(s),
        })
    }

    /// The URL as shown in messages: no user information, no query.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// POSTs `body`; Ok on a 2xx answer, else one line saying why.
    pub fn post(
        &self,
        content_type: &str,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> Result<(), String> {
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {}: {e}", self.host))?
            .next()
            .ok_or_else(|| format!("cannot resolve {}", self.host))?;
        let tcp = TcpStream::connect_timeout(&addr, PUSH_TIMEOUT).map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(PUSH_TIMEOUT)).ok();
        tcp.set_write_timeout(Some(PUSH_TIMEOUT)).ok();
        let _ = tcp.set_nodelay(true);
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {host}:{}\r\nUser-Agent: redline/{}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.path,
            self.port,
            env!("CARGO_PKG_VERSION"),
            body.len()
        );
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(a) = &self.auth {
            head.push_str(&format!("Authorization: Basic {a}\r\n"));
        }
        head.push_str("\r\n");
        let answer = if self.https {
            let cfg = tls_config();
            let name = rustls::pki_types::ServerName::try_from(self.host.clone())
                .map_err(|e| format!("bad TLS name: {e}"))?;
            let conn = rustls::ClientConnection::new(cfg, name).map_err(|e| e.to_string())?;
            let mut s = rustls::StreamOwned::new(conn, tcp);
            exchange(&mut s, head.as_bytes(), body)?
        } else {
            let mut s = tcp;
            exchange(&mut s, head.as_bytes(), body)?
        };
        let text = String::from_utf8_lossy(&answer);
        let status_line = text.lines().next().unwrap_or("");
        let code: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| "not an HTTP answer".to_string())?;
        if (200..300).contains(&code) {
            return Ok(());
        }
        let body_line = text
            .split("\r\n\r\n")
            .nth(1)
            .and_then(|b| b.lines().find(|l| !l.trim().is_empty()))
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect::<String>();
        Err(format!("HTTP {code} {}", body_line.trim()))
    }
}

fn tls_config() -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth());
    Arc::new(cfg.unwrap_or_else(|_| {
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3 is always supported by ring")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
    }))
}

/// Writes head and body, reads the answer (at most 64 KiB) until the server closes.
fn exchange<S: Read + Write>(s: &mut S, head: &[u8], body: &[u8]) -> Result<Vec<u8>, String> {
    s.write_all(head).map_err(|e| e.to_string())?;
    s.write_all(body).map_err(|e| e.to_string())?;
    s.flush().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while out.len() < 64 * 1024 {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // A server that answered and then reset or timed out: the answer counts.
            Err(_) if !out.is_empty() => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(out)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What the scrape endpoint got: the path and the `Accept` header.
pub struct Request {
    /// The request target.
    pub path: String,
    /// The Accept header.
    pub accept: Option<String>,
}

/// How long a scrape client has to send its whole request head (not per
/// read: a client sending a byte a second is cut off too).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// Reads one request head from `s` (at most 16 KiB, [`HEAD_TIMEOUT`] for the
/// whole head), None if broken, slow or too long.
pub fn read_request(s: &mut TcpStream) -> Option<Request> {
    let deadline = std::time::Instant::now() + HEAD_TIMEOUT;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if buf.len() > 16 * 1024 || left.is_zero() {
            return None;
        }
        s.set_read_timeout(Some(left)).ok()?;
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines = text.split("\r\n");
    let first = lines.next()?;
    let mut parts = first.split_whitespace();
    let method = parts.next()?;
    if method != "GET" && method != "HEAD" {
        return Some(Request {
            path: String::new(),
            accept: None,
        });
    }
    let path = parts.next()?.to_string();
    let accept = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("accept"))
        .map(|(_, v)| v.trim().to_string());
    Some(Request { path, accept })
}

/// Writes a whole answer and closes.
pub fn respond(s: &mut TcpStream, status: &str, content_type: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
    let _ = s.flush();
}

/// Binds the scrape address (Err: one line).
pub fn bind(addr: &str) -> Result<TcpListener, String> {
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr:?} is not HOST:PORT ({e})"))?
        .collect();
    let first = addrs
        .first()
        .ok_or_else(|| format!("{addr:?} resolves to no address"))?;
    TcpListener::bind(first).map_err(|e| format!("cannot listen on {first}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-shot server: answers `answer` and hands back what it read.
    fn server(answer: &'static str) -> (u16, std::thread::JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            // Head plus the 5-byte body the test sends.
            while !got.windows(4).any(|w| w == b"\r\n\r\n") || !got.ends_with(b"hello") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            s.write_all(answer.as_bytes()).unwrap();
            got
        });
        (port, h)
    }

    #[test]
    fn post_sends_basic_auth_and_reads_the_status() {
        let (port, h) = server("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
        let u = PushUrl::parse(&format!("http://al%40ice:pw@127.0.0.1:{port}/w?x=1")).unwrap();
        u.post(
            "application/x-protobuf",
            &[("Content-Encoding", "snappy")],
            b"hello",
        )
        .unwrap();
        let got = String::from_utf8(h.join().unwrap()).unwrap();
        assert!(got.starts_with("POST /w?x=1 HTTP/1.1\r\n"), "{got}");
        let auth = base64::engine::general_purpose::STANDARD.encode("al@ice:pw");
        assert!(
            got.contains(&format!("Authorization: Basic {auth}\r\n")),
            "{got}"
        );
        assert!(got.contains("Content-Encoding: snappy\r\n"), "{got}");
        assert!(got.ends_with("\r\n\r\nhello"), "{got}");

        let (port, h) =
            server("HTTP/1.1 400 Bad Request\r\nContent-Length: 14\r\n\r\nout of order\r\n");
        let u = PushUrl::parse(&format!("http://u:pw@127.0.0.1:{port}/w")).unwrap();
        let e = u.post("text/plain", &[], b"hello").unwrap_err();
        h.join().unwrap();
        assert_eq!(e, "HTTP 400 out of order");
        // Nothing listening: an error, no panic, no secret.
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = dead.local_addr().unwrap().port();
        drop(dead);
        let u = PushUrl::parse(&format!("http://u:pw@127.0.0.1:{port}/w")).unwrap();
        let e = u.post("text/plain", &[], b"hello").unwrap_err();
        assert!(!e.contains("pw"), "{e}");
    }

    #[test]
    fn push_url_keeps_credentials_out_of_sight() {
        let u = PushUrl::parse("https://user:p%40ss@example.com/api/v1/write?tenant=x").unwrap();
        assert_eq!(u.shown(), "https://example.com/api/v1/write");
        assert_eq!(format!("{u:?}"), "https://example.com/api/v1/write");
        assert_eq!(
            u.auth.as_deref(),
            Some(
                base64::engine::general_purpose::STANDARD
                    .encode("user:p@ss")
                    .as_str()
            )
        );
        assert_eq!(u.path, "/api/v1/write?tenant=x");
        assert!(PushUrl::parse("ftp://x/").is_err());
        assert!(PushUrl::parse("nonsense").is_err());
    }
}
