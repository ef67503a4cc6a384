//! Apache semantics of `tune` (issue 34, point 4), each held to a real
//! `apache2 -t` where Apache is installed: the ServerRoot relative paths
//! are read from, `<If>`/`<ElseIf>`/`<Else>` as conditions, ServerLimit
//! raised with MaxRequestWorkers in one fix per line, and Debian's
//! a2enmod/a2enconf layout for module and conf fixes.

use redline_testkit::need::require;
use redline_watch::tune::apache::{default_server_root, httpd_root, with_server_root};
use redline_watch::tune::{analyze, apply_all, Finding, Level, Server, TuneOptions, TuneReport};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tune/apache")
        .join(name)
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

/// A copy of a fixture folder in a fresh temp folder, removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn of(from: &Path, tag: &str) -> Tree {
        let d = redline_testkit::tmpdir(tag);
        copy_dir(from, &d);
        Tree(d)
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn apache2() -> Option<PathBuf> {
    let p = Path::new("/usr/sbin/apache2");
    p.is_file().then(|| p.to_path_buf())
}

/// `apache2 -t -f CONF` (with `-d ROOT` when given), as a user runs it;
/// Debian's envvars set for a Debian tree. (accepted, what it printed)
fn apache_test(conf: &Path, root: Option<&Path>) -> (bool, String) {
    let logs = redline_testkit::tmpdir("tune-apache-logs");
    let mut cmd = Command::new(apache2().unwrap());
    cmd.arg("-t").arg("-f").arg(conf);
    if let Some(r) = root {
        cmd.arg("-d").arg(r);
    }
    cmd.env("APACHE_RUN_USER", "www-data")
        .env("APACHE_RUN_GROUP", "www-data")
        .env("APACHE_PID_FILE", logs.join("apache2.pid"))
        .env("APACHE_RUN_DIR", &logs)
        .env("APACHE_LOCK_DIR", &logs)
        .env("APACHE_LOG_DIR", &logs)
        .current_dir(&logs)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = redline_testkit::proc::wait_limit(cmd.spawn().unwrap(), Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&logs);
    let mut said = String::from_utf8_lossy(&out.stdout).to_string();
    said.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

fn opts() -> TuneOptions {
    TuneOptions {
        server: Some(Server::Apache),
        ..Default::default()
    }
}

fn warnings<'a>(r: &'a TuneReport, code: &str) -> Vec<&'a Finding> {
    r.findings
        .iter()
        .filter(|f| f.code == code && f.level != Level::Ok)
        .collect()
}

#[test]
fn without_a_server_root_relative_paths_are_read_from_the_compiled_in_root() {
    let t = Tree::of(&fixture("no-server-root"), "tune-apache-root");
    let conf = t.path("httpd.conf");
    assert!(
        !Path::new("/etc/apache2/extra.conf").exists(),
        "the test needs /etc/apache2 without an extra.conf"
    );
    // Not from the file's folder: Debian's /etc/apache2 has no extra.conf,
    // so the Include is an error (Apache refuses to start), and the
    // Timeout 300 beside the file is not read.
    let r = analyze(&conf, &opts()).unwrap();
    let errs = warnings(&r, "parse_error");
    assert!(
        errs.iter()
            .any(|f| f.line == 7 && f.message.contains("extra.conf")),
        "{:#?}",
        r.findings
    );
    assert!(warnings(&r, "timeout_high").is_empty(), "{:#?}", r.findings);
    assert!(
        r.tools.iter().any(|t| t.contains("/etc/apache2")),
        "{:?}",
        r.tools
    );
    // As `apache2 -d FOLDER` reads it: extra.conf is read, its Timeout found.
    let r = with_server_root(&t.0, || analyze(&conf, &opts()).unwrap());
    assert!(warnings(&r, "parse_error").is_empty(), "{:#?}", r.findings);
    let f = warnings(&r, "timeout_high");
    assert!(
        f.len() == 1 && f[0].file.ends_with("extra.conf") && f[0].line == 1,
        "{:#?}",
        r.findings
    );
    // A ServerRoot in the tree wins over both.
    let rooted = t.path("rooted.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(&rooted, format!("ServerRoot \"{}\"\n{text}", t.0.display())).unwrap();
    let r = analyze(&rooted, &opts()).unwrap();
    assert!(warnings(&r, "parse_error").is_empty(), "{:#?}", r.findings);
    assert_eq!(warnings(&r, "timeout_high").len(), 1, "{:#?}", r.findings);

    // Apache agrees, and tune's own run of `apache2 -t` reads the same.
    if !require("apache2", apache2().is_some()) {
        return;
    }
    let v = Command::new(apache2().unwrap())
        .args(["-V", "-f", "/dev/null"])
        .output()
        .unwrap();
    let compiled = httpd_root(&String::from_utf8_lossy(&v.stdout)).expect("HTTPD_ROOT");
    assert_eq!(default_server_root(true), compiled);
    let (ok, said) = apache_test(&conf, None);
    assert!(!ok && said.contains("extra.conf"), "{said}");
    let (ok, said) = apache_test(&conf, Some(&t.0));
    assert!(ok, "{said}");
    let (ok, said) = apache_test(&rooted, None);
    assert!(ok, "{said}");
    let with_test = TuneOptions {
        server_test: true,
        ..opts()
    };
    let r = analyze(&conf, &with_test).unwrap();
    assert!(
        r.tools[0].contains("REFUSES")
            && r.findings[0].code == "config_test"
            && r.findings[0].line == 7,
        "{:?} {:#?}",
        r.tools,
        r.findings
    );
    let r = with_server_root(&t.0, || analyze(&conf, &with_test).unwrap());
    assert!(r.tools[0].contains("accepts"), "{:?}", r.tools);
}

/// No two fixes of a report at the same line of a file (one replacing it,
/// the other replacing it or inserting after it).
fn assert_one_fix_per_line(r: &TuneReport) {
    let mut seen = std::collections::BTreeSet::new();
    for f in r.findings.iter().filter(|f| f.level != Level::Ok) {
        if let Some(x) = &f.fix {
            if x.action == redline_watch::tune::FixAction::Replace {
                assert!(
                    seen.insert((x.file.clone(), x.end_line)),
                    "two fixes at {}:{}: {:#?}",
                    x.file,
                    x.end_line,
                    r.findings
                );
            }
        }
    }
    for f in r.findings.iter().filter(|f| f.level != Level::Ok) {
        if let Some(x) = &f.fix {
            if x.action == redline_watch::tune::FixAction::InsertAfter {
                assert!(
                    !seen.contains(&(x.file.clone(), x.line)),
                    "a fix inserts after a line another fix replaces: {:#?}",
                    r.findings
                );
            }
        }
    }
}

#[test]
fn the_memory_fix_raises_server_limit_with_max_request_workers_in_one_fix() {
    // (fixture, threads per child, the MaxRequestWorkers that should fit)
    for (name, tpc, fit) in [
        ("prefork-over-server-limit", None, 400u64),
        ("event-over-server-limit", Some(25u64), 600),
    ] {
        let t = Tree::of(&fixture(name), "tune-apache-mrw");
        let conf = t.path("httpd.conf");
        // A budget that fits `fit` workers of 1 MiB each with size's margin.
        let per = 1024u64;
        let budget = (1..4_000_000u64)
            .step_by(64)
            .find(|b| {
                redline_watch::size::apache_fit(*b, 0, per, tpc, 1000)
                    .0
                    .max_request_workers
                    >= fit
            })
            .unwrap();
        let allowed = redline_watch::size::apache_fit(budget, 0, per, tpc, 1000)
            .0
            .max_request_workers;
        let o = TuneOptions {
            budget_kib: Some(budget),
            worker_private_kib: Some(per),
            ..opts()
        };
        let r = analyze(&conf, &o).unwrap();
        assert_one_fix_per_line(&r);
        let mem = warnings(&r, "max_request_workers_over_memory");
        let limit = warnings(&r, "max_request_workers_over_limit");
        assert!(
            mem.len() == 1 && limit.len() == 1,
            "{name}: {:#?}",
            r.findings
        );
        // One fix on the MaxRequestWorkers line, ServerLimit in it.
        let fix = mem[0].fix.as_ref().unwrap();
        assert_eq!(fix.line, 9, "{name}: {fix:#?}");
        let need = match tpc {
            Some(t) => allowed.div_ceil(t),
            None => allowed,
        };
        assert!(
            allowed > 256
                && fix.text.starts_with(&format!(
                    "ServerLimit {need}\nMaxRequestWorkers {allowed}\n"
                )),
            "{name}: {}",
            fix.text
        );
        assert!(limit[0].fix.is_none() && limit[0].change.is_empty());
        assert!(limit[0].message.contains("max_request_workers_over_memory"));
        // Applied together: the memory check passes and the limit is gone.
        assert!(apply_all(&r).unwrap() >= 1, "{name}");
        let after = analyze(&conf, &o).unwrap();
        for code in [
            "max_request_workers_over_memory",
            "max_request_workers_over_limit",
        ] {
            assert!(
                warnings(&after, code).is_empty(),
                "{name}: {:#?}",
                after.findings
            );
        }
        if !require("apache2", apache2().is_some()) {
            continue;
        }
        // Apache lowers it before (prefork AH00180, event AH00515), not
        // after: ServerLimit allows it.
        let orig = fixture(name).join("httpd.conf");
        let (ok, said) = apache_test(&orig, None);
        assert!(ok && said.contains("exceed"), "{name}: {said}");
        let (ok, said) = apache_test(&conf, None);
        assert!(
            ok && !said.contains("exceed") && !said.contains("ServerLimit"),
            "{name}: {said}"
        );
    }
}

#[test]
fn if_elseif_and_else_are_conditions_not_server_wide_settings() {
    let t = Tree::of(&fixture("if-conditions"), "tune-apache-if");
    let conf = t.path("httpd.conf");
    let r = analyze(&conf, &opts()).unwrap();
    let one = |code: &str| -> Finding {
        let v = warnings(&r, code);
        assert_eq!(v.len(), 1, "{code}: {:#?}", r.findings);
        v[0].clone()
    };
    // Compression and expiry set only for static.example are not [OK]; the
    // finding names the condition.
    let at = format!("{}:14", conf.display());
    let z = one("no_compression");
    assert!(
        z.message
            .contains("only inside <If \"%{HTTP_HOST} == 'static.example'\">")
            && z.message.contains(&at),
        "{z:#?}"
    );
    let e = one("no_expires");
    assert!(
        e.message.contains("only inside <If") && e.message.contains(&at),
        "{e:#?}"
    );
    // What only the <ElseIf> or the <Else> sets says so, at its line.
    let s = one("sendfile_off");
    assert!(
        s.line == 21 && s.message.contains("only inside <ElseIf") && s.context.contains("<ElseIf"),
        "{s:#?}"
    );
    let m = one("mmap_off");
    assert!(
        m.line == 24 && m.message.contains("only inside <Else>"),
        "{m:#?}"
    );
    // EnableSendfile On outside the conditions is the server's setting.
    assert!(
        warnings(&r, "sendfile_default_off").is_empty(),
        "{:#?}",
        r.findings
    );
    // No fix goes into a condition meant for something else: the additions
    // go server-wide, after the sections; the two replacements stay on
    // their own lines.
    let text = std::fs::read_to_string(&conf).unwrap();
    for f in r.findings.iter().filter(|f| f.level != Level::Ok) {
        let Some(x) = &f.fix else { continue };
        match x.action {
            redline_watch::tune::FixAction::InsertAfter => {
                assert!(x.line >= 25 && x.context.is_empty(), "{}: {x:#?}", f.code)
            }
            redline_watch::tune::FixAction::Replace => {
                assert!(x.line == 21 || x.line == 24, "{}: {x:#?}", f.code)
            }
        }
    }
    assert_one_fix_per_line(&r);
    apply_all(&r).unwrap();
    let fixed = std::fs::read_to_string(&conf).unwrap();
    // The <If> block is as it was.
    let block = |s: &str| -> String {
        s.lines()
            .skip_while(|l| !l.starts_with("<If "))
            .take_while(|l| !l.starts_with("</If>"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(block(&fixed), block(&text));
    let after = analyze(&conf, &opts()).unwrap();
    for code in ["no_compression", "no_expires", "sendfile_off", "mmap_off"] {
        assert!(
            warnings(&after, code).is_empty(),
            "{code}: {:#?}",
            after.findings
        );
    }
    if !require("apache2", apache2().is_some()) {
        return;
    }
    let (ok, said) = apache_test(&fixture("if-conditions").join("httpd.conf"), None);
    assert!(ok, "{said}");
    let (ok, said) = apache_test(&conf, None);
    assert!(ok, "{said}\n{fixed}");
}

/// Debian's `a2enmod`/`a2enconf` as a user runs them from a fix's first
/// line (`# a2enmod expires && a2enconf redline-no-expires (Debian)…`).
fn debian_enable(root: &Path, fix_text: &str) -> Vec<String> {
    let mut done = Vec::new();
    let Some(cmds) = fix_text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# "))
        .and_then(|l| l.split(" (Debian)").next())
    else {
        return done;
    };
    for cmd in cmds.split("&&") {
        let w: Vec<&str> = cmd.split_whitespace().collect();
        match w.first() {
            Some(&"a2enmod") => {
                for m in &w[1..] {
                    let avail = Path::new("/etc/apache2/mods-available");
                    let text = std::fs::read_to_string(avail.join(format!("{m}.load")))
                        .unwrap_or_else(|_| {
                            format!("LoadModule {m}_module /usr/lib/apache2/modules/mod_{m}.so\n")
                        });
                    std::fs::write(root.join(format!("mods-enabled/{m}.load")), text).unwrap();
                    if let Ok(c) = std::fs::read_to_string(avail.join(format!("{m}.conf"))) {
                        std::fs::write(root.join(format!("mods-enabled/{m}.conf")), c).unwrap();
                    }
                    done.push(format!("a2enmod {m}"));
                }
            }
            Some(&"a2enconf") => {
                for n in &w[1..] {
                    std::fs::copy(
                        root.join(format!("conf-available/{n}.conf")),
                        root.join(format!("conf-enabled/{n}.conf")),
                    )
                    .unwrap();
                    done.push(format!("a2enconf {n}"));
                }
            }
            _ => {}
        }
    }
    done
}

#[test]
fn on_debians_layout_module_fixes_say_a2enmod_and_conf_fixes_go_to_conf_available() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debian-apache2");
    let t = Tree::of(&src, "tune-apache-debian");
    // Without mod_deflate, as a site that never enabled it.
    std::fs::remove_file(t.path("mods-enabled/deflate.load")).unwrap();
    std::fs::remove_file(t.path("mods-enabled/deflate.conf")).unwrap();
    let conf = t.path("apache2.conf");
    let loads_before: Vec<(PathBuf, String)> = std::fs::read_dir(t.path("mods-enabled"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.clone(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    let main_before = std::fs::read_to_string(&conf).unwrap();
    let r = with_server_root(&t.0, || analyze(&conf, &opts()).unwrap());
    let mut cmds = Vec::new();
    for code in ["no_expires", "no_compression", "sendfile_default_off"] {
        let f = warnings(&r, code);
        assert_eq!(f.len(), 1, "{code}: {:#?}", r.findings);
        let x = f[0].fix.as_ref().unwrap();
        assert!(
            x.file.contains("/conf-available/redline-") && !f[0].change.contains("LoadModule"),
            "{code}: {x:#?}"
        );
    }
    assert!(warnings(&r, "no_expires")[0]
        .change
        .contains("a2enmod expires"));
    assert!(warnings(&r, "no_compression")[0]
        .change
        .contains("a2enmod deflate"));
    assert_one_fix_per_line(&r);
    // Every fix applied, then the commands each names.
    std::fs::create_dir_all(t.path("conf-available")).unwrap();
    apply_all(&r).unwrap();
    for f in r.findings.iter().filter(|f| f.level != Level::Ok) {
        if let Some(x) = &f.fix {
            cmds.extend(debian_enable(&t.0, &x.text));
        }
    }
    assert!(
        cmds.contains(&"a2enmod expires".to_string())
            && cmds.contains(&"a2enmod deflate".to_string()),
        "{cmds:?}"
    );
    // Nothing written into the modules' own files, nor a server-wide line
    // into apache2.conf (only the Timeout line replaced there).
    for (p, text) in &loads_before {
        assert_eq!(
            &std::fs::read_to_string(p).unwrap(),
            text,
            "{}",
            p.display()
        );
    }
    let main_after = std::fs::read_to_string(&conf).unwrap();
    assert_eq!(main_after.lines().count(), main_before.lines().count());
    let after = with_server_root(&t.0, || analyze(&conf, &opts()).unwrap());
    for code in [
        "no_expires",
        "no_compression",
        "sendfile_default_off",
        "timeout_high",
    ] {
        assert!(
            warnings(&after, code).is_empty(),
            "{code}: {:#?}",
            after.findings
        );
    }
    if !require("apache2", apache2().is_some()) {
        return;
    }
    let (ok, said) = apache_test(&conf, Some(&t.0));
    assert!(ok, "{said}");
}

#[test]
fn modules_an_htaccess_in_the_document_root_uses_are_used_even_after_allowoverride_none() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tune/site/apache-wordpress");
    let t = Tree::of(&src, "tune-apache-htaccess");
    let conf = t.path("httpd.conf");
    let text = std::fs::read_to_string(&conf)
        .unwrap()
        .replace("@DIR@", &t.0.display().to_string())
        .replace("@PORT@", "8080")
        // The user followed "AllowOverride None" without moving the rules.
        .replace("AllowOverride All", "AllowOverride None");
    std::fs::write(&conf, text).unwrap();
    let r = analyze(&conf, &opts()).unwrap();
    assert!(
        !r.findings
            .iter()
            .any(|f| f.code == "module_unused" && f.level != Level::Ok),
        "WordPress's .htaccess uses mod_rewrite: {:#?}",
        r.findings
    );
    // .htaccess files deeper down: no automatic move, the finding says where.
    let t2 = Tree::of(&src, "tune-apache-htaccess2");
    let conf = t2.path("httpd.conf");
    let text = std::fs::read_to_string(&conf)
        .unwrap()
        .replace("@DIR@", &t2.0.display().to_string())
        .replace("@PORT@", "8080");
    std::fs::write(&conf, text).unwrap();
    std::fs::write(t2.path("htdocs/wp-content/.htaccess"), "Options -Indexes\n").unwrap();
    let r = analyze(&conf, &opts()).unwrap();
    let f: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.code == "allow_override")
        .collect();
    assert!(
        f.len() == 1
            && f[0].level == Level::Info
            && f[0].change.is_empty()
            && f[0].message.contains("2 .htaccess files"),
        "{f:#?}"
    );
}

/// Found on the public corpus (bench/tune_corpus.sh): unloading a module
/// another loaded module needs, or one whose own directives stand outside
/// an `<IfModule>`, breaks the config. tune calls neither unused with a fix,
/// and the fixes it does print leave a config `apache2 -t` accepts.
#[test]
fn a_module_other_modules_or_bare_directives_need_is_not_unloaded() {
    if !require("apache2", apache2().is_some()) {
        return;
    }
    let dir = redline_testkit::tmpdir("tune-apache-needed");
    let m = "/usr/lib/apache2/modules";
    let conf = dir.join("httpd.conf");
    std::fs::write(
        &conf,
        format!(
            "ServerRoot \"{d}\"\n\
             LoadModule mpm_event_module {m}/mod_mpm_event.so\n\
             LoadModule authz_core_module {m}/mod_authz_core.so\n\
             LoadModule mime_module {m}/mod_mime.so\n\
             LoadModule proxy_module {m}/mod_proxy.so\n\
             LoadModule proxy_http_module {m}/mod_proxy_http.so\n\
             LoadModule socache_shmcb_module {m}/mod_socache_shmcb.so\n\
             LoadModule ssl_module {m}/mod_ssl.so\n\
             LoadModule userdir_module {m}/mod_userdir.so\n\
             User www-data\nGroup www-data\nListen 127.0.0.1:8080\n\
             PidFile {d}/httpd.pid\nErrorLog {d}/error.log\nDocumentRoot {d}\n\
             SSLRandomSeed startup builtin\n\
             <IfModule mod_userdir.c>\n    UserDir disabled\n</IfModule>\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let (ok, said) = apache_test(&conf, None);
    assert!(ok, "the fixture itself must be valid: {said}");
    let r = analyze(&conf, &opts()).unwrap();
    let unused: Vec<&str> = warnings(&r, "module_unused")
        .iter()
        .map(|f| f.message.split(' ').next().unwrap_or(""))
        .collect();
    // mod_proxy_http needs mod_proxy; SSLRandomSeed needs mod_ssl; userdir's
    // only directive is guarded, so it is the one unused module.
    assert_eq!(unused, ["userdir_module"], "{:#?}", r.findings);
    let ssl = r
        .findings
        .iter()
        .find(|f| f.code == "module_unused" && f.message.starts_with("ssl_module"))
        .expect("ssl_module is explained");
    assert!(
        ssl.fix.is_none() && ssl.message.contains("SSLRandomSeed"),
        "{ssl:#?}"
    );
    apply_all(&r).unwrap();
    let (ok, said) = apache_test(&conf, None);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "apache2 -t after tune's fixes: {said}");
}
