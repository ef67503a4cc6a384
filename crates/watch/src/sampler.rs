//! Sampling the watched processes and the machine over time, on the caller's
//! thread ([`Sampler`]) or on a thread of its own beside a run ([`Watcher`]).

use crate::procfs::{self, MachineInfo, ProcInfo, Target};
use redline_stats::watch::{HostWatch, NamedKib, ProcSample, ServerWatch, WatchSample};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Takes samples of the targets' processes and the machine.
pub struct Sampler {
    root: PathBuf,
    targets: Vec<Target>,
    start: Instant,
    last_t: f64,
    last_ticks: HashMap<u32, u64>,
    last_swap: Option<(u64, u64)>,
    ticks_per_s: f64,
    host: HostWatch,
    names: BTreeSet<String>,
    peak_private_kib: Option<u64>,
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

impl Sampler {
    /// A sampler over `/proc` for these targets.
    pub fn new(targets: Vec<Target>, interval: Duration) -> Sampler {
        Sampler::with_root(procfs::proc_root(), targets, interval)
    }

    /// A sampler over another `/proc` root (tests).
    pub fn with_root(root: PathBuf, targets: Vec<Target>, interval: Duration) -> Sampler {
        let labels: Vec<String> = targets.iter().map(Target::label).collect();
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        Sampler {
            root,
            targets,
            start: Instant::now(),
            last_t: 0.0,
            last_ticks: HashMap::new(),
            last_swap: None,
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
            last_processes: Vec::new(),
            last_machine: MachineInfo::default(),
        }
    }

    /// Takes one sample and keeps it.
    pub fn sample(&mut self) -> &WatchSample {
        let t = self.start.elapsed().as_secs_f64();
        let all = procfs::all_processes(&self.root);
        let chosen: Vec<ProcInfo> = procfs::select(&all, &self.targets)
            .into_iter()
            .cloned()
            .collect();
        let m = procfs::machine(&self.root);
        let dt = t - self.last_t;
        let mut s = WatchSample {
            t,
            processes: chosen.len() as u32,
            load1: m.load[0],
            mem_available_kib: m.mem_available_kib,
            swap_free_kib: m.swap_free_kib,
            ..Default::default()
        };
        let mut ticks = HashMap::new();
        let mut used_ticks = 0u64;
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
            let before =
                self.last_ticks
                    .get(&p.pid)
                    .copied()
                    .unwrap_or(if self.host.samples.is_empty() {
                        p.cpu_ticks
                    } else {
                        0
                    });
            used_ticks += p.cpu_ticks.saturating_sub(before);
            ticks.insert(p.pid, p.cpu_ticks);
            self.names.insert(p.comm.clone());
        }
        if !self.host.samples.is_empty() && dt > 0.0 {
            s.cpu_percent = used_ticks as f64 / self.ticks_per_s / dt * 100.0;
            if let Some((i, o)) = self.last_swap {
                s.swap_in_per_s = m.pswpin.saturating_sub(i) as f64 / dt;
                s.swap_out_per_s = m.pswpout.saturating_sub(o) as f64 / dt;
            }
        }
        if self.peak_private_kib.is_none_or(|p| s.private_kib > p) && !chosen.is_empty() {
            self.peak_private_kib = Some(s.private_kib);
            self.host.peak_processes = chosen.iter().map(proc_sample).collect();
            self.host.peak_others = others_by_name(&all, &chosen, m.mem_total_kib);
        }
        self.last_swap = Some((m.pswpin, m.pswpout));
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
    pub fn start(targets: Vec<Target>, interval: Duration) -> Watcher {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("redline-watch".into())
            .spawn(move || {
                let mut s = Sampler::new(targets, interval);
                let max_samples = 200_000;
                for _ in 0..max_samples {
                    s.sample();
                    match rx.recv_timeout(interval) {
                        Err(mpsc::RecvTimeoutError::Timeout) => continue,
                        _ => break,
                    }
                }
                // The last sample marks the end of the run.
                s.sample();
                s.finish()
            })
            .expect("spawn the watch thread");
        Watcher { stop: tx, thread }
    }

    /// Stops sampling and returns what was seen.
    pub fn stop(self) -> ServerWatch {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}
