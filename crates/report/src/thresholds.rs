//! Pass/fail thresholds for CI: `--threshold 'p99<250ms'`, `'errors<0.1%'`,
//! `'rps>1000'`. Parsed once before the run (a bad one is a usage error), then
//! checked against the run record.

use redline_stats::RunRecord;
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
    /// Failed requests plus non-2xx responses, as a share of all that ended.
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
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = match self.threshold.metric {
            Metric::Rps => format!("{:.1} req/s", self.actual),
            Metric::Errors => format!("{:.3}%", self.actual * 100.0),
            _ => crate::dur_us(self.actual),
        };
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

/// Checks thresholds against a run.
pub fn check(rec: &RunRecord, thresholds: &[Threshold]) -> Vec<Outcome> {
    thresholds
        .iter()
        .map(|t| {
            let c = &rec.counters;
            let actual = match t.metric {
                Metric::Percentile(q) => rec.latency.percentile(q) as f64,
                Metric::Mean => rec.latency.mean(),
                Metric::Max => rec.latency.max() as f64,
                Metric::Rps => rec.requests_per_sec,
                Metric::Errors => {
                    let ended = c.completed + c.failed;
                    if ended == 0 {
                        1.0
                    } else {
                        (c.failed + c.non_2xx) as f64 / ended as f64
                    }
                }
            };
            // A run with no response has no latency: latency thresholds fail.
            let no_data =
                rec.latency.is_empty() && !matches!(t.metric, Metric::Rps | Metric::Errors);
            let pass = !no_data
                && match t.op {
                    Op::Lt => actual < t.value,
                    Op::Le => actual <= t.value,
                    Op::Gt => actual > t.value,
                    Op::Ge => actual >= t.value,
                };
            Outcome {
                threshold: t.clone(),
                actual,
                pass,
            }
        })
        .collect()
}

/// Checks thresholds against one named request of a scenario run (its own
/// latency, errors and share of the throughput); each outcome's text starts
/// with the request's name.
pub fn check_request(
    rec: &RunRecord,
    req: &redline_stats::RequestStats,
    thresholds: &[Threshold],
) -> Vec<Outcome> {
    let mut r = RunRecord::new(
        rec.config.clone(),
        rec.environment.clone(),
        rec.started_at.clone(),
    );
    r.latency = req.latency.clone();
    r.counters.completed = req.completed;
    r.counters.failed = req.errors;
    r.counters.non_2xx = req.bad_status;
    r.requests_per_sec = if rec.counters.completed > 0 {
        rec.requests_per_sec * req.completed as f64 / rec.counters.completed as f64
    } else {
        0.0
    };
    check(&r, thresholds)
        .into_iter()
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
        rec.counters.non_2xx = 2;
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
        let empty = RunRecord::new(rec.config.clone(), Environment::default(), "t".into());
        assert!(
            !check(&empty, &ts[..1])[0].pass,
            "no responses: a latency bound fails"
        );
    }
}
