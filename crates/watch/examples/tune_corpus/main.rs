//! The public-config corpus run of `tune` (issue 34, point 6), driven by
//! `bench/tune_corpus.sh`, which gathers the corpus and writes its manifest.
//!
//! For every config in the manifest (`server<TAB>kind<TAB>path<TAB>origin`,
//! kind `main`, `fragment` or `htaccess`): a fragment is placed in the
//! smallest whole config the server accepts it in (nginx: main, http,
//! server, location; Apache: server-wide or in a `<Directory>`; lighttpd:
//! after a minimal base), then
//! - the server's own config test (the one `tune` runs, `servertest::run`)
//!   says whether the config is valid;
//! - tune's own reader runs with no server binary (`server_test: false`): a
//!   `parse_error` on a config the server accepts is a false parse error;
//! - every fix tune prints is applied alone, and then all together, to the
//!   corpus copy and the server's config test asked again (the files are put
//!   back after each try).
//!
//! - a whole server (kind `main`) is also run (`site.rs`): a copy of its
//!   tree on a loopback port serves a few files before and after all of
//!   tune's fixes, and every URL must answer with the same status and body.
//!
//! Usage: `cargo run --release -p redline-watch --example tune_corpus --
//! MANIFEST SCRATCH` prints one line per config and the totals per server
//! as a Markdown table.

use redline_watch::tune::{
    analyze, apply_all, read_config, servertest, Finding, Level, Server, TuneOptions, TuneReport,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod site;

#[derive(Default)]
struct Totals {
    configs: usize,
    accepted: usize,
    rejected: usize,
    false_parse: usize,
    parse_on_rejected: usize,
    fixes: usize,
    fixes_ok: usize,
    sets: usize,
    sets_ok: usize,
    sites: usize,
    sites_same: usize,
    not_runnable: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: tune_corpus MANIFEST SCRATCH");
        std::process::exit(2);
    }
    let manifest = std::fs::read_to_string(&args[1]).unwrap_or_else(|e| {
        eprintln!("{}: {e}", args[1]);
        std::process::exit(2)
    });
    let scratch = PathBuf::from(&args[2]);
    std::fs::create_dir_all(&scratch).expect("scratch folder");
    let mut totals: BTreeMap<&'static str, Totals> = BTreeMap::new();
    let mut problems = Vec::new();
    for (n, line) in manifest.lines().enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 4 || line.starts_with('#') {
            continue;
        }
        let server: Server = match cols[0].parse() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{}:{}: {e}", args[1], n + 1);
                std::process::exit(2)
            }
        };
        let (kind, path, origin) = (cols[1], Path::new(cols[2]), cols[3]);
        let name = match server {
            Server::Nginx => "nginx",
            Server::Apache => "Apache",
            Server::Lighttpd => "lighttpd",
        };
        let t = totals.entry(name).or_default();
        t.configs += 1;
        let mains = match kind {
            "main" => vec![path.to_path_buf()],
            _ => wrappers(server, kind, path, &scratch.join(format!("wrap-{n}")), n),
        };
        let mut chosen = None;
        let mut first_error = String::new();
        for m in &mains {
            let text = read_config(m).unwrap_or_default();
            let (test, why) = servertest::run(server, m, &text);
            match test {
                Some(t) if t.accepted => {
                    chosen = Some(m.clone());
                    break;
                }
                Some(t) => {
                    first_error = t
                        .findings
                        .first()
                        .map(|f| f.message.clone())
                        .unwrap_or_else(|| "rejected".into())
                }
                None => first_error = why.unwrap_or_else(|| "no config test".into()),
            }
        }
        let Some(main) = chosen else {
            t.rejected += 1;
            let r = own(server, mains.last().expect("a config"));
            let parse = parse_errors(&r);
            if !parse.is_empty() {
                t.parse_on_rejected += 1;
            }
            println!(
                "{name}\t{origin}\t{}\trejected by the server: {first_error}\ttune parse errors: {}{}",
                path.display(),
                parse.len(),
                parse
                    .iter()
                    .map(|f| format!(" [{}:{} {}]", f.file, f.line, f.message))
                    .collect::<String>()
            );
            continue;
        };
        t.accepted += 1;
        let r = own(server, &main);
        let parse = parse_errors(&r);
        if !parse.is_empty() {
            t.false_parse += 1;
            for f in &parse {
                problems.push(format!(
                    "{name} {origin} {}: FALSE PARSE ERROR {}:{} {}",
                    path.display(),
                    f.file,
                    f.line,
                    f.message
                ));
            }
        }
        let fixes: Vec<&Finding> = r
            .findings
            .iter()
            .filter(|f| f.level != Level::Ok && f.fix.is_some())
            .collect();
        let mut ok = 0;
        for f in &fixes {
            let one = TuneReport {
                findings: vec![(*f).clone()],
                ..r.clone()
            };
            match try_fixes(server, &main, &one) {
                Ok(()) => ok += 1,
                Err(e) => problems.push(format!(
                    "{name} {origin} {}: fix {} rejected: {e}",
                    path.display(),
                    f.code
                )),
            }
        }
        t.fixes += fixes.len();
        t.fixes_ok += ok;
        let mut set = "-".to_string();
        if fixes.len() > 1 {
            t.sets += 1;
            match try_fixes(server, &main, &r) {
                Ok(()) => {
                    t.sets_ok += 1;
                    set = "all accepted together".into();
                }
                Err(e) => {
                    set = "REJECTED together".into();
                    problems.push(format!(
                        "{name} {origin} {}: the fixes together rejected: {e}",
                        path.display()
                    ))
                }
            }
        }
        if kind == "main" {
            match site::check(server, &main, &scratch.join(format!("site-{n}"))) {
                Ok(Ok(said)) => {
                    t.sites += 1;
                    t.sites_same += 1;
                    set.push_str(&format!("; site check: {said}"));
                }
                Ok(Err(why)) => {
                    t.not_runnable += 1;
                    set.push_str(&format!(
                        "; does not run here as it is: {}",
                        why.lines().next().unwrap_or("")
                    ));
                }
                Err(e) => {
                    t.sites += 1;
                    set.push_str("; SITE CHECK FAILED");
                    problems.push(format!(
                        "{name} {origin} {}: site check: {e}",
                        path.display()
                    ))
                }
            }
        }
        println!(
            "{name}\t{origin}\t{}\taccepted{}\tparse errors {}\tfixes {ok}/{} accepted\t{set}",
            path.display(),
            if main == path { "" } else { " (wrapped)" },
            parse.len(),
            fixes.len()
        );
    }
    println!();
    println!("| server | configs | accepted by the server | false parse errors | rejected (not runnable here) | fixes printed | each accepted | sets accepted together | whole servers serving the same after all fixes (not runnable as they are) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, t) in &totals {
        println!(
            "| {name} | {} | {} | {} | {} (tune parse error on {}) | {} | {} | {}/{} | {}/{} ({}) |",
            t.configs,
            t.accepted,
            t.false_parse,
            t.rejected,
            t.parse_on_rejected,
            t.fixes,
            t.fixes_ok,
            t.sets_ok,
            t.sets,
            t.sites_same,
            t.sites,
            t.not_runnable
        );
    }
    if !problems.is_empty() {
        println!();
        for p in &problems {
            println!("{p}");
        }
    }
}

/// tune's own reading (no server binary asked).
fn own(server: Server, main: &Path) -> TuneReport {
    let opts = TuneOptions {
        server: Some(server),
        ..Default::default()
    };
    analyze(main, &opts).unwrap_or_else(|e| TuneReport {
        server,
        config: main.display().to_string(),
        files: vec![],
        modules: vec![],
        mpm: None,
        threads_per_child: None,
        tools: vec![],
        findings: vec![Finding::new(Level::Warn, "parse_error", (main, 0), e)],
    })
}

fn parse_errors(r: &TuneReport) -> Vec<&Finding> {
    r.findings
        .iter()
        .filter(|f| f.code == "parse_error")
        .collect()
}

/// Applies `r`'s fixes, asks the server's config test, and puts every file
/// back as it was.
fn try_fixes(server: Server, main: &Path, r: &TuneReport) -> Result<(), String> {
    let mut saved: Vec<(String, Option<String>)> = Vec::new();
    for f in &r.findings {
        if let Some(x) = &f.fix {
            if !saved.iter().any(|(p, _)| *p == x.file) {
                saved.push((x.file.clone(), std::fs::read_to_string(&x.file).ok()));
            }
        }
    }
    let res = apply_all(r).and_then(|_| {
        let text = read_config(main)?;
        match servertest::run(server, main, &text) {
            (Some(t), _) if t.accepted => Ok(()),
            (Some(t), _) => Err(t
                .findings
                .iter()
                .map(|f| f.message.clone())
                .collect::<Vec<_>>()
                .join(" / ")),
            (None, why) => Err(why.unwrap_or_else(|| "no config test".into())),
        }
    });
    for (p, old) in saved {
        match old {
            Some(t) => std::fs::write(&p, t).expect("restore a corpus file"),
            None => {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
    res
}

/// The whole configs a fragment is tried in, smallest context first.
fn wrappers(server: Server, kind: &str, frag: &Path, dir: &Path, n: usize) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).expect("wrapper folder");
    // Relative paths in the fragment are read from its tree's root (nginx's
    // prefix, Apache's ServerRoot, lighttpd's conf_dir): the nearest folder
    // above it that holds the tree's main file; the wrapper goes there.
    let mains: &[&str] = match server {
        Server::Nginx => &["nginx.conf", "mime.types"],
        Server::Apache => &["httpd.conf", "apache2.conf"],
        Server::Lighttpd => &["lighttpd.conf"],
    };
    let root = frag
        .ancestors()
        .skip(1)
        .find(|a| mains.iter().any(|m| a.join(m).is_file()))
        .map(Path::to_path_buf);
    let at = root.clone().unwrap_or_else(|| dir.to_path_buf());
    let docroot = dir.join("www");
    std::fs::create_dir_all(&docroot).expect("docroot");
    let f = frag.display();
    let d = docroot.display();
    let texts: Vec<(&str, String)> = match server {
        Server::Nginx => vec![
            ("nginx-main.conf", format!("include {f};\nevents {{}}\nhttp {{}}\n")),
            (
                "nginx-http.conf",
                format!("events {{}}\nhttp {{\n    include /etc/nginx/mime.types;\n    include {f};\n}}\n"),
            ),
            (
                "nginx-server.conf",
                format!("events {{}}\nhttp {{\n    include /etc/nginx/mime.types;\n    server {{\n        listen 127.0.0.1:8080;\n        root {d};\n        include {f};\n    }}\n}}\n"),
            ),
            (
                "nginx-location.conf",
                format!("events {{}}\nhttp {{\n    include /etc/nginx/mime.types;\n    server {{\n        listen 127.0.0.1:8080;\n        root {d};\n        location / {{\n            include {f};\n        }}\n    }}\n}}\n"),
            ),
        ],
        Server::Apache => {
            // Debian's variables (`${APACHE_LOG_DIR}`...), read beside the main file.
            let _ = std::fs::copy("/etc/apache2/envvars", dir.join("envvars"));
            // Debian's modules plus the ones fragments commonly need.
            let sr = root.clone().unwrap_or_else(|| PathBuf::from("/etc/apache2"));
            let mut base = format!("ServerRoot \"{}\"\n", sr.display());
            base.push_str("IncludeOptional /etc/apache2/mods-enabled/*.load\nIncludeOptional /etc/apache2/mods-enabled/*.conf\n");
            for m in [
                "rewrite", "headers", "expires", "proxy", "proxy_http", "proxy_fcgi", "cgi",
                "include", "ssl", "socache_shmcb", "http2", "brotli", "dav", "dav_fs", "info",
                "userdir", "actions", "macro", "remoteip", "substitute", "authnz_ldap", "ldap",
            ] {
                let so = format!("/usr/lib/apache2/modules/mod_{m}.so");
                if Path::new(&so).exists() {
                    base.push_str(&format!(
                        "<IfModule !{m}_module>\n    LoadModule {m}_module {so}\n</IfModule>\n"
                    ));
                }
            }
            base.push_str(&format!(
                "User www-data\nGroup www-data\nListen 127.0.0.1:8080\nPidFile {0}/httpd.pid\nErrorLog {0}/error.log\nDocumentRoot {d}\n",
                dir.display()
            ));
            if kind == "htaccess" {
                vec![(
                    "apache-dir.conf",
                    format!("{base}<Directory {d}>\n    Include {f}\n</Directory>\n"),
                )]
            } else {
                vec![
                    ("apache-main.conf", format!("{base}Include {f}\n")),
                    (
                        "apache-vhost.conf",
                        format!("{base}<VirtualHost 127.0.0.1:8080>\n    Include {f}\n</VirtualHost>\n"),
                    ),
                ]
            }
        }
        Server::Lighttpd => vec![(
            "lighttpd.conf",
            format!(
                "var.conf_dir = \"{c}\"\nvar.log_root = \"{w}\"\nvar.server_root = \"{w}\"\nvar.state_dir = \"{w}\"\nvar.home_dir = \"{w}\"\nvar.cache_dir = \"{w}\"\nvar.socket_dir = \"{w}\"\nvar.vhosts_dir = \"{w}\"\nserver.document-root = \"{d}\"\nserver.port = 8080\nserver.bind = \"127.0.0.1\"\nserver.modules = ( \"mod_access\" )\ninclude \"{f}\"\n",
                c = at.display(),
                w = dir.display()
            ),
        )],
    };
    texts
        .into_iter()
        .map(|(name, text)| {
            let p = at.join(format!(".redline-wrap-{n}-{name}"));
            std::fs::write(&p, text).expect("write a wrapper");
            p
        })
        .collect()
}
