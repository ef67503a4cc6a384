//! nginx configuration: statements ending in `;`, blocks in `{}`, `#`
//! comments, quotes; `include` with globs relative to the main file's
//! directory; or the output of `nginx -T` (files marked `# configuration file
//! PATH:`), read as those files.

use super::{resolve, split_args, Finding, Level, Server, TuneOptions, TuneReport};
use crate::glob;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One directive with its block path (e.g. `http server location`).
#[derive(Debug, Clone)]
pub struct Stmt {
    /// Name.
    pub name: String,
    /// Arguments.
    pub args: Vec<String>,
    /// File.
    pub file: PathBuf,
    /// Line.
    pub line: usize,
    /// Enclosing blocks (names).
    pub ctx: Vec<String>,
}

#[derive(Default)]
struct Reader {
    stmts: Vec<Stmt>,
    files: Vec<PathBuf>,
    errors: Vec<(PathBuf, usize, String)>,
    /// `nginx -T` output split into files.
    dumped: Option<BTreeMap<PathBuf, String>>,
    base: PathBuf,
    depth: usize,
}

impl Reader {
    fn text_of(&self, p: &Path) -> Option<String> {
        match &self.dumped {
            Some(m) => m.get(p).cloned(),
            None => std::fs::read(p)
                .ok()
                .map(|b| String::from_utf8_lossy(&b).to_string()),
        }
    }

    fn expand(&self, pat: &Path) -> Vec<PathBuf> {
        match &self.dumped {
            Some(m) => {
                let ps = pat.to_string_lossy().to_string();
                m.keys()
                    .filter(|k| {
                        let ks = k.to_string_lossy();
                        let (pd, pf) = ps.rsplit_once('/').unwrap_or(("", &ps));
                        let (kd, kf) = ks.rsplit_once('/').unwrap_or(("", &ks));
                        glob::matches(pd, kd) && glob::matches(pf, kf)
                    })
                    .cloned()
                    .collect()
            }
            None => {
                if glob::has_wildcard(&pat.to_string_lossy()) {
                    glob::expand(pat)
                } else if pat.exists() {
                    vec![pat.to_path_buf()]
                } else {
                    vec![]
                }
            }
        }
    }

    fn read(&mut self, p: &Path, ctx: &[String], from: Option<(&Path, usize)>) {
        self.depth += 1;
        if self.depth > 32 {
            self.depth -= 1;
            return;
        }
        match self.text_of(p) {
            Some(t) => {
                self.files.push(p.to_path_buf());
                self.parse(p, &t, ctx);
            }
            None => {
                let (f, l) = from.map(|(f, l)| (f.to_path_buf(), l)).unwrap_or_default();
                self.errors
                    .push((f, l, format!("cannot read {}", p.display())));
            }
        }
        self.depth -= 1;
    }

    fn parse(&mut self, file: &Path, text: &str, outer: &[String]) {
        let mut ctx: Vec<String> = outer.to_vec();
        let base_len = ctx.len();
        let mut opened: Vec<usize> = Vec::new();
        let mut cur = String::new();
        let mut cur_line = 0usize;
        let mut quote: Option<char> = None;
        for (i, line) in text.lines().enumerate() {
            let lineno = i + 1;
            let mut chars = line.chars().peekable();
            while let Some(ch) = chars.next() {
                if let Some(q) = quote {
                    cur.push(ch);
                    if ch == '\\' {
                        if let Some(n) = chars.next() {
                            cur.push(n);
                        }
                    } else if ch == q {
                        quote = None;
                    }
                    continue;
                }
                match ch {
                    '#' => break,
                    '"' | '\'' => {
                        if cur.trim().is_empty() {
                            cur_line = lineno;
                        }
                        quote = Some(ch);
                        cur.push(ch);
                    }
                    ';' | '{' => {
                        let words = split_args(&cur);
                        cur.clear();
                        let Some((name, args)) = words.split_first() else {
                            if ch == ';' {
                                continue;
                            }
                            self.errors.push((
                                file.to_path_buf(),
                                lineno,
                                "a block without a name".into(),
                            ));
                            ctx.push(String::new());
                            opened.push(lineno);
                            continue;
                        };
                        let st = Stmt {
                            name: name.clone(),
                            args: args.to_vec(),
                            file: file.to_path_buf(),
                            line: cur_line,
                            ctx: ctx.clone(),
                        };
                        if ch == '{' {
                            ctx.push(name.clone());
                            opened.push(cur_line);
                            self.stmts.push(st);
                        } else if name == "include" {
                            let pats = args.to_vec();
                            let here = ctx.clone();
                            self.stmts.push(st);
                            for pat in pats {
                                let p = resolve(&self.base, &pat);
                                let found = self.expand(&p);
                                if found.is_empty() && !glob::has_wildcard(&pat) {
                                    self.errors.push((
                                        file.to_path_buf(),
                                        cur_line,
                                        format!("include {pat}: no such file"),
                                    ));
                                }
                                for f in found {
                                    self.read(&f, &here, Some((file, cur_line)));
                                }
                            }
                        } else {
                            self.stmts.push(st);
                        }
                    }
                    '}' => {
                        if !cur.trim().is_empty() {
                            self.errors.push((
                                file.to_path_buf(),
                                cur_line,
                                format!("{:?} is missing its ';'", cur.trim()),
                            ));
                            cur.clear();
                        }
                        if ctx.len() > base_len {
                            ctx.pop();
                            opened.pop();
                        } else {
                            self.errors
                                .push((file.to_path_buf(), lineno, "unexpected '}'".into()));
                        }
                    }
                    c => {
                        if cur.trim().is_empty() && !c.is_whitespace() {
                            cur_line = lineno;
                        }
                        cur.push(c);
                    }
                }
            }
            if quote.is_some() {
                cur.push('\n');
            } else {
                cur.push(' ');
            }
        }
        if !cur.trim().is_empty() {
            self.errors.push((
                file.to_path_buf(),
                cur_line,
                format!("{:?} is missing its ';'", cur.trim()),
            ));
        }
        for l in opened {
            self.errors
                .push((file.to_path_buf(), l, "block is never closed".into()));
        }
    }
}

/// Splits `nginx -T` output into files.
pub fn split_dump(text: &str) -> Option<BTreeMap<PathBuf, String>> {
    let mut m: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut cur: Option<PathBuf> = None;
    for line in text.lines() {
        if let Some(p) = line
            .strip_prefix("# configuration file ")
            .and_then(|r| r.trim_end().strip_suffix(':'))
        {
            let p = PathBuf::from(p);
            m.entry(p.clone()).or_default();
            cur = Some(p);
            continue;
        }
        if let Some(c) = &cur {
            let e = m.get_mut(c).expect("inserted");
            e.push_str(line);
            e.push('\n');
        }
    }
    (!m.is_empty()).then_some(m)
}

fn at(s: &Stmt) -> (&Path, usize) {
    (s.file.as_path(), s.line)
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
        r.read(&first, &[], None);
    } else {
        r.base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        r.read(path, &[], None);
    }
    let s = &r.stmts;
    let mut f = Vec::new();
    for (file, line, msg) in &r.errors {
        f.push(
            Finding::new(Level::Warn, "parse_error", (file, *line), msg.clone())
                .why("nginx would refuse this configuration; the rest was still checked"),
        );
    }
    let none = (Path::new(""), 0usize);
    let http = s.iter().find(|x| x.name == "http" && x.ctx.is_empty());
    let http_at = http.map(at).unwrap_or((path, 0));
    let find = |name: &str| -> Vec<&Stmt> { s.iter().filter(|x| x.name == name).collect() };

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
                .change("sendfile on;"),
        );
    }
    if sf.is_empty() {
        f.push(
            Finding::new(
                Level::Warn,
                "sendfile_off",
                http_at,
                "sendfile not set: nginx's default is off".into(),
            )
            .why("static files are copied through user space instead of sent by the kernel")
            .change("sendfile on;    # in http {}"),
        );
    } else if off.is_empty() {
        f.push(Finding::new(
            Level::Ok,
            "sendfile_off",
            none,
            "sendfile on".into(),
        ));
    }

    // keepalive_timeout
    let mut bad = false;
    for x in find("keepalive_timeout") {
        let v = x.args.first().map(String::as_str).unwrap_or("");
        let secs: f64 = v.trim_end_matches('s').parse().unwrap_or(-1.0);
        if secs == 0.0 {
            bad = true;
            f.push(
                Finding::new(
                    Level::Warn,
                    "keepalive_off",
                    at(x),
                    "keepalive_timeout 0 (keep-alive off)".into(),
                )
                .why("a new TCP connection (and TLS handshake) for every resource of a page")
                .change("keepalive_timeout 65;"),
            );
        } else if secs > 75.0 {
            bad = true;
            f.push(
                Finding::new(Level::Info, "keepalive_timeout_high", at(x), format!("keepalive_timeout {v}"))
                    .why("idle connections are kept (a file descriptor and buffers each) long after a visitor has gone")
                    .change("keepalive_timeout 65;"),
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

    // gzip
    let gz = find("gzip");
    if gz.iter().any(|x| x.args.first().is_some_and(|a| a == "on")) {
        f.push(Finding::new(
            Level::Ok,
            "no_compression",
            none,
            "gzip on".into(),
        ));
    } else {
        let loc = gz.first().map(|x| at(x)).unwrap_or(http_at);
        f.push(
            Finding::new(Level::Warn, "no_compression", loc, "gzip is not on".into())
                .why("HTML, CSS and JavaScript go out uncompressed: 3 to 5 times the bytes")
                .change("gzip on; gzip_types text/css application/javascript application/json image/svg+xml;"),
        );
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
                            .change("worker_processes auto;"),
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
                        .change("worker_connections 1024;"),
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
        f.push(
            Finding::new(
                Level::Info,
                "no_expires",
                http_at,
                "no expires or Cache-Control anywhere".into(),
            )
            .why("browsers revalidate every image and stylesheet on each page view")
            .change("location ~* \\.(css|js|png|jpg|svg|woff2)$ { expires 7d; }"),
        );
    }

    TuneReport {
        server: Server::Nginx,
        config: path.display().to_string(),
        files: r.files.iter().map(|p| p.display().to_string()).collect(),
        modules: vec![],
        mpm: None,
        threads_per_child: None,
        tools,
        findings: f,
    }
}
