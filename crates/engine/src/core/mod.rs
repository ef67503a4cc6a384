//! The protocol-free, socket-free core every driver shares (issue 31): the
//! load modes written once. [`Core`] (`client.rs`) is one worker's load: its
//! request slots, the [`crate::ledger::Ledger`], the [`crate::control::Control`]
//! tick, the recorder and the workload (fixed request or scenario users and
//! journeys). `lifecycle.rs` is what a request's end means (the one place that
//! ends a request in the ledger, the recorder and the workload together),
//! redirects and requests to other hosts, think times, stage levels, the
//! open-loop release and the stop. A driver moves bytes: it implements
//! [`Link`] (connect a slot, submit its request, close it) and reports what its
//! sessions say (`Core::complete`, `Core::fail`, `Core::connection_ready`…).
//! `spec.rs` holds what a worker is asked to do and hands back. The ledger,
//! the control tick and the overdue count (`ledger.rs`, `control.rs`,
//! `overdue.rs`) belong to this layer too (docs/ARCHITECTURE.md, "Layers").
//!
//! A slot is the unit of concurrency: a connection in HTTP/1, a stream slot
//! on a connection in HTTP/2 (the driver maps slots to connections). Mode
//! logic asks a driver only a slot's [`ConnState`].

pub(crate) mod client;
mod lifecycle;
pub(crate) mod spec;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod wire_tests;

pub(crate) use client::Core;
pub(crate) use lifecycle::Answered;

use crate::redirect::Origin;
use crate::session::Answer;
use crate::tls::TlsSetup;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Methods a client may send again after a reused connection closed before
/// any byte of the answer (RFC 9110 §9.2.2): both drivers ask this before
/// [`Core::refused`].
pub(crate) fn idempotent(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
    )
}

/// Where a slot's connection is, as the mode logic sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnState {
    /// No connection.
    Closed,
    /// Connect in progress.
    Connecting,
    /// Connected, security handshake in progress.
    Handshaking,
    /// Connected, no request on the slot.
    Idle,
    /// The slot's request is being written.
    Writing,
    /// Written, the answer is being read.
    Reading,
}

impl ConnState {
    /// A request is on the wire (written or being written).
    pub(crate) fn busy(self) -> bool {
        matches!(self, ConnState::Writing | ConnState::Reading)
    }

    /// A connect or handshake is in progress.
    pub(crate) fn opening(self) -> bool {
        matches!(self, ConnState::Connecting | ConnState::Handshaking)
    }
}

/// Which request a slot sends ([`Link::submit`]); the driver puts it in its
/// protocol's form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outgoing {
    /// The plan's request (asking to close the connection when `close`).
    Plan {
        /// `--requests-per-conn` reached: the last request on the connection.
        close: bool,
    },
    /// Scenario request `r` as rendered for the slot's user
    /// ([`Core::scenario_request`]).
    Scenario {
        /// Its index.
        r: usize,
        /// The last request on the connection.
        close: bool,
    },
    /// The next hop of the slot's redirected request ([`Core::hop`]).
    Hop,
}

/// Where a slot connects ([`Core::destination`]).
pub(crate) struct Destination<'a> {
    /// The address.
    pub(crate) addr: SocketAddr,
    /// TLS for https.
    pub(crate) tls: Option<&'a TlsSetup>,
}

/// What the core asks of a driver: a slot's connection state, a connect, a
/// request submitted and written, a connection closed. The driver reports
/// back through the core's `pub(crate)` event methods; both sides get the
/// other as an argument (they are two fields of one worker).
pub(crate) trait Link {
    /// Slot `i`'s connection state.
    fn state(&self, i: u32) -> ConnState;
    /// Connects slot `i` (to [`Core::destination`]); reports
    /// [`Core::connection_ready`] or [`Core::connect_failed`], maybe at once.
    fn connect(&mut self, core: &mut Core<'_>, i: u32, now: Instant);
    /// Submits slot `i`'s request `what` (its answer time-out `timeout`) on
    /// its idle connection and starts writing it; reports
    /// [`Core::complete`] or [`Core::fail`], maybe at once.
    fn submit(
        &mut self,
        core: &mut Core<'_>,
        i: u32,
        what: Outgoing,
        timeout: Duration,
        now: Instant,
    );
    /// Closes slot `i`'s connection (nothing reported).
    fn close(&mut self, core: &mut Core<'_>, i: u32);
    /// Slot `i`'s request ended: stop timing it out.
    fn settle(&mut self, i: u32);
    /// Slot `i`'s request ended and its connection stays: idle now.
    fn idle(&mut self, i: u32);
    /// Fails what timed out by `now` ([`Core::fail`], [`Core::connect_failed`]).
    fn expire(&mut self, core: &mut Core<'_>, now: Instant);
    /// Slot `i`'s connection may carry another request (the protocol did not
    /// close it).
    fn reusable(&self, i: u32) -> bool;
    /// Hands a kept answer back to slot `i`'s session for reuse.
    fn recycle(&mut self, i: u32, answer: Box<Answer>);
    /// Slots share connections (a multiplexing driver): the open loop then
    /// puts the requests it releases together on one connection, so they go
    /// out in one write ([`Link::same_connection`]).
    const SHARES_CONNECTIONS: bool = false;
    /// Slots `a` and `b` are on the same open connection.
    fn same_connection(&self, _a: u32, _b: u32) -> bool {
        false
    }
}

/// A request being redirected: its hops so far and the request of the next.
pub(crate) struct Redirected {
    pub(crate) hops: u32,
    /// The URL the current hop goes to.
    pub(crate) url: url::Url,
    /// The original request's spec (hops are rewritten from it).
    pub(crate) orig: crate::plan::RequestSpec,
    /// The original request asked to close the connection (its hops too).
    pub(crate) close: bool,
    /// The current hop's request ([`crate::redirect::hop_spec`]).
    pub(crate) spec: crate::plan::RequestSpec,
    /// Where the current hop goes when not the request's own origin.
    pub(crate) to: Option<Arc<Origin>>,
    /// A hop made it a GET without body (301/302 after POST, 303).
    pub(crate) get: bool,
}

/// One slot's load state.
pub(crate) struct Slot {
    /// A request is assigned to this slot (maybe waiting for the connect).
    pub(crate) has_request: bool,
    /// The request's intended send time.
    pub(crate) intended: Instant,
    /// The request asks the server to close (`--requests-per-conn` reached).
    pub(crate) close_after: bool,
    /// Requests sent on the slot's connection.
    pub(crate) on_conn: u64,
    /// Closed loop with `--requests-per-conn` and `-n`: requests reserved
    /// for the slot's connection.
    pub(crate) quota: u64,
    /// `--follow-redirects`: the redirect chain of the request in progress.
    pub(crate) redir: Option<Box<Redirected>>,
    /// The connection is open to a redirect's origin, not the request's own:
    /// the next request replaces the connection.
    pub(crate) away: Option<Arc<Origin>>,
    /// What the slot's request was submitted as (to send it again).
    pub(crate) last: Option<Outgoing>,
    /// The server refused the request unprocessed and it goes again on a
    /// new connection (once: [`Core::refused`]).
    pub(crate) again: bool,
    /// It went again already.
    pub(crate) retried: bool,
}

impl Slot {
    /// The slot's request was sent already and waits for a connection (a
    /// redirect's next hop, or a request refused unprocessed going again).
    pub(crate) fn in_flight(&self) -> bool {
        self.redir.is_some() || self.again
    }

    fn new(now: Instant) -> Slot {
        Slot {
            has_request: false,
            intended: now,
            close_after: false,
            on_conn: 0,
            quota: 0,
            redir: None,
            away: None,
            last: None,
            again: false,
            retried: false,
        }
    }
}
