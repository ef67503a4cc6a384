//! The plan's unit tests: request bytes and redaction, bad input, the
//! protocol choice (flags, ALPN answers) and the feature matrix.

use super::*;

#[test]
fn request_bytes_and_redaction() {
    let mut a = PlanArgs::new("http://user:s3cret@127.0.0.1:8080/x?y=1");
    a.headers = vec!["Cookie: id=42".into(), "X-Test: 1".into()];
    a.requests = Some(10);
    let p = Plan::build(a).unwrap();
    let req = String::from_utf8(p.request.clone()).unwrap();
    assert!(req.starts_with("GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
    assert!(req.contains("Authorization: Basic dXNlcjpzM2NyZXQ=\r\n"));
    assert!(req.contains("Cookie: id=42\r\n"));
    assert!(req.ends_with("\r\n\r\n"));
    let cfg = serde_json::to_string(&p.config).unwrap();
    assert!(!cfg.contains("s3cret"), "{cfg}");
    assert!(!cfg.contains("id=42"), "{cfg}");
    assert!(!cfg.contains("dXNlcjpzM2NyZXQ"), "{cfg}");
    assert!(p.target.display.contains(REDACTED));
    let close = String::from_utf8(p.request_close).unwrap();
    assert!(close.contains("Connection: close\r\n"));
}

#[test]
fn bad_inputs() {
    for (url, ok) in [
        ("http://127.0.0.1:1/", true),
        ("127.0.0.1:1", true),
        ("http://[::1]:1/", true),
        ("ftp://x/", false),
        ("http://", false),
        ("http://127.0.0.1:99999/", false),
        ("https://127.0.0.1/", true),
    ] {
        assert_eq!(Plan::build(PlanArgs::new(url)).is_ok(), ok, "{url}");
    }
    let mut a = PlanArgs::new("http://127.0.0.1:1/");
    a.headers = vec!["NoColon".into()];
    assert!(matches!(Plan::build(a), Err(PlanError::BadHeader(_))));
    // Found by the request_flags fuzz target: a header without its colon was
    // echoed whole, secret and all.
    let mut a = PlanArgs::new("http://127.0.0.1:1/");
    a.headers = vec!["Authorization Bearer s3cr3t-token".into()];
    let e = Plan::build(a).unwrap_err().to_string();
    assert!(!e.contains("s3cr3t"), "{e}");
    assert!(e.contains("Authorization"), "{e}");
    let mut a = PlanArgs::new("http://127.0.0.1:1/");
    a.headers = vec!["X-Bad\u{e9}\u{e9}: v\r\nInjected: 1 secret".into()];
    let e = Plan::build(a).unwrap_err().to_string();
    assert!(!e.contains("secret"), "{e}");
    let mut a = PlanArgs::new("http://127.0.0.1:1/");
    a.rate = Some(-1.0);
    assert!(Plan::build(a).is_err());
    let e = Plan::build(PlanArgs::new("http://u:pw@[bad/")).unwrap_err();
    assert!(!e.to_string().contains("pw"), "{e}");
}

#[test]
fn a_bad_method_is_one_short_line() {
    // The request_flags fuzz target fed control characters and long garbage.
    let mut a = PlanArgs::new("http://127.0.0.1:1/");
    a.method = Some(format!("GET\nX\u{1}{}", "Y".repeat(500)));
    let e = Plan::build(a).unwrap_err().to_string();
    assert!(!e.contains('\n') && !e.contains('\u{1}'), "{e}");
    assert!(e.len() < 120, "{e}");
}

#[test]
fn one_feature_matrix_decides_what_http2_runs() {
    use crate::pacer::parse_stages;
    assert!(Protocol::Http1.supports(Mode::Scenario));
    for m in [Mode::Stages, Mode::RateStages, Mode::FollowRedirects] {
        assert!(Protocol::Http2.supports(m), "{m:?}");
    }
    assert_eq!(Protocol::Http2.first_unsupported(&[Mode::Scenario]), None);
    assert!(Protocol::Http2.supports(Mode::Scenario));
    let stages = |rate: bool| StageArgs {
        stages: parse_stages("2s:5,2s:10").unwrap(),
        rate,
        step: false,
    };
    // --stages over h2c: the level counts streams, ⌈level/streams⌉ connections.
    let mut a = PlanArgs::new("http://127.0.0.1:1/");
    a.h2c = true;
    a.streams = Some(4);
    a.stages = Some(stages(false));
    let p = Plan::build(a).unwrap();
    assert_eq!(p.modes(), vec![Mode::Stages]);
    assert_eq!(p.protocol(), Protocol::Http2);
    assert_eq!(p.load.max_connections(), 3);
    assert_eq!(p.config.stages.as_ref().unwrap().unit, "streams");
    assert_eq!(p.threads, p.threads.min(3));
    // One stream per connection: a level is connections, as over HTTP/1.1.
    let mut a = PlanArgs::new("http://127.0.0.1:1/");
    a.h2c = true;
    a.stages = Some(stages(false));
    let p = Plan::build(a).unwrap();
    assert_eq!(p.load.max_connections(), 10);
    assert_eq!(p.config.stages.as_ref().unwrap().unit, "connections");
    // --rate-stages and -L run over HTTP/2 too.
    let mut a = PlanArgs::new("http://127.0.0.1:1/");
    a.h2c = true;
    a.stages = Some(stages(true));
    a.follow_redirects = true;
    let p = Plan::build(a).unwrap();
    assert_eq!(p.modes(), vec![Mode::RateStages, Mode::FollowRedirects]);
    assert_eq!(p.config.stages.as_ref().unwrap().unit, "rps");
    // A scenario too.
    let dir = std::env::temp_dir().join(format!("redline-plan-h2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    std::fs::write(&file, "name = \"s\"\n[[request]]\npath = \"/\"\n").unwrap();
    let mut a = PlanArgs::new("http://127.0.0.1:1/");
    a.h2c = true;
    a.scenario = Some((file, false));
    let p = Plan::build(a).unwrap();
    assert_eq!(p.modes(), vec![Mode::Scenario]);
    assert_eq!(p.protocol(), Protocol::Http2);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(h2_connections(0, 4), 0);
    assert_eq!(h2_connections(1, 4), 1);
    assert_eq!(h2_connections(8, 4), 2);
    assert_eq!(h2_connections(9, 4), 3);
}

#[test]
fn http2_options() {
    let build = |url: &str, f: &dyn Fn(&mut PlanArgs)| {
        let mut a = PlanArgs::new(url);
        f(&mut a);
        Plan::build(a)
    };
    let p = build("https://127.0.0.1:1/", &|a| {
        a.http2 = true;
        a.streams = Some(10);
    })
    .unwrap();
    assert_eq!((p.wire, p.alpn), (Wire::H2Tls, Alpn::Fixed));
    assert_eq!(p.streams, 10);
    assert_eq!(p.config.http_version, "2");
    assert_eq!(p.config.streams, Some(10));
    let p = build("http://127.0.0.1:1/", &|a| a.h2c = true).unwrap();
    assert_eq!((p.wire, p.alpn), (Wire::H2c, Alpn::Fixed));
    assert_eq!(p.streams, 1);
    let p = build("http://127.0.0.1:1/", &|_| {}).unwrap();
    assert_eq!((p.wire, p.alpn), (Wire::Http11, Alpn::Fixed));
    assert_eq!(p.config.streams, None);
    let p = build("https://127.0.0.1:1/", &|a| {
        a.http3 = true;
        a.streams = Some(8);
    })
    .unwrap();
    assert_eq!((p.wire, p.alpn), (Wire::H3, Alpn::Fixed));
    assert_eq!((p.protocol(), p.streams), (Protocol::Http3, 8));
    assert!(p.protocol().multiplexed());
    assert_eq!(p.config.http_version, "3");
    assert_eq!(p.config.streams, Some(8));
    for (url, f, want) in [
        (
            "http://127.0.0.1:1/",
            &(|a: &mut PlanArgs| a.http2 = true) as &dyn Fn(&mut PlanArgs),
            "https://",
        ),
        (
            "https://127.0.0.1:1/",
            &|a: &mut PlanArgs| a.h2c = true,
            "http://",
        ),
        (
            "http://127.0.0.1:1/",
            &|a: &mut PlanArgs| a.streams = Some(4),
            "--http2",
        ),
        (
            "http://127.0.0.1:1/",
            &|a: &mut PlanArgs| {
                a.h2c = true;
                a.streams = Some(0)
            },
            "at least 1",
        ),
        (
            "http://127.0.0.1:1/",
            &|a: &mut PlanArgs| {
                a.h2c = true;
                a.http10 = true
            },
            "--http1.0",
        ),
        (
            "https://127.0.0.1:1/",
            &|a: &mut PlanArgs| {
                a.http2 = true;
                a.h2c = true
            },
            "together",
        ),
        (
            "http://127.0.0.1:1/",
            &|a: &mut PlanArgs| a.http3 = true,
            "https://",
        ),
        (
            "https://127.0.0.1:1/",
            &|a: &mut PlanArgs| {
                a.http3 = true;
                a.http11 = true
            },
            "--http1.1",
        ),
    ] {
        let e = build(url, f).unwrap_err().to_string();
        assert!(e.contains(want), "{url}: {e}");
    }
}

/// The HTTP/1 bytes the worker writes are what they were before the request
/// spec existed (byte for byte), and the same spec gives the HTTP/2 form.
#[test]
fn one_spec_two_encodings() {
    let ua = format!("User-Agent: redline/{}\r\n", env!("CARGO_PKG_VERSION"));
    let mut a = PlanArgs::new("http://127.0.0.1:8080/p?q=1");
    a.body = Some(b"hi".to_vec());
    a.headers = vec![
        "X-A: 1".into(),
        "Connection: x".into(),
        "Content-Length: 9".into(),
    ];
    a.requests = Some(1);
    let p = Plan::build(a.clone()).unwrap();
    let head = format!(
        "POST /p?q=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n{ua}Accept: */*\r\nX-A: 1\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: 2\r\n"
    );
    assert_eq!(String::from_utf8_lossy(&p.request), format!("{head}\r\nhi"));
    assert_eq!(
        String::from_utf8_lossy(&p.request_close),
        format!("{head}Connection: close\r\n\r\nhi")
    );
    // HTTP/1.0 asks for keep-alive; a user's Host is the authority in both forms.
    a.http10 = true;
    a.body = None;
    a.method = Some("head".into());
    a.headers = vec!["Host: example.test".into()];
    let p = Plan::build(a.clone()).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&p.request),
        format!("HEAD /p?q=1 HTTP/1.0\r\n{ua}Accept: */*\r\nHost: example.test\r\nConnection: keep-alive\r\n\r\n")
    );
    assert!(p.head_request);
    let h2 = p.spec.to_h2("http").unwrap();
    assert_eq!(h2.method, http::Method::HEAD);
    assert_eq!(h2.uri.to_string(), "http://example.test/p?q=1");
    assert!(h2.headers.get("host").is_none());
    assert!(h2.body.is_empty());
}

/// ALPN is settled in the plan: an https run that leaves the version open
/// takes the server's answer (asked once by the build, or known from an
/// earlier plan), and the record says so; flags and cleartext URLs fix it.
#[test]
fn the_protocol_is_decided_in_the_plan() {
    let p = Plan::build(PlanArgs::new("https://127.0.0.1:1/")).unwrap();
    assert_eq!((p.wire, p.alpn), (Wire::Http11, Alpn::Unasked));
    // Asked while building: nothing listens on port 1, the probe gets no
    // answer, HTTP/1.1 stays.
    let mut a = PlanArgs::new("https://127.0.0.1:1/");
    a.ask_alpn = true;
    let q = Plan::build(a).unwrap();
    assert_eq!(
        (q.wire, q.alpn, q.note.as_deref()),
        (Wire::Http11, Alpn::NotH2, None)
    );
    assert_eq!(q.config.negotiated, None);
    let mut a = PlanArgs::new("https://127.0.0.1:1/");
    a.alpn = Some(Alpn::PickedH2);
    let mut p = Plan::build(a.clone()).unwrap();
    assert_eq!((p.wire, p.protocol()), (Wire::H2Tls, Protocol::Http2));
    assert_eq!(p.config.http_version, "2");
    assert_eq!(p.config.streams, Some(1));
    assert_eq!(
        p.config.negotiated.as_deref(),
        Some(crate::alpn::NEGOTIATED_H2)
    );
    assert_eq!(p.resolve(), None, "asked once only");
    // A request HTTP/2 cannot carry stays on HTTP/1.1, with a note.
    a.headers = vec!["X-Ctl: a\u{1}b".into()];
    let mut p = Plan::build(a.clone()).unwrap();
    assert_eq!(p.wire, Wire::Http11);
    p.alpn = Alpn::PickedH2;
    let note = p.settle_alpn().unwrap();
    assert!(
        note.contains("x-ctl") && note.contains("HTTP/1.1"),
        "{note}"
    );
    // Flags and the scheme fix the version: nothing is asked.
    for (url, f, wire) in [
        (
            "https://127.0.0.1:1/",
            (|a: &mut PlanArgs| a.http11 = true) as fn(&mut PlanArgs),
            Wire::Http11,
        ),
        (
            "https://127.0.0.1:1/",
            |a: &mut PlanArgs| a.http10 = true,
            Wire::Http10,
        ),
        (
            "https://127.0.0.1:1/",
            |a: &mut PlanArgs| a.http2 = true,
            Wire::H2Tls,
        ),
        (
            "http://127.0.0.1:1/",
            |a: &mut PlanArgs| a.alpn = Some(Alpn::PickedH2),
            Wire::Http11,
        ),
        (
            "http://127.0.0.1:1/",
            |a: &mut PlanArgs| a.h2c = true,
            Wire::H2c,
        ),
    ] {
        let mut a = PlanArgs::new(url);
        f(&mut a);
        let mut p = Plan::build(a).unwrap();
        assert_eq!((p.wire, p.alpn), (wire, Alpn::Fixed), "{url}");
        assert_eq!(p.resolve(), None);
        assert_eq!(p.config.http_version, wire.record_version());
        assert_eq!(p.config.negotiated, None);
    }
}
