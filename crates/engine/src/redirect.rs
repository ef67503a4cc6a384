//! `-L/--follow-redirects` for the HTTP/1 worker and the HTTP/2 one: origins
//! (resolved once and cached), and the request of each hop, rewritten from the
//! original request's spec ([`hop_spec`]: the HTTP/1 worker encodes it, an
//! HTTP/2 driver can send it without parsing; the core's `follow` rewrites
//! bytes with [`hop_request`] and re-parses them).
//!
//! Rules (as curl and browsers): 303, and 301/302 after a POST, become a GET
//! without body; 307 and 308 keep method and body. Credentials —
//! `Authorization`, `Proxy-Authorization`, `Cookie` and `X-Api-Key` headers,
//! whether from `-H`, `--basic-auth` or a URL's `user:pass@` — go only to the
//! origin (scheme, host and port) of the original request; scenario cookie-jar
//! cookies go to the hosts that set them (or their `Domain`).

use crate::plan::RequestSpec;
use crate::tls::{TlsArgs, TlsSetup};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// The default `--max-redirs` (curl's is 50; browsers stop near 20).
pub const DEFAULT_MAX_REDIRS: u32 = 10;

/// Most origins a run keeps resolved (a server inventing hosts cannot grow it).
const MAX_ORIGINS: usize = 256;

/// Headers that carry credentials: never sent to another origin.
pub fn is_credential(name: &str) -> bool {
    let n = name.trim();
    n.eq_ignore_ascii_case("authorization")
        || n.eq_ignore_ascii_case("proxy-authorization")
        || n.eq_ignore_ascii_case("cookie")
        || n.eq_ignore_ascii_case("x-api-key")
}

/// `scheme://host:port` (port always written): two URLs are the same origin
/// when their keys are equal.
pub fn origin_key(u: &url::Url) -> String {
    format!(
        "{}://{}:{}",
        u.scheme(),
        u.host_str().unwrap_or(""),
        u.port_or_known_default().unwrap_or(0)
    )
}

/// The `Host` header for a URL (port only when not the scheme's default).
pub fn host_header(u: &url::Url) -> String {
    match u.port() {
        Some(p) => format!("{}:{p}", u.host_str().unwrap_or("")),
        None => u.host_str().unwrap_or("").to_string(),
    }
}

/// A place a redirect leads to, resolved.
#[derive(Debug)]
pub struct Origin {
    /// [`origin_key`].
    pub key: String,
    /// The `Host` header.
    pub host_header: String,
    /// The address connections go to.
    pub addr: SocketAddr,
    /// TLS for https.
    pub tls: Option<TlsSetup>,
}

/// What following redirects needs: the limit, TLS options for new https
/// origins, and the origins resolved so far (shared by the workers; touched
/// only on a hop to another origin).
#[derive(Debug)]
pub struct Follow {
    /// `--max-redirs`.
    pub max: u32,
    tls: TlsArgs,
    origins: Mutex<HashMap<String, Result<Arc<Origin>, OriginError>>>,
}

/// Why a redirect target cannot be used: `resolve` (DNS) or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginError {
    /// The host did not resolve (else: a TLS setup problem).
    pub resolve: bool,
    /// What went wrong (no secret: URLs carry no credentials here).
    pub message: String,
}

impl Follow {
    /// Follows up to `max` redirects per request.
    pub fn new(max: u32, tls: TlsArgs) -> Follow {
        Follow {
            max,
            tls,
            origins: Mutex::new(HashMap::new()),
        }
    }

    /// The origin of `u`, resolved once per run (the first caller resolves,
    /// blocking; later ones get the cached answer, failures included).
    pub fn origin(&self, u: &url::Url) -> Result<Arc<Origin>, OriginError> {
        let key = origin_key(u);
        let mut map = self.origins.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = map.get(&key) {
            return r.clone();
        }
        let r = self
            .resolve(u, &key)
            .map_err(|(resolve, message)| OriginError { resolve, message });
        if map.len() < MAX_ORIGINS {
            map.insert(key, r.clone());
        }
        r
    }

    /// Resolves a hop's origin with the plan's own target resolution
    /// ([`crate::plan::target::resolve`]: the same host, `Host` and TLS rules).
    fn resolve(&self, u: &url::Url, key: &str) -> Result<Arc<Origin>, (bool, String)> {
        use crate::plan::PlanError;
        let r = crate::plan::target::resolve(u.as_str(), &self.tls).map_err(|e| match e {
            PlanError::Resolve { host, why } => (
                true,
                format!("cannot resolve redirect host '{host}': {why}"),
            ),
            PlanError::BadUrl { why, .. } if why == "no host" => {
                (false, "redirect to a URL without a host".into())
            }
            e => (false, e.to_string()),
        })?;
        Ok(Arc::new(Origin {
            key: key.to_string(),
            host_header: r.host_header,
            addr: r.target.addr,
            tls: r.tls,
        }))
    }
}

/// Which `Cookie` header a hop carries.
#[derive(Debug, Clone, Copy)]
pub enum Cookies<'a> {
    /// The request's own `Cookie` header (from `-H` or the scenario), a credential.
    Given,
    /// A scenario cookie jar: these cookies (already matched to the new host),
    /// in place of the original request's jar line.
    Jar(&'a str),
}

/// The status codes followed.
pub fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// The request for a hop to `to` after a `status` redirect, as a spec
/// rewritten from the original request's spec (no bytes parsed): the HTTP/1
/// worker encodes it with [`RequestSpec::encode_h1`], an HTTP/2 driver with
/// [`RequestSpec::to_h2`]. `same_origin`: `to` is the original request's
/// origin, so its credentials and `Host` header go along. `was_get`: an
/// earlier hop already made it a GET without body (a later 307/308 keeps
/// that). Returns the spec and whether the hop is such a GET. Encoded for
/// HTTP/1 it is byte for byte what [`hop_request`] makes of the original's
/// bytes, but for the place of a `Connection` line (last here, before a
/// jar's `Cookie` there).
pub fn hop_spec(
    orig: &RequestSpec,
    status: u16,
    to: &url::Url,
    same_origin: bool,
    was_get: bool,
    cookies: Cookies<'_>,
) -> (RequestSpec, bool) {
    let method = orig.method.as_str();
    let to_get = (was_get
        || match status {
            303 => method != "GET",
            301 | 302 => method == "POST",
            _ => false,
        })
        && method != "HEAD";
    let mut path = to.path().to_string();
    if let Some(q) = to.query() {
        path.push('?');
        path.push_str(q);
    }
    let mut headers = Vec::with_capacity(orig.headers.len() + 2);
    let mut authority = None;
    for (k, v) in &orig.headers {
        let n = k.trim();
        if n.eq_ignore_ascii_case("host") {
            if same_origin {
                headers.push((k.clone(), v.clone()));
            } else {
                headers.push(("Host".to_string(), host_header(to)));
            }
            authority.get_or_insert_with(|| headers[headers.len() - 1].1.clone());
            continue;
        }
        if to_get
            && (n.eq_ignore_ascii_case("content-length")
                || n.eq_ignore_ascii_case("content-type")
                || n.eq_ignore_ascii_case("transfer-encoding"))
        {
            continue;
        }
        if n.eq_ignore_ascii_case("cookie") {
            match cookies {
                Cookies::Given if same_origin => {}
                _ => continue,
            }
        } else if is_credential(n) && !same_origin {
            continue;
        }
        headers.push((k.clone(), v.clone()));
    }
    let authority = match authority {
        Some(a) => a,
        None => {
            let h = host_header(to);
            headers.push(("Host".to_string(), h.clone()));
            h
        }
    };
    if let Cookies::Jar(c) = cookies {
        if !c.is_empty() {
            headers.push(("Cookie".to_string(), c.to_string()));
        }
    }
    let spec = RequestSpec {
        method: if to_get {
            "GET".into()
        } else {
            orig.method.clone()
        },
        path,
        authority,
        headers,
        body: if to_get {
            Vec::new()
        } else {
            orig.body.clone()
        },
        http10: orig.http10,
        chunked: orig.chunked && !to_get,
    };
    (spec, to_get)
}

/// The former byte-level hop rewriter, kept as the reference the spec-level
/// [`hop_spec`] is tested against (no driver uses it).
///
/// The request for a hop to `to` after a `status` redirect, rewritten from the
/// bytes of the original request (which redline built, so they are
/// well-formed). `same_origin`: `to` is the original request's origin, so its
/// credentials and `Host` header go along. `was_get`: an earlier hop already
/// made it a GET without body (a later 307/308 keeps that). Returns the bytes
/// and whether the hop is such a GET; `None` when `orig` is not a request.
#[cfg(test)]
pub fn hop_request(
    orig: &[u8],
    status: u16,
    to: &url::Url,
    same_origin: bool,
    was_get: bool,
    cookies: Cookies<'_>,
) -> Option<(Vec<u8>, bool)> {
    let end = orig.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&orig[..end]).ok()?;
    let body = &orig[end + 4..];
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?;
    let _path = first.next()?;
    let version = first.next()?;
    let to_get = (was_get
        || match status {
            303 => method != "GET",
            301 | 302 => method == "POST",
            _ => false,
        })
        && method != "HEAD";
    let method = if to_get { "GET" } else { method };
    let mut path = to.path().to_string();
    if let Some(q) = to.query() {
        path.push('?');
        path.push_str(q);
    }
    let mut out = Vec::with_capacity(orig.len() + 32);
    out.extend_from_slice(format!("{method} {path} {version}\r\n").as_bytes());
    let mut wrote_host = false;
    for line in lines {
        let Some((name, _)) = line.split_once(':') else {
            continue;
        };
        let n = name.trim();
        if n.eq_ignore_ascii_case("host") {
            if same_origin {
                out.extend_from_slice(line.as_bytes());
            } else {
                out.extend_from_slice(format!("Host: {}", host_header(to)).as_bytes());
            }
            out.extend_from_slice(b"\r\n");
            wrote_host = true;
            continue;
        }
        if to_get
            && (n.eq_ignore_ascii_case("content-length")
                || n.eq_ignore_ascii_case("content-type")
                || n.eq_ignore_ascii_case("transfer-encoding"))
        {
            continue;
        }
        if n.eq_ignore_ascii_case("cookie") {
            match cookies {
                Cookies::Given if same_origin => {}
                _ => continue,
            }
        } else if is_credential(n) && !same_origin {
            continue;
        }
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !wrote_host {
        out.extend_from_slice(format!("Host: {}\r\n", host_header(to)).as_bytes());
    }
    if let Cookies::Jar(c) = cookies {
        if !c.is_empty() {
            out.extend_from_slice(b"Cookie: ");
            out.extend_from_slice(c.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    if !to_get {
        out.extend_from_slice(body);
    }
    Some((out, to_get))
}

/// The path of a request's bytes (from its request line).
#[cfg(test)]
pub fn request_path(req: &[u8]) -> Option<&str> {
    let line_end = req.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&req[..line_end]).ok()?;
    line.split(' ').nth(1)
}

/// Resolves a `Location` against the URL it answered: an http(s) URL without
/// fragment or credentials, or why not.
pub fn resolve_location(base: &url::Url, location: &str) -> Result<url::Url, &'static str> {
    let mut u = base
        .join(location)
        .map_err(|_| "redirect Location is not a valid URL")?;
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err("redirect to a scheme other than http or https");
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err("redirect to a URL without a host");
    }
    u.set_fragment(None);
    // Credentials in a Location are never used (nor shown).
    let _ = u.set_username("");
    let _ = u.set_password(None);
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    const POST: &[u8] = b"POST /login HTTP/1.1\r\nHost: a.test:8080\r\nUser-Agent: redline\r\nAuthorization: Basic dTpw\r\nCookie: s=1\r\nX-Keep: yes\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nbody";

    fn s(b: &[u8]) -> String {
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[test]
    fn methods_and_bodies() {
        let to = url::Url::parse("http://a.test:8080/next?x=1").unwrap();
        for (status, method, body) in [
            (301, "GET", false),
            (302, "GET", false),
            (303, "GET", false),
            (307, "POST", true),
            (308, "POST", true),
        ] {
            let r = s(&hop_request(POST, status, &to, true, false, Cookies::Given)
                .unwrap()
                .0);
            assert!(
                r.starts_with(&format!("{method} /next?x=1 HTTP/1.1\r\n")),
                "{status}: {r}"
            );
            assert_eq!(r.ends_with("\r\n\r\nbody"), body, "{status}: {r}");
            assert_eq!(r.contains("Content-Length: 4"), body, "{status}: {r}");
            assert!(r.contains("Authorization: Basic dTpw\r\n"), "{r}");
            assert!(r.contains("Cookie: s=1\r\n"), "{r}");
            assert!(r.contains("Host: a.test:8080\r\n"), "{r}");
        }
        let get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let r = s(&hop_request(get, 301, &to, true, false, Cookies::Given)
            .unwrap()
            .0);
        assert!(r.starts_with("GET /next?x=1 HTTP/1.1\r\n"), "{r}");
        let head = b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n";
        let r = s(&hop_request(head, 303, &to, true, false, Cookies::Given)
            .unwrap()
            .0);
        assert!(r.starts_with("HEAD /next"), "{r}");
        // POST → 302 → GET, then a 307 keeps the GET (not the original POST).
        let (r, get) = hop_request(POST, 307, &to, true, true, Cookies::Given).unwrap();
        let r = s(&r);
        assert!(get && r.starts_with("GET /next"), "{r}");
        assert!(
            !r.contains("Content-Length") && r.ends_with("\r\n\r\n"),
            "{r}"
        );
    }

    #[test]
    fn credentials_stay_home() {
        let to = url::Url::parse("https://b.test/x").unwrap();
        let r = s(&hop_request(POST, 307, &to, false, false, Cookies::Given)
            .unwrap()
            .0);
        assert!(!r.contains("dTpw") && !r.contains("s=1"), "{r}");
        assert!(r.contains("Host: b.test\r\n"), "{r}");
        assert!(r.contains("X-Keep: yes\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\nbody"), "{r}");
        // A jar replaces the request's cookie line with the new host's cookies.
        let r = s(
            &hop_request(POST, 302, &to, false, false, Cookies::Jar("t=2"))
                .unwrap()
                .0,
        );
        assert!(r.contains("Cookie: t=2\r\n") && !r.contains("s=1"), "{r}");
        let r = s(&hop_request(POST, 302, &to, false, false, Cookies::Jar(""))
            .unwrap()
            .0);
        assert!(!r.contains("Cookie"), "{r}");
    }

    fn spec(method: &str, headers: &[(&str, &str)], body: &[u8]) -> RequestSpec {
        RequestSpec {
            method: method.into(),
            path: "/login?a=1".into(),
            authority: "a.test:8080".into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.to_vec(),
            http10: false,
            chunked: false,
        }
    }

    /// The spec of every kind of request a run sends.
    fn kinds() -> Vec<RequestSpec> {
        let post = spec(
            "POST",
            &[
                ("Host", "a.test:8080"),
                ("User-Agent", "redline"),
                ("Authorization", "Basic dTpw"),
                ("Cookie", "s=1"),
                ("X-Api-Key", "k"),
                ("X-Keep", "yes"),
                ("Content-Type", "text/plain"),
                ("Content-Length", "4"),
            ],
            b"body",
        );
        let mut chunked = spec(
            "PUT",
            &[
                ("Host", "a.test:8080"),
                ("Transfer-Encoding", "chunked"),
                ("Content-Type", "text/plain"),
            ],
            b"chunky body",
        );
        chunked.chunked = true;
        let get = spec("GET", &[("Host", "a.test:8080"), ("Accept", "*/*")], b"");
        let head = spec("HEAD", &[("Host", "a.test:8080")], b"");
        let cookies = spec(
            "GET",
            &[("Host", "a.test:8080"), ("Cookie", "jar=1; b=2")],
            b"",
        );
        let mut http10 = get.clone();
        http10.http10 = true;
        // A Host given by the user (not the URL's) is where it goes.
        let mut own_host = spec("DELETE", &[("Host", "vhost.test")], b"");
        own_host.authority = "vhost.test".into();
        vec![post, chunked, get, head, cookies, http10, own_host]
    }

    fn sorted_lines(b: &[u8]) -> Vec<String> {
        let mut v: Vec<String> = s(b).split("\r\n").map(str::to_string).collect();
        v.sort();
        v
    }

    /// The spec of a hop, encoded, is what the bytes of the hop were: every
    /// kind of request, status, origin, cookie source and connection end.
    #[test]
    fn hop_specs_encode_to_the_bytes_hops_had() {
        let tos = [
            url::Url::parse("http://a.test:8080/next?x=1").unwrap(),
            url::Url::parse("https://b.test/x").unwrap(),
        ];
        let mut compared = 0;
        for orig in kinds() {
            for status in [301, 302, 303, 307, 308] {
                for (to, same) in [(&tos[0], true), (&tos[1], false)] {
                    for was_get in [false, true] {
                        for cookies in [Cookies::Given, Cookies::Jar("t=2"), Cookies::Jar("")] {
                            for close in [false, true] {
                                let bytes = orig.encode_h1(close);
                                let (old, old_get) =
                                    hop_request(&bytes, status, to, same, was_get, cookies)
                                        .unwrap();
                                let (hop, get) =
                                    hop_spec(&orig, status, to, same, was_get, cookies);
                                let new = hop.encode_h1(close);
                                assert_eq!(get, old_get);
                                let moved_connection = matches!(cookies, Cookies::Jar(c) if !c.is_empty())
                                    && (close || orig.http10);
                                if moved_connection {
                                    assert_eq!(
                                        sorted_lines(&new),
                                        sorted_lines(&old),
                                        "{}",
                                        s(&new)
                                    );
                                } else {
                                    assert_eq!(
                                        s(&new),
                                        s(&old),
                                        "{orig:?} {status} {same} {cookies:?}"
                                    );
                                }
                                // A second hop from the first.
                                let (old2, _) =
                                    hop_request(&old, 307, &tos[0], true, get, cookies).unwrap();
                                let (hop2, _) = hop_spec(&hop, 307, &tos[0], true, get, cookies);
                                if !moved_connection {
                                    assert_eq!(s(&hop2.encode_h1(close)), s(&old2));
                                }
                                compared += 1;
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(compared, 7 * 5 * 2 * 2 * 3 * 2);
    }

    #[test]
    fn a_hop_spec_turns_post_into_get_and_keeps_credentials_home() {
        let post = &kinds()[0];
        let to = url::Url::parse("http://a.test:8080/done").unwrap();
        let (h, get) = hop_spec(post, 303, &to, true, false, Cookies::Given);
        assert!(get);
        assert_eq!((h.method.as_str(), h.path.as_str()), ("GET", "/done"));
        assert!(h.body.is_empty() && h.header("content-length").is_none());
        assert!(h.header("content-type").is_none());
        assert_eq!(h.header("authorization"), Some("Basic dTpw"));
        assert_eq!(h.header("cookie"), Some("s=1"));
        let away = url::Url::parse("https://b.test:8443/x").unwrap();
        let (h, get) = hop_spec(post, 307, &away, false, false, Cookies::Given);
        assert!(!get);
        assert_eq!(h.method, "POST");
        assert_eq!(h.body, b"body");
        assert_eq!(h.authority, "b.test:8443");
        assert_eq!(h.header("host"), Some("b.test:8443"));
        for c in ["authorization", "cookie", "x-api-key"] {
            assert!(h.header(c).is_none(), "{c} went to another origin");
        }
        assert_eq!(h.header("x-keep"), Some("yes"));
        // The HTTP/2 form comes from the spec, no bytes parsed.
        let h2 = h.to_h2("https").unwrap();
        assert_eq!(h2.uri.to_string(), "https://b.test:8443/x");
        assert_eq!(h2.body.as_ref(), b"body");
        // A chunked body stays chunked on a 307, and is gone on a 303.
        let chunked = &kinds()[1];
        let (h, _) = hop_spec(chunked, 307, &to, true, false, Cookies::Given);
        assert!(
            h.chunked
                && h.encode_h1(false)
                    .ends_with(b"b\r\nchunky body\r\n0\r\n\r\n")
        );
        let (h, _) = hop_spec(chunked, 303, &to, true, false, Cookies::Given);
        assert!(!h.chunked && h.body.is_empty() && h.header("transfer-encoding").is_none());
    }

    #[test]
    fn locations() {
        let base = url::Url::parse("http://a.test:8080/dir/page").unwrap();
        let u = resolve_location(&base, "other#frag").unwrap();
        assert_eq!(u.as_str(), "http://a.test:8080/dir/other");
        let u = resolve_location(&base, "//u:pw@b.test/x").unwrap();
        assert_eq!(u.as_str(), "http://b.test/x");
        assert!(resolve_location(&base, "ftp://b.test/").is_err());
        assert!(resolve_location(&base, "http://[bad").is_err());
        assert_eq!(origin_key(&base), "http://a.test:8080");
        let v6 = url::Url::parse("https://[::1]/").unwrap();
        assert_eq!(origin_key(&v6), "https://[::1]:443");
        assert_eq!(host_header(&v6), "[::1]");
        assert_eq!(request_path(POST), Some("/login"));
    }
}
