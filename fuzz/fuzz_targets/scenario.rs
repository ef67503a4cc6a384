//! Scenario files, CSV data and think times: parsed or refused with a message
//! that names the file, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_engine::scenario::{file, parse_csv, Think};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = file::parse(s, "fuzz.toml") {
        assert!(e.starts_with("fuzz.toml"), "{e}");
    }
    let _ = parse_csv(s);
    let _ = Think::parse(s);
    if let Some(n) = s.bytes().next() {
        let _ = file::request_line(s, n as usize);
        let _ = file::line_col(s, n as usize * 7);
    }
});
