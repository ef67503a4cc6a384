//! Sizing the worker count from measured memory: budget / memory one more
//! worker costs, as the Italian article does with htop's RES column, but with
//! private memory (what another worker really adds) instead of RSS (which
//! counts shared pages in every process), and the shared part counted once.
//!
//! Safe to follow: one worker costs its private memory plus its kernel
//! memory (page tables and kernel stacks, which no per-process figure
//! shows), raised by a [`SAFETY_MARGIN_PERCENT`] margin; the answer is
//! checked against the server's hard limits (Apache's compiled `ServerLimit`
//! ceiling, the open-file and process limits) and the CPU count, and a
//! measurement taken at idle says so. `tune` sizes MaxRequestWorkers with the
//! same function ([`apache_workers`]).

use crate::detect::{Mpm, ServerKind};
use crate::procfs::{Limits, MachineInfo, ProcInfo};
use crate::render::kib;
use redline_stats::watch::HostWatch;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// The margin added to one worker's measured cost, %: a worker touches more
/// pages over its life than at the moment it was measured (a larger request,
/// a fuller cache, a heap that grew and did not shrink), and the kernel's
/// own caches grow with the process count. 10 % keeps the machine off swap
/// when every worker is busy at once.
pub const SAFETY_MARGIN_PERCENT: u64 = 10;

/// Below this peak CPU (% of one CPU) during the measurement the server is
/// taken as idle: its workers had not yet grown to their working size.
pub const IDLE_CPU_PERCENT: f64 = 5.0;

/// More request workers than this per CPU is flagged: memory allows them, but
/// each would get under 0.4 % of a CPU; the queue, not the worker count,
/// then sets the latency (find the real limit with a load test).
pub const MAX_WORKERS_PER_CPU: u64 = 256;

/// Apache's compiled ceiling on `ServerLimit` for prefork (its docs: "a hard
/// limit of ServerLimit 200000 compiled into the server" for prefork).
pub const APACHE_PREFORK_SERVER_LIMIT_MAX: u64 = 200_000;

/// Apache's compiled ceiling on `ServerLimit` for worker and event (20000),
/// also the ceiling on `ThreadLimit`.
pub const APACHE_THREADED_SERVER_LIMIT_MAX: u64 = 20_000;

/// Apache's default `ThreadLimit` (worker, event): `ThreadsPerChild` above it
/// needs `ThreadLimit` set too.
pub const APACHE_DEFAULT_THREAD_LIMIT: u64 = 64;

/// A cost in KiB with the safety margin added (rounded up).
pub fn with_margin(kib: u64) -> u64 {
    kib + (kib * SAFETY_MARGIN_PERCENT).div_ceil(100)
}

/// Apache's worker directives for a memory budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApacheWorkers {
    /// Worker processes the budget allows (before any hard-limit cap).
    pub processes: u64,
    /// `ServerLimit` to set (at least 1, at most the compiled ceiling).
    pub server_limit: u64,
    /// `MaxRequestWorkers`: processes × ThreadsPerChild (prefork: processes),
    /// within the ceiling.
    pub max_request_workers: u64,
    /// True when the budget allowed more than Apache's compiled ceiling.
    pub capped: bool,
}

/// The one MaxRequestWorkers arithmetic (`size` and `tune` both call it):
/// processes = (budget − paid once) / (cost of one process + safety margin);
/// prefork serves one request per process, worker/event `threads_per_child`
/// per process; `ServerLimit` must be at least the process count and is
/// capped at Apache's compiled ceiling.
pub fn apache_workers(
    budget_kib: u64,
    fixed_kib: u64,
    per_process_kib: u64,
    threads_per_child: Option<u64>,
) -> ApacheWorkers {
    let processes = budget_kib.saturating_sub(fixed_kib) / with_margin(per_process_kib.max(1));
    let ceiling = match threads_per_child {
        None => APACHE_PREFORK_SERVER_LIMIT_MAX,
        Some(_) => APACHE_THREADED_SERVER_LIMIT_MAX,
    };
    let procs = processes.min(ceiling);
    ApacheWorkers {
        processes,
        server_limit: procs.max(1),
        max_request_workers: procs * threads_per_child.unwrap_or(1).max(1),
        capped: processes > ceiling,
    }
}

/// The one verdict on a configured `MaxRequestWorkers` against memory, that
/// `tune` prints and `size` computes: it fits when it is at most what
/// [`apache_workers`] allows (the same margin, the same per-process cost).
/// Returns what fits and whether the configured value is above it (never
/// above when the budget allows more than Apache's compiled ceiling).
pub fn apache_fit(
    budget_kib: u64,
    fixed_kib: u64,
    per_process_kib: u64,
    threads_per_child: Option<u64>,
    configured: u64,
) -> (ApacheWorkers, bool) {
    let w = apache_workers(budget_kib, fixed_kib, per_process_kib, threads_per_child);
    let over = !w.capped && configured > w.max_request_workers;
    (w, over)
}

/// True for a process with no memory of its own: a zombie (exited, not yet
/// reaped by its parent: only its PID and exit status remain) or a kernel
/// thread. Such a process is not a worker to average over or size from.
pub fn memoryless(p: &ProcInfo) -> bool {
    p.state == 'Z' || (p.rss_kib == 0 && p.pss_kib == 0 && p.private_kib == 0)
}

/// The processes whose parent is not among them: one per server instance
/// (a server's main process), or several when unrelated servers were
/// watched together (`--watch NGINXPID --watch FPMPID`).
pub fn roots(procs: &[ProcInfo]) -> Vec<&ProcInfo> {
    let pids: HashSet<u32> = procs.iter().map(|p| p.pid).collect();
    procs
        .iter()
        .filter(|p| !pids.contains(&p.ppid) && !memoryless(p))
        .collect()
}

/// The process `pid` and its descendants among `procs` (one instance out of
/// several watched together).
pub fn instance_tree(procs: &[ProcInfo], pid: u32) -> Vec<ProcInfo> {
    if !procs.iter().any(|p| p.pid == pid) {
        return Vec::new();
    }
    let mut keep: HashSet<u32> = HashSet::from([pid]);
    // Parents before children is not guaranteed: repeat until nothing is added
    // (bounded by the process count).
    for _ in 0..procs.len() {
        let before = keep.len();
        for p in procs {
            if keep.contains(&p.ppid) {
                keep.insert(p.pid);
            }
        }
        if keep.len() == before {
            break;
        }
    }
    procs
        .iter()
        .filter(|p| keep.contains(&p.pid))
        .cloned()
        .collect()
}

/// How much memory the web server may use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// A share of MemTotal (0 < f ≤ 1).
    Share(f64),
    /// A size in KiB.
    Kib(u64),
}

/// Parses `50%`, `4GiB`, `512M`, `2G`, `1048576K`, or bytes.
pub fn parse_budget(s: &str) -> Result<Budget, String> {
    let t = s.trim();
    let bad = || {
        format!("--memory-budget {s:?}: give a share of the memory (50%) or a size (4GiB, 512MiB)")
    };
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p.trim().parse().map_err(|_| bad())?;
        if !(v > 0.0 && v <= 100.0) {
            return Err(format!(
                "--memory-budget {s:?}: the share must be above 0% and at most 100%"
            ));
        }
        return Ok(Budget::Share(v / 100.0));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0 / 1024.0,
        "k" | "kb" | "kib" => 1.0,
        "m" | "mb" | "mib" => 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let k = (v * mult).round() as u64;
    if k == 0 {
        return Err(format!(
            "--memory-budget {s:?}: the budget must be above zero"
        ));
    }
    Ok(Budget::Kib(k))
}

/// What the sizing starts from.
#[derive(Debug, Clone)]
pub struct SizeInput {
    /// The watched server's processes (parent and workers).
    pub server: Vec<ProcInfo>,
    /// Every other process on the machine.
    pub others: Vec<ProcInfo>,
    /// The machine.
    pub machine: MachineInfo,
    /// The budget given, if any (default: MemTotal minus other services and a reserve).
    pub budget: Option<Budget>,
    /// The server kind.
    pub kind: ServerKind,
    /// Apache's MPM, when known, and where it was learnt.
    pub mpm: Option<(Mpm, String)>,
    /// ThreadsPerChild from the config (worker/event; default 25).
    pub threads_per_child: Option<u64>,
    /// The machine's CPUs.
    pub cpus: u32,
    /// Evidence lines (e.g. from the error log).
    pub evidence: Vec<String>,
    /// Where the measurements come from when not from `/proc` now (a run record).
    pub source: Option<String>,
    /// The server's peak CPU (% of one CPU) while it was measured, when known:
    /// below [`IDLE_CPU_PERCENT`] the per-worker figure is an idle figure.
    pub load_cpu_percent: Option<f64>,
    /// The workers' resource limits (open files, processes), when known.
    pub limits: Option<Limits>,
}

/// One line of the budget: a name and KiB.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Item {
    /// What it is.
    pub name: String,
    /// KiB.
    pub kib: u64,
}

/// The result of sizing.
#[derive(Debug, Clone, Serialize)]
pub struct SizeReport {
    /// The server kind.
    pub server: String,
    /// Where the measurements come from when not from `/proc` now (a run record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Apache MPM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpm: Option<String>,
    /// The machine's MemTotal, KiB.
    pub mem_total_kib: u64,
    /// Other services' memory subtracted from the budget (largest first; PSS).
    pub others: Vec<Item>,
    /// The memory budget for the server, KiB.
    pub budget_kib: u64,
    /// How the budget was found.
    pub budget_source: String,
    /// Server processes now.
    pub processes: usize,
    /// Worker processes now (the server's processes except its parent).
    pub workers: usize,
    /// Threads in one worker process (Apache worker/event: ThreadsPerChild).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads_per_process: Option<u64>,
    /// The largest worker's private memory, KiB.
    pub per_worker_private_kib: u64,
    /// Its kernel memory (page tables, kernel stacks), KiB.
    pub per_worker_kernel_kib: u64,
    /// What one more worker costs: private + kernel + the safety margin, KiB.
    pub per_worker_cost_kib: u64,
    /// The safety margin in that cost, %.
    pub safety_margin_percent: u64,
    /// Mean private memory of the workers, KiB.
    pub mean_worker_private_kib: u64,
    /// The same worker's PSS, KiB.
    pub per_worker_pss_kib: u64,
    /// The same worker's RSS, KiB.
    pub per_worker_rss_kib: u64,
    /// Paid once whatever the worker count: the parent and shared pages, KiB.
    pub fixed_kib: u64,
    /// The largest worker process count the budget allows.
    pub max_workers: u64,
    /// The directives to set.
    pub directives: Vec<String>,
    /// The arithmetic, line by line.
    pub arithmetic: Vec<String>,
    /// Notes and evidence.
    pub notes: Vec<String>,
}

/// Computes the sizing; Err when there is nothing to size.
pub fn compute(inp: &SizeInput) -> Result<SizeReport, String> {
    if inp.server.is_empty() {
        return Err("no server process found to size".into());
    }
    let total = inp.machine.mem_total_kib;
    if total == 0 {
        return Err("cannot read MemTotal from /proc/meminfo".into());
    }
    // Workers: the processes whose parent is also a server process. Zombies
    // (and anything else without memory) are not workers: counted as 0 KiB
    // they would lower the mean, and they cost nothing to add.
    let pids: HashSet<u32> = inp.server.iter().map(|p| p.pid).collect();
    let zombies = inp.server.iter().filter(|p| memoryless(p)).count();
    let (parents, mut workers): (Vec<&ProcInfo>, Vec<&ProcInfo>) = inp
        .server
        .iter()
        .filter(|p| !memoryless(p))
        .partition(|p| !pids.contains(&p.ppid));
    if parents.is_empty() && workers.is_empty() {
        return Err(format!(
            "the server's {} processes have no memory of their own (zombies): nothing to size",
            inp.server.len()
        ));
    }
    let single = workers.is_empty();
    if single {
        workers = parents.clone();
    }
    let biggest = workers
        .iter()
        .max_by_key(|p| (p.private_kib + p.kernel_kib, p.pid))
        .copied()
        .expect("non-empty");
    let per_worker = biggest.private_kib.max(1);
    let kernel = biggest.kernel_kib;
    let cost = with_margin(per_worker + kernel);
    let mean_private =
        workers.iter().map(|p| p.private_kib).sum::<u64>() / workers.len().max(1) as u64;
    let fixed = if single {
        0
    } else {
        parents
            .iter()
            .map(|p| p.pss_kib + p.kernel_kib)
            .sum::<u64>()
            + workers
                .iter()
                .map(|p| p.pss_kib.saturating_sub(p.private_kib))
                .sum::<u64>()
    };

    // Other services, grouped by name.
    let mut groups: BTreeMap<String, u64> = BTreeMap::new();
    for p in &inp.others {
        *groups.entry(p.comm.clone()).or_insert(0) += p.pss_kib;
    }
    let mut others: Vec<Item> = groups
        .into_iter()
        .map(|(name, kib)| Item { name, kib })
        .collect();
    others.sort_by(|a, b| b.kib.cmp(&a.kib).then(a.name.cmp(&b.name)));
    let mut arithmetic = Vec::new();
    let (budget, source) = match inp.budget {
        Some(Budget::Share(f)) => (
            (total as f64 * f) as u64,
            format!("{:.0}% of MemTotal {}", f * 100.0, kib(total as f64)),
        ),
        Some(Budget::Kib(k)) => (k, "--memory-budget".to_string()),
        None => {
            let others_sum: u64 = others.iter().map(|i| i.kib).sum();
            let reserve = (total / 10).max(64 * 1024).min(total / 4);
            arithmetic.push(format!(
                "budget = MemTotal {} - other processes {} - reserve for kernel and page cache {} = {}",
                kib(total as f64),
                kib(others_sum as f64),
                kib(reserve as f64),
                kib(total.saturating_sub(others_sum + reserve) as f64)
            ));
            (
                total.saturating_sub(others_sum + reserve),
                "MemTotal minus the other processes and a 10% reserve".to_string(),
            )
        }
    };
    let shown_others: Vec<Item> = {
        let min = total / 100;
        let mut v: Vec<Item> = others
            .iter()
            .filter(|i| i.kib >= min)
            .take(8)
            .cloned()
            .collect();
        let rest: u64 =
            others.iter().map(|i| i.kib).sum::<u64>() - v.iter().map(|i| i.kib).sum::<u64>();
        if rest > 0 {
            v.push(Item {
                name: "(all other processes)".into(),
                kib: rest,
            });
        }
        v
    };
    let kernel_note = if kernel > 0 {
        format!(
            "kernel {} (page tables and {} kernel stack{} of {} KiB)",
            kib(kernel as f64),
            biggest.threads.max(1),
            if biggest.threads > 1 { "s" } else { "" },
            crate::procfs::KERNEL_STACK_KIB
        )
    } else {
        "kernel not measured".to_string()
    };
    arithmetic.push(format!(
        "one worker = private {} + {kernel_note} = {}; with the {SAFETY_MARGIN_PERCENT}% safety margin {}",
        kib(per_worker as f64),
        kib((per_worker + kernel) as f64),
        kib(cost as f64)
    ));
    let n = budget.saturating_sub(fixed) / cost;
    arithmetic.push(format!(
        "workers = (budget {} - paid once {} (parent and shared pages)) / {} per worker = {}",
        kib(budget as f64),
        kib(fixed as f64),
        kib(cost as f64),
        n
    ));
    let mut directives = Vec::new();
    let mut threads_per_process = None;
    // Requests served at once, tasks the user runs, connections per process.
    let mut in_flight = n;
    let mut tasks = n + 1;
    let mut per_process_connections: Option<u64> = None;
    let mut notes = inp.evidence.clone();
    if zombies > 0 {
        notes.push(format!(
            "{zombies} zombie process{} (exited, not yet reaped by the server) left out: no memory of {}",
            if zombies == 1 { "" } else { "es" },
            if zombies == 1 { "its own" } else { "their own" }
        ));
    }
    let mpm = inp.mpm.as_ref().map(|(m, _)| *m);
    match inp.kind {
        ServerKind::Apache => match mpm.unwrap_or(Mpm::Prefork) {
            // Apache has no comments after a directive: comments go on their own line.
            Mpm::Prefork => {
                let w = apache_workers(budget, fixed, per_worker + kernel, None);
                in_flight = w.max_request_workers;
                tasks = w.server_limit + 1;
                if w.capped {
                    notes.push(format!(
                        "memory allows {n} processes, above Apache's compiled ceiling for prefork (ServerLimit {APACHE_PREFORK_SERVER_LIMIT_MAX}): capped there"
                    ));
                }
                directives.push("# MaxClients in Apache 2.2".into());
                directives.push(format!("MaxRequestWorkers {}", w.max_request_workers));
                directives.push(format!("ServerLimit       {}", w.server_limit));
            }
            m => {
                let tpc = inp.threads_per_child.unwrap_or(25).max(1);
                let w = apache_workers(budget, fixed, per_worker + kernel, Some(tpc));
                in_flight = w.max_request_workers;
                tasks = w.server_limit * (tpc + 2) + 1;
                per_process_connections = Some(tpc);
                threads_per_process = Some(tpc);
                if w.capped {
                    notes.push(format!(
                        "memory allows {n} processes, above Apache's compiled ceiling for {} (ServerLimit {APACHE_THREADED_SERVER_LIMIT_MAX}): capped there",
                        m.name()
                    ));
                }
                directives.push(format!(
                    "# {} MPM: {} processes of {tpc} threads, {} each with margin",
                    m.name(),
                    w.server_limit,
                    kib(cost as f64)
                ));
                directives.push(format!("ServerLimit       {}", w.server_limit));
                if tpc > APACHE_DEFAULT_THREAD_LIMIT {
                    directives.push(format!("ThreadLimit       {tpc}"));
                }
                if tpc > APACHE_THREADED_SERVER_LIMIT_MAX {
                    notes.push(format!(
                        "ThreadsPerChild {tpc} is above Apache's compiled ThreadLimit ceiling {APACHE_THREADED_SERVER_LIMIT_MAX}: Apache lowers it"
                    ));
                }
                directives.push(format!("ThreadsPerChild   {tpc}"));
                directives.push(format!("MaxRequestWorkers {}", w.max_request_workers));
                arithmetic.push(format!(
                    "MaxRequestWorkers = ServerLimit {} × ThreadsPerChild {tpc} = {} ({} MPM: {} per process)",
                    w.server_limit,
                    w.max_request_workers,
                    m.name(),
                    kib(cost as f64)
                ));
            }
        },
        ServerKind::Nginx => {
            let wp = n.min(inp.cpus as u64).max(1);
            in_flight = 0;
            tasks = wp + 1;
            per_process_connections = Some(1024);
            directives.push(format!(
                "worker_processes  {wp};    # one per CPU ({} CPUs); memory allows {n}",
                inp.cpus
            ));
            directives.push("worker_connections 1024;   # per worker; raise with worker_rlimit_nofile when connections run short".into());
            notes.push(
                "nginx serves many connections per worker: memory rarely limits it; CPUs do."
                    .into(),
            );
        }
        ServerKind::Lighttpd => {
            in_flight = 0;
            tasks = 1;
            directives.push(
                "server.max-worker = 0    # one event-loop process serves all connections".into(),
            );
            directives.push("server.max-connections = 1024    # at most server.max-fds / 2".into());
            notes.push(format!(
                "lighttpd is one process ({} private): memory allows {n} such processes",
                kib(per_worker as f64)
            ));
        }
        ServerKind::PhpFpm => {
            directives.push(format!("pm.max_children = {n}"));
        }
        ServerKind::Other => {
            directives.push(format!("# at most {n} worker processes"));
        }
    }
    if n == 0 {
        notes.push("the budget does not cover even one more worker: give more memory or lower the per-worker cost".into());
    }
    if kernel == 0 {
        notes.push("kernel memory per process (page tables, kernel stacks) is not in this measurement (a record from an older redline): the answer is too high by that much per worker".into());
    }
    if let Some(c) = inp.load_cpu_percent.filter(|c| *c < IDLE_CPU_PERCENT) {
        notes.push(format!(
            "the server was idle while measured (peak CPU {c:.1}% of one CPU): the per-worker figure is an idle figure and a busy worker is larger; size from a run under load (redline run --watch PID …, then redline size --run last)"
        ));
    }
    let cpus = inp.cpus.max(1) as u64;
    if in_flight > MAX_WORKERS_PER_CPU * cpus {
        notes.push(format!(
            "{in_flight} workers for {cpus} CPUs ({} per CPU) is absurd for this machine: memory is not the limit here, CPU is; find where latency turns with a load test (redline find) and set the lower figure",
            in_flight / cpus
        ));
    }
    if let Some(l) = inp.limits {
        if let Some(max) = l.processes.filter(|m| tasks > *m) {
            notes.push(format!(
                "{tasks} processes and threads exceed the workers' user limit of {max} (Max processes, ulimit -u): raise it (LimitNPROC= in the systemd unit) or the server cannot fork them"
            ));
        }
        if let (Some(max), Some(c)) = (l.open_files, per_process_connections) {
            if c > max {
                let how = if inp.kind == ServerKind::Nginx {
                    format!("set worker_rlimit_nofile {} (at least twice worker_connections when proxying)", 2 * c)
                } else {
                    "raise LimitNOFILE= in the systemd unit".to_string()
                };
                notes.push(format!(
                    "{c} connections per process exceed its open-file limit of {max} (Max open files): {how}"
                ));
            }
        }
    }
    Ok(SizeReport {
        server: inp.kind.name().into(),
        source: inp.source.clone(),
        mpm: inp
            .mpm
            .as_ref()
            .map(|(m, src)| format!("{} (from {src})", m.name())),
        mem_total_kib: total,
        others: shown_others,
        budget_kib: budget,
        budget_source: source,
        processes: inp.server.len() - zombies,
        workers: if single { 0 } else { workers.len() },
        threads_per_process,
        per_worker_private_kib: per_worker,
        per_worker_kernel_kib: kernel,
        per_worker_cost_kib: cost,
        safety_margin_percent: SAFETY_MARGIN_PERCENT,
        mean_worker_private_kib: mean_private,
        per_worker_pss_kib: biggest.pss_kib,
        per_worker_rss_kib: biggest.rss_kib,
        fixed_kib: fixed,
        max_workers: n,
        directives,
        arithmetic,
        notes,
    })
}

/// The sizing input from a run's watched data (`redline size --run`/`--from`)
/// instead of live `/proc`: the watched processes one by one at the sample
/// where their private memory added up to the most, and the machine's other
/// processes at that sample. Records from before the per-process snapshot
/// existed are sized from the per-sample totals (the largest process's
/// private memory per worker; the shared part as PSS − private), with a note.
///
/// `instance` (a main PID) sizes only that process and its descendants, for
/// an entry that watched several servers together (`run --watch NGINXPID
/// --watch FPMPID`); without it such an entry is refused with the list of
/// its instances, never sized as one server.
pub fn input_from_watch(
    h: &HostWatch,
    budget: Option<Budget>,
    instance: Option<u32>,
) -> Result<SizeInput, String> {
    let peak = h
        .samples
        .iter()
        .filter(|s| s.processes > 0)
        .max_by_key(|s| s.private_kib);
    let Some(peak) = peak else {
        return Err(format!(
            "the watch of {} on {} saw no process: nothing to size",
            h.targets.join(", "),
            h.host
        ));
    };
    let name = h
        .process_names
        .first()
        .cloned()
        .unwrap_or_else(|| "server".into());
    let mut evidence = Vec::new();
    let server: Vec<ProcInfo> = if h.peak_processes.is_empty() {
        evidence.push(format!(
            "estimated from per-sample totals at t={:.1}s ({} processes): the record has no per-process snapshot (made by an older redline)",
            peak.t, peak.processes
        ));
        estimated_processes(peak, &name)
    } else {
        h.peak_processes
            .iter()
            .map(|p| ProcInfo {
                pid: p.pid,
                ppid: p.ppid,
                comm: p.name.clone(),
                exe: p.name.clone(),
                threads: p.threads,
                rss_kib: p.rss_kib,
                pss_kib: p.pss_kib,
                private_kib: p.private_kib,
                kernel_kib: p.kernel_kib,
                exact: h.pss_exact,
                ..Default::default()
            })
            .collect()
    };
    if !h.pss_exact {
        evidence.push(
            "PSS and private memory were estimated during the watch (smaps_rollup unreadable): run the watch as root or as the server's user".into(),
        );
    }
    let server = match instance {
        Some(pid) if h.peak_processes.is_empty() && h.targets.len() > 1 => {
            return Err(format!(
                "--instance {pid}: this record has no per-process snapshot (made by an older redline), so the {} watched together ({}) cannot be told apart",
                h.targets.len(),
                h.targets.join(", ")
            ))
        }
        Some(pid) if !h.peak_processes.is_empty() => {
            let one = instance_tree(&server, pid);
            if one.is_empty() {
                let list: Vec<String> = roots(&server)
                    .iter()
                    .map(|p| format!("{} (pid {})", p.comm, p.pid))
                    .collect();
                return Err(format!(
                    "--instance {pid}: no process {pid} among the watched processes at their peak; the instances there: {}",
                    list.join(", ")
                ));
            }
            one
        }
        _ => {
            let r = roots(&server);
            if r.len() > 1 {
                let list: Vec<String> = r
                    .iter()
                    .map(|p| format!("{} (pid {})", p.comm, p.pid))
                    .collect();
                return Err(format!(
                    "{} servers were watched together ({}): give one with --instance PID",
                    r.len(),
                    list.join(", ")
                ));
            }
            server
        }
    };
    let others = h
        .peak_others
        .iter()
        .enumerate()
        .map(|(i, o)| ProcInfo {
            pid: u32::MAX - i as u32,
            comm: o.name.clone(),
            pss_kib: o.kib,
            ..Default::default()
        })
        .collect();
    let kind = ServerKind::of_processes(&server);
    let mpm = if kind == ServerKind::Apache {
        crate::detect::mpm_from_threads(&server)
            .map(|(m, src)| (m, format!("{src} in the run record")))
    } else {
        None
    };
    Ok(SizeInput {
        server,
        others,
        machine: MachineInfo {
            mem_total_kib: h.mem_total_kib,
            mem_available_kib: peak.mem_available_kib,
            swap_total_kib: h.swap_total_kib,
            swap_free_kib: peak.swap_free_kib,
            ..Default::default()
        },
        budget,
        kind,
        mpm,
        threads_per_child: None,
        cpus: h.cpus.max(1),
        load_cpu_percent: (h.samples.len() > 1).then_some(h.summary.cpu_percent.peak),
        limits: None,
        evidence,
        source: Some(format!(
            "{}{} on {}, watched from {}: the processes at the sample with the most private memory (t={:.1}s)",
            h.targets.join(", "),
            instance
                .map(|p| format!(" (instance pid {p} and its children)"))
                .unwrap_or_default(),
            h.host,
            h.started_at,
            peak.t
        )),
    })
}

/// Processes standing in for a sample's totals: a parent holding the shared
/// part (PSS − private, paid once), the largest process's private memory as
/// one worker, and the rest of the private memory spread over the others.
fn estimated_processes(s: &redline_stats::watch::WatchSample, name: &str) -> Vec<ProcInfo> {
    let p = |pid: u32, ppid: u32, private: u64, pss: u64| ProcInfo {
        pid,
        ppid,
        comm: name.to_string(),
        exe: name.to_string(),
        threads: 1,
        private_kib: private,
        pss_kib: pss,
        rss_kib: pss,
        ..Default::default()
    };
    if s.processes <= 1 {
        return vec![p(1, 0, s.private_kib, s.pss_kib)];
    }
    let shared = s.pss_kib.saturating_sub(s.private_kib);
    let workers = s.processes as u64 - 1;
    let biggest = s.max_process_private_kib.min(s.private_kib);
    let rest = (s.private_kib - biggest) / (workers - 1).max(1);
    let mut v = vec![p(1, 0, 0, shared)];
    v.push(p(2, 1, biggest, biggest));
    for i in 1..workers {
        v.push(p(2 + i as u32, 1, rest, rest));
    }
    v
}

/// The text form of a sizing.
pub fn render(r: &SizeReport) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "-------- Server ----------------------------------------"
    );
    let _ = writeln!(
        o,
        "[--] {}{}: {} processes ({} workers)",
        r.server,
        r.mpm
            .as_ref()
            .map(|m| format!(", MPM {m}"))
            .unwrap_or_default(),
        r.processes,
        r.workers
    );
    if let Some(src) = &r.source {
        let _ = writeln!(o, "[--] measured: {src}");
    }
    let _ = writeln!(
        o,
        "-------- Memory budget ---------------------------------"
    );
    let _ = writeln!(
        o,
        "[--] MemTotal                {:>12}",
        kib(r.mem_total_kib as f64)
    );
    for i in &r.others {
        let _ = writeln!(o, "[--]   used by {:<16}{:>12}", i.name, kib(i.kib as f64));
    }
    let _ = writeln!(
        o,
        "[--] budget                  {:>12}  ({})",
        kib(r.budget_kib as f64),
        r.budget_source
    );
    match r.threads_per_process {
        Some(t) => {
            let _ = writeln!(
                o,
                "-------- One worker process ({t} threads) --------------"
            );
        }
        None => {
            let _ = writeln!(
                o,
                "-------- One worker ------------------------------------"
            );
        }
    }
    let _ = writeln!(
        o,
        "[--] private {}  (PSS {}, RSS {}; mean private {})",
        kib(r.per_worker_private_kib as f64),
        kib(r.per_worker_pss_kib as f64),
        kib(r.per_worker_rss_kib as f64),
        kib(r.mean_worker_private_kib as f64)
    );
    let _ = writeln!(
        o,
        "[--] kernel  {}  (page tables and kernel stacks: in no per-process figure, added)",
        kib(r.per_worker_kernel_kib as f64)
    );
    let _ = writeln!(
        o,
        "[--] cost    {}  (private + kernel + {}% safety margin)",
        kib(r.per_worker_cost_kib as f64),
        r.safety_margin_percent
    );
    let _ = writeln!(
        o,
        "     RSS counts shared pages in every process; private memory is what one more worker adds."
    );
    let _ = writeln!(
        o,
        "-------- Arithmetic ------------------------------------"
    );
    for a in &r.arithmetic {
        let _ = writeln!(o, "     {a}");
    }
    for n in &r.notes {
        let _ = writeln!(o, "[!!] {n}");
    }
    let _ = writeln!(
        o,
        "-------- Directives ------------------------------------"
    );
    for d in &r.directives {
        let _ = writeln!(o, "    {d}");
    }
    o
}

#[cfg(test)]
mod tests;
