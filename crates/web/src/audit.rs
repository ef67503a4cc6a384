//! `redline audit`: the HTTP- and HTML-level checks of the tuning articles,
//! each with a severity, the evidence, a grade A–F and the fix for Apache,
//! nginx and lighttpd. Thresholds follow WebPageTest and Lighthouse, and each
//! check says which it follows. Findings on third-party hosts are listed
//! apart and do not count toward the grade.

use crate::cache::human_secs;
use crate::discover::{scan_html, Kind};
use crate::load::{Entry, Load};
use crate::page::{bytes, millis};
use std::fmt::Write as _;
use std::io::Write as _;

/// Format name of the JSON output.
pub const FORMAT: &str = "redline.audit";
/// Version of the JSON output.
pub const VERSION: u32 = 1;

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
    /// False when it could not be checked (then no grade).
    pub applicable: bool,
    /// 0–100.
    pub score: u32,
    /// A–F (`-` when not applicable).
    pub grade: String,
    /// The worst severity among the site's own findings.
    pub severity: Severity,
    /// One line.
    pub summary: String,
    /// The convention the thresholds follow.
    pub threshold: &'static str,
    /// Findings on the page's own site.
    pub findings: Vec<Finding>,
    /// Findings on third-party hosts (not graded; the user may not control them).
    pub third_party: Vec<Finding>,
    /// How to fix it, when there is something to fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
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
    /// Overall grade A–F: the mean score of the applicable checks.
    pub grade: String,
    /// Overall score 0–100.
    pub score: u32,
    /// The worst severity of the site's own findings.
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

/// A–F from 0–100 (90 A, 80 B, 70 C, 60 D, 50 E, below F).
pub fn grade(score: u32) -> String {
    match score {
        90.. => "A",
        80..=89 => "B",
        70..=79 => "C",
        60..=69 => "D",
        50..=59 => "E",
        _ => "F",
    }
    .to_string()
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

fn gzip_size(b: &[u8]) -> u64 {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    let _ = e.write_all(b);
    e.finish().map(|v| v.len() as u64).unwrap_or(b.len() as u64)
}

/// Size after removing comments and collapsing whitespace (outside `<pre>`,
/// `<textarea>`, `<script>`, `<style>`): what minifying HTML would give, roughly.
pub fn minified_html_len(html: &[u8]) -> usize {
    let mut n = 0usize;
    let mut i = 0;
    let mut ws = false;
    let mut raw: Option<&'static [u8]> = None;
    while i < html.len() {
        if let Some(end) = raw {
            if html[i..].len() >= end.len() && html[i..i + end.len()].eq_ignore_ascii_case(end) {
                raw = None;
            } else {
                n += 1;
                i += 1;
                continue;
            }
        }
        if html[i..].starts_with(b"<!--") && !html[i..].starts_with(b"<!--[if") {
            match html[i + 4..].windows(3).position(|w| w == b"-->") {
                Some(p) => i += 4 + p + 3,
                None => i = html.len(),
            }
            continue;
        }
        for (open, close) in [
            (&b"<pre"[..], &b"</pre"[..]),
            (b"<textarea", b"</textarea"),
            (b"<script", b"</script"),
            (b"<style", b"</style"),
        ] {
            if html[i..].len() >= open.len() && html[i..i + open.len()].eq_ignore_ascii_case(open) {
                raw = Some(close);
            }
        }
        let b = html[i];
        if b.is_ascii_whitespace() {
            if !ws {
                n += 1;
            }
            ws = true;
        } else {
            ws = false;
            n += 1;
        }
        i += 1;
    }
    n
}

/// Size after removing comments and needless whitespace of CSS or JS (a
/// conservative estimate: strings are kept, whitespace runs become one byte or none).
pub fn minified_code_len(src: &[u8], css: bool) -> usize {
    let mut n = 0usize;
    let mut i = 0;
    let mut pending_ws = false;
    let mut last: u8 = b';';
    let punct = |b: u8| b"{}();,:>+~=<[]!&|?*".contains(&b) || (css && b == b'/');
    while i < src.len() {
        let b = src[i];
        if src[i..].starts_with(b"/*") {
            i = src[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(src.len(), |p| i + 2 + p + 2);
            pending_ws = true;
            continue;
        }
        if !css
            && src[i..].starts_with(b"//")
            && (i == 0
                || src[i - 1] == b'\n'
                || src[i - 1] == b' '
                || src[i - 1] == b'\t'
                || src[i - 1] == b';')
        {
            i = src[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(src.len(), |p| i + p);
            pending_ws = true;
            continue;
        }
        if b == b'"' || b == b'\'' || (!css && b == b'`') {
            if pending_ws && !punct(last) {
                n += 1;
            }
            pending_ws = false;
            let mut j = i + 1;
            while j < src.len() && src[j] != b {
                if src[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            let end = (j + 1).min(src.len());
            n += end - i;
            last = b;
            i = end;
            continue;
        }
        if b.is_ascii_whitespace() {
            pending_ws = true;
            i += 1;
            continue;
        }
        if pending_ws && !punct(last) && !punct(b) {
            n += 1;
        }
        pending_ws = false;
        n += 1;
        last = b;
        i += 1;
    }
    n
}

struct Ctx<'a> {
    first: &'a Load,
    repeat: Option<&'a Load>,
    https: bool,
    alpn: &'a [crate::http::AlpnProbe],
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
    let severity = own.iter().map(|f| f.severity).max().unwrap_or(Severity::Ok);
    let needs_fix = severity >= Severity::Warning;
    Check {
        id,
        title,
        applicable: score.is_some(),
        score: score.unwrap_or(0),
        grade: score.map_or("-".to_string(), grade),
        severity,
        summary,
        threshold,
        findings: own,
        third_party: third,
        fix: needs_fix.then_some(fix),
    }
}

/// Audits a page loaded by [`crate::page::run`]: its first view, its repeat
/// view and the ALPN probes of its https origins.
pub fn audit_page(r: &crate::page::PageReport) -> Audit {
    let first = &r.views[0];
    let repeat = r.views.iter().find(|l| l.view == crate::load::View::Repeat);
    let mut a = audit(&r.url, first, repeat, r.summary.clone(), &r.alpn);
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

/// Audits a page from its first view, its repeat view when loaded, and the
/// ALPN probes of its https origins.
pub fn audit(
    url: &str,
    first: &Load,
    repeat: Option<&Load>,
    views: Vec<crate::page::ViewSummary>,
    alpn: &[crate::http::AlpnProbe],
) -> Audit {
    let cx = Ctx {
        first,
        repeat,
        https: url.starts_with("https:"),
        alpn,
    };
    let checks = vec![
        keep_alive(&cx),
        http2(&cx),
        compression(&cx),
        compression_binary(&cx),
        vary(&cx),
        cache_static(&cx),
        cache_html(&cx),
        validators(&cx),
        conditional_get(&cx),
        html_weight(&cx),
        minify(&cx),
        images_scaled(&cx),
        images_format(&cx),
        redirects(&cx),
        broken(&cx),
        ttfb(&cx),
    ];
    let applicable: Vec<&Check> = checks.iter().filter(|c| c.applicable).collect();
    let score = if applicable.is_empty() {
        0
    } else {
        applicable.iter().map(|c| c.score).sum::<u32>() / applicable.len() as u32
    };
    let severity = checks
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
        checks,
        views,
        insecure: false,
        third_party: crate::page::third_parties(first),
        deferred: Vec::new(),
    }
}

fn pct(ok: usize, all: usize) -> Option<u32> {
    Some((100 * ok).checked_div(all).map_or(100, |v| v as u32))
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
    let score = if own.len() > 1 && reused == 0 {
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
        0
    } else {
        100
    };
    check(
        "keep-alive",
        "Keep-alive: connections reused",
        "every request after the first on a host should reuse a connection",
        Some(score),
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
        ),
        f,
        FIX_KEEPALIVE,
    )
}

const FIX_KEEPALIVE: Fix = Fix {
    apache: "KeepAlive On\nMaxKeepAliveRequests 100\nKeepAliveTimeout 5",
    nginx: "keepalive_timeout 65;\nkeepalive_requests 1000;",
    lighttpd: "server.max-keep-alive-requests = 100\nserver.max-keep-alive-idle = 5",
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
        Fix {
            apache: "# a2enmod http2 (mod_http2; with the event or worker MPM, not prefork)\nProtocols h2 http/1.1",
            nginx: "# nginx 1.25.1 and newer:\nlisten 443 ssl;\nhttp2 on;\n# older nginx:\nlisten 443 ssl http2;",
            lighttpd: "# lighttpd 1.4.56 and newer (on by default since 1.4.59)\nserver.feature-flags += (\"server.h2proto\" => \"enable\")",
        },
    )
}

const FIX_GZIP: Fix = Fix {
    apache: "# mod_deflate (sets Vary: Accept-Encoding itself)\nAddOutputFilterByType DEFLATE text/html text/plain text/css text/xml application/javascript application/json image/svg+xml",
    nginx: "gzip on;\ngzip_vary on;\ngzip_min_length 1024;\ngzip_types text/plain text/css text/xml application/javascript application/json image/svg+xml;",
    lighttpd: "server.modules += ( \"mod_deflate\" )\ndeflate.allowed-encodings = ( \"br\", \"gzip\", \"deflate\" )\ndeflate.mimetypes = ( \"text/html\", \"text/plain\", \"text/css\", \"text/xml\", \"application/javascript\", \"application/json\", \"image/svg+xml\" )",
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
        let gz = gzip_size(body);
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
        n += 1;
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
        Fix {
            apache: "SetEnvIfNoCase Request_URI \\.(?:gif|jpe?g|png|webp|woff2?|zip|gz)$ no-gzip dont-vary",
            nginx: "# list only text types in gzip_types (never image/jpeg, image/png, font/woff2)",
            lighttpd: "# list only text types in deflate.mimetypes",
        },
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
        n += 1;
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
        format!("{} of {} compressed responses carry Vary: Accept-Encoding", n - bad, n),
        f,
        Fix {
            apache: "Header append Vary Accept-Encoding   # mod_headers",
            nginx: "gzip_vary on;",
            lighttpd: "# mod_deflate adds Vary itself; for pre-compressed files:\nsetenv.add-response-header += ( \"Vary\" => \"Accept-Encoding\" )",
        },
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
        Some(pts.checked_div(n).unwrap_or(100)),
        format!("{n} static responses checked"),
        f,
        Fix {
            apache: "# mod_expires + mod_headers\nExpiresActive On\nExpiresByType text/css \"access plus 1 year\"\nExpiresByType application/javascript \"access plus 1 year\"\nExpiresByType image/png \"access plus 1 year\"\nExpiresByType image/jpeg \"access plus 1 year\"\nExpiresByType image/gif \"access plus 1 year\"\nExpiresByType font/woff2 \"access plus 1 year\"\n<FilesMatch \"\\.(css|js|png|jpe?g|gif|webp|svg|woff2?)$\">\n  Header append Cache-Control \"public\"\n</FilesMatch>",
            nginx: "location ~* \\.(css|js|png|jpe?g|gif|webp|svg|woff2?)$ {\n    expires 1y;\n    add_header Cache-Control \"public\";\n}",
            lighttpd: "server.modules += ( \"mod_expire\", \"mod_setenv\" )\n$HTTP[\"url\"] =~ \"\\.(css|js|png|jpe?g|gif|webp|svg|woff2?)$\" {\n    expire.url = ( \"\" => \"access plus 1 years\" )\n    setenv.add-response-header = ( \"Cache-Control\" => \"public\" )\n}",
        },
    )
}

fn cache_html(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut bad) = (0, 0);
    for e in cx.ok().filter(|e| is_html(e)) {
        n += 1;
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
        format!("{} of {} HTML documents revalidate within a day", n - bad, n),
        f,
        Fix {
            apache: "ExpiresByType text/html \"access plus 0 seconds\"",
            nginx: "location ~* \\.html?$ {\n    add_header Cache-Control \"no-cache\";\n}",
            lighttpd: "$HTTP[\"url\"] =~ \"\\.html?$\" {\n    setenv.add-response-header = ( \"Cache-Control\" => \"no-cache\" )\n}",
        },
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
        Fix {
            apache: "FileETag MTime Size\n# dynamic pages (CGI, PHP) must send ETag or Last-Modified themselves",
            nginx: "etag on;   # the default for static files; proxied apps must send their own",
            lighttpd: "static-file.etags = \"enable\"\netag.use-mtime = \"enable\"\netag.use-size = \"enable\"\netag.use-inode = \"disable\"",
        },
    )
}

fn conditional_get(cx: &Ctx) -> Check {
    let Some(rep) = cx.repeat else {
        return check(
            "conditional-get",
            "Conditional GET answered with 304",
            "a request with If-None-Match/If-Modified-Since should get 304",
            None,
            "not checked (no repeat view)".into(),
            Vec::new(),
            FIX_304,
        );
    };
    let mut f = Vec::new();
    let (mut n, mut ok, mut waste) = (0, 0, 0u64);
    for e in rep
        .entries
        .iter()
        .filter(|e| e.conditional && !e.from_cache)
    {
        let got304 = e.status == Some(304);
        if !e.third_party {
            n += 1;
            ok += usize::from(got304);
        }
        if !got304 {
            if let Some(s) = e.status {
                if s == 200 {
                    if !e.third_party {
                        waste += e.body_wire_bytes;
                    }
                    let (t, mut fi) = finding(
                        Severity::Error,
                        e,
                        format!(
                            "sent {} and got {s} with the whole body again",
                            [
                                e.etag.as_ref().map(|_| "If-None-Match"),
                                e.last_modified.as_ref().map(|_| "If-Modified-Since")
                            ]
                            .into_iter()
                            .flatten()
                            .collect::<Vec<_>>()
                            .join(" and ")
                        ),
                    );
                    fi.saving_bytes = Some(e.body_wire_bytes);
                    f.push((t, fi));
                }
            }
        }
    }
    check(
        "conditional-get",
        "Conditional GET answered with 304",
        "a request with If-None-Match/If-Modified-Since should get 304 (checked by sending them)",
        pct(ok, n),
        if waste > 0 {
            format!(
                "{ok} of {n} revalidations got 304; {} sent again for nothing",
                bytes(waste)
            )
        } else {
            format!("{ok} of {n} revalidations got 304")
        },
        f,
        FIX_304,
    )
}

const FIX_304: Fix = Fix {
    apache: "# static files get 304 by default; CGI/PHP must compare If-None-Match and If-Modified-Since\n# with their ETag/Last-Modified and answer 304 themselves\nFileETag MTime Size",
    nginx: "etag on;\nif_modified_since exact;",
    lighttpd: "static-file.etags = \"enable\"\netag.use-mtime = \"enable\"",
};

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
        n += 1;
        let min = minified_html_len(body) as u64;
        let save = (body.len() as u64).saturating_sub(min);
        let mut flagged = false;
        if save > MINIFY_MIN_BYTES && save * 10 > body.len() as u64 {
            flagged = true;
            let (t, mut fi) = finding(
                Severity::Warning,
                e,
                format!(
                    "{} of HTML; removing comments and whitespace would save {} ({:.0} %)",
                    bytes(body.len() as u64),
                    bytes(save),
                    100.0 * save as f64 / body.len() as f64
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
        "a finding above 2 KB and 10 % saved; inline style and script above 10 KB",
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
        let save = (body.len() as u64).saturating_sub(minified_code_len(body, css) as u64);
        let min_pct = if css { 5 } else { 10 };
        if save > MINIFY_MIN_BYTES && save * 100 > body.len() as u64 * min_pct {
            if !e.third_party {
                bad += 1;
            }
            let (t, mut fi) = finding(
                Severity::Warning,
                e,
                format!(
                    "{} {}: minifying would save about {} ({:.0} %)",
                    bytes(body.len() as u64),
                    if css { "CSS" } else { "JavaScript" },
                    bytes(save),
                    100.0 * save as f64 / body.len() as f64
                ),
            );
            fi.saving_bytes = Some(save);
            f.push((t, fi));
        }
    }
    check(
        "minify",
        "Minified CSS and JavaScript",
        "a finding above 2 KB and 5 % (CSS) / 10 % (JS) saved (Lighthouse)",
        pct(n - bad, n),
        format!("{} of {} stylesheets and scripts minified", n - bad, n),
        f,
        FIX_BUILD,
    )
}

const FIX_IMAGES: Fix = Fix {
    apache: "# not a server setting: resize images to the size shown (or offer srcset) and serve photographs as JPEG/WebP",
    nginx: "# not a server setting: resize images to the size shown (or offer srcset) and serve photographs as JPEG/WebP",
    lighttpd: "# not a server setting: resize images to the size shown (or offer srcset) and serve photographs as JPEG/WebP",
};

fn images_scaled(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut bad) = (0, 0);
    for e in cx.ok() {
        let (Some((iw, ih)), Some((w, h))) = (e.intrinsic, e.html_size) else {
            continue;
        };
        if iw == 0 || ih == 0 {
            continue;
        }
        // A missing dimension scales with the other (aspect ratio kept).
        let (dw, dh) = match (w, h) {
            (Some(w), Some(h)) => (w, h),
            (Some(w), None) => (w, (u64::from(ih) * u64::from(w) / u64::from(iw)) as u32),
            (None, Some(h)) => ((u64::from(iw) * u64::from(h) / u64::from(ih)) as u32, h),
            (None, None) => continue,
        };
        if !e.third_party {
            n += 1;
        }
        if iw > 2 * dw.max(1) || ih > 2 * dh.max(1) {
            let shown = (u64::from(dw) * u64::from(dh)) as f64;
            let real = (u64::from(iw) * u64::from(ih)) as f64;
            let waste = (e.decoded_bytes as f64 * (1.0 - (shown / real).min(1.0))) as u64;
            if waste > IMAGE_MIN_WASTE {
                if !e.third_party {
                    bad += 1;
                }
                let (t, mut fi) = finding(
                    Severity::Warning,
                    e,
                    format!(
                        "{iw}×{ih} image shown at {dw}×{dh} ({:.1}× too large); about {} wasted",
                        (iw as f64 / dw.max(1) as f64).max(ih as f64 / dh.max(1) as f64),
                        bytes(waste)
                    ),
                );
                fi.saving_bytes = Some(waste);
                f.push((t, fi));
            }
        }
    }
    check(
        "images-scaled",
        "Images served at the size shown",
        "a finding when scaled down more than 2× and over 4 KB wasted (Lighthouse)",
        pct(n - bad, n),
        format!(
            "{} of {} images with a size in the HTML are served at about that size",
            n - bad,
            n
        ),
        f,
        FIX_IMAGES,
    )
}

fn images_format(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut bad) = (0, 0);
    for e in cx.ok().filter(|e| e.content_type == "image/png") {
        let (Some((w, h)), Some(body)) = (e.intrinsic, &e.body) else {
            continue;
        };
        if !e.third_party {
            n += 1;
        }
        // IHDR colour type 2 (RGB) or 6 (RGBA), many bytes per pixel, large.
        let truecolor = body.len() > 25 && matches!(body[25], 2 | 6);
        let px = u64::from(w) * u64::from(h);
        let jpeg_est = px / 4; // ~2 bits per pixel: a JPEG photograph at quality ~80
        if truecolor
            && px >= 40_000
            && e.decoded_bytes > px
            && e.decoded_bytes > jpeg_est + IMAGE_MIN_WASTE
        {
            if !e.third_party {
                bad += 1;
            }
            let save = e.decoded_bytes - jpeg_est;
            let (t, mut fi) = finding(
                Severity::Warning,
                e,
                format!("{w}×{h} true-colour PNG of {} ({:.1} bytes per pixel): likely a photograph; as JPEG about {}", bytes(e.decoded_bytes), e.decoded_bytes as f64 / px as f64, bytes(jpeg_est)),
            );
            fi.saving_bytes = Some(save);
            f.push((t, fi));
        }
    }
    check(
        "images-format",
        "Photographs not served as PNG",
        "a true-colour PNG over 1 byte per pixel is likely a photograph; a finding above 4 KB saved",
        pct(n - bad, n),
        format!("{} of {} PNG images look like graphics, not photographs", n - bad, n),
        f,
        FIX_IMAGES,
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
        Fix {
            apache: "# link to the final URL; one hop at most:\nRedirect permanent /old https://example.org/new",
            nginx: "# link to the final URL; one hop at most:\nreturn 301 https://example.org$request_uri;",
            lighttpd: "# link to the final URL; one hop at most:\nurl.redirect = ( \"^/old$\" => \"/new\" )",
        },
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
        Fix {
            apache: "# fix or remove the references (see the error log)",
            nginx: "# fix or remove the references (see the error log)",
            lighttpd: "# fix or remove the references (see the error log)",
        },
    )
}

fn ttfb(cx: &Ctx) -> Check {
    // The document that finally answered 200 (after redirects).
    let doc = cx
        .first
        .entries
        .iter()
        .find(|e| e.kind == Kind::Document && e.status.is_some_and(|s| s < 300))
        .or_else(|| cx.first.entries.first());
    let mut f = Vec::new();
    let score = match doc {
        Some(e) if e.status.is_some() => {
            let w = e.phases.waiting_ms;
            let (sev, score) = if w <= TTFB_GOOD_MS {
                (Severity::Ok, 100)
            } else if w <= TTFB_BAD_MS {
                (Severity::Info, 80)
            } else {
                (Severity::Warning, 40)
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
        .unwrap_or_else(|| "the page did not load".into());
    check(
        "ttfb",
        "Time to first byte",
        "good under 100 ms, flagged over 600 ms (Lighthouse)",
        score,
        summary,
        f,
        Fix {
            apache: "# cache generated pages (mod_cache, a PHP opcode cache), HostnameLookups Off, fewer modules",
            nginx: "# cache generated pages (proxy_cache / fastcgi_cache), keep upstream connections alive",
            lighttpd: "# cache generated pages; keep FastCGI back ends warm (fastcgi.server min-procs)",
        },
    )
}

/// Renders the audit as text.
pub fn render_text(a: &Audit) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nAudit of {}: grade {} ({}/100)\n",
        a.url, a.grade, a.score
    );
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
    for c in &a.checks {
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
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(origin: &str, third_party: bool, alpn: Option<&str>) -> crate::http::AlpnProbe {
        crate::http::AlpnProbe {
            origin: origin.into(),
            third_party,
            offered: vec!["h2".into(), "http/1.1".into()],
            alpn: alpn.map(str::to_string),
            h2: alpn == Some("h2"),
            tls_version: Some("TLSv1.3".into()),
            error: None,
            probed: false,
        }
    }

    #[test]
    fn http2_grades_own_origins_and_lists_third_parties_apart() {
        let empty = Load {
            view: crate::load::View::First,
            entries: Vec::new(),
            elapsed_ms: 0.0,
            requests: 0,
            from_cache: 0,
            not_modified: 0,
            wire_bytes: 0,
            decoded_bytes: 0,
            connections: 0,
            conns: Vec::new(),
            hosts: Vec::new(),
            errors: 0,
            truncated: false,
            discovery: Default::default(),
        };
        let run = |url: &str, p: &[crate::http::AlpnProbe]| {
            let a = audit(url, &empty, None, Vec::new(), p);
            a.checks.into_iter().find(|c| c.id == "http2").unwrap()
        };
        let c = run("http://a.test/", &[]);
        assert!(!c.applicable);
        let c = run(
            "https://a.test/",
            &[
                probe("https://a.test:443", false, Some("h2")),
                probe("https://cdn.other:443", true, Some("http/1.1")),
            ],
        );
        assert_eq!((c.grade.as_str(), c.severity), ("A", Severity::Ok));
        assert!(c.findings.is_empty());
        assert_eq!(c.third_party.len(), 1);
        assert!(c.fix.is_none());
        let c = run(
            "https://a.test/",
            &[
                probe("https://a.test:443", false, None),
                probe("https://img.a.test:443", false, Some("h2")),
            ],
        );
        assert_eq!((c.score, c.severity), (50, Severity::Warning));
        assert!(c.findings[0].evidence.contains("ignored ALPN"));
        assert!(c.fix.unwrap().nginx.contains("http2 on;"));
    }

    #[test]
    fn grades() {
        assert_eq!(grade(100), "A");
        assert_eq!(grade(85), "B");
        assert_eq!(grade(50), "E");
        assert_eq!(grade(10), "F");
    }

    #[test]
    fn minify_estimates() {
        let html = b"<html>\n\n    <!-- a comment -->\n    <body>   hi   </body>\n<pre>  keep  </pre></html>";
        let m = minified_html_len(html);
        assert!(m < html.len() - 20, "{m}");
        let css = b"/* c */\nbody {\n    color : red ;\n}\n";
        assert_eq!(minified_code_len(css, true), "body{color:red;}".len());
        let js = b"// c\nvar a = \"x  y\";\n";
        assert_eq!(minified_code_len(js, false), "var a=\"x  y\";".len());
    }
}
