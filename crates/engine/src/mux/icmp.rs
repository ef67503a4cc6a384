//! ICMP errors on the worker's unconnected QUIC socket (`mux/udp.rs`): an
//! unconnected UDP socket hears no ECONNREFUSED for its own, so it asks the
//! kernel to queue every ICMP error it gets (`IP_RECVERR`/`IPV6_RECVERR`),
//! and [`next_error`] reads one from that queue (`MSG_ERRQUEUE`): the error
//! (`sock_extended_err`'s errno) and the destination of the datagram that
//! caused it, so the driver fails the connections to that address.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Asks the kernel to queue the ICMP errors of socket `fd` (of family
/// `v4` or IPv6) for [`next_error`].
pub(super) fn queue_errors(fd: RawFd, v4: bool) -> io::Result<()> {
    let (level, name) = if v4 {
        (libc::IPPROTO_IP, libc::IP_RECVERR)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_RECVERR)
    };
    setsockopt_int(fd, level, name, 1)
}

/// Sets an integer socket option.
pub(super) fn setsockopt_int(fd: RawFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: the pointer and length describe `v`, readable for the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One queued error of socket `fd`: its errno and the destination of the
/// datagram that caused it (None: the queue is empty).
pub(super) fn next_error(fd: RawFd) -> Option<(io::Error, Option<SocketAddr>)> {
    // SAFETY: zeroed sockaddr_storage, msghdr and the byte buffers are
    // valid; every pointer in `msg` refers to a local that outlives the
    // call, with its length; the control messages are read within
    // `msg_controllen` through the CMSG macros, and the extended error is
    // read unaligned.
    unsafe {
        let mut name: libc::sockaddr_storage = zeroed();
        let mut payload = [0u8; 64];
        let mut control = [0u64; 64];
        let mut iov = libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        };
        let mut msg: libc::msghdr = zeroed();
        msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 64]>() as _;
        if libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) < 0 {
            return None;
        }
        let mut errno = 0;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        for _ in 0..16 {
            if cmsg.is_null() {
                break;
            }
            let c = &*cmsg;
            if (c.cmsg_level, c.cmsg_type) == (libc::IPPROTO_IP, libc::IP_RECVERR)
                || (c.cmsg_level, c.cmsg_type) == (libc::IPPROTO_IPV6, libc::IPV6_RECVERR)
            {
                let ee: libc::sock_extended_err =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                errno = ee.ee_errno as i32;
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        Some((io::Error::from_raw_os_error(errno), address(&name)))
    }
}

/// The socket address in `s`, if it holds one of IPv4 or IPv6.
fn address(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match s.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in, which fits in the storage.
            let a: libc::sockaddr_in =
                unsafe { std::ptr::read_unaligned((s as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddrV4::new(ip, u16::from_be(a.sin_port)).into())
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it is a sockaddr_in6, which fits in the storage.
            let a: libc::sockaddr_in6 =
                unsafe { std::ptr::read_unaligned((s as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            let port = u16::from_be(a.sin6_port);
            Some(SocketAddrV6::new(ip, port, a.sin6_flowinfo, a.sin6_scope_id).into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{next_error, queue_errors};
    use std::io::ErrorKind;
    use std::os::fd::AsRawFd;

    /// A datagram to a UDP port nobody listens on comes back as ICMP port
    /// unreachable: queued with its destination, read once.
    #[test]
    fn a_closed_port_is_queued_as_refused_with_its_address() {
        let closed = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let to = closed.local_addr().expect("addr");
        drop(closed);
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        queue_errors(s.as_raw_fd(), true).expect("IP_RECVERR");
        assert!(next_error(s.as_raw_fd()).is_none(), "an empty queue");
        s.send_to(b"hello", to).expect("send");
        let mut got = None;
        for _ in 0..200 {
            got = next_error(s.as_raw_fd());
            if got.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (e, addr) = got.expect("an ICMP error within 1 s");
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
        assert_eq!(addr, Some(to));
        assert!(next_error(s.as_raw_fd()).is_none(), "read once");
    }
}
