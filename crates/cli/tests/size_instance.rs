//! `size --run/--from --instance PID` on a record whose watch held several
//! servers at once (`run --watch NGINXPID --watch FPMPID`), on a fake
//! `/proc` tree (`REDLINE_PROC_ROOT`): each instance is sized from its own
//! processes, a zombie child is not a process with memory, and without
//! `--instance` the record is refused with its instances listed.

mod common;

use common::*;
use redline_testkit::proc::wait_limit;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// nginx 7000 (worker 7001) and php-fpm 8000 (children 8001, 8002, and the
/// zombie 8003), each process with its private memory.
fn fake_proc(root: &Path) {
    let _ = std::fs::remove_dir_all(root);
    let procs: [(u32, u32, &str, char, u64); 6] = [
        (7000, 1, "nginx", 'S', 1024),
        (7001, 7000, "nginx", 'S', 3072),
        (8000, 1, "php-fpm8.2", 'S', 2048),
        (8001, 8000, "php-fpm8.2", 'S', 30_720),
        (8002, 8000, "php-fpm8.2", 'S', 20_480),
        (8003, 8000, "php-fpm8.2", 'Z', 0),
    ];
    for (pid, ppid, name, state, private) in procs {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("stat"),
            format!("{pid} ({name}) {state} {ppid} {pid} {pid} 0 -1 0 0 0 0 0 10 5 0 0 20 0 1 0 100 1000 200 0\n"),
        )
        .unwrap();
        if state == 'Z' {
            // A zombie: no smaps_rollup, no VmPTE.
            std::fs::write(
                d.join("status"),
                format!("Name:\t{name}\nState:\tZ (zombie)\nThreads:\t1\n"),
            )
            .unwrap();
            continue;
        }
        std::fs::write(
            d.join("smaps_rollup"),
            format!(
                "Rss: {} kB\nPss: {} kB\nPrivate_Clean: 0 kB\nPrivate_Dirty: {private} kB\nSwap: 0 kB\n",
                private + 8_000,
                private + 2_000
            ),
        )
        .unwrap();
        std::fs::write(
            d.join("status"),
            format!("Name:\t{name}\nVmPTE:\t84 kB\nThreads:\t1\n"),
        )
        .unwrap();
    }
    std::fs::write(root.join("loadavg"), "0.50 0.40 0.30 1/100 8003\n").unwrap();
    std::fs::write(
        root.join("meminfo"),
        "MemTotal:        8000000 kB\nMemFree:          6000000 kB\nMemAvailable:     6000000 kB\n\
         SwapTotal:       0 kB\nSwapFree:        0 kB\n",
    )
    .unwrap();
    std::fs::write(root.join("vmstat"), "pswpin 0\npswpout 0\n").unwrap();
}

fn redline_env(args: &[&str], root: &Path) -> std::process::Output {
    let child = Command::new(bin())
        .args(args)
        .env("REDLINE_PROC_ROOT", root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_limit(child, Duration::from_secs(60))
}

#[test]
fn instance_sizes_the_server_asked_for_from_a_record_of_two() {
    let root = std::env::temp_dir().join(format!("redline-two-servers-{}", std::process::id()));
    fake_proc(&root);
    let srv = builtin();
    let url = format!("http://{}/", srv.local_addr());
    let run = redline_env(
        &[
            "run",
            "-n",
            "1",
            "-o",
            "json",
            "-q",
            "--no-save",
            "--watch",
            "7000",
            "--watch",
            "8000",
            "--watch-interval",
            "100ms",
            &url,
        ],
        &root,
    );
    srv.shutdown();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rec = root.join("run.json");
    std::fs::write(&rec, &run.stdout).unwrap();
    let rec_s = rec.to_str().unwrap();
    let size = |extra: &[&str]| {
        redline(
            &[
                &[
                    "size",
                    "--from",
                    rec_s,
                    "--memory-budget",
                    "1GiB",
                    "-o",
                    "json",
                ][..],
                extra,
            ]
            .concat(),
        )
    };

    // Without --instance: refused, both named, one line.
    let out = size(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("nginx (pid 7000)")
            && err.contains("php-fpm8.2 (pid 8000)")
            && err.contains("--instance PID"),
        "{err}"
    );

    // php-fpm: its own processes (the zombie left out), its largest child.
    let out = size(&["--instance", "8000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fpm: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fpm["server"], "PHP-FPM", "{fpm}");
    assert_eq!(
        (fpm["processes"].as_u64(), fpm["workers"].as_u64()),
        (Some(3), Some(2)),
        "{fpm}"
    );
    assert_eq!(fpm["per_worker_private_kib"], 30_720, "{fpm}");
    assert_eq!(
        fpm["mean_worker_private_kib"],
        (30_720 + 20_480) / 2,
        "{fpm}"
    );
    assert!(
        fpm["directives"][0]
            .as_str()
            .unwrap()
            .starts_with("pm.max_children = "),
        "{fpm}"
    );

    // nginx: its own, not php-fpm's memory.
    let out = size(&["--instance", "7000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ngx: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ngx["server"], "nginx", "{ngx}");
    assert_eq!(
        (
            ngx["processes"].as_u64(),
            ngx["per_worker_private_kib"].as_u64()
        ),
        (Some(2), Some(3072)),
        "{ngx}"
    );

    // A PID the record never watched.
    let out = size(&["--instance", "7777"]);
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&root);
}
