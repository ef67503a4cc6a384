//! The site check of the corpus run (issue 34, point 1 on the corpus): a
//! whole server's tree is copied, pointed at a loopback port, a scratch
//! document root and scratch logs, started, asked for a few URLs, stopped
//! (by its PID), given all of tune's fixes, started again and asked the same
//! URLs: every status and body must be the same.

use redline_watch::tune::{analyze, apply_all, Level, Server, TuneOptions};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const URLS: &[&str] = &[
    "/",
    "/index.html",
    "/app.css",
    "/app.js",
    "/logo.png",
    "/missing",
    "/sub/",
];

/// Ok(Some): what was compared; Ok(None, why): the original does not run
/// here (no fix judged); Err: what differed after the fixes, or why the
/// fixed config did not run.
pub fn check(server: Server, main: &Path, work: &Path) -> Result<Result<String, String>, String> {
    match prepare(server, main, work) {
        Err(e) => Ok(Err(e)),
        Ok((main_copy, port, before)) => compare(server, &main_copy, work, port, before).map(Ok),
    }
}

fn prepare(server: Server, main: &Path, work: &Path) -> Result<(PathBuf, u16, Answers), String> {
    let _ = std::fs::remove_dir_all(work);
    let tree = work.join("tree");
    let www = work.join("www");
    std::fs::create_dir_all(www.join("sub")).map_err(|e| e.to_string())?;
    for (f, body) in [
        (
            "index.html",
            "<!doctype html><title>t</title><link rel=stylesheet href=app.css>",
        ),
        ("app.css", "body { color: #123456 }\n"),
        ("app.js", "console.log('redline');\n"),
        ("sub/index.html", "<p>sub</p>"),
    ] {
        std::fs::write(www.join(f), body).map_err(|e| e.to_string())?;
    }
    std::fs::write(
        www.join("logo.png"),
        [0x89, b'P', b'N', b'G', 13, 10, 26, 10, 0, 0],
    )
    .map_err(|e| e.to_string())?;
    // The tree: the system's own folder when the main file reads from it
    // (Debian's files name /etc/nginx/... absolutely), the corpus copy over it.
    let home = main.parent().ok_or("no folder")?;
    let text = std::fs::read_to_string(main).map_err(|e| e.to_string())?;
    let system = match server {
        Server::Nginx => "/etc/nginx",
        Server::Apache => "/etc/apache2",
        Server::Lighttpd => "/etc/lighttpd",
    };
    let uses_system = text.contains(&format!("{system}/"))
        || (server == Server::Apache
            && !text
                .lines()
                .any(|l| l.trim_start().starts_with("ServerRoot")));
    let main_copy = tree.join(main.file_name().ok_or("no file name")?);
    if uses_system {
        // The main file in the system folder's place, the rest the system's.
        copy_dir(Path::new(system), &tree);
        std::fs::copy(main, &main_copy).map_err(|e| e.to_string())?;
    } else {
        copy_dir(home, &tree);
    }
    // nginx's relative `load_module modules/...` is read from the prefix
    // (the scratch folder here), Debian's from /usr/share/nginx.
    if server == Server::Nginx && Path::new("/usr/share/nginx/modules").exists() {
        let _ = std::os::unix::fs::symlink("/usr/share/nginx/modules", work.join("modules"));
    }
    // lighttpd opens its logs after it drops privileges.
    if server == Server::Lighttpd {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(work, std::fs::Permissions::from_mode(0o777));
    }
    let port = redline_testkit::free_port();
    rewrite_tree(server, &tree, system, work, &www, port, &main_copy)?;
    let before = serve(server, &main_copy, work, port)?;
    Ok((main_copy, port, before))
}

fn compare(
    server: Server,
    main_copy: &Path,
    work: &Path,
    port: u16,
    before: Answers,
) -> Result<String, String> {
    let opts = TuneOptions {
        server: Some(server),
        ..Default::default()
    };
    let r = analyze(main_copy, &opts)?;
    let n = r
        .findings
        .iter()
        .filter(|f| f.level != Level::Ok && f.fix.is_some())
        .count();
    apply_all(&r)?;
    let after = serve(server, main_copy, work, port)?;
    for ((u, a), (_, b)) in before.iter().zip(&after) {
        if a != b {
            return Err(format!(
                "{u}: {} ({} bytes) before, {} ({} bytes) after {n} fixes",
                a.0,
                a.1.len(),
                b.0,
                b.1.len()
            ));
        }
    }
    let _ = std::fs::remove_dir_all(work);
    let statuses: Vec<String> = before.iter().map(|(_, (s, _))| s.to_string()).collect();
    Ok(format!(
        "{} URLs the same after {n} fixes (statuses {})",
        before.len(),
        statuses.join(" ")
    ))
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::create_dir_all(to);
    let Ok(rd) = std::fs::read_dir(from) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        if name.to_string_lossy().starts_with(".redline-wrap-") {
            continue;
        }
        let (p, t) = (e.path(), to.join(&name));
        if p.is_dir() {
            copy_dir(&p, &t);
        } else if p.is_file() {
            let _ = std::fs::copy(&p, &t);
        }
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                files(&p, out);
            } else {
                out.push(p);
            }
        }
    }
}

/// Points every file of the copy at the copy, the port, the scratch logs
/// and document root.
fn rewrite_tree(
    server: Server,
    tree: &Path,
    system: &str,
    work: &Path,
    www: &Path,
    port: u16,
    main: &Path,
) -> Result<(), String> {
    let (t, w, d) = (tree.display(), work.display(), www.display());
    let mut all = Vec::new();
    files(tree, &mut all);
    for f in all {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let text = text.replace(&format!("{system}/"), &format!("{t}/"));
        let mut out = String::new();
        for line in text.lines() {
            let l = line.trim_start();
            let word = l.split_whitespace().next().unwrap_or("");
            let new = match (server, word) {
                (Server::Nginx, "listen") => {
                    if l.contains("[::]") || l.contains("ssl") || l.contains("443") {
                        format!("# {l}")
                    } else {
                        let def = if l.contains("default_server") {
                            " default_server"
                        } else {
                            ""
                        };
                        format!("listen 127.0.0.1:{port}{def};")
                    }
                }
                (Server::Nginx, "root") => format!("root {d};"),
                (Server::Nginx, "pid") => format!("pid {w}/nginx.pid;"),
                (Server::Nginx, "error_log") => format!("error_log {w}/error.log;"),
                (Server::Nginx, "access_log") if !l.contains(" off") => {
                    format!("access_log {w}/access.log;")
                }
                (Server::Apache, "Listen") => {
                    if out.contains("\nListen 127.0.0.1") || out.starts_with("Listen 127.0.0.1") {
                        format!("# {l}")
                    } else {
                        format!("Listen 127.0.0.1:{port}")
                    }
                }
                // TLS hosts (no certificate here) on a port nothing listens on.
                (Server::Apache, "<VirtualHost") if l.contains(":443") => {
                    "<VirtualHost 127.0.0.1:1>".to_string()
                }
                (Server::Apache, "<VirtualHost") => format!("<VirtualHost *:{port}>"),
                (Server::Apache, "DocumentRoot") => format!("DocumentRoot {d}"),
                (Server::Apache, "ServerRoot") => format!("# {l}"),
                (Server::Lighttpd, w0) if w0.starts_with("server.document-root") => {
                    format!("server.document-root = \"{d}\"")
                }
                (Server::Lighttpd, w0)
                    if w0.starts_with("server.port") || w0.starts_with("server.bind") =>
                {
                    format!("# {l}")
                }
                (Server::Lighttpd, w0) if w0.starts_with("server.pid-file") => {
                    format!("server.pid-file = \"{w}/lighttpd.pid\"")
                }
                (Server::Lighttpd, w0) if w0.starts_with("server.errorlog") => {
                    format!("server.errorlog = \"{w}/error.log\"")
                }
                (Server::Lighttpd, w0) if w0.starts_with("accesslog.filename") => {
                    format!("accesslog.filename = \"{w}/access.log\"")
                }
                _ => line.to_string(),
            };
            out.push_str(&new);
            out.push('\n');
        }
        if server == Server::Apache {
            out = out.replace("<Directory /var/www/>", &format!("<Directory {d}/>"));
        }
        if f == main {
            match server {
                Server::Apache => out = format!("ServerRoot \"{t}\"\n{out}"),
                Server::Lighttpd => out.push_str(&format!(
                    "server.port = {port}\nserver.bind = \"127.0.0.1\"\n"
                )),
                Server::Nginx => {}
            }
        }
        std::fs::write(&f, out).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    Ok(())
}

/// The server on the copy, stopped by its PID on drop (TERM first: Apache's
/// children leave with their parent).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .stderr(Stdio::null())
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the server, asks every URL, stops it: (URL, (status, body)).
type Answers = Vec<(&'static str, (u16, Vec<u8>))>;

fn serve(server: Server, main: &Path, work: &Path, port: u16) -> Result<Answers, String> {
    let bin = redline_watch::tune::servertest::binary(server).ok_or("server not installed")?;
    let mut cmd = Command::new(&bin);
    match server {
        Server::Nginx => {
            cmd.arg("-p")
                .arg(work)
                .arg("-c")
                .arg(main)
                .arg("-g")
                .arg("daemon off;");
        }
        Server::Apache => {
            cmd.arg("-f").arg(main).arg("-DFOREGROUND");
            for v in ["APACHE_RUN_DIR", "APACHE_LOCK_DIR", "APACHE_LOG_DIR"] {
                cmd.env(v, work);
            }
            cmd.env("APACHE_PID_FILE", work.join("apache2.pid"))
                .env("APACHE_RUN_USER", "www-data")
                .env("APACHE_RUN_GROUP", "www-data");
        }
        Server::Lighttpd => {
            cmd.arg("-D").arg("-f").arg(main);
        }
    }
    let log = std::fs::File::create(work.join("server.out")).map_err(|e| e.to_string())?;
    let child = cmd
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let mut running = Running(child);
    let t0 = Instant::now();
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        if let Ok(Some(s)) = running.0.try_wait() {
            let said = std::fs::read_to_string(work.join("server.out")).unwrap_or_default();
            return Err(format!("the server exited ({s}): {}", said.trim()));
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(format!("nothing listens on port {port} after 10 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = Vec::new();
    for u in URLS {
        out.push((*u, get(port, u)?));
    }
    drop(running);
    Ok(out)
}

fn get(port: u16, path: &str) -> Result<(u16, Vec<u8>), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.take(4 << 20)
        .read_to_end(&mut buf)
        .map_err(|e| format!("{path}: {e}"))?;
    // A connection closed without an answer (nginx's `return 444`) is
    // status 0: compared like any other.
    let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok((0, buf));
    };
    let status = std::str::from_utf8(&buf[..head_end])
        .ok()
        .and_then(|h| h.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("{path}: no status"))?;
    Ok((status, buf[head_end + 4..].to_vec()))
}
