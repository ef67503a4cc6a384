//! Server-side commands (issue 8): `--watch` during a run, `size`, `tune`, `watch`.
//! Placeholder until that work lands.

use clap::{Args, Subcommand};
use redline_stats::RunRecord;

/// The server-side subcommands.
#[derive(Subcommand, Debug)]
pub enum ServerCmd {
    /// (not yet available) Size MaxClients from measured memory.
    #[command(hide = true)]
    Size,
}

/// Flags `redline run` takes for watching the server.
#[derive(Args, Debug, Default, Clone)]
pub struct RunWatchArgs {}

/// A watcher running beside the load.
pub struct WatchHandle;

/// Starts watching before the load starts (Err: a usage error message).
pub fn before_run(_a: &RunWatchArgs) -> Result<Option<WatchHandle>, String> {
    Ok(None)
}

/// Stops watching and puts what was seen into the record.
pub fn after_run(_h: Option<WatchHandle>, _rec: &mut RunRecord) {}

/// Runs a server subcommand; returns the exit code.
pub fn dispatch(cmd: ServerCmd) -> i32 {
    match cmd {
        ServerCmd::Size => crate::cli::fail(
            crate::cli::EXIT_USAGE,
            "`redline size` is not available yet",
        ),
    }
}
