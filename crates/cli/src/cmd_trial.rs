//! `redline trial`: a before/after experiment on one server. The server is
//! put in state A (`--before CMD`) or B (`--after CMD`, or a `tune` fix with
//! `--from-tune`), rounds run interleaved A B B A A B … (`--rounds` each),
//! each round a normal saved run (the same plan every round, on `run`'s own
//! path: watch, server config, diagnosis), and after each switch the trial
//! waits `--settle` and until the server answers again (bounded). The server
//! is put back in state A at the end, also after a failure, on Ctrl-C (the
//! first stops the round, the second quits at once, restoring A first) and
//! when the command panics. The verdict is `redline_report::trial`'s.

use crate::exit::{fail, Exit};
use crate::flags::Output;
use clap::Args;
use redline_report::trial::{state_of, FromTune, Round, State, TrialRecord};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod tune_fix;

/// `redline trial`.
#[derive(Args, Debug)]
pub struct TrialArgs {
    /// A shell command that puts the server in state A (before), e.g.
    /// 'cp a.conf /etc/apache2/conf-enabled/t.conf && apache2ctl graceful'.
    #[arg(
        long,
        value_name = "CMD",
        required_unless_present = "from_tune",
        conflicts_with = "from_tune"
    )]
    before: Option<String>,
    /// A shell command that puts the server in state B (after).
    #[arg(
        long,
        value_name = "CMD",
        required_unless_present = "from_tune",
        conflicts_with = "from_tune"
    )]
    after: Option<String>,
    /// Rounds of each state (at least 3), run interleaved: A B B A A B …
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(3..=100))]
    rounds: u32,
    /// Wait after each switch before probing the server, e.g. 2s.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = dur)]
    settle: Duration,
    /// Give up when the server does not answer this long after a switch.
    #[arg(long = "settle-max", value_name = "DURATION", default_value = "30s", value_parser = dur)]
    settle_max: Duration,
    /// State B from a `redline tune` finding: its code (e.g. keepalive), or
    /// CODE:LINE when several have it. Needs --server-config FILE (the
    /// configuration tune reads) and --reload CMD.
    #[arg(long = "from-tune", value_name = "ID", requires = "reload")]
    from_tune: Option<String>,
    /// With --from-tune: the command that makes the server read its
    /// configuration again, e.g. 'apache2ctl graceful'.
    #[arg(long, value_name = "CMD", requires = "from_tune")]
    reload: Option<String>,
    #[command(flatten)]
    run: crate::cli::RunArgs,
}

fn dur(s: &str) -> Result<Duration, String> {
    redline_engine::parse_duration(s)
}

/// How the server is put in a state.
#[derive(Debug, Clone)]
enum Switch {
    /// The user's commands.
    Shell { before: String, after: String },
    /// A configuration file's two contents, then the reload command.
    Files {
        file: PathBuf,
        a: Vec<u8>,
        b: Vec<u8>,
        reload: String,
    },
}

/// Longest a switch command may take.
const COMMAND_LIMIT: Duration = Duration::from_secs(120);

/// The process group of the switch command running now (0: none), killed
/// when the second Ctrl-C quits.
static CHILD_GROUP: AtomicI32 = AtomicI32::new(0);

/// The switch to restore state A with, while the trial runs; taken once.
static PENDING: Mutex<Option<Switch>> = Mutex::new(None);

impl Switch {
    fn apply(&self, s: State) -> Result<(), String> {
        match self {
            Switch::Shell { before, after } => match s {
                State::A => shell(before, "--before"),
                State::B => shell(after, "--after"),
            },
            Switch::Files { file, a, b, reload } => {
                write_replacing(file, if s == State::A { a } else { b })?;
                shell(reload, "--reload")
            }
        }
    }
}

/// Writes `data` to `file` by a rename from a sibling, with the file's mode,
/// so a reader never sees half a configuration.
fn write_replacing(file: &Path, data: &[u8]) -> Result<(), String> {
    let tmp = file.with_extension("redline-tmp");
    let mode = std::fs::metadata(file).map(|m| m.permissions()).ok();
    std::fs::write(&tmp, data)
        .and_then(|_| match mode {
            Some(m) => std::fs::set_permissions(&tmp, m),
            None => Ok(()),
        })
        .and_then(|_| std::fs::rename(&tmp, file))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {e}", file.display())
        })
}

/// Runs `cmd` with `sh -c` in its own process group (so the terminal's
/// Ctrl-C does not cut a switch in half), its output on stderr, at most
/// [`COMMAND_LIMIT`]. Err: one line naming the flag.
fn shell(cmd: &str, flag: &str) -> Result<(), String> {
    use std::os::fd::AsFd;
    use std::os::unix::process::CommandExt;
    let out = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null());
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(out)
        .spawn()
        .map_err(|e| format!("{flag}: cannot run sh: {e}"))?;
    CHILD_GROUP.store(child.id() as i32, Ordering::SeqCst);
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if t0.elapsed() > COMMAND_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "{flag}: the command did not finish in {} s",
                    COMMAND_LIMIT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Err(format!("{flag}: {e}")),
        }
    };
    CHILD_GROUP.store(0, Ordering::SeqCst);
    let status = status?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{flag} failed ({status}): {}",
            redline_report::escape::clean(cmd)
        ))
    }
}

/// Puts the server back in state A, once (whoever calls first: the end of
/// the trial, its guard on a panic or early return, or the second Ctrl-C).
/// None when there was nothing to restore.
fn restore_once() -> Option<Result<(), String>> {
    let sw = PENDING.lock().ok()?.take()?;
    eprintln!("redline: trial: putting the server back in state A");
    Some(sw.apply(State::A))
}

/// Called by the second Ctrl-C before the process quits: the switch command
/// running now is killed and state A restored.
pub(crate) fn on_quit() {
    let pending = PENDING.lock().map(|g| g.is_some()).unwrap_or(false);
    if !pending {
        // Nothing to restore, or the restore of A is running: let it end (bounded).
        let t0 = Instant::now();
        while CHILD_GROUP.load(Ordering::SeqCst) != 0 && t0.elapsed() < COMMAND_LIMIT {
            std::thread::sleep(Duration::from_millis(20));
        }
        return;
    }
    let g = CHILD_GROUP.swap(0, Ordering::SeqCst);
    if g > 0 {
        // SAFETY: kill(2) on the process group of a child this process started.
        unsafe { libc::kill(-g, libc::SIGKILL) };
    }
    if let Some(Err(e)) = restore_once() {
        eprintln!("redline: error: {e}");
    }
}

/// Restores state A when dropped (a panic, an early return).
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(Err(e)) = restore_once() {
            eprintln!("redline: error: {e}");
        }
    }
}

/// One request on one connection to the plan's target, repeated until the
/// server answers (any HTTP response) or `max` passes; Err: one line.
fn settle(probe: &redline_engine::Plan, wait: Duration, max: Duration) -> Result<(), String> {
    let stop = crate::cli::stop_handle();
    let t0 = Instant::now();
    while t0.elapsed() < wait && !stop.is_stopped() {
        std::thread::sleep(Duration::from_millis(20).min(wait));
    }
    let end = Instant::now() + max;
    let mut last = String::from("no answer");
    while Instant::now() < end {
        if stop.is_stopped() {
            return Err("interrupted while waiting for the server".into());
        }
        let own = redline_engine::StopHandle::new();
        match redline_engine::execute(probe, &own, |_| {}) {
            Ok(r) if r.counters.completed > 0 => return Ok(()),
            Ok(r) => {
                if let Some(e) = r.errors.first() {
                    last = e.message.clone();
                }
            }
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!(
        "the server did not answer within {} s after the switch ({last})",
        max.as_secs_f64()
    ))
}

/// The one-request plan `settle` sends: a GET of the run's target with its
/// headers and TLS settings (any answer counts; no body, so a POST target is
/// not written to by the probe).
fn probe_plan(p: &crate::cli::Prepared) -> Result<redline_engine::Plan, String> {
    let mut pa = p.plan_args.clone();
    pa.method = None;
    pa.body = None;
    pa.content_type = None;
    if pa.url.is_empty() {
        pa.url = p.plan.config.url.clone();
    }
    pa.scenario = None;
    pa.urls = None;
    pa.stages = None;
    pa.replay = None;
    pa.segment = None;
    pa.rate = None;
    pa.duration = None;
    pa.requests = Some(1);
    pa.connections = Some(1);
    pa.threads = Some(1);
    pa.requests_per_conn = None;
    pa.timeout = Duration::from_secs(2);
    pa.ask_alpn = false;
    redline_engine::Plan::build(pa).map_err(|e| format!("the settle probe: {e}"))
}

/// The trial's label: the user's, or `trial-YYYYMMDD-HHMMSS`.
fn auto_label(started: &str) -> String {
    let digits: String = started
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit())
        .collect();
    if digits.len() == 14 {
        format!("trial-{}-{}", &digits[..8], &digits[8..])
    } else {
        "trial".into()
    }
}

/// The newest saved run labelled `label`, when the round was saved.
fn saved_id(save: &crate::cmd_history::RunSaveArgs, label: &str) -> Option<i64> {
    if save.no_save {
        return None;
    }
    let path = redline_history::resolve_path(save.db.as_deref()).ok()?;
    let s = redline_history::Store::open_existing(&path).ok()?;
    s.resolve_run(label).ok()
}

/// Runs a trial; returns the exit code.
pub fn run(a: TrialArgs) -> Exit {
    let TrialArgs {
        before,
        after,
        rounds,
        settle: settle_wait,
        settle_max,
        from_tune,
        reload,
        run,
    } = a;
    let mut p = match crate::cli::prepare(run) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if let Some(f) = p.not_one_run() {
        return fail(
            Exit::Usage,
            format!("{f} does not go with trial: a trial repeats by --rounds, one machine"),
        );
    }
    if p.out.output == Output::Csv {
        return fail(Exit::Usage, "trial prints text or json (-o text|json)");
    }
    if p.out.junit.is_some() || p.save().live_json.is_some() {
        return fail(
            Exit::Usage,
            "--junit and --live-json do not go with trial: each round is a saved run (`redline show ID`)",
        );
    }
    let probe = match probe_plan(&p) {
        Ok(x) => x,
        Err(e) => return fail(Exit::Usage, e),
    };
    let (switch, tune) = match (&from_tune, before, after) {
        (Some(id), _, _) => {
            let Some(config) = p.watch().server_config.clone() else {
                return fail(
                    Exit::Usage,
                    "--from-tune needs --server-config FILE: the configuration tune reads and the trial changes",
                );
            };
            match tune_fix::prepare(id, &config, reload.as_deref().unwrap_or_default()) {
                Ok(x) => (x.0, Some(x.1)),
                Err((code, e)) => return fail(code, e),
            }
        }
        (None, Some(before), Some(after)) => (Switch::Shell { before, after }, None),
        _ => {
            return fail(
                Exit::Usage,
                "give --before CMD and --after CMD, or --from-tune ID",
            )
        }
    };
    let (before_words, after_words) = match &switch {
        Switch::Shell { before, after } => (before.clone(), after.clone()),
        Switch::Files { file, reload, .. } => (
            format!("the original {}; {reload}", file.display()),
            format!(
                "the fixed copy {} as {}; {reload}",
                tune.as_ref().map_or("", |t| t.fixed_copy.as_str()),
                file.display()
            ),
        ),
    };
    let base = p.save().clone();
    let started = redline_stats::time::now_rfc3339();
    let label = base.label.clone().unwrap_or_else(|| auto_label(&started));
    let quiet = p.out.quiet;
    crate::cli::install_ctrlc();
    let stop = crate::cli::stop_handle();
    if let Ok(mut g) = PENDING.lock() {
        *g = Some(switch.clone());
    }
    let guard = Guard;
    let t0 = Instant::now();
    let total = 2 * rounds as usize;
    let mut state_now: Option<State> = None;
    let mut done: Vec<Round> = Vec::new();
    let (mut config_a, mut config_b) = (None, None);
    let mut stopped: Option<String> = None;
    let mut failed = false;
    for i in 0..total {
        if stop.is_stopped() {
            stopped = Some("interrupted (Ctrl-C)".into());
            break;
        }
        let want = state_of(i);
        if state_now != Some(want) {
            if !quiet {
                eprintln!("redline: trial: state {}", want.name());
            }
            state_now = None;
            if let Err(e) = switch.apply(want) {
                stopped = Some(e);
                failed = true;
                break;
            }
            state_now = Some(want);
            if let Err(e) = settle(&probe, settle_wait, settle_max) {
                failed = !stop.is_stopped();
                stopped = Some(e);
                break;
            }
        }
        let round_label = format!("{label}:{}", want.name());
        let mut save = base.clone();
        save.label = Some(round_label.clone());
        save.html = None;
        save.note = Some(format!(
            "trial {label}, round {} of {total}, state {}{}",
            i + 1,
            want.name(),
            base.note
                .as_deref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default()
        ));
        let (code, rec) = p.run_once(save);
        let Some(rec) = rec else {
            stopped = Some(format!("round {} could not run", i + 1));
            failed = true;
            break;
        };
        let id = saved_id(&base, &round_label);
        let r = Round::of(i as u32 + 1, want, id, &rec);
        if !quiet {
            eprintln!(
                "redline: trial: round {} of {total} ({}): {:.1} req/s, p50 {}, p99 {}, errors {:.2}%{}",
                i + 1,
                want.name(),
                r.requests_per_sec,
                redline_report::dur_us(r.p50_us),
                redline_report::dur_us(r.p99_us),
                r.error_share * 100.0,
                if code == Exit::Ok { "" } else { " (the run did not pass)" }
            );
        }
        match want {
            State::A if config_a.is_none() => config_a = rec.server_config.clone(),
            State::B if config_b.is_none() => config_b = rec.server_config.clone(),
            _ => {}
        }
        done.push(r);
        if stop.is_stopped() {
            stopped = Some("interrupted (Ctrl-C)".into());
            break;
        }
    }
    // State A again: nothing to do when the last round was A.
    let restored = if state_now == Some(State::A) {
        PENDING.lock().map(|mut g| g.take()).ok();
        true
    } else {
        match restore_once() {
            Some(Ok(())) | None => true,
            Some(Err(e)) => {
                eprintln!("redline: error: {e}");
                false
            }
        }
    };
    drop(guard);
    let verdict = redline_report::trial::verdict(&done);
    let b_rps: Vec<f64> = done
        .iter()
        .filter(|r| r.state == State::B)
        .map(|r| r.requests_per_sec)
        .collect();
    let t = TrialRecord {
        format: redline_report::trial::FORMAT.into(),
        version: redline_report::trial::VERSION,
        started_at: done
            .first()
            .map(|r| r.started_at.clone())
            .unwrap_or(started),
        duration_s: t0.elapsed().as_secs_f64(),
        url: p.plan.config.url.clone(),
        method: p.plan.config.method.clone(),
        load: p.plan.config.load.describe(),
        label: label.clone(),
        before: before_words,
        after: after_words,
        settle_s: settle_wait.as_secs_f64(),
        from_tune: tune,
        config_a,
        config_b,
        interrupted: done.len() < total,
        stopped,
        restored,
        verdict,
        rounds: done,
    };
    let json = match serde_json::to_string_pretty(&t) {
        Ok(j) => j,
        Err(e) => return fail(Exit::Failure, format!("cannot write the trial record: {e}")),
    };
    let mut side_failed = false;
    if !base.no_save && !t.rounds.is_empty() {
        let saved = redline_history::resolve_path(base.db.as_deref())
            .and_then(|path| redline_history::Store::open(&path))
            .and_then(|mut s| {
                s.save_trial(&redline_history::TrialSave {
                    started_at: &t.started_at,
                    url: &t.url,
                    method: &t.method,
                    load: &format!("trial, {} rounds: {}", t.rounds.len(), t.load),
                    label: &t.label,
                    note: base.note.as_deref(),
                    duration_s: t.duration_s,
                    requests_per_sec: b_rps.iter().sum::<f64>() / b_rps.len().max(1) as f64,
                    completed: t.rounds.iter().map(|r| r.completed).sum(),
                    interrupted: t.interrupted,
                    record: &json,
                })
            });
        match saved {
            Ok(id) => eprintln!(
                "redline: saved the trial as {id} (label {}; its rounds: {}:A, {}:B)",
                redline_report::escape::clean(&label),
                redline_report::escape::clean(&label),
                redline_report::escape::clean(&label)
            ),
            Err(e) => {
                eprintln!("redline: error: the trial was not saved: {e}");
                side_failed = true;
            }
        }
    }
    if let Some(path) = &base.html {
        match std::fs::write(path, redline_report::trial::html(&t)) {
            Ok(()) => eprintln!("redline: wrote the HTML report to {}", path.display()),
            Err(e) => {
                eprintln!(
                    "redline: error: cannot write --html {}: {e}",
                    path.display()
                );
                side_failed = true;
            }
        }
    }
    let out = match p.out.output {
        Output::Json => json + "\n",
        _ => redline_report::trial::text(&t),
    };
    if let Err(code) = print(&out) {
        return code;
    }
    if failed || !restored {
        fail(
            Exit::Failure,
            t.stopped
                .clone()
                .unwrap_or_else(|| "the server could not be put back in state A".into()),
        )
    } else if t.interrupted {
        Exit::Interrupted
    } else if side_failed {
        Exit::Failure
    } else {
        Exit::Ok
    }
}

fn print(s: &str) -> Result<(), Exit> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(fail(Exit::Failure, format!("cannot write the report: {e}")))
        }
        _ => Ok(()),
    }
}

/// What `--from-tune` hands the trial: the switch and what B is.
type FromTuneSwitch = (Switch, FromTune);
