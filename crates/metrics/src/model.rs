//! The one model of what redline exports while a run goes (the metric
//! families, their labels and values), built from the engine's live
//! snapshots and finished seconds during the run and from the run record at
//! its end. The text exposition, remote write and OTLP encoders only read a
//! [`Metrics`]; nothing here runs on the request hot path.

use redline_engine::control::ERROR_KINDS;
use redline_engine::Snapshot;
use redline_stats::{ExpectStatus, Hist, RunRecord, SeriesPoint};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The upper bounds (seconds) of the latency histogram's buckets, `+Inf`
/// besides (docs/metrics.md): 100 µs × 2^(k/8), whole µs, to 62 s. Each
/// bound is at most 9.3 % above the one before (9.05 % but for rounding
/// to whole µs), so a PromQL quantile
/// interpolated inside a bucket is within 9.3 % of the value it estimates
/// (the former 1-2.5-5 bounds put 10-25 ms in one bucket: a p99 33 % high).
///
/// Below 100 µs, two octaves more from 25 µs, rounded to 0.1 µs (whole µs
/// would space 25 and 27 µs 8 % apart but 27 and 30 11 %): a loopback p99
/// of 80 µs fell in the first bucket and Prometheus could only say "under
/// 100 µs".
pub static LATENCY_BUCKETS_S: std::sync::LazyLock<Vec<f64>> = std::sync::LazyLock::new(|| {
    let per = BUCKETS_PER_OCTAVE as i32;
    (-2 * per..=per * 19 + 2)
        .map(|k| {
            let us = 100.0 * 2f64.powf(f64::from(k) / f64::from(per));
            if k < 0 {
                (us * 10.0).round() / 1e7
            } else {
                us.round() / 1e6
            }
        })
        .collect()
});

/// Latency buckets per doubling (2^(1/8) = 1.0905 between bounds).
const BUCKETS_PER_OCTAVE: u32 = 8;

/// A finished second is taken into the counters once the run is this far
/// past its end, so every worker's share of it has arrived (workers publish
/// every 100 ms).
const SETTLE_S: f64 = 2.0;

/// The status classes, in the order of [`SeriesPoint::status_classes`].
pub const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// What a family is, as Prometheus and OpenMetrics say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Monotonic total since the run started.
    Counter,
    /// A value now.
    Gauge,
    /// A latency distribution (seconds).
    Histogram,
}

/// A latency distribution.
#[derive(Debug, Clone)]
pub struct HistValue {
    /// Responses at or under each bound of [`LATENCY_BUCKETS_S`], cumulative.
    pub buckets: Vec<u64>,
    /// Responses.
    pub count: u64,
    /// Sum of latencies, seconds (count × the histogram's mean).
    pub sum_s: f64,
    /// The distribution itself (µs), for OTLP's exponential buckets.
    pub hist: Hist,
}

impl HistValue {
    /// The buckets of `h` (µs).
    pub fn of(h: &Hist) -> HistValue {
        let inner = h.inner();
        let buckets = LATENCY_BUCKETS_S
            .iter()
            .map(|b| {
                let us = (b * 1e6).round() as u64;
                if h.is_empty() {
                    0
                } else {
                    inner.count_between(0, us)
                }
            })
            .collect();
        HistValue {
            buckets,
            count: h.count(),
            sum_s: if h.is_empty() {
                0.0
            } else {
                h.mean() * h.count() as f64 / 1e6
            },
            hist: h.clone(),
        }
    }
}

/// One value of a family.
#[derive(Debug, Clone)]
pub enum Value {
    /// A counter's or gauge's value.
    Num(f64),
    /// A histogram.
    Hist(Box<HistValue>),
}

/// One labelled series of a family.
#[derive(Debug, Clone)]
pub struct Series {
    /// Its own labels (the constant labels of [`Metrics`] come first).
    pub labels: Vec<(&'static str, String)>,
    /// Its value.
    pub value: Value,
}

/// One metric family.
#[derive(Debug, Clone)]
pub struct Family {
    /// The name (counters without `_total`, added where a format wants it).
    pub name: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// Its series.
    pub series: Vec<Series>,
}

/// Everything exported at one moment.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// When the run started (Unix ms): the start of every counter.
    pub start_ms: u64,
    /// When these values were taken (Unix ms).
    pub time_ms: u64,
    /// Labels on every series (`target`).
    pub labels: Vec<(&'static str, String)>,
    /// The families.
    pub families: Vec<Family>,
    /// True once the values are the run record's (the run has ended).
    pub finished: bool,
}

/// Unix milliseconds of `t`.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis() as u64
}

/// The target URL as a label: scheme, host, port and path; no user
/// information, query or fragment (they may hold credentials).
pub fn target_label(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => String::from("(unparsable)"),
    }
}

#[derive(Debug, Clone)]
struct StageAcc {
    classes: [u64; 5],
    /// Answers the run's status rule refuses (`--expect-status`).
    refused: u64,
    errors: u64,
    hist: Hist,
}

impl StageAcc {
    fn new() -> StageAcc {
        StageAcc {
            classes: [0; 5],
            refused: 0,
            errors: 0,
            hist: Hist::with_sigfig(2),
        }
    }

    fn add(&mut self, p: &SeriesPoint, rule: &ExpectStatus) {
        for (a, b) in self.classes.iter_mut().zip(p.status_classes) {
            *a = a.saturating_add(b);
        }
        self.refused = self.refused.saturating_add(p.refused(rule));
        self.errors = self.errors.saturating_add(p.errors);
        self.hist.merge(&p.hist.to_hist());
    }
}

/// Turns live snapshots and finished seconds (and at the end the run
/// record) into [`Metrics`].
#[derive(Debug, Clone)]
pub struct Tracker {
    start: SystemTime,
    target: String,
    /// The end of each stage (seconds since the start), when staged.
    stage_ends: Option<Vec<f64>>,
    live: Snapshot,
    next_t: u32,
    stages: Vec<StageAcc>,
    rule: ExpectStatus,
    requests: Vec<redline_stats::RequestStats>,
    /// Scenario runs, while the run goes: each named request's (completed, errors).
    live_requests: Vec<(String, u64, u64)>,
    finished: bool,
}

impl Tracker {
    /// A tracker for a run of `url` (already redacted or not: the label
    /// keeps no user information or query) that starts now; `stages` is the
    /// run's `--stages` plan.
    pub fn new(url: &str, stages: Option<&redline_stats::stages::StagePlan>) -> Tracker {
        let stage_ends = stages.map(|p| {
            let mut t = 0.0;
            p.stages
                .iter()
                .map(|s| {
                    t += s.duration_s;
                    t
                })
                .collect::<Vec<f64>>()
        });
        let n = stage_ends.as_ref().map_or(1, |e| e.len().max(1));
        Tracker {
            start: SystemTime::now(),
            target: target_label(url),
            stage_ends,
            live: Snapshot {
                elapsed: Duration::ZERO,
                completed: 0,
                failed: 0,
                open: 0,
                in_flight: 0,
                sent: 0,
                bytes_read: 0,
                bytes_written: 0,
                connections_opened: 0,
                errors: [0; ERROR_KINDS.len()],
            },
            next_t: 0,
            stages: vec![StageAcc::new(); n],
            rule: ExpectStatus::default(),
            requests: Vec::new(),
            live_requests: Vec::new(),
            finished: false,
        }
    }

    /// The run's status rule (`--expect-status`), for `redline_responses_refused`.
    pub fn with_rule(mut self, rule: ExpectStatus) -> Tracker {
        self.rule = rule;
        self
    }

    /// Scenario runs: the names of the requests, in the scenario's order.
    pub fn with_requests(mut self, names: Vec<String>) -> Tracker {
        self.live_requests = names.into_iter().map(|n| (n, 0, 0)).collect();
        self
    }

    /// Scenario runs: each named request's (completed, errors) so far.
    pub fn update_requests(&mut self, counts: &[(u64, u64)]) {
        if self.finished {
            return;
        }
        for (r, c) in self.live_requests.iter_mut().zip(counts) {
            r.1 = c.0;
            r.2 = c.1;
        }
    }

    fn stage_of(&self, t: f64) -> usize {
        match &self.stage_ends {
            None => 0,
            Some(ends) => ends
                .iter()
                .position(|e| t < *e)
                .unwrap_or(ends.len().saturating_sub(1)),
        }
    }

    /// Takes a live snapshot and the run's finished seconds so far (the
    /// engine's merged series); seconds are counted once settled.
    pub fn update(&mut self, s: &Snapshot, series: &[SeriesPoint]) {
        if self.finished {
            return;
        }
        self.live = *s;
        let el = s.elapsed.as_secs_f64();
        let mut next = self.next_t;
        for p in series {
            if p.t >= self.next_t && f64::from(p.t) + 1.0 + SETTLE_S <= el {
                let k = self.stage_of(f64::from(p.t));
                self.stages[k].add(p, &self.rule);
                next = next.max(p.t + 1);
            }
        }
        self.next_t = next;
    }

    /// The run ended: every value from its record (exact).
    pub fn finish(&mut self, rec: &RunRecord) {
        for s in self.stages.iter_mut() {
            *s = StageAcc::new();
        }
        for p in &rec.series {
            let k = self.stage_of(f64::from(p.t));
            self.stages[k].add(p, &self.rule);
        }
        let c = &rec.counters;
        let mut errors = [0u64; ERROR_KINDS.len()];
        for e in &rec.errors {
            errors[redline_engine::control::error_index(e.kind)] += e.count;
        }
        self.live = Snapshot {
            elapsed: Duration::from_secs_f64(rec.duration_s.max(0.0)),
            completed: c.completed,
            failed: c.failed,
            open: 0,
            in_flight: 0,
            sent: c.sent,
            bytes_read: c.bytes_read,
            bytes_written: c.bytes_written,
            connections_opened: c.connections_opened,
            errors,
        };
        self.requests = rec.requests.clone();
        self.finished = true;
    }

    /// The metrics now.
    pub fn metrics(&self) -> Metrics {
        let l = &self.live;
        let staged = self.stage_ends.is_some();
        let stage_label = |k: usize| -> Vec<(&'static str, String)> {
            if staged {
                vec![("stage", (k + 1).to_string())]
            } else {
                Vec::new()
            }
        };
        let num = |v: u64| Value::Num(v as f64);
        let one = |name, help, kind, v: u64| Family {
            name,
            help,
            kind,
            series: vec![Series {
                labels: Vec::new(),
                value: num(v),
            }],
        };
        let mut fams = vec![
            one(
                "redline_requests_sent",
                "Requests written to the server.",
                Kind::Counter,
                l.sent,
            ),
            one(
                "redline_requests_completed",
                "Responses received complete (any status).",
                Kind::Counter,
                l.completed,
            ),
            one(
                "redline_requests_failed",
                "Requests that failed (no complete response), all kinds.",
                Kind::Counter,
                l.failed,
            ),
        ];
        let mut responses = Vec::new();
        let mut refused = Vec::new();
        let mut latency = Vec::new();
        for (k, s) in self.stages.iter().enumerate() {
            refused.push(Series {
                labels: stage_label(k),
                value: num(s.refused),
            });
            for (i, class) in CLASSES.iter().enumerate() {
                let mut labels = vec![("class", class.to_string())];
                labels.extend(stage_label(k));
                responses.push(Series {
                    labels,
                    value: num(s.classes[i]),
                });
            }
            latency.push(Series {
                labels: stage_label(k),
                value: Value::Hist(Box::new(HistValue::of(&s.hist))),
            });
        }
        fams.push(Family {
            name: "redline_responses",
            help: "Responses by status class (and stage), from finished seconds.",
            kind: Kind::Counter,
            series: responses,
        });
        fams.push(Family {
            name: "redline_responses_refused",
            help: "Responses with a status the run counts as failed (--expect-status, default outside 2xx and 3xx), by stage, from finished seconds.",
            kind: Kind::Counter,
            series: refused,
        });
        fams.push(Family {
            name: "redline_errors",
            help: "Failed requests by error kind.",
            kind: Kind::Counter,
            series: ERROR_KINDS
                .iter()
                .zip(l.errors)
                .map(|(k, v)| Series {
                    labels: vec![("kind", k.to_string())],
                    value: num(v),
                })
                .collect(),
        });
        fams.push(Family {
            name: "redline_latency_seconds",
            help: "Latency from the intended send time (and stage), from finished seconds.",
            kind: Kind::Histogram,
            series: latency,
        });
        fams.push(one(
            "redline_in_flight",
            "Requests written and not yet answered.",
            Kind::Gauge,
            l.in_flight,
        ));
        fams.push(one(
            "redline_connections_open",
            "Connections open now.",
            Kind::Gauge,
            l.open,
        ));
        fams.push(one(
            "redline_connections_opened",
            "Connections opened.",
            Kind::Counter,
            l.connections_opened,
        ));
        fams.push(one(
            "redline_received_bytes",
            "Bytes read from the server (heads and bodies).",
            Kind::Counter,
            l.bytes_read,
        ));
        fams.push(one(
            "redline_sent_bytes",
            "Bytes written to the server.",
            Kind::Counter,
            l.bytes_written,
        ));
        if staged {
            let k = self.stage_of(l.elapsed.as_secs_f64());
            fams.push(one(
                "redline_stage",
                "The stage in force now (1 = the first).",
                Kind::Gauge,
                k as u64 + 1,
            ));
        }
        fams.push(one(
            "redline_run_finished",
            "1 once the run has ended and every value is the run record's.",
            Kind::Gauge,
            u64::from(self.finished),
        ));
        if self.requests.is_empty() && !self.live_requests.is_empty() {
            let per = |f: &dyn Fn(&(String, u64, u64)) -> u64| -> Vec<Series> {
                self.live_requests
                    .iter()
                    .map(|r| Series {
                        labels: vec![("request", r.0.clone())],
                        value: num(f(r)),
                    })
                    .collect()
            };
            fams.push(Family {
                name: "redline_request_responses",
                help: "Scenario runs: complete responses per named request.",
                kind: Kind::Counter,
                series: per(&|r| r.1),
            });
            fams.push(Family {
                name: "redline_request_errors",
                help: "Scenario runs: failed requests per named request.",
                kind: Kind::Counter,
                series: per(&|r| r.2),
            });
        }
        if !self.requests.is_empty() {
            let per = |f: &dyn Fn(&redline_stats::RequestStats) -> Value| -> Vec<Series> {
                self.requests
                    .iter()
                    .map(|r| Series {
                        labels: vec![("request", r.name.clone())],
                        value: f(r),
                    })
                    .collect()
            };
            fams.push(Family {
                name: "redline_request_responses",
                help: "Scenario runs: complete responses per named request.",
                kind: Kind::Counter,
                series: per(&|r| num(r.completed)),
            });
            fams.push(Family {
                name: "redline_request_errors",
                help: "Scenario runs: failed requests per named request.",
                kind: Kind::Counter,
                series: per(&|r| num(r.errors)),
            });
            fams.push(Family {
                name: "redline_request_latency_seconds",
                help: "Scenario runs: latency per named request (once the run has ended).",
                kind: Kind::Histogram,
                series: per(&|r| Value::Hist(Box::new(HistValue::of(&r.latency)))),
            });
        }
        Metrics {
            start_ms: unix_ms(self.start),
            time_ms: unix_ms(SystemTime::now()),
            labels: vec![("target", self.target.clone())],
            families: fams,
            finished: self.finished,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_label_drops_userinfo_and_query() {
        assert_eq!(
            target_label("http://user:secret@example.com:8080/a/b?token=x#f"),
            "http://example.com:8080/a/b"
        );
        assert_eq!(target_label("not a url"), "(unparsable)");
    }

    #[test]
    fn buckets_are_cumulative_and_end_at_the_count() {
        let mut h = Hist::with_sigfig(2);
        let values = [300u64, 830, 2_000, 42_000, 70_000_000];
        for us in values {
            h.record_us(us);
        }
        let v = HistValue::of(&h);
        assert_eq!(v.count, 5);
        assert_eq!(v.buckets.len(), LATENCY_BUCKETS_S.len());
        for (b, got) in LATENCY_BUCKETS_S.iter().zip(&v.buckets) {
            let us = b * 1e6;
            // The values sit over 2 % from every bound (the HDR histogram
            // keeps 2 digits), so each bound counts exactly those under it.
            assert!(values.iter().all(|&x| (x as f64 - us).abs() > 0.02 * us));
            let want = values.iter().filter(|&&x| x as f64 <= us).count() as u64;
            assert_eq!(*got, want, "<= {b} s");
        }
        assert_eq!(*v.buckets.last().unwrap(), 4, "70 s is only in +Inf");
        assert!(v.buckets.windows(2).all(|w| w[0] <= w[1]));
    }

    /// PromQL interpolates a quantile inside a bucket: within a bucket's
    /// width of the value, so each bound is at most 9.1 % above the one
    /// before (issue 35: a coarse 10-25 ms bucket made p99 33 % high).
    #[test]
    fn buckets_are_fine_enough_for_a_quantile_within_ten_percent() {
        let b = &*LATENCY_BUCKETS_S;
        assert_eq!(b[0], 0.000025);
        assert_eq!(b[16], 0.0001);
        assert!(*b.last().unwrap() >= 60.0, "{}", b.last().unwrap());
        for w in b.windows(2) {
            assert!(w[1] / w[0] <= 1.093, "{} -> {}", w[0], w[1]);
        }
        assert!(b.len() < 180, "{} buckets", b.len());
    }

    #[test]
    fn refused_answers_follow_the_runs_rule() {
        let mut h = Hist::with_sigfig(2);
        h.record_us(1000);
        let mut p = SeriesPoint::new(0, 4, 0, 0, &h);
        p.status_classes = [0, 2, 2, 0, 0];
        p.status_codes = vec![(200, 2), (301, 1), (304, 1)];
        let refused = |rule: Option<&str>| {
            let mut t = Tracker::new("http://127.0.0.1:1/", None).with_rule(ExpectStatus::of(rule));
            let mut rec = RunRecord::new(
                redline_stats::RunConfig::get(
                    "http://127.0.0.1:1/",
                    redline_stats::LoadModel::Closed {
                        connections: 1,
                        requests: Some(4),
                        duration_s: None,
                    },
                ),
                Default::default(),
                "t".into(),
            );
            rec.series.push(p.clone());
            t.finish(&rec);
            let m = t.metrics();
            let f = m
                .families
                .iter()
                .find(|f| f.name == "redline_responses_refused")
                .unwrap();
            match f.series[0].value {
                Value::Num(v) => v,
                _ => panic!("{f:?}"),
            }
        };
        assert_eq!(refused(None), 0.0, "2xx and 3xx succeed by default");
        assert_eq!(refused(Some("200-299")), 2.0);
        assert_eq!(refused(Some("200-299,304")), 1.0);
    }

    #[test]
    fn seconds_count_once_settled_and_by_stage() {
        let plan = redline_stats::stages::StagePlan {
            unit: "connections".into(),
            step: true,
            stages: vec![
                redline_stats::stages::StageSpec {
                    duration_s: 2.0,
                    level: 1.0,
                },
                redline_stats::stages::StageSpec {
                    duration_s: 2.0,
                    level: 2.0,
                },
            ],
        };
        let mut t = Tracker::new("http://127.0.0.1:1/", Some(&plan));
        let mut h = Hist::with_sigfig(2);
        h.record_us(1000);
        let mut pts = Vec::new();
        for s in 0..4 {
            let mut p = SeriesPoint::new(s, 1, 0, 10, &h);
            p.status_classes = [0, 1, 0, 0, 0];
            pts.push(p);
        }
        let mut snap = t.live;
        snap.elapsed = Duration::from_secs_f64(4.5);
        t.update(&snap, &pts);
        // Seconds 0 and 1 are settled (end + 2 s <= 4.5), 2 and 3 not yet.
        let m = t.metrics();
        let resp = m
            .families
            .iter()
            .find(|f| f.name == "redline_responses")
            .unwrap();
        let v = |class: &str, stage: &str| {
            resp.series
                .iter()
                .find(|s| {
                    s.labels.contains(&("class", class.into()))
                        && s.labels.contains(&("stage", stage.into()))
                })
                .map(|s| match s.value {
                    Value::Num(n) => n,
                    _ => -1.0,
                })
                .unwrap()
        };
        assert_eq!(v("2xx", "1"), 2.0);
        assert_eq!(v("2xx", "2"), 0.0);
        // Again with the same seconds: nothing counted twice.
        snap.elapsed = Duration::from_secs_f64(6.5);
        t.update(&snap, &pts);
        let m = t.metrics();
        let resp = m
            .families
            .iter()
            .find(|f| f.name == "redline_responses")
            .unwrap();
        let total: f64 = resp
            .series
            .iter()
            .map(|s| match s.value {
                Value::Num(n) => n,
                _ => 0.0,
            })
            .sum();
        assert_eq!(total, 4.0);
    }
}
