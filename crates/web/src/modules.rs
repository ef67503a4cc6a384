//! ES module graphs: the static `import … from "x"`, `import "x"` and
//! `export … from "x"` specifiers of a module script, and the dynamic
//! `import("x")` calls (reported, not followed: whether they run depends on
//! the script). A small scanner that skips comments, strings and template
//! literals; specifiers that are bare names resolve through the page's
//! import map only.

/// The specifiers a module names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Imports {
    /// Static imports and re-exports, in order.
    pub static_: Vec<String>,
    /// `import("…")` with a string literal, in order.
    pub dynamic: Vec<String>,
}

fn ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// Skips whitespace and comments from `i`.
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if b[i..].starts_with(b"//") {
            i = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
        } else if b[i..].starts_with(b"/*") {
            i = find(b, i + 2, b"*/").map_or(b.len(), |p| p + 2);
        } else {
            return i;
        }
    }
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    (from..b.len().saturating_sub(needle.len() - 1)).find(|&i| b[i..].starts_with(needle))
}

/// Reads a string literal at `i`: (value, index past it).
fn string_at(b: &[u8], i: usize) -> Option<(String, usize)> {
    let q = *b.get(i)?;
    if q != b'"' && q != b'\'' {
        return None;
    }
    let mut j = i + 1;
    while j < b.len() && b[j] != q && b[j] != b'\n' {
        if b[j] == b'\\' {
            j += 1;
        }
        j += 1;
    }
    (j < b.len() && b[j] == q).then(|| (String::from_utf8_lossy(&b[i + 1..j]).into_owned(), j + 1))
}

/// Skips a string, template literal or comment starting at `i`, if any.
fn skip_literal(b: &[u8], i: usize) -> Option<usize> {
    match b[i] {
        b'"' | b'\'' => {
            let q = b[i];
            let mut j = i + 1;
            while j < b.len() && b[j] != q && b[j] != b'\n' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            Some(j + 1)
        }
        b'`' => {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'`' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            Some(j + 1)
        }
        b'/' if b.get(i + 1) == Some(&b'/') || b.get(i + 1) == Some(&b'*') => Some(skip_ws(b, i)),
        _ => None,
    }
}

/// Finds `from "x"` after an import/export clause starting at `i`, within
/// the statement (up to `;` or a bounded distance).
fn from_clause(b: &[u8], mut i: usize) -> Option<(String, usize)> {
    let limit = (i + 4096).min(b.len());
    while i < limit {
        if let Some(j) = skip_literal(b, i) {
            if b[i] == b'"' || b[i] == b'\'' || b[i] == b'`' {
                // A string before `from`: not an import clause we know.
                return None;
            }
            i = j;
            continue;
        }
        if b[i] == b';' {
            return None;
        }
        if b[i..].starts_with(b"from")
            && (i == 0 || !ident(b[i - 1]))
            && !b.get(i + 4).is_some_and(|&c| ident(c))
        {
            let j = skip_ws(b, i + 4);
            return string_at(b, j);
        }
        i += 1;
    }
    None
}

/// Scans a module's source.
pub fn scan(src: &[u8]) -> Imports {
    let b = src;
    let mut out = Imports::default();
    let mut i = 0;
    while i < b.len() && out.static_.len() + out.dynamic.len() < 1000 {
        if let Some(j) = skip_literal(b, i) {
            i = j.max(i + 1);
            continue;
        }
        let at_word = i == 0 || !(ident(b[i - 1]) || b[i - 1] == b'.');
        if at_word && b[i..].starts_with(b"import") && !b.get(i + 6).is_some_and(|&c| ident(c)) {
            let j = skip_ws(b, i + 6);
            match b.get(j) {
                Some(b'(') => {
                    let k = skip_ws(b, j + 1);
                    if let Some((s, _)) = string_at(b, k) {
                        out.dynamic.push(s);
                    }
                    i = j + 1;
                }
                Some(b'.') => i = j + 1,
                Some(b'"' | b'\'') => {
                    if let Some((s, e)) = string_at(b, j) {
                        out.static_.push(s);
                        i = e;
                    } else {
                        i = j + 1;
                    }
                }
                Some(_) => match from_clause(b, j) {
                    Some((s, e)) => {
                        out.static_.push(s);
                        i = e;
                    }
                    None => i = j,
                },
                None => break,
            }
            continue;
        }
        if at_word && b[i..].starts_with(b"export") && !b.get(i + 6).is_some_and(|&c| ident(c)) {
            let j = skip_ws(b, i + 6);
            if matches!(b.get(j), Some(b'*' | b'{')) {
                if let Some((s, e)) = from_clause(b, j) {
                    out.static_.push(s);
                    i = e;
                    continue;
                }
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// An import map's `imports` (exact keys and `/`-ending prefixes).
#[derive(Clone, Debug, Default)]
pub struct ImportMap {
    entries: Vec<(String, String)>,
}

impl ImportMap {
    /// Parses `<script type=importmap>` JSON; bad JSON: an empty map.
    pub fn parse(json: &[u8]) -> ImportMap {
        let v: serde_json::Value = serde_json::from_slice(json).unwrap_or_default();
        let mut entries = Vec::new();
        if let Some(m) = v.get("imports").and_then(|m| m.as_object()) {
            for (k, v) in m.iter().take(1000) {
                if let Some(v) = v.as_str() {
                    entries.push((k.clone(), v.to_string()));
                }
            }
        }
        // Longest key first: the most specific prefix wins.
        entries.sort_by_key(|e| std::cmp::Reverse(e.0.len()));
        ImportMap { entries }
    }

    /// Adds another map's entries (a page may have several).
    pub fn extend(&mut self, other: ImportMap) {
        self.entries.extend(other.entries);
        self.entries.sort_by_key(|e| std::cmp::Reverse(e.0.len()));
    }

    /// The address a specifier maps to, as written in the map (resolved
    /// against the page by the caller); None: not mapped.
    pub fn map(&self, spec: &str) -> Option<String> {
        for (k, v) in &self.entries {
            if k == spec {
                return Some(v.clone());
            }
            if k.ends_with('/') && v.ends_with('/') {
                if let Some(rest) = spec.strip_prefix(k.as_str()) {
                    return Some(format!("{v}{rest}"));
                }
            }
        }
        None
    }
}

/// A specifier a browser resolves without an import map: a URL or a path
/// starting `/`, `./` or `../`.
pub fn is_relative_or_url(spec: &str) -> bool {
    spec.starts_with('/')
        || spec.starts_with("./")
        || spec.starts_with("../")
        || url::Url::parse(spec).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_static_and_dynamic() {
        let js = br#"
import a from "./a.js";
import * as b from './b.js'
import { c, d as e } from "./c.js";
import "./side.js";
export * from "./re.js";
export { x } from './rx.js';
export const notFrom = "from './no.js'";
// import nope from "./comment.js";
/* import "./block.js"; */
const s = "import './string.js'";
const t = `import './tpl.js' ${1}`;
import.meta.url;
const lazy = () => import("./lazy.js");
obj.import("./method.js");
import def, { y } from "../up.js";
"#;
        let s = scan(js);
        assert_eq!(
            s.static_,
            [
                "./a.js",
                "./b.js",
                "./c.js",
                "./side.js",
                "./re.js",
                "./rx.js",
                "../up.js"
            ]
        );
        assert_eq!(s.dynamic, ["./lazy.js"]);
    }

    #[test]
    fn import_maps() {
        let m =
            ImportMap::parse(br#"{"imports": {"lib": "/vendor/lib.js", "lib/": "/vendor/lib/"}}"#);
        assert_eq!(m.map("lib").as_deref(), Some("/vendor/lib.js"));
        assert_eq!(m.map("lib/x.js").as_deref(), Some("/vendor/lib/x.js"));
        assert_eq!(m.map("other"), None);
        assert!(is_relative_or_url("./x.js"));
        assert!(!is_relative_or_url("lodash"));
        assert!(ImportMap::parse(b"not json").map("x").is_none());
    }

    #[test]
    fn garbage_does_not_panic() {
        for s in [
            "import",
            "import(",
            "export {",
            "'",
            "`",
            "/*",
            "import x from",
            "import '",
        ] {
            let _ = scan(s.as_bytes());
        }
    }
}
