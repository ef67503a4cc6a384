//! What `redline replay` read from its access log, kept in the run record so
//! the text and JSON reports can show it: lines read, kept, skipped (other
//! methods) and unparsable (with the first few), the log's time span, how its
//! times were replayed, and the log's own status counts (to set against the
//! replayed `status_codes`; per URL the requests' `original_status`), and
//! the schedule it ran ([`ReplaySchedule`], in the record's config).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most unparsable lines a replay keeps as examples.
pub const MAX_BAD_EXAMPLES: usize = 5;

/// One line of the log that did not parse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BadLine {
    /// Its line number (1-based).
    pub line: u64,
    /// Why it did not parse.
    pub why: String,
    /// Its start (at most 200 characters; control characters as read: the
    /// text report escapes them, JSON escapes them itself).
    pub text: String,
}

/// The access log a replay read and how it was replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplaySummary {
    /// The log file, as given.
    pub log: String,
    /// The log format (`common`, `combined`, or the `--log-format` as given).
    pub format: String,
    /// The file was gzip-compressed.
    #[serde(default)]
    pub gzip: bool,
    /// Lines read (empty lines included).
    pub lines: u64,
    /// Requests kept for the replay (the schedule's requests).
    pub kept: u64,
    /// Lines with a method not replayed (`--methods`).
    pub other_methods: u64,
    /// Lines that did not parse.
    pub bad_lines: u64,
    /// The first few of them.
    #[serde(default)]
    pub bad_examples: Vec<BadLine>,
    /// Kept lines beyond `-n/--requests` (left out of the replay).
    #[serde(default)]
    pub cut: u64,
    /// Seconds from the first kept line's timestamp to the last's, plus one
    /// (the log's resolution is one second).
    pub span_s: f64,
    /// `--speed`: the log's times divided by this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    /// `--rate`: the requests at this even rate instead of the log's times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// The kept lines by their logged status.
    pub original_statuses: BTreeMap<String, u64>,
    /// Distinct URLs beyond the per-URL breakdown's bound (their requests are
    /// grouped under `(other URLs)` per original status).
    #[serde(default)]
    pub other_urls: u64,
}

impl ReplaySummary {
    /// Adds another machine's summary of the same replay: counts add.
    pub fn merge(&mut self, o: &ReplaySummary) {
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.lines, o.lines);
        add(&mut self.kept, o.kept);
        add(&mut self.other_methods, o.other_methods);
        add(&mut self.bad_lines, o.bad_lines);
        add(&mut self.cut, o.cut);
        add(&mut self.other_urls, o.other_urls);
        for b in &o.bad_examples {
            if self.bad_examples.len() < MAX_BAD_EXAMPLES {
                self.bad_examples.push(b.clone());
            }
        }
        for (k, v) in &o.original_statuses {
            add(self.original_statuses.entry(k.clone()).or_insert(0), *v);
        }
        self.span_s = self.span_s.max(o.span_s);
    }
}

/// The most counts a [`ReplaySchedule`] keeps: one a second for a day of
/// log; a longer log is summarised in buckets of several seconds.
pub const MAX_SCHEDULE_COUNTS: usize = 86_400;

/// The load a replay ran at its logged times (`config.schedule`): how many
/// requests each second of the log sent, so the record states the schedule
/// that ran, not only its mean rate. Bounded: at most
/// [`MAX_SCHEDULE_COUNTS`] counts, each of `bucket_s` seconds of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplaySchedule {
    /// Seconds of the log per count: 1, or more for a log longer than
    /// [`MAX_SCHEDULE_COUNTS`] seconds (the smallest that fits).
    pub bucket_s: u64,
    /// The log's times were divided by this (`--speed`): count `i` was
    /// scheduled from `i × bucket_s / speed` to `(i + 1) × bucket_s / speed`
    /// seconds after the start.
    pub speed: f64,
    /// Requests scheduled in each bucket, from the first request's second.
    pub counts: Vec<u64>,
}

impl ReplaySchedule {
    /// The schedule of requests logged at `seconds` (from the first
    /// request's second, in any order), replayed at `speed`.
    pub fn from_seconds<I>(seconds: I, speed: f64) -> ReplaySchedule
    where
        I: IntoIterator<Item = u64>,
        I::IntoIter: Clone,
    {
        let it = seconds.into_iter();
        let span = it.clone().max().map_or(0, |s| s.saturating_add(1));
        let bucket_s = span.div_ceil(MAX_SCHEDULE_COUNTS as u64).max(1);
        let mut counts = vec![0u64; span.div_ceil(bucket_s) as usize];
        for s in it {
            if let Some(c) = counts.get_mut((s / bucket_s) as usize) {
                *c += 1;
            }
        }
        ReplaySchedule {
            bucket_s,
            speed,
            counts,
        }
    }

    /// The requests in all.
    pub fn requests(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds another machine's share of the same schedule (same buckets and
    /// speed): counts add. `false` (and nothing changed) when they differ.
    pub fn merge(&mut self, o: &ReplaySchedule) -> bool {
        if self.bucket_s != o.bucket_s || self.speed != o.speed {
            return false;
        }
        if self.counts.len() < o.counts.len() {
            self.counts.resize(o.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a = a.saturating_add(*b);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_counts_each_second_and_stays_bounded() {
        let s = ReplaySchedule::from_seconds([0u64, 0, 1, 1, 1, 3], 2.0);
        assert_eq!((s.bucket_s, s.counts.clone()), (1, vec![2, 3, 0, 1]));
        assert_eq!(s.requests(), 6);
        let empty = ReplaySchedule::from_seconds(Vec::<u64>::new(), 1.0);
        assert_eq!((empty.bucket_s, empty.counts.len()), (1, 0));
        // A day fits one count a second; a day and a second takes 2 s buckets.
        let day = MAX_SCHEDULE_COUNTS as u64;
        let s = ReplaySchedule::from_seconds([0, day - 1], 1.0);
        assert_eq!((s.bucket_s, s.counts.len()), (1, MAX_SCHEDULE_COUNTS));
        let s = ReplaySchedule::from_seconds([0, 1, day], 1.0);
        assert_eq!(s.bucket_s, 2);
        assert_eq!(s.counts.len(), MAX_SCHEDULE_COUNTS / 2 + 1);
        assert_eq!((s.counts[0], s.counts[MAX_SCHEDULE_COUNTS / 2]), (2, 1));
        // A year of log: still at most the bound, every request counted.
        let s = ReplaySchedule::from_seconds((0..1000).map(|i| i * 31_536), 1.0);
        assert!(s.counts.len() <= MAX_SCHEDULE_COUNTS);
        assert_eq!(s.requests(), 1000);
        // Merging shares of one schedule adds; another shape is refused.
        let mut a = ReplaySchedule::from_seconds([0u64, 2], 1.0);
        assert!(a.merge(&ReplaySchedule::from_seconds([0u64, 3], 1.0)));
        assert_eq!(a.counts, vec![2, 0, 1, 1]);
        assert!(!a.merge(&ReplaySchedule::from_seconds([0u64], 2.0)));
        assert_eq!(a.requests(), 4);
    }
}
