//! The HTTP/1 driver: one worker thread with its own poller and
//! connections, moving bytes for the protocol-free core ([`Core`], every
//! load mode written once): the core decides what each slot sends and when;
//! this driver connects, writes, reads and reports what each slot's
//! [`H1Session`] (the protocol seam's sans-IO HTTP/1.1 session) says.
//!
//! The hot path per request is: submit the prebuilt request (a shared
//! buffer, not a copy), write it from there, read the response into the
//! worker's shared buffer, let the session parse it (with the worker's one
//! head memo), record into the worker's own histograms, and submit the next
//! request straight away. No lock, channel or shared counter is touched per
//! request (the ledger's counts are plain integers in the worker). Sockets
//! are registered once (edge-triggered, read and write interest), so a
//! request costs no `epoll_ctl`.
//!
//! This file holds the event loop and its wait; `worker/link.rs` the core's
//! seam ([`crate::core::Link`]), `worker/conns.rs` the connection slots and
//! time-out FIFOs, `worker/transport.rs` connects (the steps shared with
//! the multiplexing driver in `tcp.rs`), writes and reads.

mod conns;
mod link;
mod transport;
#[cfg(test)]
mod wire_tests;

use crate::core::spec::{WorkerResult, WorkerSpec};
use crate::core::{ConnState, Core};
use crate::h1::HeadMemo;
use crate::ioloop::{Sleeper, WAKE};
use crate::plan::Plan;
use crate::session::H1Request;
use crate::sys::io_msg;
use conns::{Conn, Fifo, NIL};
use mio::{Poll, Waker};
use std::sync::Arc;
use std::time::Instant;

const READ_BUF: usize = 64 * 1024;

/// The HTTP/1 driver's state: sockets, sessions, buffers, time-outs, timers.
pub(crate) struct H1Link {
    poll: Poll,
    conns: Vec<Conn>,
    buf: Box<[u8]>,
    /// The last plain response head parsed, to skip scanning its repeats
    /// (one for all the worker's sessions).
    memo: HeadMemo,
    /// The plan's request as the sessions take it: kept alive, and asking to close.
    request: H1Request,
    request_close: H1Request,
    /// Time-out FIFOs of requests in flight and of connects.
    request_timeouts: Fifo,
    connect_timeouts: Fifo,
    sleeper: Sleeper,
    /// Closed-loop deferred answers when the server is the bottleneck
    /// (`defer.rs`).
    defer: crate::defer::Defer,
}

/// Creates the worker's poller and waker (the waker lets Ctrl-C interrupt a poll).
pub fn make_poll() -> std::io::Result<(Poll, Arc<Waker>)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
    Ok((poll, waker))
}

/// Runs one worker to completion on the current thread.
pub fn run_worker(plan: &Plan, spec: WorkerSpec, poll: Poll) -> WorkerResult {
    let (mut link, slots) = H1Link::new(plan, &spec, poll);
    let mut core = Core::new(plan, spec, slots);
    crate::ioloop::run(&mut link, &mut core);
    let mut r = core.finish(&link);
    r.pacing = crate::ioloop::Driver::pacing(&mut link);
    r
}

impl H1Link {
    /// The driver of a worker asked `spec`, and its slots (a connection each).
    fn new(plan: &Plan, spec: &WorkerSpec, poll: Poll) -> (H1Link, usize) {
        let slots = spec.connections.min(u32::MAX as u64 - 2) as usize;
        let now = Instant::now();
        let (sleeper, defer) = crate::ioloop::waiting(&poll, plan, spec);
        let link = H1Link {
            defer,
            poll,
            conns: (0..slots).map(|_| Conn::new(now)).collect(),
            buf: vec![0u8; READ_BUF].into_boxed_slice(),
            memo: HeadMemo::new(),
            request: H1Request {
                wire: bytes::Bytes::copy_from_slice(&plan.request),
                head: plan.head_request,
            },
            request_close: H1Request {
                wire: bytes::Bytes::copy_from_slice(&plan.request_close),
                head: plan.head_request,
            },
            request_timeouts: Fifo {
                head: NIL,
                tail: NIL,
            },
            connect_timeouts: Fifo {
                head: NIL,
                tail: NIL,
            },
            sleeper,
        };
        (link, slots)
    }
}

impl crate::ioloop::Driver for H1Link {
    fn waiting(&mut self) -> (&mio::Poll, &mut Sleeper, &mut crate::defer::Defer) {
        (&self.poll, &mut self.sleeper, &mut self.defer)
    }

    fn first_deadline(&self) -> Option<Instant> {
        [self.request_timeouts.head, self.connect_timeouts.head]
            .into_iter()
            .filter(|&h| h != NIL)
            .map(|h| self.conns[h as usize].deadline)
            .min()
    }

    fn on_event(&mut self, core: &mut Core<'_>, token: usize, ev: crate::sys::Event) {
        let i = token as u32;
        if (i as usize) >= self.conns.len() {
            return;
        }
        match self.conns[i as usize].state {
            ConnState::Connecting => crate::tcp::connect_event(self, core, i),
            ConnState::Handshaking => crate::tcp::handshake(self, core, i),
            ConnState::Writing => {
                if ev.is_writable() || ev.is_error() {
                    self.write_more(core, i);
                }
                if self.conns[i as usize].state == ConnState::Reading
                    && (ev.is_readable() || ev.is_read_closed())
                {
                    self.on_readable(core, i, ev.is_read_closed() || ev.is_error());
                }
            }
            ConnState::Reading | ConnState::Idle => {
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.on_readable(core, i, ev.is_read_closed() || ev.is_error());
                }
            }
            ConnState::Closed => {}
        }
    }

    fn shutdown(&mut self, _core: &mut Core<'_>) {
        // Close what is left.
        for c in &mut self.conns {
            if let Some(s) = c.tcp.sock.take() {
                let _ = self.poll.registry().deregister(&mut { s });
            }
        }
    }
}
