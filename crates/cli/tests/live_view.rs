//! The live view (issue 21), driven in a real terminal: tmux runs redline
//! against Debian's nginx and the test reads the screen with
//! `tmux capture-pane`, as a user would look at it. Under CI=true a missing
//! tmux or nginx fails the test (.ci/run installs both).

mod common;
use common::nginx;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of the test's own (its own socket), killed on drop.
struct Tmux {
    socket: String,
    dir: PathBuf,
}

impl Tmux {
    fn start(tag: &str) -> Option<Tmux> {
        let present =
            Path::new("/usr/bin/tmux").exists() || Command::new("tmux").arg("-V").output().is_ok();
        if !redline_testkit::need::require("tmux (apt-get install -y tmux)", present) {
            return None;
        }
        let dir = nginx::tmpdir(tag);
        // The pane stays after the command ends, so the report can be read.
        std::fs::write(
            dir.join("tmux.conf"),
            "set -g remain-on-exit on\nset -g history-limit 5000\nset -g status off\n",
        )
        .unwrap();
        Some(Tmux {
            socket: format!("redline-{tag}-{}", std::process::id()),
            dir,
        })
    }

    fn tmux(&self, args: &[&str]) -> String {
        let conf = self.dir.join("tmux.conf");
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", conf.to_str().unwrap()])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `cmd` in a new 120x40 window named `name`; `exit=CODE` is
    /// printed when it ends.
    fn run(&self, name: &str, cmd: &str) {
        let line = format!("{cmd}; echo exit=$?");
        self.tmux(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "120",
            "-y",
            "40",
            "env",
            "TERM=xterm-256color",
            "sh",
            "-c",
            &line,
        ]);
    }

    /// The visible screen.
    fn screen(&self, name: &str) -> String {
        self.tmux(&["capture-pane", "-p", "-t", name])
    }

    /// The screen and its scroll-back.
    fn history(&self, name: &str) -> String {
        self.tmux(&["capture-pane", "-p", "-S", "-", "-t", name])
    }

    /// Polls the screen (every 200 ms, `limit` at most) until `done` holds;
    /// the last screen either way.
    fn wait(&self, name: &str, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen(name);
            if done(&s) || start.elapsed() > limit {
                return s;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .env_remove("TMUX")
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn nginx_site(tag: &str) -> Option<nginx::Nginx> {
    nginx::start_nginx(&nginx::NginxSite {
        tag,
        files: &[("index.html", vec![b'x'; 440])],
        tls: None,
        h2: false,
        http_extra: "",
        types: "",
    })
}

/// The number after `label` on the screen's line that has it (digits and
/// thousands commas).
fn number_after(screen: &str, label: &str) -> Option<u64> {
    let line = screen.lines().find(|l| l.contains(label))?;
    let rest = &line[line.find(label)? + label.len()..];
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

#[test]
fn live_view_shows_the_run_and_q_prints_the_report_interrupted() {
    let Some(tm) = Tmux::start("live") else {
        return;
    };
    let Some(ng) = nginx_site("live") else { return };
    let url = format!("http://127.0.0.1:{}/", ng.port);
    let bin = common::bin();
    tm.run("live", &format!("{bin} run --no-save -c 4 -d 30s {url}"));
    // The screen fills in after the first finished second.
    let s = tm.wait("live", Duration::from_secs(20), |s| {
        number_after(s, "2xx").unwrap_or(0) > 0
            && s.contains("Totals to second ")
            && number_after(s, "progress").unwrap_or(0) > 0
    });
    assert!(s.contains(&format!("redline run {url}")), "{s}");
    for want in [
        "Requests/s over time",
        "req/s (s ",
        "bytes/s",
        "Latency over time (• p50  ▄ p90  █ p99)",
        "p50 •",
        "p90 ▄",
        "p99 █",
        "Errors by kind, now",
        "open conns",
        "time left",
        "q or Ctrl-C: stop and print the report",
    ] {
        assert!(s.contains(want), "{want:?} not on the screen:\n{s}");
    }
    assert!(number_after(&s, "2xx").unwrap_or(0) > 0, "{s}");
    assert_eq!(number_after(&s, "5xx"), Some(0), "{s}");
    let pct = number_after(&s, "progress").unwrap();
    assert!((1..100).contains(&pct), "progress {pct}%:\n{s}");
    let rate_line = s.lines().find(|l| l.contains("req/s (s ")).unwrap();
    assert!(number_after(rate_line, ")").unwrap_or(0) > 0, "{s}");
    assert_done_is_the_sum_of_classes(&s);
    // nginx closes a connection after 1000 requests (keepalive_requests): one
    // may be reopening at the moment of the snapshot.
    let open = number_after(&s, "open conns now").unwrap_or(0);
    assert!((1..=4).contains(&open), "open conns {open}:\n{s}");
    // No progress line under the view.
    assert!(!s.contains("req/s now,"), "{s}");

    // `q`: as Ctrl-C, the report is printed after the view is left, marked
    // interrupted, and the exit code is 130.
    tm.tmux(&["send-keys", "-t", "live", "q"]);
    let s = tm.wait("live", Duration::from_secs(20), |s| s.contains("exit="));
    assert!(s.contains("exit=130"), "{s}");
    let all = tm.history("live");
    assert!(
        all.contains("*** INTERRUPTED: the run was stopped early"),
        "{all}"
    );
    assert!(
        all.contains(&format!("Target:           GET {url}")),
        "{all}"
    );
    // The alternate screen is gone: nothing of the view is left on the main screen.
    assert!(!all.contains("Requests/s over time"), "{all}");
}

/// One consistent snapshot per frame: `done` (and the status panel's `sum`)
/// is the sum of the status classes on the same screen.
fn assert_done_is_the_sum_of_classes(s: &str) {
    let classes: u64 = ["1xx", "2xx", "3xx", "4xx", "5xx"]
        .iter()
        .map(|c| number_after(s, c).unwrap_or_else(|| panic!("{c}:\n{s}")))
        .sum();
    assert_eq!(number_after(s, "done"), Some(classes), "{s}");
    assert_eq!(number_after(s, "sum"), Some(classes), "{s}");
}

/// An open-loop run under NO_COLOR: target and sent rate, bytes/s, the
/// latency lines told apart by their marks, and no colour at all on screen.
#[test]
fn open_loop_without_colour_shows_target_and_sent_rate() {
    let Some(tm) = Tmux::start("nocolor") else {
        return;
    };
    let Some(ng) = nginx_site("nocolor") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", ng.port);
    let bin = common::bin();
    tm.run(
        "nocolor",
        &format!("NO_COLOR=1 {bin} run --no-save --rate 400 -d 30s {url}"),
    );
    let s = tm.wait("nocolor", Duration::from_secs(20), |s| {
        number_after(s, "2xx").unwrap_or(0) > 0
            && s.contains("Totals to second 3")
            && s.contains("now")
    });
    assert_eq!(number_after(&s, "target req/s"), Some(400), "{s}");
    let sent = number_after(&s, "sent req/s").unwrap_or(0);
    assert!((300..=500).contains(&sent), "sent {sent}/s:\n{s}");
    assert!(number_after(&s, "bytes/s").is_some(), "{s}");
    for mark in ["p50 •", "p90 ▄", "p99 █"] {
        assert!(s.contains(mark), "{mark:?}:\n{s}");
    }
    assert_done_is_the_sum_of_classes(&s);
    // The screen with its escapes: no foreground or background colour
    // (SGR 30-38, 40-48, 90-97, 100-107), bold and the like allowed.
    let raw = tm.tmux(&["capture-pane", "-p", "-e", "-t", "nocolor"]);
    for seq in raw.split("\u{1b}[").skip(1) {
        let Some(params) = seq.split('m').next().filter(|p| p.len() < seq.len()) else {
            continue;
        };
        for p in params.split(';').filter_map(|p| p.parse::<u32>().ok()) {
            assert!(
                !matches!(p, 30..=38 | 40..=48 | 90..=97 | 100..=107),
                "colour (SGR {params}) on screen under NO_COLOR"
            );
        }
    }
    tm.tmux(&["send-keys", "-t", "nocolor", "q"]);
    let s = tm.wait("nocolor", Duration::from_secs(20), |s| s.contains("exit="));
    assert!(s.contains("exit=130"), "{s}");
}

#[test]
fn no_tui_keeps_the_progress_line_and_a_piped_stderr_gets_no_view() {
    let Some(tm) = Tmux::start("notui") else {
        return;
    };
    let Some(ng) = nginx_site("notui") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", ng.port);
    let bin = common::bin();
    tm.run(
        "notui",
        &format!("{bin} run --no-save --no-tui -c 2 -d 4s {url}"),
    );
    let s = tm.wait("notui", Duration::from_secs(20), |s| {
        s.contains("req/s now,") || s.contains("exit=")
    });
    assert!(s.contains("req/s now,") && s.contains(" done, "), "{s}");
    assert!(!s.contains("Requests/s over time"), "{s}");
    let s = tm.wait("notui", Duration::from_secs(20), |s| s.contains("exit="));
    assert!(s.contains("exit=0"), "{s}");

    // stderr to a file: no view and no escape codes in it, the report on the terminal.
    let err = tm.dir.join("err.txt");
    tm.run(
        "piped",
        &format!("{bin} run --no-save -c 2 -d 2s {url} 2>{}", err.display()),
    );
    let s = tm.wait("piped", Duration::from_secs(20), |s| s.contains("exit="));
    assert!(s.contains("exit=0"), "{s}");
    let all = tm.history("piped");
    assert!(
        all.contains(&format!("Target:           GET {url}")),
        "{all}"
    );
    let e = std::fs::read_to_string(&err).unwrap();
    assert!(!e.contains('\x1b'), "{e:?}");
}

#[test]
fn find_shows_its_steps_live_and_prints_them_after() {
    let Some(tm) = Tmux::start("livefind") else {
        return;
    };
    let Some(ng) = nginx_site("livefind") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", ng.port);
    let bin = common::bin();
    tm.run(
        "find",
        &format!(
            "{bin} find --no-save {url} --slo 'p99<2s' --start-rate 20 --warmup 1s --step-duration 2s --max-steps 2"
        ),
    );
    let s = tm.wait("find", Duration::from_secs(20), |s| {
        s.contains("step 1 of at most 2: 20.0 req/s") || s.contains("exit=")
    });
    assert!(s.contains(&format!("redline find {url}")), "{s}");
    assert!(s.contains("step 1 of at most 2: 20.0 req/s"), "{s}");
    // The search's own first line is in the view's log, not on the terminal.
    assert!(s.contains("redline find: "), "{s}");
    let s = tm.wait("find", Duration::from_secs(30), |s| s.contains("exit="));
    // 0: an answer; 1: the client was the limit (a busy machine).
    assert!(s.contains("exit=0") || s.contains("exit=1"), "{s}");
    // Once the view is left, the step lines and the answer are on the terminal.
    let all = tm.history("find");
    assert!(
        all.contains(&format!("redline find: {url}, SLO p99<2s")),
        "{all}"
    );
    assert!(all.contains("step target req/s"), "{all}");
    assert!(
        all.lines().any(|l| l.starts_with("   1         20.0 ")),
        "{all}"
    );
    assert!(all.contains("(search stopped: "), "{all}");
    assert!(!all.contains("Requests/s over time"), "{all}");
}

/// Kills an agent process on drop.
struct Agent(std::process::Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn coordinate_shows_the_merged_run_and_q_quits() {
    let Some(tm) = Tmux::start("livecoord") else {
        return;
    };
    let Some(ng) = nginx_site("livecoord") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", ng.port);
    let bin = common::bin();
    let port = nginx::free_port();
    tm.run(
        "coord",
        &format!(
            "{bin} coordinate --agents 2 --listen 127.0.0.1:{port} --start-delay 300ms --ready-timeout 20s"
        ),
    );
    let s = tm.wait("coord", Duration::from_secs(20), |s| {
        s.contains("waiting for 2 agents")
    });
    assert!(s.contains("waiting for 2 agents"), "{s}");
    let coordinator = format!("127.0.0.1:{port}");
    let _agents: Vec<Agent> = (0..2)
        .map(|i| {
            Agent(
                Command::new(bin)
                    .args(["agent", "--index", &i.to_string(), "--total", "2"])
                    .args(["--coordinator", &coordinator, "--"])
                    .args([url.as_str(), "-d", "30s", "-c", "2"])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .expect("start an agent"),
            )
        })
        .collect();
    let s = tm.wait("coord", Duration::from_secs(30), |s| {
        number_after(s, "2xx").unwrap_or(0) > 0 && number_after(s, "│agents").is_some()
    });
    assert!(
        s.contains(&format!("redline coordinate on 127.0.0.1:{port}")),
        "{s}"
    );
    assert!(s.contains("q or Ctrl-C: quit at once"), "{s}");
    assert!(s.contains("agent 1 ready"), "{s}");
    assert!(number_after(&s, "2xx").unwrap_or(0) > 0, "{s}");
    assert_eq!(number_after(&s, "│agents"), Some(2), "{s}");
    assert!(number_after(&s, "progress").is_some(), "{s}");
    // No progress or per-second lines under the view.
    assert!(!s.contains(" agents, "), "{s}");
    tm.tmux(&["send-keys", "-t", "coord", "q"]);
    let s = tm.wait("coord", Duration::from_secs(20), |s| s.contains("exit="));
    assert!(s.contains("exit=130"), "{s}");
    let all = tm.history("coord");
    // The events the view held are printed once it is left.
    assert!(
        all.contains("redline coordinate: agent 0 registered"),
        "{all}"
    );
    assert!(!all.contains("Requests/s over time"), "{all}");
}

#[test]
fn a_second_q_quits_at_once_with_the_terminal_restored() {
    let Some(tm) = Tmux::start("liveq2") else {
        return;
    };
    // Answers that take 10 s: after the first `q` the run drains (up to 1 s
    // of grace), and the second quits before any report.
    let srv = common::builtin();
    let url = format!("http://{}/?delay=10s", srv.local_addr());
    let bin = common::bin();
    // After redline: its exit code, then whether the terminal is back in
    // canonical mode (`icanon`, not raw mode's `-icanon`).
    tm.run(
        "q2",
        &format!(
            "{bin} run --no-save -c 2 -d 30s '{url}'; echo rc=$?; stty -a | grep -o -- '-*icanon'"
        ),
    );
    let s = tm.wait("q2", Duration::from_secs(20), |s| {
        number_after(s, "open conns now") == Some(2)
    });
    assert_eq!(number_after(&s, "open conns now"), Some(2), "{s}");
    tm.tmux(&["send-keys", "-t", "q2", "q", "q"]);
    let s = tm.wait("q2", Duration::from_secs(20), |s| s.contains("exit="));
    assert!(s.contains("exit="), "{s}");
    // The scroll-back too: tmux may scroll the lines up when the pane ends.
    let all = tm.history("q2");
    assert!(all.contains("rc=130"), "{all}");
    assert!(
        all.lines().any(|l| l.trim() == "icanon"),
        "raw mode left on:\n{all}"
    );
    assert!(
        !all.contains("Target:"),
        "no report after a second q: {all}"
    );
    assert!(!all.contains("Requests/s over time"), "{all}");
}

/// The live view of an `--http3` run against the testkit's HTTP/3 server:
/// the screen fills in as over TCP, and `q` prints the HTTP/3 report.
#[test]
fn live_view_of_an_http3_run() {
    let Some(tm) = Tmux::start("live-h3") else {
        return;
    };
    let pki = redline_testkit::pki::pki();
    let ca = tm.dir.join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let srv = redline_testkit::h3::start(&pki, redline_testkit::h3::H3Options::body(100));
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let bin = common::bin();
    tm.run(
        "h3",
        &format!(
            "{bin} run --no-save --http3 --cacert {} -c 2 -d 30s {url}",
            ca.display()
        ),
    );
    let s = tm.wait("h3", Duration::from_secs(20), |s| {
        number_after(s, "2xx").unwrap_or(0) > 0 && s.contains("Totals to second ")
    });
    assert!(s.contains("Requests/s over time"), "{s}");
    assert_done_is_the_sum_of_classes(&s);
    assert_eq!(number_after(&s, "open conns now"), Some(2), "{s}");
    tm.tmux(&["send-keys", "-t", "h3", "q"]);
    let s = tm.wait("h3", Duration::from_secs(20), |s| s.contains("exit="));
    assert!(s.contains("exit=130"), "{s}");
    let all = tm.history("h3");
    assert!(all.contains("HTTP/3"), "{all}");
    assert!(all.contains("QUIC handshake (2 new)"), "{all}");
    let answered = srv
        .counts
        .answered
        .load(std::sync::atomic::Ordering::Relaxed);
    // Stopped mid-run: at most the 2 requests then in flight were answered
    // by the server and not counted complete.
    let completed = number_after(&all, "Requests:").unwrap_or(0);
    assert!(
        completed > 0 && completed <= answered && answered - completed <= 2,
        "server answered {answered}:\n{all}"
    );
}
