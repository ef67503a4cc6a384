//! [`Http2Session`]: one HTTP/2 client connection behind the sans-IO
//! [`Session`] seam (RFC 9113): preface and SETTINGS, streams in a slab
//! indexed by stream id, HEADERS/CONTINUATION out from a block encoded once,
//! request bodies as DATA under the peer's windows, frames in from a buffer
//! that holds at most one partial frame, responses decoded with HPACK into
//! events, WINDOW_UPDATEs sent once half a window is consumed.
//!
//! Before the server's first SETTINGS arrives the session takes up to 100
//! streams (RFC 9113 §5.1.2's recommended minimum; the server's SETTINGS
//! follows its preface at once, and a server that allows fewer refuses the
//! excess with REFUSED_STREAM, reported as unprocessed so the driver sends
//! them again).

use super::frame::{self, Head};
use super::hpack::{Decoder, Sink};
use super::request::Http2Request;
use crate::h1::Capture;
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
/// The largest frame payload the client takes (the default; not advertised).
const MAX_FRAME: u32 = frame::MIN_MAX_FRAME;
/// Streams taken before the server's SETTINGS (see the top of this file).
const DEFAULT_CONCURRENT: u32 = 100;
/// The most streams one session keeps open, whatever the server allows.
const MAX_OPEN: usize = 4096;
/// The largest header block (HEADERS + CONTINUATIONs) buffered before it is
/// decoded: beyond it the connection fails (a block that large holds more
/// than the header list limit anyway).
const MAX_BLOCK: usize = 2 * crate::h2run::MAX_HEADER_LIST as usize;

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

/// The same kind and words as `h2run` for a header block too large to take.
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
        }
    }

    /// How many streams are open.
    pub fn open_streams(&self) -> usize {
        self.open
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

    /// Parses whole frames from `buf`; returns how many bytes were used.
    fn frames(&mut self, buf: &[u8]) -> usize {
        let mut at = 0;
        loop {
            if self.dead {
                return buf.len();
            }
            let rest = &buf[at..];
            if !self.seen_frame {
                const H1: &[u8] = b"HTTP/1.";
                let n = rest.len().min(H1.len());
                if rest[..n] == H1[..n] {
                    if n < H1.len() {
                        return at;
                    }
                    self.fatal = Some(
                        "answered in HTTP/1, not HTTP/2: it does not take HTTP/2 over \
                         cleartext with prior knowledge (h2c); run without --h2c"
                            .into(),
                    );
                    self.dead = true;
                    self.fail_all(
                        ErrorKind::Other,
                        "the server answered in HTTP/1, not HTTP/2".into(),
                        false,
                    );
                    return buf.len();
                }
            }
            if rest.len() < 9 {
                return at;
            }
            let h = Head::parse(rest);
            if h.len > MAX_FRAME {
                self.conn_error(frame::FRAME_SIZE_ERROR, "a frame longer than 16384 bytes");
                return buf.len();
            }
            let end = 9 + h.len as usize;
            if rest.len() < end {
                return at;
            }
            if !self.seen_frame && (h.kind != frame::SETTINGS || h.flags & frame::ACK != 0) {
                self.conn_error(
                    frame::PROTOCOL_ERROR,
                    "the server's first frame is not SETTINGS",
                );
                return buf.len();
            }
            self.seen_frame = true;
            self.frame(h, &rest[9..end]);
            at += end;
        }
    }

    fn frame(&mut self, h: Head, p: &[u8]) {
        if let Some((sid, _)) = self.cont {
            if h.kind != frame::CONTINUATION || h.stream != sid {
                return self.conn_error(frame::PROTOCOL_ERROR, "a header block was interrupted");
            }
        }
        match h.kind {
            frame::DATA => self.data(h, p),
            frame::HEADERS => {
                if h.stream == 0 {
                    return self.conn_error(frame::PROTOCOL_ERROR, "HEADERS on stream 0");
                }
                let Some(mut block) = frame::unpad(h.flags, p) else {
                    return self.conn_error(frame::PROTOCOL_ERROR, "padding longer than the frame");
                };
                if h.flags & frame::PRIORITY_FLAG != 0 {
                    if block.len() < 5 {
                        return self.conn_error(frame::FRAME_SIZE_ERROR, "HEADERS too short");
                    }
                    block = &block[5..];
                }
                let end_stream = h.flags & frame::END_STREAM != 0;
                if h.flags & frame::END_HEADERS != 0 {
                    self.block(h.stream, block, end_stream);
                } else {
                    self.cont = Some((h.stream, end_stream));
                    self.cont_buf.clear();
                    self.cont_buf.extend_from_slice(block);
                }
            }
            frame::CONTINUATION => {
                let Some((sid, end_stream)) = self.cont else {
                    return self.conn_error(frame::PROTOCOL_ERROR, "CONTINUATION without HEADERS");
                };
                if self.cont_buf.len() + p.len() > MAX_BLOCK {
                    let (kind, message) = head_too_large();
                    return self.conn_error_as(frame::PROTOCOL_ERROR, kind, message);
                }
                self.cont_buf.extend_from_slice(p);
                if h.flags & frame::END_HEADERS != 0 {
                    self.cont = None;
                    let block = std::mem::take(&mut self.cont_buf);
                    self.block(sid, &block, end_stream);
                    self.cont_buf = block;
                }
            }
            frame::PRIORITY if p.len() != 5 => {
                self.conn_error(frame::FRAME_SIZE_ERROR, "PRIORITY not 5 bytes")
            }
            frame::RST_STREAM => {
                if h.stream == 0 {
                    return self.conn_error(frame::PROTOCOL_ERROR, "RST_STREAM on stream 0");
                }
                if p.len() != 4 {
                    return self.conn_error(frame::FRAME_SIZE_ERROR, "RST_STREAM not 4 bytes");
                }
                let code = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
                let why = (
                    ErrorKind::StreamReset,
                    Cow::Owned(format!(
                        "stream reset by the server ({})",
                        frame::error_name(code)
                    )),
                );
                self.fail_stream(h.stream, why, code == frame::REFUSED_STREAM, None);
            }
            frame::SETTINGS => self.settings(h, p),
            frame::PUSH_PROMISE => {
                self.conn_error(frame::PROTOCOL_ERROR, "PUSH_PROMISE, but push is disabled")
            }
            frame::PING => {
                if h.stream != 0 {
                    return self.conn_error(frame::PROTOCOL_ERROR, "PING on a stream");
                }
                if p.len() != 8 {
                    return self.conn_error(frame::FRAME_SIZE_ERROR, "PING not 8 bytes");
                }
                if h.flags & frame::ACK == 0 {
                    frame::write_head(&mut self.out, 8, frame::PING, frame::ACK, 0);
                    self.out.extend_from_slice(p);
                }
            }
            frame::GOAWAY => {
                if h.stream != 0 {
                    return self.conn_error(frame::PROTOCOL_ERROR, "GOAWAY on a stream");
                }
                if p.len() < 8 {
                    return self.conn_error(frame::FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes");
                }
                let last = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff;
                let code = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
                self.goaway = true;
                let mut above: Vec<u32> = self
                    .slots
                    .iter()
                    .flatten()
                    .map(|s| s.sid)
                    .filter(|&sid| sid > last)
                    .collect();
                above.sort_unstable();
                for sid in above {
                    let why = (
                        ErrorKind::GoAway,
                        Cow::Owned(format!("server sent GOAWAY ({})", frame::error_name(code))),
                    );
                    self.fail_stream(sid, why, true, None);
                }
            }
            frame::WINDOW_UPDATE => {
                if p.len() != 4 {
                    return self.conn_error(frame::FRAME_SIZE_ERROR, "WINDOW_UPDATE not 4 bytes");
                }
                let inc = (u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff) as i64;
                if h.stream == 0 {
                    if inc == 0 {
                        return self.conn_error(frame::PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
                    }
                    self.conn_send_window += inc;
                    if self.conn_send_window > i32::MAX as i64 {
                        return self.conn_error(
                            frame::FLOW_CONTROL_ERROR,
                            "the connection window went past 2^31-1",
                        );
                    }
                } else if let Some(s) = find(&mut self.slots, h.stream) {
                    s.send_window += inc;
                    if inc == 0 || s.send_window > i32::MAX as i64 {
                        let why = malformed("a stream WINDOW_UPDATE of 0 or past 2^31-1");
                        return self.fail_stream(
                            h.stream,
                            why,
                            false,
                            Some(frame::FLOW_CONTROL_ERROR),
                        );
                    }
                }
                self.flush_data();
            }
            _ => {} // unknown frame types are ignored (§4.1)
        }
    }

    fn settings(&mut self, h: Head, p: &[u8]) {
        if h.stream != 0 {
            return self.conn_error(frame::PROTOCOL_ERROR, "SETTINGS on a stream");
        }
        if h.flags & frame::ACK != 0 {
            if !p.is_empty() {
                self.conn_error(frame::FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
            }
            return;
        }
        if !p.len().is_multiple_of(6) {
            return self.conn_error(
                frame::FRAME_SIZE_ERROR,
                "SETTINGS not a multiple of 6 bytes",
            );
        }
        for pair in p.chunks_exact(6) {
            let id = u16::from_be_bytes([pair[0], pair[1]]);
            let v = u32::from_be_bytes([pair[2], pair[3], pair[4], pair[5]]);
            match id {
                frame::SETTINGS_ENABLE_PUSH if v > 1 => {
                    return self.conn_error(frame::PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH above 1")
                }
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => self.peer_concurrent = v,
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if v > i32::MAX as u32 {
                        return self.conn_error(
                            frame::FLOW_CONTROL_ERROR,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        );
                    }
                    let delta = v as i64 - self.peer_window;
                    self.peer_window = v as i64;
                    let mut over = false;
                    for s in self.slots.iter_mut().flatten() {
                        s.send_window += delta;
                        over |= s.send_window > i32::MAX as i64;
                    }
                    if over {
                        return self.conn_error(
                            frame::FLOW_CONTROL_ERROR,
                            "a stream window went past 2^31-1",
                        );
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::MIN_MAX_FRAME..=0xff_ffff).contains(&v) {
                        return self.conn_error(
                            frame::PROTOCOL_ERROR,
                            "SETTINGS_MAX_FRAME_SIZE out of range",
                        );
                    }
                    self.peer_max_frame = v;
                }
                // The header table size bounds the server's decoder: the
                // client's blocks never index, so any size suits them.
                _ => {}
            }
        }
        frame::write_head(&mut self.out, 0, frame::SETTINGS, frame::ACK, 0);
        self.flush_data();
    }

    fn data(&mut self, h: Head, p: &[u8]) {
        if h.stream == 0 {
            return self.conn_error(frame::PROTOCOL_ERROR, "DATA on stream 0");
        }
        if h.stream >= self.next_sid || h.stream & 1 == 0 {
            return self.conn_error(frame::PROTOCOL_ERROR, "DATA on a stream never opened");
        }
        let Some(data) = frame::unpad(h.flags, p) else {
            return self.conn_error(frame::PROTOCOL_ERROR, "padding longer than the frame");
        };
        // Flow control counts the whole payload, padding included (§6.9.1).
        self.conn_unacked += h.len;
        if self.conn_unacked >= CONN_WINDOW / 2 {
            frame::write_window_update(&mut self.out, 0, self.conn_unacked);
            self.conn_unacked = 0;
        }
        let end = h.flags & frame::END_STREAM != 0;
        let Some(s) = find(&mut self.slots, h.stream) else {
            return; // cancelled or failed: ignored
        };
        if s.status == 0 {
            let why = malformed("DATA before the response head");
            return self.fail_stream(h.stream, why, false, Some(frame::PROTOCOL_ERROR));
        }
        s.body_bytes += data.len() as u64;
        if let Some(c) = s
            .answer
            .as_deref_mut()
            .and_then(|a| a.capture.as_deref_mut())
        {
            c.keep_body(data);
        }
        if s.content_length.is_some_and(|cl| s.body_bytes > cl) {
            let why = malformed("a body longer than its content-length");
            return self.fail_stream(h.stream, why, false, Some(frame::PROTOCOL_ERROR));
        }
        if end {
            return self.finish(h.stream);
        }
        s.unacked += h.len;
        if s.unacked >= STREAM_WINDOW / 2 {
            frame::write_window_update(&mut self.out, h.stream, s.unacked);
            s.unacked = 0;
        }
    }

    /// A whole header block for `sid`.
    fn block(&mut self, sid: u32, block: &[u8], end_stream: bool) {
        if sid & 1 == 0 || sid >= self.next_sid {
            return self.conn_error(frame::PROTOCOL_ERROR, "HEADERS on a stream never opened");
        }
        let s = find(&mut self.slots, sid);
        let want = s.as_ref().map_or(Want::NOTHING, |s| s.want);
        let trailers = s.as_ref().is_some_and(|s| s.status != 0);
        let mut sink = HeadSink::new(if trailers { Want::NOTHING } else { want });
        let list = match self.decoder.decode(block, &mut sink) {
            Ok(n) => n,
            Err(e) => {
                return self.conn_error(frame::COMPRESSION_ERROR, &e.to_string());
            }
        };
        let Some(s) = find(&mut self.slots, sid) else {
            return; // cancelled or failed: decoded for the table's sake only
        };
        if sink.over || list > crate::h2run::MAX_HEADER_LIST as usize {
            // As h2 did: a list over the limit costs the stream (Malformed
            // Header); a block too big to buffer costs the connection
            // (HeadTooLarge, in CONTINUATION above).
            let why = malformed("a header list over 256 KiB");
            return self.fail_stream(sid, why, false, Some(frame::CANCEL));
        }
        if trailers {
            if !end_stream {
                let why = malformed("a second header block that does not end the stream");
                return self.fail_stream(sid, why, false, Some(frame::PROTOCOL_ERROR));
            }
            return self.finish(sid);
        }
        let status = match sink.status {
            Some(st) if !sink.bad => st,
            _ => {
                let why = malformed("a response head without a valid :status");
                return self.fail_stream(sid, why, false, Some(frame::PROTOCOL_ERROR));
            }
        };
        if status < 200 {
            if end_stream {
                let why = malformed("an informational head that ends the stream");
                return self.fail_stream(sid, why, false, Some(frame::PROTOCOL_ERROR));
            }
            return; // 1xx: the final head follows
        }
        s.status = status;
        s.content_length = sink.content_length;
        if want.any() {
            s.answer = Some(Box::new(sink.answer(want, status)));
        }
        self.events.push_back(Event::Head { id: s.id, status });
        if end_stream {
            self.finish(sid);
        }
    }

    /// END_STREAM from the server: the answer is complete.
    fn finish(&mut self, sid: u32) {
        let Some(mut s) = self.remove(sid) else {
            return;
        };
        let no_body = s.head_request || s.status == 204 || s.status == 304;
        if let Some(cl) = s.content_length {
            if !no_body && cl != s.body_bytes {
                self.events.push_back(Event::Failed {
                    id: s.id,
                    kind: ErrorKind::Malformed(MalformedKind::Header),
                    message: "the response broke HTTP/2: a body shorter than its content-length"
                        .into(),
                    unprocessed: false,
                });
                return;
            }
        }
        if s.sent < s.body.len() {
            // Answered before the whole body went: stop sending it (§8.1).
            frame::write_rst(&mut self.out, sid, frame::CANCEL);
        }
        self.events.push_back(Event::Done {
            id: s.id,
            status: s.status,
            body_bytes: s.body_bytes,
            answer: s.answer.take(),
        });
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

/// Collects what a response head needs: `:status`, `content-length`, and
/// what [`Want`] asks; counts the list size itself so a huge list is not kept.
struct HeadSink {
    want: Want,
    status: Option<u16>,
    bad: bool,
    content_length: Option<u64>,
    server: Option<String>,
    location: Option<String>,
    headers: Vec<(String, String)>,
    size: usize,
    over: bool,
}

impl HeadSink {
    fn new(want: Want) -> HeadSink {
        HeadSink {
            want,
            status: None,
            bad: false,
            content_length: None,
            server: None,
            location: None,
            headers: Vec::new(),
            size: 0,
            over: false,
        }
    }

    fn capture_headers(&self) -> bool {
        matches!(self.want.capture, Some((true, _)))
    }

    fn answer(&mut self, want: Want, status: u16) -> Answer {
        Answer {
            server: self.server.take(),
            location: self
                .location
                .take()
                .filter(|_| (300..400).contains(&status)),
            capture: want.capture.map(|(want_headers, want_body)| {
                Box::new(Capture {
                    want_headers,
                    want_body,
                    headers: std::mem::take(&mut self.headers),
                    ..Default::default()
                })
            }),
        }
    }
}

impl Sink for HeadSink {
    fn wants(&mut self, name: &[u8]) -> bool {
        match name {
            b":status" | b"content-length" => true,
            b"server" => self.want.server,
            b"location" => self.want.location,
            _ => self.capture_headers(),
        }
    }

    fn field(&mut self, name: &[u8], value: Option<&[u8]>) {
        self.size += name.len() + value.map_or(0, <[u8]>::len) + 32;
        if self.size > crate::h2run::MAX_HEADER_LIST as usize {
            self.over = true;
            return;
        }
        let Some(v) = value else { return };
        match name {
            b":status" => {
                let ok = v.len() == 3 && v.iter().all(u8::is_ascii_digit);
                if !ok || self.status.is_some() {
                    self.bad = true;
                } else {
                    self.status = Some(
                        (v[0] - b'0') as u16 * 100
                            + (v[1] - b'0') as u16 * 10
                            + (v[2] - b'0') as u16,
                    );
                }
                return;
            }
            b"content-length" => {
                let n = std::str::from_utf8(v)
                    .ok()
                    .and_then(|t| t.parse::<u64>().ok());
                match (n, self.content_length) {
                    (Some(n), None) => self.content_length = Some(n),
                    (Some(n), Some(m)) if n == m => {}
                    _ => self.bad = true,
                }
            }
            b"server" if self.want.server && self.server.is_none() => {
                self.server = Some(String::from_utf8_lossy(v).chars().take(200).collect());
            }
            b"location" if self.want.location && self.location.is_none() => {
                self.location = Some(String::from_utf8_lossy(v).into_owned());
            }
            _ => {}
        }
        if name.first() != Some(&b':') && self.capture_headers() {
            self.headers.push((
                String::from_utf8_lossy(name).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
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
                (
                    frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                    crate::h2run::MAX_HEADER_LIST,
                ),
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
        // HEADERS, then CONTINUATIONs if the block is over the peer's frame size.
        let block = &request.block[..];
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
