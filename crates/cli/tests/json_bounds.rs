//! Hostile JSON shapes against every JSON reader, each run under an
//! address-space limit of 1 GiB (`RLIMIT_AS`, 4 × the 256 MiB file limit):
//! a 240 MiB record of `[0,0,0,…]` (`report`, `merge`, `compare`, `import
//! har`, and `fetch` from a server written in the test), 8 MiB of tiny
//! objects, and a HAR with a 200 MB string are refused in one line with
//! exit 2 (`fetch`: 1), and the largest shapes still accepted are read
//! within the bound. Peak resident sizes come from `wait4`. Files go to a
//! temporary folder and are removed.

mod common;

use common::nginx::tmpdir;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT_AS: u64 = 1 << 30;

/// Runs redline under RLIMIT_AS = 1 GiB (at most 60 s): exit code, stderr,
/// peak resident size in MiB.
fn bounded(args: &[&str]) -> (Option<i32>, String, u64) {
    let err_path = tmpdir("json-bounds-err").join("stderr");
    let mut cmd = Command::new(common::bin());
    cmd.args(args)
        .env("REDLINE_DB", tmpdir("json-bounds-db").join("h.db"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap());
    // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let l = libc::rlimit {
                rlim_cur: LIMIT_AS,
                rlim_max: LIMIT_AS,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn redline");
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    let (code, maxrss_kib) = loop {
        let mut status = 0;
        // SAFETY: a zeroed rusage is valid; wait4 fills it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child without blocking.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            break (code, ru.ru_maxrss as u64);
        }
        if start.elapsed() > Duration::from_secs(60) {
            // SAFETY: our own child, by PID.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("redline {args:?} ran over 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    std::mem::forget(child); // reaped above
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    (code, err, maxrss_kib >> 10)
}

fn write_zeros(p: &Path, bytes: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(p).unwrap());
    f.write_all(b"[").unwrap();
    let chunk = b"0,".repeat(1 << 16);
    let mut left = bytes / 2 - 1;
    while left > 0 {
        let n = left.min(1 << 16);
        f.write_all(&chunk[..2 * n]).unwrap();
        left -= n;
    }
    f.write_all(b"0]").unwrap();
}

fn one_line_refusal(what: &str, got: (Option<i32>, String, u64), code: i32, want: &str) -> u64 {
    let (c, err, rss) = got;
    eprintln!("{what}: exit {c:?}, peak {rss} MiB: {}", err.trim());
    assert_eq!(c, Some(code), "{what}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{what}: {err}");
    assert!(err.contains(want), "{what}: {err}");
    assert!(!err.contains("panicked") && !err.contains("memory allocation"));
    rss
}

#[test]
fn hostile_json_shapes_are_refused_within_the_memory_bound() {
    let d = tmpdir("json-bounds");
    std::fs::create_dir_all(&d).unwrap();
    let zeros = d.join("zeros.json");
    write_zeros(&zeros, 240 << 20);
    let z = zeros.to_str().unwrap();
    let shape = "a JSON structure that would take more than 512 MiB to read";
    for args in [
        vec!["report", z],
        vec!["merge", "-o", "-", z, z],
        vec!["compare", z, z],
        vec!["import", "har", z],
    ] {
        let rss = one_line_refusal(&format!("{args:?}"), bounded(&args), 2, shape);
        // The text itself (240 MiB) and the program: nothing parsed.
        assert!(rss < 400, "{args:?}: {rss} MiB");
    }
    // `fetch` of the same bytes from a server written here.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let body = std::fs::read(&zeros).unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = [0u8; 4096];
        let _ = s.read(&mut b);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(&body);
    });
    let url = format!("http://127.0.0.1:{port}/record.json");
    let rss = one_line_refusal("fetch", bounded(&["fetch", "--no-save", &url]), 1, shape);
    assert!(rss < 700, "fetch: {rss} MiB");
    let _ = server.join();
    // 8 MiB of tiny objects (1 GB as parsed maps before).
    let objs = d.join("objects.json");
    let mut t = b"[".to_vec();
    t.extend(b"{\"a\":0},".repeat(1_000_000));
    t.extend(b"0]");
    std::fs::write(&objs, &t).unwrap();
    let o = objs.to_str().unwrap();
    let rss = one_line_refusal("objects", bounded(&["report", o]), 2, shape);
    assert!(rss < 100, "{rss} MiB");
    // A HAR with a 200 MB string.
    let har = d.join("big.har");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&har).unwrap());
    f.write_all(br#"{"log":{"version":"1.2","entries":[{"request":{"method":"POST","url":"http://x/","headers":[],"postData":{"mimeType":"text/plain","text":""#).unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..200 {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(br#""}},"response":{"status":200},"startedDateTime":"2026-11-26T10:00:00Z"}]}}"#)
        .unwrap();
    drop(f);
    let h = har.to_str().unwrap();
    let rss = one_line_refusal(
        "HAR string",
        bounded(&["import", "har", h]),
        2,
        "is longer than 32 MiB",
    );
    assert!(rss < 400, "{rss} MiB");
    // The largest shapes still accepted are read within the bound (and
    // refused for what they are: not run records).
    for (name, text) in [
        ("near-values", {
            let mut t = br#"{"format":"redline.run","version":1,"x":[0"#.to_vec();
            t.extend(b",0".repeat((512 << 20) / 64 - 100));
            t.extend(b"]}");
            t
        }),
        ("near-objects", {
            let mut t = br#"{"format":"redline.run","version":1,"x":["#.to_vec();
            t.extend(b"{\"a\":0},".repeat((512 << 20) / 832 - 100));
            t.extend(b"0]}");
            t
        }),
    ] {
        let p = d.join(format!("{name}.json"));
        std::fs::write(&p, &text).unwrap();
        let rss = one_line_refusal(
            name,
            bounded(&["report", p.to_str().unwrap()]),
            2,
            "missing field",
        );
        assert!(rss < 800, "{name}: {rss} MiB");
    }
    let _ = std::fs::remove_dir_all(&d);
}
