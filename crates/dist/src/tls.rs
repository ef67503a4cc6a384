//! Optional TLS between agents and the coordinator (`coordinate --tls-cert
//! --tls-key`, `agent --cacert`), with rustls.
//!
//! The protocol code reads and writes a plain `TcpStream` from several
//! threads (a reader, and writers for progress, stop, abort); a rustls
//! connection cannot be split that way. So each TLS connection gets a
//! bridge: a loopback TCP pair (the accepted end checked to be the one this
//! process connected, so no other local process can slip in) and one pump
//! thread that moves bytes between the TLS socket and the pair with
//! `poll(2)`. The protocol code gets the other end of the pair and does
//! not change: its bounds (registration time-out, line lengths) apply as
//! before. The server's handshake is bounded by [`HANDSHAKE_TIMEOUT`]; the
//! agent's handshake is done before the bridge, so a certificate that is
//! not trusted is a clear error.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a new connection has for its TLS handshake (server side).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Plaintext waiting for the protocol side beyond this stops reading TLS.
const MAX_PENDING: usize = 1 << 20;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The coordinator's TLS configuration from PEM: its certificate chain and
/// key. Err: one line.
pub fn server_config(cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<rustls::ServerConfig>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert: not a PEM certificate: {e}"))?;
    if chain.is_empty() {
        return Err("--tls-cert: no certificate in the file".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("--tls-key: not a PEM private key: {e}"))?;
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("--tls-cert/--tls-key: {e}"))?;
    Ok(Arc::new(cfg))
}

/// An agent's TLS configuration: trust only the CA certificates in
/// `ca_pem`. Err: one line.
pub fn client_config(ca_pem: &[u8]) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem) {
        let c = c.map_err(|e| format!("--cacert: not a PEM certificate: {e}"))?;
        roots
            .add(c)
            .map_err(|e| format!("--cacert: not a usable CA certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("--cacert: no certificate in the file".into());
    }
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

/// A connected loopback pair (ours, theirs): the accepted end is checked to
/// be the one this process connected.
fn pair() -> std::io::Result<(TcpStream, TcpStream)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let a = TcpStream::connect(l.local_addr()?)?;
    let me = a.local_addr()?;
    l.set_nonblocking(true)?;
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        match l.accept() {
            Ok((b, peer)) if peer == me => {
                b.set_nonblocking(false)?;
                return Ok((a, b));
            }
            Ok(_) => continue, // someone else: dropped
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        ErrorKind::TimedOut,
        "the loopback pair did not connect",
    ))
}

/// Server side: starts the bridge for an accepted connection; returns the
/// plain end for the protocol code. The handshake runs in the pump.
pub fn accept(tcp: TcpStream, cfg: Arc<rustls::ServerConfig>) -> std::io::Result<TcpStream> {
    let mut conn = rustls::ServerConnection::new(cfg).map_err(std::io::Error::other)?;
    // Bounded by the pump instead: it reads the plain side only once TLS
    // has sent what it had.
    conn.set_buffer_limit(None);
    bridge(rustls::Connection::Server(conn), tcp)
}

/// Client side: the handshake (within `timeout`, so an untrusted
/// certificate or a plain-TCP coordinator is a clear error), then the
/// bridge; returns the plain end.
pub fn connect(
    mut tcp: TcpStream,
    server_name: &str,
    cfg: Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> Result<TcpStream, String> {
    let name = ServerName::try_from(server_name.to_string())
        .map_err(|_| format!("{server_name:?} is not a host name for TLS"))?;
    let mut conn = rustls::ClientConnection::new(cfg, name).map_err(|e| e.to_string())?;
    let _ = tcp.set_read_timeout(Some(timeout));
    let _ = tcp.set_write_timeout(Some(timeout));
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp)
            .map_err(|e| format!("TLS handshake with the coordinator: {e}"))?;
    }
    conn.set_buffer_limit(None);
    bridge(rustls::Connection::Client(conn), tcp).map_err(|e| e.to_string())
}

fn bridge(conn: rustls::Connection, tls: TcpStream) -> std::io::Result<TcpStream> {
    let (ours, theirs) = pair()?;
    tls.set_nonblocking(true)?;
    ours.set_nonblocking(true)?;
    let _ = ours.set_nodelay(true);
    let _ = theirs.set_nodelay(true);
    std::thread::Builder::new()
        .name("redline-tls".into())
        .spawn(move || pump(conn, tls, ours))?;
    Ok(theirs)
}

/// Ends the TLS side once the protocol side closed: what TLS still holds
/// and a close_notify go out (5 s at most), then [`linger`].
fn close(mut conn: rustls::Connection, mut tls: TcpStream) {
    conn.send_close_notify();
    let _ = tls.set_nonblocking(false);
    let _ = tls.set_write_timeout(Some(Duration::from_secs(5)));
    while conn.wants_write() {
        if conn.write_tls(&mut tls).is_err() {
            break;
        }
    }
    linger(tls);
}

/// Ends a connection whose side closed: half-closes it, then reads and
/// drops what the peer still sends until it closes too (bounded by 2 s, and
/// 200 ms of silence). Closing with unread bytes would make the kernel send
/// a reset, and a reset can make the peer lose what was sent just before
/// it (the coordinator's ack to an agent's record while the agent's last
/// live second was on the way).
fn linger(mut tls: TcpStream) {
    let _ = tls.shutdown(std::net::Shutdown::Write);
    let _ = tls.set_nonblocking(false);
    let _ = tls.set_read_timeout(Some(Duration::from_millis(200)));
    let end = Instant::now() + Duration::from_secs(2);
    let mut sink = [0u8; 4096];
    while Instant::now() < end {
        match tls.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
}

/// Moves bytes both ways until either side closes or fails.
fn pump(mut conn: rustls::Connection, mut tls: TcpStream, mut plain: TcpStream) {
    let started = Instant::now();
    let mut to_plain: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut tls_eof = false;
    loop {
        // Send what TLS has to send.
        while conn.wants_write() {
            match conn.write_tls(&mut tls) {
                Ok(_) => {}
                Err(e) if would_block(&e) => break,
                Err(_) => return,
            }
        }
        // Hand the plaintext received to the protocol side.
        while !to_plain.is_empty() {
            match plain.write(&to_plain) {
                Ok(0) => return,
                Ok(n) => {
                    to_plain.drain(..n);
                }
                Err(e) if would_block(&e) => break,
                Err(_) => return,
            }
        }
        if tls_eof && to_plain.is_empty() {
            return; // the peer is gone and everything it sent is delivered
        }
        if conn.is_handshaking() && started.elapsed() > HANDSHAKE_TIMEOUT {
            return;
        }
        let read_tls = !tls_eof && to_plain.len() < MAX_PENDING;
        let read_plain = !conn.is_handshaking() && !conn.wants_write();
        let mut fds = [
            libc::pollfd {
                fd: tls.as_raw_fd(),
                events: (if read_tls { libc::POLLIN } else { 0 })
                    | (if conn.wants_write() { libc::POLLOUT } else { 0 }),
                revents: 0,
            },
            libc::pollfd {
                fd: plain.as_raw_fd(),
                events: (if read_plain { libc::POLLIN } else { 0 })
                    | (if to_plain.is_empty() {
                        0
                    } else {
                        libc::POLLOUT
                    }),
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the call's length.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
        if r < 0 {
            if std::io::Error::last_os_error().kind() == ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let bad = libc::POLLERR | libc::POLLNVAL;
        if fds[1].revents & bad != 0 || (!read_plain && fds[1].revents & libc::POLLHUP != 0) {
            // The protocol side is gone (a reset when it closed with bytes
            // unread): what it wrote before going still goes out, then the
            // close. (Not read again after: no busy loop.)
            if !conn.is_handshaking() {
                for _ in 0..1024 {
                    match plain.read(&mut buf) {
                        Ok(n) if n > 0 => {
                            if conn.writer().write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        _ => break,
                    }
                }
                close(conn, tls);
            }
            return;
        }
        if read_tls && fds[0].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            match conn.read_tls(&mut tls) {
                Ok(0) => tls_eof = true,
                Ok(_) => {
                    if conn.process_new_packets().is_err() {
                        let _ = conn.write_tls(&mut tls); // the alert
                        return;
                    }
                    loop {
                        match conn.reader().read(&mut buf) {
                            Ok(0) => {
                                tls_eof = true; // close_notify
                                break;
                            }
                            Ok(n) => to_plain.extend_from_slice(&buf[..n]),
                            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                            // Closed without close_notify: what came is
                            // still delivered (a cut line fails to parse).
                            Err(_) => {
                                tls_eof = true;
                                break;
                            }
                        }
                    }
                }
                Err(e) if would_block(&e) => {}
                // A reset: the plaintext already received still goes to
                // the protocol side (the peer's last message, an ack,
                // comes right before its close).
                Err(_) => tls_eof = true,
            }
        }
        if read_plain && fds[1].revents & (libc::POLLIN | libc::POLLHUP) != 0 {
            match plain.read(&mut buf) {
                Ok(0) => {
                    // The protocol side closed: say so over TLS and end.
                    close(conn, tls);
                    return;
                }
                Ok(n) => {
                    if conn.writer().write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
                Err(e) if would_block(&e) => {}
                Err(_) => {
                    close(conn, tls);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coordinator's last words (an ack) written right before it closes
    /// its side with the agent's bytes unread (the kernel resets that
    /// loopback pair) still reach the agent, then the close. Before, the
    /// pump saw the reset first and dropped the ack: 2 of 20 distributed
    /// runs failed with "the coordinator closed the connection".
    #[test]
    fn last_words_before_a_reset_close_are_delivered() {
        let pki = redline_testkit::pki::pki();
        let server = server_config(pki.leaf_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap();
        let client = client_config(pki.ca_pem.as_bytes()).unwrap();
        for round in 0..20 {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let coord = std::thread::spawn({
                let server = server.clone();
                move || {
                    let (tcp, _) = l.accept().unwrap();
                    let mut plain = accept(tcp, server).unwrap();
                    let mut line = [0u8; 6];
                    plain.read_exact(&mut line).unwrap(); // "done!\n"
                                                          // The agent's next message arrives and is never read.
                    std::thread::sleep(Duration::from_millis(20));
                    plain.write_all(b"ack\n").unwrap();
                    drop(plain); // closed with bytes unread: a reset
                }
            });
            let tcp = TcpStream::connect(addr).unwrap();
            let mut plain =
                connect(tcp, "localhost", client.clone(), Duration::from_secs(10)).unwrap();
            plain.write_all(b"done!\n").unwrap();
            plain.write_all(b"second\n").unwrap();
            plain
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut got = Vec::new();
            let _ = plain.read_to_end(&mut got);
            coord.join().unwrap();
            assert_eq!(got, b"ack\n", "round {round}");
        }
    }
}
