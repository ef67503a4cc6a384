//! https: a local TLS server with a certificate made by the test (rcgen). The
//! default run fails with a certificate error, `--cacert` and `--insecure`
//! succeed, and the TLS handshake shows as its own phase.

mod common;

use common::*;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

struct Pki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

/// The shared test CA and leaf, and a rustls server config for the leaf.
fn pki() -> Pki {
    let p = common::nginx::pki();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(p.key_der));
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(p.chain, key)
    .unwrap();
    Pki {
        ca_pem: p.ca_pem,
        server: Arc::new(server),
    }
}

/// A keep-alive HTTPS server: one thread per connection, bounded loops.
fn tls_server(cfg: Arc<rustls::ServerConfig>) -> ScriptServer {
    ScriptServer::start(move |sock| {
        let conn = match rustls::ServerConnection::new(cfg.clone()) {
            Ok(c) => c,
            Err(_) => return,
        };
        let mut s = rustls::StreamOwned::new(conn, sock);
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        for _ in 0..100_000 {
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                if buf.len() > 65536 {
                    return;
                }
            }
            let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            buf.drain(..end);
            if s.write_all(b"HTTP/1.1 200 OK\r\nServer: tls-test\r\nContent-Length: 5\r\n\r\nhello")
                .and_then(|_| s.flush())
                .is_err()
            {
                return;
            }
        }
    })
}

#[test]
fn certificate_checked_by_default_and_cacert_or_insecure_work() {
    let p = pki();
    let srv = tls_server(p.server.clone());
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());

    // Default: the certificate is not trusted → a tls error per request.
    let v = run_json(&["-n", "5", "-c", "1", &url]);
    assert_eq!(error_count(&v, "tls"), 5, "{}", v["errors"]);
    let msg = v["errors"][0]["message"].as_str().unwrap().to_lowercase();
    assert!(msg.contains("certificate"), "{msg}");
    assert_eq!(counter(&v, "completed"), 0);

    // --cacert: trusted, keep-alive over one TLS session per connection.
    let dir = std::env::temp_dir().join(format!("redline-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &p.ca_pem).unwrap();
    let v = run_json(&[
        "-n",
        "200",
        "-c",
        "4",
        "--cacert",
        ca.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(counter(&v, "completed"), 200, "{}", v["errors"]);
    assert_eq!(v["server"]["software"], "tls-test");
    assert_eq!(counter(&v, "body_bytes"), 1000);
    assert_eq!(counter(&v, "connections_opened"), 4);
    assert_eq!(v["tls"]["count"], 4, "one handshake per connection");
    assert_eq!(v["config"].get("insecure"), None);

    // --insecure: works, and every output says verification was off.
    let v = run_json(&["-n", "20", "-c", "2", "--insecure", &url]);
    assert_eq!(counter(&v, "completed"), 20);
    assert_eq!(v["config"]["insecure"], true);
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-n",
        "5",
        "-c",
        "1",
        "--insecure",
        &url,
    ]);
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("certificate verification OFF"), "{t}");
    assert!(t.contains("TLS handshake (1)"), "{t}");

    // No keep-alive: a handshake for every request.
    let v = run_json(&["-n", "30", "-c", "2", "--no-keepalive", "--insecure", &url]);
    assert_eq!(counter(&v, "completed"), 30, "{}", v["errors"]);
    assert_eq!(v["tls"]["count"], 30);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_tls_files_are_usage_errors() {
    let out = redline(&[
        "run",
        "-n",
        "1",
        "--cacert",
        "/nonexistent/ca.pem",
        "https://127.0.0.1:1/",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--cacert"), "{err}");
    let out = redline(&["run", "-n", "1", "--cert", "/x.pem", "https://127.0.0.1:1/"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plain_http_server_behind_an_https_url_is_a_tls_error_not_a_hang() {
    let srv = builtin();
    let url = format!("https://{}/", srv.local_addr());
    let (out, took) = redline_with_limit(
        &[
            "run",
            "-o",
            "json",
            "-q",
            "-n",
            "3",
            "-c",
            "1",
            "--timeout",
            "2s",
            &url,
        ],
        Duration::from_secs(20),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(counter(&v, "failed"), 3, "{}", v["errors"]);
    assert!(took < Duration::from_secs(10));
}
