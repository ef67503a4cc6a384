//! The server's own config test, run before tune's checks when the server
//! is installed, safely: the server is never started, and nothing is
//! written outside a scratch folder that is removed afterwards.
//!
//! - nginx: `nginx -t` opens every log file and creates every temp path and
//!   the pid file of the config even in test mode (measured with nginx
//!   1.22: `pid`, `error_log`, `access_log`, `*_temp_path` all created), so
//!   the files tune read are copied into the scratch folder (at their
//!   absolute paths under it, so each `include` finds the copy) with those
//!   paths pointed into the scratch folder, the other files beside them
//!   linked, and `nginx -t -p SCRATCH -c COPY -e SCRATCH/error.log` run on
//!   the copy. Its messages name the original files and lines.
//! - Apache: `apache2 -t -f FILE` (`httpd` elsewhere) stops after reading
//!   the config, before logs, pid file or piped loggers are opened; without
//!   a ServerRoot in the tree Apache reads relative paths from its
//!   compiled-in root, as tune's reader does (no `-d`, unless one was given
//!   with `apache::with_server_root`), with the variables of a Debian
//!   `envvars` beside the main file (read, never run).
//! - lighttpd: `lighttpd -t -f FILE` (syntax only: `-tt` is a pre-flight
//!   start that binds the ports and opens the logs), and only when no file
//!   has an `include_shell`, which lighttpd would run while reading.

use super::{nginx, read_config, resolve, Finding, Fix, Level, Server};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the server's config test said.
#[derive(Debug, Clone)]
pub struct ServerTest {
    /// The command, in words (`nginx -t`).
    pub command: String,
    /// True when the server accepted the config.
    pub accepted: bool,
    /// Its errors and warnings as findings (`config_test`), at the original files.
    pub findings: Vec<Finding>,
}

/// The server's binary, when installed.
pub fn binary(server: Server) -> Option<PathBuf> {
    let names: &[&str] = match server {
        Server::Nginx => &["nginx"],
        Server::Apache => &["apache2", "httpd"],
        Server::Lighttpd => &["lighttpd"],
    };
    for n in names {
        for d in ["/usr/sbin", "/usr/local/sbin", "/usr/bin", "/sbin", "/bin"] {
            let p = Path::new(d).join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// A scratch folder, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "redline-tune-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d)?;
        Ok(Scratch(d))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs a config test with a time limit (30 s); (exit success, stdout + stderr).
fn run_bounded(mut cmd: Command) -> Result<(bool, String), String> {
    use std::io::Read;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the config test: {e}"))?;
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if t0.elapsed() > Duration::from_secs(30) => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("cannot wait for the config test: {e}")),
        }
    };
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut out);
    }
    match status {
        Some(s) => Ok((s.success(), out)),
        None => Err("the config test did not finish in 30 s".into()),
    }
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// Runs the server's own config test on the configuration at `path`; None
/// when the server is not installed or the test cannot be run safely (then
/// the reason is in the second value).
pub fn run(server: Server, path: &Path, text: &str) -> (Option<ServerTest>, Option<String>) {
    let Some(bin) = binary(server) else {
        return (None, None);
    };
    let r = match server {
        Server::Nginx => nginx_test(&bin, path, text),
        Server::Apache => apache_test(&bin, path),
        Server::Lighttpd => lighttpd_test(&bin, path),
    };
    match r {
        Ok(t) => (Some(t), None),
        Err(e) => (None, Some(e)),
    }
}

fn finding(level: Level, file: &Path, line: usize, msg: String, server: &str) -> Finding {
    Finding::new(level, "config_test", (file, line), msg).why(if level == Level::Warn {
        match server {
            "nginx" => "nginx's own config test refuses the configuration: nginx will not start or reload with it",
            "Apache" => "Apache's own config test refuses the configuration: it will not start or reload with it",
            _ => "lighttpd's own config test refuses the configuration: it will not start with it",
        }
    } else {
        "the server's own config test warns about it"
    })
}

/// The directives that make nginx write a file even under `-t`, with the
/// position of the path among their arguments.
const NGINX_WRITES: &[&str] = &[
    "pid",
    "lock_file",
    "error_log",
    "access_log",
    "client_body_temp_path",
    "proxy_temp_path",
    "fastcgi_temp_path",
    "uwsgi_temp_path",
    "scgi_temp_path",
    "proxy_cache_path",
    "fastcgi_cache_path",
    "uwsgi_cache_path",
    "scgi_cache_path",
    "ssl_session_log",
];

fn nginx_test(bin: &Path, path: &Path, text: &str) -> Result<ServerTest, String> {
    if nginx::split_dump(text).is_some() {
        return Err("not run on `nginx -T` output (run `nginx -t` where the files are)".into());
    }
    let (stmts, blocks) = nginx::statements(path);
    // nginx's compiled-in prefix (`--prefix=` of `nginx -V`): where a
    // relative `load_module` path points.
    let prefix = run_bounded({
        let mut c = Command::new(bin);
        c.arg("-V");
        c
    })
    .ok()
    .and_then(|(_, v)| {
        v.split_whitespace()
            .find_map(|w| w.strip_prefix("--prefix="))
            .map(PathBuf::from)
    });
    let http = blocks
        .iter()
        .position(|b| b.name == "http" && b.parent.is_none());
    let main = absolute(path);
    let base = main.parent().map(Path::to_path_buf).unwrap_or_default();
    let scratch = Scratch::new().map_err(|e| format!("no scratch folder: {e}"))?;
    let tree = scratch.0.join("tree");
    let out = scratch.0.join("out");
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let copy_of = |p: &Path| tree.join(p.strip_prefix("/").unwrap_or(p));
    // Files in reading order, each once.
    let mut files: Vec<PathBuf> = vec![main.clone()];
    for s in &stmts {
        let f = absolute(&s.file);
        if !files.contains(&f) {
            files.push(f);
        }
    }
    let mut n = 0usize;
    let mut shifted: Option<(PathBuf, usize)> = None;
    for f in &files {
        let mut t = read_config(f)?;
        // The statements of this file, last first, so that a rewrite never moves another.
        let mut here: Vec<&nginx::Stmt> =
            stmts.iter().filter(|s| absolute(&s.file) == *f).collect();
        here.sort_by_key(|s| std::cmp::Reverse(s.line));
        for s in here {
            let mut new = s.source.clone();
            if s.name == "load_module" {
                let (Some(a), Some(pre)) = (s.args.first(), &prefix) else {
                    continue;
                };
                if !a.starts_with('/') {
                    new = new.replacen(a.as_str(), &pre.join(a).display().to_string(), 1);
                }
            } else if s.name == "include" {
                for a in &s.args {
                    let p = resolve(&base, a);
                    if p.is_absolute() && a.starts_with('/') {
                        new = new.replacen(a.as_str(), &copy_of(&p).display().to_string(), 1);
                    }
                }
            } else if NGINX_WRITES.contains(&s.name.as_str()) {
                let Some(a) = s.args.first() else { continue };
                let special = matches!(a.as_str(), "off" | "stderr" | "/dev/null")
                    || a.starts_with("syslog:")
                    || a.starts_with("memory:")
                    || a.contains('$');
                if special {
                    continue;
                }
                n += 1;
                let name = Path::new(a)
                    .file_name()
                    .map(|x| x.to_string_lossy().to_string())
                    .unwrap_or_default();
                let to = out.join(format!("{n}-{name}"));
                new = new.replacen(a.as_str(), &to.display().to_string(), 1);
            } else {
                continue;
            }
            if new != s.source {
                let fix = Fix::replace(f, "", (s.line, s.end_line), &s.source, &new);
                if let Some(x) = fix.apply(&t) {
                    t = x;
                }
            }
        }
        // The temp paths nginx creates even under -t, when the http block
        // leaves them to their compiled-in defaults: into the scratch folder.
        if let Some(b) = http.filter(|&b| blocks[b].file == *f || absolute(&blocks[b].file) == *f) {
            let missing: Vec<String> = NGINX_WRITES
                .iter()
                .filter(|n| n.ends_with("_temp_path"))
                .filter(|n| !stmts.iter().any(|x| x.parent == Some(b) && x.name == **n))
                .map(|n| format!("{n} {};", out.join(n).display()))
                .collect();
            if let (false, Some(l)) = (missing.is_empty(), blocks[b].insert_after) {
                let fix = Fix::insert_after(f, "", l, &missing.join(" "));
                if let Some(x) = fix.apply(&t) {
                    // One line added after the block's first line: a message
                    // about a later line of this file names it one line down.
                    t = x;
                    shifted = Some((f.clone(), l));
                }
            }
        }
        let to = copy_of(f);
        if let Some(d) = to.parent() {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        }
        std::fs::write(&to, t).map_err(|e| e.to_string())?;
    }
    // The rest of each folder (certificates, mime.types, other folders), linked.
    let dirs: BTreeSet<PathBuf> = files
        .iter()
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let to = copy_of(&e.path());
            if !to.exists() {
                #[cfg(unix)]
                let _ = std::os::unix::fs::symlink(e.path(), &to);
            }
        }
    }
    let mut cmd = Command::new(bin);
    // nginx -t creates the pid file: the compiled-in one unless the config names one.
    if !stmts.iter().any(|x| x.name == "pid" && x.parent.is_none()) {
        cmd.arg("-g")
            .arg(format!("pid {};", out.join("nginx.pid").display()));
    }
    cmd.arg("-t")
        .arg("-p")
        .arg(format!("{}/", out.display()))
        .arg("-c")
        .arg(copy_of(&main))
        .arg("-e")
        .arg(out.join("error.log"))
        .current_dir(&out);
    let (ok, said) = run_bounded(cmd)?;
    let back = |s: &str| -> String {
        s.replace(&format!("{}/", tree.display()), "/")
            .replace(&out.display().to_string(), "(scratch)")
    };
    let mut findings = Vec::new();
    for l in said.lines() {
        let Some(rest) = l.strip_prefix("nginx: [") else {
            continue;
        };
        let Some((lvl, msg)) = rest.split_once("] ") else {
            continue;
        };
        let level = match lvl {
            "emerg" | "alert" | "crit" | "error" => Level::Warn,
            _ => Level::Info,
        };
        let msg = back(msg);
        // "... in /etc/nginx/nginx.conf:12"
        let (file, line, text) = match msg.rsplit_once(" in ") {
            Some((m, at)) => match at.rsplit_once(':') {
                Some((f, n)) if n.parse::<usize>().is_ok() => {
                    let mut line: usize = n.parse().unwrap_or(0);
                    if let Some((sf, after)) = &shifted {
                        if Path::new(f) == sf.as_path() && line > after + 1 {
                            line -= 1;
                        }
                    }
                    (PathBuf::from(f), line, m.to_string())
                }
                _ => (main.clone(), 0, msg.clone()),
            },
            None => (main.clone(), 0, msg.clone()),
        };
        findings.push(finding(
            level,
            &file,
            line,
            format!("nginx -t: {text}"),
            "nginx",
        ));
    }
    Ok(ServerTest {
        command: "nginx -t".into(),
        accepted: ok,
        findings,
    })
}

/// Debian's `envvars` beside apache2.conf: `export NAME=value` lines, read
/// (never run); `$SUFFIX` (set for a second instance) is empty.
fn apache_env(dir: &Path) -> Vec<(String, String)> {
    let Ok(t) = read_config(&dir.join("envvars")) else {
        return Vec::new();
    };
    t.lines()
        .filter_map(|l| l.trim().strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(|(k, v)| {
            let v = v.trim().trim_matches('"').replace("$SUFFIX", "");
            (k.to_string(), v)
        })
        .filter(|(_, v)| !v.contains('$') && !v.contains('`'))
        .collect()
}

fn apache_test(bin: &Path, path: &Path) -> Result<ServerTest, String> {
    let main = absolute(path);
    let dir = main.parent().map(Path::to_path_buf).unwrap_or_default();
    let scratch = Scratch::new().map_err(|e| format!("no scratch folder: {e}"))?;
    let text = read_config(&main)?;
    let has_root = text.lines().any(|l| {
        l.trim_start()
            .to_ascii_lowercase()
            .starts_with("serverroot")
    });
    let mut cmd = Command::new(bin);
    cmd.arg("-t").arg("-f").arg(&main).current_dir(&scratch.0);
    // Without a ServerRoot in the tree Apache reads relative paths from its
    // compiled-in root, and so does tune's reader: no `-d` then, unless
    // the caller gave one (`apache::with_server_root`).
    if let (false, Some(root)) = (has_root, super::apache::server_root_override()) {
        cmd.arg("-d").arg(root);
    }
    for (k, v) in apache_env(&dir) {
        cmd.env(k, v);
    }
    let (ok, said) = run_bounded(cmd)?;
    let mut findings = Vec::new();
    let lines: Vec<&str> = said.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        // "AH00526: Syntax error on line 7 of /x/httpd.conf:" then the reason,
        // or "apache2: Syntax error on line 7 of /x/httpd.conf: reason".
        let Some(k) = l.find("Syntax error on line ") else {
            continue;
        };
        let rest = &l[k + "Syntax error on line ".len()..];
        let Some((n, rest)) = rest.split_once(" of ") else {
            continue;
        };
        let line: usize = n.trim().parse().unwrap_or(0);
        let (file, why) = match rest.split_once(": ") {
            Some((f, w)) => (f.to_string(), w.to_string()),
            None => (
                rest.trim_end_matches(':').to_string(),
                lines
                    .get(i + 1)
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default(),
            ),
        };
        findings.push(finding(
            Level::Warn,
            Path::new(&file),
            line,
            format!("apache2 -t: {why}"),
            "Apache",
        ));
    }
    if !ok && findings.is_empty() {
        let first = lines
            .iter()
            .find(|l| !l.trim().is_empty())
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| "refused (no message)".into());
        findings.push(finding(
            Level::Warn,
            &main,
            0,
            format!("apache2 -t: {first}"),
            "Apache",
        ));
    }
    Ok(ServerTest {
        command: "apache2 -t".into(),
        accepted: ok,
        findings,
    })
}

/// An `include_shell` outside comments (lighttpd's own example config names
/// it in a comment, which runs nothing).
fn has_include_shell(text: &str) -> bool {
    text.lines().any(|l| {
        let mut quoted = false;
        let mut end = l.len();
        for (i, c) in l.char_indices() {
            match c {
                '"' => quoted = !quoted,
                '#' if !quoted => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        l[..end].contains("include_shell")
    })
}

fn lighttpd_test(bin: &Path, path: &Path) -> Result<ServerTest, String> {
    let main = absolute(path);
    let files = super::lighttpd::files(&main);
    for f in &files {
        if read_config(f).is_ok_and(|t| has_include_shell(&t)) {
            return Err(format!(
                "lighttpd -t not run: {} has an include_shell, which lighttpd runs while reading (redline never runs commands from a configuration)",
                f.display()
            ));
        }
    }
    let scratch = Scratch::new().map_err(|e| format!("no scratch folder: {e}"))?;
    let mut cmd = Command::new(bin);
    cmd.arg("-t").arg("-f").arg(&main).current_dir(&scratch.0);
    let (ok, said) = run_bounded(cmd)?;
    let mut findings = Vec::new();
    let mut reason: Option<String> = None;
    for l in said.lines() {
        // "... source: FILE line: N pos: M parser failed somehow near here: X"
        if let Some(k) = l.find("source: ") {
            let rest = &l[k + "source: ".len()..];
            let Some((file, rest)) = rest.split_once(" line: ") else {
                continue;
            };
            let line: usize = rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let file = resolve(main.parent().unwrap_or(Path::new("/")), file);
            // "... pos: 14 only == =~ =^ =$ are allowed in the condition"
            let said_here = rest
                .split_once(" pos: ")
                .and_then(|(_, r)| r.split_once(' '))
                .map(|(_, m)| m.trim())
                .filter(|m| !m.is_empty() && !m.starts_with("parser failed"));
            // Only the innermost file's line: lighttpd then names each includer.
            if findings.is_empty() {
                let msg = said_here
                    .map(str::to_string)
                    .or_else(|| reason.take())
                    .unwrap_or_else(|| "parser failed".into());
                findings.push(finding(
                    Level::Warn,
                    &file,
                    line,
                    format!("lighttpd -t: {msg}"),
                    "lighttpd",
                ));
            }
        } else if !l.trim().is_empty() && !l.contains("Syntax OK") {
            // The reason comes before the "source:" line, with or without a time stamp.
            let m = l.split_once(") ").map(|(_, m)| m).unwrap_or(l).trim();
            reason.get_or_insert_with(|| m.to_string());
        }
    }
    if !ok && findings.is_empty() {
        let msg = reason.unwrap_or_else(|| "refused (no message)".into());
        findings.push(finding(
            Level::Warn,
            &main,
            0,
            format!("lighttpd -t: {msg}"),
            "lighttpd",
        ));
    }
    Ok(ServerTest {
        command: "lighttpd -t".into(),
        accepted: ok,
        findings,
    })
}

#[cfg(test)]
mod include_shell_tests {
    use super::has_include_shell;

    #[test]
    fn only_an_include_shell_outside_comments_counts() {
        assert!(has_include_shell(
            "include_shell \"/usr/share/lighttpd/x.pl\"\n"
        ));
        assert!(has_include_shell(
            "$HTTP[\"host\"] == \"a\" { include_shell \"/bin/x\" }\n"
        ));
        assert!(!has_include_shell(
            "## may include others using 'include_shell'\nserver.port = 80\n"
        ));
        assert!(!has_include_shell(
            "server.tag = \"a\" # include_shell here\n"
        ));
        assert!(has_include_shell(
            "server.tag = \"#\" include_shell \"/bin/x\"\n"
        ));
    }
}
