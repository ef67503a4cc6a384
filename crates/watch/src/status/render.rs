//! The status page, the server's error log and the diagnosis in the text report.

/// The status page in the text report: one line for the run, then one per
/// stage (peak/mean busy, lowest idle, keep-alive, the server's own req/s).
pub fn render_text(rec: &redline_stats::RunRecord) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let Some(w) = &rec.server_status else {
        o.push_str(&render_server_log(rec));
        o.push_str(&render_diagnosis(rec));
        return o;
    };
    let slots = w
        .slots
        .map(|n| format!(", {n} scoreboard slots"))
        .unwrap_or_default();
    let mpm = w
        .mpm
        .as_deref()
        .map(|m| format!(" {m} MPM"))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "\nServer status ({}{mpm}, {}{slots}): {} reads{}",
        w.server,
        w.url,
        w.samples.len(),
        if w.failed > 0 {
            let timeouts = w.failures.iter().filter(|f| f.kind == "timeout").count();
            let late = if timeouts > 0 {
                format!("{timeouts} timed out; ")
            } else {
                String::new()
            };
            format!(
                ", {} failed ({late}last: {})",
                w.failed,
                w.last_error.as_deref().unwrap_or("?")
            )
        } else {
            String::new()
        }
    );
    let line = |x: &redline_stats::watch::StatusWindow| {
        let mut l = format!("busy {:.0}/{:.1}", x.busy.peak, x.busy.mean);
        if let Some(i) = x.min_idle {
            let _ = write!(l, "  idle lowest {i}");
        }
        if let Some(k) = x.keepalive {
            let _ = write!(l, "  keep-alive {:.0}/{:.1}", k.peak, k.mean);
        }
        if let Some(r) = x.requests_per_s {
            let _ = write!(l, "  {r:.0} req/s (server's count)");
        }
        if let Some(q) = x.max_listen_queue {
            let _ = write!(l, "  listen queue peak {q}");
        }
        if let Some(m) = x.max_children_reached {
            let _ = write!(l, "  max children reached +{m}");
        }
        if let Some(n) = x.not_handled {
            let _ = write!(l, "  accepted not handled {n}");
        }
        if let Some(k) = x.async_keepalive {
            let _ = write!(l, "  async keep-alive {:.0}/{:.1}", k.peak, k.mean);
        }
        if x.failed > 0 {
            let _ = write!(l, "  failed reads {}", x.failed);
        }
        l
    };
    if let Some(all) = w.window(&rec.started_at, f64::MIN, f64::MAX) {
        let _ = writeln!(o, "  whole run (peak/mean): {}", line(&all));
    }
    let width = (0..rec.stages.len())
        .map(|i| rec.stages[i].name(i).chars().count())
        .max()
        .unwrap_or(0);
    for (i, st) in rec.stages.iter().enumerate() {
        let name = st.name(i);
        match &st.status {
            Some(x) => {
                let _ = writeln!(o, "  {name:<width$}  {}", line(x));
            }
            None => {
                let _ = writeln!(o, "  {name:<width$}  no read");
            }
        }
    }
    o.push_str(&render_server_log(rec));
    o.push_str(&render_diagnosis(rec));
    o
}

/// The server's error log in the text report: one line per finding.
pub fn render_server_log(rec: &redline_stats::RunRecord) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let Some(l) = &rec.server_log else {
        return o;
    };
    if l.findings.is_empty() {
        return o;
    }
    let paths: String = l
        .paths
        .join(", ")
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    let _ = writeln!(o, "\nServer error log ({paths}):");
    for f in &l.findings {
        let at = f
            .first_t
            .map(|t| format!(", first at {t:.1} s"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  {} x {:?} ({} [{}]{at})",
            f.count, f.message, f.resource, f.directive
        );
    }
    o
}

/// The diagnosis in the text report: what gave out, the evidence, the change.
pub fn render_diagnosis(rec: &redline_stats::RunRecord) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let Some(d) = &rec.diagnosis else {
        return o;
    };
    let unit = match rec.config.stages.as_ref().map(|p| p.unit.as_str()) {
        Some("rps") => "req/s",
        _ => "connections",
    };
    let _ = writeln!(o, "\nDiagnosis: {}", d.headline(unit));
    for e in &d.evidence {
        let _ = writeln!(o, "  - {e}");
    }
    let _ = writeln!(o, "  => {}", d.advice);
    for a in &d.also {
        let _ = writeln!(o, "Also: {}", a.headline(unit));
        for e in &a.evidence {
            let _ = writeln!(o, "  - {e}");
        }
        let _ = writeln!(o, "  => {}", a.advice);
    }
    o
}
