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

/// A server that picks the image format by `Accept` (the common nginx
/// recipe: WebP where the browser takes it), keeps every request, and has no
/// favicon.
fn negotiating_site() -> (ScriptServer, redline_testkit::script::Requests) {
    redline_testkit::script::routed_server(|head, _| {
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let accept = head
            .lines()
            .find_map(|l| l.strip_prefix("Accept: "))
            .unwrap_or("");
        let (status, ct, body): (&str, &str, Vec<u8>) = match path.as_str() {
            "/" => (
                "200 OK",
                "text/html",
                b"<html><link rel=stylesheet href=s.css><script src=a.js></script><img src=p.jpg></html>".to_vec(),
            ),
            "/s.css" => ("200 OK", "text/css", b"p{color:red}".to_vec()),
            "/a.js" => ("200 OK", "text/javascript", b"var a=1".to_vec()),
            "/p.jpg" if accept.contains("image/webp") => {
                ("200 OK", "image/webp", b"RIFF\x00\x00\x00\x00WEBP".to_vec())
            }
            "/p.jpg" => ("200 OK", "image/jpeg", vec![0xff, 0xd8, 0xff, 0xd9]),
            _ => ("404 Not Found", "text/plain", b"no".to_vec()),
        };
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nCache-Control: max-age=600\r\nVary: Accept\r\n\r\n",
            body.len()
        )
        .into_bytes()
        .into_iter()
        .chain(body)
        .collect()
    })
}

/// The header `name` of a request head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn requests_carry_chromium_headers_per_destination() {
    let (srv, seen) = negotiating_site();
    let out = redline(&["page", "-o", "json", "-q", "--no-save", &srv.url()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let first = v["views"][0]["entries"].as_array().unwrap();
    let img = first
        .iter()
        .find(|e| e["url"].as_str().unwrap().ends_with("/p.jpg"))
        .unwrap();
    // The server negotiated as it does for a browser.
    assert_eq!(img["content_type"], "image/webp", "{img}");
    let seen = seen.lock().unwrap().clone();
    let head = |path: &str| {
        seen.iter()
            .find(|(h, _)| h.split_whitespace().nth(1) == Some(path))
            .map(|(h, _)| h.clone())
            .unwrap_or_else(|| panic!("{path} not requested"))
    };
    for (path, accept) in [
        ("/", "text/html,application/xhtml+xml,"),
        ("/s.css", "text/css,*/*;q=0.1"),
        ("/a.js", "*/*"),
        ("/p.jpg", "image/jxl,image/avif,image/webp,"),
        ("/favicon.ico", "image/jxl,image/avif,image/webp,"),
    ] {
        let h = head(path);
        assert!(header(&h, "accept").unwrap().starts_with(accept), "{h}");
        assert_eq!(
            header(&h, "accept-encoding"),
            Some("gzip, deflate, br, zstd"),
            "{h}"
        );
        let ua = header(&h, "user-agent").unwrap();
        assert!(
            ua.contains("(X11; Linux x86_64)") && ua.contains(" Chrome/"),
            "{ua}"
        );
    }
    // --mobile sends Chrome's Android User-Agent; --user-agent overrides it.
    for (flags, want) in [
        (vec!["--mobile"], "Mobile Safari/537.36"),
        (vec!["--mobile", "--user-agent", "probe/1.0"], "probe/1.0"),
    ] {
        let (srv, seen) = negotiating_site();
        let mut args = vec!["page", "-q", "--no-save"];
        args.extend(flags.iter().copied());
        let url = srv.url();
        args.push(&url);
        let out = redline(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty());
        for (h, _) in seen.iter() {
            let ua = header(h, "user-agent").unwrap();
            assert!(ua.ends_with(want), "{flags:?}: {ua}");
            if want.starts_with("Mobile") {
                assert!(ua.contains("Android"), "{ua}");
            }
        }
    }
    let bad = common::usage_error(&["page", "--user-agent", "a\nb", &srv.url()]);
    assert!(bad.contains("--user-agent"), "{bad}");
}

#[test]
fn the_favicon_comes_after_the_load_and_outside_the_grade() {
    let (srv, seen) = negotiating_site();
    let out = redline(&["page", "-o", "json", "-q", "--no-save", &srv.url()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let view = &v["views"][0];
    let entries = view["entries"].as_array().unwrap();
    let fav = entries
        .iter()
        .find(|e| e["url"].as_str().unwrap().ends_with("/favicon.ico"))
        .expect("the favicon was asked for");
    assert_eq!(fav["after_load"], true);
    assert_eq!(fav["status"], 404);
    // Asked for after every resource of the page had ended.
    let page_end = entries
        .iter()
        .filter(|e| e["after_load"] == false)
        .map(|e| e["end_ms"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(fav["start_ms"].as_f64().unwrap() >= page_end, "{view}");
    // Not the page's error, nor part of its time.
    assert_eq!(view["errors"], 0, "{view}");
    assert!(view["elapsed_ms"].as_f64().unwrap() <= page_end + 0.01);
    // Every view's time covers all its entries, cache hits included (the
    // cached view takes all four from the cache).
    for v in v["views"].as_array().unwrap() {
        let es: Vec<&serde_json::Value> = v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["after_load"] == false)
            .collect();
        let start = es
            .iter()
            .map(|e| e["start_ms"].as_f64().unwrap())
            .fold(f64::MAX, f64::min);
        let end = es
            .iter()
            .map(|e| e["end_ms"].as_f64().unwrap())
            .fold(0.0, f64::max);
        let elapsed = v["elapsed_ms"].as_f64().unwrap();
        assert!(
            (elapsed - (end - start)).abs() < 0.01,
            "{}: {elapsed} vs {}",
            v["view"],
            end - start
        );
    }
    assert_eq!(v["views"][2]["from_cache"], 4, "{}", v["views"][2]);
    // The last request on the wire, and not asked again after its 404
    // (reload and cached views).
    let seen = seen.lock().unwrap().clone();
    let paths: Vec<&str> = seen
        .iter()
        .map(|(h, _)| h.split_whitespace().nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        paths.iter().filter(|p| **p == "/favicon.ico").count(),
        1,
        "{paths:?}"
    );
    // The page's four requests, then the favicon.
    assert_eq!(
        paths.iter().position(|p| *p == "/favicon.ico"),
        Some(4),
        "{paths:?}"
    );
    // The audit lists it, but not as a broken resource of the page.
    let out = redline(&["audit", "-o", "json", "-q", &srv.url()]);
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let broken = a["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "broken")
        .unwrap();
    assert_eq!(broken["score"], 100, "{broken}");
    assert_ne!(broken["severity"], "error", "{broken}");
    assert!(
        broken["summary"].as_str().unwrap().starts_with("0 of 4"),
        "{broken}"
    );
    let favs: Vec<_> = broken["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f.to_string().contains("favicon"))
        .collect();
    assert_eq!(favs.len(), 1, "{broken}");
}

/// Reads `file` in headless Chromium emulating a phone (412×823 CSS px,
/// DPR 1.75, Lighthouse's Moto G Power) and returns what the page measures
/// of itself: the document's width, the elements sticking out past the
/// screen's right edge (outside a box that scrolls), and the smallest
/// waterfall label in CSS px as shown.
fn at_phone_width(
    devtools: &mut redline_testkit::chromium::DevTools,
    file: &std::path::Path,
) -> serde_json::Value {
    use serde_json::json;
    let (tid, sid) = devtools.new_tab();
    let s = Some(sid.as_str());
    devtools.call(
        s,
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 412, "height": 823, "deviceScaleFactor": 1.75, "mobile": true}),
    );
    devtools.call(s, "Page.enable", json!({}));
    devtools.call(
        s,
        "Page.navigate",
        json!({"url": format!("file://{}", file.display())}),
    );
    assert!(
        devtools.wait_event(&sid, "Page.loadEventFired", Duration::from_secs(30)),
        "{}: no load event",
        file.display()
    );
    const MEASURE: &str = r#"(function(){
      var vw = document.documentElement.clientWidth, out = [];
      function scrolls(el){ for (var p = el.parentElement; p; p = p.parentElement) {
        var o = getComputedStyle(p).overflowX; if (o == 'auto' || o == 'scroll') return true; } return false; }
      document.querySelectorAll('body *').forEach(function(el){
        var r = el.getBoundingClientRect();
        if (r.width > 0 && r.right > vw + 0.5 && !scrolls(el) && out.length < 20)
          out.push(el.tagName + ' ' + Math.round(r.right));
      });
      var min = 1e9, labels = 0;
      document.querySelectorAll('svg.chart').forEach(function(svg){
        var k = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
        svg.querySelectorAll('text').forEach(function(t){
          labels++; min = Math.min(min, parseFloat(getComputedStyle(t).fontSize) * k); });
      });
      return JSON.stringify({viewport: vw, scroll_width: document.documentElement.scrollWidth,
        sticking_out: out, labels: labels, min_label_px: min});
    })()"#;
    let r = devtools.call(
        s,
        "Runtime.evaluate",
        json!({"expression": MEASURE, "returnByValue": true}),
    );
    devtools.call(None, "Target.closeTarget", json!({"targetId": tid}));
    serde_json::from_str(r["result"]["value"].as_str().expect("a measure")).expect("JSON")
}

/// The page and audit HTML reports read on a phone: nothing wider than the
/// 412 px screen (the waterfall scrolls sideways in its own box), and every
/// waterfall label at least 10 px as shown.
#[test]
fn html_reports_are_readable_at_a_phones_width() {
    let srv = site();
    let dir = redline_testkit::tmpdir("html-412");
    std::fs::create_dir_all(&dir).unwrap();
    let (page, audit) = (dir.join("page.html"), dir.join("audit.html"));
    let url = srv.url();
    for (cmd, file) in [("page", &page), ("audit", &audit)] {
        let f = file.display().to_string();
        let out = redline(&[cmd, "-q", "--no-save", "--html", &f, &url]);
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let Some(mut devtools) = redline_testkit::chromium::DevTools::launch("html-412") else {
        return;
    };
    for file in [&page, &audit] {
        let m = at_phone_width(&mut devtools, file);
        assert_eq!(m["viewport"], 412, "{m}");
        assert!(
            m["scroll_width"].as_f64().unwrap() <= 412.0,
            "{}: {m}",
            file.display()
        );
        assert_eq!(
            m["sticking_out"],
            serde_json::json!([]),
            "{}: {m}",
            file.display()
        );
        assert!(m["labels"].as_u64().unwrap() >= 4, "{m}");
        assert!(
            m["min_label_px"].as_f64().unwrap() >= 10.0,
            "{}: {m}",
            file.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
