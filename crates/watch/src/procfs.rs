//! Reading `/proc` by hand: processes (name, parent, CPU ticks, memory from
//! `smaps_rollup` or `status`/`statm`) and the machine (`meminfo`, `loadavg`,
//! `vmstat`). Every reader takes the `/proc` root, so tests run on fixtures.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

/// One process as read from `/proc/PID`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcInfo {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// `comm` (at most 15 bytes, e.g. `apache2`, `php-fpm8.2`).
    pub comm: String,
    /// Basename of `exe`, or of `argv[0]` when `exe` is unreadable.
    pub exe: String,
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    /// Threads.
    pub threads: u32,
    /// Resident set size, KiB.
    pub rss_kib: u64,
    /// Proportional set size, KiB (RSS when `smaps_rollup` is unreadable).
    pub pss_kib: u64,
    /// Private_Clean + Private_Dirty, KiB (estimated from `statm` when unreadable).
    pub private_kib: u64,
    /// Swapped-out memory of the process, KiB.
    pub swap_kib: u64,
    /// True when PSS and private came from `smaps_rollup`.
    pub exact: bool,
}

/// Machine-wide memory, load and swap counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineInfo {
    /// MemTotal, KiB.
    pub mem_total_kib: u64,
    /// MemAvailable, KiB.
    pub mem_available_kib: u64,
    /// SwapTotal, KiB.
    pub swap_total_kib: u64,
    /// SwapFree, KiB.
    pub swap_free_kib: u64,
    /// Load averages (1, 5, 15 minutes).
    pub load: [f64; 3],
    /// Pages swapped in since boot.
    pub pswpin: u64,
    /// Pages swapped out since boot.
    pub pswpout: u64,
}

/// Parses `Key:   123 kB` lines into KiB values.
pub fn parse_kb_table(text: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if let Some(n) = v.split_whitespace().next().and_then(|n| n.parse().ok()) {
                m.insert(k.trim().to_string(), n);
            }
        }
    }
    m
}

/// Parses `/proc/PID/stat`: (comm, ppid, utime + stime, threads). The comm is in
/// parentheses and may itself contain spaces and parentheses.
pub fn parse_stat(text: &str) -> Option<(String, u32, u64, u32)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] = state (field 3), so field n is rest[n - 3].
    let ppid = rest.get(1)?.parse().ok()?;
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    let threads = rest.get(17)?.parse().ok()?;
    Some((comm, ppid, utime + stime, threads))
}

/// Parses `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> [f64; 3] {
    let mut l = [0.0; 3];
    for (i, v) in text.split_whitespace().take(3).enumerate() {
        l[i] = v.parse().unwrap_or(0.0);
    }
    l
}

/// Parses `/proc/vmstat`: (pswpin, pswpout).
pub fn parse_vmstat(text: &str) -> (u64, u64) {
    let (mut i, mut o) = (0, 0);
    for line in text.lines() {
        let mut it = line.split_whitespace();
        match (it.next(), it.next().and_then(|v| v.parse().ok())) {
            (Some("pswpin"), Some(v)) => i = v,
            (Some("pswpout"), Some(v)) => o = v,
            _ => {}
        }
    }
    (i, o)
}

/// Reads the machine counters under a `/proc` root.
pub fn machine(root: &Path) -> MachineInfo {
    let mem = parse_kb_table(&fs::read_to_string(root.join("meminfo")).unwrap_or_default());
    let (pswpin, pswpout) =
        parse_vmstat(&fs::read_to_string(root.join("vmstat")).unwrap_or_default());
    let g = |k: &str| mem.get(k).copied().unwrap_or(0);
    MachineInfo {
        mem_total_kib: g("MemTotal"),
        mem_available_kib: mem
            .get("MemAvailable")
            .copied()
            .unwrap_or(g("MemFree") + g("Cached")),
        swap_total_kib: g("SwapTotal"),
        swap_free_kib: g("SwapFree"),
        load: parse_loadavg(&fs::read_to_string(root.join("loadavg")).unwrap_or_default()),
        pswpin,
        pswpout,
    }
}

fn basename(s: &str) -> String {
    let s = s.trim_end_matches(" (deleted)");
    s.rsplit('/').next().unwrap_or(s).to_string()
}

/// Reads one process; None when it vanished or is unreadable.
pub fn read_process(root: &Path, pid: u32) -> Option<ProcInfo> {
    let dir = root.join(pid.to_string());
    let (comm, ppid, cpu_ticks, threads) = parse_stat(&fs::read_to_string(dir.join("stat")).ok()?)?;
    let exe = match fs::read_link(dir.join("exe")) {
        Ok(p) => basename(&p.to_string_lossy()),
        Err(_) => {
            let cmd = fs::read(dir.join("cmdline")).unwrap_or_default();
            let argv0 = cmd.split(|b| *b == 0).next().unwrap_or(&[]);
            let argv0 = String::from_utf8_lossy(argv0);
            // "nginx: worker process" style titles: the name is before the colon.
            let first = argv0.split([' ', ':']).next().unwrap_or("");
            basename(first)
        }
    };
    let mut p = ProcInfo {
        pid,
        ppid,
        comm,
        exe,
        cpu_ticks,
        threads,
        ..Default::default()
    };
    if let Ok(s) = fs::read_to_string(dir.join("smaps_rollup")) {
        let t = parse_kb_table(&s);
        if let Some(pss) = t.get("Pss") {
            p.rss_kib = t.get("Rss").copied().unwrap_or(0);
            p.pss_kib = *pss;
            p.private_kib = t.get("Private_Clean").copied().unwrap_or(0)
                + t.get("Private_Dirty").copied().unwrap_or(0);
            p.swap_kib = t.get("Swap").copied().unwrap_or(0);
            p.exact = true;
            return Some(p);
        }
    }
    let status = parse_kb_table(&fs::read_to_string(dir.join("status")).unwrap_or_default());
    p.rss_kib = status.get("VmRSS").copied().unwrap_or(0);
    p.swap_kib = status.get("VmSwap").copied().unwrap_or(0);
    p.pss_kib = p.rss_kib;
    // RssAnon is private except for pages shared with the parent after fork;
    // statm's shared field is file-backed resident pages: RSS - shared estimates private.
    let shared_kib = fs::read_to_string(dir.join("statm"))
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(2)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map(|pages| pages * page_kib());
    p.private_kib = match (status.get("RssAnon"), shared_kib) {
        (Some(anon), _) => *anon,
        (None, Some(sh)) => p.rss_kib.saturating_sub(sh),
        _ => p.rss_kib,
    };
    Some(p)
}

/// The page size in KiB.
pub fn page_kib() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if ps > 0 {
        ps as u64 / 1024
    } else {
        4
    }
}

/// Clock ticks per second (for CPU times in `stat`).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// PIDs present under a `/proc` root.
pub fn pids(root: &Path) -> Vec<u32> {
    let mut v: Vec<u32> = fs::read_dir(root)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Reads every process under a `/proc` root (those that vanish are skipped).
pub fn all_processes(root: &Path) -> Vec<ProcInfo> {
    pids(root)
        .into_iter()
        .filter_map(|p| read_process(root, p))
        .collect()
}

/// True when a process name matches a target name: equal, or the target
/// followed by a version (`php-fpm` matches `php-fpm8.2`, `httpd` matches
/// `httpd.worker`), or, for names cut to 15 bytes in `comm`, a prefix.
pub fn name_matches(target: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    if name == target {
        return true;
    }
    if let Some(rest) = name.strip_prefix(target) {
        return rest
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.' || c == '-' || c == ':');
    }
    name.len() == 15 && target.starts_with(name)
}

/// A watch target: a PID or a process name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// This process and its descendants.
    Pid(u32),
    /// Processes whose comm or exe name matches, and their descendants.
    Name(String),
}

impl Target {
    /// Parses `1234` or `nginx`; an empty string or one with a `/` is refused.
    pub fn parse(s: &str) -> Result<Target, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err(
                "empty --watch target: give a PID or a process name such as apache2".into(),
            );
        }
        if let Ok(p) = s.parse::<u32>() {
            if p == 0 {
                return Err("--watch 0 is not a process id".into());
            }
            return Ok(Target::Pid(p));
        }
        if s.contains('/') || s.chars().any(|c| c.is_whitespace()) {
            return Err(format!(
                "--watch {s:?}: give a PID or a process name (e.g. apache2, nginx), not a path"
            ));
        }
        Ok(Target::Name(s.to_string()))
    }

    /// The text form (`1234` or `nginx`).
    pub fn label(&self) -> String {
        match self {
            Target::Pid(p) => p.to_string(),
            Target::Name(n) => n.clone(),
        }
    }
}

/// The processes matching the targets, plus all their descendants, sorted by PID.
pub fn select<'a>(all: &'a [ProcInfo], targets: &[Target]) -> Vec<&'a ProcInfo> {
    let me = std::process::id();
    let mut chosen: HashMap<u32, bool> = HashMap::new();
    for p in all {
        let hit = targets.iter().any(|t| match t {
            Target::Pid(pid) => p.pid == *pid,
            Target::Name(n) => p.pid != me && (name_matches(n, &p.comm) || name_matches(n, &p.exe)),
        });
        if hit {
            chosen.insert(p.pid, true);
        }
    }
    // Descendants: repeat until no change (bounded by the process count).
    let children: HashMap<u32, Vec<u32>> = all.iter().fold(HashMap::new(), |mut m, p| {
        m.entry(p.ppid).or_default().push(p.pid);
        m
    });
    let mut stack: Vec<u32> = chosen.keys().copied().collect();
    let mut guard = 0usize;
    while let Some(pid) = stack.pop() {
        guard += 1;
        if guard > all.len() * 2 + 16 {
            break;
        }
        for c in children.get(&pid).into_iter().flatten() {
            if chosen.insert(*c, true).is_none() {
                stack.push(*c);
            }
        }
    }
    let mut v: Vec<&ProcInfo> = all.iter().filter(|p| chosen.contains_key(&p.pid)).collect();
    v.sort_by_key(|p| p.pid);
    v
}

/// Environment variable that replaces `/proc` (for tests only: a fake tree
/// whose files the test rewrites, e.g. `vmstat` to simulate swapping).
pub const PROC_ROOT_ENV: &str = "REDLINE_PROC_ROOT";

/// The `/proc` root: `/proc`, or `$REDLINE_PROC_ROOT` when set and non-empty (tests only).
pub fn proc_root() -> PathBuf {
    match std::env::var_os(PROC_ROOT_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from("/proc"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_odd_comm() {
        let s = "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 17 5 0 0 20 0 3 0 100 1000 200 18446744073709551615";
        let (comm, ppid, ticks, threads) = parse_stat(s).unwrap();
        assert_eq!(comm, "a (b) c");
        assert_eq!(ppid, 1);
        assert_eq!(ticks, 22);
        assert_eq!(threads, 3);
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn names() {
        assert!(name_matches("php-fpm", "php-fpm8.2"));
        assert!(name_matches("apache2", "apache2"));
        assert!(name_matches("apache", "apache2"));
        assert!(!name_matches("nginx", "nginxx"));
        assert!(!name_matches("nginx", "nginx_exporter"));
        assert!(name_matches("php-fpm-very-long-name", "php-fpm-very-lo"));
        assert!(Target::parse("").is_err());
        assert!(Target::parse("/usr/sbin/nginx").is_err());
        assert_eq!(Target::parse("42").unwrap(), Target::Pid(42));
    }

    #[test]
    fn vmstat_loadavg() {
        assert_eq!(parse_vmstat("pgpgin 5\npswpin 7\npswpout 9\n"), (7, 9));
        assert_eq!(parse_loadavg("0.50 1.00 2.25 1/100 42\n"), [0.5, 1.0, 2.25]);
    }
}
