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
//! Modules: `critical` (render-blocking resources, the critical request
//! chain, unused preconnect/preload), `lantern` (a request's time on
//! Lighthouse's reference link), `images` (size at the device pixel ratio, format),
//! `layout` (containing-block widths, bounds on positions), `offscreen`
//! (Lighthouse's offscreen-images), `minify`
//! (the minifiers and wire-size estimates), `revalidate`
//! (why a conditional GET did not get 304), `security` (response headers,
//! cookies, HTTP→HTTPS), `transport` (the TLS probe and its checks).

pub mod alt_svc;
mod checks;
mod critical;
pub mod encode;
mod text;
use checks::{
    broken, cache_html, cache_static, compression, compression_binary, html_weight, http2,
    keep_alive, minify, page_check, pct, redirects, ttfb, validators, vary, FIX_BUILD, FIX_GZIP,
    FIX_KEEPALIVE,
};
pub use text::render_text;

mod fcp_graph;
mod images;
mod lantern;
mod layout;
mod minify;
mod offscreen;
mod revalidate;
mod security;
pub mod transport;

pub use fcp_graph::lighthouse_list;
pub use images::shown_widths;
pub use minify::{
    minified_code, minified_code_len, minified_css, minified_html, minified_html_len, wire_size,
};
pub use offscreen::{image_positions, Offscreen, Placed};

use crate::cache::human_secs;
use crate::discover::{scan_html, Kind};
use crate::load::{Entry, Load};
use crate::page::{bytes, millis};
use std::fmt::Write as _;

/// Format name of the JSON output.
pub const FORMAT: &str = "redline.audit";
/// Version of the JSON output. 3: the view that revalidates everything is
/// `revalidate` (2 called it `repeat`).
pub const VERSION: u32 = 3;

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
    /// Milliseconds the resource would take on Lighthouse's reference link
    /// (render-blocking: `lantern`), whatever link the page was loaded over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_ms: Option<f64>,
    /// How the resource was found when discovery did not find it:
    /// [`crate::load::BY_SCRIPT`] (`--browser`); the evidence says so too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_by: Option<&'static str>,
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
        Kind::Stylesheet | Kind::Script | Kind::Image | Kind::Font | Kind::Media
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
    revalidate: Option<&'a Load>,
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
            evidence: match &e.by_script {
                Some(b) => format!("{evidence} (found by {})", b.found_by),
                None => evidence,
            },
            saving_bytes: None,
            saving_ms: None,
            link_ms: None,
            found_by: e.by_script.as_ref().map(|b| b.found_by),
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
            link_ms: None,
            found_by: None,
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
        "alt-svc-h3" | "critical-chain" => 0,
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
    /// The page's HTTP/3 alternative (https pages whose `Alt-Svc` names h3).
    pub h3: Option<alt_svc::H3Probe>,
    /// Device pixel ratio the images are judged at (none: the DPR of the
    /// screen the load was discovered for; `redline audit` sets its
    /// `--dpr`/`--mobile` one).
    pub dpr: Option<f64>,
    /// The page's scripts were run in Chromium (`--browser`): the images
    /// they insert were fetched ([`crate::load::Entry::by_script`]).
    pub browser: bool,
    /// Chromium's trace of the page (`--browser`): render-blocking times
    /// are simulated on Lighthouse's graph of the first contentful paint,
    /// its main-thread tasks included (`fcp_graph`).
    pub trace: Option<crate::trace::PageTrace>,
}

/// Audits a page loaded by [`crate::page::run`]: its first view, its revalidate
/// view and the ALPN probes of its https origins (no probes of its own).
pub fn audit_page(r: &crate::page::PageReport) -> Audit {
    audit_page_with(r, &Probes::default())
}

/// As [`audit_page`], with the TLS and http→https probes ([`transport::probe`]).
pub fn audit_page_with(r: &crate::page::PageReport, probes: &Probes) -> Audit {
    let first = &r.views[0];
    let revalidate = r
        .views
        .iter()
        .find(|l| l.view == crate::load::View::Revalidate);
    let mut a = audit(
        &r.url,
        first,
        revalidate,
        r.summary.clone(),
        &r.alpn,
        probes,
    );
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

/// Audits a page from its first view, its revalidate view when loaded, the
/// ALPN probes of its https origins and the audit's own probes.
pub fn audit(
    url: &str,
    first: &Load,
    revalidate: Option<&Load>,
    views: Vec<crate::page::ViewSummary>,
    alpn: &[crate::http::AlpnProbe],
    probes: &Probes,
) -> Audit {
    let page = page_status(first);
    let cx = Ctx {
        first,
        revalidate,
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
        critical::render_blocking(&cx),
        critical::critical_chain(&cx),
        critical::hints(&cx),
        html_weight(&cx),
        minify(&cx),
        images::scaled(&cx),
        images::format(&cx),
        offscreen::offscreen(&cx),
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
        ("render-blocking", critical::FIX_RENDER_BLOCKING),
        ("critical-chain", critical::FIX_CHAIN),
        ("resource-hints", critical::FIX_HINTS),
        ("html-weight", FIX_BUILD),
        ("minify", FIX_BUILD),
        ("images-scaled", images::FIX_IMAGES),
        ("images-format", images::FIX_IMAGES),
        ("offscreen-images", offscreen::FIX_OFFSCREEN),
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
        ("alt-svc-h3", alt_svc::FIX_ALT_SVC),
    ]
}

/// Hand-made loads for the unit tests.
#[cfg(test)]
pub(crate) mod fixtures;

#[cfg(test)]
mod tests;
