//! What was seen of the server's processes and machine during a run (`--watch`,
//! or `redline watch` on the server's own machine): a time series of samples
//! per host, and a peak/mean summary. Memory is in KiB, as `/proc` gives it.
//!
//! RSS counts shared pages once per process, so the sum of RSS over a forking
//! server's processes overstates its memory; PSS splits shared pages among the
//! processes that map them (the sum is the real total); private memory is what
//! one more process would cost. All three are kept side by side.

use serde::{Deserialize, Serialize};

mod diagnose;
pub mod evidence;
mod status;
#[cfg(test)]
use diagnose::is_loopback;
pub use diagnose::{
    client_limits, diagnose, diagnose_with, server_held, trouble, Diagnosis, BLOWUP_MIN_US,
    BLOWUP_RATIO, CLIENT_LIMIT_CODES, KEEPALIVE_SHARE, LINK_SHARE, LOOPBACK_CEILING_BYTES,
};
pub use status::{StatusFailure, StatusSample, StatusWatch, StatusWindow, MAX_FAILURES};

/// Samples of the watched server processes and the machine(s) during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerWatch {
    /// What was asked to be watched (PIDs or process names), over all hosts.
    pub targets: Vec<String>,
    /// One entry per watched machine (two after merging a remote `redline watch` record).
    pub hosts: Vec<HostWatch>,
}

/// What one machine's watcher saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HostWatch {
    /// The machine's host name.
    pub host: String,
    /// What was watched there (PIDs or process names).
    pub targets: Vec<String>,
    /// When sampling started (RFC 3339, UTC), to line it up with a run.
    pub started_at: String,
    /// Seconds between samples.
    pub interval_s: f64,
    /// CPUs of the machine (CPU % is of one CPU, so a busy machine shows `cpus × 100`).
    pub cpus: u32,
    /// The machine's MemTotal.
    pub mem_total_kib: u64,
    /// The machine's SwapTotal.
    pub swap_total_kib: u64,
    /// True when PSS and private memory came from `smaps_rollup` for every process;
    /// false when some had to be estimated from `statm` (other users' processes
    /// without root), in which case PSS is RSS and private is RSS minus shared.
    pub pss_exact: bool,
    /// Process names seen among the watched processes (e.g. `apache2`).
    pub process_names: Vec<String>,
    /// The samples, oldest first.
    pub samples: Vec<WatchSample>,
    /// Peak and mean of each sampled quantity.
    pub summary: WatchSummary,
    /// The watched processes one by one at the sample where their private
    /// memory added up to the most (what `redline size --run` sizes from).
    /// Empty in records from before this field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peak_processes: Vec<ProcSample>,
    /// The machine's other processes at that same sample, PSS grouped by
    /// name, largest first (the big ones, then "(all other processes)").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peak_others: Vec<NamedKib>,
    /// The server's own cgroup, when it has one (`v2 /system.slice/apache2.service`,
    /// `v1 pids:/x, …`): the process count, CPU and `cgroup_memory_kib` of the
    /// samples then come from it, short-lived children included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// The most memory the cgroup ever had charged (`memory.peak`,
    /// `memory.max_usage_in_bytes`: since it was created), KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_memory_peak_kib: Option<u64>,
    /// The most tasks (processes and threads) the cgroup ever held (`pids.peak`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_tasks_peak: Option<u64>,
    /// The CPUs the server's processes may run on (the union of their
    /// affinities, which a cpuset narrows), e.g. `0` or `0-3`: not the
    /// watcher's own CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_allowed: Option<String>,
    /// The server cgroup's CPU quota, in CPUs (cgroup v2 `cpu.max`, v1
    /// `cpu.cfs_quota_us` / `cpu.cfs_period_us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<f64>,
    /// The server cgroup's memory limit, KiB (v2 `memory.max`, else
    /// `memory.high`; v1 `memory.limit_in_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_memory_limit_kib: Option<u64>,
    /// Where the samples' pressure (PSI) figures come from: `cgroup` (the
    /// server's own cgroup v2 `*.pressure`) or `machine` (`/proc/pressure`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_source: Option<String>,
}

impl HostWatch {
    /// The CPUs the server could use: the count of [`HostWatch::cpus_allowed`],
    /// lowered by a CPU quota, else the machine's CPUs (records from before
    /// they were measured).
    pub fn cpu_capacity(&self) -> f64 {
        let allowed = self
            .cpus_allowed
            .as_deref()
            .and_then(cpu_list_len)
            .filter(|n| *n > 0)
            .map(|n| n as f64)
            .unwrap_or(self.cpus.max(1) as f64);
        match self.cpu_quota {
            Some(q) if q > 0.0 => allowed.min(q),
            _ => allowed,
        }
    }
}

/// How many CPUs a list such as `0-3,6` names (None: malformed).
pub fn cpu_list_len(list: &str) -> Option<u32> {
    parse_cpu_list(list).map(|v| v.len() as u32)
}

/// The CPUs of a list such as `0-3,6,8-9` (the kernel's `Cpus_allowed_list`,
/// `cpuset.cpus`), sorted, each once; None for a malformed list. At most
/// 65,536 CPUs.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut v = Vec::new();
    for part in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
            None => {
                let a = part.parse::<u32>().ok()?;
                (a, a)
            }
        };
        if b < a || b >= 65_536 {
            return None;
        }
        v.extend(a..=b);
    }
    v.sort_unstable();
    v.dedup();
    Some(v)
}

/// Writes CPUs back as a compact list (`0-3,6`).
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// One watched process as seen in one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ProcSample {
    /// Process id.
    pub pid: u32,
    /// Parent process id (a worker's parent is the server's main process).
    pub ppid: u32,
    /// `comm` (e.g. `apache2`).
    pub name: String,
    /// Threads in the process (more than one: a threaded MPM).
    pub threads: u32,
    /// RSS, KiB.
    pub rss_kib: u64,
    /// PSS, KiB.
    pub pss_kib: u64,
    /// Private memory, KiB.
    pub private_kib: u64,
    /// Kernel memory of the process: page tables and kernel stacks, KiB
    /// (0 in records from before it was measured).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kernel_kib: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A name and a size in KiB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct NamedKib {
    /// What it is (a process name).
    pub name: String,
    /// KiB.
    pub kib: u64,
}

/// One sample of the watched processes and the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WatchSample {
    /// Seconds since sampling started.
    pub t: f64,
    /// Watched processes alive (including children).
    pub processes: u32,
    /// Sum of RSS over the processes (shared pages counted once per process).
    pub rss_kib: u64,
    /// Sum of PSS over the processes (shared pages split: the real total).
    pub pss_kib: u64,
    /// Sum of private memory (Private_Clean + Private_Dirty).
    pub private_kib: u64,
    /// Largest RSS of one process.
    pub max_process_rss_kib: u64,
    /// Largest PSS of one process.
    pub max_process_pss_kib: u64,
    /// Largest private memory of one process.
    pub max_process_private_kib: u64,
    /// CPU used by the processes since the previous sample, in % of one CPU.
    pub cpu_percent: f64,
    /// The machine's 1-minute load average.
    pub load1: f64,
    /// The machine's MemAvailable.
    pub mem_available_kib: u64,
    /// The machine's free swap.
    pub swap_free_kib: u64,
    /// Pages swapped in per second since the previous sample.
    pub swap_in_per_s: f64,
    /// Pages swapped out per second since the previous sample.
    pub swap_out_per_s: f64,
    /// Memory charged to the server's own cgroup (page cache included), KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_memory_kib: Option<u64>,
    /// Connection attempts the machine's listening sockets dropped for a
    /// full accept queue since the previous sample (TcpExt ListenOverflows).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub listen_overflows: u64,
    /// Seconds per second the server's threads waited on a run queue, ready
    /// to run with no CPU free for them (`/proc/PID/task/*/schedstat`),
    /// summed over its threads: 1.0 is one thread waiting all the time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay_per_s: Option<f64>,
    /// Seconds per second the server's cgroup was held back by its CPU quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_per_s: Option<f64>,
    /// PSI `cpu some`: % of the interval some task waited for a CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_cpu: Option<f64>,
    /// PSI `memory some`: % of the interval some task stalled on memory
    /// (reclaim, swap-in, refaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_memory: Option<f64>,
    /// PSI `memory full`: % of the interval every task stalled on memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_memory_full: Option<f64>,
    /// PSI `io some`: % of the interval some task waited for block I/O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_io: Option<f64>,
    /// PSI `io full`: % of the interval every task waited for block I/O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_io_full: Option<f64>,
    /// Major page faults (pages read back from disk or swap) of the server's
    /// processes and their reaped children, per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults_per_s: Option<f64>,
    /// Bytes per second the server's processes had the block layer read
    /// (`/proc/PID/io` `read_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_read_per_s: Option<f64>,
    /// Bytes per second the server's processes had the block layer write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_write_per_s: Option<f64>,
    /// Processes the OOM killer killed in the server's cgroup since the
    /// previous sample.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub oom_kills: u64,
    /// Times the server's cgroup hit its memory limit since the previous sample.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub memory_limit_hits: u64,
    /// CPU of the busiest single server process since the previous sample,
    /// % of one CPU (an event-loop worker at 100 % is saturated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_process_cpu: Option<f64>,
}

/// Peak and mean of one quantity over the samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct PeakMean {
    /// The largest value.
    pub peak: f64,
    /// The mean over the samples.
    pub mean: f64,
}

impl PeakMean {
    /// Peak and mean of values (zero for none).
    pub fn of(values: impl IntoIterator<Item = f64>) -> PeakMean {
        let (mut n, mut sum, mut peak) = (0u64, 0.0, f64::MIN);
        for v in values {
            n += 1;
            sum += v;
            peak = peak.max(v);
        }
        if n == 0 {
            PeakMean::default()
        } else {
            PeakMean {
                peak,
                mean: sum / n as f64,
            }
        }
    }
}

/// The summary of a host's samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WatchSummary {
    /// Number of samples.
    pub samples: u32,
    /// Watched processes.
    pub processes: PeakMean,
    /// Total RSS, KiB.
    pub rss_kib: PeakMean,
    /// Total PSS, KiB.
    pub pss_kib: PeakMean,
    /// Total private memory, KiB.
    pub private_kib: PeakMean,
    /// Private memory per process (total / processes), KiB.
    pub private_per_process_kib: PeakMean,
    /// PSS per process (total / processes), KiB.
    pub pss_per_process_kib: PeakMean,
    /// RSS per process (total / processes), KiB.
    pub rss_per_process_kib: PeakMean,
    /// CPU, % of one CPU.
    pub cpu_percent: PeakMean,
    /// 1-minute load average.
    pub load1: PeakMean,
    /// Lowest MemAvailable seen, KiB.
    pub min_mem_available_kib: u64,
    /// Pages swapped in during the watch.
    pub swapped_in_pages: u64,
    /// Pages swapped out during the watch.
    pub swapped_out_pages: u64,
    /// Memory charged to the server's cgroup, KiB (when it has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_memory_kib: Option<PeakMean>,
}

/// Peak and mean of the quantities in `s`. `cpu_from` is the index from which
/// a sample's CPU (and swap rate) counts: the first sample of a watch has no
/// interval before it, so its CPU is not a measurement.
fn summarize_samples(s: &[WatchSample], cpu_from: usize) -> WatchSummary {
    let per = |f: fn(&WatchSample) -> u64| {
        PeakMean::of(
            s.iter()
                .filter(|x| x.processes > 0)
                .map(move |x| f(x) as f64 / x.processes as f64),
        )
    };
    let mut swapped_in = 0.0;
    let mut swapped_out = 0.0;
    for w in s.windows(2) {
        let dt = (w[1].t - w[0].t).max(0.0);
        swapped_in += w[1].swap_in_per_s * dt;
        swapped_out += w[1].swap_out_per_s * dt;
    }
    WatchSummary {
        samples: s.len() as u32,
        processes: PeakMean::of(s.iter().map(|x| x.processes as f64)),
        rss_kib: PeakMean::of(s.iter().map(|x| x.rss_kib as f64)),
        pss_kib: PeakMean::of(s.iter().map(|x| x.pss_kib as f64)),
        private_kib: PeakMean::of(s.iter().map(|x| x.private_kib as f64)),
        private_per_process_kib: per(|x| x.private_kib),
        pss_per_process_kib: per(|x| x.pss_kib),
        rss_per_process_kib: per(|x| x.rss_kib),
        cpu_percent: PeakMean::of(s.iter().skip(cpu_from).map(|x| x.cpu_percent)),
        load1: PeakMean::of(s.iter().map(|x| x.load1)),
        min_mem_available_kib: s.iter().map(|x| x.mem_available_kib).min().unwrap_or(0),
        swapped_in_pages: swapped_in.round() as u64,
        swapped_out_pages: swapped_out.round() as u64,
        cgroup_memory_kib: s.iter().any(|x| x.cgroup_memory_kib.is_some()).then(|| {
            PeakMean::of(
                s.iter()
                    .filter_map(|x| x.cgroup_memory_kib.map(|k| k as f64)),
            )
        }),
    }
}

impl HostWatch {
    /// Recomputes `summary` from `samples`.
    pub fn summarize(&mut self) {
        self.summary = summarize_samples(&self.samples, 1);
    }

    /// Peak and mean over the samples taken in `[t0_s, t1_s]` (seconds since
    /// this host's sampling started). CPU and swap of a sample cover the
    /// interval that ends at it, so they count for the window the sample is
    /// in; swap pages are counted between consecutive samples of the window.
    /// An empty or inverted window gives an all-zero summary.
    pub fn window(&self, t0_s: f64, t1_s: f64) -> WatchSummary {
        if t1_s.is_nan() || t0_s.is_nan() || t1_s < t0_s {
            return WatchSummary::default();
        }
        let first = self.samples.partition_point(|x| x.t < t0_s);
        let end = self.samples.partition_point(|x| x.t <= t1_s);
        if first >= end {
            return WatchSummary::default();
        }
        let cpu_from = usize::from(first == 0);
        let mut w = summarize_samples(&self.samples[first..end], cpu_from);
        // The first sample in the window also carries the swap of the
        // interval before it, which ends inside the window.
        if first > 0 {
            let (a, b) = (&self.samples[first - 1], &self.samples[first]);
            let dt = (b.t - a.t).max(0.0);
            w.swapped_in_pages += (b.swap_in_per_s * dt).round() as u64;
            w.swapped_out_pages += (b.swap_out_per_s * dt).round() as u64;
        }
        w
    }

    /// True when the machine swapped during the watch.
    pub fn swapped(&self) -> bool {
        self.summary.swapped_in_pages > 0
            || self.summary.swapped_out_pages > 0
            || self
                .samples
                .iter()
                .any(|s| s.swap_in_per_s > 0.0 || s.swap_out_per_s > 0.0)
    }

    /// True when MemAvailable fell under 10 % of MemTotal during the watch.
    pub fn memory_low(&self) -> bool {
        self.mem_total_kib > 0
            && !self.samples.is_empty()
            && self.summary.min_mem_available_kib * 10 < self.mem_total_kib
    }
}

/// One watched host over one window of a run (a stage): the same figures as
/// [`HostWatch::summary`], from the samples taken inside the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HostWindow {
    /// The host's name (as in `server_watch.hosts`, same order).
    pub host: String,
    /// What was watched there.
    pub targets: Vec<String>,
    /// When this host's sampling started, in seconds after the run started
    /// (negative: before it); its sample times are shifted by this.
    pub offset_s: f64,
    /// Peak and mean over the host's samples inside the window.
    pub summary: WatchSummary,
}

impl HostWatch {
    /// Seconds from `run_started_at` to this host's `started_at` (both RFC
    /// 3339); 0 when either is unreadable. Watches recorded before their start
    /// carried milliseconds have a whole-second stamp: within a second of the
    /// run it is taken as the run's own start (the local `--watch` starts
    /// just before the load), not as up to a second early.
    pub fn offset_from(&self, run_started_at: &str) -> f64 {
        match (
            crate::time::parse_rfc3339_ms(&self.started_at),
            crate::time::parse_rfc3339_ms(run_started_at),
        ) {
            (Some(h), Some(r)) => {
                let whole_second =
                    self.started_at.len() >= 20 && !self.started_at[19..].starts_with('.');
                if whole_second && (h - r).abs() <= 1000 {
                    0.0
                } else {
                    (h - r) as f64 / 1000.0
                }
            }
            _ => 0.0,
        }
    }
}

impl ServerWatch {
    /// Every host over `[t0_s, t1_s]` in seconds since the run started
    /// (`run_started_at`, RFC 3339): each host's samples are placed on the
    /// run's clock by the difference of the start times, then summarized with
    /// [`HostWatch::window`]. This is the one per-stage computation: the run
    /// record's `stages[].server`, the text and the HTML report all use it.
    pub fn windows(&self, run_started_at: &str, t0_s: f64, t1_s: f64) -> Vec<HostWindow> {
        self.hosts
            .iter()
            .map(|h| {
                let offset_s = h.offset_from(run_started_at);
                HostWindow {
                    host: h.host.clone(),
                    targets: h.targets.clone(),
                    offset_s,
                    summary: h.window(t0_s - offset_s, t1_s - offset_s),
                }
            })
            .collect()
    }

    /// Merges another watch (e.g. `redline watch` run on the server's machine
    /// during the same run): its hosts are added; a host already present (same
    /// host name, targets and start) is not added twice.
    pub fn merge(&mut self, o: &ServerWatch) {
        for t in &o.targets {
            if !self.targets.contains(t) {
                self.targets.push(t.clone());
            }
        }
        for h in &o.hosts {
            let dup = self.hosts.iter().any(|x| {
                x.host == h.host && x.targets == h.targets && x.started_at == h.started_at
            });
            if !dup {
                self.hosts.push(h.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests;
