//! Server status pages (`--server-status`: Apache and lighttpd `?auto`,
//! nginx stub_status, php-fpm's page) and status URLs: parsed or refused,
//! never a panic; a parsed page's counts are what its lines say (a busy count
//! is always given), and a URL with credentials is refused without echoing them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_watch::status::{parse, StatusKind, StatusUrl};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(kind) = StatusKind::detect(text) {
        if let Ok((s, slots)) = parse(kind, text) {
            assert!(s.busy.is_some());
            if let Some(n) = slots {
                assert_eq!(s.states.values().sum::<u64>(), n);
            }
        }
    }
    for kind in [
        StatusKind::Apache,
        StatusKind::Nginx,
        StatusKind::Lighttpd,
        StatusKind::PhpFpm,
    ] {
        let _ = parse(kind, text);
    }
    match StatusUrl::parse(text) {
        Ok(u) => {
            assert!(!u.host.is_empty());
            assert!(u.path.starts_with('/'));
        }
        Err(e) => assert!(!text.contains('@') || !e.contains(text), "{e}"),
    }
});
