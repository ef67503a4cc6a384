//! The diagnosis of a run: why a staged run stopped scaling or a plain run
//! hit trouble, from its stages, watch samples, status page and warnings.

use super::*;

/// Why a staged run stopped scaling, or why a plain run hit trouble: the
/// resource that gave out first, the evidence, and the directive to change
/// (or, without the evidence, what to add to the run to know).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Diagnosis {
    /// `server_gone` (the server stopped answering from an instant on),
    /// `worker_pool` (every worker busy), `keepalive` (workers held by idle
    /// keep-alive connections), `cpu` (the server's CPU saturated), `memory`
    /// (the machine swapped), `client` (redline itself was the limit),
    /// `listen_backlog` (connection attempts dropped by a full accept
    /// queue), `bandwidth` (the bytes filled the link), `server_concurrency`
    /// (open loop: every connection held by the server while requests
    /// waited, without a status page to say which pool) or `unknown` (no
    /// evidence: see `advice`).
    pub resource: String,
    /// The directive(s) that set the limit, e.g. `MaxRequestWorkers`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub directive: String,
    /// The limit seen (busy workers at the plateau), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// The load level (connections or req/s) at which the limit was first reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_level: Option<f64>,
    /// The instant (seconds since the run started) it happened, when it has
    /// one (`server_gone`: the end of the last second with an answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_s: Option<f64>,
    /// The numbers behind it, one fact per entry.
    pub evidence: Vec<String>,
    /// What to change (or to add, to know).
    pub advice: String,
    /// Other resources whose own evidence showed saturation too, in order
    /// (each with its evidence and advice; none of them contradicts the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<Diagnosis>,
}

impl Diagnosis {
    /// What gave out, in words, for a resource code.
    pub fn what(resource: &str) -> &'static str {
        match resource {
            "worker_pool" => "the worker pool ran out",
            "keepalive" => "workers were held by idle keep-alive connections",
            "cpu" => "the server's CPU saturated",
            "memory" => "the server ran out of memory",
            "disk_io" => "the server waited on its disk",
            "fds" => "the server ran out of file descriptors",
            "upstream" => "the server waited on its upstream (the backend behind it)",
            "link" => "the link between client and server was full",
            "server_gone" => "the server went away",
            "client" => "the client (redline itself) was the limit",
            "listen_backlog" => "the server's listen backlog overflowed",
            "bandwidth" => "the bandwidth ran out",
            "server_concurrency" => "the server's concurrency was the limit",
            _ => "not known from this run",
        }
    }

    /// The first line of the diagnosis: what gave out, where, the
    /// directive (`unit`: the stage unit, `connections` or `req/s`).
    pub fn headline(&self, unit: &str) -> String {
        let at = match (self.limit, self.at_level, self.at_s) {
            (Some(l), _, _) if self.resource == "link" => format!(" at about {l} Mbit/s"),
            (Some(l), _, _) if self.resource == "memory" => format!(" (a limit of {l} MiB)"),
            (Some(l), Some(a), _) => format!(" at {l} (first reached at {a:.0} {unit})"),
            (Some(l), None, Some(t)) => format!(" at {l} (reached {t:.1} s into the run)"),
            (Some(l), None, None) => format!(" at {l} connections"),
            (None, _, Some(t)) => format!(" at {t:.1} s"),
            _ => String::new(),
        };
        let dir = if self.directive.is_empty() {
            String::new()
        } else {
            format!(" [{}]", self.directive)
        };
        format!("{}{at}{dir}", Diagnosis::what(&self.resource))
    }
}

/// A status read placed on the run's clock, with the load level then.
pub(super) struct Placed<'a> {
    s: &'a StatusSample,
    level: f64,
    /// A read that timed out: the page needs a free worker of the server
    /// itself (nginx's does not), so it says none was free.
    failed: bool,
}

/// The load level at `t` seconds into the run, from the stages (ramps
/// interpolate); `None` outside them (the reads after the load ended).
pub(super) fn level_at(stages: &[crate::stages::StageSummary], t: f64) -> Option<f64> {
    let st = stages.iter().find(|s| t >= s.start_s && t <= s.end_s)?;
    let span = st.end_s - st.start_s;
    if span <= 0.0 || st.level_from == st.level_to {
        return Some(st.level_to);
    }
    Some(st.level_from + (st.level_to - st.level_from) * (t - st.start_s) / span)
}

/// Share of the busy workers that Apache's scoreboard shows in keep-alive
/// (`K`) above which the pool is said to be held by keep-alive.
pub const KEEPALIVE_SHARE: f64 = 0.3;

/// Warning codes that say the client, not the server, may have been the
/// limit (the engine flags the record `client_limited` for each); a
/// `rate_short` of a [`server_held`] run is the server's doing.
pub const CLIENT_LIMIT_CODES: [&str; 7] = [
    "client_cpu",
    "client_starved",
    "fd_limit",
    "client_resources",
    "scheduler_lag",
    "rate_short",
    "connections_short",
];

/// Open loop: every connection the run could open was open, and requests
/// waited for one to come free: the server's concurrency set the pace (the
/// engine's test for its server-held `rate_short` warning).
pub fn server_held(rec: &crate::RunRecord) -> bool {
    rec.config.load.is_open()
        && rec.counters.waited_for_connection > 0
        && rec.counters.peak_connections >= rec.config.load.connections()
}

/// The warnings that make a run the client's limit, not the server's:
/// [`CLIENT_LIMIT_CODES`], less the `rate_short` and `scheduler_lag` of a
/// [`server_held`] run: requests that waited for a connection the server
/// held were sent late because of the server, not the client.
pub fn client_limits(rec: &crate::RunRecord) -> Vec<&crate::record::Warning> {
    let held = server_held(rec);
    rec.warnings
        .iter()
        .filter(|w| CLIENT_LIMIT_CODES.contains(&w.code.as_str()))
        .filter(|w| !(held && matches!(w.code.as_str(), "rate_short" | "scheduler_lag")))
        .collect()
}

/// p99 at or above this many times p50 (and at least [`BLOWUP_MIN_US`]) is
/// a latency blow-up: requests queued somewhere.
pub const BLOWUP_RATIO: u64 = 10;
/// The least p99 (µs) called a blow-up: 100 ms.
pub const BLOWUP_MIN_US: u64 = 100_000;
/// Bytes per second at or above this share of the link's speed: the link
/// was the limit.
pub const LINK_SHARE: f64 = 0.9;
/// Loopback has no link: its bytes are copied by the CPUs. wrk moved
/// 1.42 GB/s from nginx (one worker, sendfile, a 1 MiB file, 4
/// connections) over loopback on the 2-core development machine; at or
/// above 1 GB/s (70 % of that) the copying is called the limit.
pub const LOOPBACK_CEILING_BYTES: f64 = 1e9;

/// What went wrong in a plain (unstaged) run, one fact per entry: errors,
/// timeouts, unanswered requests, a server that went away, a latency
/// blow-up, connections held by the server, SYNs sent again, the client's
/// own limits. Empty for a run without trouble.
pub fn trouble(rec: &crate::RunRecord) -> Vec<String> {
    let mut t = Vec::new();
    let c = &rec.counters;
    if c.failed > 0 {
        let mut kinds: Vec<&crate::ErrorCount> = rec.errors.iter().collect();
        kinds.sort_by_key(|e| std::cmp::Reverse(e.count));
        let list: Vec<String> = kinds
            .iter()
            .take(3)
            .map(|e| format!("{} {}", e.count, e.kind.name()))
            .collect();
        t.push(format!(
            "{} of {} requests failed ({})",
            c.failed,
            c.scheduled.max(c.failed),
            list.join(", ")
        ));
    }
    let unanswered = c.in_flight_at_end.saturating_add(c.not_sent);
    if unanswered > 0 && !rec.interrupted {
        t.push(format!(
            "{unanswered} requests were never answered ({} in flight at the end, {} never sent)",
            c.in_flight_at_end, c.not_sent
        ));
    }
    let answers: u64 = rec.series.iter().map(|p| p.requests).sum();
    let fivexx: u64 = rec.series.iter().map(|p| p.status_classes[4]).sum();
    if fivexx > 0 && fivexx * 100 >= answers {
        t.push(format!(
            "{fivexx} of {answers} answers were 5xx (server errors)"
        ));
    }
    let (p50, p99) = (rec.latency.percentile(50.0), rec.latency.percentile(99.0));
    if p99 >= BLOWUP_MIN_US && p99 >= BLOWUP_RATIO * p50.max(1) {
        t.push(format!(
            "latency blew up: p99 {:.1} ms is {:.0}x the median {:.1} ms",
            p99 as f64 / 1000.0,
            p99 as f64 / p50.max(1) as f64,
            p50 as f64 / 1000.0
        ));
    }
    for w in &rec.warnings {
        if matches!(
            w.code.as_str(),
            "server_gone" | "syn_retransmits" | "connections_busy"
        ) || (w.code == "rate_short" && server_held(rec))
        {
            t.push(w.message.clone());
        }
    }
    for w in client_limits(rec) {
        t.push(w.message.clone());
    }
    t
}

/// The diagnosis of a run: for a staged run, why it stopped scaling; for a
/// plain run, why it hit [`trouble`] (`None` without any). The rules, first
/// match wins (docs/diagnosis.md lists them with their thresholds):
/// the server went away; the status page's pool full (busy at its plateau,
/// no idle worker, in 80 % of the later reads, the load beyond it; keep-alive
/// when 30 % of the busy Apache workers are in `K`); `--watch`: swapping, or
/// CPU at 90 % of the machine; SYNs sent again or accept queues overflowed
/// (listen backlog); the client's own limits; bytes/s at 90 % of the link (or
/// 1 GB/s on loopback); open loop with every connection held by the server
/// (server concurrency); else what to add to know.
pub fn diagnose(rec: &crate::RunRecord) -> Option<Diagnosis> {
    diagnose_with(rec, Vec::new())
}

/// [`diagnose`] with more trouble the caller knows of (`find`: the SLO
/// thresholds a step failed), so a plain run is diagnosed even when its
/// record alone shows none.
pub fn diagnose_with(rec: &crate::RunRecord, more: Vec<String>) -> Option<Diagnosis> {
    let staged = !rec.stages.is_empty();
    let mut facts = trouble(rec);
    if !staged {
        facts.extend(more);
    }
    // A staged run is diagnosed when it stopped scaling, or when it failed
    // or left requests unanswered (a server that answered nothing has no knee).
    let broke = staged
        && (rec.counters.failed > 0
            || (!rec.interrupted
                && rec
                    .counters
                    .in_flight_at_end
                    .saturating_add(rec.counters.not_sent)
                    > 0));
    // A plain run without trouble is still diagnosed when a server
    // resource's own evidence shows it saturated (a closed loop pushes the
    // server to its limit by design: that limit is the answer); the rules
    // that need trouble or a knee are left out for it.
    let calm = !staged && facts.is_empty();
    if let Some(d) = diagnose_gone(rec) {
        return Some(d);
    }
    let unit = rec.knee.as_ref().map(|k| k.unit.as_str()).unwrap_or(
        rec.config
            .stages
            .as_ref()
            .map(|p| p.unit.as_str())
            .unwrap_or("connections"),
    );
    let max_level = if staged {
        rec.stages.iter().map(|s| s.level_to).fold(0.0, f64::max)
    } else {
        rec.counters.peak_connections as f64
    };
    // Something gave out: a knee on a staged run, trouble on a plain one.
    let stalled = if staged {
        rec.knee.is_some() || broke
    } else {
        !calm
    };
    // The pool from the status page, else from the server's own words in
    // its error log; the log's lines are cited either way.
    let pool = match rec
        .server_status
        .as_ref()
        .and_then(|w| diagnose_status(rec, w, max_level, unit, stalled))
    {
        Some(mut p) => {
            p.evidence.extend(
                super::evidence::log_says(rec, "worker_pool")
                    .into_iter()
                    .map(super::evidence::quote),
            );
            // Apache event with its connection slots full of idle
            // keep-alive clients: the busy workers are what got in; the
            // idle clients kept the rest out. Keep-alive first.
            match super::evidence::event_keepalive(rec, stalled, max_level) {
                Some(mut k) if p.resource == "worker_pool" => {
                    k.also.push(p);
                    Some(k)
                }
                _ => Some(p),
            }
        }
        None => super::evidence::log_pool(rec)
            .or_else(|| super::evidence::event_keepalive(rec, stalled, max_level)),
    };
    let cpu = super::evidence::cpu(rec);
    let memory = super::evidence::memory(rec).map(|mut m| {
        m.evidence.extend(
            super::evidence::log_says(rec, "memory")
                .into_iter()
                .map(super::evidence::quote),
        );
        m
    });
    // Memory in the server's own words only (no watch to confirm it): named
    // after the pool, which a worker killed for memory also empties.
    let memory_said = super::evidence::log_says(rec, "memory");
    let disk = super::evidence::disk_io(rec);
    // One decision over all the evidence, server first. A pool that is
    // full because its workers wait for the CPU is a CPU limit: raising it
    // makes the server slower, so it is not named at all.
    let mut found: Vec<Diagnosis> = Vec::new();
    let oom = memory
        .as_ref()
        .is_some_and(|m| m.evidence.iter().any(|e| e.contains("OOM killer")));
    if oom {
        found.extend(memory.clone());
    }
    if let Some(mut c) = cpu {
        if let Some(p) = &pool {
            c.evidence.push(format!(
                "the {} looked full ({}), but only because its workers waited for the CPU: raising {} would make the server slower",
                if p.resource == "keepalive" { "worker pool" } else { "pool" },
                p.evidence.first().map(String::as_str).unwrap_or("the status page"),
                if p.directive.is_empty() { "it" } else { p.directive.as_str() }
            ));
        }
        found.push(c);
    } else if let Some(p) = pool.clone() {
        if !oom {
            found.extend(memory.clone());
        }
        found.push(p);
    }
    if !oom && !found.iter().any(|d| d.resource == "memory") {
        found.extend(memory);
    }
    if !found.iter().any(|d| d.resource == "memory") && !memory_said.is_empty() {
        found.push(Diagnosis {
            resource: "memory".into(),
            evidence: memory_said.iter().map(|f| super::evidence::quote(f)).collect(),
            advice: "the server says it ran out of memory: lower the worker count to what fits (redline size), or raise its memory limit; add --watch PID to see its cgroup's limit and OOM kills".into(),
            ..Default::default()
        });
    }
    found.extend(super::evidence::log_fds(rec));
    found.extend(disk);
    let pool_full = pool.is_some();
    if stalled {
        // The backlog after the pool: a full pool fills the accept queue;
        // but a backlog set below the connections the load opened is its
        // own limit (connects dropped and retried after 1 s, 3 s, …), first.
        if let Some(b) = diagnose_backlog(rec) {
            let small =
                super::evidence::configured_backlog(rec).is_some_and(|n| (n as f64) < max_level);
            let at = found
                .iter()
                .position(|d| matches!(d.resource.as_str(), "worker_pool" | "keepalive"))
                .filter(|_| small)
                .unwrap_or(found.len());
            found.insert(at, b);
        }
        found.extend(super::evidence::link(rec, pool_full));
        let said = super::evidence::log_upstream(rec);
        if found.is_empty() {
            let seen = super::evidence::upstream(rec, pool_full, said.is_some());
            match (seen, said) {
                (Some(mut d), Some(s)) => {
                    d.evidence.extend(s.evidence);
                    found.push(d);
                }
                (d, s) => found.extend(d.or(s)),
            }
        } else {
            found.extend(said);
        }
        found.extend(diagnose_client(rec));
        if found.is_empty() {
            found.extend(diagnose_bandwidth(rec));
        }
    }
    // A finding that carries its own `also` (keep-alive before the pool
    // it starved) lists them right after it.
    let found: Vec<Diagnosis> = found
        .into_iter()
        .flat_map(|mut d| {
            let more = std::mem::take(&mut d.also);
            std::iter::once(d).chain(more)
        })
        .collect();
    let mut found = found;
    if !found.is_empty() {
        let mut first = found.remove(0);
        if first.resource != "client" {
            first.evidence.extend(error_facts(rec));
        }
        first.also = found;
        return Some(first);
    }
    if !stalled || calm {
        return None;
    }
    let mut add = Vec::new();
    if rec.server_status.is_none() {
        add.push("--server-status URL (Apache /server-status?auto, nginx stub_status, php-fpm's status page) to see the worker pool");
    }
    if rec.server_watch.is_none() {
        add.push("--watch NAME|PID (on the server's machine) to see its CPU and memory");
    }
    let mut evidence = facts;
    evidence.push(match &rec.server_status {
        Some(w) if !w.samples.is_empty() => {
            let peak = w.samples.iter().filter_map(|s| s.busy).max().unwrap_or(0);
            match w.slots {
                // Full, but not for long enough (80 % of the later reads, two at least) to call it the limit.
                Some(n) if peak >= n => format!(
                    "the status page ({}) saw busy reach all {n} slots, but not hold there: too briefly to call the pool the limit (a longer run would tell)",
                    w.server
                ),
                _ => format!(
                    "the status page ({}) showed no exhausted pool: busy peaked at {peak}{}",
                    w.server,
                    w.slots
                        .map(|n| format!(" of {n} slots"))
                        .unwrap_or_default()
                ),
            }
        }
        Some(w) => format!(
            "the status page gave no read during the run ({} failed{}): every worker or connection slot may have been held, even for it",
            w.failed,
            if w.failures.iter().all(|f| f.kind == "timeout") && !w.failures.is_empty() {
                ", all timed out"
            } else {
                ""
            }
        ),
        None => "no server-side evidence was recorded".into(),
    });
    let to_know = if add.is_empty() {
        None
    } else {
        Some(format!("to know why, run again with {}", add.join(" and ")))
    };
    if !staged && server_held(rec) {
        let cap = rec.config.load.connections();
        return Some(Diagnosis {
            resource: "server_concurrency".into(),
            directive: "MaxRequestWorkers / pm.max_children / worker_connections".into(),
            limit: Some(cap),
            evidence,
            advice: format!(
                "the server held all {cap} connections and answered slower than the rate needs: its worker limit (or slow requests) set the pace, not the client; {}",
                to_know.unwrap_or_else(|| "raise -c to see whether the server takes more at once".into())
            ),
            ..Default::default()
        });
    }
    Some(Diagnosis {
        resource: "unknown".into(),
        evidence,
        advice: to_know.unwrap_or_else(|| {
            "neither the worker pool, the CPU nor memory ran out: look at the application (slow queries, locks) and the network".into()
        }),
        ..Default::default()
    })
}

/// The server went away: the engine's `server_gone` warning (every second
/// from an instant on failed, with no answer, after answers before it,
/// mostly refused or reset connections). The instant is the end of the last
/// second with an answer.
pub(super) fn diagnose_gone(rec: &crate::RunRecord) -> Option<Diagnosis> {
    let w = rec.warnings.iter().find(|w| w.code == "server_gone")?;
    let at = rec
        .series
        .iter()
        .rposition(|p| p.requests > 0)
        .map(|i| rec.series[i].t as f64 + 1.0);
    let mut evidence = vec![w.message.clone()];
    let count = |k: crate::ErrorKind| error_count(rec, k);
    let (refused, reset) = (
        count(crate::ErrorKind::Refused),
        count(crate::ErrorKind::Reset),
    );
    evidence.push(format!(
        "{refused} connections refused and {reset} reset in all"
    ));
    Some(Diagnosis {
        resource: "server_gone".into(),
        at_s: at,
        evidence,
        advice: format!(
            "the server stopped answering{}: look at its error log and the system journal (a crash, the OOM killer, a restart or deploy); the figures after that instant measure no server",
            at.map(|a| format!(" at {a:.1} s")).unwrap_or_default()
        ),
        ..Default::default()
    })
}

/// The client itself was the limit: its CPU, file descriptors or ports,
/// scheduler lag, a rate it did not send or connections it did not open
/// ([`client_limits`]).
pub(super) fn diagnose_client(rec: &crate::RunRecord) -> Option<Diagnosis> {
    let l = client_limits(rec);
    if l.is_empty() {
        return None;
    }
    let fds = l
        .iter()
        .any(|w| w.code == "fd_limit" || w.code == "client_resources");
    Some(Diagnosis {
        resource: "client".into(),
        evidence: l.iter().map(|w| w.message.clone()).collect(),
        advice: format!(
            "redline itself was the limit, so the server's figures are a lower bound: give it more threads (-t) and cores, or more machines (redline agent){}",
            if fds {
                ", and raise its open-files limit (ulimit -n) or use more local addresses"
            } else {
                ""
            }
        ),
        ..Default::default()
    })
}

/// The listen backlog overflowed: connection attempts (SYNs) sent again
/// after 1 s or more (the engine's `syn_retransmits` warning), or a
/// listening socket on the client's host dropped attempts for a full accept
/// queue (`TcpExt ListenOverflows`: the server's, when it runs on this host).
pub(super) fn diagnose_backlog(rec: &crate::RunRecord) -> Option<Diagnosis> {
    let syn = rec.warnings.iter().find(|w| w.code == "syn_retransmits");
    let overflows = rec.client.listen_overflows;
    // The watched server's machine (`--watch`, or a merged `redline watch`).
    let watched: Vec<(String, u64)> = rec
        .server_watch
        .iter()
        .flat_map(|w| &w.hosts)
        .map(|h| {
            (
                h.host.clone(),
                h.samples.iter().map(|s| s.listen_overflows).sum::<u64>(),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    if syn.is_none() && overflows == 0 && watched.is_empty() {
        return None;
    }
    let mut evidence = Vec::new();
    for (host, n) in &watched {
        evidence.push(format!(
            "{host}: its listening sockets dropped {n} connection attempts for a full accept queue during the watch (TcpExt ListenOverflows)"
        ));
    }
    if let Some(w) = syn {
        evidence.push(w.message.clone());
    } else if overflows > 0 {
        evidence.push(format!(
            "a listening socket on this host overflowed its accept queue {overflows} times (TcpExt ListenOverflows)"
        ));
    }
    if let Some(c) = &rec.server_config {
        for k in [
            "ListenBacklog",
            "listen",
            "backlog",
            "server.listen-backlog",
        ] {
            if let Some(v) = c.directives.get(k) {
                evidence.push(format!("the server's config: {k} {}", v.value));
            }
        }
    }
    Some(Diagnosis {
        resource: "listen_backlog".into(),
        directive: "ListenBacklog / listen ... backlog= / server.listen-backlog, net.core.somaxconn".into(),
        evidence,
        advice: "the server's accept queue was full, so the kernel dropped connection attempts and the clients waited 1 s or more to retry: raise the backlog (Apache ListenBacklog, nginx listen ... backlog=4096, lighttpd server.listen-backlog) and on the server net.core.somaxconn and net.ipv4.tcp_max_syn_backlog; if the workers are all busy too, the pool is the cause (add --server-status)".into(),
        ..Default::default()
    })
}

/// True for a loopback address (`127.x.x.x:port`, `[::1]:port`).
pub(super) fn is_loopback(addr: &str) -> bool {
    let host = addr
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(addr)
        .trim_matches(['[', ']']);
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
        || host == "localhost"
}

/// Bandwidth: the bytes read (or written) per second reached
/// [`LINK_SHARE`] of the client's link (`environment.link_mbit`), or
/// [`LOOPBACK_CEILING_BYTES`] on loopback.
pub(super) fn diagnose_bandwidth(rec: &crate::RunRecord) -> Option<Diagnosis> {
    if rec.duration_s <= 0.0 {
        return None;
    }
    let c = &rec.counters;
    let bps = c.bytes_read.max(c.bytes_written) as f64 / rec.duration_s;
    let (ceiling, what) = if is_loopback(&rec.server.address) {
        (
            LOOPBACK_CEILING_BYTES,
            "loopback (no link: the CPUs copy the bytes; 1 GB/s is 70 % of what wrk moved over loopback on a 2-core machine)".to_string(),
        )
    } else {
        let m = rec.environment.link_mbit?;
        (
            m as f64 * 1e6 / 8.0 * LINK_SHARE,
            format!(
                "{:.0} % of the client's {m} Mbit/s link",
                LINK_SHARE * 100.0
            ),
        )
    };
    if bps < ceiling {
        return None;
    }
    Some(Diagnosis {
        resource: "bandwidth".into(),
        evidence: vec![format!(
            "{:.1} MB/s ({:.0} Mbit/s) moved, at or above {what}",
            bps / 1e6,
            bps * 8.0 / 1e6
        )],
        advice: "the bytes filled the link, not the server's workers: compress (gzip/deflate, brotli), cache (Expires, Cache-Control), serve smaller responses, or use a faster link or more client machines".into(),
        ..Default::default()
    })
}

pub(super) fn diagnose_status(
    rec: &crate::RunRecord,
    w: &StatusWatch,
    max_level: f64,
    unit: &str,
    stalled: bool,
) -> Option<Diagnosis> {
    let off = match (
        crate::time::parse_rfc3339_ms(&w.started_at),
        crate::time::parse_rfc3339_ms(&rec.started_at),
    ) {
        (Some(h), Some(r)) => (h - r) as f64 / 1000.0,
        _ => 0.0,
    };
    // nginx: a connection is a worker_connections slot, busy or waiting.
    let nginx = w.server == "nginx";
    let measure = |s: &StatusSample| if nginx { s.active } else { s.busy };
    // Reads that timed out while the load ran, placed like reads: Apache,
    // lighttpd and php-fpm answer their status page with a worker of
    // their own, so a timeout says no worker was free.
    // Apache event answers with a worker too, but its connections wait for
    // a connection slot, which idle keep-alive clients may hold while
    // workers idle: its timeouts say nothing of the workers.
    let event =
        w.mpm.as_deref() == Some("event") || w.samples.iter().any(|s| s.conns_total.is_some());
    let timeouts: Vec<StatusSample> = if nginx || event {
        Vec::new()
    } else {
        w.failures
            .iter()
            .filter(|f| f.kind == "timeout")
            .map(|f| StatusSample {
                t: f.t,
                ..Default::default()
            })
            .collect()
    };
    let mut placed: Vec<Placed> = w
        .samples
        .iter()
        .map(|s| (s, false))
        .chain(timeouts.iter().map(|s| (s, true)))
        .filter_map(|(s, failed)| {
            let level = if rec.stages.is_empty() {
                // A plain run: its one level, while it ran.
                let t = s.t + off;
                (t >= 0.0 && t <= rec.duration_s).then_some(max_level)?
            } else {
                level_at(&rec.stages, s.t + off)?
            };
            if !failed {
                measure(s)?;
            }
            Some(Placed { s, level, failed })
        })
        .collect();
    placed.sort_by(|a, b| a.s.t.total_cmp(&b.s.t));
    let limit = placed.iter().filter_map(|p| measure(p.s)).max()?;
    if limit == 0 {
        return None;
    }
    // nginx counts the status request's own connection; Apache its worker.
    // nginx's open connections churn (closed and reopened between reads):
    // within 15 % of the most seen counts as full.
    let floor = if nginx {
        limit - limit * 15 / 100
    } else {
        limit
    };
    let full = |p: &Placed| {
        p.failed || (measure(p.s).unwrap_or(0) >= floor && p.s.idle.is_none_or(|i| i == 0))
    };
    // The plateau starts at a read that saw it; timeouts only continue it.
    let first = placed.iter().position(|p| !p.failed && full(p))?;
    let after = &placed[first..];
    let full_share = after.iter().filter(|p| full(p)).count() as f64 / after.len() as f64;
    if full_share < 0.8 || max_level <= limit as f64 || after.len() < 2 {
        return None;
    }
    // A plateau is a limit when the server says so (every scoreboard slot
    // busy, requests in php-fpm's listen queue, connections nginx could
    // not handle), or when throughput stopped scaling (the knee): an idle
    // count of 0 alone is a pool that has not grown yet.
    let queued = after
        .iter()
        .any(|p| p.s.listen_queue.is_some_and(|q| q > 0));
    let dropped_any = placed
        .iter()
        .any(|p| p.s.accepts.zip(p.s.handled).is_some_and(|(a, h)| a > h));
    let all_slots = w.slots.is_some_and(|s| limit >= s);
    if !(all_slots || queued || dropped_any || stalled) {
        return None;
    }
    let at_level = placed[first].level.round();
    let mut evidence = Vec::new();
    let what = if nginx {
        "open connections"
    } else {
        "busy workers"
    };
    let slots = w
        .slots
        .filter(|s| *s == limit)
        .map(|s| format!(" (all {s} scoreboard slots)"))
        .unwrap_or_default();
    // A plain run has one level: the instant says when, not the level.
    let plain = rec.stages.is_empty();
    let at_s = plain.then(|| ((placed[first].s.t + off) * 10.0).round() / 10.0);
    if plain {
        evidence.push(format!(
            "{what} reached {limit}{slots} {:.1} s into the run and stayed there in {:.0}% of the {} later reads, with {max_level:.0} connections open",
            at_s.unwrap_or(0.0),
            full_share * 100.0,
            after.len()
        ));
    } else {
        evidence.push(format!(
            "{what} reached {limit}{slots} at {at_level:.0} {unit} and stayed there in {:.0}% of the {} later reads, while the load rose to {max_level:.0} {unit}",
            full_share * 100.0,
            after.len()
        ));
    }
    let at_level = (!plain).then_some(at_level);
    if after.iter().any(|p| !p.failed && p.s.idle.is_some()) {
        evidence.push("no idle worker was left".into());
    }
    let unread = after.iter().filter(|p| p.failed).count();
    if unread > 0 {
        evidence.push(format!(
            "{unread} of those reads of the status page timed out: it needs a free worker of the server itself, and none was free"
        ));
    }
    // Throughput: the stages past the limit against the one that reached it.
    let reached = rec
        .stages
        .iter()
        .find(|s| at_level.is_some_and(|a| s.level_to >= a))
        .map(|s| s.requests_per_sec);
    let last = rec.stages.last().map(|s| (s.requests_per_sec, s.p99_us));
    let served = match (
        after.first().and_then(|p| p.s.requests.map(|n| (n, p.s.t))),
        after.last().and_then(|p| p.s.requests.map(|n| (n, p.s.t))),
    ) {
        (Some((n0, t0)), Some((n1, t1))) if t1 - t0 >= 1.0 => {
            Some(n1.saturating_sub(n0) as f64 / (t1 - t0))
        }
        _ => None,
    };
    let one_stage = rec.stages.len() == 1;
    if let (Some(rps), Some((_, p99))) = (served, last) {
        evidence.push(format!(
            "from then on the server served {rps:.1} req/s by its own count while p99 reached {:.1} ms: requests queued for a worker",
            p99 as f64 / 1000.0
        ));
    } else if let (Some(r0), Some((r1, p99)), false) = (reached, last, one_stage) {
        evidence.push(format!(
            "throughput went from {r0:.1} to {r1:.1} req/s past it while p99 reached {:.1} ms: requests queued for a worker",
            p99 as f64 / 1000.0
        ));
    }
    let q = after.iter().filter_map(|p| p.s.listen_queue).max();
    if let Some(q) = q.filter(|q| *q > 0) {
        evidence.push(format!(
            "up to {q} requests waited in php-fpm's listen queue"
        ));
    }
    let reached_n = match (
        after.first().and_then(|p| p.s.max_children_reached),
        after.last().and_then(|p| p.s.max_children_reached),
    ) {
        (Some(a), Some(b)) if b > a => Some(b - a),
        _ => None,
    };
    if let Some(n) = reached_n {
        evidence.push(format!("php-fpm reached pm.max_children {n} more times"));
    }
    let dropped = match (
        placed.first().and_then(|p| p.s.accepts.zip(p.s.handled)),
        placed.last().and_then(|p| p.s.accepts.zip(p.s.handled)),
    ) {
        (Some((a0, h0)), Some((a1, h1))) => (a1 - a0.min(a1)).saturating_sub(h1 - h0.min(h1)),
        _ => 0,
    };
    if dropped > 0 {
        evidence.push(format!(
            "nginx accepted {dropped} connections it could not handle"
        ));
    }
    // Keep-alive: Apache counts K slots as busy.
    let (k, b): (u64, u64) = after
        .iter()
        .filter(|p| full(p) && !p.failed)
        .map(|p| (p.s.keepalive.unwrap_or(0), p.s.busy.unwrap_or(0)))
        .fold((0, 0), |a, x| (a.0 + x.0, a.1 + x.1));
    let k_share = if b > 0 { k as f64 / b as f64 } else { 0.0 };
    if w.server == "apache" && k_share >= KEEPALIVE_SHARE {
        evidence.push(format!(
            "{:.0}% of the busy workers were in keep-alive (scoreboard K): waiting for a client's next request, not serving",
            k_share * 100.0
        ));
        return Some(Diagnosis {
            resource: "keepalive".into(),
            directive: "KeepAliveTimeout, MaxKeepAliveRequests".into(),
            limit: Some(limit),
            at_level,
            evidence,
            at_s,
            advice: format!(
                "workers are held by idle keep-alive connections: lower KeepAliveTimeout (to 1-5 s) so they return to the pool sooner, or raise MaxRequestWorkers above {limit} if memory allows (redline size)"
            ),
            ..Default::default()
        });
    }
    let (directive, advice) = match w.server.as_str() {
        "apache" => (
            "MaxRequestWorkers (ServerLimit)",
            format!("the worker pool is exhausted at {limit}: raise MaxRequestWorkers (and ServerLimit) if memory allows (redline size says how far), or make each request shorter"),
        ),
        "php-fpm" => (
            "pm.max_children",
            format!("the php-fpm pool is exhausted at {limit} processes: raise pm.max_children if memory allows (redline size --watch php-fpm), or make the scripts faster"),
        ),
        "nginx" => (
            "worker_connections (× worker_processes)",
            format!("nginx holds at most {limit} connections: raise worker_connections (and the open-files limit, worker_rlimit_nofile)"),
        ),
        _ => (
            "server.max-connections",
            format!("lighttpd's connections are exhausted at {limit}: raise server.max-connections"),
        ),
    };
    Some(Diagnosis {
        resource: "worker_pool".into(),
        directive: directive.into(),
        limit: Some(limit),
        at_level,
        at_s,
        evidence,
        advice,
        ..Default::default()
    })
}

/// The errors that go with a server's limit: 5xx answers (and how many came
/// past the knee), connections reset or refused by the server.
pub(super) fn error_facts(rec: &crate::RunRecord) -> Vec<String> {
    let mut v = Vec::new();
    let total: u64 = rec.series.iter().map(|p| p.requests).sum();
    let fivexx: u64 = rec.series.iter().map(|p| p.status_classes[4]).sum();
    if fivexx > 0 {
        let past = rec.knee.as_ref().and_then(|k| {
            let from = rec.stages.iter().find(|s| s.level_to > k.level)?.start_s;
            Some(
                rec.series
                    .iter()
                    .filter(|p| p.t as f64 >= from.floor())
                    .map(|p| p.status_classes[4])
                    .sum::<u64>(),
            )
        });
        v.push(format!(
            "{fivexx} of {total} answers were 5xx{}",
            past.map(|n| format!(", {n} of them past the knee"))
                .unwrap_or_default()
        ));
    }
    let count = |k: crate::ErrorKind| error_count(rec, k);
    let (reset, refused) = (
        count(crate::ErrorKind::Reset),
        count(crate::ErrorKind::Refused),
    );
    if reset + refused > 0 {
        v.push(format!(
            "the server reset {reset} connections and refused {refused}"
        ));
    }
    v
}

/// Failed requests of one kind in the record.
fn error_count(rec: &crate::RunRecord, kind: crate::ErrorKind) -> u64 {
    rec.errors
        .iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.count)
        .sum()
}
