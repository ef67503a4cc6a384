//! Any bytes from a server, split anywhere, into an HTTP/1.1 session with up
//! to 4 pipelined requests (each wanting some of Server, Location, headers,
//! body): no panic, and after the close every request ended exactly once,
//! in submission order (answers first, then failures), with a head told at
//! most once and before its end; the session is closed after the close.
#![no_main]
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use redline_engine::session::{Event, H1Request, H1Session, Session, Want};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let depth = (data[0] & 3) as usize + 1;
    let head_request = data[0] & 4 != 0;
    let want = Want {
        server: data[1] & 1 != 0,
        location: data[1] & 2 != 0,
        capture: (data[1] & 4 != 0).then_some((data[1] & 8 != 0, data[1] & 16 != 0)),
        ..Want::NOTHING
    };
    let recycle = data[1] & 32 != 0;
    let split = data[2] as usize;
    let body = &data[3..];
    let req = H1Request {
        wire: Bytes::from_static(b"GET / HTTP/1.1\r\nHost: f\r\n\r\n"),
        head: head_request,
    };
    let mut s = H1Session::new(depth);
    let ids: Vec<u64> = (0..depth).map(|_| s.submit(&req, want).unwrap()).collect();
    let mut out = Vec::new();
    assert_eq!(s.bytes_out(&mut out), depth * req.wire.len());
    let mut events = Vec::new();
    for part in body.chunks(split.max(1)) {
        s.bytes_in(part);
        while let Some(mut ev) = s.poll_event() {
            if let Event::Done { answer, .. } = &mut ev {
                if let (true, Some(a)) = (recycle, answer.take()) {
                    s.recycle(a);
                }
            }
            events.push(ev);
        }
    }
    s.eof();
    while let Some(ev) = s.poll_event() {
        events.push(ev);
    }
    assert!(s.is_closed());
    assert_eq!(s.capacity(), 0);
    // Every request ended once, in order; a head only before its own end.
    let mut ended = Vec::new();
    let mut headed: Vec<u64> = Vec::new();
    let mut failing = false;
    for ev in &events {
        match ev {
            Event::Head { id, .. } => {
                assert!(!ended.contains(id) && !headed.contains(id), "{events:?}");
                headed.push(*id);
            }
            Event::Done { id, status, .. } => {
                assert!(!failing, "an answer after a failure: {events:?}");
                assert!((100..1000).contains(status));
                ended.push(*id);
            }
            Event::Failed { id, .. } => {
                failing = true;
                ended.push(*id);
            }
        }
    }
    assert_eq!(ended, ids, "{events:?}");
});
