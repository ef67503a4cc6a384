//! A staged run's part of the report, which it starts with: the stage table
//! (the knee's stage marked), throughput against the load level with the
//! ideal-scaling line, response time against the load; and the server's
//! status page over the run.

use super::*;

/// Response time and throughput against the load level (a `--stages` run),
/// like a hosted ramp test's graphs: one point per load level (or band).
pub(super) fn stage_charts(runs: &[(&str, &RunRecord)]) -> String {
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
                redline_stats::stages::by_level(plan, &r.series, &r.config.status_rule()),
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
    let thr_axis = linear_axis(max_rps, "responses per second (req/s)");
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
                partial_last: false,
                name: format!("{label}{suffix}"),
                color,
                dashed,
                points: pts.iter().map(|p| (p.level, f(p) as f64 / div)).collect(),
            });
        }
        thr_lines.push(Line {
            partial_last: false,
            name: format!("throughput{suffix}"),
            color: RUN_COLORS[(*i).min(1)],
            dashed,
            points: pts.iter().map(|p| (p.level, p.requests_per_sec)).collect(),
        });
        // Ideal scaling: the first loaded level's throughput per unit of
        // load, carried on in proportion to the load.
        if let Some(b) = pts
            .iter()
            .find(|p| p.requests_per_sec > 0.0 && p.level > 0.0)
        {
            let per = b.requests_per_sec / b.level;
            // Drawn to where it leaves the chart (the axis fits the
            // measured throughput, not the ideal).
            let end = max_level.min(thr_axis.max / per);
            thr_lines.push(Line {
                partial_last: false,
                name: format!("ideal scaling (× the first level){suffix}"),
                color: IDEAL,
                dashed: true,
                points: vec![(0.0, 0.0), (end, per * end)],
            });
        }
    }
    let mut s = String::new();
    s.push_str(&line_chart(
        "Throughput against load (dashed grey: ideal scaling from the first level)",
        &x,
        &thr_axis,
        &thr_lines,
    ));
    s.push_str(&line_chart(
        "Response time against load (p50, p95, p99 per level)",
        &x,
        &linear_axis(max_us / div, &format!("latency ({lu})")),
        &lat_lines,
    ));
    s
}

/// The grey of the ideal-scaling line.
const IDEAL: &str = "#868e96";

/// A staged run's stage table, each run's: one row per stage (its time,
/// load level, req/s, p50/p95/p99, errors), the row of the knee's level
/// marked, the knee in words under it. Empty without stages.
pub(super) fn stage_table(runs: &[(&str, &RunRecord)]) -> String {
    let mut s = String::new();
    for (name, r) in runs {
        let Some(plan) = &r.config.stages else {
            continue;
        };
        if r.stages.is_empty() {
            continue;
        }
        let unit = plan.unit_name();
        let knee = r.knee.as_ref().map(|k| k.level);
        let _ = write!(
            s,
            "<div class=\"scroll\"><table class=\"stages\"><caption>Stages{}: {}</caption><thead><tr><th>stage</th><th>time (s)</th><th>load ({unit})</th><th>req/s</th><th>p50</th><th>p95</th><th>p99</th><th>errors</th><th></th></tr></thead><tbody>",
            if runs.len() > 1 {
                format!(" of {}", esc(name))
            } else {
                String::new()
            },
            esc(&crate::stages_line(r).unwrap_or_default())
        );
        let lat = |st: &StageSummary, v: u64| {
            if st.seconds == 0 || st.requests == 0 {
                "-".to_string()
            } else {
                dur_us(v as f64)
            }
        };
        // The knee's stage: the first whose level reaches the knee's.
        let knee_at = knee.and_then(|k| r.stages.iter().position(|st| st.level_to >= k - 1e-9));
        for (i, st) in r.stages.iter().enumerate() {
            let level = if st.level_from == st.level_to {
                redline_stats::stages::fmt_level(st.level_to)
            } else {
                format!(
                    "{}→{}",
                    redline_stats::stages::fmt_level(st.level_from),
                    redline_stats::stages::fmt_level(st.level_to)
                )
            };
            let is_knee = knee_at == Some(i);
            let _ = write!(
                s,
                "<tr{}><td>{}</td><td>{}–{}</td><td>{level}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if is_knee { " class=\"knee\"" } else { "" },
                i + 1,
                trim(st.start_s),
                trim(st.end_s),
                st.requests_per_sec,
                lat(st, st.p50_us),
                lat(st, st.p95_us),
                lat(st, st.p99_us),
                count(st.errors + st.non_2xx),
                if is_knee { "◀ knee: last level that scaled" } else { "" }
            );
        }
        s.push_str("</tbody></table></div>\n");
        if let Some(l) = crate::knee_line(r) {
            let _ = writeln!(s, "<p class=\"note\">{}</p>", esc(&l));
        }
    }
    s
}

/// Reads one count of a status page read.
pub(super) type StatusField = fn(&redline_stats::watch::StatusSample) -> Option<u64>;

/// The server's status page (`--server-status`) over time: busy, idle and
/// keep-alive workers on the run's clock (the second run dashed), and each
/// run's diagnosis. Empty when no run has either.
pub(super) fn status_section(runs: &[(&str, &RunRecord)]) -> String {
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
            let _ = writeln!(out, "</ul><p>{}</p>", esc(&d.advice));
            let unit = match r.config.stages.as_ref().map(|p| p.unit.as_str()) {
                Some("rps") => "req/s",
                _ => "connections",
            };
            for a in &d.also {
                let _ = write!(
                    out,
                    "<div class=\"also\" data-resource=\"{}\"><p><b>Also: {}</b></p><ul>",
                    esc(&a.resource),
                    esc(&a.headline(unit))
                );
                for e in &a.evidence {
                    let _ = write!(out, "<li>{}</li>", esc(e));
                }
                let _ = writeln!(out, "</ul><p>{}</p></div>", esc(&a.advice));
            }
            let _ = writeln!(out, "</div>");
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
                partial_last: false,
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
