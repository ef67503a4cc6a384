//! `redline page` and `redline audit` (issue 7): the page loader (measure.pl's
//! job: the page and everything it embeds, in first, revalidate and cached views)
//! and the HTTP tuning audit with fixes for Apache, nginx and lighttpd.
//!
//! `page` also saves the load in the history (as `run` does; `--no-save`,
//! `--label`), writes HAR 1.2 (`--har FILE`), and bounds each view with a
//! byte budget (`--max-bytes`, default 256 MiB): a view that reaches it stops
//! and is marked TRUNCATED (exit 0, a warning on stderr).
//!
//! Exit codes: 0 ok; 1 the page could not be loaded (refused, timed out, not
//! HTTP, TLS handshake or certificate refused; for `page`, not an HTML page:
//! `audit` also checks a single resource; for `page`, a page that answered
//! 4xx/5xx, after the report, as `audit --fail-on` fails it) or a report
//! (`--html`, `--har`) could not be written; 2 usage error (bad flag, URL,
//! header, size, unresolvable host, unreadable `--cacert`, a `--browser`
//! path that does not exist or no `chromium` on `PATH`);
//! [`Exit::Findings`] (3) `audit --fail-on` found something that bad.
//! With `--browser`, Chromium that fails to start, answer or load the page
//! within `--timeout` plus `--connect-timeout` is 1 (before any request of
//! redline's own).

use crate::exit::Exit;
use clap::{Args, Subcommand, ValueEnum};
use redline_web::load::LoadOpts;
use redline_web::{audit, page};
use std::io::Write;
use std::time::Duration;

/// The web subcommands.
#[derive(Subcommand, Debug)]
pub enum WebCmd {
    /// Load a page with everything it embeds, like a browser (measure.pl): first, revalidate and cached views, a waterfall.
    Page(PageArgs),
    /// Check a page's HTTP tuning (caching, validators, compression, keep-alive, images) and say how to fix it.
    Audit(AuditArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum Output {
    Text,
    Json,
}

/// Flags both commands share.
#[derive(Args, Debug)]
pub struct CommonArgs {
    /// The page (http://host[:port]/path); the scheme may be left out.
    url: String,
    /// Output format: text, or json.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FORMAT",
        default_value = "text"
    )]
    output: Output,
    /// No "Getting …" lines.
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
    /// Extra request header for the page's own site, 'Name: value' (repeatable; never printed).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// Per-request time limit.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = dur)]
    timeout: Duration,
    /// Connect time limit.
    #[arg(long = "connect-timeout", value_name = "DURATION", default_value = "10s", value_parser = dur)]
    connect_timeout: Duration,
    /// Speak HTTP/1.1 only: offer just `http/1.1` in ALPN, even to servers
    /// with HTTP/2 (curl's flag; for comparing the two).
    #[arg(long = "http1.1", conflicts_with = "http3")]
    http11: bool,
    /// Load every https resource over HTTP/3 (QUIC on UDP, ALPN h3), as
    /// Chromium with --origin-to-force-quic-on: an origin that does not
    /// answer over UDP is an error per request. Without it, an origin that
    /// advertised `Alt-Svc: h3` in the first view is loaded over HTTP/3 in
    /// the later views, as Chromium does on a repeat visit.
    #[arg(long = "http3")]
    http3: bool,
    /// HTTP/1.1 connections per host (browsers use 6); an HTTP/2 host gets one.
    #[arg(long = "per-host", value_name = "N", default_value_t = 6, value_parser = clap::value_parser!(u16).range(1..=64))]
    per_host: u16,
    /// Resources fetched at most.
    #[arg(long = "max-resources", value_name = "N", default_value_t = 500)]
    max_resources: usize,
    /// https: do not verify the server's certificate (the report says so).
    #[arg(long)]
    insecure: bool,
    /// https: also trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    cacert: Option<std::path::PathBuf>,
    /// Also write a self-contained HTML report (waterfall; for audit the grades, findings and fixes) to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// Discover for this screen: WIDTHxHEIGHT in CSS pixels (default 1350x940, a desktop).
    #[arg(long, value_name = "WxH", allow_hyphen_values = true)]
    viewport: Option<String>,
    /// Discover for a phone: Lighthouse's Moto G Power, 412x823 at DPR 1.75 (--viewport and --dpr override its parts).
    #[arg(long)]
    mobile: bool,
    /// The User-Agent sent (default: Chromium's, desktop Linux, or Android with --mobile).
    #[arg(long = "user-agent", short = 'A', value_name = "STRING")]
    user_agent: Option<String>,
    /// Device pixel ratio for srcset, image-set() and resolution queries (default 1; 1.75 with --mobile).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    dpr: Option<String>,
    /// Fetch only from the page's own origin (scheme, host and port); the rest is listed as not fetched.
    #[arg(long = "same-origin")]
    same_origin: bool,
    /// Byte budget of each view: bytes read plus decoded bytes kept (e.g. 64MiB, 1GiB; K/M/G are binary).
    /// A view that reaches it stops, marked TRUNCATED.
    #[arg(long = "max-bytes", value_name = "SIZE", default_value = "256MiB", value_parser = size)]
    max_bytes: u64,
    /// Run the page's scripts in headless Chromium first (chromium on PATH, or --browser=PATH), as
    /// Lighthouse does, to learn the images they insert and the size each is shown at; redline's own
    /// client still fetches and measures every byte.
    #[arg(long, value_name = "PATH", num_args = 0..=1, require_equals = true, default_missing_value = "chromium")]
    browser: Option<String>,
}

/// `redline page`.
#[derive(Args, Debug)]
pub struct PageArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Load the views N times and report medians.
    #[arg(short = 'n', long = "runs", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Also write the views as HAR 1.2 (HTTP Archive: DevTools and HAR viewers open it) to FILE.
    #[arg(long, value_name = "FILE")]
    har: Option<std::path::PathBuf>,
    /// Do not save this page load in the history.
    #[arg(long = "no-save")]
    no_save: bool,
    /// A label for the saved page load (`redline compare before after`).
    #[arg(long, value_name = "LABEL")]
    label: Option<String>,
    /// A free note kept with the saved page load.
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
    /// History database (default: $REDLINE_DB, else $XDG_DATA_HOME/redline/history.db).
    #[arg(long = "db", value_name = "PATH")]
    db: Option<std::path::PathBuf>,
}

/// `redline audit`.
#[derive(Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Exit with code 3 when a check on the page's own site is at least this bad (for CI): info, warning (also: warn), error. A page that is not 2xx is an error.
    #[arg(long = "fail-on", value_name = "LEVEL")]
    fail_on: Option<crate::fail_on::FailOn>,
    /// Also write a JUnit XML report to FILE: one test case per check, failing at the --fail-on level (default warning), skipped when N/A.
    #[arg(long = "junit", value_name = "FILE", help_heading = "Output")]
    junit: Option<std::path::PathBuf>,
    /// https pages: the port plain http is checked on (does it redirect to https?).
    #[arg(long = "http-port", value_name = "PORT", default_value_t = 80, value_parser = clap::value_parser!(u16).range(1..))]
    http_port: u16,
    /// Do not probe TLS (second connection, certificate) or plain http: only what the page's load saw.
    #[arg(long = "no-probes")]
    no_probes: bool,
    /// Accepted as on `page` and `run`: an audit saves nothing in the history.
    #[arg(long = "no-save")]
    _no_save: bool,
}

fn dur(s: &str) -> Result<Duration, String> {
    redline_engine::parse_duration(s)
}

/// A size: bytes, or with K/KiB/KB, M/MiB/MB, G/GiB/GB (all binary: 1K = 1024).
fn size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || format!("bad size {s:?}: use bytes or a number with K, M or G (64MiB, 1G)");
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    let v = n * mult as f64;
    if !v.is_finite() || v < 1024.0 || v > (1u64 << 50) as f64 {
        return Err(format!("bad size {s:?}: between 1KiB and 1PiB"));
    }
    Ok(v as u64)
}

/// Runs a web subcommand; returns the exit code.
pub fn dispatch(cmd: WebCmd) -> Exit {
    match cmd {
        WebCmd::Page(a) => cmd_page(a),
        WebCmd::Audit(a) => cmd_audit(a),
    }
}

fn b64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in input.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Checks the flags and URL: the page URL (credentials moved into an
/// Authorization header) and the load options. Err: a usage message.
fn prepare(c: &CommonArgs) -> Result<(redline_web::url::Url, LoadOpts), String> {
    let raw = c.url.trim();
    let with_scheme = if raw.contains("://") {
        raw.to_string()
    } else {
        format!("http://{raw}")
    };
    let mut u = redline_web::url::Url::parse(&with_scheme)
        .map_err(|e| format!("invalid URL {:?}: {e}", redact(raw)))?;
    match u.scheme() {
        "http" | "https" => {}
        s => {
            return Err(format!(
                "unsupported URL scheme {s:?}: use http:// or https://"
            ))
        }
    }
    if u.host_str().unwrap_or("").is_empty() {
        return Err("the URL has no host".into());
    }
    let mut opts = LoadOpts::default();
    opts.client.timeout = c.timeout;
    opts.client.connect_timeout = c.connect_timeout;
    opts.per_host = usize::from(c.per_host);
    opts.client.http1_only = c.http11;
    opts.client.http3 = c.http3;
    opts.max_resources = c.max_resources.max(1);
    let mut vp = if c.mobile {
        redline_web::viewport::MOBILE
    } else {
        redline_web::viewport::DESKTOP
    };
    if let Some(v) = &c.viewport {
        (vp.width, vp.height) = redline_web::viewport::parse_size(v)?;
    }
    if let Some(d) = &c.dpr {
        vp.dpr = redline_web::viewport::parse_dpr(d)?;
    }
    opts.viewport = vp;
    opts.client.user_agent = match &c.user_agent {
        Some(ua) if ua.contains(['\r', '\n']) => {
            return Err("invalid --user-agent: line breaks are not allowed".into())
        }
        Some(ua) => ua.clone(),
        None if c.mobile => redline_web::http::CHROME_MOBILE_UA.to_string(),
        None => redline_web::http::CHROME_DESKTOP_UA.to_string(),
    };
    opts.same_origin = c.same_origin;
    opts.max_bytes = c.max_bytes;
    if c.insecure || c.cacert.is_some() {
        let args = redline_web::http::TlsArgs {
            insecure: c.insecure,
            cacert: c.cacert.clone(),
            ..Default::default()
        };
        opts.client.tls = Some(redline_web::http::Tls::new(&args)?);
    }
    if !u.username().is_empty() || u.password().is_some() {
        let user = percent_decode(u.username());
        let pass = percent_decode(u.password().unwrap_or(""));
        opts.client.headers.push((
            "Authorization".into(),
            format!("Basic {}", b64(format!("{user}:{pass}").as_bytes())),
        ));
        let _ = u.set_username("");
        let _ = u.set_password(None);
    }
    for h in &c.headers {
        let Some((n, v)) = h.split_once(':') else {
            return Err(format!(
                "invalid header {:?}: expected 'Name: value'",
                h.split(':').next().unwrap_or("")
            ));
        };
        let n = n.trim();
        if n.is_empty()
            || !n
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(format!("invalid header name {n:?}"));
        }
        if v.contains(['\r', '\n']) {
            return Err(format!(
                "invalid value for header {n}: line breaks are not allowed"
            ));
        }
        opts.client
            .headers
            .push((n.to_string(), v.trim().to_string()));
    }
    Ok((u, opts))
}

/// `--browser`: runs the page in Chromium and gives the loader the images
/// it requested; with `trace`, returns Chromium's trace of the load (for
/// the audit's render-blocking simulation). Err: the exit code, the
/// one-line error printed.
fn browse(
    c: &CommonArgs,
    u: &redline_web::url::Url,
    opts: &mut LoadOpts,
    trace: bool,
) -> Result<Option<redline_web::trace::PageTrace>, Exit> {
    let Some(path) = &c.browser else {
        return Ok(None);
    };
    if let Err(e) = redline_web::browser::find(path) {
        return Err(crate::exit::fail(Exit::Usage, e));
    }
    // Chromium takes no CA file: with --cacert it accepts the page's
    // certificate once redline's own client has verified it with that CA.
    let verified_by_cacert = c.cacert.is_some()
        && !c.insecure
        && u.scheme() == "https"
        && redline_web::audit::transport::probe_tls(
            u,
            &redline_web::http::TlsArgs {
                cacert: c.cacert.clone(),
                ..Default::default()
            },
            c.connect_timeout,
        )
        .verified
            == Some(true);
    let bo = redline_web::browser::BrowserOpts {
        program: path.clone(),
        viewport: opts.viewport,
        user_agent: opts.client.user_agent.clone(),
        timeout: c.timeout + c.connect_timeout,
        insecure: c.insecure || verified_by_cacert,
        headers: opts.client.headers.clone(),
        trace,
    };
    if !c.quiet {
        let line = format!(
            "Running the page's scripts in Chromium: {}...",
            redact(u.as_str())
        );
        if c.output == Output::Text {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    }
    match redline_web::browser::visit(u, &bo) {
        Ok(seen) => {
            opts.script_images = seen.images;
            Ok(seen.trace)
        }
        Err(e) => {
            let code = match e {
                redline_web::browser::BrowserError::Missing(_) => Exit::Usage,
                redline_web::browser::BrowserError::Failed(_) => Exit::Failure,
            };
            Err(crate::exit::fail(code, e))
        }
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The user's URL for an error message, without credentials.
fn redact(raw: &str) -> String {
    match (raw.find("://"), raw.rfind('@')) {
        (Some(s), Some(a)) if a > s => format!("{}[redacted]@{}", &raw[..s + 3], &raw[a + 1..]),
        (None, Some(a)) => format!("[redacted]@{}", &raw[a + 1..]),
        _ => raw.to_string(),
    }
}

/// Loads the views; Err(exit code) when the page itself did not load, or
/// (`html_only`, for `page`) answered with something other than HTML.
fn load_views(
    c: &CommonArgs,
    u: &redline_web::url::Url,
    runs: usize,
    opts: &LoadOpts,
    html_only: bool,
) -> Result<page::PageReport, Exit> {
    let to_stdout = c.output == Output::Text;
    let quiet = c.quiet;
    let mut echo = |line: &str| {
        if quiet {
            return;
        }
        if to_stdout {
            let mut o = std::io::stdout().lock();
            let _ = writeln!(o, "{line}");
            let _ = o.flush();
        } else {
            eprintln!("{line}");
        }
    };
    let rep = page::run(u, runs, opts, &mut echo);
    let first = &rep.views[0];
    let doc_ok = first.page_loaded();
    if !doc_ok {
        let err = first
            .entries
            .iter()
            .filter(|e| e.kind == redline_web::discover::Kind::Document)
            .find_map(|e| e.error.clone())
            .or_else(|| first.entries.first().and_then(|e| e.error.clone()))
            .unwrap_or_else(|| "no response".into());
        let code = if err.starts_with("cannot resolve") {
            crate::exit::Exit::Usage
        } else {
            crate::exit::Exit::Failure
        };
        return Err(crate::exit::fail(
            code,
            format!("cannot load {}: {err}", rep.url),
        ));
    }
    // The page must be a page: the last document answer (after redirects)
    // with a body should be HTML.
    let last_doc = first
        .entries
        .iter()
        .rfind(|e| e.kind == redline_web::discover::Kind::Document);
    if let Some(d) = last_doc.filter(|_| html_only) {
        let ok_status = d.status.is_some_and(|s| (200..300).contains(&s));
        let html = matches!(
            d.content_type.as_str(),
            "" | "text/html" | "application/xhtml+xml"
        );
        if ok_status && !html {
            return Err(crate::exit::fail(
                crate::exit::Exit::Failure,
                format!(
                    "{} is not an HTML page (Content-Type {}): give the URL of a page",
                    d.url, d.content_type
                ),
            ));
        }
    }
    for l in &rep.views {
        if l.budget_exhausted {
            eprintln!(
                "redline: warning: the {} stopped at the byte budget ({} bytes, --max-bytes): its result is TRUNCATED",
                l.view.name(),
                opts.max_bytes
            );
        }
    }
    Ok(rep)
}

fn print(s: &str) -> Exit {
    let mut o = std::io::stdout().lock();
    if o.write_all(s.as_bytes()).and_then(|_| o.flush()).is_err() {
        return crate::exit::fail(crate::exit::Exit::Failure, "cannot write the report");
    }
    crate::exit::Exit::Ok
}

/// Writes the HTML report; Err: the exit code after the one error line.
/// `audit --junit`: one case per check, failing at or above `limit`,
/// skipped when not applicable; a page that is not 2xx is one more failing case.
fn audit_cases(r: &audit::Audit, limit: audit::Severity) -> Vec<redline_report::junit::Case> {
    use redline_report::junit::{Case, Verdict};
    let mut cases = Vec::new();
    if !r.page.ok {
        let st = r
            .page
            .status
            .map_or("no answer".to_string(), |s| s.to_string());
        cases.push(Case {
            name: "page answered 2xx".into(),
            classname: "redline.audit".into(),
            time_s: 0.0,
            verdict: Verdict::Failure {
                message: format!("the page answered {st}, not 2xx"),
                text: format!("the page answered {st}, not 2xx"),
            },
            system_out: None,
        });
    }
    for c in &r.checks {
        let evidence: Vec<String> = c.findings.iter().map(|f| f.evidence.clone()).collect();
        let verdict = if !c.applicable {
            Verdict::Skipped(format!("N/A: {}", c.summary))
        } else if c.severity >= limit && c.severity != audit::Severity::Ok {
            Verdict::Failure {
                message: format!("{} (grade {}): {}", c.severity.name(), c.grade, c.summary),
                text: evidence.join("\n"),
            }
        } else {
            Verdict::Pass
        };
        cases.push(Case {
            name: c.id.to_string(),
            classname: "redline.audit".into(),
            time_s: 0.0,
            verdict,
            system_out: Some(format!(
                "{}: grade {}, score {}: {}",
                c.title, c.grade, c.score, c.summary
            )),
        });
    }
    cases
}

/// Writes a JUnit file (exit 1 with one line when it cannot be written).
pub(crate) fn write_junit(
    path: &std::path::Path,
    name: &str,
    cases: &[redline_report::junit::Case],
) -> Result<(), Exit> {
    std::fs::write(path, redline_report::junit::xml(name, 0.0, cases)).map_err(|e| {
        crate::exit::fail(
            crate::exit::Exit::Failure,
            format!("cannot write --junit {}: {e}", path.display()),
        )
    })
}

fn write_html(path: &std::path::Path, html: &str) -> Result<(), Exit> {
    std::fs::write(path, html).map_err(|e| {
        crate::exit::fail(
            crate::exit::Exit::Failure,
            format!("cannot write {}: {e}", path.display()),
        )
    })
}

/// Checks that `path` can be written before the load (so a typo does not
/// cost a whole page load); a file that did not exist is removed again.
fn check_writable(path: &std::path::Path, flag: &str) -> Result<(), Exit> {
    let existed = path.exists();
    let r = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path);
    match r {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => Err(crate::exit::fail(
            crate::exit::Exit::Failure,
            format!("cannot write {flag} {}: {e}", path.display()),
        )),
    }
}

/// Saves the page load in the history; one line on stderr either way.
/// Saves the page load; false (and the reason on stderr) when it could not.
fn save_page(a: &PageArgs, rep: &page::PageReport, json: &str) -> bool {
    let first = &rep.summary[0];
    let save = redline_history::PageSave {
        started_at: rep
            .views
            .first()
            .map(|l| l.started_at.as_str())
            .unwrap_or(""),
        url: &rep.url,
        label: a.label.as_deref(),
        note: a.note.as_deref(),
        runs: rep.runs as u64,
        first_view_ms: first.elapsed_ms,
        requests: first.requests as u64,
        errors: first.errors as u64,
        truncated: rep.views.iter().any(|l| l.truncated),
        record: json,
    };
    match crate::cmd_history::save_page(a.db.as_deref(), &save) {
        Ok(id) => {
            let mut l = format!("redline: saved as page load {id}");
            if let Some(lb) = &a.label {
                l.push_str(&format!(" (label {lb})"));
            }
            eprintln!("{l}");
            true
        }
        Err(e) => {
            eprintln!("redline: error: the page load was not saved: {e}");
            false
        }
    }
}

fn cmd_page(a: PageArgs) -> Exit {
    let (u, mut opts) = match prepare(&a.common) {
        Ok(x) => x,
        Err(e) => return crate::exit::fail(crate::exit::Exit::Usage, e),
    };
    for (p, flag) in [(&a.har, "--har"), (&a.common.html, "--html")] {
        if let Some(p) = p {
            if let Err(code) = check_writable(p, flag) {
                return code;
            }
        }
    }
    if let Err(code) = browse(&a.common, &u, &mut opts, false) {
        return code;
    }
    let rep = match load_views(&a.common, &u, a.runs as usize, &opts, true) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let json = match serde_json::to_string_pretty(&rep) {
        Ok(s) => s,
        Err(e) => return crate::exit::fail(crate::exit::Exit::Failure, e),
    };
    let saved = a.no_save || save_page(&a, &rep, &json);
    if let Some(p) = &a.common.html {
        if let Err(code) = write_html(p, &redline_web::render::audit_html::page_report(&rep)) {
            return code;
        }
    }
    if let Some(p) = &a.har {
        let har = redline_web::har::har(&rep);
        let text = serde_json::to_string_pretty(&har).unwrap_or_default() + "\n";
        if let Err(e) = std::fs::write(p, text) {
            return crate::exit::fail(
                crate::exit::Exit::Failure,
                format!("cannot write --har {}: {e}", p.display()),
            );
        }
    }
    let code = match a.common.output {
        Output::Json => print(&(json + "\n")),
        Output::Text => print(&redline_report::escape::clean_text(&page::render_text(
            &rep, &u,
        ))),
    };
    if code != crate::exit::Exit::Ok {
        return code;
    }
    // The page itself (after redirects) answered an error: the report is
    // out, and the exit code says it, as `audit --fail-on` does.
    let page_status = rep.views[0]
        .entries
        .iter()
        .rfind(|e| e.kind == redline_web::discover::Kind::Document)
        .and_then(|d| d.status)
        .filter(|s| *s >= 400);
    if let Some(st) = page_status {
        return crate::exit::fail(
            crate::exit::Exit::Failure,
            format!("the page answered {st}, not 2xx"),
        );
    }
    if !saved {
        crate::exit::Exit::Failure
    } else {
        code
    }
}

fn cmd_audit(a: AuditArgs) -> Exit {
    let (u, mut opts) = match prepare(&a.common) {
        Ok(x) => x,
        Err(e) => return crate::exit::fail(crate::exit::Exit::Usage, e),
    };
    let trace = match browse(&a.common, &u, &mut opts, true) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let rep = match load_views(&a.common, &u, 1, &opts, false) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut probes = if a.no_probes {
        audit::Probes::default()
    } else {
        let tls = redline_web::http::TlsArgs {
            insecure: a.common.insecure,
            cacert: a.common.cacert.clone(),
            ..Default::default()
        };
        let last = audit::final_url(&rep.views[0]).unwrap_or_else(|| rep.url.clone());
        audit::transport::probe(&last, &opts.client, &tls, a.http_port)
    };
    // Images are judged at the screen the page was discovered for.
    probes.dpr = Some(opts.viewport.dpr);
    probes.browser = a.common.browser.is_some();
    probes.trace = trace;
    let result = audit::audit_page_with(&rep, &probes);
    if let Some(p) = &a.common.html {
        if let Err(code) = write_html(
            p,
            &redline_web::render::audit_html::audit_report(&result, &rep),
        ) {
            return code;
        }
    }
    if let Some(p) = &a.junit {
        let limit = a
            .fail_on
            .map(|f| f.audit())
            .unwrap_or(audit::Severity::Warning);
        if let Err(code) = write_junit(p, "redline audit", &audit_cases(&result, limit)) {
            return code;
        }
    }
    let code = match a.common.output {
        Output::Json => match serde_json::to_string_pretty(&result) {
            Ok(s) => print(&(s + "\n")),
            Err(e) => crate::exit::fail(crate::exit::Exit::Failure, e),
        },
        Output::Text => print(&redline_report::escape::clean_text(&audit::render_text(
            &result,
        ))),
    };
    if code != crate::exit::Exit::Ok {
        return code;
    }
    let Some(limit) = a.fail_on.map(|f| f.audit()) else {
        return code;
    };
    if result.severity >= limit {
        match result.page.status.filter(|_| !result.page.ok) {
            Some(st) => {
                eprintln!(
                    "redline: audit: the page answered {st}, not 2xx (exit {})",
                    Exit::Findings.code()
                )
            }
            None => eprintln!(
                "redline: audit: findings at or above {} (exit {})",
                limit.name(),
                Exit::Findings.code()
            ),
        }
        Exit::Findings
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_redaction() {
        assert_eq!(b64(b"user:pass"), "dXNlcjpwYXNz");
        assert_eq!(b64(b"ab"), "YWI=");
        assert_eq!(redact("http://u:secret@h/x"), "http://[redacted]@h/x");
        assert_eq!(percent_decode("p%40ss"), "p@ss");
    }

    #[test]
    fn sizes() {
        assert_eq!(size("256MiB").unwrap(), 256 << 20);
        assert_eq!(size("64m").unwrap(), 64 << 20);
        assert_eq!(size("1G").unwrap(), 1 << 30);
        assert_eq!(size("2048").unwrap(), 2048);
        assert_eq!(size("1.5K").unwrap(), 1536);
        for bad in ["", "abc", "10X", "-5M", "12", "NaNM"] {
            assert!(size(bad).is_err(), "{bad}");
        }
    }
}
