//! The agent side (`redline agent`): register with the coordinator, measure
//! the clock offset, wait for the common start, report progress, send the
//! record; and [`scale_run_args`], which turns the run's arguments into this
//! agent's share of them.

use crate::protocol::{self, Msg};
use crate::segment::Segment;
use std::io::BufReader;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A connection to the coordinator.
pub struct Session {
    reader: Option<BufReader<TcpStream>>,
    /// Once the run has started: the coordinator's messages, read on a thread.
    inbox: Option<mpsc::Receiver<Result<Msg, String>>>,
    writer: Arc<Mutex<TcpStream>>,
    /// Coordinator clock minus this machine's clock, ms.
    pub offset_ms: f64,
    /// Smallest round trip seen, ms.
    pub rtt_ms: f64,
}

/// Sends progress while the run goes on (cheap to clone).
#[derive(Clone)]
pub struct ProgressSender(Arc<Mutex<TcpStream>>);

impl ProgressSender {
    /// Forwards one finished second of the run (`Msg::Second`); other messages are not sent.
    pub fn second(&self, m: &Msg) -> std::io::Result<()> {
        if !matches!(m, Msg::Second { .. }) {
            return Ok(());
        }
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        protocol::send(&mut *g, m)
    }

    /// Sends cumulative counters; Err when the coordinator is gone.
    pub fn send(&self, t: u64, completed: u64, failed: u64, open: u64) -> std::io::Result<()> {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        protocol::send(
            &mut *g,
            &Msg::Progress {
                t,
                completed,
                failed,
                open,
            },
        )
    }
}

/// What a coordinator's greeting means to this agent.
enum Greeting {
    /// Its hello, in this agent's protocol: the session and the nonce.
    Hello(Session, String),
    /// Another protocol version: why, naming both (not tried again).
    Refuse(String),
}

impl Session {
    /// Connects (retrying until `retry_for` has passed: pods start in any
    /// order) and registers as agent `index` of `total` running `plan`,
    /// proving it knows `token` (if any) against the coordinator's nonce.
    /// With `tls`, over TLS, the coordinator's certificate checked against
    /// the host name in `addr`.
    #[allow(clippy::too_many_arguments)]
    pub fn register(
        addr: &str,
        index: u64,
        total: u64,
        host: &str,
        retry_for: Duration,
        token: Option<&protocol::Token>,
        plan: &protocol::PlanId,
        tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
    ) -> Result<Session, String> {
        let start = Instant::now();
        let host_name = addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        // Connect and be greeted; a coordinator not up yet, or closing new
        // connections because too many wait unregistered, is tried again.
        let (mut s, nonce) = loop {
            let attempt = addr
                .to_socket_addrs()
                .map_err(|e| e.to_string())
                .and_then(|mut a| a.next().ok_or_else(|| "no address".to_string()))
                .and_then(|a| {
                    TcpStream::connect_timeout(&a, Duration::from_secs(5))
                        .map_err(|e| e.to_string())
                })
                .and_then(|s| match tls {
                    None => Ok(s),
                    Some(c) => {
                        crate::tls::connect(s, host_name, c.clone(), Duration::from_secs(10))
                    }
                })
                .and_then(Session::greeted);
            match attempt {
                Ok(Greeting::Hello(s, nonce)) => break (s, nonce),
                // Another protocol: trying again would not help.
                Ok(Greeting::Refuse(why)) => return Err(why),
                Err(e) if start.elapsed() >= retry_for => {
                    return Err(format!("cannot reach the coordinator at {addr}: {e}"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        };
        s.send(&Msg::Register {
            index,
            total,
            host: host.to_string(),
            version: protocol::VERSION,
            auth: token.map(|t| protocol::auth_proof(t.bytes(), &nonce, index, &plan.fingerprint)),
            plan: Some(plan.clone()),
        })?;
        match s.recv()? {
            Msg::Registered => Ok(s),
            Msg::Refused { reason } => Err(format!(
                "the coordinator refused agent {index}: {}",
                clean(&reason)
            )),
            other => Err(format!(
                "unexpected answer from the coordinator: {}",
                kind(&other)
            )),
        }
    }

    /// A new connection, once the coordinator's `hello` came: the session and
    /// the nonce, or why this agent cannot work with that coordinator.
    fn greeted(stream: TcpStream) -> Result<Greeting, String> {
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let writer = Arc::new(Mutex::new(stream.try_clone().map_err(|e| e.to_string())?));
        let mut s = Session {
            reader: Some(BufReader::new(stream)),
            inbox: None,
            writer,
            offset_ms: 0.0,
            rtt_ms: 0.0,
        };
        let nonce = match s.recv()? {
            Msg::Hello { version, .. } if version != protocol::VERSION => {
                return Ok(Greeting::Refuse(format!(
                    "the coordinator speaks protocol version {version}, this agent speaks {}: run the same redline version on both",
                    protocol::VERSION
                )))
            }
            Msg::Hello { nonce, .. } if nonce.len() <= 128 => nonce,
            Msg::Hello { .. } => return Err("the coordinator sent an absurd nonce".into()),
            other => {
                return Err(format!(
                    "unexpected greeting from the coordinator: {}",
                    kind(&other)
                ))
            }
        };
        Ok(Greeting::Hello(s, nonce))
    }

    fn send(&self, m: &Msg) -> Result<(), String> {
        let mut g = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        protocol::send(&mut *g, m).map_err(|e| format!("lost the coordinator: {e}"))
    }

    fn recv(&mut self) -> Result<Msg, String> {
        if let Some(inbox) = &self.inbox {
            return match inbox.recv_timeout(Duration::from_secs(30)) {
                Ok(r) => r,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    Err("the coordinator did not answer within 30 s".into())
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    Err("the coordinator closed the connection".into())
                }
            };
        }
        let Some(reader) = self.reader.as_mut() else {
            return Err("the coordinator closed the connection".into());
        };
        read_msg(reader)
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> Result<(), String> {
        match &self.reader {
            Some(r) => r.get_ref().set_read_timeout(t).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// From the start on: reads the coordinator's messages on a thread, so a
    /// `stop` is seen while the run goes on. The returned flag holds the
    /// reason once the coordinator said to stop (or gave up: `abort`).
    pub fn listen_for_stop(&mut self) -> StopRequest {
        let flag = StopRequest::default();
        let Some(mut reader) = self.reader.take() else {
            return flag;
        };
        let (tx, rx) = mpsc::channel();
        self.inbox = Some(rx);
        let f = flag.clone();
        // Reads block until a message comes or the connection closes; the
        // thread ends with the connection (or the process).
        let _ = reader.get_ref().set_read_timeout(None);
        let spawned = std::thread::Builder::new()
            .name("redline-agent-inbox".into())
            .spawn(move || loop {
                let m = read_msg(&mut reader);
                let end = m.is_err();
                match &m {
                    Ok(Msg::Stop { reason }) => f.set(clean(reason)),
                    Ok(Msg::Abort { reason }) => {
                        f.set(format!("the coordinator aborted: {}", clean(reason)))
                    }
                    _ => {}
                }
                if tx.send(m).is_err() || end {
                    return;
                }
            });
        if spawned.is_err() {
            self.inbox = None;
        }
        flag
    }

    /// Measures the clock offset with `probes` round trips (the fastest wins).
    pub fn sync_clock(&mut self, probes: u64) -> Result<(f64, f64), String> {
        let mut v = Vec::new();
        for id in 0..probes.max(1) {
            let t0 = protocol::now_ms();
            self.send(&Msg::Ping { id })?;
            match self.recv()? {
                Msg::Pong { id: got, now_ms } if got == id && sane_ms(now_ms) => {
                    v.push((t0, now_ms, protocol::now_ms()))
                }
                Msg::Pong { now_ms, .. } if !sane_ms(now_ms) => {
                    return Err(format!(
                        "the coordinator sent an absurd clock ({now_ms} ms)"
                    ))
                }
                Msg::Abort { reason } => {
                    return Err(format!("the coordinator aborted: {}", clean(&reason)))
                }
                other => {
                    return Err(format!(
                        "unexpected answer to a clock probe: {}",
                        kind(&other)
                    ))
                }
            }
        }
        let (off, rtt) = protocol::clock_offset(&v).expect("at least one probe");
        self.offset_ms = off;
        self.rtt_ms = rtt;
        Ok((off, rtt))
    }

    /// Says it is ready and waits (up to `wait`) for the start; returns the
    /// start as an instant of this machine's monotonic clock.
    /// `requests` is this agent's share of a count-bounded run;
    /// `abort_on_fail` says the run arguments asked for `--abort-on-fail`,
    /// which the coordinator judges on the merged run.
    pub fn ready_and_wait(
        &mut self,
        expected_s: Option<f64>,
        requests: Option<u64>,
        abort_on_fail: bool,
        wait: Duration,
    ) -> Result<Instant, String> {
        self.send(&Msg::Ready {
            offset_ms: self.offset_ms,
            rtt_ms: self.rtt_ms,
            expected_s,
            requests,
            abort_on_fail,
        })?;
        self.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        let at_ms = match self.recv()? {
            Msg::Start { at_ms } => at_ms,
            Msg::Abort { reason } => {
                return Err(format!("the coordinator aborted: {}", clean(&reason)))
            }
            other => {
                return Err(format!(
                    "unexpected message instead of the start: {}",
                    kind(&other)
                ))
            }
        };
        // The start on our clock; an instant `delta` from now.
        let local_ms = at_ms - self.offset_ms;
        let delta = local_ms - protocol::now_ms();
        // A hostile or broken coordinator's time is an error, not a panic:
        // at most a day ahead, at most a minute behind.
        if !(delta.is_finite() && (-MAX_START_BEHIND_MS..=MAX_START_AHEAD_MS).contains(&delta)) {
            return Err(format!(
                "the coordinator sent an absurd start time ({at_ms} ms since the epoch, {:.0} s from now)",
                delta / 1000.0
            ));
        }
        let now = Instant::now();
        Ok(if delta > 0.0 {
            now + Duration::from_secs_f64(delta / 1000.0)
        } else {
            now.checked_sub(Duration::from_secs_f64(-delta / 1000.0))
                .unwrap_or(now)
        })
    }

    /// A handle for sending progress from another thread.
    pub fn progress(&self) -> ProgressSender {
        ProgressSender(self.writer.clone())
    }

    /// Sends the result and waits (up to 30 s) for the coordinator's ack.
    pub fn done(
        &mut self,
        lateness_ms: f64,
        record: Option<serde_json::Value>,
        note: Option<String>,
    ) -> Result<(), String> {
        self.send(&Msg::Done {
            lateness_ms,
            record: record.map(Box::new),
            note,
        })?;
        let _ = self.set_read_timeout(Some(Duration::from_secs(30)));
        // A stop that crossed the record on the way is not the answer.
        for _ in 0..8 {
            match self.recv()? {
                Msg::Ack => return Ok(()),
                Msg::Stop { .. } => continue,
                Msg::Refused { reason } => {
                    return Err(format!(
                        "the coordinator refused the record: {}",
                        clean(&reason)
                    ))
                }
                other => return Err(format!("unexpected answer to the record: {}", kind(&other))),
            }
        }
        Err("no answer to the record".into())
    }
}

/// How far ahead a start may be (a day) and how far behind (a minute).
const MAX_START_AHEAD_MS: f64 = 86_400_000.0;
const MAX_START_BEHIND_MS: f64 = 60_000.0;

/// A wall-clock time in ms since the epoch that is finite and before year 10000.
fn sane_ms(ms: f64) -> bool {
    ms.is_finite() && (0.0..=253_402_300_800_000.0).contains(&ms)
}

/// Text from the coordinator, shown: no control characters, bounded.
fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(500).collect()
}

/// A message's type, for errors (its fields may be large or hostile).
fn kind(m: &Msg) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v["type"].as_str().map(String::from))
        .unwrap_or_else(|| "?".into())
}

fn read_msg(reader: &mut BufReader<TcpStream>) -> Result<Msg, String> {
    match protocol::recv(reader) {
        Ok(Some(m)) => Ok(m),
        Ok(None) => Err("the coordinator closed the connection".into()),
        Err(e) => Err(format!("lost the coordinator: {e}")),
    }
}

/// The coordinator's request to stop the run early (cheap to clone).
#[derive(Clone, Default)]
pub struct StopRequest(Arc<Mutex<Option<String>>>);

impl StopRequest {
    fn set(&self, why: String) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        g.get_or_insert(why);
    }

    /// Why the coordinator asked to stop, once it has.
    pub fn reason(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The run arguments of one agent, and what was scaled.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaledArgs {
    /// The arguments for `redline run`.
    pub args: Vec<String>,
    /// This agent's connections (closed loop) or connection cap (open loop).
    pub connections: u64,
    /// This agent's requests, when the run is bounded by count.
    pub requests: Option<u64>,
    /// This agent's rate, in an open-loop run.
    pub rate: Option<f64>,
    /// The run's duration argument as given (`-d`), if any.
    pub duration: Option<String>,
    /// Why this agent has nothing to do (a share of zero), if so.
    pub empty: Option<String>,
}

/// Flags the agent sets itself, refused in the run arguments.
const OWN_FLAGS: &[&str] = &[
    "-o",
    "--output",
    "--live-json",
    "-q",
    "--quiet",
    "--html",
    "--segment",
    "--segment-sequence",
    "--start-at",
];

/// Closed-loop default connections and open-loop default cap of `redline run`.
const DEFAULT_CONNECTIONS: u64 = 50;
const DEFAULT_CAP: u64 = 1000;

fn flag_value(args: &[String], i: usize, short: &str, long: &str) -> Option<(String, usize)> {
    let a = &args[i];
    if a == short || a == long {
        return args.get(i + 1).map(|v| (v.clone(), 2));
    }
    if let Some(v) = a.strip_prefix(&format!("{long}=")) {
        return Some((v.to_string(), 1));
    }
    if !short.is_empty() && a.len() > short.len() && a.starts_with(short) && !a.starts_with("--") {
        return Some((a[short.len()..].to_string(), 1));
    }
    None
}

/// This agent's share of `redline run` arguments: the arguments as given
/// plus `--segment A:B --segment-sequence SEQ`, so the child run scales `-c`,
/// `-n`, `-r`, the stage levels and the cap itself and paces its ticks of the
/// whole run's schedule. The share's numbers are computed here too (the same
/// [`Segment::scale_int`] / [`Segment::scale_rate`]) for the agent's line and
/// to see an empty share before starting. Flags the agent sets itself (`-o`,
/// `-q`, `--live-json`, `--html`, `--segment…`, `--start-at`) are refused.
pub fn scale_run_args(args: &[String], seg: &Segment) -> Result<ScaledArgs, String> {
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut conns: Option<u64> = None;
    let mut requests: Option<u64> = None;
    let mut rate: Option<f64> = None;
    let mut duration = None;
    let mut i = 0;
    let mut positional_only = false;
    while i < args.len() {
        let a = &args[i];
        if positional_only || !a.starts_with('-') || a == "-" {
            if a == "--" {
                positional_only = true;
            }
            out.push(a.clone());
            i += 1;
            continue;
        }
        if OWN_FLAGS
            .iter()
            .any(|f| a == f || a.starts_with(&format!("{f}=")))
            || (a.starts_with("-o") && !a.starts_with("--"))
        {
            return Err(format!(
                "{a}: the agent sets the output itself; leave it out of the run arguments"
            ));
        }
        let num = |v: &str, what: &str| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("{what} {v:?}: give a whole number"))
        };
        if let Some((v, used)) = flag_value(args, i, "-c", "--connections") {
            conns = Some(num(&v, "-c")?);
            out.extend_from_slice(&args[i..i + used]);
            i += used;
            continue;
        }
        if let Some((v, used)) = flag_value(args, i, "-n", "--requests") {
            requests = Some(num(&v, "-n")?);
            out.extend_from_slice(&args[i..i + used]);
            i += used;
            continue;
        }
        if let Some((v, used)) = flag_value(args, i, "-r", "--rate") {
            let r: f64 = v
                .parse()
                .map_err(|_| format!("-r {v:?}: give requests per second"))?;
            if !(r > 0.0 && r.is_finite()) {
                return Err(format!("-r {v:?}: the rate must be above zero"));
            }
            rate = Some(r);
            out.extend_from_slice(&args[i..i + used]);
            i += used;
            continue;
        }
        if let Some((v, _)) = flag_value(args, i, "-d", "--duration") {
            duration = Some(v);
        }
        out.push(a.clone());
        i += 1;
    }
    let total_conns = conns.unwrap_or(if rate.is_some() {
        DEFAULT_CAP
    } else {
        DEFAULT_CONNECTIONS
    });
    let my_conns = seg.scale_int(total_conns);
    let my_requests = requests.map(|n| seg.scale_int(n));
    let my_rate = rate.map(|r| seg.scale_rate(r));
    let mut empty = None;
    if my_conns == 0 {
        empty = Some(format!("its share of {total_conns} connections is 0"));
    } else if my_requests == Some(0) {
        empty = Some(format!(
            "its share of {} requests is 0",
            requests.unwrap_or(0)
        ));
    } else if my_rate == Some(0.0) {
        empty = Some("its share of the rate is 0".into());
    }
    let mut head = vec![
        "--segment".to_string(),
        seg.to_string(),
        "--segment-sequence".to_string(),
        seg.sequence().to_string(),
    ];
    head.extend(out);
    Ok(ScaledArgs {
        args: head,
        connections: my_conns,
        requests: my_requests,
        rate: my_rate,
        duration,
        empty,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn scales_counts_and_rates() {
        let seg = Segment::parse("1/3", None).unwrap();
        let s = scale_run_args(&v(&["http://x/", "-n", "3000", "-c6", "-t", "1"]), &seg).unwrap();
        assert_eq!(
            s.args,
            v(&[
                "--segment",
                "1/3:2/3",
                "--segment-sequence",
                "0,1/3,2/3,1",
                "http://x/",
                "-n",
                "3000",
                "-c6",
                "-t",
                "1"
            ])
        );
        assert_eq!((s.connections, s.requests), (2, Some(1000)));
        let s = scale_run_args(&v(&["--rate=300", "-d", "10s", "http://x/"]), &seg).unwrap();
        assert_eq!(s.rate, Some(100.0));
        assert_eq!(s.connections, 333);
        assert_eq!(s.duration.as_deref(), Some("10s"));
        let s = scale_run_args(&v(&["http://x/"]), &Segment::parse("2/3", None).unwrap()).unwrap();
        assert_eq!(s.connections, 16);
        let s = scale_run_args(
            &v(&["-c", "2", "http://x/"]),
            &Segment::parse("2/3", None).unwrap(),
        )
        .unwrap();
        assert!(s.empty.unwrap().contains("share of 2 connections is 0"));
        for bad in [
            &["-o", "json", "u"][..],
            &["-q", "u"],
            &["-ojson", "u"],
            &["-c", "x", "u"],
            &["-r", "0", "u"],
            &["--live-json=f", "u"],
            &["--segment", "0/2", "u"],
            &["--start-at=+1s", "u"],
        ] {
            assert!(scale_run_args(&v(bad), &seg).is_err(), "{bad:?}");
        }
        // The three shares add up to the whole.
        let total: u64 = (0..3)
            .map(|i| {
                let seg = Segment::parse(&format!("{i}/3"), None).unwrap();
                scale_run_args(&v(&["-n", "1000", "-c", "7", "u"]), &seg)
                    .unwrap()
                    .requests
                    .unwrap()
            })
            .sum();
        assert_eq!(total, 1000);
    }
}
