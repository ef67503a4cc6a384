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

/// The standard normal CDF (Abramowitz–Stegun 7.1.26 erf, error < 1.5e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// Two-sided p-value of the Mann-Whitney U test (normal approximation with
/// tie and continuity corrections). `None` with fewer than [`MIN_SECONDS`]
/// values on a side.
pub fn mann_whitney(x: &[f64], y: &[f64]) -> Option<f64> {
    mann_whitney_z(x, y).map(p_of_z)
}

/// The Mann-Whitney |z| (tie- and continuity-corrected); `None` with fewer
/// than [`MIN_SECONDS`] values on a side.
fn mann_whitney_z(x: &[f64], y: &[f64]) -> Option<f64> {
    let (n1, n2) = (x.len(), y.len());
    if n1 < MIN_SECONDS || n2 < MIN_SECONDS {
        return None;
    }
    let mut all: Vec<(f64, bool)> = x
        .iter()
        .map(|v| (*v, true))
        .chain(y.iter().map(|v| (*v, false)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = all.len();
    let mut rank_sum_x = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let avg_rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        for item in &all[i..=j] {
            if item.1 {
                rank_sum_x += avg_rank;
            }
        }
        i = j + 1;
    }
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let u = rank_sum_x - n1f * (n1f + 1.0) / 2.0;
    let mean = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return Some(0.0); // every value equal
    }
    Some(((u - mean).abs() - 0.5).max(0.0) / var.sqrt())
}

/// Two-sided p-value of a standard normal |z|.
fn p_of_z(z: f64) -> f64 {
    if z == 0.0 {
        return 1.0;
    }
    (2.0 * (1.0 - normal_cdf(z.abs()))).clamp(0.0, 1.0)
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    if x.is_empty() {
        return (0.0, 0.0);
    }
    let m = x.iter().sum::<f64>() / n;
    if x.len() < 2 {
        return (m, 0.0);
    }
    let v = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0);
    (m, v)
}

/// Lag-1 autocorrelation of a series, bias-corrected and clamped to 0 … 0.95
/// (0 with fewer than 3 values or when nothing varies). The raw estimate of a
/// short series is biased low (by about (1 + 3r)/n for an AR(1) process,
/// Kendall), which would overstate the effective sample size: it is added
/// back. Negative values count as 0 (independence is the best case).
pub fn lag1(x: &[f64]) -> f64 {
    if x.len() < 3 {
        return 0.0;
    }
    let (m, _) = mean_var(x);
    let den: f64 = x.iter().map(|v| (v - m) * (v - m)).sum();
    if den <= 0.0 {
        return 0.0;
    }
    let num: f64 = x.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    let r = num / den;
    (r + (1.0 + 3.0 * r) / x.len() as f64).clamp(0.0, MAX_R)
}

/// Effective sample size of `n` values with lag-1 autocorrelation `r`:
/// n·(1−r)/(1+r).
pub fn n_eff(n: usize, r: f64) -> f64 {
    let r = r.clamp(0.0, MAX_R);
    n as f64 * (1.0 - r) / (1.0 + r)
}

/// Coefficient of variation (standard deviation / mean) of a series; 0 with
/// fewer than 2 values or a mean of 0.
pub fn cv(x: &[f64]) -> f64 {
    let (m, v) = mean_var(x);
    if x.len() < 2 || m.abs() <= f64::EPSILON {
        return 0.0;
    }
    v.sqrt() / m.abs()
}

/// What two single runs' per-second series allow: the shrink factor for a
/// test statistic's z (sqrt of the smaller n_eff/n), the effective sizes, and
/// the smallest change (in %) worth a claim.
struct Noise {
    shrink: f64,
    n_eff: (f64, f64),
    min_effect: f64,
}

impl Noise {
    fn of(xa: &[f64], xb: &[f64]) -> Noise {
        let (ra, rb) = (lag1(xa).max(SINGLE_R_FLOOR), lag1(xb).max(SINGLE_R_FLOOR));
        let (ea, eb) = (n_eff(xa.len(), ra), n_eff(xb.len(), rb));
        let f = ((1.0 - ra) / (1.0 + ra)).min((1.0 - rb) / (1.0 + rb));
        Noise {
            shrink: f.sqrt(),
            n_eff: (ea, eb),
            min_effect: SINGLE_MIN_EFFECT_PCT.max(200.0 * cv(xa).max(cv(xb))),
        }
    }
    fn words(&self) -> String {
        format!(
            "n_eff {:.0}+{:.0}, needs ±{:.0}%",
            self.n_eff.0, self.n_eff.1, self.min_effect
        )
    }
}

/// Confidence (1 − p) of Welch's t-test on two per-second series whose
/// seconds count as `n_eff` independent ones each (at least 1.5); `None`
/// with fewer than
/// [`MIN_SECONDS`] seconds on a side.
fn eff_welch(xa: &[f64], xb: &[f64], (ea, eb): (f64, f64)) -> Option<f64> {
    if xa.len() < MIN_SECONDS || xb.len() < MIN_SECONDS {
        return None;
    }
    let (ea, eb) = (ea.max(1.5), eb.max(1.5));
    let ((ma, va), (mb, vb)) = (mean_var(xa), mean_var(xb));
    let (sa, sb) = (va / ea, vb / eb);
    let se2 = sa + sb;
    if se2 <= 0.0 {
        return Some(if ma == mb { 0.0 } else { 1.0 });
    }
    let t = (ma - mb).abs() / se2.sqrt();
    // Degrees of freedom of the pooled effective sizes (Welch–Satterthwaite
    // collapses towards 1 when one side's spread dominates).
    Some(1.0 - student_p(t, (ea + eb - 2.0).max(1.0)))
}

/// ln Γ(x) (Lanczos, g = 7, n = 9; |error| < 1e-13 for x > 0).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Continued fraction of the incomplete beta function (Numerical Recipes' betacf).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-12 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
fn beta_inc(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let bt = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        bt * beta_cf(a, b, x) / a
    } else {
        1.0 - bt * beta_cf(b, a, 1.0 - x) / b
    }
}

/// Two-sided p-value of Student's t with `df` degrees of freedom.
pub fn student_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    beta_inc(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// Two-sided p-value of Welch's t-test (unequal variances, Welch–Satterthwaite
/// degrees of freedom). `None` with fewer than 2 values on a side; when neither
/// side varies, 1 for equal means and 0 otherwise.
pub fn welch(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() < 2 || y.len() < 2 {
        return None;
    }
    let (nx, ny) = (x.len() as f64, y.len() as f64);
    let ((mx, vx), (my, vy)) = (mean_var(x), mean_var(y));
    let (sx, sy) = (vx / nx, vy / ny);
    let se2 = sx + sy;
    if se2 <= 0.0 {
        return Some(if mx == my { 1.0 } else { 0.0 });
    }
    let t = (mx - my).abs() / se2.sqrt();
    let df = se2 * se2 / (sx * sx / (nx - 1.0) + sy * sy / (ny - 1.0));
    Some(student_p(t, df))
}

/// A latency statistic read from histogram counts.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stat {
    Mean,
    Pct(f64),
}

/// Histograms as sparse (value index, count) lists over one shared sorted
/// value table, so a bootstrap resample adds a few integers per bucket.
struct Buckets {
    values: Vec<u64>,
    seconds: Vec<Vec<(usize, u64)>>,
}

fn sparse(h: &Hist) -> Vec<(u64, u64)> {
    h.inner()
        .iter_recorded()
        .map(|v| {
            (
                h.inner().highest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .collect()
}

impl Buckets {
    fn new(hists: &[Hist]) -> Buckets {
        let raw: Vec<Vec<(u64, u64)>> = hists.iter().map(sparse).collect();
        let mut values: Vec<u64> = raw.iter().flatten().map(|x| x.0).collect();
        values.sort_unstable();
        values.dedup();
        let seconds = raw
            .into_iter()
            .map(|s| {
                s.into_iter()
                    .map(|(v, c)| (values.binary_search(&v).unwrap_or(0), c))
                    .collect()
            })
            .collect();
        Buckets { values, seconds }
    }
    fn stat(&self, counts: &[u64], s: Stat) -> f64 {
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0.0;
        }
        match s {
            Stat::Mean => {
                let sum: f64 = counts
                    .iter()
                    .zip(&self.values)
                    .map(|(c, v)| *c as f64 * *v as f64)
                    .sum();
                sum / total as f64
            }
            Stat::Pct(p) => {
                let want = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
                let mut acc = 0;
                for (c, v) in counts.iter().zip(&self.values) {
                    acc += c;
                    if acc >= want {
                        return *v as f64;
                    }
                }
                *self.values.last().unwrap_or(&0) as f64
            }
        }
    }
}

/// Per-second block bootstrap replicates of `stats` (one Vec per stat).
fn block_bootstrap(hists: &[Hist], stats: &[Stat], rng: &mut Rng) -> Vec<Vec<f64>> {
    let b = Buckets::new(hists);
    let mut out = vec![Vec::with_capacity(RESAMPLES); stats.len()];
    let mut counts = vec![0u64; b.values.len()];
    for _ in 0..RESAMPLES {
        counts.iter_mut().for_each(|c| *c = 0);
        for _ in 0..b.seconds.len() {
            let s = &b.seconds[rng.below(b.seconds.len() as u64) as usize];
            for &(i, c) in s {
                counts[i] += c;
            }
        }
        for (k, st) in stats.iter().enumerate() {
            out[k].push(b.stat(&counts, *st));
        }
    }
    out
}

/// i.i.d. m-out-of-n bootstrap from one histogram, rescaled to n.
fn iid_bootstrap(h: &Hist, stats: &[Stat], rng: &mut Rng) -> Vec<Vec<f64>> {
    let b = Buckets::new(std::slice::from_ref(h));
    let sp = &b.seconds[0];
    let n: u64 = sp.iter().map(|x| x.1).sum();
    let mut out = vec![Vec::with_capacity(RESAMPLES); stats.len()];
    if n == 0 {
        return out;
    }
    let mut cum = Vec::with_capacity(sp.len());
    let mut acc = 0;
    for &(_, c) in sp {
        acc += c;
        cum.push(acc);
    }
    let m = (n as usize).min(IID_SAMPLE);
    let scale = (m as f64 / n as f64).sqrt();
    let mut full = vec![0u64; b.values.len()];
    for &(i, c) in sp {
        full[i] += c;
    }
    let point: Vec<f64> = stats.iter().map(|s| b.stat(&full, *s)).collect();
    let mut counts = vec![0u64; b.values.len()];
    for _ in 0..RESAMPLES {
        counts.iter_mut().for_each(|c| *c = 0);
        for _ in 0..m {
            let r = rng.below(n);
            let k = cum.partition_point(|&c| c <= r);
            counts[sp[k.min(sp.len() - 1)].0] += 1;
        }
        for (k, st) in stats.iter().enumerate() {
            let v = b.stat(&counts, *st);
            out[k].push(point[k] + (v - point[k]) * scale);
        }
    }
    out
}

/// |z| of the observed B − A against the spread of the two sides' bootstrap
/// replicates (normal approximation: continuous, with no floor at
/// 1 / resamples); 0 without replicates.
fn bootstrap_z(a: &[f64], b: &[f64], observed: f64) -> f64 {
    if a.len() < 2 || b.len() < 2 || observed == 0.0 {
        return 0.0;
    }
    let se = (mean_var(a).1 + mean_var(b).1).sqrt();
    if se <= 0.0 {
        return f64::INFINITY;
    }
    observed.abs() / se
}

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

    // Errors: failures (and non-2xx) per finished request, two-proportion
    // z-test, its variance inflated by how bursty each run's errors were
    // (variance / mean of the per-second error counts, at least 1).
    let bad = |r: &RunRecord| (r.counters.failed + r.counters.non_2xx) as f64;
    let fin = |r: &RunRecord| (r.counters.completed + r.counters.failed) as f64;
    let dispersion = |r: &RunRecord| {
        let x: Vec<f64> = full_seconds(r)
            .into_iter()
            .map(|p| (p.errors + p.status_classes.iter().sum::<u64>() - p.status_classes[1]) as f64)
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
        (r.counters.failed + r.counters.non_2xx) as f64 / fin
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

fn rate(l: &redline_stats::LoadModel) -> Option<u64> {
    match l {
        redline_stats::LoadModel::Open { rate, .. } => Some((rate * 1000.0) as u64),
        _ => None,
    }
}

fn show(unit: Unit, v: f64, r: &RunRecord) -> String {
    match unit {
        Unit::PerSec => format!("{v:.2}"),
        Unit::Micros => dur_us(v),
        Unit::BytesPerSec => format!("{}/s", bytes(v)),
        Unit::Share => format!("{:.2}%", v * 100.0),
        Unit::Errors => {
            let fin = r.counters.completed + r.counters.failed;
            if fin == 0 {
                count(v as u64)
            } else {
                format!("{} ({:.2}%)", count(v as u64), v * 100.0 / fin as f64)
            }
        }
    }
}

/// The server directives that changed between A and B above the effect on
/// p99 and req/s, as one table; what is missing when a side has no recorded
/// configuration; empty when neither has one.
pub fn config_changes(c: &Comparison, a: &RunRecord, b: &RunRecord) -> String {
    let mut o = String::new();
    let (ca, cb) = match (&a.server_config, &b.server_config) {
        (None, None) => return o,
        (Some(_), None) | (None, Some(_)) => {
            let side = if a.server_config.is_some() { "A" } else { "B" };
            let _ = writeln!(
                o,
                "Server configuration: recorded for {side} only (run the other with --server-config FILE to see what changed)\n"
            );
            return o;
        }
        (Some(x), Some(y)) => (x, y),
    };
    if ca.server != cb.server {
        let _ = writeln!(
            o,
            "Server configuration: A is {}, B is {}: directives not compared\n",
            ca.server, cb.server
        );
        return o;
    }
    let ch = ca.changes(cb);
    if ch.is_empty() {
        let _ = writeln!(
            o,
            "Server configuration: no tuning directive changed ({}, {} directives recorded)\n",
            ca.server,
            ca.directives.len()
        );
        return o;
    }
    let pct = |m: &str| {
        c.rows
            .iter()
            .find(|r| r.metric == m)
            .and_then(|r| {
                let x = r.change_pct.filter(|x| x.is_finite())?;
                Some(match r.verdict {
                    Verdict::Better | Verdict::Worse => format!("{x:+.0} %"),
                    v => format!("{x:+.0} % ({})", v.words()),
                })
            })
            .unwrap_or_else(|| "-".into())
    };
    let w = ch.iter().map(|x| x.0.len()).max().unwrap_or(0).max(9) + 2;
    let _ = writeln!(o, "Server configuration changed ({}):", ca.server);
    let _ = writeln!(o, "  {:<w$}{:>16}    B", "directive", "A");
    for (n, x, y) in &ch {
        let _ = writeln!(o, "  {n:<w$}{x:>16} -> {y}");
    }
    let list: Vec<String> = ch
        .iter()
        .map(|(n, x, y)| format!("{n} {x} -> {y}"))
        .collect();
    let _ = writeln!(
        o,
        "  {}: p99 {}, req/s {}\n",
        list.join(", "),
        pct("Latency p99"),
        pct("Requests/sec")
    );
    o
}

fn knee_words(r: &RunRecord) -> String {
    let Some(plan) = r.config.stages.as_ref() else {
        return "not a staged run".into();
    };
    match &r.knee {
        Some(k) => format!(
            "{} {} ({} gave out next)",
            redline_stats::stages::fmt_level(k.level),
            plan.unit_name(),
            k.reason
        ),
        None => match redline_stats::stages::by_level(plan, &r.series).last() {
            Some(p) => format!(
                "no knee up to {} {}",
                redline_stats::stages::fmt_level(p.level),
                plan.unit_name()
            ),
            None => "no knee".into(),
        },
    }
}

fn diagnosis_words(r: &RunRecord) -> String {
    let Some(d) = &r.diagnosis else {
        return "none".into();
    };
    let mut s = d.resource.clone();
    if !d.directive.is_empty() {
        s.push_str(&format!(" ({}", d.directive));
        if let Some(l) = d.limit {
            s.push_str(&format!(" = {l}"));
        }
        s.push(')');
    }
    if let Some(l) = d.at_level {
        s.push_str(&format!(" at {}", redline_stats::stages::fmt_level(l)));
    } else if let Some(t) = d.at_s {
        s.push_str(&format!(" at {t:.1} s"));
    }
    s
}

/// The knee and the diagnosis of each run side by side, when either is a staged run.
pub fn knees(a: &RunRecord, b: &RunRecord) -> String {
    let mut o = String::new();
    if a.config.stages.is_none() && b.config.stages.is_none() {
        return o;
    }
    let (ka, kb) = (knee_words(a), knee_words(b));
    let (da, db) = (diagnosis_words(a), diagnosis_words(b));
    let w = ka.len().max(da.len()).max(1) + 4;
    let _ = writeln!(o, "{:<11}{:<w$}B", "", "A");
    let _ = writeln!(o, "{:<11}{ka:<w$}{kb}", "Knee");
    let _ = writeln!(o, "{:<11}{da:<w$}{db}", "Diagnosis");
    for (side, r) in [("A", a), ("B", b)] {
        if let Some(d) = &r.diagnosis {
            if !d.advice.is_empty() {
                let _ = writeln!(o, "  {side}: {}", d.advice);
            }
        }
    }
    o.push('\n');
    o
}

/// The comparison as a text table; `name_a`/`name_b` say what A and B are.
pub fn text(c: &Comparison, a: &RunRecord, b: &RunRecord, name_a: &str, name_b: &str) -> String {
    crate::escape::clean_text(&text_unescaped(c, a, b, name_a, name_b)).into_owned()
}

fn text_unescaped(
    c: &Comparison,
    a: &RunRecord,
    b: &RunRecord,
    name_a: &str,
    name_b: &str,
) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "A (before): {name_a}, {}, {}",
        a.started_at, a.config.url
    );
    let _ = writeln!(
        o,
        "B (after):  {name_b}, {}, {}",
        b.started_at, b.config.url
    );
    o.push('\n');
    o.push_str(&config_changes(c, a, b));
    o.push_str(&knees(a, b));
    let vw = c
        .rows
        .iter()
        .map(|r| r.verdict.words().chars().count())
        .max()
        .unwrap_or(0)
        .max(22);
    let _ = writeln!(
        o,
        "{:<14}{:>16}{:>16}{:>10}  {:<vw$}{:>11}  test",
        "", "A", "B", "change", "verdict", "confidence"
    );
    for r in &c.rows {
        let ch = match r.change_pct {
            Some(x) if x.is_finite() => format!("{x:+.1}%"),
            _ => "new".into(),
        };
        let conf = r
            .confidence
            .map(|x| format!("{:.1}%", x * 100.0))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            o,
            "{:<14}{:>16}{:>16}{:>10}  {:<vw$}{:>11}  {}",
            r.metric,
            show(r.unit, r.a, a),
            show(r.unit, r.b, b),
            ch,
            r.verdict.words(),
            conf,
            r.test
        );
    }
    if c.runs.0 >= 2 && c.runs.1 >= 2 {
        let _ = writeln!(
            o,
            "\nEach run is one sample ({} of A, {} of B; values are means over the runs): a verdict needs {:.0}% confidence from a Welch t-test over the runs and a change of at least {MIN_EFFECT_PCT}%; errors count failures and non-2xx responses.",
            c.runs.0,
            c.runs.1,
            LEVEL * 100.0
        );
    } else {
        let _ = writeln!(
            o,
            "\nTwo single runs: a run's seconds are not independent and do not measure run-to-run noise, so each test counts the effective seconds n(1-r)/(1+r) (r: lag-1 autocorrelation) and a verdict needs {:.0}% confidence and a change of at least {SINGLE_MIN_EFFECT_PCT}% and twice the noisier run's per-second variation (runs under {} s: latency claims need 2x, none for p99). For a verdict over run-to-run noise: `redline run --repeat N --label L` on each side, then `redline compare LA LB`.",
            LEVEL * 100.0,
            MIN_SECONDS + 2
        );
    }
    if !c.warnings.is_empty() {
        o.push_str("\nWARNING: these runs may not be comparable:\n");
        for w in &c.warnings {
            let _ = writeln!(o, "  ! {w}");
        }
    }
    o
}

#[cfg(test)]
pub(crate) mod tests;
