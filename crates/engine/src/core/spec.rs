//! What a worker is asked to do ([`WorkerSpec`]) and what it hands back
//! ([`WorkerResult`]), the same for every driver, and the thread CPU time
//! each driver measures itself with ([`thread_cpu`]). `run::execute` fills
//! the one and merges the other; the HTTP/1 and HTTP/2 drivers only take
//! and give them, so neither imports the other.

use crate::control::Live;
use crate::pacer::Pacer;
use redline_stats::{Journeys, Recorder, RequestStats};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a worker is asked to do.
pub(crate) struct WorkerSpec {
    /// Worker number.
    pub(crate) index: usize,
    /// Global id of this worker's first virtual user (scenario runs).
    pub(crate) first_vu: u64,
    /// The run's common start.
    pub(crate) start: Instant,
    /// Connections (closed loop) or connection cap (open loop) of this worker.
    pub(crate) connections: u64,
    /// Closed loop: requests this worker sends (None: until the deadline).
    pub(crate) budget: Option<u64>,
    /// When sending stops.
    pub(crate) deadline: Option<Instant>,
    /// Open loop: the schedule.
    pub(crate) pacer: Option<Pacer>,
    /// Set to stop early (Ctrl-C).
    pub(crate) stop: Arc<AtomicBool>,
    /// Published counts.
    pub(crate) live: Arc<Live>,
    /// Closed loop with `--stages`: this worker's connections over time.
    pub(crate) levels: Option<crate::pacer::Levels>,
}

/// What a worker hands back.
pub(crate) struct WorkerResult {
    /// Its measurements.
    pub(crate) recorder: Recorder,
    /// When its last request ended.
    pub(crate) end: Instant,
    /// User CPU time of the thread.
    pub(crate) cpu_user: Duration,
    /// System CPU time of the thread.
    pub(crate) cpu_sys: Duration,
    /// Most connections open at once.
    pub(crate) peak_open: u64,
    /// Whether it was stopped early.
    pub(crate) interrupted: bool,
    /// Scenario runs: numbers per named request.
    pub(crate) requests: Vec<RequestStats>,
    /// Open-loop sessions: how the journeys ended.
    pub(crate) journeys: Option<Journeys>,
    /// Open loop: its pacing window (zero: each send on time) and whether
    /// answers were timed by the kernel's arrival stamps (the driver's
    /// `ioloop::Sleeper::pacing`).
    pub(crate) pacing: (Duration, bool),
}

/// CPU time (user, system) of the calling thread.
pub(crate) fn thread_cpu() -> (Duration, Duration) {
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
fn tv(t: libc::timeval) -> Duration {
    Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1000)
}
