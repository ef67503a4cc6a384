//! The run record: the one versioned result type every command reads and writes.
//!
//! It holds the configuration (secrets already redacted by whoever built it), the
//! environment, counters, status codes, errors, histograms, the per-second series,
//! the client's CPU use and the warnings. Records merge exactly (`a += &b`): runs
//! made at the same time from several machines add up to one.

use crate::error::{merge_counts, ErrorCount};
use crate::hist::{Hist, SeriesHist, SERIES_SIGFIG};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::AddAssign;

mod config;
mod merge;
mod server_log;
pub use config::{Environment, LoadModel, RunConfig, ScheduledStart, SegmentConfig};
pub use merge::RecordError;
pub use server_log::{LogFinding, ServerLog};

/// The `format` field of every run record.
pub const FORMAT: &str = "redline.run";
/// The version of the run-record format this build writes.
pub const FORMAT_VERSION: u32 = 1;

/// What the server said about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ServerInfo {
    /// The resolved address that was connected to.
    pub address: String,
    /// The `Server` header of the first response.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub software: Option<String>,
    /// Body length of the first successful response.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub document_length: Option<u64>,
    /// The `Alt-Svc` header of an https origin's answer over TCP (the
    /// run's first answer, or `--http3`'s probe before the load).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub alt_svc: Option<AltSvcSeen>,
    /// `--http3`: the UDP endpoint the QUIC connections went to, and why.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub http3_endpoint: Option<Http3Endpoint>,
}

/// An `Alt-Svc` header as the run saw it (RFC 7838).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct AltSvcSeen {
    /// The value as sent (at most 200 characters).
    pub value: String,
    /// Its first `h3` alternative's authority (`:443`, `alt.example:443`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub h3: Option<String>,
    /// That alternative's `ma` (freshness, seconds; 86400 when absent).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub max_age_s: Option<u64>,
    /// Why the value was ignored (it breaks RFC 7838's grammar).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

/// `--http3`: where the QUIC connections went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Http3Endpoint {
    /// The UDP address.
    pub address: String,
    /// `alt-svc` (the origin's `h3` alternative) or `url` (the URL's own port).
    pub source: String,
    /// Why, in words.
    pub why: String,
}

/// Request and connection counts. Every scheduled request ends exactly once:
/// `scheduled == completed + failed + in_flight_at_end + not_sent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Counters {
    /// Requests the load model issued.
    pub scheduled: u64,
    /// Requests written to a connection.
    pub sent: u64,
    /// Complete responses, whatever their status.
    pub completed: u64,
    /// Complete responses with a status outside 200–299.
    pub non_2xx: u64,
    /// Requests that ended in an error (see `errors`).
    pub failed: u64,
    /// Sent but not answered when the run ended.
    pub in_flight_at_end: u64,
    /// Scheduled but never sent (waiting for a connection when the run ended).
    pub not_sent: u64,
    /// Open loop: requests that found no free connection at their send time.
    pub waited_for_connection: u64,
    /// Bytes read from the network (heads and bodies as sent).
    pub bytes_read: u64,
    /// Bytes written to the network.
    pub bytes_written: u64,
    /// Response body bytes (after de-chunking).
    pub body_bytes: u64,
    /// TCP connections established.
    pub connections_opened: u64,
    /// Most connections open at once (summed over workers).
    pub peak_connections: u64,
    /// `--follow-redirects`: redirect responses followed (hops; a request
    /// redirected twice counts 2). Its final response is the one counted in
    /// `completed`, and `sent` counts the request once, whatever its hops.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redirects: u64,
    /// Complete responses whose body length differs from the run's first
    /// response's (ab's "Failed requests … Length"; a server whose pages vary
    /// in length has many, which is not an error by itself).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub length_differs: u64,
    /// HTTP/2: requests the server said it did not process (GOAWAY naming a
    /// lower last stream id, or RST_STREAM REFUSED_STREAM) that were sent
    /// again (RFC 9113 §8.7), each at most once. A retried request still
    /// counts once in `scheduled`, `sent` and how it ended.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retried: u64,
    /// HTTP/3: QUIC handshakes completed (each also counts in
    /// `connections_opened`; its time is the connect time).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quic_handshakes: u64,
    /// HTTP/3: of `quic_handshakes`, those that resumed a TLS session (a
    /// ticket from an earlier connection of the run; no certificate sent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quic_resumed: u64,
    /// HTTP/3: of `quic_resumed`, those that sent requests in 0-RTT early
    /// data (safe methods without a body only).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quic_0rtt: u64,
    /// HTTP/3: of `quic_0rtt`, those whose early data the server accepted
    /// (the others' requests were sent again after the handshake).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quic_0rtt_accepted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `*a += b`, saturating at `u64::MAX` instead of wrapping; true when it saturated.
pub fn sat_add(a: &mut u64, b: u64) -> bool {
    let (v, over) = a.overflowing_add(b);
    *a = if over { u64::MAX } else { v };
    over
}

/// The warning code of a merge whose counts reached `u64::MAX`.
pub const SATURATED: &str = "counter_saturated";

/// The warning text of a merge whose counts reached `u64::MAX`.
pub fn saturated_message() -> String {
    "a counter reached its largest value (2^64-1) while adding runs and stopped there instead of \
     wrapping: the record's totals are at least what they show, not exact (a corrupt or forged \
     record is the likely cause)"
        .into()
}

impl Counters {
    /// Adds `o`, each counter saturating; true when any saturated.
    pub fn add_saturating(&mut self, o: &Counters) -> bool {
        let mut s = false;
        s |= sat_add(&mut self.scheduled, o.scheduled);
        s |= sat_add(&mut self.sent, o.sent);
        s |= sat_add(&mut self.completed, o.completed);
        s |= sat_add(&mut self.non_2xx, o.non_2xx);
        s |= sat_add(&mut self.failed, o.failed);
        s |= sat_add(&mut self.in_flight_at_end, o.in_flight_at_end);
        s |= sat_add(&mut self.not_sent, o.not_sent);
        s |= sat_add(&mut self.waited_for_connection, o.waited_for_connection);
        s |= sat_add(&mut self.bytes_read, o.bytes_read);
        s |= sat_add(&mut self.bytes_written, o.bytes_written);
        s |= sat_add(&mut self.body_bytes, o.body_bytes);
        s |= sat_add(&mut self.connections_opened, o.connections_opened);
        s |= sat_add(&mut self.peak_connections, o.peak_connections);
        s |= sat_add(&mut self.redirects, o.redirects);
        s |= sat_add(&mut self.length_differs, o.length_differs);
        s |= sat_add(&mut self.retried, o.retried);
        s |= sat_add(&mut self.quic_handshakes, o.quic_handshakes);
        s |= sat_add(&mut self.quic_resumed, o.quic_resumed);
        s |= sat_add(&mut self.quic_0rtt, o.quic_0rtt);
        s |= sat_add(&mut self.quic_0rtt_accepted, o.quic_0rtt_accepted);
        s
    }
}

impl AddAssign<&Counters> for Counters {
    /// Saturating (see [`Counters::add_saturating`], which also says whether it did).
    fn add_assign(&mut self, o: &Counters) {
        self.add_saturating(o);
    }
}

/// One second of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// Seconds since the start of the run (this point covers [t, t+1)).
    pub t: u32,
    /// Responses completed in this second.
    pub requests: u64,
    /// Errors in this second.
    pub errors: u64,
    /// Bytes read in this second.
    pub bytes: u64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// p90 latency, µs.
    pub p90_us: u64,
    /// p99 latency, µs.
    pub p99_us: u64,
    /// Max latency, µs.
    pub max_us: u64,
    /// Responses by status class in this second: 1xx, 2xx, 3xx, 4xx, 5xx.
    #[serde(default)]
    pub status_classes: [u64; 5],
    /// Responses by status code in this second, `[code, count]` by code (so
    /// any `--expect-status` rule can be applied to one second; absent in
    /// records written before it was kept, where the classes stand in).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status_codes: Vec<(u16, u64)>,
    /// The second's latency histogram (HdrHistogram V2, base64; 2 digits).
    pub hist: SeriesHist,
}

impl SeriesPoint {
    /// A point from counts and a histogram.
    pub fn new(t: u32, requests: u64, errors: u64, bytes: u64, h: &Hist) -> SeriesPoint {
        SeriesPoint {
            t,
            requests,
            errors,
            bytes,
            status_classes: [0; 5],
            status_codes: Vec::new(),
            p50_us: h.percentile(50.0),
            p90_us: h.percentile(90.0),
            p99_us: h.percentile(99.0),
            max_us: h.max(),
            hist: SeriesHist::from_hist(h),
        }
    }

    fn merge(&mut self, o: &SeriesPoint) {
        let mut h = self.hist.to_hist();
        h.merge(&o.hist.to_hist());
        let mut classes = self.status_classes;
        for (a, b) in classes.iter_mut().zip(o.status_classes) {
            *a = a.saturating_add(b);
        }
        let mut codes = std::mem::take(&mut self.status_codes);
        for &(c, n) in &o.status_codes {
            add_code(&mut codes, c, n);
        }
        *self = SeriesPoint::new(
            self.t,
            self.requests.saturating_add(o.requests),
            self.errors.saturating_add(o.errors),
            self.bytes.saturating_add(o.bytes),
            &h,
        );
        self.status_classes = classes;
        self.status_codes = codes;
    }

    /// Answers in this second the rule refuses (by code when the codes were
    /// kept, else by class).
    pub fn refused(&self, rule: &crate::status::ExpectStatus) -> u64 {
        if self.status_codes.is_empty() {
            rule.refused_classes(&self.status_classes)
        } else {
            rule.refused(self.status_codes.iter().copied())
        }
    }
}

impl SeriesPoint {
    /// Adds this second's answers to a map by status (as a record's
    /// `status_codes`), so the answers of a window of seconds can be judged as
    /// a whole run's; a second recorded without its codes adds each class
    /// under its first code (`300` for 3xx).
    pub fn add_codes_to(&self, by_code: &mut BTreeMap<String, u64>) {
        let mut add = |c: u16, n: u64| {
            if n > 0 {
                let v = by_code.entry(c.to_string()).or_insert(0);
                *v = v.saturating_add(n);
            }
        };
        if self.status_codes.is_empty() {
            for (i, n) in self.status_classes.iter().enumerate() {
                add((i as u16 + 1) * 100, *n);
            }
        } else {
            for &(c, n) in &self.status_codes {
                add(c, n);
            }
        }
    }
}

/// Adds `n` answers with status `code` to a list kept sorted by code.
pub(crate) fn add_code(codes: &mut Vec<(u16, u64)>, code: u16, n: u64) {
    match codes.binary_search_by_key(&code, |x| x.0) {
        Ok(i) => codes[i].1 = codes[i].1.saturating_add(n),
        Err(i) => codes.insert(i, (code, n)),
    }
}

/// Merges per-second series, aligning points by `t`.
pub fn merge_series(a: &mut Vec<SeriesPoint>, b: &[SeriesPoint]) {
    for p in b {
        match a.binary_search_by_key(&p.t, |x| x.t) {
            Ok(i) => a[i].merge(p),
            Err(i) => a.insert(i, p.clone()),
        }
    }
}

/// The client's own resource use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct ClientUsage {
    /// User CPU seconds of the worker threads.
    pub user_s: f64,
    /// System CPU seconds of the worker threads.
    pub sys_s: f64,
    /// Worker threads.
    pub threads: u64,
    /// CPU used by the workers as a share of their capacity (threads × elapsed), 0–1.
    pub cpu_share: f64,
    /// CPU share of the busiest worker thread, 0–1.
    pub busiest_thread_share: f64,
    /// CPU seconds the hypervisor took from the CPUs the client may run on
    /// during the run (Linux "steal" time; 0 on bare metal): time the
    /// client was ready to run and could not, invisible to its own clock.
    #[serde(default)]
    pub steal_s: f64,
    /// Connection attempts (SYNs) this host's TCP stack sent again during the
    /// run because no answer came (Linux `TcpExt TCPSynRetrans`, counted for
    /// the whole network namespace). Each one held a connect for 1 s or more.
    #[serde(default)]
    pub syn_retransmits: u64,
    /// Times a listening socket on this host had its accept queue full
    /// during the run and dropped a connection attempt (`TcpExt
    /// ListenOverflows`): counted here when the server runs on this host.
    #[serde(default)]
    pub listen_overflows: u64,
    /// Seconds the worker threads waited for a CPU while ready to run (the
    /// kernel's run-queue delay), summed over the threads.
    #[serde(default)]
    pub run_delay_s: f64,
    /// The largest share of the run that one worker thread spent waiting
    /// for a CPU, 0–1: a client starved by other processes on its CPUs.
    #[serde(default)]
    pub most_waited_share: f64,
    /// Times the scheduler took a CPU from a worker thread that could still
    /// run (involuntary context switches), summed over the threads.
    #[serde(default)]
    pub involuntary_switches: u64,
    /// Open loop: sends closer than this apart went out together, at most
    /// this late (µs; 0: each at its time).
    #[serde(default)]
    pub pacing_window_us: u64,
    /// Answers may have waited in their sockets for the worker's wake-up
    /// (an open loop's window; an HTTP/2 closed loop against a saturated
    /// server, engine `defer.rs`) and their arrival is the kernel's
    /// stamp, not the read's time.
    #[serde(default)]
    pub answers_stamped: bool,
}

/// Something the reader must know to trust (or distrust) the numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// A stable code, e.g. `client_cpu`, `rate_short`, `scheduler_lag`, `connections_short`.
    pub code: String,
    /// What happened and what it means, in words.
    pub message: String,
}

/// The result of one run (or of several merged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Always `redline.run`.
    pub format: String,
    /// Format version ([`FORMAT_VERSION`]).
    pub version: u32,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// Seconds from the first request to the end of the run.
    pub duration_s: f64,
    /// The run was stopped early (Ctrl-C).
    pub interrupted: bool,
    /// True when something says the client, not the server, was the limit.
    pub client_limited: bool,
    /// How many single runs this record holds (1 unless merged).
    pub merged_runs: u32,
    /// What was asked for.
    pub config: RunConfig,
    /// Where it ran.
    pub environment: Environment,
    /// The target server.
    pub server: ServerInfo,
    /// Completed responses per second over `duration_s`.
    pub requests_per_sec: f64,
    /// Bytes read per second over `duration_s`.
    pub bytes_per_sec: f64,
    /// Requests sent per second over the sending window (open loop: compare with the target rate).
    pub sent_per_sec: f64,
    /// Counters.
    pub counters: Counters,
    /// Responses by status code.
    pub status_codes: BTreeMap<String, u64>,
    /// Errors by kind and message, most frequent first.
    pub errors: Vec<ErrorCount>,
    /// Latency from the intended send time to the last byte: what a user waits.
    pub latency: Hist,
    /// Service time: actual send to the last byte.
    pub service_time: Hist,
    /// Scheduler lag: intended to actual send (open loop; zero in closed loop).
    pub scheduler_lag: Hist,
    /// TCP connect time of each new connection.
    pub connect: Hist,
    /// TLS handshake time of each new https connection.
    #[serde(default)]
    pub tls: Hist,
    /// Waiting: request sent to the first response byte (time to first byte).
    pub waiting: Hist,
    /// Transfer: first to last response byte.
    pub transfer: Hist,
    /// Per-second series.
    pub series: Vec<SeriesPoint>,
    /// The client's CPU use.
    pub client: ClientUsage,
    /// Warnings, e.g. when the client was the limit.
    pub warnings: Vec<Warning>,
    /// A label given with `--label` (e.g. `before-keepalive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// A free note given with `--note`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The server's processes and machine as watched during the run (`--watch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_watch: Option<crate::watch::ServerWatch>,
    /// The server's own status page as read during the run (`--server-status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_status: Option<crate::watch::StatusWatch>,
    /// Why a staged run stopped scaling ([`crate::watch::diagnose`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<crate::watch::Diagnosis>,
    /// Scenario runs: the numbers of each named request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<crate::requests::RequestStats>,
    /// `redline replay`: the access log read and how it was replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<crate::replay::ReplaySummary>,
    /// Open-loop sessions: how the journeys ended (`--scenario` in session
    /// mode with `--rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journeys: Option<crate::requests::Journeys>,
    /// Per stage (or step) of a `--stages` run, from the per-second series.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<crate::stages::StageSummary>,
    /// Where throughput stopped growing with the load (a `--stages` run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<crate::stages::Knee>,
    /// `--start-at`: when the run was told to start and how late it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_start: Option<ScheduledStart>,
    /// The server's tuning directives in effect for this run (`--server-config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_config: Option<ServerConfig>,
    /// What the server's error log said during the run (`--watch`, `--server-config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_log: Option<ServerLog>,
}

/// The effective values of the directives `tune` knows, read from the
/// server's configuration when the run started (`run --server-config`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// `apache`, `nginx` or `lighttpd`.
    pub server: String,
    /// The main configuration file read.
    pub file: String,
    /// Directive (as the server's documentation spells it) to its value.
    pub directives: BTreeMap<String, ConfigValue>,
}

impl ServerConfig {
    /// The directives whose values differ from `b`'s: (name, this value, b's
    /// value), `-` for a side without it. Empty for two different servers.
    pub fn changes(&self, b: &ServerConfig) -> Vec<(String, String, String)> {
        if self.server != b.server {
            return Vec::new();
        }
        let names: std::collections::BTreeSet<&String> =
            self.directives.keys().chain(b.directives.keys()).collect();
        let val = |c: &ServerConfig, n: &str| {
            c.directives
                .get(n)
                .map(|v| v.value.clone())
                .unwrap_or_else(|| "-".into())
        };
        names
            .into_iter()
            .map(|n| (n.clone(), val(self, n), val(b, n)))
            .filter(|(_, x, y)| x != y)
            .collect()
    }
}

/// One directive's effective value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigValue {
    /// The value as written (secrets and paths outside the config redacted).
    pub value: String,
    /// Where it is set (`FILE:LINE`, relative to the config's directory), or
    /// `default` when the server's documented default applies.
    pub at: String,
}

impl RunRecord {
    /// Complete answers whose status the run's rule refuses
    /// (`--expect-status`, default: anything outside 2xx and 3xx). Every
    /// judgment counts these as failed requests; `counters.non_2xx` stays
    /// ab's own count.
    pub fn refused_status(&self) -> u64 {
        self.config.status_rule().refused_in(&self.status_codes)
    }

    /// Complete answers the run's status rule accepts ("Succeeded").
    pub fn succeeded(&self) -> u64 {
        self.counters
            .completed
            .saturating_sub(self.refused_status())
    }

    /// An empty record for a configuration.
    pub fn new(config: RunConfig, environment: Environment, started_at: String) -> RunRecord {
        RunRecord {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            started_at,
            duration_s: 0.0,
            interrupted: false,
            client_limited: false,
            merged_runs: 1,
            config,
            environment,
            server: ServerInfo::default(),
            requests_per_sec: 0.0,
            bytes_per_sec: 0.0,
            sent_per_sec: 0.0,
            counters: Counters::default(),
            status_codes: BTreeMap::new(),
            errors: Vec::new(),
            latency: Hist::new(),
            service_time: Hist::new(),
            scheduler_lag: Hist::new(),
            connect: Hist::new(),
            tls: Hist::new(),
            waiting: Hist::new(),
            transfer: Hist::new(),
            series: Vec::new(),
            client: ClientUsage::default(),
            warnings: Vec::new(),
            label: None,
            note: None,
            server_watch: None,
            server_status: None,
            server_config: None,
            server_log: None,
            diagnosis: None,
            requests: Vec::new(),
            replay: None,
            journeys: None,
            stages: Vec::new(),
            knee: None,
            scheduled_start: None,
        }
    }

    /// Recomputes the derived rates from counters and duration.
    pub fn derive(&mut self) {
        if self.duration_s > 0.0 {
            self.requests_per_sec = self.counters.completed as f64 / self.duration_s;
            self.bytes_per_sec = self.counters.bytes_read as f64 / self.duration_s;
        } else {
            self.requests_per_sec = 0.0;
            self.bytes_per_sec = 0.0;
        }
        let window = self.send_window_s();
        self.sent_per_sec = if window > 0.0 {
            self.counters.sent as f64 / window
        } else {
            0.0
        };
    }

    /// Seconds during which requests were being sent: the planned duration (or
    /// the planned count at the target rate), at most the run's duration.
    pub fn send_window_s(&self) -> f64 {
        let planned = match &self.config.load {
            LoadModel::Open {
                duration_s: Some(d),
                ..
            }
            | LoadModel::Closed {
                duration_s: Some(d),
                ..
            } => *d,
            LoadModel::Open {
                requests: Some(n),
                rate,
                ..
            } => *n as f64 / rate,
            _ => self.duration_s,
        };
        planned.min(self.duration_s)
    }

    /// Adds a warning once (by code).
    pub fn warn(&mut self, code: &str, message: String) {
        if !self.warnings.iter().any(|w| w.code == code) {
            self.warnings.push(Warning {
                code: code.into(),
                message,
            });
        }
    }

    /// Parses a run record from JSON, refusing other formats and newer versions.
    pub fn from_json(s: &str) -> Result<RunRecord, RecordError> {
        // Bounded before anything is materialized (`files::json_shape`).
        crate::files::json_shape(s.as_bytes()).map_err(RecordError::Shape)?;
        let v: serde_json::Value = serde_json::from_str(s).map_err(RecordError::Json)?;
        match v.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            _ => return Err(RecordError::NotARunRecord),
        }
        let ver = v.get("version").and_then(|x| x.as_u64()).unwrap_or(0);
        if ver > FORMAT_VERSION as u64 {
            return Err(RecordError::NewerVersion(ver));
        }
        let mut rec: RunRecord = serde_json::from_value(v).map_err(RecordError::Json)?;
        // Records from before `stages[].server` existed get it derived here.
        if rec.server_watch.is_some() && rec.stages.iter().any(|s| s.server.is_empty()) {
            crate::stages::analyze_server(&mut rec);
        }
        Ok(rec)
    }

    /// The sum of the series' histograms (a check: equals `latency` at 2 digits).
    pub fn series_latency(&self) -> Hist {
        let mut h = Hist::with_sigfig(SERIES_SIGFIG);
        for p in &self.series {
            h.merge(&p.hist.to_hist());
        }
        h
    }
}
