//! One worker's load, protocol-free ([`Core`]): its slots, ledger, control
//! tick, recorder and workload, and the steps of the control loop that every
//! driver runs between its I/O events ([`Core::tick`]): the stop, the open
//! loop's release of due send times (and the connects it asks for), stage
//! levels, think times that end, slots waiting for a connection, publishing
//! live counts. `lifecycle.rs` is what happens when a request ends.

use super::spec::{thread_cpu, WorkerResult, WorkerSpec};
use super::{ConnState, Destination, Link, Slot};
use crate::control::Control;
use crate::ledger::Ledger;
use crate::plan::Plan;
use crate::scenario::Vu;
use crate::workload::ScenarioLoad;
use redline_stats::Recorder;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

/// Open loop: at most this many connects per pass of the event loop (a
/// pass takes tens of µs at high rates: after a server stall, hundreds of
/// connects in one go, each a synchronous handshake on loopback of ~30–50 µs,
/// held back the schedule by 10–15 ms).
const CONNECTS_PER_PASS: u32 = 4;

/// A scenario run's per-worker state: a virtual user per slot (closed loop:
/// the slot's user for the whole run; open-loop sessions: the journey the
/// slot walks now) and the protocol-free workload.
pub(crate) struct ScenarioSlots {
    /// Choices, per-request numbers, think times, journeys.
    pub(crate) load: ScenarioLoad,
    /// The virtual user of each slot.
    pub(crate) vus: Vec<Vu>,
    /// Virtual users thinking, by wake-up time.
    pub(crate) sleepers: BinaryHeap<Reverse<(Instant, u32)>>,
}

/// One worker's load: every mode's state, without a socket.
pub(crate) struct Core<'p> {
    pub(crate) plan: &'p Plan,
    /// The run's common start.
    pub(crate) start: Instant,
    pub(crate) scenario: Option<ScenarioSlots>,
    pub(crate) slots: Vec<Slot>,
    pub(crate) rec: Recorder,
    /// Where every request is (budget, held, pending, in flight, ended).
    pub(crate) ledger: Ledger,
    /// Stop, drain, stage level, live counts.
    pub(crate) control: Control,
    pub(crate) open_loop: bool,
    /// Open loop: connected slots without a request, oldest first.
    pub(crate) idle: VecDeque<u32>,
    /// Slots without a connection (and, with `--stages`, parked ones).
    pub(crate) free: Vec<u32>,
    /// Slots with a request (or a redirect hop) that need a new connection.
    pub(crate) restart: VecDeque<u32>,
    /// Connections open and being opened (the driver counts them).
    pub(crate) open: u64,
    pub(crate) connecting: u64,
    pub(crate) peak_open: u64,
    /// Open loop: connects still allowed in this pass of the event loop.
    pub(crate) connects_left: u32,
    /// Open loop: a send time is released once it is this overdue, or at
    /// the driver's next timer tick (which sets it to zero for its pass), so
    /// the sends of a window go together (see `ioloop::Sleeper`).
    pub(crate) hold: Duration,
    pub(crate) last_done: Instant,
    /// The `Server` header is still wanted (until the first answer names it).
    pub(crate) want_server: bool,
    /// Closed-loop level control (`--stages`): slots not parked, slots
    /// wanted; parked slots wait in `free`.
    pub(crate) staged: bool,
    pub(crate) active: u64,
    pub(crate) target: u64,
}

impl<'p> Core<'p> {
    /// A worker's load with `slots` slots.
    pub(crate) fn new(plan: &'p Plan, spec: WorkerSpec, slots: usize) -> Core<'p> {
        let open_loop = spec.pacer.is_some();
        let staged = spec.levels.is_some();
        let now = Instant::now();
        Core {
            start: spec.start,
            plan,
            scenario: plan.scenario.as_ref().map(|s| ScenarioSlots {
                vus: (0..slots as u64)
                    .map(|i| s.new_vu(spec.first_vu + i))
                    .collect(),
                load: ScenarioLoad::new(s.clone(), spec.index, plan.threads, plan.seed, open_loop),
                sleepers: BinaryHeap::new(),
            }),
            slots: (0..slots).map(|_| Slot::new(now)).collect(),
            rec: Recorder::new(spec.start),
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
            open_loop,
            idle: VecDeque::new(),
            free: (0..slots as u32).rev().collect(),
            restart: VecDeque::new(),
            open: 0,
            connecting: 0,
            peak_open: 0,
            connects_left: CONNECTS_PER_PASS,
            hold: Duration::ZERO,
            last_done: spec.start,
            want_server: true,
            staged,
            active: 0,
            target: slots as u64,
        }
    }

    /// Closed loop: every slot takes its first request (with `--stages`: as
    /// many as the level wants; the rest start parked) and waits for its
    /// connection. Open loop: nothing until the schedule releases requests.
    pub(crate) fn start(&mut self) {
        let start = self.start;
        if self.open_loop {
            return;
        }
        self.free.clear();
        let n = self.slots.len() as u32;
        let first = match self.control.first_level() {
            Some(level) => {
                self.target = level;
                self.target.min(n as u64) as u32
            }
            None => n,
        };
        for i in 0..first {
            if self.take_for(i, ConnState::Closed) {
                let s = &mut self.slots[i as usize];
                s.intended = start;
                s.has_request = true;
                self.restart.push_back(i);
            }
        }
        self.active = first as u64;
        self.free.extend((first..n).rev());
    }

    /// One pass of the control loop, between the driver's I/O events: the
    /// stop when due, time-outs (the driver's `expire`), the open-loop
    /// release, think times that ended, the stage level, slots waiting for a
    /// connection, and live counts. True when the worker is done.
    pub(crate) fn tick(&mut self, link: &mut impl Link, now: Instant) -> bool {
        if self.control.stop_due(now) {
            self.begin_stop(link, now);
        }
        link.expire(self, now);
        self.connects_left = CONNECTS_PER_PASS;
        if self.open_loop {
            self.release(link, now);
        }
        if self.scenario.is_some() {
            self.wake_sleepers(link, now);
        }
        if !self.open_loop {
            if let Some(level) = self.control.level_due(now) {
                self.adjust_level(link, level, now);
            }
        }
        self.process_restarts(link, now);
        if self.control.finished(now, &self.ledger) && !self.journeys_thinking() {
            return true;
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
        false
    }

    /// When the core next needs a pass (besides I/O): now when slots wait to
    /// connect or the open loop wants connects; else the earliest of a think
    /// time's end, the control tick's next wake and a 250 ms heartbeat
    /// (progress, Ctrl-C). The schedule's next send time is
    /// [`Ledger::next_due`], which a driver may time more finely.
    pub(crate) fn next_wake(&self, now: Instant) -> Instant {
        if !self.restart.is_empty() {
            return now;
        }
        if self.open_loop
            && !self.ledger.stopping()
            && self.ledger.pending() as u64 > self.connecting
            && !self.free.is_empty()
        {
            return now; // more connects wanted (see `release`)
        }
        let mut next = now + Duration::from_millis(250);
        if let Some(Reverse((t, _))) = self.scenario.as_ref().and_then(|s| s.sleepers.peek()) {
            next = next.min(*t);
        }
        if let Some(t) = self.control.next_wake() {
            next = next.min(t);
        }
        next
    }

    /// Closed loop with `--stages`: starts parked slots when the level rose to
    /// `level`; when it fell, slots park themselves as their requests end (`after`).
    pub(crate) fn adjust_level(&mut self, link: &mut impl Link, level: u64, now: Instant) {
        self.target = level;
        while self.active < self.target {
            let Some(i) = self.free.pop() else { break };
            if !self.take_for(i, link.state(i)) {
                self.free.push(i);
                break;
            }
            let s = &mut self.slots[i as usize];
            s.intended = now;
            s.has_request = true;
            self.restart.push_back(i);
            self.active += 1;
        }
    }

    /// Sending stops: the control starts the drain, the ledger stops taking,
    /// and requests held by slots that will not connect are not sent.
    pub(crate) fn begin_stop(&mut self, link: &mut impl Link, now: Instant) {
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
        for (i, s) in self.slots.iter_mut().enumerate() {
            // (A redirect hop connecting is a request already sent: in flight.)
            if s.has_request && link.state(i as u32).opening() && !s.in_flight() {
                s.has_request = false;
                self.ledger.drop_held();
            }
        }
        for i in std::mem::take(&mut self.restart) {
            let s = &mut self.slots[i as usize];
            if s.has_request {
                s.has_request = false;
                let sent = s.in_flight();
                s.redir = None;
                s.again = false;
                if sent {
                    // Sent (redirected, or refused unprocessed), and now
                    // waiting for a connection that will not be made: in
                    // flight at the end.
                    self.ledger.abandon_in_flight();
                } else {
                    self.ledger.drop_held();
                }
            }
        }
    }

    /// Closed loop: takes one request for slot `i` (held by it; `state` is
    /// its connection's). With `--requests-per-conn K` and a request count, a
    /// new connection reserves a block of K requests, so `-n N` makes exactly
    /// ⌈N/K⌉ connections however the slots interleave.
    #[inline]
    pub(crate) fn take_for(&mut self, i: u32, state: ConnState) -> bool {
        let s = &mut self.slots[i as usize];
        if s.quota > 0 {
            return self.ledger.take_reserved(&mut s.quota);
        }
        if let (Some(k), Some(_), ConnState::Closed) =
            (self.plan.requests_per_conn, self.ledger.budget(), state)
        {
            let (quota, first) = self.ledger.reserve(k, 1);
            s.quota = quota;
            return first == 1;
        }
        self.ledger.take()
    }

    /// Open loop: moves due send times (those `hold` overdue) onto idle slots
    /// or the pending queue, and opens connections for waiting requests (up
    /// to the cap, a few per pass).
    pub(crate) fn release<L: Link>(&mut self, link: &mut L, now: Instant) {
        // The slot sent last in this pass (see `pop_idle`).
        let mut prev = None;
        let by = now.checked_sub(self.hold).unwrap_or(now);
        while let Some(t) = self.ledger.release_due(by) {
            self.rec.released(now.saturating_duration_since(t));
            if let Some(sc) = self.scenario.as_mut() {
                sc.load.arrived();
            }
            if self.ledger.pending() == 0 {
                if let Some(i) = self.pop_idle(link, prev) {
                    self.send(link, i, t, now);
                    prev = Some(i);
                    continue;
                }
            }
            self.ledger.enqueue(t);
            self.rec.counters.waited_for_connection += 1;
        }
        // Requests queued while a connection was busy go on slots idle now
        // (a queue that only answers drained would keep them waiting behind
        // idle connections), oldest first.
        while self.ledger.pending() > 0 {
            let Some(i) = self.pop_idle(link, prev) else {
                break;
            };
            let Some(t) = self.ledger.dequeue() else {
                self.idle.push_back(i);
                break;
            };
            self.send(link, i, t, now);
            prev = Some(i);
        }
        while (self.ledger.pending() as u64) > self.connecting && self.connects_left > 0 {
            let Some(i) = self.free.pop() else { break };
            self.connects_left -= 1;
            link.connect(self, i, now);
        }
    }

    /// Open loop: an idle slot not walking a journey. When slots share
    /// connections, the requests of one pass go on one connection (after
    /// `prev`, an idle slot on its connection): one write and one answer
    /// read serve them all, as h2load's per-connection bursts do. The first
    /// of a pass takes the slot idle longest, so passes take the
    /// connections in turn and each carries its share.
    pub(crate) fn pop_idle<L: Link>(&mut self, link: &L, prev: Option<u32>) -> Option<u32> {
        if L::SHARES_CONNECTIONS {
            return self.pop_idle_shared(link, prev);
        }
        while let Some(i) = self.idle.pop_back() {
            if self.sendable(link, i) {
                return Some(i);
            }
        }
        None
    }

    /// Slot `i` (on the idle list) can take a released request.
    fn sendable(&self, link: &impl Link, i: u32) -> bool {
        let walking = self
            .scenario
            .as_ref()
            .is_some_and(|s| s.vus[i as usize].journey.is_some());
        link.state(i) == ConnState::Idle && !walking
    }

    /// [`Core::pop_idle`] for slots that share connections: `prev`'s
    /// connection first (looking at the 64 oldest idle slots: a bounded
    /// scan), else the oldest.
    fn pop_idle_shared(&mut self, link: &impl Link, prev: Option<u32>) -> Option<u32> {
        if let Some(p) = prev {
            let near = self
                .idle
                .iter()
                .take(64)
                .position(|&j| link.same_connection(p, j) && self.sendable(link, j));
            if let Some(i) = near.and_then(|k| self.idle.remove(k)) {
                return Some(i);
            }
        }
        while let Some(i) = self.idle.pop_front() {
            if self.sendable(link, i) {
                return Some(i);
            }
        }
        None
    }

    /// Open-loop sessions: whether journeys think before their next step
    /// (the worker is not done while the run goes on).
    pub(crate) fn journeys_thinking(&self) -> bool {
        self.open_loop
            && !self.control.stopping()
            && self
                .scenario
                .as_ref()
                .is_some_and(|s| !s.sleepers.is_empty())
    }

    /// Slots that wait for a new connection connect; a slot whose connection
    /// came up idle sends its request.
    pub(crate) fn process_restarts(&mut self, link: &mut impl Link, now: Instant) {
        for _ in 0..self.restart.len() {
            let Some(i) = self.restart.pop_front() else {
                break;
            };
            if self.ledger.stopping() {
                break;
            }
            match link.state(i) {
                ConnState::Closed => link.connect(self, i, now),
                ConnState::Idle if self.slots[i as usize].has_request => {
                    let intended = self.slots[i as usize].intended;
                    self.send(link, i, intended, now);
                }
                _ => {}
            }
        }
    }

    /// Where slot `i` connects now: a redirect hop's origin, the host of the
    /// scenario request its user sends next, or the plan's target. The
    /// slot's per-connection counts start again.
    pub(crate) fn destination(&mut self, i: u32) -> Destination<'_> {
        let s = &mut self.slots[i as usize];
        s.away = s.redir.as_ref().and_then(|r| r.to.clone());
        s.on_conn = 0;
        if s.away.is_none() && self.scenario.is_some() {
            let r = self.choose(i);
            let sc = self.scenario.as_mut().expect("scenario");
            let t = sc.load.scenario.requests[r].target;
            sc.vus[i as usize].target = t;
        }
        let s = &self.slots[i as usize];
        if let Some(o) = &s.away {
            return Destination {
                addr: o.addr,
                tls: o.tls.as_ref(),
            };
        }
        match &self.scenario {
            Some(sc) => {
                let t = &sc.load.scenario.targets[sc.vus[i as usize].target];
                Destination {
                    addr: t.addr,
                    tls: t.tls.as_ref(),
                }
            }
            None => Destination {
                addr: self.plan.target.addr,
                tls: self.plan.tls.as_ref(),
            },
        }
    }

    /// A slot waits for its connection to come up (until
    /// [`Core::connection_ready`] or [`Core::connect_failed`]).
    pub(crate) fn waiting(&mut self) {
        self.connecting += 1;
    }

    /// The driver opened a socket (counted until it closes).
    pub(crate) fn socket_opened(&mut self) {
        self.open += 1;
        self.peak_open = self.peak_open.max(self.open);
    }

    /// Slot `i` connects to the run's own origin (not a redirect's, not
    /// another host of a scenario): an HTTP/2 driver shares those connections.
    pub(crate) fn own_origin(&self, i: u32) -> bool {
        if self.slots[i as usize].away.is_some() {
            return false;
        }
        match &self.scenario {
            Some(sc) => {
                let t = &sc.load.scenario.targets[sc.vus[i as usize].target];
                t.origin == self.plan.target.origin
            }
            None => true,
        }
    }

    /// Slot `i`'s TCP connect took `took` (the run's and, in a scenario, the
    /// request's own connect time).
    pub(crate) fn connected(&mut self, i: u32, took: Duration) {
        self.rec.connected(took);
        if let Some(sc) = &mut self.scenario {
            if let Some(r) = sc.vus[i as usize].chosen {
                sc.load.stats[r].connect.record(took);
            }
        }
    }

    /// Ends the worker: journeys still going are counted, requests still out
    /// are counted, never dropped (`in_flight(i)`: slot `i`'s request is on the
    /// wire), the last counts are published.
    pub(crate) fn finish(mut self, link: &impl Link) -> WorkerResult {
        let end = self.control.end(self.last_done);
        if let Some(sc) = self.scenario.as_mut() {
            for (i, vu) in sc.vus.iter_mut().enumerate() {
                let s = &self.slots[i];
                let in_flight = s.has_request && (link.state(i as u32).busy() || s.in_flight());
                sc.load.end_journey_at_end(vu, in_flight);
            }
        }
        self.ledger.close_into(&mut self.rec.counters);
        self.rec.counters.peak_connections = self.peak_open;
        self.control.publish(&self.rec, self.open, 0);
        let cpu = thread_cpu();
        let interrupted = self.control.interrupted();
        let (requests, journeys) = self.scenario.map(|s| s.load.finish()).unwrap_or_default();
        WorkerResult {
            recorder: self.rec,
            end,
            cpu_user: cpu.0,
            cpu_sys: cpu.1,
            peak_open: self.peak_open,
            interrupted,
            requests,
            journeys,
            pacing: (Duration::ZERO, false),
        }
    }
}
