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

/// The status page in the text report: one line for the run, then one per
/// stage (peak/mean busy, lowest idle, keep-alive, the server's own req/s).
pub fn render_text(rec: &redline_stats::RunRecord) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let Some(w) = &rec.server_status else {
        o.push_str(&render_server_log(rec));
        o.push_str(&render_diagnosis(rec));
        return o;
    };
    let slots = w
        .slots
        .map(|n| format!(", {n} scoreboard slots"))
        .unwrap_or_default();
    let mpm = w
        .mpm
        .as_deref()
        .map(|m| format!(" {m} MPM"))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "\nServer status ({}{mpm}, {}{slots}): {} reads{}",
        w.server,
        w.url,
        w.samples.len(),
        if w.failed > 0 {
            let timeouts = w.failures.iter().filter(|f| f.kind == "timeout").count();
            let late = if timeouts > 0 {
                format!("{timeouts} timed out; ")
            } else {
                String::new()
            };
            format!(
                ", {} failed ({late}last: {})",
                w.failed,
                w.last_error.as_deref().unwrap_or("?")
            )
        } else {
            String::new()
        }
    );
    let line = |x: &redline_stats::watch::StatusWindow| {
        let mut l = format!("busy {:.0}/{:.1}", x.busy.peak, x.busy.mean);
        if let Some(i) = x.min_idle {
            let _ = write!(l, "  idle lowest {i}");
        }
        if let Some(k) = x.keepalive {
            let _ = write!(l, "  keep-alive {:.0}/{:.1}", k.peak, k.mean);
        }
        if let Some(r) = x.requests_per_s {
            let _ = write!(l, "  {r:.0} req/s (server's count)");
        }
        if let Some(q) = x.max_listen_queue {
            let _ = write!(l, "  listen queue peak {q}");
        }
        if let Some(m) = x.max_children_reached {
            let _ = write!(l, "  max children reached +{m}");
        }
        if let Some(n) = x.not_handled {
            let _ = write!(l, "  accepted not handled {n}");
        }
        if let Some(k) = x.async_keepalive {
            let _ = write!(l, "  async keep-alive {:.0}/{:.1}", k.peak, k.mean);
        }
        if x.failed > 0 {
            let _ = write!(l, "  failed reads {}", x.failed);
        }
        l
    };
    if let Some(all) = w.window(&rec.started_at, f64::MIN, f64::MAX) {
        let _ = writeln!(o, "  whole run (peak/mean): {}", line(&all));
    }
    let width = (0..rec.stages.len())
        .map(|i| rec.stages[i].name(i).chars().count())
        .max()
        .unwrap_or(0);
    for (i, st) in rec.stages.iter().enumerate() {
        let name = st.name(i);
        match &st.status {
            Some(x) => {
                let _ = writeln!(o, "  {name:<width$}  {}", line(x));
            }
            None => {
                let _ = writeln!(o, "  {name:<width$}  no read");
            }
        }
    }
    o.push_str(&render_server_log(rec));
    o.push_str(&render_diagnosis(rec));
    o
}

/// The server's error log in the text report: one line per finding.
pub fn render_server_log(rec: &redline_stats::RunRecord) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let Some(l) = &rec.server_log else {
        return o;
    };
    if l.findings.is_empty() {
        return o;
    }
    let paths: String = l
        .paths
        .join(", ")
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    let _ = writeln!(o, "\nServer error log ({paths}):");
    for f in &l.findings {
        let at = f
            .first_t
            .map(|t| format!(", first at {t:.1} s"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  {} x {:?} ({} [{}]{at})",
            f.count, f.message, f.resource, f.directive
        );
    }
    o
}

/// The diagnosis in the text report: what gave out, the evidence, the change.
pub fn render_diagnosis(rec: &redline_stats::RunRecord) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let Some(d) = &rec.diagnosis else {
        return o;
    };
    let what = match d.resource.as_str() {
        "worker_pool" => "the worker pool ran out",
        "keepalive" => "workers were held by idle keep-alive connections",
        "cpu" => "the server's CPU saturated",
        "memory" => "the server's machine ran out of memory",
        "server_gone" => "the server went away",
        "client" => "the client (redline itself) was the limit",
        "listen_backlog" => "the server's listen backlog overflowed",
        "bandwidth" => "the bandwidth ran out",
        "server_concurrency" => "the server's concurrency was the limit",
        _ => "not known from this run",
    };
    let unit = match rec.config.stages.as_ref().map(|p| p.unit.as_str()) {
        Some("rps") => "req/s",
        _ => "connections",
    };
    let at = match (d.limit, d.at_level, d.at_s) {
        (Some(l), Some(a), _) => format!(" at {l} (first reached at {a:.0} {unit})"),
        (Some(l), None, Some(t)) => format!(" at {l} (reached {t:.1} s into the run)"),
        (Some(l), None, None) => format!(" at {l} connections"),
        (None, _, Some(t)) => format!(" at {t:.1} s"),
        _ => String::new(),
    };
    let dir = if d.directive.is_empty() {
        String::new()
    } else {
        format!(" [{}]", d.directive)
    };
    let _ = writeln!(o, "\nDiagnosis: {what}{at}{dir}");
    for e in &d.evidence {
        let _ = writeln!(o, "  - {e}");
    }
    let _ = writeln!(o, "  => {}", d.advice);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    const APACHE_IDLE: &str = include_str!("../fixtures/status/apache_auto.txt");
    const APACHE_BUSY: &str = include_str!("../fixtures/status/apache_auto_busy.txt");
    const LIGHTTPD: &str = include_str!("../fixtures/status/lighttpd_auto.txt");
    const NGINX_IDLE: &str = include_str!("../fixtures/status/nginx_stub.txt");
    const NGINX_BUSY: &str = include_str!("../fixtures/status/nginx_stub_busy.txt");
    const FPM_IDLE: &str = include_str!("../fixtures/status/fpm_status.txt");
    const FPM_BUSY: &str = include_str!("../fixtures/status/fpm_status_busy.txt");

    #[test]
    fn detects_each_format() {
        assert_eq!(StatusKind::detect(APACHE_IDLE), Some(StatusKind::Apache));
        assert_eq!(StatusKind::detect(APACHE_BUSY), Some(StatusKind::Apache));
        assert_eq!(StatusKind::detect(LIGHTTPD), Some(StatusKind::Lighttpd));
        assert_eq!(StatusKind::detect(NGINX_BUSY), Some(StatusKind::Nginx));
        assert_eq!(StatusKind::detect(FPM_BUSY), Some(StatusKind::PhpFpm));
        assert_eq!(StatusKind::detect("<html>It works</html>"), None);
    }

    /// Apache 2.4 prefork, MaxRequestWorkers 10, under `ab -k -c 8`.
    #[test]
    fn apache_auto() {
        let (s, slots) = parse_apache(APACHE_BUSY).unwrap();
        assert_eq!(s.busy, Some(3));
        assert_eq!(s.idle, Some(0));
        assert_eq!(s.keepalive, Some(1));
        assert_eq!(s.requests, Some(2930));
        assert_eq!(s.states.get("W"), Some(&2));
        assert_eq!(s.states.get("."), Some(&7));
        assert_eq!(slots, Some(10));
        let (s, _) = parse_apache(APACHE_IDLE).unwrap();
        assert_eq!((s.busy, s.idle, s.keepalive), (Some(1), Some(1), Some(0)));
        assert!(parse_apache("Total Accesses: 3\n").is_err());
    }

    /// Apache 2.4 event (ServerLimit 1, ThreadsPerChild 4, KeepAliveTimeout
    /// 30) with three idle keep-alive clients: they hold no worker (the
    /// scoreboard shows no `K`), only the event MPM's connection counts tell.
    #[test]
    fn apache_event_auto() {
        const EVENT: &str = include_str!("../fixtures/status/apache_event_auto.txt");
        assert_eq!(StatusKind::detect(EVENT), Some(StatusKind::Apache));
        let (s, slots) = parse_apache(EVENT).unwrap();
        assert_eq!((s.busy, s.idle, s.keepalive), (Some(1), Some(3), Some(0)));
        assert_eq!(s.conns_total, Some(4));
        assert_eq!(s.async_keepalive, Some(3));
        assert_eq!(s.async_writing, Some(0));
        assert_eq!(s.async_closing, Some(1));
        assert_eq!((s.processes, s.stopping), (Some(1), Some(0)));
        assert_eq!(slots, Some(4));
        assert_eq!(apache_mpm(EVENT).as_deref(), Some("event"));
        // Prefork pages have no Conns* lines and older ones no ServerMPM.
        let (p, _) = parse_apache(APACHE_BUSY).unwrap();
        assert_eq!((p.conns_total, p.async_keepalive), (None, None));
        assert_eq!(apache_mpm("BusyWorkers: 1\n"), None);
        assert_eq!(apache_mpm("ServerMPM: <script>\n"), None);
    }

    #[test]
    fn lighttpd_auto() {
        let (s, slots) = parse_lighttpd(LIGHTTPD).unwrap();
        assert_eq!((s.busy, s.idle, s.requests), (Some(1), Some(1364), Some(0)));
        assert_eq!(slots, Some(1365));
        assert_eq!(s.states.get("h"), Some(&1));
    }

    #[test]
    fn nginx_stub_status() {
        let s = parse_nginx(NGINX_BUSY).unwrap();
        assert_eq!(s.active, Some(9));
        assert_eq!(
            (s.accepts, s.handled, s.requests),
            (Some(10), Some(10), Some(2641))
        );
        assert_eq!((s.busy, s.keepalive), (Some(1), Some(8)));
        let s = parse_nginx(NGINX_IDLE).unwrap();
        assert_eq!((s.busy, s.keepalive, s.active), (Some(1), Some(0), Some(1)));
        assert!(parse_nginx("Active connections: 1\n").is_err());
        assert!(parse_nginx("hello").is_err());
    }

    /// php-fpm 8.2, pm static with 3 children, 8 clients of a 0.2 s script.
    #[test]
    fn php_fpm_status() {
        let s = parse_php_fpm(FPM_BUSY).unwrap();
        assert_eq!((s.busy, s.idle, s.processes), (Some(3), Some(0), Some(3)));
        assert_eq!((s.listen_queue, s.max_children_reached), (Some(5), Some(0)));
        assert_eq!(s.requests, Some(16));
        let s = parse_php_fpm(FPM_IDLE).unwrap();
        assert_eq!((s.busy, s.idle), (Some(0), Some(3)));
    }

    /// A one-shot local server answering `answer` (in pieces `gap` apart).
    fn serve(answer: &'static [u8], gap: Duration) -> StatusUrl {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut c, _)) = l.accept() {
                let mut req = [0u8; 1024];
                let _ = c.read(&mut req);
                for piece in answer.chunks(8) {
                    if c.write_all(piece).is_err() {
                        return;
                    }
                    std::thread::sleep(gap);
                }
            }
        });
        StatusUrl {
            host: "127.0.0.1".into(),
            port,
            path: "/nginx_status".into(),
        }
    }

    #[test]
    fn fetch_answers_and_refusals() {
        let ok: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nActive connections: 1 \nserver accepts handled requests\n 1 1 1 \nReading: 0 Writing: 1 Waiting: 0 \n";
        let u = serve(ok, Duration::ZERO);
        assert_eq!(probe(&u, Duration::from_secs(5)), Ok(StatusKind::Nginx));
        let u = serve(b"HTTP/1.1 403 Forbidden\r\n\r\nno", Duration::ZERO);
        assert!(fetch(&u, Duration::from_secs(5))
            .unwrap_err()
            .contains("HTTP 403"));
        let u = serve(
            b"HTTP/1.1 200 OK\r\n\r\n<html>It works</html>",
            Duration::ZERO,
        );
        assert!(probe(&u, Duration::from_secs(5))
            .unwrap_err()
            .contains("not a status page"));
        // A server trickling its answer is cut at the deadline.
        let u = serve(ok, Duration::from_millis(200));
        let t0 = Instant::now();
        let e = fetch(&u, Duration::from_millis(500)).unwrap_err();
        assert!(e.contains("no full answer"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn failed_reads_say_why() {
        // Nothing listening: refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let closed = StatusUrl {
            host: "127.0.0.1".into(),
            port,
            path: "/server-status?auto".into(),
        };
        let e = read_once(&closed, None, Duration::from_secs(2)).unwrap_err();
        assert_eq!(e.kind, FailKind::Refused, "{}", e.message);
        // A listener that never answers (its backlog holds the connection).
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let silent = StatusUrl {
            host: "127.0.0.1".into(),
            port: l.local_addr().unwrap().port(),
            path: "/".into(),
        };
        let t0 = Instant::now();
        let e = read_once(&silent, None, Duration::from_millis(300)).unwrap_err();
        assert_eq!(e.kind, FailKind::Timeout, "{}", e.message);
        assert!(t0.elapsed() < Duration::from_secs(3));
        let u = serve(b"HTTP/1.1 200 OK\r\n\r\n<html>hi</html>", Duration::ZERO);
        let e = read_once(&u, None, Duration::from_secs(2)).unwrap_err();
        assert_eq!(e.kind, FailKind::NotStatus, "{}", e.message);
        drop(l);
    }

    /// A status page that cannot be read at first is tried again at every
    /// interval; each failed read is kept with its time and why.
    #[test]
    fn the_watcher_keeps_trying_and_keeps_the_failures() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = StatusUrl {
            host: "127.0.0.1".into(),
            port: l.local_addr().unwrap().port(),
            path: "/nginx_status".into(),
        };
        drop(l);
        let w = StatusWatcher::start(url.clone(), None, Duration::from_millis(50));
        assert!(w.first_error().is_some());
        std::thread::sleep(Duration::from_millis(300));
        let seen = w.stop();
        assert!(seen.failed >= 3, "{seen:?}");
        assert_eq!(seen.failed as usize, seen.failures.len());
        assert!(seen.failures.iter().all(|f| f.kind == "refused"));
        assert!(seen.failures.windows(2).all(|p| p[0].t <= p[1].t));
        assert!(seen.samples.is_empty());
        assert_eq!(seen.server, "unknown");
    }

    #[test]
    fn status_urls() {
        let u = StatusUrl::parse("http://127.0.0.1:8080/server-status?auto").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 8080, "/server-status?auto")
        );
        let u = StatusUrl::parse("http://[::1]/nginx_status").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 80));
        assert_eq!(u.display(), "http://[::1]:80/nginx_status");
        assert_eq!(StatusUrl::parse("http://h").unwrap().path, "/");
        for bad in [
            "https://x/",
            "ftp://x",
            "http://u:secret@x/",
            "http://x:99999/",
            "http:///x",
        ] {
            let e = StatusUrl::parse(bad).unwrap_err();
            assert!(!e.contains("secret"), "{e}");
        }
    }
}
