//! What stands between the HTML and the first paint, read from the page's
//! own waterfall: render-blocking resources (Lighthouse's
//! render-blocking-resources: stylesheets that apply and classic scripts
//! without `async`/`defer`, in the head) with the time each adds after the
//! HTML arrived and the time it takes on Lighthouse's reference link
//! (`lantern`), the critical request chain (Lighthouse's
//! critical-request-chains: the longest chain of render-critical requests,
//! each found only when the one before it answered), and resource hints
//! that cost without helping: `preconnect` to an origin the page never
//! uses, `preload` of a resource nothing on the page uses.

use super::{check, fcp_graph, finding, lantern, note, Check, Ctx, Fix, Severity};
use crate::discover::{scan_html, HtmlScan, Kind};
use crate::load::Entry;
use crate::page::{bytes, millis};
use url::Url;

/// A render-blocking resource adding less than this is not a finding
/// (Lighthouse's `MINIMUM_WASTED_MS`).
pub const BLOCKING_MIN_MS: f64 = 50.0;
/// Render-blocking time (after the HTML arrived) below this is a note.
pub const BLOCKING_NOTE_MS: f64 = 300.0;
/// A critical chain this deep (the page, a stylesheet, what it imports…) is
/// worth a note: every level is one more round trip before the first paint.
pub const CHAIN_NOTE_DEPTH: usize = 3;

/// The page's final HTML response, its URL and what its HTML declares.
fn page_scan<'a>(cx: &'a Ctx) -> Option<(&'a Entry, Url, HtmlScan)> {
    let doc = cx.doc()?;
    let body = doc.body.as_deref()?;
    let scan = scan_html(body, &cx.first.discovery.viewport);
    let mut base = Url::parse(&doc.url).ok()?;
    if let Some(b) = scan.base.as_deref().and_then(|b| base.join(b).ok()) {
        base = b;
    }
    Some((doc, base, scan))
}

/// The first view's entries that block the page's first paint.
fn blocking_entries(cx: &Ctx) -> Vec<usize> {
    match super::final_document(cx.first) {
        Some(d) if cx.doc().is_some() => {
            crate::load::render_blocking(&cx.first.entries, d, &cx.first.discovery.viewport)
        }
        _ => Vec::new(),
    }
}

/// The first view's fetched entry for `href` as written in the page.
fn entry_for<'a>(cx: &'a Ctx, base: &Url, href: &str) -> Option<&'a Entry> {
    let mut u = base.join(href).ok()?;
    u.set_fragment(None);
    let key = crate::http::display_url(&u);
    cx.first
        .entries
        .iter()
        .find(|e| e.url == key && !e.from_cache && !e.after_load)
}

/// The origin of `url` (scheme, host, port), as Lantern groups requests.
fn origin(url: &str) -> Option<String> {
    Url::parse(url)
        .ok()
        .map(|u| u.origin().ascii_serialization())
}

/// The server's own time to answer on `origin`, as Lantern estimates it
/// from the load: the median over its responses of the time to the first
/// byte less one round trip (the fastest TCP connect to it). With no
/// response to measure, Lantern's default; unlike Lantern, a measured 0
/// (a server on loopback) stays 0 rather than becoming that default.
fn server_ms(cx: &Ctx, origin_: &str) -> f64 {
    let mine: Vec<&Entry> = cx
        .fetched()
        .filter(|e| origin(&e.url).as_deref() == Some(origin_))
        .collect();
    let rtt = mine
        .iter()
        .filter_map(|e| e.phases.connect_ms)
        .fold(f64::INFINITY, f64::min);
    let rtt = if rtt.is_finite() { rtt } else { 0.0 };
    let mut v: Vec<f64> = mine
        .iter()
        .map(|e| (e.phases.waiting_ms - rtt).max(0.0))
        .collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => lantern::DEFAULT_SERVER_MS,
        n if n % 2 == 0 => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        n => v[n / 2],
    }
}

/// Each of `blocking`'s time on Lighthouse's reference link (entry
/// indices; none when not simulated). With Chromium's trace (`--browser`),
/// on Lantern's graph of the first contentful paint built from it
/// (`fcp_graph`: the main thread's tasks in it; a resource not in that
/// graph has none); without, as Lantern simulates the first paint's
/// requests alone: the page, then the blocking resources, each `@import`ed
/// sheet after the sheet importing it, a script after a nominal parser
/// task (`lantern::PARSE_MS`).
fn on_link(cx: &Ctx, link: &lantern::Link, doc: usize, blocking: &[usize]) -> Vec<Option<f64>> {
    let entries = &cx.first.entries;
    let mut servers: Vec<(String, f64)> = Vec::new();
    let mut server_of = |o: &str| match servers.iter().find(|(k, _)| k == o) {
        Some((_, v)) => *v,
        None => {
            let v = server_ms(cx, o);
            servers.push((o.to_string(), v));
            v
        }
    };
    if let Some(t) = &cx.probes.trace {
        let urls: Vec<String> = blocking.iter().map(|&i| entries[i].url.clone()).collect();
        // Each request as redline measured it, found by its URL.
        let wire = |r: &crate::trace::Request| -> Option<fcp_graph::Wire> {
            let u = Url::parse(&r.url).ok()?;
            let o = u.origin().ascii_serialization();
            let key = crate::http::display_url(&u);
            let e = entries
                .iter()
                .find(|e| e.url == key && !e.from_cache && e.status.is_some());
            Some(fcp_graph::Wire {
                host: u.host_str().unwrap_or_default().to_string(),
                tls: u.scheme() == "https",
                h2: e.is_some_and(|e| e.protocol.as_deref() == Some("h2")),
                bytes: e.map_or(r.bytes, |e| e.wire_bytes),
                origin: o,
            })
        };
        if let Some(v) = fcp_graph::times(t, link, &urls, &wire) {
            return v;
        }
    }
    let mut req = |i: usize, after: Option<usize>| -> Option<lantern::Req> {
        let e = &entries[i];
        let u = Url::parse(&e.url).ok()?;
        let o = u.origin().ascii_serialization();
        let server = server_of(&o);
        Some(lantern::Req {
            origin: o,
            host: u.host_str().unwrap_or_default().to_string(),
            tls: u.scheme() == "https",
            h2: e.protocol.as_deref() == Some("h2"),
            bytes: e.wire_bytes,
            after,
            order: lantern::order(e.start_ms, e.kind == Kind::Script),
            server_ms: server,
            delay_ms: if e.kind == Kind::Script {
                lantern::PARSE_MS
            } else {
                0.0
            },
        })
    };
    let mut reqs = Vec::new();
    let Some(page) = req(doc, None) else {
        return vec![None; blocking.len()];
    };
    reqs.push(page);
    for &i in blocking {
        // An imported sheet waits for its importer, the rest for the page.
        let after = entries[i]
            .parent
            .and_then(|p| blocking.iter().position(|&b| b == p))
            .map_or(0, |k| k + 1);
        match req(i, Some(after)) {
            Some(r) => reqs.push(r),
            None => return vec![None; blocking.len()],
        }
    }
    match link.simulate(&reqs) {
        Some(t) => t[1..].iter().map(|(s, e)| Some(e - s)).collect(),
        None => vec![None; blocking.len()],
    }
}

pub(super) fn render_blocking(cx: &Ctx) -> Check {
    const THRESHOLD: &str = "stylesheets and synchronous scripts in the head hold the first paint until they have loaded (Lighthouse's render-blocking resources); each is charged the time it adds after the HTML arrived, and the time it takes on Lighthouse's reference link (its simulated throttling, as Lighthouse charges it): from 50 ms on either a finding (Lighthouse), from 300 ms a warning";
    let Some((doc, _, _)) = page_scan(cx) else {
        return check(
            "render-blocking",
            "No render-blocking resources",
            THRESHOLD,
            None,
            "not applicable: no HTML page".into(),
            Vec::new(),
            FIX_RENDER_BLOCKING,
        );
    };
    let mut idx: Vec<usize> = blocking_entries(cx)
        .into_iter()
        .filter(|&i| !cx.first.entries[i].from_cache)
        .collect();
    idx.sort_by(|&a, &b| {
        cx.first.entries[a]
            .end_ms
            .total_cmp(&cx.first.entries[b].end_ms)
    });
    let blocking: Vec<&Entry> = idx.iter().map(|&i| &cx.first.entries[i]).collect();
    let link = if cx.first.discovery.viewport.mobile {
        &lantern::MOBILE
    } else {
        &lantern::DESKTOP
    };
    let link_ms = match super::final_document(cx.first) {
        Some(d) => on_link(cx, link, d, &idx),
        None => vec![None; idx.len()],
    };
    // Each resource is charged what it adds to the wait after the HTML
    // arrived, beyond the ones that ended before it (they load in
    // parallel): the charges sum to the whole render-blocking time.
    let html_end = doc.end_ms;
    let mut reached = html_end;
    let mut f = Vec::new();
    for (e, &on_link) in blocking.iter().zip(&link_ms) {
        let adds = (e.end_ms - reached).max(0.0);
        reached = reached.max(e.end_ms);
        // Lighthouse rounds its time to the ms before the 50 ms test.
        let worst = adds.max(on_link.map_or(0.0, f64::round));
        if worst < BLOCKING_MIN_MS {
            continue;
        }
        let sev = if worst >= BLOCKING_NOTE_MS {
            Severity::Warning
        } else {
            Severity::Info
        };
        let imported = e
            .parent
            .is_some_and(|p| idx.contains(&p) && cx.first.entries[p].kind == Kind::Stylesheet);
        let what = if e.kind == Kind::Script {
            "synchronous script"
        } else {
            "stylesheet"
        };
        let (t, mut fi) = finding(
            sev,
            e,
            format!(
                "{what}{}, loaded by {}: adds {} after the HTML arrived{}",
                if imported {
                    " imported by a blocking stylesheet"
                } else {
                    " in the head"
                },
                millis(e.end_ms),
                millis(adds),
                on_link.map_or(String::new(), |l| format!(
                    "; {} on {}",
                    millis(l),
                    link.name
                )),
            ),
        );
        fi.saving_ms = Some(adds);
        fi.link_ms = on_link;
        f.push((t, fi));
    }
    let total = reached - html_end;
    let own = blocking.iter().filter(|e| !e.third_party).count();
    let score = if f.is_empty() {
        100
    } else if total < BLOCKING_NOTE_MS && f.iter().all(|(_, fi)| fi.severity != Severity::Warning) {
        85
    } else {
        65
    };
    check(
        "render-blocking",
        "No render-blocking resources",
        THRESHOLD,
        Some(score),
        format!(
            "{} render-blocking resources ({own} on the page's site): the first paint waits {} after the HTML arrived{}",
            blocking.len(),
            millis(total.max(0.0)),
            if cx.probes.trace.is_some() {
                "; reference-link times on Lighthouse's graph of Chromium's trace (--browser)"
            } else {
                ""
            }
        ),
        f,
        FIX_RENDER_BLOCKING,
    )
}

/// A render-critical request: the page and its frames, a stylesheet that
/// applies or is imported, a blocking script, a font.
fn critical(e: &Entry, blocking: &[String]) -> bool {
    match e.kind {
        Kind::Document | Kind::Iframe | Kind::Font | Kind::Stylesheet => true,
        Kind::Script => blocking.contains(&e.url),
        _ => false,
    }
}

pub(super) fn critical_chain(cx: &Ctx) -> Check {
    const THRESHOLD: &str = "every level of a chain of render-critical requests (the page, a stylesheet, what it imports, its fonts) is one more round trip before the first paint (Lighthouse's critical request chains); 3 levels or more are a note";
    if page_scan(cx).is_none() {
        return check(
            "critical-chain",
            "Short critical request chains",
            THRESHOLD,
            None,
            "not applicable: no HTML page".into(),
            Vec::new(),
            FIX_CHAIN,
        );
    }
    let blocking: Vec<String> = blocking_entries(cx)
        .into_iter()
        .map(|i| cx.first.entries[i].url.clone())
        .collect();
    let entries = &cx.first.entries;
    // The longest chain ends at the critical entry that ends last among the
    // deepest: walk up its parents (redirect hops are levels too).
    let mut best: Option<(usize, f64, Vec<usize>)> = None;
    for (i, e) in entries.iter().enumerate() {
        if e.from_cache || e.after_load || !critical(e, &blocking) {
            continue;
        }
        let mut chain = vec![i];
        let mut up = e.parent;
        while let Some(p) = up.filter(|_| chain.len() < 64) {
            let Some(pe) = entries.get(p) else { break };
            if !critical(pe, &blocking) && pe.redirect_to.is_none() {
                break;
            }
            chain.push(p);
            up = pe.parent;
        }
        chain.reverse();
        let better = match &best {
            None => true,
            Some((d, end, _)) => chain.len() > *d || (chain.len() == *d && e.end_ms > *end),
        };
        if better {
            best = Some((chain.len(), e.end_ms, chain));
        }
    }
    let Some((depth, end, chain)) = best else {
        return check(
            "critical-chain",
            "Short critical request chains",
            THRESHOLD,
            None,
            "not applicable: no render-critical request".into(),
            Vec::new(),
            FIX_CHAIN,
        );
    };
    let start = entries[chain[0]].start_ms;
    let path: Vec<String> = chain
        .iter()
        .map(|&i| {
            let e = &entries[i];
            format!("{} ({})", e.url, millis(e.end_ms - e.start_ms))
        })
        .collect();
    let mut f = Vec::new();
    if depth >= CHAIN_NOTE_DEPTH {
        let last = &entries[*chain.last().expect("a chain has one entry")];
        f.push(finding(
            Severity::Info,
            last,
            format!(
                "{depth} levels, {} from the first request: {}",
                millis(end - start),
                path.join(" → ")
            ),
        ));
    }
    check(
        "critical-chain",
        "Short critical request chains",
        THRESHOLD,
        Some(if depth >= CHAIN_NOTE_DEPTH { 85 } else { 100 }),
        format!(
            "longest chain: {depth} levels, {} ({})",
            millis(end - start),
            path.join(" → ")
        ),
        f,
        FIX_CHAIN,
    )
}

/// A preloaded resource is used: its `href` is written twice in the page
/// (the preload and a use), or its file name in a stylesheet, script or
/// frame the page loaded.
fn used_elsewhere(cx: &Ctx, html: &[u8], href: &str, entry: &Entry) -> bool {
    let written = |body: &[u8], needle: &str| {
        if needle.is_empty() {
            return 0;
        }
        body.windows(needle.len())
            .filter(|w| *w == needle.as_bytes())
            .take(2)
            .count()
    };
    if written(html, href) >= 2 {
        return true;
    }
    let tail = Url::parse(&entry.url)
        .ok()
        .and_then(|u| u.path_segments()?.next_back().map(str::to_string))
        .unwrap_or_default();
    cx.first.entries.iter().any(|e| {
        e.url != entry.url
            && matches!(e.kind, Kind::Stylesheet | Kind::Script | Kind::Iframe)
            && e.body.as_deref().is_some_and(|b| written(b, &tail) >= 1)
    })
}

pub(super) fn hints(cx: &Ctx) -> Check {
    const THRESHOLD: &str = "a preconnect to an origin the page never requests, or a preload nothing on the page uses, costs a connection or bytes for nothing (Chromium warns; Lighthouse)";
    let Some((doc, base, scan)) = page_scan(cx) else {
        return check(
            "resource-hints",
            "Preconnect and preload used",
            THRESHOLD,
            None,
            "not applicable: no HTML page".into(),
            Vec::new(),
            FIX_HINTS,
        );
    };
    let html = doc.body.as_deref().unwrap_or_default();
    let mut f = Vec::new();
    let (mut n, mut bad) = (0u32, 0u32);
    let page_origin = Url::parse(&doc.url).ok().map(|u| crate::http::host_key(&u));
    for href in &scan.preconnects {
        let Some(u) = base.join(href).ok().filter(|u| u.has_host()) else {
            continue;
        };
        n += 1;
        let origin = crate::http::host_key(&u);
        let used = cx.first.entries.iter().any(|e| {
            !e.after_load && Url::parse(&e.url).is_ok_and(|eu| crate::http::host_key(&eu) == origin)
        });
        if Some(&origin) == page_origin.as_ref() {
            f.push(note(
                Severity::Info,
                format!("preconnect to {origin}: the page's own origin, already connected"),
            ));
        } else if !used {
            bad += 1;
            f.push(note(
                Severity::Warning,
                format!("preconnect to {origin}: the page requested nothing from it (a connection opened for nothing)"),
            ));
        }
    }
    for (href, as_) in &scan.preloads {
        let Some(e) = entry_for(cx, &base, href) else {
            continue;
        };
        n += 1;
        if !used_elsewhere(cx, html, href, e) {
            bad += 1;
            let (t, mut fi) = finding(
                Severity::Warning,
                e,
                format!(
                    "preload as={as_}: nothing on the page uses it ({} on the wire for nothing)",
                    bytes(e.wire_bytes)
                ),
            );
            fi.saving_bytes = Some(e.wire_bytes);
            f.push((t, fi));
        }
    }
    check(
        "resource-hints",
        "Preconnect and preload used",
        THRESHOLD,
        (n > 0).then(|| 100 * (n - bad) / n),
        format!("{n} preconnect/preload hints, {bad} unused"),
        f,
        FIX_HINTS,
    )
}

pub(super) const FIX_RENDER_BLOCKING: Fix = Fix {
    apache: "# in the HTML, not the server: <script defer src=…> (or async) for scripts;\n# inline the CSS the first screen needs and load the rest with\n# <link rel=preload as=style onload=\"this.rel='stylesheet'\">; media=\"print\" for print sheets",
    nginx: "# in the HTML, not the server: <script defer src=…> (or async) for scripts;\n# inline the CSS the first screen needs and load the rest with\n# <link rel=preload as=style onload=\"this.rel='stylesheet'\">; media=\"print\" for print sheets",
    lighttpd: "# in the HTML, not the server: <script defer src=…> (or async) for scripts;\n# inline the CSS the first screen needs and load the rest with\n# <link rel=preload as=style onload=\"this.rel='stylesheet'\">; media=\"print\" for print sheets",
};

pub(super) const FIX_CHAIN: Fix = Fix {
    apache: "# in the HTML: no CSS @import (link each sheet from the page); preload late fonts:\n# <link rel=preload as=font type=font/woff2 href=… crossorigin>",
    nginx: "# in the HTML: no CSS @import (link each sheet from the page); preload late fonts:\n# <link rel=preload as=font type=font/woff2 href=… crossorigin>",
    lighttpd: "# in the HTML: no CSS @import (link each sheet from the page); preload late fonts:\n# <link rel=preload as=font type=font/woff2 href=… crossorigin>",
};

pub(super) const FIX_HINTS: Fix = Fix {
    apache: "# in the HTML: remove <link rel=preconnect> to origins the page does not use,\n# and <link rel=preload> of resources it does not use (or fix their URL and as=)",
    nginx: "# in the HTML: remove <link rel=preconnect> to origins the page does not use,\n# and <link rel=preload> of resources it does not use (or fix their URL and as=)",
    lighttpd: "# in the HTML: remove <link rel=preconnect> to origins the page does not use,\n# and <link rel=preload> of resources it does not use (or fix their URL and as=)",
};
