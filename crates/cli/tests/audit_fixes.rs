//! Every fix `redline audit` prints is valid where it is pasted, and makes
//! the finding go away: for Debian's Apache, nginx and lighttpd, an untuned
//! minimal site is started on a free loopback port and audited; each check
//! that prints a fix gets that server's fix pasted into the config (Apache
//! and lighttpd: the end of the main config; nginx: the `server` block), the
//! server's own config test runs (`apache2 -t`, `nginx -t`, `lighttpd -tt`),
//! the server starts with it, and `redline audit` must now find that check
//! `ok`. Fixes that are only advice (comments: "minify at build time") must
//! pass the config test. Apache with mod_deflate reproduces the `-gzip`
//! ETag case: revalidations get 200 until `DeflateAlterETag NoChange`.
//! A missing server skips with a note, and fails under CI=true.

mod common;

use common::nginx::{free_port, tmpdir};
use common::redline;
use redline_testkit::need::require;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Server {
    Apache,
    Nginx,
    Lighttpd,
}

impl Server {
    fn key(self) -> &'static str {
        match self {
            Server::Apache => "apache",
            Server::Nginx => "nginx",
            Server::Lighttpd => "lighttpd",
        }
    }
}

/// The site: HTML and CSS with plenty of whitespace (worth compressing).
fn write_site(dir: &Path) {
    let site = dir.join("site");
    std::fs::create_dir_all(&site).unwrap();
    let para =
        "<p>\n    Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n</p>\n".repeat(80);
    std::fs::write(
        site.join("index.html"),
        format!("<!DOCTYPE html>\n<html>\n<head>\n<link rel=stylesheet href=s.css>\n</head>\n<body>\n{para}</body>\n</html>\n"),
    )
    .unwrap();
    let css = (0..300)
        .map(|i| {
            format!(
                ".c{i} {{\n    color : #{:06x} ;\n    margin : {i}px ;\n}}\n",
                i * 997
            )
        })
        .collect::<String>();
    std::fs::write(site.join("s.css"), css).unwrap();
}

fn apache_user() -> &'static str {
    // SAFETY: geteuid() has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return "";
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    if passwd.lines().any(|l| l.starts_with("www-data:")) {
        "User www-data\nGroup www-data\n"
    } else {
        "User nobody\nGroup nogroup\n"
    }
}

/// Apache compressing CSS and HTML: none, mod_deflate (the `-gzip` ETag
/// case) or mod_brotli (`-br`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Compress {
    Off,
    Gzip,
    Br,
}

/// The config of an untuned site with `fix` pasted in.
fn config(s: Server, d: &Path, port: u16, fix: &str, compress: Compress) -> String {
    let d = d.display();
    match s {
        Server::Apache => {
            let m = "/usr/lib/apache2/modules";
            let mods = [
                ("mpm_event", "mod_mpm_event"),
                ("authz_core", "mod_authz_core"),
                ("mime", "mod_mime"),
                ("dir", "mod_dir"),
                ("filter", "mod_filter"),
                ("deflate", "mod_deflate"),
                ("brotli", "mod_brotli"),
                ("headers", "mod_headers"),
                ("expires", "mod_expires"),
                ("setenvif", "mod_setenvif"),
                ("rewrite", "mod_rewrite"),
                ("socache_shmcb", "mod_socache_shmcb"),
                ("ssl", "mod_ssl"),
            ]
            .iter()
            .map(|(n, f)| format!("LoadModule {n}_module {m}/{f}.so\n"))
            .collect::<String>();
            let (etag, compress) = match compress {
                Compress::Gzip => ("", "AddOutputFilterByType DEFLATE text/html text/css\n"),
                Compress::Br => (
                    "",
                    "AddOutputFilterByType BROTLI_COMPRESS text/html text/css\n",
                ),
                Compress::Off => ("FileETag None\nHeader unset Last-Modified\n", ""),
            };
            format!(
                "ServerRoot {d}\nServerName 127.0.0.1\nListen 127.0.0.1:{port}\nPidFile {d}/apache2.pid\n\
                 ErrorLog {d}/error.log\nLogLevel warn\nDefaultRuntimeDir {d}\nMutex file:{d} default\n\
                 {mods}{user}TypesConfig /etc/mime.types\nDirectoryIndex index.html\n\
                 DocumentRoot {d}/site\n<Directory {d}/site>\n  Require all granted\n</Directory>\n\
                 {etag}{compress}Header set Set-Cookie \"sid=1; Path=/\"\n{fix}\n",
                user = apache_user()
            )
        }
        Server::Nginx => format!(
            "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/tmp/body; proxy_temp_path {d}/tmp/proxy; fastcgi_temp_path {d}/tmp/fcgi;
  uwsgi_temp_path {d}/tmp/uwsgi; scgi_temp_path {d}/tmp/scgi;
  types {{ text/html html; text/css css; }}
  # no ETag, and If-Modified-Since ignored: revalidations get 200
  etag off;
  if_modified_since off;
  server {{
    listen 127.0.0.1:{port};
    root {d}/site;
    index index.html;
    add_header Set-Cookie \"sid=1; Path=/\";
{fix}
  }}
}}
"
        ),
        Server::Lighttpd => format!(
            "server.document-root = \"{d}/site\"
server.bind = \"127.0.0.1\"
server.port = {port}
server.errorlog = \"{d}/error.log\"
index-file.names = ( \"index.html\" )
mimetype.assign = ( \".html\" => \"text/html\", \".css\" => \"text/css\" )
static-file.etags = \"disable\"
{fix}
"
        ),
    }
}

fn bin(s: Server) -> &'static str {
    match s {
        Server::Apache => "/usr/sbin/apache2",
        Server::Nginx => "/usr/sbin/nginx",
        Server::Lighttpd => "/usr/sbin/lighttpd",
    }
}

/// Runs the server's own config test; Err: its output.
fn config_test(s: Server, conf: &Path) -> Result<(), String> {
    let mut c = Command::new(bin(s));
    // Debian's envvars: the fixes may name ${APACHE_RUN_DIR}.
    if let Some(d) = conf.parent() {
        c.env("APACHE_RUN_DIR", d);
    }
    match s {
        Server::Apache => c.arg("-t").arg("-f").arg(conf),
        Server::Nginx => c.arg("-t").arg("-c").arg(conf),
        Server::Lighttpd => c.arg("-tt").arg("-f").arg(conf),
    };
    let out = c.output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A running server: stopped (SIGTERM to its PID, then kill) and its
/// directory removed on drop.
struct Running {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: kill() on our own child's PID has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes the config with `fix`, config-tests it (panics with the output
/// when the fix is not valid there), starts the server.
fn start(s: Server, fix: &str, compress: Compress, tag: &str) -> Running {
    let dir = tmpdir(&format!("fix-{}-{tag}", s.key()));
    write_site(&dir);
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let port = free_port();
    let conf = dir.join("server.conf");
    std::fs::write(&conf, config(s, &dir, port, fix, compress)).unwrap();
    let _ = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&dir)
        .status();
    if let Err(e) = config_test(s, &conf) {
        let _ = std::fs::remove_dir_all(&dir);
        panic!("{:?}: the fix is not valid where pasted:\n{fix}\n{e}", s);
    }
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(bin(s));
    match s {
        Server::Apache => c
            .process_group(0)
            .args(["-D", "FOREGROUND", "-f"])
            .arg(&conf)
            .env("APACHE_RUN_DIR", &dir),
        Server::Nginx => c.arg("-p").arg(&dir).arg("-c").arg(&conf),
        Server::Lighttpd => c.arg("-D").arg("-f").arg(&conf),
    };
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server");
    let mut r = Running { child, port, dir };
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return r;
        }
        if let Ok(Some(st)) = r.child.try_wait() {
            let log = std::fs::read_to_string(r.dir.join("error.log")).unwrap_or_default();
            panic!("{s:?} exited ({st}) with fix:\n{fix}\n{log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = std::fs::read_to_string(r.dir.join("error.log")).unwrap_or_default();
    panic!("{s:?} did not listen on {port}: {log}");
}

fn audit(r: &Running) -> Value {
    let url = format!("http://127.0.0.1:{}/index.html", r.port);
    let out = redline(&["audit", "-o", "json", "-q", "--no-probes", &url]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn check<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}"))
}

/// Only comments: advice, not configuration.
fn advice_only(fix: &str) -> bool {
    fix.lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
}

/// Audits the untuned site, then applies every printed fix one at a time;
/// returns the checks whose finding the fix made go away.
fn every_fix(s: Server, compress: Compress, skip: &[(&str, &str)]) -> Vec<String> {
    let base = start(s, "", compress, "base");
    let v = audit(&base);
    drop(base);
    let mut fixed = Vec::new();
    for c in v["checks"].as_array().unwrap() {
        let Some(fix) = c["fix"][s.key()].as_str() else {
            continue;
        };
        let id = c["id"].as_str().unwrap();
        if advice_only(fix) {
            // Still valid where pasted.
            drop(start(s, fix, compress, id));
            continue;
        }
        if let Some((_, why)) = skip.iter().find(|(k, _)| *k == id) {
            eprintln!("NOTE: {s:?} {id}: not applied here: {why}");
            continue;
        }
        let srv = start(s, fix, compress, id);
        let after = audit(&srv);
        let now = check(&after, id);
        assert_eq!(
            now["severity"], "ok",
            "{s:?}: after pasting the fix for {id}:\n{fix}\nthe check says {now:#}"
        );
        fixed.push(id.to_string());
    }
    eprintln!("{s:?}: fixes that made their finding go away: {fixed:?}");
    fixed
}

fn has_all(fixed: &[String], want: &[&str]) {
    for w in want {
        assert!(fixed.iter().any(|f| f == w), "{w} not fixed: {fixed:?}");
    }
}

#[test]
fn apache_fixes_are_valid_and_work() {
    if !require(
        "apache2 (apt-get install apache2)",
        Path::new(bin(Server::Apache)).exists(),
    ) {
        return;
    }
    let fixed = every_fix(Server::Apache, Compress::Off, &[]);
    has_all(
        &fixed,
        &[
            "compression",
            "cache-static",
            "validators",
            "conditional-get",
            "x-content-type-options",
            "clickjacking",
            "referrer-policy",
            "csp",
            "cookies",
            "server-version",
        ],
    );
}

#[test]
fn apache_deflate_etag_suffix_is_named_and_fixed() {
    if !require(
        "apache2 (apt-get install apache2)",
        Path::new(bin(Server::Apache)).exists(),
    ) {
        return;
    }
    let base = start(Server::Apache, "", Compress::Gzip, "gzip-base");
    let v = audit(&base);
    drop(base);
    let c = check(&v, "conditional-get");
    assert_eq!(c["severity"], "error", "{c:#}");
    let ev = c["findings"][0]["evidence"].as_str().unwrap();
    assert!(
        ev.contains("-gzip") && ev.contains("mod_deflate"),
        "the cause is named: {ev}"
    );
    let fix = c["fix"]["apache"].as_str().unwrap();
    assert!(fix.contains("DeflateAlterETag NoChange"), "{fix}");
    assert!(
        !fix.contains("FileETag"),
        "not the old, wrong advice: {fix}"
    );
    // Applied, revalidation answers 304.
    let srv = start(Server::Apache, fix, Compress::Gzip, "gzip-fixed");
    let v = audit(&srv);
    assert_eq!(check(&v, "conditional-get")["severity"], "ok", "{v:#}");
    let views = &v["views"];
    assert_eq!(views[1]["not_modified"], 2, "index.html and s.css: 304");
    // And the generic loop over every fix holds with compression on too.
    drop(srv);
    let fixed = every_fix(Server::Apache, Compress::Gzip, &[]);
    has_all(&fixed, &["conditional-get"]);
}

#[test]
fn apache_brotli_etag_suffix_is_named_and_fixed() {
    if !require(
        "apache2 with mod_brotli (apt-get install apache2)",
        Path::new(bin(Server::Apache)).exists()
            && Path::new("/usr/lib/apache2/modules/mod_brotli.so").exists(),
    ) {
        return;
    }
    let base = start(Server::Apache, "", Compress::Br, "br-base");
    let v = audit(&base);
    drop(base);
    let c = check(&v, "conditional-get");
    assert_eq!(c["severity"], "error", "{c:#}");
    let ev = c["findings"][0]["evidence"].as_str().unwrap();
    assert!(ev.contains("-br") && ev.contains("mod_brotli"), "{ev}");
    let fix = c["fix"]["apache"].as_str().unwrap();
    assert!(fix.contains("BrotliAlterETag NoChange"), "{fix}");
    let srv = start(Server::Apache, fix, Compress::Br, "br-fixed");
    let v = audit(&srv);
    assert_eq!(check(&v, "conditional-get")["severity"], "ok", "{v:#}");
    assert_eq!(v["views"][1]["not_modified"], 2);
}

#[test]
fn nginx_fixes_are_valid_and_work() {
    if !require(
        "nginx (apt-get install nginx)",
        Path::new(bin(Server::Nginx)).exists(),
    ) {
        return;
    }
    let fixed = every_fix(
        Server::Nginx,
        Compress::Off,
        &[(
            "cookies",
            "nginx edits cookies of proxied responses only (proxy_cookie_flags); this site sets its own",
        )],
    );
    has_all(
        &fixed,
        &[
            "compression",
            "cache-static",
            "conditional-get",
            "x-content-type-options",
            "clickjacking",
            "referrer-policy",
            "csp",
            "server-version",
        ],
    );
}

#[test]
fn lighttpd_fixes_are_valid_and_work() {
    if !require(
        "lighttpd (apt-get install lighttpd)",
        Path::new(bin(Server::Lighttpd)).exists(),
    ) {
        return;
    }
    let deflate = require(
        "lighttpd's mod_deflate (apt-get install lighttpd-mod-deflate)",
        Path::new("/usr/lib/lighttpd/mod_deflate.so").exists(),
    );
    let mut skip = Vec::new();
    if !deflate {
        skip.push(("compression", "mod_deflate is not installed"));
    }
    let fixed = every_fix(Server::Lighttpd, Compress::Off, &skip);
    let mut want = vec![
        "cache-static",
        "x-content-type-options",
        "clickjacking",
        "referrer-policy",
        "csp",
        "server-version",
    ];
    if deflate {
        want.push("compression");
    }
    has_all(&fixed, &want);
}

// ---- https: HSTS, http->https and TLS fixes on real nginx and Apache ----

/// An https site on `port` and its plain-http twin on `http_port`; `fix`
/// goes where the fix's comment says (the https server, or the server
/// config for Apache), `http_fix` into the plain-http server.
fn config_tls(s: Server, d: &Path, port: u16, http_port: u16, fix: &str, http_fix: &str) -> String {
    let dd = d.display();
    match s {
        Server::Apache => {
            let m = "/usr/lib/apache2/modules";
            let mods = [
                ("mpm_event", "mod_mpm_event"),
                ("authz_core", "mod_authz_core"),
                ("mime", "mod_mime"),
                ("dir", "mod_dir"),
                ("headers", "mod_headers"),
                ("rewrite", "mod_rewrite"),
                ("socache_shmcb", "mod_socache_shmcb"),
                ("ssl", "mod_ssl"),
            ]
            .iter()
            .map(|(n, f)| format!("LoadModule {n}_module {m}/{f}.so\n"))
            .collect::<String>();
            format!(
                "ServerRoot {dd}\nServerName 127.0.0.1\nListen 127.0.0.1:{port}\nListen 127.0.0.1:{http_port}\n\
                 PidFile {dd}/apache2.pid\nErrorLog {dd}/error.log\nLogLevel warn\nDefaultRuntimeDir {dd}\n\
                 Mutex file:{dd} default\n{mods}{user}TypesConfig /etc/mime.types\nDirectoryIndex index.html\n\
                 DocumentRoot {dd}/site\n<Directory {dd}/site>\n  Require all granted\n</Directory>\n\
                 SSLSessionTickets Off\n\
                 <VirtualHost 127.0.0.1:{port}>\n  SSLEngine on\n  SSLCertificateFile {dd}/cert.pem\n  SSLCertificateKeyFile {dd}/key.pem\n</VirtualHost>\n\
                 <VirtualHost 127.0.0.1:{http_port}>\n{http_fix}\n</VirtualHost>\n{fix}\n",
                user = apache_user()
            )
        }
        Server::Nginx => format!(
            "daemon off; master_process off; worker_processes 1; pid {dd}/nginx.pid; error_log {dd}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {dd}/tmp/body; proxy_temp_path {dd}/tmp/proxy; fastcgi_temp_path {dd}/tmp/fcgi;
  uwsgi_temp_path {dd}/tmp/uwsgi; scgi_temp_path {dd}/tmp/scgi;
  types {{ text/html html; text/css css; }}
  # untuned: no TLS session resumption
  ssl_session_tickets off;
  ssl_session_cache off;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {dd}/cert.pem;
    ssl_certificate_key {dd}/key.pem;
    root {dd}/site;
    index index.html;
{fix}
  }}
  server {{
    listen 127.0.0.1:{http_port};
    root {dd}/site;
    index index.html;
{http_fix}
  }}
}}
"
        ),
        // `fix` in the TLS socket's block (where ssl.* settings go), `http_fix`
        // at the top level (server.modules may only be set there).
        Server::Lighttpd => format!(
            "server.document-root = \"{dd}/site\"
server.bind = \"127.0.0.1\"
server.port = {http_port}
server.errorlog = \"{dd}/error.log\"
server.modules += ( \"mod_openssl\" )
index-file.names = ( \"index.html\" )
mimetype.assign = ( \".html\" => \"text/html\", \".css\" => \"text/css\" )
# untuned: no TLS session tickets
ssl.openssl.ssl-conf-cmd = ( \"Options\" => \"-SessionTicket\" )
$SERVER[\"socket\"] == \"127.0.0.1:{port}\" {{
    ssl.engine = \"enable\"
    ssl.pemfile = \"{dd}/cert.pem\"
    ssl.privkey = \"{dd}/key.pem\"
{fix}
}}
{http_fix}
"
        ),
    }
}

struct RunningTls {
    srv: Running,
    http_port: u16,
    ca: PathBuf,
}

fn start_tls(
    s: Server,
    pki: &common::nginx::Pki,
    fix: &str,
    http_fix: &str,
    tag: &str,
) -> RunningTls {
    let dir = tmpdir(&format!("fixtls-{}-{tag}", s.key()));
    write_site(&dir);
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::fs::write(dir.join("cert.pem"), &pki.leaf_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &pki.key_pem).unwrap();
    let ca = std::env::temp_dir().join(format!(
        "redline-fixtls-ca-{}-{}.pem",
        std::process::id(),
        free_port()
    ));
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let (port, http_port) = (free_port(), free_port());
    let conf = dir.join("server.conf");
    std::fs::write(&conf, config_tls(s, &dir, port, http_port, fix, http_fix)).unwrap();
    let _ = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&dir)
        .status();
    let test = {
        let mut c = Command::new(bin(s));
        match s {
            Server::Apache => c.arg("-t").arg("-f").arg(&conf).env("APACHE_RUN_DIR", &dir),
            Server::Nginx => c.arg("-t").arg("-c").arg(&conf),
            Server::Lighttpd => c.arg("-tt").arg("-f").arg(&conf),
        };
        c.output().expect("config test")
    };
    if !test.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        panic!(
            "{s:?}: the fix is not valid where pasted:\n{fix}{http_fix}\n{}",
            String::from_utf8_lossy(&test.stderr)
        );
    }
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(bin(s));
    match s {
        Server::Apache => c
            .process_group(0)
            .args(["-D", "FOREGROUND", "-f"])
            .arg(&conf)
            .env("APACHE_RUN_DIR", &dir),
        Server::Nginx => c.arg("-p").arg(&dir).arg("-c").arg(&conf),
        Server::Lighttpd => c.arg("-D").arg("-f").arg(&conf),
    };
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server");
    let mut srv = Running { child, port, dir };
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        let up = |p| std::net::TcpStream::connect(("127.0.0.1", p)).is_ok();
        if up(port) && up(http_port) {
            return RunningTls { srv, http_port, ca };
        }
        if let Ok(Some(st)) = srv.child.try_wait() {
            let log = std::fs::read_to_string(srv.dir.join("error.log")).unwrap_or_default();
            panic!("{s:?} exited ({st}) with fix:\n{fix}{http_fix}\n{log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{s:?} did not listen on {port} and {http_port}");
}

impl Drop for RunningTls {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.ca);
    }
}

fn audit_tls(r: &RunningTls) -> Value {
    let url = format!("https://127.0.0.1:{}/index.html", r.srv.port);
    let out = redline(&[
        "audit",
        "-o",
        "json",
        "-q",
        "--cacert",
        r.ca.to_str().unwrap(),
        "--http-port",
        &r.http_port.to_string(),
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The https fixes (HSTS, http->https, TLS): each pasted, tested, started,
/// and the check `ok` after.
fn every_tls_fix(s: Server) -> Vec<String> {
    let pki = common::nginx::pki();
    let base = start_tls(s, &pki, "", "", "base");
    let v = audit_tls(&base);
    drop(base);
    let mut fixed = Vec::new();
    for id in ["hsts", "https", "tls-resumption", "tls-protocol"] {
        let c = check(&v, id);
        let Some(fix) = c["fix"][s.key()].as_str() else {
            continue;
        };
        // lighttpd: module loads and response headers only at the top level.
        let top = id == "https" || (s == Server::Lighttpd && id == "hsts");
        let (main, http) = if top { ("", fix) } else { (fix, "") };
        let srv = start_tls(s, &pki, main, http, id);
        let after = audit_tls(&srv);
        let now = check(&after, id);
        assert_eq!(
            now["severity"], "ok",
            "{s:?}: after pasting the fix for {id}:\n{fix}\nthe check says {now:#}"
        );
        fixed.push(id.to_string());
    }
    eprintln!("{s:?} https: fixes that made their finding go away: {fixed:?}");
    // Without lighttpd's TLS module its https fixes must still pass
    // `lighttpd -tt` and start (as syntax; the finding is not re-checked).
    if s != Server::Lighttpd && Path::new(bin(Server::Lighttpd)).exists() {
        for id in ["hsts", "https", "tls-resumption"] {
            let Some(fix) = check(&v, id)["fix"]["lighttpd"].as_str() else {
                continue;
            };
            if fix.contains("ssl.")
                && !require(
                    "lighttpd's mod_openssl (apt-get install lighttpd-mod-openssl)",
                    Path::new("/usr/lib/lighttpd/mod_openssl.so").exists(),
                )
            {
                continue;
            }
            drop(start(Server::Lighttpd, fix, Compress::Off, id));
        }
    }
    fixed
}

#[test]
fn nginx_https_fixes_are_valid_and_work() {
    if !require(
        "nginx (apt-get install nginx)",
        Path::new(bin(Server::Nginx)).exists(),
    ) {
        return;
    }
    let fixed = every_tls_fix(Server::Nginx);
    has_all(&fixed, &["hsts", "https", "tls-resumption"]);
}

#[test]
fn apache_https_fixes_are_valid_and_work() {
    if !require(
        "apache2 with mod_ssl (apt-get install apache2)",
        Path::new(bin(Server::Apache)).exists()
            && Path::new("/usr/lib/apache2/modules/mod_ssl.so").exists(),
    ) {
        return;
    }
    let fixed = every_tls_fix(Server::Apache);
    has_all(&fixed, &["hsts", "https", "tls-resumption"]);
}

#[test]
fn lighttpd_https_fixes_are_valid_and_work() {
    if !require(
        "lighttpd with mod_openssl (apt-get install lighttpd lighttpd-mod-openssl)",
        Path::new(bin(Server::Lighttpd)).exists()
            && Path::new("/usr/lib/lighttpd/mod_openssl.so").exists(),
    ) {
        return;
    }
    let fixed = every_tls_fix(Server::Lighttpd);
    has_all(&fixed, &["hsts", "https", "tls-resumption"]);
}

/// nginx edits cookies only on proxied responses: its fix is checked on
/// nginx in front of a scripted application that sets a bare cookie.
#[test]
fn nginx_cookie_fix_works_on_a_proxied_application() {
    if !require(
        "nginx (apt-get install nginx)",
        Path::new(bin(Server::Nginx)).exists(),
    ) {
        return;
    }
    let (app, _) = common::routed_server(|_, _| {
        let body = "<html><p>app</p></html>";
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nSet-Cookie: sid=SECRET-SID; Path=/\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    });
    let run = |fix: &str, tag: &str| -> Value {
        let dir = tmpdir(&format!("fix-nginx-proxy-{tag}"));
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        let port = free_port();
        let d = dir.display();
        let conf = format!(
            "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/tmp/body; proxy_temp_path {d}/tmp/proxy; fastcgi_temp_path {d}/tmp/fcgi;
  uwsgi_temp_path {d}/tmp/uwsgi; scgi_temp_path {d}/tmp/scgi;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://{};
{fix}
    }}
  }}
}}
",
            app.addr
        );
        let path = dir.join("nginx.conf");
        std::fs::write(&path, conf).unwrap();
        if let Err(e) = config_test(Server::Nginx, &path) {
            panic!("the fix is not valid where pasted:\n{fix}\n{e}");
        }
        let child = Command::new(bin(Server::Nginx))
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let srv = Running { child, port, dir };
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end && std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            std::thread::sleep(Duration::from_millis(20));
        }
        audit(&srv)
    };
    let v = run("", "base");
    let c = check(&v, "cookies");
    assert_eq!(c["severity"], "warning", "{c:#}");
    assert!(!v.to_string().contains("SECRET-SID"));
    let fix = c["fix"]["nginx"].as_str().unwrap().to_string();
    assert!(fix.contains("proxy_cookie_flags"), "{fix}");
    let v = run(&fix, "fixed");
    assert_eq!(check(&v, "cookies")["severity"], "ok", "{v:#}");
}

/// Every fix the audit can print (`audit::all_fixes`, whatever page would
/// make it print them), pasted alone into each server's untuned config:
/// the server's config test passes and it starts. Not pasted: fixes that
/// name the admin's certificate or OCSP files (their paths are examples).
#[test]
fn every_printable_fix_passes_the_config_test_and_starts() {
    let mut tested = 0;
    for s in [Server::Apache, Server::Nginx, Server::Lighttpd] {
        if !require(&format!("{s:?}"), Path::new(bin(s)).exists()) {
            continue;
        }
        for (i, (id, fix)) in redline_web::audit::all_fixes().into_iter().enumerate() {
            let text = match s {
                Server::Apache => fix.apache,
                Server::Nginx => fix.nginx,
                Server::Lighttpd => fix.lighttpd,
            };
            let names_files = matches!(id, "tls-certificate" | "tls-chain")
                || (id == "ocsp-stapling" && s == Server::Lighttpd);
            if names_files {
                assert!(text.contains(".pem") || text.contains(".der"), "{s:?} {id}");
                continue;
            }
            if s == Server::Lighttpd
                && text.contains("ssl.")
                && !require(
                    "lighttpd's mod_openssl (apt-get install lighttpd-mod-openssl)",
                    Path::new("/usr/lib/lighttpd/mod_openssl.so").exists(),
                )
            {
                continue;
            }
            if s == Server::Lighttpd
                && text.contains("mod_deflate")
                && !require(
                    "lighttpd's mod_deflate (apt-get install lighttpd-mod-deflate)",
                    Path::new("/usr/lib/lighttpd/mod_deflate.so").exists(),
                )
            {
                continue;
            }
            // Config test, start, stop.
            drop(start(s, text, Compress::Off, &format!("all-{i}")));
            tested += 1;
        }
    }
    eprintln!("{tested} fixes pasted, config-tested and started");
}

/// The fix blocks for `server` ("Apache", "nginx", "lighttpd") of a text
/// report, in order, as the lines under `fix (NAME):` (indent removed).
fn text_fixes(text: &str, server: &str) -> Vec<String> {
    let head = format!("fix ({server}):");
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if l.trim() != head {
            continue;
        }
        let mut block = Vec::new();
        while let Some(n) = lines.next_if(|n| n.starts_with("          ")) {
            block.push(&n[10..]);
        }
        out.push(block.join("\n"));
    }
    out
}

/// The fix blocks for `server` of an HTML report, in order, as a browser
/// shows them (the `<pre>` after `Fix (NAME)`, entities decoded).
fn html_fixes(html: &str, server: &str) -> Vec<String> {
    let head = format!("<b>Fix ({server})</b><pre class=\"fix\">");
    html.split(&head)
        .skip(1)
        .map(|rest| {
            let pre = &rest[..rest.find("</pre>").expect("closed <pre>")];
            pre.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&amp;", "&")
        })
        .collect()
}

/// Every fix block of `audit --html` is the text output's, character for
/// character, and each pasted from the HTML into a copy of the server's
/// config passes that server's own config test.
#[test]
fn html_fix_blocks_are_the_text_fixes_and_pass_the_config_test() {
    for s in [Server::Nginx, Server::Apache, Server::Lighttpd] {
        if !require(bin(s), Path::new(bin(s)).exists()) {
            continue;
        }
        let base = start(s, "", Compress::Off, "html");
        let html_path = base.dir.join("audit.html");
        let url = format!("http://127.0.0.1:{}/index.html", base.port);
        let html_arg = html_path.display().to_string();
        let out = redline(&["audit", "-q", "--no-probes", "--html", &html_arg, &url]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let html = std::fs::read_to_string(&html_path).expect("the HTML report");
        let name = match s {
            Server::Apache => "Apache",
            Server::Nginx => "nginx",
            Server::Lighttpd => "lighttpd",
        };
        let from_text = text_fixes(&text, name);
        let from_html = html_fixes(&html, name);
        assert!(
            from_text.len() >= 5,
            "{s:?}: {} fixes\n{text}",
            from_text.len()
        );
        assert_eq!(from_html, from_text, "{s:?}");
        let conf = base.dir.join("pasted.conf");
        for fix in &from_html {
            assert!(!fix.contains("\\n"), "{s:?}: a literal \\n in\n{fix}");
            std::fs::write(&conf, config(s, &base.dir, base.port, fix, Compress::Off)).unwrap();
            if let Err(e) = config_test(s, &conf) {
                panic!(
                    "{s:?}: the fix pasted from the HTML report fails the config test:\n{fix}\n{e}"
                );
            }
        }
        eprintln!(
            "{s:?}: {} fix blocks from the HTML pass the config test",
            from_html.len()
        );
    }
}
