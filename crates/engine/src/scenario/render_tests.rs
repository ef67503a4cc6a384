//! Scenario requests rendered as a [`RequestSpec`] and encoded by the one
//! HTTP/1 encoder are byte for byte what the former direct renderer wrote
//! (kept here, as it was, as the reference): every kind of request.

use super::*;

/// The renderer scenario requests had before they became specs: HTTP/1
/// bytes written directly.
fn old_render(s: &Scenario, r: usize, vu: &mut Vu, close: bool) -> Vec<u8> {
    let mut gen = std::mem::take(&mut vu.gen);
    let mut out = Vec::new();
    let mut body = Vec::new();
    let req = &s.requests[r];
    let t = &s.targets[req.target];
    if let Some(b) = &req.body {
        b.render(vu, &mut gen, &mut body);
    }
    out.extend_from_slice(req.method.as_bytes());
    out.push(b' ');
    let before = out.len();
    req.path.render(vu, &mut gen, &mut out);
    if out.len() == before {
        out.push(b'/');
    }
    out.extend_from_slice(if s.http10 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    let has = |n: &str| req.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    if !has("host") {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(t.host_header.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !has("user-agent") {
        out.extend_from_slice(b"User-Agent: ");
        out.extend_from_slice(s.user_agent.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !has("accept") {
        out.extend_from_slice(b"Accept: */*\r\n");
    }
    if let Some(a) = &t.auth {
        if !has("authorization") {
            out.extend_from_slice(b"Authorization: Basic ");
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    for (k, v) in &req.headers {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        v.render(vu, &mut gen, &mut out);
        out.extend_from_slice(b"\r\n");
    }
    if s.cookies && vu.jar.iter().any(|c| c.matches(&t.host)) && !has("cookie") {
        out.extend_from_slice(b"Cookie: ");
        for (i, c) in vu.jar.iter().filter(|c| c.matches(&t.host)).enumerate() {
            if i > 0 {
                out.extend_from_slice(b"; ");
            }
            out.extend_from_slice(c.name.as_bytes());
            out.push(b'=');
            out.extend_from_slice(c.value.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    }
    if req.body.is_some() {
        if let Some(ct) = &req.content_type {
            if !has("content-type") {
                out.extend_from_slice(b"Content-Type: ");
                out.extend_from_slice(ct.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    if req.body.is_some() || matches!(req.method.as_str(), "POST" | "PUT" | "PATCH") {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if s.http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    vu.gen = gen;
    out
}

fn compile(text: &str, base: &str, http10: bool, cli: &[(String, String)]) -> Scenario {
    let f = file::parse(text, "t.toml").unwrap();
    let mut s = Scenario::compile(CompileArgs {
        path: Path::new("t.toml"),
        file: &f,
        text,
        base,
        allow_paths: false,
        tls: &crate::tls::TlsArgs::default(),
        http10,
        cli_headers: cli,
        timeout: Duration::from_secs(1),
    })
    .unwrap();
    s.seed = 42;
    s
}

/// Every kind of scenario request: GET, POST with a body and a form, PUT
/// without body, HEAD, templates in path, headers and body (data, extracted,
/// generated values), a Host header of its own, basic auth from the URL,
/// global and `-H` headers, and the jar's cookies.
const KINDS: &str = r#"
mode = "session"
cookies = true
[headers]
X-Global = "g"
[[step]]
name = "get"
path = "/a?x={{vu}}&i={{iteration}}"
[[step]]
name = "post"
method = "POST"
path = "/login"
body = '{"user":"{{user}}","id":"{{uuid}}"}'
content_type = "application/json"
headers = { X-Trace = "{{random_string(8)}}", Authorization = "Bearer {{token}}" }
[[step]]
name = "form"
path = "/form"
form = { a = "x y", b = "{{user}}" }
[[step]]
name = "put"
method = "PUT"
path = "/empty"
[[step]]
name = "head"
method = "HEAD"
path = "/"
[[step]]
name = "vhost"
path = "/v"
headers = { Host = "vhost.test", Accept = "text/html", User-Agent = "ua/1" }
[[step]]
name = "static"
path = "/static"
[[step]]
name = "extracts"
path = "/x"
extract = [{ name = "user", header = "X-User" }, { name = "token", json = "/t" }]
"#;

fn vu_with_state(s: &Scenario, id: u64) -> Vu {
    let mut vu = s.new_vu(id);
    let user = s.vars.iter().position(|v| v == "user");
    let token = s.vars.iter().position(|v| v == "token");
    for (i, v) in [(user, "ann"), (token, "t0k")] {
        if let Some(i) = i {
            vu.vars[i] = Some(v.into());
        }
    }
    vu::set_cookie(&mut vu.jar, "sid=abc; Path=/", "127.0.0.1");
    vu::set_cookie(
        &mut vu.jar,
        "other=1; Domain=elsewhere.test",
        "elsewhere.test",
    );
    vu::set_cookie(&mut vu.jar, "pref=dark", "127.0.0.1");
    vu
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn scenario_specs_encode_to_the_bytes_the_old_renderer_wrote() {
    let cli = vec![("X-Cli".to_string(), "c".to_string())];
    let mut compared = 0;
    for (base, http10) in [
        ("http://127.0.0.1:8080", false),
        ("http://127.0.0.1:8080", true),
        ("http://u:p%40ss@127.0.0.1:8080", false),
    ] {
        let sc = compile(KINDS, base, http10, &cli);
        for r in 0..sc.requests.len() {
            for close in [false, true] {
                // Two users with the same id and seed draw the same generated values.
                let mut a = vu_with_state(&sc, 3);
                let mut b = vu_with_state(&sc, 3);
                for _ in 0..2 {
                    sc.prepare(r, &mut a, close);
                    let old = old_render(&sc, r, &mut b, close);
                    assert_eq!(
                        s(sc.wire(r, &a, close)),
                        s(&old),
                        "{base} http10={http10} {}",
                        sc.requests[r].name
                    );
                    // The spec is what the bytes say.
                    let spec = sc.spec(r, &a);
                    assert_eq!(s(&spec.encode_h1(close)), s(&old));
                    compared += 1;
                }
            }
        }
    }
    assert_eq!(compared, 3 * 8 * 2 * 2);
}

#[test]
fn a_scenario_spec_has_its_authority_cookies_and_body_for_http2() {
    let sc = compile(KINDS, "http://127.0.0.1:8080", false, &[]);
    let mut vu = vu_with_state(&sc, 1);
    let get = 0;
    sc.prepare(get, &mut vu, false);
    let spec = sc.spec(get, &vu);
    assert_eq!(spec.path, "/a?x=1&i=0");
    assert_eq!(spec.authority, "127.0.0.1:8080");
    // Only the cookies of this host, in the jar's order.
    assert_eq!(spec.header("cookie"), Some("sid=abc; pref=dark"));
    assert_eq!(spec.header("x-global"), Some("g"));
    let h2 = spec.to_h2("http").unwrap();
    assert_eq!(h2.uri.to_string(), "http://127.0.0.1:8080/a?x=1&i=0");
    assert!(h2.headers.get("host").is_none());
    assert_eq!(h2.headers["cookie"], "sid=abc; pref=dark");
    let post = 1;
    sc.prepare(post, &mut vu, false);
    let spec = sc.spec(post, &vu);
    let body = s(&spec.body);
    assert!(body.starts_with(r#"{"user":"ann","id":""#), "{body}");
    assert_eq!(
        spec.header("content-length"),
        Some(&*spec.body.len().to_string())
    );
    assert_eq!(spec.header("authorization"), Some("Bearer t0k"));
    assert_eq!(spec.to_h2("http").unwrap().body.len(), spec.body.len());
    // A Host of its own is where the request goes.
    let vhost = 5;
    sc.prepare(vhost, &mut vu, false);
    assert_eq!(sc.spec(vhost, &vu).authority, "vhost.test");
    // A request nothing varies in is prebuilt: its spec too.
    let st = 6;
    assert!(
        sc.requests[st].fixed.is_none(),
        "cookies: rendered each time"
    );
    let plain = compile(
        "[[request]]\npath = \"/s\"\nmethod = \"POST\"\nbody = \"b\"\n",
        "http://127.0.0.1:8080",
        false,
        &[],
    );
    let vu = plain.new_vu(0);
    assert!(plain.requests[0].fixed.is_some());
    let spec = plain.spec(0, &vu);
    assert_eq!(
        (spec.method.as_str(), spec.body.as_slice()),
        ("POST", &b"b"[..])
    );
    assert_eq!(s(plain.wire(0, &vu, true)), s(&spec.encode_h1(true)));
}

/// A user's buffers are refilled in place: a longer request then a shorter
/// one leaves no field of the first behind.
#[test]
fn a_shorter_request_after_a_longer_one_keeps_none_of_its_fields() {
    let sc = compile(KINDS, "http://127.0.0.1:8080", false, &[]);
    let mut vu = vu_with_state(&sc, 1);
    sc.prepare(1, &mut vu, false);
    sc.prepare(3, &mut vu, false);
    let spec = sc.spec(3, &vu);
    assert!(spec.header("x-trace").is_none() && spec.header("content-type").is_none());
    assert_eq!(spec.header("content-length"), Some("0"));
    assert!(spec.body.is_empty());
}
