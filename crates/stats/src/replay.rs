//! What `redline replay` read from its access log, kept in the run record so
//! the text and JSON reports can show it: lines read, kept, skipped (other
//! methods) and unparsable (with the first few), the log's time span, how its
//! times were replayed, and the log's own status counts (to set against the
//! replayed `status_codes`; per URL the requests' `original_status`).

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
