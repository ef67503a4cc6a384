//! Server-side commands (issue 8): `--watch` during a run, `watch`, `size`, `tune`.
//!
//! Exit codes beyond the common ones: [`Exit::Findings`] (3) when `tune
//! --fail-on` found something at or above the given level.

use clap::{Args, Subcommand, ValueEnum};
use redline_stats::watch::ServerWatch;
use redline_stats::RunRecord;
use redline_watch::detect::{self, ServerKind};
use redline_watch::size::{self, Budget};
use redline_watch::tune::{self, TuneOptions};
use redline_watch::{procfs, Target, Watcher};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use crate::exit::{fail, Exit};

mod size_cmd;
mod tune_cmd;
use size_cmd::{cmd_size, live_size_input};
use tune_cmd::cmd_tune;

/// The server-side subcommands.
#[derive(Subcommand, Debug)]
pub enum ServerCmd {
    /// Watch server processes (PID or name, e.g. apache2, nginx) and the machine: memory (RSS, PSS, private), CPU, load, swap.
    Watch(WatchArgs),
    /// Size the worker count (MaxRequestWorkers, worker_processes, …) from measured memory.
    Size(SizeArgs),
    /// Read an Apache, nginx or lighttpd configuration and say what to tune.
    Tune(TuneArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

/// `redline watch`.
#[derive(Args, Debug)]
pub struct WatchArgs {
    /// PIDs, process names or systemd units (apache2.service) to watch (their children too; a name with several instances: one entry each).
    #[arg(value_name = "PID|NAME|UNIT", required_unless_present = "merge")]
    targets: Vec<String>,
    /// How long to watch.
    #[arg(short = 'd', long, default_value = "30s", value_parser = dur)]
    duration: Duration,
    /// Time between samples.
    #[arg(long, default_value = "500ms", value_parser = dur)]
    interval: Duration,
    /// Output: text summary, or json (the watch record, to merge into a run with --merge).
    #[arg(short = 'o', long = "output", default_value = "text")]
    output: Format,
    /// Merge watch records (the files after it) into this run record and print the run record.
    #[arg(long, value_name = "RUN.json", conflicts_with = "targets")]
    merge: Option<PathBuf>,
    /// Watch records to merge (with --merge).
    #[arg(value_name = "WATCH.json", requires = "merge", last = true)]
    files: Vec<PathBuf>,
}

/// `redline size`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["watch", "pid", "run", "from"])))]
pub struct SizeArgs {
    /// The server's processes: a PID, a name (apache2, httpd, nginx, lighttpd, php-fpm) or a systemd unit (apache2.service).
    #[arg(long = "watch", value_name = "PID|NAME|UNIT")]
    watch: Vec<String>,
    /// The server's main process (when a name matches several instances, `size` lists them and asks for this).
    #[arg(long = "pid", value_name = "PID", conflicts_with = "watch")]
    pid: Option<u32>,
    /// Size from a saved run's watched data (id, label, `last` or `last~N`) instead of sampling now.
    #[arg(long = "run", value_name = "RUN")]
    run: Option<String>,
    /// Size from a saved run record (`redline run --watch … -o json > run.json`) instead of sampling now.
    #[arg(long = "from", value_name = "FILE.json")]
    from: Option<PathBuf>,
    /// With --run/--from: which watched host to size (default: the first).
    #[arg(long = "host", value_name = "HOST")]
    host: Option<String>,
    /// With --run/--from: which watched instance to size (its main PID), when a name matched several.
    #[arg(long = "instance", value_name = "PID")]
    instance: Option<u32>,
    /// History database for --run (default: $REDLINE_DB, else $XDG_DATA_HOME/redline/history.db).
    #[arg(long = "db", value_name = "PATH")]
    db: Option<PathBuf>,
    /// Memory the server may use: a share of MemTotal (50%) or a size (4GiB). Default: MemTotal minus the other processes and a 10% reserve.
    #[arg(long = "memory-budget", value_name = "SIZE|PCT")]
    memory_budget: Option<String>,
    /// Apache error log whose "reached MaxRequestWorkers" lines are cited as evidence (default with --watch: the usual places; with --run/--from: none).
    #[arg(long = "error-log", value_name = "FILE")]
    error_log: Option<PathBuf>,
    /// Server config, to read ThreadsPerChild (Apache worker/event).
    #[arg(long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", default_value = "text")]
    output: Format,
}

/// `tune --junit`: one case per finding (`code` at `file:line`), failing at
/// or above `limit`.
fn tune_cases(findings: &[tune::Finding], limit: tune::Level) -> Vec<redline_report::junit::Case> {
    use redline_report::junit::{Case, Verdict};
    findings
        .iter()
        .map(|f| {
            let name = if f.file.is_empty() {
                f.code.clone()
            } else if f.line == 0 {
                format!("{} ({})", f.code, f.file)
            } else {
                format!("{} ({}:{})", f.code, f.file, f.line)
            };
            let verdict = if f.level >= limit && f.level != tune::Level::Ok {
                Verdict::Failure {
                    message: format!("{} {}", f.level.marker(), f.message),
                    text: [f.message.as_str(), f.why.as_str(), f.change.as_str()]
                        .iter()
                        .filter(|s| !s.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join("\n"),
                }
            } else {
                Verdict::Pass
            };
            Case {
                name,
                classname: "redline.tune".into(),
                time_s: 0.0,
                verdict,
                system_out: Some(format!("{} {}", f.level.marker(), f.message)),
            }
        })
        .collect()
}

/// `redline tune`.
#[derive(Args, Debug)]
pub struct TuneArgs {
    /// The main config file: apache2.conf / httpd.conf, nginx.conf (or saved `nginx -T` output), lighttpd.conf.
    #[arg(value_name = "CONFIG")]
    config: PathBuf,
    /// Which server the config is for (default: guessed from the file).
    #[arg(long, value_name = "SERVER")]
    server: Option<tune::Server>,
    /// Memory the server may use (50%, 4GiB): MaxRequestWorkers above it is flagged.
    #[arg(long = "memory-budget", value_name = "SIZE|PCT")]
    memory_budget: Option<String>,
    /// Running server processes to measure per-worker memory from (for the MaxRequestWorkers check).
    #[arg(long = "watch", value_name = "PID|NAME")]
    watch: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", default_value = "text")]
    output: Format,
    /// Exit with code 3 when a finding at this level or above is found (for CI): info ([--] too), warning ([!!]; also: warn), error (tune's worst is [!!]: as warning).
    #[arg(long = "fail-on", value_name = "LEVEL")]
    fail_on: Option<crate::fail_on::FailOn>,
    /// Also write a JUnit XML report to FILE: one test case per finding, failing at the --fail-on level (default warning).
    #[arg(long = "junit", value_name = "FILE")]
    junit: Option<std::path::PathBuf>,
    /// Do not run the servers' own tools: neither their config test (nginx -t, apache2 -t, lighttpd -t) nor apache2ctl/nginx to confirm included files and modules.
    #[arg(long = "no-tools")]
    no_tools: bool,
    /// Read CONFIG as an Apache .htaccess (automatic when it is named .htaccess).
    #[arg(long = "htaccess")]
    htaccess: bool,
    /// Apache: the ServerRoot where the config sets none, as `apache2 -d DIR` (default: the installed apache2's compiled-in root, /etc/apache2 on Debian); relative Include and LoadModule paths are read from it, and the config test gets the same -d.
    #[arg(long = "server-root", value_name = "DIR")]
    server_root: Option<PathBuf>,
}

/// Flags `redline run` takes for watching the server.
#[derive(Args, Debug, Default, Clone)]
#[command(next_help_heading = "Server watching")]
pub struct RunWatchArgs {
    /// Watch server processes during the run: a PID, a process name or a systemd unit (repeatable), e.g. --watch apache2.
    #[arg(long = "watch", value_name = "PID|NAME|UNIT")]
    pub watch: Vec<String>,
    /// Time between --watch samples.
    #[arg(long = "watch-interval", value_name = "DURATION", value_parser = dur)]
    pub watch_interval: Option<Duration>,
    /// Read the server's status page during the run (Apache /server-status?auto, nginx stub_status, lighttpd /server-status?auto, php-fpm's status page through the web server); found by itself on loopback when --watch names the server.
    #[arg(long = "server-status", value_name = "URL")]
    pub server_status: Option<String>,
    /// Record the effective tuning directives of this server configuration in the run (found by itself from the process --watch names); `compare` shows what changed.
    #[arg(long = "server-config", value_name = "FILE")]
    pub server_config: Option<PathBuf>,
}

/// A watcher running beside the load, the status page reader, the server's
/// configuration, its error logs and the warnings found on the way.
pub struct WatchHandle {
    watcher: Option<Watcher>,
    status: Option<redline_watch::status::StatusWatcher>,
    config: Option<redline_stats::ServerConfig>,
    errlog: Option<redline_watch::errlog::ErrorLogs>,
    warnings: Vec<(&'static str, String)>,
}

fn dur(s: &str) -> Result<Duration, String> {
    redline_engine::parse_duration(s)
}

/// Parses the targets and checks each names something running now. With
/// `one_instance` (`size`, `tune`), a name matching several instances of a
/// server is refused with one line listing them (their PIDs, parents and
/// listen addresses), so the user picks one with `--pid`.
fn resolve_targets(raw: &[String], flag: &str, one_instance: bool) -> Result<Vec<Target>, String> {
    let mut targets = Vec::new();
    for r in raw {
        targets.push(Target::parse(r).map_err(|e| e.replacen("--watch", flag, 1))?);
    }
    let root = procfs::proc_root();
    let cg_root = redline_watch::cgroup::cgroup_root();
    let all = procfs::all_processes(&root);
    for t in &targets {
        if let Target::Unit(u) = t {
            if redline_watch::cgroup::of_unit(&cg_root, u).is_none() {
                return Err(format!(
                    "{flag} {u}: no cgroup for that unit under {} (is it running? give its PID or process name instead)",
                    cg_root.display()
                ));
            }
            continue;
        }
        if procfs::select(&all, std::slice::from_ref(t)).is_empty() {
            return Err(match t {
                Target::Pid(p) => format!("{flag} {p}: no process with that PID on this machine"),
                Target::Name(n) | Target::Unit(n) => format!(
                    "{flag} {n}: no process of that name on this machine (for a remote server, run `redline watch {n}` there: see docs/server-side.md)"
                ),
            });
        }
        if let (Target::Name(n), true) = (t, one_instance) {
            let inst = procfs::instances(&root, &all, n);
            if inst.len() > 1 {
                let list: Vec<String> = inst.iter().map(|i| i.describe()).collect();
                return Err(format!(
                    "{flag} {n} matches {} instances: {}; give one with --pid PID",
                    inst.len(),
                    list.join("; ")
                ));
            }
        }
    }
    Ok(targets)
}

/// Starts watching before the load starts (Err: a usage error message).
pub fn before_run(a: &RunWatchArgs) -> Result<Option<WatchHandle>, String> {
    if a.watch.is_empty() && a.server_status.is_none() && a.server_config.is_none() {
        return Ok(None);
    }
    let interval = a.watch_interval.unwrap_or(Duration::from_millis(500));
    if interval < Duration::from_millis(10) {
        return Err("--watch-interval must be at least 10ms".into());
    }
    let targets = resolve_targets(&a.watch, "--watch", false)?;
    let config = match &a.server_config {
        Some(p) => Some(
            redline_watch::effective::read(p, None).map_err(|e| format!("--server-config: {e}"))?,
        ),
        None => discover_config(&targets),
    };
    let mut warnings = Vec::new();
    // A status page that cannot be read now is not a reason to stop: it needs
    // a worker of the server itself, and a server whose workers are all held
    // (by idle keep-alive clients, say) is exactly what the run is to show.
    // The reader keeps trying; its failed reads are evidence.
    let status = match &a.server_status {
        Some(u) => {
            let url = redline_watch::status::StatusUrl::parse(u)?;
            let shown = url.display();
            let w = redline_watch::status::StatusWatcher::start(url, None, interval);
            if let Some(e) = w.first_error() {
                warnings.push((
                    "status_unreadable",
                    format!(
                        "the status page {shown} could not be read when the run started ({e}); the run went on, reading it again every {interval:?} (failed reads are kept in server_status.failures)"
                    ),
                ));
            }
            Some(w)
        }
        None => discover_status(&targets).map(|(url, kind)| {
            redline_watch::status::StatusWatcher::start(url, Some(kind), interval)
        }),
    };
    let errlog = start_errlog(a, &targets, &mut warnings);
    let watcher = (!targets.is_empty()).then(|| Watcher::start(targets, interval));
    Ok(Some(WatchHandle {
        watcher,
        status,
        config,
        errlog,
        warnings,
    }))
}

/// Notes where the server's error logs end now (from `--server-config`, the
/// watched processes' configuration, their open files); None when none is
/// found. A log found but not readable is a warning.
fn start_errlog(
    a: &RunWatchArgs,
    targets: &[Target],
    warnings: &mut Vec<(&'static str, String)>,
) -> Option<redline_watch::errlog::ErrorLogs> {
    let root = procfs::proc_root();
    let pids: Vec<u32> = if targets.is_empty() {
        Vec::new()
    } else {
        let all = procfs::all_processes(&root);
        let mut v: Vec<u32> = procfs::select(&all, targets)
            .iter()
            .map(|p| p.pid)
            .collect();
        let units: Vec<String> = targets
            .iter()
            .filter_map(|t| match t {
                Target::Unit(u) => Some(u.clone()),
                _ => None,
            })
            .collect();
        if !units.is_empty() {
            let cg = redline_watch::cgroup::cgroup_root();
            for u in &units {
                if let Some(dir) = redline_watch::cgroup::of_unit(&cg, u).and_then(|c| c.procs) {
                    v.extend(redline_watch::errlog::pids_of_cgroup(&dir));
                }
            }
        }
        v
    };
    let found = redline_watch::errlog::find(&root, a.server_config.as_deref(), &pids);
    if found.is_empty() {
        return None;
    }
    let (logs, errors) = redline_watch::errlog::ErrorLogs::start(&found);
    for e in errors {
        warnings.push(("server_log_unreadable", e));
    }
    (!logs.is_empty()).then_some(logs)
}

/// The configuration of the server `--watch` names (one instance), read from
/// its command line; None when it cannot be told or read.
fn discover_config(targets: &[Target]) -> Option<redline_stats::ServerConfig> {
    let root = procfs::proc_root();
    let all = procfs::all_processes(&root);
    for t in targets {
        let (pid, name) = match t {
            Target::Name(n) => match procfs::instances(&root, &all, n).as_slice() {
                [one] => (one.pid, one.name.clone()),
                _ => continue,
            },
            Target::Pid(p) => match all.iter().find(|x| x.pid == *p) {
                Some(x) => (x.pid, x.exe.clone()),
                None => continue,
            },
            Target::Unit(_) => continue,
        };
        let kind = ServerKind::of_name(&name);
        let server = match kind {
            ServerKind::Apache => tune::Server::Apache,
            ServerKind::Nginx => tune::Server::Nginx,
            ServerKind::Lighttpd => tune::Server::Lighttpd,
            _ => continue,
        };
        let Some(file) = redline_watch::effective::config_of_pid(&root, pid, kind) else {
            continue;
        };
        if let Ok(c) = redline_watch::effective::read(&file, Some(server)) {
            return Some(c);
        }
    }
    None
}

/// The status page of a server `--watch` names by name, on its loopback listen addresses.
fn discover_status(
    targets: &[Target],
) -> Option<(
    redline_watch::status::StatusUrl,
    redline_watch::status::StatusKind,
)> {
    let root = procfs::proc_root();
    let all = procfs::all_processes(&root);
    for t in targets {
        // A name matching several instances is ambiguous: another server's
        // status page must not be read as this one's.
        let inst = match t {
            Target::Name(n) => match procfs::instances(&root, &all, n).as_slice() {
                [one] => one.clone(),
                _ => continue,
            },
            Target::Pid(p) => {
                let Some(comm) = all.iter().find(|x| x.pid == *p).map(|x| x.comm.clone()) else {
                    continue;
                };
                match procfs::instances(&root, &all, &comm)
                    .into_iter()
                    .find(|i| i.pid == *p)
                {
                    Some(i) => i,
                    None => continue,
                }
            }
            Target::Unit(_) => continue,
        };
        let kind = ServerKind::of_name(&inst.name);
        if let Some(found) =
            redline_watch::status::discover(kind, &inst.listen, Duration::from_millis(500))
        {
            return Some(found);
        }
    }
    None
}

/// Warns (`server_swap`) when a watched machine swapped or ran low on memory.
fn add_watch_warnings(w: &ServerWatch, rec: &mut RunRecord) {
    for h in &w.hosts {
        if h.swapped() {
            rec.warn(
                "server_swap",
                format!(
                    "{} swapped during the run ({} pages in, {} out): latency then measures the disk, not the server; lower the worker count (redline size)",
                    h.host, h.summary.swapped_in_pages, h.summary.swapped_out_pages
                ),
            );
        } else if h.memory_low() {
            rec.warn(
                "server_swap",
                format!(
                    "{} ran low on memory during the run (MemAvailable fell to {} of {}): more load will swap; lower the worker count (redline size)",
                    h.host,
                    redline_watch::render::kib(h.summary.min_mem_available_kib as f64),
                    redline_watch::render::kib(h.mem_total_kib as f64)
                ),
            );
        }
    }
}

/// Stops watching and puts what was seen into the record.
pub fn after_run(h: Option<WatchHandle>, rec: &mut RunRecord) {
    let Some(WatchHandle {
        watcher: w,
        status,
        config,
        errlog,
        warnings,
    }) = h
    else {
        // No watch: the diagnosis still reads the run itself (a plain run's trouble).
        redline_stats::stages::analyze_server(rec);
        return;
    };
    for (code, msg) in warnings {
        rec.warn(code, msg);
    }
    if config.is_some() {
        rec.server_config = config;
    }
    if let Some(st) = status {
        rec.server_status = Some(st.stop());
    }
    if let Some(logs) = errlog {
        let (log, errors) = logs.finish(&rec.started_at);
        for e in errors {
            rec.warn("server_log_unreadable", e);
        }
        rec.server_log = Some(log);
    }
    let Some(w) = w else {
        redline_stats::stages::analyze_server(rec);
        return;
    };
    let seen = w.stop();
    add_watch_warnings(&seen, rec);
    match rec.server_watch.as_mut() {
        Some(existing) => existing.merge(&seen),
        None => rec.server_watch = Some(seen),
    }
    redline_stats::stages::analyze_server(rec);
}

/// Runs a server subcommand; returns the exit code.
pub fn dispatch(cmd: ServerCmd) -> Exit {
    match cmd {
        ServerCmd::Watch(a) => cmd_watch(a),
        ServerCmd::Size(a) => cmd_size(a),
        ServerCmd::Tune(a) => cmd_tune(a),
    }
}

fn print(s: &str) -> Exit {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => fail(Exit::Failure, format!("cannot write the output: {e}")),
    }
}

fn to_json(v: serde_json::Result<serde_json::Value>) -> String {
    let mut s = v
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// The JSON form of `redline watch -o json`: the ServerWatch with `format` and `version` added.
fn watch_doc(w: &ServerWatch) -> serde_json::Result<serde_json::Value> {
    let mut v = serde_json::to_value(w)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("format".into(), WATCH_FORMAT.into());
        o.insert("version".into(), 1.into());
    }
    Ok(v)
}

/// Reads a `redline watch -o json` document.
fn read_watch_doc(text: &str) -> Result<ServerWatch, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if v.get("format").and_then(|f| f.as_str()) != Some(WATCH_FORMAT) {
        return Err(format!(
            "not a redline watch record (no \"format\": {WATCH_FORMAT:?})"
        ));
    }
    if v.get("version").and_then(|f| f.as_u64()).unwrap_or(0) > 1 {
        return Err("watch record from a newer redline; upgrade redline".into());
    }
    serde_json::from_value(v).map_err(|e| format!("not a valid watch record: {e}"))
}

const WATCH_FORMAT: &str = "redline.watch";

fn cmd_watch(a: WatchArgs) -> Exit {
    if let Some(run) = a.merge {
        return merge_watch(&run, &a.files);
    }
    if a.interval < Duration::from_millis(10) {
        return fail(Exit::Usage, "--interval must be at least 10ms");
    }
    let targets = match resolve_targets(&a.targets, "watch", false) {
        Ok(t) => t,
        Err(e) => return fail(Exit::Usage, e),
    };
    let w = Watcher::start(targets, a.interval);
    std::thread::sleep(a.duration);
    let seen = w.stop();
    match a.output {
        Format::Text => print(&redline_watch::render_text(&seen)),
        Format::Json => print(&to_json(watch_doc(&seen))),
    }
}

fn merge_watch(run: &PathBuf, files: &[PathBuf]) -> Exit {
    let read =
        |p: &PathBuf| redline_stats::files::read_text(p, redline_stats::files::Kind::Record, "");
    let text = match read(run) {
        Ok(t) => t,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut rec = match RunRecord::from_json(&text) {
        Ok(r) => r,
        Err(e) => return fail(Exit::Usage, format!("{}: {e}", run.display())),
    };
    if files.is_empty() {
        return fail(
            Exit::Usage,
            "--merge needs watch records after `--`: redline watch --merge run.json -- watch.json",
        );
    }
    for f in files {
        let t = match read(f) {
            Ok(t) => t,
            Err(e) => return fail(Exit::Usage, e),
        };
        let doc = match read_watch_doc(&t) {
            Ok(d) => d,
            Err(e) => return fail(Exit::Usage, format!("{}: {e}", f.display())),
        };
        add_watch_warnings(&doc, &mut rec);
        match rec.server_watch.as_mut() {
            Some(w) => w.merge(&doc),
            None => rec.server_watch = Some(doc),
        }
    }
    redline_stats::stages::analyze_server(&mut rec);
    let mut buf = Vec::new();
    if let Err(e) = redline_report::write_json(&rec, &mut buf) {
        return fail(Exit::Failure, format!("cannot write the record: {e}"));
    }
    print(&String::from_utf8_lossy(&buf))
}
