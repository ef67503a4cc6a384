//! Run history, compare, merge, HTML report and live JSON, end to end with the
//! built binary. Every test uses its own database in a temporary directory
//! (`--db`, `REDLINE_DB` and `XDG_DATA_HOME` all point there), never the
//! user's data directory.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A fresh temporary directory for one test.
fn tmpdir(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "redline-cli-history-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs redline with REDLINE_DB and XDG_DATA_HOME inside `dir` (so nothing
/// can reach the real history), killed past 60 s.
fn rl(dir: &Path, args: &[&str]) -> Output {
    let child = Command::new(bin())
        .args(args)
        .env("REDLINE_DB", dir.join("history.db"))
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn redline");
    wait_limit(child, Duration::from_secs(60))
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn err(out: &Output, code: i32) -> String {
    let e = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "stderr: {e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(e.starts_with("redline: error: "), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    e
}

#[test]
fn runs_are_saved_listed_shown_exported_and_removed() {
    let dir = tmpdir("basic");
    let srv = builtin();
    let url = format!("http://{}/?size=100", srv.local_addr());
    let db = dir.join("explicit.db");
    let dbs = db.to_str().unwrap();
    // --db wins over REDLINE_DB.
    let out = rl(
        &dir,
        &[
            "run", "-q", "-n", "300", "-c", "3", "--db", dbs, "--label", "before", "--note",
            "baseline", &url,
        ],
    );
    ok(&out);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("redline: saved as run 1 (label before)"), "{e}");
    assert!(db.exists());
    assert!(!dir.join("history.db").exists());
    ok(&rl(
        &dir,
        &[
            "run", "-q", "-n", "200", "-c", "2", "--db", dbs, "--label", "after", &url,
        ],
    ));
    ok(&rl(
        &dir,
        &[
            "run", "-q", "-n", "100", "-c", "1", "--db", dbs, "-o", "json", &url,
        ],
    ));

    let list = ok(&rl(&dir, &["history", "--db", dbs]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 4, "{list}");
    assert!(
        lines[1].trim_start().starts_with('3'),
        "newest first: {list}"
    );
    assert!(lines[3].contains("before"), "{list}");
    let only = ok(&rl(&dir, &["history", "--db", dbs, "--label", "after"]));
    assert_eq!(only.lines().count(), 2, "{only}");
    let n1 = ok(&rl(
        &dir,
        &["history", "--db", dbs, "-n", "1", "--since", "1d"],
    ));
    assert_eq!(n1.lines().count(), 2, "{n1}");
    let none = ok(&rl(
        &dir,
        &["history", "--db", dbs, "--url", "nomatch.example"],
    ));
    assert!(none.contains("No saved runs"), "{none}");

    let show = ok(&rl(&dir, &["show", "before", "--db", dbs]));
    assert!(show.starts_with("Run 1 (before)"), "{show}");
    assert!(show.contains("Note: baseline"), "{show}");
    assert!(show.contains("Requests:         300 completed"), "{show}");
    let show = ok(&rl(&dir, &["show", "last~1", "--db", dbs]));
    assert!(show.starts_with("Run 2 (after)"), "{show}");

    let json = ok(&rl(&dir, &["export", "1", "--db", dbs]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["counters"]["completed"], 300);
    assert_eq!(v["label"], "before");
    assert_eq!(v["note"], "baseline");

    let out = rl(&dir, &["rm", "last", "--db", dbs]);
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("removed run 3"));
    let show = ok(&rl(&dir, &["show", "last", "--db", dbs]));
    assert!(show.starts_with("Run 2"), "{show}");
}

#[test]
fn redline_db_env_is_the_default_and_no_save_saves_nothing() {
    let dir = tmpdir("env");
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let out = rl(
        &dir,
        &["run", "-q", "-n", "50", "-c", "1", "--no-save", &url],
    );
    ok(&out);
    assert!(!dir.join("history.db").exists());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("saved"));
    ok(&rl(&dir, &["run", "-q", "-n", "50", "-c", "1", &url]));
    assert!(dir.join("history.db").exists(), "REDLINE_DB was not used");
    assert!(
        !dir.join("xdg").exists(),
        "XDG_DATA_HOME used despite REDLINE_DB"
    );
    let list = ok(&rl(&dir, &["history"]));
    assert_eq!(list.lines().count(), 2, "{list}");
}

#[test]
fn bad_references_files_and_databases_are_one_line_errors() {
    let dir = tmpdir("bad");
    // No database yet: read commands say so and do not create one.
    let e = err(&rl(&dir, &["show", "last"]), 2);
    assert!(e.contains("no run history"), "{e}");
    assert!(!dir.join("history.db").exists());
    let l = ok(&rl(&dir, &["history"]));
    assert!(l.contains("No saved runs yet"), "{l}");

    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    ok(&rl(&dir, &["run", "-q", "-n", "20", "-c", "1", &url]));
    let e = err(&rl(&dir, &["show", "42"]), 2);
    assert!(e.contains("no saved run \"42\""), "{e}");
    err(&rl(&dir, &["show", "no-such-label"]), 2);
    err(&rl(&dir, &["export", "last~5"]), 2);
    err(&rl(&dir, &["rm", "last~x"]), 2);
    err(&rl(&dir, &["compare", "last", "/nonexistent/run.json"]), 2);
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "{\"not\": \"a run\"}").unwrap();
    let e = err(&rl(&dir, &["compare", "last", junk.to_str().unwrap()]), 2);
    assert!(e.contains("not a redline run record"), "{e}");
    err(&rl(&dir, &["history", "--since", "someday"]), 2);

    // A corrupt database is refused and left as it was.
    let bad = dir.join("corrupt.db");
    let bytes = b"garbage that is not sqlite ".repeat(200);
    std::fs::write(&bad, &bytes).unwrap();
    let e = err(&rl(&dir, &["history", "--db", bad.to_str().unwrap()]), 2);
    assert!(e.contains("corrupt"), "{e}");
    let out = rl(
        &dir,
        &[
            "run",
            "-q",
            "-n",
            "20",
            "-c",
            "1",
            "--db",
            bad.to_str().unwrap(),
            &url,
        ],
    );
    // The run itself succeeds and its report is printed; saving fails loudly.
    assert!(String::from_utf8_lossy(&out.stdout).contains("Requests:"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not saved"));
    assert_eq!(std::fs::read(&bad).unwrap(), bytes);
}

#[test]
fn compare_saved_runs_and_files() {
    let dir = tmpdir("compare");
    let srv = builtin();
    let fast = format!("http://{}/?size=100", srv.local_addr());
    let slow = format!("http://{}/?size=100&delay=5ms", srv.local_addr());
    ok(&rl(
        &dir,
        &[
            "run", "-q", "-n", "400", "-c", "4", "--label", "fast", &fast,
        ],
    ));
    ok(&rl(
        &dir,
        &[
            "run", "-q", "-n", "400", "-c", "4", "--label", "slow", &slow,
        ],
    ));
    let t = ok(&rl(&dir, &["compare", "fast", "slow"]));
    for m in [
        "Requests/sec",
        "Latency mean",
        "Latency p50",
        "Latency p90",
        "Latency p99",
        "Latency max",
        "Errors",
        "Transfer/sec",
    ] {
        assert!(t.contains(m), "{m} missing: {t}");
    }
    let p50 = t.lines().find(|l| l.starts_with("Latency p50")).unwrap();
    assert!(p50.contains("worse"), "5 ms delay must be worse: {t}");
    assert!(t.contains("different URLs"), "{t}");

    // The same from run-record files.
    let a = dir.join("a.json");
    let json = ok(&rl(&dir, &["export", "fast"]));
    std::fs::write(&a, json).unwrap();
    let t2 = ok(&rl(&dir, &["compare", a.to_str().unwrap(), "fast"]));
    let p50 = t2.lines().find(|l| l.starts_with("Latency p50")).unwrap();
    assert!(
        p50.contains("no clear difference (single runs: use --repeat)"),
        "{t2}"
    );
    assert!(!t2.contains("WARNING"), "{t2}");
}

/// `run --repeat N --vs URL`: A and B alternate (A B A B …), each run saved
/// under its side's label with its repeat index; the end and `compare` of
/// the two labels test the runs as samples (Welch t over the runs).
#[test]
fn repeat_interleaves_and_compare_takes_the_runs_as_samples() {
    let dir = tmpdir("repeat");
    let srv = builtin();
    let fast = format!("http://{}/?size=100", srv.local_addr());
    let slow = format!("http://{}/?size=100&delay=20ms", srv.local_addr());
    let out = rl(
        &dir,
        &[
            "run",
            "--repeat",
            "3",
            "-n",
            "200",
            "-c",
            "4",
            "--label",
            "fast",
            "--vs",
            &slow,
            "--vs-label",
            "slow",
            "--note",
            "mine",
            &fast,
        ],
    );
    let t = ok(&out);
    let e = String::from_utf8_lossy(&out.stderr);
    // A B A B A B: odd ids are fast, even ids slow.
    for (id, label) in [(1, "fast"), (2, "slow"), (3, "fast"), (6, "slow")] {
        assert!(
            e.contains(&format!("saved as run {id} (label {label})")),
            "{e}"
        );
    }
    assert!(e.contains("run 4 of 6 (slow, repeat 2 of 3)"), "{e}");
    assert!(t.contains("Welch t over 3+3 runs"), "{t}");
    let s = ok(&rl(&dir, &["show", "4"]));
    assert!(
        s.contains("Note: repeat 2 of 3, A/B interleaved; mine"),
        "{s}"
    );
    let c = ok(&rl(&dir, &["compare", "fast", "slow"]));
    assert!(c.contains("label fast, 3 runs (ids 1, 3, 5)"), "{c}");
    assert!(c.contains("label slow, 3 runs (ids 2, 4, 6)"), "{c}");
    let p50 = c.lines().find(|l| l.starts_with("Latency p50")).unwrap();
    assert!(
        p50.contains("worse") && p50.contains("Welch t over 3+3 runs"),
        "{c}"
    );
    assert!(c.contains("Each run is one sample"), "{c}");
    // One run against a group: the newest of each, as single runs, said so.
    let c = ok(&rl(&dir, &["compare", "1", "slow"]));
    assert!(c.contains("Two single runs"), "{c}");
    // --vs needs a label for each side (or --no-save); both must differ.
    err(
        &rl(
            &dir,
            &["run", "--repeat", "2", "-n", "10", "--vs", &slow, &fast],
        ),
        2,
    );
    let e = err(
        &rl(
            &dir,
            &[
                "run",
                "--repeat",
                "2",
                "-n",
                "10",
                "--label",
                "x",
                "--vs",
                &slow,
                "--vs-label",
                "x",
                &fast,
            ],
        ),
        2,
    );
    assert!(e.contains("must differ"), "{e}");
    // --vs without --repeat is a usage error.
    assert_eq!(
        rl(&dir, &["run", "-n", "10", "--vs", &slow, &fast])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn merge_adds_runs_exactly() {
    let dir = tmpdir("merge");
    let srv = builtin();
    let url = format!("http://{}/?size=200", srv.local_addr());
    let a = dir.join("a.json");
    let b = dir.join("b.json");
    for (p, n) in [(&a, "300"), (&b, "500")] {
        let json = ok(&rl(
            &dir,
            &[
                "run",
                "-q",
                "--no-save",
                "-o",
                "json",
                "-n",
                n,
                "-c",
                "2",
                &url,
            ],
        ));
        std::fs::write(p, json).unwrap();
    }
    let m = dir.join("m.json");
    let out = rl(
        &dir,
        &[
            "merge",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "-o",
            m.to_str().unwrap(),
            "--save",
            "--label",
            "both",
        ],
    );
    ok(&out);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    assert_eq!(v["counters"]["completed"], 800);
    assert_eq!(v["merged_runs"], 2);
    assert_eq!(v["status_codes"]["200"], 800);
    assert_eq!(v["latency"]["count"], 800);
    assert_eq!(v["config"]["load"]["connections"], 4);
    let series_total: u64 = v["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(series_total, 800);
    let show = ok(&rl(&dir, &["show", "both"]));
    assert!(show.contains("Merged runs:      2"), "{show}");
    err(
        &rl(
            &dir,
            &[
                "merge",
                a.to_str().unwrap(),
                "/nonexistent.json",
                "-o",
                "x.json",
            ],
        ),
        2,
    );
}

#[test]
fn live_json_writes_a_line_per_second_and_html_on_run() {
    let dir = tmpdir("live");
    let srv = builtin();
    let url = format!("http://{}/?size=100", srv.local_addr());
    let live = dir.join("live.jsonl");
    let html = dir.join("run.html");
    let out = rl(
        &dir,
        &[
            "run",
            "-q",
            "-d",
            "2500ms",
            "-c",
            "2",
            "--live-json",
            live.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            &url,
        ],
    );
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrote the HTML report"));
    let text = std::fs::read_to_string(&live).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.len() >= 2 && lines.len() <= 5, "{text}");
    assert_eq!(lines[0]["t"], 1);
    assert_eq!(lines[1]["t"], 2);
    assert!(lines[0]["rps"].as_f64().unwrap() > 0.0, "{text}");
    let last = lines.last().unwrap();
    assert_eq!(last["final"], true, "{text}");
    assert!(last["completed"].as_u64().unwrap() >= lines[0]["completed"].as_u64().unwrap());
    let h = std::fs::read_to_string(&html).unwrap();
    assert!(h.contains("<svg class=\"chart\""));
    err(
        &rl(
            &dir,
            &[
                "run",
                "-q",
                "-n",
                "5",
                "--live-json",
                "/nonexistent/dir/x",
                &url,
            ],
        ),
        2,
    );
}

#[test]
fn html_report_renders_in_headless_chromium() {
    let dir = tmpdir("html");
    let srv = builtin();
    let url = format!("http://{}/?size=300", srv.local_addr());
    ok(&rl(
        &dir,
        &[
            "run", "-q", "-d", "2s", "-c", "2", "--label", "before", &url,
        ],
    ));
    ok(&rl(
        &dir,
        &["run", "-q", "-d", "2s", "-c", "4", "--label", "after", &url],
    ));
    let page = dir.join("report.html");
    ok(&rl(
        &dir,
        &["report", "before", "after", "-o", page.to_str().unwrap()],
    ));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "must not fetch anything"
    );
    err(
        &rl(&dir, &["report", "nope", "-o", page.to_str().unwrap()]),
        2,
    );

    let Some((dom, log)) = chromium_dump(&page, &dir, Some(&dir.join("shot.png"))) else {
        return;
    };
    let shot = dir.join("shot.png");
    let console_errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(
        console_errors.is_empty(),
        "console errors: {console_errors:?}"
    );
    // The inline script ran and counted the charts and their points.
    assert!(
        dom.contains("data-charts=\"7\""),
        "script did not run: {}",
        &dom[..dom.len().min(400)]
    );
    let pts: u64 = dom
        .split("data-chart-points=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse().ok())
        .expect("data-chart-points");
    assert!(pts > 100, "charts have {pts} points");
    if shot.exists() {
        assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
    }
}
