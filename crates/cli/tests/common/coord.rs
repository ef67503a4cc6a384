//! A coordinator process for the distributed tests (dist.rs, dist_hostile.rs):
//! started on loopback, its stderr lines read on a thread, waits bounded.

use super::{bin, wait_limit};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A coordinator on 127.0.0.1:0; its stderr lines arrive on `lines`.
pub struct Coord {
    pub child: Child,
    pub port: u16,
    pub lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Coord {
    /// A coordinator on 127.0.0.1:0 with `extra` flags.
    pub fn start(extra: &[&str]) -> Coord {
        Coord::start_with("127.0.0.1:0", extra, &[])
    }

    /// A coordinator on `listen`.
    pub fn start_on(listen: &str, extra: &[&str]) -> Coord {
        Coord::start_with(listen, extra, &[])
    }

    /// A coordinator on 127.0.0.1:0 with `env` set (REDLINE_TOKEN is never inherited).
    pub fn start_env(extra: &[&str], env: &[(&str, &str)]) -> Coord {
        Coord::start_with("127.0.0.1:0", extra, env)
    }

    fn start_with(listen: &str, extra: &[&str], env: &[(&str, &str)]) -> Coord {
        let mut child = Command::new(bin())
            .args([
                "coordinate",
                "--listen",
                listen,
                "--start-delay",
                "300ms",
                "-o",
                "json",
            ])
            .args(extra)
            .envs(env.iter().copied())
            .env_remove("REDLINE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn coordinator");
        let (tx, lines) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut c = Coord {
            child,
            port: 0,
            lines,
            seen: Vec::new(),
        };
        let l = c.wait_for("listening on", Duration::from_secs(20));
        let addr = l
            .split("listening on ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        c.port = addr.rsplit(':').next().unwrap().parse().unwrap();
        c
    }

    /// Waits (bounded) for a stderr line containing `what`.
    pub fn wait_for(&mut self, what: &str, limit: Duration) -> String {
        let start = Instant::now();
        if let Some(l) = self.seen.iter().find(|l| l.contains(what)) {
            return l.clone();
        }
        while start.elapsed() < limit {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(100)) {
                self.seen.push(l.clone());
                if l.contains(what) {
                    return l;
                }
            }
        }
        panic!(
            "no {what:?} from the coordinator within {limit:?}: {:?}",
            self.seen
        );
    }

    /// Waits for the coordinator's exit: (code, stdout, all stderr lines).
    pub fn finish(mut self) -> (Option<i32>, String, String) {
        let out = wait_limit(self.child, Duration::from_secs(90));
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(l);
        }
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            self.seen.join("\n"),
        )
    }

    /// [`Coord::finish`], asserting the exit code `code`, and the merged run
    /// record it printed: (record, its stderr lines).
    pub fn finish_record(self, code: i32) -> (serde_json::Value, String) {
        let (got, stdout, err) = self.finish();
        assert_eq!(got, Some(code), "{err}");
        let record = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("not a run record ({e}): {stdout}\n{err}"));
        (record, err)
    }
}

/// Waits for each agent (at most `limit` each) and asserts it exited 0
/// (its stderr in the message): their outputs, in order.
pub fn agents_succeed(agents: Vec<Child>, limit: Duration) -> Vec<std::process::Output> {
    agents
        .into_iter()
        .map(|a| {
            let out = wait_limit(a, limit);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            out
        })
        .collect()
}

/// An agent process (`redline agent --index I --total T --coordinator
/// 127.0.0.1:PORT --connect-timeout 20s -- RUN`), outputs captured, history
/// in the temporary database, REDLINE_TOKEN not inherited.
pub fn agent(i: u64, total: u64, port: u16, run: &[&str]) -> Child {
    agent_env(i, total, port, &[], run)
}

/// [`agent`] with `env` set (e.g. its REDLINE_TOKEN).
pub fn agent_env(i: u64, total: u64, port: u16, env: &[(&str, &str)], run: &[&str]) -> Child {
    redline_testkit::proc::command(bin())
        .args([
            "agent",
            "--index",
            &i.to_string(),
            "--total",
            &total.to_string(),
        ])
        .args([
            "--coordinator",
            &format!("127.0.0.1:{port}"),
            "--connect-timeout",
            "20s",
            "--",
        ])
        .args(run)
        .env_remove("REDLINE_TOKEN")
        .envs(env.iter().copied())
        .spawn()
        .expect("spawn agent")
}
