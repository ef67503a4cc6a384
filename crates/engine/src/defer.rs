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
//! windows). The window is an eighth of that time in flight, at most
//! [`MAX_WINDOW`]. Before it sleeps the worker looks once (a poll that does
//! not sleep): answers already there are handled at once, so a client that
//! is itself the bottleneck never sleeps with work waiting.

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
/// queue then never runs dry while answers wait for the window.
const QUEUE_WINDOWS: f64 = 8.0;
/// How often the answer rate is measured.
const BUCKET: Duration = Duration::from_millis(10);

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
            self.window = plan_window(rate, in_flight);
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

/// The window for an answer rate (per second) and requests in flight: an
/// eighth of their mean time in flight, at most [`MAX_WINDOW`], if it
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
    /// waiting (the window would be an eighth of 100 µs and catch one).
    #[test]
    fn a_short_queue_gets_none() {
        assert_eq!(plan_window(100_000.0, 10), None);
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
}
