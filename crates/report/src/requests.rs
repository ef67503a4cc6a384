//! The per-request table of a scenario run (flood's per-URL summary, with
//! percentiles and failed checks).

use crate::{count, dur_us};
use redline_stats::RunRecord;
use std::fmt::Write;

/// The per-request section of the text report (empty for plain runs).
pub fn text(rec: &RunRecord) -> String {
    let mut o = String::new();
    if rec.requests.is_empty() {
        return o;
    }
    if let Some(s) = &rec.config.scenario {
        let _ = writeln!(o, "Scenario:         {s}");
    }
    let w = rec
        .requests
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 40);
    let _ = writeln!(
        o,
        "  {:<w$}{:>9}{:>9}{:>8}{:>8}{:>8}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "request",
        "sent",
        "ok",
        "4xx5xx",
        "errors",
        "checks✗",
        "connect",
        "waiting",
        "transfer",
        "mean",
        "p50",
        "p95",
        "p99",
    );
    let mean = |h: &redline_stats::Hist| {
        if h.is_empty() {
            "-".to_string()
        } else {
            dur_us(h.mean())
        }
    };
    let pct = |h: &redline_stats::Hist, p: f64| {
        if h.is_empty() {
            "-".to_string()
        } else {
            dur_us(h.percentile(p) as f64)
        }
    };
    for r in &rec.requests {
        let name: String = r.name.chars().take(w).collect();
        let _ = writeln!(
            o,
            "  {name:<w$}{:>9}{:>9}{:>8}{:>8}{:>8}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            count(r.sent),
            count(r.completed.saturating_sub(r.bad_status)),
            count(r.bad_status),
            count(r.errors),
            count(r.failed_checks),
            mean(&r.connect),
            mean(&r.waiting),
            mean(&r.transfer),
            mean(&r.latency),
            pct(&r.latency, 50.0),
            pct(&r.latency, 95.0),
            pct(&r.latency, 99.0),
        );
    }
    let failing: Vec<_> = rec
        .requests
        .iter()
        .flat_map(|r| {
            r.checks
                .iter()
                .filter(|c| c.failed > 0)
                .map(move |c| (r.name.as_str(), c))
        })
        .collect();
    let extraction: Vec<_> = rec
        .requests
        .iter()
        .filter(|r| r.failed_extractions > 0)
        .collect();
    if !failing.is_empty() || !extraction.is_empty() {
        o.push_str("  Failed checks (counted, the run went on):\n");
        for (name, c) in failing {
            let _ = writeln!(
                o,
                "    {name}: {} failed {} of {}",
                c.check,
                count(c.failed),
                count(c.failed + c.passed)
            );
        }
        for r in extraction {
            let _ = writeln!(
                o,
                "    {}: {} extraction{} found nothing (the variable stayed unset)",
                r.name,
                count(r.failed_extractions),
                if r.failed_extractions == 1 { "" } else { "s" }
            );
        }
    }
    o.push('\n');
    o
}
