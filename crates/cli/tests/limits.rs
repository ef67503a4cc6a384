//! Client limits: local port exhaustion. In a network namespace the test
//! creates (`unshare -rn`), the ephemeral port range is cut to 11 ports and
//! `--no-keepalive -c 50` against the built-in target runs out of them: the
//! failures are `no_local_address`, and the run is marked client-limited with
//! the connection count it reached. Skipped, with the reason, where user and
//! network namespaces are not permitted.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs `script` (sh) inside a new user+network namespace; None (and a printed
/// reason) when namespaces are not permitted here.
fn in_netns(script: &str, args: &[&str]) -> Option<std::process::Output> {
    let probe = Command::new("unshare")
        .args(["-rn", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "note: network namespaces are not permitted here (unshare -rn: {}); skipped",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return None;
        }
        Err(e) => {
            eprintln!("note: unshare is not available ({e}); skipped");
            return None;
        }
    }
    let child = Command::new("unshare")
        .args(["-rn", "sh", "-c", script, "sh"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn unshare");
    Some(wait_limit(child, Duration::from_secs(60)))
}

/// Brings up loopback, narrows the port range, starts `redline serve --port 0`,
/// reads its port, and runs redline against it. Exit 97: the namespace could not
/// be set up (skip); otherwise redline's own exit code.
const SCRIPT: &str = r#"
set -u
BIN=$1; DIR=$2
ip link set lo up 2>/dev/null || exit 97
echo "40000 40010" > /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || exit 97
"$BIN" serve --port 0 > "$DIR/serve.out" 2>&1 &
SP=$!
PORT=""
for i in $(seq 1 200); do
  PORT=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\)/.*#\1#p' "$DIR/serve.out")
  [ -n "$PORT" ] && break
  sleep 0.05
done
if [ -z "$PORT" ]; then kill $SP; exit 96; fi
REDLINE_DB="$DIR/history.db" "$BIN" run -o json -q --no-keepalive -c 50 -t 1 -d 1s "http://127.0.0.1:$PORT/"
rc=$?
kill $SP
wait $SP 2>/dev/null
exit $rc
"#;

#[test]
fn port_exhaustion_is_a_client_limit() {
    let dir = std::env::temp_dir().join(format!("redline-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(out) = in_netns(SCRIPT, &[bin(), dir.to_str().unwrap()]) else {
        return;
    };
    if out.status.code() == Some(97) {
        eprintln!("note: could not set up loopback or the port range in the namespace; skipped");
        return;
    }
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let _ = std::fs::remove_dir_all(&dir);

    // Some requests got through on the 11 ports; the rest found no local address.
    assert!(counter(&v, "completed") > 0, "{}", v["counters"]);
    let exhausted = error_count(&v, "no_local_address");
    assert!(exhausted > 0, "{}", v["errors"]);
    assert_eq!(
        exhausted,
        counter(&v, "failed"),
        "no other error kind: {}",
        v["errors"]
    );
    let msg = v["errors"][0]["message"].as_str().unwrap();
    assert!(msg.contains("ports exhausted"), "{msg}");
    // Marked, with a warning that says what ran out and how many connections were reached.
    assert_eq!(v["client_limited"], true);
    let warning = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "client_resources")
        .unwrap_or_else(|| panic!("no client_resources warning: {}", v["warnings"]));
    let text = warning["message"].as_str().unwrap();
    assert!(text.contains("local ports"), "{text}");
    let peak = counter(&v, "peak_connections");
    assert!(peak < 50, "{peak}");
    assert!(
        text.contains(&format!("at most {peak} connections")),
        "{text}"
    );
}

/// Every file redline reads goes through one reader that refuses what is not a
/// regular file: `/dev/zero` (which would grow memory until killed), a FIFO
/// (which would block) and a directory each end with one line on stderr and
/// exit code 2, at once.
#[test]
fn devices_fifos_and_directories_are_refused_as_input_files() {
    let dir = nginx::tmpdir("limits-files");
    let fifo = dir.join("fifo");
    let ok = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(ok.success());
    let scen = dir.join("s.toml");
    std::fs::write(
        &scen,
        "[[request]]\npath = \"/\"\n\n[data]\nfile = \"/dev/zero\"\n",
    )
    .unwrap();
    let fifo_s = fifo.to_str().unwrap().to_string();
    let dir_s = dir.to_str().unwrap().to_string();
    let out_s = dir.join("merged.json").to_str().unwrap().to_string();
    let url = "http://127.0.0.1:9/";
    let https = "https://127.0.0.1:9/";
    for bad in ["/dev/zero", fifo_s.as_str(), dir_s.as_str()] {
        let cases: Vec<Vec<&str>> = vec![
            vec!["run", "--no-save", "-n", "1", "--body-file", bad, url],
            vec!["run", "--no-save", "-n", "1", "--scenario", bad],
            vec!["run", "--no-save", "-n", "1", "--cacert", bad, https],
            vec![
                "run",
                "--no-save",
                "-n",
                "1",
                "--cert",
                bad,
                "--key",
                bad,
                https,
            ],
            vec!["tune", bad],
            vec!["run", "--no-save", "-n", "1", "--server-config", bad, url],
            vec!["size", "--from", bad],
            vec!["compare", bad, bad],
            vec!["report", bad],
            vec!["merge", "-o", out_s.as_str(), bad, bad],
        ];
        for args in cases {
            let (out, _) = redline_with_limit(&args, Duration::from_secs(20));
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains("not a regular file") || err.contains("is a directory"),
                "{args:?}: {err}"
            );
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        }
    }
    // A scenario's data file and body file.
    let body = dir.join("b.toml");
    std::fs::write(
        &body,
        "[[request]]\npath = \"/\"\nmethod = \"POST\"\nbody_file = \"/dev/zero\"\n",
    )
    .unwrap();
    for f in [&scen, &body] {
        let (out, _) = redline_with_limit(
            &[
                "run",
                "--no-save",
                "-n",
                "1",
                "--allow-paths",
                "--scenario",
                f.to_str().unwrap(),
                url,
            ],
            Duration::from_secs(20),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("/dev/zero is not a regular file"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run whose save fails (the history is not a database) or whose `--html`
/// cannot be written still prints its report but exits 1; the foreign file
/// is left byte for byte as it was.
#[test]
fn failed_save_and_unwritable_html_exit_1() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let dir = nginx::tmpdir("limits-save");
    let db = dir.join("not-a-db.sqlite");
    let junk = b"not a database, just text long enough to look like a file...".repeat(50);
    std::fs::write(&db, &junk).unwrap();
    let db_s = db.to_str().unwrap();
    let out = redline(&["run", "-q", "-n", "5", "-c", "1", "--db", db_s, &url]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not saved"), "{err}");
    assert!(err.contains("left untouched"), "{err}");
    assert!(!out.stdout.is_empty(), "the report is still printed");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        junk,
        "the foreign file was changed"
    );

    let html = dir.join("no-such-dir").join("r.html");
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-n",
        "5",
        "-c",
        "1",
        "--html",
        html.to_str().unwrap(),
        &url,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot write --html"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run record whose histogram header claims a 4 GiB payload is refused with
/// one line before anything is allocated by it (`report`, `compare`).
#[test]
fn a_histogram_header_claiming_4_gib_is_refused() {
    use base64::Engine as _;
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let v = run_json(&["-n", "20", "-c", "1", &url]);
    let dir = nginx::tmpdir("limits-hist");
    let good = dir.join("good.json");
    std::fs::write(&good, serde_json::to_string(&v).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    // A plain HdrHistogram V2 header (40 bytes) whose payload length claims
    // 4 GiB: the decoder allocated by it before reading.
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&0x1c84_9313u32.to_be_bytes()); // V2 cookie
    bytes.extend_from_slice(&u32::MAX.to_be_bytes()); // payload length
    bytes.extend_from_slice(&0u32.to_be_bytes()); // normalizing offset
    bytes.extend_from_slice(&3u32.to_be_bytes()); // significant digits
    bytes.extend_from_slice(&1u64.to_be_bytes()); // lowest
    bytes.extend_from_slice(&3_600_000_000u64.to_be_bytes()); // highest
    bytes.extend_from_slice(&1f64.to_be_bytes()); // ratio
    bytes.extend_from_slice(&[0; 16]);
    let mut bad = v.clone();
    bad["latency"]["hdr"] = serde_json::Value::String(b64.encode(&bytes));
    let bad_p = dir.join("bad.json");
    std::fs::write(&bad_p, serde_json::to_string(&bad).unwrap()).unwrap();
    let (g, b) = (good.to_str().unwrap(), bad_p.to_str().unwrap());
    let html = dir.join("r.html");
    for args in [
        vec!["report", b, "-o", html.to_str().unwrap()],
        vec!["compare", g, b],
    ] {
        let (out, _) = redline_with_limit(&args, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("claims a 4294967295-byte payload"),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
