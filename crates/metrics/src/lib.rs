//! Metrics out while a redline run goes (`--metrics-listen`,
//! `--prometheus-rw`, `--otlp`): an [`Exporter`] fed by the engine's live
//! snapshots and finished seconds (the same a few times a second the
//! progress line reads; never on the request hot path), serving
//! Prometheus/OpenMetrics text and pushing remote write and OTLP/HTTP on
//! their own threads. At the end every value is the run record's. Metric
//! names, labels and buckets: docs/metrics.md.
#![deny(missing_docs)]

pub mod encode;
pub mod http;
pub mod model;
pub mod text;

pub use encode::OtlpHistogram;
pub use model::{Metrics, Tracker};

use redline_engine::Snapshot;
use redline_stats::gate::{Gate, Ticket};
use redline_stats::{RunRecord, SeriesPoint};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What to export, as the flags say it.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--metrics-listen ADDR`.
    pub listen: Option<String>,
    /// `--prometheus-rw URL`.
    pub prometheus_rw: Option<String>,
    /// `--otlp URL`.
    pub otlp: Option<String>,
    /// `--otlp-histogram`.
    pub otlp_histogram: OtlpHistogram,
    /// `--metrics-interval`: how often the pushes go.
    pub interval: Duration,
    /// `--metrics-linger`: after the run, how long the endpoint waits for a
    /// scrape of the final values.
    pub linger: Duration,
}

impl Config {
    /// True when anything is to be exported.
    pub fn any(&self) -> bool {
        self.listen.is_some() || self.prometheus_rw.is_some() || self.otlp.is_some()
    }

    /// Checks the flags' values without starting anything (Err: one line).
    pub fn check(&self) -> Result<(), String> {
        if let Some(u) = &self.prometheus_rw {
            http::PushUrl::parse(u).map_err(|e| format!("--prometheus-rw: {e}"))?;
        }
        if let Some(u) = &self.otlp {
            http::PushUrl::parse(u).map_err(|e| format!("--otlp: {e}"))?;
        }
        if self.interval < Duration::from_millis(100) {
            return Err("--metrics-interval: at least 100ms".into());
        }
        Ok(())
    }
}

#[derive(Default)]
struct PushStats {
    attempts: AtomicU64,
    failures: AtomicU64,
    warned: AtomicBool,
    last_error: Mutex<Option<String>>,
}

struct Pusher {
    flag: &'static str,
    url: http::PushUrl,
    kind: PushKind,
    stats: Arc<PushStats>,
}

#[derive(Clone, Copy)]
enum PushKind {
    RemoteWrite,
    Otlp(OtlpHistogram),
}

impl Pusher {
    fn push(&self, m: &Metrics) {
        let r = match self.kind {
            PushKind::RemoteWrite => self.url.post(
                "application/x-protobuf",
                &[
                    ("Content-Encoding", "snappy"),
                    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
                ],
                &encode::remote_write_body(m),
            ),
            PushKind::Otlp(h) => {
                self.url
                    .post("application/x-protobuf", &[], &encode::otlp_body(m, h))
            }
        };
        self.stats.attempts.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = r {
            self.stats.failures.fetch_add(1, Ordering::Relaxed);
            if !self.stats.warned.swap(true, Ordering::Relaxed) {
                // On a terminal, clear the progress line first.
                use std::io::IsTerminal;
                let clear = if std::io::stderr().is_terminal() {
                    "\r\x1b[K"
                } else {
                    ""
                };
                eprintln!(
                    "{clear}redline: warning: {} {}: push failed: {e} (the run goes on; failed pushes are counted in the report)",
                    self.flag,
                    self.url.shown()
                );
            }
            if let Ok(mut l) = self.stats.last_error.lock() {
                *l = Some(e);
            }
        }
    }
}

struct Shared {
    tracker: Mutex<Tracker>,
    /// Set once a scrape was answered with the final values.
    final_served: AtomicBool,
    stop: AtomicBool,
}

impl Shared {
    fn metrics(&self) -> Option<Metrics> {
        self.tracker.lock().ok().map(|t| t.metrics())
    }
}

/// The running exporters of one run (see the crate docs).
pub struct Exporter {
    shared: Arc<Shared>,
    addr: Option<SocketAddr>,
    server: Option<JoinHandle<()>>,
    pushers: Vec<Arc<Pusher>>,
    push_threads: Vec<(mpsc::Sender<()>, JoinHandle<()>)>,
    linger: Duration,
    finished: bool,
    interrupted: Option<Box<dyn Fn() -> bool>>,
}

impl Exporter {
    /// Binds the scrape address and starts the push threads for a run
    /// configured as `run` (its URL, stages and status rule) and, in scenario
    /// runs, the named `requests` (Err: one line; nothing started).
    pub fn start(
        cfg: &Config,
        run: &redline_stats::RunConfig,
        requests: Vec<String>,
    ) -> Result<Exporter, String> {
        cfg.check()?;
        let listener: Option<TcpListener> = match &cfg.listen {
            Some(a) => Some(http::bind(a).map_err(|e| format!("--metrics-listen: {e}"))?),
            None => None,
        };
        let shared = Arc::new(Shared {
            tracker: Mutex::new(
                Tracker::new(&run.url, run.stages.as_ref())
                    .with_rule(run.status_rule())
                    .with_requests(requests),
            ),
            final_served: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let mut pushers = Vec::new();
        for (flag, u, kind) in [
            ("--prometheus-rw", &cfg.prometheus_rw, PushKind::RemoteWrite),
            ("--otlp", &cfg.otlp, PushKind::Otlp(cfg.otlp_histogram)),
        ] {
            if let Some(u) = u {
                pushers.push(Arc::new(Pusher {
                    flag,
                    url: http::PushUrl::parse(u).map_err(|e| format!("{flag}: {e}"))?,
                    kind,
                    stats: Arc::default(),
                }));
            }
        }
        let addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        let server = match listener {
            Some(l) => {
                let sh = shared.clone();
                Some(
                    std::thread::Builder::new()
                        .name("redline-metrics".into())
                        .spawn(move || serve(l, sh))
                        .map_err(|e| format!("--metrics-listen: cannot start a thread: {e}"))?,
                )
            }
            None => None,
        };
        let mut push_threads = Vec::new();
        for p in &pushers {
            let (tx, rx) = mpsc::channel::<()>();
            let (p, sh, every, flag) = (p.clone(), shared.clone(), cfg.interval, p.flag);
            let h = std::thread::Builder::new()
                .name("redline-push".into())
                .spawn(move || {
                    // Ends when told (or the sender is gone); pushes every `every`.
                    while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                        if let Some(m) = sh.metrics() {
                            p.push(&m);
                        }
                    }
                })
                .map_err(|e| format!("{flag}: cannot start a thread: {e}"))?;
            push_threads.push((tx, h));
        }
        Ok(Exporter {
            shared,
            addr,
            server,
            pushers,
            push_threads,
            linger: cfg.linger,
            finished: false,
            interrupted: None,
        })
    }

    /// The linger after the run ends early when `f` says so (Ctrl-C).
    pub fn end_linger_when(&mut self, f: impl Fn() -> bool + 'static) {
        self.interrupted = Some(Box::new(f));
    }

    /// The scrape endpoint's address, when listening.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// A live snapshot, the finished seconds so far and, in scenario runs,
    /// each named request's (completed, errors) (the engine's progress callback).
    pub fn update(&self, s: &Snapshot, series: &[SeriesPoint], requests: &[(u64, u64)]) {
        if let Ok(mut t) = self.shared.tracker.lock() {
            t.update(s, series);
            t.update_requests(requests);
        }
    }

    /// The run ended: the values become the record's, the push threads stop
    /// and one last push of the final values goes out. Failed pushes are
    /// added to the record's warnings (`metrics_push`).
    pub fn finish(&mut self, rec: &mut RunRecord) {
        if let Ok(mut t) = self.shared.tracker.lock() {
            t.finish(rec);
        }
        self.finished = true;
        for (tx, h) in self.push_threads.drain(..) {
            let _ = tx.send(());
            let _ = h.join();
        }
        if let Some(m) = self.shared.metrics() {
            for p in &self.pushers {
                p.push(&m);
            }
        }
        // One warning (codes are unique in a record) naming each failing URL.
        let mut failed = Vec::new();
        for p in &self.pushers {
            let n = p.stats.attempts.load(Ordering::Relaxed);
            let f = p.stats.failures.load(Ordering::Relaxed);
            if f > 0 {
                let last = p
                    .stats
                    .last_error
                    .lock()
                    .ok()
                    .and_then(|l| l.clone())
                    .unwrap_or_default();
                failed.push(format!(
                    "{} {}: {f} of {n} pushes failed (last: {last})",
                    p.flag,
                    p.url.shown()
                ));
            }
        }
        if !failed.is_empty() {
            rec.warn("metrics_push", failed.join("; "));
        }
    }
}

impl Drop for Exporter {
    /// After a finished run, waits (up to the linger time) until a scrape
    /// got the final values; then stops the endpoint.
    fn drop(&mut self) {
        for (tx, h) in self.push_threads.drain(..) {
            let _ = tx.send(());
            let _ = h.join();
        }
        if let Some(h) = self.server.take() {
            if self.finished {
                let until = Instant::now() + self.linger;
                let stop = || self.interrupted.as_ref().is_some_and(|f| f());
                while Instant::now() < until
                    && !self.shared.final_served.load(Ordering::SeqCst)
                    && !stop()
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            self.shared.stop.store(true, Ordering::SeqCst);
            // The accept loop sees `stop` within 20 ms.
            let _ = h.join();
        }
    }
}

/// Scrape clients allowed to be sending their request head at once (more:
/// the oldest is dropped, see `redline_stats::gate`).
pub const MAX_WAITING: usize = 32;

/// The scrape endpoint: a thread per connection, each bounded in size and
/// time ([`http::HEAD_TIMEOUT`]), admitted by a [`Gate`] so slow, idle or
/// flooding clients never delay another's scrape nor the run's end (the
/// accept loop looks at `stop` every 20 ms; connection threads are not
/// waited for).
fn serve(l: TcpListener, sh: Arc<Shared>) {
    let gate = Gate::new(MAX_WAITING);
    if l.set_nonblocking(true).is_err() {
        return;
    }
    while !sh.stop.load(Ordering::SeqCst) {
        let s = match l.accept() {
            Ok((s, _)) => s,
            // WouldBlock, EMFILE and the like: do not spin.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        let _ = s.set_nonblocking(false);
        let Some(ticket) = gate.admit(&s) else {
            continue;
        };
        let sh = sh.clone();
        let _ = std::thread::Builder::new()
            .name("redline-scrape".into())
            .spawn(move || answer(s, &sh, ticket));
    }
}

/// Answers one scrape connection.
fn answer(mut s: TcpStream, sh: &Shared, mut ticket: Ticket) {
    let Some(req) = http::read_request(&mut s) else {
        return;
    };
    ticket.headed();
    let path = req.path.split('?').next().unwrap_or("");
    match path {
        "/metrics" => {
            let f = text::Format::from_accept(req.accept.as_deref());
            if let Some(m) = sh.metrics() {
                let body = text::render(&m, f);
                http::respond(&mut s, "200 OK", f.content_type(), body.as_bytes());
                if m.finished {
                    sh.final_served.store(true, Ordering::SeqCst);
                }
            }
        }
        "/" => http::respond(
            &mut s,
            "200 OK",
            "text/plain; charset=utf-8",
            b"redline: metrics at /metrics\n",
        ),
        _ => http::respond(&mut s, "404 Not Found", "text/plain", b"not found\n"),
    }
}
