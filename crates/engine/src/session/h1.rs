//! HTTP/1.1 behind the [`Session`] seam: pre-encoded request bytes out, the
//! engine's own incremental reader ([`ResponseReader`] with a [`HeadMemo`])
//! over the bytes in; answers come in submission order (pipelining up to a
//! depth).

use super::{Answer, Event, RequestId, Session, SubmitError, Want};
use crate::h1::{Capture, HeadMemo, Progress, ResponseReader};
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

/// HTTP/1.1 over [`ResponseReader`]: answers come in submission order.
#[derive(Debug)]
pub struct H1Session {
    reader: ResponseReader,
    memo: HeadMemo,
    /// Requests written or to be written, without a complete answer (id, HEAD, want).
    waiting: VecDeque<(RequestId, bool, Want)>,
    /// The reader was set up for the oldest waiting request's [`Want`].
    armed: bool,
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
            armed: false,
            out: Vec::new(),
            depth: depth.max(1),
            next_id: 0,
            closed: false,
            events: VecDeque::new(),
        }
    }

    /// Fails every waiting request and closes.
    fn fail_all(&mut self, kind: ErrorKind, message: Cow<'static, str>) {
        for (id, _, _) in self.waiting.drain(..) {
            self.events.push_back(Event::Failed {
                id,
                kind,
                message: message.clone(),
                unprocessed: false,
            });
        }
        self.closed = true;
    }

    /// Sets the reader up for what the oldest waiting request wants kept.
    fn arm(&mut self, want: Want) {
        if self.armed {
            return;
        }
        self.armed = true;
        self.reader.want_server = want.server;
        self.reader.want_location = want.location;
        self.reader.capture = want.capture.map(|(headers, body)| {
            Box::new(Capture {
                want_headers: headers,
                want_body: body,
                ..Capture::default()
            })
        });
    }

    /// What the reader kept of the answer just completed.
    fn answer(&mut self, want: Want) -> Option<Box<Answer>> {
        if !want.any() {
            return None;
        }
        Some(Box::new(Answer {
            server: self.reader.server.take(),
            location: self.reader.location.take(),
            capture: self.reader.capture.take(),
        }))
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

    fn submit(&mut self, request: &H1Request, want: Want) -> Result<RequestId, SubmitError> {
        if self.closed {
            return Err(SubmitError::Closed);
        }
        if self.capacity() == 0 {
            return Err(SubmitError::Full);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.out.extend_from_slice(&request.wire);
        self.waiting.push_back((id, request.head, want));
        Ok(id)
    }

    fn bytes_in(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let Some(&(id, head, want)) = self.waiting.front() else {
                if !self.closed {
                    // Bytes before any request, or after the last answer.
                    self.closed = true;
                }
                return;
            };
            self.arm(want);
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
                    let answer = self.answer(want);
                    self.events.push_back(Event::Done {
                        id,
                        status,
                        body_bytes: self.reader.body_bytes,
                        answer,
                    });
                    self.waiting.pop_front();
                    self.head_told = false;
                    self.armed = false;
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
        if let Some(&(id, _, want)) = self.waiting.front() {
            if self.reader.eof() {
                // A body delimited by the close is complete now.
                let status = self.reader.status;
                let answer = self.answer(want);
                self.events.push_back(Event::Done {
                    id,
                    status,
                    body_bytes: self.reader.body_bytes,
                    answer,
                });
                self.waiting.pop_front();
            }
        }
        self.fail_all(
            ErrorKind::Closed,
            "connection closed before the response was complete".into(),
        );
    }

    fn cancel(&mut self, id: RequestId) {
        // HTTP/1.1 cannot take one request back: the connection goes, and
        // the requests behind it fail.
        if let Some(at) = self.waiting.iter().position(|w| w.0 == id) {
            self.waiting.remove(at);
            self.fail_all(
                ErrorKind::Closed,
                "the connection was closed after a request timed out".into(),
            );
        }
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
