//! `redline audit --browser` on a page behind Basic auth (issue 33 point 7):
//! the URL's `user:pass@` reaches Chromium as the load's `Authorization`,
//! so the page's script runs and the image it inserts is fetched and
//! judged; render-blocking is timed from Chromium's trace; the password is
//! in no output. Skipped with a note when Chromium is missing, failed under
//! CI=true.

mod common;

use common::*;

#[test]
fn audit_browser_behind_basic_auth() {
    if chromium().is_none() {
        missing("chromium (apt-get install chromium)");
        return;
    }
    const AUTH: &str = "Basic dXNlcjpzM2NyZXQ="; // user:s3cret
                                                 // A 1×1 PNG.
    const PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90,
        0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00,
        0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    let png = PNG;
    let css = format!("body{{color:#123}}\n/*{}*/", "c".repeat(50_000));
    let (srv, seen) = auth_server(AUTH, move |head, _| {
        match head.split_whitespace().nth(1).unwrap_or("/") {
            "/" => response(
                "200 OK",
                "text/html",
                b"<!doctype html><html><head><title>t</title>\
                  <link rel=stylesheet href=/s.css></head><body><div id=s></div>\
                  <script>document.getElementById('s').innerHTML = \
                  \"<img src='/img/a.png'>\";</script></body></html>",
            ),
            "/s.css" => response("200 OK", "text/css", css.as_bytes()),
            "/img/a.png" => response("200 OK", "image/png", png),
            _ => response("404 Not Found", "text/plain", b"no"),
        }
    });
    let url = format!("http://user:s3cret@{}/", srv.addr);
    let out = redline(&["audit", "-o", "json", "--no-probes", "--browser", &url]);
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        !so.contains("s3cret") && !se.contains("s3cret") && !so.contains(AUTH),
        "the password was printed"
    );
    let v: serde_json::Value = serde_json::from_str(&so).unwrap_or_else(|e| panic!("{e}: {se}"));
    // Chromium got the page (and ran its script): redline fetched the
    // image it inserts, with the credentials, and judged it.
    let heads = seen.lock().unwrap().clone();
    let image_gets = heads
        .iter()
        .filter(|(h, _)| h.starts_with("GET /img/a.png "))
        .count();
    assert!(image_gets >= 2, "Chromium and redline: {heads:?}");
    let cache = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cache-static")
        .expect("cache-static");
    assert!(cache.to_string().contains("/img/a.png"), "{cache}");
    let rb = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "render-blocking")
        .expect("render-blocking");
    let css_ms = rb["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["url"].as_str().is_some_and(|u| u.ends_with("/s.css")))
        .and_then(|f| f["link_ms"].as_f64())
        .unwrap_or_else(|| panic!("s.css not timed: {rb}"));
    assert!((80.0..=250.0).contains(&css_ms), "{css_ms}");
}
