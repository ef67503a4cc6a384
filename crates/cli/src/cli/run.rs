//! `redline run`: one run or `--repeat`ed runs, from a built plan to the
//! engine, the live display, the hooks (history, watch, agents) and the report.

use super::*;

pub(super) fn cmd_run(a: RunArgs) -> Exit {
    let p = match prepare(a) {
        Ok(p) => p,
        Err(code) => return code,
    };
    match p.repeat {
        None => run_plan(&p.plan, &p.out, &p.hooks),
        Some(rep) => run_repeated(&p.plan, p.plan_vs.as_ref(), rep, &p.out, p.hooks),
    }
}

/// What `run`'s arguments build before any traffic: the plan (and `--vs`'s),
/// the hooks around the engine, the output flags and `--repeat`.
pub(crate) struct Prepared {
    /// The plan every run of this command runs.
    pub(crate) plan: Plan,
    /// The plan's arguments (a `trial` probes the server with a one-request plan of them).
    pub(crate) plan_args: PlanArgs,
    plan_vs: Option<Plan>,
    hooks: Hooks,
    /// `-o`, `-q`, `--junit`, `--no-tui`.
    pub(crate) out: OutArgs,
    repeat: Option<crate::cmd_history::Repeat>,
}

impl Prepared {
    /// The save flags given (`--label`, `--note`, `--db`, `--no-save`, `--html`, `--live-json`).
    pub(crate) fn save(&self) -> &crate::cmd_history::RunSaveArgs {
        &self.hooks.save
    }
    /// The watch flags given (`--watch`, `--server-config`…).
    pub(crate) fn watch(&self) -> &crate::cmd_server::RunWatchArgs {
        &self.hooks.watch
    }
    /// The flags that make it more than one plain run, in words (`--repeat`,
    /// `--vs`, `--segment`, `--start-at`, `--live-seconds`), when given.
    pub(crate) fn not_one_run(&self) -> Option<&'static str> {
        if self.repeat.is_some() {
            Some("--repeat/--vs/--pause")
        } else if self.hooks.start_at.is_some() || self.plan.segment.is_some() {
            Some("--segment/--start-at")
        } else if self.hooks.live_seconds.is_some() {
            Some("--live-seconds")
        } else {
            None
        }
    }
    /// Runs the plan once on the normal run path (watch, save, thresholds),
    /// saved with `save`, quietly, its report left to the caller: the exit
    /// code and the run record (none when the run could not start).
    pub(crate) fn run_once(
        &mut self,
        save: crate::cmd_history::RunSaveArgs,
    ) -> (Exit, Option<redline_stats::RunRecord>) {
        let out = OutArgs {
            output: Output::Text,
            quiet: true,
            junit: None,
            no_tui: true,
        };
        self.hooks.save = save;
        self.hooks.kept = Some(Default::default());
        self.hooks.report = Some(Box::new(|_| Ok(String::new())));
        let code = run_plan(&self.plan, &out, &self.hooks);
        let rec = self
            .hooks
            .kept
            .take()
            .and_then(|k| k.into_inner().into_iter().next());
        (code, rec)
    }
}

/// Builds what `run`'s arguments ask for, before any traffic; Err: the exit
/// code, its one line already printed.
pub(crate) fn prepare(a: RunArgs) -> Result<Prepared, Exit> {
    let metrics = a.metrics.config();
    if let Err(e) = metrics.check() {
        return Err(fail(Exit::Usage, e));
    }
    let mut pa = match a.plan_args() {
        Ok(p) => p,
        Err(e) => return Err(fail(Exit::Usage, e)),
    };
    let (segment, start_at) = match a.dist.resolve() {
        Ok(x) => x,
        Err(e) => return Err(fail(Exit::Usage, e)),
    };
    pa.segment = segment;
    // https without a version flag: HTTP/2 when the server picks it by ALPN
    // (asked once while the plan is built, before any traffic).
    pa.ask_alpn = true;
    let pa_vs = a.vs.clone().map(|url| PlanArgs { url, ..pa.clone() });
    let plan_args = pa.clone();
    let plan = match Plan::build(pa) {
        Ok(p) => p,
        Err(e) => return Err(fail(Exit::Usage, e)),
    };
    if let Some(note) = &plan.note {
        eprintln!("redline: note: {note}");
    }
    let plan_vs = match pa_vs.map(Plan::build).transpose() {
        Ok(Some(p)) => {
            if let Some(note) = &p.note {
                eprintln!("redline: note (--vs): {note}");
            }
            Some(p)
        }
        Ok(None) => None,
        Err(e) => return Err(fail(Exit::Usage, format!("--vs: {e}"))),
    };
    let mut thresholds = a.thresholds.thresholds;
    let mut request_thresholds = Vec::new();
    if let Some(sc) = &plan.scenario {
        // Errors name the file, the line of the entry and whose it is.
        let parse = |t: &String, request: Option<usize>, i: usize| {
            t.parse::<redline_report::thresholds::Threshold>()
                .map_err(|e| format!("{}: {e}", sc.threshold_place(request, i)))
        };
        for (i, t) in sc.thresholds.iter().enumerate() {
            match parse(t, None, i) {
                Ok(t) => thresholds.push(t),
                Err(e) => return Err(fail(Exit::Usage, e)),
            }
        }
        for (n, r) in sc.requests.iter().enumerate() {
            let mut v = Vec::new();
            for (i, t) in r.thresholds.iter().enumerate() {
                match parse(t, Some(n), i) {
                    Ok(t) => v.push(t),
                    Err(e) => return Err(fail(Exit::Usage, e)),
                }
            }
            if !v.is_empty() {
                request_thresholds.push((r.name.clone(), v));
            }
        }
    }
    let hooks = Hooks {
        save: a.save,
        watch: a.watch,
        thresholds,
        request_thresholds,
        abort_on_fail: a.thresholds.abort_on_fail,
        start_at,
        live_seconds: a.dist.live_seconds.clone(),
        report: None,
        progress: None,
        kept: None,
        metrics: Some(metrics),
        annotate: None,
    };
    let repeat = a.repeat.map(|n| crate::cmd_history::Repeat {
        n,
        pause: a.pause,
        vs_label: a.vs_label,
    });
    Ok(Prepared {
        plan,
        plan_args,
        plan_vs,
        hooks,
        out: a.out,
        repeat,
    })
}

/// `--repeat N` (and `--vs URL`): the plan N times, or A and B alternately N
/// times each; with --vs, the runs of A compared with the runs of B at the end.
pub(super) fn run_repeated(
    plan: &Plan,
    vs: Option<&Plan>,
    rep: crate::cmd_history::Repeat,
    out: &OutArgs,
    mut hooks: Hooks,
) -> Exit {
    if hooks.start_at.is_some() || plan.segment.is_some() {
        return fail(
            Exit::Usage,
            "--repeat does not go with --segment or --start-at (a distributed run is one run)",
        );
    }
    let sides = match crate::cmd_history::repeat_sides(&hooks.save, &rep, vs.is_some()) {
        Ok(s) => s,
        Err(e) => return fail(Exit::Usage, e),
    };
    if vs.is_some() {
        hooks.kept = Some(Default::default());
    }
    let base = hooks.save.clone();
    let total = rep.n as usize * sides.len();
    let mut code = Exit::Ok;
    let mut k = 0;
    // Which side each kept record is (a run that could not start keeps none).
    let mut kept_side: Vec<usize> = Vec::new();
    'runs: for i in 1..=rep.n {
        for (s, side) in sides.iter().enumerate() {
            k += 1;
            if k > 1 {
                if let Some(p) = rep.pause {
                    // Interruptible: Ctrl-C during the pause ends the series.
                    let until = std::time::Instant::now() + p;
                    while std::time::Instant::now() < until && !stop_handle().is_stopped() {
                        std::thread::sleep(Duration::from_millis(50).min(p));
                    }
                }
                if stop_handle().is_stopped() {
                    break 'runs;
                }
            }
            hooks.save = crate::cmd_history::repeat_save(&base, side, i, rep.n, &sides);
            if !out.quiet {
                eprintln!(
                    "redline: run {k} of {total}{}",
                    side.label
                        .as_deref()
                        .map(|l| format!(" ({l}, repeat {i} of {})", rep.n))
                        .unwrap_or_else(|| format!(" (repeat {i} of {})", rep.n))
                );
            }
            let before = hooks.kept.as_ref().map_or(0, |k| k.borrow().len());
            let c = run_plan(if s == 0 { plan } else { vs.unwrap_or(plan) }, out, &hooks);
            if hooks.kept.as_ref().map_or(0, |k| k.borrow().len()) > before {
                kept_side.push(s);
            }
            if code == Exit::Ok {
                code = c;
            }
            // Ctrl-C or an --abort-on-fail abort: no further runs.
            if stop_handle().is_stopped() {
                code = c;
                break 'runs;
            }
        }
    }
    if let Some(kept) = hooks.kept.take() {
        let kept = kept.into_inner();
        let lab = |i: usize| {
            sides[i]
                .label
                .clone()
                .unwrap_or_else(|| ["A", "B"][i].into())
        };
        let (a, b): (Vec<_>, Vec<_>) = kept
            .into_iter()
            .zip(kept_side)
            .partition(|(_, side)| *side == 0);
        let a: Vec<_> = a.into_iter().map(|x| x.0).collect();
        let b: Vec<_> = b.into_iter().map(|x| x.0).collect();
        if let (Some(la), Some(lb)) = (a.last(), b.last()) {
            let c = redline_report::compare::compare_runs(&a, &b);
            let t = redline_report::compare::text(
                &c,
                la,
                lb,
                &format!("{}, {} runs", lab(0), a.len()),
                &format!("{}, {} runs", lab(1), b.len()),
            );
            // With JSON or CSV on stdout, the comparison goes to stderr.
            if out.output == Output::Text {
                println!("\n{t}");
            } else {
                eprintln!("\n{t}");
            }
        }
    }
    code
}

/// The live view's model of a run of `plan`: its target, planned end and stages.
pub(crate) fn live_model(plan: &Plan, stage: &str) -> crate::live::Model {
    let mut m = crate::live::Model::new(format!(
        "redline {stage} {}",
        redline_report::escape::clean(&plan.target.display)
    ));
    let (requests, duration) = match &plan.load {
        redline_engine::Load::Closed {
            requests, duration, ..
        }
        | redline_engine::Load::Open {
            requests, duration, ..
        } => (*requests, duration.map(|d| d.as_secs_f64())),
    };
    m.begin(stage, duration, requests, plan.config.stages.clone());
    if let redline_engine::Load::Open { rate, .. } = &plan.load {
        m.target_rate = Some(*rate);
    }
    m
}

pub(super) fn run_plan(plan: &Plan, out: &OutArgs, hooks: &Hooks) -> Exit {
    // First, while the process has one thread (growing the descriptor table
    // later waits for an RCU grace period per growth).
    let _ = redline_engine::run::prepare_fds(plan);
    let watch = match crate::cmd_server::before_run(&hooks.watch) {
        Ok(w) => w,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut live = match crate::cmd_history::LiveSink::open(&hooks.save) {
        Ok(l) => l,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut seconds = match hooks
        .live_seconds
        .as_deref()
        .map(crate::cmd_dist::SecondsSink::open)
        .transpose()
    {
        Ok(s) => s,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut exporter = match hooks.metrics.as_ref().filter(|c| c.any()) {
        Some(c) => {
            match redline_metrics::Exporter::start(
                c,
                &plan.config,
                plan.scenario
                    .as_ref()
                    .map(|sc| sc.requests.iter().map(|r| r.name.clone()).collect())
                    .unwrap_or_default(),
            ) {
                Ok(e) => {
                    if let (Some(a), false) = (e.addr(), out.quiet) {
                        eprintln!("redline: metrics at http://{a}/metrics");
                    }
                    Some(e)
                }
                Err(e) => return fail(Exit::Usage, e),
            }
        }
        None => None,
    };
    install_ctrlc();
    let stop = stop_handle();
    if let Some(e) = exporter.as_mut() {
        let s = stop.clone();
        e.end_linger_when(move || s.is_stopped());
    }
    let scheduled = match hooks.start_at {
        Some(at) => match crate::cmd_dist::wait_for_start(at, &stop, out.quiet) {
            Some(s) => Some(s),
            None => return Exit::Interrupted,
        },
        None => None,
    };
    // The live view on a terminal (--no-tui, -q or a pipe: the progress line or nothing).
    let view = match !out.quiet && crate::live::wanted(out.no_tui) {
        true => {
            crate::live::LiveView::start(live_model(plan, "run"), crate::live::OnQuit::Interrupt)
        }
        false => None,
    };
    let show_progress = !out.quiet && view.is_none() && std::io::stderr().is_terminal();
    let mut last: Option<Snapshot> = None;
    let mut last_print = Duration::ZERO;
    let mut aborted: Option<String> = None;
    let rule = plan.expect_status.clone();
    let (planned_requests, planned_duration_s) = match &plan.load {
        redline_engine::Load::Closed {
            requests, duration, ..
        }
        | redline_engine::Load::Open {
            requests, duration, ..
        } => (*requests, duration.map(|d| d.as_secs_f64())),
    };
    // --abort-on-fail: requests unanswered longer than each threshold's age
    // count as unanswered (report::thresholds::overdue_age).
    let timeout = plan.timeout;
    let age_of = move |t: &redline_report::thresholds::Threshold| {
        redline_report::thresholds::overdue_age(t, timeout)
    };
    let mut ages: Vec<Duration> = Vec::new();
    if hooks.abort_on_fail {
        ages = hooks.thresholds.iter().filter_map(age_of).collect();
        ages.sort();
        ages.dedup();
    }
    let result =
        redline_engine::execute_watching(plan, &stop, &ages, |s, series, overdue, requests| {
            if let Some(l) = live.as_mut() {
                l.snapshot(s);
            }
            if let Some(l) = seconds.as_mut() {
                l.push(s.elapsed, series);
            }
            if let Some(e) = &exporter {
                e.update(s, series, requests);
            }
            if let Some(p) = &hooks.progress {
                p(s);
            }
            if let Some(v) = &view {
                v.model().engine(s, series);
            }
            if hooks.abort_on_fail && aborted.is_none() {
                let so_far = redline_report::thresholds::SoFar {
                    elapsed_s: s.elapsed.as_secs_f64(),
                    failed: s.failed,
                    series,
                    planned_requests,
                    planned_duration_s,
                    rule: &rule,
                };
                let unanswered = |t: &redline_report::thresholds::Threshold| {
                    age_of(t)
                        .and_then(|a| ages.iter().position(|x| *x == a))
                        .and_then(|k| overdue.get(k).copied())
                        .unwrap_or(0)
                };
                if let Some(why) = redline_report::thresholds::hopeless_counting(
                    &hooks.thresholds,
                    &so_far,
                    unanswered,
                ) {
                    if let Some(v) = &view {
                        v.model().log(format!("aborting: {why}"));
                    }
                    aborted = Some(why);
                    // The same path as Ctrl-C: sending stops, in-flight requests get the grace.
                    stop.stop();
                }
            }
            if !show_progress || s.elapsed < last_print + Duration::from_millis(500) {
                return;
            }
            let rate = match last {
                Some(p) if s.elapsed > p.elapsed => {
                    (s.completed - p.completed) as f64 / (s.elapsed - p.elapsed).as_secs_f64()
                }
                _ => 0.0,
            };
            eprint!(
                "\r\x1b[K[{:>6.1}s] {:>10.0} req/s now, {} done, {} errors, {} open",
                s.elapsed.as_secs_f64(),
                rate,
                redline_report::count(s.completed),
                redline_report::count(s.failed),
                s.open
            );
            last = Some(*s);
            last_print = s.elapsed;
        });
    if show_progress {
        eprint!("\r\x1b[K");
    }
    // The alternate screen is left before anything else is printed.
    drop(view);
    let mut rec = match result {
        Ok(r) => r,
        Err(e) => return fail(Exit::Failure, e),
    };
    if let Some(why) = &aborted {
        rec.warn("aborted", format!("aborted: {why}"));
    }
    rec.scheduled_start = scheduled;
    if let Some(f) = &hooks.annotate {
        f(&mut rec);
    }
    if let Some(e) = exporter.as_mut() {
        e.finish(&mut rec);
    }
    if let Some(l) = seconds {
        l.finish(&rec.series);
    }
    crate::cmd_server::after_run(watch, &mut rec);
    // A failed save or `--html` makes the exit code 1 (unless a threshold or
    // an interrupt says more); the report is still printed: results are never lost.
    let side_failed = match crate::cmd_history::after_run(&hooks.save, &mut rec) {
        Ok(lines) => {
            for l in lines {
                eprintln!("{l}");
            }
            false
        }
        Err(e) => {
            eprintln!("redline: error: {e}");
            true
        }
    };
    if let Some(k) = &hooks.kept {
        k.borrow_mut().push(rec.clone());
    }
    let mut outcomes = redline_report::thresholds::check(&rec, &hooks.thresholds);
    for (name, ts) in &hooks.request_thresholds {
        if let Some(r) = rec.requests.iter().find(|r| &r.name == name) {
            outcomes.extend(redline_report::thresholds::check_request(&rec, r, ts));
        }
    }
    let junit_failed = match &out.junit {
        Some(p) => {
            let x = redline_report::junit::xml(
                "redline run",
                rec.duration_s,
                &redline_report::junit::run_cases(&rec, &outcomes),
            );
            match std::fs::write(p, x) {
                Ok(()) => false,
                Err(e) => {
                    eprintln!("redline: error: cannot write --junit {}: {e}", p.display());
                    true
                }
            }
        }
        None => false,
    };
    let side_failed = side_failed || junit_failed;
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    // The sink only reads the record; with text the PASS/FAIL lines follow it
    // (a drop-in, `redline ab`/`redline wrk`, prints its own layout instead).
    let mut written = match (&hooks.report, out.output) {
        (Some(render), Output::Text) => match render(&rec) {
            Ok(t) => stdout.write_all(t.as_bytes()),
            Err(e) => return fail(Exit::Failure, e),
        },
        _ => redline_report::write(out.output.format(), &rec, &mut stdout),
    };
    if out.output == Output::Text && hooks.report.is_none() && !outcomes.is_empty() {
        let mut t = String::from("\nThresholds:\n");
        for o in &outcomes {
            t.push_str(&format!("  {o}\n"));
        }
        written = written.and_then(|_| stdout.write_all(t.as_bytes()));
    }
    if let Err(e) = written.and_then(|_| stdout.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return fail(Exit::Failure, format!("cannot write the report: {e}"));
        }
    }
    drop(stdout);
    // With JSON or CSV on stdout, the PASS/FAIL lines go to stderr.
    if out.output != Output::Text {
        for o in &outcomes {
            eprintln!("threshold {o}");
        }
    }
    let c = &rec.counters;
    if aborted.is_some() {
        Exit::Threshold
    } else if rec.interrupted {
        Exit::Interrupted
    } else if outcomes.iter().any(|o| !o.pass) {
        Exit::Threshold
    } else if c.scheduled > 0 && c.completed == 0 {
        // The report above says why; a script must not read this as a pass.
        fail(
            Exit::Failure,
            format!(
                "no request was answered ({} failed, {} unanswered)",
                c.failed,
                c.in_flight_at_end + c.not_sent
            ),
        )
    } else if side_failed {
        Exit::Failure
    } else {
        Exit::Ok
    }
}
