//! `redline page` and `redline audit` (issue 7): the page loader and the HTTP tuning audit.
//! Placeholder until that work lands.

use clap::Subcommand;

/// The web subcommands.
#[derive(Subcommand, Debug)]
pub enum WebCmd {
    /// (not yet available) Load a page with everything it embeds.
    #[command(hide = true)]
    Page,
}

/// Runs a web subcommand; returns the exit code.
pub fn dispatch(cmd: WebCmd) -> i32 {
    match cmd {
        WebCmd::Page => crate::cli::fail(
            crate::cli::EXIT_USAGE,
            "`redline page` is not available yet",
        ),
    }
}
