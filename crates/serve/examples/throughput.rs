//! Rough keep-alive throughput check of redline-serve.
//!
//! `cargo run --release -p redline-serve --example throughput -- [connections] [pipeline depth] [seconds] [server threads] [path]`
//!
//! Starts a server, then drives it from a single-threaded tokio client (so
//! on a 2-core machine the server and the client get about a core each) and
//! prints requests per second.

use std::time::{Duration, Instant};

use redline_serve::{ServeConfig, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let conns = arg(0, 32) as usize;
    let depth = arg(1, 1) as usize;
    let secs = arg(2, 3);
    let threads = arg(3, 1) as usize;
    let path = args.get(4).cloned().unwrap_or_else(|| "/".to_string());

    let server = Server::start(ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        threads,
    })
    .unwrap();
    let addr = server.local_addr();
    let req = format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n")
        .repeat(depth)
        .into_bytes();

    // Learn the response length.
    let resp_len = {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut v = Vec::new();
        s.read_to_end(&mut v).unwrap();
        // Same response minus the "Connection: close\r\n" line.
        v.len() - "Connection: close\r\n".len()
    };

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let total = rt.block_on(async move {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut tasks = Vec::new();
        for _ in 0..conns {
            let req = req.clone();
            tasks.push(tokio::spawn(async move {
                let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                s.set_nodelay(true).unwrap();
                let mut buf = vec![0u8; 64 * 1024];
                let mut n = 0u64;
                while Instant::now() < deadline {
                    s.write_all(&req).await.unwrap();
                    let mut want = resp_len * depth;
                    while want > 0 {
                        let m = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                            .await
                            .expect("read timeout")
                            .unwrap();
                        assert!(m > 0, "EOF");
                        want = want.checked_sub(m).expect("more bytes than expected");
                    }
                    n += depth as u64;
                }
                n
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        total
    });
    let stats = server.stats();
    let cpu = server_cpu_seconds();
    println!(
        "{conns} conns, depth {depth}, {threads} server thread(s), {path}: {:.0} req/s ({} requests; server counted {}); \
         server threads used {cpu:.2} CPU-s = {:.0} req per server CPU-second",
        total as f64 / secs as f64,
        total,
        stats.requests,
        stats.requests as f64 / cpu
    );
}

/// CPU time used so far by the server's threads (Linux only; NaN elsewhere).
fn server_cpu_seconds() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    let mut ticks = 0u64;
    for e in dir.flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("redline-serve") {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // Fields after the ")" of comm: state is field 3; utime 14, stime 15.
        let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        ticks += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        ticks += f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    ticks as f64 / 100.0 // USER_HZ is 100 on Linux
}
