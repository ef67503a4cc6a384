//! `--browser` beyond images (issue 33 point 7): Chromium's trace of the
//! load read over the DevTools pipe (main-thread tasks, requests with
//! their priorities, the first contentful paint) and the render-blocking
//! check simulating it as Lighthouse does; and the load's headers (here
//! Basic auth) sent by Chromium to the page's own origin only, so a page
//! behind a password runs its scripts and the image they insert is seen.
//! Servers on 127.0.0.1:0. Skipped with a note when Chromium is missing,
//! failed under CI=true.

mod common;

use redline_testkit::script::{auth_server, response, routed_server};
use redline_web::audit::{audit_page_with, Probes};
use redline_web::browser::{self, BrowserOpts};
use redline_web::load::LoadOpts;
use redline_web::page;
use redline_web::viewport::DESKTOP;
use std::time::Duration;

fn opts(program: &str, headers: Vec<(String, String)>) -> BrowserOpts {
    BrowserOpts {
        program: program.into(),
        viewport: DESKTOP,
        user_agent: redline_web::http::CHROME_DESKTOP_UA.into(),
        timeout: Duration::from_secs(60),
        insecure: false,
        headers,
        trace: true,
    }
}

fn chromium() -> Option<&'static str> {
    let c = redline_testkit::chromium::chromium();
    if c.is_none() {
        redline_testkit::need::missing("chromium (apt-get install chromium)");
    }
    c
}

/// A page with a 50 KB stylesheet and a 60 KB synchronous script in its
/// head: Chromium's trace has the parser's tasks, both requests at their
/// render-blocking priorities and a first contentful paint after them;
/// the audit, given the trace, times both on Lighthouse's desktop link,
/// the script (found by the parser's task, on a new connection) after the
/// sheet (on the page's warm one).
#[test]
fn the_trace_is_read_and_render_blocking_follows_it() {
    let Some(chromium) = chromium() else { return };
    let css = format!("body{{color:#123}}\n/*{}*/", "c".repeat(50_000));
    let js = format!("var x=1;\n//{}\n", "j".repeat(60_000));
    let (srv, _) = routed_server(move |head, _| {
        let path = head.split_whitespace().nth(1).unwrap_or("/");
        match path {
            "/" => response(
                "200 OK",
                "text/html",
                b"<!doctype html><html><head><title>t</title>\
                  <link rel=stylesheet href=/s.css><script src=/a.js></script>\
                  </head><body><h1>Hello</h1><p>text</p></body></html>",
            ),
            "/s.css" => response("200 OK", "text/css", css.as_bytes()),
            "/a.js" => response("200 OK", "application/javascript", js.as_bytes()),
            _ => response("404 Not Found", "text/plain", b"no"),
        }
    });
    let url = url::Url::parse(&srv.url()).unwrap();
    let v = browser::visit(&url, &opts(chromium, Vec::new())).expect("Chromium ran");
    let t = v.trace.expect("a trace");
    assert!(!t.tasks.is_empty() && t.tasks.iter().any(|k| k.parse_html));
    let fcp = t.fcp_us.expect("a first contentful paint");
    let req = |tail: &str| {
        t.requests
            .iter()
            .find(|r| r.url.ends_with(tail))
            .unwrap_or_else(|| panic!("no {tail} in {:?}", t.requests))
    };
    let (s, a) = (req("/s.css"), req("/a.js"));
    assert_eq!(
        (s.priority.as_str(), a.priority.as_str()),
        ("VeryHigh", "High")
    );
    assert_eq!(s.render_blocking.as_deref(), Some("blocking"));
    assert!(s.end_us.is_some_and(|e| e <= fcp) && a.end_us.is_some_and(|e| e <= fcp));
    assert!(a.bytes > 60_000, "{a:?}");

    let r = page::run(&url, 1, &LoadOpts::default(), &mut |_| {});
    let probes = Probes {
        dpr: Some(1.0),
        browser: true,
        trace: Some(t),
        ..Probes::default()
    };
    let audit = audit_page_with(&r, &probes);
    let rb = audit
        .checks
        .iter()
        .find(|c| c.id == "render-blocking")
        .expect("the check");
    let link = |tail: &str| {
        rb.findings
            .iter()
            .find(|f| f.url.as_deref().is_some_and(|u| u.ends_with(tail)))
            .and_then(|f| f.link_ms)
            .unwrap_or_else(|| panic!("{tail} not timed: {:?}", rb.findings))
    };
    assert!(
        rb.summary
            .contains("on Lighthouse's graph of Chromium's trace"),
        "{}",
        rb.summary
    );
    let (ls, la) = (link("/s.css"), link("/a.js"));
    eprintln!("on Lighthouse's desktop link: sheet {ls:.1} ms, script {la:.1} ms");
    // 50 KB on a warm connection: a round trip, the server's time and
    // slow start's rounds; the script a new connection's handshake more.
    assert!((80.0..=250.0).contains(&ls), "sheet {ls} ms");
    assert!(la > ls, "script {la} ms, sheet {ls} ms");
}

/// A page behind Basic auth whose script inserts two images, one from its
/// own origin and one from another: with the load's `Authorization`
/// Chromium loads the page, runs the script and requests both, sending
/// the credentials to the page's origin only; without it the page is a
/// 401 and no image is seen. The options' debug form names the header,
/// never its value.
#[test]
fn the_loads_headers_reach_the_page_and_no_other_origin() {
    let Some(chromium) = chromium() else { return };
    let (png, _) = common::photo(40, 30);
    let png2 = png.clone();
    let (other, other_seen) = routed_server(move |_, _| response("200 OK", "image/png", &png2));
    let other_url = format!("{}b.png", other.url());
    const AUTH: &str = "Basic dXNlcjpzM2NyZXQ="; // user:s3cret
    let page = format!(
        "<!doctype html><html><head><title>t</title></head><body><div id=s></div>\
         <script>document.getElementById('s').innerHTML = \
         \"<img src='/img/a.png'><img src='{other_url}'>\";</script></body></html>"
    );
    let (srv, seen) = auth_server(AUTH, move |head, _| {
        match head.split_whitespace().nth(1).unwrap_or("/") {
            "/" => response("200 OK", "text/html", page.as_bytes()),
            "/img/a.png" => response("200 OK", "image/png", &png),
            _ => response("404 Not Found", "text/plain", b"no"),
        }
    });
    let url = url::Url::parse(&srv.url()).unwrap();
    let with = opts(
        chromium,
        vec![("Authorization".to_string(), AUTH.to_string())],
    );
    assert!(!format!("{with:?}").contains("s3cret") && !format!("{with:?}").contains(AUTH));
    let got = browser::images(&url, &with).expect("Chromium ran");
    let urls: Vec<&str> = got.iter().map(|i| i.url.as_str()).collect();
    assert!(
        urls.iter().any(|u| u.ends_with("/img/a.png")) && urls.contains(&other_url.as_str()),
        "{urls:?}"
    );
    let heads = seen.lock().unwrap().clone();
    assert!(
        heads
            .iter()
            .any(|(h, _)| h.contains("GET /img/a.png ") && h.contains(AUTH)),
        "{heads:?}"
    );
    let other_heads = other_seen.lock().unwrap().clone();
    assert!(!other_heads.is_empty());
    assert!(
        other_heads
            .iter()
            .all(|(h, _)| !h.to_ascii_lowercase().contains("authorization")),
        "credentials went to another origin: {other_heads:?}"
    );
    let without = browser::images(&url, &opts(chromium, Vec::new())).expect("Chromium ran");
    assert!(without.is_empty(), "{without:?}");
}
