//! The server's own status page sampled during a run (nginx stub_status,
//! Apache mod_status, ...): its samples and per-window summary.

use super::*;

/// What the server's own status page said during a run (`--server-status`):
/// Apache mod_status `?auto`, nginx stub_status, lighttpd mod_status `?auto`
/// or php-fpm's status page, read at the watch interval. Unlike `--watch`,
/// it counts what the server's workers are doing (busy, idle, held by an
/// idle keep-alive connection), which is what tells a full worker pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StatusWatch {
    /// The status page read (credentials never kept).
    pub url: String,
    /// Which status format it spoke: `apache`, `nginx`, `lighttpd` or `php-fpm`.
    pub server: String,
    /// When reading started (RFC 3339, UTC, milliseconds).
    pub started_at: String,
    /// Seconds between reads.
    pub interval_s: f64,
    /// Apache: the scoreboard's slots (prefork: MaxRequestWorkers; threaded
    /// MPMs: ServerLimit × ThreadsPerChild); lighttpd: its connection slots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u64>,
    /// Reads that failed (no answer, not a status page).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: u64,
    /// Why the last failed read failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Each failed read, oldest first (at most [`MAX_FAILURES`] kept; `failed`
    /// counts them all). A status page needs a worker of the server itself,
    /// so reads that time out while the load runs are evidence of a full
    /// pool, not noise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<StatusFailure>,
    /// Apache: the MPM the page names (`ServerMPM: event`, Apache 2.4.35 and
    /// later): `event`, `worker` or `prefork`. Absent when the page does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpm: Option<String>,
    /// The reads, oldest first.
    pub samples: Vec<StatusSample>,
}

/// The most failed reads a [`StatusWatch`] keeps one by one.
pub const MAX_FAILURES: usize = 10_000;

/// One failed read of the status page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StatusFailure {
    /// Seconds since reading started (when the read began).
    pub t: f64,
    /// Why: `timeout` (no full answer in time: the server had no worker
    /// free to answer, or was too slow), `refused` (nothing listening, or
    /// the connection was reset), `not_status` (an answer, but not a status
    /// page redline reads, or not HTTP 200), `other` (name resolution, ...).
    pub kind: String,
}

/// One read of a status page. A field the server's page does not give is absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StatusSample {
    /// Seconds since reading started.
    pub t: f64,
    /// Workers (connections for nginx) serving a request now: Apache
    /// BusyWorkers, nginx Reading + Writing, lighttpd BusyServers, php-fpm
    /// active processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<u64>,
    /// Workers ready for a request: Apache IdleWorkers, lighttpd
    /// IdleServers, php-fpm idle processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<u64>,
    /// Workers (nginx: connections) held by an idle keep-alive connection:
    /// Apache scoreboard `K`, nginx Waiting. Apache counts them in `busy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive: Option<u64>,
    /// Requests served since the server started: Apache/lighttpd Total
    /// Accesses, nginx requests, php-fpm accepted conn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// nginx: open client connections (Active connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<u64>,
    /// nginx: connections accepted since start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepts: Option<u64>,
    /// nginx: connections handled since start (below `accepts`: dropped at a
    /// resource limit such as worker_connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled: Option<u64>,
    /// php-fpm: processes in the pool (total processes); Apache: its child
    /// processes (`Processes`, threaded MPMs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// php-fpm: times the pool hit pm.max_children since start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_children_reached: Option<u64>,
    /// php-fpm: requests waiting for a free process (listen queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_queue: Option<u64>,
    /// Apache event: the connections its processes hold (`ConnsTotal`),
    /// whether a worker thread serves them or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conns_total: Option<u64>,
    /// Apache event: connections waiting, without a worker, for the client
    /// to read the rest of an answer (`ConnsAsyncWriting`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_writing: Option<u64>,
    /// Apache event: idle keep-alive connections, held without a worker
    /// (`ConnsAsyncKeepAlive`): on event they never show as `K` in the
    /// scoreboard. Apache refreshes the `Conns*` numbers only when its
    /// listener handles a connection's timeout, so they may lag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_keepalive: Option<u64>,
    /// Apache event: connections being closed (lingering close) without a
    /// worker (`ConnsAsyncClosing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_closing: Option<u64>,
    /// Apache (threaded MPMs): processes exiting gracefully (`Stopping`),
    /// whose slots are not free yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<u64>,
    /// Apache/lighttpd: workers per scoreboard state (`W` sending, `K`
    /// keep-alive, `R` reading, `_` waiting, `.` open slot, ...).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub states: std::collections::BTreeMap<String, u64>,
}

/// The status page over one window of a run (a stage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StatusWindow {
    /// Reads inside the window.
    pub samples: u32,
    /// Busy workers.
    pub busy: PeakMean,
    /// Idle workers (lowest seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_idle: Option<u64>,
    /// Workers held by keep-alive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive: Option<PeakMean>,
    /// Requests per second by the server's own count (between the window's first and last read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_s: Option<f64>,
    /// php-fpm: the longest listen queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_listen_queue: Option<u64>,
    /// php-fpm: times pm.max_children was reached inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_children_reached: Option<u64>,
    /// nginx: connections accepted but not handled inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_handled: Option<u64>,
    /// Apache event: connections held (`ConnsTotal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conns_total: Option<PeakMean>,
    /// Apache event: idle keep-alive connections held without a worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_keepalive: Option<PeakMean>,
    /// Apache event: connections waiting for the client to read an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_writing: Option<PeakMean>,
    /// Apache event: connections in lingering close.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_closing: Option<PeakMean>,
    /// Reads that failed inside the window (see [`StatusWatch::failures_between`]).
    #[serde(default, skip_serializing_if = "is_zero32")]
    pub failed: u32,
}

fn is_zero32(n: &u32) -> bool {
    *n == 0
}

impl StatusWatch {
    /// Seconds from the run's start (`run_started_at`, RFC 3339) to this
    /// watch's start: add it to a sample's or failure's `t` to place it on
    /// the run's clock.
    pub fn offset_s(&self, run_started_at: &str) -> f64 {
        match (
            crate::time::parse_rfc3339_ms(&self.started_at),
            crate::time::parse_rfc3339_ms(run_started_at),
        ) {
            (Some(h), Some(r)) => (h - r) as f64 / 1000.0,
            _ => 0.0,
        }
    }

    /// Records a failed read at `t` (seconds since reading started).
    pub fn add_failure(&mut self, t: f64, kind: &str, message: String) {
        self.failed += 1;
        self.last_error = Some(message);
        if self.failures.len() < MAX_FAILURES {
            self.failures.push(StatusFailure {
                t,
                kind: kind.into(),
            });
        }
    }

    /// The failed reads in `[t0_s, t1_s]` seconds since the run started
    /// (`run_started_at`, RFC 3339), on the run's clock: `(t, kind)`.
    pub fn failures_between(&self, run_started_at: &str, t0_s: f64, t1_s: f64) -> Vec<(f64, &str)> {
        let off = self.offset_s(run_started_at);
        self.failures
            .iter()
            .map(|f| (f.t + off, f.kind.as_str()))
            .filter(|(t, _)| *t >= t0_s && *t <= t1_s)
            .collect()
    }

    /// The reads in `[t0_s, t1_s]` seconds since the run started
    /// (`run_started_at`, RFC 3339), summarized; `None` without any read there.
    pub fn window(&self, run_started_at: &str, t0_s: f64, t1_s: f64) -> Option<StatusWindow> {
        let off = self.offset_s(run_started_at);
        if t0_s.is_nan() || t1_s.is_nan() || t1_s < t0_s {
            return None;
        }
        let s: Vec<&StatusSample> = self
            .samples
            .iter()
            .filter(|x| x.t + off >= t0_s && x.t + off <= t1_s)
            .collect();
        if s.is_empty() {
            return None;
        }
        let opt_peak = |f: fn(&StatusSample) -> Option<u64>| -> Option<PeakMean> {
            s.iter()
                .any(|x| f(x).is_some())
                .then(|| PeakMean::of(s.iter().filter_map(|x| f(x).map(|v| v as f64))))
        };
        let delta = |f: fn(&StatusSample) -> Option<u64>| -> Option<(u64, f64)> {
            let v: Vec<(u64, f64)> = s.iter().filter_map(|x| f(x).map(|v| (v, x.t))).collect();
            match (v.first(), v.last()) {
                (Some(a), Some(b)) if v.len() > 1 => Some((b.0.saturating_sub(a.0), b.1 - a.1)),
                _ => None,
            }
        };
        Some(StatusWindow {
            samples: s.len() as u32,
            busy: PeakMean::of(s.iter().filter_map(|x| x.busy.map(|v| v as f64))),
            min_idle: s.iter().filter_map(|x| x.idle).min(),
            keepalive: opt_peak(|x| x.keepalive),
            requests_per_s: delta(|x| x.requests)
                .filter(|(_, dt)| *dt > 0.0)
                .map(|(n, dt)| n as f64 / dt),
            max_listen_queue: s.iter().filter_map(|x| x.listen_queue).max(),
            max_children_reached: delta(|x| x.max_children_reached).map(|(n, _)| n),
            not_handled: match (delta(|x| x.accepts), delta(|x| x.handled)) {
                (Some((a, _)), Some((h, _))) => Some(a.saturating_sub(h)),
                _ => None,
            },
            conns_total: opt_peak(|x| x.conns_total),
            async_keepalive: opt_peak(|x| x.async_keepalive),
            async_writing: opt_peak(|x| x.async_writing),
            async_closing: opt_peak(|x| x.async_closing),
            failed: self.failures_between(run_started_at, t0_s, t1_s).len() as u32,
        })
    }
}
