//! The HTML tag scanner: what one document embeds for a given screen
//! (scripts, links, media, images and `srcset`, lazy loading, frames).

use super::*;

/// Image types Chromium decodes (a `<source type>` outside this list is skipped).
pub(super) const IMAGE_TYPES: [&str; 12] = [
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
pub(super) const PLAYABLE: [&str; 12] = [
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
pub(super) fn script_kind(t: Option<&str>) -> Option<bool> {
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
pub(super) const LAZY_IMAGE_MARGIN: f64 = 1250.0;
pub(super) const LAZY_FRAME_MARGIN: f64 = 4000.0;
/// The estimated height of a paragraph-like block (px).
pub(super) const BLOCK_PX: f64 = 20.0;

pub(super) fn style_height(style: &str, vp: &Viewport) -> f64 {
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

pub(super) struct Picture {
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
    // The head ends at <body> or the first element the head cannot hold.
    let mut in_head = true;
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
        if in_head
            && !inert
            && !matches!(
                name.as_str(),
                "html" | "head" | "meta" | "link" | "script" | "style" | "title" | "base"
            )
        {
            in_head = false;
        }
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
                    handle_script(&attrs, content, &mut out, in_head);
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
                            push(&mut out.embeds, s, Kind::Media);
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
                    push(&mut out.embeds, s, Kind::Media);
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
            "link" => handle_link(&attrs, &mut out, &mut sheet_no, in_head),
            _ => {}
        }
    }
    out
}

pub(super) fn push(v: &mut Vec<Embed>, url: &str, kind: Kind) {
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

pub(super) fn handle_script(
    a: &[(String, String)],
    content: &[u8],
    out: &mut HtmlScan,
    in_head: bool,
) {
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
            let deferred = module || a.iter().any(|(n, _)| n == "async" || n == "defer");
            if in_head && !deferred && !s.is_empty() && out.blocking.len() < 1000 {
                out.blocking.push(s.to_string());
            }
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

pub(super) fn handle_link(
    a: &[(String, String)],
    out: &mut HtmlScan,
    sheet_no: &mut u32,
    in_head: bool,
) {
    let rel = attr(a, "rel").unwrap_or("").to_ascii_lowercase();
    let rels: Vec<&str> = rel.split_ascii_whitespace().collect();
    let Some(href) = attr(a, "href").map(str::trim).filter(|h| !h.is_empty()) else {
        return;
    };
    if rels.contains(&"preconnect") && out.preconnects.len() < 100 {
        out.preconnects.push(href.to_string());
    }
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
        if applies && in_head && out.blocking.len() < 1000 {
            out.blocking.push(href.to_string());
        }
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
        if out.preloads.len() < 100 {
            let as_ = attr(a, "as").unwrap_or("").to_ascii_lowercase();
            out.preloads.push((e.url.clone(), as_));
        }
    } else {
        return;
    }
    out.embeds.push(e);
}
