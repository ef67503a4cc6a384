//! What every mio driver's event loop shares ([`Sleeper`]): how long to
//! sleep (the core's next wake, the driver's first time-out, the schedule's
//! next send time, which the timerfd times below poll's millisecond grain)
//! and the poll-before-sleep wait; [`run`], the one event loop (a pass of
//! the core's control loop, then the socket events until the next thing is
//! due) every driver runs through [`Driver`], whose poller, sleeper and
//! closed-loop deferral ([`Defer`]) are made once for both drivers
//! ([`waiting`]). Opening a TCP connection is `tcp.rs`.

use crate::core::{Core, Link};
use crate::defer::Defer;
use crate::sys::{self, Events};
use crate::timer::{PreciseTimer, Spin};
use mio::{Poll, Token};
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::io::ErrorKind as IoKind;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The poller's token of the timerfd.
pub(crate) const TIMER: Token = Token(usize::MAX - 2);
/// The poller's token of the waker (Ctrl-C interrupts a poll).
pub(crate) const WAKE: Token = Token(usize::MAX - 1);

/// How an open loop paces its sends, the same for every driver (and for the
/// run's scheduler-lag warning): sends closer than `window` apart go out
/// together (one wake-up and one write serve several; the lag this adds is
/// at most `window`), and with `defer`, answers wait in their sockets until
/// the window's wake-up, their arrival read from the kernel's stamps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Pacing {
    pub(crate) window: Duration,
    pub(crate) defer: bool,
}

/// The window of a schedule whose sends come closer than it apart on
/// HTTP/1: 100 µs.
const WINDOW_H1: Duration = Duration::from_micros(100);
/// The window on a multiplexed connection: a 200 µs window (as h2load's
/// `--rps` timer) halves the writes at 20,000 req/s against 100 µs.
const WINDOW_MUX: Duration = Duration::from_micros(200);
/// The window when answers are deferred: the worker wakes once per window
/// (2,000 times a second) whatever the rate, so the lag p99 stays under
/// 1 ms.
pub(crate) const WINDOW_DEFER: Duration = Duration::from_micros(500);

/// The pacing of a worker whose sends are `interval` apart on average (None:
/// no schedule, a closed loop). Answers are deferred when at least four sends
/// fall in a deferred window and every read can carry the kernel's arrival
/// stamp: TCP (plain or TLS: a TLS read takes the stamp of the last segment
/// it read) or QUIC (each datagram its own stamp, `mux/udp.rs`) to the
/// target alone (no redirects or scenario hosts, whose connections
/// elsewhere are opened as answers come).
pub(crate) fn pacing(plan: &crate::plan::Plan, interval: Option<Duration>) -> Pacing {
    let window = match plan.protocol() {
        crate::plan::Protocol::Http1 => WINDOW_H1,
        _ => WINDOW_MUX,
    };
    match interval {
        Some(i) if stampable(plan) && i * 4 <= WINDOW_DEFER => Pacing {
            window: WINDOW_DEFER,
            defer: true,
        },
        _ => Pacing {
            window,
            defer: false,
        },
    }
}

/// Every read of the run can carry the kernel's arrival stamp, so answers
/// may wait in their sockets: TCP (plain or TLS) or QUIC to the target
/// alone (see
/// [`pacing`]; the HTTP/2 driver's closed loop defers on the same terms,
/// `defer.rs`).
pub(crate) fn stampable(plan: &crate::plan::Plan) -> bool {
    plan.follow.is_none() && plan.scenario.is_none() && cfg!(target_os = "linux")
}

/// A driver's sleeping: the fine timer and the poll-before-sleep state.
pub(crate) struct Sleeper {
    /// Poll-before-sleep state (see [`Sleeper::wait`]).
    spin: Spin,
    timer: Option<PreciseTimer>,
    timer_armed: Option<Instant>,
    /// The timer fired in the last wait.
    rang: bool,
    /// Open loop: how long after a send time the worker may wake (see [`Sleeper::timeout`]).
    batch: Duration,
    /// How overdue a send must be for a pass the timer did not start to
    /// release it (see [`Sleeper::hold`]): the window when it carries three
    /// sends or more, else zero.
    hold: Duration,
    /// Answers may wait for the window's wake-up ([`Pacing::defer`]).
    defer: bool,
    /// The coming wait sleeps through answers until the timer
    /// ([`Sleeper::timeout`] decides, [`Sleeper::wait`] does it).
    sleep_through: bool,
}

impl Sleeper {
    /// The sleeper of a worker (`open_loop`: with a timerfd on `poll`;
    /// `interval`: the schedule's mean gap; `pacing`: from [`pacing`]).
    pub(crate) fn new(
        poll: &Poll,
        open_loop: bool,
        interval: Option<Duration>,
        pacing: Pacing,
    ) -> Sleeper {
        let window = pacing.window;
        // Batch sends only when they come closer than `window` apart;
        // slower schedules are served on time.
        let batch = match interval {
            Some(i) if i < window => window,
            _ => Duration::ZERO,
        };
        // Holding sends for the timer pays when a window carries several:
        // with one or two, the timer's wake-up comes on top of the answers'
        // (6,000 req/s over h2c, 1.2 a window: 187-189 context switches per 100
        // requests held, 147-151 not; docs/benchmarks.md).
        let hold = match interval {
            Some(i) if i * 3 <= window => window,
            _ => Duration::ZERO,
        };
        let timer = if open_loop {
            PreciseTimer::new(poll, TIMER)
        } else {
            None
        };
        Sleeper {
            spin: Spin::new(),
            defer: pacing.defer && timer.is_some(),
            timer,
            timer_armed: None,
            rang: false,
            batch,
            hold,
            sleep_through: false,
        }
    }

    /// Reads must take the kernel's arrival stamps: answers may wait in
    /// their sockets for the window's wake-up.
    pub(crate) fn defers(&self) -> bool {
        self.defer
    }

    /// What the run record says of this worker's pacing: its batch window
    /// (zero: each send on time) and whether answers were deferred.
    pub(crate) fn pacing(&self) -> (Duration, bool) {
        (self.batch, self.defer)
    }

    /// The timer fired (its expiry is not read: arming clears it, see
    /// [`PreciseTimer::arm`]).
    pub(crate) fn fired(&mut self) {
        self.rang = true;
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
        if std::mem::take(&mut self.sleep_through) && timeout != Some(Duration::ZERO) {
            // Answers wait in their sockets (stamped on arrival by the
            // kernel) until the timer's wake-up; then one look collects them
            // all. One wake-up per window however many answers came.
            if let Some(t) = &self.timer {
                sys::sleep_on(t.fd(), timeout)?;
                return sys::wait(poll.as_raw_fd(), events, Some(Duration::ZERO));
            }
        }
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

    /// How overdue a send time must be for the coming pass to release it
    /// ([`Core::hold`]): none when the timer rang (or there is none), else
    /// the batch window when it carries three sends or more. So the sends of
    /// a window go out together at its tick, not one by one as answers wake
    /// the worker (one write per connection and one wake-up serve them
    /// all), and none waits longer than the window.
    pub(crate) fn hold(&mut self) -> Duration {
        if std::mem::take(&mut self.rang) || self.timer.is_none() {
            Duration::ZERO
        } else {
            self.hold
        }
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
            // Due, and released by the coming pass (see `hold`).
            Some(t) if t + core.hold <= now => Some(Duration::ZERO),
            Some(t) if t < now + coarse => {
                // The schedule needs sub-millisecond wake-ups: arm the timerfd
                // (poll's own timeout is millisecond-grained). At high rates a
                // wake-up takes a small batch: waking `batch` after the next send
                // time sends the requests due by then together (see `hold`), so
                // one timer syscall and one poll serve several requests, for at
                // most `batch` of scheduler lag (100-200 µs, well under the 1 ms
                // goal).
                let wake = t + self.batch;
                if let Some(timer) = &self.timer {
                    if self.timer_armed.is_none_or(|a| a > wake) {
                        timer.arm(wake.saturating_duration_since(now));
                        self.timer_armed = Some(wake);
                    }
                    // Deferring: sleep through answers when the timer rings
                    // within two windows (a slow stretch of the schedule
                    // wakes for its answers as a closed loop does).
                    self.sleep_through = self.defer
                        && self
                            .timer_armed
                            .is_some_and(|a| a <= now + 2 * self.batch.max(WINDOW_DEFER));
                    Some(coarse)
                } else {
                    Some(t.saturating_duration_since(now))
                }
            }
            _ => Some(coarse),
        }
    }
}

/// A worker's sleeper and closed-loop deferral, made the same way for
/// every driver: `spec`'s schedule paces the sleeper ([`pacing`]); a closed
/// loop whose reads can carry the kernel's stamps may defer answers
/// (`defer.rs`).
pub(crate) fn waiting(
    poll: &Poll,
    plan: &crate::plan::Plan,
    spec: &crate::core::spec::WorkerSpec,
) -> (Sleeper, Defer) {
    let open_loop = spec.pacer.is_some();
    let interval = spec.pacer.as_ref().map(|p| p.interval());
    let sleeper = Sleeper::new(poll, open_loop, interval, pacing(plan, interval));
    let defer = Defer::new(poll, !open_loop && stampable(plan), Instant::now());
    (sleeper, defer)
}

/// What the event loop asks of a driver besides the core's seam.
pub(crate) trait Driver: Link {
    /// Its poller, its sleeper and its closed-loop deferral (one borrow for
    /// all three).
    fn waiting(&mut self) -> (&Poll, &mut Sleeper, &mut Defer);
    /// Waits for socket events on its poller: closed-loop deferral
    /// ([`Defer::wait`]), else the sleeper's wait ([`Sleeper::wait`]).
    fn wait(
        &mut self,
        in_flight: u64,
        events: &mut Events,
        timeout: Option<Duration>,
    ) -> std::io::Result<()> {
        let (poll, sleeper, defer) = self.waiting();
        defer.wait(poll, sleeper, in_flight, events, timeout)
    }
    /// Its sleeper.
    fn sleeper(&mut self) -> &mut Sleeper {
        self.waiting().1
    }
    /// Reads take the kernel's arrival stamps: answers may wait in their
    /// sockets (the open loop's deferred answers, or the closed loop's).
    fn stamps(&mut self) -> bool {
        let (_, sleeper, defer) = self.waiting();
        sleeper.defers() || defer.stamps()
    }
    /// What the run record says of its pacing: the batch window and
    /// whether answers were deferred (by the schedule or the closed loop).
    fn pacing(&mut self) -> (Duration, bool) {
        let (_, sleeper, defer) = self.waiting();
        let (window, deferred) = sleeper.pacing();
        (window, deferred || defer.used)
    }
    /// Its first time-out (a request's or a connect's).
    fn first_deadline(&self) -> Option<Instant>;
    /// Bytes queued during the pass go out before the worker sleeps.
    fn before_wait(&mut self, _core: &mut Core<'_>) {}
    /// A socket event (`token`: the driver's own).
    fn on_event(&mut self, core: &mut Core<'_>, token: usize, ev: sys::Event);
    /// The run is over: close what is left.
    fn shutdown(&mut self, core: &mut Core<'_>);
}

/// The event loop every driver runs: a pass of the core's control loop
/// (`Core::tick`), then the socket events until the next thing is due.
pub(crate) fn run<D: Driver>(d: &mut D, core: &mut Core<'_>) {
    let mut events = Events::with_capacity(1024);
    core.start();
    loop {
        let now = Instant::now();
        core.hold = d.sleeper().hold();
        if core.tick(d, now) {
            break;
        }
        d.before_wait(core);
        let first = d.first_deadline();
        let timeout = d.sleeper().timeout(core, now, first);
        let in_flight = core.ledger.in_flight();
        if let Err(e) = d.wait(in_flight, &mut events, timeout) {
            if e.kind() != IoKind::Interrupted {
                // The poller itself failed: nothing more can be measured.
                core.rec
                    .error(ErrorKind::Other, Cow::Owned(format!("poll: {e}")), now);
                core.ledger.begin_stop(now);
                core.control.abort(now);
            }
            continue;
        }
        for (n, ev) in events.iter().enumerate() {
            // Open loop: a long batch of events (a thousand connections
            // answering after a server stall) must not hold back the
            // schedule; release what fell due every 8 events (an event
            // costs a read and often a send, 10–15 µs: a check costs ~25 ns).
            if core.open_loop && n % 8 == 7 {
                let now = Instant::now();
                if core.ledger.next_due().is_some_and(|t| t <= now) {
                    core.release(d, now);
                }
            }
            match Token(ev.token()) {
                WAKE => {}
                TIMER => d.sleeper().fired(),
                Token(t) => d.on_event(core, t, ev),
            }
        }
    }
    d.shutdown(core);
}

#[cfg(test)]
mod tests {
    use super::{pacing, Pacing, WINDOW_DEFER, WINDOW_H1, WINDOW_MUX};
    use crate::plan::{Plan, PlanArgs};
    use std::time::Duration;

    fn plan(url: &str, set: impl FnOnce(&mut PlanArgs)) -> Plan {
        let mut a = PlanArgs::new(url);
        a.rate = Some(20_000.0);
        set(&mut a);
        Plan::build(a).expect("a plan")
    }

    /// Answers are deferred only where every read can carry the kernel's
    /// stamp (plain TCP to the target) and a window holds four sends.
    #[test]
    fn answers_are_deferred_only_when_stamps_can_time_them() {
        let fast = Some(Duration::from_micros(50));
        let slow = Some(Duration::from_micros(200));
        let defer = Pacing {
            window: WINDOW_DEFER,
            defer: true,
        };
        let h1 = plan("http://127.0.0.1:9/", |_| {});
        assert_eq!(pacing(&h1, fast), defer);
        assert_eq!(pacing(&h1, Some(WINDOW_DEFER / 4)), defer);
        let h1_on_time = Pacing {
            window: WINDOW_H1,
            defer: false,
        };
        assert_eq!(pacing(&h1, slow), h1_on_time);
        assert_eq!(pacing(&h1, None), h1_on_time);
        let h2c = plan("http://127.0.0.1:9/", |a| a.h2c = true);
        assert_eq!(pacing(&h2c, fast), defer);
        assert_eq!(
            pacing(&h2c, slow),
            Pacing {
                window: WINDOW_MUX,
                defer: false
            }
        );
        // TLS reads are stamped too; redirects may open connections
        // elsewhere as answers come: read as they come.
        let tls = plan("https://127.0.0.1:9/", |a| a.http11 = true);
        assert_eq!(pacing(&tls, fast), defer);
        let follow = plan("http://127.0.0.1:9/", |a| a.follow_redirects = true);
        assert!(!pacing(&follow, fast).defer);
        // QUIC stamps each datagram (`mux/udp.rs`): deferred on the same
        // terms as HTTP/2.
        let h3 = plan("https://127.0.0.1:9/", |a| a.http3 = true);
        assert_eq!(pacing(&h3, fast), defer);
        assert!(!pacing(&h3, slow).defer);
        let h3_follow = plan("https://127.0.0.1:9/", |a| {
            a.http3 = true;
            a.follow_redirects = true;
        });
        assert!(!pacing(&h3_follow, fast).defer);
    }
}
