//! `redline find URL --slo 'p99<200ms,errors<1%'`: the highest open-loop
//! arrival rate that meets an SLO.
//!
//! Each step is an open-loop run at one rate for `--warmup` plus
//! `--step-duration` (both rounded up to whole seconds); the warm-up seconds
//! are dropped and the SLO (the `--threshold` grammar) is judged on the rest
//! of the series: responses completed from the end of the warm-up on, and
//! requests still unanswered when the step ended count as errors and as
//! slower than every answer (`thresholds::check`, as for `run`). The rate
//! doubles from `--start-rate` until a step fails (halves while the first
//! ones fail), then bisects between the last pass and the first fail until
//! the gap is under `--precision`, `--max-steps` steps ran, or the next step
//! would overrun `--time-budget`.
//!
//! A step is judged as `run --threshold` judges a run: a step that broke the
//! SLO has FAILED, whatever else its record says; when the client was also
//! the limit (its own CPU, file descriptors or ports, scheduler lag, or a
//! rate it did not send: the warnings client_cpu, fd_limit,
//! client_resources, scheduler_lag, rate_short) the note line says so, and
//! the step still counts as a failure. A step whose rate was not sent
//! because every connection was held by the server while requests waited
//! for one (the engine's rate_short with all `-c` connections open:
//! `watch::server_held`) is the server's limit: FAIL, "server concurrency".
//! connections_busy alone (requests waited, the rate was sent) is judged by
//! the SLO. A step that met the SLO while the client was the limit is
//! CLIENT-LIMITED, neither pass nor fail, never taken as the server's
//! capacity: before any pass it is tried again at half its rate (up to 3
//! times, within `--max-steps` and `--time-budget`); after a pass the search
//! stops there. The answer says which steps were client-limited, in words
//! (`search.rs`: the rules without sockets).
//!
//! After the search, the step that says why is diagnosed from its own record
//! (`watch::diagnose`: the first failing step above the capacity, else the
//! last client-limited one, else the capacity): printed under the answer, and
//! `diagnosis` in the JSON. `--watch`, `--server-status` and
//! `--server-config` work as for `run`, on every step.
//!
//! Request, protocol/TLS and connection flags are `run`'s own groups
//! (crate::flags: `-m -H -b -a -L`, `--http2 --h2c --cacert --cert --key`,
//! `-c -t --timeout`, …); an https search without `--http2`/`--http1.1` probes ALPN once
//! before the first step and every step keeps the answer.
//!
//! Exit codes: 0 an answer (or a lower bound) was found; 4 no step met the
//! SLO; 1 the search ended on a client-limited step before any step passed,
//! or a run failed;
//! 2 bad input; 130 interrupted.

use crate::exit::{fail, Exit};
use crate::flags::{plan_args, ConnectionArgs, ProtocolArgs, RequestArgs};
use clap::{Args, ValueEnum};
use redline_engine::{execute_with_series, parse_duration, Plan};
use redline_report::thresholds::{check, Outcome, Threshold};
use redline_stats::{Hist, RunRecord};
use std::io::Write;
use std::time::{Duration, Instant};

mod search;
#[cfg(test)]
mod tests;

use search::{Next, Search, Stopped, Verdict};

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum FindOutput {
    Text,
    Json,
}

/// `redline find`: search the highest arrival rate meeting an SLO.
#[derive(Args, Debug)]
pub struct FindArgs {
    /// Target URL.
    url: String,
    /// The objective, thresholds separated by commas, e.g. 'p99<200ms,errors<1%'.
    #[arg(long, value_name = "EXPR", value_parser = slo)]
    slo: Slo,
    /// First rate tried (req/s).
    #[arg(long = "start-rate", value_name = "REQ/S", default_value_t = 100.0)]
    start_rate: f64,
    /// Stop when the gap between the last pass and the first fail is under this (e.g. 5%).
    #[arg(long, value_name = "PERCENT", default_value = "5%", value_parser = percent)]
    precision: f64,
    /// At most this many steps.
    #[arg(long = "max-steps", value_name = "N", default_value_t = 12)]
    max_steps: u32,
    /// Do not start a step that would end after this much time in all.
    #[arg(long = "time-budget", value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    time_budget: Duration,
    /// Measured time of each step.
    #[arg(long = "step-duration", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    step_duration: Duration,
    /// Unmeasured time at the start of each step.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    warmup: Duration,
    #[command(flatten)]
    request: RequestArgs,
    #[command(flatten)]
    protocol: ProtocolArgs,
    #[command(flatten)]
    conn: ConnectionArgs,
    /// Report format: text (a line per step) or json.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FORMAT",
        default_value = "text",
        help_heading = "Output"
    )]
    output: FindOutput,
    /// No step lines on stderr with --output json, and no live view.
    #[arg(short = 'q', long = "quiet", help_heading = "Output")]
    quiet: bool,
    /// No live view on a terminal: the step lines as they come instead.
    #[arg(long = "no-tui", help_heading = "Output")]
    no_tui: bool,
    /// Also write a JUnit XML report to FILE: one test case, the SLO verdict (capacity in system-out).
    #[arg(long = "junit", value_name = "FILE", help_heading = "Output")]
    junit: Option<std::path::PathBuf>,
    #[command(flatten)]
    save: crate::cmd_history::RunSaveArgs,
    #[command(flatten)]
    watch: crate::cmd_server::RunWatchArgs,
}

impl FindArgs {
    /// The plan's arguments from `run`'s groups; each step sets its rate and length.
    pub fn plan_args(&self) -> Result<redline_engine::PlanArgs, String> {
        plan_args(self.url.clone(), &self.request, &self.protocol, &self.conn)
    }
}

/// The SLO: thresholds that must all hold.
#[derive(Debug, Clone)]
pub struct Slo(Vec<Threshold>);

fn slo(s: &str) -> Result<Slo, String> {
    let v = s
        .split(',')
        .map(|t| t.parse::<Threshold>())
        .collect::<Result<Vec<_>, _>>()?;
    if v.is_empty() {
        return Err("the SLO needs at least one threshold".into());
    }
    Ok(Slo(v))
}

fn percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("invalid percentage '{s}' (example: 5%)"))?;
    if !(v > 0.0 && v < 100.0) {
        return Err(format!("'{s}': the precision must be between 0 and 100 %"));
    }
    Ok(v / 100.0)
}

#[derive(Debug)]
struct Step {
    step: u32,
    target_rate: f64,
    sent_per_sec: f64,
    requests_per_sec: f64,
    p50_us: u64,
    p99_us: u64,
    /// Failed, unanswered and refused statuses (`--expect-status`) as a share of what was measured.
    error_share: f64,
    verdict: Verdict,
    /// Each SLO threshold as `PASS p99<200ms (measured …)`.
    outcomes: Vec<String>,
    /// The client's own limits during the step (its warnings), on a
    /// CLIENT-LIMITED step and on a FAIL step where the client was also limited.
    note: Option<String>,
    /// A CLIENT-LIMITED step before any pass, tried again at half its rate.
    retried_lower: bool,
    /// The server held every connection while requests waited (a FAIL).
    server_held: bool,
    /// Why the step hit trouble, from its record (`watch::diagnose`).
    diagnosis: Option<redline_stats::watch::Diagnosis>,
    /// The same as the text report prints it.
    diagnosis_text: String,
}

impl Step {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "step": self.step,
            "target_rate": self.target_rate,
            "sent_per_sec": self.sent_per_sec,
            "requests_per_sec": self.requests_per_sec,
            "p50_us": self.p50_us,
            "p99_us": self.p99_us,
            "error_share": self.error_share,
            "verdict": self.verdict.name(),
            "outcomes": self.outcomes,
            "note": self.note,
            "client_limited": self.note.is_some(),
            "retried_lower": self.retried_lower,
            "server_held": self.server_held,
            "diagnosis": self.diagnosis,
        })
    }
}

/// The warnings that make a step the client's limit, not the server's
/// (`watch::client_limits`: the client's CPU, its file descriptors or ports,
/// its scheduler lagging behind the plan, or a rate it did not send while
/// connections were free). A rate not sent because the server held every
/// connection is the server's doing.
fn client_limits(rec: &RunRecord) -> Vec<&str> {
    redline_stats::watch::client_limits(rec)
        .into_iter()
        .map(|w| w.message.as_str())
        .collect()
}

/// Judges one step's record: the seconds after the warm-up.
fn judge(rec: &RunRecord, slo: &[Threshold], warm_s: u32, measured_s: u32) -> (Step, bool) {
    let mut lat = Hist::with_sigfig(redline_stats::hist::SERIES_SIGFIG);
    let (mut completed, mut failed) = (0u64, 0u64);
    let mut codes = std::collections::BTreeMap::new();
    let mut in_window = 0u64;
    // From the warm-up's end on, the drain after the step included: those
    // responses answer requests sent in the measured window.
    for p in rec.series.iter().filter(|p| p.t >= warm_s) {
        lat.merge(&p.hist.to_hist());
        completed += p.requests;
        failed += p.errors;
        p.add_codes_to(&mut codes);
        if p.t < warm_s + measured_s {
            in_window += p.requests;
        }
    }
    // Unanswered requests (in flight or not sent at the end) stay in the
    // counters: `check` counts them as errors and as slower than every answer.
    let unanswered = rec
        .counters
        .in_flight_at_end
        .saturating_add(rec.counters.not_sent);
    let mut m = rec.clone();
    m.latency = lat;
    m.counters.completed = completed;
    m.counters.failed = failed;
    m.status_codes = codes;
    // The SLO's `errors` counts the answers the run's status rule refuses.
    let refused = m.refused_status();
    m.requests_per_sec = in_window as f64 / measured_s.max(1) as f64;
    let outcomes: Vec<Outcome> = check(&m, slo);
    let ended = completed + failed + unanswered;
    let limit = client_limits(rec);
    // The rate was not sent because the server held every connection (the
    // engine's server-held rate_short): the server's limit, whatever the SLO
    // says of the requests that got through. connections_busy alone (some
    // requests waited, the rate was sent) is judged by the SLO.
    let held = redline_stats::watch::server_held(rec)
        && rec.warnings.iter().any(|w| w.code == "rate_short");
    // A broken SLO or a held server is a failure, whatever the client did.
    let verdict = Verdict::of(outcomes.iter().all(|o| o.pass), held, !limit.is_empty());
    let step = Step {
        step: 0,
        target_rate: 0.0,
        sent_per_sec: rec.sent_per_sec,
        requests_per_sec: m.requests_per_sec,
        p50_us: m.latency.percentile(50.0),
        p99_us: m.latency.percentile(99.0),
        error_share: if ended > 0 {
            (failed + refused + unanswered) as f64 / ended as f64
        } else {
            0.0
        },
        verdict,
        outcomes: outcomes.iter().map(|o| o.to_string()).collect(),
        note: (!limit.is_empty()).then(|| limit.join("; ")),
        retried_lower: false,
        server_held: held,
        diagnosis: None,
        diagnosis_text: String::new(),
    };
    // A failed step is diagnosed even when its record alone shows no
    // trouble: the thresholds it failed are the trouble.
    let mut step = step;
    step.diagnosis = match step.verdict {
        Verdict::Fail => redline_stats::watch::diagnose_with(
            rec,
            outcomes
                .iter()
                .filter(|o| !o.pass)
                .map(|o| {
                    format!(
                        "the SLO failed: {}",
                        o.to_string().trim_start_matches("FAIL").trim()
                    )
                })
                .collect(),
        ),
        _ => rec.diagnosis.clone(),
    };
    let mut with = rec.clone();
    with.diagnosis = step.diagnosis.clone();
    step.diagnosis_text = redline_watch::status::render_diagnosis(&with);
    (step, rec.interrupted)
}

/// A rate for people: `20.0`, `150`.
fn fmt_rate(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// Runs `redline find`; returns the exit code.
pub fn run(a: FindArgs) -> Exit {
    if !(a.start_rate.is_finite() && a.start_rate > 0.0 && a.start_rate <= 10_000_000.0) {
        return fail(
            Exit::Usage,
            "--start-rate must be above 0 and at most 10,000,000 req/s",
        );
    }
    if a.step_duration < Duration::from_secs(1) {
        return fail(Exit::Usage, "--step-duration must be at least 1s");
    }
    if a.max_steps == 0 {
        return fail(Exit::Usage, "--max-steps must be at least 1");
    }
    let warm_s = a.warmup.as_secs_f64().ceil() as u32;
    let measured_s = a.step_duration.as_secs_f64().ceil() as u32;
    let step_len = Duration::from_secs((warm_s + measured_s) as u64);
    // A step costs its length plus up to the 1 s grace: a budget under one
    // step could never run any.
    if step_len + Duration::from_secs(1) > a.time_budget {
        return fail(
            Exit::Usage,
            format!(
                "--time-budget {}s is shorter than one step ({}s: --warmup, --step-duration and 1s to drain)",
                a.time_budget.as_secs_f64(),
                step_len.as_secs() + 1
            ),
        );
    }
    // Check the input once before any traffic; an https search without a
    // version flag asks the server once (ALPN) and every step takes its answer.
    let first = {
        let mut pa = match a.plan_args() {
            Ok(pa) => pa,
            Err(e) => return fail(Exit::Usage, e),
        };
        pa.rate = Some(a.start_rate);
        pa.duration = Some(step_len);
        pa.ask_alpn = true;
        match Plan::build(pa) {
            Ok(p) => {
                if let Some(note) = &p.note {
                    eprintln!("redline: note: {note}");
                }
                p
            }
            Err(e) => return fail(Exit::Usage, e),
        }
    };
    let url = first.target.display.clone();
    let alpn = first.alpn;
    let build = |rate: f64| -> Result<Plan, String> {
        // The same groups and builder as `run`; the load is this step's.
        let mut pa = a.plan_args()?;
        pa.rate = Some(rate);
        pa.duration = Some(step_len);
        pa.alpn = Some(alpn);
        Plan::build(pa).map_err(|e| e.to_string())
    };
    crate::cli::install_ctrlc();
    let stop = crate::cli::stop_handle();
    let text = a.output == FindOutput::Text;
    // The live view on a terminal: step lines go to its log and are printed
    // (where they would have gone) once it is left.
    let view = match !a.quiet && crate::live::wanted(a.no_tui) {
        true => crate::live::LiveView::start(
            crate::live::Model::new(format!(
                "redline find {}",
                redline_report::escape::clean(&url)
            )),
            crate::live::OnQuit::Interrupt,
        ),
        false => None,
    };
    // Lines held while the view is up: (for stderr, text).
    let held: std::cell::RefCell<Vec<(bool, String)>> = Default::default();
    let hold = |to_stderr: bool, l: &str| -> bool {
        match &view {
            Some(v) => {
                v.model().log(l);
                held.borrow_mut().push((to_stderr, l.to_string()));
                true
            }
            None => false,
        }
    };
    let say_now = |l: &str| {
        if text {
            println!("{l}");
            let _ = std::io::stdout().flush();
        } else if !a.quiet {
            eprintln!("{l}");
        }
    };
    let say = |l: &str| {
        if !hold(false, l) {
            say_now(l);
        }
    };
    let slo_text: Vec<String> = a.slo.0.iter().map(|t| t.text.clone()).collect();
    say(&format!(
        "redline find: {url}, SLO {}; steps of {}s after {}s warm-up",
        slo_text.join(", "),
        measured_s,
        warm_s
    ));
    say(&format!(
        "{:>4} {:>12} {:>10} {:>10} {:>10} {:>10} {:>8}  verdict",
        "step", "target req/s", "sent/s", "done/s", "p50", "p99", "errors"
    ));
    let started = Instant::now();
    let mut steps: Vec<Step> = Vec::new();
    let mut side_failed = false;
    let mut search = Search::new(a.precision);
    let mut rate = a.start_rate;
    // The last step was client-limited before any pass: this one retries it lower.
    let mut retry = false;
    let stopped: Stopped = loop {
        if steps.len() as u32 >= a.max_steps {
            break Stopped::MaxSteps;
        }
        // A step costs its length plus up to the 1 s grace.
        if started.elapsed() + step_len + Duration::from_secs(1) > a.time_budget {
            break Stopped::TimeBudget;
        }
        if let (true, Some(last)) = (retry, steps.last_mut()) {
            last.retried_lower = true;
            say(&format!(
                "     client-limited before any step passed: trying again at half the rate, {} req/s",
                fmt_rate(rate)
            ));
        }
        let plan = match build(rate) {
            Ok(p) => p,
            Err(e) => {
                crate::live::restore();
                return fail(Exit::Usage, e);
            }
        };
        let watch = match crate::cmd_server::before_run(&a.watch) {
            Ok(w) => w,
            Err(e) => {
                crate::live::restore();
                return fail(Exit::Usage, e);
            }
        };
        let n = steps.len() as u32 + 1;
        if let Some(v) = &view {
            v.model().begin(
                format!(
                    "step {n} of at most {}: {} req/s, {warm_s}s warm-up then {measured_s}s measured",
                    a.max_steps,
                    fmt_rate(rate)
                ),
                Some(step_len.as_secs_f64()),
                None,
                None,
            );
            v.model().target_rate = Some(rate);
        }
        let result = execute_with_series(&plan, &stop, |s, series| {
            if let Some(v) = &view {
                v.model().engine(s, series);
            }
        });
        let mut rec = match result {
            Ok(r) => r,
            Err(e) => {
                crate::live::restore();
                return fail(Exit::Failure, e);
            }
        };
        // The watch and status page attached, and the step diagnosed.
        crate::cmd_server::after_run(watch, &mut rec);
        rec.note = Some(format!("redline find: step {n}, {} req/s", fmt_rate(rate)));
        match crate::cmd_history::after_run(&a.save, &mut rec) {
            Ok(lines) => {
                if text || !a.quiet {
                    for l in lines {
                        if !hold(true, &l) {
                            eprintln!("{l}");
                        }
                    }
                }
            }
            Err(e) => {
                let l = format!("redline: error: {e}");
                if !hold(true, &l) {
                    eprintln!("{l}");
                }
                side_failed = true;
            }
        }
        let (mut step, interrupted) = judge(&rec, &a.slo.0, warm_s, measured_s);
        step.step = n;
        step.target_rate = rate;
        if interrupted {
            break Stopped::Interrupted;
        }
        say(&format!(
            "{:>4} {:>12} {:>10.1} {:>10.1} {:>10} {:>10} {:>7.2}%  {}",
            n,
            fmt_rate(rate),
            step.sent_per_sec,
            step.requests_per_sec,
            redline_report::dur_us(step.p50_us as f64),
            redline_report::dur_us(step.p99_us as f64),
            step.error_share * 100.0,
            match step.verdict {
                Verdict::Pass => "PASS".to_string(),
                Verdict::Fail =>
                    format!(
                        "FAIL ({})",
                        step.server_held
                            .then(|| "server concurrency".to_string())
                            .into_iter()
                            .chain(step.outcomes.iter().filter(|o| o.starts_with("FAIL")).map(
                                |o| o.trim_start_matches("FAIL").trim().replacen("  ", " ", 1)
                            ))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                Verdict::ClientLimited => "CLIENT-LIMITED".to_string(),
            }
        ));
        if step.server_held {
            say(&format!(
                "     the server held all {} connections while requests waited for one: its concurrency is the limit at this rate",
                rec.config.load.connections()
            ));
        }
        if let Some(note) = &step.note {
            match step.verdict {
                Verdict::Fail => say(&format!(
                    "     the client was also limited: {note}; the step failed all the same, so it counts as a failure"
                )),
                _ => say(&format!("     the client was the limit: {note}")),
            }
        }
        let next = search.record(rate, step.verdict, step.note.is_some());
        steps.push(step);
        retry = matches!(next, Next::Retry(_));
        rate = match next {
            Next::Rate(r) | Next::Retry(r) => r,
            Next::Stop(why) => break why,
        };
    };
    let (pass, failed) = (search.pass, search.failed);
    // The view is left, then the lines it held are printed where they belong.
    drop(view);
    for (to_stderr, l) in held.take() {
        if to_stderr {
            eprintln!("{l}");
        } else {
            say_now(&l);
        }
    }
    let answer = search.answer(stopped);
    let why = stopped.why();
    // The step that says why: the first failing step above the capacity,
    // else the last client-limited one, else the capacity itself.
    let why_step = failed
        .and_then(|f| {
            steps
                .iter()
                .find(|s| s.verdict == Verdict::Fail && s.target_rate == f)
        })
        .or_else(|| {
            steps
                .iter()
                .rev()
                .find(|s| s.verdict == Verdict::ClientLimited)
        })
        .or_else(|| {
            pass.and_then(|p| {
                steps
                    .iter()
                    .find(|s| s.verdict == Verdict::Pass && s.target_rate == p)
            })
        })
        .filter(|s| s.diagnosis.is_some());
    if text {
        println!("{answer}\n  (search stopped: {why})");
        if let Some(s) = why_step {
            // "Diagnosis: …" of that step's record, with the step named.
            print!(
                "{}",
                s.diagnosis_text.replacen(
                    "Diagnosis:",
                    &format!(
                        "Diagnosis (step {}, {} req/s):",
                        s.step,
                        fmt_rate(s.target_rate)
                    ),
                    1
                )
            );
        }
    } else {
        // `stopped`: precision, max_steps, time_budget, client_limited, no_pass, interrupted.
        let r = serde_json::json!({
            "format": "redline.find",
            "version": 1,
            "url": url,
            "slo": slo_text,
            "steps": steps.iter().map(Step::json).collect::<Vec<_>>(),
            "max_rate": pass,
            "lower": pass,
            "upper": failed,
            "client_limited_at": steps
                .iter()
                .filter(|s| s.verdict == Verdict::ClientLimited)
                .map(|s| s.target_rate)
                .reduce(f64::min),
            "stopped": stopped.name(),
            "answer": answer,
            "diagnosis": why_step.map(|s| {
                let mut d = serde_json::to_value(&s.diagnosis).unwrap_or_default();
                if let Some(o) = d.as_object_mut() {
                    o.insert("step".into(), s.step.into());
                    o.insert("target_rate".into(), s.target_rate.into());
                }
                d
            }),
        });
        let mut out = std::io::stdout().lock();
        let _ = serde_json::to_writer_pretty(&mut out, &r);
        let _ = writeln!(out);
        if !a.quiet {
            eprintln!("{answer}");
        }
    }
    if let Some(p) = &a.junit {
        use redline_report::junit::{xml, Case, Verdict};
        let case = Case {
            name: format!("SLO {}", slo_text.join(", ")),
            classname: "redline.find".into(),
            time_s: started.elapsed().as_secs_f64(),
            verdict: match pass {
                Some(_) if stopped != Stopped::Interrupted => Verdict::Pass,
                _ => Verdict::Failure {
                    message: answer.clone(),
                    text: format!("{answer} (search stopped: {why})"),
                },
            },
            system_out: Some(format!(
                "{answer}\nsearch stopped: {why}\nsteps: {}",
                steps.len()
            )),
        };
        let x = xml("redline find", case.time_s, &[case]);
        if let Err(e) = std::fs::write(p, x) {
            eprintln!("redline: error: cannot write --junit {}: {e}", p.display());
            side_failed = true;
        }
    }
    match (stopped, pass) {
        (Stopped::Interrupted, _) => Exit::Interrupted,
        // A step that could not be saved (or its --html written).
        (_, Some(_)) if side_failed => Exit::Failure,
        (_, Some(_)) => Exit::Ok,
        // The client was the limit before any step passed.
        _ if search.client_before_any_pass() => Exit::Failure,
        (_, None) => Exit::Threshold,
    }
}
