//! The text report's server section, and byte formatting shared by the commands.

use redline_stats::watch::{HostWatch, PeakMean, ServerWatch};
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
    let note = if h.pss_exact {
        ""
    } else {
        "  (estimated: smaps_rollup unreadable; run as the server's user or root)"
    };
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
    let _ = writeln!(
        o,
        "  CPU             {:>9.0}% {:>9.0}%   (of one CPU; {} CPUs)",
        s.cpu_percent.peak, s.cpu_percent.mean, h.cpus
    );
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

/// One line per window (e.g. per stage of a run): `(name, t0_s, t1_s)` in
/// seconds since the run (the local watch) started, each summarized with
/// [`ServerWatch::window`]: processes (peak/mean), peak total RSS, PSS and
/// private memory, and CPU (peak/mean, % of one CPU). A window with no sample
/// says so. Empty when nothing was watched.
pub fn render_windows(w: &ServerWatch, windows: &[(&str, f64, f64)]) -> String {
    let mut o = String::new();
    if w.hosts.is_empty() || windows.is_empty() {
        return o;
    }
    let width = windows
        .iter()
        .map(|(n, _, _)| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let _ = writeln!(
        o,
        "Server per stage ({}):  processes peak/mean, RSS / PSS / private peak, CPU peak/mean",
        w.hosts[0].host
    );
    for (name, t0, t1) in windows {
        let s = w.window(*t0, *t1);
        if s.samples == 0 {
            let _ = writeln!(o, "  {name:<width$} {t0:>6.1}-{t1:<6.1}s  no sample");
            continue;
        }
        let _ = writeln!(
            o,
            "  {name:<width$} {t0:>6.1}-{t1:<6.1}s  {:>3.0}/{:<5.1} {} / {} / {}  {:.0}%/{:.0}%",
            s.processes.peak,
            s.processes.mean,
            kib(s.rss_kib.peak),
            kib(s.pss_kib.peak),
            kib(s.private_kib.peak),
            s.cpu_percent.peak,
            s.cpu_percent.mean
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use redline_stats::watch::{HostWatch, WatchSample};

    #[test]
    fn one_line_per_window() {
        let samples = (0..6)
            .map(|i| WatchSample {
                t: i as f64,
                processes: 2 + i,
                rss_kib: 2048 * (i as u64 + 1),
                pss_kib: 1024 * (i as u64 + 1),
                private_kib: 512 * (i as u64 + 1),
                cpu_percent: 10.0 * i as f64,
                ..Default::default()
            })
            .collect();
        let mut h = HostWatch {
            host: "web1".into(),
            samples,
            ..Default::default()
        };
        h.summarize();
        let w = ServerWatch {
            targets: vec!["apache2".into()],
            hosts: vec![h],
        };
        let t = render_windows(
            &w,
            &[("warm", 0.0, 2.0), ("peak", 3.0, 5.0), ("after", 9.0, 10.0)],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].contains("web1"));
        assert!(
            lines[1].contains("warm") && lines[1].contains("4/3.0") && lines[1].contains("1.5 MiB"),
            "{t}"
        );
        assert!(
            lines[2].contains("peak")
                && lines[2].contains("7/6.0")
                && lines[2].contains("12.0 MiB")
                && lines[2].contains("50%/40%"),
            "{t}"
        );
        assert!(lines[3].contains("no sample"), "{t}");
        assert_eq!(
            render_windows(&ServerWatch::default(), &[("x", 0.0, 1.0)]),
            ""
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(kib(512.0), "512 KiB");
        assert_eq!(kib(2048.0), "2.0 MiB");
        assert_eq!(kib(3.0 * 1024.0 * 1024.0), "3.00 GiB");
    }
}
