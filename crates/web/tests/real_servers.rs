//! The audit and the views against real nginx and lighttpd (Debian packages),
//! started here on a free loopback port with their own configs in a temp
//! dir: gzip, expires and ETags turned on in one config and off in another.
//! Skipped, with a note, when the binary is missing.

mod common;

use redline_testkit::free_port;
use redline_web::audit::{audit_page, Audit, Severity};
use redline_web::load::LoadOpts;
use redline_web::page;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Running {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn find(bin: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(bin))
        .find(|p| p.exists())
}

fn temp_site(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "redline-{tag}-{}-{}",
        std::process::id(),
        free_port()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, (_, body)) in common::files() {
        if path == "/" {
            continue;
        }
        let p = dir.join("site").join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
    }
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    dir
}

fn start(bin: &Path, args: &[&str], dir: PathBuf, port: u16) -> Option<Running> {
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let r = Running { child, port, dir };
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(r);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = std::fs::read_to_string(r.dir.join("error.log")).unwrap_or_default();
    panic!("{} did not start on port {port}: {log}", bin.display());
}

fn nginx(on: bool) -> Option<Running> {
    let Some(bin) = find("nginx") else {
        eprintln!("note: nginx not installed (apt-get install -y nginx); skipping");
        return None;
    };
    let dir = temp_site(if on { "nginx-on" } else { "nginx-off" });
    let port = free_port();
    let d = dir.display();
    let tuning = if on {
        "gzip on; gzip_vary on; gzip_min_length 256; gzip_types text/css application/javascript;
         etag on;
         location ~* \\.(css|js|png|gif|jpg|woff2)$ { expires 30d; }
         location ~* \\.html$ { add_header Cache-Control \"no-cache\"; }"
    } else {
        // sub_filter drops Last-Modified (sub_filter_last_modified off): no validators at all.
        "gzip off; etag off; if_modified_since off;
         sub_filter 'no-such-text-anywhere' ''; sub_filter_types *;"
    };
    let conf = format!(
        "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/tmp/body; proxy_temp_path {d}/tmp/proxy; fastcgi_temp_path {d}/tmp/fcgi;
  uwsgi_temp_path {d}/tmp/uwsgi; scgi_temp_path {d}/tmp/scgi;
  types {{ text/html html; text/css css; application/javascript js; image/gif gif; image/png png; image/jpeg jpg; font/woff2 woff2; }}
  server {{
    listen 127.0.0.1:{port};
    root {d}/site;
    index index.html;
    {tuning}
  }}
}}
"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let conf_path = dir.join("nginx.conf");
    start(
        &bin,
        &[
            "-p",
            &dir.display().to_string(),
            "-c",
            &conf_path.display().to_string(),
        ],
        dir.clone(),
        port,
    )
}

fn lighttpd(on: bool) -> Option<Running> {
    let Some(bin) = find("lighttpd") else {
        eprintln!("note: lighttpd not installed (apt-get install -y lighttpd); skipping");
        return None;
    };
    let dir = temp_site(if on { "lighttpd-on" } else { "lighttpd-off" });
    let port = free_port();
    let d = dir.display();
    let tuning = if on {
        "server.modules += ( \"mod_deflate\", \"mod_expire\", \"mod_setenv\" )
deflate.mimetypes = ( \"text/html\", \"text/css\", \"application/javascript\" )
deflate.allowed-encodings = ( \"gzip\" )
static-file.etags = \"enable\"
$HTTP[\"url\"] =~ \"\\.(css|js|png|gif|jpg|woff2)$\" { expire.url = ( \"\" => \"access plus 30 days\" ) }
$HTTP[\"url\"] =~ \"(\\.html|/)$\" { setenv.add-response-header = ( \"Cache-Control\" => \"no-cache\" ) }"
    } else {
        "static-file.etags = \"disable\""
    };
    let conf = format!(
        "server.document-root = \"{d}/site\"
server.bind = \"127.0.0.1\"
server.port = {port}
server.errorlog = \"{d}/error.log\"
index-file.names = ( \"index.html\" )
mimetype.assign = ( \".html\" => \"text/html\", \".css\" => \"text/css\", \".js\" => \"application/javascript\", \".gif\" => \"image/gif\", \".png\" => \"image/png\", \".jpg\" => \"image/jpeg\", \".woff2\" => \"font/woff2\" )
{tuning}
"
    );
    let conf_path = dir.join("lighttpd.conf");
    std::fs::write(&conf_path, conf).unwrap();
    start(
        &bin,
        &["-D", "-f", &conf_path.display().to_string()],
        dir.clone(),
        port,
    )
}

fn run(srv: &Running) -> (page::PageReport, Audit) {
    let url = url::Url::parse(&format!("http://127.0.0.1:{}/index.html", srv.port)).unwrap();
    let r = page::run(&url, 1, &LoadOpts::default(), &mut |_| {});
    let a = audit_page(&r);
    (r, a)
}

fn sev(a: &Audit, id: &str) -> Severity {
    a.checks.iter().find(|c| c.id == id).unwrap().severity
}

fn flagged(a: &Audit, id: &str) -> BTreeSet<String> {
    let c = a.checks.iter().find(|c| c.id == id).unwrap();
    c.findings
        .iter()
        .filter(|f| f.severity >= Severity::Warning)
        .filter_map(|f| f.url.as_deref())
        .map(|u| url::Url::parse(u).unwrap().path().to_string())
        .collect()
}

fn ok_paths() -> usize {
    common::FIRST_VIEW.len() - 1 // all but the missing image
}

fn check_on(srv: Running, name: &str) {
    let (r, a) = run(&srv);
    assert_eq!(r.views[0].requests, common::FIRST_VIEW.len(), "{name}");
    for id in [
        "compression",
        "vary",
        "validators",
        "conditional-get",
        "cache-static",
        "keep-alive",
    ] {
        assert!(
            sev(&a, id) <= Severity::Info,
            "{name} {id}: {:#?}",
            a.checks.iter().find(|c| c.id == id)
        );
    }
    assert_eq!(
        r.views[1].not_modified,
        ok_paths(),
        "{name}: revalidate view 304s"
    );
    // Cached view: only the two HTML documents and the 404 are requested.
    let requested: BTreeSet<String> = r.views[2]
        .entries
        .iter()
        .filter(|e| !e.from_cache)
        .map(|e| url::Url::parse(&e.url).unwrap().path().to_string())
        .collect();
    let want: BTreeSet<String> = [
        "/index.html",
        "/frame.html",
        "/nested.html",
        "/img/missing.png",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(requested, want, "{name}: cached view");
}

fn check_off(srv: Running, name: &str, last_modified_left: bool) {
    let (r, a) = run(&srv);
    let want: BTreeSet<String> = ["/index.html", "/css/style.css", "/js/app.js"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(flagged(&a, "compression"), want, "{name}");
    assert_eq!(sev(&a, "cache-static"), Severity::Error, "{name}");
    assert_eq!(r.views[2].from_cache, 0, "{name}: nothing fresh");
    if last_modified_left {
        // lighttpd keeps Last-Modified and answers If-Modified-Since with 304.
        assert_eq!(sev(&a, "validators"), Severity::Ok, "{name}");
        assert!(
            r.views[0].entries.iter().all(|e| e.etag.is_none()),
            "{name}: no ETag"
        );
        assert_eq!(r.views[1].not_modified, ok_paths(), "{name}");
    } else {
        assert_eq!(flagged(&a, "validators").len(), ok_paths(), "{name}");
        assert_eq!(
            r.views[1].not_modified, 0,
            "{name}: 200s without validators"
        );
    }
}

#[test]
fn nginx_tuned_and_untuned() {
    if let Some(s) = nginx(true) {
        check_on(s, "nginx on");
    }
    if let Some(s) = nginx(false) {
        check_off(s, "nginx off", false);
    }
}

#[test]
fn lighttpd_tuned_and_untuned() {
    if let Some(s) = lighttpd(true) {
        check_on(s, "lighttpd on");
    }
    if let Some(s) = lighttpd(false) {
        check_off(s, "lighttpd off", true);
    }
}
