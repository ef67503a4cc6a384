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
//! bytes; at most [`MAX_UNREGISTERED`] such connections wait at once (at the
//! cap the oldest waiting one is closed, not the newcomer:
//! `redline_stats::gate`, so idle or slow connections cannot keep an agent out). Every agent must run the same plan (its
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

mod agent_conn;
mod check;
mod live;
pub use agent_conn::sane_ready;
use agent_conn::{abort_all, conn_thread, stop_all, Ev, ReadyInfo, Slot};
pub use check::{check_consistent, check_record, merge_outcome, Window};
pub use live::{Live, LiveSecond};
use live::{SecondAcc, SECOND_SHOW_AFTER};

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
    let gate = redline_stats::gate::Gate::new(MAX_UNREGISTERED);
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
                            // Bounded: past MAX_UNREGISTERED connections
                            // waiting to register, the oldest is closed.
                            let Some(pending) = gate.admit(&s) else {
                                let _ = s.shutdown(Shutdown::Both);
                                continue;
                            };
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
                    let verdict = match rec.map(|v| serde_json::from_value::<RunRecord>(*v)) {
                        Some(Ok(r)) => match check_record(&r, &window) {
                            Ok(()) => {
                                a.last_progress = (r.counters.completed, r.counters.failed);
                                a.record = Some(r);
                                Ok(())
                            }
                            Err(why) => {
                                on_event(&Event::Lost(
                                    i,
                                    format!("sent a record that was refused: {why}"),
                                ));
                                a.failure = Some(format!("sent a record that was refused: {why}"));
                                Err(why)
                            }
                        },
                        Some(Err(e)) => {
                            a.failure = Some(format!("sent an unreadable record: {e}"));
                            Err(format!("an unreadable record: {e}"))
                        }
                        None => Ok(()),
                    };
                    // The agent learns the verdict (its exit code says it):
                    // the ack, or why its record was refused.
                    if let Some(s) = slots.get(&i) {
                        let m = match verdict {
                            Ok(()) => Msg::Ack,
                            Err(why) => Msg::Refused {
                                reason: format!("agent {i}'s record was refused: {why}"),
                            },
                        };
                        let mut g = s.writer.lock().unwrap_or_else(|p| p.into_inner());
                        let _ = protocol::send(&mut *g, &m);
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

#[cfg(test)]
mod tests;
