//! redline's own HTTP/2 codec (`http2::Http2Session`) against a real nginx:
//! a tiny blocking driver (std TcpStream, or rustls with ALPN h2) runs
//! requests through the session and the answers are checked against the
//! files served and nginx's access log.

use redline_engine::http2::{Http2Request, Http2Session};
use redline_engine::session::{Event, Session, Want};
use redline_testkit::nginx::{start_nginx, Nginx, NginxSite};
use redline_testkit::pki::{pki, Pki};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

const LOG: &str = "log_format codec '$request_method $request_uri $status $request_length \
     $body_bytes_sent $server_protocol';\n  access_log {d}/access.log codec;\n  \
     keepalive_requests 100000;";

/// What one request got: status and body size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Got {
    status: u16,
    body: u64,
}

/// Runs `reqs` over one connection, at most `conc` at a time; the answers
/// in request order. Panics on a failed request or a stuck connection.
fn drive<S: Read + Write>(io: &mut S, reqs: &[Http2Request], conc: usize) -> Vec<Got> {
    let mut s = Http2Session::new();
    s.connect();
    let mut got: Vec<Option<Got>> = vec![None; reqs.len()];
    let mut ids = std::collections::HashMap::new();
    let (mut next, mut done) = (0usize, 0usize);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    for _round in 0..1_000_000 {
        while next < reqs.len() && s.capacity() > 0 && next - done < conc {
            let id = s.submit(&reqs[next], Want::NOTHING).expect("submit");
            ids.insert(id, next);
            next += 1;
        }
        out.clear();
        s.bytes_out(&mut out);
        if !out.is_empty() {
            io.write_all(&out).expect("write");
            io.flush().expect("flush");
        }
        if done == reqs.len() {
            break;
        }
        let n = io.read(&mut buf).expect("read (10 s time-out)");
        if n == 0 {
            s.eof();
        } else {
            s.bytes_in(&buf[..n]);
        }
        while let Some(ev) = s.poll_event() {
            match ev {
                Event::Head { .. } => {}
                Event::Done {
                    id,
                    status,
                    body_bytes,
                    ..
                } => {
                    got[ids[&id]] = Some(Got {
                        status,
                        body: body_bytes,
                    });
                    done += 1;
                }
                Event::Failed { id, message, .. } => panic!("request {id} failed: {message}"),
            }
        }
        assert!(s.fatal().is_none(), "{:?}", s.fatal());
        assert!(n > 0, "the server closed the connection");
    }
    assert_eq!(done, reqs.len(), "not every request was answered");
    got.into_iter().map(Option::unwrap).collect()
}

fn connect(ng: &Nginx) -> TcpStream {
    let t = TcpStream::connect(("127.0.0.1", ng.port)).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    t.set_nodelay(true).unwrap();
    t
}

fn tls(ng: &Nginx, p: &Pki) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(p.chain[1].clone()).unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
    let mut tcp = connect(ng);
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).unwrap();
    }
    assert_eq!(
        conn.alpn_protocol(),
        Some(&b"h2"[..]),
        "nginx did not pick h2"
    );
    rustls::StreamOwned::new(conn, tcp)
}

fn get(scheme: &str, ng: &Nginx, method: &str, path: &str, body: &[u8]) -> Http2Request {
    req(scheme, ng.port, method, path, body)
}

fn req(scheme: &str, port: u16, method: &str, path: &str, body: &[u8]) -> Http2Request {
    let headers = vec![
        ("Host".to_string(), format!("127.0.0.1:{port}")),
        ("User-Agent".to_string(), "redline-test".to_string()),
        ("Accept".to_string(), "*/*".to_string()),
    ];
    Http2Request::from_parts(
        method,
        scheme,
        &format!("127.0.0.1:{port}"),
        path,
        &headers,
        bytes::Bytes::copy_from_slice(body),
    )
    .unwrap()
}

/// The access log's lines, once there are `want` (nginx writes a line
/// just after the response went, so the last may lag the answer a little;
/// waited for at most 10 s, then what is there).
fn log(ng: &Nginx, want: usize) -> Vec<Vec<String>> {
    let read = || -> Vec<Vec<String>> {
        std::fs::read_to_string(ng.dir.join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split(' ').map(str::to_string).collect())
            .collect()
    };
    for _ in 0..200 {
        let lines = read();
        if lines.len() >= want {
            // A moment more: a line beyond `want` would show up too.
            std::thread::sleep(Duration::from_millis(100));
            return read();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    read()
}

fn site(tls: Option<&Pki>, files: &[(&str, Vec<u8>)]) -> Option<Nginx> {
    start_nginx(&NginxSite {
        tag: "http2-codec",
        files,
        tls,
        h2: true,
        http_extra: LOG,
        types: "",
    })
}

fn many_gets<S: Read + Write>(io: &mut S, ng: &Nginx, scheme: &str) {
    let reqs: Vec<_> = (0..2000)
        .map(|i| get(scheme, ng, "GET", &format!("/f{}.txt", i % 3), b""))
        .collect();
    let got = drive(io, &reqs, 10);
    for (i, g) in got.iter().enumerate() {
        assert_eq!(
            *g,
            Got {
                status: 200,
                body: [10, 1000, 20_000][i % 3]
            },
            "request {i}"
        );
    }
    let lines = log(ng, 2000);
    assert_eq!(lines.len(), 2000, "nginx logged {} requests", lines.len());
    assert!(lines.iter().all(|l| l[2] == "200" && l[5] == "HTTP/2.0"));
}

/// 3 MiB: three times the stream window the session advertises.
const BIG: usize = 3 << 20;

fn files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("f0.txt", vec![b'a'; 10]),
        ("f1.txt", vec![b'b'; 1000]),
        ("f2.txt", vec![b'c'; 20_000]),
        ("big.bin", vec![7u8; BIG]),
    ]
}

#[test]
fn h2c_two_thousand_gets_over_ten_streams() {
    let Some(ng) = site(None, &files()) else {
        return;
    };
    many_gets(&mut connect(&ng), &ng, "http");
}

#[test]
fn tls_two_thousand_gets_over_ten_streams() {
    let p = pki();
    let Some(ng) = site(Some(&p), &files()) else {
        return;
    };
    many_gets(&mut tls(&ng, &p), &ng, "https");
}

#[test]
fn h2c_big_file_put_post_head_and_404() {
    // A second server on the same nginx takes PUT (the DAV module), which
    // reads the whole body: nginx's stream window is 64 KiB, so the 100 KiB
    // body needs its WINDOW_UPDATEs to go out.
    let put_port = redline_testkit::free_port();
    let extra = format!(
        "{LOG}\n  server {{ listen 127.0.0.1:{put_port} http2; root {{d}}/site;\n    \
         location /up/ {{ dav_methods PUT; create_full_put_path on; \
         client_max_body_size 1m; }} }}"
    );
    let Some(ng) = start_nginx(&NginxSite {
        tag: "http2-codec-put",
        files: &files(),
        tls: None,
        h2: true,
        http_extra: &extra,
        types: "",
    }) else {
        return;
    };
    let body: Vec<u8> = (0..100 * 1024).map(|i| (i % 251) as u8).collect();
    // Six 3 MiB files: each needs the session's stream WINDOW_UPDATEs (its
    // stream window is 1 MiB), all six its connection WINDOW_UPDATEs (18
    // MiB through a 16 MiB window); without them nginx stops sending.
    let mut reqs = vec![
        get("http", &ng, "HEAD", "/f1.txt", b""),
        get("http", &ng, "GET", "/missing", b""),
        get("http", &ng, "POST", "/f0.txt", &body),
    ];
    reqs.extend((0..6).map(|_| get("http", &ng, "GET", "/big.bin", b"")));
    let got = drive(&mut connect(&ng), &reqs, 5);
    for g in &got[3..] {
        assert_eq!(
            *g,
            Got {
                status: 200,
                body: BIG as u64
            }
        );
    }
    assert_eq!(
        got[0],
        Got {
            status: 200,
            body: 0
        }
    );
    assert_eq!(got[1].status, 404);
    // nginx refuses POST on a static file before reading the body.
    assert_eq!(got[2].status, 405);

    let mut t = TcpStream::connect(("127.0.0.1", put_port)).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let put = req("http", put_port, "PUT", "/up/new.bin", &body);
    let got = drive(&mut t, &[put], 1);
    assert_eq!(got[0].status, 201, "{got:?}");
    let stored = std::fs::read(ng.dir.join("site/up/new.bin")).unwrap();
    assert!(
        stored == body,
        "nginx stored {} bytes, not the body sent",
        stored.len()
    );

    let lines = log(&ng, 10);
    assert_eq!(lines.len(), 10, "{lines:?}");
    let put = lines.iter().find(|l| l[0] == "PUT").expect("PUT logged");
    let length: usize = put[3].parse().unwrap();
    assert!(length > body.len(), "nginx read {length} bytes of the PUT");
}
