//! The receiving half of [`Http2Session`]: whole frames parsed from the
//! bytes read (at most one partial frame kept by the caller), each applied:
//! SETTINGS, PING, GOAWAY, RST_STREAM, WINDOW_UPDATE, header blocks
//! (HEADERS + CONTINUATION, decoded with HPACK into a [`HeadSink`]) and DATA
//! with its flow control.

use super::head::HeadSink;
use super::{
    find, head_too_large, malformed, Http2Session, CONN_WINDOW, MAX_BLOCK, MAX_FRAME, STREAM_WINDOW,
};
use crate::http2::frame::{self, Head};
use crate::session::{Event, Want};
use redline_stats::{ErrorKind, MalformedKind};
use std::borrow::Cow;

impl Http2Session {
    /// Parses whole frames from `buf`; returns how many bytes were used.
    pub(super) fn frames(&mut self, buf: &[u8]) -> usize {
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
                // The server's decoder keeps at most this much of our
                // fields. Below the default, the client gives its table up:
                // the next block starts with a size update to 0 (RFC 7541
                // §4.2; after this SETTINGS' ACK, which goes out first) and
                // no block indexes again (plain blocks suit any size).
                frame::SETTINGS_HEADER_TABLE_SIZE
                    if v < super::HPACK_DEFAULT_TABLE && self.table != super::Table::Off =>
                {
                    self.table = super::Table::Off;
                    self.size_update = Some(0);
                }
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
        if sink.over || list > super::MAX_HEADER_LIST as usize {
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
}
