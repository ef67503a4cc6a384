//! Checking what agents send (a record inside the run's time window, a
//! consistent record) and merging their outcomes into one.

use super::*;

/// Where and when a record must have been made.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// The common start, coordinator clock (ms since the epoch).
    pub start_ms: f64,
    /// Now, coordinator clock.
    pub now_ms: f64,
    /// The agent's clock offset (coordinator minus agent), ms.
    pub offset_ms: f64,
    /// The agent's index.
    pub index: u64,
    /// The number of agents.
    pub count: u64,
}

/// Slack for the time checks: clocks, start-up, the stop grace.
pub(super) const TIME_SLACK_MS: f64 = 60_000.0;

/// Checks a record on arrival: it is consistent ([`check_consistent`]), its
/// times lie within the run, and it is the share of this agent. Err names
/// what is wrong.
pub fn check_record(r: &RunRecord, w: &Window) -> Result<(), String> {
    let started = redline_stats::time::parse_rfc3339_ms(&r.started_at)
        .ok_or_else(|| format!("an unreadable start time {:?}", r.started_at))?
        as f64
        + w.offset_ms;
    if started < w.start_ms - TIME_SLACK_MS || started > w.now_ms + TIME_SLACK_MS {
        return Err(format!(
            "it started at {} ({:.0} s from the common start): not this run",
            r.started_at,
            (started - w.start_ms) / 1000.0
        ));
    }
    let longest_s = ((w.now_ms - w.start_ms).max(0.0) + TIME_SLACK_MS) / 1000.0;
    if !(r.duration_s.is_finite() && r.duration_s >= 0.0 && r.duration_s <= longest_s) {
        return Err(format!(
            "it lasted {} s, but the run is only {:.0} s old",
            r.duration_s,
            (w.now_ms - w.start_ms) / 1000.0
        ));
    }
    if r.series.len() as f64 > longest_s + 2.0
        || r.series.iter().any(|p| f64::from(p.t) > longest_s + 1.0)
    {
        return Err("its per-second series is longer than the run".into());
    }
    check_consistent(r)?;
    if r.merged_runs != 1 {
        return Err(format!(
            "it is a merge of {} runs, not one agent's run",
            r.merged_runs
        ));
    }
    match &r.config.segment {
        Some(s) if s.index == w.index && s.count == w.count => Ok(()),
        Some(s) => Err(format!(
            "it is segment {} of {}, not {} of {}",
            s.index, s.count, w.index, w.count
        )),
        None => Err("it is not a segment of this run (no config.segment)".into()),
    }
}

/// Checks what must hold for any run record, one run's or a merge's (the
/// coordinator's checks on arrival, `redline fetch` on what it downloads):
/// its counters agree with each other and with its histograms and status
/// codes, its per-second series holds no more than it completed (each
/// second's histogram its own count), its start time is readable, its
/// duration finite, and its rate matches its counts. Err names what is wrong.
pub fn check_consistent(r: &RunRecord) -> Result<(), String> {
    let c = &r.counters;
    if r.format != "redline.run" {
        return Err(format!("format {:?} is not redline.run", r.format));
    }
    let ends = [c.completed, c.failed, c.in_flight_at_end, c.not_sent]
        .iter()
        .try_fold(0u64, |a, &b| a.checked_add(b));
    if ends != Some(c.scheduled) {
        return Err(format!(
            "counters do not add up: scheduled {} is not completed {} + failed {} + in flight {} + not sent {}",
            c.scheduled, c.completed, c.failed, c.in_flight_at_end, c.not_sent
        ));
    }
    if c.sent > c.scheduled || c.completed > c.sent || c.non_2xx > c.completed {
        return Err(format!(
            "counters contradict each other: scheduled {}, sent {}, completed {}, non-2xx {}",
            c.scheduled, c.sent, c.completed, c.non_2xx
        ));
    }
    if r.latency.count() != c.completed {
        return Err(format!(
            "its latency histogram holds {} values for {} completed responses",
            r.latency.count(),
            c.completed
        ));
    }
    let statuses = r
        .status_codes
        .values()
        .try_fold(0u64, |a, &b| a.checked_add(b));
    if statuses != Some(c.completed) {
        return Err(format!(
            "its status codes add up to {} for {} completed responses",
            statuses.map_or("more than 2^64".to_string(), |s| s.to_string()),
            c.completed
        ));
    }
    let per_second = r
        .series
        .iter()
        .try_fold(0u64, |a, p| a.checked_add(p.requests));
    if per_second.is_none_or(|s| s > c.completed) {
        return Err(format!(
            "its per-second series counts more responses than its {} completed",
            c.completed
        ));
    }
    if let Some(p) = r
        .series
        .iter()
        .find(|p| p.hist.to_hist().count() != p.requests)
    {
        return Err(format!(
            "second {}: its histogram does not hold its {} responses",
            p.t, p.requests
        ));
    }
    redline_stats::time::parse_rfc3339_ms(&r.started_at)
        .ok_or_else(|| format!("an unreadable start time {:?}", r.started_at))?;
    // At most 30 days (as `ready` allows), and no more seconds than that.
    const LONGEST_S: f64 = 30.0 * 86_400.0;
    if !(r.duration_s.is_finite() && r.duration_s >= 0.0 && r.duration_s <= LONGEST_S) {
        return Err(format!("it lasted {} s", r.duration_s));
    }
    if r.series.len() as f64 > r.duration_s + 2.0 + TIME_SLACK_MS / 1000.0
        || r.series.iter().any(|p| f64::from(p.t) > LONGEST_S)
    {
        return Err("its per-second series is longer than the run".into());
    }
    let rate_bound = c.completed as f64 / r.duration_s.max(1e-3) * 1.01 + 1.0;
    if !(r.requests_per_sec.is_finite()
        && r.requests_per_sec >= 0.0
        && r.requests_per_sec <= rate_bound)
    {
        return Err(format!(
            "it claims {} req/s for {} responses in {} s",
            r.requests_per_sec, c.completed, r.duration_s
        ));
    }
    if r.merged_runs == 0 {
        return Err("it says it merges 0 runs".into());
    }
    Ok(())
}

/// Merges the agents' records exactly (`RunRecord +=`) and marks the result
/// incomplete, naming the missing agents, when some did not send one.
pub fn merge_outcome(agents: Vec<AgentOutcome>, total: u64) -> Outcome {
    let mut merged: Option<RunRecord> = None;
    for a in &agents {
        if let Some(r) = &a.record {
            match merged.as_mut() {
                Some(m) => *m += r,
                None => merged = Some(r.clone()),
            }
        }
    }
    let missing: Vec<&AgentOutcome> = agents.iter().filter(|a| a.failure.is_some()).collect();
    let incomplete = !missing.is_empty() || (agents.len() as u64) < total;
    if let Some(m) = merged.as_mut() {
        let urls: std::collections::BTreeSet<&str> = agents
            .iter()
            .filter_map(|a| a.record.as_ref().map(|r| r.config.url.as_str()))
            .collect();
        if urls.len() > 1 {
            m.warn(
                "dist_mismatch",
                format!(
                    "the agents ran different URLs ({}): the merge mixes different tests",
                    urls.into_iter().collect::<Vec<_>>().join(", ")
                ),
            );
        }
        if incomplete {
            m.interrupted = true;
            let names: Vec<String> = missing
                .iter()
                .map(|a| format!("{} {}", a.name(), a.failure.as_deref().unwrap_or("")))
                .collect();
            let sent = agents.iter().filter(|a| a.record.is_some()).count();
            m.warn(
                "dist_incomplete",
                format!(
                    "incomplete distributed run: {}; this record holds the load of {sent} of {total} agents, not the whole",
                    names.join("; ")
                ),
            );
        }
        let late: Vec<String> = agents
            .iter()
            .filter(|a| a.record.is_some() && a.lateness_ms.abs() > 100.0)
            .map(|a| format!("{} started {:.0} ms late", a.name(), a.lateness_ms))
            .collect();
        if !late.is_empty() {
            m.warn("dist_late_start", late.join("; "));
        }
    }
    Outcome {
        agents,
        merged,
        incomplete,
        seconds: Vec::new(),
        stopped: None,
    }
}
