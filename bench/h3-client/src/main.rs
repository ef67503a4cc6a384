//! A closed-loop HTTP/3 load client on `h3` + `h3-quinn` (tokio, one
//! thread): C connections, P requests in flight on each, N requests in all;
//! each answer's body is read and dropped. Issue 32's comparison point for
//! redline's own HTTP/3 over `quinn-proto` (see bench/h3_cost.sh). The
//! server's certificate is not checked (a loopback benchmark's self-signed one).
//!
//! Usage: h3-client -c C -p P -n N https://127.0.0.1:PORT/path

use bytes::Buf;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::cell::Cell;
use std::net::ToSocketAddrs;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// Accepts any certificate, but checks the handshake's signatures.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn usage(msg: &str) -> ! {
    eprintln!("h3-client: {msg}\nusage: h3-client -c C -p P -n N https://HOST:PORT/path");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut c, mut p, mut n, mut url) = (1usize, 1usize, 1000u64, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = || {
            it.next()
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&v| v > 0)
                .unwrap_or_else(|| usage(&format!("{a} needs a positive number")))
        };
        match a.as_str() {
            "-c" => c = num() as usize,
            "-p" => p = num() as usize,
            "-n" => n = num(),
            u if u.starts_with("https://") => url = Some(u.to_string()),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    let url: http::Uri = url
        .unwrap_or_else(|| usage("an https URL is needed"))
        .parse()
        .unwrap_or_else(|e| usage(&format!("bad URL: {e}")));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let local = tokio::task::LocalSet::new();
    let t = Instant::now();
    let done = local.block_on(&rt, run(url, c, p, n));
    let s = t.elapsed().as_secs_f64();
    println!(
        "{done} requests in {s:.3} s, {:.0} req/s",
        done as f64 / s.max(1e-9)
    );
}

async fn run(url: http::Uri, c: usize, p: usize, n: u64) -> u64 {
    let host = url.host().unwrap_or("127.0.0.1").to_string();
    let port = url.port_u16().unwrap_or(443);
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| usage("cannot resolve the host"));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC TLS");
    let client = quinn::ClientConfig::new(Arc::new(quic));
    let bind = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let mut endpoint = quinn::Endpoint::client(bind.parse().unwrap()).expect("UDP endpoint");
    endpoint.set_default_client_config(client);
    // Requests left to start, shared by every stream task (one thread).
    let left = Rc::new(Cell::new(n));
    let done = Rc::new(Cell::new(0u64));
    let mut conns = Vec::new();
    for _ in 0..c {
        let conn = endpoint
            .connect(addr, &host)
            .expect("connect")
            .await
            .unwrap_or_else(|e| {
                eprintln!("h3-client: QUIC handshake: {e}");
                std::process::exit(1)
            });
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .expect("HTTP/3 connection");
        tokio::task::spawn_local(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let mut tasks = Vec::new();
        for _ in 0..p {
            let mut send = send.clone();
            let (left, done, url) = (left.clone(), done.clone(), url.clone());
            tasks.push(tokio::task::spawn_local(async move {
                while left.get() > 0 {
                    left.set(left.get() - 1);
                    let req = http::Request::get(url.clone()).body(()).unwrap();
                    let Ok(mut stream) = send.send_request(req).await else {
                        return;
                    };
                    if stream.finish().await.is_err() || stream.recv_response().await.is_err() {
                        return;
                    }
                    while let Ok(Some(mut chunk)) = stream.recv_data().await {
                        chunk.advance(chunk.remaining());
                    }
                    done.set(done.get() + 1);
                }
            }));
        }
        conns.push((conn, send, tasks));
    }
    for (_, _, tasks) in &mut conns {
        for t in tasks.drain(..) {
            let _ = t.await;
        }
    }
    for (conn, _, _) in &conns {
        conn.close(0u32.into(), b"");
    }
    endpoint.wait_idle().await;
    done.get()
}
