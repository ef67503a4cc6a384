//! `--scenario` over HTTP/2: a virtual user per stream, driven by the same
//! workload as the HTTP/1 worker's ([`ScenarioLoad`]: the choice of the next
//! request, what an answer or a failure does, think times) and the same
//! [`Scenario`] calls (`prepare`/`spec`, `prepare_capture`,
//! `redirect_cookies`), so sessions, cookies, extraction, checks, CSV rows
//! and think times mean the same. Each
//! request's spec ([`Scenario::spec`]) becomes an `Http2Request` with
//! `Http2Request::from_spec` (no HTTP/1 bytes parsed); a request to the run's
//! own host is a stream on the stream's connection, one to another host of
//! the scenario goes over the stream's [`Away`] connection there (HTTP/2:
//! TLS with ALPN `h2` for https, prior knowledge for http).
//!
//! Open loop with a session scenario, each arrival is a journey walked on
//! the stream that dequeued it ([`arrival`]; see [`crate::workload`]).
//! `--abort-on-fail`: each such stream keeps a place in the worker's
//! [`Steps`] with the intended time of its journey's pending step (the
//! arrival it holds, the step in flight, the next one while the user thinks
//! or waits for a stream); the control task counts them with the arrivals
//! still queued ([`ScWorker::publish_overdue`], as the HTTP/1 worker does).
//!
//! A request to the run's own host that the server refused unprocessed
//! (GOAWAY, REFUSED_STREAM) is sent again once, as plain requests are
//! (`h2run/exchange.rs`): the ledger holds it as refused with its intended
//! time, the user keeps it chosen (its `sent` count is taken back, no
//! answer is recorded) and sends it on the next stream it gets, on a
//! connection opened since the refusal after GOAWAY.
//!
//! A journey outlives its connection too. When its step was refused, or its
//! connection takes no new stream when the next step is due (GOAWAY, or
//! closed, as HTTP/1 reconnects), the journey is *parked*: its user waits
//! in the worker's [`Parked`] queue with the step's intended time, the step
//! held in the ledger, and the next free stream of a connection that may
//! send it takes the journey before new arrivals ([`resume`]). A refused
//! step is sent once more (counted `retried`); a second refusal fails it,
//! and so does the loss of the connection a parked step was resumed on
//! before the step went out (a server that closes every connection shows
//! in the errors instead of moving journeys around forever).
//!
//! Virtual users outlive their stream task (a connection replaced after
//! GOAWAY keeps its users' cookies and session steps): a stream takes one
//! from the worker's pool and gives it back when it ends. Their ids are the
//! worker's index plus multiples of the worker count, so no two workers
//! share one (data rows per user stay distinct).

use super::errors::Fail;
use super::exchange::answer_by;
use super::follow::{away_conn, away_exchange, follow, Away, Outgoing, Redirected};
use super::{Conn, ConnCtx, Req, WorkerState};
use crate::h1::Capture;
use crate::scenario::{Scenario, Vu};
use crate::session::Want;
use crate::workload::{Ended, ScenarioLoad, Then};
use redline_stats::{ErrorKind, Journeys, RequestStats, Timing};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A worker's scenario state: the per-request numbers, the request choice
/// counters, and the virtual users not in a stream now.
pub(super) struct ScWorker {
    s: Arc<Scenario>,
    /// Choices, per-request numbers, think times (shared with the HTTP/1 worker).
    load: RefCell<ScenarioLoad>,
    /// Virtual-user ids advance by the worker count.
    stride: u64,
    pool: RefCell<Vec<Vu>>,
    next_id: Cell<u64>,
    /// Open-loop journeys: their later steps taken from the ledger (the
    /// rest of what the schedule released were arrivals).
    later_steps: Cell<u64>,
    /// Open-loop sessions: arrivals are journeys.
    journeys_on: bool,
    /// Open-loop sessions: the journeys' pending steps, one place per stream.
    steps: Steps,
    /// Open-loop sessions: users thinking before their journey's next step.
    thinking: Cell<u64>,
    /// Open-loop sessions: journeys waiting for a stream on another
    /// connection, oldest first (a handful: they wait for one stream each).
    parked: RefCell<VecDeque<Parked>>,
}

/// An open-loop journey whose next step waits for a stream of another
/// connection than the one it walked on (see the module text); the step is
/// held in the ledger.
pub(super) struct Parked {
    vu: Vu,
    /// The step's intended time.
    intended: Instant,
    /// The step was refused unprocessed: this is its second sending.
    again: bool,
    /// Only a connection whose serial is above this may send it (after GOAWAY).
    after: u64,
}

/// Open-loop sessions: the intended time of each stream's pending journey
/// step (None: the stream walks no journey now), for `--abort-on-fail`.
/// A place per stream task (taken with its virtual user, freed when the
/// task ends): at most `-c` × `--streams` places, and O(places) to count a
/// few times a second; a step's start and end only set its place.
#[derive(Default)]
pub(super) struct Steps {
    places: RefCell<Vec<Option<Instant>>>,
    free: RefCell<Vec<usize>>,
}

impl Steps {
    /// A place for a new stream (a freed one first).
    fn take(&self) -> usize {
        if let Some(i) = self.free.borrow_mut().pop() {
            return i;
        }
        let mut places = self.places.borrow_mut();
        places.push(None);
        places.len() - 1
    }

    /// The stream at place `i` ended.
    fn give_back(&self, i: usize) {
        self.set(i, None);
        self.free.borrow_mut().push(i);
    }

    /// The intended time of the step pending at place `i` (None: none now).
    fn set(&self, i: usize, t: Option<Instant>) {
        if let Some(p) = self.places.borrow_mut().get_mut(i) {
            *p = t;
        }
    }

    /// The intended times of the steps pending now.
    fn pending(&self) -> Vec<Instant> {
        self.places.borrow().iter().flatten().copied().collect()
    }
}

impl ScWorker {
    /// Worker `index` of `threads`.
    pub(super) fn new(
        s: Arc<Scenario>,
        index: usize,
        threads: usize,
        seed: u64,
        closed_loop: bool,
    ) -> ScWorker {
        let load = ScenarioLoad::new(s.clone(), index, threads, seed, !closed_loop);
        ScWorker {
            journeys_on: load.journeys_on(),
            steps: Steps::default(),
            load: RefCell::new(load),
            stride: threads.max(1) as u64,
            pool: RefCell::new(Vec::new()),
            next_id: Cell::new(index as u64),
            later_steps: Cell::new(0),
            thinking: Cell::new(0),
            parked: RefCell::new(VecDeque::new()),
            s,
        }
    }

    /// A user that waits in the pool, or a new one.
    fn pooled_vu(&self) -> Vu {
        self.pool.borrow_mut().pop().unwrap_or_else(|| {
            let id = self.next_id.get();
            self.next_id.set(id + self.stride);
            self.s.new_vu(id)
        })
    }

    /// A virtual user for a stream: one that waits in the pool, or a new one.
    pub(super) fn take_vu(self: &Rc<Self>) -> VuSlot {
        VuSlot {
            sc: self.clone(),
            vu: Some(self.pooled_vu()),
            in_flight: false,
            place: self.journeys_on.then(|| self.steps.take()),
        }
    }

    /// Publishes the per-request counts so far (live metrics).
    pub(super) fn publish_stats(&self, control: &crate::control::Control) {
        control.publish_requests(&self.load.borrow().stats);
    }

    /// The per-request numbers and the journeys (at the end of the run, after
    /// the stream tasks ended); `scheduled`: what the ledger scheduled.
    pub(super) fn finish(&self, scheduled: u64) -> (Vec<RequestStats>, Option<Journeys>) {
        let mut load = self.load.borrow_mut();
        // Journeys still waiting for a stream: the run ended before their
        // step was sent (the ledger counts the step not sent).
        for mut p in self.parked.borrow_mut().drain(..) {
            load.end_journey_at_end(&mut p.vu, false);
        }
        load.set_arrived(scheduled.saturating_sub(self.later_steps.get()));
        load.take_results()
    }

    /// `--abort-on-fail` with open-loop sessions: publishes, for each age
    /// asked, the journeys' steps unanswered that long at `now` (pending
    /// steps of the streams' journeys and the arrivals queued in `ledger`;
    /// see [`crate::overdue::journey_overdue`]). With each publish.
    pub(super) fn publish_overdue(
        &self,
        now: Instant,
        control: &crate::control::Control,
        ledger: &crate::ledger::Ledger,
    ) {
        let ages = control.journey_ages();
        if !self.journeys_on || ages.is_empty() {
            return;
        }
        let mut steps = self.steps.pending();
        steps.extend(self.parked.borrow().iter().map(|p| p.intended));
        let counts = crate::overdue::journey_overdue(now, ages, ledger, steps);
        control.publish_journey_overdue(&counts);
    }

    /// Open-loop sessions: whether users think before their journey's next
    /// step (not yet taken from the ledger: the worker is not done).
    pub(super) fn thinking(&self) -> bool {
        self.thinking.get() > 0
    }

    /// Open loop: an arrival's connection failed before its journey began.
    pub(super) fn journey_failed_to_start(&self) {
        self.load.borrow_mut().journey_failed_to_start();
    }

    /// Parks the journey of `slot`'s user, its step intended at `intended`
    /// held in the ledger (see [`Parked`]); the slot gets a fresh user for
    /// its next arrival. Wakes idle streams, and opens a connection when
    /// none may take it.
    fn park(
        &self,
        w: &Rc<WorkerState>,
        slot: &mut VuSlot,
        intended: Instant,
        again: bool,
        after: u64,
    ) {
        let Some(vu) = slot.vu.replace(self.pooled_vu()) else {
            return;
        };
        slot.pending_step(None);
        self.parked.borrow_mut().push_back(Parked {
            vu,
            intended,
            again,
            after,
        });
        w.work.notify_waiters();
        super::open::maybe_connect(w);
    }

    /// The oldest parked journey a stream of connection `serial` may walk
    /// on (none once the run is stopping: its step is not sent).
    pub(super) fn take_parked(&self, serial: u64, stopping: bool) -> Option<Parked> {
        let mut parked = self.parked.borrow_mut();
        if stopping || parked.is_empty() {
            return None;
        }
        let i = parked.iter().position(|p| p.after < serial)?;
        parked.remove(i)
    }

    /// Parked journeys: all, and those that wait for a connection newer
    /// than serial `newest`.
    pub(super) fn parked(&self, newest: u64) -> (u64, u64) {
        let parked = self.parked.borrow();
        let new = parked.iter().filter(|p| p.after >= newest).count();
        (parked.len() as u64, new as u64)
    }

    /// The connect of connection `serial` (opened for parked journeys)
    /// failed: the oldest journey it was for fails with its step. False
    /// when none waited for it.
    pub(super) fn fail_parked(
        &self,
        w: &WorkerState,
        serial: u64,
        kind: ErrorKind,
        msg: Cow<'static, str>,
    ) -> bool {
        let Some(mut p) = self.take_parked(serial, false) else {
            return false;
        };
        w.fail_held(kind, msg);
        self.load.borrow_mut().fail_journey(&mut p.vu);
        self.pool.borrow_mut().push(p.vu);
        true
    }
}

/// A stream's virtual user, given back to the pool when the stream ends.
pub(super) struct VuSlot {
    sc: Rc<ScWorker>,
    vu: Option<Vu>,
    /// A request of the user's is out (for a journey that ends with its task).
    in_flight: bool,
    /// Open-loop sessions: this stream's place in [`ScWorker::steps`].
    place: Option<usize>,
}

impl VuSlot {
    /// Open-loop sessions: the stream holds an arrival intended at `t` (it
    /// waits for a stream before its journey starts), or its journey's
    /// pending step is intended at `t` (None: no journey now).
    pub(super) fn pending_step(&self, t: Option<Instant>) {
        if let Some(i) = self.place {
            self.sc.steps.set(i, t);
        }
    }

    /// The stream walks `vu`'s journey: its own idle user goes to the pool.
    fn adopt(&mut self, vu: Vu) {
        if let Some(idle) = self.vu.replace(vu) {
            self.sc.pool.borrow_mut().push(idle);
        }
    }
}

impl Drop for VuSlot {
    fn drop(&mut self) {
        if let Some(i) = self.place.take() {
            self.sc.steps.give_back(i);
        }
        if let Some(mut vu) = self.vu.take() {
            // A journey ends with its stream task: the run ended (a step in
            // flight, or stopped) or the stream went away.
            if let Ok(mut load) = self.sc.load.try_borrow_mut() {
                load.end_journey_at_end(&mut vu, self.in_flight);
            }
            // A request chosen but never sent is chosen again next time.
            vu.redirected_from = None;
            self.sc.pool.borrow_mut().push(vu);
        }
    }
}

/// Sends the virtual user's next request (held by the caller) and reads the
/// answer; with `-L` follows its redirects with the user's cookie jar.
/// Returns the think time owed before the next one (closed loop).
/// `again`: the request is one the server refused, sent a second time (not
/// counted `sent` again, not retried again).
pub(super) async fn exchange(
    w: &Rc<WorkerState>,
    conn: &Conn,
    ctx: &ConnCtx,
    intended: Instant,
    again: bool,
    slot: &mut VuSlot,
    away: &mut Option<Away>,
) -> Option<Duration> {
    match exchange_then(w, conn, ctx, intended, again, slot, away).await {
        Ok(Then::Next(think)) => think,
        Ok(Then::Step { .. } | Then::Over | Then::Free) => None,
        Err(Refused) => {
            // Not processed: sent again later (the user keeps it chosen).
            w.refuse(intended, conn.retiring());
            None
        }
    }
}

/// Open loop: an arrival released at `t` (held by the caller). A session
/// scenario walks a journey on this stream: a fresh user, each step intended
/// at `t` plus the think times before it, the next step taken from the
/// ledger when it is due (after the think time, as the HTTP/1 worker takes
/// it), then held while it waits for a stream. Other scenarios send one request.
pub(super) async fn arrival(
    w: &Rc<WorkerState>,
    conn: &Conn,
    ctx: &ConnCtx,
    t: Instant,
    again: bool,
    slot: &mut VuSlot,
    away: &mut Option<Away>,
) {
    if !slot.sc.journeys_on {
        exchange(w, conn, ctx, t, again, slot, away).await;
        return;
    }
    slot.pending_step(Some(t));
    let sc = slot.sc.clone();
    if let Some(vu) = slot.vu.as_mut() {
        sc.load.borrow_mut().begin_journey(vu, t);
        journey(w, conn, ctx, t, false, slot, away).await;
    }
    slot.pending_step(None);
}

/// Open loop: walks a parked journey (see [`Parked`]) on this stream of a
/// connection that may send its step (the step is held in the ledger).
pub(super) async fn resume(
    w: &Rc<WorkerState>,
    conn: &Conn,
    ctx: &ConnCtx,
    p: Parked,
    slot: &mut VuSlot,
    away: &mut Option<Away>,
) {
    slot.adopt(p.vu);
    if p.again {
        w.ledger.borrow_mut().count_retry();
    }
    slot.pending_step(Some(p.intended));
    if step_ready(w, conn, ctx, slot, (p.intended, p.again), false).await {
        journey(w, conn, ctx, p.intended, p.again, slot, away).await;
    }
    slot.pending_step(None);
}

/// Open loop, session scenario: walks the journey of `slot`'s user from its
/// step intended at `intended` (held; `again`: refused once, sent a second
/// time) while this stream can carry it (see [`arrival`]); its pending
/// step's intended time is kept in the worker's [`Steps`]. The journey ends
/// here, or is parked for another connection's stream.
async fn journey(
    w: &Rc<WorkerState>,
    conn: &Conn,
    ctx: &ConnCtx,
    mut intended: Instant,
    mut again: bool,
    slot: &mut VuSlot,
    away: &mut Option<Away>,
) {
    let sc = slot.sc.clone();
    for _ in 0..sc.s.requests.len() {
        let (think, next) = match exchange_then(w, conn, ctx, intended, again, slot, away).await {
            Ok(Then::Step {
                think,
                intended: next,
            }) => (think, next),
            Ok(_) => return,
            Err(Refused) => {
                // Not processed: the user waits with its step (held again)
                // for a stream elsewhere; after GOAWAY, on a newer connection.
                w.ledger.borrow_mut().refuse_held();
                let after = if conn.retiring() { w.serials.get() } else { 0 };
                sc.park(w, slot, intended, true, after);
                return;
            }
        };
        // Overdue once `next` is old: while the user thinks, waits for a
        // stream, then in flight.
        slot.pending_step(Some(next));
        let Some(vu) = slot.vu.as_mut() else { return };
        // The user thinks first; nothing is scheduled meanwhile (as the
        // HTTP/1 worker's sleepers): a stop now ends the journey as stopped,
        // and no request of it counts as not sent.
        if w.stopping() {
            sc.load.borrow_mut().stop_journey(vu);
            return;
        }
        if !think.is_zero() {
            let _thinking = Thinking::new(w, &sc);
            let stopped = tokio::select! {
                _ = tokio::time::sleep(think) => false,
                _ = w.stop_n.notified() => true,
            };
            if stopped {
                sc.load.borrow_mut().stop_journey(vu);
                return;
            }
        }
        // The step is due: scheduled now, held while it waits for a stream.
        if !w.ledger.borrow_mut().take() {
            sc.load.borrow_mut().stop_journey(vu);
            return;
        }
        sc.later_steps.set(sc.later_steps.get() + 1);
        if !step_ready(w, conn, ctx, slot, (next, false), true).await {
            return;
        }
        intended = next;
        again = false;
    }
}

/// A journey's step intended at `intended` is held: waits for a stream of
/// this connection for it (true: one is ready and the run goes on). When
/// the connection takes no new stream (GOAWAY, closed), the journey is
/// parked for another's (`may_park`: the step was not parked before; a
/// parked step whose new connection goes too fails, as a request would, so
/// a server that closes every connection shows in the errors); when it
/// allows none within `--timeout`, the step fails and with it the journey.
async fn step_ready(
    w: &Rc<WorkerState>,
    conn: &Conn,
    ctx: &ConnCtx,
    slot: &mut VuSlot,
    (intended, again): (Instant, bool),
    may_park: bool,
) -> bool {
    use super::exchange::{no_stream, stream_ready, Waited};
    let sc = slot.sc.clone();
    let gone = || conn.retiring() || ctx.dead.get();
    let closed = || {
        let m = "the connection closed before the journey's step could be sent";
        (ErrorKind::Closed, Cow::Borrowed(m))
    };
    let fail = if gone() {
        (!may_park).then(closed)
    } else {
        match stream_ready(w, conn).await {
            Ok(()) => return !w.stopping(),
            Err(Waited::Stopped) => return false,
            Err(_) if gone() && may_park => None,
            Err(Waited::Failed(f)) => Some(f),
            Err(_) if gone() => Some(closed()),
            Err(_) => Some((ErrorKind::Timeout, no_stream())),
        }
    };
    match fail {
        Some((k, m)) => {
            w.fail_held(k, m);
            if let Some(vu) = slot.vu.as_mut() {
                sc.load.borrow_mut().fail_journey(vu);
            }
        }
        None if w.stopping() => {}
        None => sc.park(w, slot, intended, again, 0),
    }
    false
}

/// Counts a journey's user as thinking (the worker is not done while one
/// does and the run goes on: the ledger holds nothing for it meanwhile).
struct Thinking<'a> {
    w: &'a WorkerState,
    sc: &'a ScWorker,
}

impl<'a> Thinking<'a> {
    fn new(w: &'a WorkerState, sc: &'a ScWorker) -> Thinking<'a> {
        sc.thinking.set(sc.thinking.get() + 1);
        Thinking { w, sc }
    }
}

impl Drop for Thinking<'_> {
    fn drop(&mut self) {
        let n = self.sc.thinking.get() - 1;
        self.sc.thinking.set(n);
        if n == 0 {
            // The control task may be waiting for the last thinker.
            self.w.changed.notify_one();
        }
    }
}

/// [`exchange`], saying what the user does next.
async fn exchange_then(
    w: &Rc<WorkerState>,
    conn: &Conn,
    ctx: &ConnCtx,
    intended: Instant,
    again: bool,
    slot: &mut VuSlot,
    away: &mut Option<Away>,
) -> Result<Then, Refused> {
    let sc = slot.sc.clone();
    let Some(vu) = slot.vu.as_mut() else {
        return Ok(Then::Free);
    };
    let s: &Scenario = &sc.s;
    let r = sc.load.borrow_mut().next(vu);
    let q = &s.requests[r];
    let t = &s.targets[q.target];
    let plan = w.plan();
    let own = t.origin == plan.target.origin;
    slot.in_flight = true;
    let result = send(w, conn, s, r, vu, own, away, again, !again).await;
    slot.in_flight = false;
    // The connection this request went over was made for it: its connect time.
    let made = match (own, away.as_ref()) {
        (true, _) => ctx.connect_took.take(),
        (false, Some(a)) => a.ctx.connect_took.take(),
        (false, None) => None,
    };
    if let Some(d) = made {
        sc.load.borrow_mut().stats[r].connect.record(d);
    }
    let then = match result {
        Err(NotAnswered::Refused) => {
            // Not processed: the caller sends it again (the user keeps it
            // chosen; its `sent` is taken back).
            sc.load.borrow_mut().unsent(r);
            return Err(Refused);
        }
        Err(NotAnswered::Unsent(kind, msg)) => {
            w.fail_held(kind, msg);
            sc.load.borrow_mut().ended(vu, Ended::Failed)
        }
        Ok((_, Err((kind, msg)))) => {
            w.fail_in_flight(kind, msg);
            sc.load.borrow_mut().ended(vu, Ended::Failed)
        }
        Ok((sent, Ok(f))) => {
            let now = Instant::now();
            let wire = w.unattributed.replace(0);
            let t = Timing {
                intended,
                sent,
                first_byte: f.first_byte,
                done: now,
            };
            {
                let mut rec = w.rec.borrow_mut();
                if let Some(sv) = f.server.clone() {
                    rec.server_software = Some(sv);
                    w.want_server.set(false);
                }
                rec.bytes_read(wire);
                rec.response(&t, f.status, wire, f.body_bytes);
            }
            let how = Ended::Answer {
                status: f.status,
                timing: t,
                capture: f.capture.as_deref(),
            };
            let then = sc.load.borrow_mut().ended(vu, how);
            w.ledger.borrow_mut().finish_completed();
            w.ended(now);
            then
        }
    };
    Ok(then)
}

/// The server refused the request unprocessed (GOAWAY, REFUSED_STREAM): it
/// is still in flight in the ledger, for the caller to send again.
struct Refused;

/// A request that got no answer and is not an answered failure.
enum NotAnswered {
    /// It failed before it was sent (still held).
    Unsent(ErrorKind, Cow<'static, str>),
    /// The server refused it unprocessed (in flight still): it may go again.
    Refused,
}
use NotAnswered::Unsent;

/// Sends request `r` and reads its answer (and its redirects): when it was
/// sent and how it ended, or why it could not be sent. `again`: a refused
/// request's second sending (not counted `sent` again); `retry`: a refusal
/// comes back as [`NotAnswered::Refused`] instead of a failure.
#[allow(clippy::too_many_arguments)]
async fn send(
    w: &Rc<WorkerState>,
    conn: &Conn,
    s: &Scenario,
    r: usize,
    vu: &mut Vu,
    own: bool,
    away: &mut Option<Away>,
    again: bool,
    retry: bool,
) -> Result<(Instant, Result<super::exchange::Fetched, Fail>), NotAnswered> {
    let q = &s.requests[r];
    let t = &s.targets[q.target];
    s.prepare(r, vu, false);
    let scheme = if t.tls.is_some() { "https" } else { "http" };
    let mut cap = Capture::default();
    s.prepare_capture(r, &mut cap);
    let want = Some((cap.want_headers, cap.want_body));
    let follow_on = w.plan().follow.as_deref();
    let counted_sent = || {
        w.sent(again);
        if let Some(sc) = w.sc.as_ref() {
            sc.load.borrow_mut().sent(r);
        }
    };
    let (sent, got) = if own {
        let req = Req::from_spec(s.spec(r, vu), scheme)
            .map_err(|e| Unsent(ErrorKind::Other, Cow::Owned(e)))?;
        let want = Want {
            server: w.want_server.get(),
            location: follow_on.is_some(),
            capture: want,
        };
        let sent = Instant::now();
        let reply = conn.send(&req, want).map_err(|(k, m)| Unsent(k, m))?;
        counted_sent();
        let got = answer_by(sent + q.timeout, reply.refusable()).await;
        let got = match got {
            Ok(f) => Ok(f),
            Err(u) if u.unprocessed && retry => return Err(NotAnswered::Refused),
            Err(u) => Err(u.fail),
        };
        (sent, got)
    } else {
        // Another host of the scenario: this stream's connection there, in
        // the protocol that server picked.
        let resolve = || -> Result<Arc<crate::redirect::Origin>, Fail> {
            Ok(Arc::new(crate::redirect::Origin {
                key: t.origin.clone(),
                host_header: t.host_header.clone(),
                addr: t.addr,
                tls: t.tls.clone(),
            }))
        };
        away_conn(w, t.origin.clone(), resolve, away)
            .await
            .map_err(|(k, m)| Unsent(k, m))?;
        let out = Outgoing {
            spec: s.spec(r, vu),
            scheme,
            timeout: q.timeout,
            capture: want,
        };
        let r = away_exchange(w, away, out, counted_sent, retry).await;
        match r {
            Ok((sent, f)) => (sent, Ok(f)),
            Err(Ok((k, m))) => return Err(Unsent(k, m)),
            Err(Err(e)) => (Instant::now(), Err(e)),
        }
    };
    let got = match (got, follow_on) {
        (Ok(f), Some(fo)) if crate::redirect::is_redirect(f.status) && f.location.is_some() => {
            let orig = s.spec(r, vu).clone();
            let req = Redirected {
                orig: &orig,
                own: &t.origin,
                timeout: q.timeout,
                capture: want,
                jar: Some((s, r, vu)),
            };
            follow(w, own.then_some(conn), fo, f, away, req).await
        }
        (got, _) => got,
    };
    Ok((sent, got))
}
