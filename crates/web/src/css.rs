//! A forgiving CSS structure scanner for discovery: `@import` (with its media
//! list), `@font-face` (family, weight, style and the one `src` a browser
//! fetches), and style rules (selector text, the images their declarations
//! load, the font families and weights they ask for), walking into `@media`
//! blocks that match the viewport, `@supports`, `@layer` and `@container`,
//! and skipping `@keyframes`, `@page` and the like. A style rule's images
//! and fonts count only when its selector could match the document: every
//! type, `#id` and `.class` it names occurs in the document, and it does not
//! depend on user action (`:hover`, `:focus`, `:active`…), whose images a
//! browser loads only when the user acts.
//!
//! Hand-written rather than a CSS crate: discovery needs a tenth of a CSS
//! parser (block structure, declarations, `url()`), must never fail on bad
//! input, and a full engine (lightningcss, cssparser + selectors) would
//! still leave the viewport and presence questions to this code.

use crate::viewport::{split_top, Viewport};
use std::collections::HashSet;

/// An `@import`.
#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    /// The URL as written.
    pub url: String,
    /// Its media list (empty: all).
    pub media: String,
}

/// An `@font-face` rule.
#[derive(Clone, Debug, PartialEq)]
pub struct FontFace {
    /// `font-family`, unquoted, lower case.
    pub family: String,
    /// `font-weight` range (a single weight is a range of one).
    pub weight: (u16, u16),
    /// `font-style: italic` or `oblique`.
    pub italic: bool,
    /// The first `src` URL whose format Chromium supports (woff2, woff,
    /// truetype, opentype, collection; not embedded-opentype or svg); a URL
    /// without `format()` counts as supported, as the browser tries it.
    pub src: Option<String>,
    /// `unicode-range` (inclusive code point ranges); empty: every character.
    pub ranges: Vec<(u32, u32)>,
}

/// A style rule.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Rule {
    /// The selector list as written.
    pub selectors: String,
    /// Per image property group ([`image_group`]): the URLs its last
    /// declaration loads (one `image-set()` candidate for the DPR); `Some`
    /// and empty when it sets the property without an image (`background:
    /// #fff` hides an earlier rule's image).
    pub images: Vec<Option<Vec<String>>>,
    /// `font-family` (or the `font` shorthand's families), lower case.
    pub families: Vec<String>,
    /// `font-weight` it sets.
    pub weight: Option<u16>,
    /// `font-style` it sets to italic/oblique.
    pub italic: bool,
    /// `font-style` (or the `font` shorthand) it sets: italic/oblique or not.
    pub font_style: Option<bool>,
    /// `display` it sets: `none` or another value.
    pub display_none: Option<bool>,
    /// `content` it sets: Some(true) when it generates a box (not `none` or
    /// `normal`).
    pub content: Option<bool>,
    /// Its `content` holds a string (text drawn in the element's font).
    pub content_text: bool,
    /// The characters of that string.
    pub content_chars: String,
    /// Custom properties it sets (`--name`, raw value).
    pub custom: Vec<(String, String)>,
}

/// What a stylesheet holds.
#[derive(Clone, Debug, Default)]
pub struct Sheet {
    /// `@import`s in order.
    pub imports: Vec<Import>,
    /// `@font-face` rules in order.
    pub faces: Vec<FontFace>,
    /// Style rules (inside matching `@media` blocks) in order.
    pub rules: Vec<Rule>,
}

/// Element names, ids and classes that occur in a document.
#[derive(Clone, Debug, Default)]
pub struct Presence {
    /// Lower-case element names.
    pub tags: HashSet<String>,
    /// Ids (case-sensitive).
    pub ids: HashSet<String>,
    /// Classes (case-sensitive).
    pub classes: HashSet<String>,
}

/// Rules and items looked at per sheet at most (a bound for hostile input).
const MAX_ITEMS: usize = 100_000;

/// Removes comments (outside strings).
fn strip_comments(css: &str) -> String {
    let b = css.as_bytes();
    let mut out = String::with_capacity(css.len());
    let mut i = 0;
    let mut last = 0;
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' => {
                let q = b[i];
                i += 1;
                while i < b.len() && b[i] != q && b[i] != b'\n' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                out.push_str(&css[last..i]);
                let end = css[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                out.push(' ');
                i = end;
                last = end;
            }
            _ => i += 1,
        }
    }
    if last < css.len() {
        out.push_str(&css[last.min(css.len())..]);
    }
    out
}

/// Index of the first `stop` byte at depth 0 outside strings, from `i`.
fn find_top(s: &[u8], mut i: usize, stops: &[u8]) -> usize {
    let mut depth = 0i32;
    while i < s.len() {
        let c = s[i];
        if depth <= 0 && stops.contains(&c) {
            return i;
        }
        if c == b'"' || c == b'\'' {
            i += 1;
            while i < s.len() && s[i] != c {
                if s[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
        } else if c == b'(' || c == b'[' {
            depth += 1;
        } else if c == b')' || c == b']' {
            depth -= 1;
        }
        i += 1;
    }
    s.len()
}

/// Index just past the `}` matching the `{` at `open`.
fn block_end(s: &[u8], open: usize) -> usize {
    let mut depth = 0i32;
    let mut i = open;
    while i < s.len() {
        let c = s[i];
        if c == b'"' || c == b'\'' {
            i += 1;
            while i < s.len() && s[i] != c {
                if s[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
        } else if c == b'{' {
            depth += 1;
        } else if c == b'}' {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
        i += 1;
    }
    s.len()
}

/// Parses a stylesheet for a screen `vp`.
pub fn parse(css: &[u8], vp: &Viewport) -> Sheet {
    let text = strip_comments(&String::from_utf8_lossy(css));
    let mut out = Sheet::default();
    let mut budget = MAX_ITEMS;
    block(&text, vp, &mut out, 0, &mut budget);
    out
}

fn block(s: &str, vp: &Viewport, out: &mut Sheet, depth: u8, budget: &mut usize) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && *budget > 0 {
        *budget -= 1;
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b';' || b[i] == b'}') {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let end = find_top(b, i, b"{;");
        let prelude = s[i..end].trim();
        if end >= b.len() {
            break;
        }
        if b[end] == b';' {
            if let Some(rest) = strip_ci(prelude, "@import") {
                if let Some(imp) = import(rest) {
                    out.imports.push(imp);
                }
            }
            i = end + 1;
            continue;
        }
        let close = block_end(b, end);
        // Up to the closing brace; an unterminated block runs to the end.
        let body_end = if close < b.len() || b.last() == Some(&b'}') {
            close - 1
        } else {
            close
        };
        let body = &s[end + 1..body_end.max(end + 1)];
        i = close;
        if let Some(at) = prelude.strip_prefix('@') {
            let name_end = at
                .find(|c: char| c.is_whitespace() || c == '(')
                .unwrap_or(at.len());
            let name = at[..name_end].to_ascii_lowercase();
            let cond = at[name_end..].trim();
            if depth >= 16 {
                continue;
            }
            match name.as_str() {
                "media" if vp.matches_media(cond) => block(body, vp, out, depth + 1, budget),
                "supports" | "layer" | "container" | "scope" | "document" | "-moz-document"
                | "starting-style" => block(body, vp, out, depth + 1, budget),
                "font-face" => out.faces.push(font_face(body)),
                _ => {}
            }
            continue;
        }
        out.rules.push(rule(prelude, body, vp));
    }
}

fn strip_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    let s = s
        .strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
        .unwrap_or(s);
    s.trim().to_string()
}

fn import(rest: &str) -> Option<Import> {
    let rest = rest.trim();
    let (url, after) = if let Some(r) = strip_ci(rest, "url(") {
        let e = r.find(')')?;
        (unquote(&r[..e]), &r[e + 1..])
    } else if rest.starts_with('"') || rest.starts_with('\'') {
        let q = rest.as_bytes()[0] as char;
        let e = rest[1..].find(q)? + 1;
        (rest[1..e].to_string(), &rest[e + 1..])
    } else {
        return None;
    };
    // Drop layer / layer(...) and supports(...) before the media list.
    let mut media = after.trim().to_string();
    loop {
        let lower = media.to_ascii_lowercase();
        if lower.starts_with("layer(") || lower.starts_with("supports(") {
            let open = media.find('(').unwrap_or(0);
            let mut depth = 0i32;
            let mut end = media.len();
            for (k, c) in media[open..].char_indices() {
                if c == '(' {
                    depth += 1;
                } else if c == ')' {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
            }
            media = media[end..].trim().to_string();
        } else if lower == "layer" || lower.starts_with("layer ") {
            media = media[5..].trim().to_string();
        } else {
            break;
        }
    }
    (!url.is_empty()).then_some(Import { url, media })
}

fn decls(body: &str) -> Vec<(String, String)> {
    let b = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() && out.len() < 1000 {
        let e = find_top(b, i, b";{");
        let d = &body[i..e];
        if e < b.len() && b[e] == b'{' {
            // A nested rule (CSS nesting): skip its block.
            i = block_end(b, e);
            continue;
        }
        if let Some((n, v)) = d.split_once(':') {
            let v = v.trim();
            let v = v
                .strip_suffix("!important")
                .or_else(|| v.strip_suffix("! important"))
                .unwrap_or(v);
            out.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        i = e + 1;
    }
    out
}

fn weight_of(v: &str) -> Option<u16> {
    match v.trim().to_ascii_lowercase().as_str() {
        "normal" => Some(400),
        "bold" | "bolder" => Some(700),
        "lighter" => Some(300),
        n => n.parse::<f32>().ok().map(|w| w.clamp(1.0, 1000.0) as u16),
    }
}

/// A `font-family` list, unquoted and lower case (`var(…)` kept whole).
pub fn families(v: &str) -> Vec<String> {
    split_top(v, ',')
        .into_iter()
        .map(|f| unquote(f).to_ascii_lowercase())
        .filter(|f| !f.is_empty())
        .collect()
}

fn font_face(body: &str) -> FontFace {
    let mut f = FontFace {
        family: String::new(),
        weight: (400, 400),
        italic: false,
        src: None,
        ranges: Vec::new(),
    };
    for (n, v) in decls(body) {
        match n.as_str() {
            "font-family" => f.family = unquote(&v).to_ascii_lowercase(),
            "font-weight" => {
                let ws: Vec<u16> = v.split_whitespace().filter_map(weight_of).collect();
                if let (Some(&a), Some(&b)) = (ws.first(), ws.last()) {
                    f.weight = (a.min(b), a.max(b));
                }
            }
            "font-style" => {
                let l = v.to_ascii_lowercase();
                f.italic = l.starts_with("italic") || l.starts_with("oblique");
            }
            // The last src declaration wins (the "bulletproof" syntax
            // repeats it); its first supported entry is fetched.
            "src" => f.src = font_src(&v),
            "unicode-range" => f.ranges = unicode_ranges(&v),
            _ => {}
        }
    }
    f
}

/// Parses `unicode-range`: `U+0000-00FF, U+0131, U+4??`.
pub fn unicode_ranges(v: &str) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for item in v.split(',').take(1000) {
        let item = item.trim();
        let Some(r) = item.strip_prefix("U+").or_else(|| item.strip_prefix("u+")) else {
            continue;
        };
        let (lo, hi) = match r.split_once('-') {
            Some((a, b)) => (
                u32::from_str_radix(a.trim(), 16),
                u32::from_str_radix(b.trim(), 16),
            ),
            None if r.contains('?') => (
                u32::from_str_radix(&r.replace('?', "0"), 16),
                u32::from_str_radix(&r.replace('?', "F"), 16),
            ),
            None => (u32::from_str_radix(r, 16), u32::from_str_radix(r, 16)),
        };
        if let (Ok(lo), Ok(hi)) = (lo, hi) {
            if lo <= hi {
                out.push((lo, hi.min(0x10FFFF)));
            }
        }
    }
    out
}

/// The characters of a CSS string value (`"\f588"`, `"→ "`): escapes decoded.
pub fn string_chars(v: &str) -> String {
    let mut out = String::new();
    let mut chars = v.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (Some(_), '\\') => {
                let mut hex = String::new();
                while hex.len() < 6 && chars.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                    hex.push(chars.next().unwrap_or('0'));
                }
                if hex.is_empty() {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                } else {
                    if chars.peek() == Some(&' ') {
                        chars.next();
                    }
                    if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                        out.push(ch);
                    }
                }
            }
            (Some(_), c) => out.push(c),
            (None, _) => {}
        }
        if out.len() > 1000 {
            break;
        }
    }
    out
}

/// The entry of a `src` list Chromium fetches first.
pub fn font_src(v: &str) -> Option<String> {
    for item in split_top(v, ',') {
        let item = item.trim();
        let Some(r) = strip_ci(item, "url(") else {
            continue;
        };
        let e = find_top(r.as_bytes(), 0, b")");
        let url = unquote(&r[..e.min(r.len())]);
        let rest = r[(e + 1).min(r.len())..].to_ascii_lowercase();
        let supported = match rest.find("format(") {
            None => true,
            Some(p) => {
                let inner = &rest[p + 7..];
                let inner = &inner[..inner.find(')').unwrap_or(inner.len())];
                split_top(inner, ',').iter().any(|f| {
                    matches!(
                        unquote(f).as_str(),
                        "woff2"
                            | "woff"
                            | "truetype"
                            | "opentype"
                            | "collection"
                            | "woff2-variations"
                            | "woff-variations"
                            | "truetype-variations"
                            | "opentype-variations"
                    )
                })
            }
        };
        if supported && !url.is_empty() && !url.starts_with('#') {
            return Some(url);
        }
    }
    None
}

/// Image property groups: a declaration of any property in a group sets
/// that group's image (a shorthand sets its longhand).
pub const IMAGE_GROUPS: usize = 7;

/// The group of a property whose `url()` values a browser fetches as images.
pub fn image_group(prop: &str) -> Option<usize> {
    Some(match prop {
        "background" | "background-image" => 0,
        "list-style" | "list-style-image" => 1,
        "border-image" | "border-image-source" | "-webkit-border-image" => 2,
        "content" => 3,
        "cursor" => 4,
        "mask" | "mask-image" | "-webkit-mask" | "-webkit-mask-image" => 5,
        "-webkit-mask-box-image" => 6,
        _ => return None,
    })
}

impl Rule {
    /// Every image URL of the rule.
    pub fn urls(&self) -> Vec<String> {
        self.images.iter().flatten().flatten().cloned().collect()
    }
}

fn rule(selectors: &str, body: &str, vp: &Viewport) -> Rule {
    let mut r = Rule {
        selectors: selectors.to_string(),
        ..Rule::default()
    };
    r.images = vec![None; IMAGE_GROUPS];
    for (n, v) in decls(body) {
        if n.starts_with("--") {
            if r.custom.len() < 256 {
                r.custom.push((n, v));
            }
            continue;
        }
        if let Some(g) = image_group(&n) {
            r.images[g] = Some(value_urls(&v, vp));
        }
        match n.as_str() {
            "font-family" => r.families = families(&v),
            "font" => {
                // [style] [weight] size[/line-height] family, …
                let words: Vec<&str> = v.split_whitespace().collect();
                if let Some(p) = words.iter().position(|w| {
                    w.starts_with(|c: char| c.is_ascii_digit() || c == '.')
                        && !w.chars().all(|c| c.is_ascii_digit())
                }) {
                    r.families = families(&words[p + 1..].join(" "));
                    // The shorthand resets what it does not name.
                    r.weight = Some(400);
                    r.font_style = Some(false);
                    for w in &words[..p] {
                        if let Some(x) = weight_of(w).filter(|_| *w != "normal") {
                            r.weight = Some(x);
                        }
                        if w.eq_ignore_ascii_case("italic") || w.eq_ignore_ascii_case("oblique") {
                            r.italic = true;
                            r.font_style = Some(true);
                        }
                    }
                }
            }
            "font-weight" => r.weight = weight_of(&v),
            "font-style" => {
                let l = v.to_ascii_lowercase();
                r.italic = l.starts_with("italic") || l.starts_with("oblique");
                r.font_style = Some(r.italic);
            }
            "display" => r.display_none = Some(v.trim().eq_ignore_ascii_case("none")),
            "content" => {
                let l = v.trim().to_ascii_lowercase();
                r.content = Some(l != "none" && l != "normal");
                r.content_text = v.contains(['"', '\'']);
                r.content_chars = string_chars(&v);
            }
            _ => {}
        }
    }
    r
}

/// The image URLs in a property value: every `url()`, but one candidate of
/// an `image-set()` (the same choice as `srcset`'s x descriptors).
pub fn value_urls(v: &str, vp: &Viewport) -> Vec<String> {
    let mut out = Vec::new();
    let lower = v.to_ascii_lowercase();
    let mut i = 0;
    while i < v.len() && out.len() < 64 {
        let rest = &lower[i..];
        let set = rest.find("image-set(");
        let url = rest.find("url(");
        match (set, url) {
            (Some(s), u) if u.is_none_or(|u| s < u) => {
                let start = i + s + "image-set(".len();
                let end = find_top(v.as_bytes(), start, b")");
                let inner = &v[start..end.min(v.len())];
                let mut cands = String::new();
                for item in split_top(inner, ',') {
                    let item = item.trim();
                    let (u, rest) = if let Some(r) = strip_ci(item, "url(") {
                        let e = r.find(')').unwrap_or(r.len());
                        (
                            unquote(&r[..e]),
                            r[(e + 1).min(r.len())..].trim().to_string(),
                        )
                    } else if item.starts_with('"') || item.starts_with('\'') {
                        let q = item.as_bytes()[0] as char;
                        let e = item[1..].find(q).map_or(item.len(), |e| e + 1);
                        (
                            item[1..e].to_string(),
                            item[(e + 1).min(item.len())..].trim().to_string(),
                        )
                    } else {
                        continue;
                    };
                    // type("image/avif") candidates: only types Chromium decodes.
                    let d = rest
                        .split_whitespace()
                        .find(|w| w.ends_with('x') || w.ends_with("dppx"))
                        .unwrap_or("1x")
                        .trim_end_matches("dppx")
                        .trim_end_matches('x')
                        .to_string();
                    if !cands.is_empty() {
                        cands.push_str(", ");
                    }
                    cands.push_str(&format!("{} {d}x", u.replace(' ', "%20")));
                }
                if let Some(p) = crate::srcset::pick(Some(&cands), None, None, vp) {
                    out.push(p);
                }
                i = end + 1;
            }
            (_, Some(u)) => {
                let before = i + u;
                let prev_ok = before == 0 || {
                    let c = v.as_bytes()[before - 1];
                    !(c.is_ascii_alphanumeric() || c == b'-')
                };
                let start = before + 4;
                let end = if v[start..].trim_start().starts_with(['"', '\'']) {
                    find_top(v.as_bytes(), start, b")")
                } else {
                    v[start..].find(')').map_or(v.len(), |e| start + e)
                };
                if prev_ok {
                    let u = unquote(&v[start..end.min(v.len())]);
                    if !u.is_empty() && !u.starts_with("data:") && !u.starts_with('#') {
                        out.push(u);
                    }
                }
                i = end + 1;
            }
            _ => break,
        }
    }
    out
}

/// Pseudo-classes that need the user to act before they match.
pub const USER_ACTION: [&str; 8] = [
    "hover",
    "active",
    "focus",
    "focus-visible",
    "focus-within",
    "target",
    "visited",
    "popover-open",
];

/// Whether some selector of the list could match `doc`.
pub fn could_match(selectors: &str, doc: &Presence) -> bool {
    split_top(selectors, ',')
        .into_iter()
        .any(|s| complex_could_match(s.trim(), doc))
}

fn complex_could_match(sel: &str, doc: &Presence) -> bool {
    if sel.is_empty() {
        return false;
    }
    let b = sel.as_bytes();
    let mut i = 0;
    let mut compound_start = true;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' | b'>' | b'+' | b'~' => {
                compound_start = true;
                i += 1;
            }
            b'#' | b'.' => {
                let s = i + 1;
                let mut e = s;
                while e < b.len() && ident_byte(b[e]) {
                    if b[e] == b'\\' {
                        e += 1;
                    }
                    e += 1;
                }
                let name = sel[s..e.min(b.len())].replace('\\', "");
                let present = if c == b'#' {
                    doc.ids.contains(&name)
                } else {
                    doc.classes.contains(&name)
                };
                if !present {
                    return false;
                }
                compound_start = false;
                i = e;
            }
            b'[' => {
                i = find_top(b, i + 1, b"]") + 1;
                compound_start = false;
            }
            b':' => {
                let s = i + 1 + usize::from(b.get(i + 1) == Some(&b':'));
                let mut e = s;
                while e < b.len() && ident_byte(b[e]) {
                    e += 1;
                }
                let name = sel[s..e].to_ascii_lowercase();
                if s == i + 1 && USER_ACTION.contains(&name.as_str()) {
                    return false;
                }
                i = e;
                if b.get(i) == Some(&b'(') {
                    // :not(), :is(), :nth-child()…: not looked into.
                    i = find_top(b, i + 1, b")") + 1;
                }
                compound_start = false;
            }
            b'*' | b'&' | b'|' => {
                i += 1;
                compound_start = false;
            }
            _ if compound_start && ident_byte(c) => {
                let s = i;
                while i < b.len() && ident_byte(b[i]) {
                    i += 1;
                }
                let name = sel[s..i].to_ascii_lowercase();
                if !doc.tags.contains(&name) && !name.contains('|') {
                    return false;
                }
                compound_start = false;
            }
            _ => i += 1,
        }
    }
    true
}

fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'\\' || c >= 0x80
}

#[cfg(test)]
mod tests;
