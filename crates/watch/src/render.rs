//! The text report's server section, and byte formatting shared by the commands.

use redline_stats::watch::{HostWatch, PeakMean, ServerWatch, WatchSummary};
use std::fmt::Write;

/// KiB as a short human size (`512 KiB`, `31.4 MiB`, `3.82 GiB`).
pub fn kib(k: f64) -> String {
    if k < 1024.0 {
        format!("{k:.0} KiB")
    } else if k < 1024.0 * 1024.0 {
        format!("{:.1} MiB", k / 1024.0)
    } else {
        format!("{:.2} GiB", k / 1024.0 / 1024.0)
    }
}

fn pm_kib(p: PeakMean) -> String {
    format!("{:>10} {:>10}", kib(p.peak), kib(p.mean))
}

/// Renders the server section of the text report: per host, peak and mean of
/// processes, memory (RSS, PSS, private side by side), CPU, load, free memory, swap.
pub fn render_text(w: &ServerWatch) -> String {
    let mut o = String::new();
    for h in &w.hosts {
        render_host(&mut o, h);
    }
    o
}

fn render_host(o: &mut String, h: &HostWatch) {
    let s = &h.summary;
    let names = if h.process_names.is_empty() {
        "no process found".to_string()
    } else {
        h.process_names.join(", ")
    };
    let _ = writeln!(
        o,
        "Server watch:     {} on {} ({}; {} samples every {:.1} s)",
        h.targets.join(", "),
        h.host,
        names,
        s.samples,
        h.interval_s
    );
    let _ = writeln!(o, "                        peak       mean");
    let _ = writeln!(
        o,
        "  processes       {:>10.0} {:>10.1}",
        s.processes.peak, s.processes.mean
    );
    // SAFETY: geteuid() has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let note = if h.pss_exact {
        ""
    } else if root {
        "  (estimated: no smaps_rollup, Linux before 4.14)"
    } else {
        "  (estimated: smaps_rollup unreadable; run as the server's user or root)"
    };
    if let Some(cg) = &h.cgroup {
        let _ = writeln!(
            o,
            "  cgroup          {cg}: processes, CPU and memory below from it"
        );
        if let Some(m) = s.cgroup_memory_kib {
            let _ = writeln!(o, "  cgroup memory   {}  (page cache included)", pm_kib(m));
        }
        let mut ever = Vec::new();
        if let Some(k) = h.cgroup_memory_peak_kib {
            ever.push(format!("memory {}", kib(k as f64)));
        }
        if let Some(t) = h.cgroup_tasks_peak {
            ever.push(format!("{t} processes and threads"));
        }
        if !ever.is_empty() {
            let _ = writeln!(
                o,
                "  cgroup peak     {} (since the cgroup was created)",
                ever.join(", ")
            );
        }
    }
    let _ = writeln!(o, "  RSS total       {}", pm_kib(s.rss_kib));
    let _ = writeln!(o, "  PSS total       {}{note}", pm_kib(s.pss_kib));
    let _ = writeln!(o, "  private total   {}", pm_kib(s.private_kib));
    let _ = writeln!(
        o,
        "  per process     {} RSS, {} PSS, {} private (mean)",
        kib(s.rss_per_process_kib.mean),
        kib(s.pss_per_process_kib.mean),
        kib(s.private_per_process_kib.mean)
    );
    let may = match (&h.cpus_allowed, h.cpu_quota) {
        (Some(l), Some(q)) => format!("; it may use CPUs {l}, quota {q:.2} CPUs"),
        (Some(l), None) => format!(
            "; it may use CPU{} {l}",
            if l.contains(['-', ',']) { "s" } else { "" }
        ),
        (None, Some(q)) => format!("; quota {q:.2} CPUs"),
        (None, None) => String::new(),
    };
    let _ = writeln!(
        o,
        "  CPU             {:>9.0}% {:>9.0}%   (of one CPU; the machine has {} CPUs{may})",
        s.cpu_percent.peak, s.cpu_percent.mean, h.cpus
    );
    let samples: Vec<_> = h.samples.iter().skip(1).collect();
    let avg = |f: &dyn Fn(&redline_stats::watch::WatchSample) -> Option<f64>| {
        let v: Vec<f64> = samples.iter().filter_map(|x| f(x)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    if let Some(d) = avg(&|x| x.run_delay_per_s) {
        let _ = writeln!(
            o,
            "  waiting for CPU {d:>9.2} s/s (mean run-queue delay of its threads)"
        );
    }
    let psi: Vec<String> = [
        ("cpu", avg(&|x| x.psi_cpu)),
        ("memory", avg(&|x| x.psi_memory)),
        ("io", avg(&|x| x.psi_io)),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k} {v:.0}%")))
    .collect();
    if !psi.is_empty() {
        let _ = writeln!(
            o,
            "  pressure (PSI)  {} (mean share of time some task stalled; {})",
            psi.join(", "),
            h.psi_source.as_deref().unwrap_or("machine")
        );
    }
    if let Some(l) = h.cgroup_memory_limit_kib {
        let oom: u64 = h.samples.iter().map(|x| x.oom_kills).sum();
        let hits: u64 = h.samples.iter().map(|x| x.memory_limit_hits).sum();
        let _ = writeln!(
            o,
            "  cgroup memory   limit {}, {oom} OOM kills, {hits} limit hits during the watch",
            kib(l as f64)
        );
    }
    let _ = writeln!(
        o,
        "  load average    {:>10.2} {:>10.2}",
        s.load1.peak, s.load1.mean
    );
    let _ = writeln!(
        o,
        "  MemAvailable    lowest {} of {}",
        kib(s.min_mem_available_kib as f64),
        kib(h.mem_total_kib as f64)
    );
    if h.swap_total_kib == 0 {
        let _ = writeln!(o, "  swap            none configured");
    } else {
        let _ = writeln!(
            o,
            "  swap            {} pages in, {} pages out during the watch",
            s.swapped_in_pages, s.swapped_out_pages
        );
    }
}

/// Two lines per window (e.g. per stage of a run) of one watched host
/// (`what`, e.g. `apache2 on web1`):
/// `(name, t0_s, t1_s, summary)` with the times in seconds since the run
/// started and the summary from [`ServerWatch::windows`] (stored in the run
/// record's `stages[].server`): peak/mean of the process count, CPU (% of one
/// CPU) and load average, the lowest MemAvailable and the pages swapped in and
/// out; then peak/mean of total RSS, PSS and private memory. A window with no
/// sample says so. Empty when there is no window.
///
/// [`ServerWatch::windows`]: redline_stats::watch::ServerWatch::windows
pub fn render_windows(what: &str, windows: &[(&str, f64, f64, &WatchSummary)]) -> String {
    let mut o = String::new();
    if windows.is_empty() {
        return o;
    }
    let width = windows
        .iter()
        .map(|(n, _, _, _)| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let _ = writeln!(
        o,
        "Server per stage ({what}), peak/mean over the stage's samples:"
    );
    let pm = |p: PeakMean| format!("{}/{}", kib(p.peak), kib(p.mean));
    for (name, t0, t1, s) in windows {
        let head = format!("  {name:<width$} {t0:>6.1}-{t1:<6.1}s");
        if s.samples == 0 {
            let _ = writeln!(o, "{head}  no sample");
            continue;
        }
        let _ = writeln!(
            o,
            "{head}  processes {:.0}/{:.1}  CPU {:.0}%/{:.0}%  load {:.2}/{:.2}  MemAvailable lowest {}  swap {} in/{} out pages",
            s.processes.peak,
            s.processes.mean,
            s.cpu_percent.peak,
            s.cpu_percent.mean,
            s.load1.peak,
            s.load1.mean,
            kib(s.min_mem_available_kib as f64),
            s.swapped_in_pages,
            s.swapped_out_pages
        );
        let _ = writeln!(
            o,
            "  {:<pad$}RSS {}  PSS {}  private {}",
            "",
            pm(s.rss_kib),
            pm(s.pss_kib),
            pm(s.private_kib),
            pad = width + 17
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use redline_stats::watch::{HostWatch, WatchSample};

    #[test]
    fn two_lines_per_window_with_peak_and_mean_of_each() {
        let samples = (0..6)
            .map(|i| WatchSample {
                t: i as f64,
                processes: 2 + i,
                rss_kib: 2048 * (i as u64 + 1),
                pss_kib: 1024 * (i as u64 + 1),
                private_kib: 512 * (i as u64 + 1),
                cpu_percent: 10.0 * i as f64,
                load1: 0.25 * i as f64,
                mem_available_kib: 1024 * 1024 * (10 - i as u64),
                swap_out_per_s: if i == 4 { 30.0 } else { 0.0 },
                ..Default::default()
            })
            .collect();
        let mut h = HostWatch {
            host: "web1".into(),
            samples,
            ..Default::default()
        };
        h.summarize();
        let windows: Vec<(&str, f64, f64, WatchSummary)> =
            [("warm", 0.0, 2.0), ("peak", 3.0, 5.0), ("after", 9.0, 10.0)]
                .into_iter()
                .map(|(n, a, b)| (n, a, b, h.window(a, b)))
                .collect();
        let rows: Vec<(&str, f64, f64, &WatchSummary)> =
            windows.iter().map(|(n, a, b, s)| (*n, *a, *b, s)).collect();
        let t = render_windows("apache2 on web1", &rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6, "{t}");
        assert!(lines[0].contains("web1") && lines[0].contains("peak/mean"));
        // warm: samples 0..=2; CPU of the first sample (no interval before it) is not counted.
        assert!(
            lines[1].starts_with("  warm ")
                && lines[1].contains("processes 4/3.0")
                && lines[1].contains("CPU 20%/15%")
                && lines[1].contains("load 0.50/0.25")
                && lines[1].contains("MemAvailable lowest 8.00 GiB")
                && lines[1].contains("swap 0 in/0 out pages"),
            "{t}"
        );
        assert!(
            lines[2].contains("RSS 6.0 MiB/4.0 MiB")
                && lines[2].contains("PSS 3.0 MiB/2.0 MiB")
                && lines[2].contains("private 1.5 MiB/1.0 MiB"),
            "{t}"
        );
        // peak: samples 3..=5, 30 pages/s out during the second before t=4.
        assert!(
            lines[3].starts_with("  peak ")
                && lines[3].contains("processes 7/6.0")
                && lines[3].contains("CPU 50%/40%")
                && lines[3].contains("load 1.25/1.00")
                && lines[3].contains("MemAvailable lowest 5.00 GiB")
                && lines[3].contains("swap 0 in/30 out pages"),
            "{t}"
        );
        assert!(
            lines[4].contains("RSS 12.0 MiB/10.0 MiB")
                && lines[4].contains("private 3.0 MiB/2.5 MiB"),
            "{t}"
        );
        // The memory line lines up under the stage's first figure.
        assert_eq!(lines[4].find("RSS"), lines[3].find("processes"), "{t}");
        assert!(
            lines[5].contains("after") && lines[5].contains("no sample"),
            "{t}"
        );
        assert_eq!(render_windows("web1", &[]), "");
    }

    #[test]
    fn sizes() {
        assert_eq!(kib(512.0), "512 KiB");
        assert_eq!(kib(2048.0), "2.0 MiB");
        assert_eq!(kib(3.0 * 1024.0 * 1024.0), "3.00 GiB");
    }
}
