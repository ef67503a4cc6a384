//! The JSON documents of `redline page -o json` and `redline audit -o json`
//! validate against the committed schemas (docs/page.schema.json,
//! docs/audit.schema.json), on a real page served from 127.0.0.1:0.

mod common;

use common::read_head;
use common::redline;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The fixture files, served under any directory by their file name.
const FILES: [&str; 5] = [
    "index.html",
    "style.css",
    "more.css",
    "app.js",
    "frame.html",
];

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "css" => "text/css",
        "js" => "application/javascript",
        _ => "application/octet-stream",
    }
}

fn fixture(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../web/tests/fixtures/site")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// A keep-alive static server for the fixture site: `/` is index.html, a
/// known file name under any directory is that file, anything else is 404.
struct Site {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Site {
    fn start() -> Site {
        let files: Arc<Vec<(&'static str, Vec<u8>)>> =
            Arc::new(FILES.iter().map(|&n| (n, fixture(n))).collect());
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let lifetime = Instant::now() + Duration::from_secs(120);
            while !s2.load(Ordering::SeqCst) && Instant::now() < lifetime {
                match listener.accept() {
                    Ok((sock, _)) => {
                        let files = files.clone();
                        std::thread::spawn(move || serve(sock, &files));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Site {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers up to 200 requests on one connection.
fn serve(mut s: TcpStream, files: &[(&'static str, Vec<u8>)]) {
    if s.set_nonblocking(false).is_err()
        || s.set_read_timeout(Some(Duration::from_secs(10))).is_err()
        || s.set_write_timeout(Some(Duration::from_secs(10))).is_err()
    {
        return;
    }
    for _ in 0..200 {
        let Some(head) = read_head(&mut s) else {
            return;
        };
        let mut words = head.split_whitespace();
        let method = words.next().unwrap_or("GET").to_string();
        let target = words.next().unwrap_or("/");
        let path = target.split(['?', '#']).next().unwrap_or("/");
        let name = match path.rsplit('/').next().unwrap_or("") {
            "" => "index.html",
            n => n,
        };
        let close = head.lines().any(|l| {
            let l = l.to_ascii_lowercase();
            l.starts_with("connection:") && l.contains("close")
        });
        let (status, ct, body): (&str, &str, &[u8]) = match files.iter().find(|(n, _)| *n == name) {
            Some((n, b)) => ("200 OK", content_type(n), b),
            None => ("404 Not Found", "text/plain", b"not found\n"),
        };
        let resp = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
            body.len(),
            if close { "close" } else { "keep-alive" }
        );
        let body = if method == "HEAD" { &[][..] } else { body };
        if s.write_all(resp.as_bytes())
            .and_then(|_| s.write_all(body))
            .and_then(|_| s.flush())
            .is_err()
            || close
        {
            return;
        }
    }
}

fn run_json(args: &[&str]) -> serde_json::Value {
    let out = redline(args);
    assert!(
        out.status.success(),
        "redline {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn validator(file: &str) -> jsonschema::Validator {
    let path = format!("{}/../../docs/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let schema: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"));
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{path} does not compile: {e}"))
}

fn assert_valid(v: &jsonschema::Validator, doc: &serde_json::Value, what: &str) {
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not validate:\n{}\n{}",
        errors.join("\n"),
        serde_json::to_string_pretty(doc).unwrap()
    );
}

#[test]
fn page_and_audit_json_validate_against_the_committed_schemas() {
    let site = Site::start();
    let url = site.url();

    // redline page
    let page_schema = validator("page.schema.json");
    let page = run_json(&["page", "-q", "-o", "json", &url]);
    assert_valid(&page_schema, &page, "redline page -o json");
    assert_eq!(page["format"], "redline.page");
    let views = page["views"].as_array().expect("views");
    assert_eq!(views.len(), 3);
    assert_eq!(views[0]["view"], "first");
    let first = views[0]["entries"].as_array().expect("entries");
    assert!(first.len() > 1, "first view has too few entries: {first:?}");
    assert!(
        first.iter().any(|e| e["status"] == 404),
        "the missing images should answer 404"
    );

    // redline audit
    let audit_schema = validator("audit.schema.json");
    let audit = run_json(&["audit", "-o", "json", &url]);
    assert_valid(&audit_schema, &audit, "redline audit -o json");
    assert_eq!(audit["format"], "redline.audit");
    let broken = audit["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "broken")
        .expect("a broken-resources check");
    assert!(
        !broken["findings"].as_array().unwrap().is_empty(),
        "the 404s should be reported: {broken}"
    );

    // Broken documents fail.
    let mut bad = page.clone();
    bad["version"] = "x".into();
    assert!(
        !page_schema.is_valid(&bad),
        "page with version \"x\" validated"
    );
    let mut bad = audit.clone();
    bad["version"] = "x".into();
    assert!(
        !audit_schema.is_valid(&bad),
        "audit with version \"x\" validated"
    );
    let mut bad = page.clone();
    bad["views"][0]["entries"][0]["surprise"] = true.into();
    assert!(
        !page_schema.is_valid(&bad),
        "page with an unknown field validated"
    );
    let mut bad = audit.clone();
    bad["grade"] = "G".into();
    assert!(!audit_schema.is_valid(&bad), "audit with grade G validated");
    // Each document is not the other.
    assert!(!page_schema.is_valid(&audit));
    assert!(!audit_schema.is_valid(&page));
}
