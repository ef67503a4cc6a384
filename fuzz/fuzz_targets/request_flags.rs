//! Paths, queries, methods and header flags from the command line: a plan or a
//! clear error, never a panic, and a secret never in the recorded config.
//! The plan is also converted to its HTTP/2 form (`Http2Request::from_spec`,
//! what the HTTP/2 driver's `prepare` does with it).
//! (The host is a fixed loopback literal so no name is ever resolved.)
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_engine::{Plan, PlanArgs};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    // The secrets below are marked SECRET; input that carries the marker itself
    // would make the check meaningless.
    // Any case: the method is upper-cased, so `secret` in it would become the marker.
    if s.to_ascii_uppercase().contains("SECRET") {
        return;
    }
    let mut parts = s.splitn(4, '\n');
    let path = parts.next().unwrap_or("");
    let method = parts.next().unwrap_or("");
    let header = parts.next().unwrap_or("");
    let auth = parts.next().unwrap_or("");
    let mut a = PlanArgs::new(format!("http://u:pw-SECRET@127.0.0.1:9/{path}"));
    if !method.is_empty() {
        a.method = Some(method.to_string());
    }
    a.headers = vec![header.to_string(), format!("Cookie: c-SECRET{header}")];
    if !auth.is_empty() {
        a.basic_auth = Some(format!("user:{auth}"));
    }
    a.requests = Some(1);
    match Plan::build(a) {
        Ok(p) => {
            let shown = format!("{:?} {:?}", p.config.url, p.config.headers);
            assert!(!shown.contains("SECRET"), "{shown}");
            // The same request in HTTP/2 form (as the HTTP/2 driver makes it):
            // converted or refused with a clear error, never a panic or a secret.
            if let Err(e) = redline_engine::http2::Http2Request::from_spec(&p.spec, p.scheme()) {
                assert!(!e.contains("SECRET"), "{e}");
            }
        }
        Err(e) => {
            assert!(!e.to_string().contains("SECRET"), "{e}");
        }
    }
});
