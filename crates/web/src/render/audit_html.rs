//! Self-contained HTML for `redline audit --html` and `redline page --html`:
//! the audit's overall grade, each check's grade, the findings with severity,
//! evidence and the fixes for Apache, nginx and lighttpd, and the page's
//! waterfall drawn as inline SVG (connect / TLS / waiting / transfer per
//! resource). One file that opens offline: inline CSS, nothing fetched.

use crate::audit::{Audit, Check, Finding, Severity};
use crate::load::{Entry, Load};
use crate::page::PageReport;
use redline_report::html::esc;
use std::fmt::Write as _;

const STYLE: &str = "
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#212529;max-width:1040px;margin:24px auto;padding:0 16px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dee2e6;padding-bottom:4px}h3{font-size:15px;margin:8px 0}
.sub{color:#495057;margin:0 0 16px}
table{border-collapse:collapse;margin:4px 0 12px;font-variant-numeric:tabular-nums}
th,td{padding:3px 12px 3px 0;text-align:left;vertical-align:top}
table.summary td.n{text-align:right;padding-left:24px}table.summary tbody tr:nth-child(odd){background:#f8f9fa}
figure{margin:12px 0 20px}figcaption{font-weight:600;margin-bottom:4px}
svg.chart{width:100%;height:auto;display:block}
.wf{overflow-x:auto}.wf svg.chart{min-width:820px}
table{display:block;max-width:100%;overflow-x:auto}
.grid{stroke:#e9ecef;stroke-width:1}
.tick{font-size:12px;fill:#495057}.axis{font-size:13px;fill:#212529}
.legend{display:flex;flex-wrap:wrap;gap:16px;font-size:13px;margin-top:2px}.legend span{display:inline-flex;align-items:center;gap:6px}
.warn{background:#fff4e6;border-left:4px solid #e67700;padding:8px 12px;margin:8px 0}
.note{color:#495057;font-size:13px}
.grade{display:inline-block;min-width:1.6em;text-align:center;font-weight:700;border-radius:4px;color:#fff;padding:0 4px}
.big{font-size:40px;line-height:1.2;padding:4px 14px;margin-right:12px;vertical-align:middle}
.gA{background:#2b8a3e}.gB{background:#5c940d}.gC{background:#e67700}.gD{background:#d9480f}.gE{background:#c92a2a}.gF{background:#a61e4d}.gN{background:#adb5bd}
.sev{font-size:12px;font-weight:600;text-transform:uppercase;letter-spacing:.03em}
.s-error{color:#c92a2a}.s-warning{color:#d9480f}.s-info{color:#1c5fb8}.s-ok{color:#2b8a3e}
section.check{border:1px solid #dee2e6;border-radius:6px;padding:8px 14px;margin:12px 0}
ul.findings{margin:6px 0;padding-left:20px}ul.findings li{margin:3px 0}
.url{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;word-break:break-all}
.fixes{display:flex;gap:12px;flex-wrap:wrap}.fixes div{flex:1 1 300px}
pre{background:#f8f9fa;border:1px solid #e9ecef;padding:6px 8px;margin:4px 0;font-size:12.5px;white-space:pre-wrap;word-break:break-word}
";

/// Waterfall phase colours (connect includes DNS).
const PHASES: [(&str, &str, &str); 4] = [
    ("connect", "connect (DNS + TCP)", "#1c5fb8"),
    ("tls", "TLS handshake", "#7048e8"),
    ("waiting", "waiting (TTFB)", "#e67700"),
    ("transfer", "transfer", "#2b8a3e"),
];

fn head(title: &str) -> String {
    let mut s = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(
        s,
        "<title>{}</title><style>{STYLE}</style></head><body>",
        esc(title)
    );
    let _ = writeln!(s, "<h1>{}</h1>", esc(title));
    s
}

fn tail(s: &mut String) {
    // The only script: marks the page as rendered with the counts the
    // headless-browser test reads; the page works without it.
    s.push_str("<script>(function(){var d=document.documentElement;d.setAttribute('data-findings',document.querySelectorAll('li.finding').length);d.setAttribute('data-checks',document.querySelectorAll('tr.check').length);d.setAttribute('data-na-checks',document.querySelectorAll('tr.na-check').length);d.setAttribute('data-waterfall-rows',document.querySelectorAll('g.wf-row').length);d.setAttribute('data-tls-bars',document.querySelectorAll('rect.ph-tls').length);var c=0;document.querySelectorAll('svg.chart').forEach(function(g){var w=g.viewBox.baseVal.width;g.querySelectorAll('text').forEach(function(t){var b=t.getBBox();if(b.x<-0.5||b.x+b.width>w+0.5)c++;});});d.setAttribute('data-clipped-labels',c);})();</script>\n");
    let _ = writeln!(
        s,
        "<p class=\"note\">Made by redline {}.</p></body></html>",
        env!("CARGO_PKG_VERSION")
    );
}

fn grade_badge(g: &str, big: bool) -> String {
    let class = match g {
        "A" | "B" | "C" | "D" | "E" | "F" => g,
        _ => "N",
    };
    format!(
        "<span class=\"grade g{class}{}\">{}</span>",
        if big { " big" } else { "" },
        esc(g)
    )
}

fn sev(s: Severity) -> String {
    format!("<span class=\"sev s-{0}\">{0}</span>", s.name())
}

fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else {
        format!("{v:.1} ms")
    }
}

fn by(n: u64) -> String {
    redline_report::bytes(n as f64)
}

fn views_table(r: &PageReport) -> String {
    let mut s = String::from("<table class=\"summary\"><thead><tr><th>view</th><th>time</th><th>render-critical</th><th>requests</th><th>from cache</th><th>304s</th><th>on the wire</th><th>decoded</th><th>connections</th><th>errors</th></tr></thead><tbody>\n");
    for v in &r.summary {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(v.view.name()),
            if v.failed == r.runs {
                "failed".to_string()
            } else {
                ms(v.elapsed_ms)
            },
            v.render_ms.map_or("-".to_string(), ms),
            v.requests,
            v.from_cache,
            v.not_modified,
            by(v.wire_bytes),
            by(v.decoded_bytes),
            v.connections,
            v.errors
        );
    }
    s.push_str("</tbody></table>\n<p class=\"note\">");
    for v in &r.summary {
        let _ = write!(
            s,
            "<b>{}</b>: {}. ",
            esc(v.view.name()),
            esc(v.view.describe())
        );
    }
    s.push_str("</p>\n");
    if r.views.iter().any(|l| l.budget_exhausted) {
        s.push_str("<p class=\"warn\">TRUNCATED: a view stopped at its byte budget (--max-bytes); its numbers are a floor.</p>\n");
    }
    if r.runs > 1 {
        let _ = writeln!(s, "<p class=\"note\">Medians of {} runs.</p>", r.runs);
    }
    s
}

fn finding_li(f: &Finding) -> String {
    let mut s = format!("<li class=\"finding\">{} ", sev(f.severity));
    if let Some(u) = &f.url {
        let _ = write!(s, "<span class=\"url\">{}</span>: ", esc(u));
    }
    s.push_str(&esc(&f.evidence));
    if let Some(b) = f.saving_bytes {
        let _ = write!(s, " <b>(saves {})</b>", by(b));
    }
    if let Some(m) = f.saving_ms {
        let _ = write!(s, " <b>(saves {})</b>", ms(m));
    }
    s.push_str("</li>\n");
    s
}

fn check_section(c: &Check) -> String {
    let mut s = format!(
        "<section class=\"check\" id=\"check-{}\"><h3>{} {} {}</h3>\n<p>{}</p>\n",
        esc(c.id),
        grade_badge(&c.grade, false),
        esc(c.title),
        sev(c.severity),
        esc(&c.summary)
    );
    if !c.findings.is_empty() {
        s.push_str("<ul class=\"findings\">\n");
        for f in &c.findings {
            s.push_str(&finding_li(f));
        }
        s.push_str("</ul>\n");
    }
    if !c.third_party.is_empty() {
        s.push_str("<p class=\"note\">Third-party hosts (not graded; tell their owners):</p><ul class=\"findings\">\n");
        for f in &c.third_party {
            s.push_str(&finding_li(f));
        }
        s.push_str("</ul>\n");
    }
    let _ = writeln!(s, "<p class=\"note\">Threshold: {}</p>", esc(c.threshold));
    if let Some(fix) = &c.fix {
        s.push_str("<div class=\"fixes\">");
        for (name, cfg) in [
            ("Apache", fix.apache),
            ("nginx", fix.nginx),
            ("lighttpd", fix.lighttpd),
        ] {
            // Line by line: `esc` shows a line break as `\n`, and the block
            // must be the text output's, ready to paste.
            let lines: Vec<String> = cfg.lines().map(esc).collect();
            let _ = write!(
                s,
                "<div><b>Fix ({name})</b><pre class=\"fix\">{}</pre></div>",
                lines.join("\n")
            );
        }
        s.push_str("</div>\n");
    }
    s.push_str("</section>\n");
    s
}

/// A URL as the waterfall labels it: without the page's own origin, and
/// shortened in the middle (`/assets/…/app.css`) to fit `max_w` SVG units of
/// the 12 px label font, so neither its start nor its file name is cut off.
fn short(url: &str, page: &str) -> String {
    let origin = |u: &str| {
        u.find("://")
            .and_then(|i| u[i + 3..].find('/').map(|j| u[..i + 3 + j].to_string()))
            .unwrap_or_else(|| u.to_string())
    };
    let s = if origin(url) == origin(page) {
        url[origin(url).len()..].to_string()
    } else {
        url.to_string()
    };
    fit_middle(&s, LABEL_W)
}

/// Room for a row's URL label, left of the bars (SVG units).
const LABEL_W: f64 = LM - 14.0;
/// The chart's width and its left and right margins (SVG units).
const W: f64 = 960.0;
const LM: f64 = 300.0;
const RM: f64 = 200.0;

/// A generous estimate of the width of `s` in the 12 px sans-serif label
/// font (SVG units): per-character widths above those of DejaVu Sans,
/// Liberation Sans and Segoe UI, so an estimate that fits renders inside.
pub fn text_width(s: &str) -> f64 {
    s.chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '|' | '!' | '\'' | 'I' => 4.0,
            'f' | 't' | 'r' | '/' | '(' | ')' | '[' | ']' | ' ' | '-' => 5.0,
            'm' | 'w' | 'M' | 'W' | '@' | '%' | '…' => 11.5,
            c if c.is_ascii_uppercase() => 9.0,
            c if c.is_ascii() => 7.8,
            _ => 12.0,
        })
        .sum()
}

/// `s`, or its start and end joined by `…`, whichever fits `max_w`.
pub fn fit_middle(s: &str, max_w: f64) -> String {
    if text_width(s) <= max_w {
        return s.to_string();
    }
    let chars: Vec<char> = s.chars().collect();
    // Keep a little more of the end (the file name) than of the start.
    let (mut head, mut tail) = (chars.len() * 2 / 5, chars.len() - chars.len() * 2 / 5);
    for _ in 0..chars.len() {
        let t: String = chars[..head].iter().collect::<String>()
            + "…"
            + &chars[chars.len() - tail..].iter().collect::<String>();
        if text_width(&t) <= max_w || head + tail <= 1 {
            return t;
        }
        if head * 3 >= tail * 2 && head > 0 {
            head -= 1;
        } else {
            tail -= 1;
        }
    }
    "…".into()
}

fn entry_phases(e: &Entry) -> [f64; 4] {
    let c = e.phases.dns_ms.unwrap_or(0.0) + e.phases.connect_ms.unwrap_or(0.0);
    [
        c,
        e.phases.tls_ms.unwrap_or(0.0),
        e.phases.waiting_ms,
        e.phases.transfer_ms,
    ]
}

/// One view's waterfall as an inline SVG chart: a row per resource with its
/// connect, TLS, waiting and transfer bars from the load's start.
pub fn waterfall(l: &Load, page_url: &str) -> String {
    const ROW: f64 = 18.0;
    const TOP: f64 = 8.0;
    const BOTTOM: f64 = 40.0;
    let t0 = l
        .entries
        .iter()
        .map(|e| e.start_ms)
        .fold(f64::INFINITY, f64::min);
    let t0 = if t0.is_finite() { t0 } else { 0.0 };
    let end = l
        .entries
        .iter()
        .map(|e| e.end_ms - t0)
        .fold(0.0, f64::max)
        .max(1.0);
    let (top, ticks) = ticks(end);
    let pw = W - LM - RM;
    let sx = |v: f64| LM + v / top * pw;
    let h = TOP + ROW * l.entries.len().max(1) as f64 + BOTTOM;
    let mut s = String::new();
    for t in &ticks {
        let x = sx(*t);
        let _ = write!(
            s,
            "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{:.1}\"/><text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            h - BOTTOM,
            h - BOTTOM + 16.0,
            trim(*t)
        );
    }
    for (i, e) in l.entries.iter().enumerate() {
        let y = TOP + i as f64 * ROW;
        let status = if e.from_cache {
            "cache".to_string()
        } else {
            e.status
                .map(|v| v.to_string())
                .unwrap_or_else(|| "error".into())
        };
        let _ = write!(
            s,
            "<g class=\"wf-row\"><text class=\"tick wf-url\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\"{}><title>{}</title>{}</text>",
            LM - 8.0,
            y + ROW - 5.0,
            if e.error.is_some() || e.status.is_some_and(|v| v >= 400) {
                " style=\"fill:#c92a2a\""
            } else {
                ""
            },
            esc(&match &e.error {
                Some(err) => format!("{} ({err})", e.url),
                None => e.url.clone(),
            }),
            esc(&short(&e.url, page_url))
        );
        let mut x = e.start_ms - t0;
        if e.from_cache {
            let _ = write!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#adb5bd\"><title>{}: from the cache, not requested</title></circle>",
                sx(x),
                y + ROW / 2.0,
                esc(&e.url)
            );
        } else {
            for ((key, name, color), d) in PHASES.iter().zip(entry_phases(e)) {
                if d <= 0.0 && *key != "waiting" {
                    continue;
                }
                let _ = write!(
                    s,
                    "<rect class=\"ph-{key}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\"><title>{}: {name} {}</title></rect>",
                    sx(x),
                    y + 3.0,
                    (sx(x + d) - sx(x)).max(1.0),
                    ROW - 6.0,
                    esc(&e.url),
                    ms(d)
                );
                x += d;
            }
        }
        let right = format!(
            "{status} {}{}",
            if e.from_cache {
                String::new()
            } else {
                by(e.wire_bytes)
            },
            match (&e.protocol, e.conn) {
                (Some(p), Some(c)) => format!(" {p}#{c}"),
                _ => String::new(),
            }
        );
        let _ = write!(
            s,
            "<text class=\"tick wf-info\" x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            W - RM + 6.0,
            y + ROW - 5.0,
            esc(&fit_middle(&right, RM - 10.0))
        );
    }
    let _ = write!(
        s,
        "<text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">milliseconds from the start of the load</text>",
        LM + pw / 2.0,
        h - 6.0
    );
    let mut legend = String::from("<div class=\"legend\">");
    for (_, name, color) in PHASES {
        let _ = write!(
            legend,
            "<span><svg width=\"14\" height=\"10\"><rect width=\"14\" height=\"10\" fill=\"{color}\"/></svg>{name}</span>"
        );
    }
    legend.push_str("<span><svg width=\"10\" height=\"10\"><circle cx=\"5\" cy=\"5\" r=\"4\" fill=\"#adb5bd\"/></svg>from the cache</span></div>");
    format!(
        "<figure><figcaption>Waterfall, {}: {} requests, {} on the wire, {} connections, {}</figcaption><div class=\"wf\"><svg class=\"chart\" viewBox=\"0 0 {W} {h:.0}\" role=\"img\" aria-label=\"waterfall\" data-points=\"{}\">{s}</svg></div>{legend}</figure>\n",
        esc(l.view.name()),
        l.requests,
        by(l.wire_bytes),
        l.connections,
        ms(l.elapsed_ms),
        l.entries.len()
    )
}

/// 1-2-5 ticks covering [0, max].
fn ticks(max: f64) -> (f64, Vec<f64>) {
    let raw = max / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let top = (max / step).ceil() * step;
    let n = (top / step).round() as usize;
    (top, (0..=n.min(50)).map(|i| i as f64 * step).collect())
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn connections(l: &Load) -> String {
    if l.conns.is_empty() {
        return String::new();
    }
    let mut s = String::from("<table class=\"summary\"><thead><tr><th>connection</th><th>origin</th><th>protocol</th><th>TLS</th><th>ALPN</th></tr></thead><tbody>\n");
    for c in &l.conns {
        let (v, a) = match &c.tls {
            Some(t) => (
                format!("{} {}", t.version, t.cipher),
                t.alpn.clone().unwrap_or_else(|| "none".into()),
            ),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            s,
            "<tr><td>#{}</td><td class=\"url\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            c.id,
            esc(&c.origin),
            esc(&c.protocol),
            esc(&v),
            esc(&a)
        );
    }
    s.push_str("</tbody></table>\n");
    s
}

fn probes(r: &PageReport) -> String {
    if r.alpn.is_empty() {
        return String::new();
    }
    let mut s = String::from("<h3>HTTP/2 (each https origin offered h2, http/1.1: on the load's own connection, or with --http1.1 on a probe connection)</h3><table class=\"summary\"><thead><tr><th>origin</th><th>server chose</th><th>HTTP/2</th><th>TLS</th></tr></thead><tbody>\n");
    for p in &r.alpn {
        let chose = match (&p.error, &p.alpn) {
            (Some(e), _) => format!("probe failed: {e}"),
            (None, Some(a)) => a.clone(),
            (None, None) => "no ALPN".into(),
        };
        let _ = writeln!(
            s,
            "<tr><td class=\"url\">{}{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&p.origin),
            if p.third_party { " (third party)" } else { "" },
            esc(&chose),
            if p.h2 { "yes" } else { "no" },
            esc(p.tls_version.as_deref().unwrap_or("-"))
        );
    }
    s.push_str("</tbody></table>\n");
    s
}

fn insecure_note(insecure: bool) -> &'static str {
    if insecure {
        "<p class=\"warn\">Certificate verification was OFF (--insecure): the server's identity was not checked.</p>\n"
    } else {
        ""
    }
}

/// The audit as a self-contained HTML page: overall grade, the table of
/// checks, each check with its findings and fixes, then the page's views and
/// the first view's waterfall.
pub fn audit_report(a: &Audit, page: &PageReport) -> String {
    let mut s = head(&format!("redline audit: {}", a.url));
    let own: usize = a.checks.iter().map(|c| c.findings.len()).sum();
    let _ = writeln!(
        s,
        "<p class=\"sub\">{}<b>{}/100</b>, worst finding: {}; {} findings on the page's own site.</p>",
        grade_badge(&a.grade, true),
        a.score,
        sev(a.severity),
        own
    );
    if !a.page.ok {
        let _ = writeln!(
            s,
            "<p class=\"warn\" id=\"page-failed\"><b>The page itself failed:</b> {} answered {}, not 2xx. The audit fails (grade F); the checks below are about what was served instead.</p>",
            esc(if a.page.url.is_empty() { &a.url } else { &a.page.url }),
            a.page.status.map_or("nothing".to_string(), |c| c.to_string())
        );
    }
    s.push_str(insecure_note(a.insecure));
    s.push_str("<h2>Checks</h2>\n<table class=\"summary\"><thead><tr><th>grade</th><th>check</th><th>severity</th><th>weight</th><th>result</th></tr></thead><tbody>\n");
    for c in a.checks.iter().filter(|c| c.applicable) {
        let _ = writeln!(
            s,
            "<tr class=\"check\"><td>{}</td><td><a href=\"#check-{}\">{}</a></td><td>{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            grade_badge(&c.grade, false),
            esc(c.id),
            esc(c.title),
            sev(c.severity),
            c.weight,
            esc(&c.summary)
        );
    }
    s.push_str("</tbody></table>\n<p class=\"note\">One scale for grade and severity: A 90+ ok, B 80+ info, C 70+ and D 60+ warning, E 50+ and F below error. Overall: the weighted mean of the checks that apply (F when the page itself is not 2xx). Third-party hosts are listed but not graded.</p>\n");
    let na: Vec<&Check> = a.checks.iter().filter(|c| !c.applicable).collect();
    if !na.is_empty() {
        s.push_str("<h2>Not applicable</h2>\n<p class=\"note\">Nothing to judge on this page: left out of the score.</p>\n<table class=\"summary na\"><tbody>\n");
        for c in na {
            let _ = writeln!(
                s,
                "<tr class=\"na-check\" id=\"check-{}\"><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(c.id),
                grade_badge(&c.grade, false),
                esc(c.title),
                esc(&c.summary)
            );
        }
        s.push_str("</tbody></table>\n");
    }
    s.push_str("<h2>Findings and fixes</h2>\n");
    let mut any = false;
    for c in a
        .checks
        .iter()
        .filter(|c| c.applicable && (!c.findings.is_empty() || !c.third_party.is_empty()))
    {
        any = true;
        s.push_str(&check_section(c));
    }
    if !any {
        s.push_str("<p>Nothing to fix.</p>\n");
    }
    s.push_str("<h2>The page</h2>\n");
    s.push_str(&views_table(page));
    s.push_str(&probes(page));
    if let Some(first) = page.views.first() {
        s.push_str(&waterfall(first, &page.url));
        s.push_str(&connections(first));
    }
    tail(&mut s);
    s
}

/// `redline page --html`: the views side by side and each view's waterfall.
pub fn page_report(r: &PageReport) -> String {
    let mut s = head(&format!("redline page: {}", r.url));
    s.push_str(insecure_note(r.insecure));
    s.push_str("<h2>Views</h2>\n");
    s.push_str(&views_table(r));
    s.push_str(&probes(r));
    for l in &r.views {
        let _ = writeln!(
            s,
            "<h2>{}</h2><p class=\"sub\">{}</p>",
            esc(&{
                let n = l.view.name();
                let mut c = n.chars();
                c.next()
                    .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                    .unwrap_or_default()
            }),
            esc(&capital(l.view.describe()))
        );
        s.push_str(&waterfall(l, &r.url));
        s.push_str(&connections(l));
        for n in &l.alt_svc {
            let _ = writeln!(s, "<p class=\"sub\">HTTP/3 (Alt-Svc): {}</p>", esc(n));
        }
    }
    tail(&mut s);
    s
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_cover_the_range() {
        let (top, t) = ticks(93.0);
        assert!(top >= 93.0);
        assert_eq!(t.first(), Some(&0.0));
        assert_eq!(*t.last().unwrap(), top);
        let (top, _) = ticks(0.4);
        assert!(top >= 0.4);
    }

    #[test]
    fn long_labels_are_shortened_in_the_middle_and_fit() {
        let long = format!(
            "/assets/{}/bundle.min.css?v=12345",
            "very-long-directory-name/".repeat(8)
        );
        let l = short(&format!("http://a.test{long}"), "http://a.test/");
        assert!(text_width(&l) <= LABEL_W, "{l}");
        assert!(l.starts_with("/assets/") && l.contains('…'), "{l}");
        assert!(l.ends_with("min.css?v=12345"), "{l}");
        let wide = "W".repeat(100);
        assert!(text_width(&fit_middle(&wide, 50.0)) <= 50.0);
        assert_eq!(fit_middle("/a.css", LABEL_W), "/a.css");
        // The right-hand label's widest case fits its margin.
        assert!(text_width("error 123.4 KiB http/1.1#123") <= RM - 10.0);
    }

    #[test]
    fn short_urls_drop_the_own_origin() {
        assert_eq!(
            short("https://a.test:8443/x/y.css", "https://a.test:8443/"),
            "/x/y.css"
        );
        assert_eq!(
            short("https://cdn.test/z.js", "https://a.test/"),
            "https://cdn.test/z.js"
        );
    }
}
