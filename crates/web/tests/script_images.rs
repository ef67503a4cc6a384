//! `--browser` (issue 33 point 7): a page whose inline script inserts two
//! images with `innerHTML` (a 1600×1200 JPEG and a true-colour PNG
//! photograph, both shown 200 px wide by the page's CSS), served from
//! 127.0.0.1:0. Without the browser the image checks say the script
//! inserts images that were not fetched; with headless Chromium both are
//! fetched by redline's own client and judged at the size Chromium shows
//! them, marked as found by running the page's scripts. A browser that is
//! missing or fails is a one-line error, not a hang. Skipped with a note
//! when Chromium is missing, failed under CI=true.

mod common;

use common::{photo, start_with, Conf};
use redline_web::audit::{audit_page_with, Audit, Check, Probes};
use redline_web::browser::{self, BrowserError, BrowserOpts};
use redline_web::load::{LoadOpts, BY_SCRIPT};
use redline_web::page::{self, PageReport};
use redline_web::viewport::{Viewport, DESKTOP, MOBILE};
use std::time::{Duration, Instant};

const PAGE: &str = r#"<!doctype html><html><head><title>sponsors</title>
<style>#s img { width: 200px }</style></head><body>
<h1>Our sponsors</h1><div id=s></div>
<script>
document.getElementById("s").innerHTML =
  "<img src='img/s/wide.jpg'>" + "<img src='img/s/logo.png'>";
</script></body></html>"#;

struct Fixture {
    site: common::Site,
    jpeg_len: u64,
    png_len: u64,
}

fn fixture() -> Fixture {
    let (_, jpeg) = photo(1600, 1200);
    let (png, _) = photo(400, 300);
    let (jpeg_len, png_len) = (jpeg.len() as u64, png.len() as u64);
    let site = start_with(
        Conf::all_off(),
        vec![
            ("/scripted.html", "text/html", PAGE.as_bytes().to_vec()),
            ("/img/s/wide.jpg", "image/jpeg", jpeg),
            ("/img/s/logo.png", "image/png", png),
        ],
    );
    Fixture {
        site,
        jpeg_len,
        png_len,
    }
}

fn opts(vp: Viewport) -> LoadOpts {
    LoadOpts {
        viewport: vp,
        ..LoadOpts::default()
    }
}

fn browser_opts(vp: Viewport, program: &str) -> BrowserOpts {
    BrowserOpts {
        program: program.into(),
        viewport: vp,
        user_agent: redline_web::http::CHROME_DESKTOP_UA.into(),
        timeout: Duration::from_secs(60),
        insecure: false,
        headers: Vec::new(),
        trace: true,
    }
}

fn check<'a>(a: &'a Audit, id: &str) -> &'a Check {
    a.checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id}"))
}

fn audit(r: &PageReport, browser: bool) -> Audit {
    let probes = Probes {
        dpr: Some(r.views[0].discovery.viewport.dpr),
        browser,
        ..Probes::default()
    };
    audit_page_with(r, &probes)
}

#[test]
fn without_the_browser_script_images_are_named_not_judged() {
    let f = fixture();
    let url = url::Url::parse(&f.site.url("/scripted.html")).unwrap();
    let r = page::run(&url, 1, &opts(DESKTOP), &mut |_| {});
    let a = audit(&r, false);
    for id in ["images-scaled", "images-format"] {
        let c = check(&a, id);
        assert!(
            c.summary
                .contains("inserts images at run time: not fetched, not judged"),
            "{id}: {}",
            c.summary
        );
        assert!(c.findings.is_empty(), "{id}: {:?}", c.findings);
    }
    assert!(
        !f.site.seen().iter().any(|s| s.path.starts_with("/img/s/")),
        "redline alone fetched a script's image: {:?}",
        f.site.seen()
    );
}

#[test]
fn with_the_browser_both_images_are_fetched_and_judged() {
    let Some(chromium) = redline_testkit::chromium::chromium() else {
        redline_testkit::need::missing("chromium (apt-get install chromium)");
        return;
    };
    let f = fixture();
    let url = url::Url::parse(&f.site.url("/scripted.html")).unwrap();
    for vp in [DESKTOP, MOBILE] {
        let t = Instant::now();
        let seen = browser::images(&url, &browser_opts(vp, chromium)).expect("Chromium ran");
        eprintln!("{}px: Chromium in {:?}: {seen:?}", vp.width, t.elapsed());
        let mut o = opts(vp);
        o.script_images = seen;
        let r = page::run(&url, 1, &o, &mut |_| {});
        let first = &r.views[0];
        // redline's own client fetched both, with every byte.
        for (name, len) in [("wide.jpg", f.jpeg_len), ("logo.png", f.png_len)] {
            let e = first
                .entries
                .iter()
                .find(|e| e.url.ends_with(&format!("/img/s/{name}")))
                .unwrap_or_else(|| panic!("{name} not fetched by redline"));
            assert_eq!(e.status, Some(200), "{name}");
            assert_eq!(e.body_wire_bytes, len, "{name}: redline's bytes");
            let by = e.by_script.as_ref().expect("marked as found by the script");
            assert_eq!(by.found_by, BY_SCRIPT);
        }
        let a = audit(&r, true);
        // Sizing: the JPEG shown 200 px wide (CSS), 150 high (4:3), at the
        // screen's DPR; its waste from redline's bytes on the wire.
        let scaled = check(&a, "images-scaled");
        let fi = scaled
            .findings
            .iter()
            .find(|fi| fi.url.as_deref().is_some_and(|u| u.ends_with("/wide.jpg")))
            .unwrap_or_else(|| panic!("wide.jpg not judged: {:?}", scaled.findings));
        assert!(
            fi.evidence
                .contains("1600×1200 image shown at 200×150 CSS px (as Chromium displays it)"),
            "{}",
            fi.evidence
        );
        assert!(
            fi.evidence
                .contains("(found by running the page's scripts in Chromium)"),
            "{}",
            fi.evidence
        );
        assert_eq!(fi.found_by, Some(BY_SCRIPT));
        let (nw, nh) = ((200.0 * vp.dpr).ceil(), (150.0 * vp.dpr).ceil());
        let want = (f.jpeg_len as f64 * (1.0 - nw * nh / (1600.0 * 1200.0))) as u64;
        assert_eq!(fi.saving_bytes, Some(want), "{}", fi.evidence);
        assert!(
            scaled
                .summary
                .contains("2 images found by running the page's scripts in Chromium"),
            "{}",
            scaled.summary
        );
        assert!(
            !scaled.summary.contains("not fetched"),
            "{}",
            scaled.summary
        );
        // Format: the PNG photograph re-encoded from redline's bytes.
        let format = check(&a, "images-format");
        let fi = format
            .findings
            .iter()
            .find(|fi| fi.url.as_deref().is_some_and(|u| u.ends_with("/logo.png")))
            .unwrap_or_else(|| panic!("logo.png not judged: {:?}", format.findings));
        assert!(fi.evidence.starts_with("400×300 PNG of"), "{}", fi.evidence);
        assert_eq!(fi.found_by, Some(BY_SCRIPT));
        assert!(
            fi.saving_bytes.is_some_and(|s| s > 8192 && s < f.png_len),
            "{}",
            fi.evidence
        );
    }
}

#[test]
fn a_missing_or_failing_browser_is_one_line_and_no_hang() {
    let f = fixture();
    let url = url::Url::parse(&f.site.url("/scripted.html")).unwrap();
    let e = browser::images(&url, &browser_opts(DESKTOP, "/nonexistent/chromium")).unwrap_err();
    assert!(matches!(e, BrowserError::Missing(_)), "{e}");
    assert!(e.to_string().contains("/nonexistent/chromium"), "{e}");
    // A program that exits at once: its pipe closes, an error at once.
    let t = Instant::now();
    let e = browser::images(&url, &browser_opts(DESKTOP, "/bin/false")).unwrap_err();
    assert!(matches!(e, BrowserError::Failed(_)), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // A program that never answers: the deadline, and it is killed.
    let dir = std::env::temp_dir().join(format!("redline-mute-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let mute = dir.join("mute-browser");
    std::fs::write(&mute, "#!/bin/sh\nexec sleep 30\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&mute, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut o = browser_opts(DESKTOP, mute.to_str().expect("utf-8"));
    o.timeout = Duration::from_secs(2);
    let t = Instant::now();
    let e = browser::images(&url, &o).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let s = e.to_string();
    assert!(!s.contains('\n'), "{s}");
    assert!(
        s.contains("did not answer Target.createTarget in time"),
        "{s}"
    );
}
