//! `redline page`: the three views of a page (first, revalidate, cached), repeated
//! `-n` times with medians, and their text rendering (waterfall, totals and
//! the side-by-side summary). A view whose page did not load is left out of
//! the medians and never compared with another (no speed-up from a failure).

use crate::load::{load, Cache, Entry, Load, LoadOpts, View};
use std::fmt::Write as _;
use url::Url;

/// Format name of the JSON output.
pub const FORMAT: &str = "redline.page";
/// Version of the JSON output.
/// 2: the view that revalidates everything is `revalidate` (1 called it
/// `repeat`; [`crate::render::page_compare::parse`] still reads 1).
pub const VERSION: u32 = 2;

/// A view's numbers across the runs (medians).
#[derive(Clone, Debug, serde::Serialize)]
pub struct ViewSummary {
    /// Which view.
    pub view: View,
    /// Median elapsed (network-complete) time (ms).
    pub elapsed_ms: f64,
    /// Median render-critical time: the page's HTML and what blocks its
    /// first paint (ms; none when no run's page answered).
    pub render_ms: Option<f64>,
    /// Every run's elapsed time (ms), in run order.
    pub runs_ms: Vec<f64>,
    /// Median requests sent.
    pub requests: usize,
    /// Median responses taken from the cache unrequested.
    pub from_cache: usize,
    /// Median 304 answers.
    pub not_modified: usize,
    /// Median bytes on the wire.
    pub wire_bytes: u64,
    /// Median bytes decoded.
    pub decoded_bytes: u64,
    /// Median connections opened.
    pub connections: u64,
    /// Median errors.
    pub errors: usize,
    /// Runs in which the page itself did not load in this view (its time is
    /// then left out of the median, and the view is not compared with
    /// another: a failure is fast, not a speed-up).
    pub failed: usize,
}

/// The result of `redline page`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PageReport {
    /// [`FORMAT`].
    pub format: &'static str,
    /// [`VERSION`].
    pub version: u32,
    /// The page (credentials removed).
    pub url: String,
    /// How many times the views were loaded.
    pub runs: usize,
    /// Medians per view, in the order first, revalidate, cached.
    pub summary: Vec<ViewSummary>,
    /// The waterfalls of the run whose first view took the median time.
    pub views: Vec<Load>,
    /// Certificate verification was off (`--insecure`).
    pub insecure: bool,
    /// Each https origin of the first view and what it picked when offered
    /// `h2` and `http/1.1` in ALPN: read from the load's own connections, or
    /// (`--http1.1`, whose connections offer only `http/1.1`) from one probe
    /// connection per origin.
    pub alpn: Vec<crate::http::AlpnProbe>,
    /// The screen discovery followed (`--viewport`, `--mobile`, `--dpr`).
    pub viewport: crate::viewport::Viewport,
    /// Origins of another site than the page's that the first view fetched
    /// from, first contacted first.
    pub third_party: Vec<ThirdParty>,
}

/// An origin of another site than the page's.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ThirdParty {
    /// `scheme://host:port`.
    pub origin: String,
    /// Requests it answered in the first view (errors included).
    pub requests: usize,
    /// Bytes on the wire from it in the first view.
    pub wire_bytes: u64,
}

/// The third-party origins of a load, first contacted first.
pub fn third_parties(l: &Load) -> Vec<ThirdParty> {
    let mut out: Vec<ThirdParty> = Vec::new();
    for e in l.entries.iter().filter(|e| e.third_party && !e.from_cache) {
        let Ok(u) = Url::parse(&e.url) else { continue };
        let origin = crate::http::host_key(&u);
        match out.iter_mut().find(|t| t.origin == origin) {
            Some(t) => {
                t.requests += 1;
                t.wire_bytes += e.wire_bytes;
            }
            None => out.push(ThirdParty {
                origin,
                requests: 1,
                wire_bytes: e.wire_bytes,
            }),
        }
    }
    out
}

/// Origins probed for HTTP/2 at most (a bound for pages with many hosts).
pub const MAX_PROBES: usize = 20;

/// What every https origin the load contacted picks when offered `h2,
/// http/1.1` (first seen first): the load's own connection's answer where it
/// made that offer, else a probe connection.
pub fn probe_origins(l: &Load, page: &Url, opts: &LoadOpts) -> Vec<crate::http::AlpnProbe> {
    let page_host = page.host_str().unwrap_or("");
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for e in l.entries.iter().filter(|e| !e.from_cache) {
        let Ok(u) = Url::parse(&e.url) else { continue };
        if u.scheme() != "https" || !seen.insert(crate::http::host_key(&u)) {
            continue;
        }
        if out.len() >= MAX_PROBES {
            break;
        }
        let third = !crate::load::same_site(u.host_str().unwrap_or(""), page_host);
        let key = crate::http::host_key(&u);
        let seen_by_load = l.conns.iter().find(|c| {
            c.origin == key && c.tls.is_some() && c.alpn_offered.iter().any(|a| a == "h2")
        });
        out.push(match seen_by_load {
            Some(c) => {
                let t = c.tls.as_ref().expect("checked");
                crate::http::AlpnProbe {
                    origin: key,
                    third_party: third,
                    offered: c.alpn_offered.clone(),
                    alpn: t.alpn.clone(),
                    h2: t.alpn.as_deref() == Some("h2"),
                    tls_version: Some(t.version.clone()),
                    error: None,
                    probed: false,
                }
            }
            None => crate::http::probe_alpn(&u, &opts.client, third),
        });
    }
    out
}

/// Loads the first, revalidate and cached views `runs` times.
pub fn run(url: &Url, runs: usize, opts: &LoadOpts, echo: &mut dyn FnMut(&str)) -> PageReport {
    let runs = runs.max(1);
    let mut all: Vec<[Load; 3]> = Vec::with_capacity(runs);
    for r in 0..runs {
        if runs > 1 {
            echo(&format!("Run {} of {runs}", r + 1));
        }
        echo("First view (empty cache):");
        let mut first = load(url, View::First, None, opts, echo);
        // The cache holds the first view's bodies (moved, not copied); the
        // later views charge them to their byte budget, and drop their own
        // bodies when done (the audit reads the first view's only).
        let cache = Cache::take_from(&mut first);
        echo("Revalidate view (every resource revalidated):");
        let mut revalidate = load(url, View::Revalidate, Some(&cache), opts, echo);
        strip_bodies(&mut revalidate);
        echo("Cached view (navigating again: fresh from the cache, stale revalidated):");
        let mut cached = load(url, View::Cached, Some(&cache), opts, echo);
        strip_bodies(&mut cached);
        cache.restore(&mut first);
        if runs > 1 {
            // Only the numbers of each run are needed: the bodies (kept for
            // the audit, which loads once) would multiply memory by -n.
            strip_bodies(&mut first);
        }
        all.push([first, revalidate, cached]);
    }
    let summary = (0..3)
        .map(|v| summarize(&all.iter().map(|r| &r[v]).collect::<Vec<_>>()))
        .collect();
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by(|&a, &b| all[a][0].elapsed_ms.total_cmp(&all[b][0].elapsed_ms));
    let pick = order[(order.len() - 1) / 2];
    let views: Vec<Load> = all.swap_remove(pick).into();
    let alpn = probe_origins(&views[0], url, opts);
    let third_party = third_parties(&views[0]);
    PageReport {
        format: FORMAT,
        version: VERSION,
        url: crate::http::display_url(url),
        runs,
        summary,
        views,
        insecure: opts.client.tls.as_ref().is_some_and(|t| t.insecure),
        alpn,
        viewport: opts.viewport,
        third_party,
    }
}

fn strip_bodies(l: &mut Load) {
    for e in &mut l.entries {
        e.body = None;
    }
}

fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[(v.len() - 1) / 2]
}

fn summarize(all: &[&Load]) -> ViewSummary {
    // Medians over the runs whose page loaded: a refused or unresolved page
    // "loads" in a millisecond, which is no time to report.
    let ok: Vec<&Load> = all.iter().copied().filter(|l| l.page_loaded()).collect();
    let failed = all.len() - ok.len();
    let loads: &[&Load] = if ok.is_empty() { all } else { &ok };
    let m = |f: &dyn Fn(&Load) -> u64| median(loads.iter().map(|l| f(l)).collect());
    ViewSummary {
        view: loads[0].view,
        failed,
        elapsed_ms: if ok.is_empty() {
            0.0
        } else {
            median(loads.iter().map(|l| l.elapsed_ms).collect())
        },
        render_ms: {
            let r: Vec<f64> = loads.iter().filter_map(|l| l.render_ms).collect();
            (!r.is_empty()).then(|| median(r))
        },
        runs_ms: loads.iter().map(|l| l.elapsed_ms).collect(),
        requests: m(&|l| l.requests as u64) as usize,
        from_cache: m(&|l| l.from_cache as u64) as usize,
        not_modified: m(&|l| l.not_modified as u64) as usize,
        wire_bytes: m(&|l| l.wire_bytes),
        decoded_bytes: m(&|l| l.decoded_bytes),
        connections: m(&|l| l.connections),
        errors: m(&|l| l.errors as u64) as usize,
    }
}

/// Bytes in words: `512 B`, `12.3 KiB`, `1.20 MiB`.
pub fn bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.2} MiB", n as f64 / 1048576.0)
    }
}

/// Milliseconds in words.
pub fn millis(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

fn short_url(e: &Entry, page: &Url) -> String {
    match Url::parse(&e.url) {
        Ok(u) if u.origin() == page.origin() => {
            let mut s = u.path().to_string();
            if let Some(q) = u.query() {
                s.push('?');
                s.push_str(q);
            }
            s
        }
        _ => e.url.clone(),
    }
}

fn cache_note(e: &Entry) -> String {
    let mut parts = Vec::new();
    if let Some(f) = &e.freshness {
        match f.source {
            "max-age" | "expires" | "heuristic" if f.lifetime_s > 0 => parts.push(format!(
                "{} {}",
                f.source,
                crate::cache::human_secs(f.lifetime_s)
            )),
            "no-store" | "no-cache" => parts.push(f.source.to_string()),
            _ => {}
        }
        if f.public {
            parts.push("public".into());
        }
    }
    if e.etag.is_some() {
        parts.push("ETag".into());
    }
    if e.last_modified.is_some() {
        parts.push("LM".into());
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

/// Renders one view's waterfall.
pub fn waterfall(l: &Load, page: &Url) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} requests ({} from cache, {} not modified), {} on the wire ({} decoded), {} connection{} opened, {}\n  ({})",
        capitalize(l.view.name()),
        l.requests,
        l.from_cache,
        l.not_modified,
        bytes(l.wire_bytes),
        bytes(l.decoded_bytes),
        l.connections,
        if l.connections == 1 { "" } else { "s" },
        millis(l.elapsed_ms),
        l.view.describe()
    );
    let _ = writeln!(
        s,
        "  {:>3} {:>8} {:>8} {:>8} {:>8} {:>8} {:<9} {:>6} {:>10} {:>10} {:>5} {:<24} url",
        "#",
        "start",
        "connect",
        "tls",
        "waiting",
        "transfer",
        "proto#conn",
        "status",
        "wire",
        "decoded",
        "enc",
        "cache"
    );
    for (i, e) in l.entries.iter().enumerate() {
        let status = if e.from_cache {
            "cache".to_string()
        } else if let Some(st) = e.status {
            st.to_string()
        } else {
            "error".to_string()
        };
        let connect = match (e.phases.dns_ms, e.phases.connect_ms) {
            (Some(d), Some(c)) => format!("{:.1}", d + c),
            (Some(d), None) => format!("{d:.1}"),
            _ if e.from_cache => "".into(),
            _ => "reuse".into(),
        };
        let tls = match e.phases.tls_ms {
            Some(t) => format!("{t:.1}"),
            None => String::new(),
        };
        let enc = e.content_encoding.clone().unwrap_or_else(|| "-".into());
        let via = match (&e.protocol, e.conn) {
            (Some(p), Some(c)) => format!("{p}#{c}"),
            _ => String::new(),
        };
        let mut line = format!(
            "  {:>3} {:>8.1} {:>8} {:>8} {:>8} {:>8} {:<9} {:>6} {:>10} {:>10} {:>5} {:<24} {}",
            i + 1,
            e.start_ms,
            connect,
            tls,
            if e.from_cache {
                String::new()
            } else {
                format!("{:.1}", e.phases.waiting_ms)
            },
            if e.from_cache {
                String::new()
            } else {
                format!("{:.1}", e.phases.transfer_ms)
            },
            via,
            status,
            if e.from_cache {
                String::new()
            } else {
                bytes(e.wire_bytes)
            },
            if e.from_cache {
                String::new()
            } else {
                bytes(e.decoded_bytes)
            },
            enc,
            cache_note(e),
            short_url(e, page)
        );
        if e.third_party {
            line.push_str("  [third party]");
        }
        if e.retried {
            line.push_str("  [retried: not processed on its first connection]");
        }
        if e.by_script.is_some() {
            line.push_str("  [inserted by a script: found by --browser]");
        }
        if e.alt_svc {
            line.push_str("  [h3 via Alt-Svc]");
        }
        if e.h3_fallback.is_some() {
            line.push_str("  [Alt-Svc h3 failed: over TCP]");
        }
        if let Some(r) = &e.redirect_to {
            let _ = write!(line, "  -> {r}");
        }
        if let Some(err) = &e.error {
            let _ = write!(line, "  ({err})");
        }
        if e.decode_capped {
            line.push_str("  (decoding stopped at 50 MiB)");
        }
        let _ = writeln!(s, "{line}");
    }
    if l.entries
        .iter()
        .any(|e| e.protocol.as_deref() == Some("h3") && e.phases.tls_ms.is_some())
    {
        let _ = writeln!(
            s,
            "  h3: the QUIC handshake is connect and TLS in one: its time is under tls, connect shows the lookup only"
        );
    }
    for n in &l.alt_svc {
        let _ = writeln!(s, "  HTTP/3 (Alt-Svc): {n}");
    }
    for h in &l.hosts {
        let _ = writeln!(
            s,
            "  {}: {} connection{} ({}), {} request{}",
            h.origin,
            h.connections,
            if h.connections == 1 { "" } else { "s" },
            h.protocols.join(", "),
            h.requests,
            if h.requests == 1 { "" } else { "s" }
        );
    }
    for c in l.conns.iter().filter(|c| c.tls.is_some()) {
        if let Some(t) = &c.tls {
            let _ = writeln!(
                s,
                "  connection {}: {} {} {} (ALPN: {})",
                c.id,
                c.origin,
                t.version,
                t.cipher,
                t.alpn.as_deref().unwrap_or("none")
            );
        }
    }
    if l.budget_exhausted {
        let _ = writeln!(
            s,
            "  TRUNCATED: stopped at the byte budget ({} read or kept; --max-bytes): the page references more, these numbers are a floor",
            bytes(l.budget_used)
        );
    } else if l.truncated {
        let _ = writeln!(
            s,
            "  (stopped at the resource limit: the page references more)"
        );
    }
    if !l.page_loaded() {
        let _ = writeln!(s, "  (the page itself did not load in this view)");
    }
    s
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// Renders the summary table of the three views.
pub fn summary_table(r: &PageReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Summary{}:",
        if r.runs > 1 {
            format!(" (medians of {} runs)", r.runs)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "  {:<12} {:>10} {:>10} {:>9} {:>10} {:>6} {:>12} {:>12} {:>6}",
        "view", "time", "render", "requests", "from cache", "304s", "wire", "decoded", "errors"
    );
    for v in &r.summary {
        let time = if v.failed == r.runs {
            "failed".to_string()
        } else {
            millis(v.elapsed_ms)
        };
        let render = v.render_ms.map_or("-".to_string(), millis);
        let _ = writeln!(
            s,
            "  {:<12} {:>10} {:>10} {:>9} {:>10} {:>6} {:>12} {:>12} {:>6}",
            v.view.name(),
            time,
            render,
            v.requests,
            v.from_cache,
            v.not_modified,
            bytes(v.wire_bytes),
            bytes(v.decoded_bytes),
            v.errors
        );
    }
    let Some(f) = r.summary.first() else {
        return s;
    };
    for v in r.summary.iter().skip(1) {
        let _ = writeln!(s, "  {}", compared(f, v));
    }
    s
}

/// One view against the first, in words; never a ratio with a view whose
/// page failed (a failure is fast, not a speed-up).
fn compared(f: &ViewSummary, v: &ViewSummary) -> String {
    let name = v.view.name();
    if f.failed > 0 || v.failed > 0 {
        let which = if f.failed > 0 && v.failed > 0 {
            "in both views"
        } else if f.failed > 0 {
            "in the first view"
        } else {
            "in this view"
        };
        return format!(
            "{name}: not compared with the first view (the page did not load {which} in every run)"
        );
    }
    if v.errors > f.errors {
        // Failed fetches end fast: a speed-up made of errors is none.
        return format!(
            "{name}: not compared with the first view ({} failed requests against {})",
            v.errors, f.errors
        );
    }
    if v.elapsed_ms > 0.0 && f.elapsed_ms > 0.0 {
        format!(
            "{name}: {:.1}x the speed of the first view, {} of {} on the wire",
            f.elapsed_ms / v.elapsed_ms,
            bytes(v.wire_bytes),
            bytes(f.wire_bytes)
        )
    } else {
        format!(
            "{name}: nothing was requested; {} of {} on the wire",
            bytes(v.wire_bytes),
            bytes(f.wire_bytes)
        )
    }
}

/// The whole text report: every view's waterfall, then the summary.
pub fn render_text(r: &PageReport, page: &Url) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\nPage: {}", r.url);
    if r.insecure {
        let _ = writeln!(
            s,
            "certificate verification OFF (--insecure): the server's identity was not checked"
        );
    }
    for l in &r.views {
        let _ = writeln!(s);
        s.push_str(&waterfall(l, page));
    }
    if !r.alpn.is_empty() {
        let _ = writeln!(s, "\nHTTP/2 (each https origin offered ALPN h2, http/1.1; [probe]: by a separate connection, as the load offered http/1.1 only):");
        for p in &r.alpn {
            let what = match (&p.error, &p.alpn) {
                (Some(e), _) => format!("probe failed: {e}"),
                (None, Some(a)) if p.h2 => format!("offers HTTP/2 (chose {a})"),
                (None, Some(a)) => format!("no HTTP/2 (chose {a})"),
                (None, None) => "no HTTP/2 (ignored ALPN)".to_string(),
            };
            let probe = if p.probed { " [probe]" } else { "" };
            let _ = writeln!(s, "  {}: {what}{probe}", p.origin);
        }
    }
    s.push_str(&discovery_text(r));
    let _ = writeln!(s);
    s.push_str(&summary_table(r));
    s
}

/// The screen followed, third-party origins, and what discovery left out.
pub fn discovery_text(r: &PageReport) -> String {
    let mut s = String::new();
    let v = &r.viewport;
    let _ = writeln!(
        s,
        "\nDiscovered for a {}x{} {} screen at DPR {}.",
        v.width,
        v.height,
        if v.mobile { "mobile" } else { "desktop" },
        v.dpr
    );
    if r.third_party.is_empty() {
        let _ = writeln!(s, "Third-party origins: none.");
    } else {
        let _ = writeln!(s, "Third-party origins (another site than the page's):");
        for t in &r.third_party {
            let _ = writeln!(
                s,
                "  {}: {} request{}, {}",
                t.origin,
                t.requests,
                if t.requests == 1 { "" } else { "s" },
                bytes(t.wire_bytes)
            );
        }
    }
    let Some(first) = r.views.first() else {
        return s;
    };
    let d = &first.discovery;
    let list = |s: &mut String, title: String, items: &[crate::discover::Skipped]| {
        if items.is_empty() {
            return;
        }
        let _ = writeln!(s, "{title}");
        for it in items.iter().take(20) {
            let _ = writeln!(s, "  {} ({})", it.url, it.reason);
        }
        if items.len() > 20 {
            let _ = writeln!(s, "  … and {} more", items.len() - 20);
        }
    };
    list(
        &mut s,
        format!(
            "Deferred: {} loading=lazy resource{} below the first screen, not in the first view (bytes unknown: not fetched):",
            d.deferred.len(),
            if d.deferred.len() == 1 { "" } else { "s" }
        ),
        &d.deferred,
    );
    list(
        &mut s,
        "Module imports not followed:".to_string(),
        &d.not_followed,
    );
    list(
        &mut s,
        "Not fetched (scope: link-local/metadata addresses, --same-origin):".to_string(),
        &d.blocked,
    );
    s
}
