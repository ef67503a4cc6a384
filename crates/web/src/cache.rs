//! RFC 9111 freshness for a private (browser) cache: the freshness lifetime
//! from `max-age`, else `Expires − Date`, else the heuristic 10 % of
//! `Date − Last-Modified`; the current age from `Date` and `Age`.

use crate::http::header;
use std::time::{Duration, SystemTime};

/// How long a response may be used without asking the server, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Freshness {
    /// Freshness lifetime in seconds (0: must revalidate).
    pub lifetime_s: u64,
    /// Where it came from: `max-age`, `expires`, `heuristic`, `no-store`, `no-cache`, `none`.
    pub source: &'static str,
    /// `Cache-Control: public`.
    pub public: bool,
    /// `Cache-Control: immutable`.
    pub immutable: bool,
}

fn directive(cc: &str, name: &str) -> Option<Option<String>> {
    cc.split(',').find_map(|d| {
        let d = d.trim();
        let (n, v) = match d.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"').to_string())),
            None => (d, None),
        };
        n.eq_ignore_ascii_case(name).then_some(v)
    })
}

fn date(headers: &[(String, String)], name: &str) -> Option<SystemTime> {
    header(headers, name).and_then(|v| httpdate::parse_http_date(v.trim()).ok())
}

/// The freshness lifetime of a response (status and headers).
pub fn freshness(status: u16, headers: &[(String, String)]) -> Freshness {
    let cc: String = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("cache-control"))
        .map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let public = directive(&cc, "public").is_some();
    let immutable = directive(&cc, "immutable").is_some();
    let mk = |lifetime_s, source| Freshness {
        lifetime_s,
        source,
        public,
        immutable,
    };
    if directive(&cc, "no-store").is_some() {
        return mk(0, "no-store");
    }
    if directive(&cc, "no-cache").is_some() {
        return mk(0, "no-cache");
    }
    if let Some(v) = directive(&cc, "max-age") {
        // An invalid max-age means stale (RFC 9111 §4.2.1).
        let s = v.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        return mk(s, "max-age");
    }
    if let Some(exp) = header(headers, "expires") {
        let exp = httpdate::parse_http_date(exp.trim()).ok();
        let base = date(headers, "date").unwrap_or_else(SystemTime::now);
        let s = exp
            .and_then(|e| e.duration_since(base).ok())
            .map_or(0, |d| d.as_secs());
        return mk(s, "expires");
    }
    // Heuristic freshness only for heuristically cacheable statuses.
    if matches!(
        status,
        200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    ) {
        if let (Some(lm), base) = (
            date(headers, "last-modified"),
            date(headers, "date").unwrap_or_else(SystemTime::now),
        ) {
            if let Ok(d) = base.duration_since(lm) {
                return mk(d.as_secs() / 10, "heuristic");
            }
        }
    }
    mk(0, "none")
}

/// The current age of a response received at `received` (RFC 9111 §4.2.3),
/// as seen at `now`.
pub fn current_age(
    headers: &[(String, String)],
    received: SystemTime,
    now: SystemTime,
) -> Duration {
    let apparent = date(headers, "date")
        .and_then(|d| received.duration_since(d).ok())
        .unwrap_or_default();
    let age = header(headers, "age")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or_default();
    let initial = apparent.max(age);
    initial + now.duration_since(received).unwrap_or_default()
}

/// True if a stored response may be used at `now` without asking the server.
pub fn is_fresh(
    status: u16,
    headers: &[(String, String)],
    received: SystemTime,
    now: SystemTime,
) -> bool {
    let f = freshness(status, headers);
    f.lifetime_s > 0 && current_age(headers, received, now) < Duration::from_secs(f.lifetime_s)
}

/// The conditional headers a revalidation sends, from a stored response.
pub fn validators(headers: &[(String, String)]) -> Vec<(String, String)> {
    let mut v = Vec::new();
    if let Some(e) = header(headers, "etag") {
        v.push(("If-None-Match".to_string(), e.to_string()));
    }
    if let Some(lm) = header(headers, "last-modified") {
        v.push(("If-Modified-Since".to_string(), lm.to_string()));
    }
    v
}

/// A duration in words: `30 s`, `2 h`, `7 d`, `1 y`.
pub fn human_secs(s: u64) -> String {
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        172_800..=63_071_999 => format!("{} d", s / 86_400),
        _ => format!("{:.1} y", s as f64 / 31_536_000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn lifetimes() {
        let now = SystemTime::now();
        let d = httpdate::fmt_http_date(now);
        let in_1h = httpdate::fmt_http_date(now + Duration::from_secs(3600));
        assert_eq!(
            freshness(200, &h(&[("Cache-Control", "public, max-age=600")])).lifetime_s,
            600
        );
        assert!(freshness(200, &h(&[("Cache-Control", "public, max-age=600")])).public);
        assert_eq!(
            freshness(200, &h(&[("Cache-Control", "no-cache, max-age=600")])).lifetime_s,
            0
        );
        assert_eq!(
            freshness(200, &h(&[("Cache-Control", "max-age=oops")])).lifetime_s,
            0
        );
        let f = freshness(200, &h(&[("Date", &d), ("Expires", &in_1h)]));
        assert_eq!((f.lifetime_s, f.source), (3600, "expires"));
        assert_eq!(
            freshness(200, &h(&[("Date", &d), ("Expires", "0")])).lifetime_s,
            0
        );
        let lm = httpdate::fmt_http_date(now - Duration::from_secs(1000));
        let f = freshness(200, &h(&[("Date", &d), ("Last-Modified", &lm)]));
        assert_eq!((f.lifetime_s, f.source), (100, "heuristic"));
        assert_eq!(
            freshness(500, &h(&[("Date", &d), ("Last-Modified", &lm)])).source,
            "none"
        );
    }

    #[test]
    fn age_counts() {
        let now = SystemTime::now();
        let hs = h(&[("Cache-Control", "max-age=100"), ("Age", "99")]);
        assert!(is_fresh(200, &hs, now, now));
        assert!(!is_fresh(200, &hs, now, now + Duration::from_secs(2)));
        assert_eq!(human_secs(7 * 86_400), "7 d");
    }
}
