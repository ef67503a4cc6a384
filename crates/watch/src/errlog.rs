//! The server's own words: its error log, read for the lines that name a
//! limit it hit during a run (Apache "server reached MaxRequestWorkers
//! setting", nginx "worker_connections are not enough", php-fpm "server
//! reached pm.max_children setting", "Too many open files", out of memory).
//!
//! The logs are found from the configuration (`--server-config`, or the one
//! the watched process was started with) and from the files the watched
//! processes hold open. Their size and inode are noted when the run starts
//! ([`ErrorLogs::start`]); at the end what was appended is read (at most the
//! last 8 MiB of each, from the start again when the file shrank or was
//! replaced: rotation) and matched against [`PATTERNS`] ([`ErrorLogs::finish`]).
//! The example line kept is shortened and stripped of query strings and
//! credentials ([`redact`]): a log line is outside input and may hold secrets.

use crate::detect::ServerKind;
use redline_stats::record::{LogFinding, ServerLog};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most read of one log at the end of a run (its last bytes).
pub const MAX_READ: u64 = 8 << 20;
/// The longest example line kept, in characters.
pub const MAX_EXAMPLE: usize = 240;
/// The most log files read for one run.
const MAX_LOGS: usize = 8;

/// A line that names a limit: what it contains, and what ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    /// Lowercase text the line contains.
    pub needle: &'static str,
    /// The resource: `worker_pool`, `fds`, `upstream` or `memory`.
    pub resource: &'static str,
    /// The directive (or setting) that sets the limit.
    pub directive: &'static str,
    /// The server's words, as kept in the record.
    pub message: &'static str,
}

const fn p(
    needle: &'static str,
    resource: &'static str,
    directive: &'static str,
    message: &'static str,
) -> Pattern {
    Pattern {
        needle,
        resource,
        directive,
        message,
    }
}

/// The lines matched, first match wins (specific before generic). Wording
/// checked against each server's source: Apache's prefork (AH00161) and
/// worker/event (AH00484, AH00485) MPMs, nginx's event and upstream modules,
/// php-fpm's process manager (dynamic: "pm.max_children", ondemand:
/// "max_children"), lighttpd's server.c, Apache's child status
/// ("exit signal Killed (9)"), php-fpm's ("exited on signal 9").
pub const PATTERNS: &[Pattern] = &[
    // Worker pools and connection slots.
    p(
        "server reached maxrequestworkers setting",
        "worker_pool",
        "MaxRequestWorkers",
        "server reached MaxRequestWorkers setting",
    ),
    p(
        "scoreboard is full, not at maxrequestworkers",
        "worker_pool",
        "ServerLimit",
        "scoreboard is full, not at MaxRequestWorkers",
    ),
    p(
        "worker_connections are not enough",
        "worker_pool",
        "worker_connections",
        "worker_connections are not enough",
    ),
    p(
        "server reached pm.max_children setting",
        "worker_pool",
        "pm.max_children",
        "server reached pm.max_children setting",
    ),
    p(
        "server reached max_children setting",
        "worker_pool",
        "pm.max_children",
        "server reached max_children setting",
    ),
    p(
        "seems busy (you may need to increase pm.start_servers, or pm.min/max_spare_servers)",
        "worker_pool",
        "pm.start_servers / pm.min_spare_servers / pm.max_spare_servers",
        "seems busy (you may need to increase pm.start_servers, or pm.min/max_spare_servers)",
    ),
    p(
        "sockets disabled, connection limit reached",
        "worker_pool",
        "server.max-connections",
        "sockets disabled, connection limit reached",
    ),
    // File descriptors.
    p(
        "sockets disabled, out-of-fds",
        "fds",
        "server.max-fds",
        "sockets disabled, out-of-fds",
    ),
    p(
        "(24: too many open files)",
        "fds",
        "worker_rlimit_nofile",
        "Too many open files",
    ),
    p(
        "too many open files",
        "fds",
        "LimitNOFILE (ulimit -n)",
        "Too many open files",
    ),
    // The backend behind a proxy.
    p(
        "upstream timed out",
        "upstream",
        "proxy_read_timeout / the upstream's capacity",
        "upstream timed out",
    ),
    p(
        "no live upstreams",
        "upstream",
        "max_fails / fail_timeout (every upstream server marked down)",
        "no live upstreams",
    ),
    p(
        "connect() failed (111",
        "upstream",
        "the upstream server (refused: not listening, or its backlog full)",
        "connect() failed (111: Connection refused)",
    ),
    p(
        "(11: resource temporarily unavailable) while connecting to upstream",
        "upstream",
        "listen.backlog of the upstream (php-fpm) and its pool",
        "(11: Resource temporarily unavailable) while connecting to upstream",
    ),
    // Memory.
    p(
        "allowed memory size of",
        "memory",
        "memory_limit (php.ini)",
        "Allowed memory size exhausted",
    ),
    p(
        "cannot allocate memory",
        "memory",
        "the memory limit (cgroup memory.max / MemoryMax=) or fewer workers",
        "Cannot allocate memory",
    ),
    p(
        "out of memory",
        "memory",
        "the memory limit (cgroup memory.max / MemoryMax=) or fewer workers",
        "Out of memory",
    ),
    p(
        "exit signal killed (9)",
        "memory",
        "the memory limit (cgroup memory.max / MemoryMax=) or fewer workers",
        "child killed by signal 9 (the OOM killer's signal)",
    ),
    p(
        "exited on signal 9",
        "memory",
        "the memory limit (cgroup memory.max / MemoryMax=) or fewer workers",
        "child killed by signal 9 (the OOM killer's signal)",
    ),
    p(
        "killed by signal 9",
        "memory",
        "the memory limit (cgroup memory.max / MemoryMax=) or fewer workers",
        "child killed by signal 9 (the OOM killer's signal)",
    ),
];

/// The pattern a log line matches (case-insensitive), if any.
pub fn classify(line: &str) -> Option<&'static Pattern> {
    let l = line.to_ascii_lowercase();
    PATTERNS.iter().find(|p| l.contains(p.needle))
}

/// A log line made safe to keep: control characters replaced, credentials
/// in URLs (`user:pass@`) removed, query strings cut to `?…`, the values of
/// Authorization and Cookie headers (and `password=`, `token=`) cut to `…`,
/// and at most [`MAX_EXAMPLE`] characters (a longer one ends in `…`).
pub fn redact(line: &str) -> String {
    // Bound the work first: a log line can be megabytes.
    let raw: String = line
        .chars()
        .take(4 * MAX_EXAMPLE)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut s = strip_userinfo(&raw);
    s = cut_queries(&s);
    for key in [
        "proxy-authorization",
        "authorization",
        "set-cookie",
        "cookie",
        "password",
        "passwd",
        "token",
        "secret",
        "api_key",
        "apikey",
    ] {
        s = cut_value(&s, key);
    }
    let n = s.chars().count();
    if n > MAX_EXAMPLE {
        let mut t: String = s.chars().take(MAX_EXAMPLE - 1).collect();
        t.push('…');
        t
    } else {
        s
    }
}

/// Where a URL-ish or header value ends.
fn ends_value(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';' | '>' | ')' | ']')
}

/// `scheme://user:pass@host` -> `scheme://host`.
fn strip_userinfo(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        out.push_str(&rest[..i + 3]);
        rest = &rest[i + 3..];
        let end = rest
            .find(|c: char| ends_value(c) || c == '/' || c == '?' || c == '#')
            .unwrap_or(rest.len());
        match rest[..end].rfind('@') {
            Some(at) => rest = &rest[at + 1..],
            None => {
                out.push_str(&rest[..end]);
                rest = &rest[end..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Everything from a `?` to the end of its value becomes `?…`.
fn cut_queries(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.char_indices().peekable();
    while let Some((_, c)) = it.next() {
        if c == '?' {
            let mut cut = false;
            while let Some(&(_, n)) = it.peek() {
                if ends_value(n) {
                    break;
                }
                cut = true;
                it.next();
            }
            out.push('?');
            if cut {
                out.push('…');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `key: value`, `key=value`, `"key": "value"` (case-insensitive key) ->
/// the value becomes `…` (to the end of the line for the headers, whose
/// values hold spaces: `Authorization: Basic xyz`).
fn cut_value(s: &str, key: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let mut out = String::with_capacity(s.len());
    let mut from = 0;
    let mut search = 0;
    while let Some(rel) = lower[search..].find(key) {
        let k = search + rel;
        let after = k + key.len();
        // Only a whole word: not `xtoken`, not `tokens`.
        let before_ok = k == 0 || !lower.as_bytes()[k - 1].is_ascii_alphanumeric();
        let rest = &s[after..];
        let sep = rest
            .char_indices()
            .find(|(_, c)| !matches!(c, ' ' | '"' | '\''))
            .filter(|(_, c)| *c == ':' || *c == '=');
        let Some((si, sc)) = sep.filter(|_| before_ok) else {
            search = after;
            continue;
        };
        let mut v = after + si + sc.len_utf8();
        // Skip spaces and an opening quote.
        while let Some(c) = s[v..].chars().next() {
            if c == ' ' || c == '"' || c == '\'' {
                v += c.len_utf8();
            } else {
                break;
            }
        }
        let header = key.contains("auth") || key.contains("cookie");
        let end = if header {
            s[v..]
                .find(['"', '\'', ','])
                .map(|e| v + e)
                .unwrap_or(s.len())
        } else {
            s[v..].find(ends_value).map(|e| v + e).unwrap_or(s.len())
        };
        if end > v {
            out.push_str(&s[from..v]);
            out.push('…');
            from = end;
        }
        search = end.max(after);
    }
    out.push_str(&s[from..]);
    out
}

/// This machine's offset from UTC now, in seconds (logs are written in
/// local time).
pub fn local_utc_offset_s() -> i64 {
    // SAFETY: time(NULL) and localtime_r with a valid tm out-pointer have no
    // other preconditions.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            0
        } else {
            tm.tm_gmtoff
        }
    }
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn month(s: &str) -> Option<i64> {
    let m = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let l = s.get(..3)?.to_ascii_lowercase();
    m.iter().position(|x| *x == l).map(|i| i as i64 + 1)
}

/// `HH:MM:SS[.frac]` -> milliseconds into the day.
fn clock_ms(s: &str) -> Option<i64> {
    let (hms, frac) = match s.split_once('.') {
        Some((a, b)) => (a, b),
        None => (s, ""),
    };
    let mut it = hms.split(':');
    let h: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let sec: i64 = it.next()?.parse().ok()?;
    if it.next().is_some() || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let ms = if frac.is_empty() {
        0
    } else {
        let f: String = frac.chars().take(3).collect();
        let v: i64 = f.parse().ok()?;
        v * 10i64.pow(3 - f.len() as u32)
    };
    Some(((h * 60 + m) * 60 + sec) * 1000 + ms)
}

fn stamp(y: i64, mo: i64, d: i64, clock: &str, utc_offset_s: i64) -> Option<i64> {
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400_000 + clock_ms(clock)? - utc_offset_s * 1000)
}

/// The time a log line was written, in Unix milliseconds, from its stamp
/// in local time (`utc_offset_s` east of UTC): Apache `[Sat Nov 28
/// 21:14:21.451062 2026]`, nginx `2026/11/28 21:14:21`, php-fpm
/// `[28-Nov-2026 21:14:21]`, lighttpd `2026-11-28 21:14:21:`. None: no stamp.
pub fn line_time_ms(line: &str, utc_offset_s: i64) -> Option<i64> {
    let l = line.trim_start();
    if let Some(inner) = l.strip_prefix('[') {
        let inner = &inner[..inner.find(']')?];
        let w: Vec<&str> = inner.split_whitespace().collect();
        return match w.as_slice() {
            // Apache: Sat Nov 28 21:14:21.451062 2026
            [_, mon, day, clock, year] => stamp(
                year.parse().ok()?,
                month(mon)?,
                day.parse().ok()?,
                clock,
                utc_offset_s,
            ),
            // php-fpm: 28-Nov-2026 21:14:21
            [date, clock] => {
                let mut p = date.split('-');
                let d = p.next()?.parse().ok()?;
                let mo = month(p.next()?)?;
                let y = p.next()?.parse().ok()?;
                stamp(y, mo, d, clock, utc_offset_s)
            }
            _ => None,
        };
    }
    // nginx `2026/11/28 21:14:21`, lighttpd `2026-11-28 21:14:21:`.
    let date = l.get(..10)?;
    let clock = l.get(11..19)?;
    let sep = date.as_bytes()[4];
    if !(sep == b'/' || sep == b'-') || date.as_bytes()[7] != sep {
        return None;
    }
    stamp(
        date.get(..4)?.parse().ok()?,
        date.get(5..7)?.parse().ok()?,
        date.get(8..10)?.parse().ok()?,
        clock,
        utc_offset_s,
    )
}

/// The lines of `text` that name a limit, grouped by pattern (most frequent
/// first); `first_t` in seconds since `run_start_ms` (Unix ms) when known.
pub fn scan(
    text: &str,
    path: &str,
    run_start_ms: Option<i64>,
    utc_offset_s: i64,
) -> Vec<LogFinding> {
    let mut by: BTreeMap<usize, LogFinding> = BTreeMap::new();
    for line in text.lines() {
        let Some(pat) = classify(line) else { continue };
        let i = PATTERNS
            .iter()
            .position(|x| std::ptr::eq(x, pat))
            .unwrap_or(0);
        let f = by.entry(i).or_insert_with(|| LogFinding {
            resource: pat.resource.into(),
            directive: pat.directive.into(),
            message: pat.message.into(),
            count: 0,
            first_t: match (line_time_ms(line, utc_offset_s), run_start_ms) {
                (Some(t), Some(r)) => Some((t - r) as f64 / 1000.0),
                _ => None,
            },
            example: redact(line),
            path: path.into(),
        });
        f.count += 1;
    }
    let mut v: Vec<LogFinding> = by.into_values().collect();
    v.sort_by_key(|f| std::cmp::Reverse(f.count));
    v
}

/// Merges findings of several logs (same resource, directive and message add up).
fn merge(into: &mut Vec<LogFinding>, more: Vec<LogFinding>) {
    for f in more {
        match into.iter_mut().find(|x| {
            x.resource == f.resource && x.directive == f.directive && x.message == f.message
        }) {
            Some(x) => {
                x.count += f.count;
                x.first_t = match (x.first_t, f.first_t) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            None => into.push(f),
        }
    }
    into.sort_by_key(|f| std::cmp::Reverse(f.count));
}

/// A log path from a configuration value: None for syslog, pipes, stderr
/// and /dev/*; relative paths resolved against `base`.
fn usable(value: &str, base: &Path) -> Option<PathBuf> {
    let v = value.trim().trim_matches('"').trim_matches('\'');
    if v.is_empty()
        || v.starts_with('|')
        || v.starts_with("syslog")
        || v == "stderr"
        || v.starts_with("/dev/")
        || v.contains("${")
        || v.eq_ignore_ascii_case("off")
    {
        return None;
    }
    let p = Path::new(v);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    })
}

/// php-fpm's `error_log` in the `[global]` section of php-fpm.conf
/// (relative: to `prefix`, else the file's directory).
fn php_fpm_error_log(conf: &Path, prefix: Option<&Path>) -> Option<PathBuf> {
    let text = read_small(conf)?;
    let mut global = true;
    let mut found = None;
    for l in text.lines() {
        let l = l.trim();
        if l.starts_with('[') {
            global = l.eq_ignore_ascii_case("[global]");
            continue;
        }
        if !global || l.starts_with(';') || l.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = l.split_once('=') {
            if k.trim() == "error_log" {
                found = Some(v.trim().to_string());
            }
        }
    }
    let base = prefix
        .map(Path::to_path_buf)
        .or_else(|| conf.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    usable(&found?, &base)
}

fn read_small(p: &Path) -> Option<String> {
    let f = std::fs::File::open(p).ok()?;
    let mut s = String::new();
    f.take(4 << 20).read_to_string(&mut s).ok()?;
    Some(s)
}

/// The error logs a server configuration names, the server told by `kind`
/// or guessed from the file: Apache `ErrorLog` (relative to `ServerRoot`),
/// nginx `error_log` at the main level (relative to `prefix`, else the
/// file's directory), lighttpd `server.errorlog`, php-fpm's `[global]
/// error_log`. syslog, pipes and stderr are skipped.
pub fn from_config(path: &Path, kind: Option<ServerKind>, prefix: Option<&Path>) -> Vec<PathBuf> {
    let Some(text) = read_small(path) else {
        return Vec::new();
    };
    let kind = kind.unwrap_or_else(|| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.contains("fpm") || text.contains("[global]") && text.contains("pm.max_children") {
            ServerKind::PhpFpm
        } else {
            match crate::tune::guess_server(path, &text) {
                crate::tune::Server::Apache => ServerKind::Apache,
                crate::tune::Server::Nginx => ServerKind::Nginx,
                crate::tune::Server::Lighttpd => ServerKind::Lighttpd,
            }
        }
    });
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut out = Vec::new();
    match kind {
        ServerKind::Apache => {
            let c = crate::tune::apache::read(path);
            let root = c
                .directives
                .iter()
                .filter(|d| d.ctx.is_empty() && d.name == "serverroot")
                .filter_map(|d| d.args.first())
                .next_back()
                .map(PathBuf::from)
                .or_else(|| prefix.map(Path::to_path_buf))
                .unwrap_or(dir);
            // The server-wide ErrorLog (the last one wins).
            if let Some(v) = c
                .directives
                .iter()
                .filter(|d| d.ctx.is_empty() && d.name == "errorlog")
                .filter_map(|d| d.args.first())
                .next_back()
            {
                out.extend(usable(v, &root));
            }
        }
        ServerKind::Nginx => {
            let (stmts, _) = crate::tune::nginx::statements(path);
            let base = prefix.map(Path::to_path_buf).unwrap_or(dir);
            for s in stmts
                .iter()
                .filter(|s| s.name == "error_log" && s.ctx.is_empty())
            {
                if let Some(v) = s.args.first() {
                    out.extend(usable(v, &base));
                }
            }
        }
        ServerKind::Lighttpd => {
            for a in crate::tune::lighttpd::assignments(path)
                .iter()
                .filter(|a| a.key == "server.errorlog" && a.cond.is_empty())
            {
                if let crate::tune::lighttpd::Val::Str(v) = &a.val {
                    out.extend(usable(v, &dir));
                }
            }
        }
        ServerKind::PhpFpm => out.extend(php_fpm_error_log(path, prefix)),
        ServerKind::Other => {}
    }
    out
}

/// Error logs a process holds open: `/proc/PID/fd/*` pointing to regular
/// files whose name contains "error" and ends in "log" (Apache, nginx,
/// lighttpd); for php-fpm, any `*.log` but its access and slow logs (its
/// master keeps its error_log open, often named `php-fpm.log`).
pub fn open_logs(proc_root: &Path, pid: u32, kind: ServerKind) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(proc_root.join(pid.to_string()).join("fd")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten().take(100_000) {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let name = target
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_ascii_lowercase();
        let wanted = if kind == ServerKind::PhpFpm {
            name.ends_with(".log") && !name.contains("access") && !name.contains("slow")
        } else {
            name.contains("error") && name.ends_with("log")
        };
        if !wanted || !target.is_absolute() || out.contains(&target) {
            continue;
        }
        if std::fs::metadata(&target).is_ok_and(|m| m.is_file()) {
            out.push(target);
        }
    }
    out
}

/// The processes of a cgroup (its `cgroup.procs`, at most 100,000).
pub fn pids_of_cgroup(dir: &Path) -> Vec<u32> {
    read_small(&dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .take(100_000)
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// `argv` of a process.
fn cmdline(proc_root: &Path, pid: u32) -> Vec<String> {
    std::fs::read(proc_root.join(pid.to_string()).join("cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .take(256)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn flag(argv: &[String], names: &[&str]) -> Option<String> {
    let mut it = argv.iter().skip(1);
    let mut last = None;
    while let Some(a) = it.next() {
        for f in names {
            if a == f {
                last = it.next().cloned();
                break;
            } else if let Some(v) = a.strip_prefix(&format!("{f}=")) {
                last = Some(v.to_string());
            }
        }
    }
    last
}

/// The configuration a php-fpm master runs: `-y FILE`/`--fpm-config FILE`,
/// or its title `php-fpm: master process (FILE)`; and its `-p` prefix.
fn php_fpm_config(argv: &[String]) -> Option<PathBuf> {
    if let Some(f) = flag(argv, &["-y", "--fpm-config"]) {
        return Some(PathBuf::from(f));
    }
    let title = argv.join(" ");
    let inner = title.split_once("master process (")?.1;
    let f = inner.rsplit_once(')')?.0;
    Some(PathBuf::from(f))
}

/// Every error log found for a run: from `config` (`--server-config`), from
/// the configuration each watched main process (`pids`: those whose parent
/// is not among them) was started with, and from the files the watched
/// processes hold open. Existing regular files only, each once, at most 8.
pub fn find(proc_root: &Path, config: Option<&Path>, pids: &[u32]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(c) = config {
        out.extend(from_config(c, None, None));
    }
    let set: std::collections::HashSet<u32> = pids.iter().copied().collect();
    for &pid in pids.iter().take(10_000) {
        let dir = proc_root.join(pid.to_string());
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let kind = ServerKind::of_name(comm.trim());
        let ppid = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|s| {
                let after = s.rsplit_once(')')?.1.to_string();
                after.split_whitespace().nth(1)?.parse::<u32>().ok()
            })
            .unwrap_or(0);
        if !set.contains(&ppid) {
            let argv = cmdline(proc_root, pid);
            match kind {
                ServerKind::Apache | ServerKind::Nginx | ServerKind::Lighttpd => {
                    if let Some(conf) = crate::effective::config_of_pid(proc_root, pid, kind) {
                        let prefix = match kind {
                            ServerKind::Nginx => flag(&argv, &["-p"]),
                            ServerKind::Apache => flag(&argv, &["-d"]),
                            _ => None,
                        };
                        out.extend(from_config(
                            &conf,
                            Some(kind),
                            prefix.as_deref().map(Path::new),
                        ));
                    }
                }
                ServerKind::PhpFpm => {
                    if let Some(conf) = php_fpm_config(&argv) {
                        let prefix = flag(&argv, &["-p", "--prefix"]);
                        out.extend(from_config(
                            &conf,
                            Some(ServerKind::PhpFpm),
                            prefix.as_deref().map(Path::new),
                        ));
                    }
                }
                ServerKind::Other => {}
            }
        }
        out.extend(open_logs(proc_root, pid, kind));
    }
    let mut seen = Vec::new();
    let mut result = Vec::new();
    for p in out {
        let Ok(canon) = std::fs::canonicalize(&p) else {
            continue;
        };
        if seen.contains(&canon) || !canon.is_file() {
            continue;
        }
        seen.push(canon.clone());
        result.push(canon);
        if result.len() >= MAX_LOGS {
            break;
        }
    }
    result
}

/// Where one log ended when the run started.
#[derive(Debug, Clone)]
struct Mark {
    path: PathBuf,
    size: u64,
    inode: u64,
}

/// The error logs of a run, their ends noted at its start.
#[derive(Debug, Clone, Default)]
pub struct ErrorLogs {
    marks: Vec<Mark>,
    utc_offset_s: i64,
}

impl ErrorLogs {
    /// Notes the size and inode of each log now; Err lines: the logs that
    /// cannot be read (one line each, for a warning).
    pub fn start(paths: &[PathBuf]) -> (ErrorLogs, Vec<String>) {
        let mut marks = Vec::new();
        let mut errors = Vec::new();
        for p in paths {
            match std::fs::File::open(p).and_then(|f| f.metadata()) {
                Ok(m) => marks.push(Mark {
                    path: p.clone(),
                    size: m.len(),
                    inode: m.ino(),
                }),
                Err(e) => errors.push(format!(
                    "the server's error log {} cannot be read ({e}); its lines are not in this run's evidence",
                    p.display()
                )),
            }
        }
        (
            ErrorLogs {
                marks,
                utc_offset_s: local_utc_offset_s(),
            },
            errors,
        )
    }

    /// True when no log is watched.
    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// Reads what was appended to each log since [`ErrorLogs::start`] and
    /// matches it; `run_started_at` (RFC 3339) places the lines' times.
    /// Also returns one line per log that could not be read.
    pub fn finish(self, run_started_at: &str) -> (ServerLog, Vec<String>) {
        let run_ms = redline_stats::time::parse_rfc3339_ms(run_started_at);
        let mut log = ServerLog::default();
        let mut errors = Vec::new();
        for m in &self.marks {
            match appended(m) {
                Ok(bytes) => {
                    log.paths.push(m.path.display().to_string());
                    log.bytes_read += bytes.len() as u64;
                    let text = String::from_utf8_lossy(&bytes);
                    let found = scan(
                        &text,
                        &m.path.display().to_string(),
                        run_ms,
                        self.utc_offset_s,
                    );
                    merge(&mut log.findings, found);
                }
                Err(e) => errors.push(format!(
                    "the server's error log {} could not be read after the run ({e}); its lines are not in this run's evidence",
                    m.path.display()
                )),
            }
        }
        (log, errors)
    }
}

/// What was appended to a log since its mark, at most the last
/// [`MAX_READ`] bytes; from the start when it shrank or was replaced.
fn appended(m: &Mark) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(&m.path)?;
    let meta = f.metadata()?;
    let len = meta.len();
    let from = if meta.ino() != m.inode || len < m.size {
        0
    } else {
        m.size
    };
    let from = from.max(len.saturating_sub(MAX_READ));
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::new();
    f.take(MAX_READ).read_to_end(&mut buf)?;
    // A cut first line (the 8 MiB bound) would match half a message: drop it.
    if from > 0 && from != m.size {
        if let Some(i) = buf.iter().position(|b| *b == b'\n') {
            buf.drain(..=i);
        }
    }
    Ok(buf)
}

#[cfg(test)]
mod tests;
