//! The per-worker recorder: the hot path of measurement.
//!
//! One per worker thread, owned outright (no lock, no atomics). Recording a
//! response is a handful of histogram increments and counter adds; the
//! per-second series rolls over as time passes and keeps each finished second
//! compressed, so memory does not grow with the request count.

use crate::error::{ErrorKind, ErrorTally};
use crate::hist::{Hist, SERIES_SIGFIG};
use crate::record::{merge_series, Counters, RunRecord, SeriesPoint};
use std::borrow::Cow;
use std::time::{Duration, Instant};

/// The instants of one request's life.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// When the schedule wanted it sent (closed loop: when its connection became free).
    pub intended: Instant,
    /// When its first byte was written.
    pub sent: Instant,
    /// When the first response byte arrived.
    pub first_byte: Instant,
    /// When the response was complete.
    pub done: Instant,
}

const STATUS_SLOTS: usize = 1000;

/// Measurements of one worker.
#[derive(Debug)]
pub struct Recorder {
    start: Instant,
    /// Latency from the intended send time.
    pub latency: Hist,
    /// Actual send to done.
    pub service: Hist,
    /// Intended to actual send.
    pub lag: Hist,
    /// Connect time per new connection.
    pub connect: Hist,
    /// TLS handshake time per new https connection.
    pub tls: Hist,
    /// Sent to first byte.
    pub waiting: Hist,
    /// First to last byte.
    pub transfer: Hist,
    status: Box<[u64]>,
    /// Errors by kind and message.
    pub errors: ErrorTally,
    /// Counters.
    pub counters: Counters,
    /// `Server` header of the first response.
    pub server_software: Option<String>,
    /// Body length of the first 2xx response.
    pub document_length: Option<u64>,
    /// `Alt-Svc` header of the first response (the run parses it).
    pub alt_svc: Option<String>,
    /// Body lengths seen, for ab's "Failed requests (Length: N)" check.
    pub lengths: LengthTally,
    sec: u32,
    sec_hist: Hist,
    sec_requests: u64,
    sec_errors: u64,
    sec_bytes: u64,
    sec_classes: [u64; 5],
    sec_codes: Vec<(u16, u64)>,
    series: Vec<SeriesPoint>,
}

impl Recorder {
    /// A recorder for a run that started at `start`.
    pub fn new(start: Instant) -> Recorder {
        Recorder {
            start,
            latency: Hist::new(),
            service: Hist::new(),
            lag: Hist::new(),
            connect: Hist::new(),
            tls: Hist::new(),
            waiting: Hist::new(),
            transfer: Hist::new(),
            status: vec![0; STATUS_SLOTS].into_boxed_slice(),
            errors: ErrorTally::default(),
            counters: Counters::default(),
            server_software: None,
            document_length: None,
            alt_svc: None,
            lengths: LengthTally::default(),
            sec: 0,
            sec_hist: Hist::with_sigfig(SERIES_SIGFIG),
            sec_requests: 0,
            sec_errors: 0,
            sec_bytes: 0,
            sec_classes: [0; 5],
            sec_codes: Vec::new(),
            series: Vec::new(),
        }
    }

    /// The instant the run started.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// The seconds finished so far (for live views; call [`Recorder::tick`] first).
    pub fn finished_seconds(&self) -> &[SeriesPoint] {
        &self.series
    }

    /// Open loop: the worker released a request `lag` after its planned send
    /// time (the scheduler's own delay; waiting for a free connection comes
    /// after this and shows in latency, not here).
    #[inline]
    pub fn released(&mut self, lag: Duration) {
        self.lag.record(lag);
    }

    /// Records a complete response.
    #[inline]
    pub fn response(&mut self, t: &Timing, status: u16, wire_bytes: u64, body_bytes: u64) {
        self.tick(t.done);
        let latency = t.done.saturating_duration_since(t.intended);
        self.latency.record(latency);
        self.service
            .record(t.done.saturating_duration_since(t.sent));
        self.waiting
            .record(t.first_byte.saturating_duration_since(t.sent));
        self.transfer
            .record(t.done.saturating_duration_since(t.first_byte));
        self.sec_hist.record(latency);
        self.sec_requests += 1;
        self.sec_bytes += wire_bytes;
        self.counters.completed += 1;
        self.counters.body_bytes += body_bytes;
        self.lengths.add(t.done, body_bytes);
        if !(200..300).contains(&status) {
            self.counters.non_2xx += 1;
        } else if self.document_length.is_none() {
            self.document_length = Some(body_bytes);
        }
        let slot = (status as usize).min(STATUS_SLOTS - 1);
        self.status[slot] += 1;
        // Status classes 1xx–5xx (anything else, e.g. 6xx, counts as 5xx).
        let class = (status as usize / 100).clamp(1, 5) - 1;
        self.sec_classes[class] += 1;
        // A second sees one or a few codes: a short sorted list, no allocation
        // once its codes are known (the list is reused second to second).
        match self.sec_codes.iter_mut().find(|x| x.0 == status) {
            Some(x) => x.1 += 1,
            None => crate::record::add_code(&mut self.sec_codes, status, 1),
        }
    }

    /// Counts bytes read from the network (at the time they were read).
    #[inline]
    pub fn bytes_read(&mut self, n: u64) {
        self.counters.bytes_read += n;
    }

    /// Records a failed request.
    pub fn error(&mut self, kind: ErrorKind, message: Cow<'static, str>, now: Instant) {
        self.tick(now);
        self.counters.failed += 1;
        self.sec_errors += 1;
        self.errors.add(kind, message);
    }

    /// Records the connect time of a new connection.
    #[inline]
    pub fn connected(&mut self, d: Duration) {
        self.connect.record(d);
        self.counters.connections_opened += 1;
    }

    /// A QUIC handshake completed (after [`Recorder::connected`]);
    /// `resumed`: with a TLS session from an earlier connection; `early`:
    /// requests went in 0-RTT early data, and whether the server accepted it.
    pub fn quic_handshake(&mut self, resumed: bool, early: Option<bool>) {
        self.counters.quic_handshakes += 1;
        self.counters.quic_resumed += u64::from(resumed);
        self.counters.quic_0rtt += u64::from(early.is_some());
        self.counters.quic_0rtt_accepted += u64::from(early == Some(true));
    }

    /// Rolls the per-second series forward to `now`; cheap when the second is unchanged.
    #[inline]
    pub fn tick(&mut self, now: Instant) {
        let sec = now.saturating_duration_since(self.start).as_secs() as u32;
        if sec > self.sec {
            self.roll(sec);
        }
    }

    #[cold]
    fn roll(&mut self, to: u32) {
        while self.sec < to {
            self.flush_second();
            self.sec += 1;
        }
    }

    fn flush_second(&mut self) {
        let mut p = SeriesPoint::new(
            self.sec,
            self.sec_requests,
            self.sec_errors,
            self.sec_bytes,
            &self.sec_hist,
        );
        p.status_classes = self.sec_classes;
        self.sec_classes = [0; 5];
        p.status_codes = self.sec_codes.clone();
        self.sec_codes.clear();
        self.series.push(p);
        self.sec_hist.inner_reset();
        self.sec_requests = 0;
        self.sec_errors = 0;
        self.sec_bytes = 0;
    }

    /// Adds this worker's measurements to a run record.
    pub fn finish_into(mut self, rec: &mut RunRecord, end: Instant) {
        self.tick(end);
        // The partial last second is kept when it saw anything.
        if self.sec_requests > 0 || self.sec_errors > 0 {
            self.flush_second();
        }
        let mut saturated = rec.counters.add_saturating(&self.counters);
        for (code, n) in self.status.iter().enumerate() {
            if *n > 0 {
                saturated |= crate::record::sat_add(
                    rec.status_codes.entry(code.to_string()).or_insert(0),
                    *n,
                );
            }
        }
        saturated |= crate::error::merge_counts(&mut rec.errors, &self.errors.into_counts());
        if saturated {
            rec.warn(crate::record::SATURATED, crate::record::saturated_message());
        }
        rec.latency.merge(&self.latency);
        rec.service_time.merge(&self.service);
        rec.scheduler_lag.merge(&self.lag);
        rec.connect.merge(&self.connect);
        rec.tls.merge(&self.tls);
        rec.waiting.merge(&self.waiting);
        rec.transfer.merge(&self.transfer);
        merge_series(&mut rec.series, &self.series);
        if rec.server.software.is_none() {
            rec.server.software = self.server_software;
        }
        if rec.server.document_length.is_none() {
            rec.server.document_length = self.document_length;
        }
        if rec.server.alt_svc.is_none() {
            rec.server.alt_svc = self.alt_svc.map(|value| crate::record::AltSvcSeen {
                value,
                ..Default::default()
            });
        }
    }
}

/// Distinct body lengths tallied per worker, so the run can count the
/// responses whose body length differs from the first response's, as ab's
/// "Failed requests … Length" does. Fixed size: the first
/// [`LengthTally::SLOTS`] distinct lengths are counted, later ones go to
/// `other` (counted as differing), so memory never grows.
#[derive(Debug, Clone, Default)]
pub struct LengthTally {
    /// When the worker's first response completed, and its body length.
    pub first: Option<(Instant, u64)>,
    slots: [(u64, u64); LengthTally::SLOTS],
    used: usize,
    other: u64,
}

impl LengthTally {
    /// Distinct lengths counted exactly.
    pub const SLOTS: usize = 8;

    /// Counts one response body of `len` bytes completed at `at`.
    #[inline]
    pub fn add(&mut self, at: Instant, len: u64) {
        if self.first.is_none() {
            self.first = Some((at, len));
        }
        for s in &mut self.slots[..self.used] {
            if s.0 == len {
                s.1 += 1;
                return;
            }
        }
        if self.used < Self::SLOTS {
            self.slots[self.used] = (len, 1);
            self.used += 1;
        } else {
            self.other += 1;
        }
    }

    /// Responses counted whose length is not `len`.
    pub fn differing_from(&self, len: u64) -> u64 {
        self.slots[..self.used]
            .iter()
            .filter(|s| s.0 != len)
            .map(|s| s.1)
            .sum::<u64>()
            + self.other
    }

    /// The run's first response (earliest over `tallies`) and how many
    /// responses in all had another body length: ab's length check.
    pub fn length_check<'a>(
        tallies: impl Iterator<Item = &'a LengthTally> + Clone,
    ) -> (Option<u64>, u64) {
        let Some((_, first)) = tallies.clone().filter_map(|t| t.first).min_by_key(|f| f.0) else {
            return (None, 0);
        };
        (Some(first), tallies.map(|t| t.differing_from(first)).sum())
    }
}

impl Hist {
    fn inner_reset(&mut self) {
        *self = Hist::with_sigfig(SERIES_SIGFIG);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Environment, LoadModel, RunConfig};

    fn cfg() -> RunConfig {
        RunConfig::get(
            "http://127.0.0.1:1/",
            LoadModel::Closed {
                connections: 1,
                requests: Some(10),
                duration_s: None,
            },
        )
    }

    fn feed(r: &mut Recorder, start: Instant, samples: &[(u64, u64)]) {
        for &(at_ms, lat_us) in samples {
            let done = start + Duration::from_millis(at_ms);
            let sent = done - Duration::from_micros(lat_us);
            let t = Timing {
                intended: sent,
                sent,
                first_byte: sent + Duration::from_micros(lat_us / 2),
                done,
            };
            r.response(&t, if lat_us % 7 == 0 { 404 } else { 200 }, 500, 440);
            r.bytes_read(500);
        }
    }

    /// Counts from outside (a forged record) saturate instead of wrapping
    /// round to small numbers, and the merged record says so.
    #[test]
    fn merged_counters_saturate_and_warn() {
        let mut a = RunRecord::new(cfg(), Environment::default(), "t".into());
        a.counters.completed = u64::MAX - 1;
        a.status_codes.insert("200".into(), u64::MAX - 1);
        let mut b = a.clone();
        b.counters.completed = 5;
        let before = a.clone();
        a += &before;
        a += &b;
        assert_eq!(a.counters.completed, u64::MAX);
        assert_eq!(a.status_codes["200"], u64::MAX);
        assert!(
            a.warnings
                .iter()
                .any(|w| w.code == crate::record::SATURATED),
            "{:?}",
            a.warnings
        );
        let mut c = RunRecord::new(cfg(), Environment::default(), "t".into());
        c.counters.completed = 3;
        c += &b;
        assert_eq!(c.counters.completed, 8);
        assert!(c
            .warnings
            .iter()
            .all(|w| w.code != crate::record::SATURATED));
    }

    /// The merge law: merge(record(A), record(B)) == record(A ∪ B).
    #[test]
    fn merge_equals_one_run_over_both() {
        let start = Instant::now() + Duration::from_secs(1);
        let samples: Vec<(u64, u64)> = (0..5000u64)
            .map(|i| (i * 7 % 4000, 50 + (i * 7919) % 90_000))
            .collect::<Vec<_>>();
        let mut sorted = samples.clone();
        sorted.sort();
        let (a, b): (Vec<_>, Vec<_>) = sorted.iter().enumerate().partition(|(i, _)| i % 3 == 0);
        let a: Vec<_> = a.into_iter().map(|x| *x.1).collect();
        let b: Vec<_> = b.into_iter().map(|x| *x.1).collect();
        let end = start + Duration::from_secs(4);

        let mut rec_all = RunRecord::new(cfg(), Environment::default(), "t".into());
        let mut r = Recorder::new(start);
        feed(&mut r, start, &sorted);
        r.finish_into(&mut rec_all, end);

        let mut ra = RunRecord::new(cfg(), Environment::default(), "t".into());
        let mut r = Recorder::new(start);
        feed(&mut r, start, &a);
        r.finish_into(&mut ra, end);
        let mut rb = RunRecord::new(cfg(), Environment::default(), "t".into());
        let mut r = Recorder::new(start);
        feed(&mut r, start, &b);
        r.finish_into(&mut rb, end);

        // Through JSON too: what is saved and merged elsewhere must still be exact.
        let ra: RunRecord = RunRecord::from_json(&serde_json::to_string(&ra).unwrap()).unwrap();
        let rb: RunRecord = RunRecord::from_json(&serde_json::to_string(&rb).unwrap()).unwrap();
        let mut merged = ra.clone();
        merged += &rb;
        assert_eq!(merged.counters, rec_all.counters);
        assert_eq!(merged.status_codes, rec_all.status_codes);
        assert_eq!(merged.latency, rec_all.latency);
        assert_eq!(merged.waiting, rec_all.waiting);
        assert_eq!(merged.series.len(), rec_all.series.len());
        for (x, y) in merged.series.iter().zip(&rec_all.series) {
            assert_eq!(x.requests, y.requests);
            assert_eq!(x.hist.to_hist(), y.hist.to_hist());
            assert_eq!(x.p99_us, y.p99_us);
            assert_eq!(x.status_classes, y.status_classes);
        }
        assert_eq!(merged.counters.completed, 5000);
        assert_eq!(merged.merged_runs, 2);
    }

    #[test]
    fn series_rolls_per_second_with_gaps() {
        let start = Instant::now();
        let mut r = Recorder::new(start);
        feed(&mut r, start, &[(100, 1000), (200, 1000), (3500, 2000)]);
        let mut rec = RunRecord::new(cfg(), Environment::default(), "t".into());
        r.finish_into(&mut rec, start + Duration::from_millis(3600));
        let counts: Vec<u64> = rec.series.iter().map(|p| p.requests).collect();
        assert_eq!(counts, vec![2, 0, 0, 1]);
        let classes: u64 = rec
            .series
            .iter()
            .map(|p| p.status_classes.iter().sum::<u64>())
            .sum();
        assert_eq!(classes, 3);
        assert_eq!(rec.series[3].t, 3);
    }

    #[test]
    fn newer_or_foreign_records_are_refused() {
        let rec = RunRecord::new(cfg(), Environment::default(), "t".into());
        let mut v = serde_json::to_value(&rec).unwrap();
        v["version"] = 99.into();
        assert!(matches!(
            RunRecord::from_json(&v.to_string()),
            Err(crate::record::RecordError::NewerVersion(99))
        ));
        assert!(RunRecord::from_json("{\"a\":1}").is_err());
        assert!(RunRecord::from_json("not json").is_err());
    }

    #[test]
    fn length_check_counts_against_the_runs_first_response() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let (mut a, mut b) = (LengthTally::default(), LengthTally::default());
        // Worker b answered first, with 5 bytes.
        b.add(at(1), 5);
        a.add(at(2), 7);
        a.add(at(3), 5);
        b.add(at(4), 5);
        b.add(at(5), 6);
        let (first, differs) = LengthTally::length_check([&a, &b].into_iter());
        assert_eq!((first, differs), (Some(5), 2));
        // More distinct lengths than slots: the rest count as differing.
        let mut c = LengthTally::default();
        for len in 0..20 {
            c.add(at(10 + len), len);
        }
        c.add(at(40), 0);
        assert_eq!(LengthTally::length_check([&c].into_iter()), (Some(0), 19));
        assert_eq!(
            LengthTally::length_check(std::iter::empty::<&LengthTally>()),
            (None, 0)
        );
    }
}
