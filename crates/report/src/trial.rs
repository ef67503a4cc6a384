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
use crate::{bytes, count, dur_us};
use redline_stats::{RunRecord, ServerConfig};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

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

fn show(unit: Unit, v: f64) -> String {
    match unit {
        Unit::PerSec => format!("{v:.1}"),
        Unit::Micros => dur_us(v),
        Unit::Share => format!("{:.2}%", v * 100.0),
        Unit::Bytes => bytes(v),
        Unit::Kib => bytes(v * 1024.0),
        Unit::Millis => format!("{v:.3}ms"),
        Unit::Level => format!("{v:.0}"),
    }
}

fn show_signed(unit: Unit, v: f64) -> String {
    let s = show(unit, v.abs());
    if v < 0.0 {
        format!("-{s}")
    } else {
        format!("+{s}")
    }
}

/// The change with its interval, in % of A when A is not zero.
fn change_words(m: &MetricVerdict) -> String {
    match (m.change_pct, m.ci_pct) {
        (Some(c), Some((lo, hi))) if m.call != Call::NotTested => {
            format!("{c:+.1}% [{lo:+.1}%, {hi:+.1}%]")
        }
        _ if m.call != Call::NotTested => format!(
            "{} [{}, {}]",
            show_signed(m.unit, m.diff),
            show_signed(m.unit, m.ci.0),
            show_signed(m.unit, m.ci.1)
        ),
        _ => "-".into(),
    }
}

/// The directives that changed from A to B with the effect on p99 and
/// req/s, as `compare` prints them (`compare::config_changes`, given the
/// recorded configurations and this verdict); empty when neither side
/// recorded one.
pub fn directive_diff(t: &TrialRecord) -> String {
    use crate::compare::{Comparison, Row, Unit as CUnit, Verdict as CVerdict};
    if t.config_a.is_none() && t.config_b.is_none() {
        return String::new();
    }
    let side = |c: &Option<ServerConfig>| {
        let load = redline_stats::LoadModel::Closed {
            connections: 1,
            requests: None,
            duration_s: None,
        };
        let mut r = RunRecord::new(
            redline_stats::RunConfig::get(&t.url, load),
            redline_stats::Environment::default(),
            t.started_at.clone(),
        );
        r.server_config = c.clone();
        r
    };
    let rows = t
        .verdict
        .metrics
        .iter()
        .map(|m| Row {
            metric: match m.metric.as_str() {
                "Requests/sec" => "Requests/sec",
                "Latency p99" => "Latency p99",
                _ => "",
            },
            unit: CUnit::PerSec,
            a: m.a,
            b: m.b,
            change_pct: m.change_pct,
            verdict: match m.call {
                Call::Better => CVerdict::Better,
                Call::Worse => CVerdict::Worse,
                Call::NoClearDifference => CVerdict::NoChange,
                Call::NotTested => CVerdict::NotTested,
            },
            confidence: None,
            test: String::new(),
        })
        .collect();
    let c = Comparison {
        rows,
        warnings: Vec::new(),
        runs: (0, 0),
    };
    crate::compare::config_changes(&c, &side(&t.config_a), &side(&t.config_b))
}

/// The text report: what was switched, the directive diff, the verdict per
/// metric, then every round.
pub fn text(t: &TrialRecord) -> String {
    let clean = crate::escape::clean;
    let mut o = String::new();
    let (na, nb) = (
        t.rounds.iter().filter(|r| r.state == State::A).count(),
        t.rounds.iter().filter(|r| r.state == State::B).count(),
    );
    let _ = writeln!(
        o,
        "Trial {}: {} {} — {}",
        clean(&t.label),
        clean(&t.method),
        clean(&t.url),
        clean(&t.load)
    );
    let _ = writeln!(
        o,
        "  {na} rounds of A and {nb} of B, interleaved (A B B A …), settle {:.1}s after each switch, {:.0}s in all",
        t.settle_s, t.duration_s
    );
    let _ = writeln!(o, "  A (before): {}", clean(&t.before));
    let _ = writeln!(o, "  B (after):  {}", clean(&t.after));
    if let Some(f) = &t.from_tune {
        let _ = writeln!(
            o,
            "  from tune finding {}: {}\n  fixed copy {} ({})",
            clean(&f.id),
            clean(&f.message),
            clean(&f.fixed_copy),
            clean(&f.config_test)
        );
    }
    if let Some(s) = &t.stopped {
        let _ = writeln!(o, "  stopped early: {}", clean(s));
    }
    if !t.restored {
        o.push_str("  WARNING: the server could not be put back in state A: check it\n");
    }
    o.push('\n');
    o.push_str(&directive_diff(t));
    let v = &t.verdict;
    let level = v.metrics.first().map_or(LEVEL, |m| m.level);
    let _ = writeln!(
        o,
        "Verdict (B vs A; {:.0}% intervals from the rounds, {:.1}% each over {} metrics):",
        LEVEL * 100.0,
        level * 100.0,
        v.tested
    );
    let _ = writeln!(
        o,
        "  {:<26}{:>12}{:>12}  {:<30}verdict",
        "metric", "A", "B", "change [interval]"
    );
    for m in &v.metrics {
        let _ = writeln!(
            o,
            "  {:<26}{:>12}{:>12}  {:<30}{}",
            m.metric,
            show(m.unit, m.a),
            show(m.unit, m.b),
            change_words(m),
            m.call.words()
        );
    }
    let better: Vec<&str> = v
        .metrics
        .iter()
        .filter(|m| m.call == Call::Better)
        .map(|m| m.metric.as_str())
        .collect();
    let worse: Vec<&str> = v
        .metrics
        .iter()
        .filter(|m| m.call == Call::Worse)
        .map(|m| m.metric.as_str())
        .collect();
    o.push('\n');
    if !v.significant {
        o.push_str("In short: no clear difference between A and B.\n");
    } else {
        let mut parts = Vec::new();
        if !better.is_empty() {
            parts.push(format!("better on {}", better.join(", ")));
        }
        if !worse.is_empty() {
            parts.push(format!("worse on {}", worse.join(", ")));
        }
        let _ = writeln!(o, "In short: B is {}.", parts.join("; "));
    }
    let _ = writeln!(
        o,
        "\nRounds:\n  {:>3}  {:<5}{:>6}  {:>12}{:>10}{:>10}{:>9}{:>12}",
        "#", "state", "run", "req/s", "p50", "p99", "errors", "bytes/resp"
    );
    for r in &t.rounds {
        let _ = writeln!(
            o,
            "  {:>3}  {:<5}{:>6}  {:>12.1}{:>10}{:>10}{:>9}{:>12}{}",
            r.n,
            r.state.name(),
            r.run_id.map_or("-".into(), |i| i.to_string()),
            r.requests_per_sec,
            dur_us(r.p50_us),
            dur_us(r.p99_us),
            format!("{:.2}%", r.error_share * 100.0),
            bytes(r.bytes_per_response),
            if r.interrupted {
                "  (interrupted: left out)"
            } else if r.client_limited {
                "  (client-limited)"
            } else {
                ""
            }
        );
    }
    let done: u64 = t.rounds.iter().map(|r| r.completed).sum();
    let _ = writeln!(o, "  {} responses in all", count(done));
    o
}

/// Dots of one metric per round, in order (A and B in their colours), with
/// each state's mean as a line: drift over the trial shows as a slope.
fn round_chart(t: &TrialRecord, m: &Metric) -> String {
    const W: f64 = 640.0;
    const H: f64 = 180.0;
    const ML: f64 = 70.0;
    const MB: f64 = 26.0;
    const MT: f64 = 10.0;
    let pts: Vec<(u32, State, f64)> = t
        .rounds
        .iter()
        .filter_map(|r| (m.value)(r).map(|v| (r.n, r.state, v)))
        .filter(|p| p.2.is_finite())
        .collect();
    if pts.is_empty() {
        return String::new();
    }
    let top = pts.iter().map(|p| p.2).fold(0.0, f64::max).max(1e-9) * 1.1;
    let n = t.rounds.len().max(2) as f64;
    let x = |i: u32| ML + (i as f64 - 0.5) / n * (W - ML - 10.0);
    let y = |v: f64| MT + (1.0 - v / top) * (H - MT - MB);
    let esc = crate::html::esc;
    let mut s = format!(
        "<figure><figcaption>{} by round</figcaption><svg class=\"chart trial\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{} by round\" data-points=\"{}\">",
        esc(m.name),
        esc(m.name),
        pts.len()
    );
    let _ = write!(
        s,
        "<rect x=\"{ML}\" y=\"{MT}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#adb5bd\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"11\">{}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"11\">0</text>",
        W - ML - 10.0,
        H - MT - MB,
        ML - 4.0,
        MT + 10.0,
        esc(&show(m.unit, top)),
        ML - 4.0,
        H - MB
    );
    for (state, color) in [(State::A, "#1c5fb8"), (State::B, "#c2255c")] {
        let v: Vec<f64> = pts.iter().filter(|p| p.1 == state).map(|p| p.2).collect();
        if !v.is_empty() {
            let yy = y(mean(&v));
            let _ = write!(
                s,
                "<line x1=\"{ML}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"{color}\" stroke-dasharray=\"5 4\"><title>mean of {}: {}</title></line>",
                W - 10.0,
                state.name(),
                esc(&show(m.unit, mean(&v)))
            );
        }
    }
    for (i, state, v) in &pts {
        let color = if *state == State::A {
            "#1c5fb8"
        } else {
            "#c2255c"
        };
        let _ = write!(
            s,
            "<circle class=\"round\" data-state=\"{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{color}\"><title>round {i} ({}): {}</title></circle>\
             <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\">{i}{}</text>",
            state.name(),
            x(*i),
            y(*v),
            state.name(),
            esc(&show(m.unit, *v)),
            x(*i),
            H - 8.0,
            state.name()
        );
    }
    s.push_str("</svg></figure>\n");
    s
}

/// A self-contained HTML page of the trial: the verdict table, the directive
/// diff, and each metric by round (every round drawn, in order).
pub fn html(t: &TrialRecord) -> String {
    let esc = crate::html::esc;
    let mut s = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    let title = format!("redline trial {}", t.label);
    let _ = writeln!(
        s,
        "<title>{}</title><style>body{{font:15px/1.45 system-ui,sans-serif;max-width:1000px;margin:24px auto;padding:0 16px}}\
         table{{border-collapse:collapse}}th,td{{padding:3px 12px 3px 0;text-align:left}}td.n{{text-align:right}}\
         .better{{color:#2b8a3e;font-weight:600}}.worse{{color:#c92a2a;font-weight:600}}figure{{margin:8px 0}}</style></head><body>",
        esc(&title)
    );
    let _ = writeln!(s, "<h1>{}</h1>", esc(&title));
    let _ = writeln!(
        s,
        "<p>{} {} — {}</p><p>A (before): <code>{}</code><br>B (after): <code>{}</code></p>",
        esc(&t.method),
        esc(&t.url),
        esc(&t.load),
        esc(&t.before),
        esc(&t.after)
    );
    if let Some(st) = &t.stopped {
        let _ = writeln!(s, "<p class=\"worse\">Stopped early: {}</p>", esc(st));
    }
    let diff = directive_diff(t);
    if !diff.is_empty() {
        let _ = writeln!(
            s,
            "<h2>Configuration</h2><pre>{}</pre>",
            esc(diff.trim_end())
        );
    }
    let _ = writeln!(
        s,
        "<h2>Verdict</h2><table class=\"verdict\"><tr><th>metric</th><th>A</th><th>B</th><th>change [interval]</th><th>verdict</th></tr>"
    );
    for m in &t.verdict.metrics {
        let class = match m.call {
            Call::Better => "better",
            Call::Worse => "worse",
            _ => "",
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"{class}\">{}</td></tr>",
            esc(&m.metric),
            esc(&show(m.unit, m.a)),
            esc(&show(m.unit, m.b)),
            esc(&change_words(m)),
            m.call.words()
        );
    }
    s.push_str("</table>\n<h2>Every round</h2>\n<p>Blue: A, red: B; the dashed lines are each state's mean. A slope across rounds of one state is drift, which the interleaving (A B B A …) spreads over both states.</p>\n");
    for m in &METRICS {
        s.push_str(&round_chart(t, m));
    }
    s.push_str("<table class=\"rounds\"><tr><th>#</th><th>state</th><th>run</th><th>started</th><th>req/s</th><th>p50</th><th>p99</th><th>errors</th></tr>\n");
    for r in &t.rounds {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.2}%</td></tr>",
            r.n,
            r.state.name(),
            r.run_id.map_or("-".into(), |i| i.to_string()),
            esc(&r.started_at),
            r.requests_per_sec,
            dur_us(r.p50_us),
            dur_us(r.p99_us),
            r.error_share * 100.0
        );
    }
    s.push_str("</table></body></html>\n");
    s
}

#[cfg(test)]
mod tests;
