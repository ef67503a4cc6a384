//! A trial in words: the directive diff (`compare`'s), the verdict table
//! and every round.

use super::*;
use crate::{bytes, count, dur_us};
use std::fmt::Write as _;

pub(super) fn show(unit: Unit, v: f64) -> String {
    match unit {
        Unit::PerSec => format!("{v:.1}"),
        Unit::Micros => dur_us(v),
        Unit::Share => format!("{:.2}%", v * 100.0),
        Unit::Bytes => bytes(v),
        Unit::Kib => bytes(v * 1024.0),
        Unit::Millis => format!("{v:.3}ms"),
        Unit::Level => format!("{v:.0}"),
    }
}

fn show_signed(unit: Unit, v: f64) -> String {
    let s = show(unit, v.abs());
    if v < 0.0 {
        format!("-{s}")
    } else {
        format!("+{s}")
    }
}

/// The change with its interval, in % of A when A is not zero.
pub(super) fn change_words(m: &MetricVerdict) -> String {
    match (m.change_pct, m.ci_pct) {
        (Some(c), Some((lo, hi))) if m.call != Call::NotTested => {
            format!("{c:+.1}% [{lo:+.1}%, {hi:+.1}%]")
        }
        _ if m.call != Call::NotTested => format!(
            "{} [{}, {}]",
            show_signed(m.unit, m.diff),
            show_signed(m.unit, m.ci.0),
            show_signed(m.unit, m.ci.1)
        ),
        _ => "-".into(),
    }
}

/// The directives that changed from A to B with the effect on p99 and
/// req/s, as `compare` prints them (`compare::config_changes`, given the
/// recorded configurations and this verdict); empty when neither side
/// recorded one.
pub fn directive_diff(t: &TrialRecord) -> String {
    use crate::compare::{Comparison, Row, Unit as CUnit, Verdict as CVerdict};
    if t.config_a.is_none() && t.config_b.is_none() {
        return String::new();
    }
    let side = |c: &Option<ServerConfig>| {
        let load = redline_stats::LoadModel::Closed {
            connections: 1,
            requests: None,
            duration_s: None,
        };
        let mut r = RunRecord::new(
            redline_stats::RunConfig::get(&t.url, load),
            redline_stats::Environment::default(),
            t.started_at.clone(),
        );
        r.server_config = c.clone();
        r
    };
    let rows = t
        .verdict
        .metrics
        .iter()
        .map(|m| Row {
            metric: match m.metric.as_str() {
                "Requests/sec" => "Requests/sec",
                "Latency p99" => "Latency p99",
                _ => "",
            },
            unit: CUnit::PerSec,
            a: m.a,
            b: m.b,
            change_pct: m.change_pct,
            verdict: match m.call {
                Call::Better => CVerdict::Better,
                Call::Worse => CVerdict::Worse,
                Call::NoClearDifference => CVerdict::NoChange,
                Call::NotTested => CVerdict::NotTested,
            },
            confidence: None,
            test: String::new(),
        })
        .collect();
    let c = Comparison {
        rows,
        warnings: Vec::new(),
        runs: (0, 0),
    };
    crate::compare::config_changes(&c, &side(&t.config_a), &side(&t.config_b))
}

/// The text report: what was switched, the directive diff, the verdict per
/// metric, then every round.
pub fn text(t: &TrialRecord) -> String {
    let clean = crate::escape::clean;
    let mut o = String::new();
    let (na, nb) = (
        t.rounds.iter().filter(|r| r.state == State::A).count(),
        t.rounds.iter().filter(|r| r.state == State::B).count(),
    );
    let _ = writeln!(
        o,
        "Trial {}: {} {} — {}",
        clean(&t.label),
        clean(&t.method),
        clean(&t.url),
        clean(&t.load)
    );
    let _ = writeln!(
        o,
        "  {na} rounds of A and {nb} of B, interleaved (A B B A …), settle {:.1}s after each switch, {:.0}s in all",
        t.settle_s, t.duration_s
    );
    let _ = writeln!(o, "  A (before): {}", clean(&t.before));
    let _ = writeln!(o, "  B (after):  {}", clean(&t.after));
    if let Some(f) = &t.from_tune {
        let _ = writeln!(
            o,
            "  from tune finding {}: {}\n  fixed copy {} ({})",
            clean(&f.id),
            clean(&f.message),
            clean(&f.fixed_copy),
            clean(&f.config_test)
        );
    }
    if let Some(s) = &t.stopped {
        let _ = writeln!(o, "  stopped early: {}", clean(s));
    }
    if !t.restored {
        o.push_str("  WARNING: the server could not be put back in state A: check it\n");
    }
    o.push('\n');
    o.push_str(&directive_diff(t));
    let v = &t.verdict;
    let level = v.metrics.first().map_or(LEVEL, |m| m.level);
    let _ = writeln!(
        o,
        "Verdict (B vs A; {:.0}% intervals from the rounds, {:.1}% each over {} metrics):",
        LEVEL * 100.0,
        level * 100.0,
        v.tested
    );
    let _ = writeln!(
        o,
        "  {:<26}{:>12}{:>12}  {:<30}verdict",
        "metric", "A", "B", "change [interval]"
    );
    for m in &v.metrics {
        let _ = writeln!(
            o,
            "  {:<26}{:>12}{:>12}  {:<30}{}",
            m.metric,
            show(m.unit, m.a),
            show(m.unit, m.b),
            change_words(m),
            m.call.words()
        );
    }
    let better: Vec<&str> = v
        .metrics
        .iter()
        .filter(|m| m.call == Call::Better)
        .map(|m| m.metric.as_str())
        .collect();
    let worse: Vec<&str> = v
        .metrics
        .iter()
        .filter(|m| m.call == Call::Worse)
        .map(|m| m.metric.as_str())
        .collect();
    o.push('\n');
    if !v.significant {
        o.push_str("In short: no clear difference between A and B.\n");
    } else {
        let mut parts = Vec::new();
        if !better.is_empty() {
            parts.push(format!("better on {}", better.join(", ")));
        }
        if !worse.is_empty() {
            parts.push(format!("worse on {}", worse.join(", ")));
        }
        let _ = writeln!(o, "In short: B is {}.", parts.join("; "));
    }
    let _ = writeln!(
        o,
        "\nRounds:\n  {:>3}  {:<5}{:>6}  {:>12}{:>10}{:>10}{:>9}{:>12}",
        "#", "state", "run", "req/s", "p50", "p99", "errors", "bytes/resp"
    );
    for r in &t.rounds {
        let _ = writeln!(
            o,
            "  {:>3}  {:<5}{:>6}  {:>12.1}{:>10}{:>10}{:>9}{:>12}{}",
            r.n,
            r.state.name(),
            r.run_id.map_or("-".into(), |i| i.to_string()),
            r.requests_per_sec,
            dur_us(r.p50_us),
            dur_us(r.p99_us),
            format!("{:.2}%", r.error_share * 100.0),
            bytes(r.bytes_per_response),
            if r.interrupted {
                "  (interrupted: left out)"
            } else if r.client_limited {
                "  (client-limited)"
            } else {
                ""
            }
        );
    }
    let done: u64 = t.rounds.iter().map(|r| r.completed).sum();
    let _ = writeln!(o, "  {} responses in all", count(done));
    o
}
