//! Before/after comparison of two runs with a verdict from a real test.
//!
//! - Throughput (requests/s, transfer rate): a two-sided Mann-Whitney U test
//!   over the per-second series (complete seconds only): are B's seconds
//!   systematically faster or slower than A's?
//! - Latency (mean, p50, p90, p99): a bootstrap of the statistic. With at least
//!   [`MIN_SECONDS`] seconds per run the resampling unit is a whole second's
//!   histogram (a block bootstrap: latencies within a second are correlated, so
//!   single requests are not independent draws); shorter runs fall back to an
//!   i.i.d. m-out-of-n bootstrap from the run's histogram, rescaled to n.
//! - Max latency is one value: tested as a shift of the per-second maxima
//!   (Mann-Whitney).
//! - Errors: a two-proportion z-test on the failure rate per finished request.
//!
//! A change is called *better* or *worse* when the test is significant at 95 %
//! and the change is at least [`MIN_EFFECT_PCT`] % (smaller shifts are real
//! but not worth acting on); otherwise *no significant change*.

use crate::{bytes, count, dur_us};
use redline_stats::{Hist, RunRecord};
use std::fmt::Write as _;

/// Fewest complete seconds per run for the per-second tests.
pub const MIN_SECONDS: usize = 3;
/// Smallest relative change (in %) that gets a better/worse verdict.
pub const MIN_EFFECT_PCT: f64 = 1.0;
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

/// A comparison of two runs.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// One row per metric.
    pub rows: Vec<Row>,
    /// Why the runs may not be comparable.
    pub warnings: Vec<String>,
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
        return Some(1.0); // every value equal
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    Some((2.0 * (1.0 - normal_cdf(z))).clamp(0.0, 1.0))
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

/// Two-sided confidence that B − A differs from zero, from paired replicates.
fn bootstrap_confidence(a: &[f64], b: &[f64], observed: f64) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let n = a.len().min(b.len());
    let sign = observed.signum();
    if sign == 0.0 {
        return 0.0;
    }
    let mut same = 0.0;
    for i in 0..n {
        let d = b[i] - a[i];
        if d.signum() == sign && d != 0.0 {
            same += 1.0;
        } else if d == 0.0 {
            same += 0.5;
        }
    }
    let one_sided = same / n as f64;
    (2.0 * one_sided - 1.0).clamp(0.0, 1.0)
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

fn verdict(
    conf: Option<f64>,
    change_pct: Option<f64>,
    a: f64,
    b: f64,
    higher_is_better: bool,
) -> Verdict {
    let Some(conf) = conf else {
        return Verdict::NotTested;
    };
    let big = change_pct
        .map(|c| c.abs() >= MIN_EFFECT_PCT)
        .unwrap_or(true);
    if conf < LEVEL || !big || a == b {
        return Verdict::NoChange;
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
    let p = mann_whitney(&xa, &xb);
    let conf = p.map(|p| 1.0 - p);
    let ch = change(a.1, b.1);
    Row {
        metric,
        unit,
        a: a.1,
        b: b.1,
        change_pct: ch,
        verdict: verdict(conf, ch, a.1, b.1, higher_is_better),
        confidence: conf,
        test: match p {
            Some(_) => format!("Mann-Whitney, {}+{} s", xa.len(), xb.len()),
            None => format!("needs ≥{MIN_SECONDS} full seconds per run"),
        },
    }
}

/// Compares run B (after) with run A (before).
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
    let stats = [
        Stat::Mean,
        Stat::Pct(50.0),
        Stat::Pct(90.0),
        Stat::Pct(99.0),
    ];
    let names = ["Latency mean", "Latency p50", "Latency p90", "Latency p99"];
    let secs = |r: &RunRecord| -> Vec<Hist> {
        full_seconds(r)
            .into_iter()
            .map(|p| p.hist.to_hist())
            .filter(|h| !h.is_empty())
            .collect()
    };
    let (ha, hb) = (secs(a), secs(b));
    let mut rng = Rng(0x005E_ED0F_2ED1_14E5);
    let (reps_a, reps_b, test) = if a.latency.is_empty() || b.latency.is_empty() {
        (
            Vec::new(),
            Vec::new(),
            "no latencies on one side".to_string(),
        )
    } else if ha.len() >= MIN_SECONDS + 2 && hb.len() >= MIN_SECONDS + 2 {
        (
            block_bootstrap(&ha, &stats, &mut rng),
            block_bootstrap(&hb, &stats, &mut rng),
            format!("bootstrap over {}+{} one-second blocks", ha.len(), hb.len()),
        )
    } else {
        (
            iid_bootstrap(&a.latency, &stats, &mut rng),
            iid_bootstrap(&b.latency, &stats, &mut rng),
            "bootstrap over requests (short run)".to_string(),
        )
    };
    for (k, st) in stats.iter().enumerate() {
        let val = |r: &RunRecord| match st {
            Stat::Mean => r.latency.mean(),
            Stat::Pct(p) => r.latency.percentile(*p) as f64,
        };
        let (va, vb) = (val(a), val(b));
        let ch = change(va, vb);
        let conf = if reps_a.is_empty() {
            None
        } else {
            Some(bootstrap_confidence(&reps_a[k], &reps_b[k], vb - va))
        };
        rows.push(Row {
            metric: names[k],
            unit: Unit::Micros,
            a: va,
            b: vb,
            change_pct: ch,
            verdict: verdict(conf, ch, va, vb, false),
            confidence: conf,
            test: test.clone(),
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

    // Errors: failures (and non-2xx) per finished request, two-proportion z-test.
    let bad = |r: &RunRecord| (r.counters.failed + r.counters.non_2xx) as f64;
    let fin = |r: &RunRecord| (r.counters.completed + r.counters.failed) as f64;
    let (ea, eb, na, nb) = (bad(a), bad(b), fin(a), fin(b));
    let (conf, test) = if na > 0.0 && nb > 0.0 {
        let (pa, pb) = (ea / na, eb / nb);
        let pool = (ea + eb) / (na + nb);
        let se = (pool * (1.0 - pool) * (1.0 / na + 1.0 / nb)).sqrt();
        let conf = if se > 0.0 {
            let z = (pb - pa).abs() / se;
            1.0 - 2.0 * (1.0 - normal_cdf(z))
        } else {
            0.0
        };
        (
            Some(conf.clamp(0.0, 1.0)),
            "two-proportion z-test".to_string(),
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
        verdict: verdict(conf, ch, ra, rb, false),
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
    let _ = writeln!(
        o,
        "{:<14}{:>16}{:>16}{:>10}  {:<22}{:>11}  test",
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
            "{:<14}{:>16}{:>16}{:>10}  {:<22}{:>11}  {}",
            r.metric,
            show(r.unit, r.a, a),
            show(r.unit, r.b, b),
            ch,
            r.verdict.words(),
            conf,
            r.test
        );
    }
    let _ = writeln!(
        o,
        "\nVerdicts need {:.0}% confidence and a change of at least {MIN_EFFECT_PCT}%; errors count failures and non-2xx responses.",
        LEVEL * 100.0
    );
    if !c.warnings.is_empty() {
        o.push_str("\nWARNING: these runs may not be comparable:\n");
        for w in &c.warnings {
            let _ = writeln!(o, "  ! {w}");
        }
    }
    o
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use redline_stats::{Environment, LoadModel, RunConfig, SeriesPoint};

    pub(crate) fn cfg() -> RunConfig {
        RunConfig::get(
            "http://127.0.0.1:8080/",
            LoadModel::Closed {
                connections: 10,
                requests: None,
                duration_s: Some(10.0),
            },
        )
    }

    /// A synthetic 10-second run: per second about `rps` requests whose
    /// latencies spread around `lat_us`, with noise from `seed`.
    pub(crate) fn synth(rps: u64, lat_us: u64, seed: u64, secs: u32) -> RunRecord {
        let mut rng = Rng(seed);
        let mut rec = RunRecord::new(
            cfg(),
            Environment::default(),
            "2025-01-01T00:00:00.000Z".into(),
        );
        rec.duration_s = secs as f64;
        for t in 0..secs {
            let n = rps - rps / 20 + rng.below(rps / 10 + 1);
            let mut h = Hist::with_sigfig(2);
            for _ in 0..n {
                // Spread: lat × (0.5 … 1.5) with a slow tail.
                let mut v = lat_us / 2 + rng.below(lat_us + 1);
                if rng.below(100) == 0 {
                    v *= 4;
                }
                h.record_us(v);
                rec.latency.record_us(v);
            }
            rec.counters.completed += n;
            rec.counters.scheduled += n;
            rec.counters.bytes_read += n * 500;
            let mut p = SeriesPoint::new(t, n, 0, n * 500, &h);
            p.status_classes = [0, n, 0, 0, 0];
            rec.series.push(p);
        }
        rec.derive();
        rec
    }

    #[test]
    fn mann_whitney_basics() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let b = [11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0];
        assert!(mann_whitney(&a, &b).unwrap() < 0.01);
        assert!(mann_whitney(&a, &a).unwrap() > 0.9);
        assert_eq!(mann_whitney(&a[..2], &b), None);
        assert_eq!(mann_whitney(&[1.0; 5], &[1.0; 5]), Some(1.0));
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-4);
    }

    #[test]
    fn identical_runs_show_no_significant_change() {
        let a = synth(2000, 1000, 1, 10);
        let c = compare(&a, &a.clone());
        for r in &c.rows {
            assert_eq!(r.verdict, Verdict::NoChange, "{r:?}");
        }
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        // Two runs of the same system, different noise: still no change.
        let b = synth(2000, 1000, 2, 10);
        let c = compare(&a, &b);
        for r in &c.rows {
            assert_ne!(r.verdict, Verdict::Better, "{r:?}");
            assert_ne!(r.verdict, Verdict::Worse, "{r:?}");
        }
    }

    #[test]
    fn clear_shifts_are_better_or_worse() {
        let a = synth(2000, 1000, 1, 10);
        let b = synth(2600, 700, 3, 10); // faster and more throughput
        let c = compare(&a, &b);
        let v = |m: &str| c.rows.iter().find(|r| r.metric == m).unwrap().verdict;
        assert_eq!(v("Requests/sec"), Verdict::Better);
        assert_eq!(v("Latency p50"), Verdict::Better);
        assert_eq!(v("Latency p99"), Verdict::Better);
        assert_eq!(v("Latency mean"), Verdict::Better);
        assert_eq!(v("Transfer/sec"), Verdict::Better);
        let c = compare(&b, &a);
        let v = |m: &str| c.rows.iter().find(|r| r.metric == m).unwrap().verdict;
        assert_eq!(v("Requests/sec"), Verdict::Worse);
        assert_eq!(v("Latency p90"), Verdict::Worse);
        let t = text(&c, &b, &a, "run 1", "run 2");
        assert!(t.contains("worse"), "{t}");
        assert!(t.contains("Mann-Whitney"), "{t}");
    }

    #[test]
    fn short_runs_use_the_request_bootstrap() {
        let a = synth(3000, 1000, 1, 1);
        let b = synth(3000, 1500, 2, 1);
        let c = compare(&a, &b);
        let p50 = c.rows.iter().find(|r| r.metric == "Latency p50").unwrap();
        assert_eq!(p50.verdict, Verdict::Worse, "{p50:?}");
        assert!(p50.test.contains("short run"));
        let rps = c.rows.iter().find(|r| r.metric == "Requests/sec").unwrap();
        assert_eq!(rps.verdict, Verdict::NotTested);
        let c = compare(&a, &a);
        let p50 = c.rows.iter().find(|r| r.metric == "Latency p50").unwrap();
        assert_eq!(p50.verdict, Verdict::NoChange);
    }

    #[test]
    fn changed_directives_sit_above_the_deltas() {
        use redline_stats::{ConfigValue, ServerConfig};
        let cfg = |kat: &str, mrw: &str| {
            let mut d = std::collections::BTreeMap::new();
            for (n, v) in [
                ("KeepAliveTimeout", kat),
                ("MaxRequestWorkers", mrw),
                ("Timeout", "60"),
            ] {
                d.insert(
                    n.to_string(),
                    ConfigValue {
                        value: v.into(),
                        at: "default".into(),
                    },
                );
            }
            ServerConfig {
                server: "apache".into(),
                file: "/x/httpd.conf".into(),
                directives: d,
            }
        };
        let mut a = synth(100, 2000, 1, 5);
        let mut b = synth(118, 1200, 2, 5);
        a.server_config = Some(cfg("15", "150"));
        b.server_config = Some(cfg("5", "33"));
        let c = compare(&a, &b);
        let t = text(&c, &a, &b, "a", "b");
        let line = t
            .lines()
            .find(|l| l.contains("KeepAliveTimeout 15 -> 5, MaxRequestWorkers 150 -> 33: p99 "))
            .unwrap_or_else(|| panic!("{t}"));
        // The effect is the table's own p99 and req/s changes, rounded.
        let pct = |m: &str| {
            c.rows
                .iter()
                .find(|r| r.metric == m)
                .unwrap()
                .change_pct
                .unwrap()
        };
        let (p99, rps) = (
            format!("p99 {:+.0} %", pct("Latency p99")),
            format!("req/s {:+.0} %", pct("Requests/sec")),
        );
        assert!(line.contains(&p99) && line.contains(&rps), "{line}");
        assert!(pct("Requests/sec") > 10.0);
        assert!(!t.contains("Timeout 60"), "{t}");
        let (cfg_at, table_at) = (
            t.find("Server configuration changed").unwrap(),
            t.find("Requests/sec").unwrap(),
        );
        assert!(cfg_at < table_at, "{t}");
        b.server_config = None;
        assert!(text(&compare(&a, &b), &a, &b, "a", "b").contains("recorded for A only"));
    }

    #[test]
    fn staged_runs_show_knee_and_diagnosis_side_by_side() {
        use redline_stats::stages::{Knee, StagePlan};
        use redline_stats::watch::Diagnosis;
        let mut a = synth(100, 2000, 1, 5);
        let mut b = synth(118, 1200, 2, 5);
        assert_eq!(knees(&a, &b), "", "plain runs: nothing");
        let plan = StagePlan {
            unit: "connections".into(),
            step: true,
            stages: vec![redline_stats::stages::StageSpec {
                duration_s: 5.0,
                level: 40.0,
            }],
        };
        for (r, level, limit) in [(&mut a, 10.0, 10), (&mut b, 33.0, 33)] {
            r.config.stages = Some(plan.clone());
            r.knee = Some(Knee {
                level,
                unit: "connections".into(),
                reason: "throughput".into(),
                evidence: String::new(),
                low: None,
                high: None,
            });
            r.diagnosis = Some(Diagnosis {
                resource: "worker_pool".into(),
                directive: "MaxRequestWorkers".into(),
                limit: Some(limit),
                at_level: Some(level),
                evidence: vec![],
                advice: format!("raise MaxRequestWorkers above {limit}"),
                ..Default::default()
            });
        }
        let t = knees(&a, &b);
        let knee = t.lines().find(|l| l.starts_with("Knee")).unwrap();
        assert!(
            knee.contains("10 connections") && knee.contains("33 connections"),
            "{t}"
        );
        assert!(knee.find("10 conn").unwrap() < knee.find("33 conn").unwrap());
        let d = t.lines().find(|l| l.starts_with("Diagnosis")).unwrap();
        assert!(
            d.contains("worker_pool (MaxRequestWorkers = 10)")
                && d.contains("(MaxRequestWorkers = 33)"),
            "{t}"
        );
        assert!(
            t.contains("A: raise MaxRequestWorkers above 10")
                && t.contains("B: raise MaxRequestWorkers above 33"),
            "{t}"
        );
        let full = text(&compare(&a, &b), &a, &b, "a", "b");
        assert!(full.find("Knee").unwrap() < full.find("Requests/sec").unwrap());
    }

    #[test]
    fn warns_when_not_comparable() {
        let a = synth(100, 1000, 1, 5);
        let mut b = a.clone();
        b.config.url = "http://other/".into();
        b.config.load = LoadModel::Open {
            rate: 100.0,
            arrival: "constant".into(),
            max_connections: 10,
            requests: None,
            duration_s: Some(5.0),
        };
        b.client_limited = true;
        let w = comparability(&a, &b);
        assert!(w.iter().any(|x| x.contains("different URLs")), "{w:?}");
        assert!(w.iter().any(|x| x.contains("load models")), "{w:?}");
        assert!(w.iter().any(|x| x.contains("client-limited")), "{w:?}");
    }

    #[test]
    fn errors_are_tested() {
        let a = synth(1000, 1000, 1, 5);
        let mut b = a.clone();
        b.counters.failed = 500;
        let c = compare(&a, &b);
        let e = c.rows.iter().find(|r| r.metric == "Errors").unwrap();
        assert_eq!(e.verdict, Verdict::Worse);
    }
}
