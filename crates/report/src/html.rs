//! A self-contained HTML report: one file that opens offline, with charts
//! drawn here as inline SVG (no script or style is fetched from anywhere).
//!
//! One run, or two overlaid (before/after: the first solid, the second
//! dashed): a summary table, the latency percentile curve on a log axis,
//! latency (p50/p90/p99) and throughput over time, errors and status classes
//! over time with the status codes and errors by kind, the connect/waiting/transfer phases,
//! and for a watched server (`--watch`) one group per host: its per-stage table and its
//! memory, CPU, process count, MemAvailable and swap over time.

use crate::{bytes, count, dur_us};
use redline_stats::stages::StageSummary;
use redline_stats::watch::{HostWatch, PeakMean, WatchSummary};
use redline_stats::{Hist, RunRecord};
use std::fmt::Write as _;

mod chart;
mod compare;
mod server;
mod stages;
#[cfg(test)]
use chart::pct_x;
use chart::{
    fmt_num, lat_unit, latency_time_chart, line_chart, linear_axis, nice_ticks, per_second_chart,
    percentile_chart, status_time_chart, time_axis, trim, Axis, Line, MB, MR, MT, P50, P90, P99,
    RUN_COLORS, W,
};
use server::server_charts;
use stages::{stage_charts, stage_table, status_section};

/// Escapes text for HTML content and attributes.
/// Control characters are escaped first ([`crate::escape::clean`]).
pub fn esc(s: &str) -> String {
    let s = crate::escape::clean(s);
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// Horizontal bars: the mean time of each phase, per run.
fn phase_chart(runs: &[(&str, &RunRecord)]) -> String {
    type Phase = (&'static str, fn(&RunRecord) -> &Hist);
    let phases: [Phase; 4] = [
        ("connect", |r| &r.connect),
        ("waiting (TTFB)", |r| &r.waiting),
        ("transfer", |r| &r.transfer),
        ("total", |r| &r.latency),
    ];
    let max_us = runs
        .iter()
        .flat_map(|(_, r)| phases.iter().map(move |(_, f)| f(r).mean()))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let (div, unit) = lat_unit(max_us);
    let (top, ticks) = nice_ticks(max_us / div, 5);
    let bar_h = 16.0;
    let group_h = bar_h * runs.len() as f64 + 14.0;
    let ph = group_h * phases.len() as f64;
    let h = MT + ph + MB;
    let lm = 130.0;
    let pw = W - lm - MR;
    let sx = |v: f64| lm + v / top.max(1e-12) * pw;
    let mut bars = 0;
    let mut s = String::new();
    for (v, _) in ticks.iter().map(|t| (*t, ())) {
        let xx = sx(v);
        let _ = write!(
            s,
            "<line class=\"grid\" x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{MT}\" y2=\"{:.1}\"/><text class=\"tick\" x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            MT + ph,
            MT + ph + 16.0,
            fmt_num(v)
        );
    }
    for (g, (pname, f)) in phases.iter().enumerate() {
        let y0 = MT + g as f64 * group_h + 7.0;
        let _ = write!(
            s,
            "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            lm - 8.0,
            y0 + bar_h * runs.len() as f64 / 2.0 + 4.0,
            pname
        );
        for (i, (name, r)) in runs.iter().enumerate() {
            let h = f(r);
            let mean = if h.is_empty() { 0.0 } else { h.mean() / div };
            let y = y0 + i as f64 * bar_h;
            bars += 1;
            let _ = write!(
                s,
                "<rect class=\"bar\" x=\"{lm}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"{}><title>{} {}: mean {}, p50 {}, p99 {} ({} samples)</title></rect>\
                 <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                (sx(mean) - lm).max(1.0),
                bar_h - 3.0,
                RUN_COLORS[i % 2],
                if i == 1 { " fill-opacity=\"0.6\"" } else { "" },
                esc(name),
                pname,
                dur_us(h.mean()),
                dur_us(h.percentile(50.0) as f64),
                dur_us(h.percentile(99.0) as f64),
                count(h.count()),
                sx(mean) + 4.0,
                y + bar_h - 5.0,
                if h.is_empty() { "none".to_string() } else { dur_us(h.mean()) }
            );
        }
    }
    let _ = write!(
        s,
        "<text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">mean time ({unit})</text>",
        lm + pw / 2.0,
        h - 8.0
    );
    let mut legend = String::from("<div class=\"legend\">");
    for (i, (name, _)) in runs.iter().enumerate() {
        let _ = write!(
            legend,
            "<span><svg width=\"14\" height=\"10\"><rect width=\"14\" height=\"10\" fill=\"{}\"{}/></svg>{}</span>",
            RUN_COLORS[i % 2],
            if i == 1 { " fill-opacity=\"0.6\"" } else { "" },
            esc(name)
        );
    }
    legend.push_str("</div>");
    format!(
        "<figure><figcaption>Where the time goes (mean per phase)</figcaption><svg class=\"chart\" viewBox=\"0 0 {W} {h}\" role=\"img\" aria-label=\"phases\" data-points=\"{bars}\">{s}</svg>{legend}</figure>\n"
    )
}

fn summary_table(runs: &[(&str, &RunRecord)]) -> String {
    type Get = Box<dyn Fn(&RunRecord) -> String>;
    let lat = |p: f64| -> Get { Box::new(move |r| dur_us(r.latency.percentile(p) as f64)) };
    let mut rows: Vec<(&str, Get)> = vec![
        (
            "Target",
            Box::new(|r| format!("{} {}", r.config.method, r.config.url)),
        ),
        (
            "Server",
            Box::new(|r| r.server.software.clone().unwrap_or_else(|| "-".into())),
        ),
        ("Load", Box::new(load_words)),
        ("Started", Box::new(|r| r.started_at.clone())),
        ("Duration", Box::new(|r| format!("{:.3} s", r.duration_s))),
        (
            "Requests/sec",
            Box::new(|r| format!("{:.2}", r.requests_per_sec)),
        ),
        ("Completed", Box::new(|r| count(r.counters.completed))),
        ("Failed", Box::new(|r| count(r.counters.failed))),
        (
            "Refused status",
            Box::new(|r| {
                format!(
                    "{} (outside {})",
                    count(r.refused_status()),
                    r.config.status_rule()
                )
            }),
        ),
        (
            "Transfer",
            Box::new(|r| format!("{}/s", bytes(r.bytes_per_sec))),
        ),
        ("Latency mean", Box::new(|r| dur_us(r.latency.mean()))),
        ("Latency p50", lat(50.0)),
        ("Latency p90", lat(90.0)),
        ("Latency p99", lat(99.0)),
        ("Latency p99.9", lat(99.9)),
        ("Latency max", Box::new(|r| dur_us(r.latency.max() as f64))),
        (
            "Connections",
            Box::new(|r| {
                format!(
                    "{} opened, {} at most",
                    count(r.counters.connections_opened),
                    count(r.counters.peak_connections)
                )
            }),
        ),
        (
            "Client CPU",
            Box::new(|r| {
                format!(
                    "{:.0}% (busiest thread {:.0}%)",
                    r.client.cpu_share * 100.0,
                    r.client.busiest_thread_share * 100.0
                )
            }),
        ),
        (
            "Label",
            Box::new(|r| r.label.clone().unwrap_or_else(|| "-".into())),
        ),
        (
            "Note",
            Box::new(|r| r.note.clone().unwrap_or_else(|| "-".into())),
        ),
    ];
    // HTTP/2 requests the server refused unprocessed and redline sent again.
    if runs.iter().any(|(_, r)| r.counters.retried > 0) {
        let at = rows
            .iter()
            .position(|(k, _)| *k == "Failed")
            .map_or(0, |i| i + 1);
        rows.insert(
            at,
            (
                "Retried (GOAWAY/REFUSED_STREAM)",
                Box::new(|r| count(r.counters.retried)),
            ),
        );
    }
    // As the text report says it: numbers from a server whose certificate
    // was not checked.
    if runs.iter().any(|(_, r)| r.config.insecure) {
        rows.insert(
            1,
            (
                "TLS",
                Box::new(|r| {
                    if r.config.insecure {
                        "certificate verification OFF (--insecure)".into()
                    } else {
                        "certificate verified".into()
                    }
                }),
            ),
        );
    }
    let mut s = String::from("<table class=\"summary\"><thead><tr><th></th>");
    for (name, _) in runs {
        let _ = write!(s, "<th>{}</th>", esc(name));
    }
    s.push_str("</tr></thead><tbody>");
    for (label, get) in &rows {
        let _ = write!(s, "<tr><th>{label}</th>");
        for (_, r) in runs {
            let _ = write!(s, "<td>{}</td>", esc(&get(r)));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>\n");
    s
}

/// Open-loop session runs: how their journeys ended (nothing for other runs).
fn journeys_table(runs: &[(&str, &RunRecord)]) -> String {
    if runs.iter().all(|(_, r)| r.journeys.is_none()) {
        return String::new();
    }
    let mut s = String::from(
        "<h2>Journeys</h2>\n<table class=\"journeys\"><tr><th></th><th>arrived</th><th>started</th>\
         <th>completed</th><th>abandoned: failed check</th><th>error</th><th>stopped</th>\
         <th>in flight at end</th><th>not started</th><th>journey p50</th><th>p99</th></tr>\n",
    );
    for (name, r) in runs {
        let Some(j) = &r.journeys else { continue };
        let p = |q: f64| {
            if j.duration.is_empty() {
                "-".to_string()
            } else {
                crate::dur_us(j.duration.percentile(q) as f64)
            }
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            j.arrived,
            j.started,
            j.completed,
            j.abandoned_check,
            j.abandoned_error,
            j.abandoned_stop,
            j.in_flight_at_end,
            j.not_started,
            p(50.0),
            p(99.0),
        );
    }
    s.push_str("</table>\n");
    s
}

fn codes_and_errors(runs: &[(&str, &RunRecord)]) -> String {
    let mut s = String::from("<div class=\"cols\">");
    for (name, r) in runs {
        let _ = write!(
            s,
            "<div><h3>{}</h3><table><tr><th>status</th><th>responses</th></tr>",
            esc(name)
        );
        if r.status_codes.is_empty() {
            s.push_str("<tr><td colspan=\"2\">no responses</td></tr>");
        }
        for (k, v) in &r.status_codes {
            let cls = if k.starts_with('2') {
                ""
            } else {
                " class=\"bad\""
            };
            let _ = write!(s, "<tr{cls}><td>{}</td><td>{}</td></tr>", esc(k), count(*v));
        }
        s.push_str("</table><table><tr><th>error</th><th>message</th><th>count</th></tr>");
        if r.errors.is_empty() {
            s.push_str("<tr><td colspan=\"3\">no errors</td></tr>");
        }
        for e in &r.errors {
            let _ = write!(
                s,
                "<tr class=\"bad\"><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&e.kind.to_string()),
                esc(&e.message),
                count(e.count)
            );
        }
        s.push_str("</table></div>");
    }
    s.push_str("</div>\n");
    s
}

fn warnings(runs: &[(&str, &RunRecord)]) -> String {
    let mut s = String::new();
    for (name, r) in runs {
        if r.warnings.is_empty() && !r.interrupted {
            continue;
        }
        let _ = write!(s, "<div class=\"warn\"><strong>{}:</strong> ", esc(name));
        if r.interrupted {
            s.push_str("the run was interrupted; the numbers cover only what ran. ");
        }
        // The server went away: said first, it explains every error after it.
        if let Some(w) = r.warnings.iter().find(|w| w.code == "server_gone") {
            let _ = write!(s, "<strong>{}.</strong> ", esc(&w.message));
        }
        if r.client_limited {
            s.push_str("the client may have been the limit; treat these numbers with care.");
        }
        s.push_str("<ul>");
        for w in &r.warnings {
            let _ = write!(s, "<li>[{}] {}</li>", esc(&w.code), esc(&w.message));
        }
        s.push_str("</ul></div>\n");
    }
    s
}

const STYLE: &str = "
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#212529;max-width:1040px;margin:24px auto;padding:0 16px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dee2e6;padding-bottom:4px}h3{font-size:15px;margin:8px 0}
.sub{color:#495057;margin:0 0 16px}
table{border-collapse:collapse;margin:4px 0 12px;font-variant-numeric:tabular-nums}
th,td{padding:3px 12px 3px 0;text-align:left;vertical-align:top}
table.summary td{text-align:right;padding-left:24px}table.summary tbody tr:nth-child(odd){background:#f8f9fa}
tr.bad td{color:#c92a2a}
figure{margin:12px 0 20px}figcaption{font-weight:600;margin-bottom:4px}
svg.chart{width:100%;height:auto;display:block}
.grid{stroke:#e9ecef;stroke-width:1}.frame{fill:none;stroke:#adb5bd}
.tick{font-size:12px;fill:#495057}.axis{font-size:13px;fill:#212529}
.legend{display:flex;flex-wrap:wrap;gap:16px;font-size:13px;margin-top:2px}.legend span{display:inline-flex;align-items:center;gap:6px}
.warn{background:#fff4e6;border-left:4px solid #e67700;padding:8px 12px;margin:8px 0}.warn ul{margin:4px 0 0;padding-left:20px}
table.stages td,table.stages th{padding:3px 14px 3px 0;text-align:right}table.stages td:first-child,table.stages td:last-child{text-align:left}table.stages caption{text-align:left;font-weight:600;margin-bottom:4px}table.stages tbody tr:nth-child(odd){background:#f8f9fa}
tr.knee td{font-weight:700;background:#fff4e6}tr.knee td:last-child{color:#c92a2a}
table.compare tr.better td.verdict{color:#2b8a3e;font-weight:600}table.compare tr.worse td.verdict{color:#c92a2a;font-weight:600}
.cols{display:flex;gap:40px;flex-wrap:wrap}
.note{color:#495057;font-size:13px}
.scroll{overflow-x:auto}table.server-stages{font-size:13px}table.server-stages caption{text-align:left;font-weight:600;margin-bottom:4px}
table.server-stages th,table.server-stages td{padding:2px 10px 2px 0}table.server-stages td{white-space:nowrap}table.server-stages tbody tr:nth-child(odd){background:#f8f9fa}
";

/// Before/after: the server directives that changed, next to the change in
/// p99 and req/s (empty unless both runs recorded a configuration).
fn config_changes(runs: &[(&str, &RunRecord)]) -> String {
    let [(_, a), (_, b)] = runs else {
        return String::new();
    };
    let (Some(ca), Some(cb)) = (&a.server_config, &b.server_config) else {
        return String::new();
    };
    let ch = ca.changes(cb);
    if ch.is_empty() {
        return String::new();
    }
    let pct = |x: f64, y: f64| {
        if x > 0.0 {
            format!("{:+.0} %", (y - x) * 100.0 / x)
        } else {
            "-".into()
        }
    };
    let p99 = pct(
        a.latency.percentile(99.0) as f64,
        b.latency.percentile(99.0) as f64,
    );
    let rps = pct(a.requests_per_sec, b.requests_per_sec);
    let mut s = String::from("<h2>What changed</h2>\n<table class=\"changes\"><tr><th>directive</th><th>first</th><th>second</th></tr>\n");
    for (n, x, y) in &ch {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(n),
            esc(x),
            esc(y)
        );
    }
    let list: Vec<String> = ch
        .iter()
        .map(|(n, x, y)| format!("{n} {x} -> {y}"))
        .collect();
    let _ = writeln!(
        s,
        "<tr><td colspan=\"3\">{}: p99 {p99}, req/s {rps}</td></tr></table>",
        esc(&list.join(", "))
    );
    s
}

/// The load in words: the stages of a staged run (its load model's
/// connections are only the last stage's), else the load model.
fn load_words(r: &RunRecord) -> String {
    match crate::stages_line(r) {
        Some(l) => format!("stages {l}"),
        None => r.config.load.describe(),
    }
}

/// The HTML report of one run, or of two (the second overlaid, dashed).
pub fn report(runs: &[(&str, &RunRecord)]) -> String {
    let runs = &runs[..runs.len().min(2)];
    let mut s = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let title = match runs {
        [] => "redline report".to_string(),
        [(a, _)] => format!("redline report: {a}"),
        [(a, _), (b, _), ..] => format!("redline report: {a} vs {b}"),
    };
    let _ = writeln!(
        s,
        "<title>{}</title><style>{STYLE}</style></head><body>",
        esc(&title)
    );
    let _ = writeln!(s, "<h1>{}</h1>", esc(&title));
    if runs.is_empty() {
        s.push_str("<p>No runs.</p></body></html>\n");
        return s;
    }
    let (_, first) = runs[0];
    let _ = writeln!(
        s,
        "<p class=\"sub\">{} {} — {}</p>",
        esc(&first.config.method),
        esc(&first.config.url),
        esc(&load_words(first))
    );
    if runs.len() == 2 {
        s.push_str("<p class=\"note\">Before/after: the first run is drawn solid, the second dashed.</p>\n");
    }
    s.push_str(&compare::comparison(runs));
    s.push_str(&warnings(runs));
    s.push_str(&config_changes(runs));
    // A staged run's answer first: the stage table with the knee, then
    // throughput and response time against the load.
    let table = stage_table(runs);
    if !table.is_empty() {
        s.push_str("<h2>Load levels</h2>\n");
        s.push_str(&table);
        s.push_str(&stage_charts(runs));
    }
    s.push_str("<h2>Summary</h2>\n");
    s.push_str(&summary_table(runs));
    s.push_str("<p class=\"note\">Latency counts from the intended send time, so queueing and stalls show.</p>\n");
    s.push_str("<h2>Latency</h2>\n");
    s.push_str(&percentile_chart(runs));
    s.push_str(&latency_time_chart(runs));
    s.push_str("<h2>Throughput</h2>\n");
    s.push_str(&per_second_chart(
        runs,
        "Throughput over time",
        "responses per second (req/s)",
        |p| p.requests as f64,
    ));
    s.push_str(&per_second_chart(
        runs,
        "Data received over time",
        "received (MiB/s)",
        |p| p.bytes as f64 / (1024.0 * 1024.0),
    ));
    if table.is_empty() {
        s.push_str(&stage_charts(runs));
    }
    s.push_str("<h2>Errors and status codes</h2>\n");
    s.push_str(&per_second_chart(
        runs,
        "Errors over time",
        "failed requests per second",
        |p| p.errors as f64,
    ));
    s.push_str(&status_time_chart(runs));
    s.push_str(&codes_and_errors(runs));
    s.push_str(&journeys_table(runs));
    s.push_str("<h2>Phases</h2>\n");
    s.push_str(&phase_chart(runs));
    s.push_str(&server_charts(runs));
    s.push_str(&status_section(runs));
    // The only script: marks the page as rendered with its chart and point
    // counts (the headless-browser test reads them); the report works without it.
    s.push_str("<script>(function(){var c=document.querySelectorAll('svg.chart'),n=0;for(var i=0;i<c.length;i++){n+=parseInt(c[i].getAttribute('data-points')||'0',10);}document.documentElement.setAttribute('data-charts',c.length);document.documentElement.setAttribute('data-chart-points',n);})();</script>\n");
    let _ = writeln!(
        s,
        "<p class=\"note\">Made by redline {}.</p></body></html>",
        esc(&first.environment.redline_version)
    );
    s
}

#[cfg(test)]
mod tests;
