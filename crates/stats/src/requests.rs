//! Per-request numbers of a scenario run (flood's per-URL summary, improved):
//! each named request keeps its own counts and phase histograms, and failed
//! checks are counted per check. Everything merges exactly by name.

use crate::hist::Hist;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One check of a named request and how often it held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckCount {
    /// What was checked, e.g. `status 200` or `body contains "Welcome"`.
    pub check: String,
    /// Responses that passed it.
    pub passed: u64,
    /// Responses that failed it.
    pub failed: u64,
}

/// The numbers of one named request of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestStats {
    /// The request's name.
    pub name: String,
    /// Its method.
    pub method: String,
    /// Its URL (credentials redacted; `{{variables}}` as written).
    pub url: String,
    /// Requests sent.
    pub sent: u64,
    /// Complete responses (any status).
    pub completed: u64,
    /// Responses with a status outside 2xx/3xx.
    pub bad_status: u64,
    /// Requests that failed (time-out, reset, malformed…).
    pub errors: u64,
    /// Responses for which at least one check failed.
    pub failed_checks: u64,
    /// Extractions that found nothing (the variable stayed unset).
    pub failed_extractions: u64,
    /// Each check and its counts.
    #[serde(default)]
    pub checks: Vec<CheckCount>,
    /// Complete responses by status code (as the run's `status_codes`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub statuses: BTreeMap<String, u64>,
    /// `redline replay`: the status the access log gave this request's lines
    /// (each URL of the log is one request per original status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_status: Option<u16>,
    /// Latency from the intended send time.
    pub latency: Hist,
    /// Connect time of connections opened for this request.
    pub connect: Hist,
    /// Sent to first byte.
    pub waiting: Hist,
    /// First to last byte.
    pub transfer: Hist,
}

impl RequestStats {
    /// Empty numbers for a request.
    pub fn new(name: &str, method: &str, url: &str, checks: &[String]) -> RequestStats {
        RequestStats {
            name: name.into(),
            method: method.into(),
            url: url.into(),
            sent: 0,
            completed: 0,
            bad_status: 0,
            errors: 0,
            failed_checks: 0,
            failed_extractions: 0,
            checks: checks
                .iter()
                .map(|c| CheckCount {
                    check: c.clone(),
                    passed: 0,
                    failed: 0,
                })
                .collect(),
            statuses: BTreeMap::new(),
            original_status: None,
            latency: Hist::new(),
            connect: Hist::new(),
            waiting: Hist::new(),
            transfer: Hist::new(),
        }
    }

    /// Complete responses whose status `rule` refuses (`--expect-status`).
    pub fn refused(&self, rule: &crate::ExpectStatus) -> u64 {
        rule.refused_in(&self.statuses)
    }

    /// Counts a complete response's status.
    pub fn count_status(&mut self, status: u16) {
        // The key is formatted on the stack: no allocation once a status is known.
        let mut buf = [0u8; 5];
        let mut n = status;
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let key = std::str::from_utf8(&buf[i..]).unwrap_or("0");
        match self.statuses.get_mut(key) {
            Some(c) => *c = c.saturating_add(1),
            None => {
                self.statuses.insert(key.to_string(), 1);
            }
        }
    }

    /// Adds another worker's or machine's numbers for the same request.
    pub fn merge(&mut self, o: &RequestStats) {
        // Saturating: counts from a record read from outside must not wrap.
        self.sent = self.sent.saturating_add(o.sent);
        self.completed = self.completed.saturating_add(o.completed);
        self.bad_status = self.bad_status.saturating_add(o.bad_status);
        self.errors = self.errors.saturating_add(o.errors);
        self.failed_checks = self.failed_checks.saturating_add(o.failed_checks);
        self.failed_extractions = self.failed_extractions.saturating_add(o.failed_extractions);
        for c in &o.checks {
            match self.checks.iter_mut().find(|x| x.check == c.check) {
                Some(x) => {
                    x.passed = x.passed.saturating_add(c.passed);
                    x.failed = x.failed.saturating_add(c.failed);
                }
                None => self.checks.push(c.clone()),
            }
        }
        for (k, v) in &o.statuses {
            let c = self.statuses.entry(k.clone()).or_insert(0);
            *c = c.saturating_add(*v);
        }
        if self.original_status.is_none() {
            self.original_status = o.original_status;
        }
        self.latency.merge(&o.latency);
        self.connect.merge(&o.connect);
        self.waiting.merge(&o.waiting);
        self.transfer.merge(&o.transfer);
    }
}

/// Open-loop sessions (`--scenario` in session mode with `--rate`): how the
/// virtual-user journeys the schedule started ended. Every journey that
/// arrived is counted once: `arrived = started + not_started` and `started =
/// completed + abandoned + in_flight_at_end`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Journeys {
    /// Journeys the schedule released (arrivals).
    pub arrived: u64,
    /// Journeys whose first step was sent (or whose connect for it failed).
    pub started: u64,
    /// Arrived, but the first step was never sent: every one of the `-c`
    /// connections held a journey until the run ended, or the run stopped first.
    pub not_started: u64,
    /// Walked every step with an answer and no failed check.
    pub completed: u64,
    /// Ended early (the sum of the three below).
    pub abandoned: u64,
    /// Ended early: a step's check failed.
    pub abandoned_check: u64,
    /// Ended early: a step failed (error, time-out, connect failure).
    pub abandoned_error: u64,
    /// Ended early: the run stopped before its next step could be sent.
    pub abandoned_stop: u64,
    /// A step was in flight when the run ended.
    pub in_flight_at_end: u64,
    /// Time of completed journeys, from the intended start to the last answer.
    pub duration: Hist,
}

impl Journeys {
    /// Adds another worker's or machine's journeys.
    pub fn merge(&mut self, o: &Journeys) {
        for (a, b) in [
            (&mut self.arrived, o.arrived),
            (&mut self.started, o.started),
            (&mut self.not_started, o.not_started),
            (&mut self.completed, o.completed),
            (&mut self.abandoned, o.abandoned),
            (&mut self.abandoned_check, o.abandoned_check),
            (&mut self.abandoned_error, o.abandoned_error),
            (&mut self.abandoned_stop, o.abandoned_stop),
            (&mut self.in_flight_at_end, o.in_flight_at_end),
        ] {
            *a = a.saturating_add(b);
        }
        self.duration.merge(&o.duration);
    }
}

/// Merges lists of per-request numbers by name, keeping the first list's order.
pub fn merge_requests(a: &mut Vec<RequestStats>, b: &[RequestStats]) {
    for r in b {
        match a.iter_mut().find(|x| x.name == r.name) {
            Some(x) => x.merge(r),
            None => a.push(r.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn merge_by_name_is_exact() {
        let mut a = RequestStats::new("home", "GET", "/", &["status 200".into()]);
        a.completed = 3;
        a.checks[0].passed = 3;
        a.latency.record(Duration::from_millis(3));
        let mut b = RequestStats::new("home", "GET", "/", &["status 200".into()]);
        b.completed = 2;
        b.checks[0].failed = 2;
        b.latency.record(Duration::from_millis(9));
        let c = RequestStats::new("login", "POST", "/login", &[]);
        let mut all = vec![a];
        merge_requests(&mut all, &[b, c]);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].completed, 5);
        assert_eq!((all[0].checks[0].passed, all[0].checks[0].failed), (3, 2));
        assert_eq!(all[0].latency.count(), 2);
        assert_eq!(all[1].name, "login");
    }

    #[test]
    fn statuses_count_and_merge() {
        let mut a = RequestStats::new("r", "GET", "/", &[]);
        for s in [200, 200, 404, 100, 599] {
            a.count_status(s);
        }
        let mut b = RequestStats::new("r", "GET", "/", &[]);
        b.count_status(404);
        b.original_status = Some(200);
        a.merge(&b);
        let got: Vec<(&str, u64)> = a.statuses.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(got, [("100", 1), ("200", 2), ("404", 2), ("599", 1)]);
        assert_eq!(a.original_status, Some(200));
    }
}
