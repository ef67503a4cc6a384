//! The kernel's saturation counters for the server's own resources, in the
//! USE method's terms: the CPUs its processes may run on (affinity, which a
//! cpuset narrows) and the time its threads waited for one (`schedstat`'s
//! run-queue delay), pressure stall information (PSI: `/proc/pressure/*`, or
//! the server's cgroup v2 `*.pressure`), major page faults and block I/O per
//! process (`/proc/PID/io`). Every reader takes the `/proc` root, so tests
//! run on fixtures; a file that cannot be read is `None`, never an error.

use std::fs;
use std::io::Read;
use std::path::Path;

/// Reads a small kernel file (at most 64 KiB: a fixture or special file
/// must not make a sample read forever).
fn read_small(path: &Path) -> Option<String> {
    let f = fs::File::open(path).ok()?;
    let mut s = String::new();
    f.take(64 << 10).read_to_string(&mut s).ok()?;
    Some(s)
}

pub use redline_stats::watch::{format_cpu_list, parse_cpu_list};

/// The CPUs a process may run on (`Cpus_allowed_list` in its `status`: its
/// affinity, already narrowed by its cpuset).
pub fn cpus_allowed(root: &Path, pid: u32) -> Option<Vec<u32>> {
    let text = read_small(&root.join(pid.to_string()).join("status"))?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    parse_cpu_list(line)
}

/// Nanoseconds a process's threads have waited on a run queue (ready to
/// run, no CPU free for them): the second field of each
/// `/proc/PID/task/TID/schedstat`, summed over at most `max_tasks` threads.
pub fn run_delay_ns(root: &Path, pid: u32, max_tasks: usize) -> Option<u64> {
    let dir = root.join(pid.to_string()).join("task");
    let mut total = 0u64;
    let mut any = false;
    for e in fs::read_dir(&dir).ok()?.flatten().take(max_tasks) {
        if let Some(ns) = read_small(&e.path().join("schedstat")).and_then(|t| parse_schedstat(&t))
        {
            total = total.saturating_add(ns);
            any = true;
        }
    }
    any.then_some(total)
}

/// The run-queue delay (ns) from a `schedstat` line: `on-cpu waiting slices`.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Bytes a process made the block layer read and write (`read_bytes`,
/// `write_bytes` of `/proc/PID/io`; readable by its owner or root).
pub fn proc_io(root: &Path, pid: u32) -> Option<(u64, u64)> {
    parse_proc_io(&read_small(&root.join(pid.to_string()).join("io"))?)
}

/// `read_bytes` and `write_bytes` from the text of `/proc/PID/io`.
pub fn parse_proc_io(text: &str) -> Option<(u64, u64)> {
    let field = |k: &str| {
        text.lines().find_map(|l| {
            let (a, b) = l.split_once(':')?;
            (a.trim() == k).then(|| b.trim().parse::<u64>().ok())?
        })
    };
    Some((field("read_bytes")?, field("write_bytes")?))
}

/// One PSI file's cumulative stall times, microseconds: `some` (at least one
/// task stalled) and `full` (all non-idle tasks stalled; absent for the
/// machine's `cpu` on older kernels).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressure {
    /// `some ... total=`.
    pub some_us: u64,
    /// `full ... total=`.
    pub full_us: Option<u64>,
}

/// Parses a PSI file (`some avg10=0.00 avg60=0.00 avg300=0.00 total=123`).
pub fn parse_pressure(text: &str) -> Option<Pressure> {
    let total = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))?
            .split_whitespace()
            .find_map(|f| f.strip_prefix("total="))?
            .parse::<u64>()
            .ok()
    };
    Some(Pressure {
        some_us: total("some ")?,
        full_us: total("full "),
    })
}

/// The three PSI readings (cpu, memory, io) at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressures {
    /// CPU.
    pub cpu: Option<Pressure>,
    /// Memory.
    pub memory: Option<Pressure>,
    /// Block I/O.
    pub io: Option<Pressure>,
}

/// PSI from a cgroup v2 directory (`cpu.pressure`, …) when given and
/// readable there, else the machine's `/proc/pressure/*` under `proc_root`.
/// The bool says whether the cgroup's were read.
pub fn pressures(proc_root: &Path, cgroup_v2: Option<&Path>) -> (Pressures, bool) {
    if let Some(d) = cgroup_v2 {
        let read =
            |k: &str| read_small(&d.join(format!("{k}.pressure"))).and_then(|t| parse_pressure(&t));
        let p = Pressures {
            cpu: read("cpu"),
            memory: read("memory"),
            io: read("io"),
        };
        if p.cpu.is_some() || p.memory.is_some() {
            return (p, true);
        }
    }
    let read =
        |k: &str| read_small(&proc_root.join("pressure").join(k)).and_then(|t| parse_pressure(&t));
    (
        Pressures {
            cpu: read("cpu"),
            memory: read("memory"),
            io: read("io"),
        },
        false,
    )
}

/// Percent of `dt_s` seconds that the stall time grew by, from two readings
/// (`None` when either is missing or time did not pass).
pub fn stall_percent(before: Option<u64>, now: Option<u64>, dt_s: f64) -> Option<f64> {
    let (b, n) = (before?, now?);
    (dt_s > 0.0).then(|| (n.saturating_sub(b) as f64 / 1e6 / dt_s * 100.0).min(100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(
            parse_cpu_list("0-3,6,8-9\n"),
            Some(vec![0, 1, 2, 3, 6, 8, 9])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list("0-4000000"), None);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(format_cpu_list(&[1]), "1");
    }

    #[test]
    fn kernel_formats() {
        assert_eq!(parse_schedstat("4821 99812 17\n"), Some(99812));
        assert_eq!(parse_schedstat(""), None);
        let io = "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_proc_io(io), Some((4096, 8192)));
        let p = parse_pressure(
            "some avg10=10.71 avg60=4.08 avg300=1.11 total=3912135\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=17\n",
        )
        .unwrap();
        assert_eq!(p.some_us, 3_912_135);
        assert_eq!(p.full_us, Some(17));
        assert_eq!(
            parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"),
            Some(Pressure {
                some_us: 5,
                full_us: None
            })
        );
        assert_eq!(stall_percent(Some(0), Some(500_000), 1.0), Some(50.0));
        assert_eq!(stall_percent(Some(0), Some(5_000_000), 1.0), Some(100.0));
        assert_eq!(stall_percent(None, Some(1), 1.0), None);
    }

    #[test]
    fn this_process_is_readable() {
        let root = Path::new("/proc");
        let me = std::process::id();
        let cpus = cpus_allowed(root, me).expect("own Cpus_allowed_list");
        assert!(!cpus.is_empty());
        if Path::new("/proc/self/task").exists() && Path::new("/proc/self/schedstat").exists() {
            assert!(run_delay_ns(root, me, 64).is_some());
        }
    }
}
