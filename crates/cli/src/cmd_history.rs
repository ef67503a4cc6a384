//! History and reports (issue 5): saving runs, `history`, `show`, `export`, `rm`,
//! `compare`, `report`, `merge`, CSV and live JSON output.
//! Placeholder until that work lands.

use clap::{Args, Subcommand};
use redline_engine::Snapshot;
use redline_stats::RunRecord;

/// The history subcommands.
#[derive(Subcommand, Debug)]
pub enum HistoryCmd {
    /// (not yet available) List saved runs.
    #[command(hide = true)]
    History,
}

/// Flags `redline run` takes for saving and reporting a run.
#[derive(Args, Debug, Default, Clone)]
pub struct RunSaveArgs {}

/// Receives live snapshots while a run is in progress.
pub struct LiveSink;

impl LiveSink {
    /// Opens the live sink if one was asked for (Err: a usage error message).
    pub fn open(_a: &RunSaveArgs) -> Result<Option<LiveSink>, String> {
        Ok(None)
    }
    /// Called about every 250 ms with the run's progress.
    pub fn snapshot(&mut self, _s: &Snapshot) {}
}

/// Called once the run is over, before the report is printed: save it, write
/// HTML… Returns lines to print on stderr, or an error (runtime failure).
pub fn after_run(_a: &RunSaveArgs, _rec: &mut RunRecord) -> Result<Vec<String>, String> {
    Ok(Vec::new())
}

/// Runs a history subcommand; returns the exit code.
pub fn dispatch(cmd: HistoryCmd) -> i32 {
    match cmd {
        HistoryCmd::History => crate::cli::fail(
            crate::cli::EXIT_USAGE,
            "`redline history` is not available yet",
        ),
    }
}
