//! `tune` against fixture configs: the stock Debian apache2 and nginx trees
//! (copied from the packages), and one variant per bad setting. Each finding
//! must appear exactly when its setting is there, at the right file and line.

use redline_watch::tune::{analyze, Finding, Level, Server, TuneOptions, TuneReport};
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
    let f = one(&r, "no_compression");
    assert!(
        f.change
            .contains("LoadModule deflate_module /usr/lib/apache2/modules/mod_deflate.so"),
        "{}",
        f.change
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
        f.change.starts_with("MaxRequestWorkers 125\n"),
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
    let t = Tree::copy("debian-apache2");
    let r = apache(&t);
    let f = one(&r, "no_expires");
    assert!(
        f.change.contains("a2enmod expires")
            && f.change
                .contains("\nLoadModule expires_module /usr/lib/apache2/modules/mod_expires.so\n")
            && f.change.contains("\nExpiresActive On\n")
            && f.change.contains("ExpiresByType text/css"),
        "{}",
        f.change
    );
    assert!(
        !f.change.contains(" modules/mod_expires.so"),
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
    assert!(f.change.contains("a2dismod rewrite"), "{}", f.change);
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
