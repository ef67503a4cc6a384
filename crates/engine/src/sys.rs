//! The worker's per-request system calls, made directly.
//!
//! glibc's `recv`, `send` and `epoll_wait` are thread-cancellation points: in a
//! multi-threaded process each call switches asynchronous cancellation on and
//! off around the system call, two atomic read-modify-writes on the thread's
//! descriptor. redline never cancels a thread, and on the benchmark's
//! keep-alive run those two atomics cost about as much user time as parsing
//! the whole response (`perf annotate`: the time sits on the `lock cmpxchg`
//! right after each call returns). `syscall(2)` is not a cancellation point.
//!
//! Only the plain-socket hot path uses these; TLS, connects and everything
//! else go through `std`/`mio` as before. The registrations stay `mio`'s, so
//! an event's token and readiness bits mean what they mean there.
//!
//! [`io_msg`] is the one wording of socket errors, the same for every driver.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

fn check(r: libc::c_long) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `recv(fd, buf, 0)`.
#[inline]
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, writable for the call;
    // the address arguments are null, as recv(2) passes them.
    check(unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            0,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    })
}

/// `send(fd, buf, MSG_NOSIGNAL)`: a peer that closed gives `EPIPE`, not a signal.
#[inline]
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, readable for the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            libc::MSG_NOSIGNAL,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::socklen_t,
        )
    })
}

/// One readiness event, read the way `mio` reads it.
#[derive(Clone, Copy)]
pub struct Event(libc::epoll_event);

impl Event {
    /// The token the source was registered with.
    pub fn token(&self) -> usize {
        self.0.u64 as usize
    }
    fn has(&self, bits: libc::c_int) -> bool {
        self.0.events & bits as u32 != 0
    }
    /// Data (or an urgent byte) to read.
    pub fn is_readable(&self) -> bool {
        self.has(libc::EPOLLIN | libc::EPOLLPRI)
    }
    /// Room to write.
    pub fn is_writable(&self) -> bool {
        self.has(libc::EPOLLOUT)
    }
    /// An error is pending on the socket.
    pub fn is_error(&self) -> bool {
        self.has(libc::EPOLLERR)
    }
    /// The peer will send no more: a hang-up, or a read half closed with data.
    pub fn is_read_closed(&self) -> bool {
        self.has(libc::EPOLLHUP) || (self.has(libc::EPOLLIN) && self.has(libc::EPOLLRDHUP))
    }
}

/// The events one wait returned.
pub struct Events {
    buf: Vec<libc::epoll_event>,
    len: usize,
}

impl Events {
    /// Room for up to `n` events per wait.
    pub fn with_capacity(n: usize) -> Events {
        Events {
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; n.max(1)],
            len: 0,
        }
    }
    /// The wait returned no event.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The events, in the order the kernel gave them.
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        self.buf[..self.len].iter().map(|e| Event(*e))
    }
}

/// Waits on the epoll instance `epfd` for up to `timeout` (None: without end),
/// rounding a sub-millisecond wait up to a millisecond, as `mio` does.
pub fn wait(epfd: RawFd, events: &mut Events, timeout: Option<Duration>) -> io::Result<()> {
    let ms: libc::c_int = match timeout {
        None => -1,
        Some(d) => {
            let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
            ms.min(libc::c_int::MAX as u128) as libc::c_int
        }
    };
    events.len = 0;
    // SAFETY: the buffer holds `buf.len()` writable events; the signal mask is
    // null (no change), so the size argument is not read.
    let n = check(unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait,
            epfd,
            events.buf.as_mut_ptr(),
            events.buf.len() as libc::c_int,
            ms,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    })?;
    events.len = n.min(events.buf.len());
    Ok(())
}

/// A socket error in a few words (the errno's meaning, with what to do
/// where there is something to do), the same for every driver.
pub(crate) fn io_msg(e: &std::io::Error) -> std::borrow::Cow<'static, str> {
    use std::borrow::Cow;
    use std::io::ErrorKind as K;
    Cow::Borrowed(match e.kind() {
        K::ConnectionRefused => "connection refused",
        K::ConnectionReset => "connection reset by peer",
        K::ConnectionAborted => "connection aborted",
        K::BrokenPipe => "broken pipe",
        K::TimedOut => "timed out",
        K::AddrNotAvailable => "no local address available (ports exhausted?)",
        _ => match e.raw_os_error() {
            Some(24) => "too many open files (raise ulimit -n)",
            Some(23) => "too many open files in the system",
            Some(99) => "no local address available (ports exhausted?)",
            Some(101) => "network unreachable",
            Some(113) => "no route to host",
            _ => return Cow::Owned(e.to_string()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Interest, Poll, Token};
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    /// The direct calls move bytes, report readiness and errors as the
    /// library calls do.
    #[test]
    fn send_recv_and_wait_on_a_loopback_pair() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let poll = Poll::new().unwrap();
        let mut c = mio::net::TcpStream::connect(addr).unwrap();
        let (mut s, _) = l.accept().unwrap();
        poll.registry()
            .register(&mut c, Token(7), Interest::READABLE | Interest::WRITABLE)
            .unwrap();
        let epfd = poll.as_raw_fd();
        let mut ev = Events::with_capacity(8);
        wait(epfd, &mut ev, Some(Duration::from_secs(2))).unwrap();
        let e = ev.iter().next().expect("an event");
        assert_eq!(e.token(), 7);
        assert!(e.is_writable() && !e.is_readable());

        assert_eq!(send(c.as_raw_fd(), b"ping").unwrap(), 4);
        let mut got = [0u8; 4];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");

        let mut buf = [0u8; 16];
        let e = recv(c.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        s.write_all(b"pong").unwrap();
        wait(epfd, &mut ev, Some(Duration::from_secs(2))).unwrap();
        assert!(ev.iter().any(|e| e.token() == 7 && e.is_readable()));
        assert_eq!(recv(c.as_raw_fd(), &mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"pong");

        // The peer closes: a read-closed event, then end of stream.
        drop(s);
        wait(epfd, &mut ev, Some(Duration::from_secs(2))).unwrap();
        assert!(ev.iter().any(|e| e.is_read_closed()));
        assert_eq!(recv(c.as_raw_fd(), &mut buf).unwrap(), 0);

        // Nothing pending: a zero wait returns no events at once.
        let idle = Poll::new().unwrap();
        wait(idle.as_raw_fd(), &mut ev, Some(Duration::ZERO)).unwrap();
        assert!(ev.is_empty());
        // A bad descriptor is an error, not a panic.
        assert!(recv(-1, &mut buf).is_err());
        assert!(send(-1, b"x").is_err());
    }
}
