//! The flag groups `run`, `find` and `agent` share, each flag defined once
//! with its help and flattened where it is used (`--help` shows each group
//! under its own heading):
//!
//! - [`RequestArgs`]: what to send (method, headers, body, auth, redirects);
//! - [`ProtocolArgs`]: HTTP version and TLS (`--http2`, `--h2c`, `--cacert`, …);
//! - [`ConnectionArgs`]: connections, threads, keep-alive and timeouts;
//! - [`LoadArgs`]: how much and when (`-n -d -r --arrival --stages …`; `run` only:
//!   `find` chooses the rate and duration of each step itself);
//! - [`ThresholdArgs`]: `--threshold` and `--abort-on-fail`;
//! - [`OutArgs`]: the report format, the live view and the progress line.
//!
//! [`plan_args`] turns the first three into the engine's `PlanArgs` (syntax
//! only; `Plan::build` checks the meaning), so every command builds its plan
//! the same way.

use clap::{Args, ValueEnum};
use redline_engine::{parse_duration, Arrival, PlanArgs};
use std::path::PathBuf;
use std::time::Duration;

fn dur(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

fn arrival(s: &str) -> Result<Arrival, String> {
    s.parse()
}

fn expect_status(s: &str) -> Result<redline_stats::ExpectStatus, String> {
    s.parse()
        .map_err(|e: redline_stats::ExpectStatusError| e.to_string())
}

fn threshold(s: &str) -> Result<redline_report::thresholds::Threshold, String> {
    s.parse()
}

/// What each request carries.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Request")]
pub struct RequestArgs {
    /// HTTP method (default GET, or POST when a body is given).
    #[arg(short = 'm', long = "method", value_name = "METHOD")]
    pub method: Option<String>,
    /// Extra request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Request body.
    #[arg(
        short = 'b',
        long = "body",
        value_name = "STRING",
        conflicts_with = "body_file"
    )]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long = "body-file", value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    /// Content-Type of the body.
    #[arg(short = 'T', long = "content-type", value_name = "TYPE")]
    pub content_type: Option<String>,
    /// Basic authentication, user:password (never printed).
    #[arg(short = 'a', long = "basic-auth", value_name = "USER:PASS")]
    pub basic_auth: Option<String>,
    /// Follow redirects (301, 302, 303, 307, 308) like curl -L: a request's
    /// latency and status are its final response's; credentials never go to another origin.
    #[arg(short = 'L', long = "follow-redirects")]
    pub follow_redirects: bool,
    /// With -L: the most redirects per request (default 10); one more is the error too_many_redirects.
    #[arg(long = "max-redirs", value_name = "N", requires = "follow_redirects")]
    pub max_redirs: Option<u32>,
    /// The statuses that count as success, e.g. '200-299,301' or '2xx' (default
    /// 2xx and 3xx); any other status counts as a failed request in thresholds,
    /// reports, JUnit, metrics and find's SLO.
    #[arg(long = "expect-status", value_name = "CODES", value_parser = expect_status)]
    pub expect_status: Option<redline_stats::ExpectStatus>,
}

impl RequestArgs {
    /// The body from `-b` or `--body-file` (Err: a usage error).
    pub fn body_bytes(&self) -> Result<Option<Vec<u8>>, String> {
        match (&self.body, &self.body_file) {
            (Some(b), _) => Ok(Some(b.clone().into_bytes())),
            (None, Some(p)) => {
                redline_stats::files::read(p, redline_stats::files::Kind::Body, "--body-file")
                    .map(Some)
            }
            (None, None) => Ok(None),
        }
    }
}

/// The HTTP version and TLS.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Protocol and TLS")]
pub struct ProtocolArgs {
    /// HTTP/2 over TLS, negotiated by ALPN; fails if the server does not offer h2
    /// (without it or --http1.1, an https run uses HTTP/2 when the server picks it).
    #[arg(long = "http2", conflicts_with = "h2c")]
    pub http2: bool,
    /// HTTP/2 over cleartext with prior knowledge (http:// URLs).
    #[arg(long = "h2c")]
    pub h2c: bool,
    /// HTTP/3 over QUIC (https URLs; ALPN h3, the same --insecure/--cacert
    /// as HTTPS); fails if the server does not speak it.
    #[arg(long = "http3", conflicts_with_all = ["http2", "h2c", "http10"])]
    pub http3: bool,
    /// HTTP/2 and HTTP/3: concurrent streams per connection (default 1, like h2load -m).
    #[arg(long = "streams", value_name = "N")]
    pub streams: Option<u32>,
    /// https: speak HTTP/1.1 even when the server offers HTTP/2 (curl's flag).
    #[arg(long = "http1.1", conflicts_with_all = ["http2", "h2c", "http10"])]
    pub http11: bool,
    /// Speak HTTP/1.0 (keep-alive via Connection: keep-alive, as ab does).
    #[arg(long = "http1.0")]
    pub http10: bool,
    /// https: do not verify the server's certificate (the report says so).
    #[arg(long)]
    pub insecure: bool,
    /// https: also trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// https: client certificate chain (PEM), with --key.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// https: client private key (PEM), with --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
}

/// Connections, threads, keep-alive and time-outs.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Connections")]
pub struct ConnectionArgs {
    /// Connections (closed loop; default 50) or the connection cap (open loop; default 1000).
    #[arg(short = 'c', long = "connections", value_name = "N")]
    pub connections: Option<u64>,
    /// Worker threads (default: the number of cores).
    #[arg(short = 't', long = "threads", value_name = "N")]
    pub threads: Option<usize>,
    /// Open a new connection for every request (ab without -k).
    #[arg(long = "no-keepalive")]
    pub no_keepalive: bool,
    /// Accepted for ab users: keep-alive is already the default.
    #[arg(short = 'k', long = "keepalive", hide = true)]
    pub _keepalive: bool,
    /// Close and reopen a connection after N requests (httperf --num-calls).
    #[arg(long = "requests-per-conn", value_name = "N")]
    pub requests_per_conn: Option<u64>,
    /// Per-request timeout.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = dur)]
    pub timeout: Duration,
    /// Connect timeout.
    #[arg(long = "connect-timeout", value_name = "DURATION", default_value = "10s", value_parser = dur)]
    pub connect_timeout: Duration,
}

/// How much load and when (`run`; the `agent` reads them from the run's arguments).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Load")]
pub struct LoadArgs {
    /// Total requests to send.
    #[arg(short = 'n', long = "requests", value_name = "N")]
    pub requests: Option<u64>,
    /// How long to send, e.g. 30s, 2m (default 10s when -n is not given).
    #[arg(short = 'd', long = "duration", value_name = "DURATION", value_parser = dur)]
    pub duration: Option<Duration>,
    /// Open loop: requests per second, sent on schedule whatever the server does.
    #[arg(short = 'r', long = "rate", value_name = "REQ/S")]
    pub rate: Option<f64>,
    /// Open loop: spacing of send times.
    #[arg(long, value_name = "MODEL", default_value = "constant", value_parser = arrival)]
    pub arrival: Arrival,
    /// Seed for poisson/uniform arrivals, random choices and a scenario's generated
    /// values ({{uuid}}, {{random_int(a,b)}}…): the same seed repeats them.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Load stages, DURATION:LEVEL pairs, e.g. 30s:10,60s:10,30s:70: the level
    /// (connections; req/s with --rate-stages) ramps linearly from the previous
    /// stage's (0 at the start); the run lasts the stages' sum.
    #[arg(long, value_name = "STAGES")]
    pub stages: Option<String>,
    /// With --stages: the levels are requests/s, sent in open loop.
    #[arg(long = "rate-stages", requires = "stages")]
    pub rate_stages: bool,
    /// With --stages: stair steps (the level jumps at each stage's start and holds).
    #[arg(long, requires = "stages")]
    pub step: bool,
}

impl LoadArgs {
    /// Sets the load of `pa` (Err: a usage error, e.g. bad `--stages`).
    pub fn apply(&self, pa: &mut PlanArgs) -> Result<(), String> {
        pa.requests = self.requests;
        pa.duration = self.duration;
        pa.rate = self.rate;
        pa.arrival = self.arrival;
        pa.seed = self.seed;
        pa.stages = match &self.stages {
            Some(s) => Some(redline_engine::plan::StageArgs {
                stages: redline_engine::pacer::parse_stages(s)?,
                rate: self.rate_stages,
                step: self.step,
            }),
            None => None,
        };
        Ok(())
    }
}

/// Pass/fail bounds.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Thresholds")]
pub struct ThresholdArgs {
    /// Pass/fail bound checked at the end, e.g. 'p99<250ms', 'errors<0.1%', 'rps>1000'
    /// (repeatable); any failure exits with code 4.
    #[arg(long = "threshold", value_name = "EXPR", value_parser = threshold)]
    pub thresholds: Vec<redline_report::thresholds::Threshold>,
    /// With --threshold: stop the run early, exit code 4, once a threshold can no longer pass.
    #[arg(long = "abort-on-fail", requires = "thresholds")]
    pub abort_on_fail: bool,
}

/// The report formats of a run.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Output {
    /// The human report.
    Text,
    /// The versioned run record.
    Json,
    /// The per-second series.
    Csv,
}

impl Output {
    /// The report sink for this format.
    pub fn format(self) -> redline_report::Format {
        match self {
            Output::Text => redline_report::Format::Text,
            Output::Json => redline_report::Format::Json,
            Output::Csv => redline_report::Format::Csv,
        }
    }
}

/// The report on stdout and the progress line.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Output")]
pub struct OutArgs {
    /// Report format: text, json (the versioned run record), or csv (the per-second series).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FORMAT",
        default_value = "text"
    )]
    pub output: Output,
    /// No live view and no progress line.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// No live view on a terminal: the one-line progress instead.
    #[arg(long = "no-tui")]
    pub no_tui: bool,
    /// Also write a JUnit XML report to FILE (one test case per --threshold; see "CI reports").
    #[arg(long = "junit", value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
}

/// The plan's arguments from the shared groups: everything but the load
/// (which `run` takes from [`LoadArgs`] and `find` sets per step). Err: a
/// usage error (an unreadable `--body-file`).
pub fn plan_args(
    url: String,
    request: &RequestArgs,
    protocol: &ProtocolArgs,
    conn: &ConnectionArgs,
) -> Result<PlanArgs, String> {
    let mut pa = PlanArgs::new(url);
    pa.method = request.method.clone();
    pa.headers = request.headers.clone();
    pa.body = request.body_bytes()?;
    pa.content_type = request.content_type.clone();
    pa.basic_auth = request.basic_auth.clone();
    pa.follow_redirects = request.follow_redirects;
    pa.max_redirs = request.max_redirs;
    pa.expect_status = request.expect_status.clone();
    pa.connections = conn.connections;
    pa.threads = conn.threads;
    pa.keepalive = !conn.no_keepalive;
    pa.requests_per_conn = conn.requests_per_conn;
    pa.timeout = conn.timeout;
    pa.connect_timeout = conn.connect_timeout;
    pa.http10 = protocol.http10;
    pa.http2 = protocol.http2;
    pa.h2c = protocol.h2c;
    pa.http3 = protocol.http3;
    pa.streams = protocol.streams;
    pa.http11 = protocol.http11;
    pa.tls = redline_engine::tls::TlsArgs {
        insecure: protocol.insecure,
        cacert: protocol.cacert.clone(),
        cert: protocol.cert.clone(),
        key: protocol.key.clone(),
    };
    Ok(pa)
}

/// `--otlp-histogram`: how OTLP pushes carry latency.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtlpHistogramArg {
    /// Base-2 exponential buckets (OTLP ExponentialHistogram).
    Exponential,
    /// The fixed buckets of the text format (receivers without exponential histograms).
    Explicit,
}

/// Metrics out while the run goes (docs/metrics.md).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Metrics out")]
pub struct MetricsArgs {
    /// Serve Prometheus/OpenMetrics text at http://ADDR/metrics while the run goes (e.g. 127.0.0.1:9464).
    #[arg(long = "metrics-listen", value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Push the same metrics with Prometheus remote write to URL (user:pass@ in the URL: Basic auth).
    #[arg(long = "prometheus-rw", value_name = "URL")]
    pub prometheus_rw: Option<String>,
    /// Push the same metrics as OTLP/HTTP protobuf to URL (e.g. http://collector:4318/v1/metrics).
    #[arg(long = "otlp", value_name = "URL")]
    pub otlp: Option<String>,
    /// How --otlp sends latency histograms.
    #[arg(
        long = "otlp-histogram",
        value_name = "KIND",
        default_value = "exponential"
    )]
    pub otlp_histogram: OtlpHistogramArg,
    /// How often --prometheus-rw and --otlp push (and once more at the end).
    #[arg(long = "metrics-interval", value_name = "DURATION", default_value = "5s", value_parser = dur)]
    pub metrics_interval: Duration,
    /// After the run, keep --metrics-listen up until one scrape got the final values, at most this long.
    #[arg(long = "metrics-linger", value_name = "DURATION", default_value = "0s", value_parser = dur)]
    pub metrics_linger: Duration,
}

impl MetricsArgs {
    /// The exporters' configuration.
    pub fn config(&self) -> redline_metrics::Config {
        redline_metrics::Config {
            listen: self.metrics_listen.clone(),
            prometheus_rw: self.prometheus_rw.clone(),
            otlp: self.otlp.clone(),
            otlp_histogram: match self.otlp_histogram {
                OtlpHistogramArg::Exponential => redline_metrics::OtlpHistogram::Exponential,
                OtlpHistogramArg::Explicit => redline_metrics::OtlpHistogram::Explicit,
            },
            interval: self.metrics_interval,
            linger: self.metrics_linger,
        }
    }
}
