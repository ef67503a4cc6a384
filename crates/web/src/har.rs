//! `redline page --har FILE`: the page report as HAR 1.2 (the HTTP Archive
//! format Chrome DevTools and HAR viewers open), one HAR page per view
//! (first, revalidate, cached) of the run shown, an entry per waterfall row.
//!
//! Timings follow the spec and the waterfall: `dns`, `connect` and `ssl`
//! only on the request that opened its connection (-1 elsewhere), `connect`
//! including `ssl` (HTTP/3: the QUIC handshake is both, so `connect` equals
//! `ssl`, as Chromium reports QUIC); `send` is 0 (the request is written inside `wait`, as
//! the waterfall's "waiting" column counts it); `blocked` is -1 (a fetch
//! starts when it is dispatched). A failed fetch keeps the time it took
//! (lookup, connect, then the wait for an answer) and has status 0 with the
//! reason in `_error`; a cache hit of the cached view has time 0 and
//! `_fromCache: "disk"`. Each entry's `time` is the sum of its timings that
//! are not -1, exactly. Secrets: request credentials (Authorization, Cookie,
//! …) and Set-Cookie values are `[redacted]`, URLs carry no user or password.

use crate::load::{Entry, Load};
use crate::page::PageReport;
use serde_json::{json, Value};

/// Rounds to microseconds, so sums of timings are exact in JSON.
fn r3(v: f64) -> f64 {
    (v.max(0.0) * 1000.0).round() / 1000.0
}

fn headers(h: &[(String, String)]) -> Value {
    Value::Array(
        h.iter()
            .map(|(n, v)| {
                let v = if n.eq_ignore_ascii_case("set-cookie")
                    || redline_engine::redirect::is_credential(n)
                {
                    "[redacted]"
                } else {
                    v.as_str()
                };
                json!({"name": n, "value": v})
            })
            .collect(),
    )
}

fn query(url: &str) -> Value {
    let pairs = url::Url::parse(url)
        .map(|u| {
            u.query_pairs()
                .map(|(n, v)| json!({"name": n, "value": v}))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    Value::Array(pairs)
}

fn http_version(e: &Entry) -> &'static str {
    match e.protocol.as_deref() {
        Some("h2") => "HTTP/2",
        // As Chromium's HAR export writes HTTP/3.
        Some("h3") => "h3",
        _ => "HTTP/1.1",
    }
}

fn status_text(code: u16) -> &'static str {
    match code {
        200 => "OK",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// The HAR timings of one entry and their sum (the entry's `time`).
pub fn timings(e: &Entry) -> (Value, f64) {
    if e.from_cache {
        let t = json!({"blocked": -1, "dns": -1, "connect": -1, "ssl": -1,
            "send": 0, "wait": 0, "receive": 0});
        return (t, 0.0);
    }
    let p = &e.phases;
    let dns = p.dns_ms.map(r3);
    let ssl = p.tls_ms.map(r3);
    // HAR: connect includes ssl.
    let connect = p.connect_ms.map(|c| r3(c) + ssl.unwrap_or(0.0));
    let wait = r3(p.waiting_ms);
    let receive = r3(p.transfer_ms);
    let time = dns.unwrap_or(0.0) + connect.unwrap_or(0.0) + wait + receive;
    let opt = |v: Option<f64>| v.map_or(json!(-1), |x| json!(x));
    let t = json!({
        "blocked": -1,
        "dns": opt(dns),
        "connect": opt(connect),
        "ssl": opt(ssl),
        "send": 0,
        "wait": wait,
        "receive": receive,
    });
    (t, time)
}

fn entry(e: &Entry, page_id: &str, started_ms: i64) -> Value {
    let (t, time) = timings(e);
    let status = if e.from_cache {
        e.status.unwrap_or(200)
    } else {
        e.status.unwrap_or(0)
    };
    let chunked = e.headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked")
    });
    let fetched = !e.from_cache && e.status.is_some();
    // The head's size is known on HTTP/1.1 without chunked framing; HPACK
    // hides it on HTTP/2.
    let headers_size = if fetched && e.protocol.as_deref() == Some("http/1.1") && !chunked {
        json!(e.wire_bytes.saturating_sub(e.body_wire_bytes))
    } else {
        json!(-1)
    };
    let body_size = if fetched {
        json!(e.body_wire_bytes)
    } else {
        json!(0)
    };
    let mime = e
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| e.content_type.clone());
    let mut content = json!({
        "size": if e.from_cache { 0 } else { e.decoded_bytes },
        "mimeType": mime,
    });
    if fetched && e.decoded_bytes > e.body_wire_bytes {
        content["compression"] = json!(e.decoded_bytes - e.body_wire_bytes);
    }
    let mut response = json!({
        "status": status,
        "statusText": status_text(status),
        "httpVersion": if fetched { http_version(e) } else { "" },
        "cookies": [],
        "headers": headers(&e.headers),
        "content": content,
        "redirectURL": e.redirect_to.clone().unwrap_or_default(),
        "headersSize": headers_size,
        "bodySize": body_size,
    });
    if let Some(err) = &e.error {
        response["_error"] = json!(err);
    }
    let mut v = json!({
        "pageref": page_id,
        "startedDateTime": iso(started_ms + e.start_ms.round() as i64),
        "time": time,
        "request": {
            "method": "GET",
            "url": e.url,
            "httpVersion": if e.from_cache { "" } else { http_version(e) },
            "cookies": [],
            "headers": headers(&e.request_headers),
            "queryString": query(&e.url),
            "headersSize": -1,
            "bodySize": 0,
        },
        "response": response,
        "cache": {},
        "timings": t,
    });
    if let Some(c) = e.conn {
        v["connection"] = json!(c.to_string());
    }
    if e.from_cache {
        v["_fromCache"] = json!("disk");
    }
    v
}

fn iso(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    redline_stats::time::rfc3339(t)
}

fn page(l: &Load, id: &str, url: &str) -> Value {
    json!({
        "startedDateTime": l.started_at,
        "id": id,
        "title": format!("{} ({}): {url}", l.view.name(), l.view.describe()),
        "pageTimings": {"onContentLoad": -1, "onLoad": r3(l.elapsed_ms)},
    })
}

/// The report as a HAR 1.2 document.
pub fn har(r: &PageReport) -> Value {
    let mut pages = Vec::new();
    let mut entries = Vec::new();
    for l in &r.views {
        let id = match l.view {
            crate::load::View::First => "first",
            crate::load::View::Revalidate => "revalidate",
            crate::load::View::Cached => "cached",
        };
        pages.push(page(l, id, &r.url));
        let started = redline_stats::time::parse_rfc3339_ms(&l.started_at).unwrap_or(0);
        for e in &l.entries {
            entries.push(entry(e, id, started));
        }
    }
    json!({
        "log": {
            "version": "1.2",
            "creator": {"name": "redline", "version": env!("CARGO_PKG_VERSION")},
            "pages": pages,
            "entries": entries,
            "comment": format!(
                "redline page: {} run(s), the run whose first view took the median time; send is counted in wait",
                r.runs
            ),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_times_round_trip() {
        let s = iso(1_700_000_123_456);
        assert_eq!(
            redline_stats::time::parse_rfc3339_ms(&s),
            Some(1_700_000_123_456)
        );
    }
}
