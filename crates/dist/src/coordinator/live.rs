//! The live view of a distributed run: the seconds merged across agents
//! once every agent has sent them (or a settle time has passed).

use super::*;

/// The whole run so far, as the `--abort-on-fail` judge sees it.
pub struct Live<'a> {
    /// Seconds since the common start.
    pub elapsed_s: f64,
    /// Failed requests so far, all agents (their latest counters).
    pub failed: u64,
    /// The seconds merged over the agents so far, in order from 0.
    pub series: &'a [redline_stats::SeriesPoint],
    /// The whole run's request count, when every agent's share is bounded by count.
    pub planned_requests: Option<u64>,
    /// The run's duration, when bounded by time (the longest agent's).
    pub planned_duration_s: Option<f64>,
}

/// One second of the whole run, merged exactly over the agents' pushed
/// histograms while the run goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSecond {
    /// Seconds since the common start (the second [t, t+1)).
    pub t: u32,
    /// Responses completed in it, all agents.
    pub requests: u64,
    /// Errors in it, all agents.
    pub errors: u64,
    /// The merged histogram's p99, µs (0 when nothing completed).
    pub p99_us: u64,
    /// The merged histogram's median, µs (0 when nothing completed).
    pub p50_us: u64,
    /// The merged histogram's p90, µs (0 when nothing completed).
    pub p90_us: u64,
    /// Responses by status class in it, all agents: 1xx, 2xx, 3xx, 4xx, 5xx.
    pub status_classes: [u64; 5],
    /// How many agents pushed this second.
    pub agents: u64,
    /// The run's planned length (the longest agent's), when bounded by time:
    /// for a live display's progress.
    pub planned_duration_s: Option<f64>,
    /// The whole run's request count, when every share is bounded by count.
    pub planned_requests: Option<u64>,
}

/// How long after its end a second is shown (agents push it within about
/// 0.3 s + 0.25 s; the rest is for the network).
pub(super) const SECOND_SHOW_AFTER: Duration = Duration::from_millis(1500);

#[derive(Default)]
pub(super) struct SecondAcc {
    pub(super) requests: u64,
    pub(super) errors: u64,
    pub(super) status_classes: [u64; 5],
    pub(super) hist: Option<redline_stats::Hist>,
    pub(super) agents: u64,
    pub(super) p99_us: u64,
    pub(super) p50_us: u64,
    pub(super) p90_us: u64,
    pub(super) shown: bool,
}

impl SecondAcc {
    pub(super) fn add(&mut self, requests: u64, errors: u64, classes: &[u64; 5], hist: &str) {
        self.requests = self.requests.saturating_add(requests);
        self.errors = self.errors.saturating_add(errors);
        self.agents += 1;
        if self.shown {
            return; // too late for the live view; the final record has it
        }
        for (a, b) in self.status_classes.iter_mut().zip(classes) {
            *a = a.saturating_add(*b);
        }
        if hist.len() > MAX_HIST_B64 {
            return; // not decoded: the final record is checked on its own
        }
        if let Ok(h) = redline_stats::Hist::from_base64(hist) {
            match self.hist.as_mut() {
                Some(m) => m.merge(&h),
                None => self.hist = Some(h),
            }
        }
    }

    /// Marks the second shown; the first time, also returns it as a series
    /// point of the whole run (for the judge).
    pub(super) fn settle(&mut self, t: u32) -> Option<redline_stats::SeriesPoint> {
        if self.shown {
            return None;
        }
        self.shown = true;
        let h = self.hist.take().unwrap_or_else(|| {
            redline_stats::Hist::with_sigfig(redline_stats::hist::SERIES_SIGFIG)
        });
        self.p99_us = h.percentile(99.0);
        self.p50_us = h.percentile(50.0);
        self.p90_us = h.percentile(90.0);
        let mut p = redline_stats::SeriesPoint::new(t, self.requests, self.errors, 0, &h);
        p.status_classes = self.status_classes;
        Some(p)
    }

    pub(super) fn show(&mut self, t: u32) -> LiveSecond {
        let _ = self.settle(t);
        LiveSecond {
            t,
            requests: self.requests,
            errors: self.errors,
            p99_us: self.p99_us,
            p50_us: self.p50_us,
            p90_us: self.p90_us,
            status_classes: self.status_classes,
            agents: self.agents,
            planned_duration_s: None,
            planned_requests: None,
        }
    }
}
