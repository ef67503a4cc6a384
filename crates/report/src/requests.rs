//! The per-request tables of a scenario run (flood's per-URL summary, with
//! percentiles and failed checks): the counts of each named request, then
//! each request's connect / waiting / transfer / total phases with their
//! sample count, mean, p50, p95 and p99.

use crate::{count, dur_us};
use redline_stats::{Hist, Journeys, RunRecord};
use std::fmt::Write;

/// The journeys line of an open-loop session run: how many arrived,
/// started, completed, were abandoned (and why), were in flight at the end
/// or never started; then the completed journeys' durations.
pub fn journeys_text(j: &Journeys) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Journeys:         {} arrived, {} started, {} completed, {} abandoned \
         ({} failed check, {} error, {} stopped), {} in flight at end, {} not started",
        count(j.arrived),
        count(j.started),
        count(j.completed),
        count(j.abandoned),
        count(j.abandoned_check),
        count(j.abandoned_error),
        count(j.abandoned_stop),
        count(j.in_flight_at_end),
        count(j.not_started),
    );
    if !j.duration.is_empty() {
        let d = &j.duration;
        let _ = writeln!(
            o,
            "Journey time:     mean {}, p50 {}, p95 {}, p99 {} (intended start to last answer)",
            dur_us(d.mean()),
            dur_us(d.percentile(50.0) as f64),
            dur_us(d.percentile(95.0) as f64),
            dur_us(d.percentile(99.0) as f64),
        );
    }
    o
}

/// The per-request section of the text report (empty for plain runs).
pub fn text(rec: &RunRecord) -> String {
    let mut o = String::new();
    if rec.requests.is_empty() {
        return o;
    }
    if let Some(s) = &rec.config.scenario {
        let _ = writeln!(o, "Scenario:         {s}");
    }
    if let Some(j) = &rec.journeys {
        o.push_str(&journeys_text(j));
    }
    let w = rec
        .requests
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0)
        .clamp("request".len(), 40);
    let _ = writeln!(
        o,
        "  {:<w$}{:>9}{:>9}{:>8}{:>8}{:>8}",
        "request", "sent", "ok", "status✗", "errors", "checks✗",
    );
    let rule = rec.config.status_rule();
    for r in &rec.requests {
        let refused = r.refused(&rule);
        let name: String = r.name.chars().take(w).collect();
        let _ = writeln!(
            o,
            "  {name:<w$}{:>9}{:>9}{:>8}{:>8}{:>8}",
            count(r.sent),
            count(r.completed.saturating_sub(refused)),
            count(refused),
            count(r.errors),
            count(r.failed_checks),
        );
    }
    // Each phase with its own percentiles: connect counts only the
    // connections opened for the request (hence its own sample count).
    let _ = writeln!(
        o,
        "  {:<w$}  {:<9}{:>9}{:>10}{:>10}{:>10}{:>10}",
        "request", "phase", "samples", "mean", "p50", "p95", "p99",
    );
    let cell = |h: &Hist, us: f64| {
        if h.is_empty() {
            "-".to_string()
        } else {
            dur_us(us)
        }
    };
    for r in &rec.requests {
        let name: String = r.name.chars().take(w).collect();
        for (i, (phase, h)) in [
            ("connect", &r.connect),
            ("waiting", &r.waiting),
            ("transfer", &r.transfer),
            ("total", &r.latency),
        ]
        .into_iter()
        .enumerate()
        {
            let pct = |p: f64| cell(h, h.percentile(p) as f64);
            let _ = writeln!(
                o,
                "  {:<w$}  {phase:<9}{:>9}{:>10}{:>10}{:>10}{:>10}",
                if i == 0 { name.as_str() } else { "" },
                count(h.count()),
                cell(h, h.mean()),
                pct(50.0),
                pct(95.0),
                pct(99.0),
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use redline_stats::requests::RequestStats;
    use redline_stats::{Environment, LoadModel, RunConfig};

    fn record() -> RunRecord {
        let cfg = RunConfig::get(
            "http://x/",
            LoadModel::Closed {
                connections: 2,
                requests: None,
                duration_s: Some(1.0),
            },
        );
        let mut rec = RunRecord::new(cfg, Environment::default(), "t".into());
        let mut home = RequestStats::new("home", "GET", "/", &[]);
        home.sent = 100;
        home.completed = 100;
        // connect: 2 new connections, 1 ms and 3 ms.
        home.connect.record_us(1_000);
        home.connect.record_us(3_000);
        // waiting 1..=100 ms, transfer 100 µs, total waiting + 2 ms.
        for i in 1..=100u64 {
            home.waiting.record_us(i * 1_000);
            home.transfer.record_us(100);
            home.latency.record_us(i * 1_000 + 2_000);
        }
        let mut login = RequestStats::new("login", "POST", "/login", &[]);
        login.sent = 3;
        login.errors = 3;
        rec.requests = vec![home, login];
        rec
    }

    /// The cells of the phase row `phase` of request `name` (or of the row
    /// after it, for phases other than the first).
    fn phase_row<'a>(t: &'a str, name: &str, phase: &str) -> Vec<&'a str> {
        let lines: Vec<&str> = t.lines().collect();
        let first = lines
            .iter()
            .position(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                c.len() == 7 && c[0] == name && c[1] == "connect"
            })
            .unwrap_or_else(|| panic!("no phase rows for {name}: {t}"));
        let row = lines[first..first + 4]
            .iter()
            .find(|l| l.split_whitespace().any(|c| c == phase))
            .unwrap_or_else(|| panic!("no {phase} row for {name}: {t}"));
        let c: Vec<&str> = row.split_whitespace().collect();
        c[c.len() - 5..].to_vec()
    }

    fn ms(cell: &str) -> f64 {
        if let Some(v) = cell.strip_suffix("ms") {
            v.parse().unwrap()
        } else if let Some(v) = cell.strip_suffix("µs") {
            v.parse::<f64>().unwrap() / 1000.0
        } else {
            panic!("not a duration: {cell}")
        }
    }

    #[test]
    fn each_phase_has_mean_and_percentiles() {
        let t = text(&record());
        let header = t
            .lines()
            .find(|l| l.contains("phase"))
            .unwrap_or_else(|| panic!("{t}"));
        let cols: Vec<&str> = header.split_whitespace().collect();
        assert_eq!(
            cols,
            ["request", "phase", "samples", "mean", "p50", "p95", "p99"]
        );
        // The counts table is still there.
        assert!(
            t.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["home", "100", "100", "0", "0", "0"]),
            "{t}"
        );
        let close = |got: &str, want: f64| {
            let g = ms(got);
            assert!((g - want).abs() <= want * 0.02, "{got} vs {want} ms\n{t}");
        };
        let c = phase_row(&t, "home", "connect");
        assert_eq!(c[0], "2");
        close(c[1], 2.0);
        close(c[2], 1.0);
        close(c[4], 3.0);
        let w = phase_row(&t, "home", "waiting");
        assert_eq!(w[0], "100");
        close(w[1], 50.5);
        close(w[2], 50.0);
        close(w[3], 95.0);
        close(w[4], 99.0);
        let x = phase_row(&t, "home", "transfer");
        assert_eq!(x[0], "100");
        for cell in &x[1..] {
            close(cell, 0.1);
        }
        let total = phase_row(&t, "home", "total");
        close(total[2], 52.0);
        close(total[4], 101.0);
        // Percentiles are ordered within each phase.
        for p in ["connect", "waiting", "transfer", "total"] {
            let r = phase_row(&t, "home", p);
            let v: Vec<f64> = r[2..].iter().map(|c| ms(c)).collect();
            assert!(v.windows(2).all(|w| w[0] <= w[1]), "{p}: {r:?}");
        }
        // A request without responses shows dashes, not zeros.
        let l = phase_row(&t, "login", "waiting");
        assert_eq!(l, ["0", "-", "-", "-", "-"]);
    }

    #[test]
    fn journeys_line_says_how_every_journey_ended() {
        let mut rec = record();
        let mut j = redline_stats::Journeys {
            arrived: 1250,
            started: 1200,
            not_started: 50,
            completed: 1180,
            abandoned: 14,
            abandoned_check: 3,
            abandoned_error: 1,
            abandoned_stop: 10,
            in_flight_at_end: 6,
            ..Default::default()
        };
        j.duration.record_us(2_000_000);
        rec.journeys = Some(j);
        let t = text(&rec);
        assert!(
            t.contains(
                "Journeys:         1,250 arrived, 1,200 started, 1,180 completed, 14 abandoned \
             (3 failed check, 1 error, 10 stopped), 6 in flight at end, 50 not started"
            ),
            "{t}"
        );
        assert!(t.contains("Journey time:     mean 2.00s"), "{t}");
        // Plain scenario runs have no journeys line.
        assert!(!text(&record()).contains("Journeys:"));
    }
}
