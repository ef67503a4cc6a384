//! What both drivers' TCP connections share, written once: [`Tcp`] (a
//! connection's socket, its TLS session, the TLS still to start and the
//! connect timing), and the steps of opening one ([`connect`],
//! [`connect_event`], [`connected`], [`handshake`]) over [`Opening`], which
//! the HTTP/1 driver (`worker/`) and the multiplexing driver (`mux/`, the
//! run's origin and the private connections of other origins and
//! redirects alike) implement: where a connection's `Tcp` is, what its
//! state becomes, whom its connect time counts to, and what "up" means to
//! its protocol. The reads and writes stay in each driver (their hot paths
//! differ: one request per connection against a session's frames).

use crate::core::Core;
use crate::ioloop::Driver;
use crate::sys::{self, io_msg};
use crate::tls::TlsSetup;
use mio::net::TcpStream;
use mio::{Interest, Token};
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::io::ErrorKind as IoKind;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

/// Why opening a connection failed: the error's kind and its words.
pub(crate) type Failure = (ErrorKind, Cow<'static, str>);

/// A TCP connection (plain or TLS) of either driver.
pub(crate) struct Tcp {
    pub(crate) sock: Option<TcpStream>,
    /// The TLS session of an https connection.
    pub(crate) tls: Option<Box<rustls::ClientConnection>>,
    /// TLS to start once connected (the destination's, for https).
    pub(crate) tls_setup: Option<TlsSetup>,
    /// When the connect started; once connected, when the TLS handshake did.
    pub(crate) connect_start: Instant,
}

impl Tcp {
    pub(crate) fn new(now: Instant) -> Tcp {
        Tcp {
            sock: None,
            tls: None,
            tls_setup: None,
            connect_start: now,
        }
    }

    /// A connect starts at `now`, with `tls` to start once it is up.
    pub(crate) fn begin(&mut self, tls: Option<TlsSetup>, now: Instant) {
        self.tls_setup = tls;
        self.connect_start = now;
    }

    /// Closes the socket (closing it takes it out of the poller: no
    /// deregister call) and drops its TLS; true when there was a socket.
    pub(crate) fn close(&mut self) -> bool {
        self.tls = None;
        self.tls_setup = None;
        self.sock.take().is_some()
    }

    /// Its socket's descriptor.
    pub(crate) fn fd(&self) -> Option<RawFd> {
        self.sock.as_ref().map(|s| s.as_raw_fd())
    }
}

/// What opening a connection asks of a driver; `c` is its own name for the
/// connection (the HTTP/1 driver's slot, the multiplexing driver's
/// connection), which is also its poller token.
pub(crate) trait Opening: Driver {
    /// Connection `c`'s TCP side.
    fn tcp(&mut self, c: u32) -> &mut Tcp;
    /// Connection `c`'s socket is registered and connecting: its state and
    /// connect time-out.
    fn opened(&mut self, core: &mut Core<'_>, c: u32, now: Instant);
    /// Opening connection `c` failed (connect, TLS start or handshake).
    fn open_failed(&mut self, core: &mut Core<'_>, c: u32, why: Failure, now: Instant);
    /// The slot whose request connection `c`'s connect time counts to.
    fn counted_to(&self, c: u32) -> u32;
    /// Connection `c`'s TLS handshake started.
    fn handshaking(&mut self, c: u32);
    /// Connection `c` is up (TCP, and TLS when it has it): its protocol
    /// starts.
    fn up(&mut self, core: &mut Core<'_>, c: u32, now: Instant);
}

/// Connects connection `c` to `addr` (its [`Tcp::begin`] done): the socket,
/// registered for reading and writing (edge-triggered, once), counted open.
/// On loopback (and often a LAN) the TCP handshake completes inside
/// connect() itself: then it goes on at once, without waiting for the
/// writable event and asking the socket for its error (two syscalls and an
/// event fewer per connection).
pub(crate) fn connect<D: Opening>(
    d: &mut D,
    core: &mut Core<'_>,
    c: u32,
    addr: SocketAddr,
    now: Instant,
) {
    let sock = TcpStream::connect(addr).and_then(|mut s| {
        let (poll, ..) = d.waiting();
        poll.registry().register(
            &mut s,
            Token(c as usize),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        Ok(s)
    });
    match sock {
        Ok(s) => {
            d.tcp(c).sock = Some(s);
            core.socket_opened();
            d.opened(core, c, now);
            if d.tcp(c)
                .sock
                .as_ref()
                .is_some_and(|s| s.peer_addr().is_ok())
            {
                connected(d, core, c, Instant::now());
            }
        }
        Err(e) => d.open_failed(core, c, (ErrorKind::from_io(&e, true), io_msg(&e)), now),
    }
}

/// A poller event on connection `c` while it connects: up, failed, or not
/// yet.
pub(crate) fn connect_event<D: Opening>(d: &mut D, core: &mut Core<'_>, c: u32) {
    let now = Instant::now();
    let Some(s) = d.tcp(c).sock.as_ref() else {
        return;
    };
    let err = match s.take_error() {
        Ok(Some(e)) | Err(e) => e,
        Ok(None) => match s.peer_addr() {
            Ok(_) => return connected(d, core, c, now),
            Err(e) if e.kind() == IoKind::NotConnected => return, // not yet
            Err(e) => e,
        },
    };
    d.open_failed(core, c, (ErrorKind::from_io(&err, true), io_msg(&err)), now);
}

/// Connection `c`'s TCP connection is up: no delay, arrival stamps when
/// answers may wait ([`Driver::stamps`]), the connect time counted, then
/// TLS or the protocol.
pub(crate) fn connected<D: Opening>(d: &mut D, core: &mut Core<'_>, c: u32, now: Instant) {
    let stamps = d.stamps();
    let t = d.tcp(c);
    if let Some(s) = t.sock.as_ref() {
        let _ = s.set_nodelay(true);
        // Deferred answers: the kernel stamps when they arrived.
        if stamps {
            sys::stamp_arrivals(s.as_raw_fd());
        }
    }
    let took = now.saturating_duration_since(t.connect_start);
    let setup = t.tls_setup.take();
    core.connected(d.counted_to(c), took);
    let Some(setup) = setup else {
        return d.up(core, c, now);
    };
    match rustls::ClientConnection::new(setup.config, setup.server_name) {
        Ok(tls) => {
            let t = d.tcp(c);
            t.tls = Some(Box::new(tls));
            // From here on, the handshake's start.
            t.connect_start = now;
            d.handshaking(c);
            handshake(d, core, c);
        }
        Err(e) => d.open_failed(core, c, (ErrorKind::Tls, Cow::Owned(e.to_string())), now),
    }
}

/// Moves connection `c`'s TLS handshake as far as the socket allows; done,
/// its time is recorded and the connection is up.
pub(crate) fn handshake<D: Opening>(d: &mut D, core: &mut Core<'_>, c: u32) {
    let now = Instant::now();
    let t = d.tcp(c);
    let (Some(s), Some(tls)) = (t.sock.as_mut(), t.tls.as_mut()) else {
        return;
    };
    match handshake_step(s, tls, &mut core.rec.counters.bytes_read) {
        Err(why) => d.open_failed(core, c, why, now),
        Ok(true) => {
            core.rec
                .tls
                .record(now.saturating_duration_since(t.connect_start));
            d.up(core, c, now);
        }
        Ok(false) => {}
    }
}

/// Moves TLS handshake bytes both ways on a non-blocking socket until the
/// handshake is done or the socket would block (bounded). `Ok(true)`: done;
/// `Ok(false)`: waits for the socket; the error is the connect's. Bytes read
/// are added to `bytes_read`.
fn handshake_step(
    s: &mut TcpStream,
    tls: &mut rustls::ClientConnection,
    bytes_read: &mut u64,
) -> Result<bool, Failure> {
    for _ in 0..64 {
        let mut progressed = false;
        while tls.wants_write() {
            match tls.write_tls(s) {
                Ok(_) => progressed = true,
                Err(e) if e.kind() == IoKind::WouldBlock => break,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err((ErrorKind::from_io(&e, true), io_msg(&e))),
            }
        }
        if !tls.is_handshaking() {
            break;
        }
        if tls.wants_read() {
            match tls.read_tls(s) {
                Ok(0) => {
                    let m = "connection closed during the TLS handshake";
                    return Err((ErrorKind::Tls, m.into()));
                }
                Ok(n) => {
                    *bytes_read += n as u64;
                    progressed = true;
                    if let Err(e) = tls.process_new_packets() {
                        // Send the alert, then fail.
                        let _ = tls.write_tls(s);
                        return Err((ErrorKind::Tls, Cow::Owned(e.to_string())));
                    }
                }
                Err(e) if e.kind() == IoKind::WouldBlock => {}
                Err(e) if e.kind() == IoKind::Interrupted => progressed = true,
                Err(e) => return Err((ErrorKind::from_io(&e, true), io_msg(&e))),
            }
        }
        if !progressed {
            break;
        }
    }
    Ok(!tls.is_handshaking() && !tls.wants_write())
}

/// What a failed read of TLS plaintext counts as: the peer's TCP closing
/// without TLS's close_notify is a closed connection, anything else TLS's.
pub(crate) fn plaintext_error(e: &std::io::Error) -> ErrorKind {
    if e.kind() == IoKind::UnexpectedEof {
        ErrorKind::Closed
    } else {
        ErrorKind::Tls
    }
}
