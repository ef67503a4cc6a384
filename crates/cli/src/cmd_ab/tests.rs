//! Unit tests of `cmd_ab.rs`, kept in their own file so that file reads as its job.

use super::*;

fn v(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

#[test]
fn flags_have_abs_meanings() {
    let o = parse(&v(&["-kq", "-n100", "-c", "10", "-t", "5", "http://h/"]))
        .unwrap()
        .unwrap();
    assert!(o.keepalive && o.quiet);
    // -t after -n sets ab's 50000-request cap.
    assert_eq!(o.requests, Some(TIME_LIMIT_REQUESTS));
    assert_eq!(o.time_limit, Some(Duration::from_secs(5)));
    let o = parse(&v(&["-t", "5", "-n", "7", "http://h/"]))
        .unwrap()
        .unwrap();
    assert_eq!(o.requests, Some(7));
    assert!(!parse(&v(&["http://h/"])).unwrap().unwrap().keepalive);
}

#[test]
fn bad_flags_are_one_line() {
    for args in [
        &["-Z", "http://h/"][..],
        &["-n", "x", "http://h/"],
        &["-n"],
        &["-X", "p:1", "http://h/"],
        &["-c", "5", "-n", "2", "http://h/"],
        &[],
        &["-v", "4", "http://h/"],
    ] {
        let e = parse(&v(args)).unwrap_err();
        assert!(!e.contains('\n') && e.starts_with("ab: "), "{args:?}: {e}");
    }
    assert_eq!(printable("nginx \"x\"\u{1b}[2J"), "nginx \"x\"\\u{1b}[2J");
    assert!(parse(&v(&["-\u{1b}[31m"])).unwrap_err().contains("\\u{1b}"));
}

#[test]
fn url_parts_as_ab_prints_them() {
    assert_eq!(
        url_parts("http://127.0.0.1:8080/a?b=1").unwrap(),
        ("127.0.0.1".into(), 8080, "/a?b=1".into())
    );
    assert_eq!(
        url_parts("https://example.test/").unwrap(),
        ("example.test".into(), 443, "/".into())
    );
    assert!(url_parts("http://h").is_err());
    assert!(url_parts("h/x").is_err());
}

#[test]
fn ctime_layout() {
    // 2026-11-26 00:16:12 UTC was a Thursday.
    assert_eq!(ctime_string(1_795_652_172), "Thu Nov 26 00:16:12 2026");
}

#[test]
fn shown_urls_hide_user_information() {
    for (given, shown) in [
        ("http://u:PW@h:1/p?q=1", "http://u:[redacted]@h:1/p?q=1"),
        ("https://TOKEN@h/", "https://[redacted]@h/"),
        ("http://u:p@ss:w@h/", "http://u:[redacted]@h/"),
        ("http://u:PW@[bad/", "http://u:[redacted]@[bad/"),
        ("http://h/a?mail=x@y", "http://h/a?mail=x@y"),
        ("http://h/", "http://h/"),
        ("nonsense", "nonsense"),
    ] {
        assert_eq!(shown_url(given), shown, "{given}");
    }
    let e = url_parts("http://u:PASSWORD@h:99999/").unwrap_err();
    assert!(!e.contains("PASSWORD"), "{e}");
}
