//! The HTML report shows the answer first (issue 35, point 7), rendered in
//! headless Chromium with a screenshot each (kept in the test's folder while
//! it runs; `REDLINE_KEEP_SHOTS=DIR` copies them there to look at):
//! - a staged run against a server that stops scaling (Debian's nginx,
//!   `limit_req` at 200 req/s in front of the built-in target's 10 ms
//!   answers) starts with the stage table, the knee's stage marked, then
//!   throughput against load with the ideal-scaling line and response time
//!   against load;
//! - `report A B` starts with the comparison: both values, the change in %
//!   and the verdict per metric, under a warning when the URLs differ;
//! - a partial last second is drawn as partial (dotted, hollow), not as a
//!   point of the line.

mod common;

use common::nginx::{free_port, start_nginx, tmpdir, NginxSite};
use common::{builtin, chromium_dump};
use std::path::Path;
use std::time::Duration;

/// Runs redline (90 s at most) and asserts it succeeded; its stdout.
fn ok(args: &[&str]) -> Vec<u8> {
    let (out, _) = common::redline_with_limit(args, Duration::from_secs(90));
    assert!(
        out.status.success(),
        "{args:?}: exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Renders `page` in headless Chromium with a screenshot: the DOM after the
/// page's script ran (None: no Chromium, allowed outside CI only).
fn render(page: &Path, dir: &Path, name: &str) -> Option<String> {
    let shot = dir.join(format!("{name}.png"));
    let (dom, log) = chromium_dump(page, dir, Some(&shot))?;
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    assert!(dom.contains("data-charts="), "the page's script ran");
    assert!(
        std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0) > 10_000,
        "screenshot {}",
        shot.display()
    );
    if let Ok(keep) = std::env::var("REDLINE_KEEP_SHOTS") {
        let _ = std::fs::create_dir_all(&keep);
        let _ = std::fs::copy(&shot, Path::new(&keep).join(format!("{name}.png")));
    }
    Some(dom)
}

/// Where `needle` first appears in `hay` (panics when absent).
fn at(hay: &str, needle: &str) -> usize {
    hay.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in the page"))
}

#[test]
fn a_staged_report_starts_with_the_stage_table_and_the_knee() {
    let target = builtin();
    let front = free_port();
    // nginx lets 200 requests a second through to the built-in target
    // (excess requests wait their turn): the server stops scaling there.
    let extra = format!(
        "limit_req_zone $binary_remote_addr zone=cap:1m rate=200r/s;
  server {{ listen 127.0.0.1:{front};
    location / {{ limit_req zone=cap burst=100000; proxy_pass http://{}; }} }}",
        target.local_addr()
    );
    let Some(_ng) = start_nginx(&NginxSite {
        tag: "html-staged",
        files: &[],
        tls: None,
        h2: false,
        http_extra: &extra,
        types: "",
    }) else {
        return;
    };
    let dir = tmpdir("html-staged");
    let page = dir.join("staged.html");
    let json = dir.join("staged.json");
    let url = format!("http://127.0.0.1:{front}/?delay=10ms");
    let out = ok(&[
        "run",
        "-q",
        "--no-save",
        "-o",
        "json",
        "--stages",
        "3s:1,3s:2,3s:4,3s:8",
        "--step",
        "--html",
        page.to_str().unwrap(),
        &url,
    ]);
    std::fs::write(&json, &out).unwrap();
    let rec: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let knee = rec["knee"]["level"]
        .as_f64()
        .unwrap_or_else(|| panic!("a knee at the 200 req/s cap: {}", rec["stages"]));
    assert!(knee <= 2.0, "knee at {knee}: {}", rec["stages"]);
    let html = std::fs::read_to_string(&page).unwrap();
    // The answer first: the stage table and the load charts come before
    // the summary and the charts over time.
    let table = at(&html, "<table class=\"stages\">");
    let thr = at(&html, "Throughput against load");
    let lat = at(&html, "Response time against load");
    let summary = at(&html, "<h2>Summary</h2>");
    assert!(table < thr && thr < lat && lat < summary, "order");
    assert!(html[..table].contains("<h2>Load levels</h2>"));
    // One row per stage, the knee's marked.
    let body = &html[table..at(&html[table..], "</table>") + table];
    assert_eq!(body.matches("<tr").count(), 1 + 4, "{body}");
    assert_eq!(body.matches("class=\"knee\"").count(), 1, "{body}");
    assert!(body.contains("◀ knee"), "{body}");
    assert!(html.contains("ideal scaling (× the first level)"));
    // The header says the stages, not the last stage's connections alone.
    assert!(html.contains("stages 3s:1,3s:2,3s:4,3s:8 (connections, steps)"));
    let Some(dom) = render(&page, &dir, "staged") else {
        return;
    };
    assert!(dom.contains("class=\"knee\""));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_a_b_has_change_and_verdict_and_warns_of_other_urls() {
    let dir = tmpdir("html-compare");
    let srv = builtin();
    let a = format!("http://{}/?size=300", srv.local_addr());
    let b = format!("http://{}/?size=300&delay=2ms", srv.local_addr());
    let mut records = Vec::new();
    for (label, url) in [("before", &a), ("after", &b)] {
        // 2.5 s: the last second is partial.
        let rec = dir.join(format!("{label}.json"));
        let out = ok(&[
            "run",
            "-q",
            "--no-save",
            "-o",
            "json",
            "-d",
            "2500ms",
            "-c",
            "4",
            url,
        ]);
        std::fs::write(&rec, out).unwrap();
        records.push(rec);
    }
    let page = dir.join("compare.html");
    ok(&[
        "report",
        records[0].to_str().unwrap(),
        records[1].to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    let warn = at(&html, "data-warning=\"different-urls\"");
    let cmp = at(&html, "<h2>Comparison</h2>");
    let summary = at(&html, "<h2>Summary</h2>");
    assert!(warn < cmp && cmp < summary, "order");
    let table = &html[cmp..summary];
    assert!(table.contains("<th>change</th><th>verdict</th>"), "{table}");
    // B answers 2 ms later: its p50 is worse, by far more than the noise.
    let p50 = table
        .split("<tr")
        .find(|r| r.contains("<th>Latency p50"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(p50.contains("class=\"worse\""), "{p50}");
    assert!(p50.contains("%</td>"), "{p50}");
    // The partial last second (2.0-2.5 s) is drawn as partial.
    assert!(html.contains("class=\"partial\""), "partial second");
    assert!(html.contains("partial last second"));
    let Some(dom) = render(&page, &dir, "compare") else {
        return;
    };
    assert!(dom.contains("Different URLs"));
    let _ = std::fs::remove_dir_all(&dir);
}
