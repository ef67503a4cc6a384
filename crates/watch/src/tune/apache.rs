//! Apache httpd configuration, read as the core docs describe it: one
//! directive per line (`\` continues it), `#` comments only at a line's
//! start; Include (an error when a path or wildcard matches nothing, as
//! Apache refuses to start then) and IncludeOptional (silent), with globs and
//! directories, relative to ServerRoot (the main file's directory unless
//! set), an include loop reported once; `<IfModule>` by either name
//! (`mod_x.c` or `x_module`, `prefork.c` for a static MPM) against LoadModule
//! as read plus the modules compiled in (`apache2 -l`); `<IfDefine>`,
//! `Define`, `${VAR}` (Debian's `envvars` too); context sections
//! (`<VirtualHost>` keyed by address and ServerName, so name-based hosts on
//! one address stay apart; `<Directory>`, `<Location>`, `<Files>` ...).
//! An `.htaccess` (by name, or `--htaccess`) is read as one: sections and
//! directives not allowed there are errors (Apache answers 500).
//! Then the checks.

use super::{
    read_config, resolve, split_args, Finding, Fix, Level, Server, TuneOptions, TuneReport,
};
use crate::glob;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// One active directive.
#[derive(Debug, Clone)]
pub struct Directive {
    /// Lower-case name.
    pub name: String,
    /// The name as written.
    pub raw_name: String,
    /// Arguments (variables substituted, quotes removed).
    pub args: Vec<String>,
    /// The file.
    pub file: PathBuf,
    /// The line (first line of a continued line).
    pub line: usize,
    /// The last line (a line continued with `\`).
    pub end_line: usize,
    /// The directive as written (without its indentation).
    pub source: String,
    /// Enclosing context sections, e.g. `directory /var/www/`; a virtual
    /// host is `virtualhost ADDRESS SERVERNAME`.
    pub ctx: Vec<String>,
    /// Every enclosing section, conditionals too (indexes into `Config::sections`).
    pub path: Vec<usize>,
}

/// One `<Section>`.
#[derive(Debug, Clone)]
pub struct Section {
    /// Lower-case kind: `virtualhost`, `directory`, `ifmodule`, ...
    pub kind: String,
    /// Its argument as written (variables substituted).
    pub arg: String,
    /// The file.
    pub file: PathBuf,
    /// Its opening line.
    pub line: usize,
    /// Its closing line (0 when never closed).
    pub end_line: usize,
    /// A conditional (`IfModule`, `IfDefine`, ...), evaluated away.
    pub conditional: bool,
    /// For a virtual host: its ServerName.
    pub server_name: Option<String>,
}

/// What reading the configuration produced.
#[derive(Debug, Default)]
pub struct Config {
    /// Active directives in order.
    pub directives: Vec<Directive>,
    /// Sections (active ones).
    pub sections: Vec<Section>,
    /// Modules loaded (ids like `deflate_module`).
    pub modules: BTreeSet<String>,
    /// Files read in order.
    pub files: Vec<PathBuf>,
    /// Problems: (file, line, message).
    pub errors: Vec<(PathBuf, usize, String)>,
    /// Read as an `.htaccess`.
    pub htaccess: bool,
    /// Lines in the main file.
    pub main_lines: usize,
    defines: HashMap<String, String>,
    env: HashMap<String, String>,
    server_root: PathBuf,
    open: Vec<PathBuf>,
    builtin: BTreeSet<String>,
}

/// Modules compiled into Debian's and most distributions' httpd.
const BUILTIN: &[&str] = &[
    "core_module",
    "so_module",
    "http_module",
    "log_config_module",
    "logio_module",
    "version_module",
    "unixd_module",
    "watchdog_module",
];

/// A module's id from either name `<IfModule>` takes: `mod_deflate.c` →
/// `deflate_module`, `prefork.c` → `mpm_prefork_module`, `core.c` →
/// `core_module`, `http_core.c` → `http_module`; `deflate_module` stays.
pub fn module_id(s: &str) -> String {
    let s = s.trim();
    if let Some(x) = s.strip_prefix("mod_").and_then(|x| x.strip_suffix(".c")) {
        return format!("{x}_module");
    }
    match s.strip_suffix(".c") {
        Some("prefork" | "worker" | "event") => format!("mpm_{}_module", &s[..s.len() - 2]),
        Some("http_core") => "http_module".into(),
        Some(x) => format!("{x}_module"),
        None => s.to_string(),
    }
}

/// Context sections (the others are conditionals, evaluated away).
const CONTEXTS: &[&str] = &[
    "directory",
    "directorymatch",
    "location",
    "locationmatch",
    "files",
    "filesmatch",
    "virtualhost",
    "proxy",
    "proxymatch",
    "limit",
    "limitexcept",
    "macro",
    "if",
    "elseif",
    "else",
    "requireall",
    "requireany",
    "requirenone",
];

/// Sections an `.htaccess` may not have.
const NOT_IN_HTACCESS_SECTIONS: &[&str] = &[
    "directory",
    "directorymatch",
    "location",
    "locationmatch",
    "virtualhost",
    "proxy",
    "proxymatch",
    "macro",
];

/// Directives whose context is server config / virtual host (and
/// `<Directory>`) only, never `.htaccess` (from the module docs' "Context").
const NOT_IN_HTACCESS: &[&str] = &[
    "acceptfilter",
    "accessfilename",
    "alias",
    "aliasmatch",
    "allowencodedslashes",
    "allowoverride",
    "allowoverridelist",
    "customlog",
    "define",
    "documentroot",
    "errorlog",
    "errorlogformat",
    "group",
    "hostnamelookups",
    "include",
    "includeoptional",
    "keepalive",
    "keepalivetimeout",
    "limitinternalrecursion",
    "limitrequestfields",
    "limitrequestfieldsize",
    "limitrequestline",
    "listen",
    "listenbacklog",
    "loadfile",
    "loadmodule",
    "logformat",
    "loglevel",
    "maxclients",
    "maxconnectionsperchild",
    "maxkeepaliverequests",
    "maxrequestsperchild",
    "maxrequestworkers",
    "maxsparethreads",
    "maxspareservers",
    "minsparethreads",
    "minspareservers",
    "mutex",
    "namevirtualhost",
    "pidfile",
    "protocols",
    "proxypass",
    "proxypassreverse",
    "proxyrequests",
    "rewritemap",
    "scriptalias",
    "scriptaliasmatch",
    "serveradmin",
    "serveralias",
    "serverlimit",
    "servername",
    "serverroot",
    "servertokens",
    "sslcertificatefile",
    "sslcertificatekeyfile",
    "sslengine",
    "startservers",
    "threadlimit",
    "threadsperchild",
    "timeout",
    "traceenable",
    "transferlog",
    "undefine",
    "usecanonicalname",
    "user",
    "userdir",
];

impl Config {
    fn subst(&self, s: &str) -> String {
        let mut out = String::new();
        let mut rest = s;
        for _ in 0..64 {
            match rest.find("${") {
                Some(i) => {
                    out.push_str(&rest[..i]);
                    let after = &rest[i + 2..];
                    match after.find('}') {
                        Some(j) => {
                            let name = &after[..j];
                            match self.defines.get(name).or_else(|| self.env.get(name)) {
                                Some(v) => out.push_str(v),
                                None => out.push_str(&rest[i..i + 3 + j]),
                            }
                            rest = &after[j + 1..];
                        }
                        None => {
                            out.push_str(&rest[i..]);
                            rest = "";
                        }
                    }
                }
                None => break,
            }
        }
        out.push_str(rest);
        out
    }

    fn cond(&self, name: &str, arg: &str) -> bool {
        let (neg, a) = match arg.strip_prefix('!') {
            Some(x) => (true, x.trim()),
            None => (false, arg.trim()),
        };
        let v = match name {
            "ifmodule" => {
                let id = module_id(a);
                // An .htaccess cannot know what the server loads: read as loaded.
                self.htaccess || self.modules.contains(&id) || self.builtin.contains(&id)
            }
            "ifdefine" => self.defines.contains_key(a),
            "iffile" => resolve(&self.server_root, a).exists(),
            _ => true,
        };
        v != neg
    }

    fn read_file(&mut self, path: &Path, outer: &[usize], from: Option<(&Path, usize)>) {
        let (ff, fl) = from
            .map(|(f, l)| (f.to_path_buf(), l))
            .unwrap_or_else(|| (path.to_path_buf(), 0));
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if self.open.contains(&key) {
            self.errors.push((
                ff,
                fl,
                format!("include loop: {} includes itself", path.display()),
            ));
            return;
        }
        // Apache's own limit on include nesting.
        if self.open.len() >= 128 {
            self.errors.push((
                ff,
                fl,
                format!("includes nested too deep at {}", path.display()),
            ));
            return;
        }
        let text = match read_config(path) {
            Ok(t) => t,
            Err(e) => {
                self.errors.push((ff, fl, e));
                return;
            }
        };
        if self.open.is_empty() {
            self.main_lines = text.lines().count();
        }
        self.files.push(path.to_path_buf());
        self.open.push(key);
        self.parse_text(path, &text, outer);
        self.open.pop();
    }

    fn parse_text(&mut self, path: &Path, text: &str, outer: &[usize]) {
        // (section name, active, section index when active, line)
        let mut stack: Vec<(String, bool, Option<usize>, usize)> = Vec::new();
        let raw: Vec<&str> = text.lines().collect();
        let mut i = 0usize;
        while i < raw.len() {
            let lineno = i + 1;
            let mut logical = raw[i].trim_end().to_string();
            while logical.ends_with('\\') && i + 1 < raw.len() {
                logical.pop();
                i += 1;
                logical.push(' ');
                logical.push_str(raw[i].trim());
            }
            let end_line = i + 1;
            i += 1;
            let t = logical.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let source = {
                let first = raw[lineno - 1].trim_start();
                if end_line > lineno {
                    let mut s = first.to_string();
                    for l in &raw[lineno..end_line] {
                        s.push('\n');
                        s.push_str(l);
                    }
                    s
                } else {
                    first.trim_end().to_string()
                }
            };
            let active = stack.iter().all(|s| s.1);
            if let Some(close) = t.strip_prefix("</") {
                let name = close.trim_end_matches('>').trim().to_ascii_lowercase();
                match stack.last() {
                    Some(top) if top.0 == name => {
                        if let Some(ix) = top.2 {
                            self.sections[ix].end_line = lineno;
                        }
                        stack.pop();
                    }
                    Some(top) => {
                        let msg = format!("</{name}> closes <{}> opened at line {}", top.0, top.3);
                        self.errors.push((path.to_path_buf(), lineno, msg));
                        stack.pop();
                    }
                    None => self.errors.push((
                        path.to_path_buf(),
                        lineno,
                        format!("</{name}> without an opening <{name}>"),
                    )),
                }
                continue;
            }
            if let Some(open) = t.strip_prefix('<') {
                let Some(body) = open.strip_suffix('>') else {
                    self.errors.push((
                        path.to_path_buf(),
                        lineno,
                        format!("section {t:?} does not end with '>'"),
                    ));
                    continue;
                };
                let (name, arg) = match body.split_once(char::is_whitespace) {
                    Some((n, a)) => (n.to_ascii_lowercase(), self.subst(a.trim())),
                    None => (body.to_ascii_lowercase(), String::new()),
                };
                let arg = arg.trim_matches('"').to_string();
                if active && self.htaccess && NOT_IN_HTACCESS_SECTIONS.contains(&name.as_str()) {
                    self.errors.push((
                        path.to_path_buf(),
                        lineno,
                        format!(
                            "<{}> is not allowed in .htaccess (Apache answers 500)",
                            section_name(&name)
                        ),
                    ));
                }
                let on = !active || self.cond(&name, &arg);
                let ix = (active && on).then(|| {
                    self.sections.push(Section {
                        kind: name.clone(),
                        arg: arg.clone(),
                        file: path.to_path_buf(),
                        line: lineno,
                        end_line: 0,
                        conditional: !CONTEXTS.contains(&name.as_str()),
                        server_name: None,
                    });
                    self.sections.len() - 1
                });
                stack.push((name, on, ix, lineno));
                continue;
            }
            if !active {
                continue;
            }
            let (raw_name, rest) = match t.split_once(char::is_whitespace) {
                Some((n, r)) => (n.to_string(), r.trim()),
                None => (t.to_string(), ""),
            };
            let name = raw_name.to_ascii_lowercase();
            let args: Vec<String> = split_args(&self.subst(rest));
            let mut dpath: Vec<usize> = outer.to_vec();
            dpath.extend(stack.iter().filter_map(|s| s.2));
            if self.htaccess && NOT_IN_HTACCESS.contains(&name.as_str()) {
                self.errors.push((
                    path.to_path_buf(),
                    lineno,
                    format!("{raw_name} is not allowed in .htaccess (Apache answers 500)"),
                ));
                continue;
            }
            match name.as_str() {
                "define" => {
                    if let Some(k) = args.first() {
                        self.defines
                            .insert(k.clone(), args.get(1).cloned().unwrap_or_default());
                    }
                }
                "undefine" => {
                    if let Some(k) = args.first() {
                        self.defines.remove(k);
                    }
                }
                "loadmodule" => {
                    if let Some(m) = args.first() {
                        self.modules.insert(m.clone());
                    }
                }
                "serverroot" => {
                    if let Some(r) = args.first() {
                        self.server_root = PathBuf::from(r);
                    }
                }
                "servername" => {
                    let vh = dpath
                        .iter()
                        .rev()
                        .copied()
                        .find(|&i| self.sections[i].kind == "virtualhost");
                    if let (Some(v), Some(i)) = (args.first(), vh) {
                        self.sections[i]
                            .server_name
                            .get_or_insert_with(|| v.clone());
                    }
                }
                "include" | "includeoptional" => {
                    let optional = name == "includeoptional";
                    for a in &args {
                        self.include(a, optional, &dpath, path, lineno);
                    }
                }
                _ => {}
            }
            self.directives.push(Directive {
                name,
                raw_name,
                args,
                file: path.to_path_buf(),
                line: lineno,
                end_line,
                source,
                ctx: Vec::new(),
                path: dpath,
            });
        }
        for (name, _, _, line) in stack {
            self.errors.push((
                path.to_path_buf(),
                line,
                format!("<{name}> is never closed"),
            ));
        }
    }

    fn include(&mut self, pat: &str, optional: bool, outer: &[usize], from: &Path, line: usize) {
        let p = resolve(&self.server_root, pat);
        let mut files = Vec::new();
        let wild = glob::has_wildcard(pat);
        let found = if wild {
            // Apache reads the pattern one component at a time: a wildcard
            // (or a directory before it) that matches nothing stops Include.
            if !optional {
                if let Some(msg) = unmatched_component(&p) {
                    self.errors.push((
                        from.to_path_buf(),
                        line,
                        format!("Include {pat}: {msg} (Apache refuses to start; IncludeOptional allows it)"),
                    ));
                    return;
                }
            }
            glob::expand(&p)
        } else if p.exists() {
            vec![p.clone()]
        } else {
            vec![]
        };
        if found.is_empty() {
            if !optional && !wild {
                self.errors.push((
                    from.to_path_buf(),
                    line,
                    format!(
                        "Include {pat}: no such file (use IncludeOptional if it may be missing)"
                    ),
                ));
            }
            return;
        }
        for f in found {
            if f.is_dir() {
                collect_dir(&f, &mut files, 0);
            } else {
                files.push(f);
            }
        }
        for f in files {
            self.read_file(&f, outer, Some((from, line)));
        }
    }

    /// Fills each directive's `ctx` once the virtual hosts' ServerNames are known.
    fn finish(&mut self) {
        let labels: Vec<Option<String>> = self
            .sections
            .iter()
            .map(|s| {
                if s.conditional {
                    None
                } else if s.kind == "virtualhost" {
                    Some(format!(
                        "virtualhost {} {}",
                        s.arg,
                        s.server_name.clone().unwrap_or_default()
                    ))
                } else {
                    Some(format!("{} {}", s.kind, s.arg))
                }
            })
            .collect();
        for d in self.directives.iter_mut() {
            d.ctx = d.path.iter().filter_map(|&i| labels[i].clone()).collect();
        }
    }

    /// The sections a directive is in, in words: `<VirtualHost *:80> (ServerName a) > <Directory /srv>`.
    pub fn describe(&self, path: &[usize]) -> String {
        path.iter()
            .map(|&i| {
                let s = &self.sections[i];
                let kind = section_name(&s.kind);
                let mut o = if s.arg.is_empty() {
                    format!("<{kind}>")
                } else {
                    format!("<{kind} {}>", s.arg)
                };
                if let Some(n) = &s.server_name {
                    o.push_str(&format!(" (ServerName {n})"));
                }
                o
            })
            .collect::<Vec<_>>()
            .join(" > ")
    }
}

/// The usual spelling of a section's name.
fn section_name(kind: &str) -> String {
    const NAMES: &[&str] = &[
        "VirtualHost",
        "Directory",
        "DirectoryMatch",
        "Location",
        "LocationMatch",
        "Files",
        "FilesMatch",
        "IfModule",
        "IfDefine",
        "IfFile",
        "IfVersion",
        "IfDirective",
        "IfSection",
        "Proxy",
        "ProxyMatch",
        "Limit",
        "LimitExcept",
        "Macro",
        "If",
        "ElseIf",
        "Else",
        "RequireAll",
        "RequireAny",
        "RequireNone",
    ];
    NAMES
        .iter()
        .find(|n| n.eq_ignore_ascii_case(kind))
        .map(|n| n.to_string())
        .unwrap_or_else(|| kind.to_string())
}

/// For a wildcard path: the first component (read left to right, as Apache
/// does) that matches nothing, in Apache's words; None when all match.
fn unmatched_component(p: &Path) -> Option<String> {
    let mut cur = PathBuf::new();
    let comps: Vec<_> = p.components().collect();
    for (k, c) in comps.iter().enumerate() {
        let part = c.as_os_str().to_string_lossy().to_string();
        if !glob::has_wildcard(&part) {
            cur.push(c.as_os_str());
            continue;
        }
        let dir = if cur.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            cur.clone()
        };
        if !dir.is_dir() {
            return Some(format!("could not open directory {}", dir.display()));
        }
        let matches = glob::expand(&dir.join(&part));
        if matches.is_empty() {
            return Some(format!(
                "no matches for the wildcard '{part}' in '{}'",
                dir.display()
            ));
        }
        if k + 1 == comps.len() {
            return None;
        }
        // Apache reads the rest under every match: each must have it.
        let rest: PathBuf = comps[k + 1..].iter().map(|c| c.as_os_str()).collect();
        return matches
            .iter()
            .find_map(|m| unmatched_component(&m.join(&rest)));
    }
    if !cur.exists() {
        return Some(format!("could not open {}", cur.display()));
    }
    None
}

fn collect_dir(d: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 8 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(d) else {
        return;
    };
    let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    v.sort();
    for p in v {
        if p.is_dir() {
            collect_dir(&p, out, depth + 1);
        } else {
            out.push(p);
        }
    }
}

/// Reads Debian's `envvars` (`export NAME=value`) beside the main file.
fn read_envvars(dir: &Path) -> HashMap<String, String> {
    let mut m = HashMap::new();
    let Ok(t) = read_config(&dir.join("envvars")) else {
        return m;
    };
    for l in t.lines() {
        if let Some(rest) = l.trim().strip_prefix("export ") {
            if let Some((k, v)) = rest.split_once('=') {
                let v = v.trim().trim_matches('"').trim_matches('\'');
                if !v.contains('$') && !v.contains('`') {
                    m.insert(k.trim().to_string(), v.to_string());
                }
            }
        }
    }
    m
}

/// True when a path is read as an `.htaccess`.
pub fn is_htaccess(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == ".htaccess")
}

/// Reads a configuration (the main file; ServerRoot defaults to its directory).
pub fn read(path: &Path) -> Config {
    read_with(path, is_htaccess(path), &[])
}

/// Reads a configuration, as an `.htaccess` or not, with these modules
/// compiled in (names as `apache2 -l` prints them, e.g. `prefork.c`).
pub fn read_with(path: &Path, htaccess: bool, static_modules: &[String]) -> Config {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut builtin: BTreeSet<String> = BUILTIN.iter().map(|s| s.to_string()).collect();
    builtin.extend(static_modules.iter().map(|m| module_id(m)));
    let mut c = Config {
        server_root: dir.clone(),
        env: if htaccess {
            HashMap::new()
        } else {
            read_envvars(&dir)
        },
        htaccess,
        builtin,
        ..Default::default()
    };
    c.read_file(path, &[], None);
    c.finish();
    c
}

/// The modules compiled into the installed httpd (`apache2 -l`, `httpd -l`).
pub fn compiled_in() -> Option<Vec<String>> {
    for tool in ["apache2", "/usr/sbin/apache2", "httpd", "/usr/sbin/httpd"] {
        if let Some(out) = crate::detect::run_tool(tool, &["-l"]) {
            let v: Vec<String> = out
                .lines()
                .map(str::trim)
                .filter(|l| l.ends_with(".c"))
                .map(str::to_string)
                .collect();
            if !v.is_empty() {
                return Some(v);
            }
        }
    }
    None
}

fn is_system_config(path: &Path) -> bool {
    let canon = std::fs::canonicalize(path).unwrap_or_default();
    canon == Path::new("/etc/apache2/apache2.conf")
        || canon == Path::new("/etc/httpd/conf/httpd.conf")
}

fn int(d: &Directive) -> Option<i64> {
    d.args.first().and_then(|a| a.parse().ok())
}

fn first_lower(d: &Directive) -> String {
    d.args
        .first()
        .map(|a| a.to_ascii_lowercase())
        .unwrap_or_default()
}

fn at(d: &Directive) -> (&Path, usize) {
    (d.file.as_path(), d.line)
}

/// Options in each context, merged in order as Apache does (`+X`/`-X`
/// change the set so far, a list without signs replaces it; mixing both is
/// an error Apache refuses to start with); SymLinksIfOwnerMatch left on
/// without FollowSymLinks is flagged at the line that turned it on.
fn options_check(c: &Config, f: &mut Vec<Finding>) {
    let mut state: Vec<(&Vec<String>, BTreeSet<String>, Option<&Directive>)> = Vec::new();
    for d in c.directives.iter().filter(|d| d.name == "options") {
        let signed = d.args.iter().filter(|a| a.starts_with(['+', '-'])).count();
        if signed > 0 && signed < d.args.len() {
            f.push(
                Finding::new(
                    Level::Warn,
                    "parse_error",
                    at(d),
                    format!(
                        "Options {}: either all Options must start with + or -, or no Option may",
                        d.args.join(" ")
                    ),
                )
                .why("Apache refuses to start with this line"),
            );
            continue;
        }
        let k = match state.iter().position(|s| s.0 == &d.ctx) {
            Some(k) => k,
            None => {
                state.push((&d.ctx, ["followsymlinks".to_string()].into(), None));
                state.len() - 1
            }
        };
        let (_, set, enabler) = &mut state[k];
        if signed == 0 {
            set.clear();
        }
        for a in &d.args {
            let name = a.trim_start_matches(['+', '-']).to_ascii_lowercase();
            let names: Vec<String> = match name.as_str() {
                "all" => ["execcgi", "followsymlinks", "includes", "indexes"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                "none" => vec![],
                _ => vec![name],
            };
            if a.starts_with('-') {
                for n in &names {
                    set.remove(n);
                }
            } else {
                if names.iter().any(|n| n == "symlinksifownermatch") {
                    *enabler = Some(d);
                }
                set.extend(names);
            }
        }
    }
    let mut bad = false;
    for (_, set, enabler) in &state {
        // The owner check costs an lstat() per path component even with
        // FollowSymLinks also on: only FollowSymLinks alone skips it.
        if !set.contains("symlinksifownermatch") {
            continue;
        }
        let Some(d) = enabler else {
            continue;
        };
        bad = true;
        let fixed: Vec<String> = d
            .args
            .iter()
            .map(|a| {
                if a.trim_start_matches(['+', '-'])
                    .eq_ignore_ascii_case("SymLinksIfOwnerMatch")
                {
                    let sign = if a.starts_with('+') { "+" } else { "" };
                    format!("{sign}FollowSymLinks")
                } else {
                    a.clone()
                }
            })
            .collect();
        f.push(
            Finding::new(
                Level::Warn,
                "symlinks_if_owner_match",
                at(d),
                format!("Options {}", d.args.join(" ")),
            )
            .why("an extra lstat() of every path component on every request to compare owners")
            .change(format!("Options {}", fixed.join(" "))),
        );
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "symlinks_if_owner_match",
            (Path::new(""), 0),
            "no Options SymLinksIfOwnerMatch".into(),
        ));
    }
}

/// The effective directives: the last of each name in each context.
fn effective<'a>(c: &'a Config, name: &str) -> Vec<&'a Directive> {
    let mut last: Vec<&Directive> = Vec::new();
    for d in c.directives.iter().filter(|d| d.name == name) {
        last.retain(|x| x.ctx != d.ctx);
        last.push(d);
    }
    last
}

/// The directory the configuration loads its modules from: that of an
/// existing `LoadModule` line, else Debian's when the tree has Debian's
/// `mods-enabled` layout, else `modules` (relative to ServerRoot, as on
/// RHEL and in the upstream build).
fn modules_dir(c: &Config) -> String {
    if let Some(dir) = c
        .directives
        .iter()
        .filter(|d| d.name == "loadmodule")
        .filter_map(|d| d.args.get(1))
        .find_map(|p| p.rsplit_once('/').map(|(dir, _)| dir.to_string()))
    {
        return dir;
    }
    if c.files
        .iter()
        .any(|f| f.components().any(|x| x.as_os_str() == "mods-enabled"))
    {
        return "/usr/lib/apache2/modules".into();
    }
    "modules".into()
}

/// The lines that load module `short` (e.g. `expires`), with the path the
/// other modules use; on Debian's layout `a2enmod` first, as a comment line
/// (Apache has no comments after a directive).
fn load_module_hint(c: &Config, short: &str, then: &str) -> String {
    let dir = modules_dir(c);
    let load = format!("LoadModule {short}_module {dir}/mod_{short}.so");
    if dir.starts_with("/usr/lib/apache2/") {
        format!("# Debian: a2enmod {short}, or:\n{load}{then}")
    } else {
        format!("{load}{then}")
    }
}

/// The effective server-wide value (outside any section).
fn global<'a>(c: &'a Config, name: &str) -> Option<&'a Directive> {
    c.directives
        .iter()
        .rev()
        .find(|d| d.name == name && d.ctx.is_empty())
}

/// Reads and checks an Apache configuration.
pub fn analyze(path: &Path, opts: &TuneOptions) -> TuneReport {
    let htaccess = opts.htaccess || is_htaccess(path);
    let statics = match &opts.static_modules {
        Some(v) => v.clone(),
        None if opts.use_tools => compiled_in().unwrap_or_default(),
        None => Vec::new(),
    };
    let mut c = read_with(path, htaccess, &statics);
    let mut tools = Vec::new();
    if opts.use_tools && !htaccess && is_system_config(path) {
        confirm_with_tools(&mut c, &mut tools);
    }
    let mut f: Vec<Finding> = Vec::new();
    for (file, line, msg) in &c.errors {
        f.push(
            Finding::new(Level::Warn, "parse_error", (file, *line), msg.clone())
                .why("Apache would refuse this, or read something other than intended; the rest was still checked"),
        );
    }
    if htaccess {
        return analyze_htaccess(path, &c, f);
    }
    let static_mpm = statics.iter().map(|m| module_id(m)).find_map(|m| {
        m.strip_prefix("mpm_")
            .and_then(|x| x.strip_suffix("_module"))
            .map(str::to_string)
    });
    if let Some(m) = &static_mpm {
        tools.push(format!("MPM {m} is compiled in (`apache2 -l`)"));
    }
    let mpm = c
        .modules
        .iter()
        .find_map(|m| {
            m.strip_prefix("mpm_")
                .and_then(|x| x.strip_suffix("_module"))
        })
        .map(str::to_string)
        .or(static_mpm);
    let threads_per_child = global(&c, "threadsperchild")
        .and_then(int)
        .map(|v| v.max(1) as u64);

    // HostnameLookups
    let hl = effective(&c, "hostnamelookups");
    let mut bad = false;
    for d in &hl {
        let v = first_lower(d);
        if v == "on" || v == "double" {
            bad = true;
            f.push(
                Finding::new(Level::Warn, "hostname_lookups", at(d), format!("HostnameLookups {}", d.args.join(" ")))
                    .why("a DNS lookup for every request's client address, before the log line is written")
                    .change("HostnameLookups Off\n# resolve names later with logresolve"),
            );
        }
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "hostname_lookups",
            (Path::new(""), 0),
            "HostnameLookups Off".into(),
        ));
    }

    // AllowOverride
    let ao = effective(&c, "allowoverride");
    let mut bad = false;
    for d in &ao {
        if first_lower(d) != "none" {
            bad = true;
            let dir = d.ctx.last().cloned().unwrap_or_else(|| "server".into());
            f.push(
                Finding::new(
                    Level::Warn,
                    "allow_override",
                    at(d),
                    format!("AllowOverride {} in <{dir}>", d.args.join(" ")),
                )
                .why("Apache looks for .htaccess in every directory of every requested path, on every request")
                .change("AllowOverride None\n# move the .htaccess rules into this <Directory>"),
            );
        }
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "allow_override",
            (Path::new(""), 0),
            "AllowOverride None everywhere".into(),
        ));
    }

    // Options SymLinksIfOwnerMatch, with +/- merged as Apache merges them.
    options_check(&c, &mut f);

    // KeepAlive
    let mut bad = false;
    for d in effective(&c, "keepalive") {
        if first_lower(d) == "off" {
            bad = true;
            f.push(
                Finding::new(Level::Warn, "keepalive_off", at(d), "KeepAlive Off".into())
                    .why("a new TCP connection (and TLS handshake) for every image, script and stylesheet of a page")
                    .change("KeepAlive On"),
            );
        }
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "keepalive_off",
            (Path::new(""), 0),
            "KeepAlive On (or the default, On)".into(),
        ));
    }

    // Timeout
    let mut bad = false;
    for d in effective(&c, "timeout") {
        if let Some(v) = int(d) {
            if v > 60 {
                bad = true;
                f.push(
                    Finding::new(Level::Warn, "timeout_high", at(d), format!("Timeout {v}"))
                        .why("a slow or stuck client holds a worker (and its memory) this many seconds")
                        .change("Timeout 60"),
                );
            }
        }
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "timeout_high",
            (Path::new(""), 0),
            "Timeout at most 60 s".into(),
        ));
    }

    // KeepAliveTimeout
    let mut bad = false;
    for d in effective(&c, "keepalivetimeout") {
        let v: f64 = d
            .args
            .first()
            .and_then(|a| a.trim_end_matches("ms").parse().ok())
            .unwrap_or(0.0);
        let secs = if d.args.first().is_some_and(|a| a.ends_with("ms")) {
            v / 1000.0
        } else {
            v
        };
        if secs > 15.0 {
            bad = true;
            f.push(
                Finding::new(Level::Warn, "keepalive_timeout_high", at(d), format!("KeepAliveTimeout {}", d.args.join(" ")))
                    .why("an idle keep-alive connection holds a worker this long waiting for the next click (prefork: a whole process)")
                    .change("KeepAliveTimeout 5"),
            );
        }
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "keepalive_timeout_high",
            (Path::new(""), 0),
            "KeepAliveTimeout at most 15 s".into(),
        ));
    }

    // MaxKeepAliveRequests
    let mut bad = false;
    for d in effective(&c, "maxkeepaliverequests") {
        if let Some(v) = int(d) {
            if v > 0 && v < 100 {
                bad = true;
                f.push(
                    Finding::new(Level::Warn, "max_keepalive_requests_low", at(d), format!("MaxKeepAliveRequests {v}"))
                        .why("connections are closed after a few requests, so pages with many resources reconnect")
                        .change("MaxKeepAliveRequests 500"),
                );
            }
        }
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "max_keepalive_requests_low",
            (Path::new(""), 0),
            "MaxKeepAliveRequests 100 or more (or 0, unlimited)".into(),
        ));
    }

    // MaxRequestsPerChild / MaxConnectionsPerChild
    let mut bad = false;
    for name in ["maxconnectionsperchild", "maxrequestsperchild"] {
        for d in effective(&c, name) {
            if let Some(v) = int(d) {
                if v > 0 && v < 1000 {
                    bad = true;
                    f.push(
                        Finding::new(Level::Warn, "max_connections_per_child_low", at(d), format!("{} {v}", d.raw_name))
                            .why("workers exit and are forked again every few hundred connections: fork cost and cold caches")
                            .change(format!("{} 10000\n# 0 = never, unless a module leaks memory", d.raw_name)),
                    );
                }
            }
        }
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "max_connections_per_child_low",
            (Path::new(""), 0),
            "MaxConnectionsPerChild 0 or at least 1000".into(),
        ));
    }

    // EnableSendfile / EnableMMAP
    for (name, code, text, why) in [
        (
            "enablesendfile",
            "sendfile_off",
            "EnableSendfile",
            "static files are copied through user space instead of sent by the kernel",
        ),
        (
            "enablemmap",
            "mmap_off",
            "EnableMMAP",
            "static files are read() into buffers instead of memory-mapped",
        ),
    ] {
        let mut bad = false;
        for d in effective(&c, name) {
            if first_lower(d) == "off" {
                bad = true;
                f.push(
                    Finding::new(Level::Warn, code, at(d), format!("{text} Off"))
                        .why(&format!("{why}; Off is only right for files on NFS or other network filesystems"))
                        .change(format!("{text} On")),
                );
            }
        }
        if !bad {
            if name == "enablesendfile" && global(&c, name).is_none() {
                f.push(
                    Finding::new(
                        Level::Info,
                        "sendfile_default_off",
                        (Path::new(""), 0),
                        "EnableSendfile not set: Apache 2.4's default is Off".into(),
                    )
                    .why(why)
                    .change("EnableSendfile On\n# unless DocumentRoot is on a network filesystem"),
                );
            } else {
                f.push(Finding::new(
                    Level::Ok,
                    code,
                    (Path::new(""), 0),
                    format!("{text} not Off"),
                ));
            }
        }
    }

    // Modules: loaded, and configured.
    let main = (path, 0usize);
    let text_types = "text/html text/plain text/css text/xml application/javascript application/json image/svg+xml";
    let deflate_applied = c.directives.iter().any(|d| {
        let has = |a: &String| a.to_ascii_uppercase().split(';').any(|x| x == "DEFLATE");
        match d.name.as_str() {
            "addoutputfilterbytype" => {
                d.args.first().is_some_and(has)
                    && d.args[1..].iter().any(|t| {
                        let t = t.to_ascii_lowercase();
                        t.starts_with("text/") || t.contains("javascript") || t.contains("json")
                    })
            }
            "setoutputfilter" | "addoutputfilter" => d.args.first().is_some_and(has),
            "filterprovider" => d.args.get(1).is_some_and(has),
            _ => false,
        }
    });
    let filter_line = format!("AddOutputFilterByType DEFLATE {text_types}");
    if c.modules.contains("deflate_module") && deflate_applied {
        f.push(Finding::new(
            Level::Ok,
            "no_compression",
            (Path::new(""), 0),
            "mod_deflate loaded and applied to text types".into(),
        ));
    } else if c.modules.contains("deflate_module") {
        let text = if c.modules.contains("filter_module") {
            filter_line.clone()
        } else {
            load_module_hint(&c, "filter", &format!("\n{filter_line}"))
        };
        f.push(
            Finding::new(
                Level::Warn,
                "no_compression",
                main,
                "mod_deflate is loaded but no filter applies it (no AddOutputFilterByType DEFLATE for text types): nothing is compressed".into(),
            )
            .why("HTML, CSS and JavaScript go out uncompressed: 3 to 5 times the bytes")
            .change(text),
        );
    } else {
        let mut then = String::new();
        if !c.modules.contains("filter_module") {
            then.push_str(&format!(
                "\nLoadModule filter_module {}/mod_filter.so",
                modules_dir(&c)
            ));
        }
        then.push_str(&format!("\n{filter_line}"));
        f.push(
            Finding::new(
                Level::Warn,
                "no_compression",
                main,
                "mod_deflate is not loaded".into(),
            )
            .why("HTML, CSS and JavaScript go out uncompressed: 3 to 5 times the bytes")
            .change(load_module_hint(&c, "deflate", &then)),
        );
    }
    let expires_lines = "ExpiresActive On\nExpiresByType image/png \"access plus 7 days\"\nExpiresByType image/jpeg \"access plus 7 days\"\nExpiresByType image/svg+xml \"access plus 7 days\"\nExpiresByType text/css \"access plus 7 days\"\nExpiresByType application/javascript \"access plus 7 days\"";
    let covered = c.directives.iter().any(|e| {
        let static_type = e.name == "expiresdefault"
            || e.name == "expiresbytype"
                && e.args.first().is_some_and(|t| {
                    let t = t.to_ascii_lowercase();
                    t.starts_with("image/") || t == "text/css" || t.contains("javascript")
                });
        static_type
            && c.directives.iter().any(|a| {
                a.name == "expiresactive" && first_lower(a) == "on" && e.ctx.starts_with(&a.ctx)
            })
    });
    if c.modules.contains("expires_module") && covered {
        f.push(Finding::new(
            Level::Ok,
            "no_expires",
            (Path::new(""), 0),
            "mod_expires loaded, ExpiresActive On for static types".into(),
        ));
    } else if c.modules.contains("expires_module") {
        f.push(
            Finding::new(Level::Info, "no_expires", main, "mod_expires is loaded but no ExpiresActive On covers an ExpiresByType for images, CSS or JavaScript".into())
                .why("without Expires/Cache-Control max-age, browsers revalidate every image and stylesheet on each page")
                .change(expires_lines),
        );
    } else {
        f.push(
            Finding::new(Level::Info, "no_expires", main, "mod_expires is not loaded".into())
                .why("without Expires/Cache-Control max-age, browsers revalidate every image and stylesheet on each page")
                .change(load_module_hint(&c, "expires", &format!("\n{expires_lines}"))),
        );
    }
    // What .htaccess files may use: AllowOverride in effect anywhere.
    let overrides: BTreeSet<String> = effective(&c, "allowoverride")
        .iter()
        .flat_map(|d| d.args.iter().map(|a| a.to_ascii_lowercase()))
        .flat_map(|a| {
            a.split('=')
                .next()
                .unwrap_or("")
                .split(',')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|a| a != "none")
        .collect();
    let allowed_by = |kinds: &[&str]| -> bool {
        overrides.contains("all") || kinds.iter().any(|k| overrides.contains(*k))
    };
    // Modules loaded that nothing uses.
    let uses = |pred: &dyn Fn(&Directive) -> bool| c.directives.iter().any(pred);
    type Uses<'a> = &'a dyn Fn(&Directive) -> bool;
    let checks: [(&str, Uses); 6] = [
        ("cgi_module", &|d: &Directive| {
            d.name == "scriptalias"
                || d.name == "scriptaliasmatch"
                || d.args
                    .iter()
                    .any(|a| a.to_ascii_lowercase().contains("execcgi") || a == "cgi-script")
        }),
        ("cgid_module", &|d: &Directive| {
            d.name == "scriptalias"
                || d.name == "scriptaliasmatch"
                || d.args
                    .iter()
                    .any(|a| a.to_ascii_lowercase().contains("execcgi") || a == "cgi-script")
        }),
        ("userdir_module", &|d: &Directive| {
            d.name == "userdir"
                && !d
                    .args
                    .first()
                    .is_some_and(|a| a.eq_ignore_ascii_case("disabled"))
        }),
        ("proxy_module", &|d: &Directive| {
            d.name.starts_with("proxypass")
                || d.name == "proxyrequests"
                || d.args.iter().any(|a| a.starts_with("proxy:"))
        }),
        ("rewrite_module", &|d: &Directive| {
            d.name == "rewriterule" || d.name == "rewriteengine" && first_lower(d) == "on"
        }),
        ("ssl_module", &|d: &Directive| {
            d.name == "sslengine" && first_lower(d) == "on"
        }),
    ];
    for (m, pred) in checks {
        if c.modules.contains(m) && !uses(pred) {
            // .htaccess files may use it where AllowOverride lets them.
            let via: &[&str] = match m {
                "rewrite_module" | "proxy_module" => &["fileinfo"],
                "cgi_module" | "cgid_module" => &["options", "fileinfo"],
                _ => &[],
            };
            if !via.is_empty() && allowed_by(via) {
                f.push(Finding::new(
                    Level::Ok,
                    "module_unused",
                    (Path::new(""), 0),
                    format!("{m}: no directive in the config uses it, but AllowOverride lets .htaccess files use it"),
                ));
                continue;
            }
            let line = c
                .directives
                .iter()
                .find(|d| d.name == "loadmodule" && d.args.first().is_some_and(|a| a == m));
            let loc = line.map(at).unwrap_or(main);
            let short = m.trim_end_matches("_module");
            let change = match line {
                Some(d) => format!(
                    "# Debian: a2dismod {short}; or comment the line out:\n#{}",
                    d.source
                ),
                None => format!("# a2dismod {short}    (or remove the LoadModule line)"),
            };
            f.push(
                Finding::new(Level::Info, "module_unused", loc, format!("{m} is loaded but nothing in the config uses it, and no AllowOverride lets .htaccess files use it"))
                    .why("every worker carries its code and per-request hooks (prefork: in every process)")
                    .change(change),
            );
        }
    }

    // The MPM's own limits.
    mpm_checks(&c, mpm.as_deref(), &mut f);

    // MaxRequestWorkers against memory.
    let mrw = global(&c, "maxrequestworkers").or_else(|| global(&c, "maxclients"));
    match (opts.budget_kib, opts.worker_private_kib, mrw) {
        (Some(budget), Some(per), Some(d)) => {
            if let Some(v) = int(d) {
                let threaded = matches!(mpm.as_deref(), Some("worker") | Some("event"));
                let tpc = threads_per_child.unwrap_or(25) as i64;
                let processes = if threaded { (v + tpc - 1) / tpc } else { v };
                let need = processes.max(0) as u64 * per;
                // The one arithmetic `redline size` uses (budget: what the workers may use).
                let allowed = crate::size::apache_workers(budget, 0, per, threaded.then_some(tpc as u64))
                    .max_request_workers;
                if need > budget {
                    f.push(
                        Finding::new(Level::Warn, "max_request_workers_over_memory", at(d), format!(
                            "{} {v}: {processes} processes × {} KiB = {} KiB, above the budget of {} KiB",
                            d.raw_name, per, need, budget
                        ))
                        .why("at full load the machine swaps, and every request waits for the disk (the Italian article's test 5)")
                        .change(format!("{} {allowed}\n# budget {budget} KiB / {per} KiB per process", d.raw_name)),
                    );
                } else {
                    f.push(Finding::new(Level::Ok, "max_request_workers_over_memory", at(d), format!(
                        "{} {v} fits the memory budget ({need} of {budget} KiB)", d.raw_name
                    )));
                }
            }
        }
        (Some(_), None, _) => f.push(Finding::new(
            Level::Info,
            "max_request_workers_unchecked",
            (Path::new(""), 0),
            "MaxRequestWorkers not checked against memory: add --watch apache2 (or httpd) to measure a worker".into(),
        )),
        _ => {}
    }

    attach_fixes(&c, path, &mut f);
    TuneReport {
        server: Server::Apache,
        config: path.display().to_string(),
        files: c.files.iter().map(|p| p.display().to_string()).collect(),
        modules: c.modules.iter().cloned().collect(),
        mpm,
        threads_per_child,
        tools,
        findings: f,
    }
}

/// Gives each change without a place one: a finding at a directive
/// replaces that directive (in its section); one about something missing
/// goes server-wide, a LoadModule after the last server-level LoadModule
/// line, anything else after the main file's last line.
fn attach_fixes(c: &Config, path: &Path, f: &mut [Finding]) {
    for x in f.iter_mut() {
        if x.level == Level::Ok || x.change.is_empty() || x.fix.is_some() {
            continue;
        }
        let d = c
            .directives
            .iter()
            .find(|d| d.line == x.line && x.line > 0 && d.file.display().to_string() == x.file);
        let fix = match d {
            Some(d) => {
                let ctx = c.describe(&d.path);
                x.context = ctx.clone();
                Fix::replace(&d.file, &ctx, (d.line, d.end_line), &d.source, &x.change)
            }
            None if c.htaccess => {
                Fix::insert_after(path, ".htaccess, top level", c.main_lines, &x.change)
            }
            None if x.change.contains("LoadModule ") => {
                match c
                    .directives
                    .iter()
                    .rev()
                    .find(|d| d.name == "loadmodule" && d.path.is_empty())
                {
                    Some(l) => Fix::insert_after(&l.file, "", l.end_line, &x.change),
                    None => Fix::insert_after(path, "", 0, &x.change),
                }
            }
            None => Fix::insert_after(path, "", c.main_lines, &x.change),
        };
        x.fix = Some(fix);
    }
}

/// The MPM's limits as Apache applies them at start: MaxRequestWorkers
/// above ServerLimit (× ThreadsPerChild) is lowered, ThreadsPerChild above
/// ThreadLimit is lowered, spare servers/threads that cannot all exist.
/// Defaults from the MPM docs (prefork: ServerLimit 256, StartServers 5,
/// MinSpareServers 5, MaxSpareServers 10; worker/event: ServerLimit 16,
/// ThreadLimit 64, ThreadsPerChild 25, MinSpareThreads 75, MaxSpareThreads 250).
fn mpm_checks(c: &Config, mpm: Option<&str>, f: &mut Vec<Finding>) {
    let Some(mpm) = mpm else {
        return;
    };
    let g = |n: &str| global(c, n);
    let v = |n: &str| g(n).and_then(int);
    let threaded = mpm == "worker" || mpm == "event";
    let Some(mrw_d) = g("maxrequestworkers").or_else(|| g("maxclients")) else {
        return;
    };
    let Some(mrw) = int(mrw_d) else {
        return;
    };
    let ctx = |d: &Directive| c.describe(&d.path);
    // Replace `d` with `text`, or put `text` after `anchor` when `d` is not set.
    let place = |d: Option<&Directive>, text: &str| -> Fix {
        match d {
            Some(d) => Fix::replace(&d.file, &ctx(d), (d.line, d.end_line), &d.source, text),
            None => Fix::insert_after(&mrw_d.file, &ctx(mrw_d), mrw_d.end_line, text),
        }
    };
    fn pick<'a>(d: Option<&'a Directive>, or: &'a Directive) -> &'a Directive {
        d.unwrap_or(or)
    }
    let at_or = |d| pick(d, mrw_d);
    let n0 = f.len();
    let sl_d = g("serverlimit");
    if threaded {
        let server_limit = v("serverlimit").unwrap_or(16);
        let thread_limit = v("threadlimit").unwrap_or(64);
        let tpc_d = g("threadsperchild");
        let tpc = v("threadsperchild").unwrap_or(25).max(1);
        if tpc > thread_limit {
            f.push(
                Finding::new(Level::Warn, "threads_per_child_over_limit", at(at_or(tpc_d)), format!("ThreadsPerChild {tpc} is above ThreadLimit {thread_limit}: Apache lowers it to {thread_limit}"))
                    .why("the processes run fewer threads than configured, so MaxRequestWorkers cannot be reached")
                    .context(ctx(at_or(tpc_d)))
                    .fix(place(tpc_d, &format!("ThreadLimit {tpc}\nThreadsPerChild {tpc}"))),
            );
        }
        let tpc_eff = tpc.min(thread_limit).max(1);
        let cap = server_limit * tpc_eff;
        if mrw > cap {
            let need = (mrw + tpc_eff - 1) / tpc_eff;
            let fix = match sl_d {
                Some(d) => place(Some(d), &format!("ServerLimit {need}")),
                None => place(
                    Some(mrw_d),
                    &format!("ServerLimit {need}\n{} {mrw}", mrw_d.raw_name),
                ),
            };
            f.push(
                Finding::new(Level::Warn, "max_request_workers_over_limit", at(mrw_d), format!(
                    "{} {mrw} is above ServerLimit {server_limit} × ThreadsPerChild {tpc_eff} = {cap}: Apache lowers it to {cap}",
                    mrw_d.raw_name
                ))
                .why("the server stops at fewer simultaneous requests than configured; ServerLimit must allow the processes")
                .context(ctx(mrw_d))
                .fix(fix),
            );
        } else if mrw % tpc_eff != 0 {
            let down = mrw - mrw % tpc_eff;
            f.push(
                Finding::new(Level::Info, "max_request_workers_rounded", at(mrw_d), format!(
                    "{} {mrw} is not a multiple of ThreadsPerChild {tpc_eff}: Apache rounds it down to {down}",
                    mrw_d.raw_name
                ))
                .why("the limit in effect is not the one written")
                .context(ctx(mrw_d))
                .fix(place(Some(mrw_d), &format!("{} {down}", mrw_d.raw_name))),
            );
        }
        let limit = mrw.min(cap);
        let min_d = g("minsparethreads");
        let max_d = g("maxsparethreads");
        let min_spare = v("minsparethreads").unwrap_or(75);
        let max_spare = v("maxsparethreads").unwrap_or(250);
        if min_spare > limit {
            let want = (limit / 4).max(tpc_eff).min(limit);
            f.push(
                Finding::new(Level::Warn, "spare_threads", at(at_or(min_d)), format!("MinSpareThreads {min_spare} is above MaxRequestWorkers {limit}"))
                    .why("Apache keeps trying to start idle threads it may never have: under load every thread is busy, so it forks continually")
                    .context(ctx(at_or(min_d)))
                    .fix(place(min_d, &format!("MinSpareThreads {want}"))),
            );
        } else if max_spare < min_spare + tpc_eff {
            f.push(
                Finding::new(Level::Info, "spare_threads", at(at_or(max_d)), format!("MaxSpareThreads {max_spare} is below MinSpareThreads {min_spare} + ThreadsPerChild {tpc_eff}: Apache raises it to {}", min_spare + tpc_eff))
                    .why("a process is stopped as soon as it is idle and started again at the next burst")
                    .context(ctx(at_or(max_d)))
                    .fix(place(max_d, &format!("MaxSpareThreads {}", min_spare + tpc_eff))),
            );
        } else if max_spare > limit && max_d.is_some() {
            f.push(
                Finding::new(Level::Info, "spare_threads", at(at_or(max_d)), format!("MaxSpareThreads {max_spare} is above MaxRequestWorkers {limit}: idle processes are never stopped"))
                    .why("memory stays taken after a burst")
                    .context(ctx(at_or(max_d)))
                    .fix(place(max_d, &format!("MaxSpareThreads {}", limit.max(min_spare + tpc_eff)))),
            );
        }
    } else {
        let server_limit = v("serverlimit").unwrap_or(256);
        if mrw > server_limit {
            let fix = match sl_d {
                Some(d) => place(Some(d), &format!("ServerLimit {mrw}")),
                None => place(
                    Some(mrw_d),
                    &format!("ServerLimit {mrw}\n{} {mrw}", mrw_d.raw_name),
                ),
            };
            f.push(
                Finding::new(Level::Warn, "max_request_workers_over_limit", at(mrw_d), format!(
                    "{} {mrw} is above ServerLimit {server_limit}: Apache lowers it to {server_limit}",
                    mrw_d.raw_name
                ))
                .why("the server stops at fewer simultaneous requests than configured; ServerLimit must allow the processes")
                .context(ctx(mrw_d))
                .fix(fix),
            );
        }
        let limit = mrw.min(server_limit);
        let min_d = g("minspareservers");
        let max_d = g("maxspareservers");
        let start_d = g("startservers");
        let min_spare = v("minspareservers").unwrap_or(5);
        let max_spare = v("maxspareservers").unwrap_or(10);
        if max_spare <= min_spare {
            f.push(
                Finding::new(Level::Info, "spare_servers", at(at_or(max_d)), format!("MaxSpareServers {max_spare} is not above MinSpareServers {min_spare}: Apache sets it to {}", min_spare + 1))
                    .why("processes are killed and forked again as load moves by one")
                    .context(ctx(at_or(max_d)))
                    .fix(place(max_d, &format!("MaxSpareServers {}", min_spare * 2))),
            );
        } else if min_spare > limit || max_spare > limit {
            let (d, name, val) = if min_spare > limit {
                (min_d, "MinSpareServers", min_spare)
            } else {
                (max_d, "MaxSpareServers", max_spare)
            };
            let want = if name == "MinSpareServers" {
                (limit / 4).max(1)
            } else {
                limit
            };
            f.push(
                Finding::new(
                    Level::Warn,
                    "spare_servers",
                    at(at_or(d)),
                    format!("{name} {val} is above MaxRequestWorkers {limit}"),
                )
                .why("Apache cannot keep that many idle processes: under load it forks continually")
                .context(ctx(at_or(d)))
                .fix(place(d, &format!("{name} {want}"))),
            );
        }
        if let Some(start) = v("startservers").filter(|s| *s > limit) {
            f.push(
                Finding::new(
                    Level::Info,
                    "spare_servers",
                    at(at_or(start_d)),
                    format!("StartServers {start} is above MaxRequestWorkers {limit}"),
                )
                .why("Apache starts at most MaxRequestWorkers processes")
                .context(ctx(at_or(start_d)))
                .fix(place(start_d, &format!("StartServers {}", limit.min(5)))),
            );
        }
    }
    // ServerLimit far above what MaxRequestWorkers needs: scoreboard memory
    // for processes that can never start (the MPM docs' warning).
    if let (Some(d), Some(sl)) = (sl_d, v("serverlimit")) {
        let tpc = if threaded {
            v("threadsperchild")
                .unwrap_or(25)
                .min(v("threadlimit").unwrap_or(64))
                .max(1)
        } else {
            1
        };
        let need = (mrw + tpc - 1) / tpc;
        let default = if threaded { 16 } else { 256 };
        if sl > (2 * need).max(default) {
            f.push(
                Finding::new(Level::Info, "server_limit_high", at(d), format!("ServerLimit {sl}, but {} {mrw} needs {need}", mrw_d.raw_name))
                    .why("Apache allocates shared scoreboard memory for every process ServerLimit allows, used or not")
                    .context(ctx(d))
                    .fix(place(Some(d), &format!("ServerLimit {}", need.max(default)))),
            );
        }
    }
    if f.len() == n0 {
        f.push(Finding::new(
            Level::Ok,
            "mpm_limits",
            (Path::new(""), 0),
            format!(
                "MPM {mpm}: MaxRequestWorkers {mrw} within ServerLimit, spare settings consistent"
            ),
        ));
    }
}

/// An `.htaccess`: only what an `.htaccess` may say. No server-wide advice
/// (Timeout, KeepAlive, LoadModule cannot go there), and what it adds is
/// wrapped in `<IfModule>` so it never breaks a server without the module.
fn analyze_htaccess(path: &Path, c: &Config, mut f: Vec<Finding>) -> TuneReport {
    options_check(c, &mut f);
    let has = |n: &str| c.directives.iter().any(|d| d.name == n);
    if !has("expiresactive") && !has("header") {
        f.push(
            Finding::new(Level::Info, "no_expires", (path, 0), "no ExpiresActive (or Header) in this .htaccess".into())
                .why("without Expires/Cache-Control max-age, browsers revalidate every image and stylesheet on each page (needs AllowOverride Indexes; fine to skip when the server config sets it)")
                .change("<IfModule mod_expires.c>\nExpiresActive On\nExpiresByType image/png \"access plus 7 days\"\nExpiresByType image/jpeg \"access plus 7 days\"\nExpiresByType text/css \"access plus 7 days\"\nExpiresByType application/javascript \"access plus 7 days\"\n</IfModule>"),
        );
    }
    attach_fixes(c, path, &mut f);
    TuneReport {
        server: Server::Apache,
        config: path.display().to_string(),
        files: c.files.iter().map(|p| p.display().to_string()).collect(),
        modules: vec![],
        mpm: None,
        threads_per_child: None,
        tools: vec!["read as an .htaccess: only directives allowed there; <IfModule> blocks read as if the module is loaded".into()],
        findings: f,
    }
}

/// Uses `apache2ctl -t -D DUMP_INCLUDES` and `-M` to confirm files and modules.
fn confirm_with_tools(c: &mut Config, tools: &mut Vec<String>) {
    use crate::detect::run_tool;
    for tool in ["apache2ctl", "apachectl"] {
        let Some(inc) = run_tool(tool, &["-t", "-D", "DUMP_INCLUDES"]) else {
            continue;
        };
        let listed: BTreeSet<String> = inc
            .lines()
            .filter_map(|l| l.trim().split_once(") ").map(|(_, p)| p.trim().to_string()))
            .collect();
        let mine: BTreeSet<String> = c.files.iter().map(|p| p.display().to_string()).collect();
        if !listed.is_empty() {
            let missing: Vec<&String> = listed.difference(&mine).collect();
            if missing.is_empty() {
                tools.push(format!(
                    "`{tool} -t -D DUMP_INCLUDES` lists the same {} files",
                    listed.len()
                ));
            } else {
                tools.push(format!(
                    "`{tool} -t -D DUMP_INCLUDES` also reads: {}",
                    missing
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        if let Some(m) = run_tool(tool, &["-M"]) {
            let mods: BTreeSet<String> = m
                .lines()
                .filter_map(|l| {
                    let t = l.trim();
                    let (name, kind) = t.split_once(' ')?;
                    (kind.contains("static") || kind.contains("shared")).then(|| name.to_string())
                })
                .collect();
            if !mods.is_empty() {
                tools.push(format!("`{tool} -M`: {} modules loaded", mods.len()));
                c.modules.extend(mods);
            }
        }
        return;
    }
}
