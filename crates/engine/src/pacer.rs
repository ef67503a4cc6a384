//! The open-loop schedule: a pure function from request number to intended send time.
//!
//! Each worker owns one [`Pacer`] for its share of the rate. With `t` workers and
//! a constant rate `r`, worker `i` sends at `(i + k·t) / r`, so the workers'
//! schedules interleave into exactly the global one. Poisson and uniform
//! arrivals use a seeded generator, so a run can be repeated.

use crate::plan::Arrival;
use redline_stats::rng::SplitMix64;
use std::time::Duration;

/// Intended send times for one worker.
#[derive(Debug, Clone)]
pub struct Pacer {
    arrival: Arrival,
    /// Mean gap between this worker's sends, seconds.
    gap: f64,
    /// Offset of this worker's first send, seconds.
    phase: f64,
    k: u64,
    limit: Option<u64>,
    end: Option<Duration>,
    t: f64,
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
        let workers = workers.max(1) as f64;
        let gap = workers / rate;
        Pacer {
            arrival,
            gap,
            phase: index as f64 / rate,
            k: 0,
            limit,
            end,
            t: index as f64 / rate,
            rng: SplitMix64(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        }
    }

    /// The mean gap between this worker's sends.
    pub fn interval(&self) -> Duration {
        Duration::from_secs_f64(self.gap)
    }

    /// The next intended send time as an offset from the start, or `None` when the schedule is over.
    pub fn next_send(&mut self) -> Option<Duration> {
        if let Some(l) = self.limit {
            if self.k >= l {
                return None;
            }
        }
        let at = match self.arrival {
            // Computed from k, not accumulated, so no rounding drift over long runs.
            Arrival::Constant => self.phase + self.k as f64 * self.gap,
            Arrival::Poisson => {
                let at = self.t;
                let u = self.rng.unit_open();
                self.t += -u.ln() * self.gap;
                at
            }
            Arrival::Uniform => {
                let at = self.t;
                self.t += self.rng.unit_open() * 2.0 * self.gap;
                at
            }
        };
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
}
