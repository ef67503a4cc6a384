//! `--browser`: runs the page's scripts in headless Chromium, as Lighthouse
//! does, only to learn what redline cannot see without a script engine —
//! the images a script inserts (`innerHTML`, `new Image()`…), the size
//! Chromium lays each `<img>` out at, and Chromium's trace of the load
//! (the main thread's tasks, its requests and first contentful paint:
//! [`crate::trace`]), which the render-blocking check simulates as
//! Lighthouse does. redline's own client still fetches and measures every
//! byte ([`crate::load::LoadOpts::script_images`]).
//!
//! Chromium is driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: commands on its fd 3, answers on its fd 4,
//! each a JSON text ended by a NUL byte), with a fresh temporary profile,
//! headless, no sandbox, no GPU, no background traffic. The fds are given
//! by `sh -c 'exec … 3<&0 4>&1'`, so the process whose PID redline holds is
//! Chromium itself. Everything is bounded: the whole run by a deadline,
//! each answer by that deadline, each message by [`MAX_MESSAGE`], the
//! events kept by [`MAX_EVENTS`]; Chromium is killed by PID at the end,
//! whatever happened, and its profile removed.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::viewport::Viewport;

/// One DevTools message read at most (bytes); a longer one is dropped.
pub const MAX_MESSAGE: usize = 32 << 20;
/// Events kept at most while a command waits (a bound for hostile pages).
pub const MAX_EVENTS: usize = 100_000;
/// Images reported at most.
pub const MAX_IMAGES: usize = 5_000;
/// At most this long is waited for the trace after the page's images were
/// read (within the run's deadline).
const TRACE_WAIT: Duration = Duration::from_secs(10);
/// The trace categories read: Lighthouse's (`Trace.getDefaultTraceCategories`)
/// without screenshots, V8 and latency, which Lantern does not read.
const TRACE_CATEGORIES: &str = "-*,disabled-by-default-lighthouse,loading,devtools.timeline,disabled-by-default-devtools.timeline,disabled-by-default-devtools.timeline.stack,blink.user_timing";
/// How long the network must be quiet after the load event before the
/// images are read (a script may insert images just after it).
const QUIET: Duration = Duration::from_millis(500);
/// At most this long is waited for quiet after the load event.
const AFTER_LOAD: Duration = Duration::from_secs(3);

/// How to run the browser.
#[derive(Clone)]
pub struct BrowserOpts {
    /// The Chromium (or Chrome) executable: a path, or a name looked up
    /// on `PATH` (`chromium`).
    pub program: String,
    /// The screen: window size, device pixel ratio, mobile emulation.
    pub viewport: Viewport,
    /// The User-Agent Chromium sends (redline's, so the server answers alike).
    pub user_agent: String,
    /// The whole run, start to the images read, at most.
    pub timeout: Duration,
    /// Accept any certificate (`--insecure`; with `--cacert`, only once
    /// redline's own client has verified the page's certificate with it).
    pub insecure: bool,
    /// Headers the load sends (`-H`, the URL's `user:pass@` as
    /// `Authorization`, cookies): Chromium adds them to its requests to
    /// the page's own origin only (`Fetch.continueRequest`), as redline's
    /// client sends credentials; never printed or logged.
    pub headers: Vec<(String, String)>,
    /// Record Chromium's trace of the load ([`Visit::trace`]: `audit`'s
    /// render-blocking simulation; `page` has no use for it and skips the
    /// wait for it).
    pub trace: bool,
}

impl std::fmt::Debug for BrowserOpts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserOpts")
            .field("program", &self.program)
            .field("viewport", &self.viewport)
            .field("user_agent", &self.user_agent)
            .field("timeout", &self.timeout)
            .field("insecure", &self.insecure)
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// An image Chromium requested while it ran the page.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SeenImage {
    /// Its URL (no fragment).
    pub url: String,
    /// The width and height, in CSS px, Chromium displays it at (its widest
    /// rendered `<img>` whose `currentSrc` it is); none: no rendered `<img>`
    /// shows it (`display: none`, a CSS background, a `new Image()`).
    pub displayed: Option<(f64, f64)>,
}

/// What Chromium saw of the page.
#[derive(Clone, Debug, Default)]
pub struct Visit {
    /// The images it requested, in request order, each with the size it
    /// displays it at.
    pub images: Vec<SeenImage>,
    /// Its trace of the load (none: the trace was not complete in time).
    pub trace: Option<crate::trace::PageTrace>,
}

/// Why the browser gave nothing: one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// No such executable (the path given, or `chromium` on `PATH`).
    #[error("{0}")]
    Missing(String),
    /// It started but failed, or did not answer in time.
    #[error("{0}")]
    Failed(String),
}

/// The Chromium of `--browser`: a path (with a `/`), which must exist, or
/// a name found on `PATH`.
pub fn find(program: &str) -> Result<PathBuf, BrowserError> {
    if program.contains('/') {
        let p = Path::new(program);
        let ok = std::fs::metadata(p).is_ok_and(|m| m.is_file());
        return if ok {
            Ok(p.to_path_buf())
        } else {
            Err(BrowserError::Missing(format!(
                "--browser {}: no such file (give the path of Chromium or Chrome)",
                p.display()
            )))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(program);
        if !program.is_empty() && std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
            return Ok(p);
        }
    }
    Err(BrowserError::Missing(format!(
        "--browser: no {program:?} on PATH (install chromium, or give --browser=PATH)"
    )))
}

/// The Chromium process: killed by PID and reaped, its profile removed,
/// when dropped (also on an early return).
struct Guard {
    child: Child,
    profile: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// One DevTools session over the pipe.
struct Pipe {
    to: ChildStdin,
    from: Receiver<Value>,
    next_id: u64,
    events: Vec<Value>,
    trace: crate::trace::Collector,
    trace_done: bool,
    /// Headers added to the page origin's requests paused by `Fetch`, and
    /// the session they are continued on.
    extra: Option<(Vec<(String, String)>, String)>,
    end: Instant,
    guard: Guard,
}

impl Pipe {
    /// Why Chromium stopped answering: its exit status and its last log line.
    fn gone(&mut self, what: &str) -> BrowserError {
        let status = match self.guard.child.try_wait() {
            Ok(Some(s)) => format!(" (it exited: {s})"),
            _ => String::new(),
        };
        let log = std::fs::read(self.guard.profile.join("stderr.log")).unwrap_or_default();
        let log = String::from_utf8_lossy(&log);
        let last = log
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| format!(": {}", l.trim().chars().take(200).collect::<String>()))
            .unwrap_or_default();
        BrowserError::Failed(format!("Chromium {what}{status}{last}"))
    }

    /// Sends `method` (to `session`, or the browser) and returns its
    /// `result`; events that arrive meanwhile are kept.
    fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, BrowserError> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        if self
            .to
            .write_all(&bytes)
            .and_then(|_| self.to.flush())
            .is_err()
        {
            return Err(self.gone(&format!("closed its DevTools pipe before {method}")));
        }
        loop {
            match self.next(self.end) {
                Ok(v) if v["id"] == json!(id) => {
                    if let Some(e) = v.get("error") {
                        let m = e["message"].as_str().unwrap_or("error");
                        return Err(BrowserError::Failed(format!("Chromium: {method}: {m}")));
                    }
                    return Ok(v["result"].clone());
                }
                Ok(v) => self.keep(v),
                Err(true) => {
                    return Err(self.gone(&format!("did not answer {method} in time")));
                }
                Err(false) => return Err(self.gone(&format!("ended before answering {method}"))),
            }
        }
    }

    /// Sends `method` without waiting for its answer (an answer to it is
    /// dropped as it arrives).
    fn send(&mut self, session: &str, method: &str, params: Value) {
        self.next_id += 1;
        let msg = json!({"id": self.next_id, "method": method, "params": params,
                         "sessionId": session});
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        let _ = self.to.write_all(&bytes).and_then(|_| self.to.flush());
    }

    fn keep(&mut self, v: Value) {
        match v["method"].as_str() {
            Some("Fetch.requestPaused") => {
                let Some((extra, session)) = self.extra.clone() else {
                    return;
                };
                let p = &v["params"];
                let id = p["requestId"].clone();
                // The request's headers, the load's replacing any of the
                // same name.
                let mut headers: Vec<Value> = p["request"]["headers"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(n, _)| !extra.iter().any(|(e, _)| e.eq_ignore_ascii_case(n)))
                    .map(|(n, v)| json!({"name": n, "value": v.as_str().unwrap_or("")}))
                    .collect();
                headers.extend(extra.iter().map(|(n, v)| json!({"name": n, "value": v})));
                self.send(
                    &session,
                    "Fetch.continueRequest",
                    json!({"requestId": id, "headers": headers}),
                );
                return;
            }
            Some("Tracing.dataCollected") => return self.trace.add(&v["params"]["value"]),
            Some("Tracing.tracingComplete") => {
                self.trace_done = true;
                return;
            }
            _ => {}
        }
        if v.get("method").is_some() && self.events.len() < MAX_EVENTS {
            self.events.push(v);
        }
    }

    /// The next message before `until`; Err(true): none came by then,
    /// Err(false): the pipe closed.
    fn next(&mut self, until: Instant) -> Result<Value, bool> {
        let left = until.saturating_duration_since(Instant::now());
        match self.from.recv_timeout(left) {
            Ok(v) => Ok(v),
            Err(RecvTimeoutError::Timeout) => Err(true),
            Err(RecvTimeoutError::Disconnected) => Err(false),
        }
    }
}

/// Reads NUL-ended JSON messages from Chromium's fd 4 until it closes.
fn reader(out: impl Read, tx: mpsc::SyncSender<Value>) {
    let mut r = BufReader::new(out);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // Bounded: at most MAX_MESSAGE + 1 bytes are kept of one message.
        let n = match (&mut r)
            .take(MAX_MESSAGE as u64 + 1)
            .read_until(0, &mut buf)
        {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if buf.last() != Some(&0) {
            // Too long: skip to its end.
            let mut skip = Vec::new();
            loop {
                skip.clear();
                match (&mut r).take(1 << 20).read_until(0, &mut skip) {
                    Ok(0) | Err(_) => return,
                    Ok(_) if skip.last() == Some(&0) => break,
                    Ok(_) => {}
                }
            }
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&buf[..n - 1]) else {
            continue;
        };
        if tx.send(v).is_err() {
            return;
        }
    }
}

/// Starts Chromium on the pipe with a fresh profile.
fn launch(program: &Path, opts: &BrowserOpts) -> Result<Pipe, BrowserError> {
    let profile = std::env::temp_dir().join(format!(
        "redline-browser-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&profile)
        .map_err(|e| BrowserError::Failed(format!("--browser: a temporary profile: {e}")))?;
    let log = std::fs::File::create(profile.join("stderr.log"))
        .map_err(|e| BrowserError::Failed(format!("--browser: a temporary profile: {e}")))?;
    let vp = opts.viewport;
    let mut args = vec![
        "--headless".to_string(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-background-networking".into(),
        "--disable-dev-shm-usage".into(),
        "--no-first-run".into(),
        "--no-default-browser-check".into(),
        "--remote-debugging-pipe".into(),
        format!("--user-data-dir={}", profile.join("p").display()),
        format!("--window-size={},{}", vp.width, vp.height),
        format!("--user-agent={}", opts.user_agent),
    ];
    if opts.insecure {
        args.push("--ignore-certificate-errors".into());
    }
    args.push("about:blank".into());
    // fd 3 (commands) is the shell's stdin, fd 4 (answers) its stdout;
    // `exec` makes the PID Chromium's.
    let child = Command::new("/bin/sh")
        .arg("-c")
        .arg("exec \"$0\" \"$@\" 3<&0 4>&1 </dev/null >/dev/null")
        .arg(program)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&profile);
            return Err(BrowserError::Failed(format!(
                "--browser: cannot start {}: {e}",
                program.display()
            )));
        }
    };
    let (to, out) = (child.stdin.take(), child.stdout.take());
    let guard = Guard { child, profile };
    let (Some(to), Some(out)) = (to, out) else {
        return Err(BrowserError::Failed(
            "--browser: no pipe to Chromium".into(),
        ));
    };
    let (tx, rx) = mpsc::sync_channel(1024);
    std::thread::spawn(move || reader(out, tx));
    Ok(Pipe {
        to,
        from: rx,
        next_id: 0,
        events: Vec::new(),
        trace: crate::trace::Collector::default(),
        trace_done: false,
        extra: None,
        end: Instant::now() + opts.timeout,
        guard,
    })
}

/// What the page shows: each `<img>`'s `currentSrc`, the width and height
/// in CSS px its pixels are drawn at (its content box: the rendered box of
/// `getBoundingClientRect` less padding and border, as Lighthouse's
/// `displayedWidth`/`displayedHeight`), and whether it is rendered.
const IMAGES_JS: &str = r#"JSON.stringify(Array.from(document.images).slice(0, 5000).map(function (i) {
  var r = i.getBoundingClientRect(), cs = getComputedStyle(i);
  var px = function (p) { return parseFloat(cs.getPropertyValue(p)) || 0; };
  var w = r.width - px('padding-left') - px('padding-right')
        - px('border-left-width') - px('border-right-width');
  var h = r.height - px('padding-top') - px('padding-bottom')
        - px('border-top-width') - px('border-bottom-width');
  return [i.currentSrc || i.src, Math.max(w, 0), Math.max(h, 0),
          cs.display !== 'none' && cs.visibility !== 'hidden' && w > 0 && h > 0];
}))"#;

/// Loads `url` in Chromium, waits for its load event (and a short network
/// quiet after it), and returns the images it requested, in request order,
/// each with the size Chromium displays it at.
pub fn images(url: &url::Url, opts: &BrowserOpts) -> Result<Vec<SeenImage>, BrowserError> {
    visit(url, opts).map(|v| v.images)
}

/// As [`images`], and Chromium's trace of the load ([`Visit::trace`]).
pub fn visit(url: &url::Url, opts: &BrowserOpts) -> Result<Visit, BrowserError> {
    let program = find(&opts.program)?;
    let mut p = launch(&program, opts)?;
    let vp = opts.viewport;
    let target = p.call(None, "Target.createTarget", json!({"url": "about:blank"}))?;
    let target = target["targetId"].as_str().unwrap_or_default().to_string();
    let s = p.call(
        None,
        "Target.attachToTarget",
        json!({"targetId": target, "flatten": true}),
    )?;
    let session = s["sessionId"].as_str().unwrap_or_default().to_string();
    let s = Some(session.as_str());
    p.call(s, "Network.enable", json!({}))?;
    p.call(s, "Page.enable", json!({}))?;
    p.call(
        s,
        "Network.setUserAgentOverride",
        json!({"userAgent": opts.user_agent}),
    )?;
    p.call(
        s,
        "Emulation.setDeviceMetricsOverride",
        json!({"width": vp.width, "height": vp.height,
               "deviceScaleFactor": vp.dpr, "mobile": vp.mobile}),
    )?;
    if vp.mobile {
        p.call(
            s,
            "Emulation.setTouchEmulationEnabled",
            json!({"enabled": true, "maxTouchPoints": 5}),
        )?;
    }
    // The load's headers, on the page's own origin's requests only.
    if !opts.headers.is_empty() {
        let origin = url.origin().ascii_serialization();
        p.extra = Some((opts.headers.clone(), session.clone()));
        p.call(
            s,
            "Fetch.enable",
            json!({"patterns": [{"urlPattern": format!("{origin}/*"), "requestStage": "Request"}]}),
        )?;
    }
    // The trace is a bonus: a Chromium that refuses it still gives images.
    let tracing = opts.trace
        && p.call(
            s,
            "Tracing.start",
            json!({"categories": TRACE_CATEGORIES, "transferMode": "ReportEvents"}),
        )
        .is_ok();
    let nav = p.call(s, "Page.navigate", json!({"url": url.as_str()}))?;
    let frame = nav["frameId"].as_str().unwrap_or_default().to_string();
    if let Some(e) = nav["errorText"].as_str().filter(|e| !e.is_empty()) {
        return Err(BrowserError::Failed(format!(
            "Chromium could not load {url}: {e}"
        )));
    }
    // The load event, then quiet on the network (bounded by both limits).
    let mut loaded = p
        .events
        .iter()
        .any(|e| e["method"] == "Page.loadEventFired");
    let mut quiet_from = Instant::now();
    let end = p.end;
    let after_end = |loaded_at: Instant| (loaded_at + AFTER_LOAD).min(end);
    let mut loaded_at = Instant::now();
    loop {
        let until = if loaded {
            (quiet_from + QUIET).min(after_end(loaded_at))
        } else {
            end
        };
        match p.next(until) {
            Ok(v) => {
                let m = v["method"].as_str().unwrap_or("");
                if m == "Page.loadEventFired" && !loaded {
                    loaded = true;
                    loaded_at = Instant::now();
                }
                if m.starts_with("Network.") {
                    quiet_from = Instant::now();
                }
                p.keep(v);
            }
            Err(true) if loaded => break,
            Err(true) => {
                return Err(BrowserError::Failed(format!(
                    "Chromium: {url} did not fire its load event within {:?}",
                    opts.timeout
                )))
            }
            Err(false) => return Err(p.gone("ended before the page loaded")),
        }
    }
    let shown = p.call(
        s,
        "Runtime.evaluate",
        json!({"expression": IMAGES_JS, "returnByValue": true}),
    )?;
    let shown: Vec<(String, f64, f64, bool)> = shown["result"]["value"]
        .as_str()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default();
    let trace = if tracing {
        read_trace(&mut p, s, &frame)
    } else {
        None
    };
    let _ = p.call(None, "Browser.close", json!({}));
    Ok(Visit {
        images: collect(&p.events, &shown),
        trace,
    })
}

/// Ends the trace and reads it (at most [`TRACE_WAIT`], within the run's
/// deadline): the page's tasks, requests and paints, or none.
fn read_trace(p: &mut Pipe, s: Option<&str>, frame: &str) -> Option<crate::trace::PageTrace> {
    p.call(s, "Tracing.end", json!({})).ok()?;
    let until = (Instant::now() + TRACE_WAIT).min(p.end);
    while !p.trace_done {
        match p.next(until) {
            Ok(v) => p.keep(v),
            Err(_) => return None,
        }
    }
    crate::trace::page_trace(&p.trace.events, &p.events, frame)
}

/// The images of `events` (`Network.requestWillBeSent` of type Image, http
/// and https only, each URL once), with the widest rendered `<img>` of
/// `shown` whose source each is.
fn collect(events: &[Value], shown: &[(String, f64, f64, bool)]) -> Vec<SeenImage> {
    let mut out: Vec<SeenImage> = Vec::new();
    for e in events {
        if e["method"] != "Network.requestWillBeSent" || e["params"]["type"] != "Image" {
            continue;
        }
        let Some(u) = e["params"]["request"]["url"]
            .as_str()
            .and_then(|u| url::Url::parse(u).ok())
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .map(|mut u| {
                u.set_fragment(None);
                u.to_string()
            })
        else {
            continue;
        };
        if out.len() >= MAX_IMAGES || out.iter().any(|i| i.url == u) {
            continue;
        }
        let displayed = shown
            .iter()
            .filter(|(src, _, _, on)| *on && url::Url::parse(src).is_ok_and(|s| s.as_str() == u))
            .map(|(_, w, h, _)| (*w, *h))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        out.push(SeenImage { url: u, displayed });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_from_events_with_their_rendered_size() {
        let ev = |t: &str, u: &str| {
            json!({"method": "Network.requestWillBeSent",
                   "params": {"type": t, "request": {"url": u}}})
        };
        let events = vec![
            ev("Document", "http://a.test/"),
            ev("Image", "http://a.test/a.png#x"),
            ev("Image", "http://a.test/a.png"),
            ev("Image", "data:image/png;base64,AAAA"),
            ev("Image", "http://a.test/hidden.jpg"),
            ev("Stylesheet", "http://a.test/s.css"),
        ];
        let shown = vec![
            ("http://a.test/a.png".to_string(), 100.0, 50.0, true),
            ("http://a.test/a.png".to_string(), 200.0, 100.0, true),
            ("http://a.test/hidden.jpg".to_string(), 0.0, 0.0, false),
        ];
        let got = collect(&events, &shown);
        assert_eq!(
            got,
            vec![
                SeenImage {
                    url: "http://a.test/a.png".into(),
                    displayed: Some((200.0, 100.0))
                },
                SeenImage {
                    url: "http://a.test/hidden.jpg".into(),
                    displayed: None
                },
            ]
        );
    }

    #[test]
    fn a_missing_path_is_one_line() {
        let e = find("/nonexistent/chromium").unwrap_err();
        let s = e.to_string();
        assert!(matches!(e, BrowserError::Missing(_)));
        assert!(
            s.contains("/nonexistent/chromium") && !s.contains('\n'),
            "{s}"
        );
    }
}
