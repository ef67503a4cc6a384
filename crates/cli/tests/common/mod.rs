//! Test helpers: run the built binary with a time limit, and small scripted
//! TCP servers on 127.0.0.1:0 whose every loop is bounded.
#![allow(dead_code)]

pub mod nginx;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_redline")
}

/// Starts redline with `args`, its output captured, its history in a
/// temporary database (never the user's real one).
fn spawn_redline(args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .env(
            "REDLINE_DB",
            std::env::temp_dir().join(format!("redline-tests-{}.db", std::process::id())),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn redline")
}

/// Runs redline with a hard time limit (kills it past `limit`).
pub fn redline_with_limit(args: &[&str], limit: Duration) -> (Output, Duration) {
    let start = Instant::now();
    let child = spawn_redline(args);
    let out = wait_limit(child, limit);
    (out, start.elapsed())
}

pub fn redline(args: &[&str]) -> Output {
    redline_with_limit(args, Duration::from_secs(60)).0
}

pub fn wait_limit(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        match child.try_wait().expect("wait") {
            Some(_) => break,
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                panic!(
                    "redline did not finish within {limit:?}; stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    child.wait_with_output().expect("output")
}

/// Runs `redline run -o json -q --no-save ARGS`, freezing the whole process
/// (SIGSTOP, as a host stall would) from `at` after its start for `length`;
/// the parsed record. Panics on a non-zero exit.
pub fn run_json_frozen(args: &[&str], at: Duration, length: Duration) -> serde_json::Value {
    let mut all = vec!["run", "-o", "json", "-q", "--no-save"];
    all.extend_from_slice(args);
    let child = spawn_redline(&all);
    let pid = child.id() as libc::pid_t;
    std::thread::sleep(at);
    // SAFETY: signals to our own child process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(length);
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let out = wait_limit(child, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON run record")
}

/// The run record accounts for all `planned` sends of a frozen open-loop
/// run: every one scheduled, each ended exactly once, and at least `min_not_sent`
/// of them counted as never sent (the ones the frozen client did not release).
pub fn assert_planned_sends_accounted(v: &serde_json::Value, planned: u64, min_not_sent: u64) {
    assert_eq!(counter(v, "scheduled"), planned, "{}", v["counters"]);
    let ended = counter(v, "completed")
        + counter(v, "failed")
        + counter(v, "in_flight_at_end")
        + counter(v, "not_sent");
    assert_eq!(ended, planned, "{}", v["counters"]);
    assert!(counter(v, "not_sent") >= min_not_sent, "{}", v["counters"]);
}

/// The codes of a run record's warnings, in order.
pub fn warning_codes(v: &serde_json::Value) -> Vec<&str> {
    v["warnings"]
        .as_array()
        .map(|a| a.iter().filter_map(|w| w["code"].as_str()).collect())
        .unwrap_or_default()
}

/// Runs redline with `--output json -q` and parses the record; panics on a
/// non-zero exit, except the documented exit 1 of a run that got no answer at
/// all (its record is still printed).
pub fn run_json(args: &[&str]) -> serde_json::Value {
    let mut a: Vec<&str> = vec!["run", "--output", "json", "-q"];
    a.extend_from_slice(args);
    let out = redline(&a);
    let err = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let no_answer = out.status.code() == Some(1)
        && counter(&v, "completed") == 0
        && err.contains("no request was answered");
    assert!(
        out.status.success() || no_answer,
        "redline {a:?} failed: {}\n{err}",
        out.status,
    );
    v
}

pub fn counter(v: &serde_json::Value, name: &str) -> u64 {
    v["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}"))
}

pub fn error_count(v: &serde_json::Value, kind: &str) -> u64 {
    v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["count"].as_u64().unwrap())
        .sum()
}

/// A scripted server: each accepted connection is handed to `handler` on its
/// own thread. Stops accepting when dropped or after `lifetime`.
pub struct ScriptServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    pub accepted: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptServer {
    pub fn start<F>(handler: F) -> ScriptServer
    where
        F: Fn(TcpStream) + Send + Sync + 'static,
    {
        Self::start_on(TcpListener::bind("127.0.0.1:0").expect("bind"), handler)
    }

    /// As [`ScriptServer::start`], on a listener the test bound (e.g. `[::1]:0`).
    pub fn start_on<F>(listener: TcpListener, handler: F) -> ScriptServer
    where
        F: Fn(TcpStream) + Send + Sync + 'static,
    {
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicU64::new(0));
        let handler = Arc::new(handler);
        let (s2, a2) = (stop.clone(), accepted.clone());
        let thread = std::thread::spawn(move || {
            let lifetime = Instant::now() + Duration::from_secs(60);
            while !s2.load(Ordering::SeqCst) && Instant::now() < lifetime {
                match listener.accept() {
                    Ok((sock, _)) => {
                        a2.fetch_add(1, Ordering::SeqCst);
                        sock.set_nonblocking(false).unwrap();
                        let _ = sock.set_read_timeout(Some(Duration::from_secs(20)));
                        let h = handler.clone();
                        std::thread::spawn(move || h(sock));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        ScriptServer {
            addr,
            stop,
            accepted,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for ScriptServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request head (up to the blank line); false on EOF or error.
pub fn read_head(s: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut b = [0u8; 1];
    while buf.len() < 64 * 1024 {
        match s.read(&mut b) {
            Ok(1) => {
                buf.push(b[0]);
                if buf.ends_with(b"\r\n\r\n") {
                    return true;
                }
            }
            _ => return false,
        }
    }
    false
}

/// Serves keep-alive requests with a fixed response, `delay` after each request
/// head arrived. The delay is kept precisely (sleep, then yield through the last
/// millisecond). The server also records, per request, how long it really took
/// from the complete head to the response written (µs): on a host whose sleeps
/// overshoot, a test compares the client's figure with that, not with `delay`.
pub fn fixed_server(
    response: &'static [u8],
    delay: Duration,
) -> (ScriptServer, Arc<Mutex<Vec<u64>>>) {
    let took = Arc::new(Mutex::new(Vec::new()));
    let t2 = took.clone();
    let srv = ScriptServer::start(move |mut s| {
        let _ = s.set_nodelay(true);
        let mut buf = Vec::with_capacity(4096);
        let mut chunk = [0u8; 4096];
        for _ in 0..1_000_000 {
            // Requests carry no body and are not pipelined: read up to a blank line.
            buf.clear();
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                if buf.len() > 64 * 1024 {
                    return;
                }
            }
            let arrived = Instant::now();
            let until = arrived + delay;
            if let Some(coarse) = delay.checked_sub(Duration::from_millis(1)) {
                std::thread::sleep(coarse);
            }
            for _ in 0..10_000_000 {
                if Instant::now() >= until {
                    break;
                }
                std::thread::yield_now();
            }
            if s.write_all(response).is_err() {
                return;
            }
            t2.lock()
                .unwrap()
                .push(arrived.elapsed().as_micros() as u64);
        }
    });
    (srv, took)
}

/// The built-in target in this process.
pub fn builtin() -> redline_serve::Server {
    redline_serve::Server::start(redline_serve::ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
    })
    .expect("start built-in server")
}

/// Reads one request (head, then a Content-Length body) from a keep-alive
/// connection: the head as text and the body; `None` on EOF, error or a
/// head or body over 64 KiB.
pub fn read_request(s: &mut TcpStream, pending: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(p) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        if pending.len() > 64 * 1024 {
            return None;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&pending[..end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    if len > 64 * 1024 {
        return None;
    }
    while pending.len() < end + len {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    }
    let body = pending[end..end + len].to_vec();
    pending.drain(..end + len);
    Some((head, body))
}

/// The requests a [`routed_server`] got, as (head, body), in order.
pub type Requests = Arc<std::sync::Mutex<Vec<(String, Vec<u8>)>>>;

/// A keep-alive HTTP/1.1 server whose answers come from `route(head, body)`
/// (the whole response, bytes); every request is kept, as (head, body), for
/// the test to inspect. Connections are counted in `server.accepted`.
pub fn routed_server<F>(route: F) -> (ScriptServer, Requests)
where
    F: Fn(&str, &[u8]) -> Vec<u8> + Send + Sync + 'static,
{
    routed_server_on(TcpListener::bind("127.0.0.1:0").expect("bind"), route)
}

/// As [`routed_server`], on a listener the test bound (e.g. `[::1]:0`).
pub fn routed_server_on<F>(listener: TcpListener, route: F) -> (ScriptServer, Requests)
where
    F: Fn(&str, &[u8]) -> Vec<u8> + Send + Sync + 'static,
{
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let srv = ScriptServer::start_on(listener, move |mut s| {
        let _ = s.set_nodelay(true);
        let mut pending = Vec::new();
        for _ in 0..1_000_000 {
            let Some((head, body)) = read_request(&mut s, &mut pending) else {
                return;
            };
            let resp = route(&head, &body);
            seen2.lock().unwrap().push((head, body));
            if s.write_all(&resp).is_err() {
                return;
            }
        }
    });
    (srv, seen)
}

/// Asserts that a run record fits the committed `docs/run-record.schema.json`.
pub fn assert_run_schema(v: &serde_json::Value) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/run-record.schema.json"
    );
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// Runs a test whose measurements depend on the machine's timing (a 10 ms
/// delay, a rate, a server's capacity) up to `tries` times: a shared or
/// virtual host stalls now and then, so one attempt may miss. Every attempt
/// asserts just as strictly; the last failure is the test's failure. A failed
/// attempt during which the hypervisor took more than 5 % of the machine's CPU
/// time (steal, `/proc/stat`) measured the host, not redline: it is not
/// counted, up to 8 such attempts. When the host disturbed every one of them
/// and fewer than `tries` clean attempts failed, the test says it could not
/// judge (on stderr) and passes: a CI host that takes 40 % of the CPU for
/// minutes (seen) says nothing about redline's timing. A quiet host judges.
pub fn timing_sensitive(tries: u32, mut body: impl FnMut()) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let (mut failed, mut stolen_out) = (0, 0);
    loop {
        let (s0, t0) = (steal_s(), std::time::Instant::now());
        let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut body)) else {
            return;
        };
        let share = (steal_s() - s0) / (t0.elapsed().as_secs_f64() * cpus).max(1e-3);
        if share > 0.05 {
            if stolen_out == 8 {
                eprintln!(
                    "timing-sensitive test: INCONCLUSIVE, the host took over 5% of the CPU time in 9 failed attempts ({:.0}% in the last); {failed} clean attempt(s) failed",
                    share * 100.0
                );
                return;
            }
            stolen_out += 1;
            eprintln!(
                "timing-sensitive test: an attempt missed while the host took {:.0}% of the CPU time; not counted",
                share * 100.0
            );
            continue;
        }
        failed += 1;
        if failed == tries {
            std::panic::resume_unwind(e);
        }
        eprintln!("timing-sensitive test: attempt {failed} of {tries} missed; again");
    }
}

/// CPU seconds stolen by the hypervisor so far, all CPUs (0 where unknown).
fn steal_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .and_then(|l| l.split_ascii_whitespace().nth(8))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks / hz
}

/// The installed Chromium (or Chrome), if any.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        })
}

/// A real server or browser this test needs is missing: locally a note and a
/// skip; in CI (`CI=true`, where `.ci/run` installs it) a failure, so a broken
/// install step cannot turn the suite green by skipping.
pub fn missing(what: &str) {
    if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0") {
        panic!("{what} is not installed, and CI must run this test (.ci/run installs it)");
    }
    eprintln!("NOTE: {what} is not installed; skipped");
}

/// Renders an HTML file in headless Chromium (profile under `dir`, optional
/// screenshot) and returns (the DOM after its scripts ran, the browser's log);
/// None, with a note, when no Chromium is installed.
pub fn chromium_dump(
    page: &std::path::Path,
    dir: &std::path::Path,
    screenshot: Option<&std::path::Path>,
) -> Option<(String, String)> {
    let Some(browser) = chromium() else {
        missing("chromium (apt-get install chromium)");
        return None;
    };
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--enable-logging=stderr",
        "--v=0",
        &format!("--user-data-dir={}", dir.join("profile").display()),
        "--window-size=1280,2000",
    ]);
    if let Some(shot) = screenshot {
        cmd.arg(format!("--screenshot={}", shot.display()));
    }
    // To files, not pipes: a DOM over the pipe's 64 KiB would block the
    // browser while nothing reads until it exits.
    let (dom_path, log_path) = (dir.join("chromium-dom.html"), dir.join("chromium.log"));
    let child = cmd
        .args(["--dump-dom", &format!("file://{}", page.display())])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&dom_path).expect("DOM file"))
        .stderr(std::fs::File::create(&log_path).expect("log file"))
        .spawn()
        .expect("spawn chromium");
    wait_limit(child, Duration::from_secs(90));
    let read = |p: &std::path::Path| {
        String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
    };
    Some((read(&dom_path), read(&log_path)))
}
