//! The `redline` command: flags → plan → engine → report. Thin on purpose.

mod cli;
mod cmd_ab;
mod cmd_dist;
mod cmd_find;
mod cmd_history;
mod cmd_import;
mod cmd_replay;
mod cmd_server;
mod cmd_trial;
mod cmd_web;
mod cmd_wrk;
mod exit;
mod fail_on;
mod flags;
mod live;

fn main() {
    std::process::exit(cli::main().code());
}
