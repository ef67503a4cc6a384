//! Scenario files: the examples against the built-in target, sessions with
//! cookies and extracted tokens checked server-side, CSV data, weights, several
//! hosts, checks, per-request thresholds, and bad scenario files.

mod common;

use common::*;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `run_json` (which adds `run -o json -q` itself).
fn rj(args: &[&str]) -> serde_json::Value {
    let a: Vec<&str> = args.iter().copied().filter(|x| *x != "-q").collect();
    run_json(&a)
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn example(name: &str) -> String {
    examples().join(name).to_string_lossy().into_owned()
}

fn stats(srv: &redline_serve::Server) -> redline_serve::ServerStats {
    srv.stats()
}

fn request<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["requests"]
        .as_array()
        .expect("requests array")
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no request {name} in {}", v["requests"]))
}

fn n(v: &serde_json::Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

fn url(srv: &redline_serve::Server) -> String {
    format!("http://{}", srv.local_addr())
}

/// A scenario file with `text` in a temporary folder: its path.
fn scenario_file(text: &str) -> String {
    let d = dir_with(&[("s.toml", text)]);
    d.join("s.toml").to_str().expect("a UTF-8 path").to_string()
}

/// A temporary folder with files in it.
fn dir_with(files: &[(&str, &str)]) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "redline-scn-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    for (name, text) in files {
        let p = d.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    d
}

#[test]
fn pounder_example_sends_exactly_n_through_p_agents() {
    let srv = builtin();
    let v = rj(&["--scenario", &example("pounder.toml"), &url(&srv), "-q"]);
    // [load] in the file: 1000 requests through 5 connections.
    assert_eq!(counter(&v, "completed"), 1000);
    let s = stats(&srv);
    assert_eq!(s.requests, 1000, "server counted {}", s.requests);
    assert_eq!(s.connections, 5);
    // Round-robin over three pages: each gets a third.
    for name in ["home", "article", "image"] {
        let r = request(&v, name);
        let sent = n(r, "sent");
        assert!((332..=335).contains(&sent), "{name}: {sent}");
        assert_eq!(n(r, "errors"), 0);
    }
    // The image page is 51,200 bytes: its share of body bytes shows up.
    assert!(counter(&v, "body_bytes") > 333 * 51_200);
}

#[test]
fn flood_example_posts_form_and_file_bodies_round_robin() {
    let srv = builtin();
    let v = rj(&[
        "--scenario",
        &example("flood-round-robin.toml"),
        &url(&srv),
        "-n",
        "400",
        "-c",
        "4",
        "-q",
    ]);
    assert_eq!(counter(&v, "completed"), 400);
    let search = request(&v, "search");
    let upload = request(&v, "upload");
    assert_eq!(search["method"], "POST");
    assert_eq!(n(search, "sent"), 100);
    assert_eq!(n(upload, "sent"), 100);
    for r in v["requests"].as_array().unwrap() {
        assert_eq!(n(r, "failed_checks"), 0, "{r}");
        let checks = r["checks"].as_array().unwrap();
        assert!(!checks.is_empty());
        assert_eq!(checks[0]["passed"], 100);
    }
    // The server received the bodies: 100 form posts and 100 file posts.
    let form = "q=web+server+tuning&lang=ko"
        .len()
        .min("lang=ko&q=web+server+tuning".len()) as u64;
    let file = std::fs::read(examples().join("data/post-body.txt"))
        .unwrap()
        .len() as u64;
    let s = stats(&srv);
    assert!(
        s.bytes_in >= 100 * (form + file) + 400 * 60,
        "bytes_in {}",
        s.bytes_in
    );
}

#[test]
fn session_carries_cookie_and_extracted_token_checked_server_side() {
    let srv = builtin();
    // The example's own latency thresholds may fail (exit 4) on a busy
    // machine; the record is printed all the same, and sessions are the point here.
    let out = redline(&[
        "run",
        "--output",
        "json",
        "--scenario",
        &example("login-browse.toml"),
        &url(&srv),
        "-c",
        "4",
        "-n",
        "80",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 4)), "{err}");
    if out.status.code() == Some(4) {
        assert!(!err.contains("FAIL  errors"), "{err}");
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the record");
    assert_eq!(counter(&v, "completed"), 80);
    let s = stats(&srv);
    // Each user walks login → account → browse → article again and again; the
    // server saw every login, and every account request carried the cookie and
    // the token of its own user's last login.
    let logins = n(request(&v, "login"), "completed");
    let accounts = n(request(&v, "account"), "completed");
    assert!(logins >= 16 && accounts >= 16, "{logins} {accounts}");
    assert_eq!(s.logins, logins);
    assert_eq!(s.sessions_ok, accounts, "denied {}", s.sessions_denied);
    assert_eq!(s.sessions_denied, 0);
    let account = request(&v, "account");
    assert_eq!(n(account, "failed_checks"), 0);
    assert_eq!(n(request(&v, "login"), "failed_extractions"), 0);
    assert!(v["config"]["scenario"]
        .as_str()
        .unwrap()
        .contains("login then browse"));
}

#[test]
fn without_the_cookie_jar_the_server_refuses_and_checks_count_it() {
    let srv = builtin();
    let sc = scenario_file(
        r#"
mode = "session"
cookies = false
[[step]]
name = "login"
method = "POST"
path = "/__login"
extract = [{ name = "token", json = "/token" }]
[[step]]
name = "account"
path = "/__account?token={{token}}"
check = { status = 200, body_contains = "welcome" }
"#,
    );
    let out = redline(&[
        "run",
        "--scenario",
        &sc,
        &url(&srv),
        "-c",
        "2",
        "-n",
        "20",
        "-o",
        "json",
        "-q",
    ]);
    // Failed checks are counted; they do not stop the run or fail it.
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let account = request(&v, "account");
    assert_eq!(n(account, "failed_checks"), 10);
    assert_eq!(n(account, "bad_status"), 10);
    assert_eq!(stats(&srv).sessions_denied, 10);
    let text = redline(&[
        "run",
        "--scenario",
        &sc,
        &url(&srv),
        "-c",
        "2",
        "-n",
        "20",
        "-q",
    ]);
    let t = String::from_utf8_lossy(&text.stdout);
    assert!(t.contains("account: status 200 failed 10 of 10"), "{t}");
    assert!(
        t.contains("account: body contains \"welcome\" failed 10 of 10"),
        "{t}"
    );
}

/// A server that records each request line and answers 200 with a small body.
fn recording_server() -> (ScriptServer, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let srv = ScriptServer::start(move |mut s| {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        for _ in 0..100_000 {
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            while buf.len() < end + len {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let body = String::from_utf8_lossy(&buf[end..end + len]).into_owned();
            let line = head.lines().next().unwrap_or("").to_string();
            s2.lock().unwrap().push(format!("{line} {body}"));
            buf.drain(..end + len);
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    });
    (srv, seen)
}

#[test]
fn csv_rows_per_user_and_per_iteration() {
    let (srv, seen) = recording_server();
    let d = dir_with(&[
        ("users.csv", "user,pin\nalice,1\nbob,2\n\"carol, jr\",3\n"),
        (
            "per-user.toml",
            "mode = \"session\"\n[data]\nfile = \"users.csv\"\n[[step]]\npath = \"/u/{{user}}/{{vu}}\"\nbody = \"pin={{pin}}\"\n",
        ),
        (
            "per-iter.toml",
            "[data]\nfile = \"users.csv\"\nper = \"iteration\"\n[[request]]\npath = \"/i\"\nbody = \"{{user}}\"\n",
        ),
    ]);
    let out = redline(&[
        "run",
        "--scenario",
        d.join("per-user.toml").to_str().unwrap(),
        &srv.url(),
        "-c",
        "2",
        "-t",
        "1",
        "-n",
        "6",
        "-q",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = std::mem::take(&mut *seen.lock().unwrap());
    // Two users: user 0 is alice with pin 1, user 1 is bob with pin 2, on every pass.
    assert_eq!(lines.len(), 6);
    for l in &lines {
        assert!(
            (l.starts_with("POST /u/alice/0 ") && l.ends_with("pin=1"))
                || (l.starts_with("POST /u/bob/1 ") && l.ends_with("pin=2")),
            "{lines:?}"
        );
    }
    assert!(lines.iter().any(|l| l.contains("/u/alice/0")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("/u/bob/1")), "{lines:?}");
    let out = redline(&[
        "run",
        "--scenario",
        d.join("per-iter.toml").to_str().unwrap(),
        &srv.url(),
        "-c",
        "1",
        "-n",
        "6",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let lines = std::mem::take(&mut *seen.lock().unwrap());
    let bodies: Vec<&str> = lines
        .iter()
        .map(|l| l.rsplit(" HTTP/1.1 ").next().unwrap())
        .collect();
    // One row per request, in order, wrapping around; quoted fields keep their comma.
    assert_eq!(
        bodies,
        ["alice", "bob", "carol, jr", "alice", "bob", "carol, jr"]
    );
}

#[test]
fn weighted_mix_follows_the_weights() {
    let srv = builtin();
    let sc = scenario_file("mode = \"weighted\"\n[[request]]\nname = \"heavy\"\npath = \"/?size=10\"\nweight = 3\n[[request]]\nname = \"light\"\npath = \"/?size=20\"\nweight = 1\n");
    let v = rj(&[
        "--scenario",
        &sc,
        &url(&srv),
        "-n",
        "4000",
        "-c",
        "4",
        "--seed",
        "7",
        "-q",
    ]);
    let heavy = n(request(&v, "heavy"), "sent") as f64;
    let light = n(request(&v, "light"), "sent") as f64;
    assert_eq!(heavy + light, 4000.0);
    let share = heavy / 4000.0;
    assert!((0.72..0.78).contains(&share), "heavy share {share}");
}

#[test]
fn requests_go_to_several_hosts() {
    let a = builtin();
    let b = builtin();
    let sc = scenario_file(&format!(
            "[hosts]\napi = \"http://{}\"\n[[request]]\nname = \"web\"\npath = \"/\"\n[[request]]\nname = \"api\"\nhost = \"api\"\npath = \"/?size=5\"\n",
            b.local_addr()
        ));
    let v = rj(&["--scenario", &sc, &url(&a), "-n", "200", "-c", "2", "-q"]);
    assert_eq!(counter(&v, "completed"), 200);
    assert_eq!(stats(&a).requests, 100);
    assert_eq!(stats(&b).requests, 100);
    assert_eq!(counter(&v, "failed"), 0);
}

#[test]
fn think_time_spaces_a_users_requests() {
    let srv = builtin();
    let sc = scenario_file("think = \"100ms\"\n[[request]]\npath = \"/\"\n");
    let (out, took) = redline_with_limit(
        &[
            "run",
            "--scenario",
            &sc,
            &url(&srv),
            "-c",
            "1",
            "-n",
            "5",
            "-q",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(0));
    // Four think times of 100 ms lie between five requests (a lower bound, not a timing assertion).
    assert!(took >= Duration::from_millis(400), "took {took:?}");
    assert_eq!(stats(&srv).requests, 5);
}

#[test]
fn thresholds_in_the_scenario_and_per_request_give_exit_4() {
    let srv = builtin();
    let sc = scenario_file("thresholds = [\"errors<50%\"]\n[[request]]\nname = \"slow\"\npath = \"/?delay=30ms\"\nthresholds = [\"p50<5ms\"]\n[[request]]\nname = \"fast\"\npath = \"/\"\nthresholds = [\"p99<10s\"]\n");
    let out = redline(&[
        "run",
        "--scenario",
        &sc,
        &url(&srv),
        "-n",
        "20",
        "-c",
        "2",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(4));
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("PASS  errors<50%"), "{t}");
    assert!(t.contains("FAIL  slow: p50<5ms"), "{t}");
    assert!(t.contains("PASS  fast: p99<10s"), "{t}");
}

#[test]
fn bad_scenarios_name_file_and_line_and_exit_2() {
    let srv = builtin();
    let outside = dir_with(&[("secret.txt", "x")]);
    let d = dir_with(&[
        (
            "typo.toml",
            "[[request]]\npath = \"/\"\n\n[[request]]\npath = \"/b\"\nwieght = 3\n",
        ),
        (
            "var.toml",
            "[[request]]\npath = \"/\"\n[[request]]\nname = \"b\"\npath = \"/{{nope}}\"\n",
        ),
        (
            "escape.toml",
            &format!(
                "[[request]]\npath = \"/\"\nbody_file = \"../{}/secret.txt\"\n",
                outside.file_name().unwrap().to_string_lossy()
            ),
        ),
        ("empty.toml", "name = \"nothing\"\n"),
        ("mode.toml", "mode = \"chaos\"\n[[request]]\npath = \"/\"\n"),
        (
            "regex.toml",
            "[[request]]\npath = \"/\"\ncheck = { body_regex = \"(\" }\n",
        ),
        (
            "timeout.toml",
            "[[request]]\npath = \"/\"\n\n[[request]]\npath = \"/b\"\n\ntimeout = \"soon\"\n",
        ),
        (
            "check.toml",
            "[[request]]\nname = \"c\"\npath = \"/\"\ncheck = { status = 200,\n  latency_under = \"fast\" }\n",
        ),
        (
            "extract.toml",
            "mode = \"session\"\n[[step]]\npath = \"/\"\nextract = [\n  { name = \"a\", header = \"x-a\" },\n  { name = \"b\", regex = \"([a-z\" },\n]\n",
        ),
        ("users.csv", "user\nalice\n"),
        (
            "data.toml",
            "[[request]]\npath = \"/\"\n\n[data]\nfile = \"users.csv\"\nper = \"sometimes\"\n",
        ),
        (
            "nodata.toml",
            "[[request]]\npath = \"/\"\n\n[data]\nfile = \"nobody.csv\"\n",
        ),
        (
            "hosts.toml",
            "[hosts]\napi = \"http://127.0.0.1:1\"\nbad = \"ftp://127.0.0.1\"\n[[request]]\npath = \"/\"\n",
        ),
        (
            "thresholds.toml",
            "thresholds = [\n  \"errors<1%\",\n  \"p99 is fast\",\n]\n[[request]]\npath = \"/\"\n",
        ),
        (
            "req-thresholds.toml",
            "[[request]]\nname = \"a\"\npath = \"/\"\nthresholds = [\"p50<1s\", \"bogus\"]\n",
        ),
        (
            "load-rate.toml",
            "[load]\nconnections = 10\nrate = 0.0\n[[request]]\npath = \"/\"\n",
        ),
        (
            "load-conns.toml",
            "[[request]]\npath = \"/\"\n\n[load]\nconnections = 0\n",
        ),
    ]);
    let run = |f: &str, extra: &[&str]| {
        let p = d.join(f);
        let mut args = vec!["run", "--scenario", p.to_str().unwrap()];
        let u = url(&srv);
        args.push(&u);
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-n", "1", "-q"]);
        let out = redline(&args);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, e) = run("typo.toml", &[]);
    assert_eq!(code, Some(2));
    assert!(e.contains("typo.toml:6:") && e.contains("wieght"), "{e}");
    let (code, e) = run("var.toml", &[]);
    assert_eq!(code, Some(2));
    // The line of the bad key, not of the `[[request]]` above it.
    assert!(
        e.contains("var.toml:5: request 'b'") && e.contains("nope"),
        "{e}"
    );
    // Each error names the line of the offending key or value; an unnamed
    // request is named by its position.
    for (f, want) in [
        ("timeout.toml", "timeout.toml:7: request #2: timeout:"),
        (
            "check.toml",
            "check.toml:5: request 'c': check.latency_under:",
        ),
        (
            "extract.toml",
            "extract.toml:6: request #1: extract 'b': bad regex",
        ),
        ("regex.toml", "regex.toml:3: request #1: check.body_regex:"),
        ("mode.toml", "mode.toml:1: unknown mode 'chaos'"),
        ("data.toml", "data.toml:6: [data] unknown per = 'sometimes'"),
        ("nodata.toml", "nodata.toml:5: [data] cannot read"),
        (
            "hosts.toml",
            "hosts.toml:3: [hosts] bad: unsupported scheme",
        ),
        ("thresholds.toml", "thresholds.toml:3: thresholds:"),
        ("req-thresholds.toml", "req-thresholds.toml:4: request 'a':"),
        (
            "load-rate.toml",
            "load-rate.toml:3: [load] rate must be a positive number",
        ),
        (
            "load-conns.toml",
            "load-conns.toml:5: [load] connections must be at least 1",
        ),
    ] {
        let (code, e) = run(f, &[]);
        assert_eq!(code, Some(2), "{f}: {e}");
        assert_eq!(e.lines().count(), 1, "{f}: one line: {e}");
        assert!(e.contains(want), "{f}: want {want:?} in: {e}");
        assert!(!e.contains("request '?'"), "{e}");
    }
    // [load] duration is read only when the command line gives no -n/-d.
    let p = d.join("load-rate.toml");
    std::fs::write(
        &p,
        "[[request]]\npath = \"/\"\n[load]\nconnections = 2\nduration = \"soon\"\n",
    )
    .unwrap();
    let out = redline(&["run", "--scenario", p.to_str().unwrap(), &url(&srv), "-q"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("load-rate.toml:5: [load] duration:"), "{e}");
    let (code, e) = run("escape.toml", &[]);
    assert_eq!(code, Some(2));
    assert!(
        e.contains("outside the scenario's folder") && e.contains("--allow-paths"),
        "{e}"
    );
    let (code, e) = run("escape.toml", &["--allow-paths"]);
    assert_eq!(code, Some(0), "{e}");
    for f in ["empty.toml", "mode.toml", "regex.toml", "missing.toml"] {
        let (code, e) = run(f, &[]);
        assert_eq!(code, Some(2), "{f}: {e}");
        assert_eq!(e.lines().count(), 1, "{f}: one line: {e}");
        assert!(e.contains(f), "{f}: names the file: {e}");
    }
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&outside);
}

#[test]
fn secrets_in_scenarios_stay_out_of_the_output() {
    let srv = builtin();
    let sc = scenario_file("headers = { Authorization = \"Bearer sekrit-token-1\" }\n[[request]]\nname = \"me\"\npath = \"/\"\nheaders = { Cookie = \"sid=sekrit-cookie-2\" }\n");
    let out = redline(&[
        "run",
        "--scenario",
        &sc,
        &format!("http://user:sekrit-pass-3@{}", srv.local_addr()),
        "-n",
        "5",
        "-o",
        "json",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for s in ["sekrit-token-1", "sekrit-cookie-2", "sekrit-pass-3"] {
        assert!(!all.contains(s), "{s} leaked");
    }
}

#[test]
fn examples_and_json_output_follow_their_schemas() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("scenario.schema.json")).unwrap())
            .unwrap();
    let v = jsonschema::validator_for(&schema).expect("scenario schema compiles");
    let mut n = 0;
    for e in std::fs::read_dir(examples()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let doc: toml::Value = toml::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let json = serde_json::to_value(doc).unwrap();
            let errors: Vec<String> = v.iter_errors(&json).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{}: {errors:?}", p.display());
            n += 1;
        }
    }
    assert!(n >= 3);
    let bad: toml::Value = toml::from_str("[[request]]\npath = \"x\"\nwieght = 1\n").unwrap();
    assert!(!v.is_valid(&serde_json::to_value(bad).unwrap()));

    let srv = builtin();
    // (An example without latency thresholds, which a busy machine may fail.)
    let rec = rj(&[
        "--scenario",
        &example("flood-round-robin.toml"),
        &url(&srv),
        "-n",
        "8",
        "-c",
        "2",
        "-q",
    ]);
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("run-record.schema.json")).unwrap(),
    )
    .unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v.iter_errors(&rec).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// `run --segment`: virtual-user ids and CSV rows are the whole run's, so
/// three segments use six different users and six different rows.
#[test]
fn segments_use_global_user_ids_and_rows() {
    let (srv, seen) = recording_server();
    let csv = "user\nu0\nu1\nu2\nu3\nu4\nu5\n";
    let d = dir_with(&[
        ("users.csv", csv),
        (
            "per-user.toml",
            "mode = \"session\"\n[data]\nfile = \"users.csv\"\n[[step]]\npath = \"/u/{{user}}/{{vu}}\"\n",
        ),
        (
            "per-iter.toml",
            "[data]\nfile = \"users.csv\"\nper = \"iteration\"\n[[request]]\npath = \"/i\"\nbody = \"{{user}}\"\n",
        ),
    ]);
    let run_segments = |file: &str, c: &str, n: &str| -> Vec<String> {
        for i in 0..3 {
            let seg = format!("{i}/3");
            let out = redline(&[
                "run",
                "--scenario",
                d.join(file).to_str().unwrap(),
                &srv.url(),
                "--segment",
                &seg,
                "-c",
                c,
                "-n",
                n,
                "-t",
                "1",
                "-q",
                "--no-save",
            ]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::mem::take(&mut *seen.lock().unwrap())
    };
    // Per user: -c 6 over three segments is users 0..5, each with its own row.
    let lines = run_segments("per-user.toml", "6", "12");
    assert_eq!(lines.len(), 12);
    let mut users: Vec<String> = lines
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap().to_string())
        .collect();
    users.sort();
    users.dedup();
    let want: Vec<String> = (0..6).map(|i| format!("/u/u{i}/{i}")).collect();
    assert_eq!(users, want, "{lines:?}");
    // Per iteration: six requests over three segments take six different rows.
    let lines = run_segments("per-iter.toml", "3", "6");
    let mut bodies: Vec<&str> = lines
        .iter()
        .map(|l| l.rsplit(" HTTP/1.1 ").next().unwrap())
        .collect();
    bodies.sort();
    assert_eq!(bodies, ["u0", "u1", "u2", "u3", "u4", "u5"], "{lines:?}");
}

/// Session values taken from a response header, a cookie and a body regex
/// arrive in the next step's path and header, as the server sees them.
#[test]
fn header_cookie_and_regex_extraction_feed_the_next_step() {
    let (srv, seen) = routed_server(|head, _| {
        if head.starts_with("GET /login ") {
            let body = "<input name=\"csrf\" value=\"CSRF-77\">";
            format!(
                "HTTP/1.1 200 OK\r\nX-Token: HDR-42\r\nSet-Cookie: sid=CK-9; Path=/\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        } else {
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()
        }
    });
    let sc = scenario_file(
        r#"
mode = "session"
cookies = false
[[step]]
name = "login"
path = "/login"
extract = [
  { name = "tok", header = "x-token" },
  { name = "sid", cookie = "sid" },
  { name = "csrf", regex = 'value="([A-Z]+-[0-9]+)"' },
]
[[step]]
name = "use"
path = "/use?t={{tok}}&s={{sid}}"
headers = { X-Csrf = "{{csrf}}" }
"#,
    );
    let v = rj(&["--scenario", &sc, &srv.url(), "-c", "2", "-n", "8", "-q"]);
    assert_eq!(counter(&v, "completed"), 8);
    assert_eq!(n(request(&v, "login"), "failed_extractions"), 0);
    let reqs = seen.lock().unwrap().clone();
    let uses: Vec<&String> = reqs
        .iter()
        .map(|(h, _)| h)
        .filter(|h| h.starts_with("GET /use"))
        .collect();
    assert_eq!(uses.len(), 4, "{reqs:?}");
    for h in uses {
        assert!(h.starts_with("GET /use?t=HDR-42&s=CK-9 "), "{h}");
        let csrf = h
            .lines()
            .find_map(|l| l.strip_prefix("X-Csrf: ").or(l.strip_prefix("x-csrf: ")))
            .unwrap_or_else(|| panic!("no X-Csrf in {h}"));
        assert_eq!(csrf.trim(), "CSRF-77");
        // cookies = false: the extracted value travels, not a jar's cookie.
        assert!(!h.to_ascii_lowercase().contains("\ncookie:"), "{h}");
    }
}

/// Failing header-equals, body-regex and latency-under checks are counted
/// per step, the run goes on to the end and exits 0.
#[test]
fn header_regex_and_latency_checks_fail_per_step_and_the_run_goes_on() {
    let srv = builtin();
    let sc = scenario_file(
        r#"
[[request]]
name = "hdr"
path = "/?header=X-Env:staging"
check = { header_equals = { X-Env = "production" } }
[[request]]
name = "body"
path = "/?size=26"
check = { body_regex = '^abc.*xyz$', status = 200 }
[[request]]
name = "nobody"
path = "/?size=26"
check = { body_regex = '[0-9]' }
[[request]]
name = "slow"
path = "/?delay=60ms"
check = { latency_under = "20ms" }
[[request]]
name = "good"
path = "/?header=X-Env:production"
check = { header_equals = { x-env = "production" }, latency_under = "30s" }
"#,
    );
    let out = redline(&[
        "run",
        "--scenario",
        &sc,
        &url(&srv),
        "-c",
        "1",
        "-n",
        "10",
        "-o",
        "json",
        "-q",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(counter(&v, "completed"), 10);
    assert_eq!(stats(&srv).requests, 10);
    for (name, failed) in [
        ("hdr", 2),
        ("body", 0),
        ("nobody", 2),
        ("slow", 2),
        ("good", 0),
    ] {
        let r = request(&v, name);
        assert_eq!(n(r, "completed"), 2, "{r}");
        assert_eq!(n(r, "failed_checks"), failed, "{name}: {r}");
        assert_eq!(n(r, "errors"), 0, "{r}");
    }
    let checks = request(&v, "body")["checks"].as_array().unwrap().clone();
    assert_eq!(checks.len(), 2, "{checks:?}");
    assert!(checks.iter().all(|c| c["passed"] == 2 && c["failed"] == 0));
}

/// A request given by a full `url` goes to that host and path, not the base.
#[test]
fn a_request_by_full_url_goes_to_its_own_host() {
    let base = builtin();
    let (other, seen) =
        routed_server(|_, _| b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec());
    let sc = scenario_file(&format!(
            "[[request]]\nname = \"local\"\npath = \"/\"\n[[request]]\nname = \"remote\"\nurl = \"{}/api/v1?q=1\"\n",
            other.url().trim_end_matches('/')
        ));
    let v = rj(&["--scenario", &sc, &url(&base), "-c", "1", "-n", "6", "-q"]);
    assert_eq!(counter(&v, "completed"), 6);
    assert_eq!(stats(&base).requests, 3);
    let reqs = seen.lock().unwrap().clone();
    assert_eq!(reqs.len(), 3, "{reqs:?}");
    let host = other
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    for (h, _) in &reqs {
        assert!(h.starts_with("GET /api/v1?q=1 HTTP/1.1\r\n"), "{h}");
        assert!(h.contains(&format!("\r\nHost: {host}\r\n")), "{h}");
    }
    assert_eq!(n(request(&v, "remote"), "completed"), 3);
}

/// A per-request `timeout` applies to that request only.
#[test]
fn per_request_timeout_counts_for_that_request_only() {
    let srv = builtin();
    let sc = scenario_file("timeout = \"10s\"\n[[request]]\nname = \"hasty\"\npath = \"/?delay=300ms\"\ntimeout = \"100ms\"\n[[request]]\nname = \"patient\"\npath = \"/?delay=300ms\"\n");
    let v = rj(&["--scenario", &sc, &url(&srv), "-c", "1", "-n", "4", "-q"]);
    let hasty = request(&v, "hasty");
    let patient = request(&v, "patient");
    assert_eq!(n(hasty, "errors"), 2, "{hasty}");
    assert_eq!(n(hasty, "completed"), 0, "{hasty}");
    assert_eq!(n(patient, "errors"), 0, "{patient}");
    assert_eq!(n(patient, "completed"), 2, "{patient}");
    assert_eq!(error_count(&v, "timeout"), 2, "{}", v["errors"]);
}

// ------------------------------------------------ open-loop sessions (journeys)

/// nginx serving three small pages, speaking HTTP/2 (h2c by prior
/// knowledge) when `h2`; None (skip, or a failure under CI) when nginx is
/// not installed.
fn nginx_pages_h2(tag: &str, h2: bool) -> Option<common::nginx::Nginx> {
    let files = [
        ("a.html", b"page a".to_vec()),
        ("b.html", b"page b".to_vec()),
        ("c.html", b"page c".to_vec()),
    ];
    common::nginx::start_nginx(&common::nginx::NginxSite {
        tag,
        files: &files,
        tls: None,
        h2,
        http_extra: "",
        types: "",
    })
}

/// A three-step session (a, b, c) with `think` after each step; `check_b`
/// is added to step b.
fn journey_scenario(think: &str, check_b: &str) -> PathBuf {
    let text = format!(
        "mode = \"session\"\nthink = \"{think}\"\n\
         [[step]]\nname = \"a\"\npath = \"/a.html\"\n\
         [[step]]\nname = \"b\"\npath = \"/b.html\"\n{check_b}\n\
         [[step]]\nname = \"c\"\npath = \"/c.html\"\n"
    );
    dir_with(&[("s.toml", &text)]).join("s.toml")
}

/// nginx serving the three pages (h2c by prior knowledge when `h2`) and the
/// journey scenario ([`journey_scenario`]): (nginx, the scenario's path, the
/// base URL); None (skip, or a failure under CI) when nginx is not installed.
fn journey_setup(
    tag: &str,
    h2: bool,
    think: &str,
    check_b: &str,
) -> Option<(common::nginx::Nginx, String, String)> {
    let ng = nginx_pages_h2(tag, h2)?;
    let sc = journey_scenario(think, check_b)
        .to_str()
        .expect("a UTF-8 path")
        .to_string();
    let url = format!("http://127.0.0.1:{}", ng.port);
    Some((ng, sc, url))
}

/// `--scenario SC`, then `args`, then the URL: a journey run's arguments.
fn journey_args<'a>(sc: &'a str, args: &[&'a str], url: &'a str) -> Vec<&'a str> {
    let mut all = vec!["--scenario", sc];
    all.extend_from_slice(args);
    all.push(url);
    all
}

/// The request ledger adds up over all steps: every scheduled request ended
/// once (completed, failed, not sent or in flight at the end).
fn assert_ledger_adds_up(v: &serde_json::Value) {
    assert_eq!(
        counter(v, "scheduled"),
        counter(v, "completed")
            + counter(v, "failed")
            + counter(v, "not_sent")
            + counter(v, "in_flight_at_end"),
        "{}",
        v["counters"]
    );
}

fn journeys(v: &serde_json::Value) -> &serde_json::Value {
    let j = &v["journeys"];
    assert!(j.is_object(), "no journeys in the record: {v}");
    j
}

/// Every journey is counted once: arrived = started + not started, started =
/// completed + abandoned + in flight at the end, abandoned = its three causes.
fn assert_journeys_add_up(j: &serde_json::Value) {
    assert_eq!(
        n(j, "arrived"),
        n(j, "started") + n(j, "not_started"),
        "{j}"
    );
    assert_eq!(
        n(j, "started"),
        n(j, "completed") + n(j, "abandoned") + n(j, "in_flight_at_end"),
        "{j}"
    );
    assert_eq!(
        n(j, "abandoned"),
        n(j, "abandoned_check") + n(j, "abandoned_error") + n(j, "abandoned_stop"),
        "{j}"
    );
}

#[test]
fn rate_with_a_session_starts_that_many_journeys_per_second_against_nginx() {
    let Some((_ng, sc, url)) = journey_setup("journeys", false, "20ms", "") else {
        return;
    };
    let v = rj(&journey_args(
        &sc,
        &["--rate", "40", "-d", "2s", "-c", "200"],
        &url,
    ));
    assert_run_schema(&v);
    let j = journeys(&v);
    // A constant schedule: 40 arrivals a second for 2 s.
    assert_eq!(n(j, "arrived"), 80, "{j}");
    assert_eq!(n(j, "not_started"), 0, "{j}");
    assert_eq!(n(j, "abandoned_check") + n(j, "abandoned_error"), 0, "{j}");
    assert_journeys_add_up(j);
    // Only the last arrivals can be cut short by the end of the run.
    assert!(n(j, "completed") >= 70, "{j}");
    // Each journey walks the steps once, in order: a new user every time.
    let (a, b, c) = (request(&v, "a"), request(&v, "b"), request(&v, "c"));
    assert_eq!(n(a, "sent"), n(j, "started"), "{a}");
    assert!(n(a, "sent") >= n(b, "sent") && n(b, "sent") >= n(c, "sent"));
    assert_eq!(n(c, "completed"), n(j, "completed"), "{c}");
    // The request ledger still adds up over all steps.
    assert_ledger_adds_up(&v);
    assert_eq!(
        counter(&v, "completed"),
        n(a, "completed") + n(b, "completed") + n(c, "completed")
    );
    // The text report says it too.
    let mut args = vec!["run"];
    args.extend(journey_args(&sc, &["--rate", "40", "-d", "1s"], &url));
    let out = common::redline(&args);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Journeys:"), "{text}");
    assert!(text.contains("40 arrived"), "{text}");
}

#[test]
fn a_failed_check_abandons_the_journey_and_its_later_steps_are_not_sent() {
    // nginx answers 200: step b's check fails every time.
    let check = "check = { status = [201] }";
    let Some((_ng, sc, url)) = journey_setup("journeys-check", false, "0s", check) else {
        return;
    };
    let v = rj(&journey_args(&sc, &["--rate", "50", "-d", "1s"], &url));
    let j = journeys(&v);
    assert_journeys_add_up(j);
    assert_eq!(n(j, "completed"), 0, "{j}");
    let b = request(&v, "b");
    assert_eq!(n(j, "abandoned_check"), n(b, "failed_checks"), "{j} {b}");
    assert!(n(j, "abandoned_check") >= 40, "{j}");
    assert_eq!(n(request(&v, "c"), "sent"), 0);
}

#[test]
fn journeys_beyond_the_connection_cap_wait_and_are_counted_when_never_started() {
    // Each journey thinks 0.3 s twice: two connections carry at most ~3
    // journeys a second, 50 arrive each second.
    let Some((_ng, sc, url)) = journey_setup("journeys-cap", false, "300ms", "") else {
        return;
    };
    let v = rj(&journey_args(
        &sc,
        &["--rate", "50", "-d", "2s", "-c", "2"],
        &url,
    ));
    let j = journeys(&v);
    assert_journeys_add_up(j);
    assert_eq!(n(j, "arrived"), 100, "{j}");
    assert!(n(j, "not_started") >= 50, "{j}");
    assert!(counter(&v, "waited_for_connection") >= 50);
    assert!(counter(&v, "peak_connections") <= 2);
}

/// The latencies of request `name` at or above `ms`.
fn slow(v: &serde_json::Value, name: &str, ms: u64) -> u64 {
    let h: redline_stats::Hist =
        serde_json::from_value(request(v, name)["latency"].clone()).unwrap();
    h.inner()
        .iter_recorded()
        .filter(|x| x.value_iterated_to() >= ms * 1000)
        .map(|x| x.count_at_value())
        .sum()
}

/// Runs redline with `args` while nginx (one process) is stopped for 1 s,
/// starting 1.2 s after the run.
fn run_with_a_stall(ng: &common::nginx::Nginx, args: &[&str]) -> serde_json::Value {
    let pid = ng.pid().to_string();
    let stall = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1200));
        let stop = std::process::Command::new("kill")
            .args(["-STOP", &pid])
            .status();
        std::thread::sleep(Duration::from_secs(1));
        let cont = std::process::Command::new("kill")
            .args(["-CONT", &pid])
            .status();
        assert!(stop.unwrap().success() && cont.unwrap().success());
    });
    let v = rj(args);
    stall.join().unwrap();
    v
}

#[test]
fn a_server_stall_shows_in_the_later_steps_of_open_loop_journeys_not_closed_loop() {
    let Some((ng, sc, url)) = journey_setup("journeys-stall", false, "100ms", "") else {
        return;
    };
    let open = run_with_a_stall(
        &ng,
        &journey_args(&sc, &["--rate", "20", "-d", "4s", "-c", "100"], &url),
    );
    let closed = run_with_a_stall(&ng, &journey_args(&sc, &["-c", "4", "-d", "4s"], &url));
    assert_journeys_add_up(journeys(&open));
    assert_eq!(n(journeys(&open), "abandoned_error"), 0);
    // Open loop: every journey the stall held (~20 a second over the 1 s
    // stall and the 0.2 s of a journey) has its last step timed from the
    // journey's intended start plus its think times, so the stall shows in
    // step c. Closed loop: only a step c in flight during the stall (at most
    // one per connection) shows it; the next ones start after the stall.
    let (open_c, closed_c) = (slow(&open, "c", 400), slow(&closed, "c", 400));
    eprintln!(
        "step c at or above 400 ms: open loop {open_c} of {}, closed loop {closed_c} of {}",
        n(request(&open, "c"), "completed"),
        n(request(&closed, "c"), "completed")
    );
    assert!(open_c >= 12, "open loop: {open_c} slow step c");
    assert!(closed_c <= 4, "closed loop: {closed_c} slow step c");
    assert!(open_c > closed_c);
}
