//! Server-side commands against the built binary: bad input, `tune` on a
//! fixture, a real nginx and a real Apache prefork (Debian's, own config,
//! loopback port from binding 0) watched under load and sized (live and from
//! the run record), and the swap warning end to end on a fake `/proc` tree
//! (`REDLINE_PROC_ROOT`). The real-server tests skip with a note when the
//! server is not installed (CI: apt-get install -y nginx apache2).

mod common;

use common::*;
use redline_testkit::need::require;
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
        vec!["watch", "no-such-unit-xyz.service", "-d", "100ms"],
        vec!["size", "--watch", "no-such-unit-xyz.service"],
        vec!["size", "--pid", "0"],
        vec!["size", "--pid", "4000000000"],
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
    let idle = json_of(&[
        "watch",
        &pid,
        "-d",
        "1s",
        "--interval",
        "200ms",
        "-o",
        "json",
    ]);
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
    let r = json_of(&[
        "size",
        "--watch",
        &pid,
        "--memory-budget",
        "256MiB",
        "-o",
        "json",
    ]);
    assert_eq!(r["server"], "nginx");
    assert_eq!(r["workers"], 2);
    assert_eq!(r["budget_kib"], 256 * 1024);
    let per = r["per_worker_private_kib"].as_u64().unwrap();
    let fixed = r["fixed_kib"].as_u64().unwrap();
    let cost = r["per_worker_cost_kib"].as_u64().unwrap();
    assert!(per > 0 && per as f64 <= s["rss_kib"]["peak"].as_f64().unwrap());
    assert!(cost > per, "{r}");
    assert_eq!(
        r["max_workers"].as_u64().unwrap(),
        (256 * 1024 - fixed) / cost
    );
    let text = redline(&["size", "--watch", &pid, "--memory-budget", "50%"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("worker_processes") && text.contains("workers = "),
        "{text}"
    );
}

/// Runs redline, asserts success and parses its JSON output.
fn json_of(args: &[&str]) -> serde_json::Value {
    let out = redline(args);
    assert!(
        out.status.success(),
        "redline {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

/// Sends SIGTERM to a child (so a server's parent stops its workers), waits
/// up to 10 s, then kills it.
fn stop_child(child: &mut Child) {
    // SAFETY: kill() on our own child's PID has no memory-safety preconditions.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Debian's Apache with the prefork MPM on a free loopback port, its config,
/// pid file, logs and documents in a temp dir, in the foreground.
struct Apache {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Apache {
    /// Err: why it cannot run here (the test skips and prints it).
    fn start(extra: &str) -> Result<Apache, String> {
        let bin = "/usr/sbin/apache2";
        let modules = Path::new("/usr/lib/apache2/modules");
        if !Path::new(bin).exists() || !modules.join("mod_mpm_prefork.so").exists() {
            return Err("apache2 is not installed (apt-get install -y apache2)".into());
        }
        let port = redline_testkit::free_port();
        let dir =
            std::env::temp_dir().join(format!("redline-apache-test-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("html")).map_err(|e| e.to_string())?;
        let page: String = (0..20_000)
            .map(|i| (b'a' + (i % 26) as u8) as char)
            .collect();
        std::fs::write(dir.join("html/index.html"), page).map_err(|e| e.to_string())?;
        // As root Apache refuses to serve as root: its workers need a User/Group.
        // SAFETY: geteuid() has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let user = if root {
            let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
            let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
            let has = |db: &str, n: &str| db.lines().any(|l| l.starts_with(&format!("{n}:")));
            if has(&passwd, "www-data") && has(&group, "www-data") {
                "User www-data\nGroup www-data\n"
            } else if has(&passwd, "nobody") && has(&group, "nogroup") {
                "User nobody\nGroup nogroup\n"
            } else {
                return Err(
                    "running as root and no www-data or nobody user for Apache's workers".into(),
                );
            }
        } else {
            ""
        };
        let d = dir.display();
        let m = modules.display();
        let conf = format!(
            "ServerRoot {d}\nServerName 127.0.0.1\nListen 127.0.0.1:{port}\nPidFile {d}/apache2.pid\n\
             ErrorLog {d}/error.log\nLogLevel warn\nDefaultRuntimeDir {d}\nMutex file:{d} default\n\
             LoadModule mpm_prefork_module {m}/mod_mpm_prefork.so\n\
             LoadModule authz_core_module {m}/mod_authz_core.so\n\
             {user}\
             StartServers 2\nMinSpareServers 1\nMaxSpareServers 4\nServerLimit 64\nMaxRequestWorkers 64\n\
             KeepAlive On\nMaxKeepAliveRequests 0\n\
             DocumentRoot {d}/html\n<Directory {d}/html>\n  Require all granted\n</Directory>\n{}",
            extra.replace("{d}", &d.to_string()).replace("{m}", &m.to_string())
        );
        if extra.contains("/cgi/") {
            std::fs::create_dir_all(dir.join("cgi")).map_err(|e| e.to_string())?;
            std::fs::write(dir.join("cgi/load.cgi"), CGI_SCRIPT).map_err(|e| e.to_string())?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                dir.join("cgi/load.cgi"),
                std::fs::Permissions::from_mode(0o755),
            )
            .map_err(|e| e.to_string())?;
        }
        std::fs::write(dir.join("apache2.conf"), conf).map_err(|e| e.to_string())?;
        let _ = Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(&dir)
            .status();
        // Its own process group: prefork's parent stops by sending SIGTERM to
        // its whole group, which would otherwise be the test's (and cargo's).
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(bin)
            .process_group(0)
            .args(["-D", "FOREGROUND", "-f"])
            .arg(dir.join("apache2.conf"))
            .env("APACHE_RUN_DIR", &dir)
            .env("APACHE_LOCK_DIR", &dir)
            .env("APACHE_LOG_DIR", &dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start apache2: {e}"))?;
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(st)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!(
                    "apache2 exited ({st}): {} {}",
                    err.trim(),
                    log.trim()
                ));
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(Apache { child, dir, port });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        stop_child(&mut child);
        let _ = std::fs::remove_dir_all(&dir);
        Err("apache2 did not listen within 10 s".into())
    }
}

impl Drop for Apache {
    fn drop(&mut self) {
        stop_child(&mut self.child);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A CGI program that burns some CPU (a 20,000-step shell loop, about
/// 10-30 ms) and answers: each request is a short-lived child of a worker.
const CGI_SCRIPT: &str = "#!/bin/sh\ni=0\nwhile [ $i -lt 20000 ]; do i=$((i+1)); done\nprintf 'Content-Type: text/plain\\r\\n\\r\\nok %s\\n' \"$i\"\n";

/// Apache's config for the CGI load (prefork runs CGI through mod_cgi: the
/// worker forks the program and reaps it).
const CGI_CONF: &str =
    "LoadModule alias_module {m}/mod_alias.so\nLoadModule cgi_module {m}/mod_cgi.so\n\
    ScriptAlias /cgi-bin/ {d}/cgi/\n<Directory {d}/cgi>\n  Require all granted\n</Directory>\n";

/// A process in /proc: (pid, ppid, comm, own CPU ticks, reaped children's CPU ticks).
fn proc_stat(pid: u32) -> Option<(u32, u32, String, u64, u64)> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (t.find('(')?, t.rfind(')')?);
    let f: Vec<&str> = t[close + 1..].split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some((
        pid,
        n(1)? as u32,
        t[open + 1..close].to_string(),
        n(11)? + n(12)?,
        n(13)? + n(14)?,
    ))
}

/// The processes of the tree under `top` now (itself included).
fn tree(top: u32) -> Vec<(u32, u32, String, u64, u64)> {
    let all: Vec<_> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(proc_stat)
        .collect();
    let mut inside = vec![top];
    // Bounded: each round adds a generation; a tree is not deeper than 64.
    for _ in 0..64 {
        let more: Vec<u32> = all
            .iter()
            .filter(|p| inside.contains(&p.1) && !inside.contains(&p.0))
            .map(|p| p.0)
            .collect();
        if more.is_empty() {
            break;
        }
        inside.extend(more);
    }
    all.into_iter().filter(|p| inside.contains(&p.0)).collect()
}

/// CPU seconds the tree's processes and the children they reaped have used.
fn tree_cpu(top: u32) -> (f64, f64) {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let t = tree(top);
    (
        t.iter().map(|p| (p.3 + p.4) as f64).sum::<f64>() / hz,
        t.iter().map(|p| p.4 as f64).sum::<f64>() / hz,
    )
}

/// CPU seconds the watch saw: each sample's CPU % over the interval before it.
fn watched_cpu_s(h: &serde_json::Value) -> f64 {
    let s = h["samples"].as_array().unwrap();
    s.windows(2)
        .map(|w| {
            w[1]["cpu_percent"].as_f64().unwrap() / 100.0
                * (w[1]["t"].as_f64().unwrap() - w[0]["t"].as_f64().unwrap())
        })
        .sum()
}

/// Runs a CGI load against `ap` watched by PID, while the test counts the
/// tree's processes itself (every 20 ms) and its CPU from /proc (before and
/// after, reaped children included); returns (watch host, the test's CPU
/// seconds, of which reaped children's, the most processes the test saw).
fn cgi_load(ap: &Apache) -> (serde_json::Value, f64, f64, usize) {
    let pid = ap.child.id();
    let url = format!("http://127.0.0.1:{}/cgi-bin/load.cgi", ap.port);
    let (cpu0, kids0) = tree_cpu(pid);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut most, start) = (0, Instant::now());
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                && start.elapsed() < Duration::from_secs(60)
            {
                most = most.max(tree(pid).len());
                std::thread::sleep(Duration::from_millis(20));
            }
            most
        })
    };
    let v = run_json(&[
        "-d",
        "3s",
        "-c",
        "4",
        "--no-save",
        "--watch",
        &pid.to_string(),
        "--watch-interval",
        "200ms",
        &url,
    ]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let most = poller.join().unwrap();
    let (cpu1, kids1) = tree_cpu(pid);
    assert!(counter(&v, "completed") > 0, "{v}");
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    (
        v["server_watch"]["hosts"][0].clone(),
        cpu1 - cpu0,
        kids1 - kids0,
        most,
    )
}

/// What the watch saw of a CGI load agrees with the test's own accounting.
fn assert_cgi_watch(h: &serde_json::Value, cpu: f64, kids: f64, most: usize) {
    let seen = watched_cpu_s(h);
    let peak = h["summary"]["processes"]["peak"].as_f64().unwrap();
    eprintln!(
        "CGI load: the test counted {cpu:.2} CPU-s ({kids:.2} in reaped children), at most {most} processes; \
         the watch {seen:.2} CPU-s, at most {peak} processes (cgroup: {})",
        h["cgroup"]
    );
    // The load is the children's: without their CPU a watch sees a fraction.
    assert!(kids > 0.5 * cpu && cpu > 0.2, "{kids} of {cpu}");
    assert!(
        seen > 0.6 * cpu && seen < 1.5 * cpu + 0.2,
        "watch {seen} CPU-s, the processes used {cpu}: {h}"
    );
    // The short-lived CGI children are among the processes seen.
    assert!(
        h["process_names"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "load.cgi"),
        "{}",
        h["process_names"]
    );
    assert!(
        peak >= most as f64 / 2.0 && peak >= 3.0,
        "watch {peak}, test {most}"
    );
    // Nothing was estimated (the exited children were skipped, not guessed).
    assert_eq!(h["pss_exact"], true);
}

#[test]
fn watch_counts_a_cgi_loads_short_lived_children() {
    let ap = match Apache::start(CGI_CONF) {
        Ok(a) => a,
        Err(why) => {
            require(&format!("Apache with mod_cgi ({why})"), false);
            return;
        }
    };
    let (h, cpu, kids, most) = cgi_load(&ap);
    assert_cgi_watch(&h, cpu, kids, most);
}

/// A cgroup made for a test server under this process's own cgroups (v2 if
/// mounted, and v1 memory, cpuacct, pids), removed at the end.
struct TestCgroup {
    dirs: Vec<PathBuf>,
}

impl TestCgroup {
    /// None: not root, or no writable cgroup file system here.
    fn new(name: &str) -> Option<TestCgroup> {
        // SAFETY: geteuid() has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let mine = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let base = Path::new("/sys/fs/cgroup");
        let mut dirs = Vec::new();
        for line in mine.lines() {
            let mut it = line.splitn(3, ':');
            let (_, ctl, path) = (it.next()?, it.next()?, it.next()?);
            let path = path.trim_start_matches('/');
            let mount = match ctl {
                "" if base.join("unified/cgroup.controllers").exists() => base.join("unified"),
                "" if base.join("cgroup.controllers").exists() => base.to_path_buf(),
                "memory" | "pids" => base.join(ctl),
                c if c.split(',').any(|x| x == "cpuacct") => base.join(c),
                _ => continue,
            };
            let d = mount.join(path).join(name);
            if std::fs::create_dir(&d).is_ok() {
                dirs.push(d);
            }
        }
        (!dirs.is_empty()).then_some(TestCgroup { dirs })
    }

    /// Moves the processes into every directory of the group.
    fn take(&self, pids: &[u32]) -> bool {
        self.dirs.iter().all(|d| {
            pids.iter().all(|p| {
                std::fs::write(d.join("cgroup.procs"), p.to_string()).is_ok()
                    || !Path::new(&format!("/proc/{p}")).exists()
            })
        })
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for d in &self.dirs {
            // Empty once the server has stopped; a few tries while its last processes exit.
            for _ in 0..50 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[test]
fn watch_reads_the_servers_own_cgroup() {
    // The cgroup first, so that it is dropped (removed) after the server (stopped).
    let name = format!("redline-test-{}", std::process::id());
    let Some(cg) = TestCgroup::new(&name) else {
        eprintln!("note: cgroup test skipped: not root, or no writable cgroup file system");
        return;
    };
    let ap = match Apache::start(CGI_CONF) {
        Ok(a) => a,
        Err(why) => {
            require(&format!("Apache with mod_cgi ({why})"), false);
            return;
        }
    };
    // The whole tree (the parent and the workers it started) into the cgroup; children follow.
    let pids: Vec<u32> = tree(ap.child.id()).iter().map(|p| p.0).collect();
    assert!(cg.take(&pids), "cannot move {pids:?} into {:?}", cg.dirs);
    let (h, cpu, kids, most) = cgi_load(&ap);
    let label = h["cgroup"].as_str().unwrap_or_default();
    assert!(label.contains(&name), "{h}");
    // The cgroup's own counters came through.
    if cg
        .dirs
        .iter()
        .any(|d| d.join("memory.usage_in_bytes").exists() || d.join("memory.current").exists())
    {
        assert!(
            h["summary"]["cgroup_memory_kib"]["peak"].as_f64().unwrap() > 0.0,
            "{h}"
        );
    }
    if let Some(t) = h["cgroup_tasks_peak"].as_u64() {
        assert!(
            t as f64 >= h["summary"]["processes"]["peak"].as_f64().unwrap() / 2.0,
            "{h}"
        );
    }
    assert_cgi_watch(&h, cpu, kids, most);
    drop(ap);
    drop(cg);
}

/// The size report's arithmetic: workers = (budget − paid once) / private per worker.
fn assert_size_arithmetic(r: &serde_json::Value, budget_kib: u64) {
    assert_eq!(r["budget_kib"], budget_kib, "{r}");
    let per = r["per_worker_private_kib"].as_u64().unwrap();
    let fixed = r["fixed_kib"].as_u64().unwrap();
    let n = r["max_workers"].as_u64().unwrap();
    assert!(per > 0, "{r}");
    // One worker costs its private and kernel memory plus the 10 % safety margin.
    let kernel = r["per_worker_kernel_kib"].as_u64().unwrap();
    let cost = r["per_worker_cost_kib"].as_u64().unwrap();
    assert!(kernel > 0, "{r}");
    assert_eq!(
        cost,
        per + kernel + ((per + kernel) * 10).div_ceil(100),
        "{r}"
    );
    assert_eq!(n, (budget_kib - fixed) / cost, "{r}");
    // Private ≤ PSS ≤ RSS for the worker the sizing used.
    let (pss, rss) = (
        r["per_worker_pss_kib"].as_u64().unwrap(),
        r["per_worker_rss_kib"].as_u64().unwrap(),
    );
    assert!(per <= pss && pss <= rss, "{r}");
    let dirs: Vec<&str> = r["directives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        dirs.iter().any(|d| *d == format!("MaxRequestWorkers {n}")),
        "{dirs:?}"
    );
}

#[test]
fn watch_a_real_apache_prefork_under_load_and_size_it() {
    let ap = match Apache::start("") {
        Ok(a) => a,
        Err(why) => {
            require(&format!("Apache prefork ({why})"), false);
            return;
        }
    };
    let pid = ap.child.id().to_string();
    let url = format!("http://127.0.0.1:{}/index.html", ap.port);

    let idle = json_of(&[
        "watch",
        &pid,
        "-d",
        "1s",
        "--interval",
        "200ms",
        "-o",
        "json",
    ]);
    let is = &idle["hosts"][0]["summary"];
    let idle_procs = is["processes"]["peak"].as_f64().unwrap();
    let idle_cpu = is["cpu_percent"]["mean"].as_f64().unwrap();
    let idle_private = is["private_kib"]["mean"].as_f64().unwrap();

    // By PID, never by name: another Apache on this machine is another
    // instance, and `--watch apache2` would watch it apart, as another host entry.
    let v = run_json(&[
        "-d",
        "3s",
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
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    let h = &v["server_watch"]["hosts"][0];
    let s = &h["summary"];
    // Several processes, more than idle: prefork forks a worker per busy connection.
    let procs = s["processes"]["peak"].as_f64().unwrap();
    assert!(
        procs >= 4.0 && procs > idle_procs,
        "idle {idle_procs}, under load {procs}"
    );
    let cpu = s["cpu_percent"]["peak"].as_f64().unwrap();
    assert!(
        cpu > idle_cpu && cpu > 5.0,
        "cpu idle {idle_cpu} load {cpu}"
    );
    let private = s["private_kib"]["peak"].as_f64().unwrap();
    assert!(
        private > idle_private,
        "private idle {idle_private} load {private}"
    );
    let (rss, pss) = (
        s["rss_kib"]["peak"].as_f64().unwrap(),
        s["pss_kib"]["peak"].as_f64().unwrap(),
    );
    assert!(rss >= pss && pss >= private && private > 0.0, "{s}");
    // The per-process snapshot at the memory peak: the parent and its workers.
    let snap = h["peak_processes"].as_array().unwrap();
    assert!(snap.len() >= 4, "{snap:?}");
    assert!(snap
        .iter()
        .all(|p| p["name"] == "apache2" && p["threads"] == 1));
    let snap_private: u64 = snap
        .iter()
        .map(|p| p["private_kib"].as_u64().unwrap())
        .sum();
    assert_eq!(
        snap_private as f64, private,
        "the snapshot is the peak sample"
    );

    // Live sizing.
    let gib = 1024 * 1024;
    let r = json_of(&[
        "size",
        "--watch",
        &pid,
        "--memory-budget",
        "1GiB",
        "-o",
        "json",
    ]);
    assert_eq!(r["server"], "Apache httpd");
    assert!(
        r["mpm"].as_str().unwrap().starts_with("prefork"),
        "{}",
        r["mpm"]
    );
    assert_size_arithmetic(&r, gib);
    // One more worker costs about what a worker's private memory measured under load.
    let per = r["per_worker_private_kib"].as_u64().unwrap() as f64;
    let measured_max = snap
        .iter()
        .filter(|p| p["ppid"].as_u64().unwrap().to_string() == pid)
        .map(|p| p["private_kib"].as_u64().unwrap())
        .max()
        .unwrap() as f64;
    assert!(
        per > measured_max * 0.5 && per < measured_max * 2.0,
        "live {per}, run {measured_max}"
    );

    // Sizing from the run record: the snapshot's numbers, the same arithmetic.
    let path = std::env::temp_dir().join(format!("redline-apache-run-{}.json", std::process::id()));
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let from = [
        "size",
        "--from",
        path.to_str().unwrap(),
        "--memory-budget",
        "1GiB",
    ];
    let r = json_of(&[&from[..], &["-o", "json"]].concat());
    let text = redline(&from);
    let _ = std::fs::remove_file(&path);
    assert_size_arithmetic(&r, gib);
    assert_eq!(r["per_worker_private_kib"].as_f64().unwrap(), measured_max);
    assert_eq!(r["processes"].as_u64().unwrap(), snap.len() as u64);
    assert!(
        r["source"]
            .as_str()
            .unwrap()
            .contains("most private memory"),
        "{r}"
    );
    eprintln!(
        "apache prefork: {idle_procs} processes idle, {procs} under load; CPU {idle_cpu:.0}% -> {cpu:.0}%; \
         private {idle_private:.0} -> {private:.0} KiB; one worker {measured_max} KiB private; \
         MaxRequestWorkers {} for 1 GiB",
        r["max_workers"]
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("workers = (budget 1.00 GiB") && text.contains("MaxRequestWorkers"),
        "{text}"
    );
}

fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn meminfo(available_kib: u64) -> String {
    format!(
        "MemTotal:        8000000 kB\nMemFree:          {available_kib} kB\nMemAvailable:     {available_kib} kB\n\
         SwapTotal:       2000000 kB\nSwapFree:        1500000 kB\n"
    )
}

#[test]
fn swap_during_the_run_is_warned_in_report_and_json() {
    // A fake /proc: one "server" process, and machine files the test rewrites mid-run.
    let root = std::env::temp_dir().join(format!("redline-fakeproc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("4242")).unwrap();
    std::fs::write(
        root.join("4242/stat"),
        "4242 (fakesrv) S 1 4242 4242 0 -1 0 0 0 0 0 10 5 0 0 20 0 1 0 100 1000 200 0\n",
    )
    .unwrap();
    std::fs::write(
        root.join("4242/smaps_rollup"),
        "Rss: 2048 kB\nPss: 1024 kB\nPrivate_Clean: 0 kB\nPrivate_Dirty: 512 kB\nSwap: 0 kB\n",
    )
    .unwrap();
    std::fs::write(root.join("loadavg"), "0.50 0.40 0.30 1/100 4242\n").unwrap();
    write_atomic(&root.join("meminfo"), &meminfo(6_000_000));
    write_atomic(&root.join("vmstat"), "pswpin 10\npswpout 100\n");

    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let label = format!("swaptest-{}", std::process::id());
    let db = std::env::temp_dir().join(format!("redline-swaptest-{}.db", std::process::id()));
    let child = Command::new(bin())
        .args(["run", "-d", "2s", "-c", "2", "-t", "1", "-o", "json", "-q"])
        .args([
            "--watch",
            "fakesrv",
            "--watch-interval",
            "100ms",
            "--label",
            &label,
            &url,
        ])
        .env("REDLINE_PROC_ROOT", &root)
        .env("REDLINE_DB", &db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-run: 5000 pages swapped out, MemAvailable down to 2 % of MemTotal.
    std::thread::sleep(Duration::from_millis(700));
    write_atomic(&root.join("vmstat"), "pswpin 10\npswpout 5100\n");
    write_atomic(&root.join("meminfo"), &meminfo(160_000));
    let out = wait_limit(child, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let h = &v["server_watch"]["hosts"][0];
    assert_eq!(h["process_names"][0], "fakesrv");
    assert_eq!(h["summary"]["swapped_out_pages"], 5000, "{}", h["summary"]);
    assert_eq!(h["summary"]["swapped_in_pages"], 0);
    assert_eq!(h["summary"]["min_mem_available_kib"], 160_000);
    let warn: Vec<&serde_json::Value> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == "server_swap")
        .collect();
    assert_eq!(warn.len(), 1, "{}", v["warnings"]);
    let msg = warn[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("swapped during the run") && msg.contains("5000 out"),
        "{msg}"
    );

    // The text report of the same (saved) run carries it too.
    let show = Command::new(bin())
        .args(["show", &label])
        .env("REDLINE_DB", &db)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("! [server_swap]") && text.contains("swapped during the run"),
        "{text}{}",
        String::from_utf8_lossy(&show.stderr)
    );
    assert!(text.contains("0 pages in, 5000 pages out"), "{text}");

    // Without the swap, only the low-memory warning.
    write_atomic(&root.join("vmstat"), "pswpin 10\npswpout 5100\n");
    let child = Command::new(bin())
        .args([
            "run",
            "-d",
            "1s",
            "-c",
            "1",
            "-t",
            "1",
            "-o",
            "json",
            "-q",
            "--no-save",
        ])
        .args(["--watch", "fakesrv", "--watch-interval", "100ms", &url])
        .env("REDLINE_PROC_ROOT", &root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_limit(child, Duration::from_secs(60));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let msgs: Vec<&str> = warning_messages(&v, "server_swap");
    assert!(
        msgs.len() == 1 && msgs[0].contains("ran low on memory"),
        "{msgs:?}"
    );

    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_file(&db);
    srv.shutdown();
}

/// A fake `/proc` with an Apache prefork: a parent and two workers.
fn fake_apache_proc(root: &Path) {
    let _ = std::fs::remove_dir_all(root);
    for (pid, ppid, private) in [(5000, 1, 2048), (5001, 5000, 6144), (5002, 5000, 8192)] {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("stat"),
            format!("{pid} (apache2) S {ppid} 5000 5000 0 -1 0 0 0 0 0 10 5 0 0 20 0 1 0 100 1000 200 0\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("smaps_rollup"),
            format!(
                "Rss: {} kB\nPss: {} kB\nPrivate_Clean: 0 kB\nPrivate_Dirty: {private} kB\nSwap: 0 kB\n",
                private + 20_000,
                private + 4_000
            ),
        )
        .unwrap();
        // 84 KiB of page tables + one 16 KiB kernel stack: 100 KiB of kernel memory.
        std::fs::write(
            d.join("status"),
            "Name:\tapache2\nVmPTE:\t84 kB\nThreads:\t1\n",
        )
        .unwrap();
    }
    std::fs::write(root.join("loadavg"), "0.50 0.40 0.30 1/100 5002\n").unwrap();
    std::fs::write(root.join("meminfo"), meminfo(6_000_000)).unwrap();
    std::fs::write(root.join("vmstat"), "pswpin 10\npswpout 100\n").unwrap();
}

fn redline_env(args: &[&str], root: &Path) -> std::process::Output {
    let child = Command::new(bin())
        .args(args)
        .env("REDLINE_PROC_ROOT", root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_limit(child, Duration::from_secs(60))
}

#[test]
fn size_cites_the_error_logs_reached_max_request_workers_lines() {
    let root = std::env::temp_dir().join(format!("redline-fakeapache-{}", std::process::id()));
    fake_apache_proc(&root);
    let log = fixture("apache-error.log");
    let log_s = log.to_str().unwrap();
    let last = "[Sun Nov 22 09:31:42.654321 2026] [mpm_prefork:error] [pid 5000] AH00161: server reached MaxRequestWorkers";
    let cited = format!("{log_s}: 2 \"reached MaxRequestWorkers\" lines, the last: {last}");

    // Live, text and JSON. Paid once: parent PSS 6048 + its kernel 100 +
    // shared 2 × 4000 KiB = 14148 KiB; the largest worker costs 8192 private
    // + 100 kernel + 10 % = 9122 KiB; (1 GiB - 14148 KiB) / 9122 KiB = 113.
    let live = [
        "size",
        "--watch",
        "apache2",
        "--memory-budget",
        "1GiB",
        "--error-log",
        log_s,
    ];
    let out = redline_env(&live, &root);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(&format!("[!!] {cited}")), "{text}");
    assert!(text.contains("MaxRequestWorkers 113\n"), "{text}");
    let out = redline_env(&[&live[..], &["-o", "json"]].concat(), &root);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with(&cited)),
        "{r}"
    );
    // A log without such lines cites nothing.
    let quiet = std::env::temp_dir().join(format!("redline-quiet-{}.log", std::process::id()));
    std::fs::write(
        &quiet,
        "[core:notice] AH00094: Command line: '/usr/sbin/apache2'\n",
    )
    .unwrap();
    let out = redline_env(
        &[
            "size",
            "--watch",
            "apache2",
            "--error-log",
            quiet.to_str().unwrap(),
        ],
        &root,
    );
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("reached"));
    let _ = std::fs::remove_file(&quiet);
    // An unreadable --error-log: one line, exit 2.
    let out = redline_env(
        &[
            "size",
            "--watch",
            "apache2",
            "--error-log",
            "/nonexistent/error.log",
        ],
        &root,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--error-log /nonexistent/error.log"), "{err}");

    // From a run record: cited with --error-log, not without.
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let out = redline_env(
        &[
            "run",
            "-d",
            "1s",
            "-c",
            "1",
            "-t",
            "1",
            "-o",
            "json",
            "-q",
            "--no-save",
            "--watch",
            "apache2",
            "--watch-interval",
            "100ms",
            &url,
        ],
        &root,
    );
    srv.shutdown();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec = std::env::temp_dir().join(format!("redline-fakeapache-{}.json", std::process::id()));
    std::fs::write(&rec, &out.stdout).unwrap();
    let rec_s = rec.to_str().unwrap();
    let from = ["size", "--from", rec_s, "--memory-budget", "1GiB"];
    let with = redline(&[&from[..], &["--error-log", log_s]].concat());
    let without = redline(&from);
    let _ = std::fs::remove_file(&rec);
    let _ = std::fs::remove_dir_all(&root);
    let with = String::from_utf8_lossy(&with.stdout);
    assert!(with.contains(&format!("[!!] {cited}")), "{with}");
    assert!(with.contains("MaxRequestWorkers 113\n"), "{with}");
    let without = String::from_utf8_lossy(&without.stdout);
    assert!(without.contains("MaxRequestWorkers 113\n"), "{without}");
    assert!(!without.contains("reached MaxRequestWorkers"), "{without}");
}

#[test]
fn tune_and_size_agree_and_instances_are_kept_apart() {
    let root = std::env::temp_dir().join(format!("redline-instances-{}", std::process::id()));
    fake_apache_proc(&root);
    // tune and size on the same measured worker and budget: one answer (113, see above).
    let conf = root.join("apache2.conf");
    std::fs::write(
        &conf,
        "LoadModule mpm_prefork_module /usr/lib/apache2/modules/mod_mpm_prefork.so\nServerLimit 400\nMaxRequestWorkers 400\n",
    )
    .unwrap();
    let budget = ["--memory-budget", "1GiB"];
    let size = redline_env(
        &[&["size", "--watch", "apache2", "-o", "json"][..], &budget].concat(),
        &root,
    );
    assert!(
        size.status.success(),
        "{}",
        String::from_utf8_lossy(&size.stderr)
    );
    let size: serde_json::Value = serde_json::from_slice(&size.stdout).unwrap();
    let tune = redline_env(
        &[
            &[
                "tune",
                conf.to_str().unwrap(),
                "--no-tools",
                "--watch",
                "apache2",
                "-o",
                "json",
            ][..],
            &budget,
        ]
        .concat(),
        &root,
    );
    assert!(
        tune.status.success(),
        "{}",
        String::from_utf8_lossy(&tune.stderr)
    );
    let tune: serde_json::Value = serde_json::from_slice(&tune.stdout).unwrap();
    let f = tune["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "max_request_workers_over_memory")
        .unwrap_or_else(|| panic!("{tune}"));
    assert_eq!(size["max_workers"], 113, "{size}");
    assert!(
        f["change"]
            .as_str()
            .unwrap()
            .starts_with("MaxRequestWorkers 113\n"),
        "{f}"
    );

    // A second Apache (its own parent) listening elsewhere: two instances.
    for (pid, ppid) in [(6000, 1), (6001, 6000)] {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(d.join("fd")).unwrap();
        std::fs::write(
            d.join("stat"),
            format!("{pid} (apache2) S {ppid} 6000 6000 0 -1 0 0 0 0 0 10 5 0 0 20 0 1 0 100 1000 200 0\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("smaps_rollup"),
            "Rss: 9000 kB\nPss: 5000 kB\nPrivate_Clean: 0 kB\nPrivate_Dirty: 3000 kB\n",
        )
        .unwrap();
    }
    std::fs::create_dir_all(root.join("5000/fd")).unwrap();
    std::os::unix::fs::symlink("socket:[9001]", root.join("5000/fd/4")).unwrap();
    std::os::unix::fs::symlink("socket:[9002]", root.join("6000/fd/4")).unwrap();
    std::fs::create_dir_all(root.join("net")).unwrap();
    std::fs::write(
        root.join("net/tcp"),
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
         \x20  0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 9001 1 0 100 0 0 10 0\n\
         \x20  1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 9002 1 0 100 0 0 10 0\n",
    )
    .unwrap();
    let out = redline_env(&["size", "--watch", "apache2"], &root);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("matches 2 instances: pid 5000 (parent 1, 127.0.0.1:8080); pid 6000 (parent 1, 0.0.0.0:80)")
            && err.contains("--pid"),
        "{err}"
    );
    // --pid picks one: the first instance's numbers, as before the second appeared.
    let one = redline_env(
        &[&["size", "--pid", "5000", "-o", "json"][..], &budget].concat(),
        &root,
    );
    assert!(
        one.status.success(),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    let one: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(
        (one["processes"].as_u64(), one["max_workers"].as_u64()),
        (Some(3), Some(113))
    );
    // watch keeps them apart: one entry per instance, each with its own processes.
    let w = redline_env(
        &[
            "watch",
            "apache2",
            "-d",
            "300ms",
            "--interval",
            "100ms",
            "-o",
            "json",
        ],
        &root,
    );
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    let w: serde_json::Value = serde_json::from_slice(&w.stdout).unwrap();
    let hosts = w["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2, "{w}");
    assert_eq!(
        hosts[0]["targets"][0],
        "apache2 pid 5000 (parent 1, 127.0.0.1:8080)"
    );
    assert_eq!(hosts[0]["summary"]["processes"]["peak"], 3.0);
    assert_eq!(
        hosts[1]["targets"][0],
        "apache2 pid 6000 (parent 1, 0.0.0.0:80)"
    );
    assert_eq!(hosts[1]["summary"]["processes"]["peak"], 2.0);
    // Sizing from that record asks which instance, or takes --instance.
    let rec = root.join("watch-as-run.json");
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let run = redline_env(
        &[
            "run",
            "-n",
            "1",
            "-o",
            "json",
            "-q",
            "--no-save",
            "--watch",
            "apache2",
            "--watch-interval",
            "100ms",
            &url,
        ],
        &root,
    );
    srv.shutdown();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::write(&rec, &run.stdout).unwrap();
    let rec_s = rec.to_str().unwrap();
    let out = redline(&["size", "--from", rec_s]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("2 instances") && err.contains("--instance PID"),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_slice(
        &redline(
            &[
                &["size", "--from", rec_s, "--instance", "5000", "-o", "json"][..],
                &budget,
            ]
            .concat(),
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(
        (r["processes"].as_u64(), r["max_workers"].as_u64()),
        (Some(3), Some(113)),
        "{r}"
    );
    let out = redline(&["size", "--from", rec_s, "--instance", "7777"]);
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn watch_and_size_a_systemd_unit_from_its_cgroup() {
    // A fake /proc (Apache 5000 with workers 5001, 5002) and a fake cgroup v2
    // tree with the unit's group holding them.
    let root = std::env::temp_dir().join(format!("redline-unit-{}", std::process::id()));
    fake_apache_proc(&root);
    let cg = root.join("cgroup");
    let unit = cg.join("system.slice/apache2.service");
    std::fs::create_dir_all(&unit).unwrap();
    std::fs::write(cg.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
    std::fs::write(unit.join("cgroup.procs"), "5000\n5001\n5002\n").unwrap();
    std::fs::write(unit.join("memory.current"), format!("{}\n", 40 << 20)).unwrap();
    std::fs::write(unit.join("memory.peak"), format!("{}\n", 64 << 20)).unwrap();
    std::fs::write(unit.join("cpu.stat"), "usage_usec 5000000\n").unwrap();
    std::fs::write(unit.join("pids.peak"), "12\n").unwrap();
    for pid in [5000, 5001, 5002] {
        std::fs::write(
            root.join(format!("{pid}/cgroup")),
            "0::/system.slice/apache2.service\n",
        )
        .unwrap();
    }
    let run = |args: &[&str]| {
        Command::new(bin())
            .args(args)
            .env("REDLINE_PROC_ROOT", &root)
            .env("REDLINE_CGROUP_ROOT", &cg)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let w = run(&[
        "watch",
        "apache2.service",
        "-d",
        "300ms",
        "--interval",
        "100ms",
        "-o",
        "json",
    ]);
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    let w: serde_json::Value = serde_json::from_slice(&w.stdout).unwrap();
    let h = &w["hosts"][0];
    assert_eq!(h["cgroup"], "v2 /system.slice/apache2.service", "{h}");
    assert_eq!(h["cgroup_memory_peak_kib"], 64 * 1024);
    assert_eq!(h["cgroup_tasks_peak"], 12);
    assert_eq!(h["summary"]["processes"]["peak"], 3.0);
    assert_eq!(h["summary"]["cgroup_memory_kib"]["peak"], 40.0 * 1024.0);
    // The same processes by PID: the cgroup is found from /proc/PID/cgroup.
    let p = run(&[
        "watch",
        "5000",
        "-d",
        "200ms",
        "--interval",
        "100ms",
        "-o",
        "json",
    ]);
    let p: serde_json::Value = serde_json::from_slice(&p.stdout).unwrap();
    assert_eq!(p["hosts"][0]["cgroup"], "v2 /system.slice/apache2.service");
    // size takes the unit's processes: the same 113 as by name.
    let r = run(&[
        "size",
        "--watch",
        "apache2.service",
        "--memory-budget",
        "1GiB",
        "-o",
        "json",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let r: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(
        (r["processes"].as_u64(), r["max_workers"].as_u64()),
        (Some(3), Some(113))
    );
    // A unit with no cgroup: one line, exit 2.
    let bad = run(&["size", "--watch", "nginx.service"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

/// A fake `/proc` with one "server" process `pid` of 512 KiB private memory.
fn fake_proc_process(root: &Path, pid: u32, ppid: u32) {
    let d = root.join(pid.to_string());
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("stat"),
        format!(
            "{pid} (fakesrv) S {ppid} {pid} {pid} 0 -1 0 0 0 0 0 10 5 0 0 20 0 1 0 100 1000 200 0\n"
        ),
    )
    .unwrap();
    std::fs::write(
        d.join("smaps_rollup"),
        "Rss: 2048 kB\nPss: 1024 kB\nPrivate_Clean: 0 kB\nPrivate_Dirty: 512 kB\nSwap: 0 kB\n",
    )
    .unwrap();
}

#[test]
fn server_per_stage_in_json_and_every_host_in_html() {
    // A fake /proc with one fakesrv process; a second one appears in stage 2.
    let root = std::env::temp_dir().join(format!("redline-stageproc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    fake_proc_process(&root, 4300, 1);
    std::fs::write(root.join("loadavg"), "0.50 0.40 0.30 1/100 4300\n").unwrap();
    std::fs::write(root.join("meminfo"), meminfo(6_000_000)).unwrap();
    std::fs::write(root.join("vmstat"), "pswpin 10\npswpout 100\n").unwrap();
    let live = root.join("live.jsonl");

    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let child = Command::new(bin())
        .args(["run", "--stages", "2s:1,2s:2", "--step", "-t", "1"])
        .args(["-o", "json", "-q", "--no-save", "--watch", "fakesrv"])
        .args(["--watch-interval", "100ms", "--live-json"])
        .args([live.to_str().unwrap(), &url])
        .env("REDLINE_PROC_ROOT", &root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the run's second second is over (stage 2 has begun), a second process.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        let text = std::fs::read_to_string(&live).unwrap_or_default();
        if text.lines().count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // A worker of the first (a second main process would be another instance, watched apart).
    fake_proc_process(&root, 4301, 4300);
    let out = wait_limit(child, Duration::from_secs(60));
    srv.shutdown();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_run_schema(&v);
    let host = v["server_watch"]["hosts"][0]["host"]
        .as_str()
        .unwrap()
        .to_string();
    let stages = v["stages"].as_array().unwrap().clone();
    assert_eq!(stages.len(), 2);
    let srv_of = |st: &serde_json::Value, k: usize| st["server"][k].clone();
    for st in &stages {
        assert_eq!(st["server"].as_array().unwrap().len(), 1, "{st}");
        assert_eq!(srv_of(st, 0)["host"], host.as_str());
        assert_eq!(srv_of(st, 0)["targets"][0], "fakesrv");
        // The watch starts with the load, within milliseconds.
        let off = srv_of(st, 0)["offset_s"].as_f64().unwrap();
        assert!(off.abs() <= 0.5, "{off}");
    }
    // Stage 1 (0-2 s): one process all along, 512 KiB private; stage 2: two.
    let s1 = &srv_of(&stages[0], 0)["summary"];
    let s2 = &srv_of(&stages[1], 0)["summary"];
    // Every 100 ms over 2 s is about 20 samples; a busy CI host has given 9.
    // What matters is that the stage has its own window's samples, not all.
    let whole = v["server_watch"]["hosts"][0]["summary"]["samples"]
        .as_u64()
        .unwrap();
    let n1 = s1["samples"].as_u64().unwrap();
    let n2 = s2["samples"].as_u64().unwrap();
    assert!(
        n1 >= 4 && n2 >= 4 && n1 + n2 <= whole + 1,
        "{s1} {s2} whole {whole}"
    );
    assert_eq!(s1["processes"]["peak"], 1.0, "{s1}");
    assert_eq!(s1["processes"]["mean"], 1.0, "{s1}");
    assert_eq!(s1["private_kib"]["peak"], 512.0, "{s1}");
    assert_eq!(s1["min_mem_available_kib"], 6_000_000);
    assert_eq!(s2["processes"]["peak"], 2.0, "{s2}");
    assert_eq!(s2["private_kib"]["peak"], 1024.0, "{s2}");
    let m2 = s2["processes"]["mean"].as_f64().unwrap();
    assert!(m2 > 1.0 && m2 <= 2.0, "{s2}");
    // The whole run's summary is not a stage's.
    assert_eq!(
        v["server_watch"]["hosts"][0]["summary"]["processes"]["peak"],
        2.0
    );

    // A second machine: a `redline watch` record named web2, started 1 s
    // into the run, merged into it.
    let w = redline_env(
        &[
            "watch",
            "fakesrv",
            "-d",
            "500ms",
            "--interval",
            "100ms",
            "-o",
            "json",
        ],
        &root,
    );
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    let mut doc: serde_json::Value = serde_json::from_slice(&w.stdout).unwrap();
    let run_ms = redline_stats::time::parse_rfc3339_ms(v["started_at"].as_str().unwrap()).unwrap();
    let web2_start = redline_stats::time::rfc3339(
        std::time::UNIX_EPOCH + Duration::from_millis(run_ms as u64 + 1000),
    );
    doc["hosts"][0]["host"] = "web2".into();
    doc["hosts"][0]["started_at"] = web2_start.into();
    let web2_samples = doc["hosts"][0]["samples"].as_array().unwrap().len() as u64;
    assert!(web2_samples >= 3, "{doc}");
    // The stale per-stage figures of the run are replaced, not kept.
    v["stages"][1]["server"][0]["summary"]["processes"]["peak"] = 99.0.into();
    let run_path = root.join("run.json");
    let web2_path = root.join("web2.json");
    std::fs::write(&run_path, serde_json::to_vec(&v).unwrap()).unwrap();
    std::fs::write(&web2_path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let merged = redline(&[
        "watch",
        "--merge",
        run_path.to_str().unwrap(),
        "--",
        web2_path.to_str().unwrap(),
    ]);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&merged.stdout).unwrap();
    assert_run_schema(&m);
    let ms = m["stages"].as_array().unwrap();
    for (st, orig) in ms.iter().zip(&stages) {
        assert_eq!(st["server"].as_array().unwrap().len(), 2, "{st}");
        // The local host's figures are unchanged (CPU means may differ in the
        // last bit: JSON floats are read back to the nearest, not always exact).
        let (a, b) = (&st["server"][0], &orig["server"][0]);
        assert_eq!(a["host"], b["host"]);
        assert_eq!(a["offset_s"], b["offset_s"]);
        for f in ["samples", "processes", "private_kib", "pss_kib", "rss_kib"] {
            assert_eq!(a["summary"][f], b["summary"][f], "{f}");
        }
        assert_eq!(st["server"][1]["host"], "web2");
        assert_eq!(st["server"][1]["offset_s"], 1.0);
    }
    // web2's 0.5 s of samples fall in run time 1-1.5 s: all in stage 1, none in 2.
    let w1 = &ms[0]["server"][1]["summary"];
    assert_eq!(w1["samples"], web2_samples, "{w1}");
    assert_eq!(w1["processes"]["peak"], 2.0, "{w1}");
    assert_eq!(ms[1]["server"][1]["summary"]["samples"], 0);
    let merged_path = root.join("merged.json");
    std::fs::write(&merged_path, &merged.stdout).unwrap();

    // HTML: one group of charts per host, titled with it, each with its table.
    let page = root.join("report.html");
    let rep = redline(&[
        "report",
        merged_path.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let groups: Vec<&str> = html
        .split("<section class=\"server-host\"")
        .skip(1)
        .collect();
    assert_eq!(groups.len(), 2, "one chart group per watched host");
    for (g, h) in groups.iter().zip([host.as_str(), "web2"]) {
        assert!(g.contains(&format!("<h3>Server: {h}</h3>")), "{h}");
        assert_eq!(g.matches("<svg class=\"chart\"").count(), 5, "{h}");
        assert!(g.contains(&format!(
            "<figcaption>Server processes over time — {h}</figcaption>"
        )));
        assert_eq!(
            g.matches("<table class=\"server-stages\"").count(),
            1,
            "{h}"
        );
    }
    assert!(groups[0].contains("<tr><td>stage 1 @1</td><td>0–2</td>"));
    assert!(groups[1].contains("its watch started 1 s after the run"));
    // 7 load charts, 2 against the stage level, 5 per host.
    let charts = html.matches("<svg class=\"chart\"").count();
    assert_eq!(charts, 7 + 2 + 10);
    if let Some((dom, _)) = chromium_dump(&page, &root, None) {
        assert!(
            dom.contains(&format!("data-charts=\"{charts}\"")),
            "{}",
            &dom[..dom.len().min(400)]
        );
        assert_eq!(dom.matches("class=\"server-host\"").count(), 2);
    }
    let _ = std::fs::remove_dir_all(&root);
}
