//! The HTTP/2 connection driver on the protocol seam (issue 18): one task per
//! connection owns the socket (TCP, or TLS over it), a read buffer, a write
//! buffer and the connection's sans-IO [`Session`] (generic: monomorphized,
//! no `dyn` on the hot path). Its loop writes what the session has to send,
//! reads, hands the bytes to the session and delivers the session's events
//! to the streams waiting for them (a `Head` stamps the first byte's time; a
//! `Done` or `Failed` completes the request), until the session is closed or
//! no stream uses the connection any more and nothing waits; then it says
//! goodbye (GOAWAY(NO_ERROR), TLS close_notify, FIN), best effort and bounded.
//!
//! Streams (tasks on the same thread) talk to it through [`H2Conn`], a cheap
//! `Rc` handle: [`H2Conn::ready`] waits for a free stream (bounded by the
//! caller's time-out and the run's stop), [`H2Conn::send`] submits a request
//! and gives a [`Reply`] future for its answer (dropped before the answer:
//! the stream is cancelled; [`Reply::refusable`] also says whether the server
//! refused it unprocessed, so it may be sent again). Wake-ups: a submit wakes the connection task (a
//! task already woken is not queued twice, so every request submitted since
//! its last turn goes out in one write); each read batch wakes only the
//! streams whose requests it ended, once each.

use super::errors::{io_message, Fail};
use crate::h1::Capture;
use crate::session::{Event, RequestId, Session, SubmitError, Want};
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::Notify;

/// How much one read takes from the socket.
const READ_BUF: usize = 64 * 1024;

/// How long a closing connection may take to say goodbye.
const GOODBYE_WAIT: Duration = Duration::from_millis(100);

/// What was kept of a complete answer.
pub(super) struct Fetched {
    pub(super) first_byte: Instant,
    pub(super) status: u16,
    pub(super) body_bytes: u64,
    pub(super) server: Option<String>,
    /// The `Location` of a 3xx (with `-L`).
    pub(super) location: Option<String>,
    /// Scenario runs: the response's headers and body, as asked.
    pub(super) capture: Option<Box<Capture>>,
}

/// Why no stream could be had.
pub(super) enum Waited {
    /// The connection failed or closed.
    Failed(Fail),
    /// No stream within the time-out (a server whose
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` is 0, or whose streams never end).
    TimedOut,
    /// The run is stopping.
    Stopped,
}

/// A request waiting for its answer.
struct Slot {
    id: RequestId,
    first_byte: Option<Instant>,
    result: Option<Result<Fetched, Fail>>,
    /// The server refused it unprocessed (GOAWAY with a lower last stream
    /// id, or REFUSED_STREAM): it may be sent again (RFC 9113 §8.7).
    unprocessed: bool,
    waker: Option<Waker>,
}

/// The connection's state, shared by its task and its streams' handles.
struct State<S> {
    session: S,
    /// Requests submitted and not yet taken by their [`Reply`] (a handful:
    /// at most the connection's streams, so a scan is cheapest).
    slots: Vec<Slot>,
    /// The session may have bytes to write.
    dirty: bool,
    /// The connection task, to wake after a submit or cancel.
    task: Option<Waker>,
    /// Handles alive; with none and nothing waiting the connection ends.
    handles: usize,
    /// The connection task ended: the socket is closed.
    gone: bool,
    /// Why requests on this connection failed last (a closed connection's
    /// reason for the requests that find it closed).
    last_fail: Option<Fail>,
}

struct Inner<S> {
    state: RefCell<State<S>>,
    /// A stream may have become free (or the connection closed).
    room: Notify,
}

/// A stream's handle on its connection (see the module text).
pub(super) struct H2Conn<S: Session> {
    inner: Rc<Inner<S>>,
}

impl<S: Session> Clone for H2Conn<S> {
    fn clone(&self) -> Self {
        self.inner.state.borrow_mut().handles += 1;
        H2Conn {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Session> Drop for H2Conn<S> {
    fn drop(&mut self) {
        let mut st = self.inner.state.borrow_mut();
        st.handles -= 1;
        if st.handles == 0 {
            if let Some(t) = &st.task {
                t.wake_by_ref();
            }
        }
    }
}

fn closed_fail() -> Fail {
    (
        ErrorKind::Closed,
        "connection closed before the response was complete".into(),
    )
}

impl<S: Session> H2Conn<S> {
    /// A connected session's first handle and the future that drives it over
    /// `io` (spawn it); the future ends with the session's fatal message, if
    /// it has one.
    pub(super) fn start<T: AsyncRead + AsyncWrite + Unpin>(
        mut session: S,
        io: T,
    ) -> (H2Conn<S>, impl Future<Output = Option<String>>) {
        session.connect();
        let inner = Rc::new(Inner {
            state: RefCell::new(State {
                session,
                slots: Vec::new(),
                dirty: true,
                task: None,
                handles: 1,
                gone: false,
                last_fail: None,
            }),
            room: Notify::new(),
        });
        let task = drive(inner.clone(), io);
        (H2Conn { inner }, task)
    }

    /// The connection is closed (the tests tell it from retiring).
    #[cfg(test)]
    fn dead(&self) -> bool {
        let st = self.inner.state.borrow();
        st.gone || st.session.is_closed()
    }

    /// `Some(Ok)`: a stream is free now; `Some(Err)`: never again.
    fn room_now(&self) -> Option<Result<(), Fail>> {
        let st = self.inner.state.borrow();
        if st.gone || st.session.is_closed() {
            return Some(Err(st.last_fail.clone().unwrap_or_else(closed_fail)));
        }
        (st.session.capacity() > 0).then_some(Ok(()))
    }

    /// Waits until the connection may open a stream, at most `timeout` and
    /// not past `stop`: a server that allows no stream must not hold the run.
    pub(super) async fn ready(&self, timeout: Duration, stop: &Notify) -> Result<(), Waited> {
        // Nearly always free at once: then no timer or notification is set up.
        if let Some(r) = self.room_now() {
            return r.map_err(Waited::Failed);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let sleep = tokio::time::sleep_until(deadline);
        tokio::pin!(sleep);
        let stopped = stop.notified();
        tokio::pin!(stopped);
        // Each turn waits for a change (bounded by the deadline above).
        loop {
            let room = self.inner.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if let Some(r) = self.room_now() {
                return r.map_err(Waited::Failed);
            }
            tokio::select! {
                _ = &mut room => {}
                _ = &mut sleep => return Err(Waited::TimedOut),
                _ = &mut stopped => return Err(Waited::Stopped),
            }
        }
    }

    /// Submits a request (it goes out on the connection task's next turn);
    /// the [`Reply`] gives its answer. `Err`: it was not sent.
    pub(super) fn send(&self, request: &S::Request, want: Want) -> Result<Reply<S>, Fail> {
        let mut st = self.inner.state.borrow_mut();
        if st.gone {
            return Err(st.last_fail.clone().unwrap_or_else(closed_fail));
        }
        match st.session.submit(request, want) {
            Ok(id) => {
                st.slots.push(Slot {
                    id,
                    first_byte: None,
                    result: None,
                    unprocessed: false,
                    waker: None,
                });
                st.dirty = true;
                if let Some(t) = &st.task {
                    t.wake_by_ref();
                }
                Ok(Reply {
                    inner: self.inner.clone(),
                    id,
                    done: false,
                })
            }
            Err(SubmitError::Full) => Err((ErrorKind::Timeout, super::exchange::no_stream())),
            Err(SubmitError::Closed) => Err(st.last_fail.clone().unwrap_or_else(closed_fail)),
            Err(SubmitError::Invalid(m)) => Err((
                ErrorKind::Other,
                Cow::Owned(format!("cannot express the request in HTTP/2: {m}")),
            )),
        }
    }
}

/// A session that can say it takes no new stream ever again (HTTP/2: after
/// GOAWAY), while streams open on it may still end.
pub(super) trait Retiring {
    /// No new stream will ever be possible.
    fn retiring(&self) -> bool;
}

impl Retiring for crate::http2::Http2Session {
    fn retiring(&self) -> bool {
        crate::http2::Http2Session::retiring(self)
    }
}

impl<S: Session + Retiring> H2Conn<S> {
    /// The connection takes no new stream ever again (GOAWAY received, or
    /// closed): a stream without work should end, not take a request here.
    pub(super) fn retiring(&self) -> bool {
        let st = self.inner.state.borrow();
        st.gone || st.session.is_closed() || st.session.retiring()
    }
}

/// A submitted request's answer; dropped before it: the stream is cancelled.
pub(super) struct Reply<S: Session> {
    inner: Rc<Inner<S>>,
    id: RequestId,
    done: bool,
}

/// How a request ended that got no answer: why, and whether the server
/// said it did not process it (then it may be sent again).
pub(super) struct Unanswered {
    pub(super) fail: Fail,
    pub(super) unprocessed: bool,
}

impl Unanswered {
    /// A failure the server did not call unprocessed.
    pub(super) fn failed(fail: Fail) -> Unanswered {
        Unanswered {
            fail,
            unprocessed: false,
        }
    }
}

impl<S: Session> Reply<S> {
    /// This reply as a future that also says whether a failed request was
    /// refused unprocessed.
    pub(super) fn refusable(self) -> Refusable<S> {
        Refusable(self)
    }

    fn poll_answer(&mut self, cx: &mut Context<'_>) -> Poll<Result<Fetched, Unanswered>> {
        let id = self.id;
        let mut st = self.inner.state.borrow_mut();
        let Some(i) = st.slots.iter().position(|s| s.id == id) else {
            drop(st);
            self.done = true;
            return Poll::Ready(Err(Unanswered::failed(closed_fail())));
        };
        if st.slots[i].result.is_some() {
            let slot = st.slots.swap_remove(i);
            drop(st);
            self.done = true;
            let unprocessed = slot.unprocessed;
            let result = slot.result.unwrap_or_else(|| Err(closed_fail()));
            return Poll::Ready(result.map_err(|fail| Unanswered { fail, unprocessed }));
        }
        let slot = &mut st.slots[i];
        match &slot.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => slot.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<S: Session> Future for Reply<S> {
    type Output = Result<Fetched, Fail>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_answer(cx).map(|r| r.map_err(|u| u.fail))
    }
}

/// A [`Reply`] that keeps the `unprocessed` flag of a failure.
pub(super) struct Refusable<S: Session>(Reply<S>);

impl<S: Session> Future for Refusable<S> {
    type Output = Result<Fetched, Unanswered>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.poll_answer(cx)
    }
}

impl<S: Session> Drop for Reply<S> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut st = self.inner.state.borrow_mut();
        if let Some(i) = st.slots.iter().position(|s| s.id == self.id) {
            let slot = st.slots.swap_remove(i);
            if slot.result.is_none() && !st.gone {
                // Given up (its time-out): the stream is reset, the connection stays.
                st.session.cancel(self.id);
                st.dirty = true;
                if let Some(t) = &st.task {
                    t.wake_by_ref();
                }
            }
        }
    }
}

/// What one turn of the connection task found.
enum Turn {
    Read(usize),
    Failed(std::io::Error),
    /// Nothing uses the connection and nothing is owed: it closes.
    Idle,
}

/// The connection task (see the module text).
async fn drive<S: Session, T: AsyncRead + AsyncWrite + Unpin>(
    inner: Rc<Inner<S>>,
    mut io: T,
) -> Option<String> {
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut at = 0usize;
    let mut unflushed = false;
    let mut buf = vec![0u8; READ_BUF].into_boxed_slice();
    let mut graceful = false;
    let end: Fail = loop {
        let turn = poll_fn(|cx| {
            let mut st = inner.state.borrow_mut();
            // Write everything the session has (the streams' submits since
            // the last turn, window updates, acks) as one batch.
            loop {
                if at == out.len() {
                    out.clear();
                    at = 0;
                    if st.dirty {
                        st.dirty = false;
                        st.session.bytes_out(&mut out);
                    }
                    if out.is_empty() {
                        break;
                    }
                }
                match Pin::new(&mut io).poll_write(cx, &out[at..]) {
                    Poll::Ready(Ok(0)) => {
                        return Poll::Ready(Turn::Failed(std::io::ErrorKind::WriteZero.into()))
                    }
                    Poll::Ready(Ok(n)) => {
                        at += n;
                        unflushed = true;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Turn::Failed(e)),
                    Poll::Pending => break,
                }
            }
            // TLS keeps records it could not write yet: push them out.
            if unflushed && at == out.len() {
                match Pin::new(&mut io).poll_flush(cx) {
                    Poll::Ready(Ok(())) => unflushed = false,
                    Poll::Ready(Err(e)) => return Poll::Ready(Turn::Failed(e)),
                    Poll::Pending => {}
                }
            }
            let owed = !st.slots.is_empty() || at < out.len();
            if !owed && (st.handles == 0 || st.session.is_closed()) {
                return Poll::Ready(Turn::Idle);
            }
            let mut rb = ReadBuf::new(&mut buf);
            match Pin::new(&mut io).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => return Poll::Ready(Turn::Read(rb.filled().len())),
                Poll::Ready(Err(e)) => return Poll::Ready(Turn::Failed(e)),
                Poll::Pending => {}
            }
            match &st.task {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => st.task = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await;
        let mut st = inner.state.borrow_mut();
        match turn {
            Turn::Read(0) => {
                st.session.eof();
                deliver(&mut st);
                break closed_fail();
            }
            Turn::Read(n) => {
                st.session.bytes_in(&buf[..n]);
                st.dirty = true;
                deliver(&mut st);
                drop(st);
                // Capacity may have grown (a stream ended, new settings).
                inner.room.notify_waiters();
            }
            Turn::Failed(e) => {
                let kind = match e.kind() {
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::UnexpectedEof => {
                        break closed_fail()
                    }
                    _ => ErrorKind::from_io(&e, false),
                };
                break (kind, io_message(&e));
            }
            Turn::Idle => {
                graceful = true;
                break closed_fail();
            }
        }
    };
    let (fatal, bye) = end_streams(&inner, end, graceful);
    inner.room.notify_waiters();
    if graceful {
        // The client closes: GOAWAY (HTTP/2), TLS close_notify, FIN. Best
        // effort and bounded: a peer that reads nothing does not hold it.
        let _ = tokio::time::timeout(GOODBYE_WAIT, async {
            if !bye.is_empty() {
                io.write_all(&bye).await?;
            }
            io.shutdown().await
        })
        .await;
    }
    fatal
}

/// The connection task ended with `end`: fails the requests still waiting
/// (with the session's own reason when it had one). Returns the session's
/// fatal message and, when the client closes (`graceful`), what it says
/// before it goes.
fn end_streams<S: Session>(
    inner: &Inner<S>,
    end: Fail,
    graceful: bool,
) -> (Option<String>, Vec<u8>) {
    let mut st = inner.state.borrow_mut();
    st.gone = true;
    st.task = None;
    let end = st
        .last_fail
        .clone()
        .filter(|_| end.0 == ErrorKind::Closed)
        .unwrap_or(end);
    for slot in st.slots.iter_mut().filter(|s| s.result.is_none()) {
        slot.result = Some(Err(end.clone()));
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
    st.last_fail.get_or_insert(end);
    let fatal = st.session.fatal().map(str::to_string);
    let mut bye = Vec::new();
    if graceful {
        st.session.close();
        st.session.bytes_out(&mut bye);
    }
    (fatal, bye)
}

/// Hands the session's events to the requests waiting for them.
fn deliver<S: Session>(st: &mut State<S>) {
    let mut now = None;
    // One event per request step at most; bounded by what the session queued.
    while let Some(ev) = st.session.poll_event() {
        let at = *now.get_or_insert_with(Instant::now);
        let id = match &ev {
            Event::Head { id, .. } | Event::Done { id, .. } | Event::Failed { id, .. } => *id,
        };
        let Some(slot) = st.slots.iter_mut().find(|s| s.id == id) else {
            continue; // cancelled
        };
        match ev {
            Event::Head { .. } => {
                slot.first_byte.get_or_insert(at);
                continue;
            }
            Event::Done {
                status,
                body_bytes,
                answer,
                ..
            } => {
                let (server, location, capture) = match answer {
                    Some(a) => {
                        let a = *a;
                        (a.server, a.location, a.capture)
                    }
                    None => (None, None, None),
                };
                slot.result = Some(Ok(Fetched {
                    first_byte: slot.first_byte.unwrap_or(at),
                    status,
                    body_bytes,
                    server,
                    location,
                    capture,
                }));
            }
            Event::Failed {
                kind,
                message,
                unprocessed,
                ..
            } => {
                // A request the server did not process fails with the
                // server's reason and the flag: the stream may send it again.
                slot.result = Some(Err((kind, message.clone())));
                slot.unprocessed = unprocessed;
                st.last_fail = Some((kind, message));
                let slot = st.slots.iter_mut().find(|s| s.id == id);
                if let Some(w) = slot.and_then(|s| s.waker.take()) {
                    w.wake();
                }
                continue;
            }
        }
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http2::frame;
    use crate::http2::{Http2Request, Http2Session};
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    /// Reads one frame from the client: (type, flags, stream).
    async fn read_frame(s: &mut DuplexStream) -> (u8, u8, u32) {
        let mut h = [0u8; 9];
        s.read_exact(&mut h).await.unwrap();
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).await.unwrap();
        let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        (h[3], h[4], id)
    }

    /// Runs `f` on a current-thread runtime with a local task set (the
    /// connection task is `!Send`, as in the driver).
    fn on_one_thread(f: impl std::future::Future<Output = ()>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f);
    }

    /// A plain GET.
    fn get() -> Http2Request {
        Http2Request::from_parts("GET", "http", "a.test", "/", &[], Default::default()).unwrap()
    }

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        frame::write_head(&mut f, payload.len(), kind, flags, stream);
        f.extend_from_slice(payload);
        f
    }

    /// Two requests on one connection: the answer reaches its stream with
    /// its first-byte time and body size; the other stream's reply dropped
    /// before its answer resets that stream (CANCEL) and the connection
    /// stays; with no handle left and nothing owed the task ends.
    #[test]
    fn answers_reach_their_streams_and_a_dropped_reply_cancels() {
        on_one_thread(async {
            let (client, mut server) = tokio::io::duplex(1 << 16);
            let (conn, task) = H2Conn::start(Http2Session::new(), client);
            let task = tokio::task::spawn_local(task);
            let req = get();
            let never = Notify::new();
            assert!(conn.ready(Duration::from_secs(5), &never).await.is_ok());
            let first = conn.send(&req, Want::NOTHING).unwrap();
            let second = conn.send(&req, Want::NOTHING).unwrap();
            let check = async {
                let mut preface = [0u8; 24];
                server.read_exact(&mut preface).await.unwrap();
                assert_eq!(&preface[..3], b"PRI");
                let mut heads = Vec::new();
                // Settings, a window update, then the two requests' HEADERS.
                for _ in 0..16 {
                    let (kind, _, id) = read_frame(&mut server).await;
                    if kind == frame::HEADERS {
                        heads.push(id);
                        if heads.len() == 2 {
                            break;
                        }
                    }
                }
                assert_eq!(heads, [1, 3]);
                let mut out = frame(frame::SETTINGS, 0, 0, &[]);
                // :status 200 (static table index 8), then "hello".
                out.extend(frame(frame::HEADERS, frame::END_HEADERS, 1, &[0x88]));
                out.extend(frame(frame::DATA, frame::END_STREAM, 1, b"hello"));
                server.write_all(&out).await.unwrap();
                let got = first.await.unwrap();
                assert_eq!((got.status, got.body_bytes), (200, 5));
                drop(second);
                // The client acknowledges the settings and resets stream 3.
                let mut reset = None;
                for _ in 0..16 {
                    let (kind, _, id) = read_frame(&mut server).await;
                    if kind == frame::RST_STREAM {
                        reset = Some(id);
                        break;
                    }
                }
                assert_eq!(reset, Some(3));
                assert!(!conn.dead());
                drop(conn);
                assert_eq!(task.await.unwrap(), None);
                // Nothing left to do: the client says goodbye with
                // GOAWAY(NO_ERROR, last stream 0), then closes.
                let mut rest = Vec::new();
                server.read_to_end(&mut rest).await.unwrap();
                assert_eq!(rest, frame(frame::GOAWAY, 0, 0, &[0; 8]));
            };
            tokio::time::timeout(Duration::from_secs(10), check)
                .await
                .expect("the exchange finished");
        });
    }

    /// GOAWAY naming stream 1 as the last processed, with streams 1, 3 and 5
    /// open, and RST_STREAM(REFUSED_STREAM) on 3: stream 1 is answered, 3
    /// and 5 fail flagged unprocessed (may be sent again), and the
    /// connection is retiring (takes no new stream) before it closes.
    #[test]
    fn refused_requests_are_flagged_unprocessed_and_the_connection_retires() {
        on_one_thread(async {
            let (client, mut server) = tokio::io::duplex(1 << 16);
            let (conn, task) = H2Conn::start(Http2Session::new(), client);
            let _task = tokio::task::spawn_local(task);
            let req = get();
            let replies: Vec<_> = (0..3)
                .map(|_| conn.send(&req, Want::NOTHING).unwrap().refusable())
                .collect();
            assert!(!conn.retiring());
            let check = async {
                let mut preface = [0u8; 24];
                server.read_exact(&mut preface).await.unwrap();
                let mut heads = Vec::new();
                for _ in 0..16 {
                    let (kind, _, id) = read_frame(&mut server).await;
                    if kind == frame::HEADERS {
                        heads.push(id);
                        if heads.len() == 3 {
                            break;
                        }
                    }
                }
                assert_eq!(heads, [1, 3, 5]);
                let mut out = frame(frame::SETTINGS, 0, 0, &[]);
                // RST_STREAM(3, REFUSED_STREAM = 7), GOAWAY(last 1, NO_ERROR).
                out.extend(frame(frame::RST_STREAM, 0, 3, &7u32.to_be_bytes()));
                let mut ga = 1u32.to_be_bytes().to_vec();
                ga.extend_from_slice(&0u32.to_be_bytes());
                out.extend(frame(frame::GOAWAY, 0, 0, &ga));
                out.extend(frame(frame::HEADERS, frame::END_HEADERS, 1, &[0x88]));
                server.write_all(&out).await.unwrap();
                let mut replies = replies.into_iter();
                let first = replies.next().unwrap();
                let mut got = Vec::new();
                for r in replies {
                    got.push(
                        r.await
                            .map(|f| f.status)
                            .map_err(|u| (u.fail.0, u.unprocessed)),
                    );
                }
                assert_eq!(got[0], Err((ErrorKind::StreamReset, true)));
                assert_eq!(got[1], Err((ErrorKind::GoAway, true)));
                // Stream 1 still open: the connection takes no new stream,
                // and is not closed yet; its answer is not refused.
                assert!(conn.retiring() && !conn.dead());
                server
                    .write_all(&frame(frame::DATA, frame::END_STREAM, 1, b"ok"))
                    .await
                    .unwrap();
                let answer = first.await.map_err(|u| u.unprocessed);
                assert_eq!(
                    answer.map(|f| (f.status, f.body_bytes)).ok(),
                    Some((200, 2))
                );
                got
            };
            let got = tokio::time::timeout(Duration::from_secs(10), check)
                .await
                .expect("the exchange finished");
            assert_eq!(got.len(), 2);
        });
    }
}
