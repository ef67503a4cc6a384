//! The scripted server's HTTP/3 side (`core/wire_tests.rs`), in made-up
//! time: a `quinn-proto` server endpoint per connection (TLS 1.3 with the
//! testkit's rcgen certificate, ALPN `h3`) exchanging datagrams with the
//! client's `Http3Session`, and the least of an HTTP/3 server on its
//! streams: its control stream (SETTINGS, later GOAWAY), the client's
//! unidirectional streams read and dropped, each request stream read to its
//! FIN and its HEADERS decoded with the engine's static-table QPACK, answers
//! as a static-table/literal HEADERS frame and a DATA frame. What the script
//! replies maps onto HTTP/3: `Refuse` resets the stream with
//! H3_REQUEST_REJECTED, `GoAway` sends GOAWAY naming the request's stream
//! (it and later ones not processed), `Close` closes the connection
//! (CONNECTION_CLOSE, H3_NO_ERROR) after what was already written, `Reset`
//! drops its state, so the client's next datagrams meet a stateless reset.

use super::{Fields, Reply, BODY};
use crate::http3::{frame, qpack};
use bytes::{Bytes, BytesMut};
use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::{
    Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, EndpointEvent,
    Event, ServerConfig, StreamEvent, StreamId, VarInt,
};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Where the client's datagrams come from, as the server sees it (each
/// connection has its own endpoint, so one address serves them all).
const CLIENT: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 40_000);

/// A test server's TLS for QUIC (one per [`super::Server`]: its own session
/// store, so its resumptions are its own): the testkit's certificate for
/// `127.0.0.1`, made once per test binary (key generation is the costly
/// part); `early_data`: resumed connections may send requests in 0-RTT.
pub(super) fn crypto(early_data: bool) -> Arc<QuicServerConfig> {
    static PKI: OnceLock<redline_testkit::pki::Pki> = OnceLock::new();
    let pki = PKI.get_or_init(redline_testkit::pki::pki);
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(pki.key_der.clone().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), key)
        .expect("test certificate");
    tls.alpn_protocols = vec![b"h3".to_vec()];
    if early_data {
        tls.max_early_data_size = u32::MAX;
    }
    Arc::new(QuicServerConfig::try_from(tls).expect("QUIC TLS"))
}

/// The server's side of one QUIC connection.
pub(super) struct Quic {
    endpoint: Endpoint,
    conn: Option<(ConnectionHandle, Connection)>,
    /// Request streams read so far (to their FIN).
    reading: HashMap<StreamId, Vec<u8>>,
    /// Its control stream, once the handshake completed.
    control: Option<StreamId>,
    /// Requests the client gave up (stream reset or reading stopped).
    gone: Vec<u32>,
    /// Datagrams built before a close (sent ahead of CONNECTION_CLOSE).
    out: Vec<Vec<u8>>,
    buf: Vec<u8>,
    /// Requests whose stream opened before the handshake completed (0-RTT).
    pub(super) early: u32,
    /// The connection was reset ([`Reply::Reset`]).
    reset: bool,
}

impl Quic {
    /// A connection's server side with the server's TLS; `max_streams`: the
    /// request streams the client may open at once (QUIC's
    /// initial_max_streams_bidi).
    pub(super) fn new(tls: Arc<QuicServerConfig>, max_streams: Option<u32>) -> Quic {
        let mut server = ServerConfig::with_crypto(tls);
        if let Some(n) = max_streams {
            let mut t = quinn_proto::TransportConfig::default();
            t.max_concurrent_bidi_streams(VarInt::from_u32(n));
            server.transport_config(Arc::new(t));
        }
        let endpoint = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(server)),
            false,
            None,
        );
        Quic {
            endpoint,
            conn: None,
            reading: HashMap::new(),
            control: None,
            gone: Vec::new(),
            out: Vec::new(),
            buf: Vec::new(),
            early: 0,
            reset: false,
        }
    }

    /// The client's datagrams at `now`, then QUIC's timers: the requests
    /// whose stream ended (their stream and fields), in order.
    pub(super) fn datagrams_in(
        &mut self,
        datagrams: &[Vec<u8>],
        now: Instant,
    ) -> Vec<(u32, Fields)> {
        for d in datagrams {
            self.buf.clear();
            let data = BytesMut::from(&d[..]);
            match self
                .endpoint
                .handle(now, CLIENT, None, None, data, &mut self.buf)
            {
                Some(DatagramEvent::NewConnection(incoming)) => {
                    if self.conn.is_some() {
                        // One connection per endpoint: a stray Initial is dropped.
                        self.endpoint.ignore(incoming);
                        continue;
                    }
                    self.buf.clear();
                    if let Ok(c) = self.endpoint.accept(incoming, now, &mut self.buf, None) {
                        self.conn = Some(c);
                    }
                }
                Some(DatagramEvent::ConnectionEvent(_, ev)) => {
                    if let Some((_, c)) = self.conn.as_mut() {
                        c.handle_event(ev);
                    }
                }
                Some(DatagramEvent::Response(t)) => self.out.push(self.buf[..t.size].to_vec()),
                _ => {}
            }
        }
        let mut got = Vec::new();
        let Some((_, c)) = self.conn.as_mut() else {
            return got;
        };
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        for _ in 0..100_000 {
            let Some((_, c)) = self.conn.as_mut() else {
                break;
            };
            let Some(ev) = c.poll() else { break };
            match ev {
                Event::Connected => {
                    if let Some(sid) = c.streams().open(Dir::Uni) {
                        let max = crate::http3::conn::MAX_FIELD_SECTION;
                        let _ = c.send_stream(sid).write(&frame::control_preface(max));
                        self.control = Some(sid);
                    }
                }
                Event::Stream(StreamEvent::Opened { dir }) => {
                    let mut opened = Vec::new();
                    while let Some(sid) = c.streams().accept(dir) {
                        opened.push(sid);
                    }
                    let early = c.is_handshaking();
                    for sid in opened {
                        if dir == Dir::Bi {
                            self.early += u32::from(early);
                            self.reading.insert(sid, Vec::new());
                        }
                        self.read(sid, &mut got);
                    }
                }
                Event::Stream(StreamEvent::Readable { id }) => self.read(id, &mut got),
                Event::Stream(StreamEvent::Stopped { id, .. }) => self.gone.push(id_of(id)),
                _ => {}
            }
        }
        got
    }

    /// Reads stream `sid`: a request stream to its FIN (then its request
    /// goes to `got`), a unidirectional one (the client's control and QPACK
    /// streams) read and dropped; a request the client reset is gone.
    fn read(&mut self, sid: StreamId, got: &mut Vec<(u32, Fields)>) {
        let Some((_, c)) = self.conn.as_mut() else {
            return;
        };
        let mut recv = c.recv_stream(sid);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        let mut bytes = Vec::new();
        let mut end = None;
        for _ in 0..100_000 {
            match chunks.next(usize::MAX) {
                Ok(Some(ch)) => bytes.extend_from_slice(&ch.bytes),
                Ok(None) => {
                    end = Some(true);
                    break;
                }
                Err(quinn_proto::ReadError::Reset(_)) => {
                    end = Some(false);
                    break;
                }
                Err(_) => break,
            }
        }
        let _ = chunks.finalize();
        if sid.dir() == Dir::Uni {
            return;
        }
        let Some(req) = self.reading.get_mut(&sid) else {
            return;
        };
        req.extend_from_slice(&bytes);
        match end {
            Some(true) => {
                let req = self.reading.remove(&sid).unwrap_or_default();
                got.push((id_of(sid), request(&req)));
            }
            Some(false) => {
                self.reading.remove(&sid);
                self.gone.push(id_of(sid));
            }
            None => {}
        }
    }

    /// Requests the client gave up since the last call (its time-out).
    pub(super) fn take_gone(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.gone)
    }

    /// Writes `reply` to the request on `stream`; true when the connection
    /// then closes.
    pub(super) fn answer(&mut self, stream: u32, reply: Reply, now: Instant) -> bool {
        let Some((_, c)) = self.conn.as_mut() else {
            // Reset: the endpoint stays, to answer with stateless resets.
            return !self.reset;
        };
        let sid = StreamId::from(VarInt::from_u32(stream));
        match reply {
            Reply::Answer(status, location) => {
                let mut section = vec![0, 0];
                qpack::field(&mut section, ":status", &status.to_string());
                if let Some(l) = location {
                    qpack::field(&mut section, "location", &l);
                }
                qpack::field(&mut section, "content-length", &BODY.len().to_string());
                let mut out = Vec::new();
                frame::put_header(&mut out, frame::HEADERS, section.len() as u64);
                out.extend_from_slice(&section);
                frame::put_header(&mut out, frame::DATA, BODY.len() as u64);
                out.extend_from_slice(BODY);
                let mut send = c.send_stream(sid);
                let mut data = [Bytes::from(out)];
                let _ = send.write_chunks(&mut data);
                let _ = send.finish();
                false
            }
            Reply::Refuse => {
                let code = VarInt::from_u32(frame::H3_REQUEST_REJECTED as u32);
                let _ = c.send_stream(sid).reset(code);
                let _ = c.recv_stream(sid).stop(code);
                false
            }
            Reply::GoAway => {
                if let Some(ctl) = self.control {
                    let mut id = Vec::new();
                    frame::put_varint(&mut id, u64::from(stream));
                    let mut f = Vec::new();
                    frame::put_header(&mut f, frame::GOAWAY, id.len() as u64);
                    f.extend_from_slice(&id);
                    let _ = c.send_stream(ctl).write(&f);
                }
                false
            }
            Reply::Close => {
                // What was written goes first: QUIC's close drops it.
                let mut before = self.datagrams_out(now);
                self.out.append(&mut before);
                if let Some((_, c)) = self.conn.as_mut() {
                    let code = VarInt::from_u32(frame::H3_NO_ERROR as u32);
                    c.close(now, code, Bytes::new());
                }
                true
            }
            Reply::Reset => {
                // The endpoint forgets the connection: what the client
                // sends next is answered with a stateless reset.
                if let Some((ch, _)) = self.conn.take() {
                    let _ = self.endpoint.handle_event(ch, EndpointEvent::drained());
                }
                self.reset = true;
                self.reading.clear();
                self.control = None;
                false
            }
            Reply::Wait => false,
        }
    }

    /// The datagrams the server sends now.
    pub(super) fn datagrams_out(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let mut out = std::mem::take(&mut self.out);
        let Some((ch, c)) = self.conn.as_mut() else {
            return out;
        };
        while let Some(ev) = c.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(*ch, ev) {
                c.handle_event(back);
            }
        }
        for _ in 0..10_000 {
            self.buf.clear();
            let Some(t) = c.poll_transmit(now, 1, &mut self.buf) else {
                break;
            };
            out.push(self.buf[..t.size].to_vec());
        }
        out
    }
}

/// A stream's number as the script sees it (`Req::stream`).
fn id_of(sid: StreamId) -> u32 {
    u64::from(sid) as u32
}

/// A request stream's bytes: its HEADERS decoded (DATA and other frames skipped).
fn request(b: &[u8]) -> Fields {
    let mut f = Fields::default();
    let mut at = 0;
    for _ in 0..1_000 {
        let (Some(ty), Some(len)) = (frame::get_varint(b, &mut at), frame::get_varint(b, &mut at))
        else {
            break;
        };
        let end = (at + len as usize).min(b.len());
        if ty == frame::HEADERS {
            let (mut names, mut values) = (Vec::new(), Vec::new());
            qpack::decode(&b[at..end], &mut f, &mut names, &mut values).expect("QPACK");
        }
        at = end;
    }
    f
}
