//! The page loader (measure.pl's job, done the way a browser does it): fetch
//! the HTML, find what it embeds, fetch that over up to 6 keep-alive
//! HTTP/1.1 connections per host (one thread per fetch, connections handed
//! back to a per-host pool) or, where an https server picks `h2` in ALPN,
//! over one HTTP/2 connection with concurrent streams (up to the server's
//! stream limit); follow redirects (5 at most), parse CSS for more, and
//! record a waterfall. Like a browser, the first connection to an https host
//! is opened alone: only when its handshake has said `h2` or `http/1.1` does
//! the host get more requests. Three views: first (empty cache), revalidate
//! (every resource revalidated: all requested again, every stored validator
//! sent, as measure.pl did), cached (navigating again: fresh responses not
//! requested at all, stale ones revalidated). A failed fetch keeps the time
//! it took; each view is bounded by a byte budget ([`crate::http::Budget`]).

use crate::cache;
use crate::discover::{Found, Kind, Session};
use crate::h2::H2Conn;
use crate::h3::{Endpoint, H3Conn};
use crate::http::{
    connect_timed, display_url, host_key, Budget, ClientOpts, Conn, ConnInfo, ConnectTimes,
    Connected, Dest, FetchError, Response,
};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};
use url::Url;

mod fetch;
mod summary;
mod view_cache;
use fetch::{enqueue, fetch_one, ms};
pub use summary::render_blocking;
use summary::summarize;
use view_cache::cached_entry;
pub use view_cache::Cache;

/// Which cache state a load starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum View {
    /// Empty cache: everything requested.
    First,
    /// Everything requested again, with the validators from the first view
    /// (Chromium's validate-cache load, `LOAD_VALIDATE_CACHE`; called
    /// `repeat` before page format 2 and audit format 3).
    Revalidate,
    /// Fresh responses from the cache; stale ones revalidated.
    Cached,
}

impl View {
    /// Name for reports.
    pub fn name(self) -> &'static str {
        match self {
            View::First => "first view",
            View::Revalidate => "revalidate view",
            View::Cached => "cached view",
        }
    }

    /// What the view is, in words, for report headings.
    pub fn describe(self) -> &'static str {
        match self {
            View::First => "empty cache: everything requested",
            View::Revalidate => {
                "every resource revalidated: all requested again with the first view's validators (Chromium's validate-cache load, measure.pl's second load)"
            }
            View::Cached => {
                "navigating again: fresh responses taken from the cache unrequested, stale ones revalidated (WebPageTest's repeat view)"
            }
        }
    }
}

impl Load {
    /// The page itself loaded in this view: the document and each redirect
    /// leading to it got an answer (a view whose page failed has no time to
    /// compare).
    pub fn page_loaded(&self) -> bool {
        let mut docs = self
            .entries
            .iter()
            .filter(|e| e.kind == Kind::Document)
            .peekable();
        if docs.peek().is_none() {
            return false;
        }
        let mut last = None;
        for e in docs {
            if e.status.is_none() {
                return false;
            }
            last = Some(e);
        }
        // A redirect loop (or too many redirects) never reaches the page.
        !last.is_some_and(|e| e.redirect_to.is_some() && e.error.is_some())
    }
}

/// Options of a load.
#[derive(Clone, Debug)]
pub struct LoadOpts {
    /// The HTTP client's options.
    pub client: ClientOpts,
    /// Connections per host (browsers: 6).
    pub per_host: usize,
    /// Resources fetched at most (a bound for pathological pages).
    pub max_resources: usize,
    /// Redirects followed per resource.
    pub max_redirects: u8,
    /// The screen discovery follows (media queries, srcset, lazy loading).
    pub viewport: crate::viewport::Viewport,
    /// Fetch only from the page's own origin (`--same-origin`).
    pub same_origin: bool,
    /// The byte budget of each view (`--max-bytes`): bytes read from the
    /// network plus decoded bytes kept. When it is used up, the reads in
    /// flight stop, no more requests start and the view is marked.
    pub max_bytes: u64,
    /// Images Chromium requested when it ran the page's scripts
    /// (`--browser`, [`crate::browser::images`]): those discovery did not
    /// find are fetched once discovery is done, before the load event,
    /// marked [`Entry::by_script`].
    pub script_images: Vec<crate::browser::SeenImage>,
}

/// How an image the page's scripts insert was found (`--browser`).
pub const BY_SCRIPT: &str = "running the page's scripts in Chromium";

/// An image found by running the page's scripts in Chromium (`--browser`),
/// which the HTML and CSS do not name.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ByScript {
    /// How it was found: [`BY_SCRIPT`].
    pub found_by: &'static str,
    /// Width and height Chromium displays it at, in CSS px (none: no
    /// rendered `<img>` shows it).
    pub displayed: Option<(f64, f64)>,
}

impl Default for LoadOpts {
    fn default() -> Self {
        LoadOpts {
            client: ClientOpts::default(),
            per_host: 6,
            max_resources: 500,
            max_redirects: 5,
            viewport: crate::viewport::Viewport::default(),
            same_origin: false,
            max_bytes: crate::http::DEFAULT_MAX_BYTES,
            script_images: Vec::new(),
        }
    }
}

/// One row of the waterfall.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Entry {
    /// The URL (credentials removed).
    pub url: String,
    /// What it is.
    pub kind: Kind,
    /// The entry that referenced it (its index in this view's entries),
    /// none for the page.
    pub parent: Option<usize>,
    /// Another site than the page's (the user may not be able to fix it).
    pub third_party: bool,
    /// Not requested: fresh in the cache (cached view).
    pub from_cache: bool,
    /// Sent with `If-None-Match`/`If-Modified-Since`.
    pub conditional: bool,
    /// Milliseconds from the load's start to this request's start.
    pub start_ms: f64,
    /// DNS, connect (new connection), waiting (TTFB), transfer, total (ms).
    pub phases: crate::http::Phases,
    /// Milliseconds from the load's start to the last byte.
    pub end_ms: f64,
    /// Status code (none on a failed fetch or a cache hit).
    pub status: Option<u16>,
    /// Why the fetch failed.
    pub error: Option<String>,
    /// Bytes on the wire (head and body).
    pub wire_bytes: u64,
    /// Body bytes on the wire.
    pub body_wire_bytes: u64,
    /// Body bytes decoded.
    pub decoded_bytes: u64,
    /// Decoding stopped at the cap (or failed).
    pub decode_capped: bool,
    /// Media type.
    pub content_type: String,
    /// `Content-Encoding`.
    pub content_encoding: Option<String>,
    /// `Cache-Control`.
    pub cache_control: Option<String>,
    /// `Expires`.
    pub expires: Option<String>,
    /// `ETag`.
    pub etag: Option<String>,
    /// `Last-Modified`.
    pub last_modified: Option<String>,
    /// `Vary`.
    pub vary: Option<String>,
    /// Freshness computed from the headers.
    pub freshness: Option<cache::Freshness>,
    /// Connection number (1-based per load).
    pub conn: Option<u64>,
    /// The protocol it was fetched with: `h2` or `http/1.1` (none: not fetched).
    pub protocol: Option<String>,
    /// The connection had served a request before.
    pub reused: bool,
    /// Sent a second time, on a new connection: the server had not processed
    /// the first (HTTP/2 GOAWAY or REFUSED_STREAM).
    pub retried: bool,
    /// Sent over HTTP/3 because its origin advertised `Alt-Svc: h3` in an
    /// earlier view (Chromium's repeat visit), not because of `--http3`.
    pub alt_svc: bool,
    /// Its origin's `Alt-Svc: h3` alternative failed (why): it went over TCP.
    pub h3_fallback: Option<String>,
    /// `Location` of a redirect.
    pub redirect_to: Option<String>,
    /// Asked for after the load event, by the browser itself: the
    /// `/favicon.ico` of a page that declares no icon. Not part of the
    /// page's time, errors or grade.
    pub after_load: bool,
    /// Width and height the HTML asked for (`<img width height>`).
    pub html_size: Option<(Option<u32>, Option<u32>)>,
    /// Intrinsic size read from the image's header bytes.
    pub intrinsic: Option<(u32, u32)>,
    /// Found by running the page's scripts in Chromium (`--browser`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_script: Option<ByScript>,
    /// The response headers (Set-Cookie redacted).
    #[serde(skip)]
    pub headers: Vec<(String, String)>,
    /// The request headers sent, in order (credential values redacted);
    /// empty for a cache hit.
    #[serde(skip)]
    pub request_headers: Vec<(String, String)>,
    /// The decoded body where kept (text; first bytes of images).
    #[serde(skip)]
    pub body: Option<Vec<u8>>,
}

/// One load of the page.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Load {
    /// Which view.
    pub view: View,
    /// When the load started (RFC 3339, UTC).
    pub started_at: String,
    /// The waterfall, in start order.
    pub entries: Vec<Entry>,
    /// Network-complete: from the first request to the last byte of the
    /// page, cache hits included, up to its load event (the favicon after
    /// it not counted) (ms).
    pub elapsed_ms: f64,
    /// Render-critical: from the first request to the end of the page's
    /// HTML and of every resource that blocks its first paint (stylesheets
    /// and synchronous scripts of its head) (ms); none when the page's
    /// document did not answer.
    pub render_ms: Option<f64>,
    /// Requests sent.
    pub requests: usize,
    /// Taken from the cache without a request.
    pub from_cache: usize,
    /// Answered 304.
    pub not_modified: usize,
    /// Bytes on the wire.
    pub wire_bytes: u64,
    /// Bytes decoded.
    pub decoded_bytes: u64,
    /// Connections opened (a lookup or connect that failed opened none).
    pub connections: u64,
    /// Each connection opened: origin, protocol, TLS version and ALPN result.
    pub conns: Vec<ConnInfo>,
    /// Connections and requests per origin (first contacted first).
    pub hosts: Vec<HostConns>,
    /// Failed fetches or 4xx/5xx.
    pub errors: usize,
    /// The resource cap or the byte budget was hit: more was referenced
    /// than fetched.
    pub truncated: bool,
    /// What discovery left out: lazy (deferred) resources, imports not
    /// followed, fetches refused by scope; and the screen it followed.
    pub discovery: crate::discover::Notes,
    /// The byte budget (`--max-bytes`) was used up: reads in flight stopped
    /// and no more requests started.
    pub budget_exhausted: bool,
    /// Bytes charged to the budget: read from the network plus decoded bytes kept.
    pub budget_used: u64,
    /// HTTP/3 by `Alt-Svc`, in words, one line per origin: what the first
    /// view learnt (later views use it), which requests of a later view went
    /// over HTTP/3 because of it, and alternatives that failed (over TCP).
    pub alt_svc: Vec<String>,
}

/// How one origin was reached in a load.
#[derive(Clone, Debug, serde::Serialize)]
pub struct HostConns {
    /// `scheme://host:port`.
    pub origin: String,
    /// The protocols of its connections (`h2`, `http/1.1`), first used first.
    pub protocols: Vec<String>,
    /// Connections opened to it.
    pub connections: u64,
    /// Requests it answered (fetched, not from the cache).
    pub requests: usize,
}

struct Job {
    url: Url,
    kind: Kind,
    parent: Option<usize>,
    depth: u8,
    redirects: u8,
    size: Option<(Option<u32>, Option<u32>)>,
    /// Sent again on a new HTTP/2 connection after the server did not process it.
    retried: bool,
    /// How many times it was sent again (at most [`MAX_SENT_AGAIN`]).
    sent_again: u8,
    /// The browser's own favicon, after the load event.
    after_load: bool,
    /// Found by running the page's scripts in Chromium.
    by_script: Option<ByScript>,
}

impl Job {
    /// A request not found by discovery (the page itself; the browser's
    /// favicon and an image a script inserts, children of the first
    /// entry), not sent yet.
    fn new(url: Url, kind: Kind, parent: Option<usize>) -> Job {
        Job {
            url,
            kind,
            parent,
            depth: 0,
            redirects: 0,
            size: None,
            retried: false,
            sent_again: 0,
            after_load: false,
            by_script: None,
        }
    }
}

/// A request the server did not process goes again at most this often: each
/// new connection serves at least one request (nginx's `keepalive_requests`,
/// when the budget could not be learnt from a stream id), so the page still
/// loads whole, and a server that refuses everything is not asked forever.
const MAX_SENT_AGAIN: u8 = 3;

/// How a fetch reaches its host.
enum Via {
    /// A new connection with this number.
    New(u64),
    /// An idle HTTP/1.1 keep-alive connection.
    Reuse(Conn),
    /// A stream on the host's HTTP/2 connection.
    H2(H2Conn),
    /// A stream on the origin's HTTP/3 connection.
    H3(H3Conn),
    /// A new HTTP/3 connection with this number, to this endpoint, for this
    /// reason ([`H3Why`]); for an `Alt-Svc` alternative, whether QUIC has
    /// worked in this browser session (`fetch::race`).
    NewH3(u64, Endpoint, H3Why, Arc<AtomicBool>),
    /// `--http3`, and the origin's HTTP/3 connection could not be opened:
    /// this error, without trying again.
    H3Failed(FetchError),
}

/// Why a request goes over HTTP/3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum H3Why {
    /// `--http3`: no other way (a failure is the request's error).
    Forced,
    /// The origin advertised `Alt-Svc: h3` in an earlier view: a failure
    /// falls back to TCP for the rest of the view, as Chromium marks the
    /// alternative broken.
    AltSvc,
}

/// What the per-host pool knows of the host's protocol.
#[derive(Default)]
enum Proto {
    /// No connection finished its handshake yet.
    #[default]
    Unknown,
    /// HTTP/1.1: up to `per_host` connections.
    H1,
    /// HTTP/2: every request on this connection.
    H2(H2Conn),
    /// HTTP/3: every request on this connection.
    H3(H3Conn),
}

#[derive(Default)]
struct Pool {
    busy: usize,
    idle: Vec<Conn>,
    proto: Proto,
    /// Requests sent on the current HTTP/2 connection.
    h2_sent: usize,
    /// Requests an HTTP/2 connection of this host takes before its GOAWAY,
    /// learnt from the first refused stream (nginx's `keepalive_requests`):
    /// a connection is not sent more, so a retried request is not refused again.
    h2_budget: Option<usize>,
    /// Opening the origin's HTTP/3 connection failed (this error): not
    /// tried again in this view.
    h3_failed: Option<FetchError>,
}

/// What a fetch thread tells the loader.
enum Ev {
    /// A new https connection to the host (key) finished its handshake:
    /// HTTP/2 (the handle) or HTTP/1.1.
    Ready(String, Option<H2Conn>),
    /// A new HTTP/3 connection to the origin (key) is up, or could not be opened.
    H3(String, Result<H3Conn, FetchError>),
    /// A fetch ended.
    Done(Box<Done>),
}

struct Done {
    job: Job,
    start_ms: f64,
    /// The fetch's own duration, from its thread's start to its end (ms).
    elapsed_ms: f64,
    /// The request headers sent (credentials redacted).
    sent_headers: Vec<(String, String)>,
    result: Result<Response, FetchError>,
    dns_connect: Option<ConnectTimes>,
    new_conn: Option<ConnInfo>,
    conn: Option<Conn>,
    conditional: bool,
    /// The HTTP/2 or HTTP/3 connection it was sent on.
    mux_conn: Option<u64>,
    /// Sent over HTTP/3 because of an earlier `Alt-Svc: h3`.
    alt_svc: bool,
    /// The `Alt-Svc: h3` alternative failed (why): sent over TCP instead.
    h3_fallback: Option<String>,
}

/// Queues the images of [`LoadOpts::script_images`] not yet seen (of the
/// page's own origin only with `--same-origin`): whether any was.
fn script_images(
    page: &Url,
    opts: &LoadOpts,
    budget: &Budget,
    queue: &mut VecDeque<Job>,
    seen: &mut HashSet<String>,
    truncated: &mut bool,
) -> bool {
    let mut any = false;
    for s in &opts.script_images {
        let Ok(u) = Url::parse(&s.url) else { continue };
        let u = strip_fragment(u);
        if opts.same_origin
            && redline_engine::redirect::origin_key(&u)
                != redline_engine::redirect::origin_key(page)
        {
            continue;
        }
        if budget.exhausted() {
            break;
        }
        if seen.len() >= opts.max_resources {
            *truncated = true;
            break;
        }
        if !seen.insert(u.to_string()) {
            continue;
        }
        let mut job = Job::new(u, Kind::Image, Some(0));
        job.by_script = Some(ByScript {
            found_by: BY_SCRIPT,
            displayed: s.displayed,
        });
        queue.push_back(job);
        any = true;
    }
    any
}

/// The entries in start order (they were pushed as they ended), each
/// `parent` renumbered to its parent's new place.
fn in_start_order(entries: Vec<Entry>) -> Vec<Entry> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|&a, &b| entries[a].start_ms.total_cmp(&entries[b].start_ms));
    let mut new_of = vec![0; entries.len()];
    for (new, &old) in order.iter().enumerate() {
        new_of[old] = new;
    }
    let mut slots: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
    order
        .iter()
        .filter_map(|&old| slots[old].take())
        .map(|mut e| {
            e.parent = e.parent.and_then(|p| new_of.get(p).copied());
            e
        })
        .collect()
}

/// Same site: equal hosts, or DNS names sharing their last two labels.
pub fn same_site(a: &str, b: &str) -> bool {
    if a.eq_ignore_ascii_case(b) {
        return true;
    }
    let is_ip = |h: &str| h.parse::<std::net::IpAddr>().is_ok() || h.starts_with('[');
    if is_ip(a) || is_ip(b) {
        return false;
    }
    let tail = |h: &str| {
        let l: Vec<String> = h
            .to_ascii_lowercase()
            .split('.')
            .map(str::to_string)
            .collect();
        l[l.len().saturating_sub(2)..].join(".")
    };
    tail(a) == tail(b)
}

fn redact_headers(h: &[(String, String)]) -> Vec<(String, String)> {
    h.iter()
        .map(|(n, v)| {
            if n.eq_ignore_ascii_case("set-cookie") {
                // The name and value go; the attributes (Secure, HttpOnly,
                // SameSite, Path…) stay for the audit's cookie check.
                let attrs = v.split_once(';').map_or("", |(_, a)| a);
                let sep = if attrs.is_empty() { "" } else { ";" };
                (n.clone(), format!("[redacted]{sep}{attrs}"))
            } else {
                (n.clone(), v.clone())
            }
        })
        .collect()
}

fn strip_fragment(mut u: Url) -> Url {
    u.set_fragment(None);
    u
}

/// Loads the page at `url` in `view` (with `cache` from an earlier view),
/// calling `echo` with a line for every fetch as it starts.
pub fn load(
    url: &Url,
    view: View,
    cache: Option<&Cache>,
    opts: &LoadOpts,
    echo: &mut dyn FnMut(&str),
) -> Load {
    let t0 = Instant::now();
    let started_at = redline_stats::time::rfc3339(SystemTime::now());
    let budget = Budget::new(opts.max_bytes);
    // What the cache of an earlier view holds is memory this view keeps too.
    budget.charge(cache.map_or(0, Cache::held_bytes));
    let page_host = url.host_str().unwrap_or("").to_string();
    let mut entries: Vec<Entry> = Vec::new();
    let mut queue: VecDeque<Job> = VecDeque::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut pools: HashMap<String, Pool> = HashMap::new();
    // A QUIC handshake succeeded in this browser session (the views share
    // it through the cache), as Chromium's `has_quic_ever_worked_on_current_network`.
    let quic_worked = cache.map(|c| c.quic_worked.clone()).unwrap_or_default();
    // Origins whose `Alt-Svc` alternative failed in this view, and why.
    let mut h3_broken: HashMap<String, String> = HashMap::new();
    // Connection numbers; a connect that fails leaves a gap, not a count.
    let next_conn = Arc::new(AtomicU64::new(0));
    let mut in_flight = 0usize;
    let mut truncated = false;
    let mut scripted = false;
    let mut conns: Vec<ConnInfo> = Vec::new();
    let (tx, rx) = mpsc::channel::<Ev>();
    let mut session = Session::new(url, opts.viewport, opts.same_origin);
    let first = strip_fragment(url.clone());
    seen.insert(first.to_string());
    queue.push_back(Job::new(first, Kind::Document, None));
    let wait_limit = opts.client.timeout + opts.client.connect_timeout + Duration::from_secs(5);
    for _round in 0..1_000_000u32 {
        // Dispatch what the per-host limit allows.
        let mut i = 0;
        while i < queue.len() && !budget.exhausted() {
            let key = host_key(&queue[i].url);
            let stored = cache.and_then(|c| c.stored.get(&display_url(&queue[i].url)));
            if view == View::Cached {
                if let Some(s) = stored {
                    if cache::is_fresh(s.status, &s.headers, s.received, SystemTime::now()) {
                        let job = queue.remove(i).expect("index in range");
                        echo(&format!("Cached  {}", display_url(&job.url)));
                        let idx = entries.len();
                        let now = ms(t0.elapsed());
                        entries.push(cached_entry(&job, s, now, &page_host));
                        let body = s.body.clone();
                        let ct = s.content_type.clone();
                        let found = session.done(&job.url, job.kind, body.as_deref(), &ct);
                        enqueue(
                            found,
                            idx,
                            job.depth,
                            &mut queue,
                            &mut seen,
                            &mut truncated,
                            opts,
                        );
                        continue;
                    }
                }
            }
            let https = queue[i].url.scheme() == "https";
            let may_h2 = https && !opts.client.http1_only;
            // HTTP/3: `--http3`, or an `Alt-Svc: h3` an earlier view learnt.
            let h3 = if https && opts.client.http3 {
                Some((Endpoint::of(&queue[i].url), H3Why::Forced))
            } else {
                cache
                    .filter(|_| view != View::First)
                    .and_then(|c| c.alt_h3(&queue[i].url, SystemTime::now()))
                    .map(|a| (a.to.clone(), H3Why::AltSvc))
            };
            let pool = pools.entry(key).or_default();
            // A failed alternative is not tried again in this view.
            let h3 = h3.filter(|(_, why)| *why == H3Why::Forced || pool.h3_failed.is_none());
            if matches!(&pool.proto, Proto::H3(c) if !c.alive()) {
                pool.proto = Proto::Unknown;
            }
            if matches!(&pool.proto, Proto::H2(c) if !c.alive())
                || (matches!(pool.proto, Proto::H2(_))
                    && pool.h2_budget.is_some_and(|b| pool.h2_sent >= b))
            {
                // GOAWAY, a lost connection, or one that has had what the
                // server takes per connection: the next request negotiates anew.
                pool.proto = Proto::Unknown;
            }
            let limit = match &pool.proto {
                Proto::H2(c) => c.max_streams(),
                Proto::H3(c) => c.max_streams(),
                // One handshake first: it tells whether the host speaks h2
                // (or opens its HTTP/3 connection).
                Proto::Unknown if may_h2 || h3.is_some() => 1,
                _ => opts.per_host.max(1),
            };
            if pool.busy >= limit {
                i += 1;
                continue;
            }
            let job = queue.remove(i).expect("index in range");
            pool.busy += 1;
            let via = match (&pool.proto, h3) {
                (Proto::H2(c), _) => {
                    pool.h2_sent += 1;
                    Via::H2(c.clone())
                }
                (Proto::H3(c), _) => Via::H3(c.clone()),
                (_, Some(_)) if pool.h3_failed.is_some() => {
                    Via::H3Failed(pool.h3_failed.clone().expect("checked"))
                }
                (_, Some((to, why))) => Via::NewH3(
                    next_conn.fetch_add(1, Ordering::Relaxed) + 1,
                    to,
                    why,
                    quic_worked.clone(),
                ),
                _ => match pool.idle.pop() {
                    Some(c) => Via::Reuse(c),
                    None => Via::New(next_conn.fetch_add(1, Ordering::Relaxed) + 1),
                },
            };
            let extra = match (view, stored) {
                (View::Revalidate | View::Cached, Some(s)) => cache::validators(&s.headers),
                _ => Vec::new(),
            };
            let own_headers = same_site(job.url.host_str().unwrap_or(""), &page_host);
            let mut copts = opts.client.clone();
            copts.budget = Some(budget.clone());
            if !own_headers {
                copts.headers.clear();
            } else if redline_engine::redirect::origin_key(&job.url)
                != redline_engine::redirect::origin_key(url)
            {
                // Credentials (Authorization, Cookie… from -H or the URL's
                // user:pass@) go to the page's own origin only: not to another
                // host, scheme or port of the same site, redirected or not.
                copts
                    .headers
                    .retain(|(n, _)| !redline_engine::redirect::is_credential(n));
            }
            if job.retried {
                echo(&format!(
                    "Retrying {} on a new connection (the server did not process it)...",
                    display_url(&job.url)
                ));
            } else {
                echo(&format!("Getting {}...", display_url(&job.url)));
            }
            let start_ms = ms(t0.elapsed());
            let tx = tx.clone();
            let ids = next_conn.clone();
            in_flight += 1;
            std::thread::spawn(move || {
                let done = fetch_one(job, via, &extra, &copts, start_ms, &tx, &ids);
                let _ = tx.send(Ev::Done(Box::new(done)));
            });
        }
        if in_flight == 0 {
            // Idle: what waited for stylesheets that never answered.
            let found = session.flush();
            if !found.is_empty() {
                enqueue(found, 0, 0, &mut queue, &mut seen, &mut truncated, opts);
                if !queue.is_empty() {
                    continue;
                }
            }
            // What Chromium found by running the page's scripts and
            // discovery did not, once, before the load event.
            if !scripted {
                scripted = true;
                if script_images(url, opts, &budget, &mut queue, &mut seen, &mut truncated) {
                    continue;
                }
            }
            // The load event: nothing of the page is left. Chromium asks for
            // its own /favicon.ico now, and not again in later views once it
            // failed.
            if let Some(u) = session.after_load() {
                let failed = cache.is_some_and(|c| c.missing.contains(&display_url(&u)));
                if !failed && !budget.exhausted() && seen.insert(u.to_string()) {
                    let mut job = Job::new(u, Kind::Image, Some(0));
                    job.after_load = true;
                    queue.push_back(job);
                    continue;
                }
            }
            break;
        }
        let Ok(ev) = rx.recv_timeout(wait_limit) else {
            break;
        };
        let done = match ev {
            Ev::H3(key, r) => {
                let pool = pools.entry(key.clone()).or_default();
                match r {
                    Ok(c) => {
                        pool.h2_sent = 1;
                        pool.proto = Proto::H3(c);
                    }
                    Err(e) => {
                        h3_broken.entry(key).or_insert_with(|| e.to_string());
                        pool.h3_failed = Some(e);
                    }
                }
                continue;
            }
            Ev::Ready(key, h2) => {
                let pool = pools.entry(key).or_default();
                if matches!(&pool.proto, Proto::H3(c) if c.alive()) {
                    // TCP won a race QUIC then finished: later requests take
                    // the QUIC connection, as Chromium's do.
                    continue;
                }
                // The request that opened it is its first.
                pool.h2_sent = 1;
                pool.proto = match h2 {
                    Some(c) => Proto::H2(c),
                    None => Proto::H1,
                };
                continue;
            }
            Ev::Done(d) => *d,
        };
        in_flight -= 1;
        let key = host_key(&done.job.url);
        let pool = pools.entry(key).or_default();
        pool.busy = pool.busy.saturating_sub(1);
        if let Some(c) = done.conn {
            pool.idle.push(c);
        }
        if let Some(ci) = done.new_conn {
            conns.push(ci);
        }
        // HTTP/2: a request the server did not process (GOAWAY, REFUSED_STREAM)
        // goes again, once, on a new connection, as a browser does. The host
        // negotiates one new connection; the others wait for its handshake.
        if let Err(FetchError::Unprocessed { stream, .. }) = &done.result {
            // Client streams are 1, 3, 5…: those below the refused one were processed.
            if *stream > 1 {
                let took = (*stream as usize - 1) / 2;
                pool.h2_budget = Some(pool.h2_budget.map_or(took, |b| b.min(took)));
            }
        }
        if matches!(done.result, Err(FetchError::Unprocessed { .. }))
            && done.job.sent_again < MAX_SENT_AGAIN
        {
            let on_it = match (&pool.proto, done.mux_conn) {
                (Proto::H2(c), Some(id)) => c.id == id,
                (Proto::H3(c), Some(id)) => c.id == id,
                _ => false,
            };
            if on_it {
                pool.proto = Proto::Unknown;
            }
            let mut job = done.job;
            job.retried = true;
            job.sent_again += 1;
            queue.push_front(job);
            continue;
        }
        let idx = entries.len();
        let job = done.job;
        let third_party = !same_site(job.url.host_str().unwrap_or(""), &page_host);
        let mut e = Entry {
            url: display_url(&job.url),
            kind: job.kind,
            parent: job.parent,
            third_party,
            from_cache: false,
            conditional: done.conditional,
            start_ms: done.start_ms,
            phases: Default::default(),
            end_ms: ms(t0.elapsed()),
            status: None,
            error: None,
            wire_bytes: 0,
            body_wire_bytes: 0,
            decoded_bytes: 0,
            decode_capped: false,
            content_type: String::new(),
            content_encoding: None,
            cache_control: None,
            expires: None,
            etag: None,
            last_modified: None,
            vary: None,
            freshness: None,
            conn: None,
            protocol: None,
            reused: false,
            retried: job.retried,
            alt_svc: done.alt_svc,
            h3_fallback: done.h3_fallback,
            redirect_to: None,
            after_load: job.after_load,
            html_size: job.size,
            intrinsic: None,
            by_script: job.by_script.clone(),
            headers: Vec::new(),
            request_headers: done.sent_headers,
            body: None,
        };
        match done.result {
            Err(err) => {
                // A failed fetch shows the time it really took: the lookup,
                // connect and handshake as far as they went, then the wait
                // for an answer that did not come.
                let mut p = crate::http::Phases::default();
                let mut setup = 0.0;
                if let Some(t) = done.dns_connect {
                    p.dns_ms = Some(t.dns);
                    setup += t.dns;
                    if !matches!(err, FetchError::Dns(_)) {
                        p.connect_ms = Some(t.connect);
                        p.tls_ms = t.tls;
                        setup += t.connect + t.tls.unwrap_or(0.0);
                    }
                }
                let connecting = matches!(
                    err,
                    FetchError::Dns(_) | FetchError::Connect(_) | FetchError::Tls(_)
                ) && done.dns_connect.is_some();
                p.waiting_ms = if connecting {
                    0.0
                } else {
                    (done.elapsed_ms - setup).max(0.0)
                };
                p.total_ms = setup + p.waiting_ms;
                e.end_ms = e.start_ms + p.total_ms;
                e.phases = p;
                e.error = Some(err.to_string());
            }
            Ok(r) => {
                let mut phases = r.phases.clone();
                if let Some(t) = done.dns_connect {
                    phases.dns_ms = Some(t.dns);
                    phases.connect_ms = Some(t.connect);
                    phases.tls_ms = t.tls;
                    phases.total_ms += t.dns + t.connect + t.tls.unwrap_or(0.0);
                }
                e.phases = phases;
                e.end_ms = e.start_ms + e.phases.total_ms;
                e.status = Some(r.status);
                e.wire_bytes = r.wire_bytes;
                e.body_wire_bytes = r.body_wire_bytes;
                e.decoded_bytes = r.decoded_bytes;
                e.decode_capped = r.decode_capped;
                if let Some(de) = &r.decode_error {
                    e.error = Some(de.clone());
                }
                e.content_type = r.media_type();
                let h = |n: &str| r.header(n).map(str::to_string);
                e.content_encoding = h("content-encoding");
                e.cache_control = h("cache-control");
                e.expires = h("expires");
                e.etag = h("etag");
                e.last_modified = h("last-modified");
                e.vary = h("vary");
                e.freshness = Some(cache::freshness(r.status, &r.headers));
                e.conn = Some(r.conn_id);
                e.protocol = Some(r.protocol.to_string());
                e.reused = r.reused;
                e.headers = redact_headers(&r.headers);
                e.body = r.body.clone();
                if r.status == 304 {
                    // Use the stored body (and type) for discovery and checks.
                    if let Some(s) = cache.and_then(|c| c.stored.get(&e.url)) {
                        e.body = s.body.clone();
                        e.content_type = s.content_type.clone();
                    }
                }
                if let Some(b) = &e.body {
                    // What is kept counts too: decoded text can be far
                    // larger than the bytes that carried it. A body that
                    // would take the view past its budget is not kept and
                    // the budget is used up from here: responses in flight
                    // when it ran out (several connections) would otherwise
                    // each add up to 10 MiB of decoded text past the limit
                    // (256 MiB counted 300 MiB).
                    let n = b.len() as u64;
                    if budget.used().saturating_add(n) > budget.limit() {
                        budget.charge(budget.limit().saturating_sub(budget.used()) + 1);
                        e.body = None;
                    } else {
                        budget.charge(n);
                    }
                }
                if e.kind == Kind::Image || e.content_type.starts_with("image/") {
                    if let Some(b) = &e.body {
                        if let Ok(sz) = imagesize::blob_size(b) {
                            e.intrinsic = Some((sz.width as u32, sz.height as u32));
                        }
                    }
                }
                if (300..400).contains(&r.status) && r.status != 304 {
                    if let Some(loc) = r.header("location").and_then(|l| job.url.join(l).ok()) {
                        e.redirect_to = Some(display_url(&loc));
                        let loc = strip_fragment(loc);
                        // The chain of redirects that led here, oldest first.
                        let mut chain = vec![display_url(&strip_fragment(job.url.clone()))];
                        let mut up = job.parent;
                        while let Some(p) = up.and_then(|i| entries.get(i)) {
                            if p.redirect_to.is_none() {
                                break;
                            }
                            chain.push(p.url.clone());
                            up = p.parent;
                        }
                        chain.reverse();
                        let shown = display_url(&loc);
                        if chain.contains(&shown) {
                            chain.push(shown);
                            e.error = Some(format!("redirect loop: {}", chain.join(" -> ")));
                        } else if job.redirects >= opts.max_redirects {
                            e.error = Some(format!(
                                "more than {} redirects in a row (not followed to {shown})",
                                opts.max_redirects
                            ));
                        } else if session.allowed(&loc, job.kind) && seen.insert(loc.to_string()) {
                            queue.push_back(Job {
                                url: loc,
                                kind: job.kind,
                                parent: Some(idx),
                                depth: job.depth,
                                redirects: job.redirects + 1,
                                size: job.size,
                                retried: false,
                                sent_again: 0,
                                after_load: job.after_load,
                                by_script: job.by_script.clone(),
                            });
                        }
                    }
                }
            }
        }
        let body = e.body.clone();
        let ct = e.content_type.clone();
        let ok = e.status.is_some_and(|s| s == 200 || s == 304);
        entries.push(e);
        let found = session.done(&job.url, job.kind, body.as_deref().filter(|_| ok), &ct);
        enqueue(
            found,
            idx,
            job.depth,
            &mut queue,
            &mut seen,
            &mut truncated,
            opts,
        );
    }
    let entries = in_start_order(entries);
    conns.sort_by_key(|c| c.id);
    let exhausted = budget.exhausted();
    let mut l = summarize(view, entries, conns, truncated || exhausted, &opts.viewport);
    l.discovery = session.notes;
    l.started_at = started_at;
    l.budget_exhausted = exhausted;
    l.budget_used = budget.used();
    l.alt_svc = alt_svc_notes(&l, view, cache, opts, &h3_broken);
    l
}

/// [`Load::alt_svc`]: what Alt-Svc did in this view (`broken`: the origins
/// whose alternative failed, and why).
fn alt_svc_notes(
    l: &Load,
    view: View,
    cache: Option<&Cache>,
    opts: &LoadOpts,
    broken: &HashMap<String, String>,
) -> Vec<String> {
    if opts.client.http3 {
        return Vec::new(); // every https request went over HTTP/3 anyway
    }
    let mut out = Vec::new();
    let origin = |e: &Entry| Url::parse(&e.url).map(|u| host_key(&u)).unwrap_or_default();
    match (view, cache) {
        (View::First, _) | (_, None) => {
            let learnt = view_cache::alt_svc_of(l, SystemTime::now());
            let mut keys: Vec<&String> = learnt.keys().collect();
            keys.sort();
            for k in keys {
                let a = &learnt[k];
                out.push(format!(
                    "{k}: Alt-Svc: {} advertises HTTP/3 on {}:{}; loaded over TCP in this view, as Chromium does on a first visit (a later view uses HTTP/3)",
                    a.header, a.to.host, a.to.port
                ));
            }
        }
        (_, Some(c)) => {
            let mut keys: Vec<&String> = c.alt_svc.keys().collect();
            keys.sort();
            for k in keys {
                let a = &c.alt_svc[k];
                let here: Vec<&Entry> = l
                    .entries
                    .iter()
                    .filter(|e| !e.from_cache && origin(e) == *k)
                    .collect();
                if here.is_empty() {
                    continue;
                }
                let h3 = here.iter().filter(|e| e.alt_svc).count();
                let why = here
                    .iter()
                    .find_map(|e| e.h3_fallback.as_deref())
                    .or(broken.get(k.as_str()).map(String::as_str));
                if let Some(why) = why {
                    out.push(format!(
                        "{k}: the Alt-Svc HTTP/3 alternative ({}) failed: {why}; its requests went over TCP",
                        a.header
                    ));
                } else if a.expires <= SystemTime::now() {
                    out.push(format!(
                        "{k}: Alt-Svc {} had expired (ma): over TCP",
                        a.header
                    ));
                } else {
                    out.push(format!(
                        "{k}: {h3} of {} request{} over HTTP/3 because the first view's answers said Alt-Svc: {}",
                        here.len(),
                        if here.len() == 1 { "" } else { "s" },
                        a.header
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
