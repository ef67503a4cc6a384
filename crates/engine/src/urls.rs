//! `--urls FILE`: a list of targets, vegeta's "http" targets format (also a
//! bare URL per line, as oha's URL file), turned into a scenario so the
//! engine runs it unchanged: one request per target, chosen round-robin or at
//! random, each with its own line in the per-request report.
//!
//! ```text
//! # a comment
//! GET http://host:8080/a?x=1
//! X-Account-ID: 8675309
//!
//! POST http://host:8080/things
//! Content-Type: application/json
//! @body.json
//!
//! http://host:8080/plain        (a bare URL: GET)
//! /relative/path                (needs the URL on the command line as its base)
//! ```
//!
//! A target starts at a request line (`METHOD URL` or a bare URL); `Name:
//! value` lines after it are its headers, `@FILE` its body (read from the
//! list's folder, as a scenario's `body_file`), a blank line ends it.

use crate::scenario::file::{RequestEntry, ScenarioFile};
use std::collections::BTreeMap;

/// The most targets in a list (a scenario's request limit).
pub const MAX_TARGETS: usize = 10_000;

/// How targets are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// In the list's order, again and again.
    #[default]
    RoundRobin,
    /// At random (uniform; `--seed` repeats the choice).
    Random,
}

impl std::str::FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Order, String> {
        match s {
            "round-robin" | "rr" => Ok(Order::RoundRobin),
            "random" => Ok(Order::Random),
            _ => Err(format!(
                "unknown order '{}' (expected round-robin or random)",
                crate::gen::shown(s)
            )),
        }
    }
}

/// One target of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlTarget {
    /// Its request line's number (1-based).
    pub line: usize,
    /// Method (upper case).
    pub method: String,
    /// An absolute URL, or a path on the base URL.
    pub url: String,
    /// Its headers.
    pub headers: Vec<(String, String)>,
    /// `@FILE`: its body file.
    pub body_file: Option<String>,
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b))
}

fn is_method(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-')
}

fn url_like(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    l.starts_with("http://") || l.starts_with("https://") || s.starts_with('/')
}

/// The request line of a target, if `line` is one.
fn request_line(line: &str) -> Option<(String, String)> {
    if url_like(line) && !line.contains(char::is_whitespace) {
        return Some(("GET".into(), line.to_string()));
    }
    let (m, rest) = line.split_once(char::is_whitespace)?;
    let rest = rest.trim();
    (is_method(m) && url_like(rest)).then(|| (m.to_ascii_uppercase(), rest.to_string()))
}

/// Parses a target list; errors are `line N: what`, with the line's text
/// escaped and cut short.
pub fn parse(text: &str) -> Result<Vec<UrlTarget>, String> {
    let mut out: Vec<UrlTarget> = Vec::new();
    // The target that headers and a body still go to.
    let mut open = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            open = false;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let bad = |what: &str| format!("line {n}: {what}: '{}'", crate::gen::shown(line));
        if line.chars().any(|c| c.is_control() && c != '\t') {
            return Err(bad("control characters"));
        }
        if let Some((method, url)) = request_line(line) {
            if url.contains(char::is_whitespace) {
                return Err(bad("a URL has no spaces (percent-encode them)"));
            }
            if out.len() == MAX_TARGETS {
                return Err(format!("line {n}: more than {MAX_TARGETS} targets"));
            }
            out.push(UrlTarget {
                line: n,
                method,
                url,
                headers: Vec::new(),
                body_file: None,
            });
            open = true;
            continue;
        }
        if !open {
            return Err(bad(
                "expected a target ('METHOD URL' or a URL starting with http://, https:// or /)",
            ));
        }
        let t = out.last_mut().expect("an open target");
        if let Some(f) = line.strip_prefix('@') {
            if f.trim().is_empty() {
                return Err(bad("'@' needs a body file name"));
            }
            if t.body_file.is_some() {
                return Err(bad("a target has one body"));
            }
            t.body_file = Some(f.trim().to_string());
            continue;
        }
        if t.body_file.is_some() {
            return Err(bad("headers come before the @body line"));
        }
        match line.split_once(':') {
            Some((k, v)) if is_token(k.trim_end()) && k == k.trim_end() => {
                if t.headers.len() >= 100 {
                    return Err(bad("more than 100 headers"));
                }
                t.headers.push((k.to_string(), v.trim().to_string()));
            }
            _ => return Err(bad("expected 'Name: value', '@FILE' or a blank line")),
        }
    }
    if out.is_empty() {
        return Err("no targets (one 'METHOD URL' or URL per line)".into());
    }
    Ok(out)
}

/// A scenario with one request per target. Requests are named `METHOD URL`
/// (password redacted); a target listed again gets ` (line N)`.
pub fn to_scenario(targets: &[UrlTarget], order: Order) -> ScenarioFile {
    let mut names = std::collections::HashSet::new();
    let request = targets
        .iter()
        .map(|t| {
            let mut name = format!("{} {}", t.method, crate::plan::redact_raw_url(&t.url));
            if !names.insert(name.clone()) {
                name = format!("{name} (line {})", t.line);
            }
            let (url, path) = if t.url.starts_with('/') {
                (None, Some(t.url.clone()))
            } else {
                (Some(t.url.clone()), None)
            };
            let mut headers = BTreeMap::new();
            for (k, v) in &t.headers {
                headers.insert(k.clone(), v.clone());
            }
            RequestEntry {
                name: Some(name),
                method: Some(t.method.clone()),
                url,
                path,
                headers,
                body_file: t.body_file.clone(),
                ..RequestEntry::default()
            }
        })
        .collect();
    ScenarioFile {
        mode: Some(
            match order {
                Order::RoundRobin => "round-robin",
                Order::Random => "weighted",
            }
            .into(),
        ),
        cookies: Some(false),
        request,
        ..ScenarioFile::default()
    }
}

/// The URL a run without one on the command line is aimed at: the first
/// absolute target's (its origin is the scenario's base).
pub fn first_absolute(targets: &[UrlTarget]) -> Option<String> {
    targets
        .iter()
        .find(|t| !t.url.starts_with('/'))
        .map(|t| t.url.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vegeta_targets_and_bare_urls_parse() {
        let text = "# comment\nGET http://h:1/a?x=1\nX-Account-ID: 8675309\n\npost http://h:1/things\nContent-Type: application/json\n@body.json\n\nhttp://h:1/plain\n/rel\nHEAD /rel2\n";
        let t = parse(text).unwrap();
        assert_eq!(t.len(), 5);
        assert_eq!(t[0].method, "GET");
        assert_eq!(
            t[0].headers,
            vec![("X-Account-ID".to_string(), "8675309".to_string())]
        );
        assert_eq!(t[1].method, "POST");
        assert_eq!(t[1].body_file.as_deref(), Some("body.json"));
        assert_eq!((t[2].method.as_str(), t[2].line), ("GET", 9));
        assert_eq!(t[3].url, "/rel");
        assert_eq!(t[4].method, "HEAD");
        let f = to_scenario(&t, Order::Random);
        assert_eq!(f.mode.as_deref(), Some("weighted"));
        assert_eq!(f.request[3].path.as_deref(), Some("/rel"));
        assert_eq!(f.request[0].url.as_deref(), Some("http://h:1/a?x=1"));
    }

    #[test]
    fn bad_lines_name_their_line_and_print_no_control_characters() {
        for (text, want) in [
            ("", "no targets"),
            ("Foo: bar\n", "line 1: expected a target"),
            (
                "GET http://h/\nnot a header\n",
                "line 2: expected 'Name: value'",
            ),
            ("GET http://h/\n@\n", "line 2: '@' needs"),
            ("GET http://h/\n@a\n@b\n", "line 3: a target has one body"),
            ("GET http://h/\n@a\nX: y\n", "line 3: headers come before"),
            ("GET http://h/\nX: \x1b[31m\n", "line 2:"),
            ("\x1b[2J\n", "line 1:"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(want), "{e:?}");
            assert!(!e.chars().any(char::is_control), "{e:?}");
        }
    }

    #[test]
    fn a_target_listed_twice_keeps_a_distinct_name_and_passwords_are_hidden() {
        let t = parse("http://u:secret@h/a\nhttp://u:secret@h/a\n").unwrap();
        let f = to_scenario(&t, Order::RoundRobin);
        let names: Vec<_> = f.request.iter().map(|r| r.name.clone().unwrap()).collect();
        assert_eq!(names[1], format!("{} (line 2)", names[0]));
        assert!(names.iter().all(|n| !n.contains("secret")), "{names:?}");
    }
}
