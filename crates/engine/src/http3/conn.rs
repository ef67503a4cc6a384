//! [`Http3Session`]: one HTTP/3 client connection (RFC 9114) over a QUIC
//! connection of `quinn-proto` (RFC 9000), behind the sans-IO [`Session`]
//! seam. Its "bytes" are UDP datagrams: [`Http3Session::datagram_in`] takes
//! one read from the connection's connected UDP socket (and
//! [`Http3Session::datagrams_done`] processes a batch's events once),
//! [`Http3Session::next_datagrams`] builds what is to be sent when the driver
//! sends (the requests of a whole pass in the same datagrams; several
//! equal-size datagrams for one GSO send; a session not made
//! [`Http3Session::batched`] queues them one by one for
//! [`Session::pending_out`] instead), and the QUIC timers (loss
//! detection, acknowledgements, idle) are [`Http3Session::deadline`] and
//! [`Http3Session::on_timeout`]. It reads no clock: the calls that move
//! QUIC take the driver's time (`new`, `datagram_in`, `on_timeout`,
//! `next_datagrams`), and those of the [`Session`] trait that carry none
//! (`bytes_in`, `consume_out`, `submit`, `close`) use the latest time the
//! driver gave, through those or [`Session::set_time`], so a test's made-up
//! time reaches QUIC's timers. A session made with [`Http3Session::new`]
//! has its own `quinn-proto` endpoint (one connection, driven alone: the
//! page loader and the offline tests); one made with
//! [`Http3Session::on_endpoint`] shares its caller's (the driver's: one UDP
//! socket and one endpoint per worker, which routes each datagram to its
//! connection, [`Http3Session::conn_event`], and takes what the connection
//! has for it, [`Http3Session::endpoint_events`]).
//!
//! On top of QUIC's streams: the client's control stream (type 0x00 and
//! SETTINGS: no QPACK dynamic table, no blocked streams, the field section
//! limit), the server's unidirectional streams accepted and read (its
//! control stream for SETTINGS and GOAWAY; QPACK encoder and decoder streams
//! and unknown types read and dropped), one bidirectional stream per
//! request (HEADERS, then DATA, then FIN), answers read frame by frame
//! (`frame.rs`) and decoded with the static-table QPACK (`qpack.rs`) into the
//! same head sink as HTTP/2's (only `:status`, `content-length` and what
//! [`Want`] asks). Errors: a reset stream is `stream_reset` with its HTTP/3
//! code (H3_REQUEST_REJECTED: unprocessed), GOAWAY fails the requests at or
//! above its stream id as `goaway` and unprocessed, and the connection's end
//! maps QUIC's reasons onto error kinds (idle time-out, stateless reset,
//! version negotiation, TLS alerts, the peer's close). Reading the streams
//! (answers, the control stream) and the error words are in `conn/recv.rs`.

mod recv;

use super::frame::{self, FrameReader};
use super::request::Http3Request;
use crate::session::{Answer, Event, RequestId, Session, SubmitError, Want};
use bytes::{Bytes, BytesMut};
use quinn_proto::{
    ClientConfig, ConnectionError, ConnectionEvent, ConnectionHandle, DatagramEvent, Dir, Endpoint,
    EndpointConfig, EndpointEvent, StreamEvent, StreamId, VarInt,
};
pub(super) use recv::{answer_bytes, control_bytes};
use recv::{drain, lost_kind, reset_message, Drained};
use redline_stats::{ErrorKind, MalformedKind};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The field section limit the client advertises and enforces
/// (SETTINGS_MAX_FIELD_SECTION_SIZE): HTTP/2's header list limit.
pub const MAX_FIELD_SECTION: u64 = crate::http2::conn::MAX_HEADER_LIST as u64;
/// The most requests one session keeps open, whatever the server allows.
const MAX_OPEN: usize = 4096;
/// Datagrams in are copied into chunks of this size, one after the other
/// (`quinn-proto` takes each as an owned `BytesMut` and keeps views of it
/// for stream data): one allocation per chunk, not per datagram.
const RX_CHUNK: usize = 64 * 1024;
/// Datagrams queued for `pending_out` before the session waits for the
/// caller to send them (without `batched`).
const OUT_QUEUE: usize = 64;

/// What every HTTP/3 connection of a run shares: QUIC's client and
/// endpoint configurations (TLS 1.3 with ALPN `h3`).
pub struct Http3Config {
    client: ClientConfig,
    endpoint: Arc<EndpointConfig>,
}

impl Http3Config {
    /// From the run's TLS configuration (its verification, `--cacert`,
    /// `--insecure`, client certificate), offering ALPN `h3` only.
    pub fn new(tls: &rustls::ClientConfig) -> Result<Http3Config, String> {
        let mut tls = tls.clone();
        tls.alpn_protocols = vec![b"h3".to_vec()];
        // 0-RTT: a connection resuming with a ticket that allows early
        // data sends its safe requests at once ([`Http3Request::early`]).
        // The run's QUIC connections share one session cache of their own
        // (TCP's tickets, e.g. an Alt-Svc probe's, are not offered over
        // QUIC): a connection after the first ones resumes with a ticket an
        // earlier one got.
        tls.enable_early_data = true;
        tls.resumption = rustls::client::Resumption::in_memory_sessions(1024);
        let crypto = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls)
            .map_err(|e| format!("TLS cannot carry QUIC: {e}"))?;
        let mut client = ClientConfig::new(Arc::new(crypto));
        let mut transport = quinn_proto::TransportConfig::default();
        // The server opens no request streams; its control and QPACK
        // streams (and a few greasing ones) are all it may open.
        transport.max_concurrent_bidi_streams(VarInt::from_u32(0));
        transport.max_concurrent_uni_streams(VarInt::from_u32(16));
        transport.max_idle_timeout(Some(
            Duration::from_secs(30)
                .try_into()
                .map_err(|_| "idle time-out".to_string())?,
        ));
        // GSO: `next_datagrams` may build several equal-size datagrams
        // for one send where the driver's socket can (`mux/udp.rs`).
        transport.enable_segmentation_offload(true);
        client.transport_config(Arc::new(transport));
        Ok(Http3Config {
            client,
            endpoint: Arc::new(EndpointConfig::default()),
        })
    }

    /// A QUIC endpoint for sessions to share ([`Http3Session::on_endpoint`]).
    pub fn endpoint(&self) -> Endpoint {
        Endpoint::new(self.endpoint.clone(), None, false, None)
    }
}

/// One request's stream.
pub(super) struct Stream {
    sid: StreamId,
    id: RequestId,
    want: Want,
    head_request: bool,
    /// The request's bytes still to write (HEADERS frame, DATA header, body).
    out: [Bytes; 3],
    /// FIN sent.
    finished: bool,
    /// Submitted before the handshake completed: the request's bytes as
    /// submitted (written again if the server rejects 0-RTT), and whether
    /// they wait for the handshake (not safe for early data).
    early: Option<([Bytes; 3], bool)>,
    frames: FrameReader,
    /// The HEADERS payload gathered so far.
    section: Vec<u8>,
    /// The final status, 0 before the final head.
    status: u16,
    /// The current frame is a HEADERS frame after the final head (trailers).
    trailers: bool,
    content_length: Option<u64>,
    body_bytes: u64,
    answer: Option<Box<Answer>>,
}

/// One of the server's unidirectional streams.
pub(super) struct Uni {
    sid: StreamId,
    /// Its type, once its first varint arrived.
    ty: Option<u64>,
    /// Bytes of the type varint or of a control frame being gathered.
    buf: Vec<u8>,
    frames: FrameReader,
}

impl Stream {
    /// A stream slot (reused through the session's pool).
    pub(super) fn new(sid: StreamId) -> Stream {
        Stream {
            sid,
            id: 0,
            want: Want::NOTHING,
            head_request: false,
            out: Default::default(),
            finished: false,
            early: None,
            frames: FrameReader::default(),
            section: Vec::new(),
            status: 0,
            trailers: false,
            content_length: None,
            body_bytes: 0,
            answer: None,
        }
    }

    /// Starts request `id` on stream `sid` (its section buffer kept).
    pub(super) fn start(&mut self, sid: StreamId, id: RequestId, want: Want, head: bool) {
        let section = std::mem::take(&mut self.section);
        *self = Stream {
            id,
            want,
            head_request: head,
            section,
            ..Stream::new(sid)
        };
    }

    /// The final status so far (0: none yet) and the body bytes.
    #[cfg(test)]
    pub(super) fn progress(&self) -> (u16, u64) {
        (self.status, self.body_bytes)
    }
}

impl Uni {
    /// A server's unidirectional stream whose type is not read yet.
    pub(super) fn new(sid: StreamId) -> Uni {
        Uni {
            sid,
            ty: None,
            buf: Vec::new(),
            frames: FrameReader::default(),
        }
    }
}

/// Datagrams to send ([`Http3Session::next_datagrams`]).
pub struct Datagrams<'a> {
    /// One datagram, or several of `segment` bytes each (GSO).
    pub bytes: &'a [u8],
    pub segment: Option<usize>,
    /// ECN bits to mark them with.
    pub ecn: Option<u8>,
    /// The server.
    pub to: SocketAddr,
}

/// An HTTP/3 client connection over QUIC without I/O (see the top of this file).
pub struct Http3Session {
    /// Its own endpoint ([`Http3Session::new`]), or none when it shares
    /// its caller's ([`Http3Session::on_endpoint`]): then what the
    /// connection has for the endpoint waits in `for_endpoint` until the
    /// caller hands it over ([`Http3Session::endpoint_events`]).
    endpoint: Option<Endpoint>,
    for_endpoint: Vec<EndpointEvent>,
    /// The shared endpoint forgot the connection (Drained went to it).
    released: bool,
    ch: ConnectionHandle,
    conn: quinn_proto::Connection,
    remote: SocketAddr,
    /// Datagrams to send before anything else, oldest first: the
    /// endpoint's own answers (rare), and without `batched` every datagram
    /// (the [`Session`] way: `pending_out`, `consume_out`).
    out: VecDeque<Vec<u8>>,
    /// The driver builds datagrams when it sends (`next_datagrams`), so
    /// `pump` queues none ([`Http3Session::batched`]).
    batched: bool,
    /// Datagrams built and not sent yet (the socket refused them for now).
    tx: Vec<u8>,
    /// What `tx` holds, while it holds something: its segment size (GSO)
    /// and ECN bits.
    tx_meta: Option<(Option<usize>, Option<u8>)>,
    scratch: Vec<u8>,
    /// The chunk datagrams in are copied into ([`RX_CHUNK`]).
    rx: BytesMut,
    streams: Vec<Stream>,
    pool: Vec<Stream>,
    uni: Vec<Uni>,
    next_id: RequestId,
    events: VecDeque<Event>,
    /// The handshake completed.
    established: bool,
    /// The handshake checked the server's certificate (a full one: a
    /// resumed TLS 1.3 handshake gets none).
    full_handshake: bool,
    /// 0-RTT keys from a ticket: requests may go before the handshake ends.
    zero_rtt: bool,
    /// A request went in early data.
    early_sent: bool,
    /// The completed handshake is still to be told ([`Http3Session::handshake_done`]).
    untold: bool,
    /// The peer's stream limit was reached: no request until it grows.
    exhausted: bool,
    /// The server's GOAWAY: requests on streams at or above it were not processed.
    goaway: Option<u64>,
    /// The client's control stream and what it still has to write.
    control: Option<(StreamId, Bytes)>,
    /// Why the connection ended, once it did.
    lost: Option<(ErrorKind, Cow<'static, str>)>,
    /// The client closed it.
    closing: bool,
    /// The latest time the driver gave (never earlier than one before):
    /// the session reads no clock.
    now: Instant,
    name_buf: Vec<u8>,
    value_buf: Vec<u8>,
}

impl Http3Session {
    /// Starts a connection to `remote` (`server_name`: SNI and the
    /// certificate's name); its first datagrams are queued at once.
    pub fn new(
        cfg: &Http3Config,
        remote: SocketAddr,
        server_name: &str,
        now: Instant,
    ) -> Result<Http3Session, String> {
        let mut endpoint = cfg.endpoint();
        let mut s = Self::on_endpoint(cfg, &mut endpoint, remote, server_name, now)?;
        s.endpoint = Some(endpoint);
        s.pump();
        Ok(s)
    }

    /// Starts a connection on `endpoint`, which the caller keeps and
    /// shares with other sessions: it routes the connection's datagrams
    /// ([`Http3Session::handle`], [`Http3Session::conn_event`]), takes its
    /// events ([`Http3Session::endpoint_events`]) and is told when the
    /// session goes ([`Http3Session::release`]).
    pub fn on_endpoint(
        cfg: &Http3Config,
        endpoint: &mut Endpoint,
        remote: SocketAddr,
        server_name: &str,
        now: Instant,
    ) -> Result<Http3Session, String> {
        let (ch, conn) = endpoint
            .connect(now, cfg.client.clone(), remote, server_name)
            .map_err(|e| format!("QUIC connect: {e}"))?;
        let mut s = Http3Session {
            endpoint: None,
            for_endpoint: Vec::new(),
            released: false,
            ch,
            conn,
            remote,
            out: VecDeque::new(),
            batched: false,
            tx: Vec::with_capacity(2048),
            tx_meta: None,
            scratch: Vec::with_capacity(2048),
            rx: BytesMut::new(),
            streams: Vec::new(),
            pool: Vec::new(),
            uni: Vec::new(),
            next_id: 0,
            events: VecDeque::new(),
            established: false,
            full_handshake: false,
            zero_rtt: false,
            early_sent: false,
            untold: false,
            exhausted: false,
            goaway: None,
            control: None,
            lost: None,
            closing: false,
            now,
            name_buf: Vec::new(),
            value_buf: Vec::new(),
        };
        s.zero_rtt = s.conn.has_0rtt();
        if s.zero_rtt {
            // Early data: the control stream goes with the first requests.
            s.open_control();
        }
        s.pump();
        Ok(s)
    }

    /// Requests may be submitted before the handshake completes: the
    /// session resumed with a ticket that allows 0-RTT (safe requests go in
    /// early data, the others wait for the handshake inside the session).
    pub fn early(&self) -> bool {
        self.zero_rtt && !self.established && self.lost.is_none()
    }

    /// Once, after the handshake completed: (resumed a TLS session, early
    /// data: `None` none sent, else whether the server accepted it).
    pub fn handshake_done(&mut self) -> Option<(bool, Option<bool>)> {
        if !std::mem::take(&mut self.untold) {
            return None;
        }
        let early = self.early_sent.then(|| self.conn.accepted_0rtt());
        Some((self.resumed(), early))
    }

    /// The QUIC handshake completed (the connection takes requests).
    pub fn established(&self) -> bool {
        self.established
    }

    /// The handshake completed with a TLS session resumed from an earlier
    /// connection (no certificate was checked).
    pub fn resumed(&self) -> bool {
        self.established && !self.full_handshake
    }

    /// Why the connection ended (a handshake that failed, an idle
    /// time-out…), once it did.
    pub fn lost(&self) -> Option<&(ErrorKind, Cow<'static, str>)> {
        self.lost.as_ref()
    }

    /// When QUIC's next timer fires (loss detection, acknowledgement delay,
    /// idle time-out); [`Http3Session::on_timeout`] then.
    pub fn deadline(&mut self) -> Option<Instant> {
        self.conn.poll_timeout()
    }

    /// QUIC's timer fired.
    pub fn on_timeout(&mut self, now: Instant) {
        self.set_time(now);
        self.conn.handle_timeout(now);
        self.pump();
    }

    /// Takes no new request ever again (GOAWAY, closed), though requests
    /// out may still end.
    pub fn retiring(&self) -> bool {
        self.goaway.is_some() || self.is_closed()
    }

    /// The round-trip time QUIC measured.
    pub fn rtt(&self) -> Duration {
        self.conn.rtt()
    }

    /// One datagram from the server (`ecn`: its ECN bits, when the socket
    /// reads them); its events wait for [`Http3Session::datagrams_done`],
    /// so a batch of datagrams is processed once.
    pub fn datagram_in(&mut self, now: Instant, ecn: Option<u8>, data: &[u8]) {
        self.set_time(now);
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        if self.rx.capacity() < data.len() {
            self.rx = BytesMut::with_capacity(RX_CHUNK.max(data.len()));
        }
        self.rx.extend_from_slice(data);
        let datagram = self.rx.split();
        let ecn = ecn.and_then(quinn_proto::EcnCodepoint::from_bits);
        let Some(endpoint) = self.endpoint.as_mut() else {
            return; // a shared endpoint's caller routes datagrams (`conn_event`)
        };
        let ev = endpoint.handle(now, self.remote, None, ecn, datagram, &mut buf);
        match ev {
            Some(DatagramEvent::ConnectionEvent(_, ev)) => self.conn_event(ev),
            Some(DatagramEvent::Response(t)) => self.out.push_back(buf[..t.size].to_vec()),
            _ => {}
        }
        self.scratch = buf;
    }

    /// Its connection's handle on the endpoint (a shared endpoint's
    /// datagram events name it).
    pub fn handle(&self) -> ConnectionHandle {
        self.ch
    }

    /// One of the endpoint's events for this connection (a datagram the
    /// shared endpoint routed here); like [`Http3Session::datagram_in`], its
    /// events wait for [`Http3Session::datagrams_done`].
    pub fn conn_event(&mut self, ev: ConnectionEvent) {
        if self.established {
            return self.conn.handle_event(ev);
        }
        // rustls checks the certificate (if one comes) while this
        // datagram's CRYPTO frames are read, on this thread.
        let checked = crate::tls::certificates_checked();
        self.conn.handle_event(ev);
        self.full_handshake |= crate::tls::certificates_checked() != checked;
    }

    /// Hands what the connection has for the shared endpoint to it (new
    /// connection ids, reset tokens); its answers go back into the
    /// connection. Before building datagrams.
    pub fn endpoint_events(&mut self, endpoint: &mut Endpoint) {
        if self.for_endpoint.is_empty() {
            return;
        }
        for ev in std::mem::take(&mut self.for_endpoint) {
            self.released |= ev.is_drained();
            if let Some(back) = endpoint.handle_event(self.ch, ev) {
                self.conn.handle_event(back);
            }
        }
        self.pump();
    }

    /// The session goes: the shared endpoint forgets its connection (its
    /// handle may name another one after this). Nothing for a session with
    /// its own endpoint.
    pub fn release(&mut self, endpoint: &mut Endpoint) {
        if self.endpoint.is_some() {
            return;
        }
        for ev in std::mem::take(&mut self.for_endpoint) {
            self.released |= ev.is_drained();
            let _ = endpoint.handle_event(self.ch, ev);
        }
        if !std::mem::replace(&mut self.released, true) {
            let _ = endpoint.handle_event(self.ch, EndpointEvent::drained());
        }
    }

    /// Its own endpoint takes the connection's events at once.
    fn endpoint_events_own(&mut self) {
        let Some(endpoint) = self.endpoint.as_mut() else {
            return;
        };
        for ev in std::mem::take(&mut self.for_endpoint) {
            if let Some(back) = endpoint.handle_event(self.ch, ev) {
                self.conn.handle_event(back);
            }
        }
        for _ in 0..100_000 {
            let Some(ev) = self.conn.poll_endpoint_events() else {
                break;
            };
            if let Some(back) = endpoint.handle_event(self.ch, ev) {
                self.conn.handle_event(back);
            }
        }
    }

    /// The datagrams of a read are in: their events are processed.
    pub fn datagrams_done(&mut self) {
        self.pump();
    }

    /// What is to be sent next, built now if nothing waits: one datagram,
    /// or with `max` above 1 up to `max` datagrams of `segment` bytes each
    /// (the last may be shorter) for one GSO send. It stays until
    /// [`Http3Session::datagrams_sent`].
    pub fn next_datagrams(&mut self, now: Instant, max: usize) -> Option<Datagrams<'_>> {
        self.set_time(now);
        if self.tx_meta.is_none() {
            self.tx.clear();
            if let Some(d) = self.out.pop_front() {
                self.tx = d;
                self.tx_meta = Some((None, None));
            } else {
                let t = self.conn.poll_transmit(now, max.max(1), &mut self.tx)?;
                self.tx.truncate(t.size);
                self.tx_meta = Some((t.segment_size, t.ecn.map(|e| e as u8)));
            }
        }
        let (segment, ecn) = self.tx_meta?;
        Some(Datagrams {
            bytes: &self.tx,
            segment,
            ecn,
            to: self.remote,
        })
    }

    /// The datagrams [`Http3Session::next_datagrams`] gave went out (or
    /// are given up: QUIC sends their data again).
    pub fn datagrams_sent(&mut self) {
        self.tx_meta = None;
    }

    /// From now on datagrams are built only when the driver sends
    /// ([`Http3Session::next_datagrams`]: the requests of a pass share
    /// them, GSO batches), not queued one by one for `pending_out`.
    pub fn batched(&mut self) {
        self.batched = true;
    }

    /// Processes what QUIC has for the endpoint and the application; then,
    /// unless `batched`, queues what it has to send, datagram by datagram.
    fn pump(&mut self) {
        for _ in 0..100_000 {
            if self.endpoint.is_some() {
                self.endpoint_events_own();
            } else {
                // A shared endpoint: its caller hands them over.
                while let Some(ev) = self.conn.poll_endpoint_events() {
                    self.for_endpoint.push(ev);
                }
            }
            let Some(ev) = self.conn.poll() else { break };
            match ev {
                quinn_proto::Event::Connected => self.connected(),
                quinn_proto::Event::ConnectionLost { reason } => self.connection_lost(reason),
                quinn_proto::Event::Stream(se) => self.stream_event(se),
                _ => {}
            }
        }
        if !self.batched {
            let now = self.now;
            while self.out.len() < OUT_QUEUE {
                let mut buf = Vec::new();
                let Some(t) = self.conn.poll_transmit(now, 1, &mut buf) else {
                    break;
                };
                buf.truncate(t.size);
                self.out.push_back(buf);
            }
        }
    }

    /// QUIC says the handshake completed: requests held for it are
    /// written; if the server rejected 0-RTT, QUIC forgot every stream
    /// opened in early data, so they are opened again (in their order: the
    /// same ids) and written whole.
    fn connected(&mut self) {
        self.established = true;
        self.untold = true;
        let rejected = self.zero_rtt && !self.conn.accepted_0rtt();
        if !self.zero_rtt || rejected {
            self.control = None;
            self.open_control();
        }
        let mut lost = Vec::new();
        for k in 0..self.streams.len() {
            let Some((orig, _)) = self.streams[k].early.take() else {
                continue;
            };
            if rejected {
                let Some(sid) = self.conn.streams().open(Dir::Bi) else {
                    self.exhausted = true;
                    lost.push(k);
                    continue;
                };
                let s = &mut self.streams[k];
                s.sid = sid;
                s.out = orig;
                s.finished = false;
            }
            self.write_request(k);
        }
        // From the last one back: failing one moves the last into its place.
        while let Some(k) = lost.pop() {
            let m = "no stream for the request after the server rejected 0-RTT";
            self.fail(k, ErrorKind::NoStream, Cow::Borrowed(m), true);
        }
    }

    /// Opens the client's control stream and writes its SETTINGS.
    fn open_control(&mut self) {
        if let Some(sid) = self.conn.streams().open(Dir::Uni) {
            self.control = Some((sid, Bytes::from(frame::control_preface(MAX_FIELD_SECTION))));
            self.write_control();
        }
    }

    fn write_control(&mut self) {
        let Some((sid, rest)) = self.control.as_mut() else {
            return;
        };
        if let Ok(n) = self.conn.send_stream(*sid).write(rest) {
            *rest = rest.slice(n..);
        }
    }

    fn stream_event(&mut self, se: StreamEvent) {
        match se {
            StreamEvent::Opened { dir: Dir::Uni } => {
                while let Some(sid) = self.conn.streams().accept(Dir::Uni) {
                    self.uni.push(Uni::new(sid));
                    self.read_uni(sid);
                }
            }
            StreamEvent::Opened { dir: Dir::Bi } => {}
            StreamEvent::Readable { id } => {
                if id.dir() == Dir::Uni {
                    self.read_uni(id);
                } else if let Some(k) = self.find(id) {
                    self.read_request(k);
                }
            }
            StreamEvent::Writable { id } => {
                if self.control.as_ref().is_some_and(|c| c.0 == id) {
                    self.write_control();
                } else if let Some(k) = self.find(id) {
                    self.write_request(k);
                }
            }
            StreamEvent::Stopped { id, error_code } => {
                let code = error_code.into_inner();
                if let Some(k) = self.find(id) {
                    // The server wants no more of the body (after answering,
                    // H3_NO_ERROR) or rejects the request.
                    self.streams[k].out = Default::default();
                    if code == frame::H3_REQUEST_REJECTED && self.streams[k].status == 0 {
                        self.fail(k, ErrorKind::StreamReset, reset_message(code), true);
                    }
                }
            }
            StreamEvent::Available { dir: Dir::Bi } => self.exhausted = false,
            _ => {}
        }
    }

    fn find(&self, sid: StreamId) -> Option<usize> {
        self.streams.iter().position(|s| s.sid == sid)
    }

    /// Writes what request `k` still has to send; FIN after the last byte.
    fn write_request(&mut self, k: usize) {
        let s = &mut self.streams[k];
        if s.early.as_ref().is_some_and(|e| e.1) {
            return; // not safe for early data: after the handshake
        }
        let mut send = self.conn.send_stream(s.sid);
        if s.out.iter().any(|b| !b.is_empty()) {
            let first = s.out.iter().position(|b| !b.is_empty()).unwrap_or(0);
            match send.write_chunks(&mut s.out[first..]) {
                Ok(_) | Err(quinn_proto::WriteError::Blocked) => {}
                Err(_) => {
                    s.out = Default::default();
                    return;
                }
            }
        }
        if !s.finished && s.out.iter().all(Bytes::is_empty) {
            s.finished = send.finish().is_ok();
        }
    }

    /// Reads request stream `k`'s new bytes: frames into the answer.
    fn read_request(&mut self, k: usize) {
        let sid = self.streams[k].sid;
        let mut broken: Option<(ErrorKind, &'static str)> = None;
        let s = &mut self.streams[k];
        let (names, values, events) = (&mut self.name_buf, &mut self.value_buf, &mut self.events);
        let end = drain(&mut self.conn, sid, |bytes| {
            if broken.is_none() {
                broken = answer_bytes(s, bytes, names, values, events);
            }
        });
        if let Some((kind, why)) = broken {
            // Nothing more is read from it.
            let _ = self.conn.recv_stream(sid).stop(VarInt::from_u32(0x101));
            return self.fail(k, kind, Cow::Borrowed(why), false);
        }
        match end {
            Drained::Reset(code) => {
                let unprocessed = code == frame::H3_REQUEST_REJECTED && self.streams[k].status == 0;
                self.fail(k, ErrorKind::StreamReset, reset_message(code), unprocessed)
            }
            Drained::Fin => self.finish(k),
            Drained::More | Drained::Closed => {}
        }
    }

    /// The server's FIN on request `k`: the answer is complete.
    fn finish(&mut self, k: usize) {
        let s = &self.streams[k];
        if s.status == 0 || s.frames.mid_frame() {
            let why = if s.status == 0 {
                "the stream ended without a response"
            } else {
                "the stream ended inside a frame"
            };
            let kind = ErrorKind::Malformed(MalformedKind::Header);
            return self.fail(k, kind, Cow::Borrowed(why), false);
        }
        let no_body = s.head_request || s.status == 204 || s.status == 304;
        if !no_body && s.content_length.is_some_and(|n| n != s.body_bytes) {
            let kind = ErrorKind::Malformed(MalformedKind::ContentLength);
            let why = "the response broke HTTP/3: a body shorter or longer than its content-length";
            return self.fail(k, kind, Cow::Borrowed(why), false);
        }
        // Answered before the whole body went (RFC 9114 §4.1.1): the rest
        // is not sent, and the stream closes both ways.
        let mut s = self.take(k, frame::H3_NO_ERROR);
        self.events.push_back(Event::Done {
            id: s.id,
            status: s.status,
            body_bytes: s.body_bytes,
            answer: s.answer.take(),
        });
        self.pool.push(s);
    }

    /// Takes request `k`'s stream out of the open ones; what it had still to
    /// send is reset with `code`.
    fn take(&mut self, k: usize, code: u64) -> Stream {
        let s = self.streams.swap_remove(k);
        if !s.finished {
            let code = VarInt::from_u64(code).unwrap_or(VarInt::MAX);
            let _ = self.conn.send_stream(s.sid).reset(code);
        }
        s
    }

    /// Request `k` fails; its stream is given up.
    fn fail(&mut self, k: usize, kind: ErrorKind, message: Cow<'static, str>, unprocessed: bool) {
        let mut s = self.take(k, frame::H3_REQUEST_CANCELLED);
        s.answer = None;
        self.events.push_back(Event::Failed {
            id: s.id,
            kind,
            message,
            unprocessed,
        });
        self.pool.push(s);
    }

    /// Reads one of the server's unidirectional streams: its type, then
    /// (control stream) SETTINGS and GOAWAY; other types are read and dropped.
    fn read_uni(&mut self, sid: StreamId) {
        let Some(u) = self.uni.iter().position(|u| u.sid == sid) else {
            return;
        };
        let mut goaway = None;
        let u = &mut self.uni[u];
        let end = drain(&mut self.conn, sid, |bytes| {
            if let Some(g) = control_bytes(u, bytes) {
                goaway = Some(g);
            }
        });
        if !matches!(end, Drained::More) {
            self.uni.retain(|x| x.sid != sid);
        }
        if let Some(g) = goaway {
            self.on_goaway(g);
        }
    }

    /// GOAWAY(`last`): requests on streams at or above `last` were not processed.
    fn on_goaway(&mut self, last: u64) {
        self.goaway = Some(self.goaway.map_or(last, |g| g.min(last)));
        let mut k = 0;
        while k < self.streams.len() {
            if u64::from(self.streams[k].sid) >= last {
                let m = "the server sent GOAWAY before answering the request";
                self.fail(k, ErrorKind::GoAway, Cow::Borrowed(m), true);
            } else {
                k += 1;
            }
        }
    }

    /// The connection ended: every open request fails with the reason's kind.
    fn connection_lost(&mut self, reason: ConnectionError) {
        let (kind, msg) = lost_kind(&reason, self.established);
        // Requests the server never saw (the handshake did not finish) or
        // that a graceful close left unanswered go elsewhere.
        let graceful = matches!(&reason, ConnectionError::ApplicationClosed(c)
            if c.error_code.into_inner() == frame::H3_NO_ERROR);
        while !self.streams.is_empty() {
            let unprocessed = !self.established || (graceful && self.streams[0].status == 0);
            self.fail(0, kind, msg.clone(), unprocessed);
        }
        self.lost.get_or_insert((kind, msg));
    }
}

impl Session for Http3Session {
    type Request = Http3Request;

    fn connect(&mut self) {}

    fn set_time(&mut self, now: Instant) {
        self.now = self.now.max(now);
    }

    fn capacity(&self) -> usize {
        if !(self.established || self.early())
            || self.exhausted
            || self.goaway.is_some()
            || self.is_closed()
        {
            return 0;
        }
        MAX_OPEN.saturating_sub(self.streams.len())
    }

    fn submit(&mut self, r: &Http3Request, want: Want) -> Result<RequestId, SubmitError> {
        if self.is_closed() || self.goaway.is_some() {
            return Err(SubmitError::Closed);
        }
        if !(self.established || self.early()) || self.streams.len() >= MAX_OPEN {
            return Err(SubmitError::Full);
        }
        let Some(sid) = self.conn.streams().open(Dir::Bi) else {
            self.exhausted = true;
            return Err(SubmitError::Full);
        };
        let id = self.next_id;
        self.next_id += 1;
        let mut s = self.pool.pop().unwrap_or_else(|| Stream::new(sid));
        s.start(sid, id, want, r.head);
        s.out = [r.headers.clone(), r.data_head.clone(), r.body.clone()];
        let hold = !self.established && !r.early;
        if !self.established {
            s.early = Some((s.out.clone(), hold));
            self.early_sent |= !hold;
        }
        self.streams.push(s);
        let k = self.streams.len() - 1;
        if !hold {
            self.write_request(k);
        }
        self.pump();
        Ok(id)
    }

    fn cancel(&mut self, id: RequestId) {
        if let Some(k) = self.streams.iter().position(|s| s.id == id) {
            let s = self.streams.swap_remove(k);
            let code = VarInt::from_u32(frame::H3_REQUEST_CANCELLED as u32);
            let _ = self.conn.send_stream(s.sid).reset(code);
            let _ = self.conn.recv_stream(s.sid).stop(code);
            self.pool.push(s);
            self.pump();
        }
    }

    /// One datagram (the driver reads batches: `datagram_in`).
    fn bytes_in(&mut self, data: &[u8]) {
        self.datagram_in(self.now, None, data);
        self.pump();
    }

    fn eof(&mut self) {
        if self.lost.is_none() {
            self.connection_lost(ConnectionError::LocallyClosed);
        }
    }

    /// The next datagram (nothing once `batched`: see `next_datagrams`).
    fn pending_out(&self) -> &[u8] {
        self.out.front().map_or(&[], Vec::as_slice)
    }

    fn consume_out(&mut self, _n: usize) {
        // A datagram goes whole or not at all.
        self.out.pop_front();
        if self.out.is_empty() && !self.batched {
            self.pump();
        }
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn is_closed(&self) -> bool {
        self.lost.is_some() || self.closing || self.conn.is_closed()
    }

    fn close(&mut self) {
        if !self.closing && !self.conn.is_closed() {
            self.closing = true;
            self.conn.close(
                self.now,
                VarInt::from_u32(frame::H3_NO_ERROR as u32),
                Bytes::new(),
            );
            self.pump();
        }
    }
}
