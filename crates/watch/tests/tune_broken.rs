//! Configs the servers refuse, one fixture per kind and server
//! (`fixtures/tune/broken/SERVER/KIND`, each with an `expect.txt`: the line,
//! words of the message, and whether tune finds it without the binary).
//! With the server installed, its own config test refuses each fixture, and
//! tune runs that test first and reports its error, at that file and line,
//! before its own findings. Without the binary (the test off), tune still
//! reports the kinds about directives it advises on, and never prints
//! `[OK]` for the directive on the refused line.

use redline_testkit::need::require;
use redline_watch::tune::{analyze, servertest, Finding, Level, Server, TuneOptions, TuneReport};
use std::path::{Path, PathBuf};

fn broken() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tune/broken")
}

struct Expect {
    line: usize,
    server_line: usize,
    words: String,
    without_binary: bool,
}

fn expect(dir: &Path) -> Expect {
    let t = std::fs::read_to_string(dir.join("expect.txt")).unwrap();
    let get = |k: &str| {
        t.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}:")))
            .map(|v| v.trim().to_string())
    };
    let line: usize = get("line").unwrap().parse().unwrap();
    Expect {
        line,
        server_line: get("server-line")
            .map(|v| v.parse().unwrap())
            .unwrap_or(line),
        words: get("words").unwrap_or_default(),
        without_binary: get("without-binary").as_deref() == Some("yes"),
    }
}

/// A fixture copied to a temp folder (the server test writes nothing there,
/// but the oracle's `logs/` goes there), removed on drop.
struct Copy(PathBuf);

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn copy(dir: &Path) -> Copy {
    let to = redline_testkit::tmpdir("tune-broken");
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    std::fs::create_dir_all(to.join("logs")).unwrap();
    Copy(to)
}

/// The server's own verdict, as a user would ask it (a time limit of 30 s).
fn oracle(server: Server, bin: &Path, root: &Path, conf: &Path) -> bool {
    let mut cmd = std::process::Command::new(bin);
    match server {
        Server::Nginx => {
            cmd.arg("-t")
                .arg("-q")
                .arg("-p")
                .arg(root)
                .arg("-c")
                .arg(conf)
                .arg("-e");
            cmd.arg(root.join("logs/error.log"));
        }
        Server::Apache => {
            cmd.arg("-t").arg("-d").arg(root).arg("-f").arg(conf);
        }
        Server::Lighttpd => {
            cmd.arg("-tt").arg("-f").arg(conf);
        }
    }
    let out = redline_testkit::proc::wait_limit(
        cmd.current_dir(root)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        std::time::Duration::from_secs(30),
    );
    out.status.success()
}

fn tune(server: Server, conf: &Path, server_test: bool) -> TuneReport {
    analyze(
        conf,
        &TuneOptions {
            server: Some(server),
            server_test,
            // No apache2 -l: the built-ins Debian's apache2 has.
            static_modules: Some(vec![
                "core.c".into(),
                "mod_so.c".into(),
                "http_core.c".into(),
                "mod_log_config.c".into(),
            ]),
            ..Default::default()
        },
    )
    .unwrap()
}

/// The directive on a line of a file, as a squashed word.
fn directive(conf: &Path, line: usize) -> String {
    let t = std::fs::read_to_string(conf).unwrap();
    t.lines()
        .nth(line - 1)
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

fn no_ok_about(r: &TuneReport, word: &str, what: &str) {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let oks: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| {
            f.level == Level::Ok
                && f.message
                    .split_whitespace()
                    .next()
                    .is_some_and(|w| !word.is_empty() && squash(w) == word)
        })
        .collect();
    assert!(
        oks.is_empty(),
        "{what}: [OK] about a refused line: {oks:#?}"
    );
}

#[test]
fn every_broken_kind_is_reported_the_servers_own_test_first() {
    let mut kinds = 0;
    for (server, dir, main) in [
        (Server::Nginx, "nginx", "nginx.conf"),
        (Server::Apache, "apache", "httpd.conf"),
        (Server::Lighttpd, "lighttpd", "lighttpd.conf"),
    ] {
        let mut names: Vec<PathBuf> = std::fs::read_dir(broken().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        assert!(names.len() >= 4, "{dir}: {names:?}");
        for d in names {
            let what = format!("{dir}/{}", d.file_name().unwrap().to_string_lossy());
            let e = expect(&d);
            let c = copy(&d);
            let conf = c.0.join(main);
            let word = directive(&conf, e.line);

            // Without the binary: the kinds about directives tune advises on.
            let r = tune(server, &conf, false);
            if e.without_binary {
                let hit = r.findings.iter().find(|f| {
                    matches!(f.code.as_str(), "config_error" | "parse_error")
                        && f.line == e.line
                        && f.message.to_lowercase().contains(&e.words.to_lowercase())
                });
                assert!(
                    hit.is_some(),
                    "{what}: not reported without the binary: {:#?}",
                    r.findings
                );
            }
            no_ok_about(&r, &word, &what);
            kinds += 1;

            // With the binary: the server refuses it, and tune says so first.
            let Some(bin) = servertest::binary(server) else {
                require(dir, false);
                continue;
            };
            assert!(
                !oracle(server, &bin, &c.0, &conf),
                "{what}: the server accepts it"
            );
            let r = tune(server, &conf, true);
            assert!(
                r.tools.first().is_some_and(|t| t.contains("REFUSES")),
                "{what}: {:?}",
                r.tools
            );
            let first = r.findings.first().unwrap();
            assert_eq!(first.code, "config_test", "{what}: {:#?}", r.findings);
            assert_eq!(first.level, Level::Warn);
            assert_eq!(
                (Path::new(&first.file), first.line),
                (conf.as_path(), e.server_line),
                "{what}: {first:#?}"
            );
            assert!(
                first
                    .message
                    .to_lowercase()
                    .contains(&e.words.to_lowercase()),
                "{what}: {first:#?}"
            );
            no_ok_about(&r, &word, &what);
            // Nothing written beside the config by the test (nginx would
            // create its pid file and logs there without the scratch copy).
            let left: Vec<String> = std::fs::read_dir(&c.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .filter(|n| n != "logs" && n != main && n != "expect.txt")
                .collect();
            assert!(left.is_empty(), "{what}: {left:?}");
        }
    }
    assert!(kinds >= 14, "{kinds}");
}

/// nginx -t creates the pid file, the logs and the temp folders a config
/// names even in test mode: tune's run of it writes none of them.
#[test]
fn the_nginx_config_test_writes_nothing_outside_its_scratch_folder() {
    let Some(_) = servertest::binary(Server::Nginx) else {
        require("nginx", false);
        return;
    };
    let d = redline_testkit::tmpdir("tune-nginx-writes");
    let out = d.join("would-be-written");
    let conf = d.join("nginx.conf");
    let o = out.display();
    std::fs::write(
        &conf,
        format!(
            "pid {o}/nginx.pid;\nerror_log {o}/error.log;\nevents {{ worker_connections 512; }}\nhttp {{\n    access_log {o}/access.log;\n    client_body_temp_path {o}/body;\n    proxy_temp_path {o}/proxy;\n    sendfile on;\n    server {{ listen 127.0.0.1:8080; }}\n}}\n"
        ),
    )
    .unwrap();
    let r = tune(Server::Nginx, &conf, true);
    assert!(
        r.tools
            .first()
            .is_some_and(|t| t.starts_with("nginx -t: accepts")),
        "{:?} {:#?}",
        r.tools,
        r.findings
    );
    assert!(!out.exists(), "nginx -t wrote {}", out.display());
    let _ = std::fs::remove_dir_all(&d);
}
