//! The ALPN probe for https runs that leave the version open (no `--http2`,
//! `--http1.1` or `--http1.0`): one TLS handshake offering `h2` and
//! `http/1.1`. [`crate::Plan::build`] asks it once when told to
//! ([`crate::PlanArgs::ask_alpn`]), before any worker starts, and settles the plan's protocol from the answer (HTTP/2 when the
//! server picks `h2` and the plan can run over it, [`crate::Protocol::supports`];
//! the config then says [`NEGOTIATED_H2`]).

use crate::plan::Plan;
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
