//! One worker thread: its own poller, connections, schedule and recorder.
//!
//! The hot path per request is: write the prebuilt request bytes, read the
//! response into the worker's shared buffer, feed the incremental parser, record
//! into the worker's own histograms, and write the next request straight away.
//! No lock, channel or shared counter is touched per request. Sockets are
//! registered once (edge-triggered, read and write interest), so a request costs
//! no `epoll_ctl`. Time-outs live in two intrusive FIFO lists (requests and
//! connects have fixed time-outs, so deadlines arrive in order): O(1) per request,
//! memory O(connections).

use crate::h1::{HeadMemo, Progress, ResponseReader};
use crate::pacer::Pacer;
use crate::plan::Plan;
use crate::redirect::{Cookies, Origin};
use crate::scenario::{Scenario, Vu};
use crate::sys::{self, Events};
use mio::net::TcpStream;
use mio::{Interest, Poll, Token, Waker};
use redline_stats::rng::SplitMix64;
use redline_stats::RequestStats;
use redline_stats::{ErrorKind, Recorder, Timing};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::VecDeque;
use std::io::{ErrorKind as IoKind, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAKE: Token = Token(usize::MAX - 1);
const TIMER: Token = Token(usize::MAX - 2);
const NIL: u32 = u32::MAX;
const READ_BUF: usize = 64 * 1024;
/// Open loop: at most this many connects per pass of the event loop.
const CONNECTS_PER_PASS: u32 = 4;

/// Counts a worker publishes for the live progress line (a few times a second, not per request).
#[derive(Debug, Default)]
pub struct Live {
    /// Completed responses so far.
    pub completed: AtomicU64,
    /// Failed requests so far.
    pub failed: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Finished seconds of the series not yet collected (pushed once a second).
    pub seconds: std::sync::Mutex<Vec<redline_stats::SeriesPoint>>,
}

/// What a worker is asked to do.
pub struct WorkerSpec {
    /// Worker number.
    pub index: usize,
    /// Global id of this worker's first virtual user (scenario runs).
    pub first_vu: u64,
    /// The run's common start.
    pub start: Instant,
    /// Connections (closed loop) or connection cap (open loop) of this worker.
    pub connections: u64,
    /// Closed loop: requests this worker sends (None: until the deadline).
    pub budget: Option<u64>,
    /// When sending stops.
    pub deadline: Option<Instant>,
    /// Open loop: the schedule.
    pub pacer: Option<Pacer>,
    /// Set to stop early (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// Published counts.
    pub live: Arc<Live>,
    /// Closed loop with `--stages`: this worker's connections over time.
    pub levels: Option<crate::pacer::Levels>,
}

/// What a worker hands back.
pub struct WorkerResult {
    /// Its measurements.
    pub recorder: Recorder,
    /// When its last request ended.
    pub end: Instant,
    /// User CPU time of the thread.
    pub cpu_user: Duration,
    /// System CPU time of the thread.
    pub cpu_sys: Duration,
    /// Most connections open at once.
    pub peak_open: u64,
    /// Whether it was stopped early.
    pub interrupted: bool,
    /// Scenario runs: numbers per named request.
    pub requests: Vec<RequestStats>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// No socket.
    Closed,
    /// Connect in progress.
    Connecting,
    /// TCP connected, TLS handshake in progress.
    Handshaking,
    /// Connected, no request.
    Idle,
    /// Request partly written.
    Writing,
    /// Request written, reading the response.
    Reading,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    None,
    Requests,
    Connects,
}

struct Conn {
    sock: Option<TcpStream>,
    /// The TLS session of an https connection.
    tls: Option<Box<rustls::ClientConnection>>,
    tls_start: Instant,
    st: St,
    reader: ResponseReader,
    /// A request is assigned to this slot (maybe waiting for the connect).
    has_request: bool,
    intended: Instant,
    sent: Instant,
    first_byte: Option<Instant>,
    connect_start: Instant,
    written: usize,
    close_after: bool,
    on_conn: u64,
    /// Closed loop with `--requests-per-conn` and `-n`: requests reserved for this connection.
    quota: u64,
    wire: u64,
    deadline: Instant,
    prev: u32,
    next: u32,
    list: List,
    /// `--follow-redirects`: the redirect chain of the request in progress.
    redir: Option<Box<Redir>>,
    /// The socket is open to a redirect's origin, not the request's own: the
    /// next request replaces the connection.
    away: Option<Arc<Origin>>,
}

/// A request being redirected: its hops so far and the request of the next.
struct Redir {
    hops: u32,
    /// The URL the current hop goes to.
    url: url::Url,
    /// The original request's bytes (hops are rewritten from them).
    orig: Vec<u8>,
    /// The current hop's request.
    bytes: Vec<u8>,
    /// Where the current hop goes when not the request's own origin.
    to: Option<Arc<Origin>>,
    /// A hop made it a GET without body (301/302 after POST, 303).
    get: bool,
}

/// An intrusive doubly-linked FIFO of connection slots ordered by deadline.
#[derive(Default, Clone, Copy)]
struct Fifo {
    head: u32,
    tail: u32,
}

/// A scenario run's per-worker state: a virtual user per connection slot.
struct ScState<'p> {
    s: &'p Scenario,
    vus: Vec<Vu>,
    stats: Vec<RequestStats>,
    rr: u64,
    rows: u64,
    stride: u64,
    rng: SplitMix64,
    /// Virtual users thinking, by wake-up time.
    sleepers: BinaryHeap<Reverse<(Instant, u32)>>,
}

struct Worker<'p> {
    plan: &'p Plan,
    sc: Option<ScState<'p>>,
    poll: Poll,
    conns: Vec<Conn>,
    buf: Box<[u8]>,
    /// The last plain response head parsed, to skip scanning its repeats.
    memo: HeadMemo,
    rec: Recorder,
    reqs: Fifo,
    connects: Fifo,
    open_loop: bool,
    budget: Option<u64>,
    deadline: Option<Instant>,
    pacer: Option<Pacer>,
    next_intent: Option<Instant>,
    pending: VecDeque<Instant>,
    idle: Vec<u32>,
    free: Vec<u32>,
    restart: VecDeque<u32>,
    stopping: bool,
    drain_until: Option<Instant>,
    in_flight: u64,
    open: u64,
    connecting: u64,
    /// Open loop: connects still allowed in this pass of the event loop.
    connects_left: u32,
    /// Poll-before-sleep state (see [`Worker::wait`]).
    spin: Spin,
    peak_open: u64,
    last_done: Instant,
    stop_at: Option<Instant>,
    stop: Arc<AtomicBool>,
    live: Arc<Live>,
    timer: Option<PreciseTimer>,
    timer_armed: Option<Instant>,
    /// Open loop: how long after a send time the worker may wake (see `poll_timeout`).
    batch: Duration,
    want_server: bool,
    interrupted: bool,
    /// Closed-loop level control (`--stages`): slots not parked, slots wanted,
    /// when to look at the level again; parked slots wait in `free`.
    levels: Option<crate::pacer::Levels>,
    active: u64,
    target: u64,
    level_check: Option<Instant>,
    published_secs: usize,
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
    let conns = (0..slots)
        .map(|_| Conn {
            sock: None,
            tls: None,
            tls_start: now,
            st: St::Closed,
            reader: ResponseReader::new(),
            has_request: false,
            intended: now,
            sent: now,
            first_byte: None,
            connect_start: now,
            written: 0,
            close_after: false,
            on_conn: 0,
            quota: 0,
            wire: 0,
            deadline: now,
            prev: NIL,
            next: NIL,
            list: List::None,
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
        PreciseTimer::new(&poll)
    } else {
        None
    };
    let mut conns: Vec<Conn> = conns;
    if plan.follow.is_some() {
        for c in &mut conns {
            c.reader.want_location = true;
        }
    }
    let sc = plan.scenario.as_deref().map(|s| {
        for c in &mut conns {
            c.reader.capture = Some(Box::default());
        }
        ScState {
            s,
            vus: (0..slots as u64)
                .map(|i| s.new_vu(spec.first_vu + i))
                .collect(),
            stats: s.new_stats(),
            rr: spec.index as u64,
            rows: spec.index as u64,
            stride: plan.threads.max(1) as u64,
            rng: SplitMix64(
                plan.seed ^ (spec.index as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D),
            ),
            sleepers: BinaryHeap::new(),
        }
    });
    let mut w = Worker {
        plan,
        sc,
        poll,
        conns,
        buf: vec![0u8; READ_BUF].into_boxed_slice(),
        memo: HeadMemo::new(),
        rec: Recorder::new(spec.start),
        reqs: Fifo {
            head: NIL,
            tail: NIL,
        },
        connects: Fifo {
            head: NIL,
            tail: NIL,
        },
        open_loop,
        budget: spec.budget,
        deadline: spec.deadline,
        pacer: spec.pacer,
        next_intent: None,
        pending: VecDeque::new(),
        idle: Vec::new(),
        free: (0..slots as u32).rev().collect(),
        restart: VecDeque::new(),
        stopping: false,
        drain_until: None,
        in_flight: 0,
        open: 0,
        connecting: 0,
        connects_left: CONNECTS_PER_PASS,
        spin: Spin::new(),
        peak_open: 0,
        last_done: spec.start,
        stop_at: None,
        stop: spec.stop,
        live: spec.live,
        timer,
        timer_armed: None,
        batch,
        want_server: true,
        interrupted: false,
        levels: spec.levels,
        active: 0,
        target: slots as u64,
        level_check: None,
        published_secs: 0,
    };
    w.run(spec.start);
    // A run stopped by its deadline (or Ctrl-C) lasted at least until then, even
    // when the server stopped answering long before.
    let end = w.stop_at.map_or(w.last_done, |s| s.max(w.last_done));
    // Requests still out when the run ends are counted, never dropped.
    w.rec.counters.in_flight_at_end += w.in_flight;
    w.rec.counters.not_sent += w.pending.len() as u64;
    w.rec.counters.peak_connections = w.peak_open;
    w.publish();
    let cpu = thread_cpu();
    WorkerResult {
        recorder: w.rec,
        end,
        cpu_user: cpu.0,
        cpu_sys: cpu.1,
        peak_open: w.peak_open,
        interrupted: w.interrupted,
        requests: w.sc.map(|s| s.stats).unwrap_or_default(),
    }
}

impl<'p> Worker<'p> {
    fn run(&mut self, start: Instant) {
        let mut events = Events::with_capacity(1024);
        if let Some(p) = self.pacer.as_mut() {
            self.next_intent = p.next_send().map(|d| start + d);
        } else {
            // Closed loop: every connection takes its first request (with
            // --stages: as many as the level wants; the rest start parked).
            self.free.clear();
            let first = match &self.levels {
                Some(l) => {
                    self.target = l.active_at(0.0);
                    self.level_check = l
                        .next_check(0.0)
                        .map(|s| start + Duration::from_secs_f64(s));
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
        let mut last_publish = start;
        loop {
            let now = Instant::now();
            if !self.stopping {
                if self.stop.load(Ordering::Relaxed) {
                    self.interrupted = true;
                    self.begin_stop(now);
                } else if self.deadline.is_some_and(|d| now >= d) {
                    self.begin_stop(now);
                }
            }
            self.expire(now);
            self.connects_left = CONNECTS_PER_PASS;
            if self.open_loop {
                self.release(now);
            } else {
                if self.sc.is_some() {
                    self.wake_sleepers(now);
                }
                if !self.stopping && self.level_check.is_some_and(|t| now >= t) {
                    self.adjust_level(now);
                }
            }
            self.process_restarts(now);
            if self.finished(now) {
                break;
            }
            if now.duration_since(last_publish) >= Duration::from_millis(100) {
                self.rec.tick(now);
                self.publish();
                last_publish = now;
            }
            let timeout = self.poll_timeout(now);
            if let Err(e) = self.wait(&mut events, timeout) {
                if e.kind() != IoKind::Interrupted {
                    // The poller itself failed: nothing more can be measured.
                    self.rec
                        .error(ErrorKind::Other, Cow::Owned(format!("poll: {e}")), now);
                    self.stopping = true;
                    self.drain_until = Some(now);
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
                    if self.next_intent.is_some_and(|t| t <= now) {
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
                        match self.conns[i as usize].st {
                            St::Connecting => self.on_connect_event(i),
                            St::Handshaking => self.drive_handshake(i),
                            St::Writing => {
                                if ev.is_writable() || ev.is_error() {
                                    self.write_more(i);
                                }
                                if self.conns[i as usize].st == St::Reading
                                    && (ev.is_readable() || ev.is_read_closed())
                                {
                                    self.on_readable(i, ev.is_read_closed() || ev.is_error());
                                }
                            }
                            St::Reading | St::Idle => {
                                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                                    self.on_readable(i, ev.is_read_closed() || ev.is_error());
                                }
                            }
                            St::Closed => {}
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
    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> std::io::Result<()> {
        if self.in_flight > 0 && timeout != Some(Duration::ZERO) && self.spin.armed() {
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

    fn publish(&mut self) {
        self.live
            .completed
            .store(self.rec.counters.completed, Ordering::Relaxed);
        self.live
            .failed
            .store(self.rec.counters.failed, Ordering::Relaxed);
        self.live.open.store(self.open, Ordering::Relaxed);
        let secs = self.rec.finished_seconds();
        if secs.len() > self.published_secs {
            if let Ok(mut v) = self.live.seconds.lock() {
                v.extend_from_slice(&secs[self.published_secs..]);
            }
            self.published_secs = secs.len();
        }
    }

    /// Closed loop with `--stages`: starts parked slots when the level rose;
    /// when it fell, slots park themselves as their requests end (`after`).
    fn adjust_level(&mut self, now: Instant) {
        let Some(l) = &self.levels else { return };
        let el = now
            .saturating_duration_since(self.rec.start())
            .as_secs_f64();
        self.target = l.active_at(el);
        self.level_check = l
            .next_check(el)
            .map(|s| self.rec.start() + Duration::from_secs_f64(s));
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

    fn begin_stop(&mut self, now: Instant) {
        self.stopping = true;
        self.stop_at = Some(now);
        self.drain_until = Some(now + self.plan.grace);
        self.budget = Some(0);
        // Open loop: sends due before the stop that the worker had not yet
        // released (it was late: a host stall at the very end) were planned
        // all the same: scheduled, and never sent.
        let mut n = 0;
        let until = self.deadline.map_or(now, |d| d.min(now));
        while let Some(t) = self.next_intent {
            if t >= until {
                break;
            }
            self.rec.counters.scheduled += 1;
            n += 1;
            self.advance_intent();
        }
        self.next_intent = None;
        // Requests waiting for a connect that never happened were not sent.
        for c in &mut self.conns {
            // (A redirect hop connecting is a request already sent: in flight.)
            if c.has_request
                && matches!(c.st, St::Connecting | St::Handshaking)
                && c.redir.is_none()
            {
                c.has_request = false;
                n += 1;
            }
        }
        for i in std::mem::take(&mut self.restart) {
            let c = &mut self.conns[i as usize];
            if c.has_request {
                c.has_request = false;
                if c.redir.take().is_some() {
                    // Sent, redirected, and now waiting for a connection to
                    // the next hop that will not be made: in flight at the end.
                    self.in_flight -= 1;
                    self.rec.counters.in_flight_at_end += 1;
                } else {
                    n += 1;
                }
            }
        }
        self.rec.counters.not_sent += n;
    }

    fn finished(&self, now: Instant) -> bool {
        if self.stopping {
            return self.in_flight == 0 || self.drain_until.is_some_and(|d| now >= d);
        }
        if self.open_loop {
            // A request waiting for a connection of its own (a scenario host
            // switch, or the connection was a redirect's) is not done either.
            self.next_intent.is_none()
                && self.pending.is_empty()
                && self.in_flight == 0
                && self.restart.is_empty()
                && !self
                    .conns
                    .iter()
                    .any(|c| c.has_request && matches!(c.st, St::Connecting | St::Handshaking))
        } else {
            // In closed loop every connecting slot carries a request.
            self.budget == Some(0)
                && self.in_flight == 0
                && self.restart.is_empty()
                && self.connecting == 0
        }
    }

    fn poll_timeout(&mut self, now: Instant) -> Option<Duration> {
        if !self.restart.is_empty() {
            return Some(Duration::ZERO);
        }
        if self.open_loop
            && !self.stopping
            && self.pending.len() as u64 > self.connecting
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
        if self.reqs.head != NIL {
            consider(Some(self.conns[self.reqs.head as usize].deadline));
        }
        if self.connects.head != NIL {
            consider(Some(self.conns[self.connects.head as usize].deadline));
        }
        if let Some(Reverse((t, _))) = self.sc.as_ref().and_then(|s| s.sleepers.peek()) {
            consider(Some(*t));
        }
        if self.stopping {
            consider(self.drain_until);
        } else {
            consider(self.deadline);
            consider(self.level_check);
        }
        // Wake at least every 250 ms to publish progress and notice Ctrl-C.
        consider(Some(now + Duration::from_millis(250)));
        let coarse = next.unwrap_or(now).saturating_duration_since(now);
        match self.next_intent {
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

    /// Closed loop: takes one request from the budget.
    fn take(&mut self) -> bool {
        if self.stopping {
            return false;
        }
        match &mut self.budget {
            Some(0) => return false,
            Some(n) => *n -= 1,
            None => {}
        }
        self.rec.counters.scheduled += 1;
        true
    }

    /// Closed loop: takes one request for slot `i`. With `--requests-per-conn K`
    /// and a request count, a new connection reserves a block of K requests, so
    /// `-n N` makes exactly ⌈N/K⌉ connections however the slots interleave.
    fn take_for(&mut self, i: u32) -> bool {
        if self.stopping {
            return false;
        }
        let c = &mut self.conns[i as usize];
        if c.quota > 0 {
            c.quota -= 1;
            self.rec.counters.scheduled += 1;
            return true;
        }
        if let (Some(k), Some(b), St::Closed) = (self.plan.requests_per_conn, self.budget, c.st) {
            if b == 0 {
                return false;
            }
            let r = k.min(b);
            self.budget = Some(b - r);
            c.quota = r - 1;
            self.rec.counters.scheduled += 1;
            return true;
        }
        self.take()
    }

    /// Open loop: moves due send times onto free connections or the pending queue.
    fn release(&mut self, now: Instant) {
        while let Some(t) = self.next_intent {
            if t > now {
                break;
            }
            self.rec.counters.scheduled += 1;
            self.rec.released(now.saturating_duration_since(t));
            self.advance_intent();
            if self.pending.is_empty() {
                if let Some(i) = self.pop_idle() {
                    self.send(i, t, now);
                    continue;
                }
            }
            self.pending.push_back(t);
            self.rec.counters.waited_for_connection += 1;
        }
        // Open connections for waiting requests, up to the cap, a few per
        // pass of the event loop (a pass takes tens of µs at high rates):
        // after a server stall, hundreds of connects in one go (each a
        // synchronous handshake on loopback, ~30–50 µs) held back the
        // schedule by 10–15 ms.
        while (self.pending.len() as u64) > self.connecting && self.connects_left > 0 {
            let Some(i) = self.free.pop() else { break };
            self.connects_left -= 1;
            self.connect(i, now);
        }
    }

    /// Open loop: the next intended send time, none past the deadline.
    fn advance_intent(&mut self) {
        self.next_intent = self
            .pacer
            .as_mut()
            .and_then(|p| p.next_send())
            .map(|d| self.rec.start() + d);
        if self
            .deadline
            .is_some_and(|d| self.next_intent.is_some_and(|n| n >= d))
        {
            self.next_intent = None;
        }
    }

    fn pop_idle(&mut self) -> Option<u32> {
        while let Some(i) = self.idle.pop() {
            if self.conns[i as usize].st == St::Idle {
                return Some(i);
            }
        }
        None
    }

    fn process_restarts(&mut self, now: Instant) {
        for _ in 0..self.restart.len() {
            let Some(i) = self.restart.pop_front() else {
                break;
            };
            if self.stopping {
                break;
            }
            let c = &self.conns[i as usize];
            if c.st == St::Closed {
                self.connect(i, now);
            } else if c.st == St::Idle && c.has_request {
                let intended = c.intended;
                self.send(i, intended, now);
            }
        }
    }

    fn connect(&mut self, i: u32, now: Instant) {
        // A redirect hop to another origin connects there.
        let away = self.conns[i as usize]
            .redir
            .as_ref()
            .and_then(|r| r.to.clone());
        let addr = match self.sc.is_some() {
            _ if away.is_some() => away.as_ref().map_or(self.plan.target.addr, |o| o.addr),
            true => {
                let r = self.choose(i);
                let sc = self.sc.as_mut().expect("scenario");
                let t = sc.s.requests[r].target;
                sc.vus[i as usize].target = t;
                sc.s.targets[t].addr
            }
            false => self.plan.target.addr,
        };
        let c = &mut self.conns[i as usize];
        c.away = away;
        c.connect_start = now;
        c.on_conn = 0;
        c.reader.reset();
        match TcpStream::connect(addr) {
            Ok(mut s) => {
                if let Err(e) = self.poll.registry().register(
                    &mut s,
                    Token(i as usize),
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    self.connect_failed(i, ErrorKind::from_io(&e, true), io_msg(&e), now);
                    return;
                }
                let c = &mut self.conns[i as usize];
                c.sock = Some(s);
                c.st = St::Connecting;
                c.deadline = now + self.plan.connect_timeout;
                self.connecting += 1;
                self.open += 1;
                self.peak_open = self.peak_open.max(self.open);
                self.push(i, List::Connects);
                // On loopback (and often a LAN) the handshake completes inside
                // connect() itself: go on at once, without waiting for the
                // writable event and asking the socket for its error (two
                // syscalls and an event fewer per connection).
                let c = &self.conns[i as usize];
                if c.sock.as_ref().is_some_and(|s| s.peer_addr().is_ok()) {
                    self.connected(i, Instant::now());
                }
            }
            Err(e) => self.connect_failed(i, ErrorKind::from_io(&e, true), io_msg(&e), now),
        }
    }

    fn on_connect_event(&mut self, i: u32) {
        let now = Instant::now();
        let c = &mut self.conns[i as usize];
        let Some(s) = c.sock.as_ref() else { return };
        match s.take_error() {
            Ok(Some(e)) | Err(e) => {
                self.connect_failed(i, ErrorKind::from_io(&e, true), io_msg(&e), now);
                return;
            }
            Ok(None) => {}
        }
        match s.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == IoKind::NotConnected => return, // not yet
            Err(e) => {
                self.connect_failed(i, ErrorKind::from_io(&e, true), io_msg(&e), now);
                return;
            }
        }
        self.connected(i, now);
    }

    /// The TCP connection of slot `i` is up: counts the connect time, then
    /// starts TLS or the first request.
    fn connected(&mut self, i: u32, now: Instant) {
        let c = &mut self.conns[i as usize];
        if let Some(s) = c.sock.as_ref() {
            let _ = s.set_nodelay(true);
        }
        let took = now.saturating_duration_since(c.connect_start);
        self.rec.connected(took);
        let away = c.away.clone();
        let tls = match &mut self.sc {
            Some(sc) => {
                let vu = &sc.vus[i as usize];
                if let Some(r) = vu.chosen {
                    sc.stats[r].connect.record(took);
                }
                sc.s.targets[vu.target].tls.as_ref()
            }
            None => self.plan.tls.as_ref(),
        };
        let tls = match &away {
            Some(o) => o.tls.as_ref(),
            None => tls,
        };
        if let Some(t) = tls {
            match rustls::ClientConnection::new(t.config.clone(), t.server_name.clone()) {
                Ok(conn) => {
                    c.tls = Some(Box::new(conn));
                    c.tls_start = now;
                    c.st = St::Handshaking;
                    self.drive_handshake(i);
                }
                Err(e) => self.connect_failed(i, ErrorKind::Tls, Cow::Owned(e.to_string()), now),
            }
            return;
        }
        self.connection_ready(i, now);
    }

    /// Moves TLS handshake bytes both ways until it is done or the socket would block.
    fn drive_handshake(&mut self, i: u32) {
        let now = Instant::now();
        let c = &mut self.conns[i as usize];
        let (Some(s), Some(tls)) = (c.sock.as_mut(), c.tls.as_mut()) else {
            return;
        };
        let mut result: Result<(), (ErrorKind, Cow<'static, str>)> = Ok(());
        for _ in 0..64 {
            let mut progressed = false;
            while tls.wants_write() {
                match tls.write_tls(s) {
                    Ok(_) => progressed = true,
                    Err(e) if e.kind() == IoKind::WouldBlock => break,
                    Err(e) if e.kind() == IoKind::Interrupted => {}
                    Err(e) => {
                        result = Err((ErrorKind::from_io(&e, true), io_msg(&e)));
                        break;
                    }
                }
            }
            if result.is_err() || !tls.is_handshaking() {
                break;
            }
            if tls.wants_read() {
                match tls.read_tls(s) {
                    Ok(0) => {
                        result = Err((
                            ErrorKind::Tls,
                            "connection closed during the TLS handshake".into(),
                        ));
                        break;
                    }
                    Ok(n) => {
                        self.rec.counters.bytes_read += n as u64;
                        progressed = true;
                        if let Err(e) = tls.process_new_packets() {
                            // Send the alert, then fail.
                            let _ = tls.write_tls(s);
                            result = Err((ErrorKind::Tls, Cow::Owned(e.to_string())));
                            break;
                        }
                    }
                    Err(e) if e.kind() == IoKind::WouldBlock => {}
                    Err(e) if e.kind() == IoKind::Interrupted => progressed = true,
                    Err(e) => {
                        result = Err((ErrorKind::from_io(&e, true), io_msg(&e)));
                        break;
                    }
                }
            }
            if !progressed {
                break;
            }
        }
        let done = !tls.is_handshaking() && !tls.wants_write();
        match result {
            Err((kind, msg)) => self.connect_failed(i, kind, msg, now),
            Ok(()) if done => {
                let d = now.saturating_duration_since(c.tls_start);
                self.rec.tls.record(d);
                self.connection_ready(i, now);
            }
            Ok(()) => {}
        }
    }

    /// A connection (and its TLS session) is up: send, or wait for work.
    fn connection_ready(&mut self, i: u32, now: Instant) {
        self.unlink(i);
        self.connecting -= 1;
        let c = &mut self.conns[i as usize];
        c.st = St::Idle;
        if c.has_request {
            let intended = c.intended;
            self.send(i, intended, now);
        } else if let Some(t) = self.pending.pop_front() {
            self.send(i, t, now);
        } else {
            self.idle.push(i);
        }
    }

    fn connect_failed(&mut self, i: u32, kind: ErrorKind, msg: Cow<'static, str>, now: Instant) {
        let was_connecting = matches!(self.conns[i as usize].st, St::Connecting | St::Handshaking);
        self.close(i);
        if was_connecting {
            self.connecting -= 1;
        }
        let c = &mut self.conns[i as usize];
        if c.has_request {
            c.has_request = false;
            if c.redir.take().is_some() {
                // A redirect hop: the request was in flight.
                self.in_flight -= 1;
            }
            self.rec.error(kind, msg, now);
            self.last_done = now;
            self.request_ended(i, None, now);
            self.after(i, now);
        } else if self.open_loop {
            // The connect was for the oldest waiting request: it fails with it.
            if self.pending.pop_front().is_some() {
                self.rec.error(kind, msg, now);
                self.last_done = now;
                self.request_ended(i, None, now);
            }
            self.free.push(i);
        }
    }

    /// Writes a request on connection `i` (connected and idle).
    fn send(&mut self, i: u32, intended: Instant, now: Instant) {
        if self.conns[i as usize].redir.is_some() {
            // The connection for the next redirect hop is up.
            return self.send_hop(i, now);
        }
        if self.conns[i as usize].away.is_some() {
            // Open to where the last request was redirected: the next request
            // starts again at its own URL, on a new connection.
            return self.send_on_new_connection(i, intended);
        }
        let plan = self.plan;
        let mut timeout = plan.timeout;
        if self.sc.is_some() {
            let r = self.choose(i);
            let sc = self.sc.as_mut().expect("scenario");
            let q = &sc.s.requests[r];
            if sc.vus[i as usize].target != q.target {
                // The next request goes to another host: replace the connection.
                return self.send_on_new_connection(i, intended);
            }
            timeout = q.timeout;
            sc.stats[r].sent += 1;
        }
        let c = &mut self.conns[i as usize];
        c.has_request = true;
        c.intended = intended;
        c.sent = now;
        c.first_byte = None;
        c.written = 0;
        c.wire = 0;
        c.on_conn += 1;
        c.close_after = plan.requests_per_conn.is_some_and(|n| c.on_conn >= n);
        c.reader.reset();
        // Only until the first answer named its server: after that a reader that
        // still wants it (its head had none) would keep the head memo unused.
        c.reader.want_server = self.want_server;
        c.st = St::Writing;
        c.deadline = now + timeout;
        self.in_flight += 1;
        self.rec.counters.sent += 1;
        if let Some(sc) = self.sc.as_mut() {
            let vu = &mut sc.vus[i as usize];
            let r = vu.chosen.unwrap_or(0);
            sc.s.prepare(r, vu, c.close_after);
            if let Some(cap) = c.reader.capture.as_deref_mut() {
                sc.s.prepare_capture(r, cap);
            }
            self.push_sorted(i);
        } else {
            self.push(i, List::Requests);
        }
        self.write_more(i);
    }

    fn write_more(&mut self, i: u32) {
        let plan = self.plan;
        let c = &mut self.conns[i as usize];
        let bytes: &[u8] = if let Some(r) = c.redir.as_deref() {
            &r.bytes
        } else if let Some(sc) = &self.sc {
            let vu = &sc.vus[i as usize];
            sc.s.wire(vu.chosen.unwrap_or(0), vu, c.close_after)
        } else if c.close_after {
            &plan.request_close
        } else {
            &plan.request
        };
        let Some(s) = c.sock.as_mut() else { return };
        if let Some(tls) = c.tls.as_mut() {
            // The whole request goes into the TLS session at once; then its
            // records are flushed as far as the socket takes them.
            if c.written < bytes.len() {
                let _ = tls.writer().write_all(&bytes[c.written..]);
                c.written = bytes.len();
            }
            while tls.wants_write() {
                match tls.write_tls(s) {
                    Ok(n) => self.rec.counters.bytes_written += n as u64,
                    Err(e) if e.kind() == IoKind::WouldBlock => return,
                    Err(e) if e.kind() == IoKind::Interrupted => {}
                    Err(e) => return self.write_failed(i, &e),
                }
            }
            c.st = St::Reading;
            return;
        }
        while c.written < bytes.len() {
            match sys::send(s.as_raw_fd(), &bytes[c.written..]) {
                Ok(0) => {
                    let now = Instant::now();
                    self.fail(
                        i,
                        ErrorKind::Closed,
                        "connection closed while sending".into(),
                        now,
                    );
                    return;
                }
                Ok(n) => {
                    c.written += n;
                    self.rec.counters.bytes_written += n as u64;
                }
                Err(e) if e.kind() == IoKind::WouldBlock => return,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return self.write_failed(i, &e),
            }
        }
        c.st = St::Reading;
    }

    /// Reads what the socket holds. `closing` (the event carried RDHUP/ERR) means
    /// read on to EOF: a FIN that came with the data brings no later edge.
    fn on_readable(&mut self, i: u32, closing: bool) {
        if self.conns[i as usize].tls.is_some() {
            return self.on_readable_tls(i);
        }
        loop {
            let c = &mut self.conns[i as usize];
            let Some(s) = c.sock.as_mut() else { return };
            let n = match sys::recv(s.as_raw_fd(), &mut self.buf) {
                Ok(n) => n,
                Err(e) if e.kind() == IoKind::WouldBlock => return,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                Err(e) => return self.read_failed(i, &e),
            };
            let now = Instant::now();
            if n == 0 {
                self.on_eof(i, now);
                return;
            }
            self.rec.bytes_read(n as u64);
            if !self.on_plain(i, n, now) {
                return;
            }
            if n < self.buf.len() && !closing {
                // A short read drained the socket; the next data brings a new edge.
                return;
            }
        }
    }

    /// Handles `n` response bytes in the worker's buffer; false when the
    /// connection stopped reading (response done and no next request, or failed).
    fn on_plain(&mut self, i: u32, n: usize, now: Instant) -> bool {
        {
            let c = &mut self.conns[i as usize];
            match c.st {
                St::Reading | St::Writing => {}
                _ => {
                    // Bytes nobody asked for: the connection cannot be trusted.
                    self.drop_idle(i, now);
                    return false;
                }
            }
            if c.first_byte.is_none() {
                c.first_byte = Some(now);
            }
            c.wire += n as u64;
            let informational = c.reader.informational;
            let head = match &self.sc {
                Some(sc) => sc.vus[i as usize]
                    .chosen
                    .is_some_and(|r| sc.s.requests[r].head_request),
                None => self.plan.head_request,
            };
            match c
                .reader
                .feed_memo(&self.buf[..n], head, Some(&mut self.memo))
            {
                Ok(Progress::NeedMore) => {
                    // Waiting is timed to the final response: after a 100 or 103
                    // the clock for the first byte starts again.
                    if c.reader.informational != informational && !c.reader.final_started() {
                        c.first_byte = None;
                    }
                }
                Ok(Progress::Done { used }) => {
                    let leftover = used < n;
                    self.complete(i, now, leftover);
                    return self.conns[i as usize].st == St::Reading;
                }
                Err(m) => {
                    self.fail(
                        i,
                        ErrorKind::Malformed(m.kind),
                        Cow::Borrowed(m.message),
                        now,
                    );
                    return false;
                }
            }
        }
        true
    }

    /// Reads an https connection: TLS records from the socket, then the
    /// plaintext they carry, until the socket would block.
    fn on_readable_tls(&mut self, i: u32) {
        for _ in 0..1_000_000 {
            let c = &mut self.conns[i as usize];
            let (Some(s), Some(tls)) = (c.sock.as_mut(), c.tls.as_mut()) else {
                return;
            };
            let got = match tls.read_tls(s) {
                Ok(0) => None,
                Ok(n) => Some(n),
                Err(e) if e.kind() == IoKind::WouldBlock => return,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                Err(e) => return self.read_failed(i, &e),
            };
            let now = Instant::now();
            if let Some(n) = got {
                self.rec.bytes_read(n as u64);
            }
            if let Err(e) = tls.process_new_packets() {
                let _ = tls.write_tls(s);
                self.fail(i, ErrorKind::Tls, Cow::Owned(e.to_string()), now);
                return;
            }
            // Plaintext now available.
            loop {
                let c = &mut self.conns[i as usize];
                let Some(tls) = c.tls.as_mut() else { return };
                match tls.reader().read(&mut self.buf) {
                    Ok(0) => {
                        // close_notify: the server closed cleanly.
                        self.on_eof(i, now);
                        return;
                    }
                    Ok(n) => {
                        if !self.on_plain(i, n, now) {
                            return;
                        }
                    }
                    Err(e) if e.kind() == IoKind::WouldBlock => break,
                    Err(e) => {
                        let kind = if e.kind() == IoKind::UnexpectedEof {
                            ErrorKind::Closed
                        } else {
                            ErrorKind::Tls
                        };
                        self.fail(i, kind, Cow::Owned(e.to_string()), now);
                        return;
                    }
                }
            }
            if got.is_none() {
                self.on_eof(i, now);
                return;
            }
        }
    }

    /// A write failed: the request being sent fails with it.
    fn write_failed(&mut self, i: u32, e: &std::io::Error) {
        self.fail(i, ErrorKind::from_io(e, false), io_msg(e), Instant::now());
    }

    /// A read failed: the request in flight fails with it; an idle connection just goes.
    fn read_failed(&mut self, i: u32, e: &std::io::Error) {
        let now = Instant::now();
        let st = self.conns[i as usize].st;
        if st == St::Reading || st == St::Writing {
            self.fail(i, ErrorKind::from_io(e, false), io_msg(e), now);
        } else {
            self.drop_idle(i, now);
        }
    }

    fn on_eof(&mut self, i: u32, now: Instant) {
        let c = &mut self.conns[i as usize];
        match c.st {
            St::Reading | St::Writing => {
                if c.reader.head_done && c.reader.eof() {
                    self.complete(i, now, true);
                } else if c.reader.started() {
                    self.fail(
                        i,
                        ErrorKind::Closed,
                        "connection closed before the response was complete".into(),
                        now,
                    );
                } else {
                    self.fail(
                        i,
                        ErrorKind::Closed,
                        "connection closed before any response".into(),
                        now,
                    );
                }
            }
            _ => self.drop_idle(i, now),
        }
    }

    /// An idle connection went away (server's keep-alive time-out): not an error.
    fn drop_idle(&mut self, i: u32, now: Instant) {
        self.close(i);
        self.after(i, now);
    }

    fn complete(&mut self, i: u32, now: Instant, poisoned: bool) {
        if let Some(f) = self.plan.follow.as_deref() {
            let r = &self.conns[i as usize].reader;
            if crate::redirect::is_redirect(r.status) && r.location.is_some() {
                return self.follow(i, f, now, poisoned);
            }
        }
        self.unlink(i);
        self.in_flight -= 1;
        let c = &mut self.conns[i as usize];
        c.has_request = false;
        let redirected = c.redir.take();
        let t = Timing {
            intended: c.intended,
            sent: c.sent,
            first_byte: c.first_byte.unwrap_or(now),
            done: now,
        };
        let status = c.reader.status;
        if self.want_server {
            if let Some(s) = c.reader.server.take() {
                self.rec.server_software = Some(s);
            }
            self.want_server = false;
        }
        self.rec.response(&t, status, c.wire, c.reader.body_bytes);
        if let Some(sc) = self.sc.as_mut() {
            let vu = &mut sc.vus[i as usize];
            if let Some(r) = vu.chosen {
                vu.redirected_from = redirected
                    .as_ref()
                    .map(|d| d.url.host_str().unwrap_or("").to_ascii_lowercase());
                let st = &mut sc.stats[r];
                st.completed += 1;
                if status >= 400 {
                    st.bad_status += 1;
                }
                let latency = now.saturating_duration_since(t.intended);
                st.latency.record(latency);
                st.waiting
                    .record(t.first_byte.saturating_duration_since(t.sent));
                st.transfer
                    .record(now.saturating_duration_since(t.first_byte));
                sc.s.on_response(r, vu, status, latency, c.reader.capture.as_deref(), st);
            }
            self.request_ended(i, Some(()), now);
        }
        let c = &mut self.conns[i as usize];
        self.last_done = now;
        let reusable = c.reader.keep_alive && !c.close_after && !poisoned && self.plan.keepalive;
        if reusable {
            c.st = St::Idle;
        } else {
            self.close(i);
        }
        self.after(i, now);
    }

    /// The request for slot `i` needs another connection: closes this one and
    /// queues the slot to reconnect, or, once the run is stopping (no more
    /// connects), counts the request as never sent.
    fn send_on_new_connection(&mut self, i: u32, intended: Instant) {
        self.close(i);
        let c = &mut self.conns[i as usize];
        if self.stopping {
            c.has_request = false;
            self.rec.counters.not_sent += 1;
            return;
        }
        c.has_request = true;
        c.intended = intended;
        self.restart.push_back(i);
    }

    /// The bytes of the request slot `i` sent (before any redirect).
    fn request_bytes(&self, i: u32) -> &[u8] {
        let c = &self.conns[i as usize];
        match &self.sc {
            Some(sc) => {
                let vu = &sc.vus[i as usize];
                sc.s.wire(vu.chosen.unwrap_or(0), vu, c.close_after)
            }
            None if c.close_after => &self.plan.request_close,
            None => &self.plan.request,
        }
    }

    /// `--follow-redirects`: the response just read is a redirect with a
    /// `Location`. Follows it — on the same connection when it stays on the
    /// connection's origin and may be reused, else on a new connection to the
    /// new origin — or ends the request as `too_many_redirects`,
    /// `bad_redirect` or `resolve`. The request stays in flight throughout;
    /// its latency runs to the end of the final response.
    fn follow(&mut self, i: u32, f: &crate::redirect::Follow, now: Instant, poisoned: bool) {
        use crate::redirect::{hop_request, origin_key, request_path, resolve_location};
        let plan = self.plan;
        let c = &mut self.conns[i as usize];
        let status = c.reader.status;
        let location = c.reader.location.take().unwrap_or_default();
        let hops = c.redir.as_ref().map_or(0, |r| r.hops);
        let was_get = c.redir.as_ref().is_some_and(|r| r.get);
        if hops >= f.max {
            let msg = format!("more than {} redirects (--max-redirs)", f.max);
            return self.fail(i, ErrorKind::TooManyRedirects, Cow::Owned(msg), now);
        }
        let own_key = match &self.sc {
            Some(sc) => sc.s.targets[sc.vus[i as usize].target].origin.clone(),
            None => plan.target.origin.clone(),
        };
        let (orig, base) = match c.redir.as_mut() {
            Some(r) => (std::mem::take(&mut r.orig), Ok(r.url.clone())),
            None => {
                let orig = self.request_bytes(i).to_vec();
                let path = request_path(&orig).unwrap_or("/");
                let base = url::Url::parse(&format!("{own_key}{path}"));
                (orig, base)
            }
        };
        let Ok(base) = base else {
            return self.fail(
                i,
                ErrorKind::BadRedirect,
                "the redirected request's URL cannot be rebuilt".into(),
                now,
            );
        };
        let to = match resolve_location(&base, &location) {
            Ok(u) => u,
            Err(m) => return self.fail(i, ErrorKind::BadRedirect, Cow::Borrowed(m), now),
        };
        let key = origin_key(&to);
        let same_origin = key == own_key;
        let dest = if same_origin {
            None
        } else {
            match f.origin(&to) {
                Ok(o) => Some(o),
                Err(e) => {
                    let kind = if e.resolve {
                        ErrorKind::Resolve
                    } else {
                        ErrorKind::BadRedirect
                    };
                    return self.fail(i, kind, Cow::Owned(e.message), now);
                }
            }
        };
        let c = &mut self.conns[i as usize];
        let jar = match self.sc.as_mut() {
            Some(sc) => {
                let vu = &mut sc.vus[i as usize];
                let r = vu.chosen.unwrap_or(0);
                sc.s.redirect_cookies(
                    r,
                    vu,
                    c.reader.capture.as_deref(),
                    base.host_str().unwrap_or(""),
                    to.host_str().unwrap_or(""),
                )
            }
            None => None,
        };
        let cookies = match &jar {
            Some(j) => Cookies::Jar(j),
            None => Cookies::Given,
        };
        let Some((bytes, get)) = hop_request(&orig, status, &to, same_origin, was_get, cookies)
        else {
            return self.fail(
                i,
                ErrorKind::BadRedirect,
                "the redirected request cannot be rewritten".into(),
                now,
            );
        };
        self.rec.counters.redirects += 1;
        let on_conn = c.away.as_ref().map_or(own_key.as_str(), |o| o.key.as_str()) == key;
        let reuse = on_conn && c.reader.keep_alive && !c.close_after && !poisoned && plan.keepalive;
        c.redir = Some(Box::new(Redir {
            hops: hops + 1,
            url: to,
            orig,
            bytes,
            to: dest,
            get,
        }));
        if reuse {
            c.st = St::Idle;
            self.send_hop(i, now);
        } else {
            // Still the same request (in flight); the next hop needs a new connection.
            self.close(i);
            self.restart.push_back(i);
        }
    }

    /// Sends the next hop of a redirected request on connection `i` (connected and idle).
    fn send_hop(&mut self, i: u32, now: Instant) {
        let timeout = match &self.sc {
            Some(sc) => sc.vus[i as usize]
                .chosen
                .map_or(self.plan.timeout, |r| sc.s.requests[r].timeout),
            None => self.plan.timeout,
        };
        let c = &mut self.conns[i as usize];
        c.first_byte = None;
        c.written = 0;
        c.reader.reset();
        c.st = St::Writing;
        c.deadline = now + timeout;
        if self.sc.is_some() {
            self.push_sorted(i);
        } else {
            self.push(i, List::Requests);
        }
        self.write_more(i);
    }

    fn fail(&mut self, i: u32, kind: ErrorKind, msg: Cow<'static, str>, now: Instant) {
        let c = &mut self.conns[i as usize];
        if c.has_request && (c.st == St::Reading || c.st == St::Writing) {
            self.unlink(i);
            self.in_flight -= 1;
            self.conns[i as usize].has_request = false;
            self.conns[i as usize].redir = None;
            self.rec.error(kind, msg, now);
            self.last_done = now;
            self.request_ended(i, None, now);
        }
        self.close(i);
        self.after(i, now);
    }

    /// Scenario runs: the slot's request ended (`ok`: with a response); counts a
    /// failure against it and owes the virtual user its think time.
    fn request_ended(&mut self, i: u32, ok: Option<()>, _now: Instant) {
        let open_loop = self.open_loop;
        let Some(sc) = self.sc.as_mut() else { return };
        let vu = &mut sc.vus[i as usize];
        let Some(r) = vu.chosen.take() else { return };
        if ok.is_none() {
            sc.stats[r].errors += 1;
        }
        if !open_loop {
            vu.think = sc.s.requests[r].think.map(|t| t.sample(&mut sc.rng));
        }
    }

    /// Scenario runs: the request slot `i` sends next (chosen once, then kept
    /// until the request ends).
    fn choose(&mut self, i: u32) -> usize {
        let sc = self.sc.as_mut().expect("scenario");
        let vu = &mut sc.vus[i as usize];
        if let Some(r) = vu.chosen {
            return r;
        }
        let r =
            sc.s.choose(vu, &mut sc.rr, &mut sc.rows, sc.stride, &mut sc.rng);
        vu.chosen = Some(r);
        r
    }

    /// Scenario runs: virtual users whose think time is over send their next request.
    fn wake_sleepers(&mut self, now: Instant) {
        for _ in 0..100_000 {
            let Some(sc) = self.sc.as_mut() else { return };
            let Some(&Reverse((t, i))) = sc.sleepers.peek() else {
                return;
            };
            if t > now {
                return;
            }
            sc.sleepers.pop();
            sc.vus[i as usize].sleeping = false;
            let st = self.conns[i as usize].st;
            match st {
                // Latency counts from when the user meant to send: the end of its think time.
                St::Idle if self.take_for(i) => self.send(i, t, now),
                St::Closed if self.take_for(i) => {
                    let c = &mut self.conns[i as usize];
                    c.intended = t;
                    c.has_request = true;
                    self.restart.push_back(i);
                }
                _ => {}
            }
        }
    }

    /// Inserts a request slot into the time-out list in deadline order (scenario
    /// requests may have different time-outs; the common case appends).
    fn push_sorted(&mut self, i: u32) {
        if self.conns[i as usize].list != List::None {
            self.unlink(i);
        }
        let d = self.conns[i as usize].deadline;
        let mut after = self.reqs.tail;
        while after != NIL && self.conns[after as usize].deadline > d {
            after = self.conns[after as usize].prev;
        }
        let next = if after == NIL {
            self.reqs.head
        } else {
            self.conns[after as usize].next
        };
        {
            let c = &mut self.conns[i as usize];
            c.list = List::Requests;
            c.prev = after;
            c.next = next;
        }
        if after != NIL {
            self.conns[after as usize].next = i;
        } else {
            self.reqs.head = i;
        }
        if next != NIL {
            self.conns[next as usize].prev = i;
        } else {
            self.reqs.tail = i;
        }
    }

    /// Decides what slot `i` does next once its request ended (or its socket went away).
    fn after(&mut self, i: u32, now: Instant) {
        let st = self.conns[i as usize].st;
        if self.open_loop {
            match st {
                St::Idle => {
                    if let Some(t) = self.pending.pop_front() {
                        self.send(i, t, now);
                    } else {
                        self.idle.push(i);
                    }
                }
                St::Closed => {
                    self.free.push(i);
                    // Waiting requests will reopen it in `release`.
                }
                _ => {}
            }
            return;
        }
        if let Some(sc) = self.sc.as_mut() {
            let vu = &mut sc.vus[i as usize];
            if vu.sleeping {
                // Thinking: the wake-up sends the next request.
                return;
            }
            if let Some(d) = vu.think.take() {
                if !d.is_zero() && !self.stopping {
                    vu.sleeping = true;
                    sc.sleepers.push(Reverse((now + d, i)));
                    return;
                }
            }
        }
        if self.levels.is_some() && self.active > self.target {
            // The level fell: this slot parks (its request is done; not an error).
            self.close(i);
            self.free.push(i);
            self.active -= 1;
            return;
        }
        match st {
            St::Idle if self.take_for(i) => self.send(i, now, now),
            St::Closed if self.take_for(i) => {
                let c = &mut self.conns[i as usize];
                c.intended = now;
                c.has_request = true;
                self.restart.push_back(i);
            }
            _ => {}
        }
    }

    fn close(&mut self, i: u32) {
        if self.conns[i as usize].list != List::None {
            self.unlink(i);
        }
        let c = &mut self.conns[i as usize];
        // Closing the socket takes it out of the epoll set: no deregister call.
        if c.sock.take().is_some() {
            self.open -= 1;
        }
        c.tls = None;
        c.away = None;
        c.st = St::Closed;
        // Requests reserved for a connection that ended early go back to the budget.
        if c.quota > 0 {
            if let Some(b) = self.budget.as_mut() {
                if !self.stopping {
                    *b += c.quota;
                }
            }
            c.quota = 0;
        }
    }

    fn expire(&mut self, now: Instant) {
        while self.reqs.head != NIL {
            let i = self.reqs.head;
            if self.conns[i as usize].deadline > now {
                break;
            }
            self.fail(
                i,
                ErrorKind::Timeout,
                "no complete response within --timeout".into(),
                now,
            );
        }
        while self.connects.head != NIL {
            let i = self.connects.head;
            if self.conns[i as usize].deadline > now {
                break;
            }
            self.connect_failed(
                i,
                ErrorKind::ConnectTimeout,
                "connect timed out".into(),
                now,
            );
        }
    }

    fn fifo(&mut self, l: List) -> &mut Fifo {
        match l {
            List::Requests => &mut self.reqs,
            _ => &mut self.connects,
        }
    }

    fn push(&mut self, i: u32, l: List) {
        if self.conns[i as usize].list != List::None {
            self.unlink(i);
        }
        let tail = self.fifo(l).tail;
        {
            let c = &mut self.conns[i as usize];
            c.list = l;
            c.prev = tail;
            c.next = NIL;
        }
        if tail != NIL {
            self.conns[tail as usize].next = i;
        } else {
            self.fifo(l).head = i;
        }
        self.fifo(l).tail = i;
    }

    fn unlink(&mut self, i: u32) {
        let (l, prev, next) = {
            let c = &self.conns[i as usize];
            (c.list, c.prev, c.next)
        };
        if l == List::None {
            return;
        }
        if prev != NIL {
            self.conns[prev as usize].next = next;
        } else {
            self.fifo(l).head = next;
        }
        if next != NIL {
            self.conns[next as usize].prev = prev;
        } else {
            self.fifo(l).tail = prev;
        }
        let c = &mut self.conns[i as usize];
        c.list = List::None;
        c.prev = NIL;
        c.next = NIL;
    }
}

pub(crate) fn io_msg(e: &std::io::Error) -> Cow<'static, str> {
    use std::io::ErrorKind as K;
    Cow::Borrowed(match e.kind() {
        K::ConnectionRefused => "connection refused",
        K::ConnectionReset => "connection reset by peer",
        K::ConnectionAborted => "connection aborted",
        K::BrokenPipe => "broken pipe",
        K::TimedOut => "timed out",
        K::AddrNotAvailable => "no local address available (ports exhausted?)",
        _ => match e.raw_os_error() {
            Some(24) => "too many open files (raise ulimit -n)",
            Some(23) => "too many open files in the system",
            Some(99) => "no local address available (ports exhausted?)",
            Some(101) => "network unreachable",
            Some(113) => "no route to host",
            _ => return Cow::Owned(e.to_string()),
        },
    })
}

/// CPU time (user, system) of the calling thread.
pub fn thread_cpu() -> (Duration, Duration) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_THREAD is valid on Linux.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
            return (tv(ru.ru_utime), tv(ru.ru_stime));
        }
    }
    (Duration::ZERO, Duration::ZERO)
}

/// Converts a timeval.
pub fn tv(t: libc::timeval) -> Duration {
    Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1000)
}

/// A timerfd for sub-millisecond wake-ups on Linux (mio rounds poll time-outs up to 1 ms).
struct PreciseTimer {
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
}

/// A non-blocking monotonic timerfd, with the thread's timer slack lowered
/// from 50 µs to 1 µs so wake-ups are on time (both the HTTP/1 and the
/// HTTP/2 workers pace open-loop sends with it).
#[cfg(target_os = "linux")]
pub(crate) fn timerfd() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain syscall; the fd is checked and then owned by OwnedFd.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: prctl with PR_SET_TIMERSLACK takes an integer argument.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000, 0, 0, 0);
    }
    // SAFETY: fd is a valid, newly created descriptor we exclusively own.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

impl PreciseTimer {
    #[cfg(target_os = "linux")]
    fn new(poll: &Poll) -> Option<PreciseTimer> {
        use std::os::fd::AsRawFd;
        let fd = timerfd()?;
        poll.registry()
            .register(
                &mut mio::unix::SourceFd(&fd.as_raw_fd()),
                TIMER,
                Interest::READABLE,
            )
            .ok()?;
        Some(PreciseTimer { fd })
    }

    #[cfg(not(target_os = "linux"))]
    fn new(_poll: &Poll) -> Option<PreciseTimer> {
        None
    }

    #[cfg(target_os = "linux")]
    fn arm(&self, after: Duration) {
        use std::os::fd::AsRawFd;
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: valid fd and a fully initialized itimerspec.
        unsafe {
            libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut());
        }
    }
    #[cfg(not(target_os = "linux"))]
    fn arm(&self, _after: Duration) {}

    #[cfg(target_os = "linux")]
    fn drain(&self) {
        use std::os::fd::AsRawFd;
        let mut v = [0u8; 8];
        // SAFETY: reading 8 bytes into a local buffer from our non-blocking fd.
        unsafe {
            libc::read(self.fd.as_raw_fd(), v.as_mut_ptr().cast(), 8);
        }
    }
    #[cfg(not(target_os = "linux"))]
    fn drain(&self) {}
}

/// Poll-before-sleep: how many non-blocking polls precede a sleeping one, and
/// when to stop trying (a slow server answers in milliseconds, not µs).
struct Spin {
    polls: u32,
    misses: u32,
    off_for: u32,
}

impl Spin {
    /// Consecutive fruitless rounds of polls before the looking stops.
    const GIVE_UP: u32 = 16;
    /// Waits without looking, after giving up, before trying again.
    const BACK_OFF: u32 = 512;

    /// Non-blocking polls before a sleeping one. Polling at all measured
    /// better than none on the benchmark's keep-alive scenario: nginx served
    /// 4–54 % more requests per second (it no longer wakes a sleeping client
    /// for most answers) and the client's requests per CPU-s were as good or
    /// better (docs/benchmarks.md, run H). One, not two: counting hits per
    /// poll (session 7), the first poll found events in about half of the
    /// rounds (117,000 of 240,000), the second in 2,000 of the 122,000 left,
    /// so the second was mostly a wasted system call; one poll gave ~4 % more
    /// requests per CPU-s (median of 10 paired rounds).
    const POLLS: u32 = 1;

    fn new() -> Spin {
        Spin {
            polls: Self::POLLS,
            misses: 0,
            off_for: 0,
        }
    }

    fn armed(&mut self) -> bool {
        if self.polls == 0 {
            return false;
        }
        if self.off_for > 0 {
            self.off_for -= 1;
            return false;
        }
        true
    }

    fn hit(&mut self) {
        self.misses = 0;
    }

    fn miss(&mut self) {
        self.misses += 1;
        if self.misses >= Self::GIVE_UP {
            self.misses = 0;
            self.off_for = Self::BACK_OFF;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Spin;

    /// A slow server: rounds of polls that find nothing switch the polling
    /// off for a while, then it is tried again.
    #[test]
    fn spin_gives_up_on_a_slow_server_and_tries_again() {
        let mut s = Spin::new();
        for _ in 0..Spin::GIVE_UP {
            assert!(s.armed());
            s.miss();
        }
        let off = (0..Spin::BACK_OFF).filter(|_| !s.armed()).count();
        assert_eq!(off as u32, Spin::BACK_OFF, "off for the whole back-off");
        assert!(s.armed(), "tried again after the back-off");
    }

    /// A fast server: a round that finds an answer starts the count again,
    /// so scattered misses never switch the polling off.
    #[test]
    fn spin_stays_on_while_polls_find_answers() {
        let mut s = Spin::new();
        for round in 0..10 * Spin::GIVE_UP {
            assert!(s.armed(), "round {round}");
            if round % 4 == 0 {
                s.hit();
            } else {
                s.miss();
            }
        }
    }
}
