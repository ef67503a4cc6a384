//! The page loader and the audit against the fixture site on 127.0.0.1:0,
//! with gzip, validators, caching and keep-alive turned on and off.

mod common;

use common::{start, Conf, FIRST_VIEW};
use redline_web::audit::{audit_page, Audit, Severity};
use redline_web::load::{Load, LoadOpts, View};
use redline_web::page::{self, PageReport};
use std::collections::BTreeSet;

fn run(site: &common::Site) -> PageReport {
    let url = url::Url::parse(&site.url("/")).unwrap();
    page::run(&url, 1, &LoadOpts::default(), &mut |_| {})
}

fn audit_of(r: &PageReport) -> Audit {
    audit_page(r)
}

fn paths(l: &Load, pred: impl Fn(&redline_web::load::Entry) -> bool) -> BTreeSet<String> {
    l.entries
        .iter()
        .filter(|e| pred(e))
        .map(|e| url::Url::parse(&e.url).unwrap().path().to_string())
        .collect()
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn flagged(a: &Audit, id: &str) -> BTreeSet<String> {
    let c = a
        .checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id}"));
    c.findings
        .iter()
        .filter(|f| f.severity >= Severity::Warning)
        .filter_map(|f| f.url.as_deref())
        .map(|u| url::Url::parse(u).unwrap().path().to_string())
        .collect()
}

fn severity(a: &Audit, id: &str) -> Severity {
    a.checks.iter().find(|c| c.id == id).unwrap().severity
}

#[test]
fn first_view_fetches_everything_the_page_embeds() {
    let site = start(Conf::all_on());
    let r = run(&site);
    let first = &r.views[0];
    assert_eq!(first.view, View::First);
    assert_eq!(paths(first, |_| true), set(FIRST_VIEW));
    assert_eq!(first.requests, FIRST_VIEW.len());
    // The second-level iframe is fetched (as Chromium does); the 2x
    // candidates are not (DPR 1).
    let seen: BTreeSet<String> = site.seen().iter().map(|s| s.path.clone()).collect();
    assert!(
        seen.contains("/nested.html")
            && !seen.contains("/img/set-2x.gif")
            && !seen.contains("/img/photo-2x.jpg")
    );
    // Keep-alive: at most 6 connections to one host, fewer than the requests.
    assert!(
        first.connections >= 1 && first.connections <= 6,
        "{}",
        first.connections
    );
    let big = first
        .entries
        .iter()
        .find(|e| e.url.ends_with("/img/big.png"))
        .unwrap();
    assert_eq!(big.intrinsic, Some((400, 400)));
    assert_eq!(big.html_size, Some((Some(50), Some(50))));
    let css = first
        .entries
        .iter()
        .find(|e| e.url.ends_with("/css/style.css"))
        .unwrap();
    assert_eq!(css.content_encoding.as_deref(), Some("gzip"));
    assert!(css.decoded_bytes > css.body_wire_bytes);
    assert_eq!(
        css.decoded_bytes,
        std::fs::metadata(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/site/style.css"
        ))
        .unwrap()
        .len()
    );
    assert_eq!(first.errors, 1, "only the missing image fails");
}

#[test]
fn validators_on_give_304s_and_fresh_resources_are_not_requested() {
    let site = start(Conf::all_on());
    let r = run(&site);
    let (repeat, cached) = (&r.views[1], &r.views[2]);
    // Revalidate view: every stored response revalidated; all answer 304.
    let ok: Vec<&str> = FIRST_VIEW
        .iter()
        .copied()
        .filter(|p| *p != "/img/missing.png")
        .collect();
    assert_eq!(paths(repeat, |e| e.status == Some(304)), set(&ok));
    assert_eq!(repeat.not_modified, ok.len());
    // Cached view: static files are fresh for a year; only the HTML (no-cache)
    // and the 404 (not stored... it has no validators) are requested.
    assert_eq!(
        paths(cached, |e| e.from_cache),
        set(&ok
            .iter()
            .copied()
            .filter(|p| !p.ends_with(".html") && *p != "/")
            .collect::<Vec<_>>())
    );
    assert_eq!(
        paths(cached, |e| !e.from_cache),
        set(&["/", "/frame.html", "/nested.html", "/img/missing.png"])
    );
    let a = audit_of(&r);
    for id in [
        "compression",
        "vary",
        "validators",
        "conditional-get",
        "cache-static",
        "cache-html",
        "keep-alive",
        "compression-binary",
    ] {
        assert_eq!(
            severity(&a, id),
            Severity::Ok,
            "{id}: {:?}",
            a.checks.iter().find(|c| c.id == id)
        );
    }
}

#[test]
fn everything_off_is_found_and_nothing_is_revalidated() {
    let site = start(Conf::all_off());
    let r = run(&site);
    let (repeat, cached) = (&r.views[1], &r.views[2]);
    // No validators: the revalidate view sends no conditional request and gets 200s.
    assert_eq!(repeat.not_modified, 0);
    assert!(repeat.entries.iter().all(|e| !e.conditional));
    assert!(site
        .seen()
        .iter()
        .all(|s| !s.if_none_match && !s.if_modified_since));
    // Nothing fresh: the cached view requests everything again.
    assert_eq!(cached.from_cache, 0);
    assert_eq!(paths(cached, |_| true), set(FIRST_VIEW));
    let a = audit_of(&r);
    // Exactly the text files worth compressing.
    assert_eq!(
        flagged(&a, "compression"),
        set(&["/", "/css/style.css", "/js/app.js"])
    );
    // Every 200 response lacks validators.
    let ok: Vec<&str> = FIRST_VIEW
        .iter()
        .copied()
        .filter(|p| *p != "/img/missing.png")
        .collect();
    assert_eq!(flagged(&a, "validators"), set(&ok));
    // Every static asset fails the cache check (no lifetime at all: error).
    assert_eq!(
        flagged(&a, "cache-static"),
        set(&[
            "/css/style.css",
            "/css/more.css",
            "/js/app.js",
            "/favicon.gif",
            "/img/big.png",
            "/img/small.gif",
            "/img/photo.jpg",
            "/img/set-1x.gif",
            "/img/bg.gif",
            "/fonts/f.woff2",
            "/img/inframe.gif"
        ])
    );
    assert_eq!(severity(&a, "cache-static"), Severity::Error);
    // Nothing conditional could be sent: the revalidate view got every body
    // again, and the conditional-GET check names the cause (no validator).
    assert_eq!(severity(&a, "conditional-get"), Severity::Warning);
    let cg = a.checks.iter().find(|c| c.id == "conditional-get").unwrap();
    assert!(cg
        .findings
        .iter()
        .all(|f| f.evidence.contains("neither ETag nor Last-Modified")));
    // Uncompressed HTML: its whitespace and comments cost bytes on the wire.
    assert_eq!(flagged(&a, "html-weight"), set(&["/"]));
    assert_eq!(
        flagged(&a, "minify"),
        set(&["/css/style.css", "/js/app.js"])
    );
    assert_eq!(severity(&a, "keep-alive"), Severity::Ok);
    assert!(a
        .checks
        .iter()
        .find(|c| c.id == "compression")
        .unwrap()
        .fix
        .is_some());
    assert!(a.grade != "A");
}

#[test]
fn validators_ignored_by_the_server_fail_the_conditional_get_check() {
    let mut c = Conf::all_on();
    c.honour_conditional = false;
    let site = start(c);
    let r = run(&site);
    assert_eq!(r.views[1].not_modified, 0);
    let a = audit_of(&r);
    assert_eq!(severity(&a, "validators"), Severity::Ok);
    assert_eq!(severity(&a, "conditional-get"), Severity::Error);
    assert!(flagged(&a, "conditional-get").contains("/css/style.css"));
}

#[test]
fn only_the_fresh_resources_are_skipped() {
    let mut c = Conf::all_on();
    c.static_cache = Some("max-age=0".into());
    c.image_cache = Some("max-age=600".into());
    c.last_modified = false; // no heuristic freshness
    let site = start(c);
    let r = run(&site);
    let cached = &r.views[2];
    assert_eq!(
        paths(cached, |e| e.from_cache),
        set(&[
            "/favicon.gif",
            "/img/big.png",
            "/img/small.gif",
            "/img/photo.jpg",
            "/img/set-1x.gif",
            "/img/bg.gif",
            "/img/inframe.gif"
        ])
    );
    // Stale ones are revalidated (ETag) and answer 304.
    assert_eq!(
        paths(cached, |e| e.status == Some(304) && !e.from_cache),
        set(&[
            "/",
            "/frame.html",
            "/nested.html",
            "/css/style.css",
            "/css/more.css",
            "/js/app.js",
            "/fonts/f.woff2"
        ])
    );
    // Images cached for 10 minutes: under 1 hour fails; max-age=0 fails too.
    let a = audit_of(&r);
    assert_eq!(severity(&a, "cache-static"), Severity::Error);
}

#[test]
fn html_level_findings() {
    let site = start(Conf::all_on());
    let a = audit_of(&run(&site));
    assert_eq!(flagged(&a, "images-scaled"), set(&["/img/big.png"]));
    assert_eq!(flagged(&a, "broken"), set(&["/img/missing.png"]));
    // Gzipped HTML: its whitespace is nearly free on the wire (the finding
    // is with compression off, in everything_off_is_found…).
    assert_eq!(flagged(&a, "html-weight"), set(&[]));
    // The same for the stylesheet and script: under 2 KB saved once gzipped.
    assert_eq!(flagged(&a, "minify"), set(&[]));
    assert_eq!(flagged(&a, "images-format"), set(&[]));
    let big = a.checks.iter().find(|c| c.id == "images-scaled").unwrap();
    assert!(big.findings[0].saving_bytes.unwrap() > 4096);
    // JSON is well-formed and names the format.
    let j = serde_json::to_value(&a).unwrap();
    assert_eq!(j["format"], "redline.audit");
    assert!(j["checks"].as_array().unwrap().len() >= 15);
}

#[test]
fn no_keepalive_is_found() {
    let mut c = Conf::all_on();
    c.keepalive = false;
    let site = start(c);
    let r = run(&site);
    assert_eq!(r.views[0].connections as usize, FIRST_VIEW.len());
    let a = audit_of(&r);
    assert_eq!(severity(&a, "keep-alive"), Severity::Error);
}

#[test]
fn repeats_report_medians() {
    let site = start(Conf::all_on());
    let url = url::Url::parse(&site.url("/index.html")).unwrap();
    let mut lines = Vec::new();
    let r = page::run(&url, 3, &LoadOpts::default(), &mut |l| {
        lines.push(l.to_string())
    });
    assert_eq!(r.runs, 3);
    assert_eq!(r.summary.len(), 3);
    assert_eq!(r.summary[0].runs_ms.len(), 3);
    assert_eq!(r.summary[0].requests, FIRST_VIEW.len());
    assert!(lines.iter().filter(|l| l.starts_with("Getting ")).count() >= 3 * FIRST_VIEW.len());
    let text = page::render_text(&r, &url);
    assert!(text.contains("Summary (medians of 3 runs)"), "{text}");
    assert!(
        text.contains("first view")
            && text.contains("revalidate view")
            && text.contains("cached view")
    );
}
