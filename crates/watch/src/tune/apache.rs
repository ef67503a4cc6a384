//! Apache httpd configuration, read as the core docs describe it: one
//! directive per line (`\` continues it), `#` comments only at a line's
//! start; Include (an error when a path or wildcard matches nothing, as
//! Apache refuses to start then) and IncludeOptional (silent), with globs and
//! directories, relative to ServerRoot (when the tree sets none, the
//! compiled-in one Apache itself uses: `apache2 -V`'s HTTPD_ROOT, Debian's
//! `/etc/apache2` without the binary or under `--no-tools`; never the main
//! file's folder, which Apache does not look at), an include loop reported once; `<IfModule>` by either name
//! (`mod_x.c` or `x_module`, `prefork.c` for a static MPM) against LoadModule
//! as read plus the modules compiled in (`apache2 -l`); `<IfDefine>`,
//! `Define`, `${VAR}` (Debian's `envvars` too); context sections
//! (`<VirtualHost>` keyed by address and ServerName, so name-based hosts on
//! one address stay apart; `<Directory>`, `<Location>`, `<Files>` ...).
//! An `.htaccess` (by name, or `--htaccess`) is read as one: sections and
//! directives not allowed there are errors (Apache answers 500).
//! Then the checks.

use super::{
    read_config, resolve, split_args, Finding, Fix, FixAction, Level, Server, TuneOptions,
    TuneReport,
};
use crate::glob;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

mod checks;
mod mpm;
mod read;
pub use checks::analyze;
use checks::{at, attach_fixes, global, int, options_check};
use mpm::mpm_checks;
pub use read::{compiled_in, is_htaccess, read, read_rooted, read_with};

/// The ServerRoot of Debian's and Ubuntu's build (`apache2 -V`: `HTTPD_ROOT`),
/// used when the binary cannot be asked.
pub const DEBIAN_SERVER_ROOT: &str = "/etc/apache2";

thread_local! {
    static ROOT_OVERRIDE: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` reading Apache configurations as `apache2 -d ROOT` would in
/// this thread: ROOT is the ServerRoot where a tree sets none (a tree's own
/// `ServerRoot` still wins, as in Apache). The config test of
/// [`super::servertest`] gets the same `-d`.
pub fn with_server_root<T>(root: &Path, f: impl FnOnce() -> T) -> T {
    let old = ROOT_OVERRIDE.with(|r| r.replace(Some(root.to_path_buf())));
    let out = f();
    ROOT_OVERRIDE.with(|r| *r.borrow_mut() = old);
    out
}

/// The `-d ROOT` given by [`with_server_root`] in this thread, if any.
pub fn server_root_override() -> Option<PathBuf> {
    ROOT_OVERRIDE.with(|r| r.borrow().clone())
}

/// The ServerRoot Apache uses when the configuration sets none: the
/// [`with_server_root`] override, else (when `ask`) the installed binary's
/// compiled-in `HTTPD_ROOT` (`apache2 -V`, asked once, with an empty config
/// so that nothing of the system's is read), else [`DEBIAN_SERVER_ROOT`].
pub fn default_server_root(ask: bool) -> PathBuf {
    if let Some(r) = server_root_override() {
        return r;
    }
    static ASKED: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let asked = ask
        .then(|| {
            ASKED.get_or_init(|| {
                let bin = super::servertest::binary(Server::Apache)?;
                let out = std::process::Command::new(bin)
                    .args(["-V", "-f", "/dev/null"])
                    .stdin(std::process::Stdio::null())
                    .output()
                    .ok()?;
                httpd_root(&String::from_utf8_lossy(&out.stdout))
            })
        })
        .and_then(Clone::clone);
    asked.unwrap_or_else(|| PathBuf::from(DEBIAN_SERVER_ROOT))
}

/// `-D HTTPD_ROOT="/etc/apache2"` in `apache2 -V` output.
pub fn httpd_root(v: &str) -> Option<PathBuf> {
    v.lines()
        .find_map(|l| l.trim().strip_prefix("-D HTTPD_ROOT="))
        .map(|r| PathBuf::from(r.trim().trim_matches('"')))
        .filter(|p| p.is_absolute())
}

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
    /// The ServerRoot relative paths are read from: the tree's own, else
    /// the compiled-in one.
    pub server_root: PathBuf,
    /// True when the tree sets ServerRoot itself.
    pub server_root_set: bool,
    defines: HashMap<String, String>,
    env: HashMap<String, String>,
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
