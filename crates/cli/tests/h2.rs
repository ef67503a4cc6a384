//! HTTP/2: `--http2` (TLS, ALPN h2) and `--h2c` (cleartext, prior knowledge)
//! against an in-process h2 server that counts connections, streams and the
//! most streams open at once on a connection; a server that resets every 10th
//! stream; a raw-frame server that sends GOAWAY; Debian's nginx when installed.

mod common;

use common::nginx::{pki, start_nginx, Nginx, NginxSite, Pki};
use common::*;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the in-process server does with each stream.
#[derive(Clone, Copy)]
enum Behaviour {
    /// 200 with a 5-byte body after `delay`.
    Ok { delay: Duration },
    /// RST_STREAM(REFUSED_STREAM) for every 10th stream (counted server-wide), 200 otherwise.
    ResetEvery10th,
    /// Never answers (holds the stream until the server stops).
    Hang,
    /// 200 with a header value this long (the client's header-list limit is 256 KiB).
    HugeHeaders(usize),
    /// 200 after `service`, one stream at a time server-wide (a lock shared by
    /// all connections): about 1/service responses per second at any concurrency.
    Serialized(Duration),
}

#[derive(Default)]
struct Counts {
    connections: AtomicU64,
    streams: AtomicU64,
    /// Most streams open at once on one connection.
    max_concurrent: AtomicU64,
    /// HTTP/1.1 requests (TLS connections where ALPN picked http/1.1).
    h1_requests: AtomicU64,
    /// Streams open now, over all connections, and the most at once.
    open_total: AtomicU64,
    max_total: AtomicU64,
    /// `Behaviour::Serialized`'s one-at-a-time lock.
    gate: tokio::sync::Mutex<()>,
}

struct H2Server {
    addr: SocketAddr,
    counts: Arc<Counts>,
    stop: Arc<tokio::sync::Notify>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for H2Server {
    fn drop(&mut self) {
        self.stop.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl H2Server {
    /// Starts on 127.0.0.1:0; TLS (ALPN as given) when `tls` is set. Lives at most 60 s.
    fn start(tls: Option<Arc<rustls::ServerConfig>>, behaviour: Behaviour) -> H2Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(tokio::sync::Notify::new());
        let (c2, s2) = (counts.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                // A server that offers http/1.1 by ALPN speaks it to clients
                // that do not pick h2.
                let acceptor_alpn_h1 = tls
                    .as_ref()
                    .is_some_and(|c| c.alpn_protocols.iter().any(|p| p == b"http/1.1"));
                let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
                let lifetime = tokio::time::sleep(Duration::from_secs(60));
                tokio::pin!(lifetime);
                loop {
                    let sock = tokio::select! {
                        r = listener.accept() => match r { Ok((s, _)) => s, Err(_) => continue },
                        _ = s2.notified() => break,
                        _ = &mut lifetime => break,
                    };
                    c2.connections.fetch_add(1, Ordering::SeqCst);
                    let (counts, acceptor) = (c2.clone(), acceptor.clone());
                    tokio::spawn(async move {
                        match acceptor {
                            Some(a) => {
                                if let Ok(s) = a.accept(sock).await {
                                    let alpn = s.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
                                    if alpn.is_none_or(|p| p != b"h2") && acceptor_alpn_h1 {
                                        serve_h1(s, counts).await;
                                    } else {
                                        serve_conn(s, counts, behaviour).await;
                                    }
                                }
                            }
                            None => serve_conn(sock, counts, behaviour).await,
                        }
                    });
                }
            });
        });
        H2Server {
            addr,
            counts,
            stop,
            thread: Some(thread),
        }
    }

    fn streams(&self) -> u64 {
        self.counts.streams.load(Ordering::SeqCst)
    }
    fn connections(&self) -> u64 {
        self.counts.connections.load(Ordering::SeqCst)
    }
    fn max_concurrent(&self) -> u64 {
        self.counts.max_concurrent.load(Ordering::SeqCst)
    }
    fn h1_requests(&self) -> u64 {
        self.counts.h1_requests.load(Ordering::SeqCst)
    }
    /// Most streams open at once over all connections.
    fn max_total(&self) -> u64 {
        self.counts.max_total.load(Ordering::SeqCst)
    }
}

/// HTTP/1.1 keep-alive on a connection where ALPN picked http/1.1: 200 "hello".
async fn serve_h1<T>(mut io: T, counts: Arc<Counts>)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    for _ in 0..1_000_000 {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match io.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if buf.len() > 65536 {
                return;
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        buf.drain(..end);
        counts.h1_requests.fetch_add(1, Ordering::SeqCst);
        let resp = b"HTTP/1.1 200 OK\r\nServer: h1-test\r\nContent-Length: 5\r\n\r\nhello";
        if io.write_all(resp).await.is_err() || io.flush().await.is_err() {
            return;
        }
    }
}

async fn serve_conn<T>(io: T, counts: Arc<Counts>, behaviour: Behaviour)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(mut conn) = h2::server::handshake(io).await else {
        return;
    };
    let open = Arc::new(AtomicU64::new(0));
    while let Some(Ok((req, mut respond))) = conn.accept().await {
        let n = counts.streams.fetch_add(1, Ordering::SeqCst) + 1;
        let now_open = open.fetch_add(1, Ordering::SeqCst) + 1;
        counts.max_concurrent.fetch_max(now_open, Ordering::SeqCst);
        let total = counts.open_total.fetch_add(1, Ordering::SeqCst) + 1;
        counts.max_total.fetch_max(total, Ordering::SeqCst);
        let open = open.clone();
        let counts = counts.clone();
        tokio::spawn(async move {
            drop(req);
            match behaviour {
                Behaviour::Hang => {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    drop(respond);
                }
                Behaviour::HugeHeaders(len) => {
                    let resp = http::Response::builder()
                        .status(200)
                        .header("x-big", "a".repeat(len))
                        .body(())
                        .unwrap();
                    let _ = respond.send_response(resp, true);
                }
                Behaviour::ResetEvery10th if n.is_multiple_of(10) => {
                    respond.send_reset(h2::Reason::REFUSED_STREAM);
                }
                Behaviour::Ok { .. } | Behaviour::ResetEvery10th | Behaviour::Serialized(_) => {
                    if let Behaviour::Ok { delay } = behaviour {
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                    }
                    if let Behaviour::Serialized(service) = behaviour {
                        let _one_at_a_time = counts.gate.lock().await;
                        tokio::time::sleep(service).await;
                    }
                    let resp = http::Response::builder()
                        .status(200)
                        .header("server", "h2-test")
                        .body(())
                        .unwrap();
                    if let Ok(mut tx) = respond.send_response(resp, false) {
                        let _ = tx.send_data(bytes::Bytes::from_static(b"hello"), true);
                    }
                }
            }
            open.fetch_sub(1, Ordering::SeqCst);
            counts.open_total.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

fn server_tls(p: &Pki, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        p.chain.clone(),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(p.key_der.clone())),
    )
    .unwrap();
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    Arc::new(cfg)
}

/// The record of an HTTP/2 run (version "2", streams, the new error kinds) fits the committed schema.
fn assert_schema(v: &serde_json::Value) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/run-record.schema.json"
    );
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("redline-h2-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn closed_loop_exact_count_connections_and_streams_over_tls() {
    let p = pki();
    let srv = H2Server::start(
        Some(server_tls(&p, &[b"h2"])),
        Behaviour::Ok {
            delay: Duration::from_millis(5),
        },
    );
    let dir = temp_dir("tls");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &p.ca_pem).unwrap();
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());
    let v = run_json(&[
        "--http2",
        "--cacert",
        ca.to_str().unwrap(),
        "-n",
        "1000",
        "-c",
        "4",
        "--streams",
        "10",
        &url,
    ]);
    assert_eq!(counter(&v, "completed"), 1000, "{}", v["errors"]);
    assert_eq!(counter(&v, "failed"), 0);
    assert_eq!(srv.streams(), 1000, "the server saw exactly -n streams");
    // The 4 of the run, and the one handshake that checks the certificate
    // before any worker starts (no request on it).
    assert_eq!(srv.connections(), 5);
    assert_eq!(counter(&v, "connections_opened"), 4);
    assert_eq!(
        srv.max_concurrent(),
        10,
        "10 streams at once on a connection, never more"
    );
    assert_eq!(v["config"]["http_version"], "2");
    assert_eq!(v["config"]["streams"], 10);
    assert_eq!(v["tls"]["count"], 4, "one TLS handshake per connection");
    assert_eq!(v["server"]["software"], "h2-test");
    assert_eq!(counter(&v, "body_bytes"), 5000);
    assert!(counter(&v, "bytes_read") > 5000);
    assert_eq!(v["status_codes"]["200"], 1000);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn h2c_open_loop_rate_and_text_header() {
    let srv = H2Server::start(
        None,
        Behaviour::Ok {
            delay: Duration::ZERO,
        },
    );
    let url = format!("http://127.0.0.1:{}/", srv.addr.port());
    let (out, took) = redline_with_limit(
        &[
            "run",
            "-o",
            "json",
            "-q",
            "--h2c",
            "-r",
            "200",
            "-d",
            "2s",
            "--streams",
            "4",
            &url,
        ],
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // 200 req/s for 2 s: exactly 400 sends scheduled, all answered.
    assert_eq!(counter(&v, "scheduled"), 400);
    // Every stream the server saw is accounted for: answered, failed, or still
    // out when the drain after the deadline ended (a host stealing the CPU can
    // hold one past it).
    assert_eq!(
        counter(&v, "completed") + counter(&v, "failed") + counter(&v, "in_flight_at_end"),
        srv.streams(),
        "{}",
        v["counters"]
    );
    assert!(counter(&v, "completed") >= 395, "{}", v["counters"]);
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert!(v["scheduler_lag"]["count"].as_u64().unwrap() > 0);

    // The text report names the protocol and the streams.
    let out = redline(&["run", "-q", "--h2c", "-n", "20", "-c", "1", &url]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("HTTP/2"), "{text}");
    assert!(text.contains("1 stream per connection"), "{text}");
}

#[test]
fn h2c_client_frozen_past_its_deadline_accounts_for_every_planned_send() {
    let srv = H2Server::start(
        None,
        Behaviour::Ok {
            delay: Duration::ZERO,
        },
    );
    let url = format!("http://127.0.0.1:{}/", srv.addr.port());
    // Frozen from 1.5 s to 3 s: the 2 s deadline passes with about 100
    // sends still to release; they are planned, so scheduled and not sent.
    let v = run_json_frozen(
        &["--h2c", "-r", "200", "-d", "2s", &url],
        Duration::from_millis(1500),
        Duration::from_millis(1500),
    );
    assert_planned_sends_accounted(&v, 400, 50);
}

#[test]
fn stream_resets_are_their_own_error_kind() {
    let srv = H2Server::start(None, Behaviour::ResetEvery10th);
    let url = format!("http://127.0.0.1:{}/", srv.addr.port());
    let v = run_json(&["--h2c", "-n", "200", "-c", "2", "--streams", "5", &url]);
    // REFUSED_STREAM means "not processed": each refused request is sent
    // once more (a new stream, so the server's count grows by the retries);
    // refused again, it fails as `stream_reset`. Which requests the server's
    // every-10th rule hits a second time depends on the interleaving, but
    // the sums are exact: every 10th stream was refused, once or twice.
    let retried = counter(&v, "retried");
    let failed = error_count(&v, "stream_reset");
    assert!(retried > 0, "{}", v["counters"]);
    assert_eq!(srv.streams(), 200 + retried);
    assert_eq!(retried + failed, srv.streams() / 10, "{}", v["counters"]);
    assert_eq!(counter(&v, "failed"), failed, "{}", v["errors"]);
    assert_eq!(counter(&v, "completed"), 200 - failed);
    assert_eq!(counter(&v, "sent"), 200, "a retried request is sent once");
    if failed > 0 {
        let msg = v["errors"][0]["message"].as_str().unwrap();
        assert!(msg.contains("REFUSED_STREAM"), "{msg}");
    }
    // A reset stream does not cost the connection.
    assert_eq!(srv.connections(), 2);
    assert_schema(&v);
}

#[test]
fn unanswered_streams_time_out_and_the_run_ends_on_time() {
    let srv = H2Server::start(None, Behaviour::Hang);
    let url = format!("http://127.0.0.1:{}/", srv.addr.port());
    let (out, took) = redline_with_limit(
        &[
            "run",
            "-o",
            "json",
            "-q",
            "--h2c",
            "-d",
            "1s",
            "-c",
            "1",
            "--streams",
            "3",
            "--timeout",
            "300ms",
            &url,
        ],
        Duration::from_secs(30),
    );
    // No answer at all: exit 1 with one line, the record still printed.
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no request was answered"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Three streams time out every 300 ms (the stream is reset, not the
    // connection), never a completion, and nothing else goes wrong.
    let t = error_count(&v, "timeout");
    assert!(t >= 3, "{}", v["errors"]);
    assert_eq!(counter(&v, "failed"), t, "{}", v["errors"]);
    assert_eq!(counter(&v, "completed"), 0);
    assert_eq!(
        srv.connections(),
        1,
        "a timed-out stream does not cost the connection"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn oversized_response_headers_fail_with_memory_bounded() {
    // Just over the limit (the stream is refused) and far over it (the connection goes).
    for len in [300 << 10, 4 << 20] {
        let srv = H2Server::start(None, Behaviour::HugeHeaders(len));
        let url = format!("http://127.0.0.1:{}/", srv.addr.port());
        let v = run_json(&["--h2c", "-n", "20", "-c", "2", "--streams", "2", &url]);
        assert_eq!(counter(&v, "completed"), 0);
        assert_eq!(error_count(&v, "malformed"), 20, "{len}: {}", v["errors"]);
        let sub = if len > 1 << 20 {
            "head_too_large"
        } else {
            "header"
        };
        assert_eq!(v["errors"][0]["sub"], sub, "{}", v["errors"]);
        assert!(counter(&v, "bytes_read") > 256 << 10, "{}", v["counters"]);
    }
}

// ------------------------------------------------------------------ GOAWAY

/// Reads one HTTP/2 frame: (type, flags, stream id, payload).
fn read_frame(s: &mut std::net::TcpStream) -> Option<(u8, u8, u32, Vec<u8>)> {
    let mut h = [0u8; 9];
    s.read_exact(&mut h).ok()?;
    let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
    if len > 1 << 20 {
        return None;
    }
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).ok()?;
    let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
    Some((h[3], h[4], id, payload))
}

fn frame(ty: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[ty, flags]);
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A raw server's side of the connection preface: reads the client's, sends
/// empty SETTINGS (reads are bounded by a 3 s time-out). False: not HTTP/2.
fn raw_accept(s: &mut std::net::TcpStream) -> bool {
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    let mut preface = [0u8; 24];
    if s.read_exact(&mut preface).is_err() || &preface[..3] != b"PRI" {
        return false;
    }
    s.write_all(&frame(4, 0, 0, &[])).is_ok()
}

/// A raw server closes: FIN, then reads until the client closes (bounded).
fn raw_close(s: &mut std::net::TcpStream) {
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 4096];
    for _ in 0..10_000 {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

/// GOAWAY(NO_ERROR) naming `last` as the last stream processed.
fn goaway(last: u32) -> Vec<u8> {
    let mut ga = last.to_be_bytes().to_vec();
    ga.extend_from_slice(&0u32.to_be_bytes());
    frame(7, 0, 0, &ga)
}

/// HEADERS `:status 200` (static table index 8), then DATA "hello" ending stream `id`.
fn ok_hello(id: u32) -> Vec<u8> {
    let mut out = frame(1, 4, id, &[0x88]);
    out.extend(frame(0, 1, id, b"hello"));
    out
}

/// A raw HTTP/2 server (no h2 crate, so the test decides the last stream id):
/// it waits for 10 requests on a connection (or 500 ms without one once the
/// first came), sends GOAWAY(NO_ERROR) naming the `serve`th as the last it
/// will process (0: none), answers those, and closes.
fn goaway_server(serve: usize) -> ScriptServer {
    ScriptServer::start(move |mut s| {
        if !raw_accept(&mut s) {
            return;
        }
        let mut ids = Vec::new();
        let start = Instant::now();
        while ids.len() < 10 && start.elapsed() < Duration::from_secs(3) {
            let Some((ty, flags, id, _)) = read_frame(&mut s) else {
                break;
            };
            match ty {
                4 if flags & 1 == 0 => {
                    let _ = s.write_all(&frame(4, 1, 0, &[]));
                }
                1 => {
                    ids.push(id);
                    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                }
                _ => {}
            }
        }
        if ids.is_empty() {
            return;
        }
        let last = match serve {
            0 => 0,
            n => ids[(n - 1).min(ids.len() - 1)],
        };
        let mut out = goaway(last);
        for &id in ids.iter().filter(|&&id| id <= last) {
            out.extend(ok_hello(id));
        }
        let _ = s.write_all(&out);
        raw_close(&mut s);
    })
}

/// Every scheduled request ended exactly once.
fn assert_every_request_ends_once(v: &serde_json::Value) {
    let c = &v["counters"];
    let ended = ["completed", "failed", "in_flight_at_end", "not_sent"]
        .iter()
        .map(|k| c[k].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(
        ended,
        counter(v, "scheduled"),
        "every request ends once: {c}"
    );
}

/// A server that allows no stream at all (SETTINGS_MAX_CONCURRENT_STREAMS
/// 0) and never changes its mind: a request that waits for a stream fails
/// as `no_stream` one `--timeout` after it was sent (the first may have left
/// before the server's SETTINGS came, and then times out as any unanswered
/// request), the run ends then, and a warning names the setting (issue 36).
#[test]
fn a_server_allowing_no_stream_ends_the_run_on_time_with_its_own_error() {
    let srv = ScriptServer::start(|mut s| {
        let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
        let mut preface = [0u8; 24];
        if s.read_exact(&mut preface).is_err() {
            return;
        }
        // SETTINGS: MAX_CONCURRENT_STREAMS (0x3) = 0.
        let _ = s.write_all(&frame(4, 0, 0, &[0, 3, 0, 0, 0, 0]));
        for _ in 0..100 {
            let Some((ty, flags, _, _)) = read_frame(&mut s) else {
                return;
            };
            if ty == 4 && flags & 1 == 0 {
                let _ = s.write_all(&frame(4, 1, 0, &[]));
            }
        }
    });
    let url = format!("http://{}/", srv.addr);
    let (out, took) = redline_with_limit(
        &[
            "run",
            "-o",
            "json",
            "-q",
            "--no-save",
            "--h2c",
            "-n",
            "2",
            "-c",
            "1",
            "--timeout",
            "300ms",
            &url,
        ],
        Duration::from_secs(30),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "nothing was answered");
    let no_stream = error_count(&v, "no_stream");
    assert!(no_stream >= 1, "{}", v["errors"]);
    assert_eq!(no_stream + error_count(&v, "timeout"), 2, "{}", v["errors"]);
    assert_eq!(counter(&v, "failed"), 2, "{}", v["counters"]);
    // One request at a time, each given up after its --timeout (the
    // accounting itself is `core/tests.rs`'s): 0.6 s, not more.
    assert!(took < Duration::from_secs(5), "{took:?}");
    let w = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "no_stream")
        .unwrap_or_else(|| panic!("no 'no_stream' warning: {}", v["warnings"]));
    assert!(
        w["message"]
            .as_str()
            .unwrap()
            .contains("SETTINGS_MAX_CONCURRENT_STREAMS"),
        "{w}"
    );
}

#[test]
fn goaway_is_counted_and_the_connection_replaced() {
    let srv = goaway_server(5);
    let url = format!("http://{}/", srv.addr);
    // Each connection: 10 streams sent, 5 served, 5 refused by GOAWAY. The
    // refused ones were not processed (RFC 9113 §8.7): the next connection
    // sends them first (oldest first: its streams 1-9, which the server
    // serves) and 5 new ones (refused in turn). So connection 1 takes 10 new
    // requests, connections 2-19 take 5 each (100 in all), and connection 20
    // carries only the last 5 retries (the server serves all 5 it got).
    let v = run_json(&["--h2c", "-n", "100", "-c", "1", "--streams", "10", &url]);
    assert_eq!(counter(&v, "completed"), 100, "{}", v["errors"]);
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert_eq!(counter(&v, "retried"), 95, "{}", v["counters"]);
    assert_eq!(counter(&v, "scheduled"), 100);
    assert_eq!(counter(&v, "sent"), 100, "a retried request is sent once");
    assert_eq!(counter(&v, "connections_opened"), 20);
    assert_eq!(srv.accepted.load(Ordering::SeqCst), 20);
    assert_every_request_ends_once(&v);
    assert_schema(&v);
    // The text report says how many were sent again (-n 20: connection 1
    // takes 10, 2 and 3 take 5 new each, 4 only the last 5 retries).
    let out = redline(&[
        "run",
        "-q",
        "--h2c",
        "-n",
        "20",
        "-c",
        "1",
        "--streams",
        "10",
        &url,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("Retried after GOAWAY/REFUSED_STREAM: 15 "),
        "{text}"
    );

    // A server that refuses everything: each request is sent twice, and the
    // second refusal is a `goaway` failure with the server's reason.
    let none = goaway_server(0);
    let url0 = format!("http://{}/", none.addr);
    let v = run_json(&["--h2c", "-n", "10", "-c", "1", "--streams", "10", &url0]);
    assert_eq!(counter(&v, "completed"), 0, "{}", v["errors"]);
    assert_eq!(error_count(&v, "goaway"), 10, "{}", v["errors"]);
    assert_eq!(counter(&v, "retried"), 10, "{}", v["counters"]);
    assert_eq!(counter(&v, "connections_opened"), 2);
    assert_eq!(none.accepted.load(Ordering::SeqCst), 2);
    let msg = v["errors"][0]["message"].as_str().unwrap();
    assert!(msg.contains("GOAWAY (NO_ERROR)"), "{msg}");
    assert_every_request_ends_once(&v);
    assert_schema(&v);
}

// ---------------------------------------------------------------- bad input

#[test]
fn http2_without_h2_on_the_server_and_bad_flags() {
    // TLS without ALPN h2: a clear error, exit code 1.
    let p = pki();
    let srv = H2Server::start(
        Some(server_tls(&p, &[])),
        Behaviour::Ok {
            delay: Duration::ZERO,
        },
    );
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());
    let out = redline(&["run", "-q", "--http2", "--insecure", "-n", "10", &url]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did not offer HTTP/2"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    // --h2c against an HTTP/1-only server: the same, with what to do instead.
    let h1 = ScriptServer::start(|mut s| {
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        let _ = s.write_all(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    });
    let out = redline(&["run", "-q", "--h2c", "-n", "10", "-c", "2", &h1.url()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("answered in HTTP/1"), "{err}");
    assert!(err.contains("without --h2c"), "{err}");

    for (args, want) in [
        (vec!["--h2c", "https://127.0.0.1:1/"], "--h2c"),
        (vec!["--http2", "http://127.0.0.1:1/"], "https://"),
        (
            vec!["--h2c", "--streams", "0", "http://127.0.0.1:1/"],
            "--streams",
        ),
        (vec!["--streams", "4", "http://127.0.0.1:1/"], "--streams"),
        (
            vec!["--h2c", "--http1.0", "http://127.0.0.1:1/"],
            "--http1.0",
        ),
        (vec!["--http2", "--h2c", "https://127.0.0.1:1/"], "--h2c"),
    ] {
        let mut a = vec!["run", "-q"];
        a.extend_from_slice(&args);
        let out = redline(&a);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn secrets_stay_out_over_http2() {
    let srv = H2Server::start(
        None,
        Behaviour::Ok {
            delay: Duration::ZERO,
        },
    );
    let url = format!("http://user:hunter2@127.0.0.1:{}/", srv.addr.port());
    let out = redline(&[
        "run",
        "-o",
        "json",
        "-q",
        "--h2c",
        "-n",
        "5",
        "-H",
        "Authorization: Bearer s3cr3t-token",
        "-H",
        "Cookie: sid=c00kie",
        &url,
    ]);
    assert!(out.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for s in ["hunter2", "s3cr3t-token", "c00kie"] {
        assert!(!all.contains(s), "{s} leaked");
    }
    assert_eq!(srv.streams(), 5);
}

// -------------------------------------------------------------------- nginx

#[test]
fn nginx_over_tls_with_http2() {
    let p = pki();
    let files = [("index.html", vec![b'x'; 1000])];
    let Some(ng) = start_nginx(&NginxSite {
        tag: "h2",
        files: &files,
        tls: Some(&p),
        h2: true,
        http_extra: "",
        types: "",
    }) else {
        return;
    };
    let dir = temp_dir("nginx-ca");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &p.ca_pem).unwrap();
    let url = format!("https://127.0.0.1:{}/", ng.port);
    let v = run_json(&[
        "--http2",
        "--cacert",
        ca.to_str().unwrap(),
        "-n",
        "500",
        "-c",
        "2",
        "--streams",
        "8",
        &url,
    ]);
    assert_eq!(counter(&v, "completed"), 500, "{}", v["errors"]);
    assert_eq!(counter(&v, "body_bytes"), 500 * 1000);
    assert_eq!(counter(&v, "connections_opened"), 2);
    assert!(v["server"]["software"]
        .as_str()
        .unwrap()
        .starts_with("nginx"));
    // Without --http2 nginx picks h2 by ALPN, so the run uses HTTP/2 ...
    let v = run_json(&[
        "--cacert",
        ca.to_str().unwrap(),
        "-n",
        "20",
        "-c",
        "2",
        &url,
    ]);
    assert_eq!(counter(&v, "completed"), 20, "{}", v["errors"]);
    assert_eq!(v["config"]["http_version"], "2");
    assert_eq!(v["config"]["negotiated"], "HTTP/2 (negotiated by ALPN)");
    // ... and --http1.1 tests the same server over HTTP/1.1.
    let v = run_json(&[
        "--http1.1",
        "--cacert",
        ca.to_str().unwrap(),
        "-n",
        "20",
        "-c",
        "2",
        &url,
    ]);
    assert_eq!(counter(&v, "completed"), 20, "{}", v["errors"]);
    assert_eq!(v["config"]["http_version"], "1.1");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn https_uses_http2_when_the_server_picks_it_by_alpn() {
    let p = pki();
    let srv = H2Server::start(
        Some(server_tls(&p, &[b"h2", b"http/1.1"])),
        Behaviour::Ok {
            delay: Duration::ZERO,
        },
    );
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());
    // No flag: one probe handshake, then HTTP/2 (many streams per connection).
    let v = run_json(&["--insecure", "-n", "200", "-c", "2", &url]);
    assert_eq!(counter(&v, "completed"), 200, "{}", v["errors"]);
    assert_eq!(v["config"]["http_version"], "2");
    assert_eq!(v["config"]["negotiated"], "HTTP/2 (negotiated by ALPN)");
    assert_eq!(srv.streams(), 200);
    assert_eq!(srv.h1_requests(), 0);
    assert_eq!(srv.connections(), 3, "2 connections and the probe");
    assert!(srv.streams() > srv.connections());
    assert_schema(&v);
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "--insecure",
        "-n",
        "5",
        "-c",
        "1",
        &url,
    ]);
    assert!(out.status.success());
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("HTTP/2 (negotiated by ALPN)"), "{t}");

    // --http1.1: HTTP/1.1 even though h2 is offered, and no probe.
    let before = srv.connections();
    let v = run_json(&["--insecure", "--http1.1", "-n", "50", "-c", "2", &url]);
    assert_eq!(counter(&v, "completed"), 50, "{}", v["errors"]);
    assert_eq!(v["config"]["http_version"], "1.1");
    assert_eq!(v["config"].get("negotiated"), None);
    assert_eq!(srv.h1_requests(), 50);
    assert_eq!(srv.streams(), 205, "no HTTP/2 stream more");
    // The run's 2, and the one handshake before any worker that checks the
    // server speaks TLS with a certificate it can use (no ALPN probe).
    assert_eq!(srv.connections() - before, 3);

    // -L runs over HTTP/2 now: no note, streams, not HTTP/1.1 requests.
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "--insecure",
        "-L",
        "-n",
        "10",
        "-c",
        "1",
        &url,
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("note:"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["negotiated"], "HTTP/2 (negotiated by ALPN)");
    assert_eq!(srv.h1_requests(), 50);
    assert_eq!(srv.streams(), 215);

    // A server that only speaks HTTP/1.1 over TLS: HTTP/1.1, no note.
    let h1 = H2Server::start(
        Some(server_tls(&p, &[b"http/1.1"])),
        Behaviour::Ok {
            delay: Duration::ZERO,
        },
    );
    let url = format!("https://127.0.0.1:{}/", h1.addr.port());
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "--insecure",
        "-n",
        "10",
        &url,
    ]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("note"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["http_version"], "1.1");
    assert_eq!(h1.h1_requests(), 10);
    assert_eq!(h1.streams(), 0);
}

#[test]
fn redirect_from_http_to_an_https_origin() {
    let p = pki();
    let b = H2Server::start(
        Some(server_tls(&p, &[b"http/1.1"])),
        Behaviour::Ok {
            delay: Duration::ZERO,
        },
    );
    let to = format!("https://127.0.0.1:{}/secure", b.addr.port());
    let (a, a_seen) = routed_server(move |_, _| {
        format!("HTTP/1.1 301 Moved\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n").into_bytes()
    });
    let dir = temp_dir("redirect");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &p.ca_pem).unwrap();
    // The new origin gets its own TLS session, verified with --cacert.
    let v = run_json(&[
        "-L",
        "--cacert",
        ca.to_str().unwrap(),
        "-n",
        "10",
        "-c",
        "1",
        &a.url(),
    ]);
    assert_eq!(v["status_codes"]["200"], 10, "{}", v["errors"]);
    assert_eq!(counter(&v, "redirects"), 10);
    assert_eq!(
        v["tls"]["count"], 10,
        "one handshake per hop to the https origin"
    );
    assert_eq!(b.h1_requests(), 10);
    assert_eq!(a_seen.lock().unwrap().len(), 10);
    // Without the CA the hop fails as a certificate error, counted per request.
    let v = run_json(&["-L", "-n", "3", "-c", "1", &a.url()]);
    assert_eq!(error_count(&v, "tls"), 3, "{}", v["errors"]);
    assert_eq!(b.h1_requests(), 10);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--abort-on-fail` over HTTP/2: the worker hands its finished seconds to the
/// judge as the HTTP/1 worker does, so a 20 ms server that can never meet
/// p99<5ms stops a 20 s h2c run early with exit 4 (before, the run went the
/// whole 20 s: the HTTP/2 worker never passed a second on).
#[test]
fn abort_on_fail_stops_an_http2_run_early() {
    let srv = H2Server::start(
        None,
        Behaviour::Ok {
            delay: Duration::from_millis(20),
        },
    );
    let url = format!("http://127.0.0.1:{}/", srv.addr.port());
    let (out, took) = redline_with_limit(
        &[
            "run",
            "-q",
            "--no-save",
            "--h2c",
            "-d",
            "20s",
            "-c",
            "2",
            "--threshold",
            "p99<5ms",
            "--abort-on-fail",
            &url,
        ],
        Duration::from_secs(40),
    );
    let t = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{t}");
    assert!(
        t.contains("aborted: threshold 'p99<5ms' can no longer pass"),
        "{t}"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

// ------------------------------------------- stages, rate stages, -L, find

/// `--stages` over h2c with `--streams 4`: a level counts concurrent streams
/// (h2load's -c × -m), on ⌈level/4⌉ connections. Steps of 1, 2, 4 and 8
/// streams over a server that answers one stream at a time (20 ms each):
/// throughput stays at ~50/s, so the knee is at 1 stream; the server saw 8
/// streams at once on 2 connections.
#[test]
fn stages_over_h2c_count_streams_and_find_the_knee() {
    timing_sensitive(3, || {
        let srv = H2Server::start(None, Behaviour::Serialized(Duration::from_millis(20)));
        let url = format!("http://127.0.0.1:{}/", srv.addr.port());
        let v = run_json(&[
            "--h2c",
            "--streams",
            "4",
            "-t",
            "1",
            "--stages",
            "1s:1,1s:2,1s:4,1s:8",
            "--step",
            "--no-save",
            &url,
        ]);
        assert_schema(&v);
        assert_eq!(v["config"]["http_version"], "2");
        assert_eq!(v["config"]["stages"]["unit"], "streams");
        assert_eq!(v["config"]["load"]["connections"], 2);
        let stages = v["stages"].as_array().unwrap();
        assert_eq!(stages.len(), 4, "{}", v["stages"]);
        for (s, level) in stages.iter().zip([1.0, 2.0, 4.0, 8.0]) {
            assert_eq!(s["level_to"].as_f64(), Some(level));
            let rps = s["requests_per_sec"].as_f64().unwrap();
            assert!((35.0..=55.0).contains(&rps), "{level}: {rps} req/s");
        }
        assert_eq!(srv.max_total(), 8, "8 streams in flight at the top step");
        assert_eq!(srv.connections(), 2, "⌈8/4⌉ connections");
        assert_eq!(counter(&v, "peak_connections"), 2);
        assert_eq!(v["knee"]["level"].as_f64(), Some(1.0), "{}", v["knee"]);
        assert_eq!(v["knee"]["unit"], "streams");
        assert_eq!(v["knee"]["reason"], "throughput");
        assert_eq!(counter(&v, "failed"), 0, "parked streams are no errors");
    });
}

/// The text report of an HTTP/2 staged run says streams, and the knee line too.
#[test]
fn staged_h2c_text_report_speaks_of_streams() {
    let srv = H2Server::start(None, Behaviour::Serialized(Duration::from_millis(20)));
    let url = format!("http://127.0.0.1:{}/", srv.addr.port());
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "--h2c",
        "--streams",
        "2",
        "-t",
        "1",
        "--stages",
        "1s:1,1s:3",
        "--step",
        &url,
    ]);
    assert!(out.status.success());
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("streams"), "{t}");
    assert!(
        t.contains("redline: the server stops scaling at 1 stream "),
        "{t}"
    );
    assert_eq!(srv.connections(), 2, "⌈3/2⌉ connections");
    assert_eq!(srv.max_total(), 3);
}

/// nginx's access log: port, protocol, connection serial, method, URI,
/// status, time, Authorization, Cookie.
const NGINX_LOG: &str = "log_format h2t '$server_port $server_protocol $connection \
     $request_method $request_uri $status $msec \"$http_authorization\" \"$http_cookie\"';\n  \
     access_log {d}/access.log h2t;\n  keepalive_requests 100000;";

/// nginx serving `files` over h2c (prior knowledge) with `http_extra` in its
/// `http` block (None: nginx missing, which fails under CI).
fn h2c_nginx(tag: &str, files: &[(&str, Vec<u8>)], http_extra: &str) -> Option<Nginx> {
    start_nginx(&NginxSite {
        tag,
        files,
        tls: None,
        h2: true,
        http_extra,
        types: "",
    })
}

/// One line of [`NGINX_LOG`].
struct Seen {
    port: u16,
    protocol: String,
    conn: u64,
    method: String,
    uri: String,
    status: u16,
    auth: String,
    msec: f64,
    cookie: String,
}

/// The access log, emptied so the next command starts from nothing.
fn take_nginx_log(dir: &std::path::Path) -> Vec<Seen> {
    let path = dir.join("access.log");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, "").unwrap();
    text.lines()
        .map(|l| {
            let (head, quoted) = l.split_once(" \"").unwrap();
            let q: Vec<&str> = quoted.split('"').collect();
            let f: Vec<&str> = head.split(' ').collect();
            Seen {
                port: f[0].parse().unwrap(),
                protocol: f[1].to_string(),
                conn: f[2].parse().unwrap(),
                method: f[3].to_string(),
                uri: f[4].to_string(),
                status: f[5].parse().unwrap(),
                msec: f[6].parse().unwrap(),
                auth: q[0].to_string(),
                cookie: q[2].to_string(),
            }
        })
        .collect()
}

fn distinct_conns<'a>(seen: impl Iterator<Item = &'a Seen>) -> usize {
    seen.map(|s| s.conn)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

/// `listen` for an nginx server speaking HTTP/2 (`listen … http2` before
/// nginx 1.25.1, `http2 on;` after).
fn h2_listen(port: u16) -> String {
    let new =
        common::nginx::nginx_bin().is_some_and(|b| common::nginx::nginx_version(&b) >= (1, 25, 1));
    if new {
        format!("listen 127.0.0.1:{port}; http2 on;")
    } else {
        format!("listen 127.0.0.1:{port} http2;")
    }
}

/// nginx over h2c (prior knowledge) as the oracle for `--stages`,
/// `--rate-stages`, `-L` and `find`: its access log shows every request came
/// as HTTP/2.0, on which connection, and what a redirect hop carried.
#[test]
fn nginx_h2c_runs_stages_rate_stages_redirects_and_find() {
    let files = [("index.html", vec![b'x'; 100])];
    // An https origin that speaks only HTTP/1.1.
    let h1_only = H2Server::start(
        Some(server_tls(&pki(), &[b"http/1.1"])),
        Behaviour::Ok {
            delay: Duration::ZERO,
        },
    );
    let p4 = h1_only.addr.port();
    // A second server (redirects) and a third (another origin).
    let (p2, p3) = (common::nginx::free_port(), common::nginx::free_port());
    let extra = format!(
        "{NGINX_LOG}\n  server {{ {} root {{d}}/site;\n    \
         location = /a {{ return 302 /b; }}\n    \
         location = /b {{ return 307 /index.html; }}\n    \
         location = /k {{ return 307 /index.html; }}\n    \
         location = /loop {{ return 302 /loop; }}\n    \
         location = /away {{ return 301 http://127.0.0.1:{p3}/index.html; }}\n    \
         location = /h1only {{ return 302 https://127.0.0.1:{p4}/; }}\n  }}\n  \
         server {{ {} root {{d}}/site; }}",
        h2_listen(p2),
        h2_listen(p3)
    );
    let Some(ng) = h2c_nginx("h2-modes", &files, &extra) else {
        return;
    };
    let main = format!("http://127.0.0.1:{}/index.html", ng.port);
    let redir = |path: &str| format!("http://127.0.0.1:{p2}{path}");

    // --stages: steps of 4 then 1 streams, 2 per connection.
    timing_sensitive(3, || {
        take_nginx_log(&ng.dir);
        let v = run_json(&[
            "--h2c",
            "--streams",
            "2",
            "-t",
            "1",
            "--stages",
            "1s:4,1s:1",
            "--step",
            "--no-save",
            &main,
        ]);
        let seen = take_nginx_log(&ng.dir);
        assert_eq!(seen.len() as u64, counter(&v, "completed"));
        assert!(seen
            .iter()
            .all(|s| s.protocol == "HTTP/2.0" && s.status == 200));
        assert_eq!(distinct_conns(seen.iter()), 2, "⌈4/2⌉ connections");
        assert_eq!(counter(&v, "peak_connections"), 2);
        assert_eq!(v["config"]["stages"]["unit"], "streams");
        let stages = v["stages"].as_array().unwrap();
        assert_eq!(stages.len(), 2);
        assert_eq!(stages[0]["level_to"].as_f64(), Some(4.0));
        assert_eq!(stages[1]["level_to"].as_f64(), Some(1.0));
        assert!(stages.iter().all(|s| s["requests"].as_u64() > Some(0)));
        // After the fall to 1 stream, one connection carries the requests.
        let t0 = seen.iter().map(|s| s.msec).fold(f64::MAX, f64::min);
        let late = seen
            .iter()
            .filter(|s| s.msec >= t0 + 1.3 && s.msec <= t0 + 1.9);
        assert_eq!(distinct_conns(late), 1, "the second connection closed");
        assert!(v["knee"].is_object() || v["knee"].is_null());
    });

    // --rate-stages: 50 then 100 req/s, open loop, all over HTTP/2.
    timing_sensitive(3, || {
        take_nginx_log(&ng.dir);
        let v = run_json(&[
            "--h2c",
            "-t",
            "1",
            "--rate-stages",
            "--stages",
            "1s:50,1s:100",
            "--step",
            "--no-save",
            &main,
        ]);
        let seen = take_nginx_log(&ng.dir);
        let c = |n: &str| counter(&v, n);
        assert!((149..=151).contains(&c("scheduled")), "{}", v["counters"]);
        assert_eq!(c("completed"), c("scheduled"), "{}", v["counters"]);
        assert_eq!(seen.len() as u64, c("completed"));
        assert!(seen.iter().all(|s| s.protocol == "HTTP/2.0"));
        assert_eq!(v["config"]["stages"]["unit"], "rps");
        assert_eq!(v["stages"].as_array().unwrap().len(), 2);
    });

    // -L: POST /a → 302 (a GET now) → /b → 307 (stays GET) → 200, one connection.
    take_nginx_log(&ng.dir);
    let v = run_json(&[
        "--h2c",
        "-L",
        "-n",
        "5",
        "-c",
        "1",
        "-m",
        "POST",
        "--body",
        "x",
        &redir("/a"),
    ]);
    assert_eq!(v["status_codes"]["200"], 5, "{}", v["errors"]);
    assert_eq!(counter(&v, "redirects"), 10);
    let seen = take_nginx_log(&ng.dir);
    let walk: Vec<(&str, &str, u16)> = seen
        .iter()
        .map(|s| (s.method.as_str(), s.uri.as_str(), s.status))
        .collect();
    assert_eq!(
        walk[..3],
        [
            ("POST", "/a", 302),
            ("GET", "/b", 307),
            ("GET", "/index.html", 200)
        ]
    );
    assert_eq!(seen.len(), 15);
    assert!(seen
        .iter()
        .all(|s| s.protocol == "HTTP/2.0" && s.port == p2));
    assert_eq!(
        distinct_conns(seen.iter()),
        1,
        "same-origin hops: same connection"
    );
    // 307 keeps the method (nginx answers a POST for a file with 405).
    let v = run_json(&[
        "--h2c",
        "-L",
        "-n",
        "2",
        "-c",
        "1",
        "-m",
        "POST",
        "--body",
        "x",
        &redir("/k"),
    ]);
    assert_eq!(v["status_codes"]["405"], 2, "{}", v["status_codes"]);
    let seen = take_nginx_log(&ng.dir);
    assert_eq!(seen[1].method, "POST");
    assert_eq!(seen[1].uri, "/index.html");
    // A loop ends as too_many_redirects after --max-redirs hops.
    let v = run_json(&[
        "--h2c",
        "-L",
        "--max-redirs",
        "3",
        "-n",
        "2",
        "-c",
        "1",
        &redir("/loop"),
    ]);
    assert_eq!(error_count(&v, "too_many_redirects"), 2, "{}", v["errors"]);
    assert_eq!(
        take_nginx_log(&ng.dir).len(),
        8,
        "the request and 3 hops, twice"
    );
    // Another origin: its own HTTP/2 connection, kept for the next hops there;
    // the Authorization header stays home.
    let v = run_json(&[
        "--h2c",
        "-L",
        "-H",
        "Authorization: Bearer s3cret-h2",
        "-n",
        "4",
        "-c",
        "1",
        &redir("/away"),
    ]);
    assert_eq!(v["status_codes"]["200"], 4, "{}", v["errors"]);
    assert_eq!(counter(&v, "connections_opened"), 2);
    assert!(!v.to_string().contains("s3cret-h2"));
    let seen = take_nginx_log(&ng.dir);
    assert_eq!(seen.len(), 8);
    for s in &seen {
        assert_eq!(s.protocol, "HTTP/2.0");
        if s.port == p2 {
            assert_eq!(s.auth, "Bearer s3cret-h2");
        } else {
            assert_eq!(
                (s.port, s.uri.as_str(), s.auth.as_str()),
                (p3, "/index.html", "-")
            );
        }
    }
    assert_eq!(distinct_conns(seen.iter().filter(|s| s.port == p3)), 1);
    // Open loop follows the same way.
    let v = run_json(&["--h2c", "-L", "-r", "50", "-n", "10", &redir("/a")]);
    assert_eq!(v["status_codes"]["200"], 10, "{}", v["errors"]);
    assert_eq!(counter(&v, "redirects"), 20);
    assert_eq!(take_nginx_log(&ng.dir).len(), 30);
    // A hop to an https origin that does not pick h2 takes HTTP/1.1 there
    // (the server's pick, as in a browser), on one kept-alive connection.
    let v = run_json(&[
        "--h2c",
        "-L",
        "--insecure",
        "-n",
        "3",
        "-c",
        "1",
        &redir("/h1only"),
    ]);
    assert_eq!(v["status_codes"]["200"], 3, "{}", v["errors"]);
    assert_eq!(h1_only.h1_requests(), 3);
    assert_eq!(h1_only.connections(), 1);
    assert_eq!(h1_only.streams(), 0);
    take_nginx_log(&ng.dir);

    // find over h2c: its steps are HTTP/2 runs.
    let out = redline(&[
        "find",
        "--h2c",
        "--slo",
        "errors<1%",
        "--start-rate",
        "20",
        "--max-steps",
        "2",
        "--warmup",
        "1s",
        "--step-duration",
        "1s",
        "-t",
        "1",
        "--no-save",
        &main,
    ]);
    // (A loaded host may make a step CLIENT-LIMITED: what matters here is
    // that every step's requests reached nginx as HTTP/2.)
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("PASS") || t.contains("CLIENT-LIMITED"), "{t}");
    let seen = take_nginx_log(&ng.dir);
    assert!(seen.len() >= 2 * 20 - 2, "{} requests: {t}", seen.len());
    assert!(seen.iter().all(|s| s.protocol == "HTTP/2.0"));
}

/// nginx over TLS: an https `--stages` run (and a `find`) takes HTTP/2 by
/// ALPN as a fixed-load run does; with one stream per connection a level is
/// connections, as over HTTP/1.1. So does a scenario whose host picks h2.
#[test]
fn nginx_tls_stages_and_find_use_http2_by_alpn() {
    let p = pki();
    let files = [("index.html", vec![b'x'; 100])];
    let extra = NGINX_LOG.to_string();
    let Some(ng) = start_nginx(&NginxSite {
        tag: "h2-tls-stages",
        files: &files,
        tls: Some(&p),
        h2: true,
        http_extra: &extra,
        types: "",
    }) else {
        return;
    };
    let ca = ng.dir.join("ca.pem");
    std::fs::write(&ca, &p.ca_pem).unwrap();
    let ca = ca.to_str().unwrap().to_string();
    let url = format!("https://127.0.0.1:{}/index.html", ng.port);
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "--cacert",
        &ca,
        "-t",
        "1",
        "--stages",
        "1s:1,1s:3",
        "--step",
        &url,
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("note:"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_schema(&v);
    assert_eq!(v["config"]["http_version"], "2");
    assert_eq!(v["config"]["negotiated"], "HTTP/2 (negotiated by ALPN)");
    assert_eq!(v["config"]["stages"]["unit"], "connections");
    assert_eq!(counter(&v, "peak_connections"), 3);
    let stages = v["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[1]["level_to"].as_f64(), Some(3.0));
    let seen = take_nginx_log(&ng.dir);
    assert_eq!(seen.len() as u64, counter(&v, "completed"));
    assert!(seen.iter().all(|s| s.protocol == "HTTP/2.0"));
    assert_eq!(distinct_conns(seen.iter()), 3, "the probe sends no request");

    // --http2 with --rate-stages over TLS.
    let v = run_json(&[
        "--http2",
        "--cacert",
        &ca,
        "-t",
        "1",
        "--rate-stages",
        "--step",
        "--stages",
        "1s:30",
        "--no-save",
        &url,
    ]);
    assert_eq!(counter(&v, "completed"), counter(&v, "scheduled"));
    assert!(counter(&v, "completed") >= 29, "{}", v["counters"]);
    assert!(take_nginx_log(&ng.dir)
        .iter()
        .all(|s| s.protocol == "HTTP/2.0"));

    // find: the first step's probe decides for every step.
    let out = redline(&[
        "find",
        "--cacert",
        &ca,
        "--slo",
        "errors<1%",
        "--start-rate",
        "20",
        "--max-steps",
        "1",
        "--warmup",
        "1s",
        "--step-duration",
        "1s",
        "-t",
        "1",
        "--no-save",
        &url,
    ]);
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("PASS") || t.contains("CLIENT-LIMITED"), "{t}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("note:"));
    let seen = take_nginx_log(&ng.dir);
    assert!(seen.len() >= 2 * 20 - 2, "{} requests: {t}", seen.len());
    assert!(seen.iter().all(|s| s.protocol == "HTTP/2.0"));

    // A scenario whose only host picks h2 runs over HTTP/2 too, no note.
    let dir = temp_dir("tls-scenario");
    let file = dir.join("s.toml");
    std::fs::write(&file, "name = \"s\"\n[[request]]\npath = \"/index.html\"\n").unwrap();
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "--cacert",
        &ca,
        "--scenario",
        file.to_str().unwrap(),
        "-n",
        "4",
        "-c",
        "1",
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("note:"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["negotiated"], "HTTP/2 (negotiated by ALPN)");
    assert_eq!(v["requests"][0]["completed"], 4);
    let seen = take_nginx_log(&ng.dir);
    assert_eq!(seen.len(), 4);
    assert!(seen.iter().all(|s| s.protocol == "HTTP/2.0"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// nginx ends each HTTP/2 connection with GOAWAY after `keepalive_requests`
/// (here 100), refusing the streams the client had already opened past it.
/// Those were not processed: redline sends them again on a new connection,
/// so a closed-loop run (and an open-loop one) ends with every request
/// answered once, and nginx's log has exactly one line per request.
#[test]
fn nginx_goaway_refusals_are_sent_again_and_nothing_is_lost() {
    let files = [("index.html", vec![b'x'; 100])];
    let extra = NGINX_LOG.replace("keepalive_requests 100000;", "keepalive_requests 100;");
    let Some(ng) = h2c_nginx("h2-goaway", &files, &extra) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/index.html", ng.port);
    // One worker with both connections, and two workers with one each: a
    // retry goes to a connection opened after the refusal either way.
    for threads in ["1", "2"] {
        take_nginx_log(&ng.dir);
        let v = run_json(&[
            "--h2c",
            "-n",
            "2000",
            "--streams",
            "10",
            "-c",
            "2",
            "-t",
            threads,
            &url,
        ]);
        let c = &v["counters"];
        assert_eq!(
            counter(&v, "completed"),
            2000,
            "-t {threads}: {c} {}",
            v["errors"]
        );
        assert_eq!(counter(&v, "failed"), 0, "-t {threads}: {}", v["errors"]);
        assert!(counter(&v, "retried") > 0, "-t {threads}: {c}");
        assert_eq!(counter(&v, "sent"), 2000, "-t {threads}: {c}");
        // 100 requests per connection: at least 20 connections.
        assert!(counter(&v, "connections_opened") >= 20, "-t {threads}: {c}");
        assert_every_request_ends_once(&v);
        let seen = take_nginx_log(&ng.dir);
        assert_eq!(
            seen.len(),
            2000,
            "-t {threads}: nginx served each request once"
        );
        assert!(seen
            .iter()
            .all(|s| s.protocol == "HTTP/2.0" && s.status == 200));
        assert!(seen.iter().all(|s| s.conn > 0));
        // nginx served at most 100 on any connection.
        let mut per_conn = std::collections::BTreeMap::new();
        for s in &seen {
            *per_conn.entry(s.conn).or_insert(0u32) += 1;
        }
        assert!(per_conn.values().all(|n| *n <= 100), "{per_conn:?}");
    }

    // Open loop: 2,000 sends at 2,000/s over 2 connections (at most 100
    // requests each on nginx's side): none fails, each reaches nginx once.
    take_nginx_log(&ng.dir);
    let v = run_json(&[
        "--h2c",
        "--rate",
        "2000",
        "-d",
        "1s",
        "--streams",
        "10",
        "-c",
        "2",
        &url,
    ]);
    let c = &v["counters"];
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert_every_request_ends_once(&v);
    let answered = counter(&v, "completed");
    assert!(answered > 0, "{c}");
    assert!(counter(&v, "connections_opened") >= answered / 100, "{c}");
    let seen = take_nginx_log(&ng.dir);
    assert_eq!(seen.len() as u64, answered, "{c}");

    // A session scenario (three steps per user, a user per stream): a step
    // refused unprocessed is sent again by its user on a newer connection,
    // and its per-request numbers count it once.
    let d = temp_dir("goaway-scenario");
    let sc = d.join("s.toml");
    std::fs::write(
        &sc,
        "mode = \"session\"\n[[step]]\nname = \"a\"\npath = \"/index.html?a\"\n\
         [[step]]\nname = \"b\"\npath = \"/index.html?b\"\n\
         [[step]]\nname = \"c\"\npath = \"/index.html?c\"\n",
    )
    .unwrap();
    take_nginx_log(&ng.dir);
    let v = run_json(&[
        "--h2c",
        "--scenario",
        sc.to_str().unwrap(),
        "-n",
        "1500",
        "--streams",
        "10",
        "-c",
        "2",
        &url,
    ]);
    let c = &v["counters"];
    assert_eq!(counter(&v, "completed"), 1500, "{c} {}", v["errors"]);
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert!(counter(&v, "retried") > 0, "{c}");
    assert_eq!(counter(&v, "sent"), 1500, "{c}");
    assert_every_request_ends_once(&v);
    let reqs = v["requests"].as_array().expect("per-request numbers");
    assert_eq!(reqs.len(), 3);
    let mut sent = 0;
    for r in reqs {
        assert_eq!(r["sent"], r["completed"], "{r}");
        assert_eq!(r["errors"], 0, "{r}");
        sent += r["sent"].as_u64().unwrap();
    }
    assert_eq!(sent, 1500, "{}", v["requests"]);
    let seen = take_nginx_log(&ng.dir);
    assert_eq!(seen.len(), 1500, "nginx served each step once");

    // Open-loop journeys (300 a second, three steps 20 ms apart): a journey
    // whose connection retires (GOAWAY after 100 requests) or whose step
    // was refused goes on over another connection, as over HTTP/1 (a
    // journey used to fail with its connection: 26 of 900 here).
    std::fs::write(
        &sc,
        "mode = \"session\"\n[[step]]\nname = \"a\"\npath = \"/index.html?a\"\nthink = \"20ms\"\n\
         [[step]]\nname = \"b\"\npath = \"/index.html?b\"\nthink = \"20ms\"\n\
         [[step]]\nname = \"c\"\npath = \"/index.html?c\"\n",
    )
    .unwrap();
    take_nginx_log(&ng.dir);
    let v = run_json(&[
        "--h2c",
        "--scenario",
        sc.to_str().unwrap(),
        "--rate",
        "300",
        "-d",
        "2s",
        "--streams",
        "10",
        "-c",
        "2",
        &url,
    ]);
    let c = &v["counters"];
    let j = &v["journeys"];
    assert_eq!(counter(&v, "failed"), 0, "{c} {j} {}", v["errors"]);
    assert_every_request_ends_once(&v);
    let answered = counter(&v, "completed");
    assert!(counter(&v, "connections_opened") >= answered / 100, "{c}");
    // Enough for several GOAWAYs even on a loaded CI host (arrivals that
    // find every stream busy wait, and may not start before the end).
    assert!(answered >= 600, "{c} {j}");
    assert_eq!(j["abandoned_error"], 0, "{j}");
    assert_eq!(j["started"], j["arrived"], "{j}");
    let ended = ["completed", "abandoned", "in_flight_at_end"]
        .map(|k| j[k].as_u64().unwrap())
        .iter()
        .sum::<u64>();
    assert_eq!(ended, j["started"].as_u64().unwrap(), "{j}");
    let reqs = v["requests"].as_array().expect("per-request numbers");
    let sent: u64 = reqs.iter().map(|r| r["sent"].as_u64().unwrap()).sum();
    assert_eq!(sent, counter(&v, "sent"), "{}", v["requests"]);
    let seen = take_nginx_log(&ng.dir);
    assert_eq!(seen.len() as u64, answered, "nginx served each step once");
}

/// `--scenario` over h2c against nginx: sessions (a user per stream, a CSV
/// row each), the cookie jar, JSON extraction, checks, a second host over the
/// stream's own connection there, `-L` inside a step, think time. nginx's
/// log shows what each request carried.
#[test]
fn nginx_h2c_runs_a_scenario() {
    let files = [("index.html", vec![b'x'; 100])];
    let (p2, p3) = (common::nginx::free_port(), common::nginx::free_port());
    let extra = format!(
        "{NGINX_LOG}\n  server {{ {} root {{d}}/site;\n    \
         location = /login {{ add_header Set-Cookie \"sid=s-$arg_user; Path=/\"; \
         default_type application/json; return 200 '{{\"token\":\"t-$arg_user\"}}'; }}\n    \
         location = /account {{ default_type text/plain; \
         if ($cookie_sid = \"\") {{ return 403 \"no session\"; }} \
         return 200 \"welcome $cookie_sid $arg_token\"; }}\n    \
         location = /a {{ return 302 /index.html; }}\n  }}\n  \
         server {{ {} root {{d}}/site; }}",
        h2_listen(p2),
        h2_listen(p3)
    );
    let Some(ng) = h2c_nginx("h2-scenario", &files, &extra) else {
        return;
    };
    let dir = temp_dir("h2c-scenario");
    std::fs::write(dir.join("users.csv"), "user\nalice\nbob\n").unwrap();
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"h2 session\"\nmode = \"session\"\nthink = \"5ms\"\n\
             [hosts]\napp = \"http://127.0.0.1:{p2}\"\nstatic = \"http://127.0.0.1:{p3}\"\n\
             [data]\nfile = \"users.csv\"\nper = \"user\"\n\
             [[step]]\nname = \"login\"\nhost = \"app\"\npath = \"/login?user={{{{user}}}}\"\n\
             extract = [{{ name = \"token\", json = \"/token\" }}]\n\
             check = {{ status = 200, header = [\"Set-Cookie\"] }}\n\
             [[step]]\nname = \"account\"\nhost = \"app\"\npath = \"/account?token={{{{token}}}}\"\n\
             check = {{ status = 200, body_regex = \"^welcome s-(alice|bob) t-(alice|bob)$\" }}\n\
             [[step]]\nname = \"asset\"\nhost = \"static\"\npath = \"/index.html\"\n\
             check = {{ status = 200 }}\n\
             [[step]]\nname = \"moved\"\nhost = \"app\"\npath = \"/a\"\ncheck = {{ status = 200 }}\n"
        ),
    )
    .unwrap();
    let v = run_json(&[
        "--h2c",
        "-L",
        "--scenario",
        file.to_str().unwrap(),
        "-n",
        "16",
        "-c",
        "1",
        "--streams",
        "2",
        "-t",
        "1",
        "--no-save",
    ]);
    assert_eq!(v["config"]["http_version"], "2");
    assert_eq!(counter(&v, "completed"), 16, "{}", v["errors"]);
    assert_eq!(counter(&v, "redirects"), 4);
    let reqs = v["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 4);
    for r in reqs {
        assert_eq!(r["completed"], 4, "{r}");
        assert_eq!(r["failed_checks"], 0, "{r}");
        assert_eq!(r["failed_extractions"], 0, "{r}");
    }
    let seen = take_nginx_log(&ng.dir);
    assert_eq!(seen.len(), 20, "16 requests and 4 hops");
    assert!(seen.iter().all(|s| s.protocol == "HTTP/2.0"));
    // Each stream is one user with its CSV row, its cookie and its token.
    let mut users = std::collections::BTreeSet::new();
    for s in seen.iter().filter(|s| s.uri.starts_with("/account")) {
        let user = s.uri.trim_start_matches("/account?token=t-");
        assert_eq!(s.cookie, format!("sid=s-{user}"), "{}", s.uri);
        users.insert(user.to_string());
    }
    assert_eq!(users.len(), 2, "{users:?}");
    assert!(
        seen.iter()
            .filter(|s| s.uri.starts_with("/login"))
            .all(|s| s.cookie == "-"),
        "a new session starts without cookies"
    );
    // The run's host: one connection for both streams (hops included);
    // the other host: a connection per stream.
    assert_eq!(distinct_conns(seen.iter().filter(|s| s.port == p2)), 1);
    assert_eq!(distinct_conns(seen.iter().filter(|s| s.port == p3)), 2);
    assert_eq!(counter(&v, "connections_opened"), 3);
    assert!(take_nginx_log(&ng.dir)
        .iter()
        .all(|s| s.protocol == "HTTP/2.0"));
    // Open loop: a session scenario with a rate is open-loop journeys, a
    // fresh user per arrival walking the four steps over a stream.
    let v = run_json(&[
        "--h2c",
        "-L",
        "--scenario",
        file.to_str().unwrap(),
        "-r",
        "40",
        "-n",
        "8",
        "-c",
        "1",
        "--streams",
        "2",
        "-t",
        "1",
        "--no-save",
    ]);
    let j = &v["journeys"];
    assert_eq!(j["arrived"], 8, "{j}");
    assert_eq!(j["started"], 8, "{j}");
    assert_eq!(j["completed"], 8, "{j} {}", v["errors"]);
    assert_eq!(counter(&v, "completed"), 32, "{}", v["errors"]);
    for r in v["requests"].as_array().unwrap() {
        assert_eq!(r["failed_checks"], 0, "{r}");
        assert_eq!(r["completed"], 8, "{r}");
    }
    assert!(take_nginx_log(&ng.dir)
        .iter()
        .all(|s| s.protocol == "HTTP/2.0"));
    // A connection's connect time counts for the request it was made for.
    assert_eq!(
        reqs[0]["connect"]["count"], 1,
        "login: the shared connection"
    );
    assert_eq!(reqs[2]["connect"]["count"], 2, "asset: one per stream");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An https scenario takes HTTP/2 by ALPN when its first host picks h2; each
/// other host gets the protocol it picks, per connection, as in a browser:
/// HTTP/1.1 from one that speaks only that, HTTP/2 from one that picks h2.
#[test]
fn https_scenario_speaks_to_each_host_in_the_protocol_it_picks() {
    let p = pki();
    let ok = Behaviour::Ok {
        delay: Duration::ZERO,
    };
    let both = H2Server::start(Some(server_tls(&p, &[b"h2", b"http/1.1"])), ok);
    let h1 = H2Server::start(Some(server_tls(&p, &[b"http/1.1"])), ok);
    let dir = temp_dir("alpn-scenario");
    let two = dir.join("two.toml");
    std::fs::write(
        &two,
        format!(
            "name = \"two\"\n[hosts]\na = \"https://127.0.0.1:{}\"\nb = \"https://127.0.0.1:{}\"\n\
             [[request]]\nname = \"a\"\nhost = \"a\"\npath = \"/\"\n[[request]]\nname = \"b\"\nhost = \"b\"\npath = \"/\"\n",
            both.addr.port(),
            h1.addr.port()
        ),
    )
    .unwrap();
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "--insecure",
        "--scenario",
        two.to_str().unwrap(),
        "-n",
        "6",
        "-c",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("note:"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["http_version"], "2");
    assert_eq!(counter(&v, "completed"), 6, "{}", v["errors"]);
    assert_eq!((both.streams(), both.h1_requests()), (3, 0));
    assert_eq!((h1.streams(), h1.h1_requests()), (0, 3));
    assert_eq!(h1.connections(), 1, "one kept-alive HTTP/1.1 connection");
    // The same scenario with only the h2 host: HTTP/2, streams, no note.
    let one = dir.join("one.toml");
    std::fs::write(
        &one,
        format!(
            "name = \"one\"\nbase = \"https://127.0.0.1:{}\"\n[[request]]\npath = \"/\"\n",
            both.addr.port()
        ),
    )
    .unwrap();
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "--insecure",
        "--scenario",
        one.to_str().unwrap(),
        "-n",
        "6",
        "-c",
        "1",
    ]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("note:"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["http_version"], "2");
    assert_eq!(both.streams(), 9);
    // Two hosts that both pick h2: HTTP/2 to each, over TLS.
    let other = H2Server::start(Some(server_tls(&p, &[b"h2"])), ok);
    let both_h2 = dir.join("both.toml");
    std::fs::write(
        &both_h2,
        format!(
            "name = \"both\"\n[hosts]\na = \"https://127.0.0.1:{}\"\nb = \"https://127.0.0.1:{}\"\n\
             [[request]]\nname = \"a\"\nhost = \"a\"\npath = \"/\"\n\
             [[request]]\nname = \"b\"\nhost = \"b\"\npath = \"/\"\n",
            both.addr.port(),
            other.addr.port()
        ),
    )
    .unwrap();
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "--insecure",
        "--scenario",
        both_h2.to_str().unwrap(),
        "-n",
        "6",
        "-c",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("note:"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["http_version"], "2");
    assert_eq!(counter(&v, "completed"), 6, "{}", v["errors"]);
    assert_eq!(both.streams(), 12);
    assert_eq!(other.streams(), 3);
    assert_eq!(other.h1_requests(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A raw HTTP/2 server whose first connection refuses a request and whose
/// later ones serve every request (200 "hello"). `redirect_first`: the
/// first connection answers its first request with a 302 to `/b` on the
/// same origin, then refuses the next one (the hop) with GOAWAY naming the
/// first as the last it processed; else it refuses its first request with
/// GOAWAY(last 0). Either way it then closes.
fn refusing_once_server(redirect_first: bool) -> ScriptServer {
    let conns = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    ScriptServer::start(move |mut s| {
        let first = conns.fetch_add(1, Ordering::SeqCst) == 0;
        if !raw_accept(&mut s) {
            return;
        }
        let mut redirected = None;
        // Bounded: at most 1,000 frames, each read bounded by the time-out.
        for _ in 0..1_000 {
            let Some((ty, flags, id, _)) = read_frame(&mut s) else {
                break;
            };
            match ty {
                4 if flags & 1 == 0 => {
                    let _ = s.write_all(&frame(4, 1, 0, &[]));
                }
                1 if first && redirect_first && redirected.is_none() => {
                    // :status 302 (literal, name index 8), location: /b
                    // (literal, name index 46), END_STREAM | END_HEADERS.
                    let block = [0x08, 3, b'3', b'0', b'2', 0x0f, 0x1f, 2, b'/', b'b'];
                    let _ = s.write_all(&frame(1, 5, id, &block));
                    redirected = Some(id);
                }
                1 if first => {
                    let _ = s.write_all(&goaway(redirected.unwrap_or(0)));
                    break;
                }
                1 => {
                    let _ = s.write_all(&ok_hello(id));
                }
                _ => {}
            }
        }
        raw_close(&mut s);
    })
}

/// A `-L` hop the server refused unprocessed is sent once more (RFC 9113
/// §8.7), as the first request is: on the request's own origin over a new
/// connection when its own took GOAWAY; to another origin over a new
/// connection there. A scenario's request to another host likewise.
#[test]
fn refused_redirect_hops_and_requests_to_other_hosts_are_sent_again() {
    // The hop on the request's own origin: connection 1 redirects, then
    // refuses the hop with GOAWAY; connection 2 serves it.
    let own = refusing_once_server(true);
    let v = run_json(&["--h2c", "-n", "1", "-L", &format!("http://{}/a", own.addr)]);
    let c = &v["counters"];
    assert_eq!(counter(&v, "completed"), 1, "{c} {}", v["errors"]);
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert_eq!(counter(&v, "redirects"), 1, "{c}");
    assert_eq!(counter(&v, "retried"), 1, "{c}");
    assert_eq!(counter(&v, "sent"), 1, "{c}");
    assert_eq!(v["status_codes"]["200"], 1, "{}", v["status_codes"]);
    assert_eq!(own.accepted.load(Ordering::SeqCst), 2);
    assert_every_request_ends_once(&v);

    // A hop to another origin (nginx redirects there): its first
    // connection refuses it, a second serves it.
    let files = [("index.html", vec![b'x'; 100])];
    let away = refusing_once_server(false);
    let p2 = common::nginx::free_port();
    let extra = format!(
        "{NGINX_LOG}\n  server {{ {} location / {{ return 302 http://{}/b; }} }}",
        h2_listen(p2),
        away.addr
    );
    let Some(ng) = h2c_nginx("h2-refused-hop", &files, &extra) else {
        return;
    };
    let v = run_json(&["--h2c", "-n", "1", "-L", &format!("http://127.0.0.1:{p2}/")]);
    let c = &v["counters"];
    assert_eq!(counter(&v, "completed"), 1, "{c} {}", v["errors"]);
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert_eq!(counter(&v, "retried"), 1, "{c}");
    assert_eq!(v["status_codes"]["200"], 1, "{}", v["status_codes"]);
    assert_eq!(away.accepted.load(Ordering::SeqCst), 2);
    assert_every_request_ends_once(&v);

    // A scenario's step to another host.
    let other = refusing_once_server(false);
    let d = temp_dir("refused-host");
    let sc = d.join("s.toml");
    std::fs::write(
        &sc,
        format!(
            "mode = \"session\"\n[hosts]\nother = \"http://{}\"\n\
             [[step]]\nname = \"a\"\npath = \"/index.html\"\n\
             [[step]]\nname = \"b\"\nhost = \"other\"\npath = \"/b\"\n",
            other.addr
        ),
    )
    .unwrap();
    take_nginx_log(&ng.dir);
    let url = format!("http://127.0.0.1:{}/", ng.port);
    let v = run_json(&[
        "--h2c",
        "-n",
        "2",
        "-c",
        "1",
        "--scenario",
        sc.to_str().unwrap(),
        &url,
    ]);
    let c = &v["counters"];
    assert_eq!(counter(&v, "completed"), 2, "{c} {}", v["errors"]);
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert_eq!(counter(&v, "retried"), 1, "{c}");
    for r in v["requests"].as_array().expect("per-request numbers") {
        assert_eq!(r["sent"], 1, "{r}");
        assert_eq!(r["completed"], 1, "{r}");
    }
    assert_eq!(other.accepted.load(Ordering::SeqCst), 2);
    assert_eq!(take_nginx_log(&ng.dir).len(), 1);
    assert_every_request_ends_once(&v);
}

/// A raw HTTP/2 server that answers one request per connection (200
/// "hello") and then closes it, without GOAWAY.
fn one_answer_server() -> ScriptServer {
    ScriptServer::start(move |mut s| {
        if !raw_accept(&mut s) {
            return;
        }
        // Bounded: at most 100 frames, each read bounded by the time-out.
        for _ in 0..100 {
            let Some((ty, flags, id, _)) = read_frame(&mut s) else {
                return;
            };
            match ty {
                4 if flags & 1 == 0 => {
                    let _ = s.write_all(&frame(4, 1, 0, &[]));
                }
                1 => {
                    let _ = s.write_all(&ok_hello(id));
                    break;
                }
                _ => {}
            }
        }
        raw_close(&mut s);
    })
}

/// Open-loop journeys over HTTP/2 against a server that closes each
/// connection after one answer: a journey's next step goes on a new
/// connection, as over HTTP/1.1 (it used to fail with its connection).
#[test]
fn journeys_go_on_over_a_new_connection_when_theirs_closes() {
    let srv = one_answer_server();
    let d = temp_dir("journey-close");
    let sc = d.join("s.toml");
    std::fs::write(
        &sc,
        "mode = \"session\"\n[[step]]\nname = \"a\"\npath = \"/a\"\nthink = \"50ms\"\n\
         [[step]]\nname = \"b\"\npath = \"/b\"\n",
    )
    .unwrap();
    let url = format!("http://{}/", srv.addr);
    let v = run_json(&[
        "--h2c",
        "--scenario",
        sc.to_str().unwrap(),
        "--rate",
        "20",
        "-d",
        "1s",
        "-c",
        "4",
        &url,
    ]);
    let c = &v["counters"];
    let j = &v["journeys"];
    assert_eq!(counter(&v, "failed"), 0, "{c} {j} {}", v["errors"]);
    assert_eq!(j["abandoned_error"], 0, "{j}");
    assert!(j["completed"].as_u64().unwrap() >= 10, "{j}");
    let answered = counter(&v, "completed");
    // A connection per answer (one opened as the run stops may carry none).
    assert!(counter(&v, "connections_opened") >= answered, "{c}");
    assert_every_request_ends_once(&v);
}

/// A closed loop against a saturated nginx (one process, 80 streams in
/// flight): the worker defers its reads to a short timer instead of waking
/// for every few answers (`defer.rs`: nginx stops paying a wake-up per
/// few answers), times every answer by the kernel's arrival stamp (the
/// record says so), and nginx's log agrees with every count.
#[test]
fn a_closed_loop_against_a_saturated_nginx_defers_and_counts_exactly() {
    let files = [("index.html", vec![b'x'; 100])];
    let Some(ng) = h2c_nginx("h2-defer", &files, NGINX_LOG) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/index.html", ng.port);
    take_nginx_log(&ng.dir);
    let v = run_json(&[
        &url,
        "--h2c",
        "-c",
        "8",
        "--streams",
        "10",
        "-d",
        "2s",
        "-t",
        "1",
    ]);
    let done = counter(&v, "completed");
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert!(done >= 1_000, "completed {done}");
    assert_eq!(v["client"]["answers_stamped"], true, "{}", v["client"]);
    assert_every_request_ends_once(&v);
    let seen = take_nginx_log(&ng.dir);
    // In flight at the end were sent, and nginx may have answered them.
    let in_flight = counter(&v, "in_flight_at_end");
    assert!(
        (done..=done + in_flight).contains(&(seen.len() as u64)),
        "nginx logged {} for {done} completed and {in_flight} in flight",
        seen.len()
    );
    let p50 = v["latency"]["percentiles_us"]["p50"].as_u64().unwrap();
    eprintln!("{done} answers, latency p50 {p50} µs, {}", v["client"]);
    assert!(p50 > 0 && p50 < 100_000, "p50 {p50} µs");
}
