//! The server's own resources, each judged by its own saturation evidence
//! (the USE method: utilization, saturation, errors) from the `--watch`
//! samples: CPU (the CPUs the server may use, its use of them, the time its
//! threads waited for one, its cgroup's quota throttling), memory (its
//! cgroup's limit, OOM kills and limit hits, PSI memory, swap, major
//! faults), disk I/O (PSI io with the server's own block I/O), the link
//! (bytes/s flat across stages while the server idles) and what the server
//! waits on (an upstream). Each rule returns a [`Diagnosis`] only when its
//! evidence shows saturation; the decision over all of them is
//! [`super::diagnose::diagnose_with`].

use super::*;
use crate::RunRecord;

/// CPU use at or above this share of the CPUs the server may use is
/// saturated.
pub const CPU_BUSY_SHARE: f64 = 0.85;
/// Threads waiting for a CPU: at or above this many seconds per second per
/// CPU the server may use (with its CPU at least half used), the server is
/// short of CPU even when others use it.
pub const RUN_DELAY_PER_CPU: f64 = 0.5;
/// The share of the loaded samples that must show a resource saturated.
pub const SUSTAINED_SHARE: f64 = 0.5;
/// PSI `some` at or above this % of a sample's interval is pressure.
pub const PSI_PRESSURE: f64 = 10.0;
/// Bytes/s across the stages past a knee within this ratio of each other
/// (max/min) is flat.
pub const FLAT_RATIO: f64 = 1.15;

/// A host's samples inside the part of the run that shows the limit: past
/// the knee's level for a staged run that has one, else the whole run (the
/// run's clock: the host's offset from the run's start applied).
fn loaded<'a>(rec: &RunRecord, h: &'a HostWatch) -> Vec<&'a WatchSample> {
    let off = h.offset_from(&rec.started_at);
    let (mut t0, t1) = (0.0, rec.duration_s.max(0.0));
    if let Some(k) = &rec.knee {
        if let Some(st) = rec.stages.iter().find(|s| s.level_to > k.level) {
            t0 = st.start_s;
        }
    }
    // The first sample of a watch has no interval before it.
    h.samples
        .iter()
        .skip(1)
        .filter(|s| s.t + off >= t0 && s.t + off <= t1 + 0.5)
        .collect()
}

/// True when at least [`SUSTAINED_SHARE`] of `samples` (two at least) pass.
fn sustained(samples: &[&WatchSample], pass: impl Fn(&WatchSample) -> bool) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let n = samples.iter().filter(|s| pass(s)).count();
    let share = n as f64 / samples.len() as f64;
    (n >= 2 && share >= SUSTAINED_SHARE).then_some(share)
}

fn mean(samples: &[&WatchSample], f: impl Fn(&WatchSample) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = samples.iter().filter_map(|s| f(s)).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// What the server is, from the names of its processes.
fn event_loop_server(h: &HostWatch) -> Option<&'static str> {
    h.process_names.iter().find_map(|n| {
        if n.starts_with("nginx") {
            Some("nginx")
        } else if n.starts_with("lighttpd") {
            Some("lighttpd")
        } else {
            None
        }
    })
}

/// The server's CPU: busy at [`CPU_BUSY_SHARE`] of the CPUs it may use, or
/// its threads waiting for a CPU ([`RUN_DELAY_PER_CPU`]) while it used at
/// least half of them, or its cgroup throttled by a quota, or an
/// event-loop worker (nginx, lighttpd) at a whole CPU of its own, in most
/// of the loaded samples.
pub fn cpu(rec: &RunRecord) -> Option<Diagnosis> {
    let w = rec.server_watch.as_ref()?;
    for h in &w.hosts {
        let samples = loaded(rec, h);
        let cap = h.cpu_capacity();
        let cap_pct = cap * 100.0;
        let where_ = match (&h.cpus_allowed, h.cpu_quota) {
            (Some(l), Some(q)) => format!("CPUs {l} with a quota of {q:.2} CPUs"),
            (Some(l), None) => format!(
                "CPU{} {l}",
                if crate::watch::cpu_list_len(l) == Some(1) {
                    ""
                } else {
                    "s"
                }
            ),
            (None, Some(q)) => format!("a quota of {q:.2} CPUs"),
            (None, None) => format!("the machine's {} CPUs", h.cpus),
        };
        let busy = sustained(&samples, |s| s.cpu_percent >= CPU_BUSY_SHARE * cap_pct);
        let waiting = sustained(&samples, |s| {
            s.run_delay_per_s
                .is_some_and(|d| d >= RUN_DELAY_PER_CPU * cap)
                && s.cpu_percent >= 0.5 * cap_pct
        });
        let throttled = sustained(&samples, |s| s.throttled_per_s.is_some_and(|t| t >= 0.1));
        let one_loop = event_loop_server(h).and_then(|name| {
            sustained(&samples, |s| {
                s.busiest_process_cpu.is_some_and(|c| c >= 90.0) && s.processes <= 3
            })
            .map(|share| (name, share))
        });
        if busy.is_none() && waiting.is_none() && throttled.is_none() && one_loop.is_none() {
            continue;
        }
        let mut evidence = Vec::new();
        let used = mean(&samples, |s| Some(s.cpu_percent)).unwrap_or(0.0);
        evidence.push(format!(
            "the server's processes on {} may use {where_} ({cap:.2} CPUs): they used {used:.0}% of one CPU on average while loaded (peak {:.0}%)",
            h.host, h.summary.cpu_percent.peak
        ));
        if let Some(share) = busy {
            evidence.push(format!(
                "CPU use was at {:.0}% or more of what it may use in {:.0}% of the loaded samples",
                CPU_BUSY_SHARE * 100.0,
                share * 100.0
            ));
        }
        if let Some(d) = mean(&samples, |s| s.run_delay_per_s) {
            evidence.push(format!(
                "its threads waited for a CPU {d:.2} s per second on average (run-queue delay, /proc/PID/task/*/schedstat){}",
                if waiting.is_some() {
                    ": runnable work queued for the CPU"
                } else {
                    ""
                }
            ));
        }
        if let Some(p) = mean(&samples, |s| s.psi_cpu) {
            evidence.push(format!(
                "PSI cpu ({}): some task waited for a CPU {p:.0}% of the time",
                h.psi_source.as_deref().unwrap_or("machine")
            ));
        }
        if throttled.is_some() {
            let t = mean(&samples, |s| s.throttled_per_s).unwrap_or(0.0);
            evidence.push(format!(
                "its cgroup was held back by its CPU quota {t:.2} s per second"
            ));
        }
        let (directive, advice) = if let (Some((name, _)), None, None) = (one_loop, busy, throttled)
        {
            evidence.push(format!(
                "one {name} worker process used a whole CPU: an event loop cannot use more than one"
            ));
            (
                if name == "nginx" {
                    "worker_processes"
                } else {
                    "server.max-worker"
                },
                format!(
                    "{name}'s worker process is CPU-bound at one CPU: raise {} to the CPUs it may use (nginx: worker_processes auto), or make requests cheaper",
                    if name == "nginx" {
                        "worker_processes"
                    } else {
                        "server.max-worker"
                    }
                ),
            )
        } else {
            (
                "",
                format!(
                    "the server's CPU is saturated ({cap:.2} CPUs it may use): more workers will not help and make each request slower; make requests cheaper (caching, opcode cache, compression level), or give the server more CPUs{}",
                    if h.cpu_quota.is_some() {
                        " (raise its cgroup's CPU quota)"
                    } else if cap < h.cpus.max(1) as f64 {
                        " (its affinity or cpuset leaves CPUs of the machine unused)"
                    } else {
                        ""
                    }
                ),
            )
        };
        return Some(Diagnosis {
            resource: "cpu".into(),
            directive: directive.into(),
            evidence,
            advice,
            ..Default::default()
        });
    }
    None
}

/// The server's memory: its cgroup's OOM killer killed processes, or it hit
/// its memory limit under memory pressure, or the machine swapped, or the
/// server's processes stalled on memory (PSI `memory full`) or faulted
/// pages back in from disk at a sustained rate.
pub fn memory(rec: &RunRecord) -> Option<Diagnosis> {
    let w = rec.server_watch.as_ref()?;
    for h in &w.hosts {
        let samples = loaded(rec, h);
        let all: Vec<&WatchSample> = h.samples.iter().skip(1).collect();
        let oom: u64 = all.iter().map(|s| s.oom_kills).sum();
        let hits: u64 = all.iter().map(|s| s.memory_limit_hits).sum();
        let limit = h.cgroup_memory_limit_kib;
        let peak = h
            .cgroup_memory_peak_kib
            .or(h.summary.cgroup_memory_kib.map(|p| p.peak as u64));
        let near_limit = matches!((limit, peak), (Some(l), Some(p)) if p * 10 >= l * 9);
        // The machine's PSI counts every program's stalls (a build beside
        // the server shows here too): it is the server's evidence only from
        // its own cgroup, or when the machine itself ran short of memory.
        let own_psi = h.psi_source.as_deref() == Some("cgroup") || h.memory_low();
        let pressure = sustained(&samples, |s| {
            s.psi_memory.is_some_and(|p| p >= PSI_PRESSURE)
        });
        let stalled = sustained(&samples, |s| {
            s.psi_memory_full.is_some_and(|p| p >= PSI_PRESSURE)
        })
        .filter(|_| own_psi);
        let thrash = sustained(&samples, |s| {
            s.major_faults_per_s.is_some_and(|f| f >= 500.0)
        })
        .filter(|_| h.memory_low() || near_limit);
        let swapped = h.swapped();
        let at_limit = hits > 0 && near_limit && pressure.is_some();
        if oom == 0 && !at_limit && !swapped && stalled.is_none() && thrash.is_none() {
            continue;
        }
        let mut evidence = Vec::new();
        let mib = |k: u64| k as f64 / 1024.0;
        if oom > 0 {
            evidence.push(format!(
                "the OOM killer killed {oom} process{} in the server's cgroup ({}) during the watch",
                if oom == 1 { "" } else { "es" },
                h.cgroup.as_deref().unwrap_or("?")
            ));
        }
        if let Some(l) = limit {
            evidence.push(format!(
                "its cgroup's memory limit is {:.0} MiB{}",
                mib(l),
                peak.map(|p| format!(", and it peaked at {:.0} MiB", mib(p)))
                    .unwrap_or_default()
            ));
        }
        if hits > 0 {
            evidence.push(format!(
                "it hit the limit {hits} times (memory.failcnt / memory.events max)"
            ));
        }
        if swapped {
            evidence.push(format!(
                "{} swapped: {} pages in, {} out",
                h.host, h.summary.swapped_in_pages, h.summary.swapped_out_pages
            ));
        }
        if let Some(p) = mean(&samples, |s| s.psi_memory) {
            if p >= 1.0 && own_psi {
                evidence.push(format!(
                    "PSI memory ({}): some task stalled on memory {p:.0}% of the time",
                    h.psi_source.as_deref().unwrap_or("machine")
                ));
            }
        }
        if let Some(f) = mean(&samples, |s| s.major_faults_per_s) {
            if f >= 50.0 {
                evidence.push(format!(
                    "the server's processes took {f:.0} major page faults per second (pages read back from disk)"
                ));
            }
        }
        let errors_5xx: u64 = rec.series.iter().map(|p| p.status_classes[4]).sum();
        if errors_5xx > 0 {
            evidence.push(format!("{errors_5xx} answers were 5xx"));
        }
        let advice = if oom > 0 || at_limit {
            format!(
                "the server ran out of the memory its cgroup allows{}: lower the worker count to what fits (redline size), make each request use less memory, or raise the limit",
                limit.map(|l| format!(" ({:.0} MiB)", mib(l))).unwrap_or_default()
            )
        } else {
            "the machine ran out of memory (the seed's classic knee: the server started to swap): lower the worker count to what fits (redline size)".into()
        };
        return Some(Diagnosis {
            resource: "memory".into(),
            directive: "MaxRequestWorkers / pm.max_children / worker_processes".into(),
            limit: limit.map(|l| l / 1024),
            evidence,
            advice,
            ..Default::default()
        });
    }
    None
}

/// Disk I/O: tasks waited for block I/O (PSI `io`) in most loaded samples
/// while the server's own processes read or wrote the disk.
pub fn disk_io(rec: &RunRecord) -> Option<Diagnosis> {
    let w = rec.server_watch.as_ref()?;
    for h in &w.hosts {
        let samples = loaded(rec, h);
        let Some(share) = sustained(&samples, |s| {
            s.psi_io.is_some_and(|p| p >= 3.0 * PSI_PRESSURE)
                && s.io_read_per_s.unwrap_or(0.0) + s.io_write_per_s.unwrap_or(0.0)
                    >= 512.0 * 1024.0
        }) else {
            continue;
        };
        let r = mean(&samples, |s| s.io_read_per_s).unwrap_or(0.0);
        let wr = mean(&samples, |s| s.io_write_per_s).unwrap_or(0.0);
        let p = mean(&samples, |s| s.psi_io).unwrap_or(0.0);
        return Some(Diagnosis {
            resource: "disk_io".into(),
            evidence: vec![
                format!(
                    "PSI io ({}): some task waited for the disk {p:.0}% of the time, in {:.0}% of the loaded samples",
                    h.psi_source.as_deref().unwrap_or("machine"),
                    share * 100.0
                ),
                format!(
                    "the server's processes read {:.1} MB/s and wrote {:.1} MB/s from and to the disk (/proc/PID/io)",
                    r / 1e6,
                    wr / 1e6
                ),
            ],
            advice: "the server waits on its disk: let the page cache hold the files (more memory, fewer workers), cache open files (nginx open_file_cache), buffer logs (access_log ... buffer=64k), or use faster storage".into(),
            ..Default::default()
        });
    }
    None
}

/// The link: a staged run whose throughput stopped scaling while the bytes
/// per second past the knee stayed flat ([`FLAT_RATIO`]) and the watched
/// server's CPU stayed low: a link or shaper between client and server.
pub fn link(rec: &RunRecord, pool_full: bool) -> Option<Diagnosis> {
    let k = rec.knee.as_ref()?;
    if pool_full || k.reason != "throughput" {
        return None;
    }
    let past: Vec<&crate::stages::StageSummary> = rec
        .stages
        .iter()
        .filter(|s| s.level_to >= k.level && s.requests > 0)
        .collect();
    if past.len() < 2 {
        return None;
    }
    // Flat: as the load rose past the knee the bytes/s did not rise above
    // the knee's stage (stages of a few large answers are lumpy, so a dip
    // is allowed, a collapse is not).
    let first = past[0].bytes_per_sec;
    let lo = past
        .iter()
        .map(|s| s.bytes_per_sec)
        .fold(f64::INFINITY, f64::min);
    let hi = past.iter().map(|s| s.bytes_per_sec).fold(0.0, f64::max);
    let avg = past.iter().map(|s| s.bytes_per_sec).sum::<f64>() / past.len() as f64;
    if first <= 0.0 || hi > FLAT_RATIO * first || avg < 0.5 * first {
        return None;
    }
    // The time went into moving the bytes, not into making the answer: the
    // first byte came early, the last late.
    let (ttfb, total) = (rec.waiting.percentile(50.0), rec.latency.percentile(50.0));
    if total > 0 && ttfb * 2 > total {
        return None;
    }
    // The server must be seen idle: without a watch, a CPU-bound server
    // would look the same.
    let w = rec.server_watch.as_ref()?;
    let mut idle = Vec::new();
    for h in &w.hosts {
        let samples = loaded(rec, h);
        if samples.len() < 2 {
            return None;
        }
        let used = mean(&samples, |s| Some(s.cpu_percent)).unwrap_or(0.0);
        if used >= 0.5 * h.cpu_capacity() * 100.0 {
            return None;
        }
        idle.push(format!(
            "the server's processes on {} used {used:.0}% of one CPU on average meanwhile: not the server",
            h.host
        ));
    }
    let mbit = hi * 8.0 / 1e6;
    let mut evidence = vec![format!(
        "past {} {} the bytes read stayed between {:.2} and {:.2} MB/s ({:.1} Mbit/s) while the load rose to {}",
        crate::stages::fmt_level(k.level),
        k.unit,
        lo / 1e6,
        hi / 1e6,
        mbit,
        crate::stages::fmt_level(past.last().map(|s| s.level_to).unwrap_or(k.level))
    )];
    evidence.extend(idle);
    evidence.push(format!(
        "the first byte of an answer came after {:.1} ms and the whole answer after {:.1} ms (medians): the time went into the transfer, not into making the answer",
        ttfb as f64 / 1000.0,
        total as f64 / 1000.0
    ));
    Some(Diagnosis {
        resource: "link".into(),
        limit: Some(mbit.round() as u64),
        evidence,
        advice: format!(
            "a link or shaper between client and server at about {mbit:.0} Mbit/s is the limit, not the server: compress (gzip, brotli), cache (Expires, Cache-Control), send smaller answers, or test over a faster path"
        ),
        ..Default::default()
    })
}

/// What the server waits on: every connection held by the server (open
/// loop) or a knee, while the watched server's CPU stayed low and its own
/// pool had room, for a proxy (nginx, or a log that names its upstream):
/// the backend behind it is slower than the load.
pub fn upstream(rec: &RunRecord, pool_full: bool, log_upstream: bool) -> Option<Diagnosis> {
    if pool_full {
        return None;
    }
    let held = super::server_held(rec)
        || rec.warnings.iter().any(|w| w.code == "connections_busy")
        || rec.knee.is_some();
    if !held {
        return None;
    }
    // Waiting on a backend is waiting for the first byte; a slow transfer
    // (a link) is not.
    let (ttfb, total) = (rec.waiting.percentile(50.0), rec.latency.percentile(50.0));
    if !log_upstream && ttfb * 2 < total {
        return None;
    }
    let w = rec.server_watch.as_ref()?;
    let mut evidence = Vec::new();
    let mut proxy = log_upstream;
    for h in &w.hosts {
        let samples = loaded(rec, h);
        if samples.len() < 2 {
            return None;
        }
        let used = mean(&samples, |s| Some(s.cpu_percent)).unwrap_or(0.0);
        if used >= 0.5 * h.cpu_capacity() * 100.0 {
            return None;
        }
        proxy |= event_loop_server(h) == Some("nginx");
        evidence.push(format!(
            "the server's processes on {} used {used:.0}% of one CPU on average: they were waiting, not working",
            h.host
        ));
    }
    if !proxy {
        return None;
    }
    if super::server_held(rec) {
        evidence.insert(
            0,
            format!(
                "the server held all {} connections while requests waited for one",
                rec.config.load.connections()
            ),
        );
    }
    if let Some(st) = &rec.server_status {
        if st.server == "nginx" {
            let peak = st
                .samples
                .iter()
                .filter_map(|s| s.active)
                .max()
                .unwrap_or(0);
            let dropped = st
                .samples
                .iter()
                .any(|s| s.accepts.zip(s.handled).is_some_and(|(a, h)| a > h));
            if dropped {
                return None;
            }
            evidence.push(format!(
                "nginx's status page: at most {peak} connections open, none dropped: its own connections had room"
            ));
        }
    }
    Some(Diagnosis {
        resource: "upstream".into(),
        directive: "the backend's pool (pm.max_children, MaxRequestWorkers, …), proxy_read_timeout".into(),
        evidence,
        advice: "the server held the connections while its CPU and pool idled: it waits on what is behind it (the proxied backend, a FastCGI pool, a database): watch that backend (--watch its PID, --server-status of its status page) and raise its pool or make it faster; raising the front server's workers will not help".into(),
        ..Default::default()
    })
}

/// The error-log findings (`server_log`, the server's own words) about one
/// resource, most frequent first.
pub fn log_says<'a>(rec: &'a RunRecord, resource: &str) -> Vec<&'a crate::record::LogFinding> {
    let mut v: Vec<&crate::record::LogFinding> = rec
        .server_log
        .iter()
        .flat_map(|l| &l.findings)
        .filter(|f| f.resource == resource && f.count > 0)
        .collect();
    v.sort_by_key(|f| std::cmp::Reverse(f.count));
    v
}

/// One finding as an evidence line: the server's words, how often, when,
/// and where (the example line, already shortened and redacted).
pub fn quote(f: &crate::record::LogFinding) -> String {
    format!(
        "the server's error log{} said \"{}\" {} time{}{}: {}",
        if f.path.is_empty() {
            String::new()
        } else {
            format!(" ({})", f.path)
        },
        f.message,
        f.count,
        if f.count == 1 { "" } else { "s" },
        f.first_t
            .map(|t| format!(", first {t:.1} s into the run"))
            .unwrap_or_default(),
        f.example
    )
}

/// A worker pool or connection slots the server itself said it ran out of
/// (Apache "server reached MaxRequestWorkers setting", nginx
/// "worker_connections are not enough", php-fpm "server reached
/// pm.max_children setting", lighttpd "connection limit reached"); on
/// Apache, with idle keep-alive connections holding the slots (scoreboard
/// `K`, or event's `ConnsAsyncKeepAlive`), it is keep-alive.
pub fn log_pool(rec: &RunRecord) -> Option<Diagnosis> {
    let found = log_says(rec, "worker_pool");
    let f = found.first()?;
    let mut evidence: Vec<String> = found.iter().map(|f| quote(f)).collect();
    let limit = rec
        .server_config
        .as_ref()
        .and_then(|c| c.directives.get(f.directive.as_str()))
        .and_then(|v| v.value.trim().parse::<u64>().ok());
    // Keep-alive on Apache: K slots (prefork, worker) or connections held
    // by event's listener without a worker.
    let apache = f.directive == "MaxRequestWorkers" || f.directive == "ServerLimit";
    let ka = rec.server_status.as_ref().filter(|_| apache).and_then(|st| {
        let k = st
            .samples
            .iter()
            .filter_map(|s| s.keepalive.zip(s.busy))
            .filter(|(_, b)| *b > 0)
            .map(|(k, b)| k as f64 / b as f64)
            .fold(0.0, f64::max);
        let conns = st.samples.iter().filter_map(|s| s.conns_total).max().unwrap_or(0);
        let idle = st
            .samples
            .iter()
            .filter_map(|s| s.async_keepalive)
            .max()
            .unwrap_or(0);
        // Event's workers were never all busy, yet Apache said it reached
        // MaxRequestWorkers: the connections it held without a worker
        // (keep-alive, mostly; its Conns* counts refresh late) filled it.
        let busy_peak = st.samples.iter().filter_map(|s| s.busy).max();
        let event_idle_workers = st.mpm.as_deref() == Some("event")
            && matches!((busy_peak, st.slots), (Some(b), Some(n)) if b < n);
        if conns > 0 && idle as f64 >= super::KEEPALIVE_SHARE * conns as f64 {
            Some(format!(
                "the status page: up to {idle} of {conns} connections were idle keep-alive connections (ConnsAsyncKeepAlive), waiting for a client's next request"
            ))
        } else if event_idle_workers {
            Some(format!(
                "the status page (event MPM): busy workers peaked at {} of {} while Apache said it reached MaxRequestWorkers: its slots were held by connections without a worker (idle keep-alive; up to {idle} counted in ConnsAsyncKeepAlive)",
                busy_peak.unwrap_or(0),
                st.slots.unwrap_or(0)
            ))
        } else if k >= super::KEEPALIVE_SHARE {
            Some(format!(
                "the status page: up to {:.0}% of the busy workers were in keep-alive (scoreboard K)",
                k * 100.0
            ))
        } else {
            None
        }
    });
    if let Some(k) = ka {
        evidence.push(k);
        return Some(Diagnosis {
            resource: "keepalive".into(),
            directive: "KeepAliveTimeout, MaxKeepAliveRequests".into(),
            limit,
            evidence,
            advice: "the server's slots are held by idle keep-alive connections: lower KeepAliveTimeout (to 1-5 s) so they return sooner, lower MaxKeepAliveRequests, or raise MaxRequestWorkers if memory allows (redline size)".into(),
            ..Default::default()
        });
    }
    Some(Diagnosis {
        resource: "worker_pool".into(),
        directive: f.directive.clone(),
        limit,
        evidence,
        advice: format!(
            "the server said it ran out of workers or connection slots: raise {}{} if memory allows (redline size says how far), or make each request shorter",
            f.directive,
            limit.map(|l| format!(" (now {l})")).unwrap_or_default()
        ),
        ..Default::default()
    })
}

/// File descriptors, in the server's own words ("Too many open files").
pub fn log_fds(rec: &RunRecord) -> Option<Diagnosis> {
    let found = log_says(rec, "fds");
    let f = found.first()?;
    Some(Diagnosis {
        resource: "fds".into(),
        directive: f.directive.clone(),
        evidence: found.iter().map(|f| quote(f)).collect(),
        advice: format!(
            "the server ran out of file descriptors: raise {} (and the service's LimitNOFILE / ulimit -n)",
            f.directive
        ),
        ..Default::default()
    })
}

/// The upstream, in the server's own words (nginx "upstream timed out",
/// "no live upstreams", connections to it refused or its queue full).
pub fn log_upstream(rec: &RunRecord) -> Option<Diagnosis> {
    let found = log_says(rec, "upstream");
    let f = found.first()?;
    Some(Diagnosis {
        resource: "upstream".into(),
        directive: f.directive.clone(),
        evidence: found.iter().map(|f| quote(f)).collect(),
        advice: "the server's upstream (the backend it proxies to) did not keep up: watch that backend (--watch its PID, --server-status of its status page) and raise its pool or make it faster; raising the front server's workers will not help".into(),
        ..Default::default()
    })
}

/// Apache event's connection slots held by idle keep-alive connections: a
/// load that stopped scaling (`stalled`) while Apache held fewer
/// connections than the load offered, most of them idle keep-alive ones
/// without a worker (`ConnsAsyncKeepAlive` at [`super::KEEPALIVE_SHARE`]
/// of `ConnsTotal`), and its workers never all busy: event's per-process
/// connection limit (`ThreadsPerChild` + `AsyncRequestWorkerFactor` × idle
/// workers) was full of idle clients, so new connections waited in the
/// listen queue.
pub fn event_keepalive(rec: &RunRecord, stalled: bool, max_level: f64) -> Option<Diagnosis> {
    let st = rec.server_status.as_ref()?;
    if st.server != "apache" || !stalled {
        return None;
    }
    let off = st.offset_s(&rec.started_at);
    let during: Vec<&StatusSample> = st
        .samples
        .iter()
        .filter(|s| s.t + off >= 0.0 && s.t + off <= rec.duration_s)
        .collect();
    let conns = during.iter().filter_map(|s| s.conns_total).max()?;
    // A connection event holds without a worker is idle keep-alive,
    // writing or closing; its Conns* counts refresh late, so the held
    // connections less the busy workers count too.
    let idle = during
        .iter()
        .filter_map(|s| {
            let c = s.conns_total?;
            let without = c
                .saturating_sub(s.busy.unwrap_or(0))
                .saturating_sub(s.async_writing.unwrap_or(0))
                .saturating_sub(s.async_closing.unwrap_or(0));
            Some((s.async_keepalive.unwrap_or(0).max(without), c))
        })
        .filter(|(k, c)| *c > 0 && *k as f64 >= super::KEEPALIVE_SHARE * *c as f64)
        .map(|(k, _)| k)
        .max()?;
    let busy = during.iter().filter_map(|s| s.busy).max().unwrap_or(0);
    let slots = st.slots.unwrap_or(u64::MAX);
    let offered = max_level + idle as f64;
    if idle < 2 || offered <= conns as f64 {
        return None;
    }
    let mut evidence = vec![
        format!(
            "Apache{} held at most {conns} connections, up to {idle} of them without a worker (idle keep-alive: ConnsTotal less busy workers, ConnsAsyncKeepAlive), while the load rose to {max_level:.0} connections: new connections waited in its listen queue",
            st.mpm.as_deref().map(|m| format!(" ({m} MPM)")).unwrap_or_default()
        ),
        if busy >= slots {
            format!(
                "its {slots} workers were all busy with the few connections that got in: the idle clients kept the rest of the load out"
            )
        } else {
            format!(
                "its workers were never all busy (at most {busy}{}): the slots were held by idle clients, not by work",
                if slots == u64::MAX {
                    String::new()
                } else {
                    format!(" of {slots}")
                }
            )
        },
    ];
    let timeouts = st
        .failures_between(&rec.started_at, 0.0, rec.duration_s)
        .into_iter()
        .filter(|(_, k)| *k == "timeout")
        .count();
    if timeouts > 0 {
        evidence.push(format!(
            "{timeouts} reads of the status page timed out during the load (it needs a connection slot too)"
        ));
    }
    evidence.extend(log_says(rec, "worker_pool").into_iter().map(quote));
    Some(Diagnosis {
        resource: "keepalive".into(),
        directive: "KeepAliveTimeout, MaxKeepAliveRequests (event: AsyncRequestWorkerFactor)".into(),
        evidence,
        advice: "idle keep-alive clients fill Apache event's connection slots: lower KeepAliveTimeout (to 1-5 s), raise AsyncRequestWorkerFactor or ThreadsPerChild (and MaxRequestWorkers) if memory allows".into(),
        ..Default::default()
    })
}

/// The listen backlog the server's config sets (Apache `ListenBacklog`,
/// lighttpd `server.listen-backlog`, nginx `listen … backlog=N`), when
/// recorded.
pub fn configured_backlog(rec: &RunRecord) -> Option<u64> {
    let c = rec.server_config.as_ref()?;
    for k in ["ListenBacklog", "server.listen-backlog"] {
        if let Some(n) = c
            .directives
            .get(k)
            .and_then(|v| v.value.trim().parse().ok())
        {
            return Some(n);
        }
    }
    c.directives.get("listen").and_then(|v| {
        v.value
            .split_whitespace()
            .find_map(|w| w.strip_prefix("backlog="))
            .and_then(|n| n.trim_end_matches(';').parse().ok())
    })
}
