//! End-to-end tests of `redline run` against servers on 127.0.0.1:0.

mod common;

use common::*;
use std::io::Write;
use std::time::Duration;

#[test]
fn exact_request_count_and_server_agrees() {
    let srv = builtin();
    let url = format!("http://{}/?size=440", srv.local_addr());
    let v = run_json(&["-n", "1000", "-c", "10", &url]);
    assert_eq!(counter(&v, "completed"), 1000);
    assert_eq!(counter(&v, "failed"), 0);
    assert_eq!(counter(&v, "scheduled"), 1000);
    assert_eq!(v["status_codes"]["200"], 1000);
    assert_eq!(v["server"]["document_length"], 440);
    assert!(v["server"]["software"]
        .as_str()
        .unwrap()
        .starts_with("redline-serve"));
    let st = srv.stats();
    assert_eq!(st.requests, 1000, "server saw {st:?}");
    // Keep-alive: about one connection per client connection.
    assert_eq!(st.connections, 10, "server saw {st:?}");
    assert_eq!(counter(&v, "connections_opened"), 10);
}

#[test]
fn no_keepalive_opens_one_connection_per_request() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let v = run_json(&["-n", "200", "-c", "4", "--no-keepalive", &url]);
    assert_eq!(counter(&v, "completed"), 200);
    assert_eq!(srv.stats().connections, 200);
    assert_eq!(counter(&v, "connections_opened"), 200);
}

#[test]
fn connection_refused_is_counted_and_run_ends() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    let v = run_json(&["-n", "50", "-c", "5", &url]);
    assert_eq!(counter(&v, "failed"), 50);
    assert_eq!(error_count(&v, "refused"), 50);
    assert_eq!(counter(&v, "completed"), 0);
    let (out, took) = redline_with_limit(
        &["run", "-q", "-d", "1s", "-c", "2", &url],
        Duration::from_secs(10),
    );
    assert!(took < Duration::from_secs(5));
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        t.contains("refused") && t.contains("connection refused ("),
        "{t}"
    );
}

#[test]
fn close_mid_body_is_counted_as_closed() {
    let srv = ScriptServer::start(|mut s| {
        if read_head(&mut s).is_some() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..");
        }
    });
    let v = run_json(&["-n", "20", "-c", "2", &srv.url()]);
    assert_eq!(error_count(&v, "closed"), 20, "{}", v["errors"]);
    assert_eq!(counter(&v, "completed"), 0);
}

#[test]
fn malformed_status_line_is_counted_with_its_sub_kind() {
    let srv = ScriptServer::start(|mut s| {
        if read_head(&mut s).is_some() {
            let _ = s.write_all(b"HTTP/1.1 2x0 Bad\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let v = run_json(&["-n", "10", "-c", "2", &srv.url()]);
    assert_eq!(error_count(&v, "malformed"), 10, "{}", v["errors"]);
    assert_eq!(v["errors"][0]["sub"], "status_line");
}

#[test]
fn mixed_errors_each_under_their_kind_in_one_run() {
    // Alternates: good response, close mid-body, malformed.
    let n = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let srv = ScriptServer::start(move |mut s| {
        if read_head(&mut s).is_none() {
            return;
        }
        let k = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let resp: &[u8] = match k % 3 {
            0 => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
            1 => b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab",
            _ => b"garbage\r\n\r\n",
        };
        let _ = s.write_all(resp);
    });
    let v = run_json(&["-n", "30", "-c", "1", &srv.url()]);
    assert_eq!(counter(&v, "completed"), 10);
    assert_eq!(error_count(&v, "closed"), 10);
    assert_eq!(error_count(&v, "malformed"), 10);
    assert_eq!(counter(&v, "failed"), 20);
}

#[test]
fn non_2xx_are_counted() {
    let srv = builtin();
    let url = format!("http://{}/?status=404", srv.local_addr());
    let v = run_json(&["-n", "100", "-c", "4", &url]);
    assert_eq!(counter(&v, "non_2xx"), 100);
    assert_eq!(v["status_codes"]["404"], 100);
}

#[test]
fn chunked_and_close_delimited_bodies_are_counted() {
    let srv = builtin();
    let url = format!("http://{}/?size=5000&chunked=1", srv.local_addr());
    let v = run_json(&["-n", "100", "-c", "4", &url]);
    assert_eq!(counter(&v, "completed"), 100);
    assert_eq!(counter(&v, "body_bytes"), 500_000);
    let srv10 = ScriptServer::start(|mut s| {
        if read_head(&mut s).is_some() {
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\nuntil close");
        }
    });
    let v = run_json(&["-n", "10", "-c", "2", &srv10.url()]);
    assert_eq!(counter(&v, "completed"), 10);
    assert_eq!(counter(&v, "body_bytes"), 110);
}

#[test]
fn post_body_and_headers_reach_the_server() {
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let tx = std::sync::Mutex::new(tx);
    let srv = ScriptServer::start(move |mut s| {
        use std::io::Read;
        let mut buf = vec![0u8; 4096];
        let mut got = Vec::new();
        while !String::from_utf8_lossy(&got).contains("hello=world") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            if got.len() > 100_000 {
                return;
            }
        }
        let _ = tx.lock().unwrap().send(got);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    });
    let v = run_json(&[
        "-n",
        "1",
        "-c",
        "1",
        "-m",
        "PUT",
        "-b",
        "hello=world",
        "-T",
        "application/x-www-form-urlencoded",
        "-H",
        "X-Test: yes",
        &srv.url(),
    ]);
    assert_eq!(counter(&v, "completed"), 1);
    let req = String::from_utf8(rx.recv_timeout(Duration::from_secs(5)).unwrap()).unwrap();
    assert!(req.starts_with("PUT / HTTP/1.1\r\n"), "{req}");
    assert!(req.contains("Content-Length: 11\r\n"));
    assert!(req.contains("Content-Type: application/x-www-form-urlencoded\r\n"));
    assert!(req.contains("X-Test: yes\r\n"));
    assert!(req.ends_with("\r\n\r\nhello=world"));
}

#[test]
fn secrets_never_appear_in_output() {
    let srv = builtin();
    let url = format!("http://alice:hunter2@{}/", srv.local_addr());
    for fmt in ["text", "json"] {
        let out = redline(&[
            "run",
            "-o",
            fmt,
            "-q",
            "-n",
            "5",
            "-c",
            "1",
            "-H",
            "Cookie: session=topsecret",
            "-H",
            "Authorization: Bearer tok3n",
            "-a",
            "bob:pa55word",
            &url,
        ]);
        assert!(out.status.success());
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for secret in [
            "hunter2",
            "topsecret",
            "tok3n",
            "pa55word",
            "Ym9iOnBhNTV3b3Jk",
        ] {
            assert!(!all.contains(secret), "{fmt} output leaks {secret}: {all}");
        }
        if fmt == "json" {
            assert!(all.contains("[redacted]"));
        }
    }
}

#[test]
fn bad_input_is_a_one_line_usage_error() {
    let cases: &[&[&str]] = &[
        &["run", "ftp://127.0.0.1/"],
        &["run", "http://"],
        &["run", "-c", "abc", "http://127.0.0.1:1/"],
        &["run", "-d", "5 parsecs", "http://127.0.0.1:1/"],
        &["run", "-H", "NoColon", "http://127.0.0.1:1/"],
        &[
            "run",
            "--body-file",
            "/nonexistent/file",
            "http://127.0.0.1:1/",
        ],
        &["run", "-r", "-5", "http://127.0.0.1:1/"],
        &["run", "-n", "0", "http://127.0.0.1:1/"],
        &["run", "--bogus-flag", "http://127.0.0.1:1/"],
        &["run", "http://no-such-host.invalid/"],
        &[
            "run",
            "--arrival",
            "weird",
            "-r",
            "5",
            "http://127.0.0.1:1/",
        ],
        &["run", "http://u:s3cr3t@[bad/"],
    ];
    for args in cases {
        let out = redline(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.contains("error"), "{args:?}: {err}");
        assert!(!err.contains("s3cr3t"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn shorthand_url_runs() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let out = redline(&["-n", "10", "-c", "1", &url]);
    assert!(out.status.success());
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("Requests/sec:"), "{t}");
    assert!(t.contains("10 completed"), "{t}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("req/s now"),
        "no progress line when stderr is not a terminal: {err}"
    );
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_early_with_an_interrupted_report() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let start = std::time::Instant::now();
    let child = std::process::Command::new(bin())
        .args([
            "run", "-o", "json", "-q", "-r", "500", "-d", "30s", "-c", "4", &url,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: sending SIGINT to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = wait_limit(child, Duration::from_secs(10));
    assert!(start.elapsed() < Duration::from_secs(6));
    assert_eq!(out.status.code(), Some(130));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["interrupted"], true);
    assert!(counter(&v, "completed") > 0);
}

#[test]
fn json_output_validates_against_the_committed_schema() {
    let schema_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/run-record.schema.json"
    );
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let srv = builtin();
    let base = format!("http://{}/", srv.local_addr());
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/", l.local_addr().unwrap())
    };
    let malformed = ScriptServer::start(|mut s| {
        if read_head(&mut s).is_some() {
            let _ = std::io::Write::write_all(&mut s, b"HTTP/1.1 99x\r\n\r\n");
        }
    });
    let runs: Vec<Vec<String>> = vec![
        vec![
            "-n".into(),
            "200".into(),
            "-c".into(),
            "4".into(),
            format!("{base}?status=503"),
        ],
        vec![
            "-r".into(),
            "100".into(),
            "-d".into(),
            "1s".into(),
            "--arrival".into(),
            "poisson".into(),
            base.clone(),
        ],
        vec!["-n".into(), "5".into(), "-c".into(), "1".into(), refused],
        vec![
            "-n".into(),
            "5".into(),
            "-c".into(),
            "1".into(),
            malformed.url(),
        ],
    ];
    for r in runs {
        let a: Vec<&str> = r.iter().map(|s| s.as_str()).collect();
        let v = run_json(&a);
        let errors: Vec<String> = validator
            .iter_errors(&v)
            .map(|e| format!("{e} at {}", e.instance_path))
            .collect();
        assert!(errors.is_empty(), "{r:?}: {errors:#?}");
    }
    // And the schema is not vacuous: a broken record fails.
    let mut v = run_json(&["-n", "1", "-c", "1", &base]);
    v["counters"]["completed"] = serde_json::json!(-1);
    assert!(!validator.is_valid(&v));
}

#[test]
fn csv_output_is_the_per_second_series() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let out = redline(&[
        "run",
        "-q",
        "-o",
        "csv",
        "-r",
        "100",
        "-d",
        "2s",
        "--no-save",
        &url,
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("t_s,requests,errors,bytes,p50_us"),
        "{header}"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.len() >= 2, "{text}");
    let cols = header.split(',').count();
    assert!(rows.iter().all(|r| r.len() == cols), "{text}");
    let total: u64 = rows.iter().map(|r| r[1].parse::<u64>().unwrap()).sum();
    assert!(
        (198..=202).contains(&total),
        "{total} requests in the series"
    );
}

#[test]
fn thresholds_print_pass_fail_and_set_the_exit_code() {
    let srv = builtin();
    let url = format!("http://{}/?status=404", srv.local_addr());
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-n",
        "50",
        "-c",
        "2",
        "--threshold",
        "p99<10s",
        "--threshold",
        "errors<1%",
        &url,
    ]);
    assert_eq!(out.status.code(), Some(4));
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("PASS  p99<10s"), "{t}");
    assert!(t.contains("FAIL  errors<1%  (measured 100.000%)"), "{t}");
    let ok = format!("http://{}/", srv.local_addr());
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "-n",
        "50",
        "-c",
        "2",
        "--threshold",
        "rps>0",
        "--threshold",
        "errors<=0%",
        &ok,
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("threshold PASS  rps>0"));
    let bad = redline(&["run", "--threshold", "p99<soon", &ok]);
    assert_eq!(bad.status.code(), Some(2));
}
