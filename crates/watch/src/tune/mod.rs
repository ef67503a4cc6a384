//! Reading a server's configuration and saying what to tune, in the style of
//! MySQLTuner and apache2buddy: each finding with its file and line, why it
//! costs, and the change; `[OK]` for checks that pass.

pub mod apache;
pub mod lighttpd;
pub mod nginx;

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
        }
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
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if path.is_dir() {
        return Err(format!(
            "{} is a directory: give the main config file",
            path.display()
        ));
    }
    let text = String::from_utf8_lossy(&text).to_string();
    let server = opts.server.unwrap_or_else(|| guess_server(path, &text));
    let mut r = match server {
        Server::Apache => apache::analyze(path, opts),
        Server::Nginx => nginx::analyze(path, &text, opts),
        Server::Lighttpd => lighttpd::analyze(path, opts),
    };
    r.findings.sort_by_key(|f| std::cmp::Reverse(f.level));
    Ok(r)
}

fn section(o: &mut String, title: &str) {
    let _ = writeln!(
        o,
        "-------- {title} {}",
        "-".repeat(60usize.saturating_sub(title.len()))
    );
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
            if !f.why.is_empty() {
                let _ = writeln!(o, "       why: {}", f.why);
            }
            if !f.change.is_empty() {
                let _ = writeln!(o, "       change: {}", f.change);
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
            let loc = location(f);
            if loc.is_empty() {
                let _ = writeln!(o, "# {} (add)", f.code);
            } else {
                let _ = writeln!(o, "# {loc} ({})", f.code);
            }
            let _ = writeln!(o, "{}", f.change);
        }
    }
    o
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
