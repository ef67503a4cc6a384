//! The sans-IO protocol seam (issue 18): one [`Session`] per connection, fed
//! bytes by whoever owns the socket and asked for the bytes to write, in the
//! shape of h2load's `Session` (connect, submit a request, bytes in, bytes
//! out, how many more requests it takes now) with the answers as [`Event`]s
//! (response head, body done, failure). No socket, timer or task lives here,
//! so every session is tested with byte buffers alone.
//!
//! - [`H1Session`] (`session/h1.rs`): HTTP/1.1 over the engine's own sans-IO reader
//!   ([`crate::h1::ResponseReader`], heads scanned by `crate::head`, with the
//!   worker's [`HeadMemo`]); requests are pre-encoded bytes; pipelining up to
//!   a depth (1: plain keep-alive).
//! - [`Http2Session`] (`crate::http2`): redline's own sans-IO HTTP/2 client
//!   codec (frames, HPACK with a table-driven Huffman decoder, request
//!   header blocks encoded once, streams in a slab, flow control): a submit
//!   is a copy of the request's block behind a frame header, an answer is
//!   decoded without allocating (only `:status`, `content-length` and what
//!   [`Want`] asks). The HTTP/2 load driver (`mux/`) runs every connection
//!   on it; it replaced an adapter
//!   over the `h2` crate (async, not sans-IO), which cost a poll of every
//!   open stream per call.
//! - [`crate::http3::Http3Session`]: HTTP/3 over QUIC (`quinn-proto`, sans-IO),
//!   redline's own HTTP/3 frames and static-table QPACK on its streams; its
//!   "bytes" are UDP datagrams (one per `bytes_in`, one per `pending_out`),
//!   and QUIC's timer is two methods of its own (`deadline`, `on_timeout`).
//!   It reads no clock: its calls take the driver's time, or keep the latest
//!   one ([`Session::set_time`]), so unit tests drive QUIC in made-up time.
//!
//! Both drivers run on this trait, statically dispatched (no trait object):
//! the HTTP/1 worker (`worker/`, mio) keeps an [`H1Session`] per connection
//! slot, submits each request to it, writes [`Session::pending_out`] straight
//! from the session's buffer (the plan's shared bytes), feeds what it reads
//! to [`H1Session::bytes_in_memo`] (the worker's one head memo) and acts on
//! the events; the multiplexing driver (`mux/`, mio) keeps an
//! [`Http2Session`] (or an `Http3Session` on a UDP socket) per connection, or
//! an [`H1Session`] where another origin picked HTTP/1.1, and hands each
//! event to the core for its slot.

mod h1;
#[cfg(test)]
mod tests;

pub use h1::{H1Request, H1Session};

pub use crate::http2::{Http2Request, Http2Session};

use crate::h1::Capture;
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::time::Instant;

/// A request's number on its session, in submission order from 0.
pub type RequestId = u64;

/// What the driver wants kept of an answer besides its status and size
/// (nothing, on the hot path: then no header is copied).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Want {
    /// The `Server` and `Alt-Svc` headers (the record names the server
    /// software, and an HTTP/3 offer, once).
    pub server: bool,
    /// The `Location` header of a 3xx (`-L`).
    pub location: bool,
    /// Scenario runs: keep the headers and/or the body (up to
    /// [`crate::h1::MAX_CAPTURE`]) for checks, extraction and cookies.
    pub capture: Option<(bool, bool)>,
    /// The most body bytes kept with `capture` ([`crate::h1::MAX_CAPTURE`]
    /// for load runs; `page` keeps as much as its own loaders do).
    pub capture_max: usize,
}

impl Want {
    /// Nothing besides status and size.
    pub const NOTHING: Want = Want {
        server: false,
        location: false,
        capture: None,
        capture_max: crate::h1::MAX_CAPTURE,
    };

    /// Anything at all is wanted.
    pub fn any(&self) -> bool {
        self.server || self.location || self.capture.is_some()
    }
}

/// What was kept of an answer, as [`Want`] asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// The `Server` header (at most 200 characters).
    pub server: Option<String>,
    /// The `Alt-Svc` header (with [`Want::server`]; several lines joined
    /// with `, `; at most 200 characters).
    pub alt_svc: Option<String>,
    /// The `Location` header of a 3xx.
    pub location: Option<String>,
    /// Headers and body for a scenario.
    pub capture: Option<Box<Capture>>,
}

/// What a session learned from the bytes it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The final response head of a request arrived while its body is not
    /// complete yet (the driver stamps the first byte's time; 1xx heads are
    /// not reported; a [`Event::Done`] without a `Head` before it means the
    /// head came with the rest of the answer).
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
        /// What [`Want`] asked to keep (None when nothing was asked).
        answer: Option<Box<Answer>>,
    },
    /// A request failed (the connection may be gone: see [`Session::is_closed`]).
    Failed {
        /// The request.
        id: RequestId,
        /// Why.
        kind: ErrorKind,
        /// A short message (never a header value).
        message: Cow<'static, str>,
        /// The server said it did not process the request (HTTP/2 GOAWAY
        /// with a lower last stream id, or REFUSED_STREAM): it may be sent
        /// again on another connection.
        unprocessed: bool,
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
    /// A request in this protocol's form (built once from the plan's
    /// `RequestSpec` and reused).
    type Request;
    /// Starts the connection (queues the protocol's preface, if it has one).
    fn connect(&mut self);
    /// The driver's time, for the calls after it that carry none
    /// (`bytes_in`, `consume_out`, `submit`, `cancel`, `close`). A session
    /// with timers of its own reads no clock, so a test's made-up time
    /// reaches them: HTTP/3 keeps the latest time it was given (here, or by
    /// its own calls that take one) for QUIC. HTTP/1.1 and HTTP/2 have no
    /// timer of their own (the driver times their requests) and ignore it.
    fn set_time(&mut self, _now: Instant) {}
    /// How many more requests it takes now.
    fn capacity(&self) -> usize;
    /// Queues a request; its answer comes as events with the returned id,
    /// keeping what `want` asks.
    fn submit(&mut self, request: &Self::Request, want: Want) -> Result<RequestId, SubmitError>;
    /// The driver gave up on a request (its time-out): HTTP/2 resets the
    /// stream (CANCEL) and the connection stays; HTTP/1.1 cannot take a
    /// request back, so the session closes. No event follows for `id`.
    fn cancel(&mut self, id: RequestId);
    /// Bytes read from the connection.
    fn bytes_in(&mut self, data: &[u8]);
    /// The peer closed the connection: requests without a complete answer fail.
    fn eof(&mut self);
    /// The bytes to write next (empty: nothing now); written straight from
    /// the session's buffer, then [`consume_out`](Self::consume_out).
    fn pending_out(&self) -> &[u8];
    /// `n` bytes of [`pending_out`](Self::pending_out) were written.
    fn consume_out(&mut self, n: usize);
    /// Moves all the bytes to write to `out` (appended); how many.
    fn bytes_out(&mut self, out: &mut Vec<u8>) -> usize {
        let mut n = 0;
        loop {
            let chunk = self.pending_out();
            if chunk.is_empty() {
                return n;
            }
            out.extend_from_slice(chunk);
            let k = chunk.len();
            n += k;
            self.consume_out(k);
        }
    }
    /// The next event, oldest first.
    fn poll_event(&mut self) -> Option<Event>;
    /// The driver is done with an answer of an [`Event::Done`]: its storage
    /// (a capture's buffers) may be reused for a later one.
    fn recycle(&mut self, answer: Box<Answer>) {
        drop(answer);
    }
    /// No request will be taken again (closed, failed, or `Connection: close`).
    fn is_closed(&self) -> bool;
    /// The client closes the connection, nothing outstanding: queue what the
    /// protocol says before it goes (HTTP/2: GOAWAY(NO_ERROR), RFC 9113
    /// §6.8); nothing is taken after. HTTP/1.1 says nothing.
    fn close(&mut self) {}
    /// The peer cannot speak this protocol at all (for HTTP/2: an HTTP/1
    /// answer to the connection preface): the whole run should stop with
    /// this message rather than retry.
    fn fatal(&self) -> Option<&str> {
        None
    }
}
