//! Reading an Apache configuration into a [`Config`]: lines and
//! continuations, Include/IncludeOptional with globs, `<IfModule>`,
//! `<IfDefine>`, `Define` and `${VAR}`, context sections, `.htaccess` rules.

use super::*;

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
                        self.server_root_set = true;
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
pub(super) fn section_name(kind: &str) -> String {
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
pub(super) fn unmatched_component(p: &Path) -> Option<String> {
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

pub(super) fn collect_dir(d: &Path, out: &mut Vec<PathBuf>, depth: usize) {
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
pub(super) fn read_envvars(dir: &Path) -> HashMap<String, String> {
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

/// Reads a configuration (the main file; without a ServerRoot in the tree,
/// relative paths are read from the installed httpd's compiled-in one, as
/// Apache reads them).
pub fn read(path: &Path) -> Config {
    read_rooted(path, is_htaccess(path), &[], &default_server_root(true))
}

/// Reads a configuration, as an `.htaccess` or not, with these modules
/// compiled in (names as `apache2 -l` prints them, e.g. `prefork.c`);
/// without a ServerRoot in the tree, from [`default_server_root`]`(false)`
/// (Debian's `/etc/apache2` unless [`with_server_root`] says otherwise).
pub fn read_with(path: &Path, htaccess: bool, static_modules: &[String]) -> Config {
    read_rooted(path, htaccess, static_modules, &default_server_root(false))
}

/// Reads a configuration with `root` as the ServerRoot until the tree sets
/// one (Apache's `-d ROOT`).
pub fn read_rooted(path: &Path, htaccess: bool, static_modules: &[String], root: &Path) -> Config {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut builtin: BTreeSet<String> = BUILTIN.iter().map(|s| s.to_string()).collect();
    builtin.extend(static_modules.iter().map(|m| module_id(m)));
    let mut c = Config {
        server_root: root.to_path_buf(),
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
