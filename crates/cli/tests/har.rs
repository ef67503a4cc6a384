//! `import har` keeps only what went to the network (issue 35, point 3): a
//! recording with the browser's cache hits (Chrome's `_fromCache` memory and
//! disk, Firefox's `cache.beforeRequest` with no timings, timings all -1/0)
//! imports as the network requests alone, in order, with their think times;
//! stderr counts what was dropped; the scenario run sends exactly those.

mod common;
use common::*;
use std::time::{Duration, Instant};

fn tmp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("redline-har-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn browser_cache_hits_are_not_imported_and_not_sent() {
    let (srv, seen) = routed_server(|_, _| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok".to_vec()
    });
    let base = format!("http://127.0.0.1:{}", srv.addr.port());
    // Page (network), a memory and a disk hit, a Firefox cache hit, an
    // all-idle entry, then two network requests 300 ms and 200 ms later.
    let har = format!(
        r#"{{"log":{{"version":"1.2","creator":{{"name":"test","version":"1"}},
      "pages":[{{"id":"p","startedDateTime":"2026-01-01T00:00:00.000Z","title":"t","pageTimings":{{}}}}],
      "entries":[
  {{"pageref":"p","startedDateTime":"2026-01-01T00:00:00.000Z","time":50,
    "request":{{"method":"GET","url":"{base}/","headers":[]}},"response":{{"status":200}},"cache":{{}},
    "timings":{{"blocked":1,"dns":0,"connect":1,"send":0.2,"wait":40,"receive":7.8}}}},
  {{"pageref":"p","startedDateTime":"2026-01-01T00:00:00.060Z","time":0.3,"_fromCache":"memory",
    "request":{{"method":"GET","url":"{base}/style.css","headers":[]}},"response":{{"status":200}},"cache":{{}},
    "timings":{{"blocked":-1,"dns":-1,"connect":-1,"send":0,"wait":0.1,"receive":0.2}}}},
  {{"pageref":"p","startedDateTime":"2026-01-01T00:00:00.070Z","time":2,"_fromCache":"disk",
    "request":{{"method":"GET","url":"{base}/app.js","headers":[]}},"response":{{"status":200}},"cache":{{}},
    "timings":{{"blocked":-1,"dns":-1,"connect":-1,"send":0,"wait":1,"receive":1}}}},
  {{"pageref":"p","startedDateTime":"2026-01-01T00:00:00.080Z","time":0,
    "request":{{"method":"GET","url":"{base}/logo.png","headers":[]}},"response":{{"status":200}},
    "cache":{{"beforeRequest":{{"lastAccess":"2026-01-01T00:00:00.000Z","eTag":"","hitCount":2}}}},
    "timings":{{"blocked":-1,"dns":-1,"connect":-1,"ssl":-1,"send":0,"wait":0,"receive":0}}}},
  {{"pageref":"p","startedDateTime":"2026-01-01T00:00:00.090Z","time":0,
    "request":{{"method":"GET","url":"{base}/font.woff2","headers":[]}},"response":{{"status":200}},"cache":{{}},
    "timings":{{"blocked":-1,"dns":-1,"connect":-1,"send":0,"wait":0,"receive":0}}}},
  {{"pageref":"p","startedDateTime":"2026-01-01T00:00:00.350Z","time":10,
    "request":{{"method":"GET","url":"{base}/api/items","headers":[]}},"response":{{"status":200}},"cache":{{}},
    "timings":{{"send":0,"wait":9,"receive":1}}}},
  {{"pageref":"p","startedDateTime":"2026-01-01T00:00:00.560Z","time":5,
    "request":{{"method":"POST","url":"{base}/api/log","headers":[],"postData":{{"mimeType":"text/plain","text":"x"}}}},
    "response":{{"status":204}},"cache":{{}},
    "timings":{{"send":0,"wait":4,"receive":1}}}}
]}}}}"#
    );
    let dir = tmp("cache");
    let file = dir.join("page.har");
    std::fs::write(&file, har).unwrap();
    let out = redline(&["import", "har", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("imported 3 requests")
            && err.contains("dropped 4 served from the browser's cache"),
        "{err}"
    );
    let toml_text = String::from_utf8_lossy(&out.stdout).into_owned();
    for cached in ["style.css", "app.js", "logo.png", "font.woff2"] {
        assert!(
            !toml_text.contains(cached),
            "{cached} imported:\n{toml_text}"
        );
    }
    // Think times: the idle gaps between the network requests.
    assert!(toml_text.contains("think = \"300ms\""), "{toml_text}");
    assert!(toml_text.contains("think = \"200ms\""), "{toml_text}");
    let sc = dir.join("page.toml");
    std::fs::write(&sc, &toml_text).unwrap();

    // One journey: exactly the network requests, in order, paced by the think times.
    let t0 = Instant::now();
    let v = run_json(&[
        "--scenario",
        sc.to_str().unwrap(),
        "-c",
        "1",
        "-n",
        "3",
        "--no-save",
        &format!("{base}/"),
    ]);
    let took = t0.elapsed();
    assert_eq!(counter(&v, "completed"), 3, "{}", v["errors"]);
    let lines: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(h, _)| h.lines().next().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        lines,
        [
            "GET / HTTP/1.1",
            "GET /api/items HTTP/1.1",
            "POST /api/log HTTP/1.1"
        ],
        "{lines:?}"
    );
    assert!(
        took >= Duration::from_millis(500),
        "think times kept: {took:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
