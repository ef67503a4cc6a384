//! The HTTP/1 worker's request lifecycle: sending a request on a slot,
//! completing or failing it (through the ledger), following redirects,
//! scenario choices and think times, and what a slot does next (`after`).

use super::conns::{ConnState, Redirected, TimeoutList, NIL};
use super::Worker;
use crate::redirect::Cookies;
use crate::session::{Answer, Event, H1Request, Session, SubmitError, Want};
use crate::workload::{Ended, Then};
use redline_stats::{ErrorKind, Timing};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::time::Instant;

impl Worker<'_> {
    /// Writes a request on connection `i` (connected and idle).
    pub(super) fn send(&mut self, i: u32, intended: Instant, now: Instant) {
        if self.conns[i as usize].redir.is_some() {
            // The connection for the next redirect hop is up.
            return self.send_hop(i, now);
        }
        if self.conns[i as usize].away.is_some() {
            // Open to where the last request was redirected: the next request
            // starts again at its own URL, on a new connection.
            return self.send_on_new_connection(i, intended);
        }
        let plan = self.plan;
        let mut timeout = plan.timeout;
        if let Some(sc) = self.scenario.as_mut() {
            let vu = &mut sc.vus[i as usize];
            if sc.load.journeys_on() && vu.journey.is_none() {
                // An arrival: a new virtual user starts its journey here.
                sc.load.begin_journey(vu, intended);
            }
            let r = sc.load.next(vu);
            let q = &sc.load.scenario.requests[r];
            if vu.target != q.target {
                // The next request goes to another host: replace the connection.
                return self.send_on_new_connection(i, intended);
            }
            timeout = q.timeout;
            sc.load.sent(r);
        }
        let c = &mut self.conns[i as usize];
        c.has_request = true;
        c.intended = intended;
        c.sent = now;
        c.first_byte = None;
        c.wire = 0;
        c.on_conn += 1;
        c.close_after = plan.requests_per_conn.is_some_and(|n| c.on_conn >= n);
        c.state = ConnState::Writing;
        c.deadline = now + timeout;
        self.ledger.sent();
        self.rec.counters.sent += 1;
        let want = self.want(i);
        let c = &mut self.conns[i as usize];
        let submitted = if let Some(sc) = self.scenario.as_mut() {
            let vu = &mut sc.vus[i as usize];
            let r = vu.chosen.unwrap_or(0);
            sc.load.scenario.prepare(r, vu, c.close_after);
            let request = sc.load.scenario.h1_request(r, vu, c.close_after);
            c.session.submit(&request, want)
        } else if c.close_after {
            c.session.submit(&self.request_close, want)
        } else {
            c.session.submit(&self.request, want)
        };
        if self.scenario.is_some() {
            self.push_sorted(i);
        } else {
            self.push(i, TimeoutList::Requests);
        }
        if submitted.is_err() {
            // (A connection's session takes a request whenever the slot is
            // idle: this is not expected.)
            return self.fail(
                i,
                ErrorKind::Closed,
                "the connection could not take the request".into(),
                now,
            );
        }
        self.write_more(i);
    }

    /// What slot `i`'s session keeps of the next answer: the `Server`
    /// header only until the first answer named it (a reader that still
    /// wants it would keep the head memo unused), the `Location` with
    /// `-L`, and what a scenario request's checks, extraction and cookies need.
    pub(super) fn want(&self, i: u32) -> Want {
        Want {
            server: self.want_server,
            location: self.plan.follow.is_some(),
            capture: self.scenario.as_ref().map(|sc| {
                let r = sc.vus[i as usize].chosen.unwrap_or(0);
                sc.load.scenario.capture_want(r)
            }),
        }
    }

    /// Slot `i`'s request was answered (`answered`, as its session's
    /// [`Event::Done`] said): follows a redirect, or records the answer
    /// and decides what the connection and the slot do next.
    pub(super) fn complete(&mut self, i: u32, now: Instant, answered: Answered) {
        if let Some(f) = self.plan.follow.as_deref() {
            let to = answered.answer.as_ref().and_then(|a| a.location.as_ref());
            if crate::redirect::is_redirect(answered.status) && to.is_some() {
                return self.follow(i, f, now, answered);
            }
        }
        self.unlink(i);
        self.ledger.finish_completed();
        let c = &mut self.conns[i as usize];
        c.has_request = false;
        let redirected = c.redir.take();
        let t = Timing {
            intended: c.intended,
            sent: c.sent,
            first_byte: c.first_byte.unwrap_or(now),
            done: now,
        };
        let Answered {
            status,
            body_bytes,
            mut answer,
        } = answered;
        if self.want_server {
            if let Some(s) = answer.as_mut().and_then(|a| a.server.take()) {
                self.rec.server_software = Some(s);
            }
            self.want_server = false;
        }
        self.rec.response(&t, status, c.wire, body_bytes);
        if let Some(sc) = self.scenario.as_mut() {
            let vu = &mut sc.vus[i as usize];
            if vu.chosen.is_some() {
                vu.redirected_from = redirected
                    .as_ref()
                    .map(|d| d.url.host_str().unwrap_or("").to_ascii_lowercase());
                let how = Ended::Answer {
                    status,
                    timing: t,
                    capture: answer.as_ref().and_then(|a| a.capture.as_deref()),
                };
                let then = sc.load.ended(vu, how);
                apply(vu, then);
            }
        }
        let c = &mut self.conns[i as usize];
        if let Some(a) = answer {
            c.session.recycle(a);
        }
        self.last_done = now;
        // (The session closes on `Connection: close`, on bytes after the
        // answer, and at the server's close.)
        let reusable = !c.session.is_closed() && !c.close_after && self.plan.keepalive;
        if reusable {
            c.state = ConnState::Idle;
        } else {
            self.close(i);
        }
        self.after(i, now);
    }

    /// The request for slot `i` needs another connection: closes this one and
    /// queues the slot to reconnect, or, once the run is stopping (no more
    /// connects), counts the request as never sent.
    pub(super) fn send_on_new_connection(&mut self, i: u32, intended: Instant) {
        self.close(i);
        let c = &mut self.conns[i as usize];
        if self.ledger.stopping() {
            c.has_request = false;
            self.ledger.drop_held();
            return;
        }
        c.has_request = true;
        c.intended = intended;
        self.restart.push_back(i);
    }

    /// The spec of the request slot `i` sent (before any redirect): the
    /// plan's, or the scenario request as rendered for the slot's user.
    pub(super) fn request_spec(&self, i: u32) -> &crate::plan::RequestSpec {
        match &self.scenario {
            Some(sc) => {
                let vu = &sc.vus[i as usize];
                sc.load.scenario.spec(vu.chosen.unwrap_or(0), vu)
            }
            None => &self.plan.spec,
        }
    }

    /// `--follow-redirects`: the response just read is a redirect with a
    /// `Location`. Follows it — on the same connection when it stays on the
    /// connection's origin and may be reused, else on a new connection to the
    /// new origin — or ends the request as `too_many_redirects`,
    /// `bad_redirect` or `resolve`. The request stays in flight throughout;
    /// its latency runs to the end of the final response.
    pub(super) fn follow(
        &mut self,
        i: u32,
        f: &crate::redirect::Follow,
        now: Instant,
        answered: Answered,
    ) {
        use crate::redirect::{hop_spec, origin_key, resolve_location};
        let plan = self.plan;
        let c = &mut self.conns[i as usize];
        let status = answered.status;
        let Some(mut answer) = answered.answer else {
            // (`complete` follows only answers with a `Location`.)
            return self.fail(i, ErrorKind::BadRedirect, "no Location kept".into(), now);
        };
        let location = answer.location.take().unwrap_or_default();
        let hops = c.redir.as_ref().map_or(0, |r| r.hops);
        let was_get = c.redir.as_ref().is_some_and(|r| r.get);
        if hops >= f.max {
            let msg = format!("more than {} redirects (--max-redirs)", f.max);
            return self.fail(i, ErrorKind::TooManyRedirects, Cow::Owned(msg), now);
        }
        let own_key = match &self.scenario {
            Some(sc) => sc.load.scenario.targets[sc.vus[i as usize].target]
                .origin
                .clone(),
            None => plan.target.origin.clone(),
        };
        // The original request's spec and whether it asked to close (hops
        // are rewritten from it, and keep its `Connection` line).
        let (orig, close, base) = match c.redir.as_mut() {
            Some(r) => (std::mem::take(&mut r.orig), r.close, Ok(r.url.clone())),
            None => {
                let close = c.close_after;
                let orig = self.request_spec(i).clone();
                let base = url::Url::parse(&format!("{own_key}{}", orig.path));
                (orig, close, base)
            }
        };
        let Ok(base) = base else {
            return self.fail(
                i,
                ErrorKind::BadRedirect,
                "the redirected request's URL cannot be rebuilt".into(),
                now,
            );
        };
        let to = match resolve_location(&base, &location) {
            Ok(u) => u,
            Err(m) => return self.fail(i, ErrorKind::BadRedirect, Cow::Borrowed(m), now),
        };
        let key = origin_key(&to);
        let same_origin = key == own_key;
        let dest = if same_origin {
            None
        } else {
            match f.origin(&to) {
                Ok(o) => Some(o),
                Err(e) => {
                    let kind = if e.resolve {
                        ErrorKind::Resolve
                    } else {
                        ErrorKind::BadRedirect
                    };
                    return self.fail(i, kind, Cow::Owned(e.message), now);
                }
            }
        };
        let c = &mut self.conns[i as usize];
        let jar = match self.scenario.as_mut() {
            Some(sc) => {
                let vu = &mut sc.vus[i as usize];
                let r = vu.chosen.unwrap_or(0);
                sc.load.scenario.redirect_cookies(
                    r,
                    vu,
                    answer.capture.as_deref(),
                    base.host_str().unwrap_or(""),
                    to.host_str().unwrap_or(""),
                )
            }
            None => None,
        };
        let cookies = match &jar {
            Some(j) => Cookies::Jar(j),
            None => Cookies::Given,
        };
        let (spec, get) = hop_spec(&orig, status, &to, same_origin, was_get, cookies);
        let bytes = spec.encode_h1(close).into();
        self.rec.counters.redirects += 1;
        c.session.recycle(answer);
        let on_conn = c.away.as_ref().map_or(own_key.as_str(), |o| o.key.as_str()) == key;
        let reuse = on_conn && !c.session.is_closed() && !c.close_after && plan.keepalive;
        c.redir = Some(Box::new(Redirected {
            hops: hops + 1,
            url: to,
            orig,
            close,
            bytes,
            to: dest,
            get,
        }));
        if reuse {
            c.state = ConnState::Idle;
            self.send_hop(i, now);
        } else {
            // Still the same request (in flight); the next hop needs a new connection.
            self.close(i);
            self.restart.push_back(i);
        }
    }

    /// Sends the next hop of a redirected request on connection `i` (connected and idle).
    pub(super) fn send_hop(&mut self, i: u32, now: Instant) {
        let timeout = match &self.scenario {
            Some(sc) => sc.vus[i as usize]
                .chosen
                .map_or(self.plan.timeout, |r| sc.load.scenario.requests[r].timeout),
            None => self.plan.timeout,
        };
        let want = self.want(i);
        let head = match &self.scenario {
            Some(sc) => sc.vus[i as usize]
                .chosen
                .is_some_and(|r| sc.load.scenario.requests[r].head_request),
            None => self.plan.head_request,
        };
        let c = &mut self.conns[i as usize];
        c.first_byte = None;
        c.state = ConnState::Writing;
        c.deadline = now + timeout;
        let submitted = match c.redir.as_deref() {
            Some(r) => {
                let request = H1Request {
                    wire: r.bytes.clone(),
                    head,
                };
                c.session.submit(&request, want)
            }
            None => Err(SubmitError::Closed),
        };
        if self.scenario.is_some() {
            self.push_sorted(i);
        } else {
            self.push(i, TimeoutList::Requests);
        }
        if submitted.is_err() {
            return self.fail(
                i,
                ErrorKind::Closed,
                "the connection could not take the redirected request".into(),
                now,
            );
        }
        self.write_more(i);
    }

    pub(super) fn fail(&mut self, i: u32, kind: ErrorKind, msg: Cow<'static, str>, now: Instant) {
        let c = &mut self.conns[i as usize];
        if c.has_request && (c.state == ConnState::Reading || c.state == ConnState::Writing) {
            self.unlink(i);
            self.ledger.finish_failed();
            self.conns[i as usize].has_request = false;
            self.conns[i as usize].redir = None;
            self.rec.error(kind, msg, now);
            self.last_done = now;
            self.request_ended(i);
        }
        self.close(i);
        self.after(i, now);
    }

    /// Scenario runs: the slot's request failed (no response): counted
    /// against it; a journey is abandoned.
    pub(super) fn request_ended(&mut self, i: u32) {
        let Some(sc) = self.scenario.as_mut() else {
            return;
        };
        let vu = &mut sc.vus[i as usize];
        if vu.chosen.is_some() {
            let then = sc.load.ended(vu, Ended::Failed);
            apply(vu, then);
        }
    }

    /// Scenario runs: the request slot `i` sends next (chosen once, then kept
    /// until the request ends). A slot waiting for an arrival's journey
    /// connects for the journey's first step (chosen when it starts).
    pub(super) fn choose(&mut self, i: u32) -> usize {
        let sc = self.scenario.as_mut().expect("scenario");
        let vu = &mut sc.vus[i as usize];
        if sc.load.journeys_on() && vu.journey.is_none() {
            return 0;
        }
        sc.load.next(vu)
    }

    /// Open-loop sessions: slot `i`'s journey sends its next step, meant
    /// for `intended`; when the run stops first, the journey is abandoned
    /// and the slot is free again.
    pub(super) fn next_step(&mut self, i: u32, intended: Instant, now: Instant) {
        let st = self.conns[i as usize].state;
        match st {
            ConnState::Idle if self.take_for(i) => self.send(i, intended, now),
            ConnState::Closed if self.take_for(i) => {
                let c = &mut self.conns[i as usize];
                c.intended = intended;
                c.has_request = true;
                self.restart.push_back(i);
            }
            _ => {
                if let Some(sc) = self.scenario.as_mut() {
                    sc.load.stop_journey(&mut sc.vus[i as usize]);
                }
                self.after(i, now);
            }
        }
    }

    /// `--abort-on-fail` with open-loop sessions: publishes, for each age
    /// asked, the journeys' steps still unanswered that long after their
    /// intended time: steps in flight or waiting for a connection, next
    /// steps due while their user still thinks after a late answer, and
    /// arrivals waiting for a slot (their first step). Exact at `now`, not
    /// estimated: a count never includes an answered request. A few times a
    /// second (with each publish): O(slots) per age.
    pub(super) fn publish_journey_overdue(&self, now: Instant) {
        let Some(sc) = self.scenario.as_ref() else {
            return;
        };
        let steps = self.conns.iter().zip(&sc.vus).filter_map(|(c, vu)| {
            let j = vu.journey?;
            Some(if c.has_request {
                c.intended
            } else {
                j.next_intended()
            })
        });
        let ages = self.control.journey_ages();
        let counts = crate::overdue::journey_overdue(now, ages, &self.ledger, steps);
        self.control.publish_journey_overdue(&counts);
    }

    /// Scenario runs: virtual users whose think time is over send their next request.
    pub(super) fn wake_sleepers(&mut self, now: Instant) {
        for _ in 0..100_000 {
            let Some(sc) = self.scenario.as_mut() else {
                return;
            };
            let Some(&Reverse((t, i))) = sc.sleepers.peek() else {
                return;
            };
            if t > now {
                return;
            }
            sc.sleepers.pop();
            let vu = &mut sc.vus[i as usize];
            vu.sleeping = false;
            if let Some(j) = vu.journey {
                // Open-loop sessions: the step is meant for the journey's
                // start plus its think times, not for this wake-up.
                self.next_step(i, j.next_intended(), now);
                continue;
            }
            let st = self.conns[i as usize].state;
            match st {
                // Latency counts from when the user meant to send: the end of its think time.
                ConnState::Idle if self.take_for(i) => self.send(i, t, now),
                ConnState::Closed if self.take_for(i) => {
                    let c = &mut self.conns[i as usize];
                    c.intended = t;
                    c.has_request = true;
                    self.restart.push_back(i);
                }
                _ => {}
            }
        }
    }

    /// Decides what slot `i` does next once its request ended (or its socket went away).
    pub(super) fn after(&mut self, i: u32, now: Instant) {
        let st = self.conns[i as usize].state;
        if self.open_loop {
            if let Some(sc) = self.scenario.as_mut() {
                let vu = &mut sc.vus[i as usize];
                if vu.sleeping {
                    // Thinking: the wake-up sends the journey's next step.
                    return;
                }
                if let Some(j) = vu.journey {
                    if self.ledger.stopping() {
                        sc.load.stop_journey(vu);
                    } else {
                        let think = vu.think.take().unwrap_or_default();
                        if !think.is_zero() {
                            vu.sleeping = true;
                            sc.sleepers.push(Reverse((now + think, i)));
                            return;
                        }
                        return self.next_step(i, j.next_intended(), now);
                    }
                }
            }
            match st {
                ConnState::Idle => {
                    if let Some(t) = self.ledger.dequeue() {
                        self.send(i, t, now);
                    } else {
                        self.idle.push(i);
                    }
                }
                ConnState::Closed => {
                    self.free.push(i);
                    // Waiting requests will reopen it in `release`.
                }
                _ => {}
            }
            return;
        }
        if let Some(sc) = self.scenario.as_mut() {
            let vu = &mut sc.vus[i as usize];
            if vu.sleeping {
                // Thinking: the wake-up sends the next request.
                return;
            }
            if let Some(d) = vu.think.take() {
                if !d.is_zero() && !self.ledger.stopping() {
                    vu.sleeping = true;
                    sc.sleepers.push(Reverse((now + d, i)));
                    return;
                }
            }
        }
        if self.staged && self.active > self.target {
            // The level fell: this slot parks (its request is done; not an error).
            self.close(i);
            self.free.push(i);
            self.active -= 1;
            return;
        }
        match st {
            ConnState::Idle if self.take_for(i) => self.send(i, now, now),
            ConnState::Closed if self.take_for(i) => {
                let c = &mut self.conns[i as usize];
                c.intended = now;
                c.has_request = true;
                self.restart.push_back(i);
            }
            _ => {}
        }
    }

    pub(super) fn close(&mut self, i: u32) {
        if self.conns[i as usize].list != TimeoutList::None {
            self.unlink(i);
        }
        let c = &mut self.conns[i as usize];
        // Closing the socket takes it out of the epoll set: no deregister call.
        if c.sock.take().is_some() {
            self.open -= 1;
        }
        c.tls = None;
        c.away = None;
        c.state = ConnState::Closed;
        // Requests reserved for a connection that ended early go back to the budget.
        if c.quota > 0 {
            self.ledger.give_back(std::mem::take(&mut c.quota));
        }
    }

    pub(super) fn expire(&mut self, now: Instant) {
        while self.request_timeouts.head != NIL {
            let i = self.request_timeouts.head;
            if self.conns[i as usize].deadline > now {
                break;
            }
            self.fail(
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
            self.connect_failed(
                i,
                ErrorKind::ConnectTimeout,
                "connect timed out".into(),
                now,
            );
        }
    }
}

/// A request's answer as its session's [`Event::Done`] gave it.
pub(super) struct Answered {
    pub(super) status: u16,
    pub(super) body_bytes: u64,
    /// What the session kept ([`Worker::want`]); handed back to it when done.
    pub(super) answer: Option<Box<Answer>>,
}

impl Answered {
    /// The answer of a [`Event::Done`]; None for other events.
    pub(super) fn from_event(ev: Event) -> Option<Answered> {
        match ev {
            Event::Done {
                status,
                body_bytes,
                answer,
                ..
            } => Some(Answered {
                status,
                body_bytes,
                answer,
            }),
            _ => None,
        }
    }
}

/// Applies what the workload says a virtual user does next.
fn apply(vu: &mut crate::scenario::Vu, then: Then) {
    match then {
        Then::Next(think) => vu.think = think,
        Then::Step { think, .. } => vu.think = Some(think),
        Then::Over | Then::Free => vu.think = None,
    }
}
