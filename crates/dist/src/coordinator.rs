//! The coordinator (`redline coordinate`): waits until all N agents have
//! registered and measured their clocks, tells them to start at one instant,
//! follows their progress, and merges their run records exactly into one.
//!
//! An agent whose connection drops, or that stays silent past the silence
//! time-out, before sending its record is named in the result and the merged
//! record is marked incomplete: `interrupted` is set and a `dist_incomplete`
//! warning says which agents are missing and that the load shown is not the
//! whole. No field is added to the run record for it.
//!
//! Hostile peers: before registration a connection must prove it knows the
//! token (an HMAC of the coordinator's nonce, [`protocol::auth_proof`]) within
//! [`REGISTER_TIMEOUT`], in one line of at most [`protocol::MAX_HELLO_LINE`]
//! bytes; at most [`MAX_UNREGISTERED`] such connections wait at once (more
//! are closed at once). Every agent must run the same plan (its
//! [`protocol::PlanId`] fingerprint equals the first registered agent's;
//! otherwise it is refused, naming the fields that differ). Numbers from a
//! peer are checked before use ([`sane_ready`]), and each record on arrival
//! ([`check_record`]): a refused record is named and the agent counted as lost.
//!
//! `--abort-on-fail` across agents ([`coordinate_judged`]): each time a
//! second of the whole run has been merged over the agents, the judge sees
//! the merged seconds so far ([`Live`]); when it says a threshold can no
//! longer pass, every agent is told to stop (`Msg::Stop`, the graceful path:
//! in-flight requests get their grace, records are sent and merged as
//! usual), and the merged record is marked `interrupted` with an `aborted`
//! warning giving the reason.

use crate::protocol::{self, Msg};
use redline_stats::RunRecord;
use std::collections::BTreeMap;
use std::io::BufReader;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the coordinator waits for.
#[derive(Debug, Clone)]
pub struct Config {
    /// Number of agents.
    pub agents: u64,
    /// How long to wait for all agents to be ready.
    pub ready_timeout: Duration,
    /// The start is this long after the last agent is ready (Δ).
    pub start_delay: Duration,
    /// An agent silent this long during the run is taken as dead.
    pub silence_timeout: Duration,
    /// The run ends at the latest this long after the start (bounded even for `-n` runs).
    pub run_timeout: Duration,
    /// Judge the merged live seconds and stop every agent once a threshold
    /// can no longer pass (also on when an agent's run arguments ask for it).
    pub abort_on_fail: bool,
    /// The shared token agents must prove they know (None: any agent that
    /// can connect is accepted; only allowed on loopback, see the CLI).
    pub token: Option<protocol::Token>,
    /// TLS for the agents' connections (`--tls-cert`/`--tls-key`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// Connections allowed to wait for their registration at once.
pub const MAX_UNREGISTERED: usize = 64;

/// How long a new connection has to register (whole line, not per read).
pub const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest histogram (base64) accepted in a `second` message.
pub const MAX_HIST_B64: usize = 256 * 1024;

impl Default for Config {
    fn default() -> Self {
        Config {
            agents: 1,
            ready_timeout: Duration::from_secs(120),
            start_delay: Duration::from_secs(2),
            silence_timeout: Duration::from_secs(15),
            run_timeout: Duration::from_secs(3600),
            abort_on_fail: false,
            token: None,
            tls: None,
        }
    }
}

/// What happened to one agent.
#[derive(Debug, Clone, Default)]
pub struct AgentOutcome {
    /// Its index.
    pub index: u64,
    /// Its host name.
    pub host: String,
    /// Coordinator clock minus agent clock, ms.
    pub offset_ms: f64,
    /// Smallest round trip, ms.
    pub rtt_ms: f64,
    /// How late it started, ms.
    pub lateness_ms: f64,
    /// Its record, when it sent one.
    pub record: Option<RunRecord>,
    /// A note it sent with its result (e.g. an empty share).
    pub note: Option<String>,
    /// Why it is missing, when it is.
    pub failure: Option<String>,
    /// The latest counters it reported (completed, failed).
    pub last_progress: (u64, u64),
}

impl AgentOutcome {
    /// `agent 1 (gen-1)`.
    pub fn name(&self) -> String {
        if self.host.is_empty() {
            format!("agent {}", self.index)
        } else {
            format!("agent {} ({})", self.index, self.host)
        }
    }
}

/// The result of a coordinated run.
#[derive(Debug)]
pub struct Outcome {
    /// One entry per agent index, in order.
    pub agents: Vec<AgentOutcome>,
    /// The merged record (None when no agent sent one).
    pub merged: Option<RunRecord>,
    /// True when an agent is missing from the merge.
    pub incomplete: bool,
    /// The live per-second view: each second merged over the agents that
    /// pushed it (`Msg::Second`), in order.
    pub seconds: Vec<LiveSecond>,
    /// Why the agents were told to stop early (`--abort-on-fail`), if so.
    pub stopped: Option<String>,
}

/// The whole run so far, as the `--abort-on-fail` judge sees it.
pub struct Live<'a> {
    /// Seconds since the common start.
    pub elapsed_s: f64,
    /// Failed requests so far, all agents (their latest counters).
    pub failed: u64,
    /// The seconds merged over the agents so far, in order from 0.
    pub series: &'a [redline_stats::SeriesPoint],
    /// The whole run's request count, when every agent's share is bounded by count.
    pub planned_requests: Option<u64>,
    /// The run's duration, when bounded by time (the longest agent's).
    pub planned_duration_s: Option<f64>,
}

/// One second of the whole run, merged exactly over the agents' pushed
/// histograms while the run goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSecond {
    /// Seconds since the common start (the second [t, t+1)).
    pub t: u32,
    /// Responses completed in it, all agents.
    pub requests: u64,
    /// Errors in it, all agents.
    pub errors: u64,
    /// The merged histogram's p99, µs (0 when nothing completed).
    pub p99_us: u64,
    /// The merged histogram's median, µs (0 when nothing completed).
    pub p50_us: u64,
    /// The merged histogram's p90, µs (0 when nothing completed).
    pub p90_us: u64,
    /// Responses by status class in it, all agents: 1xx, 2xx, 3xx, 4xx, 5xx.
    pub status_classes: [u64; 5],
    /// How many agents pushed this second.
    pub agents: u64,
    /// The run's planned length (the longest agent's), when bounded by time:
    /// for a live display's progress.
    pub planned_duration_s: Option<f64>,
    /// The whole run's request count, when every share is bounded by count.
    pub planned_requests: Option<u64>,
}

/// How long after its end a second is shown (agents push it within about
/// 0.3 s + 0.25 s; the rest is for the network).
const SECOND_SHOW_AFTER: Duration = Duration::from_millis(1500);

#[derive(Default)]
struct SecondAcc {
    requests: u64,
    errors: u64,
    status_classes: [u64; 5],
    hist: Option<redline_stats::Hist>,
    agents: u64,
    p99_us: u64,
    p50_us: u64,
    p90_us: u64,
    shown: bool,
}

impl SecondAcc {
    fn add(&mut self, requests: u64, errors: u64, classes: &[u64; 5], hist: &str) {
        self.requests = self.requests.saturating_add(requests);
        self.errors = self.errors.saturating_add(errors);
        self.agents += 1;
        if self.shown {
            return; // too late for the live view; the final record has it
        }
        for (a, b) in self.status_classes.iter_mut().zip(classes) {
            *a = a.saturating_add(*b);
        }
        if hist.len() > MAX_HIST_B64 {
            return; // not decoded: the final record is checked on its own
        }
        if let Ok(h) = redline_stats::Hist::from_base64(hist) {
            match self.hist.as_mut() {
                Some(m) => m.merge(&h),
                None => self.hist = Some(h),
            }
        }
    }

    /// Marks the second shown; the first time, also returns it as a series
    /// point of the whole run (for the judge).
    fn settle(&mut self, t: u32) -> Option<redline_stats::SeriesPoint> {
        if self.shown {
            return None;
        }
        self.shown = true;
        let h = self.hist.take().unwrap_or_else(|| {
            redline_stats::Hist::with_sigfig(redline_stats::hist::SERIES_SIGFIG)
        });
        self.p99_us = h.percentile(99.0);
        self.p50_us = h.percentile(50.0);
        self.p90_us = h.percentile(90.0);
        let mut p = redline_stats::SeriesPoint::new(t, self.requests, self.errors, 0, &h);
        p.status_classes = self.status_classes;
        Some(p)
    }

    fn show(&mut self, t: u32) -> LiveSecond {
        let _ = self.settle(t);
        LiveSecond {
            t,
            requests: self.requests,
            errors: self.errors,
            p99_us: self.p99_us,
            p50_us: self.p50_us,
            p90_us: self.p90_us,
            status_classes: self.status_classes,
            agents: self.agents,
            planned_duration_s: None,
            planned_requests: None,
        }
    }
}

/// What the coordinator reports while it runs (for the live display).
#[derive(Debug, Clone)]
pub enum Event {
    /// An agent registered.
    Registered(u64, String),
    /// A registration was refused.
    Refused(String),
    /// An agent is ready (index, offset ms, round trip ms).
    Ready(u64, f64, f64),
    /// All agents start at this coordinator time (ms since the epoch).
    Starting(f64),
    /// Totals over the agents: seconds since start, completed, failed, agents reporting.
    Progress(f64, u64, u64, usize),
    /// An agent finished.
    Finished(u64),
    /// An agent is lost (index, why).
    Lost(u64, String),
    /// One second of the whole run, merged over the agents.
    Second(LiveSecond),
    /// `--abort-on-fail`: every agent is told to stop, for this reason.
    Stopping(String),
}

/// Why the coordinated run could not happen at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not all agents became ready in time.
    #[error("{0}")]
    NotReady(String),
    /// Socket trouble on the listener.
    #[error("coordinator socket: {0}")]
    Io(#[from] std::io::Error),
}

enum Ev {
    Register(
        u64,
        String,
        protocol::PlanId,
        Arc<Mutex<TcpStream>>,
        mpsc::Sender<Result<(), String>>,
    ),
    Ready(u64, ReadyInfo),
    Progress(u64, u64, u64),
    Second(u64, u32, u64, u64, [u64; 5], String),
    Done(u64, f64, Option<Box<serde_json::Value>>, Option<String>),
    Gone(u64, String),
    Unregistered(u64),
    AuthFailed(String),
}

/// What an agent said when it was ready.
#[derive(Debug, Clone, Copy, Default)]
struct ReadyInfo {
    offset_ms: f64,
    rtt_ms: f64,
    expected_s: Option<f64>,
    requests: Option<u64>,
    abort_on_fail: bool,
}

/// Reads one line of at most `max` bytes before `deadline` (the whole line,
/// not each read: a peer dribbling a byte at a time is cut off too).
fn recv_before(
    r: &mut BufReader<TcpStream>,
    max: usize,
    deadline: Instant,
) -> std::io::Result<Option<Msg>> {
    use std::io::BufRead;
    let mut buf = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "did not register in time",
            ));
        }
        r.get_ref().set_read_timeout(Some(left))?;
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok(None);
        }
        let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > max + 1 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("registration line longer than {max} bytes"),
            ));
        }
        buf.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if end {
            return protocol::parse_line(&buf).map(Some);
        }
    }
}

/// Counts a connection waiting for its registration while it lives.
struct Pending(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Checks the numbers of a `ready` message (a hostile or broken agent's
/// NaN, negative or absurd values are refused, not used).
pub fn sane_ready(
    offset_ms: f64,
    rtt_ms: f64,
    expected_s: Option<f64>,
    requests: Option<u64>,
) -> Result<(), String> {
    const DAY_MS: f64 = 86_400_000.0;
    if !(offset_ms.is_finite() && offset_ms.abs() <= 10.0 * DAY_MS) {
        return Err(format!("an absurd clock offset ({offset_ms} ms)"));
    }
    if !(rtt_ms.is_finite() && (0.0..=60_000.0).contains(&rtt_ms)) {
        return Err(format!("an absurd round trip ({rtt_ms} ms)"));
    }
    if let Some(e) = expected_s {
        if !(e.is_finite() && (0.0..=30.0 * 86_400.0).contains(&e)) {
            return Err(format!("an absurd run length ({e} s)"));
        }
    }
    if requests.is_some_and(|n| n > 1u64 << 48) {
        return Err("an absurd request count".into());
    }
    Ok(())
}

fn conn_thread(
    stream: TcpStream,
    tx: mpsc::Sender<Ev>,
    token: Option<protocol::Token>,
    pending: Pending,
) {
    let Ok(w) = stream.try_clone() else {
        return;
    };
    let writer = Arc::new(Mutex::new(w));
    let mut r = BufReader::new(stream);
    let send = |m: &Msg| {
        let mut g = writer.lock().unwrap_or_else(|p| p.into_inner());
        protocol::send(&mut *g, m)
    };
    let Ok(nonce) = protocol::nonce() else {
        return;
    };
    if send(&Msg::Hello {
        nonce: nonce.clone(),
        version: protocol::VERSION,
    })
    .is_err()
    {
        return;
    }
    // Registration first: one bounded line within REGISTER_TIMEOUT.
    let deadline = Instant::now() + REGISTER_TIMEOUT;
    let index = match recv_before(&mut r, protocol::MAX_HELLO_LINE, deadline) {
        Ok(Some(Msg::Register {
            index,
            total: _,
            host,
            version,
            auth,
            plan,
        })) => {
            if version != protocol::VERSION {
                let _ = send(&Msg::Refused {
                    reason: format!(
                        "protocol version {version}, the coordinator speaks {}",
                        protocol::VERSION
                    ),
                });
                return;
            }
            let plan = plan.unwrap_or_default();
            if let Some(t) = &token {
                let ok = auth.as_deref().is_some_and(|p| {
                    protocol::auth_ok(t.bytes(), &nonce, index, &plan.fingerprint, p)
                });
                if !ok {
                    let reason =
                        format!("agent {index}: authentication failed (a wrong or missing token)");
                    let _ = send(&Msg::Refused {
                        reason: reason.clone(),
                    });
                    let _ = tx.send(Ev::AuthFailed(reason));
                    return;
                }
            }
            // Host names are shown: no control characters, bounded.
            let host: String = host.chars().filter(|c| !c.is_control()).take(128).collect();
            let (rtx, rrx) = mpsc::channel();
            if tx
                .send(Ev::Register(index, host, plan, writer.clone(), rtx))
                .is_err()
            {
                return;
            }
            match rrx.recv() {
                Ok(Ok(())) => {
                    if send(&Msg::Registered).is_err() {
                        let _ = tx.send(Ev::Unregistered(index));
                        return;
                    }
                    index
                }
                Ok(Err(reason)) => {
                    let _ = send(&Msg::Refused { reason });
                    return;
                }
                Err(_) => return,
            }
        }
        _ => return,
    };
    drop(pending);
    // After registration, reads wait as long as the run (silence is judged by the main loop).
    let _ = r.get_ref().set_read_timeout(None);
    let mut done = false;
    loop {
        match protocol::recv(&mut r) {
            Ok(Some(Msg::Ping { id })) => {
                if send(&Msg::Pong {
                    id,
                    now_ms: protocol::now_ms(),
                })
                .is_err()
                {
                    break;
                }
            }
            Ok(Some(Msg::Ready {
                offset_ms,
                rtt_ms,
                expected_s,
                requests,
                abort_on_fail,
            })) => {
                if let Err(why) = sane_ready(offset_ms, rtt_ms, expected_s, requests) {
                    let reason = format!("its ready message was refused: {why}");
                    let _ = send(&Msg::Abort {
                        reason: reason.clone(),
                    });
                    let _ = tx.send(Ev::Gone(index, reason));
                    return;
                }
                let _ = tx.send(Ev::Ready(
                    index,
                    ReadyInfo {
                        offset_ms,
                        rtt_ms,
                        expected_s,
                        requests,
                        abort_on_fail,
                    },
                ));
            }
            Ok(Some(Msg::Progress {
                completed, failed, ..
            })) => {
                let _ = tx.send(Ev::Progress(index, completed, failed));
            }
            Ok(Some(Msg::Second {
                t,
                requests,
                errors,
                status_classes,
                hist,
            })) => {
                let _ = tx.send(Ev::Second(index, t, requests, errors, status_classes, hist));
            }
            Ok(Some(Msg::Done {
                lateness_ms,
                record,
                note,
            })) => {
                done = true;
                // Ack before the main loop hears of it: once the last record is
                // in, the main loop shuts every connection, and an agent that
                // has not had its ack yet would report a lost coordinator.
                let _ = send(&Msg::Ack);
                let _ = tx.send(Ev::Done(index, lateness_ms, record, note));
            }
            Ok(Some(Msg::Abort { reason })) => {
                if !done {
                    let _ = tx.send(Ev::Gone(index, format!("aborted: {reason}")));
                }
                return;
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                if !done {
                    let _ = tx.send(Ev::Gone(
                        index,
                        "its connection closed before it sent its record".into(),
                    ));
                }
                return;
            }
            Err(e) => {
                if !done {
                    let _ = tx.send(Ev::Gone(index, format!("its connection failed: {e}")));
                }
                return;
            }
        }
    }
    if !done {
        let _ = tx.send(Ev::Gone(index, "its connection failed".into()));
    }
}

struct Slot {
    host: String,
    plan: protocol::PlanId,
    writer: Arc<Mutex<TcpStream>>,
    ready: Option<ReadyInfo>,
}

fn abort_all(slots: &BTreeMap<u64, Slot>, reason: &str) {
    for s in slots.values() {
        let mut g = s.writer.lock().unwrap_or_else(|p| p.into_inner());
        let _ = protocol::send(
            &mut *g,
            &Msg::Abort {
                reason: reason.into(),
            },
        );
        let _ = g.shutdown(Shutdown::Both);
    }
}

fn stop_all(slots: &BTreeMap<u64, Slot>, finished: &BTreeMap<u64, bool>, reason: &str) {
    for (i, s) in slots {
        if finished.get(i).copied().unwrap_or(true) {
            continue;
        }
        let mut g = s.writer.lock().unwrap_or_else(|p| p.into_inner());
        // An agent that cannot be told is caught by the silence time-out.
        let _ = protocol::send(
            &mut *g,
            &Msg::Stop {
                reason: reason.into(),
            },
        );
    }
}

/// Runs the coordination on a bound listener; `on_event` sees what happens
/// (for the live display). Returns once every agent has sent its record or
/// been given up.
pub fn coordinate(
    listener: TcpListener,
    cfg: &Config,
    on_event: impl FnMut(&Event),
) -> Result<Outcome, Error> {
    coordinate_judged(listener, cfg, on_event, |_| None)
}

/// [`coordinate`] with `--abort-on-fail`: when it is on (the config or an
/// agent's run arguments), `judge` sees the whole run each time a merged
/// second is added and returns why a threshold can no longer pass, if so;
/// then every agent is told to stop gracefully (once).
pub fn coordinate_judged(
    listener: TcpListener,
    cfg: &Config,
    mut on_event: impl FnMut(&Event),
    mut judge: impl FnMut(&Live) -> Option<String>,
) -> Result<Outcome, Error> {
    let n = cfg.agents;
    let (tx, rx) = mpsc::channel::<Ev>();
    listener.set_nonblocking(true)?;
    let stop_accept = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let unregistered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let accept = {
        let tx = tx.clone();
        let stop = stop_accept.clone();
        let token = cfg.token.clone();
        let tls = cfg.tls.clone();
        std::thread::Builder::new()
            .name("redline-coord-accept".into())
            .spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            use std::sync::atomic::Ordering::SeqCst;
                            // Bounded: past MAX_UNREGISTERED waiting
                            // connections, new ones are closed at once.
                            if unregistered.fetch_add(1, SeqCst) >= MAX_UNREGISTERED {
                                unregistered.fetch_sub(1, SeqCst);
                                let _ = s.shutdown(Shutdown::Both);
                                continue;
                            }
                            let pending = Pending(unregistered.clone());
                            let _ = s.set_nonblocking(false);
                            let _ = s.set_nodelay(true);
                            // TLS: the protocol reads the bridge's plain end.
                            let s = match &tls {
                                None => s,
                                Some(c) => match crate::tls::accept(s, c.clone()) {
                                    Ok(p) => p,
                                    Err(_) => continue,
                                },
                            };
                            let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
                            let tx = tx.clone();
                            let token = token.clone();
                            let _ = std::thread::Builder::new()
                                .name("redline-coord-conn".into())
                                .spawn(move || conn_thread(s, tx, token, pending));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })?
    };
    drop(tx);

    // Phase 1: registration and readiness.
    let mut slots: BTreeMap<u64, Slot> = BTreeMap::new();
    let deadline = Instant::now() + cfg.ready_timeout;
    let mut early: Vec<Ev> = Vec::new();
    while slots.len() < n as usize || slots.values().any(|s| s.ready.is_none()) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let missing: Vec<String> = (0..n)
                .filter(|i| slots.get(i).is_none_or(|s| s.ready.is_none()))
                .map(|i| i.to_string())
                .collect();
            let msg = format!(
                "agents {} did not become ready within {:?}; nothing was run",
                missing.join(", "),
                cfg.ready_timeout
            );
            abort_all(&slots, &msg);
            stop_accept.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = accept.join();
            return Err(Error::NotReady(msg));
        }
        match rx.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok(Ev::Register(i, host, plan, writer, reply)) => {
                let reference = slots.iter().next().map(|(&j, s)| (j, s.plan.clone()));
                if i >= n {
                    let r = format!(
                        "index {i} is out of range: this run has agents 0 to {}",
                        n - 1
                    );
                    on_event(&Event::Refused(r.clone()));
                    let _ = reply.send(Err(r));
                } else if let Some(s) = slots.get(&i) {
                    let r = format!("index {i} is already taken by {}", s.host);
                    on_event(&Event::Refused(r.clone()));
                    let _ = reply.send(Err(r));
                } else if let Some(d) = reference
                    .as_ref()
                    .and_then(|(j, p)| plan.differences(p).map(|d| (j, d)))
                {
                    let r = format!("agent {i} runs another plan than agent {}: {}", d.0, d.1);
                    on_event(&Event::Refused(r.clone()));
                    let _ = reply.send(Err(r));
                } else {
                    on_event(&Event::Registered(i, host.clone()));
                    slots.insert(
                        i,
                        Slot {
                            host,
                            plan,
                            writer,
                            ready: None,
                        },
                    );
                    let _ = reply.send(Ok(()));
                }
            }
            Ok(Ev::Ready(i, info)) => {
                if let Some(s) = slots.get_mut(&i) {
                    s.ready = Some(info);
                    on_event(&Event::Ready(i, info.offset_ms, info.rtt_ms));
                }
            }
            Ok(Ev::AuthFailed(r)) => on_event(&Event::Refused(r)),
            Ok(Ev::Gone(i, _)) | Ok(Ev::Unregistered(i)) => {
                // Before the start an agent may leave and come back.
                slots.remove(&i);
            }
            Ok(other) => early.push(other),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    stop_accept.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = accept.join();

    // Phase 2: one start for all.
    let at_ms = protocol::now_ms() + cfg.start_delay.as_secs_f64() * 1000.0;
    on_event(&Event::Starting(at_ms));
    let start_local = Instant::now() + cfg.start_delay;
    let mut agents: BTreeMap<u64, AgentOutcome> = BTreeMap::new();
    for (&i, s) in &slots {
        let ReadyInfo {
            offset_ms, rtt_ms, ..
        } = s.ready.unwrap_or_default();
        let mut out = AgentOutcome {
            index: i,
            host: s.host.clone(),
            offset_ms,
            rtt_ms,
            ..Default::default()
        };
        let mut g = s.writer.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = protocol::send(&mut *g, &Msg::Start { at_ms }) {
            out.failure = Some(format!("could not be told to start: {e}"));
        }
        agents.insert(i, out);
    }
    let expected = slots
        .values()
        .filter_map(|s| s.ready.and_then(|r| r.expected_s))
        .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
    // The whole run's request count: known when every share is bounded by count.
    let planned_requests = slots
        .values()
        .map(|s| s.ready.and_then(|r| r.requests))
        .try_fold(0u64, |a, b| b.and_then(|b| a.checked_add(b)));
    let judging = cfg.abort_on_fail
        || slots
            .values()
            .any(|s| s.ready.is_some_and(|r| r.abort_on_fail));
    let mut merged_series: Vec<redline_stats::SeriesPoint> = Vec::new();
    let mut stopped: Option<String> = None;
    let run_deadline = start_local
        + match expected {
            // Time-based runs: their length, the stop grace and some slack.
            Some(e) => Duration::from_secs_f64(e + 30.0).min(cfg.run_timeout),
            None => cfg.run_timeout,
        };
    let mut last_heard: BTreeMap<u64, Instant> = agents.keys().map(|&i| (i, start_local)).collect();
    let mut finished: BTreeMap<u64, bool> = agents
        .iter()
        .map(|(&i, a)| (i, a.failure.is_some()))
        .collect();
    let mut last_shown = Instant::now();
    let mut seconds: BTreeMap<u32, SecondAcc> = BTreeMap::new();
    let handle = |ev: Ev,
                  agents: &mut BTreeMap<u64, AgentOutcome>,
                  finished: &mut BTreeMap<u64, bool>,
                  seconds: &mut BTreeMap<u32, SecondAcc>,
                  on_event: &mut dyn FnMut(&Event)| {
        match ev {
            // Bounded by the run's length: one entry per second of it.
            Ev::Second(_, t, requests, errors, classes, hist) if t < 10 * 86_400 => {
                seconds
                    .entry(t)
                    .or_default()
                    .add(requests, errors, &classes, &hist);
            }
            Ev::Progress(i, c, f) => {
                if let Some(a) = agents.get_mut(&i) {
                    a.last_progress = (c, f);
                }
            }
            Ev::Done(i, late, rec, note) => {
                if let Some(a) = agents.get_mut(&i) {
                    a.lateness_ms = if late.is_finite() { late } else { 0.0 };
                    a.note =
                        note.map(|n| n.chars().filter(|c| !c.is_control()).take(500).collect());
                    let window = Window {
                        start_ms: at_ms,
                        now_ms: protocol::now_ms(),
                        offset_ms: a.offset_ms,
                        index: i,
                        count: n,
                    };
                    match rec.map(|v| serde_json::from_value::<RunRecord>(*v)) {
                        Some(Ok(r)) => match check_record(&r, &window) {
                            Ok(()) => {
                                a.last_progress = (r.counters.completed, r.counters.failed);
                                a.record = Some(r);
                            }
                            Err(why) => {
                                let why = format!("sent a record that was refused: {why}");
                                on_event(&Event::Lost(i, why.clone()));
                                a.failure = Some(why);
                            }
                        },
                        Some(Err(e)) => a.failure = Some(format!("sent an unreadable record: {e}")),
                        None => {}
                    }
                    finished.insert(i, true);
                    on_event(&Event::Finished(i));
                }
            }
            Ev::Gone(i, why) => {
                if let Some(a) = agents.get_mut(&i) {
                    if !finished.get(&i).copied().unwrap_or(false) {
                        a.failure = Some(why.clone());
                        finished.insert(i, true);
                        on_event(&Event::Lost(i, why));
                    }
                }
            }
            Ev::Register(_, _, _, _, reply) => {
                let _ = reply.send(Err("the run has started".into()));
            }
            Ev::AuthFailed(r) => on_event(&Event::Refused(r)),
            _ => {}
        }
    };
    for ev in early {
        handle(ev, &mut agents, &mut finished, &mut seconds, &mut on_event);
    }
    while finished.values().any(|f| !f) {
        let now = Instant::now();
        if now >= run_deadline {
            for (&i, f) in finished.iter_mut().filter(|(_, f)| !**f) {
                *f = true;
                let why = "had not sent its record when the run's time was up".to_string();
                if let Some(a) = agents.get_mut(&i) {
                    a.failure = Some(why.clone());
                }
                on_event(&Event::Lost(i, why));
            }
            break;
        }
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(ev) => {
                let idx = match &ev {
                    Ev::Progress(i, ..)
                    | Ev::Second(i, ..)
                    | Ev::Done(i, ..)
                    | Ev::Gone(i, _)
                    | Ev::Ready(i, _) => Some(*i),
                    _ => None,
                };
                if let Some(i) = idx {
                    last_heard.insert(i, Instant::now());
                }
                handle(ev, &mut agents, &mut finished, &mut seconds, &mut on_event);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        // Silence: an agent that stopped talking (a hung host, a partition).
        let now = Instant::now();
        if now > start_local {
            let silent: Vec<u64> = last_heard
                .iter()
                .filter(|(i, t)| {
                    !finished.get(i).copied().unwrap_or(true)
                        && now.duration_since(**t) > cfg.silence_timeout
                })
                .map(|(i, _)| *i)
                .collect();
            for i in silent {
                let why = format!("was silent for more than {:?}", cfg.silence_timeout);
                if let Some(s) = slots.get(&i) {
                    let _ = s
                        .writer
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .shutdown(Shutdown::Both);
                }
                if let Some(a) = agents.get_mut(&i) {
                    a.failure = Some(why.clone());
                }
                finished.insert(i, true);
                on_event(&Event::Lost(i, why));
            }
        }
        // Seconds old enough that every live agent has pushed them.
        let mut added = false;
        for (&t, acc) in seconds.iter_mut().filter(|(_, a)| !a.shown) {
            if start_local + Duration::from_secs(u64::from(t) + 1) + SECOND_SHOW_AFTER > now {
                break;
            }
            if let Some(p) = acc.settle(t) {
                merged_series.push(p);
                added = true;
            }
            on_event(&Event::Second(LiveSecond {
                planned_duration_s: expected,
                planned_requests,
                ..acc.show(t)
            }));
        }
        // --abort-on-fail: judged on the merged seconds, once per new second.
        if judging && added && stopped.is_none() {
            let live = Live {
                elapsed_s: now.saturating_duration_since(start_local).as_secs_f64(),
                failed: agents
                    .values()
                    .fold(0u64, |f, a| f.saturating_add(a.last_progress.1)),
                series: &merged_series,
                planned_requests,
                planned_duration_s: expected,
            };
            if let Some(why) = judge(&live) {
                on_event(&Event::Stopping(why.clone()));
                stop_all(&slots, &finished, &why);
                stopped = Some(why);
            }
        }
        if now.duration_since(last_shown) >= Duration::from_secs(1) && now > start_local {
            last_shown = now;
            let (c, f) = agents.values().fold((0u64, 0u64), |(c, f), a| {
                (
                    c.saturating_add(a.last_progress.0),
                    f.saturating_add(a.last_progress.1),
                )
            });
            let reporting = agents.values().filter(|a| a.failure.is_none()).count();
            on_event(&Event::Progress(
                now.duration_since(start_local).as_secs_f64(),
                c,
                f,
                reporting,
            ));
        }
    }
    for s in slots.values() {
        let _ = s
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .shutdown(Shutdown::Both);
    }
    // The seconds pushed at the agents' ends, shown now.
    for (&t, acc) in seconds.iter_mut().filter(|(_, a)| !a.shown) {
        on_event(&Event::Second(LiveSecond {
            planned_duration_s: expected,
            planned_requests,
            ..acc.show(t)
        }));
    }
    let agents: Vec<AgentOutcome> = agents.into_values().collect();
    let mut out = merge_outcome(agents, n);
    out.seconds = seconds.iter_mut().map(|(&t, a)| a.show(t)).collect();
    if let (Some(why), Some(m)) = (&stopped, out.merged.as_mut()) {
        // As a local run's --abort-on-fail: stopped early, and why.
        m.interrupted = true;
        m.warn("aborted", format!("aborted: {why}"));
    }
    out.stopped = stopped;
    Ok(out)
}

/// Where and when a record must have been made.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// The common start, coordinator clock (ms since the epoch).
    pub start_ms: f64,
    /// Now, coordinator clock.
    pub now_ms: f64,
    /// The agent's clock offset (coordinator minus agent), ms.
    pub offset_ms: f64,
    /// The agent's index.
    pub index: u64,
    /// The number of agents.
    pub count: u64,
}

/// Slack for the time checks: clocks, start-up, the stop grace.
const TIME_SLACK_MS: f64 = 60_000.0;

/// Checks a record on arrival: it is consistent ([`check_consistent`]), its
/// times lie within the run, and it is the share of this agent. Err names
/// what is wrong.
pub fn check_record(r: &RunRecord, w: &Window) -> Result<(), String> {
    let started = redline_stats::time::parse_rfc3339_ms(&r.started_at)
        .ok_or_else(|| format!("an unreadable start time {:?}", r.started_at))?
        as f64
        + w.offset_ms;
    if started < w.start_ms - TIME_SLACK_MS || started > w.now_ms + TIME_SLACK_MS {
        return Err(format!(
            "it started at {} ({:.0} s from the common start): not this run",
            r.started_at,
            (started - w.start_ms) / 1000.0
        ));
    }
    let longest_s = ((w.now_ms - w.start_ms).max(0.0) + TIME_SLACK_MS) / 1000.0;
    if !(r.duration_s.is_finite() && r.duration_s >= 0.0 && r.duration_s <= longest_s) {
        return Err(format!(
            "it lasted {} s, but the run is only {:.0} s old",
            r.duration_s,
            (w.now_ms - w.start_ms) / 1000.0
        ));
    }
    if r.series.len() as f64 > longest_s + 2.0
        || r.series.iter().any(|p| f64::from(p.t) > longest_s + 1.0)
    {
        return Err("its per-second series is longer than the run".into());
    }
    check_consistent(r)?;
    if r.merged_runs != 1 {
        return Err(format!(
            "it is a merge of {} runs, not one agent's run",
            r.merged_runs
        ));
    }
    match &r.config.segment {
        Some(s) if s.index == w.index && s.count == w.count => Ok(()),
        Some(s) => Err(format!(
            "it is segment {} of {}, not {} of {}",
            s.index, s.count, w.index, w.count
        )),
        None => Err("it is not a segment of this run (no config.segment)".into()),
    }
}

/// Checks what must hold for any run record, one run's or a merge's (the
/// coordinator's checks on arrival, `redline fetch` on what it downloads):
/// its counters agree with each other and with its histograms and status
/// codes, its per-second series holds no more than it completed (each
/// second's histogram its own count), its start time is readable, its
/// duration finite, and its rate matches its counts. Err names what is wrong.
pub fn check_consistent(r: &RunRecord) -> Result<(), String> {
    let c = &r.counters;
    if r.format != "redline.run" {
        return Err(format!("format {:?} is not redline.run", r.format));
    }
    let ends = [c.completed, c.failed, c.in_flight_at_end, c.not_sent]
        .iter()
        .try_fold(0u64, |a, &b| a.checked_add(b));
    if ends != Some(c.scheduled) {
        return Err(format!(
            "counters do not add up: scheduled {} is not completed {} + failed {} + in flight {} + not sent {}",
            c.scheduled, c.completed, c.failed, c.in_flight_at_end, c.not_sent
        ));
    }
    if c.sent > c.scheduled || c.completed > c.sent || c.non_2xx > c.completed {
        return Err(format!(
            "counters contradict each other: scheduled {}, sent {}, completed {}, non-2xx {}",
            c.scheduled, c.sent, c.completed, c.non_2xx
        ));
    }
    if r.latency.count() != c.completed {
        return Err(format!(
            "its latency histogram holds {} values for {} completed responses",
            r.latency.count(),
            c.completed
        ));
    }
    let statuses = r
        .status_codes
        .values()
        .try_fold(0u64, |a, &b| a.checked_add(b));
    if statuses != Some(c.completed) {
        return Err(format!(
            "its status codes add up to {} for {} completed responses",
            statuses.map_or("more than 2^64".to_string(), |s| s.to_string()),
            c.completed
        ));
    }
    let per_second = r
        .series
        .iter()
        .try_fold(0u64, |a, p| a.checked_add(p.requests));
    if per_second.is_none_or(|s| s > c.completed) {
        return Err(format!(
            "its per-second series counts more responses than its {} completed",
            c.completed
        ));
    }
    if let Some(p) = r
        .series
        .iter()
        .find(|p| p.hist.to_hist().count() != p.requests)
    {
        return Err(format!(
            "second {}: its histogram does not hold its {} responses",
            p.t, p.requests
        ));
    }
    redline_stats::time::parse_rfc3339_ms(&r.started_at)
        .ok_or_else(|| format!("an unreadable start time {:?}", r.started_at))?;
    // At most 30 days (as `ready` allows), and no more seconds than that.
    const LONGEST_S: f64 = 30.0 * 86_400.0;
    if !(r.duration_s.is_finite() && r.duration_s >= 0.0 && r.duration_s <= LONGEST_S) {
        return Err(format!("it lasted {} s", r.duration_s));
    }
    if r.series.len() as f64 > r.duration_s + 2.0 + TIME_SLACK_MS / 1000.0
        || r.series.iter().any(|p| f64::from(p.t) > LONGEST_S)
    {
        return Err("its per-second series is longer than the run".into());
    }
    let rate_bound = c.completed as f64 / r.duration_s.max(1e-3) * 1.01 + 1.0;
    if !(r.requests_per_sec.is_finite()
        && r.requests_per_sec >= 0.0
        && r.requests_per_sec <= rate_bound)
    {
        return Err(format!(
            "it claims {} req/s for {} responses in {} s",
            r.requests_per_sec, c.completed, r.duration_s
        ));
    }
    if r.merged_runs == 0 {
        return Err("it says it merges 0 runs".into());
    }
    Ok(())
}

/// Merges the agents' records exactly (`RunRecord +=`) and marks the result
/// incomplete, naming the missing agents, when some did not send one.
pub fn merge_outcome(agents: Vec<AgentOutcome>, total: u64) -> Outcome {
    let mut merged: Option<RunRecord> = None;
    for a in &agents {
        if let Some(r) = &a.record {
            match merged.as_mut() {
                Some(m) => *m += r,
                None => merged = Some(r.clone()),
            }
        }
    }
    let missing: Vec<&AgentOutcome> = agents.iter().filter(|a| a.failure.is_some()).collect();
    let incomplete = !missing.is_empty() || (agents.len() as u64) < total;
    if let Some(m) = merged.as_mut() {
        let urls: std::collections::BTreeSet<&str> = agents
            .iter()
            .filter_map(|a| a.record.as_ref().map(|r| r.config.url.as_str()))
            .collect();
        if urls.len() > 1 {
            m.warn(
                "dist_mismatch",
                format!(
                    "the agents ran different URLs ({}): the merge mixes different tests",
                    urls.into_iter().collect::<Vec<_>>().join(", ")
                ),
            );
        }
        if incomplete {
            m.interrupted = true;
            let names: Vec<String> = missing
                .iter()
                .map(|a| format!("{} {}", a.name(), a.failure.as_deref().unwrap_or("")))
                .collect();
            let sent = agents.iter().filter(|a| a.record.is_some()).count();
            m.warn(
                "dist_incomplete",
                format!(
                    "incomplete distributed run: {}; this record holds the load of {sent} of {total} agents, not the whole",
                    names.join("; ")
                ),
            );
        }
        let late: Vec<String> = agents
            .iter()
            .filter(|a| a.record.is_some() && a.lateness_ms.abs() > 100.0)
            .map(|a| format!("{} started {:.0} ms late", a.name(), a.lateness_ms))
            .collect();
        if !late.is_empty() {
            m.warn("dist_late_start", late.join("; "));
        }
    }
    Outcome {
        agents,
        merged,
        incomplete,
        seconds: Vec::new(),
        stopped: None,
    }
}

#[cfg(test)]
mod tests;
