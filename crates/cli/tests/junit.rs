//! `--junit FILE`: the file is valid against the JUnit schema Jenkins and
//! GitLab read (crates/report/tests/junit.xsd, checked with xmllint), and its
//! counts say what the run's thresholds said; an unwritable file is exit 1.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn xsd() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/junit.xsd")
}

/// xmllint is there (a skip locally, a failure in CI, when it is not).
fn xmllint() -> bool {
    let present = Command::new("xmllint").arg("--version").output().is_ok();
    redline_testkit::need::require("xmllint (Debian package libxml2-utils)", present)
}

fn validate(file: &Path) {
    let o = Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(xsd())
        .arg(file)
        .output()
        .expect("xmllint runs");
    assert!(
        o.status.success(),
        "{} is not valid JUnit XML: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn xpath(file: &Path, expr: &str) -> String {
    let o = Command::new("xmllint")
        .args(["--xpath", expr])
        .arg(file)
        .output()
        .expect("xmllint runs");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("redline-junit-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn run_writes_one_case_per_threshold_with_the_failure() {
    if !xmllint() {
        return;
    }
    let srv = builtin();
    let url = format!("http://{}/?size=100", srv.local_addr());
    let file = tmp("run.xml");
    let o = redline(&[
        "run",
        "-q",
        "-n",
        "200",
        "-c",
        "2",
        "--threshold",
        "errors<1%",
        "--threshold",
        "p50<1us",
        "--junit",
        file.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(o.status.code(), Some(4), "{o:?}");
    validate(&file);
    let s = "string(/testsuites/testsuite/@";
    assert_eq!(xpath(&file, &format!("{s}tests)")), "2");
    assert_eq!(xpath(&file, &format!("{s}failures)")), "1");
    assert_eq!(xpath(&file, &format!("{s}errors)")), "0");
    // The failing case is the latency bound, with the measured value.
    let failed = xpath(&file, "string(//testcase[failure]/@name)");
    assert_eq!(failed, "p50<1us");
    let msg = xpath(&file, "string(//testcase[failure]/failure/@message)");
    assert!(msg.contains("measured"), "{msg}");
    assert_eq!(
        xpath(&file, "count(//testcase[@name='errors<1%']/failure)"),
        "0"
    );
}

#[test]
fn run_without_thresholds_is_one_passing_case() {
    if !xmllint() {
        return;
    }
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let file = tmp("plain.xml");
    let o = redline(&[
        "run",
        "-q",
        "-n",
        "50",
        "-c",
        "1",
        "--junit",
        file.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    validate(&file);
    assert_eq!(xpath(&file, "string(//testcase/@name)"), "run completed");
    assert_eq!(xpath(&file, "string(/testsuites/testsuite/@tests)"), "1");
    assert_eq!(xpath(&file, "string(/testsuites/testsuite/@failures)"), "0");
}

#[test]
fn run_with_nothing_answered_fails_its_case() {
    if !xmllint() {
        return;
    }
    // A port that was just free: nothing listens, every connect is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let file = tmp("refused.xml");
    let url = format!("http://127.0.0.1:{port}/");
    let o = redline(&[
        "run",
        "-q",
        "-n",
        "5",
        "-c",
        "1",
        "--junit",
        file.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    validate(&file);
    assert_eq!(xpath(&file, "string(/testsuites/testsuite/@failures)"), "1");
    let msg = xpath(&file, "string(//testcase/failure/@message)");
    assert_eq!(msg, "no request was answered");
}

#[test]
fn unwritable_junit_file_is_one_line_and_exit_1() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let o = redline(&[
        "run",
        "-q",
        "-n",
        "10",
        "--junit",
        "/nonexistent-dir/x/report.xml",
        &url,
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<_> = err.lines().filter(|l| l.contains("--junit")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("redline: error: cannot write --junit"),
        "{err}"
    );
    // The report itself still reached stdout.
    assert!(!o.stdout.is_empty());
}

#[test]
fn find_writes_the_slo_verdict() {
    if !xmllint() {
        return;
    }
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let file = tmp("find.xml");
    // No rate can meet a 1µs median: the one case fails, with the answer.
    let o = redline(&[
        "find",
        "--slo",
        "p50<1us",
        "--start-rate",
        "20",
        "--max-steps",
        "1",
        "--warmup",
        "1s",
        "--step-duration",
        "1s",
        "-t",
        "1",
        "--no-save",
        "--junit",
        file.to_str().unwrap(),
        &url,
    ]);
    assert_ne!(o.status.code(), Some(0), "{o:?}");
    validate(&file);
    assert_eq!(xpath(&file, "string(/testsuites/testsuite/@tests)"), "1");
    assert_eq!(xpath(&file, "string(/testsuites/testsuite/@failures)"), "1");
    assert_eq!(xpath(&file, "string(//testcase/@name)"), "SLO p50<1us");
    let out = xpath(&file, "string(//testcase/system-out)");
    assert!(out.contains("no rate met the SLO"), "{out}");
}

#[test]
fn audit_has_one_case_per_check_failing_at_the_level() {
    if !xmllint() {
        return;
    }
    let body = "<html><p>hello</p></html>";
    let (srv, _) = routed_server(move |_, _| {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    });
    let file = tmp("audit.xml");
    let o = redline(&[
        "audit",
        "-q",
        "-o",
        "json",
        "--fail-on",
        "info",
        "--junit",
        file.to_str().unwrap(),
        &srv.url(),
    ]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    validate(&file);
    // The counts are the JSON report's: every check a case, the N/A ones
    // skipped, the applicable ones at info or worse failed.
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let checks = v["checks"].as_array().unwrap();
    let na = checks.iter().filter(|c| c["applicable"] == false).count();
    let bad = checks
        .iter()
        .filter(|c| c["applicable"] == true && c["severity"] != "ok")
        .count();
    assert!(bad > 0, "the bare page has notes: {v}");
    let s = "string(/testsuites/testsuite/@";
    assert_eq!(
        xpath(&file, &format!("{s}tests)")),
        checks.len().to_string()
    );
    assert_eq!(xpath(&file, &format!("{s}failures)")), bad.to_string());
    assert_eq!(xpath(&file, &format!("{s}skipped)")), na.to_string());
}

#[test]
fn tune_has_one_case_per_finding_failing_at_the_level() {
    if !xmllint() {
        return;
    }
    let conf = format!(
        "{}/../watch/tests/fixtures/debian-apache2/apache2.conf",
        env!("CARGO_MANIFEST_DIR")
    );
    // The text's summary line: "1 to fix [!!], 2 to consider [--], 10 fine [OK]".
    for (level, failing) in [("warning", 1), ("info", 3)] {
        let file = tmp(&format!("tune-{level}.xml"));
        let o = redline(&[
            "tune",
            "--no-tools",
            "--fail-on",
            level,
            "--junit",
            file.to_str().unwrap(),
            &conf,
        ]);
        assert_eq!(o.status.code(), Some(3), "{o:?}");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("1 to fix [!!], 2 to consider [--], 10 fine [OK]"),
            "{text}"
        );
        validate(&file);
        let s = "string(/testsuites/testsuite/@";
        assert_eq!(xpath(&file, &format!("{s}tests)")), "13");
        assert_eq!(xpath(&file, &format!("{s}failures)")), failing.to_string());
    }
    let file = tmp("tune-warning.xml");
    let failed = xpath(&file, "string(//testcase[failure]/@name)");
    assert!(failed.starts_with("timeout_high ("), "{failed}");
}

#[test]
fn tune_unwritable_junit_file_is_one_line_and_exit_1() {
    let conf = format!(
        "{}/../watch/tests/fixtures/lighttpd/lighttpd.conf",
        env!("CARGO_MANIFEST_DIR")
    );
    let o = redline(&[
        "tune",
        "--no-tools",
        "--junit",
        "/nonexistent-dir/t.xml",
        &conf,
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot write --junit /nonexistent-dir/t.xml"),
        "{err}"
    );
}
