//! lighttpd configuration, read with lighttpd's grammar (its configuration
//! docs and 1.4.69's `configparser.y`): `key = value`, `key += value`, `key
//! := value`, one per line (`;` is not a separator); values are strings,
//! integers, arrays `( ... )` over any number of lines (`"k" => "b"` pairs
//! too), variables (`var.name`, a bare name without a dot, which lighttpd
//! stores as `var.name`, an earlier setting's key, `env.NAME` from the
//! environment) looked up from the current conditional outwards, and their
//! `+` concatenation; `=` once per context, `:=` replaces, `+=` adds to the
//! value in effect; `include EXPR` with globs (relative to the main file's
//! directory, also from an included file; a plain path must exist, a glob
//! may match nothing); Debian's `include_shell ".../include-conf-enabled.pl"`
//! (read as conf-enabled/*.conf; its `use-ipv6.pl` and `create-mime.conf.pl`
//! print nothing the checks use, and any other `include_shell` is named as
//! not run, never executed, and the findings about something missing say it
//! may set it); `$HTTP["host"] == "x" { ... }` conditionals, nested, chained
//! with `else` / `elif` / `else $COND`, the `{` on the same line or the next,
//! a whole block on one line; `global { }`. Settings inside a conditional
//! keep it as their context and are never taken as server-wide. An error
//! skips one statement: the settings after it are still read.

use super::{read_config, resolve, Finding, Fix, Level, Server, TuneOptions, TuneReport};
use crate::glob;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

mod parse;
use parse::Reader;

/// A value as lighttpd evaluates it.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// An array: (key for `"k" => v` entries, value).
    Arr(Vec<(Option<String>, Val)>),
    /// Not known here (an `env.` variable not set in this environment).
    Unknown,
}

impl Val {
    fn plus(self, o: Val) -> Result<Val, String> {
        Ok(match (self, o) {
            (Val::Str(a), Val::Str(b)) => Val::Str(a + &b),
            (Val::Str(a), Val::Int(b)) => Val::Str(format!("{a}{b}")),
            (Val::Int(a), Val::Str(b)) => Val::Str(format!("{a}{b}")),
            (Val::Int(a), Val::Int(b)) => Val::Int(a.saturating_add(b)),
            (Val::Arr(mut a), Val::Arr(b)) => {
                a.extend(b);
                Val::Arr(a)
            }
            (Val::Unknown, _) | (_, Val::Unknown) => Val::Unknown,
            _ => return Err("cannot add these values (a string or integer and an array)".into()),
        })
    }

    /// The strings in it (a string: itself; an array: its string values).
    pub fn strings(&self) -> Vec<String> {
        match self {
            Val::Str(s) => vec![s.clone()],
            Val::Arr(v) => v.iter().flat_map(|(_, x)| x.strings()).collect(),
            _ => vec![],
        }
    }
}

/// One assignment.
#[derive(Debug, Clone)]
pub struct Assign {
    /// Key, e.g. `server.modules`.
    pub key: String,
    /// `+=`.
    pub append: bool,
    /// The value as written.
    pub value: String,
    /// The value evaluated.
    pub val: Val,
    /// File.
    pub file: PathBuf,
    /// Line.
    pub line: usize,
    /// Last line of the assignment.
    pub end_line: usize,
    /// The whole assignment as written.
    pub source: String,
    /// The conditionals it is inside (`$HTTP["host"] == "a"`), outermost first.
    pub cond: Vec<String>,
}

fn at(a: &Assign) -> (&Path, usize) {
    (a.file.as_path(), a.line)
}

fn num(a: &Assign) -> Option<i64> {
    match &a.val {
        Val::Int(n) => Some(*n),
        Val::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn string(a: &Assign) -> String {
    match &a.val {
        Val::Str(s) => s.clone(),
        Val::Int(n) => n.to_string(),
        _ => a.value.clone(),
    }
}

fn reader(path: &Path) -> Reader {
    let mut r = Reader {
        base: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        ..Default::default()
    };
    // lighttpd's own variables: var.CWD and var.PID.
    let global = r.vars.entry(Vec::new()).or_default();
    if let Ok(cwd) = std::env::current_dir() {
        global.insert("var.CWD".into(), Val::Str(cwd.display().to_string()));
    }
    global.insert("var.PID".into(), Val::Int(0));
    r.read(path, &[], None);
    r
}

/// Every assignment of a configuration, in order, each with the
/// conditionals it is in (what `lighttpd -p` prints, before merging).
pub fn assignments(path: &Path) -> Vec<Assign> {
    reader(path).assigns
}

/// The files a configuration reads, main first (`include_shell` output not
/// among them: it is never run).
pub fn files(path: &Path) -> Vec<PathBuf> {
    reader(path).files
}

/// Reads and checks a lighttpd configuration.
pub fn analyze(path: &Path, opts: &TuneOptions) -> TuneReport {
    let _ = opts;
    let r = reader(path);
    let mut modules = BTreeSet::new();
    for a in r.assigns.iter().filter(|a| a.key == "server.modules") {
        if !a.append {
            modules.clear();
        }
        modules.extend(
            a.val
                .strings()
                .into_iter()
                .filter(|m| m.starts_with("mod_")),
        );
    }
    let global = |k: &str| {
        r.assigns
            .iter()
            .rev()
            .find(|a| a.key == k && a.cond.is_empty())
    };
    // Each setting of a key: the server-wide one in effect, and each inside a conditional.
    let each = |k: &str| -> Vec<&Assign> {
        let mut v: Vec<&Assign> = r
            .assigns
            .iter()
            .filter(|a| a.key == k && !a.cond.is_empty())
            .collect();
        v.extend(global(k));
        v
    };
    let ctx = |a: &Assign| a.cond.join(" > ");
    let replace = |a: &Assign, text: &str| {
        let c = if a.cond.is_empty() {
            String::new()
        } else {
            ctx(a)
        };
        Fix::replace(&a.file, &c, (a.line, a.end_line), &a.source, text)
    };
    let add = |text: &str| Fix::insert_after(path, "", r.main_lines, text);
    let mut f = Vec::new();
    for (file, line, msg) in &r.errors {
        f.push(
            Finding::new(Level::Warn, "parse_error", (file, *line), msg.clone())
                .why("lighttpd would refuse this, or read something other than intended; the rest was still checked"),
        );
    }
    for (file, line, msg) in &r.notes {
        let code = if msg.starts_with("include_shell") {
            "include_shell_not_run"
        } else {
            "unusual_syntax"
        };
        f.push(
            Finding::new(
                Level::Info,
                code,
                (file, *line),
                msg.clone(),
            )
            .why(if code == "include_shell_not_run" {
                "redline does not run commands from a configuration; check what it prints by hand"
            } else {
                "the server accepts it, but it may not mean what it looks like"
            }),
        );
    }
    let none = (Path::new(""), 0usize);
    let main = (path, 0usize);
    let mut bad = false;
    for a in each("server.max-keep-alive-requests") {
        match num(a) {
            Some(0) => {
                bad = true;
                f.push(
                    Finding::new(
                        Level::Warn,
                        "keepalive_off",
                        at(a),
                        "server.max-keep-alive-requests = 0 (keep-alive off)".into(),
                    )
                    .why("a new TCP connection (and TLS handshake) for every resource of a page")
                    .context(ctx(a))
                    .fix(replace(a, "server.max-keep-alive-requests = 1000")),
                )
            }
            Some(n) if n < 100 => {
                bad = true;
                f.push(
                    Finding::new(
                        Level::Warn,
                        "keepalive_requests_low",
                        at(a),
                        format!("server.max-keep-alive-requests = {n}"),
                    )
                    .why("a keep-alive connection is closed after this many requests, so a page with many resources reconnects (lighttpd's default is 1000)")
                    .context(ctx(a))
                    .fix(replace(a, "server.max-keep-alive-requests = 1000")),
                )
            }
            _ => {}
        }
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "keepalive_off",
            none,
            "keep-alive on".into(),
        ));
    }
    let mut bad = false;
    for a in each("server.max-keep-alive-idle") {
        if num(a).is_some_and(|v| v > 15) {
            bad = true;
            f.push(
                Finding::new(
                    Level::Warn,
                    "keepalive_timeout_high",
                    at(a),
                    format!("server.max-keep-alive-idle = {}", a.value),
                )
                .why("idle connections are kept long after a visitor has gone")
                .context(ctx(a))
                .fix(replace(a, "server.max-keep-alive-idle = 5")),
            );
        }
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "keepalive_timeout_high",
            none,
            "keep-alive idle time at most 15 s".into(),
        ));
    }
    match global("server.network-backend") {
        Some(a) if matches!(string(a).as_str(), "write" | "writev") => f.push(
            Finding::new(
                Level::Warn,
                "sendfile_off",
                at(a),
                format!("server.network-backend = {}", a.value),
            )
            .why("static files are copied through user space instead of sent by the kernel")
            .fix(replace(a, "server.network-backend = \"sendfile\"")),
        ),
        _ => f.push(Finding::new(
            Level::Ok,
            "sendfile_off",
            none,
            "sendfile network backend (default)".into(),
        )),
    }
    if let Some(a) = global("server.stat-cache-engine") {
        if string(a) == "disable" {
            f.push(
                Finding::new(
                    Level::Warn,
                    "stat_cache_off",
                    at(a),
                    "server.stat-cache-engine = \"disable\"".into(),
                )
                .why("a stat() of the file on every request")
                .fix(replace(a, "server.stat-cache-engine = \"simple\"")),
            );
        }
    }
    if let Some(a) = global("server.max-worker") {
        if num(a).is_some_and(|v| v > 0) {
            f.push(
                Finding::new(Level::Info, "max_worker", at(a), format!("server.max-worker = {}", a.value))
                    .why("several lighttpd processes: more memory, and per-process caches and limits split")
                    .fix(replace(a, "server.max-worker = 0")),
            );
        }
    }
    let deflate = modules.contains("mod_deflate");
    let types_set = r
        .assigns
        .iter()
        .any(|a| a.key == "deflate.mimetypes" && !a.val.strings().is_empty());
    if deflate && types_set || modules.contains("mod_compress") {
        f.push(Finding::new(
            Level::Ok,
            "no_compression",
            none,
            "mod_deflate loaded and deflate.mimetypes set".into(),
        ));
    } else if deflate {
        let text = "deflate.mimetypes = ( \"text/\", \"application/javascript\", \"application/json\", \"image/svg+xml\" )";
        f.push(
            Finding::new(
                Level::Warn,
                "no_compression",
                main,
                "mod_deflate is loaded but deflate.mimetypes is not set: nothing is compressed"
                    .into(),
            )
            .why("HTML, CSS and JavaScript go out uncompressed: 3 to 5 times the bytes")
            .fix(add(text)),
        );
    } else {
        let mut text = String::from("server.modules += ( \"mod_deflate\" )");
        if !types_set {
            text.push_str("\ndeflate.mimetypes = ( \"text/\", \"application/javascript\", \"application/json\", \"image/svg+xml\" )");
        }
        f.push(
            Finding::new(
                Level::Warn,
                "no_compression",
                main,
                "mod_deflate is not in server.modules".into(),
            )
            .why("HTML, CSS and JavaScript go out uncompressed: 3 to 5 times the bytes")
            .fix(add(&text)),
        );
    }
    if !modules.contains("mod_expire") {
        f.push(
            Finding::new(Level::Info, "no_expires", main, "mod_expire is not in server.modules".into())
                .why("browsers revalidate every image and stylesheet on each page view")
                .fix(add("server.modules += ( \"mod_expire\" )\nexpire.mimetypes = ( \"image/\" => \"access plus 7 days\", \"text/css\" => \"access plus 7 days\", \"application/javascript\" => \"access plus 7 days\" )")),
        );
    } else {
        f.push(Finding::new(
            Level::Ok,
            "no_expires",
            none,
            "mod_expire loaded".into(),
        ));
    }
    // What an include_shell that was not run prints is not known: a
    // verdict on something missing, or on a default, may be wrong.
    if let Some((file, line, cmd)) = r.unrun.first() {
        let shell = format!(
            "{}:{line} (`include_shell \"{cmd}\"`, not run)",
            file.display()
        );
        let more = match r.unrun.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        for x in f.iter_mut() {
            let about_missing = x.line == 0 && x.code != "include_shell_not_run";
            if !about_missing || x.code == "parse_error" {
                continue;
            }
            x.message = format!(
                "{}; not known for sure: the include_shell at {shell}{more} may set it",
                x.message
            );
            if x.level == Level::Warn {
                x.level = Level::Info;
            }
        }
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
