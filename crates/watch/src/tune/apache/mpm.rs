//! The MPM checks: worker/thread limits of prefork, worker and event against
//! the machine's memory and the other limits.

use super::*;

/// The MPM's limits as Apache applies them at start: MaxRequestWorkers
/// above ServerLimit (× ThreadsPerChild) is lowered, ThreadsPerChild above
/// ThreadLimit is lowered, spare servers/threads that cannot all exist.
/// Defaults from the MPM docs (prefork: ServerLimit 256, StartServers 5,
/// MinSpareServers 5, MaxSpareServers 10; worker/event: ServerLimit 16,
/// ThreadLimit 64, ThreadsPerChild 25, MinSpareThreads 75, MaxSpareThreads 250).
///
/// `goal`: the MaxRequestWorkers another fix sets (the memory check's), which
/// this check's fixes aim at instead of the configured value, so that the
/// fixes agree when applied together.
pub(super) fn mpm_checks(c: &Config, mpm: Option<&str>, goal: Option<i64>, f: &mut Vec<Finding>) {
    let Some(mpm) = mpm else {
        return;
    };
    let g = |n: &str| global(c, n);
    let v = |n: &str| g(n).and_then(int);
    let threaded = mpm == "worker" || mpm == "event";
    let Some(mrw_d) = g("maxrequestworkers").or_else(|| g("maxclients")) else {
        return;
    };
    let Some(mrw) = int(mrw_d) else {
        return;
    };
    let ctx = |d: &Directive| c.describe(&d.path);
    // Replace `d` with `text`, or put `text` after `anchor` when `d` is not set.
    let place = |d: Option<&Directive>, text: &str| -> Fix {
        match d {
            Some(d) => Fix::replace(&d.file, &ctx(d), (d.line, d.end_line), &d.source, text),
            None => Fix::insert_after(&mrw_d.file, &ctx(mrw_d), mrw_d.end_line, text),
        }
    };
    fn pick<'a>(d: Option<&'a Directive>, or: &'a Directive) -> &'a Directive {
        d.unwrap_or(or)
    }
    let at_or = |d| pick(d, mrw_d);
    let n0 = f.len();
    let sl_d = g("serverlimit");
    if threaded {
        let server_limit = v("serverlimit").unwrap_or(16);
        let thread_limit = v("threadlimit").unwrap_or(64);
        let tpc_d = g("threadsperchild");
        let tpc = v("threadsperchild").unwrap_or(25).max(1);
        if tpc > thread_limit {
            f.push(
                Finding::new(Level::Warn, "threads_per_child_over_limit", at(at_or(tpc_d)), format!("ThreadsPerChild {tpc} is above ThreadLimit {thread_limit}: Apache lowers it to {thread_limit}"))
                    .why("the processes run fewer threads than configured, so MaxRequestWorkers cannot be reached")
                    .context(ctx(at_or(tpc_d)))
                    .fix(place(tpc_d, &format!("ThreadLimit {tpc}\nThreadsPerChild {tpc}"))),
            );
        }
        let tpc_eff = tpc.min(thread_limit).max(1);
        let cap = server_limit * tpc_eff;
        if mrw > cap {
            let want = goal.unwrap_or(mrw);
            let need = (want + tpc_eff - 1) / tpc_eff;
            let fix = match sl_d {
                Some(d) if need > server_limit => place(Some(d), &format!("ServerLimit {need}")),
                _ if need <= server_limit => {
                    place(Some(mrw_d), &format!("{} {want}", mrw_d.raw_name))
                }
                _ => place(
                    Some(mrw_d),
                    &format!("ServerLimit {need}\n{} {want}", mrw_d.raw_name),
                ),
            };
            f.push(
                Finding::new(Level::Warn, "max_request_workers_over_limit", at(mrw_d), format!(
                    "{} {mrw} is above ServerLimit {server_limit} × ThreadsPerChild {tpc_eff} = {cap}: Apache lowers it to {cap}",
                    mrw_d.raw_name
                ))
                .why("the server stops at fewer simultaneous requests than configured; ServerLimit must allow the processes")
                .context(ctx(mrw_d))
                .fix(fix),
            );
        } else if mrw % tpc_eff != 0 {
            let down = mrw - mrw % tpc_eff;
            f.push(
                Finding::new(Level::Info, "max_request_workers_rounded", at(mrw_d), format!(
                    "{} {mrw} is not a multiple of ThreadsPerChild {tpc_eff}: Apache rounds it down to {down}",
                    mrw_d.raw_name
                ))
                .why("the limit in effect is not the one written")
                .context(ctx(mrw_d))
                .fix(place(Some(mrw_d), &format!("{} {down}", mrw_d.raw_name))),
            );
        }
        let limit = mrw.min(cap);
        let min_d = g("minsparethreads");
        let max_d = g("maxsparethreads");
        let min_spare = v("minsparethreads").unwrap_or(75);
        let max_spare = v("maxsparethreads").unwrap_or(250);
        if min_spare > limit {
            let want = (limit / 4).max(tpc_eff).min(limit);
            f.push(
                Finding::new(Level::Warn, "spare_threads", at(at_or(min_d)), format!("MinSpareThreads {min_spare} is above MaxRequestWorkers {limit}"))
                    .why("Apache keeps trying to start idle threads it may never have: under load every thread is busy, so it forks continually")
                    .context(ctx(at_or(min_d)))
                    .fix(place(min_d, &format!("MinSpareThreads {want}"))),
            );
        } else if max_spare < min_spare + tpc_eff {
            f.push(
                Finding::new(Level::Info, "spare_threads", at(at_or(max_d)), format!("MaxSpareThreads {max_spare} is below MinSpareThreads {min_spare} + ThreadsPerChild {tpc_eff}: Apache raises it to {}", min_spare + tpc_eff))
                    .why("a process is stopped as soon as it is idle and started again at the next burst")
                    .context(ctx(at_or(max_d)))
                    .fix(place(max_d, &format!("MaxSpareThreads {}", min_spare + tpc_eff))),
            );
        } else if max_spare > limit && max_d.is_some() {
            f.push(
                Finding::new(Level::Info, "spare_threads", at(at_or(max_d)), format!("MaxSpareThreads {max_spare} is above MaxRequestWorkers {limit}: idle processes are never stopped"))
                    .why("memory stays taken after a burst")
                    .context(ctx(at_or(max_d)))
                    .fix(place(max_d, &format!("MaxSpareThreads {}", limit.max(min_spare + tpc_eff)))),
            );
        }
    } else {
        let server_limit = v("serverlimit").unwrap_or(256);
        if mrw > server_limit {
            let want = goal.unwrap_or(mrw);
            let fix = match sl_d {
                Some(d) if want > server_limit => place(Some(d), &format!("ServerLimit {want}")),
                _ if want <= server_limit => {
                    place(Some(mrw_d), &format!("{} {want}", mrw_d.raw_name))
                }
                _ => place(
                    Some(mrw_d),
                    &format!("ServerLimit {want}\n{} {want}", mrw_d.raw_name),
                ),
            };
            f.push(
                Finding::new(Level::Warn, "max_request_workers_over_limit", at(mrw_d), format!(
                    "{} {mrw} is above ServerLimit {server_limit}: Apache lowers it to {server_limit}",
                    mrw_d.raw_name
                ))
                .why("the server stops at fewer simultaneous requests than configured; ServerLimit must allow the processes")
                .context(ctx(mrw_d))
                .fix(fix),
            );
        }
        let limit = mrw.min(server_limit);
        let min_d = g("minspareservers");
        let max_d = g("maxspareservers");
        let start_d = g("startservers");
        let min_spare = v("minspareservers").unwrap_or(5);
        let max_spare = v("maxspareservers").unwrap_or(10);
        if max_spare <= min_spare {
            f.push(
                Finding::new(Level::Info, "spare_servers", at(at_or(max_d)), format!("MaxSpareServers {max_spare} is not above MinSpareServers {min_spare}: Apache sets it to {}", min_spare + 1))
                    .why("processes are killed and forked again as load moves by one")
                    .context(ctx(at_or(max_d)))
                    .fix(place(max_d, &format!("MaxSpareServers {}", min_spare * 2))),
            );
        } else if min_spare > limit || max_spare > limit {
            let (d, name, val) = if min_spare > limit {
                (min_d, "MinSpareServers", min_spare)
            } else {
                (max_d, "MaxSpareServers", max_spare)
            };
            let want = if name == "MinSpareServers" {
                (limit / 4).max(1)
            } else {
                limit
            };
            f.push(
                Finding::new(
                    Level::Warn,
                    "spare_servers",
                    at(at_or(d)),
                    format!("{name} {val} is above MaxRequestWorkers {limit}"),
                )
                .why("Apache cannot keep that many idle processes: under load it forks continually")
                .context(ctx(at_or(d)))
                .fix(place(d, &format!("{name} {want}"))),
            );
        }
        if let Some(start) = v("startservers").filter(|s| *s > limit) {
            f.push(
                Finding::new(
                    Level::Info,
                    "spare_servers",
                    at(at_or(start_d)),
                    format!("StartServers {start} is above MaxRequestWorkers {limit}"),
                )
                .why("Apache starts at most MaxRequestWorkers processes")
                .context(ctx(at_or(start_d)))
                .fix(place(start_d, &format!("StartServers {}", limit.min(5)))),
            );
        }
    }
    // ServerLimit far above what MaxRequestWorkers needs: scoreboard memory
    // for processes that can never start (the MPM docs' warning).
    if let (Some(d), Some(sl)) = (sl_d, v("serverlimit")) {
        let tpc = if threaded {
            v("threadsperchild")
                .unwrap_or(25)
                .min(v("threadlimit").unwrap_or(64))
                .max(1)
        } else {
            1
        };
        let need = (mrw + tpc - 1) / tpc;
        let default = if threaded { 16 } else { 256 };
        if sl > (2 * need).max(default) {
            f.push(
                Finding::new(Level::Info, "server_limit_high", at(d), format!("ServerLimit {sl}, but {} {mrw} needs {need}", mrw_d.raw_name))
                    .why("Apache allocates shared scoreboard memory for every process ServerLimit allows, used or not")
                    .context(ctx(d))
                    .fix(place(Some(d), &format!("ServerLimit {}", need.max(default)))),
            );
        }
    }
    if f.len() == n0 {
        f.push(Finding::new(
            Level::Ok,
            "mpm_limits",
            (Path::new(""), 0),
            format!(
                "MPM {mpm}: MaxRequestWorkers {mrw} within ServerLimit, spare settings consistent"
            ),
        ));
    }
}

/// The ServerLimit `max_request_workers` needs when it is above the one in
/// effect (set, or the MPM's default: prefork 256 processes, worker/event
/// 16 processes of ThreadsPerChild threads, as AH00180 applies them); None
/// when it fits.
pub(super) fn server_limit_for(
    c: &Config,
    mpm: Option<&str>,
    max_request_workers: i64,
) -> Option<i64> {
    let v = |n: &str| global(c, n).and_then(int);
    let threaded = matches!(mpm, Some("worker" | "event"));
    let (per, default) = if threaded {
        let tpc = v("threadsperchild")
            .unwrap_or(25)
            .min(v("threadlimit").unwrap_or(64))
            .max(1);
        (tpc, 16)
    } else {
        (1, 256)
    };
    let need = (max_request_workers + per - 1) / per;
    (need > v("serverlimit").unwrap_or(default)).then_some(need)
}
