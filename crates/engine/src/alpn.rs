//! The ALPN probe for https runs that leave the version open (no `--http2`,
//! `--http1.1` or `--http1.0`): one TLS handshake offering `h2` and
//! `http/1.1` (`crate::tls::handshake`, which is also the certificate check
//! before any worker starts). [`crate::Plan::build`] asks it once when told to
//! ([`crate::PlanArgs::ask_alpn`]), before any worker starts, and settles the plan's protocol from the answer (HTTP/2 when the
//! server picks `h2` and the plan can run over it, [`crate::Protocol::supports`];
//! the config then says [`NEGOTIATED_H2`]).

use std::time::Duration;

/// What the config's `negotiated` field says for an HTTP/2 run chosen by ALPN.
pub const NEGOTIATED_H2: &str = "HTTP/2 (negotiated by ALPN)";

/// The longest the probe may take (it also stays under the run's time-outs).
pub(crate) const PROBE_LIMIT: Duration = Duration::from_secs(5);
