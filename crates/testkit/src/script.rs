//! Scripted servers on 127.0.0.1:0: each accepted connection is handed to a
//! handler on its own thread; helpers read requests off keep-alive
//! connections; [`routed_server`] answers from a function and keeps every
//! request for the test to inspect. Every loop is bounded (a server lives at
//! most 60 s; reads time out after 20 s; heads and bodies over 64 KiB end the
//! connection).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A scripted server: each accepted connection is handed to `handler` on its
/// own thread. Stops accepting when dropped or after `lifetime`.
pub struct ScriptServer {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptServer {
    /// Listens on 127.0.0.1:0; each connection goes to `handler` on its own thread.
    pub fn start<F>(handler: F) -> ScriptServer
    where
        F: Fn(TcpStream) + Send + Sync + 'static,
    {
        Self::start_on(TcpListener::bind("127.0.0.1:0").expect("bind"), handler)
    }

    /// As [`ScriptServer::start`], on a listener the test bound (e.g. `[::1]:0`).
    pub fn start_on<F>(listener: TcpListener, handler: F) -> ScriptServer
    where
        F: Fn(TcpStream) + Send + Sync + 'static,
    {
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicU64::new(0));
        let handler = Arc::new(handler);
        let (s2, a2) = (stop.clone(), accepted.clone());
        let thread = std::thread::spawn(move || {
            let lifetime = Instant::now() + Duration::from_secs(60);
            while !s2.load(Ordering::SeqCst) && Instant::now() < lifetime {
                match listener.accept() {
                    Ok((sock, _)) => {
                        a2.fetch_add(1, Ordering::SeqCst);
                        sock.set_nonblocking(false).unwrap();
                        let _ = sock.set_read_timeout(Some(Duration::from_secs(20)));
                        let h = handler.clone();
                        std::thread::spawn(move || h(sock));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        ScriptServer {
            addr,
            stop,
            accepted,
            thread: Some(thread),
        }
    }

    /// `http://ADDR/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for ScriptServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request head, up to and with the blank line, a byte at a time
/// (so nothing after it is taken off the socket): the head as text; None on
/// EOF, error, time-out or a head over 64 KiB. For servers that answer before
/// a body or watch what follows the head; [`read_request`] reads keep-alive
/// requests buffered.
pub fn read_head(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut b = [0u8; 1];
    while buf.len() < 64 * 1024 {
        match s.read(&mut b) {
            Ok(1) => {
                buf.push(b[0]);
                if buf.ends_with(b"\r\n\r\n") {
                    return Some(String::from_utf8_lossy(&buf).into_owned());
                }
            }
            _ => return None,
        }
    }
    None
}

/// Sleeps `d` precisely, as a server's service time: a sleep to the last
/// millisecond, then yields until `d` has passed (at most 10 million yields).
pub fn hold(d: Duration) {
    let until = Instant::now() + d;
    if let Some(coarse) = d.checked_sub(Duration::from_millis(1)) {
        std::thread::sleep(coarse);
    }
    for _ in 0..10_000_000 {
        if Instant::now() >= until {
            break;
        }
        std::thread::yield_now();
    }
}

/// Serves keep-alive requests with a fixed response, `delay` after each request
/// head arrived. The delay is kept precisely (sleep, then yield through the last
/// millisecond). The server also records, per request, how long it really took
/// from the complete head to the response written (µs): on a host whose sleeps
/// overshoot, a test compares the client's figure with that, not with `delay`.
pub fn fixed_server(
    response: &'static [u8],
    delay: Duration,
) -> (ScriptServer, Arc<Mutex<Vec<u64>>>) {
    let took = Arc::new(Mutex::new(Vec::new()));
    let t2 = took.clone();
    let srv = ScriptServer::start(move |mut s| {
        let _ = s.set_nodelay(true);
        let mut pending = Vec::with_capacity(4096);
        for _ in 0..1_000_000 {
            if read_request(&mut s, &mut pending).is_none() {
                return;
            }
            let arrived = Instant::now();
            hold(delay);
            if s.write_all(response).is_err() {
                return;
            }
            t2.lock()
                .unwrap()
                .push(arrived.elapsed().as_micros() as u64);
        }
    });
    (srv, took)
}

/// Reads one request (head, then a Content-Length body) from a keep-alive
/// connection: the head as text and the body; `None` on EOF, error or a
/// head or body over 64 KiB.
pub fn read_request(s: &mut TcpStream, pending: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(p) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        if pending.len() > 64 * 1024 {
            return None;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&pending[..end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    if len > 64 * 1024 {
        return None;
    }
    while pending.len() < end + len {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    }
    let body = pending[end..end + len].to_vec();
    pending.drain(..end + len);
    Some((head, body))
}

/// The requests a [`routed_server`] got, as (head, body), in order.
pub type Requests = Arc<std::sync::Mutex<Vec<(String, Vec<u8>)>>>;

/// A keep-alive HTTP/1.1 server whose answers come from `route(head, body)`
/// (the whole response, bytes); every request is kept, as (head, body), for
/// the test to inspect. Connections are counted in `server.accepted`.
pub fn routed_server<F>(route: F) -> (ScriptServer, Requests)
where
    F: Fn(&str, &[u8]) -> Vec<u8> + Send + Sync + 'static,
{
    routed_server_on(TcpListener::bind("127.0.0.1:0").expect("bind"), route)
}

/// As [`routed_server`], on a listener the test bound (e.g. `[::1]:0`).
pub fn routed_server_on<F>(listener: TcpListener, route: F) -> (ScriptServer, Requests)
where
    F: Fn(&str, &[u8]) -> Vec<u8> + Send + Sync + 'static,
{
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let srv = ScriptServer::start_on(listener, move |mut s| {
        let _ = s.set_nodelay(true);
        let mut pending = Vec::new();
        for _ in 0..1_000_000 {
            let Some((head, body)) = read_request(&mut s, &mut pending) else {
                return;
            };
            let resp = route(&head, &body);
            seen2.lock().unwrap().push((head, body));
            if s.write_all(&resp).is_err() {
                return;
            }
        }
    });
    (srv, seen)
}

/// A whole HTTP/1.1 response with a `Content-Length`: for a
/// [`routed_server`]'s route.
pub fn response(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// The request head `head` carries header `name` (any case) with exactly
/// `value`.
pub fn has_header(head: &str, name: &str, value: &str) -> bool {
    head.lines().skip(1).any(|l| {
        l.split_once(':')
            .is_some_and(|(n, v)| n.trim().eq_ignore_ascii_case(name) && v.trim() == value)
    })
}

/// A [`routed_server`] behind Basic auth: a request without
/// `Authorization: <auth>` is answered 401, the others by `route`.
pub fn auth_server<F>(auth: &'static str, route: F) -> (ScriptServer, Requests)
where
    F: Fn(&str, &[u8]) -> Vec<u8> + Send + Sync + 'static,
{
    routed_server(move |head, body| {
        if has_header(head, "authorization", auth) {
            route(head, body)
        } else {
            response("401 Unauthorized", "text/plain", b"who are you")
        }
    })
}
