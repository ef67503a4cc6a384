//! The replay section of the text report (`redline replay`): what the
//! access log held (lines kept, other methods, bad lines with the first few
//! shown escaped), how its times were replayed, the status codes of the log
//! next to the replayed ones, the per-URL table, and the URLs whose status
//! changed (a page that was 200 and is now 404). A 304 or 206 in the log
//! counts as matching a 200: the log has no request headers, so the replay
//! cannot send the `If-None-Match` or `Range` that caused it.

use crate::escape::clean;
use crate::{count, dur_us};
use redline_stats::{RequestStats, RunRecord};
use std::fmt::Write;

/// URLs listed in the text report's per-URL table (all are in the JSON).
pub const TEXT_URLS: usize = 20;
/// Changed URLs listed in the text report.
pub const TEXT_CHANGED: usize = 50;

/// Whether `now` answers a request the log recorded as `was`.
pub fn same_status(was: u16, now: u16) -> bool {
    was == now || (now == 200 && matches!(was, 206 | 304))
}

/// `200 ×48, 404 ×2`: a request's replayed statuses.
fn statuses(r: &RequestStats) -> String {
    let mut v: Vec<String> = r
        .statuses
        .iter()
        .map(|(k, n)| format!("{} ×{}", clean(k), count(*n)))
        .collect();
    let failed = r.errors;
    if failed > 0 {
        v.push(format!("failed ×{}", count(failed)));
    }
    let unanswered = r.sent.saturating_sub(r.completed).saturating_sub(r.errors);
    if unanswered > 0 {
        v.push(format!("no answer ×{}", count(unanswered)));
    }
    if v.is_empty() {
        "not sent".into()
    } else {
        v.join(", ")
    }
}

/// The requests of `r` whose answer differs from the log's status.
pub fn changed(r: &RequestStats) -> u64 {
    let Some(was) = r.original_status else {
        return 0;
    };
    r.statuses
        .iter()
        .filter(|(k, _)| k.parse::<u16>().map_or(true, |now| !same_status(was, now)))
        .map(|(_, n)| *n)
        .sum::<u64>()
        + r.errors
}

/// The replay section (empty unless the record is a replay's).
pub fn text(rec: &RunRecord) -> String {
    let mut o = String::new();
    let Some(s) = &rec.replay else {
        return o;
    };
    let _ = writeln!(
        o,
        "Replay:           {}{} ({}): {} lines, {} replayed, {} other methods, {} bad{}",
        clean(&s.log),
        if s.gzip { " (gzip)" } else { "" },
        clean(&s.format),
        count(s.lines),
        count(s.kept),
        count(s.other_methods),
        count(s.bad_lines),
        if s.cut > 0 {
            format!(", {} left out (-n or the limit)", count(s.cut))
        } else {
            String::new()
        }
    );
    let span = dur_us(s.span_s * 1e6);
    match (s.speed, s.rate) {
        (_, Some(r)) => {
            let _ = writeln!(
                o,
                "Schedule:         flattened to {r} req/s (the log spans {span})"
            );
        }
        (Some(x), None) => {
            let _ = writeln!(
                o,
                "Schedule:         the log's arrival times at {x}x: its {span} in {} (each second's requests spread evenly over it)",
                dur_us(s.span_s / x * 1e6)
            );
        }
        (None, None) => {}
    }
    if !s.bad_examples.is_empty() {
        let _ = writeln!(
            o,
            "Bad lines:        {} (first {} shown)",
            count(s.bad_lines),
            s.bad_examples.len()
        );
        for b in &s.bad_examples {
            let _ = writeln!(
                o,
                "  line {}: {}: \"{}\"",
                b.line,
                clean(&b.why),
                clean(&b.text)
            );
        }
    }
    // Status codes: the log's next to the replay's.
    let mut codes: Vec<&String> = s
        .original_statuses
        .keys()
        .chain(rec.status_codes.keys())
        .collect();
    codes.sort();
    codes.dedup();
    let _ = writeln!(o, "Statuses:         {:>10} {:>10}", "in log", "replayed");
    for c in codes {
        let _ = writeln!(
            o,
            "  {:<16}{:>10} {:>10}",
            clean(c),
            count(s.original_statuses.get(c).copied().unwrap_or(0)),
            count(rec.status_codes.get(c).copied().unwrap_or(0))
        );
    }
    if rec.counters.failed > 0 {
        let _ = writeln!(
            o,
            "  {:<16}{:>10} {:>10}",
            "failed",
            "",
            count(rec.counters.failed)
        );
    }
    let w = rec
        .requests
        .iter()
        .take(TEXT_URLS)
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(10, 50);
    let _ = writeln!(
        o,
        "\n  {:<w$}{:>9}{:>10}{:>10}  replayed",
        "URL (status in log)", "requests", "p50", "p99"
    );
    for r in rec.requests.iter().take(TEXT_URLS) {
        let name: String = clean(&r.name).chars().take(w).collect();
        let (p50, p99) = if r.latency.is_empty() {
            ("-".to_string(), "-".to_string())
        } else {
            (
                dur_us(r.latency.percentile(50.0) as f64),
                dur_us(r.latency.percentile(99.0) as f64),
            )
        };
        let _ = writeln!(
            o,
            "  {name:<w$}{:>9}{p50:>10}{p99:>10}  {}",
            count(r.sent),
            statuses(r)
        );
    }
    if rec.requests.len() > TEXT_URLS {
        let _ = writeln!(
            o,
            "  … {} more (all in -o json)",
            count((rec.requests.len() - TEXT_URLS) as u64)
        );
    }
    if s.other_urls > 0 {
        let _ = writeln!(
            o,
            "  ({} URLs beyond the breakdown are grouped as '(other URLs)'; --breakdown)",
            count(s.other_urls)
        );
    }
    let changed: Vec<&RequestStats> = rec.requests.iter().filter(|r| changed(r) > 0).collect();
    if changed.is_empty() {
        o.push_str("\nChanged:          none: every replayed answer had the log's status\n");
    } else {
        let _ = writeln!(
            o,
            "\nChanged:          {} URL{} answered otherwise than the log says (log → replay)",
            count(changed.len() as u64),
            if changed.len() == 1 { "" } else { "s" }
        );
        for r in changed.iter().take(TEXT_CHANGED) {
            let _ = writeln!(
                o,
                "  {}  {} → {}",
                clean(&r.name),
                r.original_status.unwrap_or(0),
                statuses(r)
            );
        }
        if changed.len() > TEXT_CHANGED {
            let _ = writeln!(
                o,
                "  … {} more (all in -o json)",
                count((changed.len() - TEXT_CHANGED) as u64)
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_gone_is_listed_as_changed() {
        let mut r = RequestStats::new("GET /gone.html (200)", "GET", "/gone.html", &[]);
        r.original_status = Some(200);
        r.sent = 3;
        r.completed = 3;
        for _ in 0..3 {
            r.count_status(404);
        }
        assert_eq!(changed(&r), 3);
        assert_eq!(statuses(&r), "404 ×3");
        let mut ok = RequestStats::new("GET /a (304)", "GET", "/a", &[]);
        ok.original_status = Some(304);
        ok.count_status(200);
        assert_eq!(changed(&ok), 0);
        assert!(same_status(206, 200) && !same_status(200, 304));
    }
}
