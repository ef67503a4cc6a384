//! `redline page` results that are honest, exportable and kept (issue 15):
//! failed fetches keep their real duration and open no connection, a view
//! whose page failed is not compared, `--har` writes HAR 1.2 (validated
//! against docs/har-1.2.schema.json), page loads are saved and compared,
//! each view has a byte budget, the HTML waterfall's labels fit (checked in
//! headless Chromium), and bad input is one line with its exit code.

mod common;

use common::{redline, redline_with_limit, ScriptServer};
use redline_testkit::need::require;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("redline-page-rest-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Reads one request head; its path, or None at EOF.
fn read_path(s: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 65536 {
            return None;
        }
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return None,
        }
    }
    let h = String::from_utf8_lossy(&head).to_string();
    Some(h.split_whitespace().nth(1).unwrap_or("/").to_string())
}

fn respond(s: &mut TcpStream, ct: &str, extra: &str, body: &[u8]) -> bool {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n{extra}\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())
        .and_then(|_| s.write_all(body))
        .is_ok()
}

/// Resets the connection (RST, not FIN): SO_LINGER with a zero time-out.
fn reset(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a linger struct of the size given.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(s);
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn json_of(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn entry<'a>(view: &'a Value, url_part: &str) -> &'a Value {
    view["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["url"].as_str().unwrap().contains(url_part))
        .unwrap_or_else(|| panic!("no entry {url_part} in {view}"))
}

/// How long the server holds `/reset.css` before resetting the connection.
const HOLD_MS: u64 = 150;

#[test]
fn failed_fetches_keep_their_duration_and_open_no_connection() {
    let closed = closed_port();
    let page = format!(
        "<html><link rel=stylesheet href=/ok.css>\
         <link rel=stylesheet href=http://127.0.0.1:{closed}/refused.css>\
         <img src=http://no-such-host.invalid/unresolved.png>\
         <link rel=stylesheet href=/reset.css></html>"
    );
    let srv = ScriptServer::start(move |mut s| {
        for _ in 0..50 {
            let Some(path) = read_path(&mut s) else {
                return;
            };
            match path.as_str() {
                "/reset.css" => {
                    std::thread::sleep(Duration::from_millis(HOLD_MS));
                    return reset(s);
                }
                "/ok.css" => {
                    if !respond(&mut s, "text/css", "", b"a{color:red}") {
                        return;
                    }
                }
                _ => {
                    if !respond(&mut s, "text/html", "", page.as_bytes()) {
                        return;
                    }
                }
            }
        }
    });
    let out = redline(&["page", "-q", "--no-save", "-o", "json", &srv.url()]);
    let v = json_of(&out);
    for view in v["views"].as_array().unwrap() {
        let name = view["view"].as_str().unwrap();
        let refused = entry(view, "/refused.css");
        assert!(refused["status"].is_null() && refused["error"].is_string());
        let p = &refused["phases"];
        assert!(
            p["dns_ms"].is_number() && p["connect_ms"].is_number(),
            "{name}: {p}"
        );
        assert!(p["total_ms"].as_f64().unwrap() > 0.0, "{name}: {p}");
        let unresolved = entry(view, "no-such-host.invalid");
        let p = &unresolved["phases"];
        assert!(unresolved["error"]
            .as_str()
            .unwrap()
            .contains("cannot resolve"));
        assert!(p["dns_ms"].as_f64().unwrap() > 0.0, "{name}: {p}");
        assert!(
            p["connect_ms"].is_null(),
            "no connect after a failed lookup: {p}"
        );
        assert_eq!(p["total_ms"], p["dns_ms"], "{name}: {p}");
        // The reset came after the server held the request HOLD_MS: the
        // waterfall shows at least that, not a zero-length failure.
        let r = entry(view, "/reset.css");
        assert!(r["error"].is_string(), "{r}");
        let p = &r["phases"];
        assert!(
            p["waiting_ms"].as_f64().unwrap() >= HOLD_MS as f64,
            "{name}: {p}"
        );
        assert!(
            p["total_ms"].as_f64().unwrap() >= HOLD_MS as f64,
            "{name}: {p}"
        );
        let span = r["end_ms"].as_f64().unwrap() - r["start_ms"].as_f64().unwrap();
        assert!((span - p["total_ms"].as_f64().unwrap()).abs() < 0.01, "{r}");
        // Connections: only the ones opened, all to the server.
        let conns = view["conns"].as_array().unwrap();
        assert_eq!(view["connections"].as_u64().unwrap(), conns.len() as u64);
        let own = format!("http://127.0.0.1:{}", srv.addr.port());
        assert!(
            conns.iter().all(|c| c["origin"] == own.as_str()),
            "{name}: {conns:?}"
        );
        for h in view["hosts"].as_array().unwrap() {
            assert_eq!(h["origin"], own.as_str(), "{name}: {h}");
        }
    }
    // The text waterfall shows the failed fetches' times too.
    let out = redline(&["page", "-q", "--no-save", &srv.url()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("unresolved.png"))
        .expect("row of the unresolved image");
    assert!(
        !line.contains("reuse"),
        "a failed lookup is no reuse: {line}"
    );
}

#[test]
fn a_view_whose_page_failed_is_not_compared() {
    let served = Arc::new(AtomicU64::new(0));
    let s2 = served.clone();
    let srv = ScriptServer::start(move |mut s| {
        for _ in 0..10 {
            if read_path(&mut s).is_none() {
                return;
            }
            // The page once; then the server "goes down" (connection reset).
            if s2.fetch_add(1, Ordering::SeqCst) > 0 {
                return reset(s);
            }
            if !respond(&mut s, "text/html", "", b"<html>hello</html>") {
                return;
            }
        }
    });
    let out = redline(&["page", "-q", "--no-save", &srv.url()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("x the speed"), "{text}");
    assert!(
        text.contains("revalidate view: not compared with the first view"),
        "{text}"
    );
    assert!(text.contains("failed"), "{text}");
    // Each view says what it is.
    for what in [
        "First view: ",
        "(empty cache: everything requested)",
        "(every resource revalidated: all requested again with the first view's validators",
        "(navigating again: fresh responses taken from the cache unrequested, stale ones revalidated (WebPageTest's repeat view))",
    ] {
        assert!(text.contains(what), "{what}: {text}");
    }
    served.store(0, Ordering::SeqCst);
    let v = json_of(&redline(&[
        "page",
        "-q",
        "--no-save",
        "-o",
        "json",
        &srv.url(),
    ]));
    assert_eq!(v["summary"][0]["failed"], 0);
    assert_eq!(v["summary"][1]["failed"], 1);
    assert_eq!(v["summary"][1]["elapsed_ms"], 0.0);
}

/// A keep-alive site: a page, a stylesheet with a Set-Cookie, an image.
fn site() -> ScriptServer {
    ScriptServer::start(|mut s| {
        for _ in 0..100 {
            let Some(path) = read_path(&mut s) else {
                return;
            };
            let ok = match path.as_str() {
                "/" => respond(
                    &mut s,
                    "text/html",
                    "Cache-Control: no-cache\r\nETag: \"p1\"\r\n",
                    b"<html><link rel=stylesheet href=/s.css?v=1><img src=/i.gif></html>",
                ),
                "/s.css?v=1" => respond(
                    &mut s,
                    "text/css",
                    "Set-Cookie: session=cookie-secret; HttpOnly\r\nCache-Control: max-age=600\r\n",
                    b".a{color:red}",
                ),
                "/i.gif" => respond(
                    &mut s,
                    "image/gif",
                    "ETag: \"g1\"\r\n",
                    b"GIF89a\x01\x00\x01\x00\x00\x00\x00",
                ),
                _ => respond(&mut s, "text/plain", "", b"nope"),
            };
            if !ok {
                return;
            }
        }
    })
}

fn har_schema() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/har-1.2.schema.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn har_export_is_valid_har_1_2_with_consistent_timings_and_no_secrets() {
    let srv = site();
    let dir = tmpdir("har");
    let har_path = dir.join("page.har");
    let out = redline(&[
        "page",
        "-q",
        "--no-save",
        "-o",
        "json",
        "-H",
        "Authorization: Bearer header-secret",
        "-H",
        "Cookie: id=cookie-header-secret",
        "--har",
        har_path.to_str().unwrap(),
        &srv.url(),
    ]);
    let report = json_of(&out);
    let text = std::fs::read_to_string(&har_path).expect("HAR written");
    for secret in ["header-secret", "cookie-secret"] {
        assert!(!text.contains(secret), "{secret} in the HAR");
    }
    let har: Value = serde_json::from_str(&text).unwrap();
    let schema = har_schema();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&har)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "HAR invalid: {errors:#?}");
    // The schema has teeth: a HAR without its entries' timings fails it.
    let mut broken = har.clone();
    broken["log"]["entries"][0]
        .as_object_mut()
        .unwrap()
        .remove("timings");
    assert!(!validator.is_valid(&broken));

    let log = &har["log"];
    assert_eq!(log["version"], "1.2");
    let pages = log["pages"].as_array().unwrap();
    assert_eq!(
        pages
            .iter()
            .map(|p| p["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["first", "revalidate", "cached"]
    );
    assert!(pages[1]["title"].as_str().unwrap().contains("revalidated"));
    let entries = log["entries"].as_array().unwrap();
    let views = report["views"].as_array().unwrap();
    let total: usize = views
        .iter()
        .map(|v| v["entries"].as_array().unwrap().len())
        .sum();
    assert_eq!(entries.len(), total);
    let mut i = 0;
    for v in views {
        for e in v["entries"].as_array().unwrap() {
            let h = &entries[i];
            i += 1;
            assert_eq!(h["pageref"], v["view"]);
            assert_eq!(h["request"]["url"], e["url"]);
            let t = &h["timings"];
            let sum: f64 = ["blocked", "dns", "connect", "send", "wait", "receive"]
                .iter()
                .map(|k| t[*k].as_f64().unwrap())
                .filter(|x| *x != -1.0)
                .sum();
            let time = h["time"].as_f64().unwrap();
            assert!((sum - time).abs() < 1e-6, "time {time} != sum {sum}: {h}");
            if e["from_cache"] == true {
                assert_eq!(time, 0.0);
                assert_eq!(h["_fromCache"], "disk");
                continue;
            }
            // The same phases as the waterfall.
            let p = &e["phases"];
            let near = |a: f64, b: f64| (a - b).abs() < 0.002;
            assert!(
                near(
                    t["wait"].as_f64().unwrap(),
                    p["waiting_ms"].as_f64().unwrap()
                ),
                "{h}\n{e}"
            );
            assert!(near(
                t["receive"].as_f64().unwrap(),
                p["transfer_ms"].as_f64().unwrap()
            ));
            assert!(near(time, p["total_ms"].as_f64().unwrap()), "{h}\n{e}");
            match p["connect_ms"].as_f64() {
                Some(c) => assert!(near(t["connect"].as_f64().unwrap(), c)),
                None => assert_eq!(t["connect"], -1, "reused connection: {h}"),
            }
            assert_eq!(t["ssl"], -1, "plain http has no TLS");
            assert_eq!(h["response"]["status"], e["status"]);
            assert_eq!(h["connection"], e["conn"].to_string().as_str());
            // Request headers as sent, credentials redacted.
            let req_h = h["request"]["headers"].as_array().unwrap();
            let val = |n: &str| {
                req_h
                    .iter()
                    .find(|x| x["name"].as_str().unwrap().eq_ignore_ascii_case(n))
                    .map(|x| x["value"].as_str().unwrap().to_string())
            };
            assert_eq!(val("Authorization").as_deref(), Some("[redacted]"));
            assert_eq!(val("Cookie").as_deref(), Some("[redacted]"));
            assert!(val("User-Agent").unwrap().contains(" Chrome/"), "{h}");
        }
    }
    let css = entries
        .iter()
        .find(|h| {
            h["request"]["url"]
                .as_str()
                .unwrap()
                .ends_with("/s.css?v=1")
        })
        .unwrap();
    assert_eq!(css["request"]["queryString"][0]["name"], "v");
    let sc = css["response"]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| {
            x["name"]
                .as_str()
                .unwrap()
                .eq_ignore_ascii_case("set-cookie")
        })
        .expect("Set-Cookie listed");
    assert_eq!(sc["value"], "[redacted]");
    // The cached view took the fresh stylesheet from the cache.
    assert!(entries
        .iter()
        .any(|h| h["pageref"] == "cached" && h["_fromCache"] == "disk"));
    // The revalidate view revalidates: its request carries the stored ETag.
    let gif = entries
        .iter()
        .find(|h| {
            h["pageref"] == "revalidate"
                && h["request"]["url"].as_str().unwrap().ends_with("/i.gif")
        })
        .unwrap();
    assert!(
        gif["request"]["headers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "If-None-Match" && x["value"] == "\"g1\""),
        "{gif}"
    );

    // An unwritable --har: one line, exit 1, before any request is sent.
    let before = srv.accepted.load(Ordering::SeqCst);
    let out = redline(&[
        "page",
        "-q",
        "--no-save",
        "--har",
        "/nonexistent/dir/x.har",
        &srv.url(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot write --har /nonexistent/dir/x.har"),
        "{err}"
    );
    assert_eq!(
        srv.accepted.load(Ordering::SeqCst),
        before,
        "nothing loaded"
    );
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn page_loads_are_saved_listed_and_compared() {
    let srv = site();
    let dir = tmpdir("history");
    let db = dir.join("history.db");
    let db = db.to_str().unwrap();
    let url = srv.url();
    let out = redline(&["page", "-q", "--db", db, "--label", "before", &url]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("saved as page load 1 (label before)"), "{err}");
    ok(&redline(&[
        "page", "-q", "--db", db, "--label", "after", &url,
    ]));
    ok(&redline(&["page", "-q", "--db", db, "--no-save", &url]));
    let list = ok(&redline(&["history", "--db", db]));
    assert_eq!(list.matches(" PAGE ").count(), 2, "{list}");
    assert!(list.contains("page, first view"), "{list}");
    let c = ok(&redline(&["compare", "before", "after", "--db", db]));
    assert!(c.contains("Comparing page loads"), "{c}");
    for view in ["first view", "revalidate view", "cached view"] {
        let row = c
            .lines()
            .find(|l| l.contains(view))
            .unwrap_or_else(|| panic!("{c}"));
        assert!(row.contains("not tested (single load each)"), "{row}");
    }
    assert!(c.contains("requests") && c.contains("wire"), "{c}");
    assert!(!c.contains("better") && !c.contains("worse"), "{c}");
    let show = ok(&redline(&["show", "after", "--db", db]));
    assert!(
        show.contains("Page load 2") && show.contains("revalidate view"),
        "{show}"
    );
    let export: Value =
        serde_json::from_str(&ok(&redline(&["export", "before", "--db", db]))).unwrap();
    assert_eq!(export["format"], "redline.page");
    // A page-report file compares too.
    let f = dir.join("p.json");
    std::fs::write(&f, serde_json::to_string(&export).unwrap()).unwrap();
    let c = ok(&redline(&[
        "compare",
        f.to_str().unwrap(),
        "after",
        "--db",
        db,
    ]));
    assert!(c.contains("A = p.json"), "{c}");
    // A run is not a page load: one line, exit 2.
    ok(&redline(&[
        "run", "-q", "-n", "5", "-c", "1", "--db", db, "--label", "r", &url,
    ]));
    for args in [
        vec!["compare", "before", "r", "--db", db],
        vec!["report", "before", "--db", db],
    ] {
        let out = redline(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// Runs redline to its end (at most 120 s), watching its peak resident
/// size (VmHWM, KiB) by PID while it runs.
fn with_peak_rss(args: &[&str]) -> (std::process::Output, u64) {
    let out_path = tmpdir("rss").join("stdout");
    let mut child = std::process::Command::new(common::bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn redline");
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("redline {args:?} ran over 120 s");
        }
        if let Ok(s) = std::fs::read_to_string(&status_path) {
            if let Some(kib) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak = peak.max(kib);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = Vec::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_end(&mut stderr);
    }
    let stdout = std::fs::read(&out_path).unwrap_or_default();
    (
        std::process::Output {
            status,
            stdout,
            stderr,
        },
        peak,
    )
}

#[test]
fn a_page_of_huge_stylesheets_stops_at_the_byte_budget() {
    const SHEETS: usize = 500;
    const SHEET: usize = 10 * 1024 * 1024;
    let mut page = String::from("<html>");
    for i in 0..SHEETS {
        page.push_str(&format!("<link rel=stylesheet href=/big/{i}.css>"));
    }
    page.push_str("</html>");
    let written = Arc::new(AtomicU64::new(0));
    let w2 = written.clone();
    let srv = ScriptServer::start(move |mut s| {
        let chunk = vec![b'a'; 64 * 1024];
        for _ in 0..SHEETS {
            let Some(path) = read_path(&mut s) else {
                return;
            };
            if path.starts_with("/big/") {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/css\r\nContent-Length: {SHEET}\r\n\r\n"
                );
                if s.write_all(head.as_bytes()).is_err() {
                    return;
                }
                for _ in 0..SHEET / chunk.len() {
                    if s.write_all(&chunk).is_err() {
                        return;
                    }
                    w2.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
            } else if !respond(&mut s, "text/html", "", page.as_bytes()) {
                return;
            }
        }
    });
    let budget: u64 = 24 * 1024 * 1024;
    let url = srv.url();
    let (out, peak_kib) = with_peak_rss(&[
        "page",
        "-q",
        "--no-save",
        "-o",
        "json",
        "--max-bytes",
        "24MiB",
        &url,
    ]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let v = json_of(&out);
    // Memory stays near the budget (the page links 5 GB): peak resident
    // size under 4 budgets plus 100 MiB for the program itself.
    assert!(
        peak_kib * 1024 < 4 * budget + 100 * 1024 * 1024,
        "peak RSS {peak_kib} KiB"
    );
    eprintln!("peak RSS {peak_kib} KiB");
    assert!(err.contains("TRUNCATED"), "{err}");
    for view in v["views"].as_array().unwrap() {
        assert_eq!(view["budget_exhausted"], true, "{}", view["view"]);
        assert_eq!(view["truncated"], true);
        // Reads stop at the budget: at most one read (64 KiB) per
        // connection past it.
        let wire = view["wire_bytes"].as_u64().unwrap();
        assert!(wire <= budget + 6 * 65536, "{wire}");
        assert!(view["requests"].as_u64().unwrap() < SHEETS as u64);
        assert!(view["budget_used"].as_u64().unwrap() > budget);
    }
    // The server sent only a small part of the 5 GB the page links.
    assert!(written.load(Ordering::Relaxed) < 3 * (budget + 8 * SHEET as u64));
    // The text report marks it.
    let (out, _) = redline_with_limit(
        &["page", "-q", "--no-save", "--max-bytes", "4MiB", &srv.url()],
        Duration::from_secs(120),
    );
    let text = ok(&out);
    assert!(
        text.contains("TRUNCATED: stopped at the byte budget"),
        "{text}"
    );
}

/// Decoded text counts against `--max-bytes` without going past it by more
/// than one resource: 40 gzip'd stylesheets of 10 MiB of text each (about
/// 10 KiB on the wire) under a 24 MiB budget on 6 connections; the view
/// stops with at most 24 MiB + one sheet counted (before: every response in
/// flight added its 10 MiB after the budget ran out).
#[test]
fn decoded_text_never_takes_the_budget_past_one_resource() {
    use std::io::Write as _;
    const SHEETS: usize = 40;
    const TEXT: usize = 10 * 1024 * 1024;
    let mut page = String::from("<html>");
    for i in 0..SHEETS {
        page.push_str(&format!("<link rel=stylesheet href=/z/{i}.css>"));
    }
    page.push_str("</html>");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&vec![b' '; TEXT]).unwrap();
    let sheet = Arc::new(gz.finish().unwrap());
    let srv = ScriptServer::start(move |mut s| {
        for _ in 0..SHEETS + 1 {
            let Some(path) = read_path(&mut s) else {
                return;
            };
            let ok = if path.starts_with("/z/") {
                respond(&mut s, "text/css", "Content-Encoding: gzip\r\n", &sheet)
            } else {
                respond(&mut s, "text/html", "", page.as_bytes())
            };
            if !ok {
                return;
            }
        }
    });
    let budget: u64 = 24 * 1024 * 1024;
    let (out, _) = redline_with_limit(
        &[
            "page",
            "-q",
            "--no-save",
            "-o",
            "json",
            "--max-bytes",
            "24MiB",
            &srv.url(),
        ],
        Duration::from_secs(120),
    );
    let v = json_of(&out);
    for view in v["views"].as_array().unwrap() {
        assert_eq!(view["budget_exhausted"], true, "{}", view["view"]);
        let used = view["budget_used"].as_u64().unwrap();
        eprintln!("{}: {used} bytes counted of {budget}", view["view"]);
        assert!(used > budget, "{used}");
        assert!(
            used <= budget + TEXT as u64,
            "{used} counted, {budget} allowed"
        );
        assert!(view["requests"].as_u64().unwrap() < SHEETS as u64);
    }
}

#[test]
fn bad_input_is_one_line_with_its_exit_code() {
    let srv = ScriptServer::start(|mut s| {
        for _ in 0..10 {
            if read_path(&mut s).is_none() {
                return;
            }
            if !respond(&mut s, "image/png", "", b"\x89PNG\r\n\x1a\n") {
                return;
            }
        }
    });
    let out = redline(&["page", "-q", "--no-save", &srv.url()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("is not an HTML page (Content-Type image/png)"),
        "{err}"
    );
    for size in ["12", "lots", "5X"] {
        let out = redline(&["page", "--no-save", "--max-bytes", size, &srv.url()]);
        assert_eq!(out.status.code(), Some(2), "{size}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("bad size"), "{err}");
    }
}

#[test]
fn waterfall_labels_fit_and_carry_the_full_url() {
    let long = format!(
        "/assets/{}/bundle.min.css",
        "a-very-long-directory-name".repeat(6)
    );
    let long2 = long.clone();
    let srv = ScriptServer::start(move |mut s| {
        for _ in 0..50 {
            let Some(path) = read_path(&mut s) else {
                return;
            };
            let ok = if path == "/" {
                let page = format!(
                    "<html><link rel=stylesheet href={long2}><img src=/WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW.gif><img src=/m.gif></html>"
                );
                respond(&mut s, "text/html", "", page.as_bytes())
            } else {
                respond(&mut s, "text/css", "", b"a{}")
            };
            if !ok {
                return;
            }
        }
    });
    let dir = tmpdir("html");
    let html_path = dir.join("page.html");
    ok(&redline(&[
        "page",
        "-q",
        "--no-save",
        "--html",
        html_path.to_str().unwrap(),
        &srv.url(),
    ]));
    let html = std::fs::read_to_string(&html_path).unwrap();
    // Every URL label is short and carries the full URL in its tooltip.
    let full = format!("{}{long}", srv.url().trim_end_matches('/'));
    assert!(html.contains(&format!("<title>{full}</title>")), "tooltip");
    let labels: Vec<&str> = html
        .split("class=\"tick wf-url\"")
        .skip(1)
        .map(|s| {
            s.split("</title>")
                .nth(1)
                .unwrap()
                .split("</text>")
                .next()
                .unwrap()
        })
        .collect();
    // Four resources and /favicon.ico (the page declares no icon, so a
    // browser asks for it) in each of the three views.
    assert_eq!(labels.len(), 3 * 5, "{labels:?}");
    for l in &labels {
        assert!(l.chars().count() <= 48, "{l}");
    }
    assert!(
        labels
            .iter()
            .any(|l| l.contains('…') && l.ends_with("bundle.min.css")),
        "{labels:?}"
    );
    let Some(browser) = common::chromium() else {
        require("chromium", false);
        return;
    };
    let _ = browser;
    let shot = dir.join("page.png");
    let (dom, _) = common::chromium_dump(&html_path, &dir, Some(&shot)).expect("chromium");
    let clipped: u64 = dom
        .split("data-clipped-labels=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse().ok())
        .expect("the page's script ran");
    assert_eq!(
        clipped,
        0,
        "labels outside the chart (see {})",
        shot.display()
    );
}

#[test]
fn a_view_with_more_failed_requests_is_not_compared() {
    let css = Arc::new(AtomicU64::new(0));
    let c2 = css.clone();
    let srv = ScriptServer::start(move |mut s| {
        for _ in 0..10 {
            let Some(path) = read_path(&mut s) else {
                return;
            };
            if path == "/s.css" && c2.fetch_add(1, Ordering::SeqCst) > 0 {
                return reset(s);
            }
            let ok = if path == "/s.css" {
                respond(&mut s, "text/css", "", b"a{}")
            } else {
                respond(
                    &mut s,
                    "text/html",
                    "",
                    b"<html><link rel=stylesheet href=/s.css></html>",
                )
            };
            if !ok {
                return;
            }
        }
    });
    let text = ok(&redline(&["page", "-q", "--no-save", &srv.url()]));
    assert!(!text.contains("x the speed"), "{text}");
    assert!(
        text.contains(
            "revalidate view: not compared with the first view (1 failed requests against 0)"
        ),
        "{text}"
    );
}

/// `page` of a page that answers 4xx/5xx (also after a redirect) prints its
/// report and exits 1 with one line saying the status, as `audit --fail-on`
/// fails it; a page that ends 2xx exits 0.
#[test]
fn page_of_an_error_page_exits_1_after_its_report() {
    let (srv, _) = redline_testkit::script::routed_server(|head, _| {
        let path = head.split_whitespace().nth(1).unwrap_or("/");
        let (status, extra, body) = match path {
            "/missing" => ("404 Not Found", "", "<html><p>not here</p></html>"),
            "/failing" => ("503 Service Unavailable", "", "<html><p>down</p></html>"),
            "/moved" => ("301 Moved Permanently", "Location: /missing\r\n", ""),
            "/fine" => (
                "200 OK",
                "",
                "<html><link rel=icon href=data:,><p>hi</p></html>",
            ),
            _ => ("404 Not Found", "", "no"),
        };
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/html\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    });
    let base = format!("http://{}", srv.addr);
    for (path, status) in [("/missing", 404), ("/failing", 503), ("/moved", 404)] {
        let url = format!("{base}{path}");
        for format in ["text", "json"] {
            let out = common::redline(&["page", "-q", "--no-save", "-o", format, &url]);
            assert_eq!(out.status.code(), Some(1), "{path} {format}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.contains(&format!("answered {status}, not 2xx")),
                "{err}"
            );
            let text = String::from_utf8_lossy(&out.stdout);
            match format {
                "json" => {
                    let v: serde_json::Value = serde_json::from_str(&text).expect("the report");
                    assert_eq!(v["format"], "redline.page");
                }
                _ => assert!(text.contains("First view"), "{text}"),
            }
        }
    }
    let out = common::redline(&["page", "-q", "--no-save", &format!("{base}/fine")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
