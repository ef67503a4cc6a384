//! Runs a plan: raises the fd limit, starts one worker per thread at a common
//! instant, reports live progress from published snapshots, and folds the
//! workers' recorders into one run record with the client-limit warnings.

use crate::control::Live;
use crate::core::spec::{WorkerResult, WorkerSpec};
use crate::pacer::share;
use crate::pacer::{Levels, Pacer, Profile};
use crate::plan::{Load, Plan};
use crate::worker::{make_poll, run_worker};
use warnings::{add_warnings, steal_seconds, tcp_counters};

mod warnings;
use mio::Waker;
use redline_stats::{ClientUsage, Environment, RunRecord, SeriesPoint};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Stops a run from another thread (Ctrl-C): sending stops, in-flight requests
/// get the grace period, then the report is made.
#[derive(Default)]
pub struct StopHandle {
    flag: Arc<AtomicBool>,
    wakers: Mutex<Vec<Arc<Waker>>>,
}

impl StopHandle {
    /// A new handle.
    pub fn new() -> Arc<StopHandle> {
        Arc::new(StopHandle::default())
    }
    /// Asks every worker to stop now.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Ok(w) = self.wakers.lock() {
            for w in w.iter() {
                let _ = w.wake();
            }
        }
    }
    /// True once `stop` was called.
    pub fn is_stopped(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

/// A live view of a run, a few times a second.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    /// Time since the start.
    pub elapsed: Duration,
    /// Completed responses so far.
    pub completed: u64,
    /// Failed requests so far.
    pub failed: u64,
    /// Connections open now.
    pub open: u64,
    /// Requests written and not yet ended, now.
    pub in_flight: u64,
    /// Requests written so far.
    pub sent: u64,
    /// Bytes read so far.
    pub bytes_read: u64,
    /// Bytes written so far.
    pub bytes_written: u64,
    /// Connections opened so far.
    pub connections_opened: u64,
    /// Failed requests so far by kind, indexed as [`crate::control::ERROR_KINDS`].
    pub errors: [u64; crate::control::ERROR_KINDS.len()],
}

/// Scenario runs: (completed, errors) of each named request so far, in the
/// scenario's order, summed over the workers.
fn live_requests(lives: &[Arc<Live>]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for l in lives {
        if let Ok(v) = l.requests.lock() {
            if out.len() < v.len() {
                out.resize(v.len(), (0, 0));
            }
            for (o, r) in out.iter_mut().zip(v.iter()) {
                o.0 += r.0;
                o.1 += r.1;
            }
        }
    }
    out
}

/// The engine could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The OS refused a poller or a thread.
    #[error("cannot start the load engine: {0}")]
    Setup(#[from] std::io::Error),
    /// A worker thread panicked (a bug); the partial results are lost.
    #[error("a worker thread failed unexpectedly (this is a bug in redline)")]
    WorkerPanicked,
    /// HTTP/2 could not be used (e.g. the server does not offer h2 over TLS).
    #[error("{0}")]
    Http2(String),
    /// No TLS connection can succeed: the certificate is refused, or the
    /// server speaks plain HTTP (`crate::tls::refused`); the line says the fix.
    #[error("{0}")]
    Tls(String),
}

/// Runs the plan to the end (or until `stop`), calling `progress` about every 250 ms.
pub fn execute(
    plan: &Plan,
    stop: &StopHandle,
    mut progress: impl FnMut(&Snapshot),
) -> Result<RunRecord, EngineError> {
    execute_with_series(plan, stop, |s, _| progress(s))
}

/// As [`execute`], and `progress` also gets the per-second series of the
/// seconds finished so far (merged over workers; each worker hands over its
/// finished seconds about every 100 ms, so a second may still be missing a
/// worker's share for that long). What `--abort-on-fail` judges.
pub fn execute_with_series(
    plan: &Plan,
    stop: &StopHandle,
    mut progress: impl FnMut(&Snapshot, &[SeriesPoint]),
) -> Result<RunRecord, EngineError> {
    execute_watching(plan, stop, &[], |s, series, _, _| progress(s, series))
}

/// As [`execute_with_series`], and `progress` also gets, for each of `ages`,
/// how many scheduled requests were still unanswered that long after their
/// intended send time (a lower bound, see `crate::overdue`): what
/// `--abort-on-fail` counts as unanswered; and, in scenario runs, each
/// named request's (completed, errors) so far, in the scenario's order.
pub fn execute_watching(
    plan: &Plan,
    stop: &StopHandle,
    ages: &[Duration],
    mut progress: impl FnMut(&Snapshot, &[SeriesPoint], &[u64], &[(u64, u64)]),
) -> Result<RunRecord, EngineError> {
    if let Some(why) = plan.empty_share() {
        // A --segment whose share is zero: an empty record that merges as nothing.
        let started_at = redline_stats::time::rfc3339(SystemTime::now());
        let mut rec = RunRecord::new(plan.config.clone(), environment(), started_at);
        rec.server.address = plan.target.addr.to_string();
        rec.warn(
            "segment_empty",
            format!("this segment had nothing to run: {why}"),
        );
        return Ok(rec);
    }
    // One handshake first: a certificate every connection would refuse
    // stops the run here, not after thousands of failed handshakes.
    if let Some(line) = crate::tls::refused_plan(plan) {
        return Err(EngineError::Tls(line));
    }
    let threads = plan.threads as u64;
    let conns_total = plan.load.max_connections();
    // Open loop: the pacer stops at the request count.
    let budget_total = match &plan.load {
        Load::Closed { requests, .. } => *requests,
        Load::Open { .. } => None,
    };
    let fd_note = prepare_fds(plan);
    // HTTP/2 (--http2, --h2c) and HTTP/3 (--http3) run on the multiplexing
    // driver (mux.rs), same core, specs and results.
    let h2 = match plan.protocol().multiplexed() {
        true => Some(crate::mux::prepare(plan).map_err(EngineError::Http2)?),
        false => None,
    };

    let mut polls = Vec::new();
    for _ in 0..threads {
        let (poll, waker) = make_poll()?;
        if let Ok(mut w) = stop.wakers.lock() {
            w.push(waker);
        }
        polls.push(poll);
    }
    let started_at = redline_stats::time::rfc3339(SystemTime::now());
    let start = Instant::now();
    let steal_before = steal_seconds();
    let tcp_before = tcp_counters();
    let duration = match &plan.load {
        Load::Closed { duration, .. } | Load::Open { duration, .. } => *duration,
    };
    let deadline = duration.map(|d| start + d);
    // Open-loop sessions: the workers count their journeys' overdue steps.
    let journey_ages = match crate::workload::journeys(plan) {
        true => ages.to_vec(),
        false => Vec::new(),
    };
    let lives: Vec<Arc<Live>> = (0..threads)
        .map(|_| {
            Arc::new(Live {
                journey_ages: journey_ages.clone(),
                ..Live::default()
            })
        })
        .collect();

    // --abort-on-fail: each worker's schedule, replicated for the estimate.
    let mut schedules = Vec::new();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let results: Vec<(WorkerResult, Starvation)> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, poll) in polls.into_iter().enumerate() {
            let iu = i as u64;
            let (pacer, levels) = worker_load(plan, i, threads);
            if !ages.is_empty() {
                schedules.push(schedule_of(plan, &pacer, &levels, i as u64, threads));
            }
            let spec = WorkerSpec {
                index: i,
                first_vu: (0..iu).map(|k| share(conns_total, threads, k)).sum(),
                start,
                connections: share(conns_total, threads, iu),
                budget: budget_total.map(|n| share(n, threads, iu)),
                deadline,
                pacer,
                stop: stop.flag.clone(),
                live: lives[i].clone(),
                levels,
            };
            let h = std::thread::Builder::new()
                .name(format!("redline-w{i}"))
                .spawn_scoped(scope, {
                    let done = done_tx.clone();
                    let h2 = h2.clone();
                    move || {
                        let waited = Starvation::now();
                        let r = match &h2 {
                            Some(h2) => crate::mux::run_worker(h2, plan, spec, poll),
                            None => run_worker(plan, spec, poll),
                        };
                        let waited = Starvation::now().since(waited);
                        let _ = done.send(());
                        (r, waited)
                    }
                });
            match h {
                Ok(h) => handles.push(h),
                Err(_) => {
                    stop.stop();
                }
            }
        }
        // Progress from published snapshots; the engine never waits on this.
        // Workers say when they end, so a short run is reported at once.
        drop(done_tx);
        let mut overdue = crate::overdue::Overdue::new(ages, std::mem::take(&mut schedules));
        let mut counts = vec![0u64; ages.len()];
        let mut seconds: Vec<SeriesPoint> = Vec::new();
        let mut finished = 0;
        while finished < handles.len() {
            match done_rx.recv_timeout(Duration::from_millis(250)) {
                Ok(()) => {
                    finished += 1;
                    continue;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                // A worker that panicked never sends; join() reports it below.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
            let snap = Snapshot {
                elapsed: start.elapsed(),
                completed: lives
                    .iter()
                    .map(|l| l.completed.load(Ordering::Relaxed))
                    .sum(),
                failed: lives.iter().map(|l| l.failed.load(Ordering::Relaxed)).sum(),
                open: lives.iter().map(|l| l.open.load(Ordering::Relaxed)).sum(),
                in_flight: lives
                    .iter()
                    .map(|l| l.in_flight.load(Ordering::Relaxed))
                    .sum(),
                sent: lives.iter().map(|l| l.sent.load(Ordering::Relaxed)).sum(),
                bytes_read: lives
                    .iter()
                    .map(|l| l.bytes_read.load(Ordering::Relaxed))
                    .sum(),
                bytes_written: lives
                    .iter()
                    .map(|l| l.bytes_written.load(Ordering::Relaxed))
                    .sum(),
                connections_opened: lives
                    .iter()
                    .map(|l| l.connections_opened.load(Ordering::Relaxed))
                    .sum(),
                errors: std::array::from_fn(|k| {
                    lives
                        .iter()
                        .map(|l| l.errors[k].load(Ordering::Relaxed))
                        .sum()
                }),
            };
            for (i, l) in lives.iter().enumerate() {
                if !l.journey_ages.is_empty() {
                    if let Ok(v) = l.journey_overdue.lock() {
                        overdue.journeys(i, &v);
                    }
                }
                if let Ok(mut v) = l.seconds.lock() {
                    if !ages.is_empty() {
                        overdue.seconds(i, &v);
                    }
                    redline_stats::record::merge_series(&mut seconds, &v);
                    v.clear();
                }
            }
            if !ages.is_empty() {
                counts = overdue.counts();
            }
            progress(&snap, &seconds, &counts, &live_requests(&lives));
        }
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| EngineError::WorkerPanicked))
            .collect::<Result<Vec<_>, _>>()
    })?;
    if let Some(msg) = h2.as_ref().and_then(|h| h.fatal()) {
        return Err(EngineError::Http2(msg));
    }

    let mut rec = RunRecord::new(plan.config.clone(), environment(), started_at);
    rec.server.address = plan.target.addr.to_string();
    let mut end = start;
    let mut busiest = Duration::ZERO;
    let (mut user, mut sys) = (Duration::ZERO, Duration::ZERO);
    let mut peak_open = 0;
    let (_, length_differs) = redline_stats::recorder::LengthTally::length_check(
        results.iter().map(|(r, _)| &r.recorder.lengths),
    );
    let mut starved = Starvation::default();
    let mut most_waited = Duration::ZERO;
    let (mut window, mut stamped) = (Duration::ZERO, false);
    for (r, waited) in results {
        starved.run_delay += waited.run_delay;
        starved.involuntary += waited.involuntary;
        most_waited = most_waited.max(waited.run_delay);
        end = end.max(r.end);
        busiest = busiest.max(r.cpu_user + r.cpu_sys);
        user += r.cpu_user;
        sys += r.cpu_sys;
        peak_open += r.peak_open;
        window = window.max(r.pacing.0);
        stamped |= r.pacing.1;
        rec.interrupted |= r.interrupted;
        redline_stats::requests::merge_requests(&mut rec.requests, &r.requests);
        match (&mut rec.journeys, &r.journeys) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => rec.journeys = Some(b.clone()),
            _ => {}
        }
        r.recorder.finish_into(&mut rec, r.end);
    }
    rec.counters.length_differs = length_differs;
    alt_svc_into(plan, &mut rec);
    let elapsed = end.saturating_duration_since(start);
    rec.duration_s = elapsed.as_secs_f64();
    rec.derive();
    redline_stats::stages::analyze(&mut rec);
    if rec.journeys.is_some() {
        // Stage levels are journeys a second, each several requests: a knee
        // of requests against journey levels would mislead.
        rec.knee = None;
    }
    // The workers' own threads: in-process servers (demo, tests) are not counted.
    let (user, sys) = (user.as_secs_f64(), sys.as_secs_f64());
    let secs = rec.duration_s.max(1e-9);
    rec.client = ClientUsage {
        user_s: user,
        sys_s: sys,
        threads,
        cpu_share: ((user + sys) / (secs * threads as f64)).min(1.0),
        busiest_thread_share: (busiest.as_secs_f64() / secs).min(1.0),
        steal_s: match (steal_before, steal_seconds()) {
            (Some(a), Some(b)) => (b - a).max(0.0),
            _ => 0.0,
        },
        run_delay_s: starved.run_delay.as_secs_f64(),
        most_waited_share: (most_waited.as_secs_f64() / secs).min(1.0),
        involuntary_switches: starved.involuntary,
        pacing_window_us: window.as_micros() as u64,
        answers_stamped: stamped,
        ..Default::default()
    };
    if let (Some(a), Some(b)) = (tcp_before, tcp_counters()) {
        rec.client.syn_retransmits = b.syn_retransmits.saturating_sub(a.syn_retransmits);
        rec.client.listen_overflows = b.listen_overflows.saturating_sub(a.listen_overflows);
    }
    add_warnings(&mut rec, plan, conns_total, peak_open, fd_note);
    Ok(rec)
}

/// Worker `i`'s schedule as `crate::overdue` needs it.
fn schedule_of(
    plan: &Plan,
    pacer: &Option<Pacer>,
    levels: &Option<Levels>,
    i: u64,
    threads: u64,
) -> crate::overdue::Schedule {
    use crate::overdue::Schedule;
    if crate::workload::journeys(plan) {
        // Journeys' later steps follow answers and think times, not the
        // pacer: the workers count them (`Worker::publish_journey_overdue`).
        return Schedule::Journeys;
    }
    if let Some(p) = pacer {
        return Schedule::Open(p.clone());
    }
    let Load::Closed { requests, .. } = &plan.load else {
        return Schedule::Unknown;
    };
    let thinks = plan
        .scenario
        .as_ref()
        .is_some_and(|s| s.requests.iter().any(|r| r.think.is_some()));
    if thinks || (requests.is_some() && plan.requests_per_conn.is_some()) {
        return Schedule::Unknown;
    }
    let streams = if plan.protocol().multiplexed() {
        u64::from(plan.streams.max(1))
    } else {
        1
    };
    Schedule::Closed {
        slots: share(plan.load.max_connections(), threads, i) * streams,
        budget: requests.map(|n| share(n, threads, i)),
        levels: levels.clone(),
    }
}

/// Raises the soft open-file limit toward what the run needs; a note if still short.
fn raise_fd_limit(needed: u64) -> Option<String> {
    #[cfg(unix)]
    {
        // SAFETY: getrlimit/setrlimit on a zeroed struct we own.
        let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
            return None;
        }
        let soft = rl.rlim_cur as u64;
        if soft >= needed {
            return None;
        }
        let hard = rl.rlim_max as u64;
        rl.rlim_cur = hard.min(needed.max(soft)) as libc::rlim_t;
        // SAFETY: as above.
        let ok = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } == 0;
        let now = if ok { rl.rlim_cur as u64 } else { soft };
        if now < needed {
            return Some(format!(
                "the open-file limit is {now} but this run needs about {needed}: \
                 raise it (ulimit -n {needed}) or use fewer connections"
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = needed;
    None
}

/// Raises the open-file limit toward what the run needs and grows the
/// descriptor table to match; a note when the limit stays short. Cheap to
/// call twice: the caller may call it early, while the process has one
/// thread, where growing the table costs no RCU wait (see below).
pub fn prepare_fds(plan: &Plan) -> Option<String> {
    let conns = plan.load.max_connections();
    let note = raise_fd_limit(conns + 64);
    reserve_fd_table(conns + 64);
    note
}

/// Grows the process's file-descriptor table to `needed` slots before the
/// run. The kernel grows it on demand (at 256, 512, 1024, … descriptors), and
/// in a multi-threaded process each growth waits for an RCU grace period:
/// 10 ms with the worker stalled in `socket()`, which showed as scheduler-lag
/// spikes of 10–20 ms in open-loop runs that opened connections mid-run.
fn reserve_fd_table(needed: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: getrlimit on a zeroed struct we own.
        let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
            return;
        }
        let top = needed.min(rl.rlim_cur as u64).min(1 << 20);
        if top <= 256 {
            return;
        }
        let Ok(f) = std::fs::File::open("/dev/null") else {
            return;
        };
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own gives a new one (the
        // lowest free at or above `top - 1`), which we close at once.
        let fd = unsafe {
            libc::fcntl(
                f.as_raw_fd(),
                libc::F_DUPFD_CLOEXEC,
                (top - 1) as libc::c_int,
            )
        };
        if fd >= 0 {
            // SAFETY: `fd` is ours and used nowhere else.
            unsafe { libc::close(fd) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = needed;
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Describes the machine the run is made on.
pub fn environment() -> Environment {
    Environment {
        hostname: read_trim("/proc/sys/kernel/hostname")
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_default(),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_default(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get() as u64)
            .unwrap_or(1),
        redline_version: env!("CARGO_PKG_VERSION").into(),
        link_mbit: Environment::read_link_mbit(),
    }
}

/// Worker `i` of `threads`: its open-loop schedule (its stripe of the
/// run's, a `--segment` run's of the whole run's) or its share of the
/// closed-loop stage levels.
pub(crate) fn worker_load(plan: &Plan, i: usize, threads: u64) -> (Option<Pacer>, Option<Levels>) {
    let pacer = match &plan.load {
        Load::Open {
            rate,
            arrival,
            requests,
            duration,
            ..
        } => {
            // A --segment run paces its ticks of the whole run's schedule.
            let (rate, requests) = match &plan.segment {
                Some(s) => (s.whole_rate.unwrap_or(*rate), s.whole_requests),
                None => (*rate, *requests),
            };
            let stripe = plan.stripe(i as u64, threads);
            let limit = requests.map(|n| stripe.count_below(n));
            Some(Pacer::striped(
                *arrival,
                match &plan.staged {
                    Some(s) if s.rate => s.profile.clone(),
                    _ => Profile::constant(rate),
                },
                stripe,
                limit,
                *duration,
                plan.seed,
            ))
        }
        Load::Closed { .. } => None,
    };
    let levels = match (&plan.staged, &plan.load) {
        (Some(s), Load::Closed { .. }) => Some(
            Levels::new(s.profile.clone(), i, threads as usize)
                .with_segment(plan.segment.as_ref().map(|s| s.segment.clone())),
        ),
        _ => None,
    };
    (pacer, levels)
}

#[cfg(test)]
mod tests;

/// How long a worker thread waited for a CPU while ready to run (the
/// kernel's run-queue delay, `/proc/thread-self/schedstat`) and how often
/// the scheduler took the CPU from it (involuntary context switches): a
/// client that shares its CPUs with busy processes sends late and slow
/// without using much CPU itself, which only these counters show.
#[derive(Debug, Clone, Copy, Default)]
struct Starvation {
    run_delay: Duration,
    involuntary: u64,
}

impl Starvation {
    /// The calling thread's counters now (zero where unreadable).
    fn now() -> Starvation {
        let run_delay = std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map(Duration::from_nanos)
            .unwrap_or_default();
        Starvation {
            run_delay,
            involuntary: involuntary_switches(),
        }
    }

    /// What grew since `before`.
    fn since(self, before: Starvation) -> Starvation {
        Starvation {
            run_delay: self.run_delay.saturating_sub(before.run_delay),
            involuntary: self.involuntary.saturating_sub(before.involuntary),
        }
    }
}

/// Involuntary context switches of the calling thread so far (the
/// scheduler took its CPU away while it could still run).
fn involuntary_switches() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_THREAD is valid on Linux.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
            return ru.ru_nivcsw.max(0) as u64;
        }
    }
    0
}

/// The origin's `Alt-Svc` into the record: an https run's first answer over
/// TCP (parsed; a plain-http origin's is not an offer, RFC 7838 §2.1), or
/// `--http3`'s probe with the endpoint it chose.
fn alt_svc_into(plan: &Plan, rec: &mut RunRecord) {
    if let Some(r) = &plan.h3 {
        rec.server.alt_svc = r.alt_svc.clone();
        rec.server.http3_endpoint = Some(r.endpoint.clone());
        return;
    }
    rec.server.alt_svc = match plan.tls {
        Some(_) => rec
            .server
            .alt_svc
            .take()
            .map(|s| crate::plan::h3::seen(s.value)),
        None => None,
    };
}
