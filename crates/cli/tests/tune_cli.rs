//! `redline tune` on bad input through the built binary: a FIFO (never
//! waited on), a directory, a binary file, `--htaccess` on a non-Apache
//! file: one line on stderr and exit code 2, within a time limit. And
//! `--htaccess` reads a file as an `.htaccess`.

mod common;

use common::*;
use std::time::Duration;

#[test]
fn tune_bad_input_is_one_line_and_exit_2_never_a_hang() {
    let dir = std::env::temp_dir().join(format!("redline-tune-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("apache2.conf");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let binary = dir.join("nginx.conf");
    std::fs::write(&binary, b"events {}\n\x00\x01\x02\x7fELF").unwrap();
    let lighttpd = dir.join("lighttpd.conf");
    std::fs::write(&lighttpd, "server.port = 80\n").unwrap();
    let d = dir.to_str().unwrap();
    for args in [
        vec!["tune", fifo.to_str().unwrap()],
        vec!["tune", d],
        vec!["tune", binary.to_str().unwrap()],
        vec![
            "tune",
            "--htaccess",
            lighttpd.to_str().unwrap(),
            "--server",
            "lighttpd",
        ],
    ] {
        let (out, took) = redline_with_limit(&args, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("redline: error:"), "{err}");
        assert!(took < Duration::from_secs(30), "{args:?}");
    }
    let ht = dir.join("rules");
    std::fs::write(&ht, "KeepAlive Off\nOptions +SymLinksIfOwnerMatch\n").unwrap();
    let out = redline(&[
        "tune",
        "--no-tools",
        "--htaccess",
        "-o",
        "json",
        ht.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = v["findings"].as_array().unwrap();
    assert!(f.iter().any(|f| f["code"] == "parse_error"
        && f["line"] == 1
        && f["message"]
            .as_str()
            .unwrap()
            .contains("not allowed in .htaccess")));
    let fix = f
        .iter()
        .find(|f| f["code"] == "symlinks_if_owner_match")
        .map(|f| f["fix"].clone())
        .unwrap();
    assert_eq!(fix["action"], "replace");
    assert_eq!(fix["line"], 2);
    assert_eq!(fix["old"], "Options +SymLinksIfOwnerMatch");
    let _ = std::fs::remove_dir_all(&dir);
}
