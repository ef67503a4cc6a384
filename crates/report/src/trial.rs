//! A trial's verdict (`redline trial`): interleaved rounds of state A
//! (before) and state B (after) on one server, each round one sample, and
//! per metric the change with a confidence interval from the rounds.
//!
//! The interval is Welch's (unequal variances, Welch–Satterthwaite degrees
//! of freedom), found by inverting [`crate::compare::welch`] (the shifts of
//! B by δ it does not reject), so there is one Welch test in the crate.
//! The intervals are simultaneous: each is at 1 − 0.05/k for the k metrics
//! tested (Bonferroni), so an A/A trial (both states the same) calls any
//! metric different in at most about 5 % of trials, not 5 % per metric. A
//! change is *better* or *worse* when its interval excludes zero and it is
//! at least [`crate::compare::MIN_EFFECT_PCT`] %; otherwise *no clear
//! difference*.
//!
//! The record ([`TrialRecord`]) keeps every round's numbers (and its saved
//! run id), so `show`, `compare` and `report` redraw a trial from the
//! history without its runs; the HTML shows each round in order, so drift
//! over the trial is visible.

use crate::compare::{welch, MIN_EFFECT_PCT};
use redline_stats::{RunRecord, ServerConfig};
use serde::{Deserialize, Serialize};

mod html;
mod text;
pub use html::html;
pub use text::{directive_diff, text};

/// The `format` of a trial record.
pub const FORMAT: &str = "redline-trial";
/// Its version.
pub const VERSION: u32 = 1;
/// Family-wise confidence of the verdict (two-sided).
pub const LEVEL: f64 = 0.95;

/// A state of the server: A (before) or B (after).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// Before: `--before`.
    A,
    /// After: `--after` (or the tune fix).
    B,
}

impl State {
    /// `A` or `B`.
    pub fn name(self) -> &'static str {
        match self {
            State::A => "A",
            State::B => "B",
        }
    }
}

/// The state of round `i` (0-based) of an interleaved trial: A B B A A B B A …
pub fn state_of(i: usize) -> State {
    if matches!(i % 4, 0 | 3) {
        State::A
    } else {
        State::B
    }
}

/// One round: a normal run in one state, reduced to the numbers the verdict tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// 1-based, in the order run.
    pub n: u32,
    /// A or B.
    pub state: State,
    /// Its saved run (`redline show ID`), when saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// Its length, seconds.
    pub duration_s: f64,
    /// Completed responses.
    pub completed: u64,
    /// Completed responses per second.
    pub requests_per_sec: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// p99 latency, µs.
    pub p99_us: f64,
    /// Failed requests and responses outside 2xx, per finished request.
    pub error_share: f64,
    /// Bytes received per response (headers and body as on the wire).
    pub bytes_per_response: f64,
    /// Peak PSS of the watched server, KiB (`--watch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_memory_kib: Option<f64>,
    /// The watched server's CPU time per completed request, ms (`--watch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_ms_per_request: Option<f64>,
    /// The knee of a staged round (`--stages`): the highest level that scaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<f64>,
    /// Stopped early (Ctrl-C, --abort-on-fail).
    #[serde(default)]
    pub interrupted: bool,
    /// The client may have been the limit.
    #[serde(default)]
    pub client_limited: bool,
}

impl Round {
    /// The round's numbers from its run record.
    pub fn of(n: u32, state: State, run_id: Option<i64>, r: &RunRecord) -> Round {
        let c = &r.counters;
        let finished = (c.completed + c.failed) as f64;
        let hosts = r
            .server_watch
            .as_ref()
            .map(|w| &w.hosts[..])
            .unwrap_or(&[])
            .iter()
            .filter(|h| h.summary.samples > 0)
            .collect::<Vec<_>>();
        let watched = !hosts.is_empty();
        let mem: f64 = hosts.iter().map(|h| h.summary.pss_kib.peak).sum();
        let cpu_s: f64 = hosts
            .iter()
            .map(|h| h.summary.cpu_percent.mean / 100.0 * r.duration_s)
            .sum();
        Round {
            n,
            state,
            run_id,
            started_at: r.started_at.clone(),
            duration_s: r.duration_s,
            completed: c.completed,
            requests_per_sec: r.requests_per_sec,
            p50_us: r.latency.percentile(50.0) as f64,
            p99_us: r.latency.percentile(99.0) as f64,
            error_share: if finished > 0.0 {
                (c.failed + c.non_2xx) as f64 / finished
            } else {
                0.0
            },
            bytes_per_response: if c.completed > 0 {
                c.bytes_read as f64 / c.completed as f64
            } else {
                0.0
            },
            server_memory_kib: watched.then_some(mem),
            server_cpu_ms_per_request: (watched && c.completed > 0)
                .then(|| cpu_s * 1000.0 / c.completed as f64),
            knee: r.knee.as_ref().map(|k| k.level),
            interrupted: r.interrupted,
            client_limited: r.client_limited,
        }
    }
}

/// How a metric's values are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Per second.
    PerSec,
    /// Microseconds.
    Micros,
    /// A share shown in %.
    Share,
    /// Bytes.
    Bytes,
    /// KiB.
    Kib,
    /// Milliseconds.
    Millis,
    /// A load level (connections or req/s).
    Level,
}

/// What one metric is: its name, unit, which way is better, and its value in a round.
struct Metric {
    name: &'static str,
    unit: Unit,
    higher_is_better: bool,
    value: fn(&Round) -> Option<f64>,
}

const METRICS: [Metric; 8] = [
    Metric {
        name: "Requests/sec",
        unit: Unit::PerSec,
        higher_is_better: true,
        value: |r| Some(r.requests_per_sec),
    },
    Metric {
        name: "Latency p50",
        unit: Unit::Micros,
        higher_is_better: false,
        value: |r| (r.completed > 0).then_some(r.p50_us),
    },
    Metric {
        name: "Latency p99",
        unit: Unit::Micros,
        higher_is_better: false,
        value: |r| (r.completed > 0).then_some(r.p99_us),
    },
    Metric {
        name: "Errors",
        unit: Unit::Share,
        higher_is_better: false,
        value: |r| Some(r.error_share),
    },
    Metric {
        name: "Bytes/response",
        unit: Unit::Bytes,
        higher_is_better: false,
        value: |r| (r.completed > 0).then_some(r.bytes_per_response),
    },
    Metric {
        name: "Server memory (peak PSS)",
        unit: Unit::Kib,
        higher_is_better: false,
        value: |r| r.server_memory_kib,
    },
    Metric {
        name: "Server CPU per request",
        unit: Unit::Millis,
        higher_is_better: false,
        value: |r| r.server_cpu_ms_per_request,
    },
    Metric {
        name: "Knee",
        unit: Unit::Level,
        higher_is_better: true,
        value: |r| r.knee,
    },
];

/// The outcome for one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    /// B is better than A.
    Better,
    /// B is worse than A.
    Worse,
    /// The interval crosses zero, or the change is under the minimum effect.
    NoClearDifference,
    /// Fewer than 2 rounds with a value on a side.
    NotTested,
}

impl Call {
    /// The words in the report.
    pub fn words(self) -> &'static str {
        match self {
            Call::Better => "better",
            Call::Worse => "worse",
            Call::NoClearDifference => "no clear difference",
            Call::NotTested => "not tested",
        }
    }
}

/// One metric's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricVerdict {
    /// What is compared.
    pub metric: String,
    /// How its values are shown.
    pub unit: Unit,
    /// Higher values are better.
    pub higher_is_better: bool,
    /// Mean over the rounds of A.
    pub a: f64,
    /// Mean over the rounds of B.
    pub b: f64,
    /// Rounds with a value: (A, B).
    pub rounds: (usize, usize),
    /// B − A.
    pub diff: f64,
    /// The interval of B − A: (low, high).
    pub ci: (f64, f64),
    /// (B − A) / A in %, when A is not zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_pct: Option<f64>,
    /// The interval in % of A, when A is not zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_pct: Option<(f64, f64)>,
    /// The interval's own confidence (1 − 0.05/k).
    pub level: f64,
    /// The call.
    pub call: Call,
}

/// The verdict of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// One per metric with values on both sides.
    pub metrics: Vec<MetricVerdict>,
    /// Metrics tested (the Bonferroni k).
    pub tested: usize,
    /// Some metric is better or worse.
    pub significant: bool,
}

fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        0.0
    } else {
        x.iter().sum::<f64>() / x.len() as f64
    }
}

/// The Welch interval of mean(B) − mean(A) at `level`: the shifts δ for
/// which Welch's test of (A, B − δ) does not reject at 1 − `level`. `None`
/// with fewer than 2 values on a side.
pub fn welch_interval(a: &[f64], b: &[f64], level: f64) -> Option<(f64, f64)> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let d = mean(b) - mean(a);
    let constant = |x: &[f64]| x.iter().all(|v| *v == x[0]);
    if constant(a) && constant(b) {
        // Neither side varies: only d itself is not rejected.
        return Some((d, d));
    }
    let alpha = 1.0 - level;
    // Welch's p for B shifted by d + w: 1 at w = 0, falling as |w| grows.
    let rejects = |w: f64| {
        let shifted: Vec<f64> = b.iter().map(|v| v - d - w).collect();
        welch(a, &shifted).is_none_or(|p| p < alpha)
    };
    let spread = a
        .iter()
        .chain(b)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        });
    let mut hi = (spread.1 - spread.0).abs().max(1e-12);
    for _ in 0..60 {
        if rejects(hi) {
            break;
        }
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..80 {
        let mid = (lo + hi) / 2.0;
        if rejects(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some((d - hi, d + hi))
}

/// The verdict over the rounds (interrupted rounds left out).
pub fn verdict(rounds: &[Round]) -> Verdict {
    let used: Vec<&Round> = rounds.iter().filter(|r| !r.interrupted).collect();
    let values = |m: &Metric, s: State| -> Vec<f64> {
        used.iter()
            .filter(|r| r.state == s)
            .filter_map(|r| (m.value)(r))
            .filter(|v| v.is_finite())
            .collect()
    };
    let testable: Vec<(&Metric, Vec<f64>, Vec<f64>)> = METRICS
        .iter()
        .map(|m| (m, values(m, State::A), values(m, State::B)))
        .filter(|(_, a, b)| !a.is_empty() && !b.is_empty())
        .collect();
    let tested = testable
        .iter()
        .filter(|(_, a, b)| a.len() >= 2 && b.len() >= 2)
        .count()
        .max(1);
    let level = 1.0 - (1.0 - LEVEL) / tested as f64;
    let mut metrics = Vec::new();
    for (m, a, b) in testable {
        let (ma, mb) = (mean(&a), mean(&b));
        let diff = mb - ma;
        let ci = welch_interval(&a, &b, level);
        let pct = |v: f64| (ma.abs() > f64::EPSILON).then(|| v / ma.abs() * 100.0);
        let change_pct = pct(diff).or((diff == 0.0).then_some(0.0));
        let call = match ci {
            None => Call::NotTested,
            Some((lo, hi)) => {
                let excludes_zero = lo > 0.0 || hi < 0.0;
                let big = change_pct.is_none_or(|c| c.abs() >= MIN_EFFECT_PCT);
                if !excludes_zero || !big {
                    Call::NoClearDifference
                } else if (diff > 0.0) == m.higher_is_better {
                    Call::Better
                } else {
                    Call::Worse
                }
            }
        };
        let ci = ci.unwrap_or((diff, diff));
        metrics.push(MetricVerdict {
            metric: m.name.into(),
            unit: m.unit,
            higher_is_better: m.higher_is_better,
            a: ma,
            b: mb,
            rounds: (a.len(), b.len()),
            diff,
            ci,
            change_pct,
            ci_pct: pct(ci.0).zip(pct(ci.1)),
            level,
            call,
        });
    }
    Verdict {
        significant: metrics
            .iter()
            .any(|m| matches!(m.call, Call::Better | Call::Worse)),
        metrics,
        tested,
    }
}

/// Where state B came from with `--from-tune`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FromTune {
    /// The finding's id (its code, with `:LINE` when given).
    pub id: String,
    /// The finding in words.
    pub message: String,
    /// The file the fix changes.
    pub file: String,
    /// The fixed copy written.
    pub fixed_copy: String,
    /// What the server's own config test said of the fixed copy.
    pub config_test: String,
}

/// A trial as saved in the history and printed by `-o json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// When the first round started (RFC 3339).
    pub started_at: String,
    /// Wall time of the whole trial, switches and settling included, seconds.
    pub duration_s: f64,
    /// The target.
    pub url: String,
    /// The method.
    pub method: String,
    /// Every round's load, in words.
    pub load: String,
    /// The trial's label; its rounds are saved as `LABEL:A` and `LABEL:B`.
    pub label: String,
    /// The command that puts the server in state A.
    pub before: String,
    /// The command that puts the server in state B.
    pub after: String,
    /// Wait after each switch before the server is probed, seconds.
    pub settle_s: f64,
    /// State B from a tune finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_tune: Option<FromTune>,
    /// The directives recorded in A's rounds (`--server-config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_a: Option<ServerConfig>,
    /// The directives recorded in B's rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_b: Option<ServerConfig>,
    /// The rounds, in the order run.
    pub rounds: Vec<Round>,
    /// Stopped before every round ran (Ctrl-C or a failure).
    pub interrupted: bool,
    /// Why it stopped early, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Whether the server was put back in state A at the end.
    pub restored: bool,
    /// The verdict over the rounds.
    pub verdict: Verdict,
}

impl TrialRecord {
    /// Reads a trial record (JSON); Err names what is wrong.
    pub fn from_json(s: &str) -> Result<TrialRecord, String> {
        let t: TrialRecord =
            serde_json::from_str(s).map_err(|e| format!("not a trial record: {e}"))?;
        if t.format != FORMAT {
            return Err(format!("not a trial record (format {:?})", t.format));
        }
        if t.version > VERSION {
            return Err(format!(
                "trial record version {} is newer than this redline understands ({VERSION})",
                t.version
            ));
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests;
