//! The request spec: what every request of a plain run is (method, path and
//! query, authority, header fields, body), built once by
//! [`super::Plan::build`] from the flags, and its two encodings: HTTP/1 bytes
//! ([`RequestSpec::encode_h1`], built once into `Plan::request` and
//! `Plan::request_close`, which the HTTP/1 worker writes as they are) and
//! HTTP/2 headers ([`RequestSpec::to_h2`]: pseudo-headers and fields, which
//! the `mux` driver sends), so neither protocol parses the other's form. Scenario
//! requests (`Scenario::prepare`/`Scenario::spec`) and redirect hops
//! (`redirect::hop_spec`) are specs too, encoded for HTTP/1 by the same
//! [`RequestSpec::encode_h1_into`]; `Http2Request::from_spec` (at the end)
//! gives the HTTP/2 codec's request with its header block encoded once.

use super::args::PlanArgs;
use super::{usage, PlanError};
use bytes::Bytes;

/// One request, protocol-neutral.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestSpec {
    /// Method, upper case.
    pub method: String,
    /// Path and query (`/` at least).
    pub path: String,
    /// Where it goes: the `Host` header's value (HTTP/2's `:authority`).
    pub authority: String,
    /// Header fields in the order HTTP/1 writes them, `Host` included (the
    /// user's, or the URL's first), `Content-Length` when the body needs
    /// one; never `Connection` (redline manages connections itself).
    pub headers: Vec<(String, String)>,
    /// The body, unframed.
    pub body: Vec<u8>,
    /// HTTP/1.0 (else HTTP/1.1) when encoded for HTTP/1.
    pub http10: bool,
    /// `-H 'Transfer-Encoding: chunked'`: HTTP/1 sends the body chunked
    /// (and without `Content-Length`); HTTP/2 frames it itself.
    pub chunked: bool,
}

/// A [`RequestSpec`] in HTTP/2 form.
#[derive(Debug, Clone)]
pub struct H2Request {
    /// `:method`.
    pub method: http::Method,
    /// `:scheme`, `:authority` and `:path`.
    pub uri: http::Uri,
    /// The fields, lower case, without the connection-specific ones.
    pub headers: http::HeaderMap,
    /// DATA.
    pub body: Bytes,
}

pub use crate::field::header_ok;

/// Splits and checks `-H` flags (`Name: value`, name and value trimmed).
pub fn parse_headers(flags: &[String]) -> Result<Vec<(String, String)>, PlanError> {
    let mut out = Vec::with_capacity(flags.len());
    for h in flags {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| PlanError::BadHeader(super::redact_bad_header(h)))?;
        let name = name.trim();
        if !header_ok(name, value) {
            return Err(PlanError::BadHeader(super::redact_header(
                &super::redact_bad_header(h),
            )));
        }
        out.push((name.to_string(), value.trim().to_string()));
    }
    Ok(out)
}

pub(crate) use crate::http2::request::h2_dropped;

impl RequestSpec {
    /// The run's request from its flags: `extra` are the checked `-H`
    /// headers, `auth` the base64 credentials (`-a`, or the URL's), which
    /// become `Authorization: Basic` unless a header gives one.
    pub(super) fn build(
        a: &PlanArgs,
        authority: &str,
        path: &str,
        extra: &[(String, String)],
        auth: Option<&str>,
    ) -> Result<RequestSpec, PlanError> {
        let has = |n: &str| extra.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        let method = a
            .method
            .clone()
            .unwrap_or_else(|| if a.body.is_some() { "POST" } else { "GET" }.into())
            .to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
            // Escaped and cut: the error stays one short line whatever was typed.
            let shown: String = method.escape_debug().take(60).collect();
            return Err(usage(format!("invalid method '{shown}'")));
        }
        // `-H 'Transfer-Encoding: chunked'`: as curl does, the body is sent
        // chunked and without Content-Length (never both framings); any other
        // transfer coding redline cannot apply, so it is refused.
        let chunked = match extra
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
        {
            None => false,
            Some((_, v)) if v.trim().eq_ignore_ascii_case("chunked") => true,
            Some((_, v)) => {
                return Err(usage(format!(
                    "-H 'Transfer-Encoding: {}': redline can only send a body chunked (give 'chunked' or no Transfer-Encoding)",
                    v.trim()
                )))
            }
        };
        if chunked && a.http10 {
            return Err(usage(
                "-H 'Transfer-Encoding: chunked' needs HTTP/1.1; HTTP/1.0 has no chunked requests",
            ));
        }
        let mut headers: Vec<(String, String)> = Vec::with_capacity(extra.len() + 6);
        let mut add = |k: &str, v: String| headers.push((k.to_string(), v));
        if !has("host") {
            add("Host", authority.to_string());
        }
        if !has("user-agent") {
            add(
                "User-Agent",
                format!("redline/{}", env!("CARGO_PKG_VERSION")),
            );
        }
        if !has("accept") {
            add("Accept", "*/*".into());
        }
        if let Some(b64) = auth {
            if !has("authorization") {
                add("Authorization", format!("Basic {b64}"));
            }
        }
        for (k, v) in extra {
            if k.eq_ignore_ascii_case("connection") || k.eq_ignore_ascii_case("content-length") {
                continue; // redline frames the request and manages connections itself
            }
            add(k, v.clone());
        }
        if let Some(ct) = &a.content_type {
            if !has("content-type") {
                add("Content-Type", ct.clone());
            }
        } else if a.body.is_some() && !has("content-type") {
            add("Content-Type", "application/octet-stream".into());
        }
        let body = a.body.clone().unwrap_or_default();
        if !chunked && (a.body.is_some() || matches!(method.as_str(), "POST" | "PUT" | "PATCH")) {
            add("Content-Length", body.len().to_string());
        }
        // A `Host` given by the user is where the request goes, in both protocols.
        let authority = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("host"))
            .map_or_else(|| authority.to_string(), |(_, v)| v.clone());
        Ok(RequestSpec {
            method,
            path: path.to_string(),
            authority,
            headers,
            body,
            http10: a.http10,
            chunked,
        })
    }

    /// HEAD: the responses carry no body.
    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }

    /// The request as HTTP/1 bytes; `close` adds `Connection: close` (the
    /// last request on a connection), otherwise HTTP/1.0 asks for keep-alive.
    pub fn encode_h1(&self, close: bool) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_h1_into(close, &mut out);
        out
    }

    /// [`RequestSpec::encode_h1`] appended to `out`: the one HTTP/1 encoder
    /// (the plan's prebuilt bytes, scenario requests, redirect hops). No
    /// allocation once `out` has grown to the request's size.
    pub fn encode_h1_into(&self, close: bool, out: &mut Vec<u8>) {
        let fields: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum();
        out.reserve(self.method.len() + self.path.len() + fields + self.body.len() + 64);
        out.extend_from_slice(self.method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.path.as_bytes());
        out.extend_from_slice(if self.http10 {
            b" HTTP/1.0\r\n"
        } else {
            b" HTTP/1.1\r\n"
        });
        for (k, v) in &self.headers {
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if close {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if self.http10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if self.chunked {
            chunk_into(&self.body, out);
        } else {
            out.extend_from_slice(&self.body);
        }
    }

    /// The value of header `name` (the first, case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The request in HTTP/2 form for `scheme`: `Host` becomes `:authority`,
    /// connection-specific fields go (`TE` unless `trailers`), the body is
    /// sent unframed. Err (a usage error's text, naming a header but never
    /// its value): something HTTP/2 cannot carry, e.g. a control character.
    pub fn to_h2(&self, scheme: &str) -> Result<H2Request, String> {
        let bad = |why: String| format!("cannot express the request in HTTP/2: {why}");
        let mut headers = http::HeaderMap::with_capacity(self.headers.len());
        for (k, v) in &self.headers {
            let name = k.to_ascii_lowercase();
            if h2_dropped(&name) || (name == "te" && !v.eq_ignore_ascii_case("trailers")) {
                continue;
            }
            let n = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| bad(format!("header name '{name}'")))?;
            let v = http::HeaderValue::from_bytes(v.as_bytes()).map_err(|_| {
                bad(format!(
                    "the value of header '{name}' holds a control character"
                ))
            })?;
            headers.append(n, v);
        }
        let uri: http::Uri = format!("{scheme}://{}{}", self.authority, self.path)
            .parse()
            .map_err(|e| bad(format!("URL: {e}")))?;
        let method = http::Method::from_bytes(self.method.as_bytes())
            .map_err(|_| bad(format!("method '{}'", self.method)))?;
        Ok(H2Request {
            method,
            uri,
            headers,
            body: Bytes::from(self.body.clone()),
        })
    }
}

/// A request body in chunked framing: one chunk (none when empty), then the last.
pub fn chunk(body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(body.len() + 16);
    chunk_into(body, &mut v);
    v
}

/// [`chunk`] appended to `out`.
fn chunk_into(body: &[u8], out: &mut Vec<u8>) {
    if !body.is_empty() {
        use std::io::Write;
        let _ = write!(out, "{:x}\r\n", body.len());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
}

/// The body [`chunk`] framed (`None` when `b` is not such a framing).
pub fn unchunk(b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = b;
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n")?;
        let n = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).ok()?.trim(), 16).ok()?;
        rest = &rest[eol + 2..];
        if n == 0 {
            return (rest == b"\r\n").then_some(out);
        }
        if rest.len() < n + 2 || &rest[n..n + 2] != b"\r\n" {
            return None;
        }
        out.extend_from_slice(&rest[..n]);
        rest = &rest[n + 2..];
    }
}

/// The HTTP/2 form of a spec lives here, with the spec, so the HTTP/2 codec
/// (`http2/request.rs`) imports nothing of the plan: layers point down.
impl crate::http2::Http2Request {
    /// The run's request for `scheme` (`http` or `https`): `Host` becomes
    /// `:authority`, connection-specific fields go (`TE` unless
    /// `trailers`), as [`RequestSpec::to_h2`] does. Err: a usage error's
    /// text (naming a header, never its value).
    pub fn from_spec(
        spec: &RequestSpec,
        scheme: &str,
    ) -> Result<crate::http2::Http2Request, String> {
        crate::http2::Http2Request::from_parts(
            &spec.method,
            scheme,
            &spec.authority,
            &spec.path,
            &spec.headers,
            Bytes::from(spec.body.clone()),
        )
    }
}
