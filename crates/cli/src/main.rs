//! The `redline` command: flags → plan → engine → report. Thin on purpose.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
