//! `redline audit` as a user runs it against scripted servers on
//! 127.0.0.1:0: the page's own status first (a 404, also after a redirect,
//! fails the audit with grade F and exit 3 under `--fail-on error`), one
//! scale for grade and severity, the security headers and cookies, plain
//! http redirecting to https, and the TLS checks (chain, expiry, OCSP
//! stapling, session resumption) against rustls servers with certificates
//! made here by rcgen.

mod common;

use common::nginx::{free_port, tmpdir};
use common::{redline, routed_server, ScriptServer};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::Value;
use std::io::{Read, Write};
use std::sync::Arc;

fn check(v: &Value, id: &str) -> Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}: {v}"))
        .clone()
}

fn assert_schema(doc: &Value) {
    let path = format!(
        "{}/../../docs/audit.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// Every applicable check's grade and severity are the scale's pair.
fn assert_one_scale(v: &Value) {
    for c in v["checks"].as_array().unwrap() {
        let pair = (
            c["grade"].as_str().unwrap(),
            c["severity"].as_str().unwrap(),
        );
        let ok = matches!(
            pair,
            ("A", "ok")
                | ("B", "info")
                | ("C", "warning")
                | ("D", "warning")
                | ("E", "error")
                | ("F", "error")
                | ("-", "ok")
        );
        assert!(ok, "grade and severity disagree: {c}");
    }
}

fn audit_json(args: &[&str]) -> (Value, std::process::Output) {
    let mut all = vec!["audit", "-o", "json", "-q"];
    all.extend_from_slice(args);
    let out = redline(&all);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_schema(&v);
    assert_one_scale(&v);
    (v, out)
}

fn resp(status: &str, headers: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn a_page_that_is_not_2xx_fails_the_audit() {
    let (srv, _) = routed_server(|head, _| {
        let path = head.split_whitespace().nth(1).unwrap_or("/");
        match path {
            "/missing" => resp(
                "404 Not Found",
                "",
                "<html><body>not here <img src=a.gif></body></html>",
            ),
            "/moved" => resp("301 Moved Permanently", "Location: /missing\r\n", ""),
            "/forbidden" => resp("403 Forbidden", "", "<html>no</html>"),
            "/fine" => resp("200 OK", "ETag: \"1\"\r\n", "<html><p>hello</p></html>"),
            "/to-fine" => resp("302 Found", "Location: /fine\r\n", ""),
            _ => resp("404 Not Found", "", "nope"),
        }
    });
    let base = format!("http://{}", srv.addr);
    for (path, status) in [("/missing", 404), ("/moved", 404), ("/forbidden", 403)] {
        let url = format!("{base}{path}");
        let (v, out) = audit_json(&[&url]);
        assert!(out.status.success(), "no --fail-on: exit 0");
        assert_eq!(v["page"]["status"], status, "{path}");
        assert_eq!(v["page"]["ok"], false);
        assert_eq!(
            (v["grade"].as_str(), v["score"].as_u64()),
            (Some("F"), Some(0))
        );
        assert_eq!(v["severity"], "error");
        assert_eq!(check(&v, "page")["grade"], "F");
        // Checks with nothing to judge are not applicable, not A.
        for id in ["ttfb", "hsts", "csp", "cache-static", "images-scaled"] {
            let c = check(&v, id);
            assert_eq!(c["applicable"], false, "{path} {id}: {c}");
            assert_eq!(c["grade"], "-");
        }
        // Text: the status at the top, exit 3 with --fail-on error, no speed-ups.
        let out = redline(&["audit", "-q", "--fail-on", "error", &url]);
        assert_eq!(out.status.code(), Some(3), "{path}");
        let text = String::from_utf8_lossy(&out.stdout);
        let top: String = text.lines().take(4).collect::<Vec<_>>().join("\n");
        assert!(
            top.contains(&format!("answered {status}")) && top.contains("grade F"),
            "{top}"
        );
        assert!(
            !text.contains("faster") && !text.contains("x the speed"),
            "{text}"
        );
        assert!(text.contains("Not applicable"), "{text}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("answered {status}")), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // After a redirect to a 200: the page is fine.
    let (v, _) = audit_json(&[&format!("{base}/to-fine")]);
    assert_eq!(v["page"]["status"], 200);
    assert_eq!(v["page"]["ok"], true);
    assert!(v["page"]["url"].as_str().unwrap().ends_with("/fine"));
    assert_ne!(v["score"], 0);
    assert_eq!(check(&v, "page")["grade"], "A");
}

#[test]
fn fail_on_takes_the_same_level_names_in_audit_and_tune() {
    let (srv, _) = routed_server(|_, _| resp("200 OK", "", "<html><p>hello</p></html>"));
    let url = srv.url();
    // info: the page has notes (no Referrer-Policy, no CSP…): exit 3.
    for level in ["info", "warn", "warning"] {
        let out = redline(&["audit", "-q", "--fail-on", level, &url]);
        assert_eq!(out.status.code(), Some(3), "audit --fail-on {level}");
    }
    let out = redline(&["audit", "-q", "--fail-on", "fatal", &url]);
    assert_eq!(out.status.code(), Some(2));
    // tune: the same names, and the same meaning (its worst level is
    // warning, so `error` fires on warnings there).
    let fixture = |rel: &str| {
        format!(
            "{}/../watch/tests/fixtures/{rel}",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    let apache = fixture("debian-apache2/apache2.conf"); // has [!!] findings
    let lighttpd = fixture("lighttpd/lighttpd.conf"); // notes only
    for (conf, level, code) in [
        (&apache, "warn", 3),
        (&apache, "warning", 3),
        (&apache, "error", 3),
        (&lighttpd, "warning", 0),
        (&lighttpd, "warn", 0),
        (&lighttpd, "error", 0),
        (&lighttpd, "info", 3),
    ] {
        let out = redline(&["tune", "--no-tools", "--fail-on", level, conf]);
        assert_eq!(
            out.status.code(),
            Some(code),
            "tune --fail-on {level} {conf}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = redline(&["tune", "--fail-on", "fatal", &apache]);
    assert_eq!(out.status.code(), Some(2));
}

// ---- https: a rustls site with headers chosen by the test ----

struct Site {
    headers: String,
    body: String,
}

fn tls_site(cfg: Arc<rustls::ServerConfig>, site: Site) -> ScriptServer {
    let site = Arc::new(site);
    ScriptServer::start(move |sock| {
        let Ok(conn) = rustls::ServerConnection::new(cfg.clone()) else {
            return;
        };
        let mut s = rustls::StreamOwned::new(conn, sock);
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        for _ in 0..100 {
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                if buf.len() > 65536 {
                    return;
                }
            }
            let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            buf.drain(..end);
            let head_only = head.starts_with("HEAD ");
            let r = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nETag: \"e\"\r\nCache-Control: no-cache\r\n{}\r\n",
                site.body.len(),
                site.headers
            );
            let body: &[u8] = if head_only { b"" } else { site.body.as_bytes() };
            if s.write_all(r.as_bytes())
                .and_then(|_| s.write_all(body))
                .and_then(|_| s.flush())
                .is_err()
            {
                return;
            }
        }
    })
}

/// A CA, an intermediate and a leaf for 127.0.0.1 valid `days` more days.
struct Chain {
    ca_pem: String,
    leaf: CertificateDer<'static>,
    inter: CertificateDer<'static>,
    key: Vec<u8>,
}

/// (year, month, day) of a Unix day number (Howard Hinnant's civil_from_days).
fn civil(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as i32;
    (y, m, d)
}

fn chain(days: i64) -> Chain {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "redline test root");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let ca = Issuer::new(ca_params, ca_key);
    let int_key = KeyPair::generate().unwrap();
    let mut int_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    int_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    int_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "redline test intermediate");
    let int_cert = int_params.signed_by(&int_key, &ca).unwrap();
    let int = Issuer::new(int_params, int_key);
    let leaf_key = KeyPair::generate().unwrap();
    let mut leaf_params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (y, m, d) = civil(now / 86_400 - 2);
    leaf_params.not_before = rcgen::date_time_ymd(y, m, d);
    // Expires at the start of day now+days+1: `days` whole days left.
    let (y, m, d) = civil(now / 86_400 + days + 1);
    leaf_params.not_after = rcgen::date_time_ymd(y, m, d);
    let leaf = leaf_params.signed_by(&leaf_key, &int).unwrap();
    Chain {
        ca_pem: ca_cert.pem(),
        leaf: CertificateDer::from(leaf.der().to_vec()),
        inter: CertificateDer::from(int_cert.der().to_vec()),
        key: leaf_key.serialize_der(),
    }
}

struct Tls {
    full_chain: bool,
    resumption: bool,
    ocsp: Option<Vec<u8>>,
}

fn server_config(c: &Chain, t: Tls) -> Arc<rustls::ServerConfig> {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(c.key.clone()));
    let certs = if t.full_chain {
        vec![c.leaf.clone(), c.inter.clone()]
    } else {
        vec![c.leaf.clone()]
    };
    let b = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth();
    let mut cfg = match t.ocsp {
        Some(o) => b.with_single_cert_with_ocsp(certs, key, o).unwrap(),
        None => b.with_single_cert(certs, key).unwrap(),
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    if !t.resumption {
        cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        cfg.send_tls13_tickets = 0;
    }
    Arc::new(cfg)
}

fn write_ca(c: &Chain, tag: &str) -> (std::path::PathBuf, String) {
    let dir = tmpdir(tag);
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &c.ca_pem).unwrap();
    let s = ca.to_str().unwrap().to_string();
    (dir, s)
}

const GOOD_HEADERS: &str = "Strict-Transport-Security: max-age=31536000; includeSubDomains\r\n\
X-Content-Type-Options: nosniff\r\n\
Content-Security-Policy: default-src 'self'; frame-ancestors 'self'\r\n\
Referrer-Policy: strict-origin-when-cross-origin\r\n\
Set-Cookie: sid=SECRET-COOKIE-VALUE; Path=/; Secure; HttpOnly; SameSite=Lax\r\n\
Server: nginx\r\n\
Alt-Svc: h3=\":443\"; ma=86400\r\n";

const BAD_HEADERS: &str = "Strict-Transport-Security: max-age=86400\r\n\
Content-Security-Policy: script-src 'self' 'unsafe-inline'\r\n\
Referrer-Policy: unsafe-url\r\n\
X-Frame-Options: ALLOW-FROM https://other.example\r\n\
Set-Cookie: sid=SECRET-COOKIE-VALUE; Path=/\r\n\
Server: Apache/2.4.62 (Debian)\r\n\
X-Powered-By: PHP/8.2.7\r\n";

#[test]
fn security_headers_and_cookies_are_graded_with_fixes() {
    let c = chain(365);
    let (dir, ca) = write_ca(&c, "sec");
    let tls = || Tls {
        full_chain: true,
        resumption: true,
        ocsp: None,
    };
    let good = tls_site(
        server_config(&c, tls()),
        Site {
            headers: GOOD_HEADERS.into(),
            body: "<html><p>good</p></html>".into(),
        },
    );
    let bad = tls_site(
        server_config(&c, tls()),
        Site {
            headers: BAD_HEADERS.into(),
            body: "<html><p>bad</p></html>".into(),
        },
    );
    // Plain http on another port: one redirects to https on the same host,
    // one serves the page as is.
    let https_port = good.addr.port();
    let (redir, _) = routed_server(move |_, _| {
        resp(
            "301 Moved Permanently",
            &format!("Location: https://127.0.0.1:{https_port}/\r\n"),
            "",
        )
    });
    let (plain, _) = routed_server(|_, _| resp("200 OK", "", "<html>plain</html>"));

    let url = format!("https://127.0.0.1:{https_port}/");
    let port = redir.addr.port().to_string();
    let (v, out) = audit_json(&["--cacert", &ca, "--http-port", &port, &url]);
    assert!(out.status.success());
    for id in [
        "hsts",
        "x-content-type-options",
        "clickjacking",
        "referrer-policy",
        "csp",
        "cookies",
        "server-version",
        "https",
        "tls-chain",
        "tls-certificate",
        "tls-resumption",
    ] {
        let ch = check(&v, id);
        assert_eq!(
            (ch["grade"].as_str(), ch["severity"].as_str()),
            (Some("A"), Some("ok")),
            "{id}: {ch}"
        );
        assert!(ch.get("fix").is_none(), "{id}");
    }
    let h3 = check(&v, "alt-svc-h3");
    assert_eq!(h3["weight"], 0);
    assert!(h3["summary"].as_str().unwrap().contains("h3="), "{h3}");

    let url = format!("https://127.0.0.1:{}/", bad.addr.port());
    let port = plain.addr.port().to_string();
    let (v, out) = audit_json(&["--cacert", &ca, "--http-port", &port, &url]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("SECRET-COOKIE-VALUE"), "cookie value printed");
    let sev = |id: &str| check(&v, id)["severity"].as_str().unwrap().to_string();
    assert_eq!(sev("hsts"), "warning");
    assert_eq!(sev("x-content-type-options"), "warning");
    assert_eq!(sev("clickjacking"), "warning");
    assert_eq!(sev("referrer-policy"), "warning");
    assert_eq!(sev("csp"), "warning");
    assert_eq!(sev("cookies"), "warning");
    assert_eq!(sev("server-version"), "info");
    assert_eq!(sev("https"), "error");
    let ev = |id: &str| check(&v, id)["findings"][0]["evidence"].to_string();
    assert!(ev("csp").contains("unsafe-inline"), "{}", ev("csp"));
    assert!(ev("hsts").contains("under 180 days"), "{}", ev("hsts"));
    for attr in ["Secure", "HttpOnly", "SameSite"] {
        assert!(ev("cookies").contains(attr), "{}", ev("cookies"));
    }
    assert!(
        ev("server-version").contains("Apache/2.4.62")
            && ev("server-version").contains("PHP/8.2.7")
    );
    // Each with its fix for the three servers.
    let fix = |id: &str, server: &str| check(&v, id)["fix"][server].as_str().unwrap().to_string();
    assert!(fix("hsts", "apache").contains("Strict-Transport-Security"));
    assert!(fix("hsts", "nginx").contains("always"));
    assert!(fix("x-content-type-options", "lighttpd").contains("nosniff"));
    assert!(fix("server-version", "apache").contains("ServerTokens Prod"));
    assert!(fix("server-version", "nginx").contains("server_tokens off;"));
    assert!(fix("server-version", "lighttpd").contains("server.tag"));
    assert!(fix("https", "nginx").contains("return 301 https://$host$request_uri;"));
    // Bad input: a port out of range is one line and exit 2.
    let out = redline(&["audit", "--http-port", "0", &url]);
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tls_chain_expiry_stapling_and_resumption() {
    // Leaf only (no intermediate), 5 days left, no resumption: three findings.
    let c = chain(5);
    let (dir, ca) = write_ca(&c, "tls");
    let srv = tls_site(
        server_config(
            &c,
            Tls {
                full_chain: false,
                resumption: false,
                ocsp: None,
            },
        ),
        Site {
            headers: String::new(),
            body: "<html>tls</html>".into(),
        },
    );
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());
    // The page's own load cannot verify an incomplete chain: --insecure; the
    // probe still checks the chain against the roots and --cacert.
    let closed = free_port().to_string();
    let (v, _) = audit_json(&["--insecure", "--cacert", &ca, "--http-port", &closed, &url]);
    let chain_c = check(&v, "tls-chain");
    assert_eq!(chain_c["severity"], "error", "{chain_c}");
    assert!(chain_c["summary"]
        .as_str()
        .unwrap()
        .contains("only its own certificate"));
    assert!(chain_c["fix"]["nginx"]
        .as_str()
        .unwrap()
        .contains("fullchain"));
    let cert = check(&v, "tls-certificate");
    assert_eq!(cert["severity"], "error", "{cert}");
    assert!(
        cert["summary"]
            .as_str()
            .unwrap()
            .contains("expires in 5 days"),
        "{cert}"
    );
    let res = check(&v, "tls-resumption");
    assert_eq!(res["severity"], "warning", "{res}");
    assert!(res["fix"]["nginx"]
        .as_str()
        .unwrap()
        .contains("ssl_session_cache"));
    assert_eq!(check(&v, "ocsp-stapling")["applicable"], false);
    assert!(check(&v, "tls-protocol")["summary"]
        .as_str()
        .unwrap()
        .contains("TLSv1.3"));

    // Full chain, 20 days left, a stapled response, resumption: only the expiry warns.
    let c = chain(20);
    let (dir2, ca) = write_ca(&c, "tls2");
    let srv = tls_site(
        server_config(
            &c,
            Tls {
                full_chain: true,
                resumption: true,
                ocsp: Some(b"stapled-response".to_vec()),
            },
        ),
        Site {
            headers: String::new(),
            body: "<html>tls</html>".into(),
        },
    );
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());
    let (v, _) = audit_json(&["--cacert", &ca, "--http-port", &closed, &url]);
    assert_eq!(check(&v, "tls-chain")["grade"], "A");
    assert_eq!(check(&v, "tls-resumption")["grade"], "A");
    assert_eq!(check(&v, "ocsp-stapling")["grade"], "A");
    let cert = check(&v, "tls-certificate");
    assert_eq!(cert["severity"], "warning", "{cert}");
    assert!(cert["summary"]
        .as_str()
        .unwrap()
        .contains("expires in 20 days"));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}

fn dom_attr(dom: &str, name: &str) -> usize {
    dom.split(&format!("{name}=\""))
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn html_report_shows_the_new_checks_and_the_not_applicable_ones_apart() {
    let (srv, _) = routed_server(|head, _| {
        if head.starts_with("GET /gone") {
            resp("404 Not Found", "", "<html>gone</html>")
        } else {
            resp(
                "200 OK",
                "Server: Apache/2.4.62 (Debian)\r\nSet-Cookie: sid=SECRET-COOKIE-VALUE; Path=/\r\n",
                "<html><p>hello</p></html>",
            )
        }
    });
    let dir = tmpdir("audit-html");
    for (path, failed) in [("/", false), ("/gone", true)] {
        let html = dir.join(if failed { "gone.html" } else { "ok.html" });
        let url = format!("{}{}", srv.url(), path.trim_start_matches('/'));
        let out = redline(&["audit", "-q", "--html", html.to_str().unwrap(), &url]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&html).unwrap();
        assert!(!text.contains("SECRET-COOKIE-VALUE"));
        assert_eq!(text.contains("id=\"page-failed\""), failed);
        let Some((dom, _)) = common::chromium_dump(&html, &dir, None) else {
            return;
        };
        assert!(dom_attr(&dom, "data-na-checks") >= 5, "not-applicable rows");
        assert!(dom.contains("Not applicable"));
        if failed {
            assert!(dom.contains("The page itself failed"), "{dom}");
            assert!(dom.contains("answered 404"));
            assert!(dom.contains("big\">F</span>"));
        } else {
            // The security checks are graded rows with their fixes.
            assert!(dom_attr(&dom, "data-checks") >= 8);
            for s in [
                "Content-Security-Policy",
                "X-Content-Type-Options: nosniff",
                "ServerTokens Prod",
                "server_tokens off;",
                "Secure, HttpOnly, SameSite",
            ] {
                assert!(dom.contains(s), "{s}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_plain_http_port_that_never_answers_does_not_hold_the_audit() {
    let c = chain(365);
    let (dir, ca) = write_ca(&c, "mute");
    let srv = tls_site(
        server_config(
            &c,
            Tls {
                full_chain: true,
                resumption: true,
                ocsp: None,
            },
        ),
        Site {
            headers: String::new(),
            body: "<html>x</html>".into(),
        },
    );
    // Accepts, reads, never answers (until the client goes away).
    let mute = ScriptServer::start(|mut s| {
        let mut b = [0u8; 1024];
        for _ in 0..1000 {
            if matches!(s.read(&mut b), Ok(0) | Err(_)) {
                return;
            }
        }
    });
    let url = format!("https://127.0.0.1:{}/", srv.addr.port());
    let port = mute.addr.port().to_string();
    // The page's own requests may take 60 s; the probe is bounded by the
    // 1 s connect time-out, so the audit ends well inside the harness's limit.
    let (out, _) = common::redline_with_limit(
        &[
            "audit",
            "-o",
            "json",
            "-q",
            "--timeout",
            "60s",
            "--connect-timeout",
            "1s",
            "--cacert",
            &ca,
            "--http-port",
            &port,
            &url,
        ],
        std::time::Duration::from_secs(40),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let h = check(&v, "https");
    assert!(
        h["summary"].as_str().unwrap().contains("nothing answered"),
        "{h}"
    );
    assert_eq!(h["severity"], "ok");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A PNG header (signature + IHDR, palette colours) of `w`×`h`, padded to `len` bytes.
fn png(w: u32, h: u32, len: usize) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&[8, 3, 0, 0, 0, 0, 0, 0, 0]);
    v.resize(len, 0);
    v
}

#[test]
fn image_sizes_follow_the_viewport_model_of_the_screen() {
    // p.png: 720×540, its only srcset candidate, 200 px wide on a desktop
    // and 100vw on a phone (sizes). h.png: 720×480, 360 px wide by a
    // stylesheet rule, 100 px under 600 px.
    let (srv, _) = routed_server(|head, _| {
        let path = head.split_whitespace().nth(1).unwrap_or("/");
        let raw = |ct: &str, body: Vec<u8>| {
            let mut r = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nCache-Control: max-age=86400\r\n\r\n",
                body.len()
            )
            .into_bytes();
            r.extend_from_slice(&body);
            r
        };
        match path {
            "/" => resp(
                "200 OK",
                "",
                "<!doctype html><html><head><meta name=viewport content=\"width=device-width\">\
                 <link rel=stylesheet href=/s.css></head><body>\
                 <img srcset=\"/p.png 720w\" sizes=\"(max-width: 500px) 100vw, 200px\" alt=p>\
                 <img class=hero src=/h.png alt=h></body></html>",
            ),
            "/s.css" => raw(
                "text/css",
                b"img.hero { width: 360px }\n@media (max-width: 600px) { img.hero { width: 100px } }\n"
                    .to_vec(),
            ),
            "/p.png" => raw("image/png", png(720, 540, 100_000)),
            "/h.png" => raw("image/png", png(720, 480, 30_000)),
            _ => resp("404 Not Found", "", "nope"),
        }
    });
    let url = format!("http://{}/", srv.addr);
    let flagged = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["--no-probes"];
        args.extend_from_slice(extra);
        args.push(&url);
        let (v, out) = audit_json(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let c = check(&v, "images-scaled");
        let mut urls: Vec<String> = c["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let u = f["url"].as_str().unwrap_or_default();
                u.rsplit('/').next().unwrap_or_default().to_string()
            })
            .collect();
        urls.sort();
        urls
    };
    // Desktop, DPR 1: p.png needs 200×150 and h.png 360×240: both too large.
    assert_eq!(flagged(&["--dpr", "1"]), ["h.png", "p.png"]);
    // DPR 4 on a desktop: p.png needs 800 px wide, h.png 1440: neither.
    assert_eq!(flagged(&["--dpr", "4"]), Vec::<String>::new());
    // Phone (412 px at 1.75): p.png at 100vw needs 721 px, more than its 720;
    // h.png at 100 px needs 175: still too large.
    assert_eq!(flagged(&["--mobile"]), ["h.png"]);
    // The same phone at DPR 1: p.png needs only 412 px again.
    assert_eq!(flagged(&["--mobile", "--dpr", "1"]), ["h.png", "p.png"]);
}

/// What stands before the first paint, from the page's own waterfall: the
/// head's stylesheet (answering after 400 ms) and synchronous script (after
/// 150 ms) block it, and are charged what each adds after the HTML arrived;
/// deferred, async, module, print and body resources do not block; each
/// also gets its time on Lighthouse's simulated link. The
/// chain page → sheet → @import is 3 levels (the font it names was
/// preloaded by the page: found at level 2, as Lighthouse draws it). An unused preconnect
/// and an unused preload are flagged; a preloaded font the CSS uses is not.
/// Cache-TTL findings state what a repeat visitor downloads again.
#[test]
fn render_blocking_chain_hints_and_repeat_visitor_bytes() {
    const PAGE: &str = r#"<!DOCTYPE html><html><head>
<link rel=preconnect href="http://unused.invalid">
<link rel=preload as=image href="/never.png">
<link rel=preload as=font href="/f.woff2" crossorigin>
<link rel=stylesheet href="/head.css">
<link rel=stylesheet href="/print.css" media=print>
<script src="/sync.js"></script>
<script defer src="/defer.js"></script>
<script async src="/async.js"></script>
<script type=module src="/mod.js"></script>
</head><body><p class=f>hello</p>
<link rel=stylesheet href="/body.css">
</body></html>"#;
    let (srv, _) = routed_server(|head, _| {
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let (ct, cache, body, wait): (&str, &str, Vec<u8>, u64) = match path.as_str() {
            "/" => ("text/html", "no-cache", PAGE.as_bytes().to_vec(), 0),
            "/head.css" => ("text/css", "", b"@import url(/imported.css);".to_vec(), 400),
            "/imported.css" => (
                "text/css",
                "max-age=3600",
                b"@font-face{font-family:f;src:url(/f.woff2)}.f{font-family:f}".to_vec(),
                0,
            ),
            "/sync.js" => ("text/javascript", "", b"var s=1;".to_vec(), 150),
            "/f.woff2" => ("font/woff2", "max-age=31536000", vec![0u8; 3000], 0),
            "/never.png" | "/favicon.ico" => ("image/png", "max-age=31536000", vec![0u8; 5000], 0),
            p if p.ends_with(".css") => ("text/css", "", b"p{color:red}".to_vec(), 0),
            _ => ("text/javascript", "", b"var a=1;".to_vec(), 0),
        };
        std::thread::sleep(std::time::Duration::from_millis(wait));
        let cc = if cache.is_empty() {
            String::new()
        } else {
            format!("Cache-Control: {cache}\r\n")
        };
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\n{cc}Content-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend(body);
        r
    });
    let (v, out) = audit_json(&["--no-probes", &srv.url()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rb = check(&v, "render-blocking");
    let urls: Vec<String> = rb["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            f["url"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    // The two blocking resources, each charged what it adds after the
    // HTML arrived beyond the one that ended before it (from 50 ms a
    // finding): the one that ended last always, together at least the
    // sheet's 400 ms (machine load only adds); nothing deferred.
    assert!(
        !urls.is_empty() && urls.iter().all(|u| u == "head.css" || u == "sync.js"),
        "{rb:#}"
    );
    let charged: Vec<f64> = rb["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["saving_ms"].as_f64().unwrap())
        .collect();
    assert!(charged.iter().all(|c| *c >= 50.0), "{charged:?}");
    let total = charged.iter().sum::<f64>();
    assert!((350.0..10_000.0).contains(&total), "{charged:?}");
    assert_eq!(rb["severity"], "warning", "{rb:#}");
    // On Lighthouse's desktop link (40 ms round trips) each takes at least
    // a round trip; the script, on a connection of its own (the sheet has
    // the page's), its handshake too: at least 80 ms.
    let link: Vec<(String, f64)> = rb["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let u = f["url"].as_str().unwrap();
            (
                u.rsplit('/').next().unwrap().to_string(),
                f["link_ms"].as_f64().unwrap(),
            )
        })
        .collect();
    assert!(link.iter().all(|(_, ms)| *ms >= 40.0), "{link:?}");
    assert!(
        link.iter().any(|(u, ms)| u == "sync.js" && *ms >= 80.0)
            || !urls.contains(&"sync.js".to_string()),
        "{link:?}"
    );
    // The first view's render-critical time ends with the head's blocking
    // resources (the 400 ms sheet); its network-complete time after.
    let first = &v["views"][0];
    let render = first["render_ms"].as_f64().expect("render_ms");
    assert!(render >= 400.0, "{first}");
    assert!(
        render <= first["elapsed_ms"].as_f64().unwrap() + 0.01,
        "{first}"
    );
    let chain = check(&v, "critical-chain");
    let path = chain["summary"].as_str().unwrap();
    assert!(path.starts_with("longest chain: 3 levels"), "{chain:#}");
    assert_eq!(chain["findings"][0]["severity"], "info", "{chain:#}");
    let order: Vec<usize> = ["/ (", "/head.css", "/imported.css"]
        .iter()
        .map(|p| path.find(p).unwrap_or_else(|| panic!("{p} not in {path}")))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{path}");
    let hints = check(&v, "resource-hints");
    let found: Vec<String> = hints["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.to_string())
        .collect();
    assert_eq!(found.len(), 2, "{hints:#}");
    assert!(
        found.iter().any(|f| f.contains("unused.invalid")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|f| f.contains("never.png") && f.contains("\"saving_bytes\"")),
        "{found:?}"
    );
    assert!(!found.iter().any(|f| f.contains("f.woff2")), "{found:?}");
    // A repeat visitor downloads again: everything of an uncached response,
    // 80 % of one cached for an hour (Lighthouse's cache-hit model).
    let cs = check(&v, "cache-static");
    let per_resource: Vec<&Value> = cs["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["url"].is_string())
        .collect();
    // Every CSS and JS but the hour-cached one has no lifetime.
    assert_eq!(per_resource.len(), 8, "{cs:#}");
    for f in per_resource {
        let url = f["url"].as_str().unwrap();
        let saving = f["saving_bytes"].as_u64().unwrap();
        assert!(
            f["evidence"]
                .as_str()
                .unwrap()
                .contains("a repeat visitor downloads"),
            "{f}"
        );
        if url.ends_with("/imported.css") {
            let wire = saving as f64 / 0.8;
            assert!((150.0..400.0).contains(&wire), "{f}");
        } else {
            assert!(saving > 0, "{f}");
        }
    }
    assert!(
        cs["summary"]
            .as_str()
            .unwrap()
            .contains("a repeat visitor would download"),
        "{cs:#}"
    );
}
