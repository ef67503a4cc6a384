//! Lighthouse's graph of what the first contentful paint waits for, built
//! from Chromium's trace of the page (`--browser`, [`crate::trace`]) as
//! Lantern builds it (`PageDependencyGraph` and the optimistic graph of
//! `FirstContentfulPaint`), then simulated on the reference link
//! ([`lantern::Link::simulate_graph`]): a render-blocking resource's time
//! is its node's duration there, as Lighthouse's render-blocking-resources
//! audit charges it (`wastedMs`). The main thread's tasks are in the graph:
//! a script is requested only when the parser task that found it has run,
//! a task waits for the one before it, and a resource Chromium had not
//! finished by its first contentful paint is not in the graph at all.

use super::lantern::{self, Link, Node, Work};
use crate::trace::{PageTrace, Request};

/// A task shorter than this is pruned from the graph unless it is the
/// first parse, layout or paint (Lantern's `SIGNIFICANT_DUR_THRESHOLD_MS`).
const SIGNIFICANT_MS: f64 = 10.0;
/// A task may use a request that ended up to this long after it started
/// (Lantern: "some script evaluations can start before the script finishes
/// downloading"), µs.
const EARLY_US: f64 = 100_000.0;

/// One node: a request or a task of the trace.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Of {
    Req(usize),
    Task(usize),
}

struct Graph {
    of: Vec<Of>,
    deps: Vec<Vec<usize>>,
}

impl Graph {
    fn start(&self, t: &PageTrace, n: usize) -> f64 {
        match self.of[n] {
            Of::Req(r) => t.requests[r].start_us,
            Of::Task(k) => t.tasks[k].start_us,
        }
    }
    fn end(&self, t: &PageTrace, n: usize) -> f64 {
        match self.of[n] {
            Of::Req(r) => t.requests[r].end_us.unwrap_or(f64::INFINITY),
            Of::Task(k) => t.tasks[k].end_us,
        }
    }
    fn add_dep(&mut self, n: usize, on: usize) {
        if n != on && !self.deps[n].contains(&on) {
            self.deps[n].push(on);
        }
    }
    fn dependents(&self, n: usize) -> Vec<usize> {
        (0..self.of.len())
            .filter(|&m| self.deps[m].contains(&n))
            .collect()
    }
    /// `n` waits, directly or not, for `on`.
    fn depends_on(&self, n: usize, on: usize) -> bool {
        let mut seen = vec![false; self.of.len()];
        let mut stack = vec![n];
        while let Some(x) = stack.pop() {
            if x == on {
                return true;
            }
            if std::mem::replace(&mut seen[x], true) {
                continue;
            }
            stack.extend(self.deps[x].iter().copied());
        }
        false
    }
}

fn http(r: &Request) -> bool {
    r.url.starts_with("http://") || r.url.starts_with("https://")
}

/// Lantern's dependency graph of the page: requests linked to their
/// initiators, tasks to the requests they sent and the scripts, sheets and
/// documents they used, short tasks pruned. Node 0 is the page.
fn build(t: &PageTrace) -> Option<Graph> {
    let root_req = t
        .requests
        .iter()
        .position(|r| r.resource_type == "Document" && http(r))?;
    let mut of: Vec<Of> = vec![Of::Req(root_req)];
    for (i, r) in t.requests.iter().enumerate() {
        if i != root_req && http(r) && r.start_us >= t.requests[root_req].start_us {
            of.push(Of::Req(i));
        }
    }
    let n_req = of.len();
    of.extend((0..t.tasks.len()).map(Of::Task));
    let mut g = Graph {
        deps: vec![Vec::new(); of.len()],
        of,
    };
    let req_of = |g: &Graph, n: usize| match g.of[n] {
        Of::Req(r) => Some(&t.requests[r]),
        Of::Task(_) => None,
    };
    let by_url = |g: &Graph, url: &str| -> Vec<usize> {
        (0..n_req)
            .filter(|&n| req_of(g, n).is_some_and(|r| r.url == url))
            .collect()
    };
    // Requests: on their initiator when it is one request that started
    // before them, else on the page.
    for n in 1..n_req {
        let r = req_of(&g, n).expect("a request node");
        for u in &r.initiators {
            let c = by_url(&g, u);
            if c.len() == 1 && g.start(t, c[0]) <= g.start(t, n) && !g.depends_on(c[0], n) {
                g.add_dep(n, c[0]);
            }
        }
        if g.deps[n].is_empty() {
            g.add_dep(n, 0);
        }
    }
    // Tasks.
    let root_start = g.start(t, 0);
    let mut timers: Vec<(i64, usize)> = Vec::new();
    for n in n_req..g.of.len() {
        let Of::Task(k) = g.of[n] else { continue };
        let task = &t.tasks[k];
        for id in &task.sends {
            let Some(m) = (1..n_req).find(|&m| req_of(&g, m).is_some_and(|r| r.id == *id)) else {
                continue;
            };
            let r = req_of(&g, m).expect("a request node");
            if g.start(t, m) > task.start_us
                && matches!(r.resource_type.as_str(), "Script" | "XHR" | "Fetch")
            {
                g.add_dep(m, n);
            }
        }
        for f in &task.frames {
            let doc = (0..n_req).find(|&m| {
                req_of(&g, m).is_some_and(|r| r.resource_type == "Document" && r.frame == *f)
            });
            if let Some(m) = doc.filter(|&m| g.start(t, m) < task.start_us) {
                g.add_dep(n, m);
            }
        }
        'url: for u in &task.needs {
            let mut best: Option<(usize, f64)> = None;
            for c in by_url(&g, u) {
                if task.start_us <= g.start(t, c) {
                    continue 'url;
                }
                let distance = task.start_us - g.end(t, c);
                if distance >= -EARLY_US && best.is_none_or(|(_, d)| distance < d) {
                    best = Some((c, distance));
                }
            }
            if let Some((c, _)) = best {
                g.add_dep(n, c);
            }
        }
        for id in &task.timers_installed {
            timers.push((*id, n));
        }
        for id in &task.timers_fired {
            if let Some(&(_, inst)) = timers.iter().find(|(i, _)| i == id) {
                if g.end(t, inst) <= task.start_us {
                    g.add_dep(n, inst);
                }
            }
        }
        if g.deps[n].is_empty() && root_start <= task.start_us {
            g.add_dep(n, 0);
        }
    }
    // Prune short tasks, keeping the first parse, layout and paint.
    let (mut parse, mut layout, mut paint) = (false, false, false);
    for n in n_req..g.of.len() {
        let Of::Task(k) = g.of[n] else { continue };
        let task = &t.tasks[k];
        let mut first = false;
        if !layout && task.layout {
            (first, layout) = (true, true);
        }
        if !paint && task.paint {
            (first, paint) = (true, true);
        }
        if !parse && task.parse_html {
            (first, parse) = (true, true);
        }
        if first || task.ms() >= SIGNIFICANT_MS {
            continue;
        }
        let dependents = g.dependents(n);
        if g.deps[n].len() == 1 || dependents.len() <= 1 {
            let deps = std::mem::take(&mut g.deps[n]);
            for &d in &dependents {
                g.deps[d].retain(|&x| x != n);
                for &p in &deps {
                    g.add_dep(d, p);
                }
            }
        }
    }
    Some(g)
}

/// The nodes reachable from the page, following dependents.
fn reachable(g: &Graph) -> Vec<bool> {
    let mut seen = vec![false; g.of.len()];
    let mut stack = vec![0];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); g.of.len()];
    for (n, ds) in g.deps.iter().enumerate() {
        for &d in ds {
            dependents[d].push(n);
        }
    }
    while let Some(x) = stack.pop() {
        if std::mem::replace(&mut seen[x], true) {
            continue;
        }
        stack.extend(dependents[x].iter().copied());
    }
    seen
}

/// Lantern's optimistic first-contentful-paint graph: the page; requests
/// with a render-blocking priority that no script initiated and that
/// Chromium had finished by its first contentful paint (but scripts whose
/// evaluation came after it); the first parse, layout and paint tasks and
/// the tasks that evaluated those scripts, all started by then; and
/// everything those wait for.
fn fcp_nodes(t: &PageTrace, g: &Graph) -> Option<Vec<bool>> {
    let cutoff = t.fcp_us?;
    let live = reachable(g);
    let treat = |r: &Request| r.blocking_priority() && r.initiator_type != "script";
    let mut cpu: Vec<usize> = (0..g.of.len())
        .filter(|&n| live[n] && matches!(g.of[n], Of::Task(_)) && g.start(t, n) <= cutoff)
        .collect();
    cpu.sort_by(|&a, &b| g.start(t, a).total_cmp(&g.start(t, b)));
    // The earliest task that evaluated each script.
    let evaluated_in = |url: &str| {
        (0..g.of.len())
            .filter(|&n| live[n])
            .filter(|&n| matches!(g.of[n], Of::Task(k) if t.tasks[k].evaluates.iter().any(|u| u == url)))
            .min_by(|&a, &b| g.start(t, a).total_cmp(&g.start(t, b)))
    };
    let mut keep_cpu: Vec<usize> = Vec::new();
    let mut not_blocking: Vec<&str> = Vec::new();
    for (n, &on) in live.iter().enumerate() {
        let Of::Req(r) = g.of[n] else { continue };
        let r = &t.requests[r];
        if !on || r.resource_type != "Script" || !(g.end(t, n) <= cutoff && treat(r)) {
            continue;
        }
        match evaluated_in(&r.url) {
            Some(c) if cpu.contains(&c) => keep_cpu.push(c),
            Some(_) => not_blocking.push(&r.url),
            None => {}
        }
    }
    let task = |n: usize| match g.of[n] {
        Of::Task(k) => Some(&t.tasks[k]),
        Of::Req(_) => None,
    };
    for f in [
        |k: &crate::trace::Task| k.layout,
        |k: &crate::trace::Task| k.paint,
        |k: &crate::trace::Task| k.parse_html,
    ] {
        if let Some(&c) = cpu.iter().find(|&&c| task(c).is_some_and(f)) {
            keep_cpu.push(c);
        }
    }
    let mut inc = vec![false; g.of.len()];
    for (n, &on) in live.iter().enumerate() {
        if !on {
            continue;
        }
        let want = match g.of[n] {
            Of::Req(r) => {
                let r = &t.requests[r];
                let after = g.end(t, n) > cutoff || g.start(t, n) > cutoff;
                n == 0 || (!after && !not_blocking.contains(&r.url.as_str()) && treat(r))
            }
            Of::Task(_) => keep_cpu.contains(&n),
        };
        if want {
            // It and everything it waits for.
            let mut stack = vec![n];
            while let Some(x) = stack.pop() {
                if !std::mem::replace(&mut inc[x], true) {
                    stack.extend(g.deps[x].iter().copied());
                }
            }
        }
    }
    Some(inc)
}

/// What a request is on the wire, for the simulation: origin, host,
/// https, HTTP/2 and bytes.
pub(super) struct Wire {
    /// Scheme, host and port.
    pub origin: String,
    /// Host name.
    pub host: String,
    /// https.
    pub tls: bool,
    /// HTTP/2.
    pub h2: bool,
    /// Bytes on the wire.
    pub bytes: u64,
}

/// The origin of a URL (scheme, host, port).
fn origin(url: &str) -> Option<String> {
    url::Url::parse(url)
        .ok()
        .map(|u| u.origin().ascii_serialization())
}

/// Lantern's median (`NetworkAnalyzer.getSummary`).
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n.is_multiple_of(2) => Some((v[(n - 1) / 2] + v[(n - 1) / 2 + 1]) / 2.0),
        _ => Some(v[(n - 1) / 2]),
    }
}

/// The server's own time per origin (ms) as Lantern estimates it from
/// Chromium's load (`NetworkAnalyzer.computeRTTAndServerResponseTime`):
/// the round trip per origin is the shortest connect Chromium made to it
/// (TCP, and TLS when it had one) on a connection that was new — by
/// Chromium's word when its connection ids are consistent (every
/// connection seen new once), else only each origin's first request and
/// those sent before any of its requests ended; the server's time is the
/// median over the origin's responses of the time to the first byte less
/// that round trip (at least 0). Lantern uses its 30 ms default for an
/// origin whose median is 0 or missing, and so does this.
pub(super) fn server_times(t: &PageTrace) -> Vec<(String, f64)> {
    let recs: Vec<(&Request, String)> = t
        .requests
        .iter()
        .filter(|r| http(r))
        .filter_map(|r| Some((r, origin(&r.url)?)))
        .collect();
    let request_ms = |r: &Request| {
        r.timing
            .map_or(r.start_us / 1000.0, |tm| tm.request_time * 1000.0)
    };
    // Can Chromium's connection ids be trusted?
    let mut ids: Vec<(i64, bool)> = Vec::new();
    for (r, _) in &recs {
        match ids.iter_mut().find(|(i, _)| *i == r.connection_id) {
            Some((_, started)) => *started |= !r.connection_reused,
            None => ids.push((r.connection_id, !r.connection_reused)),
        }
    }
    let trust = ids.len() > 1 && ids.iter().all(|(_, s)| *s);
    let mut origins: Vec<String> = Vec::new();
    for (_, o) in &recs {
        if !origins.contains(o) {
            origins.push(o.clone());
        }
    }
    let reused = |k: usize| -> bool {
        let (r, o) = &recs[k];
        if trust {
            return r.connection_reused;
        }
        let mine: Vec<usize> = (0..recs.len()).filter(|&j| recs[j].1 == *o).collect();
        let first = mine
            .iter()
            .copied()
            .min_by(|&a, &b| request_ms(recs[a].0).total_cmp(&request_ms(recs[b].0)));
        if first == Some(k) {
            return false;
        }
        let earliest_end = mine
            .iter()
            .map(|&j| recs[j].0.end_us.map_or(-1.0, |e| e / 1000.0))
            .fold(f64::INFINITY, f64::min);
        request_ms(r) >= earliest_end || r.protocol == "h2"
    };
    let mut rtt: Vec<(String, f64)> = Vec::new();
    for o in &origins {
        let mut est = Vec::new();
        for (k, (r, ro)) in recs.iter().enumerate() {
            let Some(tm) = r.timing.filter(|_| ro == o && r.bytes > 0 && !reused(k)) else {
                continue;
            };
            if tm.ssl_start >= 0.0 && tm.ssl_end >= 0.0 && tm.ssl_start != tm.connect_start {
                est.push(tm.connect_end - tm.ssl_start);
                est.push(tm.ssl_start - tm.connect_start);
            } else if tm.connect_start >= 0.0 && tm.connect_end >= 0.0 {
                est.push(tm.connect_end - tm.connect_start);
            }
        }
        if let Some(m) = est.into_iter().reduce(f64::min) {
            rtt.push((o.clone(), m));
        }
    }
    let any_rtt = rtt.iter().map(|(_, v)| *v).reduce(f64::min).unwrap_or(0.0);
    origins
        .iter()
        .map(|o| {
            let r = rtt
                .iter()
                .find(|(x, _)| x == o)
                .map(|(_, v)| *v)
                .filter(|v| *v != 0.0)
                .unwrap_or(any_rtt);
            let v: Vec<f64> = recs
                .iter()
                .filter(|(_, ro)| ro == o)
                .filter_map(|(q, _)| q.timing)
                .filter(|tm| tm.receive_headers_end >= 0.0 && tm.send_end >= 0.0)
                .map(|tm| (tm.receive_headers_end - tm.send_end - r).max(0.0))
                .collect();
            let m = median(v)
                .filter(|m| *m != 0.0)
                .unwrap_or(lantern::DEFAULT_SERVER_MS);
            (o.clone(), m)
        })
        .collect()
}

/// The connections Lantern opens per origin for the graph's requests
/// (`ConnectionPool`, coarse estimate): one for each request sent before
/// any of its origin's requests in the graph had ended (the first always),
/// none for HTTP/2 ones but the first; at least six (HTTP/2: one) is
/// `simulate_graph`'s part.
fn connections(t: &PageTrace, g: &Graph, keep: &[usize]) -> Vec<(String, usize)> {
    let reqs: Vec<(&Request, String)> = keep
        .iter()
        .filter_map(|&n| match g.of[n] {
            Of::Req(r) => Some((&t.requests[r], origin(&t.requests[r].url)?)),
            Of::Task(_) => None,
        })
        .collect();
    let sent = |r: &Request| {
        r.timing
            .map_or(r.start_us / 1000.0, |tm| tm.request_time * 1000.0)
    };
    let mut out: Vec<(String, usize)> = Vec::new();
    for (_, o) in &reqs {
        if out.iter().any(|(x, _)| x == o) {
            continue;
        }
        let mine: Vec<&Request> = reqs
            .iter()
            .filter(|(_, x)| x == o)
            .map(|(r, _)| *r)
            .collect();
        let earliest_end = mine
            .iter()
            .map(|r| r.end_us.map_or(-1.0, |e| e / 1000.0))
            .fold(f64::INFINITY, f64::min);
        let first = mine.iter().map(|r| sent(r)).fold(f64::INFINITY, f64::min);
        let new = mine
            .iter()
            .filter(|r| sent(r) == first || !(sent(r) >= earliest_end || r.protocol == "h2"))
            .count();
        out.push((o.clone(), new));
    }
    out
}

/// What Lighthouse's render-blocking-resources audit lists for the load
/// `t` was traced from, on its desktop or (`mobile`) phone link: each
/// request Chromium marked render-blocking (`blocking`, or
/// `in_body_parser_blocking` at a very high priority or a high script's)
/// for the page's frame and finished by its first paint, with its
/// duration in the first-contentful-paint graph, when that rounds to
/// 50 ms or more; the page's bytes as Chromium counted them. Empty when
/// the trace gives no graph. For `bench/lighthouse.sh`'s replay of
/// Lighthouse's own saved traces (`examples/lighthouse_replay.rs`).
pub fn lighthouse_list(t: &PageTrace, mobile: bool) -> Vec<(String, f64)> {
    let link = if mobile {
        &lantern::MOBILE
    } else {
        &lantern::DESKTOP
    };
    let frame = t
        .requests
        .iter()
        .find(|r| r.resource_type == "Document")
        .map(|r| r.frame.clone())
        .unwrap_or_default();
    let fp = t.fp_us.or(t.fcp_us).unwrap_or(f64::INFINITY);
    let listed: Vec<String> = t
        .requests
        .iter()
        .filter(|r| r.frame == frame && r.end_us.is_some_and(|e| e <= fp))
        .filter(|r| match r.render_blocking.as_deref() {
            Some("blocking") => true,
            Some("in_body_parser_blocking") => {
                r.priority == "VeryHigh" || (r.priority == "High" && r.resource_type == "Script")
            }
            _ => false,
        })
        .map(|r| r.url.clone())
        .collect();
    let chromium = |_: &Request| -> Option<Wire> { None };
    let Some(ms) = times(t, link, &listed, &chromium) else {
        return Vec::new();
    };
    listed
        .into_iter()
        .zip(ms)
        .filter_map(|(u, m)| m.filter(|m| m.round() >= 50.0).map(|m| (u, m)))
        .collect()
}

/// Chromium's URL `a` is redline's `b` (no fragment, no credentials).
fn same_url(a: &str, b: &str) -> bool {
    match url::Url::parse(a) {
        Ok(mut u) => {
            u.set_fragment(None);
            crate::http::display_url(&u) == b
        }
        Err(_) => a == b,
    }
}

/// Lantern's start-position penalty for a priority (ms).
fn penalty(priority: &str) -> f64 {
    match priority {
        "VeryHigh" => 0.0,
        "High" => 250.0,
        "Medium" => 500.0,
        "Low" => 1000.0,
        "VeryLow" => 2000.0,
        _ => 0.0,
    }
}

/// Each of `urls`' time on `link` in Lighthouse's simulated first
/// contentful paint (ms): none for a URL not in that graph (Chromium had
/// not finished it by its first contentful paint, or it is not
/// render-blocking there). `wire` gives a request's bytes and origin
/// (redline's measure of it; none: Chromium's); the server's time is
/// Lantern's estimate from Chromium's load ([`server_times`]).
/// None when the trace gives no graph.
pub(super) fn times(
    t: &PageTrace,
    link: &Link,
    urls: &[String],
    wire: &dyn Fn(&Request) -> Option<Wire>,
) -> Option<Vec<Option<f64>>> {
    let g = build(t)?;
    let inc = fcp_nodes(t, &g)?;
    let keep: Vec<usize> = (0..g.of.len()).filter(|&n| inc[n]).collect();
    let index = |n: usize| keep.iter().position(|&k| k == n);
    let mut nodes: Vec<Node> = Vec::new();
    let servers = server_times(t);
    for &n in &keep {
        let deps: Vec<usize> = g.deps[n].iter().filter_map(|&d| index(d)).collect();
        let (work, order) = match g.of[n] {
            Of::Task(k) => (
                Work::Cpu {
                    ms: t.tasks[k].ms(),
                    layout: t.tasks[k].layout,
                },
                t.tasks[k].start_us / 1000.0,
            ),
            Of::Req(r) => {
                let r = &t.requests[r];
                let w = wire(r).or_else(|| {
                    let u = url::Url::parse(&r.url).ok()?;
                    Some(Wire {
                        host: u.host_str().unwrap_or_default().to_string(),
                        tls: u.scheme() == "https",
                        h2: r.protocol == "h2",
                        bytes: r.bytes,
                        origin: u.origin().ascii_serialization(),
                    })
                })?;
                let server_ms = servers
                    .iter()
                    .find(|(o, _)| *o == w.origin)
                    .map_or(lantern::DEFAULT_SERVER_MS, |(_, s)| *s);
                (
                    Work::Net {
                        origin: w.origin,
                        host: w.host,
                        tls: w.tls,
                        h2: w.h2,
                        bytes: w.bytes,
                        server_ms,
                    },
                    r.start_us / 1000.0 + penalty(&r.priority),
                )
            }
        };
        nodes.push(Node { work, deps, order });
    }
    let timing = link.simulate_graph(&nodes, &connections(t, &g, &keep))?;
    Some(
        urls.iter()
            .map(|u| {
                keep.iter().zip(&timing).find_map(|(&n, tm)| match g.of[n] {
                    Of::Req(r) if same_url(&t.requests[r].url, u) => tm.map(|(s, e)| e - s),
                    _ => None,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests;
