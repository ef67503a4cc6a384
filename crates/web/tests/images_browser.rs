//! The size the images check says an image is shown at, against Chromium:
//! a page of the constructs the model reads (`sizes` with `w` candidates,
//! a stylesheet width overriding the `width` attribute, `max-width`
//! capping an `em` width, an `x` candidate without width, descendant and
//! child selectors under `@media`, an attribute selector, an image under
//! `display: none` and one `hidden`; widths in `%` and `calc()` of px, % and
//! vw through padded, bordered, `border-box` and `max-width` boxes; a
//! `max-width: 100%` cap on a `width` attribute and on a 1600 px photo's
//! intrinsic width; images in and as flex items: `flex: 0 0 X` beside
//! `flex: 1`, a Sphinx-style `width: 100%` item beside a negative-margin
//! sidebar, `flex-basis` capped by `max-width`, `flex-grow` shares), real PNGs of
//! known sizes served from 127.0.0.1:0, and `chromium --dump-dom` (a
//! 1350 px window at DPR 1 and 2, a 560 px one at 2) writing each
//! image's `currentSrc` and layout width into the page.
//! Skipped with a note when Chromium is missing, failed under CI=true.

mod common;

use common::photo;
use redline_testkit::need::require;
use redline_web::audit::shown_widths;
use redline_web::viewport::{Viewport, DESKTOP};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A true-colour PNG of `w`×`h` (one flat colour, stored compressed).
fn png(w: u32, h: u32) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, t: &[u8], d: &[u8]) {
        out.extend_from_slice(&(d.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(t);
        out.extend_from_slice(d);
        let crc = crc32(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    fn crc32(b: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &x in b {
            c ^= u32::from(x);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }
    // Each row: filter byte 0, then RGB pixels.
    let mut row = vec![0u8];
    row.extend([0x80u8, 0x40, 0x20].repeat(w as usize));
    let raw = row.repeat(h as usize);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&raw).expect("deflate");
    let idat = z.finish().expect("deflate");
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &idat);
    chunk(&mut out, b"IEND", &[]);
    out
}

const PAGE: &str = r#"<!doctype html><html><head>
<meta name=viewport content="width=device-width"><link rel=stylesheet href=s.css>
<style>.cap { width: 10em; max-width: 120px }</style></head><body>
<img id=lone srcset="p.png 720w" sizes="(max-width: 500px) 100vw, 200px">
<img id=hero class=hero src=h.png width=50>
<img id=pair srcset="s.png 400w, l.png 1600w" sizes="(max-width: 600px) 100vw, 300px" src=l.png>
<img id=dense src=a.png srcset="a2.png 2x">
<img id=cap class=cap src=c.png width=700>
<div class=p><img id=desc src=d.png width=500></div>
<ul><li><img id=child class=x src=e.png></li></ul>
<img id=attr src=f.png data-kind=thumb width=400>
<div class=gone><p><img id=hidden src=g.png width=300></p></div>
<img id=attrhidden hidden src=k.png width=80>
<div class=col><img id=pct class=pct src=m.png></div>
<section class=boxed><img id=calc class=calc src=n.png></section>
<img id=vw src=o.png style="width: calc(50vw - 20px)">
<div class=narrow><p><img id=fluid class=fluid src=q.png width=1200></p></div>
<div class=narrow><img id=photo class=fluid src=r.png></div>
<div class=frow><aside class=fside></aside><main class=fmain><img id=fgrow class=fluid src=fa.png></main></div>
<div class=pydoc><div class=pywrap><div class=pybody><img id=py class=fluid src=fb.png></div></div><div class=pyside><p>Sidebar</p></div><div class=clearer></div></div>
<div class=frow><img id=fitem src=fc.png style="flex: 0 0 200px; min-width: 0" width=800><div class=fbasis><img class=fluid src=fd.png></div></div>
<div class=fgrow2><div class=ga><img class=fluid src=fe.png></div><div class=gb><img class=fluid src=ff.png></div></div>
<script>onload = () => document.body.insertAdjacentHTML('beforeend', '<pre id=out>' +
  [...document.images].map(i => i.currentSrc.split('/').pop() + ' ' +
  i.getBoundingClientRect().width).join(';') + '</pre>')</script>
</body></html>"#;
const SHEET: &str = "img.hero { width: 360px }\n@media (max-width: 600px) { img.hero { width: 100px } }\n\
.p img { width: 224px }\n@media (max-width: 600px) { body .p > img { width: 112px } }\n\
li > img.x { width: 150px }\nul img { width: 90px }\nimg[data-kind] { width: 64px }\n.gone { display: none }\n\
.col { width: 80%; padding: 0 10px; margin-left: 5% }\n.pct { width: 50% }\n\
.boxed { box-sizing: border-box; width: 600px; padding: 20px; border: 5px solid #000 }\n.calc { width: calc(100% - 2 * 15px) }\n\
.narrow { max-width: 400px; margin: 0 auto }\n.fluid { max-width: 100% }\n\
.frow { display: flex }\n.fside { flex: 0 0 300px }\n.fmain { flex: 1; padding: 0 12px }\n\
.pydoc { display: flex }\n.pywrap { float: left; width: 100% }\n.pybody { margin-left: 230px; padding: 0 20px }\n\
.pyside { width: 230px; margin-left: -100% }\n.fbasis { flex-basis: 40%; max-width: 300px }\n\
.fgrow2 { display: flex; width: 900px }\n.ga { width: 100px; flex-grow: 1 }\n.gb { width: 100px; flex-grow: 3; border: 2px solid #000 }\n";
const IMAGES: [(&str, u32, u32); 23] = [
    ("p.png", 720, 540),
    ("h.png", 720, 480),
    ("s.png", 400, 300),
    ("l.png", 1600, 1200),
    ("a.png", 400, 400),
    ("a2.png", 800, 800),
    ("c.png", 400, 300),
    ("d.png", 1600, 1200),
    ("e.png", 600, 400),
    ("f.png", 640, 480),
    ("g.png", 900, 600),
    ("k.png", 300, 300),
    ("m.png", 800, 600),
    ("n.png", 800, 600),
    ("o.png", 1000, 500),
    ("q.png", 1200, 800),
    ("r.png", 1600, 1200),
    ("fa.png", 1200, 600),
    ("fb.png", 955, 600),
    ("fc.png", 800, 400),
    ("fd.png", 1000, 500),
    ("fe.png", 1000, 500),
    ("ff.png", 1000, 500),
];

/// Serves `dir` on 127.0.0.1:0 (one request per connection) until dropped.
struct Server {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(dir: PathBuf) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.set_nonblocking(true).expect("nonblocking");
        let port = l.local_addr().expect("addr").port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(120);
            while !flag.load(Ordering::Relaxed) && Instant::now() < end {
                let Ok((s, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut r = BufReader::new(&s);
                let mut line = String::new();
                if r.read_line(&mut line).is_err() {
                    continue;
                }
                for _ in 0..100 {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/");
                let name = path.trim_start_matches('/');
                let file = dir.join(name);
                let body = (!name.contains("..") && !name.is_empty())
                    .then(|| std::fs::read(&file).ok())
                    .flatten();
                let ct = match name.rsplit('.').next() {
                    Some("html") => "text/html",
                    Some("css") => "text/css",
                    _ => "image/png",
                };
                let (status, body) = match body {
                    Some(b) => ("200 OK", b),
                    None => ("404 Not Found", Vec::new()),
                };
                let mut w = &s;
                let _ = w.write_all(
                    format!("HTTP/1.1 {status}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len())
                        .as_bytes(),
                );
                let _ = w.write_all(&body);
            }
        });
        Server {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Removes the temporary folder, also when the test panics.
struct TmpDir(PathBuf);

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// (file, layout width) of each image as Chromium shows it on a window of
/// `vp`'s size at its DPR.
fn chromium_widths(bin: &str, url: &str, vp: &Viewport, profile: &Path) -> Vec<(String, f64)> {
    chromium_out(bin, url, vp, profile)
        .into_iter()
        .map(|(f, v)| (f, v[0]))
        .collect()
}

/// What the page's script wrote into `<pre id=out>`: `file n n…` items
/// separated by `;`, as (file, numbers), on a window of `vp`'s size.
fn chromium_out(bin: &str, url: &str, vp: &Viewport, profile: &Path) -> Vec<(String, Vec<f64>)> {
    let mut child = Command::new(bin)
        .args(redline_testkit::chromium::HEADLESS)
        .args([
            "--hide-scrollbars",
            &format!("--window-size={},{}", vp.width, vp.height),
            &format!("--force-device-scale-factor={}", vp.dpr),
            &format!("--user-data-dir={}", profile.display()),
            "--dump-dom",
            url,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn chromium");
    let end = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium --dump-dom did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom.find("<pre id=\"out\">").expect("no result in the DOM") + 14;
    let end = dom[start..].find("</pre>").expect("end") + start;
    dom[start..end]
        .split(';')
        .map(|p| {
            let mut it = p.split_whitespace();
            let f = it.next().expect("file").to_string();
            (f, it.map(|n| n.parse::<f64>().expect("number")).collect())
        })
        .collect()
}

#[test]
fn displayed_widths_match_chromium() {
    let bin = redline_testkit::chromium::chromium();
    if !require("chromium (apt-get install chromium)", bin.is_some()) {
        return;
    }
    let dir = TmpDir(std::env::temp_dir().join(format!("redline-images-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("tmp dir");
    std::fs::write(dir.0.join("index.html"), PAGE).expect("write");
    std::fs::write(dir.0.join("s.css"), SHEET).expect("write");
    for (name, w, h) in IMAGES {
        std::fs::write(dir.0.join(name), png(w, h)).expect("write");
    }
    let srv = Server::start(dir.0.clone());
    let url = format!("http://127.0.0.1:{}/index.html", srv.port);
    let intrinsic = |f: &str| IMAGES.iter().find(|i| i.0 == f).map(|i| f64::from(i.1));
    // A desktop at DPR 1 and 2, and a narrow window (560 px: headless
    // windows are not narrower than 500) at DPR 2 (at a fractional DPR such
    // as 1.75 headless Chromium's window is 562.29 CSS px wide, not 560).
    let narrow = Viewport {
        width: 560,
        height: 823,
        dpr: 2.0,
        mobile: false,
    };
    for vp in [
        DESKTOP,
        Viewport {
            dpr: 2.0,
            ..DESKTOP
        },
        narrow,
    ] {
        let dpr = vp.dpr;
        let profile = dir.0.join(format!("profile-{}-{dpr}", vp.width));
        let want = chromium_widths(bin.expect("checked"), &url, &vp, &profile);
        let model = shown_widths(PAGE.as_bytes(), &url, &vp, &[SHEET]);
        let got: Vec<(String, f64)> = model
            .iter()
            .map(|(u, w, d, max)| {
                let f = u.rsplit('/').next().unwrap_or_default().to_string();
                let w = w.unwrap_or_else(|| intrinsic(&f).expect("known image") / d);
                let w = max.map_or(w, |m| w.min(m));
                (f, w)
            })
            .collect();
        // Not rendered (display: none on an ancestor, `hidden`): width 0
        // in Chromium, not sized by redline.
        let (mut want, hidden): (Vec<_>, Vec<_>) = want.into_iter().partition(|(_, w)| *w > 0.0);
        let mut hidden: Vec<String> = hidden.into_iter().map(|(f, _)| f).collect();
        hidden.sort();
        assert_eq!(hidden, ["g.png", "k.png"], "DPR {dpr}");
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(want.len(), 19, "DPR {dpr}: {want:?}");
        for ((wf, ww), (gf, gw)) in want.iter().zip(&got) {
            assert_eq!(wf, gf, "DPR {dpr}: chromium {want:?}, redline {got:?}");
            assert!(
                (ww - gw).abs() < 0.5,
                "DPR {dpr}: chromium {want:?}, redline {got:?}"
            );
        }
        assert_eq!(
            got.len(),
            want.len(),
            "DPR {dpr}: chromium {want:?}, redline {got:?}"
        );
        eprintln!(
            "{} px at DPR {dpr}: chromium and redline agree: {got:?}",
            vp.width
        );
    }
}

/// The re-encoding behind the images-format check against Chromium's own
/// encoder, which Lighthouse asks over DevTools (`Audits.getEncodedResponse`,
/// WebP at 0.85 and JPEG at 0.92, sizes only): a PNG and a JPEG photograph
/// each within 10 % of Chromium's sizes, and a logo with alpha (noise
/// under its transparent pixels) within 3 %: Chromium encodes premultiplied
/// pixels, so the stored colours of transparent pixels must not count.
#[test]
fn reencoded_sizes_match_chromiums_encoder() {
    use redline_testkit::chromium::DevTools;
    use serde_json::json;
    let dir = TmpDir(std::env::temp_dir().join(format!("redline-encode-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("tmp dir");
    let (png_file, jpeg_file) = photo(1200, 800);
    let logo_file = common::logo(600, 240);
    std::fs::write(dir.0.join("p.png"), &png_file).expect("write");
    std::fs::write(dir.0.join("l.png"), &logo_file).expect("write");
    std::fs::write(dir.0.join("j.jpg"), &jpeg_file).expect("write");
    std::fs::write(
        dir.0.join("index.html"),
        "<!doctype html><img src=p.png><img src=j.jpg><img src=l.png>",
    )
    .expect("write");
    let srv = Server::start(dir.0.clone());
    let Some(mut d) = DevTools::launch("encode") else {
        return;
    };
    let (tid, sid) = d.new_tab();
    let s = Some(sid.as_str());
    d.call(s, "Network.enable", json!({}));
    d.call(s, "Page.enable", json!({}));
    d.call(
        s,
        "Page.navigate",
        json!({"url": format!("http://127.0.0.1:{}/index.html", srv.port)}),
    );
    // Each image's request id, from its response.
    let mut ids: Vec<(String, String)> = Vec::new();
    let end = Instant::now() + Duration::from_secs(30);
    while ids.len() < 3 {
        let Some(ev) = d.next_event(end) else {
            panic!("Chromium loaded only {ids:?} within 30 s");
        };
        if ev["method"] == "Network.responseReceived" {
            let url = ev["params"]["response"]["url"].as_str().unwrap_or("");
            let name = url.rsplit('/').next().unwrap_or("").to_string();
            if name == "p.png" || name == "j.jpg" || name == "l.png" {
                ids.push((
                    ev["params"]["requestId"].as_str().unwrap_or("").to_string(),
                    name,
                ));
            }
        }
    }
    assert!(
        d.wait_event(&sid, "Page.loadEventFired", Duration::from_secs(30)),
        "no load event"
    );
    for (id, name) in &ids {
        let mut size = |encoding: &str, quality: f64| -> u64 {
            let r = d.call(
                s,
                "Audits.getEncodedResponse",
                json!({"requestId": id, "encoding": encoding, "quality": quality, "sizeOnly": true}),
            );
            r["encodedSize"].as_u64().expect("encodedSize")
        };
        let (webp, jpeg) = (size("webp", 0.85), size("jpeg", 0.92));
        let (body, limit) = match name.as_str() {
            "p.png" => (&png_file, 0.10),
            "l.png" => (&logo_file, 0.03),
            _ => (&jpeg_file, 0.10),
        };
        let ours = redline_web::audit::encode::reencode(body).expect("decodes");
        eprintln!("{name}: Chromium WebP {webp} JPEG {jpeg}; redline {ours:?}");
        let near = |a: u64, b: u64| (a as f64 / b as f64 - 1.0).abs() <= limit;
        assert!(
            near(ours.webp, webp),
            "{name}: WebP {} vs Chromium's {webp}",
            ours.webp
        );
        assert!(
            near(ours.jpeg, jpeg),
            "{name}: JPEG {} vs Chromium's {jpeg}",
            ours.jpeg
        );
    }
    d.call(None, "Target.closeTarget", json!({"targetId": tid}));
}

/// A page for the offscreen rule: images on the first screen (plain, in a
/// `<figure>`, `display: block` at a `%` width in a padded, bordered box),
/// one partly past the fourth screen (75 % or more outside: flagged), one
/// far below, one after a paragraph (its top below the spacer whatever the
/// text's height), a hidden one, a lazy one, one in a flex row, one
/// absolutely positioned, and one right after text near the top (its
/// position needs text layout: not known).
const OFF_PAGE: &str = r#"<!doctype html><html><head>
<meta name=viewport content="width=device-width">
<style>.card { padding: 12px; border: 3px solid #000; margin: 20px 0 }
.wide { display: block; width: 50% } .spacer { height: 2900px } .deep { height: 5000px }
.row { display: flex; gap: 10px } .abs { position: absolute; top: 40px; left: 700px }
h1 { margin: 0 0 30px }</style></head><body>
<img src=o1.png width=600 height=200>
<figure><img src=o2.png width=300></figure>
<div class=card><img class=wide src=o3.png></div>
<div class=spacer></div>
<img src=o4.png width=400>
<div class=deep></div>
<p>A paragraph of text.</p>
<img src=o5.png>
<div style="display: none"><img src=o6.png></div>
<img src=o7.png loading=lazy>
<div class=row><img src=o8.png width=200><img src=o9.png width=200></div>
<div class=abs><img src=o10.png width=100></div>
<script>onload = () => document.body.insertAdjacentHTML('beforeend', '<pre id=out>' +
  [...document.images].map(i => { const r = i.getBoundingClientRect();
  return i.src.split('/').pop() + ' ' + (r.top + scrollY) + ' ' + r.width + ' ' + r.height; }).join(';') + '</pre>')</script>
</body></html>"#;
const OFF_IMAGES: [(&str, u32, u32); 10] = [
    ("o1.png", 600, 200),
    ("o2.png", 600, 400),
    ("o3.png", 800, 400),
    ("o4.png", 400, 400),
    ("o5.png", 640, 480),
    ("o6.png", 300, 300),
    ("o7.png", 300, 300),
    ("o8.png", 400, 300),
    ("o9.png", 400, 300),
    ("o10.png", 200, 200),
];

/// Lighthouse's offscreen-images share outside for a box at `top` of
/// `w`×`h` on a `vw`×`vh` viewport (its computeVisiblePixels, left at 0).
fn lighthouse_wasted(top: f64, w: f64, h: f64, vw: f64, vh: f64) -> f64 {
    if w * h == 0.0 {
        return 1.0;
    }
    let visible = ((top + h).min(4.0 * vh) - top.max(-100.0)).max(0.0) * w.min(vw + 100.0);
    1.0 - visible / (w * h)
}

/// The offscreen rule on Chromium's layout: each image's top lies within
/// redline's bounds, its size is Chromium's where redline knows it, and
/// each verdict redline gives is the one Lighthouse's formula gives on
/// Chromium's boxes (at 1350×940 and on a 560 px window).
#[test]
fn offscreen_verdicts_match_chromium_layout() {
    use redline_web::audit::{image_positions, Offscreen};
    let bin = redline_testkit::chromium::chromium();
    if !require("chromium (apt-get install chromium)", bin.is_some()) {
        return;
    }
    let dir =
        TmpDir(std::env::temp_dir().join(format!("redline-offscreen-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("tmp dir");
    std::fs::write(dir.0.join("index.html"), OFF_PAGE).expect("write");
    for (name, w, h) in OFF_IMAGES {
        std::fs::write(dir.0.join(name), png(w, h)).expect("write");
    }
    let srv = Server::start(dir.0.clone());
    let url = format!("http://127.0.0.1:{}/index.html", srv.port);
    let narrow = Viewport {
        width: 560,
        height: 823,
        dpr: 1.0,
        mobile: false,
    };
    for vp in [DESKTOP, narrow] {
        let profile = dir.0.join(format!("profile-off-{}", vp.width));
        let boxes = chromium_out(bin.expect("checked"), &url, &vp, &profile);
        let size = |u: &str| {
            let f = u.rsplit('/').next().unwrap_or_default();
            OFF_IMAGES.iter().find(|i| i.0 == f).map(|i| (i.1, i.2))
        };
        let placed = image_positions(OFF_PAGE.as_bytes(), &url, &vp, &[], &size);
        assert_eq!(placed.len(), boxes.len(), "{placed:?} vs {boxes:?}");
        let (vw, vh) = (f64::from(vp.width), f64::from(vp.height));
        let mut seen: Vec<(String, Offscreen)> = Vec::new();
        for (p, (f, b)) in placed.iter().zip(&boxes) {
            assert!(p.url.ends_with(&format!("/{f}")), "{p:?} vs {f}");
            let (top, w, h) = (b[0], b[1], b[2]);
            let why = format!(
                "{} px: {f}: chromium top {top} {w}×{h}, redline {p:?}",
                vp.width
            );
            if let Some((lo, hi)) = p.top {
                assert!(lo <= top + 0.5, "{why}");
                assert!(hi.is_none_or(|hi| hi >= top - 0.5), "{why}");
            }
            if let Some((rw, rh)) = p.size {
                assert!((rw - w).abs() < 0.5 && (rh - h).abs() < 0.5, "{why}");
            }
            let lh = lighthouse_wasted(top, w, h, vw, vh);
            match p.verdict {
                Offscreen::Hidden => assert_eq!(w * h, 0.0, "{why}"),
                Offscreen::Below { wasted } => {
                    assert!(lh >= 0.75, "{why}: Lighthouse {lh}");
                    assert!(wasted <= lh + 1e-6, "{why}: Lighthouse {lh}");
                }
                Offscreen::OnScreen => assert!(lh < 0.75, "{why}: Lighthouse {lh}"),
                Offscreen::NotKnown | Offscreen::LoadingSet => {}
            }
            seen.push((f.clone(), p.verdict));
        }
        eprintln!("{} px: {seen:?}", vp.width);
        let verdict = |f: &str| seen.iter().find(|(k, _)| k == f).map(|(_, v)| *v);
        // What the model must settle on this page (else the test is empty).
        assert_eq!(verdict("o1.png"), Some(Offscreen::OnScreen));
        assert_eq!(verdict("o2.png"), Some(Offscreen::OnScreen));
        assert_eq!(verdict("o3.png"), Some(Offscreen::OnScreen));
        assert!(
            matches!(verdict("o4.png"), Some(Offscreen::Below { .. })),
            "{seen:?}"
        );
        assert_eq!(verdict("o5.png"), Some(Offscreen::Below { wasted: 1.0 }));
        assert_eq!(verdict("o6.png"), Some(Offscreen::Hidden));
        assert_eq!(verdict("o7.png"), Some(Offscreen::LoadingSet));
        assert_eq!(verdict("o10.png"), Some(Offscreen::NotKnown));
    }
}
