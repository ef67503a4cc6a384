//! Unit tests of the HTTP/3 codec: varints (RFC 9000 §16 and Appendix A
//! examples), frame headers split anywhere, the client's SETTINGS, QPACK
//! field sections (RFC 9204 Appendix B.1, static references, literals with
//! and without Huffman, dynamic references refused) and requests; and of the
//! session's stream readers without QUIC: an answer (1xx, head, unknown
//! frame, DATA, trailers) at every split, broken answers, the server's
//! control stream (GOAWAY) and a reserved stream type at every split.

use super::conn::{answer_bytes, control_bytes, Stream, Uni};
use super::frame::{self, FrameReader, Piece};
use super::qpack::{self, QpackError};
use super::Http3Request;
use crate::http2::hpack::Sink;
use crate::http2::Http2Request;
use crate::session::{Event, Want};
use bytes::Bytes;
use redline_stats::{ErrorKind, MalformedKind};
use std::collections::VecDeque;

/// Keeps every field (values wanted unless `skip` names them).
#[derive(Default)]
struct All {
    fields: Vec<(String, Option<String>)>,
    skip: Vec<&'static str>,
}

impl Sink for All {
    fn wants(&mut self, name: &[u8]) -> bool {
        !self.skip.iter().any(|s| s.as_bytes() == name)
    }
    fn field(&mut self, name: &[u8], value: Option<&[u8]>) {
        self.fields.push((
            String::from_utf8_lossy(name).into_owned(),
            value.map(|v| String::from_utf8_lossy(v).into_owned()),
        ));
    }
}

fn decode(block: &[u8]) -> Result<Vec<(String, Option<String>)>, QpackError> {
    let mut sink = All::default();
    qpack::decode(block, &mut sink, &mut Vec::new(), &mut Vec::new())?;
    Ok(sink.fields)
}

fn pair(n: &str, v: &str) -> (String, Option<String>) {
    (n.to_string(), Some(v.to_string()))
}

#[test]
fn varints_match_rfc_9000_examples() {
    // RFC 9000 Appendix A.1.
    let cases: [(&[u8], u64); 4] = [
        (
            &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
            151_288_809_941_952_652,
        ),
        (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
        (&[0x7b, 0xbd], 15_293),
        (&[0x25], 37),
    ];
    for (bytes, v) in cases {
        let mut at = 0;
        assert_eq!(frame::get_varint(bytes, &mut at), Some(v));
        assert_eq!(at, bytes.len());
        let mut out = Vec::new();
        frame::put_varint(&mut out, v);
        assert_eq!(out, bytes, "{v}");
    }
    // The two-byte form of 37 decodes too.
    assert_eq!(frame::get_varint(&[0x40, 0x25], &mut 0), Some(37));
    // Cut short: nothing, and `at` does not move.
    let mut at = 0;
    assert_eq!(frame::get_varint(&[0x9d, 0x7f], &mut at), None);
    assert_eq!(at, 0);
}

#[test]
fn control_preface_is_a_control_stream_with_settings() {
    let p = frame::control_preface(262_144);
    let mut at = 0;
    assert_eq!(frame::get_varint(&p, &mut at), Some(frame::STREAM_CONTROL));
    assert_eq!(frame::get_varint(&p, &mut at), Some(frame::SETTINGS));
    let len = frame::get_varint(&p, &mut at).unwrap() as usize;
    assert_eq!(at + len, p.len());
    let mut settings = Vec::new();
    while at < p.len() {
        let k = frame::get_varint(&p, &mut at).unwrap();
        let v = frame::get_varint(&p, &mut at).unwrap();
        settings.push((k, v));
    }
    assert_eq!(
        settings,
        [
            (frame::SETTINGS_QPACK_MAX_TABLE_CAPACITY, 0),
            (frame::SETTINGS_QPACK_BLOCKED_STREAMS, 0),
            (frame::SETTINGS_MAX_FIELD_SECTION_SIZE, 262_144),
        ]
    );
}

/// Frames read from `wire` split at `cut`: (type, payload) in order.
fn frames_split(wire: &[u8], cut: usize) -> Vec<(u64, Vec<u8>)> {
    let mut r = FrameReader::default();
    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
    for part in [&wire[..cut], &wire[cut..]] {
        let mut at = 0;
        loop {
            match r.next(part, &mut at) {
                Piece::NeedMore => break,
                Piece::Start { ty, .. } => out.push((ty, Vec::new())),
                Piece::Payload { n, .. } => {
                    out.last_mut()
                        .unwrap()
                        .1
                        .extend_from_slice(&part[at..at + n]);
                    at += n;
                }
            }
        }
    }
    assert!(!r.mid_frame());
    out
}

#[test]
fn frames_read_the_same_at_every_split() {
    let mut wire = Vec::new();
    frame::put_header(&mut wire, frame::HEADERS, 3);
    wire.extend_from_slice(b"abc");
    // A reserved (greasing) type with a two-byte length, then an empty DATA.
    frame::put_header(&mut wire, 0x1f * 7 + 0x21, 70);
    wire.extend_from_slice(&[7u8; 70]);
    frame::put_header(&mut wire, frame::DATA, 0);
    frame::put_header(&mut wire, frame::DATA, 5);
    wire.extend_from_slice(b"hello");
    let whole = frames_split(&wire, wire.len());
    assert_eq!(whole.len(), 4);
    assert_eq!(whole[0], (frame::HEADERS, b"abc".to_vec()));
    assert!(!frame::is_known(whole[1].0));
    assert_eq!(whole[1].1.len(), 70);
    assert_eq!(whole[2], (frame::DATA, Vec::new()));
    assert_eq!(whole[3], (frame::DATA, b"hello".to_vec()));
    for cut in 0..=wire.len() {
        assert_eq!(frames_split(&wire, cut), whole, "cut at {cut}");
    }
}

#[test]
fn qpack_decodes_rfc_9204_b1() {
    // Appendix B.1: a literal field line with a static name reference.
    let block = [
        0x00, 0x00, 0x51, 0x0b, 0x2f, 0x69, 0x6e, 0x64, 0x65, 0x78, 0x2e, 0x68, 0x74, 0x6d, 0x6c,
    ];
    assert_eq!(decode(&block).unwrap(), [pair(":path", "/index.html")]);
}

#[test]
fn qpack_refuses_the_dynamic_table() {
    // B.2's first section: Required Insert Count 2 (encoded 3).
    let b2 = [0x03, 0x81, 0x10, 0x11];
    assert_eq!(decode(&b2), Err(QpackError::Dynamic));
    // Insert count 0 but an indexed line with T=0 (dynamic), a post-base
    // index, a dynamic name reference and a post-base name reference.
    for line in [[0x80u8, 0], [0x10, 0], [0x40, 0], [0x00, 0]] {
        let block = [0x00, 0x00, line[0], line[1]];
        assert_eq!(decode(&block), Err(QpackError::Dynamic), "{line:x?}");
    }
    // A static index past the table, and a cut literal.
    assert_eq!(decode(&[0, 0, 0xff, 0x24]), Err(QpackError::BadIndex));
    assert_eq!(
        decode(&[0, 0, 0x51, 0x0b, b'/']),
        Err(QpackError::Truncated)
    );
}

#[test]
fn qpack_decodes_a_response_with_every_representation() {
    let mut block = vec![0x00, 0x00];
    // :status 200 (static 25), indexed.
    block.push(0xc0 | 25);
    // content-length (static 4) with a literal value "1234".
    block.extend_from_slice(&[0x50 | 4, 4]);
    block.extend_from_slice(b"1234");
    // server (static 92 > 15: a 4-bit prefix continues) with a Huffman value.
    qpack::field(&mut block, "server", "caddy-caddy-caddy");
    // A literal name with a Huffman name and value.
    qpack::field(&mut block, "x-custom-header", "custom-value-custom-value");
    // A literal name, short value, never indexed.
    qpack::field(&mut block, "x-api-key", "k");
    let got = decode(&block).unwrap();
    assert_eq!(
        got,
        [
            pair(":status", "200"),
            pair("content-length", "1234"),
            pair("server", "caddy-caddy-caddy"),
            pair("x-custom-header", "custom-value-custom-value"),
            pair("x-api-key", "k"),
        ]
    );
    // The Huffman forms were used where shorter.
    assert!(block.windows(25).all(|w| w != b"custom-value-custom-value"));
    // A value not wanted is reported without it.
    let mut sink = All {
        skip: vec!["x-custom-header"],
        ..Default::default()
    };
    qpack::decode(&block, &mut sink, &mut Vec::new(), &mut Vec::new()).unwrap();
    assert_eq!(sink.fields[3], ("x-custom-header".to_string(), None));
}

#[test]
fn requests_encode_with_static_references() {
    let h2 = Http2Request::from_parts(
        "GET",
        "https",
        "example.com:8443",
        "/",
        &[
            ("User-Agent".into(), "redline".into()),
            ("Host".into(), "dropped".into()),
            ("Authorization".into(), "Bearer s3cret".into()),
        ],
        Bytes::new(),
    )
    .unwrap();
    let r = Http3Request::from_h2(&h2);
    assert!(r.data_head.is_empty() && r.body.is_empty() && !r.head);
    let mut at = 0;
    assert_eq!(frame::get_varint(&r.headers, &mut at), Some(frame::HEADERS));
    let len = frame::get_varint(&r.headers, &mut at).unwrap() as usize;
    let section = &r.headers[at..];
    assert_eq!(section.len(), len);
    // :method GET (17), :scheme https (23): one byte each.
    assert_eq!(&section[..4], &[0, 0, 0xc0 | 17, 0xc0 | 23]);
    assert_eq!(
        decode(section).unwrap(),
        [
            pair(":method", "GET"),
            pair(":scheme", "https"),
            pair(":authority", "example.com:8443"),
            pair(":path", "/"),
            pair("user-agent", "redline"),
            pair("authorization", "Bearer s3cret"),
        ]
    );
    // The credential is a never-indexed literal (the N bit).
    let auth = section.iter().position(|&b| b == 0x70 | 0x0f).unwrap();
    assert_eq!(section[auth] & 0x20, 0x20);
    // A body: a DATA frame header of its length.
    let post = Http2Request::from_parts(
        "POST",
        "https",
        "a",
        "/p",
        &[],
        Bytes::from_static(b"12345"),
    )
    .unwrap();
    let r = Http3Request::from_h2(&post);
    assert_eq!(&r.data_head[..], &[frame::DATA as u8, 5]);
    assert_eq!(&r.body[..], b"12345");
}

/// A HEADERS frame holding `section`.
fn headers_frame(section: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    frame::put_header(&mut f, frame::HEADERS, section.len() as u64);
    f.extend_from_slice(section);
    f
}

/// An answer's bytes fed to a stream in pieces of `step`: the events, the
/// stream's (status, body bytes) and whether it broke.
fn answer(wire: &[u8], step: usize, want: Want) -> (Vec<Event>, (u16, u64), Option<ErrorKind>) {
    let sid = quinn_proto::StreamId::new(quinn_proto::Side::Client, quinn_proto::Dir::Bi, 0);
    let mut s = Stream::new(sid);
    s.start(sid, 7, want, false);
    let mut events = VecDeque::new();
    let mut broken = None;
    for piece in wire.chunks(step.max(1)) {
        if let Some((kind, _)) =
            answer_bytes(&mut s, piece, &mut Vec::new(), &mut Vec::new(), &mut events)
        {
            broken = Some(kind);
            break;
        }
    }
    (events.into(), s.progress(), broken)
}

#[test]
fn answers_read_the_same_at_every_split() {
    let mut wire = Vec::new();
    // A 103 first (skipped), then the final head, an unknown frame, the body
    // in two DATA frames, and trailers.
    wire.extend(headers_frame(&[0, 0, 0xc0 | 24]));
    let mut head = vec![0, 0, 0xc0 | 25, 0x50 | 4, 2, b'1', b'1'];
    qpack::field(&mut head, "server", "caddy");
    wire.extend(headers_frame(&head));
    frame::put_header(&mut wire, 0x21, 3);
    wire.extend_from_slice(b"xyz");
    frame::put_header(&mut wire, frame::DATA, 6);
    wire.extend_from_slice(b"hello ");
    frame::put_header(&mut wire, frame::DATA, 5);
    wire.extend_from_slice(b"world");
    let mut trailer = vec![0, 0];
    qpack::field(&mut trailer, "x-checksum", "abc");
    wire.extend(headers_frame(&trailer));
    let want = Want {
        server: true,
        ..Want::NOTHING
    };
    for step in 1..=wire.len() {
        let (events, progress, broken) = answer(&wire, step, want);
        assert_eq!(broken, None, "step {step}");
        assert_eq!(progress, (200, 11), "step {step}");
        assert_eq!(events, [Event::Head { id: 7, status: 200 }], "step {step}");
    }
}

#[test]
fn broken_answers_are_malformed() {
    let header = Some(ErrorKind::Malformed(MalformedKind::Header));
    // DATA before any head.
    let mut wire = Vec::new();
    frame::put_header(&mut wire, frame::DATA, 1);
    wire.push(b'x');
    assert_eq!(answer(&wire, 64, Want::NOTHING).2, header);
    // A head referring to the dynamic table.
    let wire = headers_frame(&[0x02, 0x00, 0x80]);
    assert_eq!(answer(&wire, 64, Want::NOTHING).2, header);
    // A head without :status.
    let wire = headers_frame(&[0, 0, 0xc0 | 31]);
    assert_eq!(answer(&wire, 64, Want::NOTHING).2, header);
    // A SETTINGS frame on a request stream.
    let mut wire = headers_frame(&[0, 0, 0xc0 | 25]);
    frame::put_header(&mut wire, frame::SETTINGS, 0);
    assert_eq!(answer(&wire, 64, Want::NOTHING).2, header);
    // A field section over the limit is refused before it is buffered.
    let mut wire = Vec::new();
    frame::put_header(&mut wire, frame::HEADERS, 1 << 20);
    let big = Some(ErrorKind::Malformed(MalformedKind::HeadTooLarge));
    assert_eq!(answer(&wire, 64, Want::NOTHING).2, big);
}

#[test]
fn the_control_stream_gives_goaway_at_any_split() {
    let sid = quinn_proto::StreamId::new(quinn_proto::Side::Server, quinn_proto::Dir::Uni, 0);
    let mut wire = vec![frame::STREAM_CONTROL as u8];
    // SETTINGS with one setting, a reserved frame, GOAWAY(id 8).
    frame::put_header(&mut wire, frame::SETTINGS, 2);
    wire.extend_from_slice(&[0x06, 0x3f]);
    frame::put_header(&mut wire, 0x1f * 2 + 0x21, 1);
    wire.push(0);
    frame::put_header(&mut wire, frame::GOAWAY, 2);
    frame::put_varint(&mut wire, 100);
    for step in 1..=wire.len() {
        let mut u = Uni::new(sid);
        let got = wire
            .chunks(step)
            .filter_map(|p| control_bytes(&mut u, p))
            .last();
        assert_eq!(got, Some(100), "step {step}");
    }
    // A reserved stream type, split: read and dropped, nothing found.
    let mut wire = Vec::new();
    frame::put_varint(&mut wire, 0x1f * 5 + 0x21);
    frame::put_header(&mut wire, frame::GOAWAY, 1);
    wire.push(4);
    for step in 1..=wire.len() {
        let mut u = Uni::new(sid);
        assert!(wire
            .chunks(step)
            .all(|p| control_bytes(&mut u, p).is_none()));
    }
}
