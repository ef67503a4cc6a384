//! `tune` against fixture configs: the stock Debian apache2 and nginx trees
//! (copied from the packages), and one variant per bad setting. Each finding
//! must appear exactly when its setting is there, at the right file and line.

use redline_testkit::need::require;
use redline_watch::tune::apache::with_server_root;
use redline_watch::tune::{Finding, Level, Server, TuneOptions, TuneReport};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A fresh copy of a fixture tree in a temp directory.
struct Tree(PathBuf);

impl Tree {
    fn copy(name: &str) -> Tree {
        static N: AtomicU32 = AtomicU32::new(0);
        let d = std::env::temp_dir().join(format!(
            "redline-watch-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&d);
        copy_dir(&fixtures().join(name), &d);
        Tree(d)
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
    /// Replaces the line equal to `old` (trimmed); returns its 1-based number.
    fn replace_line(&self, rel: &str, old: &str, new: &str) -> usize {
        let p = self.path(rel);
        let text = std::fs::read_to_string(&p).unwrap();
        let mut at = 0;
        let lines: Vec<String> = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                if at == 0 && l.trim() == old {
                    at = i + 1;
                    new.to_string()
                } else {
                    l.to_string()
                }
            })
            .collect();
        assert!(at > 0, "{old:?} not in {rel}");
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        at
    }
    /// Appends a line; returns its number.
    fn append(&self, rel: &str, line: &str) -> usize {
        let p = self.path(rel);
        let mut text = std::fs::read_to_string(&p).unwrap();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(line);
        text.push('\n');
        std::fs::write(&p, &text).unwrap();
        text.lines().count()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// `tune` on a copied tree, read as `apache2 -d FOLDER` reads it (the
/// folder of the main file is the ServerRoot where the tree sets none), as
/// the oracle below runs Apache on the copies.
fn analyze(p: &Path, o: &TuneOptions) -> Result<TuneReport, String> {
    let root = p.parent().unwrap_or(Path::new("/")).to_path_buf();
    with_server_root(&root, || redline_watch::tune::analyze(p, o))
}

fn opts() -> TuneOptions {
    TuneOptions {
        use_tools: false,
        ..Default::default()
    }
}

fn apache(t: &Tree) -> TuneReport {
    analyze(&t.path("apache2.conf"), &opts()).unwrap()
}

fn not_ok(r: &TuneReport) -> BTreeSet<String> {
    r.findings
        .iter()
        .filter(|f| f.level != Level::Ok)
        .map(|f| f.code.clone())
        .collect()
}

fn one<'a>(r: &'a TuneReport, code: &str) -> &'a Finding {
    let v: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.code == code && f.level != Level::Ok)
        .collect();
    assert_eq!(v.len(), 1, "{code}: {:#?}", r.findings);
    v[0]
}

const STOCK_APACHE: &[&str] = &["timeout_high", "sendfile_default_off", "no_expires"];

fn stock_plus(extra: &[&str]) -> BTreeSet<String> {
    STOCK_APACHE
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn stock_debian_apache() {
    let t = Tree::copy("debian-apache2");
    let r = apache(&t);
    assert_eq!(not_ok(&r), stock_plus(&[]), "{:#?}", r.findings);
    assert_eq!(r.mpm.as_deref(), Some("event"));
    assert!(r.modules.contains(&"deflate_module".to_string()));
    assert!(r.files.len() > 20, "{:?}", r.files);
    assert!(r
        .files
        .iter()
        .any(|f| f.ends_with("sites-enabled/000-default.conf")));
    let f = one(&r, "timeout_high");
    assert!(f.file.ends_with("apache2.conf"));
    assert_eq!(f.line, 92);
    assert_eq!(f.change, "Timeout 60");
    let text = redline_watch::tune::render_text(&r);
    assert!(
        text.contains("[!!]") && text.contains("[OK]") && text.contains("Directives to change")
    );
}

#[test]
fn the_real_debian_config_when_installed() {
    let p = Path::new("/etc/apache2/apache2.conf");
    if !p.exists() {
        eprintln!("note: /etc/apache2 not installed (apt-get install apache2); skipped");
        return;
    }
    let r = analyze(
        p,
        &TuneOptions {
            use_tools: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        !r.findings.iter().any(|f| f.code == "parse_error"),
        "{:#?}",
        r.findings
    );
    assert!(r.files.len() > 20);
    // When apache2ctl runs, it must agree on the files read.
    for t in &r.tools {
        assert!(!t.contains("also reads"), "{t}");
    }
}

/// (code, file, the line to add or replace, replacement)
fn variant(code: &str, rel: &str, old: Option<&str>, new: &str) {
    let t = Tree::copy("debian-apache2");
    let line = match old {
        Some(o) => t.replace_line(rel, o, new),
        None => t.append(rel, new),
    };
    let r = apache(&t);
    assert_eq!(not_ok(&r), stock_plus(&[code]), "{new}: {:#?}", r.findings);
    let f = one(&r, code);
    assert_eq!(
        (Path::new(&f.file), f.line),
        (t.path(rel).as_path(), line),
        "{new}"
    );
    assert!(!f.why.is_empty() && !f.change.is_empty());
    pasteable(&f.change);
}

/// Apache has no comments after a directive: each line of a change must be a
/// directive or a whole-line comment, to paste as it is.
fn pasteable(change: &str) {
    for l in change.lines() {
        assert!(l.starts_with('#') || !l.contains('#'), "{change}");
    }
}

#[test]
fn each_bad_apache_setting_is_found_at_its_line() {
    variant(
        "hostname_lookups",
        "apache2.conf",
        Some("HostnameLookups Off"),
        "HostnameLookups On",
    );
    variant(
        "keepalive_off",
        "apache2.conf",
        Some("KeepAlive On"),
        "KeepAlive Off",
    );
    variant(
        "keepalive_timeout_high",
        "apache2.conf",
        Some("KeepAliveTimeout 5"),
        "KeepAliveTimeout 60",
    );
    variant(
        "max_keepalive_requests_low",
        "apache2.conf",
        Some("MaxKeepAliveRequests 100"),
        "MaxKeepAliveRequests 10",
    );
    variant("mmap_off", "apache2.conf", None, "EnableMMAP Off");
    variant(
        "max_connections_per_child_low",
        "mods-enabled/mpm_event.conf",
        Some("MaxConnectionsPerChild  0"),
        "MaxConnectionsPerChild 100",
    );
}

#[test]
fn allow_override_and_symlinks_in_a_site() {
    for (code, line) in [
        ("allow_override", "\tAllowOverride All"),
        (
            "symlinks_if_owner_match",
            "\tOptions Indexes SymLinksIfOwnerMatch",
        ),
    ] {
        let t = Tree::copy("debian-apache2");
        let p = t.write(
            "conf-enabled/zz-site.conf",
            &format!("# a site\n<Directory /srv/site/>\n{line}\n</Directory>\n"),
        );
        let r = apache(&t);
        assert_eq!(not_ok(&r), stock_plus(&[code]));
        let f = one(&r, code);
        assert_eq!((Path::new(&f.file), f.line), (p.as_path(), 3));
    }
}

#[test]
fn sendfile_off_replaces_the_default_note() {
    let t = Tree::copy("debian-apache2");
    let line = t.append("apache2.conf", "EnableSendfile Off");
    let r = apache(&t);
    let want: BTreeSet<String> = ["timeout_high", "no_expires", "sendfile_off"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(not_ok(&r), want);
    assert_eq!(one(&r, "sendfile_off").line, line);
    // And On removes both.
    let t = Tree::copy("debian-apache2");
    t.append("apache2.conf", "EnableSendfile On");
    let r = apache(&t);
    assert!(!not_ok(&r).contains("sendfile_default_off"));
    assert!(!not_ok(&r).contains("sendfile_off"));
}

#[test]
fn fixing_the_stock_findings_leaves_none() {
    let t = Tree::copy("debian-apache2");
    t.replace_line("apache2.conf", "Timeout 300", "Timeout 30");
    t.append("apache2.conf", "EnableSendfile On");
    t.write(
        "mods-enabled/expires.load",
        "LoadModule expires_module /usr/lib/apache2/modules/mod_expires.so\n",
    );
    // Loaded is not configured: still a note until ExpiresActive On covers static types.
    let r = apache(&t);
    assert_eq!(
        not_ok(&r),
        ["no_expires".to_string()].into(),
        "{:#?}",
        r.findings
    );
    t.write(
        "mods-enabled/expires.conf",
        "<IfModule mod_expires.c>\nExpiresActive On\nExpiresByType text/css \"access plus 1 week\"\n</IfModule>\n",
    );
    let r = apache(&t);
    assert!(not_ok(&r).is_empty(), "{:#?}", r.findings);
}

#[test]
fn missing_deflate_module() {
    let t = Tree::copy("debian-apache2");
    std::fs::remove_file(t.path("mods-enabled/deflate.load")).unwrap();
    std::fs::remove_file(t.path("mods-enabled/deflate.conf")).unwrap();
    let r = apache(&t);
    assert_eq!(not_ok(&r), stock_plus(&["no_compression"]));
    // Debian's layout: `a2enmod deflate` (its deflate.conf applies it), and
    // the filter line in a conf-available file of its own.
    let f = one(&r, "no_compression");
    assert!(
        f.change
            .starts_with("# a2enmod deflate && a2enconf redline-no-compression")
            && !f.change.contains("LoadModule"),
        "{}",
        f.change
    );
    let x = f.fix.as_ref().unwrap();
    assert_eq!(
        Path::new(&x.file),
        t.path("conf-available/redline-no-compression.conf")
    );
    pasteable(&f.change);
}

#[test]
fn ifmodule_ifdefine_and_define_are_evaluated() {
    let t = Tree::copy("debian-apache2");
    // Inactive: a negated loaded module, a missing module nested in a loaded one, an undefined name.
    t.write(
        "conf-enabled/zz-cond.conf",
        "<IfModule !mod_deflate.c>\nHostnameLookups On\n</IfModule>\n<IfModule deflate_module>\n  <IfModule mod_nonexistent.c>\n    KeepAlive Off\n  </IfModule>\n</IfModule>\n<IfDefine NOPE>\nKeepAliveTimeout 99\n</IfDefine>\n",
    );
    let r = apache(&t);
    assert_eq!(not_ok(&r), stock_plus(&[]), "{:#?}", r.findings);
    // Active: Define then IfDefine, and ${VAR} substitution.
    t.write(
        "conf-enabled/zz-cond.conf",
        "Define SLOW 1\nDefine LOOKUPS On\n<IfDefine SLOW>\n<IfModule mod_deflate.c>\nHostnameLookups ${LOOKUPS}\n</IfModule>\n</IfDefine>\n",
    );
    let r = apache(&t);
    assert_eq!(not_ok(&r), stock_plus(&["hostname_lookups"]));
    assert_eq!(one(&r, "hostname_lookups").line, 5);
}

#[test]
fn includes_globs_and_errors() {
    let t = Tree::copy("debian-apache2");
    t.append("apache2.conf", "IncludeOptional nothing-here/*.conf");
    t.append("apache2.conf", "Include extra/*.conf");
    let missing = t.append("apache2.conf", "Include missing.conf");
    t.write("extra/a.conf", "# only a comment\n");
    let r = apache(&t);
    assert_eq!(
        not_ok(&r),
        stock_plus(&["parse_error"]),
        "{:#?}",
        r.findings
    );
    let f = one(&r, "parse_error");
    assert_eq!(f.line, missing);
    assert!(f.message.contains("missing.conf"));
    assert!(r.files.iter().any(|f| f.ends_with("extra/a.conf")));
}

#[test]
fn unparsable_file_is_reported_and_the_rest_still_checked() {
    let t = Tree::copy("debian-apache2");
    let p = t.write(
        "conf-enabled/zz-broken.conf",
        "# broken\n<Directory /srv/x\nAllowOverride All\n</Location>\n<VirtualHost *:80>\nHostnameLookups On\n",
    );
    let r = apache(&t);
    let errs: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.code == "parse_error")
        .collect();
    assert!(errs.len() >= 2, "{errs:#?}");
    assert!(errs.iter().all(|f| Path::new(&f.file) == p));
    let lines: BTreeSet<usize> = errs.iter().map(|f| f.line).collect();
    assert!(lines.contains(&2) && lines.contains(&4), "{lines:?}");
    // The rest is still checked: the HostnameLookups in the unclosed VirtualHost.
    assert_eq!(one(&r, "hostname_lookups").line, 6);
    assert!(not_ok(&r).contains("timeout_high"));
}

#[test]
fn max_request_workers_against_memory() {
    let t = Tree::copy("debian-apache2");
    // Debian's event MPM: MaxRequestWorkers 150, ThreadsPerChild 25 → 6 processes.
    let o = |budget| TuneOptions {
        use_tools: false,
        budget_kib: Some(budget),
        worker_private_kib: Some(100 * 1024),
        ..Default::default()
    };
    let r = analyze(&t.path("apache2.conf"), &o(500 * 1024)).unwrap();
    let f = one(&r, "max_request_workers_over_memory");
    assert!(f.file.ends_with("mods-enabled/mpm_event.conf"));
    assert!(
        f.change.starts_with("MaxRequestWorkers 100\n"),
        "{}",
        f.change
    );
    pasteable(&f.change);
    let r = analyze(&t.path("apache2.conf"), &o(700 * 1024)).unwrap();
    assert!(!not_ok(&r).contains("max_request_workers_over_memory"));
}

#[test]
fn stock_debian_nginx_and_its_variants() {
    let t = Tree::copy("debian-nginx");
    let conf = t.path("nginx.conf");
    let o = TuneOptions {
        server: Some(Server::Nginx),
        ..opts()
    };
    let r = analyze(&conf, &o).unwrap();
    assert_eq!(
        not_ok(&r),
        ["no_expires".to_string(), "gzip_types_default".to_string()].into(),
        "{:#?}",
        r.findings
    );
    assert!(r.files.iter().any(|f| f.ends_with("sites-enabled/default")));
    for (old, new, code) in [
        ("sendfile on;", "sendfile off;", "sendfile_off"),
        ("gzip on;", "gzip off;", "no_compression"),
        (
            "keepalive_timeout 65;",
            "keepalive_timeout 0;",
            "keepalive_off",
        ),
    ] {
        let t = Tree::copy("debian-nginx");
        let line = if old.starts_with("keepalive") {
            t.replace_line("nginx.conf", "gzip on;", &format!("gzip on; {new}"))
        } else {
            t.replace_line("nginx.conf", old, new)
        };
        let r = analyze(&t.path("nginx.conf"), &o).unwrap();
        let mut want: BTreeSet<String> =
            ["no_expires", code].iter().map(|s| s.to_string()).collect();
        if code != "no_compression" {
            want.insert("gzip_types_default".into());
        }
        assert_eq!(not_ok(&r), want, "{new}");
        assert_eq!(one(&r, code).line, line, "{new}");
    }
}

#[test]
fn nginx_dash_t_output_is_read_as_files() {
    let dump = "nginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n# configuration file /etc/nginx/nginx.conf:\nevents {}\nhttp {\n    include /etc/nginx/conf.d/*.conf;\n}\n\n# configuration file /etc/nginx/conf.d/site.conf:\nsendfile off;\nserver { listen 80; }\n";
    let t = Tree::copy("lighttpd");
    let p = t.write("nginx-T.txt", dump);
    let r = analyze(
        &p,
        &TuneOptions {
            server: Some(Server::Nginx),
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(
        r.files,
        vec!["/etc/nginx/nginx.conf", "/etc/nginx/conf.d/site.conf"]
    );
    let f = one(&r, "sendfile_off");
    assert_eq!(
        (f.file.as_str(), f.line),
        ("/etc/nginx/conf.d/site.conf", 1)
    );
    assert!(not_ok(&r).contains("no_compression"));
}

#[test]
fn lighttpd_config() {
    let t = Tree::copy("lighttpd");
    let r = analyze(&t.path("lighttpd.conf"), &opts()).unwrap();
    assert_eq!(r.server, Server::Lighttpd);
    assert_eq!(
        not_ok(&r),
        ["no_expires".to_string()].into(),
        "{:#?}",
        r.findings
    );
    assert!(r.modules.contains(&"mod_deflate".to_string()));
    let line = t.append("lighttpd.conf", "server.max-keep-alive-requests = 0");
    let r = analyze(&t.path("lighttpd.conf"), &opts()).unwrap();
    assert_eq!(one(&r, "keepalive_off").line, line);
    std::fs::remove_file(t.path("conf-enabled/10-deflate.conf")).unwrap();
    let r = analyze(&t.path("lighttpd.conf"), &opts()).unwrap();
    assert!(not_ok(&r).contains("no_compression"));
    let t2 = Tree::copy("lighttpd");
    let bad = t2.append("lighttpd.conf", "this is not a setting");
    let r = analyze(&t2.path("lighttpd.conf"), &opts()).unwrap();
    assert_eq!(one(&r, "parse_error").line, bad);
    // Any other include_shell is named (not run, not an error).
    let shell = t.append(
        "lighttpd.conf",
        "include_shell \"/usr/local/bin/gen-vhosts.sh --all\"",
    );
    let r = analyze(&t.path("lighttpd.conf"), &opts()).unwrap();
    let f = one(&r, "include_shell_not_run");
    assert_eq!((f.line, f.level), (shell, Level::Info));
    assert!(
        f.message.contains("\"/usr/local/bin/gen-vhosts.sh --all\""),
        "{}",
        f.message
    );
}

#[test]
fn the_stock_debian_lighttpd_config_when_installed_parses_cleanly() {
    let conf = Path::new("/etc/lighttpd/lighttpd.conf");
    if !conf.exists() {
        eprintln!("skipped: lighttpd is not installed");
        return;
    }
    let r = analyze(conf, &opts()).unwrap();
    assert_eq!(r.server, Server::Lighttpd);
    let parse: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.code == "parse_error")
        .collect();
    assert!(parse.is_empty(), "{parse:#?}");
}

#[test]
fn unreadable_main_file_is_an_error() {
    assert!(analyze(Path::new("/nonexistent/apache2.conf"), &opts()).is_err());
    assert!(analyze(&fixtures(), &opts()).is_err());
}

#[test]
fn the_expires_hint_uses_the_modules_path_of_the_config() {
    // Debian's layout: `a2enmod expires`, the lines in conf-available, and
    // nothing written into another module's .load file (issue 34).
    let t = Tree::copy("debian-apache2");
    let r = apache(&t);
    let f = one(&r, "no_expires");
    assert!(
        f.change
            .starts_with("# a2enmod expires && a2enconf redline-no-expires")
            && !f.change.contains("LoadModule")
            && f.change.contains("\nExpiresActive On\n")
            && f.change.contains("ExpiresByType text/css"),
        "{}",
        f.change
    );
    let x = f.fix.as_ref().unwrap();
    assert_eq!(
        Path::new(&x.file),
        t.path("conf-available/redline-no-expires.conf")
    );
    pasteable(&f.change);
    // Another layout: the LoadModule line with the path its modules use.
    let u = Tree::copy("grammar/apache/ok-event-limits");
    let r = analyze(&u.path("httpd.conf"), &opts()).unwrap();
    let f = one(&r, "no_expires");
    assert!(
        f.change
            .starts_with("LoadModule expires_module /usr/lib/apache2/modules/mod_expires.so\n")
            && !f.change.contains("a2enmod"),
        "{}",
        f.change
    );
    pasteable(&f.change);
}

#[test]
fn a_loaded_module_nothing_uses_is_found_at_its_loadmodule_line() {
    let t = Tree::copy("debian-apache2");
    let p = t.write(
        "mods-enabled/rewrite.load",
        "# Depends: \nLoadModule rewrite_module /usr/lib/apache2/modules/mod_rewrite.so\n",
    );
    let r = apache(&t);
    assert_eq!(
        not_ok(&r),
        stock_plus(&["module_unused"]),
        "{:#?}",
        r.findings
    );
    let f = one(&r, "module_unused");
    assert_eq!((Path::new(&f.file), f.line), (p.as_path(), 2));
    assert!(f.message.contains("rewrite_module"), "{}", f.message);
    // Debian's layout: a2dismod, nothing else to paste.
    assert!(f.change.starts_with("# a2dismod rewrite "), "{}", f.change);
    assert!(!f.change.contains("LoadModule"), "{}", f.change);
    // Another layout: the line commented out, no a2dismod.
    let u = Tree::copy("grammar/apache/ok-event-limits");
    u.append(
        "httpd.conf",
        "LoadModule rewrite_module /usr/lib/apache2/modules/mod_rewrite.so",
    );
    let r2 = analyze(&u.path("httpd.conf"), &opts()).unwrap();
    let g = one(&r2, "module_unused");
    // (Fixes inserted after the same last line are merged into this one.)
    assert!(
        g.change
            .starts_with("#LoadModule rewrite_module /usr/lib/apache2/modules/mod_rewrite.so\n")
            && !g.change.contains("a2dismod"),
        "{}",
        g.change
    );
    // Used by a site: no finding.
    t.write(
        "conf-enabled/zz-site.conf",
        "<Directory /srv/site/>\nRewriteEngine On\nRewriteRule ^old$ /new [R=301]\n</Directory>\n",
    );
    let r = apache(&t);
    assert_eq!(not_ok(&r), stock_plus(&[]), "{:#?}", r.findings);
}

#[test]
fn the_old_name_max_requests_per_child() {
    variant(
        "max_connections_per_child_low",
        "apache2.conf",
        None,
        "MaxRequestsPerChild 500",
    );
    let t = Tree::copy("debian-apache2");
    t.append("apache2.conf", "MaxRequestsPerChild 500");
    let r = apache(&t);
    let f = one(&r, "max_connections_per_child_low");
    assert!(
        f.change.starts_with("MaxRequestsPerChild 10000"),
        "{}",
        f.change
    );
    // 0 (never) and large values are fine.
    for v in ["0", "5000"] {
        let t = Tree::copy("debian-apache2");
        t.append("apache2.conf", &format!("MaxRequestsPerChild {v}"));
        assert_eq!(not_ok(&apache(&t)), stock_plus(&[]), "{v}");
    }
}

fn nginx(t: &Tree) -> TuneReport {
    analyze(
        &t.path("nginx.conf"),
        &TuneOptions {
            server: Some(Server::Nginx),
            ..opts()
        },
    )
    .unwrap()
}

#[test]
fn nginx_worker_processes_below_the_cpus() {
    let cpus = std::thread::available_parallelism().unwrap().get();
    // As many as the CPUs (and auto, the stock value) are fine.
    let t = Tree::copy("debian-nginx");
    t.replace_line(
        "nginx.conf",
        "worker_processes auto;",
        &format!("worker_processes {cpus};"),
    );
    assert!(!not_ok(&nginx(&t)).contains("worker_processes_low"));
    if cpus < 2 {
        eprintln!("note: one CPU, no worker_processes value is below it; rest skipped");
        return;
    }
    let t = Tree::copy("debian-nginx");
    let line = t.replace_line(
        "nginx.conf",
        "worker_processes auto;",
        &format!("worker_processes {};", cpus - 1),
    );
    let r = nginx(&t);
    let want: BTreeSet<String> = ["no_expires", "gzip_types_default", "worker_processes_low"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(not_ok(&r), want, "{:#?}", r.findings);
    let f = one(&r, "worker_processes_low");
    assert_eq!(
        (Path::new(&f.file), f.line),
        (t.path("nginx.conf").as_path(), line)
    );
    assert_eq!(f.change, "worker_processes auto;");
}

#[test]
fn nginx_worker_connections_low() {
    let t = Tree::copy("debian-nginx");
    let line = t.replace_line(
        "nginx.conf",
        "worker_connections 768;",
        "worker_connections 128;",
    );
    let r = nginx(&t);
    let want: BTreeSet<String> = ["no_expires", "gzip_types_default", "worker_connections_low"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(not_ok(&r), want, "{:#?}", r.findings);
    let f = one(&r, "worker_connections_low");
    assert_eq!(
        (Path::new(&f.file), f.line),
        (t.path("nginx.conf").as_path(), line)
    );
    assert!(f.message.contains("128"));
    // 512 and up: none (the stock 768 is covered by the stock test).
    let t = Tree::copy("debian-nginx");
    t.replace_line(
        "nginx.conf",
        "worker_connections 768;",
        "worker_connections 512;",
    );
    assert!(!not_ok(&nginx(&t)).contains("worker_connections_low"));
}

#[test]
fn each_bad_lighttpd_setting_is_found_at_its_line() {
    for (line_text, code, fine) in [
        (
            "server.max-keep-alive-idle = 60",
            "keepalive_timeout_high",
            "server.max-keep-alive-idle = 5",
        ),
        (
            "server.network-backend = \"writev\"",
            "sendfile_off",
            "server.network-backend = \"sendfile\"",
        ),
        (
            "server.stat-cache-engine = \"disable\"",
            "stat_cache_off",
            "server.stat-cache-engine = \"simple\"",
        ),
        (
            "server.max-worker = 4",
            "max_worker",
            "server.max-worker = 0",
        ),
    ] {
        let t = Tree::copy("lighttpd");
        let line = t.append("lighttpd.conf", line_text);
        let r = analyze(&t.path("lighttpd.conf"), &opts()).unwrap();
        let want: BTreeSet<String> = ["no_expires", code].iter().map(|s| s.to_string()).collect();
        assert_eq!(not_ok(&r), want, "{line_text}: {:#?}", r.findings);
        let f = one(&r, code);
        assert_eq!(
            (Path::new(&f.file), f.line),
            (t.path("lighttpd.conf").as_path(), line),
            "{line_text}"
        );
        assert!(!f.why.is_empty() && !f.change.is_empty());
        let t = Tree::copy("lighttpd");
        t.append("lighttpd.conf", fine);
        let r = analyze(&t.path("lighttpd.conf"), &opts()).unwrap();
        assert_eq!(not_ok(&r), ["no_expires".to_string()].into(), "{fine}");
    }
}

// ---------------------------------------------------------------------------
// The servers as oracles: each fixture under fixtures/grammar/SERVER/ is one
// construct; `ok-*` ones the server's own config test accepts, `bad-*` ones
// it refuses. `tune` must agree: no parse_error where the server accepts, a
// parse_error where it refuses. Then every fix `tune` prints is pasted where
// it says and the server's config test must still accept the file.

fn binary(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Runs a config test with a time limit; (accepted, what it printed).
fn run_bounded(mut cmd: std::process::Command) -> (bool, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the config test");
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut out);
    }
    (status.is_some_and(|s| s.success()), out)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Oracle {
    Nginx,
    Apache,
    Lighttpd,
}

impl Oracle {
    fn dir(self) -> &'static str {
        match self {
            Oracle::Nginx => "nginx",
            Oracle::Apache => "apache",
            Oracle::Lighttpd => "lighttpd",
        }
    }
    fn main(self) -> &'static str {
        match self {
            Oracle::Nginx => "nginx.conf",
            Oracle::Apache => "httpd.conf",
            Oracle::Lighttpd => "lighttpd.conf",
        }
    }
    fn bin(self) -> Option<PathBuf> {
        binary(match self {
            Oracle::Nginx => "nginx",
            Oracle::Apache => "apache2",
            Oracle::Lighttpd => "lighttpd",
        })
    }
    fn server(self) -> Server {
        match self {
            Oracle::Nginx => Server::Nginx,
            Oracle::Apache => Server::Apache,
            Oracle::Lighttpd => Server::Lighttpd,
        }
    }
    /// The server's own config test on `conf` (a copy in a temp tree at `root`).
    fn test(self, root: &Path, conf: &Path) -> (bool, String) {
        let bin = self.bin().expect("checked by require");
        let logs = root.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let mut cmd = std::process::Command::new(bin);
        match self {
            Oracle::Nginx => {
                cmd.arg("-t")
                    .arg("-q")
                    .arg("-p")
                    .arg(root)
                    .arg("-c")
                    .arg(conf)
                    .arg("-e")
                    .arg(logs.join("error.log"));
            }
            Oracle::Apache => {
                cmd.arg("-t")
                    .arg("-d")
                    .arg(conf.parent().unwrap())
                    .arg("-f")
                    .arg(conf)
                    // Debian's tree reads these from the environment.
                    .env("APACHE_RUN_USER", "www-data")
                    .env("APACHE_RUN_GROUP", "www-data")
                    .env("APACHE_PID_FILE", logs.join("apache2.pid"))
                    .env("APACHE_RUN_DIR", &logs)
                    .env("APACHE_LOCK_DIR", &logs)
                    .env("APACHE_LOG_DIR", &logs);
            }
            Oracle::Lighttpd => {
                cmd.arg("-tt").arg("-f").arg(conf).current_dir(root);
            }
        }
        run_bounded(cmd)
    }
}

/// The lua module's files, when installed (Debian: libnginx-mod-http-lua).
fn nginx_lua_modules() -> Option<Vec<PathBuf>> {
    let dir = Path::new("/usr/lib/nginx/modules");
    let ndk = dir.join("ndk_http_module.so");
    let lua = dir.join("ngx_http_lua_module.so");
    (ndk.is_file() && lua.is_file()).then(|| vec![ndk, lua])
}

/// The second home of grammar fixtures (one folder per construct or broken
/// config kind): `crates/watch/fixtures/tune/grammar/SERVER/NAME`.
fn tune_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tune")
}

/// The fixture names for one server, sorted (both homes; a name is in one).
fn grammar_fixtures(o: Oracle) -> Vec<String> {
    let mut v: Vec<String> = [fixtures(), tune_fixtures()]
        .iter()
        .filter_map(|root| std::fs::read_dir(root.join("grammar").join(o.dir())).ok())
        .flatten()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

/// A grammar fixture's folder for `Tree::copy` (relative to tests/fixtures,
/// or absolute when it is under fixtures/tune).
fn grammar_rel(dir: &str, name: &str) -> String {
    let old = format!("grammar/{dir}/{name}");
    if fixtures().join(&old).is_dir() {
        old
    } else {
        tune_fixtures()
            .join("grammar")
            .join(dir)
            .join(name)
            .display()
            .to_string()
    }
}

/// A fixture copied to a temp tree; the lua fixture gets the module loaded when installed.
fn grammar_tree(o: Oracle, name: &str) -> Option<Tree> {
    let t = Tree::copy(&grammar_rel(o.dir(), name));
    if name.contains("lua") {
        let Some(mods) = nginx_lua_modules() else {
            // Without the module nginx refuses any *_by_lua_block: only a
            // fixture it should refuse anyway is still a fair question.
            return name.starts_with("bad-").then_some(t);
        };
        let conf = t.path(o.main());
        let text = std::fs::read_to_string(&conf).unwrap();
        let loads: String = mods
            .iter()
            .map(|m| format!("load_module {};\n", m.display()))
            .collect();
        std::fs::write(&conf, loads + &text).unwrap();
    }
    Some(t)
}

fn analyze_as(o: Oracle, conf: &Path) -> TuneReport {
    analyze(
        conf,
        &TuneOptions {
            server: Some(o.server()),
            ..opts()
        },
    )
    .unwrap()
}

fn parse_errors(r: &TuneReport) -> Vec<&Finding> {
    r.findings
        .iter()
        .filter(|f| f.code == "parse_error")
        .collect()
}

#[test]
fn grammar_fixtures_agree_with_each_servers_config_test() {
    for o in [Oracle::Nginx, Oracle::Apache, Oracle::Lighttpd] {
        if !require(o.dir(), o.bin().is_some()) {
            continue;
        }
        let names = grammar_fixtures(o);
        assert!(names.len() >= 10, "{o:?}: {names:?}");
        let (mut ok, mut bad) = (0, 0);
        for name in names {
            let Some(t) = grammar_tree(o, &name) else {
                // Without the module nginx refuses the directive, so only tune is asked.
                eprintln!("note: nginx lua module not installed: {name} checked by tune only");
                let t = Tree::copy(&grammar_rel(o.dir(), &name));
                let r = analyze_as(o, &t.path(o.main()));
                assert!(parse_errors(&r).is_empty(), "{name}: {:#?}", r.findings);
                continue;
            };
            let conf = t.path(o.main());
            let (accepted, out) = o.test(&t.0, &conf);
            let r = analyze_as(o, &conf);
            let errs = parse_errors(&r);
            if name.starts_with("ok-") {
                assert!(
                    accepted,
                    "{o:?} {name}: the server refuses the fixture: {out}"
                );
                assert!(
                    errs.is_empty(),
                    "{o:?} {name}: the server accepts it, tune reports {errs:#?}"
                );
                ok += 1;
            } else {
                assert!(
                    !accepted,
                    "{o:?} {name}: the server accepts the fixture: {out}"
                );
                assert!(
                    !errs.is_empty(),
                    "{o:?} {name}: the server refuses it ({out}), tune reports no parse error: {:#?}",
                    r.findings
                );
                bad += 1;
            }
        }
        assert!(ok >= 5 && bad >= 4, "{o:?}: {ok} accepted, {bad} refused");
    }
}

/// What Debian's `a2enmod` and `a2enconf` do, for a fix whose first line
/// names them (`# a2enmod expires && a2enconf redline-no-expires (Debian)…`),
/// in the tree at `root`: the module's .load (and .conf) from the system's
/// mods-available (else its LoadModule line), the conf into conf-enabled.
fn debian_enable(root: &Path, fix_text: &str) {
    let Some(first) = fix_text.lines().next() else {
        return;
    };
    let Some(cmds) = first
        .strip_prefix("# ")
        .and_then(|l| l.split(" (Debian)").next())
    else {
        return;
    };
    for cmd in cmds.split("&&") {
        let w: Vec<&str> = cmd.split_whitespace().collect();
        match w.first() {
            Some(&"a2enmod") => {
                for m in &w[1..] {
                    let avail = Path::new("/etc/apache2/mods-available");
                    let dst = root.join("mods-enabled");
                    let load = avail.join(format!("{m}.load"));
                    let text = std::fs::read_to_string(&load).unwrap_or_else(|_| {
                        format!("LoadModule {m}_module /usr/lib/apache2/modules/mod_{m}.so\n")
                    });
                    std::fs::write(dst.join(format!("{m}.load")), text).unwrap();
                    if let Ok(conf) = std::fs::read_to_string(avail.join(format!("{m}.conf"))) {
                        std::fs::write(dst.join(format!("{m}.conf")), conf).unwrap();
                    }
                }
            }
            Some(&"a2enconf") => {
                for n in &w[1..] {
                    let from = root.join("conf-available").join(format!("{n}.conf"));
                    let to = root.join("conf-enabled").join(format!("{n}.conf"));
                    std::fs::copy(&from, &to).unwrap();
                }
            }
            _ => {}
        }
    }
}

/// Every fix of every finding for one tree, each pasted on a fresh copy;
/// returns how many were pasted.
fn paste_every_fix(o: Oracle, tree: &str, main: &str, min: usize) -> usize {
    let t = Tree::copy(tree);
    let conf = t.path(main);
    let r = analyze_as(o, &conf);
    let (_, baseline) = o.test(&t.0, &conf);
    let mut n = 0;
    for f in r.findings.iter().filter(|f| f.level != Level::Ok) {
        if f.change.is_empty() {
            continue;
        }
        let fix = f
            .fix
            .as_ref()
            .unwrap_or_else(|| panic!("{tree}: {} has a change but no place: {f:#?}", f.code));
        // Paste it in a fresh copy: the fix names a file of `t`; the same file in `u`.
        let u = Tree::copy(tree);
        let rel = Path::new(&fix.file)
            .strip_prefix(&t.0)
            .unwrap_or_else(|_| panic!("{tree}: fix outside the tree: {fix:#?}"));
        let target = u.0.join(rel);
        // A new file (Debian's conf-available) starts empty.
        let text = std::fs::read_to_string(&target).unwrap_or_default();
        let pasted = fix
            .apply(&text)
            .unwrap_or_else(|| panic!("{tree}: {} does not apply: {fix:#?}", f.code));
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(&target, &pasted).unwrap();
        debian_enable(&u.0, &fix.text);
        let (accepted, out) = o.test(&u.0, &u.path(main));
        assert!(
            accepted,
            "{tree}: after pasting the fix for {} ({}), the server refuses the config: {out}\n{pasted}",
            f.code,
            redline_watch::tune::placement(fix)
        );
        // No new warning from nginx or Apache either (e.g. AH00515, a
        // MaxRequestWorkers Apache lowers at start).
        if o != Oracle::Lighttpd {
            let warns = |s: &str, root: &Path| -> BTreeSet<String> {
                s.lines()
                    .filter(|l| l.contains("WARNING") || l.contains("[warn]"))
                    .map(|l| l.replace(&root.display().to_string(), "ROOT"))
                    .collect()
            };
            let new: Vec<String> = warns(&out, &u.0)
                .difference(&warns(&baseline, &t.0))
                .cloned()
                .collect();
            assert!(
                new.is_empty(),
                "{tree}: the fix for {} adds warnings: {new:?}",
                f.code
            );
        }
        // lighttpd -tt accepts an unknown key with a warning: a fix may add
        // none, except the keys of a module not installed here (dlopen failed).
        if o == Oracle::Lighttpd {
            let unknown = |s: &str| -> BTreeSet<String> {
                s.lines()
                    .filter_map(|l| l.split("unknown config-key: ").nth(1))
                    .filter_map(|k| k.split_whitespace().next())
                    .map(str::to_string)
                    .collect()
            };
            let missing: Vec<String> = out
                .lines()
                .filter_map(|l| l.split("dlopen() failed for: ").nth(1))
                .filter_map(|p| p.split_whitespace().next())
                .filter_map(|p| {
                    Path::new(p)
                        .file_stem()
                        .map(|s| s.to_string_lossy().to_string())
                })
                .filter_map(|m| m.strip_prefix("mod_").map(|x| format!("{x}.")))
                .collect();
            for k in unknown(&out).difference(&unknown(&baseline)) {
                assert!(
                    missing.iter().any(|m| k.starts_with(m.as_str())),
                    "{tree}: the fix for {} adds a key lighttpd does not know: {k}\n{out}",
                    f.code
                );
            }
        }
        // The finding itself is gone after its fix.
        let after = analyze_as(o, &u.path(main));
        let moved = |g: &Finding| {
            g.file
                .replace(&u.0.display().to_string(), &t.0.display().to_string())
        };
        assert!(
            !after.findings.iter().any(|g| g.level != Level::Ok
                && g.code == f.code
                && g.message == f.message
                && moved(g) == f.file
                && g.line == f.line),
            "{tree}: {} is still there after its fix: {:#?}",
            f.code,
            after.findings
        );
        // Apache's own warning about MaxRequestWorkers is gone too.
        if f.code == "max_request_workers_over_limit" {
            assert!(
                out.contains("Syntax OK") && !out.contains("ServerLimit"),
                "{out}"
            );
        }
        n += 1;
    }
    assert!(n >= min, "{tree}: only {n} fixes pasted: {:#?}", r.findings);
    n
}

#[test]
fn every_fix_pastes_where_it_says_and_the_server_accepts_it() {
    let mut total = 0;
    for o in [Oracle::Nginx, Oracle::Apache, Oracle::Lighttpd] {
        if !require(o.dir(), o.bin().is_some()) {
            continue;
        }
        for name in grammar_fixtures(o) {
            if !name.starts_with("ok-") || name == "ok-lua-block" {
                continue;
            }
            total += paste_every_fix(o, &grammar_rel(o.dir(), &name), o.main(), 0);
        }
    }
    if require("apache2", Oracle::Apache.bin().is_some()) {
        total += paste_every_fix(Oracle::Apache, "debian-apache2", "apache2.conf", 3);
    }
    if require("nginx", Oracle::Nginx.bin().is_some()) {
        total += paste_every_fix(Oracle::Nginx, "debian-nginx", "nginx.conf", 2);
    }
    if require("lighttpd", Oracle::Lighttpd.bin().is_some()) {
        total += paste_every_fix(Oracle::Lighttpd, "lighttpd", "lighttpd.conf", 1);
    }
    eprintln!("{total} fixes pasted and accepted");
    assert!(total >= 25, "{total}");
}

// ---------------------------------------------------------------------------
// What each construct means, on the same fixtures.

fn grammar(o: Oracle, name: &str) -> (Tree, TuneReport) {
    let t = Tree::copy(&grammar_rel(o.dir(), name));
    let r = analyze_as(o, &t.path(o.main()));
    (t, r)
}

fn codes(r: &TuneReport) -> Vec<&str> {
    r.findings
        .iter()
        .filter(|f| f.level != Level::Ok)
        .map(|f| f.code.as_str())
        .collect()
}

#[test]
fn nginx_include_loop_is_reported_once() {
    let (t, r) = grammar(Oracle::Nginx, "bad-include-loop");
    let errs = parse_errors(&r);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(errs[0].message.contains("include loop"), "{errs:#?}");
    assert_eq!(
        (Path::new(&errs[0].file), errs[0].line),
        (t.path("loop.conf").as_path(), 1)
    );
}

#[test]
fn nginx_globs_read_in_order_and_time_units() {
    let (t, r) = grammar(Oracle::Nginx, "ok-include-globs");
    let files: Vec<&str> = r.files.iter().map(|s| s.as_str()).collect();
    let p = |s: &str| t.path(s).display().to_string();
    assert_eq!(
        files,
        [
            p("nginx.conf"),
            p("conf.d/a.conf"),
            p("conf.d/b.conf"),
            p("server.inc")
        ]
    );
    // keepalive_timeout 2m is 120 s; keepalive_requests 50 is low; both in http.
    let f = one(&r, "keepalive_timeout_high");
    assert!(f.message.contains("120"), "{}", f.message);
    assert_eq!(f.context, "http");
    assert_eq!(one(&r, "keepalive_requests_low").context, "http");
    assert!(!codes(&r).contains(&"sendfile_off"));
}

#[test]
fn nginx_lua_block_bodies_are_not_directives() {
    let (_t, r) = grammar(Oracle::Nginx, "ok-lua-block");
    assert!(parse_errors(&r).is_empty(), "{:#?}", r.findings);
    // The Lua body's `ngx.say(...)` is not read as a directive.
    let text = redline_watch::tune::render_text(&r);
    assert!(!text.contains("ngx.say"), "{text}");
}

#[test]
fn nginx_expires_fix_is_a_map_at_the_http_level_never_a_location() {
    let (t, r) = grammar(Oracle::Nginx, "ok-fix-placement");
    let f = one(&r, "no_expires");
    let fix = f.fix.as_ref().unwrap();
    // A new location would take URLs away from `location /` (a proxy_pass there).
    assert!(!fix.text.contains("location"), "{fix:#?}");
    assert!(
        fix.text
            .starts_with("map $sent_http_content_type $expires {\n    default off;"),
        "{fix:#?}"
    );
    assert!(fix.text.ends_with("\nexpires $expires;"), "{fix:#?}");
    assert_eq!(fix.context, "http");
    // Line 7 is `http {`.
    assert_eq!(
        (Path::new(&fix.file), fix.line),
        (t.path("nginx.conf").as_path(), 7)
    );
    // keepalive_timeout 0 at the http level is the server's: flagged.
    assert_eq!(one(&r, "keepalive_off").context, "http");
    // The sendfile off inside a location says so, and is replaced there.
    let f = one(&r, "sendfile_off");
    assert_eq!(
        f.context,
        "http > server (a.example 127.0.0.1:8080) > location /"
    );
    assert_eq!(f.fix.as_ref().unwrap().old, "sendfile off;");
}

#[test]
fn nginx_keepalive_off_in_one_location_is_that_locations_choice() {
    let (_t, r) = grammar(Oracle::Nginx, "ok-keepalive-off-in-a-health-check-location");
    assert!(codes(&r).is_empty(), "{:#?}", r.findings);
}

#[test]
fn nginx_upstream_keepalive_needs_http_1_1_and_an_empty_connection_header() {
    let (t, r) = grammar(Oracle::Nginx, "ok-upstream-keepalive-on-http-1.0");
    let v: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.code == "upstream_keepalive_unused")
        .collect();
    assert_eq!(v.len(), 2, "{:#?}", r.findings);
    for f in &v {
        assert_eq!(f.level, Level::Warn);
        assert_eq!(f.line, 16, "{f:#?}");
        assert!(f
            .message
            .contains("upstream app keeps idle connections (keepalive 16)"));
        let fix = f.fix.as_ref().unwrap();
        // Into the proxying location, after the line of its `{`.
        assert_eq!(
            (Path::new(&fix.file), fix.line),
            (t.path("nginx.conf").as_path(), 15)
        );
        assert_eq!(fix.context, "http > server (127.0.0.1:8080) > location /");
    }
    let texts: BTreeSet<&str> = v.iter().map(|f| f.change.as_str()).collect();
    assert_eq!(
        texts,
        [
            "proxy_http_version 1.1;",
            "proxy_set_header Connection \"\";"
        ]
        .into()
    );

    // Headers set in the server: the Connection header joins them there; the
    // location's own proxy_http_version 1.0 is replaced where it is.
    let (_t, r) = grammar(
        Oracle::Nginx,
        "ok-upstream-keepalive-headers-set-in-the-server",
    );
    let v: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.code == "upstream_keepalive_unused")
        .collect();
    assert_eq!(v.len(), 2, "{:#?}", r.findings);
    let version = v
        .iter()
        .find(|f| f.change.starts_with("proxy_http_version"))
        .unwrap();
    let fix = version.fix.as_ref().unwrap();
    assert_eq!(
        (fix.line, fix.old.as_str()),
        (19, "proxy_http_version 1.0;")
    );
    let conn = v
        .iter()
        .find(|f| f.change.starts_with("proxy_set_header"))
        .unwrap();
    let fix = conn.fix.as_ref().unwrap();
    assert_eq!(fix.context, "http > server (127.0.0.1:8080)", "{fix:#?}");

    let (_t, r) = grammar(Oracle::Nginx, "ok-upstream-keepalive-used");
    assert!(codes(&r).is_empty(), "{:#?}", r.findings);
}

#[test]
fn nginx_a_file_included_twice_gives_each_finding_once() {
    let (t, r) = grammar(Oracle::Nginx, "ok-file-included-twice");
    let f = one(&r, "sendfile_off");
    assert_eq!(
        (f.file.as_str(), f.line),
        (t.path("snippet.conf").to_str().unwrap(), 1)
    );
    assert!(
        f.context.contains("127.0.0.1:8080")
            && f.context.contains("also read in")
            && f.context.contains("127.0.0.1:8081"),
        "{f:#?}"
    );
    assert_eq!(r.files.len(), 2, "{:?}", r.files);
}

#[test]
fn nginx_a_vhost_given_alone_is_not_told_what_nginx_conf_sets() {
    let t = Tree::copy(&grammar_rel("nginx", "ok-vhost-given-alone"));
    let r = analyze_as(Oracle::Nginx, &t.path("vhost.conf"));
    assert_eq!(
        codes(&r),
        ["partial_config", "no_expires"],
        "{:#?}",
        r.findings
    );
    // The expires fix goes at the top of the vhost file, which nginx reads
    // at the http level, and the whole configuration still passes nginx -t.
    let fix = one(&r, "no_expires").fix.clone().unwrap();
    assert_eq!(
        (Path::new(&fix.file), fix.line),
        (t.path("vhost.conf").as_path(), 0)
    );
    if require("nginx", Oracle::Nginx.bin().is_some()) {
        let text = std::fs::read_to_string(t.path("vhost.conf")).unwrap();
        std::fs::write(t.path("vhost.conf"), fix.apply(&text).unwrap()).unwrap();
        let (ok, out) = Oracle::Nginx.test(&t.0, &t.path("nginx.conf"));
        assert!(ok, "{out}");
    }
}

#[test]
fn nginx_gzip_without_types_is_html_only() {
    let (_t, r) = grammar(Oracle::Nginx, "ok-gzip-on-default-types");
    assert_eq!(codes(&r), ["gzip_types_default"], "{:#?}", r.findings);
}

#[test]
fn apache_include_wildcard_that_matches_nothing_is_an_error_only_for_include() {
    let (_t, r) = grammar(Oracle::Apache, "bad-include-wildcard-no-match");
    let e = parse_errors(&r);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].line, 8);
    assert!(
        e[0].message
            .contains("no matches for the wildcard '*.none'"),
        "{}",
        e[0].message
    );
    let (_t, r) = grammar(Oracle::Apache, "ok-include-optional");
    assert!(parse_errors(&r).is_empty());
    assert!(r.files.iter().any(|f| f.ends_with("extra/b.conf")));
    let (_t, r) = grammar(Oracle::Apache, "bad-include-loop");
    assert_eq!(parse_errors(&r).len(), 1, "{:#?}", r.findings);
}

#[test]
fn apache_ifmodule_by_either_name_and_ifdefine() {
    let (_t, r) = grammar(Oracle::Apache, "ok-ifmodule-both-names");
    // The rewrite block is skipped (not loaded): no HostnameLookups On.
    assert!(
        !codes(&r).contains(&"hostname_lookups"),
        "{:#?}",
        r.findings
    );
    assert_eq!(r.threads_per_child, Some(25));
    let (_t, r) = grammar(Oracle::Apache, "ok-ifdefine-define");
    let f = one(&r, "hostname_lookups");
    assert_eq!(f.line, 12);
    assert_eq!(f.context, "<IfDefine SLOW> > <IfDefine !FAST>");
    assert!(f.message.contains("Double"), "{}", f.message);
}

#[test]
fn apache_a_statically_built_mpm_makes_its_ifmodule_blocks_count() {
    let t = Tree::copy("grammar/apache/ok-prefork-limits");
    let conf = t.path("httpd.conf");
    // The same config without the LoadModule line, against an httpd with prefork built in.
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        text.replace(
            "LoadModule mpm_prefork_module",
            "# LoadModule mpm_prefork_module",
        ),
    )
    .unwrap();
    let o = |statics: Vec<String>| TuneOptions {
        server: Some(Server::Apache),
        static_modules: Some(statics),
        ..opts()
    };
    let r = analyze(&conf, &o(vec![])).unwrap();
    assert_eq!(r.mpm, None);
    assert!(!codes(&r).contains(&"max_connections_per_child_low"));
    let r = analyze(&conf, &o(vec!["core.c".into(), "prefork.c".into()])).unwrap();
    assert_eq!(r.mpm.as_deref(), Some("prefork"));
    assert!(
        codes(&r).contains(&"max_connections_per_child_low"),
        "{:#?}",
        r.findings
    );
    assert!(codes(&r).contains(&"max_request_workers_over_limit"));
}

#[test]
fn apache_vhosts_on_one_address_stay_apart() {
    let (_t, r) = grammar(Oracle::Apache, "ok-vhosts-on-one-address");
    let f = one(&r, "hostname_lookups");
    assert_eq!(f.line, 11);
    assert_eq!(
        f.context,
        "<VirtualHost 127.0.0.1:8080> (ServerName a.example)"
    );
}

#[test]
fn apache_options_merge_plus_and_minus() {
    let (_t, r) = grammar(Oracle::Apache, "ok-options-merging");
    // /srv/a: SymLinksIfOwnerMatch added by the second line; /srv/b: removed again.
    let f = one(&r, "symlinks_if_owner_match");
    assert_eq!(f.line, 10);
    assert_eq!(f.change, "Options +FollowSymLinks -Indexes");
    let (_t, r) = grammar(Oracle::Apache, "bad-options-mixed-signs");
    assert!(parse_errors(&r)[0].message.contains("either all Options"));
}

#[test]
fn apache_mpm_limits_name_the_server_limit_needed() {
    let (_t, r) = grammar(Oracle::Apache, "ok-prefork-limits");
    let f = one(&r, "max_request_workers_over_limit");
    assert!(f.message.contains("above ServerLimit 256"), "{}", f.message);
    assert_eq!(f.change, "ServerLimit 400\nMaxRequestWorkers 400");
    assert_eq!(f.context, "<IfModule mpm_prefork_module>");
    assert!(one(&r, "spare_servers")
        .message
        .contains("MaxSpareServers 500"));
    assert!(codes(&r).contains(&"max_connections_per_child_low"));
    let (_t, r) = grammar(Oracle::Apache, "ok-event-limits");
    let f = one(&r, "max_request_workers_over_limit");
    assert!(
        f.message
            .contains("ServerLimit 4 × ThreadsPerChild 25 = 100"),
        "{}",
        f.message
    );
    // ServerLimit is set: the fix raises it where it is (1000 / 25 = 40).
    assert_eq!(f.fix.as_ref().unwrap().old, "ServerLimit 4");
    assert_eq!(f.change, "ServerLimit 40");
    assert!(one(&r, "spare_threads")
        .message
        .contains("MinSpareThreads 2000"));
}

#[test]
fn apache_loaded_is_not_configured() {
    let (_t, r) = grammar(Oracle::Apache, "ok-deflate-not-applied");
    let f = one(&r, "no_compression");
    assert!(f.message.contains("no filter applies it"), "{}", f.message);
    assert!(f.change.contains("AddOutputFilterByType DEFLATE text/html"));
    let f = one(&r, "no_expires");
    assert!(
        f.message.contains("loaded but no ExpiresActive On"),
        "{}",
        f.message
    );
}

#[test]
fn apache_rewrite_is_never_unused_under_allowoverride_all() {
    let (_t, r) = grammar(Oracle::Apache, "ok-rewrite-via-allowoverride");
    let unused: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.code == "module_unused" && f.level != Level::Ok)
        .collect();
    assert_eq!(unused.len(), 1, "{unused:#?}");
    assert!(unused[0].message.contains("userdir_module"));
    assert!(r.findings.iter().any(|f| f.code == "module_unused"
        && f.level == Level::Ok
        && f.message.contains("rewrite_module")));
}

#[test]
fn apache_htaccess_by_name_or_flag() {
    let t = Tree::copy("lighttpd");
    let text = "<IfModule mod_rewrite.c>\nRewriteEngine On\nRewriteRule ^x$ /y [L]\n</IfModule>\nOptions +SymLinksIfOwnerMatch\nKeepAlive Off\n<Directory /x>\n</Directory>\n";
    let by_name = t.write("site/.htaccess", text);
    let other = t.write("site/rules.txt", text);
    for (p, flag) in [(&by_name, false), (&other, true)] {
        // By name, the server and the kind of file are guessed; else both are given.
        let r = analyze(
            p,
            &TuneOptions {
                server: flag.then_some(Server::Apache),
                htaccess: flag,
                ..opts()
            },
        )
        .unwrap();
        assert_eq!(r.server, Server::Apache);
        let e: Vec<(usize, &str)> = parse_errors(&r)
            .iter()
            .map(|f| (f.line, f.message.as_str()))
            .collect();
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].1.starts_with("KeepAlive is not allowed in .htaccess") && e[0].0 == 6);
        assert!(e[1].1.starts_with("<Directory> is not allowed") && e[1].0 == 7);
        // <IfModule mod_rewrite.c> is read (an .htaccess cannot know), no LoadModule advice.
        assert!(
            r.findings.iter().all(|f| !f.change.contains("LoadModule")),
            "{:#?}",
            r.findings
        );
        assert_eq!(one(&r, "symlinks_if_owner_match").line, 5);
        assert!(
            !codes(&r).contains(&"timeout_high") && !codes(&r).contains(&"sendfile_default_off")
        );
    }
}

#[test]
fn lighttpd_variables_concatenation_and_conditionals() {
    let (t, r) = grammar(Oracle::Lighttpd, "ok-variables-and-concatenation");
    assert!(r
        .files
        .iter()
        .any(|f| Path::new(f) == t.path("conf/modules.conf")));
    assert!(r.modules.contains(&"mod_deflate".to_string()));
    assert!(!codes(&r).contains(&"no_compression"), "{:#?}", r.findings);
    assert_eq!(one(&r, "keepalive_timeout_high").line, 1);
    let (_t, r) = grammar(Oracle::Lighttpd, "ok-conditionals");
    // Settings in conditionals are theirs, never server-wide.
    let ka: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.code == "keepalive_off" && f.level != Level::Ok)
        .collect();
    assert_eq!(ka.len(), 1);
    assert_eq!(ka[0].context, "$HTTP[\"host\"] == \"a.example\"");
    let idle: BTreeSet<(usize, String)> = r
        .findings
        .iter()
        .filter(|f| f.code == "keepalive_timeout_high")
        .map(|f| (f.line, f.context.clone()))
        .collect();
    assert_eq!(
        idle,
        [
            (9, "$HTTP[\"host\"] == \"b.example\"".to_string()),
            (15, "$HTTP[\"host\"] == \"c.example\"".to_string()),
            (18, "$HTTP[\"host\"] == \"d.example\"".to_string()),
        ]
        .into()
    );
    let (_t, r) = grammar(Oracle::Lighttpd, "ok-else-without-condition");
    assert!(codes(&r).contains(&"unusual_syntax"));
}

/// lighttpd 1.4.69's grammar, each construct in its own fixture (held to
/// `lighttpd -tt` by `grammar_fixtures_agree_with_each_servers_config_test`).
#[test]
fn lighttpd_bare_variables_append_replace_and_includes_as_lighttpd_reads_them() {
    // A bare `server_root = "/x"` is var.server_root: no parse error, and the
    // mod_deflate loaded after it is seen (the false "not in server.modules").
    let (_t, r) = grammar(Oracle::Lighttpd, "ok-bare-variables");
    assert!(parse_errors(&r).is_empty(), "{:#?}", r.findings);
    assert!(r.modules.contains(&"mod_deflate".to_string()), "{r:#?}");
    assert!(!codes(&r).contains(&"no_compression"), "{:#?}", r.findings);
    let a = redline_watch::tune::lighttpd::assignments(&_t.path("lighttpd.conf"));
    let val = |k: &str| a.iter().find(|x| x.key == k).map(|x| x.val.clone());
    use redline_watch::tune::lighttpd::Val;
    assert_eq!(val("var.server_root"), Some(Val::Str("/tmp".into())));
    assert_eq!(
        val("server.errorlog"),
        Some(Val::Str("/tmp/redline-lighttpd-error.log".into()))
    );

    // `+=` adds, `:=` replaces: mod_deflate loaded, the idle time is 5, not 30.
    let (t, r) = grammar(Oracle::Lighttpd, "ok-append-and-replace");
    assert!(parse_errors(&r).is_empty(), "{:#?}", r.findings);
    assert!(r.modules.contains(&"mod_deflate".to_string()));
    assert!(
        !codes(&r).contains(&"keepalive_timeout_high"),
        "{:#?}",
        r.findings
    );
    let a = redline_watch::tune::lighttpd::assignments(&t.path("lighttpd.conf"));
    let cond = a
        .iter()
        .find(|x| x.key == "deflate.mimetypes" && !x.cond.is_empty())
        .unwrap();
    assert_eq!(cond.val.strings(), vec!["text/", "application/json"]);

    // Includes are relative to the main file's directory, also from an included file.
    let (t, r) = grammar(Oracle::Lighttpd, "ok-include-relative-to-main-file");
    assert!(parse_errors(&r).is_empty(), "{:#?}", r.findings);
    assert!(r.files.iter().any(|f| Path::new(f) == t.path("extra.conf")));
    assert!(r.modules.contains(&"mod_deflate".to_string()));
    let (t, r) = grammar(Oracle::Lighttpd, "bad-include-relative-to-including-file");
    let e = parse_errors(&r);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(
        (e[0].file.as_str(), e[0].line),
        (t.path("conf.d/site.conf").to_str().unwrap(), 1)
    );
    assert!(e[0].message.contains("extra.conf"), "{e:#?}");

    // Refused: `=` twice in one context, an env. variable set, a bare name used before it is set.
    for (name, line, words) in [
        (
            "bad-duplicate-setting",
            4,
            "duplicate config variable server.port",
        ),
        ("bad-setting-an-env-variable", 4, "env.REDLINE_X"),
        (
            "bad-unknown-bare-variable",
            3,
            "unknown variable var.server_root",
        ),
    ] {
        let (_t, r) = grammar(Oracle::Lighttpd, name);
        let e = parse_errors(&r);
        assert_eq!(e.len(), 1, "{name}: {e:#?}");
        assert_eq!(e[0].line, line, "{name}: {e:#?}");
        assert!(e[0].message.contains(words), "{name}: {e:#?}");
    }
    // After the unknown variable, the rest is still read: server_root is set
    // on line 5 and the port on line 4.
    let (t, _r) = grammar(Oracle::Lighttpd, "bad-unknown-bare-variable");
    let a = redline_watch::tune::lighttpd::assignments(&t.path("lighttpd.conf"));
    assert!(a.iter().any(|x| x.key == "server.port"));
    assert!(a.iter().any(|x| x.key == "var.server_root"));
}

/// Strings side by side (a forgotten comma): lighttpd 1.4.69 accepts the
/// line and keeps the first only; tune reads it so and names the dropped one.
#[test]
fn lighttpd_adjacent_strings_keep_only_the_first() {
    let (_t, r) = grammar(Oracle::Lighttpd, "ok-adjacent-strings-keep-the-first");
    assert!(parse_errors(&r).is_empty(), "{:#?}", r.findings);
    assert_eq!(r.modules, ["mod_access"]);
    let f = one(&r, "unusual_syntax");
    assert_eq!(f.line, 5);
    assert!(f.message.contains("\"mod_deflate\""), "{f:#?}");
    assert!(codes(&r).contains(&"no_compression"));
}

/// An include_shell redline does not run: a verdict on something missing
/// says it depends on it and is not a warning; nothing is executed.
#[test]
fn lighttpd_findings_that_depend_on_an_include_shell_say_so() {
    let (t, r) = grammar(Oracle::Lighttpd, "ok-include-shell-judged-with-care");
    let note = one(&r, "include_shell_not_run");
    assert_eq!(note.line, 6);
    let deflate = r
        .findings
        .iter()
        .find(|f| f.code == "no_compression")
        .unwrap();
    assert_eq!(deflate.level, Level::Info, "{deflate:#?}");
    let at = format!("{}:6", t.path("lighttpd.conf").display());
    assert!(
        deflate.message.contains("not known for sure") && deflate.message.contains(&at),
        "{deflate:#?}"
    );
    // Without the include_shell, the same config gets the warning.
    let plain = t.write(
        "plain.conf",
        "server.document-root = \"/tmp\"\nserver.port = 8080\n",
    );
    let r = analyze_as(Oracle::Lighttpd, &plain);
    let deflate = one(&r, "no_compression");
    assert_eq!(deflate.level, Level::Warn);
    assert!(!deflate.message.contains("include_shell"));
}

#[test]
fn special_and_binary_files_are_refused_without_blocking() {
    let t = Tree::copy("lighttpd");
    let fifo = t.path("fifo.conf");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let bin = t.path("bin.conf");
    std::fs::write(&bin, b"server.port = 80\n\0\x01\x02").unwrap();
    for (p, word) in [(&fifo, "not a regular file"), (&bin, "binary")] {
        let e = analyze(p, &opts()).unwrap_err();
        assert!(e.contains(word) && !e.contains('\n'), "{e}");
    }
    assert!(analyze(&t.0, &opts())
        .unwrap_err()
        .contains("is a directory"));
    // Included: one finding each, the rest still read.
    let main = t.write(
        "n/nginx.conf",
        &format!(
            "events {{}}\nhttp {{\n include {};\n include {};\n include {};\n sendfile off;\n}}\n",
            fifo.display(),
            bin.display(),
            t.0.display()
        ),
    );
    let r = analyze_as(Oracle::Nginx, &main);
    let e: Vec<usize> = parse_errors(&r).iter().map(|f| f.line).collect();
    assert_eq!(e, [3, 4, 5], "{:#?}", r.findings);
    assert_eq!(one(&r, "sendfile_off").line, 6);
}

// ---------------------------------------------------------------------------
// .htaccess: Apache reads it per request, so the oracle is a real Apache
// (its own config, a loopback port picked by binding 0, AllowOverride All)
// answering 200 or 500 for a page under the .htaccess.

/// An Apache started by the test, watched by its PID and killed at the end.
struct Httpd {
    child: std::process::Child,
    port: u16,
    tree: Tree,
}

impl Drop for Httpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Httpd {
    fn start() -> Option<Httpd> {
        let bin = Oracle::Apache.bin()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let tree = Tree::copy("grammar/htaccess/ok-site");
        let root = tree.0.clone();
        // Only the site's .htaccess is read.
        std::fs::remove_file(root.join(".htaccess")).unwrap();
        let m = "/usr/lib/apache2/modules";
        std::fs::create_dir_all(root.join("logs")).unwrap();
        std::fs::create_dir_all(root.join("www")).unwrap();
        std::fs::write(root.join("www/index.html"), "hello\n").unwrap();
        let conf = format!(
            "LoadModule mpm_event_module {m}/mod_mpm_event.so\nLoadModule authz_core_module {m}/mod_authz_core.so\nLoadModule rewrite_module {m}/mod_rewrite.so\nLoadModule expires_module {m}/mod_expires.so\nLoadModule headers_module {m}/mod_headers.so\nLoadModule filter_module {m}/mod_filter.so\nLoadModule deflate_module {m}/mod_deflate.so\nServerName localhost\nListen 127.0.0.1:{port}\nErrorLog logs/error.log\nPidFile logs/httpd.pid\nUser nobody\nGroup nogroup\nDocumentRoot {r}/www\n<Directory />\nAllowOverride None\n</Directory>\n<Directory {r}/www>\nAllowOverride All\nRequire all granted\n</Directory>\n",
            r = root.display()
        );
        std::fs::write(root.join("httpd.conf"), conf).unwrap();
        let _ = std::process::Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(&root)
            .status();
        let child = std::process::Command::new(bin)
            .arg("-X")
            .arg("-d")
            .arg(&root)
            .arg("-f")
            .arg(root.join("httpd.conf"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let mut h = Httpd { child, port, tree };
        for _ in 0..200 {
            if let Ok(Some(_)) = h.child.try_wait() {
                return None;
            }
            if h.status().is_some() {
                return Some(h);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        None
    }

    /// The status code for /index.html, None when nothing answers.
    fn status(&self) -> Option<u16> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .ok()?;
        s.write_all(b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .ok()?;
        let mut buf = Vec::new();
        let _ = s.take(64 * 1024).read_to_end(&mut buf);
        let head = String::from_utf8_lossy(&buf);
        head.split_whitespace().nth(1)?.parse().ok()
    }

    /// Puts `text` as the site's .htaccess and asks for the page.
    fn with_htaccess(&self, text: &str) -> u16 {
        let p = self.tree.0.join("www/.htaccess");
        std::fs::write(&p, text).unwrap();
        let _ = std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o644));
        self.status().expect("apache answers")
    }
}

#[test]
fn htaccess_verdicts_agree_with_a_real_apache_and_fixes_keep_it_serving() {
    if !require("apache2", Oracle::Apache.bin().is_some()) {
        return;
    }
    let Some(h) = Httpd::start() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "apache2 did not start"
        );
        eprintln!("note: apache2 did not start; skipped");
        return;
    };
    let mut n = 0;
    for name in [
        "ok-site",
        "bad-server-directive",
        "bad-directory-section",
        "bad-loadmodule",
    ] {
        let t = Tree::copy(&format!("grammar/htaccess/{name}"));
        let p = t.path(".htaccess");
        let text = std::fs::read_to_string(&p).unwrap();
        let code = h.with_htaccess(&text);
        let r = analyze(&p, &opts()).unwrap();
        let errs = parse_errors(&r);
        let log = || std::fs::read_to_string(h.tree.0.join("logs/error.log")).unwrap_or_default();
        if name.starts_with("ok-") {
            assert_eq!(code, 200, "{name}: {}", log());
            assert!(errs.is_empty(), "{name}: {errs:#?}");
            // Each fix pasted where it says: Apache still serves the page.
            for f in r.findings.iter().filter(|f| f.fix.is_some()) {
                let fix = f.fix.as_ref().unwrap();
                let pasted = fix.apply(&text).unwrap();
                assert_eq!(h.with_htaccess(&pasted), 200, "{}: {pasted}", f.code);
                n += 1;
            }
        } else {
            assert_eq!(code, 500, "{name}");
            assert_eq!(errs.len(), 1, "{name}: {:#?}", r.findings);
        }
    }
    assert!(n >= 2, "{n} fixes pasted");
}

/// Cut and corrupted versions of every fixture never panic or hang: each
/// prefix (every 17th byte) and each special character put at every 53rd
/// byte, read as that server's file.
#[test]
fn cut_and_corrupted_configs_never_panic() {
    let t = Tree::copy("lighttpd");
    let mut n = 0;
    for o in [Oracle::Nginx, Oracle::Apache, Oracle::Lighttpd] {
        for name in grammar_fixtures(o) {
            let text =
                std::fs::read(fixtures().join(grammar_rel(o.dir(), &name)).join(o.main())).unwrap();
            let p = t.path(o.main());
            let mut variants: Vec<Vec<u8>> = (0..text.len())
                .step_by(17)
                .map(|i| text[..i].to_vec())
                .collect();
            for i in (0..text.len()).step_by(53) {
                for c in b"{};\"'\\#$()[]=+\n\xc3" {
                    let mut v = text.clone();
                    v.insert(i, *c);
                    variants.push(v);
                }
            }
            for v in variants {
                std::fs::write(&p, &v).unwrap();
                let r = analyze_as(o, &p);
                assert_eq!(r.server, o.server());
                n += 1;
            }
        }
    }
    eprintln!("{n} variants read");
    assert!(n > 500, "{n}");
}

/// Directives by context: those `tune` calls not allowed in an .htaccess
/// make a real Apache answer 500 there; the allowed ones leave it at 200.
#[test]
fn htaccess_directive_contexts_agree_with_a_real_apache() {
    if !require("apache2", Oracle::Apache.bin().is_some()) {
        return;
    }
    let Some(h) = Httpd::start() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "apache2 did not start"
        );
        eprintln!("note: apache2 did not start; skipped");
        return;
    };
    let refused = [
        "Timeout 30",
        "KeepAlive On",
        "KeepAliveTimeout 5",
        "MaxKeepAliveRequests 100",
        "HostnameLookups Off",
        "ServerName example.org",
        "ServerAlias www.example.org",
        "ServerAdmin root@example.org",
        "DocumentRoot /tmp",
        "ErrorLog /tmp/x.log",
        "LogLevel warn",
        "Listen 127.0.0.1:9",
        "Define X",
        "UseCanonicalName Off",
        "LimitRequestFields 100",
        "AllowOverride None",
        "AccessFileName .ht",
        "TraceEnable Off",
        "ServerTokens Prod",
        "MaxRequestWorkers 10",
        "LoadModule status_module /usr/lib/apache2/modules/mod_status.so",
        "Include /dev/null",
    ];
    let allowed = [
        "Options -Indexes",
        "ErrorDocument 404 /missing.html",
        "AddDefaultCharset utf-8",
        "FileETag None",
        "EnableSendfile On",
        "EnableMMAP On",
        "ServerSignature Off",
        "ExpiresActive On",
        "Header set X-Test 1",
        "RewriteEngine On",
        "<IfModule mod_deflate.c>\nSetOutputFilter DEFLATE\n</IfModule>",
        "<Files \"x\">\nRequire all denied\n</Files>",
    ];
    let t = Tree::copy("grammar/htaccess/ok-site");
    let p = t.path(".htaccess");
    for (lines, want) in [(&refused[..], 500), (&allowed[..], 200)] {
        for line in lines {
            let text = format!("{line}\n");
            assert_eq!(h.with_htaccess(&text), want, "{line}");
            std::fs::write(&p, &text).unwrap();
            let r = analyze(&p, &opts()).unwrap();
            assert_eq!(
                parse_errors(&r).len(),
                usize::from(want == 500),
                "{line}: {:#?}",
                r.findings
            );
        }
    }
}

#[test]
fn apache_server_limit_far_above_the_need() {
    let (_t, r) = grammar(Oracle::Apache, "ok-server-limit-high");
    let f = one(&r, "server_limit_high");
    assert_eq!(f.line, 9);
    assert!(f.message.contains("needs 6"), "{}", f.message);
    assert_eq!(f.change, "ServerLimit 16");
}

#[test]
fn compiled_in_modules_are_what_apache2_l_lists() {
    let Some(bin) = Oracle::Apache.bin() else {
        require("apache2", false);
        return;
    };
    let out = std::process::Command::new(bin).arg("-l").output().unwrap();
    let listed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| l.ends_with(".c"))
        .map(str::to_string)
        .collect();
    let got = redline_watch::tune::apache::compiled_in().unwrap();
    assert_eq!(got, listed);
    assert!(got.iter().any(|m| m == "core.c"));
    // Each is a module id <IfModule> matches: core.c is core_module.
    assert_eq!(
        redline_watch::tune::apache::module_id("core.c"),
        "core_module"
    );
    assert_eq!(
        redline_watch::tune::apache::module_id("prefork.c"),
        "mpm_prefork_module"
    );
    assert_eq!(
        redline_watch::tune::apache::module_id("mod_rewrite.c"),
        "rewrite_module"
    );
    assert_eq!(
        redline_watch::tune::apache::module_id("http_core.c"),
        "http_module"
    );
}

#[test]
fn nginx_fix_into_a_one_line_block_goes_right_after_its_brace() {
    let (_t, r) = grammar(Oracle::Nginx, "ok-one-line-blocks");
    let fix = one(&r, "sendfile_off").fix.clone().unwrap();
    assert_eq!(
        (fix.old.as_str(), fix.text.as_str()),
        ("http {", "http {\nsendfile on;")
    );
    let fix = one(&r, "no_expires").fix.clone().unwrap();
    assert_eq!(fix.old, "http {");
    assert!(
        fix.text.starts_with("http {\nmap $sent_http_content_type "),
        "{}",
        fix.text
    );
    assert_eq!(fix.context, "http");
}

#[test]
fn lighttpd_newer_conditional_words_are_read_and_named() {
    let (_t, r) = grammar(Oracle::Lighttpd, "ok-conditional-words-of-1.4.74");
    let notes: Vec<usize> = r
        .findings
        .iter()
        .filter(|f| f.code == "unusual_syntax")
        .map(|f| f.line)
        .collect();
    assert_eq!(notes, [6, 9, 12], "{:#?}", r.findings);
    let idle: Vec<String> = r
        .findings
        .iter()
        .filter(|f| f.code == "keepalive_timeout_high")
        .map(|f| f.context.clone())
        .collect();
    assert_eq!(idle.len(), 3, "{idle:?}");
    assert!(idle[2].contains("c.example"), "{idle:?}");
    let (_t, r) = grammar(Oracle::Lighttpd, "ok-conditional-else-if");
    assert_eq!(one(&r, "unusual_syntax").line, 7);
    let f: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.code == "keepalive_timeout_high")
        .collect();
    assert_eq!(f[1].context, "$HTTP[\"host\"] == \"d.example\"");
}

/// `lighttpd -p` prints the configuration as lighttpd read it: each setting
/// in its conditional block. tune must put every setting in the same block
/// (the innermost condition; "" for server-wide).
#[test]
fn lighttpd_settings_sit_in_the_blocks_lighttpd_p_prints() {
    let Some(bin) = Oracle::Lighttpd.bin() else {
        require("lighttpd", false);
        return;
    };
    let mut compared = 0;
    for name in grammar_fixtures(Oracle::Lighttpd) {
        if !name.starts_with("ok-") {
            continue;
        }
        let t = Tree::copy(&grammar_rel("lighttpd", &name));
        let conf = t.path("lighttpd.conf");
        if codes(&analyze_as(Oracle::Lighttpd, &conf)).contains(&"unusual_syntax") {
            continue; // 1.4.74 syntax: this lighttpd reads it otherwise, as tune says.
        }
        let mut cmd = std::process::Command::new(&bin);
        cmd.arg("-p").arg("-f").arg(&conf).current_dir(&t.0);
        let (ok, out) = run_bounded(cmd);
        assert!(ok, "{name}: {out}");
        // (key, innermost condition) from -p's blocks.
        let mut stack: Vec<String> = Vec::new();
        let mut printed: BTreeSet<(String, String)> = BTreeSet::new();
        for l in out.lines().map(str::trim) {
            if l == "config {" {
                continue;
            }
            if let Some(head) = l.strip_suffix(" {") {
                if !head.contains(" = ") {
                    let head = head.strip_prefix("else ").unwrap_or(head);
                    stack.push(if head == "else" {
                        "else".into()
                    } else {
                        head.to_string()
                    });
                    continue;
                }
            }
            if l.starts_with('}') {
                stack.pop();
                continue;
            }
            let Some((k, _)) = l.split_once(" = ") else {
                continue;
            };
            let k = k.trim();
            if k.contains('.') && !k.contains(' ') && !k.starts_with("var.") && !k.starts_with('"')
            {
                printed.insert((k.to_string(), stack.last().cloned().unwrap_or_default()));
            }
        }
        let read: BTreeSet<(String, String)> = redline_watch::tune::lighttpd::assignments(&conf)
            .into_iter()
            .filter(|a| !a.key.starts_with("var."))
            .map(|a| {
                let c = a.cond.last().cloned().unwrap_or_default();
                let c = if c.starts_with("else (not ") {
                    "else".into()
                } else {
                    c
                };
                (a.key, c)
            })
            .collect();
        assert_eq!(read, printed, "{name}: lighttpd -p printed\n{out}");
        compared += 1;
    }
    assert!(compared >= 6, "{compared}");
}

/// `apache2 -t -D DUMP_CONFIG` (mod_info) prints every directive Apache
/// keeps after evaluating <IfModule>, <IfDefine> and the includes, each
/// with its file and line, inside its sections. tune must keep exactly
/// those, in the same sections.
#[test]
fn apache_directives_kept_are_those_apache2_dump_config_prints() {
    if !require("apache2", Oracle::Apache.bin().is_some()) {
        return;
    }
    let info = Path::new("/usr/lib/apache2/modules/mod_info.so");
    if !require("mod_info (apache2)", info.is_file()) {
        return;
    }
    let mut trees: Vec<(String, &str)> = grammar_fixtures(Oracle::Apache)
        .into_iter()
        .filter(|n| n.starts_with("ok-"))
        .map(|n| (grammar_rel("apache", &n), "httpd.conf"))
        .collect();
    trees.push(("debian-apache2".into(), "apache2.conf"));
    // Not in the dump: what Apache acts on while reading.
    let reading = [
        "defaultruntimedir",
        "serverroot",
        "loadmodule",
        "define",
        "undefine",
        "include",
        "includeoptional",
    ];
    for (tree, main) in &trees {
        let t = Tree::copy(tree);
        let conf = t.path(main);
        // mod_info, loaded after everything (the lines above keep their numbers).
        let mut text = std::fs::read_to_string(&conf).unwrap();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("LoadModule info_module {}\n", info.display()));
        std::fs::write(&conf, &text).unwrap();
        let logs = t.path("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let mut cmd = std::process::Command::new(Oracle::Apache.bin().unwrap());
        cmd.args(["-t", "-D", "DUMP_CONFIG", "-d"])
            .arg(&t.0)
            .arg("-f")
            .arg(&conf)
            .env("APACHE_RUN_USER", "www-data")
            .env("APACHE_RUN_GROUP", "www-data")
            .env("APACHE_PID_FILE", logs.join("apache2.pid"))
            .env("APACHE_RUN_DIR", &logs)
            .env("APACHE_LOCK_DIR", &logs)
            .env("APACHE_LOG_DIR", &logs);
        let (ok, out) = run_bounded(cmd);
        assert!(ok, "{tree}: {out}");
        // (file, line, the sections it is in: `virtualhost/directory`).
        let mut dumped: BTreeSet<(String, usize, String)> = BTreeSet::new();
        let (mut file, mut line) = (String::new(), 0usize);
        let mut sections: Vec<String> = Vec::new();
        for l in out.lines() {
            let l = l.trim();
            if let Some(f) = l.strip_prefix("# In file: ") {
                file = f.to_string();
            } else if let Some(n) = l.strip_prefix('#').and_then(|r| r.trim().strip_suffix(':')) {
                line = n.trim().parse().unwrap_or(0);
            } else if l.starts_with("</") {
                sections.pop();
            } else if let Some(open) = l.strip_prefix('<') {
                let kind = open
                    .split(|c: char| c.is_whitespace() || c == '>')
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                sections.push(kind);
                line = 0;
            } else if !l.is_empty() && line > 0 && !l.starts_with("Syntax OK") {
                dumped.insert((file.clone(), line, sections.join("/")));
                line = 0;
            }
        }
        let c = with_server_root(conf.parent().unwrap(), || {
            redline_watch::tune::apache::read(&conf)
        });
        let kept: BTreeSet<(String, usize, String)> = c
            .directives
            .iter()
            .filter(|d| !reading.contains(&d.name.as_str()))
            // Apache numbers a continued directive by its last line.
            .map(|d| {
                let kinds: Vec<&str> = d
                    .path
                    .iter()
                    .map(|&i| &c.sections[i])
                    .filter(|s| !s.conditional)
                    .map(|s| s.kind.as_str())
                    .collect();
                (d.file.display().to_string(), d.end_line, kinds.join("/"))
            })
            .collect();
        let only_tune: Vec<_> = kept.difference(&dumped).collect();
        let only_apache: Vec<_> = dumped.difference(&kept).collect();
        assert!(
            only_tune.is_empty() && only_apache.is_empty(),
            "{tree}: kept by tune only: {only_tune:?}; printed by apache2 -D DUMP_CONFIG only: {only_apache:?}"
        );
    }
}

/// `apache2 -t -D DUMP_VHOSTS` names each virtual host by its ServerName and
/// the file and line of its <VirtualHost>: tune keys the same hosts by the
/// same names (so name-based hosts on one address stay apart).
#[test]
fn apache_virtual_hosts_are_those_apache2_dump_vhosts_names() {
    if !require("apache2", Oracle::Apache.bin().is_some()) {
        return;
    }
    let mut compared = 0;
    for name in ["ok-vhosts-on-one-address", "ok-common-site-snippets"] {
        let t = Tree::copy(&grammar_rel("apache", name));
        let conf = t.path("httpd.conf");
        std::fs::create_dir_all(t.path("logs")).unwrap();
        let mut cmd = std::process::Command::new(Oracle::Apache.bin().unwrap());
        cmd.args(["-t", "-D", "DUMP_VHOSTS", "-d"])
            .arg(&t.0)
            .arg("-f")
            .arg(&conf);
        let (ok, out) = run_bounded(cmd);
        assert!(ok, "{name}: {out}");
        let dumped: BTreeSet<(String, String, usize)> = out
            .lines()
            // `... namevhost NAME (FILE:LINE)`, `default server NAME (...)`, `ADDR NAME (...)`
            .filter_map(|l| {
                let (head, at) = l.trim().rsplit_once(" (")?;
                let host = head.split_whitespace().last()?;
                let (file, line) = at.strip_suffix(')')?.rsplit_once(':')?;
                Some((host.to_string(), file.to_string(), line.parse().ok()?))
            })
            .collect();
        let c = with_server_root(conf.parent().unwrap(), || {
            redline_watch::tune::apache::read(&conf)
        });
        let vhosts: BTreeSet<(String, String, usize)> = c
            .sections
            .iter()
            .filter(|s| s.kind == "virtualhost")
            .map(|s| {
                (
                    s.server_name.clone().unwrap_or_default(),
                    s.file.display().to_string(),
                    s.line,
                )
            })
            .collect();
        assert!(!dumped.is_empty(), "{name}: {out}");
        assert_eq!(vhosts, dumped, "{name}: {out}");
        compared += dumped.len();
    }
    assert!(compared >= 3, "{compared}");
}
