//! Unit tests of `watch.rs`, kept in their own file so that file reads as its job.

use super::*;

fn sample(t: f64, procs: u32, private: u64, swap_out: f64) -> WatchSample {
    WatchSample {
        t,
        processes: procs,
        private_kib: private,
        rss_kib: private * 2,
        pss_kib: private + 10,
        swap_out_per_s: swap_out,
        mem_available_kib: 1000 - private,
        ..Default::default()
    }
}

#[test]
fn summary_peaks_means_and_swap() {
    let mut h = HostWatch {
        mem_total_kib: 1000,
        samples: vec![sample(0.0, 2, 100, 0.0), sample(1.0, 4, 400, 10.0)],
        ..Default::default()
    };
    h.summarize();
    assert_eq!(h.summary.processes.peak, 4.0);
    assert_eq!(h.summary.processes.mean, 3.0);
    assert_eq!(h.summary.private_per_process_kib.peak, 100.0);
    assert_eq!(h.summary.private_per_process_kib.mean, 75.0);
    assert_eq!(h.summary.min_mem_available_kib, 600);
    assert_eq!(h.summary.swapped_out_pages, 10);
    assert!(h.swapped());
    assert!(!h.memory_low());
}

fn host(samples: Vec<WatchSample>) -> HostWatch {
    let mut h = HostWatch {
        mem_total_kib: 1000,
        samples,
        ..Default::default()
    };
    h.summarize();
    h
}

#[test]
fn window_picks_the_samples_inside() {
    let mut s: Vec<WatchSample> = (0..10)
        .map(|i| {
            let mut x = sample(i as f64, 2 + i, 100 * (i as u64 + 1), 0.0);
            x.cpu_percent = 10.0 * i as f64;
            x
        })
        .collect();
    s[6].swap_out_per_s = 5.0;
    let h = host(s);
    // The whole watch: the same as the summary.
    assert_eq!(h.window(0.0, 9.0), h.summary);
    // [2, 4]: samples 2, 3, 4.
    let w = h.window(2.0, 4.0);
    assert_eq!(w.samples, 3);
    assert_eq!(w.processes.peak, 6.0);
    assert_eq!(w.processes.mean, 5.0);
    assert_eq!(w.private_kib.peak, 500.0);
    assert_eq!(w.private_kib.mean, 400.0);
    assert_eq!(w.rss_kib.peak, 1000.0);
    assert_eq!(w.pss_kib.mean, 410.0);
    // CPU of a sample inside a later window counts (not skipped as the first).
    assert_eq!(w.cpu_percent.peak, 40.0);
    assert_eq!(w.cpu_percent.mean, 30.0);
    assert_eq!(w.min_mem_available_kib, 500);
    assert_eq!(w.swapped_out_pages, 0);
    // The window starting at 0 skips sample 0's CPU (no interval before it).
    let w0 = h.window(0.0, 1.0);
    assert_eq!(w0.cpu_percent.mean, 10.0);
    // Swap in the interval (5, 6] belongs to the window holding sample 6.
    assert_eq!(h.window(6.0, 8.0).swapped_out_pages, 5);
    assert_eq!(h.window(5.5, 6.5).swapped_out_pages, 5);
    assert_eq!(h.window(7.0, 9.0).swapped_out_pages, 0);
    // Fractional bounds, empty and inverted windows.
    assert_eq!(h.window(2.5, 3.5).samples, 1);
    assert_eq!(h.window(2.1, 2.9), WatchSummary::default());
    assert_eq!(h.window(5.0, 1.0), WatchSummary::default());
    assert_eq!(h.window(f64::NAN, 1.0), WatchSummary::default());
    assert_eq!(h.window(20.0, 30.0), WatchSummary::default());
    // ServerWatch::windows: every host, each on the run's clock.
    let mut late = h.clone();
    late.host = "b".into();
    late.started_at = "2026-11-22T10:00:02.000Z".into();
    let mut early = h.clone();
    early.started_at = "2026-11-22T10:00:00.000Z".into();
    let sw = ServerWatch {
        targets: vec![],
        hosts: vec![early, late],
    };
    let ws = sw.windows("2026-11-22T10:00:00.000Z", 2.0, 4.0);
    assert_eq!(ws.len(), 2);
    assert_eq!((ws[0].offset_s, &ws[0].summary), (0.0, &w));
    // The second host started 2 s into the run: run [2, 4] is its [0, 2].
    assert_eq!(ws[1].host, "b");
    assert_eq!(ws[1].offset_s, 2.0);
    assert_eq!(ws[1].summary, h.window(0.0, 2.0));
    // An unreadable start time counts as the run's.
    assert_eq!(sw.windows("?", 2.0, 4.0)[1].summary, w);
    // A whole-second stamp (older watches) within a second of the run is the run's start.
    let mut old = h.clone();
    old.started_at = "2026-11-22T10:00:00Z".into();
    assert_eq!(old.offset_from("2026-11-22T10:00:00.700Z"), 0.0);
    assert_eq!(old.offset_from("2026-11-22T10:00:03.000Z"), -3.0);
    old.started_at = "2026-11-22T10:00:00.300Z".into();
    assert_eq!(old.offset_from("2026-11-22T10:00:00.700Z"), -0.4);
    assert!(ServerWatch::default().windows("?", 0.0, 1.0).is_empty());
}

#[test]
fn old_records_without_snapshots_still_read() {
    let mut h = host(vec![sample(0.0, 1, 1, 0.0)]);
    let mut v = serde_json::to_value(&h).unwrap();
    assert!(v.get("peak_processes").is_none());
    h.peak_processes.push(ProcSample {
        pid: 1,
        name: "apache2".into(),
        ..Default::default()
    });
    v = serde_json::to_value(&h).unwrap();
    let back: HostWatch = serde_json::from_value(v).unwrap();
    assert_eq!(back, h);
}

#[test]
fn merge_adds_hosts_once_and_roundtrips() {
    let mut a = ServerWatch {
        targets: vec!["nginx".into()],
        hosts: vec![HostWatch {
            host: "a".into(),
            ..Default::default()
        }],
    };
    let b = ServerWatch {
        targets: vec!["mysqld".into()],
        hosts: vec![HostWatch {
            host: "b".into(),
            ..Default::default()
        }],
    };
    a.merge(&b);
    a.merge(&b);
    assert_eq!(a.hosts.len(), 2);
    assert_eq!(a.targets, vec!["nginx".to_string(), "mysqld".to_string()]);
    let j = serde_json::to_string(&a).unwrap();
    let back: ServerWatch = serde_json::from_str(&j).unwrap();
    assert_eq!(back, a);
}

fn knee() -> crate::stages::Knee {
    crate::stages::Knee {
        level: 5.0,
        unit: "connections".into(),
        reason: "throughput".into(),
        evidence: String::new(),
        low: None,
        high: None,
    }
}

fn empty_record() -> crate::RunRecord {
    crate::RunRecord::new(
        crate::record::RunConfig::get(
            "http://127.0.0.1:1/",
            crate::record::LoadModel::Closed {
                connections: 1,
                requests: Some(10),
                duration_s: None,
            },
        ),
        crate::record::Environment::default(),
        "2026-11-24T08:00:00.000Z".into(),
    )
}

fn staged(levels: &[f64], rps: &[f64]) -> crate::RunRecord {
    let mut rec = empty_record();
    rec.stages = levels
        .iter()
        .zip(rps)
        .enumerate()
        .map(|(i, (l, r))| crate::stages::StageSummary {
            start_s: i as f64 * 2.0,
            end_s: i as f64 * 2.0 + 2.0,
            level_from: *l,
            level_to: *l,
            seconds: 2,
            requests: (*r * 2.0) as u64,
            requests_per_sec: *r,
            p50_us: 1000,
            p95_us: 1000,
            p99_us: 1000,
            bytes_per_sec: 0.0,
            errors: 0,
            non_2xx: 0,
            server: Vec::new(),
            status: None,
        })
        .collect();
    rec
}

fn status(server: &str, slots: Option<u64>, reads: &[(f64, u64, u64, u64)]) -> StatusWatch {
    StatusWatch {
        url: "http://127.0.0.1:1/s".into(),
        server: server.into(),
        started_at: "2026-11-24T08:00:00.000Z".into(),
        interval_s: 0.5,
        slots,
        samples: reads
            .iter()
            .map(|(t, busy, idle, k)| StatusSample {
                t: *t,
                busy: Some(*busy),
                idle: Some(*idle),
                keepalive: Some(*k),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Busy reaches all 10 slots at 10 connections and stays: the worker pool.
#[test]
fn diagnosis_worker_pool_from_a_full_scoreboard() {
    let mut rec = staged(&[5.0, 10.0, 20.0, 40.0], &[25.0, 48.0, 50.0, 50.0]);
    let reads: Vec<(f64, u64, u64, u64)> = (0..16)
        .map(|i| {
            let t = i as f64 * 0.5 + 0.25;
            if t < 2.0 {
                (t, 6, 2, 0)
            } else {
                (t, 10, 0, 0)
            }
        })
        .collect();
    rec.server_status = Some(status("apache", Some(10), &reads));
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "worker_pool");
    assert!(d.directive.contains("MaxRequestWorkers"));
    assert_eq!(d.limit, Some(10));
    assert_eq!(d.at_level, Some(10.0));
    // The same with most busy workers in K: keep-alive holds the pool.
    let held: Vec<_> = reads
        .iter()
        .map(|(t, b, i, _)| (*t, *b, *i, b / 2))
        .collect();
    rec.server_status = Some(status("apache", Some(10), &held));
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "keepalive");
    assert!(d.directive.contains("KeepAliveTimeout"));
}

/// An idle count of 0 on a pool that can still grow, with throughput
/// scaling (no knee): not a limit.
#[test]
fn diagnosis_needs_a_real_limit() {
    let mut rec = staged(&[5.0, 20.0], &[5.0, 20.0]);
    rec.server_status = Some(status(
        "apache",
        Some(10),
        &[
            (0.5, 2, 0, 1),
            (1.5, 2, 0, 1),
            (2.5, 2, 0, 1),
            (3.5, 2, 0, 1),
        ],
    ));
    assert!(
        diagnose(&rec).is_none(),
        "no knee, no limit: nothing to say"
    );
    // Busy never holds at its peak: with a knee, the pool is not why.
    rec.server_status = Some(status(
        "apache",
        Some(10),
        &[
            (0.5, 2, 0, 1),
            (1.5, 5, 0, 1),
            (2.5, 3, 0, 1),
            (3.5, 4, 0, 1),
        ],
    ));
    rec.knee = Some(knee());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "unknown");
    assert!(
        d.evidence[0].contains("busy peaked at 5 of 10 slots"),
        "{d:?}"
    );
    assert!(d.advice.contains("--watch"));
    assert!(!d.advice.contains("--server-status"));
}

#[test]
fn diagnosis_without_evidence_says_what_to_add() {
    let mut rec = staged(&[5.0, 20.0], &[5.0, 6.0]);
    assert!(diagnose(&rec).is_none(), "no knee: nothing gave out");
    rec.knee = Some(knee());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "unknown");
    assert!(d.advice.contains("--server-status") && d.advice.contains("--watch"));
    assert!(diagnose(&empty_record()).is_none());
}

/// A plain open-loop run at 80 req/s over 3 s, capped at 20 connections,
/// every request answered in 1 ms: no trouble.
fn plain() -> crate::RunRecord {
    let mut rec = crate::RunRecord::new(
        crate::record::RunConfig::get(
            "http://127.0.0.1:1/",
            crate::record::LoadModel::Open {
                rate: 80.0,
                arrival: "constant".into(),
                max_connections: 20,
                requests: None,
                duration_s: Some(3.0),
            },
        ),
        crate::record::Environment::default(),
        "2026-11-24T08:00:00.000Z".into(),
    );
    rec.server.address = "127.0.0.1:1".into();
    rec.duration_s = 3.0;
    let mut h = crate::Hist::new();
    for _ in 0..80 {
        h.record_us(1000);
    }
    for t in 0..3 {
        rec.series
            .push(crate::record::SeriesPoint::new(t, 80, 0, 8000, &h));
        rec.latency.merge(&h);
    }
    rec.counters.scheduled = 240;
    rec.counters.sent = 240;
    rec.counters.completed = 240;
    rec.counters.peak_connections = 2;
    rec
}

#[test]
fn a_plain_run_without_trouble_has_no_diagnosis() {
    let rec = plain();
    assert!(trouble(&rec).is_empty());
    assert!(diagnose(&rec).is_none());
}

#[test]
fn a_failed_slo_is_trouble_for_find() {
    let rec = plain();
    assert!(diagnose(&rec).is_none());
    let d = diagnose_with(&rec, vec!["p99<500us (measured 1ms)".into()]).unwrap();
    assert_eq!(d.resource, "unknown");
    assert_eq!(d.evidence[0], "p99<500us (measured 1ms)");
}

#[test]
fn a_plain_run_with_trouble_says_what_to_add() {
    let mut rec = plain();
    rec.counters.in_flight_at_end = 5;
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "unknown");
    assert!(
        d.evidence[0].contains("5 requests were never answered"),
        "{d:?}"
    );
    assert!(d.advice.contains("--server-status") && d.advice.contains("--watch"));
    // A latency blow-up alone is trouble: p99 >= 10x p50 and >= 100 ms.
    let mut rec = plain();
    let mut slow = crate::Hist::new();
    for _ in 0..10 {
        slow.record_us(500_000);
    }
    rec.latency.merge(&slow);
    let f = trouble(&rec);
    assert!(f.iter().any(|x| x.starts_with("latency blew up")), "{f:?}");
    // 50 ms tails are not.
    let mut rec = plain();
    let mut tail = crate::Hist::new();
    for _ in 0..10 {
        tail.record_us(50_000);
    }
    rec.latency.merge(&tail);
    assert!(trouble(&rec).is_empty());
}

#[test]
fn the_server_went_away_names_the_instant() {
    let mut rec = plain();
    let empty = crate::Hist::new();
    rec.series
        .push(crate::record::SeriesPoint::new(3, 0, 900, 0, &empty));
    rec.counters.failed = 900;
    rec.errors.push(crate::ErrorCount {
        kind: crate::ErrorKind::Refused,
        message: "connection refused".into(),
        count: 900,
    });
    rec.warn(
        "server_gone",
        "the server went away at 3.0 s: 900 requests failed after it".into(),
    );
    // SYNs too: the server going away comes first.
    rec.warn("syn_retransmits", "2 connection attempts (SYN)".into());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "server_gone");
    assert_eq!(d.at_s, Some(3.0));
    assert!(d.advice.contains("at 3.0 s"), "{d:?}");
    assert!(d.evidence[1].contains("900 connections refused"), "{d:?}");
}

#[test]
fn the_client_listen_backlog_and_bandwidth_rules() {
    // The client's own limit.
    let mut rec = plain();
    rec.counters.not_sent = 100;
    rec.warn("scheduler_lag", "scheduler lag p99 7 ms".into());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "client");
    assert_eq!(d.evidence, vec!["scheduler lag p99 7 ms".to_string()]);
    // A rate the client did not send while the server held every
    // connection is the server's concurrency, not the client.
    let mut rec = plain();
    rec.counters.not_sent = 100;
    rec.counters.waited_for_connection = 100;
    rec.counters.peak_connections = 20;
    rec.warn("rate_short", "sent 50 req/s: the server held all 20".into());
    assert!(client_limits(&rec).is_empty());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "server_concurrency");
    assert_eq!(d.limit, Some(20));
    assert!(d.advice.contains("--server-status"), "{d:?}");
    // The same rate_short without every connection held: the client.
    rec.counters.peak_connections = 5;
    assert_eq!(client_limits(&rec).len(), 1);
    assert_eq!(diagnose(&rec).unwrap().resource, "client");
    // Listen backlog: SYNs sent again.
    let mut rec = plain();
    rec.counters.completed = 230;
    rec.counters.in_flight_at_end = 10;
    rec.warn("syn_retransmits", "3 connection attempts (SYNs)".into());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "listen_backlog");
    assert!(d.directive.contains("ListenBacklog") && d.directive.contains("somaxconn"));
    // Or accept queue overflows counted on this host.
    let mut rec = plain();
    rec.counters.in_flight_at_end = 10;
    rec.client.listen_overflows = 7;
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "listen_backlog");
    assert!(d.evidence[0].contains("7 times"), "{d:?}");
    // Or on the watched server's machine (a remote `redline watch`).
    let mut rec = plain();
    rec.counters.in_flight_at_end = 10;
    let mut h = host(vec![sample(0.0, 2, 100, 0.0), sample(1.0, 2, 100, 0.0)]);
    h.host = "web1".into();
    h.samples[1].listen_overflows = 12;
    rec.server_watch = Some(ServerWatch {
        targets: vec!["nginx".into()],
        hosts: vec![h],
    });
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "listen_backlog", "{d:?}");
    assert!(
        d.evidence[0].starts_with("web1: its listening sockets dropped 12"),
        "{d:?}"
    );
    // Bandwidth: 1.2 GB/s over loopback, with trouble.
    let mut rec = plain();
    rec.counters.in_flight_at_end = 10;
    rec.counters.bytes_read = 3_600_000_000;
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "bandwidth");
    assert!(d.evidence[0].contains("1200.0 MB/s"), "{d:?}");
    // Off loopback: against the link's speed, when known.
    rec.server.address = "192.0.2.1:80".into();
    assert_eq!(diagnose(&rec).unwrap().resource, "unknown");
    rec.environment.link_mbit = Some(10_000);
    assert_eq!(diagnose(&rec).unwrap().resource, "bandwidth");
    rec.counters.bytes_read = 3_000_000_000; // 8 Gbit/s: under 90 % of 10
    assert_eq!(diagnose(&rec).unwrap().resource, "unknown");
    assert!(is_loopback("[::1]:8080") && !is_loopback("[2001:db8::1]:80"));
}

/// A plain run whose status page shows every slot busy: the worker pool.
#[test]
fn a_plain_run_with_a_full_scoreboard_names_the_pool() {
    let mut rec = plain();
    rec.counters.in_flight_at_end = 10;
    rec.counters.peak_connections = 20;
    let reads: Vec<(f64, u64, u64, u64)> =
        (0..6).map(|i| (i as f64 * 0.5 + 0.2, 10, 0, 0)).collect();
    rec.server_status = Some(status("apache", Some(10), &reads));
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "worker_pool", "{d:?}");
    assert_eq!(d.limit, Some(10));
    assert_eq!((d.at_level, d.at_s), (None, Some(0.2)));
    assert!(d.evidence[0].contains("0.2 s into the run"), "{d:?}");
    // Without trouble, a full scoreboard alone says nothing on a plain run.
    rec.counters.in_flight_at_end = 0;
    assert!(diagnose(&rec).is_none());
}
