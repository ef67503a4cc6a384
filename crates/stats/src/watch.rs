//! What was seen of the server's processes and machine during a run (`--watch`,
//! or `redline watch` on the server's own machine): a time series of samples
//! per host, and a peak/mean summary. Memory is in KiB, as `/proc` gives it.
//!
//! RSS counts shared pages once per process, so the sum of RSS over a forking
//! server's processes overstates its memory; PSS splits shared pages among the
//! processes that map them (the sum is the real total); private memory is what
//! one more process would cost. All three are kept side by side.

use serde::{Deserialize, Serialize};

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

/// What the server's own status page said during a run (`--server-status`):
/// Apache mod_status `?auto`, nginx stub_status, lighttpd mod_status `?auto`
/// or php-fpm's status page, read at the watch interval. Unlike `--watch`,
/// it counts what the server's workers are doing (busy, idle, held by an
/// idle keep-alive connection), which is what tells a full worker pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StatusWatch {
    /// The status page read (credentials never kept).
    pub url: String,
    /// Which status format it spoke: `apache`, `nginx`, `lighttpd` or `php-fpm`.
    pub server: String,
    /// When reading started (RFC 3339, UTC, milliseconds).
    pub started_at: String,
    /// Seconds between reads.
    pub interval_s: f64,
    /// Apache: the scoreboard's slots (prefork: MaxRequestWorkers; threaded
    /// MPMs: ServerLimit × ThreadsPerChild); lighttpd: its connection slots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u64>,
    /// Reads that failed (no answer, not a status page).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: u64,
    /// Why the last failed read failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The reads, oldest first.
    pub samples: Vec<StatusSample>,
}

/// One read of a status page. A field the server's page does not give is absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StatusSample {
    /// Seconds since reading started.
    pub t: f64,
    /// Workers (connections for nginx) serving a request now: Apache
    /// BusyWorkers, nginx Reading + Writing, lighttpd BusyServers, php-fpm
    /// active processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<u64>,
    /// Workers ready for a request: Apache IdleWorkers, lighttpd
    /// IdleServers, php-fpm idle processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<u64>,
    /// Workers (nginx: connections) held by an idle keep-alive connection:
    /// Apache scoreboard `K`, nginx Waiting. Apache counts them in `busy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive: Option<u64>,
    /// Requests served since the server started: Apache/lighttpd Total
    /// Accesses, nginx requests, php-fpm accepted conn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// nginx: open client connections (Active connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<u64>,
    /// nginx: connections accepted since start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepts: Option<u64>,
    /// nginx: connections handled since start (below `accepts`: dropped at a
    /// resource limit such as worker_connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled: Option<u64>,
    /// php-fpm: processes in the pool (total processes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// php-fpm: times the pool hit pm.max_children since start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_children_reached: Option<u64>,
    /// php-fpm: requests waiting for a free process (listen queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_queue: Option<u64>,
    /// Apache/lighttpd: workers per scoreboard state (`W` sending, `K`
    /// keep-alive, `R` reading, `_` waiting, `.` open slot, ...).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub states: std::collections::BTreeMap<String, u64>,
}

/// The status page over one window of a run (a stage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StatusWindow {
    /// Reads inside the window.
    pub samples: u32,
    /// Busy workers.
    pub busy: PeakMean,
    /// Idle workers (lowest seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_idle: Option<u64>,
    /// Workers held by keep-alive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive: Option<PeakMean>,
    /// Requests per second by the server's own count (between the window's first and last read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_s: Option<f64>,
    /// php-fpm: the longest listen queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_listen_queue: Option<u64>,
    /// php-fpm: times pm.max_children was reached inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_children_reached: Option<u64>,
    /// nginx: connections accepted but not handled inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_handled: Option<u64>,
}

impl StatusWatch {
    /// The reads in `[t0_s, t1_s]` seconds since the run started
    /// (`run_started_at`, RFC 3339), summarized; `None` without any read there.
    pub fn window(&self, run_started_at: &str, t0_s: f64, t1_s: f64) -> Option<StatusWindow> {
        let off = match (
            crate::time::parse_rfc3339_ms(&self.started_at),
            crate::time::parse_rfc3339_ms(run_started_at),
        ) {
            (Some(h), Some(r)) => (h - r) as f64 / 1000.0,
            _ => 0.0,
        };
        if t0_s.is_nan() || t1_s.is_nan() || t1_s < t0_s {
            return None;
        }
        let s: Vec<&StatusSample> = self
            .samples
            .iter()
            .filter(|x| x.t + off >= t0_s && x.t + off <= t1_s)
            .collect();
        if s.is_empty() {
            return None;
        }
        let opt_peak = |f: fn(&StatusSample) -> Option<u64>| -> Option<PeakMean> {
            s.iter()
                .any(|x| f(x).is_some())
                .then(|| PeakMean::of(s.iter().filter_map(|x| f(x).map(|v| v as f64))))
        };
        let delta = |f: fn(&StatusSample) -> Option<u64>| -> Option<(u64, f64)> {
            let v: Vec<(u64, f64)> = s.iter().filter_map(|x| f(x).map(|v| (v, x.t))).collect();
            match (v.first(), v.last()) {
                (Some(a), Some(b)) if v.len() > 1 => Some((b.0.saturating_sub(a.0), b.1 - a.1)),
                _ => None,
            }
        };
        Some(StatusWindow {
            samples: s.len() as u32,
            busy: PeakMean::of(s.iter().filter_map(|x| x.busy.map(|v| v as f64))),
            min_idle: s.iter().filter_map(|x| x.idle).min(),
            keepalive: opt_peak(|x| x.keepalive),
            requests_per_s: delta(|x| x.requests)
                .filter(|(_, dt)| *dt > 0.0)
                .map(|(n, dt)| n as f64 / dt),
            max_listen_queue: s.iter().filter_map(|x| x.listen_queue).max(),
            max_children_reached: delta(|x| x.max_children_reached).map(|(n, _)| n),
            not_handled: match (delta(|x| x.accepts), delta(|x| x.handled)) {
                (Some((a, _)), Some((h, _))) => Some(a.saturating_sub(h)),
                _ => None,
            },
        })
    }
}

/// Why a staged run stopped scaling, or why a plain run hit trouble: the
/// resource that gave out first, the evidence, and the directive to change
/// (or, without the evidence, what to add to the run to know).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Diagnosis {
    /// `server_gone` (the server stopped answering from an instant on),
    /// `worker_pool` (every worker busy), `keepalive` (workers held by idle
    /// keep-alive connections), `cpu` (the server's CPU saturated), `memory`
    /// (the machine swapped), `client` (redline itself was the limit),
    /// `listen_backlog` (connection attempts dropped by a full accept
    /// queue), `bandwidth` (the bytes filled the link), `server_concurrency`
    /// (open loop: every connection held by the server while requests
    /// waited, without a status page to say which pool) or `unknown` (no
    /// evidence: see `advice`).
    pub resource: String,
    /// The directive(s) that set the limit, e.g. `MaxRequestWorkers`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub directive: String,
    /// The limit seen (busy workers at the plateau), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// The load level (connections or req/s) at which the limit was first reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_level: Option<f64>,
    /// The instant (seconds since the run started) it happened, when it has
    /// one (`server_gone`: the end of the last second with an answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_s: Option<f64>,
    /// The numbers behind it, one fact per entry.
    pub evidence: Vec<String>,
    /// What to change (or to add, to know).
    pub advice: String,
}

/// A status read placed on the run's clock, with the load level then.
struct Placed<'a> {
    s: &'a StatusSample,
    level: f64,
}

/// The load level at `t` seconds into the run, from the stages (ramps
/// interpolate); `None` outside them (the reads after the load ended).
fn level_at(stages: &[crate::stages::StageSummary], t: f64) -> Option<f64> {
    let st = stages.iter().find(|s| t >= s.start_s && t <= s.end_s)?;
    let span = st.end_s - st.start_s;
    if span <= 0.0 || st.level_from == st.level_to {
        return Some(st.level_to);
    }
    Some(st.level_from + (st.level_to - st.level_from) * (t - st.start_s) / span)
}

/// Share of the busy workers that Apache's scoreboard shows in keep-alive
/// (`K`) above which the pool is said to be held by keep-alive.
pub const KEEPALIVE_SHARE: f64 = 0.3;

/// Warning codes that say the client, not the server, may have been the
/// limit (the engine flags the record `client_limited` for each); a
/// `rate_short` of a [`server_held`] run is the server's doing.
pub const CLIENT_LIMIT_CODES: [&str; 6] = [
    "client_cpu",
    "fd_limit",
    "client_resources",
    "scheduler_lag",
    "rate_short",
    "connections_short",
];

/// Open loop: every connection the run could open was open, and requests
/// waited for one to come free: the server's concurrency set the pace (the
/// engine's test for its server-held `rate_short` warning).
pub fn server_held(rec: &crate::RunRecord) -> bool {
    rec.config.load.is_open()
        && rec.counters.waited_for_connection > 0
        && rec.counters.peak_connections >= rec.config.load.connections()
}

/// The warnings that make a run the client's limit, not the server's:
/// [`CLIENT_LIMIT_CODES`], less the `rate_short` of a [`server_held`] run.
pub fn client_limits(rec: &crate::RunRecord) -> Vec<&crate::record::Warning> {
    let held = server_held(rec);
    rec.warnings
        .iter()
        .filter(|w| CLIENT_LIMIT_CODES.contains(&w.code.as_str()))
        .filter(|w| !(held && w.code == "rate_short"))
        .collect()
}

/// p99 at or above this many times p50 (and at least [`BLOWUP_MIN_US`]) is
/// a latency blow-up: requests queued somewhere.
pub const BLOWUP_RATIO: u64 = 10;
/// The least p99 (µs) called a blow-up: 100 ms.
pub const BLOWUP_MIN_US: u64 = 100_000;
/// Bytes per second at or above this share of the link's speed: the link
/// was the limit.
pub const LINK_SHARE: f64 = 0.9;
/// Loopback has no link: its bytes are copied by the CPUs. wrk moved
/// 1.42 GB/s from nginx (one worker, sendfile, a 1 MiB file, 4
/// connections) over loopback on the 2-core development machine; at or
/// above 1 GB/s (70 % of that) the copying is called the limit.
pub const LOOPBACK_CEILING_BYTES: f64 = 1e9;

/// What went wrong in a plain (unstaged) run, one fact per entry: errors,
/// timeouts, unanswered requests, a server that went away, a latency
/// blow-up, connections held by the server, SYNs sent again, the client's
/// own limits. Empty for a run without trouble.
pub fn trouble(rec: &crate::RunRecord) -> Vec<String> {
    let mut t = Vec::new();
    let c = &rec.counters;
    if c.failed > 0 {
        let mut kinds: Vec<&crate::ErrorCount> = rec.errors.iter().collect();
        kinds.sort_by_key(|e| std::cmp::Reverse(e.count));
        let list: Vec<String> = kinds
            .iter()
            .take(3)
            .map(|e| format!("{} {}", e.count, e.kind.name()))
            .collect();
        t.push(format!(
            "{} of {} requests failed ({})",
            c.failed,
            c.scheduled.max(c.failed),
            list.join(", ")
        ));
    }
    let unanswered = c.in_flight_at_end.saturating_add(c.not_sent);
    if unanswered > 0 && !rec.interrupted {
        t.push(format!(
            "{unanswered} requests were never answered ({} in flight at the end, {} never sent)",
            c.in_flight_at_end, c.not_sent
        ));
    }
    let (p50, p99) = (rec.latency.percentile(50.0), rec.latency.percentile(99.0));
    if p99 >= BLOWUP_MIN_US && p99 >= BLOWUP_RATIO * p50.max(1) {
        t.push(format!(
            "latency blew up: p99 {:.1} ms is {:.0}x the median {:.1} ms",
            p99 as f64 / 1000.0,
            p99 as f64 / p50.max(1) as f64,
            p50 as f64 / 1000.0
        ));
    }
    for w in &rec.warnings {
        if matches!(
            w.code.as_str(),
            "server_gone" | "syn_retransmits" | "connections_busy"
        ) || (w.code == "rate_short" && server_held(rec))
        {
            t.push(w.message.clone());
        }
    }
    for w in client_limits(rec) {
        t.push(w.message.clone());
    }
    t
}

/// The diagnosis of a run: for a staged run, why it stopped scaling; for a
/// plain run, why it hit [`trouble`] (`None` without any). The rules, first
/// match wins (docs/diagnosis.md lists them with their thresholds):
/// the server went away; the status page's pool full (busy at its plateau,
/// no idle worker, in 80 % of the later reads, the load beyond it; keep-alive
/// when 30 % of the busy Apache workers are in `K`); `--watch`: swapping, or
/// CPU at 90 % of the machine; SYNs sent again or accept queues overflowed
/// (listen backlog); the client's own limits; bytes/s at 90 % of the link (or
/// 1 GB/s on loopback); open loop with every connection held by the server
/// (server concurrency); else what to add to know.
pub fn diagnose(rec: &crate::RunRecord) -> Option<Diagnosis> {
    diagnose_with(rec, Vec::new())
}

/// [`diagnose`] with more trouble the caller knows of (`find`: the SLO
/// thresholds a step failed), so a plain run is diagnosed even when its
/// record alone shows none.
pub fn diagnose_with(rec: &crate::RunRecord, more: Vec<String>) -> Option<Diagnosis> {
    let staged = !rec.stages.is_empty();
    let mut facts = if staged { Vec::new() } else { trouble(rec) };
    if !staged {
        facts.extend(more);
    }
    if !staged && facts.is_empty() {
        return None;
    }
    if let Some(d) = diagnose_gone(rec) {
        return Some(d);
    }
    let unit = rec.knee.as_ref().map(|k| k.unit.as_str()).unwrap_or(
        rec.config
            .stages
            .as_ref()
            .map(|p| p.unit.as_str())
            .unwrap_or("connections"),
    );
    let max_level = if staged {
        rec.stages.iter().map(|s| s.level_to).fold(0.0, f64::max)
    } else {
        rec.counters.peak_connections as f64
    };
    // Something gave out: a knee on a staged run, trouble on a plain one.
    let stalled = !staged || rec.knee.is_some();
    if let Some(w) = &rec.server_status {
        if let Some(d) = diagnose_status(rec, w, max_level, unit, stalled) {
            return Some(d);
        }
    }
    if let Some(d) = rec.server_watch.as_ref().and_then(diagnose_watch) {
        return Some(d);
    }
    if !stalled {
        return None;
    }
    // The backlog before the client: connects the server left unanswered
    // also leave the client short of connections (connections_short).
    if let Some(d) = diagnose_backlog(rec)
        .or_else(|| diagnose_client(rec))
        .or_else(|| diagnose_bandwidth(rec))
    {
        return Some(d);
    }
    let mut add = Vec::new();
    if rec.server_status.is_none() {
        add.push("--server-status URL (Apache /server-status?auto, nginx stub_status, php-fpm's status page) to see the worker pool");
    }
    if rec.server_watch.is_none() {
        add.push("--watch NAME|PID (on the server's machine) to see its CPU and memory");
    }
    let mut evidence = facts;
    evidence.push(match &rec.server_status {
        Some(w) if !w.samples.is_empty() => {
            let peak = w.samples.iter().filter_map(|s| s.busy).max().unwrap_or(0);
            match w.slots {
                // Full, but not for long enough (80 % of the later reads, two at least) to call it the limit.
                Some(n) if peak >= n => format!(
                    "the status page ({}) saw busy reach all {n} slots, but not hold there: too briefly to call the pool the limit (a longer run would tell)",
                    w.server
                ),
                _ => format!(
                    "the status page ({}) showed no exhausted pool: busy peaked at {peak}{}",
                    w.server,
                    w.slots
                        .map(|n| format!(" of {n} slots"))
                        .unwrap_or_default()
                ),
            }
        }
        Some(w) => format!("the status page gave no read ({} failed)", w.failed),
        None => "no server-side evidence was recorded".into(),
    });
    let to_know = if add.is_empty() {
        None
    } else {
        Some(format!("to know why, run again with {}", add.join(" and ")))
    };
    if !staged && server_held(rec) {
        let cap = rec.config.load.connections();
        return Some(Diagnosis {
            resource: "server_concurrency".into(),
            directive: "MaxRequestWorkers / pm.max_children / worker_connections".into(),
            limit: Some(cap),
            evidence,
            advice: format!(
                "the server held all {cap} connections and answered slower than the rate needs: its worker limit (or slow requests) set the pace, not the client; {}",
                to_know.unwrap_or_else(|| "raise -c to see whether the server takes more at once".into())
            ),
            ..Default::default()
        });
    }
    Some(Diagnosis {
        resource: "unknown".into(),
        evidence,
        advice: to_know.unwrap_or_else(|| {
            "neither the worker pool, the CPU nor memory ran out: look at the application (slow queries, locks) and the network".into()
        }),
        ..Default::default()
    })
}

/// The server went away: the engine's `server_gone` warning (every second
/// from an instant on failed, with no answer, after answers before it,
/// mostly refused or reset connections). The instant is the end of the last
/// second with an answer.
fn diagnose_gone(rec: &crate::RunRecord) -> Option<Diagnosis> {
    let w = rec.warnings.iter().find(|w| w.code == "server_gone")?;
    let at = rec
        .series
        .iter()
        .rposition(|p| p.requests > 0)
        .map(|i| rec.series[i].t as f64 + 1.0);
    let mut evidence = vec![w.message.clone()];
    let count = |k: crate::ErrorKind| -> u64 {
        rec.errors
            .iter()
            .filter(|e| e.kind == k)
            .map(|e| e.count)
            .sum()
    };
    let (refused, reset) = (
        count(crate::ErrorKind::Refused),
        count(crate::ErrorKind::Reset),
    );
    evidence.push(format!(
        "{refused} connections refused and {reset} reset in all"
    ));
    Some(Diagnosis {
        resource: "server_gone".into(),
        at_s: at,
        evidence,
        advice: format!(
            "the server stopped answering{}: look at its error log and the system journal (a crash, the OOM killer, a restart or deploy); the figures after that instant measure no server",
            at.map(|a| format!(" at {a:.1} s")).unwrap_or_default()
        ),
        ..Default::default()
    })
}

/// The client itself was the limit: its CPU, file descriptors or ports,
/// scheduler lag, a rate it did not send or connections it did not open
/// ([`client_limits`]).
fn diagnose_client(rec: &crate::RunRecord) -> Option<Diagnosis> {
    let l = client_limits(rec);
    if l.is_empty() {
        return None;
    }
    let fds = l
        .iter()
        .any(|w| w.code == "fd_limit" || w.code == "client_resources");
    Some(Diagnosis {
        resource: "client".into(),
        evidence: l.iter().map(|w| w.message.clone()).collect(),
        advice: format!(
            "redline itself was the limit, so the server's figures are a lower bound: give it more threads (-t) and cores, or more machines (redline agent){}",
            if fds {
                ", and raise its open-files limit (ulimit -n) or use more local addresses"
            } else {
                ""
            }
        ),
        ..Default::default()
    })
}

/// The listen backlog overflowed: connection attempts (SYNs) sent again
/// after 1 s or more (the engine's `syn_retransmits` warning), or a
/// listening socket on the client's host dropped attempts for a full accept
/// queue (`TcpExt ListenOverflows`: the server's, when it runs on this host).
fn diagnose_backlog(rec: &crate::RunRecord) -> Option<Diagnosis> {
    let syn = rec.warnings.iter().find(|w| w.code == "syn_retransmits");
    let overflows = rec.client.listen_overflows;
    // The watched server's machine (`--watch`, or a merged `redline watch`).
    let watched: Vec<(String, u64)> = rec
        .server_watch
        .iter()
        .flat_map(|w| &w.hosts)
        .map(|h| {
            (
                h.host.clone(),
                h.samples.iter().map(|s| s.listen_overflows).sum::<u64>(),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    if syn.is_none() && overflows == 0 && watched.is_empty() {
        return None;
    }
    let mut evidence = Vec::new();
    for (host, n) in &watched {
        evidence.push(format!(
            "{host}: its listening sockets dropped {n} connection attempts for a full accept queue during the watch (TcpExt ListenOverflows)"
        ));
    }
    if let Some(w) = syn {
        evidence.push(w.message.clone());
    } else if overflows > 0 {
        evidence.push(format!(
            "a listening socket on this host overflowed its accept queue {overflows} times (TcpExt ListenOverflows)"
        ));
    }
    if let Some(c) = &rec.server_config {
        for k in [
            "ListenBacklog",
            "listen",
            "backlog",
            "server.listen-backlog",
        ] {
            if let Some(v) = c.directives.get(k) {
                evidence.push(format!("the server's config: {k} {}", v.value));
            }
        }
    }
    Some(Diagnosis {
        resource: "listen_backlog".into(),
        directive: "ListenBacklog / listen ... backlog= / server.listen-backlog, net.core.somaxconn".into(),
        evidence,
        advice: "the server's accept queue was full, so the kernel dropped connection attempts and the clients waited 1 s or more to retry: raise the backlog (Apache ListenBacklog, nginx listen ... backlog=4096, lighttpd server.listen-backlog) and on the server net.core.somaxconn and net.ipv4.tcp_max_syn_backlog; if the workers are all busy too, the pool is the cause (add --server-status)".into(),
        ..Default::default()
    })
}

/// True for a loopback address (`127.x.x.x:port`, `[::1]:port`).
fn is_loopback(addr: &str) -> bool {
    let host = addr
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(addr)
        .trim_matches(['[', ']']);
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
        || host == "localhost"
}

/// Bandwidth: the bytes read (or written) per second reached
/// [`LINK_SHARE`] of the client's link (`environment.link_mbit`), or
/// [`LOOPBACK_CEILING_BYTES`] on loopback.
fn diagnose_bandwidth(rec: &crate::RunRecord) -> Option<Diagnosis> {
    if rec.duration_s <= 0.0 {
        return None;
    }
    let c = &rec.counters;
    let bps = c.bytes_read.max(c.bytes_written) as f64 / rec.duration_s;
    let (ceiling, what) = if is_loopback(&rec.server.address) {
        (
            LOOPBACK_CEILING_BYTES,
            "loopback (no link: the CPUs copy the bytes; 1 GB/s is 70 % of what wrk moved over loopback on a 2-core machine)".to_string(),
        )
    } else {
        let m = rec.environment.link_mbit?;
        (
            m as f64 * 1e6 / 8.0 * LINK_SHARE,
            format!(
                "{:.0} % of the client's {m} Mbit/s link",
                LINK_SHARE * 100.0
            ),
        )
    };
    if bps < ceiling {
        return None;
    }
    Some(Diagnosis {
        resource: "bandwidth".into(),
        evidence: vec![format!(
            "{:.1} MB/s ({:.0} Mbit/s) moved, at or above {what}",
            bps / 1e6,
            bps * 8.0 / 1e6
        )],
        advice: "the bytes filled the link, not the server's workers: compress (gzip/deflate, brotli), cache (Expires, Cache-Control), serve smaller responses, or use a faster link or more client machines".into(),
        ..Default::default()
    })
}

fn diagnose_status(
    rec: &crate::RunRecord,
    w: &StatusWatch,
    max_level: f64,
    unit: &str,
    stalled: bool,
) -> Option<Diagnosis> {
    let off = match (
        crate::time::parse_rfc3339_ms(&w.started_at),
        crate::time::parse_rfc3339_ms(&rec.started_at),
    ) {
        (Some(h), Some(r)) => (h - r) as f64 / 1000.0,
        _ => 0.0,
    };
    // nginx: a connection is a worker_connections slot, busy or waiting.
    let nginx = w.server == "nginx";
    let measure = |s: &StatusSample| if nginx { s.active } else { s.busy };
    let placed: Vec<Placed> = w
        .samples
        .iter()
        .filter_map(|s| {
            let level = if rec.stages.is_empty() {
                // A plain run: its one level, while it ran.
                let t = s.t + off;
                (t >= 0.0 && t <= rec.duration_s).then_some(max_level)?
            } else {
                level_at(&rec.stages, s.t + off)?
            };
            measure(s)?;
            Some(Placed { s, level })
        })
        .collect();
    let limit = placed.iter().filter_map(|p| measure(p.s)).max()?;
    if limit == 0 {
        return None;
    }
    // nginx counts the status request's own connection; Apache its worker.
    // nginx's open connections churn (closed and reopened between reads):
    // within 15 % of the most seen counts as full.
    let floor = if nginx {
        limit - limit * 15 / 100
    } else {
        limit
    };
    let full = |p: &Placed| measure(p.s).unwrap_or(0) >= floor && p.s.idle.is_none_or(|i| i == 0);
    let first = placed.iter().position(full)?;
    let after = &placed[first..];
    let full_share = after.iter().filter(|p| full(p)).count() as f64 / after.len() as f64;
    if full_share < 0.8 || max_level <= limit as f64 || after.len() < 2 {
        return None;
    }
    // A plateau is a limit when the server says so (every scoreboard slot
    // busy, requests in php-fpm's listen queue, connections nginx could
    // not handle), or when throughput stopped scaling (the knee): an idle
    // count of 0 alone is a pool that has not grown yet.
    let queued = after
        .iter()
        .any(|p| p.s.listen_queue.is_some_and(|q| q > 0));
    let dropped_any = placed
        .iter()
        .any(|p| p.s.accepts.zip(p.s.handled).is_some_and(|(a, h)| a > h));
    let all_slots = w.slots.is_some_and(|s| limit >= s);
    if !(all_slots || queued || dropped_any || stalled) {
        return None;
    }
    let at_level = placed[first].level.round();
    let mut evidence = Vec::new();
    let what = if nginx {
        "open connections"
    } else {
        "busy workers"
    };
    let slots = w
        .slots
        .filter(|s| *s == limit)
        .map(|s| format!(" (all {s} scoreboard slots)"))
        .unwrap_or_default();
    // A plain run has one level: the instant says when, not the level.
    let plain = rec.stages.is_empty();
    let at_s = plain.then(|| ((placed[first].s.t + off) * 10.0).round() / 10.0);
    if plain {
        evidence.push(format!(
            "{what} reached {limit}{slots} {:.1} s into the run and stayed there in {:.0}% of the {} later reads, with {max_level:.0} connections open",
            at_s.unwrap_or(0.0),
            full_share * 100.0,
            after.len()
        ));
    } else {
        evidence.push(format!(
            "{what} reached {limit}{slots} at {at_level:.0} {unit} and stayed there in {:.0}% of the {} later reads, while the load rose to {max_level:.0} {unit}",
            full_share * 100.0,
            after.len()
        ));
    }
    let at_level = (!plain).then_some(at_level);
    if after.iter().any(|p| p.s.idle.is_some()) {
        evidence.push("no idle worker was left".into());
    }
    // Throughput: the stages past the limit against the one that reached it.
    let reached = rec
        .stages
        .iter()
        .find(|s| at_level.is_some_and(|a| s.level_to >= a))
        .map(|s| s.requests_per_sec);
    let last = rec.stages.last().map(|s| (s.requests_per_sec, s.p99_us));
    let served = match (
        after.first().and_then(|p| p.s.requests.map(|n| (n, p.s.t))),
        after.last().and_then(|p| p.s.requests.map(|n| (n, p.s.t))),
    ) {
        (Some((n0, t0)), Some((n1, t1))) if t1 - t0 >= 1.0 => {
            Some(n1.saturating_sub(n0) as f64 / (t1 - t0))
        }
        _ => None,
    };
    let one_stage = rec.stages.len() == 1;
    if let (Some(rps), Some((_, p99))) = (served, last) {
        evidence.push(format!(
            "from then on the server served {rps:.1} req/s by its own count while p99 reached {:.1} ms: requests queued for a worker",
            p99 as f64 / 1000.0
        ));
    } else if let (Some(r0), Some((r1, p99)), false) = (reached, last, one_stage) {
        evidence.push(format!(
            "throughput went from {r0:.1} to {r1:.1} req/s past it while p99 reached {:.1} ms: requests queued for a worker",
            p99 as f64 / 1000.0
        ));
    }
    let q = after.iter().filter_map(|p| p.s.listen_queue).max();
    if let Some(q) = q.filter(|q| *q > 0) {
        evidence.push(format!(
            "up to {q} requests waited in php-fpm's listen queue"
        ));
    }
    let reached_n = match (
        after.first().and_then(|p| p.s.max_children_reached),
        after.last().and_then(|p| p.s.max_children_reached),
    ) {
        (Some(a), Some(b)) if b > a => Some(b - a),
        _ => None,
    };
    if let Some(n) = reached_n {
        evidence.push(format!("php-fpm reached pm.max_children {n} more times"));
    }
    let dropped = match (
        placed.first().and_then(|p| p.s.accepts.zip(p.s.handled)),
        placed.last().and_then(|p| p.s.accepts.zip(p.s.handled)),
    ) {
        (Some((a0, h0)), Some((a1, h1))) => (a1 - a0.min(a1)).saturating_sub(h1 - h0.min(h1)),
        _ => 0,
    };
    if dropped > 0 {
        evidence.push(format!(
            "nginx accepted {dropped} connections it could not handle"
        ));
    }
    // Keep-alive: Apache counts K slots as busy.
    let (k, b): (u64, u64) = after
        .iter()
        .filter(|p| full(p))
        .map(|p| (p.s.keepalive.unwrap_or(0), p.s.busy.unwrap_or(0)))
        .fold((0, 0), |a, x| (a.0 + x.0, a.1 + x.1));
    let k_share = if b > 0 { k as f64 / b as f64 } else { 0.0 };
    if w.server == "apache" && k_share >= KEEPALIVE_SHARE {
        evidence.push(format!(
            "{:.0}% of the busy workers were in keep-alive (scoreboard K): waiting for a client's next request, not serving",
            k_share * 100.0
        ));
        return Some(Diagnosis {
            resource: "keepalive".into(),
            directive: "KeepAliveTimeout, MaxKeepAliveRequests".into(),
            limit: Some(limit),
            at_level,
            evidence,
            at_s,
            advice: format!(
                "workers are held by idle keep-alive connections: lower KeepAliveTimeout (to 1-5 s) so they return to the pool sooner, or raise MaxRequestWorkers above {limit} if memory allows (redline size)"
            ),
        });
    }
    let (directive, advice) = match w.server.as_str() {
        "apache" => (
            "MaxRequestWorkers (ServerLimit)",
            format!("the worker pool is exhausted at {limit}: raise MaxRequestWorkers (and ServerLimit) if memory allows (redline size says how far), or make each request shorter"),
        ),
        "php-fpm" => (
            "pm.max_children",
            format!("the php-fpm pool is exhausted at {limit} processes: raise pm.max_children if memory allows (redline size --watch php-fpm), or make the scripts faster"),
        ),
        "nginx" => (
            "worker_connections (× worker_processes)",
            format!("nginx holds at most {limit} connections: raise worker_connections (and the open-files limit, worker_rlimit_nofile)"),
        ),
        _ => (
            "server.max-connections",
            format!("lighttpd's connections are exhausted at {limit}: raise server.max-connections"),
        ),
    };
    Some(Diagnosis {
        resource: "worker_pool".into(),
        directive: directive.into(),
        limit: Some(limit),
        at_level,
        at_s,
        evidence,
        advice,
    })
}

fn diagnose_watch(w: &ServerWatch) -> Option<Diagnosis> {
    for h in &w.hosts {
        if h.swapped() {
            return Some(Diagnosis {
                resource: "memory".into(),
                directive: "MaxRequestWorkers / pm.max_children / worker_processes".into(),
                evidence: vec![format!(
                    "{} swapped: {} pages in, {} out",
                    h.host, h.summary.swapped_in_pages, h.summary.swapped_out_pages
                )],
                advice: "the machine ran out of memory: lower the worker count to what fits (redline size)".into(),
                ..Default::default()
            });
        }
        let cap = h.cpus.max(1) as f64 * 100.0;
        if h.summary.cpu_percent.peak >= 0.9 * cap {
            return Some(Diagnosis {
                resource: "cpu".into(),
                evidence: vec![format!(
                    "the server's processes on {} used up to {:.0}% CPU of {:.0}% ({} CPUs)",
                    h.host, h.summary.cpu_percent.peak, cap, h.cpus
                )],
                advice: "the server's CPU is saturated: more workers will not help; make each request cheaper (caching, compression level) or add CPUs".into(),
                ..Default::default()
            });
        }
    }
    None
}

#[cfg(test)]
mod tests;
