//! `redline ab`: a drop-in for ApacheBench. It takes ab's flags with ab's
//! meanings (`-t` is a time limit, keep-alive only with `-k`, HTTP/1.0 on
//! the wire as ab sends), runs them through the normal plan → engine path,
//! and prints ab's report field for field, so scripts that parse ab's output
//! keep working while the numbers are redline's (latency from the intended
//! send time; see README "Coming from ab / wrk").

use crate::cli::run_dropin;
use crate::exit::{fail, Exit};
use redline_engine::plan::REDACTED;
use redline_engine::{Plan, PlanArgs};
use redline_stats::{ErrorKind, Hist, RunRecord};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// ab's cap on requests when `-t` is given without `-n` (ab's MAX_REQUESTS).
const TIME_LIMIT_REQUESTS: u64 = 50_000;

const USAGE: &str = "\
Usage: redline ab [options] http[s]://hostname[:port]/path
Options are ab's (ApacheBench 2.3), measured by redline's engine:
    -n requests     Number of requests to perform (default 1)
    -c concurrency  Number of multiple requests to make at a time (default 1)
    -t timelimit    Seconds to max. to spend on benchmarking (implies -n 50000)
    -s timeout      Seconds to max. wait for each response (default 30)
    -p postfile     File containing data to POST. Remember also to set -T
    -u putfile      File containing data to PUT. Remember also to set -T
    -T content-type Content-type header to use for POST/PUT data (default text/plain)
    -v verbosity    0 or 1 (higher levels, which print headers, are not supported)
    -i              Use HEAD instead of GET
    -m method       Method name
    -C attribute    Add cookie, eg. 'Apache=1234' (repeatable; never printed)
    -H attribute    Add arbitrary header line, eg. 'Accept-Encoding: gzip' (repeatable)
    -A attribute    Add Basic WWW Authentication, user:password (never printed)
    -k              Use HTTP KeepAlive feature
    -l              Accept variable document length (no Length failures)
    -d              Do not show percentiles served table
    -S              Do not show confidence estimators and warnings
    -q              Do not show progress when doing more than 150 requests
    -r              Don't exit on socket receive errors (redline never does)
    -e filename     Output CSV file with percentages served
    -g filename     Output collected data to gnuplot format file
    -V              Print version number and exit
    -h              Display usage information (this message)
Not supported (one line, exit 2): -X -P -B -b -w -x -y -z -E -Z -f -I.
Latency is measured from each request's intended send time (no coordinated omission).";

/// ab's flags, in the order given (ab applies them in order: `-t` then `-n` overrides).
#[derive(Debug, Default)]
struct AbOpts {
    requests: Option<u64>,
    concurrency: u64,
    time_limit: Option<Duration>,
    timeout: Duration,
    body_file: Option<(PathBuf, &'static str)>,
    content_type: Option<String>,
    head: bool,
    method: Option<String>,
    headers: Vec<String>,
    auth: Option<String>,
    keepalive: bool,
    variable_length: bool,
    no_percentiles: bool,
    no_confidence: bool,
    quiet: bool,
    /// `-r`: go on after socket errors (a refused target is then a report).
    keep_going: bool,
    csv: Option<PathBuf>,
    gnuplot: Option<PathBuf>,
    url: String,
}

/// A small getopt: `-x`, `-xVALUE`, `-x VALUE`, bundled flags (`-kq`), `--`,
/// and long options `--name[=VALUE]` from `long`. Operands may come anywhere.
/// Returns the options in order and the operands.
pub(crate) type Parsed = (Vec<(char, Option<String>)>, Vec<String>);

pub(crate) fn getopt(
    args: &[String],
    with_value: &str,
    flags: &str,
    long: &[(&str, char, bool)],
    tool: &str,
) -> Result<Parsed, String> {
    let mut opts = Vec::new();
    let mut operands = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            operands.extend(it.by_ref().cloned());
            break;
        }
        if let Some(name) = a.strip_prefix("--") {
            let (name, inline) = match name.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (name, None),
            };
            let Some(&(_, c, takes)) = long.iter().find(|l| l.0 == name) else {
                return Err(format!(
                    "{tool}: unknown option --{} (see redline {tool} -h)",
                    clean(name)
                ));
            };
            let v = if takes {
                match inline.or_else(|| it.next().cloned()) {
                    Some(v) => Some(v),
                    None => return Err(format!("{tool}: option --{name} needs a value")),
                }
            } else if inline.is_some() {
                return Err(format!("{tool}: option --{name} takes no value"));
            } else {
                None
            };
            opts.push((c, v));
            continue;
        }
        if a.len() < 2 || !a.starts_with('-') {
            operands.push(a.clone());
            continue;
        }
        let chars: Vec<char> = a[1..].chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if with_value.contains(c) {
                let rest: String = chars[i + 1..].iter().collect();
                let v = if !rest.is_empty() {
                    rest
                } else {
                    match it.next() {
                        Some(v) => v.clone(),
                        None => return Err(format!("{tool}: option -{c} needs a value")),
                    }
                };
                opts.push((c, Some(v)));
                break;
            } else if flags.contains(c) {
                opts.push((c, None));
                i += 1;
            } else {
                return Err(format!(
                    "{tool}: unknown option -{} (see redline {tool} -h)",
                    clean(&c.to_string())
                ));
            }
        }
    }
    Ok((opts, operands))
}

/// User text for an error line: control characters escaped, length bounded.
pub(crate) fn clean(s: &str) -> String {
    let mut out: String = s.chars().take(80).flat_map(char::escape_debug).collect();
    if s.chars().count() > 80 {
        out.push('…');
    }
    out
}

/// A URL given on the command line as the drop-ins show it (reports and
/// errors alike): its user information hidden (`user:[redacted]@`, or
/// `[redacted]@` for a user alone, which may be a token); the caller then
/// escapes it ([`clean`] or [`printable`]).
/// Works on text that is not a valid URL too: everything between `://` and
/// the last `@` before any `?` or `#` counts as user information.
pub(crate) fn shown_url(url: &str) -> String {
    let Some(p) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[p + 3..];
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..end].rfind('@') else {
        return url.to_string();
    };
    let shown = match rest[..at].split_once(':') {
        Some((user, _)) if !user.contains('/') => format!("{user}:{REDACTED}"),
        _ => REDACTED.to_string(),
    };
    format!("{}{shown}{}", &url[..p + 3], &rest[at..])
}

/// Text from outside (a `Server` header, a URL) as the report shows it:
/// control characters escaped, everything else as is.
pub(crate) fn printable(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let esc: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            esc
        })
        .collect()
}

fn number(c: char, v: &str) -> Result<u64, String> {
    v.trim()
        .parse::<u64>()
        .map_err(|_| format!("ab: -{c} needs a whole number, not '{}'", clean(v)))
}

fn parse(args: &[String]) -> Result<Option<AbOpts>, String> {
    let (opts, operands) = getopt(
        args,
        "nctspuTvmCHAegXPBbxyzEZf",
        "ikldSqrVhwI",
        &[("help", 'h', false)],
        "ab",
    )?;
    let mut o = AbOpts {
        concurrency: 1,
        timeout: Duration::from_secs(30),
        ..Default::default()
    };
    for (c, v) in opts {
        let v = v.unwrap_or_default();
        match c {
            'n' => o.requests = Some(number(c, &v)?),
            'c' => o.concurrency = number(c, &v)?,
            't' => {
                o.time_limit = Some(Duration::from_secs(number(c, &v)?));
                o.requests = Some(TIME_LIMIT_REQUESTS);
            }
            's' => o.timeout = Duration::from_secs(number(c, &v)?),
            'p' => o.body_file = Some((PathBuf::from(v), "POST")),
            'u' => o.body_file = Some((PathBuf::from(v), "PUT")),
            'T' => o.content_type = Some(v),
            'v' => {
                if number(c, &v)? > 1 {
                    return Err(
                        "ab: -v above 1 (printing headers and bodies) is not supported by redline ab"
                            .into(),
                    );
                }
            }
            'i' => o.head = true,
            'm' => o.method = Some(v),
            'C' => o.headers.push(format!("Cookie: {v}")),
            'H' => o.headers.push(v),
            'A' => o.auth = Some(v),
            'k' => o.keepalive = true,
            'l' => o.variable_length = true,
            'd' => o.no_percentiles = true,
            'S' => o.no_confidence = true,
            'q' => o.quiet = true,
            'r' => o.keep_going = true,
            'e' => o.csv = Some(PathBuf::from(v)),
            'g' => o.gnuplot = Some(PathBuf::from(v)),
            'V' => {
                println!(
                    "This is redline ab, redline {} (ApacheBench 2.3's flags and report)",
                    env!("CARGO_PKG_VERSION")
                );
                return Ok(None);
            }
            'h' => {
                println!("{USAGE}");
                return Ok(None);
            }
            'X' | 'P' => {
                return Err(format!(
                    "ab: -{c} (proxy) is not supported by redline ab; aim at the server directly"
                ))
            }
            'w' | 'x' | 'y' | 'z' => {
                return Err(format!(
                    "ab: -{c} (HTML output) is not supported; use `redline run --html FILE URL`"
                ))
            }
            _ => {
                return Err(format!(
                    "ab: -{c} is not supported by redline ab (see redline ab -h)"
                ))
            }
        }
    }
    let [url] = operands.as_slice() else {
        return Err(if operands.is_empty() {
            "ab: a URL is needed: redline ab [options] http://host[:port]/path".into()
        } else {
            "ab: one URL only (see redline ab -h)".into()
        });
    };
    o.url = url.clone();
    if o.concurrency == 0 {
        return Err("ab: -c must be at least 1".into());
    }
    if o.requests == Some(0) {
        return Err("ab: -n must be at least 1".into());
    }
    if o.concurrency > o.requests.unwrap_or(1) {
        return Err(
            "ab: Cannot use concurrency level greater than total number of requests".into(),
        );
    }
    if o.timeout.is_zero() {
        return Err("ab: -s must be at least 1 second".into());
    }
    if o.head && (o.body_file.is_some() || o.method.is_some()) {
        return Err("ab: -i (HEAD) does not go with -p, -u or -m".into());
    }
    Ok(Some(o))
}

/// Host, port and path as ab prints them, from an `http[s]://host[:port]/path` URL.
fn url_parts(url: &str) -> Result<(String, u16, String), String> {
    let bad = || {
        format!(
            "ab: invalid URL '{}': ab's form is http[s]://hostname[:port]/path",
            clean(&shown_url(url))
        )
    };
    let (rest, default_port) = if let Some(r) = url.strip_prefix("http://") {
        (r, 80)
    } else if let Some(r) = url.strip_prefix("https://") {
        (r, 443)
    } else {
        return Err(bad());
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => return Err(bad()),
    };
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, p)) => (format!("[{h}]"), p.strip_prefix(':')),
            None => return Err(bad()),
        }
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().map_err(|_| bad())?,
        None => default_port,
    };
    if host.is_empty() {
        return Err(bad());
    }
    let path = path.split('#').next().unwrap_or(path).to_string();
    Ok((host, port, path))
}

/// Entry point of `redline ab`; returns the exit code.
pub fn main(args: &[String]) -> Exit {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => return Exit::Ok,
        Err(e) => return fail(Exit::Usage, e),
    };
    let (host, port, path) = match url_parts(&o.url) {
        Ok(x) => x,
        Err(e) => return fail(Exit::Usage, e),
    };
    let body = match &o.body_file {
        Some((p, _)) => match std::fs::read(p) {
            Ok(b) => Some(b),
            Err(e) => {
                return fail(
                    Exit::Usage,
                    format!("ab: cannot read {}: {e}", clean(&p.display().to_string())),
                )
            }
        },
        None => None,
    };
    // ab opens -e/-g files at the end; failing before the run is kinder.
    for p in [&o.csv, &o.gnuplot].into_iter().flatten() {
        if let Err(e) = std::fs::File::create(p) {
            return fail(
                Exit::Usage,
                format!("ab: cannot write {}: {e}", clean(&p.display().to_string())),
            );
        }
    }
    let mut pa = PlanArgs::new(o.url.clone());
    pa.method = if o.head {
        Some("HEAD".into())
    } else {
        o.method
            .clone()
            .or_else(|| o.body_file.as_ref().map(|(_, m)| m.to_string()))
    };
    pa.content_type = match (&body, &o.content_type) {
        (Some(_), None) => Some("text/plain".into()),
        (_, t) => t.clone(),
    };
    pa.body = body;
    pa.headers = o.headers.clone();
    pa.basic_auth = o.auth.clone();
    pa.connections = Some(o.concurrency);
    pa.requests = Some(o.requests.unwrap_or(1));
    pa.duration = o.time_limit;
    pa.keepalive = o.keepalive;
    pa.http10 = true;
    pa.timeout = o.timeout;
    pa.http11 = false;
    let plan = match Plan::build(pa) {
        Ok(p) => p,
        Err(e) => return fail(Exit::Usage, format!("ab: {e}")),
    };
    let requested = o.requests.unwrap_or(1);
    // ab's heartbeat: a progress line on stderr every tenth (at least 100
    // requests) above 150 requests, unless -q.
    let heartbeat = (requested > 150 && !o.quiet).then(|| (requested / 10).max(100));
    println!(
        "This is redline ab, redline {} (ApacheBench 2.3's flags and report)",
        env!("CARGO_PKG_VERSION")
    );
    println!("Latency from each request's intended send time (no coordinated omission)");
    println!("Aim it only at servers you own or are allowed to test.");
    println!();
    // As ab: "(be patient)" then a newline before progress lines, or "..."
    // that the report's "..done" completes.
    print!("Benchmarking {host} (be patient)");
    if heartbeat.is_some() {
        println!();
    } else {
        print!("...");
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    // As ab (without -r) on a target that refuses: apr's one line and errno
    // as the exit code, no report.
    if !o.keep_going && refused(&plan) {
        eprintln!("apr_socket_recv: Connection refused (111)");
        return Exit::Refused;
    }
    let shown = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let view = AbView {
        host,
        port,
        path,
        opts: o,
        heartbeat: heartbeat.map(|every| (every, shown.clone())),
    };
    let progress = heartbeat.map(|every| {
        Box::new(move |s: &redline_engine::Snapshot| completed_lines(every, &shown, s.completed))
            as crate::cli::Progress
    });
    run_dropin(&plan, Box::new(move |rec| view.render(rec)), progress)
}

/// Does the plan's target refuse a TCP connection (the first thing ab and
/// wrk learn on a closed port)? One connect, bounded by the plan's connect
/// time-out (at most 5 s); any other outcome is left to the run.
pub(crate) fn refused(plan: &Plan) -> bool {
    connect_error(plan).is_some_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// The error of one TCP connect to the plan's target, if it failed.
pub(crate) fn connect_error(plan: &Plan) -> Option<std::io::Error> {
    let limit = plan.connect_timeout.min(Duration::from_secs(5));
    std::net::TcpStream::connect_timeout(&plan.target.addr, limit).err()
}

/// ab's "Completed N requests" lines on stderr for each multiple of `every`
/// reached since the last call (`shown` remembers the last one printed).
fn completed_lines(every: u64, shown: &std::cell::Cell<u64>, completed: u64) {
    let mut next = shown.get() + every;
    while next <= completed {
        eprintln!("Completed {next} requests");
        shown.set(next);
        next += every;
    }
}

/// What the report needs besides the run record.
struct AbView {
    host: String,
    port: u16,
    path: String,
    opts: AbOpts,
    /// ab's heartbeat: every how many requests, and the last count shown.
    heartbeat: Option<(u64, std::rc::Rc<std::cell::Cell<u64>>)>,
}

/// ab's rounding of microseconds to whole milliseconds.
fn ms(us: f64) -> u64 {
    ((us.max(0.0) + 500.0) / 1000.0) as u64
}

/// One row's numbers: min, mean, sd (ms, 1 decimal), median, max.
struct Row {
    min: u64,
    mean: u64,
    sd: f64,
    median: u64,
    max: u64,
}

impl Row {
    fn of(h: &Hist) -> Row {
        if h.is_empty() {
            return Row {
                min: 0,
                mean: 0,
                sd: 0.0,
                median: 0,
                max: 0,
            };
        }
        Row {
            min: ms(h.min() as f64),
            // ab takes the mean in whole µs, then rounds.
            mean: ms(h.mean().floor()),
            sd: h.stdev() / 1000.0,
            median: ms(h.percentile(50.0) as f64),
            max: ms(h.max() as f64),
        }
    }
}

impl AbView {
    fn render(&self, rec: &RunRecord) -> Result<String, String> {
        let c = &rec.counters;
        let o = &self.opts;
        let mut s = String::new();
        if let Some((every, shown)) = &self.heartbeat {
            completed_lines(*every, shown, c.completed);
            eprintln!("Finished {} requests", c.completed);
        } else {
            s.push_str("..done\n");
        }
        let secs = rec.duration_s;
        s.push_str("\n\n");
        let _ = writeln!(
            s,
            "Server Software:        {}",
            rec.server
                .software
                .as_deref()
                .map(printable)
                .unwrap_or_default()
        );
        let _ = writeln!(s, "Server Hostname:        {}", self.host);
        let _ = writeln!(s, "Server Port:            {}", self.port);
        s.push('\n');
        let _ = writeln!(s, "Document Path:          {}", self.path);
        if o.variable_length {
            s.push_str("Document Length:        Variable\n");
        } else {
            let _ = writeln!(s, "Document Length:        {} bytes", document_length(rec));
        }
        s.push('\n');
        let _ = writeln!(s, "Concurrency Level:      {}", o.concurrency);
        let _ = writeln!(s, "Time taken for tests:   {secs:.3} seconds");
        let _ = writeln!(s, "Complete requests:      {}", c.completed);
        let (conn, recv, except) = error_classes(rec);
        let length = if o.variable_length {
            0
        } else {
            c.length_differs
        };
        let failed = c.failed + length;
        let _ = writeln!(s, "Failed requests:        {failed}");
        if failed > 0 {
            let _ = writeln!(
                s,
                "   (Connect: {conn}, Receive: {recv}, Length: {length}, Exceptions: {except})"
            );
        }
        if c.non_2xx > 0 {
            let _ = writeln!(s, "Non-2xx responses:      {}", c.non_2xx);
        }
        if o.keepalive {
            let _ = writeln!(s, "Keep-Alive requests:    {}", keepalive_requests(rec));
        }
        let _ = writeln!(s, "Total transferred:      {} bytes", c.bytes_read);
        // ab's "Total body sent" counts whole requests written, heads included.
        let posted = c.bytes_written;
        if o.body_file.is_some() {
            let _ = writeln!(s, "Total body sent:        {posted}");
        }
        let _ = writeln!(s, "HTML transferred:       {} bytes", c.body_bytes);
        if secs > 0.0 && c.completed > 0 {
            let done = c.completed as f64;
            let _ = writeln!(
                s,
                "Requests per second:    {:.2} [#/sec] (mean)",
                done / secs
            );
            let _ = writeln!(
                s,
                "Time per request:       {:.3} [ms] (mean)",
                o.concurrency as f64 * secs * 1000.0 / done
            );
            let _ = writeln!(
                s,
                "Time per request:       {:.3} [ms] (mean, across all concurrent requests)",
                secs * 1000.0 / done
            );
            let _ = writeln!(
                s,
                "Transfer rate:          {:.2} [Kbytes/sec] received",
                c.bytes_read as f64 / 1024.0 / secs
            );
            if o.body_file.is_some() {
                let _ = writeln!(
                    s,
                    "                        {:.2} kb/s sent",
                    posted as f64 / 1024.0 / secs
                );
                let _ = writeln!(
                    s,
                    "                        {:.2} kb/s total",
                    (c.bytes_read + posted) as f64 / 1024.0 / secs
                );
            }
        }
        if c.completed > 0 {
            self.times(&mut s, rec);
            if !o.no_percentiles && c.completed > 1 {
                s.push_str("\nPercentage of the requests served within a certain time (ms)\n");
                for p in [50, 66, 75, 80, 90, 95, 98, 99] {
                    let _ = writeln!(
                        s,
                        "  {p}%  {:5}",
                        ms(rec.latency.percentile(p as f64) as f64)
                    );
                }
                let _ = writeln!(
                    s,
                    " 100%  {:5} (longest request)",
                    ms(rec.latency.max() as f64)
                );
            }
            if let Some(p) = &o.csv {
                write_file(p, &csv(rec))?;
            }
            if let Some(p) = &o.gnuplot {
                write_file(p, &gnuplot(rec))?;
            }
        }
        Ok(s)
    }

    /// The "Connection Times (ms)" table.
    fn times(&self, s: &mut String, rec: &RunRecord) {
        let rows = [
            ("Connect:    ", Row::of(&connect_per_request(rec))),
            ("Processing: ", Row::of(&rec.service_time)),
            ("Waiting:    ", Row::of(&rec.waiting)),
            ("Total:      ", Row::of(&rec.latency)),
        ];
        s.push_str("\nConnection Times (ms)\n");
        if self.opts.no_confidence {
            s.push_str("              min   avg   max\n");
            for (label, r) in &rows {
                let _ = writeln!(s, "{label}{:5} {:5}{:5}", r.min, r.mean, r.max);
            }
            return;
        }
        s.push_str("              min  mean[+/-sd] median   max\n");
        for (label, r) in &rows {
            let _ = writeln!(
                s,
                "{label}{:5} {:4} {:5.1} {:6} {:7}",
                r.min, r.mean, r.sd, r.median, r.max
            );
        }
        let names = [
            "the initial connection time",
            "the processing time",
            "the waiting time",
            "the total time",
        ];
        for (name, (_, r)) in names.iter().zip(&rows) {
            let d = (r.mean as f64 - r.median as f64).abs();
            if d > 2.0 * r.sd {
                let _ = writeln!(
                    s,
                    "ERROR: The median and mean for {name} are more than twice the standard\n       deviation apart. These results are NOT reliable."
                );
            } else if d > r.sd {
                let _ = writeln!(
                    s,
                    "WARNING: The median and mean for {name} are not within a normal deviation\n        These results are probably not that reliable."
                );
            }
        }
    }
}

/// ab's Document Length: the first response's body length, whatever its
/// status. When every response had the same length it is the average; else
/// the first 2xx response's (the engine's `document_length`).
fn document_length(rec: &RunRecord) -> u64 {
    let c = &rec.counters;
    if c.completed > 0 && c.length_differs == 0 {
        c.body_bytes / c.completed
    } else {
        rec.server.document_length.unwrap_or(0)
    }
}

/// ab's failure classes from redline's error kinds: (Connect, Receive, Exceptions).
fn error_classes(rec: &RunRecord) -> (u64, u64, u64) {
    let (mut conn, mut recv, mut except) = (0, 0, 0);
    for e in &rec.errors {
        match e.kind {
            ErrorKind::Refused
            | ErrorKind::ConnectTimeout
            | ErrorKind::TooManyOpenFiles
            | ErrorKind::NoLocalAddress
            | ErrorKind::Resolve
            | ErrorKind::Tls => conn += e.count,
            ErrorKind::Reset
            | ErrorKind::Timeout
            | ErrorKind::Closed
            | ErrorKind::StreamReset
            | ErrorKind::GoAway
            | ErrorKind::NoStream => recv += e.count,
            _ => except += e.count,
        }
    }
    (conn, recv, except)
}

/// ab's "Keep-Alive requests": responses after which the connection stayed
/// open. Every connection the server closed ended with one response that did
/// not keep it alive; connections still open at the end (at most -c) did not.
fn keepalive_requests(rec: &RunRecord) -> u64 {
    let c = &rec.counters;
    let closed = c
        .connections_opened
        .saturating_sub(rec.config.load.connections());
    c.completed.saturating_sub(closed)
}

/// ab's Connect column is per request: 0 for a request on a reused connection.
fn connect_per_request(rec: &RunRecord) -> Hist {
    let mut h = rec.connect.clone();
    let reused = rec.counters.completed.saturating_sub(h.count());
    if reused > 0 {
        h.record_n_us(0, reused);
    }
    h
}

fn write_file(p: &std::path::Path, text: &str) -> Result<(), String> {
    std::fs::write(p, text)
        .map_err(|e| format!("ab: cannot write {}: {e}", clean(&p.display().to_string())))
}

/// `-e`: ab's CSV of the time within which each percentage (0–100) was served.
fn csv(rec: &RunRecord) -> String {
    let mut s = String::from("Percentage served,Time in ms\n");
    for i in 0..=100u32 {
        let us = match i {
            0 => rec.latency.min(),
            100 => rec.latency.max(),
            _ => rec.latency.percentile(i as f64),
        };
        let _ = writeln!(s, "{i},{:.3}", us as f64 / 1000.0);
    }
    s
}

/// `-g`: ab's gnuplot TSV, one row per completed request, sorted by total
/// time as ab's is. redline keeps no per-request records, so a row's total
/// time (`ttime`) comes from the per-second latency histogram of the second
/// it completed in (1 % precision), `starttime`/`seconds` are that second,
/// and `ctime` and `wait` are the run's medians (`dtime` = ttime − ctime).
fn gnuplot(rec: &RunRecord) -> String {
    let start_ms = redline_stats::time::parse_rfc3339_ms(&rec.started_at).unwrap_or(0);
    let ctime = ms(connect_per_request(rec).percentile(50.0) as f64);
    let wait = ms(rec.waiting.percentile(50.0) as f64);
    let mut rows: Vec<(u64, i64, u64)> = Vec::new();
    for p in &rec.series {
        let h = p.hist.to_hist();
        let second = start_ms.div_euclid(1000) + p.t as i64;
        for v in h.inner().iter_recorded() {
            rows.push((ms(v.value_iterated_to() as f64), second, v.count_at_value()));
        }
    }
    rows.sort_by_key(|r| (r.0, r.1));
    let mut s = String::from("starttime\tseconds\tctime\tdtime\tttime\twait\n");
    for (ttime, second, n) in rows {
        let stamp = ctime_string(second);
        for _ in 0..n {
            let _ = writeln!(
                s,
                "{stamp}\t{second}\t{ctime}\t{}\t{ttime}\t{wait}",
                ttime.saturating_sub(ctime)
            );
        }
    }
    s
}

/// C's ctime() layout in UTC, e.g. `Thu Nov 26 00:16:12 2026`.
fn ctime_string(epoch_s: i64) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_secs(epoch_s.max(0) as u64);
    let iso = redline_stats::time::rfc3339(t);
    let days = epoch_s.max(0) / 86_400;
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month: usize = iso[5..7].parse().unwrap_or(1);
    let day: u32 = iso[8..10].parse().unwrap_or(1);
    format!(
        "{weekday} {} {day:2} {} {}",
        months[month.clamp(1, 12) - 1],
        &iso[11..19],
        &iso[0..4]
    )
}

#[cfg(test)]
mod tests;
