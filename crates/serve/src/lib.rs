//! `redline-serve`: the built-in target HTTP/1.1 server of redline.
//!
//! It backs the `redline serve` and `redline demo` commands and the
//! integration tests: a small, fast keep-alive HTTP/1.1 server whose
//! behaviour is chosen per request by query parameters, so a load test can
//! be pointed at a target with known properties.
//!
//! # Request parameters
//!
//! On any path except the `/__…` control paths, these optional, combinable
//! query parameters apply:
//!
//! * `size=N` — body size in bytes (default 440, at most 100 MiB
//!   = 104857600; larger is answered 400). The body is the lowercase
//!   alphabet repeated (`abc…zabc…`), served from a shared static buffer.
//! * `delay=D` — wait `D` before responding (`10ms`, `1.5s`, `250us`, `100ns`,
//!   `2m`, or a plain number of milliseconds). Delays never block other
//!   connections.
//! * `status=NNN` — response status, 200..=599. 204 and 304 carry no body
//!   and no `Content-Length`.
//! * `chunked=1` — send the body with `Transfer-Encoding: chunked`, in chunks
//!   of at most 16 KiB (ignored for HTTP/1.0 requests).
//! * `close=1` — answer with `Connection: close` and close afterwards.
//! * `header=Name:Value` — repeatable, URL-decoded: add a response header.
//!
//! Every response carries `Server: redline-serve/<version>` and
//! `Content-Type: text/plain` (`application/json` for `/__stats`). `HEAD`
//! gets the headers a `GET` would get, without the body.
//!
//! # Control paths
//!
//! Requests to paths starting with `/__` are not counted in the statistics
//! (and neither are their bytes), so tests can look without disturbing:
//!
//! * `/__stats` — JSON `{"connections":N,"requests":N,"open_connections":N,"bytes_in":N,"bytes_out":N,…,"clients":N}`
//!   (`clients`: distinct client IP addresses that sent a counted request).
//! * `/__stall?for=D` — hold every response to a counted request until `D`
//!   from now; answers `ok` immediately.
//! * `/__reset` — zero the counters (`open_connections` stays truthful).
//!
//! A connection whose first request is a control request is not counted in
//! `connections` nor `open_connections` (unless it later sends a counted
//! request), so a probe connection does not disturb the figures either.
//!
//! # Protocol
//!
//! HTTP/1.1 keep-alive and pipelining (every complete request in the read
//! buffer is answered in order), HTTP/1.0 (closes unless
//! `Connection: keep-alive`), request bodies by `Content-Length` or chunked
//! (read and discarded), `Expect: 100-continue`. Malformed requests get 400
//! and the connection is closed; a request head over 64 KiB gets 431.
//!
//! ```no_run
//! use redline_serve::{ServeConfig, Server};
//! let server = Server::start(ServeConfig { addr: "127.0.0.1:0".parse().unwrap(), threads: 1 })?;
//! println!("listening on http://{}/?size=1024", server.local_addr());
//! // ... run a load test ...
//! println!("{:?}", server.stats());
//! server.shutdown();
//! # Ok::<(), std::io::Error>(())
//! ```

#![deny(missing_docs)]

mod conn;
mod params;

use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;

/// Configuration of a [`Server`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeConfig {
    /// Address to listen on; port 0 picks a free port (see
    /// [`Server::local_addr`]).
    pub addr: SocketAddr,
    /// Number of tokio worker threads; 0 means the number of cores. With 1,
    /// a single-threaded runtime runs on the server's background thread.
    pub threads: usize,
}

impl Default for ServeConfig {
    /// `127.0.0.1:8080`, one worker thread per core.
    fn default() -> Self {
        ServeConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            threads: 0,
        }
    }
}

/// A snapshot of the server's counters (see [`Server::stats`] and
/// `GET /__stats`). Control requests (`/__…`) are never counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerStats {
    /// Connections accepted since start (or the last reset).
    pub connections: u64,
    /// Complete request heads parsed (control requests excluded).
    pub requests: u64,
    /// Connections open right now (not affected by a reset).
    pub open_connections: u64,
    /// Bytes of counted requests received (heads and bodies).
    pub bytes_in: u64,
    /// Bytes of responses to counted requests sent (heads and bodies).
    pub bytes_out: u64,
    /// `/__login` requests answered (each issued a session cookie and token).
    pub logins: u64,
    /// `/__account` requests whose cookie and token matched a login.
    pub sessions_ok: u64,
    /// `/__account` requests refused (no or wrong cookie or token).
    pub sessions_denied: u64,
    /// Distinct client IP addresses that sent a counted request (at most
    /// [`MAX_CLIENTS`] are told apart).
    pub clients: u64,
}

/// Most distinct client addresses `clients` tells apart.
pub const MAX_CLIENTS: usize = 65_536;

/// A counter on its own cache line, so that counters hammered by different
/// cores do not share one.
#[repr(align(64))]
#[derive(Default)]
struct Padded(AtomicU64);

impl Deref for Padded {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

/// State shared by the server handle and all connections.
pub(crate) struct Shared {
    start: Instant,
    /// Stall deadline in nanoseconds since `start`; 0 when there is none.
    stall_until: Padded,
    /// Incremented by each reset (lets a connection tell whether the
    /// `connections` counter it incremented has since been zeroed).
    epoch: Padded,
    connections: Padded,
    requests: Padded,
    open: Padded,
    bytes_in: Padded,
    bytes_out: Padded,
    pub(crate) logins: Padded,
    pub(crate) sessions_ok: Padded,
    pub(crate) sessions_denied: Padded,
    /// Distinct client addresses since start (or the last reset).
    clients: std::sync::Mutex<std::collections::HashSet<std::net::IpAddr>>,
}

impl Shared {
    /// Notes a client address once per connection and reset epoch; returns the epoch noted.
    pub(crate) fn note_client(&self, ip: std::net::IpAddr) -> u64 {
        let epoch = self.epoch.load(Relaxed);
        let mut set = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if set.len() < MAX_CLIENTS {
            set.insert(ip);
        }
        epoch
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Relaxed)
    }

    fn new() -> Shared {
        Shared {
            start: Instant::now(),
            stall_until: Padded::default(),
            epoch: Padded::default(),
            connections: Padded::default(),
            requests: Padded::default(),
            open: Padded::default(),
            bytes_in: Padded::default(),
            bytes_out: Padded::default(),
            logins: Padded::default(),
            sessions_ok: Padded::default(),
            sessions_denied: Padded::default(),
            clients: Default::default(),
        }
    }

    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub(crate) fn stall(&self, d: Duration) {
        let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.stall_until
            .store(self.now_ns().saturating_add(d).max(1), Relaxed);
    }

    pub(crate) fn reset(&self) {
        self.epoch.fetch_add(1, Relaxed);
        self.connections.store(0, Relaxed);
        self.requests.store(0, Relaxed);
        self.bytes_in.store(0, Relaxed);
        self.bytes_out.store(0, Relaxed);
        self.logins.store(0, Relaxed);
        self.sessions_ok.store(0, Relaxed);
        self.sessions_denied.store(0, Relaxed);
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    pub(crate) fn snapshot(&self) -> ServerStats {
        ServerStats {
            connections: self.connections.load(Relaxed),
            requests: self.requests.load(Relaxed),
            open_connections: self.open.load(Relaxed),
            bytes_in: self.bytes_in.load(Relaxed),
            bytes_out: self.bytes_out.load(Relaxed),
            logins: self.logins.load(Relaxed),
            sessions_ok: self.sessions_ok.load(Relaxed),
            sessions_denied: self.sessions_denied.load(Relaxed),
            clients: self.clients.lock().map_or(0, |s| s.len() as u64),
        }
    }
}

/// A running server. Serves on background thread(s) with its own tokio
/// runtime until [`Server::shutdown`] is called or it is dropped.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let conn = conn::Conn::new(stream, shared.clone());
                tokio::spawn(conn.run());
            }
            Err(_) => {
                // Typically EMFILE / ENFILE / ECONNABORTED: back off a little
                // instead of spinning.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

impl Server {
    /// Binds `cfg.addr` (port 0 allowed) and starts serving on background
    /// thread(s) with its own tokio runtime. Returns once the socket is bound
    /// and listening, so connections can be made right away.
    pub fn start(cfg: ServeConfig) -> io::Result<Server> {
        let threads = match cfg.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let rt = if threads == 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name("redline-serve-worker")
                .enable_all()
                .build()?
        };
        let listener = {
            let _guard = rt.enter();
            bind(cfg.addr)?
        };
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new());
        let (stop, stopped) = oneshot::channel::<()>();
        let task_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("redline-serve".into())
            .spawn(move || {
                rt.spawn(accept_loop(listener, task_shared));
                // Returns when `stop` is sent or dropped.
                let _ = rt.block_on(stopped);
                // Drops the accept loop (closing the listener) and every
                // connection task (closing its socket).
                rt.shutdown_timeout(Duration::from_secs(2));
            })?;
        Ok(Server {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address the server listens on (with the real port if port 0 was
    /// asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ServerStats {
        self.shared.snapshot()
    }

    /// Zeroes the counters, like `GET /__reset` (`open_connections` is left
    /// alone, since it stays truthful).
    pub fn reset_stats(&self) {
        self.shared.reset();
    }

    /// Holds every response to a counted request for `d` from now, like
    /// `GET /__stall?for=…`. A later call replaces the deadline (so
    /// `stall(Duration::ZERO)` ends a stall early).
    pub fn stall(&self, d: Duration) {
        self.shared.stall(d);
    }

    /// Stops accepting, closes every connection and joins the server
    /// thread(s). Dropping the server does the same.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic on the server thread is not propagated: this also runs
            // from Drop.
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Starts a server and blocks the calling thread forever; used by
/// `redline serve`, which ends by exiting the process on a signal.
/// `on_bound` is called with the bound address once the server is
/// listening. Returns only if the server cannot start.
pub fn run_forever(cfg: ServeConfig, on_bound: impl FnOnce(SocketAddr)) -> io::Result<()> {
    let server = Server::start(cfg)?;
    on_bound(server.local_addr());
    loop {
        std::thread::park();
    }
}
