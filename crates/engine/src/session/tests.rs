//! Byte-buffer tests of the sessions: no socket, no task.

use super::*;
use bytes::Bytes;
use redline_stats::MalformedKind;

fn events<S: Session>(s: &mut S) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn get(path: &str) -> H1Request {
    H1Request {
        wire: Bytes::from(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n")),
        head: false,
    }
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

#[test]
fn h1_one_request_on_every_split_of_its_answer() {
    for cut in 0..=OK.len() {
        let mut s = H1Session::new(1);
        s.connect();
        assert_eq!(s.capacity(), 1);
        let id = s.submit(&get("/a"), Want::NOTHING).unwrap();
        assert_eq!(s.capacity(), 0);
        assert_eq!(s.submit(&get("/b"), Want::NOTHING), Err(SubmitError::Full));
        let mut out = Vec::new();
        s.bytes_out(&mut out);
        assert_eq!(out, b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
        s.bytes_in(&OK[..cut]);
        s.bytes_in(&OK[cut..]);
        let ev = events(&mut s);
        let done = Event::Done {
            id,
            status: 200,
            body_bytes: 5,
            answer: None,
        };
        // The head is told apart only when the body comes in a later read.
        let head_alone = (OK.len() - 5..OK.len()).contains(&cut);
        let want = if head_alone {
            vec![Event::Head { id, status: 200 }, done]
        } else {
            vec![done]
        };
        assert_eq!(ev, want, "cut at {cut}");
        assert_eq!(s.capacity(), 1);
        assert!(!s.is_closed());
    }
}

#[test]
fn h1_pipelined_answers_in_order_and_close_ends_the_rest() {
    let mut s = H1Session::new(3);
    let ids: Vec<_> = (0..3)
        .map(|_| s.submit(&get("/"), Want::NOTHING).unwrap())
        .collect();
    let mut out = Vec::new();
    s.bytes_out(&mut out);
    assert_eq!(out.len(), 3 * get("/").wire.len());
    let mut two = OK.to_vec();
    two.extend_from_slice(
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    s.bytes_in(&two);
    let ev = events(&mut s);
    assert_eq!(ev.len(), 3, "{ev:?}");
    assert_eq!(
        ev[0],
        Event::Done {
            id: ids[0],
            status: 200,
            body_bytes: 5,
            answer: None
        }
    );
    assert_eq!(
        ev[1],
        Event::Done {
            id: ids[1],
            status: 404,
            body_bytes: 0,
            answer: None
        }
    );
    assert!(matches!(ev[2], Event::Failed { id, kind: ErrorKind::Closed, .. } if id == ids[2]));
    assert!(s.is_closed());
    assert_eq!(s.capacity(), 0);
    assert_eq!(s.submit(&get("/"), Want::NOTHING), Err(SubmitError::Closed));
}

#[test]
fn h1_broken_answers_and_early_close_fail() {
    let mut s = H1Session::new(1);
    let id = s.submit(&get("/"), Want::NOTHING).unwrap();
    s.bytes_in(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel");
    s.eof();
    let ev = events(&mut s);
    assert_eq!(ev[0], Event::Head { id, status: 200 });
    assert!(matches!(
        ev[1],
        Event::Failed {
            kind: ErrorKind::Closed,
            ..
        }
    ));

    let mut s = H1Session::new(1);
    s.submit(&get("/"), Want::NOTHING).unwrap();
    s.bytes_in(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n");
    let ev = events(&mut s);
    assert!(matches!(
        ev[..],
        [Event::Failed {
            kind: ErrorKind::Malformed(MalformedKind::ContentLength),
            ..
        }]
    ));
    assert!(s.is_closed());

    // A body that runs until the close is complete at the close.
    let mut s = H1Session::new(1);
    let id = s.submit(&get("/"), Want::NOTHING).unwrap();
    s.bytes_in(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabc");
    s.eof();
    let ev = events(&mut s);
    assert_eq!(
        ev.last(),
        Some(&Event::Done {
            id,
            status: 200,
            body_bytes: 3,
            answer: None
        })
    );
}

#[test]
fn h1_close_before_any_byte_and_bytes_after_the_answer() {
    let mut s = H1Session::new(1);
    let id = s.submit(&get("/"), Want::NOTHING).unwrap();
    s.eof();
    assert!(matches!(
        &events(&mut s)[..],
        [Event::Failed { id: i, kind: ErrorKind::Closed, message, .. }]
            if *i == id && message == "connection closed before any response"
    ));

    // An answer followed by bytes nobody asked for: answered, then closed
    // (the connection cannot be trusted).
    let mut s = H1Session::new(1);
    s.submit(&get("/"), Want::NOTHING).unwrap();
    let mut two = OK.to_vec();
    two.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    s.bytes_in(&two);
    assert!(matches!(
        &events(&mut s)[..],
        [Event::Done { status: 200, .. }]
    ));
    assert!(s.is_closed());
    assert_eq!(s.capacity(), 0);

    // A new connection: the same session takes requests again.
    s.reset();
    assert!(!s.is_closed());
    let id = s.submit(&get("/x"), Want::NOTHING).unwrap();
    s.bytes_in(OK);
    assert!(matches!(&events(&mut s)[..], [Event::Done { id: i, .. }] if *i == id));
}

#[test]
fn h1_partial_writes_come_from_the_shared_request_bytes() {
    let req = get("/shared");
    let mut s = H1Session::new(1);
    s.submit(&req, Want::NOTHING).unwrap();
    // No copy: the pending bytes are the request's own buffer.
    assert_eq!(s.pending_out().as_ptr(), req.wire.as_ptr());
    let mut written = Vec::new();
    for _ in 0..1000 {
        let chunk = s.pending_out();
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len().min(7);
        written.extend_from_slice(&chunk[..n]);
        s.consume_out(n);
    }
    assert_eq!(written, req.wire);
    assert!(s.pending_out().is_empty());
}

#[test]
fn h1_kept_headers_and_body_reuse_a_recycled_answer() {
    let want = Want {
        server: true,
        location: true,
        capture: Some((true, true)),
        ..Want::NOTHING
    };
    let mut s = H1Session::new(1);
    let mut body_at = None;
    for round in 0..3 {
        s.submit(&get("/"), want).unwrap();
        s.bytes_in(
            b"HTTP/1.1 302 Found\r\nServer: nginx\r\nLocation: /next\r\nSet-Cookie: a=1\r\nContent-Length: 5\r\n\r\nhello",
        );
        let mut ev = events(&mut s);
        let Some(Event::Done {
            answer: Some(a), ..
        }) = ev.pop()
        else {
            panic!("{ev:?}")
        };
        assert_eq!(a.server.as_deref(), Some("nginx"));
        assert_eq!(a.location.as_deref(), Some("/next"));
        let cap = a.capture.as_deref().unwrap();
        assert_eq!(cap.body, b"hello", "round {round}");
        assert!(cap
            .headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("set-cookie") && v == "a=1"));
        // Only this answer's headers, though the buffers are reused.
        assert_eq!(cap.headers.len(), 4, "{:?}", cap.headers);
        let at = cap.body.as_ptr();
        if round > 0 {
            assert_eq!(body_at, Some(at), "the capture's buffer is reused");
        }
        body_at = Some(at);
        s.recycle(a);
    }
    // Wanting nothing keeps nothing.
    s.submit(&get("/"), Want::NOTHING).unwrap();
    s.bytes_in(OK);
    assert!(matches!(
        &events(&mut s)[..],
        [Event::Done { answer: None, .. }]
    ));
}

#[test]
fn h1_cancel_closes_and_fails_the_requests_behind() {
    let mut s = H1Session::new(3);
    let ids: Vec<_> = (0..3)
        .map(|_| s.submit(&get("/"), Want::NOTHING).unwrap())
        .collect();
    s.cancel(ids[1]);
    let ev = events(&mut s);
    let failed: Vec<_> = ev
        .iter()
        .map(|e| match e {
            Event::Failed { id, .. } => *id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(failed, vec![ids[0], ids[2]]);
    assert!(s.is_closed());
    // Unknown ids change nothing.
    let mut s = H1Session::new(1);
    s.submit(&get("/"), Want::NOTHING).unwrap();
    s.cancel(99);
    assert!(!s.is_closed());
}
