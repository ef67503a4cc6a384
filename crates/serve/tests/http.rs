//! End-to-end tests of redline-serve over loopback with a blocking client.

mod common;

use std::time::{Duration, Instant};

use common::{filler, start, stats_json, Client};
use redline_serve::{ServeConfig, Server, ServerStats};

const SERVER_HEADER: &str = concat!("redline-serve/", env!("CARGO_PKG_VERSION"));

#[test]
fn default_config() {
    let c = ServeConfig::default();
    assert_eq!(c.addr, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(c.threads, 0);
}

#[test]
fn keep_alive_sequential_requests() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    for _ in 0..10 {
        let r = c.get("/");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("server"), Some(SERVER_HEADER));
        assert_eq!(r.header("content-type"), Some("text/plain"));
        assert_eq!(r.header("content-length"), Some("440"));
        assert_eq!(r.header("connection"), None);
        assert_eq!(r.body, filler(440));
    }
    assert_eq!(server.stats().connections, 1);
    assert_eq!(server.stats().requests, 10);
}

#[test]
fn multi_thread_runtime_serves() {
    let server = start(2);
    let mut clients: Vec<Client> = (0..4)
        .map(|_| Client::connect(server.local_addr()))
        .collect();
    for round in 0..5 {
        for c in &mut clients {
            let r = c.get(&format!("/?size={round}"));
            assert_eq!(r.body, filler(round));
        }
    }
    let s = server.stats();
    assert_eq!((s.connections, s.requests, s.open_connections), (4, 20, 4));
}

#[test]
fn size_parameter() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    for size in [
        0usize,
        1,
        26,
        27,
        16 * 1024,
        16 * 1024 + 1,
        65546,
        100_000,
        3_000_000,
    ] {
        let r = c.get(&format!("/any/path?size={size}"));
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some(size.to_string().as_str()));
        assert!(r.body == filler(size), "body of size {size}");
    }
    let r = c.get("/?size=104857601");
    assert_eq!(r.status, 400);
    let r = c.get("/?size=-1");
    assert_eq!(r.status, 400);
    // The connection survives invalid parameters.
    assert_eq!(c.get("/?size=3").body, b"abc");
}

#[test]
fn status_parameter() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    let r = c.get("/?status=503&size=5");
    assert_eq!(r.status, 503);
    assert_eq!(r.body, b"abcde");
    let r = c.get("/?status=404");
    assert_eq!(r.status, 404);
    assert_eq!(r.body.len(), 440);
    for s in [204, 304] {
        let r = c.get(&format!("/?status={s}&size=100"));
        assert_eq!(r.status, s);
        assert_eq!(r.header("content-length"), None);
        assert_eq!(r.header("transfer-encoding"), None);
        // No stray body bytes: the next response parses cleanly.
        let r = c.get("/?size=2");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"ab"[..]));
    }
    let r = c.get("/?status=204&chunked=1");
    assert_eq!(r.status, 204);
    assert_eq!(r.header("transfer-encoding"), None);
    for bad in ["99", "100", "101", "199", "600", "abc", "2000", ""] {
        let r = c.get(&format!("/?status={bad}"));
        assert_eq!(r.status, 400, "status={bad}");
    }
    assert_eq!(c.get("/?size=1").body, b"a");
}

#[test]
fn chunked_parameter() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    for size in [0usize, 1, 440, 16 * 1024, 16 * 1024 + 1, 40_000, 1_000_000] {
        let r = c.get(&format!("/?chunked=1&size={size}"));
        assert_eq!(r.status, 200);
        assert!(r.chunked);
        assert_eq!(r.header("content-length"), None);
        assert!(
            r.chunks.iter().all(|&n| n > 0 && n <= 16 * 1024),
            "chunks {:?}",
            r.chunks
        );
        assert_eq!(r.chunks.iter().sum::<usize>(), size);
        assert!(r.body == filler(size), "body of size {size}");
    }
    // HEAD of a chunked response: header, no body.
    c.send(b"HEAD /?chunked=1&size=50000 HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.response(true);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(c.get("/?size=4").body, b"abcd");
}

#[test]
fn close_parameter_and_connection_close() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.get("/").status, 200);
    let r = c.get("/?close=1&size=10");
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.body, filler(10));
    assert!(c.at_eof());

    let mut c = Client::connect(server.local_addr());
    c.send(b"GET /?size=7 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.body, filler(7));
    assert!(c.at_eof());
}

#[test]
fn http10() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    c.send(b"GET /?size=5 HTTP/1.0\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.body, b"abcde");
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.at_eof());

    let mut c = Client::connect(server.local_addr());
    for _ in 0..3 {
        // chunked=1 is not used with HTTP/1.0 clients.
        c.send(b"GET /?size=5&chunked=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let r = c.response(false);
        assert_eq!(r.header("connection"), Some("keep-alive"));
        assert_eq!(r.header("content-length"), Some("5"));
        assert_eq!(r.body, b"abcde");
    }
}

#[test]
fn delay_parameter() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    for (q, d) in [("100ms", 100), ("0.15s", 150), ("50", 50), ("20000us", 20)] {
        let t = Instant::now();
        let r = c.get(&format!("/?delay={q}"));
        let el = t.elapsed();
        assert_eq!(r.status, 200);
        assert!(
            el >= Duration::from_millis(d),
            "delay={q} answered after {el:?}"
        );
    }
    assert_eq!(c.get("/?delay=nope").status, 400);
}

#[test]
fn delay_does_not_block_other_connections() {
    let server = start(1);
    let mut slow = Client::connect(server.local_addr());
    slow.send(b"GET /?delay=2s HTTP/1.1\r\nHost: t\r\n\r\n");
    std::thread::sleep(Duration::from_millis(50));
    let mut fast = Client::connect(server.local_addr());
    let t = Instant::now();
    for _ in 0..5 {
        assert_eq!(fast.get("/").status, 200);
    }
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "blocked for {:?}",
        t.elapsed()
    );
    let r = slow.response(false);
    assert_eq!(r.status, 200);
}

#[test]
fn head_requests() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    for size in [0usize, 1000, 100_000] {
        c.send(format!("HEAD /?size={size} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let r = c.response(true);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some(size.to_string().as_str()));
        // No body bytes follow: the next response parses cleanly.
        assert_eq!(c.get("/?size=3").body, b"abc");
    }
}

#[test]
fn pipelined_requests() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    let sizes = [0usize, 5, 440, 20_000, 1, 70_000, 3, 16_385, 9, 2];
    let mut batch = Vec::new();
    for (i, s) in sizes.iter().enumerate() {
        let chunked = if i % 3 == 0 { "&chunked=1" } else { "" };
        batch.extend_from_slice(
            format!("GET /?size={s}{chunked} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes(),
        );
    }
    batch.extend_from_slice(b"HEAD /?size=77 HTTP/1.1\r\nHost: t\r\n\r\n");
    batch.extend_from_slice(b"GET /?size=4&close=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    c.send(&batch);
    for s in sizes {
        let r = c.response(false);
        assert_eq!(r.status, 200);
        assert!(r.body == filler(s), "size {s}");
    }
    let r = c.response(true);
    assert_eq!(r.header("content-length"), Some("77"));
    let r = c.response(false);
    assert_eq!(r.body, b"abcd");
    assert!(c.at_eof());
    assert_eq!(server.stats().requests, 12);
}

#[test]
fn pipelined_many_small_requests_in_one_write() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    let batch = b"GET /?size=1 HTTP/1.1\r\nHost: t\r\n\r\n".repeat(1000);
    c.send(&batch);
    for _ in 0..1000 {
        assert_eq!(c.response(false).body, b"a");
    }
    assert_eq!(server.stats().requests, 1000);
}

#[test]
fn request_split_across_writes() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    let req = b"GET /?size=6 HTTP/1.1\r\nHost: t\r\nX-Long: aaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    for part in req.chunks(7) {
        c.send(part);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(c.response(false).body, b"abcdef");
}

#[test]
fn post_with_content_length_body() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    for len in [1usize, 1000, 300_000] {
        let mut req = format!("POST /?size=3 HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\n\r\n")
            .into_bytes();
        req.resize(req.len() + len, b'x');
        c.send(&req);
        let r = c.response(false);
        assert_eq!((r.status, r.body.as_slice()), (200, &b"abc"[..]));
        let r = c.get("/?size=2");
        assert_eq!(r.body, b"ab");
    }
    // A body made of what looks like requests is not parsed as requests.
    let fake = b"GET / HTTP/1.1\r\n\r\n";
    let mut req = format!("POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", fake.len()).into_bytes();
    req.extend_from_slice(fake);
    req.extend_from_slice(b"GET /?size=1 HTTP/1.1\r\n\r\n");
    c.send(&req);
    assert_eq!(c.response(false).body.len(), 440);
    assert_eq!(c.response(false).body, b"a");
    assert_eq!(server.stats().requests, 8);
}

#[test]
fn post_with_chunked_body() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    let mut req =
        b"POST /upload?size=4 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    req.extend_from_slice(b"5\r\nhello\r\n");
    req.extend_from_slice(b"1A;name=value\r\nabcdefghijklmnopqrstuvwxyz\r\n");
    let big = vec![b'z'; 100_000];
    req.extend_from_slice(format!("{:X}\r\n", big.len()).as_bytes());
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\n0\r\nX-Trailer: yes\r\n\r\n");
    req.extend_from_slice(b"GET /?size=2 HTTP/1.1\r\nHost: t\r\n\r\n");
    // Sent in pieces, so the parser resumes in every state.
    for piece in req.chunks(3001) {
        c.send(piece);
    }
    let r = c.response(false);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"abcd"[..]));
    let r = c.response(false);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ab"[..]));

    // Without trailers, in one write.
    c.send(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /?size=1 HTTP/1.1\r\n\r\n");
    assert_eq!(c.response(false).body.len(), 440);
    assert_eq!(c.response(false).body, b"a");
}

#[test]
fn expect_100_continue() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    c.send(
        b"POST /?size=2 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    );
    let r = c.response(false);
    assert_eq!(r.status, 100);
    c.send(b"hello");
    let r = c.response(false);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ab"[..]));
}

#[test]
fn header_parameter() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    let r = c.get("/?header=X-Test:hello%20world&header=Cache-Control%3Ano-store&size=1");
    assert_eq!(r.header("x-test"), Some("hello world"));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(r.body, b"a");
    assert_eq!(c.get("/?header=Bad%0D%0AInjected:1").status, 400);
    assert_eq!(c.get("/?header=Content-Length:1").status, 400);
    assert_eq!(c.get("/?header=NoColon").status, 400);
    let r = c.get("/?size=1");
    assert_eq!(r.header("x-test"), None);
}

#[test]
fn stats_count_requests_and_connections() {
    let server = start(2);
    let addr = server.local_addr();
    // Reset first, through the control path (not counted itself).
    let mut ctl = Client::connect(addr);
    assert_eq!(ctl.get("/__reset").body, b"ok\n");

    let (k, n) = (3usize, 17usize);
    let mut clients: Vec<Client> = (0..k).map(|_| Client::connect(addr)).collect();
    let mut bytes_out = 0;
    for i in 0..n {
        let r = clients[i % k].get(&format!("/?size={}", i * 10));
        bytes_out += r.wire_len;
    }
    let bytes_in: usize = clients.iter().map(|c| c.sent).sum();
    let json = stats_json(addr);
    assert_eq!(json["requests"], n as u64);
    assert_eq!(json["connections"], k as u64);
    assert_eq!(json["open_connections"], k as u64);
    assert_eq!(json["bytes_in"], bytes_in as u64);
    assert_eq!(json["bytes_out"], bytes_out as u64);
    let expected = ServerStats {
        connections: k as u64,
        requests: n as u64,
        open_connections: k as u64,
        bytes_in: bytes_in as u64,
        bytes_out: bytes_out as u64,
        logins: 0,
        sessions_ok: 0,
        sessions_denied: 0,
        clients: 1,
    };
    assert_eq!(server.stats(), expected);
    assert_eq!(json["clients"], 1);
    // The control connection can keep asking without changing anything.
    for _ in 0..3 {
        let r = ctl.get("/__stats");
        let j: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(j["requests"], n as u64);
        assert_eq!(j["connections"], k as u64);
    }

    // Closing the connections brings open_connections back to 0.
    drop(clients);
    let mut open = u64::MAX;
    for _ in 0..500 {
        open = server.stats().open_connections;
        if open == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(open, 0);

    // Reset zeroes the totals.
    let mut c = Client::connect(addr);
    c.get("/");
    assert_eq!(ctl.get("/__reset").status, 200);
    let s = server.stats();
    assert_eq!(
        (
            s.connections,
            s.requests,
            s.open_connections,
            s.bytes_in,
            s.bytes_out
        ),
        (0, 0, 1, 0, 0)
    );
    c.get("/");
    assert_eq!(server.stats().requests, 1);
    server.reset_stats();
    assert_eq!(server.stats().requests, 0);
    assert_eq!(server.stats().open_connections, 1);
}

#[test]
fn stall_holds_responses() {
    let server = start(2);
    let addr = server.local_addr();
    let mut c = Client::connect(addr);
    assert_eq!(c.get("/").status, 200);

    // Through the control path: answered at once.
    let mut ctl = Client::connect(addr);
    let t = Instant::now();
    let r = ctl.get("/__stall?for=300ms");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok\n"[..]));
    assert!(t.elapsed() < Duration::from_millis(250));
    // Stats are not held either.
    assert_eq!(ctl.get("/__stats").status, 200);
    let r = c.get("/?size=5");
    assert_eq!(r.body, b"abcde");
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "answered after {:?}",
        t.elapsed()
    );

    // Through the API, with a request pending when the stall starts.
    let mut slow = Client::connect(addr);
    let t = Instant::now();
    slow.send(b"GET /?delay=50ms HTTP/1.1\r\nHost: t\r\n\r\n");
    server.stall(Duration::from_millis(300));
    assert_eq!(slow.response(false).status, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "answered after {:?}",
        t.elapsed()
    );
    // After the stall, responses are immediate again.
    let t = Instant::now();
    c.get("/");
    assert!(t.elapsed() < Duration::from_millis(250));

    assert_eq!(ctl.get("/__stall").status, 400);
    assert_eq!(ctl.get("/__stall?for=xyz").status, 400);
    assert_eq!(ctl.get("/__nothing").status, 404);
}

#[test]
fn malformed_request_gets_400_and_close() {
    let server = start(1);
    let addr = server.local_addr();
    for bad in [
        &b"NOT A REQUEST\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET / HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
    ] {
        let mut c = Client::connect(addr);
        assert_eq!(c.get("/?size=1").body, b"a");
        c.send(bad);
        let r = c.response(false);
        assert_eq!(r.status, 400, "for {:?}", String::from_utf8_lossy(bad));
        assert_eq!(r.header("connection"), Some("close"));
        assert!(c.at_eof());
    }
    // Malformed heads are not counted (the one with a bad chunked body had
    // a complete head, so it is).
    assert_eq!(server.stats().requests, 7);
}

#[test]
fn oversized_head_gets_431() {
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    let mut req = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
    req.resize(req.len() + 70 * 1024, b'a');
    req.extend_from_slice(b"\r\n\r\n");
    // The server may stop reading once it has answered; ignore write errors.
    let _ = std::io::Write::write_all(&mut c.stream, &req);
    let r = c.response(false);
    assert_eq!(r.status, 431);
    assert!(c.at_eof());

    // A large but acceptable head is fine.
    let mut c = Client::connect(server.local_addr());
    let mut req = b"GET /?size=2 HTTP/1.1\r\nX-Big: ".to_vec();
    req.resize(req.len() + 40 * 1024, b'a');
    req.extend_from_slice(b"\r\n\r\n");
    c.send(&req);
    assert_eq!(c.response(false).body, b"ab");
}

#[test]
fn shutdown_closes_everything() {
    let server = start(2);
    let addr = server.local_addr();
    let mut c = Client::connect(addr);
    assert_eq!(c.get("/").status, 200);
    server.shutdown();
    assert!(c.at_eof());
    assert!(std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err());

    // Drop also shuts down, including with a request in progress.
    let server = start(1);
    let mut c = Client::connect(server.local_addr());
    c.send(b"GET /?delay=10s HTTP/1.1\r\n\r\n");
    std::thread::sleep(Duration::from_millis(20));
    let t = Instant::now();
    drop(server);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(c.at_eof());
}

#[test]
fn port_in_use_is_an_error() {
    let server = start(1);
    let r = Server::start(ServeConfig {
        addr: server.local_addr(),
        threads: 1,
    });
    assert!(r.is_err());
}

#[test]
fn run_forever_reports_address_and_serves() {
    let (tx, rx) = std::sync::mpsc::channel();
    // The serving thread parks forever; it ends with the test process.
    std::thread::spawn(move || {
        let cfg = ServeConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
        };
        let r = redline_serve::run_forever(cfg, |addr| tx.send(addr).unwrap());
        panic!("run_forever returned: {r:?}");
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("on_bound called");
    let mut c = Client::connect(addr);
    assert_eq!(c.get("/?size=3").body, b"abc");
    // Absolute-form targets work too.
    assert_eq!(c.get("http://example.com/x?size=2").body, b"ab");
}
