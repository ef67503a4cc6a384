//! Finding what a page loads, by the rules a browser follows for a given
//! screen ([`Viewport`]): a small, forgiving HTML tag scanner and a
//! [`Session`] that turns each fetched document, stylesheet and module into
//! the next fetches. Checked request for request against headless Chromium
//! by tests/browser.rs. What it follows:
//!
//! - Nothing inside `<template>`, `<noscript>` (scripting is on, so its
//!   content is raw text), comments or other raw-text elements.
//! - Scripts whose `type` is JavaScript or `module` (not `nomodule` ones);
//!   module graphs through static `import`/`export … from` (and the page's
//!   import map), transitively; `modulepreload` fetches the module alone;
//!   dynamic `import()` is noted as not followed.
//! - `<link>`: `stylesheet` (also `alternate stylesheet`, which Chromium
//!   fetches but does not apply; not `disabled` ones or a `type` other than
//!   text/css), every `icon` (else `/favicon.ico`), `manifest`, `preload`
//!   (with a valid `as`; `imagesrcset` chosen like `srcset`), `prefetch`,
//!   `modulepreload`; not `apple-touch-icon`, `mask-icon`, `prerender`,
//!   `dns-prefetch`, `preconnect` and the rest.
//! - `<video>`/`<audio>`: `src`, else the first `<source>` whose `type`
//!   plays (none with `preload=none`); `poster`. (A source that fails makes
//!   the browser try the next: not modelled.)
//! - `<object data>`, `<embed src>`, SVG `<image href>` and external `<use
//!   href>`, `<input type=image>`, `background` attributes.
//! - Images: one `srcset`/`sizes` candidate ([`crate::srcset`]); in
//!   `<picture>`, the first `<source>` whose `type` Chromium decodes and whose
//!   `media` matches. On a mobile screen a page without `<meta
//!   name=viewport content="width=device-width">` is laid out 980 px wide,
//!   as Chromium does.
//! - `loading=lazy` images and iframes below the first screen are deferred
//!   (listed, not fetched). Layout-free estimate: an element's top is the sum
//!   of the `height` attributes and inline `height`/`min-height` (px) of the
//!   elements before it, plus 20 px per paragraph-like block; it is deferred
//!   when that exceeds the viewport height plus Chromium's distance-from-
//!   viewport margin (1250 px for images, 4000 px for iframes; Chromium's
//!   values for a fast connection).
//! - Stylesheets are fetched whatever their media (as Chromium does, imports
//!   too), but only those that apply (media matching, not alternate) load
//!   images and fonts, and only once every stylesheet of the document has
//!   arrived: then the cascade runs on the element tree ([`crate::dom`]):
//!   each element's and `::before`/`::after` box's image properties go to
//!   the winning declaration (specificity, then order; `style` attributes
//!   last), nothing is loaded for boxes that `display: none`, `hidden` or
//!   the UA stylesheet take out, and a pseudo-element exists only with
//!   `content`. (Past [`crate::dom::MAX_NODES`] elements: the presence test
//!   [`crate::css::could_match`] and a cascade by selector text instead.)
//! - Fonts: for every rendered box (Chromium loads the primary font of an
//!   empty box too), the first family of its computed `font-family` that has
//!   an `@font-face`, at its computed weight and style (inherited; `h1`…`h6`,
//!   `b`, `strong`, `th` bold, `i`, `em`, `cite`… italic), the face CSS font
//!   matching picks, one `src` each ([`crate::css::font_src`]); of a
//!   family split by `unicode-range`, the segments that cover the box's
//!   characters (and U+0020, which picks the first available font).
//! - Not modelled: layout (a box off-screen or of zero size still loads
//!   its background), `:not()`/`:is()` contents and attribute selectors
//!   (taken as matching), `local()` fonts, scripts that fetch or insert
//!   elements, a failing `<source>` making the browser try the next; an
//!   image a later stylesheet overrides (Chromium sometimes fetches it
//!   anyway when a style pass ran before that sheet arrived: timing); and
//!   whatever decides Chromium's preload scanner beyond what is below.
//! - On a phone, a page without a device-width viewport `<meta>` (before
//!   its images) gets two candidates per responsive image when they differ:
//!   Chromium's preload scanner picks for the device width, layout for
//!   980 px, and both are fetched.
//! - Scope: never link-local addresses (169.254.0.0/16, fe80::/10) or cloud
//!   metadata names unless the page itself is there; `--same-origin` keeps
//!   every fetch on the page's origin. Skipped fetches are noted.
//!
//! A hand scanner, not an HTML5 tokenizer crate (html5ever, html5gum): the
//! loader needs references and a few attributes, never a tree; raw-text,
//! `<noscript>` and `<template>` handling are the only tree-builder rules
//! that change what is fetched, and they are a few lines here, tested
//! against Chromium.

use crate::css::{self, Presence, Sheet};
use crate::modules::{self, ImportMap};
use crate::viewport::{length_px, Viewport};
use std::collections::{HashMap, HashSet};
use url::Url;

/// What an embedded reference is, which decides how it is fetched and parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The page itself, or an iframe's document.
    Document,
    /// `<iframe src>` (nested up to [`MAX_FRAME_DEPTH`]).
    Iframe,
    /// A stylesheet (`link rel=stylesheet`, CSS `@import`).
    Stylesheet,
    /// `<script src>`, `modulepreload`.
    Script,
    /// `<img>`, `<picture><source>`, `poster`, CSS `url()` images, icons.
    Image,
    /// A font (`preload as=font`, CSS `url()` of a font file).
    Font,
    /// `link rel=preload` of another type, `<video>`/`<audio>` sources.
    #[default]
    Other,
}

/// One reference found in HTML or CSS.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Embed {
    /// The reference as written (entities decoded), not yet resolved.
    pub url: String,
    /// What it is.
    pub kind: Kind,
    /// `width` attribute of an `<img>` (CSS pixels), when a plain number.
    pub width: Option<u32>,
    /// `height` attribute of an `<img>`, when a plain number.
    pub height: Option<u32>,
    /// A module script (`type=module`, `modulepreload`): its imports count.
    pub module: bool,
    /// `modulepreload`: fetched alone, imports not followed.
    pub preload_only: bool,
    /// A stylesheet: its place among the document's sheets (cascade order)
    /// and whether it applies (media matches, not alternate).
    pub sheet: Option<(u32, bool)>,
}

/// What the HTML scanner found.
#[derive(Clone, Debug, Default)]
pub struct HtmlScan {
    /// References to fetch now, in document order, duplicates kept.
    pub embeds: Vec<Embed>,
    /// `loading=lazy` images and iframes below the first screen.
    pub deferred: Vec<Embed>,
    /// `<base href>`, if any.
    pub base: Option<String>,
    /// Bytes inside `<style>` elements.
    pub inline_style_bytes: usize,
    /// Bytes inside `<script>` elements without `src`.
    pub inline_script_bytes: usize,
    /// `<style>` contents with their place among the sheets and whether
    /// their `media` matches (their imports are fetched either way).
    pub styles: Vec<(u32, String, bool)>,
    /// `style` attributes (outside template/noscript).
    pub style_attrs: Vec<String>,
    /// `<iframe srcdoc>` documents.
    pub srcdocs: Vec<String>,
    /// Inline `<script type=module>` sources.
    pub inline_modules: Vec<String>,
    /// `<script type=importmap>` sources.
    pub import_maps: Vec<String>,
    /// Elements, ids and classes present.
    pub presence: Presence,
    /// The element tree (for the cascade).
    pub tree: crate::dom::Tree,
    /// A `<link rel=icon>` was declared.
    pub has_icon: bool,
    /// The screen the document is laid out on (mobile without a
    /// `width=device-width` viewport: 980 px wide).
    pub layout: Viewport,
}

/// Image types Chromium decodes (a `<source type>` outside this list is skipped).
const IMAGE_TYPES: [&str; 12] = [
    "image/avif",
    "image/webp",
    "image/jxl",
    "image/png",
    "image/apng",
    "image/jpeg",
    "image/jpg",
    "image/gif",
    "image/svg+xml",
    "image/bmp",
    "image/x-icon",
    "image/vnd.microsoft.icon",
];

/// Media types Chromium plays (a `<source type>` outside this list is skipped).
const PLAYABLE: [&str; 12] = [
    "video/mp4",
    "video/webm",
    "video/ogg",
    "audio/mpeg",
    "audio/mp3",
    "audio/ogg",
    "audio/wav",
    "audio/webm",
    "audio/mp4",
    "audio/aac",
    "audio/flac",
    "application/ogg",
];

/// Script `type`s that are JavaScript (the HTML standard's list) or a module.
fn script_kind(t: Option<&str>) -> Option<bool> {
    let t = t.unwrap_or("").trim().to_ascii_lowercase();
    let t = t.split(';').next().unwrap_or("").trim();
    if t == "module" {
        return Some(true);
    }
    let js = t.is_empty()
        || matches!(
            t,
            "text/javascript"
                | "application/javascript"
                | "application/ecmascript"
                | "application/x-ecmascript"
                | "application/x-javascript"
                | "text/ecmascript"
                | "text/javascript1.0"
                | "text/javascript1.1"
                | "text/javascript1.2"
                | "text/javascript1.3"
                | "text/javascript1.4"
                | "text/javascript1.5"
                | "text/jscript"
                | "text/livescript"
                | "text/x-ecmascript"
                | "text/x-javascript"
        );
    js.then_some(false)
}

/// Iframes inside iframes are followed this deep (a bound; Chromium has none).
pub const MAX_FRAME_DEPTH: u8 = 4;

/// Chromium's lazy-load margins below the viewport (px).
const LAZY_IMAGE_MARGIN: f64 = 1250.0;
const LAZY_FRAME_MARGIN: f64 = 4000.0;
/// The estimated height of a paragraph-like block (px).
const BLOCK_PX: f64 = 20.0;

fn style_height(style: &str, vp: &Viewport) -> f64 {
    let mut h: f64 = 0.0;
    for d in style.split(';') {
        if let Some((n, v)) = d.split_once(':') {
            let n = n.trim().to_ascii_lowercase();
            if n == "height" || n == "min-height" {
                if let Some(px) = length_px(v.trim().trim_end_matches("!important"), vp) {
                    h = h.max(px);
                }
            }
        }
    }
    h
}

struct Picture {
    /// The chosen `<source>`'s srcset and sizes.
    chosen: Option<(String, Option<String>)>,
    /// The same choice by Chromium's preload scanner (device width).
    chosen_pre: Option<(String, Option<String>)>,
}

/// Scans HTML for what a browser with screen `vp` fetches.
pub fn scan_html(html: &[u8], vp: &Viewport) -> HtmlScan {
    let mut out = HtmlScan {
        layout: if vp.mobile {
            Viewport { width: 980, ..*vp }
        } else {
            *vp
        },
        ..HtmlScan::default()
    };
    for t in ["html", "head", "body"] {
        out.presence.tags.insert(t.to_string());
    }
    out.tree = crate::dom::Tree::new();
    let n = html.len();
    let mut i = 0;
    let mut template = 0u32;
    let mut picture: Option<Picture> = None;
    // Inside <video>/<audio>: (preload=none, a source was taken).
    let mut media: Option<(bool, bool)> = None;
    let mut y = 0.0f64;
    let mut sheet_no = 0u32;
    while i < n {
        if html[i] != b'<' {
            let end = html[i..]
                .iter()
                .position(|&b| b == b'<')
                .map_or(n, |p| i + p);
            let seg = &html[i..end];
            if template == 0 && !seg.iter().all(u8::is_ascii_whitespace) {
                out.tree.text(&String::from_utf8_lossy(seg));
            }
            i = end;
            continue;
        }
        if html[i..].starts_with(b"<!--") {
            i = match find_ci(html, i + 4, b"-->") {
                Some(e) => e + 3,
                None => n,
            };
            continue;
        }
        if i + 1 < n && html[i + 1] == b'/' {
            let ns = i + 2;
            let mut ne = ns;
            while ne < n && is_name_byte(html[ne]) {
                ne += 1;
            }
            let name = String::from_utf8_lossy(&html[ns..ne]).to_ascii_lowercase();
            if template == 0 {
                out.tree.close(&name);
            }
            match name.as_str() {
                "template" => template = template.saturating_sub(1),
                "picture" => picture = None,
                "video" | "audio" => media = None,
                _ => {}
            }
            i = html[i..]
                .iter()
                .position(|&b| b == b'>')
                .map_or(n, |p| i + p + 1);
            continue;
        }
        if i + 1 < n && (html[i + 1] == b'!' || html[i + 1] == b'?') {
            i = html[i..]
                .iter()
                .position(|&b| b == b'>')
                .map_or(n, |p| i + p + 1);
            continue;
        }
        if i + 1 >= n || !html[i + 1].is_ascii_alphabetic() {
            i += 1;
            continue;
        }
        let ns = i + 1;
        let mut ne = ns;
        while ne < n && is_name_byte(html[ne]) {
            ne += 1;
        }
        let name = String::from_utf8_lossy(&html[ns..ne]).to_ascii_lowercase();
        // The tag ends at the first '>' outside quotes.
        let mut j = ne;
        let mut q = 0u8;
        while j < n {
            let b = html[j];
            if q != 0 {
                if b == q {
                    q = 0;
                }
            } else if b == b'"' || b == b'\'' {
                q = b;
            } else if b == b'>' {
                break;
            }
            j += 1;
        }
        let attrs = parse_attrs(&html[ne..j.min(n)]);
        i = (j + 1).min(n);
        let raw_end = |i: usize, name: &str| {
            let close = format!("</{name}");
            find_ci(html, i, close.as_bytes()).unwrap_or(n)
        };
        let skip_past = |end: usize| {
            html[end..]
                .iter()
                .position(|&b| b == b'>')
                .map_or(n, |p| end + p + 1)
        };
        if name == "template" {
            template += 1;
            continue;
        }
        if name == "noscript" {
            // Scripting on: raw text, nothing in it is loaded.
            if template == 0 {
                out.tree.open(&name, &attrs, true);
            }
            i = skip_past(raw_end(i, "noscript"));
            continue;
        }
        let inert = template > 0;
        if !inert {
            out.presence.tags.insert(name.clone());
            if let Some(id) = attr(&attrs, "id") {
                out.presence.ids.insert(id.to_string());
            }
            if let Some(c) = attr(&attrs, "class") {
                for c in c.split_ascii_whitespace() {
                    out.presence.classes.insert(c.to_string());
                }
            }
            if let Some(st) = attr(&attrs, "style") {
                out.style_attrs.push(st.to_string());
            }
            let raw = matches!(
                name.as_str(),
                "script" | "style" | "textarea" | "title" | "xmp"
            );
            out.tree.open(&name, &attrs, raw);
        }
        if matches!(
            name.as_str(),
            "script" | "style" | "textarea" | "title" | "xmp"
        ) {
            let end = raw_end(i, &name);
            let content = &html[i..end];
            if !inert {
                if name == "style" {
                    out.inline_style_bytes += content.len();
                    let media_ok = out
                        .layout
                        .matches_media(attr(&attrs, "media").unwrap_or(""));
                    out.styles.push((
                        sheet_no,
                        String::from_utf8_lossy(content).into_owned(),
                        media_ok,
                    ));
                    sheet_no += 1;
                } else if name == "script" {
                    handle_script(&attrs, content, &mut out);
                }
            }
            i = skip_past(end);
            continue;
        }
        if inert {
            continue;
        }
        let lazy = attr(&attrs, "loading").is_some_and(|l| l.eq_ignore_ascii_case("lazy"));
        let own_h = dim(attr(&attrs, "height")).map_or(0.0, f64::from);
        let style_h = attr(&attrs, "style").map_or(0.0, |s| style_height(s, &out.layout));
        let top = y;
        y += own_h.max(style_h);
        if matches!(
            name.as_str(),
            "p" | "h1"
                | "h2"
                | "h3"
                | "h4"
                | "h5"
                | "h6"
                | "li"
                | "tr"
                | "pre"
                | "blockquote"
                | "dt"
                | "dd"
                | "figcaption"
        ) {
            y += BLOCK_PX;
        }
        let below = |margin: f64| top > f64::from(out.layout.height) + margin;
        match name.as_str() {
            "meta"
                if vp.mobile
                    && attr(&attrs, "name").is_some_and(|v| v.eq_ignore_ascii_case("viewport")) =>
            {
                let content = attr(&attrs, "content").unwrap_or("").to_ascii_lowercase();
                for kv in content.split([',', ';']) {
                    if let Some((k, v)) = kv.split_once('=') {
                        if k.trim() == "width" {
                            let v = v.trim();
                            out.layout.width = if v == "device-width" {
                                vp.width
                            } else {
                                v.parse::<f64>()
                                    .map_or(vp.width, |w| w.clamp(1.0, 10000.0) as u32)
                            };
                        }
                    }
                }
            }
            "picture" => {
                picture = Some(Picture {
                    chosen: None,
                    chosen_pre: None,
                })
            }
            "source" => {
                if let Some(p) = picture.as_mut() {
                    let type_ok = attr(&attrs, "type").is_none_or(|t| {
                        IMAGE_TYPES.contains(&t.trim().to_ascii_lowercase().as_str())
                    });
                    let media_ok = out
                        .layout
                        .matches_media(attr(&attrs, "media").unwrap_or(""));
                    let media_pre = vp.matches_media(attr(&attrs, "media").unwrap_or(""));
                    if let Some(ss) = attr(&attrs, "srcset").filter(|_| type_ok) {
                        let c = Some((ss.to_string(), attr(&attrs, "sizes").map(str::to_string)));
                        if p.chosen.is_none() && media_ok {
                            p.chosen = c.clone();
                        }
                        if p.chosen_pre.is_none() && media_pre {
                            p.chosen_pre = c;
                        }
                    }
                } else if let Some((none, taken)) = media.as_mut() {
                    // The first source whose type plays; none with preload=none.
                    let playable = attr(&attrs, "type").is_none_or(|t| {
                        let t = t
                            .split(';')
                            .next()
                            .unwrap_or("")
                            .trim()
                            .to_ascii_lowercase();
                        PLAYABLE.contains(&t.as_str())
                    });
                    if !*none && !*taken && playable {
                        if let Some(s) = attr(&attrs, "src") {
                            push(&mut out.embeds, s, Kind::Other);
                            *taken = true;
                        }
                    }
                }
            }
            "img" => {
                let (w, h) = (dim(attr(&attrs, "width")), dim(attr(&attrs, "height")));
                let chosen = picture.as_mut().and_then(|p| p.chosen.take());
                let chosen_pre = picture.as_mut().and_then(|p| p.chosen_pre.take());
                let pick = |chosen: &Option<(String, Option<String>)>, on: &Viewport| match chosen {
                    Some((ss, sz)) => crate::srcset::pick(Some(ss), sz.as_deref(), None, on),
                    None => crate::srcset::pick(
                        attr(&attrs, "srcset"),
                        attr(&attrs, "sizes"),
                        attr(&attrs, "src"),
                        on,
                    ),
                };
                let url = pick(&chosen, &out.layout);
                // On a phone, before a viewport <meta> says otherwise, Chromium's
                // preload scanner picks for the device width, then layout picks
                // for 980 px: both are fetched when they differ.
                if vp.mobile && out.layout.width != vp.width && !lazy {
                    if let Some(u) = pick(&chosen_pre, vp).filter(|u| Some(u) != url.as_ref()) {
                        push(&mut out.embeds, &u, Kind::Image);
                    }
                }
                if let Some(u) = url {
                    let e = Embed {
                        url: u.trim().to_string(),
                        kind: Kind::Image,
                        width: w,
                        height: h,
                        ..Embed::default()
                    };
                    if lazy && below(LAZY_IMAGE_MARGIN) {
                        out.deferred.push(e);
                    } else if !e.url.is_empty() && !e.url.starts_with('#') {
                        out.embeds.push(e);
                    }
                }
            }
            "video" | "audio" => {
                if let Some(s) = attr(&attrs, "poster").filter(|_| name == "video") {
                    push(&mut out.embeds, s, Kind::Image);
                }
                let none = attr(&attrs, "preload").is_some_and(|p| p.eq_ignore_ascii_case("none"));
                let src = attr(&attrs, "src");
                if let (Some(s), false) = (src, none) {
                    push(&mut out.embeds, s, Kind::Other);
                }
                media = Some((none, src.is_some()));
            }
            "object" => {
                if let Some(d) = attr(&attrs, "data") {
                    push(&mut out.embeds, d, Kind::Other);
                }
            }
            "embed" => {
                if let Some(d) = attr(&attrs, "src") {
                    push(&mut out.embeds, d, Kind::Other);
                }
            }
            // SVG: <image href> and an external <use href="sprite.svg#id">.
            "image" | "use" => {
                if let Some(h) = attr(&attrs, "href").or_else(|| attr(&attrs, "xlink:href")) {
                    push(&mut out.embeds, h, Kind::Image);
                }
            }
            "input" if attr(&attrs, "type").is_some_and(|t| t.eq_ignore_ascii_case("image")) => {
                if let Some(s) = attr(&attrs, "src") {
                    push(&mut out.embeds, s, Kind::Image);
                }
            }
            // srcdoc wins over src; a lazy one far below waits.
            "iframe"
                if attr(&attrs, "srcdoc").is_some()
                    && !(lazy && below(LAZY_FRAME_MARGIN))
                    && out.srcdocs.len() < 16 =>
            {
                out.srcdocs
                    .push(attr(&attrs, "srcdoc").unwrap_or("").to_string());
            }
            "iframe" if attr(&attrs, "srcdoc").is_some() => {}
            "iframe" | "frame" => {
                if let Some(s) = attr(&attrs, "src") {
                    if !s.starts_with("about:") && !s.starts_with("javascript:") {
                        if lazy && below(LAZY_FRAME_MARGIN) {
                            out.deferred.push(Embed {
                                url: s.to_string(),
                                kind: Kind::Iframe,
                                ..Embed::default()
                            });
                        } else {
                            push(&mut out.embeds, s, Kind::Iframe);
                        }
                    }
                }
            }
            "body" | "table" | "td" | "th" => {
                if let Some(s) = attr(&attrs, "background") {
                    push(&mut out.embeds, s, Kind::Image);
                }
            }
            "base" if out.base.is_none() => {
                out.base = attr(&attrs, "href").map(str::to_string);
            }
            "link" => handle_link(&attrs, &mut out, &mut sheet_no),
            _ => {}
        }
    }
    out
}

fn push(v: &mut Vec<Embed>, url: &str, kind: Kind) {
    let url = url.trim();
    if url.is_empty() || url.starts_with('#') {
        return;
    }
    v.push(Embed {
        url: url.to_string(),
        kind,
        ..Embed::default()
    });
}

fn handle_script(a: &[(String, String)], content: &[u8], out: &mut HtmlScan) {
    let ty = attr(a, "type");
    if ty.is_some_and(|t| t.trim().eq_ignore_ascii_case("importmap")) {
        out.import_maps
            .push(String::from_utf8_lossy(content).into_owned());
        return;
    }
    let Some(module) = script_kind(ty) else {
        return;
    };
    if !module && a.iter().any(|(n, _)| n == "nomodule") {
        return;
    }
    match attr(a, "src") {
        Some(s) => {
            let s = s.trim();
            if !s.is_empty() {
                out.embeds.push(Embed {
                    url: s.to_string(),
                    kind: Kind::Script,
                    module,
                    ..Embed::default()
                });
            }
        }
        None => {
            out.inline_script_bytes += content.len();
            if module {
                out.inline_modules
                    .push(String::from_utf8_lossy(content).into_owned());
            }
        }
    }
}

fn handle_link(a: &[(String, String)], out: &mut HtmlScan, sheet_no: &mut u32) {
    let rel = attr(a, "rel").unwrap_or("").to_ascii_lowercase();
    let rels: Vec<&str> = rel.split_ascii_whitespace().collect();
    let Some(href) = attr(a, "href").map(str::trim).filter(|h| !h.is_empty()) else {
        return;
    };
    let mut e = Embed {
        url: href.to_string(),
        ..Embed::default()
    };
    if rels.contains(&"stylesheet") {
        let disabled = a.iter().any(|(n, _)| n == "disabled");
        let type_ok = attr(a, "type").is_none_or(|t| t.trim().eq_ignore_ascii_case("text/css"));
        if disabled || !type_ok {
            return;
        }
        let applies = !rels.contains(&"alternate")
            && out.layout.matches_media(attr(a, "media").unwrap_or(""));
        e.kind = Kind::Stylesheet;
        e.sheet = Some((*sheet_no, applies));
        *sheet_no += 1;
    } else if rels.contains(&"icon") {
        out.has_icon = true;
        e.kind = Kind::Image;
    } else if rels.contains(&"manifest") || rels.contains(&"prefetch") {
        // Chromium fetches prefetches too (at idle priority): checked.
        e.kind = Kind::Other;
    } else if rels.contains(&"modulepreload") {
        e.kind = Kind::Script;
        e.module = true;
        e.preload_only = true;
    } else if rels.contains(&"preload") {
        e.kind = match attr(a, "as").unwrap_or("").to_ascii_lowercase().as_str() {
            "style" => Kind::Stylesheet,
            "script" => Kind::Script,
            "image" => {
                match crate::srcset::pick(
                    attr(a, "imagesrcset"),
                    attr(a, "imagesizes"),
                    Some(href),
                    &out.layout,
                ) {
                    Some(u) => e.url = u,
                    None => return,
                }
                Kind::Image
            }
            "font" => Kind::Font,
            "fetch" | "track" => Kind::Other,
            _ => return,
        };
        if !out.layout.matches_media(attr(a, "media").unwrap_or("")) {
            return;
        }
    } else {
        return;
    }
    out.embeds.push(e);
}

/// A fetch discovery asks for, resolved.
#[derive(Clone, Debug)]
pub struct Found {
    /// The absolute URL (no fragment).
    pub url: Url,
    /// What it is.
    pub kind: Kind,
    /// `<img width height>`.
    pub size: Option<(Option<u32>, Option<u32>)>,
}

/// A reference discovery did not fetch, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Skipped {
    /// The absolute URL (credentials removed).
    pub url: String,
    /// What it is.
    pub kind: Kind,
    /// Why: `lazy` (below the first screen), `dynamic-import`,
    /// `bare-specifier`, `link-local`, `not-same-origin`.
    pub reason: String,
}

/// What discovery left out of a load (the page result lists it).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Notes {
    /// The screen discovery followed.
    pub viewport: Viewport,
    /// `loading=lazy` images and iframes below the first screen: not in the
    /// first view (their bytes are unknown: they were not fetched).
    pub deferred: Vec<Skipped>,
    /// Module imports not followed (dynamic `import()`, unmapped bare names).
    pub not_followed: Vec<Skipped>,
    /// Fetches refused by scope (link-local or metadata addresses,
    /// `--same-origin`).
    pub blocked: Vec<Skipped>,
}

/// Cloud metadata names (Google, Alibaba, AWS's `instance-data`).
const METADATA_NAMES: [&str; 5] = [
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
];

/// A link-local address or a cloud metadata endpoint.
pub fn is_link_local_or_metadata(u: &Url) -> bool {
    match u.host() {
        Some(url::Host::Ipv4(a)) => a.is_link_local() || a.octets() == [100, 100, 100, 200],
        Some(url::Host::Ipv6(a)) => {
            let s = a.segments();
            (s[0] & 0xffc0) == 0xfe80
                || a == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
                || a.to_ipv4_mapped().is_some_and(|v| v.is_link_local())
        }
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            METADATA_NAMES.contains(&d.as_str())
        }
        None => false,
    }
}

/// What a fetched URL is to discovery.
#[derive(Clone, Debug)]
enum Ctx {
    /// A stylesheet of document `doc`, at `key` in cascade order.
    Sheet {
        doc: usize,
        key: Vec<u32>,
        applies: bool,
    },
    /// A module script of document `doc`.
    Module { doc: usize, preload_only: bool },
}

struct Doc {
    base: Url,
    layout: Viewport,
    presence: Presence,
    map: ImportMap,
    /// Sheets that arrived: (cascade key, base URL, parsed, applies).
    sheets: Vec<(Vec<u32>, Url, Sheet)>,
    /// `style` attributes, as one rule each.
    attr_rules: Vec<css::Rule>,
    /// The element tree; the cascade runs on it unless it overflowed.
    tree: crate::dom::Tree,
    /// Stylesheets requested and not yet answered.
    pending: usize,
    /// Images and fonts of the stylesheets were handed out.
    styled: bool,
}

/// Discovery's state over one load: turns each finished fetch into the next.
pub struct Session {
    vp: Viewport,
    page: Url,
    same_origin: bool,
    docs: Vec<Doc>,
    ctx: HashMap<String, Ctx>,
    handed: HashSet<String>,
    /// Stylesheets fetched by `preload` alone.
    preloads: HashSet<String>,
    /// What was left out.
    pub notes: Notes,
}

fn key_str(u: &Url) -> String {
    let mut u = u.clone();
    u.set_fragment(None);
    u.to_string()
}

impl Session {
    /// A session for the page at `page` on screen `vp`.
    pub fn new(page: &Url, vp: Viewport, same_origin: bool) -> Session {
        Session {
            vp,
            page: page.clone(),
            same_origin,
            docs: Vec::new(),
            ctx: HashMap::new(),
            handed: HashSet::new(),
            preloads: HashSet::new(),
            notes: Notes {
                viewport: vp,
                ..Notes::default()
            },
        }
    }

    /// Whether scope allows fetching `u` (noting it when not).
    pub fn allowed(&mut self, u: &Url, kind: Kind) -> bool {
        let reason = if self.same_origin
            && redline_engine::redirect::origin_key(u)
                != redline_engine::redirect::origin_key(&self.page)
        {
            "not-same-origin"
        } else if is_link_local_or_metadata(u) && !is_link_local_or_metadata(&self.page) {
            "link-local"
        } else {
            return true;
        };
        let url = crate::http::display_url(u);
        if !self.notes.blocked.iter().any(|s| s.url == url) && self.notes.blocked.len() < 1000 {
            self.notes.blocked.push(Skipped {
                url,
                kind,
                reason: reason.into(),
            });
        }
        false
    }

    fn resolve(&mut self, base: &Url, raw: &str, kind: Kind) -> Option<Url> {
        let u = base.join(raw.trim()).ok()?;
        if !matches!(u.scheme(), "http" | "https") {
            return None;
        }
        let mut u = u;
        u.set_fragment(None);
        self.allowed(&u, kind).then_some(u)
    }

    fn found(
        &mut self,
        out: &mut Vec<Found>,
        u: Url,
        kind: Kind,
        size: Option<(Option<u32>, Option<u32>)>,
        ctx: Option<Ctx>,
    ) {
        let k = key_str(&u);
        if let Some(c) = ctx {
            if let (
                Some(Ctx::Module {
                    preload_only: true, ..
                }),
                Ctx::Module {
                    preload_only: false,
                    ..
                },
            ) = (self.ctx.get(&k), &c)
            {
                // A modulepreload'ed module is also run: its imports count.
                self.ctx.insert(k, c);
                return;
            }
            if !self.ctx.contains_key(&k) {
                if let Ctx::Sheet { doc, .. } = &c {
                    self.docs[*doc].pending += 1;
                }
                self.ctx.insert(k.clone(), c);
            } else {
                return;
            }
        }
        if kind == Kind::Stylesheet && !self.ctx.contains_key(&k) && self.preloads.len() < 10_000 {
            // `preload as=style`: fetched, applied only if a link uses it.
            self.preloads.insert(k.clone());
        }
        if self.handed.len() < 100_000 {
            self.handed.insert(k);
        }
        out.push(Found { url: u, kind, size });
    }

    /// A fetch of `url` (fetched as `kind`) ended; `body` when it succeeded
    /// (200 or 304 with the stored body). Returns what to fetch next.
    pub fn done(&mut self, url: &Url, kind: Kind, body: Option<&[u8]>, ctype: &str) -> Vec<Found> {
        let mut out = Vec::new();
        let k = key_str(url);
        let ctx = self.ctx.get(&k).cloned();
        let is_html = ctype == "text/html" || ctype == "application/xhtml+xml";
        match (ctx, body) {
            (Some(Ctx::Sheet { doc, key, applies }), body) => {
                if let Some(body) = body.filter(|_| !is_html) {
                    let sheet = css::parse(body, &self.docs[doc].layout);
                    self.add_sheet(doc, key, applies, url, sheet, &mut out);
                }
                let d = &mut self.docs[doc];
                d.pending = d.pending.saturating_sub(1);
                if d.pending == 0 {
                    self.style(doc, &mut out);
                }
            }
            (Some(Ctx::Module { doc, preload_only }), Some(body)) if !preload_only => {
                self.module(doc, url, body, &mut out);
            }
            (Some(_), _) => {}
            (None, Some(body)) => {
                if is_html && matches!(kind, Kind::Document | Kind::Iframe) {
                    self.document(url, body, &mut out);
                } else if kind == Kind::Stylesheet
                    && !is_html
                    && !self.docs.is_empty()
                    && !self.preloads.contains(&k)
                {
                    // Reached through a redirect: part of the first document.
                    let sheet = css::parse(body, &self.docs[0].layout);
                    self.add_sheet(0, vec![u32::MAX], true, url, sheet, &mut out);
                    if self.docs[0].styled {
                        self.style(0, &mut out);
                    }
                }
            }
            (None, None) => {}
        }
        out
    }

    /// Hands out what waits for stylesheets that never answered (the loader
    /// calls this when it has nothing else to do).
    pub fn flush(&mut self) -> Vec<Found> {
        let mut out = Vec::new();
        for d in 0..self.docs.len() {
            if !self.docs[d].styled {
                self.docs[d].pending = 0;
                self.style(d, &mut out);
            }
        }
        out
    }

    fn document(&mut self, url: &Url, body: &[u8], out: &mut Vec<Found>) {
        if self.docs.len() >= 64 {
            return;
        }
        let scan = scan_html(body, &self.vp);
        let base = scan
            .base
            .as_deref()
            .and_then(|b| url.join(b).ok())
            .unwrap_or_else(|| url.clone());
        let doc = self.docs.len();
        let mut map = ImportMap::default();
        for m in &scan.import_maps {
            map.extend(ImportMap::parse(m.as_bytes()));
        }
        let mut attr_rules = Vec::new();
        for st in &scan.style_attrs {
            let sheet = css::parse(format!("*{{{st}}}").as_bytes(), &scan.layout);
            attr_rules.extend(sheet.rules);
        }
        self.docs.push(Doc {
            base: base.clone(),
            layout: scan.layout,
            presence: scan.presence.clone(),
            map,
            sheets: Vec::new(),
            attr_rules: attr_rules.clone(),
            tree: scan.tree.clone(),
            pending: 0,
            styled: false,
        });
        // srcdoc frames: documents of their own, on the parent's base URL.
        for sd in &scan.srcdocs {
            self.document(&base, sd.as_bytes(), out);
        }
        for e in &scan.embeds {
            let Some(u) = self.resolve(&base, &e.url, e.kind) else {
                continue;
            };
            let size = (e.width.is_some() || e.height.is_some()).then_some((e.width, e.height));
            let ctx = if let Some((no, applies)) = e.sheet {
                Some(Ctx::Sheet {
                    doc,
                    key: vec![no],
                    applies,
                })
            } else if e.module {
                Some(Ctx::Module {
                    doc,
                    preload_only: e.preload_only,
                })
            } else {
                None
            };
            self.found(out, u, e.kind, size, ctx);
        }
        // Inline styles: their imports are fetched now, their rules wait.
        for (no, text, applies) in &scan.styles {
            let sheet = css::parse(text.as_bytes(), &scan.layout);
            self.add_sheet(doc, vec![*no], *applies, &base, sheet, out);
        }
        // style="" attributes apply to their element: their images load
        // (through the cascade when there is a tree).
        let eager = if scan.tree.overflow {
            attr_rules.as_slice()
        } else {
            &[]
        };
        for r in eager {
            for u in r.urls() {
                if let Some(u) = self.resolve(&base, &u, Kind::Image) {
                    self.found(out, u, Kind::Image, None, None);
                }
            }
        }
        for m in &scan.inline_modules {
            self.module(doc, &base, m.as_bytes(), out);
        }
        if doc == 0 && !scan.has_icon {
            if let Ok(u) = base.join("/favicon.ico") {
                if self.allowed(&u, Kind::Image) {
                    self.found(out, u, Kind::Image, None, None);
                }
            }
        }
        for e in &scan.deferred {
            if let Ok(u) = base.join(&e.url) {
                if self.notes.deferred.len() < 1000 {
                    self.notes.deferred.push(Skipped {
                        url: crate::http::display_url(&u),
                        kind: e.kind,
                        reason: "lazy".into(),
                    });
                }
            }
        }
        if self.docs[doc].pending == 0 {
            self.style(doc, out);
        }
    }

    fn add_sheet(
        &mut self,
        doc: usize,
        key: Vec<u32>,
        applies: bool,
        base: &Url,
        sheet: Sheet,
        out: &mut Vec<Found>,
    ) {
        for (j, imp) in sheet.imports.iter().enumerate() {
            let Some(u) = self.resolve(base, &imp.url, Kind::Stylesheet) else {
                continue;
            };
            let mut k = key.clone();
            k.push(j as u32);
            let applies = applies && self.docs[doc].layout.matches_media(&imp.media);
            if k.len() <= 16 {
                self.found(
                    out,
                    u,
                    Kind::Stylesheet,
                    None,
                    Some(Ctx::Sheet {
                        doc,
                        key: k,
                        applies,
                    }),
                );
            }
        }
        if applies && self.docs[doc].sheets.len() < 10_000 {
            let mut k = key;
            k.push(u32::MAX);
            self.docs[doc].sheets.push((k, base.clone(), sheet));
        }
    }

    fn module(&mut self, doc: usize, url: &Url, body: &[u8], out: &mut Vec<Found>) {
        let imports = modules::scan(body);
        for (spec, dynamic) in imports
            .static_
            .iter()
            .map(|s| (s, false))
            .chain(imports.dynamic.iter().map(|s| (s, true)))
        {
            let mapped = self.docs[doc].map.map(spec);
            let target = match (&mapped, modules::is_relative_or_url(spec)) {
                (Some(m), _) => m.clone(),
                (None, true) => spec.clone(),
                (None, false) => {
                    self.note_not_followed(spec.clone(), "bare-specifier");
                    continue;
                }
            };
            let base = if mapped.is_some() {
                self.docs[doc].base.clone()
            } else {
                url.clone()
            };
            if dynamic {
                let shown = base
                    .join(&target)
                    .map(|u| crate::http::display_url(&u))
                    .unwrap_or(target);
                self.note_not_followed(shown, "dynamic-import");
                continue;
            }
            let Some(u) = self.resolve(&base, &target, Kind::Script) else {
                continue;
            };
            self.found(
                out,
                u,
                Kind::Script,
                None,
                Some(Ctx::Module {
                    doc,
                    preload_only: false,
                }),
            );
        }
    }

    fn note_not_followed(&mut self, url: String, reason: &str) {
        if self.notes.not_followed.len() < 1000
            && !self.notes.not_followed.iter().any(|s| s.url == url)
        {
            self.notes.not_followed.push(Skipped {
                url,
                kind: Kind::Script,
                reason: reason.into(),
            });
        }
    }

    /// Every stylesheet of `doc` is in: hand out the images the cascade
    /// keeps and the fonts the matching rules use.
    fn style(&mut self, doc: usize, out: &mut Vec<Found>) {
        let d = &mut self.docs[doc];
        d.styled = true;
        d.sheets.sort_by(|a, b| a.0.cmp(&b.0));
        if !d.tree.overflow {
            self.style_tree(doc, out);
            return;
        }
        let bold = ["h1", "h2", "h3", "h4", "h5", "h6", "b", "strong", "th"]
            .iter()
            .any(|t| d.presence.tags.contains(*t));
        let italic = ["i", "em", "cite", "var", "dfn", "address"]
            .iter()
            .any(|t| d.presence.tags.contains(*t));
        // (selector as written, property) -> (URLs, base) of the last declaration.
        let mut winners: Vec<((String, usize), Vec<String>, Url)> = Vec::new();
        let mut index: HashMap<(String, usize), usize> = HashMap::new();
        let mut faces: Vec<(css::FontFace, Url)> = Vec::new();
        let mut wants: Vec<(Vec<String>, u16, bool)> = Vec::new();
        for (_, base, sheet) in &d.sheets {
            for f in &sheet.faces {
                faces.push((f.clone(), base.clone()));
            }
            for r in &sheet.rules {
                if !css::could_match(&r.selectors, &d.presence) {
                    continue;
                }
                let sel: String = r.selectors.split_whitespace().collect::<Vec<_>>().join(" ");
                for (g, urls) in r.images.iter().enumerate() {
                    if let Some(urls) = urls {
                        let key = (sel.clone(), g);
                        match index.get(&key) {
                            Some(&i) => winners[i] = (key, urls.clone(), base.clone()),
                            None => {
                                index.insert(key.clone(), winners.len());
                                winners.push((key, urls.clone(), base.clone()));
                            }
                        }
                    }
                }
                if !r.families.is_empty() {
                    wants.push((r.families.clone(), r.weight.unwrap_or(400), r.italic));
                }
            }
        }
        for r in &d.attr_rules {
            if !r.families.is_empty() {
                wants.push((r.families.clone(), r.weight.unwrap_or(400), r.italic));
            }
        }
        let mut fetch: Vec<(Url, String, Kind)> = Vec::new();
        for (_, urls, base) in winners {
            for u in urls {
                fetch.push((base.clone(), u, Kind::Image));
            }
        }
        const GENERIC: [&str; 12] = [
            "serif",
            "sans-serif",
            "monospace",
            "cursive",
            "fantasy",
            "system-ui",
            "math",
            "emoji",
            "fangsong",
            "ui-serif",
            "ui-sans-serif",
            "ui-monospace",
        ];
        for (families, weight, ital) in wants {
            let Some(fam) = families
                .iter()
                .take_while(|f| {
                    !GENERIC.contains(&f.as_str()) && !f.starts_with("-apple") && *f != "inherit"
                })
                .find(|f| faces.iter().any(|(ff, _)| &ff.family == *f))
            else {
                continue;
            };
            let mut styles = vec![(weight, ital)];
            if bold {
                styles.push((700, ital));
            }
            if italic {
                styles.push((weight, true));
            }
            for (w, it) in styles {
                if let Some((face, base)) = best_face(&faces, fam, w, it) {
                    if let Some(src) = &face.src {
                        fetch.push((base.clone(), src.clone(), Kind::Font));
                    }
                }
            }
        }
        for (base, raw, kind) in fetch {
            if let Some(u) = self.resolve(&base, &raw, kind) {
                if !self.handed.contains(&key_str(&u)) {
                    self.found(out, u, kind, None, None);
                }
            }
        }
    }
}

impl Session {
    /// [`Session::style`] on the element tree: the cascade decides.
    fn style_tree(&mut self, doc: usize, out: &mut Vec<Found>) {
        let d = &self.docs[doc];
        let mut bases: Vec<Url> = Vec::new();
        let mut rules: Vec<(&css::Rule, usize)> = Vec::new();
        let mut faces: Vec<(css::FontFace, Url)> = Vec::new();
        for (_, base, sheet) in &d.sheets {
            bases.push(base.clone());
            for r in &sheet.rules {
                rules.push((r, bases.len() - 1));
            }
            for f in &sheet.faces {
                faces.push((f.clone(), base.clone()));
            }
        }
        bases.push(d.base.clone());
        let inline_src = bases.len() - 1;
        let inline: Vec<(usize, css::Rule)> = d
            .tree
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let st = n.style.as_ref()?;
                let sheet = css::parse(format!("*{{{st}}}").as_bytes(), &d.layout);
                sheet.rules.into_iter().next().map(|r| (i, r))
            })
            .collect();
        let styled = crate::dom::cascade(&d.tree, &rules, &inline, inline_src);
        let mut fetch: Vec<(Url, String, Kind)> = Vec::new();
        for (u, src) in styled.images {
            fetch.push((bases[src].clone(), u, Kind::Image));
        }
        // (family, weight, italic) -> the characters drawn with it.
        let mut wants: Vec<((String, u16, bool), std::collections::BTreeSet<u32>)> = Vec::new();
        for (families, weight, italic, text) in styled.text {
            let Some(fam) = first_declared(&families, &faces) else {
                continue;
            };
            let key = (fam, weight, italic);
            let i = match wants.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    wants.push((key, Default::default()));
                    wants.len() - 1
                }
            };
            let set = &mut wants[i].1;
            // The first available font is the one covering U+0020.
            set.insert(0x20);
            if set.len() < 20_000 {
                set.extend(
                    text.chars()
                        .filter(|c| !c.is_whitespace())
                        .map(|c| c as u32),
                );
            }
        }
        for ((fam, weight, italic), chars) in wants {
            // The best descriptors, then every unicode-range segment of them
            // that the text drawn with them needs.
            let Some((best, _)) = best_face(&faces, &fam, weight, italic) else {
                continue;
            };
            let (w, it) = (best.weight, best.italic);
            for (face, base) in faces
                .iter()
                .filter(|(f, _)| f.family == fam && f.weight == w && f.italic == it)
            {
                let needed = face.ranges.is_empty()
                    || face
                        .ranges
                        .iter()
                        .any(|&(lo, hi)| chars.range(lo..=hi).next().is_some());
                if let (true, Some(src)) = (needed, &face.src) {
                    fetch.push((base.clone(), src.clone(), Kind::Font));
                }
            }
        }
        for (base, raw, kind) in fetch {
            if let Some(u) = self.resolve(&base, &raw, kind) {
                if !self.handed.contains(&key_str(&u)) {
                    self.found(out, u, kind, None, None);
                }
            }
        }
    }
}

/// The first family of a `font-family` list that has an `@font-face`
/// (a generic family ends the search: the browser has it).
fn first_declared(families: &[String], faces: &[(css::FontFace, Url)]) -> Option<String> {
    const GENERIC: [&str; 12] = [
        "serif",
        "sans-serif",
        "monospace",
        "cursive",
        "fantasy",
        "system-ui",
        "math",
        "emoji",
        "fangsong",
        "ui-serif",
        "ui-sans-serif",
        "ui-monospace",
    ];
    families
        .iter()
        .take_while(|f| {
            !GENERIC.contains(&f.as_str()) && !f.starts_with("-apple") && *f != "inherit"
        })
        .find(|f| faces.iter().any(|(ff, _)| &ff.family == *f))
        .cloned()
}

/// The face CSS font matching picks for `family` at weight `w` (italic or
/// not): same style first, then the nearest weight in the spec's direction.
fn best_face<'a>(
    faces: &'a [(css::FontFace, Url)],
    family: &str,
    w: u16,
    italic: bool,
) -> Option<&'a (css::FontFace, Url)> {
    let cands: Vec<&(css::FontFace, Url)> =
        faces.iter().filter(|(f, _)| f.family == family).collect();
    let same: Vec<&(css::FontFace, Url)> = cands
        .iter()
        .copied()
        .filter(|(f, _)| f.italic == italic)
        .collect();
    let pool = if same.is_empty() { cands } else { same };
    // Distance in the order CSS Fonts 4 §5.2 tries weights.
    let cost = |f: &css::FontFace| -> u32 {
        let (lo, hi) = f.weight;
        if lo <= w && w <= hi {
            return 0;
        }
        let near = if w < lo { lo } else { hi };
        let d = u32::from(near.abs_diff(w));
        let preferred_down = if (400..=500).contains(&w) {
            // Up to 500 first, then down, then above 500.
            if near > w && near <= 500 {
                return d;
            }
            near < w
        } else {
            w < 400
        };
        if (near < w) == preferred_down {
            1000 + d
        } else {
            3000 + d
        }
    };
    pool.into_iter().min_by_key(|(f, _)| cost(f))
}

fn is_name_byte(b: u8) -> bool {
    !(b.is_ascii_whitespace() || b == b'>' || b == b'/' || b == b'=')
}

/// Decodes the few character references that occur in URLs.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let lim = (0..=rest.len().min(12))
            .rev()
            .find(|&k| rest.is_char_boundary(k))
            .unwrap_or(0);
        let end = rest[..lim].find(';');
        let rep = end.and_then(|e| {
            let ent = &rest[1..e];
            let c = match ent {
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "nbsp" => Some('\u{a0}'),
                _ if ent.starts_with("#x") || ent.starts_with("#X") => {
                    u32::from_str_radix(&ent[2..], 16)
                        .ok()
                        .and_then(char::from_u32)
                }
                _ if ent.starts_with('#') => ent[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            };
            c.map(|c| (c, e))
        });
        match rep {
            Some((c, e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Parses attributes from `s` (the inside of a tag after its name).
fn parse_attrs(s: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = s.len();
    while i < n && out.len() < 256 {
        while i < n && (s[i].is_ascii_whitespace() || s[i] == b'/') {
            i += 1;
        }
        let start = i;
        while i < n && is_name_byte(s[i]) {
            i += 1;
        }
        if start == i {
            i += 1;
            continue;
        }
        let name = String::from_utf8_lossy(&s[start..i]).to_ascii_lowercase();
        while i < n && s[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < n && s[i] == b'=' {
            i += 1;
            while i < n && s[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < n && (s[i] == b'"' || s[i] == b'\'') {
                let q = s[i];
                i += 1;
                let vs = i;
                while i < n && s[i] != q {
                    i += 1;
                }
                value = String::from_utf8_lossy(&s[vs..i]).into_owned();
                i += 1;
            } else {
                let vs = i;
                while i < n && !s[i].is_ascii_whitespace() && s[i] != b'>' {
                    i += 1;
                }
                value = String::from_utf8_lossy(&s[vs..i]).into_owned();
            }
        }
        out.push((name, decode_entities(value.trim())));
    }
    out
}

fn attr<'a>(a: &'a [(String, String)], name: &str) -> Option<&'a str> {
    a.iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

fn dim(v: Option<&str>) -> Option<u32> {
    let v = v?.trim().trim_end_matches("px");
    v.parse::<u32>().ok().filter(|&x| x > 0)
}

fn find_ci(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    (from..=hay.len() - needle.len())
        .find(|&i| hay[i..i + needle.len()].eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests;
