//! The plan: everything a run needs, validated and resolved before any traffic.
//!
//! Raw options ([`PlanArgs`], syntax already checked by the CLI) become a [`Plan`]
//! here: the URL is parsed and resolved, request bytes are built once, the load
//! model is checked for sense. Nothing after this point can fail on user input.

use base64::Engine as _;
use redline_stats::segment::{Segment, Stripe};
use redline_stats::{LoadModel, RunConfig};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// The text that replaces a secret in every output.
pub const REDACTED: &str = "[redacted]";

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

/// The load model of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Load {
    /// `connections` connections, each sending its next request when the last is done.
    Closed {
        /// Connections.
        connections: u64,
        /// Stop after this many requests.
        requests: Option<u64>,
        /// Stop after this long.
        duration: Option<Duration>,
    },
    /// Requests at scheduled times; connections opened as needed up to a cap.
    Open {
        /// Requests per second.
        rate: f64,
        /// Spacing of send times.
        arrival: Arrival,
        /// Connection cap.
        max_connections: u64,
        /// Stop after this many requests.
        requests: Option<u64>,
        /// Stop after this long.
        duration: Option<Duration>,
    },
}

impl Load {
    /// The most connections the run can hold open at once: the connections
    /// (no more than the requests), or the open loop's cap.
    pub fn max_connections(&self) -> u64 {
        match self {
            Load::Closed {
                connections,
                requests,
                ..
            } => requests.map_or(*connections, |n| n.min(*connections)),
            Load::Open {
                max_connections, ..
            } => *max_connections,
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
    /// HTTP/2: concurrent streams per connection (`--streams`, default 1).
    pub streams: Option<u32>,
    /// `--http1.1`: never negotiate HTTP/2 for an https URL.
    pub http11: bool,
    /// `-L/--follow-redirects`.
    pub follow_redirects: bool,
    /// `--max-redirs` (default [`crate::redirect::DEFAULT_MAX_REDIRS`] with `-L`).
    pub max_redirs: Option<u32>,
    /// `--segment`: run only this share of the load (see [`SegmentPlan`]).
    pub segment: Option<Segment>,
}

/// A `--segment` run: one exact share of a larger run. The plan's [`Load`]
/// holds the share (connections, requests and the connection cap scaled with
/// [`Segment::scale_int`], the rate with [`Segment::scale_rate`]); the pacer
/// sends this segment's ticks of the whole run's schedule.
#[derive(Debug, Clone)]
pub struct SegmentPlan {
    /// The segment.
    pub segment: Segment,
    /// The whole run's open-loop rate (the schedule the ticks come from).
    pub whole_rate: Option<f64>,
    /// The whole run's request count (`-n`).
    pub whole_requests: Option<u64>,
    /// Why this segment has nothing to do (its share is zero), if so.
    pub empty: Option<String>,
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

/// A validated staged load: the level over time.
#[derive(Debug, Clone)]
pub struct Staged {
    /// Connections (closed loop) or requests/s (open loop) over time.
    pub profile: crate::pacer::Profile,
    /// The levels are requests/s.
    pub rate: bool,
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
            h2c: false,
            streams: None,
            http11: false,
            follow_redirects: false,
            max_redirs: None,
            segment: None,
        }
    }
}

/// Default connections in closed loop (as hey and oha).
pub const DEFAULT_CONNECTIONS: u64 = 50;
/// Default connection cap in open loop.
pub const DEFAULT_OPEN_CONNECTIONS: u64 = 1000;
/// Default run time when neither `-n` nor `-d` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// Why options could not become a plan. Each is a usage error (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The URL could not be parsed.
    #[error("invalid URL '{url}': {why}")]
    BadUrl {
        /// The URL as given (password redacted).
        url: String,
        /// What is wrong.
        why: String,
    },
    /// The host name did not resolve.
    #[error("cannot resolve host '{host}': {why}")]
    Resolve {
        /// Host.
        host: String,
        /// Resolver's message.
        why: String,
    },
    /// A header flag is not `Name: value`.
    #[error("invalid header '{0}': expected 'Name: value'")]
    BadHeader(String),
    /// Options that make no sense together or out of range.
    #[error("{0}")]
    Invalid(String),
}

/// The resolved target.
#[derive(Debug, Clone)]
pub struct Target {
    /// URL for display (password redacted).
    pub display: String,
    /// Host as written.
    pub host: String,
    /// Port.
    pub port: u16,
    /// The address connections go to.
    pub addr: SocketAddr,
    /// Path and query.
    pub path: String,
    /// `scheme://host:port` ([`crate::redirect::origin_key`]).
    pub origin: String,
}

/// A validated run plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The target.
    pub target: Target,
    /// Method.
    pub method: String,
    /// Request bytes for a request after which the connection stays open.
    pub request: Vec<u8>,
    /// Request bytes for the last request on a connection (asks the server to close).
    pub request_close: Vec<u8>,
    /// HEAD: responses carry no body.
    pub head_request: bool,
    /// Reuse connections.
    pub keepalive: bool,
    /// Requests per connection before it is closed (1 without keep-alive).
    pub requests_per_conn: Option<u64>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Time in-flight requests get to finish once sending stops.
    pub grace: Duration,
    /// Worker threads.
    pub threads: usize,
    /// The load model.
    pub load: Load,
    /// Seed for randomized arrivals.
    pub seed: u64,
    /// The configuration as recorded (secrets redacted).
    pub config: RunConfig,
    /// TLS, for https URLs.
    pub tls: Option<crate::tls::TlsSetup>,
    /// A scenario run: its compiled requests.
    pub scenario: Option<std::sync::Arc<crate::scenario::Scenario>>,
    /// `--stages`: how the level moves over the run.
    pub staged: Option<Staged>,
    /// The run speaks HTTP/2 (`--http2` over TLS, or `--h2c`): `h2run` runs it.
    pub http2: bool,
    /// HTTP/2 over cleartext with prior knowledge.
    pub h2c: bool,
    /// HTTP/2: concurrent streams per connection.
    pub streams: u32,
    /// `-L/--follow-redirects`: the limit and the origins resolved so far.
    pub follow: Option<std::sync::Arc<crate::redirect::Follow>>,
    /// `--http1.1` was given: HTTP/2 is not negotiated.
    pub http11: bool,
    /// `--segment`: this run is one share of a larger one.
    pub segment: Option<SegmentPlan>,
}

fn is_secret_header(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase();
    matches!(
        n.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie" | "x-api-key"
    )
}

/// Redacts the value of a `Name: value` header if it carries a secret.
pub fn redact_header(h: &str) -> String {
    match h.split_once(':') {
        Some((name, _)) if is_secret_header(name) => format!("{}: {REDACTED}", name.trim()),
        _ => h.to_string(),
    }
}

/// What an error may show of a header flag that is not `Name: value`: only the
/// name-like start, since a mistyped `-H 'Authorization Bearer …'` carries a secret.
pub fn redact_bad_header(h: &str) -> String {
    let end = h
        .find(|c: char| c == ':' || c.is_whitespace())
        .unwrap_or(h.len())
        .min(40);
    let end = (0..=end)
        .rev()
        .find(|i| h.is_char_boundary(*i))
        .unwrap_or(0);
    if end < h.len() {
        format!("{} …", &h[..end])
    } else {
        h.to_string()
    }
}

/// Redacts the password (and user) of a URL for display.
pub fn redact_url(u: &url::Url) -> String {
    let mut u = u.clone();
    if u.password().is_some() {
        let _ = u.set_password(Some(REDACTED));
    }
    u.to_string().replace("%5Bredacted%5D", REDACTED)
}

/// Redacts any `user:pass@` in a string that failed to parse as a URL.
pub fn redact_raw_url(s: &str) -> String {
    match (s.find("://"), s.rfind('@')) {
        (Some(p), Some(at)) if at > p => {
            let userinfo = &s[p + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{}:{REDACTED}{}", &s[..p + 3], user, &s[at..]),
                None => s.to_string(),
            }
        }
        _ => s.to_string(),
    }
}

/// A request body in chunked framing: one chunk (none when empty), then the last.
pub fn chunk(body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(body.len() + 16);
    if !body.is_empty() {
        v.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        v.extend_from_slice(body);
        v.extend_from_slice(b"\r\n");
    }
    v.extend_from_slice(b"0\r\n\r\n");
    v
}

/// The body [`chunk`] framed (`None` when `b` is not such a framing).
pub fn unchunk(b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = b;
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n")?;
        let n = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).ok()?.trim(), 16).ok()?;
        rest = &rest[eol + 2..];
        if n == 0 {
            return (rest == b"\r\n").then_some(out);
        }
        if rest.len() < n + 2 || &rest[n..n + 2] != b"\r\n" {
            return None;
        }
        out.extend_from_slice(&rest[..n]);
        rest = &rest[n + 2..];
    }
}

fn usage(msg: impl Into<String>) -> PlanError {
    PlanError::Invalid(msg.into())
}

impl Plan {
    /// Validates and resolves options into a plan.
    pub fn build(mut a: PlanArgs) -> Result<Plan, PlanError> {
        let scenario_file = match (&a.scenario, &a.urls) {
            (Some(_), Some(_)) => {
                return Err(usage("--urls and --scenario do not go together"));
            }
            (None, Some((path, order, _))) => {
                let text = redline_stats::files::read_text(
                    path,
                    redline_stats::files::Kind::Scenario,
                    "--urls",
                )
                .map_err(PlanError::Invalid)?;
                let targets = crate::urls::parse(&text)
                    .map_err(|e| usage(format!("{}: {e}", path.display())))?;
                if a.url.trim().is_empty() {
                    a.url = crate::urls::first_absolute(&targets).ok_or_else(|| {
                        usage(format!(
                            "{}: every target is a path: give the base URL on the command line",
                            path.display()
                        ))
                    })?;
                }
                Some((crate::urls::to_scenario(&targets, *order), String::new()))
            }
            (Some((path, _)), None) => {
                let (f, text) = crate::scenario::load(path)?;
                if a.url.trim().is_empty() {
                    a.url = match (&f.base, f.hosts.values().next()) {
                        (Some(b), _) => b.clone(),
                        (None, Some(h)) => h.clone(),
                        (None, None) => {
                            return Err(usage(format!(
                                "{}: no base URL: give `base = \"http://…\"` in the file or a URL on the command line",
                                path.display()
                            )))
                        }
                    };
                }
                if let Some(l) = &f.load {
                    // Values the command line would refuse are refused here,
                    // at their own line of the file.
                    let bad = if l.connections == Some(0) {
                        Some(("connections", "must be at least 1".to_string()))
                    } else if l.requests == Some(0) {
                        Some(("requests", "must be at least 1".to_string()))
                    } else if l.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
                        Some((
                            "rate",
                            "must be a positive number of requests per second".to_string(),
                        ))
                    } else {
                        None
                    };
                    if let Some((k, why)) = bad {
                        let lines = crate::scenario::file::Lines::new(&text);
                        let at = lines.at(
                            &path.display().to_string(),
                            &[
                                crate::scenario::file::key("load"),
                                crate::scenario::file::key(k),
                            ],
                        );
                        return Err(usage(format!("{at}: [load] {k} {why}")));
                    }
                    if a.rate.is_none() && a.connections.is_none() {
                        a.rate = l.rate;
                    }
                    if a.connections.is_none() {
                        a.connections = l.connections;
                    }
                    if a.requests.is_none() && a.duration.is_none() {
                        a.requests = l.requests;
                        if let Some(d) = &l.duration {
                            a.duration = Some(parse_duration(d).map_err(|e| {
                                let lines = crate::scenario::file::Lines::new(&text);
                                let at = lines.at(
                                    &path.display().to_string(),
                                    &[
                                        crate::scenario::file::key("load"),
                                        crate::scenario::file::key("duration"),
                                    ],
                                );
                                usage(format!("{at}: [load] duration: {e}"))
                            })?);
                        }
                    }
                }
                Some((f, text))
            }
            (None, None) => None,
        };
        let raw = a.url.trim();
        let with_scheme = if raw.contains("://") {
            raw.to_string()
        } else {
            format!("http://{raw}")
        };
        let url = url::Url::parse(&with_scheme).map_err(|e| PlanError::BadUrl {
            url: redact_raw_url(raw),
            why: e.to_string(),
        })?;
        let display = redact_url(&url);
        match url.scheme() {
            "http" | "https" => {}
            s => {
                return Err(PlanError::BadUrl {
                    url: display,
                    why: format!("unsupported scheme '{s}' (expected http or https)"),
                })
            }
        }
        let host = match url.host() {
            Some(url::Host::Domain(d)) => d.to_string(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => {
                return Err(PlanError::BadUrl {
                    url: display,
                    why: "no host".into(),
                })
            }
        };
        let port = url.port_or_known_default().unwrap_or(80);
        let tls = if url.scheme() == "https" {
            Some(crate::tls::setup(&host, &a.tls).map_err(PlanError::Invalid)?)
        } else {
            None
        };
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| PlanError::Resolve {
                host: host.clone(),
                why: e.to_string(),
            })?
            .next()
            .ok_or_else(|| PlanError::Resolve {
                host: host.clone(),
                why: "no addresses".into(),
            })?;
        let mut path = url.path().to_string();
        if let Some(q) = url.query() {
            path.push('?');
            path.push_str(q);
        }
        let host_header = match (url.host(), url.port()) {
            (Some(url::Host::Ipv6(ip)), Some(p)) => format!("[{ip}]:{p}"),
            (Some(url::Host::Ipv6(ip)), None) => format!("[{ip}]"),
            (_, Some(p)) => format!("{host}:{p}"),
            (_, None) => host.clone(),
        };

        // Headers.
        let mut extra: Vec<(String, String)> = Vec::new();
        for h in &a.headers {
            let (name, value) = h
                .split_once(':')
                .ok_or_else(|| PlanError::BadHeader(redact_bad_header(h)))?;
            let name = name.trim();
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b))
                || value.contains('\r')
                || value.contains('\n')
            {
                return Err(PlanError::BadHeader(redact_header(&redact_bad_header(h))));
            }
            extra.push((name.to_string(), value.trim().to_string()));
        }
        let has = |n: &str| extra.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        let mut auth: Option<String> = None;
        if let Some(ba) = &a.basic_auth {
            if !ba.contains(':') {
                return Err(usage("-a/--basic-auth expects user:password"));
            }
            auth = Some(base64::engine::general_purpose::STANDARD.encode(ba));
        } else if !url.username().is_empty() {
            let user = percent_decode(url.username());
            let pass = percent_decode(url.password().unwrap_or(""));
            auth = Some(base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}")));
        }

        let body = a.body.clone().unwrap_or_default();
        let method = a
            .method
            .clone()
            .unwrap_or_else(|| if a.body.is_some() { "POST" } else { "GET" }.into())
            .to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
            // Escaped and cut: the error stays one short line whatever was typed.
            let shown: String = method.escape_debug().take(60).collect();
            return Err(usage(format!("invalid method '{shown}'")));
        }

        // Load model.
        if a.timeout.is_zero() {
            return Err(usage("--timeout must be greater than zero"));
        }
        if a.connect_timeout.is_zero() {
            return Err(usage("--connect-timeout must be greater than zero"));
        }
        if a.requests == Some(0) {
            return Err(usage("-n/--requests must be at least 1"));
        }
        if a.connections == Some(0) {
            return Err(usage("-c/--connections must be at least 1"));
        }
        if a.requests_per_conn == Some(0) {
            return Err(usage("--requests-per-conn must be at least 1"));
        }
        let streams = check_http2(&a, url.scheme())?;
        if a.max_redirs.is_some() && !a.follow_redirects {
            return Err(usage("--max-redirs needs -L/--follow-redirects"));
        }
        if a.http11 && (a.http2 || a.h2c || a.http10) {
            return Err(usage(
                "--http1.1 cannot be combined with --http2, --h2c or --http1.0",
            ));
        }
        if a.max_redirs.is_some_and(|n| n > 1000) {
            return Err(usage("--max-redirs above 1000 is not supported"));
        }
        if a.http2 || a.h2c {
            if let Some(m) = Protocol::Http2.first_unsupported(&a.modes()) {
                return Err(usage(format!(
                    "{} does not run over HTTP/2 yet: drop --http2/--h2c (HTTP/1.1 runs it)",
                    m.flag()
                )));
            }
        }
        if let Some(d) = a.duration {
            if d.is_zero() {
                return Err(usage("-d/--duration must be greater than zero"));
            }
        }
        let duration = match (a.requests, a.duration) {
            (None, None) => Some(DEFAULT_DURATION),
            (_, d) => d,
        };
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        if a.threads == Some(0) {
            return Err(usage("-t/--threads must be at least 1"));
        }
        let staged = match &a.stages {
            Some(sa) => Some(staged_load(&a, sa, (a.http2 || a.h2c).then_some(streams))?),
            None => None,
        };
        let load = match (&staged, a.rate) {
            (Some((staged_load, _, _)), _) => staged_load.clone(),
            (None, None) => {
                let c = a.connections.unwrap_or(DEFAULT_CONNECTIONS);
                Load::Closed {
                    connections: c,
                    requests: a.requests,
                    duration,
                }
            }
            (None, Some(r)) => {
                if !(r.is_finite() && r > 0.0) {
                    return Err(usage(
                        "-r/--rate must be a positive number of requests per second",
                    ));
                }
                if r > 10_000_000.0 {
                    return Err(usage("-r/--rate above 10,000,000 req/s is not supported"));
                }
                Load::Open {
                    rate: r,
                    arrival: a.arrival,
                    max_connections: a.connections.unwrap_or(DEFAULT_OPEN_CONNECTIONS),
                    requests: a.requests,
                    duration,
                }
            }
        };
        let mut staged = staged;
        let (load, segment) = match &a.segment {
            Some(seg) => {
                let (load, sp) = segment_load(load, seg);
                if let Some((_, _, stage_plan)) = staged.as_mut() {
                    for st in &mut stage_plan.stages {
                        st.level = if stage_plan.unit == "rps" {
                            seg.scale_rate(st.level)
                        } else {
                            seg.scale_int(st.level as u64) as f64
                        };
                    }
                }
                (load, Some(sp))
            }
            None => (load, None),
        };
        let conns = load.max_connections();
        if conns > 1_000_000 {
            return Err(usage("-c/--connections above 1,000,000 is not supported"));
        }
        let threads = a.threads.unwrap_or(cores).min(conns.max(1) as usize).max(1);

        // Request bytes, built once.
        let requests_per_conn = if a.keepalive {
            a.requests_per_conn
        } else {
            Some(1)
        };
        let version = if a.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
        // `-H 'Transfer-Encoding: chunked'`: as curl does, the body is sent
        // chunked and without Content-Length (never both framings); any other
        // transfer coding redline cannot apply, so it is refused.
        let chunked = match extra
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
        {
            None => false,
            Some((_, v)) if v.trim().eq_ignore_ascii_case("chunked") => true,
            Some((_, v)) => {
                return Err(usage(format!(
                    "-H 'Transfer-Encoding: {}': redline can only send a body chunked (give 'chunked' or no Transfer-Encoding)",
                    v.trim()
                )))
            }
        };
        if chunked && a.http10 {
            return Err(usage(
                "-H 'Transfer-Encoding: chunked' needs HTTP/1.1; HTTP/1.0 has no chunked requests",
            ));
        }
        let mut head = format!("{method} {path} {version}\r\n");
        if !has("host") {
            head.push_str(&format!("Host: {host_header}\r\n"));
        }
        if !has("user-agent") {
            head.push_str(&format!(
                "User-Agent: redline/{}\r\n",
                env!("CARGO_PKG_VERSION")
            ));
        }
        if !has("accept") {
            head.push_str("Accept: */*\r\n");
        }
        if let Some(b64) = &auth {
            if !has("authorization") {
                head.push_str(&format!("Authorization: Basic {b64}\r\n"));
            }
        }
        for (k, v) in &extra {
            if k.eq_ignore_ascii_case("connection") || k.eq_ignore_ascii_case("content-length") {
                continue; // redline frames the request and manages connections itself
            }
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(ct) = &a.content_type {
            if !has("content-type") {
                head.push_str(&format!("Content-Type: {ct}\r\n"));
            }
        } else if a.body.is_some() && !has("content-type") {
            head.push_str("Content-Type: application/octet-stream\r\n");
        }
        let wire_body = if chunked {
            chunk(&body)
        } else {
            if a.body.is_some() || method == "POST" || method == "PUT" || method == "PATCH" {
                head.push_str(&format!("Content-Length: {}\r\n", body.len()));
            }
            body.clone()
        };
        let mut request = head.clone().into_bytes();
        let mut request_close = head.into_bytes();
        if a.http10 {
            request.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        request_close.extend_from_slice(b"Connection: close\r\n");
        request.extend_from_slice(b"\r\n");
        request_close.extend_from_slice(b"\r\n");
        request.extend_from_slice(&wire_body);
        request_close.extend_from_slice(&wire_body);

        let mut shown_headers: Vec<String> = a.headers.iter().map(|h| redact_header(h)).collect();
        if auth.is_some() {
            shown_headers.push(format!("Authorization: {REDACTED}"));
        }
        let load_model = match &load {
            Load::Closed {
                connections,
                requests,
                duration,
            } => LoadModel::Closed {
                connections: *connections,
                requests: *requests,
                duration_s: duration.map(|d| d.as_secs_f64()),
            },
            Load::Open {
                rate,
                arrival,
                max_connections,
                requests,
                duration,
            } => LoadModel::Open {
                rate: *rate,
                arrival: arrival.name().into(),
                max_connections: *max_connections,
                requests: *requests,
                duration_s: duration.map(|d| d.as_secs_f64()),
            },
        };
        let config = RunConfig {
            url: display.clone(),
            method: method.clone(),
            headers: shown_headers,
            body_bytes: body.len() as u64,
            http_version: if a.http2 || a.h2c {
                "2"
            } else if a.http10 {
                "1.0"
            } else {
                "1.1"
            }
            .into(),
            streams: (a.http2 || a.h2c).then_some(u64::from(streams)),
            keepalive: a.keepalive,
            requests_per_conn,
            timeout_s: a.timeout.as_secs_f64(),
            connect_timeout_s: a.connect_timeout.as_secs_f64(),
            threads: threads as u64,
            load: load_model,
            insecure: tls.as_ref().is_some_and(|t| t.insecure),
            scenario: None,
            stages: staged.as_ref().map(|s| s.2.clone()),
            follow_redirects: a
                .follow_redirects
                .then(|| u64::from(a.max_redirs.unwrap_or(crate::redirect::DEFAULT_MAX_REDIRS))),
            negotiated: None,
            segment: a.segment.as_ref().map(|s| redline_stats::SegmentConfig {
                segment: s.to_string(),
                sequence: s.sequence().to_string(),
                index: s.index() as u64,
                count: s.sequence().len() as u64,
            }),
        };
        let seed = a.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
        let mut config = config;
        let source = match (&a.scenario, &a.urls) {
            (Some((path, allow)), _) => Some((path, *allow)),
            (None, Some((path, _, allow))) => Some((path, *allow)),
            (None, None) => None,
        };
        let scenario = match (source, &scenario_file) {
            (Some((path, allow)), Some((f, text))) => {
                let sc = crate::scenario::Scenario::compile(crate::scenario::CompileArgs {
                    path,
                    file: f,
                    text,
                    base: &a.url,
                    allow_paths: allow,
                    tls: &a.tls,
                    http10: a.http10,
                    cli_headers: &extra,
                    timeout: a.timeout,
                })?;
                config.scenario = Some(format!("{} ({})", sc.name, sc.file));
                let first = &sc.requests[0].method;
                config.method = if sc.requests.iter().all(|r| &r.method == first) {
                    first.clone()
                } else {
                    "mixed".into()
                };
                config.body_bytes = 0;
                let mut sc = sc;
                sc.segment = a.segment.clone();
                sc.seed = seed;
                Some(std::sync::Arc::new(sc))
            }
            _ => None,
        };
        let plan = Plan {
            scenario,
            target: Target {
                display,
                host,
                port,
                addr,
                path,
                origin: crate::redirect::origin_key(&url),
            },
            head_request: method == "HEAD",
            method,
            request,
            request_close,
            keepalive: a.keepalive,
            requests_per_conn,
            timeout: a.timeout,
            connect_timeout: a.connect_timeout,
            grace: Duration::from_secs(1).min(a.timeout),
            threads,
            load,
            seed,
            config,
            tls,
            staged: staged.map(|s| s.1),
            http2: a.http2 || a.h2c,
            h2c: a.h2c,
            streams,
            follow: a.follow_redirects.then(|| {
                std::sync::Arc::new(crate::redirect::Follow::new(
                    a.max_redirs.unwrap_or(crate::redirect::DEFAULT_MAX_REDIRS),
                    a.tls.clone(),
                ))
            }),
            http11: a.http11,
            segment,
        };
        if plan.http2 {
            // The request must also be expressible in HTTP/2 (e.g. no control
            // characters in header values): a usage error, before any traffic.
            crate::h2run::prepare(&plan).map_err(PlanError::Invalid)?;
        }
        Ok(plan)
    }
}

impl Plan {
    /// The global send ticks worker `worker` of `workers` owns: `worker + k·workers`,
    /// or in a `--segment` run its stripe of the segment's ticks.
    pub fn stripe(&self, worker: u64, workers: u64) -> Stripe {
        match &self.segment {
            Some(s) => s.segment.stripe(worker, workers),
            None => Stripe {
                period: workers.max(1),
                offsets: vec![worker],
            },
        }
    }

    /// Why this run has nothing to do (a `--segment` whose share is zero).
    pub fn empty_share(&self) -> Option<&str> {
        self.segment.as_ref().and_then(|s| s.empty.as_deref())
    }
}

/// A segment's share of the load: integers with [`Segment::scale_int`] (an
/// open-loop connection cap at least 1), the rate with [`Segment::scale_rate`].
fn segment_load(load: Load, seg: &Segment) -> (Load, SegmentPlan) {
    let mut sp = SegmentPlan {
        segment: seg.clone(),
        whole_rate: None,
        whole_requests: None,
        empty: None,
    };
    let scaled_requests = |n: Option<u64>, sp: &mut SegmentPlan| {
        n.map(|n| {
            let mine = seg.scale_int(n);
            if mine == 0 && sp.empty.is_none() {
                sp.empty = Some(format!("its share of {n} requests is 0"));
            }
            mine
        })
    };
    let load = match load {
        Load::Closed {
            connections,
            requests,
            duration,
        } => {
            let c = seg.scale_int(connections);
            if c == 0 {
                sp.empty = Some(format!("its share of {connections} connections is 0"));
            }
            sp.whole_requests = requests;
            Load::Closed {
                connections: c,
                requests: scaled_requests(requests, &mut sp),
                duration,
            }
        }
        Load::Open {
            rate,
            arrival,
            max_connections,
            requests,
            duration,
        } => {
            sp.whole_rate = Some(rate);
            sp.whole_requests = requests;
            Load::Open {
                rate: seg.scale_rate(rate),
                arrival,
                max_connections: seg.scale_int(max_connections).max(1),
                requests: scaled_requests(requests, &mut sp),
                duration,
            }
        }
    };
    (load, sp)
}

/// Most concurrent streams per HTTP/2 connection `--streams` accepts.
pub const MAX_STREAMS: u32 = 100_000;

/// The connections an HTTP/2 stage level of `level` concurrent streams needs
/// at `streams` per connection: ⌈level / streams⌉.
pub fn h2_connections(level: u64, streams: u32) -> u64 {
    level.div_ceil(u64::from(streams.max(1)))
}

/// The protocol a run speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 (and 1.0): the mio worker (`worker.rs`).
    Http1,
    /// HTTP/2, over TLS (ALPN) or cleartext (h2c): `h2run.rs`.
    Http2,
}

/// A load mode (or request behaviour) that a protocol may or may not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `--scenario`: virtual users, cookies, extraction, checks, CSV.
    Scenario,
    /// `--stages`: closed-loop ramps, the knee.
    Stages,
    /// `--rate-stages`: open-loop ramps.
    RateStages,
    /// `-L/--follow-redirects`.
    FollowRedirects,
}

impl Mode {
    /// The flag that asks for the mode.
    pub fn flag(self) -> &'static str {
        match self {
            Mode::Scenario => "--scenario",
            Mode::Stages => "--stages",
            Mode::RateStages => "--rate-stages",
            Mode::FollowRedirects => "-L/--follow-redirects",
        }
    }
}

impl Protocol {
    /// Whether this protocol's engine runs `mode`: the one feature matrix.
    /// The plan's refusals (`--http2`/`--h2c` with a mode HTTP/2 does not run)
    /// and the automatic ALPN upgrade of https runs ([`crate::alpn`]) both ask it.
    pub fn supports(self, mode: Mode) -> bool {
        match (self, mode) {
            (Protocol::Http1, _) => true,
            (Protocol::Http2, _) => true,
        }
    }

    /// The first of `modes` this protocol does not run.
    pub fn first_unsupported(self, modes: &[Mode]) -> Option<Mode> {
        modes.iter().copied().find(|m| !self.supports(*m))
    }
}

impl PlanArgs {
    /// The modes these options ask for.
    pub fn modes(&self) -> Vec<Mode> {
        let mut m = Vec::new();
        if self.scenario.is_some() {
            m.push(Mode::Scenario);
        }
        match &self.stages {
            Some(s) if s.rate => m.push(Mode::RateStages),
            Some(_) => m.push(Mode::Stages),
            None => {}
        }
        if self.follow_redirects {
            m.push(Mode::FollowRedirects);
        }
        m
    }
}

impl Plan {
    /// The protocol this plan speaks.
    pub fn protocol(&self) -> Protocol {
        if self.http2 {
            Protocol::Http2
        } else {
            Protocol::Http1
        }
    }

    /// The modes this plan runs.
    pub fn modes(&self) -> Vec<Mode> {
        let mut m = Vec::new();
        if self.scenario.is_some() {
            m.push(Mode::Scenario);
        }
        match &self.staged {
            Some(s) if s.rate => m.push(Mode::RateStages),
            Some(_) => m.push(Mode::Stages),
            None => {}
        }
        if self.follow.is_some() {
            m.push(Mode::FollowRedirects);
        }
        m
    }
}

/// Checks the HTTP/2 options against each other and the URL; the streams per connection.
fn check_http2(a: &PlanArgs, scheme: &str) -> Result<u32, PlanError> {
    if a.http2 && a.h2c {
        return Err(usage("--http2 and --h2c cannot be used together"));
    }
    if a.http2 && scheme != "https" {
        return Err(usage(
            "--http2 negotiates HTTP/2 over TLS and needs an https:// URL (for cleartext HTTP/2 use --h2c)",
        ));
    }
    if a.h2c && scheme != "http" {
        return Err(usage(
            "--h2c is HTTP/2 over cleartext and needs an http:// URL (for https use --http2)",
        ));
    }
    if (a.http2 || a.h2c) && a.http10 {
        return Err(usage("--http1.0 cannot be combined with --http2 or --h2c"));
    }
    match a.streams {
        Some(_) if !(a.http2 || a.h2c) => Err(usage(
            "--streams is for HTTP/2: add --http2 (https) or --h2c (http)",
        )),
        Some(0) => Err(usage("--streams must be at least 1")),
        Some(n) if n > MAX_STREAMS => Err(usage(format!(
            "--streams above {MAX_STREAMS} is not supported"
        ))),
        Some(n) => Ok(n),
        None => Ok(1),
    }
}

/// Checks `--stages` against the other load flags and makes its load model:
/// closed loop with the highest level as the connections, or open loop
/// (`--rate-stages`) with the mean rate; the run time is the stages' sum.
///
/// Over HTTP/2 (`h2_streams`: the streams per connection) a closed-loop level
/// counts concurrent streams, h2load's `-c × -m`: level N keeps N requests in
/// flight on ⌈N/streams⌉ connections (see [`h2_connections`]); with one stream
/// per connection that is N connections, as over HTTP/1.1, and the record's
/// unit stays `connections`; with more it is `streams`.
fn staged_load(
    a: &PlanArgs,
    sa: &StageArgs,
    h2_streams: Option<u32>,
) -> Result<(Load, Staged, redline_stats::stages::StagePlan), PlanError> {
    use crate::pacer::Profile;
    if sa.stages.is_empty() {
        return Err(usage("--stages needs at least one DURATION:LEVEL pair"));
    }
    if a.duration.is_some() || a.requests.is_some() {
        return Err(usage(
            "--stages sets the run time (the sum of the stages): drop -d/--duration and -n/--requests",
        ));
    }
    let profile = Profile::from_stages(&sa.stages, sa.step);
    let max = profile.max_level();
    if max <= 0.0 {
        return Err(usage("--stages: at least one stage needs a level above 0"));
    }
    let total = profile.end();
    let duration = Some(Duration::from_secs_f64(total));
    let load = if sa.rate {
        if a.rate.is_some() {
            return Err(usage(
                "-r/--rate contradicts --rate-stages (the stage levels are the rates)",
            ));
        }
        if max > 10_000_000.0 {
            return Err(usage(
                "--rate-stages above 10,000,000 req/s is not supported",
            ));
        }
        Load::Open {
            rate: profile.cumulative(total) / total,
            arrival: a.arrival,
            max_connections: a.connections.unwrap_or(DEFAULT_OPEN_CONNECTIONS),
            requests: None,
            duration,
        }
    } else {
        if a.rate.is_some() {
            return Err(usage(
                "-r/--rate contradicts --stages, whose levels are connections: for rates use --rate-stages",
            ));
        }
        if a.connections.is_some() {
            return Err(usage(
                "-c/--connections contradicts --stages (its levels are the connections)",
            ));
        }
        if sa.stages.iter().any(|s| s.level.fract() != 0.0) {
            return Err(usage(
                "--stages: connection levels must be whole numbers (for rates use --rate-stages)",
            ));
        }
        if max > 1_000_000.0 {
            return Err(usage(
                "--stages above 1,000,000 connections is not supported",
            ));
        }
        Load::Closed {
            connections: match h2_streams {
                Some(m) => h2_connections(max as u64, m),
                None => max as u64,
            },
            requests: None,
            duration,
        }
    };
    let unit = match (sa.rate, h2_streams) {
        (true, _) => "rps",
        (false, Some(m)) if m > 1 => "streams",
        (false, _) => "connections",
    };
    let plan = redline_stats::stages::StagePlan {
        unit: unit.into(),
        step: sa.step,
        stages: sa
            .stages
            .iter()
            .map(|s| redline_stats::stages::StageSpec {
                duration_s: s.duration.as_secs_f64(),
                level: s.level,
            })
            .collect(),
    };
    Ok((
        load,
        Staged {
            profile,
            rate: sa.rate,
        },
        plan,
    ))
}

pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hexval(b[i + 1]), hexval(b[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hexval(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Parses a duration: `30s`, `2m`, `1h`, `500ms`, `250us`, `1.5s`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let err = || format!("invalid duration '{s}' (examples: 30s, 2m, 500ms, 1.5s)");
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().map_err(|_| err())?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "ns" => v / 1e9,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(err()),
    };
    if !secs.is_finite() || !(0.0..=365.0 * 86_400.0).contains(&secs) {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn request_bytes_and_redaction() {
        let mut a = PlanArgs::new("http://user:s3cret@127.0.0.1:8080/x?y=1");
        a.headers = vec!["Cookie: id=42".into(), "X-Test: 1".into()];
        a.requests = Some(10);
        let p = Plan::build(a).unwrap();
        let req = String::from_utf8(p.request.clone()).unwrap();
        assert!(req.starts_with("GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
        assert!(req.contains("Authorization: Basic dXNlcjpzM2NyZXQ=\r\n"));
        assert!(req.contains("Cookie: id=42\r\n"));
        assert!(req.ends_with("\r\n\r\n"));
        let cfg = serde_json::to_string(&p.config).unwrap();
        assert!(!cfg.contains("s3cret"), "{cfg}");
        assert!(!cfg.contains("id=42"), "{cfg}");
        assert!(!cfg.contains("dXNlcjpzM2NyZXQ"), "{cfg}");
        assert!(p.target.display.contains(REDACTED));
        let close = String::from_utf8(p.request_close).unwrap();
        assert!(close.contains("Connection: close\r\n"));
    }

    #[test]
    fn bad_inputs() {
        for (url, ok) in [
            ("http://127.0.0.1:1/", true),
            ("127.0.0.1:1", true),
            ("http://[::1]:1/", true),
            ("ftp://x/", false),
            ("http://", false),
            ("http://127.0.0.1:99999/", false),
            ("https://127.0.0.1/", true),
        ] {
            assert_eq!(Plan::build(PlanArgs::new(url)).is_ok(), ok, "{url}");
        }
        let mut a = PlanArgs::new("http://127.0.0.1:1/");
        a.headers = vec!["NoColon".into()];
        assert!(matches!(Plan::build(a), Err(PlanError::BadHeader(_))));
        // Found by the request_flags fuzz target: a header without its colon was
        // echoed whole, secret and all.
        let mut a = PlanArgs::new("http://127.0.0.1:1/");
        a.headers = vec!["Authorization Bearer s3cr3t-token".into()];
        let e = Plan::build(a).unwrap_err().to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
        assert!(e.contains("Authorization"), "{e}");
        let mut a = PlanArgs::new("http://127.0.0.1:1/");
        a.headers = vec!["X-Bad\u{e9}\u{e9}: v\r\nInjected: 1 secret".into()];
        let e = Plan::build(a).unwrap_err().to_string();
        assert!(!e.contains("secret"), "{e}");
        let mut a = PlanArgs::new("http://127.0.0.1:1/");
        a.rate = Some(-1.0);
        assert!(Plan::build(a).is_err());
        let e = Plan::build(PlanArgs::new("http://u:pw@[bad/")).unwrap_err();
        assert!(!e.to_string().contains("pw"), "{e}");
    }

    #[test]
    fn a_bad_method_is_one_short_line() {
        // The request_flags fuzz target fed control characters and long garbage.
        let mut a = PlanArgs::new("http://127.0.0.1:1/");
        a.method = Some(format!("GET\nX\u{1}{}", "Y".repeat(500)));
        let e = Plan::build(a).unwrap_err().to_string();
        assert!(!e.contains('\n') && !e.contains('\u{1}'), "{e}");
        assert!(e.len() < 120, "{e}");
    }

    #[test]
    fn one_feature_matrix_decides_what_http2_runs() {
        use crate::pacer::parse_stages;
        assert!(Protocol::Http1.supports(Mode::Scenario));
        for m in [Mode::Stages, Mode::RateStages, Mode::FollowRedirects] {
            assert!(Protocol::Http2.supports(m), "{m:?}");
        }
        assert_eq!(Protocol::Http2.first_unsupported(&[Mode::Scenario]), None);
        assert!(Protocol::Http2.supports(Mode::Scenario));
        let stages = |rate: bool| StageArgs {
            stages: parse_stages("2s:5,2s:10").unwrap(),
            rate,
            step: false,
        };
        // --stages over h2c: the level counts streams, ⌈level/streams⌉ connections.
        let mut a = PlanArgs::new("http://127.0.0.1:1/");
        a.h2c = true;
        a.streams = Some(4);
        a.stages = Some(stages(false));
        let p = Plan::build(a).unwrap();
        assert_eq!(p.modes(), vec![Mode::Stages]);
        assert_eq!(p.protocol(), Protocol::Http2);
        assert_eq!(p.load.max_connections(), 3);
        assert_eq!(p.config.stages.as_ref().unwrap().unit, "streams");
        assert_eq!(p.threads, p.threads.min(3));
        // One stream per connection: a level is connections, as over HTTP/1.1.
        let mut a = PlanArgs::new("http://127.0.0.1:1/");
        a.h2c = true;
        a.stages = Some(stages(false));
        let p = Plan::build(a).unwrap();
        assert_eq!(p.load.max_connections(), 10);
        assert_eq!(p.config.stages.as_ref().unwrap().unit, "connections");
        // --rate-stages and -L run over HTTP/2 too.
        let mut a = PlanArgs::new("http://127.0.0.1:1/");
        a.h2c = true;
        a.stages = Some(stages(true));
        a.follow_redirects = true;
        let p = Plan::build(a).unwrap();
        assert_eq!(p.modes(), vec![Mode::RateStages, Mode::FollowRedirects]);
        assert_eq!(p.config.stages.as_ref().unwrap().unit, "rps");
        // A scenario too.
        let dir = std::env::temp_dir().join(format!("redline-plan-h2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("s.toml");
        std::fs::write(&file, "name = \"s\"\n[[request]]\npath = \"/\"\n").unwrap();
        let mut a = PlanArgs::new("http://127.0.0.1:1/");
        a.h2c = true;
        a.scenario = Some((file, false));
        let p = Plan::build(a).unwrap();
        assert_eq!(p.modes(), vec![Mode::Scenario]);
        assert_eq!(p.protocol(), Protocol::Http2);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(h2_connections(0, 4), 0);
        assert_eq!(h2_connections(1, 4), 1);
        assert_eq!(h2_connections(8, 4), 2);
        assert_eq!(h2_connections(9, 4), 3);
    }

    #[test]
    fn http2_options() {
        let build = |url: &str, f: &dyn Fn(&mut PlanArgs)| {
            let mut a = PlanArgs::new(url);
            f(&mut a);
            Plan::build(a)
        };
        let p = build("https://127.0.0.1:1/", &|a| {
            a.http2 = true;
            a.streams = Some(10);
        })
        .unwrap();
        assert!(p.http2 && !p.h2c);
        assert_eq!(p.streams, 10);
        assert_eq!(p.config.http_version, "2");
        assert_eq!(p.config.streams, Some(10));
        let p = build("http://127.0.0.1:1/", &|a| a.h2c = true).unwrap();
        assert!(p.http2 && p.h2c);
        assert_eq!(p.streams, 1);
        let p = build("http://127.0.0.1:1/", &|_| {}).unwrap();
        assert!(!p.http2);
        assert_eq!(p.config.streams, None);
        for (url, f, want) in [
            (
                "http://127.0.0.1:1/",
                &(|a: &mut PlanArgs| a.http2 = true) as &dyn Fn(&mut PlanArgs),
                "https://",
            ),
            (
                "https://127.0.0.1:1/",
                &|a: &mut PlanArgs| a.h2c = true,
                "http://",
            ),
            (
                "http://127.0.0.1:1/",
                &|a: &mut PlanArgs| a.streams = Some(4),
                "--http2",
            ),
            (
                "http://127.0.0.1:1/",
                &|a: &mut PlanArgs| {
                    a.h2c = true;
                    a.streams = Some(0)
                },
                "at least 1",
            ),
            (
                "http://127.0.0.1:1/",
                &|a: &mut PlanArgs| {
                    a.h2c = true;
                    a.http10 = true
                },
                "--http1.0",
            ),
            (
                "https://127.0.0.1:1/",
                &|a: &mut PlanArgs| {
                    a.http2 = true;
                    a.h2c = true
                },
                "together",
            ),
        ] {
            let e = build(url, f).unwrap_err().to_string();
            assert!(e.contains(want), "{url}: {e}");
        }
    }
}
