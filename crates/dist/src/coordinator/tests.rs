//! Unit tests of `coordinator.rs`, kept in their own file so that file reads as its job.

use super::*;
use redline_stats::{LoadModel, RunConfig};

fn rec(completed: u64) -> RunRecord {
    let mut r = RunRecord::new(
        RunConfig::get(
            "http://127.0.0.1:1/",
            LoadModel::Closed {
                connections: 2,
                requests: Some(completed),
                duration_s: None,
            },
        ),
        Default::default(),
        "2026-01-01T00:00:00Z".into(),
    );
    r.counters.completed = completed;
    r.merged_runs = 1;
    r
}

#[test]
fn merge_sums_and_names_the_missing() {
    let a = |i: u64, r: Option<RunRecord>, f: Option<&str>| AgentOutcome {
        index: i,
        host: format!("h{i}"),
        record: r,
        failure: f.map(String::from),
        ..Default::default()
    };
    let o = merge_outcome(vec![a(0, Some(rec(10)), None), a(1, Some(rec(5)), None)], 2);
    let m = o.merged.unwrap();
    assert!(!o.incomplete && !m.interrupted);
    assert_eq!(m.counters.completed, 15);
    assert_eq!(m.merged_runs, 2);
    let o = merge_outcome(
        vec![
            a(0, Some(rec(10)), None),
            a(1, None, Some("its connection closed")),
        ],
        2,
    );
    let m = o.merged.unwrap();
    assert!(o.incomplete && m.interrupted);
    let w = m
        .warnings
        .iter()
        .find(|w| w.code == "dist_incomplete")
        .unwrap();
    assert!(
        w.message.contains("agent 1 (h1) its connection closed") && w.message.contains("1 of 2"),
        "{}",
        w.message
    );
}

/// A consistent one-agent record made at `start_ms`: `n` responses of 1 ms.
fn agent_record(n: u64, start_ms: u64) -> RunRecord {
    let mut r = rec(n);
    r.started_at =
        redline_stats::time::rfc3339(std::time::UNIX_EPOCH + Duration::from_millis(start_ms));
    r.counters.scheduled = n;
    r.counters.sent = n;
    for _ in 0..n {
        r.latency.record(Duration::from_millis(1));
    }
    r.status_codes.insert("200".into(), n);
    r.duration_s = 2.0;
    r.requests_per_sec = n as f64 / 2.0;
    r.config.segment = Some(redline_stats::SegmentConfig {
        segment: "0:1/2".into(),
        sequence: "0,1/2,1".into(),
        index: 0,
        count: 2,
    });
    r
}

#[test]
fn records_are_checked_on_arrival() {
    let start = 1_795_000_000_000u64;
    let w = Window {
        start_ms: start as f64,
        now_ms: start as f64 + 3000.0,
        offset_ms: 0.0,
        index: 0,
        count: 2,
    };
    let good = agent_record(100, start);
    assert_eq!(check_record(&good, &w), Ok(()));
    let refused = |f: &dyn Fn(&mut RunRecord), what: &str| {
        let mut r = good.clone();
        f(&mut r);
        let e = check_record(&r, &w).unwrap_err();
        assert!(e.contains(what), "{what}: {e}");
    };
    refused(&|r| r.counters.completed = 7_716_340, "do not add up");
    refused(&|r| r.counters.scheduled = u64::MAX, "do not add up");
    refused(
        &|r| {
            r.counters.in_flight_at_end = u64::MAX;
            r.counters.scheduled = u64::MAX;
        },
        "do not add up",
    );
    refused(&|r| r.requests_per_sec = 771_634.0, "claims 771634 req/s");
    refused(&|r| r.requests_per_sec = f64::NAN, "req/s");
    refused(
        &|r| r.latency.record(Duration::from_millis(1)),
        "latency histogram",
    );
    refused(
        &|r| *r.status_codes.get_mut("200").unwrap() = 5,
        "status codes",
    );
    refused(
        &|r| r.started_at = "2026-01-01T00:00:00Z".into(),
        "not this run",
    );
    refused(&|r| r.duration_s = 86_400.0, "lasted 86400 s");
    refused(&|r| r.merged_runs = 3, "merge of 3 runs");
    refused(
        &|r| r.config.segment.as_mut().unwrap().index = 1,
        "segment 1 of 2, not 0 of 2",
    );
    refused(&|r| r.config.segment = None, "not a segment");
    refused(&|r| r.format = "x".into(), "format");
    // The agent's clock offset moves its start onto the coordinator's clock.
    let mut skewed = good.clone();
    skewed.started_at = redline_stats::time::rfc3339(
        std::time::UNIX_EPOCH + Duration::from_millis(start - 3_600_000),
    );
    assert!(check_record(&skewed, &w).is_err());
    let w2 = Window {
        offset_ms: 3_600_000.0,
        ..w
    };
    assert_eq!(check_record(&skewed, &w2), Ok(()));
    // A merge (what the coordinator serves, what `redline fetch` gets)
    // passes the checks that hold for any record, not an agent's.
    let mut merged = good.clone();
    merged += &agent_record(50, start);
    assert_eq!(check_consistent(&merged), Ok(()));
    assert!(check_record(&merged, &w).is_err());
    let mut forged = merged.clone();
    forged.counters.completed += 1;
    assert!(check_consistent(&forged)
        .unwrap_err()
        .contains("do not add up"));
    forged = merged.clone();
    forged.duration_s = f64::INFINITY;
    assert!(check_consistent(&forged).is_err());
}

#[test]
fn absurd_ready_numbers_are_refused() {
    assert!(sane_ready(-0.4, 0.1, Some(10.0), Some(1000)).is_ok());
    assert!(sane_ready(0.0, 0.1, None, None).is_ok());
    for (o, r, e, n) in [
        (f64::NAN, 0.1, None, None),
        (1e300, 0.1, None, None),
        (0.0, -1.0, None, None),
        (0.0, f64::INFINITY, None, None),
        (0.0, 0.1, Some(1e300), None),
        (0.0, 0.1, Some(-1.0), None),
        (0.0, 0.1, Some(f64::NAN), None),
        (0.0, 0.1, None, Some(u64::MAX)),
    ] {
        assert!(sane_ready(o, r, e, n).is_err(), "{o} {r} {e:?} {n:?}");
    }
}

#[test]
fn live_seconds_add_up_saturating() {
    let mut acc = SecondAcc::default();
    acc.add(u64::MAX, u64::MAX, &[u64::MAX; 5], "not base64");
    acc.add(u64::MAX, 1, &[1; 5], &"A".repeat(MAX_HIST_B64 + 1));
    assert_eq!(acc.requests, u64::MAX);
    assert_eq!(acc.status_classes, [u64::MAX; 5]);
    let p = acc.settle(0).unwrap();
    assert_eq!(p.requests, u64::MAX);
}
