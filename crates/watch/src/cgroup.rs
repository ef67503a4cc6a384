//! The server's own cgroup, when it has one (a systemd unit, a container, a
//! cgroup made for it): memory, CPU and task counts the kernel keeps for the
//! whole group, short-lived children included (a CGI process that lives
//! 20 ms between two samples is in the cgroup's CPU and peaks, not in any
//! `/proc` listing). cgroup v2 (`memory.current`, `memory.peak`, `cpu.stat`,
//! `pids.current`, `pids.peak`) is read first, then the v1 controllers
//! (`memory.usage_in_bytes`, `memory.max_usage_in_bytes`, `cpuacct.usage`,
//! `pids.current`, `pids.peak`) of a hybrid or v1 machine.
//!
//! A cgroup counts as the server's own only when it is not a root cgroup and
//! every process in it is one of the server's (or a child of one): the cgroup
//! of a login session or of a whole container holds other programs too, and
//! its figures would not be the server's.

use crate::procfs::{self, Target};
use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Environment variable that replaces `/sys/fs/cgroup` (tests only, with
/// `REDLINE_PROC_ROOT`: a fixture tree of cgroup files).
pub const CGROUP_ROOT_ENV: &str = "REDLINE_CGROUP_ROOT";

/// The cgroup file system's root: `/sys/fs/cgroup`, or `$REDLINE_CGROUP_ROOT`.
pub fn cgroup_root() -> PathBuf {
    match std::env::var_os(CGROUP_ROOT_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from("/sys/fs/cgroup"),
    }
}

/// Where a process is, from `/proc/PID/cgroup`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Membership {
    /// The v2 path (`0::/system.slice/apache2.service`).
    pub v2: Option<String>,
    /// v1 controller (`memory`, `cpuacct`, `pids`, `name=systemd`…) → path.
    pub v1: BTreeMap<String, String>,
}

/// Parses `/proc/PID/cgroup` (`hierarchy:controllers:path` lines).
pub fn parse_membership(text: &str) -> Membership {
    let mut m = Membership::default();
    for line in text.lines() {
        let mut it = line.splitn(3, ':');
        let (Some(h), Some(ctl), Some(path)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if h == "0" && ctl.is_empty() {
            m.v2 = Some(path.to_string());
        } else {
            for c in ctl.split(',').filter(|c| !c.is_empty()) {
                m.v1.insert(c.to_string(), path.to_string());
            }
        }
    }
    m
}

/// The directories of one cgroup that hold its counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cgroup {
    /// `v2 /system.slice/apache2.service` or `v1 memory:/x cpuacct:/x pids:/x`.
    pub label: String,
    /// The v2 directory.
    pub v2: Option<PathBuf>,
    /// The v1 memory controller's directory.
    pub memory: Option<PathBuf>,
    /// The v1 cpuacct controller's directory.
    pub cpuacct: Option<PathBuf>,
    /// The v1 pids controller's directory.
    pub pids: Option<PathBuf>,
    /// The v1 cpu controller's directory (CFS quota and throttling).
    pub cpu: Option<PathBuf>,
    /// A directory whose `cgroup.procs` lists the group's processes.
    pub procs: Option<PathBuf>,
    /// The label's part for each of `v2`, `memory`, `cpuacct`, `pids`, `cpu`.
    parts: [Option<String>; 5],
}

/// One reading of a cgroup's counters (None: not available there).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reading {
    /// Memory charged to the group now (including its page cache), KiB.
    pub memory_kib: Option<u64>,
    /// The most memory ever charged to it, KiB.
    pub memory_peak_kib: Option<u64>,
    /// CPU used by the group, processes gone included, microseconds.
    pub cpu_usec: Option<u64>,
    /// Processes in it now (`cgroup.procs`).
    pub processes: Option<u64>,
    /// The most tasks (processes and threads) it ever held (`pids.peak`).
    pub tasks_peak: Option<u64>,
    /// Its memory limit, KiB: v2 `memory.max` (else `memory.high`), v1
    /// `memory.limit_in_bytes`; None when unlimited.
    pub memory_limit_kib: Option<u64>,
    /// Processes the OOM killer killed in it since it was made (v2
    /// `memory.events` `oom_kill`, v1 `memory.oom_control` `oom_kill`).
    pub oom_kills: Option<u64>,
    /// Times its memory hit the limit (v2 `memory.events` `max` + `high`,
    /// v1 `memory.failcnt`).
    pub limit_hits: Option<u64>,
    /// Its CPU quota in CPUs (v2 `cpu.max`, v1 `cpu.cfs_quota_us` /
    /// `cpu.cfs_period_us`); None when unlimited.
    pub cpu_quota: Option<f64>,
    /// Microseconds its tasks were held back by the quota (`throttled_usec`,
    /// v1 `throttled_time` ns / 1000).
    pub throttled_usec: Option<u64>,
}

/// The v2 hierarchy's root: `root` on a pure v2 machine, `root/unified` on a hybrid one.
fn v2_root(root: &Path) -> Option<PathBuf> {
    [root.to_path_buf(), root.join("unified")]
        .into_iter()
        .find(|d| d.join("cgroup.controllers").exists())
}

/// A v1 controller's mount under the root (`memory`, `cpuacct` or `cpu,cpuacct`, `pids`).
fn v1_mount(root: &Path, ctl: &str) -> Option<PathBuf> {
    let names: &[&str] = match ctl {
        "cpuacct" => &["cpuacct", "cpu,cpuacct", "cpuacct,cpu"],
        "cpu" => &["cpu", "cpu,cpuacct", "cpuacct,cpu"],
        "name=systemd" => &["systemd"],
        _ => &[],
    };
    let own = [ctl];
    let names = if names.is_empty() { &own[..] } else { names };
    names
        .iter()
        .map(|n| root.join(n))
        .find(|d| d.join("cgroup.procs").exists())
}

fn join(base: &Path, path: &str) -> PathBuf {
    base.join(path.trim_start_matches('/'))
}

fn is_root(path: &str) -> bool {
    path.trim_matches('/').is_empty()
}

impl Cgroup {
    /// The cgroup directories of a membership (root cgroups left out).
    pub fn of(root: &Path, m: &Membership) -> Cgroup {
        let mut c = Cgroup::default();
        if let (Some(path), Some(base)) = (m.v2.as_deref(), v2_root(root)) {
            let d = join(&base, path);
            // A v2 group with its own counters (memory.current or cpu.stat).
            if !is_root(path) && (d.join("memory.current").exists() || d.join("cpu.stat").exists())
            {
                c.parts[0] = Some(format!("v2 {path}"));
                c.procs = Some(d.clone());
                c.v2 = Some(d);
            }
        }
        for (i, ctl) in ["memory", "cpuacct", "pids", "cpu"].into_iter().enumerate() {
            let Some(path) = m.v1.get(ctl) else {
                continue;
            };
            if is_root(path) {
                continue;
            }
            if let Some(base) = v1_mount(root, ctl) {
                let d = join(&base, path);
                if d.join("cgroup.procs").exists() {
                    c.parts[i + 1] = Some(format!("v1 {ctl}:{path}"));
                    if c.procs.is_none() {
                        c.procs = Some(d.clone());
                    }
                    *c.slot(i + 1) = Some(d);
                }
            }
        }
        c.relabel();
        c
    }

    fn slot(&mut self, i: usize) -> &mut Option<PathBuf> {
        match i {
            0 => &mut self.v2,
            1 => &mut self.memory,
            2 => &mut self.cpuacct,
            3 => &mut self.pids,
            _ => &mut self.cpu,
        }
    }

    fn relabel(&mut self) {
        let parts: Vec<String> = self.parts.iter().flatten().cloned().collect();
        self.label = parts.join(", ");
    }

    /// True when there is nothing to read.
    pub fn is_empty(&self) -> bool {
        self.v2.is_none()
            && self.memory.is_none()
            && self.cpuacct.is_none()
            && self.pids.is_none()
            && self.cpu.is_none()
    }

    /// Keeps only the directories whose processes are all in `server` (or
    /// children of them: a process forked since the listing); the label
    /// follows. `ppid_of` gives a PID's parent (None: gone).
    pub fn keep_own(&mut self, server: &HashSet<u32>, ppid_of: &dyn Fn(u32) -> Option<u32>) {
        let own = |d: &Option<PathBuf>| {
            d.as_ref().is_some_and(|d| {
                read_pids(d).is_some_and(|pids| {
                    !pids.is_empty()
                        && pids.iter().all(|p| {
                            server.contains(p)
                                || match ppid_of(*p) {
                                    None => true,
                                    Some(pp) => server.contains(&pp),
                                }
                        })
                })
            })
        };
        let mut first = None;
        for i in 0..5 {
            let slot = self.slot(i).clone();
            if own(&slot) {
                first = first.or(slot);
            } else {
                *self.slot(i) = None;
                self.parts[i] = None;
            }
        }
        self.procs = first;
        self.relabel();
    }

    /// The processes now (None: unreadable).
    pub fn pids(&self) -> Option<Vec<u32>> {
        read_pids(self.procs.as_ref()?)
    }

    /// Reads the counters: v2 first, then v1, per item.
    pub fn read(&self) -> Reading {
        let mut r = Reading::default();
        if let Some(d) = &self.v2 {
            r.memory_kib = read_u64(&d.join("memory.current")).map(|b| b / 1024);
            r.memory_peak_kib = read_u64(&d.join("memory.peak")).map(|b| b / 1024);
            r.cpu_usec = fs::read_to_string(d.join("cpu.stat"))
                .ok()
                .and_then(|t| stat_field(&t, "usage_usec"));
            r.tasks_peak = read_u64(&d.join("pids.peak"));
            r.memory_limit_kib = read_limit(&d.join("memory.max"))
                .or_else(|| read_limit(&d.join("memory.high")))
                .map(|b| b / 1024);
            if let Some(ev) = read_bounded(&d.join("memory.events")) {
                r.oom_kills = stat_field(&ev, "oom_kill");
                r.limit_hits = match (stat_field(&ev, "max"), stat_field(&ev, "high")) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
                };
            }
            if let Some(t) = read_bounded(&d.join("cpu.max")) {
                r.cpu_quota = parse_quota(&t);
            }
            r.throttled_usec = fs::read_to_string(d.join("cpu.stat"))
                .ok()
                .and_then(|t| stat_field(&t, "throttled_usec"));
        }
        if let Some(d) = &self.memory {
            r.memory_limit_kib = r
                .memory_limit_kib
                .or_else(|| read_limit(&d.join("memory.limit_in_bytes")).map(|b| b / 1024));
            r.oom_kills = r.oom_kills.or_else(|| {
                read_bounded(&d.join("memory.oom_control")).and_then(|t| stat_field(&t, "oom_kill"))
            });
            r.limit_hits = r.limit_hits.or_else(|| read_u64(&d.join("memory.failcnt")));
            r.memory_kib = r
                .memory_kib
                .or_else(|| read_u64(&d.join("memory.usage_in_bytes")).map(|b| b / 1024));
            r.memory_peak_kib = r
                .memory_peak_kib
                .or_else(|| read_u64(&d.join("memory.max_usage_in_bytes")).map(|b| b / 1024));
        }
        if let Some(d) = &self.cpuacct {
            r.cpu_usec = r
                .cpu_usec
                .or_else(|| read_u64(&d.join("cpuacct.usage")).map(|ns| ns / 1000));
        }
        if let Some(d) = &self.pids {
            r.tasks_peak = r.tasks_peak.or_else(|| read_u64(&d.join("pids.peak")));
        }
        if let Some(d) = &self.cpu {
            if r.cpu_quota.is_none() {
                let quota = read_bounded(&d.join("cpu.cfs_quota_us"))
                    .and_then(|q| q.trim().parse::<i64>().ok());
                let period = read_u64(&d.join("cpu.cfs_period_us"));
                r.cpu_quota = match (quota, period) {
                    (Some(q), Some(p)) if q > 0 && p > 0 => Some(q as f64 / p as f64),
                    _ => None,
                };
            }
            r.throttled_usec = r.throttled_usec.or_else(|| {
                fs::read_to_string(d.join("cpu.stat"))
                    .ok()
                    .and_then(|t| stat_field(&t, "throttled_time"))
                    .map(|ns| ns / 1000)
            });
        }
        r.processes = self.pids().map(|v| v.len() as u64);
        r
    }
}

/// The cgroup a process is in, under the cgroup and `/proc` roots (empty when
/// its `cgroup` file is unreadable or it is in root cgroups only).
pub fn of_pid(cg_root: &Path, proc_root: &Path, pid: u32) -> Cgroup {
    let text =
        fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup")).unwrap_or_default();
    Cgroup::of(cg_root, &parse_membership(&text))
}

/// A systemd unit's cgroup: `system.slice/UNIT` in the v2 tree, else in the
/// v1 controllers (its processes from the v1 `name=systemd` tree when there
/// is no v2 one). None when no such cgroup exists.
pub fn of_unit(cg_root: &Path, unit: &str) -> Option<Cgroup> {
    let path = format!("/system.slice/{unit}");
    let mut m = Membership::default();
    if v2_root(cg_root).is_some_and(|b| join(&b, &path).exists()) {
        m.v2 = Some(path.clone());
    }
    for ctl in ["memory", "cpuacct", "pids", "name=systemd"] {
        if v1_mount(cg_root, ctl).is_some_and(|b| join(&b, &path).exists()) {
            m.v1.insert(ctl.to_string(), path.clone());
        }
    }
    let mut c = Cgroup::of(cg_root, &m);
    if c.procs.is_none() {
        if let Some(b) = v1_mount(cg_root, "name=systemd") {
            let d = join(&b, &path);
            if d.join("cgroup.procs").exists() {
                c.procs = Some(d);
            }
        }
    }
    if c.is_empty() && c.procs.is_none() {
        return None;
    }
    if c.label.is_empty() {
        c.label = format!("systemd {path}");
    }
    Some(c)
}

/// The targets with each systemd unit replaced by the PIDs in its cgroup now.
pub fn expand_units(cg_root: &Path, targets: &[Target]) -> Vec<Target> {
    let mut v = Vec::new();
    for t in targets {
        match t {
            Target::Unit(u) => {
                if let Some(pids) = of_unit(cg_root, u).and_then(|c| c.pids()) {
                    v.extend(pids.into_iter().map(Target::Pid));
                }
            }
            other => v.push(other.clone()),
        }
    }
    v
}

/// The parent of a PID under a `/proc` root (None: gone).
pub fn ppid_of(proc_root: &Path, pid: u32) -> Option<u32> {
    fs::read_to_string(proc_root.join(pid.to_string()).join("stat"))
        .ok()
        .as_deref()
        .and_then(procfs::parse_stat_full)
        .map(|s| s.ppid)
}

fn read_pids(dir: &Path) -> Option<Vec<u32>> {
    let text = read_bounded(&dir.join("cgroup.procs"))?;
    Some(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// A counter file, at most 1 MiB (a cgroup file is never larger; a fixture or
/// a special file must not make the watch read forever).
fn read_bounded(path: &Path) -> Option<String> {
    use std::io::Read;
    let f = fs::File::open(path).ok()?;
    let mut s = String::new();
    f.take(1 << 20).read_to_string(&mut s).ok()?;
    Some(s)
}

fn read_u64(path: &Path) -> Option<u64> {
    read_bounded(path)?.trim().parse().ok()
}

/// A memory limit in bytes; None for `max` or v1's "unlimited" (a page-rounded
/// `i64::MAX`, anything from 2^60 up).
fn read_limit(path: &Path) -> Option<u64> {
    let t = read_bounded(path)?;
    let v: u64 = t.trim().parse().ok()?;
    (v < 1 << 60).then_some(v)
}

/// CPUs from a v2 `cpu.max` (`max 100000` or `50000 100000`).
fn parse_quota(text: &str) -> Option<f64> {
    let mut it = text.split_whitespace();
    let q: f64 = it.next()?.parse().ok()?;
    let p: f64 = it.next()?.parse().ok()?;
    (q > 0.0 && p > 0.0).then(|| q / p)
}

fn stat_field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_v1_hybrid_and_v2() {
        let m = parse_membership(
            "9:name=systemd:/system.slice/apache2.service\n4:memory:/x\n2:cpu,cpuacct:/y\n0::/system.slice/apache2.service\n",
        );
        assert_eq!(m.v2.as_deref(), Some("/system.slice/apache2.service"));
        assert_eq!(m.v1["memory"], "/x");
        assert_eq!(m.v1["cpuacct"], "/y");
        assert_eq!(m.v1["cpu"], "/y");
        assert_eq!(m.v1["name=systemd"], "/system.slice/apache2.service");
        assert_eq!(parse_membership("garbage"), Membership::default());
        assert_eq!(
            stat_field("usage_usec 12345\nuser_usec 1\n", "usage_usec"),
            Some(12345)
        );
        assert_eq!(parse_quota("max 100000\n"), None);
        assert_eq!(parse_quota("50000 100000\n"), Some(0.5));
        assert_eq!(
            stat_field(
                "oom_kill_disable 0\nunder_oom 0\noom_kill 227\n",
                "oom_kill"
            ),
            Some(227)
        );
    }
}
