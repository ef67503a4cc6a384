//! `redline coordinate`: listen for agents, hand out segments, merge their
//! live seconds and records, judge `--abort-on-fail` and thresholds on the merge.

use super::*;

pub(super) fn cmd_coordinate(a: CoordinateArgs) -> Exit {
    if a.agents == 0 || a.agents > MAX_AGENTS {
        return fail(
            Exit::Usage,
            format!("--agents must be between 1 and {MAX_AGENTS}"),
        );
    }
    let token = match resolve_token(
        a.token.as_ref().map(|t| t.0.as_str()),
        a.token_file.as_deref(),
    ) {
        Ok(t) => t,
        Err(e) => return fail(Exit::Usage, e),
    };
    let listener = match std::net::TcpListener::bind(&a.listen) {
        Ok(l) => l,
        Err(e) => return fail(Exit::Usage, format!("cannot listen on {}: {e}", a.listen)),
    };
    let loopback = listener.local_addr().is_ok_and(|x| x.ip().is_loopback());
    if token.is_none() && !loopback {
        return fail(
            Exit::Usage,
            format!(
                "--listen {} reaches beyond this machine: give a token (--token-file FILE, REDLINE_TOKEN or --token) so only your agents can join",
                a.listen
            ),
        );
    }
    if a.linger > MAX_LINGER {
        return fail(Exit::Usage, "--linger: at most 24h");
    }
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => {
            match read_bounded(c, 1 << 20, "--tls-cert")
                .and_then(|c| Ok((c, read_bounded(k, 1 << 20, "--tls-key")?)))
                .and_then(|(c, k)| redline_dist::tls::server_config(&c, &k))
            {
                Ok(t) => Some(t),
                Err(e) => return fail(Exit::Usage, e),
            }
        }
        _ => None,
    };
    let record_srv = match &a.serve_record {
        None => None,
        Some(at) => {
            let l = match std::net::TcpListener::bind(at) {
                Ok(l) => l,
                Err(e) => {
                    return fail(
                        Exit::Usage,
                        format!("cannot listen on --serve-record {at}: {e}"),
                    )
                }
            };
            if token.is_none() && !l.local_addr().is_ok_and(|x| x.ip().is_loopback()) {
                return fail(
                    Exit::Usage,
                    format!("--serve-record {at} reaches beyond this machine: give a token (--token-file FILE, REDLINE_TOKEN or --token) so only you can fetch the record"),
                );
            }
            match redline_dist::record_http::RecordServer::start(l, token.as_ref()) {
                Ok(s) => Some(s),
                Err(e) => return fail(Exit::Failure, format!("--serve-record {at}: {e}")),
            }
        }
    };
    let addr = listener
        .local_addr()
        .map(|x| x.to_string())
        .unwrap_or_else(|_| a.listen.clone());
    eprintln!(
        "redline coordinate: listening on {addr} for {} agents",
        a.agents
    );
    if let Some(s) = &record_srv {
        eprintln!(
            "redline coordinate: the run record will be at http://{}{} after the run",
            s.local_addr(),
            redline_dist::record_http::RECORD_PATH
        );
    }
    let cfg = coordinator::Config {
        agents: a.agents,
        ready_timeout: a.ready_timeout,
        start_delay: a.start_delay,
        silence_timeout: a.silence_timeout,
        run_timeout: a.run_timeout,
        abort_on_fail: a.abort_on_fail,
        token,
        tls,
    };
    // The live view on a terminal: events go to its log and are printed
    // once it is left (q or Ctrl-C quit at once, as Ctrl-C always did here).
    let view = match !a.quiet && crate::live::wanted(a.no_tui) {
        true => crate::live::LiveView::start(
            {
                let mut m = crate::live::Model::new(format!("redline coordinate on {addr}"));
                m.stage = format!("waiting for {} agents", a.agents);
                m.log_prefix = "redline coordinate: ".into();
                m
            },
            crate::live::OnQuit::Exit,
        ),
        false => None,
    };
    let mut held: Vec<String> = Vec::new();
    let tty = std::io::stderr().is_terminal();
    let quiet = a.quiet;
    let thresholds = a.thresholds.clone();
    // The same judgement as a local run's --abort-on-fail, on the merged seconds.
    let judge = |live: &coordinator::Live| {
        if thresholds.is_empty() {
            return None;
        }
        let so_far = redline_report::thresholds::SoFar {
            elapsed_s: live.elapsed_s,
            failed: live.failed,
            series: live.series,
            planned_requests: live.planned_requests,
            planned_duration_s: live.planned_duration_s,
            // The agents' rule is not known here until their records arrive
            // (the final check reads it from the merged record).
            rule: &redline_stats::ExpectStatus::default(),
        };
        redline_report::thresholds::hopeless(&thresholds, &so_far)
    };
    let result = coordinator::coordinate_judged(
        listener,
        &cfg,
        |ev| {
            use coordinator::Event::*;
            if let Some(v) = &view {
                let mut m = v.model();
                match ev {
                    Starting(_) => m.begin("running", None, None, None),
                    Progress(t, c, f, n) => {
                        m.snapshot(*t, *c, *f, None, &[]);
                        m.agents = Some(*n);
                    }
                    Second(x) => {
                        m.planned_duration_s = x.planned_duration_s;
                        m.planned_requests = x.planned_requests;
                        m.push_second(crate::live::Second {
                            t: x.t,
                            requests: x.requests,
                            errors: x.errors,
                            p50_us: x.p50_us,
                            p90_us: x.p90_us,
                            p99_us: x.p99_us,
                            status: x.status_classes,
                            bytes: None,
                        });
                    }
                    Stopping(why) => m.stage = format!("stopping every agent: {why}"),
                    _ => {}
                }
                // Totals and seconds are the screen's; events go to its log below.
                if matches!(ev, Progress(..) | Second(_)) {
                    return;
                }
            }
            let line = match ev {
                Registered(i, h) => format!("agent {i} registered ({h})"),
                Refused(r) => format!("refused an agent: {r}"),
                Ready(i, off, rtt) => {
                    format!("agent {i} ready (clock offset {off:+.1} ms, round trip {rtt:.2} ms)")
                }
                Starting(_) => format!("all agents ready: starting in {:?}", cfg.start_delay),
                Progress(t, c, f, n) => {
                    if !tty {
                        return;
                    }
                    if !quiet {
                        eprint!(
                            "\r\x1b[K[{t:>6.1}s] {} agents, {} done, {} errors",
                            n,
                            redline_report::count(*c),
                            redline_report::count(*f)
                        );
                    }
                    return;
                }
                Second(x) => format!(
                    "second {}: {} req/s, p99 {}, {} errors ({} agents)",
                    x.t,
                    redline_report::count(x.requests),
                    if x.p99_us >= 1000 {
                        format!("{:.2} ms", x.p99_us as f64 / 1000.0)
                    } else {
                        format!("{} µs", x.p99_us)
                    },
                    redline_report::count(x.errors),
                    x.agents
                ),
                Finished(i) => format!("agent {i} sent its record"),
                Stopping(why) => format!("stopping every agent (--abort-on-fail): {why}"),
                Lost(i, why) => format!("agent {i} lost: {why}"),
            };
            // A lost agent and an early stop are always said, even with -q.
            if !quiet || matches!(ev, Lost(..) | Stopping(_)) {
                if let Some(v) = &view {
                    v.model().log(line.clone());
                    held.push(format!("redline coordinate: {line}"));
                    return;
                }
                if tty {
                    eprint!("\r\x1b[K");
                }
                eprintln!("redline coordinate: {line}");
            }
        },
        judge,
    );
    // The view is left, then the events it held are printed.
    drop(view);
    for l in held {
        eprintln!("{l}");
    }
    let out = match result {
        Ok(o) => o,
        Err(coordinator::Error::NotReady(m)) => return fail(Exit::Failure, m),
        Err(e) => return fail(Exit::Failure, e),
    };
    if !quiet {
        for ag in &out.agents {
            let state = match (&ag.failure, &ag.record, &ag.note) {
                (Some(f), _, _) => format!("LOST: {f}"),
                (None, Some(r), _) => format!(
                    "{} done, {} failed",
                    redline_report::count(r.counters.completed),
                    redline_report::count(r.counters.failed)
                ),
                (None, None, Some(n)) => format!("no load: {n}"),
                (None, None, None) => "no record".into(),
            };
            eprintln!(
                "redline coordinate: {}: offset {:+.1} ms, round trip {:.2} ms, started {:.1} ms late; {}",
                redline_report::escape::clean(&ag.name()),
                ag.offset_ms,
                ag.rtt_ms,
                ag.lateness_ms,
                redline_report::escape::clean(&state)
            );
        }
    }
    let Some(rec) = out.merged.clone() else {
        return fail(
            Exit::Failure,
            "no agent sent a run record: nothing to report",
        );
    };
    let Some(srv) = record_srv else {
        return report_merged(&a, &rec, &out);
    };
    srv.publish(redline_report::json(&rec).into_bytes());
    let code = report_merged(&a, &rec, &out);
    eprintln!(
        "redline coordinate: serving the run record at http://{}{} for at most {:?} (until it is downloaded once)",
        srv.local_addr(),
        redline_dist::record_http::RECORD_PATH,
        a.linger
    );
    if srv.wait_fetched(a.linger) {
        eprintln!("redline coordinate: the run record was downloaded");
    } else {
        eprintln!(
            "redline coordinate: nobody downloaded the run record within {:?}",
            a.linger
        );
    }
    code
}

/// The longest `--linger`.
pub(super) const MAX_LINGER: Duration = Duration::from_secs(24 * 3600);

/// Writes `--record`, prints the merged report and the verdict; the exit code.
pub(super) fn report_merged(
    a: &CoordinateArgs,
    rec: &redline_stats::RunRecord,
    out: &coordinator::Outcome,
) -> Exit {
    if let Some(p) = &a.record {
        if let Err(e) = std::fs::write(p, redline_report::json(rec)) {
            return fail(
                Exit::Failure,
                format!("cannot write --record {}: {e}", p.display()),
            );
        }
    }
    let outcomes = redline_report::thresholds::check(rec, &a.thresholds);
    let code = match a.output {
        RecordFormat::Json => {
            let c = print_out(&redline_report::json(rec));
            for o in &outcomes {
                eprintln!("threshold {o}");
            }
            c
        }
        RecordFormat::Text => {
            let mut t = redline_report::text(rec);
            if !outcomes.is_empty() {
                t.push_str("\nThresholds (on the merged record):\n");
                for o in &outcomes {
                    t.push_str(&format!("  {o}\n"));
                }
            }
            print_out(&t)
        }
    };
    if code != Exit::Ok {
        return code;
    }
    if out.incomplete {
        let lost: Vec<String> = out
            .agents
            .iter()
            .filter(|x| x.failure.is_some())
            .map(|x| x.name())
            .collect();
        return fail(
            Exit::Failure,
            format!(
                "incomplete run: lost {}; the record holds only the other agents' load",
                lost.join(", ")
            ),
        );
    }
    if out.stopped.is_some() || outcomes.iter().any(|o| !o.pass) {
        Exit::Threshold
    } else {
        Exit::Ok
    }
}
