//! Byte-buffer tests of [`Http2Session`]: the frames a server would send,
//! written by hand (RFC 9113), and the frames the session writes, parsed back.

use super::frame::*;
use super::hpack::{encode_int, Decoder, Sink};
use super::*;
use crate::session::{Event, Session, SubmitError, Want};
use bytes::Bytes;
use redline_stats::{ErrorKind, MalformedKind};

fn f(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    write_head(&mut b, payload.len(), kind, flags, stream);
    b.extend_from_slice(payload);
    b
}

fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut b = Vec::new();
    write_settings(&mut b, pairs);
    b
}

/// The frames in `b` (after the preface, if there).
fn parse(mut b: &[u8]) -> Vec<(Head, Vec<u8>)> {
    if b.starts_with(PREFACE) {
        b = &b[PREFACE.len()..];
    }
    let mut out = Vec::new();
    while b.len() >= 9 {
        let h = Head::parse(b);
        let end = 9 + h.len as usize;
        out.push((h, b[9..end].to_vec()));
        b = &b[end..];
    }
    assert!(b.is_empty(), "a partial frame was written");
    out
}

fn events(s: &mut Http2Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn out(s: &mut Http2Session) -> Vec<(Head, Vec<u8>)> {
    let mut b = Vec::new();
    s.bytes_out(&mut b);
    parse(&b)
}

fn req(method: &str, body: &[u8]) -> Http2Request {
    Http2Request::from_parts(
        method,
        "http",
        "t",
        "/x",
        &[("Accept".into(), "*/*".into())],
        Bytes::copy_from_slice(body),
    )
    .unwrap()
}

/// A session after the server's SETTINGS (`pairs`), its output drained.
fn connected(pairs: &[(u16, u32)]) -> Http2Session {
    let mut s = Http2Session::new();
    assert_eq!(s.capacity(), 0);
    s.connect();
    let frames = out(&mut s);
    assert_eq!(frames[0].0.kind, SETTINGS);
    assert_eq!(frames[1].0.kind, WINDOW_UPDATE);
    s.bytes_in(&settings(pairs));
    let frames = out(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!((frames[0].0.kind, frames[0].0.flags), (SETTINGS, ACK));
    s
}

/// A header block with `:status` and literal fields.
fn head(status: &str, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    super::hpack::encoder::field(&mut b, ":status", status);
    for (k, v) in fields {
        super::hpack::encoder::field(&mut b, k, v);
    }
    b
}

fn done(id: u64, status: u16, body: u64) -> Event {
    Event::Done {
        id,
        status,
        body_bytes: body,
        answer: None,
    }
}

#[test]
fn the_preface_and_settings_are_what_the_client_promises() {
    let mut s = Http2Session::new();
    s.connect();
    let mut b = Vec::new();
    s.bytes_out(&mut b);
    assert!(b.starts_with(PREFACE));
    let frames = parse(&b);
    let p = &frames[0].1;
    let pairs: Vec<(u16, u32)> = p
        .chunks(6)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
        .collect();
    assert!(pairs.contains(&(SETTINGS_ENABLE_PUSH, 0)));
    assert!(pairs.contains(&(SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)));
    assert!(pairs.contains(&(SETTINGS_HEADER_TABLE_SIZE, 4096)));
    assert!(pairs.contains(&(SETTINGS_MAX_HEADER_LIST_SIZE, super::conn::MAX_HEADER_LIST)));
    assert_eq!(frames[1].1, ((1u32 << 24) - 65_535).to_be_bytes());
    // Before the server's SETTINGS: 100 streams (see conn.rs).
    assert_eq!(s.capacity(), 100);
}

#[test]
fn a_get_is_answered_on_every_split_of_the_answer() {
    let mut answer = f(
        HEADERS,
        END_HEADERS,
        1,
        &head("200", &[("server", "nginx")]),
    );
    answer.extend(f(DATA, 0, 1, b"hel"));
    answer.extend(f(DATA, END_STREAM, 1, b"lo"));
    for cut in 0..=answer.len() {
        let mut s = connected(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 2)]);
        assert_eq!(s.capacity(), 2);
        let a = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
        let b = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
        assert_eq!(s.capacity(), 0);
        assert_eq!(
            s.submit(&req("GET", b""), Want::NOTHING),
            Err(SubmitError::Full)
        );
        let frames = out(&mut s);
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].0.stream, 1);
        assert_eq!(frames[1].0.stream, 3);
        assert_eq!(frames[0].0.flags, END_HEADERS | END_STREAM);
        s.bytes_in(&answer[..cut]);
        s.bytes_in(&answer[cut..]);
        assert_eq!(
            events(&mut s),
            vec![Event::Head { id: a, status: 200 }, done(a, 200, 5)],
            "cut at {cut}"
        );
        assert_eq!(s.capacity(), 1);
        // REFUSED_STREAM: not processed, may be sent again.
        s.bytes_in(&f(RST_STREAM, 0, 3, &REFUSED_STREAM.to_be_bytes()));
        let ev = events(&mut s);
        assert!(
            matches!(&ev[..], [Event::Failed { id, kind: ErrorKind::StreamReset, unprocessed: true, message }]
                if *id == b && message.contains("REFUSED_STREAM")),
            "{ev:?}"
        );
        assert_eq!(s.capacity(), 2);
    }
}

#[test]
fn continuation_padding_priority_1xx_and_trailers() {
    let mut s = connected(&[]);
    let a = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
    out(&mut s);
    // 100 Continue first (skipped), then a padded HEADERS with PRIORITY
    // split over two CONTINUATIONs, padded DATA, and trailers.
    let mut b = f(HEADERS, END_HEADERS, 1, &head("100", &[]));
    let block = head(
        "200",
        &[("content-type", "text/plain"), ("x-long", &"v".repeat(40))],
    );
    let mut first = vec![3u8]; // pad length
    first.extend_from_slice(&[0, 0, 0, 0, 16]); // priority
    first.extend_from_slice(&block[..5]);
    first.extend_from_slice(&[0, 0, 0]);
    b.extend(f(HEADERS, PADDED | PRIORITY_FLAG, 1, &first));
    b.extend(f(CONTINUATION, 0, 1, &block[5..20]));
    b.extend(f(CONTINUATION, END_HEADERS, 1, &block[20..]));
    b.extend(f(DATA, PADDED, 1, &[2, b'a', b'b', 0, 0]));
    b.extend(f(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &head_fields(&[("grpc-status", "0")]),
    ));
    for cut in 0..=b.len() {
        let mut s2 = connected(&[]);
        let a2 = s2.submit(&req("GET", b""), Want::NOTHING).unwrap();
        s2.bytes_in(&b[..cut]);
        s2.bytes_in(&b[cut..]);
        assert_eq!(
            events(&mut s2),
            vec![
                Event::Head {
                    id: a2,
                    status: 200
                },
                done(a2, 200, 2)
            ],
            "cut at {cut}"
        );
    }
    s.bytes_in(&b);
    assert_eq!(events(&mut s).len(), 2);
    let _ = a;
}

fn head_fields(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (k, v) in fields {
        super::hpack::encoder::field(&mut b, k, v);
    }
    b
}

#[test]
fn want_keeps_server_location_headers_and_body() {
    let mut s = connected(&[]);
    let want = Want {
        server: true,
        location: true,
        capture: Some((true, true)),
        ..Want::NOTHING
    };
    let a = s.submit(&req("GET", b""), want).unwrap();
    let mut b = f(
        HEADERS,
        END_HEADERS,
        1,
        &head("302", &[("server", "nginx/1.2"), ("location", "/next")]),
    );
    b.extend(f(DATA, END_STREAM, 1, b"moved"));
    s.bytes_in(&b);
    let ev = events(&mut s);
    let Event::Done {
        id,
        answer: Some(answer),
        ..
    } = &ev[1]
    else {
        panic!("{ev:?}")
    };
    assert_eq!(*id, a);
    assert_eq!(answer.server.as_deref(), Some("nginx/1.2"));
    assert_eq!(answer.location.as_deref(), Some("/next"));
    let c = answer.capture.as_ref().unwrap();
    assert_eq!(
        c.headers,
        vec![
            ("server".to_string(), "nginx/1.2".to_string()),
            ("location".to_string(), "/next".to_string())
        ]
    );
    assert_eq!(c.body, b"moved");
}

#[test]
fn goaway_with_a_lower_last_id_fails_the_rest_as_unprocessed() {
    let mut s = connected(&[]);
    let ids: Vec<_> = (0..3)
        .map(|_| s.submit(&req("GET", b""), Want::NOTHING).unwrap())
        .collect();
    out(&mut s);
    let mut p = 1u32.to_be_bytes().to_vec();
    p.extend_from_slice(&NO_ERROR.to_be_bytes());
    s.bytes_in(&f(GOAWAY, 0, 0, &p));
    let ev = events(&mut s);
    assert_eq!(ev.len(), 2, "{ev:?}");
    for (e, id) in ev.iter().zip(&ids[1..]) {
        assert!(
            matches!(e, Event::Failed { id: i, kind: ErrorKind::GoAway, unprocessed: true, message }
                if i == id && message.contains("NO_ERROR")),
            "{e:?}"
        );
    }
    assert_eq!(s.capacity(), 0);
    assert_eq!(
        s.submit(&req("GET", b""), Want::NOTHING),
        Err(SubmitError::Closed)
    );
    assert!(!s.is_closed(), "stream 1 is still answered");
    s.bytes_in(&f(HEADERS, END_HEADERS | END_STREAM, 1, &head("204", &[])));
    assert_eq!(
        events(&mut s),
        vec![
            Event::Head {
                id: ids[0],
                status: 204
            },
            done(ids[0], 204, 0)
        ]
    );
    assert!(s.is_closed());
}

#[test]
fn settings_lower_the_streams_and_a_window_change_moves_a_pending_body() {
    let mut s = connected(&[(SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    let body: Vec<u8> = (0..100u8).collect();
    let a = s.submit(&req("POST", &body), Want::NOTHING).unwrap();
    let frames = out(&mut s);
    assert_eq!(frames[0].0.kind, HEADERS);
    assert_eq!(frames[0].0.flags & END_STREAM, 0);
    assert_eq!(frames[1].0.kind, DATA);
    assert_eq!(frames[1].1, &body[..10], "the stream window is 10");
    assert_eq!(frames.len(), 2);
    // The server raises the initial window by 50: 50 more bytes go.
    s.bytes_in(&settings(&[
        (SETTINGS_INITIAL_WINDOW_SIZE, 60),
        (SETTINGS_MAX_CONCURRENT_STREAMS, 1),
    ]));
    let frames = out(&mut s);
    assert_eq!((frames[0].0.kind, frames[0].0.flags), (SETTINGS, ACK));
    assert_eq!(frames[1].1, &body[10..60]);
    assert_eq!(s.capacity(), 0);
    // A WINDOW_UPDATE for the stream lets the rest go, with END_STREAM.
    s.bytes_in(&f(WINDOW_UPDATE, 0, 1, &100u32.to_be_bytes()));
    let frames = out(&mut s);
    assert_eq!(frames[0].1, &body[60..]);
    assert_eq!(frames[0].0.flags, END_STREAM);
    s.bytes_in(&f(HEADERS, END_HEADERS | END_STREAM, 1, &head("201", &[])));
    assert_eq!(events(&mut s)[1], done(a, 201, 0));
    assert_eq!(s.capacity(), 1);
}

#[test]
fn the_connection_window_holds_bodies_back_too() {
    let mut s = connected(&[]);
    let body = vec![1u8; 70_000];
    s.submit(&req("PUT", &body), Want::NOTHING).unwrap();
    let frames = out(&mut s);
    let sent: usize = frames
        .iter()
        .filter(|(h, _)| h.kind == DATA)
        .map(|(_, p)| p.len())
        .sum();
    assert_eq!(sent, 65_535);
    assert!(frames
        .iter()
        .all(|(h, p)| h.kind != DATA || p.len() <= 16_384));
    s.bytes_in(&f(WINDOW_UPDATE, 0, 0, &10_000u32.to_be_bytes()));
    let frames = out(&mut s);
    assert!(frames.is_empty(), "the stream window (65535) is used up");
    s.bytes_in(&f(WINDOW_UPDATE, 0, 1, &10_000u32.to_be_bytes()));
    let frames = out(&mut s);
    assert_eq!(frames[0].1.len(), 70_000 - 65_535);
    assert_eq!(frames[0].0.flags, END_STREAM);
}

#[test]
fn window_updates_go_out_once_half_a_window_is_read() {
    let mut s = connected(&[]);
    let a = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
    out(&mut s);
    s.bytes_in(&f(HEADERS, END_HEADERS, 1, &head("200", &[])));
    let chunk = vec![0u8; 16_384];
    let mut updates = Vec::new();
    for _ in 0..64 {
        s.bytes_in(&f(DATA, 0, 1, &chunk));
        updates.extend(
            out(&mut s)
                .into_iter()
                .filter(|(h, _)| h.kind == WINDOW_UPDATE),
        );
    }
    // 1 MiB read: the stream window (1 MiB) given back twice (at each half),
    // not per frame.
    let stream: Vec<_> = updates.iter().filter(|(h, _)| h.stream == 1).collect();
    assert_eq!(stream.len(), 2, "{updates:?}");
    assert_eq!(stream[0].1, (1u32 << 19).to_be_bytes());
    s.bytes_in(&f(DATA, END_STREAM, 1, b""));
    assert_eq!(events(&mut s).last(), Some(&done(a, 200, 1 << 20)));
}

#[test]
fn close_says_goaway_no_error_once_and_takes_nothing_after() {
    let mut s = connected(&[]);
    s.close();
    let frames = out(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!((frames[0].0.kind, frames[0].0.stream), (GOAWAY, 0));
    assert_eq!(frames[0].1, [0u8; 8], "last stream 0, NO_ERROR");
    assert!(s.is_closed());
    assert_eq!(s.capacity(), 0);
    assert!(s.submit(&req("GET", b""), Want::NOTHING).is_err());
    s.close();
    assert!(out(&mut s).is_empty(), "said once");
}

#[test]
fn ping_is_acked_and_unknown_frames_ignored() {
    let mut s = connected(&[]);
    s.bytes_in(&f(PING, 0, 0, b"12345678"));
    s.bytes_in(&f(0xfa, 0xff, 0, b"whatever"));
    let frames = out(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!((frames[0].0.kind, frames[0].0.flags), (PING, ACK));
    assert_eq!(frames[0].1, b"12345678");
    assert!(!s.is_closed());
}

#[test]
fn a_header_list_over_the_limit_fails_its_stream_and_keeps_the_table() {
    let mut s = connected(&[]);
    let a = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
    let b = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
    out(&mut s);
    // One field with incremental indexing enters the table, then the same
    // indexed entry repeated until the list is over 256 KiB.
    let mut lit = vec![0x40, 5];
    lit.extend_from_slice(b"x-big");
    encode_int(2000, 7, 0, &mut lit);
    lit.extend(std::iter::repeat_n(b'v', 2000));
    let mut block = vec![0x88];
    block.extend_from_slice(&lit);
    block.extend(std::iter::repeat_n(0xbe, 200)); // index 62: x-big, 2 KiB each
    let mut bytes = f(HEADERS, 0, 1, &block[..1000]);
    bytes.extend(f(CONTINUATION, END_HEADERS, 1, &block[1000..]));
    // Stream 3 then uses the same dynamic table entry, in a small list.
    bytes.extend(f(HEADERS, END_HEADERS | END_STREAM, 3, &[0x88, 0xbe]));
    s.bytes_in(&bytes);
    let ev = events(&mut s);
    assert!(
        matches!(&ev[0], Event::Failed { id, kind: ErrorKind::Malformed(MalformedKind::Header), message, .. }
                if *id == a && message.contains("256 KiB")),
        "{ev:?}"
    );
    assert_eq!(ev[1], Event::Head { id: b, status: 200 });
    let frames = out(&mut s);
    assert!(frames
        .iter()
        .any(|(h, _)| h.kind == RST_STREAM && h.stream == 1));
    assert!(!s.is_closed());
}

#[test]
fn a_header_block_too_big_to_buffer_fails_the_connection() {
    let mut s = connected(&[]);
    let a = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
    out(&mut s);
    s.bytes_in(&f(HEADERS, 0, 1, &[0x88]));
    let chunk = vec![0u8; 16_384];
    for _ in 0..64 {
        s.bytes_in(&f(CONTINUATION, 0, 1, &chunk));
    }
    let ev = events(&mut s);
    assert!(
        matches!(&ev[..], [Event::Failed { id, kind: ErrorKind::Malformed(MalformedKind::HeadTooLarge), .. }] if *id == a),
        "{ev:?}"
    );
    assert!(s.is_closed());
}

#[test]
fn bad_frames_fail_the_connection_with_goaway() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("frame over 16384", {
            let mut b = Vec::new();
            write_head(&mut b, 16_385, DATA, 0, 1);
            b
        }),
        (
            "push promise",
            f(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2, 0x88]),
        ),
        ("data on 0", f(DATA, 0, 0, b"x")),
        ("bad hpack", f(HEADERS, END_HEADERS, 1, &[0x80])),
        ("settings length", f(SETTINGS, 0, 0, &[0, 1, 0])),
        ("interrupted block", {
            let mut b = f(HEADERS, 0, 1, &[0x88]);
            b.extend(f(PING, 0, 0, b"12345678"));
            b
        }),
        ("padding too long", f(DATA, PADDED, 1, &[9, 1])),
        ("window update 0", f(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0])),
    ];
    for (what, bytes) in cases {
        let mut s = connected(&[]);
        let a = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
        out(&mut s);
        s.bytes_in(&bytes);
        let ev = events(&mut s);
        assert!(
            matches!(&ev[..], [Event::Failed { id, unprocessed: false, .. }] if *id == a),
            "{what}: {ev:?}"
        );
        let frames = out(&mut s);
        assert_eq!(frames.last().map(|f| f.0.kind), Some(GOAWAY), "{what}");
        assert!(s.is_closed(), "{what}");
        assert_eq!(s.capacity(), 0);
        // Nothing more is read.
        s.bytes_in(&f(PING, 0, 0, b"12345678"));
        assert!(out(&mut s).is_empty());
    }
}

#[test]
fn an_http1_answer_is_fatal() {
    let answer = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    for cut in 0..=12 {
        let mut s = Http2Session::new();
        s.connect();
        let a = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
        s.bytes_in(&answer[..cut]);
        s.bytes_in(&answer[cut..]);
        let ev = events(&mut s);
        assert!(
            matches!(&ev[..], [Event::Failed { id, .. }] if *id == a),
            "{ev:?}"
        );
        assert!(s
            .fatal()
            .unwrap()
            .starts_with("answered in HTTP/1, not HTTP/2"));
        assert!(s.is_closed());
    }
}

#[test]
fn cancel_resets_the_stream_and_later_frames_are_dropped() {
    let mut s = connected(&[]);
    let a = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
    let b = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
    out(&mut s);
    s.cancel(a);
    let frames = out(&mut s);
    assert_eq!(frames.len(), 1);
    assert_eq!((frames[0].0.kind, frames[0].0.stream), (RST_STREAM, 1));
    assert_eq!(frames[0].1, CANCEL.to_be_bytes());
    let mut bytes = f(HEADERS, END_HEADERS, 1, &head("200", &[]));
    bytes.extend(f(DATA, END_STREAM, 1, b"late"));
    bytes.extend(f(HEADERS, END_HEADERS | END_STREAM, 3, &head("200", &[])));
    s.bytes_in(&bytes);
    assert_eq!(
        events(&mut s),
        vec![Event::Head { id: b, status: 200 }, done(b, 200, 0)]
    );
}

#[test]
fn eof_fails_open_streams_and_content_length_is_checked() {
    let mut s = connected(&[]);
    let a = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
    let b = s.submit(&req("GET", b""), Want::NOTHING).unwrap();
    let c = s.submit(&req("HEAD", b""), Want::NOTHING).unwrap();
    let mut bytes = f(
        HEADERS,
        END_HEADERS,
        1,
        &head("200", &[("content-length", "5")]),
    );
    bytes.extend(f(DATA, END_STREAM, 1, b"abc"));
    bytes.extend(f(
        HEADERS,
        END_HEADERS | END_STREAM,
        5,
        &head("200", &[("content-length", "5")]),
    ));
    s.bytes_in(&bytes);
    s.eof();
    let ev = events(&mut s);
    assert!(
        matches!(&ev[1], Event::Failed { id, kind: ErrorKind::Malformed(MalformedKind::Header), .. } if *id == a),
        "{ev:?}"
    );
    assert_eq!(
        ev[3],
        done(c, 200, 0),
        "HEAD: no body whatever content-length says"
    );
    assert!(
        matches!(&ev[4], Event::Failed { id, kind: ErrorKind::Closed, .. } if *id == b),
        "{ev:?}"
    );
    assert!(s.is_closed());
    assert_eq!(
        s.submit(&req("GET", b""), Want::NOTHING),
        Err(SubmitError::Closed)
    );
}

#[test]
fn a_block_over_the_frame_size_goes_in_continuations() {
    let mut s = connected(&[]);
    let long = "v".repeat(40_000);
    let r = Http2Request::from_parts(
        "GET",
        "https",
        "t",
        "/",
        &[
            ("x-long".into(), long.clone()),
            ("Connection".into(), "x".into()),
        ],
        Bytes::new(),
    )
    .unwrap();
    s.submit(&r, Want::NOTHING).unwrap();
    let frames = out(&mut s);
    let kinds: Vec<_> = frames.iter().map(|(h, _)| (h.kind, h.flags)).collect();
    assert_eq!(
        kinds,
        vec![
            (HEADERS, END_STREAM),
            (CONTINUATION, 0),
            (CONTINUATION, END_HEADERS)
        ]
    );
    let block: Vec<u8> = frames.iter().flat_map(|(_, p)| p.clone()).collect();
    struct Names(Vec<String>);
    impl Sink for Names {
        fn wants(&mut self, _: &[u8]) -> bool {
            true
        }
        fn field(&mut self, n: &[u8], _: Option<&[u8]>) {
            self.0.push(String::from_utf8_lossy(n).into_owned());
        }
    }
    let mut names = Names(Vec::new());
    Decoder::new(4096).decode(&block, &mut names).unwrap();
    assert_eq!(
        names.0,
        [":method", ":scheme", ":authority", ":path", "x-long"]
    );
}

#[test]
fn error_codes_have_their_rfc_names() {
    assert_eq!(error_name(0x7), "REFUSED_STREAM");
    assert_eq!(error_name(0xb), "ENHANCE_YOUR_CALM");
    assert_eq!(error_name(0xd), "HTTP_1_1_REQUIRED");
    assert_eq!(error_name(0x99), "UNKNOWN");
}

#[test]
fn a_request_from_the_plan_drops_what_http2_forbids() {
    let spec = crate::plan::RequestSpec {
        method: "POST".into(),
        path: "/p?q=1".into(),
        authority: "example.com:8080".into(),
        headers: vec![
            ("Host".into(), "example.com:8080".into()),
            ("User-Agent".into(), "redline/x".into()),
            ("TE".into(), "gzip".into()),
            ("Keep-Alive".into(), "5".into()),
            ("Content-Length".into(), "3".into()),
            ("X-A".into(), "b".into()),
        ],
        body: b"abc".to_vec(),
        http10: false,
        chunked: false,
    };
    let r = Http2Request::from_spec(&spec, "https").unwrap();
    assert_eq!(
        r.headers,
        vec![
            ("user-agent".to_string(), "redline/x".to_string()),
            ("content-length".to_string(), "3".to_string()),
            ("x-a".to_string(), "b".to_string()),
        ]
    );
    assert_eq!(&r.body[..], b"abc");
    assert!(!r.is_head());
    // The same request as the h2 crate's form (RequestSpec::to_h2) refuses
    // a control character in a value; so does this one, naming the header only.
    let mut bad = spec.clone();
    bad.headers.push(("X-Bad".into(), "a\u{1}b".into()));
    let e = Http2Request::from_spec(&bad, "https").unwrap_err();
    assert!(e.contains("'x-bad'") && !e.contains("a\u{1}b"), "{e}");
    assert!(spec.to_h2("https").is_ok() && bad.to_h2("https").is_err());
}

/// Decodes every HEADERS block in `frames` with the server's decoder `d`.
fn server_decodes(d: &mut Decoder, frames: &[(Head, Vec<u8>)]) -> Vec<Vec<(String, String)>> {
    struct Fields(Vec<(String, String)>);
    impl Sink for Fields {
        fn wants(&mut self, _: &[u8]) -> bool {
            true
        }
        fn field(&mut self, n: &[u8], v: Option<&[u8]>) {
            let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            self.0.push((s(n), s(v.unwrap_or_default())));
        }
    }
    frames
        .iter()
        .filter(|(h, _)| h.kind == HEADERS)
        .map(|(_, p)| {
            let mut f = Fields(Vec::new());
            d.decode(p, &mut f).expect("the server decodes the block");
            f.0
        })
        .collect()
}

#[test]
fn the_runs_request_is_indexed_once_per_connection_and_named_by_index_after() {
    let fields = [
        ("user-agent".to_string(), "redline/0.1".to_string()),
        ("x-test".to_string(), "1".to_string()),
        ("authorization".to_string(), "Bearer s3cret".to_string()),
    ];
    let r = Http2Request::from_parts("GET", "http", "t:8080", "/x?y=1", &fields, Bytes::new())
        .unwrap()
        .with_indexing();
    let ix = r.indexed.clone().expect("fits in the table");
    let other = req("GET", b"");
    let mut s = connected(&[]);
    // The server's decoder, as nginx keeps one per connection.
    let mut server = Decoder::new(4096);
    for _ in 0..3 {
        s.submit(&r, Want::NOTHING).unwrap();
    }
    // A request built on its own (a scenario step) goes plain in between.
    s.submit(&other, Want::NOTHING).unwrap();
    s.submit(&r, Want::NOTHING).unwrap();
    let frames = out(&mut s);
    let heads: Vec<_> = frames.iter().filter(|(h, _)| h.kind == HEADERS).collect();
    assert_eq!(heads[0].1, ix.first);
    assert_eq!(heads[1].1, ix.again);
    assert_eq!(heads[2].1, ix.again);
    assert_eq!(heads[3].1, &other.block[..]);
    assert_eq!(heads[4].1, ix.again);
    // One byte per indexed field; only the credential stays a literal.
    assert!(ix.again.len() < ix.first.len() / 2, "{ix:?}");
    let got = server_decodes(&mut server, &frames);
    let mut want = vec![
        (":method".to_string(), "GET".to_string()),
        (":scheme".into(), "http".into()),
        (":authority".into(), "t:8080".into()),
        (":path".into(), "/x?y=1".into()),
    ];
    want.extend(fields.iter().cloned());
    for (i, list) in got.iter().enumerate() {
        if i != 3 {
            assert_eq!(list, &want, "block {i}");
        }
    }
    // The credential never entered the table; the other fields did.
    assert_eq!(server.table_size(), ix.table_size);
    assert!(server.entries().all(|(n, _)| n != b"authorization"));

    // The server shrinks its table: the next block starts with a size
    // update to 0 and is plain; none indexes again.
    s.bytes_in(&settings(&[(SETTINGS_HEADER_TABLE_SIZE, 0)]));
    s.submit(&r, Want::NOTHING).unwrap();
    s.submit(&r, Want::NOTHING).unwrap();
    let frames = out(&mut s);
    assert_eq!((frames[0].0.kind, frames[0].0.flags), (SETTINGS, ACK));
    let heads: Vec<_> = frames.iter().filter(|(h, _)| h.kind == HEADERS).collect();
    assert_eq!(heads[0].1[0], 0x20);
    assert_eq!(&heads[0].1[1..], &r.block[..]);
    assert_eq!(heads[1].1, &r.block[..]);
    let got = server_decodes(&mut server, &frames);
    assert_eq!(got, vec![want.clone(), want]);
    assert_eq!(server.table_size(), 0);

    // Fields too big for the table keep the plain block only.
    let big = [("x-big".to_string(), "v".repeat(5000))];
    let r = Http2Request::from_parts("GET", "http", "t", "/", &big, Bytes::new())
        .unwrap()
        .with_indexing();
    assert!(r.indexed.is_none());
}
