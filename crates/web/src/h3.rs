//! HTTP/3 for the page loader (`page --http3`, and origins that advertised
//! `Alt-Svc: h3` in an earlier view, as Chromium follows it): one QUIC
//! connection per origin, every request to it a stream, as [`crate::h2`]
//! does for HTTP/2.
//!
//! No second HTTP/3 client: the connection is the engine's sans-IO
//! [`Http3Session`] (QUIC from `quinn-proto`, redline's own HTTP/3 frames
//! and static-table QPACK), with requests built by its [`Http3Request`] from
//! the same fields HTTP/2 sends. This file only moves its datagrams: each
//! connection has its own thread running a single-threaded tokio runtime
//! with one connected UDP socket (an ICMP "port unreachable" then reaches it
//! as ECONNREFUSED), QUIC's timer, and the requests sent through an
//! [`H3Conn`] handle, until every handle is dropped.
//!
//! Timing, as Chromium reports QUIC (`GetConnectTiming`: `ssl_start` is
//! `connect_start`, `ssl_end` is `connect_end`): the QUIC handshake is the
//! connect and the TLS handshake in one, so the loader records it as the
//! TLS time with a TCP connect of 0, and HAR's `connect` (which includes
//! `ssl`) and `ssl` are both the handshake. Bytes: DATA payload is exact;
//! QPACK hides the head's wire size, so the head counts as HTTP/1-style text
//! (an upper bound), as on HTTP/2. The engine's session keeps a body whole
//! up to the loaders' own limit (`Want::capture_max`, `MAX_WIRE_BODY`),
//! so `finish` decodes and keeps it exactly as over TCP.

use crate::h2::{Multiplexed, Req};
use crate::http::{finish, ms, ClientOpts, ConnInfo, ConnectTimes, FetchError, Response, TlsInfo};
use redline_engine::http2::Http2Request;
use redline_engine::http3::{Http3Config, Http3Request, Http3Session};
use redline_engine::session::{Answer, Event, RequestId, Session, SubmitError, Want};
use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use url::Url;

/// Streams in flight on one connection at most (the loader's limit, as on
/// HTTP/2; the session queues past the server's own limit).
pub const MAX_STREAMS: usize = 100;

/// Where an HTTP/3 connection goes: the origin's own host and port
/// (`--http3`), or the alternative an `Alt-Svc: h3` named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The host to resolve (the origin's unless the alternative names one).
    pub host: String,
    /// The UDP port.
    pub port: u16,
}

impl Endpoint {
    /// The origin's own host and port (`--http3`).
    pub fn of(u: &Url) -> Endpoint {
        Endpoint {
            host: u.host_str().unwrap_or("").to_string(),
            port: u.port_or_known_default().unwrap_or(443),
        }
    }
}

/// A handle on an HTTP/3 connection; cloned for each request to its origin.
/// The connection closes when the last handle is dropped.
#[derive(Clone, Debug)]
pub struct H3Conn {
    tx: tokio::sync::mpsc::UnboundedSender<Req>,
    alive: Arc<AtomicBool>,
    /// Connection number within the load.
    pub id: u64,
    /// What it is (origin, `h3`, TLS 1.3).
    pub info: ConnInfo,
}

impl H3Conn {
    /// Streams the loader may have in flight on it.
    pub fn max_streams(&self) -> usize {
        MAX_STREAMS
    }

    /// The connection still takes requests (no GOAWAY, no error, not closed).
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }
}

impl Multiplexed for H3Conn {
    fn queue(&self) -> &tokio::sync::mpsc::UnboundedSender<Req> {
        &self.tx
    }
}

/// `host:port` of an endpoint, IPv6 in brackets.
fn host_port(e: &Endpoint) -> String {
    if e.host.contains(':') && !e.host.starts_with('[') {
        format!("[{}]:{}", e.host, e.port)
    } else {
        format!("{}:{}", e.host, e.port)
    }
}

/// Opens an HTTP/3 connection for origin `u` to `to`, timing the lookup
/// (`spent.dns`) and the QUIC handshake (`spent.tls`; `spent.connect` is 0:
/// QUIC has no separate connect); the certificate must be valid for `u`'s
/// host. Errors: no answer over UDP within the connect time-out, a closed
/// UDP port, a refused certificate, each in words.
pub fn connect(
    u: &Url,
    to: &Endpoint,
    opts: &ClientOpts,
    id: u64,
    spent: &mut ConnectTimes,
) -> Result<(H3Conn, ConnectTimes), FetchError> {
    if u.scheme() != "https" {
        return Err(FetchError::Scheme(format!(
            "{} (HTTP/3 needs https)",
            u.scheme()
        )));
    }
    let hp = host_port(to);
    let t = Instant::now();
    let bare = to.host.trim_start_matches('[').trim_end_matches(']');
    let resolved = (bare, to.port).to_socket_addrs();
    spent.dns = ms(t.elapsed());
    let addr: SocketAddr = resolved
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| FetchError::Dns(to.host.clone()))?;
    let tls = crate::http::tls_of(opts)?;
    let cfg = Http3Config::new(&tls.fetch).map_err(FetchError::Tls)?;
    let name = u
        .host_str()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let info = ConnInfo {
        id,
        origin: crate::http::host_key(u),
        protocol: "h3".into(),
        alpn_offered: vec!["h3".into()],
        tls: Some(TlsInfo {
            version: "TLSv1.3".into(),
            cipher: "QUIC".into(),
            alpn: Some("h3".into()),
        }),
    };
    let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(H3Conn, f64), FetchError>>(1);
    let limit = opts.connect_timeout;
    let hp2 = hp.clone();
    crate::h2::spawn_conn(format!("redline-h3-{id}"), ready_tx, move |ready| {
        drive(cfg, addr, name, hp2, info, limit, ready)
    })?;
    let t = Instant::now();
    let r = match ready_rx.recv_timeout(limit + Duration::from_secs(2)) {
        Ok(r) => r,
        Err(_) => Err(no_answer(&hp, limit)),
    };
    spent.tls = Some(ms(t.elapsed()));
    let (conn, hs) = r?;
    spent.tls = Some(hs);
    Ok((
        conn,
        ConnectTimes {
            dns: spent.dns,
            connect: 0.0,
            tls: Some(hs),
        },
    ))
}

fn no_answer(hp: &str, limit: Duration) -> FetchError {
    FetchError::Connect(format!(
        "{hp} over UDP (HTTP/3): no QUIC answer within {limit:?}"
    ))
}

fn refused(hp: &str) -> FetchError {
    FetchError::Connect(format!(
        "{hp} over UDP (HTTP/3): connection refused (nothing listens on that UDP port)"
    ))
}

/// A request on the connection: waiting for a stream, or sent.
struct InFlight {
    req: Req,
    sent: Instant,
    first_byte: Option<Instant>,
    deadline: Instant,
}

/// What the connection's thread keeps: the session, its socket, requests.
struct Driver {
    sess: Http3Session,
    sock: tokio::net::UdpSocket,
    hp: String,
    conn_id: u64,
    /// Requests not on a stream yet, with their time-outs.
    waiting: VecDeque<(Req, Instant)>,
    open: HashMap<RequestId, InFlight>,
}

impl Driver {
    /// Sends every datagram the session has; Err: the UDP port is closed.
    async fn flush(&mut self) -> Result<(), FetchError> {
        for _ in 0..10_000 {
            let d = self.sess.pending_out();
            if d.is_empty() {
                return Ok(());
            }
            let n = d.len();
            match self.sock.send(d).await {
                Ok(_) => self.sess.consume_out(n),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    return Err(refused(&self.hp))
                }
                // Dropped (QUIC's loss recovery sends it again).
                Err(_) => self.sess.consume_out(n),
            }
        }
        Ok(())
    }

    /// The earliest of QUIC's timer and the requests' time-outs.
    fn deadline(&mut self, far: Instant) -> Instant {
        let q = self.sess.deadline().unwrap_or(far);
        let w = self.waiting.iter().map(|(_, d)| *d).fold(q, Instant::min);
        self.open.values().map(|r| r.deadline).fold(w, Instant::min)
    }

    /// Hands queued requests to the session while it takes them.
    fn submit(&mut self) {
        // A new request may have ended the wait: now is the submit's time.
        self.sess.set_time(Instant::now());
        let want = Want {
            server: false,
            location: false,
            capture: Some((true, true)),
            // As much as the HTTP/1.1 and HTTP/2 loaders read (larger is
            // `FetchError::TooLarge`); `finish` keeps its share per type.
            capture_max: crate::http::MAX_WIRE_BODY,
        };
        if self.sess.retiring() {
            // GOAWAY (or closed): what is not on a stream goes elsewhere.
            for (r, _) in self.waiting.drain(..) {
                let _ = r.reply.send(Err(FetchError::Unprocessed {
                    why: "HTTP/3: the connection takes no more requests (GOAWAY)".into(),
                    stream: 0,
                }));
            }
            return;
        }
        while self.sess.capacity() > 0 && self.open.len() < MAX_STREAMS {
            let Some((req, deadline)) = self.waiting.pop_front() else {
                return;
            };
            let r = match request(&req) {
                Ok(r) => r,
                Err(e) => {
                    let _ = req.reply.send(Err(e));
                    continue;
                }
            };
            match self.sess.submit(&r, want) {
                Ok(id) => {
                    let now = Instant::now();
                    self.open.insert(
                        id,
                        InFlight {
                            req,
                            sent: now,
                            first_byte: None,
                            deadline,
                        },
                    );
                }
                Err(SubmitError::Full) => {
                    self.waiting.push_front((req, deadline));
                    return;
                }
                Err(SubmitError::Closed) => {
                    let _ = req.reply.send(Err(FetchError::Unprocessed {
                        why: "HTTP/3: the connection had closed".into(),
                        stream: 0,
                    }));
                }
                Err(SubmitError::Invalid(why)) => {
                    let _ = req.reply.send(Err(FetchError::Malformed(why)));
                }
            }
        }
    }

    /// Acts on what the session learnt: first bytes, answers, failures.
    fn events(&mut self) {
        while let Some(ev) = self.sess.poll_event() {
            match ev {
                Event::Head { id, .. } => {
                    if let Some(r) = self.open.get_mut(&id) {
                        r.first_byte.get_or_insert_with(Instant::now);
                    }
                }
                Event::Done {
                    id,
                    status,
                    body_bytes,
                    answer,
                } => {
                    if let Some(r) = self.open.remove(&id) {
                        let res = answered(&r, status, body_bytes, answer, self.conn_id);
                        let _ = r.req.reply.send(res);
                    }
                }
                Event::Failed {
                    id,
                    message,
                    unprocessed,
                    ..
                } => {
                    if let Some(r) = self.open.remove(&id) {
                        let e = if unprocessed {
                            FetchError::Unprocessed {
                                why: format!("HTTP/3: {message} (not processed by the server)"),
                                stream: 0,
                            }
                        } else {
                            FetchError::Io(format!("HTTP/3: {message}"))
                        };
                        let _ = r.req.reply.send(Err(e));
                    }
                }
            }
        }
    }

    /// Requests past their time-out are cancelled (their streams reset).
    fn expire(&mut self, now: Instant) {
        let late: Vec<RequestId> = self
            .open
            .iter()
            .filter(|(_, r)| r.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            if let Some(r) = self.open.remove(&id) {
                self.sess.cancel(id);
                let _ = r.req.reply.send(Err(late_error(&r.req)));
            }
        }
        while let Some(k) = self.waiting.iter().position(|(_, d)| *d <= now) {
            if let Some((r, _)) = self.waiting.remove(k) {
                let _ = r.reply.send(Err(late_error(&r)));
            }
        }
    }

    /// Every request still here fails with `e`.
    fn fail_all(&mut self, e: &FetchError) {
        for (_, r) in self.open.drain() {
            let _ = r.req.reply.send(Err(e.clone()));
        }
        for (r, _) in self.waiting.drain(..) {
            let _ = r.reply.send(Err(e.clone()));
        }
    }

    /// Waits for a datagram, the deadline or (`rx`) a new request.
    async fn wait(
        &mut self,
        rx: Option<&mut tokio::sync::mpsc::UnboundedReceiver<Req>>,
        until: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Option<Req>>, FetchError> {
        let sleep = tokio::time::sleep_until(until.into());
        let got = match rx {
            Some(rx) => tokio::select! {
                r = rx.recv() => return Ok(Some(r)),
                r = self.sock.recv(buf) => Some(r),
                _ = sleep => None,
            },
            None => tokio::select! {
                r = self.sock.recv(buf) => Some(r),
                _ = sleep => None,
            },
        };
        // The session reads no clock: what it does until the next wait
        // (datagrams in and out, submits, the close) is at this time.
        self.sess.set_time(Instant::now());
        match got {
            Some(Ok(n)) => {
                self.sess.bytes_in(&buf[..n]);
                // The rest of what is queued, before the next wake-up.
                for _ in 0..256 {
                    match self.sock.try_recv(buf) {
                        Ok(n) => self.sess.bytes_in(&buf[..n]),
                        Err(_) => break,
                    }
                }
            }
            Some(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(refused(&self.hp))
            }
            Some(Err(e)) => return Err(FetchError::Io(format!("HTTP/3: UDP: {e}"))),
            None => {
                let now = Instant::now();
                if self.sess.deadline().is_some_and(|d| d <= now) {
                    self.sess.on_timeout(now);
                }
                self.expire(now);
            }
        }
        Ok(None)
    }
}

/// A request's time-out passed before its whole answer came.
fn late_error(r: &Req) -> FetchError {
    FetchError::Io(format!("HTTP/3: no whole answer within {:?}", r.timeout))
}

/// The HTTP/3 form of a GET (the fields HTTP/2 sends).
fn request(req: &Req) -> Result<Http3Request, FetchError> {
    let u = &req.url;
    let mut authority = u.host_str().unwrap_or("").to_string();
    if let Some(p) = u.port() {
        authority.push_str(&format!(":{p}"));
    }
    let mut path = u.path().to_string();
    if let Some(q) = u.query() {
        path.push('?');
        path.push_str(q);
    }
    let r = Http2Request::from_parts(
        "GET",
        "https",
        &authority,
        &path,
        &req.headers,
        bytes::Bytes::new(),
    )
    .map_err(FetchError::Malformed)?;
    Ok(Http3Request::from_h2(&r))
}

/// A complete answer as the loader's [`Response`].
fn answered(
    r: &InFlight,
    status: u16,
    body_bytes: u64,
    answer: Option<Box<Answer>>,
    conn_id: u64,
) -> Result<Response, FetchError> {
    let done = Instant::now();
    if body_bytes > crate::http::MAX_WIRE_BODY as u64 {
        return Err(FetchError::TooLarge);
    }
    if let Some(b) = &r.req.budget {
        if !b.charge(body_bytes) {
            return Err(FetchError::Io(crate::http::BUDGET_STOP.into()));
        }
    }
    let cap = answer
        .and_then(|a| a.capture)
        .map(|c| *c)
        .unwrap_or_default();
    // The head as HTTP/1-style text ("HTTP/3 200\r\n", fields, blank line).
    let head: u64 = 13
        + cap
            .headers
            .iter()
            .map(|(n, v)| (n.len() + v.len() + 4) as u64)
            .sum::<u64>()
        + 2;
    let first = r.first_byte.unwrap_or(done);
    let resp = finish(
        status,
        cap.headers,
        cap.body,
        head + body_bytes,
        (r.sent, first, done),
        conn_id,
        false,
        "h3",
    );
    Ok(resp)
}

/// The connection's thread: the handshake (reported on `ready`), then
/// requests until every handle is gone and the last answer is in.
async fn drive(
    cfg: Http3Config,
    addr: SocketAddr,
    name: String,
    hp: String,
    mut info: ConnInfo,
    limit: Duration,
    ready: mpsc::SyncSender<Result<(H3Conn, f64), FetchError>>,
) {
    let fail = |e: FetchError| {
        let _ = ready.send(Err(e));
    };
    let bind: SocketAddr = if addr.is_ipv6() {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let sock = match tokio::net::UdpSocket::bind(bind).await {
        Ok(s) => s,
        Err(e) => return fail(FetchError::Io(format!("UDP socket: {e}"))),
    };
    if let Err(e) = sock.connect(addr).await {
        return fail(FetchError::Connect(format!("{hp} over UDP: {e}")));
    }
    let t = Instant::now();
    let sess = match Http3Session::new(&cfg, addr, &name, t) {
        Ok(s) => s,
        Err(e) => return fail(FetchError::Tls(e)),
    };
    let mut d = Driver {
        sess,
        sock,
        hp: hp.clone(),
        conn_id: info.id,
        waiting: VecDeque::new(),
        open: HashMap::new(),
    };
    let mut buf = vec![0u8; 65_536];
    let end = t + limit;
    // The handshake.
    for _ in 0..1_000_000 {
        if let Err(e) = d.flush().await {
            return fail(e);
        }
        if d.sess.established() {
            break;
        }
        if let Some((_, why)) = d.sess.lost() {
            return fail(handshake_error(&hp, why, limit));
        }
        if Instant::now() >= end {
            return fail(no_answer(&hp, limit));
        }
        let until = d.deadline(end).min(end);
        if let Err(e) = d.wait(None, until, &mut buf).await {
            return fail(e);
        }
    }
    let hs = ms(t.elapsed());
    info.protocol = "h3".into();
    let alive = Arc::new(AtomicBool::new(true));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Req>();
    let handle = H3Conn {
        tx,
        alive: alive.clone(),
        id: info.id,
        info,
    };
    if ready.send(Ok((handle, hs))).is_err() {
        return;
    }
    let mut taking = true;
    for _ in 0..100_000_000u64 {
        d.submit();
        d.events();
        if let Err(e) = d.flush().await {
            d.fail_all(&e);
            break;
        }
        d.events();
        if d.sess.retiring() {
            alive.store(false, Ordering::Relaxed);
        }
        if d.sess.is_closed() {
            let why = d
                .sess
                .lost()
                .map(|(_, w)| w.to_string())
                .unwrap_or_else(|| "the connection closed".into());
            d.fail_all(&FetchError::Io(format!("HTTP/3: {why}")));
            if !taking {
                break;
            }
        }
        if !taking && d.open.is_empty() && d.waiting.is_empty() {
            break;
        }
        let far = Instant::now() + Duration::from_secs(3600);
        let until = d.deadline(far);
        let rx = if taking { Some(&mut rx) } else { None };
        match d.wait(rx, until, &mut buf).await {
            Ok(Some(Some(req))) => {
                let deadline = Instant::now() + req.timeout;
                d.waiting.push_back((req, deadline));
            }
            Ok(Some(None)) => taking = false,
            Ok(None) => {}
            Err(e) => {
                alive.store(false, Ordering::Relaxed);
                d.fail_all(&e);
                if !taking {
                    break;
                }
            }
        }
    }
    alive.store(false, Ordering::Relaxed);
    // Every handle is gone: close (CONNECTION_CLOSE with H3_NO_ERROR).
    d.sess.close();
    let _ = d.flush().await;
}

/// A handshake that ended, in words (an untrusted certificate says what to do).
fn handshake_error(hp: &str, why: &str, limit: Duration) -> FetchError {
    if why.contains("no answer") {
        return no_answer(hp, limit);
    }
    if why.contains("certificate") || why.contains("Certificate") || why.contains("TLS") {
        let hint = if why.contains("ertificate") {
            "; trust its CA with --cacert FILE, or skip the check with --insecure"
        } else {
            ""
        };
        return FetchError::Tls(format!(
            "QUIC handshake with {hp} (HTTP/3) failed: {why}{hint}"
        ));
    }
    FetchError::Connect(format!("{hp} over UDP (HTTP/3): {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_and_errors_in_words() {
        let u = Url::parse("https://example.test/x").unwrap();
        assert_eq!(Endpoint::of(&u).port, 443);
        let v6 = Endpoint {
            host: "::1".into(),
            port: 8443,
        };
        assert_eq!(host_port(&v6), "[::1]:8443");
        let e = handshake_error(
            "a:1",
            "QUIC TLS: invalid peer certificate: UnknownIssuer",
            Duration::from_secs(1),
        );
        assert!(e.to_string().contains("--cacert"), "{e}");
        let e = handshake_error(
            "a:1",
            "the QUIC handshake got no answer within the idle time-out",
            Duration::from_secs(2),
        );
        assert!(e.to_string().contains("no QUIC answer within 2s"), "{e}");
    }

    /// Options for a quick failure: a 400 ms connect time-out.
    fn quick() -> ClientOpts {
        ClientOpts {
            connect_timeout: Duration::from_millis(400),
            ..ClientOpts::default()
        }
    }

    #[test]
    fn a_udp_black_hole_ends_at_the_connect_time_out() {
        // Bound and never read: datagrams go nowhere, nothing answers.
        let hole = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = hole.local_addr().unwrap().port();
        let u = Url::parse(&format!("https://127.0.0.1:{port}/")).unwrap();
        let t = Instant::now();
        let mut spent = ConnectTimes::default();
        let e = connect(&u, &Endpoint::of(&u), &quick(), 1, &mut spent).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert_eq!(
            e.to_string(),
            format!(
                "cannot connect to 127.0.0.1:{port} over UDP (HTTP/3): no QUIC answer within 400ms"
            )
        );
        // The time it took is kept for the waterfall.
        assert!(spent.tls.is_some_and(|t| t >= 390.0), "{spent:?}");
    }

    #[test]
    fn a_closed_udp_port_is_refused_at_once() {
        let port = {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            s.local_addr().unwrap().port()
        };
        let u = Url::parse(&format!("https://127.0.0.1:{port}/")).unwrap();
        let t = Instant::now();
        let e = connect(
            &u,
            &Endpoint::of(&u),
            &quick(),
            1,
            &mut ConnectTimes::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("connection refused"), "{e}");
        assert!(
            t.elapsed() < Duration::from_millis(400),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn plain_http_is_refused_before_any_packet() {
        let u = Url::parse("http://127.0.0.1:1/").unwrap();
        let r = connect(
            &u,
            &Endpoint::of(&u),
            &ClientOpts::default(),
            1,
            &mut ConnectTimes::default(),
        );
        assert!(matches!(r, Err(FetchError::Scheme(_))));
    }
}
