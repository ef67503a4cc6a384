//! Golden layout tests of the drop-ins: real `ab` (/usr/bin/ab) and real
//! `wrk` (/usr/bin/wrk) and `redline ab` / `redline wrk` run against the same
//! nginx, started by the test on a free loopback port, and their reports are
//! compared line by line: the same labels in the same order, the same units
//! and columns, numbers parsed as numbers and checked for sense (equal request
//! counts and bytes, never equal timings). Bad flags: one line, exit code 2.
//! A missing nginx, ab or wrk skips with a note, and fails under CI=true.

mod common;

use common::nginx::{free_port, start_nginx, Nginx, NginxSite};
use common::{missing, redline, usage_error, wait_limit};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The page every test serves: 440 bytes, as in the benchmark articles.
fn page() -> Vec<u8> {
    (0..440).map(|i| b'a' + (i % 26) as u8).collect()
}

/// nginx with the 440-byte page on `ng.port`, and on the second port (returned)
/// small dynamic answers: `/n` the connection's request number (its length
/// grows from 1 to 3 digits), `/c` the cookie `secret`, `/u` the Basic user.
fn nginx(tag: &str) -> Option<(Nginx, u16)> {
    let p2 = free_port();
    let extra = format!(
        "server {{ listen 127.0.0.1:{p2}; keepalive_requests 10000;
           location /n {{ return 200 \"$connection_requests\"; }}
           location /c {{ return 200 \"$cookie_secret\"; }}
           location /u {{ return 200 \"$remote_user\"; }} }}"
    );
    let files = [("index.html", page())];
    let ng = start_nginx(&NginxSite {
        tag,
        files: &files,
        tls: None,
        h2: false,
        http_extra: &extra,
        types: "text/html html;",
    })?;
    // The second server listens once the first does (one nginx process).
    Some((ng, p2))
}

/// The real tool at `path`, or None with a note (a failure under CI=true).
fn tool<'a>(path: &'a str, package: &str) -> Option<&'a str> {
    if std::path::Path::new(path).exists() {
        Some(path)
    } else {
        missing(&format!("{path} (apt-get install -y {package})"));
        None
    }
}

/// The real tool at `path` and [`nginx`] (`tag`): None, with a note, when
/// either is missing (a failure under CI=true).
fn tool_and_nginx<'a>(path: &'a str, package: &str, tag: &str) -> Option<(&'a str, Nginx, u16)> {
    let bin = tool(path, package)?;
    let (ng, p2) = nginx(tag)?;
    Some((bin, ng, p2))
}

/// Runs a real tool with a time limit; its stdout.
fn real(bin: &str, args: &[&str]) -> String {
    String::from_utf8(real_output(bin, args).stdout).expect("utf-8")
}

/// Runs a real tool with a time limit (exit code 0 required).
fn real_output(bin: &str, args: &[&str]) -> std::process::Output {
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = wait_limit(child, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{bin} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `redline SUB args`; its stdout (exit code 0 required).
fn run_ours(sub: &str, args: &[&str]) -> String {
    let mut all = vec![sub];
    all.extend_from_slice(args);
    let out = redline(&all);
    assert!(
        out.status.success(),
        "redline {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// ab's report from the real ab with `theirs` and from `redline ab` with
/// `ours` (the same run, but for where it writes files), asserted to have
/// the same layout: (theirs, ours).
fn ab_reports(ab: &str, theirs: &[&str], ours: &[&str]) -> (Vec<String>, Vec<String>) {
    let t = ab_report(&real(ab, theirs));
    let o = ab_report(&run_ours("ab", ours));
    same_layout(&t, &o, &format!("ab {}", ours[..ours.len() - 1].join(" ")));
    (t, o)
}

/// wrk's output lines from the real wrk and from `redline wrk`, both with
/// `args`, asserted to have the same layout: (theirs, ours).
fn wrk_lines(wrk: &str, args: &[&str]) -> (Vec<String>, Vec<String>) {
    let lines = |text: String| text.lines().map(String::from).collect::<Vec<_>>();
    let (t, o) = (lines(real(wrk, args)), lines(run_ours("wrk", args)));
    same_layout(&t, &o, &format!("wrk {}", args[..args.len() - 1].join(" ")));
    (t, o)
}

/// Runs `redline ARGS` (exit 0 required): its stdout and stderr together.
fn ours_all(args: &[&str]) -> String {
    let out = redline(args);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    text
}

/// The 440-byte page's URL on `ng`.
fn page_url(ng: &Nginx) -> String {
    format!("http://127.0.0.1:{}/index.html", ng.port)
}

/// A line's layout: each number (with a unit glued to it, as wrk writes
/// them) becomes `#` followed by the unit's kind, runs of spaces become one.
fn shape(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    let mut space = false;
    while let Some(c) = chars.next() {
        if c == ' ' {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            out.push(' ');
        }
        space = false;
        let starts_number = c.is_ascii_digit() && !out.ends_with(|p: char| p.is_ascii_alphabetic());
        if !starts_number {
            out.push(c);
            continue;
        }
        while chars
            .peek()
            .is_some_and(|d| d.is_ascii_digit() || *d == '.')
        {
            chars.next();
        }
        let mut unit = String::new();
        while chars.peek().is_some_and(|d| d.is_ascii_alphabetic()) {
            unit.push(chars.next().unwrap());
        }
        out.push('#');
        out.push_str(match unit.as_str() {
            "us" | "ms" | "s" | "m" | "h" => "<time>",
            // Counts (wrk's Req/Sec) scale by k/M/G with their size: a count.
            "k" | "M" | "G" => "",
            "" => "",
            "B" | "KB" | "MB" | "GB" => "<bytes>",
            other => other,
        });
    }
    out
}

/// Where a `Label:   value` line's value starts (the column layout).
fn value_column(line: &str) -> Option<usize> {
    let colon = line.find(':')?;
    let rest = &line[colon + 1..];
    let pad = rest.len() - rest.trim_start().len();
    (!rest.trim().is_empty()).then_some(colon + 1 + pad)
}

/// ab's report from "Server Software:" on, without ab's data-dependent
/// reliability notes (ERROR/WARNING on the median and mean, two lines each).
fn ab_report(out: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut skip = 0;
    let start = out.find("Server Software:").expect("a report");
    for l in out[start..].lines() {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        if l.starts_with("ERROR: The median") || l.starts_with("WARNING: The median") {
            skip = 1;
            continue;
        }
        lines.push(l.to_string());
    }
    lines
}

/// Asserts the two reports have the same layout line by line (and, for ab's
/// `Label:   value` fields, the same value column; right-aligned numbers such
/// as the Connection Times rows move with their width in both tools).
fn same_layout(theirs: &[String], ours: &[String], what: &str) {
    let t: Vec<String> = theirs.iter().map(|l| shape(l)).collect();
    let o: Vec<String> = ours.iter().map(|l| shape(l)).collect();
    assert_eq!(
        t,
        o,
        "{what}: layouts differ\n--- real:\n{}\n--- redline:\n{}",
        theirs.join("\n"),
        ours.join("\n")
    );
    let right_aligned = [
        "Connect:",
        "Processing:",
        "Waiting:",
        "Total:",
        "Requests/sec:",
        "Transfer/sec:",
    ];
    for (a, b) in theirs.iter().zip(ours) {
        if right_aligned.iter().any(|r| a.starts_with(r)) || a.starts_with(' ') {
            continue;
        }
        assert_eq!(
            value_column(a),
            value_column(b),
            "{what}: value column differs:\n  real:    {a}\n  redline: {b}"
        );
    }
}

/// The numbers on the line that starts with `label`.
fn numbers(lines: &[String], label: &str) -> Vec<f64> {
    let l = lines
        .iter()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no line {label:?} in:\n{}", lines.join("\n")));
    l[l.find(label).unwrap() + label.len()..]
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|t| !t.is_empty() && *t != ".")
        .map(|t| t.parse().unwrap())
        .collect()
}

fn first(lines: &[String], label: &str) -> f64 {
    numbers(lines, label)[0]
}

/// The sense checks of one ab report: percentages rise to the longest
/// request, the derived lines agree with the counted ones.
fn ab_sane(r: &[String], requests: f64, concurrency: f64) {
    assert_eq!(first(r, "Complete requests:"), requests);
    assert_eq!(first(r, "Concurrency Level:"), concurrency);
    let secs = first(r, "Time taken for tests:");
    let rps = first(r, "Requests per second:");
    assert!(
        // Time taken is printed to the millisecond.
        (rps * secs - requests).abs() <= requests * 0.01 + rps * 0.0005 + 1.0,
        "{rps} req/s over {secs} s"
    );
    let per = numbers(r, "Time per request:");
    let across = r
        .iter()
        .find(|l| l.contains("across all concurrent requests"))
        .map(|l| numbers(std::slice::from_ref(l), "Time per request:")[0])
        .unwrap();
    assert!((per[0] - concurrency * across).abs() <= 0.002 * concurrency + 0.001);
    let pcts: Vec<f64> = r
        .iter()
        .filter_map(|l| {
            let (p, rest) = l.trim_start().split_once('%')?;
            p.parse::<u32>().ok()?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .collect();
    assert_eq!(pcts.len(), 9, "{r:?}");
    assert!(pcts.windows(2).all(|w| w[0] <= w[1]), "{pcts:?}");
    let total = numbers(r, "Total:");
    assert_eq!(total.len(), 5);
    assert_eq!(total[4], pcts[8], "the longest request is the Total max");
}

#[test]
fn ab_layout_matches_real_ab() {
    let Some((ab, ng, _)) = tool_and_nginx("/usr/bin/ab", "apache2-utils", "dropin-ab") else {
        return;
    };
    let url = page_url(&ng);
    let args = ["-n", "400", "-c", "4", &url];
    let (theirs, ours) = ab_reports(ab, &args, &args);
    for r in [&theirs, &ours] {
        ab_sane(r, 400.0, 4.0);
        assert_eq!(first(r, "Document Length:"), 440.0);
        assert_eq!(first(r, "Failed requests:"), 0.0);
        assert_eq!(first(r, "HTML transferred:"), 400.0 * 440.0);
    }
    // Same requests on the wire (HTTP/1.0, as ab sends): the same bytes back.
    assert_eq!(
        first(&theirs, "Total transferred:"),
        first(&ours, "Total transferred:")
    );
    for label in [
        "Server Software:",
        "Server Hostname:",
        "Server Port:",
        "Document Path:",
    ] {
        let pick = |r: &[String]| r.iter().find(|l| l.starts_with(label)).cloned();
        assert_eq!(pick(&theirs), pick(&ours), "{label}");
    }
}

#[test]
fn ab_keepalive_counts_length_failures_as_ab_does() {
    let Some((ab, _ng, p2)) = tool_and_nginx("/usr/bin/ab", "apache2-utils", "dropin-ab-k") else {
        return;
    };
    // Each of the 3 connections answers "1", "2", … "100": the first response
    // is 1 byte long, so every response from the 10th on differs in length.
    let url = format!("http://127.0.0.1:{p2}/n");
    let args = ["-k", "-n", "300", "-c", "3", &url];
    let (theirs, ours) = ab_reports(ab, &args, &args);
    for r in [&theirs, &ours] {
        ab_sane(r, 300.0, 3.0);
        assert_eq!(first(r, "Keep-Alive requests:"), 300.0);
        assert_eq!(first(r, "Document Length:"), 1.0);
        assert_eq!(first(r, "Failed requests:"), 273.0);
        assert_eq!(numbers(r, "(Connect:"), vec![0.0, 0.0, 273.0, 0.0]);
    }
    // -l: variable length accepted, nothing failed.
    let args = ["-l", "-k", "-n", "30", "-c", "3", &url];
    let (_, ours) = ab_reports(ab, &args, &args);
    // Up to 150 requests (or with -q) ab has no progress lines, and says so.
    let out = run_ours("ab", &["-q", "-n", "200", &url]);
    assert!(
        out.contains("Benchmarking 127.0.0.1 (be patient).....done\n"),
        "{out}"
    );
    assert!(ours.iter().any(|l| l == "Document Length:        Variable"));
    assert_eq!(first(&ours, "Failed requests:"), 0.0);
}

#[test]
fn ab_post_body_and_output_files() {
    let Some((ab, ng, _)) = tool_and_nginx("/usr/bin/ab", "apache2-utils", "dropin-ab-p") else {
        return;
    };
    let dir = common::nginx::tmpdir("dropin-ab-files");
    std::fs::create_dir_all(&dir).unwrap();
    let body = dir.join("body.txt");
    std::fs::write(&body, "k=v&x=1").unwrap();
    let file = |name: &str| dir.join(name).display().to_string();
    // nginx answers POST to a static file with 405: the Non-2xx line shows.
    let url = page_url(&ng);
    let b = body.display().to_string();
    let (e1, g1, e2, g2) = (file("a.csv"), file("a.tsv"), file("b.csv"), file("b.tsv"));
    let form = "application/x-www-form-urlencoded";
    let theirs_args = [
        "-n", "50", "-c", "2", "-p", &b, "-T", form, "-e", &e1, "-g", &g1, &url,
    ];
    // The same run, writing its files next to the real ab's.
    let mut ours_args = theirs_args;
    (ours_args[9], ours_args[11]) = (&e2, &g2);
    let (theirs, ours) = ab_reports(ab, &theirs_args, &ours_args);
    for r in [&theirs, &ours] {
        ab_sane(r, 50.0, 2.0);
        assert_eq!(first(r, "Non-2xx responses:"), 50.0);
        // The 405 page's length: ab's is the first response's, whatever its status.
        assert_eq!(
            first(r, "Document Length:"),
            first(&theirs, "Document Length:")
        );
        // Whole requests written (heads and the 7-byte body), as ab counts.
        assert!(first(r, "Total body sent:") > 50.0 * 7.0);
    }
    // -e: the same header and 101 rows, times rising.
    let (a, b) = (
        std::fs::read_to_string(&e1).unwrap(),
        std::fs::read_to_string(&e2).unwrap(),
    );
    let shapes = |s: &str| s.lines().map(shape).collect::<Vec<_>>();
    assert_eq!(shapes(&a), shapes(&b));
    assert_eq!(b.lines().count(), 102);
    let times: Vec<f64> = b
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    // -g: the same header, one row per request, the same columns.
    let (a, b) = (
        std::fs::read_to_string(&g1).unwrap(),
        std::fs::read_to_string(&g2).unwrap(),
    );
    assert_eq!(a.lines().next(), b.lines().next());
    assert_eq!(a.lines().count(), b.lines().count());
    assert_eq!(b.lines().count(), 51);
    for l in b.lines().skip(1) {
        let f: Vec<&str> = l.split('\t').collect();
        assert_eq!(f.len(), 6, "{l}");
        // ctime's layout, e.g. "Thu Nov 26 00:16:12 2026".
        let want = shape(a.lines().nth(1).unwrap().split('\t').next().unwrap());
        assert_eq!(shape(f[0]).len(), want.len(), "{l}");
        for n in &f[1..] {
            n.parse::<u64>().unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ab_sends_cookie_and_auth_without_printing_them() {
    let Some((_ng, p2)) = nginx("dropin-ab-secret") else {
        return;
    };
    // The server echoes the cookie (3 bytes) and the Basic user (6 bytes).
    let c = format!("http://127.0.0.1:{p2}/c");
    let text = ours_all(&["ab", "-n", "3", "-C", "secret=zq9", &c]);
    assert!(text.contains("Document Length:        3 bytes"), "{text}");
    assert!(!text.contains("zq9"), "{text}");
    let u = format!("http://127.0.0.1:{p2}/u");
    let text = ours_all(&["ab", "-n", "3", "-A", "tester:pw7x", &u]);
    assert!(text.contains("Document Length:        6 bytes"), "{text}");
    assert!(
        !text.contains("pw7x") && !text.contains("dGVzdGVy"),
        "{text}"
    );
}

/// A password or token in the URL appears in no output of either drop-in:
/// not wrk's `Running … @ URL` line, not ab's report, not an error line
/// (the built-in target: no nginx needed). What is shown is `[redacted]`.
#[test]
fn dropins_never_print_url_credentials() {
    let srv = common::builtin();
    let a = srv.local_addr();
    let url = format!("http://u:PASSW0RDq@{a}/?size=10");
    let text = ours_all(&["wrk", "-t", "1", "-c", "1", "-d", "1s", &url]);
    assert!(!text.contains("PASSW0RDq"), "{text}");
    assert!(
        text.starts_with(&format!(
            "Running 1s test @ http://u:[redacted]@{a}/?size=10\n"
        )),
        "{text}"
    );
    let text = ours_all(&[
        "wrk",
        "-t",
        "1",
        "-c",
        "1",
        "-d",
        "1s",
        &format!("http://T0KENq@{a}/"),
    ]);
    assert!(
        !text.contains("T0KENq") && text.contains("[redacted]@"),
        "{text}"
    );
    let text = ours_all(&["ab", "-n", "3", &url]);
    assert!(!text.contains("PASSW0RDq"), "{text}");
    for bad in [
        format!("http://u:PASSW0RDq@{a}:99999/"),
        "http://u:PASSW0RDq@[bad/".to_string(),
    ] {
        for tool in ["ab", "wrk"] {
            let e = usage_error(&[tool, &bad]);
            assert!(
                !e.contains("PASSW0RDq") && e.contains("[redacted]"),
                "{tool}: {e}"
            );
        }
    }
}

#[test]
fn ab_time_limit_is_a_time_limit() {
    let Some((ng, _)) = nginx("dropin-ab-t") else {
        return;
    };
    // ab's -t is seconds (not threads) and caps the run at 50000 requests.
    let url = page_url(&ng);
    let r = ab_report(&run_ours("ab", &["-t", "1", "-c", "2", &url]));
    let done = first(&r, "Complete requests:");
    assert!(done > 0.0 && done <= 50_000.0, "{done}");
    let secs = first(&r, "Time taken for tests:");
    assert!(secs >= 0.9 || done == 50_000.0, "{secs} s, {done} requests");
}

#[test]
fn wrk_layout_matches_real_wrk() {
    let Some((wrk, ng, _)) = tool_and_nginx("/usr/bin/wrk", "wrk", "dropin-wrk") else {
        return;
    };
    // A missing page: nginx's 404s make wrk's "Non-2xx or 3xx" line show.
    let url = format!("http://127.0.0.1:{}/missing", ng.port);
    let args = ["-t", "1", "-c", "2", "-d", "2s", "--latency", &url];
    let (theirs, ours) = wrk_lines(wrk, &args);
    // The first two lines are the same text.
    assert_eq!(theirs[..2], ours[..2]);
    assert_eq!(ours[0], format!("Running 2s test @ {url}"));
    for r in [&theirs, &ours] {
        let requests = r.iter().find(|l| l.contains(" requests in ")).unwrap();
        let n: f64 = requests.split_whitespace().next().unwrap().parse().unwrap();
        assert!(n > 0.0, "{requests}");
        assert_eq!(
            first(r, "Non-2xx or 3xx responses:"),
            n,
            "every answer was a 404"
        );
        let secs: f64 = requests
            .split(" in ")
            .nth(1)
            .unwrap()
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .split(|c: char| c.is_ascii_alphabetic())
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let rps = first(r, "Requests/sec:");
        assert!(
            (rps * secs - n).abs() <= n * 0.02 + 1.0,
            "{rps} * {secs} vs {n}"
        );
        let dist: Vec<&String> = r
            .iter()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && l.contains('%'))
            .collect();
        assert_eq!(dist.len(), 4);
    }
    // Without --latency, no distribution, as wrk.
    let args = ["-t", "1", "-c", "1", "-d", "1", &url];
    let (_, ours) = wrk_lines(wrk, &args);
    assert!(!ours.iter().any(|l| l.contains("Latency Distribution")));
}

#[test]
fn ab_progress_lines_as_ab_prints_them() {
    let Some((ab, ng, _)) = tool_and_nginx("/usr/bin/ab", "apache2-utils", "dropin-ab-heartbeat")
    else {
        return;
    };
    let url = page_url(&ng);
    let stderr = |out: std::process::Output| {
        assert!(out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let theirs = stderr(real_output(ab, &["-n", "1000", "-c", "5", &url]));
    let ours = stderr(redline(&["ab", "-n", "1000", "-c", "5", &url]));
    // "Completed 100 requests" … "Completed 1000 requests", "Finished 1000 requests".
    assert_eq!(theirs, ours);
    assert_eq!(ours.lines().count(), 11);
}

#[test]
fn bad_flags_are_one_line_and_exit_2() {
    for args in [
        &["ab", "-Z", "http://127.0.0.1:1/"][..],
        &["ab", "-n", "many", "http://127.0.0.1:1/"],
        &["ab", "-c", "10", "-n", "2", "http://127.0.0.1:1/"],
        &["ab", "-X", "proxy:3128", "http://127.0.0.1:1/"],
        &["ab", "127.0.0.1:1"],
        &["ab", "-p", "/nonexistent/body", "http://127.0.0.1:1/"],
        &["ab"],
        &["wrk", "-s", "script.lua", "http://127.0.0.1:1/"],
        &["wrk", "-t", "4", "-c", "2", "http://127.0.0.1:1/"],
        &["wrk", "--bogus", "http://127.0.0.1:1/"],
        &["wrk", "-d", "\u{1b}[2J", "http://127.0.0.1:1/"],
        &["wrk"],
    ] {
        let err = usage_error(args);
        assert!(err.starts_with("redline: error: "), "{args:?}: {err}");
    }
    let out = redline(&["wrk", "-s", "x.lua", "http://127.0.0.1:1/"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--scenario"));
    // Help is not an error.
    for (sub, help) in [
        ("ab", "-h"),
        ("ab", "--help"),
        ("wrk", "-h"),
        ("wrk", "--help"),
    ] {
        let out = redline(&[sub, help]);
        assert_eq!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: redline"));
    }
}

/// A port nothing listens on (bound, then closed: connects are refused).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Runs `bin args` with a time limit, any exit code: (code, stdout, stderr).
fn any_output(bin: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = wait_limit(child, Duration::from_secs(30));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A refused connection (issue 35, point 5): `redline ab` and `redline wrk`
/// say what ab and wrk say, on the same stream, with the same exit code,
/// at once (wrk connects once before it starts; ab stops at the first
/// refusal unless -r), checked against the real tools.
#[test]
fn refused_connection_as_ab_and_wrk_say_it() {
    let port = closed_port();
    if let Some(ab) = tool("/usr/bin/ab", "apache2-utils") {
        for args in [
            &["-n", "100", "-c", "4"][..],
            &["-k", "-n", "1000", "-c", "8"][..],
        ] {
            let url = format!("http://127.0.0.1:{port}/");
            let mut a = args.to_vec();
            a.push(&url);
            let (code, out, err) = any_output(ab, &a);
            let mut ours = vec!["ab"];
            ours.extend_from_slice(&a);
            let t0 = std::time::Instant::now();
            let (our_code, our_out, our_err) = any_output(common::bin(), &ours);
            assert!(t0.elapsed() < Duration::from_secs(5));
            assert_eq!(our_code, code, "ab {a:?}: {our_err}");
            assert_eq!(our_err, err, "ab {a:?}");
            // stdout ends as ab's does: the "Benchmarking" line, no report.
            let last = |s: &str| s.lines().last().unwrap_or("").to_string();
            assert_eq!(last(&our_out), last(&out), "ab {a:?}");
            assert!(!our_out.contains("Complete requests"), "{our_out}");
        }
        assert_eq!(
            any_output(ab, &["-n", "1", &format!("http://127.0.0.1:{port}/")]).0,
            Some(111)
        );
    }
    if let Some(wrk) = tool("/usr/bin/wrk", "wrk") {
        for host in ["127.0.0.1", "localhost"] {
            let url = format!("http://{host}:{port}/");
            let a = ["-t2", "-c16", "-d5s", url.as_str()];
            let (code, out, err) = any_output(wrk, &a);
            let t0 = std::time::Instant::now();
            let (our_code, our_out, our_err) =
                any_output(common::bin(), &["wrk", "-t2", "-c16", "-d5s", &url]);
            assert!(t0.elapsed() < Duration::from_secs(3), "wrk stops at once");
            assert_eq!(our_code, code, "{our_err}");
            assert_eq!(our_out, out);
            assert_eq!(our_err, err);
        }
    }
}
