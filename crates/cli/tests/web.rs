//! `redline page` and `redline audit` as a user runs them: against the
//! built-in target and scripted servers on 127.0.0.1:0.

mod common;

use common::{redline, ScriptServer};
use std::io::{Read, Write};
use std::time::Duration;

/// A keep-alive server with a page embedding one stylesheet and one image,
/// no caching headers, no compression, and a header-dumping path.
fn site() -> ScriptServer {
    ScriptServer::start(|mut s| {
        for _ in 0..100 {
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                match s.read(&mut b) {
                    Ok(1) => head.push(b[0]),
                    _ => return,
                }
            }
            let h = String::from_utf8_lossy(&head).to_string();
            let path = h.split_whitespace().nth(1).unwrap_or("/").to_string();
            let (ct, body): (&str, Vec<u8>) = match path.as_str() {
                "/" => (
                    "text/html",
                    format!(
                        "<html><link rel=stylesheet href=s.css><img src=i.gif><p>{}</p></html>",
                        "lorem ipsum ".repeat(400)
                    )
                    .into_bytes(),
                ),
                "/s.css" => ("text/css", ".a{color:red}\n".repeat(300).into_bytes()),
                "/i.gif" => ("image/gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00".to_vec()),
                _ => ("text/plain", b"nope".to_vec()),
            };
            let status = if ct == "text/plain" {
                "404 Not Found"
            } else {
                "200 OK"
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            if s.write_all(resp.as_bytes())
                .and_then(|_| s.write_all(&body))
                .is_err()
            {
                return;
            }
        }
    })
}

#[test]
fn page_prints_getting_lines_a_waterfall_and_the_summary() {
    let srv = site();
    let out = redline(&["page", &srv.url()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("Getting {}s.css...", srv.url())),
        "{text}"
    );
    // The page, its stylesheet and image, and /favicon.ico (no icon declared).
    assert!(text.contains("First view: 4 requests"), "{text}");
    assert!(text.contains("Summary:"), "{text}");
    assert!(text.contains("cached view"), "{text}");
}

#[test]
fn page_json_has_three_views() {
    let srv = site();
    let out = redline(&["page", "-o", "json", "-q", "-n", "2", &srv.url()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["format"], "redline.page");
    assert_eq!(v["runs"], 2);
    assert_eq!(v["summary"].as_array().unwrap().len(), 3);
    // The page, its stylesheet and image, and /favicon.ico (no icon declared).
    assert_eq!(v["summary"][0]["requests"], 4);
    assert_eq!(v["views"][0]["entries"].as_array().unwrap().len(), 4);
}

#[test]
fn audit_json_and_fail_on() {
    let srv = site();
    let out = redline(&["audit", "-o", "json", "-q", &srv.url()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["format"], "redline.audit");
    let check = |id: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(check("compression")["severity"], "warning");
    assert_eq!(check("cache-static")["severity"], "error");
    assert_eq!(check("validators")["severity"], "warning");
    assert!(check("cache-static")["fix"]["nginx"]
        .as_str()
        .unwrap()
        .contains("expires"));
    // --fail-on error: exit 3; text output still printed.
    let out = redline(&["audit", "-q", "--fail-on", "error", &srv.url()]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("fix (lighttpd):"));
}

#[test]
fn audit_of_the_builtin_target_passes_fail_on_error() {
    let srv = common::builtin();
    let url = format!("http://{}/?size=100", srv.local_addr());
    let out = redline(&["audit", "-q", "--fail-on", "error", &url]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        vec!["page", "ftp://127.0.0.1/"],
        vec!["page", "http://"],
        vec![
            "audit",
            "--cacert",
            "/nonexistent/ca.pem",
            "https://127.0.0.1:9/",
        ],
        vec!["page", "-H", "bad header", "http://127.0.0.1:9/"],
        vec!["audit", "--fail-on", "sometimes", "http://127.0.0.1:9/"],
        vec!["page", "-n", "0", "http://127.0.0.1:9/"],
        vec!["page", "http://no-such-host.invalid/"],
    ] {
        let out = redline(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn refused_is_a_runtime_error_and_secrets_are_not_printed() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let out = redline(&[
        "page",
        "-H",
        "Cookie: sessionsecret",
        &format!("http://user:hunter2@127.0.0.1:{port}/"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !all.contains("hunter2") && !all.contains("sessionsecret"),
        "{all}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.starts_with("redline: error"))
            .count(),
        1
    );
    let _ = Duration::from_secs(1);
}

#[test]
fn page_credentials_stay_on_the_page_origin_across_a_redirect() {
    // Two ports of 127.0.0.1: the same site, two origins.
    let (b, b_seen) = common::routed_server(|_, _| {
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\n\r\n<html></html>"
            .to_vec()
    });
    let to = format!("http://127.0.0.1:{}/land", b.addr.port());
    let (a, a_seen) = common::routed_server(move |_, _| {
        format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n").into_bytes()
    });
    let url = format!("http://user:pg-pa55@127.0.0.1:{}/", a.addr.port());
    let out = redline(&[
        "page",
        "-H",
        "Cookie: k=pg-c00kie",
        "-H",
        "X-Trace: 1",
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains("pg-pa55") && !text.contains("pg-c00kie"),
        "{text}"
    );
    let a_heads: Vec<String> = a_seen.lock().unwrap().iter().map(|r| r.0.clone()).collect();
    let b_heads: Vec<String> = b_seen.lock().unwrap().iter().map(|r| r.0.clone()).collect();
    assert!(
        !a_heads.is_empty() && !b_heads.is_empty(),
        "{a_heads:?} {b_heads:?}"
    );
    let has = |h: &str, name: &str| {
        h.lines()
            .any(|l| l.to_ascii_lowercase().starts_with(&format!("{name}:")))
    };
    assert!(a_heads
        .iter()
        .all(|h| has(h, "authorization") && has(h, "cookie")));
    for h in &b_heads {
        assert!(!has(h, "authorization") && !has(h, "cookie"), "{h}");
        assert!(has(h, "x-trace"), "same site: other headers still go: {h}");
    }
}
