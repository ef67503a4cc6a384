//! The effective values of the directives `tune` knows, read from a server's
//! configuration through the tune readers, for the run record
//! (`run --server-config`): what was set when the numbers were measured, so
//! `compare` can put the change next to its effect. Server-wide values only;
//! a directive not set gets the server's documented default. Values that look
//! like secrets and paths outside the configuration's directory are redacted.

use crate::detect::ServerKind;
use crate::tune::{self, apache, lighttpd, nginx, Server};
use redline_stats::{ConfigValue, ServerConfig};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a value that looks like a secret is recorded as.
pub const REDACTED: &str = "<redacted>";
/// What a path outside the configuration's directory is recorded as.
pub const OUTSIDE: &str = "<path outside the config>";

/// Apache directives recorded (as the documentation spells them), with the
/// old names they replace.
const APACHE: &[(&str, &[&str])] = &[
    ("MaxRequestWorkers", &["maxclients"]),
    ("ServerLimit", &[]),
    ("ThreadsPerChild", &[]),
    ("ThreadLimit", &[]),
    ("StartServers", &[]),
    ("MinSpareServers", &[]),
    ("MaxSpareServers", &[]),
    ("MinSpareThreads", &[]),
    ("MaxSpareThreads", &[]),
    ("MaxConnectionsPerChild", &["maxrequestsperchild"]),
    ("KeepAlive", &[]),
    ("KeepAliveTimeout", &[]),
    ("MaxKeepAliveRequests", &[]),
    ("Timeout", &[]),
    ("ListenBacklog", &[]),
    ("HostnameLookups", &[]),
    ("EnableSendfile", &[]),
    ("ExpiresActive", &[]),
    ("ExpiresDefault", &[]),
];

/// Apache's documented defaults (core, and per MPM where they differ).
fn apache_default(name: &str, mpm: &str) -> Option<&'static str> {
    let prefork = mpm == "prefork";
    Some(match name {
        "KeepAlive" => "On",
        "KeepAliveTimeout" => "5",
        "MaxKeepAliveRequests" => "100",
        "Timeout" => "60",
        "MaxConnectionsPerChild" => "0",
        "HostnameLookups" => "Off",
        "EnableSendfile" => "Off",
        "ExpiresActive" => "Off",
        "StartServers" if prefork => "5",
        "StartServers" => "3",
        "ServerLimit" if prefork => "256",
        "ServerLimit" => "16",
        "MaxRequestWorkers" if prefork => "256",
        "MaxRequestWorkers" => "400",
        "MinSpareServers" if prefork => "5",
        "MaxSpareServers" if prefork => "10",
        "ThreadsPerChild" if !prefork => "25",
        "ThreadLimit" if !prefork => "64",
        "MinSpareThreads" if !prefork => "75",
        "MaxSpareThreads" if !prefork => "250",
        _ => return None,
    })
}

/// nginx directives recorded, with their documented defaults.
const NGINX: &[(&str, Option<&str>)] = &[
    ("worker_processes", Some("1")),
    ("worker_connections", Some("512")),
    ("worker_rlimit_nofile", None),
    ("multi_accept", Some("off")),
    ("keepalive_timeout", Some("75s")),
    ("keepalive_requests", Some("1000")),
    ("send_timeout", Some("60s")),
    ("client_body_timeout", Some("60s")),
    ("client_header_timeout", Some("60s")),
    ("sendfile", Some("off")),
    ("tcp_nopush", Some("off")),
    ("tcp_nodelay", Some("on")),
    ("gzip", Some("off")),
    ("gzip_comp_level", Some("1")),
    ("gzip_types", None),
    ("expires", Some("off")),
    ("open_file_cache", Some("off")),
    ("access_log", None),
];

/// lighttpd options recorded, with their documented defaults.
const LIGHTTPD: &[(&str, Option<&str>)] = &[
    ("server.max-worker", Some("0")),
    ("server.max-connections", None),
    ("server.max-fds", None),
    ("server.max-keep-alive-requests", Some("1000")),
    ("server.max-keep-alive-idle", Some("5")),
    ("server.max-read-idle", Some("60")),
    ("server.max-write-idle", Some("360")),
    ("server.listen-backlog", None),
    ("server.network-backend", None),
    ("deflate.mimetypes", None),
    ("deflate.allowed-encodings", None),
    ("expire.url", None),
];

/// A value as recorded: a secret (a password, token or key, a URL with a
/// password) is [`REDACTED`]; a path outside `base` is [`OUTSIDE`]; a path
/// inside it is made relative. Other words stay as written.
pub fn redact(value: &str, base: &Path) -> String {
    let l = value.to_ascii_lowercase();
    let secret = ["password", "passwd", "secret", "token", "apikey", "api_key"]
        .iter()
        .any(|w| l.contains(w))
        || l.split_whitespace().any(|w| {
            // scheme://user:password@host
            w.split_once("://")
                .and_then(|(_, rest)| rest.split(['/', '?']).next())
                .is_some_and(|auth| auth.contains('@') && auth.contains(':'))
        });
    if secret {
        return REDACTED.into();
    }
    value
        .split(' ')
        .map(|w| {
            let q = w.trim_matches('"');
            if q.starts_with('/') && !q.starts_with("//") {
                match Path::new(q).strip_prefix(base) {
                    Ok(rel) if !base.as_os_str().is_empty() && !q.contains("..") => {
                        rel.display().to_string()
                    }
                    _ => OUTSIDE.to_string(),
                }
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `FILE:LINE` relative to the configuration's directory (a file outside it: [`OUTSIDE`]).
fn at(file: &Path, line: usize, base: &Path) -> String {
    let f = match file.strip_prefix(base) {
        Ok(r) => r.display().to_string(),
        Err(_) if file.is_relative() => file.display().to_string(),
        Err(_) => OUTSIDE.to_string(),
    };
    format!("{f}:{line}")
}

fn set(m: &mut BTreeMap<String, ConfigValue>, name: &str, value: String, at: String) {
    m.insert(name.to_string(), ConfigValue { value, at });
}

fn defaults(m: &mut BTreeMap<String, ConfigValue>, list: &[(&str, Option<&str>)]) {
    for (n, d) in list {
        if let (false, Some(d)) = (m.contains_key(*n), d) {
            set(m, n, d.to_string(), "default".into());
        }
    }
}

fn read_apache(path: &Path, base: &Path) -> BTreeMap<String, ConfigValue> {
    let c = apache::read(path);
    let mut m = BTreeMap::new();
    let mpm = ["prefork", "worker", "event"]
        .into_iter()
        .find(|x| c.modules.contains(&format!("mpm_{x}_module")))
        .unwrap_or("");
    if !mpm.is_empty() {
        set(&mut m, "MPM", mpm.into(), "LoadModule".into());
    }
    // Server-wide: not inside a virtual host or a directory-like section
    // (conditionals were evaluated away by the reader); the last one wins.
    for d in c.directives.iter().filter(|d| d.ctx.is_empty()) {
        if let Some((name, _)) = APACHE
            .iter()
            .find(|(n, old)| n.eq_ignore_ascii_case(&d.name) || old.contains(&d.name.as_str()))
        {
            set(
                &mut m,
                name,
                redact(&d.args.join(" "), base),
                at(&d.file, d.line, base),
            );
        }
    }
    let deflate = c.modules.contains("deflate_module")
        && c.directives.iter().any(|d| {
            matches!(
                d.name.as_str(),
                "addoutputfilterbytype" | "setoutputfilter" | "addoutputfilter"
            ) && d
                .args
                .iter()
                .any(|a| a.to_ascii_uppercase().contains("DEFLATE"))
        });
    set(
        &mut m,
        "deflate",
        if deflate { "on" } else { "off" }.into(),
        "mod_deflate and an output filter".into(),
    );
    if !c.modules.contains("expires_module") {
        m.remove("ExpiresActive");
        m.remove("ExpiresDefault");
        set(
            &mut m,
            "ExpiresActive",
            "Off".into(),
            "no mod_expires".into(),
        );
    }
    for (n, _) in APACHE {
        if !m.contains_key(*n) {
            if let Some(d) = apache_default(n, mpm) {
                set(&mut m, n, d.into(), "default".into());
            }
        }
    }
    m
}

fn read_nginx(path: &Path, base: &Path) -> BTreeMap<String, ConfigValue> {
    let (stmts, blocks) = nginx::statements(path);
    let depth = |mut b: Option<usize>| {
        let mut n = 0;
        while let Some(i) = b {
            n += 1;
            b = blocks.get(i).and_then(|x| x.parent);
        }
        n
    };
    let mut m = BTreeMap::new();
    for (name, _) in NGINX {
        // The value at the outermost level it is set at (main, events, http);
        // a value set only in server/location blocks is the first such one,
        // with where it is.
        let found: Vec<_> = stmts.iter().filter(|s| s.name == *name).collect();
        let Some(top) = found.iter().map(|s| depth(s.parent)).min() else {
            continue;
        };
        let s = found.iter().rfind(|s| depth(s.parent) == top).copied();
        let Some(s) = s else { continue };
        let outer = s.ctx.iter().all(|c| c == "events" || c == "http");
        let mut place = at(&s.file, s.line, base);
        if !outer {
            place = format!("{place} ({})", s.ctx.join(" "));
        }
        set(&mut m, name, redact(&s.args.join(" "), base), place);
    }
    defaults(&mut m, NGINX);
    m
}

fn show_val(v: &lighttpd::Val) -> String {
    match v {
        lighttpd::Val::Str(s) => s.clone(),
        lighttpd::Val::Int(i) => i.to_string(),
        lighttpd::Val::Arr(a) => a
            .iter()
            .map(|(k, x)| match k {
                Some(k) => format!("{k} => {}", show_val(x)),
                None => show_val(x),
            })
            .collect::<Vec<_>>()
            .join(", "),
        lighttpd::Val::Unknown => "?".into(),
    }
}

fn read_lighttpd(path: &Path, base: &Path) -> BTreeMap<String, ConfigValue> {
    let all = lighttpd::assignments(path);
    let mut m = BTreeMap::new();
    let mut modules: Vec<String> = Vec::new();
    for a in all.iter().filter(|a| a.cond.is_empty()) {
        if a.key == "server.modules" {
            if !a.append {
                modules.clear();
            }
            modules.extend(a.val.strings());
            continue;
        }
        if LIGHTTPD.iter().any(|(n, _)| *n == a.key) {
            set(
                &mut m,
                &a.key,
                redact(&show_val(&a.val), base),
                at(&a.file, a.line, base),
            );
        }
    }
    for (module, key) in [("mod_deflate", "deflate"), ("mod_expire", "expire")] {
        let on = modules.iter().any(|x| x == module);
        set(
            &mut m,
            key,
            if on { "on" } else { "off" }.into(),
            "server.modules".into(),
        );
    }
    defaults(&mut m, LIGHTTPD);
    m
}

/// Reads the effective values from a configuration file (the server guessed
/// from the file when not given). Err: one line naming the file.
pub fn read(path: &Path, server: Option<Server>) -> Result<ServerConfig, String> {
    let text = tune::read_config(path)?;
    let server = server.unwrap_or_else(|| tune::guess_server(path, &text));
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let base = abs.parent().map(Path::to_path_buf).unwrap_or_default();
    let (name, directives) = match server {
        Server::Apache => ("apache", read_apache(&abs, &base)),
        Server::Nginx => ("nginx", read_nginx(&abs, &base)),
        Server::Lighttpd => ("lighttpd", read_lighttpd(&abs, &base)),
    };
    Ok(ServerConfig {
        server: name.into(),
        file: abs.display().to_string(),
        directives,
    })
}

/// The configuration file a server process was started with, from its
/// command line: Apache `-f FILE` (relative to `-d ROOT`), else Debian's
/// /etc/apache2/apache2.conf; nginx `-c FILE` (relative to `-p PREFIX`), else
/// /etc/nginx/nginx.conf; lighttpd `-f FILE`. None when it cannot tell.
pub fn config_of_cmdline(argv: &[String], kind: ServerKind, cwd: &Path) -> Option<PathBuf> {
    let flag = |f: &str| {
        let mut it = argv.iter().skip(1);
        let mut last = None;
        while let Some(a) = it.next() {
            if a == f {
                last = it.next().cloned();
            } else if let Some(v) = a.strip_prefix(f).filter(|v| !v.is_empty()) {
                last = Some(v.to_string());
            }
        }
        last
    };
    let (file, root, default) = match kind {
        ServerKind::Apache => (flag("-f"), flag("-d"), "/etc/apache2/apache2.conf"),
        ServerKind::Nginx => (flag("-c"), flag("-p"), "/etc/nginx/nginx.conf"),
        ServerKind::Lighttpd => (flag("-f"), None, ""),
        _ => return None,
    };
    let p = match file {
        Some(f) => {
            let f = PathBuf::from(f);
            if f.is_absolute() {
                f
            } else {
                root.map(PathBuf::from)
                    .map(|r| if r.is_absolute() { r } else { cwd.join(r) })
                    .unwrap_or_else(|| cwd.to_path_buf())
                    .join(f)
            }
        }
        None if !default.is_empty() => PathBuf::from(default),
        None => return None,
    };
    p.is_file().then_some(p)
}

/// The configuration of a running process (by PID, from /proc), with its kind.
pub fn config_of_pid(root: &Path, pid: u32, kind: ServerKind) -> Option<PathBuf> {
    let dir = root.join(pid.to_string());
    let raw = std::fs::read(dir.join("cmdline")).ok()?;
    let argv: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let cwd = std::fs::read_link(dir.join("cwd")).unwrap_or_else(|_| PathBuf::from("/"));
    config_of_cmdline(&argv, kind, &cwd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_outside_paths_are_redacted() {
        let base = Path::new("/srv/conf");
        assert_eq!(redact("15", base), "15");
        assert_eq!(redact("On", base), "On");
        assert_eq!(redact("/srv/conf/mime.types", base), "mime.types");
        assert_eq!(redact("/etc/ssl/private/key.pem", base), OUTSIDE);
        assert_eq!(redact("/srv/conf/../../etc/shadow", base), OUTSIDE);
        assert_eq!(
            redact("\"/var/log/x.log\" combined", base),
            format!("{OUTSIDE} combined")
        );
        assert_eq!(redact("http://user:hunter2@db:5432/x", base), REDACTED);
        assert_eq!(redact("SetEnv DB_PASSWORD hunter2", base), REDACTED);
        assert_eq!(redact("token=abc", base), REDACTED);
        assert_eq!(redact("text/html text/css", base), "text/html text/css");
    }

    #[test]
    fn config_from_the_command_line() {
        let d = std::env::temp_dir().join(format!("redline-eff-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("httpd.conf");
        std::fs::write(&f, "KeepAliveTimeout 7\n").unwrap();
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ds = d.display().to_string();
        let fs = f.display().to_string();
        assert_eq!(
            config_of_cmdline(
                &argv(&["apache2", "-d", &ds, "-f", "httpd.conf"]),
                ServerKind::Apache,
                Path::new("/")
            ),
            Some(f.clone())
        );
        assert_eq!(
            config_of_cmdline(
                &argv(&["nginx", "-c", &fs]),
                ServerKind::Nginx,
                Path::new("/")
            ),
            Some(f.clone())
        );
        assert_eq!(
            config_of_cmdline(
                &argv(&["lighttpd", "-D", "-f", "httpd.conf"]),
                ServerKind::Lighttpd,
                &d
            ),
            Some(f.clone())
        );
        assert_eq!(
            config_of_cmdline(&argv(&["lighttpd", "-D"]), ServerKind::Lighttpd, &d),
            None
        );
        let c = read(&f, Some(Server::Apache)).unwrap();
        assert_eq!(c.directives["KeepAliveTimeout"].value, "7");
        assert_eq!(c.directives["KeepAliveTimeout"].at, "httpd.conf:1");
        assert_eq!(c.directives["MaxKeepAliveRequests"].at, "default");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn nginx_and_lighttpd_values() {
        let d = std::env::temp_dir().join(format!("redline-eff2-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let n = d.join("nginx.conf");
        std::fs::write(
            &n,
            "worker_processes 2;\nevents { worker_connections 64; }\nhttp {\n  keepalive_timeout 10s;\n  \
             access_log /var/log/nginx/a.log;\n  server { listen 8080; location /s { expires 30d; } }\n}\n",
        )
        .unwrap();
        let c = read(&n, None).unwrap();
        assert_eq!(c.server, "nginx");
        let v = |k: &str| c.directives[k].value.clone();
        assert_eq!(v("worker_processes"), "2");
        assert_eq!(v("worker_connections"), "64");
        assert_eq!(c.directives["worker_connections"].at, "nginx.conf:2");
        assert_eq!(v("keepalive_timeout"), "10s");
        assert_eq!(v("keepalive_requests"), "1000");
        assert_eq!(c.directives["keepalive_requests"].at, "default");
        assert_eq!(v("access_log"), OUTSIDE);
        assert_eq!(v("expires"), "30d");
        assert!(
            c.directives["expires"].at.contains("location"),
            "{:?}",
            c.directives["expires"]
        );

        let l = d.join("lighttpd.conf");
        std::fs::write(
            &l,
            "server.modules = (\"mod_deflate\")\nserver.max-keep-alive-requests = 4\n\
             $HTTP[\"host\"] == \"x\" { server.max-keep-alive-idle = 1 }\n",
        )
        .unwrap();
        let c = read(&l, None).unwrap();
        assert_eq!(c.server, "lighttpd");
        assert_eq!(c.directives["server.max-keep-alive-requests"].value, "4");
        assert_eq!(
            c.directives["server.max-keep-alive-idle"].value, "5",
            "a conditional is not server-wide"
        );
        assert_eq!(c.directives["deflate"].value, "on");
        assert_eq!(c.directives["expire"].value, "off");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
