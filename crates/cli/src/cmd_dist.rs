//! Distributed runs (issue 9): `coordinate`, `agent`, `k8s`, and the hidden
//! `k8s-pod` entry point of the generated Job's pods.
//!
//! Issue 20: the coordinator's token (`--token`, `--token-file`,
//! `REDLINE_TOKEN`), the plan fingerprint an agent registers with
//! ([`plan_id`]), and `k8s` parsing the run arguments with the real `run`
//! parser ([`parse_run`]) so credentials go to a Secret and files into the
//! ConfigMap ([`bundle_run`](k8s_cmd::bundle_run)).
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

mod agent_cmd;
mod coordinate;
mod fetch;
mod k8s_cmd;
mod run_args;
mod token_plan_id;
use agent_cmd::cmd_agent;
use coordinate::{cmd_coordinate, MAX_LINGER};
use fetch::cmd_fetch;
#[cfg(test)]
use k8s_cmd::{bundle_run, Bundle};
use k8s_cmd::{cmd_k8s, cmd_k8s_pod};
use run_args::{parse_run, render_run, secret_header, secret_url, RunArg};
use token_plan_id::{plan_id, read_bounded, resolve_token};

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

#[cfg(test)]
mod tests;
