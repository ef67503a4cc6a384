//! Unit tests of `html.rs`, kept in their own file so that file reads as its job.

use super::*;
use crate::compare::tests::synth;

/// The status page's workers are charted and the diagnosis shown.
#[test]
fn status_page_chart_and_diagnosis() {
    let mut a = synth(2000, 1000, 1, 10);
    assert!(!report(&[("run 1", &a)]).contains("Server status and diagnosis"));
    a.server_status = Some(redline_stats::watch::StatusWatch {
        url: "http://127.0.0.1:1/server-status?auto".into(),
        server: "apache".into(),
        started_at: a.started_at.clone(),
        interval_s: 0.5,
        samples: (0..6)
            .map(|i| redline_stats::watch::StatusSample {
                t: i as f64 * 0.5,
                busy: Some(10),
                idle: Some(0),
                keepalive: Some(i),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    });
    a.diagnosis = Some(redline_stats::watch::Diagnosis {
        resource: "worker_pool".into(),
        directive: "MaxRequestWorkers (ServerLimit)".into(),
        limit: Some(10),
        at_level: Some(10.0),
        evidence: vec!["busy workers reached <10>".into()],
        advice: "raise MaxRequestWorkers".into(),
        ..Default::default()
    });
    let html = report(&[("run 1", &a)]);
    assert!(html.contains("data-resource=\"worker_pool\""));
    assert!(html.contains("busy workers reached &lt;10&gt;"));
    assert!(html.contains("the worker pool ran out at 10 (first reached at 10 connections)"));
    let chart = html
        .split("<figcaption>Workers over time")
        .nth(1)
        .expect("the workers chart");
    assert!(
        chart.contains("data-points=\"18\""),
        "busy, idle, keep-alive: 6 reads each"
    );
}

#[test]
fn journeys_get_their_table_and_plain_runs_none() {
    let mut a = synth(2000, 1000, 1, 10);
    assert!(!report(&[("run 1", &a)]).contains("<h2>Journeys</h2>"));
    a.journeys = Some(redline_stats::Journeys {
        arrived: 40,
        started: 40,
        completed: 37,
        abandoned: 3,
        abandoned_stop: 3,
        ..Default::default()
    });
    let page = report(&[("run <1>", &a)]);
    assert!(page.contains("<h2>Journeys</h2>"));
    assert!(page.contains("<tr><td>run &lt;1&gt;</td><td>40</td><td>40</td><td>37</td>"));
}

#[test]
fn one_and_two_runs_render_every_chart() {
    let a = synth(2000, 1000, 1, 10);
    let mut b = synth(2400, 800, 2, 10);
    b.label = Some("<after>".into());
    let one = report(&[("run 1", &a)]);
    assert!(one.starts_with("<!DOCTYPE html>"));
    assert_eq!(one.matches("<svg class=\"chart\"").count(), 7);
    assert!(one.contains("Status codes over time") && one.contains(">2xx<"));
    assert!(!one.contains("http://") || one.contains("127.0.0.1"));
    assert!(!one.contains("src=\"http"), "nothing fetched");
    let two = report(&[("run 1", &a), ("run 2 <b>", &b)]);
    assert!(two.contains("run 2 &lt;b&gt;"));
    assert!(two.contains("&lt;after&gt;"));
    assert!(two.contains("stroke-dasharray"));
    assert!(two.contains("99.999%"));
    // Every chart has points.
    for part in two.split("data-points=\"").skip(1) {
        let n: usize = part[..part.find('"').unwrap()].parse().unwrap();
        assert!(n > 0);
    }
}

#[test]
fn staged_run_gets_load_charts() {
    use redline_stats::stages::{StagePlan, StageSpec};
    let mut a = synth(2000, 1000, 1, 10);
    assert!(!report(&[("a", &a)]).contains("Throughput against load"));
    a.config.stages = Some(StagePlan {
        unit: "connections".into(),
        step: true,
        stages: (1..=5)
            .map(|l| StageSpec {
                duration_s: 2.0,
                level: l as f64,
            })
            .collect(),
    });
    redline_stats::stages::analyze(&mut a);
    let h = report(&[("a", &a)]);
    assert!(h.contains("Response time against load"));
    assert!(h.contains("Throughput against load"));
    assert!(h.contains("load (connections)"));
    assert!(h.contains("redline: "), "the knee line");
}

#[test]
fn watched_server_gets_memory_and_cpu_charts() {
    use redline_stats::watch::{HostWatch, ServerWatch, WatchSample};
    let mut a = synth(2000, 1000, 1, 10);
    let samples = (0..20)
        .map(|k| WatchSample {
            t: k as f64 * 0.5,
            processes: 3,
            rss_kib: 30_000 + k * 100,
            pss_kib: 20_000 + k * 100,
            private_kib: 10_000 + k * 100,
            cpu_percent: 50.0 + k as f64,
            mem_available_kib: (1000 - 10 * k) * 1024,
            swap_out_per_s: if k == 10 { 120.0 } else { 0.0 },
            ..Default::default()
        })
        .map(|mut s| {
            s.processes = 3 + (s.t as u32) / 2;
            s
        })
        .collect();
    a.server_watch = Some(ServerWatch {
        targets: vec!["nginx".into()],
        hosts: vec![HostWatch {
            host: "web1".into(),
            targets: vec!["nginx".into()],
            mem_total_kib: 2000 * 1024,
            swap_total_kib: 1024 * 1024,
            samples,
            ..Default::default()
        }],
    });
    let html = report(&[("run 1", &a)]);
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 12);
    assert!(html.contains("Server memory over time") && html.contains("nginx on web1"));
    // Process count, MemAvailable and swap, each sample a point with its value.
    let chart = |title: &str| {
        let at = html.find(&format!("<figcaption>{title}")).expect(title);
        let end = at + html[at..].find("</figure>").unwrap();
        html[at..end].to_string()
    };
    let p = chart("Server processes over time");
    assert!(
        p.contains("data-points=\"20\"") && p.contains(">processes<"),
        "{p}"
    );
    assert!(p.contains("<title>processes: 3 at 0</title>"), "{p}");
    assert!(p.contains("<title>processes: 7 at 9.5</title>"), "{p}");
    let m = chart("Machine MemAvailable over time");
    assert!(m.contains(">MemAvailable (MiB)<"), "{m}");
    assert!(m.contains("<title>MemAvailable: 1000 at 0</title>"), "{m}");
    assert!(m.contains("<title>MemAvailable: 810 at 9.5</title>"), "{m}");
    // The axis reaches MemTotal (2000 MiB).
    assert!(
        m.contains(">2,000</text>") || m.contains(">2000</text>"),
        "{m}"
    );
    let s = chart("Machine swap activity over time");
    assert!(!s.contains("no swap configured"), "{s}");
    assert!(s.contains("data-points=\"40\"") && s.contains(">pages per second<"));
    assert!(s.contains("<title>swapped out: 120 at 5</title>"), "{s}");
    assert!(s.contains("<title>swapped in: 0 at 5</title>"), "{s}");
    if let Some(w) = a.server_watch.as_mut() {
        w.hosts[0].swap_total_kib = 0;
    }
    let html = report(&[("run 1", &a)]);
    assert!(html.contains("Machine swap activity over time — web1 (no swap configured)"));
    let plain = report(&[("run 1", &synth(2000, 1000, 1, 10))]);
    assert!(!plain.contains("Server memory"));
}

/// Two watched hosts (a local `--watch` and a merged remote record that
/// started 2 s into the run) of a 2-stage run: one group of five charts
/// per host, titled with it, each with its per-stage table.
#[test]
fn every_watched_host_gets_its_group_and_stage_table() {
    use redline_stats::stages::{StagePlan, StageSpec};
    use redline_stats::watch::{ServerWatch, WatchSample};
    let mut a = synth(2000, 1000, 1, 10);
    a.started_at = "2026-11-22T10:00:00.000Z".into();
    a.config.stages = Some(StagePlan {
        unit: "connections".into(),
        step: true,
        stages: vec![
            StageSpec {
                duration_s: 5.0,
                level: 1.0,
            },
            StageSpec {
                duration_s: 5.0,
                level: 4.0,
            },
        ],
    });
    let host = |name: &str, start: &str, procs: fn(f64) -> u32| {
        let mut h = HostWatch {
            host: name.into(),
            targets: vec!["apache2".into()],
            started_at: start.into(),
            mem_total_kib: 4 << 20,
            samples: (0..=20)
                .map(|k| {
                    let t = k as f64 * 0.5;
                    WatchSample {
                        t,
                        processes: procs(t),
                        private_kib: 1024 * procs(t) as u64,
                        mem_available_kib: 2 << 20,
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        };
        h.summarize();
        h
    };
    a.server_watch = Some(ServerWatch {
        targets: vec!["apache2".into()],
        hosts: vec![
            host("web1", "2026-11-22T10:00:00.000Z", |t| {
                if t < 5.0 {
                    3
                } else {
                    8
                }
            }),
            host("<web2>", "2026-11-22T10:00:02.000Z", |t| {
                if t < 3.0 {
                    2
                } else {
                    5
                }
            }),
        ],
    });
    redline_stats::stages::analyze(&mut a);
    let html = report(&[("run 1", &a)]);
    let groups: Vec<&str> = html
        .split("<section class=\"server-host\"")
        .skip(1)
        .collect();
    assert_eq!(groups.len(), 2);
    assert!(groups[0].starts_with(" data-host=\"web1\"><h3>Server: web1</h3>"));
    assert!(groups[1].starts_with(" data-host=\"&lt;web2&gt;\"><h3>Server: &lt;web2&gt;</h3>"));
    for (g, name) in groups.iter().zip(["web1", "&lt;web2&gt;"]) {
        assert_eq!(g.matches("<svg class=\"chart\"").count(), 5, "{name}");
        assert!(g.contains(&format!(
            "<figcaption>Server processes over time — {name}</figcaption>"
        )));
        assert_eq!(g.matches("<table class=\"server-stages\"").count(), 1);
    }
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 7 + 2 + 10);
    // Stage rows: name, time, samples, processes peak/mean, …
    let row = |g: &str, stage: &str| {
        let at = g.find(&format!("<tr><td>{stage}</td>")).expect(stage);
        g[at..at + g[at..].find("</tr>").unwrap()].to_string()
    };
    // web1: stage 1 [0, 5] holds samples 0..=5 s (the one at 5 s has 8).
    let r = row(groups[0], "stage 1 @1");
    assert!(
        r.contains("<td>0–5</td><td>11</td><td>8/3.5</td>")
            && r.contains("<td>8.0 MiB/3.5 MiB</td>"),
        "{r}"
    );
    let r = row(groups[0], "stage 2 @4");
    assert!(r.contains("<td>5–10</td><td>11</td><td>8/8.0</td>"), "{r}");
    // web2 started 2 s late: run [0, 5] is its [-2, 3] (7 samples, 5 at 3 s).
    let r = row(groups[1], "stage 1 @1");
    assert!(r.contains("<td>0–5</td><td>7</td><td>5/"), "{r}");
    assert!(groups[1].contains("its watch started 2 s after the run"));
}

#[test]
fn insecure_runs_say_so_as_the_text_report_does() {
    let a = synth(10, 1000, 1, 1);
    assert!(!report(&[("a", &a)]).contains("--insecure"));
    let mut b = a.clone();
    b.config.insecure = true;
    let h = report(&[("b", &b)]);
    assert!(h.contains("certificate verification OFF (--insecure)"));
    assert!(crate::text(&b).contains("certificate verification OFF (--insecure)"));
    let both = report(&[("a", &a), ("b", &b)]);
    assert!(both.contains("certificate verified"));
}

#[test]
fn empty_run_does_not_panic() {
    let mut a = synth(10, 1000, 1, 1);
    a.series.clear();
    a.latency = Hist::new();
    a.connect = Hist::new();
    let h = report(&[("empty", &a)]);
    assert!(h.contains("</html>"));
    assert!(report(&[]).contains("No runs"));
}

#[test]
fn ticks_are_nice() {
    let (top, t) = nice_ticks(93.0, 5);
    assert_eq!(top, 100.0);
    assert_eq!(t, vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
    assert!((pct_x(99.0) - 2.0).abs() < 1e-9);
}

/// A partial last second is drawn dotted and hollow, and its few answers'
/// latency does not set the chart's range (issue 35: a p50 of 21.5 ms on
/// 36 requests plotted as a spike over seconds at 4.7 ms).
#[test]
fn a_partial_last_second_is_drawn_as_partial_not_a_spike() {
    let mut a = synth(2000, 1000, 1, 4);
    let mut h = Hist::with_sigfig(2);
    for _ in 0..36 {
        h.record_us(21_500);
    }
    let mut p = redline_stats::SeriesPoint::new(4, 36, 0, 36 * 500, &h);
    p.status_classes = [0, 36, 0, 0, 0];
    a.series.push(p);
    a.duration_s = 4.02;
    let page = report(&[("a", &a)]);
    let lat = &page[page.find("Latency over time").unwrap()..];
    let lat = &lat[..lat.find("</figure>").unwrap()];
    // p50, p90, p99: each with its partial point.
    assert_eq!(lat.matches("<circle class=\"partial\"").count(), 3, "{lat}");
    // The axis fits the whole seconds (about 1.5 ms at p99 × 4 tail), not 21.5 ms.
    assert!(!lat.contains(">25<") && !lat.contains(">20<"), "{lat}");
    // A whole last second is an ordinary point.
    let mut whole = synth(2000, 1000, 1, 4);
    whole.duration_s = 4.0;
    assert!(!report(&[("a", &whole)]).contains("class=\"partial\""));
}

/// A staged report starts with the stage table, the knee's stage marked,
/// then throughput against load with the ideal-scaling line inside the chart.
#[test]
fn a_staged_report_starts_with_its_stage_table() {
    use redline_stats::stages::{StagePlan, StageSpec};
    let mut a = synth(2000, 1000, 1, 10);
    // Throughput flat while the load grows from 1 to 5: the knee is at 1.
    a.config.stages = Some(StagePlan {
        unit: "connections".into(),
        step: true,
        stages: (1..=5)
            .map(|l| StageSpec {
                duration_s: 2.0,
                level: l as f64,
            })
            .collect(),
    });
    redline_stats::stages::analyze(&mut a);
    assert!(a.knee.is_some(), "{:?}", a.stages);
    let h = report(&[("a", &a)]);
    let table = h.find("<table class=\"stages\">").unwrap();
    assert!(table < h.find("Throughput against load").unwrap());
    assert!(h.find("Throughput against load").unwrap() < h.find("<h2>Summary</h2>").unwrap());
    assert_eq!(h.matches("<tr class=\"knee\">").count(), 1);
    // The ideal line ends where it leaves the chart: inside the frame.
    let fig = &h[h.find("Throughput against load").unwrap()..];
    let fig = &fig[..fig.find("</figure>").unwrap()];
    let ideal = fig
        .split("<polyline")
        .find(|p| p.contains("<title>ideal scaling"))
        .unwrap();
    let pts = ideal.split("points=\"").nth(1).unwrap();
    let pts = &pts[..pts.find('"').unwrap()];
    for xy in pts.split(' ') {
        let y: f64 = xy.split(',').nth(1).unwrap().parse().unwrap();
        assert!(y >= chart::MT - 0.1, "{pts}");
    }
}
