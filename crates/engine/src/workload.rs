//! The workload seam: what a driver sends next and what an answer means,
//! independent of the protocol that carries it. A driver (the HTTP/1 worker,
//! the HTTP/2 streams) owns sockets and the request ledger; it asks the
//! workload which request a virtual user sends, and tells it how the request
//! ended. Three workloads exist:
//!
//! - a fixed request: the plan's prebuilt bytes ([`fixed_request`]), nothing
//!   to do with the answer;
//! - a scenario: [`ScenarioLoad`], one per worker, with the per-request
//!   numbers, the round-robin/data-row counters, the random source for
//!   weights and think times, and, in open loop, the journeys;
//! - redirect following ([`crate::redirect`]): the hop's request from the
//!   answer (shared by both drivers).
//!
//! Every request a workload sends has a protocol-neutral spec
//! ([`crate::plan::RequestSpec`]: the plan's, `Scenario::spec`,
//! `redirect::hop_spec`) that a driver encodes in its own protocol.
//!
//! Open-loop sessions ("journeys"): with `--rate` and a scenario in session
//! mode, each arrival of the schedule is a new virtual user that walks the
//! steps once. Step `k` is *intended* at the journey's intended start plus
//! the think times drawn before it, so its latency (intended → answer)
//! includes any wait on earlier steps: a server that stalls once shows in
//! every later step of the journeys it held (coordinated omission corrected
//! for dependent requests); service time (sent → answer) stays per step.

use crate::h1::Capture;
use crate::plan::Plan;
use crate::scenario::{Mode, Scenario, Vu};
use redline_stats::rng::SplitMix64;
use redline_stats::{Journeys, RequestStats, Timing};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether a plan's scenario runs as open-loop journeys.
pub fn journeys(plan: &Plan) -> bool {
    plan.scenario
        .as_ref()
        .is_some_and(|s| s.mode == Mode::Session)
        && matches!(plan.load, crate::plan::Load::Open { .. })
}

/// A journey in progress: when it was meant to start and the think time
/// drawn so far (the next step is intended at `start + thought`).
#[derive(Debug, Clone, Copy)]
pub struct Journey {
    /// The arrival's intended time.
    pub start: Instant,
    /// Think times drawn before the next step.
    pub thought: Duration,
}

impl Journey {
    /// When the next step is meant to be sent.
    pub fn next_intended(&self) -> Instant {
        self.start + self.thought
    }
}

/// How a request ended, as the workload needs it.
pub enum Ended<'a> {
    /// A complete response.
    Answer {
        /// Its status.
        status: u16,
        /// When it was intended, sent, began and ended.
        timing: Timing,
        /// What of it was kept (headers, body) for cookies, extraction, checks.
        capture: Option<&'a Capture>,
    },
    /// No response (error, time-out, connect failure).
    Failed,
}

/// What the virtual user does after a request ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Then {
    /// Closed loop: the next request after this think time (none: at once).
    Next(Option<Duration>),
    /// Open loop: the journey's next step, after this think time, intended at `intended`.
    Step {
        /// The think time.
        think: Duration,
        /// The step's intended send time.
        intended: Instant,
    },
    /// Open loop: the journey is over (completed or abandoned); the slot is free.
    Over,
    /// Open loop, not a journey (round-robin or weighted): the slot is free.
    Free,
}

/// A worker's scenario workload: choices, per-request numbers, think times
/// and (open loop, session mode) journeys.
pub struct ScenarioLoad {
    /// The compiled scenario.
    pub scenario: Arc<Scenario>,
    /// Numbers per named request.
    pub stats: Vec<RequestStats>,
    round_robin: u64,
    rows: u64,
    /// How far the row counter (and journey ids) advance: the number of workers.
    stride: u64,
    /// Think times and random choices.
    pub rng: SplitMix64,
    open_loop: bool,
    /// Open-loop sessions: journeys instead of paced single requests.
    journeys_on: bool,
    next_id: u64,
    journeys: Journeys,
}

impl ScenarioLoad {
    /// Worker `index` of `threads`; `open_loop`: a `--rate` run.
    pub fn new(
        scenario: Arc<Scenario>,
        index: usize,
        threads: usize,
        seed: u64,
        open_loop: bool,
    ) -> ScenarioLoad {
        ScenarioLoad {
            stats: scenario.new_stats(),
            round_robin: index as u64,
            rows: index as u64,
            stride: threads.max(1) as u64,
            rng: SplitMix64(seed ^ (index as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D)),
            open_loop,
            journeys_on: open_loop && scenario.mode == Mode::Session,
            next_id: index as u64,
            journeys: Journeys::default(),
            scenario,
        }
    }

    /// Whether arrivals are journeys (open loop, session mode).
    pub fn journeys_on(&self) -> bool {
        self.journeys_on
    }

    /// The request `vu` sends next (chosen once, kept until it ends).
    pub fn next(&mut self, vu: &mut Vu) -> usize {
        if let Some(r) = vu.chosen {
            return r;
        }
        let r = self.scenario.choose(
            vu,
            &mut self.round_robin,
            &mut self.rows,
            self.stride,
            &mut self.rng,
        );
        vu.chosen = Some(r);
        r
    }

    /// Request `r` was written.
    pub fn sent(&mut self, r: usize) {
        self.stats[r].sent += 1;
    }

    /// An arrival released by the schedule.
    pub fn arrived(&mut self) {
        if self.journeys_on {
            self.journeys.arrived += 1;
        }
    }

    /// Open loop: a new journey starts on `vu` (a fresh virtual user: its own
    /// id, data row, empty cookie jar), meant to start at `intended`.
    pub fn begin_journey(&mut self, vu: &mut Vu, intended: Instant) {
        let id = self.next_id;
        self.next_id += self.stride;
        // The connection stays where it is open to.
        let target = vu.target;
        *vu = self.scenario.new_vu(id);
        vu.target = target;
        vu.journey = Some(Journey {
            start: intended,
            thought: Duration::ZERO,
        });
        self.journeys.started += 1;
    }

    /// Open loop: an arrival's connect failed before its first step was sent.
    pub fn journey_failed_to_start(&mut self) {
        if self.journeys_on {
            self.journeys.started += 1;
            self.abandon(Abandon::Error);
        }
    }

    /// Open loop: the journey on `vu` cannot go on (the run stops).
    pub fn stop_journey(&mut self, vu: &mut Vu) {
        if vu.journey.take().is_some() {
            self.abandon(Abandon::Stop);
        }
    }

    /// The run ended with `vu`'s journey still going: a step in flight, or not.
    pub fn end_journey_at_end(&mut self, vu: &mut Vu, in_flight: bool) {
        if vu.journey.take().is_some() {
            if in_flight {
                self.journeys.in_flight_at_end += 1;
            } else {
                self.abandon(Abandon::Stop);
            }
        }
    }

    fn abandon(&mut self, why: Abandon) {
        let j = &mut self.journeys;
        j.abandoned += 1;
        match why {
            Abandon::Check => j.abandoned_check += 1,
            Abandon::Error => j.abandoned_error += 1,
            Abandon::Stop => j.abandoned_stop += 1,
        }
    }

    /// `vu`'s request ended: records its numbers, runs cookies, extraction and
    /// checks on an answer, and says what the user does next.
    pub fn ended(&mut self, vu: &mut Vu, how: Ended<'_>) -> Then {
        let Some(r) = vu.chosen.take() else {
            return if self.open_loop {
                Then::Free
            } else {
                Then::Next(None)
            };
        };
        let checks_ok = match how {
            Ended::Failed => {
                self.stats[r].errors += 1;
                None
            }
            Ended::Answer {
                status,
                timing,
                capture,
            } => {
                let st = &mut self.stats[r];
                st.completed += 1;
                if status >= 400 {
                    st.bad_status += 1;
                }
                let latency = timing.done.saturating_duration_since(timing.intended);
                st.latency.record(latency);
                st.waiting
                    .record(timing.first_byte.saturating_duration_since(timing.sent));
                st.transfer
                    .record(timing.done.saturating_duration_since(timing.first_byte));
                Some(
                    self.scenario
                        .on_response(r, vu, status, latency, capture, st),
                )
            }
        };
        let think = self.scenario.requests[r].think;
        if !self.open_loop {
            return Then::Next(think.map(|t| t.sample(&mut self.rng)));
        }
        let Some(mut j) = vu.journey.take() else {
            return Then::Free;
        };
        match checks_ok {
            None => {
                self.abandon(Abandon::Error);
                Then::Over
            }
            Some(false) => {
                self.abandon(Abandon::Check);
                Then::Over
            }
            // The last step answered (the session wrapped to its first step).
            Some(true) if vu.step == 0 => {
                self.journeys.completed += 1;
                let now = Instant::now();
                self.journeys
                    .duration
                    .record(now.saturating_duration_since(j.start));
                Then::Over
            }
            Some(true) => {
                let d = think.map_or(Duration::ZERO, |t| t.sample(&mut self.rng));
                j.thought += d;
                vu.journey = Some(j);
                Then::Step {
                    think: d,
                    intended: j.next_intended(),
                }
            }
        }
    }

    /// The per-request numbers and, for journeys, how they ended
    /// (`not_started`: arrivals never started).
    pub fn finish(mut self) -> (Vec<RequestStats>, Option<Journeys>) {
        if !self.journeys_on {
            return (self.stats, None);
        }
        let j = &mut self.journeys;
        j.not_started = j.arrived.saturating_sub(j.started);
        (self.stats, Some(self.journeys))
    }
}

enum Abandon {
    Check,
    Error,
    Stop,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{file, CompileArgs};
    use std::path::Path;

    fn session(steps: usize, think: &str) -> Arc<Scenario> {
        let mut text = format!("mode = \"session\"\nthink = \"{think}\"\n");
        for k in 0..steps {
            text.push_str(&format!(
                "[[step]]\nname = \"s{k}\"\npath = \"/{k}\"\ncheck = {{ status = 200 }}\n"
            ));
        }
        let f = file::parse(&text, "t.toml").unwrap();
        let s = Scenario::compile(CompileArgs {
            path: Path::new("t.toml"),
            file: &f,
            text: &text,
            base: "http://127.0.0.1:9",
            allow_paths: false,
            tls: &crate::tls::TlsArgs::default(),
            http10: false,
            cli_headers: &[],
            timeout: Duration::from_secs(1),
        })
        .unwrap();
        Arc::new(s)
    }

    fn answer(status: u16, at: Instant) -> Ended<'static> {
        Ended::Answer {
            status,
            timing: Timing {
                intended: at,
                sent: at,
                first_byte: at,
                done: at,
            },
            capture: None,
        }
    }

    #[test]
    fn a_journeys_steps_are_intended_at_its_start_plus_the_think_times_before_them() {
        let s = session(3, "100ms");
        let mut load = ScenarioLoad::new(s.clone(), 0, 1, 7, true);
        let mut vu = s.new_vu(0);
        let t0 = Instant::now();
        load.arrived();
        load.begin_journey(&mut vu, t0);
        assert_eq!(load.next(&mut vu), 0);
        // However late the answer, the next step is meant for start + think.
        let then = load.ended(&mut vu, answer(200, t0 + Duration::from_secs(5)));
        assert_eq!(
            then,
            Then::Step {
                think: Duration::from_millis(100),
                intended: t0 + Duration::from_millis(100)
            }
        );
        assert_eq!(load.next(&mut vu), 1);
        let then = load.ended(&mut vu, answer(200, t0));
        assert!(
            matches!(then, Then::Step { intended, .. } if intended == t0 + Duration::from_millis(200))
        );
        assert_eq!(load.next(&mut vu), 2);
        assert_eq!(load.ended(&mut vu, answer(200, t0)), Then::Over);
        let (_, j) = load.finish();
        let j = j.unwrap();
        assert_eq!((j.arrived, j.started, j.completed), (1, 1, 1));
        assert_eq!(j.duration.count(), 1);
    }

    /// Random arrivals, answers, failed checks, failures, stops and run
    /// ends over many seeded runs: every journey ends exactly once.
    #[test]
    fn every_journey_ends_exactly_once_under_random_interleavings() {
        let s = session(3, "0s");
        for seed in 0..500u64 {
            let mut rng = SplitMix64(seed);
            let mut load = ScenarioLoad::new(s.clone(), 0, 1, seed, true);
            let mut slots: Vec<Vu> = (0..4).map(|i| s.new_vu(i)).collect();
            let mut in_flight = [false; 4];
            let now = Instant::now();
            for _ in 0..200 {
                let i = rng.below(4) as usize;
                let vu = &mut slots[i];
                match rng.below(6) {
                    0 => {
                        load.arrived();
                        if vu.journey.is_none() {
                            load.begin_journey(vu, now);
                            load.next(vu);
                            in_flight[i] = true;
                        } // else: waits for a slot (never started)
                    }
                    1 | 2 if in_flight[i] => {
                        let status = if rng.below(10) == 0 { 500 } else { 200 };
                        in_flight[i] = false;
                        if let Then::Step { .. } = load.ended(vu, answer(status, now)) {
                            load.next(vu);
                            in_flight[i] = true;
                        }
                    }
                    3 if in_flight[i] => {
                        in_flight[i] = false;
                        load.ended(vu, Ended::Failed);
                    }
                    4 if !in_flight[i] => load.stop_journey(vu),
                    5 if vu.journey.is_none() => load.journey_failed_to_start(),
                    _ => {}
                }
            }
            for (i, vu) in slots.iter_mut().enumerate() {
                load.end_journey_at_end(vu, in_flight[i]);
            }
            let (_, j) = load.finish();
            let j = j.unwrap();
            assert_eq!(
                j.started,
                j.completed + j.abandoned + j.in_flight_at_end,
                "seed {seed}: {j:?}"
            );
            assert_eq!(
                j.abandoned,
                j.abandoned_check + j.abandoned_error + j.abandoned_stop
            );
        }
    }
}
