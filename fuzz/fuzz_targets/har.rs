//! HAR files (`redline import har`): any input is imported or refused with
//! one line naming the file, never a panic; an imported scenario always
//! parses as a scenario file, and without --keep-secrets no credential
//! header's value reaches it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_engine::har::{import, Options};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    for keep in [false, true] {
        let opts = Options {
            keep_secrets: keep,
            all_hosts: keep,
        };
        match import(s, "fuzz.har", opts) {
            Ok(got) => {
                if let Err(e) = redline_engine::scenario::file::parse(&got.toml, "out.toml") {
                    panic!("imported scenario does not parse: {e}\n{}", got.toml);
                }
            }
            Err(e) => {
                assert!(e.starts_with("fuzz.har"), "{e}");
                assert!(
                    !e.contains('\n') && !e.chars().any(char::is_control),
                    "{e:?}"
                );
            }
        }
    }
    // The input in a URL's path and query, as a header name and in a body, next
    // to credentials:
    // without --keep-secrets no credential's value is in the scenario.
    // URL parsing drops tabs and newlines, so look at the input without them
    // (regression: `1SECR\n\n\n\n\n\nETMARK\n\n3\n` became `?1SECRETMARK3`).
    let joined: String = s.chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
    if joined.to_ascii_uppercase().contains("SECRETMARK") {
        return;
    }
    let har = serde_json::json!({"log": {"entries": [{
        "startedDateTime": "2026-01-01T00:00:00Z",
        "request": {
            "method": "POST",
            // In the path (encoded) and as query text before the token pair.
            "url": format!(
                "http://a.test/{}?{s}&token=SECRETMARK1",
                url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
            ),
            "headers": [
                {"name": "Authorization", "value": "SECRETMARK2"},
                {"name": "Cookie", "value": "sid=SECRETMARK3"},
                {"name": s, "value": "x"},
            ],
            "postData": {"mimeType": "application/json",
                         "text": format!("{{\"password\":\"SECRETMARK4\",\"x\":{}}}", serde_json::Value::String(s.to_string()))},
        }
    }]}});
    if let Ok(got) = import(&har.to_string(), "fuzz.har", Options::default()) {
        assert!(!got.toml.contains("SECRETMARK"), "{}", got.toml);
    }
});
