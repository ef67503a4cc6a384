//! The multiplexing driver's socket side: opening a connection (TCP, TLS
//! with ALPN: `tcp.rs`'s steps, shared with the HTTP/1 driver), reading
//! into its session and handing the session's events to the core for the
//! slots they belong to, writing what the sessions have to send, and a
//! connection's end (every slot on it told once).

use super::conn::{with_session, CState, Conn, Proto, NIL};
use super::MuxLink;
use crate::core::{idempotent, Answered, Core};
use crate::ioloop::Driver;
use crate::session::{Event, H1Session, Session};
use crate::sys::{self, io_msg};
use crate::tcp::Failure;
use crate::tls::TlsSetup;
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::io::{ErrorKind as IoKind, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

impl MuxLink {
    /// A free connection entry for the own origin's group `group` (`own`)
    /// or a slot's private connection.
    pub(super) fn new_conn(&mut self, own: bool, group: u32, now: Instant) -> u32 {
        let c = match self.free_conns.pop() {
            Some(c) => c,
            None => {
                self.conns.push(Conn::new(now));
                self.conns.len() as u32 - 1
            }
        };
        let conn = &mut self.conns[c as usize];
        conn.own = own;
        conn.group = group;
        conn.users.clear();
        conn.streams.clear();
        conn.blocked.clear();
        conn.submitted = 0;
        conn.full = false;
        conn.unattributed = 0;
        conn.either = false;
        conn.answered = 0;
        conn.eof = false;
        c
    }

    /// Starts connection `c` to `addr` (for slot `i`, whose connect time it
    /// counts): TCP, then TLS, then the protocol's preface.
    pub(super) fn dial(
        &mut self,
        core: &mut Core<'_>,
        c: u32,
        addr: SocketAddr,
        tls: Option<TlsSetup>,
        i: u32,
        now: Instant,
    ) {
        let h2c = self.h2c;
        let own_tls = self.own_tls.clone();
        let conn = &mut self.conns[c as usize];
        conn.state = CState::Connecting;
        conn.first_user = i;
        conn.addr = Some(addr);
        // The run's origin speaks HTTP/2; another https origin picks by
        // ALPN; another cleartext one gets h2c in an h2c run, else HTTP/1.1.
        let tls = match (conn.own, tls) {
            (true, Some(_)) => own_tls,
            (false, Some(t)) => {
                let mut cfg = (*t.config).clone();
                cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
                conn.either = true;
                Some(TlsSetup {
                    config: Arc::new(cfg),
                    ..t
                })
            }
            (_, None) => None,
        };
        conn.proto = if conn.own || tls.is_some() || h2c {
            Proto::H2(Box::default())
        } else {
            Proto::H1(Box::new(H1Session::new(1)))
        };
        conn.tcp.begin(tls, now);
        let quic = self.setup.h3.is_some() && conn.own;
        #[cfg(test)]
        if super::wire_tests::offline(self, core, c, now) {
            return; // unit tests: the test's network connects it
        }
        if quic {
            return self.dial_quic(core, c, now);
        }
        crate::tcp::connect(self, core, c, addr, now);
    }

    /// A poller event on connection `c`.
    pub(super) fn conn_event(&mut self, core: &mut Core<'_>, c: u32, ev: crate::sys::Event) {
        match self.conns[c as usize].state {
            CState::Closed => {}
            CState::Connecting => crate::tcp::connect_event(self, core, c),
            CState::Handshaking => crate::tcp::handshake(self, core, c),
            CState::Open => {
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.read(core, c, ev.is_read_closed() || ev.is_error());
                }
                if ev.is_writable() && self.conns[c as usize].state == CState::Open {
                    self.flush(core, c);
                }
            }
        }
    }

    /// Connection `c` is up: the preface goes out and every slot waiting
    /// for it is ready.
    pub(super) fn ready(&mut self, core: &mut Core<'_>, c: u32, now: Instant) {
        let conn = &mut self.conns[c as usize];
        conn.state = CState::Open;
        conn.gen = conn.gen.wrapping_add(1); // its connect time-out is over
        with_session!(&mut conn.proto, s => s.connect());
        self.dirty(c);
        let users = self.conns[c as usize].users.clone();
        for i in users {
            if self.slots[i as usize].conn == c && !self.slots[i as usize].busy {
                core.connection_ready(self, i, now);
            }
        }
    }

    /// Connection `c` failed or ended: every slot on it is told once (a
    /// request on it fails, unless the server said it was not processed; a
    /// slot waiting for the connect fails its connect; an idle one goes),
    /// then the socket closes.
    pub(super) fn conn_failed(
        &mut self,
        core: &mut Core<'_>,
        c: u32,
        kind: ErrorKind,
        msg: Cow<'static, str>,
        now: Instant,
    ) {
        let opening = matches!(
            self.conns[c as usize].state,
            CState::Connecting | CState::Handshaking
        );
        self.last_words(core, c);
        self.end_streams(core, c, now);
        self.check_fatal(core, c);
        let users = self.conns[c as usize].users.clone();
        for i in users {
            if self.slots[i as usize].conn != c {
                continue;
            }
            if opening {
                core.connect_failed(self, i, kind, msg.clone(), now);
            } else if self.slots[i as usize].busy {
                if self.slots[i as usize].blocked {
                    // Never sent: it goes on another connection.
                    core.refused(self, i, kind, msg.clone(), now);
                } else {
                    core.fail(self, i, kind, msg.clone(), now);
                }
            } else if core.slots[i as usize].has_request {
                // Already moving to another connection (its old one retired):
                // it leaves this one and goes on its way.
                self.detach(core, i);
            } else {
                core.drop_idle(self, i, now);
            }
        }
        self.shut(core, c);
    }

    /// The session's events for the requests on connection `c`, each handed
    /// to the core for its slot.
    pub(super) fn end_streams(&mut self, core: &mut Core<'_>, c: u32, now: Instant) {
        // A QUIC connection open for 0-RTT: its handshake may complete in the
        // datagrams that carry its first answers, and is counted before them
        // (its connect time goes with the request it was opened for; a
        // connection closed by that answer would not be counted at all).
        let conn = &self.conns[c as usize];
        if conn.state == CState::Open && matches!(conn.proto, Proto::H3(_)) {
            self.quic_established(core, c, now);
        }
        // When the bytes just read arrived (stamped by the kernel), else now.
        let arrived = self.conns[c as usize].arrived.take().unwrap_or(now);
        for _ in 0..1_000_000 {
            let Some(ev) = with_session!(&mut self.conns[c as usize].proto, s => s.poll_event())
            else {
                break;
            };
            let id = match &ev {
                Event::Head { id, .. } | Event::Done { id, .. } | Event::Failed { id, .. } => *id,
            };
            let conn = &mut self.conns[c as usize];
            let Some(k) = conn.streams.iter().position(|&(sid, _)| sid == id) else {
                continue; // given up already
            };
            let i = conn.streams[k].1;
            if let Event::Head { .. } = ev {
                let s = &mut self.slots[i as usize];
                if s.first_byte.is_none() {
                    s.first_byte = Some(arrived);
                }
                continue;
            }
            conn.streams.swap_remove(k);
            match ev {
                Event::Failed {
                    kind,
                    message,
                    unprocessed,
                    ..
                } => {
                    // A reused connection the server closed as this request
                    // went out, before any byte of its answer: not processed,
                    // so an idempotent request goes again once (RFC 9110
                    // §9.2.2), as browsers do.
                    let raced = self.conns[c as usize].eof
                        && self.conns[c as usize].answered > 0
                        && self.slots[i as usize].first_byte.is_none()
                        && idempotent(&core.request_spec(i).method);
                    if unprocessed || raced {
                        core.refused(self, i, kind, message, now);
                    } else {
                        core.fail(self, i, kind, message, now);
                    }
                }
                done => {
                    self.defer.answered();
                    self.conns[c as usize].answered += 1;
                    let wire = std::mem::take(&mut self.conns[c as usize].unattributed);
                    let s = &self.slots[i as usize];
                    let first = s.first_byte.or(Some(arrived));
                    if let Some(mut a) = Answered::from_event(done, s.sent, first, wire) {
                        a.arrived = Some(arrived);
                        core.complete(self, i, now, a);
                    }
                }
            }
        }
        // Streams freed: requests waiting for one go now.
        self.unblock(core, c, now);
    }

    /// Submits the requests waiting for a stream on connection `c` while it has room.
    fn unblock(&mut self, core: &mut Core<'_>, c: u32, now: Instant) {
        for _ in 0..self.slots.len() {
            let conn = &mut self.conns[c as usize];
            if conn.blocked.is_empty() || conn.state != CState::Open {
                return;
            }
            if conn.proto.capacity() == 0 && !conn.proto.retiring() && !conn.full {
                return;
            }
            let i = conn.blocked.remove(0);
            self.slots[i as usize].blocked = false;
            self.try_submit(core, i, now);
        }
    }

    /// Reads what connection `c`'s socket holds into its session (`closing`:
    /// the peer's close was seen, so it reads on to the end).
    pub(super) fn read(&mut self, core: &mut Core<'_>, c: u32, closing: bool) {
        for _ in 0..1_000_000 {
            // Open loop: a plain read shorter than the buffer drained the
            // socket, and the next bytes bring a new edge, so no read just
            // to hear EAGAIN. (A closed loop reads on: answers that arrive
            // meanwhile join this pass, and their next requests go out in
            // the same write: 3.8 requests per write against 2.2, measured;
            // unless it defers, `defer.rs`: answers then come in batches.)
            let mut drained = false;
            let stamped = self.stamps();
            let batched = core.open_loop || self.defer.active();
            let conn = &mut self.conns[c as usize];
            let Some(fd) = conn.fd() else { return };
            let now = Instant::now();
            let got = if let (Some(tls), Some(s)) = (conn.tcp.tls.as_mut(), conn.tcp.sock.as_mut())
            {
                // Deferred answers carry the kernel's arrival stamp.
                let mut from = sys::TimedReader {
                    fd: s.as_raw_fd(),
                    stamped,
                    arrived: &mut conn.arrived,
                };
                match tls.read_tls(&mut from) {
                    Ok(0) => None,
                    Ok(n) => {
                        core.rec.bytes_read(n as u64);
                        conn.unattributed += n as u64;
                        if let Err(e) = tls.process_new_packets() {
                            let _ = tls.write_tls(s);
                            return self.conn_failed(
                                core,
                                c,
                                ErrorKind::Tls,
                                Cow::Owned(e.to_string()),
                                now,
                            );
                        }
                        let mut eof = false;
                        loop {
                            match tls.reader().read(&mut self.buf) {
                                Ok(0) => {
                                    eof = true;
                                    break;
                                }
                                Ok(k) => {
                                    with_session!(&mut conn.proto, s => s.bytes_in(&self.buf[..k]))
                                }
                                Err(e) if e.kind() == IoKind::WouldBlock => break,
                                Err(e) => {
                                    let kind = crate::tcp::plaintext_error(&e);
                                    self.end_streams(core, c, now);
                                    return self.conn_failed(
                                        core,
                                        c,
                                        kind,
                                        Cow::Owned(e.to_string()),
                                        now,
                                    );
                                }
                            }
                        }
                        if eof {
                            None
                        } else {
                            Some(n)
                        }
                    }
                    Err(e) if e.kind() == IoKind::WouldBlock => break,
                    Err(e) if e.kind() == IoKind::Interrupted => continue,
                    Err(e) => return self.read_failed(core, c, &e, now),
                }
            } else {
                // Deferred answers (plain TCP only) carry the kernel's arrival stamp.
                match sys::recv_timed(fd, &mut self.buf, stamped) {
                    Ok((0, ..)) => None,
                    Ok((n, _, arrived)) => {
                        if stamped {
                            conn.arrived = Some(arrived);
                        }
                        core.rec.bytes_read(n as u64);
                        conn.unattributed += n as u64;
                        with_session!(&mut conn.proto, s => s.bytes_in(&self.buf[..n]));
                        drained = batched && n < self.buf.len() && !closing;
                        Some(n)
                    }
                    Err(e) if e.kind() == IoKind::WouldBlock => break,
                    Err(e) if e.kind() == IoKind::Interrupted => continue,
                    Err(e) => return self.read_failed(core, c, &e, now),
                }
            };
            match got {
                Some(_) => {
                    self.end_streams(core, c, now);
                    if self.after_events(core, c, now) {
                        return;
                    }
                    if drained {
                        break;
                    }
                }
                None => {
                    // The peer closed: requests without a complete answer fail.
                    self.conns[c as usize].eof = true;
                    with_session!(&mut self.conns[c as usize].proto, s => s.eof());
                    self.end_streams(core, c, now);
                    self.check_fatal(core, c);
                    return self.conn_failed(
                        core,
                        c,
                        ErrorKind::Closed,
                        "connection closed before any response".into(),
                        now,
                    );
                }
            }
        }
        self.dirty(c);
    }

    /// A read of connection `c` failed (reset, refused): what its session
    /// has ends first, then the connection fails with the socket's error.
    pub(super) fn read_failed(
        &mut self,
        core: &mut Core<'_>,
        c: u32,
        e: &std::io::Error,
        now: Instant,
    ) {
        self.end_streams(core, c, now);
        self.conn_failed(core, c, ErrorKind::from_io(e, false), io_msg(e), now);
    }

    /// After a read's events: a server that cannot speak HTTP/2 ends the
    /// run; a closed session ends the connection. True when it ended.
    pub(super) fn after_events(&mut self, core: &mut Core<'_>, c: u32, now: Instant) -> bool {
        self.check_fatal(core, c);
        let conn = &self.conns[c as usize];
        // A QUIC connection reads datagrams during its handshake too.
        let quic_handshake = conn.quic && conn.state == CState::Handshaking;
        if conn.state != CState::Open && !quic_handshake {
            return true;
        }
        let conn = &self.conns[c as usize];
        if conn.proto.is_closed() && conn.streams.is_empty() {
            self.flush(core, c);
            // QUIC says why (idle time-out, stateless reset, a TLS alert…).
            let (kind, msg) = match &self.conns[c as usize].proto {
                Proto::H3(s) => s.lost().cloned(),
                _ => None,
            }
            .unwrap_or((ErrorKind::Closed, "the connection closed".into()));
            self.conn_failed(core, c, kind, msg, now);
            return true;
        }
        self.dirty(c);
        false
    }

    /// A plain connection failing while open (a write refused): what the
    /// server said before it went is read into the session first (an
    /// HTTP/1 server's answer to the preface names the problem).
    fn last_words(&mut self, core: &mut Core<'_>, c: u32) {
        let conn = &mut self.conns[c as usize];
        if conn.state != CState::Open || conn.eof || conn.tcp.tls.is_some() {
            return;
        }
        let Some(s) = conn.tcp.sock.as_ref() else {
            return;
        };
        for _ in 0..64 {
            match sys::recv(s.as_raw_fd(), &mut self.buf) {
                Ok(n) if n > 0 => {
                    core.rec.bytes_read(n as u64);
                    with_session!(&mut conn.proto, p => p.bytes_in(&self.buf[..n]));
                }
                _ => break,
            }
        }
    }

    /// A server that cannot speak HTTP/2 at all (an HTTP/1 answer to the
    /// preface) ends the run with what its session says.
    fn check_fatal(&mut self, core: &mut Core<'_>, c: u32) {
        let conn = &self.conns[c as usize];
        let fatal = with_session!(&conn.proto, s => s.fatal().map(str::to_string));
        if let Some(m) = fatal.filter(|_| conn.own) {
            let msg = format!("the server at {} {m}", core.plan.target.display);
            self.fatal(core, msg);
        }
    }

    /// Writes what connection `c`'s session has to send, as far as the socket takes it.
    pub(super) fn flush(&mut self, core: &mut Core<'_>, c: u32) {
        let conn = &mut self.conns[c as usize];
        conn.dirty = false;
        // A QUIC connection sends during its handshake too.
        if conn.state != CState::Open && !(conn.quic && conn.state == CState::Handshaking) {
            return;
        }
        if conn.quic {
            return self.send_datagrams(core, c);
        }
        let Some(fd) = conn.fd() else { return };
        let result = if let (Some(tls), Some(s)) = (conn.tcp.tls.as_mut(), conn.tcp.sock.as_mut()) {
            let bytes = conn.proto.pending_out();
            if !bytes.is_empty() {
                let _ = tls.writer().write_all(bytes);
                let n = bytes.len();
                conn.proto.consume_out(n);
            }
            let mut r = Ok(());
            while tls.wants_write() {
                match tls.write_tls(s) {
                    Ok(n) => core.rec.counters.bytes_written += n as u64,
                    Err(e) if e.kind() == IoKind::WouldBlock => break,
                    Err(e) if e.kind() == IoKind::Interrupted => {}
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            }
            r
        } else {
            let mut r = Ok(());
            for _ in 0..1_000_000 {
                let bytes = conn.proto.pending_out();
                if bytes.is_empty() {
                    break;
                }
                match sys::send(fd, bytes) {
                    Ok(n) => {
                        conn.proto.consume_out(n);
                        core.rec.counters.bytes_written += n as u64;
                    }
                    Err(e) if e.kind() == IoKind::WouldBlock => break,
                    Err(e) if e.kind() == IoKind::Interrupted => {}
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            }
            r
        };
        if let Err(e) = result {
            let now = Instant::now();
            self.conn_failed(core, c, ErrorKind::from_io(&e, false), io_msg(&e), now);
        }
    }

    /// Writes every connection with bytes to write.
    pub(super) fn flush_all(&mut self, core: &mut Core<'_>) {
        while let Some(c) = self.dirty.pop() {
            self.flush(core, c);
        }
    }

    /// Closes connection `c`'s socket (saying goodbye on HTTP/2 when it was
    /// open); its entry is free once no slot uses it.
    pub(super) fn shut(&mut self, core: &mut Core<'_>, c: u32) {
        let conn = &mut self.conns[c as usize];
        if conn.state == CState::Open {
            match &mut conn.proto {
                Proto::H2(sess) if conn.streams.is_empty() => sess.close(),
                // QUIC: CONNECTION_CLOSE, so the server drops its state now.
                Proto::H3(sess) => sess.close(),
                _ => {}
            }
            if let Some(tls) = conn.tcp.tls.as_mut() {
                tls.send_close_notify();
            }
            // Best effort: what fits in the socket buffer now.
            self.flush(core, c);
        }
        if self.conns[c as usize].quic {
            self.quic_release(c);
        }
        let conn = &mut self.conns[c as usize];
        if conn.tcp.close() | std::mem::take(&mut conn.quic) {
            core.open -= 1;
        }
        conn.quic_timer = None;
        conn.state = CState::Closed;
        conn.gen = conn.gen.wrapping_add(1);
        conn.dirty = false;
        if conn.group != NIL && self.groups[conn.group as usize] == c {
            self.groups[conn.group as usize] = NIL;
        }
        if conn.users.is_empty() && !self.free_conns.contains(&c) {
            conn.group = NIL;
            self.free_conns.push(c);
        }
    }
}

/// Opening a TCP connection (the run's origin, another origin's, a
/// redirect's): the steps are `tcp.rs`'s.
impl crate::tcp::Opening for MuxLink {
    #[inline]
    fn tcp(&mut self, c: u32) -> &mut crate::tcp::Tcp {
        &mut self.conns[c as usize].tcp
    }

    fn opened(&mut self, core: &mut Core<'_>, c: u32, now: Instant) {
        let deadline = now + core.plan.connect_timeout;
        let gen = self.conns[c as usize].gen;
        self.connect_timeouts.push(Reverse((deadline, c, gen)));
    }

    fn open_failed(&mut self, core: &mut Core<'_>, c: u32, why: Failure, now: Instant) {
        let (kind, msg) = why;
        self.conn_failed(core, c, kind, msg, now);
    }

    fn counted_to(&self, c: u32) -> u32 {
        self.conns[c as usize].first_user
    }

    fn handshaking(&mut self, c: u32) {
        self.conns[c as usize].state = CState::Handshaking;
    }

    /// Up: over TLS, the protocol the server picked by ALPN is checked
    /// first (the run's origin must pick h2; another origin that did not
    /// gets HTTP/1.1); then [`MuxLink::ready`].
    fn up(&mut self, core: &mut Core<'_>, c: u32, now: Instant) {
        let conn = &mut self.conns[c as usize];
        if let Some(tls) = conn.tcp.tls.as_ref() {
            let h2 = tls.alpn_protocol() == Some(b"h2");
            if conn.own && !h2 {
                let msg = format!(
                    "the server at {} did not offer HTTP/2 (ALPN h2) over TLS; \
                     run without --http2 to test it with HTTP/1.1",
                    core.plan.target.display
                );
                self.fatal(core, msg);
                return self.conn_failed(
                    core,
                    c,
                    ErrorKind::Other,
                    "the server did not offer HTTP/2".into(),
                    now,
                );
            }
            if conn.either && !h2 {
                conn.proto = Proto::H1(Box::new(H1Session::new(1)));
            }
        }
        self.ready(core, c, now);
    }
}
