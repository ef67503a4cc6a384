//! Debian's nginx for tests: started on a free loopback port with its own
//! config and prefix in a temporary directory (nginx cannot bind port 0, so a
//! port is picked by binding 0 and closing), killed and removed on drop.
//! Missing nginx is [`crate::need::missing`] (a skip locally, a failure in CI).

use crate::pki::Pki;
use crate::{free_port, tmpdir};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running nginx; killed and its directory removed on drop.
pub struct Nginx {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its prefix: config, logs, `site/` (the document root).
    pub dir: PathBuf,
}

impl Nginx {
    /// The PID of the one nginx process (`master_process off`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How many answers with `status` nginx logged, for a server started
    /// by [`start_counting_nginx`] (0 when it logged none).
    pub fn logged(&self, status: &str) -> u64 {
        let log = std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default();
        log.lines().filter(|l| *l == status).count() as u64
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The installed nginx binary, if any.
pub fn nginx_bin() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// nginx version as (major, minor, patch), from `nginx -v`.
pub fn nginx_version(bin: &Path) -> (u32, u32, u32) {
    let out = Command::new(bin).arg("-v").output().unwrap();
    let s = String::from_utf8_lossy(&out.stderr).to_string();
    let v = s.split("nginx/").nth(1).unwrap_or("0.0.0");
    let mut it = v
        .split(|c: char| !c.is_ascii_digit())
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

/// What an nginx for a test serves.
pub struct NginxSite<'a> {
    /// Names the temporary directory.
    pub tag: &'a str,
    /// Files of the site (path under the root, contents).
    pub files: &'a [(&'a str, Vec<u8>)],
    /// TLS with this leaf certificate (`ssl` on the listen line).
    pub tls: Option<&'a Pki>,
    /// HTTP/2 (`listen … http2` before nginx 1.25.1, `http2 on;` after).
    pub h2: bool,
    /// More lines for the `http` block (`{d}` is replaced by the directory),
    /// e.g. a `log_format` and an `access_log`; without one access logging is off.
    pub http_extra: &'a str,
    /// `types { … }` entries.
    pub types: &'a str,
}

/// Starts nginx serving a 440-byte `index.html` and logging each answer's
/// status alone on a line ([`Nginx::logged`] counts them): the server for
/// tests that hold redline's counts to nginx's.
pub fn start_counting_nginx(tag: &str) -> Option<Nginx> {
    start_nginx(&NginxSite {
        tag,
        files: &[("index.html", vec![b'x'; 440])],
        tls: None,
        h2: false,
        http_extra: "log_format n '$status'; access_log {d}/access.log n;",
        types: "",
    })
}

/// Starts nginx on 127.0.0.1 serving `site`; None (with a note) when nginx
/// is not installed. Panics with the error log when it does not start.
pub fn start_nginx(site: &NginxSite) -> Option<Nginx> {
    let Some(bin) = nginx_bin() else {
        crate::need::missing("nginx (apt-get install -y nginx)");
        return None;
    };
    let dir = tmpdir(site.tag);
    std::fs::create_dir_all(dir.join("site")).unwrap();
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    for (name, body) in site.files {
        let path = dir.join("site").join(name.trim_start_matches('/'));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    let port = free_port();
    let d = dir.display().to_string();
    let new = nginx_version(&bin) >= (1, 25, 1);
    let (listen_h2, http2) = match (site.h2, new) {
        (true, true) => ("", "http2 on;"),
        (true, false) => (" http2", ""),
        (false, _) => ("", ""),
    };
    let (ssl, certs) = match site.tls {
        Some(p) => {
            std::fs::write(dir.join("cert.pem"), &p.leaf_pem).unwrap();
            std::fs::write(dir.join("key.pem"), &p.key_pem).unwrap();
            (
                " ssl",
                format!("ssl_certificate {d}/cert.pem;\n    ssl_certificate_key {d}/key.pem;"),
            )
        }
        None => ("", String::new()),
    };
    let extra = site.http_extra.replace("{d}", &d);
    let access = if extra.contains("access_log") {
        ""
    } else {
        "access_log off;"
    };
    let conf = format!(
        "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 64; }}
http {{
  {access}
  {extra}
  client_body_temp_path {d}/tmp/body; proxy_temp_path {d}/tmp/proxy; fastcgi_temp_path {d}/tmp/fcgi;
  uwsgi_temp_path {d}/tmp/uwsgi; scgi_temp_path {d}/tmp/scgi;
  types {{ {types} }}
  server {{
    listen 127.0.0.1:{port}{ssl}{listen_h2};
    {http2}
    {certs}
    root {d}/site;
    index index.html;
  }}
}}
",
        types = site.types
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let child = Command::new(&bin)
        .args(["-p", &d, "-c", &conf_path.display().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut n = Nginx { child, port, dir };
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        // Ours answers, not another process on the port: nginx alive (by
        // its PID) and its pid file written, which it does once listening.
        let alive = matches!(n.child.try_wait(), Ok(None));
        if !alive {
            break;
        }
        // The file is created before its number is written: wait for our PID in it.
        let ours = std::fs::read_to_string(n.dir.join("nginx.pid"))
            .is_ok_and(|s| s.trim() == n.child.id().to_string());
        if ours && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(n);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = std::fs::read_to_string(n.dir.join("error.log")).unwrap_or_default();
    panic!("nginx did not start on port {port}: {log}");
}
