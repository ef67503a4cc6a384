//! The plan: everything a run needs, validated and resolved before any traffic.
//!
//! Raw options ([`PlanArgs`], syntax already checked by the CLI) become a
//! [`Plan`] here, once: the URL is resolved (`target`, shared with scenario
//! hosts), the protocol chosen (`mode`: a [`Wire`] and how it was chosen,
//! ALPN included), the request described once ([`request::RequestSpec`]) and
//! encoded for HTTP/1 and HTTP/2, the load model checked for sense
//! (`load`), and the recorded config redacted (`redact`). Nothing after
//! this point can fail on user input.
//!
//! - `args.rs`: the arguments as given;
//! - `build.rs`: [`Plan::build`];
//! - `target.rs`: URL and target resolution;
//! - `request.rs`: the request spec and its two encodings;
//! - `mode.rs`: [`Wire`], [`Alpn`], [`Protocol`] and the [`Mode`] matrix;
//! - `load.rs`: closed/open loop, stages, segments, durations;
//! - `redact.rs`: what outputs show of secrets.

mod args;
mod build;
pub(crate) mod h3;
mod load;
mod mode;
mod redact;
pub(crate) mod request;
pub(crate) mod target;

pub use args::{Arrival, LogReplay, PlanArgs, StageArgs};
pub use h3::H3Route;
pub use load::{
    parse_duration, Load, SegmentPlan, Staged, DEFAULT_CONNECTIONS, DEFAULT_DURATION,
    DEFAULT_OPEN_CONNECTIONS,
};
pub use mode::{h2_connections, Alpn, Mode, Protocol, Wire, MAX_STREAMS};
pub use redact::{redact_bad_header, redact_header, redact_raw_url, redact_url, REDACTED};
pub use request::{chunk, header_ok, unchunk, RequestSpec};
pub use target::Target;

use redline_stats::segment::Stripe;
use redline_stats::RunConfig;
use std::time::Duration;

/// Why options could not become a plan. Each is a usage error (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The URL could not be parsed.
    #[error("invalid URL '{url}': {why}")]
    BadUrl {
        /// The URL as given (password redacted).
        url: String,
        /// What is wrong.
        why: String,
    },
    /// The URL's scheme is not http or https.
    #[error("unsupported scheme '{scheme}' in '{url}' (expected http or https)")]
    Scheme {
        /// The URL (password redacted).
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// The host name did not resolve.
    #[error("cannot resolve host '{host}': {why}")]
    Resolve {
        /// Host.
        host: String,
        /// Resolver's message.
        why: String,
    },
    /// A header flag is not `Name: value`.
    #[error("invalid header '{0}': expected 'Name: value'")]
    BadHeader(String),
    /// Options that make no sense together or out of range.
    #[error("{0}")]
    Invalid(String),
}

pub(crate) fn usage(msg: impl Into<String>) -> PlanError {
    PlanError::Invalid(msg.into())
}

/// A validated run plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The target.
    pub target: Target,
    /// The request (a plain run's; a scenario's requests are its own).
    pub spec: RequestSpec,
    /// `spec` as HTTP/1 bytes for a request after which the connection stays open.
    pub request: Vec<u8>,
    /// `spec` as HTTP/1 bytes for the last request on a connection (asks the server to close).
    pub request_close: Vec<u8>,
    /// HEAD: responses carry no body.
    pub head_request: bool,
    /// Reuse connections.
    pub keepalive: bool,
    /// Requests per connection before it is closed (1 without keep-alive).
    pub requests_per_conn: Option<u64>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Time in-flight requests get to finish once sending stops.
    pub grace: Duration,
    /// Worker threads.
    pub threads: usize,
    /// The load model.
    pub load: Load,
    /// Seed for randomized arrivals.
    pub seed: u64,
    /// The configuration as recorded (secrets redacted).
    pub config: RunConfig,
    /// TLS, for https URLs.
    pub tls: Option<crate::tls::TlsSetup>,
    /// A scenario run: its compiled requests.
    pub scenario: Option<std::sync::Arc<crate::scenario::Scenario>>,
    /// `--stages`: how the level moves over the run.
    pub staged: Option<Staged>,
    /// What the run speaks ([`Wire::protocol`]: which engine runs it).
    pub wire: Wire,
    /// How `wire` was chosen ([`Alpn::Unasked`]: an https run left open
    /// whose build did not ask the server, [`PlanArgs::ask_alpn`]).
    pub alpn: Alpn,
    /// HTTP/2: concurrent streams per connection.
    pub streams: u32,
    /// `-L/--follow-redirects`: the limit and the origins resolved so far.
    pub follow: Option<std::sync::Arc<crate::redirect::Follow>>,
    /// `--segment`: this run is one share of a larger one.
    pub segment: Option<SegmentPlan>,
    /// What the build has to tell the user: the server offered HTTP/2 when
    /// asked ([`PlanArgs::ask_alpn`]) but this run cannot use it, and why.
    pub note: Option<String>,
    /// The build's ALPN probe was also the certificate check that runs
    /// before any worker (`crate::tls::refused_plan`): `Some(None)` the
    /// handshake was not refused, `Some(Some(line))` it was, with the line
    /// to stop with; `None` no probe was made.
    pub tls_checked: Option<Option<String>>,
    /// `--http3`: the UDP endpoint QUIC goes to and why (the origin's
    /// `Alt-Svc` read before the load, or the URL's port).
    pub h3: Option<H3Route>,
    /// Which answers succeeded (`--expect-status`; recorded in
    /// `config.expect_status` when not the default). The one status rule:
    /// a driver that judges an answer (`--abort-on-fail`'s live counts, a
    /// ledger's failures) calls `expect_status.ok(status)`.
    pub expect_status: redline_stats::ExpectStatus,
}

impl Plan {
    /// The global send ticks worker `worker` of `workers` owns: `worker + k·workers`,
    /// or in a `--segment` run its stripe of the segment's ticks.
    pub fn stripe(&self, worker: u64, workers: u64) -> Stripe {
        match &self.segment {
            Some(s) => s.segment.stripe(worker, workers),
            None => Stripe {
                period: workers.max(1),
                offsets: vec![worker],
            },
        }
    }

    /// Why this run has nothing to do (a `--segment` whose share is zero).
    pub fn empty_share(&self) -> Option<&str> {
        self.segment.as_ref().and_then(|s| s.empty.as_deref())
    }

    /// The engine this plan runs on.
    pub fn protocol(&self) -> Protocol {
        self.wire.protocol()
    }

    /// `https` or `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// The modes this plan runs.
    pub fn modes(&self) -> Vec<Mode> {
        let mut m = Vec::new();
        if self.scenario.is_some() {
            m.push(Mode::Scenario);
        }
        match &self.staged {
            Some(s) if s.rate => m.push(Mode::RateStages),
            Some(_) => m.push(Mode::Stages),
            None => {}
        }
        if self.follow.is_some() {
            m.push(Mode::FollowRedirects);
        }
        if crate::workload::journeys(self) {
            m.push(Mode::Journeys);
        }
        m
    }

    /// Settles the protocol of an https run that left it open
    /// ([`Alpn::Unasked`]): one TLS handshake offers `h2, http/1.1`
    /// (`crate::tls::handshake`) and the server's pick decides; the same
    /// handshake is the run's certificate check (`tls_checked`). Called once by
    /// [`Plan::build`] when [`PlanArgs::ask_alpn`] is set, before any worker
    /// starts; nothing to do for any other plan. Returns a note for the user
    /// when h2 was offered but cannot be used.
    pub(crate) fn resolve(&mut self) -> Option<String> {
        if self.alpn != Alpn::Unasked {
            return None;
        }
        // One handshake both asks ALPN and checks the certificate.
        let hs = self.tls.as_ref().map(|tls| {
            let limit = self
                .connect_timeout
                .min(self.timeout)
                .min(crate::alpn::PROBE_LIMIT);
            crate::tls::handshake(tls, self.target.addr, limit)
        });
        let picked = hs.as_ref().and_then(|h| h.alpn.clone());
        self.tls_checked = hs.map(|h| {
            h.refusal
                .map(|r| r.line(&self.target.display, &self.target.host))
        });
        self.alpn = match picked.as_deref() {
            Some(b"h2") => Alpn::PickedH2,
            _ => Alpn::NotH2,
        };
        self.settle_alpn()
    }

    /// `--http3`: where QUIC goes. With `ask` (the build may talk to the
    /// server), one request over TCP reads the origin's `Alt-Svc` first
    /// ([`h3::probe`]); its `h3` alternative is the endpoint, else the URL's port.
    pub(crate) fn resolve_h3(&mut self, ask: bool) {
        if self.wire != Wire::H3 {
            return;
        }
        let probe = match (&self.tls, ask) {
            (Some(tls), true) => {
                let limit = self
                    .connect_timeout
                    .min(self.timeout)
                    .min(crate::alpn::PROBE_LIMIT);
                let t = &self.target;
                let host = match t.host.contains(':') {
                    true => format!("[{}]", t.host),
                    false => t.host.clone(),
                };
                let host = match t.port {
                    443 => host,
                    p => format!("{host}:{p}"),
                };
                let (alt, refusal) = h3::probe(tls, t.addr, &host, &t.path, limit);
                // The probe's handshake was the run's certificate check.
                self.tls_checked = Some(refusal.map(|r| r.line(&t.display, &t.host)));
                alt
            }
            _ => Err("Alt-Svc was not asked".into()),
        };
        self.h3 = Some(h3::route(self.target.addr, probe));
    }

    /// Applies a known ALPN answer: the server picked `h2` and this plan can
    /// run over it, so it speaks HTTP/2 and its config says
    /// [`crate::alpn::NEGOTIATED_H2`]. Otherwise the plan stays HTTP/1.1
    /// (with a note when h2 was offered but is not used).
    fn settle_alpn(&mut self) -> Option<String> {
        if self.alpn != Alpn::PickedH2 || self.wire != Wire::Http11 {
            return None;
        }
        if let Some(mode) = Protocol::Http2.first_unsupported(&self.modes()) {
            return Some(format!(
                "the server offers HTTP/2, but {} runs speak HTTP/1.1 for now: this run uses HTTP/1.1",
                mode.flag()
            ));
        }
        if let Err(e) = self.spec.to_h2(self.scheme()) {
            return Some(format!(
                "the server offers HTTP/2, but this request cannot be sent over it ({e}): this run uses HTTP/1.1"
            ));
        }
        self.wire = Wire::H2Tls;
        self.config.http_version = self.wire.record_version().into();
        self.config.streams = Some(u64::from(self.streams));
        self.config.negotiated = Some(crate::alpn::NEGOTIATED_H2.into());
        None
    }
}

#[cfg(test)]
mod tests;
