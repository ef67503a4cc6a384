//! Reports are sinks: they only read a [`RunRecord`] and render it.
//!
//! `text` is the default human report (ab's and wrk's fields, plus what they
//! hide: intended-time latency, errors by kind, client limits); `json` is the
//! run record itself, versioned and schema-checked.
#![deny(missing_docs)]

pub mod compare;
pub mod csv;
pub mod html;
pub mod thresholds;

use redline_stats::{Hist, RunRecord};
use std::fmt::Write as _;

/// The run record as pretty JSON (the `--output json` document).
pub fn json(rec: &RunRecord) -> String {
    let mut s = serde_json::to_string_pretty(rec).unwrap_or_else(|e| {
        format!("{{\"format\":\"redline.run\",\"error\":\"cannot serialize: {e}\"}}")
    });
    s.push('\n');
    s
}

/// Writes the run record as pretty JSON straight to `w` (no intermediate string,
/// so a long run's report costs no extra peak memory).
pub fn write_json(rec: &RunRecord, w: &mut impl std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, rec).map_err(std::io::Error::other)?;
    w.write_all(b"\n")
}

/// Formats microseconds for people: `850µs`, `12.34ms`, `1.50s`.
pub fn dur_us(us: f64) -> String {
    if !us.is_finite() {
        return "-".into();
    }
    if us < 1000.0 {
        format!("{us:.0}µs")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else {
        format!("{:.2}s", us / 1_000_000.0)
    }
}

/// Formats a byte count: `440 B`, `12.3 KiB`, `4.56 MiB`.
pub fn bytes(n: f64) -> String {
    const K: f64 = 1024.0;
    if n < K {
        format!("{n:.0} B")
    } else if n < K * K {
        format!("{:.1} KiB", n / K)
    } else if n < K * K * K {
        format!("{:.2} MiB", n / K / K)
    } else {
        format!("{:.2} GiB", n / K / K / K)
    }
}

/// Groups thousands: `1234567` → `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

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

/// The human report.
pub fn text(rec: &RunRecord) -> String {
    let mut o = String::new();
    let c = &rec.counters;
    let cfg = &rec.config;
    if rec.interrupted {
        o.push_str(
            "*** INTERRUPTED: the run was stopped early; the numbers cover only what ran ***\n\n",
        );
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
    let _ = writeln!(
        o,
        "Load:             {} ({}, HTTP/{}, {} thread{})",
        cfg.load.describe(),
        conn_mode,
        cfg.http_version,
        cfg.threads,
        if cfg.threads == 1 { "" } else { "s" }
    );
    if rec.merged_runs > 1 {
        let _ = writeln!(o, "Merged runs:      {}", rec.merged_runs);
    }
    let _ = writeln!(o, "Started:          {}", rec.started_at);
    let _ = writeln!(o, "Duration:         {:.3} s", rec.duration_s);
    o.push('\n');

    let _ = writeln!(
        o,
        "Requests:         {} completed, {} failed, {} non-2xx",
        count(c.completed),
        count(c.failed),
        count(c.non_2xx)
    );
    let ok = c.completed.saturating_sub(c.non_2xx);
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
    if let redline_stats::LoadModel::Open { rate, .. } = &cfg.load {
        let _ = writeln!(
            o,
            "Send rate:        {:.2} req/s achieved of {rate} req/s target ({:+.2}%)",
            rec.sent_per_sec,
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
            o.push_str("  (total counts from the intended send time, so queueing and stalls show;\n   service time from the actual send; lag is intended → actual send)\n");
        }
    }
    o.push('\n');

    if !rec.latency.is_empty() {
        let _ = writeln!(
            o,
            "Connection times (ms)         min      mean        sd    median       max"
        );
        if !rec.connect.is_empty() {
            phase_row(
                &mut o,
                &format!("Connect ({} new)", count(rec.connect.count())),
                &rec.connect,
            );
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
        o.push('\n');
    }

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
    if let Some(w) = &rec.server_watch {
        o.push('\n');
        o.push_str(&redline_watch::render_text(w));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(dur_us(850.0), "850µs");
        assert_eq!(dur_us(12_340.0), "12.34ms");
        assert_eq!(dur_us(1_500_000.0), "1.50s");
        assert_eq!(bytes(440.0), "440 B");
    }
}
