//! What minifying would save, in bytes on the wire: conservative minifiers
//! for HTML and JavaScript (comments and needless whitespace out, strings
//! kept), Lighthouse's token rule for CSS (comments and all whitespace
//! outside strings out), and the size of a body after the content coding the server
//! applied (gzip, br, deflate), so that a saving is the difference of the
//! two versions compressed the same way. (Lighthouse applies the saving's
//! share of the decoded text to the transfer size: the same bytes for an
//! uncompressed body, more than the wire saves for a compressed one.)

use std::io::Write as _;

/// gzip level used to size gzip bodies: zlib's default, Apache
/// mod_deflate's `DeflateCompressionLevel` default.
const GZIP_LEVEL: u32 = 6;
/// Brotli quality used to size br bodies: Apache mod_brotli's
/// `BrotliCompressionQuality` default (5), window 2^18 (its default too).
const BROTLI_QUALITY: u32 = 5;
const BROTLI_LGWIN: u32 = 18;

/// Size of `b` gzip-compressed (level 6).
pub(crate) fn gzip_size(b: &[u8]) -> u64 {
    gzip_size_at(b, GZIP_LEVEL)
}

fn gzip_size_at(b: &[u8], level: u32) -> u64 {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    let _ = e.write_all(b);
    e.finish().map(|v| v.len() as u64).unwrap_or(b.len() as u64)
}

fn deflate_size_at(b: &[u8], level: u32) -> u64 {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
    let _ = e.write_all(b);
    e.finish().map(|v| v.len() as u64).unwrap_or(b.len() as u64)
}

fn brotli_size(b: &[u8]) -> u64 {
    let mut out = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut out, 4096, BROTLI_QUALITY, BROTLI_LGWIN);
        let _ = w.write_all(b);
        let _ = w.flush();
    }
    out.len() as u64
}

/// The content codings this can reproduce.
#[derive(Clone, Copy)]
enum Coding {
    Identity,
    Gzip,
    Deflate,
    Br,
}

fn coding(c: Option<&str>) -> Option<Coding> {
    match c.map(|c| c.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("identity") => Some(Coding::Identity),
        Some("gzip") | Some("x-gzip") => Some(Coding::Gzip),
        Some("br") => Some(Coding::Br),
        Some("deflate") => Some(Coding::Deflate),
        Some(_) => None,
    }
}

fn size_at(body: &[u8], c: Coding, level: u32) -> u64 {
    match c {
        Coding::Identity => body.len() as u64,
        Coding::Gzip => gzip_size_at(body, level),
        Coding::Deflate => deflate_size_at(body, level),
        Coding::Br => brotli_size(body),
    }
}

/// Bytes `body` takes on the wire when sent with `coding` (the response's
/// `Content-Encoding`; none or `identity`: as is; gzip and deflate at level
/// 6, br at quality 5). None for a coding this cannot reproduce (zstd, …):
/// the caller then scales by the response's own wire/decoded ratio.
pub fn wire_size(body: &[u8], coding: Option<&str>) -> Option<u64> {
    self::coding(coding).map(|c| size_at(body, c, GZIP_LEVEL))
}

/// The gzip or deflate level (1-9) at which `body` comes nearest the
/// `wire` bytes the server sent for it (nginx's default is level 1,
/// Apache's 6: 6,539 B against 5,634 B for the same 51 KB stylesheet), so
/// that both versions are compressed as the server compresses; level 6
/// when the body kept is not the whole of what was sent.
fn server_level(body: &[u8], c: Coding, wire: u64, decoded: u64) -> u32 {
    if !matches!(c, Coding::Gzip | Coding::Deflate) || wire == 0 || body.len() as u64 != decoded {
        return GZIP_LEVEL;
    }
    // Sizes do not always shrink as the level rises (small bodies): every
    // level is tried; above 1 MiB only nginx's default, zlib's and the best.
    let levels: &[u32] = if body.len() > 1 << 20 {
        &[1, 6, 9]
    } else {
        &[1, 2, 3, 4, 5, 6, 7, 8, 9]
    };
    levels
        .iter()
        .copied()
        .min_by_key(|&l| size_at(body, c, l).abs_diff(wire))
        .unwrap_or(GZIP_LEVEL)
}

/// (bytes saved on the wire by sending `small` instead of `body`, `body`'s
/// size on the wire), both compressed with the response's content coding
/// at the level the server used; `wire`/`decoded` are the response's own
/// body sizes, used to find that level and to scale when the coding cannot
/// be reproduced.
pub(crate) fn wire_saving(
    body: &[u8],
    small: &[u8],
    coding: Option<&str>,
    wire: u64,
    decoded: u64,
) -> (u64, u64) {
    match self::coding(coding) {
        Some(c) => {
            let level = server_level(body, c, wire, decoded);
            let of = size_at(body, c, level);
            (of.saturating_sub(size_at(small, c, level)), of)
        }
        None => {
            let raw = (body.len() - small.len().min(body.len())) as f64;
            ((raw * wire as f64 / decoded.max(1) as f64) as u64, wire)
        }
    }
}

/// HTML without comments and with whitespace runs collapsed to one byte
/// (outside `<pre>`, `<textarea>`, `<script>`, `<style>`): what minifying
/// HTML would give, roughly (conditional comments are kept).
pub fn minified_html(html: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(html.len());
    let mut i = 0;
    let mut ws = false;
    let mut raw: Option<&'static [u8]> = None;
    while i < html.len() {
        if let Some(end) = raw {
            if html[i..].len() >= end.len() && html[i..i + end.len()].eq_ignore_ascii_case(end) {
                raw = None;
            } else {
                out.push(html[i]);
                i += 1;
                continue;
            }
        }
        if html[i..].starts_with(b"<!--") && !html[i..].starts_with(b"<!--[if") {
            match html[i + 4..].windows(3).position(|w| w == b"-->") {
                Some(p) => i += 4 + p + 3,
                None => i = html.len(),
            }
            continue;
        }
        for (open, close) in [
            (&b"<pre"[..], &b"</pre"[..]),
            (b"<textarea", b"</textarea"),
            (b"<script", b"</script"),
            (b"<style", b"</style"),
        ] {
            if html[i..].len() >= open.len() && html[i..i + open.len()].eq_ignore_ascii_case(open) {
                raw = Some(close);
            }
        }
        let b = html[i];
        if b.is_ascii_whitespace() {
            if !ws {
                out.push(b);
            }
            ws = true;
        } else {
            ws = false;
            out.push(b);
        }
        i += 1;
    }
    out
}

/// Length of [`minified_html`].
pub fn minified_html_len(html: &[u8]) -> usize {
    minified_html(html).len()
}

/// CSS or JS without comments and needless whitespace: CSS by
/// [`minified_css`] (Lighthouse's rule), JS by a conservative minifier
/// (strings kept, whitespace runs become one space or none).
pub fn minified_code(src: &[u8], css: bool) -> Vec<u8> {
    if css {
        minified_css(src)
    } else {
        minified_js(src)
    }
}

/// Where [`minified_css`] is inside a backtick string: a `${` opened a
/// template brace, a `{` inside it a normal one.
#[derive(Clone, Copy, PartialEq)]
enum Brace {
    Template,
    Normal,
}

/// The bytes of a stylesheet that Lighthouse 12.8 counts as tokens
/// (`computeCSSTokenLength` in `core/lib/minification-estimator.js`, used by
/// `unminified-css`): every byte outside comments except space, `\n` and
/// `\t` (a `\r` counts, as there); a comment counts only as a license
/// comment (`/*! … */`); a string (`"`, `'` or `` ` ``) counts whole, its
/// whitespace and escapes included. Whitespace between value tokens
/// (`margin: 0 auto`) is dropped too, so the result is an estimate of the
/// size, not a usable stylesheet: the saving is the same as Lighthouse's
/// within the byte or two a real minifier keeps. An unclosed comment or
/// string makes Lighthouse count the whole text (no saving): so here.
pub fn minified_css(src: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(src.len());
    let (mut in_comment, mut license, mut in_string) = (false, false, false);
    let mut open = 0u8;
    let mut braces: Vec<Brace> = Vec::new();
    let mut i = 0;
    while i < src.len() {
        let b = src[i];
        let next = src.get(i + 1).copied();
        if in_comment {
            if license {
                out.push(b);
            }
            if b == b'*' && next == Some(b'/') {
                if license {
                    out.push(b'/');
                }
                in_comment = false;
                i += 1;
            }
        } else if in_string {
            out.push(b);
            if open == b'`' && b == b'$' && next == Some(b'{') {
                braces.push(Brace::Template);
                in_string = false;
                out.push(b'{');
                i += 1;
            } else if b == b'\\' {
                out.extend(next);
                i += 1;
            } else if b == open {
                in_string = false;
            }
        } else if b == b'/' && next == Some(b'*') {
            in_comment = true;
            license = src.get(i + 2) == Some(&b'!');
            if license {
                out.extend_from_slice(b"/*");
            }
            i += 1;
        } else if b == b'{' && !braces.is_empty() {
            braces.push(Brace::Normal);
            out.push(b);
        } else if b == b'}' && !braces.is_empty() {
            if braces.pop() == Some(Brace::Template) {
                in_string = true;
                open = b'`';
            }
            out.push(b);
        } else if matches!(b, b'"' | b'\'' | b'`') {
            in_string = true;
            open = b;
            out.push(b);
        } else if !matches!(b, b' ' | b'\n' | b'\t') {
            out.push(b);
        }
        i += 1;
    }
    if in_comment || in_string {
        return src.to_vec();
    }
    out
}

/// JavaScript without comments and needless whitespace (strings kept,
/// whitespace runs become one space or none).
fn minified_js(src: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(src.len());
    let mut i = 0;
    let mut pending_ws = false;
    let mut last: u8 = b';';
    let punct = |b: u8| b"{}();,:>+~=<[]!&|?*".contains(&b);
    while i < src.len() {
        let b = src[i];
        if src[i..].starts_with(b"/*") {
            i = src[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(src.len(), |p| i + 2 + p + 2);
            pending_ws = true;
            continue;
        }
        if src[i..].starts_with(b"//")
            && (i == 0
                || src[i - 1] == b'\n'
                || src[i - 1] == b' '
                || src[i - 1] == b'\t'
                || src[i - 1] == b';')
        {
            i = src[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(src.len(), |p| i + p);
            pending_ws = true;
            continue;
        }
        if b == b'"' || b == b'\'' || b == b'`' {
            if pending_ws && !punct(last) {
                out.push(b' ');
            }
            pending_ws = false;
            let mut j = i + 1;
            while j < src.len() && src[j] != b {
                if src[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            let end = (j + 1).min(src.len());
            out.extend_from_slice(&src[i..end]);
            last = b;
            i = end;
            continue;
        }
        if b.is_ascii_whitespace() {
            pending_ws = true;
            i += 1;
            continue;
        }
        if pending_ws && !punct(last) && !punct(b) {
            out.push(b' ');
        }
        pending_ws = false;
        out.push(b);
        last = b;
        i += 1;
    }
    out
}

/// Length of [`minified_code`].
pub fn minified_code_len(src: &[u8], css: bool) -> usize {
    minified_code(src, css).len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_savings_are_smaller_than_decoded_savings_under_compression() {
        // Repetitive whitespace compresses well: the decoded saving is large,
        // the gzip or br saving much smaller (the issue's 42 KiB vs 6 KiB).
        let src = "body {\n        color : red ;\n        margin : 0 ;\n}\n".repeat(800);
        let min = minified_code(src.as_bytes(), true);
        let raw = (src.len() - min.len()) as u64;
        for coding in ["gzip", "br"] {
            let (wire, of) = wire_saving(src.as_bytes(), &min, Some(coding), 0, 1);
            assert!(wire < raw / 4, "{coding}: {wire} of {raw}");
            let a = wire_size(src.as_bytes(), Some(coding)).unwrap();
            let b = wire_size(&min, Some(coding)).unwrap();
            assert_eq!((wire, of), (a - b, a));
        }
        assert_eq!(wire_saving(src.as_bytes(), &min, None, 0, 1).0, raw);
        // An unknown coding scales by the response's own ratio.
        assert_eq!(
            wire_saving(src.as_bytes(), &min, Some("zstd"), 100, 1000),
            (raw / 10, 100)
        );
    }

    /// Lighthouse's token length (`computeCSSTokenLength`), the saving and
    /// the saving's share for one CSS fixture: `want` is the token text.
    fn css_case(src: &str, want: &str) {
        let got = minified_css(src.as_bytes());
        assert_eq!(String::from_utf8_lossy(&got), want, "from {src:?}");
    }

    #[test]
    fn css_comments_out_license_comments_kept() {
        css_case(
            "/* theme: dark */\na { color: red } /* end */\n",
            "a{color:red}",
        );
        // `/*!` keeps the comment whole, inner whitespace included.
        css_case(
            "/*! MIT licence */\na {\n  b: c;\n}\n",
            "/*! MIT licence */a{b:c;}",
        );
        // `/*/` does not close a comment; `*/` inside a string is text.
        css_case("/*/ x */a{}", "a{}");
        css_case("a{content:\"*/ x\"}", "a{content:\"*/ x\"}");
    }

    #[test]
    fn css_strings_keep_their_spaces_and_escapes() {
        css_case(
            "q::before { content: \"  two  spaces \\\" \" ; font-family: 'Open Sans', serif }",
            "q::before{content:\"  two  spaces \\\" \";font-family:'Open Sans',serif}",
        );
        // An unclosed string or comment: Lighthouse counts the whole text.
        for bad in ["a { content: \"open }\n", "a { b: c } /* open\n"] {
            assert_eq!(minified_css(bad.as_bytes()), bad.as_bytes());
        }
    }

    #[test]
    fn css_media_queries_lose_all_whitespace() {
        // As Lighthouse counts: `and (` loses its spaces too (a real
        // minifier keeps `and (`): an estimate, not a usable stylesheet.
        css_case(
            "@media screen and (max-width: 600px) {\n  .nav { display: none; }\n}\n",
            "@mediascreenand(max-width:600px){.nav{display:none;}}",
        );
    }

    #[test]
    fn css_urls_quoted_and_bare() {
        css_case(
            ".a { background: url( \"img/a b.png\" ) no-repeat; }\n.b { background: url(img/b.png) }",
            ".a{background:url(\"img/a b.png\")no-repeat;}.b{background:url(img/b.png)}",
        );
    }

    #[test]
    fn css_important_and_custom_properties() {
        css_case(
            ":root {\n  --gap: 4px;\n  --font: \"Fira Code\", monospace;\n}\np { margin: var(--gap) !important; }\n",
            ":root{--gap:4px;--font:\"Fira Code\",monospace;}p{margin:var(--gap)!important;}",
        );
    }

    #[test]
    fn css_carriage_returns_count_as_lighthouse_counts_them() {
        // Lighthouse's whitespace is space, `\n` and `\t` only.
        css_case("a {\r\n\tb: c;\r\n}\r\n", "a{\rb:c;\r}\r");
    }

    #[test]
    fn css_saving_is_lighthouse_share_of_an_uncompressed_body() {
        // pygments.css-like rules: one rule a line, a comment each.
        let src: String = (0..120)
            .map(|i| {
                format!(
                    ".highlight .k{i} {{ color: #{:06x}; font-weight: bold }} /* Keyword */\n",
                    i * 4099
                )
            })
            .collect();
        let min = minified_css(src.as_bytes());
        let tokens =
            src.chars().filter(|c| !matches!(c, ' ' | '\n')).count() - 120 * "/*Keyword*/".len();
        assert_eq!(min.len(), tokens);
        let (save, of) = wire_saving(src.as_bytes(), &min, None, 0, 1);
        assert_eq!(
            (save as usize, of as usize),
            (src.len() - tokens, src.len())
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_never_grow() {
        // xorshift: a fixed stream of inputs rich in the minifiers' special bytes.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let alphabet = b"/*\"'`\\<>!-[] \n\tapre";
        for len in 0..400usize {
            let mut v = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v.push(alphabet[(x % alphabet.len() as u64) as usize]);
            }
            assert!(minified_html(&v).len() <= v.len());
            assert!(minified_code(&v, true).len() <= v.len());
            assert!(minified_code(&v, false).len() <= v.len());
        }
    }

    #[test]
    fn gzip_is_sized_at_the_level_the_server_used() {
        // A stylesheet sent gzip'd at level 1 (nginx's default) and at 9:
        // the saving is the difference at the same level.
        let src: String = (0..300)
            .map(|i| {
                format!(
                    ".c{i} {{\n    margin: {}px {}px;\n    color: #{:06x};\n}}\n",
                    i % 13,
                    i % 7,
                    i * 7919
                )
            })
            .collect();
        let min = minified_css(src.as_bytes());
        let n = src.len() as u64;
        for level in [1, 9] {
            let sent = gzip_size_at(src.as_bytes(), level);
            let want = sent - gzip_size_at(&min, level);
            assert_eq!(
                wire_saving(src.as_bytes(), &min, Some("gzip"), sent, n),
                (want, sent),
                "level {level}"
            );
        }
        assert_ne!(
            gzip_size_at(src.as_bytes(), 1),
            gzip_size_at(src.as_bytes(), 9)
        );
        // A truncated body: level 6.
        let six = gzip_size_at(src.as_bytes(), 6);
        assert_eq!(
            wire_saving(src.as_bytes(), &min, Some("gzip"), 10, n + 1).1,
            six
        );
    }

    #[test]
    fn brotli_output_decodes() {
        let src = b"hello hello hello hello".repeat(100);
        let mut out = Vec::new();
        {
            let mut w = brotli::CompressorWriter::new(&mut out, 4096, BROTLI_QUALITY, BROTLI_LGWIN);
            w.write_all(&src).unwrap();
        }
        let d = crate::http::decode("br", &out, 1 << 20);
        assert_eq!((d.kept, d.error), (src, None));
    }
}
