//! Run records read back from files or the history: any input is a record or a
//! clear error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_stats::RunRecord;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(mut r) = RunRecord::from_json(s) {
        let other = r.clone();
        r += &other;
        let _ = redline_stats::Hist::from_base64(r.latency.to_base64().as_str());
    }
});
