//! A comparison in words: the text report, what changed in the
//! configuration between the runs, and their knees and diagnoses.

use super::*;

pub(super) fn rate(l: &redline_stats::LoadModel) -> Option<u64> {
    match l {
        redline_stats::LoadModel::Open { rate, .. } => Some((rate * 1000.0) as u64),
        _ => None,
    }
}

/// A value of a row for people, in its unit (errors with their share).
pub fn show(unit: Unit, v: f64, r: &RunRecord) -> String {
    match unit {
        Unit::PerSec => format!("{v:.2}"),
        Unit::Micros => dur_us(v),
        Unit::BytesPerSec => format!("{}/s", bytes(v)),
        Unit::Share => format!("{:.2}%", v * 100.0),
        Unit::Errors => {
            let fin = r.counters.completed + r.counters.failed;
            if fin == 0 {
                count(v as u64)
            } else {
                format!("{} ({:.2}%)", count(v as u64), v * 100.0 / fin as f64)
            }
        }
    }
}

/// The server directives that changed between A and B above the effect on
/// p99 and req/s, as one table; what is missing when a side has no recorded
/// configuration; empty when neither has one.
pub fn config_changes(c: &Comparison, a: &RunRecord, b: &RunRecord) -> String {
    let mut o = String::new();
    let (ca, cb) = match (&a.server_config, &b.server_config) {
        (None, None) => return o,
        (Some(_), None) | (None, Some(_)) => {
            let side = if a.server_config.is_some() { "A" } else { "B" };
            let _ = writeln!(
                o,
                "Server configuration: recorded for {side} only (run the other with --server-config FILE to see what changed)\n"
            );
            return o;
        }
        (Some(x), Some(y)) => (x, y),
    };
    if ca.server != cb.server {
        let _ = writeln!(
            o,
            "Server configuration: A is {}, B is {}: directives not compared\n",
            ca.server, cb.server
        );
        return o;
    }
    let ch = ca.changes(cb);
    if ch.is_empty() {
        let _ = writeln!(
            o,
            "Server configuration: no tuning directive changed ({}, {} directives recorded)\n",
            ca.server,
            ca.directives.len()
        );
        return o;
    }
    let pct = |m: &str| {
        c.rows
            .iter()
            .find(|r| r.metric == m)
            .and_then(|r| {
                let x = r.change_pct.filter(|x| x.is_finite())?;
                Some(match r.verdict {
                    Verdict::Better | Verdict::Worse => format!("{x:+.0} %"),
                    v => format!("{x:+.0} % ({})", v.words()),
                })
            })
            .unwrap_or_else(|| "-".into())
    };
    let w = ch.iter().map(|x| x.0.len()).max().unwrap_or(0).max(9) + 2;
    let _ = writeln!(o, "Server configuration changed ({}):", ca.server);
    let _ = writeln!(o, "  {:<w$}{:>16}    B", "directive", "A");
    for (n, x, y) in &ch {
        let _ = writeln!(o, "  {n:<w$}{x:>16} -> {y}");
    }
    let list: Vec<String> = ch
        .iter()
        .map(|(n, x, y)| format!("{n} {x} -> {y}"))
        .collect();
    let _ = writeln!(
        o,
        "  {}: p99 {}, req/s {}\n",
        list.join(", "),
        pct("Latency p99"),
        pct("Requests/sec")
    );
    o
}

pub(super) fn knee_words(r: &RunRecord) -> String {
    let Some(plan) = r.config.stages.as_ref() else {
        return "not a staged run".into();
    };
    match &r.knee {
        Some(k) => format!(
            "{} {} ({} gave out next)",
            redline_stats::stages::fmt_level(k.level),
            plan.unit_name(),
            k.reason
        ),
        None => {
            match redline_stats::stages::by_level(plan, &r.series, &r.config.status_rule()).last() {
                Some(p) => format!(
                    "no knee up to {} {}",
                    redline_stats::stages::fmt_level(p.level),
                    plan.unit_name()
                ),
                None => "no knee".into(),
            }
        }
    }
}

pub(super) fn diagnosis_words(r: &RunRecord) -> String {
    let Some(d) = &r.diagnosis else {
        return "none".into();
    };
    let mut s = d.resource.clone();
    if !d.directive.is_empty() {
        s.push_str(&format!(" ({}", d.directive));
        if let Some(l) = d.limit {
            s.push_str(&format!(" = {l}"));
        }
        s.push(')');
    }
    if let Some(l) = d.at_level {
        s.push_str(&format!(" at {}", redline_stats::stages::fmt_level(l)));
    } else if let Some(t) = d.at_s {
        s.push_str(&format!(" at {t:.1} s"));
    }
    s
}

/// The knee and the diagnosis of each run side by side, when either is a staged run.
pub fn knees(a: &RunRecord, b: &RunRecord) -> String {
    let mut o = String::new();
    if a.config.stages.is_none() && b.config.stages.is_none() {
        return o;
    }
    let (ka, kb) = (knee_words(a), knee_words(b));
    let (da, db) = (diagnosis_words(a), diagnosis_words(b));
    let w = ka.len().max(da.len()).max(1) + 4;
    let _ = writeln!(o, "{:<11}{:<w$}B", "", "A");
    let _ = writeln!(o, "{:<11}{ka:<w$}{kb}", "Knee");
    let _ = writeln!(o, "{:<11}{da:<w$}{db}", "Diagnosis");
    for (side, r) in [("A", a), ("B", b)] {
        if let Some(d) = &r.diagnosis {
            if !d.advice.is_empty() {
                let _ = writeln!(o, "  {side}: {}", d.advice);
            }
        }
    }
    o.push('\n');
    o
}

/// The comparison as a text table; `name_a`/`name_b` say what A and B are.
pub fn text(c: &Comparison, a: &RunRecord, b: &RunRecord, name_a: &str, name_b: &str) -> String {
    crate::escape::clean_text(&text_unescaped(c, a, b, name_a, name_b)).into_owned()
}

pub(super) fn text_unescaped(
    c: &Comparison,
    a: &RunRecord,
    b: &RunRecord,
    name_a: &str,
    name_b: &str,
) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "A (before): {name_a}, {}, {}",
        a.started_at, a.config.url
    );
    let _ = writeln!(
        o,
        "B (after):  {name_b}, {}, {}",
        b.started_at, b.config.url
    );
    o.push('\n');
    o.push_str(&config_changes(c, a, b));
    o.push_str(&knees(a, b));
    let vw = c
        .rows
        .iter()
        .map(|r| r.verdict.words().chars().count())
        .max()
        .unwrap_or(0)
        .max(22);
    let _ = writeln!(
        o,
        "{:<14}{:>16}{:>16}{:>10}  {:<vw$}{:>11}  test",
        "", "A", "B", "change", "verdict", "confidence"
    );
    for r in &c.rows {
        let ch = match r.change_pct {
            Some(x) if x.is_finite() => format!("{x:+.1}%"),
            _ => "new".into(),
        };
        let conf = r
            .confidence
            .map(|x| format!("{:.1}%", x * 100.0))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            o,
            "{:<14}{:>16}{:>16}{:>10}  {:<vw$}{:>11}  {}",
            r.metric,
            show(r.unit, r.a, a),
            show(r.unit, r.b, b),
            ch,
            r.verdict.words(),
            conf,
            r.test
        );
    }
    if c.runs.0 >= 2 && c.runs.1 >= 2 {
        let _ = writeln!(
            o,
            "\nEach run is one sample ({} of A, {} of B; values are means over the runs): a verdict needs {:.0}% confidence from a Welch t-test over the runs and a change of at least {MIN_EFFECT_PCT}%; errors count failures and statuses outside each run's --expect-status (default 2xx and 3xx).",
            c.runs.0,
            c.runs.1,
            LEVEL * 100.0
        );
    } else {
        let _ = writeln!(
            o,
            "\nTwo single runs: a run's seconds are not independent and do not measure run-to-run noise, so each test counts the effective seconds n(1-r)/(1+r) (r: lag-1 autocorrelation) and a verdict needs {:.0}% confidence and a change of at least {SINGLE_MIN_EFFECT_PCT}% and twice the noisier run's per-second variation (runs under {} s: latency claims need 2x, none for p99). For a verdict over run-to-run noise: `redline run --repeat N --label L` on each side, then `redline compare LA LB`.",
            LEVEL * 100.0,
            MIN_SECONDS + 2
        );
    }
    if !c.warnings.is_empty() {
        o.push_str("\nWARNING: these runs may not be comparable:\n");
        for w in &c.warnings {
            let _ = writeln!(o, "  ! {w}");
        }
    }
    o
}
