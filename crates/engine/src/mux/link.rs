//! The multiplexing driver's side of the core's seam ([`Link`]): slots
//! attached to connections, requests put in their connection's protocol
//! form and submitted (or waiting for a stream), time-outs, detaching.

use super::conn::{with_session, CState, Proto, NIL};
use super::MuxLink;
use crate::core::{ConnState, Core, Link, Outgoing};
use crate::session::{Answer, H1Request, Session, SubmitError};
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::time::{Duration, Instant};

impl Link for MuxLink {
    #[inline]
    fn state(&self, i: u32) -> ConnState {
        self.slot_state(i)
    }

    fn connect(&mut self, core: &mut Core<'_>, i: u32, now: Instant) {
        self.detach(core, i);
        let (addr, tls) = {
            let d = core.destination(i);
            (d.addr, d.tls.cloned())
        };
        let own = core.own_origin(i);
        core.waiting();
        let c = if own {
            let g = (i as usize) % self.groups.len();
            let cur = self.groups[g];
            if cur != NIL
                && self.conns[cur as usize].state != CState::Closed
                && !self.conns[cur as usize].retired()
            {
                cur
            } else {
                let c = self.new_conn(true, g as u32, now);
                self.groups[g] = c;
                c
            }
        } else {
            // Its connection kept there from before, or a new one.
            let kept = std::mem::replace(&mut self.slots[i as usize].away, NIL);
            if kept != NIL {
                let k = &self.conns[kept as usize];
                if k.addr == Some(addr) && k.state == CState::Open && !k.retired() {
                    kept
                } else {
                    if k.users.is_empty() {
                        self.shut(core, kept);
                    }
                    self.new_conn(false, NIL, now)
                }
            } else {
                self.new_conn(false, NIL, now)
            }
        };
        self.slots[i as usize].conn = c;
        let conn = &mut self.conns[c as usize];
        conn.users.push(i);
        match conn.state {
            CState::Open => core.connection_ready(self, i, now),
            CState::Closed => self.dial(core, c, addr, tls, i, now),
            // Waits with the others for the connect in progress.
            CState::Connecting | CState::Handshaking => {}
        }
    }

    fn submit(
        &mut self,
        core: &mut Core<'_>,
        i: u32,
        what: Outgoing,
        timeout: Duration,
        now: Instant,
    ) {
        let s = &mut self.slots[i as usize];
        s.busy = true;
        s.blocked = false;
        s.what = Some(what);
        s.sent = now;
        s.first_byte = None;
        s.deadline = now + timeout;
        s.gen = s.gen.wrapping_add(1);
        self.timeouts.push(Reverse((s.deadline, i, s.gen)));
        self.try_submit(core, i, now);
    }

    fn close(&mut self, core: &mut Core<'_>, i: u32) {
        self.detach(core, i);
    }

    fn settle(&mut self, i: u32) {
        let s = &mut self.slots[i as usize];
        if !s.busy {
            return;
        }
        s.busy = false;
        s.gen = s.gen.wrapping_add(1);
        let (c, id, blocked) = (s.conn, s.id, std::mem::take(&mut s.blocked));
        if c == NIL {
            return;
        }
        let conn = &mut self.conns[c as usize];
        if blocked {
            conn.blocked.retain(|&x| x != i);
        } else if let Some(k) = conn.streams.iter().position(|&(sid, _)| sid == id) {
            // Given up before its answer (its time-out): the stream is reset,
            // the connection stays.
            conn.streams.swap_remove(k);
            conn.proto.cancel(id);
            self.dirty(c);
        }
    }

    #[inline]
    fn idle(&mut self, _i: u32) {}

    fn expire(&mut self, core: &mut Core<'_>, now: Instant) {
        while let Some(&Reverse((t, i, gen))) = self.timeouts.peek() {
            if t > now {
                break;
            }
            self.timeouts.pop();
            let s = &self.slots[i as usize];
            if s.gen != gen || !s.busy {
                continue;
            }
            let (kind, msg): (ErrorKind, Cow<'static, str>) = if s.blocked {
                let h3 = self
                    .conns
                    .get(s.conn as usize)
                    .is_some_and(|c| matches!(c.proto, Proto::H3(_)));
                let m = if h3 {
                    "no free HTTP/3 stream within --timeout (the server's initial_max_streams_bidi and MAX_STREAMS)"
                } else {
                    "no free HTTP/2 stream within --timeout (the server's SETTINGS_MAX_CONCURRENT_STREAMS)"
                };
                (ErrorKind::NoStream, m.into())
            } else {
                (
                    ErrorKind::Timeout,
                    "no complete response within --timeout".into(),
                )
            };
            core.fail(self, i, kind, msg, now);
        }
        while let Some(&Reverse((t, c, gen))) = self.connect_timeouts.peek() {
            if t > now {
                break;
            }
            self.connect_timeouts.pop();
            let conn = &self.conns[c as usize];
            // A 0-RTT connection is open (its requests went in early
            // data) while its handshake goes on.
            let early = matches!(&conn.proto, Proto::H3(s) if !s.established());
            if conn.gen != gen
                || !(matches!(conn.state, CState::Connecting | CState::Handshaking)
                    || conn.state == CState::Open && early)
            {
                continue;
            }
            let msg = match conn.state {
                CState::Open => "the QUIC handshake of a 0-RTT connection did not end in time",
                _ => "connect timed out",
            };
            self.conn_failed(core, c, ErrorKind::ConnectTimeout, msg.into(), now);
        }
        self.expire_quic(core, now);
    }

    fn reusable(&self, i: u32) -> bool {
        let c = self.slots[i as usize].conn;
        c != NIL && !self.conns[c as usize].proto.is_closed()
    }

    fn recycle(&mut self, i: u32, answer: Box<Answer>) {
        let c = self.slots[i as usize].conn;
        if c != NIL {
            with_session!(&mut self.conns[c as usize].proto, s => s.recycle(answer));
        }
    }

    const SHARES_CONNECTIONS: bool = true;

    #[inline]
    fn same_connection(&self, a: u32, b: u32) -> bool {
        let c = self.slots[a as usize].conn;
        c != NIL && c == self.slots[b as usize].conn
    }
}

impl MuxLink {
    /// Submits slot `i`'s request on its connection, or leaves it waiting
    /// for a free stream there.
    pub(super) fn try_submit(&mut self, core: &mut Core<'_>, i: u32, now: Instant) {
        let (c, what) = {
            let s = &self.slots[i as usize];
            (s.conn, s.what)
        };
        let Some(what) = what else { return };
        if c == NIL {
            return core.fail(self, i, ErrorKind::Closed, "no connection".into(), now);
        }
        let want = core.want(i);
        let conn = &mut self.conns[c as usize];
        if conn.full || conn.proto.capacity() == 0 {
            if !conn.proto.retiring() && !conn.full {
                // No free stream now: waits on the slot, timed from its send.
                self.slots[i as usize].blocked = true;
                conn.blocked.push(i);
                return;
            }
            // This connection takes nothing more: another one will.
            return core.refused(
                self,
                i,
                ErrorKind::Closed,
                "the connection took no more requests".into(),
                now,
            );
        }
        let tls = conn.tcp.tls.is_some();
        let submitted = match &mut conn.proto {
            Proto::H2(sess) => match what {
                Outgoing::Plan { .. } => sess.submit(&self.setup.request, want),
                _ => {
                    let scheme = if tls { "https" } else { "http" };
                    h2_form(core, i, what, scheme).and_then(|r| sess.submit(&r, want))
                }
            },
            Proto::H3(sess) => match (what, &self.setup.h3) {
                (Outgoing::Plan { .. }, Some(h3)) => sess.submit(&h3.request, want),
                _ => h2_form(core, i, what, "https")
                    .and_then(|r| sess.submit(&crate::http3::Http3Request::from_h2(&r), want)),
            },
            Proto::H1(sess) => {
                let request = match what {
                    Outgoing::Plan { close } => Some(H1Request {
                        wire: core.request_spec(i).encode_h1(close).into(),
                        head: core.plan.head_request,
                    }),
                    Outgoing::Scenario { r, close } => Some(core.scenario_request(i, r, close)),
                    Outgoing::Hop => core.hop(i).map(|(spec, close, head)| H1Request {
                        wire: spec.encode_h1(close).into(),
                        head,
                    }),
                };
                match request {
                    Some(r) => sess.submit(&r, want),
                    None => Err(SubmitError::Closed),
                }
            }
        };
        match submitted {
            Ok(id) => {
                let conn = &mut self.conns[c as usize];
                conn.streams.push((id, i));
                conn.submitted += 1;
                if self.per_conn.is_some_and(|k| conn.submitted >= k) {
                    conn.full = true;
                }
                self.slots[i as usize].id = id;
                self.dirty(c);
            }
            Err(SubmitError::Full) => {
                self.slots[i as usize].blocked = true;
                self.conns[c as usize].blocked.push(i);
            }
            Err(SubmitError::Closed) => core.refused(
                self,
                i,
                ErrorKind::Closed,
                "the connection could not take the request".into(),
                now,
            ),
            Err(SubmitError::Invalid(m)) => {
                core.fail(self, i, ErrorKind::Other, Cow::Owned(m), now)
            }
        }
    }

    /// Slot `i` leaves its connection: a request still on it is given up
    /// (its stream reset); a connection no slot uses any more closes.
    pub(super) fn detach(&mut self, core: &mut Core<'_>, i: u32) {
        self.settle(i);
        let s = &mut self.slots[i as usize];
        let c = std::mem::replace(&mut s.conn, NIL);
        s.what = None;
        if c == NIL {
            return;
        }
        let conn = &mut self.conns[c as usize];
        conn.users.retain(|&x| x != i);
        if !conn.users.is_empty() {
            return;
        }
        let healthy = conn.state == CState::Open && !conn.retired();
        if healthy && conn.group != NIL {
            // The run's connection stays for the slots coming back to it.
            return;
        }
        if healthy {
            // Kept for the slot's next request or hop to that origin.
            let old = std::mem::replace(&mut self.slots[i as usize].away, c);
            if old != NIL && old != c && self.conns[old as usize].users.is_empty() {
                self.shut(core, old);
            }
            return;
        }
        self.shut(core, c);
    }

    /// Marks connection `c` as having bytes to write (written before the
    /// worker sleeps, so the requests of one pass go in one write).
    pub(super) fn dirty(&mut self, c: u32) {
        let conn = &mut self.conns[c as usize];
        if !conn.dirty {
            conn.dirty = true;
            self.dirty.push(c);
        }
    }
}

/// The HTTP/2 form of slot `i`'s scenario request or redirect hop (HTTP/3
/// takes its fields from it too).
fn h2_form(
    core: &Core<'_>,
    i: u32,
    what: Outgoing,
    scheme: &str,
) -> Result<crate::http2::Http2Request, SubmitError> {
    let spec = match what {
        Outgoing::Hop => match core.hop(i) {
            Some((spec, _, _)) => spec,
            None => return Err(SubmitError::Closed),
        },
        _ => core.request_spec(i),
    };
    crate::http2::Http2Request::from_spec(spec, scheme).map_err(SubmitError::Invalid)
}
