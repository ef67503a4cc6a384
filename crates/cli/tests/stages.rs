//! Load stages, the knee, `redline find` and `--abort-on-fail`, against the
//! built-in target and small serializing servers on 127.0.0.1:0. The tests
//! whose numbers depend on time run one at a time (see `serial`).

mod common;

use common::*;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A server that answers one request at a time, whatever the connection:
/// each response takes `service` and only one is served at once, so its
/// capacity is about 1/service requests per second at any concurrency.
fn serializing_server(service: Duration) -> ScriptServer {
    pool_server(1, service)
}

/// Steps of 1, 2, 4 and 8 connections over a server that serializes requests
/// (20 ms each): throughput stays at ~50/s, so the knee is at 1 connection.
#[test]
fn steps_over_a_serializing_server_find_the_knee_at_one() {
    let _serial = serial();
    timing_sensitive(3, || {
        let srv = serializing_server(Duration::from_millis(20));
        let v = run_json(&[
            "--stages",
            "1s:1,1s:2,1s:4,1s:8",
            "--step",
            "--no-save",
            &srv.url(),
        ]);
        assert_run_schema(&v);
        let stages = v["stages"].as_array().unwrap();
        assert_eq!(stages.len(), 4);
        for (s, level) in stages.iter().zip([1.0, 2.0, 4.0, 8.0]) {
            assert_eq!(s["level_to"].as_f64(), Some(level));
            let rps = s["requests_per_sec"].as_f64().unwrap();
            assert!((35.0..=55.0).contains(&rps), "{level}: {rps} req/s");
        }
        assert_eq!(v["knee"]["level"].as_f64(), Some(1.0), "{}", v["knee"]);
        assert_eq!(v["knee"]["reason"], "throughput");
        assert_eq!(v["config"]["stages"]["step"], true);
        assert_eq!(counter(&v, "failed"), 0, "parked connections are no errors");
    });
}

/// The issue's own test: a linear ramp (not steps) from 1 to 50 connections
/// over a server that serializes requests (20 ms each): throughput stays at
/// ~50/s however many connections wait, so the knee is at 1 connection.
#[test]
fn ramp_to_fifty_over_a_serializing_server_finds_the_knee_at_one() {
    let _serial = serial();
    timing_sensitive(3, || {
        let srv = serializing_server(Duration::from_millis(20));
        let v = run_json(&["--stages", "1s:1,5s:50", "--no-save", &srv.url()]);
        assert_run_schema(&v);
        assert!(v["config"]["stages"].is_object(), "{}", v["config"]);
        assert_ne!(v["config"]["stages"]["step"], true, "a ramp, not steps");
        let stages = v["stages"].as_array().unwrap();
        assert_eq!(stages.len(), 2, "{}", v["stages"]);
        assert_eq!(stages[1]["level_from"].as_f64(), Some(1.0));
        assert_eq!(stages[1]["level_to"].as_f64(), Some(50.0));
        for s in stages {
            let rps = s["requests_per_sec"].as_f64().unwrap();
            assert!((35.0..=55.0).contains(&rps), "{s}");
        }
        // The ramp really went up: tens of connections were open at once,
        // and the queue behind the one-at-a-time server shows in p99.
        let peak = counter(&v, "peak_connections");
        assert!((30..=50).contains(&peak), "peak {peak}");
        let p99 = |s: &serde_json::Value| s["p99_us"].as_u64().unwrap();
        assert!(p99(&stages[1]) > 5 * p99(&stages[0]), "{}", v["stages"]);
        assert_eq!(v["knee"]["level"].as_f64(), Some(1.0), "{}", v["knee"]);
        assert_eq!(v["knee"]["unit"], "connections");
        assert_eq!(v["knee"]["reason"], "throughput", "{}", v["knee"]);
        assert_eq!(counter(&v, "failed"), 0);
    });
}

/// The text report of a staged run: the per-step table and the redline line.
#[test]
fn text_report_has_the_stage_table_and_the_knee() {
    let _serial = serial();
    let srv = serializing_server(Duration::from_millis(20));
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "--stages",
        "1s:1,1s:3",
        "--step",
        &srv.url(),
    ]);
    assert!(out.status.success());
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        t.contains("Stages:           1s:1,1s:3 (connections, steps)"),
        "{t}"
    );
    assert!(t.contains("Step ") && t.contains("connections"), "{t}");
    assert!(
        t.contains("redline: the server stops scaling at 1 connection"),
        "{t}"
    );
}

/// Open-loop rate stages: each step's measured rate is its level (±5 %).
#[test]
fn rate_stages_hit_their_rates() {
    let _serial = serial();
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let v = run_json(&[
        "--rate-stages",
        "--stages",
        "1s:100,1s:300",
        "--step",
        "--no-save",
        &url,
    ]);
    assert_run_schema(&v);
    assert_eq!(v["config"]["load"]["type"], "open");
    let stages = v["stages"].as_array().unwrap();
    for (s, want) in stages.iter().zip([100.0, 300.0]) {
        let rps = s["requests_per_sec"].as_f64().unwrap();
        assert!(
            (rps - want).abs() <= want * 0.05,
            "stage at {want}: {rps} req/s"
        );
    }
    // The whole schedule: 100 + 300 requests.
    let sent = counter(&v, "scheduled");
    assert!((395..=400).contains(&sent), "scheduled {sent}");
}

/// `find` against a server with a known capacity (10 ms per request, one at
/// a time: about 100 req/s, measured first in closed loop on this machine as
/// it is now) lands within ±30 % of it.
#[test]
fn find_lands_near_the_capacity() {
    let _serial = serial();
    timing_sensitive(3, || {
        let srv = serializing_server(Duration::from_millis(10));
        let v = run_json(&["-c", "4", "-d", "1s", "--no-save", &srv.url()]);
        let capacity = v["requests_per_sec"].as_f64().unwrap();
        assert!(capacity > 50.0, "capacity {capacity}");
        let (out, took) = redline_with_limit(
            &[
                "find",
                &srv.url(),
                "--slo",
                "p99<100ms,errors<1%",
                "--start-rate",
                "50",
                "--step-duration",
                "1s",
                "--warmup",
                "0s",
                "--precision",
                "20%",
                "-o",
                "json",
                "-q",
                "--no-save",
            ],
            Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["format"], "redline.find");
        let rate = v["max_rate"].as_f64().unwrap();
        assert!(
            (capacity * 0.7..=capacity * 1.3).contains(&rate),
            "max rate {rate} for a capacity of {capacity}: {v}"
        );
        let upper = v["upper"].as_f64().unwrap();
        eprintln!("capacity {capacity:.1} req/s; find: {rate} (fail at {upper}) in {took:?}");
        assert!(upper > rate && upper <= rate * 1.2 + 1.0, "{v}");
        let steps = v["steps"].as_array().unwrap();
        assert!(steps.iter().any(|s| s["verdict"] == "fail"));
        assert!(took < Duration::from_secs(30), "took {took:?}");
    });
}

/// The text output: a line per step and the answer with its bracket.
#[test]
fn find_text_output_and_bad_input() {
    let _serial = serial();
    let srv = builtin();
    let url = format!("http://{}/?delay=50ms", srv.local_addr());
    // Every step fails a 1 ms bound: no rate meets it (exit 4), even when
    // the host stalls the client (the step's note then says so).
    timing_sensitive(3, || {
        let out = redline(&[
            "find",
            &url,
            "--slo",
            "p99<1ms",
            "--start-rate",
            "20",
            "--step-duration",
            "1s",
            "--warmup",
            "0s",
            "--max-steps",
            "2",
            "--no-save",
        ]);
        let t = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(4), "{t}");
        assert!(
            t.contains("FAIL") && t.contains("no rate met the SLO"),
            "{t}"
        );
    });
    for bad in [
        vec!["find", &url, "--slo", "p99<abc"],
        vec!["find", &url, "--slo", "p99<1ms", "--precision", "0%"],
        vec!["find", &url, "--slo", "p99<1ms", "--step-duration", "0s"],
        vec!["find", &url],
    ] {
        let out = redline(&bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

/// `find` takes `run`'s request, protocol and connection flag groups: the
/// method, body, headers and basic auth reach the server as `run` sends
/// them, and the groups' own rules (`-b` or `--body-file`) hold.
#[test]
fn find_sends_runs_request_flags() {
    let (srv, seen) =
        routed_server(|_, _| b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec());
    let url = srv.url();
    let out = redline(&[
        "find",
        &url,
        "--slo",
        "p99<10s",
        "--start-rate",
        "20",
        "--step-duration",
        "1s",
        "--warmup",
        "0s",
        "--max-steps",
        "1",
        "--no-save",
        "-c",
        "2",
        "-m",
        "PUT",
        "-b",
        "hello",
        "-T",
        "text/plain",
        "-H",
        "X-Find: 1",
        "-a",
        "user:secret",
    ]);
    let t = String::from_utf8_lossy(&out.stdout);
    // 0: the step passed; 1 only if a stalled host made it client-limited.
    assert!(matches!(out.status.code(), Some(0) | Some(1)), "{t}");
    assert!(!t.contains("secret"), "{t}");
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty(), "no request reached the server: {t}");
    for (head, body) in seen.iter() {
        let lower = head.to_ascii_lowercase();
        assert!(head.starts_with("PUT "), "{head}");
        assert_eq!(body, b"hello", "{head}");
        assert!(lower.contains("x-find: 1"), "{head}");
        assert!(lower.contains("content-type: text/plain"), "{head}");
        // user:secret in base64.
        assert!(head.contains("Basic dXNlcjpzZWNyZXQ="), "{head}");
    }
    let out = redline(&[
        "find",
        &url,
        "--slo",
        "p99<1s",
        "-b",
        "x",
        "--body-file",
        "/dev/null",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = redline(&[
        "find",
        &url,
        "--slo",
        "p99<1s",
        "--cert",
        "/nonexistent.pem",
    ]);
    // --cert needs --key: the group's rule, a usage error.
    assert_eq!(out.status.code(), Some(2));
}

/// A step the server cannot take (300,000 req/s from one thread over 8
/// connections to a 1 ms server: at most ~8,000 req/s, every connection
/// held by the server while requests waited) FAILED, whatever the client's
/// own scheduler did: FAIL (server concurrency), never CLIENT-LIMITED, and
/// when the client lagged too its note line says so. No rate met the SLO
/// (exit 4); the answer never says "no step failed" nor "no answer".
#[test]
fn find_fails_a_step_the_server_could_not_take_even_when_the_client_lagged() {
    let _serial = serial();
    let srv = builtin();
    let url = format!("http://{}/?delay=1ms", srv.local_addr());
    let args = [
        "find",
        &url,
        "--slo",
        "p99<10s",
        "--start-rate",
        "300000",
        "-t",
        "1",
        "-c",
        "8",
        "--step-duration",
        "1s",
        "--warmup",
        "0s",
        "--max-steps",
        "1",
        "--no-save",
    ];
    let (out, _) = redline_with_limit(&args, Duration::from_secs(30));
    let t = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{t}");
    let step = t
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap_or_else(|| panic!("no step line: {t}"));
    assert!(step.contains("300000"), "{step}");
    assert!(step.contains("FAIL (server concurrency; p99<10s"), "{step}");
    assert!(!t.contains("CLIENT-LIMITED"), "{t}");
    assert!(t.contains("the server held all 8 connections"), "{t}");
    assert!(!t.contains("the client was the limit:"), "{t}");
    assert!(
        t.contains("no rate met the SLO (down to 300000 req/s"),
        "{t}"
    );
    assert!(
        !t.contains("no step failed") && !t.contains("no answer"),
        "{t}"
    );
    // The same in JSON; the client's lag, when there was some, is noted.
    let mut json = args.to_vec();
    json.extend(["-o", "json", "-q"]);
    let (out, _) = redline_with_limit(&json, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(4));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{v}");
    let s0 = &steps[0];
    assert_eq!(s0["verdict"], "fail", "{v}");
    assert_eq!(s0["server_held"], true, "{v}");
    assert!(s0["sent_per_sec"].as_f64().unwrap() < 150_000.0, "{v}");
    assert_eq!(s0["client_limited"], s0["note"].is_string(), "{v}");
    if let Some(note) = s0["note"].as_str() {
        assert!(note.contains("scheduler lag p99 "), "{v}");
    }
    assert_eq!(v["upper"].as_f64(), Some(300000.0), "{v}");
    assert!(v["max_rate"].is_null(), "{v}");
    assert_eq!(v["stopped"], "max_steps");
}

/// `--time-budget`: a step starts only if it can end (plus 1 s to drain)
/// within the budget. Steps of 1 s (2 s with the drain) in a 2.5 s budget:
/// the first runs; the second could not end in time (the first took at
/// least the 0.95 s its 20 sends span), so the search stops after one step
/// with the lower bound it has, says why, and exits 0. A budget under one
/// step is bad input (exit 2).
#[test]
fn find_time_budget_stops_the_search() {
    let _serial = serial();
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let args = [
        "find",
        &url,
        "--slo",
        "p99<10s",
        "--start-rate",
        "20",
        "--step-duration",
        "1s",
        "--warmup",
        "0s",
        "--time-budget",
        "2500ms",
        "--no-save",
    ];
    // A host that stalls the client makes the step CLIENT-LIMITED (said so,
    // exit 1): the lower retry would overrun the budget. A quiet host judges.
    timing_sensitive(3, || {
        let (out, took) = redline_with_limit(&args, Duration::from_secs(30));
        let t = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{t}");
        let steps: Vec<&str> = t
            .lines()
            .filter(|l| l.trim_end().ends_with("PASS"))
            .collect();
        assert_eq!(steps.len(), 1, "{t}");
        assert!(
            t.contains("max rate meeting SLO: at least 20.0 req/s (no step failed)"),
            "{t}"
        );
        assert!(
            t.contains("(search stopped: the next step would overrun --time-budget)"),
            "{t}"
        );
        eprintln!("find with a 2.5s budget took {took:?}");
        let mut json = args.to_vec();
        json.extend(["-o", "json", "-q"]);
        let (out, _) = redline_with_limit(&json, Duration::from_secs(30));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(0), "{v}");
        assert_eq!(v["stopped"], "time_budget", "{v}");
        assert_eq!(v["steps"].as_array().unwrap().len(), 1, "{v}");
        assert_eq!(v["max_rate"].as_f64(), Some(20.0), "{v}");
        assert!(v["upper"].is_null(), "{v}");
    });
    // No step fits: one clear line, exit 2, no traffic.
    let out = redline(&[
        "find",
        &url,
        "--slo",
        "p99<10s",
        "--step-duration",
        "2s",
        "--warmup",
        "1s",
        "--time-budget",
        "3s",
        "--no-save",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--time-budget 3s is shorter than one step (4s"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// `--abort-on-fail`: a 20 ms server can never meet p99<5ms; the run stops
/// early, says why, and exits 4.
#[test]
fn abort_on_fail_stops_early_with_exit_4() {
    let _serial = serial();
    let srv = builtin();
    let url = format!("http://{}/?delay=20ms", srv.local_addr());
    let (out, took) = redline_with_limit(
        &[
            "run",
            "-q",
            "--no-save",
            "-d",
            "20s",
            "-c",
            "2",
            "--threshold",
            "p99<5ms",
            "--abort-on-fail",
            &url,
        ],
        Duration::from_secs(30),
    );
    let t = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{t}");
    assert!(
        t.contains("aborted: threshold 'p99<5ms' can no longer pass"),
        "{t}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // Count-bounded: 500s make errors<1% hopeless at once.
    let url = format!("http://{}/?status=500", srv.local_addr());
    let (out, took) = redline_with_limit(
        &[
            "run",
            "-q",
            "--no-save",
            "-o",
            "json",
            "-n",
            "10000000",
            "-c",
            "2",
            "--threshold",
            "errors<1%",
            "--abort-on-fail",
            &url,
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(4));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["code"] == "aborted"));
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // Without --abort-on-fail the same thresholds only judge at the end.
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-n",
        "20",
        "-c",
        "2",
        "--threshold",
        "errors<1%",
        &url,
    ]);
    assert_eq!(out.status.code(), Some(4));
}

/// Contradicting or malformed stage flags are usage errors (exit 2).
#[test]
fn bad_stage_flags_are_usage_errors() {
    let url = "http://127.0.0.1:9/";
    for bad in [
        vec!["run", "--stages", "1s:1", "-d", "5s", url],
        vec!["run", "--stages", "1s:1", "-n", "5", url],
        vec!["run", "--stages", "1s:1", "-c", "5", url],
        vec!["run", "--stages", "1s:1", "-r", "5", url],
        vec!["run", "--stages", "1s:1", "--rate-stages", "-r", "5", url],
        vec!["run", "--stages", "1s:1.5", url],
        vec!["run", "--stages", "1s:0", url],
        vec!["run", "--stages", "bogus", url],
        vec!["run", "--rate-stages", url],
        vec!["run", "--step", url],
        vec!["run", "--abort-on-fail", url],
    ] {
        let out = redline(&bad);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{bad:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A server with a pool of `workers`: a request takes a worker for `service`
/// (requests beyond the pool wait for one, like Apache's MaxRequestWorkers),
/// so throughput grows with the connections up to `workers` and stays flat.
fn pool_server(workers: u32, service: Duration) -> ScriptServer {
    let pool = Arc::new((Mutex::new(0u32), std::sync::Condvar::new()));
    ScriptServer::start(move |mut s| {
        let _ = s.set_nodelay(true);
        for _ in 0..1_000_000 {
            if read_head(&mut s).is_none() {
                return;
            }
            let (busy, freed) = &*pool;
            {
                let mut b = busy.lock().unwrap();
                let until = Instant::now() + Duration::from_secs(20);
                while *b >= workers && Instant::now() < until {
                    b = freed.wait_timeout(b, Duration::from_millis(50)).unwrap().0;
                }
                *b += 1;
            }
            hold(service);
            *busy.lock().unwrap() -= 1;
            freed.notify_one();
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    })
}
