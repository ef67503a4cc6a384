//! The HTTP/1.1 session allocates nothing per request once warm, the way the
//! HTTP/1 worker drives it: the plan's shared request bytes submitted and
//! written from `pending_out`, nginx's usual answer fed in two reads with
//! the worker's shared head memo; and a scenario request that keeps headers
//! and body reuses its recycled answer's buffers. A counting global
//! allocator around 1,000 requests of each (its own test binary, so no
//! other test's allocations are counted).

use bytes::Bytes;
use redline_engine::h1::HeadMemo;
use redline_engine::session::{Event, H1Request, H1Session, Session, Want};
use redline_testkit::alloc::{self, Counting};

#[global_allocator]
static A: Counting = Counting;

const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 22 Nov 2026 02:00:00 GMT\r\n\
Content-Type: text/html\r\nContent-Length: 440\r\nConnection: keep-alive\r\nSet-Cookie: s=1\r\n\r\n";

/// Runs `n` requests with `want`, recycling answers; the allocations counted
/// over the last 1,000.
fn count(want: Want) -> u64 {
    let mut answer = HEAD.to_vec();
    answer.extend(std::iter::repeat_n(b'x', 440));
    // As the worker builds it: once, from the plan's bytes (shared, not copied per request).
    let req = H1Request {
        wire: Bytes::copy_from_slice(b"GET /index.html HTTP/1.1\r\nHost: t\r\nAccept: */*\r\n\r\n"),
        head: false,
    };
    let mut s = H1Session::new(1);
    let mut memo = HeadMemo::new();
    let mut one = |s: &mut H1Session| {
        let id = s.submit(&req, want).unwrap();
        let n = s.pending_out().len();
        assert_eq!(n, req.wire.len());
        s.consume_out(n);
        s.bytes_in_memo(&answer[..50], &mut memo);
        s.bytes_in_memo(&answer[50..], &mut memo);
        let mut done = false;
        while let Some(ev) = s.poll_event() {
            if let Event::Done {
                id: d,
                body_bytes,
                answer,
                ..
            } = ev
            {
                assert_eq!((d, body_bytes), (id, 440));
                if let Some(a) = answer {
                    let cap = a.capture.as_deref().expect("capture");
                    assert_eq!(
                        cap.body.len(),
                        if want.capture == Some((true, true)) {
                            440
                        } else {
                            0
                        }
                    );
                    s.recycle(a);
                }
                done = true;
            }
        }
        assert!(done && !s.is_closed());
    };
    warm_then_count(|| one(&mut s))
}

/// Runs `one` 100 times to warm its buffers, then counts the allocations
/// of 1,000 more.
fn warm_then_count(mut one: impl FnMut()) -> u64 {
    for _ in 0..100 {
        one();
    }
    alloc::start();
    for _ in 0..1000 {
        one();
    }
    alloc::stop()
}

#[test]
fn a_plain_get_allocates_nothing_per_request() {
    let n = count(Want::NOTHING);
    assert_eq!(n, 0, "{n} allocations in 1,000 GETs");
}

/// The bare reader with one reused capture, as the worker drove it before
/// the session: what the parser itself allocates for kept headers.
fn count_bare_reader() -> u64 {
    use redline_engine::h1::{Capture, Progress, ResponseReader};
    let mut answer = HEAD.to_vec();
    answer.extend(std::iter::repeat_n(b'x', 440));
    let mut r = ResponseReader::new();
    r.capture = Some(Box::new(Capture {
        want_headers: true,
        want_body: true,
        ..Capture::default()
    }));
    let mut memo = HeadMemo::new();
    let mut one = |r: &mut ResponseReader| {
        r.reset();
        let _ = r.feed_memo(&answer[..50], false, Some(&mut memo)).unwrap();
        let p = r.feed_memo(&answer[50..], false, Some(&mut memo)).unwrap();
        assert!(matches!(p, Progress::Done { .. }));
        assert_eq!(r.capture.as_ref().unwrap().body.len(), 440);
    };
    warm_then_count(|| one(&mut r))
}

#[test]
fn a_scenario_request_keeping_headers_and_body_reuses_its_buffers() {
    let want = Want {
        server: false,
        location: false,
        capture: Some((true, true)),
        ..Want::NOTHING
    };
    // The parser makes each kept header's name and value anew; the session
    // adds nothing to that: its answer and capture boxes, the body and the
    // header list are reused.
    let session = count(want);
    let bare = count_bare_reader();
    assert!(bare >= 14 * 1000, "{bare}: the headers are kept");
    assert_eq!(
        session, bare,
        "session {session} vs bare reader {bare} allocations"
    );
}
