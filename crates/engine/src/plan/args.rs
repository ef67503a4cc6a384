//! The run's arguments as given ([`PlanArgs`]: syntax checked by the CLI,
//! meaning not yet), the first of the plan's two stages (ripgrep's low
//! args); [`super::Plan::build`] turns them into a validated plan.

use super::mode::Alpn;
use redline_stats::segment::Segment;
use std::time::Duration;

/// How open-loop send times are spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Evenly spaced.
    Constant,
    /// Exponential gaps (a Poisson process), as real independent users arrive.
    Poisson,
    /// Gaps uniform between 0 and twice the mean.
    Uniform,
}

impl Arrival {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Constant => "constant",
            Arrival::Poisson => "poisson",
            Arrival::Uniform => "uniform",
        }
    }
}

impl std::str::FromStr for Arrival {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "constant" => Ok(Arrival::Constant),
            "poisson" => Ok(Arrival::Poisson),
            "uniform" => Ok(Arrival::Uniform),
            _ => Err(format!(
                "unknown arrival '{s}' (expected constant, poisson or uniform)"
            )),
        }
    }
}

/// Options as given by the user (syntax checked, meaning not yet).
#[derive(Debug, Clone)]
pub struct PlanArgs {
    /// Target URL.
    pub url: String,
    /// Method (default GET, or POST with a body).
    pub method: Option<String>,
    /// Extra headers, `Name: value`.
    pub headers: Vec<String>,
    /// Request body.
    pub body: Option<Vec<u8>>,
    /// Content-Type of the body.
    pub content_type: Option<String>,
    /// Basic auth `user:pass`.
    pub basic_auth: Option<String>,
    /// Connections (closed loop) or connection cap (open loop).
    pub connections: Option<u64>,
    /// Total requests.
    pub requests: Option<u64>,
    /// Run time.
    pub duration: Option<Duration>,
    /// Open-loop rate.
    pub rate: Option<f64>,
    /// Open-loop arrival process.
    pub arrival: Arrival,
    /// Worker threads (default: the cores).
    pub threads: Option<usize>,
    /// Reuse connections.
    pub keepalive: bool,
    /// Close a connection after this many requests.
    pub requests_per_conn: Option<u64>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Speak HTTP/1.0.
    pub http10: bool,
    /// Seed for Poisson/uniform arrivals (default: from the clock).
    pub seed: Option<u64>,
    /// TLS options for https URLs.
    pub tls: crate::tls::TlsArgs,
    /// A scenario file (`--scenario`), and whether its paths may leave its folder.
    pub scenario: Option<(std::path::PathBuf, bool)>,
    /// `--urls FILE`: a target list run as a generated scenario
    /// ([`crate::urls`]), its order, and whether body files may leave its folder.
    pub urls: Option<(std::path::PathBuf, crate::urls::Order, bool)>,
    /// `--stages`: the load level changes over the run.
    pub stages: Option<StageArgs>,
    /// HTTP/2 over TLS, negotiated by ALPN (`--http2`).
    pub http2: bool,
    /// HTTP/2 over cleartext with prior knowledge (`--h2c`).
    pub h2c: bool,
    /// HTTP/3 over QUIC (`--http3`, https URLs only).
    pub http3: bool,
    /// HTTP/2 and HTTP/3: concurrent streams per connection (`--streams`, default 1).
    pub streams: Option<u32>,
    /// `--http1.1`: never negotiate HTTP/2 for an https URL.
    pub http11: bool,
    /// `-L/--follow-redirects`.
    pub follow_redirects: bool,
    /// `--max-redirs` (default [`crate::redirect::DEFAULT_MAX_REDIRS`] with `-L`).
    pub max_redirs: Option<u32>,
    /// `--segment`: run only this share of the load (see [`super::SegmentPlan`]).
    pub segment: Option<Segment>,
    /// The server's ALPN answer when already known (`find`'s later steps
    /// reuse the first step's): an https run without a version flag then
    /// takes it instead of asking again.
    pub alpn: Option<Alpn>,
    /// `redline replay`: the access log replayed against [`Self::url`], and how.
    pub replay: Option<LogReplay>,
    /// An https run without a version flag and without a known [`Self::alpn`]
    /// asks the server while the plan is built (one TLS handshake offering
    /// `h2, http/1.1`, `crate::alpn::probe`). The commands that run a plan
    /// set it; left off (the default), such a plan stays HTTP/1.1 with
    /// [`Alpn::Unasked`] and nothing is sent (tests, fuzzing, agents' shares).
    pub ask_alpn: bool,
    /// `--expect-status`: the statuses that count as success (`None`: 2xx
    /// and 3xx, [`redline_stats::ExpectStatus::default`]).
    pub expect_status: Option<redline_stats::ExpectStatus>,
}

/// `redline replay`'s log and how it is replayed, as given.
/// [`super::Plan::build`] makes all of the run from it: the replay scenario
/// (one named request per URL and logged status, ticks in the log's order,
/// [`crate::scenario::Scenario::replay`]), the load (open loop, the log's
/// kept requests) and its schedule (the log's seconds at `speed`, or an even
/// `rate`), recorded as it ran.
#[derive(Debug, Clone)]
pub struct LogReplay {
    /// The log, read.
    pub log: std::sync::Arc<crate::replay::Log>,
    /// `--host-map` targets (URLs), in order: a logged host mapped to `i`
    /// goes to `hosts[i - 1]`.
    pub hosts: Vec<String>,
    /// `--speed`: the log's times divided by this (1 when not given).
    pub speed: f64,
    /// `-r/--rate`: the requests in order at this even rate instead of at
    /// their times.
    pub rate: Option<f64>,
}

/// `--stages` and its companions, as given.
#[derive(Debug, Clone, Default)]
pub struct StageArgs {
    /// The stages in order.
    pub stages: Vec<crate::pacer::Stage>,
    /// `--rate-stages`: the levels are requests/s (open loop), not connections.
    pub rate: bool,
    /// `--step`: stair steps instead of ramps.
    pub step: bool,
}

impl PlanArgs {
    /// Defaults for a URL: closed loop, 50 connections, 200 requests… as `redline URL`.
    pub fn new(url: impl Into<String>) -> PlanArgs {
        PlanArgs {
            url: url.into(),
            method: None,
            headers: Vec::new(),
            body: None,
            content_type: None,
            basic_auth: None,
            connections: None,
            requests: None,
            duration: None,
            rate: None,
            arrival: Arrival::Constant,
            threads: None,
            keepalive: true,
            requests_per_conn: None,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            http10: false,
            seed: None,
            tls: crate::tls::TlsArgs::default(),
            scenario: None,
            urls: None,
            stages: None,
            http2: false,
            http3: false,
            h2c: false,
            streams: None,
            http11: false,
            follow_redirects: false,
            max_redirs: None,
            segment: None,
            alpn: None,
            replay: None,
            ask_alpn: false,
            expect_status: None,
        }
    }
}
