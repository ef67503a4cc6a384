//! Unit tests of `compare.rs`, kept in their own file so that file reads as its job.

use super::*;
use redline_stats::{Environment, LoadModel, RunConfig, SeriesPoint};

pub(crate) fn cfg() -> RunConfig {
    RunConfig::get(
        "http://127.0.0.1:8080/",
        LoadModel::Closed {
            connections: 10,
            requests: None,
            duration_s: Some(10.0),
        },
    )
}

/// A synthetic 10-second run: per second about `rps` requests whose
/// latencies spread around `lat_us`, with noise from `seed`.
pub(crate) fn synth(rps: u64, lat_us: u64, seed: u64, secs: u32) -> RunRecord {
    let mut rng = Rng(seed);
    let mut rec = RunRecord::new(
        cfg(),
        Environment::default(),
        "2025-01-01T00:00:00.000Z".into(),
    );
    rec.duration_s = secs as f64;
    for t in 0..secs {
        let n = rps - rps / 20 + rng.below(rps / 10 + 1);
        let mut h = Hist::with_sigfig(2);
        for _ in 0..n {
            // Spread: lat × (0.5 … 1.5) with a slow tail.
            let mut v = lat_us / 2 + rng.below(lat_us + 1);
            if rng.below(100) == 0 {
                v *= 4;
            }
            h.record_us(v);
            rec.latency.record_us(v);
        }
        rec.counters.completed += n;
        rec.counters.scheduled += n;
        rec.counters.bytes_read += n * 500;
        let mut p = SeriesPoint::new(t, n, 0, n * 500, &h);
        p.status_classes = [0, n, 0, 0, 0];
        rec.series.push(p);
    }
    rec.derive();
    rec
}

#[test]
fn mann_whitney_basics() {
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let b = [11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0];
    assert!(mann_whitney(&a, &b).unwrap() < 0.01);
    assert!(mann_whitney(&a, &a).unwrap() > 0.9);
    assert_eq!(mann_whitney(&a[..2], &b), None);
    assert_eq!(mann_whitney(&[1.0; 5], &[1.0; 5]), Some(1.0));
    assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-4);
}

/// A run whose seconds drift together (AR(1), φ = [`SINGLE_R_FLOOR`],
/// ±`noise` × rate and latency, sd 1), as on a busy host: one second says
/// much about the next.
pub(crate) fn synth_ar(rps: u64, lat_us: u64, noise: f64, seed: u64, secs: u32) -> RunRecord {
    let mut rng = Rng(seed);
    let mut rec = RunRecord::new(
        cfg(),
        Environment::default(),
        "2025-01-01T00:00:00.000Z".into(),
    );
    rec.duration_s = secs as f64;
    const PHI: f64 = SINGLE_R_FLOOR;
    let gauss = |rng: &mut Rng| (0..12).map(|_| rng.unit_open()).sum::<f64>() - 6.0;
    let mut x = gauss(&mut rng);
    for t in 0..secs {
        x = PHI * x + (1.0 - PHI * PHI).sqrt() * gauss(&mut rng);
        let f = (1.0 + noise * x).max(0.2);
        let n = (rps as f64 / f) as u64;
        let lat = (lat_us as f64 * f) as u64;
        let mut h = Hist::with_sigfig(2);
        for _ in 0..n {
            let mut v = lat / 2 + rng.below(lat + 1);
            if rng.below(100) == 0 {
                v *= 3;
            }
            h.record_us(v);
            rec.latency.record_us(v);
        }
        rec.counters.completed += n;
        rec.counters.scheduled += n;
        rec.counters.bytes_read += n * 500;
        let mut p = SeriesPoint::new(t, n, 0, n * 500, &h);
        p.status_classes = [0, n, 0, 0, 0];
        rec.series.push(p);
    }
    rec.derive();
    rec
}

fn claims(c: &Comparison) -> Vec<&'static str> {
    c.rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Better | Verdict::Worse))
        .map(|r| r.metric)
        .collect()
}

/// Issue 20: two runs of one system whose seconds drift together were
/// called "worse, 99.3 %". Twenty such pairs: at most one claim; a real
/// 2x difference under the same noise is still called.
#[test]
fn autocorrelated_runs_of_one_system_are_not_called_different() {
    let mut claimed = Vec::new();
    for pair in 0..20u64 {
        let a = synth_ar(400, 2000, 0.08, 100 + 2 * pair, 10);
        let b = synth_ar(400, 2000, 0.08, 101 + 2 * pair, 10);
        let c = compare(&a, &b);
        if !claims(&c).is_empty() {
            claimed.push((pair, claims(&c)));
        }
        for r in &c.rows {
            assert!(
                matches!(
                    r.verdict,
                    Verdict::Unclear | Verdict::Better | Verdict::Worse
                ),
                "{r:?}"
            );
        }
    }
    assert!(claimed.len() <= 1, "{claimed:?}");
    // The old test (i.i.d. seconds, no effect size, no n_eff) on the same
    // pairs: it claims, which is what the issue reported.
    let naive = (0..20u64)
        .filter(|pair| {
            let a = synth_ar(400, 2000, 0.08, 100 + 2 * pair, 10);
            let b = synth_ar(400, 2000, 0.08, 101 + 2 * pair, 10);
            let xa: Vec<f64> = a.series.iter().map(|p| p.requests as f64).collect();
            let xb: Vec<f64> = b.series.iter().map(|p| p.requests as f64).collect();
            mann_whitney(&xa, &xb).unwrap() < 0.05
        })
        .count();
    assert!(
        naive >= 2,
        "the synthetic noise is too tame to test: {naive}"
    );
    // A real 2x difference under the same noise.
    let a = synth_ar(400, 2000, 0.08, 7, 10);
    let b = synth_ar(800, 1000, 0.08, 8, 10);
    let c = compare(&a, &b);
    let v = |m: &str| c.rows.iter().find(|r| r.metric == m).unwrap().verdict;
    for m in ["Requests/sec", "Latency mean", "Latency p50", "Latency p90"] {
        assert_eq!(v(m), Verdict::Better, "{m}: {:?}", c.rows);
    }
    let t = text(&c, &a, &b, "a", "b");
    assert!(t.contains("n_eff"), "{t}");
    let c = compare(&a, &synth_ar(400, 2000, 0.08, 9, 10));
    let t = text(&c, &a, &b, "a", "b");
    assert!(
        t.contains("no clear difference (single runs: use --repeat)"),
        "{t}"
    );
}

#[test]
fn statistics_helpers() {
    // Student t: t = 2.228 with 10 df is the 5 % two-sided point.
    assert!((student_p(2.228, 10.0) - 0.05).abs() < 1e-3);
    assert!((student_p(0.0, 5.0) - 1.0).abs() < 1e-9);
    // Large df: the normal.
    assert!((student_p(1.96, 1e6) - 0.05).abs() < 1e-3);
    assert!((p_of_z(1.959_964) - 0.05).abs() < 1e-4);
    // AR(1) with φ = 0.9 shows a high r; alternating values none.
    let mut x = vec![0.0; 200];
    let mut rng = Rng(3);
    for i in 1..200 {
        x[i] = 0.9 * x[i - 1] + rng.unit_open() - 0.5;
    }
    assert!(lag1(&x) > 0.7, "{}", lag1(&x));
    assert_eq!(lag1(&[1.0, 2.0, 1.0, 2.0, 1.0, 2.0]), 0.0);
    assert!((n_eff(100, 0.5) - 100.0 / 3.0).abs() < 1e-9);
    assert!((cv(&[9.0, 11.0]) - 2f64.sqrt() / 10.0).abs() < 1e-9);
    assert_eq!(welch(&[1.0, 1.0], &[1.0, 1.0]), Some(1.0));
    assert!(welch(&[10.0, 10.2, 9.9], &[20.0, 20.1, 19.8]).unwrap() < 0.001);
    assert!(welch(&[10.0, 12.0, 9.0], &[11.0, 10.0, 12.0]).unwrap() > 0.3);
    assert_eq!(welch(&[1.0], &[2.0, 3.0]), None);
}

/// Repeated runs: the runs are the samples; a 10 % shift every run shows
/// is called, run-to-run noise of the same size is not.
#[test]
fn repeated_runs_are_the_samples() {
    let a: Vec<RunRecord> = (0..5)
        .map(|i| synth_ar(400, 2000, 0.03, 40 + i, 6))
        .collect();
    let b: Vec<RunRecord> = (0..5)
        .map(|i| synth_ar(440, 1800, 0.03, 50 + i, 6))
        .collect();
    let c = compare_runs(&a, &b);
    assert_eq!(c.runs, (5, 5));
    let row = |c: &Comparison, m: &str| c.rows.iter().find(|r| r.metric == m).unwrap().clone();
    assert_eq!(
        row(&c, "Requests/sec").verdict,
        Verdict::Better,
        "{:?}",
        c.rows
    );
    assert_eq!(
        row(&c, "Latency p50").verdict,
        Verdict::Better,
        "{:?}",
        c.rows
    );
    assert!(row(&c, "Requests/sec")
        .test
        .contains("Welch t over 5+5 runs"));
    let same: Vec<RunRecord> = (0..5)
        .map(|i| synth_ar(400, 2000, 0.03, 60 + i, 6))
        .collect();
    let c = compare_runs(&a, &same);
    assert!(claims(&c).len() <= 1, "{:?}", c.rows);
    for r in &c.rows {
        assert_ne!(r.verdict, Verdict::Unclear, "{r:?}");
    }
    let t = text(&c, &a[4], &same[4], "label a (5 runs)", "label b (5 runs)");
    assert!(t.contains("Each run is one sample"), "{t}");
    // One run on a side: the newest of each, as single runs, and a warning.
    let c = compare_runs(&a, &same[..1]);
    assert_eq!(c.runs, (1, 1));
    assert!(
        c.warnings.iter().any(|w| w.contains("A has 5 runs, B 1")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn identical_runs_show_no_clear_difference() {
    let a = synth(2000, 1000, 1, 10);
    let c = compare(&a, &a.clone());
    for r in &c.rows {
        assert_eq!(r.verdict, Verdict::Unclear, "{r:?}");
    }
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    // Two runs of the same system, different noise: still no change.
    let b = synth(2000, 1000, 2, 10);
    let c = compare(&a, &b);
    for r in &c.rows {
        assert_ne!(r.verdict, Verdict::Better, "{r:?}");
        assert_ne!(r.verdict, Verdict::Worse, "{r:?}");
    }
}

#[test]
fn clear_shifts_are_better_or_worse() {
    let a = synth(2000, 1000, 1, 10);
    let b = synth(2600, 700, 3, 10); // faster and more throughput
    let c = compare(&a, &b);
    let v = |m: &str| c.rows.iter().find(|r| r.metric == m).unwrap().verdict;
    assert_eq!(v("Requests/sec"), Verdict::Better);
    assert_eq!(v("Latency p50"), Verdict::Better);
    // Per-second p99s of this synthetic run swing by ±100 %: a 30 %
    // shift of p99 is no claim a single run can make.
    assert_ne!(v("Latency p99"), Verdict::Worse);
    assert_eq!(v("Latency mean"), Verdict::Better);
    assert_eq!(v("Transfer/sec"), Verdict::Better);
    let c = compare(&b, &a);
    let v = |m: &str| c.rows.iter().find(|r| r.metric == m).unwrap().verdict;
    assert_eq!(v("Requests/sec"), Verdict::Worse);
    assert_eq!(v("Latency p90"), Verdict::Worse);
    let t = text(&c, &b, &a, "run 1", "run 2");
    assert!(t.contains("worse"), "{t}");
    assert!(t.contains("Welch t over 10+10 s"), "{t}");
}

#[test]
fn short_single_runs_make_no_latency_claim() {
    let a = synth(3000, 1000, 1, 1);
    let b = synth(3000, 1500, 2, 1);
    let c = compare(&a, &b);
    let p50 = c.rows.iter().find(|r| r.metric == "Latency p50").unwrap();
    // +50 %: shown with the request bootstrap's confidence, not claimed.
    assert_eq!(p50.verdict, Verdict::Unclear, "{p50:?}");
    assert!(p50.confidence.unwrap() > 0.99, "{p50:?}");
    assert!(p50.test.contains("claims need 2x"), "{p50:?}");
    // 2x: claimed, either way; p99 never.
    let b = synth(3000, 2100, 2, 1);
    let c = compare(&a, &b);
    let v = |c: &Comparison, m: &str| c.rows.iter().find(|r| r.metric == m).unwrap().verdict;
    assert_eq!(v(&c, "Latency p50"), Verdict::Worse);
    assert_eq!(v(&c, "Latency p99"), Verdict::Unclear);
    assert_eq!(v(&compare(&b, &a), "Latency p50"), Verdict::Better);
    let rps = c.rows.iter().find(|r| r.metric == "Requests/sec").unwrap();
    assert_eq!(rps.verdict, Verdict::NotTested);
    let c = compare(&a, &a);
    let p50 = c.rows.iter().find(|r| r.metric == "Latency p50").unwrap();
    assert_eq!(p50.verdict, Verdict::Unclear);
}

#[test]
fn changed_directives_sit_above_the_deltas() {
    use redline_stats::{ConfigValue, ServerConfig};
    let cfg = |kat: &str, mrw: &str| {
        let mut d = std::collections::BTreeMap::new();
        for (n, v) in [
            ("KeepAliveTimeout", kat),
            ("MaxRequestWorkers", mrw),
            ("Timeout", "60"),
        ] {
            d.insert(
                n.to_string(),
                ConfigValue {
                    value: v.into(),
                    at: "default".into(),
                },
            );
        }
        ServerConfig {
            server: "apache".into(),
            file: "/x/httpd.conf".into(),
            directives: d,
        }
    };
    let mut a = synth(100, 2000, 1, 5);
    let mut b = synth(118, 1200, 2, 5);
    a.server_config = Some(cfg("15", "150"));
    b.server_config = Some(cfg("5", "33"));
    let c = compare(&a, &b);
    let t = text(&c, &a, &b, "a", "b");
    let line = t
        .lines()
        .find(|l| l.contains("KeepAliveTimeout 15 -> 5, MaxRequestWorkers 150 -> 33: p99 "))
        .unwrap_or_else(|| panic!("{t}"));
    // The effect is the table's own p99 and req/s changes, rounded.
    let pct = |m: &str| {
        c.rows
            .iter()
            .find(|r| r.metric == m)
            .unwrap()
            .change_pct
            .unwrap()
    };
    let (p99, rps) = (
        format!("p99 {:+.0} %", pct("Latency p99")),
        format!("req/s {:+.0} %", pct("Requests/sec")),
    );
    assert!(line.contains(&p99) && line.contains(&rps), "{line}");
    assert!(pct("Requests/sec") > 10.0);
    assert!(!t.contains("Timeout 60"), "{t}");
    let (cfg_at, table_at) = (
        t.find("Server configuration changed").unwrap(),
        t.find("Requests/sec").unwrap(),
    );
    assert!(cfg_at < table_at, "{t}");
    b.server_config = None;
    assert!(text(&compare(&a, &b), &a, &b, "a", "b").contains("recorded for A only"));
}

#[test]
fn staged_runs_show_knee_and_diagnosis_side_by_side() {
    use redline_stats::stages::{Knee, StagePlan};
    use redline_stats::watch::Diagnosis;
    let mut a = synth(100, 2000, 1, 5);
    let mut b = synth(118, 1200, 2, 5);
    assert_eq!(knees(&a, &b), "", "plain runs: nothing");
    let plan = StagePlan {
        unit: "connections".into(),
        step: true,
        stages: vec![redline_stats::stages::StageSpec {
            duration_s: 5.0,
            level: 40.0,
        }],
    };
    for (r, level, limit) in [(&mut a, 10.0, 10), (&mut b, 33.0, 33)] {
        r.config.stages = Some(plan.clone());
        r.knee = Some(Knee {
            level,
            unit: "connections".into(),
            reason: "throughput".into(),
            evidence: String::new(),
            low: None,
            high: None,
        });
        r.diagnosis = Some(Diagnosis {
            resource: "worker_pool".into(),
            directive: "MaxRequestWorkers".into(),
            limit: Some(limit),
            at_level: Some(level),
            evidence: vec![],
            advice: format!("raise MaxRequestWorkers above {limit}"),
            ..Default::default()
        });
    }
    let t = knees(&a, &b);
    let knee = t.lines().find(|l| l.starts_with("Knee")).unwrap();
    assert!(
        knee.contains("10 connections") && knee.contains("33 connections"),
        "{t}"
    );
    assert!(knee.find("10 conn").unwrap() < knee.find("33 conn").unwrap());
    let d = t.lines().find(|l| l.starts_with("Diagnosis")).unwrap();
    assert!(
        d.contains("worker_pool (MaxRequestWorkers = 10)")
            && d.contains("(MaxRequestWorkers = 33)"),
        "{t}"
    );
    assert!(
        t.contains("A: raise MaxRequestWorkers above 10")
            && t.contains("B: raise MaxRequestWorkers above 33"),
        "{t}"
    );
    let full = text(&compare(&a, &b), &a, &b, "a", "b");
    assert!(full.find("Knee").unwrap() < full.find("Requests/sec").unwrap());
}

#[test]
fn warns_when_not_comparable() {
    let a = synth(100, 1000, 1, 5);
    let mut b = a.clone();
    b.config.url = "http://other/".into();
    b.config.load = LoadModel::Open {
        rate: 100.0,
        arrival: "constant".into(),
        max_connections: 10,
        requests: None,
        duration_s: Some(5.0),
    };
    b.client_limited = true;
    let w = comparability(&a, &b);
    assert!(w.iter().any(|x| x.contains("different URLs")), "{w:?}");
    assert!(w.iter().any(|x| x.contains("load models")), "{w:?}");
    assert!(w.iter().any(|x| x.contains("client-limited")), "{w:?}");
}

#[test]
fn errors_are_tested() {
    let a = synth(1000, 1000, 1, 5);
    let mut b = a.clone();
    b.counters.failed = 500;
    let c = compare(&a, &b);
    let e = c.rows.iter().find(|r| r.metric == "Errors").unwrap();
    assert_eq!(e.verdict, Verdict::Worse);
}
