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
    let k = find_knee(&p, &series, &ExpectStatus::default()).expect("a knee");
    assert_eq!((k.level, k.reason.as_str()), (1.0, "throughput"), "{k:?}");
    let st = summarize(&p, &series, &ExpectStatus::default());
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
        let k = find_knee(&p, &ramp_series(&p, noise), &ExpectStatus::default()).expect("a knee");
        eprintln!("noise ±{noise}: {k:?}");
        assert!((9.0..=11.0).contains(&k.level), "noise {noise}: {k:?}");
        assert_eq!(k.level, k.level.round(), "{k:?}");
        assert_eq!(k.reason, "throughput", "{k:?}");
        if let (Some(lo), Some(hi)) = (k.low, k.high) {
            assert!(lo <= k.level && k.level <= hi && hi - lo <= 4.0, "{k:?}");
        }
    }
    // Without noise the data pins it: no range.
    let k = find_knee(&p, &ramp_series(&p, 0.0), &ExpectStatus::default()).unwrap();
    assert_eq!((k.level, k.low, k.high), (10.0, None, None), "{k:?}");
}

/// Noisy data cannot pin the knee to one level: a range is given, and
/// it holds the true knee.
#[test]
fn noisy_ramp_gives_a_range_around_the_knee() {
    let p = plan(false, &[(70.0, 70.0)]);
    let k = find_knee(&p, &ramp_series(&p, 20.0), &ExpectStatus::default()).expect("a knee");
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
    assert!(find_knee(&p, &series, &ExpectStatus::default()).is_none());
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
    let k = find_knee(&p, &series, &ExpectStatus::default()).expect("a knee");
    assert_eq!(k.level, 4.0, "{k:?}");
    // Everything scaling: no knee.
    assert!(find_knee(&p, &series[..3], &ExpectStatus::default()).is_none());
    // p99 blowing up while throughput keeps up.
    let series = vec![
        sec(0, 100, 10_000),
        sec(1, 200, 10_000),
        sec(2, 400, 45_000),
    ];
    let k = find_knee(&p, &series, &ExpectStatus::default()).expect("a knee");
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

/// A stepped run of one second per level: `(level, req/s)`, latency 10 ms
/// (`lat_us` overrides it per level when given).
fn stepped(levels: &[(f64, u64)], lat_us: Option<&[u64]>) -> (StagePlan, Vec<SeriesPoint>) {
    let p = plan(
        true,
        &levels.iter().map(|(l, _)| (1.0, *l)).collect::<Vec<_>>(),
    );
    let series = levels
        .iter()
        .enumerate()
        .map(|(t, (_, n))| sec(t as u32, *n, lat_us.map_or(10_000, |l| l[t])))
        .collect();
    (p, series)
}

/// One noisy stage in the middle of a run that scales (100 req/s per
/// connection, the stage at 3 connections at half that) is a dip, not the
/// knee: no knee at all. (The rule before said 2.)
#[test]
fn one_noisy_middle_stage_is_no_knee() {
    let levels: Vec<(f64, u64)> = (1..=8)
        .map(|l| (l as f64, if l == 3 { 150 } else { l * 100 }))
        .collect();
    let (p, series) = stepped(&levels, None);
    assert!(
        find_knee(&p, &series, &ExpectStatus::default()).is_none(),
        "{:?}",
        find_knee(&p, &series, &ExpectStatus::default())
    );
    // Nor when the noisy stage is a p99 spike.
    let lat: Vec<u64> = (1..=8)
        .map(|l| if l == 5 { 80_000 } else { 10_000 })
        .collect();
    let levels: Vec<(f64, u64)> = (1..=8).map(|l| (l as f64, l * 100)).collect();
    let (p, series) = stepped(&levels, Some(&lat));
    assert!(find_knee(&p, &series, &ExpectStatus::default()).is_none());
}

/// The run: a true plateau at 10 connections (50 req/s each up to
/// 10, 500 req/s above) with a noisy stage at 3: the knee is 10, and the
/// evidence says what persisted and which dip did not.
#[test]
fn a_plateau_at_ten_with_a_noisy_stage_knees_at_ten() {
    let levels: Vec<(f64, u64)> = [1, 2, 3, 4, 6, 8, 10, 14, 18, 24]
        .iter()
        .map(|&l| (l as f64, if l == 3 { 60 } else { l.min(10) * 50 }))
        .collect();
    let (p, series) = stepped(&levels, None);
    let k = find_knee(&p, &series, &ExpectStatus::default()).expect("a knee");
    assert_eq!((k.level, k.reason.as_str()), (10.0, "throughput"), "{k:?}");
    assert!(
        k.evidence.contains(
            "it persisted at the next levels: 18 connections (56% of proportional throughput), \
             24 connections (42% of proportional throughput)"
        ),
        "{}",
        k.evidence
    );
    assert!(
        k.evidence
            .contains("the dip at 3 connections did not persist (the next level scaled again)"),
        "{}",
        k.evidence
    );
    // The same plateau without the noisy stage: 10 as well.
    let levels: Vec<(f64, u64)> = [1, 2, 3, 4, 6, 8, 10, 14, 18, 24]
        .iter()
        .map(|&l| (l as f64, l.min(10) * 50))
        .collect();
    let (p, series) = stepped(&levels, None);
    assert_eq!(
        find_knee(&p, &series, &ExpectStatus::default()).map(|k| k.level),
        Some(10.0)
    );
}

/// A break needs the next levels to break too: a break followed by one level
/// that scales again, then the real knee.
#[test]
fn a_break_counts_only_when_it_persists() {
    // 100 req/s per connection up to 8, flat at 800 above; the stage at 4
    // is noisy and the stage at 5 scales again.
    let levels: Vec<(f64, u64)> = [1, 2, 4, 5, 8, 12, 16]
        .iter()
        .map(|&l| (l as f64, if l == 4 { 250 } else { l.min(8) * 100 }))
        .collect();
    let (p, series) = stepped(&levels, None);
    let k = find_knee(&p, &series, &ExpectStatus::default()).expect("a knee");
    assert_eq!(k.level, 8.0, "{k:?}");
    // Two breaking levels in a row, then scaling again: still a dip
    // (PERSIST = 2 needs the two after a break to break too).
    assert_eq!(PERSIST, 2);
    let levels: Vec<(f64, u64)> = [1, 2, 3, 4, 5, 6]
        .iter()
        .map(|&l| (l as f64, if l == 3 || l == 4 { l * 60 } else { l * 100 }))
        .collect();
    let (p, series) = stepped(&levels, None);
    assert!(find_knee(&p, &series, &ExpectStatus::default()).is_none());
}

/// The base is the first loaded level, unless it is out of line with the
/// next two: a first stage noisy upwards (180 req/s at 1 connection, then
/// 100 per connection) or downwards (50) does not move the knee off 8.
#[test]
fn a_noisy_base_does_not_decide_the_knee() {
    for first in [180, 50] {
        let levels: Vec<(f64, u64)> = [1, 2, 4, 8, 16]
            .iter()
            .map(|&l| (l as f64, if l == 1 { first } else { l.min(8) * 100 }))
            .collect();
        let (p, series) = stepped(&levels, None);
        let k = find_knee(&p, &series, &ExpectStatus::default())
            .unwrap_or_else(|| panic!("no knee with {first}"));
        assert_eq!((k.level, k.reason.as_str()), (8.0, "throughput"), "{k:?}");
        assert!(
            k.evidence.contains(&format!(
                "the first loaded level (1 connection, {first}.0 req/s"
            )) && k.evidence.contains("so 2 connections is the base"),
            "{}",
            k.evidence
        );
        assert!(
            k.evidence
                .contains("it is the last level, so no later level could confirm it"),
            "{}",
            k.evidence
        );
    }
    // A base in line with the next two stays the base.
    let levels: Vec<(f64, u64)> = [1, 2, 4, 8, 16]
        .iter()
        .map(|&l| (l as f64, l.min(8) * 100))
        .collect();
    let (p, series) = stepped(&levels, None);
    let k = find_knee(&p, &series, &ExpectStatus::default()).unwrap();
    assert_eq!(k.level, 8.0);
    assert!(!k.evidence.contains("out of line"), "{}", k.evidence);
}

/// Rate stages (`rps`) follow the same rule: a noisy middle step is no knee.
#[test]
fn rate_steps_need_a_persisting_break_too() {
    let mut p = plan(
        true,
        &[(1.0, 100.0), (1.0, 200.0), (1.0, 300.0), (1.0, 400.0)],
    );
    p.unit = "rps".into();
    let series = vec![
        sec(0, 100, 5_000),
        sec(1, 120, 5_000),
        sec(2, 300, 5_000),
        sec(3, 400, 5_000),
    ];
    assert!(find_knee(&p, &series, &ExpectStatus::default()).is_none());
    let series = vec![
        sec(0, 100, 5_000),
        sec(1, 200, 5_000),
        sec(2, 210, 5_000),
        sec(3, 205, 5_000),
    ];
    let k = find_knee(&p, &series, &ExpectStatus::default()).expect("a knee");
    assert_eq!((k.level, k.unit.as_str()), (200.0, "rps"), "{k:?}");
}
