//! The HTTP/1 driver: one worker thread with its own poller and
//! connections, moving bytes for the protocol-free core ([`Core`], every
//! load mode written once): the core decides what each slot sends and when;
//! this driver connects, writes, reads and reports what each slot's
//! [`H1Session`] (the protocol seam's sans-IO HTTP/1.1 session) says.
//!
//! The hot path per request is: submit the prebuilt request (a shared
//! buffer, not a copy), write it from there, read the response into the
//! worker's shared buffer, let the session parse it (with the worker's one
//! head memo), record into the worker's own histograms, and submit the next
//! request straight away. No lock, channel or shared counter is touched per
//! request (the ledger's counts are plain integers in the worker). Sockets
//! are registered once (edge-triggered, read and write interest), so a
//! request costs no `epoll_ctl`.
//!
//! This file holds the event loop and its wait; `worker/link.rs` the core's
//! seam ([`crate::core::Link`]), `worker/conns.rs` the connection slots and
//! time-out FIFOs, `worker/transport.rs` connects, TLS, writes and reads.

mod conns;
mod link;
mod transport;

use crate::core::spec::{WorkerResult, WorkerSpec};
use crate::core::Core;
use crate::h1::HeadMemo;
use crate::plan::Plan;
use crate::session::H1Request;
use crate::sys::{self, Events};
use crate::timer::{PreciseTimer, Spin};
use conns::{Conn, Fifo, NIL};
use mio::{Poll, Token, Waker};
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::io::ErrorKind as IoKind;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sys::io_msg;

const WAKE: Token = Token(usize::MAX - 1);
const TIMER: Token = Token(usize::MAX - 2);
const READ_BUF: usize = 64 * 1024;

/// The HTTP/1 driver's state: sockets, sessions, buffers, time-outs, timers.
pub(crate) struct H1Link {
    poll: Poll,
    conns: Vec<Conn>,
    buf: Box<[u8]>,
    /// The last plain response head parsed, to skip scanning its repeats
    /// (one for all the worker's sessions).
    memo: HeadMemo,
    /// The plan's request as the sessions take it: kept alive, and asking to close.
    request: H1Request,
    request_close: H1Request,
    /// Time-out FIFOs of requests in flight and of connects.
    request_timeouts: Fifo,
    connect_timeouts: Fifo,
    /// Poll-before-sleep state (see [`H1Link::wait`]).
    spin: Spin,
    timer: Option<PreciseTimer>,
    timer_armed: Option<Instant>,
    /// Open loop: how long after a send time the worker may wake (see `poll_timeout`).
    batch: Duration,
}

/// Creates the worker's poller and waker (the waker lets Ctrl-C interrupt a poll).
pub fn make_poll() -> std::io::Result<(Poll, Arc<Waker>)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
    Ok((poll, waker))
}

/// Runs one worker to completion on the current thread.
pub fn run_worker(plan: &Plan, spec: WorkerSpec, poll: Poll) -> WorkerResult {
    let open_loop = spec.pacer.is_some();
    let slots = spec.connections.min(u32::MAX as u64 - 2) as usize;
    let now = Instant::now();
    // Batch sends only when they come closer than 100 µs apart (above 10,000
    // req/s per worker); slower schedules are served on time.
    let batch = match &spec.pacer {
        Some(p) if p.interval() < Duration::from_micros(100) => Duration::from_micros(100),
        _ => Duration::ZERO,
    };
    let timer = if open_loop {
        PreciseTimer::new(&poll, TIMER)
    } else {
        None
    };
    let mut link = H1Link {
        poll,
        conns: (0..slots).map(|_| Conn::new(now)).collect(),
        buf: vec![0u8; READ_BUF].into_boxed_slice(),
        memo: HeadMemo::new(),
        request: H1Request {
            wire: bytes::Bytes::copy_from_slice(&plan.request),
            head: plan.head_request,
        },
        request_close: H1Request {
            wire: bytes::Bytes::copy_from_slice(&plan.request_close),
            head: plan.head_request,
        },
        request_timeouts: Fifo {
            head: NIL,
            tail: NIL,
        },
        connect_timeouts: Fifo {
            head: NIL,
            tail: NIL,
        },
        spin: Spin::new(),
        timer,
        timer_armed: None,
        batch,
    };
    let mut core = Core::new(plan, spec, slots);
    link.run(&mut core);
    core.finish(&link)
}

impl H1Link {
    /// The event loop: a pass of the core's control loop, then the socket
    /// events until the next thing is due.
    fn run(&mut self, core: &mut Core<'_>) {
        let mut events = Events::with_capacity(1024);
        core.start();
        loop {
            let now = Instant::now();
            if core.tick(self, now) {
                break;
            }
            let timeout = self.poll_timeout(core, now);
            if let Err(e) = self.wait(core, &mut events, timeout) {
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
                        core.release(self, now);
                    }
                }
                match Token(ev.token()) {
                    WAKE => {}
                    TIMER => {
                        if let Some(t) = &self.timer {
                            t.drain();
                        }
                        self.timer_armed = None;
                    }
                    Token(i) => {
                        let i = i as u32;
                        if (i as usize) >= self.conns.len() {
                            continue;
                        }
                        use crate::core::ConnState;
                        match self.conns[i as usize].state {
                            ConnState::Connecting => self.on_connect_event(core, i),
                            ConnState::Handshaking => self.drive_handshake(core, i),
                            ConnState::Writing => {
                                if ev.is_writable() || ev.is_error() {
                                    self.write_more(core, i);
                                }
                                if self.conns[i as usize].state == ConnState::Reading
                                    && (ev.is_readable() || ev.is_read_closed())
                                {
                                    self.on_readable(core, i, ev.is_read_closed() || ev.is_error());
                                }
                            }
                            ConnState::Reading | ConnState::Idle => {
                                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                                    self.on_readable(core, i, ev.is_read_closed() || ev.is_error());
                                }
                            }
                            ConnState::Closed => {}
                        }
                    }
                }
            }
        }
        // Close what is left.
        for c in &mut self.conns {
            if let Some(s) = c.sock.take() {
                let _ = self.poll.registry().deregister(&mut { s });
            }
        }
    }

    /// Waits for events. With requests in flight it first looks a few times
    /// without sleeping: on a fast server the answer is often a microsecond
    /// away, and a thread that sleeps for it costs the server a wake-up of this
    /// CPU (an inter-processor interrupt, on a virtual machine an exit to the
    /// host) and itself a trip through the scheduler. Looks that keep finding
    /// nothing (a slow server) switch the looking off for a while, so an idle
    /// or slow run does not pay for it.
    fn wait(
        &mut self,
        core: &Core<'_>,
        events: &mut Events,
        timeout: Option<Duration>,
    ) -> std::io::Result<()> {
        if core.ledger.in_flight() > 0 && timeout != Some(Duration::ZERO) && self.spin.armed() {
            for _ in 0..self.spin.polls {
                sys::wait(self.poll.as_raw_fd(), events, Some(Duration::ZERO))?;
                if !events.is_empty() {
                    self.spin.hit();
                    return Ok(());
                }
            }
            self.spin.miss();
        }
        sys::wait(self.poll.as_raw_fd(), events, timeout)
    }

    /// How long the poll may sleep: until the core's next wake, the first
    /// time-out, or the schedule's next send time (timed by the timerfd).
    fn poll_timeout(&mut self, core: &Core<'_>, now: Instant) -> Option<Duration> {
        let mut next = core.next_wake(now);
        if next <= now {
            return Some(Duration::ZERO);
        }
        if self.request_timeouts.head != NIL {
            next = next.min(self.conns[self.request_timeouts.head as usize].deadline);
        }
        if self.connect_timeouts.head != NIL {
            next = next.min(self.conns[self.connect_timeouts.head as usize].deadline);
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
