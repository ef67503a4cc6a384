//! Network-complete time against Chromium on a slow link: a network
//! namespace whose loopback is shaped by `tc tbf` (10 Mbit/s), a proxy in
//! it that holds every chunk 20 ms each way (40 ms round trips; this kernel
//! has no `sch_netem`), and Debian's nginx behind it serving a page of a
//! stylesheet, a script and images (over HTTP/1.1, and over HTTP/2 with
//! TLS). Headless Chromium (DevTools, cache off) and the page loader each
//! load the page through the proxy; redline's first-view time must be
//! within ±15 % of Chromium's network-complete time (the last response's
//! `responseEnd`). Everything runs on a thread that entered the namespace
//! (`setns`), so the servers, the proxy, Chromium and the loader it starts
//! all live there. Each side loads three times and the medians are
//! compared (Chromium's first navigation is slower: a cold browser).
//! `SHAPED_DEBUG=1` prints both waterfalls. Needs root, ip, tc, nginx and
//! Chromium: a note when one is missing, a failure under CI=true.

use redline_testkit::chromium::DevTools;
use redline_testkit::need::require;
use redline_testkit::nginx::{start_nginx, NginxSite};
use redline_web::load::{load, LoadOpts, View};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// One-way delay the proxy adds to every chunk.
const ONE_WAY: Duration = Duration::from_millis(20);

/// A network namespace, deleted when dropped.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

fn run(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .status()
        .is_ok_and(|s| s.success())
}

/// Creates the namespace with a shaped loopback; None when that fails.
fn shaped_namespace() -> Option<Netns> {
    let ns = Netns(format!("rlweb-{}", std::process::id()));
    let ok = run(&["ip", "netns", "add", &ns.0])
        && run(&["ip", "-n", &ns.0, "link", "set", "lo", "mtu", "1500", "up"])
        && run(&[
            "ip", "netns", "exec", &ns.0, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate",
            "10mbit", "burst", "32kb", "latency", "400ms",
        ]);
    ok.then_some(ns)
}

/// Moves the calling thread into namespace `ns`; threads and processes it
/// starts afterwards are in it too.
fn enter(ns: &str) -> bool {
    let Ok(f) = std::fs::File::open(format!("/var/run/netns/{ns}")) else {
        return false;
    };
    use std::os::fd::AsRawFd;
    // SAFETY: setns on an open namespace file descriptor only changes this
    // thread's network namespace.
    unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) == 0 }
}

/// Copies `from` to `to`, each chunk `ONE_WAY` after it was read (a link's
/// latency: chunks in flight overlap, throughput is not capped).
fn pump(mut from: TcpStream, mut to: TcpStream, stop: Arc<AtomicBool>) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = std::thread::spawn(move || {
        for (at, chunk) in rx {
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            if chunk.is_empty() || to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
    let mut buf = vec![0u8; 64 * 1024];
    let _ = from.set_read_timeout(Some(Duration::from_secs(60)));
    while !stop.load(Ordering::Relaxed) {
        match from.read(&mut buf) {
            Ok(n) if n > 0 => {
                if tx
                    .send((Instant::now() + ONE_WAY, buf[..n].to_vec()))
                    .is_err()
                {
                    break;
                }
            }
            _ => break,
        }
    }
    let _ = tx.send((Instant::now() + ONE_WAY, Vec::new()));
    drop(tx);
    let _ = writer.join();
}

/// The delaying proxy on 127.0.0.1:0 in front of `upstream`; stops
/// accepting when `stop` is set (bounded: 5 minutes at most).
fn proxy(upstream: u16, stop: Arc<AtomicBool>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.set_nonblocking(true).expect("nonblocking");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(300);
        while !stop.load(Ordering::Relaxed) && Instant::now() < end {
            let Ok((client, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            };
            let _ = client.set_nonblocking(false);
            let stop = stop.clone();
            std::thread::spawn(move || {
                // The connection's own round trip before it carries data.
                std::thread::sleep(2 * ONE_WAY);
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    return;
                };
                let _ = server.set_nodelay(true);
                let _ = client.set_nodelay(true);
                let (c2, s2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                let st = stop.clone();
                let up = std::thread::spawn(move || pump(c2, s2, st));
                pump(server, client, stop);
                let _ = up.join();
            });
        }
    });
    port
}

/// A real JPEG of noise, `side`×`side` (a browser reads it whole; an
/// invalid image would make Chromium cancel the download).
fn jpeg(side: u32, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let img = image::RgbImage::from_fn(side, side, |_, _| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        image::Rgb([x as u8, (x >> 8) as u8, (x >> 16) as u8])
    });
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 80)
        .encode_image(&img)
        .expect("jpeg");
    out
}

const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8">
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/s.css"><script src="/a.js"></script></head>
<body><p class="t">A page on a slow link.</p>
<img src="/1.jpg" width="400"><img src="/2.jpg" width="400"><img src="/3.jpg" width="400">
<img src="/4.jpg" width="400"><img src="/5.jpg" width="400"></body></html>"#;

/// Chromium's network-complete time of `url` (ms from navigation start to
/// the last responseEnd), cache off, after its load event and 1 s of quiet.
fn chromium_network_complete(d: &mut DevTools, url: &str) -> f64 {
    let (tid, sid) = d.new_tab();
    let s = Some(sid.as_str());
    d.call(s, "Network.enable", json!({}));
    d.call(
        s,
        "Network.setCacheDisabled",
        json!({"cacheDisabled": true}),
    );
    d.call(
        s,
        "Security.setIgnoreCertificateErrors",
        json!({"ignore": true}),
    );
    d.call(s, "Page.enable", json!({}));
    d.call(s, "Page.navigate", json!({"url": url}));
    assert!(
        d.wait_event(&sid, "Page.loadEventFired", Duration::from_secs(60)),
        "{url}: no load event"
    );
    std::thread::sleep(Duration::from_secs(1));
    if std::env::var("SHAPED_DEBUG").is_ok() {
        let r = d.call(
            s,
            "Runtime.evaluate",
            json!({"expression": "JSON.stringify(performance.getEntries().map(e => [e.name, e.startTime|0, e.responseStart|0, e.responseEnd|0, e.transferSize, e.nextHopProtocol]))", "returnByValue": true}),
        );
        eprintln!("chromium {url}: {}", r["result"]["value"]);
    }
    let r = d.call(
        s,
        "Runtime.evaluate",
        json!({"expression": "Math.max(performance.getEntriesByType('navigation')[0].responseEnd, ...performance.getEntriesByType('resource').map(e => e.responseEnd))", "returnByValue": true}),
    );
    d.call(None, "Target.closeTarget", json!({"targetId": tid}));
    r["result"]["value"].as_f64().expect("a time")
}

fn compare(ns: String) -> Result<Vec<String>, String> {
    if !enter(&ns) {
        return Err("setns failed".into());
    }
    let mut files: Vec<(&str, Vec<u8>)> = vec![
        ("index.html", PAGE.as_bytes().to_vec()),
        ("s.css", b".t{color:#333}\n".repeat(3000)),
        ("a.js", b"var x = 1;\n".repeat(3000)),
    ];
    let names = ["1.jpg", "2.jpg", "3.jpg", "4.jpg", "5.jpg"];
    for (i, n) in names.iter().enumerate() {
        files.push((n, jpeg(200 + 20 * i as u32, i as u64 + 7)));
    }
    let pki = redline_testkit::pki::pki();
    let dir = redline_testkit::tmpdir("shaped-ca");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).map_err(|e| e.to_string())?;
    let Some(mut d) = DevTools::launch("shaped") else {
        return Err("no chromium".into());
    };
    let mut lines = Vec::new();
    for h2 in [false, true] {
        let tls = h2.then_some(&pki);
        let site = NginxSite {
            tag: if h2 { "shaped-h2" } else { "shaped-h1" },
            files: &files,
            tls,
            h2,
            http_extra: "",
            types: "text/html html; text/css css; application/javascript js; image/jpeg jpg;",
        };
        let Some(nginx) = start_nginx(&site) else {
            return Err("no nginx".into());
        };
        let stop = Arc::new(AtomicBool::new(false));
        let port = proxy(nginx.port, stop.clone());
        let scheme = if h2 { "https" } else { "http" };
        let url = format!("{scheme}://localhost:{port}/index.html");
        let mut opts = LoadOpts::default();
        if h2 {
            let args = redline_web::http::TlsArgs {
                cacert: Some(ca.clone()),
                ..Default::default()
            };
            opts.client.tls = Some(redline_web::http::Tls::new(&args)?);
        }
        let u = url::Url::parse(&url).map_err(|e| e.to_string())?;
        // Each measured three times, medians compared.
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            theirs.push(chromium_network_complete(&mut d, &url));
            let l = load(&u, View::First, None, &opts, &mut |_| {});
            if !l.page_loaded() || l.errors > 0 {
                return Err(format!(
                    "{url}: redline's load failed: {:?}",
                    l.entries.first().map(|e| &e.error)
                ));
            }
            if std::env::var("SHAPED_DEBUG").is_ok() {
                for e in &l.entries {
                    eprintln!(
                        "redline {} {:.0} {:.0} {:.0} {} conn {:?}",
                        e.url,
                        e.start_ms,
                        e.start_ms + e.phases.total_ms - e.phases.transfer_ms,
                        e.end_ms,
                        e.wire_bytes,
                        e.conn
                    );
                }
            }
            ours.push(l.elapsed_ms);
        }
        stop.store(true, Ordering::Relaxed);
        ours.sort_by(f64::total_cmp);
        theirs.sort_by(f64::total_cmp);
        let (o, t) = (ours[1], theirs[1]);
        lines.push(format!(
            "{}: redline {o:.0} ms, Chromium {t:.0} ms, ratio {:.2} (runs: redline {ours:.0?}, Chromium {theirs:.0?})",
            if h2 { "HTTP/2" } else { "HTTP/1.1" },
            o / t
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(lines)
}

#[test]
fn network_complete_time_matches_chromium_on_a_shaped_link() {
    if !require(
        "root, for a network namespace",
        redline_testkit::setups::is_root(),
    ) || !require(
        "ip and tc (apt-get install iproute2)",
        run(&["ip", "-V"]) && run(&["tc", "-V"]),
    ) {
        return;
    }
    let Some(ns) = shaped_namespace() else {
        require("a network namespace with a tbf-shaped loopback", false);
        return;
    };
    let name = ns.0.clone();
    let lines = std::thread::spawn(move || compare(name))
        .join()
        .expect("the measuring thread");
    drop(ns);
    let lines = match lines {
        Ok(l) => l,
        Err(e) if e == "no chromium" || e == "no nginx" => return,
        Err(e) => panic!("{e}"),
    };
    for l in &lines {
        eprintln!("{l}");
    }
    for l in &lines {
        let ratio: f64 = l
            .split("ratio ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|r| r.parse().ok())
            .expect("a ratio");
        assert!((0.85..=1.15).contains(&ratio), "{l}");
    }
}
