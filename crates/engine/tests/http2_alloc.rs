//! The HTTP/2 session's plain-GET path allocates nothing per request once
//! its buffers are warm: a counting global allocator around 1,000 GETs
//! answered with nginx's usual response head (its own test binary, so no
//! other test's allocations are counted).

use redline_engine::http2::{frame, hpack, Http2Request, Http2Session};
use redline_engine::session::{Event, Session, Want};
use redline_testkit::alloc::{self, Counting};

#[global_allocator]
static A: Counting = Counting;

fn answer(sid: u32) -> Vec<u8> {
    let mut block = Vec::new();
    for (k, v) in [
        (":status", "200"),
        ("server", "nginx/1.22.1"),
        ("date", "Sun, 22 Nov 2026 02:00:00 GMT"),
        ("content-type", "text/html"),
        ("content-length", "440"),
        ("etag", "\"6740d8a0-1b8\""),
    ] {
        hpack::encoder::field(&mut block, k, v);
    }
    let mut v = Vec::new();
    frame::write_head(&mut v, block.len(), frame::HEADERS, frame::END_HEADERS, sid);
    v.extend_from_slice(&block);
    frame::write_head(&mut v, 440, frame::DATA, frame::END_STREAM, sid);
    v.extend(std::iter::repeat_n(b'x', 440));
    v
}

#[test]
fn a_plain_get_allocates_nothing_per_request() {
    let req = Http2Request::from_parts(
        "GET",
        "http",
        "t:80",
        "/index.html",
        &[("accept".into(), "*/*".into())],
        Default::default(),
    )
    .unwrap();
    let mut s = Http2Session::new();
    s.connect();
    s.bytes_in(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    let answers: Vec<Vec<u8>> = (0..1100u32).map(|i| answer(2 * i + 1)).collect();
    let mut out = Vec::with_capacity(1 << 16);
    let one = |i: usize, s: &mut Http2Session, out: &mut Vec<u8>| {
        let id = s.submit(&req, Want::NOTHING).unwrap();
        out.clear();
        s.bytes_out(out);
        // Split in two reads, as a socket may give it.
        let a = &answers[i];
        s.bytes_in(&a[..50]);
        s.bytes_in(&a[50..]);
        let mut done = false;
        while let Some(ev) = s.poll_event() {
            if let Event::Done {
                id: d, body_bytes, ..
            } = ev
            {
                assert_eq!((d, body_bytes), (id, 440));
                done = true;
            }
        }
        assert!(done);
    };
    for i in 0..100 {
        one(i, &mut s, &mut out);
    }
    alloc::start();
    for i in 100..1100 {
        one(i, &mut s, &mut out);
    }
    let n = alloc::stop();
    assert_eq!(n, 0, "{n} allocations in 1,000 GETs");
}
