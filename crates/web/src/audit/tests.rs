//! Unit tests of `audit/mod.rs`, kept in their own file so that file reads as its job.

use super::*;

fn probe(origin: &str, third_party: bool, alpn: Option<&str>) -> crate::http::AlpnProbe {
    crate::http::AlpnProbe {
        origin: origin.into(),
        third_party,
        offered: vec!["h2".into(), "http/1.1".into()],
        alpn: alpn.map(str::to_string),
        h2: alpn == Some("h2"),
        tls_version: Some("TLSv1.3".into()),
        error: None,
        probed: false,
    }
}

#[test]
fn http2_grades_own_origins_and_lists_third_parties_apart() {
    let empty = Load {
        view: crate::load::View::First,
        entries: Vec::new(),
        elapsed_ms: 0.0,
        render_ms: None,
        requests: 0,
        from_cache: 0,
        not_modified: 0,
        wire_bytes: 0,
        decoded_bytes: 0,
        connections: 0,
        conns: Vec::new(),
        hosts: Vec::new(),
        errors: 0,
        truncated: false,
        discovery: Default::default(),
        started_at: String::new(),
        budget_exhausted: false,
        budget_used: 0,
        alt_svc: Vec::new(),
    };
    let run = |url: &str, p: &[crate::http::AlpnProbe]| {
        let a = audit(url, &empty, None, Vec::new(), p, &Probes::default());
        a.checks.into_iter().find(|c| c.id == "http2").unwrap()
    };
    let c = run("http://a.test/", &[]);
    assert!(!c.applicable);
    let c = run(
        "https://a.test/",
        &[
            probe("https://a.test:443", false, Some("h2")),
            probe("https://cdn.other:443", true, Some("http/1.1")),
        ],
    );
    assert_eq!((c.grade.as_str(), c.severity), ("A", Severity::Ok));
    assert!(c.findings.is_empty());
    assert_eq!(c.third_party.len(), 1);
    assert!(c.fix.is_none());
    let c = run(
        "https://a.test/",
        &[
            probe("https://a.test:443", false, None),
            probe("https://img.a.test:443", false, Some("h2")),
        ],
    );
    assert_eq!((c.score, c.severity), (60, Severity::Warning));
    assert!(c.findings[0].evidence.contains("ignored ALPN"));
    assert!(c.fix.unwrap().nginx.contains("http2 on;"));
}

#[test]
fn one_scale_grade_and_severity_agree_for_every_score() {
    let mut last = Severity::Ok;
    for score in (0..=100u32).rev() {
        let (g, sev) = rate(score);
        assert_eq!(g, grade(score));
        let want = match g {
            "A" => Severity::Ok,
            "B" => Severity::Info,
            "C" | "D" => Severity::Warning,
            _ => Severity::Error,
        };
        assert_eq!(sev, want, "{score}");
        assert!(sev >= last, "severity falls as the score falls: {score}");
        last = sev;
    }
    // A check's severity is the scale's, whatever its findings say: a
    // finding's severity caps the score, so the two cannot disagree.
    for worst in [
        Severity::Ok,
        Severity::Info,
        Severity::Warning,
        Severity::Error,
    ] {
        for score in [0, 49, 50, 65, 75, 85, 95, 100] {
            let f = if worst > Severity::Ok {
                vec![note(worst, "x".into())]
            } else {
                Vec::new()
            };
            let c = check("t", "t", "t", Some(score), String::new(), f, FIX_BUILD);
            assert_eq!(rate(c.score), (c.grade.as_str(), c.severity));
            if worst >= Severity::Warning {
                assert_eq!(c.severity, worst, "{worst:?} {score}: {c:?}");
            }
            assert_eq!(c.fix.is_some(), c.severity >= Severity::Info);
        }
    }
    let na = check("t", "t", "t", None, String::new(), Vec::new(), FIX_BUILD);
    assert_eq!(
        (na.grade.as_str(), na.severity, na.applicable),
        ("-", Severity::Ok, false)
    );
}

#[test]
fn grades() {
    assert_eq!(grade(100), "A");
    assert_eq!(grade(85), "B");
    assert_eq!(grade(50), "E");
    assert_eq!(grade(10), "F");
}

#[test]
fn minify_estimates() {
    let html =
        b"<html>\n\n    <!-- a comment -->\n    <body>   hi   </body>\n<pre>  keep  </pre></html>";
    let m = minified_html_len(html);
    assert!(m < html.len() - 20, "{m}");
    let css = b"/* c */\nbody {\n    color : red ;\n}\n";
    assert_eq!(minified_code_len(css, true), "body{color:red;}".len());
    let js = b"// c\nvar a = \"x  y\";\n";
    assert_eq!(minified_code_len(js, false), "var a=\"x  y\";".len());
}
