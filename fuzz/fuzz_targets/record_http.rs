//! What `redline fetch` and the coordinator's record server read from peers
//! they cannot trust: a URL, an HTTP answer, a request head, and the record
//! in the answer with the checks `fetch` applies. Any bytes are a value or a
//! clear error, never a panic or a hang.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_dist::coordinator::check_consistent;
use redline_dist::record_http::{parse_answer, request_parts, RecordUrl};

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = RecordUrl::parse(s).map(|u| u.display());
        let _ = request_parts(s);
    }
    if let Ok(body) = parse_answer(data.to_vec(), "fuzz") {
        if let Ok(text) = std::str::from_utf8(&body) {
            if let Ok(rec) = redline_stats::RunRecord::from_json(text) {
                let _ = check_consistent(&rec);
            }
        }
    }
});
