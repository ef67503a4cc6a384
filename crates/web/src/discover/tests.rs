//! Unit tests of `discover.rs`, kept in their own file so that file reads as its job.

use super::*;
use crate::viewport::{DESKTOP, MOBILE};

fn urls(v: &[Embed]) -> Vec<(String, Kind)> {
    v.iter().map(|e| (e.url.clone(), e.kind)).collect()
}

#[test]
fn finds_the_usual_references() {
    let html = br#"<!doctype html><html><head><base href="/b/">
<link rel="stylesheet" href="a.css?x=1&amp;y=2"><link rel=icon href=/fav.ico>
<link rel="preload" as="font" href="f.woff2"><link rel="alternate stylesheet" href="alt.css">
<!-- <img src="commented.png"> -->
<script>var s = "<img src='inscript.png'>";</script>
<script src='app.js'></script>
<style>body { background: url("bg.png") } @import "more.css";</style>
</head><body>
<img src="i.png" width="100" height="50px" alt='x > y'>
<img srcset="s1.jpg 1x, s2.jpg 2x">
<picture><source srcset="p.webp 800w"><img src="p.jpg"></picture>
<video poster="v.jpg"></video><iframe src="frame.html"></iframe>
<div style="background-image:url(div.gif)"></div>
<template><img src="t.png"></template><noscript><img src="n.png"></noscript>
<script type="text/template" src="tpl.js"></script><script nomodule src="old.js"></script>
<link rel="apple-touch-icon" href="apple.png"><link rel="stylesheet" href="off.css" disabled>
</body></html>"#;
    let s = scan_html(html, &DESKTOP);
    assert_eq!(s.base.as_deref(), Some("/b/"));
    let want = [
        ("a.css?x=1&y=2", Kind::Stylesheet),
        ("/fav.ico", Kind::Image),
        ("f.woff2", Kind::Font),
        ("alt.css", Kind::Stylesheet),
        ("app.js", Kind::Script),
        ("i.png", Kind::Image),
        ("s1.jpg", Kind::Image),
        ("p.webp", Kind::Image),
        ("v.jpg", Kind::Image),
        ("frame.html", Kind::Iframe),
    ];
    let want: Vec<(String, Kind)> = want.iter().map(|(a, b)| (a.to_string(), *b)).collect();
    assert_eq!(urls(&s.embeds), want);
    assert_eq!(
        s.embeds[3].sheet,
        Some((1, false)),
        "alternate: fetched, not applied"
    );
    let img = s.embeds.iter().find(|e| e.url == "i.png").unwrap();
    assert_eq!((img.width, img.height), (Some(100), Some(50)));
    assert!(s.inline_script_bytes > 10);
    assert!(s.inline_style_bytes > 10);
    assert_eq!(s.styles.len(), 1);
    assert!(s.styles[0].2);
    assert_eq!(s.style_attrs, ["background-image:url(div.gif)"]);
    assert!(s.has_icon);
    assert!(s.presence.tags.contains("picture") && !s.presence.tags.contains("template"));
}

#[test]
fn lazy_and_mobile_layout() {
    let html = br#"<img src="a.jpg" loading="lazy"><div style="height: 5000px"></div>
<img src="b.jpg" loading="lazy"><img src="c.jpg"><iframe loading=lazy src="f.html"></iframe>"#;
    let s = scan_html(html, &DESKTOP);
    assert_eq!(urls(&s.embeds).len(), 2);
    assert_eq!(
        urls(&s.deferred),
        [
            ("b.jpg".to_string(), Kind::Image),
            ("f.html".to_string(), Kind::Iframe)
        ]
    );
    let m = scan_html(
        b"<img srcset='a.jpg 500w, b.jpg 1000w, c.jpg 2000w'>",
        &MOBILE,
    );
    assert_eq!(m.layout.width, 980);
    // The preload scanner's pick (412 px) and layout's (980 px).
    let got: Vec<&str> = m.embeds.iter().map(|e| e.url.as_str()).collect();
    assert_eq!(got, ["b.jpg", "c.jpg"]);
    let m = scan_html(b"<meta name=viewport content='width=device-width, initial-scale=1'><img srcset='a.jpg 500w, b.jpg 1000w, c.jpg 2000w'>", &MOBILE);
    assert_eq!(m.layout.width, 412);
    assert_eq!(m.embeds[0].url, "b.jpg");
}

#[test]
fn scope() {
    let u = |s: &str| Url::parse(s).unwrap();
    for s in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://metadata.google.internal/x",
        "http://METADATA.GOOGLE.INTERNAL./",
        "http://100.100.100.200/",
    ] {
        assert!(is_link_local_or_metadata(&u(s)), "{s}");
    }
    for s in [
        "http://127.0.0.1/",
        "http://example.com/",
        "http://[::1]/",
        "http://169.255.0.1/",
    ] {
        assert!(!is_link_local_or_metadata(&u(s)), "{s}");
    }
    let mut s = Session::new(&u("http://127.0.0.1:8080/"), DESKTOP, true);
    assert!(s.allowed(&u("http://127.0.0.1:8080/a.css"), Kind::Stylesheet));
    assert!(!s.allowed(&u("http://127.0.0.1:8081/a.css"), Kind::Stylesheet));
    assert!(!s.allowed(&u("http://169.254.169.254/"), Kind::Image));
    assert_eq!(s.notes.blocked.len(), 2);
    // A page on a link-local address may load from it.
    let mut s = Session::new(&u("http://169.254.1.1/"), DESKTOP, false);
    assert!(s.allowed(&u("http://169.254.1.1/x.png"), Kind::Image));
}

#[test]
fn garbage_does_not_panic() {
    for s in [
        &b"<"[..],
        b"<a",
        b"<img src=\"",
        b"<script>",
        b"<!--",
        b"<style>url(",
        b"&#xffffffff;",
        b"<template>",
        b"</template></template><picture><source srcset=",
        b"<noscript>",
    ] {
        let _ = scan_html(s, &DESKTOP);
        let _ = scan_html(s, &MOBILE);
    }
    assert_eq!(decode_entities("a&#x41;&bogus;&amp;"), "aA&bogus;&");
}

/// Every parser on many small inputs mixing markup, CSS, JS and
/// multi-byte characters: no panic, bounded output.
#[test]
fn mixed_garbage_never_panics() {
    let parts = [
        "<",
        ">",
        "/",
        "=",
        "\"",
        "'",
        "(",
        ")",
        "{",
        "}",
        ";",
        ",",
        ":",
        "@",
        "#",
        ".",
        " ",
        "\n",
        "url(",
        "image-set(",
        "@import",
        "@media",
        "@font-face",
        "src:",
        "format(",
        "srcset=",
        "sizes=",
        "1x",
        "2×",
        "100w",
        "\u{3000}",
        "é",
        "😀",
        "import",
        "export",
        "from",
        "*",
        "<img",
        "<picture>",
        "<source",
        "<template>",
        "</template>",
        "<noscript>",
        "<script",
        "<style>",
        "<link rel=stylesheet href=",
        "(min-width:",
        "px)",
        "calc(",
        "vw",
        "!important",
        "/*",
        "*/",
        "//",
        "`",
        "${",
        "&amp;",
        "&#x",
        "type=module",
        "loading=lazy",
        "media=",
    ];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..3000 {
        let mut s = String::new();
        for _ in 0..(x % 24) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.push_str(parts[(x % parts.len() as u64) as usize]);
        }
        x = x.wrapping_add(0x9E37_79B9);
        for vp in [DESKTOP, MOBILE] {
            let _ = scan_html(s.as_bytes(), &vp);
            let _ = crate::css::parse(s.as_bytes(), &vp);
            let _ = crate::css::value_urls(&s, &vp);
            let _ = crate::css::font_src(&s);
            let _ = crate::srcset::pick(Some(&s), Some(&s), Some(&s), &vp);
            let _ = vp.matches_media(&s);
            let _ = crate::viewport::length_px(&s, &vp);
        }
        let _ = crate::modules::scan(s.as_bytes());
        let doc = scan_html(s.as_bytes(), &DESKTOP);
        let sheet = crate::css::parse(s.as_bytes(), &DESKTOP);
        let rules: Vec<(&crate::css::Rule, usize)> = sheet.rules.iter().map(|r| (r, 0)).collect();
        let _ = crate::dom::cascade(&doc.tree, &rules, &[], 0);
        let _ = crate::dom::parse_selector(&s);
        let _ = crate::css::could_match(&s, &Presence::default());
        let _ = crate::viewport::parse_size(&s);
        let _ = crate::viewport::parse_dpr(&s);
    }
}
