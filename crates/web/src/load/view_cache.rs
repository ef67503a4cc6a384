//! The loader's HTTP cache between views (the revalidate and cached views): what is stored,
//! what is fresh, the entry a cache hit records, and the HTTP/3 alternatives
//! origins advertised (`Alt-Svc: h3`, RFC 7838), which later views use as
//! Chromium does on a repeat visit.

use super::*;

/// What a later view may use from an earlier one.
#[derive(Clone, Debug, Default)]
pub struct Cache {
    pub(super) stored: HashMap<String, Stored>,
    /// The browser's own favicon URLs that failed (4xx/5xx, no answer):
    /// Chromium does not ask for them again in the session.
    pub(super) missing: HashSet<String>,
    /// Per origin (`scheme://host:port`), the `h3` alternative its last
    /// `Alt-Svc` named (a later header replaces it, `clear` removes it).
    pub(super) alt_svc: HashMap<String, AltH3>,
    /// A QUIC handshake succeeded in a later view (Chromium's
    /// `has_quic_ever_worked_on_current_network`): from then on TCP waits
    /// behind QUIC instead of racing it at once (`fetch::race`).
    pub(super) quic_worked: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// An HTTP/3 alternative an origin advertised.
#[derive(Clone, Debug)]
pub(super) struct AltH3 {
    /// Where to connect (the origin's host unless the alternative names one).
    pub(super) to: crate::h3::Endpoint,
    /// The header as the server sent it.
    pub(super) header: String,
    /// When it stops being valid (`ma`, 24 hours without it).
    pub(super) expires: SystemTime,
}

impl Cache {
    /// The `h3` alternative of `u`'s origin still valid at `now` (https only).
    pub(super) fn alt_h3(&self, u: &Url, now: SystemTime) -> Option<&AltH3> {
        if u.scheme() != "https" {
            return None;
        }
        self.alt_svc.get(&host_key(u)).filter(|a| a.expires > now)
    }
}

/// What the `Alt-Svc` headers of a load leave for later views: per https
/// origin, in the order the answers came, the last header wins; a value
/// that is not valid RFC 7838 is ignored (as Chromium does), `clear` or a
/// header without `h3` forgets the origin's alternative.
pub(super) fn alt_svc_of(load: &Load, now: SystemTime) -> HashMap<String, AltH3> {
    let mut out = HashMap::new();
    let mut order: Vec<&Entry> = load.entries.iter().filter(|e| !e.from_cache).collect();
    order.sort_by(|a, b| a.end_ms.total_cmp(&b.end_ms));
    for e in order {
        let Ok(u) = Url::parse(&e.url) else { continue };
        let Some(v) = crate::http::header(&e.headers, "alt-svc") else {
            continue;
        };
        if u.scheme() != "https" || e.status.is_none() {
            continue;
        }
        let Ok(parsed) = redline_engine::altsvc::parse(v) else {
            continue;
        };
        let key = host_key(&u);
        match parsed.h3() {
            Some(a) => {
                let host = a
                    .host
                    .clone()
                    .unwrap_or_else(|| u.host_str().unwrap_or("").to_string());
                out.insert(
                    key,
                    AltH3 {
                        to: crate::h3::Endpoint { host, port: a.port },
                        header: v.to_string(),
                        expires: now + Duration::from_secs(a.max_age()),
                    },
                );
            }
            None => {
                out.remove(&key);
            }
        }
    }
    out
}

#[derive(Clone, Debug)]
pub(super) struct Stored {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) received: SystemTime,
    pub(super) body: Option<Vec<u8>>,
    pub(super) content_type: String,
}

impl Cache {
    /// Builds the cache a browser would hold after `load`.
    pub fn from_load(load: &Load) -> Cache {
        let mut stored = HashMap::new();
        let missing = load
            .entries
            .iter()
            .filter(|e| e.after_load && e.status.is_none_or(|s| s >= 400))
            .map(|e| e.url.clone())
            .collect();
        for e in &load.entries {
            let Some(status) = e.status else { continue };
            if e.error.is_some() || cache::freshness(status, &e.headers).source == "no-store" {
                continue;
            }
            stored.insert(
                e.url.clone(),
                Stored {
                    status,
                    headers: e.headers.clone(),
                    received: SystemTime::now(),
                    body: e.body.clone(),
                    content_type: e.content_type.clone(),
                },
            );
        }
        let alt_svc = alt_svc_of(load, SystemTime::now());
        Cache {
            stored,
            missing,
            alt_svc,
            quic_worked: Default::default(),
        }
    }

    /// As [`Cache::from_load`], moving the kept bodies out of `load` into
    /// the cache instead of copying them (one copy in memory); give them
    /// back with [`Cache::restore`].
    pub fn take_from(load: &mut Load) -> Cache {
        let mut bodies: HashMap<String, Vec<u8>> = HashMap::new();
        for e in &mut load.entries {
            if let Some(b) = e.body.take() {
                bodies.entry(e.url.clone()).or_insert(b);
            }
        }
        let mut c = Cache::from_load(load);
        for (url, s) in &mut c.stored {
            s.body = bodies.remove(url);
        }
        // Bodies of entries the cache does not store go back at once.
        for e in &mut load.entries {
            if let Some(b) = bodies.remove(&e.url) {
                e.body = Some(b);
            }
        }
        c
    }

    /// Gives the bodies taken by [`Cache::take_from`] back to `load`.
    pub fn restore(self, load: &mut Load) {
        let mut stored = self.stored;
        for e in &mut load.entries {
            if e.body.is_none() {
                if let Some(s) = stored.get_mut(&e.url) {
                    e.body = s.body.take();
                }
            }
        }
    }

    /// Bytes of bodies the cache holds (charged to a later view's budget).
    pub fn held_bytes(&self) -> u64 {
        self.stored
            .values()
            .map(|s| s.body.as_ref().map_or(0, |b| b.len() as u64))
            .sum()
    }
}

pub(super) fn cached_entry(job: &Job, s: &Stored, now: f64, page_host: &str) -> Entry {
    let h = |n: &str| crate::http::header(&s.headers, n).map(str::to_string);
    let intrinsic = s
        .body
        .as_deref()
        .and_then(|b| imagesize::blob_size(b).ok())
        .map(|sz| (sz.width as u32, sz.height as u32));
    Entry {
        url: display_url(&job.url),
        kind: job.kind,
        parent: job.parent,
        third_party: !same_site(job.url.host_str().unwrap_or(""), page_host),
        from_cache: true,
        conditional: false,
        start_ms: now,
        phases: Default::default(),
        end_ms: now,
        status: Some(s.status),
        error: None,
        wire_bytes: 0,
        body_wire_bytes: 0,
        decoded_bytes: 0,
        decode_capped: false,
        content_type: s.content_type.clone(),
        content_encoding: h("content-encoding"),
        cache_control: h("cache-control"),
        expires: h("expires"),
        etag: h("etag"),
        last_modified: h("last-modified"),
        vary: h("vary"),
        freshness: Some(cache::freshness(s.status, &s.headers)),
        conn: None,
        protocol: None,
        reused: false,
        retried: false,
        alt_svc: false,
        h3_fallback: None,
        redirect_to: None,
        after_load: job.after_load,
        html_size: job.size,
        intrinsic,
        by_script: job.by_script.clone(),
        headers: s.headers.clone(),
        request_headers: Vec::new(),
        body: s.body.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::{entry, page};

    fn load(answers: &[(&str, Option<&str>)]) -> Load {
        let mut l = page(entry("https://a.test/x", Kind::Image, "image/png", 1));
        l.entries = answers
            .iter()
            .enumerate()
            .map(|(i, (url, alt))| {
                let mut e = entry(url, Kind::Image, "image/png", 1);
                e.end_ms = i as f64;
                if let Some(v) = alt {
                    e.headers = vec![("alt-svc".into(), v.to_string())];
                }
                e
            })
            .collect();
        l
    }

    #[test]
    fn the_last_alt_svc_of_an_origin_wins() {
        let now = SystemTime::now();
        let l = load(&[
            ("https://a.test/", Some("h3=\":443\"; ma=60")),
            (
                "https://a.test/b",
                Some("h2=\":8443\", h3=\"alt.a.test:4433\""),
            ),
            ("https://c.test/", Some("h3=\":443\"")),
            ("https://c.test/d", Some("clear")),
            ("https://e.test/", Some("h3=\":443\"; ma=60")),
            ("https://e.test/f", Some("h3=:443")), // invalid: ignored
            ("http://g.test/", Some("h3=\":443\"")), // not https: ignored
            ("https://h.test/", Some("h3=\":443\"; ma=0")),
        ]);
        let m = alt_svc_of(&l, now);
        let a = &m["https://a.test:443"];
        assert_eq!((a.to.host.as_str(), a.to.port), ("alt.a.test", 4433));
        assert_eq!(
            a.expires,
            now + Duration::from_secs(redline_engine::altsvc::DEFAULT_MAX_AGE)
        );
        assert!(!m.contains_key("https://c.test:443"), "cleared");
        assert_eq!(m["https://e.test:443"].to.port, 443);
        assert!(!m.contains_key("http://g.test:80"));
        let c = Cache {
            alt_svc: m,
            ..Default::default()
        };
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(c.alt_h3(&u("https://a.test/z"), now).is_some());
        // ma=0: expired at once; ma=60: gone a minute later.
        assert!(c.alt_h3(&u("https://h.test/"), now).is_none());
        let later = now + Duration::from_secs(61);
        assert!(c.alt_h3(&u("https://e.test/"), later).is_none());
        assert!(c.alt_h3(&u("https://a.test/"), later).is_some());
    }
}
