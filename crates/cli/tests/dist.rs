//! Distributed runs on one machine: a coordinator and agents as separate
//! processes against the built-in target on 127.0.0.1, merged exactly; an
//! agent killed mid-run is named and the run marked incomplete; a duplicate
//! index is refused; the Kubernetes manifests pass our structural checks and,
//! when `kubernetes-validate` is installed (pip), the Kubernetes schemas.

mod common;

use common::coord::{agent, agents_succeed, Coord};
use common::*;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
/// Starts redline with no stdin and both outputs captured.
fn spawn_piped(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn redline")
}

fn hist_count(v: &serde_json::Value) -> u64 {
    v["latency"]["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no latency count in {}", v["latency"]))
}

#[test]
fn three_agents_merge_exactly_with_one_verdict() {
    let srv = builtin();
    let url = format!("http://{}/?size=100", srv.local_addr());
    let mut c = Coord::start(&[
        "--agents",
        "3",
        "--threshold",
        "errors<1%",
        "--threshold",
        "p50<10s",
    ]);
    let run = [url.as_str(), "-n", "3000", "-c", "6", "-t", "1"];
    let agents: Vec<Child> = (0..3).map(|i| agent(i, 3, c.port, &run)).collect();
    c.wait_for("all agents ready", Duration::from_secs(30));
    let parts: Vec<serde_json::Value> = agents
        .into_iter()
        .map(|a| {
            let out = wait_limit(a, Duration::from_secs(60));
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice(&out.stdout).expect("the agent prints its record")
        })
        .collect();
    let (m, err) = c.finish_record(0);
    // Exact shares: 1000 requests and 2 connections each; the whole is exact.
    for p in &parts {
        assert_eq!(counter(p, "completed"), 1000);
        assert_eq!(p["config"]["load"]["connections"], 2);
    }
    assert_eq!(counter(&m, "completed"), 3000);
    assert_eq!(counter(&m, "failed"), 0);
    assert_eq!(m["config"]["load"]["connections"], 6);
    assert_eq!(m["config"]["load"]["requests"], 3000);
    assert_eq!(m["merged_runs"], 3);
    assert_eq!(m["interrupted"], false);
    // The merged histogram is the union of the parts.
    let sum: u64 = parts.iter().map(hist_count).sum();
    assert_eq!(hist_count(&m), sum);
    assert_eq!(hist_count(&m), 3000);
    let series_sum = |v: &serde_json::Value| -> u64 {
        v["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["requests"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(series_sum(&m), parts.iter().map(series_sum).sum::<u64>());
    // Thresholds once, on the merge; clock offsets measured and reported.
    assert!(
        err.contains("threshold PASS") || err.contains("PASS"),
        "{err}"
    );
    assert_eq!(err.matches("ready (clock offset").count(), 3, "{err}");
    // The live per-second view: each second merged over the agents' pushed
    // histograms; together the seconds hold the whole load.
    let live: u64 = err
        .lines()
        .filter_map(|l| l.split("second ").nth(1))
        .filter_map(|l| {
            l.split(": ")
                .nth(1)?
                .split(' ')
                .next()?
                .replace(',', "")
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert_eq!(live, 3000, "{err}");
    assert!(err.contains("(3 agents)"), "{err}");
    assert_eq!(srv.stats().requests, 3000);
    srv.shutdown();

    // A failing bound on the merged record: exit 4.
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let c = Coord::start(&["--agents", "2", "--threshold", "rps<0.001"]);
    let run = [url.as_str(), "-n", "40", "-c", "2", "-t", "1"];
    let agents: Vec<Child> = (0..2).map(|i| agent(i, 2, c.port, &run)).collect();
    for a in agents {
        wait_limit(a, Duration::from_secs(60));
    }
    let (m, _) = c.finish_record(4);
    assert_eq!(counter(&m, "completed"), 40);
    srv.shutdown();
}

/// `redline agent … -- RUN` with bad run arguments: exit 2 and one line on
/// stderr, before any coordinator is contacted; that line.
fn agent_usage_error(run: &[&str]) -> String {
    let mut args = vec![
        "agent",
        "--index",
        "0",
        "--total",
        "1",
        "--coordinator",
        "127.0.0.1:9",
        "--",
    ];
    args.extend_from_slice(run);
    usage_error(&args)
}

/// Each agent's own record (its stdout) and its stderr.
fn agent_outputs(agents: Vec<Child>) -> Vec<(serde_json::Value, String)> {
    agents
        .into_iter()
        .map(|a| {
            let out = wait_limit(a, Duration::from_secs(90));
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{err}");
            let rec = serde_json::from_slice(&out.stdout).expect("the agent prints its record");
            (rec, err)
        })
        .collect()
}

/// The agent reads its run arguments with `run`'s own parser and plan
/// builder: a scenario's `[load]` sets its share (not the defaults a hand
/// parser would assume), `--stages` sets the run's length, and a flag the
/// agent sets itself is one usage line.
#[test]
fn agents_take_a_scenarios_load_and_stages_from_the_run_parser() {
    let srv = builtin();
    let d = common::nginx::tmpdir("agent-scenario");
    let file = d.join("s.toml");
    std::fs::write(
        &file,
        format!(
            "base = \"http://{}\"\n\n[load]\nconnections = 4\nrequests = 40\n\n[[request]]\npath = \"/?size=10\"\n",
            srv.local_addr()
        ),
    )
    .unwrap();
    let c = Coord::start(&["--agents", "2"]);
    let run = ["--scenario", file.to_str().unwrap(), "-t", "1"];
    let agents: Vec<Child> = (0..2).map(|i| agent(i, 2, c.port, &run)).collect();
    let outs = agent_outputs(agents);
    for (rec, err) in &outs {
        // Each agent's share of the file's load: 2 connections, 20 requests.
        assert!(err.contains("2 connections, 20 requests"), "{err}");
        assert_eq!(counter(rec, "completed"), 20);
    }
    let (m, _) = c.finish_record(0);
    assert_eq!(counter(&m, "completed"), 40);
    assert_eq!(srv.stats().requests, 40);

    // --stages: the agents announce their share of the peak level; the run
    // lasts the stages' sum and both shares add up.
    let url = format!("http://{}/?size=10", srv.local_addr());
    let c = Coord::start(&["--agents", "2"]);
    let run = [url.as_str(), "--stages", "1s:4", "-t", "1"];
    let agents: Vec<Child> = (0..2).map(|i| agent(i, 2, c.port, &run)).collect();
    for (rec, err) in agent_outputs(agents) {
        // Half of the peak of 4 (a hand parser saw no -c: 25 of 50).
        assert!(err.contains(", 2 connections;"), "{err}");
        assert_eq!(rec["config"]["stages"]["stages"][0]["level"], 2.0, "{rec}");
        assert_eq!(rec["config"]["load"]["duration_s"], 1.0, "{rec}");
    }
    let (m, _) = c.finish_record(0);
    assert!(counter(&m, "completed") > 0, "{m}");

    // A flag the agent sets itself: exit 2, one line naming it, before any
    // coordinator is contacted.
    let err = agent_usage_error(&[url.as_str(), "-o", "json"]);
    assert!(err.contains("-o/--output"), "{err}");
    // Bad run arguments are run's own usage error.
    agent_usage_error(&[url.as_str(), "--rate-stages"]);
    srv.shutdown();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn abort_on_fail_is_judged_on_the_merged_run_and_stops_every_agent() {
    // Every response takes 20 ms: 'p99<5ms' can never pass.
    let srv = builtin();
    let url = format!("http://{}/?delay=20ms", srv.local_addr());
    let c = Coord::start(&["--agents", "2", "--threshold", "p99<5ms", "--abort-on-fail"]);
    let run = [url.as_str(), "-d", "30s", "-c", "4", "-t", "1"];
    let agents: Vec<Child> = (0..2).map(|i| agent(i, 2, c.port, &run)).collect();
    let parts = agent_outputs(agents);
    let (m, err) = c.finish_record(4);
    assert!(
        err.contains(
            "stopping every agent (--abort-on-fail): threshold 'p99<5ms' can no longer pass"
        ),
        "{err}"
    );
    // Stopped well before its 30 s, and says so and why.
    let d = m["duration_s"].as_f64().unwrap();
    assert!(d < 15.0, "the run lasted {d} s");
    assert_eq!(m["interrupted"], true);
    let aborted: Vec<&str> = warning_messages(&m, "aborted");
    assert_eq!(aborted.len(), 1, "{}", m["warnings"]);
    assert!(
        aborted[0].starts_with("aborted: threshold 'p99<5ms' can no longer pass"),
        "{}",
        aborted[0]
    );
    // Both agents' requests are in the merge; each stopped gracefully (its
    // record kept), not on its own view.
    assert_eq!(m["merged_runs"], 2);
    let mut sum = 0;
    for (p, e) in &parts {
        let n = counter(p, "completed");
        assert!(n > 0, "{e}");
        assert_eq!(p["interrupted"], true, "{e}");
        assert!(e.contains("stopping: threshold 'p99<5ms'"), "{e}");
        sum += n;
    }
    assert_eq!(counter(&m, "completed"), sum);
    assert_eq!(hist_count(&m), sum);
    assert!(
        srv.stats().requests >= sum,
        "the server saw {} of {sum}",
        srv.stats().requests
    );
    srv.shutdown();
}

#[test]
fn abort_on_fail_that_holds_on_the_merge_runs_to_the_end() {
    // The coordinator's threshold holds. Each agent's run arguments carry a
    // threshold that fails on its own share and --abort-on-fail: the agent
    // leaves the judging to the coordinator, so nothing stops early.
    let srv = builtin();
    let url = format!("http://{}/?delay=20ms", srv.local_addr());
    let c = Coord::start(&["--agents", "2", "--threshold", "p99<5s", "--abort-on-fail"]);
    let run = [
        url.as_str(),
        "-d",
        "4s",
        "-c",
        "4",
        "-t",
        "1",
        "--threshold",
        "p99<5ms",
        "--abort-on-fail",
    ];
    let agents: Vec<Child> = (0..2).map(|i| agent(i, 2, c.port, &run)).collect();
    let parts = agent_outputs(agents);
    let (m, err) = c.finish_record(0);
    assert!(!err.contains("stopping every agent"), "{err}");
    let d = m["duration_s"].as_f64().unwrap();
    assert!(d >= 3.9, "the run lasted {d} s of 4");
    assert_eq!(m["interrupted"], false);
    assert!(!warning_codes(&m).contains(&"aborted"), "{}", m["warnings"]);
    for (p, e) in &parts {
        assert!(
            e.contains("--abort-on-fail is judged by the coordinator"),
            "{e}"
        );
        assert_eq!(p["interrupted"], false, "{e}");
        assert!(p["duration_s"].as_f64().unwrap() >= 3.9, "{e}");
    }
    assert_eq!(
        counter(&m, "completed"),
        parts
            .iter()
            .map(|(p, _)| counter(p, "completed"))
            .sum::<u64>()
    );
    srv.shutdown();
}

#[test]
fn a_killed_agent_is_named_and_the_run_marked_incomplete() {
    let srv = builtin();
    let url = format!("http://{}/?delay=1ms", srv.local_addr());
    let mut c = Coord::start(&["--agents", "3"]);
    let run = [url.as_str(), "-d", "4s", "-c", "3", "-t", "1"];
    let mut agents: Vec<Child> = (0..3).map(|i| agent(i, 3, c.port, &run)).collect();
    c.wait_for("all agents ready", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(1500));
    agents[1].kill().unwrap();
    let _ = agents[1].wait();
    let lost = c.wait_for("agent 1 lost", Duration::from_secs(20));
    assert!(lost.contains("connection closed"), "{lost}");
    for (i, a) in agents.into_iter().enumerate() {
        if i != 1 {
            let out = wait_limit(a, Duration::from_secs(60));
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let (m, err) = c.finish_record(1);
    assert!(err.contains("incomplete run: lost agent 1"), "{err}");
    assert_eq!(m["interrupted"], true);
    assert_eq!(m["merged_runs"], 2);
    let w: Vec<&str> = warning_messages(&m, "dist_incomplete");
    assert_eq!(w.len(), 1, "{}", m["warnings"]);
    assert!(
        w[0].contains("agent 1") && w[0].contains("2 of 3 agents"),
        "{}",
        w[0]
    );
    srv.shutdown();
}

#[test]
fn a_duplicate_index_is_refused_and_a_missing_agent_times_out() {
    let c = Coord::start(&["--agents", "2", "--ready-timeout", "3s"]);
    let run = ["http://127.0.0.1:9/", "-n", "10"];
    let first = agent(0, 2, c.port, &run);
    std::thread::sleep(Duration::from_millis(500));
    let second = agent(0, 2, c.port, &run);
    let out = wait_limit(second, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused agent 0") && err.contains("already taken"),
        "{err}"
    );
    let (code, _, err) = c.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("agents 1 did not become ready"), "{err}");
    let out = wait_limit(first, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("aborted"));
    // Bad input: one line, exit 2.
    for args in [
        vec![
            "agent",
            "--index",
            "3",
            "--total",
            "3",
            "--coordinator",
            "127.0.0.1:1",
            "--",
            "http://x/",
        ],
        vec![
            "agent",
            "--index",
            "0",
            "--total",
            "2",
            "--coordinator",
            "127.0.0.1:1",
            "--",
            "http://x/",
            "-o",
            "json",
        ],
        vec!["coordinate", "--agents", "0"],
        // Files k8s cannot bundle, and hostile counts: one line, exit 2,
        // checked before anything is allocated.
        vec![
            "k8s",
            "--parallel",
            "2",
            "--",
            "run",
            "-a",
            "u:s3cret",
            "--body-file",
            "/dev/zero",
            "http://x/",
        ],
        vec!["k8s", "--parallel", "4000000000", "--", "run", "http://x/"],
        vec!["coordinate", "--agents", "18446744073709551615"],
        vec![
            "agent",
            "--index",
            "0",
            "--total",
            "18446744073709551615",
            "--coordinator",
            "127.0.0.1:1",
            "--",
            "http://x/",
        ],
        vec![
            "run",
            "--segment",
            "1/18446744073709551615",
            "-n",
            "1",
            "http://127.0.0.1:1/",
        ],
        vec![
            "run",
            "--segment",
            "5/100000000",
            "-n",
            "1",
            "http://127.0.0.1:1/",
        ],
        // Beyond loopback without a token: refused.
        vec!["coordinate", "--agents", "1", "--listen", "0.0.0.0:0"],
        vec![
            "k8s",
            "--parallel",
            "2",
            "--name",
            "Bad_Name",
            "--",
            "run",
            "http://x/",
        ],
    ] {
        let err = usage_error(&args);
        assert!(!err.contains("s3cret"), "{err}");
    }
}

#[test]
fn kubernetes_manifests_are_well_formed() {
    let args = [
        "k8s",
        "--parallel",
        "3",
        "--name",
        "load",
        "--anti-affinity",
        "-o",
        "json",
        "--",
        "run",
        "http://web.example/",
        "-d",
        "60s",
        "-c",
        "300",
    ];
    let out = redline(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().unwrap();
    let kinds: Vec<&str> = items.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Secret", "ConfigMap", "Service", "Job"]);
    let job = &items[3];
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"], 4);
    assert_eq!(job["spec"]["parallelism"], 4);
    assert_eq!(job["spec"]["backoffLimitPerIndex"], 0);
    assert_eq!(job["spec"]["podReplacementPolicy"], "Failed");
    // -d 60s + 10 min + the 10 min the coordinator serves the record.
    assert_eq!(job["spec"]["activeDeadlineSeconds"], 1260);
    // The Job ends when its coordinator (index 0) does.
    assert_eq!(
        job["spec"]["successPolicy"],
        serde_json::json!({"rules": [{"succeededIndexes": "0"}]})
    );
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["subdomain"], "load");
    let cargs: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        cargs
            .windows(2)
            .any(|w| w == ["--coordinator", "load-0.load:7070"]),
        "{cargs:?}"
    );
    assert!(
        cargs
            .windows(4)
            .any(|w| w == ["--serve-record", "0.0.0.0:7071", "--linger", "600s"]),
        "{cargs:?}"
    );
    assert_eq!(items[2]["spec"]["clusterIP"], "None");
    // The arguments as the real parser saw them.
    let run: Vec<String> =
        serde_json::from_str(items[1]["data"]["args.json"].as_str().unwrap()).unwrap();
    assert_eq!(
        run,
        ["--connections=300", "--duration=60s", "http://web.example/"]
    );
    // The coordinator token comes from the Secret.
    assert!(items[0]["data"]["REDLINE_TOKEN"].is_string());
    let env = pod["containers"][0]["env"].as_array().unwrap();
    assert!(env
        .iter()
        .any(|e| e["name"] == "REDLINE_TOKEN"
            && e["valueFrom"]["secretKeyRef"]["name"] == "load-secret"));

    // The YAML form says the same (checked with Python's yaml when installed).
    let mut yargs = args.to_vec();
    yargs.retain(|a| *a != "-o" && *a != "json");
    let yout = redline(&yargs);
    assert!(yout.status.success());
    let yaml = String::from_utf8_lossy(&yout.stdout).into_owned();
    assert_eq!(
        yaml.matches("\n---\n").count() + usize::from(yaml.starts_with("---\n")),
        4
    );
    let dir = std::env::temp_dir().join(format!("redline-k8s-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ypath = dir.join("m.yaml");
    std::fs::write(&ypath, &yaml).unwrap();
    let py = Command::new("python3")
        .args(["-c", "import sys, json, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))"])
        .arg(&ypath)
        .output();
    match py {
        Ok(o) if o.status.success() => {
            let mut docs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let mut json_docs = list["items"].clone();
            // Each run makes a fresh coordinator token.
            docs[0]["data"]["REDLINE_TOKEN"] = "t".into();
            json_docs[0]["data"]["REDLINE_TOKEN"] = "t".into();
            assert_eq!(docs, json_docs, "YAML and JSON differ");
        }
        _ => eprintln!("note: python3 with PyYAML not available; YAML not cross-checked"),
    }
    kubernetes_validate(&ypath, 4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Validates manifests offline against the Kubernetes 1.33 schemas with the
/// `kubernetes_validate` Python module (.ci/run installs it; missing in CI
/// is a failure).
fn kubernetes_validate(path: &std::path::Path, objects: usize) {
    let importable = Command::new("python3")
        .args(["-c", "import kubernetes_validate"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !importable {
        missing("kubernetes-validate (python3 -m pip install kubernetes-validate)");
        return;
    }
    let o = Command::new("python3")
        .args([
            "-m",
            "kubernetes_validate",
            "--strict",
            "--kubernetes-version",
            "1.33",
        ])
        .arg(path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "kubernetes-validate: {text}");
    assert_eq!(
        text.matches("passed for resource").count(),
        objects,
        "{text}"
    );
}

/// Credentials in every spelling never reach the ConfigMap or the Job: they
/// are in the Secret, referenced by secretKeyRef env vars; files are bundled
/// into the ConfigMap (the client key into the Secret) and mounted; the
/// manifests pass the Kubernetes schemas.
#[test]
fn k8s_puts_credentials_in_a_secret_and_bundles_files() {
    let dir = std::env::temp_dir().join(format!("redline-k8s-sec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let body = dir.join("body.json");
    std::fs::write(&body, "{\"password\":\"s3cret2\"}").unwrap();
    let key = dir.join("client.key");
    std::fs::write(&key, "KEYs3cret9").unwrap();
    let cert = dir.join("client.pem");
    std::fs::write(&cert, "CERT").unwrap();
    let scen = dir.join("sc.toml");
    std::fs::write(
        &scen,
        "base = \"http://web/\"\n[data]\nfile = \"users.csv\"\n[[request]]\npath = \"/\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("users.csv"), "id\n1\n").unwrap();
    let (b, k, c) = (
        body.to_str().unwrap(),
        key.to_str().unwrap(),
        cert.to_str().unwrap(),
    );
    let spellings: Vec<Vec<&str>> = vec![
        vec!["-a", "u:s3cret1"],
        vec!["-au:s3cret1"],
        vec!["-a=u:s3cret1"],
        vec!["-ka", "u:s3cret1"],
        vec!["-H", "Authorization: Bearer s3cret1"],
        vec!["-H", "Cookie: sid=s3cret1"],
        vec!["-HX-Api-Key: s3cret1"],
        vec!["--header=X-Auth-Token: s3cret1"],
        vec!["http://user:s3cret1@web.example/"],
        // Bodies and every custom header, whatever its name.
        vec!["-b", "{\"password\":\"s3cret1\"}"],
        vec!["--body={\"password\":\"s3cret1\"}"],
        vec!["-H", "X-Whatever: s3cret1"],
    ];
    for extra in spellings {
        let with_body = !extra
            .iter()
            .any(|a| a.starts_with("-b") || a.starts_with("--body"));
        let mut args = vec![
            "k8s",
            "--parallel",
            "2",
            "-o",
            "json",
            "--",
            "run",
            "-d",
            "5s",
        ];
        args.extend(&extra);
        if with_body {
            args.extend(["--body-file", b]);
        }
        args.extend(["--cert", c, "--key", k]);
        if !extra.iter().any(|a| a.starts_with("http")) {
            args.push("http://web.example/");
        }
        let out = redline(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{extra:?}: {err}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("s3cret"),
            "{extra:?}: a credential in the manifests"
        );
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let items = list["items"].as_array().unwrap();
        let secret = &items[0];
        let b64 = |v: &serde_json::Value| {
            let o = Command::new("base64")
                .arg("-d")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .and_then(|mut ch| {
                    use std::io::Write;
                    ch.stdin
                        .take()
                        .unwrap()
                        .write_all(v.as_str().unwrap().as_bytes())?;
                    ch.wait_with_output()
                })
                .unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let decoded: Vec<String> = secret["data"]
            .as_object()
            .unwrap()
            .values()
            .map(b64)
            .collect();
        assert!(
            decoded.iter().any(|d| d.contains("s3cret1")),
            "{extra:?}: {decoded:?}"
        );
        assert_eq!(
            decoded.iter().any(|d| d.contains("s3cret2")),
            with_body,
            "the body file is in the Secret"
        );
        // Nothing of the ConfigMap's files, decoded, holds a credential.
        for (k, v) in items[1]["binaryData"].as_object().unwrap() {
            assert!(
                !b64(v).contains("s3cret"),
                "{extra:?}: {k} in the ConfigMap"
            );
        }
        assert!(
            decoded.iter().any(|d| d == "KEYs3cret9"),
            "the key file is in the Secret"
        );
        let run: Vec<String> =
            serde_json::from_str(items[1]["data"]["args.json"].as_str().unwrap()).unwrap();
        assert!(
            run.iter().any(|a| a.contains("$(REDLINE_SECRET_0)")),
            "{run:?}"
        );
        assert_eq!(
            run.iter()
                .any(|a| a.starts_with("--body-file=/etc/redline/")),
            with_body,
            "{run:?}"
        );
        assert!(
            run.iter().any(|a| a.starts_with("--key=/etc/redline/")),
            "{run:?}"
        );
        let bin_keys: Vec<&String> = items[1]["binaryData"].as_object().unwrap().keys().collect();
        assert_eq!(bin_keys.len(), 1, "the cert alone: {bin_keys:?}");
        let env = items[3]["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap();
        assert!(env.iter().any(|e| e["name"] == "REDLINE_SECRET_0"
            && e["valueFrom"]["secretKeyRef"]["key"] == "REDLINE_SECRET_0"));
    }
    // A scenario and the file it names, next to it, mounted together; schema-valid.
    let out = redline(&[
        "k8s",
        "--parallel",
        "2",
        "--",
        "run",
        "--scenario",
        scen.to_str().unwrap(),
        "-a",
        "u:s3cret1",
        "-d",
        "5s",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = dir.join("m.yaml");
    std::fs::write(&yaml, &out.stdout).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("users.csv") && text.contains("scenario-sc.toml"),
        "{text}"
    );
    assert!(!text.contains("s3cret"));
    kubernetes_validate(&yaml, 4);
    // A scenario naming a file elsewhere is refused with one line.
    std::fs::write(
        &scen,
        "base = \"http://web/\"\n[data]\nfile = \"../users.csv\"\n[[request]]\npath = \"/\"\n",
    )
    .unwrap();
    let err = usage_error(&[
        "k8s",
        "--parallel",
        "2",
        "--",
        "run",
        "--scenario",
        scen.to_str().unwrap(),
    ]);
    assert!(
        err.contains("bundles only files next to the scenario"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Spawns `redline run --segment I/N … -o json -q --no-save` (no coordinator).
fn segment_run(i: u64, n: u64, args: &[&str]) -> Child {
    let mut cmd = Command::new(bin());
    cmd.args([
        "run",
        "--segment",
        &format!("{i}/{n}"),
        "-o",
        "json",
        "-q",
        "--no-save",
    ])
    .args(args);
    spawn_piped(cmd)
}

fn finish_json(c: Child) -> serde_json::Value {
    let out = wait_limit(c, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a run record")
}

/// `redline merge` of records written to temporary files.
fn merge(parts: &[serde_json::Value], tag: &str) -> serde_json::Value {
    let dir = std::env::temp_dir();
    let files: Vec<String> = parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let f = dir.join(format!("redline-seg-{tag}-{}-{i}.json", std::process::id()));
            std::fs::write(&f, serde_json::to_vec(p).unwrap()).unwrap();
            f.to_string_lossy().into_owned()
        })
        .collect();
    let mut args = vec!["merge", "-o", "-"];
    args.extend(files.iter().map(String::as_str));
    let out = redline(&args);
    for f in &files {
        let _ = std::fs::remove_file(f);
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("merged record")
}

#[test]
fn three_segments_without_a_coordinator_add_up_to_one_run() {
    let srv = builtin();
    let url = format!("http://{}/?size=100", srv.local_addr());
    let args = [url.as_str(), "-n", "3000", "-c", "6", "-t", "1"];
    let kids: Vec<Child> = (0..3).map(|i| segment_run(i, 3, &args)).collect();
    let parts: Vec<serde_json::Value> = kids.into_iter().map(finish_json).collect();
    // The server counted exactly the whole run.
    assert_eq!(srv.stats().requests, 3000);
    assert_eq!(srv.stats().connections, 6);
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(counter(p, "completed"), 1000);
        assert_eq!(p["config"]["load"]["connections"], 2);
        assert_eq!(p["config"]["segment"]["index"], i as u64);
        assert_eq!(p["config"]["segment"]["sequence"], "0,1/3,2/3,1");
    }
    let m = merge(&parts, "closed");
    srv.reset_stats();
    let one = run_json(&[
        url.as_str(),
        "-n",
        "3000",
        "-c",
        "6",
        "-t",
        "1",
        "--no-save",
    ]);
    for k in ["completed", "sent", "failed", "connections_opened"] {
        assert_eq!(counter(&m, k), counter(&one, k), "{k}");
    }
    assert_eq!(m["config"]["load"], one["config"]["load"]);
    assert_eq!(hist_count(&m), hist_count(&one));
    // Unequal shares: a half and two quarters of -n 1000 -c 4.
    srv.reset_stats();
    let seq = "0,1/2,3/4,1";
    let kids: Vec<Child> = ["0:1/2", "1/2:3/4", "3/4:1"]
        .iter()
        .map(|seg| {
            Command::new(bin())
                .args(["run", "--segment", seg, "--segment-sequence", seq])
                .args([
                    "-o",
                    "json",
                    "-q",
                    "--no-save",
                    &url,
                    "-n",
                    "1000",
                    "-c",
                    "4",
                    "-t",
                    "1",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let parts: Vec<serde_json::Value> = kids.into_iter().map(finish_json).collect();
    let done: Vec<u64> = parts.iter().map(|p| counter(p, "completed")).collect();
    assert_eq!(done, vec![500, 250, 250]);
    assert_eq!(srv.stats().requests, 1000);
    // A share of nothing is said, not run: -c 2 over three.
    let p = run_json(&[
        "--segment",
        "2/3",
        url.as_str(),
        "-n",
        "2",
        "-c",
        "2",
        "--no-save",
    ]);
    assert_eq!(counter(&p, "sent"), 0);
    assert!(
        p["warnings"].to_string().contains("segment_empty"),
        "{}",
        p["warnings"]
    );
    // Bad input: one line, exit 2.
    for bad in [
        &["run", "--segment", "3/3", "http://127.0.0.1:1/"][..],
        &[
            "run",
            "--segment",
            "1/3",
            "--segment-sequence",
            "0,1/3,1",
            "http://127.0.0.1:1/",
        ],
        &[
            "run",
            "--start-at",
            "2001-01-01T00:00:00Z",
            "http://127.0.0.1:1/",
        ],
        &["run", "--start-at", "tomorrow", "http://127.0.0.1:1/"],
    ] {
        usage_error(bad);
    }
    srv.shutdown();
}

#[test]
fn open_loop_segments_start_together_and_send_the_whole_rate() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let args = [
        url.as_str(),
        "--rate",
        "300",
        "-d",
        "3s",
        "--start-at",
        "+2s",
        "-t",
        "1",
    ];
    let kids: Vec<Child> = (0..3).map(|i| segment_run(i, 3, &args)).collect();
    let parts: Vec<serde_json::Value> = kids.into_iter().map(finish_json).collect();
    for p in &parts {
        assert_eq!(p["config"]["load"]["rate"], 100.0);
        let late = p["scheduled_start"]["late_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("no lateness in {}", p["scheduled_start"]));
        assert!(late >= 0.0);
        assert!(p["scheduled_start"]["at"].as_str().unwrap().ends_with('Z'));
    }
    let m = merge(&parts, "open");
    let done = counter(&m, "completed") as f64;
    assert!((done - 900.0).abs() <= 9.0, "merged completed {done}");
    assert_eq!(m["config"]["load"]["rate"], 300.0);
    assert_eq!(srv.stats().requests, counter(&m, "sent"));
    srv.shutdown();
}

/// Network namespaces with a veth pair each to the host, deleted on drop
/// (even when the test fails).
struct Netns {
    names: Vec<String>,
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in &self.names {
            // Deleting the namespace deletes its veth end and so the pair.
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Agents in their own network namespaces, one client address each: the
/// target sees N distinct clients and the merged record is the whole load.
/// Needs root (CI runs as root); elsewhere it says why and returns.
#[test]
fn agents_in_network_namespaces_are_distinct_clients() {
    const N: u32 = 3;
    let pid = std::process::id();
    // Addresses unique to this test process: 10.A.B.(4i+1) host side, +1 agent side.
    let (a, b) = (128 + (pid / 256) % 64, pid % 256);
    let host_ip = |i: u32| format!("10.{a}.{b}.{}", 4 * i + 1);
    let agent_ip = |i: u32| format!("10.{a}.{b}.{}", 4 * i + 2);
    let mut guard = Netns { names: Vec::new() };
    for i in 0..N {
        let ns = format!("rl{pid}n{i}");
        let (vh, vn) = (format!("rl{pid}h{i}"), format!("rl{pid}p{i}"));
        let setup = || -> Result<(), String> {
            ip(&["netns", "add", &ns])?;
            Ok(())
        };
        if let Err(e) = setup() {
            if i == 0 {
                eprintln!("skipped: cannot create a network namespace (needs root): {e}");
                return;
            }
            panic!("{e}");
        }
        guard.names.push(ns.clone());
        let r = (|| -> Result<(), String> {
            ip(&["link", "add", &vh, "type", "veth", "peer", "name", &vn])?;
            ip(&["link", "set", &vn, "netns", &ns])?;
            ip(&["addr", "add", &format!("{}/30", host_ip(i)), "dev", &vh])?;
            ip(&["link", "set", &vh, "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/30", agent_ip(i)),
                "dev",
                &vn,
            ])?;
            ip(&["-n", &ns, "link", "set", &vn, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &ns, "route", "add", "default", "via", &host_ip(i)])?;
            Ok(())
        })();
        if let Err(e) = r {
            if i == 0 {
                eprintln!("skipped: cannot set up a veth pair: {e}");
                return;
            }
            panic!("{e}");
        }
    }
    // The target on the first veth's host address; the coordinator on all.
    let srv = redline_serve::Server::start(redline_serve::ServeConfig {
        addr: format!("{}:0", host_ip(0)).parse().unwrap(),
        threads: 1,
    })
    .expect("target on the veth address");
    let url = format!("http://{}/?size=100", srv.local_addr());
    // Beyond loopback the coordinator needs a token; the agents prove it.
    let mut c = Coord::start_on(
        "0.0.0.0:0",
        &["--agents", &N.to_string(), "--token", "netns-token-1"],
    );
    let run = [url.as_str(), "-n", "3000", "-c", "6", "-t", "1"];
    let agents: Vec<Child> = (0..N)
        .map(|i| {
            Command::new("ip")
                .args(["netns", "exec", &guard.names[i as usize], bin(), "agent"])
                .args(["--index", &i.to_string(), "--total", &N.to_string()])
                .args(["--coordinator", &format!("{}:{}", host_ip(i), c.port)])
                .args(["--connect-timeout", "20s", "--"])
                .args(run)
                .env("REDLINE_TOKEN", "netns-token-1")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("ip netns exec … redline agent")
        })
        .collect();
    c.wait_for("all agents ready", Duration::from_secs(30));
    agents_succeed(agents, Duration::from_secs(60));
    let (m, _) = c.finish_record(0);
    assert_eq!(counter(&m, "completed"), 3000);
    assert_eq!(m["merged_runs"], N);
    let st = srv.stats();
    assert_eq!(st.requests, 3000);
    assert_eq!(
        st.clients,
        u64::from(N),
        "the target saw {} client addresses",
        st.clients
    );
    srv.shutdown();
    drop(guard);
}

/// The pods' own entry point, run here as two processes: `redline k8s`'s
/// Secret gives the token and the credential as environment variables, the
/// pods expand `$(REDLINE_SECRET_0)` in the arguments from the ConfigMap, the
/// agent proves the token to a coordinator listening beyond loopback, and the
/// target sees the credential (401 without it, so `errors<1%` would fail).
/// Without the token the coordinator pod refuses to start (exit 2).
#[test]
fn k8s_pods_take_credentials_and_token_from_the_secret() {
    use std::io::Write;
    let srv = ScriptServer::start(|mut s| {
        let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
        let mut pending = Vec::new();
        for _ in 0..10_000 {
            let Some((head, _)) = read_request(&mut s, &mut pending) else {
                return;
            };
            // "u:pw9" in base64.
            let ok = head
                .lines()
                .any(|l| l.eq_ignore_ascii_case("authorization: Basic dTpwdzk="));
            let resp: &[u8] = if ok {
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            } else {
                b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"
            };
            if s.write_all(resp).is_err() {
                return;
            }
        }
    });
    let url = srv.url();
    let out = redline(&[
        "k8s",
        "--parallel",
        "1",
        "-o",
        "json",
        "--",
        "run",
        "-au:pw9",
        "-n",
        "50",
        "-c",
        "1",
        "--threshold",
        "errors<1%",
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = list["items"].as_array().unwrap();
    // The Secret's data, decoded as Kubernetes would into the pods' environment.
    let b64 = |s: &str| -> String {
        let mut ch = Command::new("base64")
            .arg("-d")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        ch.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
        String::from_utf8(ch.wait_with_output().unwrap().stdout).unwrap()
    };
    let env: Vec<(String, String)> = items[0]["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), b64(v.as_str().unwrap())))
        .collect();
    assert!(env
        .iter()
        .any(|(k, v)| k == "REDLINE_SECRET_0" && v == "u:pw9"));
    let dir = std::env::temp_dir().join(format!("redline-k8s-pod-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let args = dir.join("args.json");
    std::fs::write(&args, items[1]["data"]["args.json"].as_str().unwrap()).unwrap();
    let port = common::nginx::free_port();
    let pod = |index: &str, with_token: bool| {
        let mut cmd = Command::new(bin());
        cmd.args(["k8s-pod", "--agents", "1", "--coordinator"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--args-file")
            .arg(&args)
            .args(["--serve-record", "127.0.0.1:0", "--linger", "0s"])
            .env("JOB_COMPLETION_INDEX", index)
            .env_remove("REDLINE_TOKEN")
            .env("REDLINE_DB", dir.join("h.db"));
        cmd.envs(
            env.iter()
                .filter(|(k, _)| with_token || k != "REDLINE_TOKEN")
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        spawn_piped(cmd)
    };
    // Without the Secret's token, no coordinator: it would listen on 0.0.0.0.
    let out = wait_limit(pod("0", false), Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("give a token"), "{err}");
    let coord = pod("0", true);
    let agent = pod("1", true);
    let a = wait_limit(agent, Duration::from_secs(90));
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let c = wait_limit(coord, Duration::from_secs(90));
    let cerr = String::from_utf8_lossy(&c.stderr);
    assert_eq!(c.status.code(), Some(0), "{cerr}");
    let m: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    assert_eq!(counter(&m, "completed"), 50, "{}", m["counters"]);
    assert_eq!(
        counter(&m, "non_2xx"),
        0,
        "the credential reached the target"
    );
    let all = format!("{cerr}{}", String::from_utf8_lossy(&c.stdout));
    assert!(!all.contains("pw9"), "a credential in the output");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The walkthrough of docs/distributed.md without Kubernetes: a coordinator
/// serving its merged record (`--serve-record`, token-protected) and two
/// agents on loopback against nginx; `redline fetch` downloads the record,
/// saves it to the history and prints the report; the saved run's totals
/// are the coordinator's printed record's (and nginx's access log). Bad
/// input to `fetch` is one line and its documented exit code, nothing saved,
/// and the token appears in no output.
#[test]
fn a_served_record_is_fetched_into_the_history() {
    let Some(ng) = common::nginx::start_counting_nginx("dist-fetch") else {
        return;
    };
    let dir = common::nginx::tmpdir("dist-fetch-run");
    let token = "fetch-t0ken-8c1f";
    let tok = dir.join("token");
    std::fs::write(&tok, format!("{token}\n")).unwrap();
    let tok_s = tok.display().to_string();
    let db = dir.join("h.db");
    let db_s = db.display().to_string();
    let mut c = Coord::start(&[
        "--agents",
        "2",
        "--token-file",
        &tok_s,
        "--serve-record",
        "127.0.0.1:0",
        "--linger",
        "60s",
    ]);
    let at = c.wait_for("the run record will be at", Duration::from_secs(20));
    let url = at
        .split("will be at ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let fetch = |extra: &[&str]| {
        let mut args = vec!["fetch", "--db", &db_s];
        args.extend_from_slice(extra);
        let o = redline(&args);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(
            !out.contains(token) && !err.contains(token),
            "the token in the output: {out}{err}"
        );
        (o.status.code(), out, err)
    };
    // Before the run is over: the token is asked first, then 503.
    let (code, _, err) = fetch(&[&url]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("HTTP 401") && err.trim().lines().count() == 1,
        "{err}"
    );
    let (code, _, err) = fetch(&["--token-file", &tok_s, &url]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("HTTP 503") && err.trim().lines().count() == 1,
        "{err}"
    );

    let target = format!("http://127.0.0.1:{}/", ng.port);
    let agents: Vec<Child> = (0..2)
        .map(|i| {
            let mut cmd = Command::new(bin());
            cmd.args(["agent", "--index", &i.to_string(), "--total", "2"])
                .args(["--coordinator", &format!("127.0.0.1:{}", c.port)])
                .args(["--connect-timeout", "20s", "--token-file", &tok_s, "--"])
                .args([target.as_str(), "-n", "2000", "-c", "4", "-t", "1"]);
            spawn_piped(cmd)
        })
        .collect();
    agents_succeed(agents, Duration::from_secs(90));
    c.wait_for("serving the run record", Duration::from_secs(60));
    // Waits (bounded) and downloads it: saved, and its report printed.
    let (code, report, err) = fetch(&["--wait", "30s", "--token-file", &tok_s, &url]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("saved as run 1"), "{err}");
    assert!(
        report.contains("2,000") || report.contains("2000"),
        "{report}"
    );
    // The coordinator ends once the record was downloaded.
    let (code, stdout, cerr) = c.finish();
    assert_eq!(code, Some(0), "{cerr}");
    assert!(cerr.contains("the run record was downloaded"), "{cerr}");
    assert!(!cerr.contains(token) && !stdout.contains(token));
    let printed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let o = redline(&["export", "1", "--db", &db_s]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let saved: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(saved["counters"], printed["counters"]);
    assert_eq!(saved["status_codes"], printed["status_codes"]);
    assert_eq!(hist_count(&saved), hist_count(&printed));
    assert_eq!(saved["latency"], printed["latency"]);
    assert_eq!(saved["merged_runs"], 2);
    assert_eq!(counter(&saved, "completed"), 2000);
    assert_eq!(counter(&saved, "non_2xx"), 0);
    assert_run_schema(&saved);
    // nginx answered exactly those requests.
    assert_eq!(ng.logged("200"), 2000);

    // Bad input: one line, the documented code, nothing saved.
    let printed_text = stdout.clone();
    let forged = printed_text.replacen("\"completed\": 2000", "\"completed\": 2001", 1);
    assert_ne!(forged, printed_text, "the record's layout changed");
    let bodies = [forged, "{}".to_string(), "not json".to_string()];
    for (i, body) in bodies.iter().enumerate() {
        let b = body.clone();
        let srv = ScriptServer::start(move |mut s| {
            use std::io::Write;
            if read_head(&mut s).is_some() {
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                    b.len()
                );
            }
        });
        let (code, out, err) = fetch(&[&srv.url()]);
        assert_eq!(code, Some(1), "{i}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{i}: {err}");
        assert!(out.is_empty(), "{i}: {out}");
        if i == 0 {
            assert!(err.contains("not a consistent run record"), "{err}");
        }
    }
    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}/", refused.local_addr().unwrap());
    drop(refused);
    for (args, want) in [
        (vec!["ftp://127.0.0.1/"], 2),
        (vec!["http://u:p@127.0.0.1/"], 2),
        (vec!["http://127.0.0.1:99999/"], 2),
        (vec!["--token-file", "/dev/zero", closed.as_str()], 2),
        (vec!["--wait", "forever", closed.as_str()], 2),
        (vec![closed.as_str()], 1),
        (vec!["--token", token, closed.as_str()], 1),
    ] {
        let (code, _, err) = fetch(&args);
        assert_eq!(code, Some(want), "{args:?}: {err}");
        // One line (clap adds its pointer to --help after a blank line).
        let lines = err
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
            .count();
        assert_eq!(lines, 1, "{args:?}: {err}");
    }
    let o = redline(&["show", "2", "--db", &db_s]);
    assert_eq!(o.status.code(), Some(2), "only the good record was saved");
    // The coordinator's own flags: a bad address, an open one without a token.
    for (args, what) in [
        (vec!["--serve-record", "nonsense"], "--serve-record"),
        (vec!["--serve-record", "0.0.0.0:0"], "give a token"),
        (
            vec!["--serve-record", "127.0.0.1:0", "--linger", "25h"],
            "--linger",
        ),
    ] {
        let mut a = vec!["coordinate", "--agents", "1", "--listen", "127.0.0.1:0"];
        a.extend(args);
        let err = usage_error(&a);
        assert!(err.contains(what), "{err}");
    }
    drop(ng);
    let _ = std::fs::remove_dir_all(&dir);
}

/// TLS between agents and coordinator (`coordinate --tls-cert --tls-key`,
/// `agent --cacert`, the testkit PKI): two agents over TLS merge exactly;
/// the coordinator says nothing in plain text to a plain client, an agent
/// trusting another CA is refused by its own handshake (exit 1, naming the
/// certificate); bad PEM files are one line, exit 2.
#[test]
fn agents_reach_a_tls_coordinator_with_its_ca_only() {
    use std::io::{Read, Write};
    let pki = common::nginx::pki();
    let other = common::nginx::pki();
    let dir = common::nginx::tmpdir("dist-tls");
    let w = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p.display().to_string()
    };
    let (cert, key, ca, other_ca) = (
        w("cert.pem", &pki.leaf_pem),
        w("key.pem", &pki.key_pem),
        w("ca.pem", &pki.ca_pem),
        w("other-ca.pem", &other.ca_pem),
    );
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let c = Coord::start(&[
        "--agents",
        "2",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--threshold",
        "errors<1%",
    ]);
    let agent_tls = |i: u64, cacert: &str, timeout: &str| {
        let mut cmd = Command::new(bin());
        cmd.args(["agent", "--index", &i.to_string(), "--total", "2"])
            .args(["--coordinator", &format!("127.0.0.1:{}", c.port)])
            .args(["--connect-timeout", timeout, "--cacert", cacert, "--"])
            .args([url.as_str(), "-n", "1000", "-c", "2", "-t", "1"]);
        spawn_piped(cmd)
    };
    // A plain-TCP peer gets no protocol text: the coordinator waits for a
    // TLS ClientHello, and a JSON line is not one.
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let _ = raw.write_all(b"{\"type\":\"register\",\"index\":0}\n");
    let mut got = Vec::new();
    let _ = raw.read_to_end(&mut got);
    assert!(
        !String::from_utf8_lossy(&got).contains("hello"),
        "plain text from a TLS coordinator: {got:?}"
    );
    // An agent that trusts another CA: its handshake fails; nothing registers.
    let out = wait_limit(agent_tls(0, &other_ca, "2s"), Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("TLS handshake") && err.contains("certificate"),
        "{err}"
    );
    // The agents with the coordinator's CA run the whole load.
    let agents: Vec<Child> = (0..2).map(|i| agent_tls(i, &ca, "20s")).collect();
    agents_succeed(agents, Duration::from_secs(90));
    let (m, err) = c.finish_record(0);
    assert_eq!(counter(&m, "completed"), 1000);
    assert_eq!(m["merged_runs"], 2);
    assert_eq!(srv.stats().requests, 1000);
    assert!(!err.contains("refused an agent"), "{err}");
    srv.shutdown();
    // Bad files: one line, exit 2.
    for args in [
        vec![
            "coordinate",
            "--agents",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            &key,
            "--tls-key",
            &key,
        ],
        vec![
            "coordinate",
            "--agents",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &cert,
        ],
        vec![
            "coordinate",
            "--agents",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            "/dev/zero",
            "--tls-key",
            &key,
        ],
        vec![
            "agent",
            "--index",
            "0",
            "--total",
            "1",
            "--coordinator",
            "127.0.0.1:9",
            "--cacert",
            &key,
            "--",
            "http://127.0.0.1:9/",
        ],
    ] {
        usage_error(&args);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
