//! The multiplexing driver's datagram I/O for QUIC connections (`--http3`):
//! each connection's connected UDP socket with `quinn-udp`'s state, read
//! with `recvmmsg` (several datagrams per call, and with GRO several
//! datagrams per buffer, split at their stride) and written with `sendmsg`
//! (with GSO, a batch of equal-size datagrams `quinn-proto` built in one
//! call). `quinn-udp` does the control messages (UDP_SEGMENT, UDP_GRO, ECN,
//! packet info) and probes the kernel; what is the driver's is here: the
//! session takes the datagrams of one read pass before it processes their
//! events once, and what the session has to send is built when the
//! connection is flushed, so the requests and acknowledgements of one pass
//! share datagrams. An ICMP port unreachable reaches the connected socket as
//! ECONNREFUSED on the next read or write (`refused`).

use super::conn::Proto;
use super::MuxLink;
use crate::core::Core;
use crate::sys::io_msg;
use quinn_udp::{EcnCodepoint, RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use redline_stats::ErrorKind;
use std::io::{ErrorKind as IoKind, IoSliceMut};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;

/// Datagram buffers one `recvmmsg` fills at most.
pub(super) const RX_BATCH: usize = 8;
/// One buffer: the largest UDP payload, which also holds a GRO batch (the
/// kernel stops a batch at 64 KiB).
const RX_SLOT: usize = 64 * 1024;
/// Batches read from one socket per event, at most.
const RX_PASSES: usize = 1024;
/// Datagrams in one GSO send, at most: quinn's own figure (its benchmarks'
/// compromise), and 64 of 1,200 bytes would pass the 64 KiB a UDP send
/// takes (EMSGSIZE).
const TX_SEGMENTS: usize = 10;

/// A QUIC connection's socket: UDP, connected to the server, with the
/// `quinn-udp` state that knows its offloads.
pub(super) struct Udp {
    pub(super) sock: mio::net::UdpSocket,
    state: UdpSocketState,
}

impl Udp {
    /// A UDP socket connected to `addr` (the kernel then hands it only that
    /// server's datagrams, and an ICMP port unreachable as ECONNREFUSED),
    /// with GRO, ECN and packet info on where the kernel has them.
    pub(super) fn open(addr: SocketAddr) -> std::io::Result<Udp> {
        let any: SocketAddr = if addr.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let sock = mio::net::UdpSocket::bind(any)?;
        sock.connect(addr)?;
        let state = UdpSocketState::new(UdpSockRef::from(&sock))?;
        Ok(Udp { sock, state })
    }

    /// How many datagrams one send may carry (GSO), 1 without it.
    pub(super) fn max_segments(&self) -> usize {
        self.state.max_gso_segments().min(TX_SEGMENTS)
    }
}

/// The worker's receive buffers for every QUIC connection's reads
/// ([`RX_BATCH`] of [`RX_SLOT`] bytes), made at the first read.
#[derive(Default)]
pub(super) struct RxBufs {
    buf: Vec<u8>,
    meta: Vec<RecvMeta>,
}

impl MuxLink {
    /// Reads what QUIC connection `c`'s socket holds: every datagram goes
    /// into its session, whose events are then processed once per batch
    /// (answers end, their slots send again).
    pub(super) fn read_datagrams(&mut self, core: &mut Core<'_>, c: u32) {
        if self.rx.buf.is_empty() {
            self.rx.buf = vec![0u8; RX_BATCH * RX_SLOT];
            self.rx.meta = vec![RecvMeta::default(); RX_BATCH];
        }
        for _ in 0..RX_PASSES {
            let conn = &mut self.conns[c as usize];
            let (Some(udp), Proto::H3(sess)) = (conn.udp.as_ref(), &mut conn.proto) else {
                return;
            };
            let got = {
                let mut chunks = self.rx.buf.chunks_mut(RX_SLOT);
                let mut iov: [IoSliceMut<'_>; RX_BATCH] =
                    std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
                udp.state
                    .recv(UdpSockRef::from(&udp.sock), &mut iov, &mut self.rx.meta)
            };
            let now = Instant::now();
            let n = match got {
                Ok(n) => n,
                Err(e) if e.kind() == IoKind::WouldBlock => break,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                Err(e) => return self.read_failed(core, c, &e, now),
            };
            let mut bytes = 0;
            for (meta, chunk) in self.rx.meta[..n].iter().zip(self.rx.buf.chunks(RX_SLOT)) {
                let data = &chunk[..meta.len.min(RX_SLOT)];
                bytes += data.len() as u64;
                let ecn = meta.ecn.map(|e| e as u8);
                // GRO: equal datagrams of `stride` bytes, the last maybe shorter.
                for d in data.chunks(meta.stride.max(1)) {
                    // An empty datagram is no end of anything.
                    if !d.is_empty() {
                        sess.datagram_in(now, ecn, d);
                    }
                }
            }
            sess.datagrams_done();
            core.rec.bytes_read(bytes);
            conn.unattributed += bytes;
            self.end_streams(core, c, now);
            if self.after_events(core, c, now) {
                return;
            }
            if n < RX_BATCH {
                // Drained: the next datagram brings a new edge (every
                // datagram does), so no read just to hear EAGAIN.
                break;
            }
        }
        self.dirty(c);
    }

    /// Sends what QUIC connection `c` has to send, built now (the requests
    /// and acknowledgements of the whole pass together), as far as the
    /// socket takes it; what it refuses for now waits in the session.
    pub(super) fn send_datagrams(&mut self, core: &mut Core<'_>, c: u32) {
        let conn = &mut self.conns[c as usize];
        let (Some(udp), Proto::H3(sess)) = (conn.udp.as_ref(), &mut conn.proto) else {
            return;
        };
        let now = Instant::now();
        let max = udp.max_segments();
        let mut failed = None;
        for _ in 0..100_000 {
            let Some(d) = sess.next_datagrams(now, max) else {
                break;
            };
            let t = Transmit {
                destination: d.to,
                ecn: d.ecn.and_then(EcnCodepoint::from_bits),
                contents: d.bytes,
                segment_size: d.segment,
                src_ip: None,
            };
            let (n, batch) = (t.contents.len() as u64, d.segment.is_some());
            match udp.state.try_send(UdpSockRef::from(&udp.sock), &t) {
                Ok(()) => {
                    core.rec.counters.bytes_written += n;
                    sess.datagrams_sent();
                }
                Err(e) if e.kind() == IoKind::WouldBlock => break,
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
            return self.conn_failed(core, c, ErrorKind::from_io(&e, false), io_msg(&e), now);
        }
        // A handshake completed in what was read (a connection open for
        // 0-RTT); what was sent and read moved QUIC's timers.
        self.quic_established(core, c, now);
        self.arm_quic(c);
    }
}
