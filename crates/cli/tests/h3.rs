//! HTTP/3 (`--http3`, QUIC): against the testkit's HTTP/3 server (which
//! counts connections, answers, request body bytes and the most streams open
//! at once, and resets streams or sends GOAWAY on demand), hostile endpoints
//! (a UDP black hole that never finishes the handshake, a closed UDP port)
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
    // Nothing went over TCP.
    assert_eq!(caddy.logged("HTTP/2.0") + caddy.logged("HTTP/1.1"), 0);
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
