//! UDP reads with the kernel's arrival stamps: one `recvmmsg` filling
//! several buffers, each datagram's (or GRO run's) source address, GRO
//! stride and ECN bits decoded from its control messages as `quinn-udp`
//! decodes them, plus its `SCM_TIMESTAMPNS` arrival stamp
//! ([`recv_stamped_mmsg`]). `quinn-udp`'s own receive gives no stamp; the
//! HTTP/3 driver's deferred answers (`mux/udp.rs`) need one per datagram.

use quinn_udp::{EcnCodepoint, RecvMeta};
use std::io::{self, IoSliceMut};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

/// Buffers one call fills at most.
pub(crate) const MAX_BATCH: usize = 16;
/// Control room per datagram: packet info, TOS or traffic class, the GRO
/// stride and the stamp (each under 40 bytes with its header).
const CONTROL: usize = 256;

#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Control([u8; CONTROL]);

/// Where the kernel writes each datagram's source address and control
/// messages: made once per socket (clearing 6 KiB for every read cost
/// ~670 instructions per request, callgrind), written by the kernel
/// before it is read.
pub(crate) struct DgramRoom {
    names: Vec<libc::sockaddr_storage>,
    control: Vec<Control>,
}

impl DgramRoom {
    /// Room for [`MAX_BATCH`] datagrams a read.
    pub(crate) fn new() -> DgramRoom {
        DgramRoom {
            // SAFETY: an all-zero sockaddr_storage is a valid value.
            names: vec![unsafe { std::mem::zeroed() }; MAX_BATCH],
            control: vec![Control([0; CONTROL]); MAX_BATCH],
        }
    }
}

/// `recvmmsg` into `bufs` (at most [`MAX_BATCH`]): how many were filled;
/// for each, `meta` as `quinn-udp`'s receive fills it and `ages[i]`, how long
/// ago its (last) datagram arrived by the kernel's stamp (None without one;
/// the socket must have `SO_TIMESTAMPNS`, `sys::stamp_arrivals`). A
/// datagram from a family other than IPv4 or IPv6 is given the unspecified
/// address (the caller drops datagrams from anyone but its server).
#[allow(clippy::unnecessary_cast)] // cmsg_len is size_t on glibc, socklen_t on musl
pub(crate) fn recv_stamped_mmsg(
    fd: std::os::fd::RawFd,
    room: &mut DgramRoom,
    bufs: &mut [IoSliceMut<'_>],
    meta: &mut [RecvMeta],
    ages: &mut [Option<Duration>],
) -> io::Result<usize> {
    let n = bufs.len().min(meta.len()).min(ages.len()).min(MAX_BATCH);
    let DgramRoom { names, control } = room;
    // SAFETY: an all-zero mmsghdr is a valid value (null pointers, zero
    // lengths); only the first `n` are filled in and used.
    let mut hdrs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..n {
        let h = &mut hdrs[i].msg_hdr;
        h.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
        h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // IoSliceMut is ABI-compatible with iovec.
        h.msg_iov = (&mut bufs[i] as *mut IoSliceMut<'_>).cast();
        h.msg_iovlen = 1;
        h.msg_control = control[i].0.as_mut_ptr().cast();
        h.msg_controllen = CONTROL as _;
    }
    // SAFETY: `hdrs[..n]` point at names, buffers and control room that are
    // writable and alive for the call; no timeout.
    let got = super::check(unsafe {
        libc::syscall(
            libc::SYS_recvmmsg,
            fd,
            hdrs.as_mut_ptr(),
            n as libc::c_uint,
            0,
            std::ptr::null_mut::<libc::timespec>(),
        )
    })?;
    let now = super::realtime();
    for i in 0..got.min(n) {
        let len = hdrs[i].msg_len as usize;
        let h = &hdrs[i].msg_hdr;
        let (mut ecn, mut stride, mut stamp) = (0u8, len, None);
        // SAFETY: the kernel filled `msg_controllen` bytes of the control
        // room; the CMSG_* macros walk within them, and each message's length
        // is checked before its data is read.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                let room = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::IPPROTO_IP, libc::IP_TOS | libc::IP_RECVTOS) if room >= 1 => {
                        ecn = *data;
                    }
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if room >= 4 => {
                        ecn = std::ptr::read_unaligned(data.cast::<libc::c_int>()) as u8;
                    }
                    (libc::SOL_UDP, libc::UDP_GRO) if room >= 4 => {
                        let s = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                        if s > 0 {
                            stride = s as usize;
                        }
                    }
                    _ => stamp = stamp.or(super::cmsg_stamp(c)),
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        meta[i] = RecvMeta {
            addr: address(&names[i]),
            len,
            stride,
            ecn: EcnCodepoint::from_bits(ecn & 0b11),
            dst_ip: None,
        };
        ages[i] = stamp.map(|ts| super::stamp_age(&now, &ts));
    }
    Ok(got.min(n))
}

/// The socket address the kernel wrote.
fn address(name: &libc::sockaddr_storage) -> SocketAddr {
    match name.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a =
                unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            SocketAddrV4::new(
                Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(a.sin_port),
            )
            .into()
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a =
                unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )
            .into()
        }
        _ => (Ipv4Addr::UNSPECIFIED, 0).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    /// Three datagrams sent, then read in one call: each with its sender's
    /// address, its length, and a stamp from between its send and the read.
    #[test]
    fn datagrams_come_with_their_sender_and_arrival_stamp() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        assert!(super::super::stamp_arrivals(rx.as_raw_fd()));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut store = vec![0u8; 4 * 2048];
        let mut chunks = store.chunks_mut(2048);
        let mut bufs: Vec<IoSliceMut<'_>> = (0..4)
            .map(|_| IoSliceMut::new(chunks.next().unwrap()))
            .collect();
        let mut meta = [RecvMeta::default(); 4];
        let mut ages = [None; 4];
        let mut room = DgramRoom::new();
        // The kernel turns arrival stamping on a little after the first
        // socket asks (a deferred switch); until then a datagram is stamped
        // when it is read. Wait for it, bounded.
        for _ in 0..100 {
            tx.send_to(b"warm", rx.local_addr().unwrap()).unwrap();
            std::thread::sleep(Duration::from_millis(10));
            let n = recv_stamped_mmsg(rx.as_raw_fd(), &mut room, &mut bufs, &mut meta, &mut ages)
                .unwrap_or(0);
            if n > 0
                && ages[..n]
                    .iter()
                    .all(|a| a.is_some_and(|a| a >= Duration::from_millis(5)))
            {
                break;
            }
        }
        let t0 = Instant::now();
        for len in [10, 20, 30] {
            tx.send_to(&vec![7u8; len], rx.local_addr().unwrap())
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        let n =
            recv_stamped_mmsg(rx.as_raw_fd(), &mut room, &mut bufs, &mut meta, &mut ages).unwrap();
        let waited = t0.elapsed();
        assert_eq!(n, 3);
        for (i, len) in [10, 20, 30].into_iter().enumerate() {
            assert_eq!(meta[i].addr, tx.local_addr().unwrap());
            assert_eq!((meta[i].len, meta[i].stride), (len, len));
            let age = ages[i].expect("a stamp");
            // Sent before the sleep, read after it: the stamp is older
            // than the sleep and younger than the whole wait.
            assert!(
                age >= Duration::from_millis(15) && age <= waited + Duration::from_millis(5),
                "{age:?} of {waited:?}"
            );
        }
        // Nothing left: EAGAIN, not a hang.
        let e = recv_stamped_mmsg(rx.as_raw_fd(), &mut room, &mut bufs, &mut meta, &mut ages)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }
}
