//! The worker's one QUIC endpoint, shared by all its HTTP/3 connections,
//! without a socket ([`QuicEndpoint`]): a new connection's session made on
//! it and routed to the driver's connection; a datagram in routed by the
//! connection handle the endpoint names (from the server only, as a
//! connected socket would); a connection's endpoint events handed to it
//! before the connection sends; a connection that goes forgotten once.
//! `mux/udp.rs` feeds it the socket's datagrams, and the offline network of
//! the mode tests (`mux/wire_tests.rs`) the test server's, so both go
//! through the same routing; its own tests (`mux/endpoint_tests.rs`) run
//! several connections on one endpoint against a `quinn-proto` server.

use super::conn::NIL;
use crate::http3::{Http3Config, Http3Session};
use bytes::BytesMut;
use quinn_proto::{ConnectionEvent, DatagramEvent, EcnCodepoint, Endpoint};
use std::net::SocketAddr;
use std::time::Instant;

/// Datagrams in are copied into chunks of this size, one after the other
/// (`quinn-proto` takes each as an owned `BytesMut` and keeps views of it
/// for stream data): one allocation per chunk, not per datagram.
const RX_CHUNK: usize = 64 * 1024;

/// A worker's QUIC endpoint and its routes (see the top of this file).
pub(super) struct QuicEndpoint {
    endpoint: Endpoint,
    /// The server: datagrams from elsewhere are dropped.
    server: SocketAddr,
    /// Connection handle → the driver's connection (NIL: none).
    routes: Vec<u32>,
    /// The chunk datagrams in are copied into ([`RX_CHUNK`]).
    chunk: BytesMut,
    /// What the endpoint would answer a datagram with (dropped: a client
    /// has nothing to say to a stranger).
    scratch: Vec<u8>,
}

impl QuicEndpoint {
    /// The endpoint of a worker whose connections go to `server`.
    pub(super) fn new(endpoint: Endpoint, server: SocketAddr) -> QuicEndpoint {
        QuicEndpoint {
            endpoint,
            server,
            routes: Vec::new(),
            chunk: BytesMut::new(),
            scratch: Vec::new(),
        }
    }

    /// A new connection, the driver's `c`, on this endpoint: its session
    /// (building its datagrams when the driver sends) and its route.
    pub(super) fn connect(
        &mut self,
        config: &Http3Config,
        server_name: &str,
        c: u32,
        now: Instant,
    ) -> Result<Http3Session, String> {
        let mut s =
            Http3Session::on_endpoint(config, &mut self.endpoint, self.server, server_name, now)?;
        s.batched();
        let ch = s.handle().0;
        if self.routes.len() <= ch {
            self.routes.resize(ch + 1, NIL);
        }
        self.routes[ch] = c;
        Ok(s)
    }

    /// A datagram from `from` that arrived `at`: the driver's connection it
    /// is for and the event that carries it to that connection's session
    /// ([`Http3Session::conn_event`]); None for a datagram from elsewhere,
    /// for a connection forgotten, or for none.
    pub(super) fn datagram(
        &mut self,
        at: Instant,
        from: SocketAddr,
        ecn: Option<EcnCodepoint>,
        d: &[u8],
    ) -> Option<(u32, ConnectionEvent)> {
        if !self.is_server(from) {
            return None;
        }
        if self.chunk.capacity() < d.len() {
            self.chunk = BytesMut::with_capacity(RX_CHUNK.max(d.len()));
        }
        self.chunk.extend_from_slice(d);
        let datagram = self.chunk.split();
        self.scratch.clear();
        let ev = self
            .endpoint
            .handle(at, self.server, None, ecn, datagram, &mut self.scratch);
        let Some(DatagramEvent::ConnectionEvent(ch, ev)) = ev else {
            return None;
        };
        let c = self.routes.get(ch.0).copied().unwrap_or(NIL);
        (c != NIL).then_some((c, ev))
    }

    /// A datagram from `from` comes from the server (IP and port: an IPv6
    /// source may carry flow and scope fields the resolved address has not).
    pub(super) fn is_server(&self, from: SocketAddr) -> bool {
        (from.ip(), from.port()) == (self.server.ip(), self.server.port())
    }

    /// Before a connection sends: what it has for the endpoint (new
    /// connection ids, reset tokens) goes there, and the answers back.
    pub(super) fn before_send(&mut self, sess: &mut Http3Session) {
        sess.endpoint_events(&mut self.endpoint);
    }

    /// The driver's connection `c` goes: the endpoint forgets its
    /// connection (once, however often it is told) and its route is
    /// cleared (its handle may name a new connection after this).
    pub(super) fn forget(&mut self, sess: &mut Http3Session, c: u32) {
        sess.release(&mut self.endpoint);
        let ch = sess.handle().0;
        if self.routes.get(ch) == Some(&c) {
            self.routes[ch] = NIL;
        }
    }

    /// Connections routed now.
    #[cfg(test)]
    pub(super) fn routed(&self) -> usize {
        self.routes.iter().filter(|&&c| c != NIL).count()
    }

    /// Connections the endpoint itself still knows.
    #[cfg(test)]
    pub(super) fn open_connections(&self) -> usize {
        self.endpoint.open_connections()
    }
}
