//! Test helpers of the `redline` binary's integration tests: the binary's
//! path and the shared helpers of `redline-testkit` (scripted servers, TLS
//! PKI, nginx, run-to-JSON, CI's rule for missing servers) bound to it, plus
//! the built-in target and the run-record schema check.
#![allow(dead_code, unused_imports)]

pub mod coord;
pub mod nginx;

pub use redline_testkit::chromium::{chromium, chromium_dump};
pub use redline_testkit::need::missing;
pub use redline_testkit::proc::{
    assert_planned_sends_accounted, counter, error_count, wait_limit, warning_codes,
    warning_messages,
};
pub use redline_testkit::script::*;
pub use redline_testkit::timing::timing_sensitive;
use std::process::Output;
use std::time::Duration;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_redline")
}

/// Runs redline with a hard time limit (kills it past `limit`).
pub fn redline_with_limit(args: &[&str], limit: Duration) -> (Output, Duration) {
    redline_testkit::proc::run_with_limit(bin(), args, limit)
}

/// Runs redline (60 s at most).
pub fn redline(args: &[&str]) -> Output {
    redline_with_limit(args, Duration::from_secs(60)).0
}

/// Runs redline with bad input `args`: asserts the documented exit 2, one
/// line on stderr (no terminal escapes) and nothing on stdout; that line.
pub fn usage_error(args: &[&str]) -> String {
    let out = redline(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    assert!(!err.contains('\u{1b}'), "{args:?}: {err:?}");
    assert!(
        out.stdout.is_empty(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    err
}

/// Runs `redline run -o json -q --no-save ARGS` frozen (SIGSTOP) from `at` for `length`.
pub fn run_json_frozen(args: &[&str], at: Duration, length: Duration) -> serde_json::Value {
    redline_testkit::proc::run_json_frozen(bin(), args, at, length)
}

/// Runs `redline run --output json -q ARGS` and parses the record (see
/// `redline_testkit::proc::run_json`).
pub fn run_json(args: &[&str]) -> serde_json::Value {
    redline_testkit::proc::run_json(bin(), args)
}

/// Runs redline with `args` and asserts it succeeded (its output shown if not).
pub fn redline_ok(args: &[&str]) -> Output {
    let out = redline(args);
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Runs redline with `args`, asserts it succeeded, and parses its stdout
/// as JSON (`page`/`audit -o json`).
pub fn json_ok(args: &[&str]) -> serde_json::Value {
    let out = redline_ok(args);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The built-in target in this process.
pub fn builtin() -> redline_serve::Server {
    redline_serve::Server::start(redline_serve::ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
    })
    .expect("start built-in server")
}

/// Asserts that a run record fits the committed `docs/run-record.schema.json`.
pub fn assert_run_schema(v: &serde_json::Value) {
    assert_schema("run-record.schema.json", v)
}

/// Asserts that `v` fits the committed schema `docs/NAME`.
pub fn assert_schema(name: &str, v: &serde_json::Value) {
    let path = format!("{}/../../docs/{name}", env!("CARGO_MANIFEST_DIR"));
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}
