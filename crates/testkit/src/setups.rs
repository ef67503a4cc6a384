//! Real servers with one known limit each (issue 30, points 6 and 7): the
//! setups that hold redline's diagnosis to the server's own evidence.
//!
//! A [`Setup`] starts its servers ([`Setup::start`]: free loopback ports,
//! their own configs in temporary directories, each watched by PID), with
//! whatever makes the limit real (a memory cgroup, a CPU pin, a network
//! namespace with a `tbf` shaper, idle keep-alive clients, a busy process).
//! The [`Running`] setup gives the redline arguments of a bounded run against
//! it ([`Running::run`]), the resource the diagnosis should name
//! ([`Running::expected`]), and the server's OWN evidence that the limit is
//! real, read without redline ([`Running::evidence`]): its error-log line, its
//! cgroup's OOM counters, the CPUs it may use, `tc`'s counters, the busy
//! process's CPU time. Dropping a `Running` stops every process it started
//! by PID (SIGTERM, then SIGKILL to its process group), removes its cgroups,
//! its network namespace and its directories, also when a test panics.
//!
//! Used by `crates/cli/tests/diagnosis.rs` (one test per setup) and by the
//! example `diagnose` (`bench/diagnose.sh`: the verdict table). The setups
//! are listed in docs/diagnosis-setups.md.

use crate::{free_port, tmpdir};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MODULES: &str = "/usr/lib/apache2/modules";
const APACHE: &str = "/usr/sbin/apache2";
const NGINX: &str = "/usr/sbin/nginx";

/// True when running as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid() has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Why a setup did not start.
#[derive(Debug)]
pub enum StartError {
    /// A server, tool or privilege the setup needs is missing (a skip
    /// locally, a failure under CI: [`crate::need::missing`]).
    Missing(String),
    /// It is there but did not start (the reason, with its log).
    Failed(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Missing(m) => write!(f, "missing: {m}"),
            StartError::Failed(m) => write!(f, "failed to start: {m}"),
        }
    }
}

type Start = fn() -> Result<Running, StartError>;

/// One real bottleneck: how to start it and what it should be diagnosed as.
#[derive(Clone, Copy)]
pub struct Setup {
    /// Its name (the test's and the bench table's).
    pub name: &'static str,
    /// The `diagnosis.resource` a right diagnosis names.
    pub expected: &'static str,
    /// The known limit, in words.
    pub limit: &'static str,
    /// Needs root (cgroups, network namespaces, `tc`).
    pub needs_root: bool,
    /// Must not run beside other setups: it pins CPUs, shapes the link,
    /// measures the client, or its evidence is host-wide (ListenOverflows).
    pub exclusive: bool,
    start: Start,
}

impl Setup {
    /// Starts it; `Err` says whether something is missing or it failed.
    pub fn try_start(&self) -> Result<Running, StartError> {
        if self.needs_root && !is_root() {
            return Err(StartError::Missing(format!(
                "root (setup {} makes cgroups, network namespaces or CPU pins)",
                self.name
            )));
        }
        let mut r = (self.start)()?;
        r.name = self.name;
        r.expected = self.expected;
        Ok(r)
    }

    /// Starts it; None after [`crate::need::missing`] (a skip locally, a
    /// panic under CI) when something it needs is missing; panics when it
    /// does not start.
    pub fn start(&self) -> Option<Running> {
        match self.try_start() {
            Ok(r) => Some(r),
            Err(StartError::Missing(m)) => {
                crate::need::missing(&m);
                None
            }
            Err(e) => panic!("setup {}: {e}", self.name),
        }
    }
}

/// Every setup, in the order of docs/diagnosis-setups.md.
pub fn all() -> Vec<Setup> {
    let s = |name, expected, limit, needs_root, exclusive, start: Start| Setup {
        name,
        expected,
        limit,
        needs_root,
        exclusive,
        start,
    };
    vec![
        s(
            "apache_prefork_pool",
            "worker_pool",
            "Apache prefork MaxRequestWorkers 10, KeepAlive Off, a 0.2 s CGI",
            false,
            false,
            apache_prefork_pool,
        ),
        s(
            "apache_prefork_keepalive",
            "keepalive",
            "Apache prefork MaxRequestWorkers 10, KeepAliveTimeout 15, 6 idle keep-alive clients",
            false,
            false,
            apache_prefork_keepalive,
        ),
        s(
            "apache_event_keepalive",
            "keepalive",
            "Apache event, 1 process of 4 threads, KeepAliveTimeout 30, 10 idle keep-alive clients",
            false,
            false,
            apache_event_keepalive,
        ),
        s(
            "nginx_worker_connections",
            "worker_pool",
            "nginx 1 worker, worker_connections 64, 150 connections",
            false,
            false,
            nginx_worker_connections,
        ),
        s(
            "php_fpm_pool",
            "worker_pool",
            "php-fpm pm.max_children 2 behind nginx, a 0.2 s script",
            false,
            false,
            php_fpm_pool,
        ),
        s(
            "php_fpm_cpu_pinned",
            "cpu",
            "php-fpm pinned to CPU 0, pm.max_children 8, 20 ms of CPU per request",
            true,
            true,
            php_fpm_cpu_pinned,
        ),
        s(
            "apache_cgroup_memory",
            "memory",
            "Apache prefork in a 160 MiB memory cgroup, a CGI holding 20 MiB for 0.3 s",
            true,
            false,
            apache_cgroup_memory,
        ),
        s(
            "nginx_proxy_slow_backend",
            "upstream",
            "nginx proxy to an Apache backend of 4 workers, 0.2 s each (20 req/s), 60 req/s offered",
            false,
            false,
            nginx_proxy_slow_backend,
        ),
        s(
            "listen_backlog",
            "listen_backlog",
            "Apache prefork MaxRequestWorkers 1, ListenBacklog 1, a 1 s CGI",
            false,
            true,
            listen_backlog,
        ),
        s(
            "shaped_link",
            "link",
            "a network namespace whose loopback is shaped by tbf to 16 Mbit/s, a 512 KiB file",
            true,
            true,
            shaped_link,
        ),
        s(
            "starved_client",
            "client",
            "redline on CPU 1 beside a busy loop on CPU 1, nginx on CPU 0",
            true,
            true,
            starved_client,
        ),
        s(
            "nginx_cpu",
            "cpu",
            "nginx, 1 worker pinned to CPU 0, gzip_comp_level 9 on a 1 MiB text file",
            true,
            true,
            nginx_cpu,
        ),
    ]
}

/// The setup named `name`.
pub fn by_name(name: &str) -> Option<Setup> {
    all().into_iter().find(|s| s.name == name)
}

/// The server's own evidence that a setup's limit was real.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// The limit showed in the server's own evidence.
    pub holds: bool,
    /// The evidence, one line.
    pub line: String,
}

/// What a run against a setup gave.
pub struct Outcome {
    /// The run record (`-o json`), or Null when redline printed none.
    pub record: serde_json::Value,
    /// redline's stderr.
    pub stderr: String,
    /// redline's exit code.
    pub code: Option<i32>,
    /// How long the run took.
    pub wall: Duration,
    /// The server's own evidence, read after the run.
    pub evidence: Evidence,
}

impl Outcome {
    /// `diagnosis.resource`, or "" when the record has no diagnosis.
    pub fn resource(&self) -> &str {
        self.record["diagnosis"]["resource"].as_str().unwrap_or("")
    }

    /// The diagnosis's first evidence line, or "".
    pub fn first_evidence(&self) -> &str {
        self.record["diagnosis"]["evidence"][0]
            .as_str()
            .unwrap_or("")
    }
}

/// A verdict: right when the diagnosis names the expected resource, wrong
/// when it names another, not known for `unknown` or no diagnosis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The expected resource.
    Right,
    /// Another resource.
    Wrong,
    /// "unknown", or no diagnosis.
    NotKnown,
}

/// The verdict of `resource` against `expected`.
pub fn verdict(expected: &str, resource: &str) -> Verdict {
    match resource {
        r if r == expected => Verdict::Right,
        "" | "unknown" => Verdict::NotKnown,
        _ => Verdict::Wrong,
    }
}

/// What the setup reads as its own evidence.
enum Check {
    /// A line of a log containing this text.
    Log { file: PathBuf, needle: &'static str },
    /// A log line, and keep-alive slots (K) seen on the scoreboard before the run.
    KeepAlive {
        file: PathBuf,
        needle: &'static str,
        k_before: usize,
        idle: usize,
    },
    /// Apache event: the error log, and how many idle keep-alive clients were held.
    EventKeepAlive {
        file: PathBuf,
        idle: usize,
        answered: usize,
    },
    /// A memory cgroup's OOM kills and limit hits.
    CgroupOom(Cgroup),
    /// The children of this master: their allowed CPUs and their CPU time.
    Pinned { master: u32, cpus: &'static str },
    /// One pinned worker of this master that ran or waited for its CPU all
    /// the run long.
    CpuBound { master: u32, cpus: &'static str },
    /// TcpExt ListenOverflows grew.
    ListenOverflows,
    /// `tc -s qdisc show dev lo` in the namespace.
    Shaper { ns: String, rate_bytes: f64 },
    /// A busy process's share of its CPU.
    Busy { pid: u32 },
}

/// A memory cgroup made by a setup (v1 or v2).
struct Cgroup {
    dir: PathBuf,
    v2: bool,
}

/// A process a setup started, in its own process group; stopped by PID.
struct Proc {
    child: Child,
    what: &'static str,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: signals to our own child, by its PID.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // What it left in its own process group (a prefork's CGI, a worker).
        // SAFETY: the group of our own child, which it leads (process_group(0)).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
}

/// A setup that runs: its servers, companions, cgroups, namespace and
/// directories, all removed on drop.
pub struct Running {
    /// The setup's name.
    pub name: &'static str,
    /// The `diagnosis.resource` a right diagnosis names.
    pub expected: &'static str,
    /// redline's arguments (after the binary, starting with `run`).
    pub args: Vec<String>,
    /// A command redline runs under (`ip netns exec NS`, `taskset -c 1`), or empty.
    pub prefix: Vec<String>,
    /// The PIDs of the servers (watched by the run).
    pub pids: Vec<u32>,
    check: Check,
    before: Vec<f64>,
    procs: Vec<Proc>,
    idle: Vec<TcpStream>,
    cgroup: Option<Cgroup>,
    netns: Option<String>,
    dirs: Vec<PathBuf>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.idle.clear();
        while let Some(p) = self.procs.pop() {
            drop(p);
        }
        if let Some(cg) = self.cgroup.take() {
            // Bounded: the killed processes leave the cgroup within moments.
            for _ in 0..100 {
                if std::fs::remove_dir(&cg.dir).is_ok() || !cg.dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if let Some(ns) = self.netns.take() {
            let _ = Command::new("ip")
                .args(["netns", "delete", &ns])
                .stderr(Stdio::null())
                .status();
        }
        for d in self.dirs.drain(..) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Running {
    fn new(args: Vec<String>) -> Running {
        Running {
            name: "",
            expected: "",
            args,
            prefix: Vec::new(),
            pids: Vec::new(),
            check: Check::ListenOverflows,
            before: Vec::new(),
            procs: Vec::new(),
            idle: Vec::new(),
            cgroup: None,
            netns: None,
            dirs: Vec::new(),
        }
    }

    /// The whole command line of the run, for a report.
    pub fn command_line(&self, redline: &str) -> String {
        let mut all = self.prefix.clone();
        all.push(redline.to_string());
        all.extend(self.args.iter().cloned());
        all.join(" ")
    }

    /// Runs `redline` (its path) with [`Running::args`] under
    /// [`Running::prefix`] (killed past 40 s), then reads the evidence.
    pub fn run(&mut self, redline: &str) -> Outcome {
        self.before = self.measure();
        let start = Instant::now();
        let (cmd, rest) = match self.prefix.split_first() {
            Some((c, rest)) => (c.clone(), {
                let mut v = rest.to_vec();
                v.push(redline.to_string());
                v
            }),
            None => (redline.to_string(), Vec::new()),
        };
        let mut child = Command::new(&cmd)
            .args(&rest)
            .args(&self.args)
            .env(
                "REDLINE_DB",
                std::env::temp_dir().join(format!("redline-setups-{}.db", std::process::id())),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd}: {e}"));
        // Read the pipes on threads so a large record cannot block the child.
        let mut so = child.stdout.take().unwrap();
        let mut se = child.stderr.take().unwrap();
        let t_out = std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = so.read_to_end(&mut b);
            b
        });
        let t_err = std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = se.read_to_end(&mut b);
            b
        });
        let limit = Duration::from_secs(40);
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Some(st),
                Ok(None) if start.elapsed() > limit => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break None,
            }
        };
        let wall = start.elapsed();
        let out = t_out.join().unwrap_or_default();
        let mut stderr = String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned();
        if status.is_none() {
            stderr.push_str("\n(killed: no end within 40 s)");
        }
        let record = serde_json::from_slice(&out).unwrap_or(serde_json::Value::Null);
        let evidence = self.evidence(wall);
        Outcome {
            record,
            stderr,
            code: status.and_then(|s| s.code()),
            wall,
            evidence,
        }
    }

    /// Counters read before and after the run.
    fn measure(&self) -> Vec<f64> {
        match &self.check {
            Check::ListenOverflows => vec![listen_overflows() as f64],
            Check::Shaper { ns, .. } => {
                let (sent, dropped, over) = tc_counters(ns);
                vec![sent as f64, dropped as f64, over as f64]
            }
            Check::Busy { pid } => vec![cpu_seconds(*pid)],
            Check::Pinned { master, .. } | Check::CpuBound { master, .. } => {
                let kids = children(*master);
                let run: f64 = kids.iter().map(|p| schedstat(*p).0).sum();
                let wait: f64 = kids.iter().map(|p| schedstat(*p).1).sum();
                vec![run, wait]
            }
            _ => Vec::new(),
        }
    }

    /// The server's own evidence that the limit is real, read without
    /// redline; `wall` is how long the run took.
    pub fn evidence(&self, wall: Duration) -> Evidence {
        let now = self.measure();
        let d = |i: usize| {
            now.get(i).copied().unwrap_or(0.0) - self.before.get(i).copied().unwrap_or(0.0)
        };
        let secs = wall.as_secs_f64().max(0.001);
        match &self.check {
            Check::Log { file, needle } => match log_line(file, needle) {
                Some(l) => Evidence {
                    holds: true,
                    line: l,
                },
                None => Evidence {
                    holds: false,
                    line: format!("no \"{needle}\" in {}", file.display()),
                },
            },
            Check::KeepAlive {
                file,
                needle,
                k_before,
                idle,
            } => {
                let l = log_line(file, needle);
                Evidence {
                    holds: l.is_some() && *k_before >= *idle,
                    line: format!(
                        "{k_before} of {idle} idle clients in K on the scoreboard before the run; {}",
                        l.unwrap_or_else(|| format!("no \"{needle}\" in the error log"))
                    ),
                }
            }
            Check::EventKeepAlive {
                file,
                idle,
                answered,
            } => {
                let l = log_line(file, "MaxRequestWorkers");
                Evidence {
                    holds: l.is_some() && *answered >= 8,
                    line: format!(
                        "{answered} of {idle} idle keep-alive clients held; {}",
                        l.unwrap_or_else(|| "no MaxRequestWorkers line in the error log".into())
                    ),
                }
            }
            Check::CgroupOom(cg) => {
                let (oom, fail) = cg.counters();
                Evidence {
                    holds: oom > 0 || fail > 0,
                    line: format!(
                        "the cgroup {}: oom_kill {oom}, {} {fail}",
                        cg.dir.display(),
                        if cg.v2 {
                            "memory.events max"
                        } else {
                            "memory.failcnt"
                        }
                    ),
                }
            }
            Check::Pinned { master, cpus } => {
                let kids = children(*master);
                let lists: Vec<String> = kids.iter().map(|p| cpus_allowed(*p)).collect();
                let pinned = !kids.is_empty() && lists.iter().all(|l| l == cpus);
                let share = d(0) / secs;
                // Saturation, whatever else the host runs on that CPU: the
                // workers waited in the run queue longer than they ran (on
                // average more than one was ready for the one CPU).
                Evidence {
                    holds: pinned && share >= 0.3 && d(1) >= d(0),
                    line: format!(
                        "{} workers, Cpus_allowed_list {:?}; they ran {:.2} s in {:.1} s ({:.0} % of one core) and waited {:.2} s for the CPU (/proc/PID/schedstat)",
                        kids.len(),
                        lists.first().map(String::as_str).unwrap_or("?"),
                        d(0),
                        secs,
                        share * 100.0,
                        d(1)
                    ),
                }
            }
            Check::CpuBound { master, cpus } => {
                let kids = children(*master);
                let lists: Vec<String> = kids.iter().map(|p| cpus_allowed(*p)).collect();
                let pinned = !kids.is_empty() && lists.iter().all(|l| l == cpus);
                // Never idle: running, or ready and waiting for its one CPU.
                let busy = (d(0) + d(1)) / secs;
                Evidence {
                    holds: pinned && d(0) / secs >= 0.3 && busy >= 0.8,
                    line: format!(
                        "{} worker(s), Cpus_allowed_list {:?}; ran {:.2} s and waited {:.2} s for the CPU in {:.1} s: busy {:.0} % of the run (/proc/PID/schedstat)",
                        kids.len(),
                        lists.first().map(String::as_str).unwrap_or("?"),
                        d(0),
                        d(1),
                        secs,
                        busy * 100.0
                    ),
                }
            }
            Check::ListenOverflows => Evidence {
                holds: d(0) > 0.0,
                line: format!("TcpExt ListenOverflows grew by {} during the run", d(0)),
            },
            Check::Shaper { rate_bytes, .. } => {
                let rate = d(0) / secs;
                Evidence {
                    holds: (d(1) + d(2)) > 0.0 && rate > 0.5 * rate_bytes && rate < 1.3 * rate_bytes,
                    line: format!(
                        "tc tbf on lo: {:.0} bytes/s ({:.1} Mbit/s, rate 16 Mbit/s), {} dropped, {} overlimits",
                        rate,
                        rate * 8.0 / 1e6,
                        d(1),
                        d(2)
                    ),
                }
            }
            Check::Busy { pid } => {
                let share = d(0) / secs;
                Evidence {
                    holds: (0.3..=0.95).contains(&share),
                    line: format!(
                        "the busy loop (PID {pid}, CPU 1) used {:.2} s of CPU in {:.1} s = {:.0} % of CPU 1",
                        d(0),
                        secs,
                        share * 100.0
                    ),
                }
            }
        }
    }

    /// The servers are all still running.
    pub fn alive(&mut self) -> bool {
        self.procs.iter_mut().all(|p| p.alive())
    }

    /// The first server that is not running, by what it is.
    pub fn gone(&mut self) -> Option<&'static str> {
        self.procs
            .iter_mut()
            .find_map(|p| (!p.alive()).then_some(p.what))
    }
}

impl Cgroup {
    /// (OOM kills, limit hits).
    fn counters(&self) -> (u64, u64) {
        if self.v2 {
            let ev = std::fs::read_to_string(self.dir.join("memory.events")).unwrap_or_default();
            (keyed(&ev, "oom_kill"), keyed(&ev, "max"))
        } else {
            let oc =
                std::fs::read_to_string(self.dir.join("memory.oom_control")).unwrap_or_default();
            let fail = std::fs::read_to_string(self.dir.join("memory.failcnt"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            (keyed(&oc, "oom_kill"), fail)
        }
    }
}

/// `key N` in a flat-keyed file.
fn keyed(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some(key)).then(|| it.next().and_then(|v| v.parse().ok()))?
        })
        .unwrap_or(0)
}

/// The first line of `file` that contains `needle`, trimmed.
fn log_line(file: &Path, needle: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines()
        .find(|l| l.contains(needle))
        .map(|l| l.trim().chars().take(240).collect())
}

/// TcpExt ListenOverflows of this network namespace.
pub fn listen_overflows() -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        if let [h, v] = pair {
            if h.starts_with("TcpExt:") {
                let i = h.split_whitespace().position(|x| x == "ListenOverflows");
                if let Some(i) = i {
                    return v
                        .split_whitespace()
                        .nth(i)
                        .and_then(|x| x.parse().ok())
                        .unwrap_or(0);
                }
            }
        }
    }
    0
}

/// A process's CPU time (user + system), seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (t(11) + t(12)) / hz.max(1.0)
}

/// (time on a CPU, time waiting in the run queue) of a process's main
/// thread, seconds (`/proc/PID/schedstat`).
pub fn schedstat(pid: u32) -> (f64, f64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
    let f: Vec<f64> = s
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    (
        f.first().copied().unwrap_or(0.0) / 1e9,
        f.get(1).copied().unwrap_or(0.0) / 1e9,
    )
}

/// The PIDs whose parent is `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        let rest = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
        if rest.split_whitespace().nth(1).and_then(|x| x.parse().ok()) == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// `Cpus_allowed_list` of a process.
pub fn cpus_allowed(pid: u32) -> String {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    st.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// (bytes sent, dropped, overlimits) of the root qdisc of `lo` in `ns`.
fn tc_counters(ns: &str) -> (u64, u64, u64) {
    let out = Command::new("ip")
        .args([
            "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", "lo",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // " Sent 123 bytes 45 pkt (dropped 0, overlimits 0 requeues 0)"
    let Some(line) = out.lines().find(|l| l.trim_start().starts_with("Sent ")) else {
        return (0, 0, 0);
    };
    let w: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter(|x| !x.is_empty())
        .collect();
    let after = |k: &str| {
        w.iter()
            .position(|x| *x == k)
            .and_then(|i| w.get(i + 1))
            .and_then(|x| x.parse().ok())
            .unwrap_or(0)
    };
    (after("Sent"), after("dropped"), after("overlimits"))
}

/// Spawns `cmd` in its own process group, its output to `log` (or nowhere).
fn spawn(mut cmd: Command, what: &'static str, log: Option<&Path>) -> Result<Proc, StartError> {
    let (o, e) = match log.and_then(|l| std::fs::File::create(l).ok()) {
        Some(f) => (
            Stdio::from(
                f.try_clone()
                    .map_err(|e| StartError::Failed(e.to_string()))?,
            ),
            Stdio::from(f),
        ),
        None => (Stdio::null(), Stdio::null()),
    };
    let child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(o)
        .stderr(e)
        .spawn()
        .map_err(|e| StartError::Failed(format!("{what}: {e}")))?;
    Ok(Proc { child, what })
}

/// Connects to 127.0.0.1:`port`, inside the network namespace `ns` when given
/// (from a thread that enters it; the process stays where it is).
fn connect_in(ns: Option<&str>, port: u16) -> bool {
    match ns {
        None => TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1))
            .is_ok(),
        Some(ns) => {
            let path = format!("/var/run/netns/{ns}");
            std::thread::spawn(move || {
                let Ok(f) = std::fs::File::open(&path) else {
                    return false;
                };
                use std::os::fd::AsRawFd;
                // SAFETY: setns on this thread only, with an open namespace fd.
                if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return false;
                }
                TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1))
                    .is_ok()
            })
            .join()
            .unwrap_or(false)
        }
    }
}

/// Waits (10 s at most) until `port` accepts while `p` runs.
fn wait_ready(p: &mut Proc, port: u16, ns: Option<&str>, log: &Path) -> Result<(), StartError> {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if !p.alive() {
            break;
        }
        if connect_in(ns, port) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let l = std::fs::read_to_string(log).unwrap_or_default();
    Err(StartError::Failed(format!(
        "{} did not listen on port {port}: {}",
        p.what,
        l.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
    )))
}

fn chmod_readable(dir: &Path) {
    let _ = Command::new("chmod")
        .arg("-R")
        .arg("a+rX")
        .arg(dir)
        .status();
}

fn write_exec(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write a script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// An Apache of a setup.
struct ApacheSpec {
    mpm: &'static str,
    /// MPM lines (StartServers, MaxRequestWorkers, …).
    mpm_lines: String,
    keepalive: Option<u32>,
    status: bool,
    extra: String,
    /// Prefix command (a cgroup wrapper).
    wrap: Vec<String>,
}

/// The CGIs every setup's Apache has: slow.cgi (0.2 s), slow1.cgi (1 s),
/// mem.cgi (touches 20 MiB, holds it 0.3 s); idx.html.
fn apache_files(dir: &Path) {
    std::fs::create_dir_all(dir.join("cgi")).unwrap();
    let ok = "printf 'Content-Type: text/plain\\r\\n\\r\\nok\\n'";
    write_exec(
        &dir.join("cgi/slow.cgi"),
        &format!("#!/bin/sh\nsleep 0.2\n{ok}\n"),
    );
    write_exec(
        &dir.join("cgi/slow1.cgi"),
        &format!("#!/bin/sh\nsleep 1\n{ok}\n"),
    );
    write_exec(
        &dir.join("cgi/mem.cgi"),
        "#!/usr/bin/perl\nmy $x = \"x\" x (20 * 1024 * 1024);\nselect(undef, undef, undef, 0.3);\n\
         print \"Content-Type: text/plain\\r\\n\\r\\nok \", length($x), \"\\n\";\n",
    );
    std::fs::write(dir.join("idx.html"), "hi\n").unwrap();
}

/// Starts Apache per `spec` on a free port: (process, port, dir, error log, config).
fn start_apache(
    tag: &str,
    spec: ApacheSpec,
) -> Result<(Proc, u16, PathBuf, PathBuf, PathBuf), StartError> {
    let m = Path::new(MODULES);
    let mpm_so = format!("mod_mpm_{}.so", spec.mpm);
    let cgi = if spec.mpm == "prefork" { "cgi" } else { "cgid" };
    let cgi_so = format!("mod_{cgi}.so");
    if !Path::new(APACHE).exists()
        || ![
            mpm_so.as_str(),
            "mod_status.so",
            cgi_so.as_str(),
            "mod_alias.so",
        ]
        .iter()
        .all(|x| m.join(x).exists())
    {
        return Err(StartError::Missing(
            "apache2 with its MPMs, mod_status and mod_cgi (apt-get install apache2)".into(),
        ));
    }
    let dir = tmpdir(tag);
    apache_files(&dir);
    let port = free_port();
    let user = if is_root() {
        "User www-data\nGroup www-data\n"
    } else {
        ""
    };
    let d = dir.display();
    let ka = match spec.keepalive {
        Some(t) => format!("KeepAlive On\nKeepAliveTimeout {t}\nMaxKeepAliveRequests 0"),
        None => "KeepAlive Off".into(),
    };
    let cgid = if cgi == "cgid" {
        format!("ScriptSock {d}/cgid.sock\n")
    } else {
        String::new()
    };
    let status = if spec.status {
        "<Location /server-status>\n  SetHandler server-status\n</Location>\nExtendedStatus On\n"
    } else {
        ""
    };
    let mpm = spec.mpm;
    let mpm_lines = &spec.mpm_lines;
    let extra = &spec.extra;
    let conf = format!(
        "ServerRoot {d}\nServerName 127.0.0.1\nListen 127.0.0.1:{port}\nPidFile {d}/apache2.pid\n\
         ErrorLog {d}/error.log\nLogLevel warn\nDefaultRuntimeDir {d}\nMutex file:{d} default\n\
         LoadModule mpm_{mpm}_module {m}/mod_mpm_{mpm}.so\n\
         LoadModule authz_core_module {m}/mod_authz_core.so\n\
         LoadModule status_module {m}/mod_status.so\n\
         LoadModule alias_module {m}/mod_alias.so\nLoadModule {cgi}_module {m}/mod_{cgi}.so\n{cgid}{user}\
         {mpm_lines}\n{ka}\nTimeout 30\n\
         DocumentRoot {d}\n{status}\
         ScriptAlias /cgi-bin/ {d}/cgi/\n<Directory {d}>\n  Require all granted\n</Directory>\n{extra}\n",
        m = m.display()
    );
    let conf_path = dir.join("apache2.conf");
    std::fs::write(&conf_path, conf).unwrap();
    chmod_readable(&dir);
    let mut cmd = if spec.wrap.is_empty() {
        Command::new(APACHE)
    } else {
        let mut c = Command::new(&spec.wrap[0]);
        c.args(&spec.wrap[1..]).arg(APACHE);
        c
    };
    cmd.args(["-D", "FOREGROUND", "-f"])
        .arg(&conf_path)
        .env("APACHE_RUN_DIR", &dir)
        .env("APACHE_LOCK_DIR", &dir)
        .env("APACHE_LOG_DIR", &dir);
    let errlog = dir.join("error.log");
    let out = dir.join("stderr.log");
    let mut p = match spawn(cmd, "apache2", Some(&out)) {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    if let Err(e) = wait_ready(&mut p, port, None, &out) {
        let log = std::fs::read_to_string(&errlog).unwrap_or_default();
        drop(p);
        let _ = std::fs::remove_dir_all(&dir);
        return Err(StartError::Failed(format!("{e} {log}")));
    }
    Ok((p, port, dir, errlog, conf_path))
}

fn prefork(workers: u32) -> String {
    format!(
        "StartServers 2\nMinSpareServers 1\nMaxSpareServers 4\nServerLimit {workers}\nMaxRequestWorkers {workers}"
    )
}

/// A plain Apache prefork for a test of its own (`redline trial`): its
/// CGIs and idx.html ([`apache_files`]), MaxRequestWorkers `workers` under
/// ServerLimit `limit` (a restart can raise it up to `limit`), every child
/// started at once (StartServers and the spare bounds at `limit`, which
/// Apache holds to MaxRequestWorkers), so a 1-second run after a restart
/// (`kill -HUP`) does not measure the spawn ramp; KeepAlive Off, the status
/// page, and the `extra` lines. The running server (stopped and removed on
/// drop), its port and its configuration file.
pub fn apache_prefork(
    tag: &str,
    workers: u32,
    limit: u32,
    extra: &str,
) -> Result<(Running, u16, PathBuf), StartError> {
    let (p, port, dir, _errlog, conf) = start_apache(
        tag,
        ApacheSpec {
            mpm: "prefork",
            mpm_lines: format!(
                "StartServers {limit}\nMinSpareServers {limit}\nMaxSpareServers {limit}\nServerLimit {limit}\nMaxRequestWorkers {workers}"
            ),
            keepalive: None,
            status: true,
            extra: extra.to_string(),
            wrap: Vec::new(),
        },
    )?;
    let mut r = Running::new(Vec::new());
    r.pids = vec![p.pid()];
    r.procs.push(p);
    r.dirs.push(dir);
    Ok((r, port, conf))
}

/// An nginx of a setup.
struct NginxSpec {
    worker_connections: u32,
    /// Lines in the server block.
    server: String,
    /// Lines in the http block.
    http: String,
    /// CPU list to pin it to (taskset).
    pin: Option<&'static str>,
    /// Network namespace to start it in.
    ns: Option<String>,
}

/// Starts nginx (1 worker, stub_status at /nginx_status): (process, port, dir, config).
fn start_nginx(tag: &str, spec: NginxSpec) -> Result<(Proc, u16, PathBuf, PathBuf), StartError> {
    if !Path::new(NGINX).exists() {
        return Err(StartError::Missing("nginx (apt-get install nginx)".into()));
    }
    let dir = tmpdir(tag);
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::fs::write(dir.join("index.html"), "hello\n").unwrap();
    let port = free_port();
    let d = dir.display();
    let conf = format!(
        "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections {wc}; }}\n\
         http {{\n access_log off;\n client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n{http}\n\
         server {{ listen 127.0.0.1:{port}; root {d};\n location = /nginx_status {{ stub_status; }}\n{server}\n }}\n}}\n",
        wc = spec.worker_connections,
        http = spec.http,
        server = spec.server,
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    chmod_readable(&dir);
    let mut pre: Vec<String> = Vec::new();
    if let Some(ns) = &spec.ns {
        pre.extend(["ip", "netns", "exec", ns].map(String::from));
    }
    if let Some(cpus) = spec.pin {
        pre.extend(["taskset", "-c", cpus].map(String::from));
    }
    let mut cmd = match pre.split_first() {
        Some((c, rest)) => {
            let mut cmd = Command::new(c);
            cmd.args(rest).arg(NGINX);
            cmd
        }
        None => Command::new(NGINX),
    };
    cmd.arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf_path)
        .args(["-g", "daemon off;"]);
    let out = dir.join("stderr.log");
    let mut p = match spawn(cmd, "nginx", Some(&out)) {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    if let Err(e) = wait_ready(&mut p, port, spec.ns.as_deref(), &out) {
        let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
        drop(p);
        let _ = std::fs::remove_dir_all(&dir);
        return Err(StartError::Failed(format!("{e} {log}")));
    }
    Ok((p, port, dir, conf_path))
}

fn fpm_bin() -> Option<&'static str> {
    ["/usr/sbin/php-fpm8.2", "/usr/sbin/php-fpm"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

/// Starts php-fpm with `pool` lines, the scripts in its directory, pinned
/// to `pin` (taskset on the master, before it forks): (process, port, status
/// port, dir, log, config).
fn start_fpm(
    tag: &str,
    pool: &str,
    pin: Option<&str>,
) -> Result<(Proc, u16, u16, PathBuf, PathBuf, PathBuf), StartError> {
    let Some(bin) = fpm_bin() else {
        return Err(StartError::Missing(
            "php-fpm (apt-get install php-fpm)".into(),
        ));
    };
    let dir = tmpdir(tag);
    std::fs::write(
        dir.join("slow.php"),
        "<?php usleep(200000); echo \"ok\\n\";\n",
    )
    .unwrap();
    // ~20 ms of the process's own CPU time (not wall time), however busy the CPU.
    std::fs::write(
        dir.join("burn.php"),
        "<?php\nfunction cpu_us() { $r = getrusage(); return $r['ru_utime.tv_sec'] * 1000000 + $r['ru_utime.tv_usec'] + $r['ru_stime.tv_sec'] * 1000000 + $r['ru_stime.tv_usec']; }\n\
         $t = cpu_us(); $x = 0; $i = 0;\nwhile (cpu_us() - $t < 20000 && $i < 100000000) { for ($j = 0; $j < 2000; $j++) { $x += $j * $j; } $i++; }\necho \"ok $x\\n\";\n",
    )
    .unwrap();
    let (app, stat) = (free_port(), free_port());
    let user = if is_root() {
        "user = www-data\ngroup = www-data\n"
    } else {
        ""
    };
    let d = dir.display();
    let log = dir.join("fpm.log");
    let conf = dir.join("fpm.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\nlog_level = notice\ndaemonize = no\n[www]\n{user}\
             listen = 127.0.0.1:{app}\nlisten.backlog = 511\n{pool}\n\
             pm.status_path = /status\npm.status_listen = 127.0.0.1:{stat}\n"
        ),
    )
    .unwrap();
    chmod_readable(&dir);
    let mut cmd = match pin {
        Some(c) => {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", c, bin]);
            cmd
        }
        None => Command::new(bin),
    };
    cmd.arg("-y").arg(&conf).arg("-F");
    let out = dir.join("stderr.log");
    let mut p = match spawn(cmd, "php-fpm", Some(&out)) {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    if let Err(e) = wait_ready(&mut p, app, None, &log) {
        drop(p);
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    Ok((p, app, stat, dir, log, conf))
}

/// nginx's server lines for php-fpm at `app` (scripts in `dir`) and its
/// status page at `stat`, as /status.
fn fpm_locations(app: u16, stat: u16, dir: &Path) -> String {
    let d = dir.display();
    format!(
        " location = /status {{ fastcgi_pass 127.0.0.1:{stat}; fastcgi_param SCRIPT_NAME /status; fastcgi_param SCRIPT_FILENAME /status; fastcgi_param REQUEST_METHOD GET; fastcgi_param QUERY_STRING $query_string; }}\n\
          location ~ \\.php$ {{ fastcgi_pass 127.0.0.1:{app}; fastcgi_param SCRIPT_FILENAME {d}$fastcgi_script_name; fastcgi_param REQUEST_METHOD GET; fastcgi_param SCRIPT_NAME $fastcgi_script_name; }}"
    )
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The redline arguments of a setup's run: `run` on the setup's URL
/// (`path` on 127.0.0.1:`port`), its load flags, the status page when it
/// has one, its configuration, `--watch PID` and the common tail.
fn run_args(
    port: u16,
    path: &str,
    load: &[&str],
    status: Option<&str>,
    conf: &Path,
    pid: u32,
) -> Vec<String> {
    let mut args = strings(&["run", &format!("http://127.0.0.1:{port}{path}")]);
    args.extend(strings(load));
    if let Some(st) = status {
        args.extend(strings(&[
            "--server-status",
            &format!("http://127.0.0.1:{port}{st}"),
        ]));
    }
    args.extend(strings(&["--server-config", &conf.display().to_string()]));
    watch(&mut args, pid);
    tail(&mut args);
    args
}

/// The common tail of every run: JSON, quiet, not saved, watched every 250 ms.
fn tail(args: &mut Vec<String>) {
    args.extend(strings(&[
        "--watch-interval",
        "250ms",
        "-o",
        "json",
        "-q",
        "--no-save",
    ]));
}

fn watch(args: &mut Vec<String>, pid: u32) {
    args.push("--watch".into());
    args.push(pid.to_string());
}

/// One GET on a new connection kept open afterwards (keep-alive): the
/// connection, and whether an answer came within `wait`.
fn idle_client(port: u16, path: &str, wait: Duration) -> Option<(TcpStream, bool)> {
    let mut c =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)).ok()?;
    c.set_read_timeout(Some(wait)).ok()?;
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .ok()?;
    let mut buf = [0u8; 4096];
    let ok = matches!(c.read(&mut buf), Ok(n) if n > 0 && buf[..n].starts_with(b"HTTP/1.1 200"));
    Some((c, ok))
}

/// One GET of a status page on a new connection: the body.
fn get(port: u16, path: &str) -> String {
    let Ok(mut c) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))
    else {
        return String::new();
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(3)));
    let _ = c.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes());
    let mut s = String::new();
    let _ = c.read_to_string(&mut s);
    s
}

// ---- the setups -------------------------------------------------------------

fn apache_prefork_pool() -> Result<Running, StartError> {
    let (p, port, dir, errlog, conf) = start_apache(
        "setup-prefork-pool",
        ApacheSpec {
            mpm: "prefork",
            mpm_lines: prefork(10),
            keepalive: None,
            status: true,
            extra: String::new(),
            wrap: Vec::new(),
        },
    )?;
    let args = run_args(
        port,
        "/cgi-bin/slow.cgi",
        &[
            "--stages",
            "2s:1,2s:5,2s:10,2s:20,2s:40",
            "--step",
            "-t",
            "1",
        ],
        Some("/server-status?auto"),
        &conf,
        p.pid(),
    );
    let mut r = Running::new(args);
    r.pids = vec![p.pid()];
    r.check = Check::Log {
        file: errlog,
        needle: "server reached MaxRequestWorkers setting",
    };
    r.procs.push(p);
    r.dirs.push(dir);
    Ok(r)
}

/// Idle keep-alive clients on `port`: the connections and how many were answered.
fn hold_idle(port: u16, n: usize) -> (Vec<TcpStream>, usize) {
    let mut idle = Vec::new();
    let mut answered = 0;
    for _ in 0..n {
        if let Some((c, ok)) = idle_client(port, "/idx.html", Duration::from_secs(3)) {
            answered += ok as usize;
            idle.push(c);
        }
    }
    (idle, answered)
}

fn apache_prefork_keepalive() -> Result<Running, StartError> {
    let (p, port, dir, errlog, conf) = start_apache(
        "setup-prefork-ka",
        ApacheSpec {
            mpm: "prefork",
            mpm_lines: prefork(10),
            keepalive: Some(15),
            status: true,
            extra: String::new(),
            wrap: Vec::new(),
        },
    )?;
    let mut r = Running::new(Vec::new());
    r.pids = vec![p.pid()];
    r.procs.push(p);
    r.dirs.push(dir);
    let (idle, _) = hold_idle(port, 6);
    r.idle = idle;
    // The scoreboard, read by the setup itself (a free worker answers):
    // the idle clients' workers wait in K (5 s at most for them to show).
    let mut k = 0;
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        let board = get(port, "/server-status?auto");
        k = board
            .lines()
            .find_map(|l| l.strip_prefix("Scoreboard: "))
            .map(|s| s.matches('K').count())
            .unwrap_or(0);
        if k >= 6 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let args = run_args(
        port,
        "/cgi-bin/slow.cgi",
        &[
            "--stages",
            "2s:1,2s:4,2s:10,2s:20",
            "--step",
            "-t",
            "1",
            "--no-keepalive",
        ],
        Some("/server-status?auto"),
        &conf,
        r.pids[0],
    );
    r.args = args;
    r.check = Check::KeepAlive {
        file: errlog,
        needle: "server reached MaxRequestWorkers setting",
        k_before: k,
        idle: 6,
    };
    Ok(r)
}

fn apache_event_keepalive() -> Result<Running, StartError> {
    let (p, port, dir, errlog, conf) = start_apache(
        "setup-event-ka",
        ApacheSpec {
            mpm: "event",
            mpm_lines: "StartServers 1\nServerLimit 1\nThreadLimit 4\nThreadsPerChild 4\nMaxRequestWorkers 4\n\
                        MinSpareThreads 1\nMaxSpareThreads 4"
                .into(),
            keepalive: Some(30),
            status: true,
            extra: String::new(),
            wrap: Vec::new(),
        },
    )?;
    let mut r = Running::new(Vec::new());
    r.pids = vec![p.pid()];
    r.procs.push(p);
    r.dirs.push(dir);
    // Ten idle clients: near event's 12 connections of one 4-thread process
    // (ThreadsPerChild + AsyncRequestWorkerFactor × idle threads), so the slots
    // are mostly held by idle clients and the load still gets a few in.
    let idle_n = 10;
    let (idle, answered) = hold_idle(port, idle_n);
    r.idle = idle;
    let args = run_args(
        port,
        "/cgi-bin/slow.cgi",
        &[
            "--stages",
            "2s:1,2s:4,2s:10,2s:20",
            "--step",
            "-t",
            "1",
            "--no-keepalive",
            "--timeout",
            "5s",
        ],
        Some("/server-status?auto"),
        &conf,
        r.pids[0],
    );
    r.args = args;
    r.check = Check::EventKeepAlive {
        file: errlog,
        idle: idle_n,
        answered,
    };
    Ok(r)
}

fn nginx_worker_connections() -> Result<Running, StartError> {
    let (p, port, dir, conf) = start_nginx(
        "setup-nginx-wc",
        NginxSpec {
            worker_connections: 64,
            server: String::new(),
            http: String::new(),
            pin: None,
            ns: None,
        },
    )?;
    let args = run_args(
        port,
        "/index.html",
        &["--stages", "2s:10,2s:50,2s:150,2s:150", "--step", "-t", "1"],
        Some("/nginx_status"),
        &conf,
        p.pid(),
    );
    let mut r = Running::new(args);
    r.pids = vec![p.pid()];
    r.check = Check::Log {
        file: dir.join("error.log"),
        needle: "worker_connections are not enough",
    };
    r.procs.push(p);
    r.dirs.push(dir);
    Ok(r)
}

fn php_fpm_pool() -> Result<Running, StartError> {
    // pm dynamic: php-fpm logs "server reached pm.max_children setting" only
    // for a dynamic pool (its spare-server maintenance).
    let (fpm, app, stat, fdir, log, fconf) = start_fpm(
        "setup-fpm-pool",
        "pm = dynamic\npm.max_children = 2\npm.start_servers = 1\npm.min_spare_servers = 1\npm.max_spare_servers = 2",
        None,
    )?;
    let mut r = Running::new(Vec::new());
    r.pids = vec![fpm.pid()];
    r.procs.push(fpm);
    r.dirs.push(fdir.clone());
    let (ng, port, ndir, _) = start_nginx(
        "setup-fpm-pool-nginx",
        NginxSpec {
            worker_connections: 1024,
            server: fpm_locations(app, stat, &fdir),
            http: String::new(),
            pin: None,
            ns: None,
        },
    )?;
    r.procs.push(ng);
    r.dirs.push(ndir);
    let args = run_args(
        port,
        "/slow.php",
        &["--stages", "2s:1,2s:2,2s:4,2s:8", "--step", "-t", "1"],
        Some("/status"),
        &fconf,
        r.pids[0],
    );
    r.args = args;
    r.check = Check::Log {
        file: log,
        needle: "server reached pm.max_children setting",
    };
    Ok(r)
}

fn php_fpm_cpu_pinned() -> Result<Running, StartError> {
    if Command::new("taskset").arg("-V").output().is_err() {
        return Err(StartError::Missing("taskset (util-linux)".into()));
    }
    let (fpm, app, stat, fdir, _log, fconf) = start_fpm(
        "setup-fpm-cpu",
        "pm = static\npm.max_children = 8",
        Some("0"),
    )?;
    let master = fpm.pid();
    let mut r = Running::new(Vec::new());
    r.pids = vec![master];
    r.procs.push(fpm);
    r.dirs.push(fdir.clone());
    let (ng, port, ndir, _) = start_nginx(
        "setup-fpm-cpu-nginx",
        NginxSpec {
            worker_connections: 1024,
            server: fpm_locations(app, stat, &fdir),
            http: String::new(),
            // nginx on the other CPU: CPU 0 is the pool's alone.
            pin: Some("1"),
            ns: None,
        },
    )?;
    r.procs.push(ng);
    r.dirs.push(ndir);
    let args = run_args(
        port,
        "/burn.php",
        &["-c", "16", "-d", "8s"],
        Some("/status"),
        &fconf,
        master,
    );
    r.args = args;
    r.check = Check::Pinned { master, cpus: "0" };
    Ok(r)
}

/// A memory cgroup with `limit` bytes (v1 memory controller, else v2).
fn make_memory_cgroup(limit: u64) -> Result<Cgroup, StartError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "redline-setup-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let v1 = Path::new("/sys/fs/cgroup/memory");
    let v2 = Path::new("/sys/fs/cgroup");
    let (dir, is_v2) = if v1.join("memory.limit_in_bytes").exists() {
        (v1.join(&name), false)
    } else if std::fs::read_to_string(v2.join("cgroup.controllers"))
        .is_ok_and(|c| c.split_whitespace().any(|x| x == "memory"))
    {
        let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+memory");
        (v2.join(&name), true)
    } else {
        return Err(StartError::Missing(
            "a cgroup memory controller (v1 or v2)".into(),
        ));
    };
    std::fs::create_dir(&dir)
        .map_err(|e| StartError::Failed(format!("mkdir {}: {e}", dir.display())))?;
    let cg = Cgroup { dir, v2: is_v2 };
    let (file, val) = if is_v2 {
        ("memory.max", limit.to_string())
    } else {
        ("memory.limit_in_bytes", limit.to_string())
    };
    if let Err(e) = std::fs::write(cg.dir.join(file), val) {
        let _ = std::fs::remove_dir(&cg.dir);
        return Err(StartError::Failed(format!("{file}: {e}")));
    }
    if is_v2 {
        let _ = std::fs::write(cg.dir.join("memory.swap.max"), "0");
    }
    Ok(cg)
}

fn apache_cgroup_memory() -> Result<Running, StartError> {
    let cg = make_memory_cgroup(160 * 1024 * 1024)?;
    let procs = cg.dir.join("cgroup.procs").display().to_string();
    let mut r = Running::new(Vec::new());
    // The cgroup is removed on drop, after the processes in it are gone.
    r.cgroup = Some(cg);
    let (p, port, dir, errlog, conf) = start_apache(
        "setup-cgroup-mem",
        ApacheSpec {
            mpm: "prefork",
            mpm_lines: prefork(40),
            keepalive: None,
            status: true,
            extra: String::new(),
            // The shell puts itself in the cgroup, then becomes Apache (same PID).
            wrap: vec![
                "sh".into(),
                "-c".into(),
                format!("echo $$ > {procs} && exec \"$@\""),
                "sh".into(),
            ],
        },
    )?;
    let _ = errlog;
    r.pids = vec![p.pid()];
    r.procs.push(p);
    r.dirs.push(dir);
    let args = run_args(
        port,
        "/cgi-bin/mem.cgi",
        &["-c", "20", "-d", "8s", "-t", "1"],
        Some("/server-status?auto"),
        &conf,
        r.pids[0],
    );
    r.args = args;
    r.check = Check::CgroupOom(Cgroup {
        dir: r.cgroup.as_ref().unwrap().dir.clone(),
        v2: r.cgroup.as_ref().unwrap().v2,
    });
    Ok(r)
}

fn nginx_proxy_slow_backend() -> Result<Running, StartError> {
    let (bp, bport, bdir, berr, _) = start_apache(
        "setup-proxy-backend",
        ApacheSpec {
            mpm: "prefork",
            mpm_lines: prefork(4),
            keepalive: None,
            status: true,
            extra: String::new(),
            wrap: Vec::new(),
        },
    )?;
    let mut r = Running::new(Vec::new());
    r.procs.push(bp);
    r.dirs.push(bdir);
    let (ng, port, ndir, nconf) = start_nginx(
        "setup-proxy-nginx",
        NginxSpec {
            worker_connections: 1024,
            server: format!(" location /cgi-bin/ {{ proxy_pass http://127.0.0.1:{bport}; }}"),
            http: String::new(),
            pin: None,
            ns: None,
        },
    )?;
    r.pids = vec![ng.pid()];
    r.procs.push(ng);
    r.dirs.push(ndir);
    let args = run_args(
        port,
        "/cgi-bin/slow.cgi",
        &["-r", "60", "-c", "100", "-d", "8s"],
        Some("/nginx_status"),
        &nconf,
        r.pids[0],
    );
    r.args = args;
    r.check = Check::Log {
        file: berr,
        needle: "server reached MaxRequestWorkers setting",
    };
    Ok(r)
}

fn listen_backlog() -> Result<Running, StartError> {
    // No status page (so the run cannot read the one busy worker): the
    // backlog is what the run can see.
    let (p, port, dir, _, conf) = start_apache(
        "setup-backlog",
        ApacheSpec {
            mpm: "prefork",
            mpm_lines: "StartServers 1\nMinSpareServers 1\nMaxSpareServers 1\nServerLimit 1\nMaxRequestWorkers 1"
                .into(),
            keepalive: None,
            status: false,
            extra: "ListenBacklog 1".into(),
            wrap: Vec::new(),
        },
    )?;
    // No status page: with one, the run would see the one busy worker.
    let args = run_args(
        port,
        "/cgi-bin/slow1.cgi",
        &["-c", "20", "-t", "1", "-d", "6s"],
        None,
        &conf,
        p.pid(),
    );
    let mut r = Running::new(args);
    r.pids = vec![p.pid()];
    r.check = Check::ListenOverflows;
    r.procs.push(p);
    r.dirs.push(dir);
    Ok(r)
}

fn ip(args: &[&str]) -> Result<(), StartError> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| StartError::Missing(format!("{} (iproute2): {e}", args[0])))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(StartError::Failed(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn shaped_link() -> Result<Running, StartError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    if Command::new("tc").arg("-V").output().is_err()
        || Command::new("ip").arg("-V").output().is_err()
    {
        return Err(StartError::Missing(
            "ip and tc (apt-get install iproute2)".into(),
        ));
    }
    let ns = format!(
        "rl-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    ip(&["ip", "netns", "add", &ns])?;
    let mut r = Running::new(Vec::new());
    r.netns = Some(ns.clone());
    // MTU 1500: tbf drops any packet larger than its burst, and lo's 64 KiB
    // segments are larger than 32 kB.
    ip(&["ip", "-n", &ns, "link", "set", "lo", "mtu", "1500", "up"])?;
    ip(&[
        "ip", "netns", "exec", &ns, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate",
        "16mbit", "burst", "32kb", "latency", "400ms",
    ])?;
    let (p, port, dir, conf) = start_nginx(
        "setup-shaped",
        NginxSpec {
            worker_connections: 1024,
            server: String::new(),
            http: String::new(),
            pin: None,
            ns: Some(ns.clone()),
        },
    )?;
    std::fs::write(dir.join("big.bin"), vec![b'x'; 512 * 1024]).unwrap();
    chmod_readable(&dir);
    r.pids = vec![p.pid()];
    r.procs.push(p);
    r.dirs.push(dir);
    let args = run_args(
        port,
        "/big.bin",
        &["--stages", "2s:1,2s:2,2s:4,2s:8", "--step", "-t", "1"],
        Some("/nginx_status"),
        &conf,
        r.pids[0],
    );
    r.args = args;
    r.prefix = strings(&["ip", "netns", "exec", &ns]);
    r.check = Check::Shaper {
        ns,
        rate_bytes: 16e6 / 8.0,
    };
    Ok(r)
}

fn starved_client() -> Result<Running, StartError> {
    if Command::new("taskset").arg("-V").output().is_err() {
        return Err(StartError::Missing("taskset (util-linux)".into()));
    }
    // SAFETY: sysconf has no preconditions.
    if unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } < 2 {
        return Err(StartError::Missing("a second CPU".into()));
    }
    let (p, port, dir, conf) = start_nginx(
        "setup-starved",
        NginxSpec {
            worker_connections: 1024,
            server: String::new(),
            http: String::new(),
            pin: Some("0"),
            ns: None,
        },
    )?;
    let mut r = Running::new(Vec::new());
    r.pids = vec![p.pid()];
    r.procs.push(p);
    r.dirs.push(dir);
    // The busy process: a shell loop on CPU 1, stopped by its PID on drop.
    let mut busy = Command::new("taskset");
    busy.args(["-c", "1", "sh", "-c", "while :; do :; done"]);
    let busy = spawn(busy, "busy loop", None)?;
    let bpid = busy.pid();
    r.procs.push(busy);
    let args = run_args(
        port,
        "/index.html",
        &["-c", "20", "-d", "6s"],
        Some("/nginx_status"),
        &conf,
        r.pids[0],
    );
    r.args = args;
    r.prefix = strings(&["taskset", "-c", "1"]);
    r.check = Check::Busy { pid: bpid };
    Ok(r)
}

fn nginx_cpu() -> Result<Running, StartError> {
    if Command::new("taskset").arg("-V").output().is_err() {
        return Err(StartError::Missing("taskset (util-linux)".into()));
    }
    let (p, port, dir, conf) = start_nginx(
        "setup-nginx-cpu",
        NginxSpec {
            worker_connections: 1024,
            server: String::new(),
            http: " gzip on; gzip_comp_level 9; gzip_types text/plain; gzip_min_length 0;".into(),
            pin: Some("0"),
            ns: None,
        },
    )?;
    // 1 MiB of words from a fixed pseudo-random sequence: work for gzip -9.
    let words = [
        "worker", "pool", "keep", "alive", "memory", "cgroup", "latency", "backlog", "upstream",
        "shaper", "client", "server", "request", "answer", "limit", "knee",
    ];
    let mut text = String::with_capacity(1 << 20);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while text.len() < 1 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        text.push_str(words[(x % 16) as usize]);
        text.push(if x.is_multiple_of(11) { '\n' } else { ' ' });
        text.push_str(&(x % 1000).to_string());
        text.push(' ');
    }
    std::fs::write(dir.join("big.txt"), text).unwrap();
    chmod_readable(&dir);
    let master = p.pid();
    let mut r = Running::new(Vec::new());
    r.pids = vec![master];
    r.procs.push(p);
    r.dirs.push(dir);
    let args = run_args(
        port,
        "/big.txt",
        &["-H", "Accept-Encoding: gzip", "-c", "8", "-d", "8s"],
        Some("/nginx_status"),
        &conf,
        master,
    );
    r.args = args;
    r.check = Check::CpuBound { master, cpus: "0" };
    Ok(r)
}
