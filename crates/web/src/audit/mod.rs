//! `redline audit`: the HTTP- and HTML-level checks of the tuning articles
//! and the security and transport checks admins expect, each with its
//! evidence, one grade A–F and one severity (both from [`rate`], so they
//! cannot disagree) and the fix for Apache, nginx and lighttpd. The page's
//! own status comes first: a page that is not 2xx fails the audit. Checks
//! with nothing to judge are "not applicable" and stay out of the score.
//! Thresholds follow WebPageTest, Lighthouse and Mozilla Observatory, and
//! each check says which. Findings on third-party hosts are listed apart
//! and do not count toward the grade. docs/audit.md has the scale and weights.
//!
//! Modules: `images` (size at the device pixel ratio, format), `minify`
//! (the minifiers and wire-size estimates), `revalidate`
//! (why a conditional GET did not get 304), `security` (response headers,
//! cookies, HTTP→HTTPS), `transport` (the TLS probe and its checks).

mod images;
mod minify;
mod revalidate;
mod security;
pub mod transport;

pub use images::shown_widths;
pub use minify::{minified_code, minified_code_len, minified_html, minified_html_len, wire_size};

use crate::cache::human_secs;
use crate::discover::{scan_html, Kind};
use crate::load::{Entry, Load};
use crate::page::{bytes, millis};
use std::fmt::Write as _;

/// Format name of the JSON output.
pub const FORMAT: &str = "redline.audit";
/// Version of the JSON output.
pub const VERSION: u32 = 2;

/// Compression findings only when gzip would save at least this (WebPageTest, Lighthouse).
pub const GZIP_MIN_SAVING: u64 = 1400;
/// Static assets cached for less than this are graded down (WebPageTest).
pub const CACHE_GOOD_S: u64 = 7 * 86_400;
/// Static assets cached for less than this fail (WebPageTest).
pub const CACHE_FAIL_S: u64 = 3600;
/// Minification findings only above this many bytes saved (Lighthouse).
pub const MINIFY_MIN_BYTES: u64 = 2048;
/// Image findings only above this many bytes wasted (Lighthouse).
pub const IMAGE_MIN_WASTE: u64 = 4096;
/// Time to first byte: good below (ms).
pub const TTFB_GOOD_MS: f64 = 100.0;
/// Time to first byte: flagged above (ms, Lighthouse).
pub const TTFB_BAD_MS: f64 = 600.0;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Fine.
    Ok,
    /// Worth knowing, nothing to fix.
    Info,
    /// Should be fixed.
    Warning,
    /// Must be fixed.
    Error,
}

impl Severity {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One piece of evidence.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Finding {
    /// How bad.
    pub severity: Severity,
    /// The resource, if about one.
    pub url: Option<String>,
    /// What was seen (the header present or missing, the sizes).
    pub evidence: String,
    /// Bytes the fix would save.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saving_bytes: Option<u64>,
    /// Milliseconds the fix would save.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saving_ms: Option<f64>,
}

/// The fix in each server's configuration.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Fix {
    /// Apache httpd.
    pub apache: &'static str,
    /// nginx.
    pub nginx: &'static str,
    /// lighttpd.
    pub lighttpd: &'static str,
}

/// One check and its result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Check {
    /// Stable id (`compression`, `cache-static`, …).
    pub id: &'static str,
    /// What it checks.
    pub title: &'static str,
    /// False when there was nothing to judge: then no grade, severity `ok`,
    /// and the check stays out of the overall score.
    pub applicable: bool,
    /// 0–100.
    pub score: u32,
    /// A–F (`-` when not applicable): [`rate`] of the score.
    pub grade: String,
    /// [`rate`] of the score: the same scale as the grade.
    pub severity: Severity,
    /// Weight in the overall score (docs/audit.md).
    pub weight: u32,
    /// One line.
    pub summary: String,
    /// The convention the thresholds follow.
    pub threshold: &'static str,
    /// Findings on the page's own site.
    pub findings: Vec<Finding>,
    /// Findings on third-party hosts (not graded; the user may not control them).
    pub third_party: Vec<Finding>,
    /// How to fix it, when there is something to fix (grade below A:
    /// severity info, warning or error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

/// What the page itself answered, after redirects.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PageStatus {
    /// The URL that finally answered (after redirects).
    pub url: String,
    /// Its status code (none: no answer).
    pub status: Option<u16>,
    /// 2xx: the page loaded. Otherwise the audit fails (grade F).
    pub ok: bool,
}

/// The result of `redline audit`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Audit {
    /// [`FORMAT`].
    pub format: &'static str,
    /// [`VERSION`].
    pub version: u32,
    /// The page.
    pub url: String,
    /// What the page itself answered.
    pub page: PageStatus,
    /// Overall grade A–F: [`rate`] of the score (F when the page is not 2xx).
    pub grade: String,
    /// Overall score 0–100: the weighted mean of the applicable checks (0
    /// when the page is not 2xx).
    pub score: u32,
    /// The worst severity of the applicable checks.
    pub severity: Severity,
    /// The checks.
    pub checks: Vec<Check>,
    /// Medians of the three views.
    pub views: Vec<crate::page::ViewSummary>,
    /// Certificate verification was off (`--insecure`).
    pub insecure: bool,
    /// Origins of another site than the page's (first view).
    pub third_party: Vec<crate::page::ThirdParty>,
    /// `loading=lazy` resources below the first screen, not in the first
    /// view (URLs; their bytes are unknown).
    pub deferred: Vec<String>,
}

/// The one scale: a score 0–100 gives both the grade and the severity.
/// A (90+) ok, B (80+) info, C (70+) and D (60+) warning, E (50+) and F
/// (below 50) error. Every check's grade and severity come from here.
pub fn rate(score: u32) -> (&'static str, Severity) {
    match score {
        90.. => ("A", Severity::Ok),
        80..=89 => ("B", Severity::Info),
        70..=79 => ("C", Severity::Warning),
        60..=69 => ("D", Severity::Warning),
        50..=59 => ("E", Severity::Error),
        _ => ("F", Severity::Error),
    }
}

/// A–F from 0–100 (90 A, 80 B, 70 C, 60 D, 50 E, below F): [`rate`]'s grade.
pub fn grade(score: u32) -> String {
    rate(score).0.to_string()
}

/// The highest score a check with a finding of this severity can have: a
/// check that found an error is at most E, a warning at most C (so one
/// broken resource among fifty still fails its check); notes cap nothing.
pub fn cap(worst: Severity) -> u32 {
    match worst {
        Severity::Ok => 100,
        Severity::Info => 100,
        Severity::Warning => 79,
        Severity::Error => 59,
    }
}
fn is_static(e: &Entry) -> bool {
    matches!(
        e.kind,
        Kind::Stylesheet | Kind::Script | Kind::Image | Kind::Font
    ) || e.content_type.starts_with("image/")
        || e.content_type.starts_with("font/")
        || e.content_type == "text/css"
        || e.content_type.contains("javascript")
}

fn is_html(e: &Entry) -> bool {
    e.content_type == "text/html" || e.content_type == "application/xhtml+xml"
}

fn is_compressible(ct: &str) -> bool {
    crate::http::is_text_type(ct)
        || ct == "image/svg+xml"
        || ct == "application/wasm"
        || ct == "font/ttf"
        || ct == "font/otf"
}

fn is_precompressed(ct: &str) -> bool {
    matches!(
        ct,
        "image/jpeg"
            | "image/png"
            | "image/gif"
            | "image/webp"
            | "image/avif"
            | "font/woff"
            | "font/woff2"
            | "application/zip"
            | "application/gzip"
            | "application/x-gzip"
            | "video/mp4"
            | "audio/mpeg"
    )
}

struct Ctx<'a> {
    first: &'a Load,
    repeat: Option<&'a Load>,
    https: bool,
    alpn: &'a [crate::http::AlpnProbe],
    probes: &'a Probes,
    page: &'a PageStatus,
}

impl Ctx<'_> {
    fn fetched(&self) -> impl Iterator<Item = &Entry> {
        self.first
            .entries
            .iter()
            .filter(|e| !e.from_cache && e.status.is_some())
    }
    fn ok(&self) -> impl Iterator<Item = &Entry> {
        self.fetched().filter(|e| e.status == Some(200))
    }
    /// The page's own final response (after redirects), when it is 2xx.
    fn doc(&self) -> Option<&Entry> {
        if !self.page.ok {
            return None;
        }
        final_document(self.first).map(|i| &self.first.entries[i])
    }
}

/// Index of the entry that finally answered for the page: the first entry,
/// then each redirect's target in turn.
fn final_document(l: &Load) -> Option<usize> {
    let mut i = 0;
    l.entries.first()?;
    for _ in 0..16 {
        let e = &l.entries[i];
        let Some(to) = &e.redirect_to else {
            return Some(i);
        };
        match l
            .entries
            .iter()
            .position(|n| n.parent == Some(i) && n.kind == e.kind && &n.url == to)
        {
            Some(j) => i = j,
            None => return Some(i),
        }
    }
    Some(i)
}

/// The URL that finally answered for the page in a load (after redirects).
pub fn final_url(l: &Load) -> Option<String> {
    final_document(l).map(|i| l.entries[i].url.clone())
}

fn page_status(l: &Load) -> PageStatus {
    match final_document(l).map(|i| &l.entries[i]) {
        Some(e) => PageStatus {
            url: e.url.clone(),
            status: e.status,
            ok: e.status.is_some_and(|s| (200..300).contains(&s)),
        },
        None => PageStatus {
            url: String::new(),
            status: None,
            ok: false,
        },
    }
}

fn finding(sev: Severity, e: &Entry, evidence: String) -> (bool, Finding) {
    (
        e.third_party,
        Finding {
            severity: sev,
            url: Some(e.url.clone()),
            evidence,
            saving_bytes: None,
            saving_ms: None,
        },
    )
}

/// A finding not about one resource.
fn note(sev: Severity, evidence: String) -> (bool, Finding) {
    (
        false,
        Finding {
            severity: sev,
            url: None,
            evidence,
            saving_bytes: None,
            saving_ms: None,
        },
    )
}

/// A check's score given its worst own finding: a warning puts it in the
/// warning band (60–79, C or D), an error in the error band (below 60),
/// wherever the share of good resources alone would put it; notes cap
/// nothing. So the finding's severity and the check's agree.
pub fn band(score: u32, worst: Severity) -> u32 {
    match worst {
        Severity::Ok | Severity::Info => score,
        Severity::Warning => score.clamp(60, cap(worst)),
        Severity::Error => score.min(cap(worst)),
    }
}

/// Weight of a check in the overall score (docs/audit.md lists them).
fn weight(id: &str) -> u32 {
    match id {
        "broken" | "cache-static" | "compression" | "https" | "tls-certificate" => 3,
        "conditional-get" | "ttfb" | "hsts" | "tls-protocol" | "tls-chain" | "http2" => 2,
        "alt-svc-h3" => 0,
        _ => 1,
    }
}

/// The summary of a check about the page's own response when there is none.
fn security_na() -> String {
    "not applicable: the page did not answer 2xx".into()
}

/// Builds a check: the grade and severity both come from [`rate`] of the
/// score, put in the band of the worst own finding ([`band`]). `score: None`: not
/// applicable (nothing to judge).
#[allow(clippy::too_many_arguments)]
fn check(
    id: &'static str,
    title: &'static str,
    threshold: &'static str,
    score: Option<u32>,
    summary: String,
    found: Vec<(bool, Finding)>,
    fix: Fix,
) -> Check {
    let (third, own): (Vec<_>, Vec<_>) = found.into_iter().partition(|(t, _)| *t);
    let own: Vec<Finding> = own.into_iter().map(|(_, f)| f).collect();
    let third: Vec<Finding> = third.into_iter().map(|(_, f)| f).collect();
    let worst = own.iter().map(|f| f.severity).max().unwrap_or(Severity::Ok);
    let score = score.map(|s| band(s.min(100), worst));
    let (grade, severity) = match score {
        Some(s) => {
            let (g, sev) = rate(s);
            (g.to_string(), sev)
        }
        None => ("-".to_string(), Severity::Ok),
    };
    let summary = if score.is_none() && !summary.starts_with("not applicable") {
        "not applicable: nothing to judge on this page".to_string()
    } else {
        summary
    };
    Check {
        id,
        title,
        applicable: score.is_some(),
        score: score.unwrap_or(0),
        grade,
        severity,
        weight: weight(id),
        summary,
        threshold,
        findings: own,
        third_party: third,
        fix: (severity >= Severity::Info).then_some(fix),
    }
}

/// What the audit learns by connecting itself, beyond the page's load (the
/// TLS probe of the page's https origin and the plain-http redirect probe),
/// and the device pixel ratio images are judged at.
#[derive(Clone, Debug, Default)]
pub struct Probes {
    /// The TLS handshakes with the page's origin (https pages).
    pub tls: Option<transport::TlsProbe>,
    /// What `http://host/` answered (https pages), or the page's own
    /// answer followed for http pages.
    pub http: Option<transport::HttpProbe>,
    /// Device pixel ratio the images are judged at (none: the DPR of the
    /// screen the load was discovered for; `redline audit` sets its
    /// `--dpr`/`--mobile` one).
    pub dpr: Option<f64>,
}

/// Audits a page loaded by [`crate::page::run`]: its first view, its repeat
/// view and the ALPN probes of its https origins (no probes of its own).
pub fn audit_page(r: &crate::page::PageReport) -> Audit {
    audit_page_with(r, &Probes::default())
}

/// As [`audit_page`], with the TLS and http→https probes ([`transport::probe`]).
pub fn audit_page_with(r: &crate::page::PageReport, probes: &Probes) -> Audit {
    let first = &r.views[0];
    let repeat = r.views.iter().find(|l| l.view == crate::load::View::Repeat);
    let mut a = audit(&r.url, first, repeat, r.summary.clone(), &r.alpn, probes);
    a.insecure = r.insecure;
    a.third_party = r.third_party.clone();
    a.deferred = first
        .discovery
        .deferred
        .iter()
        .map(|d| d.url.clone())
        .collect();
    a
}

/// Audits a page from its first view, its repeat view when loaded, the
/// ALPN probes of its https origins and the audit's own probes.
pub fn audit(
    url: &str,
    first: &Load,
    repeat: Option<&Load>,
    views: Vec<crate::page::ViewSummary>,
    alpn: &[crate::http::AlpnProbe],
    probes: &Probes,
) -> Audit {
    let page = page_status(first);
    let cx = Ctx {
        first,
        repeat,
        https: url.starts_with("https:"),
        alpn,
        probes,
        page: &page,
    };
    let mut checks = vec![page_check(&cx)];
    checks.extend([
        keep_alive(&cx),
        http2(&cx),
        compression(&cx),
        compression_binary(&cx),
        vary(&cx),
        cache_static(&cx),
        cache_html(&cx),
        validators(&cx),
        revalidate::conditional_get(&cx),
        html_weight(&cx),
        minify(&cx),
        images::scaled(&cx),
        images::format(&cx),
        redirects(&cx),
        broken(&cx),
        ttfb(&cx),
    ]);
    checks.extend(security::checks(&cx));
    checks.extend(transport::checks(&cx));
    let applicable: Vec<&Check> = checks.iter().filter(|c| c.applicable).collect();
    let total_w: u32 = applicable.iter().map(|c| c.weight).sum();
    let score = if !page.ok || total_w == 0 {
        0
    } else {
        applicable.iter().map(|c| c.score * c.weight).sum::<u32>() / total_w
    };
    let severity = applicable
        .iter()
        .map(|c| c.severity)
        .max()
        .unwrap_or(Severity::Ok);
    Audit {
        format: FORMAT,
        version: VERSION,
        url: url.to_string(),
        grade: grade(score),
        score,
        severity,
        page,
        checks,
        views,
        insecure: false,
        third_party: crate::page::third_parties(first),
        deferred: Vec::new(),
    }
}

fn page_check(cx: &Ctx) -> Check {
    let p = cx.page;
    let (score, summary, f) = match p.status {
        Some(s) if p.ok => (Some(100), format!("the page answered {s}"), Vec::new()),
        Some(s) => (
            Some(0),
            format!("the page answered {s}, not 2xx: nothing else here is about the page a visitor should get"),
            vec![note(Severity::Error, format!("{} answered {s}", p.url))],
        ),
        None => (
            Some(0),
            "the page did not answer".to_string(),
            vec![note(Severity::Error, "no response".into())],
        ),
    };
    check(
        "page",
        "The page itself answers 2xx",
        "the page's own response, after redirects, must be 2xx; otherwise the audit fails",
        score,
        summary,
        f,
        FIX_PAGE,
    )
}

fn pct(ok: usize, all: usize) -> Option<u32> {
    (100 * ok).checked_div(all).map(|v| v as u32)
}
fn keep_alive(cx: &Ctx) -> Check {
    // HTTP/2 multiplexes every request on one connection: keep-alive is an
    // HTTP/1.1 matter, so only HTTP/1.1 fetches are judged.
    let (h2, own): (Vec<&Entry>, Vec<&Entry>) = cx
        .fetched()
        .filter(|e| !e.third_party)
        .partition(|e| e.protocol.as_deref() == Some("h2"));
    let h2_conns: std::collections::HashSet<u64> = h2.iter().filter_map(|e| e.conn).collect();
    let h2_note = format!(
        "{} request{} over HTTP/2 multiplexed on {} connection{}",
        h2.len(),
        if h2.len() == 1 { "" } else { "s" },
        h2_conns.len(),
        if h2_conns.len() == 1 { "" } else { "s" }
    );
    if !h2.is_empty() && own.len() <= 1 {
        return check(
            "keep-alive",
            "Keep-alive: connections reused",
            "every request after the first on a host should reuse a connection",
            None,
            format!(
                "not applicable (moot on HTTP/2): {h2_note}; keep-alive matters only for HTTP/1.1"
            ),
            Vec::new(),
            FIX_KEEPALIVE,
        );
    }
    let conns: std::collections::HashSet<u64> = own.iter().filter_map(|e| e.conn).collect();
    let reused = own.iter().filter(|e| e.reused).count();
    let closes = own
        .iter()
        .filter(|e| {
            crate::http::header(&e.headers, "connection")
                .is_some_and(|v| v.to_ascii_lowercase().contains("close"))
        })
        .count();
    let mut f = Vec::new();
    let score = if own.len() < 2 {
        None
    } else if reused == 0 {
        let ev = format!(
            "{} requests needed {} connections: none was reused{}",
            own.len(),
            conns.len(),
            if closes > 0 {
                format!(" ({closes} answers said Connection: close)")
            } else {
                String::new()
            }
        );
        f.push((
            false,
            Finding {
                severity: Severity::Error,
                url: None,
                evidence: ev,
                saving_bytes: None,
                saving_ms: None,
            },
        ));
        Some(0)
    } else {
        Some(100)
    };
    check(
        "keep-alive",
        "Keep-alive: connections reused",
        "every request after the first on a host should reuse a connection",
        score,
        if score.is_none() {
            "not applicable: fewer than two HTTP/1.1 requests, nothing to reuse".to_string()
        } else {
            format!(
                "{} HTTP/1.1 requests over {} connections, {} on a reused connection{}",
                own.len(),
                conns.len(),
                reused,
                if h2.is_empty() {
                    String::new()
                } else {
                    format!(" (and {h2_note})")
                }
            )
        },
        f,
        FIX_KEEPALIVE,
    )
}

const FIX_KEEPALIVE: Fix = Fix {
    apache: "KeepAlive On\nMaxKeepAliveRequests 100\nKeepAliveTimeout 5",
    nginx: "keepalive_timeout 65;\nkeepalive_requests 1000;",
    lighttpd: "server.max-keep-alive-requests := 100\nserver.max-keep-alive-idle := 5",
};

fn http2(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let own: Vec<&crate::http::AlpnProbe> = cx.alpn.iter().filter(|p| !p.third_party).collect();
    let own_h2 = own.iter().filter(|p| p.h2).count();
    for p in cx.alpn.iter().filter(|p| !p.h2) {
        let evidence = match (&p.error, &p.alpn) {
            (Some(e), _) => format!("ALPN probe failed: {e}"),
            (None, Some(a)) => format!(
                "offered ALPN {}; the server chose {a}: no HTTP/2, so a browser opens up to 6 connections and queues requests on them",
                p.offered.join(", ")
            ),
            (None, None) => format!(
                "offered ALPN {}; the server ignored ALPN (HTTP/1.1 only)",
                p.offered.join(", ")
            ),
        };
        f.push((
            p.third_party,
            Finding {
                severity: if p.error.is_some() {
                    Severity::Info
                } else {
                    Severity::Warning
                },
                url: Some(p.origin.clone()),
                evidence,
                saving_bytes: None,
                saving_ms: None,
            },
        ));
    }
    let (score, summary) = if own.is_empty() {
        (
            None,
            if cx.https {
                "the page's https origin could not be probed".to_string()
            } else {
                "not applicable: HTTP/2 needs https (ALPN); the page is http://".to_string()
            },
        )
    } else {
        (
            pct(own_h2, own.len()),
            format!(
                "{own_h2} of {} https origins offer HTTP/2 ({})",
                own.len(),
                own.iter()
                    .map(|p| format!(
                        "{} → {}",
                        p.origin,
                        p.alpn.as_deref().unwrap_or(if p.error.is_some() {
                            "probe failed"
                        } else {
                            "no ALPN"
                        })
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    };
    check(
        "http2",
        "HTTP/2 offered on https (ALPN)",
        "browsers use HTTP/2 only over TLS and only when the server picks h2 in ALPN",
        score,
        summary,
        f,
        FIX_HTTP2,
    )
}

const FIX_GZIP: Fix = Fix {
    apache: "# mod_deflate (sets Vary: Accept-Encoding itself)\nAddOutputFilterByType DEFLATE text/html text/plain text/css text/xml application/javascript application/json image/svg+xml",
    nginx: "gzip on;\ngzip_vary on;\ngzip_min_length 1024;\ngzip_types text/plain text/css text/xml application/javascript application/json image/svg+xml;",
    lighttpd: "server.modules += ( \"mod_deflate\" )\ndeflate.allowed-encodings := ( \"br\", \"gzip\", \"deflate\" )\ndeflate.mimetypes := ( \"text/html\", \"text/plain\", \"text/css\", \"text/xml\", \"application/javascript\", \"application/json\", \"image/svg+xml\" )",
};

fn compression(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut cand, mut good, mut saving) = (0, 0, 0u64);
    for e in cx.ok() {
        if !is_compressible(&e.content_type) {
            continue;
        }
        let Some(body) = &e.body else { continue };
        if e.content_encoding
            .as_deref()
            .is_some_and(|c| c != "identity")
        {
            if !e.third_party {
                cand += 1;
                good += 1;
            }
            continue;
        }
        let gz = minify::gzip_size(body);
        let save = e.decoded_bytes.saturating_sub(gz);
        if save < GZIP_MIN_SAVING {
            continue;
        }
        if !e.third_party {
            cand += 1;
            saving += save;
        }
        let (t, mut fi) = finding(
            Severity::Warning,
            e,
            format!(
                "{} sent without Content-Encoding: {} → {} with gzip",
                e.content_type,
                bytes(e.decoded_bytes),
                bytes(gz)
            ),
        );
        fi.saving_bytes = Some(save);
        f.push((t, fi));
    }
    check(
        "compression",
        "Compression of text (gzip/br)",
        "a finding when gzip saves at least 1,400 bytes (WebPageTest, Lighthouse)",
        pct(good, cand),
        if saving > 0 {
            format!(
                "{} of {} text responses compressed; gzip would save {}",
                good,
                cand,
                bytes(saving)
            )
        } else {
            format!("{good} of {cand} text responses worth compressing are compressed")
        },
        f,
        FIX_GZIP,
    )
}

fn compression_binary(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let mut n = 0;
    let mut bad = 0;
    for e in cx.ok().filter(|e| is_precompressed(&e.content_type)) {
        // Only the page's own site is graded.
        n += usize::from(!e.third_party);
        if let Some(c) = e.content_encoding.as_deref().filter(|c| *c != "identity") {
            if !e.third_party {
                bad += 1;
            }
            f.push(finding(
                Severity::Warning,
                e,
                format!(
                    "{} sent with Content-Encoding: {c} (already compressed: CPU for nothing)",
                    e.content_type
                ),
            ));
        }
    }
    check(
        "compression-binary",
        "No compression of already-compressed types",
        "images, fonts and archives are compressed already",
        pct(n - bad, n),
        format!("{bad} of {n} already-compressed responses compressed again"),
        f,
        FIX_BINARY,
    )
}

fn vary(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut bad) = (0, 0);
    for e in cx.ok().filter(|e| {
        e.content_encoding
            .as_deref()
            .is_some_and(|c| c != "identity")
    }) {
        // Only the page's own site is graded.
        n += usize::from(!e.third_party);
        let ok = e.vary.as_deref().is_some_and(|v| {
            v.split(',')
                .any(|p| p.trim().eq_ignore_ascii_case("accept-encoding") || p.trim() == "*")
        });
        if !ok {
            if !e.third_party {
                bad += 1;
            }
            f.push(finding(
                Severity::Warning,
                e,
                format!(
                    "Content-Encoding: {} without Vary: Accept-Encoding (Vary: {})",
                    e.content_encoding.as_deref().unwrap_or(""),
                    e.vary.as_deref().unwrap_or("missing")
                ),
            ));
        }
    }
    check(
        "vary",
        "Vary: Accept-Encoding on compressed responses",
        "shared caches must not hand gzip to clients that did not ask for it",
        pct(n - bad, n),
        format!(
            "{} of {} compressed responses carry Vary: Accept-Encoding",
            n - bad,
            n
        ),
        f,
        FIX_VARY,
    )
}

fn cache_static(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut pts, mut no_public) = (0u32, 0u32, 0u32);
    for e in cx.ok().filter(|e| is_static(e) && !is_html(e)) {
        let fr = e.freshness.clone().unwrap_or(crate::cache::Freshness {
            lifetime_s: 0,
            source: "none",
            public: false,
            immutable: false,
        });
        let explicit = matches!(fr.source, "max-age" | "expires");
        let life = if explicit { fr.lifetime_s } else { 0 };
        let (sev, p) = if life >= CACHE_GOOD_S {
            (Severity::Ok, 100)
        } else if life >= CACHE_FAIL_S {
            (Severity::Warning, 50)
        } else {
            (Severity::Error, 0)
        };
        if !e.third_party {
            n += 1;
            pts += p;
            if !fr.public && life >= CACHE_FAIL_S {
                no_public += 1;
            }
        }
        if sev > Severity::Ok {
            let seen = match (e.cache_control.as_deref(), e.expires.as_deref()) {
                (None, None) => "no Cache-Control max-age, no Expires".to_string(),
                (cc, ex) => format!(
                    "Cache-Control: {}; Expires: {} → cacheable for {}",
                    cc.unwrap_or("missing"),
                    ex.unwrap_or("missing"),
                    human_secs(life)
                ),
            };
            f.push(finding(sev, e, seen));
        }
    }
    if no_public > 0 {
        f.push((
            false,
            Finding {
                severity: Severity::Info,
                url: None,
                evidence: format!("{no_public} cacheable static responses without Cache-Control: public (helps shared proxies)"),
                saving_bytes: None,
                saving_ms: None,
            },
        ));
    }
    check(
        "cache-static",
        "Static assets cacheable for a long time",
        "under 7 days graded down, under 1 hour failed (WebPageTest); Lighthouse expects much longer (up to a year)",
        pts.checked_div(n),
        format!("{n} static responses checked"),
        f,
        FIX_CACHE_STATIC,
    )
}

fn cache_html(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut bad) = (0, 0);
    for e in cx.ok().filter(|e| is_html(e)) {
        // Only the page's own site is graded.
        n += usize::from(!e.third_party);
        let fr = e.freshness.clone();
        if let Some(fr) = fr.filter(|fr| fr.immutable || fr.lifetime_s > 86_400) {
            if !e.third_party {
                bad += 1;
            }
            f.push(finding(
                Severity::Warning,
                e,
                format!(
                    "HTML cacheable for {}{}: visitors will not see changes",
                    human_secs(fr.lifetime_s),
                    if fr.immutable { " (immutable)" } else { "" }
                ),
            ));
        }
    }
    check(
        "cache-html",
        "HTML not cached for long",
        "HTML fresh for more than a day, or immutable, hides updates",
        pct(n - bad, n),
        format!(
            "{} of {} HTML documents revalidate within a day",
            n - bad,
            n
        ),
        f,
        FIX_CACHE_HTML,
    )
}

fn validators(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut ok) = (0, 0);
    for e in cx.ok() {
        let has = e.etag.is_some() || e.last_modified.is_some();
        if !e.third_party {
            n += 1;
            ok += usize::from(has);
        }
        if !has {
            f.push(finding(
                Severity::Warning,
                e,
                "neither ETag nor Last-Modified: a browser must download it again".into(),
            ));
        }
    }
    check(
        "validators",
        "Validators present (ETag or Last-Modified)",
        "every cacheable response should be revalidatable with a 304",
        pct(ok, n),
        format!("{ok} of {n} responses carry ETag or Last-Modified"),
        f,
        FIX_VALIDATORS,
    )
}

/// (bytes saved on the wire, the body's size on the wire) for sending
/// `small` instead of the response's body, both with its content coding.
fn wire_figures(e: &Entry, body: &[u8], small: &[u8]) -> (u64, u64) {
    let coding = e.content_encoding.as_deref();
    let save = minify::wire_saving(body, small, coding, e.body_wire_bytes, e.decoded_bytes);
    let of = minify::wire_size(body, coding).unwrap_or(e.body_wire_bytes);
    (save, of)
}

fn coding_name(e: &Entry) -> String {
    match e.content_encoding.as_deref() {
        Some(c) if c != "identity" => format!("{c} as sent"),
        _ => "uncompressed as sent".to_string(),
    }
}

const FIX_BUILD: Fix = Fix {
    apache: "# not a server setting: minify at build time (html-minifier, csso, terser) and serve the result",
    nginx: "# not a server setting: minify at build time (html-minifier, csso, terser) and serve the result",
    lighttpd: "# not a server setting: minify at build time (html-minifier, csso, terser) and serve the result",
};

fn html_weight(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut bad) = (0, 0);
    for e in cx.ok().filter(|e| is_html(e)) {
        let Some(body) = &e.body else { continue };
        // Only the page's own site is graded.
        n += usize::from(!e.third_party);
        let (save, of) = wire_figures(e, body, &minified_html(body));
        let mut flagged = false;
        if save > MINIFY_MIN_BYTES && save * 10 > of {
            flagged = true;
            let (t, mut fi) = finding(
                Severity::Warning,
                e,
                format!(
                    "{} of HTML on the wire ({}); removing comments and whitespace would save {} there ({:.0} %)",
                    bytes(of),
                    coding_name(e),
                    bytes(save),
                    100.0 * save as f64 / of.max(1) as f64
                ),
            );
            fi.saving_bytes = Some(save);
            f.push((t, fi));
        }
        let scan = scan_html(body, &crate::viewport::Viewport::default());
        let inline = (scan.inline_script_bytes + scan.inline_style_bytes) as u64;
        if inline > 10 * 1024 {
            flagged = true;
            f.push(finding(
                Severity::Warning,
                e,
                format!("{} of inline <style> and {} of inline <script>: sent with every page, never cached; move them to files", bytes(scan.inline_style_bytes as u64), bytes(scan.inline_script_bytes as u64)),
            ));
        }
        if flagged && !e.third_party {
            bad += 1;
        }
    }
    check(
        "html-weight",
        "Lean HTML",
        "a finding above 2 KB and 10 % saved on the wire, both versions compressed as the server does; inline style and script above 10 KB",
        pct(n - bad, n),
        format!("{} of {} HTML documents lean", n - bad, n),
        f,
        FIX_BUILD,
    )
}

fn minify(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut bad) = (0, 0);
    for e in cx.ok() {
        let css = e.content_type == "text/css";
        let js = e.content_type.contains("javascript") || e.content_type.contains("ecmascript");
        if !(css || js) {
            continue;
        }
        let Some(body) = &e.body else { continue };
        if !e.third_party {
            n += 1;
        }
        let (save, of) = wire_figures(e, body, &minified_code(body, css));
        let min_pct = if css { 5 } else { 10 };
        if save > MINIFY_MIN_BYTES && save * 100 > of * min_pct {
            if !e.third_party {
                bad += 1;
            }
            let (t, mut fi) = finding(
                Severity::Warning,
                e,
                format!(
                    "{} {} on the wire ({}): minifying would save about {} there ({:.0} %)",
                    bytes(of),
                    if css { "CSS" } else { "JavaScript" },
                    coding_name(e),
                    bytes(save),
                    100.0 * save as f64 / of.max(1) as f64
                ),
            );
            fi.saving_bytes = Some(save);
            f.push((t, fi));
        }
    }
    check(
        "minify",
        "Minified CSS and JavaScript",
        "a finding above 2 KB and 5 % (CSS) / 10 % (JS) saved on the wire, both versions compressed as the server does (Lighthouse)",
        pct(n - bad, n),
        format!("{} of {} stylesheets and scripts minified", n - bad, n),
        f,
        FIX_BUILD,
    )
}

fn redirects(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let mut doc_hops = 0;
    let mut other = 0;
    for e in cx.fetched().filter(|e| e.redirect_to.is_some()) {
        let to = e.redirect_to.clone().unwrap_or_default();
        let sev = if e.kind == Kind::Document {
            Severity::Warning
        } else {
            Severity::Info
        };
        if e.kind == Kind::Document && !e.third_party {
            doc_hops += 1;
        } else if !e.third_party {
            other += 1;
        }
        let (t, mut fi) = finding(sev, e, format!("{} → {to}", e.status.unwrap_or(0)));
        fi.saving_ms = Some(e.phases.total_ms);
        f.push((t, fi));
    }
    let score = 100u32.saturating_sub(20 * doc_hops + 5 * other);
    check(
        "redirects",
        "No redirect chains",
        "every redirect costs a round trip before anything else loads",
        Some(score),
        format!("{doc_hops} redirects before the page, {other} on its resources"),
        f,
        FIX_REDIRECTS,
    )
}

fn broken(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let mut own_bad = 0;
    let all: Vec<&Entry> = cx.first.entries.iter().filter(|e| !e.from_cache).collect();
    for e in &all {
        let bad = match (e.status, &e.error) {
            (Some(s), _) if s >= 400 => Some(format!("status {s}")),
            (None, Some(err)) => Some(err.clone()),
            _ => None,
        };
        if let Some(why) = bad {
            if !e.third_party {
                own_bad += 1;
            }
            f.push(finding(Severity::Error, e, why));
        }
    }
    let n = all.iter().filter(|e| !e.third_party).count();
    check(
        "broken",
        "No broken resources (4xx/5xx)",
        "every referenced resource should load",
        pct(n - own_bad, n),
        format!("{own_bad} of {n} requests failed"),
        f,
        FIX_BROKEN,
    )
}

fn ttfb(cx: &Ctx) -> Check {
    // The document that finally answered 2xx (after redirects).
    let doc = cx.doc();
    let mut f = Vec::new();
    let score = match doc {
        Some(e) if e.status.is_some() => {
            let w = e.phases.waiting_ms;
            let (sev, score) = if w <= TTFB_GOOD_MS {
                (Severity::Ok, 100)
            } else if w <= TTFB_BAD_MS {
                (Severity::Info, 80)
            } else {
                (Severity::Warning, 65)
            };
            if sev > Severity::Ok {
                let (t, mut fi) = finding(sev, e, format!("time to first byte {}", millis(w)));
                fi.saving_ms = Some(w - TTFB_GOOD_MS);
                f.push((t, fi));
            }
            Some(score)
        }
        _ => None,
    };
    let summary = doc
        .filter(|e| e.status.is_some())
        .map(|e| {
            format!(
                "time to first byte of the page {}",
                millis(e.phases.waiting_ms)
            )
        })
        .unwrap_or_else(|| "not applicable: the page did not answer 2xx".into());
    check(
        "ttfb",
        "Time to first byte",
        "good under 100 ms, flagged over 600 ms (Lighthouse)",
        score,
        summary,
        f,
        FIX_TTFB,
    )
}

const FIX_PAGE: Fix = Fix {
    apache: "# serve the page (check DocumentRoot, Alias, Require and the error log), or audit the URL visitors get",
    nginx: "# serve the page (check root, location, try_files, allow/deny and the error log), or audit the URL visitors get",
    lighttpd: "# serve the page (check server.document-root, url.access-deny and the error log), or audit the URL visitors get",
};

const FIX_HTTP2: Fix = Fix {
    apache: "# a2enmod http2 (mod_http2; with the event or worker MPM, not prefork)\nProtocols h2 http/1.1",
    nginx: "# in the https server block; nginx 1.25.1 and newer:\n#     http2 on;\n# older nginx (see nginx -v): add http2 to the existing listen line:\n#     listen 443 ssl http2;",
    lighttpd: "# lighttpd 1.4.56 and newer (on by default since 1.4.59)\nserver.feature-flags += (\"server.h2proto\" => \"enable\")",
};

const FIX_BINARY: Fix = Fix {
    apache: "SetEnvIfNoCase Request_URI \\.(?:gif|jpe?g|png|webp|woff2?|zip|gz)$ no-gzip dont-vary",
    nginx: "# list only text types in gzip_types (never image/jpeg, image/png, font/woff2)",
    lighttpd: "# list only text types in deflate.mimetypes",
};

const FIX_VARY: Fix = Fix {
    apache: "# mod_headers\nHeader append Vary Accept-Encoding",
    nginx: "gzip_vary on;",
    lighttpd: "# mod_deflate adds Vary itself; for pre-compressed files:\nsetenv.add-response-header += ( \"Vary\" => \"Accept-Encoding\" )",
};

const FIX_CACHE_STATIC: Fix = Fix {
    apache: "# mod_expires + mod_headers\nExpiresActive On\nExpiresByType text/css \"access plus 1 year\"\nExpiresByType application/javascript \"access plus 1 year\"\nExpiresByType image/png \"access plus 1 year\"\nExpiresByType image/jpeg \"access plus 1 year\"\nExpiresByType image/gif \"access plus 1 year\"\nExpiresByType font/woff2 \"access plus 1 year\"\n<FilesMatch \"\\.(css|js|png|jpe?g|gif|webp|svg|woff2?)$\">\n  Header append Cache-Control \"public\"\n</FilesMatch>",
    nginx: "location ~* \\.(css|js|png|jpe?g|gif|webp|svg|woff2?)$ {\n    expires 1y;\n    add_header Cache-Control \"public\";\n}",
    lighttpd: "server.modules += ( \"mod_expire\", \"mod_setenv\" )\n$HTTP[\"url\"] =~ \"\\.(css|js|png|jpe?g|gif|webp|svg|woff2?)$\" {\n    expire.url = ( \"\" => \"access plus 1 years\" )\n    setenv.add-response-header = ( \"Cache-Control\" => \"public\" )\n}",
};

const FIX_CACHE_HTML: Fix = Fix {
    apache: "# mod_expires\nExpiresActive On\nExpiresByType text/html \"access plus 0 seconds\"",
    nginx: "location ~* \\.html?$ {\n    add_header Cache-Control \"no-cache\";\n}",
    lighttpd: "$HTTP[\"url\"] =~ \"\\.html?$\" {\n    setenv.add-response-header = ( \"Cache-Control\" => \"no-cache\" )\n}",
};

const FIX_VALIDATORS: Fix = Fix {
    apache: "FileETag MTime Size\n# dynamic pages (CGI, PHP) must send ETag or Last-Modified themselves",
    nginx: "etag on;   # the default for static files; proxied apps must send their own",
    lighttpd: "static-file.etags := \"enable\"\netag.use-mtime := \"enable\"\netag.use-size := \"enable\"\netag.use-inode := \"disable\"",
};

const FIX_REDIRECTS: Fix = Fix {
    apache: "# link to the final URL; where a redirect must stay, one hop straight to it, e.g.:\n#     Redirect permanent /old https://example.org/new",
    nginx: "# link to the final URL; where a redirect must stay, one hop straight to it, e.g.:\n#     location = /old { return 301 https://example.org/new; }",
    lighttpd: "# link to the final URL; where a redirect must stay, one hop straight to it, e.g.:\n#     url.redirect = ( \"^/old$\" => \"https://example.org/new\" )",
};

const FIX_BROKEN: Fix = Fix {
    apache: "# fix or remove the references (see the error log)",
    nginx: "# fix or remove the references (see the error log)",
    lighttpd: "# fix or remove the references (see the error log)",
};

const FIX_TTFB: Fix = Fix {
    apache: "# cache generated pages (mod_cache, a PHP opcode cache), HostnameLookups Off, fewer modules",
    nginx: "# cache generated pages (proxy_cache / fastcgi_cache), keep upstream connections alive",
    lighttpd: "# cache generated pages; keep FastCGI back ends warm (fastcgi.server min-procs)",
};

/// Every fix the audit can print, with the id of its check (a check with
/// several causes lists each): what the tests paste into real servers.
pub fn all_fixes() -> Vec<(&'static str, Fix)> {
    vec![
        ("page", FIX_PAGE),
        ("keep-alive", FIX_KEEPALIVE),
        ("http2", FIX_HTTP2),
        ("compression", FIX_GZIP),
        ("compression-binary", FIX_BINARY),
        ("vary", FIX_VARY),
        ("cache-static", FIX_CACHE_STATIC),
        ("cache-html", FIX_CACHE_HTML),
        ("validators", FIX_VALIDATORS),
        ("conditional-get", revalidate::FIX_DEFLATE_SUFFIX),
        ("conditional-get", revalidate::FIX_BROTLI_SUFFIX),
        ("conditional-get", revalidate::FIX_ETAG_CHANGED),
        ("conditional-get", revalidate::FIX_LM_CHANGES),
        ("conditional-get", revalidate::FIX_NO_VALIDATOR),
        ("conditional-get", revalidate::FIX_IGNORED),
        ("html-weight", FIX_BUILD),
        ("minify", FIX_BUILD),
        ("images-scaled", images::FIX_IMAGES),
        ("images-format", images::FIX_IMAGES),
        ("redirects", FIX_REDIRECTS),
        ("broken", FIX_BROKEN),
        ("ttfb", FIX_TTFB),
        ("hsts", security::FIX_HSTS),
        ("x-content-type-options", security::FIX_NOSNIFF),
        ("clickjacking", security::FIX_FRAMES),
        ("referrer-policy", security::FIX_REFERRER),
        ("csp", security::FIX_CSP),
        ("cookies", security::FIX_COOKIES),
        ("server-version", security::FIX_TOKENS),
        ("https", transport::FIX_HTTPS),
        ("tls-protocol", transport::FIX_TLS_PROTO),
        ("tls-certificate", transport::FIX_CERT),
        ("tls-chain", transport::FIX_CHAIN),
        ("ocsp-stapling", transport::FIX_OCSP),
        ("tls-resumption", transport::FIX_RESUME),
        ("alt-svc-h3", transport::FIX_ALT_SVC),
    ]
}

/// Renders the audit as text: the page's own status first, then the
/// checks that apply, then (apart) the ones with nothing to judge.
pub fn render_text(a: &Audit) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nAudit of {}: grade {} ({}/100)",
        a.url, a.grade, a.score
    );
    if !a.page.ok {
        let _ = writeln!(
            s,
            "THE PAGE ITSELF FAILED: {} answered {}; the audit fails (grade F)",
            if a.page.url.is_empty() {
                &a.url
            } else {
                &a.page.url
            },
            a.page
                .status
                .map_or("nothing".to_string(), |c| c.to_string())
        );
    }
    let _ = writeln!(s);
    if a.insecure {
        let _ = writeln!(
            s,
            "certificate verification OFF (--insecure): the server's identity was not checked\n"
        );
    }
    for v in &a.views {
        let _ = writeln!(
            s,
            "  {:<12} {:>10}  {:>3} requests  {:>3} from cache  {:>3} × 304  {}",
            v.view.name(),
            millis(v.elapsed_ms),
            v.requests,
            v.from_cache,
            v.not_modified,
            bytes(v.wire_bytes)
        );
    }
    if !a.third_party.is_empty() {
        let origins: Vec<&str> = a.third_party.iter().map(|t| t.origin.as_str()).collect();
        let _ = writeln!(s, "  third-party origins: {}", origins.join(", "));
    }
    if !a.deferred.is_empty() {
        let _ = writeln!(
            s,
            "  {} loading=lazy resource{} below the first screen not counted in the first view",
            a.deferred.len(),
            if a.deferred.len() == 1 { "" } else { "s" }
        );
    }
    let _ = writeln!(s);
    for c in a.checks.iter().filter(|c| c.applicable) {
        let _ = writeln!(
            s,
            "[{}] {:<8} {:<48} {}",
            c.grade,
            c.severity.name(),
            c.title,
            c.summary
        );
        for fi in &c.findings {
            let mut line = format!("      {}: ", fi.severity.name());
            if let Some(u) = &fi.url {
                let _ = write!(line, "{u}: ");
            }
            line.push_str(&fi.evidence);
            if let Some(b) = fi.saving_bytes {
                let _ = write!(line, " [saves {}]", bytes(b));
            }
            if let Some(m) = fi.saving_ms {
                let _ = write!(line, " [saves {}]", millis(m));
            }
            let _ = writeln!(s, "{line}");
        }
        if !c.third_party.is_empty() {
            let _ = writeln!(
                s,
                "      third-party hosts (not graded; tell their owners):"
            );
            for fi in &c.third_party {
                let _ = writeln!(
                    s,
                    "        {}: {}",
                    fi.url.as_deref().unwrap_or("-"),
                    fi.evidence
                );
            }
        }
        if let Some(fix) = &c.fix {
            let _ = writeln!(s, "      threshold: {}", c.threshold);
            for (name, cfg) in [
                ("Apache", fix.apache),
                ("nginx", fix.nginx),
                ("lighttpd", fix.lighttpd),
            ] {
                let _ = writeln!(s, "      fix ({name}):");
                for l in cfg.lines() {
                    let _ = writeln!(s, "          {l}");
                }
            }
        }
    }
    let na: Vec<&Check> = a.checks.iter().filter(|c| !c.applicable).collect();
    if !na.is_empty() {
        let _ = writeln!(s, "\nNot applicable (nothing to judge; not in the score):");
        for c in na {
            let _ = writeln!(s, "[-] {:<57} {}", c.title, c.summary);
        }
    }
    s
}

/// Hand-made loads for the unit tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use crate::discover::Kind;
    use crate::load::{Entry, Load, View};

    pub(crate) fn entry(url: &str, kind: Kind, ct: &str, wire: u64) -> Entry {
        Entry {
            url: url.into(),
            kind,
            parent: None,
            third_party: false,
            from_cache: false,
            conditional: false,
            start_ms: 0.0,
            phases: Default::default(),
            end_ms: 0.0,
            status: Some(200),
            error: None,
            wire_bytes: wire + 200,
            body_wire_bytes: wire,
            decoded_bytes: wire,
            decode_capped: false,
            content_type: ct.into(),
            content_encoding: None,
            cache_control: None,
            expires: None,
            etag: None,
            last_modified: None,
            vary: None,
            freshness: None,
            conn: Some(1),
            protocol: Some("http/1.1".into()),
            reused: false,
            retried: false,
            redirect_to: None,
            html_size: None,
            intrinsic: None,
            headers: Vec::new(),
            request_headers: Vec::new(),
            body: None,
        }
    }

    pub(crate) fn page(img: Entry) -> Load {
        Load {
            view: View::First,
            entries: vec![
                entry("http://a.test/", Kind::Document, "text/html", 500),
                img,
            ],
            elapsed_ms: 1.0,
            requests: 2,
            from_cache: 0,
            not_modified: 0,
            wire_bytes: 0,
            decoded_bytes: 0,
            connections: 1,
            conns: Vec::new(),
            hosts: Vec::new(),
            errors: 0,
            truncated: false,
            discovery: Default::default(),
            started_at: String::new(),
            budget_exhausted: false,
            budget_used: 0,
        }
    }
}

#[cfg(test)]
mod tests;
