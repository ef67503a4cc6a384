//! The HTTP/1 driver's connection table: a connection per slot (its socket
//! and TLS session, `tcp.rs`'s [`Tcp`], its HTTP/1.1 [`H1Session`] and the
//! timing of the request it carries) and the two intrusive time-out FIFOs
//! threaded through the slots (requests and connects have
//! fixed time-outs, so deadlines arrive in order: O(1) per request, memory
//! O(connections); scenario requests with their own time-outs are inserted in
//! order, `push_sorted`).

use super::H1Link;
use crate::core::ConnState;
use crate::session::H1Session;
use crate::tcp::Tcp;
use std::time::Instant;

pub(super) const NIL: u32 = u32::MAX;

/// Which time-out FIFO a slot is linked into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TimeoutList {
    /// Neither.
    None,
    /// A request in flight (`--timeout`).
    Requests,
    /// A connect or TLS handshake (`--connect-timeout`).
    Connects,
}

/// One connection slot: a few hundred bytes; head bytes are copied only
/// when a head is split across reads.
pub(super) struct Conn {
    /// Its socket and TLS (`tcp.rs`, shared with the multiplexing driver).
    pub(super) tcp: Tcp,
    pub(super) state: ConnState,
    /// The connection's HTTP/1.1 session: the request's bytes to write and
    /// the answer's parser (reset for each new connection).
    pub(super) session: H1Session,
    /// When the request was written, its first response byte.
    pub(super) sent: Instant,
    pub(super) first_byte: Option<Instant>,
    /// Response bytes read for the request in progress.
    pub(super) wire: u64,
    /// Answers completed on this connection (0: its first request is on it).
    pub(super) answered: u32,
    /// When the request or connect in progress times out.
    pub(super) deadline: Instant,
    /// Neighbours in the time-out FIFO `list`.
    pub(super) prev: u32,
    pub(super) next: u32,
    pub(super) list: TimeoutList,
}

impl Conn {
    pub(super) fn new(now: Instant) -> Conn {
        Conn {
            tcp: Tcp::new(now),
            state: ConnState::Closed,
            session: H1Session::new(1),
            sent: now,
            first_byte: None,
            wire: 0,
            answered: 0,
            deadline: now,
            prev: NIL,
            next: NIL,
            list: TimeoutList::None,
        }
    }
}

/// An intrusive doubly-linked FIFO of connection slots ordered by deadline.
#[derive(Default, Clone, Copy)]
pub(super) struct Fifo {
    pub(super) head: u32,
    pub(super) tail: u32,
}

impl H1Link {
    /// Inserts a request slot into the time-out list in deadline order (scenario
    /// requests may have different time-outs; the common case appends).
    pub(super) fn push_sorted(&mut self, i: u32) {
        if self.conns[i as usize].list != TimeoutList::None {
            self.unlink(i);
        }
        let d = self.conns[i as usize].deadline;
        let mut after = self.request_timeouts.tail;
        while after != NIL && self.conns[after as usize].deadline > d {
            after = self.conns[after as usize].prev;
        }
        let next = if after == NIL {
            self.request_timeouts.head
        } else {
            self.conns[after as usize].next
        };
        {
            let c = &mut self.conns[i as usize];
            c.list = TimeoutList::Requests;
            c.prev = after;
            c.next = next;
        }
        if after != NIL {
            self.conns[after as usize].next = i;
        } else {
            self.request_timeouts.head = i;
        }
        if next != NIL {
            self.conns[next as usize].prev = i;
        } else {
            self.request_timeouts.tail = i;
        }
    }

    pub(super) fn fifo(&mut self, l: TimeoutList) -> &mut Fifo {
        match l {
            TimeoutList::Requests => &mut self.request_timeouts,
            _ => &mut self.connect_timeouts,
        }
    }

    pub(super) fn push(&mut self, i: u32, l: TimeoutList) {
        if self.conns[i as usize].list != TimeoutList::None {
            self.unlink(i);
        }
        let tail = self.fifo(l).tail;
        {
            let c = &mut self.conns[i as usize];
            c.list = l;
            c.prev = tail;
            c.next = NIL;
        }
        if tail != NIL {
            self.conns[tail as usize].next = i;
        } else {
            self.fifo(l).head = i;
        }
        self.fifo(l).tail = i;
    }

    pub(super) fn unlink(&mut self, i: u32) {
        let (l, prev, next) = {
            let c = &self.conns[i as usize];
            (c.list, c.prev, c.next)
        };
        if l == TimeoutList::None {
            return;
        }
        if prev != NIL {
            self.conns[prev as usize].next = next;
        } else {
            self.fifo(l).head = next;
        }
        if next != NIL {
            self.conns[next as usize].prev = prev;
        } else {
            self.fifo(l).tail = prev;
        }
        let c = &mut self.conns[i as usize];
        c.list = TimeoutList::None;
        c.prev = NIL;
        c.next = NIL;
    }
}
