//! `redline page`/`audit` discovery flags as a user runs them: `--viewport`,
//! `--mobile`, `--dpr` (malformed: one line, exit 2), third-party origins in
//! text and JSON, link-local and metadata addresses never contacted, and
//! `--same-origin`. Servers on 127.0.0.1:0 and [::1]:0 record what they
//! were asked. (What is discovered is compared with Chromium in
//! crates/web/tests/browser.rs.)

mod common;

use common::{redline, ScriptServer};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

/// A server answering `pages` (path -> (type, body)), 404 otherwise, and
/// recording every path it was asked for.
fn server_on(
    listener: std::net::TcpListener,
    pages: Vec<(&'static str, &'static str, String)>,
) -> (ScriptServer, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l2 = log.clone();
    let srv = ScriptServer::start_on(listener, move |mut s| {
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
            l2.lock().unwrap().push(path.clone());
            let (status, ct, body) = match pages.iter().find(|(p, _, _)| *p == path) {
                Some((_, ct, body)) => ("200 OK", *ct, body.clone()),
                None => ("404 Not Found", "text/plain", "nope".to_string()),
            };
            let resp = if ct == "redirect" {
                format!("HTTP/1.1 302 Found\r\nLocation: {body}\r\nContent-Length: 0\r\n\r\n")
            } else {
                format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            };
            if s.write_all(resp.as_bytes()).is_err() {
                return;
            }
        }
    });
    (srv, log)
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

#[test]
fn malformed_viewport_and_dpr_are_one_line_and_exit_2() {
    for args in [
        vec!["page", "--viewport", "1350", "http://127.0.0.1:9/"],
        vec!["page", "--viewport", "0x940", "http://127.0.0.1:9/"],
        vec!["page", "--viewport", "widexhigh", "http://127.0.0.1:9/"],
        vec!["audit", "--viewport", "-5x10", "http://127.0.0.1:9/"],
        vec!["page", "--dpr", "0", "http://127.0.0.1:9/"],
        vec!["page", "--dpr", "-1", "http://127.0.0.1:9/"],
        vec!["audit", "--mobile", "--dpr", "lots", "http://127.0.0.1:9/"],
        vec!["page", "--dpr", "NaN", "http://127.0.0.1:9/"],
    ] {
        let out = redline(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("--viewport") || err.contains("--dpr"), "{err}");
    }
}

#[test]
fn viewport_flags_choose_the_srcset_candidate() {
    let page = r#"<!doctype html><meta name="viewport" content="width=device-width">
<link rel="icon" href="/i.png"><img srcset="/a-1x.png 1x, /a-2x.png 2x, /a-3x.png 3x" alt="">"#;
    let (srv, log) = server_on(
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        vec![("/", "text/html", page.to_string())],
    );
    let url = format!("http://{}/", srv.addr);
    let cases: [(&[&str], &str, u64, f64); 4] = [
        (&[], "/a-1x.png", 1350, 1.0),
        (&["--dpr", "2"], "/a-2x.png", 1350, 2.0),
        (&["--mobile"], "/a-2x.png", 412, 1.75),
        (
            &["--mobile", "--dpr", "3", "--viewport", "360x640"],
            "/a-3x.png",
            360,
            3.0,
        ),
    ];
    for (flags, want, width, dpr) in cases {
        log.lock().unwrap().clear();
        let mut args = vec!["page", "-q", "-o", "json"];
        args.extend_from_slice(flags);
        args.push(&url);
        let v = json(&redline(&args));
        assert_eq!(v["viewport"]["width"], width, "{flags:?}");
        assert_eq!(v["viewport"]["dpr"].as_f64(), Some(dpr), "{flags:?}");
        let first: Vec<String> = v["views"][0]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e["url"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let want_name = want.trim_start_matches('/');
        assert!(first.iter().any(|u| u == want_name), "{flags:?}: {first:?}");
        let images = first.iter().filter(|u| u.starts_with("a-")).count();
        assert_eq!(
            images, 1,
            "{flags:?}: one candidate, not several: {first:?}"
        );
        assert!(log.lock().unwrap().iter().any(|p| p == want), "{flags:?}");
    }
}

#[test]
fn scope_third_parties_link_local_and_same_origin() {
    // A third-party origin on [::1] (another site than 127.0.0.1), when IPv6 loopback exists.
    let v6 = std::net::TcpListener::bind("[::1]:0").ok();
    let (third, third_log) = match v6 {
        Some(l) => {
            let (s, log) = server_on(l, vec![("/lib.js", "text/javascript", "var x = 1;".into())]);
            (Some(s), log)
        }
        None => {
            eprintln!("NOTE: no IPv6 loopback; the third-party part is skipped");
            (None, Arc::new(Mutex::new(Vec::new())))
        }
    };
    let third_script = third
        .as_ref()
        .map(|s| {
            format!(
                r#"<script src="http://[::1]:{}/lib.js"></script>"#,
                s.addr.port()
            )
        })
        .unwrap_or_default();
    let page = format!(
        r#"<!doctype html><link rel="icon" href="/i.png">
<img src="http://169.254.169.254/latest/meta-data/iam.png" alt="">
<script src="http://[fe80::1]/x.js"></script>
<link rel="stylesheet" href="http://metadata.google.internal/computeMetadata/v1/s.css">
<img src="/own.png" alt=""><img src="/go" alt="">{third_script}"#
    );
    let (srv, _log) = server_on(
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        vec![
            ("/", "text/html", page),
            // A redirect into the metadata service is not followed either.
            (
                "/go",
                "redirect",
                "http://169.254.169.254/latest/meta-data/".into(),
            ),
        ],
    );
    let url = format!("http://{}/", srv.addr);

    let v = json(&redline(&["page", "-q", "-o", "json", &url]));
    let urls: Vec<&str> = v["views"][0]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["url"].as_str().unwrap())
        .collect();
    for bad in ["169.254", "fe80", "metadata.google"] {
        assert!(
            !urls.iter().any(|u| u.contains(bad)),
            "{bad} fetched: {urls:?}"
        );
    }
    let blocked: Vec<(&str, &str)> = v["views"][0]["discovery"]["blocked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["url"].as_str().unwrap(), b["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(blocked.len(), 4, "{blocked:?}");
    assert!(
        blocked
            .iter()
            .any(|(u, _)| u.ends_with("/latest/meta-data/")),
        "{blocked:?}"
    );
    assert!(
        blocked.iter().all(|(_, r)| *r == "link-local"),
        "{blocked:?}"
    );
    if let Some(t) = &third {
        let origin = format!("http://[::1]:{}", t.addr.port());
        assert_eq!(
            v["third_party"][0]["origin"],
            origin.as_str(),
            "{}",
            v["third_party"]
        );
        assert_eq!(v["third_party"][0]["requests"], 1);
        let asked = third_log.lock().unwrap().clone();
        assert!(
            !asked.is_empty() && asked.iter().all(|p| p == "/lib.js"),
            "{asked:?}"
        );
        // The text report and the audit name it too.
        let text = redline(&["page", "-q", &url]);
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(
            text.contains("Third-party origins") && text.contains(&origin),
            "{text}"
        );
        let a = json(&redline(&["audit", "-q", "-o", "json", &url]));
        assert_eq!(a["third_party"][0]["origin"], origin.as_str());

        // --same-origin: the third party is not asked, and says why.
        third_log.lock().unwrap().clear();
        let v = json(&redline(&[
            "page",
            "-q",
            "-o",
            "json",
            "--same-origin",
            &url,
        ]));
        assert!(
            third_log.lock().unwrap().is_empty(),
            "the third party was contacted"
        );
        assert_eq!(v["third_party"].as_array().unwrap().len(), 0);
        let reasons: Vec<&str> = v["views"][0]["discovery"]["blocked"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["reason"].as_str().unwrap())
            .collect();
        assert!(reasons.contains(&"not-same-origin"), "{reasons:?}");
    }
}
