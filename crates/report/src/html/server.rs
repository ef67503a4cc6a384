//! A watched server's part of the report (`--watch`): one group per host with
//! its per-stage table and its memory, CPU, processes and swap over time.

use super::*;

/// Reads one memory figure of a watch sample.
pub(super) type SampleField = fn(&redline_stats::watch::WatchSample) -> u64;

/// Reads one rate (per second) of a watch sample.
pub(super) type RateField = fn(&redline_stats::watch::WatchSample) -> f64;

/// One watched host of one run: (run index, run name, run, host index in its
/// `server_watch.hosts`, the host).
/// One watched series of a host: `(t, f(sample))` for every sample; its
/// highest value raises `max` (the chart's axis).
pub(super) fn sample_line(
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
        partial_last: false,
        name,
        color,
        dashed,
        points,
    }
}

pub(super) type Member<'a> = (usize, &'a str, &'a RunRecord, usize, &'a HostWatch);

/// The watched server (`--watch`): one group per watched host (by host name,
/// in order of appearance; two runs that watched the same host share its
/// group, the second dashed): a per-stage table when the run had stages, then
/// memory, CPU and count of its processes over time, and the machine's
/// MemAvailable and swap activity. Empty when no run watched anything.
pub(super) fn server_charts(runs: &[(&str, &RunRecord)]) -> String {
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
pub(super) fn pm_kib(p: PeakMean) -> String {
    format!(
        "<td>{}/{}</td>",
        esc(&redline_watch::render::kib(p.peak)),
        esc(&redline_watch::render::kib(p.mean))
    )
}

/// The per-stage table of one watched host of one run, from the record's
/// `stages[].server` (the same figures as the text report): one row per
/// stage, each figure as `peak / mean`. Empty when the run had no stages.
pub(super) fn stage_server_table(caption: &str, r: &RunRecord, k: usize) -> String {
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
pub(super) fn host_group(n_runs: usize, host: &str, members: &[Member]) -> String {
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
