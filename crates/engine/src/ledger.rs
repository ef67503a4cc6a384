//! The request ledger: where every request a worker's load model issues is,
//! from the moment it is scheduled until it ends. One per worker, shared by
//! both protocol drivers (the HTTP/1 worker and the HTTP/2 worker); sans IO:
//! no sockets, no clock of its own (`now` is passed in), no allocation per
//! request (the open-loop queue grows to its high-water mark once) and no
//! dynamic dispatch: every operation is a few integer updates.
//!
//! A request is, at any instant, in exactly one place:
//!
//! ```text
//! budget ─take/take_n─────────► held ─sent─► in flight ─finish_completed─► completed
//! budget ─reserve─► reserved ─take_reserved─► held      in flight ─finish_failed────► failed
//! reserved ─give_back─► budget                          in flight ─abandon_in_flight─► in_flight_at_end
//! pacer ─release_due(now)─► held ─enqueue─► pending ─dequeue─► held
//! held ─fail_held─► failed        pending ─fail_pending─► failed
//! held ─drop_held─► not_sent      close_into: held, pending, refused ─► not_sent; in flight ─► in_flight_at_end
//! in flight ─refuse─► refused ─take_refused─► held   (HTTP/2: not processed by the server; re-sent once)
//! ```
//!
//! - **budget**: closed loop, requests not yet taken (`None`: until the deadline).
//! - **reserved**: closed loop with `--requests-per-conn K` and `-n`: blocks of
//!   K taken from the budget by connections, not yet used (`-n N` makes exactly
//!   ⌈N/K⌉ connections). A connection that ends early gives the rest back.
//! - **pending**: open loop, intended send times released by the pacer and
//!   waiting for a connection or stream.
//! - **held**: taken by a connection or stream (or a connect attempt), not yet
//!   written.
//! - **in flight**: written, not yet ended.
//! - **refused**: HTTP/2, written and refused by the server unprocessed
//!   (GOAWAY naming a lower last stream id, or REFUSED_STREAM), waiting to be
//!   sent again (RFC 9113 §8.7), with its original intended time; taking one
//!   counts it `retried`. Each waits for a connection whose serial is above
//!   the one it names (after GOAWAY: the newest connection's at the refusal,
//!   so it goes out on a connection opened since, not on an old one that may
//!   be about to refuse it too; after REFUSED_STREAM: 0, any). The driver
//!   retries a request at most once (a second refusal is a failure). When the
//!   run ends first it was not sent (the server never processed it).
//!
//! Taking, reserving and releasing count a request `scheduled`; each then ends
//! exactly once: completed, failed, not sent (held or pending when the run
//! ended, or due before the stop and never released) or in flight at the end.
//! [`Ledger::close_into`] writes `scheduled`, `not_sent` and
//! `in_flight_at_end` into the recorder's counters; completed and failed are
//! the recorder's own (it counts responses and errors), and the ledger keeps
//! its own tally of them only to check the sum (the property test below).

use crate::pacer::Pacer;
use redline_stats::Counters;
use std::collections::VecDeque;
use std::time::Instant;

/// One worker's request accounting (see the module docs).
pub struct Ledger {
    budget: Option<u64>,
    reserved: u64,
    held: u64,
    pending: VecDeque<Instant>,
    in_flight: u64,
    /// Refused unprocessed, to be sent again: their intended times (oldest
    /// first) and the connection serial a connection taking one must exceed.
    refused: VecDeque<(Instant, u64)>,
    /// Refused requests taken to be sent again.
    retried: u64,
    stopping: bool,
    /// Open loop: the schedule, its origin and the deadline it stops at.
    pacer: Option<Pacer>,
    start: Instant,
    deadline: Option<Instant>,
    next_due: Option<Instant>,
    /// How requests ended (see [`Ends`]).
    ends: Ends,
}

/// Where the requests a ledger scheduled went.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Ends {
    /// Requests taken, reserved-and-used or released.
    pub scheduled: u64,
    /// Ended with a response.
    pub completed: u64,
    /// Ended with an error.
    pub failed: u64,
    /// Never written.
    pub not_sent: u64,
    /// Written, unanswered when the run ended.
    pub in_flight_at_end: u64,
}

impl Ends {
    /// Requests that ended one way or another.
    pub fn ended(&self) -> u64 {
        self.completed + self.failed + self.not_sent + self.in_flight_at_end
    }
}

impl Ledger {
    /// A closed-loop ledger (`budget`: the worker's requests, None: until the
    /// deadline) or, with a `pacer`, an open-loop one whose schedule starts at
    /// `start` and releases nothing at or after `deadline`.
    pub fn new(
        budget: Option<u64>,
        pacer: Option<Pacer>,
        start: Instant,
        deadline: Option<Instant>,
    ) -> Ledger {
        let mut l = Ledger {
            budget,
            reserved: 0,
            held: 0,
            pending: VecDeque::new(),
            in_flight: 0,
            refused: VecDeque::new(),
            retried: 0,
            stopping: false,
            pacer,
            start,
            deadline,
            next_due: None,
            ends: Ends::default(),
        };
        l.advance();
        l
    }

    /// Whether a pacer drives this ledger.
    pub fn open_loop(&self) -> bool {
        self.pacer.is_some()
    }

    /// The run is stopping: nothing more is taken or released.
    #[inline]
    pub fn stopping(&self) -> bool {
        self.stopping
    }

    /// Closed loop: requests not yet taken (None: until the deadline).
    pub fn budget(&self) -> Option<u64> {
        self.budget
    }

    /// Requests taken or released, not yet written.
    #[inline]
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Requests written and not yet ended.
    #[inline]
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Open loop: released requests waiting for a connection or stream.
    #[inline]
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Requests refused unprocessed and waiting to be sent again.
    #[inline]
    pub fn refused(&self) -> usize {
        self.refused.len()
    }

    /// Refused requests taken to be sent again so far.
    pub fn retried(&self) -> u64 {
        self.retried
    }

    /// How requests ended so far.
    pub fn ends(&self) -> Ends {
        self.ends
    }

    /// Closed loop: takes one request from the budget (held by the caller).
    #[inline]
    pub fn take(&mut self) -> bool {
        if self.stopping {
            return false;
        }
        match &mut self.budget {
            Some(0) => return false,
            Some(n) => *n -= 1,
            None => {}
        }
        self.ends.scheduled += 1;
        self.held += 1;
        true
    }

    /// Closed loop: takes up to `n` requests; how many were taken (all held by the caller).
    pub fn take_n(&mut self, n: u64) -> u64 {
        if self.stopping {
            return 0;
        }
        let got = match &mut self.budget {
            Some(b) => {
                let g = (*b).min(n);
                *b -= g;
                g
            }
            None => n,
        };
        self.ends.scheduled += got;
        self.held += got;
        got
    }

    /// Closed loop with `--requests-per-conn k`: a new connection reserves a
    /// block of `k` requests (fewer at the end of the budget) and takes the
    /// first `want` of them. Returns (the connection's quota: reserved, not
    /// taken; requests taken, held by the caller).
    pub fn reserve(&mut self, k: u64, want: u64) -> (u64, u64) {
        if self.stopping {
            return (0, 0);
        }
        let r = match &mut self.budget {
            Some(b) => {
                let r = (*b).min(k);
                *b -= r;
                r
            }
            None => k,
        };
        let first = r.min(want);
        self.reserved += r - first;
        self.ends.scheduled += first;
        self.held += first;
        (r - first, first)
    }

    /// Takes one request of a connection's `quota` (reserved by [`Ledger::reserve`]).
    #[inline]
    pub fn take_reserved(&mut self, quota: &mut u64) -> bool {
        if self.stopping || *quota == 0 {
            return false;
        }
        *quota -= 1;
        self.reserved -= 1;
        self.ends.scheduled += 1;
        self.held += 1;
        true
    }

    /// A connection ended with `quota` reserved requests unused: back to the
    /// budget (once stopping, they are dropped: never scheduled).
    pub fn give_back(&mut self, quota: u64) {
        self.reserved -= quota;
        if !self.stopping {
            if let Some(b) = &mut self.budget {
                *b += quota;
            }
        }
    }

    /// Open loop: the next intended send time not yet released.
    #[inline]
    pub fn next_due(&self) -> Option<Instant> {
        self.next_due
    }

    /// Open loop: releases the next send time if it is due at `now`; the
    /// request is then held by the caller, who sends it or [`Ledger::enqueue`]s it.
    #[inline]
    pub fn release_due(&mut self, now: Instant) -> Option<Instant> {
        let t = self.next_due?;
        if t > now || self.stopping {
            return None;
        }
        self.ends.scheduled += 1;
        self.held += 1;
        self.advance();
        Some(t)
    }

    /// The next intended send time, none at or past the deadline.
    fn advance(&mut self) {
        let start = self.start;
        self.next_due = self
            .pacer
            .as_mut()
            .and_then(|p| p.next_send())
            .map(|d| start + d)
            .filter(|t| self.deadline.is_none_or(|d| *t < d));
    }

    /// Open loop: a held request waits for a connection (its intended time `t`).
    #[inline]
    pub fn enqueue(&mut self, t: Instant) {
        self.held -= 1;
        self.pending.push_back(t);
    }

    /// Pending requests intended at or before `cutoff` (they wait for a
    /// connection; `--abort-on-fail` counts them once old enough). Read a few
    /// times a second, not per request.
    pub fn pending_due_by(&self, cutoff: Instant) -> u64 {
        self.pending.iter().take_while(|t| **t <= cutoff).count() as u64
    }

    /// Open loop: the oldest waiting request, now held by the caller.
    #[inline]
    pub fn dequeue(&mut self) -> Option<Instant> {
        let t = self.pending.pop_front()?;
        self.held += 1;
        Some(t)
    }

    /// A held request was written.
    #[inline]
    pub fn sent(&mut self) {
        self.held -= 1;
        self.in_flight += 1;
    }

    /// A request in flight got its response.
    #[inline]
    pub fn finish_completed(&mut self) {
        self.in_flight -= 1;
        self.ends.completed += 1;
    }

    /// A request in flight failed (error, time-out, broken response).
    #[inline]
    pub fn finish_failed(&mut self) {
        self.in_flight -= 1;
        self.ends.failed += 1;
    }

    /// A request in flight was refused by the server unprocessed (HTTP/2
    /// GOAWAY with a lower last stream id, or REFUSED_STREAM): it waits to be
    /// sent again on a connection whose serial is above `after` (0: any),
    /// keeping its intended time `t` (latency still counts from it). Kept in
    /// intended-time order, oldest first.
    pub fn refuse(&mut self, t: Instant, after: u64) {
        self.in_flight -= 1;
        let at = self.refused.partition_point(|x| x.0 <= t);
        self.refused.insert(at, (t, after));
    }

    /// The oldest refused request connection `serial` may send, now held by
    /// the caller to be sent again (counted `retried`); none once the run is
    /// stopping. (A scan of a handful: refusals are rare and few wait.)
    #[inline]
    pub fn take_refused(&mut self, serial: u64) -> Option<Instant> {
        if self.stopping || self.refused.is_empty() {
            return None;
        }
        let i = self.refused.iter().position(|r| r.1 < serial)?;
        let (t, _) = self.refused.remove(i)?;
        self.held += 1;
        self.retried += 1;
        Some(t)
    }

    /// Refused requests no connection up to serial `newest` may send: they
    /// wait for a new connection.
    pub fn refused_for_new(&self, newest: u64) -> usize {
        self.refused.iter().filter(|r| r.1 >= newest).count()
    }

    /// A held request failed before it was written (its connect failed).
    pub fn fail_held(&mut self) {
        self.held -= 1;
        self.ends.failed += 1;
    }

    /// Open loop: the connect made for the oldest waiting request failed; it
    /// fails with it. False when none was waiting.
    pub fn fail_pending(&mut self) -> bool {
        if self.pending.pop_front().is_none() {
            return false;
        }
        self.ends.failed += 1;
        true
    }

    /// A held request will not be written (the run is stopping).
    pub fn drop_held(&mut self) {
        self.held -= 1;
        self.ends.not_sent += 1;
    }

    /// A request in flight is given up before the end (the run is stopping and
    /// it waits for something that will not come, e.g. a redirect's connect).
    pub fn abandon_in_flight(&mut self) {
        self.in_flight -= 1;
        self.ends.in_flight_at_end += 1;
    }

    /// The run stops at `now`: nothing more is taken or released. Open loop:
    /// send times due before the stop (and the deadline) that the worker had
    /// not released yet (it was late: a host stall at the very end) were
    /// planned all the same: scheduled, and never sent.
    pub fn begin_stop(&mut self, now: Instant) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        self.budget = Some(0);
        // (`advance` already stops at the deadline.)
        for _ in 0..u32::MAX {
            match self.next_due {
                Some(t) if t < now => {
                    self.ends.scheduled += 1;
                    self.ends.not_sent += 1;
                    self.advance();
                }
                _ => break,
            }
        }
        self.next_due = None;
    }

    /// Whether everything scheduled has ended and nothing more will be
    /// (closed loop: the budget is spent; open loop: the schedule is over).
    pub fn done(&self) -> bool {
        let idle = self.held == 0
            && self.in_flight == 0
            && self.pending.is_empty()
            && self.refused.is_empty();
        if self.pacer.is_some() {
            idle && self.next_due.is_none()
        } else {
            idle && self.budget == Some(0) && self.reserved == 0
        }
    }

    /// Ends the ledger: held, pending and refused requests were not sent
    /// (a refused one was not processed), requests in flight are in flight
    /// at the end; adds what it counted to `counters`.
    pub fn close_into(&mut self, counters: &mut Counters) {
        self.ends.not_sent += self.held + self.pending.len() as u64 + self.refused.len() as u64;
        self.ends.in_flight_at_end += self.in_flight;
        self.held = 0;
        self.pending.clear();
        self.refused.clear();
        self.in_flight = 0;
        counters.scheduled += self.ends.scheduled;
        counters.not_sent += self.ends.not_sent;
        counters.in_flight_at_end += self.ends.in_flight_at_end;
        counters.retried += self.retried;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacer::Pacer;
    use crate::plan::Arrival;
    use redline_stats::rng::SplitMix64;
    use std::time::Duration;

    /// Where a simulated connection's request is.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Slot {
        Free,
        /// Its intended time; whether it is a refused request sent again.
        Held(Instant, bool),
        InFlight(Instant, bool),
    }

    /// A driver without sockets: `slots` connections doing random things to
    /// their requests the way the HTTP/1 and HTTP/2 drivers do, in a random
    /// order, with time advancing by random steps.
    struct Sim {
        rng: SplitMix64,
        ledger: Ledger,
        slots: Vec<Slot>,
        quota: Vec<u64>,
        now: Instant,
        k: Option<u64>,
        /// Refusals put back, taken again, and refused a second time (failed).
        refusals: u64,
        retakes: u64,
        second_refusals: u64,
        /// Each slot's connection serial, the newest given, and a model of
        /// the refused requests (intended time, serial to exceed).
        serial: Vec<u64>,
        newest: u64,
        model: Vec<(Instant, u64)>,
    }

    impl Sim {
        fn pick(&mut self, n: u64) -> u64 {
            self.rng.next_u64() % n.max(1)
        }

        /// The ledger's counts agree with the simulated connections and
        /// nothing is lost: scheduled = ended + still held/pending/in flight.
        fn check(&self, step: u32) {
            let l = &self.ledger;
            let held = self
                .slots
                .iter()
                .filter(|s| matches!(s, Slot::Held(..)))
                .count() as u64;
            let flying = self
                .slots
                .iter()
                .filter(|s| matches!(s, Slot::InFlight(..)))
                .count() as u64;
            assert_eq!(l.held(), held, "held, step {step}");
            assert_eq!(l.in_flight(), flying, "in flight, step {step}");
            assert_eq!(l.reserved, self.quota.iter().sum::<u64>(), "reserved");
            let e = l.ends();
            assert_eq!(
                e.scheduled,
                e.ended() + l.held() + l.pending() as u64 + l.in_flight() + l.refused() as u64,
                "conservation, step {step}"
            );
            assert_eq!(l.retried(), self.retakes, "retried, step {step}");
            assert_eq!(
                self.refusals,
                self.retakes + l.refused() as u64,
                "refused requests are taken again or still wait, step {step}"
            );
            assert!(
                l.refused
                    .iter()
                    .zip(l.refused.iter().skip(1))
                    .all(|(a, b)| a.0 <= b.0),
                "refused requests wait oldest first"
            );
            assert_eq!(
                l.refused_for_new(self.newest),
                self.model.iter().filter(|r| r.1 >= self.newest).count(),
                "waiting for a new connection, step {step}"
            );
        }

        fn step(&mut self) {
            let i = self.pick(self.slots.len() as u64) as usize;
            let op = self.pick(14);
            let now = self.now;
            match (op, self.slots[i]) {
                // Take (closed loop), from the connection's quota first.
                (0 | 1, Slot::Free) if !self.ledger.open_loop() => {
                    let took = if self.quota[i] > 0 {
                        self.ledger.take_reserved(&mut self.quota[i])
                    } else if let (Some(k), Some(_)) = (self.k, self.ledger.budget()) {
                        let (q, first) = self.ledger.reserve(k, 1);
                        self.quota[i] = q;
                        first == 1
                    } else {
                        self.ledger.take()
                    };
                    if took {
                        self.slots[i] = Slot::Held(now, false);
                    }
                }
                // Open loop: a free connection takes the oldest waiting request.
                (0 | 1, Slot::Free) => {
                    if let Some(t) = self.ledger.dequeue() {
                        self.slots[i] = Slot::Held(t, false);
                    }
                }
                // Send.
                (2 | 3, Slot::Held(t, again)) => {
                    self.ledger.sent();
                    self.slots[i] = Slot::InFlight(t, again);
                }
                // Connect failed.
                (4, Slot::Held(..)) => {
                    self.ledger.fail_held();
                    self.slots[i] = Slot::Free;
                }
                (4, Slot::Free) if self.ledger.open_loop() => {
                    self.ledger.fail_pending();
                }
                // Answer.
                (5 | 6, Slot::InFlight(..)) => {
                    self.ledger.finish_completed();
                    self.slots[i] = Slot::Free;
                }
                // Failure or time-out.
                (7, Slot::InFlight(..)) => {
                    self.ledger.finish_failed();
                    self.slots[i] = Slot::Free;
                }
                // The connection closes: its unused quota goes back.
                (8, Slot::Free) => {
                    let q = std::mem::take(&mut self.quota[i]);
                    self.ledger.give_back(q);
                }
                // Time passes; the pacer releases what is due.
                (9 | 10, _) => {
                    let step = self.pick(3_000);
                    self.now += Duration::from_micros(step);
                    while let Some(t) = self.ledger.release_due(self.now) {
                        let free = self.slots.iter().position(|s| *s == Slot::Free);
                        match free {
                            Some(j) if self.pick(2) == 0 => self.slots[j] = Slot::Held(t, false),
                            _ => self.ledger.enqueue(t),
                        }
                    }
                }
                // Stop: held requests are dropped, some in flight given up.
                (11, _) if self.pick(8) == 0 => {
                    self.ledger.begin_stop(now);
                    for s in &mut self.slots {
                        match *s {
                            Slot::Held(..) if self.rng.next_u64().is_multiple_of(2) => {
                                self.ledger.drop_held();
                                *s = Slot::Free;
                            }
                            Slot::InFlight(..) if self.rng.next_u64().is_multiple_of(4) => {
                                self.ledger.abandon_in_flight();
                                *s = Slot::Free;
                            }
                            _ => {}
                        }
                    }
                }
                // The server refuses it unprocessed (GOAWAY, REFUSED_STREAM):
                // back to be sent again, or failed when it was already a retry.
                // GOAWAY: only a connection opened since may send it again;
                // REFUSED_STREAM: any.
                (12, Slot::InFlight(t, again)) => {
                    if again {
                        self.ledger.finish_failed();
                        self.second_refusals += 1;
                    } else {
                        let after = if self.pick(2) == 0 { self.newest } else { 0 };
                        self.ledger.refuse(t, after);
                        let at = self.model.partition_point(|r| r.0 <= t);
                        self.model.insert(at, (t, after));
                        self.refusals += 1;
                    }
                    self.slots[i] = Slot::Free;
                }
                // A free stream takes the oldest refused request its
                // connection may send, before new work; or its connection
                // is replaced by a new one.
                (13, Slot::Free) => {
                    let serial = self.serial[i];
                    let want = self.model.iter().position(|r| r.1 < serial);
                    let got = self.ledger.take_refused(serial);
                    if self.ledger.stopping() {
                        assert_eq!(got, None, "nothing is re-sent once stopping");
                    } else {
                        assert_eq!(got, want.map(|j| self.model[j].0), "the oldest it may send");
                    }
                    match got {
                        Some(t) => {
                            self.model.remove(want.unwrap());
                            self.retakes += 1;
                            self.slots[i] = Slot::Held(t, true);
                        }
                        None if self.pick(2) == 0 => {
                            self.newest += 1;
                            self.serial[i] = self.newest;
                        }
                        None => {}
                    }
                }
                _ => {}
            }
        }
    }

    /// Under random interleavings of take, send, answer, failure, time-out,
    /// release, give-back and stop, over 10,000 seeds, every scheduled
    /// request ends exactly once and no count goes below zero (an underflow
    /// panics in this debug build).
    #[test]
    fn every_scheduled_request_ends_exactly_once() {
        let start = Instant::now();
        let mut stopped = 0;
        let mut done = 0;
        let (mut retakes, mut second_refusals, mut refused_at_end) = (0, 0, 0);
        for seed in 0..10_000u64 {
            let mut rng = SplitMix64(seed);
            let open = rng.next_u64().is_multiple_of(2);
            let budget = match rng.next_u64() % 3 {
                0 => None,
                n => Some(rng.next_u64() % (40 * n)),
            };
            let k = (!open && rng.next_u64().is_multiple_of(3)).then(|| 1 + rng.next_u64() % 5);
            let deadline = (rng.next_u64().is_multiple_of(2))
                .then(|| start + Duration::from_micros(rng.next_u64() % 60_000));
            let pacer = open.then(|| {
                let arrival = if seed % 4 < 2 {
                    Arrival::Constant
                } else {
                    Arrival::Poisson
                };
                let rate = 200.0 + (rng.next_u64() % 5_000) as f64;
                Pacer::new(arrival, rate, 0, 1, budget, None, seed)
            });
            let slots = 1 + (rng.next_u64() % 8) as usize;
            let mut sim = Sim {
                ledger: Ledger::new(if open { None } else { budget }, pacer, start, deadline),
                rng,
                slots: vec![Slot::Free; slots],
                quota: vec![0; slots],
                now: start,
                k,
                refusals: 0,
                retakes: 0,
                second_refusals: 0,
                serial: (1..=slots as u64).collect(),
                newest: slots as u64,
                model: Vec::new(),
            };
            let steps = 50 + sim.pick(400) as u32;
            for step in 0..steps {
                sim.step();
                if deadline.is_some_and(|d| sim.now >= d) {
                    sim.ledger.begin_stop(sim.now);
                }
                sim.check(step);
            }
            stopped += u32::from(sim.ledger.stopping());
            done += u32::from(sim.ledger.done());
            let mut counters = Counters::default();
            let before = sim.ledger.ends();
            let waiting = sim.ledger.refused() as u64;
            refused_at_end += waiting;
            retakes += sim.retakes;
            second_refusals += sim.second_refusals;
            sim.ledger.close_into(&mut counters);
            assert_eq!(counters.retried, sim.retakes, "seed {seed}: retried");
            assert!(
                counters.not_sent >= waiting,
                "seed {seed}: refused → not sent"
            );
            let e = sim.ledger.ends();
            assert_eq!(e.scheduled, before.scheduled, "closing schedules nothing");
            assert_eq!(e.ended(), e.scheduled, "seed {seed}: {e:?}");
            assert_eq!(
                before.completed + before.failed + counters.not_sent + counters.in_flight_at_end,
                counters.scheduled,
                "seed {seed}: the recorder's sum"
            );
            if let (false, Some(b), None) = (open, budget, k) {
                assert!(e.scheduled <= b, "seed {seed}: more than the budget");
            }
        }
        // The interleavings reached both ends: stopped runs and finished ones.
        assert!(stopped > 1_000 && done > 100, "{stopped} {done}");
        // Refusals were taken again, refused twice, and left waiting at the end.
        assert!(
            retakes > 1_000 && second_refusals > 100 && refused_at_end > 100,
            "{retakes} {second_refusals} {refused_at_end}"
        );
    }

    /// A refused request waits with its intended time, oldest first, for a
    /// connection newer than the refusal; is taken again before the stop
    /// (counted retried) and after it is not sent; the run is not done while
    /// one waits.
    #[test]
    fn refused_requests_wait_oldest_first_and_end_once() {
        let t = Instant::now();
        let later = t + Duration::from_millis(5);
        let mut l = Ledger::new(Some(3), None, t, None);
        assert_eq!(l.take_n(3), 3);
        for _ in 0..3 {
            l.sent();
        }
        // After GOAWAY on connection 1 (the newest, 2): only a later one.
        l.refuse(later, 2);
        l.refuse(t, 2);
        l.finish_completed();
        assert_eq!((l.refused(), l.in_flight(), l.held()), (2, 0, 0));
        assert_eq!(l.refused_for_new(2), 2);
        assert!(!l.done());
        assert_eq!(
            l.take_refused(2),
            None,
            "not on a connection as old as the refusal"
        );
        assert_eq!(l.take_refused(3), Some(t), "oldest first");
        l.sent();
        l.finish_completed();
        l.begin_stop(later);
        assert_eq!(l.take_refused(4), None, "nothing is re-sent once stopping");
        let mut c = Counters::default();
        l.close_into(&mut c);
        assert_eq!(
            (c.scheduled, c.retried, c.not_sent, c.in_flight_at_end),
            (3, 1, 1, 0)
        );
        assert_eq!(l.ends().completed, 2);
    }

    /// A closed-loop budget with `--requests-per-conn`: blocks come back when
    /// a connection ends early, and the run is done only when all are used.
    #[test]
    fn reserved_blocks_go_back_to_the_budget() {
        let t = Instant::now();
        let mut l = Ledger::new(Some(5), None, t, None);
        let (mut q, first) = l.reserve(3, 1);
        assert_eq!((q, first), (2, 1));
        assert_eq!(l.budget(), Some(2));
        assert!(l.take_reserved(&mut q));
        l.sent();
        l.finish_completed();
        l.fail_held();
        l.give_back(q);
        assert_eq!(l.budget(), Some(3));
        assert!(!l.done());
        assert_eq!(l.take_n(10), 3);
        for _ in 0..3 {
            l.sent();
            l.finish_failed();
        }
        assert!(l.done());
        let mut c = Counters::default();
        l.close_into(&mut c);
        assert_eq!((c.scheduled, c.not_sent, c.in_flight_at_end), (5, 0, 0));
    }

    /// Open loop: sends due before the stop but never released are
    /// scheduled and not sent; none at or after the deadline is scheduled.
    #[test]
    fn a_late_stop_counts_unreleased_sends() {
        let t = Instant::now();
        let p = Pacer::new(Arrival::Constant, 1000.0, 0, 1, None, None, 1);
        let mut l = Ledger::new(None, Some(p), t, Some(t + Duration::from_millis(10)));
        assert_eq!(l.release_due(t + Duration::from_micros(1500)), Some(t));
        l.enqueue(t);
        assert!(l.release_due(t + Duration::from_micros(1500)).is_some());
        assert!(l.release_due(t + Duration::from_micros(1500)).is_none());
        l.begin_stop(t + Duration::from_millis(50));
        assert!(l.release_due(t + Duration::from_millis(60)).is_none());
        let mut c = Counters::default();
        l.close_into(&mut c);
        // 10 send times before the deadline: 2 released (one held, one queued), 8 late.
        assert_eq!((c.scheduled, c.not_sent), (10, 10));
    }
}
