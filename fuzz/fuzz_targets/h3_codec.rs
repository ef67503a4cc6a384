//! Any bytes from an HTTP/3 server's stream, split anywhere: the frame reader
//! takes every byte (as a header's or a payload's) and finds the same frames
//! at every split, and a QPACK field section decodes or is
//! refused without a panic, its fields within the input's bounds.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_engine::http2::hpack::Sink;
use redline_engine::http3::frame::{FrameReader, Piece};
use redline_engine::http3::qpack;

struct Count(usize, bool);

impl Sink for Count {
    fn wants(&mut self, name: &[u8]) -> bool {
        self.1 || name.len() % 2 == 0
    }
    fn field(&mut self, name: &[u8], value: Option<&[u8]>) {
        self.0 += name.len() + value.map_or(0, <[u8]>::len);
    }
}

/// (type, payload length) of each frame, `data` read in two parts.
fn frames(data: &[u8], split: usize) -> Vec<(u64, u64)> {
    let mut r = FrameReader::default();
    let mut out: Vec<(u64, u64)> = Vec::new();
    let cut = split.min(data.len());
    for part in [&data[..cut], &data[cut..]] {
        let mut at = 0;
        for _ in 0..1_000_000 {
            match r.next(part, &mut at) {
                Piece::NeedMore => break,
                Piece::Start { ty, .. } => out.push((ty, 0)),
                Piece::Payload { n, .. } => {
                    at += n;
                    if let Some(f) = out.last_mut() {
                        f.1 += n as u64;
                    }
                }
            }
        }
        // Every byte of the part was taken: header bytes or payload.
        assert_eq!(at, part.len());
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let split = data[0] as usize;
    let body = &data[1..];
    let whole = frames(body, body.len());
    let parts = frames(body, split);
    assert_eq!(whole, parts);
    let mut sink = Count(0, data[0] & 1 != 0);
    if let Ok(size) = qpack::decode(body, &mut sink, &mut Vec::new(), &mut Vec::new()) {
        assert!(size >= sink.0);
    }
});
