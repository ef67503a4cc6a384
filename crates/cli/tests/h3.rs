//! HTTP/3 (`--http3`, QUIC): against the testkit's HTTP/3 server (which
//! counts connections, answers, request body bytes and the most streams open
//! at once and the TLS sessions resumed, and resets streams, sends GOAWAY,
//! drops every Nth datagram or allows no request stream on demand), hostile
//! endpoints (a UDP black hole that never finishes the handshake, a closed
//! UDP port)
//! and Debian's Caddy (HTTP/3 on by default over TLS), whose access log must
//! hold exactly the requests the record counts.

mod common;

use common::*;
use redline_testkit::h3::{self, H3Options, H3Server};
use redline_testkit::pki::Pki;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A server with `opts` and the CA file the client trusts.
fn server(opts: H3Options, tag: &str) -> (H3Server, Pki, String) {
    let pki = redline_testkit::pki::pki();
    let dir = redline_testkit::tmpdir(tag);
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let srv = h3::start(&pki, opts);
    (srv, pki, ca.to_string_lossy().into_owned())
}

/// `redline run --http3 URL ARGS` (split at spaces) trusting the CA file
/// `trust` (or `--insecure`): its record.
fn run(url: &str, trust: &str, args: &str) -> serde_json::Value {
    let mut a = vec![url, "--http3", "--no-save"];
    match trust {
        "--insecure" => a.push(trust),
        ca => a.extend(["--cacert", ca]),
    }
    a.extend(args.split(' '));
    run_json(&a)
}

fn body(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Every scheduled request ended exactly once.
fn assert_ledger(v: &serde_json::Value) {
    let c = &v["counters"];
    assert_eq!(
        counter(v, "completed")
            + counter(v, "failed")
            + counter(v, "not_sent")
            + counter(v, "in_flight_at_end"),
        counter(v, "scheduled"),
        "{c}"
    );
}

#[test]
fn closed_loop_counts_match_the_server() {
    let (srv, _pki, ca) = server(
        H3Options::body(1234).delayed(Duration::from_millis(5)),
        "h3-closed",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "-n 1000 -c 4 --streams 10 -t 1");
    assert_run_schema(&v);
    assert_eq!(v["config"]["http_version"], "3");
    assert_eq!(counter(&v, "completed"), 1000, "{}", v["counters"]);
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert_ledger(&v);
    let c = &srv.counts;
    assert_eq!(c.answered.load(Ordering::Relaxed), 1000);
    assert_eq!(c.connections.load(Ordering::Relaxed), 4);
    assert_eq!(
        c.max_open.load(Ordering::Relaxed),
        10,
        "requests at once per connection"
    );
    assert_eq!(counter(&v, "body_bytes"), 1000 * 1234, "{}", v["counters"]);
    assert_eq!(v["server"]["software"], "redline-testkit");
}

#[test]
fn open_loop_and_bodies_sent_whole() {
    let (srv, _pki, ca) = server(H3Options::body(10), "h3-open");
    let url = format!("https://127.0.0.1:{}/up", srv.port);
    let post = format!("-m POST -b {}", "x".repeat(20_000));
    let v = run(
        &url,
        &ca,
        &format!("--rate 200 -d 1 -c 2 --streams 4 {post}"),
    );
    assert_ledger(&v);
    let done = counter(&v, "completed");
    assert!(done >= 190, "{}", v["counters"]);
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), done);
    // Every body went whole (20,000 bytes over several QUIC packets each).
    assert_eq!(srv.counts.body_bytes.load(Ordering::Relaxed), done * 20_000);
}

#[test]
fn stream_resets_are_counted_with_their_code() {
    let (srv, _pki, ca) = server(
        H3Options {
            reset_every: Some((10, 0x102)), // H3_INTERNAL_ERROR
            ..H3Options::body(5)
        },
        "h3-reset",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "-n 200 -c 2 --streams 5");
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 180, "{}", v["counters"]);
    assert_eq!(error_count(&v, "stream_reset"), 20, "{}", v["errors"]);
    assert_eq!(srv.counts.resets.load(Ordering::Relaxed), 20);
    let msg = v["errors"][0]["message"].as_str().unwrap();
    assert!(msg.contains("H3_INTERNAL_ERROR"), "{msg}");
}

#[test]
fn rejected_requests_go_again_once() {
    let (srv, _pki, ca) = server(
        H3Options {
            reset_every: Some((10, 0x10b)), // H3_REQUEST_REJECTED: not processed
            ..H3Options::body(5)
        },
        "h3-rejected",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "-n 200 -c 2 --streams 5");
    assert_ledger(&v);
    let (done, failed, retried) = (
        counter(&v, "completed"),
        counter(&v, "failed"),
        counter(&v, "retried"),
    );
    assert_eq!(done + failed, 200, "{}", v["counters"]);
    assert!(retried > 0, "{}", v["counters"]);
    // Every rejection was either sent again or, rejected twice, failed.
    assert_eq!(retried + failed, srv.counts.resets.load(Ordering::Relaxed));
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), done);
    assert_eq!(counter(&v, "sent"), 200, "a retried request is sent once");
}

#[test]
fn goaway_moves_the_rest_to_a_new_connection() {
    let (srv, _pki, ca) = server(
        H3Options {
            goaway_after: Some(50),
            ..H3Options::body(5)
        },
        "h3-goaway",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "-n 300 -c 1 --streams 10 -t 1");
    assert_ledger(&v);
    assert_eq!(
        counter(&v, "completed"),
        300,
        "{} {}",
        v["counters"],
        v["errors"]
    );
    let c = &srv.counts;
    assert_eq!(c.answered.load(Ordering::Relaxed), 300);
    let goaways = c.goaways.load(Ordering::Relaxed);
    assert!(goaways >= 1, "a GOAWAY after 50 answers");
    assert!(c.connections.load(Ordering::Relaxed) >= goaways.max(2));
    // Each stream the server rejected after its GOAWAY went again once on
    // the next connection (and was answered there: nothing failed). None
    // may have been in flight past the GOAWAY (the record then has no
    // `retried`).
    let retried = v["counters"]["retried"].as_u64().unwrap_or(0);
    assert_eq!(retried, c.rejected.load(Ordering::Relaxed));
    assert_eq!(counter(&v, "sent"), 300, "a retried request is sent once");
}

#[test]
fn a_handshake_that_never_finishes_ends_at_the_connect_timeout() {
    let hole = h3::blackhole();
    let url = format!("https://127.0.0.1:{}/", hole.port);
    let t = Instant::now();
    let v = run(&url, "--insecure", "-n 4 -c 2 --connect-timeout 300ms");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 0);
    assert_eq!(error_count(&v, "connect_timeout"), 4, "{}", v["errors"]);
    // The hole's thread may still be reading them (a busy host): 2 s at most.
    let read = Instant::now();
    while hole.swallowed.load(Ordering::Relaxed) < 4 && read.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        hole.swallowed.load(Ordering::Relaxed) >= 4,
        "Initial packets arrived"
    );
}

#[test]
fn nothing_on_the_udp_port_is_refused() {
    let port = h3::closed_udp_port();
    let url = format!("https://127.0.0.1:{port}/");
    let t = Instant::now();
    let v = run(&url, "--insecure", "-n 4 -c 2");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert_ledger(&v);
    assert_eq!(error_count(&v, "refused"), 4, "{}", v["errors"]);
}

/// A UDP server that answers every QUIC Initial with a Version Negotiation
/// packet (RFC 9000 §17.2.1) offering only `0x1a2a3a4a` (a reserved
/// version, §15): its port, and how many it answered. Bounded: 100
/// datagrams or 20 s.
fn version_negotiator() -> (u16, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let port = sock.local_addr().unwrap().port();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = answered.clone();
    std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(20);
        let mut buf = [0u8; 2048];
        for _ in 0..100 {
            if Instant::now() > end {
                break;
            }
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let b = &buf[..n];
            // Long header: form bit, version (4), DCID len + DCID, SCID len + SCID.
            if n < 7 || b[0] & 0x80 == 0 {
                continue;
            }
            let dl = b[5] as usize;
            let Some(&sl) = b.get(6 + dl) else { continue };
            let Some(scid) = b.get(7 + dl..7 + dl + sl as usize) else {
                continue;
            };
            let dcid = &b[6..6 + dl];
            let mut vn = vec![0x80 | 0x2a, 0, 0, 0, 0];
            vn.push(scid.len() as u8);
            vn.extend_from_slice(scid);
            vn.push(dcid.len() as u8);
            vn.extend_from_slice(dcid);
            vn.extend_from_slice(&0x1a2a_3a4au32.to_be_bytes());
            if sock.send_to(&vn, from).is_ok() {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    (port, answered)
}

#[test]
fn a_server_without_our_quic_version_is_version_negotiation() {
    let (port, answered) = version_negotiator();
    let url = format!("https://127.0.0.1:{port}/");
    let t = Instant::now();
    let v = run(&url, "--insecure", "-n 4 -c 2 --connect-timeout 5s");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 0);
    assert_eq!(error_count(&v, "version_negotiation"), 4, "{}", v["errors"]);
    let msg = v["errors"][0]["message"].as_str().unwrap_or("");
    assert!(msg.contains("QUIC versions"), "{msg}");
    assert!(answered.load(Ordering::Relaxed) >= 1);
}

#[test]
fn a_path_that_dies_ends_in_the_idle_timeout_then_connect_timeouts() {
    // Three answers, then silence both ways (no close, no reset); the server
    // advertises a 1 s idle time-out, so QUIC gives the connection up after
    // about a second (RFC 9000 §10.1: the smaller of both sides' values).
    let (srv, _pki, ca) = server(
        H3Options {
            body: body(100),
            mute_after: Some(3),
            idle_timeout: Some(Duration::from_secs(1)),
            ..Default::default()
        },
        "h3-mute",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let t = Instant::now();
    let v = run(&url, &ca, "-n 5 -c 1 --timeout 20s --connect-timeout 1s");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 3, "{}", v["errors"]);
    // The request in flight when the path died ends with the connection;
    // the next one's handshake gets no answer.
    assert_eq!(error_count(&v, "idle_timeout"), 1, "{}", v["errors"]);
    assert_eq!(error_count(&v, "connect_timeout"), 1, "{}", v["errors"]);
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 3);
}

#[test]
fn bad_flag_combinations_are_one_line() {
    let e = usage_error(&["run", "http://127.0.0.1:1/", "--http3", "-n", "1"]);
    assert!(e.contains("https://"), "{e}");
    let e = usage_error(&[
        "run",
        "https://127.0.0.1:1/",
        "--http3",
        "--http2",
        "-n",
        "1",
    ]);
    assert!(e.contains("--http2"), "{e}");
}

/// Debian's Caddy serving a `page_len`-byte `index.html` (and
/// `directives`) with the testkit's certificate, and the CA file that trusts
/// it; None (skipped, or a failure under CI) when Caddy is not installed.
fn caddy(page_len: usize, directives: &str) -> Option<(redline_testkit::caddy::Caddy, String)> {
    use redline_testkit::caddy;
    if !redline_testkit::need::require("caddy (Debian package caddy)", caddy::installed()) {
        return None;
    }
    let pki = redline_testkit::pki::pki();
    let caddy = caddy::start_with(&pki, &[("index.html", &body(page_len))], directives);
    let ca = caddy.root.join("../ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    Some((caddy, ca.to_string_lossy().into_owned()))
}

#[test]
fn caddy_logs_exactly_the_requests_sent() {
    let Some((caddy, ca)) = caddy(612, "") else {
        return;
    };
    let url = format!("https://127.0.0.1:{}/index.html", caddy.port);
    let v = run(&url, &ca, "-n 2000 -c 4 --streams 10");
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 2000, "{}", v["errors"]);
    assert_eq!(counter(&v, "body_bytes"), 2000 * 612);
    assert_eq!(v["server"]["software"], "Caddy");
    assert_eq!(caddy.wait_logged("HTTP/3.0", 2000), 2000);
    // Open loop for a second: the log grows by exactly what completed.
    let v = run(&url, &ca, "--rate 300 -d 1 -c 2 --streams 4");
    assert_ledger(&v);
    let done = counter(&v, "completed");
    assert!(done >= 290, "{}", v["counters"]);
    assert_eq!(caddy.wait_logged("HTTP/3.0", 2000 + done), 2000 + done);
    // Over TCP only the one request of each run that read Alt-Svc.
    assert_eq!(caddy.logged("HTTP/2.0"), 0);
    assert_eq!(caddy.logged("HTTP/1.1"), 2);
}

#[test]
fn caddy_redirects_are_followed_over_http3() {
    let Some((caddy, ca)) = caddy(100, "redir /old /index.html 302") else {
        return;
    };
    let url = format!("https://127.0.0.1:{}/old", caddy.port);
    let v = run(&url, &ca, "-L -n 50 -c 2 --streams 2");
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 50, "{}", v["errors"]);
    assert_eq!(counter(&v, "redirects"), 50);
    assert_eq!(
        counter(&v, "body_bytes"),
        50 * 100,
        "the final answers' bodies"
    );
    // Each hop is a stream on the same connections: 50 302s and 50 200s.
    assert_eq!(caddy.wait_logged("HTTP/3.0", 100), 100);
    assert_eq!(counter(&v, "connections_opened"), 2);
}

#[test]
fn unanswered_streams_time_out_and_the_connection_stays() {
    let (srv, _pki, ca) = server(
        H3Options::body(5).delayed(Duration::from_secs(3)),
        "h3-slow",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let t = Instant::now();
    let v = run(&url, &ca, "-n 8 -c 1 --streams 4 --timeout 300ms");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_ledger(&v);
    assert_eq!(error_count(&v, "timeout"), 8, "{}", v["errors"]);
    // A time-out resets the stream (H3_REQUEST_CANCELLED), not the connection.
    assert_eq!(srv.counts.connections.load(Ordering::Relaxed), 1);
}

#[test]
fn a_server_that_forgot_the_connection_resets_it_statelessly() {
    let (srv, _pki, ca) = server(
        H3Options {
            forget_after: Some(40),
            ..H3Options::body(5).delayed(Duration::from_millis(20))
        },
        "h3-forget",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "-n 100 -c 1 --streams 4");
    assert_ledger(&v);
    assert_eq!(srv.counts.forgotten.load(Ordering::Relaxed), 1);
    let reset = error_count(&v, "stateless_reset");
    assert!(reset >= 1, "{}", v["errors"]);
    assert_eq!(counter(&v, "completed") + counter(&v, "failed"), 100);
    assert_eq!(counter(&v, "failed"), reset, "{}", v["errors"]);
    assert_eq!(
        counter(&v, "completed"),
        srv.counts.answered.load(Ordering::Relaxed)
    );
    // The run went on over a new connection.
    assert_eq!(srv.counts.connections.load(Ordering::Relaxed), 2);
}

#[test]
fn an_untrusted_certificate_fails_the_handshake_as_tls() {
    let (srv, _pki, _ca) = server(H3Options::body(5), "h3-untrusted");
    let url = format!("https://127.0.0.1:{}/", srv.port);
    // Neither --cacert nor --insecure: the testkit's CA is unknown.
    let v = run_json(&[&url, "--http3", "--no-save", "-n", "4", "-c", "2"]);
    assert_ledger(&v);
    assert_eq!(error_count(&v, "tls"), 4, "{}", v["errors"]);
    let msg = v["errors"][0]["message"].as_str().unwrap();
    assert!(msg.contains("certificate"), "{msg}");
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 0);
}

/// A counter the record leaves out when it is 0.
fn counter_or_0(v: &serde_json::Value, name: &str) -> u64 {
    v["counters"][name].as_u64().unwrap_or(0)
}

#[test]
fn later_connections_resume_a_tls_session() {
    let (srv, _pki, ca) = server(H3Options::body(10), "h3-resume");
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "-n 200 -c 2 --requests-per-conn 10");
    assert_run_schema(&v);
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 200, "{}", v["errors"]);
    let handshakes = counter(&v, "quic_handshakes");
    assert_eq!(handshakes, srv.counts.connections.load(Ordering::Relaxed));
    assert_eq!(handshakes, counter(&v, "connections_opened"));
    assert_eq!(handshakes, 20, "10 requests per connection");
    let resumed = counter_or_0(&v, "quic_resumed");
    // The first connections had no ticket; nearly all later ones had one.
    assert!(resumed >= 10 && resumed < handshakes, "{}", v["counters"]);
    assert_eq!(resumed, srv.counts.resumed.load(Ordering::Relaxed));
    // The text report says it where TCP's connect time is.
    let out = redline(&[
        "run",
        &url,
        "--http3",
        "--cacert",
        &ca,
        "--no-save",
        "-n",
        "20",
        "-c",
        "1",
        "--requests-per-conn",
        "5",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("QUIC handshake (4 new)"), "{text}");
    assert!(
        text.contains("4 QUIC handshakes, 3 resumed a TLS session"),
        "{text}"
    );
}

#[test]
fn caddy_resumes_tls_sessions_and_takes_early_data() {
    let Some((caddy, ca)) = caddy(100, "") else {
        return;
    };
    let url = format!("https://127.0.0.1:{}/index.html", caddy.port);
    let v = run(&url, &ca, "-n 100 -c 2 --requests-per-conn 5");
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 100, "{}", v["errors"]);
    assert_eq!(counter(&v, "quic_handshakes"), 20, "{}", v["counters"]);
    let resumed = counter_or_0(&v, "quic_resumed");
    assert!((10..20).contains(&resumed), "{}", v["counters"]);
    // Caddy takes 0-RTT: the resumed connections' first requests went in
    // early data, and Caddy logged each request once.
    let early = counter_or_0(&v, "quic_0rtt");
    assert!(early > 0 && early <= resumed, "{}", v["counters"]);
    assert_eq!(counter_or_0(&v, "quic_0rtt_accepted"), early);
    assert_eq!(caddy.wait_logged("HTTP/3.0", 100), 100);
}

#[test]
fn a_lossy_path_loses_no_request() {
    let (srv, _pki, ca) = server(
        H3Options {
            drop_every: Some(7),
            ..H3Options::body(3000)
        },
        "h3-lossy",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let t = Instant::now();
    let v = run(&url, &ca, "-n 300 -c 2 --streams 4 --timeout 5s");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert_ledger(&v);
    // QUIC sent again what was lost: every request answered once.
    assert_eq!(counter(&v, "completed"), 300, "{}", v["errors"]);
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert_eq!(counter(&v, "body_bytes"), 300 * 3000);
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 300);
    assert_eq!(srv.counts.connections.load(Ordering::Relaxed), 2);
    assert!(srv.counts.dropped.load(Ordering::Relaxed) >= 50);
}

#[test]
fn a_server_that_allows_no_stream_fails_requests_in_time() {
    let (srv, _pki, ca) = server(
        H3Options {
            max_streams: Some(0),
            ..H3Options::body(5)
        },
        "h3-nostream",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let t = Instant::now();
    let v = run(&url, &ca, "-n 6 -c 2 --streams 2 --timeout 400ms");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 0);
    assert_eq!(error_count(&v, "no_stream"), 6, "{}", v["errors"]);
    let msg = v["errors"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("HTTP/3") && msg.contains("max_streams"),
        "{msg}"
    );
    assert!(
        warning_codes(&v).contains(&"no_stream"),
        "{}",
        v["warnings"]
    );
    let w = warning_messages(&v, "no_stream").join(" ");
    assert!(w.contains("HTTP/3 stream"), "{w}");
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 0);
}

/// An HTTPS server over TCP on `listener` (the testkit's certificate) that
/// answers every request `200` with `Alt-Svc: alt_svc`, counting requests.
fn alt_svc_server(
    pki: &Pki,
    listener: std::net::TcpListener,
    alt_svc: &str,
) -> (ScriptServer, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::io::{Read, Write};
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(pki.key_der.clone().into());
    let cfg = std::sync::Arc::new(
        rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), key)
        .unwrap(),
    );
    let answer = format!("HTTP/1.1 200 OK\r\nAlt-Svc: {alt_svc}\r\nContent-Length: 2\r\n\r\nok");
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = seen.clone();
    let srv = ScriptServer::start_on(listener, move |sock| {
        let Ok(conn) = rustls::ServerConnection::new(cfg.clone()) else {
            return;
        };
        let mut s = rustls::StreamOwned::new(conn, sock);
        let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 65536 {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        count.fetch_add(1, Ordering::Relaxed);
        let _ = s.write_all(answer.as_bytes()).and_then(|_| s.flush());
    });
    (srv, seen)
}

#[test]
fn http3_goes_to_the_alt_svc_endpoint() {
    let (srv, pki, ca) = server(H3Options::body(7), "h3-altsvc");
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (origin, probes) = alt_svc_server(
        &pki,
        tcp,
        &format!("h3-29=\":1\"; ma=5, h3=\":{}\"; ma=3600; v=\"x\"", srv.port),
    );
    // The origin is the TCP server; QUIC goes where its Alt-Svc says.
    let url = format!("https://127.0.0.1:{}/", origin.addr.port());
    let v = run(&url, &ca, "-n 50 -c 2 --streams 2");
    assert_run_schema(&v);
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 50, "{}", v["errors"]);
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 50);
    assert_eq!(probes.load(Ordering::Relaxed), 1, "one request over TCP");
    // Its handshake was also the certificate check: one TCP connection.
    assert_eq!(origin.accepted.load(Ordering::SeqCst), 1, "TCP connections");
    let e = &v["server"]["http3_endpoint"];
    assert_eq!(e["source"], "alt-svc", "{e}");
    assert_eq!(e["address"], format!("127.0.0.1:{}", srv.port));
    assert!(e["why"].as_str().unwrap().contains("ma=3600"), "{e}");
    assert_eq!(v["server"]["alt_svc"]["h3"], format!(":{}", srv.port));
    // Without the CA the probe's handshake refuses the certificate: the
    // run stops before any QUIC connection with the one line to fix it,
    // after the same single TCP connection.
    let out = redline(&["run", &url, "--http3", "--no-save", "-n", "5", "-c", "1"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--cacert"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(origin.accepted.load(Ordering::SeqCst), 2, "TCP connections");
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 50);
}

#[test]
fn a_bad_alt_svc_is_ignored_and_the_url_port_used() {
    let (srv, pki, ca) = server(H3Options::body(7), "h3-badalt");
    // TCP on the h3 server's port number: the origin and its URL port.
    let Ok(tcp) = std::net::TcpListener::bind(("127.0.0.1", srv.port)) else {
        return; // the TCP port is taken by someone else: nothing to test
    };
    let (_origin, probes) = alt_svc_server(&pki, tcp, "h3=:443; ma=oops");
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "-n 20 -c 1");
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 20, "{}", v["errors"]);
    assert_eq!(probes.load(Ordering::Relaxed), 1);
    let e = &v["server"]["http3_endpoint"];
    assert_eq!(e["source"], "url", "{e}");
    assert!(e["why"].as_str().unwrap().contains("must be quoted"), "{e}");
    assert!(v["server"]["alt_svc"]["error"].is_string());
    // No TCP server at all: the URL's port, and why.
    let (srv, _pki, ca) = server(H3Options::body(7), "h3-noalt");
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "-n 5 -c 1");
    assert_eq!(counter(&v, "completed"), 5, "{}", v["errors"]);
    let e = &v["server"]["http3_endpoint"];
    assert_eq!(e["source"], "url", "{e}");
    assert!(e["why"].as_str().unwrap().contains("TCP"), "{e}");
}

#[test]
fn caddy_offers_http3_and_redline_follows_it() {
    let Some((caddy, ca)) = caddy(100, "") else {
        return;
    };
    let url = format!("https://127.0.0.1:{}/index.html", caddy.port);
    // Over TCP (HTTP/2 by ALPN): the offer is reported once.
    let v = run_json(&[&url, "--no-save", "--cacert", &ca, "-n", "20", "-c", "2"]);
    assert_eq!(counter(&v, "completed"), 20, "{}", v["errors"]);
    let port = format!(":{}", caddy.port);
    assert_eq!(v["server"]["alt_svc"]["h3"], port, "{}", v["server"]);
    let out = redline(&[
        "run",
        &url,
        "--no-save",
        "--cacert",
        &ca,
        "-n",
        "20",
        "-c",
        "2",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = format!("server offers HTTP/3 at {port} (Alt-Svc, ma=");
    assert_eq!(text.matches(&line).count(), 1, "{text}");
    assert!(text.contains("measure it with --http3"), "{text}");
    // With --http3: one request over TCP reads it, the rest goes to its endpoint.
    let before = caddy.logged("HTTP/2.0") + caddy.logged("HTTP/1.1");
    let v = run(&url, &ca, "-n 30 -c 2");
    assert_eq!(counter(&v, "completed"), 30, "{}", v["errors"]);
    assert_eq!(v["server"]["http3_endpoint"]["source"], "alt-svc");
    assert_eq!(caddy.wait_logged("HTTP/3.0", 30), 30);
    assert_eq!(
        caddy.logged("HTTP/1.1") + caddy.logged("HTTP/2.0"),
        before + 1
    );
}

// ------------------------------------------------ every mode over HTTP/3

/// A scenario file `text` in a fresh directory: its path.
fn scenario_file(tag: &str, text: &str) -> String {
    let dir = redline_testkit::tmpdir(tag);
    let p = dir.join("s.toml");
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// A record's named request.
fn named<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no request {name}: {}", v["requests"]))
}

#[test]
fn a_scenario_runs_over_http3() {
    let (srv, _pki, ca) = server(H3Options::body(9), "h3-scenario");
    let sc = scenario_file(
        "h3-scenario-file",
        "mode = \"round-robin\"\n[[request]]\nname = \"home\"\npath = \"/\"\n\
         [[request]]\nname = \"post\"\nmethod = \"POST\"\npath = \"/p\"\nbody = \"hello\"\n",
    );
    let url = format!("https://127.0.0.1:{}", srv.port);
    let v = run(&url, &ca, &format!("--scenario {sc} -n 60 -c 3"));
    assert_run_schema(&v);
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 60, "{}", v["errors"]);
    let (home, post) = (named(&v, "home"), named(&v, "post"));
    assert_eq!(home["completed"], 30, "{home}");
    assert_eq!(post["completed"], 30, "{post}");
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 60);
    assert_eq!(srv.counts.body_bytes.load(Ordering::Relaxed), 30 * 5);
    assert_eq!(srv.counts.connections.load(Ordering::Relaxed), 3);
}

#[test]
fn journeys_run_over_http3() {
    let (srv, _pki, ca) = server(H3Options::body(9), "h3-journeys");
    let sc = scenario_file(
        "h3-journeys-file",
        "mode = \"session\"\nthink = \"10ms\"\n\
         [[step]]\nname = \"a\"\npath = \"/a\"\n\
         [[step]]\nname = \"b\"\npath = \"/b\"\n\
         [[step]]\nname = \"c\"\npath = \"/c\"\n",
    );
    let url = format!("https://127.0.0.1:{}", srv.port);
    let v = run(&url, &ca, &format!("--scenario {sc} --rate 40 -d 1s -c 50"));
    assert_ledger(&v);
    let j = &v["journeys"];
    let n = |k: &str| j[k].as_u64().unwrap_or_else(|| panic!("{k}: {j}"));
    assert_eq!(n("arrived"), 40, "{j}");
    assert_eq!(n("arrived"), n("started") + n("not_started"), "{j}");
    assert_eq!(
        n("started"),
        n("completed") + n("abandoned") + n("in_flight_at_end"),
        "{j}"
    );
    // Most walk all three steps within the second (fewer on a busy host).
    assert!(n("completed") >= 20, "{j}");
    assert_eq!(named(&v, "a")["sent"], n("started"));
    assert_eq!(named(&v, "c")["completed"], n("completed"));
    assert_eq!(
        srv.counts.answered.load(Ordering::Relaxed),
        counter(&v, "completed")
    );
}

#[test]
fn stages_and_rate_stages_run_over_http3() {
    let (srv, _pki, ca) = server(H3Options::body(9), "h3-stages");
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "--stages 500ms:2,500ms:4");
    assert_ledger(&v);
    assert!(counter(&v, "completed") > 0);
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert_eq!(
        v["stages"].as_array().map(Vec::len),
        Some(2),
        "{}",
        v["stages"]
    );
    let answered = srv.counts.answered.load(Ordering::Relaxed);
    assert_eq!(answered, counter(&v, "completed"));
    let v = run(&url, &ca, "--stages 500ms:40,500ms:80 --rate-stages -c 4");
    assert_ledger(&v);
    // The rate ramps 0 → 40 req/s over 0.5 s, then 40 → 80: 10 + 30 requests.
    let planned = counter(&v, "scheduled");
    assert!((38..=40).contains(&planned), "{}", v["counters"]);
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert_eq!(
        srv.counts.answered.load(Ordering::Relaxed) - answered,
        counter(&v, "completed")
    );
}

#[test]
fn find_steps_run_over_http3() {
    let (srv, _pki, ca) = server(H3Options::body(9), "h3-find");
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let out = redline(&[
        "find",
        &url,
        "--http3",
        "--cacert",
        &ca,
        "--slo",
        "errors<1%",
        "--start-rate",
        "20",
        "--max-steps",
        "2",
        "--warmup",
        "0s",
        "--step-duration",
        "1s",
        "-t",
        "1",
        "--no-save",
        "--no-tui",
    ]);
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("PASS") || t.contains("CLIENT-LIMITED"), "{t}");
    assert!(!t.contains("FAIL"), "{t}");
    // Two steps (20 and a higher rate for 1 s each), all answered over QUIC.
    let answered = srv.counts.answered.load(Ordering::Relaxed);
    // (A busy host may make the first step client-limited: then it is
    // tried again lower.)
    assert!(answered >= 30, "{answered}: {t}");
    assert!(srv.counts.connections.load(Ordering::Relaxed) >= 2);
}

#[test]
fn agents_merge_http3_runs_exactly() {
    use common::coord::{agent, agents_succeed, Coord};
    let (srv, _pki, ca) = server(H3Options::body(9), "h3-agents");
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let mut c = Coord::start(&["--agents", "2", "--threshold", "errors<1%"]);
    let run = [
        url.as_str(),
        "--http3",
        "--cacert",
        &ca,
        "-n",
        "400",
        "-c",
        "4",
        "--streams",
        "2",
        "-t",
        "1",
    ];
    let agents = (0..2).map(|i| agent(i, 2, c.port, &run)).collect();
    c.wait_for("all agents ready", Duration::from_secs(30));
    let parts: Vec<serde_json::Value> = agents_succeed(agents, Duration::from_secs(60))
        .iter()
        .map(|o| serde_json::from_slice(&o.stdout).expect("the agent's record"))
        .collect();
    let (m, _) = c.finish_record(0);
    for p in &parts {
        assert_eq!(counter(p, "completed"), 200, "{}", p["errors"]);
        assert_eq!(counter(p, "quic_handshakes"), 2);
    }
    assert_eq!(counter(&m, "completed"), 400);
    assert_eq!(counter(&m, "quic_handshakes"), 4);
    assert_eq!(m["config"]["http_version"], "3");
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 400);
    assert_eq!(srv.counts.connections.load(Ordering::Relaxed), 4);
}

#[test]
fn abort_on_fail_stops_an_http3_run_early() {
    let (srv, _pki, ca) = server(
        H3Options {
            reset_every: Some((2, 0x102)),
            ..H3Options::body(5)
        },
        "h3-abort",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let t = Instant::now();
    let (out, _) = redline_with_limit(
        &[
            "run",
            "-q",
            "--no-save",
            "-o",
            "json",
            &url,
            "--http3",
            "--cacert",
            &ca,
            "-d",
            "10s",
            "--rate",
            "100",
            "-c",
            "2",
            "--threshold",
            "errors<1%",
            "--abort-on-fail",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ledger(&v);
    assert!(warning_codes(&v).contains(&"aborted"), "{}", v["warnings"]);
    let reset = error_count(&v, "stream_reset");
    assert_eq!(reset, srv.counts.resets.load(Ordering::Relaxed));
    assert_eq!(
        counter(&v, "completed"),
        srv.counts.answered.load(Ordering::Relaxed)
    );
    assert!(reset > 0 && counter(&v, "completed") > 0);
}

#[test]
fn resumed_connections_send_safe_requests_in_early_data() {
    let (srv, _pki, ca) = server(
        H3Options {
            early_data: true,
            ..H3Options::body(10)
        },
        "h3-0rtt",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "-n 200 -c 2 --requests-per-conn 10");
    assert_run_schema(&v);
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 200, "{}", v["errors"]);
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 200);
    assert_eq!(counter(&v, "quic_handshakes"), 20);
    let (resumed, early) = (
        counter_or_0(&v, "quic_resumed"),
        counter_or_0(&v, "quic_0rtt"),
    );
    assert!(early >= 10 && early <= resumed, "{}", v["counters"]);
    assert_eq!(counter_or_0(&v, "quic_0rtt_accepted"), early);
    let early_requests = srv.counts.early_requests.load(Ordering::Relaxed);
    assert!(
        early_requests >= early,
        "{early_requests} requests in early data"
    );
    // A POST never goes in early data (a replay would repeat it): the
    // sessions still resume.
    let v = run(&url, &ca, "-n 40 -c 1 --requests-per-conn 10 -m POST -b x");
    assert_eq!(counter(&v, "completed"), 40, "{}", v["errors"]);
    assert_eq!(counter_or_0(&v, "quic_0rtt"), 0, "{}", v["counters"]);
    assert!(counter_or_0(&v, "quic_resumed") >= 3, "{}", v["counters"]);
    assert_eq!(
        srv.counts.early_requests.load(Ordering::Relaxed),
        early_requests
    );
    assert_eq!(srv.counts.body_bytes.load(Ordering::Relaxed), 40);
}

#[test]
fn a_silent_server_fails_0rtt_requests_at_the_connect_timeout() {
    // The first connection gets a ticket allowing early data; then the
    // server goes silent. The second connection sends its request in 0-RTT
    // and its handshake never ends: it fails at --connect-timeout (1 s),
    // not at --timeout (20 s) or QUIC's idle time-out (30 s).
    let (srv, _pki, ca) = server(
        H3Options {
            early_data: true,
            mute_after: Some(1),
            ..H3Options::body(10)
        },
        "h3-0rtt-mute",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let t = Instant::now();
    let v = run(
        &url,
        &ca,
        "-n 2 -c 1 --requests-per-conn 1 --connect-timeout 1s --timeout 20s",
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_ledger(&v);
    assert_eq!(counter(&v, "completed"), 1, "{}", v["errors"]);
    assert_eq!(error_count(&v, "connect_timeout"), 1, "{}", v["errors"]);
    let msg = v["errors"][0]["message"].as_str().unwrap_or("");
    assert!(msg.contains("0-RTT"), "{msg}");
}

#[test]
fn refused_early_data_is_sent_again_after_the_handshake() {
    let (srv, _pki, ca) = server(
        H3Options {
            early_data: true,
            refuse_early_after: Some(3),
            ..H3Options::body(10)
        },
        "h3-0rtt-refused",
    );
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let v = run(&url, &ca, "-n 100 -c 1 --requests-per-conn 10");
    assert_ledger(&v);
    // Each request answered once, none lost with the refused early data.
    assert_eq!(counter(&v, "completed"), 100, "{}", v["errors"]);
    assert_eq!(counter(&v, "sent"), 100);
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 100);
    assert_eq!(counter(&v, "quic_handshakes"), 10);
    // The 2nd connection's early data was taken, the 3rd's refused (later
    // ones hold tickets from connections that refuse it: no early data).
    let early = counter_or_0(&v, "quic_0rtt");
    assert!((2..=9).contains(&early), "{}", v["counters"]);
    assert_eq!(
        counter_or_0(&v, "quic_0rtt_accepted"),
        1,
        "{}",
        v["counters"]
    );
    assert_eq!(counter_or_0(&v, "quic_resumed"), 9, "{}", v["counters"]);
}

/// At 10,000 req/s on one worker, answers over QUIC wait in the worker's
/// UDP socket until its 500 µs pacing wake-up, and each ends at its
/// datagram's kernel arrival stamp: the service time still matches what
/// the server took (its hold plus the loopback trip: never less, at most
/// 400 µs more), and every request is accounted for.
#[test]
fn deferred_answers_over_quic_are_timed_by_their_arrival() {
    timing_sensitive(3, || {
        let (srv, _pki, ca) = server(
            H3Options::body(2).delayed(Duration::from_millis(2)),
            "h3-deferred",
        );
        let url = format!("https://127.0.0.1:{}/", srv.port);
        let v = run(&url, &ca, "-r 10000 -d 1 -t 1 -c 4 --streams 50");
        assert_ledger(&v);
        let done = counter(&v, "completed");
        assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
        assert!(done >= 5_000, "completed {done} of 10,000");
        // The record says how the sends and answers were timed.
        assert_eq!(v["client"]["pacing_window_us"], 500);
        assert_eq!(v["client"]["answers_stamped"], true);
        let mut held = srv.counts.held_us.lock().unwrap().clone();
        assert_eq!(held.len() as u64, done);
        held.sort_unstable();
        let server_p50 = held[held.len() / 2];
        let p50 = v["service_time"]["percentiles_us"]["p50"].as_u64().unwrap();
        assert!(
            (server_p50.saturating_sub(50)..=server_p50 + 400).contains(&p50),
            "service time p50 {p50} µs is not within 400 µs above the server's {server_p50} µs"
        );
    });
}
