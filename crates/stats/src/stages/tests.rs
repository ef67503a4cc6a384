//! Unit tests of `stages.rs`, kept in their own file so that file reads as its job.

use super::*;

fn plan(step: bool, st: &[(f64, f64)]) -> StagePlan {
    StagePlan {
        unit: "connections".into(),
        step,
        stages: st
            .iter()
            .map(|(d, l)| StageSpec {
                duration_s: *d,
                level: *l,
            })
            .collect(),
    }
}

/// A second with `n` responses of `lat_us` each.
fn sec(t: u32, n: u64, lat_us: u64) -> SeriesPoint {
    let mut h = Hist::with_sigfig(SERIES_SIGFIG);
    for _ in 0..n {
        h.record_us(lat_us);
    }
    let mut p = SeriesPoint::new(t, n, 0, n * 100, &h);
    p.status_classes[1] = n;
    p
}

#[test]
fn levels_ramp_and_step() {
    let r = plan(false, &[(10.0, 10.0), (10.0, 10.0)]);
    assert_eq!(r.level_at(5.0), 5.0);
    assert_eq!(r.level_at(15.0), 10.0);
    assert_eq!(r.level_at(25.0), 0.0);
    let s = plan(true, &[(1.0, 1.0), (1.0, 2.0)]);
    assert_eq!(s.level_at(0.5), 1.0);
    assert_eq!(s.level_at(1.0), 2.0);
}

/// A serializing server: throughput flat at 50/s, latency grows with the
/// connections. The knee is at 1 connection, for throughput.
#[test]
fn serializing_server_knees_at_one() {
    let p = plan(true, &[(2.0, 1.0), (2.0, 2.0), (2.0, 4.0), (2.0, 8.0)]);
    let series: Vec<SeriesPoint> = (0..8u32)
        .map(|t| {
            let level = [1, 1, 2, 2, 4, 4, 8, 8][t as usize];
            sec(t, 50, 20_000 * level)
        })
        .collect();
    let k = find_knee(&p, &series).expect("a knee");
    assert_eq!((k.level, k.reason.as_str()), (1.0, "throughput"), "{k:?}");
    let st = summarize(&p, &series);
    assert_eq!(st.len(), 4);
    assert_eq!(st[3].seconds, 2);
    assert_eq!(st[3].requests_per_sec, 50.0);
    assert!(
        (159_000..=161_000).contains(&st[3].p99_us),
        "{}",
        st[3].p99_us
    );
}

/// Per-second throughput on a linear ramp 0 -> 70 over 70 s against a
/// server of 10 workers at 5 req/s each: min(level, 10) × 5 plus noise of
/// up to ±`noise` req/s (a fixed pseudo-random sequence), latency growing
/// with the queue past 10.
fn ramp_series(p: &StagePlan, noise: f64) -> Vec<SeriesPoint> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..70u32)
        .map(|t| {
            let level = p.second_level(t);
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x % 10_000) as f64 / 10_000.0 * 2.0 - 1.0;
            let n = (level.min(10.0) * 5.0 + u * noise).round().max(0.0) as u64;
            sec(t, n, 200_000 * (level / 10.0).max(1.0) as u64)
        })
        .collect()
}

/// The seed case: `--stages 70s:70` over 10 workers. Throughput flattens
/// at 10; the knee is said at 10 (±1), a whole number, and not at the
/// last good band (the old "4.1 connections").
#[test]
fn linear_ramp_finds_the_knee_at_ten() {
    let p = plan(false, &[(70.0, 70.0)]);
    for noise in [0.0, 2.0, 5.0] {
        let k = find_knee(&p, &ramp_series(&p, noise)).expect("a knee");
        eprintln!("noise ±{noise}: {k:?}");
        assert!((9.0..=11.0).contains(&k.level), "noise {noise}: {k:?}");
        assert_eq!(k.level, k.level.round(), "{k:?}");
        assert_eq!(k.reason, "throughput", "{k:?}");
        if let (Some(lo), Some(hi)) = (k.low, k.high) {
            assert!(lo <= k.level && k.level <= hi && hi - lo <= 4.0, "{k:?}");
        }
    }
    // Without noise the data pins it: no range.
    let k = find_knee(&p, &ramp_series(&p, 0.0)).unwrap();
    assert_eq!((k.level, k.low, k.high), (10.0, None, None), "{k:?}");
}

/// Noisy data cannot pin the knee to one level: a range is given, and
/// it holds the true knee.
#[test]
fn noisy_ramp_gives_a_range_around_the_knee() {
    let p = plan(false, &[(70.0, 70.0)]);
    let k = find_knee(&p, &ramp_series(&p, 20.0)).expect("a knee");
    eprintln!("noise ±20: {k:?}");
    let (lo, hi) = (k.low.expect("a range"), k.high.expect("a range"));
    assert!(lo <= 10.0 && 10.0 <= hi, "{k:?}");
    assert!(lo < hi && hi < 20.0, "{k:?}");
    assert!(k.evidence.contains("between"), "{}", k.evidence);
}

/// A ramp the server keeps up with: no knee.
#[test]
fn linear_ramp_that_scales_has_no_knee() {
    let p = plan(false, &[(40.0, 40.0)]);
    let series: Vec<SeriesPoint> = (0..40u32)
        .map(|t| {
            let n = (p.second_level(t) * 5.0).round() as u64 + (t % 3) as u64;
            sec(t, n, 200_000)
        })
        .collect();
    assert!(find_knee(&p, &series).is_none());
}

/// A server that scales to 4 and then only its latency grows.
#[test]
fn scaling_server_knees_where_it_stops() {
    let p = plan(true, &[(1.0, 1.0), (1.0, 2.0), (1.0, 4.0), (1.0, 8.0)]);
    let series = vec![
        sec(0, 100, 10_000),
        sec(1, 200, 10_000),
        sec(2, 390, 10_500),
        sec(3, 420, 19_000),
    ];
    let k = find_knee(&p, &series).expect("a knee");
    assert_eq!(k.level, 4.0, "{k:?}");
    // Everything scaling: no knee.
    assert!(find_knee(&p, &series[..3]).is_none());
    // p99 blowing up while throughput keeps up.
    let series = vec![
        sec(0, 100, 10_000),
        sec(1, 200, 10_000),
        sec(2, 400, 45_000),
    ];
    let k = find_knee(&p, &series).expect("a knee");
    assert_eq!((k.level, k.reason.as_str()), (2.0, "p99"), "{k:?}");
}

/// Summaries and the knee are recomputed from the merged series, so the
/// merge of two machines' staged runs equals one run of their sum.
#[test]
fn merge_recomputes_exactly() {
    let cfg = |p: StagePlan| {
        let mut c = crate::RunConfig::get(
            "http://127.0.0.1:1/",
            crate::LoadModel::Closed {
                connections: 8,
                requests: None,
                duration_s: Some(4.0),
            },
        );
        c.stages = Some(p);
        c
    };
    let p = plan(true, &[(1.0, 1.0), (1.0, 2.0), (1.0, 4.0), (1.0, 8.0)]);
    let mk = |n: u64| {
        let mut r = RunRecord::new(cfg(p.clone()), Default::default(), "t".into());
        r.series = (0..4).map(|t| sec(t, n, 10_000 + t as u64)).collect();
        r.duration_s = 4.0;
        analyze(&mut r);
        r
    };
    let mut a = mk(50);
    a += &mk(70);
    assert_eq!(a.stages[2].requests, 120);
    assert_eq!(a.config.stages.as_ref().unwrap().stages[3].level, 16.0);
    let json = serde_json::to_string(&a).unwrap();
    let back = RunRecord::from_json(&json).unwrap();
    assert_eq!(back.stages, a.stages);
    assert_eq!(back.knee, a.knee);
}

/// A record of a 2-stage run (2 s at 1, 2 s at 2 connections) whose
/// watch on `host` started `late_ms` after the run and saw `procs(t)`
/// processes at t = 0, 0.5, … 4 s of its own clock.
fn watched(host: &str, late_ms: u64, procs: fn(f64) -> u32) -> RunRecord {
    use crate::watch::{HostWatch, ServerWatch, WatchSample};
    let cfg = {
        let mut c = crate::record::RunConfig::get(
            "http://127.0.0.1:1/",
            crate::record::LoadModel::Closed {
                connections: 2,
                requests: None,
                duration_s: Some(4.0),
            },
        );
        c.stages = Some(plan(true, &[(2.0, 1.0), (2.0, 2.0)]));
        c
    };
    let mut r = RunRecord::new(cfg, Default::default(), "2026-11-22T10:00:00.000Z".into());
    r.series = (0..4).map(|t| sec(t, 10, 1000)).collect();
    r.duration_s = 4.0;
    let mut h = HostWatch {
        host: host.into(),
        targets: vec!["nginx".into()],
        started_at: format!("2026-11-22T10:00:00.{late_ms:03}Z"),
        samples: (0..=8)
            .map(|i| WatchSample {
                t: i as f64 * 0.5,
                processes: procs(i as f64 * 0.5),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    h.summarize();
    r.server_watch = Some(ServerWatch {
        targets: h.targets.clone(),
        hosts: vec![h],
    });
    analyze(&mut r);
    r
}

#[test]
fn server_per_stage_is_derived_and_recomputed_after_a_merge() {
    let a = watched("web1", 0, |t| if t < 2.0 { 3 } else { 6 });
    let s = |r: &RunRecord, i: usize, k: usize| r.stages[i].server[k].summary.clone();
    // Stage 1 [0, 2]: samples 0..=2 s (the one at 2 s already has 6).
    assert_eq!(a.stages[0].server.len(), 1);
    assert_eq!(a.stages[0].server[0].host, "web1");
    assert_eq!(s(&a, 0, 0).samples, 5);
    assert_eq!(s(&a, 0, 0).processes.peak, 6.0);
    assert_eq!(s(&a, 0, 0).processes.mean, 3.6);
    assert_eq!(s(&a, 1, 0).processes.peak, 6.0);
    assert_eq!(s(&a, 1, 0).processes.mean, 6.0);
    // A second machine whose watch started 1 s into the run: its
    // samples move 1 s later, so stage 1 holds its first 1 s only.
    let b = watched("web2", 0, |t| if t < 1.0 { 1 } else { 9 });
    let mut b1 = b.clone();
    b1.server_watch.as_mut().unwrap().hosts[0].started_at = "2026-11-22T10:00:01.000Z".into();
    analyze_server(&mut b1);
    assert_eq!(b1.stages[0].server[0].offset_s, 1.0);
    assert_eq!(s(&b1, 0, 0).samples, 3);
    assert_eq!(s(&b1, 0, 0).processes.peak, 9.0);
    assert_eq!(s(&b1, 1, 0).samples, 5, "run 2-4 s is its 1-3 s");
    let mut m = a.clone();
    m += &b1;
    // Both hosts per stage, each as computed alone: nothing stale.
    for i in 0..2 {
        assert_eq!(m.stages[i].server.len(), 2);
        assert_eq!(m.stages[i].server[0], a.stages[i].server[0]);
        assert_eq!(m.stages[i].server[1], b1.stages[i].server[0]);
    }
    // Round trip; a record from before `server` existed gets it on load.
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(RunRecord::from_json(&json).unwrap().stages, m.stages);
    let mut old: serde_json::Value = serde_json::from_str(&json).unwrap();
    for st in old["stages"].as_array_mut().unwrap() {
        st.as_object_mut().unwrap().remove("server");
    }
    let back = RunRecord::from_json(&old.to_string()).unwrap();
    assert_eq!(back.stages, m.stages);
    // Without a watch, no server entries.
    let mut plain = m.clone();
    plain.server_watch = None;
    analyze(&mut plain);
    assert!(plain.stages.iter().all(|s| s.server.is_empty()));
    assert!(!serde_json::to_string(&plain.stages)
        .unwrap()
        .contains("\"server\""));
}
