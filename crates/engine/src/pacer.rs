//! The schedule: a pure function from request number (open loop) or time
//! (closed loop) to what the load should be.
//!
//! Load over time is a [`Profile`]: a piecewise-linear level (requests/s in
//! open loop, connections in closed loop) built from `--stages`, or a constant.
//! Open loop: the global schedule's `n`-th tick is sent when the cumulative
//! count `∫rate` reaches `n`; each segment's cumulative is a quadratic, so the
//! send time comes from its closed-form inverse (no numeric search, no drift).
//! Each worker owns one [`Pacer`] and takes every `workers`-th tick starting at
//! its `index`, so the workers' schedules interleave into exactly the global one;
//! in a `--segment` run each worker sends its stripe of the segment's ticks of
//! the whole run's schedule ([`Pacer::striped`]), so the machines together
//! send exactly the single-machine schedule. Poisson and
//! uniform arrivals draw their gaps in the cumulative ("operational time")
//! space and map them through the same inverse: a non-homogeneous Poisson
//! process by time change, seeded so a run can be repeated.

use crate::plan::Arrival;
use redline_stats::rng::SplitMix64;
use redline_stats::segment::{Segment, Stripe};
use std::time::Duration;

/// One stage of `--stages`: reach `level` over `duration` (ramp), or hold it (step).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    /// How long the stage lasts.
    pub duration: Duration,
    /// Connections (closed loop) or requests/s (open loop) at the stage's end.
    pub level: f64,
}

/// Parses `30s:10,60s:10,30s:70` (duration:level pairs).
pub fn parse_stages(s: &str) -> Result<Vec<Stage>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let bad = |why: &str| {
            format!("invalid stage '{part}' in --stages: {why} (example: 30s:10,60s:10,30s:70)")
        };
        let (d, l) = part
            .rsplit_once(':')
            .ok_or_else(|| bad("expected DURATION:LEVEL"))?;
        let duration = crate::plan::parse_duration(d).map_err(|e| bad(&e))?;
        if duration < Duration::from_millis(1) {
            return Err(bad("the duration must be at least 1ms"));
        }
        let level: f64 = l
            .trim()
            .parse()
            .map_err(|_| bad("the level must be a number"))?;
        if !level.is_finite() || level < 0.0 {
            return Err(bad("the level must be a non-negative number"));
        }
        out.push(Stage { duration, level });
        if out.len() > 10_000 {
            return Err("--stages: at most 10,000 stages".into());
        }
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Seg {
    t0: f64,
    /// End (seconds); infinite for a constant profile.
    t1: f64,
    l0: f64,
    l1: f64,
    /// Cumulative ∫level up to `t0`.
    m0: f64,
}

impl Seg {
    fn slope(&self) -> f64 {
        if self.t1.is_finite() && self.t1 > self.t0 {
            (self.l1 - self.l0) / (self.t1 - self.t0)
        } else {
            0.0
        }
    }
    fn level(&self, t: f64) -> f64 {
        self.l0 + self.slope() * (t - self.t0)
    }
    fn total(&self) -> f64 {
        if self.t1.is_finite() {
            (self.l0 + self.l1) / 2.0 * (self.t1 - self.t0)
        } else if self.l0 > 0.0 {
            f64::INFINITY
        } else {
            0.0
        }
    }
}

/// A level over time: piecewise linear, from `--stages` or constant.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    segs: Vec<Seg>,
}

impl Profile {
    /// A constant level forever.
    pub fn constant(level: f64) -> Profile {
        Profile {
            segs: vec![Seg {
                t0: 0.0,
                t1: f64::INFINITY,
                l0: level,
                l1: level,
                m0: 0.0,
            }],
        }
    }

    /// From stages: ramps (the level moves linearly from the previous stage's
    /// level, 0 before the first, to this stage's), or steps (`step`: the level
    /// jumps to the stage's at its start and holds).
    pub fn from_stages(stages: &[Stage], step: bool) -> Profile {
        let mut segs = Vec::with_capacity(stages.len());
        let (mut t, mut prev, mut m) = (0.0f64, 0.0f64, 0.0f64);
        for s in stages {
            let d = s.duration.as_secs_f64();
            let l0 = if step { s.level } else { prev };
            let seg = Seg {
                t0: t,
                t1: t + d,
                l0,
                l1: s.level,
                m0: m,
            };
            m += seg.total();
            t += d;
            prev = s.level;
            segs.push(seg);
        }
        if segs.is_empty() {
            return Profile::constant(0.0);
        }
        Profile { segs }
    }

    /// Where the profile ends (seconds; infinite for a constant one).
    pub fn end(&self) -> f64 {
        self.segs.last().map_or(0.0, |s| s.t1)
    }

    /// The highest level reached.
    pub fn max_level(&self) -> f64 {
        self.segs.iter().map(|s| s.l0.max(s.l1)).fold(0.0, f64::max)
    }

    /// The highest level reached up to time `t`.
    pub fn max_level_until(&self, t: f64) -> f64 {
        let mut m = 0.0f64;
        for s in &self.segs {
            if s.t0 > t {
                break;
            }
            m = m.max(s.l0).max(s.level(t.min(s.t1)));
        }
        m
    }

    fn seg_at(&self, t: f64) -> Option<&Seg> {
        let i = self.segs.partition_point(|s| s.t1 <= t);
        self.segs.get(i)
    }

    /// The level at `t` seconds (0 after the end).
    pub fn level_at(&self, t: f64) -> f64 {
        self.seg_at(t.max(0.0)).map_or(0.0, |s| s.level(t.max(0.0)))
    }

    /// Requests due by `t` (open loop): ∫₀ᵗ level.
    pub fn cumulative(&self, t: f64) -> f64 {
        match self.seg_at(t.max(0.0)) {
            Some(s) => {
                let tau = t.max(0.0) - s.t0;
                s.m0 + s.l0 * tau + s.slope() * tau * tau / 2.0
            }
            None => self.segs.last().map_or(0.0, |s| s.m0 + s.total()),
        }
    }

    /// Closed loop: the connections wanted at `t`: the level rounded, but at least
    /// 1 while a stage whose level (at its start or end) is ≥ 1 runs.
    pub fn connections_at(&self, t: f64) -> u64 {
        match self.seg_at(t.max(0.0)) {
            Some(s) => {
                let n = s.level(t.max(0.0)).round().max(0.0) as u64;
                if s.l0.max(s.l1) >= 1.0 {
                    n.max(1)
                } else {
                    n
                }
            }
            None => 0,
        }
    }

    /// When the closed-loop level should next be checked after `t`: the next
    /// stage boundary, and every 10 ms during a ramp. None after the end.
    pub fn next_check(&self, t: f64) -> Option<f64> {
        let s = self.seg_at(t.max(0.0))?;
        if s.l0 != s.l1 {
            Some((t + 0.01).min(s.t1))
        } else if s.t1.is_finite() {
            Some(s.t1)
        } else {
            None
        }
    }

    /// The time at which the cumulative count reaches `m` (None: never).
    /// `hint` is the segment to start from (calls with growing `m` reuse it).
    fn invert(&self, m: f64, hint: &mut usize) -> Option<f64> {
        while let Some(s) = self.segs.get(*hint) {
            let mm = m - s.m0;
            let total = s.total();
            if mm < total {
                if mm <= 0.0 {
                    return Some(s.t0);
                }
                // Solve l0·τ + b·τ²/2 = mm; this form is stable for any sign of b
                // and for b = 0 (τ = mm / l0).
                let (a, b) = (s.l0, s.slope());
                let disc = (a * a + 2.0 * b * mm).max(0.0);
                let den = a + disc.sqrt();
                if den > 0.0 {
                    return Some((s.t0 + 2.0 * mm / den).min(s.t1));
                }
            }
            *hint += 1;
        }
        None
    }
}

/// Intended send times for one worker.
#[derive(Debug, Clone)]
pub struct Pacer {
    arrival: Arrival,
    profile: Profile,
    /// The global ticks this worker sends (worker `i` of `t`: `i + k·t`; in a
    /// `--segment` run, its share of the segment's ticks of the whole schedule).
    stripe: Stripe,
    k: u64,
    /// Position in cumulative-count space (random arrivals).
    m: f64,
    seg: usize,
    limit: Option<u64>,
    end: Option<Duration>,
    rng: SplitMix64,
}

impl Pacer {
    /// The pacer of worker `index` of `workers` for a global `rate` (req/s),
    /// stopping after `limit` requests (this worker's share) or at `end`.
    pub fn new(
        arrival: Arrival,
        rate: f64,
        index: usize,
        workers: usize,
        limit: Option<u64>,
        end: Option<Duration>,
        seed: u64,
    ) -> Pacer {
        Pacer::with_profile(
            arrival,
            Profile::constant(rate),
            index,
            workers,
            limit,
            end,
            seed,
        )
    }

    /// The pacer of worker `index` of `workers` for a global rate that follows
    /// `profile`: it takes global ticks `index`, `index + workers`, …
    pub fn with_profile(
        arrival: Arrival,
        profile: Profile,
        index: usize,
        workers: usize,
        limit: Option<u64>,
        end: Option<Duration>,
        seed: u64,
    ) -> Pacer {
        let stripe = Stripe {
            period: workers.max(1) as u64,
            offsets: vec![index as u64],
        };
        Pacer::striped(arrival, profile, stripe, limit, end, seed)
    }

    /// The pacer that sends the global ticks of `stripe` (see
    /// [`redline_stats::segment::Segment::stripe`]) of the whole run's
    /// `profile`: tick `k` of the whole schedule is due when the cumulative
    /// count reaches `k`, whichever machine and worker sends it.
    pub fn striped(
        arrival: Arrival,
        profile: Profile,
        stripe: Stripe,
        limit: Option<u64>,
        end: Option<Duration>,
        seed: u64,
    ) -> Pacer {
        let first = stripe.offsets.first().copied().unwrap_or(0);
        Pacer {
            arrival,
            profile,
            k: 0,
            m: first as f64,
            seg: 0,
            limit,
            end,
            // Seeded by the first global tick: unique to each worker of each segment.
            rng: SplitMix64(seed ^ first.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            stripe,
        }
    }

    /// The mean gap between this worker's sends at the profile's highest rate.
    pub fn interval(&self) -> Duration {
        let max = self.profile.max_level();
        if max > 0.0 {
            Duration::from_secs_f64((self.stripe.spacing() / max).min(1e6))
        } else {
            Duration::from_secs(1_000_000)
        }
    }

    /// The next intended send time as an offset from the start, or `None` when the schedule is over.
    pub fn next_send(&mut self) -> Option<Duration> {
        if let Some(l) = self.limit {
            if self.k >= l {
                return None;
            }
        }
        let m = match self.arrival {
            // Computed from k, not accumulated, so no rounding drift over long runs.
            Arrival::Constant => self.stripe.tick(self.k) as f64,
            Arrival::Poisson => {
                let at = self.m;
                let u = self.rng.unit_open();
                self.m += -u.ln() * self.stripe.spacing();
                at
            }
            Arrival::Uniform => {
                let at = self.m;
                self.m += self.rng.unit_open() * 2.0 * self.stripe.spacing();
                at
            }
        };
        let at = self.profile.invert(m, &mut self.seg)?;
        let at = Duration::from_secs_f64(at.max(0.0));
        if let Some(end) = self.end {
            if at >= end {
                return None;
            }
        }
        self.k += 1;
        Some(at)
    }
}

/// Closed loop: the connections worker `index` of `workers` keeps open over time.
#[derive(Debug, Clone)]
pub struct Levels {
    profile: Profile,
    index: u64,
    workers: u64,
    segment: Option<Segment>,
}

impl Levels {
    /// Worker `index`'s exact share of the profile's connections.
    pub fn new(profile: Profile, index: usize, workers: usize) -> Levels {
        Levels {
            profile,
            index: index as u64,
            workers: workers.max(1) as u64,
            segment: None,
        }
    }

    /// In a `--segment` run the profile is the whole run's: this segment
    /// keeps its exact share of each level.
    pub fn with_segment(mut self, segment: Option<Segment>) -> Levels {
        self.segment = segment;
        self
    }

    /// This worker's connections at `t` seconds.
    pub fn active_at(&self, t: f64) -> u64 {
        let whole = self.profile.connections_at(t);
        let mine = self.segment.as_ref().map_or(whole, |s| s.scale_int(whole));
        share(mine, self.workers, self.index)
    }

    /// The most connections (HTTP/2: streams) [`Levels::active_at`] gives
    /// this worker over the whole profile.
    pub fn peak(&self) -> u64 {
        let whole = self.profile.max_level().round().max(0.0) as u64;
        let mine = self.segment.as_ref().map_or(whole, |s| s.scale_int(whole));
        share(mine, self.workers, self.index)
    }

    /// When to check again (seconds), see [`Profile::next_check`].
    pub fn next_check(&self, t: f64) -> Option<f64> {
        self.profile.next_check(t)
    }
}

/// The `i`-th of `parts` shares of `total`, the remainder going to the first
/// shares (workers' shares of connections, requests and stage levels).
pub(crate) fn share(total: u64, parts: u64, i: u64) -> u64 {
    total / parts + u64::from(i < total % parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_until(p: &mut Pacer, secs: f64) -> u64 {
        let mut n = 0;
        while let Some(t) = p.next_send() {
            if t.as_secs_f64() >= secs {
                break;
            }
            n += 1;
            assert!(n < 10_000_000);
        }
        n
    }

    fn stages(s: &str) -> Vec<Stage> {
        parse_stages(s).unwrap()
    }

    #[test]
    fn constant_rate_count_matches() {
        for workers in [1usize, 2, 3, 8] {
            let mut total = 0;
            for i in 0..workers {
                let mut p = Pacer::new(Arrival::Constant, 200.0, i, workers, None, None, 1);
                total += count_until(&mut p, 3.0);
            }
            assert_eq!(total, 600, "workers {workers}");
        }
    }

    #[test]
    fn workers_interleave_into_the_global_schedule() {
        let mut all = Vec::new();
        for i in 0..4 {
            let mut p = Pacer::new(Arrival::Constant, 1000.0, i, 4, Some(25), None, 1);
            while let Some(t) = p.next_send() {
                all.push(t.as_nanos());
            }
        }
        all.sort();
        for (k, t) in all.iter().enumerate() {
            let want = k as u128 * 1_000_000;
            assert!(t.abs_diff(want) <= 1, "{k}: {t} vs {want}");
        }
    }

    /// Segments of a run, each with its own workers, send exactly the
    /// single-machine schedule between them: tick k at k / rate, once.
    #[test]
    fn segments_together_send_the_whole_schedule() {
        for (seq, workers) in [("0,1/3,2/3,1", 2u64), ("0,1/4,1", 3), ("0,1/2,3/4,1", 1)] {
            let q = redline_stats::segment::Sequence::parse(seq).unwrap();
            let mut all = Vec::new();
            let mut per_segment = Vec::new();
            for i in 0..q.len() {
                let seg = q.segment(i).unwrap();
                let mut n = 0;
                for w in 0..workers {
                    let st = seg.stripe(w, workers);
                    let limit = Some(st.count_below(100));
                    let mut p = Pacer::striped(
                        Arrival::Constant,
                        Profile::constant(1000.0),
                        st,
                        limit,
                        None,
                        1,
                    );
                    while let Some(t) = p.next_send() {
                        all.push(t.as_nanos());
                        n += 1;
                        assert!(n <= 100);
                    }
                }
                assert_eq!(n, seg.scale_int(100), "{seq} segment {i}");
                per_segment.push(n);
            }
            all.sort();
            assert_eq!(all.len(), 100, "{seq}: {per_segment:?}");
            for (k, t) in all.iter().enumerate() {
                let want = k as u128 * 1_000_000;
                assert!(t.abs_diff(want) <= 1, "{seq} #{k}: {t} vs {want}");
            }
        }
    }

    #[test]
    fn random_arrivals_keep_the_mean_rate() {
        for arrival in [Arrival::Poisson, Arrival::Uniform] {
            let mut p = Pacer::new(
                arrival,
                1000.0,
                0,
                1,
                None,
                Some(Duration::from_secs(100)),
                7,
            );
            let n = count_until(&mut p, 100.0) as f64;
            assert!((n - 100_000.0).abs() < 1500.0, "{arrival:?}: {n}");
        }
    }

    #[test]
    fn limits_stop_the_schedule() {
        let mut p = Pacer::new(Arrival::Constant, 10.0, 0, 1, Some(3), None, 1);
        assert_eq!(count_until(&mut p, 100.0), 3);
        let mut p = Pacer::new(
            Arrival::Constant,
            10.0,
            0,
            1,
            None,
            Some(Duration::from_secs(1)),
            1,
        );
        assert_eq!(count_until(&mut p, 100.0), 10);
    }

    #[test]
    fn stage_parsing() {
        let s = stages("30s:10, 1m:10,500ms:70.5");
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].duration, Duration::from_secs(60));
        assert_eq!(s[2].level, 70.5);
        for bad in [
            "", "10", "10s", "x:1", "10s:-1", "10s:abc", "0s:5", "10s:inf",
        ] {
            assert!(parse_stages(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ramp_levels_and_cumulative() {
        // 0 → 10 over 10 s, hold 10 for 10 s, down to 0 over 10 s.
        let p = Profile::from_stages(&stages("10s:10,10s:10,10s:0"), false);
        assert_eq!(p.end(), 30.0);
        assert!((p.level_at(5.0) - 5.0).abs() < 1e-9);
        assert!((p.level_at(15.0) - 10.0).abs() < 1e-9);
        assert!((p.level_at(25.0) - 5.0).abs() < 1e-9);
        assert_eq!(p.level_at(31.0), 0.0);
        assert!((p.cumulative(10.0) - 50.0).abs() < 1e-9);
        assert!((p.cumulative(20.0) - 150.0).abs() < 1e-9);
        assert!((p.cumulative(30.0) - 200.0).abs() < 1e-9);
        // Closed loop: at least one connection while a stage with level ≥ 1 runs.
        assert_eq!(p.connections_at(0.0), 1);
        assert_eq!(p.connections_at(4.6), 5);
        assert_eq!(p.max_level_until(5.0), 5.0);
        let s = Profile::from_stages(&stages("1s:1,1s:2,1s:4"), true);
        assert_eq!(
            [0.0, 0.99, 1.0, 2.5, 3.0].map(|t| s.connections_at(t)),
            [1, 1, 2, 4, 0]
        );
        assert_eq!(s.next_check(0.5), Some(1.0));
        assert_eq!(p.next_check(0.5), Some(0.51));
    }

    /// A worker's peak is the most its share of the level ever is, and the
    /// workers' peaks add up to the profile's top level.
    #[test]
    fn level_peaks_bound_every_share() {
        let prof = Profile::from_stages(&stages("2s:7,1s:2,2s:11,1s:0"), false);
        for workers in [1usize, 2, 3, 5] {
            let mut sum = 0;
            for i in 0..workers {
                let l = Levels::new(prof.clone(), i, workers);
                let most = (0..=600)
                    .map(|k| l.active_at(k as f64 / 100.0))
                    .max()
                    .unwrap();
                assert_eq!(l.peak(), most, "worker {i} of {workers}");
                sum += l.peak();
            }
            assert_eq!(sum, 11);
        }
    }

    /// The n-th send of the global schedule is where the cumulative reaches n,
    /// for ramps up, holds, ramps down and steps, striped over any worker count.
    #[test]
    fn staged_schedule_inverts_the_cumulative() {
        for (spec, step) in [
            ("2s:100,1s:100,2s:0", false),
            ("1s:50,1s:200,1s:10", true),
            ("1s:0,1s:300", false),
        ] {
            let prof = Profile::from_stages(&stages(spec), step);
            let total = prof.cumulative(prof.end());
            for workers in [1usize, 3] {
                let mut all = Vec::new();
                for i in 0..workers {
                    let mut p = Pacer::with_profile(
                        Arrival::Constant,
                        prof.clone(),
                        i,
                        workers,
                        None,
                        Some(Duration::from_secs_f64(prof.end())),
                        1,
                    );
                    while let Some(t) = p.next_send() {
                        all.push(t.as_secs_f64());
                        assert!(all.len() < 100_000);
                    }
                }
                all.sort_by(f64::total_cmp);
                assert!(
                    (all.len() as f64 - total).abs() <= 1.0,
                    "{spec}: {} sends for {total}",
                    all.len()
                );
                for (n, t) in all.iter().enumerate() {
                    let c = prof.cumulative(*t);
                    assert!((c - n as f64).abs() < 1e-6, "{spec} #{n}: cum {c} at {t}");
                }
            }
        }
    }

    #[test]
    fn random_arrivals_follow_a_ramp() {
        let prof = Profile::from_stages(&stages("20s:1000"), false);
        let mut p = Pacer::with_profile(
            Arrival::Poisson,
            prof.clone(),
            0,
            1,
            None,
            Some(Duration::from_secs(20)),
            3,
        );
        let first_half = count_until(&mut p.clone(), 10.0) as f64;
        let all = count_until(&mut p, 20.0) as f64;
        // ∫ over [0,10] = 2,500 and over [0,20] = 10,000 (±3 %).
        assert!((first_half - 2_500.0).abs() < 100.0, "{first_half}");
        assert!((all - 10_000.0).abs() < 300.0, "{all}");
    }
}
