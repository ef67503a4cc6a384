//! Debian's Caddy (2.6: HTTP/1.1, HTTP/2 and HTTP/3 over TLS by default) on
//! a free loopback port with its own configuration, data and certificate
//! (the testkit's [`crate::pki`] leaf), serving a folder with a JSON access
//! log; killed by PID when dropped. `admin off`: no admin endpoint.

use crate::proc::KillOnDrop;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A running Caddy.
pub struct Caddy {
    /// Its port (TCP and UDP) on 127.0.0.1.
    pub port: u16,
    /// The folder it serves.
    pub root: PathBuf,
    /// Its JSON access log.
    pub log: PathBuf,
    _child: KillOnDrop,
}

/// Whether Debian's `caddy` is installed.
pub fn installed() -> bool {
    std::process::Command::new("caddy")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Starts Caddy serving `files` (name, content) over https with `pki`'s
/// leaf; waits (15 s at most) until it accepts connections.
pub fn start(pki: &crate::pki::Pki, files: &[(&str, &[u8])]) -> Caddy {
    start_with(pki, files, "")
}

/// As [`start`], with more directives in the site block (`redir /a /b 302`).
pub fn start_with(pki: &crate::pki::Pki, files: &[(&str, &[u8])], directives: &str) -> Caddy {
    let dir = crate::tmpdir("caddy");
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    for (name, content) in files {
        std::fs::write(root.join(name), content).unwrap();
    }
    std::fs::write(dir.join("cert.pem"), &pki.leaf_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &pki.key_pem).unwrap();
    let port = crate::free_port();
    let log = dir.join("access.log");
    let d = dir.display();
    // No SNI for an IP address: default_sni picks the certificate.
    let conf = format!(
        "{{\n admin off\n auto_https disable_redirects\n default_sni 127.0.0.1\n \
         storage file_system {d}/data\n servers {{\n  protocols h1 h2 h3\n }}\n}}\n\
         https://127.0.0.1:{port} {{\n tls {d}/cert.pem {d}/key.pem\n {directives}\n root * {}\n \
         file_server\n log {{\n  output file {}\n  format json\n }}\n}}\n",
        root.display(),
        log.display()
    );
    std::fs::write(dir.join("Caddyfile"), conf).unwrap();
    let child = std::process::Command::new("caddy")
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(dir.join("Caddyfile"))
        .env("HOME", &dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("caddy.err")).unwrap())
        .spawn()
        .expect("start caddy");
    let caddy = Caddy {
        port,
        root,
        log,
        _child: KillOnDrop(child),
    };
    let end = Instant::now() + Duration::from_secs(15);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < end,
            "caddy did not start: see {d}/caddy.err"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its UDP listener opens with the TCP one; a moment for both.
    std::thread::sleep(Duration::from_millis(200));
    caddy
}

impl Caddy {
    /// Lines of its access log whose protocol is `proto` (`HTTP/3.0`…).
    pub fn logged(&self, proto: &str) -> u64 {
        let needle = format!("\"proto\":\"{proto}\"");
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&needle))
            .count() as u64
    }

    /// Waits (5 s at most) until its log holds `n` lines of `proto` (it
    /// writes a line after the answer); the count then.
    pub fn wait_logged(&self, proto: &str, n: u64) -> u64 {
        let end = Instant::now() + Duration::from_secs(5);
        while self.logged(proto) < n && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.logged(proto)
    }
}
