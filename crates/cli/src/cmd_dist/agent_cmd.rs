//! `redline agent`: register with the coordinator, run the share as a child
//! `redline run`, forward its live seconds and send its record.

use super::*;

pub(super) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Flags of `run` the agent sets itself and drops when the user gave them too.
pub(super) const DROPPED: &[&str] = &["--no-save"];

pub(super) fn cmd_agent(a: AgentArgs) -> Exit {
    if a.total > MAX_AGENTS {
        return fail(
            Exit::Usage,
            format!("--total {}: at most {MAX_AGENTS} agents", a.total),
        );
    }
    if a.total == 0 || a.index >= a.total {
        return fail(
            Exit::Usage,
            format!(
                "--index {} --total {}: the index must be below the total",
                a.index, a.total
            ),
        );
    }
    let seg = match &a.segment_sequence {
        Some(q) => match segment::Sequence::parse(q) {
            Ok(s) if s.len() as u64 == a.total => s.segment(a.index as usize).expect("index < len"),
            Ok(s) => {
                return fail(
                    Exit::Usage,
                    format!(
                        "--segment-sequence {q} has {} segments for --total {}",
                        s.len(),
                        a.total
                    ),
                )
            }
            Err(e) => return fail(Exit::Usage, e),
        },
        None => match segment::Sequence::equal(a.total) {
            Ok(s) => s.segment(a.index as usize).expect("index < total"),
            Err(e) => return fail(Exit::Usage, e),
        },
    };
    let tls = match &a.cacert {
        None => None,
        Some(p) => match read_bounded(p, 1 << 20, "--cacert")
            .and_then(|c| redline_dist::tls::client_config(&c))
        {
            Ok(c) => Some(c),
            Err(e) => return fail(Exit::Usage, e),
        },
    };
    let mut run = a.run.clone();
    if run.first().map(String::as_str) == Some("run") {
        run.remove(0);
    }
    run.retain(|x| !DROPPED.contains(&x.as_str()));
    // The run's own parser and plan builder: this agent's share as `run
    // --segment` will run it (a scenario's [load] and --stages included).
    let share = match crate::cli::agent_run(&run, seg.clone()) {
        Ok(s) => s,
        Err(e) => return fail(Exit::Usage, e),
    };
    // --abort-on-fail is the coordinator's: a threshold on this agent's share
    // is not the run's verdict, so the child never stops on its own view.
    let abort_on_fail = share.abort_on_fail;
    run.retain(|x| x != "--abort-on-fail");
    if abort_on_fail {
        eprintln!(
            "redline agent {}: --abort-on-fail is judged by the coordinator on the merged run, not by this agent",
            a.index
        );
    }
    let (connections, requests, rate, duration) = match &share.plan.load {
        redline_engine::Load::Closed {
            connections,
            requests,
            duration,
        } => (*connections, *requests, None, *duration),
        redline_engine::Load::Open {
            rate,
            max_connections,
            requests,
            duration,
            ..
        } => (*max_connections, *requests, Some(*rate), *duration),
    };
    let token = match resolve_token(
        a.token.as_ref().map(|t| t.0.as_str()),
        a.token_file.as_deref(),
    ) {
        Ok(t) => t,
        Err(e) => return fail(Exit::Usage, e),
    };
    let plan = match plan_id(&run, seg.sequence(), a.total) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Usage, e),
    };
    let expected_s = duration.map(|d| d.as_secs_f64());
    let mut child_args = vec![
        "--segment".to_string(),
        seg.to_string(),
        "--segment-sequence".to_string(),
        seg.sequence().to_string(),
    ];
    child_args.extend(run);
    let host = hostname();
    let mut session = match agent::Session::register(
        &a.coordinator,
        a.index,
        a.total,
        &host,
        a.connect_timeout,
        token.as_ref(),
        &plan,
        tls.as_ref(),
    ) {
        Ok(s) => s,
        Err(e) => return fail(Exit::Failure, e),
    };
    if let Err(e) = session.sync_clock(8) {
        return fail(Exit::Failure, e);
    }
    eprintln!(
        "redline agent {}: segment {seg}, {} connections{}{}; clock offset {:+.1} ms",
        a.index,
        connections,
        requests
            .map(|n| format!(", {n} requests"))
            .unwrap_or_default(),
        rate.map(|r| format!(", {r} req/s")).unwrap_or_default(),
        session.offset_ms
    );
    let start = match session.ready_and_wait(expected_s, requests, abort_on_fail, a.start_timeout) {
        Ok(s) => s,
        Err(e) => return fail(Exit::Failure, e),
    };
    let stop = session.listen_for_stop();
    // Sleep to the common start (bounded by the start delay the coordinator chose).
    let wait = start.saturating_duration_since(Instant::now());
    std::thread::sleep(wait.min(Duration::from_secs(600)));
    if let Some(why) = share.plan.empty_share() {
        eprintln!("redline agent {}: nothing to run: {why}", a.index);
        return match session.done(0.0, None, Some(why.to_string())) {
            Ok(()) => Exit::Ok,
            Err(e) => fail(Exit::Failure, e),
        };
    }
    let late_ms = Instant::now()
        .saturating_duration_since(start)
        .as_secs_f64()
        * 1000.0;
    let (record, note) = run_child(&child_args, &session.progress(), &stop, a.index);
    let text = record
        .as_ref()
        .and_then(|r| serde_json::to_string_pretty(r).ok());
    // The fallback: the agent's own record on its stdout.
    if let Some(t) = &text {
        print_out(&format!("{t}\n"));
    }
    let sent = session.done(late_ms, record.clone(), note.clone());
    match (sent, record) {
        (Ok(()), Some(_)) => Exit::Ok,
        (Ok(()), None) => fail(
            Exit::Failure,
            note.unwrap_or_else(|| "the run failed".into()),
        ),
        (Err(e), _) => fail(Exit::Failure, e),
    }
}

/// Runs `redline run ARGS -o json -q --no-save --live-json TMP` as a child
/// that dies with this process, forwarding its live counters every second.
/// Returns its record (JSON) or why there is none.
pub(super) fn run_child(
    args: &[String],
    progress: &agent::ProgressSender,
    stop: &agent::StopRequest,
    index: u64,
) -> (Option<serde_json::Value>, Option<String>) {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return (None, Some(format!("cannot find the redline binary: {e}"))),
    };
    let live = std::env::temp_dir().join(format!(
        "redline-agent-{}-{index}.jsonl",
        std::process::id()
    ));
    let seconds_file = std::env::temp_dir().join(format!(
        "redline-agent-{}-{index}.seconds.jsonl",
        std::process::id()
    ));
    let mut cmd = std::process::Command::new(exe);
    // The agent's own flags first: the run arguments may end with `-- URL`.
    cmd.arg("run")
        .args(["-o", "json", "-q", "--no-save", "--live-json"])
        .arg(&live)
        .arg("--live-seconds")
        .arg(&seconds_file)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no
    // memory of the parent; it makes the load stop when the agent dies.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return (None, Some(format!("cannot start the run: {e}"))),
    };
    // Read stdout and stderr on threads so a full pipe never blocks the child.
    let out = child.stdout.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut v);
            v
        })
    });
    let err = child.stderr.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut v);
            v
        })
    });
    let started = Instant::now();
    let mut last = (0u64, 0u64, 0u64);
    let mut tail = SecondsTail::default();
    let mut next_beat = 0u64;
    let mut running = false;
    let mut stopped = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) => {}
            Err(_) => break None,
        }
        tail.forward(&seconds_file, progress);
        if let Ok(f) = std::fs::File::open(&live) {
            if let Some(Ok(l)) = std::io::BufReader::new(f).lines().last() {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&l) {
                    let g = |k: &str| v[k].as_u64().unwrap_or(0);
                    last = (g("completed"), g("failed"), g("open"));
                    // A live line: the child runs and has its Ctrl-C handler.
                    running = true;
                }
            }
        }
        // The coordinator's stop: the child stops as on Ctrl-C (one SIGINT:
        // sending stops, in-flight requests get their grace, the record follows).
        if !stopped && running {
            if let Some(why) = stop.reason() {
                stopped = true;
                eprintln!("redline agent {index}: stopping: {why}");
                if let Ok(pid) = i32::try_from(child.id()) {
                    // SAFETY: kill(2) on our own child's pid, which has not
                    // been reaped yet (try_wait above returned None).
                    unsafe {
                        libc::kill(pid, libc::SIGINT);
                    }
                }
            }
        }
        // A heartbeat every second even when nothing changed; the seconds
        // file is read four times as often.
        let t = started.elapsed().as_secs();
        if t >= next_beat {
            next_beat = t + 1;
            if progress.send(t, last.0, last.1, last.2).is_err() {
                // The coordinator is gone; the run goes on for the fallback record.
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    // The seconds the child wrote at its end, before the record.
    tail.forward(&seconds_file, progress);
    let _ = std::fs::remove_file(&live);
    let _ = std::fs::remove_file(&seconds_file);
    let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = err.and_then(|h| h.join().ok()).unwrap_or_default();
    let code = status.and_then(|s| s.code());
    match serde_json::from_slice::<serde_json::Value>(&stdout) {
        // Exit 4 (a --threshold in the run arguments) still has a record.
        Ok(v) if v.get("format").is_some() => (Some(v), None),
        _ => {
            let msg = String::from_utf8_lossy(&stderr);
            let first = msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            (
                None,
                Some(format!(
                    "the run failed (exit {}): {first}",
                    code.map(|c| c.to_string())
                        .unwrap_or_else(|| "by signal".into())
                )),
            )
        }
    }
}

/// Reads the child's `--live-seconds` file from where it stopped and
/// forwards each complete new line to the coordinator as `Msg::Second`.
#[derive(Default)]
pub(super) struct SecondsTail {
    offset: u64,
    partial: Vec<u8>,
}

impl SecondsTail {
    fn forward(&mut self, path: &std::path::Path, progress: &agent::ProgressSender) {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(path) else {
            return;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        // Bounded: at most 64 MiB per call (a second's line is a few KB).
        let mut buf = Vec::new();
        let Ok(n) = f.take(64 << 20).read_to_end(&mut buf) else {
            return;
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let rest = self.partial.split_off(end + 1);
        let lines = std::mem::replace(&mut self.partial, rest);
        for l in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            if let Ok(m) = serde_json::from_slice::<redline_dist::protocol::Msg>(l) {
                // The coordinator gone: the run goes on for the fallback record.
                let _ = progress.second(&m);
            }
        }
    }
}
