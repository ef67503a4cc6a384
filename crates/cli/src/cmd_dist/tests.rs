//! Unit tests of `cmd_dist.rs`, kept in their own file so that file reads as its job.

use super::*;

fn v(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

/// Every spelling of a credential, seen by the real parser, goes to the
/// Secret; the arguments only reference it.
#[test]
fn credentials_go_to_the_secret_in_every_spelling() {
    for args in [
        &["-a", "u:s3cret", "http://x/"][..],
        &["-au:s3cret", "http://x/"],
        &["-a=u:s3cret", "http://x/"],
        &["--basic-auth=u:s3cret", "http://x/"],
        &["-ka", "u:s3cret", "http://x/"],
        &["-H", "Authorization: Bearer s3cret", "http://x/"],
        &["--header=cookie: a=s3cret", "http://x/"],
        &["-HX-Api-Key: s3cret", "http://x/"],
        &["-H", "X-Auth-Token: s3cret", "http://x/"],
        &["-H", "X-Whatever: Bearer s3cret", "http://x/"],
        &["http://user:s3cret@x/"],
        &["http://x/?api_key=s3cret"],
        &["-H", "X-Anything: s3cret", "http://x/"],
        &["-b", "{\"password\": \"s3cret\"}", "http://x/"],
    ] {
        let mut items = parse_run(&v(args)).unwrap();
        let mut b = Bundle::default();
        bundle_run(&mut items, &mut b).unwrap();
        let out = render_run(&items).join(" ");
        assert!(!out.contains("s3cret"), "{args:?}: {out}");
        assert!(out.contains("$(REDLINE_SECRET_0)"), "{args:?}: {out}");
        assert!(
            b.secret_env["REDLINE_SECRET_0"]
                .windows(6)
                .any(|w| w == b"s3cret"),
            "{args:?}"
        );
        // The rendered arguments parse back to the same plan.
        assert_eq!(parse_run(&render_run(&items)).unwrap(), items, "{args:?}");
    }
    // Not credentials: left as they are; every header value goes to the
    // Secret all the same.
    let mut items = parse_run(&v(&["-H", "Accept: x", "http://x/a@b", "-c", "3"])).unwrap();
    let mut b = Bundle::default();
    bundle_run(&mut items, &mut b).unwrap();
    assert_eq!(b.secret_env.len(), 1);
    assert_eq!(
        render_run(&items),
        // clap's order of definition: the request group before the connections group.
        v(&[
            "--header=Accept: $(REDLINE_SECRET_0)",
            "--connections=3",
            "http://x/a@b"
        ])
    );
    // A non-regular file is refused with one line.
    let mut items = parse_run(&v(&["--body-file", "/dev/zero", "http://x/"])).unwrap();
    let e = bundle_run(&mut items, &mut Bundle::default()).unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn plan_ids_agree_on_spelling_and_hide_secrets() {
    let seq = segment::Sequence::equal(2).unwrap();
    let a = plan_id(&v(&["-n", "100", "-auser:pw1", "http://x/"]), &seq, 2).unwrap();
    let b = plan_id(
        &v(&["http://x/", "--requests=100", "-a", "user:pw2"]),
        &seq,
        2,
    )
    .unwrap();
    assert_eq!(a.fingerprint, b.fingerprint);
    assert!(!serde_json::to_string(&a).unwrap().contains("pw1"));
    let c = plan_id(&v(&["-n", "200", "-m", "POST", "http://x/"]), &seq, 2).unwrap();
    let d = c.differences(&a).unwrap();
    assert!(d.contains("requests \"200\" vs \"100\""), "{d}");
    assert!(d.contains("method"), "{d}");
}

#[test]
fn token_files_are_bounded_and_regular() {
    let e = resolve_token(None, Some(std::path::Path::new("/dev/zero"))).unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
    let p = std::env::temp_dir().join(format!("redline-token-{}", std::process::id()));
    std::fs::write(&p, "x".repeat(5000)).unwrap();
    assert!(resolve_token(None, Some(&p))
        .unwrap_err()
        .contains("larger than"));
    std::fs::write(&p, "  t0k\n").unwrap();
    let t = resolve_token(None, Some(&p)).unwrap().unwrap();
    assert_eq!(t.bytes(), b"t0k");
    assert!(!format!("{t:?}").contains("t0k"));
    let _ = std::fs::remove_file(&p);
}
