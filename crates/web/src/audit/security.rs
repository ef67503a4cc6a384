//! Security headers of the page's own response, Mozilla Observatory's and
//! Lighthouse's ground: HSTS (max-age at least 180 days), X-Content-Type-Options
//! `nosniff`, clickjacking protection (CSP `frame-ancestors` or
//! X-Frame-Options), Referrer-Policy, a Content-Security-Policy (present,
//! and no plain `'unsafe-inline'` in script-src: not a full CSP evaluator),
//! the cookies' Secure / HttpOnly / SameSite attributes, and the server's
//! version in `Server` / `X-Powered-By`. Each with the fix for Apache
//! (mod_headers), nginx and lighttpd (mod_setenv).

use super::{check, finding, note, Check, Ctx, Fix, Severity};
use crate::http::header;
use crate::load::Entry;
use std::fmt::Write as _;

/// HSTS max-age at least this (180 days: Mozilla Observatory's bar).
pub const HSTS_MIN_S: u64 = 180 * 86_400;

/// Every value of a header (case-insensitive name), in order.
fn all<'a>(h: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    h.iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The security checks, over the page's own final response and its site's cookies.
pub(crate) fn checks(cx: &Ctx) -> Vec<Check> {
    let doc = cx.doc();
    let https = cx.page.url.starts_with("https:");
    vec![
        hsts(doc, https),
        nosniff(doc),
        clickjacking(doc),
        referrer(doc),
        csp(doc),
        cookies(cx, https),
        server_version(cx, doc),
    ]
}

const NA: &str = "not applicable: the page did not answer 2xx";

pub(super) const FIX_HSTS: Fix = Fix {
    apache: "# mod_headers, in the https virtual host\nHeader always set Strict-Transport-Security \"max-age=31536000\"",
    nginx: "# in the https server block\nadd_header Strict-Transport-Security \"max-age=31536000\" always;",
    lighttpd: "server.modules += ( \"mod_setenv\" )\nsetenv.add-response-header += ( \"Strict-Transport-Security\" => \"max-age=31536000\" )",
};

fn hsts(doc: Option<&Entry>, https: bool) -> Check {
    const T: &str = "HSTS: Strict-Transport-Security with max-age >= 180 days";
    const TH: &str = "max-age of at least 15552000 s (180 days; Mozilla Observatory)";
    let Some(e) = doc else {
        return check("hsts", T, TH, None, NA.into(), Vec::new(), FIX_HSTS);
    };
    if !https {
        return check(
            "hsts",
            T,
            TH,
            None,
            "not applicable: the page is plain http (browsers ignore HSTS there; see the https check)"
                .into(),
            Vec::new(),
            FIX_HSTS,
        );
    }
    let v = header(&e.headers, "strict-transport-security");
    let max_age = v.and_then(|v| {
        v.split(';').find_map(|p| {
            let (k, val) = p.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("max-age")
                .then(|| val.trim().trim_matches('"').parse::<u64>().ok())?
        })
    });
    let (score, f) = match (v, max_age) {
        (None, _) => (
            60,
            vec![finding(
                Severity::Warning,
                e,
                "no Strict-Transport-Security: a visitor who types the name is sent over http first".into(),
            )],
        ),
        (Some(v), Some(a)) if a >= HSTS_MIN_S => {
            let _ = v;
            (100, Vec::new())
        }
        (Some(v), _) => (
            70,
            vec![finding(
                Severity::Warning,
                e,
                format!("Strict-Transport-Security: {v}: max-age under 180 days (15552000 s)"),
            )],
        ),
    };
    check(
        "hsts",
        T,
        TH,
        Some(score),
        match v {
            Some(v) => format!("Strict-Transport-Security: {v}"),
            None => "no Strict-Transport-Security header".into(),
        },
        f,
        FIX_HSTS,
    )
}

pub(super) const FIX_NOSNIFF: Fix = Fix {
    apache: "# mod_headers\nHeader always set X-Content-Type-Options \"nosniff\"",
    nginx: "add_header X-Content-Type-Options \"nosniff\" always;",
    lighttpd: "server.modules += ( \"mod_setenv\" )\nsetenv.add-response-header += ( \"X-Content-Type-Options\" => \"nosniff\" )",
};

fn nosniff(doc: Option<&Entry>) -> Check {
    const T: &str = "X-Content-Type-Options: nosniff";
    const TH: &str = "the header with the value nosniff (Mozilla Observatory)";
    let Some(e) = doc else {
        return check(
            "x-content-type-options",
            T,
            TH,
            None,
            NA.into(),
            Vec::new(),
            FIX_NOSNIFF,
        );
    };
    let v = header(&e.headers, "x-content-type-options");
    let good = v.is_some_and(|v| v.trim().eq_ignore_ascii_case("nosniff"));
    let f = if good {
        Vec::new()
    } else {
        vec![finding(
            Severity::Warning,
            e,
            format!(
                "X-Content-Type-Options: {}: browsers may guess a response's type and run it as script",
                v.unwrap_or("missing")
            ),
        )]
    };
    check(
        "x-content-type-options",
        T,
        TH,
        Some(if good { 100 } else { 70 }),
        format!("X-Content-Type-Options: {}", v.unwrap_or("missing")),
        f,
        FIX_NOSNIFF,
    )
}

pub(super) const FIX_FRAMES: Fix = Fix {
    apache: "# mod_headers (or CSP frame-ancestors 'self')\nHeader always set X-Frame-Options \"SAMEORIGIN\"",
    nginx: "add_header X-Frame-Options \"SAMEORIGIN\" always;   # or CSP frame-ancestors 'self'",
    lighttpd: "server.modules += ( \"mod_setenv\" )\nsetenv.add-response-header += ( \"X-Frame-Options\" => \"SAMEORIGIN\" )",
};

/// The directive `name` of a CSP (`script-src 'self' …` → its sources).
fn csp_directive<'a>(csp: &'a str, name: &str) -> Option<Vec<&'a str>> {
    csp.split(';').find_map(|d| {
        let mut it = d.split_ascii_whitespace();
        let n = it.next()?;
        n.eq_ignore_ascii_case(name).then(|| it.collect())
    })
}

fn clickjacking(doc: Option<&Entry>) -> Check {
    const T: &str = "Clickjacking: frame-ancestors or X-Frame-Options";
    const TH: &str =
        "CSP frame-ancestors, or X-Frame-Options DENY or SAMEORIGIN (Mozilla Observatory)";
    let Some(e) = doc else {
        return check(
            "clickjacking",
            T,
            TH,
            None,
            NA.into(),
            Vec::new(),
            FIX_FRAMES,
        );
    };
    let csp = all(&e.headers, "content-security-policy");
    let fa = csp
        .iter()
        .find_map(|c| csp_directive(c, "frame-ancestors"))
        .map(|v| v.join(" "));
    let xfo = header(&e.headers, "x-frame-options");
    let xfo_ok = xfo.is_some_and(|v| {
        let v = v.trim();
        v.eq_ignore_ascii_case("deny") || v.eq_ignore_ascii_case("sameorigin")
    });
    let (good, summary) = match (&fa, xfo) {
        (Some(fa), _) => (true, format!("CSP frame-ancestors {fa}")),
        (None, Some(x)) => (xfo_ok, format!("X-Frame-Options: {x}")),
        (None, None) => (
            false,
            "neither CSP frame-ancestors nor X-Frame-Options".into(),
        ),
    };
    let f = if good {
        Vec::new()
    } else {
        vec![finding(
            Severity::Warning,
            e,
            format!("{summary}: any site may show this page in a frame and trick clicks"),
        )]
    };
    check(
        "clickjacking",
        T,
        TH,
        Some(if good { 100 } else { 70 }),
        summary,
        f,
        FIX_FRAMES,
    )
}

pub(super) const FIX_REFERRER: Fix = Fix {
    apache: "# mod_headers\nHeader always set Referrer-Policy \"strict-origin-when-cross-origin\"",
    nginx: "add_header Referrer-Policy \"strict-origin-when-cross-origin\" always;",
    lighttpd: "server.modules += ( \"mod_setenv\" )\nsetenv.add-response-header += ( \"Referrer-Policy\" => \"strict-origin-when-cross-origin\" )",
};

fn referrer(doc: Option<&Entry>) -> Check {
    const T: &str = "Referrer-Policy";
    const TH: &str = "a policy that does not send full URLs to other sites (no unsafe-url, no-referrer-when-downgrade); missing is a note, as browsers default to strict-origin-when-cross-origin (Mozilla Observatory)";
    let Some(e) = doc else {
        return check(
            "referrer-policy",
            T,
            TH,
            None,
            NA.into(),
            Vec::new(),
            FIX_REFERRER,
        );
    };
    let v = header(&e.headers, "referrer-policy");
    // The last valid token wins (W3C Referrer Policy).
    let last = v.and_then(|v| v.split(',').map(str::trim).rfind(|t| !t.is_empty()));
    let (score, sev, why) = match last.map(str::to_ascii_lowercase).as_deref() {
        None => (
            85,
            Severity::Info,
            "no Referrer-Policy: the browser's default applies".to_string(),
        ),
        Some("unsafe-url") | Some("no-referrer-when-downgrade") => (
            70,
            Severity::Warning,
            format!(
                "Referrer-Policy: {}: full URLs (paths, queries) go to other sites",
                v.unwrap_or("")
            ),
        ),
        Some(_) => (100, Severity::Ok, String::new()),
    };
    let f = if sev > Severity::Ok {
        vec![finding(sev, e, why)]
    } else {
        Vec::new()
    };
    check(
        "referrer-policy",
        T,
        TH,
        Some(score),
        format!("Referrer-Policy: {}", v.unwrap_or("missing")),
        f,
        FIX_REFERRER,
    )
}

pub(super) const FIX_CSP: Fix = Fix {
    apache: "# mod_headers; try it first as Content-Security-Policy-Report-Only, then allow what the page needs\nHeader always set Content-Security-Policy \"default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'self'\"",
    nginx: "# try it first as Content-Security-Policy-Report-Only, then allow what the page needs\nadd_header Content-Security-Policy \"default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'self'\" always;",
    lighttpd: "# try it first as Content-Security-Policy-Report-Only, then allow what the page needs\nserver.modules += ( \"mod_setenv\" )\nsetenv.add-response-header += ( \"Content-Security-Policy\" => \"default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'self'\" )",
};

fn csp(doc: Option<&Entry>) -> Check {
    const T: &str = "Content-Security-Policy";
    const TH: &str = "a CSP header, and no 'unsafe-inline' in script-src (or default-src) without a nonce or hash (Mozilla Observatory, Lighthouse); not a full CSP evaluation";
    let Some(e) = doc else {
        return check("csp", T, TH, None, NA.into(), Vec::new(), FIX_CSP);
    };
    let csps = all(&e.headers, "content-security-policy");
    let report_only = header(&e.headers, "content-security-policy-report-only").is_some();
    if csps.is_empty() {
        let why = if report_only {
            "only Content-Security-Policy-Report-Only: violations are reported, nothing is blocked"
        } else {
            "no Content-Security-Policy: injected scripts run unhindered"
        };
        return check(
            "csp",
            T,
            TH,
            Some(60),
            why.to_string(),
            vec![finding(Severity::Warning, e, why.to_string())],
            FIX_CSP,
        );
    }
    // unsafe-inline is ignored by browsers when a nonce or hash is present.
    let unsafe_inline = csps.iter().any(|c| {
        let src = csp_directive(c, "script-src").or_else(|| csp_directive(c, "default-src"));
        src.is_some_and(|s| {
            s.iter().any(|t| t.eq_ignore_ascii_case("'unsafe-inline'"))
                && !s.iter().any(|t| {
                    let t = t.to_ascii_lowercase();
                    t.starts_with("'nonce-")
                        || t.starts_with("'sha256-")
                        || t.starts_with("'sha384-")
                        || t.starts_with("'sha512-")
                        || t == "'strict-dynamic'"
                })
        })
    });
    let f = if unsafe_inline {
        vec![finding(
            Severity::Warning,
            e,
            "script-src allows 'unsafe-inline' (no nonce or hash): injected inline scripts still run; use nonces or hashes".into(),
        )]
    } else {
        Vec::new()
    };
    check(
        "csp",
        T,
        TH,
        Some(if unsafe_inline { 70 } else { 100 }),
        format!("Content-Security-Policy: {}", csps.join(", ")),
        f,
        FIX_CSP,
    )
}

pub(super) const FIX_COOKIES: Fix = Fix {
    apache: "# best where the application sets the cookie; else mod_headers (each attribute added only when missing):\nHeader edit Set-Cookie \"(?i)^((?!.*;\\s*secure\\b).*)$\" \"$1; Secure\"\nHeader edit Set-Cookie \"(?i)^((?!.*;\\s*httponly\\b).*)$\" \"$1; HttpOnly\"\nHeader edit Set-Cookie \"(?i)^((?!.*;\\s*samesite=).*)$\" \"$1; SameSite=Lax\"",
    nginx: "# best where the application sets the cookie; for proxied apps (nginx 1.19.3+), in the location:\nproxy_cookie_flags ~ secure httponly samesite=lax;",
    lighttpd: "# lighttpd cannot edit cookies: set Secure; HttpOnly; SameSite=Lax where the application sets them",
};

/// The attributes of a (redacted) Set-Cookie value: `[redacted]; Path=/; Secure`.
fn cookie_attrs(v: &str) -> Vec<String> {
    v.split(';')
        .skip(1)
        .map(|a| {
            a.split('=')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .collect()
}

fn cookies(cx: &Ctx, https: bool) -> Check {
    const T: &str = "Cookies: Secure, HttpOnly, SameSite";
    const TH: &str =
        "every cookie of the site with Secure (https), HttpOnly and SameSite (Mozilla Observatory)";
    let mut f: Vec<(bool, super::Finding)> = Vec::new();
    // The same cookie on every response is one finding, with a count.
    let mut seen: Vec<(String, usize, usize)> = Vec::new(); // (key, finding index, times)
    let (mut n, mut bad) = (0usize, 0usize);
    for e in cx.fetched() {
        for v in all(&e.headers, "set-cookie") {
            let attrs = cookie_attrs(v);
            let has = |a: &str| attrs.iter().any(|x| x == a);
            let mut missing = Vec::new();
            if https && !has("secure") {
                missing.push("Secure");
            }
            if !has("httponly") {
                missing.push("HttpOnly");
            }
            if !has("samesite") {
                missing.push("SameSite");
            }
            if !e.third_party {
                n += 1;
            }
            if missing.is_empty() {
                continue;
            }
            if !e.third_party {
                bad += 1;
            }
            let key = format!(
                "{}|{}|{}",
                e.third_party,
                attrs.join(";"),
                missing.join(",")
            );
            if let Some(s) = seen.iter_mut().find(|s| s.0 == key) {
                s.2 += 1;
                continue;
            }
            seen.push((key, f.len(), 1));
            f.push(finding(
                Severity::Warning,
                e,
                format!(
                    "a cookie set without {}{}",
                    missing.join(", "),
                    if missing.contains(&"Secure") {
                        " (sent over plain http too)"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    for (_, i, times) in seen.into_iter().filter(|s| s.2 > 1) {
        let _ = write!(f[i].1.evidence, " (the same on {times} responses)");
    }
    check(
        "cookies",
        T,
        TH,
        super::pct(n - bad, n),
        if n == 0 {
            "not applicable: the site set no cookie".into()
        } else {
            format!("{} of {n} cookies with every attribute", n - bad)
        },
        f,
        FIX_COOKIES,
    )
}

pub(super) const FIX_TOKENS: Fix = Fix {
    apache: "# server config (not a virtual host)\nServerTokens Prod\nServerSignature Off",
    nginx: "server_tokens off;",
    lighttpd: "server.tag := \"lighttpd\"",
};

/// A product token with a version (`Apache/2.4.62`, `nginx/1.22.1`, `PHP/8.2`).
fn has_version(v: &str) -> bool {
    v.split(|c: char| c.is_ascii_whitespace() || c == '(' || c == ')')
        .any(|tok| {
            tok.split_once('/')
                .is_some_and(|(_, ver)| ver.starts_with(|c: char| c.is_ascii_digit()))
        })
}

fn server_version(cx: &Ctx, doc: Option<&Entry>) -> Check {
    const T: &str = "Server version not disclosed";
    const TH: &str = "Server and X-Powered-By without version numbers (a note: it helps attackers pick exploits)";
    let Some(e) = doc else {
        return check(
            "server-version",
            T,
            TH,
            None,
            NA.into(),
            Vec::new(),
            FIX_TOKENS,
        );
    };
    let mut shown = Vec::new();
    for name in ["server", "x-powered-by"] {
        if let Some(v) = header(&e.headers, name).filter(|v| has_version(v)) {
            shown.push(format!(
                "{}: {v}",
                if name == "server" {
                    "Server"
                } else {
                    "X-Powered-By"
                }
            ));
        }
    }
    let _ = cx;
    let f = if shown.is_empty() {
        Vec::new()
    } else {
        vec![note(
            Severity::Info,
            format!(
                "{}: the exact version tells attackers which exploits to try",
                shown.join("; ")
            ),
        )]
    };
    check(
        "server-version",
        T,
        TH,
        Some(if shown.is_empty() { 100 } else { 85 }),
        if shown.is_empty() {
            format!(
                "Server: {}",
                header(&e.headers, "server").unwrap_or("missing")
            )
        } else {
            shown.join("; ")
        },
        f,
        FIX_TOKENS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_csp_parsing() {
        assert!(has_version("Apache/2.4.62 (Debian)"));
        assert!(has_version("nginx/1.22.1"));
        assert!(!has_version("nginx"));
        assert!(!has_version("Apache"));
        assert!(has_version("PHP/8.2.7"));
        assert_eq!(
            csp_directive(
                "default-src 'self'; script-src 'self' 'unsafe-inline'",
                "script-src"
            ),
            Some(vec!["'self'", "'unsafe-inline'"])
        );
        assert_eq!(
            cookie_attrs("[redacted]; Path=/; Secure; SameSite=Lax"),
            vec!["path", "secure", "samesite"]
        );
    }
}
