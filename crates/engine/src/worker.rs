//! The HTTP/1 driver: one worker thread with its own poller, connections,
//! schedule and recorder; its requests are accounted in the shared
//! [`Ledger`] and its stop, drain, stage level and live counts run on the
//! shared [`Control`] tick (the HTTP/2 driver, `h2run`, uses both too).
//!
//! Each connection slot speaks HTTP/1.1 through an [`H1Session`], the
//! protocol seam's sans-IO session (`session/`): the worker submits a
//! request to it, writes what the session has to send, feeds it what it
//! reads and acts on its events (answered, failed). The hot path per
//! request is: submit the prebuilt request (a shared buffer, not a copy),
//! write it from there, read the response into the worker's shared buffer,
//! let the session parse it (with the worker's one head memo), record into
//! the worker's own histograms, and submit the next request straight away.
//! No lock, channel or shared counter is touched per request (the ledger's
//! counts are plain integers in the worker). Sockets are registered once
//! (edge-triggered, read and write interest), so a request costs no
//! `epoll_ctl`.
//!
//! This file holds the worker's state, its event loop, the open-loop release
//! and the stage level; `worker/conns.rs` the connection slots and time-out
//! FIFOs, `worker/transport.rs` connects, TLS, writes and reads,
//! `worker/lifecycle.rs` what a request's end means (complete, fail, redirect,
//! scenario think times, what a slot does next).

mod conns;
mod lifecycle;
mod transport;

use crate::control::Control;
use crate::core::spec::{thread_cpu, WorkerResult, WorkerSpec};
use crate::h1::HeadMemo;
use crate::ledger::Ledger;
use crate::plan::Plan;
use crate::scenario::Vu;
use crate::session::{H1Request, H1Session};
use crate::sys::{self, io_msg, Events};
use crate::timer::{PreciseTimer, Spin};
use crate::workload::ScenarioLoad;
use conns::{Conn, ConnState, Fifo, TimeoutList, NIL};
use mio::{Poll, Token, Waker};
use redline_stats::{ErrorKind, Recorder};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::VecDeque;
use std::io::ErrorKind as IoKind;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAKE: Token = Token(usize::MAX - 1);
const TIMER: Token = Token(usize::MAX - 2);
const READ_BUF: usize = 64 * 1024;
/// Open loop: at most this many connects per pass of the event loop.
const CONNECTS_PER_PASS: u32 = 4;

/// A scenario run's per-worker state: a virtual user per connection slot
/// (closed loop: the slot's user for the whole run; open-loop sessions: the
/// journey the slot walks now) and the protocol-free workload.
struct ScenarioSlots {
    /// Choices, per-request numbers, think times, journeys.
    load: ScenarioLoad,
    /// The virtual user of each connection slot.
    vus: Vec<Vu>,
    /// Virtual users thinking, by wake-up time.
    sleepers: BinaryHeap<Reverse<(Instant, u32)>>,
}

struct Worker<'p> {
    plan: &'p Plan,
    scenario: Option<ScenarioSlots>,
    poll: Poll,
    conns: Vec<Conn>,
    buf: Box<[u8]>,
    /// The last plain response head parsed, to skip scanning its repeats
    /// (one for all the worker's sessions).
    memo: HeadMemo,
    /// The plan's request as the sessions take it: kept alive, and asking to close.
    request: H1Request,
    request_close: H1Request,
    rec: Recorder,
    /// Time-out FIFOs of requests in flight and of connects.
    request_timeouts: Fifo,
    connect_timeouts: Fifo,
    /// Where every request is (budget, held, pending, in flight, ended).
    ledger: Ledger,
    /// Stop, drain, stage level, live counts.
    control: Control,
    open_loop: bool,
    /// Open loop: connected slots without a request.
    idle: Vec<u32>,
    /// Slots without a connection (and, with `--stages`, parked ones).
    free: Vec<u32>,
    /// Slots with a request (or a redirect hop) that need a new connection.
    restart: VecDeque<u32>,
    open: u64,
    connecting: u64,
    /// Open loop: connects still allowed in this pass of the event loop.
    connects_left: u32,
    /// Poll-before-sleep state (see [`Worker::wait`]).
    spin: Spin,
    peak_open: u64,
    last_done: Instant,
    timer: Option<PreciseTimer>,
    timer_armed: Option<Instant>,
    /// Open loop: how long after a send time the worker may wake (see `poll_timeout`).
    batch: Duration,
    want_server: bool,
    /// Closed-loop level control (`--stages`): slots not parked, slots
    /// wanted; parked slots wait in `free`.
    staged: bool,
    active: u64,
    target: u64,
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
    let staged = spec.levels.is_some();
    let slots = spec.connections.min(u32::MAX as u64 - 2) as usize;
    let now = Instant::now();
    let conns = (0..slots)
        .map(|_| Conn {
            sock: None,
            tls: None,
            state: ConnState::Closed,
            session: H1Session::new(1),
            has_request: false,
            intended: now,
            sent: now,
            first_byte: None,
            connect_start: now,
            close_after: false,
            on_conn: 0,
            quota: 0,
            wire: 0,
            deadline: now,
            prev: NIL,
            next: NIL,
            list: TimeoutList::None,
            redir: None,
            away: None,
        })
        .collect();
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
    let conns: Vec<Conn> = conns;
    let sc = plan.scenario.as_ref().map(|s| ScenarioSlots {
        vus: (0..slots as u64)
            .map(|i| s.new_vu(spec.first_vu + i))
            .collect(),
        load: ScenarioLoad::new(s.clone(), spec.index, plan.threads, plan.seed, open_loop),
        sleepers: BinaryHeap::new(),
    });
    let mut w = Worker {
        plan,
        scenario: sc,
        poll,
        conns,
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
        rec: Recorder::new(spec.start),
        request_timeouts: Fifo {
            head: NIL,
            tail: NIL,
        },
        connect_timeouts: Fifo {
            head: NIL,
            tail: NIL,
        },
        open_loop,
        ledger: Ledger::new(
            if open_loop { None } else { spec.budget },
            spec.pacer,
            spec.start,
            spec.deadline,
        ),
        control: Control::new(
            spec.start,
            spec.deadline,
            plan.grace,
            spec.stop,
            spec.live,
            spec.levels,
        ),
        idle: Vec::new(),
        free: (0..slots as u32).rev().collect(),
        restart: VecDeque::new(),
        open: 0,
        connecting: 0,
        connects_left: CONNECTS_PER_PASS,
        spin: Spin::new(),
        peak_open: 0,
        last_done: spec.start,
        timer,
        timer_armed: None,
        batch,
        want_server: true,
        staged,
        active: 0,
        target: slots as u64,
    };
    w.run(spec.start);
    let end = w.control.end(w.last_done);
    // Journeys still going: a step in flight at the end, or stopped.
    if let Some(sc) = w.scenario.as_mut() {
        for (i, vu) in sc.vus.iter_mut().enumerate() {
            let c = &w.conns[i];
            let in_flight = c.has_request
                && (matches!(c.state, ConnState::Writing | ConnState::Reading)
                    || c.redir.is_some());
            sc.load.end_journey_at_end(vu, in_flight);
        }
    }
    // Requests still out when the run ends are counted, never dropped.
    w.ledger.close_into(&mut w.rec.counters);
    w.rec.counters.peak_connections = w.peak_open;
    w.control.publish(&w.rec, w.open, 0);
    let cpu = thread_cpu();
    let (requests, journeys) = w.scenario.map(|s| s.load.finish()).unwrap_or_default();
    WorkerResult {
        recorder: w.rec,
        end,
        cpu_user: cpu.0,
        cpu_sys: cpu.1,
        peak_open: w.peak_open,
        interrupted: w.control.interrupted(),
        requests,
        journeys,
    }
}

impl<'p> Worker<'p> {
    pub(super) fn run(&mut self, start: Instant) {
        let mut events = Events::with_capacity(1024);
        if !self.open_loop {
            // Closed loop: every connection takes its first request (with
            // --stages: as many as the level wants; the rest start parked).
            self.free.clear();
            let first = match self.control.first_level() {
                Some(level) => {
                    self.target = level;
                    self.target.min(self.conns.len() as u64) as u32
                }
                None => self.conns.len() as u32,
            };
            for i in 0..first {
                if self.take_for(i) {
                    self.conns[i as usize].intended = start;
                    self.conns[i as usize].has_request = true;
                    self.restart.push_back(i);
                }
            }
            self.active = first as u64;
            self.free.extend((first..self.conns.len() as u32).rev());
        }
        loop {
            let now = Instant::now();
            if self.control.stop_due(now) {
                self.begin_stop(now);
            }
            self.expire(now);
            self.connects_left = CONNECTS_PER_PASS;
            if self.open_loop {
                self.release(now);
                if self.scenario.is_some() {
                    self.wake_sleepers(now);
                }
            } else {
                if self.scenario.is_some() {
                    self.wake_sleepers(now);
                }
                if let Some(level) = self.control.level_due(now) {
                    self.adjust_level(level, now);
                }
            }
            self.process_restarts(now);
            if self.control.finished(now, &self.ledger) && !self.journeys_thinking() {
                break;
            }
            let published =
                self.control
                    .publish_due(now, &mut self.rec, self.open, self.ledger.in_flight());
            if let (true, Some(sc)) = (published, &self.scenario) {
                self.control.publish_requests(&sc.load.stats);
                if sc.load.journeys_on() && !self.control.journey_ages().is_empty() {
                    self.publish_journey_overdue(now);
                }
            }
            let timeout = self.poll_timeout(now);
            if let Err(e) = self.wait(&mut events, timeout) {
                if e.kind() != IoKind::Interrupted {
                    // The poller itself failed: nothing more can be measured.
                    self.rec
                        .error(ErrorKind::Other, Cow::Owned(format!("poll: {e}")), now);
                    self.ledger.begin_stop(now);
                    self.control.abort(now);
                }
                continue;
            }
            for (n, ev) in events.iter().enumerate() {
                // Open loop: a long batch of events (a thousand connections
                // answering after a server stall) must not hold back the
                // schedule; release what fell due every 8 events (an event
                // costs a read and often a send, 10–15 µs: a check costs ~25 ns).
                if self.open_loop && n % 8 == 7 {
                    let now = Instant::now();
                    if self.ledger.next_due().is_some_and(|t| t <= now) {
                        self.release(now);
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
                        match self.conns[i as usize].state {
                            ConnState::Connecting => self.on_connect_event(i),
                            ConnState::Handshaking => self.drive_handshake(i),
                            ConnState::Writing => {
                                if ev.is_writable() || ev.is_error() {
                                    self.write_more(i);
                                }
                                if self.conns[i as usize].state == ConnState::Reading
                                    && (ev.is_readable() || ev.is_read_closed())
                                {
                                    self.on_readable(i, ev.is_read_closed() || ev.is_error());
                                }
                            }
                            ConnState::Reading | ConnState::Idle => {
                                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                                    self.on_readable(i, ev.is_read_closed() || ev.is_error());
                                }
                            }
                            ConnState::Closed => {}
                        }
                    }
                }
            }
        }
        // Close what is left.
        for i in 0..self.conns.len() {
            if let Some(s) = self.conns[i].sock.take() {
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
    pub(super) fn wait(
        &mut self,
        events: &mut Events,
        timeout: Option<Duration>,
    ) -> std::io::Result<()> {
        if self.ledger.in_flight() > 0 && timeout != Some(Duration::ZERO) && self.spin.armed() {
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

    /// Closed loop with `--stages`: starts parked slots when the level rose to
    /// `level`; when it fell, slots park themselves as their requests end (`after`).
    pub(super) fn adjust_level(&mut self, level: u64, now: Instant) {
        self.target = level;
        while self.active < self.target {
            let Some(i) = self.free.pop() else { break };
            if !self.take_for(i) {
                self.free.push(i);
                break;
            }
            let c = &mut self.conns[i as usize];
            c.intended = now;
            c.has_request = true;
            self.restart.push_back(i);
            self.active += 1;
        }
    }

    /// Sending stops: the control starts the drain, the ledger stops taking,
    /// and requests held by slots that will not connect are not sent.
    pub(super) fn begin_stop(&mut self, now: Instant) {
        self.control.begin_stop(now);
        let released = self.ledger.ends().scheduled;
        self.ledger.begin_stop(now);
        // Arrivals due before the stop and never released: journeys not started.
        if let Some(sc) = self.scenario.as_mut() {
            for _ in released..self.ledger.ends().scheduled {
                sc.load.arrived();
            }
        }
        // Requests waiting for a connect that never happened were not sent.
        for c in &mut self.conns {
            // (A redirect hop connecting is a request already sent: in flight.)
            if c.has_request
                && matches!(c.state, ConnState::Connecting | ConnState::Handshaking)
                && c.redir.is_none()
            {
                c.has_request = false;
                self.ledger.drop_held();
            }
        }
        for i in std::mem::take(&mut self.restart) {
            let c = &mut self.conns[i as usize];
            if c.has_request {
                c.has_request = false;
                if c.redir.take().is_some() {
                    // Sent, redirected, and now waiting for a connection to
                    // the next hop that will not be made: in flight at the end.
                    self.ledger.abandon_in_flight();
                } else {
                    self.ledger.drop_held();
                }
            }
        }
    }

    pub(super) fn poll_timeout(&mut self, now: Instant) -> Option<Duration> {
        if !self.restart.is_empty() {
            return Some(Duration::ZERO);
        }
        if self.open_loop
            && !self.ledger.stopping()
            && self.ledger.pending() as u64 > self.connecting
            && !self.free.is_empty()
        {
            return Some(Duration::ZERO); // more connects wanted (see `release`)
        }
        let mut next: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Instant| n.min(t)));
            }
        };
        if self.request_timeouts.head != NIL {
            consider(Some(
                self.conns[self.request_timeouts.head as usize].deadline,
            ));
        }
        if self.connect_timeouts.head != NIL {
            consider(Some(
                self.conns[self.connect_timeouts.head as usize].deadline,
            ));
        }
        if let Some(Reverse((t, _))) = self.scenario.as_ref().and_then(|s| s.sleepers.peek()) {
            consider(Some(*t));
        }
        consider(self.control.next_wake());
        // Wake at least every 250 ms to publish progress and notice Ctrl-C.
        consider(Some(now + Duration::from_millis(250)));
        let coarse = next.unwrap_or(now).saturating_duration_since(now);
        match self.ledger.next_due() {
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

    /// Closed loop: takes one request for slot `i` (held by it). With
    /// `--requests-per-conn K` and a request count, a new connection reserves
    /// a block of K requests, so `-n N` makes exactly ⌈N/K⌉ connections
    /// however the slots interleave.
    #[inline]
    pub(super) fn take_for(&mut self, i: u32) -> bool {
        let c = &mut self.conns[i as usize];
        if c.quota > 0 {
            return self.ledger.take_reserved(&mut c.quota);
        }
        if let (Some(k), Some(_), ConnState::Closed) =
            (self.plan.requests_per_conn, self.ledger.budget(), c.state)
        {
            let (quota, first) = self.ledger.reserve(k, 1);
            c.quota = quota;
            return first == 1;
        }
        self.ledger.take()
    }

    /// Open loop: moves due send times onto free connections or the pending queue.
    pub(super) fn release(&mut self, now: Instant) {
        while let Some(t) = self.ledger.release_due(now) {
            self.rec.released(now.saturating_duration_since(t));
            if let Some(sc) = self.scenario.as_mut() {
                sc.load.arrived();
            }
            if self.ledger.pending() == 0 {
                if let Some(i) = self.pop_idle() {
                    self.send(i, t, now);
                    continue;
                }
            }
            self.ledger.enqueue(t);
            self.rec.counters.waited_for_connection += 1;
        }
        // Open connections for waiting requests, up to the cap, a few per
        // pass of the event loop (a pass takes tens of µs at high rates):
        // after a server stall, hundreds of connects in one go (each a
        // synchronous handshake on loopback, ~30–50 µs) held back the
        // schedule by 10–15 ms.
        while (self.ledger.pending() as u64) > self.connecting && self.connects_left > 0 {
            let Some(i) = self.free.pop() else { break };
            self.connects_left -= 1;
            self.connect(i, now);
        }
    }

    pub(super) fn pop_idle(&mut self) -> Option<u32> {
        while let Some(i) = self.idle.pop() {
            let walking = self
                .scenario
                .as_ref()
                .is_some_and(|s| s.vus[i as usize].journey.is_some());
            if self.conns[i as usize].state == ConnState::Idle && !walking {
                return Some(i);
            }
        }
        None
    }

    /// Open-loop sessions: whether journeys think before their next step
    /// (the worker is not done while the run goes on).
    pub(super) fn journeys_thinking(&self) -> bool {
        self.open_loop
            && !self.control.stopping()
            && self
                .scenario
                .as_ref()
                .is_some_and(|s| !s.sleepers.is_empty())
    }

    pub(super) fn process_restarts(&mut self, now: Instant) {
        for _ in 0..self.restart.len() {
            let Some(i) = self.restart.pop_front() else {
                break;
            };
            if self.ledger.stopping() {
                break;
            }
            let c = &self.conns[i as usize];
            if c.state == ConnState::Closed {
                self.connect(i, now);
            } else if c.state == ConnState::Idle && c.has_request {
                let intended = c.intended;
                self.send(i, intended, now);
            }
        }
    }
}
