//! The multiplexing driver's QUIC side (`--http3`): a connection to the
//! run's origin is an [`Http3Session`] (`crate::http3`) on the worker's
//! QUIC socket and endpoint (`udp.rs`, shared by the worker's QUIC
//! connections), read and written in batches there where `transport.rs`
//! reads and writes a TCP connection. What is QUIC's own lives here:
//! starting the session, the handshake (moved by the datagrams routed to
//! it; done, the connection is ready as a TCP one after TLS), and QUIC's
//! timers (loss detection, acknowledgements, idle time-out) in one heap
//! with lazy entries: a connection has at most one live entry, re-armed
//! when its deadline moves earlier or when the entry comes due, so the heap
//! does not grow with the packets sent.

use super::conn::{CState, Proto};
use super::endpoint::QuicEndpoint;
use super::udp::QuicIo;
use super::MuxLink;
use crate::core::Core;
use crate::http3::Http3Session;
use crate::ioloop::Driver;
use crate::sys::io_msg;
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::time::Instant;

impl MuxLink {
    /// Starts QUIC connection `c` to the origin's h3 endpoint (`plan::h3`:
    /// its Alt-Svc alternative, or its own address) on the worker's QUIC
    /// socket and endpoint (opened by its first connection), the session's
    /// first flight queued.
    pub(super) fn dial_quic(&mut self, core: &mut Core<'_>, c: u32, now: Instant) {
        let setup = self.setup.clone();
        let Some(h3) = setup.h3.as_ref() else {
            return;
        };
        // Only the run's own origin goes over QUIC, to its h3 endpoint.
        let addr = h3.addr;
        if self.quic.is_none() {
            // Deferred answers: the socket stamps each datagram's arrival.
            let stamps = self.stamps();
            match QuicIo::open(addr, &self.poll, stamps) {
                Ok(q) => self.quic = Some(Box::new(q)),
                Err(e) => {
                    return self.conn_failed(core, c, ErrorKind::from_io(&e, true), io_msg(&e), now)
                }
            }
        }
        core.socket_opened();
        self.conns[c as usize].quic = true;
        let session = match self.quic_session(c, now) {
            Ok(s) => s,
            Err(m) => return self.conn_failed(core, c, ErrorKind::Other, Cow::Owned(m), now),
        };
        let conn = &mut self.conns[c as usize];
        conn.proto = Proto::H3(Box::new(session));
        conn.state = CState::Handshaking;
        let deadline = now + core.plan.connect_timeout;
        self.connect_timeouts.push(Reverse((deadline, c, conn.gen)));
        self.dirty(c);
        self.arm_quic(c);
        // Resuming with 0-RTT: requests go now, in early data; the
        // handshake must still end within the connect time-out (a server
        // that went silent fails them as `connect_timeout`, not at
        // `--timeout`): `ready` ended the first watch, so a second one.
        if matches!(&self.conns[c as usize].proto, Proto::H3(s) if s.early()) {
            self.ready(core, c, now);
            let conn = &self.conns[c as usize];
            self.connect_timeouts.push(Reverse((deadline, c, conn.gen)));
        }
    }

    /// QUIC connection `c`'s session, made on the worker's endpoint
    /// (`mux/endpoint.rs`, made for its first connection) and routed to it.
    pub(super) fn quic_session(&mut self, c: u32, now: Instant) -> Result<Http3Session, String> {
        let setup = self.setup.clone();
        let h3 = setup.h3.as_ref().ok_or("not an HTTP/3 run")?;
        let ep = self
            .quic_ep
            .get_or_insert_with(|| Box::new(QuicEndpoint::new(h3.config.endpoint(), h3.addr)));
        ep.connect(&h3.config, &h3.server_name, c, now)
    }

    /// Once QUIC connection `c`'s handshake completed: counts it (its time
    /// is the connect time: QUIC's handshake is its connect and its TLS at
    /// once; resumed or not, early data accepted or not) and makes a
    /// connection still handshaking ready. Called after every read and
    /// timer of a QUIC connection (one that took requests in 0-RTT is open
    /// before its handshake completes).
    pub(super) fn quic_established(&mut self, core: &mut Core<'_>, c: u32, now: Instant) {
        let conn = &mut self.conns[c as usize];
        let Proto::H3(sess) = &mut conn.proto else {
            return;
        };
        let Some((resumed, early)) = sess.handshake_done() else {
            return;
        };
        let took = now.saturating_duration_since(conn.tcp.connect_start);
        core.connected(conn.first_user, took);
        core.rec.quic_handshake(resumed, early);
        if conn.state == CState::Handshaking {
            self.ready(core, c, now);
        }
    }

    /// After QUIC connection `c` took datagrams or a timer: a handshake that
    /// completed makes it ready, one that failed fails its slots; then its
    /// timer is re-armed and what it has to send goes out.
    pub(super) fn quic_progress(&mut self, core: &mut Core<'_>, c: u32, now: Instant) {
        self.quic_established(core, c, now);
        let conn = &self.conns[c as usize];
        let Proto::H3(sess) = &conn.proto else {
            return;
        };
        if conn.state == CState::Handshaking {
            if let Some((kind, msg)) = sess.lost().cloned() {
                return self.conn_failed(core, c, kind, msg, now);
            }
        }
        if self.conns[c as usize].state == CState::Closed {
            return;
        }
        self.arm_quic(c);
        self.dirty(c);
    }

    /// Puts connection `c`'s QUIC deadline in the timer heap if it has no
    /// live entry there or the deadline moved earlier.
    pub(super) fn arm_quic(&mut self, c: u32) {
        let conn = &mut self.conns[c as usize];
        let Proto::H3(sess) = &mut conn.proto else {
            return;
        };
        let Some(t) = sess.deadline() else { return };
        if conn.quic_timer.is_none_or(|armed| t < armed) {
            conn.quic_timer = Some(t);
            self.quic_timers.push(Reverse((t, c)));
        }
    }

    /// Fires the QUIC timers due by `now`.
    pub(super) fn expire_quic(&mut self, core: &mut Core<'_>, now: Instant) {
        while let Some(&Reverse((t, c))) = self.quic_timers.peek() {
            if t > now {
                break;
            }
            self.quic_timers.pop();
            let conn = &mut self.conns[c as usize];
            if conn.quic_timer != Some(t) {
                continue; // stale: another entry is live, or the connection closed
            }
            conn.quic_timer = None;
            let Proto::H3(sess) = &mut conn.proto else {
                continue;
            };
            if sess.deadline().is_some_and(|d| d <= now) {
                sess.on_timeout(now);
            }
            if conn.state == CState::Open {
                self.end_streams(core, c, now);
                if self.after_events(core, c, now) {
                    continue;
                }
            }
            self.quic_progress(core, c, now);
        }
    }

    /// The earliest QUIC timer (maybe a stale entry's: an early wake-up).
    pub(super) fn first_quic(&self) -> Option<Instant> {
        self.quic_timers.peek().map(|Reverse((t, _))| *t)
    }
}
