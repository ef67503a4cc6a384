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
        assert_eq!(
            ev,
            vec![
                Event::Head { id, status: 200 },
                Event::Done {
                    id,
                    status: 200,
                    body_bytes: 5,
                    answer: None
                }
            ],
            "cut at {cut}"
        );
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
    assert_eq!(ev.len(), 5, "{ev:?}");
    assert_eq!(
        ev[1],
        Event::Done {
            id: ids[0],
            status: 200,
            body_bytes: 5,
            answer: None
        }
    );
    assert_eq!(
        ev[3],
        Event::Done {
            id: ids[1],
            status: 404,
            body_bytes: 0,
            answer: None
        }
    );
    assert!(matches!(ev[4], Event::Failed { id, kind: ErrorKind::Closed, .. } if id == ids[2]));
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

// HTTP/2 frames a server would send, written out by hand (RFC 9113 §4.1).
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len();
    let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;

/// The server's preface: SETTINGS (MAX_CONCURRENT_STREAMS 2), and the
/// ACK of the client's SETTINGS.
fn server_preface() -> Vec<u8> {
    let mut b = frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 2]);
    b.extend(frame(SETTINGS, 1, 0, &[]));
    b
}

fn h2_get() -> H2Request {
    H2Request {
        head: http::Request::get("http://t/x").body(()).unwrap(),
        body: Bytes::new(),
    }
}

fn connected() -> (H2Session, Vec<u8>) {
    let mut s = H2Session::new();
    assert_eq!(s.capacity(), 0);
    s.connect();
    let mut out = Vec::new();
    s.bytes_out(&mut out);
    assert!(
        out.starts_with(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        "{out:?}"
    );
    s.bytes_in(&server_preface());
    (s, out)
}

#[test]
fn h2_takes_what_the_server_allows_and_reads_answers_on_every_split() {
    let mut answer = frame(HEADERS, END_HEADERS, 1, &[0x88]); // :status 200
    answer.extend(frame(DATA, 0, 1, b"hel"));
    answer.extend(frame(DATA, END_STREAM, 1, b"lo"));
    for cut in 0..=answer.len() {
        let (mut s, _) = connected();
        assert_eq!(s.capacity(), 2);
        let a = s.submit(&h2_get(), Want::NOTHING).unwrap();
        let b = s.submit(&h2_get(), Want::NOTHING).unwrap();
        assert_eq!(s.capacity(), 0);
        assert_eq!(
            s.submit(&h2_get(), Want::NOTHING).unwrap_err(),
            SubmitError::Full
        );
        let mut out = Vec::new();
        s.bytes_out(&mut out);
        // Two HEADERS frames, on streams 1 and 3.
        assert!(out.len() > 2 * 9, "{out:?}");
        s.bytes_in(&answer[..cut]);
        s.bytes_in(&answer[cut..]);
        let ev = events(&mut s);
        assert_eq!(
            ev,
            vec![
                Event::Head { id: a, status: 200 },
                Event::Done {
                    id: a,
                    status: 200,
                    body_bytes: 5,
                    answer: None
                }
            ],
            "cut at {cut}"
        );
        assert_eq!(s.capacity(), 1);
        // The server resets the other stream (REFUSED_STREAM = 7).
        s.bytes_in(&frame(RST_STREAM, 0, 3, &[0, 0, 0, 7]));
        let ev = events(&mut s);
        assert!(
            matches!(&ev[..], [Event::Failed { id, kind: ErrorKind::StreamReset, .. }] if *id == b),
            "{ev:?}"
        );
    }
}

#[test]
fn h2_a_closed_connection_fails_its_streams() {
    let (mut s, _) = connected();
    let a = s.submit(&h2_get(), Want::NOTHING).unwrap();
    s.bytes_in(&frame(HEADERS, END_HEADERS, 1, &[0x88]));
    s.eof();
    let ev = events(&mut s);
    assert_eq!(ev[0], Event::Head { id: a, status: 200 });
    assert!(
        matches!(ev[1], Event::Failed { id, .. } if id == a),
        "{ev:?}"
    );
    assert!(s.is_closed());
    assert_eq!(s.capacity(), 0);
    assert_eq!(
        s.submit(&h2_get(), Want::NOTHING).unwrap_err(),
        SubmitError::Closed
    );
}

#[test]
fn h2_garbage_from_the_server_fails_the_connection() {
    let (mut s, _) = connected();
    let a = s.submit(&h2_get(), Want::NOTHING).unwrap();
    s.bytes_in(b"HTTP/1.1 400 Bad Request\r\n\r\n");
    let ev = events(&mut s);
    assert!(
        matches!(&ev[..], [Event::Failed { id, .. }] if *id == a),
        "{ev:?}"
    );
    assert!(s.is_closed());
}
