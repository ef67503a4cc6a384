//! Tests of the error-log patterns, redaction, time stamps, reading what
//! a run appended and finding the logs from each server's configuration.

use super::*;

#[test]
fn each_servers_words_map_to_a_resource_and_directive() {
    let cases = [
        ("[Sat Nov 28 21:14:21.451062 2026] [mpm_prefork:error] [pid 1180] AH00161: server reached MaxRequestWorkers setting, consider raising the MaxRequestWorkers setting", "worker_pool", "MaxRequestWorkers"),
        ("[mpm_event:error] [pid 1:tid 2] AH00484: server reached MaxRequestWorkers setting, consider raising the MaxRequestWorkers setting", "worker_pool", "MaxRequestWorkers"),
        ("[mpm_event:error] [pid 7555:tid 1] AH00485: scoreboard is full, not at MaxRequestWorkers", "worker_pool", "ServerLimit"),
        ("2026/11/28 21:14:21 [alert] 4821#4821: 16 worker_connections are not enough", "worker_pool", "worker_connections"),
        ("[28-Nov-2026 21:14:21] WARNING: [pool www] server reached pm.max_children setting (1), consider raising it", "worker_pool", "pm.max_children"),
        ("[28-Nov-2026 21:14:21] WARNING: [pool web] server reached max_children setting (2), consider raising it", "worker_pool", "pm.max_children"),
        ("[26-Jul-2012 09:49:59] WARNING: [pool www] seems busy (you may need to increase pm.start_servers, or pm.min/max_spare_servers), spawning 32 children, there are 8 idle, and 58 total children", "worker_pool", "pm.start_servers / pm.min_spare_servers / pm.max_spare_servers"),
        ("2011-05-06 14:18:24: (server.c.1398) [note] sockets disabled, connection limit reached", "worker_pool", "server.max-connections"),
        ("2011-05-06 14:18:24: (server.c.1398) [note] sockets disabled, out-of-fds", "fds", "server.max-fds"),
        ("2011/05/01 23:00:49 [alert] 7387#0: *6259768 socket() failed (24: Too many open files) while connecting to upstream", "fds", "worker_rlimit_nofile"),
        ("[core:error] (24)Too many open files: AH00xxx: couldn't open", "fds", "LimitNOFILE (ulimit -n)"),
        ("2026/11/28 21:14:21 [error] 5#5: *9 upstream timed out (110: Connection timed out) while reading response header from upstream", "upstream", "proxy_read_timeout / the upstream's capacity"),
        ("2026/11/28 21:14:21 [error] 5#5: *9 no live upstreams while connecting to upstream", "upstream", "max_fails / fail_timeout (every upstream server marked down)"),
        ("2026/11/28 21:14:21 [error] 5#5: *9 connect() failed (111: Connection refused) while connecting to upstream", "upstream", "the upstream server (refused: not listening, or its backlog full)"),
        ("2026/11/28 21:14:21 [error] 5#5: *9 connect() to unix:/run/php/php8.2-fpm.sock failed (11: Resource temporarily unavailable) while connecting to upstream", "upstream", "listen.backlog of the upstream (php-fpm) and its pool"),
        ("[core:notice] [pid 9] AH00052: child pid 6697 exit signal Killed (9)", "memory", "the memory limit (cgroup memory.max / MemoryMax=) or fewer workers"),
        ("[28-Nov-2026 21:14:21] WARNING: [pool www] child 120 exited on signal 9 (SIGKILL) after 3.2 seconds from start", "memory", "the memory limit (cgroup memory.max / MemoryMax=) or fewer workers"),
        ("(12)Cannot allocate memory: AH00159: fork: Unable to fork new process", "memory", "the memory limit (cgroup memory.max / MemoryMax=) or fewer workers"),
        ("PHP Fatal error:  Allowed memory size of 134217728 bytes exhausted (tried to allocate 20480 bytes)", "memory", "memory_limit (php.ini)"),
    ];
    for (line, res, dir) in cases {
        let p = classify(line).unwrap_or_else(|| panic!("no match: {line}"));
        assert_eq!((p.resource, p.directive), (res, dir), "{line}");
    }
    for other in [
        "[core:notice] [pid 1] AH00094: Command line: '/usr/sbin/apache2'",
        "2026/11/28 21:14:21 [notice] 1#1: signal process started",
        "[28-Nov-2026 21:14:21] NOTICE: ready to handle connections",
    ] {
        assert!(classify(other).is_none(), "{other}");
    }
}

#[test]
fn examples_never_keep_secrets() {
    let line = "2026/11/28 21:14:21 [error] 5#5: *9 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1, server: x, request: \"GET /login?user=bob&password=hunter2 HTTP/1.1\", upstream: \"http://admin:s3cret@127.0.0.1:9000/login?token=abc\", host: \"x\", referrer: \"http://x/?session=deadbeef\"";
    let r = redact(line);
    for secret in ["hunter2", "s3cret", "admin:", "abc\"", "deadbeef", "bob"] {
        assert!(!r.contains(secret), "{secret} in {r}");
    }
    assert!(r.contains("/login?…"), "{r}");
    assert!(r.chars().count() <= MAX_EXAMPLE, "{}", r.chars().count());
    let h =
        redact("[client 1.2.3.4] Authorization: Basic dXNlcjpwYXNz, Cookie: sid=42; theme=dark");
    assert!(!h.contains("dXNlcjpwYXNz") && !h.contains("sid=42"), "{h}");
    assert!(h.contains("Authorization: …"), "{h}");
    let long = "x".repeat(100_000);
    let r = redact(&long);
    assert_eq!(r.chars().count(), MAX_EXAMPLE);
    assert!(r.ends_with('…'));
    assert_eq!(redact("a\x1b[31mred"), "a [31mred");
    // Nothing to redact: unchanged.
    let plain = "AH00161: server reached MaxRequestWorkers setting, consider raising the MaxRequestWorkers setting";
    assert_eq!(redact(plain), plain);
    assert_eq!(redact("is it? yes"), "is it? yes");
    assert_eq!(redact("tokens: 3"), "tokens: 3");
}

#[test]
fn time_stamps_of_each_server() {
    // 2026-11-28 21:14:21 UTC.
    let t = days_from_civil(2026, 11, 28) * 86_400_000 + (21 * 3600 + 14 * 60 + 21) * 1000;
    assert_eq!(
        line_time_ms("[Sat Nov 28 21:14:21.451062 2026] [core:notice] x", 0),
        Some(t + 451)
    );
    assert_eq!(
        line_time_ms("2026/11/28 21:14:21 [alert] 1#1: x", 0),
        Some(t)
    );
    assert_eq!(
        line_time_ms("[28-Nov-2026 21:14:21] WARNING: x", 0),
        Some(t)
    );
    assert_eq!(
        line_time_ms("2026-11-28 21:14:21: (server.c.1) x", 0),
        Some(t)
    );
    assert_eq!(line_time_ms("2026/11/28 22:14:21 [alert] x", 3600), Some(t));
    for bad in [
        "",
        "[",
        "[]",
        "hello world",
        "2026/13/28 21:14:21 x",
        "[Sat Foo 28 21:14:21 2026]",
        "2026/11/28 25:14:21 x",
    ] {
        assert_eq!(line_time_ms(bad, 0), None, "{bad}");
    }
    assert_eq!(days_from_civil(1970, 1, 1), 0);
}

#[test]
fn scan_counts_and_places_the_first_line() {
    let text = "2026/11/28 21:14:20 [notice] 1#1: start\n\
                2026/11/28 21:14:21 [alert] 5#5: 16 worker_connections are not enough\n\
                2026/11/28 21:14:22 [alert] 5#5: 16 worker_connections are not enough\n\
                2026/11/28 21:14:23 [alert] 5#5: accept4() failed (24: Too many open files)\n";
    let start = line_time_ms("2026/11/28 21:14:20 x", 0);
    let f = scan(text, "/l/error.log", start, 0);
    assert_eq!(f.len(), 2);
    assert_eq!((f[0].resource.as_str(), f[0].count), ("worker_pool", 2));
    assert_eq!(f[0].first_t, Some(1.0));
    assert_eq!(f[0].path, "/l/error.log");
    assert!(f[0].example.contains("worker_connections are not enough"));
    assert_eq!((f[1].resource.as_str(), f[1].first_t), ("fds", Some(3.0)));
}

/// Only what was appended after the start is read; a log that was
/// rotated (replaced) or truncated is read from its beginning.
#[test]
fn appended_lines_and_rotation() {
    let d = std::env::temp_dir().join(format!("redline-errlog-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("error.log");
    std::fs::write(&p, "[28-Nov-2026 21:00:00] WARNING: [pool www] server reached pm.max_children setting (1), consider raising it\n").unwrap();
    let (logs, errs) = ErrorLogs::start(std::slice::from_ref(&p));
    assert!(errs.is_empty());
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
    writeln!(f, "[28-Nov-2026 21:00:05] WARNING: [pool www] server reached pm.max_children setting (1), consider raising it").unwrap();
    drop(f);
    let (log, errs) = logs.clone().finish("2026-11-28T21:00:00.000Z");
    assert!(errs.is_empty());
    assert_eq!(log.findings.len(), 1);
    assert_eq!(
        log.findings[0].count, 1,
        "the line from before the run is not counted"
    );
    // Rotated: a new, shorter file at the same path.
    std::fs::remove_file(&p).unwrap();
    std::fs::write(
        &p,
        "2026/11/28 21:00:09 [alert] 5#5: 16 worker_connections are not enough\n",
    )
    .unwrap();
    let (log, _) = logs.clone().finish("2026-11-28T21:00:00.000Z");
    assert_eq!(log.findings.len(), 1);
    assert_eq!(log.findings[0].directive, "worker_connections");
    // Gone: a warning, not an error.
    std::fs::remove_file(&p).unwrap();
    let (log, errs) = logs.finish("2026-11-28T21:00:00.000Z");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(log.findings.is_empty());
    let (none, errs) = ErrorLogs::start(&[d.join("missing.log")]);
    assert!(none.is_empty() && errs.len() == 1);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn log_paths_from_each_servers_config() {
    let d = std::env::temp_dir().join(format!("redline-errlog-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let a = d.join("apache2.conf");
    std::fs::write(
        &a,
        format!(
            "ServerRoot {}\nErrorLog logs/error.log\nListen 80\n",
            d.display()
        ),
    )
    .unwrap();
    assert_eq!(
        from_config(&a, Some(ServerKind::Apache), None),
        vec![d.join("logs/error.log")]
    );
    let n = d.join("nginx.conf");
    std::fs::write(&n, "error_log logs/error.log warn;\nerror_log syslog:server=x;\nevents {}\nhttp { server { error_log /s/e.log; } }\n").unwrap();
    assert_eq!(
        from_config(&n, None, Some(Path::new("/pfx"))),
        vec![PathBuf::from("/pfx/logs/error.log")]
    );
    let l = d.join("lighttpd.conf");
    std::fs::write(
        &l,
        "server.document-root = \"/x\"\nserver.errorlog = \"/var/log/lighttpd/error.log\"\n",
    )
    .unwrap();
    assert_eq!(
        from_config(&l, Some(ServerKind::Lighttpd), None),
        vec![PathBuf::from("/var/log/lighttpd/error.log")]
    );
    let f = d.join("php-fpm.conf");
    std::fs::write(&f, "[global]\npid = run/fpm.pid\nerror_log = /var/log/fpm.log\n[www]\nerror_log = /no.log\npm.max_children = 1\n").unwrap();
    assert_eq!(
        from_config(&f, None, None),
        vec![PathBuf::from("/var/log/fpm.log")]
    );
    std::fs::write(&f, "[global]\nerror_log = syslog\n").unwrap();
    assert!(from_config(&f, Some(ServerKind::PhpFpm), None).is_empty());
    assert_eq!(
        php_fpm_config(&["php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)".to_string()]),
        Some(PathBuf::from("/etc/php/8.2/fpm/php-fpm.conf"))
    );
    std::fs::remove_dir_all(&d).unwrap();
}
