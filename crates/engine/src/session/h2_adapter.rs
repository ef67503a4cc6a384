//! HTTP/2 behind the [`Session`] seam through an adapter over the `h2`
//! crate (see `session/mod.rs`): `h2` gets an in-memory pipe as its socket
//! and its futures are polled with a no-op waker until nothing moves.

use super::{Answer, Event, RequestId, Session, SubmitError, Want};
use bytes::Bytes;
use redline_stats::ErrorKind;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

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
    want: Want,
    /// What was kept of the answer so far (as `want` asks).
    answer: Option<Box<Answer>>,
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
                    unprocessed: false,
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
                unprocessed: false,
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
        StreamPoll::End(Event::Failed {
            id,
            kind,
            message,
            unprocessed: e.reason() == Some(h2::Reason::REFUSED_STREAM),
        })
    };
    match &mut s.state {
        StreamState::Head(f) => match Pin::new(f).poll(cx) {
            Poll::Pending => StreamPoll::Pending,
            Poll::Ready(Err(e)) => failed(&e),
            Poll::Ready(Ok(resp)) => {
                let status = resp.status().as_u16();
                if s.want.any() {
                    s.answer = Some(Box::new(keep(s.want, status, resp.headers())));
                }
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
                        if let Some(c) = s
                            .answer
                            .as_deref_mut()
                            .and_then(|a| a.capture.as_deref_mut())
                        {
                            c.keep_body(&chunk);
                        }
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
                    answer: s.answer.take(),
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

    fn submit(&mut self, request: &H2Request, want: Want) -> Result<RequestId, SubmitError> {
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
            want,
            answer: None,
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

    fn cancel(&mut self, id: RequestId) {
        // Dropping the stream's handles resets it (CANCEL).
        self.streams.retain(|s| s.id != id);
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

/// What `want` asks to keep of a response head.
fn keep(want: Want, status: u16, headers: &http::HeaderMap) -> Answer {
    let text = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    Answer {
        server: want
            .server
            .then(|| headers.get(http::header::SERVER))
            .flatten()
            .map(|v| text(v).chars().take(200).collect()),
        location: (want.location && (300..400).contains(&status))
            .then(|| headers.get(http::header::LOCATION))
            .flatten()
            .map(text),
        capture: want.capture.map(|(want_headers, want_body)| {
            let mut c = Box::new(crate::h1::Capture {
                want_headers,
                want_body,
                ..Default::default()
            });
            if want_headers {
                for (k, v) in headers {
                    c.headers.push((k.as_str().to_string(), text(v)));
                }
            }
            c
        }),
    }
}
