//! The HTTP/1 driver on the mode tests' socket-free network
//! (`core/wire_tests.rs`): its own `Link` code, sessions and read path, with
//! the socket left out. A connect opens no socket ([`offline`], called from
//! the driver's `connect`); the network accepts it through the driver's
//! `connected`, takes what each slot's `H1Session` writes to the server, and
//! hands the server's bytes to the driver's `on_plain` and `on_eof`.

use super::H1Link;
use crate::core::spec::WorkerSpec;
use crate::core::wire_tests::{dialed, take_dialed, Connects, Net, Server};
use crate::core::{ConnState, Core};
use crate::plan::{Plan, PlanArgs};
use crate::session::Session;
use redline_stats::ErrorKind;
use std::time::Instant;

/// Offline: slot `i` starts its connect without a socket (as `open` does
/// with one) and the test's network finishes it. False when online.
pub(super) fn offline(link: &mut H1Link, core: &mut Core<'_>, i: u32, now: Instant) -> bool {
    let addr = core.destination(i).addr;
    if !dialed(i, addr) {
        return false;
    }
    let c = &mut link.conns[i as usize];
    c.tcp.begin(None, now);
    c.session.reset();
    c.answered = 0;
    crate::tcp::Opening::opened(link, core, i, now);
    true
}

impl Net for H1Link {
    const NAME: &'static str = "HTTP/1.1";

    fn protocol(_a: &mut PlanArgs) {}

    fn build(plan: &Plan, spec: &WorkerSpec) -> (H1Link, usize) {
        let poll = mio::Poll::new().expect("poll");
        H1Link::new(plan, spec, poll)
    }

    fn serve(&mut self, core: &mut Core<'_>, srv: &mut Server, now: Instant) {
        for (i, addr) in take_dialed() {
            if self.conns[i as usize].state != ConnState::Connecting {
                continue; // closed again already
            }
            match srv.accept(i, addr, false) {
                Connects::Accept => crate::tcp::connected(self, core, i, now),
                Connects::Refuse => core.connect_failed(
                    self,
                    i,
                    ErrorKind::Refused,
                    "connection refused".into(),
                    now,
                ),
                Connects::Hang => {}
            }
        }
        for i in 0..self.conns.len() as u32 {
            let c = &mut self.conns[i as usize];
            if c.state == ConnState::Closed || c.state.opening() {
                if c.state == ConnState::Closed {
                    srv.closed(i);
                }
                continue;
            }
            if !srv.has(i) {
                continue;
            }
            // What the session writes goes out whole (`write_more`).
            let mut wrote = Vec::new();
            c.session.bytes_out(&mut wrote);
            if c.state == ConnState::Writing {
                c.state = ConnState::Reading;
            }
            let (answer, close) = srv.exchange(i, &wrote, now);
            for chunk in answer.chunks(self.buf.len()) {
                self.buf[..chunk.len()].copy_from_slice(chunk);
                core.rec.bytes_read(chunk.len() as u64);
                if !self.on_plain(core, i, chunk.len(), now, now) {
                    break;
                }
            }
            let st = self.conns[i as usize].state;
            if close && (st.busy() || st == ConnState::Idle) {
                self.on_eof(core, i, now);
            }
        }
    }
}
