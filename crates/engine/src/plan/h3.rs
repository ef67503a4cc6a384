//! `--http3`'s endpoint (issue 32, RFC 7838): before the load, one request
//! over TCP with the run's TLS options reads the origin's `Alt-Svc`; its
//! `h3` alternative is the UDP endpoint QUIC goes to (with the origin's TLS
//! name, §2.1), else the URL's own port. Also turns an `Alt-Svc` value a run
//! saw into the record's [`AltSvcSeen`] (parsed by [`crate::altsvc`]; a bad
//! value is kept with the parser's message and ignored, never fatal).

use crate::altsvc::{self, AltSvc};
use crate::tls::{Refusal, TlsSetup};
use redline_stats::{AltSvcSeen, Http3Endpoint};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Where a `--http3` run's QUIC connections go.
#[derive(Debug, Clone)]
pub struct H3Route {
    /// The UDP address.
    pub addr: SocketAddr,
    /// The same for the record, with the reason.
    pub endpoint: Http3Endpoint,
    /// The probe's `Alt-Svc`, when the answer had one.
    pub alt_svc: Option<AltSvcSeen>,
}

/// The most bytes of a response head the probe reads.
const MAX_HEAD: usize = 64 * 1024;

/// An `Alt-Svc` value as the record keeps it.
pub fn seen(value: String) -> AltSvcSeen {
    let mut s = AltSvcSeen {
        value,
        ..AltSvcSeen::default()
    };
    match altsvc::parse(&s.value) {
        Ok(v) => {
            if let Some(a) = v.h3() {
                s.h3 = Some(format!("{}:{}", a.host.as_deref().unwrap_or(""), a.port));
                s.max_age_s = Some(a.max_age());
            }
        }
        Err(e) => s.error = Some(e.to_string()),
    }
    s
}

/// The route of an `--http3` run to `origin` (the URL's host `host` at
/// `addr`): the `h3` alternative of the `Alt-Svc` that `probe` read (or why
/// it read none), else the URL's port.
pub fn route(addr: SocketAddr, probe: Result<Option<String>, String>) -> H3Route {
    let url = |why: String| H3Route {
        addr,
        endpoint: Http3Endpoint {
            address: addr.to_string(),
            source: "url".into(),
            why,
        },
        alt_svc: None,
    };
    let value = match probe {
        Err(why) => return url(format!("the URL's port: {why}")),
        Ok(None) => {
            return url("the URL's port: the answer over TCP carried no Alt-Svc".into());
        }
        Ok(Some(v)) => v,
    };
    let seen = seen(value);
    let mut r = match altsvc::parse(&seen.value) {
        Err(e) => url(format!("the URL's port: {e} (ignored)")),
        Ok(AltSvc::Clear) => url("the URL's port: Alt-Svc: clear".into()),
        Ok(v) => match v.h3() {
            None => url("the URL's port: Alt-Svc names no h3 alternative".into()),
            Some(a) => {
                let host = a.host.as_deref().map(|h| h.trim_matches(['[', ']']));
                let to = match host {
                    None => Some(SocketAddr::new(addr.ip(), a.port)),
                    Some(h) => (h, a.port)
                        .to_socket_addrs()
                        .ok()
                        .and_then(|mut i| i.next()),
                };
                let named = format!("h3=\"{}:{}\"", a.host.as_deref().unwrap_or(""), a.port);
                match to {
                    Some(to) => H3Route {
                        addr: to,
                        endpoint: Http3Endpoint {
                            address: to.to_string(),
                            source: "alt-svc".into(),
                            why: format!("the origin's Alt-Svc {named}, ma={}", a.max_age()),
                        },
                        alt_svc: None,
                    },
                    None => url(format!(
                        "the URL's port: the Alt-Svc alternative {named} does not resolve"
                    )),
                }
            }
        },
    };
    r.alt_svc = Some(seen);
    r
}

/// One GET of `path` over TCP and TLS (`tls`: the run's options, ALPN
/// `http/1.1`) to `addr`, within `limit`: the answer's `Alt-Svc` (several
/// lines joined), `None` without one, or why no answer came; and its TLS
/// handshake's verdict as [`crate::tls::refused`] gives it (the run's
/// certificate check, so a `--http3` run makes one TCP connection before
/// its load, not two).
pub(crate) fn probe(
    tls: &TlsSetup,
    addr: SocketAddr,
    host_header: &str,
    path: &str,
    limit: Duration,
) -> (Result<Option<String>, String>, Option<Refusal>) {
    let deadline = Instant::now() + limit;
    match crate::tls::connect(tls, addr, limit, vec![b"http/1.1".to_vec()]) {
        Ok((conn, sock)) => (
            get_alt_svc(
                rustls::StreamOwned::new(conn, sock),
                host_header,
                path,
                deadline,
            ),
            None,
        ),
        Err(f) => (Err(format!("no answer over TCP ({})", f.why)), f.refusal),
    }
}

/// The GET of [`probe`] on its TLS connection, until `deadline`.
fn get_alt_svc(
    mut s: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    host_header: &str,
    path: &str,
    deadline: Instant,
) -> Result<Option<String>, String> {
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: redline\r\nConnection: close\r\n\r\n"
    );
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| "no answer over TCP in time".to_string())
    };
    s.sock
        .set_write_timeout(Some(left()?))
        .and_then(|()| s.write_all(req.as_bytes()))
        .and_then(|()| s.flush())
        .map_err(|e| format!("no answer over TCP ({})", crate::sys::io_msg(&e)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    // Bounded: each pass reads at least one byte, the head at most MAX_HEAD.
    for _ in 0..MAX_HEAD {
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.len() > MAX_HEAD {
            break;
        }
        s.sock
            .set_read_timeout(Some(left()?))
            .map_err(|e| e.to_string())?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("no answer over TCP ({})", crate::sys::io_msg(&e))),
        }
    }
    s.conn.send_close_notify();
    let _ = s.flush();
    let mut alt = None;
    let parsed = crate::head::parse(&head, 100, |name, value| {
        if crate::head::name_is(name, b"alt-svc") {
            crate::head::join_kept(&mut alt, &String::from_utf8_lossy(value));
        }
        Ok::<(), ()>(())
    });
    match parsed {
        Ok(Some(_)) => Ok(alt),
        _ => Err("the answer over TCP was not an HTTP/1.1 response".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> SocketAddr {
        "127.0.0.1:8443".parse().unwrap()
    }

    #[test]
    fn the_h3_alternative_is_the_endpoint() {
        let r = route(origin(), Ok(Some("h3=\":9443\"; ma=60, h2=\":1\"".into())));
        assert_eq!(r.addr, "127.0.0.1:9443".parse().unwrap());
        assert_eq!(r.endpoint.source, "alt-svc");
        assert!(
            r.endpoint.why.contains("h3=\":9443\", ma=60"),
            "{:?}",
            r.endpoint
        );
        let seen = r.alt_svc.unwrap();
        assert_eq!(
            (seen.h3.as_deref(), seen.max_age_s),
            (Some(":9443"), Some(60))
        );
        // A host names another address (resolved; an IP literal here).
        let r = route(origin(), Ok(Some("h3=\"127.0.0.2:443\"".into())));
        assert_eq!(r.addr, "127.0.0.2:443".parse().unwrap());
        let r = route(origin(), Ok(Some("h3=\"[::1]:443\"".into())));
        assert_eq!(r.addr, "[::1]:443".parse().unwrap());
    }

    #[test]
    fn without_an_h3_alternative_the_url_port_and_why() {
        for (probe, why) in [
            (Err("no answer over TCP (refused)".to_string()), "refused"),
            (Ok(None), "no Alt-Svc"),
            (Ok(Some("clear".into())), "clear"),
            (Ok(Some("h2=\":443\"".into())), "no h3"),
            (Ok(Some("h3=:443".into())), "must be quoted"),
            (
                Ok(Some("h3=\"no.such.host.invalid:443\"".into())),
                "does not resolve",
            ),
        ] {
            let r = route(origin(), probe.clone());
            assert_eq!(r.addr, origin(), "{probe:?}");
            assert_eq!(r.endpoint.source, "url");
            assert!(
                r.endpoint.why.contains(why),
                "{probe:?}: {}",
                r.endpoint.why
            );
        }
        let bad = route(origin(), Ok(Some("h3=:443".into())));
        assert!(bad
            .alt_svc
            .unwrap()
            .error
            .unwrap()
            .starts_with("invalid Alt-Svc"));
    }

    #[test]
    fn seen_keeps_the_value_and_what_it_offers() {
        let s = seen("h3=\":443\"; ma=2592000".into());
        assert_eq!(
            (s.h3.as_deref(), s.max_age_s, s.error),
            (Some(":443"), Some(2_592_000), None)
        );
        let s = seen("h3-29=\":443\"".into());
        assert_eq!((s.h3, s.error), (None, None));
    }
}
