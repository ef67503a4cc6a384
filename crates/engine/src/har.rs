//! `redline import har`: a browser recording (HAR 1.2) becomes a scenario
//! file (TOML, `docs/scenario.schema.json`) that runs as is. The requests are
//! walked in their recorded order as a session; the think time after a request
//! is the recording's idle time before the next one started (its
//! `startedDateTime` minus the latest end so far). Cookies and credentials
//! (`Cookie`, `Authorization`, `Proxy-Authorization`, `X-Api-Key`-like
//! headers, token-like query and form fields) are removed unless kept;
//! requests to hosts other than the first page's are dropped unless all are
//! kept. Entries the browser answered from its own cache never went to the
//! network ([`from_cache`]) and are dropped, counted. Nothing read is trusted: sizes are bounded by the file limit, every
//! string is escaped into TOML, control characters never reach a message.

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What to keep.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Keep cookies and credentials (`--keep-secrets`).
    pub keep_secrets: bool,
    /// Keep requests to third-party hosts (`--all-hosts`).
    pub all_hosts: bool,
}

/// The scenario and what was left out.
#[derive(Debug, Clone, Default)]
pub struct Imported {
    /// The scenario file's text (TOML).
    pub toml: String,
    /// Requests written.
    pub requests: usize,
    /// Third-party hosts dropped, with their request counts.
    pub dropped_hosts: BTreeMap<String, usize>,
    /// Entries skipped because they are not http(s) requests (data:, ws:…).
    pub skipped: usize,
    /// Entries the browser served from its cache (never on the network), dropped.
    pub from_cache: usize,
    /// Credentials removed, by header or field name (lower case), with counts.
    pub removed: BTreeMap<String, usize>,
}

/// The most entries read from a HAR.
pub const MAX_ENTRIES: usize = 10_000;

/// Whether a header, query or form field name looks like a credential.
pub fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "cookie" | "authorization" | "proxy-authorization" | "key" | "sig" | "signature" | "code"
    ) || [
        "auth",
        "token",
        "api-key",
        "api_key",
        "apikey",
        "secret",
        "passw",
        "session",
        "csrf",
        "xsrf",
        "credential",
        "jwt",
        "bearer",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// Headers never copied: the scenario's own (`Host`, framing) and hop-by-hop ones.
fn dropped_header(n: &str) -> bool {
    n.starts_with(':')
        || matches!(
            n.to_ascii_lowercase().as_str(),
            "host"
                | "content-length"
                | "connection"
                | "keep-alive"
                | "transfer-encoding"
                | "te"
                | "upgrade"
                | "proxy-connection"
                | "trailer"
        )
}

/// A TOML basic string: quotes, backslashes and every control character escaped.
pub fn toml_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            '\r' => o.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(o, "\\u{:04X}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A literal `{{` in a template is written `{{"{{"}}`.
fn tmpl(s: &str) -> String {
    s.replace("{{", "{{\"{{\"}}")
}

/// Milliseconds since the epoch of an ISO 8601 date-time
/// (`2026-11-26T03:04:05.123Z`, `+01:00` offsets), as HAR's `startedDateTime`.
pub fn parse_time_ms(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = b.get(r)?;
        if t.is_empty() || !t.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(t).ok()?.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || !matches!(b.get(10), Some(b'T' | b't' | b' '))
    {
        return None;
    }
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) && i - start < 12 {
            if i - start < 3 {
                ms = ms * 10 + (b[i] - b'0') as i64;
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..3 {
            ms *= 10;
        }
    }
    let offset_min = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(c @ (b'+' | b'-')) => {
            let oh = num(i + 1..i + 3)?;
            let om = if b.get(i + 3) == Some(&b':') {
                num(i + 4..i + 6)?
            } else {
                num(i + 3..i + 5)?
            };
            let o = oh * 60 + om;
            if *c == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi - offset_min) * 60_000 + sec * 1000 + ms)
}

struct Req {
    origin: String,
    host: String,
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Option<String>,
    content_type: Option<String>,
    start: Option<i64>,
    time: f64,
}

fn redact_pairs(text: &str, opts: &Options, removed: &mut BTreeMap<String, usize>) -> String {
    if opts.keep_secrets {
        return text.to_string();
    }
    text.split('&')
        .map(|pair| {
            let name = pair.split('=').next().unwrap_or("");
            let decoded = crate::plan::target::percent_decode(&name.replace('+', " "));
            if !name.is_empty() && secret_name(&decoded) && pair.contains('=') {
                *removed.entry(decoded.to_ascii_lowercase()).or_default() += 1;
                format!("{name}=redacted")
            } else {
                pair.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn redact_json(v: &mut Value, removed: &mut BTreeMap<String, usize>, depth: usize) {
    if depth > 64 {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if secret_name(k) && (x.is_string() || x.is_number()) {
                    *removed.entry(k.to_ascii_lowercase()).or_default() += 1;
                    *x = Value::String("redacted".into());
                } else {
                    redact_json(x, removed, depth + 1);
                }
            }
        }
        Value::Array(a) => a
            .iter_mut()
            .for_each(|x| redact_json(x, removed, depth + 1)),
        _ => {}
    }
}

/// Did the browser answer this entry from its own cache, without the
/// network? Chrome marks it `_fromCache: "memory"` or `"disk"`; Firefox and
/// others leave a `cache.beforeRequest` entry with no timings, or record
/// timings that are all -1 or 0 (send, wait and receive present, and the
/// entry's `time` 0). A conditional request answered 304 went to the network:
/// its timings say so, and it is kept.
pub fn from_cache(e: &Value) -> bool {
    match e.get("_fromCache") {
        Some(Value::String(w)) if !w.is_empty() => return true,
        Some(Value::Bool(true)) => return true,
        _ => {}
    }
    let t = e.get("timings").filter(|t| t.is_object());
    let num = |k: &str| t.and_then(|t| t.get(k)).and_then(Value::as_f64);
    let none_on_wire = |k: &str| num(k).is_none_or(|v| v <= 0.0);
    let no_timings = t.is_none_or(|t| {
        [
            "blocked", "dns", "connect", "ssl", "send", "wait", "receive",
        ]
        .iter()
        .all(|k| t.get(*k).and_then(Value::as_f64).is_none_or(|v| v <= 0.0))
    });
    let cache_hit = e
        .get("cache")
        .and_then(|c| c.get("beforeRequest"))
        .is_some_and(Value::is_object);
    if cache_hit && no_timings {
        return true;
    }
    let all_idle = ["send", "wait", "receive"].iter().all(|k| num(k).is_some())
        && no_timings
        && ["send", "wait", "receive"].iter().all(|k| none_on_wire(k));
    all_idle
        && e.get("time")
            .and_then(Value::as_f64)
            .is_none_or(|v| v <= 0.0)
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// Converts a HAR's text into a scenario. `source` names the file in
/// messages and in the scenario's comment. Errors are one line, escaped.
pub fn import(text: &str, source: &str, opts: Options) -> Result<Imported, String> {
    let shown = crate::gen::shown(source);
    let v: Value = serde_json::from_str(text).map_err(|e| format!("{shown}: not JSON: {e}"))?;
    let log = v
        .get("log")
        .filter(|l| l.is_object())
        .ok_or_else(|| format!("{shown}: not a HAR (no \"log\" object)"))?;
    let entries = log
        .get("entries")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{shown}: not a HAR (no \"log.entries\" array)"))?;
    if entries.len() > MAX_ENTRIES {
        return Err(format!(
            "{shown}: {} entries, more than {MAX_ENTRIES}",
            entries.len()
        ));
    }
    let mut out = Imported::default();
    let mut reqs = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let bad = |what: &str| format!("{shown}: log.entries[{i}]: {what}");
        let r = e.get("request").ok_or_else(|| bad("no request"))?;
        let url_text = s(r, "url").ok_or_else(|| bad("no request.url"))?;
        let method = s(r, "method").ok_or_else(|| bad("no request.method"))?;
        let Ok(u) = url::Url::parse(url_text) else {
            out.skipped += 1;
            continue;
        };
        if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
            out.skipped += 1;
            continue;
        }
        if from_cache(e) {
            out.from_cache += 1;
            continue;
        }
        if method.is_empty()
            || method.len() > 32
            || !method.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-')
        {
            return Err(bad(&format!(
                "invalid method '{}'",
                crate::gen::shown(method)
            )));
        }
        let mut path = u.path().to_string();
        if let Some(q) = u.query() {
            path.push('?');
            path.push_str(&redact_pairs(q, &opts, &mut out.removed));
        }
        let mut headers = BTreeMap::new();
        if let Some(hs) = r.get("headers").and_then(Value::as_array) {
            for h in hs.iter().take(500) {
                let (Some(n), Some(val)) = (s(h, "name"), s(h, "value")) else {
                    continue;
                };
                if dropped_header(n)
                    || n.is_empty()
                    || !n
                        .bytes()
                        .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b))
                    || val.chars().any(char::is_control)
                {
                    continue;
                }
                if !opts.keep_secrets && secret_name(n) {
                    *out.removed.entry(n.to_ascii_lowercase()).or_default() += 1;
                    continue;
                }
                headers.insert(n.to_ascii_lowercase(), val.to_string());
            }
        }
        let (mut body, mut content_type) = (None, None);
        if let Some(pd) = r.get("postData") {
            let mime = s(pd, "mimeType").unwrap_or("").to_string();
            let text = match s(pd, "text") {
                Some(t) => Some(t.to_string()),
                None => pd.get("params").and_then(Value::as_array).map(|ps| {
                    ps.iter()
                        .map(|p| {
                            format!(
                                "{}={}",
                                s(p, "name").unwrap_or(""),
                                s(p, "value").unwrap_or("")
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("&")
                }),
            };
            if let Some(mut t) = text {
                if !opts.keep_secrets {
                    if mime.contains("x-www-form-urlencoded") {
                        t = redact_pairs(&t, &opts, &mut out.removed);
                    } else if mime.contains("json") {
                        if let Ok(mut j) = serde_json::from_str::<Value>(&t) {
                            let before = out.removed.values().sum::<usize>();
                            redact_json(&mut j, &mut out.removed, 0);
                            if out.removed.values().sum::<usize>() != before {
                                t = j.to_string();
                            }
                        }
                    }
                }
                body = Some(t);
                if !mime.is_empty() && !headers.contains_key("content-type") {
                    content_type = Some(mime);
                }
            }
        }
        reqs.push(Req {
            origin: crate::redirect::origin_key(&u),
            host: u.host_str().unwrap_or("").to_ascii_lowercase(),
            method: method.to_ascii_uppercase(),
            path,
            headers,
            body,
            content_type,
            start: s(e, "startedDateTime").and_then(parse_time_ms),
            time: e
                .get("time")
                .and_then(Value::as_f64)
                .filter(|t| t.is_finite() && *t >= 0.0)
                .unwrap_or(0.0),
        });
    }
    // The first page's first request is first-party (or the first request).
    let first_page = log
        .get("pages")
        .and_then(Value::as_array)
        .and_then(|p| p.first())
        .and_then(|p| s(p, "id"));
    let first = first_page
        .and_then(|id| {
            entries
                .iter()
                .filter(|e| s(e, "pageref") == Some(id))
                .find_map(|e| {
                    let u = url::Url::parse(s(e.get("request")?, "url")?).ok()?;
                    matches!(u.scheme(), "http" | "https").then(|| {
                        (
                            crate::redirect::origin_key(&u),
                            u.host_str().unwrap_or("").to_ascii_lowercase(),
                        )
                    })
                })
        })
        .or_else(|| reqs.first().map(|r| (r.origin.clone(), r.host.clone())));
    let Some((base, first_host)) = first else {
        if out.from_cache > 0 {
            return Err(format!(
                "{shown}: no request went to the network ({} served from the browser's cache): record with the cache disabled (DevTools: Disable cache)",
                out.from_cache
            ));
        }
        return Err(format!("{shown}: no http(s) request in the recording"));
    };
    // Order by start time (stable: the file's order breaks ties).
    reqs.sort_by_key(|r| r.start.unwrap_or(i64::MIN));
    let mut kept = Vec::new();
    for r in reqs {
        if r.host != first_host && !opts.all_hosts {
            *out.dropped_hosts.entry(r.host.clone()).or_default() += 1;
        } else {
            kept.push(r);
        }
    }
    if kept.is_empty() {
        return Err(format!("{shown}: no request left to import"));
    }
    // Hosts other than the base, named h1, h2… in order of appearance.
    let mut hosts: Vec<String> = Vec::new();
    for r in &kept {
        if r.origin != base && !hosts.contains(&r.origin) {
            hosts.push(r.origin.clone());
        }
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Imported by `redline import har` from {}: {} requests, walked in order as a session.",
        shown.replace(['\n', '\r'], " "),
        kept.len()
    );
    if !out.dropped_hosts.is_empty() {
        let _ = writeln!(
            t,
            "# Dropped (third-party, --all-hosts keeps them): {}.",
            out.dropped_hosts
                .iter()
                .map(|(h, n)| format!("{} ({n})", crate::gen::shown(h)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if out.from_cache > 0 {
        let _ = writeln!(
            t,
            "# Dropped (served from the browser's cache, never on the network): {} entries.",
            out.from_cache
        );
    }
    if !out.removed.is_empty() {
        let _ = writeln!(
            t,
            "# Credentials removed (--keep-secrets keeps them): {}.",
            out.removed
                .iter()
                .map(|(h, n)| format!("{} ({n})", crate::gen::shown(h)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let name = std::path::Path::new(source)
        .file_stem()
        .map_or("har".to_string(), |s| s.to_string_lossy().into_owned());
    let _ = writeln!(t, "name = {}", toml_str(&name));
    let _ = writeln!(t, "base = {}", toml_str(&base));
    let _ = writeln!(t, "mode = \"session\"");
    let _ = writeln!(t, "cookies = true");
    if !hosts.is_empty() {
        let _ = writeln!(t, "\n[hosts]");
        for (i, h) in hosts.iter().enumerate() {
            let _ = writeln!(t, "h{} = {}", i + 1, toml_str(h));
        }
    }
    let mut names = std::collections::HashMap::<String, usize>::new();
    let mut latest_end: Option<f64> = None;
    for (i, r) in kept.iter().enumerate() {
        let mut label = format!("{} {}", r.method, r.path);
        if label.chars().count() > 100 {
            label = label.chars().take(100).collect::<String>() + "…";
        }
        let n = names.entry(label.clone()).or_default();
        *n += 1;
        if *n > 1 {
            label = format!("{label} #{n}");
        }
        let _ = writeln!(t, "\n[[request]]");
        let _ = writeln!(t, "name = {}", toml_str(&label));
        let _ = writeln!(t, "method = {}", toml_str(&r.method));
        if r.origin != base {
            let h = hosts.iter().position(|h| *h == r.origin).unwrap_or(0) + 1;
            let _ = writeln!(t, "host = \"h{h}\"");
        }
        let _ = writeln!(t, "path = {}", toml_str(&tmpl(&r.path)));
        if let Some(b) = &r.body {
            let _ = writeln!(t, "body = {}", toml_str(&tmpl(b)));
        }
        if let Some(ct) = &r.content_type {
            if !ct.contains(['\r', '\n']) {
                let _ = writeln!(t, "content_type = {}", toml_str(ct));
            }
        }
        // Think: idle time between the latest end so far and the next start.
        if let Some(s0) = r.start {
            let end = s0 as f64 + r.time;
            latest_end = Some(latest_end.map_or(end, |l: f64| l.max(end)));
        }
        if let (Some(next), Some(end)) = (kept.get(i + 1).and_then(|n| n.start), latest_end) {
            let gap = (next as f64 - end).round();
            if gap >= 1.0 {
                let _ = writeln!(t, "think = \"{}ms\"", gap.min(3_600_000.0) as u64);
            }
        }
        if !r.headers.is_empty() {
            let _ = writeln!(t, "[request.headers]");
            for (k, v) in &r.headers {
                let _ = writeln!(t, "{} = {}", toml_str(k), toml_str(&tmpl(v)));
            }
        }
    }
    out.requests = kept.len();
    out.toml = t;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (bench/fuzz.sh, 2026-11-28, target `har`): the input
    /// `1SECR\n\n\n\n\n\nETMARK\n\n3\n` placed in a URL's query next to
    /// credentials. URL parsing drops tabs and newlines, so the query becomes
    /// `1SECRETMARK3`: text from the input itself, not a credential. Every
    /// credential's value stays out of the scenario and the scenario parses.
    #[test]
    fn fuzz_har_newlines_in_query_are_not_a_leak() {
        let s = std::str::from_utf8(b"1SECR\n\n\n\n\n\nETMARK\n\n3\n").unwrap();
        let har = serde_json::json!({"log": {"entries": [{
            "startedDateTime": "2026-01-01T00:00:00Z",
            "request": {
                "method": "POST",
                "url": format!(
                    "http://a.test/{}?{s}&token=SECRETMARK1",
                    url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                ),
                "headers": [
                    {"name": "Authorization", "value": "SECRETMARK2"},
                    {"name": "Cookie", "value": "sid=SECRETMARK3"},
                    {"name": s, "value": "x"},
                ],
                "postData": {"mimeType": "application/json",
                             "text": format!("{{\"password\":\"SECRETMARK4\",\"x\":{}}}",
                                             serde_json::Value::String(s.to_string()))},
            }
        }]}});
        let got = import(&har.to_string(), "fuzz.har", Options::default()).unwrap();
        for secret in [
            "SECRETMARK1",
            "SECRETMARK2",
            "sid=SECRETMARK3",
            "SECRETMARK4",
        ] {
            assert!(!got.toml.contains(secret), "{secret} in\n{}", got.toml);
        }
        assert!(
            got.toml.contains("?1SECRETMARK3&token=redacted"),
            "{}",
            got.toml
        );
        crate::scenario::file::parse(&got.toml, "out.toml").unwrap();
    }

    #[test]
    fn iso_times_parse() {
        assert_eq!(parse_time_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time_ms("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(parse_time_ms("1970-01-01T01:00:00.250+01:00"), Some(250));
        assert_eq!(
            parse_time_ms("2026-11-26T03:04:05.123Z"),
            Some(1_795_662_245_123)
        );
        for bad in [
            "",
            "2026-11-26",
            "2026-13-01T00:00:00Z",
            "x026-11-26T03:04:05Z",
            "2026-11-26T03:04:05",
        ] {
            assert_eq!(parse_time_ms(bad), None, "{bad}");
        }
    }

    /// Only what went to the network is kept, in order, with the idle time
    /// between network requests as think time; cache hits (Chrome's
    /// `_fromCache`, Firefox's `cache.beforeRequest` with no timings, timings
    /// all -1/0) are dropped and counted; a 304 revalidation is kept.
    #[test]
    fn browser_cache_hits_are_dropped() {
        let har = r#"{"log":{"version":"1.2","entries":[
          {"startedDateTime":"2026-01-01T00:00:00.000Z","time":100,
           "request":{"method":"GET","url":"http://site.test/","headers":[]},
           "timings":{"blocked":1,"dns":-1,"connect":-1,"send":0.1,"wait":90,"receive":9}},
          {"startedDateTime":"2026-01-01T00:00:00.100Z","time":0.4,"_fromCache":"memory",
           "request":{"method":"GET","url":"http://site.test/mem.css","headers":[]},
           "timings":{"blocked":-1,"dns":-1,"connect":-1,"send":0,"wait":0.2,"receive":0.2}},
          {"startedDateTime":"2026-01-01T00:00:00.150Z","time":3,"_fromCache":"disk",
           "request":{"method":"GET","url":"http://site.test/disk.js","headers":[]},
           "timings":{"blocked":-1,"dns":-1,"connect":-1,"send":0,"wait":1,"receive":2}},
          {"startedDateTime":"2026-01-01T00:00:00.200Z","time":0,
           "request":{"method":"GET","url":"http://site.test/ff.png","headers":[]},
           "cache":{"beforeRequest":{"lastAccess":"2026-01-01T00:00:00.000Z","eTag":"x","hitCount":3}},
           "timings":{"blocked":-1,"dns":-1,"connect":-1,"ssl":-1,"send":0,"wait":0,"receive":0}},
          {"startedDateTime":"2026-01-01T00:00:00.250Z","time":0,
           "request":{"method":"GET","url":"http://site.test/idle.svg","headers":[]},
           "timings":{"blocked":-1,"dns":-1,"connect":-1,"send":0,"wait":0,"receive":0}},
          {"startedDateTime":"2026-01-01T00:00:00.600Z","time":20,
           "request":{"method":"GET","url":"http://site.test/api","headers":[]},
           "response":{"status":304},
           "cache":{"beforeRequest":{"eTag":"y"}},
           "timings":{"blocked":0,"dns":-1,"connect":-1,"send":0,"wait":19,"receive":1}},
          {"startedDateTime":"2026-01-01T00:00:01.000Z","time":5,
           "request":{"method":"GET","url":"http://site.test/last","headers":[]},
           "timings":{"send":0,"wait":4,"receive":1}}
        ]}}"#;
        let got = import(har, "rec.har", Options::default()).unwrap();
        assert_eq!(got.from_cache, 4);
        assert_eq!(got.requests, 3);
        let t = &got.toml;
        let names: Vec<&str> = t
            .lines()
            .filter_map(|l| l.strip_prefix("name = \"GET "))
            .collect();
        assert_eq!(names, ["/\"", "/api\"", "/last\""], "{t}");
        // Idle from 0.1 s (the page's end) to 0.6 s, then 0.62 s to 1.0 s.
        assert!(t.contains("think = \"500ms\""), "{t}");
        assert!(t.contains("think = \"380ms\""), "{t}");
        assert!(t.contains("browser's cache"), "{t}");
        // Nothing but cache hits: nothing to import.
        let only = r#"{"log":{"entries":[{"_fromCache":"disk","startedDateTime":"2026-01-01T00:00:00.000Z",
          "request":{"method":"GET","url":"http://site.test/"}}]}}"#;
        assert!(import(only, "c.har", Options::default()).is_err());
    }

    #[test]
    fn secrets_third_parties_and_think_times() {
        let har = r#"{"log":{"version":"1.2","creator":{"name":"t","version":"1"},
          "pages":[{"id":"p1","startedDateTime":"2026-01-01T00:00:00.000Z","title":"x","pageTimings":{}}],
          "entries":[
            {"pageref":"p1","startedDateTime":"2026-01-01T00:00:00.000Z","time":100,
             "request":{"method":"GET","url":"http://site.test:8080/?q=1&access_token=abc","httpVersion":"HTTP/1.1",
               "headers":[{"name":"Cookie","value":"sid=1"},{"name":"Accept","value":"text/html"},{"name":":authority","value":"x"},{"name":"X-Api-Key","value":"k"}],
               "queryString":[],"cookies":[],"headersSize":-1,"bodySize":0},"response":{},"cache":{},"timings":{}},
            {"pageref":"p1","startedDateTime":"2026-01-01T00:00:00.050Z","time":20,
             "request":{"method":"GET","url":"https://cdn.other.test/a.js","headers":[]}},
            {"pageref":"p1","startedDateTime":"2026-01-01T00:00:02.100Z","time":10,
             "request":{"method":"POST","url":"http://site.test:8080/login","headers":[{"name":"Authorization","value":"Bearer x"}],
               "postData":{"mimeType":"application/json","text":"{\"user\":\"u\",\"password\":\"p\",\"t\":\"{{x}}\"}"}}},
            {"startedDateTime":"2026-01-01T00:00:02.200Z","time":1,"request":{"method":"GET","url":"data:image/png;base64,AAAA"}}
          ]}}"#;
        let got = import(har, "rec.har", Options::default()).unwrap();
        assert_eq!(got.requests, 2);
        assert_eq!(got.skipped, 1);
        assert_eq!(got.dropped_hosts.get("cdn.other.test"), Some(&1));
        for k in [
            "cookie",
            "x-api-key",
            "authorization",
            "access_token",
            "password",
        ] {
            assert!(got.removed.contains_key(k), "{k}: {:?}", got.removed);
        }
        let t = &got.toml;
        for secret in ["sid=1", "abc", "Bearer", "\\\"p\\\"", "\"k\""] {
            assert!(!t.contains(secret), "{secret} in\n{t}");
        }
        // Idle from 0.1 s (the first request's end) to 2.1 s.
        assert!(t.contains("think = \"2000ms\""), "{t}");
        let f = crate::scenario::file::parse(t, "out.toml").unwrap();
        assert_eq!(f.base.as_deref(), Some("http://site.test:8080"));
        assert_eq!(f.request.len(), 2);
        assert_eq!(f.request[1].method.as_deref(), Some("POST"));
        // A literal "{{" is escaped for the template.
        assert!(f.request[1]
            .body
            .as_deref()
            .unwrap()
            .contains(r#"{{"{{"}}x}}"#));

        let all = import(
            har,
            "rec.har",
            Options {
                keep_secrets: true,
                all_hosts: true,
            },
        )
        .unwrap();
        assert_eq!(all.requests, 3);
        assert!(all.toml.contains("sid=1") && all.toml.contains("h1 = \"https://cdn.other.test"));
    }

    #[test]
    fn bad_hars_are_one_line_errors() {
        for (text, want) in [
            ("not json", "not JSON"),
            ("{}", "no \"log\" object"),
            ("{\"log\":{}}", "no \"log.entries\""),
            ("{\"log\":{\"entries\":[{}]}}", "no request"),
            ("{\"log\":{\"entries\":[]}}", "no http(s) request"),
            (
                "{\"log\":{\"entries\":[{\"request\":{\"method\":\"G\\u001bT\",\"url\":\"http://a/\"}}]}}",
                "invalid method",
            ),
        ] {
            let e = import(text, "x\u{1b}.har", Options::default()).unwrap_err();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains('\n') && !e.chars().any(char::is_control), "{e:?}");
        }
    }
}
