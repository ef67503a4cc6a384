//! Reading a server's configuration and saying what to tune, in the style of
//! MySQLTuner and apache2buddy: each finding with its file and line, why it
//! costs, and the change; `[OK]` for checks that pass.

pub mod apache;
pub mod lighttpd;
pub mod nginx;
pub mod servertest;

use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Which server a configuration is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Server {
    /// Apache httpd.
    Apache,
    /// nginx.
    Nginx,
    /// lighttpd.
    Lighttpd,
}

impl std::str::FromStr for Server {
    type Err = String;
    fn from_str(s: &str) -> Result<Server, String> {
        match s.to_ascii_lowercase().as_str() {
            "apache" | "apache2" | "httpd" => Ok(Server::Apache),
            "nginx" => Ok(Server::Nginx),
            "lighttpd" => Ok(Server::Lighttpd),
            _ => Err(format!("unknown server {s:?}: apache, nginx or lighttpd")),
        }
    }
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The check passed.
    Ok,
    /// Worth knowing; may be right for this site.
    Info,
    /// Costs speed or memory: change it.
    Warn,
}

impl Level {
    /// The marker: `[OK]`, `[--]`, `[!!]`.
    pub fn marker(self) -> &'static str {
        match self {
            Level::Ok => "[OK]",
            Level::Info => "[--]",
            Level::Warn => "[!!]",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Severity.
    pub level: Level,
    /// Stable code, e.g. `hostname_lookups`.
    pub code: String,
    /// The file it is in ("" when about something missing).
    pub file: String,
    /// The line (0 when about something missing).
    pub line: usize,
    /// What was found.
    pub message: String,
    /// Why it costs.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// The line to paste instead.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub change: String,
    /// The block or section the finding is in (`http > server (server_name a)`,
    /// `<VirtualHost *:80> www.example.com`, `$HTTP["host"] == "a"`); "" when server-wide.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub context: String,
    /// Where the change goes: the file, the block, and the line to replace or put it after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

/// How a fix is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FixAction {
    /// Replace `old` (found on lines `line..=end_line`) with the text.
    Replace,
    /// Put the text on new lines after line `line` (0: at the top of the file).
    InsertAfter,
}

/// Where a change goes, exactly enough to paste it: the server's config test
/// accepts the file with the text put there (tests check this with `nginx -t`,
/// `apache2 -t`, `lighttpd -tt`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fix {
    /// The file to edit.
    pub file: String,
    /// The block the text goes in ("server-wide" at the top level).
    pub context: String,
    /// Replace or insert.
    pub action: FixAction,
    /// Replace: the first line of `old`; insert: the line to put the text after.
    pub line: usize,
    /// Replace: the last line of `old`; insert: the same as `line`.
    pub end_line: usize,
    /// Replace: the text replaced, exactly as in the file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub old: String,
    /// The text to paste.
    pub text: String,
}

impl Fix {
    /// Replaces `old` (on lines `line..=end_line` of `file`) with `text`.
    pub fn replace(
        file: &Path,
        context: &str,
        lines: (usize, usize),
        old: &str,
        text: &str,
    ) -> Fix {
        Fix {
            file: file.display().to_string(),
            context: context.into(),
            action: FixAction::Replace,
            line: lines.0,
            end_line: lines.1,
            old: old.into(),
            text: text.into(),
        }
    }

    /// Puts `text` after line `line` of `file`, inside `context`.
    pub fn insert_after(file: &Path, context: &str, line: usize, text: &str) -> Fix {
        Fix {
            file: file.display().to_string(),
            context: context.into(),
            action: FixAction::InsertAfter,
            line,
            end_line: line,
            old: String::new(),
            text: text.into(),
        }
    }

    /// Applies the fix to a file's text; None when `old` is not where the fix says.
    pub fn apply(&self, text: &str) -> Option<String> {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        match self.action {
            FixAction::InsertAfter => {
                if self.line > lines.len() {
                    return None;
                }
                let mut out: String = lines[..self.line].concat();
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&self.text);
                out.push('\n');
                out.push_str(&lines[self.line..].concat());
                Some(out)
            }
            FixAction::Replace => {
                if self.line == 0 || self.end_line > lines.len() || self.line > self.end_line {
                    return None;
                }
                let region = lines[self.line - 1..self.end_line].concat();
                let i = region.find(&self.old)?;
                let mut out: String = lines[..self.line - 1].concat();
                out.push_str(&region[..i]);
                out.push_str(&self.text);
                out.push_str(&region[i + self.old.len()..]);
                out.push_str(&lines[self.end_line..].concat());
                Some(out)
            }
        }
    }
}

impl Finding {
    /// A finding.
    pub fn new(level: Level, code: &str, at: (&Path, usize), message: String) -> Finding {
        Finding {
            level,
            code: code.into(),
            file: if at.0.as_os_str().is_empty() {
                String::new()
            } else {
                at.0.display().to_string()
            },
            line: at.1,
            message,
            why: String::new(),
            change: String::new(),
            context: String::new(),
            fix: None,
        }
    }

    /// In this block or section.
    pub fn context(mut self, s: impl Into<String>) -> Finding {
        self.context = s.into();
        self
    }

    /// With the change and where it goes (the change's text is the fix's).
    pub fn fix(mut self, fix: Fix) -> Finding {
        self.change = fix.text.clone();
        if self.context.is_empty() {
            self.context = fix.context.clone();
        }
        self.fix = Some(fix);
        self
    }

    /// With the reason.
    pub fn why(mut self, s: &str) -> Finding {
        self.why = s.into();
        self
    }

    /// With the change.
    pub fn change(mut self, s: impl Into<String>) -> Finding {
        self.change = s.into();
        self
    }
}

/// What `analyze` is given besides the file.
#[derive(Debug, Clone, Default)]
pub struct TuneOptions {
    /// The server (guessed from the file when None).
    pub server: Option<Server>,
    /// Run apache2ctl / nginx to confirm files and modules (only for the system's own config).
    pub use_tools: bool,
    /// Memory the server may use, KiB.
    pub budget_kib: Option<u64>,
    /// Measured private memory of one worker process, KiB.
    pub worker_private_kib: Option<u64>,
    /// Run the server's own config test first when it is installed (`nginx
    /// -t`, `apache2 -t`, `lighttpd -t`), safely ([`servertest`]); its
    /// errors come before tune's findings.
    pub server_test: bool,
    /// Read the file as an Apache `.htaccess` (also when it is named `.htaccess`).
    pub htaccess: bool,
    /// Modules compiled into httpd (`apache2 -l`: `core.c`, `prefork.c`, ...);
    /// None: asked from `apache2 -l` / `httpd -l` when `use_tools`, else the usual built-ins.
    pub static_modules: Option<Vec<String>>,
}

/// The largest configuration file read (16 MiB): a wrong path to a big file is
/// refused instead of read into memory.
pub const MAX_CONFIG_BYTES: u64 = redline_stats::files::Kind::Config.limit();

/// Reads one configuration file as text: only a regular file (a directory, a
/// FIFO or a device is refused without blocking on it), at most
/// [`MAX_CONFIG_BYTES`], and not binary (a NUL byte). Err is one line that
/// names the file.
pub fn read_config(p: &Path) -> Result<String, String> {
    let b = redline_stats::files::read(p, redline_stats::files::Kind::Config, "")?;
    if b.contains(&0) {
        return Err(format!(
            "{} is a binary file (it has NUL bytes), not a configuration",
            p.display()
        ));
    }
    Ok(String::from_utf8_lossy(&b).into_owned())
}

/// The result of reading a configuration.
#[derive(Debug, Clone, Serialize)]
pub struct TuneReport {
    /// Which server.
    pub server: Server,
    /// The main file.
    pub config: String,
    /// Every file read, in order.
    pub files: Vec<String>,
    /// Modules loaded (Apache module ids, lighttpd module names).
    pub modules: Vec<String>,
    /// Apache's MPM, when a LoadModule names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpm: Option<String>,
    /// ThreadsPerChild (Apache worker/event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads_per_child: Option<u64>,
    /// What the installed tools said (confirmations or differences).
    pub tools: Vec<String>,
    /// Findings, including passed checks (level `ok`).
    pub findings: Vec<Finding>,
}

/// Guesses the server from the file name and contents.
pub fn guess_server(path: &Path, text: &str) -> Server {
    let name = path.to_string_lossy().to_ascii_lowercase();
    if path.file_name().is_some_and(|n| n == ".htaccess") {
        return Server::Apache;
    }
    if name.contains("nginx") || text.contains("# configuration file ") && text.contains("nginx") {
        return Server::Nginx;
    }
    if name.contains("lighttpd")
        || text.contains("server.document-root")
        || text.contains("server.modules")
    {
        return Server::Lighttpd;
    }
    if name.contains("apache") || name.contains("httpd") {
        return Server::Apache;
    }
    let l = text.to_ascii_lowercase();
    if l.contains("http {") || l.contains("worker_processes") || l.contains("server {") {
        Server::Nginx
    } else {
        Server::Apache
    }
}

/// Reads a configuration and checks it; Err when the main file cannot be read.
pub fn analyze(path: &Path, opts: &TuneOptions) -> Result<TuneReport, String> {
    let text = read_config(path)?;
    let server = match opts.server {
        Some(s) => s,
        None if opts.htaccess => Server::Apache,
        None => guess_server(path, &text),
    };
    if opts.htaccess && server != Server::Apache {
        return Err("--htaccess is for Apache configurations".into());
    }
    let mut r = match server {
        Server::Apache => apache::analyze(path, opts),
        Server::Nginx => nginx::analyze(path, &text, opts),
        Server::Lighttpd => lighttpd::analyze(path, opts),
    };
    if opts.server_test && !opts.htaccess {
        match servertest::run(server, path, &text) {
            (Some(t), _) => {
                let verdict = if t.accepted {
                    "accepts the configuration"
                } else {
                    "REFUSES the configuration: its errors come first"
                };
                r.tools.insert(0, format!("{}: {verdict}", t.command));
                // The server's own words replace tune's parse error at the same place.
                let said: Vec<(String, usize)> = t
                    .findings
                    .iter()
                    .filter(|f| f.level == Level::Warn)
                    .map(|f| (f.file.clone(), f.line))
                    .collect();
                r.findings.retain(|f| {
                    !matches!(f.code.as_str(), "parse_error" | "config_error")
                        || !said
                            .iter()
                            .any(|(file, line)| *line == f.line && same_file(file, &f.file))
                });
                let mut v = t.findings;
                v.append(&mut r.findings);
                r.findings = v;
            }
            (None, Some(why)) => r.tools.insert(0, why),
            (None, None) => {}
        }
    }
    // No [OK] about a directive on a line the server refuses.
    let refused: Vec<String> = r
        .findings
        .iter()
        .filter(|f| {
            f.level == Level::Warn && matches!(f.code.as_str(), "config_error" | "config_test")
        })
        .flat_map(|f| directives_at(&f.file, f.line))
        .collect();
    if !refused.is_empty() {
        r.findings.retain(|f| {
            f.level != Level::Ok || {
                let first = f
                    .message
                    .split_whitespace()
                    .next()
                    .map(squash)
                    .unwrap_or_default();
                !refused.iter().any(|d| {
                    !first.is_empty() && (d.starts_with(&first) || first.starts_with(d.as_str()))
                })
            }
        });
    }
    // Stable: the server's own errors stay first among the warnings.
    r.findings.sort_by_key(|f| std::cmp::Reverse(f.level));
    Ok(r)
}

/// A name without case, `-` or `_` (`keep-alive` and `KeepAlive` alike).
fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The directives on line `line` of `file` and on the line before (nginx
/// names a statement by the line of its `;`), squashed; comments and
/// section lines left out.
fn directives_at(file: &str, line: usize) -> Vec<String> {
    let Ok(text) = read_config(Path::new(file)) else {
        return Vec::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    [line, line.saturating_sub(1)]
        .iter()
        .filter(|&&n| n > 0)
        .filter_map(|&n| lines.get(n - 1))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| !w.starts_with('#') && !w.starts_with('<') && !w.starts_with('}') && *w != "{")
        .map(squash)
        .filter(|w| w.len() > 2)
        .collect()
}

/// Two names of one file (one may be relative to the working folder).
fn same_file(a: &str, b: &str) -> bool {
    a == b || {
        let c = |p: &str| std::fs::canonicalize(p).ok();
        c(a).is_some() && c(a) == c(b)
    }
}

fn section(o: &mut String, title: &str) {
    let _ = writeln!(
        o,
        "-------- {title} {}",
        "-".repeat(60usize.saturating_sub(title.len()))
    );
}

/// Applies every fix of a report to its files, each distinct fix once and the
/// last line first in each file, so that no fix moves the lines another one
/// names; a file a fix creates is written with its folders. Ok: how many were
/// applied; Err names the first fix whose text is not where it says.
pub fn apply_all(r: &TuneReport) -> Result<usize, String> {
    let mut by_file: std::collections::BTreeMap<&str, Vec<&Fix>> = Default::default();
    for f in r.findings.iter().filter(|f| f.level != Level::Ok) {
        if let Some(x) = &f.fix {
            let v = by_file.entry(x.file.as_str()).or_default();
            if !v.contains(&x) {
                v.push(x);
            }
        }
    }
    let mut n = 0;
    for (file, mut fixes) in by_file {
        fixes.sort_by_key(|x| std::cmp::Reverse((x.line, x.end_line)));
        let mut text = std::fs::read_to_string(file).unwrap_or_default();
        for x in fixes {
            text = x.apply(&text).ok_or_else(|| {
                format!("{file}:{}: the fix does not apply: {:?}", x.line, x.text)
            })?;
            n += 1;
        }
        if let Some(d) = Path::new(file).parent() {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        std::fs::write(file, text).map_err(|e| format!("{file}: {e}"))?;
    }
    Ok(n)
}

/// `file:line` of a finding, or "".
pub fn location(f: &Finding) -> String {
    if f.file.is_empty() {
        String::new()
    } else if f.line == 0 {
        f.file.clone()
    } else {
        format!("{}:{}", f.file, f.line)
    }
}

/// The text report.
pub fn render_text(r: &TuneReport) -> String {
    let mut o = String::new();
    let name = match r.server {
        Server::Apache => "Apache httpd",
        Server::Nginx => "nginx",
        Server::Lighttpd => "lighttpd",
    };
    let _ = writeln!(o, " >>  redline tune: {name} configuration {}", r.config);
    section(&mut o, "Files and modules");
    let _ = writeln!(o, "[--] {} files read", r.files.len());
    if let Some(m) = &r.mpm {
        let _ = writeln!(o, "[--] MPM: {m}");
    }
    if !r.modules.is_empty() {
        let _ = writeln!(
            o,
            "[--] {} modules loaded: {}",
            r.modules.len(),
            r.modules.join(" ")
        );
    }
    for t in &r.tools {
        let _ = writeln!(o, "[--] {t}");
    }
    section(&mut o, "Findings");
    for f in &r.findings {
        let loc = location(f);
        if loc.is_empty() {
            let _ = writeln!(o, "{} {}", f.level.marker(), f.message);
        } else {
            let _ = writeln!(o, "{} {loc}: {}", f.level.marker(), f.message);
        }
        if f.level != Level::Ok {
            if !f.context.is_empty() {
                let _ = writeln!(o, "       in: {}", f.context);
            }
            if !f.why.is_empty() {
                let _ = writeln!(o, "       why: {}", f.why);
            }
            if !f.change.is_empty() {
                let _ = writeln!(
                    o,
                    "       change: {}",
                    f.change.replace('\n', "\n               ")
                );
            }
            if let Some(x) = &f.fix {
                let _ = writeln!(o, "       where: {}", placement(x));
            }
        }
    }
    let to_change: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.level != Level::Ok && !f.change.is_empty())
        .collect();
    let warn = r.findings.iter().filter(|f| f.level == Level::Warn).count();
    let info = r.findings.iter().filter(|f| f.level == Level::Info).count();
    let ok = r.findings.iter().filter(|f| f.level == Level::Ok).count();
    section(&mut o, "Summary");
    let _ = writeln!(
        o,
        "{warn} to fix [!!], {info} to consider [--], {ok} fine [OK]"
    );
    if !to_change.is_empty() {
        section(&mut o, "Directives to change");
        for f in to_change {
            match &f.fix {
                Some(x) => {
                    let _ = writeln!(o, "# ({}) {}", f.code, placement(x));
                }
                None => {
                    let loc = location(f);
                    if loc.is_empty() {
                        let _ = writeln!(o, "# {} (add)", f.code);
                    } else {
                        let _ = writeln!(o, "# {loc} ({})", f.code);
                    }
                }
            }
            let _ = writeln!(o, "{}", f.change);
        }
    }
    o
}

/// Where a fix goes, in words: `FILE, in CONTEXT: replace line N \`old\``.
pub fn placement(x: &Fix) -> String {
    let ctx = if x.context.is_empty() {
        "server-wide (top level)".to_string()
    } else {
        format!("in {}", x.context)
    };
    match x.action {
        FixAction::Replace => {
            let lines = if x.end_line > x.line {
                format!("lines {}-{}", x.line, x.end_line)
            } else {
                format!("line {}", x.line)
            };
            let old: String = x.old.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("{}, {ctx}: replace `{old}` on {lines}", x.file)
        }
        FixAction::InsertAfter if x.line == 0 => {
            format!("{}, {ctx}: at the top of the file", x.file)
        }
        FixAction::InsertAfter => format!("{}, {ctx}: after line {}", x.file, x.line),
    }
}

/// A path relative to a base directory unless absolute.
pub fn resolve(base: &Path, p: &str) -> PathBuf {
    let pb = PathBuf::from(p);
    if pb.is_absolute() {
        pb
    } else {
        base.join(pb)
    }
}

/// Splits a directive's arguments: whitespace-separated, "double" or 'single' quoted.
pub fn split_args(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut has = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (Some(_), c) => cur.push(c),
            (None, '"') | (None, '\'') => {
                quote = Some(c);
                has = true;
            }
            (None, c) if c.is_whitespace() => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixes_apply_where_they_say() {
        let text = "a 1;\nb {\n  c 2; d 3;\n}\n";
        let p = Path::new("x.conf");
        let ins = Fix::insert_after(p, "b", 2, "e 4;");
        assert_eq!(
            ins.apply(text).unwrap(),
            "a 1;\nb {\ne 4;\n  c 2; d 3;\n}\n"
        );
        let top = Fix::insert_after(p, "", 0, "z;");
        assert_eq!(top.apply(text).unwrap(), "z;\na 1;\nb {\n  c 2; d 3;\n}\n");
        let end = Fix::insert_after(p, "", 4, "y;");
        assert_eq!(end.apply("a;\nb {\n}\nc;").unwrap(), "a;\nb {\n}\nc;\ny;\n");
        // Only `d 3;` is replaced, not the rest of its line.
        let rep = Fix::replace(p, "b", (3, 3), "d 3;", "d 4;");
        assert_eq!(rep.apply(text).unwrap(), "a 1;\nb {\n  c 2; d 4;\n}\n");
        // A statement over two lines.
        let rep = Fix::replace(p, "", (1, 2), "a 1;\nb", "a 2;\nb");
        assert!(rep.apply(text).unwrap().starts_with("a 2;\nb {"));
        // Not where it says: None.
        assert!(Fix::replace(p, "", (1, 1), "c 2;", "c 3;")
            .apply(text)
            .is_none());
        assert!(Fix::insert_after(p, "", 9, "q").apply(text).is_none());
        assert!(placement(&rep).contains("replace `a 1; b` on lines 1-2"));
        assert!(placement(&ins).contains("in b: after line 2"));
    }
}
