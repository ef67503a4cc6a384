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

    /// A request in flight was refused unprocessed and its caller keeps it
    /// to send again itself (an HTTP/2 journey's step, which waits with its
    /// user for a stream elsewhere): held again. See [`Ledger::count_retry`].
    pub fn refuse_held(&mut self) {
        self.in_flight -= 1;
        self.held += 1;
    }

    /// A refused request its caller kept (held after [`Ledger::refuse_held`],
    /// or still in flight: a redirect hop or a request to another host, which
    /// its stream sends again at once) goes again: counted `retried`, as
    /// [`Ledger::take_refused`] counts.
    pub fn count_retry(&mut self) {
        self.retried += 1;
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
mod tests;
