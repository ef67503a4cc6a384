//! A tiny static server for the page-loader tests (127.0.0.1:0, one thread per
//! connection, every loop bounded) whose gzip, ETag, Last-Modified,
//! Cache-Control and keep-alive can each be turned on or off; it logs what it
//! was asked. The page set lives in tests/fixtures/site; images are made here
//! with known intrinsic sizes.
#![allow(dead_code)]

use redline_testkit::script::read_head;
use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the server does.
#[derive(Clone, Debug)]
pub struct Conf {
    pub gzip: bool,
    pub etag: bool,
    pub last_modified: bool,
    /// Answer conditional requests with 304 when they match.
    pub honour_conditional: bool,
    /// Cache-Control for static files (None: no header).
    pub static_cache: Option<String>,
    /// Cache-Control for images only, overriding `static_cache`.
    pub image_cache: Option<String>,
    /// Cache-Control for HTML.
    pub html_cache: Option<String>,
    pub keepalive: bool,
}

impl Conf {
    pub fn all_on() -> Conf {
        Conf {
            gzip: true,
            etag: true,
            last_modified: true,
            honour_conditional: true,
            static_cache: Some("public, max-age=31536000".into()),
            image_cache: None,
            html_cache: Some("no-cache".into()),
            keepalive: true,
        }
    }
    pub fn all_off() -> Conf {
        Conf {
            gzip: false,
            etag: false,
            last_modified: false,
            honour_conditional: false,
            static_cache: None,
            image_cache: None,
            html_cache: None,
            keepalive: true,
        }
    }
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub if_none_match: bool,
    pub if_modified_since: bool,
    pub status: u16,
}

pub struct Site {
    pub addr: SocketAddr,
    pub log: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Site {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }
    pub fn clear(&self) {
        self.log.lock().unwrap().clear();
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A PNG header (signature + IHDR) of the given size and colour type, padded to `len` bytes.
pub fn png(w: u32, h: u32, color_type: u8, len: usize) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&[8, color_type, 0, 0, 0, 0, 0, 0, 0]);
    pad(v, len)
}

/// A GIF89a header of the given size, padded.
pub fn gif(w: u16, h: u16, len: usize) -> Vec<u8> {
    let mut v = b"GIF89a".to_vec();
    v.extend_from_slice(&w.to_le_bytes());
    v.extend_from_slice(&h.to_le_bytes());
    v.extend_from_slice(&[0, 0, 0]);
    pad(v, len)
}

/// A baseline JPEG header (SOI, SOF0) of the given size, padded.
pub fn jpeg(w: u16, h: u16, len: usize) -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08];
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
    pad(v, len)
}

fn pad(mut v: Vec<u8>, len: usize) -> Vec<u8> {
    let mut x: u32 = 12345;
    while v.len() < len {
        // incompressible filler
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        v.push((x >> 16) as u8);
    }
    v
}

fn fixture(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/site")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// The page set: path → (content type, body).
pub fn files() -> HashMap<String, (&'static str, Vec<u8>)> {
    let mut m = HashMap::new();
    let mut put = |p: &str, ct: &'static str, b: Vec<u8>| {
        m.insert(p.to_string(), (ct, b));
    };
    let index = fixture("index.html");
    put("/", "text/html; charset=utf-8", index.clone());
    put("/index.html", "text/html; charset=utf-8", index);
    put("/frame.html", "text/html", fixture("frame.html"));
    put(
        "/nested.html",
        "text/html",
        b"<html>second level</html>".to_vec(),
    );
    put("/css/style.css", "text/css", fixture("style.css"));
    put("/css/more.css", "text/css", fixture("more.css"));
    put("/js/app.js", "application/javascript", fixture("app.js"));
    put("/fonts/f.woff2", "font/woff2", pad(b"wOF2".to_vec(), 3000));
    put("/favicon.gif", "image/gif", gif(16, 16, 300));
    put("/img/big.png", "image/png", png(400, 400, 2, 20_000));
    put("/img/small.gif", "image/gif", gif(10, 10, 200));
    put("/img/photo.jpg", "image/jpeg", jpeg(640, 480, 9000));
    put("/img/photo-2x.jpg", "image/jpeg", jpeg(1280, 960, 20000));
    put("/img/set-1x.gif", "image/gif", gif(20, 20, 400));
    put("/img/set-2x.gif", "image/gif", gif(40, 40, 800));
    put("/img/bg.gif", "image/gif", gif(1, 30, 100));
    put("/img/inframe.gif", "image/gif", gif(5, 5, 100));
    m
}

/// What the first view of the fixture page fetches (paths).
pub const FIRST_VIEW: &[&str] = &[
    "/",
    "/css/style.css",
    "/favicon.gif",
    "/js/app.js",
    "/img/big.png",
    "/img/small.gif",
    "/img/photo.jpg",
    "/img/set-1x.gif",
    "/img/missing.png",
    "/frame.html",
    "/nested.html",
    "/css/more.css",
    "/img/bg.gif",
    "/fonts/f.woff2",
    "/img/inframe.gif",
];

const LAST_MODIFIED: &str = "Tue, 04 Nov 2003 23:50:42 GMT";

fn etag_of(body: &[u8]) -> String {
    let mut h: u64 = 1469598103934665603;
    for b in body {
        h = (h ^ u64::from(*b)).wrapping_mul(1099511628211);
    }
    format!("\"{h:x}\"")
}

pub fn start(conf: Conf) -> Site {
    start_with(conf, Vec::new())
}

/// As [`start`], with more files (path, content type, body) beside the page set.
pub fn start_with(conf: Conf, extra: Vec<(&str, &'static str, Vec<u8>)>) -> Site {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut files = files();
    for (p, ct, b) in extra {
        files.insert(p.to_string(), (ct, b));
    }
    let files = Arc::new(files);
    let (s2, l2) = (stop.clone(), log.clone());
    let thread = std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(120);
        while !s2.load(Ordering::SeqCst) && Instant::now() < end {
            match listener.accept() {
                Ok((sock, _)) => {
                    sock.set_nonblocking(false).unwrap();
                    let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
                    let (c, l, f) = (conf.clone(), l2.clone(), files.clone());
                    std::thread::spawn(move || serve(sock, &c, &l, &f));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    Site {
        addr,
        log,
        stop,
        thread: Some(thread),
    }
}

fn serve(
    mut s: TcpStream,
    c: &Conf,
    log: &Mutex<Vec<Seen>>,
    files: &HashMap<String, (&'static str, Vec<u8>)>,
) {
    for _ in 0..1000 {
        let Some(head) = read_head(&mut s) else {
            return;
        };
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let hv = |name: &str| {
            head.lines()
                .find(|l| l.to_ascii_lowercase().starts_with(&format!("{name}:")))
                .map(|l| l[name.len() + 1..].trim().to_string())
        };
        let inm = hv("if-none-match");
        let ims = hv("if-modified-since");
        let accepts_gzip = hv("accept-encoding").is_some_and(|v| v.contains("gzip"));
        let mut headers = vec![(
            "Date".to_string(),
            httpdate::fmt_http_date(std::time::SystemTime::now()),
        )];
        let (status, body): (u16, Vec<u8>) = match files.get(&path) {
            None => (404, b"not found".to_vec()),
            Some((ct, body)) => {
                headers.push(("Content-Type".into(), ct.to_string()));
                let tag = etag_of(body);
                if c.etag {
                    headers.push(("ETag".into(), tag.clone()));
                }
                if c.last_modified {
                    headers.push(("Last-Modified".into(), LAST_MODIFIED.into()));
                }
                let cc = if ct.starts_with("text/html") {
                    c.html_cache.clone()
                } else if ct.starts_with("image/") && c.image_cache.is_some() {
                    c.image_cache.clone()
                } else {
                    c.static_cache.clone()
                };
                if let Some(cc) = cc {
                    headers.push(("Cache-Control".into(), cc));
                }
                let matches = (c.etag && inm.as_deref() == Some(tag.as_str()))
                    || (c.last_modified && inm.is_none() && ims.as_deref() == Some(LAST_MODIFIED));
                if c.honour_conditional && matches {
                    (304, Vec::new())
                } else if c.gzip
                    && accepts_gzip
                    && (ct.starts_with("text/") || ct.contains("javascript"))
                {
                    let mut e =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    e.write_all(body).unwrap();
                    headers.push(("Content-Encoding".into(), "gzip".into()));
                    headers.push(("Vary".into(), "Accept-Encoding".into()));
                    (200, e.finish().unwrap())
                } else {
                    (200, body.clone())
                }
            }
        };
        log.lock().unwrap().push(Seen {
            path: path.clone(),
            if_none_match: inm.is_some(),
            if_modified_since: ims.is_some(),
            status,
        });
        let reason = match status {
            200 => "OK",
            304 => "Not Modified",
            _ => "Not Found",
        };
        let mut out = format!("HTTP/1.1 {status} {reason}\r\n");
        for (n, v) in &headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        if status != 304 {
            out.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        if !c.keepalive {
            out.push_str("Connection: close\r\n");
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&body);
        if s.write_all(&bytes).is_err() || !c.keepalive {
            return;
        }
    }
}

/// A photograph-like picture (smooth colour fields and fine noise),
/// deterministic, as PNG and as JPEG (quality 90).
pub fn photo(w: u32, h: u32) -> (Vec<u8>, Vec<u8>) {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let n = (seed % 48) as i32 - 24;
        let fx = x as f64 / w as f64;
        let fy = y as f64 / h as f64;
        let c = |v: f64| (v * 255.0) as i32 + n;
        image::Rgb([
            c(0.5 + 0.4 * (fx * 6.0).sin()).clamp(0, 255) as u8,
            c(0.4 + 0.3 * (fy * 5.0 + fx).cos()).clamp(0, 255) as u8,
            c(0.3 + 0.25 * ((fx + fy) * 4.0).sin()).clamp(0, 255) as u8,
        ])
    });
    let mut png = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .expect("png");
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90)
        .encode_image(&img)
        .expect("jpeg");
    (png, jpeg)
}

/// A logo-like PNG with alpha: two flat-coloured discs with soft
/// (translucent) edges on a transparent ground whose stored colours are
/// noise, as image editors leave them; deterministic.
pub fn logo(w: u32, h: u32) -> Vec<u8> {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let img = image::RgbaImage::from_fn(w, h, |x, y| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let (fx, fy) = (x as f64, y as f64);
        let disc = |cx: f64, cy: f64, r: f64| {
            let d = ((fx - cx).powi(2) + (fy - cy).powi(2)).sqrt();
            (r + 2.0 - d).clamp(0.0, 4.0) / 4.0 // a 4 px soft edge
        };
        let r = h as f64 * 0.4;
        let a1 = disc(w as f64 * 0.3, h as f64 * 0.5, r);
        let a2 = disc(w as f64 * 0.7, h as f64 * 0.5, r);
        if a1 == 0.0 && a2 == 0.0 {
            let n = seed.to_le_bytes();
            return image::Rgba([n[0], n[1], n[2], 0]);
        }
        let (c, a) = if a1 >= a2 {
            ([200u8, 30, 40], a1)
        } else {
            ([20u8, 90, 200], a2)
        };
        image::Rgba([c[0], c[1], c[2], (a * 255.0).round() as u8])
    });
    let mut png = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .expect("png");
    png
}
