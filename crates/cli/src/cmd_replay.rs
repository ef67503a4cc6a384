//! `redline replay ACCESS_LOG BASE_URL`: an access log's requests sent again
//! at their logged arrival times (open loop, latency from each request's
//! intended send time), faster or slower with `--speed`, or at an even
//! `--rate`; the usual run report plus the log's and the replay's status
//! codes, a per-URL table and the URLs whose status changed. Flags → log
//! (`redline_engine::replay`) → the plan, built once from the flags and the
//! log (`PlanArgs::replay`: the replay scenario, the load and the log's
//! schedule, recorded as `config.schedule`) → the normal run path
//! (`cli::run_built`).

use crate::cli::run_built;
use crate::exit::{fail, Exit};
use crate::flags::{ConnectionArgs, OutArgs, ProtocolArgs, RequestArgs, ThresholdArgs};
use clap::Args;
use redline_engine::plan::LogReplay;
use redline_engine::replay::{Log, LogFormat, Options};
use redline_engine::Plan;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `--max-duration`'s default: a day.
pub(crate) const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(86_400);
/// The longest `--max-duration` (and `-d`) accepted: 30 days.
const MAX_MAX_DURATION: Duration = Duration::from_secs(30 * 86_400);

fn dur(s: &str) -> Result<Duration, String> {
    redline_engine::parse_duration(s).map_err(|e| e.to_string())
}

/// A span for messages, in the largest unit that keeps it readable
/// (`10 s`, `2.5 h`, `3.0 days`, `7973 years`).
fn span(s: f64) -> String {
    const DAY: f64 = 86_400.0;
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 2.0 * 3600.0 {
        format!("{:.1} min", s / 60.0)
    } else if s < 2.0 * DAY {
        format!("{:.1} h", s / 3600.0)
    } else if s < 730.0 * DAY {
        format!("{:.1} days", s / DAY)
    } else {
        format!("{:.0} years", s / (365.25 * DAY))
    }
}

/// Unix seconds as a UTC date for messages (the log's own times).
fn date(t: i64) -> String {
    match u64::try_from(t) {
        Ok(s) => redline_stats::time::rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(s)),
        Err(_) => format!("{t} s before 1970"),
    }
}

/// `redline replay`.
#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    /// The access log (plain text or gzip, told by its first bytes).
    #[arg(value_name = "ACCESS_LOG")]
    log: PathBuf,
    /// Where the requests go: its scheme, host and port replace the log's;
    /// a path in it is put before every logged path.
    #[arg(value_name = "BASE_URL")]
    base: String,
    /// The log's format: common, combined (the default reads both), vhost_combined,
    /// or the server's own syntax: Apache LogFormat ('%h %l %u %t "%r" %>s %b …') or
    /// nginx log_format ('$remote_addr - $remote_user [$time_local] "$request" $status …').
    #[arg(long = "log-format", value_name = "FORMAT")]
    log_format: Option<String>,
    /// Methods replayed, comma-separated, or 'all' (other methods are sent without a body).
    #[arg(long, value_name = "LIST", default_value = "GET,HEAD")]
    methods: String,
    /// The log's arrival times this many times faster, e.g. 2x, 0.5x (default 1x).
    #[arg(long, value_name = "FACTOR", conflicts_with = "rate")]
    speed: Option<String>,
    /// Flatten: the log's requests in order at this even rate (req/s) instead of at their times.
    #[arg(short = 'r', long, value_name = "REQ/S")]
    rate: Option<String>,
    /// Requests of a logged host (from the format's host or an absolute request
    /// target) go to URL instead of BASE_URL: OLD=URL (repeatable).
    #[arg(long = "host-map", value_name = "OLD=URL")]
    host_map: Vec<String>,
    /// Only the first N requests of the log (by time).
    #[arg(short = 'n', long = "requests", value_name = "N")]
    requests: Option<u64>,
    /// Replay a window: only the first DURATION of the schedule (at --speed,
    /// or the first rate × DURATION requests with --rate).
    #[arg(short = 'd', long = "duration", value_name = "DURATION", value_parser = dur)]
    duration: Option<Duration>,
    /// Refuse a schedule longer than this (default 24h; at most 30 days): a
    /// log line dated 9999, a $msec of 0 or a years-long gap is named instead
    /// of replayed for years.
    #[arg(long = "max-duration", value_name = "DURATION", value_parser = dur)]
    max_duration: Option<Duration>,
    /// URLs listed by name in the per-URL breakdown, the most requested first
    /// (1-1000); the rest are grouped per method and status as '(other URLs)'.
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    breakdown: u64,
    /// Extra request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    #[command(flatten)]
    protocol: ProtocolArgs,
    #[command(flatten)]
    conn: ConnectionArgs,
    #[command(flatten)]
    thresholds: ThresholdArgs,
    #[command(flatten)]
    out: OutArgs,
}

/// `2x`, `2`, `0.5X`: a factor above 0 and at most 1000.
fn parse_speed(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix('x')
        .or_else(|| t.strip_suffix('X'))
        .unwrap_or(t);
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1000.0 => Ok(v),
        _ => Err(format!(
            "invalid --speed '{}': expected a factor above 0 and at most 1000, e.g. 2x or 0.5x",
            s.escape_debug()
        )),
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 10_000_000.0 => Ok(v),
        _ => Err(format!(
            "invalid -r/--rate '{}': expected requests per second above 0",
            s.escape_debug()
        )),
    }
}

fn parse_methods(s: &str) -> Result<Option<Vec<String>>, String> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(None);
    }
    let mut v = Vec::new();
    for m in s.split(',') {
        let m = m.trim().to_ascii_uppercase();
        if m.is_empty() || !m.bytes().all(|c| c.is_ascii_alphabetic() || c == b'-') {
            return Err(format!(
                "invalid --methods '{}': expected method names separated by commas, or all",
                s.escape_debug()
            ));
        }
        v.push(m);
    }
    Ok(Some(v))
}

/// `--host-map OLD=URL` entries: (logged host in lower case, target index
/// from 1) and the target URLs.
/// `--host-map`: (logged host, target index from 1) pairs and the target URLs.
type HostMap = (Vec<(String, usize)>, Vec<String>);

fn parse_host_map(v: &[String]) -> Result<HostMap, String> {
    let mut map = Vec::new();
    let mut urls = Vec::new();
    for e in v {
        let Some((old, new)) = e.split_once('=') else {
            return Err(format!(
                "invalid --host-map '{}': expected OLD=URL, e.g. www.example.com=http://127.0.0.1:8080",
                e.escape_debug()
            ));
        };
        let (old, new) = (old.trim().to_ascii_lowercase(), new.trim());
        if old.is_empty() || new.is_empty() {
            return Err(format!(
                "invalid --host-map '{}': expected OLD=URL",
                e.escape_debug()
            ));
        }
        urls.push(new.to_string());
        map.push((old, urls.len()));
    }
    Ok((map, urls))
}

fn human_s(s: f64) -> String {
    redline_report::dur_us(s * 1e6)
}

/// Runs `redline replay`.
pub(crate) fn run(a: ReplayArgs) -> Exit {
    let speed = match a.speed.as_deref().map(parse_speed).transpose() {
        Ok(s) => s,
        Err(e) => return fail(Exit::Usage, e),
    };
    let rate = match a.rate.as_deref().map(parse_rate).transpose() {
        Ok(r) => r,
        Err(e) => return fail(Exit::Usage, e),
    };
    let methods = match parse_methods(&a.methods) {
        Ok(m) => m,
        Err(e) => return fail(Exit::Usage, e),
    };
    let (host_map, host_urls) = match parse_host_map(&a.host_map) {
        Ok(x) => x,
        Err(e) => return fail(Exit::Usage, e),
    };
    if a.requests == Some(0) {
        return fail(Exit::Usage, "-n/--requests must be at least 1");
    }
    let max = a.max_duration.unwrap_or(DEFAULT_MAX_DURATION);
    for (flag, d) in [("--max-duration", Some(max)), ("-d/--duration", a.duration)] {
        match d {
            Some(d) if d.is_zero() => {
                return fail(Exit::Usage, format!("{flag} must be above 0"));
            }
            Some(d) if d > MAX_MAX_DURATION => {
                return fail(
                    Exit::Usage,
                    format!("{flag} is at most 30 days ({}s given)", d.as_secs()),
                );
            }
            _ => {}
        }
    }
    // -d: the schedule's first DURATION is the log's first DURATION × speed
    // (whole seconds, as the log has them); with --rate, the first rate × DURATION requests.
    let (window_s, limit) = match (a.duration, rate) {
        (None, _) => (None, a.requests),
        (Some(d), None) => (
            Some((d.as_secs_f64() * speed.unwrap_or(1.0)).ceil().max(1.0) as u64),
            a.requests,
        ),
        (Some(d), Some(r)) => {
            let n = (d.as_secs_f64() * r).ceil().max(1.0) as u64;
            (None, Some(a.requests.map_or(n, |m| m.min(n))))
        }
    };
    let format = match a.log_format.as_deref() {
        Some(f) => match LogFormat::parse(f) {
            Ok(f) => f,
            Err(e) => return fail(Exit::Usage, e),
        },
        None => LogFormat::default_format(),
    };
    let opts = Options {
        methods,
        limit,
        breakdown: a.breakdown as usize,
        host_map,
        window_s,
    };
    let log = match Log::read(&a.log, &format, &opts) {
        Ok(l) => l,
        Err(e) => return fail(Exit::Usage, e),
    };
    let s = &log.summary;
    if s.kept == 0 {
        let first = s
            .bad_examples
            .first()
            .map(|b| format!("; line {}: {}", b.line, b.why))
            .unwrap_or_default();
        return fail(
            Exit::Usage,
            format!(
                "{}: no request to replay ({} lines: {} with other methods, {} that do not parse{first}; see --log-format and --methods)",
                a.log.display(),
                s.lines,
                s.other_methods,
                s.bad_lines
            ),
        );
    }
    let n = s.kept;
    let speed_used = speed.unwrap_or(1.0);
    let replay_s = s.span_s / speed_used;
    // Bounded: a schedule beyond --max-duration is refused, naming why.
    let schedule_s = match rate {
        Some(r) => n as f64 / r,
        None => replay_s,
    };
    if schedule_s > max.as_secs_f64() {
        let why = match (rate, log.largest_gap()) {
            (None, Some((gap, before, after))) if gap as f64 / speed_used > 3600.0 => format!(
                "its longest gap without a request is {} (from {} to {}: a wrong date, a $msec of 0?)",
                span(gap as f64),
                date(log.start.saturating_add(before as i64)),
                date(log.start.saturating_add(after as i64))
            ),
            (None, _) => format!(
                "its requests span {} ({} to {})",
                span(s.span_s),
                date(log.start),
                date(log.start.saturating_add(s.span_s as i64 - 1))
            ),
            (Some(r), _) => format!("{n} requests at {r} req/s"),
        };
        return fail(
            Exit::Usage,
            format!(
                "{}: the replay would last {}, more than --max-duration {}: {why}; replay a window with -d, or give --speed, --rate or --max-duration",
                redline_report::escape::clean(&a.log.display().to_string()),
                span(schedule_s),
                span(max.as_secs_f64())
            ),
        );
    }
    let bad_lines = s.bad_lines;
    // The plan, built once: BASE_URL with the shared flags; the log makes
    // its requests, load and schedule (`PlanArgs::replay`).
    let request = RequestArgs {
        headers: a.headers.clone(),
        ..RequestArgs::default()
    };
    let mut pa = match crate::flags::plan_args(a.base.clone(), &request, &a.protocol, &a.conn) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Usage, e),
    };
    let log = Arc::new(log);
    pa.replay = Some(LogReplay {
        log: log.clone(),
        hosts: host_urls.clone(),
        speed: speed_used,
        rate,
    });
    pa.ask_alpn = true;
    let plan = match Plan::build(pa) {
        Ok(p) => p,
        Err(e) => {
            // A `--host-map` URL is a host of the generated scenario: say it as the flag.
            let mut m = e.to_string();
            for i in 1..=host_urls.len() {
                let inner = format!("{}: [hosts] h{i}: ", log.summary.log);
                m = m.replace(&inner, &format!("--host-map {}: ", host_urls[i - 1]));
            }
            return fail(Exit::Usage, m);
        }
    };
    if let Some(note) = &plan.note {
        eprintln!("redline: note: {note}");
    }
    // Each named request's status in the log, for the record's requests.
    let original: std::collections::HashMap<String, u16> = plan
        .scenario
        .iter()
        .flat_map(|sc| sc.requests.iter())
        .zip(&log.groups)
        .map(|(r, g)| (r.name.clone(), g.original_status))
        .collect();
    let mut summary = log.summary.clone();
    match rate {
        Some(r) => summary.rate = Some(r),
        None => summary.speed = Some(speed_used),
    }
    if !a.out.quiet {
        let how = match rate {
            Some(r) => format!("at {r} req/s, about {}", human_s(n as f64 / r)),
            None => format!(
                "at their logged times ({}x), over {}",
                speed_used,
                human_s(replay_s)
            ),
        };
        eprintln!(
            "redline: replaying {} requests of {} {how}{}",
            redline_report::count(n),
            redline_report::escape::clean(&a.log.display().to_string()),
            if bad_lines > 0 {
                format!(
                    " ({} lines did not parse)",
                    redline_report::count(bad_lines)
                )
            } else {
                String::new()
            }
        );
    }
    run_built(
        &plan,
        &a.out,
        a.thresholds.thresholds,
        a.thresholds.abort_on_fail,
        Box::new(move |rec| {
            rec.replay = Some(summary.clone());
            for r in &mut rec.requests {
                r.original_status = original.get(&r.name).copied();
            }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values() {
        assert_eq!(parse_speed("2x"), Ok(2.0));
        assert_eq!(parse_speed("0.5X"), Ok(0.5));
        assert_eq!(parse_speed("3"), Ok(3.0));
        for bad in ["0", "-1x", "x", "fast", "inf", "NaNx", "2000x"] {
            let e = parse_speed(bad).unwrap_err();
            assert!(e.starts_with("invalid --speed") && !e.contains('\n'), "{e}");
        }
        assert_eq!(
            parse_methods("get, head").unwrap().unwrap(),
            ["GET", "HEAD"]
        );
        assert_eq!(parse_methods("all").unwrap(), None);
        assert!(parse_methods("GET,,").is_err());
        let (m, u) = parse_host_map(&["WWW.Example.com=http://127.0.0.1:1".into()]).unwrap();
        assert_eq!(m, [("www.example.com".to_string(), 1)]);
        assert_eq!(u, ["http://127.0.0.1:1"]);
        assert!(parse_host_map(&["nohost".into()]).is_err());
    }
}
