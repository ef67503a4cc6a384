//! The ledger's unit and property tests: every scheduled request ends
//! exactly once under random interleavings (refusals included).

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
                } else if self.pick(3) == 0 {
                    // A journey's step: its user keeps it (held) and sends
                    // it again from another stream.
                    self.ledger.refuse_held();
                    self.ledger.count_retry();
                    self.refusals += 1;
                    self.retakes += 1;
                    self.slots[i] = Slot::Held(t, true);
                    return;
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
