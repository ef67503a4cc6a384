//! History and reports (issue 5): saving runs, `history`, `show`, `export`, `rm`,
//! `compare`, `report`, `merge`, and the live JSON Lines output of a run.
//!
//! `RUN` arguments name a saved run (an id, a label — the newest run with it —,
//! `last` or `last~N`) or, for `compare`, `report` and `merge`, a run-record
//! JSON file (`redline run -o json > run.json`): an existing file wins.
//! Page loads (`redline page`) are saved in the same history and id
//! sequence: `history` lists them, `show` and `export` print them, `compare`
//! takes two of them (saved or `page -o json` files); `report` and `merge`
//! take runs only (exit 2 for a page load).

use crate::exit::{fail, Exit};
use clap::{Args, Subcommand};
use redline_engine::Snapshot;
use redline_history::{Filter, HistoryError, Saved, Store};
use redline_stats::RunRecord;
use std::io::Write;
use std::path::{Path, PathBuf};

mod commands;
use commands::{cmd_compare, cmd_export, cmd_list, cmd_merge, cmd_report, cmd_rm, cmd_show};

/// The history subcommands.
#[derive(Subcommand, Debug)]
pub enum HistoryCmd {
    /// List saved runs, newest first.
    History(ListArgs),
    /// Print the text report of a saved run.
    Show(OneRun),
    /// Print the run record (JSON) of a saved run.
    Export(ExportArgs),
    /// Delete saved runs.
    Rm(RmArgs),
    /// Compare two runs (before, after): changes and whether they are significant; `compare TRIAL`: a trial's verdict.
    Compare(CompareArgs),
    /// Write a self-contained HTML report of a run, of two runs overlaid, or of a trial.
    Report(ReportArgs),
    /// Merge runs made at the same time (e.g. from several machines) into one record.
    Merge(MergeArgs),
}

/// Where the history is.
#[derive(Args, Debug, Clone, Default)]
pub struct DbArg {
    /// History database (default: $REDLINE_DB, else $XDG_DATA_HOME/redline/history.db).
    #[arg(long = "db", value_name = "PATH")]
    db: Option<PathBuf>,
}

/// `redline history`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// Only runs whose URL contains this.
    #[arg(long, value_name = "TEXT")]
    url: Option<String>,
    /// Only runs with this label.
    #[arg(long, value_name = "LABEL")]
    label: Option<String>,
    /// Only runs since a date (2025-05-01, 2025-05-01T12:00) or for an age (30m, 12h, 7d).
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// At most N runs.
    #[arg(short = 'n', long = "limit", value_name = "N", default_value_t = 20)]
    limit: u64,
    #[command(flatten)]
    db: DbArg,
}

/// A command on one saved run.
#[derive(Args, Debug)]
pub struct OneRun {
    /// The run: id, label, `last` or `last~N`.
    run: String,
    #[command(flatten)]
    db: DbArg,
}

/// `redline export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run: id, label, `last` or `last~N`.
    run: String,
    /// Write to this file instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    db: DbArg,
}

/// `redline rm`.
#[derive(Args, Debug)]
pub struct RmArgs {
    /// The runs: ids, labels, `last` or `last~N`.
    #[arg(required = true)]
    runs: Vec<String>,
    #[command(flatten)]
    db: DbArg,
}

/// `redline compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The run before (saved run or run-record JSON file); a label with several
    /// runs (`run --repeat N`) on both sides compares the runs as samples.
    a: String,
    /// The run after (saved run or run-record JSON file, or a label with several
    /// runs); left out when A is a trial (`redline trial`): its verdict.
    b: Option<String>,
    #[command(flatten)]
    db: DbArg,
}

/// `redline report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The run (saved run or run-record JSON file).
    run: String,
    /// A second run to overlay (the "after" of a before/after view).
    run2: Option<String>,
    /// The HTML file to write (default: standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    db: DbArg,
}

/// `redline merge`.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The runs to merge (saved runs or run-record JSON files), at least two.
    #[arg(required = true, num_args = 2..)]
    runs: Vec<String>,
    /// The merged run record (JSON) to write; `-` for standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Also save the merged record in the history.
    #[arg(long)]
    save: bool,
    /// Label of the saved merged run.
    #[arg(long, value_name = "LABEL", requires = "save")]
    label: Option<String>,
    /// Merge even the same run twice or runs that did not overlap in time
    /// (the record says so in a `merge_forced` warning).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    db: DbArg,
}

/// Flags `redline run` takes for saving and reporting a run.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "History and report files")]
pub struct RunSaveArgs {
    /// Do not save this run in the history.
    #[arg(long = "no-save")]
    pub no_save: bool,
    /// History database (default: $REDLINE_DB, else $XDG_DATA_HOME/redline/history.db).
    #[arg(long = "db", value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// A label for the saved run, e.g. before-keepalive (`redline show before-keepalive`).
    #[arg(long, value_name = "LABEL")]
    pub label: Option<String>,
    /// A free note kept with the saved run.
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    /// Also write a self-contained HTML report to FILE.
    #[arg(long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write one JSON line per second of progress to FILE while the run goes on.
    #[arg(long = "live-json", value_name = "FILE")]
    pub live_json: Option<PathBuf>,
}

impl Default for RunSaveArgs {
    /// What runs without flags of their own (`redline demo`) get: nothing saved.
    fn default() -> Self {
        RunSaveArgs {
            no_save: true,
            db: None,
            label: None,
            note: None,
            html: None,
            live_json: None,
        }
    }
}

/// `run --repeat N [--vs URL --vs-label LABEL] [--pause DURATION]`.
#[derive(Debug, Clone)]
pub struct Repeat {
    /// Runs per side.
    pub n: u32,
    /// Pause between runs.
    pub pause: Option<std::time::Duration>,
    /// `--vs-label`: the label of B's runs.
    pub vs_label: Option<String>,
}

/// One side of a repeated run (A, or B with `--vs`).
#[derive(Debug, Clone)]
pub struct Side {
    /// The label its runs are saved under.
    pub label: Option<String>,
}

/// The sides of `run --repeat`; with `--vs` (and saving) both need a label of
/// their own, so that `compare` finds each side's runs. Err: a usage error.
pub fn repeat_sides(save: &RunSaveArgs, rep: &Repeat, vs: bool) -> Result<Vec<Side>, String> {
    if !vs {
        if save.label.is_none() && !save.no_save {
            eprintln!(
                "redline: note: without --label the repeated runs are saved unlabelled: `compare` cannot take them as a group"
            );
        }
        return Ok(vec![Side {
            label: save.label.clone(),
        }]);
    }
    if !save.no_save {
        match (&save.label, &rep.vs_label) {
            (Some(a), Some(b)) if a != b => {}
            (Some(_), Some(_)) => {
                return Err(
                    "--label and --vs-label must differ: `compare` finds each side's runs by its label"
                        .into(),
                )
            }
            _ => {
                return Err(
                    "--vs needs --label (A's runs) and --vs-label (B's runs), so that `compare` finds each side's runs (or give --no-save)"
                        .into(),
                )
            }
        }
    }
    Ok(vec![
        Side {
            label: save.label.clone(),
        },
        Side {
            label: rep.vs_label.clone(),
        },
    ])
}

/// The save flags of run `i` of `n` on one side: its label, and the repeat
/// index in the note ("repeat 2 of 5", then the user's own note).
pub fn repeat_save(base: &RunSaveArgs, side: &Side, i: u32, n: u32, sides: &[Side]) -> RunSaveArgs {
    let mut s = base.clone();
    s.label = side.label.clone();
    let mut note = format!("repeat {i} of {n}");
    if sides.len() == 2 {
        note.push_str(", A/B interleaved");
    }
    if let Some(u) = &base.note {
        note.push_str(&format!("; {u}"));
    }
    s.note = Some(note);
    s
}

/// Receives live snapshots while a run is in progress and writes one JSON line
/// per second (`t`, `completed`, `failed`, `open`, `rps` in that second), each
/// written whole and at once, so a killed run leaves every finished second.
pub struct LiveSink {
    file: std::fs::File,
    path: PathBuf,
    next_t: u64,
    last_completed: u64,
    last_elapsed_s: f64,
    last: Option<Snapshot>,
    failed_write: bool,
}

impl LiveSink {
    /// Opens the live sink if one was asked for (Err: a usage error message).
    pub fn open(a: &RunSaveArgs) -> Result<Option<LiveSink>, String> {
        let Some(path) = &a.live_json else {
            return Ok(None);
        };
        let file = std::fs::File::create(path)
            .map_err(|e| format!("cannot write --live-json {}: {e}", path.display()))?;
        Ok(Some(LiveSink {
            file,
            path: path.clone(),
            next_t: 1,
            last_completed: 0,
            last_elapsed_s: 0.0,
            last: None,
            failed_write: false,
        }))
    }

    fn line(&mut self, t: u64, s: &Snapshot, elapsed_s: f64, last: bool) {
        let span = elapsed_s - self.last_elapsed_s;
        let done = s.completed.saturating_sub(self.last_completed);
        let rps = if span > 0.0 { done as f64 / span } else { 0.0 };
        let mut l = format!(
            "{{\"t\":{t},\"elapsed_s\":{elapsed_s:.3},\"completed\":{},\"failed\":{},\"open\":{},\"rps\":{rps:.1}",
            s.completed, s.failed, s.open
        );
        if last {
            l.push_str(",\"final\":true");
        }
        l.push_str("}\n");
        // One write per line: a reader never sees half a line from a live run.
        if self.file.write_all(l.as_bytes()).is_err() && !self.failed_write {
            self.failed_write = true;
            eprintln!(
                "redline: warning: cannot write to --live-json {}",
                self.path.display()
            );
        }
        self.last_completed = s.completed;
        self.last_elapsed_s = elapsed_s;
    }

    /// Called about every 250 ms with the run's progress.
    pub fn snapshot(&mut self, s: &Snapshot) {
        let el = s.elapsed.as_secs_f64();
        // A line for each whole second passed (bounded: one per call at most
        // a few, since snapshots come several times a second).
        while (self.next_t as f64) <= el {
            let t = self.next_t;
            self.line(t, s, el, false);
            self.next_t += 1;
            if self.next_t as f64 <= el {
                // A stalled callback: skip to now rather than write empty seconds.
                self.next_t = el.floor() as u64 + 1;
            }
        }
        self.last = Some(*s);
    }
}

impl Drop for LiveSink {
    fn drop(&mut self) {
        // The partial last second, so the final counts are in the file.
        if let Some(s) = self.last {
            let el = s.elapsed.as_secs_f64();
            if el > self.last_elapsed_s || s.completed != self.last_completed {
                self.line(self.next_t, &s, el, true);
            }
        }
        let _ = self.file.sync_data();
    }
}

fn history_err(e: HistoryError) -> (Exit, String) {
    let code = if e.is_usage() {
        Exit::Usage
    } else {
        Exit::Failure
    };
    (code, e.to_string())
}

fn open_store(db: Option<&Path>, create: bool) -> Result<Store, (Exit, String)> {
    let path = redline_history::resolve_path(db).map_err(history_err)?;
    let s = if create {
        Store::open(&path)
    } else {
        Store::open_existing(&path)
    };
    s.map_err(history_err)
}

/// Called once the run is over, before the report is printed: save it, write
/// HTML… Returns lines to print on stderr, or an error (runtime failure).
pub fn after_run(a: &RunSaveArgs, rec: &mut RunRecord) -> Result<Vec<String>, String> {
    if a.label.is_some() {
        rec.label = a.label.clone();
    }
    if a.note.is_some() {
        rec.note = a.note.clone();
    }
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    let mut name = "this run".to_string();
    if !a.no_save {
        match open_store(a.db.as_deref(), true).and_then(|mut s| {
            s.save(rec)
                .map_err(history_err)
                .map(|id| (id, s.path().to_path_buf()))
        }) {
            Ok((id, _path)) => {
                name = run_name(id, rec);
                let mut l = format!("redline: saved as run {id}");
                if let Some(lb) = &rec.label {
                    l.push_str(&format!(" (label {})", redline_report::escape::clean(lb)));
                }
                lines.push(l);
            }
            Err((_, e)) => errors.push(format!("the run was not saved: {e}")),
        }
    }
    if let Some(p) = &a.html {
        let html = redline_report::html::report(&[(name.as_str(), &*rec)]);
        match std::fs::write(p, html) {
            Ok(()) => lines.push(format!("redline: wrote the HTML report to {}", p.display())),
            Err(e) => errors.push(format!("cannot write --html {}: {e}", p.display())),
        }
    }
    if errors.is_empty() {
        Ok(lines)
    } else {
        for l in lines {
            eprintln!("{l}");
        }
        Err(errors.join("; "))
    }
}

/// Saves a page load (`redline page`); returns its id. Err: why not.
pub fn save_page(db: Option<&Path>, p: &redline_history::PageSave) -> Result<i64, String> {
    let mut s = open_store(db, true).map_err(|(_, e)| e)?;
    s.save_page(p).map_err(|e| e.to_string())
}

/// What `compare` and `show` got: a run or a page load.
enum Loaded {
    Run(Box<RunRecord>),
    Page(redline_web::render::page_compare::PageLoad),
}

fn page_of(
    json: &str,
    what: &str,
) -> Result<redline_web::render::page_compare::PageLoad, (Exit, String)> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| (Exit::Usage, format!("{what}: {e}")))?;
    redline_web::render::page_compare::parse(&v).map_err(|e| (Exit::Usage, format!("{what}: {e}")))
}

fn run_name(id: i64, rec: &RunRecord) -> String {
    match &rec.label {
        Some(l) => format!("run {id} ({})", redline_report::escape::clean(l)),
        None => format!("run {id}"),
    }
}

/// Loads a run from a run-record file (if `r` names an existing file) or the history.
struct Loader {
    db: Option<PathBuf>,
    store: Option<Store>,
}

impl Loader {
    fn new(db: &DbArg) -> Loader {
        Loader {
            db: db.db.clone(),
            store: None,
        }
    }
    fn store(&mut self) -> Result<&mut Store, (Exit, String)> {
        if self.store.is_none() {
            self.store = Some(open_store(self.db.as_deref(), false)?);
        }
        Ok(self.store.as_mut().expect("just set"))
    }
    fn saved(&mut self, r: &str) -> Result<(i64, RunRecord), (Exit, String)> {
        let s = self.store()?;
        let id = s.resolve_run(r).map_err(history_err)?;
        let rec = s.get(id).map_err(history_err)?;
        Ok((id, rec))
    }
    /// A saved run or a run-record file; with its name for reports.
    fn any(&mut self, r: &str) -> Result<(String, RunRecord), (Exit, String)> {
        let p = Path::new(r);
        let looks_like_file = p.is_file() || r.ends_with(".json") || r.contains('/');
        if looks_like_file {
            let text = redline_stats::files::read_text(
                p,
                redline_stats::files::Kind::Record,
                "run record",
            )
            .map_err(|e| (Exit::Usage, e))?;
            let rec =
                RunRecord::from_json(&text).map_err(|e| (Exit::Usage, format!("{r}: {e}")))?;
            let name = p
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| r.to_string());
            return Ok((name, rec));
        }
        let (id, rec) = self.saved(r)?;
        Ok((run_name(id, &rec), rec))
    }
    /// A saved run or page load, or a run-record or page-report file.
    fn run_or_page(&mut self, r: &str) -> Result<(String, Loaded), (Exit, String)> {
        let p = Path::new(r);
        let looks_like_file = p.is_file() || r.ends_with(".json") || r.contains('/');
        if looks_like_file {
            let text = redline_stats::files::read_text(p, redline_stats::files::Kind::Record, "")
                .map_err(|e| (Exit::Usage, e))?;
            let is_page = serde_json::from_str::<serde_json::Value>(&text)
                .is_ok_and(|v| redline_web::render::page_compare::is_page(&v));
            if is_page {
                let name = p
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_else(|| r.to_string());
                return Ok((name, Loaded::Page(page_of(&text, r)?)));
            }
            let (name, rec) = self.any(r)?;
            return Ok((name, Loaded::Run(Box::new(rec))));
        }
        let s = self.store()?;
        let id = s.resolve(r).map_err(history_err)?;
        match s.get_saved(id).map_err(history_err)? {
            Saved::Run(rec) => Ok((run_name(id, &rec), Loaded::Run(rec))),
            Saved::Page(json) => {
                let name = match s
                    .list(&Filter::default())
                    .ok()
                    .and_then(|rows| rows.into_iter().find(|x| x.id == id))
                    .and_then(|x| x.label)
                {
                    Some(l) => format!("page load {id} ({l})"),
                    None => format!("page load {id}"),
                };
                Ok((
                    name,
                    Loaded::Page(page_of(&json, &format!("saved page load {id}"))?),
                ))
            }
            Saved::Trial(_) => Err((
                Exit::Usage,
                format!(
                    "{r} is a trial: `redline compare {id}` shows its verdict, or compare its rounds by their labels (LABEL:A LABEL:B)"
                ),
            )),
        }
    }

    /// The trial `r` names (a saved trial, or a `trial -o json` file), or
    /// None when it names something else.
    fn trial(
        &mut self,
        r: &str,
    ) -> Result<Option<(String, redline_report::trial::TrialRecord)>, (Exit, String)> {
        let p = Path::new(r);
        let json = if p.is_file() || r.ends_with(".json") || r.contains('/') {
            let text = redline_stats::files::read_text(p, redline_stats::files::Kind::Record, "")
                .map_err(|e| (Exit::Usage, e))?;
            let is_trial = serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| {
                v.get("format").and_then(|f| f.as_str()) == Some(redline_report::trial::FORMAT)
            });
            if !is_trial {
                return Ok(None);
            }
            (r.to_string(), text)
        } else {
            let path = redline_history::resolve_path(self.db.as_deref()).map_err(history_err)?;
            if !path.exists() {
                return Ok(None);
            }
            let s = self.store()?;
            let Ok(id) = s.resolve(r) else {
                return Ok(None);
            };
            match s.get_saved(id).map_err(history_err)? {
                Saved::Trial(json) => (format!("trial {id}"), json),
                _ => return Ok(None),
            }
        };
        let t = redline_report::trial::TrialRecord::from_json(&json.1)
            .map_err(|e| (Exit::Usage, format!("{}: {e}", json.0)))?;
        Ok(Some((json.0, t)))
    }
}

/// Runs a history subcommand; returns the exit code.
pub fn dispatch(cmd: HistoryCmd) -> Exit {
    let r = match cmd {
        HistoryCmd::History(a) => cmd_list(a),
        HistoryCmd::Show(a) => cmd_show(a),
        HistoryCmd::Export(a) => cmd_export(a),
        HistoryCmd::Rm(a) => cmd_rm(a),
        HistoryCmd::Compare(a) => cmd_compare(a),
        HistoryCmd::Report(a) => cmd_report(a),
        HistoryCmd::Merge(a) => cmd_merge(a),
    };
    match r {
        Ok(()) => Exit::Ok,
        Err((code, msg)) => fail(code, msg),
    }
}

type CmdResult = Result<(), (Exit, String)>;

fn print(s: &str) -> CmdResult {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err((Exit::Failure, format!("cannot write the output: {e}"))),
    }
}

fn write_out(path: &Path, what: &str, s: &str) -> CmdResult {
    if path == Path::new("-") {
        return print(s);
    }
    std::fs::write(path, s).map_err(|e| {
        (
            Exit::Failure,
            format!("cannot write {what} {}: {e}", path.display()),
        )
    })
}

fn short(s: &str, n: usize) -> String {
    let s = redline_report::escape::clean(s);
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn compact_load(load: &str) -> String {
    load.replace("closed loop, ", "closed ")
        .replace("open loop, ", "open ")
        .replace(" connections", "c")
        .replace(" requests", " req")
        .replace("up to ", "≤")
}
