//! `--abort-on-fail` counts unanswered requests (issue 20): a server that
//! answers N requests and then never again must stop the run early, in open
//! and closed loop, because the requests waiting longer than a latency bound
//! count against it as `thresholds::check` counts them at the end (before,
//! the abort judged only the answered requests, all fast, and the run went on
//! to its end).

mod common;

use common::*;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Answers the first `n` requests (over all connections), then reads and
/// never answers (each connection's thread ends when the client closes, or
/// after the script server's 20 s read time-out).
fn goes_silent_after(n: u64) -> ScriptServer {
    let answered = Arc::new(AtomicU64::new(0));
    ScriptServer::start(move |mut s| {
        for _ in 0..100_000 {
            if read_head(&mut s).is_none() {
                return;
            }
            if answered.fetch_add(1, Ordering::SeqCst) < n {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        }
    })
}

fn aborted_run(load: &[&str]) -> (serde_json::Value, String) {
    let srv = goes_silent_after(100);
    let url = srv.url();
    let mut args = vec!["run", "-q", "--no-save", "-o", "json", "-d", "30s"];
    args.extend_from_slice(load);
    args.extend_from_slice(&["--threshold", "p99<200ms", "--abort-on-fail", &url]);
    let (out, _) = redline_with_limit(&args, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(4), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (v, err)
}

fn abort_message(v: &serde_json::Value) -> String {
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "aborted")
        .unwrap_or_else(|| panic!("no 'aborted' warning: {}", v["warnings"]))["message"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn open_loop_aborts_on_requests_never_answered() {
    let (v, _) = aborted_run(&["-r", "100"]);
    let msg = abort_message(&v);
    assert!(
        msg.contains("threshold 'p99<200ms' can no longer pass: unbounded"),
        "{msg}"
    );
    assert!(msg.contains("requests unanswered for over 200"), "{msg}");
    assert_eq!(counter(&v, "completed"), 100, "{}", v["counters"]);
    // Stopped early: far from the 30 s planned (it was judged on whole
    // seconds, once 10 % of the run had passed).
    let d = v["duration_s"].as_f64().unwrap();
    assert!(d < 15.0, "the run went on for {d} s");
}

#[test]
fn closed_loop_aborts_on_requests_never_answered() {
    let (v, _) = aborted_run(&["-c", "4"]);
    let msg = abort_message(&v);
    assert!(msg.contains("4 requests unanswered for over 200"), "{msg}");
    assert_eq!(counter(&v, "completed"), 100, "{}", v["counters"]);
    let d = v["duration_s"].as_f64().unwrap();
    assert!(d < 15.0, "the run went on for {d} s");
}

/// A server that keeps answering, fast: the same flags never abort (the
/// requests in flight at each instant are younger than the bound).
#[test]
fn a_server_that_answers_is_not_aborted() {
    let srv = builtin();
    let url = format!("http://{}/?size=10", srv.local_addr());
    for load in [["-r", "200"], ["-c", "4"]] {
        let mut args = vec!["run", "-q", "--no-save", "-o", "json", "-d", "3s"];
        args.extend_from_slice(&load);
        args.extend_from_slice(&["--threshold", "p99<2s", "--abort-on-fail", &url]);
        let (out, _) = redline_with_limit(&args, Duration::from_secs(60));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{load:?}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            !warning_codes(&v).contains(&"aborted"),
            "{load:?}: {}",
            v["warnings"]
        );
    }
}
