//! Load stages: the recorded `--stages` plan, per-stage summaries and the knee.
//!
//! Everything here is computed from the run's per-second series and the stage
//! plan only, so a merged record (`a += &b`) gets its summaries and knee
//! recomputed from the merged series: exact, never an average of averages.
//!
//! Which seconds belong to a stage: a series point covers `[t, t+1)`; a stage
//! `[start, end)` takes the seconds lying wholly inside it (so the drain after
//! the last stage and the second a step changes in are left out when the
//! boundaries are not whole seconds); a stage shorter than that takes the
//! seconds whose middle falls inside it.
//!
//! The knee: seconds are grouped by the load in force over them (the mean of
//! 10 samples; for connections the whole number the engine keeps open), every
//! distinct level its own group when there are at most 12, else 10
//! equal-width level bands; throughput and p99 computed per group. Starting
//! from the lowest loaded group `L0` (the base), a group `L` still scales
//! when throughput(L) ≥ [`SCALING`] × throughput(L0) × L/L0, its p99 is at
//! most [`P99_FACTOR`] × p99(L0) (and at least 1 ms above it, so microsecond
//! noise does not count), and its errors stay under 1 %. A group that fails
//! one of these is a break; the knee is the last level before the first
//! break that persists: the next [`PERSIST`] loaded groups (those left) break
//! too. A break followed by a group that scales again is one noisy stage (a
//! dip), not the knee. The base is `L0` unless it is out of line with the
//! next two groups while they agree with each other (its throughput per unit
//! of load under [`SCALING`] × the next group's, or the next group breaking
//! from it on throughput): then the next group is the base.

use crate::hist::{Hist, SERIES_SIGFIG};
use crate::record::{RunRecord, SeriesPoint};
use crate::status::ExpectStatus;
use serde::{Deserialize, Serialize};

/// Throughput must reach this share of proportional scaling. 0.8 leaves room
/// for the noise of one-second samples and the cost of more connections, yet
/// catches a serializing server at once (2 connections give 0.5 of 2×).
pub const SCALING: f64 = 0.8;
/// p99 may grow to this multiple of its low-load value before the load counts
/// as past the knee.
pub const P99_FACTOR: f64 = 3.0;

/// One recorded stage: reach (ramp) or hold (step) `level` for `duration_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageSpec {
    /// Seconds the stage lasts.
    pub duration_s: f64,
    /// Connections or requests/s at the stage's end.
    pub level: f64,
}

/// The `--stages` plan as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagePlan {
    /// `connections` (closed loop), `streams` (closed loop over HTTP/2 with
    /// `--streams` above 1: concurrent streams) or `rps` (open loop, `--rate-stages`).
    pub unit: String,
    /// Stair steps (`--step`): the level jumps at each stage's start and holds.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub step: bool,
    /// The stages in order.
    pub stages: Vec<StageSpec>,
}

impl StagePlan {
    /// The level at `t` seconds: ramps move linearly from the previous
    /// stage's level (0 before the first); steps hold. 0 after the end.
    pub fn level_at(&self, t: f64) -> f64 {
        let (mut start, mut prev) = (0.0, 0.0);
        for s in &self.stages {
            let end = start + s.duration_s;
            if t < end {
                if self.step || s.duration_s <= 0.0 {
                    return s.level;
                }
                return prev + (s.level - prev) * ((t - start) / s.duration_s).max(0.0);
            }
            start = end;
            prev = s.level;
        }
        0.0
    }

    /// The load actually in force at `t`: the level for rates; for
    /// connections the whole number the engine keeps open (the level rounded,
    /// at least 1 while a stage whose level at its start or end is ≥ 1 runs).
    pub fn effective_at(&self, t: f64) -> f64 {
        let l = self.level_at(t);
        if self.unit == "rps" {
            return l;
        }
        let (mut start, mut prev) = (0.0, 0.0);
        for s in &self.stages {
            let end = start + s.duration_s;
            if t < end {
                let from = if self.step { s.level } else { prev };
                let n = l.round().max(0.0);
                return if from.max(s.level) >= 1.0 {
                    n.max(1.0)
                } else {
                    n
                };
            }
            start = end;
            prev = s.level;
        }
        0.0
    }

    /// The mean load in force over the second `[t, t+1)` (10 samples).
    fn second_level(&self, t: u32) -> f64 {
        (0..10)
            .map(|k| self.effective_at(t as f64 + 0.05 + k as f64 * 0.1))
            .sum::<f64>()
            / 10.0
    }

    /// The planned run time.
    pub fn total_s(&self) -> f64 {
        self.stages.iter().map(|s| s.duration_s).sum()
    }

    /// The unit for people: `connections`, `streams` (HTTP/2 with several
    /// streams per connection) or `req/s`.
    pub fn unit_name(&self) -> &'static str {
        match self.unit.as_str() {
            "rps" => "req/s",
            "streams" => "streams",
            _ => "connections",
        }
    }

    /// Adds another machine's plan of the same shape (levels add up, like the
    /// load of merged runs); a plan of another shape is left as it is.
    pub fn merge(&mut self, o: &StagePlan) {
        let same = self.unit == o.unit
            && self.step == o.step
            && self.stages.len() == o.stages.len()
            && self
                .stages
                .iter()
                .zip(&o.stages)
                .all(|(a, b)| (a.duration_s - b.duration_s).abs() < 1e-9);
        if same {
            for (a, b) in self.stages.iter_mut().zip(&o.stages) {
                a.level += b.level;
            }
        }
    }
}

/// What one stage (or step) measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    /// Stage start, seconds since the run's start.
    pub start_s: f64,
    /// Stage end.
    pub end_s: f64,
    /// Level at the stage's start (for a step: its level).
    pub level_from: f64,
    /// Level at the stage's end.
    pub level_to: f64,
    /// Whole seconds of the series measured in this stage.
    pub seconds: u32,
    /// Completed responses in those seconds.
    pub requests: u64,
    /// Completed responses per second.
    pub requests_per_sec: f64,
    /// Latency p50 (µs, 2 significant digits: from the series histograms).
    pub p50_us: u64,
    /// Latency p95 (µs).
    pub p95_us: u64,
    /// Latency p99 (µs).
    pub p99_us: u64,
    /// Bytes read per second.
    pub bytes_per_sec: f64,
    /// Failed requests.
    pub errors: u64,
    /// Responses with a status the run's rule refuses (`--expect-status`,
    /// default: outside 2xx and 3xx; the field keeps its older name).
    #[serde(default)]
    pub non_2xx: u64,
    /// The watched server (`--watch`) during the stage, one entry per host of
    /// `server_watch` in its order: derived from the samples by
    /// [`analyze_server`] (so recomputed after a merge); absent without a watch
    /// and in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server: Vec<crate::watch::HostWindow>,
    /// The server's status page during the stage (`--server-status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<crate::watch::StatusWindow>,
}

impl StageSummary {
    /// The stage's name in reports: `stage 2 @10` (a step or a hold) or
    /// `stage 1 0→50` (a ramp); `index` counts from 0.
    pub fn name(&self, index: usize) -> String {
        if self.level_from == self.level_to {
            format!("stage {} @{}", index + 1, self.level_to)
        } else {
            format!("stage {} {}→{}", index + 1, self.level_from, self.level_to)
        }
    }
}

/// The load level where the server stopped scaling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// The highest level that still scaled.
    pub level: f64,
    /// `connections` or `rps`.
    pub unit: String,
    /// What gave out next: `throughput`, `p99` or `errors`.
    pub reason: String,
    /// The numbers behind it, in words.
    pub evidence: String,
    /// The lowest level the data cannot tell from `level` (linear ramps:
    /// the range of the fit, see [`ramp_knee`]); absent when pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<f64>,
    /// The highest level the data cannot tell from `level`; absent when pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
}

/// Throughput and latency of the seconds run at one load level (or band).
#[derive(Debug, Clone)]
pub struct LevelPoint {
    /// The level (mean over the seconds of a band).
    pub level: f64,
    /// Seconds in it.
    pub seconds: u32,
    /// Completed responses per second.
    pub requests_per_sec: f64,
    /// Errors and refused statuses (`--expect-status`) as a share of what ended.
    pub error_share: f64,
    /// Latency percentiles (µs).
    pub p50_us: u64,
    /// p95 (µs).
    pub p95_us: u64,
    /// p99 (µs).
    pub p99_us: u64,
}

#[derive(Default)]
struct Acc {
    seconds: u32,
    requests: u64,
    errors: u64,
    refused: u64,
    bytes: u64,
    level_sum: f64,
    hist: Option<Hist>,
}

impl Acc {
    fn add(&mut self, p: &SeriesPoint, level: f64, rule: &ExpectStatus) {
        self.seconds += 1;
        self.requests += p.requests;
        self.errors += p.errors;
        self.refused += p.refused(rule);
        self.bytes += p.bytes;
        self.level_sum += level;
        self.hist
            .get_or_insert_with(|| Hist::with_sigfig(SERIES_SIGFIG))
            .merge(&p.hist.to_hist());
    }
    fn pct(&self, q: f64) -> u64 {
        self.hist.as_ref().map_or(0, |h| h.percentile(q))
    }
}

/// Per-stage summaries from the series.
pub fn summarize(
    plan: &StagePlan,
    series: &[SeriesPoint],
    rule: &ExpectStatus,
) -> Vec<StageSummary> {
    let mut out = Vec::with_capacity(plan.stages.len());
    let (mut start, mut prev) = (0.0f64, 0.0f64);
    for s in &plan.stages {
        let end = start + s.duration_s;
        let eps = 1e-9;
        let whole: Vec<&SeriesPoint> = series
            .iter()
            .filter(|p| p.t as f64 >= start - eps && p.t as f64 + 1.0 <= end + eps)
            .collect();
        let chosen = if whole.is_empty() {
            series
                .iter()
                .filter(|p| (p.t as f64 + 0.5) >= start && (p.t as f64 + 0.5) < end)
                .collect()
        } else {
            whole
        };
        let mut a = Acc::default();
        for p in chosen {
            a.add(p, 0.0, rule);
        }
        let secs = a.seconds.max(1) as f64;
        out.push(StageSummary {
            start_s: start,
            end_s: end,
            level_from: if plan.step { s.level } else { prev },
            level_to: s.level,
            seconds: a.seconds,
            requests: a.requests,
            requests_per_sec: if a.seconds > 0 {
                a.requests as f64 / secs
            } else {
                0.0
            },
            p50_us: a.pct(50.0),
            p95_us: a.pct(95.0),
            p99_us: a.pct(99.0),
            bytes_per_sec: if a.seconds > 0 {
                a.bytes as f64 / secs
            } else {
                0.0
            },
            errors: a.errors,
            non_2xx: a.refused,
            server: Vec::new(),
            status: None,
        });
        start = end;
        prev = s.level;
    }
    out
}

/// Throughput and latency by load level (see the module text for the grouping).
pub fn by_level(plan: &StagePlan, series: &[SeriesPoint], rule: &ExpectStatus) -> Vec<LevelPoint> {
    let end = plan.total_s();
    let mut secs: Vec<(f64, &SeriesPoint)> = series
        .iter()
        .filter(|p| p.t as f64 + 1.0 <= end + 1e-9)
        .map(|p| (plan.second_level(p.t), p))
        .filter(|(l, _)| *l > 0.0)
        .collect();
    if secs.is_empty() {
        return Vec::new();
    }
    secs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut distinct: Vec<f64> = secs.iter().map(|(l, _)| *l).collect();
    distinct.dedup_by(|a, b| (*a - *b).abs() < 1e-6);
    let (lo, hi) = (secs[0].0, secs[secs.len() - 1].0);
    let bands = if distinct.len() <= 12 {
        distinct.len()
    } else {
        10
    };
    let mut accs: Vec<Acc> = (0..bands).map(|_| Acc::default()).collect();
    for (l, p) in &secs {
        let i = if distinct.len() <= 12 {
            distinct
                .iter()
                .position(|d| (d - l).abs() < 1e-6)
                .unwrap_or(0)
        } else {
            (((l - lo) / (hi - lo).max(1e-12)) * bands as f64).floor() as usize
        };
        accs[i.min(bands - 1)].add(p, *l, rule);
    }
    accs.into_iter()
        .filter(|a| a.seconds > 0)
        .map(|a| {
            let ended = a.requests + a.errors;
            LevelPoint {
                level: a.level_sum / a.seconds as f64,
                seconds: a.seconds,
                requests_per_sec: a.requests as f64 / a.seconds as f64,
                error_share: if ended > 0 {
                    (a.errors + a.refused) as f64 / ended as f64
                } else {
                    0.0
                },
                p50_us: a.pct(50.0),
                p95_us: a.pct(95.0),
                p99_us: a.pct(99.0),
            }
        })
        .collect()
}

/// A level for people: `8`, `12.5`.
pub fn fmt_level(l: f64) -> String {
    if (l - l.round()).abs() < 1e-6 {
        format!("{}", l.round() as i64)
    } else {
        format!("{l:.1}")
    }
}

fn fmt_us(us: u64) -> String {
    let us = us as f64;
    if us < 1000.0 {
        format!("{us:.0}µs")
    } else if us < 1_000_000.0 {
        format!("{:.1}ms", us / 1000.0)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// How many loaded levels after a breaking level must break too for it to
/// be the knee (all that are left when fewer remain): one noisy stage never
/// decides the knee.
pub const PERSIST: usize = 2;

/// A level that does not scale from the base, and why.
struct Break {
    /// `throughput`, `p99` or `errors`.
    reason: &'static str,
    /// The numbers, in words.
    evidence: String,
    /// The level and the figure that broke, short: `16 connections (27% of
    /// proportional throughput)`.
    short: String,
}

/// A level with its unit for people: `1 connection`, `8 connections`,
/// `200 req/s`.
fn level_with_unit(l: f64, unit: &str) -> String {
    let n = fmt_level(l);
    match unit {
        "req/s" => format!("{n} {unit}"),
        _ if n == "1" => format!("{n} {}", unit.trim_end_matches('s')),
        _ => format!("{n} {unit}"),
    }
}

/// Throughput per unit of load for people: `100.0 req/s per connection`,
/// `98% of the offered rate`.
fn per_unit(p: &LevelPoint, unit: &str) -> String {
    let x = p.requests_per_sec / p.level;
    match unit {
        "req/s" => format!("{:.0}% of the offered rate", x * 100.0),
        _ => format!("{x:.1} req/s per {}", unit.trim_end_matches('s')),
    }
}

/// Whether level `p` breaks from `base` (throughput under [`SCALING`] ×
/// proportional, p99 above the bound, errors over 1 %), first reason first.
fn level_break(base: &LevelPoint, p: &LevelPoint, unit: &str) -> Option<Break> {
    let p99_bound = (base.p99_us as f64 * P99_FACTOR).max(base.p99_us as f64 + 1000.0);
    let expected = base.requests_per_sec * p.level / base.level;
    let at = level_with_unit(p.level, unit);
    let from = level_with_unit(base.level, unit);
    if p.requests_per_sec < SCALING * expected {
        let share = p.requests_per_sec / expected.max(1e-9) * 100.0;
        Some(Break {
            reason: "throughput",
            evidence: format!(
                "at {at} throughput was {:.1} req/s, {share:.0}% of the {expected:.1} req/s that \
                 proportional scaling from {from} ({:.1} req/s) predicts; p99 went from {} to {}",
                p.requests_per_sec,
                base.requests_per_sec,
                fmt_us(base.p99_us),
                fmt_us(p.p99_us)
            ),
            short: format!("{at} ({share:.0}% of proportional throughput)"),
        })
    } else if p.p99_us as f64 > p99_bound {
        Some(Break {
            reason: "p99",
            evidence: format!(
                "at {at} p99 was {}, {:.1}× the {} at {from} (the bound is {P99_FACTOR}×); \
                 throughput {:.1} req/s",
                fmt_us(p.p99_us),
                p.p99_us as f64 / (base.p99_us.max(1)) as f64,
                fmt_us(base.p99_us),
                p.requests_per_sec
            ),
            short: format!("{at} (p99 {})", fmt_us(p.p99_us)),
        })
    } else if p.error_share > 0.01 && base.error_share <= 0.01 {
        Some(Break {
            reason: "errors",
            evidence: format!(
                "at {at} {:.1}% of requests failed or were not 2xx (at {from}: {:.1}%)",
                p.error_share * 100.0,
                base.error_share * 100.0
            ),
            short: format!("{at} ({:.1}% errors)", p.error_share * 100.0),
        })
    } else {
        None
    }
}

/// The level the others are judged from: the first loaded level, unless it
/// is out of line with the next two while those two agree with each other
/// (the second scales to the third): its throughput per unit of load is
/// under [`SCALING`] × the second's (a slow first stage), or the second
/// breaks from it on throughput (a first stage noisy upwards). Then the
/// second level is the base. The index in `loaded` and, when moved, why.
fn pick_base(loaded: &[&LevelPoint], unit: &str) -> (usize, Option<String>) {
    if loaded.len() < 3 {
        return (0, None);
    }
    let (a, b, c) = (loaded[0], loaded[1], loaded[2]);
    let per = |p: &LevelPoint| p.requests_per_sec / p.level;
    let next_agree = level_break(b, c, unit).is_none();
    let low = per(a) < SCALING * per(b);
    let high = level_break(a, b, unit).is_some_and(|x| x.reason == "throughput");
    if !next_agree || !(low || high) {
        return (0, None);
    }
    let note = format!(
        "the first loaded level ({}, {:.1} req/s: {}) was out of line with the next two \
         ({} and {}, which agree), so {} is the base",
        level_with_unit(a.level, unit),
        a.requests_per_sec,
        per_unit(a, unit),
        per_unit(b, unit),
        per_unit(c, unit),
        level_with_unit(b.level, unit)
    );
    (1, Some(note))
}

/// The knee by load levels: None when there are fewer than two loaded levels
/// or when no level broke for good (see the module text for the rule). A
/// level that breaks counts only when the next [`PERSIST`] loaded levels
/// (those that are left) break too; a break that does not persist is a dip,
/// named in the evidence of a later knee. The first loaded level is the base
/// unless it is out of line with the next two ([`pick_base`]).
pub fn band_knee(plan: &StagePlan, series: &[SeriesPoint], rule: &ExpectStatus) -> Option<Knee> {
    let pts = by_level(plan, series, rule);
    let first = pts.iter().position(|p| p.requests_per_sec > 0.0)?;
    let loaded: Vec<&LevelPoint> = pts[first..].iter().collect();
    let unit = plan.unit_name();
    let (base_i, base_note) = pick_base(&loaded, unit);
    let base = loaded[base_i];
    let rest = &loaded[base_i + 1..];
    let breaks: Vec<Option<Break>> = rest.iter().map(|p| level_break(base, p, unit)).collect();
    let mut dips: Vec<String> = Vec::new();
    for (j, b) in breaks.iter().enumerate() {
        let Some(b) = b else { continue };
        let after = &breaks[j + 1..(j + 1 + PERSIST).min(breaks.len())];
        if !after.iter().all(Option::is_some) {
            dips.push(level_with_unit(rest[j].level, unit));
            continue;
        }
        let ok = if j == 0 { base } else { rest[j - 1] };
        let mut evidence = b.evidence.clone();
        if after.is_empty() {
            evidence.push_str("; it is the last level, so no later level could confirm it");
        } else {
            let shorts: Vec<&str> = after.iter().flatten().map(|x| x.short.as_str()).collect();
            evidence.push_str(&format!(
                "; it persisted at the next level{}: {}",
                if shorts.len() > 1 { "s" } else { "" },
                shorts.join(", ")
            ));
        }
        if !dips.is_empty() {
            evidence.push_str(&format!(
                "; the dip{} at {} did not persist (the next level scaled again)",
                if dips.len() > 1 { "s" } else { "" },
                dips.join(", ")
            ));
        }
        if let Some(n) = &base_note {
            evidence.push_str(&format!("; {n}"));
        }
        return Some(Knee {
            level: ok.level,
            unit: plan.unit.clone(),
            reason: b.reason.into(),
            evidence,
            low: None,
            high: None,
        });
    }
    None
}

/// The knee of a staged run: on a linear ramp of connections or streams
/// (more than 12 distinct per-second levels, not `--step`), the throughput
/// knee is [`ramp_knee`]'s fit of the per-second series, and a p99 or errors
/// knee of the level bands counts only when it comes before that fit's
/// range; band levels are said as whole numbers. Otherwise the level rule
/// ([`band_knee`]). None when every level scaled.
pub fn find_knee(plan: &StagePlan, series: &[SeriesPoint], rule: &ExpectStatus) -> Option<Knee> {
    let band = band_knee(plan, series, rule);
    if plan.step || plan.unit == "rps" {
        return band;
    }
    let mut distinct: Vec<f64> = series
        .iter()
        .filter(|p| p.t as f64 + 1.0 <= plan.total_s() + 1e-9)
        .map(|p| plan.second_level(p.t))
        .filter(|l| *l > 0.0)
        .collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup_by(|a, b| (*a - *b).abs() < 1e-6);
    if distinct.len() <= 12 {
        return band;
    }
    let band = band.map(|mut k| {
        k.level = k.level.round().max(1.0);
        k
    });
    let fit = ramp_knee(plan, series);
    match (band, fit) {
        (Some(b), Some(f)) if b.reason != "throughput" && b.level < f.low.unwrap_or(f.level) => {
            Some(b)
        }
        (_, Some(f)) => Some(f),
        (Some(b), None) if b.reason != "throughput" => Some(b),
        _ => None,
    }
}

/// The throughput knee of a linear ramp, from the per-second series: the
/// whole number of connections `K` whose model "throughput = a × min(level,
/// K)" (the level taken every 0.1 s inside each second) fits the seconds
/// best (least squares). The range is every `K` whose misfit is within
/// 4 σ² of the best (σ² the best fit's residual variance: about two standard
/// errors), so noisy data gives "between 9 and 11". A knee only when no
/// knee (`K` = the top level) is outside that range, the data goes past the
/// range, and the top level's throughput is under [`SCALING`] × proportional
/// (`K`/top < 0.8).
pub fn ramp_knee(plan: &StagePlan, series: &[SeriesPoint]) -> Option<Knee> {
    let end = plan.total_s();
    let secs: Vec<([f64; 10], f64)> = series
        .iter()
        .filter(|p| p.t as f64 + 1.0 <= end + 1e-9)
        .map(|p| {
            let mut ls = [0.0; 10];
            for (k, l) in ls.iter_mut().enumerate() {
                *l = plan.effective_at(p.t as f64 + 0.05 + k as f64 * 0.1);
            }
            (ls, p.requests as f64)
        })
        .filter(|(ls, _)| ls.iter().any(|l| *l > 0.0))
        .collect();
    let top = secs
        .iter()
        .flat_map(|(ls, _)| ls.iter().copied())
        .fold(0.0f64, f64::max)
        .round() as u64;
    if secs.len() < 8 || !(3..=100_000).contains(&top) {
        return None;
    }
    // Misfit and slope for each candidate K (1..=top); K = top is "no knee".
    let fit = |k: f64| {
        let (mut sxy, mut sxx) = (0.0, 0.0);
        let xs: Vec<f64> = secs
            .iter()
            .map(|(ls, y)| {
                let x = ls.iter().map(|l| l.min(k)).sum::<f64>() / 10.0;
                sxy += x * y;
                sxx += x * x;
                x
            })
            .collect();
        let a = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        let sse: f64 = xs
            .iter()
            .zip(&secs)
            .map(|(x, (_, y))| (y - a * x).powi(2))
            .sum();
        (sse, a)
    };
    // Bounded: at most 2,000 candidates, evenly spread over 1..=top.
    let stride = top.div_ceil(2000).max(1);
    let cands: Vec<(u64, f64, f64)> = (1..=top)
        .filter(|k| k.is_multiple_of(stride) || *k == 1 || *k == top)
        .map(|k| {
            let (sse, a) = fit(k as f64);
            (k, sse, a)
        })
        .collect();
    let best = cands.iter().min_by(|x, y| x.1.total_cmp(&y.1)).copied()?;
    let (k, sse, a) = best;
    if a <= 0.0 || k >= top {
        return None;
    }
    let var = (sse / (secs.len() as f64 - 2.0)).max(1e-9);
    let within: Vec<u64> = cands
        .iter()
        .filter(|c| c.1 - sse <= 4.0 * var)
        .map(|c| c.0)
        .collect();
    let (low, high) = (within[0], within[within.len() - 1]);
    let (_, linear_sse, _) = cands[cands.len() - 1];
    if high >= top || linear_sse - sse <= 4.0 * var || (k as f64) / (top as f64) >= SCALING {
        return None;
    }
    let unit = plan.unit_name();
    let flat = a * k as f64;
    let range = if low == high {
        String::new()
    } else {
        format!("; the data fits any knee between {low} and {high} {unit} as well")
    };
    Some(Knee {
        level: k as f64,
        unit: plan.unit.clone(),
        reason: "throughput".into(),
        evidence: format!(
            "over the ramp to {top} {unit}, throughput grew by {a:.1} req/s per {} up to {k} \
             and stayed near {flat:.1} req/s above it (least-squares fit of {} one-second \
             samples{range})",
            unit.trim_end_matches('s'),
            secs.len()
        ),
        low: (low != high).then_some(low as f64),
        high: (low != high).then_some(high as f64),
    })
}

/// Fills `rec.stages` and `rec.knee` from its stage plan and series (clears
/// them when the run had no stages), and the server per stage
/// ([`analyze_server`]).
pub fn analyze(rec: &mut RunRecord) {
    match &rec.config.stages {
        Some(plan) => {
            let rule = rec.config.status_rule();
            rec.stages = summarize(plan, &rec.series, &rule);
            rec.knee = find_knee(plan, &rec.series, &rule);
        }
        None => {
            rec.stages.clear();
            rec.knee = None;
        }
    }
    analyze_server(rec);
}

/// Fills each stage's `server` from `rec.server_watch`
/// ([`ServerWatch::windows`](crate::watch::ServerWatch::windows) over the
/// stage's `[start_s, end_s]`); empties it without a watch. Called again
/// whenever the watch data changes (the watch attached after the run, a
/// remote `redline watch` record merged in).
pub fn analyze_server(rec: &mut RunRecord) {
    for s in &mut rec.stages {
        s.server = match &rec.server_watch {
            Some(w) => w.windows(&rec.started_at, s.start_s, s.end_s),
            None => Vec::new(),
        };
        s.status = rec
            .server_status
            .as_ref()
            .and_then(|w| w.window(&rec.started_at, s.start_s, s.end_s));
    }
    rec.diagnosis = crate::watch::diagnose(rec);
}

#[cfg(test)]
mod tests;
