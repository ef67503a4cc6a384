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
        // The first byte came with the answer (a small one).
        rec.waiting.merge(&h);
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
    // Without trouble, a scoreboard with every slot busy while more
    // connections wait is still the server saying its pool is the limit.
    rec.counters.in_flight_at_end = 0;
    assert_eq!(diagnose(&rec).unwrap().resource, "worker_pool");
    // Idle 0 on a pool that could grow (slots free) is not, without trouble.
    let reads: Vec<(f64, u64, u64, u64)> =
        (0..6).map(|i| (i as f64 * 0.5 + 0.2, 8, 0, 0)).collect();
    rec.server_status = Some(status("apache", Some(16), &reads));
    assert!(diagnose(&rec).is_none());
}

/// A watched host on the run's clock (same start) with one sample every
/// 0.5 s over 8 s, made by `f(t)`.
fn watched(cpus: u32, allowed: Option<&str>, f: impl Fn(f64) -> WatchSample) -> ServerWatch {
    let mut h = HostWatch {
        host: "srv".into(),
        started_at: "2026-11-24T08:00:00.000Z".into(),
        cpus,
        cpus_allowed: allowed.map(String::from),
        mem_total_kib: 1 << 24,
        process_names: vec!["php-fpm8.2".into()],
        samples: (0..17).map(|i| f(i as f64 * 0.5)).collect(),
        ..Default::default()
    };
    for s in &mut h.samples {
        s.mem_available_kib = 1 << 23;
    }
    h.summarize();
    ServerWatch {
        targets: vec!["1".into()],
        hosts: vec![h],
    }
}

/// A staged run 1 -> 16 connections whose throughput stops at 2, with a
/// php-fpm status page full at 8 from 3 s on.
fn pinned_pool() -> crate::RunRecord {
    let mut rec = staged(&[1.0, 2.0, 4.0, 8.0, 16.0], &[45.0, 50.0, 50.0, 50.0, 50.0]);
    rec.duration_s = 10.0;
    rec.knee = Some(crate::stages::Knee {
        level: 2.0,
        ..knee()
    });
    let reads: Vec<(f64, u64, u64, u64)> = (0..20)
        .map(|i| {
            let t = i as f64 * 0.5;
            if t < 3.0 {
                (t, 4, 4, 0)
            } else {
                (t, 8, 0, 0)
            }
        })
        .collect();
    let mut st = status("php-fpm", None, &reads);
    st.server = "php-fpm".into();
    rec.server_status = Some(st);
    rec
}

/// The php-fpm pool pinned to one core: the pool is full only
/// because its workers wait for the CPU, so the CPU is named, with the
/// CPUs the server may use (1), not the machine's (2); the pool is not
/// named, and the advice says raising it would make it slower.
#[test]
fn a_cpu_bound_pool_on_one_core_is_a_cpu_limit() {
    let mut rec = pinned_pool();
    // Without a watch the status page's full pool is the verdict.
    assert_eq!(diagnose(&rec).unwrap().resource, "worker_pool");
    rec.server_watch = Some(watched(2, Some("0"), |t| WatchSample {
        t,
        processes: 9,
        cpu_percent: 97.0,
        run_delay_per_s: Some(6.0),
        ..Default::default()
    }));
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "cpu", "{d:?}");
    assert!(
        d.evidence[0].contains("CPU 0 (1.00 CPUs)"),
        "{:?}",
        d.evidence
    );
    assert!(d
        .evidence
        .iter()
        .any(|e| e.contains("would make the server slower")));
    assert!(d.also.iter().all(|a| a.resource != "worker_pool"));
    // The same CPU use on a server that may use both CPUs is not saturated
    // (97 % of 200 %), and its threads did not wait: the pool is the limit.
    rec.server_watch = Some(watched(2, Some("0-1"), |t| WatchSample {
        t,
        processes: 9,
        cpu_percent: 97.0,
        run_delay_per_s: Some(0.05),
        ..Default::default()
    }));
    assert_eq!(diagnose(&rec).unwrap().resource, "worker_pool");
    // Half a CPU used, threads queued for it (others hold the CPU): CPU.
    rec.server_watch = Some(watched(2, Some("0"), |t| WatchSample {
        t,
        processes: 9,
        cpu_percent: 55.0,
        run_delay_per_s: Some(5.0),
        ..Default::default()
    }));
    assert_eq!(diagnose(&rec).unwrap().resource, "cpu");
    // One noisy sample is not saturation.
    rec.server_watch = Some(watched(2, Some("0"), |t| WatchSample {
        t,
        processes: 9,
        cpu_percent: if (t - 4.0).abs() < 0.1 { 99.0 } else { 20.0 },
        ..Default::default()
    }));
    assert_eq!(diagnose(&rec).unwrap().resource, "worker_pool");
}

/// A cgroup whose OOM killer killed workers names memory first, with the
/// limit and the kill count; without kills or pressure it does not.
#[test]
fn oom_kills_in_the_servers_cgroup_are_a_memory_limit() {
    let mut rec = staged(&[5.0, 10.0, 20.0], &[20.0, 12.0, 8.0]);
    rec.duration_s = 6.0;
    rec.knee = Some(knee());
    let mut w = watched(2, Some("0-1"), |t| WatchSample {
        t,
        processes: 12,
        cpu_percent: 30.0,
        oom_kills: u64::from(t > 2.0 && t < 5.0),
        memory_limit_hits: 40,
        cgroup_memory_kib: Some(160 * 1024),
        ..Default::default()
    });
    w.hosts[0].cgroup_memory_limit_kib = Some(160 * 1024);
    w.hosts[0].cgroup = Some("v1 memory:/rl".into());
    w.hosts[0].summarize();
    rec.server_watch = Some(w.clone());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "memory", "{d:?}");
    assert_eq!(d.limit, Some(160));
    assert!(
        d.evidence[0].contains("OOM killer killed 5 processes"),
        "{:?}",
        d.evidence
    );
    // Machine-wide memory pressure (a build beside the server) without the
    // server's own evidence names nothing.
    let mut calm = watched(2, Some("0-1"), |t| WatchSample {
        t,
        processes: 12,
        cpu_percent: 30.0,
        psi_memory: Some(60.0),
        psi_memory_full: Some(40.0),
        ..Default::default()
    });
    calm.hosts[0].psi_source = Some("machine".into());
    rec.server_watch = Some(calm);
    assert_ne!(diagnose(&rec).unwrap().resource, "memory");
}

/// A link: throughput stopped at 2 connections, bytes/s flat after it, the
/// server idle: `link` at about the shaped rate. The same with the server
/// busy is not a link.
#[test]
fn flat_bytes_with_an_idle_server_is_the_link() {
    let mut rec = staged(&[1.0, 2.0, 4.0, 8.0], &[3.0, 4.0, 4.0, 4.0]);
    for (s, b) in rec.stages.iter_mut().zip([1.5e6, 2.0e6, 2.02e6, 1.98e6]) {
        s.bytes_per_sec = b;
    }
    rec.duration_s = 8.0;
    rec.knee = Some(crate::stages::Knee {
        level: 2.0,
        ..knee()
    });
    rec.server_watch = Some(watched(2, Some("0-1"), |t| WatchSample {
        t,
        processes: 2,
        cpu_percent: 3.0,
        ..Default::default()
    }));
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "link", "{d:?}");
    assert_eq!(d.limit, Some(16));
    assert!(d.advice.contains("about 16 Mbit/s"), "{}", d.advice);
    rec.server_watch = Some(watched(2, Some("0-1"), |t| WatchSample {
        t,
        processes: 2,
        cpu_percent: 190.0,
        ..Default::default()
    }));
    assert_eq!(diagnose(&rec).unwrap().resource, "cpu");
    // Without a watch the link cannot be told from a busy server.
    rec.server_watch = None;
    assert_eq!(diagnose(&rec).unwrap().resource, "unknown");
}

/// Open loop against an nginx whose connections the server held while its
/// CPU idled: the upstream, not the client, even with the scheduler lag
/// that having no free connection causes.
#[test]
fn a_held_proxy_with_an_idle_cpu_waits_on_its_upstream() {
    let mut rec = plain();
    rec.counters.waited_for_connection = 500;
    rec.counters.peak_connections = 20;
    rec.warn("rate_short", "sent 20 of 80 req/s".to_string());
    rec.warn("scheduler_lag", "p99 lag 2 s".to_string());
    assert!(client_limits(&rec).is_empty());
    assert_eq!(diagnose(&rec).unwrap().resource, "server_concurrency");
    let mut w = watched(2, Some("0-1"), |t| WatchSample {
        t,
        processes: 2,
        cpu_percent: 4.0,
        ..Default::default()
    });
    w.hosts[0].process_names = vec!["nginx".into()];
    w.hosts[0].summarize();
    rec.server_watch = Some(w);
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "upstream", "{d:?}");
    assert!(d.evidence[0].contains("held all 20 connections"));
}

/// A starved client is the client; a starved client beside a saturated
/// server names the server first and the client after it.
#[test]
fn a_starved_client_is_named_after_the_server() {
    let mut rec = plain();
    rec.warn("client_starved", "waited 45% of the run".to_string());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "client");
    let mut w = watched(2, Some("0"), |t| WatchSample {
        t,
        processes: 2,
        cpu_percent: 99.0,
        ..Default::default()
    });
    w.hosts[0].process_names = vec!["apache2".into()];
    rec.server_watch = Some(w);
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "cpu");
    assert_eq!(d.also.len(), 1);
    assert_eq!(d.also[0].resource, "client");
}

fn finding(
    resource: &str,
    directive: &str,
    message: &str,
    count: u64,
) -> crate::record::LogFinding {
    crate::record::LogFinding {
        resource: resource.into(),
        directive: directive.into(),
        message: message.into(),
        count,
        first_t: Some(1.5),
        example: format!("[mpm_event:error] AH00484: {message}"),
        path: "/var/log/apache2/error.log".into(),
    }
}

/// Apache event with idle keep-alive connections: the busy workers peak at
/// 1 of 4 (no full scoreboard), but Apache said it reached
/// MaxRequestWorkers and most connections were idle keep-alive ones held
/// by the listener: keep-alive, quoted from the log.
#[test]
fn event_keepalive_from_the_servers_own_words() {
    let mut rec = plain();
    rec.warn("connections_busy", "every connection busy".to_string());
    let mut st = status(
        "apache",
        Some(4),
        &[(0.5, 1, 3, 0), (1.0, 1, 3, 0), (2.0, 1, 3, 0)],
    );
    for s in &mut st.samples {
        s.conns_total = Some(12);
        s.async_keepalive = Some(10);
    }
    rec.server_status = Some(st);
    // Without the log: the status page alone shows the held connections.
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "keepalive");
    assert!(!d.evidence.iter().any(|e| e.contains("error log")));
    rec.server_log = Some(crate::record::ServerLog {
        paths: vec!["/var/log/apache2/error.log".into()],
        bytes_read: 300,
        findings: vec![finding(
            "worker_pool",
            "MaxRequestWorkers",
            "server reached MaxRequestWorkers setting",
            1,
        )],
    });
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "keepalive", "{d:?}");
    assert!(d.evidence[0].contains("server reached MaxRequestWorkers setting"));
    assert!(d
        .evidence
        .iter()
        .any(|e| e.contains("10 of 12 connections")));
    // Event's Conns* counts refresh late: with none seen, workers that were
    // never all busy while Apache said it reached MaxRequestWorkers still
    // say keep-alive (connections held without a worker).
    for s in &mut rec.server_status.as_mut().unwrap().samples {
        s.async_keepalive = Some(0);
    }
    rec.server_status.as_mut().unwrap().mpm = Some("event".into());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "keepalive", "{d:?}");
    assert!(d
        .evidence
        .iter()
        .any(|e| e.contains("busy workers peaked at 1 of 4")));
    // Prefork (or an unknown MPM) without K slots: the pool, in Apache's words.
    rec.server_status.as_mut().unwrap().mpm = None;
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "worker_pool");
    assert_eq!(d.directive, "MaxRequestWorkers");
}

/// Status reads that time out while the load runs are full reads (the
/// page needs a worker itself); on nginx, whose page needs none, they are not.
#[test]
fn status_timeouts_during_the_run_say_no_worker_was_free() {
    let mut rec = staged(&[5.0, 10.0, 20.0, 40.0], &[25.0, 48.0, 50.0, 50.0]);
    rec.knee = Some(crate::stages::Knee {
        level: 10.0,
        ..knee()
    });
    let mut st = status(
        "apache",
        Some(10),
        &[(0.25, 6, 4, 6), (0.75, 6, 4, 6), (2.25, 10, 0, 9)],
    );
    for i in 0..10 {
        st.failures.push(StatusFailure {
            t: 2.5 + i as f64 * 0.5,
            kind: "timeout".into(),
        });
    }
    rec.server_status = Some(st.clone());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "keepalive", "{d:?}");
    assert!(d
        .evidence
        .iter()
        .any(|e| e.contains("10 of those reads of the status page timed out")));
    st.server = "nginx".into();
    rec.server_status = Some(st);
    assert_ne!(diagnose(&rec).unwrap().resource, "keepalive");
}

/// nginx's own words about its upstream name the upstream without a watch.
#[test]
fn upstream_from_the_proxys_log() {
    let mut rec = plain();
    rec.warn("connections_busy", "every connection busy".to_string());
    rec.server_log = Some(crate::record::ServerLog {
        paths: vec!["/var/log/nginx/error.log".into()],
        bytes_read: 300,
        findings: vec![finding(
            "upstream",
            "proxy_read_timeout / the upstream's capacity",
            "upstream timed out",
            7,
        )],
    });
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "upstream", "{d:?}");
    assert!(d.evidence[0].contains("\"upstream timed out\" 7 times"));
}

/// Apache event whose log line came before the run: its status page alone
/// shows the connections held by idle keep-alive clients while the load
/// rose past them, with workers to spare.
#[test]
fn event_keepalive_from_the_status_page_alone() {
    let mut rec = staged(&[1.0, 4.0, 10.0, 20.0], &[4.5, 8.0, 9.0, 9.5]);
    rec.duration_s = 8.0;
    rec.knee = Some(crate::stages::Knee {
        level: 1.0,
        ..knee()
    });
    let mut st = status(
        "apache",
        Some(4),
        &[(0.5, 2, 2, 0), (3.0, 2, 2, 0), (6.0, 3, 1, 0)],
    );
    st.mpm = Some("event".into());
    for s in &mut st.samples {
        s.conns_total = Some(9);
        s.async_keepalive = Some(8);
    }
    rec.server_status = Some(st.clone());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "keepalive", "{d:?}");
    assert!(d.evidence[0].contains("held at most 9 connections, up to 8 of them without a worker"));
    // The few workers that got connections all busy: keep-alive still
    // first (the idle clients kept the rest out), the pool after it.
    let mut busy = st.clone();
    busy.samples = (0..12)
        .map(|i| StatusSample {
            t: 0.5 + i as f64 * 0.5,
            busy: Some(4),
            idle: Some(0),
            conns_total: Some(12),
            async_keepalive: Some(8),
            ..Default::default()
        })
        .collect();
    rec.server_status = Some(busy);
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "keepalive", "{d:?}");
    assert_eq!(d.also[0].resource, "worker_pool");
    // Its Conns* counts refresh late: 0 keep-alive counted, 9 held, 2 busy.
    for s in &mut st.samples {
        s.async_keepalive = Some(0);
    }
    rec.server_status = Some(st.clone());
    assert_eq!(diagnose(&rec).unwrap().resource, "keepalive");
    // Most connections busy (writing answers): not keep-alive.
    for s in &mut st.samples {
        s.async_keepalive = Some(1);
        s.async_writing = Some(6);
    }
    rec.server_status = Some(st);
    assert_ne!(diagnose(&rec).unwrap().resource, "keepalive");
}

/// A backlog set below the connections the load opened comes before the
/// full pool it sits in front of; a default-sized one after it.
#[test]
fn a_tiny_backlog_comes_before_the_pool_behind_it() {
    let mut rec = plain();
    rec.counters.peak_connections = 20;
    rec.counters.in_flight_at_end = 5;
    rec.client.listen_overflows = 172;
    rec.server_log = Some(crate::record::ServerLog {
        paths: vec!["/x/error.log".into()],
        bytes_read: 1,
        findings: vec![finding(
            "worker_pool",
            "MaxRequestWorkers",
            "server reached MaxRequestWorkers setting",
            1,
        )],
    });
    let mut cfg = crate::ServerConfig {
        server: "apache".into(),
        file: "/x/apache2.conf".into(),
        ..Default::default()
    };
    cfg.directives.insert(
        "ListenBacklog".into(),
        crate::ConfigValue {
            value: "1".into(),
            ..Default::default()
        },
    );
    rec.server_config = Some(cfg.clone());
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "listen_backlog", "{d:?}");
    assert_eq!(d.also[0].resource, "worker_pool");
    cfg.directives.get_mut("ListenBacklog").unwrap().value = "511".into();
    rec.server_config = Some(cfg);
    let d = diagnose(&rec).unwrap();
    assert_eq!(d.resource, "worker_pool", "{d:?}");
    assert_eq!(d.also[0].resource, "listen_backlog");
}
