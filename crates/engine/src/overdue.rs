//! `--abort-on-fail` during a run: how many scheduled requests are still
//! unanswered although due at least a given age before, at the end of each
//! worker's last finished second. A lower bound made from the schedule and the
//! finished seconds alone (no per-request state is read from the workers):
//!
//! - Open loop: a replica of the worker's pacer counts the sends due by
//!   `T − age`; all of them that have not finished by `T` (completed or
//!   failed, from the seconds) are overdue: `due(T − age) − finished(T)`.
//! - Closed loop: each slot (connection; HTTP/2: stream) holds one request at
//!   a time, whose intended time is when the slot became free. The requests
//!   held at `T − age` that did not finish by `T` are overdue: `held − finished
//!   in (T − age, T]`, with `held` the slots active then (`--stages`: the lower
//!   level around that instant), at most the budget left (`-n`). Scenario
//!   runs with think time (a slot may hold no request) and `-n` with
//!   `--requests-per-conn` (requests reserved by a connection) give 0.
//! - Open-loop sessions (journeys): a journey's later steps follow answers
//!   and think times, not the pacer, so the schedule cannot say when they
//!   are due. The worker counts them itself, a few times a second, from its
//!   slots: steps in flight or waiting for a connection whose intended time
//!   is at least `age` old, next steps as old whose user still thinks after
//!   a late answer, and arrivals waiting for a slot; the count is taken as
//!   reported. The core counts with [`journey_overdue`] from its slots
//!   (`Core::publish_journey_overdue`, `core/lifecycle.rs`), whatever the
//!   protocol.
//!
//! Whole seconds are the clock (`T` is a second boundary; `finished` at
//! `T − age` is read at the second boundary before it), so every estimate errs
//! low: a run is never aborted for requests that were answered.

use crate::ledger::Ledger;
use crate::pacer::{Levels, Pacer};
use redline_stats::SeriesPoint;
use std::time::{Duration, Instant};

/// Open-loop sessions: for each of `ages`, the journeys' steps unanswered
/// that long at `now`: the arrivals waiting in `ledger` for a connection,
/// and each journey's pending step (`intended`: the intended time of a step
/// in flight, waiting for a connection or a stream, or next after a think
/// time), once that time is at least the age old. Exact at `now`, not
/// estimated: an answered step is no longer pending. What a driver
/// publishes a few times a second (`Control::publish_journey_overdue`):
/// O(journeys × ages).
pub fn journey_overdue(
    now: Instant,
    ages: &[Duration],
    ledger: &Ledger,
    intended: impl IntoIterator<Item = Instant>,
) -> Vec<u64> {
    let cutoffs: Vec<Option<Instant>> = ages.iter().map(|a| now.checked_sub(*a)).collect();
    let mut counts: Vec<u64> = cutoffs
        .iter()
        .map(|c| c.map_or(0, |c| ledger.pending_due_by(c)))
        .collect();
    for t in intended {
        for (n, c) in counts.iter_mut().zip(&cutoffs) {
            if c.is_some_and(|c| t <= c) {
                *n += 1;
            }
        }
    }
    counts
}

/// How a worker's requests are scheduled, as the estimate needs it.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Open loop: the worker's pacer (a fresh copy, started at the run's start).
    Open(Pacer),
    /// Closed loop: slots (connections × streams), the budget (`-n` share),
    /// and the level over time (`--stages`, in slots).
    Closed {
        /// Slots without `--stages`.
        slots: u64,
        /// Requests this worker may send (None: until the deadline).
        budget: Option<u64>,
        /// `--stages`: active slots over time.
        levels: Option<Levels>,
    },
    /// Open-loop sessions: what the worker reported ([`Overdue::journeys`]).
    Journeys,
    /// Not estimated: always 0.
    Unknown,
}

#[derive(Debug)]
struct Worker {
    schedule: Schedule,
    /// Open loop, per age: the pacer replica, its next send, sends counted.
    due: Vec<(Pacer, Option<Duration>, u64)>,
    /// Finished requests (completed + failed) by the end of each second.
    finished: Vec<u64>,
    /// Journeys: the worker's last count per age.
    reported: Vec<u64>,
}

/// The per-worker estimates for a set of ages.
#[derive(Debug)]
pub struct Overdue {
    ages: Vec<Duration>,
    workers: Vec<Worker>,
}

impl Overdue {
    /// An estimate for each of `ages`, over the workers' schedules.
    pub fn new(ages: &[Duration], schedules: Vec<Schedule>) -> Overdue {
        let workers = schedules
            .into_iter()
            .map(|schedule| {
                let due = match &schedule {
                    Schedule::Open(p) => ages
                        .iter()
                        .map(|_| {
                            let mut p = p.clone();
                            let next = p.next_send();
                            (p, next, 0)
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                Worker {
                    schedule,
                    due,
                    finished: Vec::new(),
                    reported: Vec::new(),
                }
            })
            .collect();
        Overdue {
            ages: ages.to_vec(),
            workers,
        }
    }

    /// Worker `i` handed over these finished seconds (in order).
    pub fn seconds(&mut self, i: usize, points: &[SeriesPoint]) {
        let Some(w) = self.workers.get_mut(i) else {
            return;
        };
        for p in points {
            // Seconds come in order; a gap (a second with nothing) repeats the total.
            let before = w.finished.last().copied().unwrap_or(0);
            while w.finished.len() < p.t as usize {
                w.finished.push(before);
            }
            if w.finished.len() == p.t as usize {
                w.finished.push(before + p.requests + p.errors);
            }
        }
    }

    /// Worker `i` (open-loop sessions) counted these overdue steps, one per
    /// age in the order given to [`Overdue::new`].
    pub fn journeys(&mut self, i: usize, counts: &[u64]) {
        if let Some(w) = self.workers.get_mut(i) {
            w.reported.clear();
            w.reported.extend_from_slice(counts);
        }
    }

    /// Overdue requests for each age (in the order given to [`Overdue::new`]).
    pub fn counts(&mut self) -> Vec<u64> {
        let mut out = vec![0u64; self.ages.len()];
        for w in &mut self.workers {
            if let Schedule::Journeys = w.schedule {
                for (o, n) in out.iter_mut().zip(&w.reported) {
                    *o += n;
                }
                continue;
            }
            let secs = w.finished.len();
            if secs == 0 {
                continue;
            }
            let t = secs as f64;
            let done = w.finished[secs - 1];
            // Finished by the second boundary at or before `at` seconds.
            let done_by = |at: f64| -> u64 {
                let k = at.floor().max(0.0) as usize;
                if k == 0 {
                    0
                } else {
                    w.finished[(k - 1).min(secs - 1)]
                }
            };
            for (k, age) in self.ages.iter().enumerate() {
                let at = t - age.as_secs_f64();
                if at <= 0.0 {
                    continue;
                }
                out[k] += match &w.schedule {
                    Schedule::Open(_) => {
                        let (p, next, n) = &mut w.due[k];
                        let until = Duration::from_secs_f64(at);
                        // Bounded: each send is counted once over the run.
                        while let Some(d) = *next {
                            if d > until {
                                break;
                            }
                            *n += 1;
                            *next = p.next_send();
                        }
                        n.saturating_sub(done)
                    }
                    Schedule::Closed {
                        slots,
                        budget,
                        levels,
                    } => {
                        let active = match levels {
                            Some(l) => l.active_at(at).min(l.active_at((at - 0.25).max(0.0))),
                            None => *slots,
                        };
                        let held = match budget {
                            Some(b) => active.min(b.saturating_sub(done)),
                            None => active,
                        };
                        held.saturating_sub(done - done_by(at))
                    }
                    Schedule::Journeys | Schedule::Unknown => 0,
                };
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Arrival;
    use redline_stats::Hist;

    fn sec(t: u32, n: u64) -> SeriesPoint {
        SeriesPoint::new(t, n, 0, 0, &Hist::with_sigfig(2))
    }

    #[test]
    fn open_loop_counts_due_sends_not_finished() {
        // 100 req/s; the server answered 100 in the first second, then none.
        let p = Pacer::new(
            Arrival::Constant,
            100.0,
            0,
            1,
            None,
            Some(Duration::from_secs(20)),
            1,
        );
        let ages = [Duration::from_millis(200), Duration::from_secs(30)];
        let mut o = Overdue::new(&ages, vec![Schedule::Open(p)]);
        assert_eq!(o.counts(), vec![0, 0]);
        o.seconds(0, &[sec(0, 100)]);
        assert_eq!(o.counts(), vec![0, 0], "T = 1 s: 80 due by 0.8 s, 100 done");
        o.seconds(0, &[sec(1, 0), sec(2, 0)]);
        // T = 3 s: due by 2.8 s ~ 280, done 100.
        let c = o.counts();
        assert!((178..=181).contains(&c[0]), "{c:?}");
        assert_eq!(c[1], 0, "nothing is 30 s old");
    }

    #[test]
    fn closed_loop_counts_slots_held_through_the_window() {
        let sched = Schedule::Closed {
            slots: 4,
            budget: None,
            levels: None,
        };
        let ages = [Duration::from_millis(200)];
        let mut o = Overdue::new(&ages, vec![sched.clone()]);
        o.seconds(0, &[sec(0, 500), sec(1, 480)]);
        assert_eq!(o.counts(), vec![0], "answers all the time");
        // Silent from second 2 on: the 4 slots hold requests older than 200 ms.
        o.seconds(0, &[sec(2, 0)]);
        assert_eq!(o.counts(), vec![4]);
        // -n: the budget left caps what can be held.
        let mut o = Overdue::new(
            &ages,
            vec![Schedule::Closed {
                slots: 4,
                budget: Some(982),
                levels: None,
            }],
        );
        o.seconds(0, &[sec(0, 500), sec(1, 480), sec(2, 0)]);
        assert_eq!(o.counts(), vec![2]);
        let mut o = Overdue::new(&ages, vec![Schedule::Unknown]);
        o.journeys(0, &[7]);
        o.seconds(0, &[sec(0, 1), sec(1, 0), sec(2, 0)]);
        assert_eq!(o.counts(), vec![0]);
    }

    /// Arrivals waiting in the ledger and the journeys' pending steps count
    /// once their intended time is at least the age old; younger ones do not.
    #[test]
    fn journey_steps_count_once_old_enough() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let now = t0 + s(10);
        let p = Pacer::new(Arrival::Constant, 1.0, 0, 1, None, None, 1);
        let mut ledger = Ledger::new(None, Some(p), t0, None);
        // Two arrivals wait for a connection: intended at 1 s and 9.5 s.
        for at in [t0 + s(1), t0 + Duration::from_millis(9500)] {
            assert!(ledger.release_due(at).is_some());
            ledger.enqueue(at);
        }
        let ages = [Duration::from_millis(200), s(5), s(3600)];
        // Steps pending since 2 s, 8 s, exactly 9.8 s (200 ms ago) and 9.9 s.
        let steps = [2000, 8000, 9800, 9900].map(|ms| t0 + Duration::from_millis(ms));
        assert_eq!(journey_overdue(now, &ages, &ledger, steps), vec![5, 2, 0]);
        assert_eq!(
            journey_overdue(now, &ages, &ledger, []),
            vec![2, 1, 0],
            "the arrivals alone"
        );
        assert!(journey_overdue(now, &[], &ledger, steps).is_empty());
    }

    #[test]
    fn journeys_count_what_their_workers_reported() {
        let ages = [Duration::from_millis(200), Duration::from_secs(2)];
        let mut o = Overdue::new(
            &ages,
            vec![Schedule::Journeys, Schedule::Journeys, Schedule::Unknown],
        );
        assert_eq!(o.counts(), vec![0, 0], "nothing reported yet");
        o.journeys(0, &[5, 1]);
        o.journeys(1, &[3, 0]);
        // Not before a finished second, not from the schedule: as reported.
        assert_eq!(o.counts(), vec![8, 1]);
        o.seconds(0, &[sec(0, 10)]);
        o.journeys(1, &[0, 0]);
        assert_eq!(
            o.counts(),
            vec![5, 1],
            "the latest report replaces the last"
        );
        o.journeys(9, &[100, 100]);
        assert_eq!(o.counts(), vec![5, 1], "no such worker");
    }
}
