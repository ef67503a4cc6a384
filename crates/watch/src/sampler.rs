//! Sampling the watched processes and the machine over time, on the caller's
//! thread ([`Sampler`]) or on a thread of its own beside a run ([`Watcher`]).
//!
//! The process list is re-read at every sample. CPU counts what each process
//! used since the previous sample plus what its reaped children used
//! (`cutime`/`cstime`), so a CGI child that lived and died between two
//! samples is counted once its parent reaps it. When the server has a cgroup
//! of its own ([`crate::cgroup`]) the process count, CPU and cgroup memory
//! come from the kernel's counters for the whole group instead.

use crate::cgroup::{self, Cgroup};
use crate::procfs::{self, MachineInfo, ProcInfo, Target};
use crate::resources::{self, Pressures};
use redline_stats::watch::{HostWatch, NamedKib, ProcSample, ServerWatch, WatchSample};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The saturation counters of one process at a sample.
#[derive(Debug, Clone, Copy, Default)]
struct Extra {
    delay_ns: Option<u64>,
    faults: u64,
    io: Option<(u64, u64)>,
}

/// Threads read per process for the run-queue delay (a threaded server has
/// tens; a bound keeps one sample short).
const MAX_TASKS: usize = 512;

/// Takes samples of the targets' processes and the machine.
pub struct Sampler {
    root: PathBuf,
    cg_root: PathBuf,
    targets: Vec<Target>,
    start: Instant,
    last_t: f64,
    /// PID → (CPU ticks of it and its reaped children, parent PID) at the last sample.
    last_ticks: HashMap<u32, (u64, u32)>,
    last_cpu_usec: Option<u64>,
    cgroup: Option<Cgroup>,
    cgroup_decided: bool,
    last_swap: Option<(u64, u64)>,
    /// ListenOverflows at the previous sample.
    last_overflows: Option<u64>,
    /// PID → run-queue delay (ns), major faults, block bytes read and
    /// written, at the last sample.
    last_extra: HashMap<u32, Extra>,
    /// PSI at the last sample.
    last_psi: Pressures,
    /// The cgroup's OOM kills, limit hits and throttled µs at the last sample.
    last_cg: (Option<u64>, Option<u64>, Option<u64>),
    /// The union of the server processes' allowed CPUs seen so far.
    cpus_allowed: BTreeSet<u32>,
    ticks_per_s: f64,
    host: HostWatch,
    names: BTreeSet<String>,
    peak_private_kib: Option<u64>,
    /// When the other processes' memory was last read (seconds since the start).
    others_at: Option<f64>,
    /// The processes seen in the latest sample.
    pub last_processes: Vec<ProcInfo>,
    /// The machine as seen in the latest sample.
    pub last_machine: MachineInfo,
}

/// The machine's host name (from `/proc/sys/kernel/hostname`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// Now as RFC 3339 UTC, to the millisecond (a watch's start lines its
/// samples up with the run's clock, see `ServerWatch::windows`).
pub use redline_stats::time::now_rfc3339;

/// Splits targets into what is watched apart: a name matching several
/// instances ([`procfs::instances`]: main processes whose parent is not the
/// same server) gives one group per instance, labelled with its PID, parent
/// and listen addresses; every other target stays in one first group.
pub fn split_instances(
    root: &std::path::Path,
    all: &[ProcInfo],
    targets: &[Target],
) -> Vec<(Vec<Target>, Vec<String>)> {
    let mut common = Vec::new();
    let mut apart = Vec::new();
    for t in targets {
        if let Target::Name(n) = t {
            let inst = procfs::instances(root, all, n);
            if inst.len() > 1 {
                for i in inst {
                    apart.push((
                        vec![Target::Pid(i.pid)],
                        vec![format!("{n} {}", i.describe())],
                    ));
                }
                continue;
            }
        }
        common.push(t.clone());
    }
    let mut v = Vec::new();
    if !common.is_empty() || apart.is_empty() {
        let labels = common.iter().map(Target::label).collect();
        v.push((common, labels));
    }
    v.extend(apart);
    v
}

impl Sampler {
    /// A sampler over `/proc` for these targets.
    pub fn new(targets: Vec<Target>, interval: Duration) -> Sampler {
        Sampler::with_root(procfs::proc_root(), targets, interval)
    }

    /// A sampler over another `/proc` root (tests).
    pub fn with_root(root: PathBuf, targets: Vec<Target>, interval: Duration) -> Sampler {
        let labels: Vec<String> = targets.iter().map(Target::label).collect();
        Sampler::with_labels(root, targets, labels, interval)
    }

    /// A sampler whose record names its targets with `labels`.
    pub fn with_labels(
        root: PathBuf,
        targets: Vec<Target>,
        labels: Vec<String>,
        interval: Duration,
    ) -> Sampler {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        Sampler {
            root,
            cg_root: cgroup::cgroup_root(),
            targets,
            start: Instant::now(),
            last_t: 0.0,
            last_ticks: HashMap::new(),
            last_cpu_usec: None,
            cgroup: None,
            cgroup_decided: false,
            last_swap: None,
            last_overflows: None,
            last_extra: HashMap::new(),
            last_psi: Pressures::default(),
            last_cg: (None, None, None),
            cpus_allowed: BTreeSet::new(),
            ticks_per_s: procfs::clock_ticks() as f64,
            host: HostWatch {
                host: hostname(),
                targets: labels,
                started_at: now_rfc3339(),
                interval_s: interval.as_secs_f64(),
                cpus,
                pss_exact: true,
                ..Default::default()
            },
            names: BTreeSet::new(),
            peak_private_kib: None,
            others_at: None,
            last_processes: Vec::new(),
            last_machine: MachineInfo::default(),
        }
    }

    /// Reads cgroups under another root than `/sys/fs/cgroup` (tests).
    pub fn with_cgroup_root(mut self, root: PathBuf) -> Sampler {
        self.cg_root = root;
        self
    }

    /// Takes one sample and keeps it.
    pub fn sample(&mut self) -> &WatchSample {
        let all = procfs::list_processes(&self.root);
        let m = procfs::machine(&self.root);
        self.sample_from(&all, m)
    }

    /// The server's own cgroup, decided at the first sample that finds its
    /// processes: a systemd unit's, or the cgroup of its main process when
    /// every process in it is the server's.
    fn decide_cgroup(&mut self, chosen: &[ProcInfo]) {
        self.cgroup_decided = true;
        if let Some(Target::Unit(u)) = self.targets.iter().find(|t| matches!(t, Target::Unit(_))) {
            self.cgroup = cgroup::of_unit(&self.cg_root, u);
        } else {
            let pids: HashSet<u32> = chosen.iter().map(|p| p.pid).collect();
            let tops: Vec<u32> = chosen
                .iter()
                .filter(|p| !pids.contains(&p.ppid))
                .map(|p| p.pid)
                .collect();
            let read = |pid: u32| {
                std::fs::read_to_string(self.root.join(pid.to_string()).join("cgroup"))
                    .unwrap_or_default()
            };
            let Some(top) = tops.first() else {
                return;
            };
            let first = read(*top);
            if first.is_empty() || tops.iter().any(|t| read(*t) != first) {
                return;
            }
            let mut c = Cgroup::of(&self.cg_root, &cgroup::parse_membership(&first));
            let root = self.root.clone();
            c.keep_own(&pids, &|p| cgroup::ppid_of(&root, p));
            if !c.is_empty() {
                self.cgroup = Some(c);
            }
        }
        self.host.cgroup = self.cgroup.as_ref().map(|c| c.label.clone());
    }

    /// Takes one sample from a process list ([`procfs::list_processes`]: no
    /// memory read yet) and machine read by the caller (several samplers
    /// share one listing). Memory is read for the chosen processes only
    /// (those gone meanwhile are skipped), and for the others when the
    /// server's memory reaches a new peak (at most every 2 s): a listing
    /// stays fast on a busy machine, so samples stay on their interval.
    pub fn sample_from(&mut self, all: &[ProcInfo], m: MachineInfo) -> &WatchSample {
        let t = self.start.elapsed().as_secs_f64();
        let targets = if self.targets.iter().any(|t| matches!(t, Target::Unit(_))) {
            cgroup::expand_units(&self.cg_root, &self.targets)
        } else {
            self.targets.clone()
        };
        let chosen: Vec<ProcInfo> = procfs::select(all, &targets)
            .into_iter()
            .filter_map(|p| procfs::read_memory(&self.root, p.clone()))
            .collect();
        if !self.cgroup_decided && !chosen.is_empty() {
            self.decide_cgroup(&chosen);
        }
        let reading = self.cgroup.as_ref().map(Cgroup::read).unwrap_or_default();
        let (psi, from_cgroup) = resources::pressures(
            &self.root,
            self.cgroup.as_ref().and_then(|c| c.v2.as_deref()),
        );
        self.host.psi_source = Some(if from_cgroup { "cgroup" } else { "machine" }.into());
        let dt = t - self.last_t;
        let first = self.host.samples.is_empty();
        let mut s = WatchSample {
            t,
            processes: reading.processes.unwrap_or(chosen.len() as u64) as u32,
            load1: m.load[0],
            mem_available_kib: m.mem_available_kib,
            swap_free_kib: m.swap_free_kib,
            cgroup_memory_kib: reading.memory_kib,
            ..Default::default()
        };
        let mut ticks = HashMap::new();
        let mut used_ticks = 0u64;
        let mut extra = HashMap::new();
        let mut busiest_ticks = 0u64;
        let mut delay_ns: Option<u64> = None;
        let mut faults = 0u64;
        let mut io: Option<(u64, u64)> = None;
        for p in &chosen {
            s.rss_kib += p.rss_kib;
            s.pss_kib += p.pss_kib;
            s.private_kib += p.private_kib;
            s.max_process_rss_kib = s.max_process_rss_kib.max(p.rss_kib);
            s.max_process_pss_kib = s.max_process_pss_kib.max(p.pss_kib);
            s.max_process_private_kib = s.max_process_private_kib.max(p.private_kib);
            if !p.exact {
                self.host.pss_exact = false;
            }
            // A process new since the last sample counts from zero: its CPU
            // before we saw it is unknown, so only the first sample is 0.
            let total = p.cpu_ticks + p.child_ticks;
            let before = match self.last_ticks.get(&p.pid) {
                Some((b, _)) => *b,
                None if first => total,
                None => 0,
            };
            used_ticks += total.saturating_sub(before);
            busiest_ticks = busiest_ticks.max(total.saturating_sub(before));
            ticks.insert(p.pid, (total, p.ppid));
            self.names.insert(p.comm.clone());
            if let Some(c) = resources::cpus_allowed(&self.root, p.pid) {
                self.cpus_allowed.extend(c);
            }
            let now = Extra {
                delay_ns: resources::run_delay_ns(&self.root, p.pid, MAX_TASKS),
                faults: p.major_faults,
                io: resources::proc_io(&self.root, p.pid),
            };
            // As with CPU: a process new since the last sample counts from zero.
            let was = match self.last_extra.get(&p.pid) {
                Some(e) => *e,
                None if first => now,
                None => Extra {
                    delay_ns: now.delay_ns.map(|_| 0),
                    faults: 0,
                    io: now.io.map(|_| (0, 0)),
                },
            };
            if let (Some(a), Some(b)) = (now.delay_ns, was.delay_ns) {
                delay_ns = Some(delay_ns.unwrap_or(0) + a.saturating_sub(b));
            }
            faults += now.faults.saturating_sub(was.faults);
            if let (Some(a), Some(b)) = (now.io, was.io) {
                let (r, w) = io.unwrap_or((0, 0));
                io = Some((r + a.0.saturating_sub(b.0), w + a.1.saturating_sub(b.1)));
            }
            extra.insert(p.pid, now);
        }
        // A process gone since the last sample was reaped by its parent,
        // whose children's CPU now holds all of it: what was already counted
        // for it is not counted twice.
        for (pid, (seen, ppid)) in &self.last_ticks {
            if !ticks.contains_key(pid) && ticks.contains_key(ppid) {
                used_ticks = used_ticks.saturating_sub(*seen);
            }
        }
        if !first && dt > 0.0 {
            s.cpu_percent = match (reading.cpu_usec, self.last_cpu_usec) {
                (Some(now), Some(before)) => now.saturating_sub(before) as f64 / 1e6 / dt * 100.0,
                _ => used_ticks as f64 / self.ticks_per_s / dt * 100.0,
            };
            if let Some((i, o)) = self.last_swap {
                s.swap_in_per_s = m.pswpin.saturating_sub(i) as f64 / dt;
                s.swap_out_per_s = m.pswpout.saturating_sub(o) as f64 / dt;
            }
            if let (Some(now), Some(before)) = (m.listen_overflows, self.last_overflows) {
                s.listen_overflows = now.saturating_sub(before);
            }
            s.run_delay_per_s = delay_ns.map(|ns| ns as f64 / 1e9 / dt);
            s.busiest_process_cpu = Some(busiest_ticks as f64 / self.ticks_per_s / dt * 100.0);
            s.major_faults_per_s = Some(faults as f64 / dt);
            s.io_read_per_s = io.map(|(r, _)| r as f64 / dt);
            s.io_write_per_s = io.map(|(_, w)| w as f64 / dt);
            let pct = |b: Option<u64>, n: Option<u64>| resources::stall_percent(b, n, dt);
            let (lp, p) = (&self.last_psi, &psi);
            s.psi_cpu = pct(lp.cpu.map(|x| x.some_us), p.cpu.map(|x| x.some_us));
            s.psi_memory = pct(lp.memory.map(|x| x.some_us), p.memory.map(|x| x.some_us));
            s.psi_memory_full = pct(
                lp.memory.and_then(|x| x.full_us),
                p.memory.and_then(|x| x.full_us),
            );
            s.psi_io = pct(lp.io.map(|x| x.some_us), p.io.map(|x| x.some_us));
            s.psi_io_full = pct(lp.io.and_then(|x| x.full_us), p.io.and_then(|x| x.full_us));
            let delta = |b: Option<u64>, n: Option<u64>| match (b, n) {
                (Some(b), Some(n)) => n.saturating_sub(b),
                _ => 0,
            };
            s.oom_kills = delta(self.last_cg.0, reading.oom_kills);
            s.memory_limit_hits = delta(self.last_cg.1, reading.limit_hits);
            if let (Some(b), Some(n)) = (self.last_cg.2, reading.throttled_usec) {
                s.throttled_per_s = Some(n.saturating_sub(b) as f64 / 1e6 / dt);
            }
        }
        self.last_psi = psi;
        self.last_cg = (
            reading.oom_kills,
            reading.limit_hits,
            reading.throttled_usec,
        );
        self.last_extra = extra;
        if !self.cpus_allowed.is_empty() {
            let v: Vec<u32> = self.cpus_allowed.iter().copied().collect();
            self.host.cpus_allowed = Some(resources::format_cpu_list(&v));
        }
        if reading.cpu_quota.is_some() {
            self.host.cpu_quota = reading.cpu_quota;
        }
        if reading.memory_limit_kib.is_some() {
            self.host.cgroup_memory_limit_kib = reading.memory_limit_kib;
        }
        self.last_cpu_usec = reading.cpu_usec;
        if let Some(pk) = reading.memory_peak_kib {
            self.host.cgroup_memory_peak_kib =
                Some(pk.max(self.host.cgroup_memory_peak_kib.unwrap_or(0)));
        }
        if let Some(pk) = reading.tasks_peak {
            self.host.cgroup_tasks_peak = Some(pk.max(self.host.cgroup_tasks_peak.unwrap_or(0)));
        }
        if self.peak_private_kib.is_none_or(|p| s.private_kib > p) && !chosen.is_empty() {
            self.peak_private_kib = Some(s.private_kib);
            self.host.peak_processes = chosen.iter().map(proc_sample).collect();
            if self.others_at.is_none_or(|at| t - at >= 2.0) {
                self.others_at = Some(t);
                let mine: HashSet<u32> = chosen.iter().map(|p| p.pid).collect();
                let others: Vec<ProcInfo> = all
                    .iter()
                    .filter(|p| !mine.contains(&p.pid))
                    .filter_map(|p| procfs::read_memory(&self.root, p.clone()))
                    .collect();
                self.host.peak_others = others_by_name(&others, &chosen, m.mem_total_kib);
            }
        }
        self.last_swap = Some((m.pswpin, m.pswpout));
        self.last_overflows = m.listen_overflows;
        self.last_ticks = ticks;
        self.last_t = t;
        self.host.mem_total_kib = m.mem_total_kib;
        self.host.swap_total_kib = m.swap_total_kib;
        self.last_processes = chosen;
        self.last_machine = m;
        self.host.samples.push(s);
        self.host.samples.last().expect("just pushed")
    }

    /// The watch so far, summarized.
    pub fn finish(mut self) -> ServerWatch {
        self.host.process_names = self.names.into_iter().collect();
        self.host.summarize();
        ServerWatch {
            targets: self.host.targets.clone(),
            hosts: vec![self.host],
        }
    }
}

fn proc_sample(p: &ProcInfo) -> ProcSample {
    ProcSample {
        pid: p.pid,
        ppid: p.ppid,
        name: p.comm.clone(),
        threads: p.threads,
        rss_kib: p.rss_kib,
        pss_kib: p.pss_kib,
        private_kib: p.private_kib,
        kernel_kib: p.kernel_kib,
    }
}

/// The processes not chosen (nor redline itself), PSS summed by name: the
/// groups of at least 1 % of MemTotal (at most 8), largest first, then the
/// rest as "(all other processes)".
pub fn others_by_name(all: &[ProcInfo], chosen: &[ProcInfo], mem_total_kib: u64) -> Vec<NamedKib> {
    let mine: HashSet<u32> = chosen.iter().map(|p| p.pid).collect();
    let me = std::process::id();
    let mut groups: BTreeMap<&str, u64> = BTreeMap::new();
    for p in all.iter().filter(|p| !mine.contains(&p.pid) && p.pid != me) {
        *groups.entry(p.comm.as_str()).or_insert(0) += p.pss_kib;
    }
    let mut v: Vec<NamedKib> = groups
        .into_iter()
        .map(|(name, kib)| NamedKib {
            name: name.to_string(),
            kib,
        })
        .collect();
    v.sort_by(|a, b| b.kib.cmp(&a.kib).then(a.name.cmp(&b.name)));
    let total: u64 = v.iter().map(|i| i.kib).sum();
    v.retain(|i| i.kib >= mem_total_kib / 100);
    v.truncate(8);
    let rest = total - v.iter().map(|i| i.kib).sum::<u64>();
    if rest > 0 {
        v.push(NamedKib {
            name: "(all other processes)".into(),
            kib: rest,
        });
    }
    v
}

/// A sampler on its own thread, taking a sample every interval until stopped.
pub struct Watcher {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<ServerWatch>,
}

impl Watcher {
    /// Starts sampling now (one sample at once, then every `interval`, at most
    /// `max_samples` kept so memory stays bounded: 24 h at 500 ms is 172,800).
    /// Returns once the first sample is taken (at most 10 s): it is the
    /// baseline CPU is counted from, so the load must not start before it.
    /// A name matching several instances is watched as one host entry per
    /// instance ([`split_instances`]); `/proc` is listed once per sample for all.
    pub fn start(targets: Vec<Target>, interval: Duration) -> Watcher {
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("redline-watch".into())
            .spawn(move || {
                let root = procfs::proc_root();
                let all = procfs::list_processes(&root);
                let mut samplers: Vec<Sampler> = split_instances(&root, &all, &targets)
                    .into_iter()
                    .map(|(t, labels)| Sampler::with_labels(root.clone(), t, labels, interval))
                    .collect();
                let tick = |samplers: &mut Vec<Sampler>| {
                    let all = procfs::list_processes(&root);
                    let m = procfs::machine(&root);
                    for s in samplers.iter_mut() {
                        s.sample_from(&all, m.clone());
                    }
                };
                let max_samples = 200_000;
                for i in 0..max_samples {
                    tick(&mut samplers);
                    if i == 0 {
                        let _ = ready_tx.send(());
                    }
                    match rx.recv_timeout(interval) {
                        Err(mpsc::RecvTimeoutError::Timeout) => continue,
                        _ => break,
                    }
                }
                // The last sample marks the end of the run.
                tick(&mut samplers);
                let mut w = ServerWatch::default();
                for s in samplers {
                    w.merge(&s.finish());
                }
                w
            })
            .expect("spawn the watch thread");
        let _ = ready_rx.recv_timeout(Duration::from_secs(10));
        Watcher { stop: tx, thread }
    }

    /// Stops sampling and returns what was seen.
    pub fn stop(self) -> ServerWatch {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}
