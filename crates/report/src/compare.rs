//! Before/after comparison of runs with a verdict from a real test, honest
//! about what one run can tell.
//!
//! **Two single runs** ([`compare`]): a run's seconds are neither independent
//! nor a measure of run-to-run noise (two identical back-to-back runs on a busy
//! host differ by more than their seconds vary), so:
//! - Throughput (requests/s, transfer rate) and max latency: a t-test over the
//!   per-second series (complete seconds only) in which each run's seconds
//!   count as its *effective* sample size n·(1−r)/(1+r) (r: the lag-1
//!   autocorrelation of the per-second values, bias-corrected, at least
//!   [`SINGLE_R_FLOOR`], at most 0.95), with n_eff(A) + n_eff(B) − 2 degrees of
//!   freedom.
//! - Latency (mean, p50, p90, p99): a bootstrap of the statistic over whole
//!   seconds' histograms (runs of at least [`MIN_SECONDS`] + 2 seconds), its
//!   z (against the replicates' spread) shrunk by sqrt(n_eff / n) with the
//!   per-second statistic's r, and the t-test above on the statistic's
//!   per-second values: the weaker decides. Shorter runs fall back to an
//!   i.i.d. bootstrap over requests.
//! - Errors: a two-proportion z-test, its variance inflated by the
//!   over-dispersion of the per-second error counts.
//! - A *better*/*worse* claim also needs a change of at least
//!   [`SINGLE_MIN_EFFECT_PCT`] % and of at least the noisier run's per-second
//!   coefficient of variation of that metric, doubled (a run's level moves
//!   by about that much between identical runs when its seconds drift
//!   together). Latency of runs too short for a per-second estimate (fewer
//!   than [`MIN_SECONDS`] + 2 complete seconds) is claimed only for a 2x
//!   change of mean, p50 or p90 and never for p99: on a shared host two
//!   identical 2-second runs differ by 50 % in p99. Otherwise the verdict is
//!   *no clear difference (single runs: use --repeat)*.
//!
//! **Repeated runs** ([`compare_runs`], `run --repeat N` saved under two
//! labels): each run is one sample (its req/s, mean, p50, p90, p99, max, error
//! share, transfer rate) and a Welch t-test over the runs decides, so run-to-run
//! noise is measured, not assumed; a verdict needs 95 % and [`MIN_EFFECT_PCT`] %.
//!
//! A change is called *better* or *worse* when the test is significant at 95 %
//! and large enough; repeated runs otherwise say *no significant change*.

use crate::{bytes, count, dur_us};
use redline_stats::{Hist, RunRecord};
use std::fmt::Write as _;

mod bootstrap;
mod significance;
mod words;
use bootstrap::{block_bootstrap, bootstrap_z, iid_bootstrap, Stat};
pub use significance::{cv, lag1, mann_whitney, n_eff, normal_cdf, student_p, welch};
use significance::{eff_welch, mean_var, p_of_z, Noise};
use words::rate;
pub use words::show;
pub use words::{config_changes, knees, text};

/// Fewest complete seconds per run for the per-second tests.
pub const MIN_SECONDS: usize = 3;
/// Smallest relative change (in %) that gets a better/worse verdict from
/// repeated runs (and page loads, whose samples are whole loads).
pub const MIN_EFFECT_PCT: f64 = 1.0;
/// Smallest relative change (in %) that gets a better/worse verdict from two
/// single runs (more, when a run's seconds vary more than this).
pub const SINGLE_MIN_EFFECT_PCT: f64 = 5.0;
/// Largest lag-1 autocorrelation used for the effective sample size.
const MAX_R: f64 = 0.95;
/// The least lag-1 autocorrelation two single runs' seconds are taken to
/// have: on a shared host the noise drifts over seconds, and a short series
/// cannot show it (10 seconds of an AR(1) process with r = 0.8 estimate r at
/// about 0.4 even after the bias correction), so n_eff is at most n/3.
pub const SINGLE_R_FLOOR: f64 = 0.5;
/// Confidence needed for a verdict (two-sided).
pub const LEVEL: f64 = 0.95;
const RESAMPLES: usize = 400;
const IID_SAMPLE: usize = 4000;

/// The outcome for one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// B is better than A.
    Better,
    /// B is worse than A.
    Worse,
    /// No change the test can tell from noise (or smaller than the minimum effect).
    NoChange,
    /// Two single runs: no difference the runs can show beyond run-to-run noise.
    Unclear,
    /// Too little data to test (e.g. runs shorter than 3 s for per-second tests).
    NotTested,
}

impl Verdict {
    /// The words in the report.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoChange => "no significant change",
            Verdict::Unclear => "no clear difference (single runs: use --repeat)",
            Verdict::NotTested => "not tested",
        }
    }
}

/// How a metric's values are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Per second.
    PerSec,
    /// Microseconds.
    Micros,
    /// Bytes per second.
    BytesPerSec,
    /// A count with a share (errors).
    Errors,
    /// A share (0–1) shown in % (errors over repeated runs).
    Share,
}

/// One line of the comparison.
#[derive(Debug, Clone)]
pub struct Row {
    /// What is compared.
    pub metric: &'static str,
    /// How to show the values.
    pub unit: Unit,
    /// A's value.
    pub a: f64,
    /// B's value.
    pub b: f64,
    /// (B − A) / A in %, when A is not zero.
    pub change_pct: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// Two-sided confidence that there is a change (1 − p), when tested.
    pub confidence: Option<f64>,
    /// The test used, in words.
    pub test: String,
}

/// A comparison of two runs, or of two groups of repeated runs.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// One row per metric.
    pub rows: Vec<Row>,
    /// Why the runs may not be comparable.
    pub warnings: Vec<String>,
    /// Runs on each side: (1, 1) for two single runs.
    pub runs: (usize, usize),
}

/// SplitMix64: a small, seeded generator, so a comparison prints the same every time.
use redline_stats::rng::SplitMix64 as Rng;

fn change(a: f64, b: f64) -> Option<f64> {
    if a.abs() > f64::EPSILON {
        Some((b - a) / a * 100.0)
    } else if b.abs() <= f64::EPSILON {
        Some(0.0)
    } else {
        None
    }
}

/// The verdict: a claim needs `LEVEL` confidence and a change of at least
/// `min_effect` %; without one, two single runs say [`Verdict::Unclear`],
/// repeated runs [`Verdict::NoChange`].
fn verdict(
    conf: Option<f64>,
    change_pct: Option<f64>,
    (a, b): (f64, f64),
    higher_is_better: bool,
    min_effect: f64,
    single: bool,
) -> Verdict {
    let Some(conf) = conf else {
        return Verdict::NotTested;
    };
    let big = change_pct.map(|c| c.abs() >= min_effect).unwrap_or(true);
    if conf < LEVEL || !big || a == b {
        return if single {
            Verdict::Unclear
        } else {
            Verdict::NoChange
        };
    }
    if (b > a) == higher_is_better {
        Verdict::Better
    } else {
        Verdict::Worse
    }
}

/// Complete seconds of a run (the partial last second is left out).
fn full_seconds(r: &RunRecord) -> Vec<&redline_stats::SeriesPoint> {
    r.series
        .iter()
        .filter(|p| (p.t as f64 + 1.0) <= r.duration_s + 1e-3)
        .collect()
}

fn per_sec_row(
    metric: &'static str,
    unit: Unit,
    a: (&RunRecord, f64),
    b: (&RunRecord, f64),
    f: impl Fn(&redline_stats::SeriesPoint) -> f64,
    higher_is_better: bool,
) -> Row {
    let xa: Vec<f64> = full_seconds(a.0).into_iter().map(&f).collect();
    let xb: Vec<f64> = full_seconds(b.0).into_iter().map(&f).collect();
    let noise = Noise::of(&xa, &xb);
    // Seconds are not independent: the test counts n_eff of them.
    let conf = eff_welch(&xa, &xb, noise.n_eff);
    let ch = change(a.1, b.1);
    Row {
        metric,
        unit,
        a: a.1,
        b: b.1,
        change_pct: ch,
        verdict: verdict(
            conf,
            ch,
            (a.1, b.1),
            higher_is_better,
            noise.min_effect,
            true,
        ),
        confidence: conf,
        test: match conf {
            Some(_) => format!(
                "Welch t over {}+{} s ({})",
                xa.len(),
                xb.len(),
                noise.words()
            ),
            None => format!("needs ≥{MIN_SECONDS} full seconds per run"),
        },
    }
}

/// The latency statistics compared, with their row names.
const LAT_STATS: [(Stat, &str); 4] = [
    (Stat::Mean, "Latency mean"),
    (Stat::Pct(50.0), "Latency p50"),
    (Stat::Pct(90.0), "Latency p90"),
    (Stat::Pct(99.0), "Latency p99"),
];

fn lat_value(h: &Hist, st: Stat) -> f64 {
    match st {
        Stat::Mean => h.mean(),
        Stat::Pct(p) => h.percentile(p) as f64,
    }
}

/// Compares run B (after) with run A (before), two single runs: see the
/// module text for how the verdicts account for run-to-run noise.
pub fn compare(a: &RunRecord, b: &RunRecord) -> Comparison {
    let mut rows = Vec::new();
    rows.push(per_sec_row(
        "Requests/sec",
        Unit::PerSec,
        (a, a.requests_per_sec),
        (b, b.requests_per_sec),
        |p| p.requests as f64,
        true,
    ));

    // Latency: bootstrap, per-second blocks when both runs are long enough.
    let stats: Vec<Stat> = LAT_STATS.iter().map(|x| x.0).collect();
    let secs = |r: &RunRecord| -> Vec<Hist> {
        full_seconds(r)
            .into_iter()
            .map(|p| p.hist.to_hist())
            .filter(|h| !h.is_empty())
            .collect()
    };
    let (ha, hb) = (secs(a), secs(b));
    let mut rng = Rng(0x005E_ED0F_2ED1_14E5);
    let blocks = ha.len() >= MIN_SECONDS + 2 && hb.len() >= MIN_SECONDS + 2;
    let (reps_a, reps_b, test) = if a.latency.is_empty() || b.latency.is_empty() {
        (
            Vec::new(),
            Vec::new(),
            "no latencies on one side".to_string(),
        )
    } else if blocks {
        (
            block_bootstrap(&ha, &stats, &mut rng),
            block_bootstrap(&hb, &stats, &mut rng),
            format!("bootstrap over {}+{} one-second blocks", ha.len(), hb.len()),
        )
    } else {
        (
            iid_bootstrap(&a.latency, &stats, &mut rng),
            iid_bootstrap(&b.latency, &stats, &mut rng),
            format!(
                "bootstrap over requests (runs under {} s: claims need 2x, none for p99)",
                MIN_SECONDS + 2
            ),
        )
    };
    for (k, (st, name)) in LAT_STATS.iter().enumerate() {
        let (va, vb) = (lat_value(&a.latency, *st), lat_value(&b.latency, *st));
        let ch = change(va, vb);
        let z = if reps_a.is_empty() {
            None
        } else {
            Some(bootstrap_z(&reps_a[k], &reps_b[k], vb - va))
        };
        let (conf, min_effect, test) = if blocks {
            // The statistic's own per-second series: how much it drifts and
            // how much one second tells about the next.
            let per_sec =
                |hs: &[Hist]| -> Vec<f64> { hs.iter().map(|h| lat_value(h, *st)).collect() };
            let (xa, xb) = (per_sec(&ha), per_sec(&hb));
            let noise = Noise::of(&xa, &xb);
            // The bootstrap's z over whole seconds, shrunk to n_eff, and the
            // t-test of the per-second values with n_eff each: the weaker
            // (on a busy host 6-second runs of one nginx had 5 of 20 pairs
            // claimed by the bootstrap alone).
            let conf = z.map(|z| {
                let boot = 1.0 - p_of_z(z * noise.shrink);
                eff_welch(&xa, &xb, noise.n_eff).map_or(boot, |t| t.min(boot))
            });
            (
                conf,
                noise.min_effect,
                format!("{test} ({})", noise.words()),
            )
        } else {
            // Too short to see the run's own noise: a claim only for a 2x
            // change of the bulk (B twice A: +100 %; half: -50 %), none for p99.
            let min_effect = match st {
                Stat::Pct(p) if *p > 90.0 => f64::INFINITY,
                _ if vb >= va => 100.0,
                _ => 50.0,
            };
            (z.map(|z| 1.0 - p_of_z(z)), min_effect, test.clone())
        };
        rows.push(Row {
            metric: name,
            unit: Unit::Micros,
            a: va,
            b: vb,
            change_pct: ch,
            verdict: verdict(conf, ch, (va, vb), false, min_effect, true),
            confidence: conf,
            test,
        });
    }
    let mut max_row = per_sec_row(
        "Latency max",
        Unit::Micros,
        (a, a.latency.max() as f64),
        (b, b.latency.max() as f64),
        |p| p.max_us as f64,
        false,
    );
    if max_row.confidence.is_some() {
        max_row.test = format!("{} (per-second maxima)", max_row.test);
    }
    rows.push(max_row);

    // Errors: failures (and refused statuses, `--expect-status`) per finished request, two-proportion
    // z-test, its variance inflated by how bursty each run's errors were
    // (variance / mean of the per-second error counts, at least 1).
    let bad = |r: &RunRecord| (r.counters.failed + r.refused_status()) as f64;
    let fin = |r: &RunRecord| (r.counters.completed + r.counters.failed) as f64;
    let dispersion = |r: &RunRecord| {
        let x: Vec<f64> = full_seconds(r)
            .into_iter()
            .map(|p| (p.errors + p.refused(&r.config.status_rule())) as f64)
            .collect();
        let (m, v) = mean_var(&x);
        if m > 0.0 {
            (v / m).max(1.0)
        } else {
            1.0
        }
    };
    let (ea, eb, na, nb) = (bad(a), bad(b), fin(a), fin(b));
    let (conf, test) = if na > 0.0 && nb > 0.0 {
        let (pa, pb) = (ea / na, eb / nb);
        let pool = (ea + eb) / (na + nb);
        let d = dispersion(a).max(dispersion(b));
        let se = (pool * (1.0 - pool) * (1.0 / na + 1.0 / nb) * d).sqrt();
        let conf = if se > 0.0 {
            1.0 - p_of_z((pb - pa).abs() / se)
        } else {
            0.0
        };
        (
            Some(conf.clamp(0.0, 1.0)),
            format!(
                "two-proportion z-test (dispersion {d:.1}, needs ±{SINGLE_MIN_EFFECT_PCT:.0}%)"
            ),
        )
    } else {
        (None, "no finished requests on one side".to_string())
    };
    let (ra, rb) = (
        if na > 0.0 { ea / na } else { 0.0 },
        if nb > 0.0 { eb / nb } else { 0.0 },
    );
    let ch = change(ra, rb);
    rows.push(Row {
        metric: "Errors",
        unit: Unit::Errors,
        a: ea,
        b: eb,
        change_pct: ch,
        verdict: verdict(conf, ch, (ra, rb), false, SINGLE_MIN_EFFECT_PCT, true),
        confidence: conf,
        test,
    });
    rows.push(per_sec_row(
        "Transfer/sec",
        Unit::BytesPerSec,
        (a, a.bytes_per_sec),
        (b, b.bytes_per_sec),
        |p| p.bytes as f64,
        true,
    ));
    Comparison {
        rows,
        warnings: comparability(a, b),
        runs: (1, 1),
    }
}

/// The per-run values [`compare_runs`] tests: (metric, unit, value, higher is better).
type RunMetric = (&'static str, Unit, fn(&RunRecord) -> f64, bool);

fn error_share(r: &RunRecord) -> f64 {
    let fin = (r.counters.completed + r.counters.failed) as f64;
    if fin > 0.0 {
        (r.counters.failed + r.refused_status()) as f64 / fin
    } else {
        0.0
    }
}

const RUN_METRICS: [RunMetric; 8] = [
    ("Requests/sec", Unit::PerSec, |r| r.requests_per_sec, true),
    ("Latency mean", Unit::Micros, |r| r.latency.mean(), false),
    (
        "Latency p50",
        Unit::Micros,
        |r| r.latency.percentile(50.0) as f64,
        false,
    ),
    (
        "Latency p90",
        Unit::Micros,
        |r| r.latency.percentile(90.0) as f64,
        false,
    ),
    (
        "Latency p99",
        Unit::Micros,
        |r| r.latency.percentile(99.0) as f64,
        false,
    ),
    (
        "Latency max",
        Unit::Micros,
        |r| r.latency.max() as f64,
        false,
    ),
    ("Errors", Unit::Share, error_share, false),
    ("Transfer/sec", Unit::BytesPerSec, |r| r.bytes_per_sec, true),
];

/// Compares two groups of repeated runs (A before, B after; each in any
/// order): every run is one sample, a Welch t-test over the runs decides, and
/// each row shows the mean over the runs. With fewer than 2 runs on a side it
/// is [`compare`] of the newest run of each side (the last of each slice).
pub fn compare_runs(a: &[RunRecord], b: &[RunRecord]) -> Comparison {
    let (Some(la), Some(lb)) = (a.last(), b.last()) else {
        return Comparison {
            rows: Vec::new(),
            warnings: vec!["no runs on one side".into()],
            runs: (a.len(), b.len()),
        };
    };
    if a.len() < 2 || b.len() < 2 {
        let mut c = compare(la, lb);
        if a.len() != b.len() {
            c.warnings.push(format!(
                "A has {} runs, B {}: compared the newest of each as single runs (repeat both sides)",
                a.len(),
                b.len()
            ));
        }
        return c;
    }
    let mut rows = Vec::new();
    for (metric, unit, f, higher_is_better) in RUN_METRICS {
        let xa: Vec<f64> = a.iter().map(f).collect();
        let xb: Vec<f64> = b.iter().map(f).collect();
        let (ma, mb) = (mean_var(&xa).0, mean_var(&xb).0);
        let conf = welch(&xa, &xb).map(|p| 1.0 - p);
        let ch = change(ma, mb);
        rows.push(Row {
            metric,
            unit,
            a: ma,
            b: mb,
            change_pct: ch,
            verdict: verdict(conf, ch, (ma, mb), higher_is_better, MIN_EFFECT_PCT, false),
            confidence: conf,
            test: format!("Welch t over {}+{} runs", xa.len(), xb.len()),
        });
    }
    let mut warnings = comparability(la, lb);
    for (side, runs) in [("A", a), ("B", b)] {
        let bad = runs
            .iter()
            .filter(|r| r.interrupted || r.client_limited)
            .count();
        if bad > 0
            && !warnings
                .iter()
                .any(|w| w.starts_with(&format!("run {side} ")))
        {
            warnings.push(format!(
                "{bad} of the {} runs of {side} were interrupted or client-limited",
                runs.len()
            ));
        }
        if runs.iter().any(|r| r.config.url != runs[0].config.url) {
            warnings.push(format!("the runs of {side} went to different URLs"));
        }
    }
    Comparison {
        rows,
        warnings,
        runs: (a.len(), b.len()),
    }
}

/// Reasons the two runs may not be comparable.
pub fn comparability(a: &RunRecord, b: &RunRecord) -> Vec<String> {
    let mut w = Vec::new();
    let (ca, cb) = (&a.config, &b.config);
    if ca.url != cb.url {
        w.push(format!("different URLs: A {} vs B {}", ca.url, cb.url));
    }
    if ca.method != cb.method || ca.body_bytes != cb.body_bytes {
        w.push(format!(
            "different requests: A {} with {} body bytes vs B {} with {}",
            ca.method, ca.body_bytes, cb.method, cb.body_bytes
        ));
    }
    if ca.load.is_open() != cb.load.is_open() {
        w.push(format!(
            "different load models: A {} vs B {} (open- and closed-loop numbers mean different things)",
            ca.load.describe(),
            cb.load.describe()
        ));
    } else if ca.load.connections() != cb.load.connections() || rate(&ca.load) != rate(&cb.load) {
        w.push(format!(
            "different load: A {} vs B {}",
            ca.load.describe(),
            cb.load.describe()
        ));
    }
    if ca.keepalive != cb.keepalive
        || ca.requests_per_conn != cb.requests_per_conn
        || ca.http_version != cb.http_version
        || ca.streams != cb.streams
    {
        w.push(
            "different connection handling (keep-alive, requests per connection or HTTP version)"
                .into(),
        );
    }
    for (name, r) in [("A", a), ("B", b)] {
        if r.client_limited {
            let codes: Vec<&str> = r.warnings.iter().map(|w| w.code.as_str()).collect();
            w.push(format!(
                "run {name} was client-limited ({}): its numbers describe the client as much as the server",
                codes.join(", ")
            ));
        }
        if r.interrupted {
            w.push(format!("run {name} was interrupted"));
        }
    }
    if !a.environment.hostname.is_empty()
        && !b.environment.hostname.is_empty()
        && a.environment.hostname != b.environment.hostname
    {
        w.push(format!(
            "made on different machines ({} vs {})",
            a.environment.hostname, b.environment.hostname
        ));
    }
    if a.merged_runs != b.merged_runs {
        w.push(format!(
            "A merges {} runs, B {}",
            a.merged_runs, b.merged_runs
        ));
    }
    w
}

#[cfg(test)]
pub(crate) mod tests;
