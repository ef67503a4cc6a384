//! HTTP/1.1 behind the [`Session`] seam: pre-encoded request bytes out, the
//! engine's own incremental reader ([`ResponseReader`] with a [`HeadMemo`])
//! over the bytes in; answers come in submission order (pipelining up to a
//! depth).
//!
//! The HTTP/1 worker keeps one session per connection slot (10,000 slots in
//! about 11 MB), so the common case, one request at a time, lives inline:
//! the request's bytes are a shared [`Bytes`] (the plan's own, not a copy),
//! and the one event not yet polled is a field. Pipelined requests, further
//! events, an answer the driver handed back ([`Session::recycle`], reused for
//! the next) and a memo of the session's own live in a box made only when
//! used (a slot of a plain run never makes it).

use super::{Answer, Event, RequestId, Session, SubmitError, Want};
use crate::h1::{HeadMemo, Progress, ResponseReader};
use bytes::Bytes;
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::collections::VecDeque;

/// An HTTP/1.1 request as bytes on the wire (from the plan, built once).
#[derive(Debug, Clone)]
pub struct H1Request {
    /// The request line, headers and body, framed.
    pub wire: Bytes,
    /// A HEAD request (its answer has no body whatever its headers say).
    pub head: bool,
}

/// A request without a complete answer: what its answer needs.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    head: bool,
    want: Want,
}

/// What only pipelining, a burst of events or [`Session::bytes_in`] needs.
#[derive(Debug, Default)]
struct Extra {
    /// Requests behind the oldest one, oldest first.
    behind: VecDeque<Waiting>,
    /// Bytes of requests submitted behind the ones in `out`, in order.
    unsent: VecDeque<Bytes>,
    /// Events behind `ready`, oldest first.
    events: VecDeque<Event>,
    /// The memo for [`Session::bytes_in`] (a driver with many sessions
    /// shares one through [`H1Session::bytes_in_memo`]).
    memo: HeadMemo,
    /// An answer handed back by the driver, reused for the next one.
    spare: Option<Box<Answer>>,
}

/// HTTP/1.1 over [`ResponseReader`]: answers come in submission order.
#[derive(Debug)]
pub struct H1Session {
    reader: ResponseReader,
    /// The oldest request's bytes not yet written (from `out_at`).
    out: Bytes,
    out_at: u32,
    /// The oldest event not yet polled (the rest, if any, in `extra`).
    ready: Option<Event>,
    /// The oldest request without a complete answer.
    front: Option<Waiting>,
    /// The next request's id; the front's is this minus the waiting count.
    next_id: RequestId,
    extra: Option<Box<Extra>>,
    depth: u16,
    /// The reader was set up for the front request's [`Want`].
    armed: bool,
    /// The head of the front request was reported.
    head_told: bool,
    closed: bool,
}

impl Default for H1Session {
    fn default() -> Self {
        H1Session::new(1)
    }
}

impl H1Session {
    /// A session sending up to `depth` requests before their answers (1: no pipelining).
    pub fn new(depth: usize) -> H1Session {
        H1Session {
            reader: ResponseReader::new(),
            out: Bytes::new(),
            out_at: 0,
            ready: None,
            front: None,
            next_id: 0,
            extra: None,
            depth: depth.clamp(1, u16::MAX as usize) as u16,
            armed: false,
            head_told: false,
            closed: false,
        }
    }

    /// Ready for a new connection: nothing waiting, nothing to write, open
    /// (the reader's buffers and a recycled answer are kept; ids go on).
    pub fn reset(&mut self) {
        self.reader.reset();
        self.out = Bytes::new();
        self.out_at = 0;
        self.ready = None;
        self.front = None;
        self.armed = false;
        self.head_told = false;
        self.closed = false;
        if let Some(x) = self.extra.as_deref_mut() {
            x.behind.clear();
            x.unsent.clear();
            x.events.clear();
        }
    }

    /// Informational (1xx) answers skipped so far for the front request.
    #[inline]
    pub fn informational(&self) -> u32 {
        self.reader.informational
    }

    /// A byte of the front request's final answer has arrived (the
    /// driver's first-byte clock restarts after a 1xx otherwise).
    #[inline]
    pub fn final_started(&self) -> bool {
        self.reader.final_started()
    }

    #[inline]
    fn extra(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Box::default)
    }

    #[inline]
    fn waiting(&self) -> usize {
        self.front.is_some() as usize + self.extra.as_ref().map_or(0, |x| x.behind.len())
    }

    #[inline]
    fn front_id(&self) -> RequestId {
        self.next_id - self.waiting() as u64
    }

    #[inline]
    fn push(&mut self, ev: Event) {
        if self.ready.is_none() {
            // (`ready` is empty only when no event is queued behind it.)
            self.ready = Some(ev);
        } else {
            self.extra().events.push_back(ev);
        }
    }

    /// The front request's answer is complete or failed: the next comes forward.
    #[inline]
    fn pop_front(&mut self) {
        self.front = self.extra.as_mut().and_then(|x| x.behind.pop_front());
        self.head_told = false;
        self.armed = false;
    }

    /// Fails every waiting request and closes.
    fn fail_all(&mut self, kind: ErrorKind, message: Cow<'static, str>) {
        while self.front.is_some() {
            let id = self.front_id();
            self.pop_front();
            self.push(Event::Failed {
                id,
                kind,
                message: message.clone(),
                unprocessed: false,
            });
        }
        self.closed = true;
    }

    /// Sets the reader up for what the front request wants kept.
    #[inline]
    fn arm(&mut self, want: Want) {
        if self.armed {
            return;
        }
        self.armed = true;
        self.reader.want_server = want.server;
        self.reader.want_location = want.location;
        self.reader.capture = want.capture.map(|(headers, body)| {
            let mut cap = self
                .extra
                .as_mut()
                .and_then(|x| x.spare.as_mut())
                .and_then(|a| a.capture.take())
                .unwrap_or_default();
            cap.want_headers = headers;
            cap.want_body = body;
            cap.max = want.capture_max;
            cap.headers.clear();
            cap.body.clear();
            cap.truncated = false;
            cap
        });
    }

    /// What the reader kept of the answer just completed.
    #[inline]
    fn answer(&mut self, want: Want) -> Option<Box<Answer>> {
        if !want.any() {
            return None;
        }
        let mut a = self
            .extra
            .as_mut()
            .and_then(|x| x.spare.take())
            .unwrap_or_default();
        a.server = self.reader.take_server();
        a.alt_svc = self.reader.take_alt_svc();
        a.location = self.reader.take_location();
        a.capture = self.reader.capture.take();
        Some(a)
    }

    /// [`Session::bytes_in`] with a [`HeadMemo`] the driver shares among its
    /// sessions (a head identical to the last one parsed is not scanned again).
    pub fn bytes_in_memo(&mut self, mut data: &[u8], memo: &mut HeadMemo) {
        while !data.is_empty() {
            let Some(Waiting { head, want }) = self.front else {
                // Bytes before any request, or after the last answer: the
                // connection cannot be trusted.
                self.closed = true;
                return;
            };
            let id = self.front_id();
            self.arm(want);
            match self.reader.feed_memo(data, head, Some(memo)) {
                Ok(Progress::NeedMore) => {
                    if self.reader.head_done && !self.head_told {
                        self.head_told = true;
                        self.push(Event::Head {
                            id,
                            status: self.reader.status,
                        });
                    }
                    return;
                }
                Ok(Progress::Done { used }) => {
                    let status = self.reader.status;
                    let answer = self.answer(want);
                    self.push(Event::Done {
                        id,
                        status,
                        body_bytes: self.reader.body_bytes,
                        answer,
                    });
                    self.pop_front();
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
                }
                Err(m) => {
                    self.fail_all(ErrorKind::Malformed(m.kind), m.message.into());
                    return;
                }
            }
        }
    }
}

impl Session for H1Session {
    type Request = H1Request;

    fn connect(&mut self) {}

    #[inline]
    fn capacity(&self) -> usize {
        if self.closed {
            0
        } else {
            (self.depth as usize).saturating_sub(self.waiting())
        }
    }

    #[inline]
    fn submit(&mut self, request: &H1Request, want: Want) -> Result<RequestId, SubmitError> {
        if self.closed {
            return Err(SubmitError::Closed);
        }
        if self.capacity() == 0 {
            return Err(SubmitError::Full);
        }
        let id = self.next_id;
        self.next_id += 1;
        let w = Waiting {
            head: request.head,
            want,
        };
        if self.front.is_none() {
            self.front = Some(w);
        } else {
            self.extra().behind.push_back(w);
        }
        if self.out_at as usize >= self.out.len() {
            self.out = request.wire.clone();
            self.out_at = 0;
        } else {
            self.extra().unsent.push_back(request.wire.clone());
        }
        Ok(id)
    }

    fn bytes_in(&mut self, data: &[u8]) {
        let mut memo = std::mem::take(&mut self.extra().memo);
        self.bytes_in_memo(data, &mut memo);
        self.extra().memo = memo;
    }

    fn eof(&mut self) {
        if let Some(Waiting { want, .. }) = self.front {
            if self.reader.head_done && self.reader.eof() {
                // A body delimited by the close is complete now.
                let id = self.front_id();
                let status = self.reader.status;
                let answer = self.answer(want);
                self.push(Event::Done {
                    id,
                    status,
                    body_bytes: self.reader.body_bytes,
                    answer,
                });
                self.pop_front();
            }
        }
        let message = if self.front.is_some() && !self.reader.started() {
            "connection closed before any response"
        } else {
            "connection closed before the response was complete"
        };
        self.fail_all(ErrorKind::Closed, message.into());
    }

    fn cancel(&mut self, id: RequestId) {
        // HTTP/1.1 cannot take one request back: the connection goes, and
        // the requests behind it fail (the cancelled one has no event).
        let first = self.front_id();
        if id < first || id >= self.next_id {
            return;
        }
        let mut k = first;
        while self.front.is_some() {
            self.pop_front();
            if k != id {
                self.push(Event::Failed {
                    id: k,
                    kind: ErrorKind::Closed,
                    message: "the connection was closed after a request timed out".into(),
                    unprocessed: false,
                });
            }
            k += 1;
        }
        self.closed = true;
    }

    #[inline]
    fn pending_out(&self) -> &[u8] {
        &self.out[(self.out_at as usize).min(self.out.len())..]
    }

    #[inline]
    fn consume_out(&mut self, n: usize) {
        let at = self.out_at as usize + n;
        self.out_at = at.min(u32::MAX as usize) as u32;
        if at >= self.out.len() {
            // (A written request's bytes stay until the next submit replaces
            // them: one reference count change per request, not two.)
            if let Some(next) = self.extra.as_mut().and_then(|x| x.unsent.pop_front()) {
                self.out = next;
                self.out_at = 0;
            }
        }
    }

    #[inline]
    fn poll_event(&mut self) -> Option<Event> {
        let ev = self.ready.take()?;
        if let Some(x) = self.extra.as_deref_mut() {
            self.ready = x.events.pop_front();
        }
        Some(ev)
    }

    fn recycle(&mut self, answer: Box<Answer>) {
        // Only a capture's buffers are worth keeping (and the box to keep
        // them in): a `Server` or `Location` alone is not made again.
        if answer.capture.is_some() {
            self.extra().spare = Some(answer);
        }
    }

    #[inline]
    fn is_closed(&self) -> bool {
        self.closed
    }
}
