//! `redline find` judges each step as `run --threshold` judges a run, against
//! real servers on 127.0.0.1: a step that broke the SLO has failed even when
//! the client was limited too, and a first step the client could not drive
//! is tried lower and then said in words, never "no answer". The client is
//! made the limit for sure by a low open-file limit (`ulimit -n 40` with
//! `-c 100`: the engine's `fd_limit` warning on every step).

mod common;

use common::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs `redline ARGS` under `ulimit -n 40` (60 s at most): (exit code,
/// stdout, stderr).
fn redline_with_few_fds(args: &[&str]) -> (Option<i32>, String, String) {
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 40 && exec \"$0\" \"$@\"")
        .arg(bin())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    let out = wait_limit(child, Duration::from_secs(60));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A server that answers at most `per_sec` requests a second with 200 (a
/// token bucket holding 1 s of them, full at the start) and every other one
/// with 503 at once, as nginx's `limit_req` with a burst does: below that
/// rate every answer is a 200 once the bucket has refilled.
fn rate_limited_server(per_sec: f64) -> ScriptServer {
    let bucket = Arc::new(Mutex::new((per_sec, Instant::now())));
    ScriptServer::start(move |mut s| {
        let _ = s.set_nodelay(true);
        let mut pending = Vec::new();
        for _ in 0..100_000 {
            if read_request(&mut s, &mut pending).is_none() {
                return;
            }
            let ok = {
                let mut b = bucket.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                let refill = now.duration_since(b.1).as_secs_f64() * per_sec;
                b.0 = (b.0 + refill).min(per_sec);
                b.1 = now;
                if b.0 >= 1.0 {
                    b.0 -= 1.0;
                    true
                } else {
                    false
                }
            };
            let answer: &[u8] = if ok {
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            } else {
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"
            };
            if std::io::Write::write_all(&mut s, answer).is_err() {
                return;
            }
        }
    })
}

/// The case: a step with many errors while the client was limited
/// too. At 50 req/s a server that takes 30 a second (and a burst of 30)
/// answers about a third with 503 after the 1 s warm-up: the step FAILED
/// (errors<1%), and its note says the client was also limited; it is never
/// CLIENT-LIMITED. The next step, 25 req/s (its warm-up lets the bucket the
/// first step emptied refill), meets the
/// SLO with the client limited: CLIENT-LIMITED. The answer names both and
/// never says "no step failed".
#[cfg(unix)]
#[test]
fn find_fails_a_step_that_broke_the_slo_even_when_the_client_was_limited() {
    let srv = rate_limited_server(30.0);
    let url = srv.url();
    let args = [
        "find",
        &url,
        "--slo",
        "errors<1%",
        "--start-rate",
        "50",
        "-t",
        "1",
        "-c",
        "100",
        "--step-duration",
        "2s",
        "--warmup",
        "1s",
        "--max-steps",
        "2",
        "--no-save",
        "--no-tui",
    ];
    let (code, t, err) = redline_with_few_fds(&args);
    let step = |n: &str| {
        t.lines()
            .find(|l| l.trim_start().starts_with(n))
            .unwrap_or_else(|| panic!("no step line {n}: {t}{err}"))
            .to_string()
    };
    let s1 = step("1 ");
    assert!(s1.contains("FAIL (errors<1%"), "{s1}\n{t}");
    assert!(
        t.contains("the client was also limited: the open-file limit is 40"),
        "{t}"
    );
    let s2 = step("2 ");
    assert!(s2.trim_end().ends_with("CLIENT-LIMITED"), "{s2}\n{t}");
    assert!(
        t.contains(
            "no rate met the SLO (down to 50.0 req/s; the client was also limited at 50.0 req/s; \
             below it the step at 25.0 req/s was client-limited: redline itself was the limit there)"
        ),
        "{t}"
    );
    assert!(
        !t.contains("no step failed") && !t.contains("no answer"),
        "{t}"
    );
    assert!(!t.contains("max rate meeting SLO"), "{t}");
    // The search ended on the client's limit before any pass.
    assert_eq!(code, Some(1), "{t}{err}");
    // The same in JSON.
    let mut json = args.to_vec();
    json.extend(["-o", "json", "-q"]);
    let (code, out, err) = redline_with_few_fds(&json);
    assert_eq!(code, Some(1), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{v}");
    assert_eq!(steps[0]["verdict"], "fail", "{v}");
    assert_eq!(steps[0]["client_limited"], true, "{v}");
    let share = steps[0]["error_share"].as_f64().unwrap();
    assert!((0.1..0.6).contains(&share), "{v}");
    assert!(steps[0]["note"]
        .as_str()
        .unwrap()
        .contains("open-file limit is 40"));
    assert_eq!(steps[1]["verdict"], "client_limited", "{v}");
    assert_eq!(steps[1]["error_share"].as_f64(), Some(0.0), "{v}");
    // --max-steps 2 left no room to try it lower.
    assert_eq!(steps[1]["retried_lower"], false, "{v}");
    assert_eq!(v["upper"].as_f64(), Some(50.0), "{v}");
    assert!(v["max_rate"].is_null(), "{v}");
    assert_eq!(v["client_limited_at"].as_f64(), Some(25.0), "{v}");
    assert_eq!(v["stopped"], "max_steps", "{v}");
    assert!(v["answer"]
        .as_str()
        .unwrap()
        .starts_with("no rate met the SLO (down to 50.0 req/s"));
}

/// A first step the client cannot drive (too few file descriptors) but that
/// met the SLO is tried again at half its rate, three times; still
/// client-limited, the search says so in words (exit 1), never "no step
/// completed: no answer". Every step's requests reached the server.
#[cfg(unix)]
#[test]
fn find_retries_a_client_limited_first_step_lower_then_says_so() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let args = [
        "find",
        &url,
        "--slo",
        "p99<1s,errors<1%",
        "--start-rate",
        "40",
        "-t",
        "1",
        "-c",
        "100",
        "--step-duration",
        "1s",
        "--warmup",
        "0s",
        "--no-save",
        "--no-tui",
    ];
    let (code, t, err) = redline_with_few_fds(&args);
    assert_eq!(code, Some(1), "{t}{err}");
    let steps: Vec<&str> = t
        .lines()
        .filter(|l| l.trim_end().ends_with("CLIENT-LIMITED"))
        .collect();
    assert_eq!(steps.len(), 4, "{t}");
    for (l, rate) in steps.iter().zip(["40.0", "20.0", "10.0", "5.0"]) {
        assert!(l.split_whitespace().nth(1) == Some(rate), "{l}\n{t}");
    }
    assert_eq!(
        t.matches("client-limited before any step passed: trying again at half the rate, ")
            .count(),
        3,
        "{t}"
    );
    assert!(
        t.contains(
            "the first step was client-limited even at 5.0 req/s: redline could not drive this \
             rate from this machine; give it more threads (-t), cores or machines"
        ),
        "{t}"
    );
    assert!(
        t.contains("the client was the limit: the open-file limit is 40"),
        "{t}"
    );
    assert!(
        !t.contains("no answer") && !t.contains("PASS") && !t.contains("FAIL"),
        "{t}"
    );
    assert!(
        t.contains("Diagnosis (step 4, 5.0 req/s): the client (redline itself) was the limit"),
        "{t}"
    );
    // JSON: four client-limited steps, the first three retried lower.
    let mut json = args.to_vec();
    json.extend(["-o", "json", "-q"]);
    let (code, out, err) = redline_with_few_fds(&json);
    assert_eq!(code, Some(1), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let steps = v["steps"].as_array().unwrap();
    let retried: Vec<bool> = steps
        .iter()
        .map(|s| s["retried_lower"].as_bool().unwrap())
        .collect();
    assert_eq!(retried, vec![true, true, true, false], "{v}");
    for s in steps {
        assert_eq!(s["verdict"], "client_limited", "{v}");
        assert_eq!(s["client_limited"], true, "{v}");
        // The rate was sent and answered: the server met the SLO.
        let rate = s["target_rate"].as_f64().unwrap();
        let done = s["requests_per_sec"].as_f64().unwrap();
        assert!(done >= rate * 0.8, "{s}");
    }
    assert_eq!(v["stopped"], "client_limited", "{v}");
    assert_eq!(v["client_limited_at"].as_f64(), Some(5.0), "{v}");
    assert!(v["max_rate"].is_null() && v["upper"].is_null(), "{v}");
    assert_eq!(v["diagnosis"]["resource"], "client", "{v}");
    assert_eq!(v["diagnosis"]["step"], 4, "{v}");
}
