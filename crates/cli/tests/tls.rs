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

    // Default: the certificate is not trusted → the run stops before it
    // starts, with the fix (issue 35; tls_refusal below tells each reason).
    let e = refused(&["-n", "5", "-c", "1", &url]);
    assert!(
        e.contains("--cacert FILE") && e.contains("--insecure"),
        "{e}"
    );

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
fn plain_http_server_behind_an_https_url_says_use_http() {
    let srv = builtin();
    let url = format!("https://{}/", srv.local_addr());
    for extra in [&[][..], &["--http2"][..], &["--http1.1"][..]] {
        let mut args = vec!["-n", "3", "-c", "1", "--timeout", "2s"];
        args.extend_from_slice(extra);
        args.push(&url);
        let e = refused(&args);
        let plain = format!("use http://{}/", srv.local_addr());
        assert!(
            e.contains("the server answered in plain HTTP") && e.contains(&plain),
            "{extra:?}: {e}"
        );
    }
}

/// Runs `redline run ARGS` (-o json, a long load) expecting the TLS refusal:
/// exit 1 within seconds, one line on stderr, no report and no diagnosis on
/// stdout; that line.
fn refused(args: &[&str]) -> String {
    let mut a = vec!["run", "-o", "json", "-q", "--no-save"];
    a.extend_from_slice(args);
    let (out, took) = redline_with_limit(&a, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{a:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{a:?}: {err}");
    assert!(err.starts_with("redline: error: https://"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    err
}

/// A server with `chain`/`key`, counting its connections.
fn server_with(
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: Vec<u8>,
) -> ScriptServer {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key));
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    tls_server(Arc::new(cfg))
}

/// Each certificate reason rustls gives is one line naming the cause and the
/// fix, after at most a couple of handshakes (not one per connection and
/// request: the load asked here is 100 connections for 60 s).
#[test]
fn tls_refusal_names_the_cause_and_the_fix() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let dir = std::env::temp_dir().join(format!("redline-tlsr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let load = ["-c", "100", "-d", "60s"];

    // A self-signed CA certificate used as the server's own (CaUsedAsEndEntity).
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_self = p.self_signed(&key).unwrap();
    let srv = server_with(vec![ca_self.der().clone()], key.serialize_der());
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());
    let pem = dir.join("self.pem");
    std::fs::write(&pem, ca_self.pem()).unwrap();
    for extra in [
        &[][..],
        &["--http2"][..],
        &["--cacert", pem.to_str().unwrap()][..],
    ] {
        let mut a = load.to_vec();
        a.extend_from_slice(extra);
        a.push(&url);
        let e = refused(&a);
        assert!(
            e.contains("is a CA certificate used as the server's own"),
            "{e}"
        );
        assert!(e.contains("--insecure"), "{e}");
    }
    assert!(srv.accepted.load(std::sync::atomic::Ordering::SeqCst) <= 6);
    // --insecure goes through.
    let v = run_json(&["-n", "3", "-c", "1", "--insecure", "--no-save", &url]);
    assert_eq!(counter(&v, "completed"), 3, "{}", v["errors"]);

    // A leaf signed by an unknown CA (UnknownIssuer): --cacert is the fix.
    let pk = common::nginx::pki();
    let srv = server_with(pk.chain.clone(), pk.key_der.clone());
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());
    let mut a = load.to_vec();
    a.push(&url);
    let e = refused(&a);
    assert!(e.contains("not signed by a CA this machine trusts"), "{e}");
    assert!(
        e.contains("--cacert FILE") && e.contains("--insecure"),
        "{e}"
    );
    assert!(srv.accepted.load(std::sync::atomic::Ordering::SeqCst) <= 3);

    // A trusted CA, a leaf for another name (NotValidForName).
    let ca_key = KeyPair::generate().unwrap();
    let mut cap = CertificateParams::new(Vec::<String>::new()).unwrap();
    cap.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = cap.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(cap, ca_key);
    let ca_pem = dir.join("ca.pem");
    std::fs::write(&ca_pem, ca.pem()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["example.test".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let srv = server_with(vec![leaf.der().clone()], leaf_key.serialize_der());
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());
    let mut a = load.to_vec();
    a.extend_from_slice(&["--cacert", ca_pem.to_str().unwrap(), &url]);
    let e = refused(&a);
    assert!(e.contains("is not valid for the name '127.0.0.1'"), "{e}");

    // An expired leaf of a trusted CA (Expired).
    let mut lp = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    lp.not_before = rcgen::date_time_ymd(2001, 1, 1);
    lp.not_after = rcgen::date_time_ymd(2002, 1, 1);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = lp.signed_by(&leaf_key, &issuer).unwrap();
    let srv = server_with(vec![leaf.der().clone()], leaf_key.serialize_der());
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());
    let mut a = load.to_vec();
    a.extend_from_slice(&["--cacert", ca_pem.to_str().unwrap(), &url]);
    let e = refused(&a);
    assert!(e.contains("has expired"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An open loop over https fast enough to defer answers (10,000 req/s on one
/// worker): the TLS reads take the kernel's arrival stamps, every request
/// ends once, and the record says how they were timed.
#[test]
fn a_fast_open_loop_over_tls_times_answers_by_their_arrival() {
    let pki = pki();
    let srv = tls_server(pki.server.clone());
    let url = srv.url().replacen("http://", "https://", 1);
    let v = run_json(&[
        "-r",
        "10000",
        "-d",
        "500ms",
        "-t",
        "1",
        "-c",
        "100",
        "--insecure",
        &url,
    ]);
    let done = counter(&v, "completed");
    assert_eq!(counter(&v, "failed"), 0, "{}", v["errors"]);
    assert!(done >= 2_500, "completed {done} of 5,000");
    assert_eq!(
        counter(&v, "scheduled"),
        done + counter(&v, "not_sent") + counter(&v, "in_flight_at_end")
    );
    assert_eq!(v["client"]["answers_stamped"], true);
    assert_eq!(v["client"]["pacing_window_us"], 500);
}
