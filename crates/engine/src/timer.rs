//! The one fine timer: a non-blocking monotonic `timerfd` for sub-millisecond
//! wake-ups (poll time-outs are millisecond-grained, too coarse for
//! open-loop schedules above a thousand requests per second).
//!
//! Every driver registers it in its `mio` poller ([`PreciseTimer`], through
//! the driver loop's `Sleeper`). Also here: [`Spin`], the poll-before-sleep
//! policy (when waiting should look before it sleeps).

use std::time::Duration;

/// A non-blocking monotonic timerfd, with the thread's timer slack lowered
/// from 50 µs to 1 µs so wake-ups are on time.
#[cfg(target_os = "linux")]
fn timerfd() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain syscall; the fd is checked and then owned by OwnedFd.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: prctl with PR_SET_TIMERSLACK takes an integer argument.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000, 0, 0, 0);
    }
    // SAFETY: fd is a valid, newly created descriptor we exclusively own.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Arms the timer to fire once, `after` from now (at least 1 ns: zero
/// disarms). True when armed. Arming also clears the count of expiries not read.
#[cfg(target_os = "linux")]
fn arm_fd(fd: std::os::fd::RawFd, after: Duration) -> bool {
    let after = after.max(Duration::from_nanos(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: after.as_secs() as libc::time_t,
            tv_nsec: after.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: valid fd and a fully initialized itimerspec.
    unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) == 0 }
}

/// The fine timer in a `mio` poller (the HTTP/1 worker): armed for the next
/// send time, it makes the poller return with its token.
pub(crate) struct PreciseTimer {
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
}

impl PreciseTimer {
    /// Registers a new timer in `poll` under `token`; None where there is no timerfd.
    #[cfg(target_os = "linux")]
    pub(crate) fn new(poll: &mio::Poll, token: mio::Token) -> Option<PreciseTimer> {
        use std::os::fd::AsRawFd;
        let fd = timerfd()?;
        poll.registry()
            .register(
                &mut mio::unix::SourceFd(&fd.as_raw_fd()),
                token,
                mio::Interest::READABLE,
            )
            .ok()?;
        Some(PreciseTimer { fd })
    }

    /// Registers a new timer in `poll` under `token`; None where there is no timerfd.
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn new(_poll: &mio::Poll, _token: mio::Token) -> Option<PreciseTimer> {
        None
    }

    /// Fires once, `after` from now. The expiry need not be read: arming
    /// clears the kernel's count of expiries, and the poller registers the
    /// timer edge-triggered, so the next expiry is a new event (one system
    /// call per timed wake-up, not two).
    /// Its descriptor (readable once it rang).
    #[cfg(target_os = "linux")]
    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn fd(&self) -> i32 {
        -1
    }

    pub(crate) fn arm(&self, after: Duration) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            arm_fd(self.fd.as_raw_fd(), after);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = after;
    }
}

/// Poll-before-sleep: how many non-blocking polls precede a sleeping one, and
/// when to stop trying (a slow server answers in milliseconds, not µs).
pub(crate) struct Spin {
    pub(crate) polls: u32,
    misses: u32,
    off_for: u32,
}

impl Spin {
    /// Consecutive fruitless rounds of polls before the looking stops.
    const GIVE_UP: u32 = 16;
    /// Waits without looking, after giving up, before trying again.
    const BACK_OFF: u32 = 512;

    /// Non-blocking polls before a sleeping one. Polling at all measured
    /// better than none on the benchmark's keep-alive scenario: nginx served
    /// 4–54 % more requests per second (it no longer wakes a sleeping client
    /// for most answers) and the client's requests per CPU-s were as good or
    /// better (docs/benchmarks.md, run H). One, not two: counting hits per
    /// poll (session 7), the first poll found events in about half of the
    /// rounds (117,000 of 240,000), the second in 2,000 of the 122,000 left,
    /// so the second was mostly a wasted system call; one poll gave ~4 % more
    /// requests per CPU-s (median of 10 paired rounds).
    const POLLS: u32 = 1;

    pub(crate) fn new() -> Spin {
        Spin {
            polls: Self::POLLS,
            misses: 0,
            off_for: 0,
        }
    }

    /// Whether this wait should look before it sleeps.
    pub(crate) fn armed(&mut self) -> bool {
        if self.polls == 0 {
            return false;
        }
        if self.off_for > 0 {
            self.off_for -= 1;
            return false;
        }
        true
    }

    /// A look found events.
    pub(crate) fn hit(&mut self) {
        self.misses = 0;
    }

    /// A round of looks found nothing.
    pub(crate) fn miss(&mut self) {
        self.misses += 1;
        if self.misses >= Self::GIVE_UP {
            self.misses = 0;
            self.off_for = Self::BACK_OFF;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Spin;

    /// A slow server: rounds of polls that find nothing switch the polling
    /// off for a while, then it is tried again.
    #[test]
    fn spin_gives_up_on_a_slow_server_and_tries_again() {
        let mut s = Spin::new();
        for _ in 0..Spin::GIVE_UP {
            assert!(s.armed());
            s.miss();
        }
        let off = (0..Spin::BACK_OFF).filter(|_| !s.armed()).count();
        assert_eq!(off as u32, Spin::BACK_OFF, "off for the whole back-off");
        assert!(s.armed(), "tried again after the back-off");
    }

    /// A fast server: a round that finds an answer starts the count again,
    /// so scattered misses never switch the polling off.
    #[test]
    fn spin_stays_on_while_polls_find_answers() {
        let mut s = Spin::new();
        for round in 0..10 * Spin::GIVE_UP {
            assert!(s.armed(), "round {round}");
            if round % 4 == 0 {
                s.hit();
            } else {
                s.miss();
            }
        }
    }
}
