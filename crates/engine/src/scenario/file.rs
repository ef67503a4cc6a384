//! The scenario file as written: TOML, read with serde. Every unknown key is an
//! error (a typo must not silently change the load), and every error names the
//! file and line.

use serde::Deserialize;
use std::collections::BTreeMap;

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// A name for reports.
    pub name: Option<String>,
    /// The default host for requests given by `path` (overridden by a URL on the command line).
    pub base: Option<String>,
    /// Named hosts, for requests with `host = "name"`.
    #[serde(default)]
    pub hosts: BTreeMap<String, String>,
    /// `round-robin` (default), `weighted` or `session`.
    pub mode: Option<String>,
    /// Default think time after each request (`"1s"`, `"0.5s..2s"`, `"exp:1s"`).
    pub think: Option<String>,
    /// Keep a cookie jar per virtual user (default: on in session mode).
    pub cookies: Option<bool>,
    /// Default per-request timeout.
    pub timeout: Option<String>,
    /// Headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Thresholds on the whole run (added to `--threshold`).
    #[serde(default)]
    pub thresholds: Vec<String>,
    /// Default load, used where the command line gives none.
    pub load: Option<LoadSection>,
    /// Data rows fed to the virtual users.
    pub data: Option<DataSection>,
    /// The requests (steps, in session mode).
    #[serde(default, alias = "step")]
    pub request: Vec<RequestEntry>,
}

/// `[load]`: defaults for the load flags.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LoadSection {
    /// `-c`
    pub connections: Option<u64>,
    /// `-n`
    pub requests: Option<u64>,
    /// `-d`
    pub duration: Option<String>,
    /// `-r`
    pub rate: Option<f64>,
}

/// `[data]`: a CSV file whose first line names the columns.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSection {
    /// The CSV file, relative to the scenario file.
    pub file: String,
    /// `user` (one row per virtual user, default) or `iteration` (the next row for each pass).
    pub per: Option<String>,
}

/// One `[[request]]` (or `[[step]]`).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RequestEntry {
    /// Name in the per-request report (default: method and path).
    pub name: Option<String>,
    /// Method (default GET, or POST with a body).
    pub method: Option<String>,
    /// Path and query on the request's host.
    pub path: Option<String>,
    /// A full URL instead of `host` + `path`.
    pub url: Option<String>,
    /// A name from `[hosts]`.
    pub host: Option<String>,
    /// Extra headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// An inline body.
    pub body: Option<String>,
    /// A body read from a file (relative to the scenario file).
    pub body_file: Option<String>,
    /// Form fields, sent as `application/x-www-form-urlencoded`.
    pub form: Option<BTreeMap<String, String>>,
    /// Content-Type of the body.
    pub content_type: Option<String>,
    /// Per-request timeout.
    pub timeout: Option<String>,
    /// Weight in `weighted` mode (default 1).
    pub weight: Option<u32>,
    /// Think time after this request.
    pub think: Option<String>,
    /// Values taken from the response for later requests.
    #[serde(default)]
    pub extract: Vec<ExtractEntry>,
    /// Checks on the response.
    pub check: Option<CheckEntry>,
    /// Thresholds on this request's own numbers.
    #[serde(default)]
    pub thresholds: Vec<String>,
}

/// One extractor: exactly one of `header`, `cookie`, `regex`, `json`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractEntry {
    /// The variable it sets (`{{name}}`).
    pub name: String,
    /// A response header.
    pub header: Option<String>,
    /// A cookie set by the response.
    pub cookie: Option<String>,
    /// A regex on the body: the first capture group (or the whole match).
    pub regex: Option<String>,
    /// A JSON pointer (RFC 6901) into a JSON body, e.g. `/data/token`.
    pub json: Option<String>,
}

/// Checks on a response; each failure is counted, none stops the run.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CheckEntry {
    /// Expected status code(s).
    pub status: Option<StatusSpec>,
    /// Headers that must be present.
    #[serde(default)]
    pub header: Vec<String>,
    /// Headers that must have a value (case-insensitive name, exact value).
    #[serde(default)]
    pub header_equals: BTreeMap<String, String>,
    /// Text the body must contain.
    pub body_contains: Option<String>,
    /// A regex the body must match.
    pub body_regex: Option<String>,
    /// The latency (from the intended send time) must be under this.
    pub latency_under: Option<String>,
}

/// One status or several.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum StatusSpec {
    /// One code.
    One(u16),
    /// Any of these.
    Many(Vec<u16>),
}

impl StatusSpec {
    /// The codes.
    pub fn codes(&self) -> Vec<u16> {
        match self {
            StatusSpec::One(c) => vec![*c],
            StatusSpec::Many(v) => v.clone(),
        }
    }
}

/// Parses the text of a scenario file; errors carry `file:line:col`.
pub fn parse(text: &str, file: &str) -> Result<ScenarioFile, String> {
    toml::from_str::<ScenarioFile>(text).map_err(|e| {
        let msg = e.message().trim().to_string();
        match e.span() {
            Some(span) => {
                let (line, col) = line_col(text, span.start);
                format!("{file}:{line}:{col}: {msg}")
            }
            None => format!("{file}: {msg}"),
        }
    })
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |p| before.len() - p - 1)
        + 1;
    (line, col)
}

/// The line of the `n`-th (0-based) `[[request]]`/`[[step]]` header, for errors found after parsing.
pub fn request_line(text: &str, n: usize) -> Option<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim_start();
            t.starts_with("[[request]]") || t.starts_with("[[step]]")
        })
        .nth(n)
        .map(|(i, _)| i + 1)
}

/// One step of a key path in a scenario file: a key of a table or an element of an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// A key.
    Key(String),
    /// An element (0-based).
    Idx(usize),
}

/// `Seg::Key`.
pub fn key(k: &str) -> Seg {
    Seg::Key(k.to_string())
}

/// Finds the line of a key or value in a scenario file, for errors found
/// after parsing (a bad `timeout` is reported at its own line, not at the
/// `[[request]]` header above it).
pub struct Lines<'a> {
    text: &'a str,
    doc: Option<toml::Spanned<toml::de::DeTable<'a>>>,
}

impl<'a> Lines<'a> {
    /// Parses the text once more, keeping the spans.
    pub fn new(text: &'a str) -> Lines<'a> {
        Lines {
            text,
            doc: toml::de::DeTable::parse(text).ok(),
        }
    }

    /// The 1-based line of the deepest part of `path` that the file has: the
    /// key itself when present, else its table or array element. A leading
    /// `request` also finds `step` (its alias).
    pub fn line(&self, path: &[Seg]) -> Option<usize> {
        let doc = self.doc.as_ref()?;
        let mut best: Option<usize> = None;
        let mut table: Option<&toml::de::DeTable<'a>> = Some(doc.get_ref());
        let mut array: Option<&toml::de::DeArray<'a>> = None;
        for (i, seg) in path.iter().enumerate() {
            let next = match seg {
                Seg::Key(k) => table.and_then(|t| {
                    t.iter()
                        .find(|(name, _)| {
                            let n: &str = name.get_ref();
                            n == k || (i == 0 && k == "request" && n == "step")
                        })
                        .map(|(name, v)| (name.span().start, v))
                }),
                Seg::Idx(n) => array.and_then(|a| a.get(*n).map(|v| (v.span().start, v))),
            };
            let Some((start, v)) = next else { break };
            best = Some(start);
            table = None;
            array = None;
            match v.get_ref() {
                toml::de::DeValue::Table(t) => table = Some(t),
                toml::de::DeValue::Array(a) => array = Some(a),
                _ => {}
            }
        }
        best.map(|b| line_col(self.text, b).0)
    }

    /// `file:line` for a path, or just `file` when the line is unknown.
    pub fn at(&self, file: &str, path: &[Seg]) -> String {
        match self.line(path) {
            Some(l) => format!("{file}:{l}"),
            None => file.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_types_name_the_line() {
        let e = parse(
            "base = \"http://x\"\n[[request]]\npath = \"/\"\nwieght = 2\n",
            "s.toml",
        )
        .unwrap_err();
        assert!(e.starts_with("s.toml:4:"), "{e}");
        assert!(e.contains("wieght"), "{e}");
        let e = parse("[[request]]\nweight = \"x\"\n", "s.toml").unwrap_err();
        assert!(e.starts_with("s.toml:2:"), "{e}");
    }

    #[test]
    fn line_col_inside_a_multibyte_char() {
        // Found by the fuzzer: an offset inside 'é' must not panic.
        assert_eq!(line_col("a\né", 3), (2, 1));
    }

    #[test]
    fn steps_alias_and_status_forms() {
        let f = parse(
            "mode = \"session\"\n[[step]]\npath = \"/a\"\ncheck = { status = [200, 302] }\n[[step]]\npath = \"/b\"\ncheck = { status = 200 }\n",
            "s",
        )
        .unwrap();
        assert_eq!(f.request.len(), 2);
        assert_eq!(
            f.request[0]
                .check
                .as_ref()
                .unwrap()
                .status
                .as_ref()
                .unwrap()
                .codes(),
            vec![200, 302]
        );
        assert_eq!(request_line("[[step]]\na=1\n [[step]]\n", 1), Some(3));
    }

    #[test]
    fn lines_find_keys_values_and_elements() {
        let text = "mode = \"x\"\nthresholds = [\n  \"a\",\n  \"b\",\n]\n[hosts]\napi = \"h\"\n\n[[request]]\npath = \"/\"\n\n[[request]]\nname = \"n\"\n\ntimeout = \"x\"\ncheck = { status = 200,\n  body_regex = \"(\" }\nextract = [\n  { name = \"a\", json = \"/a\" },\n  { name = \"b\", regex = \"(\" },\n]\n";
        let l = Lines::new(text);
        let r = |n: usize, rest: &[Seg]| {
            let mut p = vec![key("request"), Seg::Idx(n)];
            p.extend_from_slice(rest);
            l.line(&p)
        };
        assert_eq!(l.line(&[key("mode")]), Some(1));
        assert_eq!(l.line(&[key("thresholds"), Seg::Idx(1)]), Some(4));
        assert_eq!(l.line(&[key("hosts"), key("api")]), Some(7));
        assert_eq!(r(1, &[key("timeout")]), Some(15));
        assert_eq!(r(1, &[key("check"), key("body_regex")]), Some(17));
        assert_eq!(r(1, &[key("extract"), Seg::Idx(1), key("regex")]), Some(20));
        // A key the request lacks: the request's own header line.
        assert_eq!(r(0, &[key("timeout")]), Some(9));
        assert_eq!(r(1, &[key("weight")]), Some(12));
        // `[[step]]` is found as `request`.
        let l = Lines::new("[[step]]\npath = \"/\"\n[[step]]\n\nthink = \"z\"\n");
        assert_eq!(
            l.line(&[key("request"), Seg::Idx(1), key("think")]),
            Some(5)
        );
        assert_eq!(l.at("f", &[key("nothing")]), "f");
    }
}
