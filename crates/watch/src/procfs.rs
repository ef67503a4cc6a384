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
    /// cutime + cstime: CPU of the children this process has reaped (waited
    /// for), clock ticks. A CGI child lives and dies between two samples; its
    /// CPU shows up here, in its parent, once the parent reaps it.
    pub child_ticks: u64,
    /// The state letter from `stat` (`R`, `S`, `Z` for a zombie…).
    pub state: char,
    /// Threads.
    pub threads: u32,
    /// Major page faults of the process and its reaped children.
    pub major_faults: u64,
    /// Resident set size, KiB.
    pub rss_kib: u64,
    /// Proportional set size, KiB (RSS when `smaps_rollup` is unreadable).
    pub pss_kib: u64,
    /// Private_Clean + Private_Dirty, KiB (estimated from `statm` when unreadable).
    pub private_kib: u64,
    /// Swapped-out memory of the process, KiB.
    pub swap_kib: u64,
    /// Kernel memory the process costs outside its own pages, KiB: page
    /// tables (`VmPTE` in `status`) plus one kernel stack per thread
    /// ([`KERNEL_STACK_KIB`]). Not in RSS, PSS or private memory.
    pub kernel_kib: u64,
    /// True when PSS and private came from `smaps_rollup`, or when there was
    /// nothing to read (a zombie or a kernel thread has no memory of its own):
    /// false only when they had to be estimated because `smaps_rollup` was
    /// not readable (another user's process, without root).
    pub exact: bool,
}

/// The kernel stack of one thread, KiB: `THREAD_SIZE`, 16 KiB on x86-64 and
/// arm64 (since Linux 3.15 and 4.x), 8 KiB on 32-bit x86 and arm. Each
/// thread has one, in kernel memory that no per-process figure shows.
pub const KERNEL_STACK_KIB: u64 = if cfg!(target_pointer_width = "64") {
    16
} else {
    8
};

/// What `/proc/PID/stat` says about a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// `comm`.
    pub comm: String,
    /// State letter (field 3).
    pub state: char,
    /// Parent PID (field 4).
    pub ppid: u32,
    /// utime + stime (fields 14, 15), clock ticks.
    pub ticks: u64,
    /// cutime + cstime (fields 16, 17), clock ticks: reaped children's CPU.
    pub child_ticks: u64,
    /// Threads (field 20).
    pub threads: u32,
    /// majflt + cmajflt (fields 12, 13): major page faults of the process
    /// and of the children it reaped.
    pub major_faults: u64,
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
    /// Connection attempts dropped by a full accept queue since boot
    /// (`net/netstat` TcpExt ListenOverflows; `None` when unreadable).
    pub listen_overflows: Option<u64>,
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
    let s = parse_stat_full(text)?;
    Some((s.comm, s.ppid, s.ticks, s.threads))
}

/// Parses `/proc/PID/stat` into a [`Stat`].
pub fn parse_stat_full(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] = state (field 3), so field n is rest[n - 3].
    let state = rest.first()?.chars().next()?;
    let ppid = rest.get(1)?.parse().ok()?;
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    // cutime and cstime are signed in the kernel's format; never negative in practice.
    let cutime: i64 = rest.get(13)?.parse().ok()?;
    let cstime: i64 = rest.get(14)?.parse().ok()?;
    let threads = rest.get(17)?.parse().ok()?;
    let majflt: u64 = rest.get(9).and_then(|v| v.parse().ok()).unwrap_or(0);
    let cmajflt: u64 = rest.get(10).and_then(|v| v.parse().ok()).unwrap_or(0);
    Some(Stat {
        comm,
        state,
        ppid,
        ticks: utime + stime,
        child_ticks: (cutime.max(0) + cstime.max(0)) as u64,
        threads,
        major_faults: majflt.saturating_add(cmajflt),
    })
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

/// Parses `/proc/net/netstat` (pairs of lines, names then values, each
/// starting with its group): TcpExt ListenOverflows.
pub fn parse_listen_overflows(text: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    names
        .split_ascii_whitespace()
        .zip(values.split_ascii_whitespace())
        .find(|(n, _)| *n == "ListenOverflows")
        .and_then(|(_, v)| v.parse().ok())
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
        listen_overflows: fs::read_to_string(root.join("net/netstat"))
            .ok()
            .and_then(|t| parse_listen_overflows(&t)),
    }
}

fn basename(s: &str) -> String {
    let s = s.trim_end_matches(" (deleted)");
    s.rsplit('/').next().unwrap_or(s).to_string()
}

/// Reads one process's name, parent, state, threads and CPU from `stat`
/// (and `exe` or `cmdline`), without its memory: cheap enough for every
/// process at every sample. None when it is gone.
///
/// With [`read_memory`]: None when it vanished (also when it exits between the
/// reads of its files: such a process is skipped, not estimated). A zombie or
/// a kernel thread has no memory of its own: it is read with zero memory and
/// counts as exact. Memory is estimated (and `exact` false) only when
/// `smaps_rollup` is refused (another user's process, without root) or does
/// not exist (Linux before 4.14).
pub fn read_identity(root: &Path, pid: u32) -> Option<ProcInfo> {
    let dir = root.join(pid.to_string());
    let st = parse_stat_full(&fs::read_to_string(dir.join("stat")).ok()?)?;
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
    Some(ProcInfo {
        pid,
        ppid: st.ppid,
        comm: st.comm,
        exe,
        cpu_ticks: st.ticks,
        child_ticks: st.child_ticks,
        state: st.state,
        threads: st.threads,
        major_faults: st.major_faults,
        exact: true,
        ..Default::default()
    })
}

/// Reads one process with its memory ([`read_identity`], then [`read_memory`]).
pub fn read_process(root: &Path, pid: u32) -> Option<ProcInfo> {
    let p = read_identity(root, pid)?;
    read_memory(root, p)
}

/// Adds a process's memory (from `smaps_rollup`, `status`, `statm`) to what
/// [`read_identity`] read; None when it exited meanwhile.
pub fn read_memory(root: &Path, mut p: ProcInfo) -> Option<ProcInfo> {
    let dir = root.join(p.pid.to_string());
    if matches!(p.state, 'Z' | 'X') {
        // Exited, not yet reaped: no memory left to read, nothing estimated.
        return Some(p);
    }
    let st_threads = p.threads;
    let status_text = fs::read_to_string(dir.join("status"));
    let status = parse_kb_table(status_text.as_deref().unwrap_or_default());
    p.kernel_kib = status.get("VmPTE").copied().unwrap_or(0) + st_threads as u64 * KERNEL_STACK_KIB;
    match fs::read_to_string(dir.join("smaps_rollup")) {
        Ok(s) => {
            let t = parse_kb_table(&s);
            if let Some(pss) = t.get("Pss") {
                p.rss_kib = t.get("Rss").copied().unwrap_or(0);
                p.pss_kib = *pss;
                p.private_kib = t.get("Private_Clean").copied().unwrap_or(0)
                    + t.get("Private_Dirty").copied().unwrap_or(0);
                p.swap_kib = t.get("Swap").copied().unwrap_or(0);
                return Some(p);
            }
            // Empty: a kernel thread, or the process exited since its stat was read.
            return still_there(&dir).then(|| {
                p.kernel_kib = 0;
                p
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {}
        // Gone (ENOENT, ESRCH) or turned zombie since its stat was read: skipped.
        Err(_) if !still_there(&dir) => return None,
        // Still there without the file: a kernel without smaps_rollup
        // (before 4.14), estimated below.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        // Still there, but its memory could not be read just now (a CGI
        // child between fork, exec and exit, on a busy machine): skipped for
        // this sample, not guessed (its CPU is counted at the next sample or
        // through its parent's reaped children).
        Err(_) => return None,
    }
    if status_text.is_err() {
        return still_there(&dir).then_some(p);
    }
    p.exact = false;
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

/// True when the process behind `dir` still runs (its `stat` reads and it is
/// not a zombie): a process that exited between two reads is skipped.
fn still_there(dir: &Path) -> bool {
    fs::read_to_string(dir.join("stat"))
        .ok()
        .as_deref()
        .and_then(parse_stat_full)
        .is_some_and(|s| !matches!(s.state, 'Z' | 'X'))
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

/// Every process under a `/proc` root without its memory ([`read_identity`]):
/// what a sample lists before reading the memory of the chosen ones only.
pub fn list_processes(root: &Path) -> Vec<ProcInfo> {
    pids(root)
        .into_iter()
        .filter_map(|p| read_identity(root, p))
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

/// A watch target: a PID, a process name or a systemd unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// This process and its descendants.
    Pid(u32),
    /// Processes whose comm or exe name matches, and their descendants.
    Name(String),
    /// A systemd unit (`apache2.service`): the processes in its cgroup.
    Unit(String),
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
                "--watch {s:?}: give a PID, a process name (e.g. apache2, nginx) or a systemd unit (apache2.service), not a path"
            ));
        }
        if s.len() > ".service".len() && s.ends_with(".service") {
            return Ok(Target::Unit(s.to_string()));
        }
        Ok(Target::Name(s.to_string()))
    }

    /// The text form (`1234`, `nginx` or `nginx.service`).
    pub fn label(&self) -> String {
        match self {
            Target::Pid(p) => p.to_string(),
            Target::Name(n) | Target::Unit(n) => n.clone(),
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
            // Resolved to PIDs by `cgroup::expand_units` before selecting.
            Target::Unit(_) => false,
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

/// One running instance of a server: a process matching the name whose
/// parent does not (Apache's or nginx's main process), with its children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The main process.
    pub pid: u32,
    /// Its parent (1, a shell, a test…).
    pub ppid: u32,
    /// Its name (`comm`).
    pub name: String,
    /// The TCP addresses it listens on (`127.0.0.1:8080`, `[::]:80`), sorted.
    pub listen: Vec<String>,
}

impl Instance {
    /// `pid 123 (parent 1, 127.0.0.1:8080)` for lists and labels.
    pub fn describe(&self) -> String {
        let on = if self.listen.is_empty() {
            String::new()
        } else {
            format!(", {}", self.listen.join(" "))
        };
        format!("pid {} (parent {}{on})", self.pid, self.ppid)
    }
}

/// The instances of a named server among `all`: the processes matching the
/// name whose parent does not match it, sorted by PID, with the addresses
/// each listens on (from `net/tcp`, `net/tcp6` and its `fd` links; empty
/// when they are unreadable).
pub fn instances(root: &Path, all: &[ProcInfo], name: &str) -> Vec<Instance> {
    let me = std::process::id();
    let hit =
        |p: &ProcInfo| p.pid != me && (name_matches(name, &p.comm) || name_matches(name, &p.exe));
    let by_pid: HashMap<u32, &ProcInfo> = all.iter().map(|p| (p.pid, p)).collect();
    let mut sockets: Option<HashMap<u64, String>> = None;
    let mut v: Vec<Instance> = all
        .iter()
        .filter(|p| hit(p) && !by_pid.get(&p.ppid).is_some_and(|q| hit(q)))
        .map(|p| {
            let socks = sockets.get_or_insert_with(|| listening_sockets(root));
            let mut listen: Vec<String> = socket_inodes(root, p.pid)
                .into_iter()
                .filter_map(|i| socks.get(&i).cloned())
                .collect();
            listen.sort();
            listen.dedup();
            Instance {
                pid: p.pid,
                ppid: p.ppid,
                name: p.comm.clone(),
                listen,
            }
        })
        .collect();
    v.sort_by_key(|i| i.pid);
    v
}

/// Listening TCP sockets under a `/proc` root: inode → `addr:port`.
pub fn listening_sockets(root: &Path) -> HashMap<u64, String> {
    let mut m = HashMap::new();
    for (file, v6) in [("net/tcp", false), ("net/tcp6", true)] {
        let text = fs::read_to_string(root.join(file)).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if f.len() < 10 || f[3] != "0A" {
                continue;
            }
            if let (Some(addr), Ok(inode)) = (parse_net_addr(f[1], v6), f[9].parse::<u64>()) {
                m.insert(inode, addr);
            }
        }
    }
    m
}

/// `0100007F:1F90` → `127.0.0.1:8080`; IPv6 as `[::1]:8080`. The kernel
/// prints each 32-bit word of the address in host byte order.
pub fn parse_net_addr(s: &str, v6: bool) -> Option<String> {
    let (a, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..a.len() / 8)
        .map(|i| u32::from_str_radix(a.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<_>>()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    match (v6, bytes.len()) {
        (false, 4) => Some(format!(
            "{}:{port}",
            std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])
        )),
        (true, 16) => {
            let b: [u8; 16] = bytes.try_into().ok()?;
            Some(format!("[{}]:{port}", std::net::Ipv6Addr::from(b)))
        }
        _ => None,
    }
}

/// The socket inodes among a process's open files (`fd/N -> socket:[inode]`).
pub fn socket_inodes(root: &Path, pid: u32) -> Vec<u64> {
    let Ok(rd) = fs::read_dir(root.join(pid.to_string()).join("fd")) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .take(65_536)
        .filter_map(|e| fs::read_link(e.path()).ok())
        .filter_map(|l| {
            l.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// A process's resource limits that bound a worker count (soft limits from
/// `/proc/PID/limits`; None: unlimited or unreadable).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// `Max open files`: connections (and files) one process may hold.
    pub open_files: Option<u64>,
    /// `Max processes`: tasks (processes and threads) its user may run.
    pub processes: Option<u64>,
}

/// Parses `/proc/PID/limits`.
pub fn parse_limits(text: &str) -> Limits {
    let soft = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
    };
    Limits {
        open_files: soft("Max open files"),
        processes: soft("Max processes"),
    }
}

/// Reads a process's limits under a `/proc` root.
pub fn limits(root: &Path, pid: u32) -> Limits {
    parse_limits(&fs::read_to_string(root.join(pid.to_string()).join("limits")).unwrap_or_default())
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
        let netstat = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 42 43\nIpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(parse_listen_overflows(netstat), Some(42));
        assert_eq!(parse_listen_overflows("TcpExt: ListenDrops\n"), None);
        assert_eq!(parse_listen_overflows(""), None);
        assert_eq!(parse_loadavg("0.50 1.00 2.25 1/100 42\n"), [0.5, 1.0, 2.25]);
    }
}
