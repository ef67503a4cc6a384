//! A view's entries and connections summed up into a [`Load`], and what
//! holds the page's first paint (its render-blocking resources).

use super::*;

/// The entries (indices) that hold the first paint of the document at
/// `doc`: what its head declares render-blocking
/// ([`crate::discover::HtmlScan::blocking`]: stylesheets that apply,
/// classic scripts without `async`/`defer`), as fetched or taken from the
/// cache in this view, each once, in the order written; then the
/// stylesheets those `@import`.
pub fn render_blocking(
    entries: &[Entry],
    doc: usize,
    vp: &crate::viewport::Viewport,
) -> Vec<usize> {
    let Some(d) = entries.get(doc) else {
        return Vec::new();
    };
    let (Some(body), Ok(mut base)) = (d.body.as_deref(), Url::parse(&d.url)) else {
        return Vec::new();
    };
    let scan = crate::discover::scan_html(body, vp);
    if let Some(b) = scan.base.as_deref().and_then(|b| base.join(b).ok()) {
        base = b;
    }
    let mut out: Vec<usize> = Vec::new();
    for href in &scan.blocking {
        let Some(mut u) = base.join(href).ok() else {
            continue;
        };
        u.set_fragment(None);
        let key = display_url(&u);
        if let Some(i) = entries.iter().position(|e| e.url == key && !e.after_load) {
            if !out.contains(&i) {
                out.push(i);
            }
        }
    }
    // What a blocking stylesheet `@import`s blocks too (Chromium marks it
    // render-blocking, as Lighthouse lists it).
    for _ in 0..16 {
        let before = out.len();
        for (i, e) in entries.iter().enumerate() {
            if e.kind == Kind::Stylesheet
                && !e.after_load
                && !out.contains(&i)
                && e.parent
                    .is_some_and(|p| out.contains(&p) && entries[p].kind == Kind::Stylesheet)
            {
                out.push(i);
            }
        }
        if out.len() == before {
            break;
        }
    }
    out
}

/// The page's own document in `entries`: the first document that answered
/// 2xx or 304 without redirecting (iframes' documents come after it).
fn page_document(entries: &[Entry]) -> Option<usize> {
    entries.iter().position(|e| {
        e.kind == Kind::Document
            && e.redirect_to.is_none()
            && e.status
                .is_some_and(|s| (200..300).contains(&s) || s == 304)
    })
}

pub(super) fn summarize(
    view: View,
    entries: Vec<Entry>,
    conns: Vec<ConnInfo>,
    truncated: bool,
    vp: &crate::viewport::Viewport,
) -> Load {
    let requested: Vec<&Entry> = entries.iter().filter(|e| !e.from_cache).collect();
    // The page's time covers every entry of the page, cache hits included,
    // and ends at its load event: the favicon after it is not the page's.
    let page: Vec<&Entry> = entries.iter().filter(|e| !e.after_load).collect();
    let start = page
        .iter()
        .map(|e| e.start_ms)
        .fold(f64::INFINITY, f64::min);
    let end = page.iter().map(|e| e.end_ms).fold(0.0, f64::max);
    // Render-critical: the page's HTML and what blocks its first paint.
    let render_ms = page_document(&entries).map(|d| {
        let last = render_blocking(&entries, d, vp)
            .into_iter()
            .map(|i| entries[i].end_ms)
            .fold(entries[d].end_ms, f64::max);
        (last - start).max(0.0)
    });
    let mut hosts: Vec<HostConns> = Vec::new();
    for c in &conns {
        let h = match hosts.iter_mut().position(|h| h.origin == c.origin) {
            Some(i) => &mut hosts[i],
            None => {
                hosts.push(HostConns {
                    origin: c.origin.clone(),
                    protocols: Vec::new(),
                    connections: 0,
                    requests: 0,
                });
                hosts.last_mut().expect("just pushed")
            }
        };
        h.connections += 1;
        if !h.protocols.contains(&c.protocol) {
            h.protocols.push(c.protocol.clone());
        }
    }
    for e in &requested {
        if let Ok(u) = Url::parse(&e.url) {
            let origin = host_key(&u);
            if let Some(h) = hosts.iter_mut().find(|h| h.origin == origin) {
                h.requests += 1;
            }
        }
    }
    Load {
        hosts,
        view,
        started_at: String::new(),
        render_ms,
        elapsed_ms: if page.is_empty() {
            0.0
        } else {
            (end - start).max(0.0)
        },
        requests: requested.len(),
        from_cache: entries.len() - requested.len(),
        not_modified: entries
            .iter()
            .filter(|e| e.status == Some(304) && !e.from_cache)
            .count(),
        wire_bytes: requested.iter().map(|e| e.wire_bytes).sum(),
        decoded_bytes: requested.iter().map(|e| e.decoded_bytes).sum(),
        connections: conns.len() as u64,
        conns,
        errors: requested
            .iter()
            .filter(|e| !e.after_load && (e.error.is_some() || e.status.is_some_and(|s| s >= 400)))
            .count(),
        truncated,
        budget_exhausted: false,
        budget_used: 0,
        alt_svc: Vec::new(),
        entries,
        discovery: Default::default(),
    }
}
