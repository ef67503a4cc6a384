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

mod habits;
mod run;
mod shell;
use run::{cmd_run, run_plan};
pub(crate) use run::{prepare, Prepared};

/// The text under `--help`: the exit codes (from [`Exit`]) and the one rule.
fn after_help() -> String {
    format!(
        "{}\nNO_COLOR=1 (any non-empty value) turns colour off in the live view.\n\
         Shell completion: redline completions bash|zsh|fish|powershell; man pages: redline man.\n\
         Aim redline only at servers you own or are allowed to test.",
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
    /// Prove a change: interleaved rounds of the server before (--before CMD) and after (--after CMD, or --from-tune ID), with a verdict per metric.
    Trial(Box<crate::cmd_trial::TrialArgs>),
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
    /// Print a shell completion script: redline completions bash|zsh|fish|powershell|elvish.
    Completions(shell::CompletionsArgs),
    /// Print the man page (roff) of redline or of one command; --dir DIR writes them all.
    Man(shell::ManArgs),
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
        // A trial puts the server back in its state A first.
        crate::cmd_trial::on_quit();
        std::process::exit(Exit::Interrupted.code());
    }
}

/// Entry point; returns the process exit code.
pub fn main() -> Exit {
    parse_and_run(std::env::args().collect())
}

/// Parses the command line (the shorthand, typos, other tools' habits,
/// warnings) and runs the command.
fn parse_and_run(raw: Vec<String>) -> Exit {
    use clap::FromArgMatches;
    let cmd = shell::command();
    if let Some(first) = raw.get(1) {
        let known = first == "help"
            || cmd
                .get_subcommands()
                .any(|c| c.get_name() == first || c.get_all_aliases().any(|a| a == first));
        if !known {
            if let Some(msg) = habits::subcommand_typo(first, &cmd) {
                return fail(Exit::Usage, msg);
            }
        }
    }
    let args = normalize_args(raw);
    if let Some(msg) = habits::before_parse(&args) {
        return fail(Exit::Usage, msg);
    }
    let parsed = cmd
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            if !e.use_stderr() {
                let _ = e.print();
                return Exit::Ok;
            }
            if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                // `redline` alone: the help, as usage error.
                let _ = e.print();
                return Exit::Usage;
            }
            let msg = habits::after_error(&args)
                .or_else(|| habits::unknown_argument(&e, &args))
                .unwrap_or_else(|| habits::one_line(&e, &args));
            return fail(Exit::Usage, msg);
        }
    };
    for w in habits::warnings(&args) {
        eprintln!("redline: {w}");
    }
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
        Command::Trial(a) => crate::cmd_trial::run(*a),
        Command::Completions(a) => shell::completions(a),
        Command::Man(a) => shell::man(a),
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
