//! `redline replay` end to end: Debian's nginx and Apache write access logs of
//! real traffic (redline's own runs and ab), then their own logs are replayed
//! against them: the replayed count is the log's kept lines (and the server's
//! log grows by exactly that many), the per-status counts match the log's, a
//! deleted file shows as 200 → 404, gzip and custom `--log-format`s (each
//! server's own syntax) read the same requests, `--host-map` sends a logged
//! host elsewhere, bad lines are counted and shown escaped; bad input is one line and exit code 2.

mod common;

use common::nginx::{start_nginx, tmpdir, NginxSite};
use common::{assert_run_schema, counter, missing, redline_with_limit};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> std::process::Output {
    redline_with_limit(args, Duration::from_secs(60)).0
}

/// `redline replay ARGS -q -o json`: the record (exit 0 asserted).
fn replay_json(args: &[&str]) -> Value {
    let mut a = vec!["replay"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-q", "-o", "json"]);
    let out = run(&a);
    assert!(
        out.status.success(),
        "redline {a:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON record");
    assert_run_schema(&v);
    v
}

/// Status → count of the log lines whose request line starts with one of `methods`.
fn log_statuses(log: &str, methods: &[&str]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in log.lines() {
        let Some((_, rest)) = l.split_once("] \"") else {
            continue;
        };
        if !methods.iter().any(|x| rest.starts_with(&format!("{x} "))) {
            continue;
        }
        let status = rest
            .split("\" ")
            .nth(1)
            .unwrap_or("")
            .split(' ')
            .next()
            .unwrap();
        *m.entry(status.to_string()).or_insert(0) += 1;
    }
    m
}

fn map_of(v: &Value) -> BTreeMap<String, u64> {
    v.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

fn request<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no request {name} in {:#}", v["requests"]))
}

fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .count()
}

/// Waits (bounded) until the server has written `want` lines to its log.
fn wait_lines(p: &Path, want: usize) -> usize {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let n = lines(p);
        if n >= want || Instant::now() > end {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn gzip(p: &Path) -> PathBuf {
    use std::io::Write;
    let out = p.with_extension("log.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&std::fs::read(p).unwrap()).unwrap();
    std::fs::write(&out, e.finish().unwrap()).unwrap();
    out
}

/// Real traffic on nginx (redline runs: GET, HEAD, a POST nginx refuses,
/// a missing page), its combined log replayed against it after a page was
/// deleted; its custom-format log read with `--log-format` in nginx syntax;
/// bad lines counted and shown escaped.
#[test]
fn nginx_replays_its_own_log() {
    let page = |n: usize| vec![b'x'; n];
    let files = [
        ("index.html", page(440)),
        ("a.html", page(1000)),
        ("b.html", page(50)),
        ("gone.html", page(10)),
    ];
    let Some(ng) = start_nginx(&NginxSite {
        tag: "replay-nginx",
        files: &files,
        tls: None,
        h2: false,
        http_extra: "log_format custom '$msec $status \"$request_method $request_uri\" $request_time $host';\n  \
                     access_log {d}/access.log combined;\n  access_log {d}/custom.log custom;",
        types: "text/html html;",
    }) else {
        return;
    };
    let base = format!("http://127.0.0.1:{}", ng.port);
    let traffic: [(&[&str], &str); 6] = [
        (&["-n", "30", "-c", "3"], "/a.html"),
        (&["-n", "12", "-c", "2", "-m", "HEAD"], "/b.html"),
        (&["-n", "9", "-c", "1"], "/gone.html"),
        (&["-n", "7", "-c", "1"], "/missing.html"),
        (&["-n", "5", "-c", "1", "-m", "POST", "-b", "x"], "/a.html"),
        (&["-n", "4", "-c", "1"], "/?q=1"),
    ];
    let mut total = 0;
    for (flags, path) in traffic {
        let url = format!("{base}{path}");
        let mut a = vec!["run", "-q", "--no-save", "-t", "1", "--timeout", "5s"];
        a.extend_from_slice(flags);
        a.push(&url);
        let out = run(&a);
        assert!(
            out.status.success(),
            "{a:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        total += flags[1].parse::<usize>().unwrap();
    }
    let log = ng.dir.join("access.log");
    let custom = ng.dir.join("custom.log");
    assert_eq!(wait_lines(&log, total), total);
    assert_eq!(wait_lines(&custom, total), total);
    let text = std::fs::read_to_string(&log).unwrap();
    let want = log_statuses(&text, &["GET", "HEAD"]);
    let kept: u64 = want.values().sum();
    assert_eq!(kept, 30 + 12 + 9 + 7 + 4);
    assert_eq!(log_statuses(&text, &["POST"]).values().sum::<u64>(), 5);
    // A copy of the log (the server keeps writing to its own), then the page goes.
    let copy = ng.dir.join("copy.log");
    std::fs::copy(&log, &copy).unwrap();
    let custom_copy = ng.dir.join("custom-copy.log");
    std::fs::copy(&custom, &custom_copy).unwrap();
    std::fs::remove_file(ng.dir.join("site/gone.html")).unwrap();

    let before = lines(&log);
    let v = replay_json(&[copy.to_str().unwrap(), &base, "--speed", "4x"]);
    assert_eq!(counter(&v, "scheduled"), kept);
    assert_eq!(counter(&v, "sent"), kept);
    assert_eq!(counter(&v, "completed"), kept);
    let r = &v["replay"];
    assert_eq!(r["kept"], kept);
    assert_eq!(r["other_methods"], 5);
    assert_eq!(r["bad_lines"], 0);
    assert_eq!(r["speed"], 4.0);
    assert_eq!(map_of(&r["original_statuses"]), want);
    // The server saw exactly the replay.
    assert_eq!(
        wait_lines(&log, before + kept as usize),
        before + kept as usize
    );
    // Per status: the log's, but the deleted page's 200s are now 404s.
    let mut now = want.clone();
    *now.get_mut("200").unwrap() -= 9;
    *now.get_mut("404").unwrap() += 9;
    assert_eq!(map_of(&v["status_codes"]), now);
    let gone = request(&v, "GET /gone.html (200)");
    assert_eq!(gone["original_status"], 200);
    assert_eq!(
        map_of(&gone["statuses"]),
        BTreeMap::from([("404".into(), 9)])
    );
    let a = request(&v, "GET /a.html (200)");
    assert_eq!(map_of(&a["statuses"]), BTreeMap::from([("200".into(), 30)]));
    let head = request(&v, "HEAD /b.html (200)");
    assert_eq!(head["sent"], 12);
    let missing_page = request(&v, "GET /missing.html (404)");
    assert_eq!(
        map_of(&missing_page["statuses"]),
        BTreeMap::from([("404".into(), 7)])
    );

    // The text report lists the changed URL, and only it.
    let out = run(&[
        "replay",
        copy.to_str().unwrap(),
        &base,
        "--rate",
        "500",
        "-q",
    ]);
    assert!(out.status.success());
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        t.contains("Changed:          1 URL answered otherwise"),
        "{t}"
    );
    assert!(t.contains("GET /gone.html (200)  200 → 404 ×9"), "{t}");

    // The same requests from the custom log, in nginx's own syntax; its
    // `$host` (127.0.0.1) is mapped to nginx, BASE_URL is a port nobody
    // serves: every answer came through the map.
    let map = format!("127.0.0.1={base}");
    let c = replay_json(&[
        custom_copy.to_str().unwrap(),
        &format!("http://127.0.0.1:{}", common::nginx::free_port()),
        "--rate",
        "500",
        "--log-format",
        "$msec $status \"$request_method $request_uri\" $request_time $host",
        "--host-map",
        &map,
    ]);
    assert_eq!(counter(&c, "failed"), 0);
    assert_eq!(c["replay"]["kept"], kept);
    assert_eq!(map_of(&c["replay"]["original_statuses"]), want);
    assert_eq!(map_of(&c["status_codes"]), now);

    // Bad lines: counted, the first shown, never fatal; escaped in text.
    let mut bad = std::fs::read_to_string(&copy).unwrap();
    bad.push_str("\x1b[2Jnot a log line\n127.0.0.1 - - [bad time] \"GET / HTTP/1.1\" 200 1\n");
    bad.push_str(&"y".repeat(20_000));
    bad.push('\n');
    let badp = ng.dir.join("bad.log");
    std::fs::write(&badp, &bad).unwrap();
    let b = replay_json(&[badp.to_str().unwrap(), &base, "--rate", "1000"]);
    assert_eq!(b["replay"]["bad_lines"], 3);
    assert_eq!(counter(&b, "sent"), kept);
    let ex = b["replay"]["bad_examples"].as_array().unwrap();
    assert!(ex[0]["text"].as_str().unwrap().starts_with("\x1b[2J"));
    let out = run(&[
        "replay",
        badp.to_str().unwrap(),
        &base,
        "--rate",
        "1000",
        "-q",
    ]);
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(!t.contains('\x1b'), "raw escape in the report");
    assert!(t.contains("\\x1b[2Jnot a log line"), "{t}");
    assert!(t.contains("longer than 16384 bytes"), "{t}");
}

/// Debian's Apache (prefork) on a free loopback port, logging `combined`
/// and a custom format; killed with its process group on drop.
struct Apache {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Apache {
    fn start(custom: &str) -> Option<Apache> {
        let bin = "/usr/sbin/apache2";
        let modules = Path::new("/usr/lib/apache2/modules");
        if !Path::new(bin).exists() || !modules.join("mod_mpm_prefork.so").exists() {
            missing("apache2 (apt-get install -y apache2)");
            return None;
        }
        let port = common::nginx::free_port();
        let dir = tmpdir("replay-apache");
        std::fs::create_dir_all(dir.join("html")).unwrap();
        for (f, n) in [("a.html", 700), ("b.html", 40), ("gone.html", 5)] {
            std::fs::write(dir.join("html").join(f), vec![b'z'; n]).unwrap();
        }
        // SAFETY: geteuid() has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let user = if root {
            let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
            if passwd.lines().any(|l| l.starts_with("www-data:")) {
                "User www-data\nGroup www-data\n"
            } else {
                "User nobody\nGroup nogroup\n"
            }
        } else {
            ""
        };
        let d = dir.display();
        let m = modules.display();
        let conf = format!(
            "ServerRoot {d}\nServerName 127.0.0.1\nListen 127.0.0.1:{port}\nPidFile {d}/apache2.pid\n\
             ErrorLog {d}/error.log\nLogLevel warn\nDefaultRuntimeDir {d}\nMutex file:{d} default\n\
             LoadModule mpm_prefork_module {m}/mod_mpm_prefork.so\n\
             LoadModule authz_core_module {m}/mod_authz_core.so\n{user}\
             StartServers 2\nMinSpareServers 1\nMaxSpareServers 4\nMaxRequestWorkers 16\n\
             KeepAlive On\n\
             LogFormat \"%h %l %u %t \\\"%r\\\" %>s %O \\\"%{{Referer}}i\\\" \\\"%{{User-Agent}}i\\\"\" combined\n\
             CustomLog {d}/access.log combined\nCustomLog {d}/custom.log \"{custom}\"\n\
             DocumentRoot {d}/html\n<Directory {d}/html>\n  Require all granted\n</Directory>\n"
        );
        std::fs::write(dir.join("apache2.conf"), conf).unwrap();
        let _ = Command::new("chmod")
            .args(["-R", "a+rwX"])
            .arg(&dir)
            .status();
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(bin)
            .process_group(0)
            .args(["-D", "FOREGROUND", "-f"])
            .arg(dir.join("apache2.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start apache2");
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if let Ok(Some(st)) = child.try_wait() {
                let _ = child.wait();
                let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
                panic!("apache2 exited ({st}): {log}");
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(Apache { child, dir, port });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("apache2 did not listen within 10 s");
    }
}

impl Drop for Apache {
    fn drop(&mut self) {
        // SAFETY: kill() of our own child's process group.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGTERM);
        }
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Real traffic on Apache from ab, its combined log replayed against it at
/// the logged times (and gzip'ed, and its custom log in Apache's syntax):
/// counts and statuses match, the deleted page is 200 → 404.
#[test]
fn apache_replays_its_own_log() {
    let Some(ab) = ["/usr/bin/ab"].into_iter().find(|p| Path::new(p).exists()) else {
        missing("/usr/bin/ab (apt-get install -y apache2-utils)");
        return;
    };
    let custom = "[%{sec}t] %>s \\\"%r\\\" %D %{Host}i";
    let Some(ap) = Apache::start(custom) else {
        return;
    };
    let base = format!("http://127.0.0.1:{}", ap.port);
    let mut total = 0;
    for (n, c, path) in [
        (25, 2, "/a.html"),
        (10, 1, "/gone.html"),
        (6, 1, "/nope.html"),
    ] {
        let url = format!("{base}{path}");
        let out = Command::new(ab)
            .args(["-q", "-n", &n.to_string(), "-c", &c.to_string(), &url])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ab: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        total += n;
    }
    let out = run(&[
        "run",
        "-q",
        "--no-save",
        "-n",
        "8",
        "-c",
        "1",
        "-m",
        "HEAD",
        &format!("{base}/b.html"),
    ]);
    assert!(out.status.success());
    total += 8;
    let log = ap.dir.join("access.log");
    assert_eq!(wait_lines(&log, total), total);
    assert_eq!(wait_lines(&ap.dir.join("custom.log"), total), total);
    let copy = ap.dir.join("copy.log");
    std::fs::copy(&log, &copy).unwrap();
    let custom_copy = ap.dir.join("custom-copy.log");
    std::fs::copy(ap.dir.join("custom.log"), &custom_copy).unwrap();
    let want = log_statuses(&std::fs::read_to_string(&copy).unwrap(), &["GET", "HEAD"]);
    assert_eq!(want.values().sum::<u64>(), total as u64);
    std::fs::remove_file(ap.dir.join("html/gone.html")).unwrap();
    let mut now = want.clone();
    *now.get_mut("200").unwrap() -= 10;
    *now.get_mut("404").unwrap() += 10;

    let gz = gzip(&copy);
    for (file, extra) in [
        (&copy, vec!["--speed", "2x"]),
        (&gz, vec!["--rate", "400"]),
        (&custom_copy, vec!["--rate", "400", "--log-format", custom]),
    ] {
        let mut a = vec![file.to_str().unwrap(), base.as_str()];
        a.extend(extra.iter().copied());
        let v = replay_json(&a);
        assert_eq!(counter(&v, "sent"), total as u64, "{a:?}");
        assert_eq!(v["replay"]["kept"], total, "{a:?}");
        assert_eq!(v["replay"]["gzip"], file == &gz, "{a:?}");
        assert_eq!(map_of(&v["replay"]["original_statuses"]), want, "{a:?}");
        assert_eq!(map_of(&v["status_codes"]), now, "{a:?}");
        let gone = request(&v, "GET /gone.html (200)");
        assert_eq!(
            map_of(&gone["statuses"]),
            BTreeMap::from([("404".into(), 10)])
        );
    }
}

/// Bad input: one line on stderr and exit code 2, no run.
#[test]
fn bad_input_is_one_line_and_exit_2() {
    let d = tmpdir("replay-bad");
    std::fs::create_dir_all(&d).unwrap();
    let good = d.join("ok.log");
    std::fs::write(
        &good,
        "127.0.0.1 - - [26/Nov/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 1\n",
    )
    .unwrap();
    let junk = d.join("junk.log");
    std::fs::write(&junk, "hello\nworld\x1b[31m\n").unwrap();
    let g = good.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["/nonexistent/access.log", "http://127.0.0.1:9"],
            "cannot read",
        ),
        (
            vec![d.to_str().unwrap(), "http://127.0.0.1:9"],
            "is a directory",
        ),
        (vec![g, "ftp://127.0.0.1:9/"], "unsupported scheme"),
        (vec![g, "http://"], "invalid URL"),
        (
            vec![g, "http://127.0.0.1:9", "--speed", "fast"],
            "invalid --speed",
        ),
        (
            vec![g, "http://127.0.0.1:9", "--speed", "0x"],
            "invalid --speed",
        ),
        (
            vec![g, "http://127.0.0.1:9", "--rate=-3"],
            "invalid -r/--rate",
        ),
        (
            vec![g, "http://127.0.0.1:9", "--log-format", "%h %>s"],
            "no time",
        ),
        (
            vec![g, "http://127.0.0.1:9", "--methods", "G E T"],
            "invalid --methods",
        ),
        (
            vec![g, "http://127.0.0.1:9", "--host-map", "x"],
            "invalid --host-map",
        ),
        (
            vec![junk.to_str().unwrap(), "http://127.0.0.1:9"],
            "no request to replay",
        ),
    ];
    for (args, want) in cases {
        let mut a = vec!["replay"];
        a.extend(args.iter().copied());
        let out = run(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{a:?}: {err}");
        assert!(err.contains(want), "{a:?}: {err}");
        assert!(!err.contains('\x1b'), "{a:?}: {err}");
        assert!(out.stdout.is_empty(), "{a:?}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Schedules beyond `--max-duration` (default 24 h) are refused in one
/// line naming the gap and its dates, at once (exit 2, nothing sent): a
/// line dated 9999, a `$msec` of 0, a 10-year gap, an absurdly slow
/// `--rate`. `-d` replays a window: the first N seconds of the schedule
/// (the 9999 line left out and counted as cut), or rate × N requests.
#[test]
fn years_long_schedules_are_refused_and_d_replays_a_window() {
    let server = common::builtin();
    let base = format!("http://{}", server.local_addr());
    let d = tmpdir("replay-years");
    std::fs::create_dir_all(&d).unwrap();
    let line = |t: &str, p: &str| format!("10.0.0.1 - - [{t} +0000] \"GET {p} HTTP/1.1\" 200 1\n");
    let y9999 = d.join("y9999.log");
    let mut text = String::new();
    for i in 0..10 {
        text += &line(&format!("26/Nov/2026:10:00:0{i}"), &format!("/?size={i}"));
    }
    std::fs::write(d.join("ten.log"), &text).unwrap();
    text += &line("31/Dec/9999:23:59:59", "/late");
    std::fs::write(&y9999, &text).unwrap();
    let gap = d.join("gap.log");
    std::fs::write(
        &gap,
        line("26/Nov/2016:10:00:00", "/a") + &line("26/Nov/2026:10:00:00", "/b"),
    )
    .unwrap();
    let msec = d.join("msec.log");
    std::fs::write(
        &msec,
        "1795687200.123 200 \"GET /a\"\n0.000 200 \"GET /b\"\n1795687201.5 200 \"GET /c\"\n",
    )
    .unwrap();
    let (y, g, m) = (
        y9999.to_str().unwrap(),
        gap.to_str().unwrap(),
        msec.to_str().unwrap(),
    );
    let ten = d.join("ten.log");
    let ten = ten.to_str().unwrap();
    let fmt = "$msec $status \"$request_method $request_uri\"";
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (vec![y, &base], &["7973 years", "9999-12-31", "-d"]),
        (vec![g, &base], &["10 years", "2016-11-26", "2026-11-26"]),
        (
            vec![m, &base, "--log-format", fmt],
            &["1970-01-01", "57 years"],
        ),
        (
            vec![ten, &base, "--rate", "0.0001"],
            &["10 requests at 0.0001 req/s"],
        ),
        (
            vec![ten, &base, "--max-duration", "5s"],
            &["would last 10 s", "--max-duration 5 s"],
        ),
        (
            vec![ten, &base, "--max-duration", "0s"],
            &["--max-duration must be above 0"],
        ),
        (
            vec![ten, &base, "--max-duration", "745h"],
            &["at most 30 days"],
        ),
        (
            vec![ten, &base, "-d", "0s"],
            &["-d/--duration must be above 0"],
        ),
    ];
    for (args, want) in cases {
        let mut a = vec!["replay"];
        a.extend(args.iter().copied());
        let t = Instant::now();
        let out = run(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{a:?}: {err}");
        for w in want {
            assert!(err.contains(w), "{a:?} wants {w:?}: {err}");
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{a:?}");
    }
    assert_eq!(server.stats().requests, 0, "nothing was sent");
    // A window: the first 3 s of the 9999 log (its last line cut).
    let t = Instant::now();
    let v = replay_json(&[y, &base, "-d", "3s", "-t", "1"]);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(counter(&v, "sent"), 3);
    assert_eq!(v["replay"]["kept"], 3);
    assert_eq!(v["replay"]["cut"], 8);
    // At 2x, 2 s of schedule are the log's first 4 s; with --rate 5, 10 requests.
    let v = replay_json(&[y, &base, "-d", "2s", "--speed", "2x", "-t", "1"]);
    assert_eq!(counter(&v, "sent"), 4);
    let v = replay_json(&[y, &base, "-d", "2s", "--rate", "5", "-t", "1"]);
    assert_eq!(counter(&v, "sent"), 10);
    assert_eq!(server.stats().requests, 17);
    let _ = std::fs::remove_dir_all(&d);
}

/// The log's gaps are kept at `--speed`: requests 4 s apart in the log are
/// sent 1 s apart at 4x (a lower bound: the pacer never sends early), and
/// every request is sent once.
#[test]
fn the_logs_times_are_kept_at_speed() {
    let server = common::builtin();
    let d = tmpdir("replay-gaps");
    std::fs::create_dir_all(&d).unwrap();
    let log = d.join("gaps.log");
    let mut text = String::new();
    for (sec, path) in [
        (0, "/?size=1"),
        (0, "/?size=2"),
        (0, "/?size=3"),
        (4, "/?size=4"),
        (4, "/?status=404"),
    ] {
        text += &format!(
            "10.0.0.1 - - [26/Nov/2026:10:00:0{sec} +0100] \"GET {path} HTTP/1.1\" 200 1\n"
        );
    }
    std::fs::write(&log, text).unwrap();
    let base = format!("http://{}", server.local_addr());
    let v = replay_json(&[log.to_str().unwrap(), &base, "--speed", "4x", "-t", "1"]);
    assert_eq!(counter(&v, "sent"), 5);
    assert_eq!(v["replay"]["span_s"], 5.0);
    assert!(
        v["duration_s"].as_f64().unwrap() >= 1.0,
        "{}",
        v["duration_s"]
    );
    let changed = request(&v, "GET /?status=404 (200)");
    assert_eq!(
        map_of(&changed["statuses"]),
        BTreeMap::from([("404".into(), 1)])
    );
    assert_eq!(server.stats().requests, 5);
    let _ = std::fs::remove_dir_all(&d);
}

/// The record states the load that ran: a log with 5, 20 and 5 requests in
/// three seconds replays as that schedule (`config.schedule`, arrival
/// `replay` at the mean rate), not as "open loop, constant, 10 req/s"; at an
/// even `--rate` it is that constant rate, with no schedule.
#[test]
fn the_record_states_the_logs_schedule() {
    let server = common::builtin();
    let d = tmpdir("replay-schedule");
    std::fs::create_dir_all(&d).unwrap();
    let log = d.join("steps.log");
    let mut text = String::new();
    for (sec, n) in [(0, 5), (1, 20), (2, 5)] {
        for i in 0..n {
            text += &format!(
                "10.0.0.1 - - [26/Nov/2026:10:00:0{sec} +0100] \"GET /?size={i} HTTP/1.1\" 200 1\n"
            );
        }
    }
    std::fs::write(&log, text).unwrap();
    let base = format!("http://{}", server.local_addr());
    let v = replay_json(&[log.to_str().unwrap(), &base, "-t", "1"]);
    assert_eq!(counter(&v, "sent"), 30);
    let cfg = &v["config"];
    assert_eq!(
        cfg["schedule"],
        serde_json::json!({"bucket_s": 1, "speed": 1.0, "counts": [5, 20, 5]}),
        "{cfg}"
    );
    assert_eq!(cfg["load"]["type"], "open");
    assert_eq!(cfg["load"]["arrival"], "replay");
    assert_eq!(cfg["load"]["rate"], 10.0);
    assert_eq!(cfg["load"]["requests"], 30);
    // The text report says so too.
    let out = run(&[
        "replay",
        log.to_str().unwrap(),
        &base,
        "-t",
        "1",
        "--speed",
        "10x",
    ]);
    assert!(out.status.success());
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("the log's times (mean 100 req/s)"),
        "{shown}"
    );
    // Flattened to an even rate: that is the load, and there is no schedule.
    let v = replay_json(&[log.to_str().unwrap(), &base, "-t", "1", "--rate", "200"]);
    assert_eq!(counter(&v, "sent"), 30);
    assert_eq!(v["config"]["load"]["arrival"], "constant");
    assert_eq!(v["config"]["load"]["rate"], 200.0);
    assert!(v["config"].get("schedule").is_none(), "{}", v["config"]);
    assert_eq!(server.stats().requests, 90);
    let _ = std::fs::remove_dir_all(&d);
}

/// Over HTTP/2 (`--h2c` to nginx with `listen … http2`): the log nginx wrote
/// for h2c traffic replays with the same counts, and the deleted page is a 404.
#[test]
fn nginx_h2c_replay() {
    let files = [("a.html", vec![b'a'; 300]), ("gone.html", vec![b'g'; 30])];
    let Some(ng) = start_nginx(&NginxSite {
        tag: "replay-h2c",
        files: &files,
        tls: None,
        h2: true,
        http_extra: "access_log {d}/access.log combined;",
        types: "text/html html;",
    }) else {
        return;
    };
    let base = format!("http://127.0.0.1:{}", ng.port);
    for (n, path) in [("20", "/a.html"), ("6", "/gone.html")] {
        let url = format!("{base}{path}");
        let out = run(&["run", "-q", "--no-save", "--h2c", "-n", n, "-c", "2", &url]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let log = ng.dir.join("access.log");
    assert_eq!(wait_lines(&log, 26), 26);
    let copy = ng.dir.join("copy.log");
    std::fs::copy(&log, &copy).unwrap();
    assert!(std::fs::read_to_string(&copy)
        .unwrap()
        .contains("HTTP/2.0\" 200"));
    std::fs::remove_file(ng.dir.join("site/gone.html")).unwrap();
    let v = replay_json(&[copy.to_str().unwrap(), &base, "--h2c", "--rate", "300"]);
    assert_eq!(counter(&v, "sent"), 26);
    assert_eq!(
        map_of(&v["status_codes"]),
        BTreeMap::from([("200".into(), 20), ("404".into(), 6)])
    );
    let gone = request(&v, "GET /gone.html (200)");
    assert_eq!(
        map_of(&gone["statuses"]),
        BTreeMap::from([("404".into(), 6)])
    );
    assert_eq!(wait_lines(&log, 52), 52);
}
