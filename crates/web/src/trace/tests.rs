//! The trace reader on small hand-written traces: which events are kept,
//! how tasks are cut and what each records, the main thread and the paint
//! of the page's own frame, and requests from DevTools `Network` events.

use super::*;
use serde_json::json;

fn ev(name: &str, tid: i64, ts: f64, dur: f64, data: Value) -> Value {
    json!({"name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur, "ph": "X",
           "args": {"data": data}})
}

/// A trace of one page: two tasks on the renderer's main thread (the
/// first overlapping the second), one on another thread, paints of the
/// page's frame and of a frame it embeds.
fn sample() -> Vec<Event> {
    let mut c = Collector::default();
    c.add(&json!([
        ev("RunTask", 1, 1_000.0, 5_000.0, json!({})),
        {"name": "ParseHTML", "pid": 7, "tid": 1, "ts": 1_100.0, "dur": 3_000.0, "ph": "X",
         "args": {"beginData": {"frame": "F", "url": "http://a.test/"}}},
        ev("ResourceSendRequest", 1, 1_200.0, 0.0,
           json!({"requestId": "2", "frame": "F", "renderBlocking": "blocking", "url": "http://a.test/s.css"})),
        ev("ResourceSendRequest", 1, 1_300.0, 0.0,
           json!({"requestId": "3", "frame": "F", "renderBlocking": "blocking", "url": "http://a.test/a.js",
                  "stackTrace": [{"url": "http://a.test/x.js"}, {"url": ""}]})),
        // Starts before the first ends: the first ends 1 µs before it.
        ev("RunTask", 1, 5_500.0, 2_000.0, json!({})),
        ev("EvaluateScript", 1, 5_600.0, 1_000.0, json!({"url": "http://a.test/a.js", "frame": "F"})),
        ev("ParseAuthorStyleSheet", 1, 6_700.0, 10.0, json!({"styleSheetUrl": "http://a.test/s.css"})),
        ev("Layout", 1, 6_800.0, 100.0, json!({})),
        ev("TimerInstall", 1, 6_900.0, 0.0, json!({"timerId": 4})),
        // Another thread, and an event Lantern does not read.
        ev("RunTask", 2, 1_000.0, 9_000.0, json!({})),
        ev("Paint", 2, 1_500.0, 10.0, json!({})),
        ev("Screenshot", 1, 1_000.0, 0.0, json!({})),
        {"name": "firstContentfulPaint", "pid": 7, "tid": 1, "ts": 9_000.0, "ph": "I",
         "args": {"frame": "F"}},
        {"name": "firstContentfulPaint", "pid": 7, "tid": 1, "ts": 8_000.0, "ph": "I",
         "args": {"frame": "an iframe"}},
    ]));
    assert_eq!(c.events.len(), 13, "the screenshot is not kept");
    c.events
}

#[test]
fn tasks_of_the_main_thread_with_what_ran_in_them() {
    let t = page_trace(&sample(), &[], "F").expect("a trace");
    assert_eq!(t.tasks.len(), 2, "{:?}", t.tasks);
    let (a, b) = (&t.tasks[0], &t.tasks[1]);
    assert_eq!((a.start_us, a.end_us), (1_000.0, 5_499.0));
    assert!(a.parse_html && !a.layout && !a.paint);
    assert_eq!(a.sends, ["2", "3"]);
    assert_eq!(a.needs, ["http://a.test/x.js"]);
    assert_eq!(a.frames, ["F"]);
    assert_eq!((b.start_us, b.ms()), (5_500.0, 2.0));
    assert!(b.layout && !b.parse_html);
    assert_eq!(b.evaluates, ["http://a.test/a.js"]);
    assert_eq!(b.needs, ["http://a.test/a.js", "http://a.test/s.css"]);
    assert_eq!(b.timers_installed, [4]);
    // The page's frame's paint, not the iframe's earlier one.
    assert_eq!(t.fcp_us, Some(9_000.0));
    assert_eq!(t.fp_us, None);
    // No such frame: no main thread, no trace.
    assert!(page_trace(&sample(), &[], "G").is_none());
}

#[test]
fn requests_from_network_events() {
    let net = vec![
        json!({"method": "Network.requestWillBeSent", "params": {
            "requestId": "1", "frameId": "F", "type": "Document", "timestamp": 0.5,
            "initiator": {"type": "other"},
            "request": {"url": "http://a.test/", "initialPriority": "VeryHigh"}}}),
        json!({"method": "Network.requestWillBeSent", "params": {
            "requestId": "3", "frameId": "F", "type": "Script", "timestamp": 0.502,
            "initiator": {"type": "parser", "url": "http://a.test/"},
            "request": {"url": "http://a.test/a.js", "initialPriority": "Medium"}}}),
        json!({"method": "Network.requestWillBeSent", "params": {
            "requestId": "4", "frameId": "F", "type": "Image", "timestamp": 0.6,
            "initiator": {"type": "script", "stack": {"callFrames": [{"url": "http://a.test/a.js"}],
                          "parent": {"callFrames": [{"url": "http://a.test/b.js"}]}}},
            "request": {"url": "http://a.test/i.png", "initialPriority": "Low"}}}),
        json!({"method": "Network.resourceChangedPriority", "params": {
            "requestId": "3", "newPriority": "High"}}),
        json!({"method": "Network.responseReceived", "params": {
            "requestId": "3", "response": {"connectionId": 9, "connectionReused": true,
            "protocol": "http/1.1", "timing": {"requestTime": 0.5025, "connectStart": -1,
            "connectEnd": -1, "sslStart": -1, "sslEnd": -1, "sendEnd": 0.2,
            "receiveHeadersEnd": 3.5}}}}),
        json!({"method": "Network.loadingFinished", "params": {
            "requestId": "3", "timestamp": 0.51, "encodedDataLength": 46203.0}}),
    ];
    let t = page_trace(&sample(), &net, "F").expect("a trace");
    assert_eq!(t.requests.len(), 3);
    let s = &t.requests[1];
    assert_eq!(s.url, "http://a.test/a.js");
    assert_eq!(s.priority, "High", "the priority Chromium changed it to");
    assert_eq!((s.start_us, s.end_us), (502_000.0, Some(510_000.0)));
    assert_eq!(s.bytes, 46_203);
    assert_eq!(s.initiators, ["http://a.test/"]);
    assert_eq!(s.render_blocking.as_deref(), Some("blocking"));
    assert!(s.blocking_priority() && s.connection_reused && s.connection_id == 9);
    let tm = s.timing.expect("timing");
    assert_eq!((tm.send_end, tm.receive_headers_end), (0.2, 3.5));
    let i = &t.requests[2];
    assert_eq!(i.initiator_type, "script");
    assert_eq!(i.initiators, ["http://a.test/a.js", "http://a.test/b.js"]);
    assert!(!i.blocking_priority() && i.end_us.is_none() && i.timing.is_none());
    assert!(t.requests[0].blocking_priority());
}

#[test]
fn only_the_events_lantern_reads_are_kept_and_chunks_must_be_arrays() {
    let mut c = Collector::default();
    c.add(&json!({"not": "an array"}));
    c.add(&json!([{"name": "v8.something"}, {"cat": "x"}, 3]));
    assert!(c.events.is_empty() && c.dropped == 0);
    c.add(&json!([{"name": "RunTask", "ts": "not a number"}]));
    assert_eq!(c.events.len(), 1);
    assert_eq!((c.events[0].ts, c.events[0].pid), (0.0, -1));
}

/// Lighthouse's saved assets: `{"traceEvents": […]}` and the DevTools
/// messages; the main frame is the first document's.
#[test]
fn from_lighthouse_assets() {
    let trace = json!({"traceEvents": [
        {"name": "RunTask", "pid": 7, "tid": 1, "ts": 1_000.0, "dur": 5_000.0, "args": {}},
        {"name": "ParseHTML", "pid": 7, "tid": 1, "ts": 1_100.0, "dur": 3_000.0,
         "args": {"beginData": {"frame": "F"}}},
        {"name": "firstContentfulPaint", "pid": 7, "tid": 1, "ts": 9_000.0, "args": {"frame": "F"}},
    ]});
    let log = json!([
        {"method": "Page.frameNavigated", "params": {"frame": {"id": "F"}}},
        {"method": "Network.requestWillBeSent", "params": {
            "requestId": "1", "frameId": "F", "type": "Document", "timestamp": 0.0005,
            "initiator": {"type": "other"},
            "request": {"url": "http://a.test/", "initialPriority": "VeryHigh"}}},
    ]);
    let t = from_lighthouse(&trace, &log).expect("a page trace");
    assert_eq!(
        (t.tasks.len(), t.requests.len(), t.fcp_us),
        (1, 1, Some(9_000.0))
    );
    assert!(from_lighthouse(&json!({}), &log).is_none());
    assert!(from_lighthouse(&trace, &json!({"not": "a log"})).is_none());
}
