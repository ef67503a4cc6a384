//! `redline import har FILE.har [--keep-secrets] [--all-hosts]`: a browser
//! recording becomes a scenario file on stdout (`redline_engine::har`); what
//! was dropped (third-party hosts, credentials) is said on stderr.
//! Exit codes: 0 written, 1 stdout could not be written, 2 bad input (a file
//! that is missing, not a regular file, over 256 MiB, not JSON or not a HAR).

use crate::exit::{fail, Exit};
use clap::{Args, Subcommand};
use std::io::Write;

/// `import`'s formats.
#[derive(Subcommand, Debug)]
pub enum ImportCmd {
    /// A HAR 1.2 file (a browser's recording) as a scenario on stdout:
    /// `redline import har page.har > page.toml; redline run --scenario page.toml`.
    Har(HarArgs),
}

/// `import har`.
#[derive(Args, Debug)]
pub struct HarArgs {
    /// The HAR file.
    #[arg(value_name = "FILE.har")]
    file: std::path::PathBuf,
    /// Keep cookies and credentials (Cookie, Authorization, X-Api-Key-like
    /// headers, token-like query and form fields); removed by default.
    #[arg(long = "keep-secrets")]
    keep_secrets: bool,
    /// Keep requests to hosts other than the first page's (dropped by default).
    #[arg(long = "all-hosts")]
    all_hosts: bool,
}

/// Runs `import`.
pub fn dispatch(c: ImportCmd) -> Exit {
    match c {
        ImportCmd::Har(a) => har(a),
    }
}

fn har(a: HarArgs) -> Exit {
    let text =
        match redline_stats::files::read_text(&a.file, redline_stats::files::Kind::Har, "HAR") {
            Ok(t) => t,
            Err(e) => return fail(Exit::Usage, e),
        };
    let got = match redline_engine::har::import(
        &text,
        &a.file.display().to_string(),
        redline_engine::har::Options {
            keep_secrets: a.keep_secrets,
            all_hosts: a.all_hosts,
        },
    ) {
        Ok(g) => g,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(got.toml.as_bytes()).and_then(|_| out.flush()) {
        return fail(Exit::Failure, format!("cannot write the scenario: {e}"));
    }
    let mut note = format!("redline: imported {} requests", got.requests);
    if !got.dropped_hosts.is_empty() {
        let n: usize = got.dropped_hosts.values().sum();
        note.push_str(&format!(
            "; dropped {n} to {} third-party host(s) (--all-hosts keeps them)",
            got.dropped_hosts.len()
        ));
    }
    if got.from_cache > 0 {
        note.push_str(&format!(
            "; dropped {} served from the browser's cache (never on the network)",
            got.from_cache
        ));
    }
    if !got.removed.is_empty() {
        note.push_str(&format!(
            "; removed credentials: {} (--keep-secrets keeps them)",
            got.removed.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    if got.skipped > 0 {
        note.push_str(&format!("; skipped {} non-http(s) entries", got.skipped));
    }
    eprintln!("{}", redline_report::escape::clean(&note));
    Exit::Ok
}
