//! A view's entries and connections summed up into a [`Load`].

use super::*;

pub(super) fn summarize(
    view: View,
    entries: Vec<Entry>,
    conns: Vec<ConnInfo>,
    truncated: bool,
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
        entries,
        discovery: Default::default(),
    }
}
