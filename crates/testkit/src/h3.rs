//! A test HTTP/3 server on 127.0.0.1:0: QUIC from `quinn-proto` (TLS from
//! [`crate::pki`], ALPN `h3`) on a blocking UDP socket in one thread, and a
//! minimal HTTP/3 server side written here by hand, independent of the
//! engine's codec: requests are read as frames (HEADERS present, DATA bytes
//! counted) and answered with a fixed body whose HEADERS frame is encoded
//! byte by byte from RFC 9204's static table. It counts what it did
//! ([`H3Counts`]) and can misbehave on purpose: reset every Nth request
//! stream with an HTTP/3 error code, or send GOAWAY after K requests on a
//! connection and reject the streams above it, drop every Nth datagram both
//! ways, or let the client open no request stream at all. Its TLS session store counts
//! the sessions clients resume. Also here: [`blackhole`], a
//! UDP socket that reads and drops (a handshake that never finishes), and
//! [`closed_udp_port`] (nothing listening: ICMP port unreachable).
//! Every loop is bounded by a stop flag and a time limit.

use quinn_proto::{
    ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event, ServerConfig,
    StreamEvent, StreamId, VarInt,
};
use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How the server behaves.
#[derive(Debug, Clone, Default)]
pub struct H3Options {
    /// The body of every answer.
    pub body: Vec<u8>,
    /// Reset every Nth request stream (1-based count over the server) with
    /// this HTTP/3 error code instead of answering it.
    pub reset_every: Option<(u64, u64)>,
    /// After this many requests on a connection: GOAWAY naming the next
    /// stream, and the streams at or above it rejected (H3_REQUEST_REJECTED).
    pub goaway_after: Option<u64>,
    /// Each request is answered this long after it arrived whole (so the
    /// requests open at once on a connection can be counted).
    pub delay: Duration,
    /// After this many answers the server forgets every connection, as a
    /// restarted server would (same stateless-reset key): the client's next
    /// packets get stateless resets.
    pub forget_after: Option<u64>,
    /// Drops every Nth datagram that arrives and every Nth it sends (a
    /// lossy path: QUIC must retransmit).
    pub drop_every: Option<u64>,
    /// The request streams the server lets the client open
    /// (`initial_max_streams_bidi`, never raised when 0); default 100.
    pub max_streams: Option<u32>,
    /// Its session tickets allow 0-RTT early data, and it takes it.
    pub early_data: bool,
    /// From the Nth connection on, early data is refused (the session is
    /// still resumed): the client must send those requests again.
    pub refuse_early_after: Option<u64>,
    /// Answers say `content-type: text/html; charset=utf-8`; without it
    /// they name no type.
    pub html: bool,
    /// After this many answers (over the server) it goes silent: every
    /// datagram in and out is dropped, no reset, no close (a path that died).
    pub mute_after: Option<u64>,
    /// The `max_idle_timeout` it advertises (quinn's default 30 s without).
    pub idle_timeout: Option<Duration>,
}

impl H3Options {
    /// Answers with a body of `n` bytes (`a` to `z` over and over).
    pub fn body(n: usize) -> H3Options {
        H3Options {
            body: (0..n).map(|i| b'a' + (i % 26) as u8).collect(),
            ..H3Options::default()
        }
    }

    /// Each answer `d` after its request (see [`H3Options::delay`]).
    pub fn delayed(mut self, d: Duration) -> H3Options {
        self.delay = d;
        self
    }
}

/// What the server did so far.
#[derive(Debug, Default)]
pub struct H3Counts {
    /// QUIC connections accepted.
    pub connections: AtomicU64,
    /// Requests answered (200 with the body).
    pub answered: AtomicU64,
    /// Request streams reset (`reset_every`).
    pub resets: AtomicU64,
    /// Request streams rejected after GOAWAY.
    pub rejected: AtomicU64,
    /// GOAWAY frames sent.
    pub goaways: AtomicU64,
    /// Request body bytes received (DATA payloads).
    pub body_bytes: AtomicU64,
    /// Times the server forgot its connections ([`H3Options::forget_after`]).
    pub forgotten: AtomicU64,
    /// Most requests received whole and not yet answered at once on one
    /// connection (with [`H3Options::delay`]).
    pub max_open: AtomicU64,
    /// Datagrams dropped on purpose ([`H3Options::drop_every`]), both ways.
    pub dropped: AtomicU64,
    /// TLS sessions resumed: a client's ticket found in the server's
    /// session store (a handshake without a certificate).
    pub resumed: AtomicU64,
    /// Requests whose stream opened before the handshake completed: sent
    /// in 0-RTT early data (and accepted).
    pub early_requests: AtomicU64,
    /// With [`H3Options::delay`]: how long each answered request was held,
    /// in µs, from the read that completed it to its answer (the server's
    /// own share of the time a client measures).
    pub held_us: std::sync::Mutex<Vec<u64>>,
}

/// The server's TLS session store, counting the sessions it hands back
/// (resumptions) into [`H3Counts::resumed`].
#[derive(Debug)]
struct CountedStore(Arc<rustls::server::ServerSessionMemoryCache>, Arc<H3Counts>);

impl rustls::server::StoresServerSessions for CountedStore {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.0.put(key, value)
    }
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.hit(self.0.get(key))
    }
    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.hit(self.0.take(key))
    }
    fn can_cache(&self) -> bool {
        self.0.can_cache()
    }
}

impl CountedStore {
    fn hit(&self, v: Option<Vec<u8>>) -> Option<Vec<u8>> {
        if v.is_some() {
            self.1.resumed.fetch_add(1, Ordering::Relaxed);
        }
        v
    }
}

/// A server thread's stop flag and handle: set and joined on drop.
struct Stopper {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Stopper {
    /// Runs `body` (which must return soon after the flag is set) on a thread.
    fn spawn(body: impl FnOnce(&AtomicBool) + Send + 'static) -> Stopper {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || body(&flag));
        Stopper {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Stopper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A running test HTTP/3 server; stopped (and its thread joined) on drop.
pub struct H3Server {
    /// Its UDP port on 127.0.0.1.
    pub port: u16,
    /// Its counts.
    pub counts: Arc<H3Counts>,
    _thread: Stopper,
}

/// A request stream being received.
#[derive(Default)]
struct Req {
    bytes: Vec<u8>,
}

/// One accepted connection.
struct Conn {
    conn: quinn_proto::Connection,
    reqs: HashMap<StreamId, Req>,
    control: Option<StreamId>,
    served: u64,
    /// GOAWAY sent naming this stream id.
    goaway: Option<u64>,
    /// Requests waiting for their answer time ([`H3Options::delay`]).
    held: Vec<(Instant, StreamId)>,
}

/// Starts a server with `opts`, certificate from `pki` (its chain and key).
pub fn start(pki: &crate::pki::Pki, opts: H3Options) -> H3Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(pki.key_der.clone().into());
    let mut tls = rustls::ServerConfig::builder_with_protocol_versions(&[&rustls::version::TLS13])
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), key)
        .expect("test certificate");
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.max_early_data_size = 0;
    let counts = Arc::new(H3Counts::default());
    tls.session_storage = Arc::new(CountedStore(
        rustls::server::ServerSessionMemoryCache::new(4096),
        counts.clone(),
    ));
    let refusing = quinn_proto::crypto::rustls::QuicServerConfig::try_from(tls.clone());
    if opts.early_data {
        tls.max_early_data_size = u32::MAX;
    }
    let crypto = quinn_proto::crypto::rustls::QuicServerConfig::try_from(tls).expect("QUIC TLS");
    let mut server = ServerConfig::with_crypto(Arc::new(crypto));
    let mut t = quinn_proto::TransportConfig::default();
    if let Some(n) = opts.max_streams {
        t.max_concurrent_bidi_streams(VarInt::from_u32(n));
    }
    if let Some(d) = opts.idle_timeout {
        t.max_idle_timeout(Some(d.try_into().expect("idle time-out")));
    }
    server.transport_config(Arc::new(t));
    let server = Arc::new(server);
    // The same, refusing early data (same session store: still resumed).
    let mut refusing = ServerConfig::with_crypto(Arc::new(refusing.expect("QUIC TLS")));
    refusing.transport_config(server.transport.clone());
    let refusing = Arc::new(refusing);
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind UDP");
    let port = sock.local_addr().expect("local addr").port();
    let c = counts.clone();
    H3Server {
        port,
        counts,
        _thread: Stopper::spawn(move |stop| serve(sock, [server, refusing], opts, &c, stop)),
    }
}

/// The server's loop: datagrams in, connections driven, datagrams out
/// (at most 10 minutes, or until stopped).
fn serve(
    sock: UdpSocket,
    [server, refusing]: [Arc<ServerConfig>; 2],
    opts: H3Options,
    counts: &H3Counts,
    stop: &AtomicBool,
) {
    // A fixed reset key: a "restarted" endpoint still makes the tokens the
    // client was given, so its stateless resets are recognised.
    let key: Arc<dyn quinn_proto::crypto::HmacKey> =
        Arc::new(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &[7u8; 32]));
    let mut config = EndpointConfig::new(key);
    // And a fixed CID key: the restarted endpoint takes the old CIDs for
    // its own (unknown ones are dropped, not reset).
    config.cid_generator(|| Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(7)));
    let config = Arc::new(config);
    let fresh = || Endpoint::new(config.clone(), Some(server.clone()), false, None);
    let mut endpoint = fresh();
    let mut conns: HashMap<ConnectionHandle, Conn> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    let mut out = Vec::with_capacity(2048);
    let mut seen = 0u64;
    let mut lossy = Lossy {
        every: opts.drop_every.filter(|&n| n > 0),
        ins: 0,
        outs: 0,
        muted: false,
    };
    let end = Instant::now() + Duration::from_secs(600);
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        let now = Instant::now();
        let next = conns
            .values_mut()
            .filter_map(|c| c.conn.poll_timeout())
            .min()
            .map_or(Duration::from_millis(20), |t| {
                t.saturating_duration_since(now)
                    .clamp(Duration::from_micros(100), Duration::from_millis(20))
            });
        let held = conns.values().any(|c| !c.held.is_empty());
        let next = if held {
            next.min(Duration::from_millis(1))
        } else {
            next
        };
        let _ = sock.set_read_timeout(Some(next));
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            if lossy.drop_in() {
                counts.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let now = Instant::now();
            out.clear();
            let data = bytes::BytesMut::from(&buf[..n]);
            match endpoint.handle(now, from, None, None, data, &mut out) {
                Some(DatagramEvent::NewConnection(incoming)) => {
                    out.clear();
                    let refuse = opts
                        .refuse_early_after
                        .is_some_and(|n| counts.connections.load(Ordering::Relaxed) + 1 >= n);
                    let cfg = refuse.then(|| refusing.clone());
                    if let Ok((ch, conn)) = endpoint.accept(incoming, now, &mut out, cfg) {
                        counts.connections.fetch_add(1, Ordering::Relaxed);
                        conns.insert(
                            ch,
                            Conn {
                                conn,
                                reqs: HashMap::new(),
                                control: None,
                                served: 0,
                                goaway: None,
                                held: Vec::new(),
                            },
                        );
                    } else if !out.is_empty() {
                        lossy.send(&sock, &out, from, counts);
                    }
                }
                Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                    if let Some(c) = conns.get_mut(&ch) {
                        c.conn.handle_event(ev);
                    }
                }
                Some(DatagramEvent::Response(t)) => {
                    lossy.send(&sock, &out[..t.size], from, counts);
                }
                None => {}
            }
        }
        let now = Instant::now();
        let mut gone = Vec::new();
        for (&ch, c) in conns.iter_mut() {
            if c.conn.poll_timeout().is_some_and(|t| t <= now) {
                c.conn.handle_timeout(now);
            }
            drive(c, &opts, counts, &mut seen);
            while let Some(k) = c.held.iter().position(|&(t, _)| t <= now) {
                let (t, sid) = c.held.swap_remove(k);
                let held = Instant::now().saturating_duration_since(t - opts.delay);
                if let Ok(mut h) = counts.held_us.lock() {
                    h.push(held.as_micros() as u64);
                }
                answer(c, sid, &opts, counts, &mut seen);
            }
            while let Some(ev) = c.conn.poll_endpoint_events() {
                if let Some(back) = endpoint.handle_event(ch, ev) {
                    c.conn.handle_event(back);
                }
            }
            for _ in 0..10_000 {
                out.clear();
                let Some(t) = c.conn.poll_transmit(now, 1, &mut out) else {
                    break;
                };
                lossy.send(&sock, &out[..t.size], t.destination, counts);
            }
            if c.conn.is_drained() {
                gone.push(ch);
            }
        }
        for ch in gone {
            conns.remove(&ch);
        }
        let answered = counts.answered.load(Ordering::Relaxed);
        lossy.muted |= opts.mute_after.is_some_and(|k| answered >= k);
        if opts.forget_after.is_some_and(|k| answered >= k)
            && counts.forgotten.load(Ordering::Relaxed) == 0
        {
            conns.clear();
            endpoint = fresh();
            counts.forgotten.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The server's datagrams in and out, every Nth dropped each way
/// ([`H3Options::drop_every`]), all once `muted` ([`H3Options::mute_after`]).
struct Lossy {
    every: Option<u64>,
    ins: u64,
    outs: u64,
    muted: bool,
}

impl Lossy {
    /// Whether the datagram that just arrived is dropped.
    fn drop_in(&mut self) -> bool {
        self.ins += 1;
        self.muted || self.every.is_some_and(|n| self.ins.is_multiple_of(n))
    }

    /// Sends `d` to `to`, unless it is the Nth.
    fn send(&mut self, sock: &UdpSocket, d: &[u8], to: std::net::SocketAddr, counts: &H3Counts) {
        self.outs += 1;
        if self.muted || self.every.is_some_and(|n| self.outs.is_multiple_of(n)) {
            counts.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let _ = sock.send_to(d, to);
    }
}

/// A connection's application events: streams accepted and read, requests
/// answered (or reset, or rejected after GOAWAY).
fn drive(c: &mut Conn, opts: &H3Options, counts: &H3Counts, seen: &mut u64) {
    for _ in 0..100_000 {
        let Some(ev) = c.conn.poll() else { break };
        match ev {
            Event::Connected => {
                if let Some(sid) = c.conn.streams().open(Dir::Uni) {
                    // Control stream type 0x00, an empty SETTINGS frame.
                    let _ = c.conn.send_stream(sid).write(&[0x00, 0x04, 0x00]);
                    c.control = Some(sid);
                }
            }
            Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                while let Some(sid) = c.conn.streams().accept(Dir::Bi) {
                    if c.conn.is_handshaking() {
                        counts.early_requests.fetch_add(1, Ordering::Relaxed);
                    }
                    c.reqs.insert(sid, Req::default());
                    read_req(c, sid, opts, counts, seen);
                }
            }
            Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                // The client's control stream: read and dropped.
                while c.conn.streams().accept(Dir::Uni).is_some() {}
            }
            Event::Stream(StreamEvent::Readable { id }) if id.dir() == Dir::Bi => {
                read_req(c, id, opts, counts, seen)
            }
            Event::Stream(StreamEvent::Readable { id }) => {
                if let Ok(mut ch) = c.conn.recv_stream(id).read(true) {
                    while let Ok(Some(_)) = ch.next(usize::MAX) {}
                    let _ = ch.finalize();
                }
            }
            _ => {}
        }
    }
}

/// Reads request stream `sid`; at its FIN, answers it.
fn read_req(c: &mut Conn, sid: StreamId, opts: &H3Options, counts: &H3Counts, seen: &mut u64) {
    let mut fin = false;
    {
        let Some(req) = c.reqs.get_mut(&sid) else {
            return;
        };
        let mut recv = c.conn.recv_stream(sid);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        for _ in 0..100_000 {
            match chunks.next(usize::MAX) {
                Ok(Some(ch)) => req.bytes.extend_from_slice(&ch.bytes),
                Ok(None) => {
                    fin = true;
                    break;
                }
                Err(_) => break,
            }
        }
        let _ = chunks.finalize();
    }
    if !fin {
        return;
    }
    let req = c.reqs.remove(&sid).unwrap_or_default();
    let (headers, body) = frames(&req.bytes);
    counts.body_bytes.fetch_add(body, Ordering::Relaxed);
    if !headers {
        return reset(c, sid, 0x10e); // H3_MESSAGE_ERROR
    }
    if !opts.delay.is_zero() {
        c.held.push((Instant::now() + opts.delay, sid));
        counts
            .max_open
            .fetch_max(c.held.len() as u64, Ordering::Relaxed);
        return;
    }
    answer(c, sid, opts, counts, seen);
}

/// Answers request `sid` (or resets or rejects it, as `opts` says).
fn answer(c: &mut Conn, sid: StreamId, opts: &H3Options, counts: &H3Counts, seen: &mut u64) {
    let id = u64::from(sid);
    if c.goaway.is_some_and(|g| id >= g) {
        counts.rejected.fetch_add(1, Ordering::Relaxed);
        return reset(c, sid, 0x10b);
    }
    *seen += 1;
    if let Some((n, code)) = opts.reset_every {
        if n > 0 && (*seen).is_multiple_of(n) {
            counts.resets.fetch_add(1, Ordering::Relaxed);
            return reset(c, sid, code as u32);
        }
    }
    let mut out = response_head(opts.body.len(), opts.html);
    out.push(0x00); // DATA
    varint(&mut out, opts.body.len() as u64);
    out.extend_from_slice(&opts.body);
    let mut send = c.conn.send_stream(sid);
    let mut data: [bytes::Bytes; 1] = [bytes::Bytes::from(out)];
    let _ = send.write_chunks(&mut data);
    let _ = send.finish();
    counts.answered.fetch_add(1, Ordering::Relaxed);
    c.served += 1;
    if opts.goaway_after.is_some_and(|k| c.served == k) && c.goaway.is_none() {
        // The next client stream id after the highest one seen is rejected.
        let next = id + 4;
        c.goaway = Some(next);
        if let Some(ctl) = c.control {
            let mut f = vec![0x07];
            let mut v = Vec::new();
            varint(&mut v, next);
            varint(&mut f, v.len() as u64);
            f.extend_from_slice(&v);
            let _ = c.conn.send_stream(ctl).write(&f);
            counts.goaways.fetch_add(1, Ordering::Relaxed);
        }
        // Streams already received above it are rejected at once.
        let above: Vec<StreamId> = c
            .reqs
            .keys()
            .copied()
            .chain(c.held.iter().map(|h| h.1))
            .filter(|s| u64::from(*s) >= next)
            .collect();
        for s in above {
            c.reqs.remove(&s);
            c.held.retain(|h| h.1 != s);
            counts.rejected.fetch_add(1, Ordering::Relaxed);
            reset(c, s, 0x10b);
        }
    }
}

fn reset(c: &mut Conn, sid: StreamId, code: u32) {
    let _ = c.conn.send_stream(sid).reset(VarInt::from_u32(code));
    let _ = c.conn.recv_stream(sid).stop(VarInt::from_u32(code));
}

/// A response head for a body of `len` bytes: `:status 200` (static 25),
/// `content-length` (static 4, literal value) and `server` (static 92,
/// a two-byte index), with `html` `content-type: text/html; charset=utf-8`
/// (static 52), QPACK prefix 0, 0.
fn response_head(len: usize, html: bool) -> Vec<u8> {
    let cl = len.to_string();
    let server = b"redline-testkit";
    let mut section = vec![0x00, 0x00, 0xc0 | 25, 0x50 | 4, cl.len() as u8];
    section.extend_from_slice(cl.as_bytes());
    section.extend_from_slice(&[0x50 | 0x0f, 92 - 15, server.len() as u8]);
    section.extend_from_slice(server);
    if html {
        section.push(0xc0 | 52);
    }
    let mut out = vec![0x01];
    varint(&mut out, section.len() as u64);
    out.extend_from_slice(&section);
    out
}

/// Reads a request's frames: whether it had HEADERS, and its DATA bytes.
fn frames(b: &[u8]) -> (bool, u64) {
    let (mut at, mut headers, mut body) = (0, false, 0u64);
    for _ in 0..100_000 {
        let (Some(ty), Some(len)) = (get_varint(b, &mut at), get_varint(b, &mut at)) else {
            break;
        };
        match ty {
            0x01 => headers = true,
            0x00 => body += len,
            _ => {}
        }
        at += len as usize;
    }
    (headers, body)
}

fn varint(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=63 => out.push(v as u8),
        64..=16_383 => out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
        16_384..=1_073_741_823 => out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let first = *b.get(*at)?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(*at..*at + len)?;
    *at += len;
    Some(
        bytes[1..]
            .iter()
            .fold(u64::from(first & 0x3f), |v, &x| (v << 8) | u64::from(x)),
    )
}

/// A UDP socket on 127.0.0.1:0 that reads every datagram and answers none
/// (a QUIC handshake to it never finishes); stopped on drop.
pub struct Blackhole {
    /// Its port.
    pub port: u16,
    /// Datagrams it swallowed.
    pub swallowed: Arc<AtomicU64>,
    _thread: Stopper,
}

/// Starts a [`Blackhole`].
pub fn blackhole() -> Blackhole {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind UDP");
    let port = sock.local_addr().expect("local addr").port();
    let _ = sock.set_read_timeout(Some(Duration::from_millis(20)));
    let swallowed = Arc::new(AtomicU64::new(0));
    let count = swallowed.clone();
    Blackhole {
        port,
        swallowed,
        _thread: Stopper::spawn(move |stop| {
            let mut buf = [0u8; 2048];
            let end = Instant::now() + Duration::from_secs(600);
            while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                if sock.recv_from(&mut buf).is_ok() {
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
        }),
    }
}

/// A UDP port on 127.0.0.1 with nothing bound to it a moment ago (a
/// datagram to it gets ICMP port unreachable).
pub fn closed_udp_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind UDP");
    s.local_addr().expect("local addr").port()
}
