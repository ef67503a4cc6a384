//! The multiplexing driver on the mode tests' socket-free network
//! (`core/wire_tests.rs`): its own slot mapping (slot `i` on group `i % C`,
//! private connections to other origins, requests waiting for a stream,
//! connections replaced after GOAWAY), sessions and event path, with the
//! socket left out. A connection's dial opens no socket ([`offline`], called
//! from `dial`); the network accepts it through the driver's `connected`,
//! takes what each connection's session writes to the server, and hands the
//! server's bytes to the session and the driver's `end_streams`.

use super::conn::{CState, Proto};
use super::MuxLink;
use crate::core::spec::WorkerSpec;
use crate::core::wire_tests::{dialed, take_dialed, Connects, Net, Server};
use crate::core::Core;
use crate::plan::{Plan, PlanArgs};
use crate::session::Session;
use redline_stats::ErrorKind;
use std::cmp::Reverse;
use std::time::Instant;

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
        for (c, addr) in take_dialed() {
            let conn = &self.conns[c as usize];
            if conn.state != CState::Connecting {
                continue; // closed again already
            }
            let h2 = matches!(conn.proto, Proto::H2(_));
            match srv.accept(c, addr, h2) {
                Connects::Accept => self.connected(core, c, now),
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
        for c in 0..self.conns.len() as u32 {
            let conn = &mut self.conns[c as usize];
            if conn.state == CState::Closed {
                srv.closed(c);
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
        // (No socket: this only clears the marks.)
        self.flush_all(core);
    }
}
