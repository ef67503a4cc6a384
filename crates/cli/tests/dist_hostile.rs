//! Hostile peers of the distributed mode, written in the test: a rogue
//! client without the token, connections that never register or send
//! endless lines, an agent with another plan, forged records and absurd
//! numbers, a coordinator sending an absurd start; and a server that stops
//! answering, whose unanswered requests must fail the merged verdict. Every
//! wait is bounded; every peer is on 127.0.0.1.

mod common;

use common::coord::{agent_env, Coord};
use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A raw protocol peer: JSON lines, every read bounded by a time-out.
struct Peer {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Peer {
    fn connect(port: u16) -> Peer {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Peer {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    fn from(s: TcpStream) -> Peer {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Peer {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    fn send(&mut self, v: &Value) {
        let mut l = serde_json::to_vec(v).unwrap();
        l.push(b'\n');
        // The other side may have hung up (that is what some tests wait for).
        let _ = self.w.write_all(&l);
    }

    /// The next line, or Null at the end of the stream (or an error).
    fn recv(&mut self) -> Value {
        let mut l = String::new();
        match (&mut self.r).take(64 << 20).read_line(&mut l) {
            Ok(n) if n > 0 => serde_json::from_str(&l).unwrap(),
            _ => Value::Null,
        }
    }

    /// True once the other side closed the connection (within `limit`).
    fn closed_within(&mut self, limit: Duration) -> bool {
        let _ = self.w.set_read_timeout(Some(limit));
        let mut b = [0u8; 4096];
        let start = Instant::now();
        while start.elapsed() < limit {
            match self.r.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    return false
                }
                Err(_) => return true,
            }
        }
        false
    }
}

fn register(index: u64, total: u64, auth: Option<&str>) -> Value {
    json!({"type": "register", "index": index, "total": total, "host": "rogue\u{1b}[31m",
           "version": 1, "auth": auth})
}

/// A rogue client cannot take an index without the token; an agent with a
/// wrong token is refused; the agent with the token (from a file for the
/// coordinator, from REDLINE_TOKEN for the agent) runs and is merged. The
/// token appears in no output.
#[test]
fn without_the_token_no_one_takes_an_index() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let dir = std::env::temp_dir().join(format!("redline-hostile-tok-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tf = dir.join("token");
    std::fs::write(&tf, "tok-3f9a77c1\n").unwrap();
    let mut c = Coord::start_env(
        &[
            "--agents",
            "1",
            "--token-file",
            tf.to_str().unwrap(),
            "--ready-timeout",
            "40s",
        ],
        &[],
    );
    // A rogue: a made-up proof, then none at all.
    for auth in [Some("00".repeat(32)), None] {
        let mut p = Peer::connect(c.port);
        let hello = p.recv();
        assert_eq!(hello["type"], "hello", "{hello}");
        assert_eq!(hello["nonce"].as_str().unwrap().len(), 64);
        p.send(&register(0, 1, auth.as_deref()));
        let r = p.recv();
        assert_eq!(r["type"], "refused", "{r}");
        assert!(
            r["reason"]
                .as_str()
                .unwrap()
                .contains("authentication failed"),
            "{r}"
        );
    }
    // An agent with the wrong token.
    let wrong = agent_env(
        0,
        1,
        c.port,
        &[("REDLINE_TOKEN", "nope")],
        &[&url, "-n", "10"],
    );
    let out = wait_limit(wrong, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("authentication failed"), "{err}");
    // The real one.
    let good = agent_env(
        0,
        1,
        c.port,
        &[("REDLINE_TOKEN", "tok-3f9a77c1")],
        &[&url, "-n", "200", "-c", "2"],
    );
    let out = wait_limit(good, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.wait_for("agent 0 sent its record", Duration::from_secs(30));
    let (m, err) = c.finish_record(0);
    assert_eq!(counter(&m, "completed"), 200);
    assert_eq!(err.matches("authentication failed").count(), 3, "{err}");
    assert!(!err.contains("tok-3f9a77c1") && !m.to_string().contains("tok-3f9a77c1"));
    // Control characters from a peer are not printed.
    assert!(!err.contains('\u{1b}'), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Before registration: a line without end is cut at 64 KiB, past 64
/// waiting connections the oldest are closed, a silent one is dropped after
/// its time-out; an agent registers and runs afterwards.
#[test]
fn unregistered_connections_are_bounded() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let c = Coord::start_env(&["--agents", "1", "--ready-timeout", "60s"], &[]);
    // 2 MiB without a newline: the coordinator hangs up (it buffers at most 64 KiB).
    let mut big = Peer::connect(c.port);
    assert_eq!(big.recv()["type"], "hello");
    let chunk = vec![b'a'; 64 * 1024];
    let mut cut = false;
    for _ in 0..32 {
        if big.w.write_all(&chunk).is_err() {
            cut = true;
            break;
        }
    }
    assert!(
        cut || big.closed_within(Duration::from_secs(15)),
        "not cut off"
    );
    // 80 idle connections: each gets a hello, but at most 64 wait at once:
    // the oldest 16 are closed (the newcomers are not).
    let mut idle: Vec<Peer> = (0..80).map(|_| Peer::connect(c.port)).collect();
    let mut greeted = 0;
    let mut silent = None;
    for (i, p) in idle.iter_mut().enumerate() {
        let _ = p.w.set_read_timeout(Some(Duration::from_secs(5)));
        match p.recv() {
            v if v["type"] == "hello" => {
                greeted += 1;
                if i >= 16 {
                    silent.get_or_insert(i);
                }
            }
            Value::Null => {}
            v => panic!("unexpected {v}"),
        }
    }
    assert!(greeted >= 64, "{greeted} greeted");
    let closed = idle[..16]
        .iter_mut()
        .map(|p| p.closed_within(Duration::from_secs(2)))
        .filter(|c| *c)
        .count();
    assert_eq!(closed, 16, "the oldest waiting connections are closed");
    // One that never registers is dropped after its time-out (10 s).
    let silent = silent.expect("some connection was greeted");
    assert!(idle[silent].closed_within(Duration::from_secs(25)));
    drop(idle);
    std::thread::sleep(Duration::from_millis(300));
    let a = agent_env(0, 1, c.port, &[], &[&url, "-n", "100", "-c", "1"]);
    let out = wait_limit(a, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (m, _) = c.finish_record(0);
    assert_eq!(counter(&m, "completed"), 100);
}

/// Two agents with another `-n` and method: the second is refused and the
/// differing fields named; nothing runs.
#[test]
fn an_agent_with_another_plan_is_refused_and_named() {
    let url = "http://127.0.0.1:9/";
    let c = Coord::start_env(&["--agents", "2", "--ready-timeout", "4s"], &[]);
    let first = agent_env(0, 2, c.port, &[], &[url, "-n", "100", "-c", "2"]);
    std::thread::sleep(Duration::from_millis(700));
    let second = agent_env(
        1,
        2,
        c.port,
        &[],
        &["--requests=200", "-m", "POST", "-c2", url],
    );
    let out = wait_limit(second, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("runs another plan than agent 0"), "{err}");
    assert!(err.contains("requests \"200\" vs \"100\""), "{err}");
    assert!(err.contains("method"), "{err}");
    let (code, _, err) = c.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("runs another plan"), "{err}");
    let _ = wait_limit(first, Duration::from_secs(30));
}

/// A real record of a one-segment run, to forge.
fn real_record(url: &str) -> Value {
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "--segment",
        "0/1",
        "-n",
        "50",
        "-c",
        "1",
        url,
    ]);
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Fake agents registering without a token on loopback: absurd numbers in
/// `progress` and `second` do not crash the coordinator; forged records (a
/// fabricated 771,634 req/s, a run an hour old) are refused and named; the
/// coordinator exits 1 with nothing merged.
#[test]
fn forged_records_and_absurd_numbers_are_refused() {
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let rec = real_record(&url);
    let mut inflated = rec.clone();
    inflated["counters"]["completed"] = json!(7_716_340u64);
    inflated["requests_per_sec"] = json!(771_634.0);
    let mut old = rec.clone();
    old["started_at"] = json!("2026-01-01T00:00:00Z");
    let mut c = Coord::start_env(&["--agents", "2", "--threshold", "rps>10000"], &[]);
    let port = c.port;
    let fake = |index: u64, record: Value| {
        std::thread::spawn(move || {
            let mut p = Peer::connect(port);
            assert_eq!(p.recv()["type"], "hello");
            p.send(&register(index, 2, None));
            assert_eq!(p.recv()["type"], "registered");
            p.send(&json!({"type": "ready", "offset_ms": 0.0, "rtt_ms": 0.1, "expected_s": null}));
            assert_eq!(p.recv()["type"], "start");
            let max = u64::MAX;
            for t in 0..2u64 {
                p.send(&json!({"type": "progress", "t": t, "completed": max, "failed": max, "open": max}));
                p.send(
                    &json!({"type": "second", "t": t, "requests": max, "errors": max,
                               "status_classes": [max, max, max, max, max], "hist": "AAAA"}),
                );
            }
            p.send(&json!({"type": "done", "lateness_ms": 0.0, "record": record, "note": null}));
            p.recv()
        })
    };
    let a = fake(0, inflated);
    let b = fake(1, old);
    // Each is told its record was refused, and why (not acked).
    for (h, why) in [
        (a, "counters do not add up"),
        (b, "it started at 2026-01-01"),
    ] {
        let r = h.join().unwrap();
        assert_eq!(r["type"], "refused", "{r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.contains("record was refused") && reason.contains(why),
            "{r}"
        );
    }
    c.wait_for("agent 1 lost", Duration::from_secs(30));
    let (code, stdout, err) = c.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(stdout.trim().is_empty(), "nothing merged: {stdout}");
    assert!(
        err.contains("agent 0 lost: sent a record that was refused: counters do not add up"),
        "{err}"
    );
    assert!(
        err.contains("agent 1 lost: sent a record that was refused: it started at 2026-01-01"),
        "{err}"
    );
    assert!(!err.contains("PASS"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Protocol versions: an agent greeted by a coordinator speaking version 99
/// exits 1 at once with one line naming both versions (and never
/// registers); the coordinator refuses an agent registering with version 99
/// the same way; an agent whose record the coordinator refused exits 1
/// saying so.
#[test]
fn other_protocol_versions_and_refused_records_fail_the_agent() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = Instant::now();
    let a = agent_env(0, 1, port, &[], &["http://127.0.0.1:9/", "-n", "10"]);
    let (s, _) = l.accept().unwrap();
    let mut p = Peer::from(s);
    p.send(&json!({"type": "hello", "nonce": "ab", "version": 99}));
    assert!(p.closed_within(Duration::from_secs(10)), "it registered");
    let out = wait_limit(a, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("protocol version 99") && err.contains("this agent speaks 1"),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());

    // The coordinator refuses an agent of another version, naming both.
    let c = Coord::start_env(&["--agents", "1", "--ready-timeout", "3s"], &[]);
    let mut p = Peer::connect(c.port);
    assert_eq!(p.recv()["version"], 1);
    let mut r = register(0, 1, None);
    r["version"] = json!(99);
    p.send(&r);
    let r = p.recv();
    assert_eq!(r["type"], "refused", "{r}");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains("protocol version 99") && reason.contains("the coordinator speaks 1"),
        "{reason}"
    );
    let (code, _, _) = c.finish();
    assert_eq!(code, Some(1));

    // A coordinator written here refuses the agent's record.
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let a = agent_env(0, 1, port, &[], &[&url, "-n", "20", "-c", "1"]);
    let (s, _) = l.accept().unwrap();
    let mut p = Peer::from(s);
    p.send(&json!({"type": "hello", "nonce": "ab", "version": 1}));
    assert_eq!(p.recv()["type"], "register");
    p.send(&json!({"type": "registered"}));
    let mut m = p.recv();
    for _ in 0..16 {
        if m["type"] != "ping" {
            break;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            * 1000.0;
        p.send(&json!({"type": "pong", "id": m["id"], "now_ms": now}));
        m = p.recv();
    }
    assert_eq!(m["type"], "ready", "{m}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0;
    p.send(&json!({"type": "start", "at_ms": now + 200.0}));
    let mut done = false;
    for _ in 0..1000 {
        let m = p.recv();
        if m["type"] == "done" {
            done = true;
            break;
        }
        if m.is_null() {
            break;
        }
    }
    assert!(done, "no record from the agent");
    p.send(&json!({"type": "refused", "reason": "agent 0's record was refused: made up"}));
    let out = wait_limit(a, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the coordinator refused the record: agent 0's record was refused: made up"),
        "{err}"
    );
}

/// A ready message with an absurd run length is refused (before, the
/// coordinator computed a Duration from it and panicked).
#[test]
fn an_absurd_ready_is_refused() {
    let c = Coord::start_env(&["--agents", "1", "--ready-timeout", "3s"], &[]);
    let mut p = Peer::connect(c.port);
    assert_eq!(p.recv()["type"], "hello");
    p.send(&register(0, 1, None));
    assert_eq!(p.recv()["type"], "registered");
    p.send(
        &json!({"type": "ready", "offset_ms": 0.0, "rtt_ms": 0.1, "expected_s": 1e300,
                   "requests": u64::MAX}),
    );
    let r = p.recv();
    assert_eq!(r["type"], "abort", "{r}");
    assert!(
        r["reason"].as_str().unwrap().contains("absurd run length"),
        "{r}"
    );
    let (code, _, err) = c.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A coordinator written in the test that sends an absurd clock or start:
/// the agent says so in one line and exits 1 (before: a panic on
/// `start.at_ms`).
#[test]
fn a_hostile_coordinator_cannot_crash_an_agent() {
    for (pong, start) in [(1.0e12, 1.0e300), (-1.0e300, 0.0), (1.0e12, -5.0e12)] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let a = agent_env(0, 1, port, &[], &["http://127.0.0.1:9/", "-n", "10"]);
        let (s, _) = l.accept().unwrap();
        let mut p = Peer::from(s);
        p.send(&json!({"type": "hello", "nonce": "ab", "version": 1}));
        assert_eq!(p.recv()["type"], "register");
        p.send(&json!({"type": "registered"}));
        // Answer the clock probes with the (absurd) clock, then the start.
        for _ in 0..8 {
            let m = p.recv();
            if m["type"] != "ping" {
                break;
            }
            p.send(&json!({"type": "pong", "id": m["id"], "now_ms": pong}));
        }
        p.send(&json!({"type": "start", "at_ms": start}));
        let out = wait_limit(a, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{pong} {start}: {err}");
        assert!(err.contains("absurd"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A server that answers 100 requests and then never again, driven by one
/// agent at -r 100 for 3 s: the requests it never answered count in the
/// coordinator's merged verdict, so `errors<1%` FAILS (exit 4).
#[test]
fn unanswered_requests_fail_the_merged_verdict() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let answered = Arc::new(AtomicU64::new(0));
    let a2 = answered.clone();
    let srv = ScriptServer::start(move |mut s| {
        let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
        for _ in 0..10_000 {
            if read_head(&mut s).is_none() {
                return;
            }
            if a2.fetch_add(1, Ordering::SeqCst) < 100 {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        }
    });
    let url = srv.url();
    let c = Coord::start_env(&["--agents", "1", "--threshold", "errors<1%"], &[]);
    let a = agent_env(0, 1, c.port, &[], &[&url, "-r", "100", "-d", "3s"]);
    let out = wait_limit(a, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (m, err) = c.finish_record(4);
    assert_eq!(counter(&m, "completed"), 100, "{}", m["counters"]);
    let unanswered = counter(&m, "in_flight_at_end") + counter(&m, "not_sent");
    assert!(unanswered >= 100, "{}", m["counters"]);
    assert!(err.contains("FAIL") && err.contains("errors<1%"), "{err}");
    assert!(err.contains("requests never answered counted"), "{err}");
}
