//! The multiplexing driver on the mode tests' socket-free network
//! (`core/wire_tests.rs`): its own slot mapping (slot `i` on group `i % C`,
//! private connections to other origins, requests waiting for a stream,
//! connections replaced after GOAWAY), sessions and event path, with the
//! socket left out. A connection's dial opens no socket ([`offline`], called
//! from `dial`); the network accepts it through the driver's `connected`,
//! takes what each connection's session writes to the server, and hands the
//! server's bytes to the session and the driver's `end_streams`.
//!
//! HTTP/3 ([`H3Net`]: the same driver with `--http3`): a QUIC connection's
//! `Http3Session` is made as `dial_quic` makes it, without the UDP socket;
//! its datagrams (`next_datagrams`) go to the server's `quinn-proto`
//! endpoint and the server's come back through `datagram_in` and
//! `datagrams_done`, then `end_streams` and the handshake's and timers'
//! steps of `mux/quic.rs`, all at the test's made-up time.

use super::conn::{CState, Proto};
use super::MuxLink;
use crate::core::spec::WorkerSpec;
use crate::core::wire_tests::{dialed, take_dialed, Connects, Net, Server};
use crate::core::{ConnState, Core, Link, Outgoing};
use crate::plan::{Plan, PlanArgs};
use crate::session::{Answer, Session};
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Offline: connection `c` starts its connect without a socket (its
/// connect time-out set, as `dial` does with one) and the test's network
/// finishes it. False when online.
pub(super) fn offline(link: &mut MuxLink, core: &mut Core<'_>, c: u32, now: Instant) -> bool {
    let conn = &link.conns[c as usize];
    let Some(addr) = conn.addr else { return false };
    if !dialed(c, addr) {
        return false;
    }
    let deadline = now + core.plan.connect_timeout;
    link.connect_timeouts.push(Reverse((deadline, c, conn.gen)));
    true
}

impl Net for MuxLink {
    const NAME: &'static str = "HTTP/2";

    fn protocol(a: &mut PlanArgs) {
        a.h2c = true;
    }

    fn build(plan: &Plan, spec: &WorkerSpec) -> (MuxLink, usize) {
        let poll = mio::Poll::new().expect("poll");
        let setup = super::prepare(plan).expect("setup");
        MuxLink::new(&setup, plan, spec, poll)
    }

    fn serve(&mut self, core: &mut Core<'_>, srv: &mut Server, now: Instant) {
        self.serve_offline(core, srv, now);
    }
}

impl MuxLink {
    /// The network's pass at `now` (see the top of this file).
    fn serve_offline(&mut self, core: &mut Core<'_>, srv: &mut Server, now: Instant) {
        for (c, addr) in take_dialed() {
            let conn = &self.conns[c as usize];
            if conn.state != CState::Connecting {
                continue; // closed again already
            }
            if conn.own && self.setup.h3.is_some() {
                self.dial_quic_offline(core, srv, c, addr, now);
                continue;
            }
            let h2 = matches!(conn.proto, Proto::H2(_));
            match srv.accept(c, addr, h2) {
                Connects::Accept => crate::tcp::connected(self, core, c, now),
                Connects::Refuse => self.conn_failed(
                    core,
                    c,
                    ErrorKind::Refused,
                    "connection refused".into(),
                    now,
                ),
                Connects::Hang => {}
            }
        }
        // HTTP/3: the server's datagrams for every QUIC connection, read
        // together as one read of the worker's socket brings them.
        let mut answers = Vec::new();
        let mut quic = Vec::new();
        for c in 0..self.conns.len() as u32 {
            let conn = &mut self.conns[c as usize];
            if conn.state == CState::Closed {
                srv.closed(c);
                continue;
            }
            if matches!(conn.proto, Proto::H3(_)) {
                answers.push(self.exchange_quic(core, srv, c, now));
                quic.push(c);
                continue;
            }
            if conn.state != CState::Open || !srv.has(c) {
                continue;
            }
            let mut wrote = Vec::new();
            for _ in 0..1_000 {
                let b = conn.proto.pending_out();
                if b.is_empty() {
                    break;
                }
                wrote.extend_from_slice(b);
                let n = b.len();
                conn.proto.consume_out(n);
            }
            let (answer, close) = srv.exchange(c, &wrote, now);
            if !answer.is_empty() {
                core.rec.bytes_read(answer.len() as u64);
                let conn = &mut self.conns[c as usize];
                conn.unattributed += answer.len() as u64;
                super::conn::with_session!(&mut conn.proto, s => s.bytes_in(&answer));
                self.end_streams(core, c, now);
                if self.after_events(core, c, now) {
                    continue;
                }
            }
            if close && self.conns[c as usize].state == CState::Open {
                // The server closed it (as `read` on EOF).
                let conn = &mut self.conns[c as usize];
                conn.eof = true;
                super::conn::with_session!(&mut conn.proto, s => s.eof());
                self.end_streams(core, c, now);
                self.conn_failed(
                    core,
                    c,
                    ErrorKind::Closed,
                    "connection closed before any response".into(),
                    now,
                );
            }
        }
        self.quic_read(core, answers, now);
        for c in quic {
            self.quic_after(core, c, now);
        }
        // (No socket: this only clears the marks.)
        self.flush_all(core);
    }
}

impl MuxLink {
    /// QUIC connection `c` to `addr`: refused at once (an ICMP port
    /// unreachable), or its session made as `dial_quic` makes it (the
    /// connect time-out already set by [`offline`]) and its handshake begun
    /// (to a server that answers, or that never does).
    fn dial_quic_offline(
        &mut self,
        core: &mut Core<'_>,
        srv: &mut Server,
        c: u32,
        addr: SocketAddr,
        now: Instant,
    ) {
        if srv.accept_quic(c, addr) == Connects::Refuse {
            let m = "connection refused".into();
            return self.conn_failed(core, c, ErrorKind::Refused, m, now);
        }
        // On the worker's one endpoint, as `dial_quic` (no socket).
        core.socket_opened();
        self.conns[c as usize].quic = true;
        let session = match self.quic_session(c, now) {
            Ok(s) => s,
            Err(m) => return self.conn_failed(core, c, ErrorKind::Other, Cow::Owned(m), now),
        };
        let early = session.early();
        let conn = &mut self.conns[c as usize];
        conn.proto = Proto::H3(Box::new(session));
        conn.state = CState::Handshaking;
        self.arm_quic(c);
        if early {
            self.ready(core, c, now);
        }
    }

    /// QUIC connection `c`'s datagrams to the server (its endpoint events
    /// handed to the worker's endpoint first, as `send_datagrams` does), and
    /// the server's answers (none when the server let its connect hang).
    fn exchange_quic(
        &mut self,
        core: &mut Core<'_>,
        srv: &mut Server,
        c: u32,
        now: Instant,
    ) -> Vec<Vec<u8>> {
        let (Some(ep), Proto::H3(sess)) = (
            self.quic_ep.as_deref_mut(),
            &mut self.conns[c as usize].proto,
        ) else {
            return Vec::new();
        };
        ep.before_send(sess);
        let mut sent = Vec::new();
        for _ in 0..10_000 {
            let Some(d) = sess.next_datagrams(now, 1) else {
                break;
            };
            core.rec.counters.bytes_written += d.bytes.len() as u64;
            sent.push(d.bytes.to_vec());
            sess.datagrams_sent();
        }
        srv.exchange_datagrams(c, &sent, now).0
    }

    /// The server's answers to every QUIC connection, interleaved (one
    /// datagram of each connection's in turn) as one read of the worker's
    /// socket: routed by the worker's endpoint to their connections and
    /// delivered by the driver's own path (`mux/udp.rs`).
    fn quic_read(&mut self, core: &mut Core<'_>, answers: Vec<Vec<Vec<u8>>>, now: Instant) {
        let Some(ep) = self.quic_ep.as_deref_mut() else {
            return;
        };
        let server = self.setup.h3.as_ref().map(|h3| h3.addr).expect("HTTP/3");
        let most = answers.iter().map(Vec::len).max().unwrap_or(0);
        let mut routed = Vec::new();
        let mut bytes = 0;
        for k in 0..most {
            for d in answers.iter().filter_map(|a| a.get(k)) {
                bytes += d.len() as u64;
                if let Some((c, ev)) = ep.datagram(now, server, None, d) {
                    let gen = self.conns[c as usize].gen;
                    routed.push((c, gen, ev, now, d.len()));
                }
            }
        }
        core.rec.bytes_read(bytes);
        self.deliver(core, &mut routed, false, now);
    }

    /// After a read, as `send_datagrams` after a send and `quic_progress`:
    /// a handshake done makes QUIC connection `c` ready, one that failed
    /// fails its slots; QUIC's timer is re-armed.
    fn quic_after(&mut self, core: &mut Core<'_>, c: u32, now: Instant) {
        if self.conns[c as usize].state == CState::Closed {
            return;
        }
        self.quic_established(core, c, now);
        let conn = &self.conns[c as usize];
        if let (CState::Handshaking, Proto::H3(sess)) = (conn.state, &conn.proto) {
            if let Some((kind, msg)) = sess.lost().cloned() {
                return self.conn_failed(core, c, kind, msg, now);
            }
        }
        if self.conns[c as usize].state != CState::Closed {
            self.arm_quic(c);
        }
    }
}

/// HTTP/3 on the test's network: the multiplexing driver of an `--http3`
/// run (its connections to the run's origin over QUIC, those to other
/// origins over TCP), under a name of its own for the generic tests.
pub(crate) struct H3Net(MuxLink);

impl Net for H3Net {
    const NAME: &'static str = "HTTP/3";

    fn protocol(a: &mut PlanArgs) {
        a.url = a.url.replacen("http://", "https://", 1);
        a.http3 = true;
        // The server's certificate is the testkit's (signatures still checked).
        a.tls.insecure = true;
    }

    fn build(plan: &Plan, spec: &WorkerSpec) -> (H3Net, usize) {
        let (link, slots) = MuxLink::build(plan, spec);
        (H3Net(link), slots)
    }

    fn serve(&mut self, core: &mut Core<'_>, srv: &mut Server, now: Instant) {
        self.0.serve_offline(core, srv, now);
    }
}

impl H3Net {
    /// The worker's one QUIC endpoint: the connections it routes to, and
    /// those it still knows itself (a connection gone is forgotten by both).
    pub(crate) fn endpoint(&self) -> (usize, usize) {
        self.0
            .quic_ep
            .as_deref()
            .map_or((0, 0), |ep| (ep.routed(), ep.open_connections()))
    }

    /// QUIC connections open (not closed) in the driver.
    pub(crate) fn quic_open(&self) -> usize {
        let open = |c: &&super::conn::Conn| c.quic && c.state != CState::Closed;
        self.0.conns.iter().filter(open).count()
    }
}

/// The driver's seam, as the driver's own.
impl Link for H3Net {
    fn state(&self, i: u32) -> ConnState {
        self.0.state(i)
    }
    fn connect(&mut self, core: &mut Core<'_>, i: u32, now: Instant) {
        self.0.connect(core, i, now)
    }
    fn submit(&mut self, core: &mut Core<'_>, i: u32, what: Outgoing, t: Duration, now: Instant) {
        self.0.submit(core, i, what, t, now)
    }
    fn close(&mut self, core: &mut Core<'_>, i: u32) {
        self.0.close(core, i)
    }
    fn settle(&mut self, i: u32) {
        self.0.settle(i)
    }
    fn idle(&mut self, i: u32) {
        self.0.idle(i)
    }
    fn expire(&mut self, core: &mut Core<'_>, now: Instant) {
        self.0.expire(core, now)
    }
    fn reusable(&self, i: u32) -> bool {
        self.0.reusable(i)
    }
    fn recycle(&mut self, i: u32, answer: Box<Answer>) {
        self.0.recycle(i, answer)
    }
    const SHARES_CONNECTIONS: bool = MuxLink::SHARES_CONNECTIONS;
    fn same_connection(&self, a: u32, b: u32) -> bool {
        self.0.same_connection(a, b)
    }
}
