//! `Location` headers (and the status they come with) for `-L`: resolved
//! against the request's URL and turned into the next hop's request, never a
//! panic; a hop to another origin never carries the original request's
//! credentials (basic auth from the URL, `-H` Authorization and Cookie),
//! in its HTTP/1 bytes or in its HTTP/2 form. The hop is rewritten from the
//! plan's request spec (`hop_spec`), as both drivers do.
//! (The host is a fixed loopback literal so no name is ever resolved.)
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_engine::http2::Http2Request;
use redline_engine::redirect::{hop_spec, origin_key, resolve_location, Cookies};
use redline_engine::{Plan, PlanArgs};
use std::sync::OnceLock;

fn plan() -> &'static Plan {
    static P: OnceLock<Plan> = OnceLock::new();
    P.get_or_init(|| {
        let mut a = PlanArgs::new("http://u:pw-SECRET@127.0.0.1:9/dir/page?q=1");
        a.headers = vec![
            "Cookie: c=cookie-SECRET".into(),
            "Proxy-Authorization: Basic proxy-SECRET".into(),
            "X-Keep: 1".into(),
        ];
        a.body = Some(b"body".to_vec());
        a.requests = Some(1);
        Plan::build(a).expect("a valid plan")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&status, rest)) = data.split_first() else {
        return;
    };
    let Ok(location) = std::str::from_utf8(rest) else {
        return;
    };
    // Input spelling the marker itself would make the check meaningless.
    if location.to_ascii_uppercase().contains("SECRET") || location.contains(['\r', '\n']) {
        return;
    }
    let status = [301, 302, 303, 307, 308][status as usize % 5];
    let p = plan();
    let base = url::Url::parse("http://127.0.0.1:9/dir/page?q=1").unwrap();
    let Ok(to) = resolve_location(&base, location) else {
        return;
    };
    // The URL parser drops tabs and newlines, so the marker can appear only now.
    if to.as_str().to_ascii_uppercase().contains("SECRET") {
        return;
    }
    assert!(to.scheme() == "http" || to.scheme() == "https");
    assert!(to.username().is_empty() && to.password().is_none());
    let same = origin_key(&to) == p.target.origin;
    for was_get in [false, true] {
        for jar in [Cookies::Given, Cookies::Jar("")] {
            let (spec, get) = hop_spec(&p.spec, status, &to, same, was_get, jar);
            let bytes = spec.encode_h1(false);
            let text = String::from_utf8_lossy(&bytes);
            // HTTP/2 may refuse a hop (a character it cannot carry), never panic.
            let h2 = Http2Request::from_spec(&spec, to.scheme())
                .map(|r| format!("{}{}{:?}", r.authority, r.path, r.headers))
                .unwrap_or_default();
            assert!(text.ends_with("\r\n\r\n") || text.ends_with("body"), "{text}");
            assert_eq!(get, was_get || matches!(status, 301..=303), "{text}");
            if !same {
                assert!(!text.contains("SECRET"), "credentials to {to}: {text}");
                assert!(!text.contains("dTpwdy1TRUNSRVQ"), "basic auth to {to}: {text}");
                assert!(!h2.contains("SECRET") && !h2.contains("dTpwdy1TRUNSRVQ"), "{h2}");
            }
        }
    }
});
