//! What [`super::Http3Session`] reads from QUIC's streams, without QUIC: a
//! stream drained chunk by chunk ([`drain`]), a request stream's answer
//! frame by frame into its [`Stream`] ([`answer_bytes`], the head decoded by
//! QPACK into HTTP/2's head sink), the server's control stream for GOAWAY
//! ([`control_bytes`]), and the words and error kinds of a reset stream and
//! of a connection's end ([`reset_message`], [`lost_kind`]).

use super::{Stream, Uni, MAX_FIELD_SECTION};
use crate::http2::conn::head::HeadSink;
use crate::http3::frame::{self, Piece};
use crate::http3::qpack;
use crate::session::{Event, Want};
use quinn_proto::{ConnectionError, ReadError, StreamId};
use redline_stats::{ErrorKind, MalformedKind};
use std::borrow::Cow;
use std::collections::VecDeque;

/// How reading a stream stopped ([`drain`]).
pub(super) enum Drained {
    /// All there is for now: more may come.
    More,
    /// The peer's FIN: all of it was read.
    Fin,
    /// The peer reset it with this code.
    Reset(u64),
    /// It is not (or no longer) readable.
    Closed,
}

/// Reads what stream `sid` holds now, each chunk to `f` (in order).
pub(super) fn drain(
    conn: &mut quinn_proto::Connection,
    sid: StreamId,
    mut f: impl FnMut(&[u8]),
) -> Drained {
    let mut recv = conn.recv_stream(sid);
    let Ok(mut chunks) = recv.read(true) else {
        return Drained::Closed;
    };
    let mut end = Drained::More;
    for _ in 0..1_000_000 {
        match chunks.next(usize::MAX) {
            Ok(Some(chunk)) => f(&chunk.bytes),
            Ok(None) => {
                end = Drained::Fin;
                break;
            }
            Err(ReadError::Blocked) => break,
            Err(ReadError::Reset(code)) => {
                end = Drained::Reset(code.into_inner());
                break;
            }
        }
    }
    let _ = chunks.finalize();
    end
}

/// The words for a stream reset by the server with HTTP/3 error `code`.
pub(super) fn reset_message(code: u64) -> Cow<'static, str> {
    Cow::Owned(format!(
        "the server reset the stream ({}, 0x{code:x})",
        frame::error_name(code)
    ))
}

/// The error kind and message of a connection's end.
pub(super) fn lost_kind(
    reason: &ConnectionError,
    established: bool,
) -> (ErrorKind, Cow<'static, str>) {
    match reason {
        ConnectionError::VersionMismatch => (
            ErrorKind::VersionNegotiation,
            "the server speaks none of the client's QUIC versions".into(),
        ),
        ConnectionError::TimedOut if !established => (
            ErrorKind::ConnectTimeout,
            "the QUIC handshake got no answer within the idle time-out".into(),
        ),
        ConnectionError::TimedOut => (
            ErrorKind::IdleTimeout,
            "the server sent nothing within the QUIC idle time-out".into(),
        ),
        ConnectionError::Reset => (
            ErrorKind::StatelessReset,
            "the server answered with a QUIC stateless reset".into(),
        ),
        ConnectionError::TransportError(e) => {
            let code = u64::from(e.code);
            if (0x100..0x200).contains(&code) {
                (
                    ErrorKind::Tls,
                    Cow::Owned(format!("QUIC TLS: {}", e.reason)),
                )
            } else {
                (ErrorKind::Other, Cow::Owned(format!("QUIC: {e}")))
            }
        }
        ConnectionError::ConnectionClosed(c) => {
            let code = u64::from(c.error_code);
            let kind = if (0x100..0x200).contains(&code) && !established {
                ErrorKind::Tls
            } else {
                ErrorKind::Closed
            };
            (
                kind,
                Cow::Owned(format!(
                    "the server closed the QUIC connection ({})",
                    c.error_code
                )),
            )
        }
        ConnectionError::ApplicationClosed(c) => {
            let code = c.error_code.into_inner();
            (
                ErrorKind::Closed,
                Cow::Owned(format!(
                    "the server closed the connection ({}, 0x{code:x})",
                    frame::error_name(code)
                )),
            )
        }
        ConnectionError::LocallyClosed => (ErrorKind::Closed, "the connection was closed".into()),
        ConnectionError::CidsExhausted => {
            (ErrorKind::Other, "QUIC connection ids exhausted".into())
        }
    }
}

/// Bytes of a request stream's answer: frames into the stream's answer
/// (events for a final head); Some when the answer broke HTTP/3.
pub(in crate::http3) fn answer_bytes(
    s: &mut Stream,
    data: &[u8],
    name_buf: &mut Vec<u8>,
    value_buf: &mut Vec<u8>,
    events: &mut VecDeque<Event>,
) -> Option<(ErrorKind, &'static str)> {
    let mut at = 0;
    let header = ErrorKind::Malformed(MalformedKind::Header);
    for _ in 0..1_000_000 {
        match s.frames.next(data, &mut at) {
            Piece::NeedMore => return None,
            Piece::Start { ty, len } => match ty {
                frame::HEADERS => {
                    if len > MAX_FIELD_SECTION {
                        let big = ErrorKind::Malformed(MalformedKind::HeadTooLarge);
                        return Some((big, "a field section over 256 KiB"));
                    }
                    s.section.clear();
                    s.trailers = s.status != 0;
                }
                frame::DATA if s.status == 0 => {
                    return Some((header, "DATA before the response head"))
                }
                frame::SETTINGS | frame::GOAWAY | frame::MAX_PUSH_ID | frame::CANCEL_PUSH => {
                    return Some((header, "a control frame on a request stream"))
                }
                _ => {}
            },
            Piece::Payload { ty, n, last } => {
                let piece = &data[at..at + n];
                at += n;
                match ty {
                    frame::DATA => {
                        s.body_bytes += n as u64;
                        if let Some(c) = s
                            .answer
                            .as_deref_mut()
                            .and_then(|a| a.capture.as_deref_mut())
                        {
                            c.keep_body(piece);
                        }
                    }
                    frame::HEADERS => {
                        s.section.extend_from_slice(piece);
                        if last {
                            if let Some(bad) = head(s, name_buf, value_buf, events) {
                                return Some(bad);
                            }
                        }
                    }
                    _ => {} // unknown and reserved frames: skipped
                }
            }
        }
    }
    None
}

/// A whole HEADERS frame of stream `s`: the final head (events), a 1xx
/// (ignored) or trailers (checked, dropped).
fn head(
    s: &mut Stream,
    name_buf: &mut Vec<u8>,
    value_buf: &mut Vec<u8>,
    events: &mut VecDeque<Event>,
) -> Option<(ErrorKind, &'static str)> {
    let header = ErrorKind::Malformed(MalformedKind::Header);
    let want = if s.trailers { Want::NOTHING } else { s.want };
    let mut sink = HeadSink::new(want);
    let size = match qpack::decode(&s.section, &mut sink, name_buf, value_buf) {
        Ok(n) => n,
        Err(_) => return Some((header, "a field section QPACK cannot decode")),
    };
    if sink.over || size as u64 > MAX_FIELD_SECTION {
        return Some((header, "a field section over 256 KiB"));
    }
    if s.trailers {
        return None;
    }
    let status = match sink.status {
        Some(st) if !sink.bad => st,
        _ => return Some((header, "a response head without a valid :status")),
    };
    if status < 200 {
        return None; // 1xx: the final head follows
    }
    s.status = status;
    s.content_length = sink.content_length;
    if want.any() {
        s.answer = Some(Box::new(sink.answer(want, status)));
    }
    events.push_back(Event::Head { id: s.id, status });
    None
}

/// Bytes of a server's unidirectional stream `u`; Some(id) for a GOAWAY.
pub(in crate::http3) fn control_bytes(u: &mut Uni, data: &[u8]) -> Option<u64> {
    let mut at = 0;
    if u.ty.is_none() {
        // The stream type: one varint, maybe split.
        while u.ty.is_none() && at < data.len() {
            u.buf.push(data[at]);
            at += 1;
            let mut p = 0;
            u.ty = frame::get_varint(&u.buf, &mut p);
        }
        u.ty?; // None: the type goes on in the next chunk
        u.buf.clear();
    }
    if u.ty != Some(frame::STREAM_CONTROL) {
        return None; // QPACK streams (no dynamic table) and unknown types: dropped
    }
    let mut goaway = None;
    for _ in 0..1_000_000 {
        match u.frames.next(data, &mut at) {
            Piece::NeedMore => break,
            Piece::Start { .. } => u.buf.clear(),
            Piece::Payload { ty, n, last } => {
                // A GOAWAY holds one varint (at most 8 bytes); SETTINGS and
                // the rest are read past (no setting changes what the
                // client sends: it uses no dynamic table).
                if ty == frame::GOAWAY && u.buf.len() + n <= 8 {
                    u.buf.extend_from_slice(&data[at..at + n]);
                }
                at += n;
                if last && ty == frame::GOAWAY {
                    let mut p = 0;
                    goaway = frame::get_varint(&u.buf, &mut p).or(goaway);
                }
            }
        }
    }
    goaway
}
