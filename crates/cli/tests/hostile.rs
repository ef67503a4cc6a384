//! Hostile and odd servers: every case ends in a classified outcome (a success
//! or a named error kind with its count), no panic, no hang, on time.

mod common;

use common::*;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

/// A server that answers each request head with `resp` and then closes.
fn once(resp: Vec<u8>) -> ScriptServer {
    ScriptServer::start(move |mut s| {
        if read_head(&mut s).is_some() {
            let _ = s.write_all(&resp);
            let _ = s.flush();
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

fn sub_kind(v: &serde_json::Value, sub: &str) -> u64 {
    v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["sub"] == sub)
        .map(|e| e["count"].as_u64().unwrap())
        .sum()
}

fn run(srv: &ScriptServer, extra: &[&str]) -> serde_json::Value {
    let url = srv.url();
    let mut a: Vec<&str> = vec!["-n", "4", "-c", "2"];
    a.extend_from_slice(extra);
    a.push(&url);
    run_json(&a)
}

#[test]
fn broken_status_lines_and_heads() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"HTTP/1.1 2x0 OK\r\n\r\n".to_vec(), "status_line"),
        (
            b"HTTP/2.5 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec(),
            "status_line",
        ),
        (
            b"HTTP/1.1 001 Odd\r\nContent-Length: 0\r\n\r\n".to_vec(),
            "status_line",
        ),
        (b"ICY 200 OK\r\n\r\n".to_vec(), "status_line"),
        (
            {
                let mut v = b"HTTP/1.1 200 OK\r\n".to_vec();
                for i in 0..10_000 {
                    v.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
                }
                v.extend_from_slice(b"Content-Length: 0\r\n\r\n");
                v
            },
            "head_too_large",
        ),
        (
            {
                let mut v = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
                v.extend(std::iter::repeat_n(b'a', 500 * 1024));
                v.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
                v
            },
            "head_too_large",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello".to_vec(),
            "content_length",
        ),
    ];
    for (resp, sub) in cases {
        let srv = once(resp);
        let v = run(&srv, &[]);
        assert_eq!(sub_kind(&v, sub), 4, "{sub}: {}", v["errors"]);
        assert_eq!(counter(&v, "completed"), 0);
    }
}

#[test]
fn short_bodies_and_closes_are_closed_errors() {
    for resp in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nshort"[..],
        &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"[..],
        &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"[..],
        &b""[..],
    ] {
        let srv = once(resp.to_vec());
        let v = run(&srv, &[]);
        assert_eq!(error_count(&v, "closed"), 4, "{}", v["errors"]);
    }
}

#[test]
fn broken_chunked_encodings() {
    let mut ext = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;".to_vec();
    ext.extend(std::iter::repeat_n(b'e', 20 * 1024));
    ext.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
    let mut trailers = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".to_vec();
    for i in 0..5000 {
        trailers.extend_from_slice(format!("X-T{i}: aaaaaaaaaaaaaaaaaaaa\r\n").as_bytes());
    }
    trailers.extend_from_slice(b"\r\n");
    for resp in [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX".to_vec(),
        ext,
        trailers,
    ] {
        let srv = once(resp);
        let v = run(&srv, &[]);
        assert_eq!(sub_kind(&v, "chunked"), 4, "{}", v["errors"]);
    }
}

#[test]
fn extra_bytes_after_a_response_are_not_the_next_response() {
    // Every connection gets a good response plus garbage: the response counts,
    // the garbage is not read as the next response (the connection is dropped).
    let srv = ScriptServer::start(|mut s| {
        for _ in 0..100 {
            if read_head(&mut s).is_none() {
                return;
            }
            if s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500 Fake\r\nContent-Length: 0\r\n\r\n")
                .is_err()
            {
                return;
            }
        }
    });
    let v = run_json(&["-n", "6", "-c", "1", &srv.url()]);
    assert_eq!(counter(&v, "completed"), 6);
    assert_eq!(v["status_codes"]["200"], 6);
    assert!(v["status_codes"].get("500").is_none());
    assert_eq!(counter(&v, "connections_opened"), 6);
}

#[test]
fn informational_responses_are_skipped_and_timed_to_the_final_one() {
    let srv = ScriptServer::start(|mut s| {
        if read_head(&mut s).is_some() {
            let _ = s.write_all(
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n",
            );
            let _ = s.flush();
            std::thread::sleep(Duration::from_millis(200));
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    let v = run_json(&["-n", "2", "-c", "1", &srv.url()]);
    assert_eq!(counter(&v, "completed"), 2);
    assert_eq!(v["status_codes"]["200"], 2);
    let waiting_min = v["waiting"]["min_us"].as_u64().unwrap();
    assert!(
        waiting_min >= 190_000,
        "waiting {waiting_min} µs must count to the final response"
    );
}

#[test]
fn close_delimited_and_unknown_transfer_encoding_read_until_close() {
    for resp in [
        &b"HTTP/1.0 200 OK\r\n\r\n0123456789"[..],
        &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n0123456789"[..],
    ] {
        let srv = once(resp.to_vec());
        let v = run(&srv, &[]);
        assert_eq!(counter(&v, "completed"), 4, "{}", v["errors"]);
        assert_eq!(counter(&v, "body_bytes"), 40);
    }
}

#[test]
fn dripping_body_times_out_and_the_connection_is_replaced() {
    let srv = ScriptServer::start(|mut s| {
        if read_head(&mut s).is_some() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
            for _ in 0..8 {
                if s.write_all(b"x").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    });
    let (out, took) = redline_with_limit(
        &[
            "run",
            "-o",
            "json",
            "-q",
            "-n",
            "2",
            "-c",
            "1",
            "--timeout",
            "2s",
            &srv.url(),
        ],
        Duration::from_secs(20),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error_count(&v, "timeout"), 2, "{}", v["errors"]);
    assert_eq!(counter(&v, "connections_opened"), 2);
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert!(
        took >= Duration::from_secs(4),
        "each request waited its 2 s: {took:?}"
    );
}

#[test]
fn reset_mid_body_is_a_reset() {
    let srv = ScriptServer::start(|mut s| {
        if read_head(&mut s).is_some() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial");
            let _ = s.flush();
            std::thread::sleep(Duration::from_millis(50));
            // SO_LINGER 0: close sends RST instead of FIN.
            linger_zero(&s);
            drop(s);
        }
    });
    let v = run(&srv, &[]);
    let reset = error_count(&v, "reset");
    let closed = error_count(&v, "closed");
    assert_eq!(reset + closed, 4, "{}", v["errors"]);
    assert!(reset >= 1, "a reset is reported as such: {}", v["errors"]);
}

#[cfg(unix)]
fn linger_zero(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a valid socket with a correctly sized linger struct.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

#[test]
fn huge_compressed_body_is_counted_not_decoded() {
    // A "gzip bomb" is only counted on the wire: the load engine never decodes
    // bodies, so memory stays bounded whatever the body claims to hold.
    let mut resp =
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 65536\r\nConnection: close\r\n\r\n"
            .to_vec();
    resp.extend(std::iter::repeat_n(0u8, 65536));
    let srv = once(resp);
    let v = run(&srv, &["-H", "Accept-Encoding: gzip"]);
    assert_eq!(counter(&v, "completed"), 4);
    assert_eq!(counter(&v, "body_bytes"), 4 * 65536);
}

#[cfg(unix)]
#[test]
fn too_few_file_descriptors_is_a_client_limit_in_every_output() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    // A hard limit of 40 descriptors that redline cannot raise, and 100 connections.
    let cmd = format!(
        "ulimit -n 40 && exec {} run -o json -q -d 1s -c 100 -t 1 {url}",
        bin()
    );
    let child = std::process::Command::new("sh")
        .args(["-c", &cmd])
        .env(
            "REDLINE_DB",
            std::env::temp_dir().join("redline-tests-fd.db"),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_limit(child, Duration::from_secs(20));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["client_limited"], true);
    let codes = warning_codes(&v);
    assert!(codes.contains(&"fd_limit"), "{codes:?}");
    assert!(
        error_count(&v, "too_many_open_files") > 0,
        "{}",
        v["errors"]
    );
    assert!(
        counter(&v, "completed") > 0,
        "the connections it could open still worked"
    );
}

/// A server whose accept queue is full: it listens with a backlog of 0 and
/// accepts nothing for its first 1.5 s. The connects beyond the queue lose
/// their SYN and the kernel sends it again after 1 s (then 3 s): the run
/// still completes every request, and says why its connects took seconds.
#[test]
fn a_full_listen_queue_is_named_as_syn_retransmits() {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a descriptor this test owns; it is handed
    // to a TcpListener, which closes it.
    let listener = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, &a as *const _ as *const libc::sockaddr, len),
            0
        );
        assert_eq!(libc::listen(fd, 0), 0);
        std::net::TcpListener::from_raw_fd(fd)
    };
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut served = 0;
        while served < 8 && std::time::Instant::now() < deadline {
            match listener.accept() {
                Ok((mut s, _)) => {
                    served += 1;
                    s.set_nonblocking(false).unwrap();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 4096];
                        let mut head = Vec::new();
                        // Keep-alive until the client closes (at most 100 requests).
                        for _ in 0..100 {
                            loop {
                                if head.windows(4).any(|w| w == b"\r\n\r\n") {
                                    break;
                                }
                                match s.read(&mut buf) {
                                    Ok(0) | Err(_) => return,
                                    Ok(n) => head.extend_from_slice(&buf[..n]),
                                }
                            }
                            let end = head.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                            head.drain(..end);
                            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                        }
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    let url = format!("http://127.0.0.1:{port}/");
    let v = run_json(&["-n", "16", "-c", "8", "--no-save", &url]);
    server.join().unwrap();
    assert_eq!(v["counters"]["completed"], 16, "{}", v["counters"]);
    let retrans = v["client"]["syn_retransmits"].as_u64().unwrap();
    assert!(retrans >= 1, "no SYN retransmit counted: {}", v["client"]);
    assert!(
        v["connect"]["max_us"].as_u64().unwrap() >= 1_000_000,
        "a retransmitted SYN waits 1 s: {}",
        v["connect"]
    );
    assert!(
        warning_codes(&v).contains(&"syn_retransmits"),
        "{}",
        v["warnings"]
    );
    let w = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "syn_retransmits")
        .unwrap();
    let msg = w["message"].as_str().unwrap();
    assert!(msg.contains("backlog"), "{msg}");
    // The server runs on this host: its accept queue overflowed here.
    assert!(
        v["client"]["listen_overflows"].as_u64().unwrap() >= 1,
        "{}",
        v["client"]
    );
}

/// A server that answers 100 requests and then never again: the unanswered
/// ones are errors and slower than every answer, so `errors<1%` and
/// `p99<200ms` fail (before, both passed on the 100 answered: exit 0).
#[test]
fn a_server_that_goes_silent_fails_the_thresholds() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let answered = Arc::new(AtomicU64::new(0));
    let a2 = answered.clone();
    let srv = ScriptServer::start(move |mut s| {
        let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
        for _ in 0..10_000 {
            if read_head(&mut s).is_none() {
                return; // the client closed (or 20 s passed)
            }
            if a2.fetch_add(1, Ordering::SeqCst) < 100 {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        }
    });
    let url = srv.url();
    let (out, _) = redline_with_limit(
        &[
            "run",
            "-q",
            "--no-save",
            "-o",
            "json",
            "-r",
            "100",
            "-d",
            "3s",
            "--threshold",
            "errors<1%",
            "--threshold",
            "p99<200ms",
            &url,
        ],
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let unanswered = counter(&v, "in_flight_at_end") + counter(&v, "not_sent");
    assert_eq!(counter(&v, "completed"), 100, "{}", v["counters"]);
    assert_eq!(unanswered, 200, "{}", v["counters"]);
    assert!(
        warning_codes(&v).contains(&"unanswered"),
        "{:?}",
        v["warnings"]
    );
    assert!(err.contains("FAIL  errors<1%"), "{err}");
    assert!(err.contains("FAIL  p99<200ms"), "{err}");
    assert!(err.contains("200 requests never answered counted"), "{err}");
}

/// A run in which no request got an answer exits 1 with one line saying so;
/// the report is still printed.
#[test]
fn a_run_with_no_answer_at_all_exits_1() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    let out = redline(&["run", "-q", "--no-save", "-n", "20", "-c", "2", &url]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no request was answered (20 failed, 0 unanswered)"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 completed, 20 failed"));
}

/// A server that answers for 1 s and then goes away: it closes its listener
/// (later connects are refused) and every connection it held. The run says
/// so, with the instant, in the JSON and at the top of the HTML report; the
/// refused connects are not taken for a full listen queue.
#[test]
fn a_server_that_goes_away_is_named_with_the_instant() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let gone = Arc::new(AtomicBool::new(false));
    let g2 = gone.clone();
    let server = std::thread::spawn(move || {
        let until = std::time::Instant::now() + Duration::from_millis(1000);
        let mut conns = Vec::new();
        while std::time::Instant::now() < until {
            match listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                    let g3 = g2.clone();
                    conns.push(std::thread::spawn(move || {
                        let mut s = s;
                        for _ in 0..100_000 {
                            if g3.load(Ordering::SeqCst) {
                                break;
                            }
                            if read_head(&mut s).is_none() {
                                break;
                            }
                            if g3.load(Ordering::SeqCst) {
                                break;
                            }
                            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                        }
                        // Dropped with a request unread: the client sees a reset.
                    }));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        drop(listener);
        g2.store(true, Ordering::SeqCst);
        for c in conns {
            let _ = c.join();
        }
    });
    let dir = std::env::temp_dir().join(format!("redline-gone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("run.html");
    let url = format!("http://127.0.0.1:{port}/");
    let v = run_json(&[
        "-c",
        "4",
        "-d",
        "3s",
        "--no-save",
        "--html",
        html.to_str().unwrap(),
        &url,
    ]);
    server.join().unwrap();
    let page = std::fs::read_to_string(&html).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(counter(&v, "completed") > 0, "{}", v["counters"]);
    assert!(error_count(&v, "refused") > 0, "{}", v["errors"]);
    let codes = warning_codes(&v);
    assert!(codes.contains(&"server_gone"), "{}", v["warnings"]);
    assert!(
        !codes.contains(&"syn_retransmits"),
        "refused connects are no full listen queue: {}",
        v["warnings"]
    );
    let msg = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "server_gone")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    // The server stopped 1 s after it started, which was just before the run:
    // the last answers came in the first or the second second.
    assert!(
        msg.starts_with("the server went away at 1.0 s")
            || msg.starts_with("the server went away at 2.0 s"),
        "{msg}"
    );
    assert!(msg.contains("refused after it"), "{msg}");
    // The HTML banner says it first, before the list.
    let banner = page.find("<div class=\"warn\">").expect("a warning banner");
    let said = page
        .find("the server went away at")
        .expect("named in the HTML");
    let list = page[banner..].find("<ul>").unwrap() + banner;
    assert!(banner < said && said < list, "not at the top of the banner");
}

/// Open loop above a slow server's capacity (4 connections × 5 answers/s
/// against 40 req/s): every connection is busy with the server and requests
/// wait for one. `rate_short` names the server's concurrency, and the client
/// is not called the limit.
#[test]
fn open_loop_above_a_slow_servers_capacity_blames_the_server() {
    let srv = builtin();
    let url = format!("http://{}/?delay=200ms", srv.local_addr());
    let v = run_json(&[
        "-r",
        "40",
        "-d",
        "2s",
        "-c",
        "4",
        "-t",
        "1",
        "--no-save",
        &url,
    ]);
    srv.shutdown();
    assert!(
        counter(&v, "waited_for_connection") > 0,
        "{}",
        v["counters"]
    );
    let w = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "rate_short")
        .unwrap_or_else(|| panic!("no rate_short: {}", v["warnings"]));
    let msg = w["message"].as_str().unwrap();
    assert!(msg.contains("the server held all 4 connections"), "{msg}");
    assert!(msg.contains("worker limit"), "{msg}");
    // Not the client's limit: only a client warning of its own (CPU, lag on
    // this loaded machine, descriptors) may say so.
    let codes = warning_codes(&v);
    let client_says = [
        "client_cpu",
        "client_starved",
        "scheduler_lag",
        "fd_limit",
        "client_resources",
    ]
    .iter()
    .any(|c| codes.contains(c));
    assert!(
        v["client_limited"] == false || client_says,
        "{}",
        v["warnings"]
    );
}

/// A raw HTTP/2 server that allows no stream at all
/// (`SETTINGS_MAX_CONCURRENT_STREAMS = 0`): it acknowledges settings and
/// pings and never answers anything else; each connection ends on EOF or
/// after 30 s.
fn no_streams_h2_server() -> ScriptServer {
    use std::io::Read;
    ScriptServer::start(|mut s| {
        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
        // SETTINGS: MAX_CONCURRENT_STREAMS (0x3) = 0.
        let settings = [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0];
        if s.write_all(&settings).is_err() {
            return;
        }
        let until = std::time::Instant::now() + Duration::from_secs(30);
        let mut buf: Vec<u8> = Vec::new();
        let mut preface = false;
        let mut chunk = [0u8; 4096];
        while std::time::Instant::now() < until {
            match s.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(_) => continue, // read time-out: look at the clock again
            }
            if !preface {
                if buf.len() < 24 {
                    continue;
                }
                buf.drain(..24);
                preface = true;
            }
            while buf.len() >= 9 {
                let len =
                    (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                let (kind, flags) = (buf[3], buf[4]);
                let reply: Option<Vec<u8>> = match (kind, flags & 1) {
                    (4, 0) => Some(vec![0, 0, 0, 4, 1, 0, 0, 0, 0]),
                    (6, 0) => {
                        let mut f = vec![0, 0, 8, 6, 1, 0, 0, 0, 0];
                        f.extend_from_slice(&buf[9..17]);
                        Some(f)
                    }
                    _ => None,
                };
                if let Some(r) = reply {
                    if s.write_all(&r).is_err() {
                        return;
                    }
                }
                buf.drain(..9 + len);
            }
        }
    })
}

/// An h2 server that never allows a stream must not hold the run past its
/// duration and `--timeout`: requests waiting for a stream count as time-outs
/// (or not sent at the end). Every load (closed and open loop, `-n` and
/// `-d`) is `engine/src/core/tests.rs`'s; here the process against a raw
/// socket server.
#[test]
fn h2_server_allowing_no_stream_ends_on_time() {
    let srv = no_streams_h2_server();
    let url = srv.url();
    // `-n` without `-d` hung: each connection's first stream waited for the
    // server's permission forever, holding the rest of the budget.
    let loads: [&[&str]; 2] = [
        &["-n", "6", "-c", "1", "--streams", "4"],
        &["-d", "1s", "-r", "20"],
    ];
    for load in loads {
        let mut args = vec![
            "run",
            "-o",
            "json",
            "-q",
            "--no-save",
            "--h2c",
            "--timeout",
            "300ms",
        ];
        args.extend_from_slice(load);
        args.push(&url);
        let (out, _) = redline_with_limit(&args, Duration::from_secs(30));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{load:?}: {e}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(counter(&v, "completed"), 0, "{load:?}");
        let timeouts = error_count(&v, "timeout");
        assert!(timeouts >= 1, "{load:?}: {}", v["errors"]);
        assert_eq!(
            counter(&v, "scheduled"),
            counter(&v, "completed")
                + counter(&v, "failed")
                + counter(&v, "in_flight_at_end")
                + counter(&v, "not_sent"),
            "{load:?}: {}",
            v["counters"]
        );
        assert_eq!(out.status.code(), Some(1), "{load:?}: nothing succeeded");
    }
}

/// Text from outside never reaches the terminal raw: a label with ESC
/// sequences and `\r`, and a `Server` header with a C1 control (CSI, U+009B,
/// which HTTP's obs-text lets through), are shown escaped in the text report,
/// `show`, `history` and the HTML report.
#[test]
fn control_characters_from_outside_are_escaped_in_every_output() {
    let srv = once(
        b"HTTP/1.1 200 OK\r\nServer: evil\xc2\x9b2Jsrv\r\nContent-Length: 2\r\n\r\nok".to_vec(),
    );
    let url = srv.url();
    let dir = nginx::tmpdir("hostile-esc");
    let db = dir.join("h.db");
    let db_s = db.to_str().unwrap();
    let html = dir.join("r.html");
    let label = "lab\x1b[31mred\rforged";
    let raw = |b: &[u8]| {
        b.iter().any(|&c| c == 0x1b || c == b'\r' || c == 0x7f)
            || String::from_utf8_lossy(b).contains('\u{9b}')
    };
    let out = redline(&[
        "run",
        "-n",
        "2",
        "-c",
        "1",
        "--no-keepalive",
        "--db",
        db_s,
        "--label",
        label,
        "--note",
        "note\x1b]0;title\x07",
        "--html",
        html.to_str().unwrap(),
        &url,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("evil\\x9b2Jsrv"), "{text}");
    assert!(
        !raw(&out.stdout),
        "raw control characters in the report: {text:?}"
    );
    assert!(
        !raw(&out.stderr),
        "raw control characters on stderr: {err:?}"
    );
    assert!(err.contains("lab\\x1b[31mred\\rforged"), "{err}");
    let page = std::fs::read(&html).unwrap();
    assert!(!raw(&page), "raw control characters in the HTML report");
    assert!(String::from_utf8_lossy(&page).contains("evil\\x9b2J"));
    for args in [&["show", "last"][..], &["history"][..]] {
        let mut a = args.to_vec();
        a.extend_from_slice(&["--db", db_s]);
        let out = redline(&a);
        assert_eq!(out.status.code(), Some(0), "{a:?}");
        let t = String::from_utf8_lossy(&out.stdout);
        assert!(!raw(&out.stdout), "{a:?}: {t:?}");
        assert!(t.contains("lab\\x1b[31mred"), "{a:?}: {t}");
    }
    // JSON carries the text exactly, escaped by JSON itself.
    let out = redline(&["export", "last", "--db", db_s]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["label"], label);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-H 'Transfer-Encoding: chunked'` with a body sends it chunked and without
/// Content-Length, as curl does (nginx answers 400 to a request with both
/// framings); a transfer coding redline cannot apply is refused with one line.
#[test]
fn transfer_encoding_chunked_with_a_body_sends_one_framing() {
    // What goes on the wire: the raw request, up to the last chunk.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let seen2 = seen.clone();
    let srv = ScriptServer::start(move |mut s| {
        use std::io::Read;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        for _ in 0..1000 {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if buf.ends_with(b"\r\n0\r\n\r\n") || buf.len() > 65536 {
                break;
            }
        }
        seen2.lock().unwrap().extend_from_slice(&buf);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    });
    let url = srv.url();
    let te = ["-H", "Transfer-Encoding: chunked", "-b", "hello=1"];
    let mut args = vec!["-n", "1", "-c", "1"];
    args.extend_from_slice(&te);
    args.push(&url);
    let v = run_json(&args);
    assert_eq!(counter(&v, "completed"), 1);
    let raw = String::from_utf8_lossy(&seen.lock().unwrap()).to_string();
    let lower = raw.to_ascii_lowercase();
    assert!(lower.contains("transfer-encoding: chunked\r\n"), "{raw}");
    assert!(!lower.contains("content-length"), "{raw}");
    assert!(
        raw.ends_with("\r\n\r\n7\r\nhello=1\r\n0\r\n\r\n"),
        "{raw:?}"
    );

    // nginx refuses a request with both framings; with one it answers.
    let port = nginx::free_port();
    let extra =
        format!("server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"ok\"; }} }}");
    let Some(_ng) = nginx::start_nginx(&nginx::NginxSite {
        tag: "te-chunked",
        files: &[("index.html", b"x".to_vec())],
        tls: None,
        h2: false,
        http_extra: &extra,
        types: "",
    }) else {
        return;
    };
    let url = format!("http://127.0.0.1:{port}/");
    let mut args = vec!["-n", "20", "-c", "2"];
    args.extend_from_slice(&te);
    args.push(&url);
    let v = run_json(&args);
    assert_eq!(counter(&v, "completed"), 20, "{}", v["status_codes"]);
    assert_eq!(v["status_codes"]["200"], 20, "{}", v["status_codes"]);

    let out = redline(&[
        "run",
        "--no-save",
        "-n",
        "1",
        "-H",
        "Transfer-Encoding: gzip",
        "-b",
        "x",
        &url,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("can only send a body chunked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// A page whose redirects go round in a circle reports an error naming the
/// loop (and the load fails), instead of ending quietly at the repeat.
#[test]
fn page_redirect_loop_is_an_error_naming_the_loop() {
    let (srv, _) = routed_server(|head, _| {
        let to = if head.starts_with("GET /a ") {
            "/b"
        } else {
            "/a"
        };
        format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n").into_bytes()
    });
    let url = format!("http://{}/a", srv.addr);
    let out = redline(&["page", "-q", "--no-save", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    let b = format!("http://{}/b", srv.addr);
    let want = format!("redirect loop: {url} -> {b} -> {url}");
    assert!(
        text.contains(&want) || err.contains(&want),
        "stdout: {text}\nstderr: {err}"
    );
    assert_ne!(out.status.code(), Some(0), "{text}{err}");
}

/// A page whose server never answers says the read timed out and after how
/// long, not "Resource temporarily unavailable (os error 11)".
#[test]
fn page_read_timeout_says_so() {
    let srv = ScriptServer::start(|mut s| {
        if read_head(&mut s).is_some() {
            std::thread::sleep(Duration::from_secs(3));
        }
    });
    let (out, _) = redline_with_limit(
        &["page", "-q", "--no-save", "--timeout", "1s", &srv.url()],
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("read timed out after 1s"), "{err}");
    assert!(!err.contains("os error 11"), "{err}");
}
