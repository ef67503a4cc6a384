//! Which server is running (Apache, nginx, lighttpd, php-fpm), Apache's MPM
//! (from `apache2ctl -V`, else the config's LoadModule lines, else the
//! processes' thread counts), and the Apache error log's "reached
//! MaxRequestWorkers" lines as evidence.

use crate::procfs::ProcInfo;
use std::path::Path;
use std::process::{Command, Stdio};

/// The kind of server a set of processes is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// Apache httpd (`apache2`, `httpd`).
    Apache,
    /// nginx.
    Nginx,
    /// lighttpd.
    Lighttpd,
    /// PHP-FPM.
    PhpFpm,
    /// Something else.
    Other,
}

impl ServerKind {
    /// Recognizes a process name.
    pub fn of_name(name: &str) -> ServerKind {
        let n = name.to_ascii_lowercase();
        if n.starts_with("apache") || n.starts_with("httpd") {
            ServerKind::Apache
        } else if n.starts_with("nginx") {
            ServerKind::Nginx
        } else if n.starts_with("lighttpd") {
            ServerKind::Lighttpd
        } else if n.starts_with("php-fpm") || n.starts_with("php_fpm") {
            ServerKind::PhpFpm
        } else {
            ServerKind::Other
        }
    }

    /// The kind most of the processes are.
    pub fn of_processes(procs: &[ProcInfo]) -> ServerKind {
        for k in [
            ServerKind::Apache,
            ServerKind::Nginx,
            ServerKind::Lighttpd,
            ServerKind::PhpFpm,
        ] {
            if procs
                .iter()
                .any(|p| ServerKind::of_name(&p.comm) == k || ServerKind::of_name(&p.exe) == k)
            {
                return k;
            }
        }
        ServerKind::Other
    }

    /// A display name.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Apache => "Apache httpd",
            ServerKind::Nginx => "nginx",
            ServerKind::Lighttpd => "lighttpd",
            ServerKind::PhpFpm => "PHP-FPM",
            ServerKind::Other => "unknown server",
        }
    }
}

/// Apache's multi-processing module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mpm {
    /// One process per connection.
    Prefork,
    /// Threads in processes; keep-alive connections hold a thread.
    Worker,
    /// Threads in processes; keep-alive connections handed to a listener thread.
    Event,
    /// Not known (threaded processes seen, but not which threaded MPM).
    Threaded,
}

impl Mpm {
    /// Parses `prefork`, `worker`, `event`.
    pub fn parse(s: &str) -> Option<Mpm> {
        match s.trim().to_ascii_lowercase().as_str() {
            "prefork" => Some(Mpm::Prefork),
            "worker" => Some(Mpm::Worker),
            "event" => Some(Mpm::Event),
            _ => None,
        }
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            Mpm::Prefork => "prefork",
            Mpm::Worker => "worker",
            Mpm::Event => "event",
            Mpm::Threaded => "worker or event",
        }
    }
}

/// Runs a command with arguments; its stdout+stderr, or None when it is not installed or failed.
pub fn run_tool(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let mut s = String::from_utf8_lossy(&out.stdout).to_string();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Some(s)
    } else {
        None
    }
}

/// `Server MPM:     prefork` in `apache2ctl -V` output.
pub fn mpm_from_v(text: &str) -> Option<Mpm> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Server MPM:").and_then(Mpm::parse))
}

/// The MPM named by `LoadModule mpm_X_module` lines in a config text.
pub fn mpm_from_config_text(text: &str) -> Option<Mpm> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        if !it.next()?.eq_ignore_ascii_case("LoadModule") {
            return None;
        }
        let m = it.next()?;
        Mpm::parse(m.strip_prefix("mpm_")?.strip_suffix("_module")?)
    })
}

/// Apache's MPM and where it was learnt: `apache2ctl -V` / `httpd -V`, then
/// the enabled mpm_*.load (Debian) or 00-mpm.conf (Red Hat), then the
/// processes. The first two describe the system's configuration, which need
/// not be the running server's (a test or second instance with its own
/// `-f` config): when the processes' threads contradict it, the processes win.
pub fn apache_mpm(procs: &[ProcInfo]) -> Option<(Mpm, String)> {
    reconcile_mpm(mpm_from_threads(procs), system_mpm())
}

/// The MPM of the system's Apache configuration, and where it was learnt.
fn system_mpm() -> Option<(Mpm, String)> {
    for tool in ["apache2ctl", "apachectl", "httpd"] {
        if let Some(m) = run_tool(tool, &["-V"]).as_deref().and_then(mpm_from_v) {
            return Some((m, format!("`{tool} -V`")));
        }
    }
    for dir in ["/etc/apache2/mods-enabled", "/etc/httpd/conf.modules.d"] {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for f in files {
            if let Some(m) = std::fs::read_to_string(&f)
                .ok()
                .as_deref()
                .and_then(mpm_from_config_text)
            {
                return Some((m, format!("LoadModule in {}", f.display())));
            }
        }
    }
    None
}

/// What the processes show (`seen`, threaded or not) against what the
/// system's configuration says (`configured`): the configuration names the
/// exact MPM, the processes say whether it is threaded; on a contradiction the
/// processes win and the source says so.
pub fn reconcile_mpm(
    seen: Option<(Mpm, String)>,
    configured: Option<(Mpm, String)>,
) -> Option<(Mpm, String)> {
    match (seen, configured) {
        (Some((Mpm::Prefork, why)), Some((m, src))) if m != Mpm::Prefork => Some((
            Mpm::Prefork,
            format!("{why}; {src} says {} but describes the system's configuration, not this server", m.name()),
        )),
        (Some((Mpm::Threaded, why)), Some((Mpm::Prefork, src))) => Some((
            Mpm::Threaded,
            format!("{why}; {src} says prefork but describes the system's configuration, not this server"),
        )),
        (_, Some(c)) => Some(c),
        (s, None) => s,
    }
}

/// Apache's MPM guessed from its processes alone: threads in them mean worker
/// or event, single-threaded processes mean prefork. None without Apache processes.
pub fn mpm_from_threads(procs: &[ProcInfo]) -> Option<(Mpm, String)> {
    let apache: Vec<&ProcInfo> = procs
        .iter()
        .filter(|p| ServerKind::of_name(&p.comm) == ServerKind::Apache)
        .collect();
    if apache.is_empty() {
        return None;
    }
    if apache.iter().any(|p| p.threads > 1) {
        Some((Mpm::Threaded, "threads in its processes".into()))
    } else if apache.len() >= 2 {
        Some((Mpm::Prefork, "single-threaded processes".into()))
    } else {
        // A lone process says nothing: the parent is single-threaded under every MPM.
        None
    }
}

/// Lines of an Apache error log saying the worker limit was reached.
pub fn reached_limit_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| {
            l.contains("reached MaxRequestWorkers")
                || l.contains("reached MaxClients")
                || l.contains("server reached MaxRequestWorkers")
        })
        .map(str::to_string)
        .collect()
}

/// The usual Apache error logs.
pub const APACHE_ERROR_LOGS: &[&str] = &[
    "/var/log/apache2/error.log",
    "/var/log/httpd/error_log",
    "/usr/local/apache2/logs/error_log",
];

/// Evidence from the first readable error log: (path, count, last line).
pub fn apache_limit_evidence(paths: &[&Path]) -> Option<(String, usize, String)> {
    for p in paths {
        if let Ok(b) = redline_stats::files::read(p, redline_stats::files::Kind::Log, "") {
            let t = String::from_utf8_lossy(&b);
            let lines = reached_limit_lines(&t);
            if let Some(last) = lines.last() {
                return Some((p.display().to_string(), lines.len(), last.clone()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpm_sources() {
        assert_eq!(
            mpm_from_v("Server version: Apache/2.4.62\nServer MPM:     event\n  threaded: yes"),
            Some(Mpm::Event)
        );
        assert_eq!(
            mpm_from_config_text(
                "# x\nLoadModule mpm_prefork_module /usr/lib/apache2/modules/mod_mpm_prefork.so\n"
            ),
            Some(Mpm::Prefork)
        );
        let log = "[Mon Jan 01 00:00:00 2024] [mpm_prefork:error] [pid 1] AH00161: server reached MaxRequestWorkers setting, consider raising the MaxRequestWorkers setting\nother\n";
        assert_eq!(reached_limit_lines(log).len(), 1);
        assert_eq!(ServerKind::of_name("php-fpm8.2"), ServerKind::PhpFpm);
    }

    #[test]
    fn processes_win_over_the_system_config() {
        let ap = |pid, ppid, threads| ProcInfo {
            pid,
            ppid,
            threads,
            comm: "apache2".into(),
            ..Default::default()
        };
        let prefork = [ap(10, 1, 1), ap(11, 10, 1), ap(12, 10, 1)];
        let event = [ap(10, 1, 1), ap(11, 10, 27)];
        let cfg = |m| Some((m, "`apache2ctl -V`".to_string()));
        // Single-threaded workers while the system config says event: prefork.
        let (m, why) = reconcile_mpm(mpm_from_threads(&prefork), cfg(Mpm::Event)).unwrap();
        assert_eq!(m, Mpm::Prefork);
        assert!(why.contains("says event"), "{why}");
        // Threaded processes and the config agrees on threads: the config's exact name.
        assert_eq!(
            reconcile_mpm(mpm_from_threads(&event), cfg(Mpm::Event))
                .unwrap()
                .0,
            Mpm::Event
        );
        assert_eq!(
            reconcile_mpm(mpm_from_threads(&event), cfg(Mpm::Prefork))
                .unwrap()
                .0,
            Mpm::Threaded
        );
        // A lone parent says nothing; the config decides.
        assert_eq!(mpm_from_threads(&[ap(10, 1, 1)]), None);
        assert_eq!(
            reconcile_mpm(mpm_from_threads(&[ap(10, 1, 1)]), cfg(Mpm::Worker))
                .unwrap()
                .0,
            Mpm::Worker
        );
        assert_eq!(reconcile_mpm(None, None), None);
    }
}
