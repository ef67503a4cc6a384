//! `redline wrk`: a drop-in for wrk. It takes wrk's flags with wrk's meanings
//! (`-t` threads, `-c` connections, `-d` duration, `--latency`, `--timeout`;
//! Lua scripts are refused in favour of `--scenario`), runs them through the
//! normal plan → engine path, and prints wrk's summary with wrk's unit
//! formatting (us/ms/s, k/M, KB/MB), so scripts that read wrk's output keep
//! working while the numbers are redline's.

use crate::cli::run_dropin;
use crate::cmd_ab::{clean, getopt, printable, shown_url};
use crate::exit::{fail, Exit};
use redline_engine::{Plan, PlanArgs};
use redline_stats::{ErrorKind, RunRecord};
use std::fmt::Write as _;
use std::time::Duration;

const USAGE: &str = "\
Usage: redline wrk <options> <url>
  Options (wrk's, measured by redline's engine):
    -c, --connections <N>  Connections to keep open (default 10)
    -d, --duration    <T>  Duration of test (default 10s)
    -t, --threads     <N>  Number of threads to use (default 2)

    -H, --header      <H>  Add header to request
        --latency          Print latency statistics
        --timeout     <T>  Socket/request timeout (default 2s)
    -v, --version          Print version details
    -s, --script      <S>  Not supported: use redline run --scenario FILE URL

  Numeric arguments may include a SI unit (1k, 1M, 1G)
  Time arguments may include a time unit (2s, 2m, 2h)
  Latency is measured from each request's intended send time (no coordinated omission).";

#[derive(Debug)]
struct WrkOpts {
    connections: u64,
    duration: u64,
    threads: u64,
    timeout: u64,
    headers: Vec<String>,
    latency: bool,
    url: String,
}

/// wrk's `scan_units`: a whole number with an optional unit from `units`
/// (each `scale` times the previous; the base unit may be written too).
fn scan(v: &str, base: &str, units: &[&str], scale: u64) -> Option<u64> {
    let v = v.trim();
    let digits = v.bytes().take_while(|b| b.is_ascii_digit()).count();
    let n: u64 = v[..digits].parse().ok()?;
    let unit = &v[digits..];
    if unit.is_empty() || unit.eq_ignore_ascii_case(base) {
        return Some(n);
    }
    let mut mult = 1u64;
    for u in units {
        mult = mult.checked_mul(scale)?;
        if unit.eq_ignore_ascii_case(u) {
            return n.checked_mul(mult);
        }
    }
    None
}

fn metric(c: &str, v: &str) -> Result<u64, String> {
    scan(v, "", &["k", "M", "G", "T", "P"], 1000)
        .ok_or_else(|| format!("wrk: {c} needs a number like 10 or 1k, not '{}'", clean(v)))
}

fn seconds(c: &str, v: &str) -> Result<u64, String> {
    scan(v, "s", &["m", "h"], 60).ok_or_else(|| {
        format!(
            "wrk: {c} needs a time like 10s, 2m or 1h, not '{}'",
            clean(v)
        )
    })
}

fn parse(args: &[String]) -> Result<Option<WrkOpts>, String> {
    let (opts, operands) = getopt(
        args,
        "tcdsHT",
        "Lvh",
        &[
            ("connections", 'c', true),
            ("duration", 'd', true),
            ("threads", 't', true),
            ("script", 's', true),
            ("header", 'H', true),
            ("latency", 'L', false),
            ("timeout", 'T', true),
            ("help", 'h', false),
            ("version", 'v', false),
        ],
        "wrk",
    )?;
    let mut o = WrkOpts {
        connections: 10,
        duration: 10,
        threads: 2,
        timeout: 2,
        headers: Vec::new(),
        latency: false,
        url: String::new(),
    };
    let mut version = false;
    for (c, v) in opts {
        let v = v.unwrap_or_default();
        match c {
            'c' => o.connections = metric("-c", &v)?,
            'd' => o.duration = seconds("-d", &v)?,
            't' => o.threads = metric("-t", &v)?,
            's' => {
                return Err(
                    "wrk: -s (Lua scripts) is not supported; describe the requests in a scenario file and run `redline run --scenario FILE URL`"
                        .into(),
                )
            }
            'H' => o.headers.push(v),
            'L' => o.latency = true,
            'T' => o.timeout = seconds("--timeout", &v)?,
            'v' => {
                println!(
                    "wrk drop-in of redline {} (wrk 4.x's flags and summary)",
                    env!("CARGO_PKG_VERSION")
                );
                version = true;
            }
            _ => {
                println!("{USAGE}");
                return Ok(None);
            }
        }
    }
    let url = match operands.as_slice() {
        [] if version => return Ok(None),
        [url] => url.clone(),
        [] => return Err("wrk: a URL is needed: redline wrk <options> <url>".into()),
        _ => return Err("wrk: one URL only (see redline wrk -h)".into()),
    };
    o.url = url;
    if o.threads == 0 {
        return Err("wrk: -t must be at least 1".into());
    }
    if o.duration == 0 {
        return Err("wrk: -d must be at least 1s".into());
    }
    if o.connections == 0 || o.connections < o.threads {
        return Err("wrk: number of connections must be >= threads".into());
    }
    if o.timeout == 0 {
        return Err("wrk: --timeout must be at least 1s".into());
    }
    Ok(Some(o))
}

/// Entry point of `redline wrk`; returns the exit code.
pub fn main(args: &[String]) -> Exit {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => return Exit::Ok,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut pa = PlanArgs::new(o.url.clone());
    pa.headers = o.headers.clone();
    pa.connections = Some(o.connections);
    pa.duration = Some(Duration::from_secs(o.duration));
    pa.threads = Some(o.threads.min(1024) as usize);
    pa.timeout = Duration::from_secs(o.timeout);
    // wrk speaks HTTP/1.1 only: an https target is not offered h2.
    pa.http11 = true;
    let plan = match Plan::build(pa) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Usage, format!("wrk: {e}")),
    };
    // As wrk, which connects once before it starts: a target it cannot
    // reach is one line on stderr and exit code 1, nothing on stdout.
    if let Some(e) = crate::cmd_ab::connect_error(&plan) {
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            eprintln!(
                "unable to connect to {} {}",
                clean(&service(&o.url)),
                strerror(&e)
            );
            return Exit::Failure;
        }
    }
    println!(
        "Running {} test @ {}",
        format_units(o.duration as f64, &TIME_S, 0),
        printable(&shown_url(&o.url))
    );
    println!("  {} threads and {} connections", o.threads, o.connections);
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let threads = o.threads;
    let latency = o.latency;
    run_dropin(
        &plan,
        Box::new(move |rec| Ok(summary(rec, threads, latency))),
        None,
    )
}

/// wrk's `host:service` of a URL: the host as written and the port as
/// written, or the scheme when there is none (`localhost:http`).
fn service(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let auth = rest.split(['/', '?', '#']).next().unwrap_or("");
    let auth = auth.rsplit_once('@').map_or(auth, |(_, a)| a);
    let (host, port) = match auth.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (h, p),
        _ => (auth, scheme),
    };
    format!(
        "{}:{port}",
        host.trim_start_matches('[').trim_end_matches(']')
    )
}

/// The C library's words for an error (`Connection refused`), without
/// Rust's " (os error 111)".
fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// wrk's unit tables (units.c): base, larger units, scale.
struct Units {
    base: &'static str,
    units: &'static [&'static str],
    scale: f64,
}

const TIME_US: Units = Units {
    base: "us",
    units: &["ms", "s"],
    scale: 1000.0,
};
const TIME_S: Units = Units {
    base: "s",
    units: &["m", "h"],
    scale: 60.0,
};
const BINARY: Units = Units {
    base: "",
    units: &["K", "M", "G", "T", "P"],
    scale: 1024.0,
};
const METRIC: Units = Units {
    base: "",
    units: &["k", "M", "G", "T", "P"],
    scale: 1000.0,
};

/// wrk's `format_units`: divide while at least 0.85 of the next unit (the
/// last unit of a table is never reached, as in wrk).
fn format_units(n: f64, m: &Units, precision: usize) -> String {
    let mut amt = n;
    let mut unit = m.base;
    let mut i = 0;
    while i + 1 < m.units.len() && amt >= m.scale * 0.85 {
        amt /= m.scale;
        unit = m.units[i];
        i += 1;
    }
    format!("{amt:.precision$}{unit}")
}

fn time_us(n: f64) -> String {
    if n >= 1_000_000.0 {
        format_units(n / 1_000_000.0, &TIME_S, 2)
    } else {
        format_units(n, &TIME_US, 2)
    }
}

fn metric_fmt(n: f64) -> String {
    format_units(n, &METRIC, 2)
}

/// wrk's `print_units`: right-aligned in `width`, minus the room a unit takes.
fn units_col(msg: &str, width: usize) -> String {
    let b = msg.as_bytes();
    let mut pad = 2;
    if b.last().is_some_and(|c| c.is_ascii_alphabetic()) {
        pad -= 1;
    }
    if b.len() >= 2 && b[b.len() - 2].is_ascii_alphabetic() {
        pad -= 1;
    }
    let w = width - pad;
    let shown: String = msg.chars().take(w).collect();
    format!("{shown:>w$}{}", &"  "[..pad])
}

/// mean, stdev (sample), max and the share within one stdev of the mean,
/// over weighted samples.
fn stats(samples: &[(f64, u64)]) -> (f64, f64, f64, f64) {
    let n: u64 = samples.iter().map(|s| s.1).sum();
    if n == 0 {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let mean = samples.iter().map(|s| s.0 * s.1 as f64).sum::<f64>() / n as f64;
    let var = samples
        .iter()
        .map(|s| (s.0 - mean).powi(2) * s.1 as f64)
        .sum::<f64>()
        / (n.saturating_sub(1).max(1)) as f64;
    let sd = var.sqrt();
    let max = samples.iter().map(|s| s.0).fold(0.0, f64::max);
    let within: u64 = samples
        .iter()
        .filter(|s| s.0 >= mean - sd && s.0 <= mean + sd)
        .map(|s| s.1)
        .sum();
    (mean, sd, max, 100.0 * within as f64 / n as f64)
}

fn stats_row(out: &mut String, name: &str, s: (f64, f64, f64, f64), fmt: fn(f64) -> String) {
    let _ = writeln!(
        out,
        "    {name:<10}{}{}{}{:8.2}%",
        units_col(&fmt(s.0), 8),
        units_col(&fmt(s.1), 10),
        units_col(&fmt(s.2), 9),
        s.3
    );
}

/// wrk's summary of a run.
fn summary(rec: &RunRecord, threads: u64, latency: bool) -> String {
    let c = &rec.counters;
    let mut s = String::new();
    s.push_str("  Thread Stats   Avg      Stdev     Max   +/- Stdev\n");
    let lat: Vec<(f64, u64)> = rec
        .latency
        .inner()
        .iter_recorded()
        .map(|v| (v.value_iterated_to() as f64, v.count_at_value()))
        .collect();
    stats_row(&mut s, "Latency", stats(&lat), time_us);
    // wrk samples each thread's rate; redline has each second's total: the
    // per-thread rate of a second is its total over the threads. The last,
    // partial second is left out when there are whole ones.
    let whole = rec.duration_s.floor() as u32;
    let mut rates: Vec<(f64, u64)> = rec
        .series
        .iter()
        .filter(|p| p.t < whole)
        .map(|p| (p.requests as f64 / threads as f64, 1))
        .collect();
    if rates.is_empty() {
        rates = rec
            .series
            .iter()
            .map(|p| (p.requests as f64 / threads as f64, 1))
            .collect();
    }
    stats_row(&mut s, "Req/Sec", stats(&rates), metric_fmt);
    if latency {
        s.push_str("  Latency Distribution\n");
        for p in [50.0, 75.0, 90.0, 99.0] {
            let _ = writeln!(
                s,
                "{p:7.0}%{}",
                units_col(&time_us(rec.latency.percentile(p) as f64), 10)
            );
        }
    }
    let _ = writeln!(
        s,
        "  {} requests in {}, {}B read",
        c.completed,
        time_us(rec.duration_s * 1e6),
        format_units(c.bytes_read as f64, &BINARY, 2)
    );
    let (mut connect, mut read, mut timeout) = (0u64, 0u64, 0u64);
    for e in &rec.errors {
        match e.kind {
            ErrorKind::Refused
            | ErrorKind::ConnectTimeout
            | ErrorKind::TooManyOpenFiles
            | ErrorKind::NoLocalAddress
            | ErrorKind::Resolve
            | ErrorKind::Tls => connect += e.count,
            ErrorKind::Timeout | ErrorKind::NoStream => timeout += e.count,
            _ => read += e.count,
        }
    }
    if connect + read + timeout > 0 {
        let _ = writeln!(
            s,
            "  Socket errors: connect {connect}, read {read}, write 0, timeout {timeout}"
        );
    }
    // wrk counts statuses above 399 here, whatever the label says.
    let status: u64 = rec
        .status_codes
        .iter()
        .filter(|(k, _)| k.parse::<u16>().is_ok_and(|k| k > 399))
        .map(|(_, n)| n)
        .sum();
    if status > 0 {
        let _ = writeln!(s, "  Non-2xx or 3xx responses: {status}");
    }
    let secs = rec.duration_s.max(1e-9);
    let _ = writeln!(s, "Requests/sec: {:9.2}", c.completed as f64 / secs);
    let _ = writeln!(
        s,
        "Transfer/sec: {:>10}B",
        format_units(c.bytes_read as f64 / secs, &BINARY, 2)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn units_as_wrk_prints_them() {
        assert_eq!(time_us(185.0), "185.00us");
        assert_eq!(time_us(890.0), "0.89ms");
        assert_eq!(time_us(12_920.0), "12.92ms");
        assert_eq!(time_us(1_010_000.0), "1.01s");
        assert_eq!(metric_fmt(12_220.0), "12.22k");
        assert_eq!(format_units(3.64 * 1048576.0, &BINARY, 2), "3.64M");
        assert_eq!(format_units(10.0, &TIME_S, 0), "10s");
        assert_eq!(format_units(120.0, &TIME_S, 0), "2m");
        assert_eq!(units_col("0.89ms", 8), "  0.89ms");
        assert_eq!(units_col("12.22k", 8), " 12.22k ");
        assert_eq!(units_col("9.22ms", 9), "   9.22ms");
    }

    #[test]
    fn flags_have_wrks_meanings() {
        let o = parse(&v(&[
            "-t1",
            "-c",
            "1k",
            "-d",
            "2m",
            "--latency",
            "--timeout=3s",
            "http://h/",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (o.threads, o.connections, o.duration, o.timeout),
            (1, 1000, 120, 3)
        );
        assert!(o.latency);
        let o = parse(&v(&["http://h/"])).unwrap().unwrap();
        assert_eq!(
            (o.threads, o.connections, o.duration, o.timeout),
            (2, 10, 10, 2)
        );
    }

    #[test]
    fn bad_flags_are_one_line() {
        for args in [
            &["-s", "x.lua", "http://h/"][..],
            &["-c", "1", "-t", "2", "http://h/"],
            &["-d", "soon", "http://h/"],
            &["--bogus", "http://h/"],
            &[],
        ] {
            let e = parse(&v(args)).unwrap_err();
            assert!(!e.contains('\n') && e.starts_with("wrk: "), "{args:?}: {e}");
        }
        assert!(parse(&v(&["-s", "a.lua", "http://h/"]))
            .unwrap_err()
            .contains("--scenario"));
    }
}
