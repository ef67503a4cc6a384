//! Exact shares of one run split over several load generators, in integers
//! only (k6's execution segments are the model).
//!
//! A *sequence* `0, 1/3, 2/3, 1` cuts `[0, 1)` into segments; a *segment* is
//! one consecutive pair (`0:1/3`), or `I/N` for the I-th (0-based) of N equal
//! shares. With `L` the least common denominator of the sequence, the whole
//! is a periodic stream of positions `0, 1, 2, …` and each period of `L`
//! positions is dealt out among the segments in proportion to their shares,
//! striped (each position goes to the segment furthest behind its share, so
//! every prefix of the stream is within one position of proportional). An
//! integer quantity `total` (connections, requests, stage levels) is then the
//! positions `< total`: every segment's [`Segment::scale_int`] adds up to
//! `total` exactly for every total, and never shrinks as the total grows.
//! Open-loop send ticks are the same positions: tick `k` of the global
//! schedule (sent at `k / rate`) belongs to the segment that owns position
//! `k`, so all segments together send exactly the single-machine schedule
//! ([`Segment::stripe`] hands a segment's ticks on to its worker threads).

use std::fmt;

/// The largest least common denominator accepted (the period is computed position by position).
pub const MAX_PERIOD: u64 = 1_000_000;

/// The most segments a sequence may have (agents, `--segment I/N`, `k8s
/// --parallel`): checked before anything is allocated for them (the
/// striping costs segments × period).
pub const MAX_SEGMENTS: u64 = 1000;

/// A fraction in `[0, 1]`, reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Frac {
    /// Numerator.
    pub num: u64,
    /// Denominator (> 0).
    pub den: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Frac {
    /// `num / den`, reduced; None for a zero denominator or a value above 1.
    pub fn new(num: u64, den: u64) -> Option<Frac> {
        if den == 0 || num > den {
            return None;
        }
        let g = gcd(num, den).max(1);
        Some(Frac {
            num: num / g,
            den: den / g,
        })
    }

    /// Parses `0`, `1`, `a/b` (integers only: shares are exact).
    pub fn parse(s: &str) -> Result<Frac, String> {
        let s = s.trim();
        let bad = || format!("{s:?} is not a fraction between 0 and 1 (write 0, 1/3, 2/3, 1)");
        let (n, d) = match s.split_once('/') {
            Some((n, d)) => (n.trim(), d.trim()),
            None => (s, "1"),
        };
        let n: u64 = n.parse().map_err(|_| bad())?;
        let d: u64 = d.parse().map_err(|_| bad())?;
        Frac::new(n, d).ok_or_else(bad)
    }
}

impl fmt::Display for Frac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.num == 0 {
            write!(f, "0")
        } else if self.num == self.den {
            write!(f, "1")
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

/// A full sequence of segment boundaries from 0 to 1 and the striped
/// assignment of each period's positions to its segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    bounds: Vec<Frac>,
    period: u64,
    /// For each segment, its positions within one period, ascending.
    owned: Vec<Vec<u64>>,
}

impl Sequence {
    /// `0, 1/N, 2/N, …, 1`: N equal shares.
    pub fn equal(n: u64) -> Result<Sequence, String> {
        if n == 0 {
            return Err("the number of segments must be at least 1".into());
        }
        if n > MAX_SEGMENTS {
            return Err(format!(
                "{n} segments: at most {MAX_SEGMENTS} (one per load generator)"
            ));
        }
        Sequence::new((0..=n).map(|i| Frac::new(i, n).expect("i <= n")).collect())
    }

    /// Parses `0,1/3,2/3,1`.
    pub fn parse(s: &str) -> Result<Sequence, String> {
        if s.split(',').count() as u64 > MAX_SEGMENTS + 1 {
            return Err(format!(
                "--segment-sequence: more than {MAX_SEGMENTS} segments"
            ));
        }
        let bounds = s
            .split(',')
            .map(Frac::parse)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("--segment-sequence: {e}"))?;
        Sequence::new(bounds)
    }

    /// From boundaries: strictly increasing, starting at 0 and ending at 1.
    pub fn new(bounds: Vec<Frac>) -> Result<Sequence, String> {
        if bounds.len() as u64 > MAX_SEGMENTS + 1 {
            return Err(format!("more than {MAX_SEGMENTS} segments"));
        }
        let shown = || {
            bounds
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        if bounds.len() < 2
            || bounds[0].num != 0
            || bounds[bounds.len() - 1] != Frac::new(1, 1).expect("1")
        {
            return Err(format!(
                "segment sequence {} must start at 0 and end at 1",
                shown()
            ));
        }
        if bounds.windows(2).any(|w| !lt(w[0], w[1])) {
            return Err(format!(
                "segment sequence {} must be strictly increasing",
                shown()
            ));
        }
        let mut period = 1u64;
        for b in &bounds {
            period = period / gcd(period, b.den) * b.den;
            if period > MAX_PERIOD {
                return Err(format!(
                    "segment sequence {}: the common denominator is above {MAX_PERIOD}; use simpler fractions",
                    shown()
                ));
            }
        }
        // The striping below costs period × segments steps: bounded.
        if period.saturating_mul(bounds.len() as u64 - 1) > 20 * MAX_PERIOD {
            return Err(format!(
                "segment sequence {}: too many segments for its common denominator {period}; use simpler fractions",
                shown()
            ));
        }
        let shares: Vec<u64> = bounds
            .windows(2)
            .map(|w| scaled(w[1], period) - scaled(w[0], period))
            .collect();
        // Striping: each position goes to the segment furthest behind its
        // share; with deficits scaled by the period they are integers:
        // deficit_j(p) = (p + 1)·share_j − assigned_j·period.
        let mut owned: Vec<Vec<u64>> = shares
            .iter()
            .map(|&s| Vec::with_capacity(s as usize))
            .collect();
        for p in 0..period {
            let mut best = 0usize;
            let mut best_d = i128::MIN;
            for (j, &s) in shares.iter().enumerate() {
                let d = (p as i128 + 1) * s as i128 - owned[j].len() as i128 * period as i128;
                if d > best_d {
                    best_d = d;
                    best = j;
                }
            }
            owned[best].push(p);
        }
        Ok(Sequence {
            bounds,
            period,
            owned,
        })
    }

    /// The boundaries.
    pub fn bounds(&self) -> &[Frac] {
        &self.bounds
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        self.owned.len()
    }

    /// Always false: a sequence has at least one segment.
    pub fn is_empty(&self) -> bool {
        self.owned.is_empty()
    }

    /// The least common denominator: positions repeat their owners every `period`.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// The `i`-th segment (0-based).
    pub fn segment(&self, i: usize) -> Option<Segment> {
        (i < self.len()).then(|| Segment {
            seq: self.clone(),
            index: i,
        })
    }

    /// The segment `from:to`, which must be two consecutive boundaries.
    pub fn find(&self, from: Frac, to: Frac) -> Option<Segment> {
        let i = self
            .bounds
            .windows(2)
            .position(|w| w[0] == from && w[1] == to)?;
        self.segment(i)
    }
}

fn lt(a: Frac, b: Frac) -> bool {
    (a.num as u128) * (b.den as u128) < (b.num as u128) * (a.den as u128)
}

fn scaled(f: Frac, period: u64) -> u64 {
    f.num * (period / f.den)
}

/// One share of a run: a segment of a [`Sequence`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    seq: Sequence,
    index: usize,
}

/// The global send ticks one worker thread of a segment owns: tick
/// `offsets[m % len] + (m / len) · period` is its m-th, sent at tick / rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stripe {
    /// The ticks repeat with this period.
    pub period: u64,
    /// The worker's ticks within one period, ascending.
    pub offsets: Vec<u64>,
}

impl Stripe {
    /// The worker's m-th global tick (0-based).
    pub fn tick(&self, m: u64) -> u64 {
        let n = self.offsets.len() as u64;
        self.offsets[(m % n) as usize] + (m / n) * self.period
    }

    /// `(global_index, global_workers)` when the worker owns one tick per
    /// period: its ticks are then `global_index + k · global_workers`, which
    /// is the pacer's `(i + k·t) / r` with `i = global_index`,
    /// `t = global_workers` and `r` the *global* rate.
    pub fn as_pair(&self) -> Option<(u64, u64)> {
        (self.offsets.len() == 1).then(|| (self.offsets[0], self.period))
    }

    /// How many of the worker's ticks are below global tick `total`: its
    /// share of a run of `total` requests.
    pub fn count_below(&self, total: u64) -> u64 {
        (total / self.period) * self.offsets.len() as u64
            + self.offsets.partition_point(|&x| x < total % self.period) as u64
    }

    /// The mean distance between the worker's ticks (global ticks per own tick).
    pub fn spacing(&self) -> f64 {
        self.period as f64 / self.offsets.len().max(1) as f64
    }
}

impl fmt::Display for Sequence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.bounds.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{b}")?;
        }
        Ok(())
    }
}

impl Segment {
    /// Parses `--segment I/N` (the I-th of N equal shares, 0-based) or
    /// `--segment A:B` (with `sequence`, two consecutive boundaries of it;
    /// without, the sequence `0, A, B, 1`).
    pub fn parse(s: &str, sequence: Option<&str>) -> Result<Segment, String> {
        let s = s.trim();
        if let Some((a, b)) = s.split_once(':') {
            let from = Frac::parse(a).map_err(|e| format!("--segment {s}: {e}"))?;
            let to = Frac::parse(b).map_err(|e| format!("--segment {s}: {e}"))?;
            if !lt(from, to) {
                return Err(format!("--segment {s}: the start must be below the end"));
            }
            let seq = match sequence {
                Some(q) => Sequence::parse(q)?,
                None => {
                    let mut b = vec![Frac::new(0, 1).expect("0")];
                    for f in [from, to, Frac::new(1, 1).expect("1")] {
                        if *b.last().expect("non-empty") != f {
                            b.push(f);
                        }
                    }
                    Sequence::new(b)?
                }
            };
            return seq.find(from, to).ok_or_else(|| {
                format!("--segment {s} is not two consecutive values of --segment-sequence")
            });
        }
        let Some((i, n)) = s.split_once('/') else {
            return Err(format!(
                "--segment {s:?}: write I/N (the I-th of N equal shares, from 0) or A:B (0:1/3)"
            ));
        };
        let bad = || format!("--segment {s:?}: write I/N with whole numbers, 0 <= I < N");
        let i: u64 = i.trim().parse().map_err(|_| bad())?;
        let n: u64 = n.trim().parse().map_err(|_| bad())?;
        if n == 0 || i >= n {
            return Err(bad());
        }
        if sequence.is_some() {
            return Err("--segment-sequence goes with --segment A:B, not I/N".into());
        }
        Sequence::equal(n)?.segment(i as usize).ok_or_else(bad)
    }

    /// Which segment of its sequence this is (0-based).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The sequence it belongs to.
    pub fn sequence(&self) -> &Sequence {
        &self.seq
    }

    /// The start of the segment.
    pub fn from(&self) -> Frac {
        self.seq.bounds[self.index]
    }

    /// The end of the segment.
    pub fn to(&self) -> Frac {
        self.seq.bounds[self.index + 1]
    }

    /// The segment's share as `(numerator, denominator)` over the period.
    pub fn share(&self) -> (u64, u64) {
        (self.seq.owned[self.index].len() as u64, self.seq.period)
    }

    /// This segment's part of an integer quantity (connections, virtual users,
    /// total requests, a stage level): the positions `< total` it owns. The
    /// parts of all segments add up to `total`; each is monotonic in `total`.
    pub fn scale_int(&self, total: u64) -> u64 {
        let own = &self.seq.owned[self.index];
        let p = self.seq.period;
        (total / p) * own.len() as u64 + own.partition_point(|&x| x < total % p) as u64
    }

    /// This segment's part of a rate (requests per second): `rate × share`,
    /// exact up to the float the rate already is.
    pub fn scale_rate(&self, rate: f64) -> f64 {
        let (n, d) = self.share();
        rate * n as f64 / d as f64
    }

    /// The global position of this segment's `j`-th own position (0-based):
    /// its `j`-th connection, virtual user or data row in the whole run's
    /// numbering, so no two segments use the same one.
    pub fn position(&self, j: u64) -> u64 {
        let own = &self.seq.owned[self.index];
        let n = own.len() as u64;
        own[(j % n) as usize] + (j / n) * self.seq.period
    }

    /// Whether this segment owns global tick (position) `k`.
    pub fn owns(&self, k: u64) -> bool {
        self.seq.owned[self.index]
            .binary_search(&(k % self.seq.period))
            .is_ok()
    }

    /// The ticks worker `worker` of `workers` threads in this segment sends:
    /// the segment's own ticks dealt round-robin to its workers. For equal
    /// shares (`I/N`) each worker owns one tick per period and
    /// [`Stripe::as_pair`] gives the pacer's `(i, t)`.
    pub fn stripe(&self, worker: u64, workers: u64) -> Stripe {
        let own = &self.seq.owned[self.index];
        let n = own.len() as u64;
        let t = workers.max(1);
        let worker = worker % t;
        // Local ticks repeat their worker every lcm(n, t), i.e. every
        // lcm(n, t) / n periods of the sequence.
        let l = n / gcd(n, t) * t;
        let periods = l / n;
        let offsets: Vec<u64> = (0..l)
            .filter(|j| j % t == worker)
            .map(|j| (j / n) * self.seq.period + own[(j % n) as usize])
            .collect();
        Stripe {
            period: periods * self.seq.period,
            offsets,
        }
    }
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.from(), self.to())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_and_errors() {
        let s = Segment::parse("1/3", None).unwrap();
        assert_eq!(s.to_string(), "1/3:2/3");
        assert_eq!(s.share(), (1, 3));
        let s = Segment::parse("1/3:2/3", Some("0,1/3,2/3,1")).unwrap();
        assert_eq!(s.index(), 1);
        let s = Segment::parse("0:1/2", None).unwrap();
        assert_eq!(s.sequence().len(), 2);
        for bad in ["3/3", "x/3", "1/0", "1", "2/3:1/3", "0:3/2"] {
            assert!(Segment::parse(bad, None).is_err(), "{bad}");
        }
        assert!(Segment::parse("0:1/2", Some("0,1/3,1")).is_err());
        assert!(Sequence::parse("0,1/2,1/2,1").is_err());
        assert!(Sequence::parse("0,1/2").is_err());
        assert!(Sequence::parse("0,1/1000003,1").is_err());
        assert!(Sequence::parse("0,0.5,1").is_err());
        // Hostile counts: an error before anything is allocated.
        assert!(Segment::parse("1/18446744073709551615", None)
            .unwrap_err()
            .contains("at most 1000"));
        assert!(Sequence::equal(u64::MAX).is_err());
        assert!(Sequence::equal(MAX_SEGMENTS).is_ok());
        let many: Vec<String> = (0..=1001).map(|i| format!("{i}/1001")).collect();
        assert!(Sequence::parse(&many.join(",")).is_err());
        let fine: Vec<String> = (0..=900)
            .map(|i| format!("{i}/999983"))
            .chain(["1".into()])
            .collect();
        assert!(Sequence::parse(&fine.join(","))
            .unwrap_err()
            .contains("too many segments"));
    }

    #[test]
    fn equal_thirds_of_the_brief() {
        let q = Sequence::equal(3).unwrap();
        let parts: Vec<u64> = (0..3)
            .map(|i| q.segment(i).unwrap().scale_int(3000))
            .collect();
        assert_eq!(parts, vec![1000, 1000, 1000]);
        let parts: Vec<u64> = (0..3).map(|i| q.segment(i).unwrap().scale_int(6)).collect();
        assert_eq!(parts, vec![2, 2, 2]);
        let parts: Vec<u64> = (0..3).map(|i| q.segment(i).unwrap().scale_int(2)).collect();
        assert_eq!(parts, vec![1, 1, 0]);
        // Equal shares stripe as i + k·N: the pacer's pair.
        let s = q.segment(2).unwrap();
        assert_eq!(s.stripe(0, 1).as_pair(), Some((2, 3)));
        assert_eq!(s.stripe(1, 2).as_pair(), Some((5, 6)));
        assert_eq!(s.scale_rate(300.0), 100.0);
    }

    #[test]
    fn unequal_shares_stripe() {
        let q = Sequence::parse("0,1/2,1").unwrap();
        assert_eq!(q.period(), 2);
        let q = Sequence::parse("0,1/4,1").unwrap();
        let small = q.segment(0).unwrap();
        let big = q.segment(1).unwrap();
        assert_eq!(small.scale_int(1) + big.scale_int(1), 1);
        assert_eq!(
            big.scale_int(1),
            1,
            "the largest share gets the first position"
        );
        assert_eq!(small.scale_int(400), 100);
        // The big segment's two workers share its 3 ticks per period of 4.
        let w0 = big.stripe(0, 2);
        let w1 = big.stripe(1, 2);
        assert_eq!(w0.as_pair(), None);
        let mut ticks: Vec<u64> = (0..30)
            .map(|m| w0.tick(m))
            .chain((0..30).map(|m| w1.tick(m)))
            .collect();
        ticks.sort_unstable();
        let expected: Vec<u64> = (0..80).filter(|k| big.owns(*k)).take(60).collect();
        assert_eq!(ticks, expected);
    }

    fn arb_sequence() -> impl Strategy<Value = Sequence> {
        // Boundaries as distinct numerators over a random denominator.
        (1u64..=60).prop_flat_map(|den| {
            proptest::collection::btree_set(1..den.max(2), 0..6).prop_map(move |inner| {
                let mut b = vec![Frac::new(0, 1).unwrap()];
                b.extend(
                    inner
                        .into_iter()
                        .filter(|&n| n < den)
                        .map(|n| Frac::new(n, den).unwrap()),
                );
                b.push(Frac::new(1, 1).unwrap());
                Sequence::new(b).unwrap()
            })
        })
    }

    proptest! {
        #[test]
        fn shares_sum_to_the_whole(q in arb_sequence(), total in 0u64..100_000) {
            let sum: u64 = (0..q.len()).map(|i| q.segment(i).unwrap().scale_int(total)).sum();
            prop_assert_eq!(sum, total);
        }

        #[test]
        fn shares_are_monotonic(q in arb_sequence(), total in 0u64..100_000, more in 0u64..1000) {
            for i in 0..q.len() {
                let s = q.segment(i).unwrap();
                prop_assert!(s.scale_int(total) <= s.scale_int(total + more));
            }
        }

        #[test]
        fn shares_within_one_of_proportional(q in arb_sequence(), total in 0u64..100_000) {
            for i in 0..q.len() {
                let s = q.segment(i).unwrap();
                let (n, d) = s.share();
                let exact = total as f64 * n as f64 / d as f64;
                prop_assert!((s.scale_int(total) as f64 - exact).abs() <= 1.0 + 1e-9);
            }
        }

        #[test]
        fn equal_segments(n in 1u64..50, total in 0u64..100_000) {
            let q = Sequence::equal(n).unwrap();
            let parts: Vec<u64> = (0..n as usize).map(|i| q.segment(i).unwrap().scale_int(total)).collect();
            prop_assert_eq!(parts.iter().sum::<u64>(), total);
            prop_assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1);
        }

        #[test]
        fn positions_partition_and_counts_match(q in arb_sequence(), workers in 1u64..5, total in 0u64..500) {
            // Own positions are distinct across segments, ascending, owned; the
            // workers' counts below a total add up to the segment's share.
            let mut seen = std::collections::BTreeSet::new();
            for i in 0..q.len() {
                let s = q.segment(i).unwrap();
                let share = s.scale_int(total);
                for j in 0..share {
                    let p = s.position(j);
                    prop_assert!(p < total && s.owns(p));
                    prop_assert!(seen.insert(p));
                }
                let counts: u64 = (0..workers).map(|w| s.stripe(w, workers).count_below(total)).sum();
                prop_assert_eq!(counts, share);
            }
            prop_assert_eq!(seen.len() as u64, total);
        }

        #[test]
        fn stripes_partition_the_schedule(q in arb_sequence(), workers in 1u64..5) {
            // Every global tick below a bound is sent by exactly one worker of one segment.
            let bound = q.period() * 6;
            let mut seen = vec![0u32; bound as usize];
            for i in 0..q.len() {
                let s = q.segment(i).unwrap();
                for w in 0..workers {
                    let st = s.stripe(w, workers);
                    for m in 0..(bound * 2) {
                        let k = st.tick(m);
                        if k >= bound { break; }
                        prop_assert!(s.owns(k));
                        seen[k as usize] += 1;
                    }
                }
            }
            prop_assert!(seen.iter().all(|&c| c == 1));
        }
    }
}
