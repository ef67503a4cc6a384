//! Lantern's first-contentful-paint graph on small hand-made traces: the
//! figures of Lighthouse's own simulation, and what leaves the graph (a
//! resource Chromium had not finished by its first paint, a script
//! evaluated after it, a short task pruned), and the server's time as
//! Lantern estimates it.

use super::*;
use crate::trace::{Task, Timing};

const PAGE: &str = "http://127.0.0.1:1/";
const CSS: &str = "http://127.0.0.1:1/s.css";
const JS: &str = "http://127.0.0.1:1/a.js";

/// A request sent at `start` ms, ended at `end` ms (µs in the trace), on
/// connection `conn` (new or reused), its first byte 28.2391 ms after it
/// was sent on a connection whose connect took 1 ms.
fn req(id: &str, url: &str, ty: &str, prio: &str, start: f64, end: f64, bytes: u64) -> Request {
    Request {
        id: id.into(),
        url: url.into(),
        resource_type: ty.into(),
        priority: prio.into(),
        frame: "F".into(),
        start_us: start * 1000.0,
        end_us: Some(end * 1000.0),
        bytes,
        initiator_type: "parser".into(),
        initiators: vec![PAGE.into()],
        timing: Some(Timing {
            request_time: start / 1000.0,
            connect_start: 0.0,
            connect_end: 1.0,
            ssl_start: -1.0,
            ssl_end: -1.0,
            send_end: 1.0,
            receive_headers_end: 1.0 + 1.0 + 28.2391,
        }),
        connection_id: 1,
        protocol: "http/1.1".into(),
        ..Request::default()
    }
}

fn task(start: f64, ms: f64) -> Task {
    Task {
        start_us: start * 1000.0,
        end_us: (start + ms) * 1000.0,
        ..Task::default()
    }
}

/// Lighthouse 12.8.2's page of `lantern::tests`: an 831-byte page, a
/// 51,328-byte stylesheet and a 64,214-byte script that a 20 ms parser
/// task sends, the script evaluated at 60 ms, painted at 100 ms.
fn page() -> PageTrace {
    let mut doc = req("1", PAGE, "Document", "VeryHigh", 0.0, 5.0, 831);
    doc.initiators.clear();
    doc.initiator_type = "other".into();
    let mut css = req("2", CSS, "Stylesheet", "VeryHigh", 6.0, 20.0, 51_328);
    css.timing = css.timing.map(|t| Timing {
        connect_start: -1.0,
        connect_end: -1.0,
        ..t
    });
    css.connection_reused = true;
    let mut js = req("3", JS, "Script", "High", 7.0, 30.0, 64_214);
    js.connection_id = 2;
    let mut parse = task(5.5, 20.0);
    parse.parse_html = true;
    parse.sends = vec!["2".into(), "3".into()];
    let mut eval = task(60.0, 5.0);
    eval.evaluates = vec![JS.into()];
    eval.needs = vec![JS.into()];
    let mut paint = task(90.0, 4.0);
    paint.layout = true;
    paint.paint = true;
    PageTrace {
        tasks: vec![parse, eval, paint],
        requests: vec![doc, css, js],
        fcp_us: Some(100_000.0),
        fp_us: Some(100_000.0),
    }
}

fn wire(r: &Request) -> Option<Wire> {
    let u = url::Url::parse(&r.url).ok()?;
    Some(Wire {
        origin: u.origin().ascii_serialization(),
        host: u.host_str()?.to_string(),
        tls: false,
        h2: false,
        bytes: r.bytes,
    })
}

fn ms(t: &PageTrace) -> Vec<Option<f64>> {
    let urls = [CSS.to_string(), JS.to_string()];
    times(t, &lantern::DESKTOP, &urls, &wire).expect("a graph")
}

/// `got` is `want` to 0.1 ms (Lighthouse printed its times to 0.1 ms).
fn near(got: Option<f64>, want: f64) -> bool {
    got.is_some_and(|g| (g - want).abs() <= 0.1)
}

/// The sheet 188.2-336.5 ms and the script 208.2-396.5 ms, as Lighthouse
/// simulated them: the script waits for the parser task (20 ms) that sent
/// it, the sheet only for the page.
#[test]
fn lighthouse_figures_with_the_parser_task_from_the_trace() {
    let got = ms(&page());
    assert!(
        near(got[0], 336.5 - 188.2) && near(got[1], 396.5 - 208.2),
        "{got:?}"
    );
    // The server's time is Lantern's estimate from Chromium's load: its
    // time to the first byte less the 1 ms connect.
    let s = server_times(&page());
    assert_eq!(s.len(), 1);
    assert!((s[0].1 - 28.2391).abs() < 1e-9, "{s:?}");
}

/// A longer parser task holds the script back longer; the sheet keeps its
/// time but for the link it no longer shares as long.
#[test]
fn the_parser_task_sets_when_the_script_starts() {
    let mut t = page();
    t.tasks[0].end_us = t.tasks[0].start_us + 60_000.0;
    let got = ms(&t);
    assert!(got[1].unwrap() < 188.3, "{got:?}");
    let urls = [PAGE.to_string()];
    let page_ms = times(&t, &lantern::DESKTOP, &urls, &wire).unwrap()[0].unwrap();
    assert!((page_ms - 188.2).abs() < 0.1, "{page_ms}");
}

/// What Chromium had not finished by its first contentful paint is not
/// in the graph (Lighthouse does not list it); nor a script Chromium
/// evaluated only after that paint.
#[test]
fn after_the_first_paint_is_not_in_the_graph() {
    let mut t = page();
    t.requests[2].end_us = Some(120_000.0);
    let got = ms(&t);
    assert!(got[0].is_some() && got[1].is_none(), "{got:?}");
    let mut t = page();
    // (10 ms or more: a shorter task would be pruned, and a script whose
    // evaluation is not in the graph stays in it, as in Lantern.)
    t.tasks[1].start_us = 110_000.0;
    t.tasks[1].end_us = 125_000.0;
    assert_eq!(ms(&t)[1], None);
    // No paint in the trace: no graph.
    let mut t = page();
    t.fcp_us = None;
    assert!(times(&t, &lantern::DESKTOP, &[JS.to_string()], &wire).is_none());
}

/// A short task that is not the first parse, layout or paint leaves the
/// graph, its requests then waiting for the page alone; a script that
/// another script's stack initiated is not render-blocking there.
#[test]
fn short_tasks_are_pruned_and_script_initiated_requests_left_out() {
    let mut t = page();
    let mut first = task(1.0, 3.0);
    first.parse_html = true;
    t.tasks[0].parse_html = false;
    t.tasks[0].end_us = t.tasks[0].start_us + 2_000.0;
    t.tasks.insert(0, first);
    let got = ms(&t);
    // The script starts with the sheet, when the page has arrived.
    assert!(got[1].unwrap() < 188.3, "{got:?}");
    let mut t = page();
    t.requests[2].initiator_type = "script".into();
    assert_eq!(ms(&t)[1], None);
}

/// Connection ids Chromium reused without ever opening them cannot be
/// trusted: only the origin's first request counts as a new connection;
/// a median of 0 is Lantern's 30 ms default.
#[test]
fn server_time_as_lantern_estimates_it() {
    let mut t = page();
    for r in &mut t.requests {
        r.timing = r.timing.map(|tm| Timing {
            receive_headers_end: tm.send_end + 0.5,
            ..tm
        });
    }
    // Trusted ids: the 1 ms connect is the round trip; 0.5 ms less it is 0.
    assert_eq!(server_times(&t)[0].1, lantern::DEFAULT_SERVER_MS);
    let mut t = page();
    t.requests[2].connection_reused = true;
    t.requests[2].connection_id = 3;
    for r in &mut t.requests[1..] {
        r.timing = r.timing.map(|tm| Timing {
            receive_headers_end: tm.send_end + 4.0,
            ..tm
        });
    }
    // Untrusted: the page's own connect (1 ms) is the round trip; the
    // median of 28.2391, 3 and 3 is 3.
    assert_eq!(server_times(&t)[0].1, 3.0);
}

/// Lantern opens a connection for every request of the graph sent before
/// any of its origin's requests had ended (here seven scripts the parser
/// found while the page was still arriving), not just six.
#[test]
fn a_connection_per_request_sent_before_the_first_ended() {
    let mut t = page();
    t.requests[0].end_us = Some(50_000.0);
    let mut sends = Vec::new();
    for k in 0..7 {
        let id = format!("s{k}");
        let mut r = req(
            &id,
            &format!("http://127.0.0.1:1/{k}.js"),
            "Script",
            "High",
            7.0,
            40.0,
            1_000,
        );
        r.timing = r.timing.map(|tm| Timing {
            request_time: 0.008,
            ..tm
        });
        t.requests.push(r);
        sends.push(id);
    }
    t.tasks[0].sends.extend(sends);
    let g = build(&t).expect("a graph");
    let inc = fcp_nodes(&t, &g).expect("the paint's graph");
    let keep: Vec<usize> = (0..g.of.len()).filter(|&n| inc[n]).collect();
    // The page, the script of `page()` and the seven new ones (the sheet
    // was sent after the page's request at 6 ms too, but before it ended).
    assert_eq!(
        connections(&t, &g, &keep),
        [("http://127.0.0.1:1".to_string(), 10)]
    );
    // Sent after the page ended: those reuse its connections.
    for r in &mut t.requests[3..] {
        r.timing = r.timing.map(|tm| Timing {
            request_time: 0.060,
            ..tm
        });
    }
    let g = build(&t).expect("a graph");
    assert_eq!(connections(&t, &g, &keep)[0].1, 3);
}

/// Lighthouse's own list: what Chromium marked render-blocking and had
/// finished by its first paint, at 50 ms or more once rounded; a request
/// Chromium did not mark is not listed whatever its time.
#[test]
fn lighthouse_list_of_a_trace() {
    let mut t = page();
    t.requests[1].render_blocking = Some("blocking".into());
    t.requests[2].render_blocking = Some("blocking".into());
    let got = lighthouse_list(&t, false);
    let urls: Vec<&str> = got.iter().map(|(u, _)| u.as_str()).collect();
    assert_eq!(urls, [CSS, JS]);
    assert!(near(Some(got[1].1), 396.5 - 208.2), "{got:?}");
    t.requests[2].render_blocking = Some("non_blocking".into());
    assert_eq!(lighthouse_list(&t, false).len(), 1);
    // On the phone's link both take longer.
    let phone = lighthouse_list(&t, true);
    assert!(phone[0].1 > got[0].1, "{phone:?}");
}
