//! Running a binary under test: with a hard time limit (killed past it), its
//! history in a temporary database (never the user's real one), and its
//! `run -o json` record parsed, with the counters a test reads.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (by its PID, never by name) and reaped when dropped.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A command for `bin`: no stdin, its output captured, `REDLINE_DB` in the
/// temporary directory (never the user's history).
pub fn command(bin: &str) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env(
        "REDLINE_DB",
        std::env::temp_dir().join(format!("redline-tests-{}.db", std::process::id())),
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

/// Starts `bin` with `args` (see [`command`]).
pub fn spawn(bin: &str, args: &[&str]) -> Child {
    command(bin).args(args).spawn().expect("spawn redline")
}

/// Runs `bin` with a hard time limit: its output and how long it took.
pub fn run_with_limit(bin: &str, args: &[&str], limit: Duration) -> (Output, Duration) {
    let start = Instant::now();
    let child = spawn(bin, args);
    let out = wait_limit(child, limit);
    (out, start.elapsed())
}

/// Waits for `child` at most `limit` (polling every 10 ms); past it, kills
/// the child and panics with its stderr. Its stdout and stderr are read
/// while it runs, so output past a pipe's 64 KiB does not stall it.
pub fn wait_limit(mut child: Child, limit: Duration) -> Output {
    fn drain<R: std::io::Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let start = Instant::now();
    let status = loop {
        match child.try_wait().expect("wait") {
            Some(st) => break st,
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = err.join().unwrap_or_default();
                panic!(
                    "redline did not finish within {limit:?}; stderr: {}",
                    String::from_utf8_lossy(&stderr)
                );
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Runs `bin run --output json -q ARGS` (60 s at most) and parses the
/// record; panics on a non-zero exit, except the documented exit 1 of a run
/// that got no answer at all (its record is still printed).
pub fn run_json(bin: &str, args: &[&str]) -> serde_json::Value {
    let mut a: Vec<&str> = vec!["run", "--output", "json", "-q"];
    a.extend_from_slice(args);
    let (out, _) = run_with_limit(bin, &a, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}; stderr: {err}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let no_answer = out.status.code() == Some(1)
        && counter(&v, "completed") == 0
        && err.contains("no request was answered");
    assert!(
        out.status.success() || no_answer,
        "redline {a:?} failed: {}\n{err}",
        out.status,
    );
    v
}

/// Runs `bin run -o json -q --no-save ARGS`, freezing the whole process
/// (SIGSTOP, as a host stall would) from `at` after its start for `length`;
/// the parsed record. Panics on a non-zero exit.
pub fn run_json_frozen(
    bin: &str,
    args: &[&str],
    at: Duration,
    length: Duration,
) -> serde_json::Value {
    let mut all = vec!["run", "-o", "json", "-q", "--no-save"];
    all.extend_from_slice(args);
    let child = spawn(bin, &all);
    let pid = child.id() as libc::pid_t;
    std::thread::sleep(at);
    // SAFETY: signals to our own child process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(length);
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let out = wait_limit(child, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON run record")
}

/// A run record's counter.
pub fn counter(v: &serde_json::Value, name: &str) -> u64 {
    v["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// A run record's count of errors of `kind`.
pub fn error_count(v: &serde_json::Value, kind: &str) -> u64 {
    v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["count"].as_u64().unwrap())
        .sum()
}

/// The codes of a run record's warnings, in order.
pub fn warning_codes(v: &serde_json::Value) -> Vec<&str> {
    v["warnings"]
        .as_array()
        .map(|a| a.iter().filter_map(|w| w["code"].as_str()).collect())
        .unwrap_or_default()
}

/// The messages of a run record's warnings with `code`, in order.
pub fn warning_messages<'a>(v: &'a serde_json::Value, code: &str) -> Vec<&'a str> {
    v["warnings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|w| w["code"] == code)
                .filter_map(|w| w["message"].as_str())
                .collect()
        })
        .unwrap_or_default()
}

/// The run record accounts for all `planned` sends of a frozen open-loop
/// run: every one scheduled, each ended exactly once, and at least `min_not_sent`
/// of them counted as never sent (the ones the frozen client did not release).
pub fn assert_planned_sends_accounted(v: &serde_json::Value, planned: u64, min_not_sent: u64) {
    assert_eq!(counter(v, "scheduled"), planned, "{}", v["counters"]);
    let ended = counter(v, "completed")
        + counter(v, "failed")
        + counter(v, "in_flight_at_end")
        + counter(v, "not_sent");
    assert_eq!(ended, planned, "{}", v["counters"]);
    assert!(counter(v, "not_sent") >= min_not_sent, "{}", v["counters"]);
}
