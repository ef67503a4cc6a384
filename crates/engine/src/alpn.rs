//! Automatic HTTP/2 for https runs: without `--http2` or `--http1.1`, one TLS
//! handshake before the run offers `h2` and `http/1.1` by ALPN. If the server
//! picks `h2` and the run's modes are ones the HTTP/2 engine runs
//! ([`Protocol::supports`]), the plan becomes an HTTP/2 plan and its
//! config says `HTTP/2 (negotiated by ALPN)`; otherwise it stays HTTP/1.1,
//! with a note when h2 was offered but could not be used.

use crate::plan::{Plan, Protocol};
use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the config's `negotiated` field says for an HTTP/2 run chosen by ALPN.
pub const NEGOTIATED_H2: &str = "HTTP/2 (negotiated by ALPN)";

/// The longest the probe may take (it also stays under the run's time-outs).
const PROBE_LIMIT: Duration = Duration::from_secs(5);

/// Offers `h2, http/1.1` to the plan's target in one TLS handshake; the
/// protocol the server picked, or `None` (none picked, or the handshake failed:
/// the run then shows why, request by request).
pub fn probe(plan: &Plan) -> Option<Vec<u8>> {
    let tls = plan.tls.as_ref()?;
    let addr = &plan.target.addr;
    let limit = plan.connect_timeout.min(plan.timeout).min(PROBE_LIMIT);
    let deadline = Instant::now() + limit;
    let mut cfg = (*tls.config).clone();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut conn = rustls::ClientConnection::new(Arc::new(cfg), tls.server_name.clone()).ok()?;
    let mut sock = TcpStream::connect_timeout(addr, limit).ok()?;
    for _ in 0..1000 {
        let left = deadline.checked_duration_since(Instant::now())?;
        if left.is_zero() {
            return None;
        }
        sock.set_read_timeout(Some(left)).ok()?;
        sock.set_write_timeout(Some(left)).ok()?;
        if !conn.is_handshaking() {
            break;
        }
        match conn.complete_io(&mut sock) {
            Ok((0, 0)) => return None,
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    let alpn = conn.alpn_protocol().map(<[u8]>::to_vec);
    // Say goodbye politely; the server need not answer.
    conn.send_close_notify();
    let _ = conn.write_tls(&mut sock);
    let _ = sock.flush();
    alpn
}

/// Negotiates the protocol of an https run that did not force one: switches
/// the plan to HTTP/2 when the server picks `h2` and the mode allows it.
/// Returns a note for the user when h2 was offered but is not used.
pub fn negotiate(plan: &mut Plan) -> Option<String> {
    if plan.http2 || plan.http11 || plan.tls.is_none() || plan.config.http_version != "1.1" {
        return None;
    }
    if probe(plan).as_deref() != Some(b"h2") {
        return None;
    }
    if let Some(mode) = Protocol::Http2.first_unsupported(&plan.modes()) {
        return Some(format!(
            "the server offers HTTP/2, but {} runs speak HTTP/1.1 for now: this run uses HTTP/1.1",
            mode.flag()
        ));
    }
    match use_negotiated_h2(plan) {
        Ok(()) => None,
        Err(e) => Some(format!(
            "the server offers HTTP/2, but this request cannot be sent over it ({e}): this run uses HTTP/1.1"
        )),
    }
}

/// Switches `plan` to the HTTP/2 that ALPN chose ([`negotiate`] after its
/// probe; also for later plans of the same target, e.g. each step of
/// `redline find`, without probing again). Unchanged when the request
/// cannot be sent over HTTP/2.
pub fn use_negotiated_h2(plan: &mut Plan) -> Result<(), String> {
    let mut h2 = plan.clone();
    h2.http2 = true;
    h2.config.http_version = "2".into();
    h2.config.streams = Some(u64::from(h2.streams));
    h2.config.negotiated = Some(NEGOTIATED_H2.into());
    crate::h2run::prepare(&h2)?;
    *plan = h2;
    Ok(())
}
