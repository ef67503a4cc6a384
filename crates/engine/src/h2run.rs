//! HTTP/2 load (`--http2` over TLS with ALPN, `--h2c` with prior knowledge)
//! on the protocol seam: every connection is a [`crate::http2::Http2Session`]
//! (redline's own sans-IO codec) driven by one task that owns its socket
//! (`h2run/wire.rs`), on a single-threaded tokio runtime per worker thread.
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
//! The files: this one holds the worker state, the control task and the
//! request's HTTP/2 form; `h2run/closed.rs` and `h2run/open.rs` the two load
//! models' tasks, `h2run/conn.rs` connection setup, `h2run/exchange.rs` one
//! request on one stream, `h2run/errors.rs` socket and TLS error words,
//! `h2run/follow.rs` redirects and other origins, `h2run/scenario.rs`
//! virtual users, `h2run/wire.rs` the connection task and the streams'
//! handle on it ([`wire::H2Conn`]: wait for a stream, submit, await the
//! answer). The protocol itself (frames, HPACK, flow control, which error is
//! which) is the session's, tested with byte buffers alone.

mod closed;
mod conn;
mod errors;
mod exchange;
mod follow;
mod open;
mod scenario;
mod wire;

pub(crate) use open::PACE_QUANTUM;

use crate::control::Control;
use crate::core::spec::{thread_cpu, WorkerResult, WorkerSpec};
use crate::ledger::Ledger;
use crate::plan::Plan;
use redline_stats::{ErrorKind, Recorder};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The HTTP/2 session every connection runs (the protocol seam's HTTP/2
/// side: redline's own sans-IO codec, `crate::http2`).
type Sess = crate::http2::Http2Session;
/// A request in the session's form (its HPACK block encoded once), built once
/// per plan, or per scenario request and redirect hop.
type Req = crate::http2::Http2Request;
/// A stream's handle on its connection.
type Conn = wire::H2Conn<Sess>;

/// A new connection's session.
fn new_session() -> Sess {
    Sess::new()
}

/// What every HTTP/2 worker of a run shares: the plan, the request in HTTP/2
/// form, the TLS connector, and the first fatal error (server without h2).
pub struct H2Setup {
    plan: Plan,
    request: Req,
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

/// The plan's request in HTTP/2 form, from its request spec (built once by
/// the plan; no HTTP/1 bytes are parsed).
fn template(plan: &Plan) -> Result<Req, String> {
    // Sent again and again: its fields go into each connection's HPACK
    // table once and are named by index after that (as browsers and
    // h2load do), so the server decodes a few bytes per request.
    Req::from_spec(&plan.spec, plan.scheme()).map(Req::with_indexing)
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
        request: template,
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
    /// The newest connection's serial (each connection of the run's target
    /// gets the next): a request refused after GOAWAY waits for a newer one.
    serials: Cell<u64>,
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
    /// Its serial (see `WorkerState::serials`; 0: another origin's).
    serial: u64,
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
    fn new(serial: u64, quota: Option<u64>) -> Rc<ConnCtx> {
        Rc::new(ConnCtx {
            serial,
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
        serials: Cell::new(0),
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
        tokio::task::spawn_local(open::pace(w.clone()));
    } else {
        closed::start_closed(&w);
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
        if w.control.borrow().finished(now, &w.ledger.borrow()) && !journeys_thinking(&w) {
            break;
        }
        let wake = {
            let mut control = w.control.borrow_mut();
            let in_flight = w.ledger.borrow().in_flight();
            if control.publish_due(now, &mut w.rec.borrow_mut(), w.open.get(), in_flight) {
                if let Some(sc) = &w.sc {
                    sc.publish_stats(&control);
                    sc.publish_overdue(now, &control, &w.ledger.borrow());
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

/// Open-loop sessions: whether users think before their journey's next step
/// while the run goes on (their steps are not in the ledger yet: the worker
/// is not done, as the HTTP/1 worker's `journeys_thinking`).
fn journeys_thinking(w: &WorkerState) -> bool {
    !w.control.borrow().stopping() && w.sc.as_ref().is_some_and(|sc| sc.thinking())
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

    /// A held request was written (`again`: a refused one sent a second
    /// time, which `counters.sent` counts once).
    fn sent(&self, again: bool) {
        self.ledger.borrow_mut().sent();
        if !again {
            self.rec.borrow_mut().counters.sent += 1;
        }
    }

    /// The next connection's serial.
    fn next_serial(&self) -> u64 {
        self.serials.set(self.serials.get() + 1);
        self.serials.get()
    }

    /// A request in flight was refused unprocessed by the server: it waits
    /// (with its intended time) for a stream to send it again: after GOAWAY
    /// (`retiring`: its connection takes no new stream) one of a connection
    /// opened since, so not an older one that may be about to refuse it too;
    /// after REFUSED_STREAM any, this one included. Open loop: idle streams
    /// look and a connection opens if none can take it; closed loop: a
    /// stream takes it before new work, at the latest the refusing
    /// connection's slot when it reconnects.
    fn refuse(self: &Rc<Self>, intended: Instant, retiring: bool) {
        let after = if retiring { self.serials.get() } else { 0 };
        self.ledger.borrow_mut().refuse(intended, after);
        if self.open_loop {
            self.work.notify_waiters();
            open::maybe_connect(self);
        }
        // (Not an end: only the control task may have to look again.)
        if self.ledger.borrow().in_flight() == 0 {
            self.changed.notify_one();
        }
    }

    /// Closed loop: a refused request for a stream of connection `c`, taken
    /// before new work; under `--requests-per-conn` it uses one of the
    /// connection's requests (that reserved one goes back to the budget).
    fn take_refused_for(&self, c: &ConnCtx) -> Option<Instant> {
        let mut ledger = self.ledger.borrow_mut();
        if ledger.refused() == 0 {
            return None;
        }
        match c.quota.get() {
            Some(0) => None,
            Some(q) => {
                let t = ledger.take_refused(c.serial)?;
                c.quota.set(Some(q - 1));
                ledger.give_back(1);
                Some(t)
            }
            None => ledger.take_refused(c.serial),
        }
    }

    /// Closed loop: up to `n` refused requests for new connection `serial`
    /// (oldest first).
    fn take_refused_n(&self, n: u64, serial: u64) -> Vec<Instant> {
        let mut ledger = self.ledger.borrow_mut();
        let mut got = Vec::new();
        for _ in 0..n {
            match ledger.take_refused(serial) {
                Some(t) => got.push(t),
                None => break,
            }
        }
        got
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
        self.ended(now);
    }

    /// A request ended at `now` (the ledger knows how). Wakes the control
    /// task only when the worker may have finished (nothing in flight): a
    /// wake-up per answer cost a task switch and a timer re-arm per request.
    fn ended(&self, now: Instant) {
        self.last_done.set(now);
        if self.ledger.borrow().in_flight() == 0 {
            self.changed.notify_one();
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlanArgs;

    /// A field of a request in HTTP/2 form.
    fn field<'a>(r: &'a Req, name: &str) -> Option<&'a str> {
        r.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn template_from_the_plan() {
        let mut a = PlanArgs::new("http://user:pw@127.0.0.1:8080/x?y=1");
        a.h2c = true;
        a.headers = vec!["X-Test: 1".into(), "Connection: keep-alive".into()];
        a.body = Some(b"hello".to_vec());
        let p = Plan::build(a).unwrap();
        let t = template(&p).unwrap();
        assert_eq!(t.method, "POST");
        assert_eq!(
            (t.scheme.as_str(), t.authority.as_str(), t.path.as_str()),
            ("http", "127.0.0.1:8080", "/x?y=1")
        );
        assert_eq!(field(&t, "x-test"), Some("1"));
        assert!(field(&t, "host").is_none());
        assert!(field(&t, "connection").is_none());
        assert!(field(&t, "authorization").is_some());
        assert_eq!(field(&t, "content-length"), Some("5"));
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

    /// A redirect hop (rewritten from the original's spec) and a request
    /// with no `Host` of its own take the spec's authority; a control
    /// character in a value is named, never shown.
    #[test]
    fn hops_and_parts_encode_from_their_specs() {
        let mut a = PlanArgs::new("http://127.0.0.1:8080/x?y=1");
        a.h2c = true;
        a.headers = vec!["X-Test: 1".into(), "TE: gzip".into()];
        a.body = Some(b"hello".to_vec());
        let p = Plan::build(a).unwrap();
        let to = url::Url::parse("https://b.test:8443/next").unwrap();
        let (hop, get) = crate::redirect::hop_spec(
            &p.spec,
            307,
            &to,
            false,
            false,
            crate::redirect::Cookies::Given,
        );
        assert!(!get);
        let r = Req::from_spec(&hop, to.scheme()).unwrap();
        assert_eq!(
            (
                r.method.as_str(),
                r.scheme.as_str(),
                r.authority.as_str(),
                r.path.as_str()
            ),
            ("POST", "https", "b.test:8443", "/next")
        );
        assert_eq!(&r.body[..], b"hello");
        assert!(field(&r, "te").is_none() && field(&r, "host").is_none());
        let e = Req::from_parts(
            "GET",
            "http",
            "h",
            "/",
            &[("X-Bad".into(), "a\x01secret".into())],
            Default::default(),
        )
        .unwrap_err();
        assert!(e.contains("x-bad") && !e.contains("secret"), "{e}");
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
        assert!(field(&t, "transfer-encoding").is_none());
        a.h2c = false;
        a.headers = vec!["Transfer-Encoding: gzip, chunked".into()];
        assert!(Plan::build(a).is_err());
        assert_eq!(crate::plan::unchunk(&crate::plan::chunk(b"")), Some(vec![]));
    }
}
