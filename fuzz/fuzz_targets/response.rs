//! Any bytes from a server, split anywhere, must end in a response, an error
//! kind or "need more" — never a panic — with bounded buffering.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_engine::h1::{Progress, ResponseReader, MAX_HEAD};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let head_request = data[0] & 1 == 1;
    let split = data[1] as usize;
    let body = &data[2..];
    let mut r = ResponseReader::new();
    let mut used_total = 0usize;
    for part in body.chunks(split.max(1)) {
        match r.feed(part, head_request) {
            Ok(Progress::Done { used }) => {
                assert!(used <= part.len());
                used_total += used;
                // The next response starts fresh on the same reader.
                r.reset();
                break;
            }
            Ok(Progress::NeedMore) => used_total += part.len(),
            Err(_) => break,
        }
    }
    assert!(used_total <= body.len());
    let _ = r.eof();
    assert!(r.status < 1000);
    let _ = MAX_HEAD;
});
