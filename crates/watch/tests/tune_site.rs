//! Every fix `tune` prints keeps the site serving what it served: a real
//! nginx reverse proxy (static files, `location / { proxy_pass … }` to a
//! second nginx as the backend, a health-check location) from the fixture
//! `fixtures/tune/site/nginx-proxy`, all of tune's fixes applied together,
//! `nginx -t`, a restart, and the same URLs must give the same status and
//! body. The expiry fix must not take `/app.js` from the proxy (the issue's
//! 200 → 404), and must still set the static files' expiry.

use redline_testkit::need::require;
use redline_testkit::nginx::{nginx_bin, start_nginx, NginxSite};
use redline_watch::tune::{analyze, apply_all, Level, Server, TuneOptions, TuneReport};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tune/site/nginx-proxy")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// The front nginx, stopped by its PID on drop.
struct Front {
    child: Child,
    port: u16,
}

impl Drop for Front {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts nginx on `conf` (prefix `dir`) and waits, at most 10 s, until it
/// listens on `port`: its own PID alive and its pid file written.
fn start_front(bin: &Path, dir: &Path, conf: &Path, port: u16) -> Front {
    let _ = std::fs::remove_file(dir.join("nginx.pid"));
    let child = Command::new(bin)
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nginx");
    let mut f = Front { child, port };
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if !matches!(f.child.try_wait(), Ok(None)) {
            break;
        }
        if dir.join("nginx.pid").exists() && TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return f;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    let _ = f.child.kill();
    panic!("nginx did not start on port {port}: {log}");
}

/// One response: status, headers (lower-case names), body (chunks joined).
struct Resp {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

fn get(port: u16, path: &str) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        let (mut out, mut rest) = (Vec::new(), &body[..]);
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let n = usize::from_str_radix(
                String::from_utf8_lossy(&rest[..nl])
                    .split(';')
                    .next()
                    .unwrap()
                    .trim(),
                16,
            )
            .unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&rest[nl + 2..nl + 2 + n]);
            rest = &rest[nl + 2 + n + 2..];
        }
        body = out;
    }
    Resp {
        status,
        headers,
        body,
    }
}

/// tune's report on `conf` read as `server`, which must hold every finding
/// code in `want` at a level above [OK].
fn analyze_expecting(conf: &Path, server: Server, want: &[&str]) -> TuneReport {
    let opts = TuneOptions {
        server: Some(server),
        ..Default::default()
    };
    let r = analyze(conf, &opts).unwrap();
    let codes: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.level != Level::Ok)
        .map(|f| f.code.as_str())
        .collect();
    for w in want {
        assert!(codes.contains(w), "{w} not found: {:#?}", r.findings);
    }
    r
}

#[test]
fn every_nginx_fix_together_keeps_a_reverse_proxy_serving_the_same() {
    let Some(bin) = nginx_bin() else {
        require("nginx (apt-get install -y nginx)", false);
        return;
    };
    // The backend: a second nginx with an app's script, its API and its home page.
    let backend_files = [
        ("app.js", b"console.log('from the backend');\n".to_vec()),
        ("api/data.json", b"{\"ok\":true}\n".to_vec()),
        ("index.html", b"<h1>backend home</h1>\n".to_vec()),
    ];
    let Some(backend) = start_nginx(&NginxSite {
        tag: "tune-site-backend",
        files: &backend_files,
        tls: None,
        h2: false,
        http_extra: "",
        types: "text/html html; application/javascript js; application/json json;",
    }) else {
        return;
    };

    // The front: the fixture with its directory, port and backend filled in.
    let dir = redline_testkit::tmpdir("tune-site-front");
    copy_dir(&fixture(), &dir);
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let port = redline_testkit::free_port();
    let conf = dir.join("nginx.conf");
    let text = std::fs::read_to_string(&conf)
        .unwrap()
        .replace("@DIR@", &dir.display().to_string())
        .replace("@PORT@", &port.to_string())
        .replace("@BACKEND@", &backend.port.to_string());
    std::fs::write(&conf, text).unwrap();

    let urls = [
        "/",
        "/app.js",
        "/api/data.json",
        "/missing.js",
        "/static/style.css",
        "/static/lib.js",
        "/static/logo.png",
        "/static/missing.css",
        "/health",
    ];
    let front = start_front(&bin, &dir, &conf, port);
    let before: Vec<Resp> = urls.iter().map(|u| get(front.port, u)).collect();
    drop(front);
    // What the site serves, as a user would check it.
    assert_eq!(before[1].status, 200);
    assert_eq!(before[1].body, b"console.log('from the backend');\n");
    assert_eq!(before[3].status, 404);
    assert_eq!(before[4].body, b"body { color: #333; }\n");
    assert_eq!(before[8].body, b"up\n");

    // Every fix tune prints, applied together.
    let r = analyze_expecting(
        &conf,
        Server::Nginx,
        &[
            "sendfile_off",
            "keepalive_off",
            "no_compression",
            "no_expires",
            "upstream_keepalive_unused",
        ],
    );
    // The health check's own keepalive_timeout 0 is not one of them.
    assert!(
        !r.findings
            .iter()
            .any(|f| f.code == "keepalive_off" && f.level != Level::Ok && f.line == 44),
        "{:#?}",
        r.findings
    );
    let n = apply_all(&r).unwrap();
    assert!(n >= 6, "{n} fixes: {:#?}", r.findings);
    let fixed = std::fs::read_to_string(&conf).unwrap();
    assert!(!fixed.contains("location ~"), "{fixed}");
    let t = Command::new(&bin)
        .arg("-t")
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf)
        .output()
        .unwrap();
    assert!(
        t.status.success(),
        "nginx -t refuses the fixed config: {}\n{fixed}",
        String::from_utf8_lossy(&t.stderr)
    );

    // Restarted: the same status and body for every URL.
    let front = start_front(&bin, &dir, &conf, port);
    let after: Vec<Resp> = urls.iter().map(|u| get(front.port, u)).collect();
    drop(front);
    for ((u, b), a) in urls.iter().zip(&before).zip(&after) {
        assert_eq!(
            (a.status, &a.body),
            (b.status, &b.body),
            "{u}: {} {:?} before, {} {:?} after the fixes\n{fixed}",
            b.status,
            String::from_utf8_lossy(&b.body),
            a.status,
            String::from_utf8_lossy(&a.body)
        );
    }
    // The fixes did what they say: static CSS and images now expire, the
    // page from the backend does not.
    let cc = |r: &Resp| r.headers.get("cache-control").cloned().unwrap_or_default();
    assert_eq!(cc(&after[4]), "max-age=604800", "{:?}", after[4].headers);
    assert_eq!(cc(&after[6]), "max-age=2592000", "{:?}", after[6].headers);
    assert_eq!(cc(&after[0]), "", "{:?}", after[0].headers);
    // And nothing tune warned about is left.
    let again = analyze_expecting(&conf, Server::Nginx, &[]);
    let left: Vec<&str> = again
        .findings
        .iter()
        .filter(|f| f.level == Level::Warn)
        .map(|f| f.code.as_str())
        .collect();
    assert!(left.is_empty(), "{:#?}", again.findings);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Apache of the WordPress-like site, stopped by its PID on drop
/// (SIGTERM: the parent stops its children, then exits).
struct ApacheSite {
    child: Child,
}

impl Drop for ApacheSite {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Apache in the foreground on `conf` and waits, at most 10 s, until
/// it answers on `port`.
fn start_apache(bin: &Path, dir: &Path, conf: &Path, port: u16) -> ApacheSite {
    use std::os::unix::process::CommandExt;
    let child = Command::new(bin)
        .arg("-f")
        .arg(conf)
        .arg("-DFOREGROUND")
        // Apache stops by signalling its whole process group: its own, not
        // the test's.
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start apache2");
    let mut a = ApacheSite { child };
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if !matches!(a.child.try_wait(), Ok(None)) {
            break;
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return a;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    drop(a);
    panic!("apache2 did not start on port {port}: {log}");
}

/// Waits (at most 10 s) until nothing listens on `port` any more.
fn port_free(port: u16) {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end && TcpStream::connect(("127.0.0.1", port)).is_ok() {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_apache_fix_together_keeps_a_wordpress_site_serving_the_same() {
    let bin = Path::new("/usr/sbin/apache2");
    if !require("apache2 (apt-get install -y apache2)", bin.is_file()) {
        return;
    }
    let dir = redline_testkit::tmpdir("tune-site-apache");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tune/site/apache-wordpress"),
        &dir,
    );
    let port = redline_testkit::free_port();
    let conf = dir.join("httpd.conf");
    let text = std::fs::read_to_string(&conf)
        .unwrap()
        .replace("@DIR@", &dir.display().to_string())
        .replace("@PORT@", &port.to_string());
    std::fs::write(&conf, text).unwrap();

    let urls = [
        "/",
        "/2024/hello/",
        "/category/news/",
        "/index.php",
        "/wp-content/style.css",
        "/wp-content/app.js",
        "/wp-content/logo.svg",
        "/readme.html",
        "/wp-content/missing.css",
        "/.htaccess",
    ];
    let site = start_apache(bin, &dir, &conf, port);
    let before: Vec<Resp> = urls.iter().map(|u| get(port, u)).collect();
    drop(site);
    port_free(port);
    // What the site serves, as a user would check it: pretty permalinks
    // reach index.php, static files are themselves.
    assert_eq!(before[1].status, 200);
    assert_eq!(before[1].body, b"<h1>index for /2024/hello/</h1>\n");
    assert_eq!(before[0].body, b"<h1>index for /</h1>\n");
    assert_eq!(before[4].body, b"body { color: #333; }\n");
    assert_eq!(
        before[9].status,
        403,
        "{:?}",
        String::from_utf8_lossy(&before[9].body)
    );

    let r = analyze_expecting(
        &conf,
        Server::Apache,
        &[
            "allow_override",
            "timeout_high",
            "keepalive_off",
            "no_compression",
            "no_expires",
        ],
    );
    // The .htaccess uses mod_rewrite: never "unused", with or without
    // AllowOverride.
    assert!(
        !r.findings.iter().any(|f| f.code == "module_unused"
            && f.level != Level::Ok
            && f.message.contains("rewrite")),
        "{:#?}",
        r.findings
    );
    let n = apply_all(&r).unwrap();
    assert!(n >= 5, "{n} fixes: {:#?}", r.findings);
    let fixed = std::fs::read_to_string(&conf).unwrap();
    assert!(
        fixed.contains("AllowOverride None\n# the rules of"),
        "{fixed}"
    );
    let t = Command::new(bin)
        .arg("-t")
        .arg("-f")
        .arg(&conf)
        .output()
        .unwrap();
    assert!(
        t.status.success(),
        "apache2 -t refuses the fixed config: {}\n{fixed}",
        String::from_utf8_lossy(&t.stderr)
    );

    // Restarted: the same status and body for every URL.
    let site = start_apache(bin, &dir, &conf, port);
    let after: Vec<Resp> = urls.iter().map(|u| get(port, u)).collect();
    drop(site);
    for ((u, b), a) in urls.iter().zip(&before).zip(&after) {
        assert_eq!(
            (a.status, &a.body),
            (b.status, &b.body),
            "{u}: {} {:?} before, {} {:?} after the fixes\n{fixed}",
            b.status,
            String::from_utf8_lossy(&b.body),
            a.status,
            String::from_utf8_lossy(&a.body)
        );
    }
    // The fixes did what they say: the stylesheet now expires.
    let cc = |r: &Resp| r.headers.get("expires").cloned().unwrap_or_default();
    assert!(!cc(&after[4]).is_empty(), "{:?}", after[4].headers);
    // And tune, asked again, does not call rewrite unused now that the
    // .htaccess is no longer read: its rules are in the config.
    let again = analyze_expecting(&conf, Server::Apache, &[]);
    let left: Vec<&str> = again
        .findings
        .iter()
        .filter(|f| f.level == Level::Warn)
        .map(|f| f.code.as_str())
        .collect();
    assert!(left.is_empty(), "{:#?}", again.findings);
    assert!(
        !again
            .findings
            .iter()
            .any(|f| f.code == "module_unused" && f.level != Level::Ok),
        "{:#?}",
        again.findings
    );
    let _ = std::fs::remove_dir_all(&dir);
}
