//! What every mio driver's event loop shares ([`Sleeper`]): how long to
//! sleep (the core's next wake, the driver's first time-out, the schedule's
//! next send time, which the timerfd times below poll's millisecond grain)
//! and the poll-before-sleep wait.

use crate::core::Core;
use crate::sys::{self, Events};
use crate::timer::{PreciseTimer, Spin};
use mio::{Poll, Token};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The poller's token of the timerfd.
pub(crate) const TIMER: Token = Token(usize::MAX - 2);
/// The poller's token of the waker (Ctrl-C interrupts a poll).
pub(crate) const WAKE: Token = Token(usize::MAX - 1);

/// A driver's sleeping: the fine timer and the poll-before-sleep state.
pub(crate) struct Sleeper {
    /// Poll-before-sleep state (see [`Sleeper::wait`]).
    spin: Spin,
    timer: Option<PreciseTimer>,
    timer_armed: Option<Instant>,
    /// Open loop: how long after a send time the worker may wake (see [`Sleeper::timeout`]).
    batch: Duration,
}

impl Sleeper {
    /// The sleeper of a worker (`open_loop`: with a timerfd on `poll`;
    /// `interval`: the schedule's mean gap).
    pub(crate) fn new(poll: &Poll, open_loop: bool, interval: Option<Duration>) -> Sleeper {
        // Batch sends only when they come closer than 100 µs apart (above 10,000
        // req/s per worker); slower schedules are served on time.
        let batch = match interval {
            Some(i) if i < Duration::from_micros(100) => Duration::from_micros(100),
            _ => Duration::ZERO,
        };
        Sleeper {
            spin: Spin::new(),
            timer: if open_loop {
                PreciseTimer::new(poll, TIMER)
            } else {
                None
            },
            timer_armed: None,
            batch,
        }
    }

    /// The timer fired.
    pub(crate) fn fired(&mut self) {
        if let Some(t) = &self.timer {
            t.drain();
        }
        self.timer_armed = None;
    }

    /// Waits for events. With requests in flight it first looks a few times
    /// without sleeping: on a fast server the answer is often a microsecond
    /// away, and a thread that sleeps for it costs the server a wake-up of this
    /// CPU (an inter-processor interrupt, on a virtual machine an exit to the
    /// host) and itself a trip through the scheduler. Looks that keep finding
    /// nothing (a slow server) switch the looking off for a while, so an idle
    /// or slow run does not pay for it.
    pub(crate) fn wait(
        &mut self,
        poll: &Poll,
        in_flight: u64,
        events: &mut Events,
        timeout: Option<Duration>,
    ) -> std::io::Result<()> {
        if in_flight > 0 && timeout != Some(Duration::ZERO) && self.spin.armed() {
            for _ in 0..self.spin.polls {
                sys::wait(poll.as_raw_fd(), events, Some(Duration::ZERO))?;
                if !events.is_empty() {
                    self.spin.hit();
                    return Ok(());
                }
            }
            self.spin.miss();
        }
        sys::wait(poll.as_raw_fd(), events, timeout)
    }

    /// How long the poll may sleep: until the core's next wake, the driver's
    /// first time-out (`first`), or the schedule's next send time (timed by
    /// the timerfd).
    pub(crate) fn timeout(
        &mut self,
        core: &Core<'_>,
        now: Instant,
        first: Option<Instant>,
    ) -> Option<Duration> {
        let mut next = core.next_wake(now);
        if next <= now {
            return Some(Duration::ZERO);
        }
        if let Some(t) = first {
            next = next.min(t);
        }
        let coarse = next.saturating_duration_since(now);
        match core.ledger.next_due() {
            Some(t) if t <= now => Some(Duration::ZERO),
            Some(t) if t < now + coarse => {
                // The schedule needs sub-millisecond wake-ups: arm the timerfd
                // (poll's own timeout is millisecond-grained). At high rates a
                // wake-up takes a small batch: waking `batch` after the next send
                // time sends the requests due by then together, so one timer
                // syscall and one poll serve several requests, for at most
                // `batch` of scheduler lag (100 µs, well under the 1 ms goal).
                let wake = t + self.batch;
                if let Some(timer) = &self.timer {
                    if self.timer_armed.is_none_or(|a| a > wake) {
                        timer.arm(wake.saturating_duration_since(now));
                        self.timer_armed = Some(wake);
                    }
                    Some(coarse)
                } else {
                    Some(t.saturating_duration_since(now))
                }
            }
            _ => Some(coarse),
        }
    }
}
