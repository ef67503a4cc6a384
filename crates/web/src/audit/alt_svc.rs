//! The audit's HTTP/3 check (`alt-svc-h3`, information only): is HTTP/3
//! advertised, and advertised correctly? The page's `Alt-Svc` must be valid
//! RFC 7838 (the one parser, `redline_engine::altsvc`), its `h3` alternative
//! must carry a usable `ma`, the advertised UDP port must answer a QUIC
//! handshake with ALPN `h3`, and a GET of the page over HTTP/3 must answer
//! the status the same GET gets over TCP ([`probe_h3`], no credentials
//! sent). A broken advertisement is worse than none: a browser tries
//! HTTP/3, fails, and falls back (Chromium then marks the alternative
//! broken for minutes to days), so it is a warning with the fix for the
//! server the page names (Caddy, nginx 1.25+, servers without HTTP/3).

use super::{check, note, Check, Ctx, Fix, Severity};
use crate::h2::Multiplexed;
use crate::http::{header, ClientOpts, ConnectTimes, Dest};
use redline_engine::altsvc::{self, AltSvc};
use url::Url;

/// An `ma` below this many seconds is too short for a later visit to use.
pub const MIN_MA: u64 = 300;

/// What probing the page's HTTP/3 alternative showed.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct H3Probe {
    /// The page's origin (`https://host:port`).
    pub origin: String,
    /// The status of a GET of the page over TCP (no credentials).
    pub tcp_status: Option<u16>,
    /// The `Alt-Svc` of that answer.
    pub alt_svc: Option<String>,
    /// The endpoint the `h3` alternative names (`host:port`), when it names one.
    pub endpoint: Option<String>,
    /// The QUIC handshake (ALPN h3) with it took this long (ms).
    pub handshake_ms: Option<f64>,
    /// The status of the same GET over HTTP/3.
    pub h3_status: Option<u16>,
    /// Why the TCP GET, the handshake or the HTTP/3 GET failed.
    pub error: Option<String>,
}

/// GETs the page over TCP, reads its `Alt-Svc`, and (when it names `h3`)
/// opens a QUIC connection to the alternative and GETs the page over
/// HTTP/3; bounded by the connect time-out. No credentials are sent.
pub fn probe_h3(u: &Url, opts: &ClientOpts) -> H3Probe {
    let mut p = H3Probe {
        origin: crate::http::host_key(u),
        ..Default::default()
    };
    let mut o = opts.clone();
    o.headers.clear();
    o.http3 = false;
    o.budget = None;
    o.timeout = o.timeout.min(o.connect_timeout);
    let tcp = match crate::http::connect(u, &o, 1) {
        Ok((crate::http::Connected::H1(mut c), _)) => {
            c.get(u, Dest::Document, &[], &o).map(|(r, _)| r)
        }
        Ok((crate::http::Connected::H2(c), _)) => c.get(u, Dest::Document, &[], &o),
        Err(e) => Err(e),
    };
    let r = match tcp {
        Ok(r) => r,
        Err(e) => {
            p.error = Some(format!("GET over TCP: {e}"));
            return p;
        }
    };
    p.tcp_status = Some(r.status);
    p.alt_svc = r.header("alt-svc").map(str::to_string);
    let Some(alt) = p
        .alt_svc
        .as_deref()
        .and_then(|v| altsvc::parse(v).ok())
        .and_then(|a| a.h3().cloned())
    else {
        return p;
    };
    let to = crate::h3::Endpoint {
        host: alt
            .host
            .clone()
            .unwrap_or_else(|| u.host_str().unwrap_or("").to_string()),
        port: alt.port,
    };
    p.endpoint = Some(format!("{}:{}", to.host, to.port));
    match crate::h3::connect(u, &to, &o, 2, &mut ConnectTimes::default()) {
        Ok((c, t)) => {
            p.handshake_ms = t.tls;
            match c.get(u, Dest::Document, &[], &o) {
                Ok(r) => p.h3_status = Some(r.status),
                Err(e) => p.error = Some(format!("GET over HTTP/3: {e}")),
            }
        }
        Err(e) => p.error = Some(e.to_string()),
    }
    p
}

pub(super) const FIX_ALT_SVC: Fix = Fix {
    apache: "# Apache httpd has no HTTP/3: send no Alt-Svc naming h3 (Header unset Alt-Svc),\n# or put a server that has it in front (Caddy, nginx 1.25+, a CDN)",
    nginx: "# nginx 1.25.0 and newer, built with http_v3 (nginx -V shows --with-http_v3_module):\n# listen 443 ssl;\n# listen 443 quic reuseport;\n# http3 on;\n# add_header Alt-Svc 'h3=\":443\"; ma=86400' always;\n# and let UDP 443 through the firewall",
    lighttpd: "# lighttpd has no HTTP/3: send no Alt-Svc naming h3, or put a server that has it in front",
};

/// The fix for the server the page names, in a sentence.
fn server_fix(server: Option<&str>, port: u16) -> String {
    let s = server.unwrap_or("").to_ascii_lowercase();
    if s.contains("caddy") {
        format!("Caddy serves HTTP/3 by default over UDP on its https port: let UDP {port} through the firewall (and keep h3 in `servers {{ protocols h1 h2 h3 }}`)")
    } else if s.contains("nginx") {
        format!("nginx 1.25+: `listen {port} quic reuseport;` beside `listen {port} ssl;`, `http3 on;`, the Alt-Svc port equal to the quic port, and UDP {port} let through")
    } else if s.contains("apache") || s.contains("lighttpd") {
        "this server has no HTTP/3: stop sending Alt-Svc naming h3, or put one that has it in front"
            .into()
    } else {
        format!("serve HTTP/3 on UDP {port} with ALPN h3, or stop advertising it")
    }
}

/// The `alt-svc-h3` check.
pub(super) fn check_alt_svc(cx: &Ctx) -> Check {
    const T: &str = "HTTP/3 advertised (Alt-Svc)";
    const TH: &str = "information only (weight 0): Alt-Svc naming h3 lets browsers switch to HTTP/3; when it is there it must be valid, carry a usable ma, and its UDP port must answer HTTP/3 as TCP does";
    let fin =
        |score, why: String, found| check("alt-svc-h3", T, TH, score, why, found, FIX_ALT_SVC);
    let Some(e) = cx.doc() else {
        return fin(None, super::security_na(), Vec::new());
    };
    let probe = cx.probes.h3.as_ref();
    // What the load saw; the probe's own answer when the load (over
    // HTTP/3, `--http3`) got none.
    let v = header(&e.headers, "alt-svc").or(probe.and_then(|p| p.alt_svc.as_deref()));
    let Some(v) = v else {
        let why = "no Alt-Svc: HTTP/3 not advertised".to_string();
        return fin(Some(100), why.clone(), vec![note(Severity::Info, why)]);
    };
    let parsed = match altsvc::parse(v) {
        Ok(p) => p,
        Err(err) => {
            let why = format!("Alt-Svc: {v}: {err}; browsers ignore the header");
            return fin(Some(0), why.clone(), vec![note(Severity::Warning, why)]);
        }
    };
    let h3 = match (&parsed, parsed.h3()) {
        (AltSvc::Clear, _) => {
            let why =
                "Alt-Svc: clear: the server withdraws its alternatives (no HTTP/3)".to_string();
            return fin(Some(100), why.clone(), vec![note(Severity::Info, why)]);
        }
        (_, None) => {
            let draft = parsed
                .alternatives()
                .iter()
                .any(|a| a.protocol.starts_with("h3-"));
            let why = if draft {
                format!("Alt-Svc: {v}: only draft HTTP/3 versions (h3-NN), which browsers no longer use; advertise h3")
            } else {
                format!("Alt-Svc: {v}: no h3")
            };
            return fin(Some(100), why.clone(), vec![note(Severity::Info, why)]);
        }
        (_, Some(a)) => a.clone(),
    };
    let mut found = Vec::new();
    let mut bad = false;
    let server = header(&e.headers, "server");
    match h3.ma {
        None => found.push(note(
            Severity::Info,
            format!("Alt-Svc: {v}: no ma, so browsers keep it 24 hours (the default); say ma=86400 or more to be explicit"),
        )),
        Some(ma) if ma < MIN_MA => {
            bad = true;
            found.push(note(
                Severity::Warning,
                format!("Alt-Svc: {v}: ma={ma} s is too short: the alternative expires before a later visit could use it; use ma=86400 or more"),
            ));
        }
        Some(_) => {}
    }
    let mut summary = format!("Alt-Svc: {v}");
    match probe {
        None => {
            summary.push_str(": valid; the HTTP/3 endpoint was not probed (--no-probes)");
        }
        Some(p) => {
            let ep = p
                .endpoint
                .clone()
                .unwrap_or_else(|| format!(":{}", h3.port));
            match (p.handshake_ms, p.h3_status, p.tcp_status, &p.error) {
                (Some(ms), Some(h), Some(t), _) if h == t => {
                    summary.push_str(&format!(
                        ": {ep} answered a QUIC handshake (ALPN h3) in {ms:.1} ms, and GET over HTTP/3 answered {h} as over TCP"
                    ));
                }
                (Some(_), Some(h), Some(t), _) => {
                    bad = true;
                    let why = format!("GET of the page over HTTP/3 ({ep}) answered {h}, over TCP {t}: the HTTP/3 endpoint serves something else; {}", server_fix(server, h3.port));
                    found.push(note(Severity::Warning, why));
                }
                (_, _, _, Some(err)) if p.tcp_status.is_some() => {
                    bad = true;
                    let why = format!("the advertised HTTP/3 endpoint {ep} failed: {err}; browsers try it, fail and fall back to TCP; {}", server_fix(server, h3.port));
                    found.push(note(Severity::Warning, why));
                }
                _ => {
                    let why = p.error.clone().unwrap_or_else(|| "no answer".into());
                    summary.push_str(&format!(": the probe could not compare ({why})"));
                }
            }
        }
    }
    if bad {
        summary = format!("Alt-Svc: {v}: advertised, but not usable as it is");
    }
    if found.is_empty() {
        found.push(note(Severity::Info, summary.clone()));
    }
    fin(Some(if bad { 0 } else { 100 }), summary, found)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{entry, page};
    use super::super::{audit, Probes, Severity};
    use super::*;
    use crate::discover::Kind;

    /// The check for a page whose document answered with `headers`.
    fn run(headers: &[(&str, &str)], h3: Option<H3Probe>) -> Check {
        let mut l = page(entry("https://a.test/i.png", Kind::Image, "image/png", 10));
        l.entries[0].url = "https://a.test/".into();
        l.entries[0].headers = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let p = Probes {
            h3,
            ..Default::default()
        };
        let a = audit("https://a.test/", &l, None, Vec::new(), &[], &p);
        a.checks.into_iter().find(|c| c.id == "alt-svc-h3").unwrap()
    }

    fn evidence(c: &Check) -> String {
        c.findings
            .iter()
            .map(|f| f.evidence.clone())
            .collect::<Vec<_>>()
            .join(" | ")
    }

    fn probe(tcp: u16, h3: Option<u16>, error: Option<&str>) -> H3Probe {
        H3Probe {
            origin: "https://a.test:443".into(),
            tcp_status: Some(tcp),
            alt_svc: Some("h3=\":443\"; ma=86400".into()),
            endpoint: Some("a.test:443".into()),
            handshake_ms: h3.map(|_| 3.0),
            h3_status: h3,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn not_advertised_is_information() {
        let c = run(&[], None);
        assert_eq!(c.summary, "no Alt-Svc: HTTP/3 not advertised");
        // Not met, nothing wrong: weight 0, an information finding.
        assert_eq!(c.severity, Severity::Ok);
        assert_eq!(c.findings[0].severity, Severity::Info);
        assert_eq!(c.weight, 0);
    }

    #[test]
    fn a_working_alternative_passes() {
        let ok = run(
            &[("Alt-Svc", "h3=\":443\"; ma=86400")],
            Some(probe(200, Some(200), None)),
        );
        assert_eq!(ok.severity, Severity::Ok, "{}", ok.summary);
        assert!(
            ok.summary.contains("answered 200 as over TCP"),
            "{}",
            ok.summary
        );
    }

    #[test]
    fn what_is_wrong_is_said() {
        let c = run(&[("Alt-Svc", "h3=:443")], None);
        assert_eq!(c.severity, Severity::Warning);
        assert!(evidence(&c).contains("must be quoted"), "{}", evidence(&c));
        let c = run(&[("Alt-Svc", "h3=\":443\"; ma=10")], None);
        assert_eq!(c.severity, Severity::Warning);
        assert!(evidence(&c).contains("ma=10 s is too short"));
        let c = run(&[("Alt-Svc", "h3=\":443\"")], None);
        assert_eq!(c.severity, Severity::Ok);
        assert!(evidence(&c).contains("no ma"), "{}", evidence(&c));
        let c = run(&[("Alt-Svc", "h3-29=\":443\"")], None);
        assert!(evidence(&c).contains("draft"), "{}", evidence(&c));
        let c = run(
            &[
                ("Alt-Svc", "h3=\":443\"; ma=86400"),
                ("Server", "nginx/1.26.0"),
            ],
            Some(probe(
                200,
                None,
                Some("127.0.0.1:443 over UDP (HTTP/3): connection refused"),
            )),
        );
        assert_eq!(c.severity, Severity::Warning);
        let e = evidence(&c);
        assert!(
            e.contains("connection refused") && e.contains("listen 443 quic"),
            "{e}"
        );
        let c = run(
            &[("Alt-Svc", "h3=\":443\"; ma=86400"), ("Server", "Caddy")],
            Some(probe(200, Some(404), None)),
        );
        assert_eq!(c.severity, Severity::Warning);
        let e = evidence(&c);
        assert!(
            e.contains("answered 404, over TCP 200") && e.contains("Caddy"),
            "{e}"
        );
    }
}
