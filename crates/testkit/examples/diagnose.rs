//! The diagnosis bench (issue 30, point 7): runs every real-server setup of
//! `redline_testkit::setups` (or those named), each `--repeat N` times, and
//! prints the verdict table: the expected resource, the verdict of each run,
//! right/wrong/not-known counts, the server's own evidence and the
//! diagnosis's first evidence line.
//!
//! ```text
//! cargo run -p redline-testkit --example diagnose -- [--redline PATH] [--repeat N]
//!     [--markdown FILE] [--list] [SETUP ...]
//! ```
//!
//! `bench/diagnose.sh` builds the release binary and runs this. Ctrl-C ends
//! the run under way (redline stops on its own SIGINT), and the setup under
//! way is cleaned up (servers stopped by PID, cgroups and namespaces removed)
//! before it exits.

use redline_testkit::setups::{self, verdict, StartError, Verdict};
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

struct Row {
    name: String,
    expected: String,
    verdicts: Vec<String>,
    right: usize,
    wrong: usize,
    not_known: usize,
    evidence_holds: usize,
    runs: usize,
    server_evidence: String,
    diagnosis_evidence: String,
}

fn main() {
    let mut redline = "target/release/redline".to_string();
    let mut repeat = 1usize;
    let mut markdown: Option<String> = None;
    let mut names: Vec<String> = Vec::new();
    let mut verbose = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--redline" => redline = args.next().expect("--redline PATH"),
            "--repeat" => {
                repeat = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--repeat N")
            }
            "--markdown" => markdown = Some(args.next().expect("--markdown FILE")),
            "-v" | "--verbose" => verbose = true,
            "--list" => {
                for s in setups::all() {
                    println!("{:<26} {:<15} {}", s.name, s.expected, s.limit);
                }
                return;
            }
            "-h" | "--help" => {
                println!(
                    "diagnose [--redline PATH] [--repeat N] [--markdown FILE] [-v] [--list] [SETUP ...]"
                );
                return;
            }
            n => names.push(n.to_string()),
        }
    }
    if !std::path::Path::new(&redline).exists() {
        eprintln!(
            "no redline binary at {redline} (cargo build --release -p redline, or --redline PATH)"
        );
        std::process::exit(2);
    }
    let chosen: Vec<setups::Setup> = if names.is_empty() {
        setups::all()
    } else {
        names
            .iter()
            .map(|n| {
                setups::by_name(n).unwrap_or_else(|| {
                    eprintln!("no setup {n} (--list names them)");
                    std::process::exit(2);
                })
            })
            .collect()
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        )
    };
    let mut rows = Vec::new();
    'setups: for s in &chosen {
        let mut row = Row {
            name: s.name.into(),
            expected: s.expected.into(),
            verdicts: Vec::new(),
            right: 0,
            wrong: 0,
            not_known: 0,
            evidence_holds: 0,
            runs: 0,
            server_evidence: String::new(),
            diagnosis_evidence: String::new(),
        };
        for i in 0..repeat {
            if STOP.load(Ordering::SeqCst) {
                rows.push(row);
                break 'setups;
            }
            eprintln!("== {} ({}/{repeat})", s.name, i + 1);
            let mut running = match s.try_start() {
                Ok(r) => r,
                Err(e) => {
                    let what = match &e {
                        StartError::Missing(_) => "skipped",
                        StartError::Failed(_) => "failed",
                    };
                    eprintln!("   {what}: {e}");
                    row.verdicts.push(what.into());
                    row.server_evidence = e.to_string();
                    continue;
                }
            };
            eprintln!("   {}", running.command_line(&redline));
            let out = running.run(&redline);
            let gone = running.gone();
            drop(running);
            if STOP.load(Ordering::SeqCst) {
                // Cut short by Ctrl-C: not a verdict.
                row.verdicts.push("interrupted".into());
                rows.push(row);
                break 'setups;
            }
            let res = out.resource().to_string();
            let v = verdict(s.expected, &res);
            match v {
                Verdict::Right => row.right += 1,
                Verdict::Wrong => row.wrong += 1,
                Verdict::NotKnown => row.not_known += 1,
            }
            row.runs += 1;
            row.evidence_holds += out.evidence.holds as usize;
            let shown = if res.is_empty() { "none" } else { &res };
            row.verdicts.push(shown.to_string());
            row.server_evidence = format!(
                "{} {}",
                if out.evidence.holds { "✔" } else { "✘" },
                out.evidence.line
            );
            row.diagnosis_evidence = out.first_evidence().to_string();
            if out.record.is_null() {
                row.diagnosis_evidence = format!(
                    "(no record, exit {:?}: {})",
                    out.code,
                    out.stderr.lines().last().unwrap_or("")
                );
            }
            eprintln!(
                "   -> {shown} ({v:?}) in {:.1} s; evidence: {}",
                out.wall.as_secs_f64(),
                row.server_evidence
            );
            if let Some(g) = gone {
                eprintln!("   note: {g} was not running at the end");
            }
            if verbose {
                eprintln!("   diagnosis: {}", out.record["diagnosis"]);
                if !out.stderr.trim().is_empty() {
                    eprintln!("   stderr: {}", out.stderr.trim());
                }
            }
        }
        rows.push(row);
    }
    let table = render(&rows);
    println!("{table}");
    if let Some(f) = markdown {
        std::fs::write(&f, &table).unwrap_or_else(|e| panic!("write {f}: {e}"));
        eprintln!("written to {f}");
    }
    let (r, w, n, runs): (usize, usize, usize, usize) = rows.iter().fold((0, 0, 0, 0), |a, x| {
        (
            a.0 + x.right,
            a.1 + x.wrong,
            a.2 + x.not_known,
            a.3 + x.runs,
        )
    });
    println!("{r} right, {w} wrong, {n} not known of {runs} runs");
    if STOP.load(Ordering::SeqCst) {
        std::process::exit(130);
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The table as markdown (readable as text too).
fn render(rows: &[Row]) -> String {
    let mut t = String::from(
        "| setup | expected | verdict per run | right | wrong | not known | server's own evidence (last run) | diagnosis's first evidence (last run) |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} ({}/{} held) | {} |\n",
            r.name,
            r.expected,
            cell(&r.verdicts.join(", ")),
            r.right,
            r.wrong,
            r.not_known,
            cell(&r.server_evidence),
            r.evidence_holds,
            r.runs,
            cell(&r.diagnosis_evidence),
        ));
    }
    t
}
