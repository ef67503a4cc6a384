//! `run --server-config` and `--watch` record the server's effective tuning
//! directives, and `compare` / `report` put the ones that changed above the
//! performance deltas. A real Apache is started twice on a free loopback port,
//! watched by PID, with two configurations (KeepAliveTimeout and
//! MaxRequestWorkers differ). A missing apache2 skips with a note, and fails
//! under CI=true.

mod common;

use common::nginx::{free_port, tmpdir};
use common::{assert_run_schema, redline, redline_with_limit};
use redline_testkit::need::require;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn is_root() -> bool {
    // SAFETY: geteuid() has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// An Apache started by the test: stopped by PID (SIGTERM, then SIGKILL
/// after 10 s) on drop.
struct Apache {
    child: Child,
    port: u16,
}

impl Drop for Apache {
    fn drop(&mut self) {
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
    }
}

/// Removes the test's directory at the end.
struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn apache_present() -> bool {
    let m = Path::new("/usr/lib/apache2/modules");
    require(
        "apache2 with mod_mpm_prefork",
        Path::new("/usr/sbin/apache2").exists() && m.join("mod_mpm_prefork.so").exists(),
    )
}

/// Writes `dir/NAME.conf` (prefork, a static page, these tuning lines) and
/// starts Apache on it with `-f`, waiting until it accepts (10 s at most).
fn start_apache(dir: &Path, name: &str, tuning: &str) -> Option<Apache> {
    let port = free_port();
    let d = dir.display();
    let m = "/usr/lib/apache2/modules";
    let user = if is_root() {
        "User www-data\nGroup www-data\n"
    } else {
        ""
    };
    let run = dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    let r = run.display();
    let conf = format!(
        "ServerRoot {d}\nServerName 127.0.0.1\nListen 127.0.0.1:{port}\nPidFile {r}/apache2.pid\n\
         ErrorLog {r}/error.log\nDefaultRuntimeDir {r}\nMutex file:{r} default\n\
         LoadModule mpm_prefork_module {m}/mod_mpm_prefork.so\n\
         LoadModule authz_core_module {m}/mod_authz_core.so\n{user}\
         StartServers 2\nMinSpareServers 1\nMaxSpareServers 4\nKeepAlive On\n{tuning}\n\
         DocumentRoot {d}/www\n<Directory {d}/www>\n  Require all granted\n</Directory>\n"
    );
    let file = dir.join(format!("{name}.conf"));
    std::fs::write(&file, conf).unwrap();
    let _ = Command::new("chmod").args(["-R", "a+rX"]).arg(dir).status();
    let child = Command::new("/usr/sbin/apache2")
        .args(["-D", "FOREGROUND", "-f"])
        .arg(&file)
        .env("APACHE_RUN_DIR", &run)
        .env("APACHE_LOCK_DIR", &run)
        .env("APACHE_LOG_DIR", &run)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            require(&format!("a runnable apache2 ({e})"), false);
            return None;
        }
    };
    let mut a = Apache { child, port };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(st)) = a.child.try_wait() {
            require(&format!("a runnable apache2 (exited at once: {st})"), false);
            return None;
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(a);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    require("a runnable apache2 (did not listen within 10 s)", false);
    None
}

/// A 2 s run against `ap` with `extra` flags, its record saved to `out`.
fn run_to(ap: &Apache, extra: &[&str], out: &Path) -> serde_json::Value {
    let url = format!("http://127.0.0.1:{}/index.html", ap.port);
    let mut args = vec!["run", &url, "-d", "2s", "-c", "4", "-t", "1", "-o", "json"];
    args.extend_from_slice(extra);
    let (o, _) = redline_with_limit(&args, Duration::from_secs(60));
    assert!(
        o.status.success(),
        "redline {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON output");
    assert_run_schema(&v);
    std::fs::write(out, &o.stdout).unwrap();
    v
}

#[test]
fn compare_shows_the_changed_directives_above_the_deltas() {
    if !apache_present() {
        return;
    }
    let dir = Dir(tmpdir("server-config"));
    let d = &dir.0;
    std::fs::create_dir_all(d.join("www")).unwrap();
    std::fs::write(d.join("www/index.html"), "hello\n".repeat(100)).unwrap();

    // A: given with --server-config.
    let a_rec = d.join("a.json");
    let a = {
        let Some(ap) = start_apache(d, "before", "KeepAliveTimeout 15\nMaxRequestWorkers 150")
        else {
            return;
        };
        let conf = d.join("before.conf");
        run_to(&ap, &["--server-config", conf.to_str().unwrap()], &a_rec)
    };
    let sc = &a["server_config"];
    assert_eq!(sc["server"], "apache", "{sc}");
    let ka = &sc["directives"]["KeepAliveTimeout"];
    assert_eq!(ka["value"], "15", "{sc}");
    assert!(
        ka["at"].as_str().unwrap().starts_with("before.conf:"),
        "{sc}"
    );
    assert_eq!(sc["directives"]["MaxRequestWorkers"]["value"], "150");
    assert_eq!(sc["directives"]["MPM"]["value"], "prefork");
    assert_eq!(sc["directives"]["Timeout"]["at"], "default", "{sc}");
    // Paths (the logs, the document root) are not tuning values: not recorded.
    assert!(!sc["directives"].to_string().contains(&*d.to_string_lossy()));

    // B: found by itself from the process --watch names (its -f).
    let b_rec = d.join("b.json");
    let b = {
        let Some(ap) = start_apache(d, "after", "KeepAliveTimeout 5\nMaxRequestWorkers 33") else {
            return;
        };
        let pid = ap.child.id().to_string();
        run_to(&ap, &["--watch", &pid, "--watch-interval", "250ms"], &b_rec)
    };
    let sc = &b["server_config"];
    assert_eq!(sc["directives"]["KeepAliveTimeout"]["value"], "5", "{b}");
    assert_eq!(sc["directives"]["MaxRequestWorkers"]["value"], "33");
    assert!(sc["file"].as_str().unwrap().ends_with("after.conf"));

    let o = redline(&["compare", a_rec.to_str().unwrap(), b_rec.to_str().unwrap()]);
    assert!(o.status.success());
    let t = String::from_utf8_lossy(&o.stdout).to_string();
    let changes = t
        .find("KeepAliveTimeout 15 -> 5, MaxRequestWorkers 150 -> 33: p99 ")
        .unwrap_or_else(|| panic!("no change line: {t}"));
    let line = t[changes..].lines().next().unwrap();
    assert!(line.contains("req/s "), "{line}");
    let table = t.find("Requests/sec").expect("the deltas");
    assert!(changes < table, "the directives come above the deltas: {t}");
    // Directives that did not change are not listed.
    assert!(!t.contains("StartServers"), "{t}");

    let html = d.join("r.html");
    let o = redline(&[
        "report",
        a_rec.to_str().unwrap(),
        b_rec.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let h = std::fs::read_to_string(&html).unwrap();
    let at = h.find("What changed").expect("the change table");
    assert!(at < h.find("<h2>Summary").unwrap());
    assert!(h.contains("KeepAliveTimeout 15 -&gt; 5, MaxRequestWorkers 150 -&gt; 33: p99 "));
}

#[test]
fn unreadable_server_config_is_one_line_and_exit_2() {
    let o = redline(&[
        "run",
        "http://127.0.0.1:9/",
        "-n",
        "1",
        "--server-config",
        "/nonexistent/apache2.conf",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("--server-config") && e.contains("/nonexistent/apache2.conf"),
        "{e}"
    );
}
