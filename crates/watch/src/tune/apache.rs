//! Apache httpd configuration: a reader that follows Include/IncludeOptional
//! (globs; directories), evaluates IfModule/IfDefine (nested), Define and
//! `${VAR}` (Debian's envvars too), tracks LoadModule, and keeps every active
//! directive with its file, line and section; then the checks.

use super::{resolve, split_args, Finding, Level, Server, TuneOptions, TuneReport};
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
    /// Enclosing context sections, e.g. `directory /var/www/`.
    pub ctx: Vec<String>,
}

/// What reading the configuration produced.
#[derive(Debug, Default)]
pub struct Config {
    /// Active directives in order.
    pub directives: Vec<Directive>,
    /// Modules loaded (ids like `deflate_module`).
    pub modules: BTreeSet<String>,
    /// Files read in order.
    pub files: Vec<PathBuf>,
    /// Problems: (file, line, message).
    pub errors: Vec<(PathBuf, usize, String)>,
    defines: HashMap<String, String>,
    env: HashMap<String, String>,
    server_root: PathBuf,
    depth: usize,
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

/// `mod_deflate.c` → `deflate_module`; `deflate_module` stays.
pub fn module_id(s: &str) -> String {
    let s = s.trim();
    if let Some(x) = s.strip_prefix("mod_").and_then(|x| x.strip_suffix(".c")) {
        format!("{x}_module")
    } else {
        s.to_string()
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
                self.modules.contains(&id) || BUILTIN.contains(&id.as_str())
            }
            "ifdefine" => self.defines.contains_key(a),
            "iffile" => resolve(&self.server_root, a).exists(),
            _ => true,
        };
        v != neg
    }

    fn read_file(&mut self, path: &Path, ctx: &[String], from: Option<(&Path, usize)>) {
        self.depth += 1;
        if self.depth > 32 {
            let (f, l) = from.map(|(f, l)| (f.to_path_buf(), l)).unwrap_or_default();
            self.errors.push((
                f,
                l,
                format!("includes nested too deep at {}", path.display()),
            ));
            self.depth -= 1;
            return;
        }
        let text = match std::fs::read(path) {
            Ok(b) => String::from_utf8_lossy(&b).to_string(),
            Err(e) => {
                let (f, l) = from.map(|(f, l)| (f.to_path_buf(), l)).unwrap_or_default();
                self.errors
                    .push((f, l, format!("cannot read {}: {e}", path.display())));
                self.depth -= 1;
                return;
            }
        };
        self.files.push(path.to_path_buf());
        self.parse_text(path, &text, ctx);
        self.depth -= 1;
    }

    fn parse_text(&mut self, path: &Path, text: &str, outer: &[String]) {
        // (section name, active, context label, line)
        let mut stack: Vec<(String, bool, Option<String>, usize)> = Vec::new();
        let mut lines = text.lines().enumerate();
        while let Some((i, l)) = lines.next() {
            let lineno = i + 1;
            let mut logical = l.trim_end().to_string();
            while logical.ends_with('\\') {
                logical.pop();
                match lines.next() {
                    Some((_, n)) => {
                        logical.push(' ');
                        logical.push_str(n.trim());
                    }
                    None => break,
                }
            }
            let t = logical.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let active = stack.iter().all(|s| s.1);
            if let Some(close) = t.strip_prefix("</") {
                let name = close.trim_end_matches('>').trim().to_ascii_lowercase();
                match stack.last() {
                    Some(top) if top.0 == name => {
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
                let on = !active || self.cond(&name, &arg);
                let label = CONTEXTS
                    .contains(&name.as_str())
                    .then(|| format!("{name} {arg}"));
                stack.push((name, on, label, lineno));
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
            let mut ctx: Vec<String> = outer.to_vec();
            ctx.extend(stack.iter().filter_map(|s| s.2.clone()));
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
                "include" | "includeoptional" => {
                    let optional = name == "includeoptional";
                    for a in &args {
                        self.include(a, optional, &ctx, path, lineno);
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
                ctx,
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

    fn include(&mut self, pat: &str, optional: bool, ctx: &[String], from: &Path, line: usize) {
        let p = resolve(&self.server_root, pat);
        let mut files = Vec::new();
        let wild = glob::has_wildcard(pat);
        let found = if wild {
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
            self.read_file(&f, ctx, Some((from, line)));
        }
    }
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
    let Ok(t) = std::fs::read_to_string(dir.join("envvars")) else {
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

/// Reads a configuration (the main file; ServerRoot defaults to its directory).
pub fn read(path: &Path) -> Config {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut c = Config {
        server_root: dir.clone(),
        env: read_envvars(&dir),
        ..Default::default()
    };
    c.read_file(path, &[], None);
    c
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
    let mut c = read(path);
    let mut tools = Vec::new();
    if opts.use_tools && is_system_config(path) {
        confirm_with_tools(&mut c, &mut tools);
    }
    let mut f: Vec<Finding> = Vec::new();
    for (file, line, msg) in &c.errors {
        f.push(
            Finding::new(Level::Warn, "parse_error", (file, *line), msg.clone())
                .why("Apache would refuse this, or read something other than intended; the rest was still checked"),
        );
    }
    let mpm = c
        .modules
        .iter()
        .find_map(|m| {
            m.strip_prefix("mpm_")
                .and_then(|x| x.strip_suffix("_module"))
        })
        .map(str::to_string);
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

    // Options SymLinksIfOwnerMatch
    let mut bad = false;
    for d in effective(&c, "options") {
        if d.args.iter().any(|a| {
            a.trim_start_matches(['+', '-'])
                .eq_ignore_ascii_case("SymLinksIfOwnerMatch")
                && !a.starts_with('-')
        }) {
            bad = true;
            let fixed: Vec<String> = d
                .args
                .iter()
                .map(|a| {
                    if a.trim_start_matches(['+', '-'])
                        .eq_ignore_ascii_case("SymLinksIfOwnerMatch")
                    {
                        a.replace("SymLinksIfOwnerMatch", "FollowSymLinks")
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
    }
    if !bad {
        f.push(Finding::new(
            Level::Ok,
            "symlinks_if_owner_match",
            (Path::new(""), 0),
            "no Options SymLinksIfOwnerMatch".into(),
        ));
    }

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

    // Modules
    let main = (path, 0usize);
    if c.modules.contains("deflate_module") {
        f.push(Finding::new(
            Level::Ok,
            "no_compression",
            (Path::new(""), 0),
            "mod_deflate loaded".into(),
        ));
    } else {
        f.push(
            Finding::new(
                Level::Warn,
                "no_compression",
                main,
                "mod_deflate is not loaded".into(),
            )
            .why("HTML, CSS and JavaScript go out uncompressed: 3 to 5 times the bytes")
            .change(load_module_hint(&c, "deflate", "")),
        );
    }
    if c.modules.contains("expires_module") {
        f.push(Finding::new(
            Level::Ok,
            "no_expires",
            (Path::new(""), 0),
            "mod_expires loaded".into(),
        ));
    } else {
        f.push(
            Finding::new(Level::Info, "no_expires", main, "mod_expires is not loaded".into())
                .why("without Expires/Cache-Control max-age, browsers revalidate every image and stylesheet on each page")
                .change(load_module_hint(&c, "expires", "\nExpiresActive On")),
        );
    }
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
            let line = c
                .directives
                .iter()
                .find(|d| d.name == "loadmodule" && d.args.first().is_some_and(|a| a == m));
            let loc = line.map(at).unwrap_or(main);
            let short = m.trim_end_matches("_module");
            f.push(
                Finding::new(Level::Info, "module_unused", loc, format!("{m} is loaded but nothing in the config uses it"))
                    .why("every worker carries its code and per-request hooks (prefork: in every process)")
                    .change(format!("# a2dismod {short}    (or remove the LoadModule line)")),
            );
        }
    }

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
