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
    /// The reads, oldest first.
    pub samples: Vec<StatusSample>,
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
    /// php-fpm: processes in the pool (total processes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// php-fpm: times the pool hit pm.max_children since start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_children_reached: Option<u64>,
    /// php-fpm: requests waiting for a free process (listen queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_queue: Option<u64>,
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
}

impl StatusWatch {
    /// The reads in `[t0_s, t1_s]` seconds since the run started
    /// (`run_started_at`, RFC 3339), summarized; `None` without any read there.
    pub fn window(&self, run_started_at: &str, t0_s: f64, t1_s: f64) -> Option<StatusWindow> {
        let off = match (
            crate::time::parse_rfc3339_ms(&self.started_at),
            crate::time::parse_rfc3339_ms(run_started_at),
        ) {
            (Some(h), Some(r)) => (h - r) as f64 / 1000.0,
            _ => 0.0,
        };
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
        })
    }
}
