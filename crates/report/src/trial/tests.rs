use super::*;

fn round(n: u32, state: State, rps: f64, p50: f64) -> Round {
    Round {
        n,
        state,
        run_id: None,
        started_at: String::new(),
        duration_s: 1.0,
        completed: rps as u64,
        requests_per_sec: rps,
        p50_us: p50,
        p99_us: p50 * 3.0,
        error_share: 0.0,
        bytes_per_response: 500.0,
        server_memory_kib: None,
        server_cpu_ms_per_request: None,
        knee: None,
        interrupted: false,
        client_limited: false,
    }
}

#[test]
fn rounds_interleave_abba() {
    let s: String = (0..8).map(|i| state_of(i).name()).collect();
    assert_eq!(s, "ABBAABBA");
}

#[test]
fn interval_is_welchs() {
    // A 1,2,3 and B 4,5,6: d = 3, se = sqrt(1/3 + 1/3), df = 4, t(0.975, 4) = 2.7764.
    let (lo, hi) = welch_interval(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 0.95).unwrap();
    let half = 2.7764 * (2.0f64 / 3.0).sqrt();
    assert!((lo - (3.0 - half)).abs() < 1e-3, "{lo}");
    assert!((hi - (3.0 + half)).abs() < 1e-3, "{hi}");
    // Wider at a higher level.
    let (lo99, hi99) = welch_interval(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 0.99).unwrap();
    assert!(lo99 < lo && hi99 > hi);
    // Too few values: no interval; constant sides: the point.
    assert!(welch_interval(&[1.0], &[2.0, 3.0], 0.95).is_none());
    assert_eq!(
        welch_interval(&[2.0, 2.0], &[5.0, 5.0], 0.95),
        Some((3.0, 3.0))
    );
}

#[test]
fn clear_gain_is_called_with_its_direction() {
    let mut rounds = Vec::new();
    for i in 0..6 {
        let s = state_of(i);
        let jitter = [0.0, 3.0, -2.0, 1.0, -1.0, 2.0][i];
        let (rps, p50) = match s {
            State::A => (50.0 + jitter, 200_000.0 + jitter * 100.0),
            State::B => (190.0 + jitter, 150_000.0 + jitter * 100.0),
        };
        rounds.push(round(i as u32 + 1, s, rps, p50));
    }
    let v = verdict(&rounds);
    let rps = &v.metrics[0];
    assert_eq!(rps.metric, "Requests/sec");
    assert_eq!(rps.call, Call::Better);
    assert!(rps.ci.0 > 0.0 && rps.ci.0 <= rps.diff && rps.diff <= rps.ci.1);
    let p50 = v
        .metrics
        .iter()
        .find(|m| m.metric == "Latency p50")
        .unwrap();
    assert_eq!(p50.call, Call::Better, "lower latency is better");
    assert!(v.significant);
    let t = text(&TrialRecord {
        format: FORMAT.into(),
        version: VERSION,
        started_at: String::new(),
        duration_s: 10.0,
        url: "http://127.0.0.1:1/".into(),
        method: "GET".into(),
        load: "closed loop".into(),
        label: "t".into(),
        before: "a".into(),
        after: "b".into(),
        settle_s: 1.0,
        from_tune: None,
        config_a: None,
        config_b: None,
        rounds: rounds.clone(),
        interrupted: false,
        stopped: None,
        restored: true,
        verdict: v,
    });
    assert!(t.contains("In short: B is better on Requests/sec"), "{t}");
}

#[test]
fn overlapping_rounds_are_no_clear_difference() {
    let vals = [100.0, 104.0, 97.0, 101.0, 99.0, 103.0];
    let rounds: Vec<Round> = (0..6)
        .map(|i| round(i as u32 + 1, state_of(i), vals[i], 1000.0 + vals[i]))
        .collect();
    let v = verdict(&rounds);
    assert!(!v.significant, "{v:?}");
    let rps = &v.metrics[0];
    assert_eq!(rps.call, Call::NoClearDifference);
    assert!(
        rps.ci.0 < 0.0 && rps.ci.1 > 0.0,
        "the interval crosses zero"
    );
    // Bonferroni over the metrics with values on both sides.
    assert_eq!(v.tested, 5);
    assert!((rps.level - (1.0 - 0.05 / 5.0)).abs() < 1e-12);
}

#[test]
fn interrupted_rounds_are_left_out() {
    let mut rounds: Vec<Round> = (0..6)
        .map(|i| round(i as u32 + 1, state_of(i), 100.0 + i as f64, 1000.0))
        .collect();
    rounds[5].interrupted = true;
    let v = verdict(&rounds);
    assert_eq!(v.metrics[0].rounds, (3, 2));
}

#[test]
fn record_round_trips_and_refuses_others() {
    let rounds: Vec<Round> = (0..6)
        .map(|i| round(i as u32 + 1, state_of(i), 100.0, 1000.0))
        .collect();
    let t = TrialRecord {
        format: FORMAT.into(),
        version: VERSION,
        started_at: "2026-01-01T00:00:00Z".into(),
        duration_s: 10.0,
        url: "http://127.0.0.1:1/".into(),
        method: "GET".into(),
        load: "closed loop".into(),
        label: "t".into(),
        before: "a".into(),
        after: "b".into(),
        settle_s: 1.0,
        from_tune: None,
        config_a: None,
        config_b: None,
        verdict: verdict(&rounds),
        rounds,
        interrupted: false,
        stopped: None,
        restored: true,
    };
    let j = serde_json::to_string(&t).unwrap();
    assert_eq!(TrialRecord::from_json(&j).unwrap(), t);
    assert!(TrialRecord::from_json("{\"format\":\"redline-run\"}").is_err());
    let h = html(&t);
    assert_eq!(
        h.matches("class=\"round\"").count(),
        6 * 5,
        "every round of each charted metric"
    );
}

#[test]
fn a_round_takes_its_numbers_from_the_run_record() {
    let load = redline_stats::LoadModel::Closed {
        connections: 4,
        requests: None,
        duration_s: Some(2.0),
    };
    let mut r = RunRecord::new(
        redline_stats::RunConfig::get("http://127.0.0.1:1/", load),
        redline_stats::Environment::default(),
        "2026-01-01T00:00:00Z".into(),
    );
    r.duration_s = 2.0;
    r.counters.completed = 190;
    r.counters.failed = 10;
    r.counters.non_2xx = 10;
    r.counters.bytes_read = 190 * 1000;
    r.derive();
    for us in [1000, 2000, 3000] {
        r.latency.record_us(us);
    }
    r.knee = Some(redline_stats::stages::Knee {
        level: 40.0,
        unit: "connections".into(),
        reason: "throughput".into(),
        evidence: String::new(),
        low: None,
        high: None,
    });
    let x = Round::of(3, State::B, Some(7), &r);
    assert_eq!((x.n, x.state, x.run_id), (3, State::B, Some(7)));
    assert!((x.requests_per_sec - 95.0).abs() < 1e-9);
    assert!(
        (x.error_share - 0.1).abs() < 1e-9,
        "failed and non-2xx of finished"
    );
    assert!((x.bytes_per_response - 1000.0).abs() < 1e-9);
    assert_eq!(x.knee, Some(40.0));
    // Not watched: no server metrics (they are left out of the verdict).
    assert_eq!(
        (x.server_memory_kib, x.server_cpu_ms_per_request),
        (None, None)
    );
    assert!((x.p50_us - 2000.0).abs() <= 2.0);
}
