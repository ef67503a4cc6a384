//! A staged run's part of the report: response time and throughput against
//! the load level, and the server's status page over the run.

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
