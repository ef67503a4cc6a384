//! The load model: closed loop, open loop, `--stages` and `--segment`
//! shares, checked for sense and scaled once while the plan is built.

use super::args::{Arrival, PlanArgs, StageArgs};
use super::mode::h2_connections;
use super::{usage, PlanError};
use redline_stats::segment::Segment;
use std::time::Duration;

/// The load model of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Load {
    /// `connections` connections, each sending its next request when the last is done.
    Closed {
        /// Connections.
        connections: u64,
        /// Stop after this many requests.
        requests: Option<u64>,
        /// Stop after this long.
        duration: Option<Duration>,
    },
    /// Requests at scheduled times; connections opened as needed up to a cap.
    Open {
        /// Requests per second.
        rate: f64,
        /// Spacing of send times.
        arrival: Arrival,
        /// Connection cap.
        max_connections: u64,
        /// Stop after this many requests.
        requests: Option<u64>,
        /// Stop after this long.
        duration: Option<Duration>,
    },
}

impl Load {
    /// The most connections the run can hold open at once: the connections
    /// (no more than the requests), or the open loop's cap.
    pub fn max_connections(&self) -> u64 {
        match self {
            Load::Closed {
                connections,
                requests,
                ..
            } => requests.map_or(*connections, |n| n.min(*connections)),
            Load::Open {
                max_connections, ..
            } => *max_connections,
        }
    }
}

/// A `--segment` run: one exact share of a larger run. The plan's [`Load`]
/// holds the share (connections, requests and the connection cap scaled with
/// [`Segment::scale_int`], the rate with [`Segment::scale_rate`]); the pacer
/// sends this segment's ticks of the whole run's schedule.
#[derive(Debug, Clone)]
pub struct SegmentPlan {
    /// The segment.
    pub segment: Segment,
    /// The whole run's open-loop rate (the schedule the ticks come from).
    pub whole_rate: Option<f64>,
    /// The whole run's request count (`-n`).
    pub whole_requests: Option<u64>,
    /// Why this segment has nothing to do (its share is zero), if so.
    pub empty: Option<String>,
}

/// A validated staged load: the level over time.
#[derive(Debug, Clone)]
pub struct Staged {
    /// Connections (closed loop) or requests/s (open loop) over time.
    pub profile: crate::pacer::Profile,
    /// The levels are requests/s.
    pub rate: bool,
}

/// Default connections in closed loop (as hey and oha).
pub const DEFAULT_CONNECTIONS: u64 = 50;
/// Default connection cap in open loop.
pub const DEFAULT_OPEN_CONNECTIONS: u64 = 1000;
/// Default run time when neither `-n` nor `-d` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// A segment's share of the load: integers with [`Segment::scale_int`] (an
/// open-loop connection cap at least 1), the rate with [`Segment::scale_rate`].
pub(super) fn segment_load(load: Load, seg: &Segment) -> (Load, SegmentPlan) {
    let mut sp = SegmentPlan {
        segment: seg.clone(),
        whole_rate: None,
        whole_requests: None,
        empty: None,
    };
    let scaled_requests = |n: Option<u64>, sp: &mut SegmentPlan| {
        n.map(|n| {
            let mine = seg.scale_int(n);
            if mine == 0 && sp.empty.is_none() {
                sp.empty = Some(format!("its share of {n} requests is 0"));
            }
            mine
        })
    };
    let load = match load {
        Load::Closed {
            connections,
            requests,
            duration,
        } => {
            let c = seg.scale_int(connections);
            if c == 0 {
                sp.empty = Some(format!("its share of {connections} connections is 0"));
            }
            sp.whole_requests = requests;
            Load::Closed {
                connections: c,
                requests: scaled_requests(requests, &mut sp),
                duration,
            }
        }
        Load::Open {
            rate,
            arrival,
            max_connections,
            requests,
            duration,
        } => {
            sp.whole_rate = Some(rate);
            sp.whole_requests = requests;
            Load::Open {
                rate: seg.scale_rate(rate),
                arrival,
                max_connections: seg.scale_int(max_connections).max(1),
                requests: scaled_requests(requests, &mut sp),
                duration,
            }
        }
    };
    (load, sp)
}

/// Checks `--stages` against the other load flags and makes its load model:
/// closed loop with the highest level as the connections, or open loop
/// (`--rate-stages`) with the mean rate; the run time is the stages' sum.
///
/// Over HTTP/2 (`h2_streams`: the streams per connection) a closed-loop level
/// counts concurrent streams, h2load's `-c × -m`: level N keeps N requests in
/// flight on ⌈N/streams⌉ connections (see [`h2_connections`]); with one stream
/// per connection that is N connections, as over HTTP/1.1, and the record's
/// unit stays `connections`; with more it is `streams`.
pub(super) fn staged_load(
    a: &PlanArgs,
    sa: &StageArgs,
    h2_streams: Option<u32>,
) -> Result<(Load, Staged, redline_stats::stages::StagePlan), PlanError> {
    use crate::pacer::Profile;
    if sa.stages.is_empty() {
        return Err(usage("--stages needs at least one DURATION:LEVEL pair"));
    }
    if a.duration.is_some() || a.requests.is_some() {
        return Err(usage(
            "--stages sets the run time (the sum of the stages): drop -d/--duration and -n/--requests",
        ));
    }
    let profile = Profile::from_stages(&sa.stages, sa.step);
    let max = profile.max_level();
    if max <= 0.0 {
        return Err(usage("--stages: at least one stage needs a level above 0"));
    }
    let total = profile.end();
    let duration = Some(Duration::from_secs_f64(total));
    let load = if sa.rate {
        if a.rate.is_some() {
            return Err(usage(
                "-r/--rate contradicts --rate-stages (the stage levels are the rates)",
            ));
        }
        if max > 10_000_000.0 {
            return Err(usage(
                "--rate-stages above 10,000,000 req/s is not supported",
            ));
        }
        Load::Open {
            rate: profile.cumulative(total) / total,
            arrival: a.arrival,
            max_connections: a.connections.unwrap_or(DEFAULT_OPEN_CONNECTIONS),
            requests: None,
            duration,
        }
    } else {
        if a.rate.is_some() {
            return Err(usage(
                "-r/--rate contradicts --stages, whose levels are connections: for rates use --rate-stages",
            ));
        }
        if a.connections.is_some() {
            return Err(usage(
                "-c/--connections contradicts --stages (its levels are the connections)",
            ));
        }
        if sa.stages.iter().any(|s| s.level.fract() != 0.0) {
            return Err(usage(
                "--stages: connection levels must be whole numbers (for rates use --rate-stages)",
            ));
        }
        if max > 1_000_000.0 {
            return Err(usage(
                "--stages above 1,000,000 connections is not supported",
            ));
        }
        Load::Closed {
            connections: match h2_streams {
                Some(m) => h2_connections(max as u64, m),
                None => max as u64,
            },
            requests: None,
            duration,
        }
    };
    let unit = match (sa.rate, h2_streams) {
        (true, _) => "rps",
        (false, Some(m)) if m > 1 => "streams",
        (false, _) => "connections",
    };
    let plan = redline_stats::stages::StagePlan {
        unit: unit.into(),
        step: sa.step,
        stages: sa
            .stages
            .iter()
            .map(|s| redline_stats::stages::StageSpec {
                duration_s: s.duration.as_secs_f64(),
                level: s.level,
            })
            .collect(),
    };
    Ok((
        load,
        Staged {
            profile,
            rate: sa.rate,
        },
        plan,
    ))
}

/// Parses a duration: `30s`, `2m`, `1h`, `500ms`, `250us`, `1.5s`, plain
/// seconds, or parts added up as Go and k6 write them: `1m30s`, `1h2m3s`,
/// `2s500ms` (every part with its unit).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let err = || format!("invalid duration '{s}' (examples: 30s, 2m, 1m30s, 500ms, 1.5s)");
    let mut rest = s;
    let mut secs = 0.0;
    let mut parts = 0;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(split);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let v: f64 = num.parse().map_err(|_| err())?;
        // A bare number is seconds only alone: `1m30` is refused.
        if unit.trim().is_empty() && (parts > 0 || !next.is_empty()) {
            return Err(err());
        }
        secs += match unit.trim() {
            "" | "s" | "sec" | "secs" => v,
            "ms" => v / 1e3,
            "us" | "µs" => v / 1e6,
            "ns" => v / 1e9,
            "m" | "min" => v * 60.0,
            "h" => v * 3600.0,
            _ => return Err(err()),
        };
        parts += 1;
        rest = next;
    }
    if parts == 0 || !secs.is_finite() || !(0.0..=365.0 * 86_400.0).contains(&secs) {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h2m3s").unwrap(), Duration::from_secs(3723));
        assert_eq!(
            parse_duration("2s500ms").unwrap(),
            Duration::from_millis(2500)
        );
        assert!(parse_duration("1m30").is_err());
        assert!(parse_duration("1m 30s x").is_err());
        assert!(parse_duration("m30s").is_err());
    }
}
