//! `--server-status` against the real servers, started by the tests on free
//! loopback ports with their own configs in temp dirs and watched by PID:
//! Apache mod_status (the seed experiment: prefork with MaxRequestWorkers 10,
//! a 0.2 s CGI, ramped 1 -> 40 connections: the diagnosis names the worker
//! pool and MaxRequestWorkers at 10), nginx stub_status, lighttpd mod_status,
//! and php-fpm's status page through nginx (FastCGI). A missing server skips
//! the test with a note, and fails it under CI=true.

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

/// A server started by a test: stopped by PID (SIGTERM, then SIGKILL after
/// 10 s) and its directory removed on drop.
struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Server {
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
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Spawns `cmd` in its own process group (a prefork parent signals its whole
/// group when it stops) and waits until `port` accepts (10 s at most).
fn spawn(mut cmd: Command, dir: PathBuf, port: u16) -> Result<Server, String> {
    let _ = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&dir)
        .status();
    let child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    let mut s = Server { child, dir, port };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(st)) = s.child.try_wait() {
            return Err(format!("exited at once ({st})"));
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err("did not listen within 10 s".into())
}

/// Apache prefork, MaxRequestWorkers 10, KeepAlive Off, mod_status at
/// /server-status and a CGI that sleeps 0.2 s at /cgi-bin/slow.cgi.
fn start_apache(keepalive: bool) -> Option<Server> {
    start_apache_with(keepalive, 10, "")
}

/// [`start_apache`] with `workers` as MaxRequestWorkers and `extra` lines at
/// the end of the config (later sections override); /cgi-bin/slow1.cgi
/// sleeps 1 s.
fn start_apache_with(keepalive: bool, workers: u32, extra: &str) -> Option<Server> {
    let m = Path::new("/usr/lib/apache2/modules");
    let present = Path::new("/usr/sbin/apache2").exists()
        && ["mod_mpm_prefork.so", "mod_status.so", "mod_cgi.so"]
            .iter()
            .all(|x| m.join(x).exists());
    if !require("apache2 with mod_status and mod_cgi", present) {
        return None;
    }
    let dir = tmpdir("status-apache");
    let port = free_port();
    std::fs::create_dir_all(dir.join("cgi")).unwrap();
    std::fs::write(
        dir.join("cgi/slow.cgi"),
        "#!/bin/sh\nsleep 0.2\nprintf 'Content-Type: text/plain\\r\\n\\r\\nok\\n'\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("cgi/slow1.cgi"),
        "#!/bin/sh\nsleep 1\nprintf 'Content-Type: text/plain\\r\\n\\r\\nok\\n'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    for f in ["slow.cgi", "slow1.cgi"] {
        std::fs::set_permissions(
            dir.join("cgi").join(f),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    let user = if is_root() {
        "User www-data\nGroup www-data\n"
    } else {
        ""
    };
    let (d, m) = (dir.display(), m.display());
    let ka = if keepalive {
        "KeepAlive On\nKeepAliveTimeout 15\nMaxKeepAliveRequests 0"
    } else {
        "KeepAlive Off"
    };
    let conf = format!(
        "ServerRoot {d}\nServerName 127.0.0.1\nListen 127.0.0.1:{port}\nPidFile {d}/apache2.pid\n\
         ErrorLog {d}/error.log\nDefaultRuntimeDir {d}\nMutex file:{d} default\n\
         LoadModule mpm_prefork_module {m}/mod_mpm_prefork.so\n\
         LoadModule authz_core_module {m}/mod_authz_core.so\n\
         LoadModule status_module {m}/mod_status.so\n\
         LoadModule alias_module {m}/mod_alias.so\nLoadModule cgi_module {m}/mod_cgi.so\n{user}\
         StartServers 2\nMinSpareServers 1\nMaxSpareServers 4\nMaxRequestWorkers {workers}\n{ka}\n\
         DocumentRoot {d}\n<Location /server-status>\n  SetHandler server-status\n</Location>\n\
         ScriptAlias /cgi-bin/ {d}/cgi/\n<Directory {d}>\n  Require all granted\n</Directory>\n{extra}\n"
    );
    std::fs::write(dir.join("apache2.conf"), conf).unwrap();
    let mut cmd = Command::new("/usr/sbin/apache2");
    cmd.args(["-D", "FOREGROUND", "-f"])
        .arg(dir.join("apache2.conf"))
        .env("APACHE_RUN_DIR", &dir)
        .env("APACHE_LOCK_DIR", &dir)
        .env("APACHE_LOG_DIR", &dir);
    match spawn(cmd, dir, port) {
        Ok(s) => Some(s),
        Err(e) => {
            require(&format!("a runnable apache2 ({e})"), false);
            None
        }
    }
}

/// nginx, one worker, stub_status at /nginx_status; `extra` goes in the server block.
fn start_nginx(worker_connections: u32, extra: &str) -> Option<Server> {
    if !require("nginx", Path::new("/usr/sbin/nginx").exists()) {
        return None;
    }
    let dir = tmpdir("status-nginx");
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::fs::write(dir.join("index.html"), "hello\n").unwrap();
    let port = free_port();
    let d = dir.display();
    let conf = format!(
        "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections {worker_connections}; }}\n\
         http {{\n access_log off;\n client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n\
         server {{ listen 127.0.0.1:{port}; root {d};\n location = /nginx_status {{ stub_status; }}\n{extra}\n }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let mut cmd = Command::new("/usr/sbin/nginx");
    cmd.arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .args(["-g", "daemon off;"]);
    match spawn(cmd, dir, port) {
        Ok(s) => Some(s),
        Err(e) => {
            require(&format!("a runnable nginx ({e})"), false);
            None
        }
    }
}

fn run_json(args: &[&str], limit: Duration) -> serde_json::Value {
    let (out, _) = redline_with_limit(args, limit);
    assert!(
        out.status.success(),
        "redline {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_run_schema(&v);
    v
}

fn samples(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["server_status"]["samples"].as_array().expect("samples")
}

fn max_of(v: &serde_json::Value, field: &str) -> u64 {
    samples(v)
        .iter()
        .filter_map(|s| s[field].as_u64())
        .max()
        .unwrap_or(0)
}

/// The seed experiment: the diagnosis names the worker pool and
/// MaxRequestWorkers at ~10, from mod_status read during the ramp.
#[test]
fn apache_worker_pool_exhausted_at_max_request_workers() {
    let Some(ap) = start_apache(false) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/cgi-bin/slow.cgi", ap.port);
    let status = format!("http://127.0.0.1:{}/server-status?auto", ap.port);
    let v = run_json(
        &[
            "run",
            &url,
            "--stages",
            "2s:1,2s:5,2s:10,2s:15,2s:20,2s:30,2s:40",
            "--step",
            "-t",
            "1",
            "--server-status",
            &status,
            "--watch-interval",
            "250ms",
            "-o",
            "json",
        ],
        Duration::from_secs(90),
    );
    let st = &v["server_status"];
    assert_eq!(st["server"], "apache");
    assert_eq!(st["slots"], 10, "prefork's scoreboard: MaxRequestWorkers");
    assert!(samples(&v).len() >= 20, "{}", samples(&v).len());
    assert_eq!(max_of(&v, "busy"), 10);
    // Every stage has its status summary; the last ones are full.
    let stages = v["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 7);
    for s in stages {
        assert!(s["status"]["samples"].as_u64().unwrap() >= 1, "{s}");
    }
    assert_eq!(stages[6]["status"]["busy"]["peak"], 10.0);
    assert_eq!(stages[6]["status"]["min_idle"], 0);
    let d = &v["diagnosis"];
    assert_eq!(d["resource"], "worker_pool", "{d}");
    assert!(
        d["directive"]
            .as_str()
            .unwrap()
            .contains("MaxRequestWorkers"),
        "{d}"
    );
    let limit = d["limit"].as_u64().unwrap();
    assert!((9..=11).contains(&limit), "{d}");
    let at = d["at_level"].as_f64().unwrap();
    assert!((5.0..=15.0).contains(&at), "{d}");
}

/// The same server on a linear ramp 0 -> 40 connections (where the knee
/// from throughput alone lands far below 10): the status reads, placed on
/// the ramp, put the limit at 10 reached at about 10 connections.
#[test]
fn apache_worker_pool_on_a_linear_ramp() {
    let Some(ap) = start_apache(false) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/cgi-bin/slow.cgi", ap.port);
    let status = format!("http://127.0.0.1:{}/server-status?auto", ap.port);
    let v = run_json(
        &[
            "run",
            &url,
            "--stages",
            "16s:40",
            "-t",
            "1",
            "--server-status",
            &status,
            "--watch-interval",
            "250ms",
            "-o",
            "json",
        ],
        Duration::from_secs(90),
    );
    let d = &v["diagnosis"];
    assert_eq!(d["resource"], "worker_pool", "{d}");
    assert_eq!(d["limit"], 10, "{d}");
    let at = d["at_level"].as_f64().unwrap();
    assert!((7.0..=13.0).contains(&at), "{d}");
}

/// Without status or watch, a staged run that stopped scaling (the slow CGI
/// behind 10 workers, stepped 2 -> 20 connections) gets a diagnosis that says
/// what to add to know why.
#[test]
fn staged_run_without_evidence_says_what_to_add() {
    let Some(ap) = start_apache(false) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/cgi-bin/slow.cgi", ap.port);
    let v = run_json(
        &[
            "run",
            &url,
            "--stages",
            "2s:2,2s:20",
            "--step",
            "-t",
            "1",
            "-o",
            "json",
        ],
        Duration::from_secs(30),
    );
    assert!(
        v["knee"].is_object(),
        "throughput flattened at 10: {}",
        v["knee"]
    );
    let d = &v["diagnosis"];
    assert_eq!(d["resource"], "unknown", "{d}");
    let advice = d["advice"].as_str().unwrap();
    assert!(
        advice.contains("--server-status") && advice.contains("--watch"),
        "{advice}"
    );
}

/// nginx stub_status: its request counter follows the load, accepts ==
/// handled, and the text report has the status block.
#[test]
fn nginx_stub_status_during_a_run() {
    let Some(ng) = start_nginx(64, "") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", ng.port);
    let status = format!("http://127.0.0.1:{}/nginx_status", ng.port);
    let v = run_json(
        &[
            "run",
            &url,
            "-d",
            "2s",
            "-c",
            "4",
            "-t",
            "1",
            "--server-status",
            &status,
            "--watch-interval",
            "200ms",
            "-o",
            "json",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(v["server_status"]["server"], "nginx");
    let s = samples(&v);
    assert!(s.len() >= 5, "{}", s.len());
    let first = s.first().unwrap()["requests"].as_u64().unwrap();
    let last = s.last().unwrap()["requests"].as_u64().unwrap();
    let completed = v["counters"]["completed"]
        .as_u64()
        .or_else(|| v["completed"].as_u64())
        .unwrap_or(0);
    // The server counted at least the responses redline completed (and its own status reads).
    assert!(
        last - first + 5 >= completed,
        "{first}..{last} vs {completed}"
    );
    assert!(completed > 0);
    for x in s {
        assert_eq!(x["accepts"], x["handled"], "{x}");
    }
    assert!(max_of(&v, "active") >= 4, "4 connections were open");
    // The text report.
    let out = redline(&[
        "run",
        &url,
        "-d",
        "1s",
        "-c",
        "2",
        "-t",
        "1",
        "--server-status",
        &status,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Server status (nginx, "), "{text}");
}

/// lighttpd mod_status `?auto`: busy/idle and its connection slots.
#[test]
fn lighttpd_mod_status_during_a_run() {
    if !require("lighttpd", Path::new("/usr/sbin/lighttpd").exists()) {
        return;
    }
    let dir = tmpdir("status-lighttpd");
    std::fs::write(dir.join("index.html"), "hello\n").unwrap();
    let port = free_port();
    let conf = format!(
        "server.document-root = \"{}\"\nserver.bind = \"127.0.0.1\"\nserver.port = {port}\n\
         server.max-connections = 64\nserver.modules = (\"mod_status\")\nstatus.status-url = \"/server-status\"\n",
        dir.display()
    );
    std::fs::write(dir.join("lighttpd.conf"), conf).unwrap();
    let mut cmd = Command::new("/usr/sbin/lighttpd");
    cmd.arg("-D").arg("-f").arg(dir.join("lighttpd.conf"));
    let lt = match spawn(cmd, dir, port) {
        Ok(s) => s,
        Err(e) => {
            require(&format!("a runnable lighttpd ({e})"), false);
            return;
        }
    };
    let url = format!("http://127.0.0.1:{}/index.html", lt.port);
    let status = format!("http://127.0.0.1:{}/server-status?auto", lt.port);
    let v = run_json(
        &[
            "run",
            &url,
            "-d",
            "1s",
            "-c",
            "3",
            "-t",
            "1",
            "--server-status",
            &status,
            "--watch-interval",
            "200ms",
            "-o",
            "json",
        ],
        Duration::from_secs(30),
    );
    let st = &v["server_status"];
    assert_eq!(st["server"], "lighttpd");
    assert!(st["slots"].as_u64().unwrap() > 0, "{st}");
    let s = samples(&v);
    assert!(s.len() >= 3);
    assert!(max_of(&v, "busy") >= 1, "its status request is one");
    assert!(s.iter().all(|x| x["idle"].as_u64().is_some()));
    let last = s.last().unwrap()["requests"].as_u64().unwrap();
    assert!(last > 10, "the server counted the load: {last}");
}

/// php-fpm (pm static, 2 children) behind nginx: 6 clients of a 0.2 s
/// script fill the pool and queue in its listen queue; the diagnosis names
/// pm.max_children at 2.
#[test]
fn php_fpm_status_through_nginx() {
    let fpm_bin = ["/usr/sbin/php-fpm8.2", "/usr/sbin/php-fpm"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if !require("php-fpm", fpm_bin.is_some()) {
        return;
    }
    let dir = tmpdir("status-fpm");
    std::fs::write(dir.join("slow.php"), "<?php usleep(200000); echo \"ok\";\n").unwrap();
    let (app, stat) = (free_port(), free_port());
    let user = if is_root() {
        "user = www-data\ngroup = www-data\n"
    } else {
        ""
    };
    let d = dir.display();
    std::fs::write(
        dir.join("fpm.conf"),
        format!(
            "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\ndaemonize = no\n[www]\n{user}\
             listen = 127.0.0.1:{app}\npm = static\npm.max_children = 2\n\
             pm.status_path = /status\npm.status_listen = 127.0.0.1:{stat}\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new(fpm_bin.unwrap());
    cmd.arg("-y").arg(dir.join("fpm.conf")).arg("-F");
    let _fpm = match spawn(cmd, dir.clone(), app) {
        Ok(s) => s,
        Err(e) => {
            require(&format!("a runnable php-fpm ({e})"), false);
            return;
        }
    };
    let extra = format!(
        " location = /status {{ fastcgi_pass 127.0.0.1:{stat}; fastcgi_param SCRIPT_NAME /status; fastcgi_param SCRIPT_FILENAME /status; fastcgi_param REQUEST_METHOD GET; fastcgi_param QUERY_STRING $query_string; }}\n\
          location ~ \\.php$ {{ fastcgi_pass 127.0.0.1:{app}; fastcgi_param SCRIPT_FILENAME {d}$fastcgi_script_name; fastcgi_param REQUEST_METHOD GET; fastcgi_param SCRIPT_NAME $fastcgi_script_name; }}"
    );
    let Some(ng) = start_nginx(64, &extra) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/slow.php", ng.port);
    let status = format!("http://127.0.0.1:{}/status", ng.port);
    let v = run_json(
        &[
            "run",
            &url,
            "--stages",
            "2s:1,2s:6",
            "--step",
            "-t",
            "1",
            "--server-status",
            &status,
            "--watch-interval",
            "200ms",
            "-o",
            "json",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(v["server_status"]["server"], "php-fpm");
    assert_eq!(max_of(&v, "processes"), 2);
    assert_eq!(max_of(&v, "busy"), 2);
    assert!(
        max_of(&v, "listen_queue") >= 1,
        "requests waited for a child"
    );
    let d = &v["diagnosis"];
    assert_eq!(d["resource"], "worker_pool", "{d}");
    assert_eq!(d["directive"], "pm.max_children", "{d}");
    assert_eq!(d["limit"], 2, "{d}");
}

/// Bad `--server-status` values: one line on stderr, exit 2, no secret
/// echoed. (A well-formed URL nothing answers is not bad input: see
/// [`status_page_unreadable_at_the_start_is_a_warning`].)
#[test]
fn bad_server_status_is_one_line_and_exit_2() {
    let port = free_port();
    for bad in [
        "https://127.0.0.1/server-status".to_string(),
        "http://user:s3cret@127.0.0.1/server-status".to_string(),
        "nonsense".to_string(),
    ] {
        let out = redline(&[
            "run",
            &format!("http://127.0.0.1:{port}/"),
            "-d",
            "1s",
            "--server-status",
            &bad,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{bad}: {err}");
        assert!(err.contains("--server-status"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
    }
}

/// `n` keep-alive clients of `ap`, each after one answered GET of a small
/// file, kept open and idle (each holds a prefork worker in `K`).
fn hold_idle(ap: &Server, n: usize) -> Vec<std::net::TcpStream> {
    use std::io::{Read, Write};
    std::fs::write(ap.dir.join("idx.html"), "hi\n").unwrap();
    let _ = Command::new("chmod")
        .args(["a+r"])
        .arg(ap.dir.join("idx.html"))
        .status();
    (0..n)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", ap.port)).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c.write_all(b"GET /idx.html HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .unwrap();
            let mut buf = [0u8; 4096];
            let got = c.read(&mut buf).unwrap();
            assert!(String::from_utf8_lossy(&buf[..got]).starts_with("HTTP/1.1 200"));
            c
        })
        .collect()
}

/// Clients that idle between requests hold Apache's workers in keep-alive
/// (`KeepAlive On`, `KeepAliveTimeout 15`): six connections that each sent
/// one request and wait, then a ramp to 20 connections on the slow CGI. The
/// pool of 10 fills with 6 idle K slots: the diagnosis names keep-alive.
#[test]
fn apache_workers_held_by_keepalive() {
    let Some(ap) = start_apache(true) else {
        return;
    };
    // Kept open, idle: each holds a worker in K for 15 s.
    let idle = hold_idle(&ap, 6);
    let url = format!("http://127.0.0.1:{}/cgi-bin/slow.cgi", ap.port);
    let status = format!("http://127.0.0.1:{}/server-status?auto", ap.port);
    let v = run_json(
        &[
            "run",
            &url,
            "--stages",
            "2s:1,2s:4,2s:10,2s:20",
            "--step",
            "-t",
            "1",
            "--no-keepalive",
            "--server-status",
            &status,
            "--watch-interval",
            "250ms",
            "-o",
            "json",
        ],
        Duration::from_secs(60),
    );
    drop(idle);
    assert!(
        max_of(&v, "keepalive") >= 6,
        "the idle clients' workers in K"
    );
    let d = &v["diagnosis"];
    assert_eq!(d["resource"], "keepalive", "{d}");
    assert!(
        d["directive"]
            .as_str()
            .unwrap()
            .contains("KeepAliveTimeout"),
        "{d}"
    );
    assert_eq!(d["limit"], 10, "{d}");
}

/// nginx with `worker_connections 64` (one worker) ramped past it: the open
/// connections plateau under 64 and the diagnosis names worker_connections.
#[test]
fn nginx_worker_connections_exhausted() {
    let Some(ng) = start_nginx(64, "") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/index.html", ng.port);
    let status = format!("http://127.0.0.1:{}/nginx_status", ng.port);
    let v = run_json(
        &[
            "run",
            &url,
            "--stages",
            "2s:10,2s:30,2s:100,2s:100",
            "--step",
            "-t",
            "1",
            "--server-status",
            &status,
            "--watch-interval",
            "250ms",
            "-o",
            "json",
        ],
        Duration::from_secs(60),
    );
    let most = max_of(&v, "active");
    assert!(
        (40..=64).contains(&most),
        "open connections peaked at {most}"
    );
    let d = &v["diagnosis"];
    assert_eq!(d["resource"], "worker_pool", "{d}");
    assert!(
        d["directive"]
            .as_str()
            .unwrap()
            .contains("worker_connections"),
        "{d}"
    );
}

/// Without --server-status, `--watch PID` of a server listening on loopback
/// finds its status page at the usual path and reads it.
#[test]
fn watch_finds_the_status_page_by_itself() {
    let Some(ap) = start_apache(false) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/cgi-bin/slow.cgi", ap.port);
    let pid = ap.child.id().to_string();
    let v = run_json(
        &[
            "run",
            &url,
            "-d",
            "1s",
            "-c",
            "2",
            "-t",
            "1",
            "--watch",
            &pid,
            "--watch-interval",
            "250ms",
            "-o",
            "json",
        ],
        Duration::from_secs(30),
    );
    let st = &v["server_status"];
    assert_eq!(st["server"], "apache", "{st}");
    assert_eq!(
        st["url"],
        format!("http://127.0.0.1:{}/server-status?auto", ap.port)
    );
    assert!(samples(&v).len() >= 3);
    assert!(max_of(&v, "busy") >= 2, "two clients and the read itself");
}

/// Runs the built binary with `args`; its output, within `limit`.
fn redline_out(args: &[&str], limit: Duration) -> (i32, String, String) {
    let (out, _) = redline_with_limit(args, limit);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Apache prefork with 4 workers behind a 1 s CGI answers 4 req/s at most.
/// Asked for 8 req/s in open loop on 6 connections, its workers hold
/// every connection and requests wait for one: `find` calls the step the
/// server's limit (FAIL, server concurrency), not CLIENT-LIMITED, and its
/// diagnosis (from mod_status read during the step) names the worker pool
/// at MaxRequestWorkers 4. A plain `run` of the same load gets the same
/// diagnosis in its text, JSON and HTML report. (A low rate: the send
/// interval, 125 ms, is far above any stall of a shared test machine, so
/// the client's scheduler never lags behind it.)
#[test]
fn find_and_run_blame_the_servers_worker_pool_not_the_client() {
    let Some(srv) = start_apache_with(false, 4, "") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/cgi-bin/slow1.cgi", srv.port);
    let status = format!("http://127.0.0.1:{}/server-status?auto", srv.port);
    let find = [
        "find",
        &url,
        "--slo",
        "p99<30s",
        "--start-rate",
        "8",
        "-c",
        "6",
        "-t",
        "1",
        "--warmup",
        "1s",
        "--step-duration",
        "4s",
        "--max-steps",
        "1",
        "--server-status",
        &status,
        "--no-save",
    ];
    let (code, t, err) = redline_out(&find, Duration::from_secs(60));
    assert_eq!(code, 4, "no step passed: {t}{err}");
    let step = t
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap_or_else(|| panic!("no step line: {t}"));
    assert!(step.contains("FAIL (server concurrency"), "{step}");
    assert!(
        !t.contains("CLIENT-LIMITED") && !t.contains("the client was the limit"),
        "{t}"
    );
    assert!(t.contains("the server held all 6 connections"), "{t}");
    assert!(
        t.contains("Diagnosis (step 1, 8.0 req/s): the worker pool ran out at 4"),
        "{t}"
    );
    assert!(t.contains("MaxRequestWorkers"), "{t}");
    // JSON: the verdict, the flag and the diagnosis of step 1.
    let mut json = find.to_vec();
    json.extend(["-o", "json", "-q"]);
    let (code, out, err) = redline_out(&json, Duration::from_secs(60));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(code, 4, "{} {err}", v["steps"]);
    let s0 = &v["steps"][0];
    assert_eq!(s0["verdict"], "fail", "{v}");
    assert_eq!(s0["server_held"], true, "{v}");
    assert!(s0["note"].is_null(), "{v}");
    assert!(s0["sent_per_sec"].as_f64().unwrap() < 7.5, "{v}");
    let d = &v["diagnosis"];
    assert_eq!(d["step"], 1, "{v}");
    assert_eq!(d["resource"], "worker_pool", "{v}");
    assert_eq!(d["limit"], 4, "{v}");
    assert!(d["directive"]
        .as_str()
        .unwrap()
        .contains("MaxRequestWorkers"));
    assert_eq!(v["stopped"], "max_steps");

    // A plain run of the same load: text, JSON and HTML.
    let dir = tmpdir("diag-run");
    let html = dir.join("run.html");
    let run = [
        "run",
        "-r",
        "8",
        "-c",
        "6",
        "-t",
        "1",
        "-d",
        "4s",
        "--server-status",
        &status,
        "--no-save",
        "--html",
        html.to_str().unwrap(),
    ];
    let mut text = run.to_vec();
    text.push(&url);
    let (code, t, err) = redline_out(&text, Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    assert!(
        t.contains("\nDiagnosis: the worker pool ran out at 4 (reached "),
        "{t}"
    );
    let page = std::fs::read_to_string(&html).unwrap_or_default();
    assert!(
        page.contains("<div class=\"diagnosis\" data-resource=\"worker_pool\">"),
        "no diagnosis in the HTML"
    );
    let mut json = run.to_vec();
    json.extend(["-o", "json", "-q", &url]);
    let (code, out, err) = redline_out(&json, Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_run_schema(&v);
    assert_eq!(
        v["diagnosis"]["resource"], "worker_pool",
        "{}",
        v["diagnosis"]
    );
    assert!(v["diagnosis"]["at_s"].as_f64().unwrap() < 4.5);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Apache with one worker behind a 1 s CGI and `ListenBacklog 1`, 20
/// connections in closed loop: the accept queue holds two, the kernel drops
/// the other SYNs and the clients send them again after 1 s. Without a
/// status page (switched off here, so `--watch` finds none), the diagnosis
/// names the listen backlog and its directives, with the watched machine's
/// ListenOverflows and the `ListenBacklog 1` read from the watched server's
/// config. (With the status page, the one busy worker is named instead: the
/// pool is the cause, the backlog the symptom.)
#[test]
fn a_full_listen_backlog_is_diagnosed() {
    let Some(srv) = start_apache_with(
        false,
        1,
        "ListenBacklog 1\n<Location /server-status>\n  SetHandler none\n</Location>",
    ) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/cgi-bin/slow1.cgi", srv.port);
    let pid = srv.child.id().to_string();
    let (code, out, err) = redline_out(
        &[
            "run",
            "-c",
            "20",
            "-t",
            "1",
            "-d",
            "4s",
            "--no-save",
            "--watch",
            &pid,
            "-o",
            "json",
            "-q",
            &url,
        ],
        Duration::from_secs(90),
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_run_schema(&v);
    let d = &v["diagnosis"];
    assert_eq!(d["resource"], "listen_backlog", "{d} {}", v["warnings"]);
    assert!(d["directive"].as_str().unwrap().contains("ListenBacklog"));
    assert!(d["advice"].as_str().unwrap().contains("somaxconn"), "{d}");
    let evidence: Vec<&str> = d["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    assert!(
        evidence[0].contains("its listening sockets dropped")
            && evidence[0].contains("TcpExt ListenOverflows"),
        "{d}"
    );
    assert!(
        evidence.contains(&"the server's config: ListenBacklog 1"),
        "{d}"
    );
    drop(srv);
}

/// nginx stopped (SIGTERM by PID) 1.5 s into a 4 s run: the diagnosis says
/// the server went away and names the instant, in text and JSON.
#[test]
fn a_server_that_goes_away_is_diagnosed_with_the_instant() {
    for json in [false, true] {
        let Some(srv) = start_nginx(64, "") else {
            return;
        };
        let url = format!("http://127.0.0.1:{}/index.html", srv.port);
        let mut args = vec!["run", "-c", "4", "-t", "1", "-d", "4s", "--no-save"];
        if json {
            args.extend(["-o", "json", "-q"]);
        }
        args.push(&url);
        let child = Command::new(env!("CARGO_BIN_EXE_redline"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start redline");
        std::thread::sleep(Duration::from_millis(1500));
        drop(srv); // SIGTERM, waited for by PID
        let out = common::wait_limit(child, Duration::from_secs(60));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.code().is_some(), "{text}");
        if json {
            let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
            assert_run_schema(&v);
            let d = &v["diagnosis"];
            assert_eq!(d["resource"], "server_gone", "{d}");
            let at = d["at_s"].as_f64().expect("at_s");
            assert!((1.0..=3.0).contains(&at), "{d}");
            assert!(
                d["advice"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("stopped answering at {at:.1} s")),
                "{d}"
            );
        } else {
            assert!(
                text.contains("\nDiagnosis: the server went away at "),
                "{text}"
            );
        }
    }
}

/// The issue's case: every Apache worker is held by an idle keep-alive
/// client (prefork, MaxRequestWorkers 2, KeepAlive On, two clients that
/// sent one request each and wait), so the status page cannot answer. The
/// run goes on with a `status_unreadable` warning, and the reads that timed
/// out during the run are kept with their times as evidence.
#[test]
fn status_page_unreadable_at_the_start_is_a_warning() {
    let Some(ap) = start_apache_with(
        true,
        2,
        "MinSpareServers 1\nMaxSpareServers 2\nStartServers 2",
    ) else {
        return;
    };
    let idle = hold_idle(&ap, 2);
    let url = format!("http://127.0.0.1:{}/idx.html", ap.port);
    let status = format!("http://127.0.0.1:{}/server-status?auto", ap.port);
    let (out, _) = redline_with_limit(
        &[
            "run",
            &url,
            "-d",
            "2s",
            "-c",
            "1",
            "-t",
            "1",
            "--server-status",
            &status,
            "--watch-interval",
            "250ms",
            "-o",
            "json",
        ],
        Duration::from_secs(60),
    );
    drop(idle);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(2), "not a usage error: {err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON record");
    assert_run_schema(&v);
    let w = v["warnings"].as_array().unwrap();
    let warn = w
        .iter()
        .find(|x| x["code"] == "status_unreadable")
        .unwrap_or_else(|| panic!("no status_unreadable warning: {w:?}"));
    let msg = warn["message"].as_str().unwrap();
    assert!(
        msg.contains("went on") && msg.contains("server-status"),
        "{msg}"
    );
    let st = &v["server_status"];
    let failures = st["failures"].as_array().expect("failed reads kept");
    assert!(!failures.is_empty(), "{st}");
    assert_eq!(st["failed"].as_u64().unwrap() as usize, failures.len());
    assert!(
        failures.iter().any(|f| f["kind"] == "timeout"),
        "reads that found no free worker time out: {st}"
    );
    let mut last = -1.0;
    for f in failures {
        let t = f["t"].as_f64().unwrap();
        assert!(t >= last, "oldest first: {st}");
        last = t;
    }
}

/// Apache event (ServerLimit 1, ThreadsPerChild 4, MaxRequestWorkers 4,
/// KeepAlive On, KeepAliveTimeout 30) with three idle keep-alive clients:
/// on event they hold no worker (no `K` in the scoreboard), only its
/// connection states tell. Apache refreshes those numbers when its listener
/// handles a timeout, so a helper keeps one going: a virtual host with
/// KeepAliveTimeout 1 asked every 300 ms.
#[test]
fn apache_event_async_keepalive_during_a_run() {
    use std::io::{Read, Write};
    let m = Path::new("/usr/lib/apache2/modules");
    let present = Path::new("/usr/sbin/apache2").exists()
        && ["mod_mpm_event.so", "mod_status.so", "mod_authz_core.so"]
            .iter()
            .all(|x| m.join(x).exists());
    if !require("apache2 with mod_mpm_event and mod_status", present) {
        return;
    }
    let dir = tmpdir("status-apache-event");
    let port = free_port();
    std::fs::write(dir.join("idx.html"), "hi\n").unwrap();
    let user = if is_root() {
        "User www-data\nGroup www-data\n"
    } else {
        ""
    };
    let (d, m) = (dir.display(), m.display());
    let conf = format!(
        "ServerRoot {d}\nServerName 127.0.0.1\nListen 127.0.0.1:{port}\nPidFile {d}/apache2.pid\n\
         ErrorLog {d}/error.log\nDefaultRuntimeDir {d}\nMutex file:{d} default\n\
         LoadModule mpm_event_module {m}/mod_mpm_event.so\n\
         LoadModule authz_core_module {m}/mod_authz_core.so\n\
         LoadModule status_module {m}/mod_status.so\n{user}\
         ServerLimit 1\nStartServers 1\nThreadsPerChild 4\nMaxRequestWorkers 4\n\
         MinSpareThreads 1\nMaxSpareThreads 4\nKeepAlive On\nKeepAliveTimeout 30\n\
         DocumentRoot {d}\n<Location /server-status>\n  SetHandler server-status\n</Location>\n\
         <Directory {d}>\n  Require all granted\n</Directory>\n\
         <VirtualHost 127.0.0.1:{port}>\n  ServerName 127.0.0.1\n</VirtualHost>\n\
         <VirtualHost 127.0.0.1:{port}>\n  ServerName tick.invalid\n  KeepAliveTimeout 1\n</VirtualHost>\n"
    );
    std::fs::write(dir.join("apache2.conf"), conf).unwrap();
    let mut cmd = Command::new("/usr/sbin/apache2");
    cmd.args(["-D", "FOREGROUND", "-f"])
        .arg(dir.join("apache2.conf"));
    let ap = match spawn(cmd, dir, port) {
        Ok(s) => s,
        Err(e) => {
            require(&format!("a runnable apache2 event ({e})"), false);
            return;
        }
    };
    let get = |host: &str| -> std::net::TcpStream {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", ap.port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(format!("GET /idx.html HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = c.read(&mut buf).unwrap_or(0);
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        c
    };
    let idle: Vec<_> = (0..3).map(|_| get("127.0.0.1")).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticker = {
        let stop = stop.clone();
        let port = ap.port;
        std::thread::spawn(move || {
            for _ in 0..200 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                    let _ = c.write_all(b"GET /idx.html HTTP/1.1\r\nHost: tick.invalid\r\n\r\n");
                    let mut buf = [0u8; 1024];
                    let _ = c.read(&mut buf);
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
        })
    };
    let url = format!("http://127.0.0.1:{}/idx.html", ap.port);
    let status = format!("http://127.0.0.1:{}/server-status?auto", ap.port);
    let v = run_json(
        &[
            "run",
            &url,
            "-d",
            "3s",
            "-c",
            "2",
            "-t",
            "1",
            "--server-status",
            &status,
            "--watch-interval",
            "250ms",
            "-o",
            "json",
        ],
        Duration::from_secs(60),
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = ticker.join();
    drop(idle);
    let st = &v["server_status"];
    assert_eq!(st["server"], "apache", "{st}");
    assert_eq!(st["mpm"], "event", "{st}");
    assert_eq!(st["slots"], 4, "{st}");
    let ka = max_of(&v, "async_keepalive");
    assert!(
        ka >= 3,
        "the three idle clients held without a worker: {ka}; {st}"
    );
    assert!(max_of(&v, "conns_total") >= 3, "{st}");
    // Event holds them without a worker: not as K slots (a worker thread
    // may pass through K for a moment while it hands a connection back).
    assert!(
        max_of(&v, "keepalive") < 3,
        "event shows no K slot per idle client: {st}"
    );
}

/// Each real server's error log during a run: what the record's
/// `server_log` holds, checked against the log file itself.
/// A 3 s closed-loop run of `conns` connections on `url` with `--watch PID`
/// (the server's error log is found from it): the run record.
fn run_watched(url: &str, conns: u32, pid: &str) -> serde_json::Value {
    let c = conns.to_string();
    run_json(
        &[
            "run", url, "-d", "3s", "-c", &c, "-t", "1", "--watch", pid, "-o", "json",
        ],
        Duration::from_secs(60),
    )
}

fn finding<'a>(v: &'a serde_json::Value, message: &str) -> &'a serde_json::Value {
    let log = &v["server_log"];
    log["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no server_log: {log}"))
        .iter()
        .find(|f| f["message"] == message)
        .unwrap_or_else(|| panic!("no {message:?} finding: {log}"))
}

/// The finding agrees with the log file: its path is read, the file has as
/// many such lines (or more, written after the run), and the example is one.
fn check_against_file(v: &serde_json::Value, f: &serde_json::Value, file: &Path, needle: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(needle)).collect();
    assert!(
        !lines.is_empty(),
        "{} has no {needle:?}:\n{text}",
        file.display()
    );
    let canon = std::fs::canonicalize(file).unwrap().display().to_string();
    let paths = v["server_log"]["paths"].as_array().unwrap();
    assert!(paths.iter().any(|p| p == canon.as_str()), "{paths:?}");
    assert_eq!(f["path"], canon.as_str());
    let count = f["count"].as_u64().unwrap();
    assert!(
        count >= 1 && count as usize <= lines.len(),
        "{count} vs {lines:?}"
    );
    let ex = f["example"].as_str().unwrap();
    assert!(ex.chars().count() <= 240);
    let prefix: String = ex.chars().take(60).collect();
    assert!(
        lines.iter().any(|l| l.starts_with(&prefix)),
        "{ex:?} not in {lines:?}"
    );
    assert!(v["server_log"]["bytes_read"].as_u64().unwrap() > 0);
}

/// Apache prefork, MaxRequestWorkers 2, a 0.5 s CGI under 10 connections:
/// Apache logs "server reached MaxRequestWorkers setting" and the record
/// says so (worker_pool, MaxRequestWorkers), the log found from the
/// process --watch names.
#[test]
fn apache_error_log_names_max_request_workers() {
    let Some(ap) = start_apache_with(
        false,
        2,
        "MinSpareServers 1\nMaxSpareServers 2\nStartServers 1",
    ) else {
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    let cgi = ap.dir.join("cgi/half.cgi");
    std::fs::write(
        &cgi,
        "#!/bin/sh\nsleep 0.5\nprintf 'Content-Type: text/plain\\r\\n\\r\\nok\\n'\n",
    )
    .unwrap();
    std::fs::set_permissions(&cgi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let url = format!("http://127.0.0.1:{}/cgi-bin/half.cgi", ap.port);
    let pid = ap.child.id().to_string();
    let v = run_watched(&url, 10, &pid);
    let f = finding(&v, "server reached MaxRequestWorkers setting");
    assert_eq!(f["resource"], "worker_pool", "{f}");
    assert_eq!(f["directive"], "MaxRequestWorkers", "{f}");
    let t = f["first_t"]
        .as_f64()
        .expect("Apache's time stamp is placed");
    assert!((-2.0..10.0).contains(&t), "{t}");
    check_against_file(
        &v,
        f,
        &ap.dir.join("error.log"),
        "server reached MaxRequestWorkers setting",
    );
}

/// nginx with worker_connections 16 under 40 connections, each held busy by
/// a slow download (limit_rate: a busy connection cannot be reused, so
/// nginx refuses the next one): "16 worker_connections are not enough",
/// read from the log its -c config names.
#[test]
fn nginx_error_log_names_worker_connections() {
    let Some(ng) = start_nginx(16, " location = /big.bin { limit_rate 20k; }") else {
        return;
    };
    std::fs::write(ng.dir.join("big.bin"), vec![b'x'; 200_000]).unwrap();
    let _ = Command::new("chmod")
        .args(["a+r"])
        .arg(ng.dir.join("big.bin"))
        .status();
    let url = format!("http://127.0.0.1:{}/big.bin", ng.port);
    let pid = ng.child.id().to_string();
    let (out, _) = redline_with_limit(
        &[
            "run", &url, "-d", "2s", "-c", "40", "-t", "1", "--watch", &pid, "-o", "json",
        ],
        Duration::from_secs(60),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("JSON: {}", String::from_utf8_lossy(&out.stderr)));
    assert_run_schema(&v);
    let f = finding(&v, "worker_connections are not enough");
    assert_eq!(f["resource"], "worker_pool", "{f}");
    assert_eq!(f["directive"], "worker_connections", "{f}");
    check_against_file(
        &v,
        f,
        &ng.dir.join("error.log"),
        "worker_connections are not enough",
    );
}

/// php-fpm (pm dynamic, pm.max_children 1) behind nginx, 4 clients of a
/// 0.3 s script: "server reached pm.max_children setting", from the log the
/// php-fpm master holds open (and its -y config names).
#[test]
fn php_fpm_error_log_names_max_children() {
    let fpm_bin = ["/usr/sbin/php-fpm8.2", "/usr/sbin/php-fpm"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if !require("php-fpm", fpm_bin.is_some()) {
        return;
    }
    let dir = tmpdir("errlog-fpm");
    std::fs::write(dir.join("slow.php"), "<?php usleep(300000); echo \"ok\";\n").unwrap();
    let app = free_port();
    let user = if is_root() {
        "user = www-data\ngroup = www-data\n"
    } else {
        ""
    };
    let d = dir.display();
    std::fs::write(
        dir.join("fpm.conf"),
        format!(
            "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\ndaemonize = no\n[www]\n{user}\
             listen = 127.0.0.1:{app}\npm = dynamic\npm.max_children = 1\npm.start_servers = 1\n\
             pm.min_spare_servers = 1\npm.max_spare_servers = 1\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new(fpm_bin.unwrap());
    cmd.arg("-y").arg(dir.join("fpm.conf")).arg("-F");
    let fpm = match spawn(cmd, dir.clone(), app) {
        Ok(s) => s,
        Err(e) => {
            require(&format!("a runnable php-fpm ({e})"), false);
            return;
        }
    };
    let extra = format!(
        " location ~ \\.php$ {{ fastcgi_pass 127.0.0.1:{app}; fastcgi_param SCRIPT_FILENAME {d}$fastcgi_script_name; fastcgi_param REQUEST_METHOD GET; fastcgi_param SCRIPT_NAME $fastcgi_script_name; }}"
    );
    let Some(ng) = start_nginx(64, &extra) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/slow.php", ng.port);
    let pid = fpm.child.id().to_string();
    let v = run_watched(&url, 4, &pid);
    let f = finding(&v, "server reached pm.max_children setting");
    assert_eq!(f["resource"], "worker_pool", "{f}");
    assert_eq!(f["directive"], "pm.max_children", "{f}");
    assert!(
        f["first_t"].as_f64().is_some(),
        "php-fpm's time stamp is placed: {f}"
    );
    check_against_file(
        &v,
        f,
        &dir.join("fpm.log"),
        "server reached pm.max_children setting",
    );
}
