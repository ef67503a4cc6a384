//! The HTTP/1 driver's socket side: connecting (with the TLS handshake:
//! `tcp.rs`'s steps, shared with the multiplexing driver),
//! writing what a connection's [`crate::session::H1Session`] has to send,
//! and reading responses (plain or through TLS) into it; what a finished or
//! failed request means for the load is the core's (`crate::core`).

use super::conns::TimeoutList;
use super::{io_msg, H1Link};
use crate::core::{Answered, ConnState, Core};
use crate::session::{Event, Session};
use crate::sys;
use crate::tcp::Failure;
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::io::{ErrorKind as IoKind, Read, Write};
use std::os::fd::AsRawFd;
use std::time::Instant;

impl H1Link {
    /// Connects slot `i` to where the core says (`tcp.rs`'s steps, as the
    /// multiplexing driver's connections).
    pub(super) fn open(&mut self, core: &mut Core<'_>, i: u32, now: Instant) {
        let dest = core.destination(i);
        let addr = dest.addr;
        let c = &mut self.conns[i as usize];
        c.tcp.begin(dest.tls.cloned(), now);
        c.session.reset();
        c.answered = 0;
        crate::tcp::connect(self, core, i, addr, now);
    }

    /// Writes what slot `i`'s session has to send (the request), as far as
    /// the socket takes it; the rest goes on the next writable event.
    pub(super) fn write_more(&mut self, core: &mut Core<'_>, i: u32) {
        let c = &mut self.conns[i as usize];
        let Some(s) = c.tcp.sock.as_mut() else { return };
        if let Some(tls) = c.tcp.tls.as_mut() {
            // The whole request goes into the TLS session at once; then its
            // records are flushed as far as the socket takes them.
            let bytes = c.session.pending_out();
            if !bytes.is_empty() {
                let _ = tls.writer().write_all(bytes);
                let n = bytes.len();
                c.session.consume_out(n);
            }
            while tls.wants_write() {
                match tls.write_tls(s) {
                    Ok(n) => core.rec.counters.bytes_written += n as u64,
                    Err(e) if e.kind() == IoKind::WouldBlock => return,
                    Err(e) if e.kind() == IoKind::Interrupted => {}
                    Err(e) => return self.write_failed(core, i, &e),
                }
            }
            c.state = ConnState::Reading;
            return;
        }
        // Bounded: every pass writes bytes or leaves.
        loop {
            let bytes = c.session.pending_out();
            if bytes.is_empty() {
                break;
            }
            match sys::send(s.as_raw_fd(), bytes) {
                Ok(0) => {
                    let now = Instant::now();
                    core.fail(
                        self,
                        i,
                        ErrorKind::Closed,
                        "connection closed while sending".into(),
                        now,
                    );
                    return;
                }
                Ok(n) => {
                    c.session.consume_out(n);
                    core.rec.counters.bytes_written += n as u64;
                }
                Err(e) if e.kind() == IoKind::WouldBlock => return,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return self.write_failed(core, i, &e),
            }
        }
        c.state = ConnState::Reading;
    }

    /// Reads what the socket holds. `closing` (the event carried RDHUP/ERR) means
    /// read on to EOF: a FIN that came with the data brings no later edge.
    pub(super) fn on_readable(&mut self, core: &mut Core<'_>, i: u32, closing: bool) {
        if self.conns[i as usize].tcp.tls.is_some() {
            return self.on_readable_tls(core, i);
        }
        loop {
            let c = &mut self.conns[i as usize];
            let Some(s) = c.tcp.sock.as_mut() else { return };
            let stamped = self.sleeper.defers() || self.defer.stamps();
            let (n, now, arrived) = match sys::recv_timed(s.as_raw_fd(), &mut self.buf, stamped) {
                Ok(got) => got,
                Err(e) if e.kind() == IoKind::WouldBlock => return,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                Err(e) => return self.read_failed(core, i, &e),
            };
            if n == 0 {
                self.on_eof(core, i, now);
                return;
            }
            core.rec.bytes_read(n as u64);
            if !self.on_plain(core, i, n, now, arrived) {
                return;
            }
            if n < self.buf.len() && !closing {
                // A short read drained the socket; the next data brings a new edge.
                return;
            }
        }
    }

    /// Handles `n` response bytes in the driver's buffer (`arrived`: when the
    /// last of them came, `now` unless the kernel stamped them); false when
    /// the connection stopped reading (response done and no next request, or
    /// failed).
    pub(super) fn on_plain(
        &mut self,
        core: &mut Core<'_>,
        i: u32,
        n: usize,
        now: Instant,
        arrived: Instant,
    ) -> bool {
        let c = &mut self.conns[i as usize];
        if !c.state.busy() {
            // Bytes nobody asked for: the connection cannot be trusted.
            core.drop_idle(self, i, now);
            return false;
        }
        if c.first_byte.is_none() {
            c.first_byte = Some(arrived);
        }
        c.wire += n as u64;
        let informational = c.session.informational();
        c.session.bytes_in_memo(&self.buf[..n], &mut self.memo);
        // Depth 1: at most a head, then the answer or a failure.
        let event = loop {
            match c.session.poll_event() {
                Some(Event::Head { .. }) => continue,
                other => break other,
            }
        };
        match event {
            None => {
                // Waiting is timed to the final response: after a 100 or 103
                // the clock for the first byte starts again.
                if c.session.informational() != informational && !c.session.final_started() {
                    c.first_byte = None;
                }
                true
            }
            Some(Event::Failed { kind, message, .. }) => {
                core.fail(self, i, kind, message, now);
                false
            }
            Some(done) => {
                c.answered = c.answered.saturating_add(1);
                if let Some(mut answered) = Answered::from_event(done, c.sent, c.first_byte, c.wire)
                {
                    answered.arrived = Some(arrived);
                    self.defer.answered();
                    core.complete(self, i, now, answered);
                }
                self.conns[i as usize].state == ConnState::Reading
            }
        }
    }

    /// Reads an https connection: TLS records from the socket, then the
    /// plaintext they carry, until the socket would block.
    fn on_readable_tls(&mut self, core: &mut Core<'_>, i: u32) {
        for _ in 0..1_000_000 {
            let stamped = self.sleeper.defers() || self.defer.stamps();
            let c = &mut self.conns[i as usize];
            let (Some(s), Some(tls)) = (c.tcp.sock.as_mut(), c.tcp.tls.as_mut()) else {
                return;
            };
            let mut arrived = None;
            let mut from = sys::TimedReader {
                fd: s.as_raw_fd(),
                stamped,
                arrived: &mut arrived,
            };
            let got = match tls.read_tls(&mut from) {
                Ok(0) => None,
                Ok(n) => Some(n),
                Err(e) if e.kind() == IoKind::WouldBlock => return,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                Err(e) => return self.read_failed(core, i, &e),
            };
            let now = Instant::now();
            let arrived = arrived.unwrap_or(now);
            if let Some(n) = got {
                core.rec.bytes_read(n as u64);
            }
            if let Err(e) = tls.process_new_packets() {
                let _ = tls.write_tls(s);
                core.fail(self, i, ErrorKind::Tls, Cow::Owned(e.to_string()), now);
                return;
            }
            // Plaintext now available.
            loop {
                let c = &mut self.conns[i as usize];
                let Some(tls) = c.tcp.tls.as_mut() else {
                    return;
                };
                match tls.reader().read(&mut self.buf) {
                    Ok(0) => {
                        // close_notify: the server closed cleanly.
                        self.on_eof(core, i, now);
                        return;
                    }
                    Ok(n) => {
                        if !self.on_plain(core, i, n, now, arrived) {
                            return;
                        }
                    }
                    Err(e) if e.kind() == IoKind::WouldBlock => break,
                    Err(e) => {
                        let kind = crate::tcp::plaintext_error(&e);
                        core.fail(self, i, kind, Cow::Owned(e.to_string()), now);
                        return;
                    }
                }
            }
            if got.is_none() {
                self.on_eof(core, i, now);
                return;
            }
        }
    }

    /// A write failed: the request being sent fails with it.
    fn write_failed(&mut self, core: &mut Core<'_>, i: u32, e: &std::io::Error) {
        core.fail(
            self,
            i,
            ErrorKind::from_io(e, false),
            io_msg(e),
            Instant::now(),
        );
    }

    /// A read failed: the request in flight fails with it (or goes again
    /// once, when the server reset a reused connection before any byte of
    /// its answer, as [`Self::on_eof`] says); an idle connection just goes.
    fn read_failed(&mut self, core: &mut Core<'_>, i: u32, e: &std::io::Error) {
        let now = Instant::now();
        if self.conns[i as usize].state.busy() {
            if self.raced(core, i) {
                return core.refused(self, i, ErrorKind::from_io(e, false), io_msg(e), now);
            }
            core.fail(self, i, ErrorKind::from_io(e, false), io_msg(e), now);
        } else {
            core.drop_idle(self, i, now);
        }
    }

    /// Slot `i`'s request met the end of a reused connection before any
    /// byte of its answer, and may go again (RFC 9110 §9.2.2).
    fn raced(&self, core: &Core<'_>, i: u32) -> bool {
        let c = &self.conns[i as usize];
        c.first_byte.is_none()
            && c.wire == 0
            && c.answered > 0
            && crate::core::idempotent(&core.request_spec(i).method)
    }

    pub(super) fn on_eof(&mut self, core: &mut Core<'_>, i: u32, now: Instant) {
        let c = &mut self.conns[i as usize];
        if !c.state.busy() {
            return core.drop_idle(self, i, now);
        }
        c.session.eof();
        let event = loop {
            match c.session.poll_event() {
                Some(Event::Head { .. }) => continue,
                other => break other,
            }
        };
        let (sent, first_byte, wire) = (c.sent, c.first_byte, c.wire);
        // The server closed a reused connection as the request went out (no
        // byte of an answer): an idempotent request goes again once, on a new
        // connection, as browsers and the HTTP/2 driver do (RFC 9110 §9.2.2).
        let raced = self.raced(core, i);
        match event {
            Some(Event::Failed { kind, message, .. }) if raced => {
                core.refused(self, i, kind, message, now)
            }
            None if raced => core.refused(
                self,
                i,
                ErrorKind::Closed,
                "connection closed before any response".into(),
                now,
            ),
            Some(Event::Failed { kind, message, .. }) => core.fail(self, i, kind, message, now),
            Some(done) => match Answered::from_event(done, sent, first_byte, wire) {
                // A body delimited by the close.
                Some(answered) => core.complete(self, i, now, answered),
                None => core.drop_idle(self, i, now),
            },
            None => core.fail(
                self,
                i,
                ErrorKind::Closed,
                "connection closed before any response".into(),
                now,
            ),
        }
    }
}

/// Opening a slot's connection: the steps are `tcp.rs`'s.
impl crate::tcp::Opening for H1Link {
    #[inline]
    fn tcp(&mut self, i: u32) -> &mut crate::tcp::Tcp {
        &mut self.conns[i as usize].tcp
    }

    fn opened(&mut self, core: &mut Core<'_>, i: u32, now: Instant) {
        let c = &mut self.conns[i as usize];
        c.state = ConnState::Connecting;
        c.deadline = now + core.plan.connect_timeout;
        core.waiting();
        self.push(i, TimeoutList::Connects);
    }

    fn open_failed(&mut self, core: &mut Core<'_>, i: u32, why: Failure, now: Instant) {
        let (kind, msg) = why;
        core.connect_failed(self, i, kind, msg, now);
    }

    fn counted_to(&self, i: u32) -> u32 {
        i
    }

    fn handshaking(&mut self, i: u32) {
        self.conns[i as usize].state = ConnState::Handshaking;
    }

    /// The connection (and its TLS session) is up: the core sends or waits.
    fn up(&mut self, core: &mut Core<'_>, i: u32, now: Instant) {
        self.unlink(i);
        self.conns[i as usize].state = ConnState::Idle;
        core.connection_ready(self, i, now);
    }
}
