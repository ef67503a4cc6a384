//! Bootstrap of latency statistics from histogram counts: blocks of seconds
//! (a run's seconds are not independent) or single requests, and the z of an
//! observed difference.

use super::*;

/// A latency statistic read from histogram counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Stat {
    Mean,
    Pct(f64),
}

/// Histograms as sparse (value index, count) lists over one shared sorted
/// value table, so a bootstrap resample adds a few integers per bucket.
pub(super) struct Buckets {
    values: Vec<u64>,
    seconds: Vec<Vec<(usize, u64)>>,
}

pub(super) fn sparse(h: &Hist) -> Vec<(u64, u64)> {
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
pub(super) fn block_bootstrap(hists: &[Hist], stats: &[Stat], rng: &mut Rng) -> Vec<Vec<f64>> {
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
pub(super) fn iid_bootstrap(h: &Hist, stats: &[Stat], rng: &mut Rng) -> Vec<Vec<f64>> {
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
pub(super) fn bootstrap_z(a: &[f64], b: &[f64], observed: f64) -> f64 {
    if a.len() < 2 || b.len() < 2 || observed == 0.0 {
        return 0.0;
    }
    let se = (mean_var(a).1 + mean_var(b).1).sqrt();
    if se <= 0.0 {
        return f64::INFINITY;
    }
    observed.abs() / se
}
