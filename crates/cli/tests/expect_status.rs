//! One status rule everywhere (issue 35, point 2): against a real nginx, a
//! URL answered by 301 passes `errors<1%` (2xx and 3xx succeed by default)
//! and fails it with `--expect-status 200-299`, in the exit code, the text
//! report's "Succeeded", JUnit and the stage table alike; a scenario as
//! `import har` writes it, whose conditional requests get 304s, passes; a bad
//! rule is one line, exit 2.

mod common;

use common::nginx::{start_nginx, tmpdir, NginxSite};
use common::{redline, usage_error};

fn site() -> Option<common::nginx::Nginx> {
    start_nginx(&NginxSite {
        tag: "expect-status",
        files: &[
            ("dir/index.html", b"<p>dir</p>".to_vec()),
            ("page.html", vec![b'x'; 440]),
        ],
        tls: None,
        h2: false,
        // Any If-Modified-Since at or after the file's time gets a 304.
        http_extra: "if_modified_since before;",
        types: "text/html html;",
    })
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_redirect_succeeds_unless_the_rule_says_otherwise() {
    let Some(ng) = site() else { return };
    // nginx answers a directory without its slash with 301.
    let url = format!("http://127.0.0.1:{}/dir", ng.port);
    let dir = tmpdir("expect-status-junit");
    let junit = dir.join("j.xml");
    let junit_s = junit.display().to_string();
    let base = [
        "run",
        "--no-save",
        "--no-tui",
        "-n",
        "200",
        "-c",
        "2",
        "--threshold",
        "errors<1%",
        "--junit",
        &junit_s,
    ];
    let mut args: Vec<&str> = base.to_vec();
    args.push(&url);
    let out = redline(&args);
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("0 with a status outside 200-399"), "{text}");
    assert!(
        text.contains("Succeeded:        200 of 200 scheduled (100.0%)"),
        "{text}"
    );
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(x.contains("failures=\"0\""), "{x}");

    // Only 2xx: every 301 is a failed request, in every view.
    let mut args: Vec<&str> = base.to_vec();
    args.extend(["--expect-status", "200-299", &url]);
    let out = redline(&args);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(text.contains("200 with a status outside 200-299"), "{text}");
    assert!(
        text.contains("Succeeded:        0 of 200 scheduled"),
        "{text}"
    );
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(x.contains("failures=\"1\""), "{x}");

    // The rule is recorded with the run, so a saved record re-judged later
    // (here: its JSON) says which statuses counted.
    let mut args: Vec<&str> = vec!["run", "--no-save", "-q", "-o", "json", "-n", "20"];
    args.extend(["--expect-status", "2xx,301", &url]);
    let out = redline(&args);
    assert!(out.status.success());
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["config"]["expect_status"], "200-299,301");
    assert_eq!(rec["status_codes"]["301"], 20);
    common::assert_run_schema(&rec);

    // Stages: the stage table's errors column follows the rule too.
    let mut args: Vec<&str> = vec![
        "run",
        "--no-save",
        "--no-tui",
        "--stages",
        "1s:1,1s:2",
        "--step",
    ];
    args.extend(["--expect-status", "200-299", &url]);
    let out = redline(&args);
    let text = stdout(&out);
    assert!(
        text.contains("errors include statuses outside 200-299"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_har_scenario_with_304s_passes() {
    let Some(ng) = site() else { return };
    let dir = tmpdir("expect-status-har");
    let sc = dir.join("s.toml");
    // What `import har` writes for a page and a revalidated asset.
    std::fs::write(
        &sc,
        format!(
            "name = \"har\"\nbase = \"http://127.0.0.1:{}\"\n\n\
             [[request]]\nname = \"page\"\npath = \"/page.html\"\n\n\
             [[request]]\nname = \"revalidate\"\npath = \"/page.html\"\n\
             headers = {{ \"If-Modified-Since\" = \"Fri, 01 Jan 2100 00:00:00 GMT\" }}\n",
            ng.port
        ),
    )
    .unwrap();
    let sc_s = sc.display().to_string();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--no-save",
            "--no-tui",
            "--scenario",
            &sc_s,
            "-n",
            "100",
            "-c",
            "2",
            "--threshold",
            "errors<1%",
        ];
        args.extend_from_slice(extra);
        redline(&args)
    };
    let out = run(&["-o", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let req = rec["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "revalidate")
        .unwrap();
    assert!(req["completed"].as_u64().unwrap() > 0, "{req}");
    assert_eq!(req["statuses"]["304"], req["completed"], "{req}");
    // The per-request table calls them ok, as the threshold did.
    let out = run(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.trim_start().starts_with("revalidate "))
        .unwrap_or_else(|| panic!("{text}"))
        .split_whitespace()
        .collect();
    // request, sent, ok, status✗, errors, checks✗
    assert_eq!(row[1], row[2], "{text}");
    assert_eq!(row[3], "0", "{text}");
    // Narrowed to 2xx, the same answers fail the run.
    let out = run(&["--expect-status", "2xx"]);
    assert_eq!(out.status.code(), Some(4), "{}", stdout(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_rule_is_one_line_exit_2() {
    for bad in ["abc", "299-200", "1000", "200,,301"] {
        let e = usage_error(&["run", "--expect-status", bad, "http://127.0.0.1:1/"]);
        assert!(e.contains("--expect-status"), "{e}");
    }
}
