//! The multiplexing driver's connection table: a connection is a socket
//! and its TLS session (`tcp.rs`'s [`Tcp`]) and a [`Proto`] session with the slots it carries; a
//! slot's I/O state ([`SlotIo`]) is its request's stream and timing.

use crate::http3::Http3Session;
use crate::session::{H1Session, Http2Session, RequestId, Session};
use crate::tcp::Tcp;
use std::time::Instant;

pub(super) const NIL: u32 = u32::MAX;

/// A connection's session: HTTP/2, or HTTP/1.1 to another origin whose
/// server did not pick h2, or HTTP/3 (a QUIC connection on a UDP socket).
pub(crate) enum Proto {
    H2(Box<Http2Session>),
    H1(Box<H1Session>),
    H3(Box<Http3Session>),
}

/// Calls a [`Session`] method on either protocol.
macro_rules! with_session {
    ($p:expr, $s:ident => $e:expr) => {
        match $p {
            $crate::mux::Proto::H2($s) => $e,
            $crate::mux::Proto::H1($s) => $e,
            $crate::mux::Proto::H3($s) => $e,
        }
    };
}
pub(super) use with_session;

impl Proto {
    pub(super) fn is_closed(&self) -> bool {
        with_session!(self, s => s.is_closed())
    }
    pub(super) fn capacity(&self) -> usize {
        with_session!(self, s => s.capacity())
    }
    pub(super) fn pending_out(&self) -> &[u8] {
        with_session!(self, s => s.pending_out())
    }
    pub(super) fn consume_out(&mut self, n: usize) {
        with_session!(self, s => s.consume_out(n))
    }
    pub(super) fn cancel(&mut self, id: RequestId) {
        with_session!(self, s => s.cancel(id))
    }
    /// Takes no new request ever again, though requests out may still end.
    pub(super) fn retiring(&self) -> bool {
        match self {
            Proto::H2(s) => s.retiring(),
            Proto::H1(s) => s.is_closed(),
            Proto::H3(s) => s.retiring(),
        }
    }
}

/// Where a connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CState {
    /// No socket (a free entry of the slab).
    Closed,
    Connecting,
    Handshaking,
    Open,
}

/// One connection.
pub(super) struct Conn {
    /// A TCP connection's socket and TLS (`tcp.rs`, shared with the HTTP/1
    /// driver); a QUIC connection's connect timing.
    pub(super) tcp: Tcp,
    /// HTTP/3: a QUIC connection on the worker's socket (`mux/udp.rs`),
    /// counted open until it is shut.
    pub(super) quic: bool,
    /// HTTP/3: the current read brought it datagrams (`mux/udp.rs`).
    pub(super) touched: bool,
    /// HTTP/3: the QUIC timer deadline its entry in the driver's timer
    /// heap has (None: no live entry).
    pub(super) quic_timer: Option<Instant>,
    pub(super) state: CState,
    pub(super) proto: Proto,
    /// The own-origin group it serves (NIL: a slot's private connection).
    pub(super) group: u32,
    /// Slots attached (waiting for it, idle on it, or with a request on it).
    pub(super) users: Vec<u32>,
    /// Requests on it: the session's id and the slot.
    pub(super) streams: Vec<(RequestId, u32)>,
    /// Slots whose request waits for a free stream, oldest first.
    pub(super) blocked: Vec<u32>,
    /// Requests submitted on it (`--requests-per-conn`).
    pub(super) submitted: u64,
    /// It takes no more requests (`--requests-per-conn` reached).
    pub(super) full: bool,
    /// Bumped when it closes, so its stale connect time-out is skipped.
    pub(super) gen: u32,
    /// Bytes read not yet counted to a request (the per-second series).
    pub(super) unattributed: u64,
    /// It was opened for the run's own origin and must speak HTTP/2.
    pub(super) own: bool,
    /// ALPN offered both protocols (another https origin).
    pub(super) either: bool,
    /// It is on the driver's list of connections with bytes to write.
    pub(super) dirty: bool,
    /// The slot it was opened for (its connect time counts to that slot's request).
    pub(super) first_user: u32,
    /// Where it goes (a slot's private connection is kept for its next
    /// request or hop there).
    pub(super) addr: Option<std::net::SocketAddr>,
    /// Answers it carried (a reused connection's close may race a request).
    pub(super) answered: u64,
    /// The peer closed it (its streams' failures are being told).
    /// When the bytes of the last read arrived, stamped by the kernel
    /// (deferred answers); taken by the events they end.
    pub(super) arrived: Option<Instant>,
    pub(super) eof: bool,
}

impl Conn {
    pub(super) fn new(now: Instant) -> Conn {
        Conn {
            tcp: Tcp::new(now),
            quic: false,
            touched: false,
            quic_timer: None,
            state: CState::Closed,
            proto: Proto::H2(Box::default()),
            group: NIL,
            users: Vec::new(),
            streams: Vec::new(),
            blocked: Vec::new(),
            submitted: 0,
            full: false,
            gen: 0,
            unattributed: 0,
            own: true,
            either: false,
            dirty: false,
            first_user: 0,
            addr: None,
            answered: 0,
            eof: false,
            arrived: None,
        }
    }

    /// Takes no new request.
    pub(super) fn retired(&self) -> bool {
        self.full || self.proto.retiring()
    }

    /// Its TCP socket's descriptor.
    pub(super) fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.tcp.fd()
    }
}

/// One slot's I/O: the connection it uses and its request there.
pub(super) struct SlotIo {
    /// Its connection (NIL: none).
    pub(super) conn: u32,
    /// A request is on the connection or waiting for a stream there.
    pub(super) busy: bool,
    /// It waits for a free stream.
    pub(super) blocked: bool,
    /// The request's id on the connection's session.
    pub(super) id: RequestId,
    /// What it sends (kept while it waits for a stream).
    pub(super) what: Option<crate::core::Outgoing>,
    pub(super) sent: Instant,
    pub(super) first_byte: Option<Instant>,
    pub(super) deadline: Instant,
    /// Bumped at every submit and end: a time-out entry of another
    /// generation is stale.
    pub(super) gen: u32,
    /// Its private connection to another origin, kept open while the slot
    /// is elsewhere (NIL: none), for its next request or hop there.
    pub(super) away: u32,
}

impl SlotIo {
    pub(super) fn new(now: Instant) -> SlotIo {
        SlotIo {
            conn: NIL,
            busy: false,
            blocked: false,
            id: 0,
            what: None,
            sent: now,
            first_byte: None,
            deadline: now,
            gen: 0,
            away: NIL,
        }
    }
}
