//! Closed-loop deferred answers, for both drivers (HTTP/1.1 and HTTP/2 over
//! TCP, and QUIC on the worker's UDP socket)
//! ([`Defer`]): when the server is the bottleneck, the worker sleeps on a
//! short timer instead of on its poller, so the server's answers wait in
//! their sockets (stamped on arrival by the kernel) and one wake-up of this
//! thread collects several.
//!
//! Why: a thread asleep on its poller is woken by the server's every write
//! that finds it idle, and on a virtual machine that wake-up is an
//! inter-processor interrupt the *server's* CPU pays (an exit to the host).
//! Against nginx saturated on one core (bench/run.sh scenario 7, h2c, 8
//! connections × 10 streams) nginx woke redline 0.355 times per request and
//! h2load 0.197 times, and those wake-ups were 10.5 % of nginx's CPU under
//! redline against 6.6 % under h2load (`perf record` of nginx's worker, in
//! `sock_def_readable`): the difference was most of the gap in requests per
//! second between the two clients (docs/ARCHITECTURE.md, "HTTP/2").
//!
//! When: a closed loop (the open loop defers by its own schedule,
//! `ioloop::Pacing::defer`) whose reads can carry the kernel's stamps (TCP or
//! QUIC to the target alone: the same conditions as the open loop's; a
//! QUIC datagram is stamped by itself, `mux/udp.rs`), once the last
//! 10 ms showed both that a window collects answers enough (the answer
//! rate times the window is at least [`MIN_BATCH`]) and that the server
//! holds a queue the window does not drain (the answers' mean time in
//! flight, by Little's law in flight / rate, is at least [`QUEUE_WINDOWS`]
//! windows). The window is a third of that time in flight, at most
//! [`MAX_WINDOW`]: two thirds of the requests stay queued at the server
//! while answers wait (an eighth, before 2026-11-29: against nginx at
//! 90,000 answers a second on 64 connections, a third took 9-10 % less of
//! the client's CPU per request at the same req/s; docs/benchmarks.md). Before it sleeps the worker looks once (a poll that does
//! not sleep): answers already there are handled at once, so a client that
//! is itself the bottleneck never sleeps with work waiting.
//!
//! Deferring must cost the server no answers. Against a server that queues
//! (the case it is for) it costs none: the queue keeps the server busy
//! while answers wait. Against one that is slow without queueing (each
//! answer a fixed time after its request, e.g. a backend's wait) every
//! request would go out half a window later on average, up to a seventh
//! fewer answers. So every [`PROBE_EVERY`] buckets one bucket runs the
//! other way (not deferring while deferring is chosen, and the reverse),
//! and its answer rate decides: deferring stops when a bucket without it
//! answered more than [`PROBE_MARGIN`] faster than the buckets with it, and
//! comes back when a bucket with it answers as fast as those without.

use crate::timer::PreciseTimer;
use mio::{Poll, Token};
use std::time::{Duration, Instant};

/// The poller's token of the deferral timer (its events are ignored: the
/// worker sleeps on the timer's descriptor itself).
const TOKEN: Token = Token(usize::MAX - 3);
/// The longest window: 200 µs, as the open loop's multiplexed send window.
const MAX_WINDOW: Duration = Duration::from_micros(200);
/// The fewest answers a window must collect on average for deferring to
/// pay: two. One timed wake-up of this thread costs it about what one
/// wake-up by the poller does (a context switch and two system calls
/// against one), but it costs the server nothing, so two answers a
/// window already halve this thread's wake-ups and spare the server all of
/// its own. (Four left deferral off whenever a loaded host held nginx
/// under 20,000 answers a second.)
const MIN_BATCH: f64 = 2.0;
/// How many windows the answers' time in flight must span: the server's
/// queue then never runs dry while answers wait for the window (three:
/// two thirds stay queued; eight spent 9-10 % more of the client's CPU
/// per request on bench/run.sh's scenario 1 for the same req/s, and two
/// no less than three).
const QUEUE_WINDOWS: f64 = 3.0;
/// How often the answer rate is measured.
const BUCKET: Duration = Duration::from_millis(10);
/// Every this many buckets (160 ms) one bucket is a probe, run the other
/// way.
const PROBE_EVERY: u32 = 16;
/// How much faster a probe without deferring must answer for deferring to
/// stop (a probe right after deferring also reads the answers the last
/// window held, up to 2 % of a bucket's at most: the margin is above
/// that).
const PROBE_MARGIN: f64 = 0.04;

/// The deferral state of one worker (see the top of this file).
pub(crate) struct Defer {
    /// The run allows it (closed loop, stampable reads) and a timer exists.
    timer: Option<PreciseTimer>,
    /// Answers since `since`.
    answers: u64,
    since: Instant,
    /// The window the last bucket's measure allows (None: do not defer).
    window: Option<Duration>,
    /// Deferring happened at least once (the run record says answers were
    /// stamped).
    pub(crate) used: bool,
    /// Deferring costs no answers (the latest probe said so).
    free: bool,
    /// Buckets until the next probe (0: this bucket is one).
    until_probe: u32,
    /// The answer rate of the latest buckets run the chosen way
    /// (exponentially weighted; 0: none yet).
    chosen_rate: f64,
}

impl Defer {
    /// A driver's wait (`ioloop::Driver::wait`) with deferral: when a
    /// window is due, one look without sleeping and, with nothing there, a
    /// sleep on the timer while answers wait in their sockets, then one
    /// more look; else the `sleeper`'s wait on `poll`.
    pub(crate) fn wait(
        &mut self,
        poll: &Poll,
        sleeper: &mut crate::ioloop::Sleeper,
        in_flight: u64,
        events: &mut crate::sys::Events,
        timeout: Option<Duration>,
    ) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let Some(w) = self.window(Instant::now(), in_flight, timeout) else {
            return sleeper.wait(poll, in_flight, events, timeout);
        };
        let fd = poll.as_raw_fd();
        crate::sys::wait(fd, events, Some(Duration::ZERO))?;
        if events.is_empty() {
            self.sleep(w)?;
            crate::sys::wait(fd, events, Some(Duration::ZERO))?;
        }
        Ok(())
    }

    /// The deferral of a worker; `possible`: a closed loop whose reads can
    /// carry the kernel's arrival stamps.
    pub(crate) fn new(poll: &Poll, possible: bool, now: Instant) -> Defer {
        Defer {
            timer: if possible {
                PreciseTimer::new(poll, TOKEN)
            } else {
                None
            },
            answers: 0,
            since: now,
            window: None,
            used: false,
            free: true,
            // The first probe early: a slow server that does not queue
            // loses answers to deferring only until then.
            until_probe: 3,
            chosen_rate: 0.0,
        }
    }

    /// Reads must take the kernel's arrival stamps (answers may wait).
    pub(crate) fn stamps(&self) -> bool {
        self.timer.is_some()
    }

    /// Deferring now: a read shorter than the buffer drained its socket,
    /// and the answers that come next wait for the window anyway (no read
    /// just to hear EAGAIN).
    pub(crate) fn active(&self) -> bool {
        self.window.is_some()
    }

    /// An answer came.
    #[inline]
    pub(crate) fn answered(&mut self) {
        self.answers += 1;
    }

    /// The window to sleep through answers for, if the worker should defer
    /// now: `in_flight` requests out, `timeout` the loop's own limit.
    pub(crate) fn window(
        &mut self,
        now: Instant,
        in_flight: u64,
        timeout: Option<Duration>,
    ) -> Option<Duration> {
        self.timer.as_ref()?;
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= BUCKET {
            let rate = self.answers as f64 / elapsed.as_secs_f64();
            self.judge(rate);
            // A probe bucket runs the other way.
            let defer = self.free != (self.until_probe == 0);
            self.window = if defer {
                plan_window(rate, in_flight)
            } else {
                None
            };
            self.answers = 0;
            self.since = now;
        }
        let w = self.window?;
        if in_flight == 0 {
            return None; // nothing to wait for but the loop's own time-out
        }
        match timeout {
            Some(t) if t < w => None,
            _ => Some(w),
        }
    }

    /// A bucket ended with `rate` answers a second: a probe's rate
    /// against the chosen way's decides whether deferring is free; the
    /// next probe is counted down.
    fn judge(&mut self, rate: f64) {
        if self.until_probe == 0 {
            if self.chosen_rate > 0.0 {
                let ratio = rate / self.chosen_rate;
                let was = self.free;
                self.free = if was {
                    ratio <= 1.0 + PROBE_MARGIN
                } else {
                    ratio >= 1.0 - PROBE_MARGIN
                };
                if self.free != was {
                    // The probe ran the way chosen from now on.
                    self.chosen_rate = rate;
                }
            }
            self.until_probe = PROBE_EVERY;
        } else {
            self.chosen_rate = if self.chosen_rate > 0.0 {
                0.5 * self.chosen_rate + 0.5 * rate
            } else {
                rate
            };
            self.until_probe -= 1;
        }
    }

    /// Sleeps for `w` on the timer (answers wait in their sockets).
    pub(crate) fn sleep(&mut self, w: Duration) -> std::io::Result<()> {
        if let Some(t) = &self.timer {
            self.used = true;
            t.arm(w);
            crate::sys::sleep_on(t.fd(), Some(w * 2))?;
        }
        Ok(())
    }
}

/// The window for an answer rate (per second) and requests in flight: a
/// third of their mean time in flight, at most [`MAX_WINDOW`], if it
/// collects at least [`MIN_BATCH`] answers; else None.
fn plan_window(rate: f64, in_flight: u64) -> Option<Duration> {
    if rate <= 0.0 || in_flight == 0 {
        return None;
    }
    let in_flight_s = in_flight as f64 / rate;
    let w = (in_flight_s / QUEUE_WINDOWS).min(MAX_WINDOW.as_secs_f64());
    (rate * w >= MIN_BATCH).then(|| Duration::from_secs_f64(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scenario 7's shape (80 streams, nginx at 55,000 answers a second,
    /// 1.45 ms in flight): a window of 182 µs, about 10 answers each.
    #[test]
    fn a_saturated_server_with_a_deep_queue_gets_a_window() {
        let w = plan_window(55_000.0, 80).expect("a window");
        assert!(w > Duration::from_micros(150) && w <= MAX_WINDOW, "{w:?}");
    }

    /// Slow answers: a window would catch under two, so the worker
    /// sleeps on its poller as before.
    #[test]
    fn a_slow_server_gets_none() {
        assert_eq!(plan_window(5_000.0, 80), None);
        assert!(plan_window(15_000.0, 80).is_some());
        assert_eq!(plan_window(0.0, 80), None);
    }

    /// Few requests out on a fast server: the queue is too short to leave
    /// waiting (the window would be a third of 50 µs and catch under two).
    #[test]
    fn a_short_queue_gets_none() {
        assert_eq!(plan_window(100_000.0, 5), None);
        assert!(plan_window(100_000.0, 10).is_some());
        assert_eq!(plan_window(100_000.0, 0), None);
    }

    /// The window never exceeds 200 µs, however long answers take.
    #[test]
    fn the_window_is_capped() {
        assert_eq!(plan_window(50_000.0, 10_000), Some(MAX_WINDOW));
    }

    /// No timer (an open loop, or reads that cannot be stamped): never.
    #[test]
    fn not_possible_never_defers() {
        let poll = Poll::new().unwrap();
        let t0 = Instant::now();
        let mut d = Defer::new(&poll, false, t0);
        for _ in 0..10_000 {
            d.answered();
        }
        assert!(!d.stamps());
        assert_eq!(d.window(t0 + BUCKET, 80, None), None);
    }

    /// The rate is measured per bucket; a window shorter than the loop's
    /// own time-out is kept, a longer one gives way to it.
    #[test]
    fn the_window_follows_the_measured_rate() {
        let poll = Poll::new().unwrap();
        let t0 = Instant::now();
        let mut d = Defer::new(&poll, true, t0);
        if !d.stamps() {
            return; // no timerfd here
        }
        assert_eq!(d.window(t0, 80, None), None, "nothing measured yet");
        for _ in 0..550 {
            d.answered();
        }
        let w = d.window(t0 + BUCKET, 80, None).expect("55,000 a second");
        assert!(w > Duration::from_micros(150), "{w:?}");
        assert_eq!(d.window(t0 + BUCKET, 80, Some(Duration::ZERO)), None);
        assert_eq!(d.window(t0 + BUCKET, 0, None), None, "nothing in flight");
        assert_eq!(
            d.window(t0 + BUCKET, 80, Some(Duration::from_millis(5))),
            Some(w)
        );
        // The next bucket saw 20 answers: 2,000 a second, too slow.
        for _ in 0..20 {
            d.answered();
        }
        assert_eq!(d.window(t0 + 2 * BUCKET, 80, None), None);
    }

    /// A closed loop against a simulated server, `conns` connections for
    /// 2 s of made-up time, the client spending 5 µs per answer: how many
    /// answers, and how many times the client slept. `fifo`: a server
    /// that queues (one answer per `service`, in order); else each answer
    /// comes `service` after its request, however many are out. `defer`:
    /// with deferral (else never).
    fn simulate(conns: usize, service: Duration, fifo: bool, defer: bool) -> (u64, u64) {
        let poll = Poll::new().unwrap();
        let t0 = Instant::now();
        let mut d = Defer::new(&poll, defer, t0);
        let per_answer = Duration::from_micros(5);
        let end = t0 + Duration::from_secs(2);
        let mut free_at = t0; // the FIFO server's next free moment
        let answer = |sent: Instant, free_at: &mut Instant| {
            if fifo {
                *free_at = (*free_at).max(sent) + service;
                *free_at
            } else {
                sent + service
            }
        };
        let mut now = t0;
        let mut due: Vec<Instant> = (0..conns).map(|_| answer(t0, &mut free_at)).collect();
        let (mut answers, mut sleeps) = (0u64, 0u64);
        while now < end {
            let ready = due.iter().any(|t| *t <= now);
            match d.window(now, conns as u64, None) {
                Some(w) if !ready => {
                    now += w; // asleep on the timer while answers wait
                    sleeps += 1;
                }
                None if !ready => {
                    now = *due.iter().min().unwrap(); // woken by the first answer
                    sleeps += 1;
                }
                _ => {}
            }
            for t in due.iter_mut() {
                if *t <= now {
                    now += per_answer;
                    answers += 1;
                    d.answered();
                    *t = answer(now, &mut free_at);
                }
            }
        }
        (answers, sleeps)
    }

    /// A server that queues (nginx saturated: 11 µs an answer, 64
    /// connections): deferring costs no answers and saves most wake-ups.
    #[test]
    fn deferring_against_a_queueing_server_costs_no_answers() {
        let service = Duration::from_micros(11);
        let (plain, plain_sleeps) = simulate(64, service, true, false);
        let (deferred, sleeps) = simulate(64, service, true, true);
        if sleeps == plain_sleeps && deferred == plain {
            return; // no timerfd here: never defers
        }
        assert!(
            deferred as f64 >= 0.99 * plain as f64,
            "{deferred} vs {plain}"
        );
        assert!(
            sleeps * 3 < plain_sleeps,
            "{sleeps} vs {plain_sleeps} wake-ups"
        );
    }

    /// A server slow without queueing (each answer 500 µs after its
    /// request): a third of the time in flight would delay each request
    /// by a sixth on average (13 % fewer answers without the probes); the
    /// probes turn deferring off, so the loop loses under 2 % of them.
    #[test]
    fn deferring_against_a_slow_server_that_does_not_queue_stops() {
        let service = Duration::from_micros(500);
        let (plain, _) = simulate(64, service, false, false);
        let (deferred, _) = simulate(64, service, false, true);
        assert!(
            deferred as f64 >= 0.98 * plain as f64,
            "{deferred} vs {plain}"
        );
    }
}
