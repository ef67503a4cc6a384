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

const W: f64 = 960.0;
const H: f64 = 300.0;
const ML: f64 = 70.0;
const MR: f64 = 20.0;
const MT: f64 = 16.0;
const MB: f64 = 46.0;

const P50: &str = "#2b8a3e";
const P90: &str = "#e67700";
const P99: &str = "#c92a2a";
const RUN_COLORS: [&str; 2] = ["#1c5fb8", "#c2255c"];

/// A line on a chart.
struct Line {
    name: String,
    color: &'static str,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// An axis: its range, ticks (position, text) and label with the unit.
struct Axis {
    min: f64,
    max: f64,
    ticks: Vec<(f64, String)>,
    label: String,
}

/// 1-2-5 steps covering [0, max].
fn nice_ticks(max: f64, target: usize) -> (f64, Vec<f64>) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let top = (max / step).ceil() * step;
    let n = (top / step).round() as usize;
    (top, (0..=n).map(|i| i as f64 * step).collect())
}

fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v.abs() >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A linear axis from 0 to at least `max`.
fn linear_axis(max: f64, label: &str) -> Axis {
    let (top, ticks) = nice_ticks(max, 5);
    Axis {
        min: 0.0,
        max: top,
        ticks: ticks.into_iter().map(|t| (t, fmt_num(t))).collect(),
        label: label.into(),
    }
}

/// Latency unit for values up to `max_us`: (divisor, name).
fn lat_unit(max_us: f64) -> (f64, &'static str) {
    if max_us >= 2_000_000.0 {
        (1e6, "s")
    } else if max_us >= 2_000.0 {
        (1e3, "ms")
    } else {
        (1.0, "µs")
    }
}

/// An SVG line chart; the `svg` carries `data-points` (points drawn).
fn line_chart(title: &str, x: &Axis, y: &Axis, lines: &[Line]) -> String {
    let pw = W - ML - MR;
    let ph = H - MT - MB;
    let sx = |v: f64| ML + (v - x.min) / (x.max - x.min).max(1e-12) * pw;
    let sy = |v: f64| MT + ph - (v - y.min) / (y.max - y.min).max(1e-12) * ph;
    let total: usize = lines.iter().map(|l| l.points.len()).sum();
    let mut s = String::new();
    let _ = write!(
        s,
        "<figure><figcaption>{}</figcaption><svg class=\"chart\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\" data-points=\"{total}\">",
        esc(title),
        esc(title)
    );
    // Grid and ticks.
    for (v, t) in &y.ticks {
        let yy = sy(*v);
        let _ = write!(
            s,
            "<line class=\"grid\" x1=\"{ML}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\"/><text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            ML + pw,
            ML - 6.0,
            yy + 4.0,
            esc(t)
        );
    }
    for (v, t) in &x.ticks {
        let xx = sx(*v);
        let _ = write!(
            s,
            "<line class=\"grid\" x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{MT}\" y2=\"{:.1}\"/><text class=\"tick\" x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            MT + ph,
            MT + ph + 16.0,
            esc(t)
        );
    }
    let _ = write!(
        s,
        "<rect class=\"frame\" x=\"{ML}\" y=\"{MT}\" width=\"{pw}\" height=\"{ph}\"/>\
         <text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
         <text class=\"axis\" transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        ML + pw / 2.0,
        H - 8.0,
        esc(&x.label),
        MT + ph / 2.0,
        esc(&y.label)
    );
    for l in lines {
        if l.points.is_empty() {
            continue;
        }
        let pts: Vec<String> = l
            .points
            .iter()
            .map(|(a, b)| format!("{:.1},{:.1}", sx(*a), sy(b.min(y.max))))
            .collect();
        let _ = write!(
            s,
            "<polyline class=\"series\" data-n=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"><title>{}</title></polyline>",
            l.points.len(),
            l.color,
            if l.dashed { " stroke-dasharray=\"7 4\"" } else { "" },
            pts.join(" "),
            esc(&l.name)
        );
        if l.points.len() <= 90 {
            for (a, b) in &l.points {
                let _ = write!(
                    s,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{}\"><title>{}: {} at {}</title></circle>",
                    sx(*a),
                    sy(b.min(y.max)),
                    l.color,
                    esc(&l.name),
                    trim(*b),
                    trim(*a)
                );
            }
        }
    }
    s.push_str("</svg>");
    // Legend.
    s.push_str("<div class=\"legend\">");
    for l in lines {
        let _ = write!(
            s,
            "<span><svg width=\"28\" height=\"10\"><line x1=\"0\" y1=\"5\" x2=\"28\" y2=\"5\" stroke=\"{}\" stroke-width=\"3\"{}/></svg>{}</span>",
            l.color,
            if l.dashed { " stroke-dasharray=\"7 4\"" } else { "" },
            esc(&l.name)
        );
    }
    s.push_str("</div></figure>\n");
    s
}

/// x for percentile p on the log axis: −log10(1 − p/100), so 90 → 1, 99 → 2…
fn pct_x(p: f64) -> f64 {
    -(1.0 - p / 100.0).max(1e-9).log10()
}

fn percentile_chart(runs: &[(&str, &RunRecord)]) -> String {
    let max_x = 5.0; // 99.999 %
    let max_us = runs
        .iter()
        .map(|(_, r)| r.latency.percentile(99.999) as f64)
        .fold(0.0, f64::max);
    let (div, unit) = lat_unit(max_us);
    let lines: Vec<Line> = runs
        .iter()
        .enumerate()
        .filter(|(_, (_, r))| !r.latency.is_empty())
        .map(|(i, (name, r))| Line {
            name: name.to_string(),
            color: RUN_COLORS[i % 2],
            dashed: i == 1,
            points: (0..=100)
                .map(|k| {
                    let x = k as f64 * max_x / 100.0;
                    let p = 100.0 * (1.0 - 10f64.powf(-x));
                    (x, r.latency.percentile(p) as f64 / div)
                })
                .collect(),
        })
        .collect();
    let x = Axis {
        min: 0.0,
        max: max_x,
        ticks: [0.0, 90.0, 99.0, 99.9, 99.99, 99.999]
            .iter()
            .map(|p| (pct_x(*p), format!("{p}%")))
            .collect(),
        label: "percentile (log scale: each step is ten times rarer)".into(),
    };
    let y = linear_axis(max_us / div, &format!("latency ({unit})"));
    line_chart("Latency by percentile", &x, &y, &lines)
}

fn time_axis(runs: &[(&str, &RunRecord)]) -> Axis {
    let end = runs
        .iter()
        .map(|(_, r)| {
            r.series
                .last()
                .map(|p| p.t as f64 + 1.0)
                .unwrap_or(0.0)
                .max(r.duration_s)
        })
        .fold(0.0, f64::max);
    let (top, ticks) = nice_ticks(end.max(1.0), 10);
    Axis {
        min: 0.0,
        max: top,
        ticks: ticks.into_iter().map(|t| (t, fmt_num(t))).collect(),
        label: "time since the start (s)".into(),
    }
}

fn latency_time_chart(runs: &[(&str, &RunRecord)]) -> String {
    let max_us = runs
        .iter()
        .flat_map(|(_, r)| r.series.iter().map(|p| p.p99_us as f64))
        .fold(0.0, f64::max);
    let (div, unit) = lat_unit(max_us);
    let mut lines = Vec::new();
    for (i, (name, r)) in runs.iter().enumerate() {
        let pts = |f: fn(&redline_stats::SeriesPoint) -> u64| -> Vec<(f64, f64)> {
            r.series
                .iter()
                .filter(|p| p.requests > 0)
                .map(|p| (p.t as f64 + 0.5, f(p) as f64 / div))
                .collect()
        };
        let suffix = if runs.len() > 1 {
            format!(" — {name}")
        } else {
            String::new()
        };
        lines.push(Line {
            name: format!("p50{suffix}"),
            color: P50,
            dashed: i == 1,
            points: pts(|p| p.p50_us),
        });
        lines.push(Line {
            name: format!("p90{suffix}"),
            color: P90,
            dashed: i == 1,
            points: pts(|p| p.p90_us),
        });
        lines.push(Line {
            name: format!("p99{suffix}"),
            color: P99,
            dashed: i == 1,
            points: pts(|p| p.p99_us),
        });
    }
    let y = linear_axis(max_us / div, &format!("latency ({unit})"));
    line_chart(
        "Latency over time (p50, p90, p99 of each second)",
        &time_axis(runs),
        &y,
        &lines,
    )
}

fn per_second_chart(
    runs: &[(&str, &RunRecord)],
    title: &str,
    label: &str,
    f: fn(&redline_stats::SeriesPoint) -> f64,
) -> String {
    let lines: Vec<Line> = runs
        .iter()
        .enumerate()
        .map(|(i, (name, r))| Line {
            name: name.to_string(),
            color: RUN_COLORS[i % 2],
            dashed: i == 1,
            // Per-second rates: the partial last second is scaled to the
            // time it covers, or left out when it covers under a quarter.
            points: r
                .series
                .iter()
                .filter_map(|p| {
                    let covered = (r.duration_s - p.t as f64).clamp(0.0, 1.0);
                    if r.duration_s > 0.0 && covered < 0.25 {
                        return None;
                    }
                    let scale = if r.duration_s > 0.0 { covered } else { 1.0 };
                    Some((p.t as f64 + 0.5, f(p) / scale))
                })
                .collect(),
        })
        .collect();
    let max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    line_chart(title, &time_axis(runs), &linear_axis(max, label), &lines)
}

/// Responses per second by status class (one line per class seen, per run).
fn status_time_chart(runs: &[(&str, &RunRecord)]) -> String {
    const CLASS_COLORS: [&str; 5] = ["#868e96", "#2b8a3e", "#1c7ed6", "#e67700", "#c92a2a"];
    let mut lines = Vec::new();
    let mut max: f64 = 0.0;
    for (i, (name, r)) in runs.iter().enumerate() {
        for (class, color) in CLASS_COLORS.iter().enumerate() {
            if r.series.iter().all(|p| p.status_classes[class] == 0) {
                continue;
            }
            let points: Vec<(f64, f64)> = r
                .series
                .iter()
                .filter_map(|p| {
                    let covered = (r.duration_s - p.t as f64).clamp(0.0, 1.0);
                    if r.duration_s > 0.0 && covered < 0.25 {
                        return None;
                    }
                    let scale = if r.duration_s > 0.0 { covered } else { 1.0 };
                    Some((p.t as f64 + 0.5, p.status_classes[class] as f64 / scale))
                })
                .collect();
            max = points.iter().map(|p| p.1).fold(max, f64::max);
            let suffix = if runs.len() > 1 {
                format!(" — {name}")
            } else {
                String::new()
            };
            lines.push(Line {
                name: format!("{}xx{suffix}", class + 1),
                color,
                dashed: i == 1,
                points,
            });
        }
    }
    line_chart(
        "Status codes over time (responses per second by class)",
        &time_axis(runs),
        &linear_axis(max, "responses per second"),
        &lines,
    )
}

/// Reads one memory figure of a watch sample.
type SampleField = fn(&redline_stats::watch::WatchSample) -> u64;

/// Reads one rate (per second) of a watch sample.
type RateField = fn(&redline_stats::watch::WatchSample) -> f64;

/// One watched host of one run: (run index, run name, run, host index in its
/// `server_watch.hosts`, the host).
/// One watched series of a host: `(t, f(sample))` for every sample; its
/// highest value raises `max` (the chart's axis).
fn sample_line(
    h: &HostWatch,
    name: String,
    color: &'static str,
    dashed: bool,
    max: &mut f64,
    f: impl Fn(&redline_stats::watch::WatchSample) -> f64,
) -> Line {
    let points: Vec<(f64, f64)> = h.samples.iter().map(|p| (p.t, f(p))).collect();
    *max = points.iter().map(|p| p.1).fold(*max, f64::max);
    Line {
        name,
        color,
        dashed,
        points,
    }
}

type Member<'a> = (usize, &'a str, &'a RunRecord, usize, &'a HostWatch);

/// The watched server (`--watch`): one group per watched host (by host name,
/// in order of appearance; two runs that watched the same host share its
/// group, the second dashed): a per-stage table when the run had stages, then
/// memory, CPU and count of its processes over time, and the machine's
/// MemAvailable and swap activity. Empty when no run watched anything.
fn server_charts(runs: &[(&str, &RunRecord)]) -> String {
    let mut groups: Vec<(&str, Vec<Member>)> = Vec::new();
    for (i, (name, r)) in runs.iter().enumerate() {
        let Some(w) = &r.server_watch else { continue };
        for (k, h) in w.hosts.iter().enumerate() {
            let m = (i, *name, *r, k, h);
            match groups.iter_mut().find(|(host, _)| *host == h.host) {
                Some((_, members)) => members.push(m),
                None => groups.push((&h.host, vec![m])),
            }
        }
    }
    if groups.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h2>Server</h2>\n<p class=\"note\">RSS counts shared pages once per process; PSS shares them out; private is what one more process would cost.</p>\n");
    for (host, members) in &groups {
        out.push_str(&host_group(runs.len(), host, members));
    }
    out
}

/// A memory figure's peak / mean cell.
fn pm_kib(p: PeakMean) -> String {
    format!(
        "<td>{}/{}</td>",
        esc(&redline_watch::render::kib(p.peak)),
        esc(&redline_watch::render::kib(p.mean))
    )
}

/// The per-stage table of one watched host of one run, from the record's
/// `stages[].server` (the same figures as the text report): one row per
/// stage, each figure as `peak / mean`. Empty when the run had no stages.
fn stage_server_table(caption: &str, r: &RunRecord, k: usize) -> String {
    let rows: Vec<(String, &StageSummary, &WatchSummary)> = r
        .stages
        .iter()
        .enumerate()
        .filter_map(|(i, st)| st.server.get(k).map(|x| (st.name(i), st, &x.summary)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    let _ = write!(
        s,
        "<div class=\"scroll\"><table class=\"server-stages\"><caption>{}</caption><thead>\
         <tr><th>stage</th><th>time (s)</th><th>samples</th><th>processes</th><th>CPU (% of one CPU)</th>\
         <th>load average</th><th>MemAvailable lowest</th><th>swap in/out (pages)</th>\
         <th>RSS total</th><th>PSS total</th><th>private total</th></tr></thead><tbody>",
        esc(caption)
    );
    for (name, st, w) in rows {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}–{}</td><td>{}</td>",
            esc(&name),
            trim(st.start_s),
            trim(st.end_s),
            w.samples
        );
        if w.samples == 0 {
            s.push_str("<td colspan=\"8\">no sample</td></tr>");
            continue;
        }
        let _ = write!(
            s,
            "<td>{:.0}/{:.1}</td><td>{:.0}/{:.0}</td><td>{:.2}/{:.2}</td><td>{}</td><td>{}/{}</td>{}{}{}</tr>",
            w.processes.peak,
            w.processes.mean,
            w.cpu_percent.peak,
            w.cpu_percent.mean,
            w.load1.peak,
            w.load1.mean,
            esc(&redline_watch::render::kib(w.min_mem_available_kib as f64)),
            w.swapped_in_pages,
            w.swapped_out_pages,
            pm_kib(w.rss_kib),
            pm_kib(w.pss_kib),
            pm_kib(w.private_kib)
        );
    }
    s.push_str("</tbody></table></div>\n");
    s
}

/// One watched host's group: heading, per-stage tables, five charts.
fn host_group(n_runs: usize, host: &str, members: &[Member]) -> String {
    const MEM_COLORS: [&str; 3] = ["#1c5fb8", "#2b8a3e", "#c2255c"];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<section class=\"server-host\" data-host=\"{}\"><h3>Server: {}</h3>",
        esc(host),
        esc(host)
    );
    // Line names: the run (when two) and the targets (when a run watched this host twice).
    let label = |m: &Member| {
        let (i, name, _, _, h) = *m;
        let mut parts = Vec::new();
        if n_runs > 1 {
            parts.push(name.to_string());
        }
        if members.iter().filter(|x| x.0 == i).count() > 1 {
            parts.push(h.targets.join(", "));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" — {}", parts.join(", "))
        }
    };
    let watched: Vec<String> = members
        .iter()
        .map(|m| {
            let (_, name, r, _, h) = *m;
            let mut t = format!("{} on {}", h.targets.join(", "), h.host);
            if n_runs > 1 {
                t.push_str(&format!(" ({name})"));
            }
            let off = h.offset_from(&r.started_at);
            if off.abs() >= 0.5 {
                t.push_str(&format!(
                    ", its watch started {} s {} the run",
                    trim(off.abs()),
                    if off > 0.0 { "after" } else { "before" }
                ));
            }
            t
        })
        .collect();
    let _ = writeln!(
        out,
        "<p class=\"note\">Watched: {}.</p>",
        esc(&watched.join("; "))
    );
    for m in members {
        let (_, name, r, k, h) = *m;
        let mut caption = format!(
            "Per stage: {} on {}, peak/mean over the stage's samples",
            h.targets.join(", "),
            h.host
        );
        if n_runs > 1 {
            caption.push_str(&format!(" ({name})"));
        }
        out.push_str(&stage_server_table(&caption, r, k));
    }
    let mut mem = Vec::new();
    let mut cpu = Vec::new();
    let (mut max_mem, mut max_cpu): (f64, f64) = (0.0, 0.0);
    let (mut procs, mut avail, mut swap) = (Vec::new(), Vec::new(), Vec::new());
    let (mut max_procs, mut max_avail, mut max_swap): (f64, f64, f64) = (0.0, 0.0, 0.0);
    let mut no_swap = false;
    for (j, m) in members.iter().enumerate() {
        let h = m.4;
        let suffix = label(m);
        let dashed = j % 2 == 1;
        let color = RUN_COLORS[j % 2];
        let kinds: [(&str, SampleField); 3] = [
            ("RSS", |p| p.rss_kib),
            ("PSS", |p| p.pss_kib),
            ("private", |p| p.private_kib),
        ];
        for (c, (label, f)) in kinds.iter().enumerate() {
            mem.push(sample_line(
                h,
                format!("{label}{suffix}"),
                MEM_COLORS[c],
                dashed,
                &mut max_mem,
                |p| f(p) as f64 / 1024.0,
            ));
        }
        cpu.push(sample_line(
            h,
            format!("CPU{suffix}"),
            color,
            dashed,
            &mut max_cpu,
            |p| p.cpu_percent,
        ));
        procs.push(sample_line(
            h,
            format!("processes{suffix}"),
            color,
            dashed,
            &mut max_procs,
            |p| p.processes as f64,
        ));
        avail.push(sample_line(
            h,
            format!("MemAvailable{suffix}"),
            color,
            dashed,
            &mut max_avail,
            |p| p.mem_available_kib as f64 / 1024.0,
        ));
        // The MemAvailable axis reaches MemTotal.
        max_avail = max_avail.max(h.mem_total_kib as f64 / 1024.0);
        let rates: [(&str, &str, RateField); 2] = [
            ("swapped in", MEM_COLORS[1], |p| p.swap_in_per_s),
            ("swapped out", MEM_COLORS[2], |p| p.swap_out_per_s),
        ];
        for (label, color, f) in rates {
            swap.push(sample_line(
                h,
                format!("{label}{suffix}"),
                color,
                dashed,
                &mut max_swap,
                f,
            ));
        }
        no_swap |= h.swap_total_kib == 0;
    }
    let end = members
        .iter()
        .flat_map(|m| m.4.samples.last().map(|p| p.t))
        .fold(1.0, f64::max);
    let (top, ticks) = nice_ticks(end, 10);
    let x = Axis {
        min: 0.0,
        max: top,
        ticks: ticks.into_iter().map(|t| (t, fmt_num(t))).collect(),
        label: "time since the watch started (s)".into(),
    };
    let on = format!(" — {host}");
    out.push_str(&line_chart(
        &format!("Server memory over time (all watched processes){on}"),
        &x,
        &linear_axis(max_mem, "memory (MiB)"),
        &mem,
    ));
    out.push_str(&line_chart(
        &format!("Server CPU over time (100% = one core){on}"),
        &x,
        &linear_axis(max_cpu, "CPU (%)"),
        &cpu,
    ));
    out.push_str(&line_chart(
        &format!("Server processes over time{on}"),
        &x,
        &linear_axis(max_procs, "processes"),
        &procs,
    ));
    // The axis reaches MemTotal, so the distance to the top is what is in use.
    out.push_str(&line_chart(
        &format!("Machine MemAvailable over time (axis up to MemTotal){on}"),
        &x,
        &linear_axis(max_avail, "MemAvailable (MiB)"),
        &avail,
    ));
    let swap_title = if no_swap {
        format!("Machine swap activity over time{on} (no swap configured)")
    } else {
        format!("Machine swap activity over time{on}")
    };
    out.push_str(&line_chart(
        &swap_title,
        &x,
        &linear_axis(max_swap, "pages per second"),
        &swap,
    ));
    out.push_str("</section>\n");
    out
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
        ("Load", Box::new(|r| r.config.load.describe())),
        ("Started", Box::new(|r| r.started_at.clone())),
        ("Duration", Box::new(|r| format!("{:.3} s", r.duration_s))),
        (
            "Requests/sec",
            Box::new(|r| format!("{:.2}", r.requests_per_sec)),
        ),
        ("Completed", Box::new(|r| count(r.counters.completed))),
        ("Failed", Box::new(|r| count(r.counters.failed))),
        ("Non-2xx", Box::new(|r| count(r.counters.non_2xx))),
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
.warn{background:#fff4e6;border-left:4px solid #e67700;padding:8px 12px;margin:8px 0}
.cols{display:flex;gap:40px;flex-wrap:wrap}
.note{color:#495057;font-size:13px}
.scroll{overflow-x:auto}table.server-stages{font-size:13px}table.server-stages caption{text-align:left;font-weight:600;margin-bottom:4px}
table.server-stages th,table.server-stages td{padding:2px 10px 2px 0}table.server-stages td{white-space:nowrap}table.server-stages tbody tr:nth-child(odd){background:#f8f9fa}
";

/// Response time and throughput against the load level (a `--stages` run),
/// like a hosted ramp test's graphs: one point per load level (or band).
fn stage_charts(runs: &[(&str, &RunRecord)]) -> String {
    let staged: Vec<(
        usize,
        &str,
        &RunRecord,
        Vec<redline_stats::stages::LevelPoint>,
    )> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, (name, r))| {
            let plan = r.config.stages.as_ref()?;
            Some((
                i,
                *name,
                *r,
                redline_stats::stages::by_level(plan, &r.series),
            ))
        })
        .filter(|(_, _, _, pts)| !pts.is_empty())
        .collect();
    let Some((_, _, first, _)) = staged.first() else {
        return String::new();
    };
    let unit = first
        .config
        .stages
        .as_ref()
        .map_or("connections", |p| p.unit_name());
    let max_level = staged
        .iter()
        .flat_map(|(_, _, _, p)| p.iter().map(|x| x.level))
        .fold(0.0, f64::max);
    let max_us = staged
        .iter()
        .flat_map(|(_, _, _, p)| p.iter().map(|x| x.p99_us as f64))
        .fold(0.0, f64::max);
    let max_rps = staged
        .iter()
        .flat_map(|(_, _, _, p)| p.iter().map(|x| x.requests_per_sec))
        .fold(0.0, f64::max);
    let (div, lu) = lat_unit(max_us);
    let x = linear_axis(max_level, &format!("load ({unit})"));
    let mut lat_lines = Vec::new();
    let mut thr_lines = Vec::new();
    for (i, name, _, pts) in &staged {
        let suffix = if runs.len() > 1 {
            format!(" — {name}")
        } else {
            String::new()
        };
        let dashed = *i == 1;
        for (label, color, f) in [
            (
                "p50",
                P50,
                (|p: &redline_stats::stages::LevelPoint| p.p50_us) as fn(&_) -> u64,
            ),
            ("p95", P90, |p| p.p95_us),
            ("p99", P99, |p| p.p99_us),
        ] {
            lat_lines.push(Line {
                name: format!("{label}{suffix}"),
                color,
                dashed,
                points: pts.iter().map(|p| (p.level, f(p) as f64 / div)).collect(),
            });
        }
        thr_lines.push(Line {
            name: format!("throughput{suffix}"),
            color: RUN_COLORS[(*i).min(1)],
            dashed,
            points: pts.iter().map(|p| (p.level, p.requests_per_sec)).collect(),
        });
    }
    let mut s = String::from("<h2>Load levels</h2>\n");
    for (_, _, r, _) in &staged {
        if let Some(l) = crate::knee_line(r) {
            let _ = writeln!(s, "<p class=\"note\">{}</p>", esc(&l));
        }
    }
    s.push_str(&line_chart(
        "Response time against load (p50, p95, p99 per level)",
        &x,
        &linear_axis(max_us / div, &format!("latency ({lu})")),
        &lat_lines,
    ));
    s.push_str(&line_chart(
        "Throughput against load",
        &x,
        &linear_axis(max_rps, "responses per second (req/s)"),
        &thr_lines,
    ));
    s
}

/// Reads one count of a status page read.
type StatusField = fn(&redline_stats::watch::StatusSample) -> Option<u64>;

/// The server's status page (`--server-status`) over time: busy, idle and
/// keep-alive workers on the run's clock (the second run dashed), and each
/// run's diagnosis. Empty when no run has either.
fn status_section(runs: &[(&str, &RunRecord)]) -> String {
    if runs
        .iter()
        .all(|(_, r)| r.server_status.is_none() && r.diagnosis.is_none())
    {
        return String::new();
    }
    let mut out = String::from("<h2>Server status and diagnosis</h2>\n");
    for (name, r) in runs {
        if let Some(d) = &r.diagnosis {
            let head = redline_watch::status::render_diagnosis(r);
            let first = head.trim().lines().next().unwrap_or("").to_string();
            let _ = write!(
                out,
                "<div class=\"diagnosis\" data-resource=\"{}\"><p><b>{}</b>{}</p><ul>",
                esc(&d.resource),
                esc(&first),
                if runs.len() > 1 {
                    format!(" ({})", esc(name))
                } else {
                    String::new()
                }
            );
            for e in &d.evidence {
                let _ = write!(out, "<li>{}</li>", esc(e));
            }
            let _ = writeln!(out, "</ul><p>{}</p></div>", esc(&d.advice));
        }
    }
    let mut lines = Vec::new();
    let mut max: f64 = 0.0;
    const COLORS: [&str; 3] = ["#c92a2a", "#2b8a3e", "#e67700"];
    for (j, (name, r)) in runs.iter().enumerate() {
        let Some(w) = &r.server_status else { continue };
        let off = match (
            redline_stats::time::parse_rfc3339_ms(&w.started_at),
            redline_stats::time::parse_rfc3339_ms(&r.started_at),
        ) {
            (Some(a), Some(b)) => (a - b) as f64 / 1000.0,
            _ => 0.0,
        };
        let suffix = if runs.len() > 1 {
            format!(" — {name}")
        } else {
            String::new()
        };
        let kinds: [(&str, StatusField); 3] = [
            ("busy", |x| x.busy),
            ("idle", |x| x.idle),
            ("keep-alive", |x| x.keepalive),
        ];
        for (c, (label, f)) in kinds.iter().enumerate() {
            let points: Vec<(f64, f64)> = w
                .samples
                .iter()
                .filter_map(|x| f(x).map(|v| ((x.t + off).max(0.0), v as f64)))
                .collect();
            if points.is_empty() {
                continue;
            }
            max = points.iter().map(|p| p.1).fold(max, f64::max);
            lines.push(Line {
                name: format!("{label}{suffix}"),
                color: COLORS[c],
                dashed: j % 2 == 1,
                points,
            });
        }
    }
    if !lines.is_empty() {
        out.push_str(&line_chart(
            "Workers over time (the server's status page)",
            &time_axis(runs),
            &linear_axis(max, "workers (nginx: connections)"),
            &lines,
        ));
    }
    out
}

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
        esc(&first.config.load.describe())
    );
    if runs.len() == 2 {
        s.push_str("<p class=\"note\">Before/after: the first run is drawn solid, the second dashed.</p>\n");
    }
    s.push_str(&warnings(runs));
    s.push_str(&config_changes(runs));
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
    s.push_str(&stage_charts(runs));
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
