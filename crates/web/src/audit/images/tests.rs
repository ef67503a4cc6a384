//! Unit tests of `audit/images.rs`, kept in their own file so that file reads as its job.

use super::super::fixtures::{entry, page};
use super::super::{audit, Probes};
use crate::discover::Kind;
use crate::load::Load;

fn flagged(l: &Load, id: &str, dpr: Option<f64>) -> usize {
    let p = Probes {
        dpr,
        ..Default::default()
    };
    let a = audit("http://a.test/", l, None, Vec::new(), &[], &p);
    a.checks.iter().find(|c| c.id == id).unwrap().findings.len()
}

#[test]
fn expected_size_follows_the_device_pixel_ratio() {
    // 200×200, 30 KB on the wire, shown at 100×100 CSS px.
    let mut img = entry("http://a.test/i.jpg", Kind::Image, "image/jpeg", 30_000);
    img.intrinsic = Some((200, 200));
    img.html_size = Some((Some(100), Some(100)));
    let l = page(img);
    // DPR 1: 3/4 of the pixels wasted (22.5 KB): a finding.
    assert_eq!(flagged(&l, "images-scaled", None), 1);
    // DPR 2 needs all 200×200: nothing wasted.
    assert_eq!(flagged(&l, "images-scaled", Some(2.0)), 0);
    // DPR 1.75 (Lighthouse mobile): 175×175 needed, 23 % of 30 KB = 7 KB: a finding.
    assert_eq!(flagged(&l, "images-scaled", Some(1.75)), 1);
}

#[test]
fn webp_and_photo_png_estimates() {
    // A 300×300 JPEG: WebP 18,000 bytes, AVIF 15,000; a finding when
    // AVIF saves more than 8 KiB (23,192 bytes on the wire), Lighthouse's
    // threshold for every image.
    let mut jpg = entry("http://a.test/p.jpg", Kind::Image, "image/jpeg", 40_000);
    jpg.intrinsic = Some((300, 300));
    let l = page(jpg.clone());
    assert_eq!(flagged(&l, "images-format", None), 1);
    let a = audit(
        "http://a.test/",
        &l,
        None,
        Vec::new(),
        &[],
        &Probes::default(),
    );
    let c = a.checks.iter().find(|c| c.id == "images-format").unwrap();
    assert_eq!(c.findings[0].saving_bytes, Some(25_000), "{c:?}");
    assert!(c.findings[0].evidence.contains("as AVIF about"), "{c:?}");
    jpg.body_wire_bytes = 23_300;
    assert_eq!(flagged(&page(jpg.clone()), "images-format", None), 1);
    jpg.body_wire_bytes = 23_100;
    assert_eq!(flagged(&page(jpg), "images-format", None), 0);
    // A true-colour PNG photograph: named as such.
    let mut png = entry("http://a.test/p.png", Kind::Image, "image/png", 300_000);
    png.intrinsic = Some((300, 300));
    let mut head = vec![0u8; 32];
    head[25] = 2;
    png.body = Some(head);
    let l = page(png);
    let a = audit(
        "http://a.test/",
        &l,
        None,
        Vec::new(),
        &[],
        &Probes::default(),
    );
    let c = a.checks.iter().find(|c| c.id == "images-format").unwrap();
    assert!(
        c.findings[0].evidence.contains("likely a photograph"),
        "{c:?}"
    );
    assert_eq!(c.severity, super::Severity::Warning);
}

use super::shown;
use crate::viewport::{Viewport, DESKTOP, MOBILE};

const META: &str = "<meta name=viewport content=\"width=device-width\">";

/// A page of `html` loading `img` (intrinsic `w`×`h`, `wire` bytes),
/// discovered on `vp`.
fn loaded(html: &str, url: &str, (w, h): (u32, u32), wire: u64, vp: Viewport) -> Load {
    let mut img = entry(url, Kind::Image, "image/jpeg", wire);
    img.intrinsic = Some((w, h));
    let mut l = page(img);
    l.entries[0].body = Some(html.as_bytes().to_vec());
    l.discovery.viewport = vp;
    l
}

fn evidence(l: &Load) -> Vec<String> {
    let (c, _) = image_checks(l);
    c.findings.iter().map(|f| f.evidence.clone()).collect()
}

#[test]
fn sizes_gives_the_width_when_srcset_has_w_descriptors() {
    let html = format!(
        "{META}<img srcset=\"s.jpg 400w, l.jpg 1600w\" sizes=\"(max-width: 600px) 100vw, 300px\" src=l.jpg>"
    );
    let d = shown(html.as_bytes(), "http://a.test/", &DESKTOP, &[]);
    // Desktop: 300 px at DPR 1: 400w is the smallest reaching 1x.
    let s = &d["http://a.test/s.jpg"];
    assert_eq!((s.width, s.from, s.chosen), (Some(300.0), "sizes", true));
    assert!(!d.contains_key("http://a.test/l.jpg"));
    // Phone: 100vw = 412 px at 1.75 needs 721 w: 1600w is picked.
    let m = shown(html.as_bytes(), "http://a.test/", &MOBILE, &[]);
    assert_eq!(m["http://a.test/l.jpg"].width, Some(412.0));
    // The pick among candidates is not flagged (1600 for 721 needed).
    let l = loaded(&html, "http://a.test/l.jpg", (1600, 1200), 200_000, MOBILE);
    assert_eq!(evidence(&l), Vec::<String>::new());
}

#[test]
fn a_lone_w_candidate_is_judged_against_sizes() {
    // One 720w candidate: on a desktop it is shown at 200 px (waste);
    // on a phone at 412 px × 1.75 = 721 device px (none).
    let html =
        format!("{META}<img srcset=\"p.jpg 720w\" sizes=\"(max-width: 500px) 100vw, 200px\">");
    let l = loaded(&html, "http://a.test/p.jpg", (720, 540), 100_000, DESKTOP);
    let ev = evidence(&l);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(ev[0].contains("shown at 200×150 CSS px (sizes)"), "{ev:?}");
    let l = loaded(&html, "http://a.test/p.jpg", (720, 540), 100_000, MOBILE);
    assert_eq!(evidence(&l), Vec::<String>::new());
}

#[test]
fn plain_css_widths_override_the_attribute() {
    let html = format!(
        "{META}<style>/* hero */ img.hero {{ width: 360px }} @media (max-width: 600px) {{ img.hero {{ width: 100px }} }} .hero {{ width: 999px }} .wide {{ width: 50% }}</style>\
             <img class=hero src=h.jpg width=720><img class=wide src=w.jpg width=700><img src=s.jpg style=\"width: 10em; max-width: 120px\" width=700>"
    );
    let d = shown(html.as_bytes(), "http://a.test/", &DESKTOP, &[]);
    assert_eq!(d["http://a.test/h.jpg"].width, Some(360.0));
    assert_eq!(d["http://a.test/h.jpg"].from, "CSS width");
    // 50 % of the body's content box (1350 px less its 8 px margins).
    assert_eq!(d["http://a.test/w.jpg"].width, Some(667.0));
    assert_eq!(d["http://a.test/w.jpg"].from, "CSS width");
    // Inside a box whose width needs layout (a flex item), 50 % is not known:
    // not judged, rather than taken from the attribute.
    let flex = format!("{META}<style>.row {{ display: flex }} .wide {{ width: 50% }}</style><div class=row><div><img class=wide src=w.jpg width=700></div></div>");
    let f = shown(flex.as_bytes(), "http://a.test/", &DESKTOP, &[]);
    assert!(!f.contains_key("http://a.test/w.jpg"), "{f:?}");
    // style attribute 160 px capped at 120 px.
    assert_eq!(d["http://a.test/s.jpg"].width, Some(120.0));
    let m = shown(html.as_bytes(), "http://a.test/", &MOBILE, &[]);
    assert_eq!(m["http://a.test/h.jpg"].width, Some(100.0));
    // A fetched stylesheet counts too; a later rule of equal specificity wins.
    let sheet = "img.hero { width: 720px }";
    let d = shown(html.as_bytes(), "http://a.test/", &DESKTOP, &[sheet]);
    assert_eq!(d["http://a.test/h.jpg"].width, Some(360.0));
    let html2 = format!("{META}<img class=hero src=h.jpg>");
    let d = shown(html2.as_bytes(), "http://a.test/", &DESKTOP, &[sheet]);
    assert_eq!(d["http://a.test/h.jpg"].width, Some(720.0));
    // 720×480 at 30 KB shown at 360 px: a finding at DPR 1, none at 2.
    let l = loaded(&html, "http://a.test/h.jpg", (720, 480), 30_000, DESKTOP);
    assert_eq!(evidence(&l).len(), 1);
    let dpr2 = Viewport {
        dpr: 2.0,
        ..DESKTOP
    };
    let l = loaded(&html, "http://a.test/h.jpg", (720, 480), 30_000, dpr2);
    assert_eq!(evidence(&l).len(), 0);
}

#[test]
fn density_descriptors_and_picture_sources() {
    // x descriptors, no width: shown at intrinsic / density.
    let html = "<img src=a.jpg srcset=\"a2.jpg 2x\">";
    let hi = Viewport {
        dpr: 1.75,
        ..DESKTOP
    };
    let d = shown(html.as_bytes(), "http://a.test/", &hi, &[]);
    let s = &d["http://a.test/a2.jpg"];
    assert_eq!((s.width, s.density, s.chosen), (None, 2.0, true));
    // 800×800 2x picked at DPR 1.75 (700 needed): the browser's choice.
    let l = loaded(html, "http://a.test/a2.jpg", (800, 800), 100_000, hi);
    assert_eq!(evidence(&l).len(), 0);
    // <picture>: the first <source> whose media matches.
    let html = format!(
        "{META}<picture><source media=\"(max-width: 600px)\" srcset=\"m.jpg\"><source srcset=\"d.jpg 1000w\" sizes=\"500px\"><img src=f.jpg width=50></picture>"
    );
    let d = shown(html.as_bytes(), "http://a.test/x/", &DESKTOP, &[]);
    assert_eq!(d["http://a.test/x/d.jpg"].width, Some(500.0));
    let m = shown(html.as_bytes(), "http://a.test/x/", &MOBILE, &[]);
    assert_eq!(m["http://a.test/x/m.jpg"].width, Some(50.0));
    assert_eq!(m.len(), 1);
}

#[test]
fn malformed_markup_and_css_do_not_panic() {
    for html in [
        "", "<", "<img", "<img srcset=", "<img src='é.jpg", "<img src=\"x.jpg\" width=é",
        "<style>@media {", "<style>img { width: 10px", "<style>}}}{{{", "<!--", "<picture><source",
        "<img class=a style=\"width:\"><style>.a.{width:5px} #{width:1px} img..b{width:2px}</style>",
        "<base href=\"::\"><img src=a.jpg>", "é<ïmg src=a.jpg>ü", "<script>",
    ] {
        let _ = shown(html.as_bytes(), "http://a.test/", &DESKTOP, &["@media (", "/*", "a{width:1px"]);
    }
    let d = shown(b"<img src=a.jpg width=5>", "not a url", &DESKTOP, &[]);
    assert!(d.is_empty());
}

#[test]
fn print_and_alternate_sheets_do_not_hide_images() {
    // 720×480 at 30 KB shown at 100 px: a finding when shown at all.
    let page_with = |links: &str, names: &[&str]| {
        let html = format!("{META}{links}<img src=h.jpg width=100>");
        let mut l = loaded(&html, "http://a.test/h.jpg", (720, 480), 30_000, DESKTOP);
        for name in names {
            let mut css = entry(
                &format!("http://a.test/{name}"),
                Kind::Stylesheet,
                "text/css",
                100,
            );
            css.body = Some(b"img { display: none }".to_vec());
            l.entries.push(css);
        }
        evidence(&l).len()
    };
    // Fetched (Chromium fetches them too) but not applied: the image shows.
    assert_eq!(
        page_with(
            "<link rel=stylesheet media=print href=p.css><link rel='alternate stylesheet' title=x href=a.css>",
            &["p.css", "a.css"]
        ),
        1
    );
    // The same rule in a sheet that applies hides it: not judged.
    assert_eq!(page_with("<link rel=stylesheet href=s.css>", &["s.css"]), 0);
}

#[test]
fn imported_sheets_come_before_their_importer_in_the_cascade() {
    let html = format!("{META}<link rel=stylesheet href=s.css><img src=h.jpg>");
    let mut l = loaded(&html, "http://a.test/h.jpg", (720, 480), 30_000, DESKTOP);
    let n = l.entries.len();
    for (name, body, parent) in [
        ("s.css", "@import 'i.css'; img { width: 50px }", 0),
        ("i.css", "img { width: 300px }", n),
    ] {
        let mut css = entry(
            &format!("http://a.test/{name}"),
            Kind::Stylesheet,
            "text/css",
            100,
        );
        css.body = Some(body.as_bytes().to_vec());
        css.parent = Some(parent);
        l.entries.push(css);
    }
    let ev = evidence(&l);
    assert!(ev.len() == 1 && ev[0].contains("shown at 50×"), "{ev:?}");
}

#[test]
fn max_width_caps_an_intrinsic_width() {
    // A 1600×1200 photo with `max-width: 100%` in a 600 px column.
    let html = format!(
        "{META}<style>.col {{ width: 600px }} img {{ max-width: 100% }}</style><div class=col><img src=h.jpg></div>"
    );
    let l = loaded(&html, "http://a.test/h.jpg", (1600, 1200), 200_000, DESKTOP);
    let ev = evidence(&l);
    assert!(
        ev.len() == 1 && ev[0].contains("shown at 600×450 CSS px (max-width)"),
        "{ev:?}"
    );
    // In a flex item the column's width is layout: not judged.
    let html = format!(
        "{META}<style>.row {{ display: flex }} img {{ max-width: 100% }}</style><div class=row><div><img src=h.jpg></div></div>"
    );
    let l = loaded(&html, "http://a.test/h.jpg", (1600, 1200), 200_000, DESKTOP);
    assert!(evidence(&l).is_empty());
}

#[test]
fn flex_items_get_the_width_the_row_gives_them() {
    // Desktop: the body's content box is 1334 px.
    let css = ".row { display: flex } .side { flex: 0 0 300px } .main { flex: 1; padding: 0 12px }\
               .doc { display: flex } .wrap { float: left; width: 100% } .body { margin-left: 230px }\
               .bar { width: 230px; margin-left: -100% } .basis { flex-basis: 40%; max-width: 300px }\
               .g { display: flex; width: 900px } .ga { width: 100px; flex-grow: 1 } .gb { width: 100px; flex-grow: 3 }\
               .s { display: flex; width: 1000px } .s > div { width: 800px } .s > .z { min-width: 0 }\
               img { max-width: 100% }";
    let html = format!(
        "{META}<style>{css}</style>\
         <div class=row><div class=side></div><div class=main><img src=a.jpg></div></div>\
         <div class=doc><div class=wrap><div class=body><img src=b.jpg></div></div><div class=bar></div><div class=clearer></div></div>\
         <div class=row><img src=c.jpg style=\"flex: 0 0 200px; min-width: 0\" width=800><div class=basis><img src=d.jpg></div></div>\
         <div class=g><div class=ga><img src=e.jpg></div><div class=gb><img src=f.jpg></div></div>\
         <div class=s><div><img src=h.jpg></div><div><img src=i.jpg></div></div>\
         <div class=s><div class=z><img src=j.jpg></div><div class=z><img src=k.jpg></div></div>\
         <div class=row><div>text sized<img src=l.jpg></div></div>\
         <div class=row><img src=m.jpg style=\"flex: 0 0 200px\" width=800><img src=n.jpg style=\"flex: 0 0 200px\"></div>"
    );
    let d = shown(html.as_bytes(), "http://a.test/", &DESKTOP, &[]);
    let cap = |f: &str| {
        d.get(&format!("http://a.test/{f}"))
            .map(|s| s.max.or(s.width))
    };
    // `flex: 1` beside a 300 px column: 1334 - 300 - 24 of padding.
    assert_eq!(cap("a.jpg"), Some(Some(1010.0)));
    // A `width: 100%` item beside a sidebar pulled back by its margin.
    assert_eq!(cap("b.jpg"), Some(Some(1104.0)));
    // The basis, not the attribute; 40 % capped at 300 px.
    assert_eq!(cap("c.jpg"), Some(Some(200.0)));
    assert_eq!(cap("d.jpg"), Some(Some(300.0)));
    // 700 px of free space shared 1:3.
    assert_eq!(cap("e.jpg"), Some(Some(275.0)));
    assert_eq!(cap("f.jpg"), Some(Some(625.0)));
    // Shrunk below their width with `min-width: auto`: their content may
    // hold them: not known. With `min-width: 0`: 500 px each.
    assert_eq!(cap("h.jpg"), None);
    assert_eq!(cap("i.jpg"), None);
    assert_eq!(cap("j.jpg"), Some(Some(500.0)));
    assert_eq!(cap("k.jpg"), Some(Some(500.0)));
    // An item sized by its text: not known.
    assert_eq!(cap("l.jpg"), None);
    // An image item keeps at least the smaller of its specified and its
    // own width (`min-width: auto`): 800 px or less, not 200; unknown.
    assert_eq!(cap("m.jpg"), None);
    assert_eq!(cap("n.jpg"), None);
}

/// The images-scaled and images-format checks of `l`.
fn image_checks(l: &Load) -> (super::Check, super::Check) {
    let a = audit(
        "http://a.test/",
        l,
        None,
        Vec::new(),
        &[],
        &Probes::default(),
    );
    let c = |id: &str| a.checks.iter().find(|c| c.id == id).unwrap().clone();
    (c("images-scaled"), c("images-format"))
}

#[test]
fn an_image_fetched_without_an_element_is_judged_for_format_not_size() {
    // sqlite.org's home page: a 300×300 JPEG the page fetched (a preload,
    // a CSS background: no <img> names it), and an inline script that
    // builds its sponsors' <img> markup into `innerHTML`.
    let html = format!(
        "{META}<div id=s></div><script>var h = \"<img src='images/\" + n + \"'>\";\n\
         document.getElementById(\"s\").innerHTML = h;</script>"
    );
    let l = loaded(&html, "http://a.test/p.jpg", (300, 300), 40_000, DESKTOP);
    let (scaled, format) = image_checks(&l);
    // Bytes alone decide the format: judged, flagged.
    assert_eq!(format.findings.len(), 1, "{format:?}");
    assert_eq!(
        format.findings[0].url.as_deref(),
        Some("http://a.test/p.jpg")
    );
    // No element, no display size: not judged, and said so.
    assert!(scaled.findings.is_empty(), "{scaled:?}");
    assert!(
        scaled.summary.contains("1 fetched, not judged"),
        "{}",
        scaled.summary
    );
    // The images the script inserts are named as not seen, in both checks.
    for c in [&scaled, &format] {
        assert!(
            c.summary
                .contains("an inline script of http://a.test/ inserts images at run time"),
            "{}",
            c.summary
        );
    }
    // A script that writes no image markup gets no such note.
    let html = format!("{META}<script>document.title = \"<b>\";</script><img src=p.jpg>");
    let l = loaded(&html, "http://a.test/p.jpg", (300, 300), 40_000, DESKTOP);
    let (scaled, format) = image_checks(&l);
    assert!(!scaled.summary.contains("run time"), "{}", scaled.summary);
    assert!(!format.summary.contains("run time"), "{}", format.summary);
    assert!(!scaled.summary.contains("not judged"), "{}", scaled.summary);
}
