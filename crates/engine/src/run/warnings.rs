//! The warnings a finished run gets (`add_warnings`): whether the client,
//! not the server, set the pace (connections short, rate short, scheduler
//! lag, busy connections), slow connects explained by the host's TCP
//! counters, CPU time stolen by the hypervisor, and "the server went away".

use crate::plan::{Load, Plan};
use redline_stats::RunRecord;

/// The share of the run one worker thread may wait for a CPU while ready to
/// run before the client is called starved (`client_starved`).
pub const STARVED_SHARE: f64 = 0.25;

pub(super) fn add_warnings(
    rec: &mut RunRecord,
    plan: &Plan,
    conns_wanted: u64,
    peak_open: u64,
    fd_note: Option<String>,
) {
    let mut limited = false;
    if let Some(n) = fd_note {
        rec.warn("fd_limit", n);
        limited = true;
    }
    // Requests that never got an answer: thresholds count them as errors and
    // as slower than every answer (report::thresholds), so say how many.
    let c = rec.counters;
    let unanswered = c.in_flight_at_end.saturating_add(c.not_sent);
    if unanswered > 0 && !rec.interrupted {
        rec.warn(
            "unanswered",
            format!(
                "{unanswered} of the {} scheduled requests were never answered ({} in flight at the \
                 end, {} never sent): thresholds count them as errors and as slower than every answer",
                c.scheduled, c.in_flight_at_end, c.not_sent
            ),
        );
    }
    // HTTP/2 and HTTP/3: requests that waited for a stream the server never opened.
    let no_stream: u64 = rec
        .errors
        .iter()
        .filter(|e| e.kind == redline_stats::ErrorKind::NoStream)
        .map(|e| e.count)
        .sum();
    if no_stream > 0 {
        let msg = if rec.config.http_version == "3" {
            format!(
                "{no_stream} requests waited past --timeout for an HTTP/3 stream the server never \
                 allowed: its QUIC stream limit (initial_max_streams_bidi, then MAX_STREAMS) is too \
                 low; raise it on the server (nginx: http3_max_concurrent_streams) or use fewer --streams"
            )
        } else {
            format!(
                "{no_stream} requests waited past --timeout for an HTTP/2 stream the server never \
                 opened: it allows too few concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS); \
                 raise it on the server (nginx: http2_max_concurrent_streams) or use fewer --streams"
            )
        };
        rec.warn("no_stream", msg);
    }
    if rec.client.busiest_thread_share > 0.9 && rec.duration_s >= 0.5 {
        rec.warn(
            "client_cpu",
            format!(
                "the client used {:.0}% of a CPU in its busiest thread: redline itself may have been the limit; \
                 give it more threads (-t) or cores, or compare with a lighter load",
                rec.client.busiest_thread_share * 100.0
            ),
        );
        limited = true;
    }
    // Starved: a worker thread that waited for a CPU a quarter of the run
    // while ready to run sent late and read late, whatever its own CPU use
    // says (a busy process on its CPUs, or a server sharing them).
    if rec.client.most_waited_share >= STARVED_SHARE && rec.duration_s >= 1.0 {
        rec.warn(
            "client_starved",
            format!(
                "a worker thread of redline waited for a CPU {:.0}% of the run while ready to run \
                 (run-queue delay {:.2} s over all threads, {} involuntary context switches): other \
                 processes on its CPUs held it back, so the figures are a lower bound; run redline \
                 on CPUs of its own (taskset) or another machine",
                rec.client.most_waited_share * 100.0,
                rec.client.run_delay_s,
                rec.client.involuntary_switches
            ),
        );
        limited = true;
    }
    // The host took a noticeable share of the client's CPUs: every figure
    // of the run is noisy, whatever the client's own load.
    let capacity = rec.duration_s * rec.environment.cpus.max(1) as f64;
    if rec.client.steal_s > 0.02 * capacity && rec.duration_s >= 0.5 {
        rec.warn(
            "host_steal",
            format!(
                "the host took {:.1}% of this virtual machine's CPU time during the run ({:.0} ms \
                 of steal time): latency and throughput are noisy; run again, or on a dedicated machine",
                rec.client.steal_s / capacity * 100.0,
                rec.client.steal_s * 1000.0
            ),
        );
    }
    // Connects that waited for a second SYN: the first was dropped, most
    // often because the server's accept queue (listen backlog) was full, and
    // the kernel tries again after 1 s, then 3 s, 7 s... Those seconds are in
    // the connect times and the latencies of the requests that waited.
    // Only when answered connects show the delay: the host-wide counter also
    // counts SYNs other programs sent again, and a server that went away
    // refuses connects at once (no SYN waits).
    let gone = server_gone(rec);
    if let Some(g) = &gone {
        rec.warn("server_gone", g.clone());
    }
    if rec.client.syn_retransmits > 0
        && rec.counters.connections_opened > 0
        && rec.connect.max() >= SYN_DELAY_US
    {
        let max = rec.connect.max() as f64 / 1e6;
        let here = if rec.client.listen_overflows > 0 {
            format!(
                "; a listening socket on this host overflowed its accept queue {} time{}",
                rec.client.listen_overflows,
                if rec.client.listen_overflows == 1 {
                    ""
                } else {
                    "s"
                }
            )
        } else {
            String::new()
        };
        rec.warn(
            "syn_retransmits",
            format!(
                "{} connection attempt{} (SYN{}) went unanswered and {} sent again after 1 s \
                 or more (slowest connect {max:.2} s){here}: the server's listen queue was \
                 probably full. Raise its backlog (nginx: listen ... backlog=4096; Apache: \
                 ListenBacklog; lighttpd: server.listen-backlog) and, on the server, \
                 net.core.somaxconn and net.ipv4.tcp_max_syn_backlog; or open connections \
                 more gradually (--stages)",
                rec.client.syn_retransmits,
                if rec.client.syn_retransmits == 1 {
                    ""
                } else {
                    "s"
                },
                if rec.client.syn_retransmits == 1 {
                    ""
                } else {
                    "s"
                },
                if rec.client.syn_retransmits == 1 {
                    "was"
                } else {
                    "were"
                },
            ),
        );
    }
    let client_errors: u64 = rec
        .errors
        .iter()
        .filter(|e| e.kind.is_client_limit())
        .map(|e| e.count)
        .sum();
    if client_errors > 0 {
        rec.warn(
            "client_resources",
            format!(
                "{client_errors} requests failed for lack of client resources (file descriptors or local ports); \
                 at most {peak_open} connections were open at once"
            ),
        );
        limited = true;
    }
    match &plan.load {
        Load::Closed { .. } => {
            // With --stages: the most the profile asked for before its last
            // quarter second (a ramp reaches its top only at its very end).
            let conns_wanted = match &plan.staged {
                Some(s) => {
                    let p = &s.profile;
                    let whole = p.max_level_until(p.end() - 0.25).round() as u64;
                    let mine = plan
                        .segment
                        .as_ref()
                        .map_or(whole, |s| s.segment.scale_int(whole));
                    // Over HTTP/2 the level counts streams, `--streams` per connection.
                    let mine = match plan.protocol() == crate::plan::Protocol::Http2 {
                        true => crate::plan::h2_connections(mine, plan.streams),
                        false => mine,
                    };
                    mine.min(conns_wanted)
                }
                None => conns_wanted,
            };
            if peak_open < conns_wanted && !rec.interrupted {
                rec.warn(
                    "connections_short",
                    format!(
                        "only {peak_open} of the {conns_wanted} connections asked for were open at once"
                    ),
                );
                limited = true;
            }
        }
        Load::Open {
            rate,
            duration,
            requests,
            ..
        } => {
            let _ = (duration, requests);
            if rec.send_window_s() > 0.0 && !rec.interrupted {
                let achieved = rec.sent_per_sec;
                // Every connection was open and busy with the server while
                // requests waited for one: the server's concurrency set the
                // pace, not the client.
                let waited = rec.counters.waited_for_connection;
                let cap = plan.config.load.connections();
                let server_held = waited > 0 && rec.counters.peak_connections >= cap;
                if achieved < rate * 0.99 && server_held {
                    rec.warn(
                        "rate_short",
                        format!(
                            "sent {achieved:.1} req/s, {:.1}% under the target of {rate} req/s: the \
                             server held all {cap} connections ({waited} requests waited for a free connection): \
                             it answered slower than the rate needs; raise -c or look at the server's \
                             worker limit",
                            (1.0 - achieved / rate) * 100.0,
                        ),
                    );
                } else if achieved < rate * 0.99 {
                    rec.warn(
                        "rate_short",
                        format!(
                            "sent {achieved:.1} req/s, {:.1}% under the target of {rate} req/s{}",
                            (1.0 - achieved / rate) * 100.0,
                            if waited > 0 {
                                format!(
                                    "; {waited} requests waited for a connection being opened \
                                     (raise -c?)"
                                )
                            } else {
                                String::new()
                            }
                        ),
                    );
                    limited = true;
                }
            }
            // Sends are coalesced by design: the drivers' sleepers batch sends
            // closer than a window apart (`ioloop::pacing`). Lag up to twice
            // that window is the design, not the client falling behind.
            let interval_us = plan.threads as f64 / rate * 1e6;
            let interval = std::time::Duration::from_secs_f64((interval_us / 1e6).clamp(0.0, 1e6));
            let window_us = crate::ioloop::pacing(plan, Some(interval))
                .window
                .as_micros() as f64;
            let allowed_us = if interval_us < window_us {
                interval_us.max(2.0 * window_us)
            } else {
                interval_us
            };
            let lag99 = rec.scheduler_lag.percentile(99.0) as f64;
            if rec.scheduler_lag.count() > 0 && lag99 > allowed_us {
                rec.warn(
                    "scheduler_lag",
                    format!(
                        "scheduler lag p99 {} is above the send interval {}: the client released \
                         requests later than planned (latency still counts from the planned time){}",
                        fmt_us(lag99),
                        fmt_us(allowed_us),
                        steal_note(rec)
                    ),
                );
                limited = true;
            }
            // Every connection busy at a send time: the server slowed down
            // and -c is the cap. The request waits (its latency counts from
            // the planned time); said, but not the client's limit.
            // (Only once every connection was open: a request that waits for
            // a connection being opened under the cap is not that.)
            let waited = rec.counters.waited_for_connection;
            let cap = plan.config.load.connections();
            if waited * 100 > rec.counters.sent.max(1) && rec.counters.peak_connections >= cap {
                rec.warn(
                    "connections_busy",
                    format!(
                        "{waited} requests found no idle connection at their send time, all {cap} \
                         being busy, and waited for one: the server slowed down, or raise -c"
                    ),
                );
            }
        }
    }
    rec.client_limited |= limited;
}

/// A connect slower than this (µs) waited for a second SYN (the kernel's
/// first retransmit comes after 1 s).
const SYN_DELAY_US: u64 = 1_000_000;

/// "The server went away at 3.0 s: …" when every second from an instant on
/// had errors and no answer, after answers before it, and most errors were
/// refused or reset connections (the server stopped listening or died).
/// The instant is the end of the last second with an answer.
fn server_gone(rec: &RunRecord) -> Option<String> {
    let last = rec.series.iter().rposition(|p| p.requests > 0)?;
    let after = &rec.series[last + 1..];
    let errors_after: u64 = after.iter().map(|p| p.errors).sum();
    // A second or more of failures after it: a run ending as answers stop is not that.
    if after.is_empty() || errors_after == 0 {
        return None;
    }
    let (mut refused, mut reset) = (0u64, 0u64);
    for e in &rec.errors {
        match e.kind {
            redline_stats::ErrorKind::Refused => refused += e.count,
            redline_stats::ErrorKind::Reset => reset += e.count,
            _ => {}
        }
    }
    // Most of what failed after the instant was refused or reset.
    if (refused + reset) * 2 < errors_after {
        return None;
    }
    let at = rec.series[last].t as f64 + 1.0;
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let what = match (refused, reset) {
        (0, _) => format!(
            "{} connection{} reset after it",
            group(reset),
            plural(reset)
        ),
        (_, 0) => format!(
            "{} connect{} refused after it",
            group(refused),
            plural(refused)
        ),
        _ => format!(
            "{} connect{} refused after it (and {} connection{} reset)",
            group(refused),
            plural(refused),
            group(reset),
            plural(reset)
        ),
    };
    Some(format!(
        "the server went away at {at:.1} s: {what}, no answer in the {} s that followed; it \
         stopped listening, crashed or was stopped: see its error log",
        after.len()
    ))
}

/// `30670` as `30,670`.
fn group(n: u64) -> String {
    let s = n.to_string();
    let mut o = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            o.push(',');
        }
        o.push(ch);
    }
    o
}

/// Said with the client-limit warnings when the hypervisor took CPU time
/// from the client's CPUs during the run (the client cannot see such
/// pauses in its own CPU figures).
fn steal_note(rec: &RunRecord) -> String {
    let steal = rec.client.steal_s;
    if steal < 0.005 {
        return String::new();
    }
    format!(
        "; the virtual machine lost {:.0} ms of CPU time to its host during the run (steal \
         time), which stalls the client whatever its own load",
        steal * 1000.0
    )
}

/// CPU time stolen by the hypervisor so far, summed over the CPUs this
/// process may run on (`/proc/stat`, the 8th field of each `cpuN` line, in
/// clock ticks); `None` where that is not available.
pub(super) fn steal_seconds() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t filled in by sched_getaffinity; sysconf is pure.
        let (set, tck) = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return None;
            }
            (set, libc::sysconf(libc::_SC_CLK_TCK))
        };
        if tck <= 0 {
            return None;
        }
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let ticks = steal_ticks(&stat, |n| {
            // SAFETY: CPU_ISSET reads the set we own; n is bounds-checked.
            n < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(n, &set) }
        });
        Some(ticks as f64 / tck as f64)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// This host's TCP counters that explain slow connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TcpCounters {
    pub(super) syn_retransmits: u64,
    pub(super) listen_overflows: u64,
}

/// Reads [`TcpCounters`] from `/proc/net/netstat`; `None` where unreadable.
pub(super) fn tcp_counters() -> Option<TcpCounters> {
    parse_netstat(&std::fs::read_to_string("/proc/net/netstat").ok()?)
}

/// `/proc/net/netstat` holds pairs of lines, names then values, each
/// starting with the group (`TcpExt:`).
pub(super) fn parse_netstat(text: &str) -> Option<TcpCounters> {
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let names = lines.next()?;
    let values = lines.next()?;
    let mut c = TcpCounters {
        syn_retransmits: 0,
        listen_overflows: 0,
    };
    let mut found = false;
    for (n, v) in names
        .split_ascii_whitespace()
        .zip(values.split_ascii_whitespace())
        .skip(1)
    {
        let v = v.parse::<u64>().ok()?;
        match n {
            "TCPSynRetrans" => {
                c.syn_retransmits = v;
                found = true;
            }
            "ListenOverflows" => c.listen_overflows = v,
            _ => {}
        }
    }
    found.then_some(c)
}

/// The steal ticks (the 8th number of a `cpuN` line) of `/proc/stat`,
/// summed over the CPUs `allowed` says yes to.
pub(super) fn steal_ticks(stat: &str, allowed: impl Fn(usize) -> bool) -> u64 {
    let mut ticks = 0u64;
    for line in stat.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        let mut f = rest.split_ascii_whitespace();
        let Some(Ok(n)) = f.next().map(str::parse::<usize>) else {
            continue; // the "cpu" total line
        };
        if allowed(n) {
            ticks += f.nth(7).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    ticks
}

fn fmt_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else {
        format!("{us:.0}µs")
    }
}
