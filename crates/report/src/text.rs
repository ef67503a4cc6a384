//! The text sink, the default human report: ab's and wrk's fields, plus what
//! they hide (intended-time latency, errors by kind, client limits, stages
//! and their knee, the watched server).

use crate::{bytes, count, dur_us, requests};
use redline_stats::{stages, Hist, RunRecord};
use std::fmt::Write as _;

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "0%".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

const LAT_COLS: [(&str, f64); 7] = [
    ("p50", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
    ("max", -1.0),
];

fn latency_row(out: &mut String, label: &str, h: &Hist) {
    let _ = write!(
        out,
        "  {label:<15}{:>10}{:>10}{:>10}",
        dur_us(h.min() as f64),
        dur_us(h.mean()),
        dur_us(h.stdev())
    );
    for (_, p) in LAT_COLS {
        let v = if p < 0.0 { h.max() } else { h.percentile(p) };
        let _ = write!(out, "{:>10}", dur_us(v as f64));
    }
    out.push('\n');
}

fn phase_row(out: &mut String, label: &str, h: &Hist) {
    let ms = |us: f64| format!("{:.3}", us / 1000.0);
    let _ = writeln!(
        out,
        "  {label:<22}{:>10}{:>10}{:>10}{:>10}{:>10}",
        ms(h.min() as f64),
        ms(h.mean()),
        ms(h.stdev()),
        ms(h.percentile(50.0) as f64),
        ms(h.max() as f64)
    );
}

fn trim_num(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What the run learned about the origin's HTTP/3: the endpoint an
/// `--http3` run used and why, or the HTTP/3 offer (`Alt-Svc: h3`) of an
/// https origin measured over TCP, or why its `Alt-Svc` was ignored.
pub fn http3_line(rec: &RunRecord) -> Option<String> {
    if let Some(e) = &rec.server.http3_endpoint {
        return Some(format!("QUIC to {} ({})", e.address, e.why));
    }
    let a = rec.server.alt_svc.as_ref()?;
    if let Some(e) = &a.error {
        return Some(format!("the server's Alt-Svc was ignored: {e}"));
    }
    let h3 = a.h3.as_deref()?;
    let ma = a.max_age_s.map(|s| format!(", ma={s}")).unwrap_or_default();
    Some(format!(
        "server offers HTTP/3 at {h3} (Alt-Svc{ma}); measure it with --http3"
    ))
}

/// A staged run's plan in words: `10s:8,10s:16 (connections, steps)`.
pub fn stages_line(rec: &RunRecord) -> Option<String> {
    let p = rec.config.stages.as_ref()?;
    let per_s = if rec.journeys.is_some() {
        "journeys/s"
    } else {
        "req/s"
    };
    let list: Vec<String> = p
        .stages
        .iter()
        .map(|s| format!("{}s:{}", trim_num(s.duration_s), stages::fmt_level(s.level)))
        .collect();
    Some(format!(
        "{} ({}, {})",
        list.join(","),
        p.unit_name().replace("req/s", per_s),
        if p.step { "steps" } else { "linear ramps" }
    ))
}

/// The knee as one line: `redline: the server stops scaling at …`, or what
/// the run showed when it scaled all the way (None without stages).
pub fn knee_line(rec: &RunRecord) -> Option<String> {
    let plan = rec.config.stages.as_ref()?;
    let unit = plan.unit_name();
    let one = |l: f64| match unit {
        "connections" if (l - 1.0).abs() < 1e-9 => "connection",
        "streams" if (l - 1.0).abs() < 1e-9 => "stream",
        _ => unit,
    };
    Some(match &rec.knee {
        Some(k) => match (k.low, k.high) {
            (Some(lo), Some(hi)) => format!(
                "redline: the server stops scaling between {} and {} {} (best fit {}; {} gave out; {})",
                stages::fmt_level(lo),
                stages::fmt_level(hi),
                unit,
                stages::fmt_level(k.level),
                k.reason,
                k.evidence
            ),
            _ => format!(
                "redline: the server stops scaling at {} {} (next level: {} gave out; {})",
                stages::fmt_level(k.level),
                one(k.level),
                k.reason,
                k.evidence
            ),
        },
        None => {
            let pts = stages::by_level(plan, &rec.series, &rec.config.status_rule());
            match pts.last() {
                Some(p) if pts.len() >= 2 => format!(
                    "redline: no knee: throughput grew in proportion to the load up to {} {} \
                     ({:.1} req/s, p99 {}), the highest level run",
                    stages::fmt_level(p.level),
                    one(p.level),
                    p.requests_per_sec,
                    dur_us(p.p99_us as f64)
                ),
                _ => "redline: no knee: fewer than two load levels have data".into(),
            }
        }
    })
}

/// The per-stage table and the knee line of a `--stages` run.
fn stage_table(o: &mut String, rec: &RunRecord) {
    let Some(plan) = &rec.config.stages else {
        return;
    };
    let _ = writeln!(
        o,
        "{:<8}{:>14}{:>14}{:>11}{:>10}{:>10}{:>10}{:>10}{:>8}",
        if plan.step { "Step" } else { "Stage" },
        "time (s)",
        match plan.unit.as_str() {
            "rps" if rec.journeys.is_some() => "journeys/s",
            "rps" => "target req/s",
            "streams" => "streams",
            _ => "connections",
        },
        "req/s",
        "p50",
        "p95",
        "p99",
        "MB/s",
        "errors"
    );
    for (i, s) in rec.stages.iter().enumerate() {
        let level = if plan.step || s.level_from == s.level_to {
            stages::fmt_level(s.level_to)
        } else {
            format!(
                "{}→{}",
                stages::fmt_level(s.level_from),
                stages::fmt_level(s.level_to)
            )
        };
        let lat = |v: u64| {
            if s.seconds == 0 || s.requests == 0 {
                "-".to_string()
            } else {
                dur_us(v as f64)
            }
        };
        let _ = writeln!(
            o,
            "  {:<6}{:>14}{:>14}{:>11.1}{:>10}{:>10}{:>10}{:>10.2}{:>8}",
            i + 1,
            format!("{}–{}", trim_num(s.start_s), trim_num(s.end_s)),
            level,
            s.requests_per_sec,
            lat(s.p50_us),
            lat(s.p95_us),
            lat(s.p99_us),
            s.bytes_per_sec / 1e6,
            count(s.errors + s.non_2xx)
        );
    }
    let _ = writeln!(
        o,
        "  (whole seconds inside each stage; errors include statuses outside {})",
        rec.config.status_rule()
    );
    if let Some(l) = knee_line(rec) {
        let _ = writeln!(o, "{l}");
    }
    o.push('\n');
}

/// The human report.
pub fn text(rec: &RunRecord) -> String {
    // Labels, server headers, error messages and host names come from outside.
    crate::escape::clean_text(&text_unescaped(rec)).into_owned()
}

fn text_unescaped(rec: &RunRecord) -> String {
    let mut o = String::new();
    let c = &rec.counters;
    let cfg = &rec.config;
    if let Some(w) = rec.warnings.iter().find(|w| w.code == "aborted") {
        let _ = writeln!(
            o,
            "*** {} ***\n*** the run was stopped early; the numbers cover only what ran ***\n",
            w.message
        );
    } else if rec.interrupted {
        o.push_str(
            "*** INTERRUPTED: the run was stopped early; the numbers cover only what ran ***\n\n",
        );
    }
    // The server went away mid-run: said first, it explains every error after it.
    if let Some(w) = rec.warnings.iter().find(|w| w.code == "server_gone") {
        let _ = writeln!(o, "*** {} ***\n", w.message);
    }
    let _ = writeln!(o, "Target:           {} {}", cfg.method, cfg.url);
    if cfg.insecure {
        o.push_str("TLS:              certificate verification OFF (--insecure)\n");
    }
    let _ = writeln!(
        o,
        "Server:           {} ({})",
        rec.server
            .software
            .as_deref()
            .unwrap_or("(no Server header)"),
        rec.server.address
    );
    if let Some(len) = rec.server.document_length {
        let _ = writeln!(o, "Document length:  {} bytes", count(len));
    }
    if let Some(line) = http3_line(rec) {
        let _ = writeln!(o, "HTTP/3:           {line}");
    }
    let mut conn_mode = if cfg.keepalive {
        "keep-alive".to_string()
    } else {
        "new connection per request".to_string()
    };
    if let (true, Some(n)) = (cfg.keepalive, cfg.requests_per_conn) {
        let _ = write!(conn_mode, ", {n} requests per connection");
    }
    if let Some(n) = cfg.streams {
        let _ = write!(
            conn_mode,
            ", {n} stream{} per connection",
            if n == 1 { "" } else { "s" }
        );
    }
    let protocol = match &cfg.negotiated {
        Some(n) => n.clone(),
        None => format!("HTTP/{}", cfg.http_version),
    };
    // Open-loop sessions: the rate is of journeys (arrivals), not requests.
    let per_s = if rec.journeys.is_some() {
        "journeys/s"
    } else {
        "req/s"
    };
    let _ = writeln!(
        o,
        "Load:             {} ({}, {protocol}, {} thread{})",
        cfg.load.describe().replace("req/s", per_s),
        conn_mode,
        cfg.threads,
        if cfg.threads == 1 { "" } else { "s" }
    );
    if let Some(l) = stages_line(rec) {
        let _ = writeln!(o, "Stages:           {l}");
    }
    if rec.merged_runs > 1 {
        let _ = writeln!(o, "Merged runs:      {}", rec.merged_runs);
    }
    let _ = writeln!(o, "Started:          {}", rec.started_at);
    let _ = writeln!(o, "Duration:         {:.3} s", rec.duration_s);
    o.push('\n');

    let rule = cfg.status_rule();
    let refused = rec.refused_status();
    let _ = writeln!(
        o,
        "Requests:         {} completed, {} failed, {} with a status outside {}{}",
        count(c.completed),
        count(c.failed),
        count(refused),
        rule,
        if rule.is_default() {
            " (--expect-status)"
        } else {
            ""
        }
    );
    let ok = rec.succeeded();
    let _ = writeln!(
        o,
        "Succeeded:        {} of {} scheduled ({})",
        count(ok),
        count(c.scheduled),
        pct(ok, c.scheduled)
    );
    if c.in_flight_at_end > 0 || c.not_sent > 0 {
        let _ = writeln!(
            o,
            "Unfinished:       {} in flight at the end, {} never sent",
            count(c.in_flight_at_end),
            count(c.not_sent)
        );
    }
    let _ = writeln!(o, "Requests/sec:     {:.2}", rec.requests_per_sec);
    if let (redline_stats::LoadModel::Open { rate, .. }, Some(j)) = (&cfg.load, &rec.journeys) {
        let achieved = j.arrived as f64 / rec.duration_s.max(1e-9);
        let _ = writeln!(
            o,
            "Arrival rate:     {achieved:.2} journeys/s of {} journeys/s target ({:+.2}%)",
            target_rate(*rate),
            (achieved / rate - 1.0) * 100.0
        );
    } else if let redline_stats::LoadModel::Open { rate, .. } = &cfg.load {
        let _ = writeln!(
            o,
            "Send rate:        {:.2} req/s achieved of {} req/s target ({:+.2}%)",
            rec.sent_per_sec,
            target_rate(*rate),
            (rec.sent_per_sec / rate - 1.0) * 100.0
        );
    }
    let _ = writeln!(
        o,
        "Transfer:         {}/s received ({} total, {} of bodies), {} sent",
        bytes(rec.bytes_per_sec),
        bytes(c.bytes_read as f64),
        bytes(c.body_bytes as f64),
        bytes(c.bytes_written as f64)
    );
    let _ = writeln!(
        o,
        "Connections:      {} opened, at most {} open at once",
        count(c.connections_opened),
        count(c.peak_connections)
    );
    if let Some(max) = cfg.follow_redirects {
        let _ = writeln!(
            o,
            "Redirects:        {} followed (-L, at most {max} per request)",
            count(c.redirects)
        );
    }
    if c.retried > 0 {
        let _ = writeln!(
            o,
            "Retried after GOAWAY/REFUSED_STREAM: {} (not processed by the server, sent again)",
            count(c.retried)
        );
    }
    if rec.config.load.is_open() {
        let _ = writeln!(
            o,
            "Waited for conn:  {} requests found no free connection at their send time",
            count(c.waited_for_connection)
        );
    }
    o.push('\n');

    let _ = write!(
        o,
        "Latency{:<10}{:>10}{:>10}{:>10}",
        "", "min", "mean", "stdev"
    );
    for (name, _) in LAT_COLS {
        let _ = write!(o, "{name:>10}");
    }
    o.push('\n');
    if rec.latency.is_empty() {
        o.push_str("  (no completed responses)\n");
    } else {
        latency_row(&mut o, "total", &rec.latency);
        if rec.config.load.is_open() {
            latency_row(&mut o, "service time", &rec.service_time);
            latency_row(&mut o, "scheduler lag", &rec.scheduler_lag);
            o.push_str("  (total counts from the intended send time, so queueing and stalls show;\n   service time from the actual send; lag is intended → released by the client)\n");
            if rec.client.pacing_window_us > 0 {
                let how = if rec.client.answers_stamped {
                    ";\n   answers waited for that wake-up, timed by the kernel's arrival stamps"
                } else {
                    ""
                };
                let _ = writeln!(
                    o,
                    "  (sends due within the same {} µs went out together{how})",
                    rec.client.pacing_window_us
                );
            }
        }
    }
    o.push('\n');

    if !rec.latency.is_empty() {
        let _ = writeln!(
            o,
            "Connection times (ms)         min      mean        sd    median       max"
        );
        if !rec.connect.is_empty() {
            // QUIC's handshake is its connect and its TLS at once.
            let label = if rec.counters.quic_handshakes > 0 {
                format!("QUIC handshake ({} new)", count(rec.connect.count()))
            } else {
                format!("Connect ({} new)", count(rec.connect.count()))
            };
            phase_row(&mut o, &label, &rec.connect);
        }
        if !rec.tls.is_empty() {
            phase_row(
                &mut o,
                &format!("TLS handshake ({})", count(rec.tls.count())),
                &rec.tls,
            );
        }
        phase_row(&mut o, "Waiting (TTFB)", &rec.waiting);
        phase_row(&mut o, "Transfer", &rec.transfer);
        phase_row(&mut o, "Total", &rec.latency);
        if rec.counters.quic_handshakes > 0 {
            let c = &rec.counters;
            let _ = writeln!(
                o,
                "  ({} QUIC handshakes, {} resumed a TLS session, {} sent 0-RTT early data, {} accepted)",
                count(c.quic_handshakes),
                count(c.quic_resumed),
                count(c.quic_0rtt),
                count(c.quic_0rtt_accepted)
            );
        }
        o.push('\n');
    }

    stage_table(&mut o, rec);

    if !rec.status_codes.is_empty() {
        let codes: Vec<String> = rec
            .status_codes
            .iter()
            .map(|(k, v)| format!("{k}: {}", count(*v)))
            .collect();
        let _ = writeln!(o, "Status codes:     {}", codes.join(", "));
    }
    if !rec.errors.is_empty() {
        o.push_str("Errors:\n");
        for e in &rec.errors {
            let _ = writeln!(
                o,
                "  {:<28}{} ({})",
                e.kind.to_string(),
                e.message,
                count(e.count)
            );
        }
    }
    if rec.replay.is_some() {
        o.push('\n');
        o.push_str(&crate::replay::text(rec));
        o.push('\n');
    } else if !rec.requests.is_empty() {
        o.push('\n');
        o.push_str(&requests::text(rec));
    }
    let cl = &rec.client;
    let _ = writeln!(
        o,
        "Client CPU:       {:.2} s user, {:.2} s sys; {:.0}% of {} thread{} (busiest {:.0}%)",
        cl.user_s,
        cl.sys_s,
        cl.cpu_share * 100.0,
        cl.threads,
        if cl.threads == 1 { "" } else { "s" },
        cl.busiest_thread_share * 100.0
    );
    if cl.steal_s >= 0.001 {
        let _ = writeln!(
            o,
            "Host steal:       {:.0} ms of CPU time taken by the hypervisor during the run",
            cl.steal_s * 1000.0
        );
    }
    if let Some(w) = &rec.server_watch {
        o.push('\n');
        o.push_str(&redline_watch::render_text(w));
        // The server per stage (the Italian article's question: where did
        // memory go as load grew), per host, from the record's `stages[].server`.
        let names: Vec<String> = rec
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| s.name(i))
            .collect();
        for (k, h) in w.hosts.iter().enumerate() {
            let rows: Vec<(&str, f64, f64, &redline_stats::watch::WatchSummary)> = rec
                .stages
                .iter()
                .zip(&names)
                .filter_map(|(s, n)| {
                    s.server
                        .get(k)
                        .map(|x| (n.as_str(), s.start_s, s.end_s, &x.summary))
                })
                .collect();
            let what = format!("{} on {}", h.targets.join(", "), h.host);
            o.push_str(&redline_watch::render_windows(&what, &rows));
        }
    }
    o.push_str(&redline_watch::status::render_text(rec));
    if !rec.warnings.is_empty() {
        o.push('\n');
        if rec.client_limited {
            o.push_str(
                "WARNING: the client may have been the limit; treat these numbers with care.\n",
            );
        }
        for w in &rec.warnings {
            let _ = writeln!(o, "  ! [{}] {}", w.code, w.message);
        }
    }
    o
}

/// A target rate as the user gave it (`2000`) or, when it was computed (a
/// replay's mean rate), to two decimals: never a float's full expansion.
fn target_rate(rate: f64) -> String {
    if rate.fract() == 0.0 && rate.abs() < 1e15 {
        format!("{rate:.0}")
    } else {
        format!("{rate:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A knee the data cannot pin is said as a range of whole levels.
    #[test]
    fn knee_line_says_a_range() {
        use redline_stats::stages::{Knee, StagePlan, StageSpec};
        let mut a = crate::compare::tests::synth(2000, 1000, 1, 4);
        a.config.stages = Some(StagePlan {
            unit: "connections".into(),
            step: false,
            stages: vec![StageSpec {
                duration_s: 70.0,
                level: 70.0,
            }],
        });
        a.knee = Some(Knee {
            level: 10.0,
            unit: "connections".into(),
            reason: "throughput".into(),
            evidence: "fit".into(),
            low: Some(9.0),
            high: Some(11.0),
        });
        let l = knee_line(&a).unwrap();
        assert!(
            l.starts_with("redline: the server stops scaling between 9 and 11 connections"),
            "{l}"
        );
        a.knee.as_mut().unwrap().low = None;
        a.knee.as_mut().unwrap().high = None;
        let l = knee_line(&a).unwrap();
        assert!(
            l.starts_with("redline: the server stops scaling at 10 connections"),
            "{l}"
        );
    }

    /// A server that went away is said first, above the target line.
    #[test]
    fn text_names_a_server_that_went_away_at_the_top() {
        let mut a = crate::compare::tests::synth(2000, 1000, 1, 4);
        let msg = "the server went away at 3.0 s: 30,670 connects refused after it";
        a.warn("server_gone", msg.into());
        let t = text(&a);
        let said = t.find(msg).expect("said");
        assert!(said < t.find("Target:").unwrap(), "{t}");
        let h = crate::html::report(&[("run", &a)]);
        assert!(h.contains(msg), "in the HTML banner");
    }

    /// Each watched host gets its per-stage block, from `stages[].server`.
    #[test]
    fn text_has_server_per_stage_for_every_host() {
        use redline_stats::stages::{StagePlan, StageSpec};
        use redline_stats::watch::{HostWatch, ServerWatch, WatchSample};
        let mut a = crate::compare::tests::synth(2000, 1000, 1, 4);
        a.started_at = "2026-11-22T10:00:00.000Z".into();
        a.config.stages = Some(StagePlan {
            unit: "connections".into(),
            step: true,
            stages: vec![
                StageSpec {
                    duration_s: 2.0,
                    level: 1.0,
                },
                StageSpec {
                    duration_s: 2.0,
                    level: 3.0,
                },
            ],
        });
        let host = |name: &str, procs: u32| {
            let mut h = HostWatch {
                host: name.into(),
                targets: vec!["nginx".into()],
                started_at: a.started_at.clone(),
                samples: (0..=8)
                    .map(|k| WatchSample {
                        t: k as f64 * 0.5,
                        processes: if k < 4 { procs } else { procs + 2 },
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            };
            h.summarize();
            h
        };
        a.server_watch = Some(ServerWatch {
            targets: vec!["nginx".into()],
            hosts: vec![host("web1", 2), host("web2", 5)],
        });
        redline_stats::stages::analyze(&mut a);
        let t = text(&a);
        let block = |h: &str| {
            let at = t
                .find(&format!("Server per stage (nginx on {h})"))
                .unwrap_or_else(|| panic!("{h}: {t}"));
            t[at..].lines().take(5).collect::<Vec<_>>().join("\n")
        };
        // Stage 1 [0, 2]: samples 0..=2 s, the one at 2 s with two more.
        let b = block("web1");
        assert!(
            b.contains("stage 1 @1") && b.contains("processes 4/2.4"),
            "{b}"
        );
        assert!(
            b.contains("stage 2 @3") && b.contains("processes 4/4.0"),
            "{b}"
        );
        let b = block("web2");
        assert!(
            b.contains("processes 7/5.4") && b.contains("processes 7/7.0"),
            "{b}"
        );
    }

    /// HTTP/2 requests sent again after a refusal get a line (text) and a
    /// row (HTML) when there are any, and nothing when there are none.
    #[test]
    fn retries_after_a_refusal_are_said_only_when_there_are_some() {
        let mut a = crate::compare::tests::synth(2000, 1000, 1, 4);
        let line = "Retried after GOAWAY/REFUSED_STREAM";
        assert!(!text(&a).contains(line));
        a.counters.retried = 1234;
        assert!(text(&a).contains(&format!("{line}: 1,234 (not processed")));
        let page = crate::html::report(&[("a", &a)]);
        assert!(page.contains("Retried (GOAWAY/REFUSED_STREAM)"));
    }

    #[test]
    fn formats() {
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(dur_us(850.0), "850µs");
        assert_eq!(dur_us(12_340.0), "12.34ms");
        assert_eq!(dur_us(1_500_000.0), "1.50s");
        assert_eq!(bytes(440.0), "440 B");
        assert_eq!(target_rate(2000.0), "2000");
        assert_eq!(target_rate(16.0 / 3.0), "5.33");
    }
}
