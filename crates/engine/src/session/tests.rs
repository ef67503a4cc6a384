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
