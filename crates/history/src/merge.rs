//! Merging runs made at the same time on several machines into one record.
//!
//! Counts and histograms add exactly (`RunRecord += &RunRecord`); before adding,
//! each record's per-second series is moved onto a common wall-clock axis: a
//! run that started Δ seconds after the earliest one has its points shifted by
//! Δ rounded to whole seconds, so second t of the merged series covers the same
//! wall-clock second on every machine.
//!
//! Refused unless forced ([`merge_with`]): the same run twice (identical
//! records: `merge a.json a.json` would double-count) and runs that did not
//! overlap in time (not one test made from several machines). `--force`
//! merges anyway and says so in the record (a `merge_forced` warning).
//! Runs of different plans (URL, method, headers, body, protocol, load
//! model, segment sequence, a segment twice) are merged with a
//! `merge_mismatch` warning inside the record, not only on stderr.

use redline_stats::RunRecord;

/// Why runs cannot be merged.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// A `started_at` that is not RFC 3339.
    #[error("run {0} has an unreadable start time {1:?}")]
    BadTime(usize, String),
    /// The same run given twice.
    #[error("runs {0} and {1} are the same run (identical records): merging would count it twice; --force merges anyway")]
    Duplicate(usize, usize),
    /// Runs that were not made at the same time.
    #[error("{0}: they are not parts of one test; --force merges anyway")]
    NoOverlap(String),
}

/// Slack for the overlap check (clocks of different machines, process
/// start-up): runs up to 5 s apart still count as one test.
const OVERLAP_SLACK_MS: i64 = 5000;

/// What was refused, and the merge's warnings about differing plans.
fn problems(recs: &[RunRecord], starts: &[i64]) -> (Vec<MergeError>, Vec<String>) {
    let mut refused = Vec::new();
    let values: Vec<serde_json::Value> = recs
        .iter()
        .map(|r| serde_json::to_value(r).unwrap_or_default())
        .collect();
    'dup: for i in 0..values.len() {
        for j in i + 1..values.len() {
            if values[i] == values[j] {
                refused.push(MergeError::Duplicate(i + 1, j + 1));
                break 'dup;
            }
        }
    }
    let ends: Vec<i64> = recs
        .iter()
        .zip(starts)
        .map(|(r, &s)| {
            let d = if r.duration_s.is_finite() {
                r.duration_s.clamp(0.0, 1e9)
            } else {
                0.0
            };
            s.saturating_add((d * 1000.0) as i64)
        })
        .collect();
    let (late_i, &late_start) = starts
        .iter()
        .enumerate()
        .max_by_key(|(_, s)| **s)
        .unwrap_or((0, &0));
    let (early_i, &early_end) = ends
        .iter()
        .enumerate()
        .min_by_key(|(_, e)| **e)
        .unwrap_or((0, &0));
    if late_start > early_end.saturating_add(OVERLAP_SLACK_MS) {
        refused.push(MergeError::NoOverlap(format!(
            "run {} started {:.1} s after run {} ended",
            late_i + 1,
            (late_start - early_end) as f64 / 1000.0,
            early_i + 1
        )));
    }
    let mut mismatches = Vec::new();
    let first = &recs[0].config;
    for (i, r) in recs.iter().enumerate().skip(1) {
        let c = &r.config;
        let mut d = Vec::new();
        if c.url != first.url {
            d.push(format!("URL {} vs {}", c.url, first.url));
        }
        if c.method != first.method {
            d.push(format!("method {} vs {}", c.method, first.method));
        }
        if c.headers != first.headers {
            d.push("headers".to_string());
        }
        if c.body_bytes != first.body_bytes {
            d.push(format!(
                "body {} vs {} bytes",
                c.body_bytes, first.body_bytes
            ));
        }
        if c.http_version != first.http_version {
            d.push(format!("HTTP {} vs {}", c.http_version, first.http_version));
        }
        if std::mem::discriminant(&c.load) != std::mem::discriminant(&first.load) {
            d.push("load model (open vs closed loop)".to_string());
        }
        if c.scenario != first.scenario {
            d.push("scenario".to_string());
        }
        if let (Some(a), Some(b)) = (&c.segment, &first.segment) {
            if a.sequence != b.sequence {
                d.push(format!("segment sequence {} vs {}", a.sequence, b.sequence));
            }
        }
        if !d.is_empty() {
            mismatches.push(format!(
                "run {} differs from run 1: {}",
                i + 1,
                d.join(", ")
            ));
        }
    }
    let mut seen = std::collections::BTreeMap::new();
    for (i, r) in recs.iter().enumerate() {
        if let Some(s) = &r.config.segment {
            if let Some(j) = seen.insert((s.sequence.clone(), s.index), i) {
                mismatches.push(format!(
                    "runs {} and {} are both segment {} of {}",
                    j + 1,
                    i + 1,
                    s.index,
                    s.sequence
                ));
            }
        }
    }
    (refused, mismatches)
}

pub use redline_stats::time::parse_rfc3339_ms;

/// Shifts a record's series later by `secs` seconds.
pub fn shift_series(rec: &mut RunRecord, secs: u32) {
    for p in &mut rec.series {
        p.t = p.t.saturating_add(secs);
    }
}

/// Merges records of runs made at the same time; the series are aligned on
/// wall-clock time (whole seconds) before they add up. Refuses the same run
/// twice and runs that did not overlap ([`merge_with`] to force).
pub fn merge(recs: &[RunRecord]) -> Result<RunRecord, MergeError> {
    merge_with(recs, false)
}

/// [`merge`]; with `force`, what would be refused is merged anyway and
/// named in a `merge_forced` warning of the record.
pub fn merge_with(recs: &[RunRecord], force: bool) -> Result<RunRecord, MergeError> {
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
    let (refused, mismatches) = problems(recs, &starts);
    if let (false, Some(e)) = (force, refused.first()) {
        return Err(e.clone());
    }
    let mut out = first.clone();
    shift_series(&mut out, offset(0));
    for (i, r) in recs.iter().enumerate().skip(1) {
        let mut r = r.clone();
        shift_series(&mut r, offset(i));
        out += &r;
    }
    if !refused.is_empty() {
        let why: Vec<String> = refused.iter().map(|e| e.to_string()).collect();
        out.warn(
            "merge_forced",
            format!(
                "merged with --force although {}",
                why.join("; ").replace("; --force merges anyway", "")
            ),
        );
    }
    if !mismatches.is_empty() {
        out.warn(
            "merge_mismatch",
            format!(
                "the merged runs ran different tests: {}",
                mismatches.join("; ")
            ),
        );
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
        let mut a = record(&[(100, 1000, 200)], 0, origin);
        a.duration_s = 5.0; // both ran at the same time
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

    #[test]
    fn the_same_run_twice_or_apart_in_time_is_refused_unless_forced() {
        let origin = Instant::now();
        let a = record(&[(100, 1000, 200)], 0, origin);
        assert_eq!(
            merge(&[a.clone(), a.clone()]).unwrap_err(),
            MergeError::Duplicate(1, 2)
        );
        let forced = merge_with(&[a.clone(), a.clone()], true).unwrap();
        assert_eq!(forced.counters.completed, 2);
        let w = forced
            .warnings
            .iter()
            .find(|w| w.code == "merge_forced")
            .unwrap();
        assert!(w.message.contains("same run"), "{}", w.message);
        // An hour later: not one test.
        let late = record(&[(3_600_100, 1000, 200)], 3_600_000, origin);
        let e = merge(&[a.clone(), late.clone()]).unwrap_err();
        assert!(
            matches!(&e, MergeError::NoOverlap(m) if m.contains("run 2 started")),
            "{e}"
        );
        assert!(merge_with(&[a.clone(), late], true)
            .unwrap()
            .warnings
            .iter()
            .any(|w| w.code == "merge_forced" && w.message.contains("after run 1 ended")));
        // Another method: merged, with the mismatch inside the record.
        let mut post = record(&[(200, 1000, 200)], 0, origin);
        post.config.method = "POST".into();
        let m = merge(&[a, post]).unwrap();
        let w = m
            .warnings
            .iter()
            .find(|w| w.code == "merge_mismatch")
            .unwrap();
        assert!(w.message.contains("method POST vs GET"), "{}", w.message);
    }
}
