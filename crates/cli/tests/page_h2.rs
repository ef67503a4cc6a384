//! `redline page`/`audit` over HTTP/2: Debian's nginx with `ssl http2` on a
//! loopback port, a certificate made by the test (trusted with `--cacert`),
//! a page with 10 sub-resources. nginx's own access log (`$connection` and
//! `$server_protocol`) says how the page was fetched: each view over exactly
//! one HTTP/2 connection, the revalidate view answered 304 over it; with
//! `--http1.1` HTTP/1.1 lines over several connections.

mod common;

use common::nginx::{pki, start_nginx, Nginx, NginxSite};
use common::redline;
use serde_json::Value;
use std::collections::BTreeSet;

const SUBRESOURCES: usize = 10;

fn site() -> Vec<(&'static str, Vec<u8>)> {
    let mut html = String::from("<html><head>\n<link rel=icon href=/i0.gif>\n");
    let css = ".rule { color: #123456; margin: 0 auto; padding: 4px 8px; }\n".repeat(60);
    let js = "function f(a, b) { return a + b * 2 - 1; }\n".repeat(60);
    let gif = b"GIF89a\x02\x00\x03\x00\x00\x00\x00".to_vec();
    let mut files = Vec::new();
    for i in 0..3 {
        html.push_str(&format!("<link rel=stylesheet href=/s{i}.css>\n"));
        files.push((["s0.css", "s1.css", "s2.css"][i], css.clone().into_bytes()));
    }
    for i in 0..3 {
        html.push_str(&format!("<script src=/j{i}.js></script>\n"));
        files.push((["j0.js", "j1.js", "j2.js"][i], js.clone().into_bytes()));
    }
    html.push_str("</head><body>\n");
    for i in 0..4 {
        html.push_str(&format!("<img src=/i{i}.gif width=2 height=3>\n"));
        files.push((["i0.gif", "i1.gif", "i2.gif", "i3.gif"][i], gif.clone()));
    }
    html.push_str("<p>multiplexed</p></body></html>\n");
    files.push(("index.html", html.into_bytes()));
    files
}

fn nginx() -> Option<(Nginx, String)> {
    nginx_with("")
}

/// nginx with HTTP/2, an access log of connection, protocol, status and
/// URI, gzip for CSS and JS, and `extra` in its http block.
fn nginx_with(extra: &str) -> Option<(Nginx, String)> {
    let p = pki();
    let files = site();
    let http_extra = format!(
        "log_format conns '$connection $server_protocol $status $request_uri';\n  \
         access_log {{d}}/access.log conns;\n  \
         gzip on; gzip_min_length 0; gzip_types text/css application/javascript;\n  {extra}"
    );
    let n = start_nginx(&NginxSite {
        tag: "page-h2",
        files: &files,
        tls: Some(&p),
        h2: true,
        http_extra: &http_extra,
        types: "text/html html; text/css css; application/javascript js; image/gif gif;",
    })?;
    let ca = n.dir.join("ca.pem");
    std::fs::write(&ca, &p.ca_pem).unwrap();
    Some((n, ca.to_str().unwrap().to_string()))
}

/// One line of nginx's access log.
struct Line {
    conn: u64,
    protocol: String,
    status: u16,
}

/// The access log, truncated so the next command starts from nothing.
fn take_log(n: &Nginx) -> Vec<Line> {
    let path = n.dir.join("access.log");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, "").unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Line {
                conn: f[0].parse().unwrap(),
                protocol: f[1].to_string(),
                status: f[2].parse().unwrap(),
            }
        })
        .collect()
}

fn run(args: &[&str]) -> (Value, String) {
    let out = common::redline_ok(args);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (v, stdout)
}

fn check(v: &Value, id: &str) -> Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}"))
        .clone()
}

#[test]
fn page_over_h2_uses_one_connection_per_view_and_gets_304s() {
    let Some((n, ca)) = nginx() else { return };
    let url = format!("https://127.0.0.1:{}/", n.port);
    let all = SUBRESOURCES + 1;

    let (v, _) = run(&["page", "-o", "json", "-q", "--cacert", &ca, &url]);
    // nginx's view: three views, each one HTTP/2 connection carrying all
    // 11 requests; the first view 200s, the revalidate view 304s.
    let log = take_log(&n);
    assert_eq!(log.len(), 3 * all, "one request per resource per view");
    assert!(log.iter().all(|l| l.protocol == "HTTP/2.0"));
    for (view, lines) in log.chunks(all).enumerate() {
        let ids: BTreeSet<u64> = lines.iter().map(|l| l.conn).collect();
        assert_eq!(ids.len(), 1, "view {view}: connections {ids:?}");
    }
    let ids: BTreeSet<u64> = log.iter().map(|l| l.conn).collect();
    assert_eq!(ids.len(), 3, "a new connection per view");
    assert!(log[..all].iter().all(|l| l.status == 200));
    assert!(log[all..2 * all].iter().all(|l| l.status == 304));

    // redline's view agrees.
    let first = &v["views"][0];
    assert_eq!(first["requests"], all as u64);
    assert_eq!(first["connections"], 1);
    assert_eq!(first["errors"], 0, "{first}");
    let host = &first["hosts"][0];
    assert_eq!(host["connections"], 1, "{host}");
    assert_eq!(host["protocols"], serde_json::json!(["h2"]));
    assert_eq!(host["requests"], all as u64);
    let entries = first["entries"].as_array().unwrap();
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e["protocol"], "h2", "{e}");
        assert_eq!(e["conn"], 1, "{e}");
        // Connect and TLS appear once, on the request that opened the connection.
        assert_eq!(e["phases"]["tls_ms"].is_number(), i == 0, "{e}");
        assert_eq!(e["reused"], i != 0, "{e}");
    }
    // gzip is decoded over h2 as over HTTP/1.1.
    let css = entries
        .iter()
        .find(|e| e["url"].as_str().unwrap().ends_with("/s0.css"))
        .unwrap();
    let css_len = site().into_iter().find(|f| f.0 == "s0.css").unwrap().1;
    assert_eq!(css["content_encoding"], "gzip", "{css}");
    assert_eq!(css["decoded_bytes"], css_len.len() as u64);
    let wire = css["body_wire_bytes"].as_u64().unwrap() as usize;
    assert!(wire < css_len.len() / 4, "{wire} bytes on the wire");
    assert_eq!(v["views"][0]["conns"][0]["protocol"], "h2");
    assert_eq!(v["views"][0]["conns"][0]["tls"]["alpn"], "h2");
    assert_eq!(v["alpn"][0]["h2"], true);
    assert_eq!(v["alpn"][0]["probed"], false, "the load's own answer");

    let repeat = &v["views"][1];
    assert_eq!(repeat["not_modified"], all as u64, "{}", repeat["entries"]);
    assert_eq!(repeat["connections"], 1);
    assert!(repeat["entries"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["protocol"] == "h2" && e["status"] == 304));

    // The text waterfall names protocol and connection, and the host line counts.
    let out = redline(&["page", "-q", "--cacert", &ca, &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("h2#1"), "{text}");
    assert!(
        text.contains(&format!(
            "{}: 1 connection (h2), {all} requests",
            host["origin"].as_str().unwrap()
        )),
        "{text}"
    );
    take_log(&n);
}

#[test]
fn http1_1_flag_uses_several_http1_connections() {
    let Some((n, ca)) = nginx() else { return };
    let url = format!("https://127.0.0.1:{}/", n.port);
    let all = SUBRESOURCES + 1;
    let (v, _) = run(&[
        "page",
        "-o",
        "json",
        "-q",
        "--http1.1",
        "--cacert",
        &ca,
        &url,
    ]);
    let log = take_log(&n);
    assert_eq!(log.len(), 3 * all);
    assert!(log.iter().all(|l| l.protocol == "HTTP/1.1"));
    let ids: BTreeSet<u64> = log[..all].iter().map(|l| l.conn).collect();
    assert!(ids.len() > 1, "first view over {ids:?}");
    let first = &v["views"][0];
    assert_eq!(first["connections"], ids.len() as u64);
    assert!(first["entries"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["protocol"] == "http/1.1"));
    assert_eq!(
        first["hosts"][0]["protocols"],
        serde_json::json!(["http/1.1"])
    );
    assert_eq!(v["views"][1]["not_modified"], all as u64);
    // HTTP/2 is still known to be offered: from a probe connection.
    assert_eq!(v["alpn"][0]["h2"], true);
    assert_eq!(v["alpn"][0]["probed"], true);
}

#[test]
fn audit_over_h2_calls_keep_alive_moot_and_http2_ok() {
    let Some((n, ca)) = nginx() else { return };
    let url = format!("https://127.0.0.1:{}/", n.port);
    let (v, _) = run(&["audit", "-o", "json", "-q", "--cacert", &ca, &url]);
    let ka = check(&v, "keep-alive");
    assert_eq!(ka["applicable"], false, "{ka}");
    assert!(
        ka["summary"].as_str().unwrap().contains("moot on HTTP/2"),
        "{ka}"
    );
    assert!(ka["findings"].as_array().unwrap().is_empty());
    let h2 = check(&v, "http2");
    assert_eq!(h2["severity"], "ok", "{h2}");
    assert_eq!(h2["grade"], "A");
    assert_eq!(check(&v, "broken")["severity"], "ok", "{v}");

    // Over HTTP/1.1 keep-alive is judged (nginx keeps connections alive).
    let (v, _) = run(&[
        "audit",
        "-o",
        "json",
        "-q",
        "--http1.1",
        "--cacert",
        &ca,
        &url,
    ]);
    let ka = check(&v, "keep-alive");
    assert_eq!(ka["applicable"], true, "{ka}");
    assert_eq!(ka["severity"], "ok", "{ka}");
    assert_eq!(check(&v, "http2")["severity"], "ok");
    take_log(&n);
}

#[test]
fn streams_in_flight_stay_within_the_servers_limit() {
    let Some((n, ca)) = nginx_with("http2_max_concurrent_streams 2;") else {
        return;
    };
    let url = format!("https://127.0.0.1:{}/", n.port);
    let all = SUBRESOURCES + 1;
    let (v, _) = run(&["page", "-o", "json", "-q", "--cacert", &ca, &url]);
    let log = take_log(&n);
    assert_eq!(log.len(), 3 * all);
    assert!(log
        .iter()
        .all(|l| l.protocol == "HTTP/2.0" && l.status < 400));
    for view in v["views"].as_array().unwrap() {
        assert_eq!(view["connections"], 1);
        assert_eq!(view["errors"], 0, "{view}");
        // Each request's span (dispatch to last byte) overlaps at most one other.
        let spans: Vec<(f64, f64)> = view["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["start_ms"].as_f64().unwrap(),
                    e["end_ms"].as_f64().unwrap(),
                )
            })
            .collect();
        for &(s, _) in &spans {
            let open = spans.iter().filter(|&&(a, b)| a <= s && s < b).count();
            assert!(open <= 2, "{open} streams at {s} ms: {spans:?}");
        }
    }
}

#[test]
fn requests_refused_by_goaway_are_retried_on_a_new_connection() {
    // nginx says GOAWAY after 4 requests on a connection; the streams above
    // its last stream id were not processed and go again, on a new connection.
    let Some((n, ca)) = nginx_with("keepalive_requests 4;") else {
        return;
    };
    let url = format!("https://127.0.0.1:{}/", n.port);
    let all = SUBRESOURCES + 1;
    let (v, _) = run(&["page", "-o", "json", "-q", "--cacert", &ca, &url]);
    let log = take_log(&n);
    let views = v["views"].as_array().unwrap();
    let first = &views[0];
    assert_eq!(first["view"], "first");
    let entries = first["entries"].as_array().unwrap();
    assert_eq!(entries.len(), all, "{first}");
    // Every resource loaded, none failed.
    assert_eq!(first["errors"], 0, "{first}");
    for e in entries {
        assert!(e["error"].is_null(), "{e}");
        assert_eq!(e["status"], 200, "{e}");
        assert_eq!(e["protocol"], "h2", "{e}");
    }
    let retried = entries.iter().filter(|e| e["retried"] == true).count();
    assert!(retried >= 1, "no request was retried: {first}");
    assert!(first["connections"].as_u64().unwrap() >= 3, "{first}");
    for view in views {
        assert_eq!(view["errors"], 0, "{view}");
    }
    // nginx: every request HTTP/2 and answered, over at least 3 connections
    // in the first view (11 requests, 4 per connection).
    assert!(log
        .iter()
        .all(|l| l.protocol == "HTTP/2.0" && l.status < 400));
    let first_conns: BTreeSet<u64> = log.iter().take(all).map(|l| l.conn).collect();
    assert!(first_conns.len() >= 3, "{} connections", first_conns.len());
    // Each request reached nginx once per view: the retried ones were not
    // processed the first time.
    let requested: u64 = views.iter().map(|w| w["requests"].as_u64().unwrap()).sum();
    assert_eq!(log.len() as u64, requested);
    eprintln!(
        "first view: {retried} retried, {} connections (nginx: {}), {} log lines",
        first["connections"],
        first_conns.len(),
        log.len()
    );
}
