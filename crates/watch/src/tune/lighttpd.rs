//! lighttpd configuration: `key = value` / `key += value` assignments (values
//! may be arrays over several lines), `include "file"` with globs, Debian's
//! `include_shell ".../include-conf-enabled.pl"` (read as conf-enabled/*.conf;
//! its `use-ipv6.pl` and `create-mime.conf.pl` print nothing the checks use,
//! and any other `include_shell` is named as not run, never executed),
//! and `$HTTP[...] { }` conditionals (their settings are read too).

use super::{resolve, Finding, Level, Server, TuneOptions, TuneReport};
use crate::glob;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One assignment.
#[derive(Debug, Clone)]
pub struct Assign {
    /// Key, e.g. `server.modules`.
    pub key: String,
    /// `=` or `+=`.
    pub append: bool,
    /// The value as written (quotes kept).
    pub value: String,
    /// File.
    pub file: PathBuf,
    /// Line.
    pub line: usize,
}

#[derive(Default)]
struct Reader {
    assigns: Vec<Assign>,
    files: Vec<PathBuf>,
    errors: Vec<(PathBuf, usize, String)>,
    /// Things not checked (an `include_shell` that was not run).
    notes: Vec<(PathBuf, usize, String)>,
    base: PathBuf,
    depth: usize,
}

/// The first double-quoted string in `s` (lighttpd strings escape `\"`).
fn first_string(s: &str) -> Option<String> {
    let start = s.find('"')? + 1;
    let mut out = String::new();
    let mut esc = false;
    for c in s[start..].chars() {
        match (esc, c) {
            (true, c) => {
                out.push(c);
                esc = false;
            }
            (false, '\\') => esc = true,
            (false, '"') => return Some(out),
            (false, c) => out.push(c),
        }
    }
    None
}

fn unquote(s: &str) -> String {
    s.trim().trim_matches('"').to_string()
}

impl Reader {
    fn read(&mut self, p: &Path, from: Option<(&Path, usize)>) {
        self.depth += 1;
        if self.depth > 32 {
            self.depth -= 1;
            return;
        }
        match std::fs::read(p) {
            Ok(b) => {
                self.files.push(p.to_path_buf());
                self.parse(p, &String::from_utf8_lossy(&b));
            }
            Err(e) => {
                let (f, l) = from.map(|(f, l)| (f.to_path_buf(), l)).unwrap_or_default();
                self.errors
                    .push((f, l, format!("cannot read {}: {e}", p.display())));
            }
        }
        self.depth -= 1;
    }

    fn include(&mut self, pat: &str, file: &Path, line: usize) {
        let p = resolve(&self.base, pat);
        let found = if glob::has_wildcard(pat) {
            glob::expand(&p)
        } else {
            vec![p]
        };
        for f in found {
            self.read(&f, Some((file, line)));
        }
    }

    fn parse(&mut self, file: &Path, text: &str) {
        let mut pending: Option<(String, usize)> = None;
        let mut depth = 0i32;
        for (i, raw) in text.lines().enumerate() {
            let lineno = i + 1;
            let line = strip_comment(raw);
            let t = line.trim();
            if let Some((mut acc, start)) = pending.take() {
                acc.push(' ');
                acc.push_str(t);
                if balanced(&acc) {
                    self.statement(file, &acc, start);
                } else {
                    pending = Some((acc, start));
                }
                continue;
            }
            if t.is_empty() {
                continue;
            }
            if t == "}" || t.starts_with("} else") || t.starts_with("}else") {
                depth -= 1;
                if t.ends_with('{') {
                    depth += 1;
                }
                if depth < 0 {
                    self.errors
                        .push((file.to_path_buf(), lineno, "unexpected '}'".into()));
                    depth = 0;
                }
                continue;
            }
            if t.starts_with('$') || t.starts_with("else") {
                if t.ends_with('{') {
                    depth += 1;
                } else {
                    self.errors.push((
                        file.to_path_buf(),
                        lineno,
                        format!("condition {t:?} without '{{'"),
                    ));
                }
                continue;
            }
            if balanced(t) {
                self.statement(file, t, lineno);
            } else {
                pending = Some((t.to_string(), lineno));
            }
        }
        if let Some((acc, start)) = pending {
            self.errors.push((
                file.to_path_buf(),
                start,
                format!("unterminated value: {acc:?}"),
            ));
        }
        if depth > 0 {
            self.errors.push((
                file.to_path_buf(),
                text.lines().count(),
                "a conditional block is never closed".into(),
            ));
        }
    }

    fn statement(&mut self, file: &Path, t: &str, line: usize) {
        if let Some(rest) = t.strip_prefix("include_shell") {
            // The command is the first string; lighttpd may join more to it
            // (Debian: `"/usr/share/lighttpd/use-ipv6.pl " + server.port`).
            let cmd = first_string(rest).unwrap_or_else(|| rest.trim().to_string());
            let script = cmd.split_whitespace().next().unwrap_or("");
            let name = Path::new(script)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("");
            match name {
                "include-conf-enabled.pl" => self.include("conf-enabled/*.conf", file, line),
                // Debian's helpers that print only the IPv6 socket and the
                // MIME map: nothing the checks look at.
                "use-ipv6.pl" | "create-mime.conf.pl" | "create-mime.assign.pl" => {}
                _ => self.notes.push((
                    file.to_path_buf(),
                    line,
                    format!(
                        "include_shell {:?} was not run: the settings it prints are not checked",
                        cmd.trim()
                    ),
                )),
            }
            return;
        }
        if let Some(rest) = t
            .strip_prefix("include ")
            .or_else(|| t.strip_prefix("include\t"))
        {
            let pat = unquote(rest);
            self.include(&pat, file, line);
            return;
        }
        let (key, append, value) = if let Some((k, v)) = t.split_once("+=") {
            (k, true, v)
        } else if let Some((k, v)) = t.split_once(":=") {
            (k, false, v)
        } else if let Some((k, v)) = t.split_once('=') {
            (k, false, v)
        } else {
            self.errors
                .push((file.to_path_buf(), line, format!("cannot parse {t:?}")));
            return;
        };
        let key = key.trim().to_string();
        if key.is_empty() || key.contains(char::is_whitespace) {
            self.errors
                .push((file.to_path_buf(), line, format!("cannot parse {t:?}")));
            return;
        }
        self.assigns.push(Assign {
            key,
            append,
            value: value.trim().to_string(),
            file: file.to_path_buf(),
            line,
        });
    }
}

fn strip_comment(l: &str) -> String {
    let mut out = String::new();
    let mut q = false;
    for c in l.chars() {
        if c == '"' {
            q = !q;
        }
        if c == '#' && !q {
            break;
        }
        out.push(c);
    }
    out
}

fn balanced(s: &str) -> bool {
    let mut d = 0i32;
    let mut q = false;
    for c in s.chars() {
        match c {
            '"' => q = !q,
            '(' if !q => d += 1,
            ')' if !q => d -= 1,
            _ => {}
        }
    }
    d <= 0 && !q
}

fn at(a: &Assign) -> (&Path, usize) {
    (a.file.as_path(), a.line)
}

/// Reads and checks a lighttpd configuration.
pub fn analyze(path: &Path, opts: &TuneOptions) -> TuneReport {
    let _ = opts;
    let mut r = Reader {
        base: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        ..Default::default()
    };
    r.read(path, None);
    let mut modules = BTreeSet::new();
    for a in r.assigns.iter().filter(|a| a.key == "server.modules") {
        if !a.append {
            modules.clear();
        }
        for m in a.value.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if m.starts_with("mod_") {
                modules.insert(m.to_string());
            }
        }
    }
    let last = |k: &str| r.assigns.iter().rev().find(|a| a.key == k);
    let num = |a: &Assign| unquote(&a.value).parse::<i64>().ok();
    let mut f = Vec::new();
    for (file, line, msg) in &r.errors {
        f.push(
            Finding::new(Level::Warn, "parse_error", (file, *line), msg.clone())
                .why("lighttpd would refuse this, or read something other than intended; the rest was still checked"),
        );
    }
    for (file, line, msg) in &r.notes {
        f.push(
            Finding::new(
                Level::Info,
                "include_shell_not_run",
                (file, *line),
                msg.clone(),
            )
            .why(
                "redline does not run commands from a configuration; check what it prints by hand",
            ),
        );
    }
    let none = (Path::new(""), 0usize);
    let main = (path, 0usize);
    match last("server.max-keep-alive-requests") {
        Some(a) if num(a) == Some(0) => f.push(
            Finding::new(
                Level::Warn,
                "keepalive_off",
                at(a),
                "server.max-keep-alive-requests = 0 (keep-alive off)".into(),
            )
            .why("a new TCP connection (and TLS handshake) for every resource of a page")
            .change("server.max-keep-alive-requests = 1000"),
        ),
        _ => f.push(Finding::new(
            Level::Ok,
            "keepalive_off",
            none,
            "keep-alive on".into(),
        )),
    }
    match last("server.max-keep-alive-idle") {
        Some(a) if num(a).is_some_and(|v| v > 15) => f.push(
            Finding::new(
                Level::Warn,
                "keepalive_timeout_high",
                at(a),
                format!("server.max-keep-alive-idle = {}", a.value),
            )
            .why("idle connections are kept long after a visitor has gone")
            .change("server.max-keep-alive-idle = 5"),
        ),
        _ => f.push(Finding::new(
            Level::Ok,
            "keepalive_timeout_high",
            none,
            "keep-alive idle time at most 15 s".into(),
        )),
    }
    match last("server.network-backend") {
        Some(a) if matches!(unquote(&a.value).as_str(), "write" | "writev") => f.push(
            Finding::new(
                Level::Warn,
                "sendfile_off",
                at(a),
                format!("server.network-backend = {}", a.value),
            )
            .why("static files are copied through user space instead of sent by the kernel")
            .change("server.network-backend = \"sendfile\""),
        ),
        _ => f.push(Finding::new(
            Level::Ok,
            "sendfile_off",
            none,
            "sendfile network backend (default)".into(),
        )),
    }
    match last("server.stat-cache-engine") {
        Some(a) if unquote(&a.value) == "disable" => f.push(
            Finding::new(
                Level::Warn,
                "stat_cache_off",
                at(a),
                "server.stat-cache-engine = \"disable\"".into(),
            )
            .why("a stat() of the file on every request")
            .change("server.stat-cache-engine = \"simple\""),
        ),
        _ => {}
    }
    if let Some(a) = last("server.max-worker") {
        if num(a).is_some_and(|v| v > 0) {
            f.push(
                Finding::new(Level::Info, "max_worker", at(a), format!("server.max-worker = {}", a.value))
                    .why("several lighttpd processes: more memory, and per-process caches and limits split")
                    .change("server.max-worker = 0"),
            );
        }
    }
    if modules.contains("mod_deflate") || modules.contains("mod_compress") {
        f.push(Finding::new(
            Level::Ok,
            "no_compression",
            none,
            "mod_deflate loaded".into(),
        ));
    } else {
        f.push(
            Finding::new(Level::Warn, "no_compression", main, "mod_deflate is not in server.modules".into())
                .why("HTML, CSS and JavaScript go out uncompressed: 3 to 5 times the bytes")
                .change("server.modules += ( \"mod_deflate\" )\ndeflate.mimetypes = ( \"text/\", \"application/javascript\", \"image/svg+xml\" )"),
        );
    }
    if !modules.contains("mod_expire") {
        f.push(
            Finding::new(Level::Info, "no_expires", main, "mod_expire is not in server.modules".into())
                .why("browsers revalidate every image and stylesheet on each page view")
                .change("server.modules += ( \"mod_expire\" )\nexpire.url = ( \"/static/\" => \"access plus 7 days\" )"),
        );
    } else {
        f.push(Finding::new(
            Level::Ok,
            "no_expires",
            none,
            "mod_expire loaded".into(),
        ));
    }
    TuneReport {
        server: Server::Lighttpd,
        config: path.display().to_string(),
        files: r.files.iter().map(|p| p.display().to_string()).collect(),
        modules: modules.into_iter().collect(),
        mpm: None,
        threads_per_child: None,
        tools: vec![],
        findings: f,
    }
}
