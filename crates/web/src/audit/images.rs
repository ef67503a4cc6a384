//! Image checks, in bytes on the wire: images larger than needed at the
//! device pixel ratio (Lighthouse's "properly size images") and images in
//! a format that costs bytes (Lighthouse's `modern-image-formats`: a whole
//! JPEG, PNG or BMP up to 2000 KiB re-encoded as Chromium encodes it for
//! Lighthouse ([`super::encode`]), AVIF estimated from the WebP and JPEG
//! sizes, a finding from 8 KiB saved; a GIF or a larger image from the
//! pixel count: WebP 2/10 byte per pixel, AVIF 2/12; a photograph served
//! as PNG). Sizing findings only above [`IMAGE_MIN_WASTE`] (4 KiB).
//!
//! The size an image is shown at comes from the viewport model discovery
//! used ([`crate::viewport`], [`crate::srcset`]): the page's HTML is read
//! again for the screen of the load (its layout width after
//! `<meta name=viewport>`), and for each `<img>` (inside `<picture>`, the
//! `<source>` Chromium takes) the URL it fetches is picked as discovery
//! picked it. Its width in CSS px is then the `sizes` length when `srcset`
//! has `w` descriptors; else a plain CSS width (a `style` attribute, or the
//! last most specific matching rule — any selector the discovery cascade
//! matches: descendant, child and sibling combinators, classes, ids,
//! attributes — in the page's `<style>` and fetched stylesheets, under
//! matching `@media`; `max-width` in px caps it) since CSS overrides the
//! presentational attribute; else the `width` attribute; else the
//! intrinsic width over the `x` density the candidate was picked for.
//! Widths in % or `calc()` are layout and stay unknown. An image that is
//! not rendered (`display: none` on it or an ancestor, `hidden`) is
//! fetched by the browser but shown at no size: not judged. An image picked by
//! `srcset` among two or more candidates is the one the browser chose for
//! this DPR: it is not judged too large for want of a finer candidate.

use std::collections::HashMap;

use url::Url;

use crate::discover::decode_entities;
use crate::dom::Tree;
use crate::srcset::{parse_srcset, pick, source_size};
use crate::viewport::Viewport;

use super::layout::{self, Cap, Layout};

use super::{check, finding, pct, Check, Ctx, Fix, Severity, IMAGE_MIN_WASTE};
use crate::page::bytes;

pub(super) const FIX_IMAGES: Fix = Fix {
    apache: "# not a server setting: resize images to the size shown times the device pixel ratio (or offer srcset)\n# and serve photographs as JPEG, WebP or AVIF",
    nginx: "# not a server setting: resize images to the size shown times the device pixel ratio (or offer srcset)\n# and serve photographs as JPEG, WebP or AVIF",
    lighttpd: "# not a server setting: resize images to the size shown times the device pixel ratio (or offer srcset)\n# and serve photographs as JPEG, WebP or AVIF",
};

/// WebP at 2/10 byte per pixel (Lighthouse's `modern-image-formats`: a
/// 2-byte-per-pixel baseline, 10:1 for WebP).
fn webp_estimate(px: u64) -> u64 {
    px / 5
}

/// AVIF at 2/12 byte per pixel (the same audit: 12:1, about 20 % below WebP).
fn avif_estimate(px: u64) -> u64 {
    px / 6
}

/// How the page shows one image it fetches.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Shown {
    /// Width in CSS px (none: the intrinsic width over `density`).
    pub width: Option<f64>,
    /// Height in CSS px, when the `width` and `height` attributes give both.
    pub height: Option<f64>,
    /// The `x` density the candidate was picked for (density mode).
    pub density: f64,
    /// Where the width comes from: `sizes`, `CSS width`, `width attribute`
    /// or `srcset density`.
    pub from: &'static str,
    /// Picked by `srcset` among two or more candidates.
    pub chosen: bool,
    /// A known `max-width` in CSS px (`max-width: 100%` of a box of known
    /// width): it caps the intrinsic width when `width` is none.
    pub max: Option<f64>,
}

impl Shown {
    /// The displayed width for an image `iw` pixels wide.
    pub fn width_for(&self, iw: f64) -> f64 {
        let w = self.width.unwrap_or(iw / self.density.max(0.01));
        self.max.map_or(w, |m| w.min(m))
    }
}

/// At most this many `<img>` elements are modelled (a bound for hostile pages).
const MAX_IMAGES: usize = 5_000;

struct Tag {
    name: String,
    attrs: Vec<(String, String)>,
    /// Non-blank text comes between the previous tag and this one.
    text_before: bool,
}

impl Tag {
    fn attr(&self, n: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.trim().is_empty())
    }
}

/// The start and end tags of a document, and the text of its `<style>`
/// elements whose `media` is kept with them.
fn tags(html: &str) -> (Vec<Tag>, Vec<(Option<String>, String)>) {
    let (mut out, mut styles) = (Vec::new(), Vec::new());
    let b = html.as_bytes();
    let mut i = 0;
    while let Some(p) = html[i..].find('<') {
        let text_before = !html[i..i + p].trim().is_empty();
        i += p + 1;
        if html[i..].starts_with("!--") {
            i = html[i..].find("-->").map_or(b.len(), |e| i + e + 3);
            continue;
        }
        if html[i..].starts_with(['!', '?']) {
            // `<!doctype …>`, `<![CDATA[…]>`, `<?xml …?>`: not text.
            i = html[i..].find('>').map_or(b.len(), |e| i + e + 1);
            continue;
        }
        let end = b[i..]
            .iter()
            .enumerate()
            .position(|(k, c)| c.is_ascii_whitespace() || *c == b'>' || *c == b'/' && k > 0)
            .map_or(b.len(), |e| i + e);
        let name = html[i..end].to_ascii_lowercase();
        if name.is_empty()
            || !name
                .trim_start_matches('/')
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            continue;
        }
        // Attributes up to the closing `>` (quoted values may hold one).
        let mut attrs = Vec::new();
        let mut j = end;
        loop {
            while j < b.len() && (b[j].is_ascii_whitespace() || b[j] == b'/') {
                j += 1;
            }
            if j >= b.len() || b[j] == b'>' {
                break;
            }
            let ns = j;
            while j < b.len() && !b[j].is_ascii_whitespace() && !matches!(b[j], b'=' | b'>') {
                j += 1;
            }
            let an = html[ns..j].to_ascii_lowercase();
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            let mut val = String::new();
            if j < b.len() && b[j] == b'=' {
                j += 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if j < b.len() && (b[j] == b'"' || b[j] == b'\'') {
                    let q = b[j];
                    let vs = j + 1;
                    j = b[vs..]
                        .iter()
                        .position(|c| *c == q)
                        .map_or(b.len(), |e| vs + e);
                    val = html[vs..j].to_string();
                    j = (j + 1).min(b.len());
                } else {
                    let vs = j;
                    while j < b.len() && !b[j].is_ascii_whitespace() && b[j] != b'>' {
                        j += 1;
                    }
                    val = html[vs..j].to_string();
                }
            }
            if attrs.len() < 64 {
                attrs.push((an, decode_entities(&val)));
            }
        }
        i = (j + 1).min(b.len());
        if name == "script" || name == "style" || name == "textarea" || name == "title" {
            let close = format!("</{name}");
            let e = html[i..]
                .to_ascii_lowercase()
                .find(&close)
                .map_or(b.len(), |e| i + e);
            if name == "style" {
                let media = attrs
                    .iter()
                    .find(|(k, _)| k == "media")
                    .map(|(_, v)| v.clone());
                styles.push((media, html[i..e].to_string()));
            }
            i = e;
        }
        if out.len() < 4 * MAX_IMAGES {
            out.push(Tag {
                name,
                attrs,
                text_before,
            });
        }
        if i >= b.len() {
            break;
        }
    }
    (out, styles)
}

fn absolute(base: &Url, u: &str) -> Option<String> {
    let mut u = base.join(u.trim()).ok()?;
    u.set_fragment(None);
    Some(u.to_string())
}

/// One `<img>` of the page as the checks read it.
pub(super) struct Img {
    /// The URL it fetches (absolute, no fragment).
    pub url: String,
    /// Its element in [`Scan::tree`] (None past the tree's bound).
    pub node: Option<usize>,
    /// How it is shown; None when not rendered or when its width needs
    /// layout redline does not do.
    pub shown: Option<Shown>,
    /// Not rendered (`display: none` on it or an ancestor, `hidden`).
    pub hidden: bool,
    /// `loading=lazy` or `loading=eager`: its loading is already chosen.
    pub loading_set: bool,
    /// Its `max-width` (a known one is applied to `shown`).
    pub cap: Cap,
    /// A plain CSS `height` in px.
    pub css_height: Option<f64>,
}

/// A page's element tree, its kept CSS, its layout viewport and its images.
pub(super) struct Scan {
    pub tree: Tree,
    pub rules: Vec<layout::Rule>,
    pub layout: Viewport,
    pub imgs: Vec<Img>,
}

impl Scan {
    /// The layout of the page.
    pub fn layout(&self) -> Layout<'_> {
        Layout::new(&self.tree, &self.rules, self.layout)
    }
}

/// Reads the page's HTML for screen `screen` (`sheets`: the text of the
/// stylesheets fetched, in load order): each `<img>`, the URL it fetches
/// as discovery picked it, and the width it is shown at.
pub(super) fn scan(html: &[u8], page_url: &str, screen: &Viewport, sheets: &[&str]) -> Scan {
    let layout_vp = crate::discover::scan_html(html, screen).layout;
    let text = String::from_utf8_lossy(html);
    let (tags, styles) = tags(&text);
    let mut rules = Vec::new();
    for s in sheets {
        layout::rules(s, &layout_vp, &mut rules, 0);
    }
    for (media, s) in &styles {
        if layout_vp.matches_media(media.as_deref().unwrap_or("")) {
            layout::rules(s, &layout_vp, &mut rules, 0);
        }
    }
    // The element tree, for the selectors' combinators and the containing blocks.
    let mut tree = Tree::new();
    let nodes: Vec<Option<usize>> = tags
        .iter()
        .map(|t| {
            if t.text_before {
                tree.text("x");
            }
            match t.name.strip_prefix('/') {
                Some(end) => {
                    tree.close(end);
                    None
                }
                None => tree.open(
                    &t.name,
                    &t.attrs,
                    matches!(t.name.as_str(), "script" | "style" | "textarea" | "title"),
                ),
            }
        })
        .collect();
    let mut out = Scan {
        tree,
        rules,
        layout: layout_vp,
        imgs: Vec::new(),
    };
    let Ok(mut base) = Url::parse(page_url) else {
        return out;
    };
    let mut imgs = Vec::new();
    {
        let lay = out.layout();
        let layout = &out.layout;
        // (srcset, sizes) of the `<source>` a `<picture>` takes.
        let mut picture: Option<Option<(String, Option<String>)>> = None;
        for (t, node) in tags.iter().zip(nodes) {
            match t.name.as_str() {
                "base" => {
                    if let Some(b) = t.attr("href").and_then(|h| base.join(h.trim()).ok()) {
                        base = b;
                    }
                }
                "picture" => picture = Some(None),
                "/picture" => picture = None,
                "source" => {
                    if let Some(chosen @ None) = picture.as_mut() {
                        let type_ok = t
                            .attr("type")
                            .is_none_or(|ty| ty.trim().to_ascii_lowercase().starts_with("image/"));
                        if let Some(ss) = t.attr("srcset").filter(|_| type_ok) {
                            if layout.matches_media(t.attr("media").unwrap_or("")) {
                                *chosen =
                                    Some((ss.to_string(), t.attr("sizes").map(str::to_string)));
                            }
                        }
                    }
                }
                "img" if imgs.len() < MAX_IMAGES => {
                    let chosen = picture.as_mut().and_then(Option::take);
                    let (ss, sz, src) = match &chosen {
                        Some((ss, sz)) => (Some(ss.as_str()), sz.as_deref(), None),
                        None => (t.attr("srcset"), t.attr("sizes"), t.attr("src")),
                    };
                    let Some(url) = pick(ss, sz, src, layout) else {
                        continue;
                    };
                    let Some(abs) = absolute(&base, &url) else {
                        continue;
                    };
                    let loading_set = t.attr("loading").is_some_and(|l| {
                        matches!(l.trim().to_ascii_lowercase().as_str(), "lazy" | "eager")
                    });
                    let hidden = node.is_some_and(|i| lay.not_rendered(i));
                    let css = node.map(|i| lay.replaced_width(i));
                    let cap = match css {
                        Some(Ok((_, c))) => c,
                        _ => Cap::None,
                    };
                    let shown = if hidden {
                        None
                    } else {
                        shown_one(t, ss, sz, src, &url, css, layout)
                    };
                    imgs.push(Img {
                        url: abs,
                        node,
                        shown,
                        hidden,
                        loading_set,
                        cap,
                        css_height: node.and_then(|i| lay.css_height(i)),
                    });
                }
                _ => {}
            }
        }
    }
    out.imgs = imgs;
    out
}

fn cap_unknown(c: Cap) -> bool {
    c == Cap::Unknown
}

/// How one rendered `<img>` is shown: `css` is its CSS width (Err: it
/// needs layout redline does not do); None when nothing gives a width.
fn shown_one(
    t: &Tag,
    ss: Option<&str>,
    sz: Option<&str>,
    src: Option<&str>,
    url: &str,
    css: Option<Result<(Option<f64>, Cap), ()>>,
    layout: &Viewport,
) -> Option<Shown> {
    let mut cands = ss.map(parse_srcset).unwrap_or_default();
    let width_mode = cands.iter().any(|c| c.width.is_some());
    if !width_mode {
        if let Some(s) = src {
            if !cands.iter().any(|c| c.density.unwrap_or(1.0) == 1.0) {
                cands.push(crate::srcset::Candidate {
                    url: s.to_string(),
                    width: None,
                    density: Some(1.0),
                });
            }
        }
    }
    let density = cands
        .iter()
        .find(|c| c.url.trim() == url.trim())
        .and_then(|c| c.density)
        .unwrap_or(1.0);
    let attr_w = t.attr("width").and_then(dim);
    let attr_h = t.attr("height").and_then(dim);
    let (css_w, cap) = match css {
        Some(Ok(v)) => v,
        Some(Err(())) => return None,
        None => (None, Cap::None),
    };
    let s = if width_mode {
        Shown {
            width: Some(source_size(sz, layout)),
            height: None,
            density: 1.0,
            from: "sizes",
            chosen: false,
            max: None,
        }
    } else if let Some(w) = css_w {
        Shown {
            width: Some(w),
            height: None,
            density,
            from: "CSS width",
            chosen: false,
            max: None,
        }
    } else if let Some(w) = attr_w {
        Shown {
            width: Some(w),
            height: attr_h,
            density,
            from: "width attribute",
            chosen: false,
            max: None,
        }
    } else if ss.is_some() && density > 0.0 {
        Shown {
            width: None,
            height: None,
            density,
            from: "srcset density",
            chosen: false,
            max: None,
        }
    } else if attr_h.is_none() && !cap_unknown(cap) {
        // Nothing sizes it: its intrinsic size shows.
        Shown {
            width: None,
            height: None,
            density: 1.0,
            from: "intrinsic size",
            chosen: false,
            max: None,
        }
    } else {
        return None;
    };
    // A known `max-width` caps a width the page gives (the intrinsic
    // width's cap is applied where the intrinsic size is known).
    let width = match (s.width, cap) {
        (Some(w), Cap::Known(c)) if c < w && !width_mode => Some(c),
        (w, _) => w,
    };
    let height = if width != s.width { None } else { s.height };
    Some(Shown {
        width,
        height,
        chosen: ss.is_some() && cands.len() >= 2,
        max: match cap {
            Cap::Known(c) if !width_mode => Some(c),
            _ => None,
        },
        ..s
    })
}

/// How the page's HTML shows each image URL it fetches on screen `screen`
/// (`sheets`: the text of the stylesheets fetched, in load order). An URL
/// shown more than once keeps its widest showing.
pub(super) fn shown(
    html: &[u8],
    page_url: &str,
    screen: &Viewport,
    sheets: &[&str],
) -> HashMap<String, Shown> {
    let mut map: HashMap<String, Shown> = HashMap::new();
    for img in scan(html, page_url, screen, sheets).imgs {
        let Some(s) = img.shown else { continue };
        let wider = |old: &Shown| match (old.width, s.width) {
            (Some(a), Some(b)) => b > a,
            _ => false,
        };
        if map.get(&img.url).is_none_or(wider) {
            map.insert(img.url, s);
        }
    }
    map
}

/// The images-scaled check's view of a page: for each image URL the HTML
/// shows on `screen`, its width in CSS px (none: its intrinsic width over
/// the density), the `x` density it was picked for and a known `max-width`
/// capping that intrinsic width; sorted by URL.
pub fn shown_widths(
    html: &[u8],
    page_url: &str,
    screen: &Viewport,
    sheets: &[&str],
) -> Vec<(String, Option<f64>, f64, Option<f64>)> {
    let mut v: Vec<_> = shown(html, page_url, screen, sheets)
        .into_iter()
        .map(|(u, s)| (u, s.width, s.density, s.max))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn dim(v: &str) -> Option<f64> {
    let v = v.trim().trim_end_matches("px");
    v.parse::<u32>().ok().filter(|&x| x > 0).map(f64::from)
}

/// The text of the stylesheets the first view fetched that apply, in
/// cascade order (each sheet's imports before it): a `<link rel=stylesheet>` of the page whose `media` does not
/// match (`print`) or that is an alternate is fetched but left out.
pub(super) fn sheets<'a>(cx: &'a Ctx) -> Vec<&'a str> {
    let off: std::collections::HashSet<String> = cx
        .doc()
        .and_then(|d| {
            let body = d.body.as_deref()?;
            let scan = crate::discover::scan_html(body, &cx.first.discovery.viewport);
            let page = Url::parse(&d.url).ok()?;
            let base = scan
                .base
                .as_deref()
                .and_then(|b| page.join(b.trim()).ok())
                .unwrap_or(page);
            Some(
                scan.embeds
                    .iter()
                    .filter(|e| e.sheet.is_some_and(|(_, applies)| !applies))
                    .filter_map(|e| absolute(&base, &e.url))
                    .collect(),
            )
        })
        .unwrap_or_default();
    // Cascade order: a sheet's `@import`s (the sheets it led to) before
    // its own rules, the rest in load order.
    let entries = &cx.first.entries;
    let css = |i: usize| {
        let e = &entries[i];
        e.content_type == "text/css" && e.status == Some(200) && !e.from_cache
    };
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for i in (0..entries.len()).filter(|&i| css(i)) {
        match entries[i].parent.filter(|&p| p < entries.len() && css(p)) {
            Some(p) => children.entry(p).or_default().push(i),
            None => roots.push(i),
        }
    }
    fn emit(i: usize, children: &HashMap<usize, Vec<usize>>, out: &mut Vec<usize>, depth: u8) {
        if depth < 16 && !out.contains(&i) {
            for &c in children.get(&i).map(Vec::as_slice).unwrap_or(&[]) {
                emit(c, children, out, depth + 1);
            }
            out.push(i);
        }
    }
    let mut order = Vec::new();
    for r in roots {
        emit(r, &children, &mut order, 0);
    }
    order
        .into_iter()
        .map(|i| &entries[i])
        .filter(|e| absolute_of(&e.url).is_none_or(|u| !off.contains(&u)))
        .filter_map(|e| e.body.as_deref())
        .filter_map(|b| std::str::from_utf8(b).ok())
        .collect()
}

fn absolute_of(u: &str) -> Option<String> {
    let mut u = Url::parse(u).ok()?;
    u.set_fragment(None);
    Some(u.to_string())
}

/// Whether a script of the page puts images in it at run time — markup
/// with `<img` written by `innerHTML`, `outerHTML`, `insertAdjacentHTML` or
/// `document.write`, or `createElement("img")`, or `new Image(` — and
/// where: "an inline script of <page>" or the script's URL. redline runs no
/// script, so such images are neither fetched nor judged; the image
/// checks say so instead of passing them over in silence.
pub(super) fn script_images(cx: &Ctx) -> Option<String> {
    fn builds(code: &str) -> bool {
        let l = code.to_ascii_lowercase();
        let writes = [
            "innerhtml",
            "outerhtml",
            "insertadjacenthtml",
            "document.write",
        ]
        .iter()
        .any(|w| l.contains(w));
        (writes && l.contains("<img"))
            || l.contains("createelement(\"img\")")
            || l.contains("createelement('img')")
            || l.contains("new image(")
    }
    if let Some(d) = cx.doc() {
        let html = String::from_utf8_lossy(d.body.as_deref().unwrap_or_default());
        let lower = html.to_ascii_lowercase();
        let mut at = 0;
        // Bounded: each pass moves past one `<script`.
        while let Some(p) = lower[at..].find("<script") {
            let open = at + p;
            let Some(gt) = lower[open..].find('>') else {
                break;
            };
            let body = open + gt + 1;
            let end = lower[body..]
                .find("</script")
                .map_or(lower.len(), |q| body + q);
            if builds(&html[body..end]) {
                return Some(format!("an inline script of {}", d.url));
            }
            at = end.max(open + 1);
        }
    }
    cx.ok()
        .filter(|e| e.content_type.contains("javascript") || e.content_type.contains("ecmascript"))
        .find(|e| {
            e.body
                .as_deref()
                .is_some_and(|b| builds(&String::from_utf8_lossy(b)))
        })
        .map(|e| e.url.clone())
}

/// An image check's summary: `judged` (`none` when `n` is 0: then "not
/// applicable: …", which [`check`] keeps) and `tail`, what was not judged.
fn summary(judged: String, none: &str, n: usize, tail: String) -> String {
    if n == 0 {
        format!("not applicable: {none}{tail}")
    } else {
        judged + &tail
    }
}

/// The summary's tail for [`script_images`]: empty when no script does.
/// With `--browser` the scripts ran in Chromium: how many images of the
/// page's own site only they name were fetched.
fn script_note(cx: &Ctx) -> String {
    if cx.probes.browser {
        let found = cx
            .ok()
            .filter(|e| e.by_script.is_some() && !e.third_party)
            .count();
        return match found {
            0 => String::new(),
            1 => "; 1 image found by running the page's scripts in Chromium".into(),
            n => format!("; {n} images found by running the page's scripts in Chromium"),
        };
    }
    script_images(cx).map_or(String::new(), |w| {
        format!(
            "; {w} inserts images at run time: not fetched, not judged (redline runs no script)"
        )
    })
}

pub(super) fn scaled(cx: &Ctx) -> Check {
    let screen = cx.first.discovery.viewport;
    let dpr = cx.probes.dpr.unwrap_or(screen.dpr).clamp(0.5, 8.0);
    let screen = Viewport { dpr, ..screen };
    let sheets = sheets(cx);
    let model = cx
        .doc()
        .and_then(|d| Some((d.url.as_str(), d.body.as_deref()?)))
        .map(|(u, b)| shown(b, u, &screen, &sheets))
        .unwrap_or_default();
    let mut f = Vec::new();
    let (mut n, mut bad, mut unknown) = (0, 0, 0);
    for e in cx.ok() {
        let Some((iw, ih)) = e.intrinsic else {
            continue;
        };
        if iw == 0 || ih == 0 {
            continue;
        }
        let (fw, fh) = (f64::from(iw), f64::from(ih));
        let key = Url::parse(&e.url).map_or(e.url.clone(), |u| u.to_string());
        // The displayed size in CSS px: Chromium's layout for an image the
        // page's scripts insert (`--browser`), else the viewport model, else
        // the attributes discovery kept; a missing dimension keeps the
        // aspect ratio.
        let by_script = e.by_script.as_ref().map(|b| b.displayed);
        let s = match (by_script, model.get(&key)) {
            (Some(Some((w, h))), _) => Shown {
                width: Some(w),
                height: Some(h),
                density: 1.0,
                from: "as Chromium displays it",
                chosen: false,
                max: None,
            },
            (Some(None), _) => {
                unknown += usize::from(!e.third_party);
                continue;
            }
            (None, Some(s)) => s.clone(),
            (None, None) => match e.html_size {
                Some((Some(w), h)) => Shown {
                    width: Some(f64::from(w)),
                    height: h.map(f64::from),
                    density: 1.0,
                    from: "width attribute",
                    chosen: false,
                    max: None,
                },
                Some((None, Some(h))) => Shown {
                    width: Some(fw * f64::from(h) / fh),
                    height: Some(f64::from(h)),
                    density: 1.0,
                    from: "height attribute",
                    chosen: false,
                    max: None,
                },
                _ => {
                    unknown += usize::from(!e.third_party);
                    continue;
                }
            },
        };
        let dw = s.width_for(fw).max(1.0);
        let capped = s.width.is_none() && s.max.is_some_and(|m| m < fw / s.density.max(0.01));
        let dh = s.height.unwrap_or(dw * fh / fw).max(1.0);
        let from = if capped { "max-width" } else { s.from };
        if !e.third_party {
            n += 1;
        }
        // Pixels needed: the displayed size times the DPR in each direction.
        let (nw, nh) = ((dw * dpr).ceil(), (dh * dpr).ceil());
        let needed = nw * nh;
        let real = fw * fh;
        // srcset's pick among candidates is the browser's choice for this DPR.
        if real <= needed || s.chosen {
            continue;
        }
        let waste = (e.body_wire_bytes as f64 * (1.0 - needed / real)) as u64;
        if waste <= IMAGE_MIN_WASTE {
            continue;
        }
        if !e.third_party {
            bad += 1;
        }
        let (t, mut fi) = finding(
            Severity::Warning,
            e,
            format!(
                "{iw}×{ih} image shown at {dw:.0}×{dh:.0} CSS px ({}); at DPR {dpr} it needs {nw}×{nh}; about {} of its {} on the wire wasted",
                from,
                bytes(waste),
                bytes(e.body_wire_bytes)
            ),
        );
        fi.saving_bytes = Some(waste);
        f.push((t, fi));
    }
    check(
        "images-scaled",
        "Images no larger than needed at the device pixel ratio",
        "a finding when more than 4 KiB on the wire is wasted against the size shown × DPR (Lighthouse); the size shown comes from the viewport model: srcset's sizes, a plain CSS width, the width/height attributes",
        pct(n - bad, n),
        summary(
            format!(
                "{} of {n} images with a known display size are no larger than needed at DPR {dpr}",
                n - bad
            ),
            "no fetched image has a known display size",
            n,
            if unknown > 0 {
                format!("; {unknown} fetched, not judged: not shown, or display size not known")
            } else {
                String::new()
            } + &script_note(cx),
        ),
        f,
        FIX_IMAGES,
    )
}

/// Modern-format findings of re-encoded images only above this many bytes
/// saved (Lighthouse's `IGNORE_THRESHOLD_IN_BYTES` for modern-image-formats).
const MODERN_MIN_WASTE: u64 = 8192;

pub(super) fn format(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut bad) = (0, 0);
    for e in cx.ok() {
        let ct = e.content_type.as_str();
        if !matches!(ct, "image/png" | "image/jpeg" | "image/gif") {
            continue;
        }
        let Some((w, h)) = e.intrinsic else { continue };
        if !e.third_party {
            n += 1;
        }
        let px = u64::from(w) * u64::from(h);
        let wire = e.body_wire_bytes;
        // IHDR colour type 2 (RGB) or 6 (RGBA), many bytes per pixel, large:
        // a photograph; as JPEG about 2 bits per pixel at quality ~80.
        let truecolor_png = ct == "image/png"
            && e.body
                .as_ref()
                .is_some_and(|b| b.len() > 25 && matches!(b[25], 2 | 6));
        // A whole JPEG/PNG/BMP up to 2000 KiB is re-encoded, as Lighthouse
        // has Chromium do; the rest (GIF, larger) gets its per-pixel estimate.
        let whole = e
            .body
            .as_ref()
            .filter(|b| b.len() as u64 == e.decoded_bytes && crate::http::is_encodable(ct));
        if let Some(enc) = whole.and_then(|b| super::encode::reencode(b)) {
            let (webp, avif) = (enc.webp, enc.avif());
            if wire < avif + MODERN_MIN_WASTE {
                continue;
            }
            if !e.third_party {
                bad += 1;
            }
            let photo = if truecolor_png && px >= 40_000 && wire > px {
                " (a true-colour PNG: likely a photograph)"
            } else {
                ""
            };
            let (t, mut fi) = finding(
                Severity::Warning,
                e,
                format!(
                    "{w}×{h} {} of {}{photo}: encoded as WebP (quality 85) {} (saves {}), as JPEG (92) {}; as AVIF about {} (saves {})",
                    ct.trim_start_matches("image/").to_ascii_uppercase(),
                    bytes(wire),
                    bytes(webp),
                    bytes(wire.saturating_sub(webp)),
                    bytes(enc.jpeg),
                    bytes(avif),
                    bytes(wire - avif)
                ),
            );
            fi.saving_bytes = Some(wire - avif);
            f.push((t, fi));
            continue;
        }
        let (webp, avif) = (webp_estimate(px), avif_estimate(px));
        let why = if truecolor_png && px >= 40_000 && wire > px && wire > webp + IMAGE_MIN_WASTE {
            Some(format!(
                "{w}×{h} true-colour PNG of {} ({:.1} bytes per pixel): likely a photograph; as JPEG or WebP about {}, as AVIF about {}",
                bytes(wire),
                wire as f64 / px as f64,
                bytes(webp),
                bytes(avif)
            ))
        } else if wire > avif + MODERN_MIN_WASTE {
            Some(format!(
                "{w}×{h} {} of {}: as WebP about {} (saves {}), as AVIF about {} (saves {})",
                ct.trim_start_matches("image/").to_ascii_uppercase(),
                bytes(wire),
                bytes(webp),
                bytes(wire.saturating_sub(webp)),
                bytes(avif),
                bytes(wire - avif)
            ))
        } else {
            None
        };
        let Some(why) = why else { continue };
        if !e.third_party {
            bad += 1;
        }
        let (t, mut fi) = finding(Severity::Warning, e, why);
        // As Lighthouse, the saving shown is AVIF's (WebP's is in the evidence).
        fi.saving_bytes = Some(wire - avif);
        f.push((t, fi));
    }
    check(
        "images-format",
        "Images in a fitting format (no photographs as PNG; WebP/AVIF)",
        "a finding when AVIF would save more than 8 KiB on the wire (Lighthouse): JPEG/PNG/BMP up to 2000 KiB re-encoded as Lighthouse has Chromium do (WebP quality 85, JPEG 92, AVIF estimated from both); GIF and larger images from Lighthouse's per-pixel estimates (WebP 2/10, AVIF 2/12 byte per pixel), a photograph as PNG flagged",
        pct(n - bad, n),
        summary(
            format!("{} of {n} JPEG/PNG/GIF images in a fitting format", n - bad),
            "no JPEG, PNG or GIF image fetched",
            n,
            script_note(cx),
        ),
        f,
        FIX_IMAGES,
    )
}

#[cfg(test)]
mod tests;
