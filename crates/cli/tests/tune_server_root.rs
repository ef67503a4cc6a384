//! `redline tune --server-root DIR` (issue 34): an Apache configuration
//! that sets no ServerRoot reads its relative Includes from DIR, as
//! `apache2 -d DIR` does, and Debian's apache2 config test (run by tune)
//! gets the same `-d`: the included file's KeepAlive Off is found and the
//! test accepts the tree; without the flag the compiled-in root
//! (/etc/apache2) has no such file and apache2 -t refuses. A DIR that is
//! not a directory is one line, exit 2.

mod common;

use common::nginx::tmpdir;
use common::{redline, usage_error};
use std::path::Path;

const APACHE2: &str = "/usr/sbin/apache2";

fn findings(args: &[&str]) -> Vec<(String, String, String)> {
    let out = redline(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or("").to_string();
            (s("code"), s("level"), s("file"))
        })
        .collect()
}

#[test]
fn server_root_is_where_relative_includes_are_read() {
    if !redline_testkit::need::require(
        "apache2 (apt-get install -y apache2)",
        Path::new(APACHE2).exists(),
    ) {
        return;
    }
    let dir = tmpdir("tune-server-root");
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("conf.d")).unwrap();
    std::fs::create_dir_all(dir.join("cfg")).unwrap();
    let extra = root.join("conf.d/extra.conf");
    std::fs::write(&extra, "KeepAlive Off\n").unwrap();
    let conf = dir.join("cfg/httpd.conf");
    let d = dir.display();
    std::fs::write(
        &conf,
        format!(
            "LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so\n\
             LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so\n\
             ServerName localhost\nListen 127.0.0.1:8080\n\
             ErrorLog {d}/error.log\nPidFile {d}/httpd.pid\n\
             Include conf.d/extra.conf\n"
        ),
    )
    .unwrap();
    let (c, r) = (conf.to_str().unwrap(), root.to_str().unwrap());
    let with = findings(&[
        "tune",
        "--server",
        "apache",
        "-o",
        "json",
        "--server-root",
        r,
        c,
    ]);
    let keepalive = with
        .iter()
        .find(|f| f.0 == "keepalive_off")
        .expect("keepalive_off");
    assert_eq!(
        (keepalive.1.as_str(), Path::new(&keepalive.2)),
        ("warn", extra.as_path()),
        "{with:?}"
    );
    assert!(!with.iter().any(|f| f.0 == "config_test"), "{with:?}");
    // Without it: the compiled-in root, where conf.d/extra.conf is not.
    let without = findings(&["tune", "--server", "apache", "-o", "json", c]);
    assert!(
        without
            .iter()
            .any(|f| f.0 == "config_test" && f.1 == "warn"),
        "{without:?}"
    );
    assert!(
        without
            .iter()
            .any(|f| f.0 == "keepalive_off" && f.1 == "ok"),
        "{without:?}"
    );
    let e = usage_error(&["tune", "--server-root", "/nonexistent/dir", c]);
    assert!(e.contains("--server-root"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
