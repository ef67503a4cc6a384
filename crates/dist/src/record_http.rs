//! The merged run record over HTTP: the coordinator's small server
//! (`coordinate --serve-record ADDR`, [`RecordServer`]) and its client
//! (`redline fetch URL`, [`fetch`]), so nobody scrapes `kubectl logs`.
//!
//! The server answers `GET /record.json` (503 with `Retry-After` until the
//! run is over, then the record) and `GET /healthz` (`ok`, nothing about
//! the run, so a probe needs no credential). With a token, `/record.json`
//! needs `Authorization: Bearer TOKEN`, compared in constant time
//! (`ring::hmac::verify` of the presented token against the token's tag
//! under a key made at start); the token is never written anywhere. Plain
//! HTTP: meant for loopback and `kubectl port-forward` (a tunnel).
//!
//! Bounds: a request head of at most [`MAX_HEAD`] bytes within
//! [`REQUEST_TIMEOUT`] (whole head, not per read); a thread per connection,
//! at most [`MAX_CONNS`] of them still sending their head at once: at the
//! cap the oldest such connection is closed, not the new one
//! (`redline_stats::gate`), so slow or idle clients cannot starve a
//! `fetch`. The client reads at most [`MAX_RECORD`] bytes within its time-out.

use crate::protocol::Token;
use redline_stats::gate::{Gate, Ticket};
use ring::hmac;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The longest request head the server reads.
pub const MAX_HEAD: usize = 8 * 1024;
/// How long a connection has to send its whole request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections sending their request head at once (more: the oldest is closed).
pub const MAX_CONNS: usize = 32;
/// The largest record the client accepts (as `redline merge` reads files).
pub const MAX_RECORD: u64 = 256 * 1024 * 1024;

/// The path of the record.
pub const RECORD_PATH: &str = "/record.json";

struct Shared {
    /// The record's JSON once the run is over.
    record: Mutex<Option<Arc<Vec<u8>>>>,
    /// Complete answers of `/record.json` with the record (200) so far.
    served: Mutex<u64>,
    changed: Condvar,
    /// The token's tag under `key` (None: no token asked).
    auth: Option<(hmac::Key, hmac::Tag)>,
    gate: Arc<Gate>,
    stop: AtomicBool,
}

/// The record server, listening from its start (so a bad address is a usage
/// error before the run) and answering 503 until [`RecordServer::publish`].
pub struct RecordServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl RecordServer {
    /// Starts serving on `listener`; with `token`, `/record.json` needs it.
    pub fn start(listener: TcpListener, token: Option<&Token>) -> std::io::Result<RecordServer> {
        let addr = listener.local_addr()?;
        let auth = match token {
            Some(t) => {
                let rng = ring::rand::SystemRandom::new();
                let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng)
                    .map_err(|_| std::io::Error::other("no random numbers for the record key"))?;
                let tag = hmac::sign(&key, t.bytes());
                Some((key, tag))
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            record: Mutex::new(None),
            served: Mutex::new(0),
            changed: Condvar::new(),
            auth,
            gate: Gate::new(MAX_CONNS),
            stop: AtomicBool::new(false),
        });
        listener.set_nonblocking(true)?;
        let sh = shared.clone();
        let accept = std::thread::Builder::new()
            .name("record-http".into())
            .spawn(move || accept_loop(listener, sh))?;
        Ok(RecordServer {
            shared,
            addr,
            accept: Some(accept),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The run is over: serve this record from now on.
    pub fn publish(&self, json: Vec<u8>) {
        *lock(&self.shared.record) = Some(Arc::new(json));
    }

    /// Waits until the record has been downloaded once, at most `limit`.
    /// True when it was.
    pub fn wait_fetched(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut served = lock(&self.shared.served);
        loop {
            if *served > 0 {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            served = match self.shared.changed.wait_timeout(served, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

impl Drop for RecordServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// A peer's text, shown without control characters and at most 40 characters.
fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(40).collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn accept_loop(listener: TcpListener, sh: Arc<Shared>) {
    while !sh.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let Some(ticket) = sh.gate.admit(&s) else {
                    continue; // every place holds an answered connection
                };
                let sh2 = sh.clone();
                let _ = std::thread::Builder::new()
                    .name("record-conn".into())
                    .spawn(move || serve_one(s, &sh2, ticket));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Reads a request head (up to the blank line) within the time-out.
fn read_head(s: &mut TcpStream) -> Option<String> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || buf.len() > MAX_HEAD {
            return None;
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    String::from_utf8(buf).ok()
}

fn respond(s: &mut TcpStream, status: &str, extra: &str, ctype: &str, body: &[u8]) -> bool {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n{extra}\r\n",
        body.len()
    );
    let _ = s.set_write_timeout(Some(Duration::from_secs(60)));
    s.write_all(head.as_bytes())
        .and_then(|_| s.write_all(body))
        .and_then(|_| s.flush())
        .is_ok()
}

/// A request head as the server reads it: method, path (without the
/// query), and the Bearer token presented ("" when none).
pub fn request_parts(head: &str) -> (&str, &str, &str) {
    let mut lines = head.lines();
    let request = lines.next().unwrap_or("");
    let mut parts = request.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let presented = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("authorization"))
        .and_then(|(_, v)| {
            let v = v.trim();
            v.get(..7)
                .filter(|p| p.eq_ignore_ascii_case("bearer "))
                .and_then(|_| v.get(7..))
                .map(str::trim)
        })
        .unwrap_or("");
    (method, path, presented)
}

fn serve_one(mut s: TcpStream, sh: &Shared, mut ticket: Ticket) {
    let Some(head) = read_head(&mut s) else {
        return;
    };
    ticket.headed();
    let (method, path, presented) = request_parts(&head);
    let text = "text/plain; charset=utf-8";
    if method != "GET" {
        respond(
            &mut s,
            "405 Method Not Allowed",
            "Allow: GET\r\n",
            text,
            b"only GET\n",
        );
        return;
    }
    match path {
        "/healthz" => {
            respond(&mut s, "200 OK", "", text, b"ok\n");
        }
        RECORD_PATH => {
            if let Some((key, tag)) = &sh.auth {
                if hmac::verify(key, presented.as_bytes(), tag.as_ref()).is_err() {
                    respond(
                        &mut s,
                        "401 Unauthorized",
                        "WWW-Authenticate: Bearer realm=\"redline\"\r\n",
                        text,
                        b"give the coordinator's token: Authorization: Bearer TOKEN\n",
                    );
                    return;
                }
            }
            let rec = lock(&sh.record).clone();
            match rec {
                None => {
                    respond(
                        &mut s,
                        "503 Service Unavailable",
                        "Retry-After: 1\r\n",
                        text,
                        b"the run is not over yet\n",
                    );
                }
                Some(body) => {
                    if respond(&mut s, "200 OK", "", "application/json", &body) {
                        *lock(&sh.served) += 1;
                        sh.changed.notify_all();
                    }
                }
            }
        }
        _ => {
            respond(
                &mut s,
                "404 Not Found",
                "",
                text,
                b"GET /record.json or /healthz\n",
            );
        }
    }
}

/// A record URL: `http://HOST[:PORT][/PATH]` (an empty path or `/` is
/// `/record.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordUrl {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port (80 when not given).
    pub port: u16,
    /// Path and query.
    pub path: String,
}

impl RecordUrl {
    /// Parses a URL; Err: one line saying what is wrong.
    pub fn parse(s: &str) -> Result<RecordUrl, String> {
        let rest = s.strip_prefix("http://").ok_or_else(|| {
            if s.starts_with("https://") {
                "only http:// is fetched (the coordinator serves plain HTTP: reach it on loopback or through kubectl port-forward)".to_string()
            } else {
                format!("{s:?} is not a URL like http://127.0.0.1:7071/record.json")
            }
        })?;
        let (auth, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if auth.contains('@') {
            return Err(
                "no credentials in the URL: give the token with --token-file or REDLINE_TOKEN"
                    .into(),
            );
        }
        let (host, port) = if let Some(v6) = auth.strip_prefix('[') {
            let (h, p) = v6.split_once(']').ok_or("unclosed [ in the host")?;
            (h, p.strip_prefix(':'))
        } else {
            match auth.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (auth, None),
            }
        };
        if host.is_empty() {
            return Err("no host in the URL".into());
        }
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("bad port {:?}", clean(p)))?,
            None => 80,
        };
        let path = match path {
            "" | "/" => RECORD_PATH.to_string(),
            p if p.starts_with('?') => format!("{RECORD_PATH}{p}"),
            p => p.to_string(),
        };
        if path.chars().any(|c| c.is_control() || c == ' ')
            || host.chars().any(|c| c.is_control() || c == ' ')
        {
            return Err("spaces or control characters in the URL".into());
        }
        Ok(RecordUrl {
            host: host.to_string(),
            port,
            path,
        })
    }

    fn host_port(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URL as shown (never with a credential: none is allowed in it).
    pub fn display(&self) -> String {
        format!("http://{}{}", self.host_port(), self.path)
    }
}

/// Why a fetch failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// Not reachable, or the answer broke off (worth a retry while waiting).
    Unreachable(String),
    /// The run is not over yet (HTTP 503; worth a retry while waiting).
    NotReady(String),
    /// Any other answer that is not the record (401, 404, not HTTP, too large).
    Refused(String),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Unreachable(m) | FetchError::NotReady(m) | FetchError::Refused(m) => {
                f.write_str(m)
            }
        }
    }
}

/// GETs the record once (HTTP/1.0, `Connection: close`, at most
/// [`MAX_RECORD`] bytes, the whole exchange within `timeout` after
/// connecting); with `token`, sends `Authorization: Bearer`. Returns the body.
pub fn fetch(
    url: &RecordUrl,
    token: Option<&Token>,
    timeout: Duration,
) -> Result<Vec<u8>, FetchError> {
    let shown = url.display();
    let unreachable = |e: String| FetchError::Unreachable(format!("{shown}: {e}"));
    let addr = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| unreachable(format!("cannot resolve {}: {e}", url.host)))?
        .next()
        .ok_or_else(|| unreachable(format!("cannot resolve {}", url.host)))?;
    let mut s =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| unreachable(e.to_string()))?;
    let _ = s.set_write_timeout(Some(timeout));
    let mut req = format!(
        "GET {} HTTP/1.0\r\nHost: {}\r\nUser-Agent: redline\r\nAccept: application/json\r\nConnection: close\r\n",
        url.path,
        url.host_port()
    )
    .into_bytes();
    if let Some(t) = token {
        req.extend_from_slice(b"Authorization: Bearer ");
        req.extend_from_slice(t.bytes());
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"\r\n");
    s.write_all(&req).map_err(|e| unreachable(e.to_string()))?;
    drop(req);
    let deadline = Instant::now() + timeout;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(unreachable(format!("no full answer within {timeout:?}")));
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() as u64 > MAX_RECORD + MAX_HEAD as u64 {
                    return Err(FetchError::Refused(format!(
                        "{shown}: the answer is larger than {} MiB",
                        MAX_RECORD >> 20
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(unreachable(format!("no full answer within {timeout:?}")))
            }
            Err(e) => return Err(unreachable(e.to_string())),
        }
    }
    parse_answer(buf, &shown)
}

/// Reads a whole HTTP answer (as [`fetch`] received it, the connection
/// closed): the body of a `200` with a matching `Content-Length` (or none),
/// else why not. `shown` is the URL for the messages.
pub fn parse_answer(mut buf: Vec<u8>, shown: &str) -> Result<Vec<u8>, FetchError> {
    let unreachable = |e: String| FetchError::Unreachable(format!("{shown}: {e}"));
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .filter(|&i| i <= MAX_HEAD)
        .ok_or_else(|| {
            if buf.is_empty() {
                unreachable("the connection closed without an answer".into())
            } else {
                FetchError::Refused(format!("{shown}: the answer is not HTTP"))
            }
        })?;
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let body = buf.split_off(split + 4);
    let mut lines = head.lines();
    let status = lines
        .next()
        .filter(|l| l.starts_with("HTTP/"))
        .and_then(|l| l.split_whitespace().nth(1))
        .ok_or_else(|| FetchError::Refused(format!("{shown}: the answer is not HTTP")))?
        .to_string();
    let header = |name: &str| {
        head.lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
    };
    match status.as_str() {
        "200" => {}
        "503" => {
            return Err(FetchError::NotReady(format!(
                "{shown}: HTTP 503: the run is not over yet (--wait DURATION keeps asking)"
            )))
        }
        "401" | "403" => {
            return Err(FetchError::Refused(format!(
                "{shown}: HTTP {status}: the server wants the coordinator's token (--token-file FILE or REDLINE_TOKEN); the one given, if any, is not it"
            )))
        }
        s => {
            return Err(FetchError::Refused(format!(
                "{shown}: HTTP {}: not the record",
                clean(s)
            )))
        }
    }
    if header("transfer-encoding").is_some() {
        return Err(FetchError::Refused(format!(
            "{shown}: a chunked answer (not read; the coordinator sends Content-Length)"
        )));
    }
    if let Some(len) = header("content-length") {
        match len.parse::<u64>() {
            Ok(n) if n == body.len() as u64 => {}
            Ok(n) if n > body.len() as u64 => {
                return Err(unreachable(format!(
                    "the answer broke off after {} of {n} bytes",
                    body.len()
                )))
            }
            _ => {
                return Err(FetchError::Refused(format!(
                    "{shown}: its Content-Length does not match the body"
                )))
            }
        }
    }
    if body.len() as u64 > MAX_RECORD {
        return Err(FetchError::Refused(format!(
            "{shown}: the record is larger than {} MiB",
            MAX_RECORD >> 20
        )));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(token: Option<&str>) -> RecordServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        RecordServer::start(l, token.and_then(Token::new).as_ref()).unwrap()
    }

    fn url(s: &RecordServer, path: &str) -> RecordUrl {
        RecordUrl::parse(&format!("http://{}{path}", s.local_addr())).unwrap()
    }

    fn raw(s: &RecordServer, req: &[u8]) -> String {
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(req).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out
    }

    #[test]
    fn urls_parse_with_the_record_path_by_default() {
        let u = RecordUrl::parse("http://127.0.0.1:7071").unwrap();
        assert_eq!(u.path, "/record.json");
        assert_eq!(u.port, 7071);
        assert_eq!(RecordUrl::parse("http://[::1]:9/").unwrap().host, "::1");
        assert_eq!(RecordUrl::parse("http://h/x.json").unwrap().port, 80);
        for bad in [
            "ftp://h/",
            "h:7071",
            "https://h/",
            "http://u:p@h/",
            "http://:80/",
            "http://h:0/",
            "http://h:99999/",
            "http://h/a b",
        ] {
            let e = RecordUrl::parse(bad).unwrap_err();
            assert!(!e.contains('\n') && !e.contains("u:p"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_record_is_served_after_the_run_with_the_token_only() {
        let s = server(Some("s3cret"));
        let tok = Token::new("s3cret").unwrap();
        let wrong = Token::new("s3cres").unwrap();
        let t = Duration::from_secs(10);
        assert!(raw(&s, b"GET /healthz HTTP/1.0\r\n\r\n").ends_with("\r\n\r\nok\n"));
        // Before the run is over: 503 (with the token), 401 (without).
        assert!(matches!(
            fetch(&url(&s, "/record.json"), Some(&tok), t),
            Err(FetchError::NotReady(_))
        ));
        s.publish(b"{\"x\":1}".to_vec());
        for bad in [None, Some(&wrong)] {
            let e = fetch(&url(&s, "/"), bad, t).unwrap_err();
            assert!(matches!(e, FetchError::Refused(_)), "{e}");
            assert!(
                e.to_string().contains("401") && !e.to_string().contains("s3c"),
                "{e}"
            );
        }
        assert!(raw(
            &s,
            b"GET /record.json HTTP/1.0\r\nAuthorization: Basic czNjcmV0\r\n\r\n"
        )
        .starts_with("HTTP/1.1 401"));
        assert!(raw(&s, b"POST /record.json HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(raw(&s, b"GET /other HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(!s.wait_fetched(Duration::from_millis(10)));
        assert_eq!(fetch(&url(&s, ""), Some(&tok), t).unwrap(), b"{\"x\":1}");
        assert!(s.wait_fetched(Duration::from_millis(10)));
    }

    #[test]
    fn answers_are_read_strictly() {
        let p = |b: &[u8]| parse_answer(b.to_vec(), "u");
        assert_eq!(
            p(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").unwrap(),
            b"{}"
        );
        assert_eq!(p(b"HTTP/1.0 200 OK\r\n\r\n{}").unwrap(), b"{}");
        let err = |b: &[u8]| p(b).unwrap_err();
        assert!(matches!(err(b""), FetchError::Unreachable(_)));
        assert!(matches!(
            err(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}"),
            FetchError::Unreachable(_)
        ));
        for bad in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            b"HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n",
            b"HTTP/1.1 \x1b[2J\r\n\r\n",
            b"no head at all",
        ] {
            let e = err(bad);
            assert!(matches!(e, FetchError::Refused(_)), "{e}");
            assert!(!e.to_string().contains('\x1b'), "{e}");
        }
        assert_eq!(
            request_parts("GET /record.json?x HTTP/1.1\r\nauthorization: bearer  t0k \r\n\r\n"),
            ("GET", "/record.json", "t0k")
        );
        assert_eq!(
            request_parts("GET / HTTP/1.1\r\nAuthorization: Bearé\r\n"),
            ("GET", "/", "")
        );
        assert_eq!(request_parts(""), ("", "", ""));
    }

    #[test]
    fn hostile_clients_are_bounded() {
        let s = server(None);
        s.publish(b"{}".to_vec());
        // A head without an end, larger than the bound: closed without an answer.
        let mut big = b"GET /record.json HTTP/1.0\r\nX: ".to_vec();
        big.extend(vec![b'a'; MAX_HEAD * 2]);
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = c.write_all(&big);
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        assert!(out.is_empty());
        // Without a token set, anyone on loopback gets it.
        let u = url(&s, "/record.json");
        assert_eq!(fetch(&u, None, Duration::from_secs(10)).unwrap(), b"{}");
        // Nothing listening: unreachable (retried while waiting).
        drop(s);
        assert!(matches!(
            fetch(&u, None, Duration::from_secs(2)),
            Err(FetchError::Unreachable(_))
        ));
    }
}
