//! Chromium's trace of a page load (`--browser`), reduced to what
//! Lighthouse's simulator, Lantern, builds its graph from
//! (`PageDependencyGraph`): the renderer main thread's top-level tasks
//! (`RunTask`) with what happened inside each (HTML parsed, layout,
//! paint, scripts evaluated, requests sent, stylesheets parsed, timers),
//! the page's requests as Chromium made them (DevTools `Network` events:
//! start, end, priority, initiator, bytes) and its first contentful paint.
//! Fed by [`crate::browser`] from the DevTools `Tracing` domain; every list
//! is bounded. Read by `audit::fcp_graph`.

use serde_json::Value;

/// Trace events kept at most (those of the names below only).
pub const MAX_TRACE_EVENTS: usize = 500_000;
/// Tasks and requests kept at most.
pub const MAX_ITEMS: usize = 20_000;
/// URLs kept per task at most.
const MAX_URLS: usize = 64;

/// The trace events Lantern reads (`PageDependencyGraph.getCPUNodes`,
/// `linkCPUNodes`), the paint marks and what names the main thread.
const KEPT: &[&str] = &[
    "RunTask",
    "ThreadControllerImpl::RunTask",
    "ParseHTML",
    "Layout",
    "Paint",
    "EvaluateScript",
    "ResourceSendRequest",
    "TimerInstall",
    "TimerFire",
    "InvalidateLayout",
    "ScheduleStyleRecalculation",
    "XHRReadyStateChange",
    "FunctionCall",
    "v8.compile",
    "ParseAuthorStyleSheet",
    "firstContentfulPaint",
    "firstPaint",
];

/// One trace event of those Lantern reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Its name (`RunTask`, `ParseHTML`…).
    pub name: String,
    /// Process.
    pub pid: i64,
    /// Thread.
    pub tid: i64,
    /// Start (µs, the trace's clock: Chromium's monotonic clock).
    pub ts: f64,
    /// Duration (µs; 0 for instant events).
    pub dur: f64,
    /// `args.data` (or `args`, for the paint marks: their `frame`).
    pub data: Value,
}

/// Collects the trace events of [`KEPT`] from `Tracing.dataCollected`
/// chunks, at most [`MAX_TRACE_EVENTS`].
#[derive(Clone, Debug, Default)]
pub struct Collector {
    /// The events kept, in arrival order.
    pub events: Vec<Event>,
    /// Events of those names not kept (over the bound).
    pub dropped: usize,
}

impl Collector {
    /// Takes the events of one `Tracing.dataCollected` chunk (its
    /// `params.value`, an array of trace events).
    pub fn add(&mut self, chunk: &Value) {
        let Some(list) = chunk.as_array() else {
            return;
        };
        for e in list {
            let Some(name) = e["name"].as_str().filter(|n| KEPT.contains(n)) else {
                continue;
            };
            if self.events.len() >= MAX_TRACE_EVENTS {
                self.dropped += 1;
                continue;
            }
            let data = match name {
                "firstContentfulPaint" | "firstPaint" => e["args"].clone(),
                "ParseHTML" => e["args"]["beginData"].clone(),
                _ => e["args"]["data"].clone(),
            };
            self.events.push(Event {
                name: name.to_string(),
                pid: e["pid"].as_i64().unwrap_or(-1),
                tid: e["tid"].as_i64().unwrap_or(-1),
                ts: e["ts"].as_f64().unwrap_or(0.0),
                dur: e["dur"].as_f64().unwrap_or(0.0),
                data,
            });
        }
    }
}

/// A main-thread task (Lantern's CPU node) and what happened in it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Task {
    /// Start (µs).
    pub start_us: f64,
    /// End (µs; Lantern ends a task 1 µs before an overlapping next one).
    pub end_us: f64,
    /// It parsed HTML.
    pub parse_html: bool,
    /// It laid the page out.
    pub layout: bool,
    /// It painted.
    pub paint: bool,
    /// The scripts it evaluated (URLs).
    pub evaluates: Vec<String>,
    /// The requests it sent (Chromium's request ids).
    pub sends: Vec<String>,
    /// The URLs whose requests it needed (script and stylesheet URLs it
    /// ran or parsed, the scripts on its stacks): Lantern's
    /// `addDependencyOnUrl`.
    pub needs: Vec<String>,
    /// The frames whose documents it needed (`addDependencyOnFrame`).
    pub frames: Vec<String>,
    /// Timers it installed.
    pub timers_installed: Vec<i64>,
    /// Timers that fired in it.
    pub timers_fired: Vec<i64>,
}

impl Task {
    /// Its duration (ms).
    pub fn ms(&self) -> f64 {
        (self.end_us - self.start_us) / 1000.0
    }
}

/// A request as Chromium made it (Lantern's network node).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    /// Chromium's request id.
    pub id: String,
    /// Its URL (the last of its redirects).
    pub url: String,
    /// `Document`, `Stylesheet`, `Script`, `Image`…
    pub resource_type: String,
    /// Its priority (`VeryHigh`, `High`…), the last Chromium gave it.
    pub priority: String,
    /// The frame it was made for.
    pub frame: String,
    /// Sent (µs, the trace's clock).
    pub start_us: f64,
    /// Ended (µs; none: it did not finish).
    pub end_us: Option<f64>,
    /// Bytes on the wire (`encodedDataLength`).
    pub bytes: u64,
    /// `parser`, `script`, `preload`, `other`…
    pub initiator_type: String,
    /// The URLs that initiated it: the initiator's URL, else the scripts
    /// on its stack.
    pub initiators: Vec<String>,
    /// Chromium marked it render-blocking (the trace's
    /// `ResourceSendRequest.renderBlocking`: `blocking`,
    /// `in_body_parser_blocking`…).
    pub render_blocking: Option<String>,
    /// Its response's timing (`Network.responseReceived`), none for a
    /// request that got no response or no timing.
    pub timing: Option<Timing>,
    /// The connection it went over (Chromium's id).
    pub connection_id: i64,
    /// That connection had carried a request before.
    pub connection_reused: bool,
    /// The protocol (`http/1.1`, `h2`…).
    pub protocol: String,
}

/// A response's timing as Chromium reports it (`Network.ResourceTiming`):
/// ms after `request_time`, -1 where not applicable.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timing {
    /// When the request started (s, Chromium's monotonic clock).
    pub request_time: f64,
    /// TCP connect started.
    pub connect_start: f64,
    /// TCP (and TLS) connect ended.
    pub connect_end: f64,
    /// TLS handshake started.
    pub ssl_start: f64,
    /// TLS handshake ended.
    pub ssl_end: f64,
    /// The request was sent.
    pub send_end: f64,
    /// The response headers were in.
    pub receive_headers_end: f64,
}

impl Request {
    /// Lantern's `hasRenderBlockingPriority`: very high, or a high script
    /// or document.
    pub fn blocking_priority(&self) -> bool {
        self.priority == "VeryHigh"
            || (self.priority == "High"
                && matches!(self.resource_type.as_str(), "Script" | "Document"))
    }
}

/// What Lantern builds its graph from: the main thread's tasks, the
/// page's requests and its first contentful paint.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PageTrace {
    /// The renderer main thread's top-level tasks, in start order.
    pub tasks: Vec<Task>,
    /// The page's requests, in the order sent (the page first).
    pub requests: Vec<Request>,
    /// The main frame's first contentful paint (µs).
    pub fcp_us: Option<f64>,
    /// Its first paint (µs).
    pub fp_us: Option<f64>,
}

/// The URLs of a trace event's `stackTrace`.
fn stack_urls(data: &Value) -> impl Iterator<Item = String> + '_ {
    data["stackTrace"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["url"].as_str().filter(|u| !u.is_empty()))
        .map(str::to_string)
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if v.len() < MAX_URLS && !v.contains(&s) {
        v.push(s);
    }
}

fn is_task(name: &str) -> bool {
    name == "RunTask" || name == "ThreadControllerImpl::RunTask"
}

/// The main thread of `frame`'s renderer: the thread of its first
/// `ParseHTML`, else of its first contentful paint.
fn main_thread(events: &[Event], frame: &str) -> Option<(i64, i64)> {
    events
        .iter()
        .find(|e| e.name == "ParseHTML" && e.data["frame"] == frame)
        .or_else(|| {
            events
                .iter()
                .find(|e| e.name == "firstContentfulPaint" && e.data["frame"] == frame)
        })
        .map(|e| (e.pid, e.tid))
}

/// The main thread's tasks of `events` (Lantern's `getCPUNodes`: each
/// `RunTask` with a duration and the events inside it; a task that
/// overlaps the next one ends 1 µs before it).
fn tasks(events: &[Event], pid: i64, tid: i64) -> Vec<Task> {
    let mut main: Vec<&Event> = events
        .iter()
        .filter(|e| e.pid == pid && e.tid == tid)
        .collect();
    main.sort_by(|a, b| a.ts.total_cmp(&b.ts));
    let mut out = Vec::new();
    let mut i = 0;
    while i < main.len() && out.len() < MAX_ITEMS {
        let e = main[i];
        i += 1;
        if !is_task(&e.name) || e.dur <= 0.0 {
            continue;
        }
        let mut t = Task {
            start_us: e.ts,
            end_us: e.ts + e.dur,
            ..Task::default()
        };
        while i < main.len() && main[i].ts < e.ts + e.dur {
            let c = main[i];
            if is_task(&c.name) && c.dur > 0.0 {
                t.end_us = c.ts - 1.0;
                break;
            }
            i += 1;
            let d = &c.data;
            let url = d["url"]
                .as_str()
                .filter(|u| !u.is_empty())
                .map(str::to_string);
            let frame = d["frame"].as_str().map(str::to_string);
            match c.name.as_str() {
                "ParseHTML" => t.parse_html = true,
                "Layout" => t.layout = true,
                "Paint" => t.paint = true,
                "EvaluateScript" => {
                    if let Some(u) = &url {
                        push_unique(&mut t.evaluates, u.clone());
                        push_unique(&mut t.needs, u.clone());
                    }
                    frame
                        .into_iter()
                        .for_each(|f| push_unique(&mut t.frames, f));
                    stack_urls(d).for_each(|u| push_unique(&mut t.needs, u));
                }
                "ResourceSendRequest" => {
                    if let Some(id) = d["requestId"].as_str() {
                        push_unique(&mut t.sends, id.to_string());
                    }
                    frame
                        .into_iter()
                        .for_each(|f| push_unique(&mut t.frames, f));
                    stack_urls(d).for_each(|u| push_unique(&mut t.needs, u));
                }
                "TimerInstall" => {
                    if let Some(id) = d["timerId"].as_i64() {
                        t.timers_installed.push(id);
                    }
                    stack_urls(d).for_each(|u| push_unique(&mut t.needs, u));
                }
                "TimerFire" => {
                    if let Some(id) = d["timerId"].as_i64() {
                        t.timers_fired.push(id);
                    }
                }
                "InvalidateLayout" | "ScheduleStyleRecalculation" => {
                    frame
                        .into_iter()
                        .for_each(|f| push_unique(&mut t.frames, f));
                    stack_urls(d).for_each(|u| push_unique(&mut t.needs, u));
                }
                "XHRReadyStateChange" if d["readyState"] == 4 => {
                    url.into_iter().for_each(|u| push_unique(&mut t.needs, u));
                    stack_urls(d).for_each(|u| push_unique(&mut t.needs, u));
                }
                "FunctionCall" | "v8.compile" => {
                    frame
                        .into_iter()
                        .for_each(|f| push_unique(&mut t.frames, f));
                    url.into_iter().for_each(|u| push_unique(&mut t.needs, u));
                }
                "ParseAuthorStyleSheet" => {
                    frame
                        .into_iter()
                        .for_each(|f| push_unique(&mut t.frames, f));
                    if let Some(u) = d["styleSheetUrl"].as_str().filter(|u| !u.is_empty()) {
                        push_unique(&mut t.needs, u.to_string());
                    }
                }
                _ => {}
            }
        }
        out.push(t);
    }
    out
}

/// The requests of the DevTools `Network` events (`requestWillBeSent`,
/// `resourceChangedPriority`, `loadingFinished`), in the order sent;
/// `render_blocking` from the trace's `ResourceSendRequest`.
fn requests(network: &[Value], trace: &[Event]) -> Vec<Request> {
    let mut out: Vec<Request> = Vec::new();
    let find = |out: &mut Vec<Request>, id: &str| out.iter().position(|r| r.id == id);
    for e in network {
        let p = &e["params"];
        let Some(id) = p["requestId"].as_str() else {
            continue;
        };
        match e["method"].as_str().unwrap_or("") {
            "Network.requestWillBeSent" => {
                let init = &p["initiator"];
                let mut initiators = Vec::new();
                if let Some(u) = init["url"].as_str().filter(|u| !u.is_empty()) {
                    initiators.push(u.to_string());
                } else if init["type"] == "script" {
                    let mut stack = &init["stack"];
                    for _ in 0..32 {
                        if stack.is_null() {
                            break;
                        }
                        for u in stack_urls(&serde_json::json!({"stackTrace": stack["callFrames"]}))
                        {
                            push_unique(&mut initiators, u);
                        }
                        stack = &stack["parent"];
                    }
                }
                let r = Request {
                    id: id.to_string(),
                    url: p["request"]["url"].as_str().unwrap_or("").to_string(),
                    resource_type: p["type"].as_str().unwrap_or("Other").to_string(),
                    priority: p["request"]["initialPriority"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    frame: p["frameId"].as_str().unwrap_or("").to_string(),
                    start_us: p["timestamp"].as_f64().unwrap_or(0.0) * 1e6,
                    initiator_type: init["type"].as_str().unwrap_or("").to_string(),
                    initiators,
                    ..Request::default()
                };
                match find(&mut out, id) {
                    // A redirect: the same request, its new URL.
                    Some(k) => {
                        out[k].url = r.url;
                    }
                    None if out.len() < MAX_ITEMS => out.push(r),
                    None => {}
                }
            }
            "Network.responseReceived" => {
                if let Some(k) = find(&mut out, id) {
                    let r = &p["response"];
                    let t = &r["timing"];
                    let f = |k: &str| t[k].as_f64().unwrap_or(-1.0);
                    out[k].timing = t.is_object().then(|| Timing {
                        request_time: f("requestTime"),
                        connect_start: f("connectStart"),
                        connect_end: f("connectEnd"),
                        ssl_start: f("sslStart"),
                        ssl_end: f("sslEnd"),
                        send_end: f("sendEnd"),
                        receive_headers_end: f("receiveHeadersEnd"),
                    });
                    out[k].connection_id = r["connectionId"].as_i64().unwrap_or(0);
                    out[k].connection_reused = r["connectionReused"].as_bool().unwrap_or(false);
                    out[k].protocol = r["protocol"].as_str().unwrap_or("").to_string();
                }
            }
            "Network.resourceChangedPriority" => {
                if let (Some(k), Some(pr)) = (find(&mut out, id), p["newPriority"].as_str()) {
                    out[k].priority = pr.to_string();
                }
            }
            "Network.loadingFinished" => {
                if let Some(k) = find(&mut out, id) {
                    out[k].end_us = p["timestamp"].as_f64().map(|t| t * 1e6);
                    out[k].bytes = p["encodedDataLength"].as_f64().unwrap_or(0.0) as u64;
                }
            }
            _ => {}
        }
    }
    for e in trace.iter().filter(|e| e.name == "ResourceSendRequest") {
        let (Some(id), Some(rb)) = (
            e.data["requestId"].as_str(),
            e.data["renderBlocking"].as_str(),
        ) else {
            continue;
        };
        if let Some(k) = find(&mut out, id) {
            out[k].render_blocking = Some(rb.to_string());
        }
    }
    out
}

/// The page's trace: its main frame `frame`'s main-thread tasks, the
/// requests of `network` (DevTools `Network` events) and its first
/// (contentful) paint from `events`. None when the trace has no main
/// thread for the frame or no task on it.
pub fn page_trace(events: &[Event], network: &[Value], frame: &str) -> Option<PageTrace> {
    let (pid, tid) = main_thread(events, frame)?;
    let tasks = tasks(events, pid, tid);
    if tasks.is_empty() {
        return None;
    }
    let mark = |name: &str| {
        events
            .iter()
            .filter(|e| e.name == name && e.data["frame"] == frame)
            .map(|e| e.ts)
            .reduce(f64::min)
    };
    Some(PageTrace {
        tasks,
        requests: requests(network, events),
        fcp_us: mark("firstContentfulPaint"),
        fp_us: mark("firstPaint"),
    })
}

/// The page's trace from the assets Lighthouse saves (`--save-assets`:
/// its `*.trace.json`, `{"traceEvents": […]}`, and its
/// `*.devtoolslog.json`, the DevTools messages); the main frame is the
/// first document's. None when either is not such a file.
pub fn from_lighthouse(trace: &Value, devtools_log: &Value) -> Option<PageTrace> {
    let mut c = Collector::default();
    c.add(trace.get("traceEvents")?);
    let log = devtools_log.as_array()?;
    let frame = log
        .iter()
        .find(|e| e["method"] == "Network.requestWillBeSent" && e["params"]["type"] == "Document")
        .and_then(|e| e["params"]["frameId"].as_str())?;
    page_trace(&c.events, log, frame)
}

#[cfg(test)]
mod tests;
