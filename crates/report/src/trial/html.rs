//! A trial as a self-contained HTML page: the verdict, the directive diff
//! and each metric round by round (drift shows as a slope within a state).

use super::text::{change_words, show};
use super::*;
use crate::dur_us;
use std::fmt::Write as _;

/// Dots of one metric per round, in order (A and B in their colours), with
/// each state's mean as a line: drift over the trial shows as a slope.
fn round_chart(t: &TrialRecord, m: &Metric) -> String {
    const W: f64 = 640.0;
    const H: f64 = 180.0;
    const ML: f64 = 70.0;
    const MB: f64 = 26.0;
    const MT: f64 = 10.0;
    let pts: Vec<(u32, State, f64)> = t
        .rounds
        .iter()
        .filter_map(|r| (m.value)(r).map(|v| (r.n, r.state, v)))
        .filter(|p| p.2.is_finite())
        .collect();
    if pts.is_empty() {
        return String::new();
    }
    let top = pts.iter().map(|p| p.2).fold(0.0, f64::max).max(1e-9) * 1.1;
    let n = t.rounds.len().max(2) as f64;
    let x = |i: u32| ML + (i as f64 - 0.5) / n * (W - ML - 10.0);
    let y = |v: f64| MT + (1.0 - v / top) * (H - MT - MB);
    let esc = crate::html::esc;
    let mut s = format!(
        "<figure><figcaption>{} by round</figcaption><svg class=\"chart trial\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{} by round\" data-points=\"{}\">",
        esc(m.name),
        esc(m.name),
        pts.len()
    );
    let _ = write!(
        s,
        "<rect x=\"{ML}\" y=\"{MT}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#adb5bd\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"11\">{}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"11\">0</text>",
        W - ML - 10.0,
        H - MT - MB,
        ML - 4.0,
        MT + 10.0,
        esc(&show(m.unit, top)),
        ML - 4.0,
        H - MB
    );
    for (state, color) in [(State::A, "#1c5fb8"), (State::B, "#c2255c")] {
        let v: Vec<f64> = pts.iter().filter(|p| p.1 == state).map(|p| p.2).collect();
        if !v.is_empty() {
            let yy = y(mean(&v));
            let _ = write!(
                s,
                "<line x1=\"{ML}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"{color}\" stroke-dasharray=\"5 4\"><title>mean of {}: {}</title></line>",
                W - 10.0,
                state.name(),
                esc(&show(m.unit, mean(&v)))
            );
        }
    }
    for (i, state, v) in &pts {
        let color = if *state == State::A {
            "#1c5fb8"
        } else {
            "#c2255c"
        };
        let _ = write!(
            s,
            "<circle class=\"round\" data-state=\"{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{color}\"><title>round {i} ({}): {}</title></circle>\
             <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\">{i}{}</text>",
            state.name(),
            x(*i),
            y(*v),
            state.name(),
            esc(&show(m.unit, *v)),
            x(*i),
            H - 8.0,
            state.name()
        );
    }
    s.push_str("</svg></figure>\n");
    s
}

/// A self-contained HTML page of the trial: the verdict table, the directive
/// diff, and each metric by round (every round drawn, in order).
pub fn html(t: &TrialRecord) -> String {
    let esc = crate::html::esc;
    let mut s = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    let title = format!("redline trial {}", t.label);
    let _ = writeln!(
        s,
        "<title>{}</title><style>body{{font:15px/1.45 system-ui,sans-serif;max-width:1000px;margin:24px auto;padding:0 16px}}\
         table{{border-collapse:collapse}}th,td{{padding:3px 12px 3px 0;text-align:left}}td.n{{text-align:right}}\
         .better{{color:#2b8a3e;font-weight:600}}.worse{{color:#c92a2a;font-weight:600}}figure{{margin:8px 0}}</style></head><body>",
        esc(&title)
    );
    let _ = writeln!(s, "<h1>{}</h1>", esc(&title));
    let _ = writeln!(
        s,
        "<p>{} {} — {}</p><p>A (before): <code>{}</code><br>B (after): <code>{}</code></p>",
        esc(&t.method),
        esc(&t.url),
        esc(&t.load),
        esc(&t.before),
        esc(&t.after)
    );
    if let Some(st) = &t.stopped {
        let _ = writeln!(s, "<p class=\"worse\">Stopped early: {}</p>", esc(st));
    }
    let diff = directive_diff(t);
    if !diff.is_empty() {
        let _ = writeln!(
            s,
            "<h2>Configuration</h2><pre>{}</pre>",
            esc(diff.trim_end())
        );
    }
    let _ = writeln!(
        s,
        "<h2>Verdict</h2><table class=\"verdict\"><tr><th>metric</th><th>A</th><th>B</th><th>change [interval]</th><th>verdict</th></tr>"
    );
    for m in &t.verdict.metrics {
        let class = match m.call {
            Call::Better => "better",
            Call::Worse => "worse",
            _ => "",
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"{class}\">{}</td></tr>",
            esc(&m.metric),
            esc(&show(m.unit, m.a)),
            esc(&show(m.unit, m.b)),
            esc(&change_words(m)),
            m.call.words()
        );
    }
    s.push_str("</table>\n<h2>Every round</h2>\n<p>Blue: A, red: B; the dashed lines are each state's mean. A slope across rounds of one state is drift, which the interleaving (A B B A …) spreads over both states.</p>\n");
    for m in &METRICS {
        s.push_str(&round_chart(t, m));
    }
    s.push_str("<table class=\"rounds\"><tr><th>#</th><th>state</th><th>run</th><th>started</th><th>req/s</th><th>p50</th><th>p99</th><th>errors</th></tr>\n");
    for r in &t.rounds {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.2}%</td></tr>",
            r.n,
            r.state.name(),
            r.run_id.map_or("-".into(), |i| i.to_string()),
            esc(&r.started_at),
            r.requests_per_sec,
            dur_us(r.p50_us),
            dur_us(r.p99_us),
            r.error_share * 100.0
        );
    }
    s.push_str("</table></body></html>\n");
    s
}
