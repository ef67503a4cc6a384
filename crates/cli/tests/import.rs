//! Real traffic in: a page recorded by headless Chromium (a HAR built from
//! its DevTools network events, validated against docs/har-1.2.schema.json)
//! imported with `redline import har` and run against the same nginx;
//! generated template values (`{{uuid}}`, `{{seq}}`…) seen in nginx's access
//! log, repeated by `--seed`; `--urls` lists; bad input for each format.

mod common;

use common::nginx::{start_nginx, tmpdir, NginxSite};
use common::*;
use redline_testkit::chromium::DevTools;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Runs redline; (exit code, stdout, stderr).
fn rl(args: &[&str]) -> (i32, String, String) {
    let o = redline(args);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// nginx with an access log of `$request_method $request_uri $status $http_x_id`.
fn nginx_logging(tag: &str, files: &[(&str, Vec<u8>)]) -> Option<common::nginx::Nginx> {
    start_nginx(&NginxSite {
        tag,
        files,
        tls: None,
        h2: false,
        http_extra: "log_format t '$request_method $request_uri $status [$http_x_id]'; access_log {d}/access.log t;",
        types: "text/html html; text/css css; application/javascript js; image/png png; application/json json;",
    })
}

fn access_log(n: &common::nginx::Nginx) -> Vec<String> {
    std::fs::read_to_string(n.dir.join("access.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn status_codes(v: &Value) -> Vec<(String, u64)> {
    v["status_codes"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------- Chromium

/// Loads `url` in headless Chromium (testkit's DevTools launcher) and
/// returns its DevTools network events (requestWillBeSent, responseReceived,
/// loadingFinished), read until the load event and one quiet second after it
/// (bounded: 60 s in all).
fn chromium_network_events(devtools: &mut DevTools, url: &str) -> Vec<Value> {
    let (_, sid) = devtools.new_tab();
    devtools.call(Some(&sid), "Network.enable", json!({}));
    devtools.call(Some(&sid), "Page.enable", json!({}));
    devtools.call(Some(&sid), "Page.navigate", json!({"url": url}));
    let mut events = Vec::new();
    let end = Instant::now() + Duration::from_secs(60);
    let mut loaded: Option<Instant> = None;
    let mut last = Instant::now();
    while Instant::now() < end {
        if loaded.is_some_and(|l| l.elapsed() > Duration::from_secs(1))
            && last.elapsed() > Duration::from_secs(1)
        {
            break;
        }
        let Some(v) = devtools.next_event(end.min(Instant::now() + Duration::from_millis(250)))
        else {
            continue;
        };
        if v["method"] == "Page.loadEventFired" {
            loaded = Some(Instant::now());
        }
        if v["method"]
            .as_str()
            .is_some_and(|m| m.starts_with("Network."))
        {
            last = Instant::now();
            events.push(v);
        }
    }
    assert!(loaded.is_some(), "{url}: no load event within 60 s");
    events
}

fn iso(wall_s: f64) -> String {
    let ms = (wall_s * 1000.0).round() as i64;
    let (secs, ms) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn pairs(h: &Value) -> Vec<Value> {
    h.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| json!({"name": k, "value": v.as_str().unwrap_or("")}))
                .collect()
        })
        .unwrap_or_default()
}

/// A HAR 1.2 log from DevTools network events, as Chromium's own export
/// builds it (one page, an entry per finished request).
fn har_from_events(events: &[Value], page_url: &str) -> Value {
    use std::collections::BTreeMap;
    let mut sent: BTreeMap<String, &Value> = BTreeMap::new();
    let mut resp: BTreeMap<String, &Value> = BTreeMap::new();
    let mut done: BTreeMap<String, f64> = BTreeMap::new();
    let mut order = Vec::new();
    for e in events {
        let p = &e["params"];
        let Some(id) = p["requestId"].as_str() else {
            continue;
        };
        match e["method"].as_str().unwrap_or("") {
            "Network.requestWillBeSent" => {
                if !sent.contains_key(id) {
                    order.push(id.to_string());
                }
                sent.insert(id.to_string(), p);
            }
            "Network.responseReceived" => {
                resp.insert(id.to_string(), p);
            }
            "Network.loadingFinished" => {
                done.insert(id.to_string(), p["timestamp"].as_f64().unwrap_or(0.0));
            }
            _ => {}
        }
    }
    let first_wall = order
        .first()
        .and_then(|id| sent[id]["wallTime"].as_f64())
        .unwrap_or(0.0);
    let mut entries = Vec::new();
    for id in &order {
        let (Some(s), Some(r)) = (sent.get(id), resp.get(id)) else {
            continue;
        };
        let start = s["timestamp"].as_f64().unwrap_or(0.0);
        let time = done
            .get(id)
            .map_or(0.0, |d| ((d - start) * 1000.0).max(0.0));
        let req = &s["request"];
        let url = req["url"].as_str().unwrap_or("");
        let query: Vec<Value> = url
            .split_once('?')
            .map(|(_, q)| {
                q.split('&')
                    .map(|p| {
                        let (k, v) = p.split_once('=').unwrap_or((p, ""));
                        json!({"name": k, "value": v})
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut request = json!({
            "method": req["method"], "url": url, "httpVersion": "HTTP/1.1",
            "cookies": [], "headers": pairs(&req["headers"]), "queryString": query,
            "headersSize": -1, "bodySize": 0,
        });
        if let Some(body) = req["postData"].as_str() {
            request["postData"] = json!({
                "mimeType": req["headers"]["Content-Type"].as_str().unwrap_or(""),
                "text": body,
            });
            request["bodySize"] = json!(body.len());
        }
        let rs = &r["response"];
        entries.push(json!({
            "pageref": "page_1",
            "startedDateTime": iso(s["wallTime"].as_f64().unwrap_or(0.0)),
            "time": time,
            "request": request,
            "response": {
                "status": rs["status"], "statusText": rs["statusText"].as_str().unwrap_or(""),
                "httpVersion": "HTTP/1.1", "cookies": [], "headers": pairs(&rs["headers"]),
                "content": {"size": 0, "mimeType": rs["mimeType"].as_str().unwrap_or("")},
                "redirectURL": "", "headersSize": -1, "bodySize": -1,
            },
            "cache": {},
            "timings": {"send": 0, "wait": time, "receive": 0},
        }));
    }
    json!({"log": {
        "version": "1.2",
        "creator": {"name": "redline-test (Chromium DevTools)", "version": "1"},
        "pages": [{"startedDateTime": iso(first_wall), "id": "page_1", "title": page_url,
                   "pageTimings": {}}],
        "entries": entries,
    }})
}

fn assert_har_schema(v: &Value) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/har-1.2.schema.json"
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("HAR schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn a_page_recorded_by_chromium_imports_and_runs_against_nginx_all_2xx() {
    let Some(mut devtools) = DevTools::launch("har") else {
        return;
    };
    let png = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==",
    )
    .unwrap();
    // A page with a stylesheet, a script, images (one on "localhost": another
    // host, third-party by name) and a fetch carrying credentials.
    let page = "<!doctype html><html><head><link rel=icon href=/icon.png>\
        <link rel=stylesheet href=/style.css><script src=/app.js></script></head>\
        <body><img src=/img.png><img src=\"http://localhost:PORT/img.png?third=1\">\
        <p id=out></p></body></html>";
    let js = "fetch('/api.json?access_token=SECRETQUERY&page=2', {headers: \
        {'Authorization': 'Bearer SECRETHEADER', 'X-Id': 'fetch'}})\
        .then(r => r.text()).then(t => { document.getElementById('out').textContent = t; });";
    let Some(n) = nginx_logging(
        "har-import",
        &[
            ("index.html", page.as_bytes().to_vec()),
            ("style.css", b"body { color: #333 }".to_vec()),
            ("app.js", js.as_bytes().to_vec()),
            ("img.png", png.clone()),
            ("icon.png", png.clone()),
            ("favicon.ico", png),
            ("api.json", b"{\"ok\":true}".to_vec()),
        ],
    ) else {
        return;
    };
    // The page names its own port for the third-party image.
    std::fs::write(
        n.dir.join("site/index.html"),
        page.replace("PORT", &n.port.to_string()),
    )
    .unwrap();
    let page_url = format!("http://127.0.0.1:{}/index.html", n.port);
    let events = chromium_network_events(&mut devtools, &page_url);
    let har = har_from_events(&events, &page_url);
    assert_har_schema(&har);
    let entries = har["log"]["entries"].as_array().unwrap();
    let urls: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["request"]["url"].as_str())
        .collect();
    for want in [
        "/index.html",
        "/style.css",
        "/app.js",
        "/img.png",
        "/api.json",
    ] {
        assert!(
            urls.iter().any(|u| u.contains(want)),
            "{want} not recorded: {urls:?}"
        );
    }
    assert!(urls.iter().any(|u| u.contains("localhost")), "{urls:?}");
    let dir = tmpdir("har-import-out");
    let har_path = dir.join("page.har");
    std::fs::write(&har_path, serde_json::to_vec_pretty(&har).unwrap()).unwrap();

    // Import: no credential in the scenario, the third-party host dropped.
    let (code, toml, err) = rl(&["import", "har", har_path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("third-party") && err.contains("authorization"),
        "{err}"
    );
    for secret in ["SECRETQUERY", "SECRETHEADER"] {
        assert!(
            !toml.contains(secret) && !err.contains(secret),
            "{secret}:\n{toml}"
        );
    }
    assert!(
        !toml.contains("http://localhost") && toml.contains("localhost (1)"),
        "{toml}"
    );
    let sc = dir.join("page.toml");
    std::fs::write(&sc, &toml).unwrap();
    let parsed: toml::Value = toml::from_str(&toml).unwrap();
    let steps = parsed["request"].as_array().unwrap().len();
    assert!(steps >= 5, "{toml}");

    // Run it as is against the same nginx: every answer 2xx, every step sent.
    let before = access_log(&n).len();
    let v = run_json(&[
        "--scenario",
        sc.to_str().unwrap(),
        "-n",
        &(steps * 2).to_string(),
        "-c",
        "1",
        "--no-save",
    ]);
    let codes = status_codes(&v);
    assert!(
        !codes.is_empty() && codes.iter().all(|(c, _)| c.starts_with('2')),
        "{codes:?}"
    );
    assert_eq!(
        codes.iter().map(|(_, n)| n).sum::<u64>(),
        (steps * 2) as u64,
        "{codes:?}"
    );
    let log = access_log(&n)[before..].to_vec();
    assert_eq!(log.len(), steps * 2, "{log:#?}");
    for want in [
        "/index.html",
        "/style.css",
        "/app.js",
        "/api.json?access_token=redacted&page=2",
    ] {
        assert!(log.iter().any(|l| l.contains(want)), "{want}: {log:#?}");
    }
    // The header the page's script set, not the credential, reached nginx.
    assert!(log.iter().any(|l| l.ends_with("[fetch]")), "{log:#?}");

    // --all-hosts keeps the third-party image; --keep-secrets the credentials.
    let (code, all, _) = rl(&[
        "import",
        "har",
        har_path.to_str().unwrap(),
        "--all-hosts",
        "--keep-secrets",
    ]);
    assert_eq!(code, 0);
    assert!(
        all.contains("localhost") && all.contains("SECRETHEADER"),
        "{all}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_har_input_is_one_line_and_exit_2() {
    let dir = tmpdir("har-bad");
    let w = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let cases = [
        (w("notjson.har", "{\"log\": [1, 2"), "not JSON"),
        (w("nolog.har", "{\"entries\": []}"), "not a HAR"),
        (w("ctl.har", "{\"log\":{\"entries\":[{\"request\":{\"method\":\"G\\u001b[2JT\",\"url\":\"http://127.0.0.1/\"}}]}}"), "invalid method"),
        (dir.join("missing.har").to_string_lossy().into_owned(), "missing.har"),
        (dir.to_string_lossy().into_owned(), "directory"),
    ];
    for (path, want) in cases {
        let (code, out, err) = rl(&["import", "har", &path]);
        assert_eq!(code, 2, "{path}: {err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{want}: {err}");
        assert!(!err.contains('\x1b'), "{err:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------- generated values

fn gen_scenario(dir: &Path, port: u16) -> PathBuf {
    let p = dir.join("gen.toml");
    std::fs::write(
        &p,
        format!(
            "base = \"http://127.0.0.1:{port}\"\n\n[[request]]\nname = \"g\"\n\
             path = \"/a.txt?u={{{{uuid}}}}&i={{{{random_int(1,1000000000)}}}}&s={{{{random_string(12)}}}}&q={{{{seq}}}}&v={{{{vu}}}}&it={{{{iteration}}}}\"\n\
             headers = {{ X-Id = \"{{{{uuid}}}}-{{{{now_ms}}}}\" }}\n"
        ),
    )
    .unwrap();
    p
}

/// The logged query strings of `run`'s requests, the X-Id's clock part dropped.
fn run_logged(n: &common::nginx::Nginx, sc: &Path, seed: &str) -> Vec<String> {
    let before = access_log(n).len();
    let v = run_json(&[
        "--scenario",
        sc.to_str().unwrap(),
        "-n",
        "8",
        "-c",
        "1",
        "-t",
        "1",
        "--seed",
        seed,
        "--no-save",
    ]);
    assert_eq!(status_codes(&v), vec![("200".to_string(), 8)]);
    access_log(n)[before..]
        .iter()
        .map(|l| l.rsplit_once('-').map_or(l.clone(), |(a, _)| a.to_string()))
        .collect()
}

#[test]
fn generated_values_differ_per_request_and_repeat_with_the_seed() {
    let Some(n) = nginx_logging("har-gen", &[("a.txt", b"ok".to_vec())]) else {
        return;
    };
    let dir = tmpdir("har-gen-sc");
    let sc = gen_scenario(&dir, n.port);
    let a = run_logged(&n, &sc, "7");
    assert_eq!(a.len(), 8, "{a:#?}");
    // Every request its own uuid, number and string; seq counts 0..7.
    let field = |l: &str, k: &str| {
        l.split(['?', '&', ' '])
            .find_map(|p| p.strip_prefix(&format!("{k}=")))
            .unwrap_or_default()
            .to_string()
    };
    for k in ["u", "i", "s"] {
        let mut vals: Vec<String> = a.iter().map(|l| field(l, k)).collect();
        vals.sort();
        vals.dedup();
        assert_eq!(vals.len(), 8, "{k}: {a:#?}");
    }
    let seqs: Vec<String> = a.iter().map(|l| field(l, "q")).collect();
    assert_eq!(seqs, (0..8).map(|i| i.to_string()).collect::<Vec<_>>());
    assert!(
        a.iter()
            .all(|l| field(l, "u").len() == 36 && field(l, "s").len() == 12),
        "{a:#?}"
    );
    // The header's uuid is drawn too (not the query's).
    assert!(
        a.iter()
            .all(|l| !l.contains(&format!("[{}", field(l, "u")))),
        "{a:#?}"
    );
    // Same seed: the same values; another seed: others.
    assert_eq!(run_logged(&n, &sc, "7"), a);
    let c = run_logged(&n, &sc, "8");
    assert_ne!(field(&c[0], "u"), field(&a[0], "u"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_template_names_are_errors_with_file_and_line() {
    let dir = tmpdir("har-gen-bad");
    for (body, want) in [
        ("path = \"/x?{{nope}}\"", "unknown variable '{{nope}}'"),
        ("path = \"/x?{{random_int(9,1)}}\"", "lower bound is above"),
        (
            "path = \"/x?{{random_string(0)}}\"",
            "length must be within",
        ),
        ("path = \"/x?{{shuffle(3)}}\"", "unknown function 'shuffle'"),
        (
            "path = \"/\"\nbody = \"{{\\u001b[2J}}\"",
            "unknown variable",
        ),
    ] {
        let p = dir.join("t.toml");
        std::fs::write(
            &p,
            format!("base = \"http://127.0.0.1:9\"\n\n[[request]]\n{body}\n"),
        )
        .unwrap();
        let (code, _, err) = rl(&[
            "run",
            "--scenario",
            p.to_str().unwrap(),
            "-n",
            "1",
            "--no-save",
        ]);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{want}: {err}");
        assert!(
            err.contains("t.toml:4") || err.contains("t.toml:5"),
            "{err}"
        );
        assert!(!err.contains('\x1b'), "{err:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------------ --urls

#[test]
fn urls_lists_run_round_robin_or_random_with_a_per_url_report() {
    let Some(n) = nginx_logging(
        "har-urls",
        &[
            ("a.txt", b"a".to_vec()),
            ("b.txt", b"bb".to_vec()),
            ("c.txt", b"c".to_vec()),
        ],
    ) else {
        return;
    };
    let dir = tmpdir("har-urls-list");
    let list = dir.join("urls.txt");
    std::fs::write(
        &list,
        format!(
            "# vegeta's format, and bare URLs\nGET http://127.0.0.1:{p}/a.txt\nX-Id: first\n\nhttp://127.0.0.1:{p}/b.txt\nHEAD /c.txt\n",
            p = n.port
        ),
    )
    .unwrap();
    let base = format!("http://127.0.0.1:{}", n.port);
    let before = access_log(&n).len();
    let v = run_json(&[
        "--urls",
        list.to_str().unwrap(),
        &base,
        "-n",
        "30",
        "-c",
        "1",
        "--no-save",
    ]);
    assert_eq!(status_codes(&v), vec![("200".to_string(), 30)]);
    let log = access_log(&n)[before..].to_vec();
    let count = |s: &str| log.iter().filter(|l| l.starts_with(s)).count();
    assert_eq!(
        (
            count("GET /a.txt 200 [first]"),
            count("GET /b.txt 200 [-]"),
            count("HEAD /c.txt")
        ),
        (10, 10, 10),
        "{log:#?}"
    );
    let names: Vec<(String, u64)> = v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["sent"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[2].0, "HEAD /c.txt");

    // Random order: the same seed, the same choices.
    let random = |seed: &str| {
        let before = access_log(&n).len();
        run_json(&[
            "--urls",
            list.to_str().unwrap(),
            &base,
            "--urls-order",
            "random",
            "--seed",
            seed,
            "-n",
            "30",
            "-c",
            "1",
            "-t",
            "1",
            "--no-save",
        ]);
        access_log(&n)[before..].to_vec()
    };
    let r1 = random("3");
    assert_eq!(r1.len(), 30);
    assert_eq!(random("3"), r1);
    let paths: std::collections::BTreeSet<&str> =
        r1.iter().filter_map(|l| l.split(' ').nth(1)).collect();
    assert_eq!(paths.len(), 3, "{r1:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_urls_lists_are_one_line_and_exit_2() {
    let dir = tmpdir("har-urls-bad");
    for (text, want) in [
        ("", "no targets"),
        ("Accept: x\n", "line 1: expected a target"),
        ("GET http://127.0.0.1:9/\nnot a header\n", "line 2:"),
        (
            "GET http://127.0.0.1:9/\x1b[2J\n",
            "line 1: control characters",
        ),
        ("/only/a/path\n", "every target is a path"),
    ] {
        let p = dir.join("u.txt");
        std::fs::write(&p, text).unwrap();
        let (code, _, err) = rl(&["run", "--urls", p.to_str().unwrap(), "-n", "1", "--no-save"]);
        assert_eq!(code, 2, "{text:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{want}: {err}");
        assert!(!err.contains('\x1b'), "{err:?}");
    }
    let (code, _, err) = rl(&[
        "run",
        "--urls",
        dir.join("none.txt").to_str().unwrap(),
        "--no-save",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
