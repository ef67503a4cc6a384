//! `Plan::build`: the one way arguments become a plan. A scenario's `[load]`
//! fills what the flags left open; the target is resolved
//! ([`super::target::resolve`]), the protocol chosen ([`super::mode::choose`]),
//! the request spec built and encoded, the load model checked and scaled,
//! and the recorded config redacted, in that order, before any traffic.

use super::args::PlanArgs;
use super::load::{parse_duration, segment_load, staged_load, Load, DEFAULT_CONNECTIONS};
use super::load::{DEFAULT_DURATION, DEFAULT_OPEN_CONNECTIONS};
use super::mode::choose;
use super::redact::{redact_header, REDACTED};
use super::request::{parse_headers, RequestSpec};
use super::{usage, Plan, PlanError};
use base64::Engine as _;
use redline_stats::{LoadModel, RunConfig};
use std::time::Duration;

/// A scenario file's `[load]` fills the load flags the command line left
/// open (values the command line would refuse are refused at their line).
fn scenario_load(
    a: &mut PlanArgs,
    path: &std::path::Path,
) -> Result<(crate::scenario::file::ScenarioFile, String), PlanError> {
    let (f, text) = crate::scenario::load(path)?;
    if a.url.trim().is_empty() {
        a.url = match (&f.base, f.hosts.values().next()) {
            (Some(b), _) => b.clone(),
            (None, Some(h)) => h.clone(),
            (None, None) => {
                return Err(usage(format!(
                    "{}: no base URL: give `base = \"http://…\"` in the file or a URL on the command line",
                    path.display()
                )))
            }
        };
    }
    let Some(l) = &f.load else {
        return Ok((f, text));
    };
    let at = |k: &str| {
        let lines = crate::scenario::file::Lines::new(&text);
        lines.at(
            &path.display().to_string(),
            &[
                crate::scenario::file::key("load"),
                crate::scenario::file::key(k),
            ],
        )
    };
    let bad = if l.connections == Some(0) {
        Some(("connections", "must be at least 1".to_string()))
    } else if l.requests == Some(0) {
        Some(("requests", "must be at least 1".to_string()))
    } else if l.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        Some((
            "rate",
            "must be a positive number of requests per second".to_string(),
        ))
    } else {
        None
    };
    if let Some((k, why)) = bad {
        return Err(usage(format!("{}: [load] {k} {why}", at(k))));
    }
    if a.rate.is_none() && a.connections.is_none() {
        a.rate = l.rate;
    }
    if a.connections.is_none() {
        a.connections = l.connections;
    }
    if a.requests.is_none() && a.duration.is_none() {
        a.requests = l.requests;
        if let Some(d) = &l.duration {
            a.duration = Some(
                parse_duration(d)
                    .map_err(|e| usage(format!("{}: [load] duration: {e}", at("duration"))))?,
            );
        }
    }
    Ok((f, text))
}

/// `--urls FILE`: the target list as a generated scenario ([`crate::urls`]);
/// the first absolute target is the base URL when the command line gives none.
fn urls_load(
    a: &mut PlanArgs,
    path: &std::path::Path,
    order: crate::urls::Order,
) -> Result<(crate::scenario::file::ScenarioFile, String), PlanError> {
    let text =
        redline_stats::files::read_text(path, redline_stats::files::Kind::Scenario, "--urls")
            .map_err(PlanError::Invalid)?;
    let targets =
        crate::urls::parse(&text).map_err(|e| usage(format!("{}: {e}", path.display())))?;
    if a.url.trim().is_empty() {
        a.url = crate::urls::first_absolute(&targets).ok_or_else(|| {
            usage(format!(
                "{}: every target is a path: give the base URL on the command line",
                path.display()
            ))
        })?;
    }
    Ok((crate::urls::to_scenario(&targets, order), String::new()))
}

/// `redline replay`: the log sets the load (open loop, its kept requests,
/// at their mean rate over the log's span at `speed`, or at `rate`); the
/// flags that would set it another way are refused.
fn replay_load(a: &mut PlanArgs, r: &super::LogReplay) -> Result<(), PlanError> {
    if a.scenario.is_some() || a.urls.is_some() || a.stages.is_some() {
        return Err(usage(
            "a replay's requests and schedule come from its log: drop --scenario, --urls and --stages",
        ));
    }
    if a.rate.is_some() || a.requests.is_some() || a.duration.is_some() {
        return Err(usage(
            "a replay's load comes from its log: give its rate and request count with the replay (--rate, -n)",
        ));
    }
    if !(r.speed.is_finite() && r.speed > 0.0) {
        return Err(usage("--speed must be a factor above 0"));
    }
    let n = r.log.summary.kept;
    if n == 0 || r.log.groups.is_empty() || r.log.ticks.is_empty() {
        return Err(usage(format!(
            "{}: no request to replay",
            r.log.summary.log
        )));
    }
    let span = r.log.summary.span_s / r.speed;
    a.rate = Some(r.rate.unwrap_or(n as f64 / span.max(1e-9)));
    a.requests = Some(n);
    Ok(())
}

/// The replay scenario of `r`: BASE_URL's path (`target_path`, query
/// dropped) goes before every logged path; `-H` headers on every request.
fn replay_scenario(
    a: &PlanArgs,
    r: &super::LogReplay,
    target_path: &str,
    cli_headers: &[(String, String)],
) -> Result<crate::scenario::Scenario, PlanError> {
    let prefix = target_path
        .split('?')
        .next()
        .unwrap_or("")
        .trim_end_matches('/');
    crate::scenario::Scenario::replay(crate::scenario::replay::ReplayArgs {
        base: &a.url,
        hosts: &r.hosts,
        log: &r.log,
        prefix,
        tls: &a.tls,
        http10: a.http10,
        cli_headers,
        timeout: a.timeout,
    })
}

impl Plan {
    /// Validates and resolves options into a plan, the one value a run
    /// reads: nothing changes it afterwards. Pure but for name resolution
    /// and, when [`PlanArgs::ask_alpn`] is set, the one ALPN probe of an
    /// https run that leaves the version open (or its answer, already known,
    /// from [`PlanArgs::alpn`]).
    pub fn build(mut a: PlanArgs) -> Result<Plan, PlanError> {
        let scenario_file = match (a.scenario.clone(), a.urls.clone()) {
            (Some(_), Some(_)) => {
                return Err(usage("--urls and --scenario do not go together"));
            }
            (None, Some((path, order, _))) => Some(urls_load(&mut a, &path, order)?),
            (Some((path, _)), None) => Some(scenario_load(&mut a, &path)?),
            (None, None) => None,
        };
        if let Some(r) = a.replay.clone() {
            replay_load(&mut a, &r)?;
        }
        let resolved = super::target::resolve(&a.url, &a.tls)?;
        let url = &resolved.url;
        let tls = resolved.tls.clone();

        // Headers and credentials.
        let extra = parse_headers(&a.headers)?;
        let auth = match &a.basic_auth {
            Some(ba) if !ba.contains(':') => {
                return Err(usage("-a/--basic-auth expects user:password"))
            }
            Some(ba) => Some(base64::engine::general_purpose::STANDARD.encode(ba)),
            None => resolved.basic_auth.clone(),
        };
        let spec = RequestSpec::build(
            &a,
            &resolved.host_header,
            &resolved.target.path,
            &extra,
            auth.as_deref(),
        )?;

        // Load model.
        if a.timeout.is_zero() {
            return Err(usage("--timeout must be greater than zero"));
        }
        if a.connect_timeout.is_zero() {
            return Err(usage("--connect-timeout must be greater than zero"));
        }
        if a.requests == Some(0) {
            return Err(usage("-n/--requests must be at least 1"));
        }
        if a.connections == Some(0) {
            return Err(usage("-c/--connections must be at least 1"));
        }
        if a.requests_per_conn == Some(0) {
            return Err(usage("--requests-per-conn must be at least 1"));
        }
        let (wire, alpn, streams) = choose(&a, url.scheme())?;
        // Streams per connection: HTTP/2 and HTTP/3.
        let http2 = wire.protocol().multiplexed();
        if a.max_redirs.is_some() && !a.follow_redirects {
            return Err(usage("--max-redirs needs -L/--follow-redirects"));
        }
        if a.max_redirs.is_some_and(|n| n > 1000) {
            return Err(usage("--max-redirs above 1000 is not supported"));
        }
        if let Some(d) = a.duration {
            if d.is_zero() {
                return Err(usage("-d/--duration must be greater than zero"));
            }
        }
        let duration = match (a.requests, a.duration) {
            (None, None) => Some(DEFAULT_DURATION),
            (_, d) => d,
        };
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        if a.threads == Some(0) {
            return Err(usage("-t/--threads must be at least 1"));
        }
        let staged = match &a.stages {
            Some(sa) => Some(staged_load(&a, sa, http2.then_some(streams))?),
            None => None,
        };
        let load = match (&staged, a.rate) {
            (Some((staged_load, _, _)), _) => staged_load.clone(),
            (None, None) => {
                let c = a.connections.unwrap_or(DEFAULT_CONNECTIONS);
                Load::Closed {
                    connections: c,
                    requests: a.requests,
                    duration,
                }
            }
            (None, Some(r)) => {
                if !(r.is_finite() && r > 0.0) {
                    return Err(usage(
                        "-r/--rate must be a positive number of requests per second",
                    ));
                }
                if r > 10_000_000.0 {
                    return Err(usage("-r/--rate above 10,000,000 req/s is not supported"));
                }
                Load::Open {
                    rate: r,
                    arrival: a.arrival,
                    max_connections: a.connections.unwrap_or(DEFAULT_OPEN_CONNECTIONS),
                    requests: a.requests,
                    duration,
                }
            }
        };
        let mut staged = staged;
        let (load, segment) = match &a.segment {
            Some(seg) => {
                let (load, sp) = segment_load(load, seg);
                if let Some((_, _, stage_plan)) = staged.as_mut() {
                    for st in &mut stage_plan.stages {
                        st.level = if stage_plan.unit == "rps" {
                            seg.scale_rate(st.level)
                        } else {
                            seg.scale_int(st.level as u64) as f64
                        };
                    }
                }
                (load, Some(sp))
            }
            None => (load, None),
        };
        let conns = load.max_connections();
        if conns > 1_000_000 {
            return Err(usage("-c/--connections above 1,000,000 is not supported"));
        }
        let threads = a.threads.unwrap_or(cores).min(conns.max(1) as usize).max(1);

        // Request bytes, built once: the HTTP/1 hot path writes them as they are.
        let requests_per_conn = if a.keepalive {
            a.requests_per_conn
        } else {
            Some(1)
        };
        let request = spec.encode_h1(false);
        let request_close = spec.encode_h1(true);

        let mut shown_headers: Vec<String> = a.headers.iter().map(|h| redact_header(h)).collect();
        if auth.is_some() {
            shown_headers.push(format!("Authorization: {REDACTED}"));
        }
        let replay_at_times = a.replay.as_ref().filter(|r| r.rate.is_none());
        let load_model = match &load {
            Load::Closed {
                connections,
                requests,
                duration,
            } => LoadModel::Closed {
                connections: *connections,
                requests: *requests,
                duration_s: duration.map(|d| d.as_secs_f64()),
            },
            Load::Open {
                rate,
                arrival,
                max_connections,
                requests,
                duration,
            } => LoadModel::Open {
                rate: *rate,
                arrival: match replay_at_times {
                    Some(_) => "replay".into(),
                    None => arrival.name().into(),
                },
                max_connections: *max_connections,
                requests: *requests,
                duration_s: duration.map(|d| d.as_secs_f64()),
            },
        };
        let mut config = RunConfig {
            url: resolved.target.display.clone(),
            method: spec.method.clone(),
            headers: shown_headers,
            body_bytes: spec.body.len() as u64,
            http_version: wire.record_version().into(),
            streams: http2.then_some(u64::from(streams)),
            keepalive: a.keepalive,
            requests_per_conn,
            timeout_s: a.timeout.as_secs_f64(),
            connect_timeout_s: a.connect_timeout.as_secs_f64(),
            threads: threads as u64,
            load: load_model,
            insecure: tls.as_ref().is_some_and(|t| t.insecure),
            scenario: None,
            stages: staged.as_ref().map(|s| s.2.clone()),
            follow_redirects: a
                .follow_redirects
                .then(|| u64::from(a.max_redirs.unwrap_or(crate::redirect::DEFAULT_MAX_REDIRS))),
            negotiated: None,
            segment: a.segment.as_ref().map(|s| redline_stats::SegmentConfig {
                segment: s.to_string(),
                sequence: s.sequence().to_string(),
                index: s.index() as u64,
                count: s.sequence().len() as u64,
            }),
            schedule: replay_at_times.map(|r| {
                redline_stats::replay::ReplaySchedule::from_seconds(
                    r.log.ticks.iter().map(|t| t.second),
                    r.speed,
                )
            }),
            expect_status: a
                .expect_status
                .as_ref()
                .filter(|r| !r.is_default())
                .map(|r| r.to_string()),
        };
        let seed = a.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
        let source = match (&a.scenario, &a.urls) {
            (Some((path, allow)), _) => Some((path, *allow)),
            (None, Some((path, _, allow))) => Some((path, *allow)),
            (None, None) => None,
        };
        let scenario = match (source, &scenario_file) {
            (Some((path, allow)), Some((f, text))) => {
                let sc = crate::scenario::Scenario::compile(crate::scenario::CompileArgs {
                    path,
                    file: f,
                    text,
                    base: &a.url,
                    allow_paths: allow,
                    tls: &a.tls,
                    http10: a.http10,
                    cli_headers: &extra,
                    timeout: a.timeout,
                })?;
                config.scenario = Some(format!("{} ({})", sc.name, sc.file));
                config.method = sc.method_shown();
                config.body_bytes = 0;
                let mut sc = sc;
                sc.segment = a.segment.clone();
                sc.seed = seed;
                Some(std::sync::Arc::new(sc))
            }
            _ => match &a.replay {
                Some(r) => {
                    let sc = replay_scenario(&a, r, &resolved.target.path, &extra)?;
                    config.scenario = Some(format!("replay of {}", r.log.summary.log));
                    config.method = sc.method_shown();
                    config.body_bytes = 0;
                    Some(std::sync::Arc::new(sc))
                }
                None => None,
            },
        };
        // A replay at the log's times: one stage per second of the log.
        let replay_staged = replay_at_times.map(|r| super::Staged {
            profile: crate::pacer::Profile::from_stages(&r.log.stages(r.speed), true),
            rate: true,
        });
        let mut plan = Plan {
            scenario,
            target: resolved.target,
            head_request: spec.is_head(),
            spec,
            request,
            request_close,
            keepalive: a.keepalive,
            requests_per_conn,
            timeout: a.timeout,
            connect_timeout: a.connect_timeout,
            grace: Duration::from_secs(1).min(a.timeout),
            threads,
            load,
            seed,
            config,
            tls,
            staged: staged.map(|s| s.1).or(replay_staged),
            wire,
            alpn,
            streams,
            follow: a.follow_redirects.then(|| {
                std::sync::Arc::new(crate::redirect::Follow::new(
                    a.max_redirs.unwrap_or(crate::redirect::DEFAULT_MAX_REDIRS),
                    a.tls.clone(),
                ))
            }),
            segment,
            note: None,
            tls_checked: None,
            h3: None,
            expect_status: a.expect_status.clone().unwrap_or_default(),
        };
        if http2 {
            // The request must also be expressible in HTTP/2 (e.g. no control
            // characters in header values): a usage error, before any traffic.
            plan.spec.to_h2(plan.scheme()).map_err(PlanError::Invalid)?;
        }
        // The server's answer already known (`find`'s later steps): taken now.
        // A note was given when it was first asked; nothing to say again.
        let _ = plan.settle_alpn();
        // Not known yet: asked now, once, before any traffic.
        if a.ask_alpn {
            plan.note = plan.resolve();
        }
        plan.resolve_h3(a.ask_alpn);
        Ok(plan)
    }
}
