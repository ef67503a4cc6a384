//! `redline size`: how many workers fit the machine, from a live server or
//! a saved run record, with the error log's evidence.

use super::*;

pub(super) fn cmd_size(a: SizeArgs) -> Exit {
    let budget = match a
        .memory_budget
        .as_deref()
        .map(size::parse_budget)
        .transpose()
    {
        Ok(b) => b,
        Err(e) => return fail(Exit::Usage, e),
    };
    if a.run.is_some() || a.from.is_some() {
        return size_from_record(&a, budget);
    }
    let raw: Vec<String> = match a.pid {
        Some(p) => vec![p.to_string()],
        None => a.watch.clone(),
    };
    let flag = if a.pid.is_some() { "--pid" } else { "--watch" };
    let mut threads_per_child = None;
    if let Some(cfg) = &a.config {
        match tune::analyze(
            cfg,
            &TuneOptions {
                use_tools: false,
                ..Default::default()
            },
        ) {
            Ok(r) => threads_per_child = r.threads_per_child,
            Err(e) => return fail(Exit::Usage, e),
        }
    }
    let mut inp = match live_size_input(&raw, flag, budget, true) {
        Ok(i) => i,
        Err((code, e)) => return fail(code, e),
    };
    inp.threads_per_child = threads_per_child;
    if inp.kind == ServerKind::Apache {
        match error_log_evidence(a.error_log.as_deref(), true) {
            Ok(e) => inp.evidence.extend(e),
            Err(e) => return fail(Exit::Usage, e),
        }
    }
    let r = match size::compute(&inp) {
        Ok(r) => r,
        Err(e) => return fail(Exit::Failure, e),
    };
    match a.output {
        Format::Text => print(&size::render(&r)),
        Format::Json => print(&to_json(serde_json::to_value(&r))),
    }
}

/// How long `size` watches the server's CPU to tell a busy server from an idle one.
pub(super) const LOAD_PROBE: Duration = Duration::from_millis(500);

/// The sizing input from `/proc` now: the targets' processes (one instance),
/// every other process, the machine, Apache's MPM, the workers' limits, and
/// the server's CPU over [`LOAD_PROBE`] (idle: the sizing says so).
pub(super) fn live_size_input(
    raw: &[String],
    flag: &str,
    budget: Option<Budget>,
    probe_load: bool,
) -> Result<size::SizeInput, (Exit, String)> {
    let targets = resolve_targets(raw, flag, true).map_err(|e| (Exit::Usage, e))?;
    let root = procfs::proc_root();
    let cg_root = redline_watch::cgroup::cgroup_root();
    let targets = redline_watch::cgroup::expand_units(&cg_root, &targets);
    let pick = |all: &[procfs::ProcInfo]| -> Vec<procfs::ProcInfo> {
        procfs::select(all, &targets).into_iter().cloned().collect()
    };
    let ticks =
        |v: &[procfs::ProcInfo]| -> u64 { v.iter().map(|p| p.cpu_ticks + p.child_ticks).sum() };
    let mut load_cpu_percent = None;
    let all = if probe_load {
        let before = pick(&procfs::all_processes(&root));
        let t0 = std::time::Instant::now();
        std::thread::sleep(LOAD_PROBE);
        let all = procfs::all_processes(&root);
        let after = pick(&all);
        // Processes gone meanwhile took their CPU with them: a lower bound, enough to tell busy from idle.
        let pids: std::collections::HashSet<u32> = after.iter().map(|p| p.pid).collect();
        let before_kept: u64 = ticks(
            &before
                .into_iter()
                .filter(|p| pids.contains(&p.pid))
                .collect::<Vec<_>>(),
        );
        let used = ticks(&after).saturating_sub(before_kept);
        load_cpu_percent =
            Some(used as f64 / procfs::clock_ticks() as f64 / t0.elapsed().as_secs_f64() * 100.0);
        all
    } else {
        procfs::all_processes(&root)
    };
    let server = pick(&all);
    let mine: std::collections::HashSet<u32> = server.iter().map(|p| p.pid).collect();
    let me = std::process::id();
    let others: Vec<procfs::ProcInfo> = all
        .iter()
        .filter(|p| !mine.contains(&p.pid) && p.pid != me)
        .cloned()
        .collect();
    let kind = ServerKind::of_processes(&server);
    let mpm = if kind == ServerKind::Apache {
        detect::apache_mpm(&server)
    } else {
        None
    };
    // The workers' limits: those of a worker (a process whose parent is the server's), else the main process.
    let limits = server
        .iter()
        .find(|p| mine.contains(&p.ppid))
        .or(server.first())
        .map(|p| procfs::limits(&root, p.pid));
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    Ok(size::SizeInput {
        server,
        others,
        machine: procfs::machine(&root),
        budget,
        kind,
        mpm,
        threads_per_child: None,
        cpus,
        evidence: Vec::new(),
        source: None,
        load_cpu_percent,
        limits,
    })
}

/// The Apache error log's "reached MaxRequestWorkers" lines as evidence: from
/// `--error-log FILE` (unreadable: an error), else, when `usual`, from the
/// first of the usual paths that has any.
pub(super) fn error_log_evidence(
    given: Option<&std::path::Path>,
    usual: bool,
) -> Result<Vec<String>, String> {
    let logs: Vec<PathBuf> = match given {
        Some(p) => {
            // Read here to say why it cannot be (a device, too big), then
            // again by the evidence search.
            redline_stats::files::read(p, redline_stats::files::Kind::Log, "--error-log")?;
            vec![p.to_path_buf()]
        }
        None if usual => detect::APACHE_ERROR_LOGS
            .iter()
            .map(PathBuf::from)
            .collect(),
        None => return Ok(vec![]),
    };
    let refs: Vec<&std::path::Path> = logs.iter().map(|p| p.as_path()).collect();
    Ok(detect::apache_limit_evidence(&refs)
        .map(|(path, n, last)| {
            format!("{path}: {n} \"reached MaxRequestWorkers\" lines, the last: {last}")
        })
        .into_iter()
        .collect())
}

/// Loads the run record named by `--run REF` (history) or `--from FILE`.
pub(super) fn load_record(a: &SizeArgs) -> Result<(String, RunRecord), (Exit, String)> {
    if let Some(p) = &a.from {
        let text = redline_stats::files::read_text(p, redline_stats::files::Kind::Record, "--from")
            .map_err(|e| (Exit::Usage, e))?;
        let rec = RunRecord::from_json(&text)
            .map_err(|e| (Exit::Usage, format!("{}: {e}", p.display())))?;
        return Ok((p.display().to_string(), rec));
    }
    let r = a.run.as_deref().unwrap_or("last");
    let herr = |e: redline_history::HistoryError| {
        let code = if e.is_usage() {
            Exit::Usage
        } else {
            Exit::Failure
        };
        (code, e.to_string())
    };
    let path = redline_history::resolve_path(a.db.as_deref()).map_err(herr)?;
    let store = redline_history::Store::open_existing(&path).map_err(herr)?;
    let id = store.resolve_run(r).map_err(herr)?;
    let rec = store.get(id).map_err(herr)?;
    Ok((format!("run {id}"), rec))
}

/// `redline size --run REF` / `--from FILE`: the same arithmetic as live
/// sizing, from the processes the run's `--watch` saw at its memory peak.
pub(super) fn size_from_record(a: &SizeArgs, budget: Option<Budget>) -> Exit {
    let (name, rec) = match load_record(a) {
        Ok(x) => x,
        Err((code, e)) => return fail(code, e),
    };
    let Some(w) = rec.server_watch.as_ref().filter(|w| !w.hosts.is_empty()) else {
        return fail(
            Exit::Usage,
            format!("{name} has no server watch data: run it with --watch NAME|PID, or merge a `redline watch` record into it"),
        );
    };
    let host_name = match &a.host {
        Some(h) if !w.hosts.iter().any(|x| &x.host == h) => {
            let known: Vec<&str> = w.hosts.iter().map(|x| x.host.as_str()).collect();
            return fail(
                Exit::Usage,
                format!("--host {h}: {name} watched only {}", known.join(", ")),
            );
        }
        Some(h) => h.clone(),
        None => w.hosts[0].host.clone(),
    };
    // Entries of that host: one per watched instance when a name matched several.
    let entries: Vec<&redline_stats::watch::HostWatch> =
        w.hosts.iter().filter(|x| x.host == host_name).collect();
    let host = match a.instance {
        Some(pid) => {
            let tag = format!(" pid {pid} ");
            match entries.iter().find(|x| {
                x.targets
                    .iter()
                    .any(|t| t.contains(&tag) || t == &pid.to_string())
            }) {
                Some(x) => *x,
                None => {
                    return fail(
                        Exit::Usage,
                        format!(
                        "--instance {pid}: {name} watched no instance with that PID on {host_name}"
                    ),
                    )
                }
            }
        }
        None if entries.len() > 1 => {
            let list: Vec<String> = entries.iter().map(|x| x.targets.join(", ")).collect();
            return fail(
                Exit::Usage,
                format!(
                    "{name} watched {} instances on {host_name}: {}; give one with --instance PID",
                    entries.len(),
                    list.join("; ")
                ),
            );
        }
        None => entries[0],
    };
    let mut inp = match size::input_from_watch(host, budget, a.instance) {
        Ok(i) => i,
        Err(e) => return fail(Exit::Usage, format!("{name}: {e}")),
    };
    inp.source = inp.source.map(|s| format!("{name}: {s}"));
    if let Some(cfg) = &a.config {
        match tune::analyze(
            cfg,
            &TuneOptions {
                use_tools: false,
                ..Default::default()
            },
        ) {
            Ok(r) => inp.threads_per_child = r.threads_per_child,
            Err(e) => return fail(Exit::Usage, e),
        }
    }
    // The usual log paths are this machine's, maybe not the watched one's:
    // only the log named by --error-log is read here.
    if inp.kind == ServerKind::Apache {
        match error_log_evidence(a.error_log.as_deref(), false) {
            Ok(e) => inp.evidence.extend(e),
            Err(e) => return fail(Exit::Usage, e),
        }
    }
    let r = match size::compute(&inp) {
        Ok(r) => r,
        Err(e) => return fail(Exit::Usage, format!("{name}: {e}")),
    };
    match a.output {
        Format::Text => print(&size::render(&r)),
        Format::Json => print(&to_json(serde_json::to_value(&r))),
    }
}
