//! Command-line parsing (syntax only) and the commands that drive the library crates.
//!
//! Exit codes: 0 success; 1 runtime failure (the engine could not run, output
//! could not be written); 2 usage error (bad flag, URL, header, unreadable
//! file, unresolvable host); 3 findings at `--fail-on` (audit, tune); 4 a
//! `--threshold` failed; 130 interrupted (Ctrl-C; the report is still printed).

use clap::{Args, Parser, Subcommand, ValueEnum};
use redline_engine::{parse_duration, Arrival, Plan, PlanArgs, Snapshot, StopHandle};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: runtime failure.
pub const EXIT_RUNTIME: i32 = 1;
/// Exit code: usage error.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: a `--threshold` did not hold.
pub const EXIT_THRESHOLD: i32 = 4;
/// Exit code: interrupted by Ctrl-C.
pub const EXIT_INTERRUPTED: i32 = 130;

const AFTER_HELP: &str = "\
Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 findings (audit/tune --fail-on),
4 a --threshold failed, 130 interrupted (report still printed).
Aim redline only at servers you own or are allowed to test.";

#[derive(Parser, Debug)]
#[command(
    name = "redline",
    version,
    about = "Load-test a web server honestly: how much it takes, where it breaks, and whether tuning helped.",
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Benchmark a URL (closed loop with -c/-n/-d, open loop with -r). `redline URL` is short for this.
    Run(Box<RunArgs>),
    /// Start the built-in target server (behaviour per request: /?size=440&delay=10ms&status=404&chunked=1&close=1).
    Serve(ServeArgs),
    /// Start the built-in target on 127.0.0.1 and run a short benchmark against it.
    Demo(DemoArgs),
    /// Search the highest arrival rate meeting an SLO, e.g. --slo 'p99<200ms,errors<1%'.
    Find(Box<crate::cmd_find::FindArgs>),
    #[command(flatten)]
    History(crate::cmd_history::HistoryCmd),
    #[command(flatten)]
    Web(crate::cmd_web::WebCmd),
    #[command(flatten)]
    Server(crate::cmd_server::ServerCmd),
    #[command(flatten)]
    Dist(crate::cmd_dist::DistCmd),
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum Output {
    Text,
    Json,
    Csv,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Target URL (http://host[:port]/path); the scheme may be left out. With
    /// --scenario it replaces the scenario's base URL.
    #[arg(required_unless_present = "scenario")]
    url: Option<String>,
    /// Run a scenario file (TOML): several named requests, round-robin, weighted or
    /// as sessions with think time, cookies, extracted values, CSV data and checks.
    #[arg(long, value_name = "FILE")]
    scenario: Option<std::path::PathBuf>,
    /// Let a scenario read body and data files outside its own folder.
    #[arg(long = "allow-paths", requires = "scenario")]
    allow_paths: bool,
    /// Connections (closed loop; default 50) or the connection cap (open loop; default 1000).
    #[arg(short = 'c', long = "connections", value_name = "N")]
    connections: Option<u64>,
    /// Total requests to send.
    #[arg(short = 'n', long = "requests", value_name = "N")]
    requests: Option<u64>,
    /// How long to send, e.g. 30s, 2m (default 10s when -n is not given).
    #[arg(short = 'd', long = "duration", value_name = "DURATION", value_parser = dur)]
    duration: Option<Duration>,
    /// Worker threads (default: the number of cores).
    #[arg(short = 't', long = "threads", value_name = "N")]
    threads: Option<usize>,
    /// Open loop: requests per second, sent on schedule whatever the server does.
    #[arg(short = 'r', long = "rate", value_name = "REQ/S")]
    rate: Option<f64>,
    /// Open loop: spacing of send times.
    #[arg(long, value_name = "MODEL", default_value = "constant", value_parser = arrival)]
    arrival: Arrival,
    /// Open a new connection for every request (ab without -k).
    #[arg(long = "no-keepalive")]
    no_keepalive: bool,
    /// Accepted for ab users: keep-alive is already the default.
    #[arg(short = 'k', long = "keepalive", hide = true)]
    _keepalive: bool,
    /// Close and reopen a connection after N requests (httperf --num-calls).
    #[arg(long = "requests-per-conn", value_name = "N")]
    requests_per_conn: Option<u64>,
    /// HTTP method (default GET, or POST when a body is given).
    #[arg(short = 'm', long = "method", value_name = "METHOD")]
    method: Option<String>,
    /// Extra request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// Request body.
    #[arg(
        short = 'b',
        long = "body",
        value_name = "STRING",
        conflicts_with = "body_file"
    )]
    body: Option<String>,
    /// Request body read from a file.
    #[arg(long = "body-file", value_name = "FILE")]
    body_file: Option<std::path::PathBuf>,
    /// Content-Type of the body.
    #[arg(short = 'T', long = "content-type", value_name = "TYPE")]
    content_type: Option<String>,
    /// Basic authentication, user:password (never printed).
    #[arg(short = 'a', long = "basic-auth", value_name = "USER:PASS")]
    basic_auth: Option<String>,
    /// Per-request timeout.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = dur)]
    timeout: Duration,
    /// Connect timeout.
    #[arg(long = "connect-timeout", value_name = "DURATION", default_value = "10s", value_parser = dur)]
    connect_timeout: Duration,
    /// Speak HTTP/1.0 (keep-alive via Connection: keep-alive, as ab does).
    #[arg(long = "http1.0")]
    http10: bool,
    /// https: do not verify the server's certificate (the report says so).
    #[arg(long)]
    insecure: bool,
    /// https: also trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    cacert: Option<std::path::PathBuf>,
    /// https: client certificate chain (PEM), with --key.
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<std::path::PathBuf>,
    /// https: client private key (PEM), with --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<std::path::PathBuf>,
    /// HTTP/2 over TLS, negotiated by ALPN; fails if the server does not offer h2
    /// (without it or --http1.1, an https run uses HTTP/2 when the server picks it).
    #[arg(long = "http2", conflicts_with = "h2c")]
    http2: bool,
    /// https: speak HTTP/1.1 even when the server offers HTTP/2 (curl's flag).
    #[arg(long = "http1.1", conflicts_with_all = ["http2", "h2c", "http10"])]
    http11: bool,
    /// Follow redirects (301, 302, 303, 307, 308) like curl -L: a request's
    /// latency and status are its final response's; credentials never go to another origin.
    #[arg(short = 'L', long = "follow-redirects")]
    follow_redirects: bool,
    /// With -L: the most redirects per request (default 10); one more is the error too_many_redirects.
    #[arg(long = "max-redirs", value_name = "N", requires = "follow_redirects")]
    max_redirs: Option<u32>,
    /// HTTP/2 over cleartext with prior knowledge (http:// URLs).
    #[arg(long = "h2c")]
    h2c: bool,
    /// HTTP/2: concurrent streams per connection (default 1, like h2load -m).
    #[arg(long = "streams", value_name = "N")]
    streams: Option<u32>,
    /// Seed for poisson/uniform arrivals (repeatable schedules).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Pass/fail bound checked at the end, e.g. 'p99<250ms', 'errors<0.1%', 'rps>1000'
    /// (repeatable); any failure exits with code 4.
    #[arg(long = "threshold", value_name = "EXPR", value_parser = threshold)]
    thresholds: Vec<redline_report::thresholds::Threshold>,
    /// Run the same plan N times, each saved under the same label with its repeat
    /// index in the note (`compare` of two labels with several runs each tests the
    /// runs as samples); Ctrl-C or an --abort-on-fail abort ends the series.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: Option<u32>,
    /// With --repeat: a second target B, run alternately with the URL (A B A B …);
    /// --label names A's runs and --vs-label B's; the end compares A with B.
    #[arg(long = "vs", value_name = "URL", requires = "repeat")]
    vs: Option<String>,
    /// With --vs: the label of B's runs.
    #[arg(long = "vs-label", value_name = "LABEL", requires = "vs")]
    vs_label: Option<String>,
    /// With --repeat: pause between runs, e.g. 2s.
    #[arg(long, value_name = "DURATION", requires = "repeat", value_parser = dur)]
    pause: Option<Duration>,
    #[command(flatten)]
    stages: StageFlags,
    #[command(flatten)]
    dist: crate::cmd_dist::RunDistArgs,
    #[command(flatten)]
    out: OutArgs,
    #[command(flatten)]
    save: crate::cmd_history::RunSaveArgs,
    #[command(flatten)]
    watch: crate::cmd_server::RunWatchArgs,
}

/// Load stages and early abort (see the README section "Load stages").
#[derive(Args, Debug)]
struct StageFlags {
    /// Load stages, DURATION:LEVEL pairs, e.g. 30s:10,60s:10,30s:70: the level
    /// (connections; req/s with --rate-stages) ramps linearly from the previous
    /// stage's (0 at the start); the run lasts the stages' sum.
    #[arg(long, value_name = "STAGES")]
    stages: Option<String>,
    /// With --stages: the levels are requests/s, sent in open loop.
    #[arg(long = "rate-stages", requires = "stages")]
    rate_stages: bool,
    /// With --stages: stair steps (the level jumps at each stage's start and holds).
    #[arg(long, requires = "stages")]
    step: bool,
    /// With --threshold: stop the run early, exit code 4, once a threshold can no longer pass.
    #[arg(long = "abort-on-fail", requires = "thresholds")]
    abort_on_fail: bool,
}

impl StageFlags {
    fn plan_args(&self) -> Result<Option<redline_engine::plan::StageArgs>, String> {
        let Some(s) = &self.stages else {
            return Ok(None);
        };
        Ok(Some(redline_engine::plan::StageArgs {
            stages: redline_engine::pacer::parse_stages(s)?,
            rate: self.rate_stages,
            step: self.step,
        }))
    }
}

/// What `run` does around the engine: watching the server, saving the run.
#[derive(Default)]
struct Hooks {
    save: crate::cmd_history::RunSaveArgs,
    watch: crate::cmd_server::RunWatchArgs,
    thresholds: Vec<redline_report::thresholds::Threshold>,
    /// Scenario runs: thresholds on one named request's own numbers.
    request_thresholds: Vec<(String, Vec<redline_report::thresholds::Threshold>)>,
    abort_on_fail: bool,
    /// `--start-at`: when the run starts.
    start_at: Option<std::time::SystemTime>,
    /// `--live-seconds FILE` (agents): each finished second's histogram.
    live_seconds: Option<std::path::PathBuf>,
    /// `--repeat --vs`: every finished run record is kept here, for the
    /// comparison at the end.
    kept: Option<std::cell::RefCell<Vec<redline_stats::RunRecord>>>,
}

#[derive(Args, Debug)]
struct OutArgs {
    /// Report format: text, json (the versioned run record), or csv (the per-second series).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FORMAT",
        default_value = "text"
    )]
    output: Output,
    /// No progress line.
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// Port to listen on (0: any free port, printed at start).
    #[arg(short = 'p', long, default_value_t = 8080)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: std::net::IpAddr,
    /// Server threads (0: the number of cores).
    #[arg(short = 't', long, default_value_t = 0)]
    threads: usize,
}

#[derive(Args, Debug)]
struct DemoArgs {
    /// How long the benchmark runs.
    #[arg(short = 'd', long, default_value = "5s", value_parser = dur)]
    duration: Duration,
    /// Connections.
    #[arg(short = 'c', long, default_value_t = 32)]
    connections: u64,
    #[command(flatten)]
    out: OutArgs,
}

fn dur(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

fn arrival(s: &str) -> Result<Arrival, String> {
    s.parse()
}

fn threshold(s: &str) -> Result<redline_report::thresholds::Threshold, String> {
    s.parse()
}

/// `redline URL …` and `redline -c 10 URL` mean `redline run …`.
fn normalize_args(mut args: Vec<String>) -> Vec<String> {
    use clap::CommandFactory;
    if let Some(first) = args.get(1) {
        let is_meta = matches!(first.as_str(), "-h" | "--help" | "-V" | "--version");
        let cmd = Cli::command();
        let is_sub = first == "help"
            || cmd
                .get_subcommands()
                .any(|c| c.get_name() == first || c.get_all_aliases().any(|a| a == first));
        if !is_meta && !is_sub {
            args.insert(1, "run".into());
        }
    }
    args
}

static INTERRUPTS: AtomicU32 = AtomicU32::new(0);
static STOP: OnceLock<Arc<StopHandle>> = OnceLock::new();

/// The stop handle Ctrl-C triggers.
pub(crate) fn stop_handle() -> Arc<StopHandle> {
    STOP.get_or_init(StopHandle::new).clone()
}

pub(crate) fn install_ctrlc() {
    let stop = STOP.get_or_init(StopHandle::new).clone();
    let _ = ctrlc::set_handler(move || {
        if INTERRUPTS.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("\nredline: stopping (in-flight requests get up to 1 s); Ctrl-C again to quit at once");
            stop.stop();
        } else {
            std::process::exit(EXIT_INTERRUPTED);
        }
    });
}

/// Prints a one-line error and returns the exit code.
pub fn fail(code: i32, msg: impl std::fmt::Display) -> i32 {
    eprintln!("redline: error: {msg}");
    code
}

/// Entry point; returns the process exit code.
pub fn main() -> i32 {
    let args = normalize_args(std::env::args().collect());
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let _ = e.print();
            return code;
        }
    };
    match cli.cmd {
        Command::Run(a) => cmd_run(*a),
        Command::Serve(a) => cmd_serve(a),
        Command::Demo(a) => cmd_demo(a),
        Command::Find(a) => crate::cmd_find::run(*a),
        Command::History(c) => crate::cmd_history::dispatch(c),
        Command::Web(c) => crate::cmd_web::dispatch(c),
        Command::Server(c) => crate::cmd_server::dispatch(c),
        Command::Dist(c) => crate::cmd_dist::dispatch(c),
    }
}

fn cmd_run(a: RunArgs) -> i32 {
    let body = match (&a.body, &a.body_file) {
        (Some(b), _) => Some(b.clone().into_bytes()),
        (None, Some(p)) => match std::fs::read(p) {
            Ok(b) => Some(b),
            Err(e) => {
                return fail(
                    EXIT_USAGE,
                    format!("cannot read --body-file {}: {e}", p.display()),
                )
            }
        },
        (None, None) => None,
    };
    if a.scenario.is_some() && (a.body.is_some() || a.body_file.is_some() || a.method.is_some()) {
        return fail(
            EXIT_USAGE,
            "-m/-b/--body-file do not go with --scenario: give method and body per request in the file",
        );
    }
    let stages = match a.stages.plan_args() {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let (segment, start_at) = match a.dist.resolve() {
        Ok(x) => x,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let pa = PlanArgs {
        segment,
        url: a.url.unwrap_or_default(),
        scenario: a.scenario.map(|p| (p, a.allow_paths)),
        method: a.method,
        headers: a.headers,
        body,
        content_type: a.content_type,
        basic_auth: a.basic_auth,
        connections: a.connections,
        requests: a.requests,
        duration: a.duration,
        rate: a.rate,
        arrival: a.arrival,
        threads: a.threads,
        keepalive: !a.no_keepalive,
        requests_per_conn: a.requests_per_conn,
        timeout: a.timeout,
        connect_timeout: a.connect_timeout,
        http10: a.http10,
        seed: a.seed,
        tls: redline_engine::tls::TlsArgs {
            insecure: a.insecure,
            cacert: a.cacert,
            cert: a.cert,
            key: a.key,
        },
        stages,
        http2: a.http2,
        h2c: a.h2c,
        streams: a.streams,
        http11: a.http11,
        follow_redirects: a.follow_redirects,
        max_redirs: a.max_redirs,
    };
    let pa_vs = a.vs.clone().map(|url| PlanArgs { url, ..pa.clone() });
    let mut plan = match Plan::build(pa) {
        Ok(p) => p,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    // https without --http2/--http1.1: HTTP/2 when the server picks it by ALPN.
    if let Some(note) = redline_engine::alpn::negotiate(&mut plan) {
        eprintln!("redline: note: {note}");
    }
    let plan_vs = match pa_vs.map(Plan::build).transpose() {
        Ok(Some(mut p)) => {
            if let Some(note) = redline_engine::alpn::negotiate(&mut p) {
                eprintln!("redline: note (--vs): {note}");
            }
            Some(p)
        }
        Ok(None) => None,
        Err(e) => return fail(EXIT_USAGE, format!("--vs: {e}")),
    };
    let mut thresholds = a.thresholds;
    let mut request_thresholds = Vec::new();
    if let Some(sc) = &plan.scenario {
        // Errors name the file, the line of the entry and whose it is.
        let parse = |t: &String, request: Option<usize>, i: usize| {
            t.parse::<redline_report::thresholds::Threshold>()
                .map_err(|e| format!("{}: {e}", sc.threshold_place(request, i)))
        };
        for (i, t) in sc.thresholds.iter().enumerate() {
            match parse(t, None, i) {
                Ok(t) => thresholds.push(t),
                Err(e) => return fail(EXIT_USAGE, e),
            }
        }
        for (n, r) in sc.requests.iter().enumerate() {
            let mut v = Vec::new();
            for (i, t) in r.thresholds.iter().enumerate() {
                match parse(t, Some(n), i) {
                    Ok(t) => v.push(t),
                    Err(e) => return fail(EXIT_USAGE, e),
                }
            }
            if !v.is_empty() {
                request_thresholds.push((r.name.clone(), v));
            }
        }
    }
    let hooks = Hooks {
        save: a.save,
        watch: a.watch,
        thresholds,
        request_thresholds,
        abort_on_fail: a.stages.abort_on_fail,
        start_at,
        live_seconds: a.dist.live_seconds.clone(),
        kept: None,
    };
    match a.repeat {
        None => run_plan(&plan, &a.out, &hooks),
        Some(n) => {
            let rep = crate::cmd_history::Repeat {
                n,
                pause: a.pause,
                vs_label: a.vs_label,
            };
            run_repeated(&plan, plan_vs.as_ref(), rep, &a.out, hooks)
        }
    }
}

/// `--repeat N` (and `--vs URL`): the plan N times, or A and B alternately N
/// times each; with --vs, the runs of A compared with the runs of B at the end.
fn run_repeated(
    plan: &Plan,
    vs: Option<&Plan>,
    rep: crate::cmd_history::Repeat,
    out: &OutArgs,
    mut hooks: Hooks,
) -> i32 {
    if hooks.start_at.is_some() || plan.segment.is_some() {
        return fail(
            EXIT_USAGE,
            "--repeat does not go with --segment or --start-at (a distributed run is one run)",
        );
    }
    let sides = match crate::cmd_history::repeat_sides(&hooks.save, &rep, vs.is_some()) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if vs.is_some() {
        hooks.kept = Some(Default::default());
    }
    let base = hooks.save.clone();
    let total = rep.n as usize * sides.len();
    let mut code = EXIT_OK;
    let mut k = 0;
    // Which side each kept record is (a run that could not start keeps none).
    let mut kept_side: Vec<usize> = Vec::new();
    'runs: for i in 1..=rep.n {
        for (s, side) in sides.iter().enumerate() {
            k += 1;
            if k > 1 {
                if let Some(p) = rep.pause {
                    // Interruptible: Ctrl-C during the pause ends the series.
                    let until = std::time::Instant::now() + p;
                    while std::time::Instant::now() < until && !stop_handle().is_stopped() {
                        std::thread::sleep(Duration::from_millis(50).min(p));
                    }
                }
                if stop_handle().is_stopped() {
                    break 'runs;
                }
            }
            hooks.save = crate::cmd_history::repeat_save(&base, side, i, rep.n, &sides);
            if !out.quiet {
                eprintln!(
                    "redline: run {k} of {total}{}",
                    side.label
                        .as_deref()
                        .map(|l| format!(" ({l}, repeat {i} of {})", rep.n))
                        .unwrap_or_else(|| format!(" (repeat {i} of {})", rep.n))
                );
            }
            let before = hooks.kept.as_ref().map_or(0, |k| k.borrow().len());
            let c = run_plan(if s == 0 { plan } else { vs.unwrap_or(plan) }, out, &hooks);
            if hooks.kept.as_ref().map_or(0, |k| k.borrow().len()) > before {
                kept_side.push(s);
            }
            if code == EXIT_OK {
                code = c;
            }
            // Ctrl-C or an --abort-on-fail abort: no further runs.
            if stop_handle().is_stopped() {
                code = c;
                break 'runs;
            }
        }
    }
    if let Some(kept) = hooks.kept.take() {
        let kept = kept.into_inner();
        let lab = |i: usize| {
            sides[i]
                .label
                .clone()
                .unwrap_or_else(|| ["A", "B"][i].into())
        };
        let (a, b): (Vec<_>, Vec<_>) = kept
            .into_iter()
            .zip(kept_side)
            .partition(|(_, side)| *side == 0);
        let a: Vec<_> = a.into_iter().map(|x| x.0).collect();
        let b: Vec<_> = b.into_iter().map(|x| x.0).collect();
        if let (Some(la), Some(lb)) = (a.last(), b.last()) {
            let c = redline_report::compare::compare_runs(&a, &b);
            let t = redline_report::compare::text(
                &c,
                la,
                lb,
                &format!("{}, {} runs", lab(0), a.len()),
                &format!("{}, {} runs", lab(1), b.len()),
            );
            // With JSON or CSV on stdout, the comparison goes to stderr.
            if out.output == Output::Text {
                println!("\n{t}");
            } else {
                eprintln!("\n{t}");
            }
        }
    }
    code
}

fn run_plan(plan: &Plan, out: &OutArgs, hooks: &Hooks) -> i32 {
    // First, while the process has one thread (growing the descriptor table
    // later waits for an RCU grace period per growth).
    let _ = redline_engine::run::prepare_fds(plan);
    let watch = match crate::cmd_server::before_run(&hooks.watch) {
        Ok(w) => w,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let mut live = match crate::cmd_history::LiveSink::open(&hooks.save) {
        Ok(l) => l,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let mut seconds = match hooks
        .live_seconds
        .as_deref()
        .map(crate::cmd_dist::SecondsSink::open)
        .transpose()
    {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    install_ctrlc();
    let stop = stop_handle();
    let scheduled = match hooks.start_at {
        Some(at) => match crate::cmd_dist::wait_for_start(at, &stop, out.quiet) {
            Some(s) => Some(s),
            None => return EXIT_INTERRUPTED,
        },
        None => None,
    };
    let show_progress = !out.quiet && std::io::stderr().is_terminal();
    let mut last: Option<Snapshot> = None;
    let mut last_print = Duration::ZERO;
    let mut aborted: Option<String> = None;
    let (planned_requests, planned_duration_s) = match &plan.load {
        redline_engine::Load::Closed {
            requests, duration, ..
        }
        | redline_engine::Load::Open {
            requests, duration, ..
        } => (*requests, duration.map(|d| d.as_secs_f64())),
    };
    // --abort-on-fail: requests unanswered longer than each threshold's age
    // count as unanswered (report::thresholds::overdue_age).
    let timeout = plan.timeout;
    let age_of = move |t: &redline_report::thresholds::Threshold| {
        redline_report::thresholds::overdue_age(t, timeout)
    };
    let mut ages: Vec<Duration> = Vec::new();
    if hooks.abort_on_fail {
        ages = hooks.thresholds.iter().filter_map(age_of).collect();
        ages.sort();
        ages.dedup();
    }
    let result = redline_engine::execute_watching(plan, &stop, &ages, |s, series, overdue| {
        if let Some(l) = live.as_mut() {
            l.snapshot(s);
        }
        if let Some(l) = seconds.as_mut() {
            l.push(s.elapsed, series);
        }
        if hooks.abort_on_fail && aborted.is_none() {
            let so_far = redline_report::thresholds::SoFar {
                elapsed_s: s.elapsed.as_secs_f64(),
                failed: s.failed,
                series,
                planned_requests,
                planned_duration_s,
            };
            let unanswered = |t: &redline_report::thresholds::Threshold| {
                age_of(t)
                    .and_then(|a| ages.iter().position(|x| *x == a))
                    .and_then(|k| overdue.get(k).copied())
                    .unwrap_or(0)
            };
            if let Some(why) = redline_report::thresholds::hopeless_counting(
                &hooks.thresholds,
                &so_far,
                unanswered,
            ) {
                aborted = Some(why);
                // The same path as Ctrl-C: sending stops, in-flight requests get the grace.
                stop.stop();
            }
        }
        if !show_progress || s.elapsed < last_print + Duration::from_millis(500) {
            return;
        }
        let rate = match last {
            Some(p) if s.elapsed > p.elapsed => {
                (s.completed - p.completed) as f64 / (s.elapsed - p.elapsed).as_secs_f64()
            }
            _ => 0.0,
        };
        eprint!(
            "\r\x1b[K[{:>6.1}s] {:>10.0} req/s now, {} done, {} errors, {} open",
            s.elapsed.as_secs_f64(),
            rate,
            redline_report::count(s.completed),
            redline_report::count(s.failed),
            s.open
        );
        last = Some(*s);
        last_print = s.elapsed;
    });
    if show_progress {
        eprint!("\r\x1b[K");
    }
    let mut rec = match result {
        Ok(r) => r,
        Err(e) => return fail(EXIT_RUNTIME, e),
    };
    if let Some(why) = &aborted {
        rec.warn("aborted", format!("aborted: {why}"));
    }
    rec.scheduled_start = scheduled;
    if let Some(l) = seconds {
        l.finish(&rec.series);
    }
    crate::cmd_server::after_run(watch, &mut rec);
    match crate::cmd_history::after_run(&hooks.save, &mut rec) {
        Ok(lines) => {
            for l in lines {
                eprintln!("{l}");
            }
        }
        Err(e) => {
            // The report is still printed: results are never lost.
            eprintln!("redline: error: {e}");
        }
    }
    if let Some(k) = &hooks.kept {
        k.borrow_mut().push(rec.clone());
    }
    let mut outcomes = redline_report::thresholds::check(&rec, &hooks.thresholds);
    for (name, ts) in &hooks.request_thresholds {
        if let Some(r) = rec.requests.iter().find(|r| &r.name == name) {
            outcomes.extend(redline_report::thresholds::check_request(&rec, r, ts));
        }
    }
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    let written = match out.output {
        Output::Text => {
            let mut t = redline_report::text(&rec);
            if !outcomes.is_empty() {
                t.push_str("\nThresholds:\n");
                for o in &outcomes {
                    t.push_str(&format!("  {o}\n"));
                }
            }
            stdout.write_all(t.as_bytes())
        }
        Output::Json => redline_report::write_json(&rec, &mut stdout),
        Output::Csv => stdout.write_all(redline_report::csv::series(&rec).as_bytes()),
    };
    if let Err(e) = written.and_then(|_| stdout.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return fail(EXIT_RUNTIME, format!("cannot write the report: {e}"));
        }
    }
    drop(stdout);
    // With JSON or CSV on stdout, the PASS/FAIL lines go to stderr.
    if out.output != Output::Text {
        for o in &outcomes {
            eprintln!("threshold {o}");
        }
    }
    let c = &rec.counters;
    if aborted.is_some() {
        EXIT_THRESHOLD
    } else if rec.interrupted {
        EXIT_INTERRUPTED
    } else if outcomes.iter().any(|o| !o.pass) {
        EXIT_THRESHOLD
    } else if c.scheduled > 0 && c.completed == 0 {
        // The report above says why; a script must not read this as a pass.
        fail(
            EXIT_RUNTIME,
            format!(
                "no request was answered ({} failed, {} unanswered)",
                c.failed,
                c.in_flight_at_end + c.not_sent
            ),
        )
    } else {
        EXIT_OK
    }
}

fn cmd_serve(a: ServeArgs) -> i32 {
    let cfg = redline_serve::ServeConfig {
        addr: std::net::SocketAddr::new(a.host, a.port),
        threads: a.threads,
    };
    let r = redline_serve::run_forever(cfg, |addr| {
        println!("redline serve: listening on http://{addr}/");
        println!("  try /?size=440&delay=10ms&status=404&chunked=1&close=1, /__stats, /__stall?for=500ms");
        let _ = std::io::stdout().flush();
    });
    match r {
        Ok(()) => EXIT_OK,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => fail(
            EXIT_USAGE,
            format!(
                "cannot listen on {}:{}: address in use (try --port 0)",
                a.host, a.port
            ),
        ),
        Err(e) => fail(EXIT_RUNTIME, format!("cannot serve: {e}")),
    }
}

fn cmd_demo(a: DemoArgs) -> i32 {
    let server = match redline_serve::Server::start(redline_serve::ServeConfig {
        addr: "127.0.0.1:0".parse().expect("literal address"),
        threads: 1,
    }) {
        Ok(s) => s,
        Err(e) => {
            return fail(
                EXIT_RUNTIME,
                format!("cannot start the built-in target: {e}"),
            )
        }
    };
    let url = format!("http://{}/?size=440", server.local_addr());
    if a.out.output == Output::Text {
        println!(
            "redline demo: built-in target on {url}\n  \
             closed loop, {} connections, {:?}, 1 client thread (the other core serves)\n",
            a.connections, a.duration
        );
    }
    let mut pa = PlanArgs::new(url);
    pa.connections = Some(a.connections);
    pa.duration = Some(a.duration);
    pa.threads = Some(1);
    let plan = match Plan::build(pa) {
        Ok(p) => p,
        Err(e) => return fail(EXIT_RUNTIME, e),
    };
    let code = run_plan(&plan, &a.out, &Hooks::default());
    if a.out.output == Output::Text {
        let st = server.stats();
        println!(
            "\nThe built-in target saw {} requests on {} connections.",
            redline_report::count(st.requests),
            redline_report::count(st.connections)
        );
    }
    server.shutdown();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorthand_inserts_run() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(normalize_args(v(&["redline", "http://x/"]))[1], "run");
        assert_eq!(normalize_args(v(&["redline", "-c", "3", "x"]))[1], "run");
        assert_eq!(normalize_args(v(&["redline", "serve"]))[1], "serve");
        assert_eq!(normalize_args(v(&["redline", "--help"]))[1], "--help");
        assert_eq!(normalize_args(v(&["redline", "demo"]))[1], "demo");
    }
}
