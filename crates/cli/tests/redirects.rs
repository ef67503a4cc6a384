//! `-L/--follow-redirects`: hops on one connection when they stay on its
//! origin, credentials never to another origin, loops end as
//! `too_many_redirects`, bad `Location`s as `bad_redirect`, and without `-L`
//! a 3xx is a response like any other. Servers are scripted on 127.0.0.1:0
//! (two ports are two origins) and keep every request they got.

mod common;

use common::*;
use std::sync::{Arc, Mutex};

type Seen = Requests;

fn path_of(head: &str) -> &str {
    head.split(' ').nth(1).unwrap_or("")
}

fn method_of(head: &str) -> &str {
    head.split(' ').next().unwrap_or("")
}

fn redirect(status: u16, location: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 5\r\n\r\nmoved")
        .into_bytes()
}

fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn heads(seen: &Seen) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|(h, _)| h.clone())
        .collect()
}

fn has_header(head: &str, name: &str) -> bool {
    head.lines().any(|l| {
        l.split_once(':')
            .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case(name))
    })
}

/// /a → 302 /b → 301 /c → 200.
fn chain_server() -> (ScriptServer, Seen) {
    routed_server(|head, _| match path_of(head) {
        "/a" => redirect(302, "/b"),
        "/b" => redirect(301, "/c"),
        _ => ok("done"),
    })
}

#[test]
fn same_origin_chain_is_followed_on_one_connection() {
    // A relative and an absolute Location on the same origin.
    let (srv, seen) = {
        let port = Arc::new(Mutex::new(0u16));
        let p2 = port.clone();
        let (srv, seen) = routed_server(move |head, _| match path_of(head) {
            "/a" => redirect(302, "/b"),
            "/b" => redirect(
                301,
                &format!("http://127.0.0.1:{}/c?x=1", p2.lock().unwrap()),
            ),
            "/c?x=1" => ok("final"),
            _ => ok("unexpected"),
        });
        *port.lock().unwrap() = srv.addr.port();
        (srv, seen)
    };
    let url = format!("{}a", srv.url());
    let v = run_json(&["-n", "10", "-c", "1", "-L", &url]);
    assert_eq!(counter(&v, "completed"), 10, "{}", v["errors"]);
    assert_eq!(counter(&v, "failed"), 0);
    assert_eq!(v["status_codes"]["200"], 10, "{}", v["status_codes"]);
    assert_eq!(v["status_codes"].get("302"), None);
    assert_eq!(counter(&v, "redirects"), 20);
    assert_eq!(counter(&v, "body_bytes"), 50, "the final bodies only");
    assert_eq!(v["config"]["follow_redirects"], 10);
    assert_run_schema(&v);
    // The server agrees: 30 requests on one connection, each chain in order.
    let h = heads(&seen);
    assert_eq!(h.len(), 30);
    assert_eq!(srv.accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(counter(&v, "connections_opened"), 1);
    for (k, head) in h.iter().enumerate() {
        let want = ["/a", "/b", "/c?x=1"][k % 3];
        assert_eq!(path_of(head), want, "request {k}");
    }
}

#[test]
fn without_follow_a_302_is_counted_and_not_followed() {
    let (srv, seen) = chain_server();
    let url = format!("{}a", srv.url());
    let v = run_json(&["-n", "10", "-c", "2", &url]);
    assert_eq!(counter(&v, "completed"), 10);
    assert_eq!(counter(&v, "non_2xx"), 10);
    assert_eq!(v["status_codes"]["302"], 10);
    assert_eq!(v["counters"].get("redirects"), None);
    assert_eq!(heads(&seen).len(), 10);
    assert!(heads(&seen).iter().all(|h| path_of(h) == "/a"));
}

/// Server B (another port: another origin) takes what A redirects to it.
fn two_origins() -> (ScriptServer, Seen, ScriptServer, Seen) {
    let (b, b_seen) = routed_server(|head, _| match path_of(head) {
        "/land" => ok("landed"),
        _ => ok("b"),
    });
    let b_url = format!("http://127.0.0.1:{}", b.addr.port());
    let (a, a_seen) = routed_server(move |head, _| match path_of(head) {
        "/start" => redirect(302, &format!("{b_url}/land")),
        "/post307" => redirect(307, &format!("{b_url}/land")),
        "/post303" => redirect(303, &format!("{b_url}/land")),
        "/home" => redirect(302, "/here"),
        _ => ok("a"),
    });
    (a, a_seen, b, b_seen)
}

#[test]
fn credentials_never_go_to_another_origin() {
    let (a, a_seen, b, b_seen) = two_origins();
    let url = format!("{}start", a.url());
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-n",
        "6",
        "-c",
        "2",
        "-L",
        "-H",
        "Authorization: Bearer s3cret-token",
        "-H",
        "Cookie: sid=c00kie-value",
        "-H",
        "Proxy-Authorization: Basic cHJveHk6cHc=",
        "-H",
        "X-Trace: 7",
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Redirects:        6 followed"), "{text}");
    for secret in ["s3cret-token", "c00kie-value", "cHJveHk6cHc="] {
        assert!(!text.contains(secret), "{secret} printed: {text}");
    }
    // A got every request with its credentials; B got every hop without them,
    // with its own Host header and the harmless header kept.
    let (ah, bh) = (heads(&a_seen), heads(&b_seen));
    assert_eq!(ah.len(), 6, "each request starts again at the original URL");
    assert_eq!(bh.len(), 6);
    for h in &ah {
        assert_eq!(path_of(h), "/start");
        assert!(h.contains("Authorization: Bearer s3cret-token\r\n"), "{h}");
        assert!(h.contains("Cookie: sid=c00kie-value\r\n"), "{h}");
    }
    for h in &bh {
        assert_eq!(path_of(h), "/land");
        for name in ["authorization", "proxy-authorization", "cookie"] {
            assert!(!has_header(h, name), "{name} sent to the other origin: {h}");
        }
        assert!(h.contains("X-Trace: 7\r\n"), "{h}");
        assert!(
            h.contains(&format!("Host: 127.0.0.1:{}\r\n", b.addr.port())),
            "{h}"
        );
    }

    // Basic auth from the URL's user:pass@ and from -a: the same.
    let with_user = format!("http://user:pa55word@127.0.0.1:{}/start", a.addr.port());
    let v = run_json(&["-n", "2", "-c", "1", "-L", &with_user]);
    assert_eq!(v["status_codes"]["200"], 2, "{}", v["errors"]);
    let v2 = run_json(&["-n", "2", "-c", "1", "-L", "-a", "u:pw", &url]);
    assert_eq!(v2["status_codes"]["200"], 2);
    let (ah, bh) = (heads(&a_seen), heads(&b_seen));
    assert_eq!(ah.len(), 10);
    assert_eq!(bh.len(), 10);
    assert!(ah[6..].iter().all(|h| has_header(h, "authorization")));
    assert!(bh.iter().all(|h| !has_header(h, "authorization")));
}

#[test]
fn methods_and_bodies_across_hops() {
    let (a, _a_seen, _b, b_seen) = two_origins();
    // 307 keeps POST and its body; 303 makes it a GET without one.
    let v = run_json(&[
        "-n",
        "3",
        "-c",
        "1",
        "-L",
        "-b",
        "payload=1",
        &format!("{}post307", a.url()),
    ]);
    assert_eq!(v["status_codes"]["200"], 3, "{}", v["errors"]);
    let v = run_json(&[
        "-n",
        "3",
        "-c",
        "1",
        "-L",
        "-b",
        "payload=1",
        &format!("{}post303", a.url()),
    ]);
    assert_eq!(v["status_codes"]["200"], 3, "{}", v["errors"]);
    let seen = b_seen.lock().unwrap();
    assert_eq!(seen.len(), 6);
    for (h, body) in &seen[..3] {
        assert_eq!(method_of(h), "POST", "{h}");
        assert_eq!(body, b"payload=1");
    }
    for (h, body) in &seen[3..] {
        assert_eq!(method_of(h), "GET", "{h}");
        assert!(body.is_empty() && !has_header(h, "content-length"), "{h}");
    }
}

#[test]
fn a_redirect_loop_ends_as_too_many_redirects() {
    let (srv, seen) = routed_server(|head, _| match path_of(head) {
        "/loop" => redirect(302, "/loop"),
        "/bad" => redirect(302, "http://[bad"),
        "/ftp" => redirect(301, "ftp://127.0.0.1/x"),
        _ => ok("x"),
    });
    let v = run_json(&[
        "-n",
        "4",
        "-c",
        "1",
        "-L",
        "--max-redirs",
        "3",
        &format!("{}loop", srv.url()),
    ]);
    assert_eq!(error_count(&v, "too_many_redirects"), 4, "{}", v["errors"]);
    assert_eq!(counter(&v, "failed"), 4);
    assert_eq!(counter(&v, "completed"), 0);
    assert_eq!(counter(&v, "redirects"), 12);
    assert_eq!(v["config"]["follow_redirects"], 3);
    assert_eq!(heads(&seen).len(), 16, "1 + 3 hops per request");
    assert_run_schema(&v);

    let v = run_json(&["-n", "3", "-c", "1", "-L", &format!("{}bad", srv.url())]);
    assert_eq!(error_count(&v, "bad_redirect"), 3, "{}", v["errors"]);
    assert_run_schema(&v);
    let v = run_json(&["-n", "2", "-c", "1", "-L", &format!("{}ftp", srv.url())]);
    assert_eq!(error_count(&v, "bad_redirect"), 2, "{}", v["errors"]);

    // The text report names the kind and counts the hops.
    let out = redline(&[
        "run",
        "-q",
        "--no-save",
        "-n",
        "2",
        "-c",
        "1",
        "-L",
        "--max-redirs",
        "1",
        &format!("{}loop", srv.url()),
    ]);
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("too_many_redirects"), "{t}");
    assert!(t.contains("Redirects:        2 followed"), "{t}");
}

#[test]
fn open_loop_and_closed_connections_follow_too() {
    // The redirect closes its connection: the hop needs a new one.
    let (srv, seen) = routed_server(|head, _| {
        match path_of(head) {
        "/go" => b"HTTP/1.1 302 Found\r\nLocation: /there\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            .to_vec(),
        _ => ok("there"),
    }
    });
    let v = run_json(&["-n", "20", "-r", "200", "-L", &format!("{}go", srv.url())]);
    assert_eq!(v["status_codes"]["200"], 20, "{}", v["errors"]);
    assert_eq!(counter(&v, "redirects"), 20);
    assert_eq!(heads(&seen).len(), 40);
}

#[test]
fn bad_flag_combinations() {
    for (args, want) in [
        (vec!["--max-redirs", "3", "http://127.0.0.1:1/"], "follow"),
        (vec!["--http1.1", "--http2", "https://127.0.0.1:1/"], "http"),
    ] {
        let mut a = vec!["run", "-n", "1"];
        a.extend(args.iter().copied());
        let out = redline(&a);
        assert_eq!(out.status.code(), Some(2), "{a:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{a:?}: {err}");
    }
}

#[test]
fn scenario_cookie_jar_follows_hosts_not_redirects() {
    // B on [::1]: another host for cookies (two ports of one host share them).
    let Ok(l6) = std::net::TcpListener::bind("[::1]:0") else {
        eprintln!("note: no IPv6 loopback here; skipped");
        return;
    };
    l6.set_nonblocking(true).unwrap();
    let (b, b_seen) = routed_server_on(l6, |_, _| {
        b"HTTP/1.1 200 OK\r\nSet-Cookie: bsid=from-b\r\nContent-Length: 1\r\n\r\nb".to_vec()
    });
    let b_url = format!("http://[::1]:{}", b.addr.port());
    let (a, a_seen) = routed_server(move |head, _| {
        match path_of(head) {
        "/login" => b"HTTP/1.1 302 Found\r\nLocation: /home\r\nSet-Cookie: sid=jar-s3cret; Path=/\r\nContent-Length: 0\r\n\r\n"
            .to_vec(),
        "/home" => redirect(307, &format!("{b_url}/land")),
        _ => ok("profile"),
    }
    });
    let dir = std::env::temp_dir().join(format!("redline-redir-scn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        "mode = \"session\"\n[[step]]\nname = \"login\"\nmethod = \"POST\"\npath = \"/login\"\nbody = \"u=1\"\ncheck = { status = 200 }\n[[step]]\nname = \"profile\"\npath = \"/profile\"\n",
    )
    .unwrap();
    let v = run_json(&[
        "--scenario",
        file.to_str().unwrap(),
        "-L",
        "-n",
        "6",
        "-c",
        "1",
        &a.url(),
    ]);
    assert_eq!(counter(&v, "completed"), 6, "{}", v["errors"]);
    assert_eq!(counter(&v, "redirects"), 6);
    assert_eq!(v["status_codes"]["200"], 6);
    let login = v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "login")
        .unwrap();
    assert_eq!(login["completed"], 3);
    assert_eq!(login["failed_checks"], 0, "checks see the final response");
    let (ah, bh) = (heads(&a_seen), heads(&b_seen));
    assert_eq!(ah.len(), 9, "login, home, profile per session");
    assert_eq!(bh.len(), 3);
    for h in &ah {
        match path_of(h) {
            // The cookie set by the redirect goes on the next hop and after.
            "/home" | "/profile" => assert!(h.contains("Cookie: sid=jar-s3cret\r\n"), "{h}"),
            _ => {}
        }
        // B's cookie never comes back to A.
        assert!(!h.contains("bsid"), "{h}");
    }
    let homes: Vec<&String> = ah.iter().filter(|h| path_of(h) == "/home").collect();
    assert!(
        homes.iter().all(|h| method_of(h) == "GET"),
        "302 after POST is a GET"
    );
    for h in &bh {
        assert_eq!(
            method_of(h),
            "GET",
            "307 keeps the method of its request: {h}"
        );
        assert!(!has_header(h, "cookie"), "A's cookie went to B: {h}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
