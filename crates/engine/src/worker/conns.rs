//! The HTTP/1 worker's connection table: a slot per connection (its socket,
//! TLS session, HTTP/1.1 [`H1Session`] and the request it carries) and the two intrusive
//! time-out FIFOs threaded through the slots (requests and connects have
//! fixed time-outs, so deadlines arrive in order: O(1) per request, memory
//! O(connections); scenario requests with their own time-outs are inserted in
//! order, `push_sorted`).

use super::Worker;
use crate::redirect::Origin;
use crate::session::H1Session;
use mio::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

pub(super) const NIL: u32 = u32::MAX;

/// Where a connection slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConnState {
    /// No socket.
    Closed,
    /// Connect in progress.
    Connecting,
    /// TCP connected, TLS handshake in progress.
    Handshaking,
    /// Connected, no request.
    Idle,
    /// Request partly written.
    Writing,
    /// Request written, reading the response.
    Reading,
}

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
    pub(super) sock: Option<TcpStream>,
    /// The TLS session of an https connection.
    pub(super) tls: Option<Box<rustls::ClientConnection>>,
    pub(super) state: ConnState,
    /// The connection's HTTP/1.1 session: the request's bytes to write and
    /// the answer's parser (reset for each new connection).
    pub(super) session: H1Session,
    /// A request is assigned to this slot (maybe waiting for the connect).
    pub(super) has_request: bool,
    /// The request's intended send time, when it was written, its first response byte.
    pub(super) intended: Instant,
    pub(super) sent: Instant,
    pub(super) first_byte: Option<Instant>,
    /// When the connect started; once connected, when the TLS handshake did.
    pub(super) connect_start: Instant,
    /// The request asks the server to close (`--requests-per-conn` reached).
    pub(super) close_after: bool,
    /// Requests sent on this connection.
    pub(super) on_conn: u64,
    /// Closed loop with `--requests-per-conn` and `-n`: requests reserved for this connection.
    pub(super) quota: u64,
    /// Response bytes read for the request in progress.
    pub(super) wire: u64,
    /// When the request or connect in progress times out.
    pub(super) deadline: Instant,
    /// Neighbours in the time-out FIFO `list`.
    pub(super) prev: u32,
    pub(super) next: u32,
    pub(super) list: TimeoutList,
    /// `--follow-redirects`: the redirect chain of the request in progress.
    pub(super) redir: Option<Box<Redirected>>,
    /// The socket is open to a redirect's origin, not the request's own: the
    /// next request replaces the connection.
    pub(super) away: Option<Arc<Origin>>,
}

/// A request being redirected: its hops so far and the request of the next.
pub(super) struct Redirected {
    pub(super) hops: u32,
    /// The URL the current hop goes to.
    pub(super) url: url::Url,
    /// The original request's spec (hops are rewritten from it).
    pub(super) orig: crate::plan::RequestSpec,
    /// The original request asked to close the connection (its hops too).
    pub(super) close: bool,
    /// The current hop's request, encoded from its spec ([`crate::redirect::hop_spec`]).
    pub(super) bytes: bytes::Bytes,
    /// Where the current hop goes when not the request's own origin.
    pub(super) to: Option<Arc<Origin>>,
    /// A hop made it a GET without body (301/302 after POST, 303).
    pub(super) get: bool,
}

/// An intrusive doubly-linked FIFO of connection slots ordered by deadline.
#[derive(Default, Clone, Copy)]
pub(super) struct Fifo {
    pub(super) head: u32,
    pub(super) tail: u32,
}

impl Worker<'_> {
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
