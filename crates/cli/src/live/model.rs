//! What the live view shows, as plain data: fed from the engine's live
//! snapshots and finished seconds (or the coordinator's merged seconds) on
//! the engine's side, read by the drawing thread. Bounded: at most
//! [`MAX_SECONDS`] seconds and [`MAX_LOG`] lines are kept, whatever the run's
//! length.
//!
//! One frame is one consistent picture (issue 35): the totals, status
//! classes, rates, bytes/s and percentiles all come from the finished
//! seconds (so `done` is the sum of the classes, and the rate is the last
//! second's); only the progress bar, open connections, the sent rate and
//! the error kinds are the live snapshot's, each labelled as such.

use redline_stats::stages::StagePlan;
use redline_stats::SeriesPoint;
use std::collections::VecDeque;

/// The most seconds kept for the charts (the oldest are dropped).
pub const MAX_SECONDS: usize = 3600;
/// The most event or step lines kept.
pub const MAX_LOG: usize = 200;

/// One finished second, as the charts need it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Second {
    /// Seconds since the start of the run or step.
    pub t: u32,
    /// Responses completed in it.
    pub requests: u64,
    /// Errors in it.
    pub errors: u64,
    /// Latency percentiles, µs (0: not known).
    pub p50_us: u64,
    /// p90, µs.
    pub p90_us: u64,
    /// p99, µs.
    pub p99_us: u64,
    /// Responses by status class: 1xx..5xx.
    pub status: [u64; 5],
    /// Bytes read in it (None: not known, a coordinator's merged second).
    pub bytes: Option<u64>,
}

impl From<&SeriesPoint> for Second {
    fn from(p: &SeriesPoint) -> Second {
        Second {
            t: p.t,
            requests: p.requests,
            errors: p.errors,
            p50_us: p.p50_us,
            p90_us: p.p90_us,
            p99_us: p.p99_us,
            status: p.status_classes,
            bytes: Some(p.bytes),
        }
    }
}

/// Everything on the screen.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// The command and its target, e.g. `redline run http://…/`.
    pub title: String,
    /// What runs now: `run`, `step 3: 800 req/s`, `waiting for agents`.
    pub stage: String,
    /// `--stages`: the stage plan (the current stage is shown from it).
    pub stages: Option<StagePlan>,
    /// Seconds since the start of the run or step.
    pub elapsed_s: f64,
    /// The planned length, when bounded by time.
    pub planned_duration_s: Option<f64>,
    /// The planned request count, when bounded by count.
    pub planned_requests: Option<u64>,
    /// Responses completed so far (live: for the progress bar).
    pub completed: u64,
    /// Requests failed so far (live: for the progress bar).
    pub failed: u64,
    /// Open loop: the rate asked for, requests/s (`--rate`; with
    /// `--rate-stages` the stage plan's level now is shown instead).
    pub target_rate: Option<f64>,
    /// Requests sent per second over the last second or so of snapshots
    /// (None: not known yet, or not given by the caller).
    pub sent_rate: Option<f64>,
    /// Failed requests by kind now (live), most first; kinds with none left out.
    pub error_kinds: Vec<(&'static str, u64)>,
    /// Connections open now (None: not known, e.g. a coordinator).
    pub open: Option<u64>,
    /// Agents reporting (coordinator).
    pub agents: Option<usize>,
    /// Completions per second between the last two snapshots.
    pub rate_now: f64,
    /// The finished seconds, oldest first.
    pub seconds: VecDeque<Second>,
    /// Responses by status class over the finished seconds kept and dropped.
    pub status: [u64; 5],
    /// Errors over the finished seconds kept and dropped.
    pub seconds_errors: u64,
    /// Step lines and events, oldest first.
    pub log: VecDeque<String>,
    /// Ctrl-C or `q` was pressed: the run is stopping.
    pub stopping: bool,
    /// `q` and Ctrl-C quit at once (no graceful stop: `coordinate`).
    pub quit_at_once: bool,
    /// Put before each log line printed when the view quits at once.
    pub log_prefix: String,
    /// Counts changes: the drawing thread draws only when it moved.
    pub changes: u64,
    /// The last snapshot (elapsed s, completed), for the rate.
    last: Option<(f64, u64)>,
    /// How many of the engine's series points were taken.
    taken: usize,
    /// Recent (elapsed s, sent) snapshots, for [`Model::sent_rate`].
    sends: VecDeque<(f64, u64)>,
}

impl Model {
    /// A new model with a title.
    pub fn new(title: impl Into<String>) -> Model {
        Model {
            title: title.into(),
            stage: "starting".into(),
            ..Default::default()
        }
    }

    /// A new run or step begins: counters and charts start over (the log stays).
    pub fn begin(
        &mut self,
        stage: impl Into<String>,
        planned_duration_s: Option<f64>,
        planned_requests: Option<u64>,
        stages: Option<StagePlan>,
    ) {
        let log = std::mem::take(&mut self.log);
        let (title, stopping) = (std::mem::take(&mut self.title), self.stopping);
        *self = Model {
            title,
            target_rate: self.target_rate,
            quit_at_once: self.quit_at_once,
            log_prefix: std::mem::take(&mut self.log_prefix),
            changes: self.changes + 1,
            stage: stage.into(),
            stages,
            planned_duration_s,
            planned_requests,
            log,
            stopping,
            ..Default::default()
        };
    }

    /// A live snapshot: totals now and the seconds finished so far (all of
    /// them, from the start; only the new ones are copied).
    pub fn snapshot(
        &mut self,
        elapsed_s: f64,
        completed: u64,
        failed: u64,
        open: Option<u64>,
        series: &[SeriesPoint],
    ) {
        if let Some((t, c)) = self.last {
            if elapsed_s > t && completed >= c {
                self.rate_now = (completed - c) as f64 / (elapsed_s - t);
            }
        }
        self.last = Some((elapsed_s, completed));
        self.changes += 1;
        self.elapsed_s = elapsed_s;
        self.completed = completed;
        self.failed = failed;
        self.open = open;
        if series.len() < self.taken {
            self.taken = 0;
        }
        for p in &series[self.taken..] {
            self.push_second(Second::from(p));
        }
        self.taken = series.len();
    }

    /// The engine's live snapshot and its finished seconds: as
    /// [`Model::snapshot`], plus the sent rate and the error kinds.
    pub fn engine(&mut self, s: &redline_engine::Snapshot, series: &[SeriesPoint]) {
        let e = s.elapsed.as_secs_f64();
        self.snapshot(e, s.completed, s.failed, Some(s.open), series);
        // The sent rate over the snapshots of the last second or so.
        self.sends.push_back((e, s.sent));
        while self.sends.len() > 2 && e - self.sends[1].0 >= 1.0 {
            self.sends.pop_front();
        }
        if let (Some(&(t0, n0)), Some(&(t1, n1))) = (self.sends.front(), self.sends.back()) {
            if t1 - t0 >= 0.5 && n1 >= n0 {
                self.sent_rate = Some((n1 - n0) as f64 / (t1 - t0));
            }
        }
        let mut kinds: Vec<(&'static str, u64)> = redline_engine::control::ERROR_KINDS
            .iter()
            .zip(s.errors)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (*k, n))
            .collect();
        kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
        self.error_kinds = kinds;
    }

    /// The rate asked for now, requests/s: the `--rate-stages` level at
    /// this second, or `--rate`.
    pub fn target_now(&self) -> Option<f64> {
        match &self.stages {
            Some(p) if p.unit == "rps" => Some(p.effective_at(self.elapsed_s)),
            _ => self.target_rate,
        }
    }

    /// Responses in the finished seconds (kept and dropped): the sum of
    /// [`Model::status`].
    pub fn done(&self) -> u64 {
        self.status.iter().fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// One finished second (from a snapshot's series or a coordinator).
    pub fn push_second(&mut self, s: Second) {
        self.changes += 1;
        for (a, b) in self.status.iter_mut().zip(s.status) {
            *a = a.saturating_add(b);
        }
        self.seconds_errors = self.seconds_errors.saturating_add(s.errors);
        if self.seconds.len() == MAX_SECONDS {
            self.seconds.pop_front();
        }
        self.seconds.push_back(s);
    }

    /// A line for the log panel (steps, events).
    pub fn log(&mut self, line: impl Into<String>) {
        self.changes += 1;
        if self.log.len() == MAX_LOG {
            self.log.pop_front();
        }
        self.log.push_back(line.into());
    }

    /// The share done, 0..=1, when the run is bounded (time or count).
    pub fn progress(&self) -> Option<f64> {
        let by_time = self
            .planned_duration_s
            .filter(|d| *d > 0.0)
            .map(|d| self.elapsed_s / d);
        let by_count = self
            .planned_requests
            .filter(|n| *n > 0)
            .map(|n| (self.completed + self.failed) as f64 / n as f64);
        // Whichever bound comes first ends the run.
        match (by_time, by_count) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
        .map(|p| p.clamp(0.0, 1.0))
    }

    /// Seconds left: by the clock, or by the rate now for a count.
    pub fn time_left_s(&self) -> Option<f64> {
        let by_time = self
            .planned_duration_s
            .map(|d| (d - self.elapsed_s).max(0.0));
        let by_count = self.planned_requests.and_then(|n| {
            let left = n.saturating_sub(self.completed + self.failed);
            (self.rate_now > 0.0).then(|| left as f64 / self.rate_now)
        });
        match (by_time, by_count) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The `--stages` stage now, e.g. `stage 2 of 3: 10→50 connections`.
    pub fn stage_now(&self) -> Option<String> {
        let plan = self.stages.as_ref()?;
        let (mut start, mut prev) = (0.0, 0.0);
        for (i, s) in plan.stages.iter().enumerate() {
            if self.elapsed_s < start + s.duration_s || i + 1 == plan.stages.len() {
                let from = if plan.step { s.level } else { prev };
                let fmt = redline_stats::stages::fmt_level;
                let level = if from == s.level {
                    fmt(s.level)
                } else {
                    format!("{}→{}", fmt(from), fmt(s.level))
                };
                return Some(format!(
                    "stage {} of {}: {level} {}",
                    i + 1,
                    plan.stages.len(),
                    plan.unit_name()
                ));
            }
            start += s.duration_s;
            prev = s.level;
        }
        None
    }

    /// The last finished second, if any.
    pub fn last_second(&self) -> Option<&Second> {
        self.seconds.back()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t: u32, requests: u64, status: [u64; 5]) -> SeriesPoint {
        let mut h = redline_stats::Hist::with_sigfig(redline_stats::hist::SERIES_SIGFIG);
        h.record_us(1000);
        let mut p = SeriesPoint::new(t, requests, 0, 0, &h);
        p.status_classes = status;
        p
    }

    #[test]
    fn takes_only_new_seconds_and_counts_status() {
        let mut m = Model::new("t");
        let s = vec![point(0, 10, [0, 8, 0, 2, 0]), point(1, 5, [0, 5, 0, 0, 0])];
        m.snapshot(1.0, 10, 0, Some(3), &s[..1]);
        m.snapshot(2.0, 15, 0, Some(3), &s);
        m.snapshot(2.25, 15, 0, Some(3), &s);
        assert_eq!(m.seconds.len(), 2);
        assert_eq!(m.status, [0, 13, 0, 2, 0]);
        assert_eq!(m.rate_now, 0.0);
        m.snapshot(2.5, 20, 0, Some(3), &s);
        assert_eq!(m.rate_now, 20.0);
    }

    #[test]
    fn begin_starts_over_but_keeps_the_log() {
        let mut m = Model::new("t");
        m.log("step 1");
        m.snapshot(1.0, 10, 1, None, &[point(0, 10, [0, 10, 0, 0, 0])]);
        m.begin("step 2", Some(5.0), None, None);
        assert!(m.seconds.is_empty());
        assert_eq!(m.completed, 0);
        assert_eq!(m.log.len(), 1);
        assert_eq!(m.title, "t");
        // A shorter series than taken: a new run; its first second is taken.
        m.snapshot(1.0, 3, 0, None, &[point(0, 3, [0, 3, 0, 0, 0])]);
        assert_eq!(m.seconds.len(), 1);
    }

    #[test]
    fn bounded() {
        let mut m = Model::new("t");
        for i in 0..(MAX_SECONDS + 10) {
            m.push_second(Second {
                t: i as u32,
                ..Default::default()
            });
            m.log(format!("{i}"));
        }
        assert_eq!(m.seconds.len(), MAX_SECONDS);
        assert_eq!(m.log.len(), MAX_LOG);
        assert_eq!(m.seconds[0].t, 10);
    }

    #[test]
    fn progress_and_time_left() {
        let mut m = Model::new("t");
        m.begin("run", Some(10.0), None, None);
        m.snapshot(2.5, 100, 0, None, &[]);
        assert_eq!(m.progress(), Some(0.25));
        assert_eq!(m.time_left_s(), Some(7.5));
        m.begin("run", None, Some(1000), None);
        m.snapshot(1.0, 100, 0, None, &[]);
        m.snapshot(2.0, 200, 0, None, &[]);
        assert_eq!(m.progress(), Some(0.2));
        assert_eq!(m.time_left_s(), Some(8.0));
        m.begin("run", None, None, None);
        assert_eq!(m.progress(), None);
        assert_eq!(m.time_left_s(), None);
    }

    #[test]
    fn names_the_stage_now() {
        use redline_stats::stages::StageSpec;
        let mut m = Model::new("t");
        let plan = StagePlan {
            unit: "connections".into(),
            step: false,
            stages: vec![
                StageSpec {
                    duration_s: 2.0,
                    level: 10.0,
                },
                StageSpec {
                    duration_s: 3.0,
                    level: 10.0,
                },
            ],
        };
        m.begin("run", Some(5.0), None, Some(plan));
        m.snapshot(1.0, 0, 0, None, &[]);
        assert_eq!(m.stage_now().unwrap(), "stage 1 of 2: 0→10 connections");
        m.snapshot(4.0, 0, 0, None, &[]);
        assert_eq!(m.stage_now().unwrap(), "stage 2 of 2: 10 connections");
    }
}
