//! `redline trial` against real servers the tests start: Apache prefork
//! MaxRequestWorkers 10 → 40 on a 0.2 s CGI (a clear gain), gzip on → off
//! for a 50 KB page (more bytes), KeepAlive On → Off under short-lived
//! keep-alive visitors (more served), an A/A trial (no difference), tune's
//! compression fix as state B (`--from-tune`), and the server put back in
//! state A after a failed switch, a server that does not come back, and
//! Ctrl-C. Each Apache is started on a free loopback port, watched by PID
//! and stopped on drop; switching is a config file copied in and a graceful
//! restart (`kill -USR1 PID`). A missing apache2 skips with a note, and
//! fails under CI=true. Rounds are 1 s, so the file stays under a minute.

mod common;

use common::{bin, redline, usage_error, wait_limit};
use redline_testkit::setups::{apache_prefork, Running, StartError};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Starts an Apache prefork (None after the CI rule when apache2 is missing).
fn apache(tag: &str, workers: u32, limit: u32, extra: &str) -> Option<(Running, u16, PathBuf)> {
    match apache_prefork(tag, workers, limit, extra) {
        Ok(x) => Some(x),
        Err(StartError::Missing(m)) => {
            common::missing(&m);
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Writes the two states of `conf` beside it (`conf.A`, `conf.B`: `conf`
/// with `from` replaced by `to`) and returns the commands that copy each in
/// and restart Apache (`signal`: HUP, or USR1 for a graceful restart).
fn states(conf: &Path, pid: u32, signal: &str, from: &str, to: &str) -> (String, String) {
    let text = std::fs::read_to_string(conf).unwrap();
    assert!(text.contains(from), "{from} not in {text}");
    let (a, b) = (conf.with_extension("A"), conf.with_extension("B"));
    std::fs::write(&a, &text).unwrap();
    std::fs::write(&b, text.replacen(from, to, 1)).unwrap();
    let cmd = |p: &Path| {
        format!(
            "cp {} {} && kill -{signal} {pid}",
            p.display(),
            conf.display()
        )
    };
    (cmd(&a), cmd(&b))
}

/// Runs `redline trial ARGS -o json` with its history in `db` (90 s at most):
/// the output and the trial record, checked against docs/trial.schema.json.
fn trial(args: &[&str], db: &Path) -> (std::process::Output, Value) {
    let mut all = vec!["trial", "-o", "json", "--db", db.to_str().unwrap()];
    all.extend_from_slice(args);
    let (out, _) = common::redline_with_limit(&all, Duration::from_secs(90));
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    if !v.is_null() {
        common::assert_schema("trial.schema.json", &v);
    }
    (out, v)
}

/// The trials whose verdict rests on timing (a 0.2 s CGI's throughput) run
/// one at a time: on 2 cores, two of them at once starve each other's CGIs
/// and a round of B measured beside the other test's load reads like A.
static TIMED: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn timed() -> std::sync::MutexGuard<'static, ()> {
    TIMED.lock().unwrap_or_else(|e| e.into_inner())
}

/// `trial URL --before A --after B MORE...` ([`trial`]).
fn trial_ab(
    url: &str,
    (a, b): (&str, &str),
    more: &[&str],
    db: &Path,
) -> (std::process::Output, Value) {
    let mut args = vec![url, "--before", a, "--after", b];
    args.extend_from_slice(more);
    trial(&args, db)
}

/// The verdict row of `metric`.
fn row<'a>(v: &'a Value, metric: &str) -> &'a Value {
    v["verdict"]["metrics"]
        .as_array()
        .and_then(|m| m.iter().find(|r| r["metric"] == metric))
        .unwrap_or_else(|| panic!("no {metric} in {v:#}"))
}

fn db(tag: &str) -> PathBuf {
    common::nginx::tmpdir(tag).join("history.db")
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn usage_errors_are_one_line() {
    let url = "http://127.0.0.1:9/";
    let e = usage_error(&[
        "trial", url, "--before", "true", "--after", "true", "--rounds", "2",
    ]);
    assert!(e.contains("--rounds"), "{e}");
    let e = usage_error(&["trial", url, "--before", "true"]);
    assert!(e.contains("--after"), "{e}");
    let e = usage_error(&[
        "trial",
        url,
        "--from-tune",
        "keepalive_off",
        "--reload",
        "true",
    ]);
    assert!(e.contains("--server-config"), "{e}");
    let e = usage_error(&[
        "trial", url, "--before", "true", "--after", "true", "--repeat", "2",
    ]);
    assert!(e.contains("--repeat") && e.contains("--rounds"), "{e}");
    let e = usage_error(&[
        "trial", url, "--before", "true", "--after", "true", "-o", "csv",
    ]);
    assert!(e.contains("text or json"), "{e}");
    let e = usage_error(&[
        "trial",
        url,
        "--before",
        "a",
        "--after",
        "b",
        "--from-tune",
        "x",
        "--reload",
        "r",
    ]);
    assert!(e.contains("cannot be used with"), "{e}");
}

#[test]
fn prefork_more_workers_is_a_clear_gain_and_history_knows_the_trial() {
    let _one = timed();
    let Some((srv, port, conf)) = apache("trial-prefork", 10, 40, "") else {
        return;
    };
    let pid = srv.pids[0];
    let (a, b) = states(
        &conf,
        pid,
        "HUP",
        "MaxRequestWorkers 10",
        "MaxRequestWorkers 40",
    );
    let db = db("trial-prefork-db");
    let url = format!("http://127.0.0.1:{port}/cgi-bin/slow.cgi");
    let (out, v) = trial_ab(
        &url,
        (&a, &b),
        &[
            "--rounds",
            "4",
            "--settle",
            "300ms",
            "-c",
            "30",
            "-d",
            "1s",
            "--watch",
            &pid.to_string(),
            "--watch-interval",
            "250ms",
            "--server-config",
            conf.to_str().unwrap(),
            "--label",
            "workers",
        ],
        &db,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let rps = row(&v, "Requests/sec");
    eprintln!("prefork 10 → 40: {rps}");
    assert_eq!(rps["call"], "better", "{v:#}");
    assert!(rps["ci"][0].as_f64().unwrap() > 0.0, "{rps}");
    assert!(rps["change_pct"].as_f64().unwrap() > 50.0, "{rps}");
    assert_eq!(row(&v, "Latency p50")["call"], "better", "{v:#}");
    // Watched: the server's memory and CPU per request are metrics too.
    assert!(row(&v, "Server memory (peak PSS)")["a"].as_f64().unwrap() > 0.0);
    assert!(row(&v, "Server CPU per request")["b"].as_f64().unwrap() > 0.0);
    // The directives each state ran with, and the server left in state A.
    assert_eq!(
        v["config_a"]["directives"]["MaxRequestWorkers"]["value"],
        "10"
    );
    assert_eq!(
        v["config_b"]["directives"]["MaxRequestWorkers"]["value"],
        "40"
    );
    assert_eq!(v["restored"], true);
    let now = std::fs::read_to_string(&conf).unwrap();
    assert!(now.contains("MaxRequestWorkers 10\n"), "{now}");
    let states: String = v["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(states, "ABBAABBA");
    // One history entry that show, compare and report understand; the rounds are runs.
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("redline: saved the trial as "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{err}"))
        .to_string();
    let d = db.to_str().unwrap();
    let show = redline(&["show", &id, "--db", d]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("MaxRequestWorkers") && text.contains("10 -> 40"),
        "{text}"
    );
    assert!(
        text.contains("In short: B is better on Requests/sec"),
        "{text}"
    );
    let export = redline(&["export", &id, "--db", d]);
    let saved: Value = serde_json::from_slice(&export.stdout).unwrap();
    common::assert_schema("trial.schema.json", &saved);
    assert_eq!(saved["verdict"], v["verdict"]);
    let cmp = redline(&["compare", "workers", "--db", d]);
    assert_eq!(cmp.status.code(), Some(0), "{}", stderr(&cmp));
    assert!(String::from_utf8_lossy(&cmp.stdout).contains("Verdict"));
    let html = db.with_file_name("trial.html");
    let rep = redline(&["report", &id, "-o", html.to_str().unwrap(), "--db", d]);
    assert_eq!(rep.status.code(), Some(0), "{}", stderr(&rep));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches("<circle class=\"round\"").count(),
        8 * 7,
        "every round of the 7 metrics with values"
    );
    let rounds = redline(&["compare", "workers:A", "workers:B", "--db", d]);
    assert!(
        String::from_utf8_lossy(&rounds.stdout).contains("4 runs"),
        "{}",
        String::from_utf8_lossy(&rounds.stdout)
    );
    drop(srv);
}

/// A 50 KB HTML page that compresses well but not to nothing.
fn page_50k(dir: &Path) {
    let mut s = String::from("<!DOCTYPE html><html><body>\n");
    let mut i = 0u64;
    while s.len() < 50 * 1024 {
        i += 1;
        s.push_str(&format!(
            "<p class=\"row{}\">Item {i}: {} units at {}.{:02} each</p>\n",
            i % 7,
            i * 37 % 1009,
            i * 13 % 97,
            i * 7 % 100
        ));
    }
    s.push_str("</body></html>\n");
    std::fs::write(dir.join("page.html"), s).unwrap();
}

#[test]
fn gzip_off_sends_more_bytes() {
    let m = "/usr/lib/apache2/modules";
    let extra = format!(
        "LoadModule deflate_module {m}/mod_deflate.so\nLoadModule filter_module {m}/mod_filter.so\nSetOutputFilter DEFLATE"
    );
    let Some((srv, port, conf)) = apache("trial-gzip", 10, 10, &extra) else {
        return;
    };
    page_50k(conf.parent().unwrap());
    let (a, b) = states(
        &conf,
        srv.pids[0],
        "USR1",
        "SetOutputFilter DEFLATE",
        "#SetOutputFilter DEFLATE",
    );
    let url = format!("http://127.0.0.1:{port}/page.html");
    let html = conf.with_file_name("trial.html");
    let (out, v) = trial_ab(
        &url,
        (&a, &b),
        &[
            "--settle",
            "300ms",
            "-H",
            "Accept-Encoding: gzip",
            "-c",
            "4",
            "-d",
            "1s",
            "--no-save",
            "--html",
            html.to_str().unwrap(),
        ],
        &db("trial-gzip-db"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The HTML draws every round of each metric, A and B.
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("data-state=\"A\"").count(), 3 * 5, "{page}");
    assert_eq!(page.matches("data-state=\"B\"").count(), 3 * 5);
    let bytes = row(&v, "Bytes/response");
    eprintln!(
        "gzip on → off: {bytes}\n{}\n{}",
        row(&v, "Requests/sec"),
        row(&v, "Latency p50")
    );
    assert_eq!(bytes["call"], "worse", "{v:#}");
    assert!(bytes["a"].as_f64().unwrap() < 20_000.0, "{bytes}");
    assert!(bytes["b"].as_f64().unwrap() > 50_000.0, "{bytes}");
    drop(srv);
}

/// Short-lived keep-alive visitors, as browsers are: each connects, asks
/// for idx.html, reads the answer, then leaves its connection open until
/// the server closes it (at most 3 s), and the next visitor comes 100 ms
/// later. Stopped (and joined) on drop; bounded to 120 s in any case.
struct Visitors {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl Visitors {
    fn start(port: u16, n: usize) -> Visitors {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut visits = 0u64;
                    let t0 = Instant::now();
                    while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(120) {
                        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
                        if let Ok(mut c) =
                            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
                        {
                            let _ = c.set_read_timeout(Some(Duration::from_millis(100)));
                            let _ =
                                c.write_all(b"GET /idx.html HTTP/1.1\r\nHost: localhost\r\n\r\n");
                            // Read until the server closes or 3 s pass.
                            let held = Instant::now();
                            let mut buf = [0u8; 4096];
                            while held.elapsed() < Duration::from_secs(3)
                                && !stop.load(Ordering::Relaxed)
                            {
                                match c.read(&mut buf) {
                                    Ok(0) => break,
                                    Ok(_) => {}
                                    Err(e)
                                        if matches!(
                                            e.kind(),
                                            std::io::ErrorKind::WouldBlock
                                                | std::io::ErrorKind::TimedOut
                                        ) => {}
                                    Err(_) => break,
                                }
                            }
                            visits += 1;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    visits
                })
            })
            .collect();
        Visitors { stop, threads }
    }
}

impl Drop for Visitors {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// KeepAlive On → Off with many short-lived visitors on a prefork Apache of
/// 10 workers: with KeepAlive On each visitor's idle connection holds a
/// worker for up to 3 s, so the measured clients (new connections to a
/// 0.2 s CGI) get the few workers left; with Off a visitor holds one only
/// while it is answered. The trial must call Off better on req/s and p50.
#[test]
fn keepalive_off_serves_more_when_short_lived_visitors_idle() {
    let _one = timed();
    let Some((srv, port, conf)) = apache(
        "trial-keepalive",
        10,
        10,
        "KeepAlive On\nKeepAliveTimeout 5\nMaxKeepAliveRequests 0",
    ) else {
        return;
    };
    let (a, b) = states(&conf, srv.pids[0], "HUP", "KeepAlive On", "KeepAlive Off");
    let visitors = Visitors::start(port, 7);
    let url = format!("http://127.0.0.1:{port}/cgi-bin/slow.cgi");
    let (out, v) = trial_ab(
        &url,
        (&a, &b),
        &[
            "--settle",
            "500ms",
            "--no-keepalive",
            "-c",
            "10",
            "-d",
            "2s",
            "--server-config",
            conf.to_str().unwrap(),
            "--no-save",
        ],
        &db("trial-keepalive-db"),
    );
    drop(visitors);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rps = row(&v, "Requests/sec");
    let per_round: Vec<String> = v["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {:.1}/s p50 {} µs",
                r["state"], r["requests_per_sec"], r["p50_us"]
            )
        })
        .collect();
    eprintln!(
        "KeepAlive On → Off: {rps}\n{}\nrounds: {per_round:?}",
        row(&v, "Latency p50")
    );
    assert_eq!(rps["call"], "better", "{v:#}");
    assert!(rps["change_pct"].as_f64().unwrap() > 30.0, "{rps}");
    assert_eq!(row(&v, "Latency p50")["call"], "better", "{v:#}");
    assert_eq!(
        v["config_a"]["directives"]["KeepAlive"]["value"], "On",
        "{v:#}"
    );
    assert_eq!(v["config_b"]["directives"]["KeepAlive"]["value"], "Off");
    assert_eq!(v["restored"], true);
    drop(srv);
}

#[test]
fn an_a_a_trial_finds_no_clear_difference() {
    let Some((srv, port, _conf)) = apache("trial-aa", 10, 10, "") else {
        return;
    };
    let same = format!("kill -USR1 {}", srv.pids[0]);
    let url = format!("http://127.0.0.1:{port}/idx.html");
    let args = [
        url.as_str(),
        "--before",
        &same,
        "--after",
        &same,
        "--settle",
        "300ms",
        "-c",
        "4",
        "-d",
        "1s",
        "--no-save",
    ];
    // A calibrated test calls an A/A trial different about 1 time in 20;
    // two in a row about 1 in 400.
    let mut calls = Vec::new();
    for _ in 0..2 {
        let (out, v) = trial(&args, &db("trial-aa-db"));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(v["rounds"].as_array().unwrap().len(), 6);
        let significant = v["verdict"]["significant"].as_bool().unwrap();
        calls.push(significant);
        if !significant {
            let rps = row(&v, "Requests/sec");
            assert_eq!(rps["call"], "no_clear_difference", "{rps}");
            assert!(rps["ci"][0].as_f64().unwrap() <= 0.0 && rps["ci"][1].as_f64().unwrap() >= 0.0);
            break;
        }
        eprintln!("A/A called different: {v:#}");
    }
    assert!(calls.contains(&false), "{calls:?}");
    drop(srv);
}

#[test]
fn from_tune_runs_tunes_fix_as_state_b() {
    // Content types known (mod_mime, no types file), mod_deflate not loaded:
    // tune's `no_compression` finding, whose fix loads it for text/html.
    let m = "/usr/lib/apache2/modules";
    let extra = format!(
        "LoadModule mime_module {m}/mod_mime.so\nTypesConfig /dev/null\nAddType text/html .html"
    );
    let Some((srv, port, conf)) = apache("trial-tune", 10, 10, &extra) else {
        return;
    };
    page_50k(conf.parent().unwrap());
    let original = std::fs::read_to_string(&conf).unwrap();
    let reload = format!("kill -USR1 {}", srv.pids[0]);
    let url = format!("http://127.0.0.1:{port}/page.html");
    let (out, v) = trial(
        &[
            &url,
            "--from-tune",
            "no_compression",
            "--reload",
            &reload,
            "--server-config",
            conf.to_str().unwrap(),
            "--settle",
            "300ms",
            "-H",
            "Accept-Encoding: gzip",
            "-c",
            "4",
            "-d",
            "1s",
            "--no-save",
        ],
        &db("trial-tune-db"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ft = &v["from_tune"];
    assert!(
        ft["config_test"].as_str().unwrap().contains("accepts"),
        "{ft}"
    );
    let fixed = std::fs::read_to_string(ft["fixed_copy"].as_str().unwrap()).unwrap();
    assert!(fixed.contains("LoadModule deflate_module") && !original.contains("deflate"));
    // B compresses the page: fewer bytes per response, every time.
    let bytes = row(&v, "Bytes/response");
    eprintln!("tune's no_compression fix: {bytes}");
    assert_eq!(bytes["call"], "better", "{v:#}");
    assert!(bytes["a"].as_f64().unwrap() > 50_000.0 && bytes["b"].as_f64().unwrap() < 20_000.0);
    // The server is left as it was: the original file, without the fix.
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), original);
    assert_eq!(v["restored"], true);
    drop(srv);
}

#[test]
fn from_tune_refuses_an_unknown_finding_and_names_those_with_a_fix() {
    let Some((srv, _port, conf)) = apache("trial-tune-unknown", 10, 10, "") else {
        return;
    };
    let e = usage_error(&[
        "trial",
        "http://127.0.0.1:9/",
        "--from-tune",
        "no_such_thing",
        "--reload",
        "true",
        "--server-config",
        conf.to_str().unwrap(),
        "--no-save",
    ]);
    assert!(e.contains("keepalive_off:"), "{e}");
    drop(srv);
}

/// A file the switch commands write their state into.
fn state_file(tag: &str) -> PathBuf {
    common::nginx::tmpdir(tag).join("state")
}

#[test]
fn a_failed_switch_puts_state_a_back() {
    let srv = common::builtin();
    let log = state_file("trial-fail");
    let before = format!("echo A >> {}", log.display());
    let url = format!("http://{}/", srv.local_addr());
    let (out, v) = trial(
        &[
            &url,
            "--before",
            &before,
            "--after",
            "echo B >&2; exit 3",
            "-d",
            "1s",
            "--settle",
            "0s",
            "--no-save",
        ],
        &db("trial-fail-db"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--after failed"), "{err}");
    // A at the start, A again after B failed half-way.
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "A\nA\n");
    assert_eq!(v["rounds"].as_array().unwrap().len(), 1);
    assert_eq!(v["restored"], true);
}

#[test]
fn a_server_that_does_not_answer_ends_the_trial_bounded() {
    let port = redline_testkit::free_port();
    let log = state_file("trial-gone");
    let before = format!("echo A >> {}", log.display());
    let t0 = Instant::now();
    let (out, _) = trial(
        &[
            &format!("http://127.0.0.1:{port}/"),
            "--before",
            &before,
            "--after",
            "true",
            "--settle",
            "0s",
            "--settle-max",
            "1s",
            "--no-save",
        ],
        &db("trial-gone-db"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("did not answer within 1 s"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(15));
    // State A was set and stayed: nothing to put back, no round ran.
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "A\n");
}

#[test]
fn ctrl_c_stops_the_round_and_puts_state_a_back() {
    let srv = common::builtin();
    let state = state_file("trial-ctrlc");
    let url = format!("http://{}/", srv.local_addr());
    let before = format!("echo A > {}", state.display());
    let after = format!("echo B > {}", state.display());
    let child = redline_testkit::proc::spawn(
        bin(),
        &[
            "trial",
            &url,
            "--before",
            &before,
            "--after",
            &after,
            "-c",
            "2",
            "-d",
            "3s",
            "--settle",
            "0s",
            "--no-save",
            "-o",
            "json",
        ],
    );
    let pid = child.id() as i32;
    // Until round 2 (state B) runs: bounded.
    let t0 = Instant::now();
    while std::fs::read_to_string(&state).unwrap_or_default() != "B\n" {
        assert!(t0.elapsed() < Duration::from_secs(20), "state B never came");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let out = wait_limit(child, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "A\n");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    common::assert_schema("trial.schema.json", &v);
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["restored"], true);
    assert_eq!(v["rounds"][1]["interrupted"], true, "{v:#}");
}
