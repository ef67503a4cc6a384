//! The inline SVG charts of the report: axes, ticks, line charts, and the
//! run charts (percentile curve, latency, throughput and status over time).

use super::*;

pub(super) const W: f64 = 960.0;
pub(super) const H: f64 = 300.0;
pub(super) const ML: f64 = 70.0;
pub(super) const MR: f64 = 20.0;
pub(super) const MT: f64 = 16.0;
pub(super) const MB: f64 = 46.0;

pub(super) const P50: &str = "#2b8a3e";
pub(super) const P90: &str = "#e67700";
pub(super) const P99: &str = "#c92a2a";
pub(super) const RUN_COLORS: [&str; 2] = ["#1c5fb8", "#c2255c"];

/// A line on a chart.
pub(super) struct Line {
    pub(super) name: String,
    pub(super) color: &'static str,
    pub(super) dashed: bool,
    pub(super) points: Vec<(f64, f64)>,
    /// The last point is a partial second (the run ended inside it): drawn
    /// hollow, joined by a dotted segment, and left out of the axis range.
    pub(super) partial_last: bool,
}

impl Line {
    /// The points that set the axis range (a partial last second's aside).
    pub(super) fn full_points(&self) -> &[(f64, f64)] {
        let n = self.points.len();
        &self.points[..if self.partial_last {
            n.saturating_sub(1)
        } else {
            n
        }]
    }
}

/// How much of second `t` a run of `r` covered (1: all of it).
pub(super) fn covered(r: &RunRecord, t: u32) -> f64 {
    if r.duration_s > 0.0 {
        (r.duration_s - t as f64).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

/// Whether a run's last second is partial (the run ended inside it).
pub(super) fn last_partial(r: &RunRecord) -> bool {
    r.series.last().is_some_and(|p| covered(r, p.t) < 0.999)
}

/// An axis: its range, ticks (position, text) and label with the unit.
pub(super) struct Axis {
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) ticks: Vec<(f64, String)>,
    pub(super) label: String,
}

/// 1-2-5 steps covering [0, max].
pub(super) fn nice_ticks(max: f64, target: usize) -> (f64, Vec<f64>) {
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

pub(super) fn fmt_num(v: f64) -> String {
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

pub(super) fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A linear axis from 0 to at least `max`.
pub(super) fn linear_axis(max: f64, label: &str) -> Axis {
    let (top, ticks) = nice_ticks(max, 5);
    Axis {
        min: 0.0,
        max: top,
        ticks: ticks.into_iter().map(|t| (t, fmt_num(t))).collect(),
        label: label.into(),
    }
}

/// Latency unit for values up to `max_us`: (divisor, name).
pub(super) fn lat_unit(max_us: f64) -> (f64, &'static str) {
    if max_us >= 2_000_000.0 {
        (1e6, "s")
    } else if max_us >= 2_000.0 {
        (1e3, "ms")
    } else {
        (1.0, "µs")
    }
}

/// An SVG line chart; the `svg` carries `data-points` (points drawn).
pub(super) fn line_chart(title: &str, x: &Axis, y: &Axis, lines: &[Line]) -> String {
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
        let full = l.full_points().len();
        let _ = write!(
            s,
            "<polyline class=\"series\" data-n=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"><title>{}</title></polyline>",
            l.points.len(),
            l.color,
            if l.dashed { " stroke-dasharray=\"7 4\"" } else { "" },
            pts[..full].join(" "),
            esc(&l.name)
        );
        if full < pts.len() {
            // The partial last second: dotted, thin, a hollow point.
            let (a, b) = l.points[full];
            let _ = write!(
                s,
                "<polyline class=\"partial\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" stroke-dasharray=\"2 4\" points=\"{}\"/><circle class=\"partial\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#fff\" stroke=\"{}\" stroke-width=\"1.5\"><title>{}: {} at {} (partial last second: the run ended inside it, few samples)</title></circle>",
                l.color,
                pts[full.saturating_sub(1)..].join(" "),
                sx(a),
                sy(b.min(y.max)),
                l.color,
                esc(&l.name),
                trim(b),
                trim(a)
            );
        }
        if l.points.len() <= 90 {
            for (a, b) in &l.points[..full] {
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
pub(super) fn pct_x(p: f64) -> f64 {
    -(1.0 - p / 100.0).max(1e-9).log10()
}

pub(super) fn percentile_chart(runs: &[(&str, &RunRecord)]) -> String {
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
            partial_last: false,
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

pub(super) fn time_axis(runs: &[(&str, &RunRecord)]) -> Axis {
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

pub(super) fn latency_time_chart(runs: &[(&str, &RunRecord)]) -> String {
    // The axis fits the whole seconds: a partial last second's few answers
    // are drawn as partial, clamped to the top, never a spike that squashes the rest.
    let max_us = runs
        .iter()
        .flat_map(|(_, r)| {
            let n = r.series.len() - usize::from(last_partial(r));
            r.series[..n].iter().map(|p| p.p99_us as f64)
        })
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
        let partial = last_partial(r) && r.series.last().is_some_and(|p| p.requests > 0);
        let suffix = if runs.len() > 1 {
            format!(" — {name}")
        } else {
            String::new()
        };
        lines.push(Line {
            partial_last: partial,
            name: format!("p50{suffix}"),
            color: P50,
            dashed: i == 1,
            points: pts(|p| p.p50_us),
        });
        lines.push(Line {
            partial_last: partial,
            name: format!("p90{suffix}"),
            color: P90,
            dashed: i == 1,
            points: pts(|p| p.p90_us),
        });
        lines.push(Line {
            partial_last: partial,
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

/// A per-second rate's points: the partial last second scaled to the time
/// it covers (marked partial), or left out when it covers under a quarter.
fn rate_points(
    r: &RunRecord,
    f: impl Fn(&redline_stats::SeriesPoint) -> f64,
) -> (Vec<(f64, f64)>, bool) {
    let mut partial = false;
    let points = r
        .series
        .iter()
        .filter_map(|p| {
            let c = covered(r, p.t);
            if c < 0.25 {
                return None;
            }
            partial = c < 0.999;
            Some((p.t as f64 + 0.5, f(p) / c))
        })
        .collect();
    (points, partial)
}

/// The top of a chart's values, partial last seconds aside.
fn top(lines: &[Line]) -> f64 {
    lines
        .iter()
        .flat_map(|l| l.full_points().iter().map(|p| p.1))
        .fold(0.0, f64::max)
}

pub(super) fn per_second_chart(
    runs: &[(&str, &RunRecord)],
    title: &str,
    label: &str,
    f: fn(&redline_stats::SeriesPoint) -> f64,
) -> String {
    let lines: Vec<Line> = runs
        .iter()
        .enumerate()
        .map(|(i, (name, r))| {
            let (points, partial_last) = rate_points(r, f);
            Line {
                partial_last,
                name: name.to_string(),
                color: RUN_COLORS[i % 2],
                dashed: i == 1,
                points,
            }
        })
        .collect();
    line_chart(
        title,
        &time_axis(runs),
        &linear_axis(top(&lines), label),
        &lines,
    )
}

/// Responses per second by status class (one line per class seen, per run).
pub(super) fn status_time_chart(runs: &[(&str, &RunRecord)]) -> String {
    const CLASS_COLORS: [&str; 5] = ["#868e96", "#2b8a3e", "#1c7ed6", "#e67700", "#c92a2a"];
    let mut lines = Vec::new();
    for (i, (name, r)) in runs.iter().enumerate() {
        for (class, color) in CLASS_COLORS.iter().enumerate() {
            if r.series.iter().all(|p| p.status_classes[class] == 0) {
                continue;
            }
            let (points, partial) = rate_points(r, |p| p.status_classes[class] as f64);
            let suffix = if runs.len() > 1 {
                format!(" — {name}")
            } else {
                String::new()
            };
            lines.push(Line {
                partial_last: partial,
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
        &linear_axis(top(&lines), "responses per second"),
        &lines,
    )
}
