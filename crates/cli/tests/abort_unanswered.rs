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

/// The run was aborted because requests went unanswered past the p99 bound.
fn assert_aborted_on_unanswered(v: &serde_json::Value) {
    let msg = abort_message(v);
    assert!(
        msg.contains("threshold 'p99<200ms' can no longer pass: unbounded"),
        "{msg}"
    );
    assert!(msg.contains("requests unanswered for over 200"), "{msg}");
}

/// Every journey started ended one way: completed, abandoned, or in flight at the end.
fn assert_journeys_add_up(j: &serde_json::Value) {
    assert_eq!(
        j["started"].as_u64().unwrap(),
        j["completed"].as_u64().unwrap()
            + j["abandoned"].as_u64().unwrap()
            + j["in_flight_at_end"].as_u64().unwrap(),
        "{j}"
    );
}

#[test]
fn open_loop_aborts_on_requests_never_answered() {
    let (v, _) = aborted_run(&["-r", "100"]);
    assert_aborted_on_unanswered(&v);
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

// ------------------------------------------- open-loop sessions (journeys)

/// Stops (SIGSTOP) the nginx `ng` 1 s from now and lets it go on (SIGCONT)
/// when dropped, so a test that fails leaves no stopped process behind.
struct Frozen(String);

impl Frozen {
    fn after_a_second(ng: &common::nginx::Nginx) -> std::thread::JoinHandle<Frozen> {
        let pid = ng.pid().to_string();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            let ok = std::process::Command::new("kill")
                .args(["-STOP", &pid])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "cannot stop nginx {pid}");
            Frozen(pid)
        })
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0])
            .status();
    }
}

/// How a test reaches nginx.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wire {
    Http1,
    /// HTTP/2 with prior knowledge (`--h2c`).
    H2c,
    /// HTTP/2 over TLS (`--http2`, ALPN), the certificate checked with `--cacert`.
    H2Tls,
}

/// Runs `redline run … --threshold p99<200ms --abort-on-fail` for 30 s
/// against nginx (serving `/a.html`, `/b.html`, `/c.html`), which is stopped
/// 1 s into the run and stays stopped: the record, the exit code and stderr.
fn against_a_stopped_nginx(tag: &str, load: &[&str]) -> Option<(serde_json::Value, i32, String)> {
    against_nginx(
        tag,
        Wire::Http1,
        true,
        &["-d", "30s", "--threshold", "p99<200ms"],
        load,
    )
}

/// Runs `redline run … ARGS LOAD --abort-on-fail` against nginx (serving
/// `/a.html`, `/b.html`, `/c.html`) over `wire`; with `stop`, nginx is
/// stopped 1 s into the run and stays stopped: the record, the exit code
/// and stderr.
fn against_nginx(
    tag: &str,
    wire: Wire,
    stop: bool,
    opts: &[&str],
    load: &[&str],
) -> Option<(serde_json::Value, i32, String)> {
    let files = [
        ("a.html", b"page a".to_vec()),
        ("b.html", b"page b".to_vec()),
        ("c.html", b"page c".to_vec()),
    ];
    let pki = (wire == Wire::H2Tls).then(common::nginx::pki);
    let ng = common::nginx::start_nginx(&common::nginx::NginxSite {
        tag,
        files: &files,
        tls: pki.as_ref(),
        h2: wire != Wire::Http1,
        http_extra: "",
        types: "",
    })?;
    let ca = ng.dir.join("ca.pem");
    let mut args = vec!["run", "-q", "--no-save", "-o", "json"];
    let url = match &pki {
        Some(p) => {
            std::fs::write(&ca, &p.ca_pem).unwrap();
            args.extend_from_slice(&["--http2", "--cacert", ca.to_str().unwrap()]);
            format!("https://127.0.0.1:{}/a.html", ng.port)
        }
        None => format!("http://127.0.0.1:{}/a.html", ng.port),
    };
    if wire == Wire::H2c {
        args.push("--h2c");
    }
    args.extend_from_slice(opts);
    args.extend_from_slice(load);
    args.extend_from_slice(&["--abort-on-fail", &url]);
    let freeze = stop.then(|| Frozen::after_a_second(&ng));
    let (out, _) = redline_with_limit(&args, Duration::from_secs(60));
    if let Some(f) = freeze {
        drop(f.join().unwrap());
    }
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    Some((v, out.status.code().unwrap_or(-1), err))
}

/// Journeys (a `--scenario` session with `--rate`) against a server that
/// stops answering: the steps in flight and the journeys whose next step
/// is overdue count as unanswered, so the run aborts early as a plain
/// open-loop run does (before, journeys had no estimate and ran 30 s).
#[test]
fn a_journey_run_against_a_stopped_server_aborts_early_like_a_plain_open_loop_run() {
    let dir = common::nginx::tmpdir("abort-journeys");
    std::fs::create_dir_all(&dir).unwrap();
    let sc = dir.join("s.toml");
    std::fs::write(
        &sc,
        "mode = \"session\"\nthink = \"100ms\"\n\
         [[step]]\nname = \"a\"\npath = \"/a.html\"\n\
         [[step]]\nname = \"b\"\npath = \"/b.html\"\n\
         [[step]]\nname = \"c\"\npath = \"/c.html\"\n",
    )
    .unwrap();
    let sc = sc.to_str().unwrap().to_string();
    let Some((journeys, code, err)) = against_a_stopped_nginx(
        "abort-journeys-ng",
        &["--scenario", &sc, "--rate", "20", "-c", "50"],
    ) else {
        return;
    };
    assert_eq!(code, 4, "{err}");
    assert_aborted_on_unanswered(&journeys);
    let j = &journeys["journeys"];
    assert!(j["started"].as_u64().unwrap() >= 10, "{j}");
    // Nothing vanished: the journeys the stop cut short are counted.
    assert_journeys_add_up(j);
    let Some((plain, code, err)) =
        against_a_stopped_nginx("abort-journeys-plain", &["-r", "20", "-c", "50"])
    else {
        return;
    };
    assert_eq!(code, 4, "{err}");
    assert!(abort_message(&plain).contains("requests unanswered for over 200"));
    let (dj, dp) = (
        journeys["duration_s"].as_f64().unwrap(),
        plain["duration_s"].as_f64().unwrap(),
    );
    eprintln!("aborted after {dj:.1} s (journeys) and {dp:.1} s (plain open loop) of 30 s");
    // Stopped early: far from the 30 s planned (judged once the run is 5 s
    // old or 10 % through).
    assert!(dj < 15.0, "the journey run went on for {dj} s");
    assert!(dp < 15.0, "the plain run went on for {dp} s");
}

/// Journeys against a server that keeps answering, with think times: the
/// same flags never abort (a thinking user's next step is not overdue while
/// its last answer came in time).
#[test]
fn journeys_against_a_server_that_answers_are_not_aborted() {
    let srv = builtin();
    let dir = common::nginx::tmpdir("abort-journeys-ok");
    let sc = dir.join("s.toml");
    std::fs::write(
        &sc,
        "mode = \"session\"\nthink = \"300ms\"\n\
         [[step]]\npath = \"/?size=10\"\n[[step]]\npath = \"/?size=20\"\n",
    )
    .unwrap();
    let url = format!("http://{}/", srv.local_addr());
    let args = [
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "-d",
        "3s",
        "--scenario",
        sc.to_str().unwrap(),
        "--rate",
        "50",
        "--threshold",
        "p99<250ms",
        "--abort-on-fail",
        &url,
    ];
    let (out, _) = redline_with_limit(&args, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!warning_codes(&v).contains(&"aborted"), "{}", v["warnings"]);
    assert!(
        v["journeys"]["completed"].as_u64().unwrap() >= 100,
        "{}",
        v["journeys"]
    );
}

/// A session scenario over nginx's three pages with `think` between steps:
/// its path.
fn three_pages(tag: &str, think: &str) -> String {
    let dir = common::nginx::tmpdir(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let sc = dir.join("s.toml");
    std::fs::write(
        &sc,
        format!(
            "mode = \"session\"\nthink = \"{think}\"\n\
             [[step]]\nname = \"a\"\npath = \"/a.html\"\n\
             [[step]]\nname = \"b\"\npath = \"/b.html\"\n\
             [[step]]\nname = \"c\"\npath = \"/c.html\"\n"
        ),
    )
    .unwrap();
    sc.to_str().unwrap().to_string()
}

/// Journeys over h2c against an nginx that stops answering: the
/// streams' pending steps and the queued arrivals count as unanswered, so
/// the run aborts early as over HTTP/1 (before, the HTTP/2 driver counted
/// none and the run went on for its 30 s). The overdue count itself is
/// `engine/src/core/tests.rs`'s, on both drivers.
#[test]
fn a_journey_run_over_http2_against_a_stopped_server_aborts_early() {
    let sc = three_pages("abort-journeys-h2", "100ms");
    let Some((v, code, err)) = against_nginx(
        "abort-journeys-h2c",
        Wire::H2c,
        true,
        &["-d", "30s", "--threshold", "p99<200ms"],
        &[
            "--scenario",
            &sc,
            "--rate",
            "20",
            "-c",
            "5",
            "--streams",
            "10",
        ],
    ) else {
        return;
    };
    assert_eq!(code, 4, "{err}");
    assert_aborted_on_unanswered(&v);
    let j = &v["journeys"];
    assert!(j["started"].as_u64().unwrap() >= 10, "{j}");
    assert_journeys_add_up(j);
    let d = v["duration_s"].as_f64().unwrap();
    eprintln!("aborted after {d:.1} s of 30 s");
    assert!(d < 15.0, "the journey run went on for {d} s");
}

/// Journeys over HTTP/2 (TLS) against an nginx that keeps answering, with
/// think times longer than the bound: never aborted (a thinking user's next
/// step is not overdue before its intended time, and an answered step is
/// not pending); the run ends when the `-n` journeys all did. (A deadline
/// cutting journeys short while their users think leaves no step
/// unanswered: `engine/src/core/tests.rs`, on both drivers.)
#[test]
fn journeys_over_http2_against_a_server_that_answers_are_not_aborted() {
    let sc = three_pages("abort-journeys-h2-ok", "1s");
    let Some((v, code, err)) = against_nginx(
        "abort-journeys-ok-h2",
        Wire::H2Tls,
        false,
        &["-n", "40", "--threshold", "p99<500ms"],
        &[
            "--scenario",
            &sc,
            "--rate",
            "20",
            "-c",
            "2",
            "--streams",
            "50",
        ],
    ) else {
        return;
    };
    assert!(!warning_codes(&v).contains(&"aborted"), "{}", v["warnings"]);
    // Exit 4 only if the threshold really failed at the end (a busy
    // machine can hold an answer that long): never by an abort, and
    // never for steps left unanswered.
    let p99 = v["latency"]["percentiles_us"]["p99"].as_u64().unwrap();
    assert!(
        code == 0 || (code == 4 && p99 >= 500_000),
        "exit {code}, p99 {p99} µs: {err}"
    );
    assert_eq!(counter(&v, "not_sent"), 0, "{}", v["counters"]);
    let j = &v["journeys"];
    assert_journeys_add_up(j);
    assert_eq!(j["completed"].as_u64(), Some(40), "{j}");
    // Arrivals over 2 s, then two think times of 1 s: not cut short.
    let d = v["duration_s"].as_f64().unwrap();
    assert!(d >= 3.0, "ran {d} s");
}
