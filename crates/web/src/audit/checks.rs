//! The audit's checks of the server, one function each (keep-alive, HTTP/2,
//! compression, Vary, caching, validators, weight, minification, redirects,
//! broken references, time to first byte), judged from the loaded entries.

use super::*;

pub(super) fn page_check(cx: &Ctx) -> Check {
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

pub(super) fn pct(ok: usize, all: usize) -> Option<u32> {
    (100 * ok).checked_div(all).map(|v| v as u32)
}
pub(super) fn keep_alive(cx: &Ctx) -> Check {
    // HTTP/2 and HTTP/3 multiplex every request on one connection:
    // keep-alive is an HTTP/1.1 matter, so only HTTP/1.1 fetches are judged.
    let (h2, own): (Vec<&Entry>, Vec<&Entry>) = cx
        .fetched()
        .filter(|e| !e.third_party)
        .partition(|e| matches!(e.protocol.as_deref(), Some("h2" | "h3")));
    let h2_conns: std::collections::HashSet<u64> = h2.iter().filter_map(|e| e.conn).collect();
    let h3 = h2.iter().any(|e| e.protocol.as_deref() == Some("h3"));
    let h2_note = format!(
        "{} request{} over {} multiplexed on {} connection{}",
        h2.len(),
        if h2.len() == 1 { "" } else { "s" },
        if h3 { "HTTP/3" } else { "HTTP/2" },
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
                "not applicable (moot on {}): {h2_note}; keep-alive matters only for HTTP/1.1",
                if h3 { "HTTP/3" } else { "HTTP/2" }
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
                link_ms: None,
                found_by: None,
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

pub(super) const FIX_KEEPALIVE: Fix = Fix {
    apache: "KeepAlive On\nMaxKeepAliveRequests 100\nKeepAliveTimeout 5",
    nginx: "keepalive_timeout 65;\nkeepalive_requests 1000;",
    lighttpd: "server.max-keep-alive-requests := 100\nserver.max-keep-alive-idle := 5",
};

pub(super) fn http2(cx: &Ctx) -> Check {
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
                link_ms: None,
                found_by: None,
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

pub(super) const FIX_GZIP: Fix = Fix {
    apache: "# mod_deflate (sets Vary: Accept-Encoding itself)\nAddOutputFilterByType DEFLATE text/html text/plain text/css text/xml application/javascript application/json image/svg+xml",
    nginx: "gzip on;\ngzip_vary on;\ngzip_min_length 1024;\ngzip_types text/plain text/css text/xml application/javascript application/json image/svg+xml;",
    lighttpd: "server.modules += ( \"mod_deflate\" )\ndeflate.allowed-encodings := ( \"br\", \"gzip\", \"deflate\" )\ndeflate.mimetypes := ( \"text/html\", \"text/plain\", \"text/css\", \"text/xml\", \"application/javascript\", \"application/json\", \"image/svg+xml\" )",
};

pub(super) fn compression(cx: &Ctx) -> Check {
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

pub(super) fn compression_binary(cx: &Ctx) -> Check {
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

pub(super) fn vary(cx: &Ctx) -> Check {
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

/// The chance a repeat visitor still has a response cached `secs` after it
/// was stored: Lighthouse's uses-long-cache-ttl model (the HTTP Archive's
/// deciles of the age of resources in browser caches, in hours: 0, 0.2, 1,
/// 3, 8, 12, 24, 48, 72, 168, 8760), linear between deciles, 1 past a year.
pub fn cache_hit_probability(secs: u64) -> f64 {
    const DECILES_H: [f64; 11] = [
        0.0, 0.2, 1.0, 3.0, 8.0, 12.0, 24.0, 48.0, 72.0, 168.0, 8760.0,
    ];
    let h = secs as f64 / 3600.0;
    let Some(up) = DECILES_H.iter().position(|d| *d >= h) else {
        return 1.0;
    };
    if up == 0 {
        return 0.0;
    }
    let (lo_v, up_v) = (DECILES_H[up - 1], DECILES_H[up]);
    let (lo_p, up_p) = ((up - 1) as f64 / 10.0, up as f64 / 10.0);
    lo_p + (h - lo_v) * (up_p - lo_p) / (up_v - lo_v)
}

pub(super) fn cache_static(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut pts, mut no_public) = (0u32, 0u32, 0u32);
    let mut repeat_bytes = 0u64;
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
            // What a repeat visitor downloads again that a year's caching
            // would spare (Lighthouse's estimate, on the bytes on the wire).
            let again = ((1.0 - cache_hit_probability(life)) * e.wire_bytes as f64).round() as u64;
            if !e.third_party {
                repeat_bytes += again;
            }
            let (t, mut fi) = finding(
                sev,
                e,
                format!("{seen}; a repeat visitor downloads {} again", bytes(again)),
            );
            fi.saving_bytes = Some(again);
            f.push((t, fi));
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
                link_ms: None,
                found_by: None,
            },
        ));
    }
    check(
        "cache-static",
        "Static assets cacheable for a long time",
        "under 7 days graded down, under 1 hour failed (WebPageTest); Lighthouse expects much longer (up to a year)",
        pts.checked_div(n),
        format!(
            "{n} static responses checked; a repeat visitor would download {} less with a year's caching",
            bytes(repeat_bytes)
        ),
        f,
        FIX_CACHE_STATIC,
    )
}

pub(super) fn cache_html(cx: &Ctx) -> Check {
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

pub(super) fn validators(cx: &Ctx) -> Check {
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
pub(super) fn wire_figures(e: &Entry, body: &[u8], small: &[u8]) -> (u64, u64) {
    let coding = e.content_encoding.as_deref();
    minify::wire_saving(body, small, coding, e.body_wire_bytes, e.decoded_bytes)
}

pub(super) fn coding_name(e: &Entry) -> String {
    match e.content_encoding.as_deref() {
        Some(c) if c != "identity" => format!("{c} as sent"),
        _ => "uncompressed as sent".to_string(),
    }
}

pub(super) const FIX_BUILD: Fix = Fix {
    apache: "# not a server setting: minify at build time (html-minifier, csso, terser) and serve the result",
    nginx: "# not a server setting: minify at build time (html-minifier, csso, terser) and serve the result",
    lighttpd: "# not a server setting: minify at build time (html-minifier, csso, terser) and serve the result",
};

pub(super) fn html_weight(cx: &Ctx) -> Check {
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

pub(super) fn minify(cx: &Ctx) -> Check {
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
        "a finding above 2 KB and 5 % (CSS) / 10 % (JS) saved on the wire, both versions compressed as the server does; CSS minified by Lighthouse's count (comments and all whitespace outside strings)",
        pct(n - bad, n),
        format!("{} of {} stylesheets and scripts minified", n - bad, n),
        f,
        FIX_BUILD,
    )
}

pub(super) fn redirects(cx: &Ctx) -> Check {
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

pub(super) fn broken(cx: &Ctx) -> Check {
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
            if e.after_load {
                // Chromium's own /favicon.ico of a page that declares no
                // icon: asked for after the load event, not by the page.
                f.push(finding(
                    Severity::Info,
                    e,
                    format!("{why}: the browser's own favicon request (add the file, or declare an icon with <link rel=icon>)"),
                ));
                continue;
            }
            if !e.third_party {
                own_bad += 1;
            }
            f.push(finding(Severity::Error, e, why));
        }
    }
    let n = all
        .iter()
        .filter(|e| !e.third_party && !e.after_load)
        .count();
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

pub(super) fn ttfb(cx: &Ctx) -> Check {
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
