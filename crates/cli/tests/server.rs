//! Server-side commands against the built binary: bad input, `tune` on a
//! fixture, and a real nginx (Debian's, own config, loopback port from
//! binding 0) watched under load and sized. The nginx test skips with a note
//! when nginx is not installed (CI: apt-get install -y nginx).

mod common;

use common::*;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        vec!["size", "--watch", "no-such-server-xyz"],
        vec!["size", "--watch", "1", "--memory-budget", "120%"],
        vec!["tune", "/nonexistent/apache2.conf"],
        vec!["watch", "", "-d", "100ms"],
        vec!["watch", "/usr/sbin/nginx", "-d", "100ms"],
        vec![
            "run",
            "-n",
            "1",
            "--no-save",
            "--watch",
            "no-such-server-xyz",
            "http://127.0.0.1:9/",
        ],
    ] {
        let out = redline(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("redline: error:"), "{err}");
    }
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../watch/tests/fixtures")
        .join(rel)
}

#[test]
fn tune_text_json_and_fail_on() {
    let conf = fixture("debian-apache2/apache2.conf");
    let conf = conf.to_str().unwrap();
    let out = redline(&["tune", "--no-tools", conf]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[!!]") && text.contains("apache2.conf:92: Timeout 300"),
        "{text}"
    );
    assert!(text.contains("Directives to change"));
    let out = redline(&["tune", "--no-tools", "-o", "json", conf]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["server"], "apache");
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["code"] == "timeout_high" && f["line"] == 92));
    let out = redline(&["tune", "--no-tools", "--fail-on", "warn", conf]);
    assert_eq!(out.status.code(), Some(3));
    let lt = fixture("lighttpd/lighttpd.conf");
    let out = redline(&["tune", "--fail-on", "warn", lt.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = redline(&["tune", "--fail-on", "info", lt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
}

/// Debian's nginx on a free loopback port with its own config in a temp dir.
struct Nginx {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Nginx {
    fn start() -> Option<Nginx> {
        let bin = ["/usr/sbin/nginx", "/usr/local/sbin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).exists())?;
        let port = TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let dir = std::env::temp_dir().join(format!("redline-server-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("html")).ok()?;
        std::fs::create_dir_all(dir.join("tmp")).ok()?;
        let page: String = (0..50_000)
            .map(|i| (b'a' + (i % 26) as u8) as char)
            .collect();
        std::fs::write(dir.join("html/index.html"), page).ok()?;
        let d = dir.display();
        let conf = format!(
            "worker_processes 2;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{ worker_connections 256; }}\nhttp {{\n access_log off;\n client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n server {{ listen 127.0.0.1:{port}; root {d}/html; }}\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf).ok()?;
        // The workers may run as another user: let them read the files.
        let _ = Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(&dir)
            .status();
        let child = Command::new(bin)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let n = Nginx { child, dir, port };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(n);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM, so the master stops its workers (SIGKILL would orphan them).
        // SAFETY: kill() on our own child's PID has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn watch_a_real_nginx_under_load_and_size_it() {
    let Some(ngx) = Nginx::start() else {
        eprintln!(
            "note: nginx is not installed or did not start (apt-get install -y nginx); skipped"
        );
        return;
    };
    let pid = ngx.child.id().to_string();
    let url = format!("http://127.0.0.1:{}/index.html", ngx.port);

    // Idle first: a standalone watch, as on a remote server.
    let idle = redline(&[
        "watch",
        &pid,
        "-d",
        "1s",
        "--interval",
        "200ms",
        "-o",
        "json",
    ]);
    assert!(
        idle.status.success(),
        "{}",
        String::from_utf8_lossy(&idle.stderr)
    );
    let idle: serde_json::Value = serde_json::from_slice(&idle.stdout).unwrap();
    assert_eq!(idle["format"], "redline.watch");
    let ih = &idle["hosts"][0];
    let idle_cpu = ih["summary"]["cpu_percent"]["mean"].as_f64().unwrap();

    // Under load.
    let v = run_json(&[
        "-d",
        "2s",
        "-c",
        "16",
        "--no-save",
        "--watch",
        &pid,
        "--watch-interval",
        "200ms",
        &url,
    ]);
    assert!(counter(&v, "completed") > 0);
    let h = &v["server_watch"]["hosts"][0];
    let s = &h["summary"];
    assert_eq!(s["processes"]["peak"].as_f64().unwrap(), 3.0, "{s}"); // master + 2 workers
    assert!(h["process_names"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n == "nginx"));
    let load_cpu = s["cpu_percent"]["peak"].as_f64().unwrap();
    assert!(
        load_cpu > idle_cpu && load_cpu > 5.0,
        "cpu idle {idle_cpu} load {load_cpu}"
    );
    let (rss, pss, private) = (
        s["rss_kib"]["peak"].as_f64().unwrap(),
        s["pss_kib"]["peak"].as_f64().unwrap(),
        s["private_kib"]["peak"].as_f64().unwrap(),
    );
    assert!(rss >= pss && pss >= private && private > 0.0, "{s}");
    assert!(
        rss >= ih["summary"]["rss_kib"]["mean"].as_f64().unwrap() * 0.9,
        "memory fell under load"
    );
    assert!(h["samples"].as_array().unwrap().len() >= 3);
    // The record with the watch still validates against the schema.
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/run-record.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");

    // Merging the standalone watch into the run adds a second host entry.
    let dir = std::env::temp_dir();
    let run_path = dir.join(format!("redline-server-run-{}.json", std::process::id()));
    let watch_path = dir.join(format!("redline-server-watch-{}.json", std::process::id()));
    std::fs::write(&run_path, serde_json::to_vec(&v).unwrap()).unwrap();
    std::fs::write(&watch_path, serde_json::to_vec(&idle).unwrap()).unwrap();
    let merged = redline(&[
        "watch",
        "--merge",
        run_path.to_str().unwrap(),
        "--",
        watch_path.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_file(&run_path);
    let _ = std::fs::remove_file(&watch_path);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&merged.stdout).unwrap();
    assert_eq!(m["server_watch"]["hosts"].as_array().unwrap().len(), 2);

    // Size: consistent with the measured memory and the budget.
    let out = redline(&[
        "size",
        "--watch",
        &pid,
        "--memory-budget",
        "256MiB",
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["server"], "nginx");
    assert_eq!(r["workers"], 2);
    assert_eq!(r["budget_kib"], 256 * 1024);
    let per = r["per_worker_private_kib"].as_u64().unwrap();
    let fixed = r["fixed_kib"].as_u64().unwrap();
    assert!(per > 0 && per as f64 <= s["rss_kib"]["peak"].as_f64().unwrap());
    assert_eq!(
        r["max_workers"].as_u64().unwrap(),
        (256 * 1024 - fixed) / per
    );
    let text = redline(&["size", "--watch", &pid, "--memory-budget", "50%"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("worker_processes") && text.contains("workers = "),
        "{text}"
    );
}
