//! Every listener redline opens against hostile clients written in the
//! test: slow ones (a byte a second), idle ones (connect and say nothing)
//! and a flood (200 connections held open). The scrape endpoint
//! (`--metrics-listen`) still answers each scrape within a second and a
//! `-d 3s` run exits on time; the record server (`coordinate
//! --serve-record`) still answers `fetch`; the coordinator still registers
//! an agent, which runs. Every peer is on 127.0.0.1, every wait bounded,
//! every process stopped by its own end or by its PID.

mod common;

use common::coord::{agent, Coord};
use common::nginx::free_port;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The hostile clients of one listener; they stop when dropped.
struct Hostile {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    _held: Vec<TcpStream>,
}

impl Hostile {
    /// `slow` clients sending `GET /metrics …` a byte a second (reconnecting
    /// when cut off), `idle` connections saying nothing, `flood` more held open.
    fn start(port: u16, slow: usize, idle: usize, flood: usize) -> Hostile {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for _ in 0..slow {
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || {
                let req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
                'outer: while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    };
                    for b in req.iter().cycle().take(60) {
                        if stop.load(Ordering::Relaxed) {
                            break 'outer;
                        }
                        if s.write_all(&[*b]).is_err() {
                            continue 'outer;
                        }
                        // A second between bytes, watching `stop`.
                        for _ in 0..10 {
                            if stop.load(Ordering::Relaxed) {
                                break 'outer;
                            }
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
            }));
        }
        let held = (0..idle + flood)
            .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
            .collect();
        Hostile {
            stop,
            threads,
            _held: held,
        }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// GET path on the port: (status, how long the whole answer took).
fn get(port: u16, path: &str, extra: &str) -> Option<(u16, Duration)> {
    let t = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut b = Vec::new();
    s.take(1 << 20).read_to_end(&mut b).ok()?;
    let t = t.elapsed();
    let text = String::from_utf8_lossy(&b);
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, t))
}

/// `--metrics-listen` with 20 slow, 20 idle and 200 flooding clients: five
/// scrapes during a `-d 3s` run are each answered (200) within a second,
/// and the run exits within about a second of its end.
#[test]
fn slow_idle_and_flooding_scrapers_stall_nothing() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let mport = free_port();
    let listen = format!("127.0.0.1:{mport}");
    let start = Instant::now();
    let child = redline_testkit::proc::spawn(
        bin(),
        &[
            "run",
            "-q",
            "--no-save",
            "-d",
            "3s",
            "-c",
            "1",
            "--rate",
            "50",
            "--metrics-listen",
            &listen,
            &url,
        ],
    );
    // The endpoint is up (bounded).
    let t = Instant::now();
    while get(mport, "/", "").is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "no scrape endpoint");
        std::thread::sleep(Duration::from_millis(20));
    }
    let up = start.elapsed();
    let hostile = Hostile::start(mport, 20, 20, 200);
    std::thread::sleep(Duration::from_millis(300));
    let mut times = Vec::new();
    for _ in 0..5 {
        let (code, took) = get(mport, "/metrics", "").expect("a scrape answered");
        assert_eq!(code, 200);
        times.push(took);
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("scrapes took {times:?}");
    assert!(
        times.iter().all(|t| *t < Duration::from_secs(1)),
        "{times:?}"
    );
    let out = wait_limit(child, Duration::from_secs(30));
    let total = start.elapsed();
    drop(hostile);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 3 s of run after at most `up` of start-up, plus about a second.
    eprintln!("endpoint up after {up:?}, exit after {total:?}");
    assert!(total < up + Duration::from_millis(4500), "{total:?}");
}

/// The record server (`coordinate --serve-record`) with 40 slow clients,
/// 20 idle and 200 flooding ones: `/healthz` answers within a second five
/// times of five, and `redline fetch` gets its (one-line) 503 every time.
#[test]
fn slow_record_clients_do_not_starve_fetch() {
    let mut c = Coord::start(&["--agents", "1", "--serve-record", "127.0.0.1:0"]);
    let at = c.wait_for("the run record will be at", Duration::from_secs(20));
    let url = at
        .split("will be at ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let port: u16 = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let hostile = Hostile::start(port, 40, 20, 200);
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        let (code, took) = get(port, "/healthz", "").expect("healthz answered");
        assert_eq!(code, 200);
        assert!(took < Duration::from_secs(1), "{took:?}");
        let (o, took) = redline_with_limit(&["fetch", &url], Duration::from_secs(20));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("HTTP 503") && err.trim().lines().count() == 1,
            "{err}"
        );
        assert!(took < Duration::from_secs(5), "{took:?}");
    }
    drop(hostile);
    let _ = c.child.kill();
    let _ = c.child.wait();
}

/// The coordinator's agent port with 20 slow clients (a byte a second, no
/// newline), 20 idle and 200 flooding connections: an agent arriving last
/// still registers, runs `-d 3s` and its record is merged; the coordinator
/// ends within a few seconds of the run's end.
#[test]
fn idle_and_flooding_connections_cannot_keep_an_agent_out() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let c = Coord::start(&["--agents", "1", "--ready-timeout", "60s"]);
    let hostile = Hostile::start(c.port, 20, 20, 200);
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let a = agent(0, 1, c.port, &[&url, "-d", "3s", "-c", "1", "--rate", "50"]);
    let out = wait_limit(a, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (m, _) = c.finish_record(0);
    let took = t.elapsed();
    drop(hostile);
    assert!(counter(&m, "completed") >= 100, "{}", m["counters"]);
    eprintln!("agent to merged record: {took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
}
