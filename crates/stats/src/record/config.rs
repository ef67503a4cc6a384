//! What was run and where: the load model, the run's configuration (secrets
//! already redacted), segments of a distributed run, and the environment.

use super::*;

/// How load was generated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LoadModel {
    /// N connections each sending the next request when the previous one is done.
    Closed {
        /// Connections kept open.
        connections: u64,
        /// Total requests, when bounded by count.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        requests: Option<u64>,
        /// Run time in seconds, when bounded by time.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        duration_s: Option<f64>,
    },
    /// Requests sent at scheduled times, whatever the server does.
    Open {
        /// Target requests per second.
        rate: f64,
        /// `constant`, `poisson` or `uniform`.
        arrival: String,
        /// The most connections that may be opened.
        max_connections: u64,
        /// Total requests, when bounded by count.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        requests: Option<u64>,
        /// Run time in seconds, when bounded by time.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        duration_s: Option<f64>,
    },
}

impl LoadModel {
    /// True for open loop.
    pub fn is_open(&self) -> bool {
        matches!(self, LoadModel::Open { .. })
    }
    /// The asked-for connection count (closed) or cap (open).
    pub fn connections(&self) -> u64 {
        match self {
            LoadModel::Closed { connections, .. } => *connections,
            LoadModel::Open {
                max_connections, ..
            } => *max_connections,
        }
    }
    /// A one-line description, e.g. `closed loop, 10 connections, 1000 requests`.
    pub fn describe(&self) -> String {
        fn bound(r: &Option<u64>, d: &Option<f64>) -> String {
            match (r, d) {
                (Some(n), _) => format!("{n} requests"),
                (None, Some(d)) => format!("{}s", trim_float(*d)),
                (None, None) => "unbounded".into(),
            }
        }
        match self {
            LoadModel::Closed {
                connections,
                requests,
                duration_s,
            } => format!(
                "closed loop, {connections} connections, {}",
                bound(requests, duration_s)
            ),
            LoadModel::Open {
                rate,
                arrival,
                max_connections,
                requests,
                duration_s,
            } if arrival == "replay" => format!(
                "open loop, the log's times (mean {} req/s), up to {max_connections} connections, {}",
                trim_float(*rate),
                bound(requests, duration_s)
            ),
            LoadModel::Open {
                rate,
                arrival,
                max_connections,
                requests,
                duration_s,
            } => format!(
                "open loop, {} req/s {arrival}, up to {max_connections} connections, {}",
                trim_float(*rate),
                bound(requests, duration_s)
            ),
        }
    }
}

pub(super) fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What was asked for (secrets redacted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// The target URL (password redacted).
    pub url: String,
    /// HTTP method.
    pub method: String,
    /// Extra request headers as `Name: value` (Authorization, Cookie… redacted).
    pub headers: Vec<String>,
    /// Request body size in bytes.
    pub body_bytes: u64,
    /// `1.1`, `1.0` or `2`.
    pub http_version: String,
    /// HTTP/2: concurrent streams per connection (`--streams`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub streams: Option<u64>,
    /// Connections reused for several requests.
    pub keepalive: bool,
    /// Close and reopen a connection after this many requests.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub requests_per_conn: Option<u64>,
    /// Per-request timeout, seconds.
    pub timeout_s: f64,
    /// Connect timeout, seconds.
    pub connect_timeout_s: f64,
    /// Worker threads.
    pub threads: u64,
    /// The load model.
    pub load: LoadModel,
    /// TLS certificate verification was turned off (`--insecure`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// The scenario file of a `--scenario` run (its name and path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// The `--stages` load plan, when the load level changed over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<crate::stages::StagePlan>,
    /// `--follow-redirects`: the most redirects followed per request (`--max-redirs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_redirects: Option<u64>,
    /// How the protocol was chosen when redline chose it, e.g.
    /// `HTTP/2 (negotiated by ALPN)` for an https run without `--http2`/`--http1.1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negotiated: Option<String>,
    /// `--segment`: this run was one share of a larger one (its load above is the share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<SegmentConfig>,
    /// `redline replay` at the log's times: the per-second schedule that ran
    /// (the load above is open loop, arrival `replay`, at its mean rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::replay::ReplaySchedule>,
    /// `--expect-status`: the statuses that count as success, e.g.
    /// `200-299,301` (absent: 2xx and 3xx; see [`crate::ExpectStatus`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_status: Option<String>,
}

/// The share of a whole run a segment ran (`--segment`, `redline agent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentConfig {
    /// The segment's bounds, `1/3:2/3`.
    pub segment: String,
    /// The whole sequence of bounds, `0,1/3,2/3,1`.
    pub sequence: String,
    /// Which segment of the sequence (0-based).
    pub index: u64,
    /// How many segments the sequence has.
    pub count: u64,
}

/// A run told to start at a set time (`--start-at`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduledStart {
    /// The time asked for (RFC 3339, UTC).
    pub at: String,
    /// How late the run actually started, ms (0 or a little above).
    pub late_ms: f64,
}

impl RunConfig {
    /// A plain keep-alive GET of `url` under `load`, with the default time-outs
    /// (for examples and tests; real runs build theirs from a validated plan).
    pub fn get(url: &str, load: LoadModel) -> RunConfig {
        RunConfig {
            url: url.into(),
            method: "GET".into(),
            headers: vec![],
            body_bytes: 0,
            http_version: "1.1".into(),
            streams: None,
            keepalive: true,
            requests_per_conn: None,
            timeout_s: 30.0,
            connect_timeout_s: 10.0,
            threads: 1,
            load,
            insecure: false,
            scenario: None,
            stages: None,
            follow_redirects: None,
            negotiated: None,
            segment: None,
            schedule: None,
            expect_status: None,
        }
    }

    /// The run's status rule (`--expect-status`, default 2xx and 3xx).
    pub fn status_rule(&self) -> crate::ExpectStatus {
        crate::ExpectStatus::of(self.expect_status.as_deref())
    }
}

/// Where the run was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Environment {
    /// Host name of the load generator.
    pub hostname: String,
    /// Operating system.
    pub os: String,
    /// CPU architecture.
    pub arch: String,
    /// Kernel release, where known.
    pub kernel: String,
    /// Logical CPUs available to the process.
    pub cpus: u64,
    /// redline's version.
    pub redline_version: String,
    /// Speed of the client's fastest network link that was up (Mbit/s, from
    /// `/sys/class/net/*/speed`, loopback left out), when it could be read:
    /// the ceiling the bandwidth diagnosis compares the bytes/s with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_mbit: Option<u64>,
}

impl Environment {
    /// The fastest network link that is up, in Mbit/s (loopback and links
    /// that report no speed, such as most virtual ones, left out).
    pub fn read_link_mbit() -> Option<u64> {
        let dir = std::fs::read_dir("/sys/class/net").ok()?;
        dir.filter_map(|e| e.ok())
            .filter(|e| e.file_name() != "lo")
            .filter(|e| {
                std::fs::read_to_string(e.path().join("operstate")).is_ok_and(|s| s.trim() == "up")
            })
            .filter_map(|e| {
                std::fs::read_to_string(e.path().join("speed"))
                    .ok()?
                    .trim()
                    .parse::<i64>()
                    .ok()
            })
            .filter(|m| *m > 0)
            .max()
            .map(|m| m as u64)
    }
}
