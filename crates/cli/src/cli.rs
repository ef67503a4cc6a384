//! Command-line parsing (syntax only) and the commands that drive the library crates.
//!
//! Exit codes: the [`Exit`] enum (crates/cli/src/exit.rs).

use crate::exit::{fail, Exit};
use crate::flags::{
    ConnectionArgs, LoadArgs, OutArgs, Output, ProtocolArgs, RequestArgs, ThresholdArgs,
};
use clap::{Args, Parser, Subcommand};
use redline_engine::{parse_duration, Plan, PlanArgs, Snapshot, StopHandle};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The text under `--help`: the exit codes (from [`Exit`]) and the one rule.
fn after_help() -> String {
    format!(
        "{}\nAim redline only at servers you own or are allowed to test.",
        Exit::help_line()
    )
}

#[derive(Parser, Debug)]
#[command(
    name = "redline",
    version,
    about = "Load-test a web server honestly: how much it takes, where it breaks, and whether tuning helped.",
    after_help = after_help(),
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
    /// Replay an access log's requests at their logged times (or --speed 2x, --rate R) against BASE_URL.
    Replay(Box<crate::cmd_replay::ReplayArgs>),
    /// Turn a recording into a scenario: `redline import har FILE.har > scenario.toml`.
    #[command(subcommand)]
    Import(crate::cmd_import::ImportCmd),
    /// Drop-in for ApacheBench: ab's flags and ab's report, measured by redline (`redline ab -h`).
    #[command(disable_help_flag = true)]
    Ab(DropinArgs),
    /// Drop-in for wrk: wrk's flags and wrk's summary, measured by redline (`redline wrk -h`).
    #[command(disable_help_flag = true)]
    Wrk(DropinArgs),
}

/// A drop-in's arguments, parsed by the drop-in itself (ab's and wrk's own syntax).
#[derive(Args, Debug)]
struct DropinArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<String>,
}

/// `redline run`: the target, then the shared flag groups (crate::flags).
#[derive(Args, Debug, Clone)]
pub(crate) struct RunArgs {
    /// Target URL (http://host[:port]/path); the scheme may be left out. With
    /// --scenario it replaces the scenario's base URL; with --urls it is the
    /// base of the list's paths.
    #[arg(required_unless_present_any = ["scenario", "urls"])]
    url: Option<String>,
    /// Run a scenario file (TOML): several named requests, round-robin, weighted or
    /// as sessions with think time, cookies, extracted values, CSV data and checks.
    #[arg(long, value_name = "FILE")]
    scenario: Option<std::path::PathBuf>,
    /// Let a scenario (or --urls list) read body and data files outside its own folder.
    #[arg(long = "allow-paths")]
    allow_paths: bool,
    /// A list of targets, one per line: `METHOD URL` (vegeta's format: `Name: value`
    /// header lines and an `@FILE` body may follow) or a bare URL; per-URL numbers in the report.
    #[arg(long = "urls", value_name = "FILE", conflicts_with = "scenario")]
    urls: Option<std::path::PathBuf>,
    /// With --urls: round-robin (the list's order, default) or random (--seed repeats it).
    #[arg(long = "urls-order", value_name = "ORDER", requires = "urls", value_parser = urls_order)]
    urls_order: Option<redline_engine::urls::Order>,
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
    request: RequestArgs,
    #[command(flatten)]
    protocol: ProtocolArgs,
    #[command(flatten)]
    conn: ConnectionArgs,
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    thresholds: ThresholdArgs,
    #[command(flatten)]
    dist: crate::cmd_dist::RunDistArgs,
    #[command(flatten)]
    out: OutArgs,
    #[command(flatten)]
    save: crate::cmd_history::RunSaveArgs,
    #[command(flatten)]
    watch: crate::cmd_server::RunWatchArgs,
    #[command(flatten)]
    metrics: crate::flags::MetricsArgs,
}

impl RunArgs {
    /// The plan's arguments, without the `--segment` (Err: a usage error).
    fn plan_args(&self) -> Result<PlanArgs, String> {
        let r = &self.request;
        if self.scenario.is_some()
            && (r.body.is_some() || r.body_file.is_some() || r.method.is_some())
        {
            return Err("-m/-b/--body-file do not go with --scenario: give method and body per request in the file".into());
        }
        if self.urls.is_some() && (r.body.is_some() || r.body_file.is_some() || r.method.is_some())
        {
            return Err("-m/-b/--body-file do not go with --urls: give `METHOD URL` and `@FILE` per target in the list".into());
        }
        if self.allow_paths && self.scenario.is_none() && self.urls.is_none() {
            return Err("--allow-paths goes with --scenario or --urls".into());
        }
        let mut pa = crate::flags::plan_args(
            self.url.clone().unwrap_or_default(),
            r,
            &self.protocol,
            &self.conn,
        )?;
        self.load.apply(&mut pa)?;
        pa.scenario = self.scenario.clone().map(|p| (p, self.allow_paths));
        pa.urls = self
            .urls
            .clone()
            .map(|p| (p, self.urls_order.unwrap_or_default(), self.allow_paths));
        Ok(pa)
    }
}

/// The flags of the hidden `run` parser the agent uses: `run`'s own.
#[derive(Parser, Debug)]
#[command(name = "redline run", no_binary_name = true)]
struct RunOnly {
    #[command(flatten)]
    run: RunArgs,
}

/// The arguments of `run` the agent sets itself, refused in its run arguments
/// (clap ids).
const AGENT_OWN: &[(&str, &str)] = &[
    ("output", "-o/--output"),
    ("quiet", "-q/--quiet"),
    ("html", "--html"),
    ("live_json", "--live-json"),
    ("live_seconds", "--live-seconds"),
    ("segment", "--segment"),
    ("segment_sequence", "--segment-sequence"),
    ("start_at", "--start-at"),
];

/// What the agent learns from the run's arguments: the plan of its share,
/// built by the same parser and plan builder as `run` (so a scenario's
/// `[load]` and `--stages` count), and whether `--abort-on-fail` was given.
pub(crate) struct AgentRun {
    /// This agent's share of the run.
    pub plan: Plan,
    /// `--abort-on-fail` was among the run arguments.
    pub abort_on_fail: bool,
}

/// Parses `redline run` arguments as `run` does and builds the plan of
/// `segment` (Err: a usage error, one line).
pub(crate) fn agent_run(
    args: &[String],
    segment: redline_stats::segment::Segment,
) -> Result<AgentRun, String> {
    use clap::{CommandFactory, FromArgMatches};
    let matches = RunOnly::command().try_get_matches_from(args).map_err(|e| {
        let text = e.to_string();
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        format!("run arguments: {}", first.trim_start_matches("error: "))
    })?;
    for (id, flag) in AGENT_OWN {
        if matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
            return Err(format!(
                "{flag}: the agent sets it itself; leave it out of the run arguments"
            ));
        }
    }
    let run = RunOnly::from_arg_matches(&matches)
        .map_err(|e| format!("run arguments: {e}"))?
        .run;
    let mut pa = run.plan_args()?;
    pa.segment = Some(segment);
    let plan = Plan::build(pa).map_err(|e| e.to_string())?;
    Ok(AgentRun {
        plan,
        abort_on_fail: run.thresholds.abort_on_fail,
    })
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
    /// A drop-in's own text report (`redline ab`, `redline wrk`) instead of redline's.
    report: Option<TextReport>,
    /// A drop-in's own progress lines (ab's "Completed N requests"), from each snapshot.
    progress: Option<Progress>,
    /// `--repeat --vs`: every finished run record is kept here, for the
    /// comparison at the end.
    kept: Option<std::cell::RefCell<Vec<redline_stats::RunRecord>>>,
    /// `--metrics-listen`, `--prometheus-rw`, `--otlp`.
    metrics: Option<redline_metrics::Config>,
    /// Adds to the record before it is reported (`redline replay`: the log's summary).
    annotate: Option<Annotate>,
}

/// A command's addition to the run record, before any report reads it.
pub(crate) type Annotate = Box<dyn Fn(&mut redline_stats::RunRecord)>;

/// Runs a plan a command built itself (`redline replay`) on the normal run
/// path: redline's report in any `-o` format, thresholds; nothing saved.
pub(crate) fn run_built(
    plan: &Plan,
    out: &OutArgs,
    thresholds: Vec<redline_report::thresholds::Threshold>,
    abort_on_fail: bool,
    annotate: Annotate,
) -> Exit {
    let hooks = Hooks {
        thresholds,
        abort_on_fail,
        annotate: Some(annotate),
        ..Default::default()
    };
    run_plan(plan, out, &hooks)
}

/// A drop-in's progress: called with each live snapshot.
pub(crate) type Progress = Box<dyn Fn(&Snapshot)>;

/// A drop-in's text report: the run record in, the text for stdout out (or
/// an error line, exit code 1).
pub(crate) type TextReport = Box<dyn Fn(&redline_stats::RunRecord) -> Result<String, String>>;

/// Runs a drop-in's plan (`redline ab`, `redline wrk`) on the normal run path,
/// printing `report`'s text instead of redline's report; nothing is saved.
pub(crate) fn run_dropin(plan: &Plan, report: TextReport, progress: Option<Progress>) -> Exit {
    let out = OutArgs {
        output: Output::Text,
        quiet: true,
        junit: None,
        no_tui: true,
    };
    let hooks = Hooks {
        report: Some(report),
        progress,
        ..Default::default()
    };
    run_plan(plan, &out, &hooks)
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

fn urls_order(s: &str) -> Result<redline_engine::urls::Order, String> {
    s.parse()
}

/// The `run` subcommand's clap definition: `agent` and `k8s` parse run
/// arguments with the real parser (cmd_dist.rs).
pub(crate) fn run_command() -> clap::Command {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    cli.build();
    cli.find_subcommand("run")
        .cloned()
        .unwrap_or_else(|| clap::Command::new("run"))
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
    let _ = ctrlc::set_handler(interrupt);
}

/// What Ctrl-C does (and `q` or Ctrl-C in the live view): the first stops
/// the run gracefully, the second quits at once (the terminal put back).
pub(crate) fn interrupt() {
    if INTERRUPTS.fetch_add(1, Ordering::SeqCst) == 0 {
        // The live view says "stopping" itself.
        if !crate::live::active() {
            eprintln!("\nredline: stopping (in-flight requests get up to 1 s); Ctrl-C again to quit at once");
        }
        stop_handle().stop();
    } else {
        crate::live::restore();
        std::process::exit(Exit::Interrupted.code());
    }
}

/// Entry point; returns the process exit code.
pub fn main() -> Exit {
    let args = normalize_args(std::env::args().collect());
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Ok
            };
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
        Command::Import(c) => crate::cmd_import::dispatch(c),
        Command::Ab(a) => crate::cmd_ab::main(&a.args),
        Command::Wrk(a) => crate::cmd_wrk::main(&a.args),
        Command::Replay(a) => crate::cmd_replay::run(*a),
    }
}

fn cmd_run(a: RunArgs) -> Exit {
    let metrics = a.metrics.config();
    if let Err(e) = metrics.check() {
        return fail(Exit::Usage, e);
    }
    let mut pa = match a.plan_args() {
        Ok(p) => p,
        Err(e) => return fail(Exit::Usage, e),
    };
    let (segment, start_at) = match a.dist.resolve() {
        Ok(x) => x,
        Err(e) => return fail(Exit::Usage, e),
    };
    pa.segment = segment;
    let pa_vs = a.vs.clone().map(|url| PlanArgs { url, ..pa.clone() });
    let mut plan = match Plan::build(pa) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Usage, e),
    };
    // https without a version flag: HTTP/2 when the server picks it by ALPN
    // (asked once, before any traffic).
    if let Some(note) = plan.resolve() {
        eprintln!("redline: note: {note}");
    }
    let plan_vs = match pa_vs.map(Plan::build).transpose() {
        Ok(Some(mut p)) => {
            if let Some(note) = p.resolve() {
                eprintln!("redline: note (--vs): {note}");
            }
            Some(p)
        }
        Ok(None) => None,
        Err(e) => return fail(Exit::Usage, format!("--vs: {e}")),
    };
    let mut thresholds = a.thresholds.thresholds;
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
                Err(e) => return fail(Exit::Usage, e),
            }
        }
        for (n, r) in sc.requests.iter().enumerate() {
            let mut v = Vec::new();
            for (i, t) in r.thresholds.iter().enumerate() {
                match parse(t, Some(n), i) {
                    Ok(t) => v.push(t),
                    Err(e) => return fail(Exit::Usage, e),
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
        abort_on_fail: a.thresholds.abort_on_fail,
        start_at,
        live_seconds: a.dist.live_seconds.clone(),
        report: None,
        progress: None,
        kept: None,
        metrics: Some(metrics),
        annotate: None,
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
) -> Exit {
    if hooks.start_at.is_some() || plan.segment.is_some() {
        return fail(
            Exit::Usage,
            "--repeat does not go with --segment or --start-at (a distributed run is one run)",
        );
    }
    let sides = match crate::cmd_history::repeat_sides(&hooks.save, &rep, vs.is_some()) {
        Ok(s) => s,
        Err(e) => return fail(Exit::Usage, e),
    };
    if vs.is_some() {
        hooks.kept = Some(Default::default());
    }
    let base = hooks.save.clone();
    let total = rep.n as usize * sides.len();
    let mut code = Exit::Ok;
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
            if code == Exit::Ok {
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

/// The live view's model of a run of `plan`: its target, planned end and stages.
pub(crate) fn live_model(plan: &Plan, stage: &str) -> crate::live::Model {
    let mut m = crate::live::Model::new(format!(
        "redline {stage} {}",
        redline_report::escape::clean(&plan.target.display)
    ));
    let (requests, duration) = match &plan.load {
        redline_engine::Load::Closed {
            requests, duration, ..
        }
        | redline_engine::Load::Open {
            requests, duration, ..
        } => (*requests, duration.map(|d| d.as_secs_f64())),
    };
    m.begin(stage, duration, requests, plan.config.stages.clone());
    m
}

fn run_plan(plan: &Plan, out: &OutArgs, hooks: &Hooks) -> Exit {
    // First, while the process has one thread (growing the descriptor table
    // later waits for an RCU grace period per growth).
    let _ = redline_engine::run::prepare_fds(plan);
    let watch = match crate::cmd_server::before_run(&hooks.watch) {
        Ok(w) => w,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut live = match crate::cmd_history::LiveSink::open(&hooks.save) {
        Ok(l) => l,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut seconds = match hooks
        .live_seconds
        .as_deref()
        .map(crate::cmd_dist::SecondsSink::open)
        .transpose()
    {
        Ok(s) => s,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut exporter = match hooks.metrics.as_ref().filter(|c| c.any()) {
        Some(c) => {
            match redline_metrics::Exporter::start(
                c,
                &plan.config.url,
                plan.config.stages.as_ref(),
                plan.scenario
                    .as_ref()
                    .map(|sc| sc.requests.iter().map(|r| r.name.clone()).collect())
                    .unwrap_or_default(),
            ) {
                Ok(e) => {
                    if let (Some(a), false) = (e.addr(), out.quiet) {
                        eprintln!("redline: metrics at http://{a}/metrics");
                    }
                    Some(e)
                }
                Err(e) => return fail(Exit::Usage, e),
            }
        }
        None => None,
    };
    install_ctrlc();
    let stop = stop_handle();
    if let Some(e) = exporter.as_mut() {
        let s = stop.clone();
        e.end_linger_when(move || s.is_stopped());
    }
    let scheduled = match hooks.start_at {
        Some(at) => match crate::cmd_dist::wait_for_start(at, &stop, out.quiet) {
            Some(s) => Some(s),
            None => return Exit::Interrupted,
        },
        None => None,
    };
    // The live view on a terminal (--no-tui, -q or a pipe: the progress line or nothing).
    let view = match !out.quiet && crate::live::wanted(out.no_tui) {
        true => {
            crate::live::LiveView::start(live_model(plan, "run"), crate::live::OnQuit::Interrupt)
        }
        false => None,
    };
    let show_progress = !out.quiet && view.is_none() && std::io::stderr().is_terminal();
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
    let result =
        redline_engine::execute_watching(plan, &stop, &ages, |s, series, overdue, requests| {
            if let Some(l) = live.as_mut() {
                l.snapshot(s);
            }
            if let Some(l) = seconds.as_mut() {
                l.push(s.elapsed, series);
            }
            if let Some(e) = &exporter {
                e.update(s, series, requests);
            }
            if let Some(p) = &hooks.progress {
                p(s);
            }
            if let Some(v) = &view {
                let e = s.elapsed.as_secs_f64();
                v.model()
                    .snapshot(e, s.completed, s.failed, Some(s.open), series);
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
                    if let Some(v) = &view {
                        v.model().log(format!("aborting: {why}"));
                    }
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
    // The alternate screen is left before anything else is printed.
    drop(view);
    let mut rec = match result {
        Ok(r) => r,
        Err(e) => return fail(Exit::Failure, e),
    };
    if let Some(why) = &aborted {
        rec.warn("aborted", format!("aborted: {why}"));
    }
    rec.scheduled_start = scheduled;
    if let Some(f) = &hooks.annotate {
        f(&mut rec);
    }
    if let Some(e) = exporter.as_mut() {
        e.finish(&mut rec);
    }
    if let Some(l) = seconds {
        l.finish(&rec.series);
    }
    crate::cmd_server::after_run(watch, &mut rec);
    // A failed save or `--html` makes the exit code 1 (unless a threshold or
    // an interrupt says more); the report is still printed: results are never lost.
    let side_failed = match crate::cmd_history::after_run(&hooks.save, &mut rec) {
        Ok(lines) => {
            for l in lines {
                eprintln!("{l}");
            }
            false
        }
        Err(e) => {
            eprintln!("redline: error: {e}");
            true
        }
    };
    if let Some(k) = &hooks.kept {
        k.borrow_mut().push(rec.clone());
    }
    let mut outcomes = redline_report::thresholds::check(&rec, &hooks.thresholds);
    for (name, ts) in &hooks.request_thresholds {
        if let Some(r) = rec.requests.iter().find(|r| &r.name == name) {
            outcomes.extend(redline_report::thresholds::check_request(&rec, r, ts));
        }
    }
    let junit_failed = match &out.junit {
        Some(p) => {
            let x = redline_report::junit::xml(
                "redline run",
                rec.duration_s,
                &redline_report::junit::run_cases(&rec, &outcomes),
            );
            match std::fs::write(p, x) {
                Ok(()) => false,
                Err(e) => {
                    eprintln!("redline: error: cannot write --junit {}: {e}", p.display());
                    true
                }
            }
        }
        None => false,
    };
    let side_failed = side_failed || junit_failed;
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    // The sink only reads the record; with text the PASS/FAIL lines follow it
    // (a drop-in, `redline ab`/`redline wrk`, prints its own layout instead).
    let mut written = match (&hooks.report, out.output) {
        (Some(render), Output::Text) => match render(&rec) {
            Ok(t) => stdout.write_all(t.as_bytes()),
            Err(e) => return fail(Exit::Failure, e),
        },
        _ => redline_report::write(out.output.format(), &rec, &mut stdout),
    };
    if out.output == Output::Text && hooks.report.is_none() && !outcomes.is_empty() {
        let mut t = String::from("\nThresholds:\n");
        for o in &outcomes {
            t.push_str(&format!("  {o}\n"));
        }
        written = written.and_then(|_| stdout.write_all(t.as_bytes()));
    }
    if let Err(e) = written.and_then(|_| stdout.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return fail(Exit::Failure, format!("cannot write the report: {e}"));
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
        Exit::Threshold
    } else if rec.interrupted {
        Exit::Interrupted
    } else if outcomes.iter().any(|o| !o.pass) {
        Exit::Threshold
    } else if c.scheduled > 0 && c.completed == 0 {
        // The report above says why; a script must not read this as a pass.
        fail(
            Exit::Failure,
            format!(
                "no request was answered ({} failed, {} unanswered)",
                c.failed,
                c.in_flight_at_end + c.not_sent
            ),
        )
    } else if side_failed {
        Exit::Failure
    } else {
        Exit::Ok
    }
}

fn cmd_serve(a: ServeArgs) -> Exit {
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
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => fail(
            Exit::Usage,
            format!(
                "cannot listen on {}:{}: address in use (try --port 0)",
                a.host, a.port
            ),
        ),
        Err(e) => fail(Exit::Failure, format!("cannot serve: {e}")),
    }
}

fn cmd_demo(a: DemoArgs) -> Exit {
    let server = match redline_serve::Server::start(redline_serve::ServeConfig {
        addr: "127.0.0.1:0".parse().expect("literal address"),
        threads: 1,
    }) {
        Ok(s) => s,
        Err(e) => {
            return fail(
                Exit::Failure,
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
        Err(e) => return fail(Exit::Failure, e),
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
mod tests;
