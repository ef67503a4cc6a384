//! The worker's QUIC endpoint's own bookkeeping (`mux/endpoint.rs`), no
//! socket and no server: routes made and cleared, a connection forgotten
//! once however often it is told (its handle may already name a new
//! connection), datagrams from elsewhere or for nobody dropped. Several
//! connections exchanging datagrams through it with a server are the mode
//! tests' (`core/tests.rs`, `http3_connections_on_one_endpoint_…`,
//! `http3_one_connection_…`).

use super::endpoint::QuicEndpoint;
use super::Setup;
use crate::core::wire_tests::plan;
use crate::http3::Http3Session;
use crate::mux::wire_tests::H3Net;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// An `--http3` run's setup (its QUIC configuration) and an endpoint for it.
fn endpoint() -> (Arc<Setup>, QuicEndpoint) {
    let p = plan::<H3Net>(|_| {});
    let setup = super::prepare(&p).expect("setup");
    let h3 = setup.h3.as_ref().expect("HTTP/3");
    let ep = QuicEndpoint::new(h3.config.endpoint(), h3.addr);
    (setup, ep)
}

fn connect(setup: &Setup, ep: &mut QuicEndpoint, c: u32) -> Http3Session {
    let h3 = setup.h3.as_ref().expect("HTTP/3");
    ep.connect(&h3.config, &h3.server_name, c, Instant::now())
        .expect("a session")
}

/// A connection that goes is forgotten once: told again after its handle
/// went to a new connection, the endpoint keeps the new one and its route.
#[test]
fn a_connection_gone_is_forgotten_once() {
    let (setup, mut ep) = endpoint();
    let mut a = connect(&setup, &mut ep, 0);
    let b = connect(&setup, &mut ep, 1);
    assert_eq!((ep.routed(), ep.open_connections()), (2, 2));
    ep.forget(&mut a, 0);
    assert_eq!((ep.routed(), ep.open_connections()), (1, 1));
    // The freed handle goes to the next connection.
    let c = connect(&setup, &mut ep, 2);
    assert_eq!(c.handle(), a.handle(), "the handle is reused");
    assert_eq!((ep.routed(), ep.open_connections()), (2, 2));
    // Told again (a second close): nothing happens to the new connection.
    ep.forget(&mut a, 0);
    assert_eq!((ep.routed(), ep.open_connections()), (2, 2));
    assert_ne!(b.handle(), c.handle());
}

/// A datagram from another address, or one no connection of the endpoint
/// can take, reaches none.
#[test]
fn strangers_and_noise_reach_no_connection() {
    let (setup, mut ep) = endpoint();
    let _a = connect(&setup, &mut ep, 0);
    let server = setup.h3.as_ref().expect("HTTP/3").addr;
    let elsewhere: SocketAddr = "127.0.0.1:1".parse().expect("address");
    assert!(ep.is_server(server) && !ep.is_server(elsewhere));
    let now = Instant::now();
    // A short-header packet for a connection id nobody has.
    let mut noise = vec![0x40u8];
    noise.extend((0..60u8).map(|i| i.wrapping_mul(37)));
    assert!(ep.datagram(now, elsewhere, None, &noise).is_none());
    assert!(ep.datagram(now, server, None, &noise).is_none());
    assert!(ep.datagram(now, server, None, &[]).is_none());
    assert_eq!(ep.routed(), 1);
}
