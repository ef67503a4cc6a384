//! The statistics behind the verdicts: the normal and Student t
//! distributions, Mann-Whitney, Welch's t-test (plain and with effective
//! sample sizes), lag-1 autocorrelation and the coefficient of variation.

use super::*;

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
pub(super) fn mann_whitney_z(x: &[f64], y: &[f64]) -> Option<f64> {
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
pub(super) fn p_of_z(z: f64) -> f64 {
    if z == 0.0 {
        return 1.0;
    }
    (2.0 * (1.0 - normal_cdf(z.abs()))).clamp(0.0, 1.0)
}

pub(super) fn mean_var(x: &[f64]) -> (f64, f64) {
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
pub(super) struct Noise {
    pub(super) shrink: f64,
    pub(super) n_eff: (f64, f64),
    pub(super) min_effect: f64,
}

impl Noise {
    pub(super) fn of(xa: &[f64], xb: &[f64]) -> Noise {
        let (ra, rb) = (lag1(xa).max(SINGLE_R_FLOOR), lag1(xb).max(SINGLE_R_FLOOR));
        let (ea, eb) = (n_eff(xa.len(), ra), n_eff(xb.len(), rb));
        let f = ((1.0 - ra) / (1.0 + ra)).min((1.0 - rb) / (1.0 + rb));
        Noise {
            shrink: f.sqrt(),
            n_eff: (ea, eb),
            min_effect: SINGLE_MIN_EFFECT_PCT.max(200.0 * cv(xa).max(cv(xb))),
        }
    }
    pub(super) fn words(&self) -> String {
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
pub(super) fn eff_welch(xa: &[f64], xb: &[f64], (ea, eb): (f64, f64)) -> Option<f64> {
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
pub(super) fn ln_gamma(x: f64) -> f64 {
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
pub(super) fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
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
pub(super) fn beta_inc(a: f64, b: f64, x: f64) -> f64 {
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
