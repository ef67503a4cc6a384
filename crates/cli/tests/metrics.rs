//! Metrics out (`--metrics-listen`, `--prometheus-rw`, `--otlp`) against a
//! real Prometheus (Debian's 2.42, started here with its own config on a
//! free loopback port, scraping redline and receiving its remote write) and
//! a real nginx: the totals Prometheus has after the run must be the run
//! record's. Prometheus 2.42 has no OTLP receiver (2.47 added one), so the
//! OTLP push goes to a receiver in this test that decodes it with the
//! official `opentelemetry-proto` types. Every panel of
//! docs/grafana-dashboard.json is queried against the same Prometheus.
//! Bad input: busy and invalid addresses, bad URLs (exit 2, one line), an
//! unreachable push URL (the run goes on, one warning, counted).

mod common;

use common::nginx::{free_port, start_nginx, tmpdir, NginxSite};
use common::{bin, counter, redline, wait_limit};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point};
use prost::Message;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// A Prometheus started by the test; killed (by PID) and removed on drop.
struct Prom {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts Prometheus scraping `scrape` every second, remote write receiving on.
fn start_prometheus(scrape: &str) -> Option<Prom> {
    if !redline_testkit::need::require(
        "prometheus (apt-get install -y prometheus)",
        Path::new(PROMETHEUS).exists(),
    ) {
        return None;
    }
    let dir = tmpdir("prometheus");
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: scrape\n    static_configs:\n      - targets: ['{scrape}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(PROMETHEUS)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--web.enable-remote-write-receiver")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    let mut p = Prom { child, port, dir };
    // Ready within 60 s (bounded), watched by PID.
    let t = Instant::now();
    loop {
        if let Ok(Some(st)) = p.child.try_wait() {
            let log = std::fs::read_to_string(p.dir.join("prometheus.log")).unwrap_or_default();
            panic!("prometheus exited ({st}): {log}");
        }
        // Ready, and already scraping the target (Prometheus applies new
        // targets every 5 s): so the run is scraped from its start.
        if get(port, "/-/ready").is_some_and(|(c, _)| c == 200)
            && get(port, "/api/v1/targets?state=active")
                .is_some_and(|(_, b)| b.contains("\"lastError\"") && !b.contains("0001-01-01"))
        {
            return Some(p);
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "prometheus not ready in 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// GET http://127.0.0.1:port/path: status and body (None: no answer).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut b = Vec::new();
    s.take(64 << 20).read_to_end(&mut b).ok()?;
    let t = String::from_utf8_lossy(&b).to_string();
    let code = t.split_whitespace().nth(1)?.parse().ok()?;
    let body = t.split_once("\r\n\r\n").map(|x| x.1.to_string())?;
    // Prometheus answers small JSON bodies unchunked; a chunked one is decoded simply.
    if t.to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body.as_str();
        while let Some((size, more)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            if n == 0 {
                break;
            }
            out.push_str(more.get(..n)?);
            rest = more.get(n + 2..)?;
        }
        return Some((code, out));
    }
    Some((code, body))
}

fn enc(q: &str) -> String {
    q.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// An instant query (at `time`, Unix seconds, or now): the result vector.
fn query(port: u16, q: &str, time: Option<f64>) -> Result<Vec<serde_json::Value>, String> {
    let mut path = format!("/api/v1/query?query={}", enc(q));
    if let Some(t) = time {
        path.push_str(&format!("&time={t:.3}"));
    }
    let (code, body) = get(port, &path).ok_or("no answer")?;
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("HTTP {code}: {e}: {body}"))?;
    if v["status"] != "success" {
        return Err(format!("{q}: {body}"));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

/// The single value of `q` (sum over series), None when empty.
fn value(port: u16, q: &str) -> Option<f64> {
    let r = query(port, &format!("sum({q})"), None).ok()?;
    r.first()?["value"][1].as_str()?.parse().ok()
}

/// Polls (bounded: 30 s) until `q` equals `want`; returns what it last saw.
fn settle(port: u16, q: &str, want: f64) -> Option<f64> {
    let t = Instant::now();
    loop {
        let v = value(port, q);
        if v == Some(want) || t.elapsed() > Duration::from_secs(30) {
            return v;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// An OTLP/HTTP receiver: keeps every decoded request.
fn otlp_receiver() -> (u16, Arc<Mutex<Vec<ExportMetricsServiceRequest>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for c in l.incoming().take(10_000) {
            let Ok(mut s) = c else { continue };
            s.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            let mut need: Option<usize> = None;
            while buf.len() < 16 << 20 {
                if let Some(n) = need {
                    if buf.len() >= n {
                        break;
                    }
                }
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                if need.is_none() {
                    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..p]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        need = Some(p + 4 + len);
                    }
                }
            }
            if let Some(n) = need.filter(|n| buf.len() >= *n) {
                let start = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                if let Ok(r) = ExportMetricsServiceRequest::decode(&buf[start..n]) {
                    g.lock().unwrap().push(r);
                }
            }
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (port, got)
}

fn otlp_int(r: &ExportMetricsServiceRequest, name: &str) -> Option<i64> {
    let m = r.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .find(|m| m.name == name)?;
    match m.data.as_ref()? {
        Data::Sum(s) => Some(
            s.data_points
                .iter()
                .map(|p| match p.value {
                    Some(number_data_point::Value::AsInt(v)) => v,
                    _ => 0,
                })
                .sum(),
        ),
        _ => None,
    }
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// One staged scenario run against nginx, exported three ways at once;
/// Prometheus' totals (scraped and remote-written), the OTLP receiver's,
/// and every dashboard panel are checked against the run record.
#[test]
fn prometheus_scrape_remote_write_and_otlp_match_the_record() {
    let mport = free_port();
    let Some(prom) = start_prometheus(&format!("127.0.0.1:{mport}")) else {
        return;
    };
    let Some(ng) = start_nginx(&NginxSite {
        tag: "metrics",
        files: &[("index.html", vec![b'x'; 440])],
        tls: None,
        h2: false,
        http_extra: "",
        types: "text/html html;",
    }) else {
        return;
    };
    let (oport, otlp) = otlp_receiver();
    let dir = tmpdir("metrics-scenario");
    let sc = dir.join("s.toml");
    std::fs::write(
        &sc,
        "name = \"m\"\nbase = \"http://127.0.0.1:1\"\nmode = \"round-robin\"\n\n[[request]]\nname = \"page\"\npath = \"/index.html\"\n\n[[request]]\nname = \"missing\"\npath = \"/missing.html\"\n",
    )
    .unwrap();
    let url = format!("http://user:s3cret@127.0.0.1:{}", ng.port);
    let listen = format!("127.0.0.1:{mport}");
    let rw = format!("http://127.0.0.1:{}/api/v1/write", prom.port);
    let ot = format!("http://127.0.0.1:{oport}/v1/metrics");
    let sc_s = sc.display().to_string();
    let args = [
        "run",
        "-o",
        "json",
        "-q",
        "--no-save",
        "--scenario",
        &sc_s,
        "--stages",
        "2s:2,3s:4",
        "--step",
        "-t",
        "1",
        "--metrics-listen",
        &listen,
        "--metrics-linger",
        "30s",
        "--metrics-interval",
        "1s",
        "--prometheus-rw",
        &rw,
        "--otlp",
        &ot,
        &url,
    ];
    let child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_limit(child, Duration::from_secs(90));
    let end = now_s();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {err}", out.status);
    assert!(!err.contains("push failed"), "{err}");
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let completed = counter(&rec, "completed") as f64;
    assert!(completed > 0.0);
    let codes = &rec["status_codes"];
    let n200 = codes["200"].as_u64().unwrap_or(0) as f64;
    let n404 = codes["404"].as_u64().unwrap_or(0) as f64;
    assert!(n200 > 0.0 && n404 > 0.0, "{codes}");
    let lat = rec["latency"]["count"].as_u64().unwrap() as f64;
    assert_eq!(lat, completed);
    eprintln!("record: {completed} completed, {n200} 200, {n404} 404, latency count {lat}");

    // Scraped (job="scrape") and remote-written (job="redline") alike.
    // Stale markers follow the scrape target's end, so totals are read as
    // the last value over the run.
    let p = prom.port;
    for job in ["scrape", "redline"] {
        let m = |name: &str, sel: &str| format!("max_over_time({name}{{job=\"{job}\"{sel}}}[10m])");
        assert_eq!(
            settle(p, &m("redline_requests_completed_total", ""), completed),
            Some(completed),
            "{job}: completed"
        );
        assert_eq!(
            settle(p, &m("redline_responses_total", ",class=\"2xx\""), n200),
            Some(n200),
            "{job}: 2xx"
        );
        assert_eq!(
            settle(p, &m("redline_responses_total", ",class=\"4xx\""), n404),
            Some(n404),
            "{job}: 4xx"
        );
        // The status rule: the 404s are the answers counted as failed.
        assert_eq!(
            settle(p, &m("redline_responses_refused_total", ""), n404),
            Some(n404),
            "{job}: refused"
        );
        assert_eq!(
            settle(p, &m("redline_latency_seconds_count", ""), completed),
            Some(completed),
            "{job}: latency count"
        );
        assert_eq!(
            settle(
                p,
                &m("redline_latency_seconds_bucket", ",le=\"+Inf\""),
                completed
            ),
            Some(completed),
            "{job}: +Inf bucket"
        );
        // Per stage: the first stage's whole seconds are the record's
        // stage 1 (the drain after the last stage counts in the last one).
        let want = rec["stages"][0]["requests"].as_f64().unwrap();
        assert_eq!(
            settle(p, &m("redline_responses_total", ",stage=\"1\""), want),
            Some(want),
            "{job}: stage 1"
        );
        assert_eq!(
            value(p, &m("redline_responses_total", ",stage=\"2\"")),
            Some(completed - want),
            "{job}: stage 2 and the drain"
        );
        // Per named request.
        for r in rec["requests"].as_array().unwrap() {
            let name = r["name"].as_str().unwrap();
            let want = r["completed"].as_f64().unwrap();
            let sel = format!(",request=\"{name}\"");
            assert_eq!(
                settle(p, &m("redline_request_responses_total", &sel), want),
                Some(want),
                "{job}: request {name}"
            );
        }
        // The finished run, and no secret in any label.
        assert_eq!(value(p, &m("redline_run_finished", "")), Some(1.0));
        let series = get(
            p,
            &format!(
                "/api/v1/series?match[]={}",
                enc(&format!("{{job=\"{job}\"}}"))
            ),
        )
        .unwrap()
        .1;
        assert!(series.contains("redline_errors_total"), "{series}");
        assert!(
            !series.contains("s3cret") && !series.contains("user"),
            "{series}"
        );
    }

    // The p99 Prometheus computes from the scraped (and remote-written)
    // buckets is within 10 % of the record's own (issue 35: 33 % high with
    // the former coarse buckets).
    let rec_p99 = rec["latency"]["percentiles_us"]["p99"].as_f64().unwrap() / 1e6;
    for job in ["scrape", "redline"] {
        let q = format!(
            "histogram_quantile(0.99, sum by (le) (max_over_time(redline_latency_seconds_bucket{{job=\"{job}\"}}[10m])))"
        );
        let prom_p99 = value(p, &q).unwrap_or_else(|| panic!("{job}: no p99 for {q}"));
        eprintln!(
            "{job}: p99 {:.3} ms from Prometheus, {:.3} ms in the record",
            prom_p99 * 1e3,
            rec_p99 * 1e3
        );
        assert!(
            (prom_p99 - rec_p99).abs() <= 0.10 * rec_p99,
            "{job}: Prometheus p99 {prom_p99} s vs the record's {rec_p99} s"
        );
    }

    // OTLP: the last push is the record's.
    let got = otlp.lock().unwrap();
    assert!(
        got.len() >= 2,
        "a push per second and one at the end: {}",
        got.len()
    );
    let last = got.last().unwrap();
    assert_eq!(
        otlp_int(last, "redline_requests_completed"),
        Some(completed as i64)
    );
    let lat_m = last.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .find(|m| m.name == "redline_latency_seconds")
        .unwrap();
    let Some(Data::ExponentialHistogram(h)) = &lat_m.data else {
        panic!("latency is an exponential histogram: {lat_m:?}");
    };
    let count: u64 = h.data_points.iter().map(|d| d.count).sum();
    let in_buckets: u64 = h
        .data_points
        .iter()
        .map(|d| {
            d.zero_count
                + d.positive
                    .as_ref()
                    .map_or(0, |b| b.bucket_counts.iter().sum())
        })
        .sum();
    assert_eq!(count as f64, completed);
    assert_eq!(in_buckets, count);
    let text = format!("{last:?}");
    assert!(!text.contains("s3cret"), "no secret in OTLP attributes");
    drop(got);

    // Every dashboard panel's expression is accepted and has data at the
    // end of the run.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/grafana-dashboard.json"
        ))
        .unwrap(),
    )
    .unwrap();
    // At the time of the last scrape (the final values): instant selectors
    // still see every series there, before the stale markers that follow
    // the target's end.
    let raw = query(p, "redline_run_finished{job=\"scrape\"}[10m]", None).unwrap();
    let t_final = raw[0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v[0].as_f64())
        .fold(0.0, f64::max);
    assert!(t_final > 0.0 && t_final <= end + 1.0, "{t_final} {end}");
    let mut n = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap();
            let q = expr
                .replace("$__rate_interval", "1m")
                .replace("$__interval", "5s")
                .replace("$__range", "10m")
                .replace("$job", "scrape")
                .replace("$target", ".*");
            let r = query(p, &q, Some(t_final))
                .unwrap_or_else(|e| panic!("panel {:?}: {e}", panel["title"]));
            assert!(
                !r.is_empty(),
                "panel {:?}: no data for {q} at {t_final}; samples: {:?}",
                panel["title"],
                query(
                    p,
                    "redline_requests_completed_total{job=\"scrape\"}[10m]",
                    None
                )
            );
            n += 1;
        }
    }
    assert!(n >= 6, "{n} panel queries");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad input: one line on stderr, exit 2, before any traffic.
#[test]
fn bad_metrics_flags_are_one_line_exit_2() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_addr = busy.local_addr().unwrap().to_string();
    let cases: [(&[&str], &str); 5] = [
        (&["--metrics-listen", "nonsense"], "--metrics-listen"),
        (&["--metrics-listen", &busy_addr], "--metrics-listen"),
        (&["--prometheus-rw", "ftp://u:pw@x/"], "--prometheus-rw"),
        (&["--otlp", "not a url"], "--otlp"),
        (
            &["--metrics-interval", "1ms", "--otlp", "http://127.0.0.1:1/"],
            "--metrics-interval",
        ),
    ];
    for (flags, what) in cases {
        let mut a = vec!["run", "-n", "1", "--no-save", "-q"];
        a.extend_from_slice(flags);
        a.push("http://127.0.0.1:1/");
        let out = redline(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{flags:?}: {err}");
        assert!(err.contains(what), "{flags:?}: {err}");
        assert!(!err.contains("pw@"), "{err}");
    }
}

/// An unreachable push URL: the run goes on, one warning line, and the
/// failed pushes are counted in the record.
#[test]
fn unreachable_push_url_warns_once_and_counts() {
    let srv = common::builtin();
    let dead = free_port();
    let rw = format!("http://u:pw@127.0.0.1:{dead}/api/v1/write?k=pw");
    let ot = format!("http://u:pw@127.0.0.1:{dead}/v1/metrics");
    let url = format!("http://{}/", srv.local_addr());
    let out = redline(&[
        "run",
        "-o",
        "json",
        "-q",
        "--no-save",
        "-d",
        "1500ms",
        "-c",
        "2",
        "--metrics-interval",
        "200ms",
        "--prometheus-rw",
        &rw,
        "--otlp",
        &ot,
        &url,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    // One line per URL, however many pushes failed.
    assert_eq!(warnings.len(), 2, "{err}");
    assert!(
        warnings.iter().any(|w| w.contains("--prometheus-rw")),
        "{err}"
    );
    assert!(warnings.iter().any(|w| w.contains("--otlp")), "{err}");
    assert!(!err.contains("pw"), "{err}");
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(counter(&rec, "completed") > 0);
    let w = rec["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "metrics_push")
        .unwrap_or_else(|| panic!("{}", rec["warnings"]));
    let msg = w["message"].as_str().unwrap();
    assert!(
        msg.contains("--prometheus-rw") && msg.contains("--otlp"),
        "{msg}"
    );
    assert!(msg.contains("pushes failed"), "{msg}");
    assert!(!msg.contains("pw"), "{msg}");
}

/// The scrape endpoint answers while the run goes, in both text formats.
#[test]
fn scrape_endpoint_serves_both_formats_during_the_run() {
    let srv = common::builtin();
    let mport = free_port();
    let listen = format!("127.0.0.1:{mport}");
    let url = format!("http://{}", srv.local_addr());
    let dir = tmpdir("metrics-live");
    let sc = dir.join("s.toml");
    std::fs::write(
        &sc,
        "name = \"m\"\nbase = \"http://127.0.0.1:1\"\nmode = \"round-robin\"\n\n[[request]]\nname = \"home\"\npath = \"/?size=10\"\n",
    )
    .unwrap();
    let sc_s = sc.display().to_string();
    let child = redline_testkit::proc::spawn(
        bin(),
        &[
            "run",
            "-q",
            "--no-save",
            "-d",
            "3s",
            "-c",
            "2",
            "--scenario",
            &sc_s,
            "--metrics-listen",
            &listen,
            &url,
        ],
    );
    // While the run goes: the named request's count is there and above 0
    // (bounded: 10 s), and the run is not finished yet.
    let t = Instant::now();
    let mut plain = None;
    while t.elapsed() < Duration::from_secs(10) {
        plain = get(mport, "/metrics").filter(|(c, b)| {
            *c == 200
                && b.lines().any(|l| {
                    l.starts_with("redline_request_responses_total{")
                        && l.contains("request=\"home\"")
                        && !l.ends_with(" 0")
                })
        });
        if plain.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, plain) = plain.expect("the request's count while the run goes");
    assert!(
        plain
            .lines()
            .any(|l| l.starts_with("redline_run_finished{") && l.ends_with(" 0")),
        "{plain}"
    );
    assert!(
        plain.contains("# TYPE redline_requests_completed_total counter"),
        "{plain}"
    );
    assert!(!plain.contains("# EOF"));
    let mut s = TcpStream::connect(("127.0.0.1", mport)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n").unwrap();
    let mut b = String::new();
    let _ = s.read_to_string(&mut b);
    assert!(b.contains("application/openmetrics-text"), "{b}");
    assert!(
        b.contains("# TYPE redline_requests_completed counter"),
        "{b}"
    );
    assert!(b.trim_end().ends_with("# EOF"), "{b}");
    assert_eq!(get(mport, "/nope").map(|x| x.0), Some(404));
    let out = wait_limit(child, Duration::from_secs(30));
    assert!(out.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `/metrics` during an `--http3` run against the testkit's HTTP/3 server:
/// the completed count grows while the run goes, and never passes what the
/// record and the server count at the end.
#[test]
fn scrape_endpoint_counts_an_http3_run() {
    let pki = redline_testkit::pki::pki();
    let dir = tmpdir("metrics-h3");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let srv = redline_testkit::h3::start(&pki, redline_testkit::h3::H3Options::body(10));
    let mport = free_port();
    let listen = format!("127.0.0.1:{mport}");
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let child = redline_testkit::proc::spawn(
        bin(),
        &[
            "run",
            "-q",
            "--no-save",
            "-o",
            "json",
            "--http3",
            "--cacert",
            ca.to_str().unwrap(),
            "--rate",
            "200",
            "-d",
            "2s",
            "-c",
            "2",
            "--metrics-listen",
            &listen,
            &url,
        ],
    );
    let completed = |body: &str| -> Option<u64> {
        body.lines()
            .find(|l| l.starts_with("redline_requests_completed_total"))?
            .rsplit(' ')
            .next()?
            .parse()
            .ok()
    };
    let t = Instant::now();
    let mut seen = None;
    while t.elapsed() < Duration::from_secs(10) {
        seen = get(mport, "/metrics")
            .and_then(|(_, b)| completed(&b))
            .filter(|n| *n > 0);
        if seen.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = seen.expect("completed requests on /metrics while the run goes");
    let out = wait_limit(child, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let done = counter(&v, "completed");
    assert!(seen <= done && done >= 300, "{seen} then {}", v["counters"]);
    assert_eq!(
        srv.counts
            .answered
            .load(std::sync::atomic::Ordering::Relaxed),
        done
    );
    let _ = std::fs::remove_dir_all(&dir);
}
