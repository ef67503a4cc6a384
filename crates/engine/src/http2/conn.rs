//! [`Http2Session`]: one HTTP/2 client connection behind the sans-IO
//! [`Session`] seam (RFC 9113): preface and SETTINGS, streams in a slab
//! indexed by stream id, HEADERS/CONTINUATION out from a block encoded once,
//! request bodies as DATA under the peer's windows, frames in from a buffer
//! that holds at most one partial frame, responses decoded with HPACK into
//! events, WINDOW_UPDATEs sent once half a window is consumed. Receiving
//! is in `conn/recv.rs`, the response-head sink in `conn/head.rs`.
//!
//! Before the server's first SETTINGS arrives the session takes up to 100
//! streams (RFC 9113 §5.1.2's recommended minimum; the server's SETTINGS
//! follows its preface at once, and a server that allows fewer refuses the
//! excess with REFUSED_STREAM, reported as unprocessed so the driver sends
//! them again).

pub(crate) mod head;
mod recv;

use super::frame;
use super::hpack::Decoder;
use super::request::Http2Request;
use crate::session::{Answer, Event, RequestId, Session, SubmitError, Want};
use bytes::Bytes;
use redline_stats::{ErrorKind, MalformedKind};
use std::borrow::Cow;
use std::collections::VecDeque;

/// The stream window the client advertises (SETTINGS_INITIAL_WINDOW_SIZE).
pub const STREAM_WINDOW: u32 = 1 << 20;
/// The connection window the client opens (by a WINDOW_UPDATE after SETTINGS).
pub const CONN_WINDOW: u32 = 1 << 24;
/// The dynamic table size the client advertises (SETTINGS_HEADER_TABLE_SIZE).
pub const HEADER_TABLE: u32 = 4096;
pub use super::hpack::HPACK_DEFAULT_TABLE;
/// The limit on a response's header list (SETTINGS_MAX_HEADER_LIST_SIZE,
/// advertised and enforced here: a longer one is `malformed`).
pub const MAX_HEADER_LIST: u32 = 256 * 1024;

/// What the server's HPACK decoder table holds of this connection's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    /// Nothing: the next request with [`Http2Request::indexed`] may fill it.
    Empty,
    /// The fields of the request with this key (its `indexed.first` went out).
    Holds(u64),
    /// The server shrank its table: plain blocks only from now on.
    Off,
}
/// The largest frame payload the client takes (the default; not advertised).
const MAX_FRAME: u32 = frame::MIN_MAX_FRAME;
/// Streams taken before the server's SETTINGS (see the top of this file).
const DEFAULT_CONCURRENT: u32 = 100;
/// The most streams one session keeps open, whatever the server allows.
const MAX_OPEN: usize = 4096;
/// The largest header block (HEADERS + CONTINUATIONs) buffered before it is
/// decoded: beyond it the connection fails (a block that large holds more
/// than the header list limit anyway).
const MAX_BLOCK: usize = 2 * MAX_HEADER_LIST as usize;

/// One open stream.
struct Stream {
    sid: u32,
    id: RequestId,
    want: Want,
    head_request: bool,
    /// The final status, 0 until the final head arrived.
    status: u16,
    content_length: Option<u64>,
    body_bytes: u64,
    answer: Option<Box<Answer>>,
    /// The peer's window for this stream (may go negative, §6.9.2).
    send_window: i64,
    body: Bytes,
    /// How much of `body` went out.
    sent: usize,
    /// DATA bytes received and not yet given back by a WINDOW_UPDATE.
    unacked: u32,
}

/// An HTTP/2 client connection without I/O (see the top of this file).
pub struct Http2Session {
    out: Vec<u8>,
    /// Received bytes that do not make a whole frame yet.
    inbuf: Vec<u8>,
    decoder: Decoder,
    /// Streams at `(sid >> 1) & (len - 1)`; the length is a power of two.
    slots: Vec<Option<Stream>>,
    open: usize,
    next_sid: u32,
    next_id: RequestId,
    events: VecDeque<Event>,
    peer_concurrent: u32,
    peer_window: i64,
    peer_max_frame: u32,
    conn_send_window: i64,
    conn_unacked: u32,
    /// A header block continued by CONTINUATION frames: stream, END_STREAM.
    cont: Option<(u32, bool)>,
    cont_buf: Vec<u8>,
    /// Streams with body bytes waiting for window, oldest first.
    pending: VecDeque<u32>,
    connected: bool,
    /// A frame was read (the HTTP/1 check is over).
    seen_frame: bool,
    /// The server sent GOAWAY: no new streams.
    goaway: bool,
    /// Stream ids ran out.
    exhausted: bool,
    /// The connection failed or ended: nothing more happens on it.
    dead: bool,
    fatal: Option<String>,
    /// What the server's decoder table holds of ours.
    table: Table,
    /// A dynamic table size update owed at the start of the next block
    /// (the server lowered SETTINGS_HEADER_TABLE_SIZE; RFC 7541 §4.2).
    size_update: Option<u32>,
}

impl Default for Http2Session {
    fn default() -> Self {
        Http2Session::new()
    }
}

/// The stream with id `sid`, if open.
fn find(slots: &mut [Option<Stream>], sid: u32) -> Option<&mut Stream> {
    let i = (sid >> 1) as usize & (slots.len() - 1);
    slots[i].as_mut().filter(|s| s.sid == sid)
}

/// The kind and words for a header block too large to take.
fn head_too_large() -> (ErrorKind, Cow<'static, str>) {
    (
        ErrorKind::Malformed(MalformedKind::HeadTooLarge),
        "response header block over 256 KiB".into(),
    )
}

fn malformed(detail: &str) -> (ErrorKind, Cow<'static, str>) {
    (
        ErrorKind::Malformed(MalformedKind::Header),
        Cow::Owned(format!("the response broke HTTP/2: {detail}")),
    )
}

impl Http2Session {
    /// A session not connected yet.
    pub fn new() -> Http2Session {
        Http2Session {
            out: Vec::with_capacity(4096),
            inbuf: Vec::new(),
            decoder: Decoder::new(HEADER_TABLE as usize),
            slots: (0..256).map(|_| None).collect(),
            open: 0,
            next_sid: 1,
            next_id: 0,
            events: VecDeque::new(),
            peer_concurrent: DEFAULT_CONCURRENT,
            peer_window: 65_535,
            peer_max_frame: frame::MIN_MAX_FRAME,
            conn_send_window: 65_535,
            conn_unacked: 0,
            cont: None,
            cont_buf: Vec::new(),
            pending: VecDeque::new(),
            connected: false,
            seen_frame: false,
            goaway: false,
            exhausted: false,
            dead: false,
            fatal: None,
            table: Table::Empty,
            size_update: None,
        }
    }

    /// How many streams are open.
    pub fn open_streams(&self) -> usize {
        self.open
    }

    /// The connection takes no new stream ever again (GOAWAY received, its
    /// stream ids used up, or dead), though streams open may still end.
    pub fn retiring(&self) -> bool {
        self.dead || self.goaway || self.exhausted
    }

    fn remove(&mut self, sid: u32) -> Option<Stream> {
        let i = (sid >> 1) as usize & (self.slots.len() - 1);
        if self.slots[i].as_ref().is_some_and(|s| s.sid == sid) {
            self.open -= 1;
            self.slots[i].take()
        } else {
            None
        }
    }

    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let mut slots: Vec<Option<Stream>> = (0..n).map(|_| None).collect();
        for s in self.slots.drain(..).flatten() {
            let i = (s.sid >> 1) as usize & (n - 1);
            slots[i] = Some(s);
        }
        self.slots = slots;
    }

    /// A stream fails: its event, and RST_STREAM with `rst` if given.
    fn fail_stream(
        &mut self,
        sid: u32,
        (kind, message): (ErrorKind, Cow<'static, str>),
        unprocessed: bool,
        rst: Option<u32>,
    ) {
        if let Some(s) = self.remove(sid) {
            if let Some(code) = rst {
                frame::write_rst(&mut self.out, sid, code);
            }
            self.events.push_back(Event::Failed {
                id: s.id,
                kind,
                message,
                unprocessed,
            });
        }
    }

    /// Every open stream fails alike (in stream order).
    fn fail_all(&mut self, kind: ErrorKind, message: Cow<'static, str>, unprocessed: bool) {
        let mut all: Vec<Stream> = self.slots.iter_mut().filter_map(Option::take).collect();
        all.sort_by_key(|s| s.sid);
        self.open = 0;
        self.pending.clear();
        for s in all {
            self.events.push_back(Event::Failed {
                id: s.id,
                kind,
                message: message.clone(),
                unprocessed,
            });
        }
    }

    /// A connection error (§5.4.1): GOAWAY, every stream fails, the
    /// session is dead.
    fn conn_error(&mut self, code: u32, detail: &str) {
        self.conn_error_as(
            code,
            ErrorKind::Other,
            Cow::Owned(format!(
                "HTTP/2 protocol error: {detail} ({})",
                frame::error_name(code)
            )),
        );
    }

    fn conn_error_as(&mut self, code: u32, kind: ErrorKind, message: Cow<'static, str>) {
        if self.dead {
            return;
        }
        frame::write_goaway(&mut self.out, code);
        self.dead = true;
        self.cont = None;
        self.fail_all(kind, message, false);
    }
    /// Sends queued body bytes as the peer's windows allow.
    fn flush_data(&mut self) {
        let mut i = 0;
        while i < self.pending.len() && self.conn_send_window > 0 {
            let sid = self.pending[i];
            let Some(s) = find(&mut self.slots, sid) else {
                self.pending.remove(i);
                continue;
            };
            while s.sent < s.body.len() {
                let n = (s.body.len() - s.sent)
                    .min(self.peer_max_frame as usize)
                    .min(self.conn_send_window.max(0) as usize)
                    .min(s.send_window.max(0) as usize);
                if n == 0 {
                    break;
                }
                let end = s.sent + n == s.body.len();
                let flags = if end { frame::END_STREAM } else { 0 };
                frame::write_head(&mut self.out, n, frame::DATA, flags, sid);
                self.out.extend_from_slice(&s.body[s.sent..s.sent + n]);
                s.sent += n;
                s.send_window -= n as i64;
                self.conn_send_window -= n as i64;
            }
            if s.sent == s.body.len() {
                self.pending.remove(i);
            } else {
                i += 1;
            }
        }
    }
}

impl Session for Http2Session {
    type Request = Http2Request;

    fn connect(&mut self) {
        if self.connected {
            return;
        }
        self.connected = true;
        self.out.extend_from_slice(frame::PREFACE);
        frame::write_settings(
            &mut self.out,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW),
                (frame::SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST),
                (frame::SETTINGS_HEADER_TABLE_SIZE, HEADER_TABLE),
            ],
        );
        frame::write_window_update(&mut self.out, 0, CONN_WINDOW - 65_535);
    }

    fn capacity(&self) -> usize {
        if !self.connected || self.dead || self.goaway || self.exhausted {
            return 0;
        }
        (self.peer_concurrent as usize)
            .min(MAX_OPEN)
            .saturating_sub(self.open)
    }

    fn submit(&mut self, request: &Http2Request, want: Want) -> Result<RequestId, SubmitError> {
        if self.capacity() == 0 {
            return Err(
                if self.is_closed() || self.goaway || self.exhausted || !self.connected {
                    SubmitError::Closed
                } else {
                    SubmitError::Full
                },
            );
        }
        if (self.open + 1) * 2 > self.slots.len() {
            self.grow();
        }
        // Stream ids only grow; one whose slot a long-lived stream holds is
        // skipped (RFC 9113 §5.1.1 allows gaps).
        let mask = self.slots.len() - 1;
        let mut sid = self.next_sid;
        while self.slots[(sid >> 1) as usize & mask].is_some() {
            sid += 2;
        }
        if sid > 0x7fff_ffff {
            self.exhausted = true;
            return Err(SubmitError::Closed);
        }
        self.next_sid = sid + 2;
        let id = self.next_id;
        self.next_id += 1;
        // The block: by index when this connection's table holds the
        // request's fields, filling the table when it is empty, else plain.
        let mut block: &[u8] = match (&request.indexed, self.table) {
            (Some(ix), Table::Holds(k)) if k == request.key => &ix.again,
            (Some(ix), Table::Empty) => {
                self.table = Table::Holds(request.key);
                &ix.first
            }
            _ => &request.block,
        };
        let with_update;
        if let Some(size) = self.size_update.take() {
            let mut b = Vec::with_capacity(block.len() + 5);
            super::hpack::encode_int(size, 5, 0x20, &mut b);
            b.extend_from_slice(block);
            with_update = b;
            block = &with_update;
        }
        // HEADERS, then CONTINUATIONs if the block is over the peer's frame size.
        let max = self.peer_max_frame as usize;
        let end = if request.body.is_empty() {
            frame::END_STREAM
        } else {
            0
        };
        let first = block.len().min(max);
        let flags = end
            | if first == block.len() {
                frame::END_HEADERS
            } else {
                0
            };
        frame::write_head(&mut self.out, first, frame::HEADERS, flags, sid);
        self.out.extend_from_slice(&block[..first]);
        let mut at = first;
        while at < block.len() {
            let n = (block.len() - at).min(max);
            let flags = if at + n == block.len() {
                frame::END_HEADERS
            } else {
                0
            };
            frame::write_head(&mut self.out, n, frame::CONTINUATION, flags, sid);
            self.out.extend_from_slice(&block[at..at + n]);
            at += n;
        }
        self.slots[(sid >> 1) as usize & mask] = Some(Stream {
            sid,
            id,
            want,
            head_request: request.is_head(),
            status: 0,
            content_length: None,
            body_bytes: 0,
            answer: None,
            send_window: self.peer_window,
            body: request.body.clone(),
            sent: 0,
            unacked: 0,
        });
        self.open += 1;
        if !request.body.is_empty() {
            self.pending.push_back(sid);
            self.flush_data();
        }
        Ok(id)
    }

    fn close(&mut self) {
        if !self.dead {
            // The client takes no stream from the server: last id 0.
            frame::write_goaway(&mut self.out, frame::NO_ERROR);
            self.dead = true;
        }
    }

    fn cancel(&mut self, id: RequestId) {
        let sid = self
            .slots
            .iter()
            .flatten()
            .find(|s| s.id == id)
            .map(|s| s.sid);
        if let Some(sid) = sid {
            self.remove(sid);
            if !self.dead {
                frame::write_rst(&mut self.out, sid, frame::CANCEL);
            }
        }
    }

    fn bytes_in(&mut self, data: &[u8]) {
        if self.dead {
            return;
        }
        if self.inbuf.is_empty() {
            let used = self.frames(data);
            if !self.dead {
                self.inbuf.extend_from_slice(&data[used..]);
            }
        } else {
            self.inbuf.extend_from_slice(data);
            let mut buf = std::mem::take(&mut self.inbuf);
            let used = self.frames(&buf);
            if self.dead {
                buf.clear();
            } else {
                buf.drain(..used);
            }
            self.inbuf = buf;
        }
    }

    fn eof(&mut self) {
        if self.dead {
            return;
        }
        self.dead = true;
        self.fail_all(
            ErrorKind::Closed,
            "connection closed before the response was complete".into(),
            false,
        );
    }

    fn pending_out(&self) -> &[u8] {
        &self.out
    }

    fn consume_out(&mut self, n: usize) {
        if n >= self.out.len() {
            self.out.clear();
        } else {
            self.out.drain(..n);
        }
    }

    fn bytes_out(&mut self, out: &mut Vec<u8>) -> usize {
        let n = self.out.len();
        if out.is_empty() {
            std::mem::swap(out, &mut self.out);
        } else {
            out.extend_from_slice(&self.out);
            self.out.clear();
        }
        n
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn is_closed(&self) -> bool {
        self.dead || ((self.goaway || self.exhausted) && self.open == 0)
    }

    /// The server answered the preface in HTTP/1: the message starts after
    /// "the server at URL " (the driver, which knows the URL, writes that).
    fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref()
    }
}
