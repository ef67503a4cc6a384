//! Unit tests of `css.rs`, kept in their own file so that file reads as its job.

use super::*;
use crate::viewport::{DESKTOP, MOBILE};

#[test]
fn structure() {
    let css = br#"@charset "utf-8"; @import url("a.css"); @import 'p.css' print;
@import url(l.css) layer(base) screen and (min-width: 900px);
/* .x { background: url(comment.png) } */
@font-face { font-family: "Brand Sans"; src: url(b.eot); src: url(b.eot?#iefix) format("embedded-opentype"), url(b.woff2) format("woff2"), url(b.woff) format("woff"); font-weight: 700; }
@font-face { font-family: Icons; src: url(i.svg#x) format("svg"), url(i.ttf) format("truetype"); }
body { font: italic bold 16px/1.5 "Brand Sans", sans-serif; background: url(bg.png) no-repeat }
@media (max-width: 600px) { .m { background-image: url(mobile.png) } }
@media print { .p { background: url(print.png) } }
@keyframes k { from { background: url(kf.png) } }
.hero { background-image: image-set("h1.jpg" 1x, "h2.jpg" 2x); }
a:hover { background: url(hover.png) }
"#;
    let s = parse(css, &DESKTOP);
    let imports: Vec<(&str, &str)> = s
        .imports
        .iter()
        .map(|i| (i.url.as_str(), i.media.as_str()))
        .collect();
    assert_eq!(
        imports,
        [
            ("a.css", ""),
            ("p.css", "print"),
            ("l.css", "screen and (min-width: 900px)")
        ]
    );
    assert_eq!(s.faces.len(), 2);
    assert_eq!(s.faces[0].family, "brand sans");
    assert_eq!(s.faces[0].src.as_deref(), Some("b.woff2"));
    assert_eq!(s.faces[0].weight, (700, 700));
    assert_eq!(s.faces[1].src.as_deref(), Some("i.ttf"));
    let urls: Vec<String> = s.rules.iter().flat_map(|r| r.urls()).collect();
    assert_eq!(urls, ["bg.png", "h1.jpg", "hover.png"]);
    assert_eq!(s.rules[0].families, ["brand sans", "sans-serif"]);
    assert_eq!(s.rules[0].weight, Some(700));
    assert!(s.rules[0].italic);
    let m = parse(css, &MOBILE);
    let urls: Vec<String> = m.rules.iter().flat_map(|r| r.urls()).collect();
    assert_eq!(urls, ["bg.png", "mobile.png", "h2.jpg", "hover.png"]);
}

#[test]
fn selectors() {
    let mut d = Presence::default();
    for t in ["html", "body", "div", "p", "a"] {
        d.tags.insert(t.into());
    }
    d.ids.insert("main".into());
    d.classes.insert("card".into());
    assert!(could_match("div.card", &d));
    assert!(could_match("#main > p, .nope", &d));
    assert!(!could_match(".nope", &d));
    assert!(!could_match("section .card", &d));
    assert!(!could_match("a:hover", &d));
    assert!(could_match("a:not(.x)::before", &d));
    assert!(could_match("[data-x] p:nth-child(2n+1)", &d));
    assert!(could_match("*", &d));
}

#[test]
fn unicode_range_and_content_strings() {
    assert_eq!(
        unicode_ranges("U+0000-00FF, U+0131, u+4??, U+zz, U+200-100"),
        [(0, 0xff), (0x131, 0x131), (0x400, 0x4ff)]
    );
    assert_eq!(string_chars(r#""\e900""#), "\u{e900}");
    assert_eq!(string_chars(r#"'→ ' attr(x) "a\"b""#), "→ a\"b");
}

#[test]
fn hostile_input_does_not_panic() {
    for s in [
        "{",
        "}",
        "@media {",
        "a{b:url(",
        "@import url(",
        "@font-face{src:url(x",
        "a{background:image-set(",
        "@import 'x",
        ":(",
        "#",
    ] {
        let _ = parse(s.as_bytes(), &DESKTOP);
        let _ = could_match(s, &Presence::default());
    }
}
