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

mod dgram;
pub(crate) use dgram::{recv_stamped_mmsg, DgramRoom};

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

/// Asks the kernel to note when each segment of the socket's stream arrived
/// (`SO_TIMESTAMPNS`), read back by [`recv_stamped`]. False if it refused.
pub fn stamp_arrivals(fd: RawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: the option value is a c_int that lives for the call.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// `recv` on a socket that stamps arrivals ([`stamp_arrivals`]): the bytes
/// read, and how long ago the last segment they came in arrived (None when
/// the kernel gave no stamp). The stamp is the real-time clock's, so its age
/// is taken against that clock at once; the caller subtracts it from its own
/// monotonic `now`.
pub fn recv_stamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<Duration>)> {
    // Room for one control message carrying a timespec.
    #[repr(C, align(8))]
    struct Control([u8; 64]);
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid (null name, no control yet).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    // SAFETY: `msg` points at `iov` (describing `buf`) and `control`, all
    // writable and alive for the call.
    let n = check(unsafe { libc::syscall(libc::SYS_recvmsg, fd, &mut msg, 0) })?;
    let mut stamp = None;
    // SAFETY: the kernel filled `msg_controllen` bytes of `control`; the
    // CMSG_* macros walk within them.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            stamp = stamp.or(cmsg_stamp(c));
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let age = stamp.map(|ts| stamp_age(&realtime(), &ts));
    Ok((n, age))
}

/// The arrival stamp a control message carries (`SCM_TIMESTAMPNS`), if it
/// is one.
///
/// # Safety
/// `c` points at a control message the kernel filled, within its buffer.
#[allow(clippy::unnecessary_cast)] // cmsg_len is size_t on glibc, socklen_t on musl
pub(crate) unsafe fn cmsg_stamp(c: *const libc::cmsghdr) -> Option<libc::timespec> {
    // SAFETY: the caller's: `c` is a filled control message header, and its
    // length is checked before its data is read.
    unsafe {
        ((*c).cmsg_level == libc::SOL_SOCKET
            && (*c).cmsg_type == libc::SCM_TIMESTAMPNS
            && (*c).cmsg_len as usize
                >= libc::CMSG_LEN(std::mem::size_of::<libc::timespec>() as u32) as usize)
            .then(|| std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>()))
    }
}

/// The real-time clock now (the clock the kernel's arrival stamps use).
pub(crate) fn realtime() -> libc::timespec {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    now
}

/// How long before `now` (the real-time clock's) the stamp `ts` was taken;
/// a stamp from the future (the clock stepped back) is no age at all.
pub(crate) fn stamp_age(now: &libc::timespec, ts: &libc::timespec) -> Duration {
    let ns = |t: &libc::timespec| t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128;
    Duration::from_nanos((ns(now) - ns(ts)).clamp(0, u64::MAX as i128) as u64)
}

/// A read for a driver: `recv`, or [`recv_stamped`] when the socket stamps
/// arrivals (`stamped`). The bytes read, the time after the read, and when
/// the last of them arrived (that same time when there is no stamp).
#[inline]
pub fn recv_timed(
    fd: RawFd,
    buf: &mut [u8],
    stamped: bool,
) -> io::Result<(usize, std::time::Instant, std::time::Instant)> {
    if stamped {
        let (n, age) = recv_stamped(fd, buf)?;
        let now = std::time::Instant::now();
        let at = age.and_then(|a| now.checked_sub(a)).unwrap_or(now);
        Ok((n, now, at))
    } else {
        let n = recv(fd, buf)?;
        let now = std::time::Instant::now();
        Ok((n, now, now))
    }
}

/// A socket as `std::io::Read` for a TLS session's `read_tls`, reading with
/// [`recv_timed`]: `arrived` holds when the last bytes read came (the
/// kernel's stamp when `stamped`, else the read's time).
pub struct TimedReader<'a> {
    pub fd: RawFd,
    pub stamped: bool,
    pub arrived: &'a mut Option<std::time::Instant>,
}

impl io::Read for TimedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (n, _, at) = recv_timed(self.fd, buf, self.stamped)?;
        if n > 0 {
            *self.arrived = Some(at);
        }
        Ok(n)
    }
}

/// Sleeps until `fd` is readable or `timeout` passes (None: until readable),
/// to the nanosecond (`ppoll`): the open loop's wait for its pacing timer
/// while answers wait in their sockets.
pub fn sleep_on(fd: RawFd, timeout: Option<Duration>) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // (The kernel writes the time left back into it.)
    let mut ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tp = ts
        .as_mut()
        .map_or(std::ptr::null_mut(), |t| t as *mut libc::timespec);
    // SAFETY: one pollfd, a timespec or null, no signal mask change.
    check(unsafe {
        libc::syscall(
            libc::SYS_ppoll,
            &mut pfd as *mut libc::pollfd,
            1 as libc::nfds_t,
            tp,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    })?;
    Ok(())
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

    /// A socket that stamps arrivals says how long ago its bytes came: an
    /// answer read 30 ms after it was written is at least 30 ms old, and a
    /// socket that does not stamp says nothing.
    #[test]
    fn stamped_reads_give_the_age_of_the_bytes() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        assert!(stamp_arrivals(c.as_raw_fd()));
        // The kernel switches stamping on for the system a moment later
        // (a deferred work item): probe until a read carries one (bounded).
        let mut buf = [0u8; 64];
        let mut on = false;
        for _ in 0..200 {
            s.write_all(b"p").unwrap();
            std::thread::sleep(Duration::from_millis(5));
            if recv_stamped(c.as_raw_fd(), &mut buf).unwrap().1.is_some() {
                on = true;
                break;
            }
        }
        assert!(on, "the kernel never stamped an arrival");
        s.write_all(b"answer").unwrap();
        let wrote = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(30));
        let (n, age) = recv_stamped(c.as_raw_fd(), &mut buf).unwrap();
        let waited = wrote.elapsed();
        assert_eq!(&buf[..n], b"answer");
        let age = age.expect("a stamp");
        // The stamp is taken as the segment arrives (before `wrote`), on the
        // real-time clock; 1 ms of slack for the two clocks' reads.
        assert!(
            age + Duration::from_millis(1) >= Duration::from_millis(30),
            "{age:?}"
        );
        assert!(
            age <= waited + Duration::from_millis(50),
            "{age:?} > {waited:?}"
        );
        // recv_timed turns it into an arrival instant before now.
        s.write_all(b"more").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let (n, now, at) = recv_timed(c.as_raw_fd(), &mut buf, true).unwrap();
        assert_eq!(n, 4);
        assert!(now.duration_since(at) + Duration::from_millis(1) >= Duration::from_millis(20));

        // Not stamped: no age, and the arrival is the read's time.
        let plain = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s2, _) = l.accept().unwrap();
        s2.write_all(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let (n, age) = recv_stamped(plain.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((n, age), (1, None));
        // Nothing to read: WouldBlock from a non-blocking socket, as recv.
        plain.set_nonblocking(true).unwrap();
        let e = recv_timed(plain.as_raw_fd(), &mut buf, true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(recv_stamped(-1, &mut buf).is_err());
    }

    /// `sleep_on` returns when its descriptor becomes readable, or at the
    /// time-out when it does not.
    #[test]
    fn sleep_on_wakes_on_the_descriptor_or_the_time_out() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let t = std::time::Instant::now();
        sleep_on(a.as_raw_fd(), Some(Duration::from_millis(20))).unwrap();
        assert!(t.elapsed() >= Duration::from_millis(19));
        b.write_all(b"!").unwrap();
        let t = std::time::Instant::now();
        sleep_on(a.as_raw_fd(), Some(Duration::from_secs(10))).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
