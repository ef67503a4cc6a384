//! HTTP/2 for the page loader: one multiplexed connection per host where the
//! server picks `h2` in ALPN, as a browser uses it.
//!
//! The loader is blocking (a thread per fetch), so each https connection that
//! offers `h2` gets its own thread running a single-threaded tokio runtime
//! (as the engine's HTTP/2 load driver once did). That thread does the TLS
//! handshake (tokio-rustls, the same rustls configuration as every other
//! connection of the load). If the server picks `http/1.1` (or ignores ALPN)
//! the session is handed back as a blocking [`Conn`] and the thread ends; if
//! it picks `h2`, the thread drives the HTTP/2 connection and serves requests
//! sent through an [`H2Conn`] handle, each as its own stream, until every
//! handle is dropped. The loader limits the streams in flight to what the
//! server allows (`SETTINGS_MAX_CONCURRENT_STREAMS`, see
//! [`H2Conn::max_streams`]), so a stream's waiting time is the server's.
//!
//! Bytes: DATA payload is exact per stream; HPACK hides the header block's
//! wire size, so `wire_bytes` counts the head as its HTTP/1-style text
//! (`name: value\r\n`), an upper bound.

use crate::http::{
    finish, ms, server_name, tls_error, tls_info, ClientOpts, Conn, ConnInfo, Connected,
    FetchError, Response, Stream, MAX_WIRE_BODY,
};
use bytes::Bytes;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use url::Url;

/// Streams in flight on one connection at most, whatever the server allows
/// (RFC 9113 recommends servers allow at least 100).
pub const MAX_STREAMS: usize = 100;
/// The limit on a response's header block (as the engine's h2 client).
const MAX_HEADER_LIST: u32 = 256 * 1024;

/// One GET handed to a multiplexed connection's thread (HTTP/2 here,
/// HTTP/3 in [`crate::h3`]); the answer goes back on `reply`. Built only
/// by [`Multiplexed::get`].
pub struct Req {
    pub(crate) url: Url,
    /// The request's fields, names lower case.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) timeout: Duration,
    pub(crate) budget: Option<Arc<crate::http::Budget>>,
    pub(crate) reply: mpsc::SyncSender<Result<Response, FetchError>>,
}

/// A multiplexed connection's handle (HTTP/2 here, HTTP/3 in
/// [`crate::h3`]): each GET goes to the connection's thread as a new stream.
pub trait Multiplexed {
    /// The connection thread's queue.
    #[doc(hidden)]
    fn queue(&self) -> &tokio::sync::mpsc::UnboundedSender<Req>;

    /// Sends one GET as a new stream and waits for the whole response.
    fn get(
        &self,
        u: &Url,
        dest: crate::http::Dest,
        extra: &[(String, String)],
        opts: &ClientOpts,
    ) -> Result<Response, FetchError> {
        let headers = crate::http::request_headers(dest, extra, opts)
            .into_iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v))
            .collect();
        let (reply, rx) = mpsc::sync_channel(1);
        let req = Req {
            url: u.clone(),
            headers,
            timeout: opts.timeout,
            budget: opts.budget.clone(),
            reply,
        };
        if self.queue().send(req).is_err() {
            // Nothing was sent: the connection's thread had ended.
            return Err(FetchError::Unprocessed {
                why: "the connection had closed".into(),
                stream: 0,
            });
        }
        // The stream times itself out at `timeout`; the slack covers a driver
        // thread that is gone.
        match rx.recv_timeout(opts.timeout + Duration::from_secs(2)) {
            Ok(r) => r,
            Err(_) => Err(FetchError::Io("timed out".into())),
        }
    }
}

/// A handle on an HTTP/2 connection; cloned for each request to its host.
/// The connection closes when the last handle is dropped.
#[derive(Clone, Debug)]
pub struct H2Conn {
    tx: tokio::sync::mpsc::UnboundedSender<Req>,
    max: Arc<AtomicUsize>,
    alive: Arc<AtomicBool>,
    /// Connection number within the load.
    pub id: u64,
    /// What it is (origin, `h2`, TLS).
    pub info: ConnInfo,
}

impl H2Conn {
    /// Streams the loader may have in flight: the server's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`, at most [`MAX_STREAMS`], at least 1.
    pub fn max_streams(&self) -> usize {
        self.max.load(Ordering::Relaxed).clamp(1, MAX_STREAMS)
    }

    /// The connection still takes requests (no GOAWAY, no error, not closed).
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }
}

impl Multiplexed for H2Conn {
    fn queue(&self) -> &tokio::sync::mpsc::UnboundedSender<Req> {
        &self.tx
    }
}

/// The TLS handshake of a new https connection offering `h2, http/1.1`
/// (config `cfg`) on the connected socket `sock`; returns the connection
/// (HTTP/1.1 or HTTP/2) and the handshake time (ms).
pub(crate) fn connect_tls(
    u: &Url,
    opts: &ClientOpts,
    cfg: Arc<rustls::ClientConfig>,
    sock: std::net::TcpStream,
    info: ConnInfo,
) -> Result<(Connected, f64), FetchError> {
    let name = server_name(u)?;
    let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(Connected, f64), FetchError>>(1);
    let u2 = u.clone();
    let connect_timeout = opts.connect_timeout;
    let thread = format!("redline-h2-{}", info.id);
    spawn_conn(thread, ready_tx, move |ready| {
        drive(u2, cfg, name, sock, info, connect_timeout, ready)
    })?;
    match ready_rx.recv_timeout(opts.connect_timeout + Duration::from_secs(2)) {
        Ok(r) => r,
        Err(_) => Err(FetchError::Tls(format!(
            "TLS handshake with {} timed out",
            u.host_str().unwrap_or("")
        ))),
    }
}

/// Starts a connection's thread `name`: `drive` (handed `ready`, on which
/// its first message is the handshake's outcome) on a single-threaded tokio
/// runtime, local tasks allowed. Err: no thread or runtime could be started.
pub(crate) fn spawn_conn<T, F>(
    name: String,
    ready: mpsc::SyncSender<Result<T, FetchError>>,
    drive: impl FnOnce(mpsc::SyncSender<Result<T, FetchError>>) -> F + Send + 'static,
) -> Result<(), FetchError>
where
    T: Send + 'static,
    F: Future<Output = ()>,
{
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready.send(Err(FetchError::Io(format!("runtime: {e}"))));
                return;
            }
        };
        tokio::task::LocalSet::new().block_on(&rt, drive(ready));
    });
    spawned
        .map(|_| ())
        .map_err(|e| FetchError::Io(format!("cannot start a thread: {e}")))
}

/// The connection's thread: handshake, then (h2) serve requests until every
/// handle is gone and the last stream has ended.
async fn drive(
    u: Url,
    cfg: Arc<rustls::ClientConfig>,
    name: rustls::pki_types::ServerName<'static>,
    sock: std::net::TcpStream,
    mut info: ConnInfo,
    connect_timeout: Duration,
    ready: mpsc::SyncSender<Result<(Connected, f64), FetchError>>,
) {
    let fail = |e: FetchError| {
        let _ = ready.send(Err(e));
    };
    let io_err = |e: std::io::Error| FetchError::Io(e.to_string());
    let tcp = match sock
        .set_nonblocking(true)
        .and_then(|_| tokio::net::TcpStream::from_std(sock))
    {
        Ok(t) => t,
        Err(e) => return fail(io_err(e)),
    };
    let t = Instant::now();
    let connector = tokio_rustls::TlsConnector::from(cfg);
    let tls = match tokio::time::timeout(connect_timeout, connector.connect(name, tcp)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return fail(tls_error(&u, &e)),
        Err(_) => {
            return fail(FetchError::Tls(format!(
                "TLS handshake with {} timed out",
                u.host_str().unwrap_or("")
            )))
        }
    };
    let tls_ms = ms(t.elapsed());
    let ti = tls_info(tls.get_ref().1);
    let h2 = ti.alpn.as_deref() == Some("h2");
    info.tls = Some(ti);
    if !h2 {
        // HTTP/1.1: hand the session back to the blocking client.
        let (tcp, session) = tls.into_inner();
        let std = match tcp
            .into_std()
            .and_then(|s| s.set_nonblocking(false).map(|_| s))
        {
            Ok(s) => s,
            Err(e) => return fail(io_err(e)),
        };
        let id = info.id;
        let stream = Stream::Tls(Box::new(rustls::StreamOwned::new(session, std)));
        let _ = ready.send(Ok((Connected::H1(Conn::new(stream, id, info)), tls_ms)));
        return;
    }
    let hs = h2::client::Builder::new()
        .enable_push(false)
        .initial_window_size(1 << 20)
        .initial_connection_window_size(1 << 24)
        .max_header_list_size(MAX_HEADER_LIST)
        .handshake::<_, Bytes>(tls);
    let (sr, mut conn) = match tokio::time::timeout(connect_timeout, hs).await {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return fail(FetchError::Io(format!("HTTP/2 handshake: {e}"))),
        Err(_) => return fail(FetchError::Io("HTTP/2 handshake timed out".into())),
    };
    info.protocol = "h2".into();
    let max = Arc::new(AtomicUsize::new(conn.max_concurrent_send_streams()));
    let alive = Arc::new(AtomicBool::new(true));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Req>();
    let id = info.id;
    let handle = H2Conn {
        tx,
        max: max.clone(),
        alive: alive.clone(),
        id,
        info,
    };
    if ready.send(Ok((Connected::H2(handle), tls_ms))).is_err() {
        return;
    }
    // The connection task: polls the connection and publishes the server's
    // stream limit (it arrives in the server's SETTINGS, after the handshake).
    let max2 = max.clone();
    let alive2 = alive.clone();
    let driver = tokio::task::spawn_local(async move {
        let _ = std::future::poll_fn(|cx| {
            let r = std::pin::Pin::new(&mut conn).poll(cx);
            max2.store(conn.max_concurrent_send_streams(), Ordering::Relaxed);
            r
        })
        .await;
        alive2.store(false, Ordering::Relaxed);
    });
    let mut streams = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            r = rx.recv() => match r {
                Some(req) => {
                    let sr = sr.clone();
                    streams.spawn_local(async move {
                        let reply = req.reply.clone();
                        let r = match tokio::time::timeout(req.timeout, stream(sr, &req, id)).await {
                            Ok(r) => r,
                            Err(_) => Err(FetchError::Io("timed out".into())),
                        };
                        let _ = reply.send(r);
                    });
                }
                None => break,
            },
            Some(_) = streams.join_next(), if !streams.is_empty() => {}
        }
    }
    // Every handle is gone: let the last streams end, then close.
    while streams.join_next().await.is_some() {}
    drop(sr);
    let _ = tokio::time::timeout(Duration::from_secs(2), driver).await;
    alive.store(false, Ordering::Relaxed);
}

/// An h2 error as a fetch error: what the server says it did not process
/// (GOAWAY: the stream was above its last stream id, or opened after it;
/// RST_STREAM with REFUSED_STREAM) is [`FetchError::Unprocessed`], which the
/// loader sends again on a new connection (up to 3 times); anything else is final.
fn h2_error(e: h2::Error, stream: u32) -> FetchError {
    let refused = e.is_remote()
        && (e.is_go_away() || (e.is_reset() && e.reason() == Some(h2::Reason::REFUSED_STREAM)));
    if refused {
        FetchError::Unprocessed {
            why: format!("HTTP/2: {e} (not processed by the server)"),
            stream,
        }
    } else {
        FetchError::Io(format!("HTTP/2: {e}"))
    }
}

/// One request as one stream.
async fn stream(
    sr: h2::client::SendRequest<Bytes>,
    req: &Req,
    conn_id: u64,
) -> Result<Response, FetchError> {
    let mut sr = sr.ready().await.map_err(|e| h2_error(e, 0))?;
    let mut authority = req.url.host_str().unwrap_or("").to_string();
    if let Some(p) = req.url.port() {
        authority.push_str(&format!(":{p}"));
    }
    let mut path = req.url.path().to_string();
    if let Some(q) = req.url.query() {
        path.push('?');
        path.push_str(q);
    }
    let uri: http::Uri = format!("{}://{authority}{path}", req.url.scheme())
        .parse()
        .map_err(|e| FetchError::Malformed(format!("URL not expressible in HTTP/2: {e}")))?;
    let mut r = http::Request::new(());
    *r.uri_mut() = uri;
    *r.version_mut() = http::Version::HTTP_2;
    for (n, v) in &req.headers {
        // Connection-specific headers are forbidden in HTTP/2 (RFC 9113 §8.2.2).
        if matches!(
            n.as_str(),
            "host"
                | "connection"
                | "keep-alive"
                | "proxy-connection"
                | "transfer-encoding"
                | "upgrade"
                | "te"
        ) {
            continue;
        }
        // Only the name is shown: values may be secrets.
        let hn = http::HeaderName::from_bytes(n.as_bytes())
            .map_err(|_| FetchError::Malformed(format!("header name '{n}' not valid in HTTP/2")))?;
        let hv = http::HeaderValue::from_str(v)
            .map_err(|_| FetchError::Malformed(format!("value of header '{n}' not valid")))?;
        r.headers_mut().append(hn, hv);
    }
    let sent = Instant::now();
    let (resp, _send) = sr.send_request(r, true).map_err(|e| h2_error(e, 0))?;
    let id = u32::from(resp.stream_id());
    let resp = resp.await.map_err(|e| h2_error(e, id))?;
    let first_byte = Instant::now();
    let status = resp.status().as_u16();
    let headers: Vec<(String, String)> = resp
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).trim().to_string(),
            )
        })
        .collect();
    // The head as HTTP/1-style text ("HTTP/2 200\r\n", fields, blank line).
    let mut wire: u64 = 13
        + headers
            .iter()
            .map(|(n, v)| (n.len() + v.len() + 4) as u64)
            .sum::<u64>()
        + 2;
    let mut rx = resp.into_body();
    let mut body = Vec::new();
    while let Some(chunk) = rx.data().await {
        // The server answered: whatever ends the body now, it processed the request.
        let chunk = chunk.map_err(|e| FetchError::Io(format!("HTTP/2: {e}")))?;
        let _ = rx.flow_control().release_capacity(chunk.len());
        if body.len() + chunk.len() > MAX_WIRE_BODY {
            return Err(FetchError::TooLarge);
        }
        if let Some(b) = &req.budget {
            if !b.charge(chunk.len() as u64) {
                return Err(FetchError::Io(crate::http::BUDGET_STOP.into()));
            }
        }
        body.extend_from_slice(&chunk);
    }
    let done = Instant::now();
    wire += body.len() as u64;
    Ok(finish(
        status,
        headers,
        body,
        wire,
        (sent, first_byte, done),
        conn_id,
        false,
        "h2",
    ))
}
