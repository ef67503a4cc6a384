//! Parsing of request targets: the control paths and the per-request query
//! parameters (`size`, `delay`, `status`, `chunked`, `close`, `header`).

use std::time::Duration;

/// Default body size: the size of the small file used in the articles.
pub(crate) const DEFAULT_SIZE: u64 = 440;
/// Largest body the server agrees to produce (100 MiB).
pub(crate) const MAX_SIZE: u64 = 100 * 1024 * 1024;

/// Behaviour requested by the query parameters of a normal (counted) request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    pub size: u64,
    pub status: u16,
    pub delay: Duration,
    pub chunked: bool,
    pub close: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            size: DEFAULT_SIZE,
            status: 200,
            delay: Duration::ZERO,
            chunked: false,
            close: false,
        }
    }
}

/// What a request target asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// A normal request, counted in the statistics.
    Normal(Params),
    /// A normal request whose parameters are invalid (answered 400, counted).
    BadParams(&'static str),
    /// `/__stats`.
    Stats,
    /// `/__stall?for=D`.
    Stall(Duration),
    /// `/__reset`.
    Reset,
    /// `/__login`: issues a session cookie `sid=S<k>` and a token `T<k>` (JSON body).
    Login,
    /// `/__account?token=T<k>`: 200 when the `sid` cookie carries the same k, else 401.
    Account(Option<u64>),
    /// A control path (`/__…`) that does not exist, or has bad parameters.
    BadControl(u16, &'static str),
}

impl Target {
    /// Whether the request is counted in the statistics.
    pub fn counted(&self) -> bool {
        matches!(
            self,
            Target::Normal(_) | Target::BadParams(_) | Target::Login | Target::Account(_)
        )
    }
}

/// Splits a request target into path and query, accepting origin-form
/// (`/p?q`), absolute-form (`http://h/p?q`) and asterisk-form (`*`).
fn split_target(target: &str) -> (&str, &str) {
    let mut t = target;
    if !t.starts_with('/') {
        if let Some(i) = t.find("://") {
            let rest = &t[i + 3..];
            t = match rest.find(['/', '?']) {
                Some(j) => &rest[j..],
                None => "/",
            };
        }
    }
    let t = match t.find('#') {
        Some(i) => &t[..i],
        None => t,
    };
    match t.find('?') {
        Some(i) => (&t[..i], &t[i + 1..]),
        None => (t, ""),
    }
}

/// Iterates over the `key=value` pairs of a query string (raw, not decoded).
fn pairs(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.find('=') {
            Some(i) => (&p[..i], &p[i + 1..]),
            None => (p, ""),
        })
}

/// Parses the request target. `extra` receives the formatted extra response
/// headers (`Name: Value\r\n` lines) asked for with `header=`; it is cleared
/// first.
pub(crate) fn parse_target(target: &str, extra: &mut Vec<u8>) -> Target {
    extra.clear();
    let (path, query) = split_target(target);
    if let Some(ctl) = path.strip_prefix("/__") {
        return parse_control(ctl, query);
    }
    if query.is_empty() {
        return Target::Normal(Params::default());
    }
    match parse_params(query, extra) {
        Ok(p) => Target::Normal(p),
        Err(msg) => {
            extra.clear();
            Target::BadParams(msg)
        }
    }
}

fn parse_control(name: &str, query: &str) -> Target {
    match name {
        "stats" => Target::Stats,
        "reset" => Target::Reset,
        "login" => Target::Login,
        "account" => Target::Account(
            pairs(query)
                .find(|(k, _)| *k == "token")
                .and_then(|(_, v)| v.strip_prefix('T'))
                .and_then(|v| v.parse().ok()),
        ),
        "stall" => {
            let mut d = None;
            for (k, v) in pairs(query) {
                if k == "for" {
                    match parse_duration(v) {
                        Some(x) => d = Some(x),
                        None => return Target::BadControl(400, "invalid duration in for=\n"),
                    }
                }
            }
            match d {
                Some(d) => Target::Stall(d),
                None => Target::BadControl(400, "missing for=DURATION\n"),
            }
        }
        _ => Target::BadControl(404, "unknown control path\n"),
    }
}

fn parse_params(query: &str, extra: &mut Vec<u8>) -> Result<Params, &'static str> {
    let mut p = Params::default();
    for (k, v) in pairs(query) {
        match k {
            "size" => {
                let n: u64 = v.parse().map_err(|_| "invalid size\n")?;
                if n > MAX_SIZE {
                    return Err("size too large (max 104857600)\n");
                }
                p.size = n;
            }
            "status" => {
                let valid = v.len() == 3 && v.bytes().all(|b| b.is_ascii_digit());
                let n: u16 = if valid {
                    v.parse().map_err(|_| "invalid status\n")?
                } else {
                    0
                };
                if !(200..=599).contains(&n) {
                    return Err("invalid status (200..=599)\n");
                }
                p.status = n;
            }
            "delay" => p.delay = parse_duration(v).ok_or("invalid delay\n")?,
            "chunked" => p.chunked = parse_bool(v).ok_or("invalid chunked\n")?,
            "close" => p.close = parse_bool(v).ok_or("invalid close\n")?,
            "header" => add_header(v, extra)?,
            _ => {}
        }
    }
    Ok(p)
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "" | "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Parses `10ms`, `1.5s`, `250us`, `2m`, `100ns` or a plain number of
/// milliseconds.
pub(crate) fn parse_duration(v: &str) -> Option<Duration> {
    let v = v.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    if num.is_empty() || num == "." {
        return None;
    }
    let scale = match unit {
        "" | "ms" => 1e-3,
        "s" => 1.0,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        _ => return None,
    };
    if !num.contains('.') {
        // Exact integer path.
        let n: u64 = num.parse().ok()?;
        return match unit {
            "" | "ms" => Some(Duration::from_millis(n)),
            "s" => Some(Duration::from_secs(n)),
            "us" | "µs" => Some(Duration::from_micros(n)),
            "ns" => Some(Duration::from_nanos(n)),
            _ => Duration::from_secs(n).checked_mul(60),
        };
    }
    let x: f64 = num.parse().ok()?;
    Duration::try_from_secs_f64(x * scale).ok()
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// URL-decodes `v` (`%XX` and `+` for space) onto the end of `out`.
fn url_decode_into(v: &str, out: &mut Vec<u8>) -> Result<(), &'static str> {
    let b = v.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hi = b.get(i + 1).copied().and_then(hex_val);
                let lo = b.get(i + 2).copied().and_then(hex_val);
                match (hi, lo) {
                    (Some(h), Some(l)) => out.push(h << 4 | l),
                    _ => return Err("invalid percent-encoding in header\n"),
                }
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(())
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Appends `Name: Value\r\n` for a `header=Name:Value` parameter.
fn add_header(v: &str, extra: &mut Vec<u8>) -> Result<(), &'static str> {
    let start = extra.len();
    url_decode_into(v, extra)?;
    let decoded = &extra[start..];
    let colon = decoded
        .iter()
        .position(|&b| b == b':')
        .ok_or("header must be Name:Value\n")?;
    let name = &decoded[..colon];
    if name.is_empty() || !name.iter().all(|&b| is_token(b)) {
        return Err("invalid header name\n");
    }
    if name.eq_ignore_ascii_case(b"content-length")
        || name.eq_ignore_ascii_case(b"transfer-encoding")
    {
        return Err("header may not set Content-Length or Transfer-Encoding\n");
    }
    let value = &decoded[colon + 1..];
    if value.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0) {
        return Err("invalid header value\n");
    }
    let vs = value
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(value.len());
    let ve = value
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(vs, |i| i + 1);
    // Rebuild as "Name: Value\r\n" in place.
    let (vs, ve) = (start + colon + 1 + vs, start + colon + 1 + ve);
    let value_at = start + colon + 2;
    let line_end = value_at + (ve - vs);
    if extra.len() < line_end {
        extra.resize(line_end, 0);
    }
    extra.copy_within(vs..ve, value_at);
    extra[start + colon] = b':';
    extra[start + colon + 1] = b' ';
    extra.truncate(line_end);
    extra.extend_from_slice(b"\r\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10ms"), Some(Duration::from_millis(10)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Some(Duration::from_micros(250)));
        assert_eq!(parse_duration("42"), Some(Duration::from_millis(42)));
        assert_eq!(parse_duration("0.5"), Some(Duration::from_micros(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("ms"), None);
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("1h"), None);
        assert_eq!(parse_duration("1e9999s"), None);
    }

    #[test]
    fn targets() {
        let mut extra = Vec::new();
        assert_eq!(
            parse_target("/", &mut extra),
            Target::Normal(Params::default())
        );
        assert_eq!(parse_target("/__stats", &mut extra), Target::Stats);
        assert_eq!(parse_target("/__reset?x=1", &mut extra), Target::Reset);
        assert_eq!(
            parse_target("/__stall?for=500ms", &mut extra),
            Target::Stall(Duration::from_millis(500))
        );
        assert!(matches!(
            parse_target("/__stall", &mut extra),
            Target::BadControl(400, _)
        ));
        assert!(matches!(
            parse_target("/__nope", &mut extra),
            Target::BadControl(404, _)
        ));
        let t = parse_target(
            "/x?size=10&status=503&delay=5ms&chunked=1&close=true",
            &mut extra,
        );
        assert_eq!(
            t,
            Target::Normal(Params {
                size: 10,
                status: 503,
                delay: Duration::from_millis(5),
                chunked: true,
                close: true
            })
        );
        assert_eq!(
            parse_target("http://example.com/a?size=3", &mut extra),
            Target::Normal(Params {
                size: 3,
                ..Params::default()
            })
        );
        assert!(matches!(
            parse_target("/?size=104857601", &mut extra),
            Target::BadParams(_)
        ));
        assert!(matches!(
            parse_target("/?status=199", &mut extra),
            Target::BadParams(_)
        ));
        assert!(matches!(
            parse_target("/?status=600", &mut extra),
            Target::BadParams(_)
        ));
        assert!(matches!(
            parse_target("/?status=20", &mut extra),
            Target::BadParams(_)
        ));
        assert!(matches!(
            parse_target("/?size=abc", &mut extra),
            Target::BadParams(_)
        ));
        assert!(matches!(
            parse_target("/?delay=abc", &mut extra),
            Target::BadParams(_)
        ));
    }

    #[test]
    fn headers() {
        let mut extra = Vec::new();
        let t = parse_target(
            "/?header=X-A:1&header=X-B%3A%20hello+world%20&header=X-C:",
            &mut extra,
        );
        assert_eq!(t, Target::Normal(Params::default()));
        assert_eq!(extra, b"X-A: 1\r\nX-B: hello world\r\nX-C: \r\n");
        assert!(matches!(
            parse_target("/?header=X-A", &mut extra),
            Target::BadParams(_)
        ));
        assert!(extra.is_empty());
        assert!(matches!(
            parse_target("/?header=X%0D:1", &mut extra),
            Target::BadParams(_)
        ));
        assert!(matches!(
            parse_target("/?header=X:a%0Ab", &mut extra),
            Target::BadParams(_)
        ));
        assert!(matches!(
            parse_target("/?header=Content-Length:5", &mut extra),
            Target::BadParams(_)
        ));
        assert!(matches!(
            parse_target("/?header=X:%zz", &mut extra),
            Target::BadParams(_)
        ));
    }
}
