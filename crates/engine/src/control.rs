//! The control tick every protocol driver runs between its I/O: the stop
//! (Ctrl-C flag, deadline, a fatal error), the drain that follows it (up to
//! `--grace`), the stage level of closed-loop `--stages` runs, and the
//! publishing of live counts and finished seconds (what the progress line
//! shows, `--abort-on-fail` judges and agents stream) a few times a second.
//!
//! Sans IO like the `crate::ledger::Ledger`: `now` is passed in, and the
//! core's [`crate::core::Core::tick`] runs it between each driver's I/O
//! (every driver waits in its `mio` poll until [`Control::next_wake`]).

use crate::ledger::Ledger;
use crate::pacer::Levels;
use redline_stats::{Recorder, SeriesPoint};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often live counts are published.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// The error kinds, by name, in the order of [`Live::errors`] (the
/// metrics exporters' label values).
pub const ERROR_KINDS: [&str; 19] = [
    "refused",
    "connect_timeout",
    "reset",
    "timeout",
    "closed",
    "malformed",
    "too_many_open_files",
    "no_local_address",
    "resolve",
    "tls",
    "stream_reset",
    "goaway",
    "no_stream",
    "too_many_redirects",
    "bad_redirect",
    "idle_timeout",
    "stateless_reset",
    "version_negotiation",
    "other",
];

/// The index of `kind` in [`ERROR_KINDS`].
pub fn error_index(kind: redline_stats::ErrorKind) -> usize {
    ERROR_KINDS
        .iter()
        .position(|n| *n == kind.name())
        .unwrap_or(ERROR_KINDS.len() - 1)
}

/// Counts a worker publishes for the live progress line (a few times a second, not per request).
#[derive(Debug, Default)]
pub struct Live {
    /// Completed responses so far.
    pub completed: AtomicU64,
    /// Failed requests so far.
    pub failed: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Requests written and not yet answered or failed, now.
    pub in_flight: AtomicU64,
    /// Requests written so far.
    pub sent: AtomicU64,
    /// Bytes read so far.
    pub bytes_read: AtomicU64,
    /// Bytes written so far.
    pub bytes_written: AtomicU64,
    /// Connections opened so far.
    pub connections_opened: AtomicU64,
    /// Failed requests so far by kind, indexed as [`ERROR_KINDS`].
    pub errors: [AtomicU64; ERROR_KINDS.len()],
    /// Finished seconds of the series not yet collected (pushed once a second).
    pub seconds: Mutex<Vec<SeriesPoint>>,
    /// Scenario runs: (completed, errors) of each named request so far, in
    /// the scenario's order.
    pub requests: Mutex<Vec<(u64, u64)>>,
    /// `--abort-on-fail` with open-loop sessions: the ages asked for (set
    /// when the run starts; empty: nothing to count) and, for each, the
    /// journeys' steps unanswered that long after their intended time, as
    /// the worker counted them at its last publish (`crate::overdue`).
    pub journey_ages: Vec<Duration>,
    /// See [`Live::journey_ages`].
    pub journey_overdue: Mutex<Vec<u64>>,
}

/// One worker's control state (see the module docs).
pub struct Control {
    start: Instant,
    deadline: Option<Instant>,
    grace: Duration,
    stop_flag: Arc<AtomicBool>,
    live: Arc<Live>,
    stop_at: Option<Instant>,
    drain_until: Option<Instant>,
    interrupted: bool,
    levels: Option<Levels>,
    level_check: Option<Instant>,
    last_publish: Instant,
    published_secs: usize,
}

impl Control {
    /// The control of a worker that started at `start`: sending stops at
    /// `deadline` or when `stop_flag` is set, then requests in flight get
    /// `grace`; `levels` is the closed-loop stage profile's share of this worker.
    pub fn new(
        start: Instant,
        deadline: Option<Instant>,
        grace: Duration,
        stop_flag: Arc<AtomicBool>,
        live: Arc<Live>,
        levels: Option<Levels>,
    ) -> Control {
        Control {
            start,
            deadline,
            grace,
            stop_flag,
            live,
            stop_at: None,
            drain_until: None,
            interrupted: false,
            levels,
            level_check: None,
            last_publish: start,
            published_secs: 0,
        }
    }

    /// When the run started.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// When sending stops (None: when the work is done).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether sending has stopped.
    #[inline]
    pub fn stopping(&self) -> bool {
        self.stop_at.is_some()
    }

    /// Whether the run was stopped from outside (Ctrl-C, another worker's fatal error).
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// True once, at the tick where sending must stop: the stop flag was set
    /// or the deadline passed. The driver then calls its own stop, which calls
    /// [`Control::begin_stop`] and `Ledger::begin_stop`.
    pub fn stop_due(&mut self, now: Instant) -> bool {
        if self.stopping() {
            return false;
        }
        if self.stop_flag.load(Ordering::Relaxed) {
            self.interrupted = true;
            return true;
        }
        self.deadline.is_some_and(|d| now >= d)
    }

    /// Sending stops at `now`; requests in flight get until `now + grace`.
    pub fn begin_stop(&mut self, now: Instant) {
        if self.stopping() {
            return;
        }
        self.stop_at = Some(now);
        self.drain_until = Some(now + self.grace);
    }

    /// Ends the run from inside at `now` (e.g. the poller failed): no drain.
    pub fn abort(&mut self, now: Instant) {
        self.stop_at.get_or_insert(now);
        self.drain_until = Some(now);
    }

    /// Sets the flag every worker of the run watches (a fatal error: the
    /// others stop within their next tick).
    pub fn stop_all(&self) {
        self.stop_flag.store(true, Ordering::SeqCst);
    }

    /// Closed loop with `--stages`: the level at the start (in this worker's
    /// units: connections, HTTP/2 streams), or None without stages.
    pub fn first_level(&mut self) -> Option<u64> {
        self.level_at(self.start)
    }

    /// Closed loop with `--stages`: the new level once its next check time
    /// has come (None otherwise, and once stopping).
    pub fn level_due(&mut self, now: Instant) -> Option<u64> {
        if self.stopping() || self.level_check.is_none_or(|t| now < t) {
            return None;
        }
        self.level_at(now)
    }

    fn level_at(&mut self, now: Instant) -> Option<u64> {
        let l = self.levels.as_ref()?;
        let el = now.saturating_duration_since(self.start).as_secs_f64();
        let start = self.start;
        self.level_check = l.next_check(el).map(|s| start + Duration::from_secs_f64(s));
        Some(l.active_at(el))
    }

    /// Whether the worker is done at `now`: stopping, with nothing in flight
    /// or the drain over; or not stopping and the ledger's work all ended.
    pub fn finished(&self, now: Instant, ledger: &Ledger) -> bool {
        if self.stopping() {
            return ledger.in_flight() == 0 || self.drain_until.is_some_and(|d| now >= d);
        }
        ledger.done()
    }

    /// The next time the tick has something to do (besides publishing): the
    /// end of the drain once stopping, else the deadline or the next level check.
    pub fn next_wake(&self) -> Option<Instant> {
        if self.stopping() {
            return self.drain_until;
        }
        match (self.deadline, self.level_check) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// When the next publish is due.
    pub fn next_publish(&self) -> Instant {
        self.last_publish + PUBLISH_EVERY
    }

    /// Publishes (see [`Control::publish`]) when the last one is
    /// 100 ms old, after rolling the recorder's seconds to `now`.
    pub fn publish_due(
        &mut self,
        now: Instant,
        rec: &mut Recorder,
        open: u64,
        in_flight: u64,
    ) -> bool {
        if now.duration_since(self.last_publish) >= PUBLISH_EVERY {
            rec.tick(now);
            self.publish(rec, open, in_flight);
            self.last_publish = now;
            return true;
        }
        false
    }

    /// Scenario runs: publishes each named request's counts (with each
    /// publish, not per request).
    pub fn publish_requests(&self, stats: &[redline_stats::RequestStats]) {
        if let Ok(mut v) = self.live.requests.lock() {
            v.clear();
            v.extend(stats.iter().map(|r| (r.completed, r.errors)));
        }
    }

    /// The ages open-loop sessions count overdue steps for (see
    /// [`Live::journey_ages`]; empty: none asked).
    pub fn journey_ages(&self) -> &[Duration] {
        &self.live.journey_ages
    }

    /// Publishes the journeys' overdue steps per age (with a publish).
    pub fn publish_journey_overdue(&self, counts: &[u64]) {
        if let Ok(mut v) = self.live.journey_overdue.lock() {
            v.clear();
            v.extend_from_slice(counts);
        }
    }

    /// Progress for the live view, and the seconds finished since the last
    /// call (what `--abort-on-fail` judges and agents stream).
    pub fn publish(&mut self, rec: &Recorder, open: u64, in_flight: u64) {
        let live = &self.live;
        live.completed
            .store(rec.counters.completed, Ordering::Relaxed);
        live.failed.store(rec.counters.failed, Ordering::Relaxed);
        live.open.store(open, Ordering::Relaxed);
        live.in_flight.store(in_flight, Ordering::Relaxed);
        live.sent.store(rec.counters.sent, Ordering::Relaxed);
        live.bytes_read
            .store(rec.counters.bytes_read, Ordering::Relaxed);
        live.bytes_written
            .store(rec.counters.bytes_written, Ordering::Relaxed);
        live.connections_opened
            .store(rec.counters.connections_opened, Ordering::Relaxed);
        // A few error groups at most (the tally is bounded): the cold path.
        let mut by_kind = [0u64; ERROR_KINDS.len()];
        for (kind, n) in rec.errors.kinds() {
            by_kind[error_index(kind)] += n;
        }
        for (a, n) in live.errors.iter().zip(by_kind) {
            a.store(n, Ordering::Relaxed);
        }
        let secs = rec.finished_seconds();
        if secs.len() > self.published_secs {
            if let Ok(mut v) = live.seconds.lock() {
                v.extend_from_slice(&secs[self.published_secs..]);
            }
            self.published_secs = secs.len();
        }
    }

    /// When the worker's run ended: a run stopped by its deadline (or
    /// Ctrl-C) lasted at least until then, even when the server stopped
    /// answering long before its last response (`last_done`).
    pub fn end(&self, last_done: Instant) -> Instant {
        self.stop_at.map_or(last_done, |s| s.max(last_done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redline_stats::Recorder;

    /// The tick stops once at the deadline, drains until the grace is over
    /// or nothing is in flight, and publishes finished seconds.
    #[test]
    fn stop_drain_and_publish() {
        let t = Instant::now();
        let flag = Arc::new(AtomicBool::new(false));
        let live = Arc::new(Live::default());
        let mut c = Control::new(
            t,
            Some(t + Duration::from_secs(2)),
            Duration::from_secs(1),
            flag.clone(),
            live.clone(),
            None,
        );
        let mut ledger = Ledger::new(None, None, t, None);
        assert!(!c.stop_due(t + Duration::from_secs(1)));
        assert_eq!(c.next_wake(), Some(t + Duration::from_secs(2)));
        assert!(ledger.take());
        ledger.sent();
        let at = t + Duration::from_secs(2);
        assert!(c.stop_due(at));
        c.begin_stop(at);
        ledger.begin_stop(at);
        assert!(!c.stop_due(at), "once");
        assert!(!c.interrupted());
        assert!(!c.finished(at, &ledger), "one in flight, within the grace");
        assert!(
            c.finished(at + Duration::from_secs(1), &ledger),
            "grace over"
        );
        ledger.finish_completed();
        assert!(c.finished(at, &ledger));
        assert_eq!(c.end(t), at);
        let mut rec = Recorder::new(t);
        c.publish_due(t + Duration::from_millis(3500), &mut rec, 2, 0);
        assert_eq!(live.open.load(Ordering::Relaxed), 2);
        assert_eq!(live.seconds.lock().unwrap().len(), 3, "seconds 0, 1, 2");
        flag.store(true, Ordering::Relaxed);
        let mut d = Control::new(t, None, Duration::ZERO, flag, live, None);
        assert!(d.stop_due(t));
        assert!(d.interrupted());
    }

    /// `--stages 1s:4,1s:8 --step` on one worker: level 4 from the start, 8
    /// at the stage boundary, no change before it and none once stopping.
    #[test]
    fn stage_level_is_looked_at_on_its_checks_only() {
        use crate::pacer::{parse_stages, Levels, Profile};
        let t = Instant::now();
        let stages = parse_stages("1s:4,1s:8").unwrap();
        let levels = Levels::new(Profile::from_stages(&stages, true), 0, 1);
        let flag = Arc::new(AtomicBool::new(false));
        let live = Arc::new(Live::default());
        let mut c = Control::new(t, None, Duration::ZERO, flag, live, Some(levels));
        assert_eq!(c.first_level(), Some(4));
        assert_eq!(c.next_wake(), Some(t + Duration::from_secs(1)));
        assert_eq!(c.level_due(t + Duration::from_millis(500)), None);
        assert_eq!(c.level_due(t + Duration::from_millis(1001)), Some(8));
        c.begin_stop(t + Duration::from_millis(1500));
        assert_eq!(c.level_due(t + Duration::from_secs(3)), None);
        let mut none = Control::new(
            t,
            None,
            Duration::ZERO,
            Arc::new(AtomicBool::new(false)),
            Arc::new(Live::default()),
            None,
        );
        assert_eq!(none.first_level(), None);
    }

    /// Every error kind has its own place in the live counts, and a publish
    /// carries the recorder's errors by kind and the in-flight count.
    #[test]
    fn errors_by_kind_are_published() {
        use redline_stats::{ErrorKind as K, MalformedKind};
        let all = [
            K::Refused,
            K::ConnectTimeout,
            K::Reset,
            K::Timeout,
            K::Closed,
            K::Malformed(MalformedKind::Header),
            K::TooManyOpenFiles,
            K::NoLocalAddress,
            K::Resolve,
            K::Tls,
            K::StreamReset,
            K::GoAway,
            K::NoStream,
            K::TooManyRedirects,
            K::BadRedirect,
            K::IdleTimeout,
            K::StatelessReset,
            K::VersionNegotiation,
            K::Other,
        ];
        let idx: Vec<usize> = all.iter().map(|k| error_index(*k)).collect();
        assert_eq!(idx, (0..ERROR_KINDS.len()).collect::<Vec<_>>());
        let t = Instant::now();
        let live = Arc::new(Live::default());
        let mut c = Control::new(
            t,
            None,
            Duration::ZERO,
            Arc::new(AtomicBool::new(false)),
            live.clone(),
            None,
        );
        let mut rec = Recorder::new(t);
        rec.error(K::Timeout, "a".into(), t);
        rec.error(K::Timeout, "b".into(), t);
        rec.error(K::Malformed(MalformedKind::Chunked), "c".into(), t);
        c.publish(&rec, 1, 3);
        assert_eq!(live.errors[3].load(Ordering::Relaxed), 2, "timeout");
        assert_eq!(live.errors[5].load(Ordering::Relaxed), 1, "malformed");
        assert_eq!(live.in_flight.load(Ordering::Relaxed), 3);
    }
}
