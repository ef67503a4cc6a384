//! The multiplexing driver: HTTP/2 (`--http2` over TLS with ALPN, `--h2c`
//! with prior knowledge) and HTTP/3 (`--http3`: QUIC on one UDP socket and
//! one endpoint per worker, `mux/quic.rs`, `mux/udp.rs`) on the protocol-free core
//! ([`Core`], every load mode written once). It moves bytes and nothing else: one worker thread,
//! one `mio` poller, connections that each carry a sans-IO session and the
//! core's slots mapped onto them.
//!
//! - A **slot** is a stream slot: slot `i` belongs to the run's own-origin
//!   connection group `i % C` (C = this worker's connections; a group's
//!   connection carries up to `--streams` slots, so `-n 5 -c 4 --streams 10`
//!   opens 4 connections, as h2load's `-c × -m` does). A slot whose request
//!   goes to another origin (a redirect's, another host of a scenario) has a
//!   private connection there, in the protocol that server picks (HTTP/2 by
//!   ALPN `h2`, or in an h2c run a cleartext origin by prior knowledge; else
//!   HTTP/1.1 on an [`H1Session`]), as a browser would.
//! - A **connection** ([`mux/conn.rs`](self)) is a socket, its TLS session
//!   and a [`Proto`] session; a group's connection is replaced when it
//!   retires (GOAWAY, stream ids used up, `--requests-per-conn`, failed) and
//!   closes when no slot uses it. A request the server refused unprocessed
//!   (GOAWAY naming a lower stream, REFUSED_STREAM) goes again once on a new
//!   connection ([`Core::refused`]).
//! - A request waits for a stream when the connection has none free
//!   (`SETTINGS_MAX_CONCURRENT_STREAMS`): it is on its slot, timed by
//!   `--timeout` from then, and submitted as soon as a stream ends.
//!
//! `mux/conn.rs` holds the connection table, `mux/link.rs` the core's seam
//! ([`crate::core::Link`]), `mux/transport.rs` connects and TLS (the steps
//! shared with the HTTP/1 driver in `tcp.rs`), reads, writes and the
//! sessions' events, `mux/quic.rs` QUIC's handshake and timers,
//! `mux/endpoint.rs` the worker's one QUIC endpoint and its routes (no
//! socket), `mux/udp.rs` QUIC's datagrams in and out (the worker's socket;
//! `quinn-udp`: batches, GSO, GRO), `mux/icmp.rs` its ICMP errors.

mod conn;
mod endpoint;
#[cfg(test)]
mod endpoint_tests;
mod icmp;
mod link;
mod quic;
mod transport;
mod udp;
#[cfg(test)]
pub(crate) mod wire_tests;

use crate::core::spec::{WorkerResult, WorkerSpec};
use crate::core::{ConnState, Core};
use crate::http2::Http2Request;
use crate::ioloop::Sleeper;
use crate::plan::Plan;
use conn::{Conn, SlotIo, NIL};
use mio::Poll;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub(crate) use conn::Proto;

const READ_BUF: usize = 64 * 1024;

/// What every HTTP/2 worker of a run shares: the plan's request in HTTP/2
/// form, the TLS configurations (ALPN `h2` for the run's origin; `h2` and
/// `http/1.1` for others) and the first fatal error (a server without h2).
pub struct Setup {
    request: Http2Request,
    fatal: Mutex<Option<String>>,
    /// `--http3`: QUIC's configuration and the run's request in HTTP/3 form.
    h3: Option<H3Setup>,
}

/// What the HTTP/3 connections of a run share.
struct H3Setup {
    config: crate::http3::Http3Config,
    /// The name the certificate must carry (SNI).
    server_name: String,
    request: crate::http3::Http3Request,
    /// The UDP endpoint (the origin's `Alt-Svc` h3 alternative, or its address).
    addr: std::net::SocketAddr,
}

impl Setup {
    /// The error that ended the run, if one did (e.g. the server does not offer h2).
    pub fn fatal(&self) -> Option<String> {
        self.fatal.lock().ok().and_then(|f| f.clone())
    }
}

/// Prepares what the workers of an HTTP/2 run share.
pub fn prepare(plan: &Plan) -> Result<Arc<Setup>, String> {
    // Sent again and again: its fields go into each connection's HPACK
    // table once and are named by index after that (as browsers and
    // h2load do), so the server decodes a few bytes per request.
    let request = Http2Request::from_spec(&plan.spec, plan.scheme())?.with_indexing();
    let h3 = match (plan.wire, plan.tls.as_ref()) {
        (crate::plan::Wire::H3, Some(tls)) => Some(H3Setup {
            config: crate::http3::Http3Config::new(&tls.config)?,
            server_name: match &tls.server_name {
                rustls::pki_types::ServerName::DnsName(d) => d.as_ref().to_string(),
                rustls::pki_types::ServerName::IpAddress(ip) => {
                    std::net::IpAddr::from(*ip).to_string()
                }
                _ => plan.target.host.clone(),
            },
            request: crate::http3::Http3Request::from_h2(&request),
            addr: plan.h3.as_ref().map_or(plan.target.addr, |r| r.addr),
        }),
        _ => None,
    };
    Ok(Arc::new(Setup {
        request,
        fatal: Mutex::new(None),
        h3,
    }))
}

/// The driver's state: the connection slab, the slots' I/O state, time-outs.
pub(crate) struct MuxLink {
    setup: Arc<Setup>,
    poll: Poll,
    /// The connection slab (the poller's token is the index).
    conns: Vec<Conn>,
    free_conns: Vec<u32>,
    /// Each own-origin group's current connection (NIL: none).
    groups: Vec<u32>,
    slots: Vec<SlotIo>,
    buf: Box<[u8]>,
    /// HTTP/3: the worker's QUIC socket (`mux/udp.rs`) and its endpoint
    /// (`mux/endpoint.rs`), made for its first QUIC connection.
    quic: Option<Box<udp::QuicIo>>,
    quic_ep: Option<Box<endpoint::QuicEndpoint>>,
    /// HTTP/3: connections the current read brought datagrams to.
    touched: Vec<u32>,
    /// Requests on the wire or waiting for a stream, by deadline (a slot's
    /// entry counts while its generation matches).
    timeouts: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// Connects and handshakes, by deadline (a connection's entry counts
    /// while its generation matches).
    connect_timeouts: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// HTTP/3: QUIC timers by deadline (see `mux/quic.rs`).
    quic_timers: BinaryHeap<Reverse<(Instant, u32)>>,
    sleeper: Sleeper,
    /// Closed loop: answers left waiting for a short timer when the server
    /// is the bottleneck (`defer.rs`).
    defer: crate::defer::Defer,
    /// `--requests-per-conn`.
    per_conn: Option<u64>,
    /// An h2c run: other cleartext origins get HTTP/2 by prior knowledge.
    h2c: bool,
    /// Connections with bytes to write.
    dirty: Vec<u32>,
    /// The run's TLS with ALPN `h2` only (its own origin).
    own_tls: Option<crate::tls::TlsSetup>,
}

/// Runs one HTTP/2 worker to completion on the current thread.
pub fn run_worker(setup: &Arc<Setup>, plan: &Plan, spec: WorkerSpec, poll: Poll) -> WorkerResult {
    let (mut link, slots) = MuxLink::new(setup, plan, &spec, poll);
    let mut core = Core::new(plan, spec, slots);
    crate::ioloop::run(&mut link, &mut core);
    let mut r = core.finish(&link);
    r.pacing = crate::ioloop::Driver::pacing(&mut link);
    r
}

impl MuxLink {
    /// The driver of a worker asked `spec`, and its slots (stream slots).
    fn new(setup: &Arc<Setup>, plan: &Plan, spec: &WorkerSpec, poll: Poll) -> (MuxLink, usize) {
        let streams = plan.streams.max(1);
        let open_loop = spec.pacer.is_some();
        // A closed-loop stage level counts streams: the most this worker runs
        // decides its connections (see `plan::h2_connections`).
        let (groups, slots) = match (&spec.levels, open_loop) {
            (Some(l), false) => {
                let peak = l.peak();
                (crate::plan::h2_connections(peak, plan.streams), peak)
            }
            _ => (spec.connections, spec.connections * u64::from(streams)),
        };
        let groups = groups.clamp(1, 1 << 20) as usize;
        let slots = slots.clamp(1, 1 << 24) as usize;
        let now = Instant::now();
        // HTTP/2 writes the requests of one wake-up in one write per connection.
        let (sleeper, defer) = crate::ioloop::waiting(&poll, plan, spec);
        let link = MuxLink {
            setup: setup.clone(),
            poll,
            conns: Vec::new(),
            free_conns: Vec::new(),
            groups: vec![NIL; groups],
            slots: (0..slots).map(|_| SlotIo::new(now)).collect(),
            buf: vec![0u8; READ_BUF].into_boxed_slice(),
            quic: None,
            quic_ep: None,
            touched: Vec::new(),
            timeouts: BinaryHeap::new(),
            connect_timeouts: BinaryHeap::new(),
            quic_timers: BinaryHeap::new(),
            sleeper,
            defer,
            per_conn: plan.requests_per_conn,
            h2c: plan.tls.is_none(),
            dirty: Vec::new(),
            own_tls: plan.tls.as_ref().map(|t| {
                let mut cfg = (*t.config).clone();
                cfg.alpn_protocols = vec![b"h2".to_vec()];
                crate::tls::TlsSetup {
                    config: Arc::new(cfg),
                    ..t.clone()
                }
            }),
        };
        (link, slots)
    }
}

impl crate::ioloop::Driver for MuxLink {
    fn waiting(&mut self) -> (&mio::Poll, &mut Sleeper, &mut crate::defer::Defer) {
        (&self.poll, &mut self.sleeper, &mut self.defer)
    }

    fn first_deadline(&self) -> Option<Instant> {
        [self.timeouts.peek(), self.connect_timeouts.peek()]
            .into_iter()
            .flatten()
            .map(|Reverse((t, _, _))| *t)
            .chain(self.first_quic())
            .min()
    }

    fn before_wait(&mut self, core: &mut Core<'_>) {
        self.flush_all(core);
    }

    fn on_event(&mut self, core: &mut Core<'_>, token: usize, ev: crate::sys::Event) {
        if token == udp::QUIC.0 {
            return self.quic_event(core, ev);
        }
        let c = token as u32;
        if (c as usize) < self.conns.len() {
            self.conn_event(core, c, ev);
        }
    }

    fn shutdown(&mut self, core: &mut Core<'_>) {
        // Say goodbye where it costs nothing, then close what is left.
        for c in 0..self.conns.len() as u32 {
            self.shut(core, c);
        }
    }
}

impl MuxLink {
    /// The state of slot `i` as the core sees it.
    fn slot_state(&self, i: u32) -> ConnState {
        let s = &self.slots[i as usize];
        if s.conn == NIL {
            return ConnState::Closed;
        }
        let c = &self.conns[s.conn as usize];
        match c.state {
            conn::CState::Closed => ConnState::Closed,
            conn::CState::Connecting => ConnState::Connecting,
            conn::CState::Handshaking => ConnState::Handshaking,
            conn::CState::Open if s.busy => {
                if s.blocked {
                    ConnState::Writing
                } else {
                    ConnState::Reading
                }
            }
            // A connection that takes no new stream: the slot must move.
            conn::CState::Open if c.retired() => ConnState::Closed,
            conn::CState::Open => ConnState::Idle,
        }
    }

    /// Ends the whole run with an error (exit code 1): HTTP/2 cannot be used.
    fn fatal(&self, core: &mut Core<'_>, msg: String) {
        if let Ok(mut f) = self.setup.fatal.lock() {
            f.get_or_insert(msg);
        }
        // The other workers see the flag within their next tick.
        core.control.stop_all();
    }
}
