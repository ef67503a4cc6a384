//! The coordinator–agent protocol as the coordinator reads it from a peer it
//! cannot trust: any bytes are messages or clear errors, never a panic, a
//! hang or an allocation beyond the line limit; each message then goes
//! through the checks the coordinator applies (the proof, plan differences,
//! `ready` numbers, histograms, records).
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_dist::coordinator::{check_record, sane_ready, Window, MAX_HIST_B64};
use redline_dist::protocol::{self, Msg, PlanId};
use std::io::BufReader;

fuzz_target!(|data: &[u8]| {
    let mut r = BufReader::new(data);
    // Bounded: at most 64 messages per input (each read consumes at least a byte).
    for _ in 0..64 {
        let m = match protocol::recv_limited(&mut r, protocol::MAX_HELLO_LINE) {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => break,
        };
        match m {
            Msg::Register {
                index, auth, plan, ..
            } => {
                let plan = plan.unwrap_or_default();
                let _ = protocol::auth_ok(
                    b"token",
                    "00",
                    index,
                    &plan.fingerprint,
                    auth.as_deref().unwrap_or(""),
                );
                let _ = plan.differences(&PlanId::new(Default::default()));
            }
            Msg::Ready {
                offset_ms,
                rtt_ms,
                expected_s,
                requests,
                ..
            } => {
                let _ = sane_ready(offset_ms, rtt_ms, expected_s, requests);
            }
            Msg::Second { hist, .. } if hist.len() <= MAX_HIST_B64 => {
                let _ = redline_stats::Hist::from_base64(&hist);
            }
            Msg::Done {
                record: Some(v), ..
            } => {
                if let Ok(rec) = serde_json::from_value::<redline_stats::RunRecord>(*v) {
                    let w = Window {
                        start_ms: 1.7e12,
                        now_ms: 1.7e12 + 60_000.0,
                        offset_ms: 0.0,
                        index: 0,
                        count: 1,
                    };
                    let _ = check_record(&rec, &w);
                }
            }
            _ => {}
        }
    }
    // The line parser on its own, on the whole input.
    let _ = protocol::parse_line(data);
});
