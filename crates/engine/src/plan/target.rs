//! Target resolution: a URL as given becomes an address, a `Host` value, a
//! path, an origin, the URL's credentials and the TLS setup, once. The run's
//! target ([`super::Plan::build`]) and every scenario host
//! ([`crate::scenario`]) go through [`resolve`], so both accept, refuse and
//! word the same URLs the same way.

use super::redact::{redact_raw_url, redact_url};
use super::PlanError;
use base64::Engine as _;
use std::net::{SocketAddr, ToSocketAddrs};

/// The resolved target.
#[derive(Debug, Clone)]
pub struct Target {
    /// URL for display (password redacted).
    pub display: String,
    /// Host as written.
    pub host: String,
    /// Port.
    pub port: u16,
    /// The address connections go to.
    pub addr: SocketAddr,
    /// Path and query.
    pub path: String,
    /// `scheme://host:port` ([`crate::redirect::origin_key`]).
    pub origin: String,
}

/// A URL resolved for traffic.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The parsed URL.
    pub url: url::Url,
    /// Host, port, address, path and origin.
    pub target: Target,
    /// The `Host` header value (`host[:port]`, IPv6 in brackets; the port
    /// only when the URL gives one).
    pub host_header: String,
    /// The URL's `user:pass@`, base64-encoded for basic auth.
    pub basic_auth: Option<String>,
    /// TLS for an https URL.
    pub tls: Option<crate::tls::TlsSetup>,
}

/// Parses `raw` (`http://` assumed without a scheme), checks the scheme and
/// host, sets up TLS for https with `tls`, and resolves the address.
pub fn resolve(raw: &str, tls: &crate::tls::TlsArgs) -> Result<Resolved, PlanError> {
    let raw = raw.trim();
    let with_scheme = if raw.contains("://") {
        raw.to_string()
    } else {
        format!("http://{raw}")
    };
    let url = url::Url::parse(&with_scheme).map_err(|e| PlanError::BadUrl {
        url: redact_raw_url(raw),
        why: e.to_string(),
    })?;
    let display = redact_url(&url);
    match url.scheme() {
        "http" | "https" => {}
        s => {
            return Err(PlanError::Scheme {
                url: display,
                scheme: s.to_string(),
            })
        }
    }
    let host = match url.host() {
        Some(url::Host::Domain(d)) => d.to_string(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => {
            return Err(PlanError::BadUrl {
                url: display,
                why: "no host".into(),
            })
        }
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let tls = if url.scheme() == "https" {
        Some(crate::tls::setup(&host, tls).map_err(PlanError::Invalid)?)
    } else {
        None
    };
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| PlanError::Resolve {
            host: host.clone(),
            why: e.to_string(),
        })?
        .next()
        .ok_or_else(|| PlanError::Resolve {
            host: host.clone(),
            why: "no addresses".into(),
        })?;
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    // One `Host` rule for the run, scenario hosts and redirect hops.
    let host_header = crate::redirect::host_header(&url);
    let basic_auth = (!url.username().is_empty()).then(|| {
        let user = percent_decode(url.username());
        let pass = percent_decode(url.password().unwrap_or(""));
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    });
    Ok(Resolved {
        target: Target {
            display,
            host,
            port,
            addr,
            path,
            origin: crate::redirect::origin_key(&url),
        },
        url,
        host_header,
        basic_auth,
        tls,
    })
}

pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hexval(b[i + 1]), hexval(b[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hexval(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_resolution_for_every_url() {
        let tls = crate::tls::TlsArgs::default();
        let r = resolve("http://u:p%40ss@127.0.0.1:8080/a?b=1", &tls).unwrap();
        assert_eq!(r.target.path, "/a?b=1");
        assert_eq!(r.host_header, "127.0.0.1:8080");
        assert_eq!(r.target.origin, "http://127.0.0.1:8080");
        assert_eq!(r.target.addr.port(), 8080);
        // "u:p@ss"
        assert_eq!(r.basic_auth.as_deref(), Some("dTpwQHNz"));
        assert!(!r.target.display.contains("p%40ss"), "{}", r.target.display);
        let r = resolve("[::1]:9", &tls).unwrap();
        assert_eq!(
            (r.host_header.as_str(), r.target.host.as_str()),
            ("[::1]:9", "::1")
        );
        assert!(r.tls.is_none());
        assert!(resolve("https://127.0.0.1/", &tls).unwrap().tls.is_some());
        let e = resolve("ftp://u:secret@x/", &tls).unwrap_err().to_string();
        assert!(e.starts_with("unsupported scheme 'ftp'"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let e = resolve("http://", &tls).unwrap_err().to_string();
        assert!(e.starts_with("invalid URL"), "{e}");
    }
}
