//! A newcomer's command line (issue 35, point 4): mistyped commands get "did
//! you mean", other tools' flags a pointer to redline's, the top-level help
//! is grouped by task, completions and man pages come from the same clap
//! definitions, `1m30s` is a duration, odd methods and unit-less thresholds
//! are warned about, and `--no-save` is accepted wherever a run could be saved.

mod common;
use common::*;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs redline with stdout into a file (completion scripts are larger than
/// a pipe's buffer): its exit status, stdout and stderr, 60 s at most.
fn printed(args: &[&str]) -> (Option<i32>, String, String) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "redline-printed-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let file = std::fs::File::create(&path).unwrap();
    let child = std::process::Command::new(bin())
        .args(args)
        .stdout(file)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_limit(child, std::time::Duration::from_secs(60));
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    (out.status.code(), text, stderr(&out))
}

#[test]
fn a_mistyped_command_is_not_taken_for_a_host() {
    for (typo, cmd) in [
        ("histroy", "history"),
        ("comapre", "compare"),
        ("completoins", "completions"),
        ("audti", "audit"),
    ] {
        let e = usage_error(&[typo]);
        assert!(
            e.contains(&format!("unknown command '{typo}': did you mean '{cmd}'?")),
            "{e}"
        );
        assert!(!e.contains("resolve"), "{e}");
    }
    // A URL or host of any other shape is still the shorthand `redline URL`.
    let e = usage_error(&["histroy.invalid", "-n", "1"]);
    assert!(e.contains("cannot resolve host"), "{e}");
}

#[test]
fn other_tools_flags_point_to_redlines() {
    let url = "http://127.0.0.1:9/";
    for (args, want) in [
        (vec!["-z", "10s", url], "-d DURATION"),
        (vec![url, "-d", "{\"a\":1}"], "-b BODY"),
        (vec![url, "--json"], "-o json"),
        (vec![url, "-q", "100"], "-r REQ/S"),
        (vec!["-h2", url], "--http2"),
        (vec!["--vus", "10", url], "-c N"),
        (vec!["run", url, "--iterations", "10"], "-n N"),
        (
            vec!["find", url, "--slo", "p99<1s", "-z", "5s"],
            "-d DURATION",
        ),
    ] {
        let e = usage_error(&args);
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(!e.contains("-- -"), "clap's tip: {e}");
    }
    // An unknown flag with no habit behind it: one line, clap's suggestion, no tip.
    let e = usage_error(&[url, "--rat", "4"]);
    assert!(e.contains("did you mean '--rate'?"), "{e}");
    assert!(!e.contains("tip"), "{e}");
}

#[test]
fn top_level_help_is_grouped_by_task_and_documents_no_color() {
    let out = redline(&["--help"]);
    assert!(out.status.success());
    let help = stdout(&out);
    let pos = |s: &str| {
        help.find(s)
            .unwrap_or_else(|| panic!("{s} missing:\n{help}"))
    };
    let order = [
        "Load:",
        "Server:",
        "Page and audit:",
        "History and reports:",
        "Distributed:",
        "Shell:",
    ];
    for w in order.windows(2) {
        assert!(pos(w[0]) < pos(w[1]), "{help}");
    }
    assert!(pos("Load:") < pos("  run ") && pos("  run ") < pos("Server:"));
    assert!(pos("Distributed:") < pos("  coordinate ") && pos("  coordinate ") < pos("Shell:"));
    assert!(help.contains("NO_COLOR"), "{help}");
    assert!(help.contains("redline URL"), "{help}");
}

#[test]
fn completions_for_every_shell() {
    for sh in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let (code, s, err) = printed(&["completions", sh]);
        assert_eq!(code, Some(0), "{sh}: {err}");
        // Subcommands and run's flags are completed.
        assert!(s.contains("history") && s.contains("--threshold"), "{sh}");
    }
    // bash reads the script without a syntax error, and completes `redline hi`.
    let (_, bash, _) = printed(&["completions", "bash"]);
    let dir = std::env::temp_dir().join(format!("redline-compl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("redline.bash");
    std::fs::write(&script, bash).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && COMP_WORDS=(redline hist) COMP_CWORD=1 COMP_LINE='redline hist' COMP_POINT=12 && _redline redline hist redline && echo \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(check.status.success(), "{}", stderr(&check));
    assert!(stdout(&check).contains("history"), "{}", stdout(&check));
    let e = usage_error(&["completions", "tcsh"]);
    assert!(e.contains("tcsh"), "{e}");
}

#[test]
fn man_pages_from_the_same_definitions() {
    let out = redline(&["man"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = stdout(&out);
    assert!(
        page.contains(".TH redline 1"),
        "{}",
        &page[..page.len().min(300)]
    );
    assert!(page.contains("completions"), "subcommands listed");
    let out = redline(&["man", "run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = stdout(&out);
    assert!(
        page.contains(".TH redline-run 1"),
        "{}",
        &page[..page.len().min(300)]
    );
    assert!(page.contains("threshold"), "run's flags in run's page");
    let e = usage_error(&["man", "nope"]);
    assert!(e.contains("no command 'nope'"), "{e}");
    // --dir writes one page per command.
    let dir = std::env::temp_dir().join(format!("redline-man-{}", std::process::id()));
    let out = redline(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    for f in ["redline.1", "redline-run.1", "redline-audit.1"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn durations_like_1m30s_and_warnings_for_odd_input() {
    let server = builtin();
    let url = format!("http://{}/", server.local_addr());
    let out = redline(&[
        "run",
        "-o",
        "json",
        "-q",
        "--no-save",
        "-n",
        "3",
        "-c",
        "1",
        "--timeout",
        "1m30s",
        "-m",
        "GTE",
        "--threshold",
        "p99<2500",
        &url,
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["timeout_s"], 90.0);
    assert_eq!(
        v["config"]["method"], "GTE",
        "a custom method is sent as given"
    );
    assert!(
        err.contains("GTE is not a standard HTTP method (did you mean GET?)"),
        "{err}"
    );
    assert!(
        err.contains("threshold 'p99<2500' has no unit: read as 2500 ms"),
        "{err}"
    );
    // A duration with parts is accepted wherever durations are: -d and --stages.
    let out = redline(&["run", "-q", "--no-save", "-c", "1", "-d", "0m0s500ms", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "--stages",
        "0m0s300ms:1,0h0m0.3s:1",
        &url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Nothing to warn about: nothing said.
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-n",
        "2",
        "-c",
        "1",
        "--threshold",
        "p99<2s",
        &url,
    ]);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    server.shutdown();
}

#[test]
fn no_save_is_accepted_by_every_command_that_saves() {
    for cmd in ["run", "find", "page", "audit", "fetch"] {
        let out = redline(&[cmd, "--help"]);
        assert!(
            stdout(&out).contains("--no-save"),
            "{cmd} --help has no --no-save"
        );
    }
    // audit --no-save is taken (it saves nothing): the audit runs.
    let server = builtin();
    let url = format!("http://{}/", server.local_addr());
    let out = redline(&["audit", "--no-save", "-q", "--no-probes", &url]);
    assert_ne!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!stdout(&out).is_empty());
    server.shutdown();
}

/// `redline completions bash | head -1` and `redline man | head`: a reader
/// that stops early ends the output quietly (exit 0, no panic), as `cat`
/// or `ls` would.
#[test]
fn completions_and_man_into_a_reader_that_stops_early() {
    use std::io::Read;
    for args in [
        ["completions", "bash"],
        ["completions", "powershell"],
        ["man", "run"],
    ] {
        let mut child = std::process::Command::new(bin())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 16];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        // The pipe is closed here, with most of the output still unwritten.
        let out = redline_testkit::proc::wait_limit(child, std::time::Duration::from_secs(30));
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// `--browser` (audit and page): a path that does not exist, or no
/// `chromium` on `PATH` for the bare flag (which leaves the URL after it
/// alone), is a usage error of one line, before any request.
#[test]
fn a_missing_browser_is_a_usage_error() {
    let server = builtin();
    let url = format!("http://{}/", server.local_addr());
    for cmd in ["audit", "page"] {
        let err = usage_error(&[cmd, "--no-save", "--browser=/nonexistent/chromium", &url]);
        assert!(
            err.contains("--browser /nonexistent/chromium: no such file"),
            "{err}"
        );
    }
    let child = std::process::Command::new(bin())
        .args(["audit", "--no-probes", "--browser", &url])
        .env("PATH", "/nonexistent")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_limit(child, std::time::Duration::from_secs(60));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no \"chromium\" on PATH"), "{err}");
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    server.shutdown();
}
