//! The server's own status page, read during a run (`--server-status`):
//! pure parsers for Apache mod_status `?auto`, nginx stub_status, lighttpd
//! mod_status `?auto` and php-fpm's status page (each tested on output
//! captured from the real server), a small HTTP/1.0 GET to read them, and a
//! thread that reads one every interval into a [`StatusWatch`].

use redline_stats::watch::{StatusSample, StatusWatch};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The status formats redline reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusKind {
    /// Apache mod_status, machine-readable (`/server-status?auto`).
    Apache,
    /// nginx `stub_status`.
    Nginx,
    /// lighttpd mod_status, machine-readable (`/server-status?auto`).
    Lighttpd,
    /// php-fpm's `pm.status_path` page (plain text).
    PhpFpm,
}

impl StatusKind {
    /// The name kept in the record.
    pub fn name(self) -> &'static str {
        match self {
            StatusKind::Apache => "apache",
            StatusKind::Nginx => "nginx",
            StatusKind::Lighttpd => "lighttpd",
            StatusKind::PhpFpm => "php-fpm",
        }
    }

    /// Which format a status page body is in; `None`: not a status page.
    pub fn detect(body: &str) -> Option<StatusKind> {
        if body.starts_with("Active connections:") {
            Some(StatusKind::Nginx)
        } else if body.contains("\nprocess manager:") || body.starts_with("pool:") {
            Some(StatusKind::PhpFpm)
        } else if body.contains("BusyWorkers:") {
            Some(StatusKind::Apache)
        } else if body.contains("BusyServers:") {
            Some(StatusKind::Lighttpd)
        } else {
            None
        }
    }
}

/// `Key: value` lines (the `?auto` and php-fpm formats), keys trimmed.
fn fields(body: &str) -> impl Iterator<Item = (&str, &str)> {
    body.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
}

fn num(body: &str, key: &str) -> Option<u64> {
    fields(body)
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

/// Counts per scoreboard character.
fn scoreboard(body: &str) -> Option<(u64, std::collections::BTreeMap<String, u64>)> {
    let (_, sb) = fields(body).find(|(k, _)| *k == "Scoreboard")?;
    let mut m = std::collections::BTreeMap::new();
    for c in sb.chars() {
        *m.entry(c.to_string()).or_insert(0) += 1;
    }
    Some((sb.chars().count() as u64, m))
}

/// Apache mod_status `?auto`: BusyWorkers (which include the `K` slots),
/// IdleWorkers, Total Accesses, the scoreboard's states, and on the threaded
/// MPMs `Processes`, `Stopping` and the event MPM's connection states
/// (`ConnsTotal`, `ConnsAsyncWriting`, `ConnsAsyncKeepAlive`,
/// `ConnsAsyncClosing`). Also returns the scoreboard's length (its slots).
pub fn parse_apache(body: &str) -> Result<(StatusSample, Option<u64>), String> {
    let busy = num(body, "BusyWorkers").ok_or("no BusyWorkers line (is it ?auto?)")?;
    let sb = scoreboard(body);
    let states = sb.as_ref().map(|s| s.1.clone()).unwrap_or_default();
    Ok((
        StatusSample {
            busy: Some(busy),
            idle: num(body, "IdleWorkers"),
            keepalive: sb.as_ref().map(|s| s.1.get("K").copied().unwrap_or(0)),
            requests: num(body, "Total Accesses"),
            processes: num(body, "Processes"),
            stopping: num(body, "Stopping"),
            conns_total: num(body, "ConnsTotal"),
            async_writing: num(body, "ConnsAsyncWriting"),
            async_keepalive: num(body, "ConnsAsyncKeepAlive"),
            async_closing: num(body, "ConnsAsyncClosing"),
            states,
            ..Default::default()
        },
        sb.map(|s| s.0),
    ))
}

/// Apache: the MPM its `?auto` page names (`ServerMPM: event`, 2.4.35 and
/// later), lowercased; None on older pages and other servers.
pub fn apache_mpm(body: &str) -> Option<String> {
    fields(body)
        .find(|(k, _)| *k == "ServerMPM")
        .map(|(_, v)| v.to_ascii_lowercase())
        .filter(|v| !v.is_empty() && v.len() <= 32 && v.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// lighttpd mod_status `?auto`: BusyServers, IdleServers, Total Accesses,
/// the scoreboard (one character per connection slot). Also returns the slots.
pub fn parse_lighttpd(body: &str) -> Result<(StatusSample, Option<u64>), String> {
    let busy = num(body, "BusyServers").ok_or("no BusyServers line (is it ?auto?)")?;
    let sb = scoreboard(body);
    Ok((
        StatusSample {
            busy: Some(busy),
            idle: num(body, "IdleServers"),
            requests: num(body, "Total Accesses"),
            states: sb.as_ref().map(|s| s.1.clone()).unwrap_or_default(),
            ..Default::default()
        },
        sb.map(|s| s.0),
    ))
}

/// nginx stub_status: `Active connections: N`, then `accepts handled
/// requests` counters, then `Reading: R Writing: W Waiting: K`. Busy is
/// Reading + Writing (connections with a request in progress), keep-alive
/// is Waiting.
pub fn parse_nginx(body: &str) -> Result<StatusSample, String> {
    let mut lines = body.lines();
    let active = lines
        .next()
        .and_then(|l| l.strip_prefix("Active connections:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or("no \"Active connections:\" line")?;
    let mut counters = None;
    let mut rw = None;
    while let Some(l) = lines.next() {
        if l.trim() == "server accepts handled requests" {
            let v: Vec<u64> = lines
                .next()
                .unwrap_or("")
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            if v.len() == 3 {
                counters = Some((v[0], v[1], v[2]));
            }
        } else if l.trim_start().starts_with("Reading:") {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = |k: &str| -> Option<u64> {
                let i = w.iter().position(|x| *x == k)?;
                w.get(i + 1)?.parse().ok()
            };
            rw = Some((
                at("Reading:").ok_or("bad Reading: line")?,
                at("Writing:").ok_or("bad Writing: line")?,
                at("Waiting:").ok_or("bad Waiting: line")?,
            ));
        }
    }
    let (accepts, handled, requests) = counters.ok_or("no accepts/handled/requests line")?;
    let (r, w, k) = rw.ok_or("no Reading/Writing/Waiting line")?;
    Ok(StatusSample {
        busy: Some(r + w),
        keepalive: Some(k),
        requests: Some(requests),
        active: Some(active),
        accepts: Some(accepts),
        handled: Some(handled),
        ..Default::default()
    })
}

/// php-fpm's status page (plain text): active/idle/total processes, max
/// children reached, listen queue, accepted conn.
pub fn parse_php_fpm(body: &str) -> Result<StatusSample, String> {
    let active = num(body, "active processes").ok_or("no \"active processes\" line")?;
    Ok(StatusSample {
        busy: Some(active),
        idle: num(body, "idle processes"),
        processes: num(body, "total processes"),
        max_children_reached: num(body, "max children reached"),
        listen_queue: num(body, "listen queue"),
        requests: num(body, "accepted conn"),
        ..Default::default()
    })
}

/// Parses a body in the given format; also returns the scoreboard slots.
pub fn parse(kind: StatusKind, body: &str) -> Result<(StatusSample, Option<u64>), String> {
    match kind {
        StatusKind::Apache => parse_apache(body),
        StatusKind::Lighttpd => parse_lighttpd(body),
        StatusKind::Nginx => parse_nginx(body).map(|s| (s, None)),
        StatusKind::PhpFpm => parse_php_fpm(body).map(|s| (s, None)),
    }
}

/// An `http://host[:port]/path` status URL, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusUrl {
    /// Host (brackets kept off an IPv6 address).
    pub host: String,
    /// Port (80 when not given).
    pub port: u16,
    /// Path and query.
    pub path: String,
}

impl StatusUrl {
    /// Parses a status URL; Err: one line saying what is wrong.
    pub fn parse(s: &str) -> Result<StatusUrl, String> {
        let rest = s.strip_prefix("http://").ok_or_else(|| {
            if s.starts_with("https://") {
                "--server-status: only http:// status pages are read (point it at a plain-HTTP listener, e.g. on 127.0.0.1)".to_string()
            } else {
                "--server-status: give a URL like http://127.0.0.1/server-status?auto".to_string()
            }
        })?;
        let (auth, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path
        };
        if auth.contains('@') {
            return Err("--server-status: credentials in the URL are not supported (allow the status page from the client's address instead)".into());
        }
        let (host, port) = if let Some(v6) = auth.strip_prefix('[') {
            let (h, p) = v6
                .split_once(']')
                .ok_or("--server-status: unclosed [ in the host")?;
            (h.to_string(), p.strip_prefix(':'))
        } else {
            match auth.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (auth.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err("--server-status: no host in the URL".into());
        }
        let port = match port {
            Some(p) => p
                .parse()
                .map_err(|_| format!("--server-status: bad port {p:?}"))?,
            None => 80,
        };
        if path.chars().any(|c| c.is_control() || c == ' ') {
            return Err("--server-status: spaces or control characters in the path".into());
        }
        Ok(StatusUrl { host, port, path })
    }

    /// The URL as kept in the record.
    pub fn display(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("http://{host}:{}{}", self.port, self.path)
    }
}

/// The most of a status page read (Apache's with a large scoreboard is a few KiB).
const MAX_BODY: u64 = 1 << 20;

/// Why a read of the status page failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailKind {
    /// No full answer in time (connect or answer): the server had no
    /// worker free to answer it, or was that slow.
    Timeout,
    /// Connection refused or reset: nothing listening, or the server dropped it.
    Refused,
    /// An answer, but not HTTP 200 or not a status page redline reads.
    NotStatus,
    /// Anything else (name resolution, ...).
    Other,
}

impl FailKind {
    /// The name kept in the record (`StatusFailure::kind`).
    pub fn name(self) -> &'static str {
        match self {
            FailKind::Timeout => "timeout",
            FailKind::Refused => "refused",
            FailKind::NotStatus => "not_status",
            FailKind::Other => "other",
        }
    }

    fn of_io(e: &std::io::Error) -> FailKind {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::TimedOut | K::WouldBlock => FailKind::Timeout,
            K::ConnectionRefused | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => {
                FailKind::Refused
            }
            _ => FailKind::Other,
        }
    }
}

/// A failed read: its kind and one line saying what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// Why, as a kind.
    pub kind: FailKind,
    /// Why, in words (one line).
    pub message: String,
}

impl ReadError {
    fn new(kind: FailKind, message: String) -> ReadError {
        ReadError { kind, message }
    }
}

/// GETs the page (HTTP/1.0, `Connection: close`, at most 1 MiB, the whole
/// exchange bounded by about `timeout` after connecting); Err: one line.
pub fn fetch(url: &StatusUrl, timeout: Duration) -> Result<String, String> {
    fetch_read(url, timeout).map_err(|e| e.message)
}

/// [`fetch`], telling why it failed ([`FailKind`]).
pub fn fetch_read(url: &StatusUrl, timeout: Duration) -> Result<String, ReadError> {
    let addr = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| ReadError::new(FailKind::Other, format!("cannot resolve {}: {e}", url.host)))?
        .next()
        .ok_or_else(|| ReadError::new(FailKind::Other, format!("cannot resolve {}", url.host)))?;
    let io = |e: std::io::Error| ReadError::new(FailKind::of_io(&e), format!("{addr}: {e}"));
    let late = || {
        ReadError::new(
            FailKind::Timeout,
            format!("{addr}: no full answer within {timeout:?}"),
        )
    };
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(timeout));
    let host = if url.host.contains(':') {
        format!("[{}]", url.host)
    } else {
        url.host.clone()
    };
    let req = format!(
        "GET {} HTTP/1.0\r\nHost: {host}:{}\r\nUser-Agent: redline\r\nConnection: close\r\n\r\n",
        url.path, url.port
    );
    s.write_all(req.as_bytes()).map_err(io)?;
    // One deadline for the whole answer: a server trickling bytes must not
    // hold the reader (and the run's end) past it.
    let deadline = Instant::now() + timeout;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() as u64 > MAX_BODY {
                    return Err(ReadError::new(
                        FailKind::NotStatus,
                        format!("{addr}: the answer is over 1 MiB"),
                    ));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(late())
            }
            Err(e) => return Err(io(e)),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| {
        ReadError::new(
            FailKind::NotStatus,
            format!("{addr}: the answer is not HTTP"),
        )
    })?;
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("");
    if status != "200" {
        return Err(ReadError::new(
            FailKind::NotStatus,
            format!(
                "HTTP {status} from {} (is the status page enabled and allowed from here?)",
                url.display()
            ),
        ));
    }
    Ok(body.to_string())
}

/// Reads the page once: its sample, slots and the MPM (Apache); `kind` is
/// told from the body when not known yet. Err: why, with its kind.
pub fn read_once(
    url: &StatusUrl,
    kind: Option<StatusKind>,
    timeout: Duration,
) -> Result<(StatusKind, StatusSample, Option<u64>, Option<String>), ReadError> {
    let body = fetch_read(url, timeout)?;
    let kind = kind.or_else(|| StatusKind::detect(&body)).ok_or_else(|| {
        ReadError::new(
            FailKind::NotStatus,
            format!(
                "{} is not a status page redline reads (Apache ?auto, nginx stub_status, lighttpd ?auto, php-fpm)",
                url.display()
            ),
        )
    })?;
    let (s, slots) = parse(kind, &body)
        .map_err(|e| ReadError::new(FailKind::NotStatus, format!("{}: {e}", url.display())))?;
    let mpm = (kind == StatusKind::Apache)
        .then(|| apache_mpm(&body))
        .flatten();
    Ok((kind, s, slots, mpm))
}

/// Reads the page once and tells its format; Err: one line.
pub fn probe(url: &StatusUrl, timeout: Duration) -> Result<StatusKind, String> {
    let body = fetch(url, timeout)?;
    let kind = StatusKind::detect(&body).ok_or_else(|| {
        format!(
            "{} is not a status page redline reads (Apache ?auto, nginx stub_status, lighttpd ?auto, php-fpm)",
            url.display()
        )
    })?;
    parse(kind, &body)?;
    Ok(kind)
}

/// The usual status paths of a server, tried in order when `--watch` names
/// it and no `--server-status` is given.
pub fn usual_paths(server: crate::detect::ServerKind) -> &'static [&'static str] {
    use crate::detect::ServerKind as K;
    match server {
        K::Apache => &["/server-status?auto"],
        K::Nginx => &["/nginx_status", "/stub_status"],
        K::Lighttpd => &["/server-status?auto"],
        K::PhpFpm => &["/status"],
        _ => &[],
    }
}

/// Finds a server's status page on the addresses it listens on (from
/// [`crate::procfs::instances`]: `127.0.0.1:8080`, `[::]:80`), loopback only
/// (a wildcard address is asked on 127.0.0.1 or ::1), at [`usual_paths`],
/// each try bounded by `timeout`. php-fpm speaks FastCGI, not HTTP: its page
/// is only read through a web server (`--server-status`).
pub fn discover(
    server: crate::detect::ServerKind,
    listen: &[String],
    timeout: Duration,
) -> Option<(StatusUrl, StatusKind)> {
    if server == crate::detect::ServerKind::PhpFpm {
        return None;
    }
    for a in listen.iter().take(8) {
        let Some((host, port)) = a.rsplit_once(':') else {
            continue;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = match host {
            "0.0.0.0" => "127.0.0.1",
            "::" => "::1",
            h => h,
        };
        let loopback = host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
        let Ok(port) = port.parse::<u16>() else {
            continue;
        };
        if !loopback {
            continue;
        }
        for path in usual_paths(server) {
            let url = StatusUrl {
                host: host.to_string(),
                port,
                path: path.to_string(),
            };
            if let Ok(k) = probe(&url, timeout) {
                return Some((url, k));
            }
        }
    }
    None
}

/// Reads the status page on its own thread every interval until stopped.
pub struct StatusWatcher {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<StatusWatch>,
    first_error: Option<String>,
}

/// How long one read may take at a given interval: twice the interval,
/// between 1 s and 5 s. A read that takes longer is a failed read
/// (`timeout`), and the next one starts at once.
pub fn read_timeout(interval: Duration) -> Duration {
    (interval * 2).clamp(Duration::from_secs(1), Duration::from_secs(5))
}

impl StatusWatcher {
    /// Starts reading now (one read at once, then every `interval`, at most
    /// 200,000 kept), each bounded by [`read_timeout`]. `kind` None: told
    /// from the first page read. Returns once the first read is done (the
    /// baseline); a failed first read does not stop it: the reader keeps
    /// trying, and every failed read is kept with its time and kind
    /// ([`StatusWatcher::first_error`] says why the first failed).
    pub fn start(url: StatusUrl, kind: Option<StatusKind>, interval: Duration) -> StatusWatcher {
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let timeout = read_timeout(interval);
        let thread = std::thread::Builder::new()
            .name("redline-status".into())
            .spawn(move || {
                let mut kind = kind;
                let mut w = StatusWatch {
                    url: url.display(),
                    server: kind.map(|k| k.name()).unwrap_or("unknown").into(),
                    started_at: redline_stats::time::now_rfc3339(),
                    interval_s: interval.as_secs_f64(),
                    ..Default::default()
                };
                let start = Instant::now();
                let mut read = |w: &mut StatusWatch| -> Option<String> {
                    let t = start.elapsed().as_secs_f64();
                    match read_once(&url, kind, timeout) {
                        Ok((k, mut s, slots, mpm)) => {
                            if kind.is_none() {
                                kind = Some(k);
                                w.server = k.name().into();
                            }
                            s.t = t;
                            if slots.is_some() {
                                w.slots = slots.max(w.slots);
                            }
                            if mpm.is_some() {
                                w.mpm = mpm;
                            }
                            if w.samples.len() < 200_000 {
                                w.samples.push(s);
                            }
                            None
                        }
                        Err(e) => {
                            w.add_failure(t, e.kind.name(), e.message.clone());
                            Some(e.message)
                        }
                    }
                };
                for i in 0..200_000 {
                    let began = Instant::now();
                    let err = read(&mut w);
                    if i == 0 {
                        let _ = ready_tx.send(err);
                    }
                    let wait = interval.saturating_sub(began.elapsed());
                    match rx.recv_timeout(wait) {
                        Err(mpsc::RecvTimeoutError::Timeout) => continue,
                        _ => break,
                    }
                }
                read(&mut w);
                w
            })
            .expect("spawn the status thread");
        // The first read is the baseline (the server's request count before
        // the load): the load starts after it.
        let first_error = match ready_rx.recv_timeout(timeout + Duration::from_secs(1)) {
            Ok(e) => e,
            Err(_) => Some(format!("the status page gave no answer within {timeout:?}")),
        };
        StatusWatcher {
            stop: tx,
            thread,
            first_error,
        }
    }

    /// Why the first read failed (None: it was read).
    pub fn first_error(&self) -> Option<&str> {
        self.first_error.as_deref()
    }

    /// Stops reading and returns what was read.
    pub fn stop(self) -> StatusWatch {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

mod render;
pub use render::{render_diagnosis, render_server_log, render_text};

#[cfg(test)]
mod tests;
