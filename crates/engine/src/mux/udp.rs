//! The multiplexing driver's datagram I/O for QUIC connections (`--http3`):
//! one unconnected UDP socket per worker ([`QuicIo`]) beside its one
//! `quinn-proto` endpoint (`mux/endpoint.rs`, without a socket), shared by
//! every QUIC connection of it. A read is
//! `recvmmsg` (several datagrams per call, and with GRO several datagrams
//! per buffer, split at their stride) for every connection at once: the
//! endpoint names each datagram's connection (its handle, routed to the
//! driver's connection), the session takes it, and each
//! connection's events are processed once per batch ([`MuxLink::deliver`],
//! which the mode tests' offline network feeds too). A connection's
//! datagrams are built when it is flushed (the requests and
//! acknowledgements of a pass share them) and written with `sendmsg` to the
//! server (with GSO, a batch of equal-size datagrams in one call).
//! `quinn-udp` does the control messages (UDP_SEGMENT, UDP_GRO, ECN, packet
//! info) and probes the kernel. The socket is registered for reading only:
//! every datagram a UDP socket sends frees its buffer space and would wake
//! the worker for nothing; it waits for writable only after EAGAIN. ICMP:
//! an unconnected socket hears no ECONNREFUSED of its own, so the kernel
//! queues the errors (`mux/icmp.rs`) and an ICMP port unreachable fails
//! every connection to the address it names (`refused`). Deferred
//! answers (the open loop's `ioloop::Pacing::defer`, the closed loop's
//! `defer.rs`): the socket stamps each datagram's arrival
//! (`SO_TIMESTAMPNS`), reads go through `sys::recv_stamped_mmsg` (the same
//! batches and GRO runs, with a stamp each), every datagram goes to QUIC at
//! its stamp, and while answers wait (deferring) a connection's datagrams
//! of different stamps are processed one stamp at a time, so an answer
//! ends when the datagram that completed it arrived.

use super::conn::{CState, Proto};
use super::MuxLink;
use crate::core::Core;
use crate::sys::io_msg;
use mio::{Interest, Token};
use quinn_proto::EcnCodepoint;
use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use redline_stats::ErrorKind;
use std::io::{ErrorKind as IoKind, IoSliceMut};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The poller's token of the worker's QUIC socket.
pub(super) const QUIC: Token = Token(usize::MAX - 3);
/// Datagram buffers one `recvmmsg` fills at most (every connection's).
const RX_BATCH: usize = 8;
/// One buffer: the largest UDP payload, which also holds a GRO batch (the
/// kernel stops a batch at 64 KiB).
const RX_SLOT: usize = 64 * 1024;
/// Batches read per event, at most.
const RX_PASSES: usize = 1024;
/// The receive buffer the socket asks for: every connection's answers
/// queue there (the kernel's default, ~200 KiB, holds ~90 datagrams).
const RCVBUF: i32 = 4 << 20;
/// Datagrams in one GSO send, at most: quinn's own figure (its benchmarks'
/// compromise), and 64 of 1,200 bytes would pass the 64 KiB a UDP send
/// takes (EMSGSIZE).
const TX_SEGMENTS: usize = 10;
/// ICMP errors read from the queue per socket error, at most.
const ERRORS: usize = 64;

/// A datagram routed to a connection: the connection, its generation then,
/// the event that carries the datagram, its arrival and size.
pub(super) type Routed = (u32, u32, quinn_proto::ConnectionEvent, Instant, usize);

/// The worker's QUIC socket, shared by its QUIC connections.
pub(super) struct QuicIo {
    sock: mio::net::UdpSocket,
    state: UdpSocketState,
    /// The server (whose ICMP errors fail the connections).
    server: SocketAddr,
    buf: Vec<u8>,
    meta: Vec<RecvMeta>,
    /// Each buffer's arrival age by the kernel's stamp (stamped reads).
    ages: Vec<Option<Duration>>,
    /// The socket stamps arrivals and is read with them (deferred answers).
    stamped: bool,
    /// Where stamped reads' addresses and control messages go.
    room: Option<Box<crate::sys::DgramRoom>>,
    /// A read's datagrams, routed ([`Routed`]).
    routed: Vec<Routed>,
    /// Connections whose datagrams the socket refused for now (EAGAIN),
    /// flushed again once it is writable.
    blocked: Vec<u32>,
    /// The socket is registered for writable events too (while `blocked`).
    want_write: bool,
}

impl QuicIo {
    /// The worker's socket (unconnected, on the family of `server`) with
    /// GRO, ECN, packet info and ICMP errors queued where the kernel has
    /// them, registered for reading;
    /// `stamps`: each datagram's arrival stamped by the kernel (deferred
    /// answers), where it can.
    pub(super) fn open(
        server: SocketAddr,
        poll: &mio::Poll,
        stamps: bool,
    ) -> std::io::Result<QuicIo> {
        let any: SocketAddr = if server.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let mut sock = mio::net::UdpSocket::bind(any)?;
        let state = UdpSocketState::new(UdpSockRef::from(&sock))?;
        let fd = sock.as_raw_fd();
        super::icmp::queue_errors(fd, server.is_ipv4())?;
        // Best effort: the kernel caps SO_RCVBUF at rmem_max; FORCE passes
        // it where the process may (CAP_NET_ADMIN), as quic-go does.
        let _ = super::icmp::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF);
        let _ = super::icmp::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF);
        let stamped = stamps && crate::sys::stamp_arrivals(fd);
        poll.registry()
            .register(&mut sock, QUIC, Interest::READABLE)?;
        Ok(QuicIo {
            sock,
            state,
            server,
            buf: Vec::new(),
            meta: Vec::new(),
            ages: Vec::new(),
            stamped,
            room: stamped.then(|| Box::new(crate::sys::DgramRoom::new())),
            routed: Vec::new(),
            blocked: Vec::new(),
            want_write: false,
        })
    }

    /// How many datagrams one send may carry (GSO), 1 without it.
    fn max_segments(&self) -> usize {
        self.state.max_gso_segments().min(TX_SEGMENTS)
    }
}

impl MuxLink {
    /// An event on the worker's QUIC socket: ICMP errors, datagrams in,
    /// room to send again.
    pub(super) fn quic_event(&mut self, core: &mut Core<'_>, ev: crate::sys::Event) {
        if ev.is_error() {
            self.socket_errors(core, None);
        }
        if ev.is_readable() || ev.is_error() {
            self.read_datagrams(core);
        }
        if ev.is_writable() {
            let Some(q) = self.quic.as_deref_mut() else {
                return;
            };
            if q.want_write {
                q.want_write = false;
                let _ = self
                    .poll
                    .registry()
                    .reregister(&mut q.sock, QUIC, Interest::READABLE);
            }
            for c in std::mem::take(&mut q.blocked) {
                self.dirty(c);
            }
        }
    }

    /// Reads what the worker's socket holds: every datagram goes to its
    /// connection's session (at its arrival stamp when reads are stamped),
    /// whose events are then processed once per batch, or with stamps once
    /// per arrival time (answers end, their slots send again; a handshake
    /// that completed makes the connection ready).
    fn read_datagrams(&mut self, core: &mut Core<'_>) {
        for _ in 0..RX_PASSES {
            let Some(q) = self.quic.as_deref_mut() else {
                return;
            };
            if q.buf.is_empty() {
                q.buf = vec![0u8; RX_BATCH * RX_SLOT];
                q.meta = vec![RecvMeta::default(); RX_BATCH];
                q.ages = vec![None; RX_BATCH];
            }
            let got = {
                let mut chunks = q.buf.chunks_mut(RX_SLOT);
                let mut iov: [IoSliceMut<'_>; RX_BATCH] =
                    std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
                if let Some(room) = q.room.as_deref_mut() {
                    crate::sys::recv_stamped_mmsg(
                        q.sock.as_raw_fd(),
                        room,
                        &mut iov,
                        &mut q.meta,
                        &mut q.ages,
                    )
                } else {
                    q.state
                        .recv(UdpSockRef::from(&q.sock), &mut iov, &mut q.meta)
                }
            };
            let now = Instant::now();
            let n = match got {
                Ok(n) => n,
                Err(e) if e.kind() == IoKind::WouldBlock => break,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                // An ICMP error (the socket's pending error): the queue
                // names whom it is for.
                Err(e) => {
                    self.socket_errors(core, Some(e));
                    continue;
                }
            };
            let Some(ep) = self.quic_ep.as_deref_mut() else {
                return;
            };
            let mut bytes = 0;
            let mut routed = std::mem::take(&mut q.routed);
            for (i, (meta, buf)) in q.meta[..n].iter().zip(q.buf.chunks(RX_SLOT)).enumerate() {
                if !ep.is_server(meta.addr) {
                    continue;
                }
                let data = &buf[..meta.len.min(RX_SLOT)];
                bytes += data.len() as u64;
                let ecn = meta.ecn.and_then(|e| EcnCodepoint::from_bits(e as u8));
                // Its arrival: the kernel's stamp (never after the read),
                // else the read's time.
                let at = match q.ages[i].filter(|_| q.stamped) {
                    Some(age) => now.checked_sub(age).unwrap_or(now),
                    None => now,
                };
                // GRO: equal datagrams of `stride` bytes, the last maybe shorter.
                for d in data.chunks(meta.stride.max(1)) {
                    let Some((c, ev)) = ep.datagram(at, meta.addr, ecn, d) else {
                        continue;
                    };
                    if let Some(conn) = self.conns.get(c as usize) {
                        routed.push((c, conn.gen, ev, at, d.len()));
                    }
                }
            }
            let stamped = q.stamped;
            core.rec.bytes_read(bytes);
            self.deliver(core, &mut routed, stamped, now);
            if let Some(q) = self.quic.as_deref_mut() {
                q.routed = routed;
            }
            if n < RX_BATCH {
                // Drained: the next datagram brings a new edge (every
                // datagram does), so no read just to hear EAGAIN.
                break;
            }
        }
    }

    /// A read's datagrams, routed by the worker's endpoint: each goes to
    /// its connection's session (a connection closed or replaced since is
    /// passed over), then each connection that took some processes them
    /// once ([`MuxLink::datagrams_in`]). `stamped`: each carries its
    /// arrival stamp; while answers wait (deferring), a connection's
    /// datagrams of different stamps are processed one stamp at a time.
    pub(super) fn deliver(
        &mut self,
        core: &mut Core<'_>,
        routed: &mut Vec<Routed>,
        stamped: bool,
        now: Instant,
    ) {
        // Answers waited (deferring now): each stamp's datagrams are
        // processed before the next's. Read as they come, a read's
        // datagrams are moments apart and go together, at the last one's
        // stamp (one pass of the session instead of one per datagram).
        let split = stamped && (self.defer.active() || self.sleeper.defers());
        let mut touched = std::mem::take(&mut self.touched);
        for (c, gen, ev, at, len) in routed.drain(..) {
            let conn = &mut self.conns[c as usize];
            if conn.gen != gen || conn.state == CState::Closed {
                continue;
            }
            // Stamped: what the connection's earlier datagrams completed
            // ends at their arrival, before this one's.
            if split && conn.touched && conn.arrived != Some(at) {
                self.datagrams_in(core, c, now);
            }
            let conn = &mut self.conns[c as usize];
            let Proto::H3(sess) = &mut conn.proto else {
                continue;
            };
            if conn.gen != gen || conn.state == CState::Closed {
                continue;
            }
            sess.conn_event(ev);
            conn.unattributed += len as u64;
            if stamped {
                conn.arrived = Some(at);
            }
            if !conn.touched {
                conn.touched = true;
                touched.push(c);
            }
        }
        for &c in &touched {
            self.conns[c as usize].touched = false;
            self.datagrams_in(core, c, now);
        }
        touched.clear();
        self.touched = touched;
    }

    /// Connection `c` took the datagrams of a read: its session processes
    /// their events, answers end, a handshake done makes it ready, one
    /// that failed fails it.
    pub(super) fn datagrams_in(&mut self, core: &mut Core<'_>, c: u32, now: Instant) {
        let conn = &mut self.conns[c as usize];
        let Proto::H3(sess) = &mut conn.proto else {
            return;
        };
        sess.datagrams_done();
        if conn.state == CState::Closed {
            return;
        }
        self.end_streams(core, c, now);
        if self.after_events(core, c, now) {
            return;
        }
        // An open one is flushed (`after_events` marked it): its send
        // re-arms its timer.
        if self.conns[c as usize].state == CState::Handshaking {
            self.quic_progress(core, c, now);
        }
    }

    /// The socket reported an error (`e`, or EPOLLERR): the ICMP errors
    /// queued are read, and a port unreachable from the server (the one
    /// address the socket sends to) fails every QUIC connection.
    fn socket_errors(&mut self, core: &mut Core<'_>, e: Option<std::io::Error>) {
        let Some(q) = self.quic.as_deref() else {
            return;
        };
        let (fd, server) = (q.sock.as_raw_fd(), q.server);
        let mut refused = None;
        let mut queued = false;
        for _ in 0..ERRORS {
            let Some((err, to)) = super::icmp::next_error(fd) else {
                break;
            };
            queued = true;
            if err.kind() == IoKind::ConnectionRefused && to.is_none_or(|a| a == server) {
                refused = Some(err);
            }
        }
        if !queued {
            refused = e.filter(|e| e.kind() == IoKind::ConnectionRefused);
        }
        let Some(err) = refused else { return };
        let now = Instant::now();
        for c in 0..self.conns.len() as u32 {
            let conn = &self.conns[c as usize];
            if conn.quic && conn.state != CState::Closed {
                let kind = ErrorKind::from_io(&err, conn.state != CState::Open);
                self.conn_failed(core, c, kind, io_msg(&err), now);
            }
        }
    }

    /// Sends what QUIC connection `c` has to send, built now (the requests
    /// and acknowledgements of the whole pass together), as far as the
    /// socket takes it; what it refuses for now waits in the session.
    pub(super) fn send_datagrams(&mut self, core: &mut Core<'_>, c: u32) {
        let (Some(q), Some(ep)) = (self.quic.as_deref_mut(), self.quic_ep.as_deref_mut()) else {
            return;
        };
        let conn = &mut self.conns[c as usize];
        let Proto::H3(sess) = &mut conn.proto else {
            return;
        };
        // New connection ids and reset tokens first: their frames go out now.
        ep.before_send(sess);
        let now = Instant::now();
        let max = q.max_segments();
        let mut failed = None;
        for _ in 0..100_000 {
            let Some(d) = sess.next_datagrams(now, max) else {
                break;
            };
            let t = Transmit {
                destination: d.to,
                ecn: d.ecn.and_then(quinn_udp::EcnCodepoint::from_bits),
                contents: d.bytes,
                segment_size: d.segment,
                src_ip: None,
            };
            let (n, batch) = (t.contents.len() as u64, d.segment.is_some());
            match q.state.try_send(UdpSockRef::from(&q.sock), &t) {
                Ok(()) => {
                    core.rec.counters.bytes_written += n;
                    sess.datagrams_sent();
                }
                Err(e) if e.kind() == IoKind::WouldBlock => {
                    if !q.blocked.contains(&c) {
                        q.blocked.push(c);
                    }
                    if !q.want_write {
                        q.want_write = true;
                        let _ = self.poll.registry().reregister(
                            &mut q.sock,
                            QUIC,
                            Interest::READABLE | Interest::WRITABLE,
                        );
                    }
                    break;
                }
                // A GSO batch the device or the kernel refused (quinn-udp
                // sends single datagrams from now on after EIO or EINVAL):
                // QUIC sends the batch's data again.
                Err(e)
                    if batch
                        && matches!(
                            e.raw_os_error(),
                            Some(libc::EIO | libc::EINVAL | libc::EMSGSIZE)
                        ) =>
                {
                    sess.datagrams_sent();
                }
                Err(e) => {
                    // Given up (closing the connection sends again: not
                    // the same datagrams).
                    sess.datagrams_sent();
                    failed = Some(e);
                    break;
                }
            }
        }
        let now = Instant::now();
        if let Some(e) = failed {
            // An ICMP error pending on the socket is whoever's it names;
            // any other fails this connection.
            if e.kind() == IoKind::ConnectionRefused {
                return self.socket_errors(core, Some(e));
            }
            return self.conn_failed(core, c, ErrorKind::from_io(&e, false), io_msg(&e), now);
        }
        // A handshake completed in what was read (a connection open for
        // 0-RTT); what was sent and read moved QUIC's timers.
        self.quic_established(core, c, now);
        self.arm_quic(c);
    }

    /// Connection `c`'s session goes: the worker's endpoint forgets it.
    pub(super) fn quic_release(&mut self, c: u32) {
        let (Some(ep), Proto::H3(sess)) = (
            self.quic_ep.as_deref_mut(),
            &mut self.conns[c as usize].proto,
        ) else {
            return;
        };
        ep.forget(sess, c);
    }
}
