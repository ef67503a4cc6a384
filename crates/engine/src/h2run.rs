//! HTTP/2 load (`--http2` over TLS with ALPN, `--h2c` with prior knowledge),
//! using the `h2` crate on a single-threaded tokio runtime per worker thread.
//!
//! Same load models and the same [`Recorder`] as the HTTP/1 worker, so reports,
//! JSON, thresholds and history need nothing new. A worker owns `c` connections
//! (its share of `-c`); each connection runs `--streams` stream tasks. Closed
//! loop: a stream sends its next request as soon as its last one ended (intended
//! time: when it became free; for a new connection, before the connect). Open
//! loop: the pacer pushes intended send times onto a queue; an idle stream takes
//! each, and a connection is opened (up to the cap) only when the queue is longer
//! than the idle streams and the connections already being opened can take.
//! `--stages` (closed loop): a level counts streams (see `set_level`);
//! `--rate-stages` is the open loop with the staged pacer; `-L` follows
//! redirects with the HTTP/1 worker's rules (`h2run/follow.rs`); `--scenario`
//! runs a virtual user per stream (`h2run/scenario.rs`).
//! Everything of a worker lives on one thread, so the shared state is plain
//! `Cell`s and the recorder a `RefCell` never borrowed across an `.await`.
//!
//! Accounting is the shared [`Ledger`] (the HTTP/1 worker's too): every
//! request the load model issues is, at any instant, pending (open loop), held
//! (taken by a stream or a connect attempt, not yet written), in flight, or
//! ended (completed or failed); at the end, pending and held ones count as
//! `not_sent` and in-flight ones as `in_flight_at_end`. The stop, drain, stage
//! level and live counts are the shared [`Control`] tick, run by the worker's
//! `control` task; open-loop sends wait on the shared fine timer
//! (`timer::FineTimer`, a timerfd in the runtime's poller).
//!
//! (Over 800 lines: the closed-loop, stage and open-loop tasks, connection
//! setup, the exchange and error classification all work on one worker state
//! `WorkerState`; the accounting and the control tick already live in `ledger.rs` and
//! `control.rs`, and the sans-IO session seam of issue 18 splits the rest.)

mod follow;
mod scenario;

use crate::control::Control;
use crate::h1::Capture;
use crate::ledger::Ledger;
use crate::plan::Plan;
use crate::timer::{sleep_until, FineTimer};
use crate::worker::{thread_cpu, WorkerResult, WorkerSpec};
use bytes::Bytes;
use follow::{follow, Away};
use h2::client::SendRequest;
use redline_stats::{ErrorKind, Recorder, Timing};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinSet;

/// What every HTTP/2 worker of a run shares: the plan, the request in HTTP/2
/// form, the TLS connector, and the first fatal error (server without h2).
pub struct H2Setup {
    plan: Plan,
    template: Template,
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
    fatal: Mutex<Option<String>>,
}

impl H2Setup {
    /// The error that ended the run, if one did (e.g. the server does not offer h2).
    pub fn fatal(&self) -> Option<String> {
        self.fatal.lock().ok().and_then(|f| f.clone())
    }
}

/// The request, converted once from the plan's HTTP/1.1 bytes.
struct Template {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Template {
    fn request(&self) -> http::Request<()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.version_mut() = http::Version::HTTP_2;
        *r.headers_mut() = self.headers.clone();
        r
    }
}

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2) or expresses as pseudo-headers.
fn dropped_header(name: &str) -> bool {
    matches!(
        name,
        "host" | "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade"
    )
}

/// The plan's request in HTTP/2 form, from its request spec (built once by
/// the plan; no HTTP/1 bytes are parsed).
fn template(plan: &Plan) -> Result<Template, String> {
    let r = plan.spec.to_h2(plan.scheme())?;
    Ok(Template {
        method: r.method,
        uri: r.uri,
        headers: r.headers,
        body: r.body,
    })
}

/// Converts an HTTP/1.1 request redline built (the plan's, or a redirect
/// hop's rewritten by [`crate::redirect::hop_request`]) to HTTP/2 form: the
/// request line gives `:method` and `:path`, `Host` becomes `:authority`
/// (`host` when there is none), connection-specific headers go.
fn to_h2(request: &[u8], scheme: &str, host: &str) -> Result<Template, String> {
    let bad = |why: String| format!("cannot express the request in HTTP/2: {why}");
    let lines = request.windows(2).filter(|w| w == b"\r\n").count();
    let mut hs = vec![httparse::EMPTY_HEADER; lines];
    let mut req = httparse::Request::new(&mut hs);
    let head_len = match req.parse(request) {
        Ok(httparse::Status::Complete(n)) => n,
        // The plan refuses CR and LF; other control characters pass for HTTP/1
        // but not here. Name the header, never its value.
        _ => {
            let ctl = |c: &u8| (*c < 0x20 && *c != b'\t' && *c != b'\r') || *c == 0x7f;
            let name = request
                .split(|&b| b == b'\n')
                .skip(1)
                .take_while(|l| l.len() > 1)
                .find(|l| l.iter().any(ctl))
                .and_then(|l| l.split(|&b| b == b':').next())
                .map(|n| String::from_utf8_lossy(n).to_ascii_lowercase());
            return Err(bad(match name {
                Some(n) => format!("the value of header '{n}' holds a control character"),
                None => "the request head does not parse".into(),
            }));
        }
    };
    let mut authority = None;
    let mut headers = http::HeaderMap::new();
    // HTTP/2 frames the body itself: a chunked HTTP/1 body is sent as its data.
    let chunked = req.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding") && h.value.eq_ignore_ascii_case(b"chunked")
    });
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if name == "host" {
            authority = Some(String::from_utf8_lossy(h.value).into_owned());
        }
        if dropped_header(&name) || (name == "te" && !h.value.eq_ignore_ascii_case(b"trailers")) {
            continue;
        }
        // Names and values were checked by the plan; a failure here is a name
        // HTTP/2 cannot carry. Only the name is shown: values may be secrets.
        let n = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| bad(format!("header name '{name}'")))?;
        let v = http::HeaderValue::from_bytes(h.value)
            .map_err(|_| bad(format!("value of header '{name}'")))?;
        headers.append(n, v);
    }
    let authority = authority.unwrap_or_else(|| host.to_string());
    let path = req.path.unwrap_or("/");
    let uri: http::Uri = format!("{scheme}://{authority}{path}")
        .parse()
        .map_err(|e| bad(format!("URL: {e}")))?;
    let method = req.method.unwrap_or("GET");
    let method = http::Method::from_bytes(method.as_bytes())
        .map_err(|_| bad(format!("method '{method}'")))?;
    Ok(Template {
        method,
        uri,
        headers,
        body: if chunked {
            let b = crate::plan::unchunk(&request[head_len..])
                .ok_or_else(|| bad("a chunked body redline did not frame".into()))?;
            Bytes::from(b)
        } else {
            Bytes::copy_from_slice(&request[head_len..])
        },
    })
}

/// Prepares what the workers of an HTTP/2 run share.
pub fn prepare(plan: &Plan) -> Result<Arc<H2Setup>, String> {
    let template = template(plan)?;
    let tls = plan.tls.as_ref().map(|t| {
        let mut cfg = (*t.config).clone();
        cfg.alpn_protocols = vec![b"h2".to_vec()];
        (
            tokio_rustls::TlsConnector::from(Arc::new(cfg)),
            t.server_name.clone(),
        )
    });
    Ok(Arc::new(H2Setup {
        plan: plan.clone(),
        template,
        tls,
        fatal: Mutex::new(None),
    }))
}

/// One worker's state, shared by its tasks (all on the worker's thread).
struct WorkerState {
    s: Arc<H2Setup>,
    start: Instant,
    open_loop: bool,
    streams: u64,
    max_conns: u64,
    rec: RefCell<Recorder>,
    /// Where every request is (never borrowed across an `.await`).
    ledger: RefCell<Ledger>,
    /// Stop, drain, stage level, live counts (the `control` task's).
    control: RefCell<Control>,
    open: Cell<u64>,
    peak_open: Cell<u64>,
    /// Open loop: connections being set up, and connection tasks alive.
    connecting: Cell<u64>,
    conns_live: Cell<u64>,
    /// Open loop: streams waiting for work.
    idle: Cell<u64>,
    last_done: Cell<Instant>,
    want_server: Cell<bool>,
    /// Bytes read but not yet attributed to a response (for the per-second series).
    unattributed: Rc<Cell<u64>>,
    written: Rc<Cell<u64>>,
    /// Open loop: the queue got a request.
    work: Notify,
    /// Sending stops.
    stop_n: Notify,
    /// Something the control loop waits for may have changed.
    changed: Notify,
    /// Closed loop with `--stages` (the level counts streams).
    staged: bool,
    /// Closed loop: stream slots `0..target` run (slot `k` is stream
    /// `k % streams` of connection `k / streams`); the others are parked.
    /// `u64::MAX` without `--stages`.
    target: Cell<u64>,
    /// The level changed: parked streams and connections look again.
    level_n: Notify,
    /// `--scenario` runs: the virtual users and per-request numbers.
    sc: Option<Rc<scenario::ScWorker>>,
}

/// One connection, as its stream tasks see it.
struct ConnCtx {
    dead: Cell<bool>,
    closed: Notify,
    /// Requests this connection may still take (`--requests-per-conn`; None: no limit).
    quota: Cell<Option<u64>>,
    /// Closed loop: its streams neither parked (`--stages`) nor ended.
    running: Cell<u64>,
    /// Scenario runs: its TCP connect time, until the first request on it
    /// counts it in its own numbers (as the HTTP/1 worker does).
    connect_took: Cell<Option<Duration>>,
}

impl ConnCtx {
    fn new(quota: Option<u64>) -> Rc<ConnCtx> {
        Rc::new(ConnCtx {
            dead: Cell::new(false),
            closed: Notify::new(),
            quota: Cell::new(quota),
            running: Cell::new(0),
            connect_took: Cell::new(None),
        })
    }
}

/// Counts a closed-loop stream as running on its connection while it is
/// neither parked nor ended; the last one to stop wakes the parked ones (they
/// may have to end, so that the connection closes).
struct Running(Rc<ConnCtx>);

impl Running {
    fn new(ctx: Rc<ConnCtx>) -> Running {
        ctx.running.set(ctx.running.get() + 1);
        Running(ctx)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.set(self.0.running.get() - 1);
        if self.0.running.get() == 0 {
            self.0.closed.notify_waiters();
        }
    }
}

enum ConnectFail {
    /// The run is stopping: the attempt was abandoned.
    Stopped,
    Failed(ErrorKind, Cow<'static, str>),
}

/// Runs one HTTP/2 worker to completion on the current thread.
pub fn run_worker(setup: &Arc<H2Setup>, spec: WorkerSpec) -> WorkerResult {
    let open_loop = spec.pacer.is_some();
    let plan = &setup.plan;
    let streams = u64::from(plan.streams.max(1));
    let levels = if open_loop { None } else { spec.levels };
    // With --stages a level counts streams: the most this worker runs decides
    // its connection slots (see `plan::h2_connections`).
    let max_conns = match &levels {
        Some(l) => crate::plan::h2_connections(l.peak(), plan.streams),
        None => spec.connections,
    };
    let staged = levels.is_some();
    let w = Rc::new(WorkerState {
        s: setup.clone(),
        start: spec.start,
        open_loop,
        streams,
        max_conns,
        rec: RefCell::new(Recorder::new(spec.start)),
        ledger: RefCell::new(Ledger::new(
            if open_loop { None } else { spec.budget },
            spec.pacer,
            spec.start,
            spec.deadline,
        )),
        control: RefCell::new(Control::new(
            spec.start,
            spec.deadline,
            plan.grace,
            spec.stop.clone(),
            spec.live.clone(),
            levels,
        )),
        open: Cell::new(0),
        peak_open: Cell::new(0),
        connecting: Cell::new(0),
        conns_live: Cell::new(0),
        idle: Cell::new(0),
        last_done: Cell::new(spec.start),
        want_server: Cell::new(true),
        unattributed: Rc::new(Cell::new(0)),
        written: Rc::new(Cell::new(0)),
        work: Notify::new(),
        stop_n: Notify::new(),
        changed: Notify::new(),
        staged,
        target: Cell::new(u64::MAX),
        level_n: Notify::new(),
        sc: plan.scenario.clone().map(|s| {
            Rc::new(scenario::ScWorker::new(
                s,
                spec.index,
                plan.threads,
                plan.seed,
                !open_loop,
            ))
        }),
    });
    match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => {
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, control(w.clone()));
            // Dropping the tasks closes what is left; their state stays counted.
            drop(local);
            drop(rt);
        }
        Err(e) => w.rec.borrow_mut().error(
            ErrorKind::Other,
            Cow::Owned(format!("cannot start the HTTP/2 runtime: {e}")),
            Instant::now(),
        ),
    }
    let mut control = w.control.borrow_mut();
    let end = control.end(w.last_done.get());
    let mut rec = std::mem::replace(&mut *w.rec.borrow_mut(), Recorder::new(w.start));
    w.ledger.borrow_mut().close_into(&mut rec.counters);
    rec.counters.peak_connections = w.peak_open.get();
    rec.bytes_read(w.unattributed.get());
    rec.counters.bytes_written += w.written.get();
    control.publish(&rec, 0, 0);
    let interrupted = control.interrupted();
    drop(control);
    let scheduled = w.ledger.borrow().ends().scheduled;
    let (requests, journeys) = match w.sc.as_ref() {
        Some(s) => s.finish(scheduled),
        None => (Vec::new(), None),
    };
    let cpu = thread_cpu();
    WorkerResult {
        recorder: rec,
        end,
        cpu_user: cpu.0,
        cpu_sys: cpu.1,
        peak_open: w.peak_open.get(),
        interrupted,
        requests,
        journeys,
    }
}

/// The worker's main task: starts the load, runs the shared control tick
/// (deadline, Ctrl-C, stage level, publish) until the work is done.
async fn control(w: Rc<WorkerState>) {
    if w.open_loop {
        tokio::task::spawn_local(pace(w.clone()));
    } else {
        start_closed(&w);
    }
    loop {
        let now = Instant::now();
        if w.control.borrow_mut().stop_due(now) {
            begin_stop(&w, now);
        }
        let level = w.control.borrow_mut().level_due(now);
        if let Some(level) = level {
            set_level(&w, level);
        }
        if w.control.borrow().finished(now, &w.ledger.borrow()) {
            break;
        }
        let wake = {
            let mut control = w.control.borrow_mut();
            let in_flight = w.ledger.borrow().in_flight();
            if control.publish_due(now, &mut w.rec.borrow_mut(), w.open.get(), in_flight) {
                if let Some(sc) = &w.sc {
                    sc.publish_stats(&control);
                }
            }
            let mut wake = control.next_publish().max(now + Duration::from_millis(1));
            if let Some(t) = control.next_wake() {
                wake = wake.min(t);
            }
            wake
        };
        tokio::select! {
            _ = w.changed.notified() => {}
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
    }
}

/// Closed loop with `--stages`: the level (this worker's share of the stage
/// level, in streams) changed. A rise wakes parked streams and connections;
/// after a fall, streams above the level park as their requests end, and a
/// connection none of whose streams is wanted closes (as the HTTP/1 worker's
/// `adjust_level` and `after` do with connections).
fn set_level(w: &WorkerState, target: u64) {
    if target != w.target.get() {
        w.target.set(target);
        w.level_n.notify_waiters();
    }
}

fn begin_stop(w: &WorkerState, now: Instant) {
    w.control.borrow_mut().begin_stop(now);
    w.ledger.borrow_mut().begin_stop(now);
    w.stop_n.notify_waiters();
    w.work.notify_waiters();
    w.level_n.notify_waiters();
}

impl WorkerState {
    fn plan(&self) -> &Plan {
        &self.s.plan
    }

    /// Sending has stopped.
    fn stopping(&self) -> bool {
        self.ledger.borrow().stopping()
    }

    /// Closed loop: the streams connection slot `ci` runs at the current level.
    fn wanted(&self, ci: u64) -> u64 {
        self.target
            .get()
            .saturating_sub(ci.saturating_mul(self.streams))
            .min(self.streams)
    }

    /// Closed loop: stream slot `slot` is above the level and must not take work.
    fn parked(&self, slot: u64) -> bool {
        slot >= self.target.get()
    }

    /// Counts a failed request that was held (taken but not yet sent).
    fn fail_held(&self, kind: ErrorKind, msg: Cow<'static, str>) {
        self.ledger.borrow_mut().fail_held();
        self.failed(kind, msg);
    }

    /// A held request was written.
    fn sent(&self) {
        self.ledger.borrow_mut().sent();
        self.rec.borrow_mut().counters.sent += 1;
    }

    /// A request in flight failed.
    fn fail_in_flight(&self, kind: ErrorKind, msg: Cow<'static, str>) {
        self.ledger.borrow_mut().finish_failed();
        self.failed(kind, msg);
    }

    /// Records an error (the ledger's side is the caller's).
    fn failed(&self, kind: ErrorKind, msg: Cow<'static, str>) {
        let now = Instant::now();
        self.rec.borrow_mut().error(kind, msg, now);
        self.last_done.set(now);
        self.changed.notify_one();
    }

    /// Closed loop: takes up to `n` requests from the budget; how many were taken.
    fn take_n(&self, n: u64) -> u64 {
        self.ledger.borrow_mut().take_n(n)
    }

    /// Closed loop: takes one request for a stream of connection `c`.
    fn take_for(&self, c: &ConnCtx) -> bool {
        let mut ledger = self.ledger.borrow_mut();
        match c.quota.get() {
            Some(mut q) => {
                let took = ledger.take_reserved(&mut q);
                c.quota.set(Some(q));
                took
            }
            None => ledger.take(),
        }
    }

    /// Closed loop with `--requests-per-conn K`: a new connection reserves a
    /// block of K requests (fewer at the end of `-n`), so `-n N` makes ⌈N/K⌉
    /// connections; then takes the first `want` (the streams it runs) of them.
    fn reserve_block(&self, k: u64, want: u64) -> (Option<u64>, u64) {
        let (quota, first) = self.ledger.borrow_mut().reserve(k, want);
        (Some(quota), first)
    }

    /// Requests reserved by a connection that ended go back to the budget.
    fn return_quota(&self, c: &ConnCtx) {
        if let Some(q) = c.quota.replace(Some(0)) {
            self.ledger.borrow_mut().give_back(q);
            self.changed.notify_one();
        }
    }
}

// ---------------------------------------------------------------- closed loop

fn start_closed(w: &Rc<WorkerState>) {
    let c = w.max_conns;
    let first = w.control.borrow_mut().first_level();
    if let Some(level) = first {
        set_level(w, level);
    }
    let mut holds = Vec::with_capacity(c as usize);
    match w.plan().requests_per_conn {
        Some(k) => {
            for ci in 0..c {
                let want = w.wanted(ci);
                holds.push(if want > 0 {
                    w.reserve_block(k, want)
                } else {
                    (None, 0)
                });
            }
        }
        None => {
            // Spread the first requests so every connection gets one before any
            // gets a second: `-n 5 -c 4 --streams 10` opens 4 connections.
            let b = w.ledger.borrow().budget();
            for ci in 0..c {
                let n = match b {
                    Some(b) => crate::run::share(b, c, ci).min(w.streams),
                    None => w.wanted(ci),
                };
                holds.push((None, w.take_n(n)));
            }
        }
    }
    for (ci, (quota, held)) in holds.into_iter().enumerate() {
        // With --stages a slot above the starting level waits for its rise.
        if held > 0 || w.staged {
            tokio::task::spawn_local(closed_conn(w.clone(), ci as u64, quota, held));
        }
    }
}

/// One closed-loop connection slot: connects, runs its streams, and reconnects
/// while there is work (after GOAWAY, a failure, or `--requests-per-conn`).
async fn closed_conn(w: Rc<WorkerState>, ci: u64, mut quota: Option<u64>, mut held: u64) {
    let mut intended = w.start;
    loop {
        if held == 0 {
            let want = w.wanted(ci);
            if want == 0 {
                // --stages: the level is below this connection; wait for a rise.
                if w.stopping() {
                    return;
                }
                tokio::select! {
                    _ = w.level_n.notified() => {}
                    _ = w.stop_n.notified() => {}
                }
                continue;
            }
            match w.plan().requests_per_conn {
                Some(k) => (quota, held) = w.reserve_block(k, want),
                None => held = w.take_n(want),
            }
            if held == 0 {
                w.changed.notify_one();
                return;
            }
            intended = Instant::now();
        }
        let ctx = ConnCtx::new(quota);
        match connect(&w, &ctx).await {
            Err(ConnectFail::Stopped) => return, // held requests count as not sent
            Err(ConnectFail::Failed(kind, msg)) => {
                for _ in 0..held {
                    w.fail_held(kind, msg.clone());
                }
                held = 0;
                w.return_quota(&ctx);
                // A failure can be immediate (no socket, no port): let the rest run.
                tokio::task::yield_now().await;
            }
            Ok(sr) => {
                let mut set = JoinSet::new();
                for j in 0..w.streams {
                    let first = (j < held).then_some(intended);
                    let slot = ci * w.streams + j;
                    set.spawn_local(closed_stream(
                        w.clone(),
                        ctx.clone(),
                        sr.clone(),
                        first,
                        slot,
                    ));
                }
                drop(sr);
                held = 0;
                while set.join_next().await.is_some() {}
                w.return_quota(&ctx);
            }
        }
        quota = None;
        if w.stopping() {
            return;
        }
    }
}

async fn closed_stream(
    w: Rc<WorkerState>,
    ctx: Rc<ConnCtx>,
    mut sr: SendRequest<Bytes>,
    mut first: Option<Instant>,
    slot: u64,
) {
    let mut away = None;
    let mut vu = w.sc.as_ref().map(|sc| sc.take_vu());
    let ci = slot / w.streams;
    let mut running = Some(Running::new(ctx.clone()));
    loop {
        if first.is_none() && w.parked(slot) {
            // --stages: above the level this stream parks. The connection
            // closes once none of its streams runs and none is wanted (or it
            // may take no more requests); a rise wakes the stream again.
            drop(running.take());
            loop {
                if w.stopping() || ctx.dead.get() {
                    return;
                }
                if !w.parked(slot) {
                    running = Some(Running::new(ctx.clone()));
                    break;
                }
                if ctx.running.get() == 0 && (w.wanted(ci) == 0 || ctx.quota.get() == Some(0)) {
                    ctx.closed.notify_waiters();
                    return;
                }
                tokio::select! {
                    _ = w.level_n.notified() => {}
                    _ = ctx.closed.notified() => {}
                    _ = w.stop_n.notified() => {}
                }
            }
        }
        let free_at = Instant::now();
        let ready = stream_ready(&w, &mut sr).await;
        let intended = match (first.take(), ready) {
            (Some(_), Err(Waited::Failed(e))) => {
                let (k, m) = classify(&e);
                return w.fail_held(k, m);
            }
            (Some(_), Err(Waited::TimedOut)) => {
                return w.fail_held(ErrorKind::Timeout, no_stream())
            }
            (Some(_), Err(Waited::Stopped)) => return, // held: not sent
            (Some(t), Ok(())) => t,
            // The connection is gone, allows no stream or the run stops:
            // nothing was taken; the connection is replaced when its streams end.
            (None, Err(_)) => return,
            (None, Ok(())) => {
                if !w.take_for(&ctx) {
                    return;
                }
                free_at
            }
        };
        if w.stopping() {
            return; // held: not sent
        }
        match vu.as_mut() {
            None => exchange(&w, &mut sr, intended, &mut away).await,
            Some(user) => {
                let think = scenario::exchange(&w, &mut sr, &ctx, intended, user, &mut away).await;
                // The virtual user thinks; its next request is due when it is done.
                if let Some(d) = think.filter(|d| !d.is_zero()) {
                    if w.stopping() {
                        return;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(d) => {}
                        _ = w.stop_n.notified() => return,
                    }
                }
            }
        }
    }
}

// ------------------------------------------------------------------ open loop

/// Open loop: releases requests at their intended times onto the queue.
async fn pace(w: Rc<WorkerState>) {
    let timer = FineTimer::new();
    let mut burst = 0u32;
    loop {
        // (Once stopping, the ledger counted the sends due before the stop.)
        let next = w.ledger.borrow().next_due();
        let Some(t) = next.filter(|_| !w.stopping()) else {
            break;
        };
        let now = Instant::now();
        if now < t {
            burst = 0;
            tokio::select! {
                _ = sleep_until(timer.as_ref(), t) => {}
                _ = w.stop_n.notified() => {}
            }
            continue; // check the stop again before releasing
        }
        // Behind schedule: release what is due, but let the streams run.
        burst += 1;
        if burst.is_multiple_of(64) {
            tokio::task::yield_now().await;
            continue;
        }
        {
            let mut ledger = w.ledger.borrow_mut();
            let Some(t) = ledger.release_due(now) else {
                continue;
            };
            let mut rec = w.rec.borrow_mut();
            rec.released(now.saturating_duration_since(t));
            if ledger.pending() as u64 >= w.idle.get() {
                rec.counters.waited_for_connection += 1;
            }
            ledger.enqueue(t);
        }
        w.work.notify_one();
        maybe_connect(&w);
    }
    w.changed.notify_one();
}

/// Open loop: opens connections while the queue is longer than what idle
/// streams and connections being set up will take, up to the cap.
fn maybe_connect(w: &Rc<WorkerState>) {
    while !w.stopping()
        && w.ledger.borrow().pending() as u64 > w.idle.get() + w.connecting.get() * w.streams
        && w.conns_live.get() < w.max_conns
    {
        w.conns_live.set(w.conns_live.get() + 1);
        w.connecting.set(w.connecting.get() + 1);
        tokio::task::spawn_local(open_conn(w.clone()));
    }
}

async fn open_conn(w: Rc<WorkerState>) {
    let ctx = ConnCtx::new(w.plan().requests_per_conn);
    let r = connect(&w, &ctx).await;
    w.connecting.set(w.connecting.get() - 1);
    match r {
        Err(ConnectFail::Stopped) => {}
        Err(ConnectFail::Failed(kind, msg)) => {
            // The connect was for the oldest waiting request: it fails with it.
            let failed = w.ledger.borrow_mut().fail_pending();
            if failed {
                w.failed(kind, msg);
                if let Some(sc) = w.sc.as_ref() {
                    sc.journey_failed_to_start();
                }
            }
            tokio::task::yield_now().await;
        }
        Ok(sr) => {
            let mut set = JoinSet::new();
            for _ in 0..w.streams {
                set.spawn_local(open_stream(w.clone(), ctx.clone(), sr.clone()));
            }
            drop(sr);
            while set.join_next().await.is_some() {}
        }
    }
    w.conns_live.set(w.conns_live.get() - 1);
    maybe_connect(&w);
}

async fn open_stream(w: Rc<WorkerState>, ctx: Rc<ConnCtx>, mut sr: SendRequest<Bytes>) {
    let mut away = None;
    let mut vu = w.sc.as_ref().map(|sc| sc.take_vu());
    loop {
        if ctx.quota.get() == Some(0) {
            return; // --requests-per-conn reached: the connection closes
        }
        let t = loop {
            if w.stopping() || ctx.dead.get() {
                return;
            }
            let next = w.ledger.borrow_mut().dequeue();
            if let Some(t) = next {
                break t;
            }
            w.idle.set(w.idle.get() + 1);
            tokio::select! {
                _ = w.work.notified() => {}
                _ = ctx.closed.notified() => {}
                _ = w.stop_n.notified() => {}
            }
            w.idle.set(w.idle.get() - 1);
        };
        if let Some(q) = ctx.quota.get() {
            ctx.quota.set(Some(q - 1));
        }
        match stream_ready(&w, &mut sr).await {
            Ok(()) => {}
            Err(Waited::Stopped) => return, // held: not sent
            Err(e) => {
                let (k, m) = match e {
                    Waited::Failed(e) => classify(&e),
                    _ => (ErrorKind::Timeout, no_stream()),
                };
                w.fail_held(k, m);
                // A connection that went away (or allows no stream) may leave
                // queued work without a stream.
                maybe_connect(&w);
                return;
            }
        }
        if w.stopping() {
            return;
        }
        match vu.as_mut() {
            None => exchange(&w, &mut sr, t, &mut away).await,
            Some(user) => scenario::arrival(&w, &mut sr, &ctx, t, user, &mut away).await,
        }
    }
}

/// Why a stream could not be opened.
enum Waited {
    /// The connection failed.
    Failed(h2::Error),
    /// No stream within `--timeout` (a server whose
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` is 0, or whose streams never end).
    TimedOut,
    /// The run is stopping.
    Stopped,
}

/// Waits until the connection may open a stream, at most `--timeout` and not
/// past the run's stop: a server that allows no stream must not hold the run.
async fn stream_ready(w: &WorkerState, sr: &mut SendRequest<Bytes>) -> Result<(), Waited> {
    if w.stopping() {
        return Err(Waited::Stopped);
    }
    tokio::select! {
        r = poll_fn(|cx| sr.poll_ready(cx)) => r.map_err(Waited::Failed),
        _ = tokio::time::sleep(w.plan().timeout) => Err(Waited::TimedOut),
        _ = w.stop_n.notified() => Err(Waited::Stopped),
    }
}

fn no_stream() -> Cow<'static, str> {
    "no stream within --timeout: the server allowed no new HTTP/2 stream (SETTINGS_MAX_CONCURRENT_STREAMS)"
        .into()
}

// ------------------------------------------------------------ one connection

/// Connects (TCP, TLS with ALPN h2, HTTP/2 preface) and starts the connection's driver task.
async fn connect(
    w: &Rc<WorkerState>,
    ctx: &Rc<ConnCtx>,
) -> Result<SendRequest<Bytes>, ConnectFail> {
    match connect_to(w, ctx, None).await? {
        Connected::H2(sr) => Ok(sr),
        // (The run's own target never falls back to HTTP/1.1.)
        Connected::H1(..) => Err(ConnectFail::Failed(
            ErrorKind::Other,
            "the server did not offer HTTP/2".into(),
        )),
    }
}

/// A connection made: HTTP/2, or (only to another origin than the run's, whose
/// server did not pick h2 by ALPN, or a cleartext one in a TLS run) the socket
/// for HTTP/1.1, counted open while it lives.
enum Connected {
    H2(SendRequest<Bytes>),
    H1(Box<dyn Io>, OpenGuard),
}

/// As [`connect`], to the run's target or (`away`) to another origin: a
/// redirect's, or another host of a scenario.
async fn connect_to(
    w: &Rc<WorkerState>,
    ctx: &Rc<ConnCtx>,
    away: Option<&crate::redirect::Origin>,
) -> Result<Connected, ConnectFail> {
    if w.stopping() {
        return Err(ConnectFail::Stopped);
    }
    let deadline = Instant::now() + w.plan().connect_timeout;
    tokio::select! {
        r = tokio::time::timeout_at(deadline.into(), connect_inner(w, ctx, away)) => match r {
            Ok(r) => r.map_err(|(k, m)| ConnectFail::Failed(k, m)),
            Err(_) => Err(ConnectFail::Failed(ErrorKind::ConnectTimeout, "connect timed out".into())),
        },
        _ = w.stop_n.notified() => Err(ConnectFail::Stopped),
    }
}

type Fail = (ErrorKind, Cow<'static, str>);

async fn connect_inner(
    w: &Rc<WorkerState>,
    ctx: &Rc<ConnCtx>,
    away: Option<&crate::redirect::Origin>,
) -> Result<Connected, Fail> {
    let plan = w.plan();
    let t0 = Instant::now();
    let addr = away.map_or(plan.target.addr, |o| o.addr);
    // Another https origin: its own TLS setup, offering h2 and http/1.1 (as
    // browsers do: the protocol is the server's pick, per connection).
    let away_tls = away.and_then(|o| o.tls.as_ref()).map(|t| {
        let mut cfg = (*t.config).clone();
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        (
            tokio_rustls::TlsConnector::from(Arc::new(cfg)),
            t.server_name.clone(),
        )
    });
    let tls_to = match away {
        Some(_) => away_tls.as_ref(),
        None => w.s.tls.as_ref(),
    };
    let sock = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(|e| (ErrorKind::from_io(&e, true), io_message(&e)))?;
    let tcp = sock
        .connect(addr)
        .await
        .map_err(|e| (ErrorKind::from_io(&e, true), io_message(&e)))?;
    let _ = tcp.set_nodelay(true);
    let now = Instant::now();
    w.rec
        .borrow_mut()
        .connected(now.saturating_duration_since(t0));
    if w.sc.is_some() {
        ctx.connect_took
            .set(Some(now.saturating_duration_since(t0)));
    }
    let guard = OpenGuard::new(w.clone());
    let http1_reply = Rc::new(Cell::new(false));
    let counted = Counted {
        inner: tcp,
        read: w.unattributed.clone(),
        written: w.written.clone(),
        sniff: (tls_to.is_none() && away.is_none()).then(|| http1_reply.clone()),
    };
    let io: Box<dyn Io> = match tls_to {
        // Another cleartext origin: prior knowledge in an h2c run, else HTTP/1.1.
        None if away.is_some() && plan.wire != crate::plan::Wire::H2c => {
            return Ok(Connected::H1(Box::new(counted), guard))
        }
        None => Box::new(counted),
        Some((connector, name)) => {
            let t1 = Instant::now();
            let tls = connector
                .connect(name.clone(), counted)
                .await
                .map_err(|e| tls_error(&e))?;
            w.rec
                .borrow_mut()
                .tls
                .record(Instant::now().saturating_duration_since(t1));
            if away.is_some() && tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                return Ok(Connected::H1(Box::new(tls), guard));
            }
            if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                let msg = format!(
                    "the server at {} did not offer HTTP/2 (ALPN h2) over TLS; \
                     run without --http2 to test it with HTTP/1.1",
                    plan.target.display
                );
                fatal(w, msg);
                return Err((ErrorKind::Other, "the server did not offer HTTP/2".into()));
            }
            Box::new(tls)
        }
    };
    let (sr, conn) = h2::client::Builder::new()
        .enable_push(false)
        .initial_window_size(1 << 20)
        .initial_connection_window_size(1 << 24)
        // Bounds a hostile server's header blocks (h2's default is 16 MiB per list).
        .max_header_list_size(MAX_HEADER_LIST)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| classify(&e))?;
    let ctx = ctx.clone();
    let w2 = w.clone();
    tokio::task::spawn_local(async move {
        let _guard = guard;
        let r = conn.await;
        if r.is_err() && http1_reply.get() {
            fatal(
                &w2,
                format!(
                    "the server at {} answered in HTTP/1, not HTTP/2: it does not take HTTP/2 \
                     over cleartext with prior knowledge (h2c); run without --h2c",
                    w2.plan().target.display
                ),
            );
        }
        ctx.dead.set(true);
        ctx.closed.notify_waiters();
    });
    Ok(Connected::H2(sr))
}

/// Ends the whole run with an error (exit code 1): HTTP/2 cannot be used.
fn fatal(w: &WorkerState, msg: String) {
    if let Ok(mut f) = w.s.fatal.lock() {
        f.get_or_insert(msg);
    }
    // The other workers see the flag within their 100 ms control tick.
    w.control.borrow().stop_all();
    if !w.stopping() {
        begin_stop(w, Instant::now());
    }
}

/// Counts a connection as open while it lives.
struct OpenGuard(Rc<WorkerState>);

impl OpenGuard {
    fn new(w: Rc<WorkerState>) -> OpenGuard {
        w.open.set(w.open.get() + 1);
        w.peak_open.set(w.peak_open.get().max(w.open.get()));
        OpenGuard(w)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.set(self.0.open.get() - 1);
    }
}

/// Sends one request (held by the caller) and reads its response to the end;
/// with `-L` follows its redirects (see [`follow`]).
async fn exchange(
    w: &Rc<WorkerState>,
    sr: &mut SendRequest<Bytes>,
    intended: Instant,
    away: &mut Option<Away>,
) {
    let tpl = &w.s.template;
    let end_of_stream = tpl.body.is_empty();
    let sent = Instant::now();
    let (resp, tx) = match sr.send_request(tpl.request(), end_of_stream) {
        Ok(x) => x,
        Err(e) => {
            let (k, m) = classify(&e);
            return w.fail_held(k, m);
        }
    };
    w.sent();
    let body = (!end_of_stream).then(|| tpl.body.clone());
    let deadline = sent + w.plan().timeout;
    let follow_on = w.plan().follow.as_deref();
    let r = tokio::time::timeout_at(
        deadline.into(),
        fetch(
            resp,
            tx,
            body,
            w.want_server.get(),
            follow_on.is_some(),
            None,
        ),
    )
    .await
    .unwrap_or_else(|_| Err(timed_out()));
    let r = match (r, follow_on) {
        (Ok(f), Some(fo)) if crate::redirect::is_redirect(f.status) && f.location.is_some() => {
            let plan = w.plan();
            let req = follow::Redirected {
                orig: &plan.request,
                own: &plan.target.origin,
                timeout: plan.timeout,
                capture: None,
                jar: None,
            };
            follow(w, Some(sr), fo, f, away, req).await
        }
        (r, _) => r,
    };
    let now = Instant::now();
    match r {
        Ok(f) => {
            let wire = w.unattributed.replace(0);
            let mut rec = w.rec.borrow_mut();
            if let Some(s) = f.server {
                rec.server_software = Some(s);
                w.want_server.set(false);
            }
            rec.bytes_read(wire);
            let t = Timing {
                intended,
                sent,
                first_byte: f.first_byte,
                done: now,
            };
            rec.response(&t, f.status, wire, f.body_bytes);
            drop(rec);
            w.ledger.borrow_mut().finish_completed();
            w.last_done.set(now);
            w.changed.notify_one();
        }
        Err(e) => w.fail_in_flight(e.0, e.1),
    }
}

/// Dropping a stream's handles resets it (CANCEL); the connection stays.
fn timed_out() -> Fail {
    (
        ErrorKind::Timeout,
        "no complete response within --timeout".into(),
    )
}

struct Fetched {
    first_byte: Instant,
    status: u16,
    body_bytes: u64,
    server: Option<String>,
    /// The `Location` of a 3xx (with `-L`).
    location: Option<String>,
    /// Scenario runs: the response's headers and body, as asked.
    capture: Option<Box<Capture>>,
}

async fn fetch(
    resp: h2::client::ResponseFuture,
    mut tx: h2::SendStream<Bytes>,
    body: Option<Bytes>,
    want_server: bool,
    want_location: bool,
    want_capture: Option<(bool, bool)>,
) -> Result<Fetched, Fail> {
    if let Some(mut data) = body {
        // Flow control: send what the peer's window allows, as it opens.
        while !data.is_empty() {
            tx.reserve_capacity(data.len());
            let cap = match poll_fn(|cx| tx.poll_capacity(cx)).await {
                Some(Ok(n)) => n,
                Some(Err(e)) => return Err(classify(&e)),
                None => {
                    return Err((
                        ErrorKind::Closed,
                        "stream closed while sending the body".into(),
                    ))
                }
            };
            if cap == 0 {
                continue;
            }
            let chunk = data.split_to(cap.min(data.len()));
            tx.send_data(chunk, data.is_empty())
                .map_err(|e| classify(&e))?;
        }
    }
    let resp = resp.await.map_err(|e| classify(&e))?;
    let first_byte = Instant::now();
    let status = resp.status().as_u16();
    let server = if want_server {
        resp.headers().get(http::header::SERVER).map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .chars()
                .take(200)
                .collect()
        })
    } else {
        None
    };
    let location = if want_location && (300..400).contains(&status) {
        resp.headers()
            .get(http::header::LOCATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    } else {
        None
    };
    // Scenario runs: what the checks, extractions and cookie jar read
    // (headers; the body up to `h1::MAX_CAPTURE`, as over HTTP/1).
    let mut capture = want_capture.map(|(headers, body)| {
        let mut c = Box::new(Capture {
            want_headers: headers,
            want_body: body,
            ..Capture::default()
        });
        if headers {
            for (k, v) in resp.headers() {
                c.headers.push((
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                ));
            }
        }
        c
    });
    let mut rx = resp.into_body();
    let mut body_bytes = 0u64;
    while let Some(chunk) = rx.data().await {
        let chunk = chunk.map_err(|e| classify(&e))?;
        body_bytes += chunk.len() as u64;
        if let Some(c) = capture.as_deref_mut().filter(|c| c.want_body) {
            let room = crate::h1::MAX_CAPTURE.saturating_sub(c.body.len());
            c.truncated |= chunk.len() > room;
            c.body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        let _ = rx.flow_control().release_capacity(chunk.len());
    }
    rx.trailers().await.map_err(|e| classify(&e))?;
    Ok(Fetched {
        first_byte,
        status,
        body_bytes,
        server,
        location,
        capture,
    })
}

/// Classifies an HTTP/2 error into an error kind and a short message.
fn classify(e: &h2::Error) -> Fail {
    let reason = e.reason().map(|r| format!("{r:?}"));
    let reason = reason.as_deref().unwrap_or("no reason");
    if e.is_go_away() {
        if e.is_remote() {
            return (
                ErrorKind::GoAway,
                Cow::Owned(format!("server sent GOAWAY ({reason})")),
            );
        }
        let text = e.to_string();
        if text.contains("header_list_way_too_large") || text.contains("too_many_continuations") {
            return head_too_large();
        }
        return (
            ErrorKind::Other,
            Cow::Owned(format!("HTTP/2 protocol error: {text}")),
        );
    }
    if e.is_reset() {
        if e.is_remote() {
            return (
                ErrorKind::StreamReset,
                Cow::Owned(format!("stream reset by the server ({reason})")),
            );
        }
        // h2 resets a stream itself when the response breaks the protocol; it
        // does not say which rule, so the message names the usual suspects.
        return (
            ErrorKind::Malformed(redline_stats::MalformedKind::Header),
            Cow::Owned(format!(
                "the response broke HTTP/2 ({reason}): a malformed or over-256 KiB header \
                 block, or a body that disagrees with content-length"
            )),
        );
    }
    if let Some(io) = e.get_io() {
        return match io.kind() {
            io::ErrorKind::BrokenPipe | io::ErrorKind::UnexpectedEof => (
                ErrorKind::Closed,
                "connection closed before the response was complete".into(),
            ),
            _ => (ErrorKind::from_io(io, false), io_message(io)),
        };
    }
    (ErrorKind::Other, Cow::Owned(format!("HTTP/2: {e}")))
}

/// The limit on a response's header block (h2's `max_header_list_size`).
const MAX_HEADER_LIST: u32 = 256 * 1024;

fn head_too_large() -> Fail {
    (
        ErrorKind::Malformed(redline_stats::MalformedKind::HeadTooLarge),
        "response header block over 256 KiB".into(),
    )
}

fn tls_error(e: &io::Error) -> Fail {
    match e.kind() {
        io::ErrorKind::InvalidData => (ErrorKind::Tls, Cow::Owned(e.to_string())),
        io::ErrorKind::UnexpectedEof => (
            ErrorKind::Tls,
            "connection closed during the TLS handshake".into(),
        ),
        _ => (ErrorKind::from_io(e, true), io_message(e)),
    }
}

/// The same words as the HTTP/1 engine for the same socket errors.
fn io_message(e: &io::Error) -> Cow<'static, str> {
    crate::worker::io_msg(e)
}

// ------------------------------------------------------------------- plumbing

trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

/// A TCP stream that counts the bytes crossing it (under TLS: the wire bytes).
struct Counted {
    inner: TcpStream,
    read: Rc<Cell<u64>>,
    written: Rc<Cell<u64>>,
    /// h2c: set when the server's first bytes are an HTTP/1 status line.
    sniff: Option<Rc<Cell<bool>>>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let n = (buf.filled().len() - before) as u64;
            self.read.set(self.read.get() + n);
            if let Some(flag) = self.sniff.take() {
                flag.set(buf.filled()[before..].starts_with(b"HTTP/"));
            }
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.written.set(self.written.get() + n as u64);
        }
        r
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.written.set(self.written.get() + n as u64);
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlanArgs;

    #[test]
    fn template_from_the_plan() {
        let mut a = PlanArgs::new("http://user:pw@127.0.0.1:8080/x?y=1");
        a.h2c = true;
        a.headers = vec!["X-Test: 1".into(), "Connection: keep-alive".into()];
        a.body = Some(b"hello".to_vec());
        let p = Plan::build(a).unwrap();
        let t = template(&p).unwrap();
        assert_eq!(t.method, http::Method::POST);
        assert_eq!(t.uri.to_string(), "http://127.0.0.1:8080/x?y=1");
        assert_eq!(t.headers["x-test"], "1");
        assert!(t.headers.get("host").is_none());
        assert!(t.headers.get("connection").is_none());
        assert!(t.headers.get("authorization").is_some());
        assert_eq!(t.headers["content-length"], "5");
        assert_eq!(&t.body[..], b"hello");
        // A value HTTP/2 cannot carry is a usage error at plan time, without the value.
        let mut a = PlanArgs::new("http://127.0.0.1:8080/");
        a.h2c = true;
        a.headers = vec!["X-Ctl: a\u{1}b-secret".into()];
        let e = Plan::build(a).unwrap_err().to_string();
        assert!(e.contains("x-ctl") && !e.contains("secret"), "{e}");
        let mut a = PlanArgs::new("http://127.0.0.1:8080/");
        a.h2c = true;
        a.headers = (0..300).map(|i| format!("X-{i}: {i}")).collect();
        assert_eq!(
            template(&Plan::build(a).unwrap()).unwrap().headers.len(),
            302
        );
    }

    /// `-H 'Transfer-Encoding: chunked'`: HTTP/1 gets one framing (chunks,
    /// no Content-Length); HTTP/2 gets the body itself as its data.
    #[test]
    fn chunked_request_bodies_have_one_framing() {
        let mut a = PlanArgs::new("http://127.0.0.1:8080/");
        a.headers = vec!["Transfer-Encoding: chunked".into()];
        a.body = Some(b"hello".to_vec());
        let p = Plan::build(a.clone()).unwrap();
        let wire = String::from_utf8_lossy(&p.request).to_ascii_lowercase();
        assert!(!wire.contains("content-length"), "{wire}");
        assert!(
            wire.ends_with("\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
            "{wire:?}"
        );
        a.h2c = true;
        let t = template(&Plan::build(a.clone()).unwrap()).unwrap();
        assert_eq!(&t.body[..], b"hello");
        assert!(t.headers.get("transfer-encoding").is_none());
        a.h2c = false;
        a.headers = vec!["Transfer-Encoding: gzip, chunked".into()];
        assert!(Plan::build(a).is_err());
        assert_eq!(crate::plan::unchunk(&crate::plan::chunk(b"")), Some(vec![]));
    }
}
