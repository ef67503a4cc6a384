//! What a request's end means, for every protocol: sending a request on a
//! slot (the workload's choice), completing or failing it (the one place
//! that ends a request in the ledger, the recorder and the workload
//! together), following redirects (`-L`) and going to other hosts, think
//! times, and what a slot does next (`after`: the closed loop's next
//! request, the open loop's queue, a stage level that fell, a journey's next
//! step). The driver calls the `pub(crate)` event methods when its sessions
//! say a connection came up or failed, or a request was answered or failed.

use super::{ConnState, Core, Link, Outgoing, Redirected};
use crate::redirect::Cookies;
use crate::session::{Answer, Event, Want};
use crate::workload::{Ended, Then};
use redline_stats::{ErrorKind, Timing};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::time::Instant;

/// A request's answer, as the driver's session gave it.
pub(crate) struct Answered {
    pub(crate) status: u16,
    pub(crate) body_bytes: u64,
    /// What the session kept ([`Core::want`]); handed back to it when done.
    pub(crate) answer: Option<Box<Answer>>,
    /// When its request was written and its first response byte came.
    pub(crate) sent: Instant,
    pub(crate) first_byte: Option<Instant>,
    /// Response bytes on the wire.
    pub(crate) wire: u64,
    /// When its last byte arrived, if the driver read it later than that
    /// (deferred answers stamped by the kernel, `ioloop::Pacing::defer`).
    pub(crate) arrived: Option<Instant>,
}

impl Answered {
    /// The answer of an [`Event::Done`] (None for other events), with its
    /// timing from the driver. Inlined: it is on every driver's hot path
    /// (on the HTTP/1 worker's, called from another codegen unit it cost 47
    /// instructions more per request, callgrind).
    #[inline]
    pub(crate) fn from_event(
        ev: Event,
        sent: Instant,
        first_byte: Option<Instant>,
        wire: u64,
    ) -> Option<Answered> {
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
                sent,
                first_byte,
                wire,
                arrived: None,
            }),
            _ => None,
        }
    }
}

impl Core<'_> {
    /// Sends a request on slot `i` (connected and idle): the workload's
    /// next, a redirect's next hop, or a new connection first when the
    /// request goes elsewhere.
    pub(crate) fn send(&mut self, link: &mut impl Link, i: u32, intended: Instant, now: Instant) {
        let s = &mut self.slots[i as usize];
        if std::mem::take(&mut s.again) {
            // Refused unprocessed: the same request again (still in flight).
            if let Some(what) = s.last {
                let timeout = self.timeout_of(i);
                return link.submit(self, i, what, timeout, now);
            }
        }
        if self.slots[i as usize].redir.is_some() {
            // The connection for the next redirect hop is up.
            return self.send_hop(link, i, now);
        }
        if self.slots[i as usize].away.is_some() {
            // Open to where the last request was redirected: the next request
            // starts again at its own URL, on a new connection.
            return self.send_on_new_connection(link, i, intended);
        }
        let plan = self.plan;
        let mut timeout = plan.timeout;
        let mut chosen = None;
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
                return self.send_on_new_connection(link, i, intended);
            }
            timeout = q.timeout;
            sc.load.sent(r);
            chosen = Some(r);
        }
        let s = &mut self.slots[i as usize];
        s.has_request = true;
        s.intended = intended;
        s.on_conn += 1;
        s.close_after = plan.requests_per_conn.is_some_and(|n| s.on_conn >= n);
        let close = s.close_after;
        self.ledger.sent();
        self.rec.counters.sent += 1;
        let what = match chosen {
            Some(r) => {
                let sc = self.scenario.as_mut().expect("scenario");
                let vu = &mut sc.vus[i as usize];
                sc.load.scenario.prepare(r, vu, close);
                Outgoing::Scenario { r, close }
            }
            None => Outgoing::Plan { close },
        };
        self.slots[i as usize].last = Some(what);
        link.submit(self, i, what, timeout, now);
    }

    /// What slot `i`'s session keeps of the next answer: the `Server`
    /// header only until the first answer named it (a reader that still
    /// wants it would keep the head memo unused), the `Location` with
    /// `-L`, and what a scenario request's checks, extraction and cookies need.
    pub(crate) fn want(&self, i: u32) -> Want {
        Want {
            server: self.want_server,
            location: self.plan.follow.is_some(),
            capture: self.scenario.as_ref().map(|sc| {
                let r = sc.vus[i as usize].chosen.unwrap_or(0);
                sc.load.scenario.capture_want(r)
            }),
            capture_max: crate::h1::MAX_CAPTURE,
        }
    }

    /// Scenario request `r` as rendered for slot `i`'s user (its HTTP/1
    /// bytes, asking to close when `close`).
    pub(crate) fn scenario_request(
        &self,
        i: u32,
        r: usize,
        close: bool,
    ) -> crate::session::H1Request {
        let sc = self.scenario.as_ref().expect("scenario");
        sc.load.scenario.h1_request(r, &sc.vus[i as usize], close)
    }

    /// Slot `i`'s redirected request's next hop: its spec, whether it asks
    /// to close, whether it is a HEAD request.
    pub(crate) fn hop(&self, i: u32) -> Option<(&crate::plan::RequestSpec, bool, bool)> {
        let r = self.slots[i as usize].redir.as_deref()?;
        let head = match &self.scenario {
            Some(sc) => sc.vus[i as usize]
                .chosen
                .is_some_and(|r| sc.load.scenario.requests[r].head_request),
            None => self.plan.head_request,
        };
        Some((&r.spec, r.close, head))
    }

    /// Slot `i`'s request was answered: follows a redirect, or ends the
    /// request (ledger, recorder, workload) and decides what the connection
    /// and the slot do next.
    pub(crate) fn complete(
        &mut self,
        link: &mut impl Link,
        i: u32,
        now: Instant,
        answered: Answered,
    ) {
        if let Some(f) = self.plan.follow.as_deref() {
            let to = answered.answer.as_ref().and_then(|a| a.location.as_ref());
            if crate::redirect::is_redirect(answered.status) && to.is_some() {
                return self.follow(link, i, f, now, answered);
            }
        }
        link.settle(i);
        self.ledger.finish_completed();
        let s = &mut self.slots[i as usize];
        s.has_request = false;
        s.retried = false;
        let redirected = s.redir.take();
        // A stamped arrival (never before the send, never after now) ends
        // the request's clock: the answer waited in its socket since.
        let done = answered
            .arrived
            .map_or(now, |a| a.max(answered.sent).min(now));
        let t = Timing {
            intended: s.intended,
            sent: answered.sent,
            first_byte: answered.first_byte.unwrap_or(done).min(done),
            done,
        };
        let Answered {
            status,
            body_bytes,
            mut answer,
            wire,
            ..
        } = answered;
        if self.want_server {
            if let Some(s) = answer.as_mut().and_then(|a| a.server.take()) {
                self.rec.server_software = Some(s);
            }
            if let Some(s) = answer.as_mut().and_then(|a| a.alt_svc.take()) {
                self.rec.alt_svc = Some(s);
            }
            self.want_server = false;
        }
        self.rec.response(&t, status, wire, body_bytes);
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
        if let Some(a) = answer {
            link.recycle(i, a);
        }
        self.last_done = now;
        let reusable =
            link.reusable(i) && !self.slots[i as usize].close_after && self.plan.keepalive;
        if reusable {
            link.idle(i);
        } else {
            self.close(link, i);
        }
        self.after(link, i, now);
    }

    /// The request for slot `i` needs another connection: closes this one and
    /// queues the slot to reconnect, or, once the run is stopping (no more
    /// connects), counts the request as never sent.
    pub(crate) fn send_on_new_connection(
        &mut self,
        link: &mut impl Link,
        i: u32,
        intended: Instant,
    ) {
        self.close(link, i);
        let s = &mut self.slots[i as usize];
        if self.ledger.stopping() {
            s.has_request = false;
            self.ledger.drop_held();
            return;
        }
        s.has_request = true;
        s.intended = intended;
        self.restart.push_back(i);
    }

    /// The spec of the request slot `i` sent (before any redirect): the
    /// plan's, or the scenario request as rendered for the slot's user.
    pub(crate) fn request_spec(&self, i: u32) -> &crate::plan::RequestSpec {
        match &self.scenario {
            Some(sc) => {
                let vu = &sc.vus[i as usize];
                sc.load.scenario.spec(vu.chosen.unwrap_or(0), vu)
            }
            None => &self.plan.spec,
        }
    }

    /// `--follow-redirects`: the answer just read is a redirect with a
    /// `Location`. Follows it — on the same connection when it stays on the
    /// connection's origin and may be reused, else on a new connection to the
    /// new origin — or ends the request as `too_many_redirects`,
    /// `bad_redirect` or `resolve`. The request stays in flight throughout;
    /// its latency runs to the end of the final response.
    fn follow(
        &mut self,
        link: &mut impl Link,
        i: u32,
        f: &crate::redirect::Follow,
        now: Instant,
        answered: Answered,
    ) {
        use crate::redirect::{hop_spec, origin_key, resolve_location};
        let plan = self.plan;
        let status = answered.status;
        let Some(mut answer) = answered.answer else {
            // (`complete` follows only answers with a `Location`.)
            return self.fail(
                link,
                i,
                ErrorKind::BadRedirect,
                "no Location kept".into(),
                now,
            );
        };
        let location = answer.location.take().unwrap_or_default();
        let s = &mut self.slots[i as usize];
        let hops = s.redir.as_ref().map_or(0, |r| r.hops);
        let was_get = s.redir.as_ref().is_some_and(|r| r.get);
        if hops >= f.max {
            let msg = format!("more than {} redirects (--max-redirs)", f.max);
            return self.fail(link, i, ErrorKind::TooManyRedirects, Cow::Owned(msg), now);
        }
        let own_key = match &self.scenario {
            Some(sc) => sc.load.scenario.targets[sc.vus[i as usize].target]
                .origin
                .clone(),
            None => plan.target.origin.clone(),
        };
        // The original request's spec and whether it asked to close (hops
        // are rewritten from it, and keep its `Connection` line).
        let (orig, close, base) = match self.slots[i as usize].redir.as_mut() {
            Some(r) => (std::mem::take(&mut r.orig), r.close, Ok(r.url.clone())),
            None => {
                let close = self.slots[i as usize].close_after;
                let orig = self.request_spec(i).clone();
                let base = url::Url::parse(&format!("{own_key}{}", orig.path));
                (orig, close, base)
            }
        };
        let Ok(base) = base else {
            return self.fail(
                link,
                i,
                ErrorKind::BadRedirect,
                "the redirected request's URL cannot be rebuilt".into(),
                now,
            );
        };
        let to = match resolve_location(&base, &location) {
            Ok(u) => u,
            Err(m) => return self.fail(link, i, ErrorKind::BadRedirect, Cow::Borrowed(m), now),
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
                    return self.fail(link, i, kind, Cow::Owned(e.message), now);
                }
            }
        };
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
        self.rec.counters.redirects += 1;
        link.recycle(i, answer);
        let s = &mut self.slots[i as usize];
        let on_conn = s.away.as_ref().map_or(own_key.as_str(), |o| o.key.as_str()) == key;
        let reuse = on_conn && link.reusable(i) && !s.close_after && plan.keepalive;
        s.redir = Some(Box::new(Redirected {
            hops: hops + 1,
            url: to,
            orig,
            close,
            spec,
            to: dest,
            get,
        }));
        if reuse {
            link.idle(i);
            self.send_hop(link, i, now);
        } else {
            // Still the same request (in flight); the next hop needs a new connection.
            self.close(link, i);
            self.restart.push_back(i);
        }
    }

    /// Sends the next hop of a redirected request on slot `i` (connected and idle).
    fn send_hop(&mut self, link: &mut impl Link, i: u32, now: Instant) {
        let timeout = self.timeout_of(i);
        self.slots[i as usize].last = Some(Outgoing::Hop);
        link.submit(self, i, Outgoing::Hop, timeout, now);
    }

    /// The answer time-out of slot `i`'s request (a scenario request's own).
    fn timeout_of(&self, i: u32) -> std::time::Duration {
        match &self.scenario {
            Some(sc) => sc.vus[i as usize]
                .chosen
                .map_or(self.plan.timeout, |r| sc.load.scenario.requests[r].timeout),
            None => self.plan.timeout,
        }
    }

    /// The server refused slot `i`'s request unprocessed (HTTP/2 GOAWAY
    /// naming a lower stream, REFUSED_STREAM; RFC 9113 §8.7): it goes once
    /// more on a new connection, still in flight in the ledger (counted
    /// `retried`); refused again, it fails with `kind`.
    pub(crate) fn refused(
        &mut self,
        link: &mut impl Link,
        i: u32,
        kind: ErrorKind,
        msg: Cow<'static, str>,
        now: Instant,
    ) {
        let s = &mut self.slots[i as usize];
        if s.retried || !s.has_request || s.last.is_none() || self.ledger.stopping() {
            return self.fail(link, i, kind, msg, now);
        }
        s.retried = true;
        s.again = true;
        link.settle(i);
        self.ledger.count_retry();
        self.close(link, i);
        self.restart.push_back(i);
    }

    /// Slot `i`'s request failed (no answer): ends it in the ledger, the
    /// recorder and the workload, closes the connection and decides what
    /// the slot does next.
    pub(crate) fn fail(
        &mut self,
        link: &mut impl Link,
        i: u32,
        kind: ErrorKind,
        msg: Cow<'static, str>,
        now: Instant,
    ) {
        let s = &mut self.slots[i as usize];
        if s.has_request && link.state(i).busy() {
            link.settle(i);
            self.ledger.finish_failed();
            let s = &mut self.slots[i as usize];
            s.has_request = false;
            s.retried = false;
            s.redir = None;
            self.rec.error(kind, msg, now);
            self.last_done = now;
            self.request_ended(i);
        }
        self.close(link, i);
        self.after(link, i, now);
    }

    /// Scenario runs: the slot's request failed (no response): counted
    /// against it; a journey is abandoned.
    fn request_ended(&mut self, i: u32) {
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
    pub(crate) fn choose(&mut self, i: u32) -> usize {
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
    fn next_step(&mut self, link: &mut impl Link, i: u32, intended: Instant, now: Instant) {
        if !self.next_request(link, i, intended, now) {
            if let Some(sc) = self.scenario.as_mut() {
                sc.load.stop_journey(&mut sc.vus[i as usize]);
            }
            self.after(link, i, now);
        }
    }

    /// `--abort-on-fail` with open-loop sessions: publishes, for each age
    /// asked, the journeys' steps still unanswered that long after their
    /// intended time: steps in flight or waiting for a connection, next
    /// steps due while their user still thinks after a late answer, and
    /// arrivals waiting for a slot (their first step). Exact at `now`, not
    /// estimated: a count never includes an answered request. A few times a
    /// second (with each publish): O(slots) per age.
    pub(crate) fn publish_journey_overdue(&self, now: Instant) {
        let Some(sc) = self.scenario.as_ref() else {
            return;
        };
        let steps = self.slots.iter().zip(&sc.vus).filter_map(|(s, vu)| {
            let j = vu.journey?;
            Some(if s.has_request {
                s.intended
            } else {
                j.next_intended()
            })
        });
        let ages = self.control.journey_ages();
        let counts = crate::overdue::journey_overdue(now, ages, &self.ledger, steps);
        self.control.publish_journey_overdue(&counts);
    }

    /// Scenario runs: virtual users whose think time is over send their next request.
    pub(crate) fn wake_sleepers(&mut self, link: &mut impl Link, now: Instant) {
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
                self.next_step(link, i, j.next_intended(), now);
                continue;
            }
            // Latency counts from when the user meant to send: the end of its think time.
            self.next_request(link, i, t, now);
        }
    }

    /// Decides what slot `i` does next once its request ended (or its connection went away).
    pub(crate) fn after(&mut self, link: &mut impl Link, i: u32, now: Instant) {
        let st = link.state(i);
        if self.slots[i as usize].has_request && !st.busy() {
            // The slot's request is not the one that ended: it waits for a
            // connection (sent again after a refusal, a redirect's next hop)
            // and goes on from `restart`. Freeing the slot here would let a
            // new request take it while that one is still under way.
            if !st.opening() && !self.restart.contains(&i) {
                self.restart.push_back(i);
            }
            return;
        }
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
                        return self.next_step(link, i, j.next_intended(), now);
                    }
                }
            }
            match st {
                ConnState::Idle => {
                    if let Some(t) = self.ledger.dequeue() {
                        self.send(link, i, t, now);
                    } else {
                        self.idle.push_back(i);
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
            self.close(link, i);
            self.free.push(i);
            self.active -= 1;
            return;
        }
        self.next_request(link, i, now, now);
    }

    /// Slot `i` takes its next request, meant for `intended`, from the
    /// ledger: sent at once on its idle connection, or held while it
    /// connects. False when there is none to take or the slot is busy.
    fn next_request(
        &mut self,
        link: &mut impl Link,
        i: u32,
        intended: Instant,
        now: Instant,
    ) -> bool {
        let st = link.state(i);
        match st {
            ConnState::Idle if self.take_for(i, st) => self.send(link, i, intended, now),
            ConnState::Closed if self.take_for(i, st) => {
                let s = &mut self.slots[i as usize];
                s.intended = intended;
                s.has_request = true;
                self.restart.push_back(i);
            }
            _ => return false,
        }
        true
    }

    /// Closes slot `i`'s connection: requests reserved for it go back to the budget.
    pub(crate) fn close(&mut self, link: &mut impl Link, i: u32) {
        link.close(self, i);
        let s = &mut self.slots[i as usize];
        s.away = None;
        if s.quota > 0 {
            self.ledger.give_back(std::mem::take(&mut s.quota));
        }
    }

    /// Slot `i`'s connection (and its TLS session) is up: send its request,
    /// or the oldest waiting one, or wait for work.
    pub(crate) fn connection_ready(&mut self, link: &mut impl Link, i: u32, now: Instant) {
        self.connecting -= 1;
        let s = &self.slots[i as usize];
        if s.has_request {
            let intended = s.intended;
            self.send(link, i, intended, now);
        } else if let Some(t) = self.ledger.dequeue() {
            self.send(link, i, t, now);
        } else {
            self.idle.push_back(i);
        }
    }

    /// Slot `i`'s connect or handshake failed (`opening`: it was still in
    /// progress): its request fails, or, in the open loop, the oldest
    /// waiting request it was opened for.
    pub(crate) fn connect_failed(
        &mut self,
        link: &mut impl Link,
        i: u32,
        kind: ErrorKind,
        msg: Cow<'static, str>,
        now: Instant,
    ) {
        let opening = link.state(i).opening();
        self.close(link, i);
        if opening {
            self.connecting -= 1;
        }
        let s = &mut self.slots[i as usize];
        if s.has_request {
            s.has_request = false;
            let sent = s.in_flight();
            s.redir = None;
            s.again = false;
            s.retried = false;
            if sent {
                // A redirect hop or a request sent again: it was in flight.
                self.ledger.finish_failed();
            } else {
                self.ledger.fail_held();
            }
            self.rec.error(kind, msg, now);
            self.last_done = now;
            self.request_ended(i);
            self.after(link, i, now);
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

    /// An idle connection went away (server's keep-alive time-out): not an error.
    pub(crate) fn drop_idle(&mut self, link: &mut impl Link, i: u32, now: Instant) {
        self.close(link, i);
        self.after(link, i, now);
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
