//! Test support for the mode tests (`core/tests.rs`): a socket-free network
//! under a real driver and a scripted in-memory server. A driver built
//! offline (`worker/wire_tests.rs`, `mux/wire_tests.rs`) opens no socket: its
//! connect is noted here ([`dialed`]) and the test's [`Net::serve`] accepts
//! or refuses it, carries the bytes its sessions write to the [`Server`],
//! and feeds the server's answer back through the driver's own read path.
//! The server speaks HTTP/1.1 (parsed request heads, `Content-Length`
//! answers), HTTP/2 (preface, SETTINGS, HPACK-decoded HEADERS; answers as
//! HEADERS with literal fields and DATA, RST_STREAM, GOAWAY) or HTTP/3 (a
//! `quinn-proto` server exchanging datagrams with the client's session,
//! `wire_tests/h3.rs`) and asks the test's script what to do with each
//! request. Made-up time: every `now` is the test's, QUIC's timers included.

mod h3;

use super::spec::WorkerSpec;
use super::{Core, Link};
use crate::control::Live;
use crate::http2::frame::{self, Head};
use crate::http2::hpack::{encoder, Decoder, Sink};
use crate::plan::{Load, Plan, PlanArgs};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

thread_local! {
    /// This test thread's drivers open no socket.
    static OFFLINE: Cell<bool> = const { Cell::new(false) };
    /// Connects the drivers started (their connection key and address),
    /// not yet seen by the server.
    static DIALED: RefCell<Vec<(u32, SocketAddr)>> = const { RefCell::new(Vec::new()) };
}

/// Whether this thread's drivers are offline; when so, notes the connect of
/// connection `key` to `addr` for the test's network.
pub(crate) fn dialed(key: u32, addr: SocketAddr) -> bool {
    if !OFFLINE.get() {
        return false;
    }
    DIALED.with_borrow_mut(|d| d.push((key, addr)));
    true
}

/// The connects started since the last call.
pub(crate) fn take_dialed() -> Vec<(u32, SocketAddr)> {
    DIALED.with_borrow_mut(std::mem::take)
}

/// A driver on the test's network: built offline for a plan and a worker
/// spec, it moves bytes between its sessions and the [`Server`] in
/// [`Net::serve`].
pub(crate) trait Net: Link + Sized {
    /// The protocol, as a test names it.
    const NAME: &'static str;
    /// Sets the plan's protocol flags.
    fn protocol(a: &mut PlanArgs);
    /// The driver offline, and its slots.
    fn build(plan: &Plan, spec: &WorkerSpec) -> (Self, usize);
    /// The network's pass at `now`: connects accepted or refused, requests
    /// carried to the server, its answers read back, closes seen.
    fn serve(&mut self, core: &mut Core<'_>, srv: &mut Server, now: Instant);
}

/// Builds the drivers offline from here on, on this thread.
pub(crate) fn go_offline() {
    OFFLINE.set(true);
}

/// A plan for `http://127.0.0.1:9/` on `N`'s protocol, one worker thread,
/// a fixed seed (the same draws every run).
pub(crate) fn plan<N: Net>(f: impl FnOnce(&mut PlanArgs)) -> Plan {
    let mut a = PlanArgs::new("http://127.0.0.1:9/");
    a.threads = Some(1);
    a.seed = Some(31);
    N::protocol(&mut a);
    f(&mut a);
    Plan::build(a).expect("plan")
}

/// The one worker's spec of `plan`, as `run::execute` makes it for a run of
/// one thread started at `start`.
pub(crate) fn spec(plan: &Plan, start: Instant, journey_ages: &[Duration]) -> WorkerSpec {
    let (budget, duration) = match &plan.load {
        Load::Closed {
            requests, duration, ..
        } => (*requests, *duration),
        Load::Open { duration, .. } => (None, *duration),
    };
    let (pacer, levels) = crate::run::worker_load(plan, 0, 1);
    WorkerSpec {
        index: 0,
        first_vu: 0,
        start,
        connections: plan.load.max_connections(),
        budget,
        deadline: duration.map(|d| start + d),
        pacer,
        stop: Arc::new(AtomicBool::new(false)),
        live: Arc::new(Live {
            journey_ages: journey_ages.to_vec(),
            ..Live::default()
        }),
        levels,
    }
}

/// One request as the server read it.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    /// The server's connection it came on (numbered from 0 in accept order).
    pub(crate) conn: u32,
    /// Its place on that connection (from 0).
    pub(crate) nth: u32,
    /// Its HTTP/2 or HTTP/3 (QUIC) stream (0 in HTTP/1.1).
    pub(crate) stream: u32,
    pub(crate) method: String,
    pub(crate) path: String,
    /// It asked to close the connection (`Connection: close`).
    pub(crate) close: bool,
    /// When the server read it.
    pub(crate) at: Instant,
    /// Where the connection went (the origin).
    pub(crate) addr: SocketAddr,
}

/// What the server does with a request (the test's script decides).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Answers with this status, a 10-byte body and, for a redirect, a `Location`.
    Answer(u16, Option<String>),
    /// Not now: asked again at the next pass.
    Wait,
    /// HTTP/2: RST_STREAM(REFUSED_STREAM), not processed. HTTP/3: the
    /// stream reset with H3_REQUEST_REJECTED. HTTP/1.1: closes the connection.
    Refuse,
    /// HTTP/2: GOAWAY naming the stream before this one (this one and
    /// later ones not processed), then the connection closes. HTTP/3:
    /// GOAWAY naming this stream (the same), the connection left to the
    /// client. HTTP/1.1: closes it.
    GoAway,
    /// Closes the connection without an answer (HTTP/3: CONNECTION_CLOSE
    /// with H3_NO_ERROR).
    Close,
    /// HTTP/3: the server loses the connection's state without a word, so
    /// the client's next datagrams meet a stateless reset. HTTP/1.1 and
    /// HTTP/2: closes the connection.
    Reset,
}

/// What the server does with a connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Connects {
    Accept,
    Refuse,
    /// Never finishes (the driver's connect time-out ends it; QUIC: the
    /// handshake's datagrams go nowhere).
    Hang,
}

/// The answer's body.
const BODY: &[u8] = b"0123456789";

/// A test's server: every connection the drivers make, the requests read,
/// and the script that answers them.
pub(crate) struct Server {
    pub(crate) connects: Connects,
    /// Connects after the first this many hang.
    pub(crate) accept_only: Option<u32>,
    /// HTTP/2: SETTINGS_MAX_CONCURRENT_STREAMS; HTTP/3: QUIC's
    /// initial_max_streams_bidi.
    pub(crate) max_streams: Option<u32>,
    #[allow(clippy::type_complexity)]
    script: Box<dyn FnMut(&Req, Instant) -> Reply>,
    /// Every request read, in order.
    pub(crate) seen: Vec<Req>,
    /// Connects accepted and refused (or left hanging).
    pub(crate) accepted: u32,
    pub(crate) refused: u32,
    /// The most connections open at once.
    pub(crate) most_open: usize,
    /// The most requests waiting for their answer on one connection.
    pub(crate) most_waiting: usize,
    /// HTTP/2: streams refused over `max_streams`.
    pub(crate) refused_streams: u32,
    /// HTTP/3: every this many datagrams (either way) one is lost.
    pub(crate) drop_every: Option<u32>,
    /// HTTP/3: datagrams lost so far (of those carried).
    pub(crate) dropped: u32,
    carried: u32,
    /// HTTP/3: the path went dark: no datagram reaches the server or
    /// comes from it.
    pub(crate) dark: bool,
    /// HTTP/3: a resumed connection may send requests in 0-RTT.
    pub(crate) early_data: bool,
    /// HTTP/3: requests whose stream came before the handshake completed.
    pub(crate) early_requests: u32,
    /// HTTP/3: the server's TLS (its session store), made at the first connect.
    tls: Option<Arc<quinn_proto::crypto::rustls::QuicServerConfig>>,
    peers: HashMap<u32, Peer>,
}

/// The server's side of one connection.
struct Peer {
    conn: u32,
    addr: SocketAddr,
    h2: bool,
    /// Bytes read and not parsed yet.
    inbuf: Vec<u8>,
    /// HTTP/2: the client's preface was read.
    started: bool,
    decoder: Decoder,
    /// HTTP/2: the SETTINGS_MAX_CONCURRENT_STREAMS it advertised.
    max_streams: Option<u32>,
    /// HTTP/2: streams refused over that cap.
    refused_streams: u32,
    /// HTTP/2: streams whose HEADERS came without END_STREAM (a body follows).
    open: HashMap<u32, Req>,
    /// Requests read, not answered yet, oldest first.
    waiting: Vec<Req>,
    nth: u32,
    out: Vec<u8>,
    /// HTTP/3: the QUIC connection's server side (datagrams, not `inbuf`/`out`).
    quic: Option<Box<h3::Quic>>,
}

impl Server {
    /// A server that answers every request as `script` says (asked again
    /// at every pass while it says [`Reply::Wait`]).
    pub(crate) fn new(script: impl FnMut(&Req, Instant) -> Reply + 'static) -> Server {
        Server {
            connects: Connects::Accept,
            accept_only: None,
            max_streams: None,
            script: Box::new(script),
            seen: Vec::new(),
            accepted: 0,
            refused: 0,
            most_open: 0,
            most_waiting: 0,
            refused_streams: 0,
            drop_every: None,
            dropped: 0,
            carried: 0,
            dark: false,
            early_data: false,
            early_requests: 0,
            tls: None,
            peers: HashMap::new(),
        }
    }

    /// A server that answers every request at once with `status`.
    pub(crate) fn answering(status: u16) -> Server {
        Server::new(move |_, _| Reply::Answer(status, None))
    }

    /// A connect of the driver's connection `key` to `addr`: accepted (its
    /// HTTP/2 SETTINGS are then waiting to be read), refused or left hanging.
    pub(crate) fn accept(&mut self, key: u32, addr: SocketAddr, h2: bool) -> Connects {
        self.admit(key, addr, h2, None)
    }

    /// A QUIC connect of the driver's connection `key` to `addr`: accepted
    /// (its server side made: datagrams go through
    /// [`Server::exchange_datagrams`]), refused (ICMP port unreachable) or
    /// left hanging (its datagrams go nowhere).
    pub(crate) fn accept_quic(&mut self, key: u32, addr: SocketAddr) -> Connects {
        let early = self.early_data;
        let tls = self.tls.get_or_insert_with(|| h3::crypto(early)).clone();
        let quic = Box::new(h3::Quic::new(tls, self.max_streams));
        self.admit(key, addr, false, Some(quic))
    }

    fn admit(
        &mut self,
        key: u32,
        addr: SocketAddr,
        h2: bool,
        quic: Option<Box<h3::Quic>>,
    ) -> Connects {
        self.peers.remove(&key);
        let how = match self.accept_only {
            Some(n) if self.accepted >= n => Connects::Hang,
            _ => self.connects,
        };
        if how != Connects::Accept {
            self.refused += 1;
            return how;
        }
        let mut out = Vec::new();
        if h2 {
            let pairs: Vec<(u16, u32)> = self
                .max_streams
                .map(|n| (frame::SETTINGS_MAX_CONCURRENT_STREAMS, n))
                .into_iter()
                .collect();
            frame::write_settings(&mut out, &pairs);
        }
        self.peers.insert(
            key,
            Peer {
                conn: self.accepted,
                addr,
                h2,
                inbuf: Vec::new(),
                started: false,
                decoder: Decoder::new(4096),
                max_streams: self.max_streams,
                refused_streams: 0,
                open: HashMap::new(),
                waiting: Vec::new(),
                nth: 0,
                out,
                quic,
            },
        );
        self.accepted += 1;
        self.most_open = self.most_open.max(self.peers.len());
        Connects::Accept
    }

    /// Whether the driver's connection `key` is open at the server.
    pub(crate) fn has(&self, key: u32) -> bool {
        self.peers.contains_key(&key)
    }

    /// The driver closed connection `key`.
    pub(crate) fn closed(&mut self, key: u32) {
        self.peers.remove(&key);
    }

    /// Connection `key` carried `bytes` from the client at `now`; the
    /// server's answers to what it read so far (its script), and whether it
    /// then closes the connection.
    pub(crate) fn exchange(&mut self, key: u32, bytes: &[u8], now: Instant) -> (Vec<u8>, bool) {
        let Some(p) = self.peers.get_mut(&key) else {
            return (Vec::new(), false);
        };
        p.inbuf.extend_from_slice(bytes);
        let before = p.refused_streams;
        let read = if p.h2 { p.read_h2(now) } else { p.read_h1(now) };
        self.refused_streams += p.refused_streams - before;
        self.seen.extend(read);
        let close = self.reply(key, now);
        let out = self
            .peers
            .get_mut(&key)
            .map(|p| std::mem::take(&mut p.out))
            .unwrap_or_default();
        if close {
            self.peers.remove(&key);
        }
        (out, close)
    }

    /// QUIC connection `key` carried `datagrams` from the client at `now`
    /// (maybe none: the server's timers and script run at every pass); the
    /// server's datagrams back, and whether it then closed the connection.
    pub(crate) fn exchange_datagrams(
        &mut self,
        key: u32,
        datagrams: &[Vec<u8>],
        now: Instant,
    ) -> (Vec<Vec<u8>>, bool) {
        if self.dark || self.peers.get(&key).is_none_or(|p| p.quic.is_none()) {
            return (Vec::new(), false);
        }
        let datagrams: Vec<Vec<u8>> = datagrams.iter().filter(|_| self.carry()).cloned().collect();
        let p = self.peers.get_mut(&key).expect("peer");
        let q = p.quic.as_mut().expect("QUIC");
        let read = q.datagrams_in(&datagrams, now);
        self.early_requests += std::mem::take(&mut q.early);
        // Requests the client gave up (its time-out) are not answered.
        let gone = q.take_gone();
        p.waiting.retain(|r| !gone.contains(&r.stream));
        for (stream, f) in read {
            let r = p.req(stream, f, now);
            p.waiting.push(r.clone());
            self.seen.push(r);
        }
        let close = self.reply(key, now);
        let p = self.peers.get_mut(&key).expect("peer");
        let out = p.quic.as_mut().map(|q| q.datagrams_out(now));
        if close {
            self.peers.remove(&key);
        }
        let out = out.unwrap_or_default().into_iter();
        (out.filter(|_| self.carry()).collect(), close)
    }

    /// Whether the next datagram gets through ([`Server::drop_every`]).
    fn carry(&mut self) -> bool {
        self.carried += 1;
        let lost = self
            .drop_every
            .is_some_and(|n| self.carried.is_multiple_of(n));
        self.dropped += u32::from(lost);
        !lost
    }

    /// The script's replies to the requests connection `key` read and has
    /// not answered (asked again at the next pass when it says
    /// [`Reply::Wait`]); true when the server then closes the connection.
    fn reply(&mut self, key: u32, now: Instant) -> bool {
        let Some(p) = self.peers.get_mut(&key) else {
            return false;
        };
        self.most_waiting = self.most_waiting.max(p.waiting.len());
        let mut close = false;
        let mut k = 0;
        while k < p.waiting.len() && !close {
            let reply = (self.script)(&p.waiting[k], now);
            if reply == Reply::Wait {
                k += 1;
                continue;
            }
            let r = p.waiting.remove(k);
            close = p.answer(&r, reply, now);
        }
        close
    }

    /// The requests read whose path is `path`.
    pub(crate) fn count(&self, path: &str) -> usize {
        self.seen.iter().filter(|r| r.path == path).count()
    }
}

/// Collects a request's pseudo-headers and `Connection`.
#[derive(Default)]
struct Fields {
    method: String,
    path: String,
    close: bool,
}

impl Sink for Fields {
    fn wants(&mut self, _name: &[u8]) -> bool {
        true
    }
    fn field(&mut self, name: &[u8], value: Option<&[u8]>) {
        let v = String::from_utf8_lossy(value.unwrap_or_default()).into_owned();
        match name {
            b":method" => self.method = v,
            b":path" => self.path = v,
            _ => {}
        }
    }
}

impl Peer {
    /// HTTP/2: streams open (read, not answered).
    fn streams(&self) -> usize {
        self.waiting.len() + self.open.len()
    }

    fn req(&mut self, stream: u32, f: Fields, now: Instant) -> Req {
        self.nth += 1;
        Req {
            conn: self.conn,
            nth: self.nth - 1,
            stream,
            method: f.method,
            path: f.path,
            close: f.close,
            at: now,
            addr: self.addr,
        }
    }

    /// HTTP/1.1: the request heads in `inbuf` (bodies by `Content-Length` skipped).
    fn read_h1(&mut self, now: Instant) -> Vec<Req> {
        let mut got = Vec::new();
        for _ in 0..10_000 {
            let Some(end) = self.inbuf.windows(4).position(|w| w == b"\r\n\r\n") else {
                break;
            };
            let head = String::from_utf8_lossy(&self.inbuf[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let mut first = lines.next().unwrap_or("").split(' ');
            let mut f = Fields {
                method: first.next().unwrap_or("").to_string(),
                path: first.next().unwrap_or("").to_string(),
                close: false,
            };
            let mut body = 0;
            for l in lines {
                let (k, v) = l.split_once(':').unwrap_or((l, ""));
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                if k == "connection" && v.eq_ignore_ascii_case("close") {
                    f.close = true;
                }
                if k == "content-length" {
                    body = v.parse().unwrap_or(0);
                }
            }
            if self.inbuf.len() < end + 4 + body {
                break;
            }
            self.inbuf.drain(..end + 4 + body);
            let r = self.req(0, f, now);
            self.waiting.push(r.clone());
            got.push(r);
        }
        got
    }

    /// HTTP/2: the preface, then whole frames in `inbuf`.
    fn read_h2(&mut self, now: Instant) -> Vec<Req> {
        let mut got = Vec::new();
        if !self.started {
            if self.inbuf.len() < frame::PREFACE.len() {
                return got;
            }
            assert!(self.inbuf.starts_with(frame::PREFACE), "no client preface");
            self.inbuf.drain(..frame::PREFACE.len());
            self.started = true;
        }
        while self.inbuf.len() >= 9 {
            let h = Head::parse(&self.inbuf);
            let end = 9 + h.len as usize;
            if self.inbuf.len() < end {
                break;
            }
            let payload: Vec<u8> = self.inbuf[9..end].to_vec();
            self.inbuf.drain(..end);
            match h.kind {
                frame::SETTINGS if h.flags & frame::ACK == 0 => {
                    frame::write_head(&mut self.out, 0, frame::SETTINGS, frame::ACK, 0);
                }
                frame::HEADERS => {
                    assert!(
                        h.flags & frame::END_HEADERS != 0,
                        "CONTINUATION not expected"
                    );
                    let block = frame::unpad(h.flags, &payload).expect("padding");
                    let block = if h.flags & frame::PRIORITY_FLAG != 0 {
                        &block[5..]
                    } else {
                        block
                    };
                    let mut f = Fields::default();
                    self.decoder.decode(block, &mut f).expect("HPACK");
                    if self
                        .max_streams
                        .is_some_and(|n| self.streams() >= n as usize)
                    {
                        // Over the cap it advertised (the client sent it before
                        // reading the SETTINGS): refused, as nginx does.
                        frame::write_rst(&mut self.out, h.stream, frame::REFUSED_STREAM);
                        self.refused_streams += 1;
                        continue;
                    }
                    let r = self.req(h.stream, f, now);
                    if h.flags & frame::END_STREAM != 0 {
                        self.waiting.push(r.clone());
                        got.push(r);
                    } else {
                        self.open.insert(h.stream, r);
                    }
                }
                frame::DATA if h.flags & frame::END_STREAM != 0 => {
                    if let Some(r) = self.open.remove(&h.stream) {
                        self.waiting.push(r.clone());
                        got.push(r);
                    }
                }
                frame::RST_STREAM => {
                    // The client gave up on it (its time-out).
                    self.waiting.retain(|r| r.stream != h.stream);
                    self.open.remove(&h.stream);
                }
                _ => {} // WINDOW_UPDATE, PING, PRIORITY, GOAWAY, SETTINGS ACK
            }
        }
        got
    }

    /// Writes `reply` to `r`; true when the connection then closes.
    fn answer(&mut self, r: &Req, reply: Reply, now: Instant) -> bool {
        if let Some(q) = self.quic.as_mut() {
            if reply == Reply::GoAway {
                // The requests at or above the stream GOAWAY names are not
                // processed.
                self.waiting.retain(|w| w.stream < r.stream);
            }
            return q.answer(r.stream, reply, now);
        }
        match (reply, self.h2) {
            (Reply::Answer(status, location), false) => {
                let mut head = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n", BODY.len());
                if let Some(l) = location {
                    head.push_str(&format!("Location: {l}\r\n"));
                }
                if r.close {
                    head.push_str("Connection: close\r\n");
                }
                head.push_str("\r\n");
                self.out.extend_from_slice(head.as_bytes());
                self.out.extend_from_slice(BODY);
                r.close
            }
            (Reply::Answer(status, location), true) => {
                let mut block = Vec::new();
                encoder::field(&mut block, ":status", &status.to_string());
                if let Some(l) = location {
                    encoder::field(&mut block, "location", &l);
                }
                encoder::field(&mut block, "content-length", &BODY.len().to_string());
                frame::write_head(
                    &mut self.out,
                    block.len(),
                    frame::HEADERS,
                    frame::END_HEADERS,
                    r.stream,
                );
                self.out.extend_from_slice(&block);
                frame::write_head(
                    &mut self.out,
                    BODY.len(),
                    frame::DATA,
                    frame::END_STREAM,
                    r.stream,
                );
                self.out.extend_from_slice(BODY);
                false
            }
            (Reply::Refuse, true) => {
                frame::write_rst(&mut self.out, r.stream, frame::REFUSED_STREAM);
                false
            }
            (Reply::GoAway, true) => {
                frame::write_head(&mut self.out, 8, frame::GOAWAY, 0, 0);
                let last = r.stream.saturating_sub(2);
                self.out.extend_from_slice(&last.to_be_bytes());
                self.out.extend_from_slice(&frame::NO_ERROR.to_be_bytes());
                true
            }
            (Reply::Wait, _) => false,
            (Reply::Refuse | Reply::GoAway | Reply::Close | Reply::Reset, _) => true,
        }
    }
}
