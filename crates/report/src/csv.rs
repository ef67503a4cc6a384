//! The per-second series as CSV (`--output csv`), for spreadsheets.
//!
//! One row per second of the run: `t` is the second since the start (the row
//! covers [t, t+1)), then the responses, errors and bytes read in that second
//! and its latency percentiles in microseconds (from the intended send time).

use redline_stats::RunRecord;
use std::fmt::Write as _;

/// The CSV header line (without the newline).
pub const HEADER: &str = "t_s,requests,errors,bytes,p50_us,p90_us,p99_us,max_us";

/// The run's per-second series as CSV, header first.
pub fn series(rec: &RunRecord) -> String {
    let mut o = String::with_capacity(64 * (rec.series.len() + 1));
    o.push_str(HEADER);
    o.push('\n');
    for p in &rec.series {
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{},{}",
            p.t, p.requests, p.errors, p.bytes, p.p50_us, p.p90_us, p.p99_us, p.max_us
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use redline_stats::{Environment, Hist, LoadModel, RunConfig, SeriesPoint};

    #[test]
    fn one_row_per_second() {
        let cfg = RunConfig::get(
            "http://x/",
            LoadModel::Closed {
                connections: 1,
                requests: None,
                duration_s: Some(2.0),
            },
        );
        let mut rec = RunRecord::new(cfg, Environment::default(), "t".into());
        let mut h = Hist::with_sigfig(2);
        h.record_us(1000);
        rec.series.push(SeriesPoint::new(0, 1, 2, 300, &h));
        rec.series.push(SeriesPoint::new(1, 0, 0, 0, &Hist::new()));
        let s = series(&rec);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], HEADER);
        assert!(lines[1].starts_with("0,1,2,300,"), "{}", lines[1]);
        assert_eq!(lines[2], "1,0,0,0,0,0,0,0");
        assert_eq!(lines[1].split(',').count(), HEADER.split(',').count());
    }
}
