//! nginx configuration, read with nginx's own token rules (as documented for
//! `ngx_conf_read_token`): words separated by blanks, a statement ends at `;`
//! and a block opens at `{`; `#` starts a comment only where a word could
//! start (inside a word, as in a regex `(?:#.*#)`, it is part of the word);
//! `"double"` and `'single'` quotes, where a closing quote must be followed
//! by a blank, `;`, `{` or `)`; `\` escapes the next character anywhere;
//! `${var}` keeps its braces in the word. `*_by_lua_block { ... }` bodies are
//! Lua (strings, long brackets and comments skipped), kept raw and never
//! parsed as directives. `include` with globs relative to the main file's
//! directory (a glob may match nothing; a plain path must exist), an include
//! loop reported once. Or the output of `nginx -T` (files marked
//! `# configuration file PATH:`), read as those files.

use super::{read_config, resolve, Finding, Fix, Level, Server, TuneOptions, TuneReport};
use crate::glob;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod parse;
pub use parse::split_dump;
use parse::Reader;
#[cfg(test)]
use parse::{Lexer, Tok};

/// One directive with its block path (e.g. `http server location`).
#[derive(Debug, Clone)]
pub struct Stmt {
    /// Name.
    pub name: String,
    /// Arguments (quotes removed, escapes resolved as nginx does).
    pub args: Vec<String>,
    /// File.
    pub file: PathBuf,
    /// Line of its first word.
    pub line: usize,
    /// Line of its `;` or `{`.
    pub end_line: usize,
    /// The statement as written, from its first word to its `;` (or `{`).
    pub source: String,
    /// Enclosing blocks (names).
    pub ctx: Vec<String>,
    /// Enclosing block (index into the blocks), None at the top level.
    pub parent: Option<usize>,
    /// The block this statement opens (index), for block statements.
    pub opens: Option<usize>,
}

/// One `{ }` block.
#[derive(Debug, Clone)]
pub struct Block {
    /// The directive that opened it (`http`, `server`, `location`).
    pub name: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The file it is in.
    pub file: PathBuf,
    /// The enclosing block.
    pub parent: Option<usize>,
    /// A line of this file after which text lands inside the block: the
    /// line of its `{` when nothing follows it there, else the line of a
    /// statement in it that ends its line. None when no such line exists.
    pub insert_after: Option<usize>,
}

/// nginx's time syntax (`75`, `75s`, `1m30s`, `500ms`, `1h`) in seconds.
pub fn parse_time(v: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut num = String::new();
    let b: Vec<char> = v.chars().collect();
    let mut i = 0;
    let mut any = false;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() {
            num.push(c);
            i += 1;
            continue;
        }
        let n: f64 = num.parse().ok()?;
        num.clear();
        let (mult, step) = match (c, b.get(i + 1)) {
            ('m', Some('s')) => (0.001, 2),
            ('s', _) => (1.0, 1),
            ('m', _) => (60.0, 1),
            ('h', _) => (3600.0, 1),
            ('d', _) => (86400.0, 1),
            ('w', _) => (7.0 * 86400.0, 1),
            ('M', _) => (30.0 * 86400.0, 1),
            ('y', _) => (365.0 * 86400.0, 1),
            _ => return None,
        };
        total += n * mult;
        any = true;
        i += step;
    }
    if !num.is_empty() {
        total += num.parse::<f64>().ok()?;
        any = true;
    }
    any.then_some(total)
}

/// The context of a block in words: `http > server (server_name a.example) > location /`.
fn describe(stmts: &[Stmt], blocks: &[Block], mut b: Option<usize>) -> String {
    let mut parts = Vec::new();
    while let Some(i) = b {
        let bl = &blocks[i];
        let mut s = bl.name.clone();
        if bl.name == "server" {
            // Its first server_name, then its first listen.
            let first = |n: &str| {
                stmts
                    .iter()
                    .find(|x| x.parent == Some(i) && x.name == n)
                    .and_then(|x| x.args.first().map(|a| a.as_str()))
            };
            let names: Vec<&str> = [first("server_name"), first("listen")]
                .into_iter()
                .flatten()
                .collect();
            if !names.is_empty() {
                s = format!("server ({})", names.join(" "));
            }
        } else if !bl.args.is_empty() {
            s = format!("{} {}", bl.name, bl.args.join(" "));
        }
        parts.push(s);
        b = bl.parent;
    }
    parts.reverse();
    parts.join(" > ")
}

/// A fix that puts `text` inside block `b`: after a line that ends inside
/// it; when none does (a block on one line), right after its `{`, by
/// replacing the opening.
fn fix_into(s: &[Stmt], blocks: &[Block], b: usize, text: &str) -> Option<Fix> {
    let bl = &blocks[b];
    let ctx = describe(s, blocks, Some(b));
    match bl.insert_after {
        Some(l) => Some(Fix::insert_after(&bl.file, &ctx, l, text)),
        None => s.iter().find(|x| x.opens == Some(b)).map(|x| {
            Fix::replace(
                &x.file,
                &ctx,
                (x.line, x.end_line),
                &x.source,
                &format!("{}\n{text}", x.source),
            )
        }),
    }
}

/// The blocks from `b` outwards (`location`, `server`, `http`), then None
/// for the top level of the file.
fn chain(blocks: &[Block], b: Option<usize>) -> Vec<Option<usize>> {
    let mut v = Vec::new();
    let mut cur = b;
    while let Some(i) = cur {
        v.push(Some(i));
        cur = blocks[i].parent;
    }
    v.push(None);
    v
}

/// The statements named `name` in effect at block `b`, by nginx's
/// inheritance: those of the innermost level (from `b` outwards) that has
/// any; an inner level with one replaces all of an outer level's
/// (`proxy_set_header`, `add_header` and plain values alike).
fn effective<'a>(s: &'a [Stmt], blocks: &[Block], b: Option<usize>, name: &str) -> Vec<&'a Stmt> {
    for level in chain(blocks, b) {
        // `if` blocks in a location take the location's values unless they set their own.
        let here: Vec<&Stmt> = s
            .iter()
            .filter(|x| x.parent == level && x.name == name)
            .collect();
        if !here.is_empty() {
            return here;
        }
    }
    Vec::new()
}

mod upstream;

/// Every statement and block of a configuration file (includes followed),
/// as `analyze` reads it; for the effective values a run records.
pub fn statements(path: &Path) -> (Vec<Stmt>, Vec<Block>) {
    let mut r = Reader {
        base: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        ..Default::default()
    };
    r.read(path, &[], None, None);
    (r.stmts, r.blocks)
}

/// Where a directive tune advises on may be, how many arguments it takes,
/// and what values, as nginx's own modules declare them (`NGX_HTTP_MAIN_CONF
/// | NGX_HTTP_SRV_CONF | …`, `NGX_CONF_FLAG`, `NGX_CONF_TAKE12`): checked
/// without the binary, so that a line nginx refuses is reported, never
/// passed as `[OK]`. `http` stands for http, server, location (and `if` in a
/// location where nginx allows it).
struct Rule {
    name: &'static str,
    /// Enclosing blocks allowed: "" (main), "events", "http", "upstream", "location".
    ctx: &'static [&'static str],
    min: usize,
    max: usize,
    value: Check,
}

/// A value check: None when fine, else (the value, what it must be).
type Check = fn(&[String]) -> Option<(String, &'static str)>;

fn flag(a: &[String]) -> Option<(String, &'static str)> {
    let v = a.first()?;
    (v != "on" && v != "off").then(|| (v.clone(), ", it must be \"on\" or \"off\""))
}
fn number(a: &[String]) -> Option<(String, &'static str)> {
    let v = a.first()?;
    v.parse::<u64>()
        .is_err()
        .then(|| (v.clone(), " (a number)"))
}
fn number_or_auto(a: &[String]) -> Option<(String, &'static str)> {
    let v = a.first()?;
    (v != "auto" && v.parse::<u64>().is_err()).then(|| (v.clone(), " (a number or \"auto\")"))
}
fn times(a: &[String]) -> Option<(String, &'static str)> {
    a.iter()
        .find(|v| parse_time(v).is_none())
        .map(|v| (v.clone(), " (a time: 75s, 1m, 500ms)"))
}
fn http_version(a: &[String]) -> Option<(String, &'static str)> {
    let v = a.first()?;
    (v != "1.0" && v != "1.1").then(|| (v.clone(), ", it must be \"1.0\" or \"1.1\""))
}
fn any(_: &[String]) -> Option<(String, &'static str)> {
    None
}

const RULES: &[Rule] = &[
    Rule {
        name: "sendfile",
        ctx: &["http", "location-if"],
        min: 1,
        max: 1,
        value: flag,
    },
    Rule {
        name: "gzip",
        ctx: &["http", "location-if"],
        min: 1,
        max: 1,
        value: flag,
    },
    Rule {
        name: "gzip_types",
        ctx: &["http"],
        min: 1,
        max: usize::MAX,
        value: any,
    },
    Rule {
        name: "keepalive_timeout",
        ctx: &["http"],
        min: 1,
        max: 2,
        value: times,
    },
    Rule {
        name: "keepalive_requests",
        ctx: &["http", "upstream"],
        min: 1,
        max: 1,
        value: number,
    },
    Rule {
        name: "worker_processes",
        ctx: &[""],
        min: 1,
        max: 1,
        value: number_or_auto,
    },
    Rule {
        name: "worker_connections",
        ctx: &["events"],
        min: 1,
        max: 1,
        value: number,
    },
    Rule {
        name: "expires",
        ctx: &["http", "location-if"],
        min: 1,
        max: 2,
        value: any,
    },
    Rule {
        name: "proxy_http_version",
        ctx: &["http"],
        min: 1,
        max: 1,
        value: http_version,
    },
    Rule {
        name: "keepalive",
        ctx: &["upstream"],
        min: 1,
        max: 1,
        value: number,
    },
];

/// What nginx would say about a statement tune advises on, or None when it
/// is fine (or not one tune checks).
fn refused(x: &Stmt, partial: bool) -> Option<String> {
    let rule = RULES.iter().find(|r| r.name == x.name)?;
    let inner = x.ctx.last().map(String::as_str).unwrap_or("");
    let in_http = x.ctx.first().is_some_and(|c| c == "http");
    let allowed = rule.ctx.iter().any(|c| match *c {
        "" => x.ctx.is_empty(),
        "http" => in_http && matches!(inner, "http" | "server" | "location"),
        "location-if" => {
            in_http && inner == "if" && x.ctx.iter().rev().nth(1).is_some_and(|c| c == "location")
        }
        other => inner == other,
    });
    // The top of a file read alone (a vhost, a snippet) is inside http in the real tree.
    let top_of_a_part = partial && x.ctx.is_empty() && rule.ctx.contains(&"http");
    if !(allowed || top_of_a_part) {
        return Some(format!("\"{}\" directive is not allowed here", x.name));
    }
    if x.args.len() < rule.min || x.args.len() > rule.max {
        return Some(format!(
            "invalid number of arguments in \"{}\" directive",
            x.name
        ));
    }
    (rule.value)(&x.args)
        .map(|(v, hint)| format!("invalid value \"{v}\" in \"{}\" directive{hint}", x.name))
}

/// Reads and checks an nginx configuration (or `nginx -T` output).
pub fn analyze(path: &Path, text: &str, opts: &TuneOptions) -> TuneReport {
    let _ = opts;
    let mut r = Reader::default();
    let mut tools = Vec::new();
    let main: PathBuf;
    if let Some(files) = split_dump(text) {
        main = files
            .keys()
            .next()
            .cloned()
            .unwrap_or_else(|| path.to_path_buf());
        // The first file in the dump is the main one; nginx -T prints it first.
        let first = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("# configuration file ")
                    .and_then(|r| r.trim_end().strip_suffix(':'))
            })
            .map(PathBuf::from)
            .unwrap_or(main);
        tools.push(format!("read as `nginx -T` output: {} files", files.len()));
        r.base = first.parent().map(Path::to_path_buf).unwrap_or_default();
        r.dumped = Some(files);
        r.read(&first, &[], None, None);
    } else {
        r.base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        r.read(path, &[], None, None);
    }
    // Lines nginx would refuse: reported, and left out of the checks (no
    // `[OK] sendfile on` for `sendfile maybe;`).
    let mut f = Vec::new();
    let whole = r
        .blocks
        .iter()
        .any(|b| b.name == "http" && b.parent.is_none())
        || r.stmts
            .iter()
            .any(|x| x.ctx.is_empty() && x.name == "events");
    for x in &r.stmts {
        if let Some(msg) = refused(x, !whole) {
            f.push(
                // At the line nginx names: where the statement ends.
                Finding::new(Level::Warn, "config_error", (x.file.as_path(), x.end_line), format!("{}: {msg}", x.source.trim_end_matches(';')))
                    .why("nginx refuses this line (nginx -t fails, a reload keeps the old configuration); the checks below leave it out")
                    .context(describe(&r.stmts, &r.blocks, x.parent)),
            );
        }
    }
    let valid: Vec<Stmt> = r
        .stmts
        .iter()
        .filter(|x| refused(x, !whole).is_none())
        .cloned()
        .collect();
    let s = &valid;
    let blocks = &r.blocks;
    let ctx_of = |x: &Stmt| describe(s, blocks, x.parent);
    for (file, line, msg) in &r.errors {
        f.push(
            Finding::new(Level::Warn, "parse_error", (file, *line), msg.clone())
                .why("nginx would refuse this configuration; the rest was still checked"),
        );
    }
    let none = (Path::new(""), 0usize);
    let http_idx = blocks
        .iter()
        .position(|b| b.name == "http" && b.parent.is_none());
    let http = http_idx.and_then(|i| s.iter().find(|x| x.opens == Some(i)));
    let http_at = http.map(at).unwrap_or((path, 0));
    // Insert a line into a block: its file, its context and the line.
    let into = |b: usize, text: &str| -> Option<Fix> { fix_into(s, blocks, b, text) };
    // No http block: a part of a configuration (a vhost or a snippet from
    // conf.d/ or sites-enabled/, read inside nginx.conf's http block).
    // What nginx.conf sets (sendfile, gzip) is not in it: not judged missing.
    let partial = http_idx.is_none() && split_dump(text).is_none();
    if partial {
        f.push(
            Finding::new(
                Level::Info,
                "partial_config",
                (path, 0),
                "no http block: read as a part of a configuration (a vhost or snippet included in nginx.conf's http block); what nginx.conf sets (sendfile, gzip) is not judged missing".into(),
            )
            .why("give the main nginx.conf, or `nginx -T` output, for the whole picture"),
        );
    }
    let replace = |x: &Stmt, text: &str| -> Fix {
        Fix::replace(&x.file, &ctx_of(x), (x.line, x.end_line), &x.source, text)
    };
    let find = |name: &str| -> Vec<&Stmt> { s.iter().filter(|x| x.name == name).collect() };
    let with_fix = |mut fi: Finding, fix: Option<Fix>| -> Finding {
        if let Some(x) = fix {
            fi = fi.fix(x);
        }
        fi
    };

    // sendfile
    let sf = find("sendfile");
    let off: Vec<&&Stmt> = sf
        .iter()
        .filter(|x| x.args.first().is_some_and(|a| a == "off"))
        .collect();
    for x in &off {
        f.push(
            Finding::new(Level::Warn, "sendfile_off", at(x), "sendfile off".into())
                .why("static files are copied through user space instead of sent by the kernel")
                .context(ctx_of(x))
                .fix(replace(x, "sendfile on;")),
        );
    }
    if sf.is_empty() && !partial {
        f.push(with_fix(
            Finding::new(
                Level::Warn,
                "sendfile_off",
                http_at,
                "sendfile not set: nginx's default is off".into(),
            )
            .why("static files are copied through user space instead of sent by the kernel")
            .change("sendfile on;"),
            http_idx.and_then(|b| into(b, "sendfile on;")),
        ));
    } else if off.is_empty() && !sf.is_empty() {
        f.push(Finding::new(
            Level::Ok,
            "sendfile_off",
            none,
            "sendfile on".into(),
        ));
    }

    // keepalive_timeout (nginx time units) and keepalive_requests
    let mut bad = false;
    for x in find("keepalive_timeout") {
        let v = x.args.first().map(String::as_str).unwrap_or("");
        let Some(secs) = parse_time(v) else {
            continue;
        };
        // Off in one location (a health check, a long poll, an endpoint
        // whose clients never reuse a connection) is a choice for that
        // location, not the server's keep-alive.
        let in_location = x.ctx.iter().any(|c| c == "location");
        if secs == 0.0 && in_location {
            continue;
        }
        if secs == 0.0 {
            bad = true;
            f.push(
                Finding::new(
                    Level::Warn,
                    "keepalive_off",
                    at(x),
                    format!("keepalive_timeout {v} (keep-alive off)"),
                )
                .why("a new TCP connection (and TLS handshake) for every resource of a page")
                .context(ctx_of(x))
                .fix(replace(x, "keepalive_timeout 65s;")),
            );
        } else if secs > 75.0 {
            bad = true;
            f.push(
                Finding::new(Level::Info, "keepalive_timeout_high", at(x), format!("keepalive_timeout {v} ({secs} s)"))
                    .why("idle connections are kept (a file descriptor and buffers each) long after a visitor has gone")
                    .context(ctx_of(x))
                    .fix(replace(x, "keepalive_timeout 65s;")),
            );
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
    for x in find("keepalive_requests") {
        if x.ctx.last().is_some_and(|c| c == "upstream") {
            continue;
        }
        if let Some(n) = x.args.first().and_then(|a| a.parse::<u64>().ok()) {
            if n < 100 {
                f.push(
                    Finding::new(Level::Warn, "keepalive_requests_low", at(x), format!("keepalive_requests {n}"))
                        .why("a keep-alive connection is closed after this many requests, so a page with many resources reconnects (nginx's default is 1000)")
                        .context(ctx_of(x))
                        .fix(replace(x, "keepalive_requests 1000;")),
                );
            }
        }
    }

    // gzip: on, and for which types (text/html only unless gzip_types says more).
    let gz = find("gzip");
    let gzip_on: Vec<&&Stmt> = gz
        .iter()
        .filter(|x| x.args.first().is_some_and(|a| a == "on"))
        .collect();
    if let Some(on) = gzip_on.first() {
        let types = find("gzip_types");
        if types.is_empty() {
            let fix = on.parent.and_then(|b| {
                into(
                    b,
                    "gzip_types text/css application/javascript application/json image/svg+xml;",
                )
            });
            f.push(with_fix(
                Finding::new(Level::Info, "gzip_types_default", at(on), "gzip on, but only for text/html: no gzip_types".into())
                    .why("CSS, JavaScript and JSON go out uncompressed: gzip compresses only text/html unless gzip_types names more")
                    .context(ctx_of(on))
                    .change("gzip_types text/css application/javascript application/json image/svg+xml;"),
                fix,
            ));
        } else {
            f.push(Finding::new(
                Level::Ok,
                "no_compression",
                none,
                format!("gzip on for {}", types[0].args.join(" ")),
            ));
        }
    } else if !(partial && gz.is_empty()) {
        let has_types = !find("gzip_types").is_empty();
        let text = if has_types {
            "gzip on;"
        } else {
            "gzip on;\ngzip_types text/css application/javascript application/json image/svg+xml;"
        };
        let fi = Finding::new(
            Level::Warn,
            "no_compression",
            gz.first().map(|x| at(x)).unwrap_or(http_at),
            "gzip is not on".into(),
        )
        .why("HTML, CSS and JavaScript go out uncompressed: 3 to 5 times the bytes")
        .change(text);
        f.push(match gz.first() {
            Some(x) => fi.context(ctx_of(x)).fix(replace(x, text)),
            None => with_fix(fi, http_idx.and_then(|b| into(b, text))),
        });
    }

    // worker_processes
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    for x in find("worker_processes") {
        match x.args.first().map(String::as_str) {
            Some("auto") => f.push(Finding::new(
                Level::Ok,
                "worker_processes_low",
                none,
                "worker_processes auto".into(),
            )),
            Some(v) => {
                let n: usize = v.parse().unwrap_or(0);
                if n < cpus {
                    f.push(
                        Finding::new(Level::Warn, "worker_processes_low", at(x), format!("worker_processes {v} on a machine with {cpus} CPUs"))
                            .why("nginx uses one CPU per worker process; the other CPUs stay idle under load")
                            .fix(replace(x, "worker_processes auto;")),
                    );
                } else {
                    f.push(Finding::new(
                        Level::Ok,
                        "worker_processes_low",
                        none,
                        format!("worker_processes {v}"),
                    ));
                }
            }
            None => {}
        }
    }
    for x in find("worker_connections") {
        if let Some(n) = x.args.first().and_then(|a| a.parse::<u64>().ok()) {
            if n < 512 {
                f.push(
                    Finding::new(Level::Info, "worker_connections_low", at(x), format!("worker_connections {n}"))
                        .why("each worker accepts at most this many connections, clients and upstreams together")
                        .context(ctx_of(x))
                        .fix(replace(x, "worker_connections 1024;")),
                );
            }
        }
    }
    if find("expires").is_empty()
        && !s.iter().any(|x| {
            x.name == "add_header"
                && x.args
                    .first()
                    .is_some_and(|a| a.eq_ignore_ascii_case("cache-control"))
        })
    {
        // A map on the response's Content-Type, and `expires` set from it,
        // at the http level: no new location, so no URL changes hands
        // (a `location ~* \.(css|js)$` would take /app.js away from a
        // `location / { proxy_pass … }`); types not in the map get `off`,
        // nginx's default, and `expires` changes headers only, never a
        // status or a body.
        let var = expires_var(s);
        let text = format!(
            "map $sent_http_content_type ${var} {{\n    default off;\n    ~^text/css 7d;\n    ~^application/javascript 7d;\n    ~^image/ 30d;\n    ~^font/ 30d;\n}}\nexpires ${var};"
        );
        let (at_, fix) = match http_idx {
            Some(b) => (http_at, into(b, &text)),
            // A vhost or snippet is read inside http: its top level is the http level.
            None if partial => (
                (path, 0),
                Some(Fix::insert_after(
                    path,
                    "http (this file is included there)",
                    0,
                    &text,
                )),
            ),
            None => (http_at, None),
        };
        f.push(with_fix(
            Finding::new(
                Level::Info,
                "no_expires",
                at_,
                "no expires or Cache-Control anywhere".into(),
            )
            .why("browsers revalidate every image and stylesheet on each page view")
            .change(format!("{text}    # at the http level")),
            fix,
        ));
    }

    // Upstream keep-alive that no location can use.
    f.extend(upstream::checks(s, blocks));

    let f = once_each(f);
    let mut files: Vec<String> = Vec::new();
    for p in &r.files {
        let p = p.display().to_string();
        if !files.contains(&p) {
            files.push(p);
        }
    }
    TuneReport {
        server: Server::Nginx,
        config: path.display().to_string(),
        files,
        modules: vec![],
        mpm: None,
        threads_per_child: None,
        tools,
        findings: f,
    }
}

/// A variable name for the expires map: `expires`, unless a `map`, `set`
/// or `geo` of the config already makes `$expires`.
fn expires_var(s: &[Stmt]) -> &'static str {
    let taken = |v: &str| {
        s.iter().any(|x| {
            matches!(x.name.as_str(), "map" | "set" | "geo" | "split_clients")
                && x.args.iter().any(|a| a == v)
        })
    };
    if taken("$expires") {
        "redline_expires"
    } else {
        "expires"
    }
}

/// One finding per place: a file included twice (in two server blocks, or
/// twice by mistake) gives each of its findings once, with the other places
/// it is read named in its context.
fn once_each(f: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for x in f {
        let same = out.iter_mut().find(|y| {
            y.code == x.code && y.file == x.file && y.line == x.line && y.message == x.message
        });
        match same {
            Some(y) if y.level == Level::Ok || y.file.is_empty() => {}
            Some(y) => {
                if !x.context.is_empty()
                    && x.context != y.context
                    && !y.context.contains(&x.context)
                {
                    y.context = format!("{}; also read in {}", y.context, x.context);
                }
            }
            None => out.push(x),
        }
    }
    out
}

fn at(s: &Stmt) -> (&Path, usize) {
    (s.file.as_path(), s.line)
}

#[cfg(test)]
mod tests;
