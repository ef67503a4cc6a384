//! Distributed runs (issue 9): `coordinate`, `agent`, `k8s`, and the hidden
//! `k8s-pod` entry point of the generated Job's pods.
//!
//! Issue 20: the coordinator's token (`--token`, `--token-file`,
//! `REDLINE_TOKEN`), the plan fingerprint an agent registers with
//! ([`plan_id`]), and `k8s` parsing the run arguments with the real `run`
//! parser ([`parse_run`]) so credentials go to a Secret and files into the
//! ConfigMap ([`bundle_run`]).
//!
//! An agent runs its share of the load as a child `redline run … -o json
//! --live-json FILE` (so every run flag works unchanged), forwards the live
//! counters every second, and sends the child's run record at the end; it
//! also prints that record on its own stdout as a fallback. The child dies
//! with the agent (PR_SET_PDEATHSIG).
//!
//! `--abort-on-fail` is judged by the coordinator on the merged live seconds
//! (the same `thresholds::hopeless` a local run uses); it then sends every
//! agent `stop`, and each agent stops its child as Ctrl-C would (SIGINT), so
//! in-flight requests get their grace and the records are merged as usual.
//! An agent never passes `--abort-on-fail` to its child: its share is not
//! the run, so its own threshold view must not stop it.
//!
//! Issue 21: `coordinate --serve-record ADDR --linger DURATION` serves the
//! merged record over HTTP after the run (`redline_dist::record_http`), and
//! `redline fetch URL` downloads it, checks it as the coordinator checks
//! records (`coordinator::check_consistent`), saves it to the history and
//! prints its report.
//!
//! Exit codes: `fetch` 0 ok, 1 not reachable, not the record (HTTP 401,
//! 404, 503 after `--wait`), not a consistent run record, or not saved (the
//! report is still printed), 2 usage (bad URL, flag or token file).
//! `coordinate` 0 ok, 1 incomplete (an agent was lost: the record
//! is still printed, marked `interrupted` with a `dist_incomplete` warning)
//! or nothing to merge, 2 usage (also: no token while listening beyond
//! loopback; hostile counts above [`MAX_AGENTS`]), 4 a `--threshold` failed on the merged
//! record or `--abort-on-fail` stopped the run. `agent` 0 ok, 1 the run or the coordinator failed (its own record
//! still printed when there is one), 2 usage.

use crate::exit::{fail, Exit};
use clap::{Args, Subcommand, ValueEnum};
use redline_dist::{agent, coordinator, k8s, segment};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `run` flags for distributed runs without a coordinator (docs/distributed.md).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Distributed")]
pub struct RunDistArgs {
    /// Run one exact share of the load: I/N is the I-th (from 0) of N equal
    /// shares; A:B (e.g. 0:1/3) a segment of --segment-sequence.
    #[arg(long, value_name = "I/N|A:B")]
    segment: Option<String>,
    /// The bounds of all segments, for unequal shares: 0,1/2,3/4,1.
    #[arg(long = "segment-sequence", value_name = "SEQ", requires = "segment")]
    segment_sequence: Option<String>,
    /// Wait and start at TIME: RFC 3339 (2026-11-22T10:00:00Z) or +DURATION
    /// from now (+10s); the record says how late the run started.
    #[arg(long = "start-at", value_name = "TIME")]
    start_at: Option<String>,
    /// (For `redline agent`.) Write each finished second's counts and latency
    /// histogram (HdrHistogram V2 + deflate, base64) as a JSON line to FILE.
    #[arg(long = "live-seconds", value_name = "FILE", hide = true)]
    pub live_seconds: Option<PathBuf>,
}

/// Writes `--live-seconds`, one `Msg::Second` JSON line per second: a second once it is 300 ms old (workers hand
/// their finished seconds over every 100 ms), and at the end the seconds
/// not yet written, from the final record.
pub struct SecondsSink {
    file: std::fs::File,
    next_t: u32,
    failed: bool,
}

/// How old a second must be before it is written live.
const SECOND_SETTLE_S: f64 = 0.3;

impl SecondsSink {
    /// Creates FILE (Err: a usage error message).
    pub fn open(path: &std::path::Path) -> Result<SecondsSink, String> {
        let file = std::fs::File::create(path)
            .map_err(|e| format!("cannot write --live-seconds {}: {e}", path.display()))?;
        Ok(SecondsSink {
            file,
            next_t: 0,
            failed: false,
        })
    }

    fn write(&mut self, p: &redline_stats::SeriesPoint) {
        // The protocol's own message: the agent forwards it as it is.
        let l = redline_dist::protocol::Msg::Second {
            t: p.t,
            requests: p.requests,
            errors: p.errors,
            status_classes: p.status_classes,
            hist: p.hist.to_hist().to_base64(),
        };
        let mut line = serde_json::to_string(&l).unwrap_or_default();
        line.push('\n');
        // One write per line: the agent never reads half a line.
        if self.file.write_all(line.as_bytes()).is_err() {
            self.failed = true;
        }
        self.next_t = p.t + 1;
    }

    /// Called with the run's progress: writes the seconds that have settled.
    pub fn push(&mut self, elapsed: Duration, series: &[redline_stats::SeriesPoint]) {
        let settled = elapsed.as_secs_f64() - SECOND_SETTLE_S;
        let from = self.next_t;
        for p in series.iter().filter(|p| p.t >= from) {
            if f64::from(p.t) + 1.0 > settled || self.failed {
                break;
            }
            self.write(p);
        }
    }

    /// At the end: the seconds not written yet, from the final record.
    pub fn finish(mut self, series: &[redline_stats::SeriesPoint]) {
        let from = self.next_t;
        for p in series.iter().filter(|p| p.t >= from) {
            if self.failed {
                break;
            }
            self.write(p);
        }
        let _ = self.file.sync_data();
    }
}

/// How far in the past a `--start-at` time may be (a second: clocks and
/// process start-up), beyond which it is a usage error.
pub const START_GRACE: Duration = Duration::from_secs(1);

impl RunDistArgs {
    /// The segment and the start time, checked (Err: a usage error).
    pub fn resolve(
        &self,
    ) -> Result<(Option<segment::Segment>, Option<std::time::SystemTime>), String> {
        let seg = self
            .segment
            .as_deref()
            .map(|s| segment::Segment::parse(s, self.segment_sequence.as_deref()))
            .transpose()?;
        let at = self
            .start_at
            .as_deref()
            .map(|s| parse_start_at(s, std::time::SystemTime::now()))
            .transpose()?;
        Ok((seg, at))
    }
}

/// Parses `--start-at`: RFC 3339, or `+DURATION` from `now`. A time more
/// than [`START_GRACE`] in the past is an error.
pub fn parse_start_at(
    s: &str,
    now: std::time::SystemTime,
) -> Result<std::time::SystemTime, String> {
    let s = s.trim();
    let at = if let Some(rel) = s.strip_prefix('+') {
        now + dur(rel).map_err(|e| format!("--start-at {s}: {e}"))?
    } else {
        let ms = redline_history::merge::parse_rfc3339_ms(s).ok_or_else(|| {
            format!("--start-at {s:?}: give an RFC 3339 time (2026-11-22T10:00:00Z) or +10s")
        })?;
        let ms = u64::try_from(ms)
            .map_err(|_| format!("--start-at {s}: a time before 1970 is in the past"))?;
        std::time::UNIX_EPOCH + Duration::from_millis(ms)
    };
    if let Ok(late) = now.duration_since(at) {
        if late > START_GRACE {
            return Err(format!(
                "--start-at {s} is {:.1} s in the past",
                late.as_secs_f64()
            ));
        }
    }
    if at.duration_since(now).unwrap_or_default() > Duration::from_secs(7 * 86_400) {
        return Err(format!("--start-at {s} is more than a week away"));
    }
    Ok(at)
}

/// Waits until `at` (wall clock), in short sleeps so Ctrl-C stops the wait;
/// returns when it started and how late, or None when interrupted.
pub fn wait_for_start(
    at: std::time::SystemTime,
    stop: &redline_engine::StopHandle,
    quiet: bool,
) -> Option<redline_stats::ScheduledStart> {
    let now = std::time::SystemTime::now();
    if let Ok(d) = at.duration_since(now) {
        if !quiet && d > Duration::from_millis(500) {
            eprintln!(
                "redline: waiting {:.1} s to start at {}",
                d.as_secs_f64(),
                redline_stats::time::rfc3339(at)
            );
        }
    }
    // Bounded: --start-at is at most a week away; each sleep at most 50 ms,
    // the last one to the instant.
    loop {
        if stop.is_stopped() {
            return None;
        }
        let now = std::time::SystemTime::now();
        match at.duration_since(now) {
            Ok(d) if !d.is_zero() => std::thread::sleep(d.min(Duration::from_millis(50))),
            _ => break,
        }
    }
    let late = std::time::SystemTime::now()
        .duration_since(at)
        .unwrap_or_default();
    Some(redline_stats::ScheduledStart {
        at: redline_stats::time::rfc3339(at),
        late_ms: late.as_secs_f64() * 1000.0,
    })
}

/// The distributed subcommands.
#[derive(Subcommand, Debug)]
pub enum DistCmd {
    /// Coordinate N agents: synchronized start, exact merge, one verdict (docs/distributed.md).
    Coordinate(CoordinateArgs),
    /// Run one share of the load for a coordinator: redline agent --index I --total N --coordinator HOST:PORT -- URL -n 3000 -c 6
    Agent(AgentArgs),
    /// Print Kubernetes manifests (Indexed Job, headless Service, ConfigMap) for a distributed run.
    K8s(K8sArgs),
    /// Download a coordinator's run record (coordinate --serve-record), save it to the history, print its report.
    Fetch(FetchArgs),
    /// The entry point of the pods `redline k8s` generates (index from JOB_COMPLETION_INDEX).
    #[command(name = "k8s-pod", hide = true)]
    K8sPod(K8sPodArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum RecordFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum ManifestFormat {
    Yaml,
    Json,
}

fn dur(s: &str) -> Result<Duration, String> {
    redline_engine::parse_duration(s)
}

/// A secret given on the command line; its `Debug` never shows it.
#[derive(Clone)]
pub struct SecretArg(String);

impl std::fmt::Debug for SecretArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

fn secret_arg(s: &str) -> Result<SecretArg, String> {
    Ok(SecretArg(s.to_string()))
}

/// `redline coordinate`.
#[derive(Args, Debug, Clone)]
pub struct CoordinateArgs {
    /// Number of agents (indexes 0 to N-1).
    #[arg(long, value_name = "N")]
    agents: u64,
    /// Address to listen on for agents (port 0: any, printed at start).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:7070")]
    listen: String,
    /// How long to wait for all agents to register and be ready.
    #[arg(long = "ready-timeout", value_name = "DURATION", default_value = "2m", value_parser = dur)]
    ready_timeout: Duration,
    /// The common start is this long after the last agent is ready.
    #[arg(long = "start-delay", value_name = "DURATION", default_value = "2s", value_parser = dur)]
    start_delay: Duration,
    /// An agent silent this long during the run is given up.
    #[arg(long = "silence-timeout", value_name = "DURATION", default_value = "15s", value_parser = dur)]
    silence_timeout: Duration,
    /// Upper bound of the whole run (runs bounded by -n have no duration of their own).
    #[arg(long = "run-timeout", value_name = "DURATION", default_value = "1h", value_parser = dur)]
    run_timeout: Duration,
    /// Pass/fail bound evaluated once on the merged record (repeatable), e.g. 'p99<250ms'.
    #[arg(long = "threshold", value_name = "EXPR", value_parser = threshold)]
    thresholds: Vec<redline_report::thresholds::Threshold>,
    /// With --threshold: judge the merged live seconds and stop every agent
    /// (gracefully, records kept) once a threshold can no longer pass; exit code 4.
    #[arg(long = "abort-on-fail", requires = "thresholds")]
    abort_on_fail: bool,
    /// Report format on stdout: text, or json (the merged run record).
    #[arg(short = 'o', long = "output", default_value = "text")]
    output: RecordFormat,
    /// Also write the merged run record (JSON) to FILE.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// No event or progress lines on stderr, and no live view.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// No live view on a terminal: the event and progress lines instead.
    #[arg(long = "no-tui")]
    no_tui: bool,
    /// The shared token agents must prove they know (required unless --listen is a loopback address; default: REDLINE_TOKEN) (an HMAC of it, never the
    /// token itself, crosses the network). Prefer --token-file or the
    /// REDLINE_TOKEN environment variable: a flag shows in `ps`.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file", value_parser = secret_arg)]
    token: Option<SecretArg>,
    /// Read the token from FILE (a regular file of at most 4 KiB; surrounding white space ignored).
    #[arg(long = "token-file", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// After the run, serve the merged record over HTTP on ADDR (GET
    /// /record.json, token-protected like the coordinator; /healthz) for
    /// `redline fetch` or `kubectl port-forward`.
    #[arg(long = "serve-record", value_name = "ADDR")]
    serve_record: Option<String>,
    /// With --serve-record: keep serving at most this long after the run
    /// (ends sooner, once the record has been downloaded); at most 24h.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = dur, requires = "serve_record")]
    linger: Duration,
    /// TLS for the agents' connections: this certificate chain (PEM); agents then need --cacert.
    #[arg(long = "tls-cert", value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

/// `redline fetch`.
#[derive(Args, Debug, Clone)]
pub struct FetchArgs {
    /// The record's URL, e.g. http://127.0.0.1:7071/record.json (the path may be left out).
    #[arg(value_name = "URL")]
    url: String,
    /// The coordinator's token (default: REDLINE_TOKEN). Prefer --token-file
    /// or the REDLINE_TOKEN environment variable: a flag shows in `ps`.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file", value_parser = secret_arg)]
    token: Option<SecretArg>,
    /// Read the token from FILE (a regular file of at most 4 KiB; surrounding white space ignored).
    #[arg(long = "token-file", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Keep asking, at most this long, while the run is not over (HTTP 503)
    /// or the coordinator is not reachable yet (default: ask once).
    #[arg(long, value_name = "DURATION", value_parser = dur)]
    wait: Option<Duration>,
    /// Time-out of one download.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = dur)]
    timeout: Duration,
    /// Report format on stdout: text, or json (the run record).
    #[arg(short = 'o', long = "output", default_value = "text")]
    output: RecordFormat,
    /// Do not save the record in the history.
    #[arg(long = "no-save")]
    no_save: bool,
    /// History database (default: $REDLINE_DB, else $XDG_DATA_HOME/redline/history.db).
    #[arg(long = "db", value_name = "PATH")]
    db: Option<PathBuf>,
    /// A label for the saved run.
    #[arg(long, value_name = "LABEL")]
    label: Option<String>,
    /// A free note kept with the saved run.
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
}

fn threshold(s: &str) -> Result<redline_report::thresholds::Threshold, String> {
    s.parse()
}

/// `redline agent`.
#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// This agent's index, 0-based.
    #[arg(long, value_name = "I")]
    index: u64,
    /// Number of agents.
    #[arg(long, value_name = "N")]
    total: u64,
    /// The coordinator's address.
    #[arg(long, value_name = "HOST:PORT")]
    coordinator: String,
    /// Unequal shares: the boundaries of every agent's segment, e.g. 0,1/2,3/4,1 (agent I gets the I-th).
    #[arg(long = "segment-sequence", value_name = "SEQ")]
    segment_sequence: Option<String>,
    /// How long to keep trying to reach the coordinator.
    #[arg(long = "connect-timeout", value_name = "DURATION", default_value = "2m", value_parser = dur)]
    connect_timeout: Duration,
    /// How long to wait for the start once ready.
    #[arg(long = "start-timeout", value_name = "DURATION", default_value = "10m", value_parser = dur)]
    start_timeout: Duration,
    /// The coordinator's token, to prove this agent may join (default: REDLINE_TOKEN) (an HMAC of it, never the
    /// token itself, crosses the network). Prefer --token-file or the
    /// REDLINE_TOKEN environment variable: a flag shows in `ps`.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file", value_parser = secret_arg)]
    token: Option<SecretArg>,
    /// Read the token from FILE (a regular file of at most 4 KiB; surrounding white space ignored).
    #[arg(long = "token-file", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Reach the coordinator over TLS, trusting only the CA certificates in FILE (PEM); the
    /// coordinator's certificate must name the host of --coordinator.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// The `redline run` arguments of the whole run, after `--` (the agent runs its `--segment` of them).
    #[arg(last = true, required = true, value_name = "RUN ARGS")]
    run: Vec<String>,
}

/// `redline k8s`.
#[derive(Args, Debug, Clone)]
pub struct K8sArgs {
    /// Number of load-generating pods (the Job has one more: the coordinator).
    #[arg(long, value_name = "N")]
    parallel: u32,
    /// The container image with redline in it (see the Dockerfile).
    #[arg(long, value_name = "IMAGE", default_value = "redline:latest")]
    image: String,
    /// Name of the Job and the Service.
    #[arg(long, value_name = "NAME", default_value = "redline")]
    name: String,
    /// Namespace of the objects.
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    /// CPU request per pod.
    #[arg(long, value_name = "CPU", default_value = "1")]
    cpu: String,
    /// Memory request per pod.
    #[arg(long, value_name = "SIZE", default_value = "256Mi")]
    memory: String,
    /// Prefer one generator per node (pod anti-affinity).
    #[arg(long = "anti-affinity")]
    anti_affinity: bool,
    /// The Job's deadline (default: the run's -d plus 10 minutes, or 1 hour).
    #[arg(long, value_name = "DURATION", value_parser = dur)]
    deadline: Option<Duration>,
    /// How long the coordinator pod serves the merged record after the run
    /// (port 7071, for kubectl port-forward and `redline fetch`; ends sooner
    /// once downloaded); added to the default deadline.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = dur)]
    linger: Duration,
    /// yaml or json (a v1 List).
    #[arg(short = 'o', long = "output", default_value = "yaml")]
    output: ManifestFormat,
    /// `run` and its arguments, after `--`: -- run URL -d 60s -c 300
    #[arg(last = true, required = true, value_name = "run ARGS")]
    run: Vec<String>,
}

/// `redline k8s-pod` (hidden).
#[derive(Args, Debug, Clone)]
pub struct K8sPodArgs {
    #[arg(long)]
    agents: u64,
    #[arg(long)]
    coordinator: String,
    #[arg(long = "args-file")]
    args_file: PathBuf,
    #[arg(long, default_value = "10m", value_parser = dur)]
    linger: Duration,
    #[arg(long = "serve-record", default_value = "0.0.0.0:7071")]
    serve_record: String,
}

/// Runs a distributed subcommand; returns the exit code.
pub fn dispatch(cmd: DistCmd) -> Exit {
    match cmd {
        DistCmd::Coordinate(a) => cmd_coordinate(a),
        DistCmd::Agent(a) => cmd_agent(a),
        DistCmd::K8s(a) => cmd_k8s(a),
        DistCmd::Fetch(a) => cmd_fetch(a),
        DistCmd::K8sPod(a) => cmd_k8s_pod(a),
    }
}

fn print_out(s: &str) -> Exit {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => fail(Exit::Failure, format!("cannot write the output: {e}")),
    }
}

/// The most agents (and segments, and `k8s --parallel`): checked before
/// anything is allocated for them.
pub const MAX_AGENTS: u64 = 1000;

fn cmd_coordinate(a: CoordinateArgs) -> Exit {
    if a.agents == 0 || a.agents > MAX_AGENTS {
        return fail(
            Exit::Usage,
            format!("--agents must be between 1 and {MAX_AGENTS}"),
        );
    }
    let token = match resolve_token(
        a.token.as_ref().map(|t| t.0.as_str()),
        a.token_file.as_deref(),
    ) {
        Ok(t) => t,
        Err(e) => return fail(Exit::Usage, e),
    };
    let listener = match std::net::TcpListener::bind(&a.listen) {
        Ok(l) => l,
        Err(e) => return fail(Exit::Usage, format!("cannot listen on {}: {e}", a.listen)),
    };
    let loopback = listener.local_addr().is_ok_and(|x| x.ip().is_loopback());
    if token.is_none() && !loopback {
        return fail(
            Exit::Usage,
            format!(
                "--listen {} reaches beyond this machine: give a token (--token-file FILE, REDLINE_TOKEN or --token) so only your agents can join",
                a.listen
            ),
        );
    }
    if a.linger > MAX_LINGER {
        return fail(Exit::Usage, "--linger: at most 24h");
    }
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => {
            match read_bounded(c, 1 << 20, "--tls-cert")
                .and_then(|c| Ok((c, read_bounded(k, 1 << 20, "--tls-key")?)))
                .and_then(|(c, k)| redline_dist::tls::server_config(&c, &k))
            {
                Ok(t) => Some(t),
                Err(e) => return fail(Exit::Usage, e),
            }
        }
        _ => None,
    };
    let record_srv = match &a.serve_record {
        None => None,
        Some(at) => {
            let l = match std::net::TcpListener::bind(at) {
                Ok(l) => l,
                Err(e) => {
                    return fail(
                        Exit::Usage,
                        format!("cannot listen on --serve-record {at}: {e}"),
                    )
                }
            };
            if token.is_none() && !l.local_addr().is_ok_and(|x| x.ip().is_loopback()) {
                return fail(
                    Exit::Usage,
                    format!("--serve-record {at} reaches beyond this machine: give a token (--token-file FILE, REDLINE_TOKEN or --token) so only you can fetch the record"),
                );
            }
            match redline_dist::record_http::RecordServer::start(l, token.as_ref()) {
                Ok(s) => Some(s),
                Err(e) => return fail(Exit::Failure, format!("--serve-record {at}: {e}")),
            }
        }
    };
    let addr = listener
        .local_addr()
        .map(|x| x.to_string())
        .unwrap_or_else(|_| a.listen.clone());
    eprintln!(
        "redline coordinate: listening on {addr} for {} agents",
        a.agents
    );
    if let Some(s) = &record_srv {
        eprintln!(
            "redline coordinate: the run record will be at http://{}{} after the run",
            s.local_addr(),
            redline_dist::record_http::RECORD_PATH
        );
    }
    let cfg = coordinator::Config {
        agents: a.agents,
        ready_timeout: a.ready_timeout,
        start_delay: a.start_delay,
        silence_timeout: a.silence_timeout,
        run_timeout: a.run_timeout,
        abort_on_fail: a.abort_on_fail,
        token,
        tls,
    };
    // The live view on a terminal: events go to its log and are printed
    // once it is left (q or Ctrl-C quit at once, as Ctrl-C always did here).
    let view = match !a.quiet && crate::live::wanted(a.no_tui) {
        true => crate::live::LiveView::start(
            {
                let mut m = crate::live::Model::new(format!("redline coordinate on {addr}"));
                m.stage = format!("waiting for {} agents", a.agents);
                m.log_prefix = "redline coordinate: ".into();
                m
            },
            crate::live::OnQuit::Exit,
        ),
        false => None,
    };
    let mut held: Vec<String> = Vec::new();
    let tty = std::io::stderr().is_terminal();
    let quiet = a.quiet;
    let thresholds = a.thresholds.clone();
    // The same judgement as a local run's --abort-on-fail, on the merged seconds.
    let judge = |live: &coordinator::Live| {
        if thresholds.is_empty() {
            return None;
        }
        let so_far = redline_report::thresholds::SoFar {
            elapsed_s: live.elapsed_s,
            failed: live.failed,
            series: live.series,
            planned_requests: live.planned_requests,
            planned_duration_s: live.planned_duration_s,
        };
        redline_report::thresholds::hopeless(&thresholds, &so_far)
    };
    let result = coordinator::coordinate_judged(
        listener,
        &cfg,
        |ev| {
            use coordinator::Event::*;
            if let Some(v) = &view {
                let mut m = v.model();
                match ev {
                    Starting(_) => m.begin("running", None, None, None),
                    Progress(t, c, f, n) => {
                        m.snapshot(*t, *c, *f, None, &[]);
                        m.agents = Some(*n);
                    }
                    Second(x) => {
                        m.planned_duration_s = x.planned_duration_s;
                        m.planned_requests = x.planned_requests;
                        m.push_second(crate::live::Second {
                            t: x.t,
                            requests: x.requests,
                            errors: x.errors,
                            p50_us: x.p50_us,
                            p90_us: x.p90_us,
                            p99_us: x.p99_us,
                            status: x.status_classes,
                        });
                    }
                    Stopping(why) => m.stage = format!("stopping every agent: {why}"),
                    _ => {}
                }
                // Totals and seconds are the screen's; events go to its log below.
                if matches!(ev, Progress(..) | Second(_)) {
                    return;
                }
            }
            let line = match ev {
                Registered(i, h) => format!("agent {i} registered ({h})"),
                Refused(r) => format!("refused an agent: {r}"),
                Ready(i, off, rtt) => {
                    format!("agent {i} ready (clock offset {off:+.1} ms, round trip {rtt:.2} ms)")
                }
                Starting(_) => format!("all agents ready: starting in {:?}", cfg.start_delay),
                Progress(t, c, f, n) => {
                    if !tty {
                        return;
                    }
                    if !quiet {
                        eprint!(
                            "\r\x1b[K[{t:>6.1}s] {} agents, {} done, {} errors",
                            n,
                            redline_report::count(*c),
                            redline_report::count(*f)
                        );
                    }
                    return;
                }
                Second(x) => format!(
                    "second {}: {} req/s, p99 {}, {} errors ({} agents)",
                    x.t,
                    redline_report::count(x.requests),
                    if x.p99_us >= 1000 {
                        format!("{:.2} ms", x.p99_us as f64 / 1000.0)
                    } else {
                        format!("{} µs", x.p99_us)
                    },
                    redline_report::count(x.errors),
                    x.agents
                ),
                Finished(i) => format!("agent {i} sent its record"),
                Stopping(why) => format!("stopping every agent (--abort-on-fail): {why}"),
                Lost(i, why) => format!("agent {i} lost: {why}"),
            };
            // A lost agent and an early stop are always said, even with -q.
            if !quiet || matches!(ev, Lost(..) | Stopping(_)) {
                if let Some(v) = &view {
                    v.model().log(line.clone());
                    held.push(format!("redline coordinate: {line}"));
                    return;
                }
                if tty {
                    eprint!("\r\x1b[K");
                }
                eprintln!("redline coordinate: {line}");
            }
        },
        judge,
    );
    // The view is left, then the events it held are printed.
    drop(view);
    for l in held {
        eprintln!("{l}");
    }
    let out = match result {
        Ok(o) => o,
        Err(coordinator::Error::NotReady(m)) => return fail(Exit::Failure, m),
        Err(e) => return fail(Exit::Failure, e),
    };
    if !quiet {
        for ag in &out.agents {
            let state = match (&ag.failure, &ag.record, &ag.note) {
                (Some(f), _, _) => format!("LOST: {f}"),
                (None, Some(r), _) => format!(
                    "{} done, {} failed",
                    redline_report::count(r.counters.completed),
                    redline_report::count(r.counters.failed)
                ),
                (None, None, Some(n)) => format!("no load: {n}"),
                (None, None, None) => "no record".into(),
            };
            eprintln!(
                "redline coordinate: {}: offset {:+.1} ms, round trip {:.2} ms, started {:.1} ms late; {}",
                redline_report::escape::clean(&ag.name()),
                ag.offset_ms,
                ag.rtt_ms,
                ag.lateness_ms,
                redline_report::escape::clean(&state)
            );
        }
    }
    let Some(rec) = out.merged.clone() else {
        return fail(
            Exit::Failure,
            "no agent sent a run record: nothing to report",
        );
    };
    let Some(srv) = record_srv else {
        return report_merged(&a, &rec, &out);
    };
    srv.publish(redline_report::json(&rec).into_bytes());
    let code = report_merged(&a, &rec, &out);
    eprintln!(
        "redline coordinate: serving the run record at http://{}{} for at most {:?} (until it is downloaded once)",
        srv.local_addr(),
        redline_dist::record_http::RECORD_PATH,
        a.linger
    );
    if srv.wait_fetched(a.linger) {
        eprintln!("redline coordinate: the run record was downloaded");
    } else {
        eprintln!(
            "redline coordinate: nobody downloaded the run record within {:?}",
            a.linger
        );
    }
    code
}

/// The longest `--linger`.
const MAX_LINGER: Duration = Duration::from_secs(24 * 3600);

/// Writes `--record`, prints the merged report and the verdict; the exit code.
fn report_merged(
    a: &CoordinateArgs,
    rec: &redline_stats::RunRecord,
    out: &coordinator::Outcome,
) -> Exit {
    if let Some(p) = &a.record {
        if let Err(e) = std::fs::write(p, redline_report::json(rec)) {
            return fail(
                Exit::Failure,
                format!("cannot write --record {}: {e}", p.display()),
            );
        }
    }
    let outcomes = redline_report::thresholds::check(rec, &a.thresholds);
    let code = match a.output {
        RecordFormat::Json => {
            let c = print_out(&redline_report::json(rec));
            for o in &outcomes {
                eprintln!("threshold {o}");
            }
            c
        }
        RecordFormat::Text => {
            let mut t = redline_report::text(rec);
            if !outcomes.is_empty() {
                t.push_str("\nThresholds (on the merged record):\n");
                for o in &outcomes {
                    t.push_str(&format!("  {o}\n"));
                }
            }
            print_out(&t)
        }
    };
    if code != Exit::Ok {
        return code;
    }
    if out.incomplete {
        let lost: Vec<String> = out
            .agents
            .iter()
            .filter(|x| x.failure.is_some())
            .map(|x| x.name())
            .collect();
        return fail(
            Exit::Failure,
            format!(
                "incomplete run: lost {}; the record holds only the other agents' load",
                lost.join(", ")
            ),
        );
    }
    if out.stopped.is_some() || outcomes.iter().any(|o| !o.pass) {
        Exit::Threshold
    } else {
        Exit::Ok
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Flags of `run` the agent sets itself and drops when the user gave them too.
const DROPPED: &[&str] = &["--no-save"];

fn cmd_agent(a: AgentArgs) -> Exit {
    if a.total > MAX_AGENTS {
        return fail(
            Exit::Usage,
            format!("--total {}: at most {MAX_AGENTS} agents", a.total),
        );
    }
    if a.total == 0 || a.index >= a.total {
        return fail(
            Exit::Usage,
            format!(
                "--index {} --total {}: the index must be below the total",
                a.index, a.total
            ),
        );
    }
    let seg = match &a.segment_sequence {
        Some(q) => match segment::Sequence::parse(q) {
            Ok(s) if s.len() as u64 == a.total => s.segment(a.index as usize).expect("index < len"),
            Ok(s) => {
                return fail(
                    Exit::Usage,
                    format!(
                        "--segment-sequence {q} has {} segments for --total {}",
                        s.len(),
                        a.total
                    ),
                )
            }
            Err(e) => return fail(Exit::Usage, e),
        },
        None => match segment::Sequence::equal(a.total) {
            Ok(s) => s.segment(a.index as usize).expect("index < total"),
            Err(e) => return fail(Exit::Usage, e),
        },
    };
    let tls = match &a.cacert {
        None => None,
        Some(p) => match read_bounded(p, 1 << 20, "--cacert")
            .and_then(|c| redline_dist::tls::client_config(&c))
        {
            Ok(c) => Some(c),
            Err(e) => return fail(Exit::Usage, e),
        },
    };
    let mut run = a.run.clone();
    if run.first().map(String::as_str) == Some("run") {
        run.remove(0);
    }
    run.retain(|x| !DROPPED.contains(&x.as_str()));
    // The run's own parser and plan builder: this agent's share as `run
    // --segment` will run it (a scenario's [load] and --stages included).
    let share = match crate::cli::agent_run(&run, seg.clone()) {
        Ok(s) => s,
        Err(e) => return fail(Exit::Usage, e),
    };
    // --abort-on-fail is the coordinator's: a threshold on this agent's share
    // is not the run's verdict, so the child never stops on its own view.
    let abort_on_fail = share.abort_on_fail;
    run.retain(|x| x != "--abort-on-fail");
    if abort_on_fail {
        eprintln!(
            "redline agent {}: --abort-on-fail is judged by the coordinator on the merged run, not by this agent",
            a.index
        );
    }
    let (connections, requests, rate, duration) = match &share.plan.load {
        redline_engine::Load::Closed {
            connections,
            requests,
            duration,
        } => (*connections, *requests, None, *duration),
        redline_engine::Load::Open {
            rate,
            max_connections,
            requests,
            duration,
            ..
        } => (*max_connections, *requests, Some(*rate), *duration),
    };
    let token = match resolve_token(
        a.token.as_ref().map(|t| t.0.as_str()),
        a.token_file.as_deref(),
    ) {
        Ok(t) => t,
        Err(e) => return fail(Exit::Usage, e),
    };
    let plan = match plan_id(&run, seg.sequence(), a.total) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Usage, e),
    };
    let expected_s = duration.map(|d| d.as_secs_f64());
    let mut child_args = vec![
        "--segment".to_string(),
        seg.to_string(),
        "--segment-sequence".to_string(),
        seg.sequence().to_string(),
    ];
    child_args.extend(run);
    let host = hostname();
    let mut session = match agent::Session::register(
        &a.coordinator,
        a.index,
        a.total,
        &host,
        a.connect_timeout,
        token.as_ref(),
        &plan,
        tls.as_ref(),
    ) {
        Ok(s) => s,
        Err(e) => return fail(Exit::Failure, e),
    };
    if let Err(e) = session.sync_clock(8) {
        return fail(Exit::Failure, e);
    }
    eprintln!(
        "redline agent {}: segment {seg}, {} connections{}{}; clock offset {:+.1} ms",
        a.index,
        connections,
        requests
            .map(|n| format!(", {n} requests"))
            .unwrap_or_default(),
        rate.map(|r| format!(", {r} req/s")).unwrap_or_default(),
        session.offset_ms
    );
    let start = match session.ready_and_wait(expected_s, requests, abort_on_fail, a.start_timeout) {
        Ok(s) => s,
        Err(e) => return fail(Exit::Failure, e),
    };
    let stop = session.listen_for_stop();
    // Sleep to the common start (bounded by the start delay the coordinator chose).
    let wait = start.saturating_duration_since(Instant::now());
    std::thread::sleep(wait.min(Duration::from_secs(600)));
    if let Some(why) = share.plan.empty_share() {
        eprintln!("redline agent {}: nothing to run: {why}", a.index);
        return match session.done(0.0, None, Some(why.to_string())) {
            Ok(()) => Exit::Ok,
            Err(e) => fail(Exit::Failure, e),
        };
    }
    let late_ms = Instant::now()
        .saturating_duration_since(start)
        .as_secs_f64()
        * 1000.0;
    let (record, note) = run_child(&child_args, &session.progress(), &stop, a.index);
    let text = record
        .as_ref()
        .and_then(|r| serde_json::to_string_pretty(r).ok());
    // The fallback: the agent's own record on its stdout.
    if let Some(t) = &text {
        print_out(&format!("{t}\n"));
    }
    let sent = session.done(late_ms, record.clone(), note.clone());
    match (sent, record) {
        (Ok(()), Some(_)) => Exit::Ok,
        (Ok(()), None) => fail(
            Exit::Failure,
            note.unwrap_or_else(|| "the run failed".into()),
        ),
        (Err(e), _) => fail(Exit::Failure, e),
    }
}

/// Runs `redline run ARGS -o json -q --no-save --live-json TMP` as a child
/// that dies with this process, forwarding its live counters every second.
/// Returns its record (JSON) or why there is none.
fn run_child(
    args: &[String],
    progress: &agent::ProgressSender,
    stop: &agent::StopRequest,
    index: u64,
) -> (Option<serde_json::Value>, Option<String>) {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return (None, Some(format!("cannot find the redline binary: {e}"))),
    };
    let live = std::env::temp_dir().join(format!(
        "redline-agent-{}-{index}.jsonl",
        std::process::id()
    ));
    let seconds_file = std::env::temp_dir().join(format!(
        "redline-agent-{}-{index}.seconds.jsonl",
        std::process::id()
    ));
    let mut cmd = std::process::Command::new(exe);
    // The agent's own flags first: the run arguments may end with `-- URL`.
    cmd.arg("run")
        .args(["-o", "json", "-q", "--no-save", "--live-json"])
        .arg(&live)
        .arg("--live-seconds")
        .arg(&seconds_file)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no
    // memory of the parent; it makes the load stop when the agent dies.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return (None, Some(format!("cannot start the run: {e}"))),
    };
    // Read stdout and stderr on threads so a full pipe never blocks the child.
    let out = child.stdout.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut v);
            v
        })
    });
    let err = child.stderr.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut v);
            v
        })
    });
    let started = Instant::now();
    let mut last = (0u64, 0u64, 0u64);
    let mut tail = SecondsTail::default();
    let mut next_beat = 0u64;
    let mut running = false;
    let mut stopped = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) => {}
            Err(_) => break None,
        }
        tail.forward(&seconds_file, progress);
        if let Ok(f) = std::fs::File::open(&live) {
            if let Some(Ok(l)) = std::io::BufReader::new(f).lines().last() {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&l) {
                    let g = |k: &str| v[k].as_u64().unwrap_or(0);
                    last = (g("completed"), g("failed"), g("open"));
                    // A live line: the child runs and has its Ctrl-C handler.
                    running = true;
                }
            }
        }
        // The coordinator's stop: the child stops as on Ctrl-C (one SIGINT:
        // sending stops, in-flight requests get their grace, the record follows).
        if !stopped && running {
            if let Some(why) = stop.reason() {
                stopped = true;
                eprintln!("redline agent {index}: stopping: {why}");
                if let Ok(pid) = i32::try_from(child.id()) {
                    // SAFETY: kill(2) on our own child's pid, which has not
                    // been reaped yet (try_wait above returned None).
                    unsafe {
                        libc::kill(pid, libc::SIGINT);
                    }
                }
            }
        }
        // A heartbeat every second even when nothing changed; the seconds
        // file is read four times as often.
        let t = started.elapsed().as_secs();
        if t >= next_beat {
            next_beat = t + 1;
            if progress.send(t, last.0, last.1, last.2).is_err() {
                // The coordinator is gone; the run goes on for the fallback record.
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    // The seconds the child wrote at its end, before the record.
    tail.forward(&seconds_file, progress);
    let _ = std::fs::remove_file(&live);
    let _ = std::fs::remove_file(&seconds_file);
    let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = err.and_then(|h| h.join().ok()).unwrap_or_default();
    let code = status.and_then(|s| s.code());
    match serde_json::from_slice::<serde_json::Value>(&stdout) {
        // Exit 4 (a --threshold in the run arguments) still has a record.
        Ok(v) if v.get("format").is_some() => (Some(v), None),
        _ => {
            let msg = String::from_utf8_lossy(&stderr);
            let first = msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            (
                None,
                Some(format!(
                    "the run failed (exit {}): {first}",
                    code.map(|c| c.to_string())
                        .unwrap_or_else(|| "by signal".into())
                )),
            )
        }
    }
}

/// Reads the child's `--live-seconds` file from where it stopped and
/// forwards each complete new line to the coordinator as `Msg::Second`.
#[derive(Default)]
struct SecondsTail {
    offset: u64,
    partial: Vec<u8>,
}

impl SecondsTail {
    fn forward(&mut self, path: &std::path::Path, progress: &agent::ProgressSender) {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(path) else {
            return;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        // Bounded: at most 64 MiB per call (a second's line is a few KB).
        let mut buf = Vec::new();
        let Ok(n) = f.take(64 << 20).read_to_end(&mut buf) else {
            return;
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let rest = self.partial.split_off(end + 1);
        let lines = std::mem::replace(&mut self.partial, rest);
        for l in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            if let Ok(m) = serde_json::from_slice::<redline_dist::protocol::Msg>(l) {
                // The coordinator gone: the run goes on for the fallback record.
                let _ = progress.second(&m);
            }
        }
    }
}

/// Run arguments `k8s` refuses: the agent sets them itself, or they read
/// or write this machine, not the pods.
const K8S_REFUSED: &[(&str, &str)] = &[
    ("output", "the agents set the output themselves"),
    ("quiet", "the agents set the output themselves"),
    (
        "html",
        "the coordinator prints the merged record; make the report from it",
    ),
    ("live_json", "the agents set it themselves"),
    ("live_seconds", "the agents set it themselves"),
    ("segment", "each agent runs its own segment"),
    ("segment_sequence", "each agent runs its own segment"),
    ("start_at", "the coordinator starts the agents together"),
    ("db", "the pods do not keep a history"),
    (
        "watch",
        "--watch watches processes of this machine, not the server's",
    ),
    (
        "watch_interval",
        "--watch watches processes of this machine, not the server's",
    ),
    ("server_status", "watch the server from a local run"),
    ("server_config", "watch the server from a local run"),
];

/// What `k8s` puts in the cluster besides the arguments.
#[derive(Default, Debug)]
struct Bundle {
    /// ConfigMap files (key → contents).
    files: std::collections::BTreeMap<String, Vec<u8>>,
    /// Secret env vars (name → value).
    secret_env: std::collections::BTreeMap<String, Vec<u8>>,
    /// Secret files (key → contents).
    secret_files: std::collections::BTreeMap<String, Vec<u8>>,
}

impl Bundle {
    fn secret(&mut self, value: &str) -> String {
        let n = self
            .secret_env
            .keys()
            .filter(|k| k.starts_with(k8s::SECRET_ENV_PREFIX))
            .count();
        self.secret_env.insert(
            format!("{}{n}", k8s::SECRET_ENV_PREFIX),
            value.as_bytes().to_vec(),
        );
        k8s::secret_ref(n)
    }

    /// Adds a file under a key made from its name; returns its path in the pods.
    fn file(&mut self, key: String, contents: Vec<u8>, secret: bool) -> Result<String, String> {
        if key == k8s::ARGS_KEY
            || self.files.contains_key(&key)
            || self.secret_files.contains_key(&key)
        {
            return Err(format!(
                "two files of the run would both be {key:?} in the pods; rename one"
            ));
        }
        let path = format!("{}/{key}", k8s::MOUNT);
        if secret {
            self.secret_files.insert(key, contents);
        } else {
            self.files.insert(key, contents);
        }
        Ok(path)
    }
}

/// A file's name as a ConfigMap key (`[-._a-zA-Z0-9]`, other characters `_`).
fn file_key(prefix: &str, path: &str) -> String {
    let base = std::path::Path::new(path)
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let clean: String = base
        .chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-._".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{prefix}{clean}")
}

/// The largest file `k8s` bundles.
const MAX_K8S_FILE: u64 = k8s::MAX_BUNDLE as u64;

/// Rewrites parsed run arguments for the cluster: credentials become
/// `$(REDLINE_SECRET_N)` references to the Secret, files are bundled (into
/// the ConfigMap, or the Secret for keys and scenarios that carry
/// credentials) and named by their path in the pods. Err: a clear refusal.
fn bundle_run(items: &mut [RunArg], b: &mut Bundle) -> Result<(), String> {
    for a in items.iter() {
        if let Some((_, why)) = K8S_REFUSED.iter().find(|(id, _)| *id == a.id) {
            let flag = a.long.as_deref().unwrap_or(&a.id);
            return Err(format!(
                "k8s: leave --{flag} out of the run arguments: {why}"
            ));
        }
    }
    let mut n = 0usize;
    for a in items.iter_mut() {
        let mut vals = std::mem::take(&mut a.values);
        for v in vals.iter_mut() {
            n += 1;
            *v = match a.id.as_str() {
                "basic_auth" => b.secret(v),
                "headers" if secret_header(v) => {
                    let (name, value) = v.split_once(':').unwrap_or((v.as_str(), ""));
                    format!("{}: {}", name.trim(), b.secret(value.trim()))
                }
                "url" if secret_url(v) => b.secret(v),
                "body_file" | "cacert" | "cert" => {
                    let what = format!("--{}", a.long.as_deref().unwrap_or(&a.id));
                    let data = read_bounded(std::path::Path::new(v), MAX_K8S_FILE, &what)?;
                    b.file(file_key(&format!("f{n}-"), v), data, false)?
                }
                "key" => {
                    let data = read_bounded(std::path::Path::new(v), MAX_K8S_FILE, "--key")?;
                    b.file(file_key(&format!("k{n}-"), v), data, true)?
                }
                "scenario" => bundle_scenario(v, b)?,
                _ => std::mem::take(v),
            };
        }
        a.values = vals;
    }
    Ok(())
}

/// Bundles a scenario and the files it names (which must sit next to it:
/// the pods see one flat folder). A scenario with credentials (headers or
/// URLs that look like them) goes into the Secret, with its files.
fn bundle_scenario(path: &str, b: &mut Bundle) -> Result<String, String> {
    let p = std::path::Path::new(path);
    let data = read_bounded(p, MAX_K8S_FILE, "--scenario")?;
    let text = String::from_utf8(data.clone())
        .map_err(|_| format!("--scenario {path}: not UTF-8 text"))?;
    let sc = redline_engine::scenario::file::parse(&text, path)?;
    let mut named: Vec<String> = sc
        .request
        .iter()
        .filter_map(|r| r.body_file.clone())
        .collect();
    named.extend(sc.data.as_ref().map(|d| d.file.clone()));
    let secret = sc
        .headers
        .iter()
        .chain(sc.request.iter().flat_map(|r| r.headers.iter()))
        .any(|(k, v)| secret_header(&format!("{k}: {v}")))
        || sc
            .base
            .iter()
            .chain(sc.hosts.values())
            .chain(sc.request.iter().filter_map(|r| r.url.as_ref()))
            .any(|u| secret_url(u));
    let dir = p.parent().unwrap_or(std::path::Path::new("."));
    for f in named {
        let ok_name = !f.is_empty()
            && f.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
            && f != k8s::ARGS_KEY
            && !f.starts_with('.');
        if !ok_name {
            return Err(format!(
                "--scenario {path} names the file {f:?}: k8s bundles only files next to the scenario, named with letters, digits, '-', '.' and '_'; move it there"
            ));
        }
        if b.files.contains_key(&f) || b.secret_files.contains_key(&f) {
            continue; // named twice in the scenario
        }
        let bytes = read_bounded(&dir.join(&f), MAX_K8S_FILE, "a file of the scenario")?;
        b.file(f, bytes, secret)?;
    }
    b.file(file_key("scenario-", path), data, secret)
}

fn cmd_k8s(a: K8sArgs) -> Exit {
    let mut run = a.run.clone();
    if run.first().map(String::as_str) != Some("run") {
        return fail(
            Exit::Usage,
            "k8s: give the run after `--`: redline k8s --parallel 4 -- run URL -d 60s",
        );
    }
    run.remove(0);
    if a.linger > MAX_LINGER {
        return fail(Exit::Usage, "--linger: at most 24h");
    }
    if a.parallel == 0 || u64::from(a.parallel) > MAX_AGENTS {
        return fail(
            Exit::Usage,
            format!("--parallel must be between 1 and {MAX_AGENTS}"),
        );
    }
    // The real parser: every spelling of a flag (-auser:pass, -a=…, -qa…) is seen.
    let mut items = match parse_run(&run) {
        Ok(i) => i,
        Err(e) => return fail(Exit::Usage, format!("k8s: {e}")),
    };
    let mut bundle = Bundle::default();
    if let Err(e) = bundle_run(&mut items, &mut bundle) {
        return fail(Exit::Usage, e);
    }
    match redline_dist::protocol::nonce() {
        Ok(t) => bundle
            .secret_env
            .insert(k8s::TOKEN_ENV.to_string(), t.into_bytes()),
        Err(e) => return fail(Exit::Failure, format!("k8s: cannot make a token: {e}")),
    };
    let run = render_run(&items);
    // The arguments must make a valid share for every agent.
    let seq = match segment::Sequence::equal(u64::from(a.parallel)) {
        Ok(s) => s,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut duration = None;
    for i in 0..seq.len() {
        match agent::scale_run_args(&run, &seq.segment(i).expect("i < len")) {
            Ok(s) => duration = s.duration,
            Err(e) => return fail(Exit::Usage, e),
        }
    }
    let deadline = match a.deadline {
        Some(d) => d,
        None => match duration.as_deref().map(dur).transpose() {
            Ok(Some(d)) => d + Duration::from_secs(600) + a.linger,
            Ok(None) => Duration::from_secs(3600) + a.linger,
            Err(e) => return fail(Exit::Usage, format!("-d: {e}")),
        },
    };
    let opts = k8s::Options {
        name: a.name,
        namespace: a.namespace,
        parallel: a.parallel,
        image: a.image,
        run_args: run,
        cpu: a.cpu,
        memory: a.memory,
        anti_affinity: a.anti_affinity,
        deadline_s: deadline.as_secs().max(1) as i64,
        linger_s: a.linger.as_secs(),
        files: bundle.files,
        secret_env: bundle.secret_env,
        secret_files: bundle.secret_files,
    };
    let docs = match k8s::manifests(&opts) {
        Ok(d) => d,
        Err(e) => return fail(Exit::Usage, e),
    };
    let problems = k8s::check(&docs, opts.parallel);
    if !problems.is_empty() {
        return fail(
            Exit::Failure,
            format!("generated manifests break: {}", problems.join("; ")),
        );
    }
    match a.output {
        ManifestFormat::Yaml => print_out(&redline_dist::yaml::to_yaml_stream(&docs)),
        ManifestFormat::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs});
            print_out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&list).unwrap_or_default()
            ))
        }
    }
}

/// The `--threshold` bounds in run arguments: the coordinator evaluates them
/// once on the merged record.
fn run_thresholds(run: &[String]) -> Result<Vec<redline_report::thresholds::Threshold>, String> {
    let mut v = Vec::new();
    for (i, a) in run.iter().enumerate() {
        let expr = if a == "--threshold" {
            run.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix("--threshold=")
        };
        if let Some(e) = expr {
            v.push(threshold(e)?);
        }
    }
    Ok(v)
}

fn cmd_k8s_pod(a: K8sPodArgs) -> Exit {
    let index: u64 = match std::env::var("JOB_COMPLETION_INDEX")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        Some(i) => i,
        None => return fail(
            Exit::Usage,
            "k8s-pod runs inside the Job `redline k8s` prints (JOB_COMPLETION_INDEX is not set)",
        ),
    };
    let text = match read_bounded(&a.args_file, 1 << 20, "--args-file")
        .and_then(|b| String::from_utf8(b).map_err(|_| "--args-file: not UTF-8".into()))
    {
        Ok(t) => t,
        Err(e) => return fail(Exit::Usage, e),
    };
    let run: Vec<String> = match serde_json::from_str::<Vec<String>>(&text) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                Exit::Usage,
                format!(
                    "{}: not a JSON array of strings: {e}",
                    a.args_file.display()
                ),
            )
        }
    };
    // Credentials come from the Secret, as environment variables.
    let run: Vec<String> = match run
        .iter()
        .map(|x| k8s::expand(x, |n| std::env::var(n).ok()))
        .collect::<Result<_, _>>()
    {
        Ok(r) => r,
        Err(e) => return fail(Exit::Usage, e),
    };
    if index == 0 {
        let port = a.coordinator.rsplit(':').next().unwrap_or("7070");
        return cmd_coordinate(CoordinateArgs {
            agents: a.agents,
            listen: format!("0.0.0.0:{port}"),
            ready_timeout: Duration::from_secs(300),
            start_delay: Duration::from_secs(2),
            silence_timeout: Duration::from_secs(15),
            run_timeout: Duration::from_secs(24 * 3600),
            thresholds: match run_thresholds(&run) {
                Ok(t) => t,
                Err(e) => return fail(Exit::Usage, e),
            },
            abort_on_fail: run.iter().any(|x| x == "--abort-on-fail"),
            output: RecordFormat::Json,
            record: None,
            quiet: true,
            no_tui: true,
            // REDLINE_TOKEN, from the Secret `redline k8s` wrote.
            token: None,
            token_file: None,
            serve_record: Some(a.serve_record),
            linger: a.linger,
            tls_cert: None,
            tls_key: None,
        });
    }
    cmd_agent(AgentArgs {
        index: index - 1,
        total: a.agents,
        coordinator: a.coordinator,
        segment_sequence: None,
        connect_timeout: Duration::from_secs(300),
        start_timeout: Duration::from_secs(600),
        token: None,
        token_file: None,
        cacert: None,
        run,
    })
}

/// `redline fetch URL`: downloads the record a coordinator serves, checks
/// it, saves it to the history and prints its report.
fn cmd_fetch(a: FetchArgs) -> Exit {
    use redline_dist::record_http::{self, FetchError, RecordUrl};
    let url = match RecordUrl::parse(&a.url) {
        Ok(u) => u,
        Err(e) => return fail(Exit::Usage, format!("fetch: {e}")),
    };
    let token = match resolve_token(
        a.token.as_ref().map(|t| t.0.as_str()),
        a.token_file.as_deref(),
    ) {
        Ok(t) => t,
        Err(e) => return fail(Exit::Usage, e),
    };
    let wait = a.wait.unwrap_or_default();
    let deadline = Instant::now() + wait;
    let mut said = false;
    let body = loop {
        match record_http::fetch(&url, token.as_ref(), a.timeout) {
            Ok(b) => break b,
            Err(e @ (FetchError::NotReady(_) | FetchError::Unreachable(_)))
                if Instant::now() + Duration::from_secs(1) < deadline =>
            {
                if !said {
                    eprintln!("redline fetch: waiting at most {wait:?} for the run record ({e})");
                    said = true;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => return fail(Exit::Failure, format!("fetch: {e}")),
        }
    };
    let shown = url.display();
    let text = match String::from_utf8(body) {
        Ok(t) => t,
        Err(_) => return fail(Exit::Failure, format!("fetch: {shown}: not UTF-8 text")),
    };
    let mut rec = match redline_stats::RunRecord::from_json(&text) {
        Ok(r) => r,
        Err(e) => return fail(Exit::Failure, format!("fetch: {shown}: {e}")),
    };
    drop(text);
    if let Err(e) = coordinator::check_consistent(&rec) {
        return fail(
            Exit::Failure,
            format!(
                "fetch: {shown}: not a consistent run record: {}",
                redline_report::escape::clean(&e)
            ),
        );
    }
    let save = crate::cmd_history::RunSaveArgs {
        no_save: a.no_save,
        db: a.db,
        label: a.label,
        note: a.note,
        html: None,
        live_json: None,
    };
    // Saved first, as `run` does; a failed save still prints the report.
    let saved = crate::cmd_history::after_run(&save, &mut rec);
    if let Ok(lines) = &saved {
        for l in lines {
            eprintln!("{l}");
        }
    }
    let code = match a.output {
        RecordFormat::Json => print_out(&redline_report::json(&rec)),
        RecordFormat::Text => print_out(&redline_report::text(&rec)),
    };
    match saved {
        Err(e) => fail(Exit::Failure, e),
        Ok(_) => code,
    }
}

/// One argument of a `redline run` command line as the real parser (clap,
/// the `run` subcommand's own definition) saw it.
#[derive(Debug, Clone, PartialEq)]
struct RunArg {
    /// Its id (the field name in `RunArgs`, e.g. `basic_auth`, `headers`, `url`).
    id: String,
    long: Option<String>,
    short: Option<char>,
    positional: bool,
    /// Its values, one per occurrence (empty for a flag).
    values: Vec<String>,
}

/// Parses `redline run` arguments (without `run`) with the real parser.
/// Err: the parser's first line (never the whole help).
fn parse_run(args: &[String]) -> Result<Vec<RunArg>, String> {
    let cmd = crate::cli::run_command();
    let m = cmd
        .clone()
        .try_get_matches_from(std::iter::once("run".to_string()).chain(args.iter().cloned()))
        .map_err(|e| {
            let t = e.render().to_string();
            let first = t.lines().next().unwrap_or("").trim_start_matches("error: ");
            format!("the run arguments: {first}")
        })?;
    let mut out = Vec::new();
    for a in cmd.get_arguments() {
        let id = a.get_id().as_str();
        if m.value_source(id) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        let values: Vec<String> = if a.get_action().takes_values() {
            m.get_raw(id)
                .map(|v| v.map(|x| x.to_string_lossy().into_owned()).collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        out.push(RunArg {
            id: id.to_string(),
            long: a.get_long().map(String::from),
            short: a.get_short(),
            positional: a.is_positional(),
            values,
        });
    }
    Ok(out)
}

/// Writes parsed arguments back as a command line: `--long=value` for each
/// value (a value may start with `-`), flags as `--long`, positionals last
/// (after `--` when one starts with `-`).
fn render_run(items: &[RunArg]) -> Vec<String> {
    let mut opts = Vec::new();
    let mut pos = Vec::new();
    for a in items {
        if a.positional {
            pos.extend(a.values.iter().cloned());
            continue;
        }
        match (&a.long, a.short) {
            (Some(l), _) if a.values.is_empty() => opts.push(format!("--{l}")),
            (Some(l), _) => opts.extend(a.values.iter().map(|v| format!("--{l}={v}"))),
            (None, Some(c)) if a.values.is_empty() => opts.push(format!("-{c}")),
            (None, Some(c)) => {
                for v in &a.values {
                    opts.push(format!("-{c}"));
                    opts.push(v.clone());
                }
            }
            (None, None) => {}
        }
    }
    if pos.iter().any(|p| p.starts_with('-')) {
        opts.push("--".into());
    }
    opts.extend(pos);
    opts
}

/// A header whose value is a credential: Authorization, Cookie, or a name
/// that looks like a token (`X-Api-Key`, `X-Auth-Token`, `X-Session`, …), or
/// a value that starts like one (`Bearer …`, `Basic …`).
fn secret_header(h: &str) -> bool {
    let (name, value) = h.split_once(':').unwrap_or((h, ""));
    let n = name.trim().to_ascii_lowercase();
    let v = value.trim().to_ascii_lowercase();
    [
        "auth",
        "cookie",
        "token",
        "key",
        "secret",
        "session",
        "passw",
        "credential",
        "signature",
        "jwt",
        "csrf",
        "xsrf",
        "bearer",
    ]
    .iter()
    .any(|w| n.contains(w))
        || ["bearer ", "basic ", "token ", "digest ", "negotiate "]
            .iter()
            .any(|p| v.starts_with(p))
}

/// A URL that carries a credential: `user:pass@` (or `user@`) in its
/// authority, or a query parameter named like one (`token`, `api_key`, `sig`, …).
fn secret_url(u: &str) -> bool {
    let rest = u.split_once("://").map_or(u, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return true;
    }
    let query = rest.split_once('?').map_or("", |(_, q)| q);
    query.split('&').any(|kv| {
        let k = kv.split('=').next().unwrap_or("").to_ascii_lowercase();
        [
            "token", "key", "secret", "passw", "auth", "sig", "session", "jwt",
        ]
        .iter()
        .any(|w| k.contains(w))
    })
}

/// Reads a file the user named: a regular file of at most `max` bytes (one
/// clear error otherwise: a FIFO, `/dev/zero` or a directory is refused).
fn read_bounded(path: &std::path::Path, max: u64, what: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{what} {}: not a regular file", path.display()));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    let mut v = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut v)
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if v.len() as u64 > max {
        return Err(format!(
            "{what} {}: larger than {max} bytes",
            path.display()
        ));
    }
    Ok(v)
}

/// The longest token file.
const MAX_TOKEN_FILE: u64 = 4096;

/// The coordinator token, from `--token`, else `--token-file`, else
/// `REDLINE_TOKEN`. Err: a usage error (never showing the token).
fn resolve_token(
    flag: Option<&str>,
    file: Option<&std::path::Path>,
) -> Result<Option<redline_dist::protocol::Token>, String> {
    use redline_dist::protocol::Token;
    if let Some(t) = flag {
        return Token::new(t)
            .map(Some)
            .ok_or_else(|| "--token is empty".to_string());
    }
    if let Some(p) = file {
        let b = read_bounded(p, MAX_TOKEN_FILE, "--token-file")?;
        let s = String::from_utf8(b)
            .map_err(|_| format!("--token-file {}: not UTF-8 text", p.display()))?;
        return Token::new(&s)
            .map(Some)
            .ok_or_else(|| format!("--token-file {}: empty", p.display()));
    }
    match std::env::var("REDLINE_TOKEN") {
        Ok(t) if !t.trim().is_empty() => Ok(Token::new(&t)),
        _ => Ok(None),
    }
}

/// Run arguments that are not part of what every agent must agree on
/// (output, saving, watching this machine, the agent's own segment).
const NOT_PLAN: &[&str] = &[
    "output",
    "quiet",
    "live_seconds",
    "segment",
    "segment_sequence",
    "start_at",
    "no_save",
    "db",
    "label",
    "note",
    "html",
    "live_json",
    "watch",
    "watch_interval",
    "server_status",
    "server_config",
    "thresholds",
    "abort_on_fail",
    "metrics_listen",
    "prometheus_rw",
    "otlp",
    "otlp_histogram",
    "metrics_interval",
    "metrics_linger",
];

/// Run arguments naming files whose contents are part of the plan.
const PLAN_FILES: &[&str] = &["body_file", "scenario", "urls", "cacert", "cert"];

fn sha256_hex(b: &[u8]) -> String {
    redline_dist::protocol::hex(&redline_dist::protocol::sha256(b))
}

/// The plan every agent must run, as fields (secrets left out, bodies and
/// files by their SHA-256) and their fingerprint.
fn plan_id(
    run: &[String],
    seq: &segment::Sequence,
    total: u64,
) -> Result<redline_dist::protocol::PlanId, String> {
    let items = parse_run(run)?;
    let mut f = std::collections::BTreeMap::new();
    for a in &items {
        if NOT_PLAN.contains(&a.id.as_str()) {
            continue;
        }
        let v = match a.id.as_str() {
            "basic_auth" => "(secret)".to_string(),
            "key" => "(given)".to_string(),
            "headers" => a
                .values
                .iter()
                .map(|h| {
                    if secret_header(h) {
                        format!("{}: (secret)", h.split(':').next().unwrap_or("").trim())
                    } else {
                        h.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"),
            "url" => a
                .values
                .iter()
                .map(|u| {
                    if secret_url(u) {
                        format!(
                            "(a URL with a credential, sha256 {})",
                            &sha256_hex(u.as_bytes())[..16]
                        )
                    } else {
                        u.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
            "body" => format!("sha256 {}", sha256_hex(a.values.concat().as_bytes())),
            id if PLAN_FILES.contains(&id) => a
                .values
                .iter()
                .map(
                    |p| match read_bounded(std::path::Path::new(p), 256 << 20, "") {
                        Ok(b) => format!("sha256 {}", sha256_hex(&b)),
                        Err(_) => "(unreadable)".into(),
                    },
                )
                .collect::<Vec<_>>()
                .join(" "),
            _ if a.values.is_empty() => "true".to_string(),
            _ => a.values.join("\n"),
        };
        f.insert(a.id.clone(), v);
    }
    f.insert("segment_sequence".into(), seq.to_string());
    f.insert("agents".into(), total.to_string());
    Ok(redline_dist::protocol::PlanId::new(f))
}

#[cfg(test)]
mod tests;
