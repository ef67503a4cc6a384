//! Pass/fail thresholds for CI: `--threshold 'p99<250ms'`, `'errors<0.1%'`,
//! `'rps>1000'`. Parsed once before the run (a bad one is a usage error), then
//! checked against the run record.
//!
//! Every scheduled request counts: one never answered (in flight or never
//! sent when the run ended) is an error for `errors<X%` and slower than every
//! answered one for latency bounds, so a server that stops answering cannot
//! pass `p99<200ms` on the few it did answer. A percentile fails once the
//! unanswered share exceeds what the percentile leaves above it (p99: 1 %);
//! `mean` and `max` fail with any unanswered request (its time is unbounded).
//!
//! `--abort-on-fail` asks [`hopeless`] during the run, with what the progress
//! snapshots and the finished seconds of the series show:
//! - at once, when no later data can save a threshold: `max<X` once a response
//!   took longer; `errors<X%` in a count-bounded run (`-n N`) once the errors
//!   so far are X % of N (the final share can only be higher);
//! - otherwise on the data so far, once the run is 5 s old or 10 % through
//!   (of its duration, or of its request count), whichever comes first, and
//!   at least one second has finished.
//!
//! Unanswered requests count there as [`check`] counts them at the end
//! ([`hopeless_counting`]): a request still unanswered longer than a latency
//! bound after its intended send time (in flight, or not sent) is unanswered
//! for that bound (`p99<200ms`, `mean<…`, `max<…`), and one unanswered longer
//! than the run's `--timeout` is unanswered for `errors<X%` (see
//! [`overdue_age`]); `max<X` fails at once on one such request, and
//! `errors<X%` of a count-bounded run once they and the errors reach X % of N.

use redline_stats::{Hist, RunRecord, SeriesPoint};
use std::fmt;

/// What a threshold measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// A latency percentile (0–100), from the intended send time.
    Percentile(f64),
    /// Mean latency.
    Mean,
    /// Maximum latency.
    Max,
    /// Completed responses per second.
    Rps,
    /// Failed requests, responses with a status the run's rule refuses
    /// (`--expect-status`, default: outside 2xx and 3xx) and unanswered requests, as a share
    /// of all scheduled ones.
    Errors,
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// One threshold, e.g. `p99<250ms` (values kept in µs, req/s or a 0–1 share).
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The text as given.
    pub text: String,
    /// What is measured.
    pub metric: Metric,
    /// How it is compared.
    pub op: Op,
    /// The bound: µs for latency, req/s for rps, a share (0–1) for errors.
    pub value: f64,
}

/// The outcome of one threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The threshold.
    pub threshold: Threshold,
    /// The measured value (same unit as the bound).
    pub actual: f64,
    /// Whether it held.
    pub pass: bool,
    /// Requests never answered (in flight or not sent at the end), counted in
    /// the measure.
    pub unanswered: u64,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = match self.threshold.metric {
            Metric::Rps => format!("{:.1} req/s", self.actual),
            Metric::Errors => format!("{:.3}%", self.actual * 100.0),
            _ if self.actual.is_infinite() => "unbounded".to_string(),
            _ => crate::dur_us(self.actual),
        };
        if self.unanswered > 0 && self.threshold.metric != Metric::Rps {
            shown.push_str(&format!(
                ", {} requests never answered counted",
                self.unanswered
            ));
        }
        write!(
            f,
            "{}  {}  (measured {shown})",
            if self.pass { "PASS" } else { "FAIL" },
            self.threshold.text
        )
    }
}

impl std::str::FromStr for Threshold {
    type Err = String;

    fn from_str(s: &str) -> Result<Threshold, String> {
        let text = s.trim().to_string();
        let bad = |why: &str| {
            format!(
                "invalid threshold '{text}': {why} (examples: 'p99<250ms', 'errors<0.1%', 'rps>1000')"
            )
        };
        let pos = text
            .find(['<', '>'])
            .ok_or_else(|| bad("no < or > in it"))?;
        let (name, rest) = text.split_at(pos);
        let (op, value) = if let Some(v) = rest.strip_prefix("<=") {
            (Op::Le, v)
        } else if let Some(v) = rest.strip_prefix(">=") {
            (Op::Ge, v)
        } else if let Some(v) = rest.strip_prefix('<') {
            (Op::Lt, v)
        } else {
            (Op::Gt, &rest[1..])
        };
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim();
        let metric = match name.as_str() {
            "mean" | "avg" => Metric::Mean,
            "max" => Metric::Max,
            "rps" | "req/s" => Metric::Rps,
            "errors" | "error_rate" => Metric::Errors,
            p if p.starts_with('p') => {
                let q: f64 = p[1..].parse().map_err(|_| bad("unknown metric"))?;
                if !(0.0..=100.0).contains(&q) {
                    return Err(bad("percentile must be within 0–100"));
                }
                Metric::Percentile(q)
            }
            _ => return Err(bad("unknown metric (p50…p99.9, mean, max, rps, errors)")),
        };
        let value = match metric {
            Metric::Rps => value
                .trim_end_matches("req/s")
                .trim()
                .parse::<f64>()
                .map_err(|_| bad("expected a number of requests per second"))?,
            Metric::Errors => {
                let v = value.trim_end_matches('%').trim();
                let n: f64 = v.parse().map_err(|_| bad("expected a percentage"))?;
                n / 100.0
            }
            _ => {
                let split = value
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(value.len());
                let (num, unit) = value.split_at(split);
                let n: f64 = num.parse().map_err(|_| bad("expected a duration"))?;
                n * match unit.trim() {
                    "us" | "µs" => 1.0,
                    "" | "ms" => 1_000.0,
                    "s" => 1_000_000.0,
                    _ => return Err(bad("unknown unit (us, ms, s)")),
                }
            }
        };
        if !value.is_finite() || value < 0.0 {
            return Err(bad("the bound must be a non-negative number"));
        }
        Ok(Threshold {
            text,
            metric,
            op,
            value,
        })
    }
}

/// What a threshold is measured on.
struct Measured<'a> {
    latency: &'a Hist,
    completed: u64,
    failed: u64,
    /// Answers the run's status rule refuses (`--expect-status`).
    refused: u64,
    /// Scheduled but never answered: in flight or not sent at the end.
    unanswered: u64,
    rps: f64,
}

/// Percentile `q` of the answered latencies plus `unanswered` requests that
/// are slower than all of them: infinite once they reach into the top
/// `100 - q` %.
fn percentile_with_unanswered(h: &Hist, q: f64, unanswered: u64) -> f64 {
    if unanswered == 0 {
        return h.percentile(q) as f64;
    }
    let answered = h.count();
    let all = answered + unanswered;
    let rank = ((q / 100.0) * all as f64).ceil().max(1.0) as u64;
    if rank > answered {
        return f64::INFINITY;
    }
    h.percentile(100.0 * rank as f64 / answered as f64) as f64
}

fn outcome(t: &Threshold, m: &Measured) -> Outcome {
    let actual = match t.metric {
        Metric::Percentile(q) => percentile_with_unanswered(m.latency, q, m.unanswered),
        Metric::Mean | Metric::Max if m.unanswered > 0 => f64::INFINITY,
        Metric::Mean => m.latency.mean(),
        Metric::Max => m.latency.max() as f64,
        Metric::Rps => m.rps,
        Metric::Errors => {
            let scheduled = m.completed + m.failed + m.unanswered;
            if scheduled == 0 {
                1.0
            } else {
                (m.failed + m.refused + m.unanswered) as f64 / scheduled as f64
            }
        }
    };
    // A run with no response has no latency: latency thresholds fail.
    let no_data = m.latency.is_empty() && !matches!(t.metric, Metric::Rps | Metric::Errors);
    let pass = !no_data && holds(t.op, actual, t.value);
    Outcome {
        threshold: t.clone(),
        actual,
        pass,
        unanswered: m.unanswered,
    }
}

fn holds(op: Op, actual: f64, bound: f64) -> bool {
    match op {
        Op::Lt => actual < bound,
        Op::Le => actual <= bound,
        Op::Gt => actual > bound,
        Op::Ge => actual >= bound,
    }
}

/// Checks thresholds against a run.
pub fn check(rec: &RunRecord, thresholds: &[Threshold]) -> Vec<Outcome> {
    let c = &rec.counters;
    let m = Measured {
        latency: &rec.latency,
        completed: c.completed,
        failed: c.failed,
        refused: rec.refused_status(),
        unanswered: c.in_flight_at_end.saturating_add(c.not_sent),
        rps: rec.requests_per_sec,
    };
    thresholds.iter().map(|t| outcome(t, &m)).collect()
}

/// A run in progress, as `--abort-on-fail` sees it.
pub struct SoFar<'a> {
    /// Time since the start, seconds.
    pub elapsed_s: f64,
    /// Failed requests so far (from the progress snapshot).
    pub failed: u64,
    /// The finished seconds of the series.
    pub series: &'a [SeriesPoint],
    /// The run's request count, when bounded by count.
    pub planned_requests: Option<u64>,
    /// The run's duration, when bounded by time.
    pub planned_duration_s: Option<f64>,
    /// The run's status rule (`--expect-status`).
    pub rule: &'a redline_stats::ExpectStatus,
}

/// How long after its intended send time a request not yet answered counts as
/// unanswered for `t` during a run: a latency bound's own value (it can only
/// end slower than the bound), the run's `timeout` for `errors` (it can only
/// end as a time-out); `None` for `rps` and lower bounds (`p50>1ms`).
pub fn overdue_age(t: &Threshold, timeout: std::time::Duration) -> Option<std::time::Duration> {
    match (t.metric, t.op) {
        (_, Op::Gt | Op::Ge) | (Metric::Rps, _) => None,
        (Metric::Errors, _) => Some(timeout),
        _ => Some(std::time::Duration::from_micros(t.value as u64)),
    }
}

/// The first threshold that can no longer pass, with the text to report
/// (`threshold 'p99<5ms' can no longer pass: …`); see the module text.
/// Requests not yet answered are not counted (see [`hopeless_counting`]).
pub fn hopeless(thresholds: &[Threshold], s: &SoFar) -> Option<String> {
    hopeless_counting(thresholds, s, |_| 0)
}

/// As [`hopeless`], with `unanswered(t)` requests unanswered for threshold `t`
/// (scheduled, and unanswered for longer than [`overdue_age`] at the end of
/// the series' last second), counted as [`check`] counts them at the end.
pub fn hopeless_counting(
    thresholds: &[Threshold],
    s: &SoFar,
    unanswered: impl Fn(&Threshold) -> u64,
) -> Option<String> {
    let mut lat = Hist::with_sigfig(redline_stats::hist::SERIES_SIGFIG);
    let (mut completed, mut failed, mut refused) = (0u64, 0u64, 0u64);
    for p in s.series {
        lat.merge(&p.hist.to_hist());
        completed += p.requests;
        failed += p.errors;
        refused += p.refused(s.rule);
    }
    let failed_now = failed.max(s.failed);
    let seconds = s.series.last().map_or(0, |p| p.t + 1);
    let m = Measured {
        latency: &lat,
        completed,
        failed,
        refused,
        unanswered: 0,
        rps: if seconds > 0 {
            completed as f64 / seconds as f64
        } else {
            0.0
        },
    };
    let late = |t: &Threshold, n: u64| {
        format!(
            "{n} requests unanswered for over {}",
            overdue_age(t, std::time::Duration::ZERO)
                .filter(|_| t.metric != Metric::Errors)
                .map_or("the time-out".to_string(), |d| crate::dur_us(
                    d.as_micros() as f64
                ))
        )
    };
    let too_late = |t: &Threshold, why: String| {
        Some(format!("threshold '{}' can no longer pass: {why}", t.text))
    };
    // Certain already, whatever comes next.
    for t in thresholds {
        match (t.metric, t.op) {
            (Metric::Max, Op::Lt | Op::Le) => {
                let max = lat.max() as f64;
                if !lat.is_empty() && !holds(t.op, max, t.value) {
                    return too_late(t, format!("a response already took {}", crate::dur_us(max)));
                }
                let n = unanswered(t);
                if n > 0 {
                    return too_late(t, late(t, n));
                }
            }
            (Metric::Errors, Op::Lt | Op::Le) => {
                if let Some(n) = s.planned_requests.filter(|n| *n > 0) {
                    let bad = failed_now + refused + unanswered(t);
                    let floor = bad as f64 / n as f64;
                    if !holds(t.op, floor, t.value) {
                        return too_late(
                            t,
                            format!(
                                "{bad} of the {n} requests already failed, had a status outside {} or went unanswered ({:.2}%)",
                                s.rule,
                                floor * 100.0
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
    }
    // On the data so far, once there is enough of it.
    let through = match (s.planned_duration_s, s.planned_requests) {
        (Some(d), _) if d > 0.0 => s.elapsed_s / d,
        (_, Some(n)) if n > 0 => (completed + failed) as f64 / n as f64,
        _ => 0.0,
    };
    if seconds == 0 || (s.elapsed_s < 5.0 && through < 0.1) {
        return None;
    }
    for t in thresholds {
        let m = Measured {
            unanswered: unanswered(t),
            ..m
        };
        let o = outcome(t, &m);
        if !o.pass {
            let mut shown = match t.metric {
                Metric::Rps => format!("{:.1} req/s", o.actual),
                Metric::Errors => format!("{:.2}%", o.actual * 100.0),
                _ if o.actual.is_infinite() => "unbounded".to_string(),
                _ => crate::dur_us(o.actual),
            };
            if o.unanswered > 0 {
                shown.push_str(&format!(" ({} counted)", late(t, o.unanswered)));
            }
            return too_late(
                t,
                format!(
                    "{shown} over the first {seconds} s (judged after {:.1} s)",
                    s.elapsed_s
                ),
            );
        }
    }
    None
}

/// Checks thresholds against one named request of a scenario run (its own
/// latency, errors and share of the throughput); each outcome's text starts
/// with the request's name.
pub fn check_request(
    rec: &RunRecord,
    req: &redline_stats::RequestStats,
    thresholds: &[Threshold],
) -> Vec<Outcome> {
    let rule = rec.config.status_rule();
    let m = Measured {
        latency: &req.latency,
        completed: req.completed,
        failed: req.errors,
        refused: req.refused(&rule),
        unanswered: 0,
        rps: if rec.counters.completed > 0 {
            rec.requests_per_sec * req.completed as f64 / rec.counters.completed as f64
        } else {
            0.0
        },
    };
    thresholds
        .iter()
        .map(|t| outcome(t, &m))
        .map(|mut o| {
            o.threshold.text = format!("{}: {}", req.name, o.threshold.text);
            o
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use redline_stats::{Environment, LoadModel, RunConfig};

    #[test]
    fn parse() {
        let t: Threshold = "p99<250ms".parse().unwrap();
        assert_eq!(t.metric, Metric::Percentile(99.0));
        assert_eq!(t.op, Op::Lt);
        assert_eq!(t.value, 250_000.0);
        let t: Threshold = "errors <= 0.1%".parse().unwrap();
        assert_eq!((t.metric, t.op), (Metric::Errors, Op::Le));
        assert!((t.value - 0.001).abs() < 1e-12);
        let t: Threshold = "rps>1000".parse().unwrap();
        assert_eq!((t.metric, t.value), (Metric::Rps, 1000.0));
        let t: Threshold = "p99.9<1.5s".parse().unwrap();
        assert_eq!(t.value, 1_500_000.0);
        for bad in [
            "p99",
            "p101<1ms",
            "foo<1",
            "p99<abc",
            "p99<5parsecs",
            "rps>-1",
            "",
        ] {
            assert!(bad.parse::<Threshold>().is_err(), "{bad}");
        }
    }

    static DEFAULT_RULE: std::sync::LazyLock<redline_stats::ExpectStatus> =
        std::sync::LazyLock::new(redline_stats::ExpectStatus::default);

    #[test]
    fn hopeless_when_no_later_data_can_help() {
        use redline_stats::hist::SERIES_SIGFIG;
        let sec = |t: u32, n: u64, lat_us: u64, errors: u64| {
            let mut h = Hist::with_sigfig(SERIES_SIGFIG);
            for _ in 0..n {
                h.record_us(lat_us);
            }
            let mut p = SeriesPoint::new(t, n, errors, 0, &h);
            p.status_classes[1] = n;
            p
        };
        let ts = |s: &[&str]| -> Vec<Threshold> { s.iter().map(|x| x.parse().unwrap()).collect() };
        let series = vec![sec(0, 100, 20_000, 0)];
        let so_far = |elapsed_s, series: &'static [SeriesPoint]| SoFar {
            elapsed_s,
            failed: 0,
            series,
            planned_requests: None,
            planned_duration_s: Some(60.0),
            rule: &DEFAULT_RULE,
        };
        let series: &'static [SeriesPoint] = Box::leak(series.into_boxed_slice());
        // p99 judged on data only after 5 s (10 % of 60 s is 6 s).
        assert!(hopeless(&ts(&["p99<5ms"]), &so_far(1.0, series)).is_none());
        let why = hopeless(&ts(&["p99<5ms"]), &so_far(5.0, series)).unwrap();
        assert!(why.contains("'p99<5ms' can no longer pass"), "{why}");
        assert!(hopeless(&ts(&["p99<50ms"]), &so_far(5.0, series)).is_none());
        // max: at once.
        assert!(hopeless(&ts(&["max<10ms"]), &so_far(0.5, series)).is_some());
        // errors in a count-bounded run: once they are the bound's share of N.
        let errs: &'static [SeriesPoint] = Box::leak(vec![sec(0, 10, 1000, 20)].into_boxed_slice());
        let mut s = so_far(0.3, errs);
        s.planned_duration_s = None;
        s.planned_requests = Some(1000);
        assert!(hopeless(&ts(&["errors<1%"]), &s).is_some());
        assert!(hopeless(&ts(&["errors<5%"]), &s).is_none());
        // Unanswered requests count as at the end: 30 more past the time-out
        // make errors<5% hopeless; one waiting past 50 ms fails max<50ms at
        // once; 5 of 105 past 50 ms fail p99<50ms on the data so far.
        let why = hopeless_counting(&ts(&["errors<5%"]), &s, |_| 30).unwrap();
        assert!(why.contains("50 of the 1000 requests"), "{why}");
        let at_once = so_far(0.5, series);
        assert!(hopeless(&ts(&["max<50ms"]), &at_once).is_none());
        let why = hopeless_counting(&ts(&["max<50ms"]), &at_once, |_| 1).unwrap();
        assert!(
            why.contains("1 requests unanswered for over 50.00ms"),
            "{why}"
        );
        assert!(hopeless(&ts(&["p99<50ms"]), &so_far(5.0, series)).is_none());
        let why = hopeless_counting(&ts(&["p99<50ms"]), &so_far(5.0, series), |_| 5).unwrap();
        assert!(why.contains("unbounded (5 requests unanswered"), "{why}");
        let t: Threshold = "errors<1%".parse().unwrap();
        assert_eq!(
            overdue_age(&t, std::time::Duration::from_secs(3)),
            Some(std::time::Duration::from_secs(3))
        );
        assert_eq!(
            overdue_age(&"rps>1".parse().unwrap(), std::time::Duration::ZERO),
            None
        );
    }

    #[test]
    fn check_against_a_record() {
        let mut rec = RunRecord::new(
            RunConfig::get(
                "http://127.0.0.1:1/",
                LoadModel::Closed {
                    connections: 1,
                    requests: Some(100),
                    duration_s: None,
                },
            ),
            Environment::default(),
            "t".into(),
        );
        for v in 1..=100u64 {
            rec.latency.record_us(v * 1000); // 1..100 ms
        }
        rec.counters.completed = 100;
        // 2 server errors and 10 redirects: only the 500s count as failed.
        rec.status_codes.insert("200".into(), 88);
        rec.status_codes.insert("301".into(), 10);
        rec.status_codes.insert("500".into(), 2);
        rec.counters.non_2xx = 12;
        rec.duration_s = 1.0;
        rec.derive();
        let ts: Vec<Threshold> = [
            "p99<250ms",
            "p50<10ms",
            "errors<1%",
            "errors<5%",
            "rps>=100",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let pass: Vec<bool> = check(&rec, &ts).iter().map(|o| o.pass).collect();
        assert_eq!(pass, vec![true, false, false, true, true]);
        // With --expect-status 200-299 the redirects fail too.
        let mut strict = rec.clone();
        strict.config.expect_status = Some("200-299".into());
        let o = check(&strict, &ts[2..4]);
        assert!(!o[1].pass && (o[1].actual - 0.12).abs() < 1e-9, "{}", o[1]);
        // A server that answered 100 and then went silent for 400 more:
        // unanswered requests are errors and slower than every answer.
        let mut silent = rec.clone();
        silent.counters.in_flight_at_end = 150;
        silent.counters.not_sent = 250;
        let ts: Vec<Threshold> = ["errors<1%", "p99<250ms", "p10<250ms", "max<1s", "mean<1s"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let o = check(&silent, &ts);
        assert_eq!(
            o.iter().map(|o| o.pass).collect::<Vec<_>>(),
            vec![false, false, true, false, false]
        );
        assert!(
            (o[0].actual - 402.0 / 500.0).abs() < 1e-9,
            "{}",
            o[0].actual
        );
        assert!(
            o[1].to_string().contains("400 requests never answered"),
            "{}",
            o[1]
        );
        // One straggler left in flight does not move p99 past an answered value.
        let mut one = rec.clone();
        one.counters.in_flight_at_end = 1;
        let o = check(&one, &ts[1..2]);
        assert!(o[0].pass && o[0].actual <= 100_500.0, "{}", o[0]);
        let empty = RunRecord::new(rec.config.clone(), Environment::default(), "t".into());
        assert!(
            !check(&empty, &ts[..1])[0].pass,
            "no responses: a latency bound fails"
        );
    }
}
