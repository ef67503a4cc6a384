//! Merging runs made at the same time on several machines into one record.
//!
//! Counts and histograms add exactly (`RunRecord += &RunRecord`); before adding,
//! each record's per-second series is moved onto a common wall-clock axis: a
//! run that started Δ seconds after the earliest one has its points shifted by
//! Δ rounded to whole seconds, so second t of the merged series covers the same
//! wall-clock second on every machine.

use redline_stats::RunRecord;

/// Why runs cannot be merged.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// A `started_at` that is not RFC 3339.
    #[error("run {0} has an unreadable start time {1:?}")]
    BadTime(usize, String),
}

pub use redline_stats::time::parse_rfc3339_ms;

/// Shifts a record's series later by `secs` seconds.
pub fn shift_series(rec: &mut RunRecord, secs: u32) {
    for p in &mut rec.series {
        p.t = p.t.saturating_add(secs);
    }
}

/// Merges records of runs made at the same time; the series are aligned on
/// wall-clock time (whole seconds) before they add up.
pub fn merge(recs: &[RunRecord]) -> Result<RunRecord, MergeError> {
    let first = recs.first().ok_or(MergeError::Empty)?;
    let starts: Vec<i64> = recs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            parse_rfc3339_ms(&r.started_at).ok_or(MergeError::BadTime(i + 1, r.started_at.clone()))
        })
        .collect::<Result<_, _>>()?;
    let earliest = *starts.iter().min().unwrap_or(&0);
    let offset = |i: usize| -> u32 {
        // Round to the nearest second: a point covers [t, t+1) of its own run.
        (((starts[i] - earliest) + 500) / 1000).clamp(0, u32::MAX as i64) as u32
    };
    let mut out = first.clone();
    shift_series(&mut out, offset(0));
    for (i, r) in recs.iter().enumerate().skip(1) {
        let mut r = r.clone();
        shift_series(&mut r, offset(i));
        out += &r;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use redline_stats::{Environment, LoadModel, Recorder, RunConfig, Timing};
    use std::time::{Duration, Instant};

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            parse_rfc3339_ms("2026-11-18T11:06:40.123Z"),
            Some(1_795_000_000_123)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-11-18T12:06:40.1+01:00"),
            Some(1_795_000_000_100)
        );
        assert_eq!(
            parse_rfc3339_ms("2000-02-29T00:00:00Z"),
            Some(951_782_400_000)
        );
        assert_eq!(parse_rfc3339_ms("yesterday"), None);
        assert_eq!(parse_rfc3339_ms("2000-13-29T00:00:00Z"), None);
        assert_eq!(parse_rfc3339_ms("t"), None);
    }

    fn cfg() -> RunConfig {
        RunConfig::get(
            "http://127.0.0.1:1/",
            LoadModel::Closed {
                connections: 1,
                requests: None,
                duration_s: Some(4.0),
            },
        )
    }

    /// A record of samples `(done_at_ms, latency_us, status)`, started at
    /// `start_ms` after a common origin (wall clock `2025-01-01T00:00:00`).
    fn record(samples: &[(u64, u64, u16)], start_ms: u64, origin: Instant) -> RunRecord {
        let start = origin + Duration::from_millis(start_ms);
        let started_at = redline_stats::time::rfc3339(
            std::time::UNIX_EPOCH + Duration::from_millis(1_735_689_600_000 + start_ms),
        );
        let mut rec = RunRecord::new(cfg(), Environment::default(), started_at);
        let mut r = Recorder::new(start);
        let mut sorted: Vec<_> = samples.to_vec();
        sorted.sort();
        for &(at_ms, lat_us, status) in &sorted {
            // Samples are in origin time; this run sees only those after its start.
            let done = origin + Duration::from_millis(at_ms);
            let lat = Duration::from_micros(lat_us).min(done - start);
            let sent = done - lat;
            let t = Timing {
                intended: sent,
                sent,
                first_byte: sent + lat / 2,
                done,
            };
            r.response(&t, status, 500, 440);
            r.bytes_read(500);
        }
        r.finish_into(&mut rec, origin + Duration::from_millis(5000));
        rec
    }

    fn assert_same(m: &RunRecord, all: &RunRecord) {
        assert_eq!(m.counters, all.counters);
        assert_eq!(m.status_codes, all.status_codes);
        assert_eq!(m.latency, all.latency);
        assert_eq!(m.waiting, all.waiting);
        assert_eq!(m.transfer, all.transfer);
        let nonempty = |r: &RunRecord| -> Vec<(u32, u64, u64)> {
            r.series
                .iter()
                .filter(|p| p.requests > 0)
                .map(|p| (p.t, p.requests, p.bytes))
                .collect()
        };
        assert_eq!(nonempty(m), nonempty(all));
        for p in m.series.iter().filter(|p| p.requests > 0) {
            let q = all.series.iter().find(|q| q.t == p.t).unwrap();
            assert_eq!(p.hist.to_hist(), q.hist.to_hist());
            assert_eq!(p.p99_us, q.p99_us);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
        /// merge(record(x), record(y)) == record(x ∪ y), also through JSON and
        /// with the second run starting a whole number of seconds later.
        #[test]
        fn merge_law(
            x in prop::collection::vec((0u64..4000, 1u64..200_000, prop::sample::select(vec![200u16, 404, 503])), 0..300),
            y in prop::collection::vec((0u64..3000, 1u64..200_000, prop::sample::select(vec![200u16, 301])), 0..300),
            shift_s in 0u64..2,
        ) {
            let origin = Instant::now();
            // y's samples happen after its own (later) start.
            let y: Vec<_> = y.into_iter().map(|(t, l, s)| (t + shift_s * 1000, l, s)).collect();
            let rx = record(&x, 0, origin);
            let ry = record(&y, shift_s * 1000, origin);
            let mut all: Vec<_> = x.clone();
            all.extend_from_slice(&y);
            // The single run over both, timed from the earliest start; each
            // sample's latency clipped as in its own run.
            let all_rec = {
                let mut xs: Vec<_> = x.iter().map(|&(t, l, s)| (t, l.min(t * 1000), s)).collect();
                xs.extend(y.iter().map(|&(t, l, s)| (t, l.min((t - shift_s * 1000) * 1000), s)));
                record(&xs, 0, origin)
            };
            let rx = RunRecord::from_json(&serde_json::to_string(&rx).unwrap()).unwrap();
            let ry = RunRecord::from_json(&serde_json::to_string(&ry).unwrap()).unwrap();
            let m = merge(&[rx, ry]).unwrap();
            assert_same(&m, &all_rec);
            prop_assert_eq!(m.merged_runs, 2);
        }
    }

    #[test]
    fn later_run_lands_on_its_wall_clock_seconds() {
        let origin = Instant::now();
        let a = record(&[(100, 1000, 200)], 0, origin);
        let b = record(&[(2100, 1000, 200)], 2000, origin); // its t = 0
        assert_eq!(b.series[0].t, 0);
        let m = merge(&[a, b]).unwrap();
        let ts: Vec<(u32, u64)> = m.series.iter().map(|p| (p.t, p.requests)).collect();
        assert_eq!(
            ts.iter().filter(|x| x.1 > 0).collect::<Vec<_>>(),
            vec![&(0, 1), &(2, 1)]
        );
        assert!(merge(&[]).is_err());
    }
}
