//! Finding what a page embeds: a small, forgiving HTML tag scanner (comments,
//! raw-text elements, quoted and bare attributes, entities) and a CSS scanner
//! for `url()` and `@import`. Neither builds a tree: the loader needs the
//! references and a few attributes, not the document.

/// What an embedded reference is, which decides how it is fetched and parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The page itself, or an iframe's document.
    Document,
    /// `<iframe src>` (one level).
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
    Other,
}

/// One reference found in HTML or CSS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Embed {
    /// The reference as written (entities decoded), not yet resolved.
    pub url: String,
    /// What it is.
    pub kind: Kind,
    /// `width` attribute of an `<img>` (CSS pixels), when a plain number.
    pub width: Option<u32>,
    /// `height` attribute of an `<img>`, when a plain number.
    pub height: Option<u32>,
}

/// What the HTML scanner found.
#[derive(Clone, Debug, Default)]
pub struct HtmlScan {
    /// References in document order, duplicates kept.
    pub embeds: Vec<Embed>,
    /// `<base href>`, if any.
    pub base: Option<String>,
    /// Bytes inside `<style>` elements.
    pub inline_style_bytes: usize,
    /// Bytes inside `<script>` elements without `src`.
    pub inline_script_bytes: usize,
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
        let end = rest[..rest.len().min(12)].find(';');
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

/// The `srcset` candidate a 1× display picks: the `1x` one, else the first.
pub fn srcset_pick(srcset: &str) -> Option<String> {
    let cands: Vec<(&str, &str)> = srcset
        .split(',')
        .filter_map(|c| {
            let mut it = c.split_whitespace();
            let u = it.next()?;
            Some((u, it.next().unwrap_or("1x")))
        })
        .collect();
    cands
        .iter()
        .find(|(_, d)| *d == "1x")
        .or(cands.first())
        .map(|(u, _)| u.to_string())
}

fn find_ci(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    (from..=hay.len() - needle.len())
        .find(|&i| hay[i..i + needle.len()].eq_ignore_ascii_case(needle))
}

/// Scans HTML for embedded resources.
pub fn scan_html(html: &[u8]) -> HtmlScan {
    let mut out = HtmlScan::default();
    let n = html.len();
    let mut i = 0;
    while i < n {
        if html[i] != b'<' {
            i += 1;
            continue;
        }
        if html[i..].starts_with(b"<!--") {
            i = match find_ci(html, i + 4, b"-->") {
                Some(e) => e + 3,
                None => n,
            };
            continue;
        }
        if i + 1 < n && (html[i + 1] == b'!' || html[i + 1] == b'?' || html[i + 1] == b'/') {
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
        if let Some(st) = attr(&attrs, "style") {
            for u in scan_css(st.as_bytes()).0 {
                out.embeds.push(u);
            }
        }
        handle_tag(&name, &attrs, &mut out);
        // Raw-text elements: skip to their end tag.
        if matches!(
            name.as_str(),
            "script" | "style" | "textarea" | "title" | "xmp"
        ) {
            let close = format!("</{name}");
            let end = find_ci(html, i, close.as_bytes()).unwrap_or(n);
            let content = &html[i..end];
            if name == "style" {
                out.inline_style_bytes += content.len();
                out.embeds.extend(scan_css(content).0);
            } else if name == "script" && attr(&attrs, "src").is_none() {
                out.inline_script_bytes += content.len();
            }
            i = html[end..]
                .iter()
                .position(|&b| b == b'>')
                .map_or(n, |p| end + p + 1);
        }
    }
    out
}

fn handle_tag(name: &str, a: &[(String, String)], out: &mut HtmlScan) {
    let mut push = |url: &str, kind: Kind, w: Option<u32>, h: Option<u32>| {
        let url = url.trim();
        if url.is_empty() || url.starts_with('#') {
            return;
        }
        out.embeds.push(Embed {
            url: url.to_string(),
            kind,
            width: w,
            height: h,
        });
    };
    match name {
        "base" if out.base.is_none() => {
            out.base = attr(a, "href").map(str::to_string);
        }
        "img" => {
            let (w, h) = (dim(attr(a, "width")), dim(attr(a, "height")));
            if let Some(s) = attr(a, "src") {
                push(s, Kind::Image, w, h);
            } else if let Some(s) = attr(a, "srcset").and_then(srcset_pick) {
                push(&s, Kind::Image, w, h);
            }
            if let (Some(s), Some(p)) = (attr(a, "src"), attr(a, "srcset").and_then(srcset_pick)) {
                if p != s {
                    push(&p, Kind::Image, w, h);
                }
            }
        }
        "source" => {
            if let Some(s) = attr(a, "srcset").and_then(srcset_pick) {
                push(&s, Kind::Image, None, None);
            } else if let Some(s) = attr(a, "src") {
                push(s, Kind::Other, None, None);
            }
        }
        "video" => {
            if let Some(s) = attr(a, "poster") {
                push(s, Kind::Image, None, None);
            }
        }
        "input" if attr(a, "type").is_some_and(|t| t.eq_ignore_ascii_case("image")) => {
            if let Some(s) = attr(a, "src") {
                push(s, Kind::Image, None, None);
            }
        }
        "script" => {
            if let Some(s) = attr(a, "src") {
                push(s, Kind::Script, None, None);
            }
        }
        "iframe" | "frame" => {
            if let Some(s) = attr(a, "src") {
                if !s.starts_with("about:") && !s.starts_with("javascript:") {
                    push(s, Kind::Iframe, None, None);
                }
            }
        }
        "body" | "table" | "td" | "th" => {
            if let Some(s) = attr(a, "background") {
                push(s, Kind::Image, None, None);
            }
        }
        "link" => {
            let rel = attr(a, "rel").unwrap_or("").to_ascii_lowercase();
            let rels: Vec<&str> = rel.split_whitespace().collect();
            let Some(href) = attr(a, "href") else { return };
            if rels.contains(&"stylesheet") && !rels.contains(&"alternate") {
                push(href, Kind::Stylesheet, None, None);
            } else if rels
                .iter()
                .any(|r| *r == "icon" || r.starts_with("apple-touch-icon"))
            {
                push(href, Kind::Image, None, None);
            } else if rels.contains(&"modulepreload") {
                push(href, Kind::Script, None, None);
            } else if rels.contains(&"preload") {
                let kind = match attr(a, "as").unwrap_or("").to_ascii_lowercase().as_str() {
                    "style" => Kind::Stylesheet,
                    "script" => Kind::Script,
                    "image" => Kind::Image,
                    "font" => Kind::Font,
                    _ => Kind::Other,
                };
                push(href, kind, None, None);
            }
        }
        _ => {}
    }
}

/// Scans CSS: `url()` references and `@import`s. Returns (references,
/// `@import` count). Imports are [`Kind::Stylesheet`]; fonts by extension.
pub fn scan_css(css: &[u8]) -> (Vec<Embed>, usize) {
    let mut out = Vec::new();
    let mut imports = 0;
    let n = css.len();
    let mut i = 0;
    let mut pending_import = false;
    while i < n && out.len() < 10_000 {
        let b = css[i];
        if css[i..].starts_with(b"/*") {
            i = find_ci(css, i + 2, b"*/").map_or(n, |e| e + 2);
            continue;
        }
        if b == b'@' && css.len() >= i + 7 && css[i..i + 7].eq_ignore_ascii_case(b"@import") {
            pending_import = true;
            imports += 1;
            i += 7;
            continue;
        }
        if b == b';' || b == b'{' {
            pending_import = false;
        }
        if b == b'"' || b == b'\'' {
            let s = i + 1;
            let mut e = s;
            while e < n && css[e] != b && css[e] != b'\n' {
                if css[e] == b'\\' {
                    e += 1;
                }
                e += 1;
            }
            if pending_import {
                let u = String::from_utf8_lossy(&css[s..e.min(n)]).into_owned();
                push_css(&mut out, &u, true);
                pending_import = false;
            }
            i = e + 1;
            continue;
        }
        if (b == b'u' || b == b'U')
            && css.len() >= i + 4
            && css[i..i + 4].eq_ignore_ascii_case(b"url(")
        {
            let prev_ok = i == 0 || !(css[i - 1].is_ascii_alphanumeric() || css[i - 1] == b'-');
            if prev_ok {
                let mut s = i + 4;
                while s < n && css[s].is_ascii_whitespace() {
                    s += 1;
                }
                let (u, end) = if s < n && (css[s] == b'"' || css[s] == b'\'') {
                    let q = css[s];
                    let e = css[s + 1..]
                        .iter()
                        .position(|&c| c == q)
                        .map_or(n, |p| s + 1 + p);
                    (String::from_utf8_lossy(&css[s + 1..e]).into_owned(), e + 1)
                } else {
                    let e = css[s..]
                        .iter()
                        .position(|&c| c == b')')
                        .map_or(n, |p| s + p);
                    (String::from_utf8_lossy(&css[s..e]).trim().to_string(), e)
                };
                push_css(&mut out, &u, pending_import);
                pending_import = false;
                i = end.max(i + 4);
                continue;
            }
        }
        i += 1;
    }
    (out, imports)
}

fn push_css(out: &mut Vec<Embed>, u: &str, import: bool) {
    let u = u.trim();
    if u.is_empty() || u.starts_with("data:") || u.starts_with('#') {
        return;
    }
    let path = u
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let kind = if import {
        Kind::Stylesheet
    } else if [".woff2", ".woff", ".ttf", ".otf", ".eot"]
        .iter()
        .any(|e| path.ends_with(e))
    {
        Kind::Font
    } else if path.ends_with(".css") {
        Kind::Stylesheet
    } else {
        Kind::Image
    };
    out.push(Embed {
        url: u.to_string(),
        kind,
        width: None,
        height: None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(s: &HtmlScan) -> Vec<(String, Kind)> {
        s.embeds.iter().map(|e| (e.url.clone(), e.kind)).collect()
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
</body></html>"#;
        let s = scan_html(html);
        assert_eq!(s.base.as_deref(), Some("/b/"));
        let u = urls(&s);
        let want = [
            ("a.css?x=1&y=2", Kind::Stylesheet),
            ("/fav.ico", Kind::Image),
            ("f.woff2", Kind::Font),
            ("app.js", Kind::Script),
            ("bg.png", Kind::Image),
            ("more.css", Kind::Stylesheet),
            ("i.png", Kind::Image),
            ("s1.jpg", Kind::Image),
            ("p.webp", Kind::Image),
            ("p.jpg", Kind::Image),
            ("v.jpg", Kind::Image),
            ("frame.html", Kind::Iframe),
            ("div.gif", Kind::Image),
        ];
        let want: Vec<(String, Kind)> = want.iter().map(|(a, b)| (a.to_string(), *b)).collect();
        assert_eq!(u, want);
        let img = s.embeds.iter().find(|e| e.url == "i.png").unwrap();
        assert_eq!((img.width, img.height), (Some(100), Some(50)));
        assert!(s.inline_script_bytes > 10);
        assert!(s.inline_style_bytes > 10);
    }

    #[test]
    fn css_urls_and_imports() {
        let css = br#"/* url(no.png) */ @import url("a.css"); @import 'b.css' screen;
.x { background: URL( 'x.png' ) } .y{src:url(f.woff2) format("woff2"), url(data:abc)}
.z { content: "url(not.png)" }"#;
        let (e, imports) = scan_css(css);
        let got: Vec<(&str, Kind)> = e.iter().map(|e| (e.url.as_str(), e.kind)).collect();
        assert_eq!(
            got,
            vec![
                ("a.css", Kind::Stylesheet),
                ("b.css", Kind::Stylesheet),
                ("x.png", Kind::Image),
                ("f.woff2", Kind::Font),
            ]
        );
        assert_eq!(imports, 2);
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
        ] {
            let _ = scan_html(s);
            let _ = scan_css(s);
        }
        assert_eq!(decode_entities("a&#x41;&bogus;&amp;"), "aA&bogus;&");
    }
}
