//! The sans-IO protocol seam (issue 18): one [`Session`] per connection, fed
//! bytes by whoever owns the socket and asked for the bytes to write, in the
//! shape of h2load's `Session` (connect, submit a request, bytes in, bytes
//! out, how many more requests it takes now) with the answers as [`Event`]s
//! (response head, body done, failure). No socket, timer or task lives here,
//! so every session is tested with byte buffers alone.
//!
//! - [`H1Session`]: HTTP/1.1 over the engine's own sans-IO reader
//!   ([`crate::h1::ResponseReader`], heads scanned by [`crate::head`], with the
//!   worker's [`HeadMemo`]); requests are pre-encoded bytes; pipelining up to
//!   a depth (1: plain keep-alive).
//! - [`H2Session`]: HTTP/2 through an **adapter** over the `h2` crate. `h2` is
//!   not sans-IO: its connection is a future over an `AsyncRead + AsyncWrite`.
//!   The adapter gives it an in-memory pipe (bytes in are what it reads, what
//!   it writes are the bytes out) and polls its futures with a no-op waker
//!   after every call, until nothing moves. That costs a poll of every open
//!   stream per call, which is why the load driver (`h2run`) still runs `h2`
//!   on its tokio runtime with real sockets rather than on this adapter. A
//!   sans-IO HTTP/2 codec (frames + HPACK) would replace the adapter without
//!   changing the trait.
//! - HTTP/3 would be a third implementation: `quinn-proto` is sans-IO already
//!   (datagrams in via `handle`, datagrams out via `poll_transmit`, plus a
//!   timer: `poll_timeout`/`handle_timeout`), so an `H3Session` takes UDP
//!   datagrams as its "bytes" and needs one more method on the trait, the next
//!   timer deadline; the request layer (`h3`, async over quinn's streams) would
//!   sit behind the same kind of adapter as `h2` here, or be replaced by QPACK
//!   plus HTTP/3 frames written directly on quinn-proto's streams.
//!
//! Status (honest): the HTTP/1 worker (`worker/`, mio) does not drive its
//! connections through this trait yet: its hot path reads straight into
//! `ResponseReader::feed_memo` from its own buffers, and moving it behind a
//! trait object with an event queue is measured work for a later session. The
//! HTTP/2 driver uses the `h2` crate directly for the reason above. Both
//! sessions here run the same parsing code as the drivers.

use crate::h1::{HeadMemo, Progress, ResponseReader};
use bytes::Bytes;
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// A request's number on its session, in submission order from 0.
pub type RequestId = u64;

/// What a session learned from the bytes it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The final response head of a request arrived.
    Head {
        /// The request.
        id: RequestId,
        /// Its status code.
        status: u16,
    },
    /// A request's response is complete.
    Done {
        /// The request.
        id: RequestId,
        /// Its status code.
        status: u16,
        /// Body bytes (decoded from chunked or HTTP/2 framing).
        body_bytes: u64,
    },
    /// A request failed (the connection may be gone: see [`Session::is_closed`]).
    Failed {
        /// The request.
        id: RequestId,
        /// Why.
        kind: ErrorKind,
        /// A short message (never a header value).
        message: Cow<'static, str>,
    },
}

/// Why [`Session::submit`] refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitError {
    /// [`Session::capacity`] is 0 now: wait for an answer first.
    Full,
    /// The connection is closed or failed.
    Closed,
    /// The request cannot be expressed in this protocol.
    Invalid(String),
}

/// One connection's protocol state, without I/O.
pub trait Session {
    /// A request in this protocol's form.
    type Request;
    /// Starts the connection (queues the protocol's preface, if it has one).
    fn connect(&mut self);
    /// How many more requests it takes now.
    fn capacity(&self) -> usize;
    /// Queues a request; its answer comes as events with the returned id.
    fn submit(&mut self, request: &Self::Request) -> Result<RequestId, SubmitError>;
    /// Bytes read from the connection.
    fn bytes_in(&mut self, data: &[u8]);
    /// The peer closed the connection: requests without a complete answer fail.
    fn eof(&mut self);
    /// Moves the bytes to write to `out` (appended); how many.
    fn bytes_out(&mut self, out: &mut Vec<u8>) -> usize;
    /// The next event, oldest first.
    fn poll_event(&mut self) -> Option<Event>;
    /// No request will be taken again (closed, failed, or `Connection: close`).
    fn is_closed(&self) -> bool;
}

// ------------------------------------------------------------------ HTTP/1.1

/// An HTTP/1.1 request as bytes on the wire (from the plan, built once).
#[derive(Debug, Clone)]
pub struct H1Request {
    /// The request line, headers and body, framed.
    pub wire: Bytes,
    /// A HEAD request (its answer has no body whatever its headers say).
    pub head: bool,
}

/// HTTP/1.1 over [`ResponseReader`]: answers come in submission order.
#[derive(Debug)]
pub struct H1Session {
    reader: ResponseReader,
    memo: HeadMemo,
    /// Requests written or to be written, without a complete answer (id, HEAD).
    waiting: VecDeque<(RequestId, bool)>,
    /// The head of the oldest waiting request was reported.
    head_told: bool,
    out: Vec<u8>,
    depth: usize,
    next_id: RequestId,
    closed: bool,
    events: VecDeque<Event>,
}

impl H1Session {
    /// A session sending up to `depth` requests before their answers (1: no pipelining).
    pub fn new(depth: usize) -> H1Session {
        H1Session {
            reader: ResponseReader::new(),
            memo: HeadMemo::new(),
            waiting: VecDeque::new(),
            head_told: false,
            out: Vec::new(),
            depth: depth.max(1),
            next_id: 0,
            closed: false,
            events: VecDeque::new(),
        }
    }

    /// Fails every waiting request and closes.
    fn fail_all(&mut self, kind: ErrorKind, message: Cow<'static, str>) {
        for (id, _) in self.waiting.drain(..) {
            self.events.push_back(Event::Failed {
                id,
                kind,
                message: message.clone(),
            });
        }
        self.closed = true;
    }
}

impl Session for H1Session {
    type Request = H1Request;

    fn connect(&mut self) {}

    fn capacity(&self) -> usize {
        if self.closed {
            0
        } else {
            self.depth.saturating_sub(self.waiting.len())
        }
    }

    fn submit(&mut self, request: &H1Request) -> Result<RequestId, SubmitError> {
        if self.closed {
            return Err(SubmitError::Closed);
        }
        if self.capacity() == 0 {
            return Err(SubmitError::Full);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.out.extend_from_slice(&request.wire);
        self.waiting.push_back((id, request.head));
        Ok(id)
    }

    fn bytes_in(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let Some(&(id, head)) = self.waiting.front() else {
                if !self.closed {
                    // Bytes before any request, or after the last answer.
                    self.closed = true;
                }
                return;
            };
            match self.reader.feed_memo(data, head, Some(&mut self.memo)) {
                Ok(Progress::NeedMore) => {
                    if self.reader.head_done && !self.head_told {
                        self.head_told = true;
                        self.events.push_back(Event::Head {
                            id,
                            status: self.reader.status,
                        });
                    }
                    return;
                }
                Ok(Progress::Done { used }) => {
                    let status = self.reader.status;
                    if !self.head_told {
                        self.events.push_back(Event::Head { id, status });
                    }
                    self.events.push_back(Event::Done {
                        id,
                        status,
                        body_bytes: self.reader.body_bytes,
                    });
                    self.waiting.pop_front();
                    self.head_told = false;
                    let keep_alive = self.reader.keep_alive;
                    self.reader.reset();
                    data = &data[used..];
                    if !keep_alive {
                        // What was pipelined behind it will not be answered.
                        self.fail_all(
                            ErrorKind::Closed,
                            "the server closed the connection (Connection: close)".into(),
                        );
                        return;
                    }
                    if self.waiting.is_empty() && !data.is_empty() {
                        self.closed = true;
                        return;
                    }
                }
                Err(m) => {
                    self.fail_all(ErrorKind::Malformed(m.kind), m.message.into());
                    return;
                }
            }
        }
    }

    fn eof(&mut self) {
        if let Some(&(id, _)) = self.waiting.front() {
            if self.reader.eof() {
                // A body delimited by the close is complete now.
                let status = self.reader.status;
                self.events.push_back(Event::Done {
                    id,
                    status,
                    body_bytes: self.reader.body_bytes,
                });
                self.waiting.pop_front();
            }
        }
        self.fail_all(
            ErrorKind::Closed,
            "connection closed before the response was complete".into(),
        );
    }

    fn bytes_out(&mut self, out: &mut Vec<u8>) -> usize {
        let n = self.out.len();
        out.append(&mut self.out);
        n
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn is_closed(&self) -> bool {
        self.closed
    }
}

// -------------------------------------------------------------------- HTTP/2

/// An HTTP/2 request: the head (`:method`, `:path`, `:authority` from the
/// URI, regular headers) and the body sent as DATA.
#[derive(Debug, Clone)]
pub struct H2Request {
    /// Method, URI and headers (no connection-specific ones).
    pub head: http::Request<()>,
    /// The body (empty: the HEADERS frame ends the stream).
    pub body: Bytes,
}

/// The in-memory socket the `h2` crate reads from and writes to.
#[derive(Debug, Default)]
struct Pipe {
    inbound: Vec<u8>,
    /// How much of `inbound` h2 has read.
    read_at: usize,
    outbound: Vec<u8>,
    eof: bool,
}

/// The adapter's side of the pipe, handed to `h2` as its I/O.
#[derive(Debug, Clone, Default)]
struct PipeIo(Rc<RefCell<Pipe>>);

impl tokio::io::AsyncRead for PipeIo {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut p = self.0.borrow_mut();
        let at = p.read_at;
        let n = (p.inbound.len() - at).min(buf.remaining());
        if n == 0 {
            // End of input: EOF if the peer closed, else "would block" (the
            // session polls again after the next `bytes_in`).
            return if p.eof {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            };
        }
        buf.put_slice(&p.inbound[at..at + n]);
        p.read_at += n;
        if p.read_at == p.inbound.len() {
            p.inbound.clear();
            p.read_at = 0;
        }
        Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncWrite for PipeIo {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.borrow_mut().outbound.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

type Handshake = Pin<
    Box<
        dyn Future<
            Output = Result<
                (
                    h2::client::SendRequest<Bytes>,
                    h2::client::Connection<PipeIo, Bytes>,
                ),
                h2::Error,
            >,
        >,
    >,
>;

enum H2State {
    Idle,
    Handshaking(Handshake),
    Open {
        send: h2::client::SendRequest<Bytes>,
        conn: Box<h2::client::Connection<PipeIo, Bytes>>,
    },
    Closed,
}

/// Where one stream is.
enum StreamState {
    /// Waiting for the response head.
    Head(h2::client::ResponseFuture),
    /// Reading the body.
    Body {
        rx: h2::RecvStream,
        status: u16,
        bytes: u64,
        trailers: bool,
    },
}

struct H2Stream {
    id: RequestId,
    state: StreamState,
    /// Kept until the stream ends: dropping it would reset the stream.
    _tx: h2::SendStream<Bytes>,
}

/// HTTP/2 through the adapter over the `h2` crate (see the top of this file).
pub struct H2Session {
    pipe: PipeIo,
    state: H2State,
    streams: Vec<H2Stream>,
    next_id: RequestId,
    events: VecDeque<Event>,
}

impl Default for H2Session {
    fn default() -> Self {
        H2Session::new()
    }
}

impl H2Session {
    /// A session not connected yet.
    pub fn new() -> H2Session {
        H2Session {
            pipe: PipeIo::default(),
            state: H2State::Idle,
            streams: Vec::new(),
            next_id: 0,
            events: VecDeque::new(),
        }
    }

    /// Polls the handshake, the connection and every stream until nothing moves.
    fn drive(&mut self) {
        let mut cx = Context::from_waker(Waker::noop());
        // Each round either moves a stream on or ends; bounded all the same.
        for _ in 0..64 {
            let mut moved = false;
            if let H2State::Handshaking(h) = &mut self.state {
                match h.as_mut().poll(&mut cx) {
                    Poll::Pending => return,
                    Poll::Ready(Ok((send, conn))) => {
                        self.state = H2State::Open {
                            send,
                            conn: Box::new(conn),
                        };
                        moved = true;
                    }
                    Poll::Ready(Err(e)) => return self.fail_connection(&e),
                }
            }
            let H2State::Open { conn, .. } = &mut self.state else {
                return;
            };
            // Ended or failed: the streams' own polls below report the
            // error per stream (GOAWAY, protocol error, ...).
            if Pin::new(&mut **conn).poll(&mut cx).is_ready() {
                self.state = H2State::Closed;
                moved = true;
            }
            let mut i = 0;
            while i < self.streams.len() {
                match poll_stream(&mut self.streams[i], &mut cx) {
                    StreamPoll::Pending => i += 1,
                    StreamPoll::Moved(head) => {
                        if let Some(status) = head {
                            let id = self.streams[i].id;
                            self.events.push_back(Event::Head { id, status });
                        }
                        moved = true;
                    }
                    StreamPoll::End(ev) => {
                        self.events.push_back(ev);
                        self.streams.swap_remove(i);
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        if matches!(self.state, H2State::Closed) {
            for s in self.streams.drain(..) {
                self.events.push_back(Event::Failed {
                    id: s.id,
                    kind: ErrorKind::Closed,
                    message: "connection closed before the response was complete".into(),
                });
            }
        }
    }

    fn fail_connection(&mut self, e: &h2::Error) {
        let (kind, message) = crate::h2run::classify_error(e);
        self.state = H2State::Closed;
        for s in self.streams.drain(..) {
            self.events.push_back(Event::Failed {
                id: s.id,
                kind,
                message: message.clone(),
            });
        }
    }
}

enum StreamPoll {
    Pending,
    /// Progress; with the status when the head arrived.
    Moved(Option<u16>),
    End(Event),
}

fn poll_stream(s: &mut H2Stream, cx: &mut Context<'_>) -> StreamPoll {
    let id = s.id;
    let failed = |e: &h2::Error| {
        let (kind, message) = crate::h2run::classify_error(e);
        StreamPoll::End(Event::Failed { id, kind, message })
    };
    match &mut s.state {
        StreamState::Head(f) => match Pin::new(f).poll(cx) {
            Poll::Pending => StreamPoll::Pending,
            Poll::Ready(Err(e)) => failed(&e),
            Poll::Ready(Ok(resp)) => {
                let status = resp.status().as_u16();
                s.state = StreamState::Body {
                    rx: resp.into_body(),
                    status,
                    bytes: 0,
                    trailers: false,
                };
                StreamPoll::Moved(Some(status))
            }
        },
        StreamState::Body {
            rx,
            status,
            bytes,
            trailers,
        } => {
            if !*trailers {
                match rx.poll_data(cx) {
                    Poll::Pending => return StreamPoll::Pending,
                    Poll::Ready(Some(Ok(chunk))) => {
                        *bytes += chunk.len() as u64;
                        let _ = rx.flow_control().release_capacity(chunk.len());
                        return StreamPoll::Moved(None);
                    }
                    Poll::Ready(Some(Err(e))) => return failed(&e),
                    Poll::Ready(None) => *trailers = true,
                }
            }
            match rx.poll_trailers(cx) {
                Poll::Pending => StreamPoll::Pending,
                Poll::Ready(Err(e)) => failed(&e),
                Poll::Ready(Ok(_)) => StreamPoll::End(Event::Done {
                    id,
                    status: *status,
                    body_bytes: *bytes,
                }),
            }
        }
    }
}

impl Session for H2Session {
    type Request = H2Request;

    fn connect(&mut self) {
        if matches!(self.state, H2State::Idle) {
            let hs = h2::client::Builder::new()
                .enable_push(false)
                .initial_window_size(1 << 20)
                .initial_connection_window_size(1 << 24)
                .max_header_list_size(crate::h2run::MAX_HEADER_LIST)
                .handshake::<_, Bytes>(self.pipe.clone());
            self.state = H2State::Handshaking(Box::pin(hs));
            self.drive();
        }
    }

    fn capacity(&self) -> usize {
        match &self.state {
            H2State::Open { conn, .. } => conn
                .max_concurrent_send_streams()
                .saturating_sub(self.streams.len()),
            _ => 0,
        }
    }

    fn submit(&mut self, request: &H2Request) -> Result<RequestId, SubmitError> {
        if self.capacity() == 0 {
            return Err(match self.state {
                H2State::Open { .. } => SubmitError::Full,
                _ => SubmitError::Closed,
            });
        }
        let H2State::Open { send, .. } = &mut self.state else {
            return Err(SubmitError::Closed);
        };
        let end = request.body.is_empty();
        let (resp, mut tx) = send
            .send_request(request.head.clone(), end)
            .map_err(|e| SubmitError::Invalid(e.to_string()))?;
        if !end {
            // h2 buffers what the peer's window does not take yet.
            tx.send_data(request.body.clone(), true)
                .map_err(|e| SubmitError::Invalid(e.to_string()))?;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.streams.push(H2Stream {
            id,
            state: StreamState::Head(resp),
            _tx: tx,
        });
        self.drive();
        Ok(id)
    }

    fn bytes_in(&mut self, data: &[u8]) {
        self.pipe.0.borrow_mut().inbound.extend_from_slice(data);
        self.drive();
    }

    fn eof(&mut self) {
        self.pipe.0.borrow_mut().eof = true;
        self.drive();
        self.state = H2State::Closed;
        self.drive();
    }

    fn bytes_out(&mut self, out: &mut Vec<u8>) -> usize {
        self.drive();
        let mut p = self.pipe.0.borrow_mut();
        let n = p.outbound.len();
        out.append(&mut p.outbound);
        n
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn is_closed(&self) -> bool {
        matches!(self.state, H2State::Closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redline_stats::MalformedKind;

    fn events<S: Session>(s: &mut S) -> Vec<Event> {
        std::iter::from_fn(|| s.poll_event()).collect()
    }

    fn get(path: &str) -> H1Request {
        H1Request {
            wire: Bytes::from(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n")),
            head: false,
        }
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

    #[test]
    fn h1_one_request_on_every_split_of_its_answer() {
        for cut in 0..=OK.len() {
            let mut s = H1Session::new(1);
            s.connect();
            assert_eq!(s.capacity(), 1);
            let id = s.submit(&get("/a")).unwrap();
            assert_eq!(s.capacity(), 0);
            assert_eq!(s.submit(&get("/b")), Err(SubmitError::Full));
            let mut out = Vec::new();
            s.bytes_out(&mut out);
            assert_eq!(out, b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
            s.bytes_in(&OK[..cut]);
            s.bytes_in(&OK[cut..]);
            let ev = events(&mut s);
            assert_eq!(
                ev,
                vec![
                    Event::Head { id, status: 200 },
                    Event::Done {
                        id,
                        status: 200,
                        body_bytes: 5
                    }
                ],
                "cut at {cut}"
            );
            assert_eq!(s.capacity(), 1);
            assert!(!s.is_closed());
        }
    }

    #[test]
    fn h1_pipelined_answers_in_order_and_close_ends_the_rest() {
        let mut s = H1Session::new(3);
        let ids: Vec<_> = (0..3).map(|_| s.submit(&get("/")).unwrap()).collect();
        let mut out = Vec::new();
        s.bytes_out(&mut out);
        assert_eq!(out.len(), 3 * get("/").wire.len());
        let mut two = OK.to_vec();
        two.extend_from_slice(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        s.bytes_in(&two);
        let ev = events(&mut s);
        assert_eq!(ev.len(), 5, "{ev:?}");
        assert_eq!(
            ev[1],
            Event::Done {
                id: ids[0],
                status: 200,
                body_bytes: 5
            }
        );
        assert_eq!(
            ev[3],
            Event::Done {
                id: ids[1],
                status: 404,
                body_bytes: 0
            }
        );
        assert!(matches!(ev[4], Event::Failed { id, kind: ErrorKind::Closed, .. } if id == ids[2]));
        assert!(s.is_closed());
        assert_eq!(s.capacity(), 0);
        assert_eq!(s.submit(&get("/")), Err(SubmitError::Closed));
    }

    #[test]
    fn h1_broken_answers_and_early_close_fail() {
        let mut s = H1Session::new(1);
        let id = s.submit(&get("/")).unwrap();
        s.bytes_in(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel");
        s.eof();
        let ev = events(&mut s);
        assert_eq!(ev[0], Event::Head { id, status: 200 });
        assert!(matches!(
            ev[1],
            Event::Failed {
                kind: ErrorKind::Closed,
                ..
            }
        ));

        let mut s = H1Session::new(1);
        s.submit(&get("/")).unwrap();
        s.bytes_in(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n");
        let ev = events(&mut s);
        assert!(matches!(
            ev[..],
            [Event::Failed {
                kind: ErrorKind::Malformed(MalformedKind::ContentLength),
                ..
            }]
        ));
        assert!(s.is_closed());

        // A body that runs until the close is complete at the close.
        let mut s = H1Session::new(1);
        let id = s.submit(&get("/")).unwrap();
        s.bytes_in(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabc");
        s.eof();
        let ev = events(&mut s);
        assert_eq!(
            ev.last(),
            Some(&Event::Done {
                id,
                status: 200,
                body_bytes: 3
            })
        );
    }

    // HTTP/2 frames a server would send, written out by hand (RFC 9113 §4.1).
    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let n = payload.len();
        let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }
    const DATA: u8 = 0;
    const HEADERS: u8 = 1;
    const RST_STREAM: u8 = 3;
    const SETTINGS: u8 = 4;
    const END_STREAM: u8 = 1;
    const END_HEADERS: u8 = 4;

    /// The server's preface: SETTINGS (MAX_CONCURRENT_STREAMS 2), and the
    /// ACK of the client's SETTINGS.
    fn server_preface() -> Vec<u8> {
        let mut b = frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 2]);
        b.extend(frame(SETTINGS, 1, 0, &[]));
        b
    }

    fn h2_get() -> H2Request {
        H2Request {
            head: http::Request::get("http://t/x").body(()).unwrap(),
            body: Bytes::new(),
        }
    }

    fn connected() -> (H2Session, Vec<u8>) {
        let mut s = H2Session::new();
        assert_eq!(s.capacity(), 0);
        s.connect();
        let mut out = Vec::new();
        s.bytes_out(&mut out);
        assert!(
            out.starts_with(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            "{out:?}"
        );
        s.bytes_in(&server_preface());
        (s, out)
    }

    #[test]
    fn h2_takes_what_the_server_allows_and_reads_answers_on_every_split() {
        let mut answer = frame(HEADERS, END_HEADERS, 1, &[0x88]); // :status 200
        answer.extend(frame(DATA, 0, 1, b"hel"));
        answer.extend(frame(DATA, END_STREAM, 1, b"lo"));
        for cut in 0..=answer.len() {
            let (mut s, _) = connected();
            assert_eq!(s.capacity(), 2);
            let a = s.submit(&h2_get()).unwrap();
            let b = s.submit(&h2_get()).unwrap();
            assert_eq!(s.capacity(), 0);
            assert_eq!(s.submit(&h2_get()).unwrap_err(), SubmitError::Full);
            let mut out = Vec::new();
            s.bytes_out(&mut out);
            // Two HEADERS frames, on streams 1 and 3.
            assert!(out.len() > 2 * 9, "{out:?}");
            s.bytes_in(&answer[..cut]);
            s.bytes_in(&answer[cut..]);
            let ev = events(&mut s);
            assert_eq!(
                ev,
                vec![
                    Event::Head { id: a, status: 200 },
                    Event::Done {
                        id: a,
                        status: 200,
                        body_bytes: 5
                    }
                ],
                "cut at {cut}"
            );
            assert_eq!(s.capacity(), 1);
            // The server resets the other stream (REFUSED_STREAM = 7).
            s.bytes_in(&frame(RST_STREAM, 0, 3, &[0, 0, 0, 7]));
            let ev = events(&mut s);
            assert!(
                matches!(&ev[..], [Event::Failed { id, kind: ErrorKind::StreamReset, .. }] if *id == b),
                "{ev:?}"
            );
        }
    }

    #[test]
    fn h2_a_closed_connection_fails_its_streams() {
        let (mut s, _) = connected();
        let a = s.submit(&h2_get()).unwrap();
        s.bytes_in(&frame(HEADERS, END_HEADERS, 1, &[0x88]));
        s.eof();
        let ev = events(&mut s);
        assert_eq!(ev[0], Event::Head { id: a, status: 200 });
        assert!(
            matches!(ev[1], Event::Failed { id, .. } if id == a),
            "{ev:?}"
        );
        assert!(s.is_closed());
        assert_eq!(s.capacity(), 0);
        assert_eq!(s.submit(&h2_get()).unwrap_err(), SubmitError::Closed);
    }

    #[test]
    fn h2_garbage_from_the_server_fails_the_connection() {
        let (mut s, _) = connected();
        let a = s.submit(&h2_get()).unwrap();
        s.bytes_in(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        let ev = events(&mut s);
        assert!(
            matches!(&ev[..], [Event::Failed { id, .. }] if *id == a),
            "{ev:?}"
        );
        assert!(s.is_closed());
    }
}
