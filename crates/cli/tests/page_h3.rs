//! `redline page`/`audit` over HTTP/3 (issue 32, point 5), against Debian's
//! Caddy (HTTP/3 on by default over TLS, `Alt-Svc: h3=":PORT"` on its TCP
//! answers) serving a small page with a stylesheet, a script, two images
//! and a CSS background: `--http3` loads every resource over h3 with the
//! URLs and statuses HTTP/2 gets (Caddy's access log agrees), HAR valid with
//! `httpVersion` h3; without the flag the first view goes over TCP and the
//! revalidate view follows the `Alt-Svc` over HTTP/3, as Chromium does; a
//! dead alternative falls back to TCP and the audit says what is wrong; and
//! against nginx without HTTP/3, `--http3` is a clear error per request and
//! the audit's check is not met.

mod common;

use common::redline;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

fn png(w: u32, h: u32) -> Vec<u8> {
    // A valid PNG header is enough for the intrinsic size; the rest is filler.
    let mut v = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
    v.extend(std::iter::repeat_n(7u8, 3000));
    v
}

fn site() -> Vec<(&'static str, Vec<u8>)> {
    let html =
        "<!doctype html><html><head><link rel=stylesheet href=/s.css><script src=/a.js></script>\
                <link rel=icon href=/i.png></head><body><img src=/i.png width=4 height=3>\
                <img src=/b.png width=2 height=2><div class=x>over QUIC</div></body></html>\n";
    vec![
        ("index.html", html.as_bytes().to_vec()),
        (
            "s.css",
            b".x { background: url(/bg.png) } body { color: #123 }\n".repeat(40),
        ),
        (
            "a.js",
            b"var a = 1; function f(b) { return a + b }\n".repeat(40),
        ),
        ("i.png", png(4, 3)),
        ("b.png", png(2, 2)),
        ("bg.png", png(8, 8)),
    ]
}

/// Caddy serving [`site`] with `directives`, and the CA file that trusts it;
/// None (skipped, or a failure under CI) without Caddy.
fn caddy(directives: &str) -> Option<(redline_testkit::caddy::Caddy, String)> {
    caddy_pki(directives).map(|(c, ca, _)| (c, ca))
}

/// [`caddy`], with the PKI its certificate comes from.
fn caddy_pki(
    directives: &str,
) -> Option<(
    redline_testkit::caddy::Caddy,
    String,
    redline_testkit::pki::Pki,
)> {
    use redline_testkit::caddy;
    if !redline_testkit::need::require("caddy (Debian package caddy)", caddy::installed()) {
        return None;
    }
    let pki = redline_testkit::pki::pki();
    let files = site();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let c = caddy::start_with(&pki, &refs, directives);
    let ca = c.root.join("../ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    Some((c, ca.to_string_lossy().into_owned(), pki))
}

/// Caddy's access log: (protocol, URI) of each request.
fn access_log(c: &redline_testkit::caddy::Caddy) -> Vec<(String, String)> {
    std::fs::read_to_string(&c.log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            let r = &v["request"];
            (
                r["proto"].as_str().unwrap_or("").to_string(),
                r["uri"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// `redline page URL --cacert CA --no-save -q -o json ARGS`: the report.
fn page(url: &str, ca: &str, args: &[&str]) -> Value {
    let mut a = vec!["page", url, "--cacert", ca, "--no-save", "-q", "-o", "json"];
    a.extend_from_slice(args);
    common::json_ok(&a)
}

/// `redline audit ARGS -o json -q`: its `alt-svc-h3` check.
fn alt_svc_check(args: &[&str]) -> Value {
    audit_check("alt-svc-h3", args)
}

/// `redline audit ARGS -o json -q`: its check `id`.
fn audit_check(id: &str, args: &[&str]) -> Value {
    let mut a = vec!["audit", "-q", "-o", "json"];
    a.extend_from_slice(args);
    let out = redline(&a);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    common::assert_schema("audit.schema.json", &v);
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .expect("the check")
        .clone()
}

fn fetched(view: &Value) -> Vec<&Value> {
    view["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["from_cache"] == false)
        .collect()
}

/// (URL, status) of every fetched entry of a view.
fn urls(view: &Value) -> BTreeSet<(String, u64)> {
    fetched(view)
        .iter()
        .map(|e| {
            (
                e["url"].as_str().unwrap().to_string(),
                e["status"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn protocols(view: &Value) -> BTreeSet<String> {
    fetched(view)
        .iter()
        .map(|e| e["protocol"].as_str().unwrap_or("none").to_string())
        .collect()
}

fn har_schema() -> jsonschema::Validator {
    let p = format!(
        "{}/../../docs/har-1.2.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    jsonschema::validator_for(&s).unwrap()
}

#[test]
fn http3_loads_every_resource_over_h3_as_http2_does() {
    let Some((c, ca)) = caddy("") else { return };
    let url = format!("https://127.0.0.1:{}/", c.port);
    let dir = redline_testkit::tmpdir("page-h3-har");
    let har_path = dir.join("page.har");
    let h3 = page(&url, &ca, &["--http3", "--har", har_path.to_str().unwrap()]);
    common::assert_schema("page.schema.json", &h3);
    let first = &h3["views"][0];
    // Every resource, and the revalidate view's too, over HTTP/3.
    for v in h3["views"].as_array().unwrap() {
        if !fetched(v).is_empty() {
            assert_eq!(protocols(v), BTreeSet::from(["h3".to_string()]), "{v:#}");
        }
    }
    assert_eq!(first["connections"], 1, "one QUIC connection");
    assert_eq!(first["conns"][0]["protocol"], "h3");
    assert_eq!(first["errors"], 0, "{first:#}");
    // The page, stylesheet, script, two images, the CSS background.
    let h3_urls = urls(first);
    assert_eq!(h3_urls.len(), 6, "{h3_urls:?}");
    // Caddy saw exactly the --http3 run's requests, all over HTTP/3.
    let sent: u64 = h3["views"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(c.wait_logged("HTTP/3.0", sent), sent);
    assert_eq!(c.logged("HTTP/2.0") + c.logged("HTTP/1.1"), 0);
    // The same URLs and statuses as over HTTP/2.
    let h2 = page(&url, &ca, &[]);
    assert_eq!(
        protocols(&h2["views"][0]),
        BTreeSet::from(["h2".to_string()])
    );
    assert_eq!(urls(&h2["views"][0]), h3_urls);
    // Bodies arrived whole: the images' sizes were read, CSS was parsed.
    let img = fetched(first)
        .into_iter()
        .find(|e| e["url"].as_str().unwrap().ends_with("/i.png"))
        .unwrap();
    assert_eq!(img["intrinsic"], serde_json::json!([4, 3]));
    assert_eq!(img["body_wire_bytes"], png(4, 3).len());
    // HAR: valid 1.2, httpVersion h3, the QUIC handshake as Chromium
    // reports it (connect = ssl), each time the sum of its timings.
    let har: Value = serde_json::from_str(&std::fs::read_to_string(&har_path).unwrap()).unwrap();
    let errors: Vec<String> = har_schema()
        .iter_errors(&har)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let entries = har["log"]["entries"].as_array().unwrap();
    let fetched_har: Vec<&Value> = entries
        .iter()
        .filter(|e| e.get("_fromCache").is_none())
        .collect();
    assert!(!fetched_har.is_empty());
    for e in &fetched_har {
        assert_eq!(e["response"]["httpVersion"], "h3", "{e:#}");
        assert_eq!(e["request"]["httpVersion"], "h3");
        let t = &e["timings"];
        let sum: f64 = ["dns", "connect", "wait", "receive"]
            .iter()
            .map(|k| t[k].as_f64().unwrap().max(0.0))
            .sum();
        assert!((sum - e["time"].as_f64().unwrap()).abs() < 1e-6, "{e:#}");
    }
    let opened = fetched_har
        .iter()
        .find(|e| e["timings"]["ssl"].as_f64().unwrap() >= 0.0)
        .expect("the request that opened the connection");
    assert_eq!(opened["timings"]["connect"], opened["timings"]["ssl"]);
    assert!(opened["timings"]["ssl"].as_f64().unwrap() > 0.0);
}

#[test]
fn alt_svc_h3_is_followed_on_the_repeat_view() {
    let Some((c, ca)) = caddy("") else { return };
    let url = format!("https://127.0.0.1:{}/", c.port);
    let v = page(&url, &ca, &[]);
    common::assert_schema("page.schema.json", &v);
    let (first, reval) = (&v["views"][0], &v["views"][1]);
    // First visit: TCP (HTTP/2), the Alt-Svc learnt.
    assert_eq!(protocols(first), BTreeSet::from(["h2".to_string()]));
    let learnt = first["alt_svc"][0].as_str().unwrap();
    assert!(learnt.contains(&format!("h3=\":{}\"", c.port)), "{learnt}");
    // Repeat visit: QUIC and TCP race, as in Chromium before QUIC has
    // worked in the session (`GetTimeDelayForWaitingJob` is 0): on loopback
    // TCP may carry the document; what goes over HTTP/3 went because of the
    // Alt-Svc, and the report counts it.
    let on = |view: &Value, p: &str| {
        fetched(view)
            .into_iter()
            .filter(|e| e["protocol"] == p)
            .count()
    };
    assert!(protocols(reval).is_subset(&BTreeSet::from(["h2".to_string(), "h3".to_string()])));
    assert!(fetched(reval)
        .iter()
        .all(|e| (e["protocol"] == "h3") == (e["alt_svc"] == true)));
    let (n, h3) = (fetched(reval).len(), on(reval, "h3"));
    let why = reval["alt_svc"][0].as_str().unwrap();
    assert!(
        why.contains(&format!("{h3} of {n} requests over HTTP/3")),
        "{why}"
    );
    assert_eq!(urls(reval).len(), urls(first).len());
    // The next view: QUIC has worked, so TCP waits 300 ms behind it and
    // every request goes over HTTP/3.
    let cached = &v["views"][2];
    assert_eq!(
        protocols(cached),
        BTreeSet::from(["h3".to_string()]),
        "{cached:#}"
    );
    // Caddy agrees with every entry's protocol.
    let first_n = first["requests"].as_u64().unwrap();
    let h3_n = (h3 + on(cached, "h3")) as u64;
    assert_eq!(c.wait_logged("HTTP/3.0", h3_n), h3_n);
    assert_eq!(c.logged("HTTP/2.0"), first_n + on(reval, "h2") as u64);
    // The text report marks the rows.
    let out = redline(&["page", &url, "--cacert", &ca, "--no-save", "-q"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("h3#1"), "{text}");
    assert!(text.contains("[h3 via Alt-Svc]"), "{text}");
}

#[test]
fn a_dead_alternative_falls_back_to_tcp_and_the_audit_says_why() {
    let dead = redline_testkit::free_port();
    let hdr = format!("header Alt-Svc \"h3=\\\":{dead}\\\"; ma=3600\"");
    let Some((c, ca)) = caddy(&hdr) else { return };
    let url = format!("https://127.0.0.1:{}/", c.port);
    let t = Instant::now();
    let v = page(&url, &ca, &["--connect-timeout", "3s"]);
    assert!(t.elapsed() < Duration::from_secs(20));
    let reval = &v["views"][1];
    assert_eq!(reval["errors"], 0, "{reval:#}");
    assert!(!protocols(reval).contains("h3"), "{reval:#}");
    let fell: Vec<&Value> = fetched(reval)
        .into_iter()
        .filter(|e| !e["h3_fallback"].is_null())
        .collect();
    // QUIC and TCP race (Chromium's way): the refusal usually comes first
    // and the request that raced says so; TCP may win the race instead.
    assert!(fell.len() <= 1, "one failed attempt, then TCP for the view");
    for e in fell {
        let why = e["h3_fallback"].as_str().unwrap();
        assert!(why.contains(&format!("127.0.0.1:{dead}")), "{why}");
    }
    let note = reval["alt_svc"][0].as_str().unwrap();
    assert!(
        note.contains("failed")
            && note.contains("over TCP")
            && note.contains(&format!("127.0.0.1:{dead}")),
        "{note}"
    );
    assert_eq!(c.logged("HTTP/3.0"), 0);

    // The audit: advertised, but the port does not answer HTTP/3.
    let chk = alt_svc_check(&[&url, "--cacert", &ca, "--connect-timeout", "3s"]);
    assert_eq!(chk["severity"], "warning", "{chk:#}");
    let ev = chk["findings"][0]["evidence"].as_str().unwrap();
    assert!(
        ev.contains(&format!("127.0.0.1:{dead}")) && ev.contains("Caddy"),
        "{ev}"
    );
}

#[test]
fn a_silent_alternative_races_tcp_and_costs_the_page_nothing() {
    // A UDP port that takes datagrams and never answers (no ICMP either):
    // QUIC's handshake hangs until the connect time-out. Chromium starts
    // TCP at once beside it (QUIC has not worked yet in this profile), so the
    // repeat view waits for nothing; a loader that tried QUIC first would
    // wait the whole time-out before its first byte.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let hdr = format!("header Alt-Svc \"h3=\\\":{port}\\\"; ma=3600\"");
    let Some((c, ca)) = caddy(&hdr) else { return };
    let url = format!("https://127.0.0.1:{}/", c.port);
    let v = page(&url, &ca, &["--connect-timeout", "20s"]);
    let reval = &v["views"][1];
    assert_eq!(reval["errors"], 0, "{reval:#}");
    assert_eq!(
        protocols(reval),
        BTreeSet::from(["h2".to_string()]),
        "{reval:#}"
    );
    assert_eq!(urls(reval).len(), urls(&v["views"][0]).len());
    // The document's first byte came over TCP, not after QUIC gave up: the
    // whole view ends far inside the 20 s QUIC would have taken.
    let total = reval["elapsed_ms"].as_f64().unwrap();
    assert!(total < 10_000.0, "repeat view took {total} ms");
    assert!(
        fetched(reval).iter().all(|e| e["alt_svc"] != true),
        "{reval:#}"
    );
    assert_eq!(c.logged("HTTP/3.0"), 0);
    assert!(silent.local_addr().is_ok(), "the silent port stayed bound");
}

#[test]
fn audit_passes_a_working_alternative_and_flags_a_short_ma() {
    let Some((c, ca)) = caddy("") else { return };
    let url = format!("https://127.0.0.1:{}/", c.port);
    // Over HTTP/3, keep-alive is moot as on HTTP/2.
    let ka = audit_check("keep-alive", &[&url, "--cacert", &ca, "--http3"]);
    assert_eq!(ka["applicable"], false, "{ka:#}");
    let s = ka["summary"].as_str().unwrap();
    assert!(
        s.contains("moot on HTTP/3") && s.contains("over HTTP/3 multiplexed on 1 connection"),
        "{s}"
    );
    let chk = alt_svc_check(&[&url, "--cacert", &ca]);
    assert_eq!(chk["severity"], "ok", "{chk:#}");
    let s = chk["summary"].as_str().unwrap();
    assert!(
        s.contains("QUIC handshake (ALPN h3)") && s.contains("answered 200 as over TCP"),
        "{s}"
    );
    drop(c);

    let short = "header Alt-Svc \"h3=\\\":443\\\"; ma=10\"";
    let Some((c, ca)) = caddy(short) else { return };
    let url = format!("https://127.0.0.1:{}/", c.port);
    let chk = alt_svc_check(&[&url, "--cacert", &ca, "--no-probes"]);
    assert_eq!(chk["severity"], "warning", "{chk:#}");
    let ev = chk["findings"][0]["evidence"].as_str().unwrap();
    assert!(ev.contains("ma=10 s is too short"), "{ev}");
}

#[test]
fn nginx_without_http3_is_a_clear_error_and_not_met() {
    use common::nginx::{pki, start_nginx, NginxSite};
    let p = pki();
    let files = site();
    let Some(n) = start_nginx(&NginxSite {
        tag: "page-h3-nginx",
        files: &files,
        tls: Some(&p),
        h2: true,
        http_extra: "",
        types: "text/html html; text/css css; application/javascript js; image/png png;",
    }) else {
        return;
    };
    let ca = n.dir.join("ca.pem");
    std::fs::write(&ca, &p.ca_pem).unwrap();
    let ca = ca.to_str().unwrap();
    let url = format!("https://127.0.0.1:{}/", n.port);
    let t = Instant::now();
    let out = redline(&[
        "page",
        &url,
        "--http3",
        "--cacert",
        ca,
        "--no-save",
        "-q",
        "--connect-timeout",
        "3s",
    ]);
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert_eq!(out.status.code(), Some(1));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains(&format!("127.0.0.1:{} over UDP (HTTP/3)", n.port)),
        "{text}"
    );

    let chk = alt_svc_check(&[&url, "--cacert", ca]);
    assert_eq!(
        chk["summary"], "no Alt-Svc: HTTP/3 not advertised",
        "{chk:#}"
    );
    assert_eq!(chk["findings"][0]["severity"], "info");
}

/// Headless Chromium forced onto QUIC for the Caddy origin (its key pinned:
/// Chromium's QUIC trusts no test CA) loads what `page --http3` loads: the
/// same paths, every one over HTTP/3 by Caddy's log.
#[test]
fn chromium_over_quic_loads_what_page_http3_loads() {
    use base64::Engine;
    let Some(browser) = redline_testkit::chromium::chromium() else {
        redline_testkit::need::missing("chromium (apt-get install chromium)");
        return;
    };
    let Some((c, ca, pki)) = caddy_pki("") else {
        return;
    };
    let origin = format!("127.0.0.1:{}", c.port);
    let url = format!("https://{origin}/");
    let spki = base64::engine::general_purpose::STANDARD
        .encode(redline_testkit::pki::leaf_spki_sha256(&pki));
    let dir = redline_testkit::tmpdir("page-h3-chromium");
    let child = std::process::Command::new(browser)
        .args(redline_testkit::chromium::HEADLESS)
        .args([
            format!("--user-data-dir={}", dir.join("profile").display()),
            "--enable-quic".into(),
            format!("--origin-to-force-quic-on={origin}"),
            format!("--ignore-certificate-errors-spki-list={spki}"),
            "--dump-dom".into(),
            url.clone(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn chromium");
    let out = redline_testkit::proc::wait_limit(child, Duration::from_secs(90));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("over QUIC"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Caddy writes a line after each answer: a moment for the last ones.
    std::thread::sleep(Duration::from_millis(500));
    let seen = access_log(&c);
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|(p, _)| p == "HTTP/3.0"), "{seen:?}");
    // Headless Chromium asks for no favicon; the page names its icon.
    let chromium: BTreeSet<String> = seen.into_iter().map(|(_, u)| u).collect();
    let v = page(&url, &ca, &["--http3"]);
    let first = &v["views"][0];
    let ours: BTreeSet<String> = fetched(first)
        .iter()
        .filter(|e| e["after_load"] == false)
        .map(|e| {
            let u = e["url"].as_str().unwrap();
            u[u.find(&origin).unwrap() + origin.len()..].to_string()
        })
        .collect();
    assert_eq!(ours, chromium);
}
