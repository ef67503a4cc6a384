//! The HTTP/1 driver's side of the core's seam ([`Link`]): a slot's
//! connection state, connects, a request put in HTTP/1 form, submitted to
//! the slot's [`crate::session::H1Session`] and written, time-outs, closes.

use super::conns::{TimeoutList, NIL};
use super::H1Link;
use crate::core::{ConnState, Core, Link, Outgoing};
use crate::session::{Answer, H1Request, Session};
use redline_stats::ErrorKind;
use std::time::{Duration, Instant};

impl Link for H1Link {
    #[inline]
    fn state(&self, i: u32) -> ConnState {
        self.conns[i as usize].state
    }

    fn connect(&mut self, core: &mut Core<'_>, i: u32, now: Instant) {
        #[cfg(test)]
        if super::wire_tests::offline(self, core, i, now) {
            return; // unit tests: the test's network connects it
        }
        self.open(core, i, now);
    }

    fn submit(
        &mut self,
        core: &mut Core<'_>,
        i: u32,
        what: Outgoing,
        timeout: Duration,
        now: Instant,
    ) {
        let want = core.want(i);
        let c = &mut self.conns[i as usize];
        c.sent = now;
        c.first_byte = None;
        c.wire = 0;
        c.state = ConnState::Writing;
        c.deadline = now + timeout;
        let submitted = match what {
            Outgoing::Plan { close: false } => c.session.submit(&self.request, want),
            Outgoing::Plan { close: true } => c.session.submit(&self.request_close, want),
            Outgoing::Scenario { r, close } => {
                let request = core.scenario_request(i, r, close);
                c.session.submit(&request, want)
            }
            Outgoing::Hop => match core.hop(i) {
                Some((spec, close, head)) => {
                    let request = H1Request {
                        wire: spec.encode_h1(close).into(),
                        head,
                    };
                    c.session.submit(&request, want)
                }
                None => Err(crate::session::SubmitError::Closed),
            },
        };
        if core.scenario.is_some() {
            self.push_sorted(i);
        } else {
            self.push(i, TimeoutList::Requests);
        }
        if submitted.is_err() {
            // (A connection's session takes a request whenever the slot is
            // idle: this is not expected.)
            let msg = match what {
                Outgoing::Hop => "the connection could not take the redirected request",
                _ => "the connection could not take the request",
            };
            return core.fail(self, i, ErrorKind::Closed, msg.into(), now);
        }
        self.write_more(core, i);
    }

    fn close(&mut self, core: &mut Core<'_>, i: u32) {
        if self.conns[i as usize].list != TimeoutList::None {
            self.unlink(i);
        }
        let c = &mut self.conns[i as usize];
        if c.tcp.close() {
            core.open -= 1;
        }
        c.state = ConnState::Closed;
    }

    #[inline]
    fn settle(&mut self, i: u32) {
        self.unlink(i);
    }

    #[inline]
    fn idle(&mut self, i: u32) {
        self.conns[i as usize].state = ConnState::Idle;
    }

    fn expire(&mut self, core: &mut Core<'_>, now: Instant) {
        while self.request_timeouts.head != NIL {
            let i = self.request_timeouts.head;
            if self.conns[i as usize].deadline > now {
                break;
            }
            core.fail(
                self,
                i,
                ErrorKind::Timeout,
                "no complete response within --timeout".into(),
                now,
            );
        }
        while self.connect_timeouts.head != NIL {
            let i = self.connect_timeouts.head;
            if self.conns[i as usize].deadline > now {
                break;
            }
            core.connect_failed(
                self,
                i,
                ErrorKind::ConnectTimeout,
                "connect timed out".into(),
                now,
            );
        }
    }

    #[inline]
    fn reusable(&self, i: u32) -> bool {
        !self.conns[i as usize].session.is_closed()
    }

    #[inline]
    fn recycle(&mut self, i: u32, answer: Box<Answer>) {
        self.conns[i as usize].session.recycle(answer);
    }
}
