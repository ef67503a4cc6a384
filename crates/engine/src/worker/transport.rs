//! The HTTP/1 worker's socket side: connecting (with the TLS handshake),
//! writing what a connection's [`crate::session::H1Session`] has to send,
//! and reading responses (plain or through TLS) into it; what a finished or
//! failed request means for the load is `lifecycle.rs`'s.

use super::conns::{ConnState, TimeoutList};
use super::lifecycle::Answered;
use super::{io_msg, Worker};
use crate::session::{Event, Session};
use crate::sys;
use mio::net::TcpStream;
use mio::{Interest, Token};
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::io::{ErrorKind as IoKind, Read, Write};
use std::os::fd::AsRawFd;
use std::time::Instant;

impl Worker<'_> {
    pub(super) fn connect(&mut self, i: u32, now: Instant) {
        // A redirect hop to another origin connects there.
        let away = self.conns[i as usize]
            .redir
            .as_ref()
            .and_then(|r| r.to.clone());
        let addr = match self.scenario.is_some() {
            _ if away.is_some() => away.as_ref().map_or(self.plan.target.addr, |o| o.addr),
            true => {
                let r = self.choose(i);
                let sc = self.scenario.as_mut().expect("scenario");
                let t = sc.load.scenario.requests[r].target;
                sc.vus[i as usize].target = t;
                sc.load.scenario.targets[t].addr
            }
            false => self.plan.target.addr,
        };
        let c = &mut self.conns[i as usize];
        c.away = away;
        c.connect_start = now;
        c.on_conn = 0;
        c.session.reset();
        match TcpStream::connect(addr) {
            Ok(mut s) => {
                if let Err(e) = self.poll.registry().register(
                    &mut s,
                    Token(i as usize),
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    self.connect_failed(i, ErrorKind::from_io(&e, true), io_msg(&e), now);
                    return;
                }
                let c = &mut self.conns[i as usize];
                c.sock = Some(s);
                c.state = ConnState::Connecting;
                c.deadline = now + self.plan.connect_timeout;
                self.connecting += 1;
                self.open += 1;
                self.peak_open = self.peak_open.max(self.open);
                self.push(i, TimeoutList::Connects);
                // On loopback (and often a LAN) the handshake completes inside
                // connect() itself: go on at once, without waiting for the
                // writable event and asking the socket for its error (two
                // syscalls and an event fewer per connection).
                let c = &self.conns[i as usize];
                if c.sock.as_ref().is_some_and(|s| s.peer_addr().is_ok()) {
                    self.connected(i, Instant::now());
                }
            }
            Err(e) => self.connect_failed(i, ErrorKind::from_io(&e, true), io_msg(&e), now),
        }
    }

    pub(super) fn on_connect_event(&mut self, i: u32) {
        let now = Instant::now();
        let c = &mut self.conns[i as usize];
        let Some(s) = c.sock.as_ref() else { return };
        match s.take_error() {
            Ok(Some(e)) | Err(e) => {
                self.connect_failed(i, ErrorKind::from_io(&e, true), io_msg(&e), now);
                return;
            }
            Ok(None) => {}
        }
        match s.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == IoKind::NotConnected => return, // not yet
            Err(e) => {
                self.connect_failed(i, ErrorKind::from_io(&e, true), io_msg(&e), now);
                return;
            }
        }
        self.connected(i, now);
    }

    /// The TCP connection of slot `i` is up: counts the connect time, then
    /// starts TLS or the first request.
    pub(super) fn connected(&mut self, i: u32, now: Instant) {
        let c = &mut self.conns[i as usize];
        if let Some(s) = c.sock.as_ref() {
            let _ = s.set_nodelay(true);
        }
        let took = now.saturating_duration_since(c.connect_start);
        self.rec.connected(took);
        let away = c.away.clone();
        let tls = match &mut self.scenario {
            Some(sc) => {
                let vu = &sc.vus[i as usize];
                if let Some(r) = vu.chosen {
                    sc.load.stats[r].connect.record(took);
                }
                sc.load.scenario.targets[vu.target].tls.as_ref()
            }
            None => self.plan.tls.as_ref(),
        };
        let tls = match &away {
            Some(o) => o.tls.as_ref(),
            None => tls,
        };
        if let Some(t) = tls {
            match rustls::ClientConnection::new(t.config.clone(), t.server_name.clone()) {
                Ok(conn) => {
                    c.tls = Some(Box::new(conn));
                    // From here on, the handshake's start.
                    c.connect_start = now;
                    c.state = ConnState::Handshaking;
                    self.drive_handshake(i);
                }
                Err(e) => self.connect_failed(i, ErrorKind::Tls, Cow::Owned(e.to_string()), now),
            }
            return;
        }
        self.connection_ready(i, now);
    }

    /// Moves TLS handshake bytes both ways until it is done or the socket would block.
    pub(super) fn drive_handshake(&mut self, i: u32) {
        let now = Instant::now();
        let c = &mut self.conns[i as usize];
        let (Some(s), Some(tls)) = (c.sock.as_mut(), c.tls.as_mut()) else {
            return;
        };
        let mut result: Result<(), (ErrorKind, Cow<'static, str>)> = Ok(());
        for _ in 0..64 {
            let mut progressed = false;
            while tls.wants_write() {
                match tls.write_tls(s) {
                    Ok(_) => progressed = true,
                    Err(e) if e.kind() == IoKind::WouldBlock => break,
                    Err(e) if e.kind() == IoKind::Interrupted => {}
                    Err(e) => {
                        result = Err((ErrorKind::from_io(&e, true), io_msg(&e)));
                        break;
                    }
                }
            }
            if result.is_err() || !tls.is_handshaking() {
                break;
            }
            if tls.wants_read() {
                match tls.read_tls(s) {
                    Ok(0) => {
                        result = Err((
                            ErrorKind::Tls,
                            "connection closed during the TLS handshake".into(),
                        ));
                        break;
                    }
                    Ok(n) => {
                        self.rec.counters.bytes_read += n as u64;
                        progressed = true;
                        if let Err(e) = tls.process_new_packets() {
                            // Send the alert, then fail.
                            let _ = tls.write_tls(s);
                            result = Err((ErrorKind::Tls, Cow::Owned(e.to_string())));
                            break;
                        }
                    }
                    Err(e) if e.kind() == IoKind::WouldBlock => {}
                    Err(e) if e.kind() == IoKind::Interrupted => progressed = true,
                    Err(e) => {
                        result = Err((ErrorKind::from_io(&e, true), io_msg(&e)));
                        break;
                    }
                }
            }
            if !progressed {
                break;
            }
        }
        let done = !tls.is_handshaking() && !tls.wants_write();
        match result {
            Err((kind, msg)) => self.connect_failed(i, kind, msg, now),
            Ok(()) if done => {
                let d = now.saturating_duration_since(c.connect_start);
                self.rec.tls.record(d);
                self.connection_ready(i, now);
            }
            Ok(()) => {}
        }
    }

    /// A connection (and its TLS session) is up: send, or wait for work.
    pub(super) fn connection_ready(&mut self, i: u32, now: Instant) {
        self.unlink(i);
        self.connecting -= 1;
        let c = &mut self.conns[i as usize];
        c.state = ConnState::Idle;
        if c.has_request {
            let intended = c.intended;
            self.send(i, intended, now);
        } else if let Some(t) = self.ledger.dequeue() {
            self.send(i, t, now);
        } else {
            self.idle.push(i);
        }
    }

    pub(super) fn connect_failed(
        &mut self,
        i: u32,
        kind: ErrorKind,
        msg: Cow<'static, str>,
        now: Instant,
    ) {
        let was_connecting = matches!(
            self.conns[i as usize].state,
            ConnState::Connecting | ConnState::Handshaking
        );
        self.close(i);
        if was_connecting {
            self.connecting -= 1;
        }
        let c = &mut self.conns[i as usize];
        if c.has_request {
            c.has_request = false;
            if c.redir.take().is_some() {
                // A redirect hop: the request was in flight.
                self.ledger.finish_failed();
            } else {
                self.ledger.fail_held();
            }
            self.rec.error(kind, msg, now);
            self.last_done = now;
            self.request_ended(i);
            self.after(i, now);
        } else if self.open_loop {
            // The connect was for the oldest waiting request: it fails with it.
            if self.ledger.fail_pending() {
                self.rec.error(kind, msg, now);
                self.last_done = now;
                self.request_ended(i);
                if let Some(sc) = self.scenario.as_mut() {
                    // An arrival whose journey could not begin.
                    sc.load.journey_failed_to_start();
                }
            }
            self.free.push(i);
        }
    }

    /// Writes what slot `i`'s session has to send (the request), as far as
    /// the socket takes it; the rest goes on the next writable event.
    pub(super) fn write_more(&mut self, i: u32) {
        let c = &mut self.conns[i as usize];
        let Some(s) = c.sock.as_mut() else { return };
        if let Some(tls) = c.tls.as_mut() {
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
                    Ok(n) => self.rec.counters.bytes_written += n as u64,
                    Err(e) if e.kind() == IoKind::WouldBlock => return,
                    Err(e) if e.kind() == IoKind::Interrupted => {}
                    Err(e) => return self.write_failed(i, &e),
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
                    self.fail(
                        i,
                        ErrorKind::Closed,
                        "connection closed while sending".into(),
                        now,
                    );
                    return;
                }
                Ok(n) => {
                    c.session.consume_out(n);
                    self.rec.counters.bytes_written += n as u64;
                }
                Err(e) if e.kind() == IoKind::WouldBlock => return,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return self.write_failed(i, &e),
            }
        }
        c.state = ConnState::Reading;
    }

    /// Reads what the socket holds. `closing` (the event carried RDHUP/ERR) means
    /// read on to EOF: a FIN that came with the data brings no later edge.
    pub(super) fn on_readable(&mut self, i: u32, closing: bool) {
        if self.conns[i as usize].tls.is_some() {
            return self.on_readable_tls(i);
        }
        loop {
            let c = &mut self.conns[i as usize];
            let Some(s) = c.sock.as_mut() else { return };
            let n = match sys::recv(s.as_raw_fd(), &mut self.buf) {
                Ok(n) => n,
                Err(e) if e.kind() == IoKind::WouldBlock => return,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                Err(e) => return self.read_failed(i, &e),
            };
            let now = Instant::now();
            if n == 0 {
                self.on_eof(i, now);
                return;
            }
            self.rec.bytes_read(n as u64);
            if !self.on_plain(i, n, now) {
                return;
            }
            if n < self.buf.len() && !closing {
                // A short read drained the socket; the next data brings a new edge.
                return;
            }
        }
    }

    /// Handles `n` response bytes in the worker's buffer; false when the
    /// connection stopped reading (response done and no next request, or failed).
    pub(super) fn on_plain(&mut self, i: u32, n: usize, now: Instant) -> bool {
        {
            let c = &mut self.conns[i as usize];
            match c.state {
                ConnState::Reading | ConnState::Writing => {}
                _ => {
                    // Bytes nobody asked for: the connection cannot be trusted.
                    self.drop_idle(i, now);
                    return false;
                }
            }
            if c.first_byte.is_none() {
                c.first_byte = Some(now);
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
                }
                Some(Event::Failed { kind, message, .. }) => {
                    self.fail(i, kind, message, now);
                    return false;
                }
                Some(done) => {
                    if let Some(answered) = Answered::from_event(done) {
                        self.complete(i, now, answered);
                    }
                    return self.conns[i as usize].state == ConnState::Reading;
                }
            }
        }
        true
    }

    /// Reads an https connection: TLS records from the socket, then the
    /// plaintext they carry, until the socket would block.
    pub(super) fn on_readable_tls(&mut self, i: u32) {
        for _ in 0..1_000_000 {
            let c = &mut self.conns[i as usize];
            let (Some(s), Some(tls)) = (c.sock.as_mut(), c.tls.as_mut()) else {
                return;
            };
            let got = match tls.read_tls(s) {
                Ok(0) => None,
                Ok(n) => Some(n),
                Err(e) if e.kind() == IoKind::WouldBlock => return,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                Err(e) => return self.read_failed(i, &e),
            };
            let now = Instant::now();
            if let Some(n) = got {
                self.rec.bytes_read(n as u64);
            }
            if let Err(e) = tls.process_new_packets() {
                let _ = tls.write_tls(s);
                self.fail(i, ErrorKind::Tls, Cow::Owned(e.to_string()), now);
                return;
            }
            // Plaintext now available.
            loop {
                let c = &mut self.conns[i as usize];
                let Some(tls) = c.tls.as_mut() else { return };
                match tls.reader().read(&mut self.buf) {
                    Ok(0) => {
                        // close_notify: the server closed cleanly.
                        self.on_eof(i, now);
                        return;
                    }
                    Ok(n) => {
                        if !self.on_plain(i, n, now) {
                            return;
                        }
                    }
                    Err(e) if e.kind() == IoKind::WouldBlock => break,
                    Err(e) => {
                        let kind = if e.kind() == IoKind::UnexpectedEof {
                            ErrorKind::Closed
                        } else {
                            ErrorKind::Tls
                        };
                        self.fail(i, kind, Cow::Owned(e.to_string()), now);
                        return;
                    }
                }
            }
            if got.is_none() {
                self.on_eof(i, now);
                return;
            }
        }
    }

    /// A write failed: the request being sent fails with it.
    pub(super) fn write_failed(&mut self, i: u32, e: &std::io::Error) {
        self.fail(i, ErrorKind::from_io(e, false), io_msg(e), Instant::now());
    }

    /// A read failed: the request in flight fails with it; an idle connection just goes.
    pub(super) fn read_failed(&mut self, i: u32, e: &std::io::Error) {
        let now = Instant::now();
        let st = self.conns[i as usize].state;
        if st == ConnState::Reading || st == ConnState::Writing {
            self.fail(i, ErrorKind::from_io(e, false), io_msg(e), now);
        } else {
            self.drop_idle(i, now);
        }
    }

    pub(super) fn on_eof(&mut self, i: u32, now: Instant) {
        let c = &mut self.conns[i as usize];
        match c.state {
            ConnState::Reading | ConnState::Writing => {
                c.session.eof();
                let event = loop {
                    match c.session.poll_event() {
                        Some(Event::Head { .. }) => continue,
                        other => break other,
                    }
                };
                match event {
                    Some(Event::Failed { kind, message, .. }) => self.fail(i, kind, message, now),
                    Some(done) => match Answered::from_event(done) {
                        // A body delimited by the close.
                        Some(answered) => self.complete(i, now, answered),
                        None => self.drop_idle(i, now),
                    },
                    None => self.fail(
                        i,
                        ErrorKind::Closed,
                        "connection closed before any response".into(),
                        now,
                    ),
                }
            }
            _ => self.drop_idle(i, now),
        }
    }

    /// An idle connection went away (server's keep-alive time-out): not an error.
    pub(super) fn drop_idle(&mut self, i: u32, now: Instant) {
        self.close(i);
        self.after(i, now);
    }
}
