//! `redline compare` of two page loads (`redline page`, saved or as JSON):
//! per view (first, revalidate, cached) the time, requests, bytes on the wire,
//! bytes decoded and errors of A and B, with the same honesty rules as run
//! comparisons. Times are a sample: a verdict needs at least
//! [`MIN_LOADS`] loads on each side (`page -n`), tested with the two-sided
//! Mann-Whitney U test on the per-load times at 95 % with a minimum effect
//! of [`redline_report::compare::MIN_EFFECT_PCT`] %; with fewer the row says "not
//! tested (single load each)" or how many there were. Requests and bytes
//! are counts, shown as changes without a verdict. A view whose page failed
//! to load is not compared (a failure is fast, not a speed-up).

use redline_report::compare::{mann_whitney, LEVEL, MIN_EFFECT_PCT};
use redline_report::{bytes, count};
use serde_json::Value;
use std::fmt::Write as _;

/// Fewest loads per side for a time verdict.
pub const MIN_LOADS: usize = 5;

/// One view's numbers from a page report.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewNums {
    /// `first`, `revalidate` or `cached`.
    pub view: String,
    /// Median time (ms) over the loads whose page loaded.
    pub elapsed_ms: f64,
    /// Every load's time (ms).
    pub runs_ms: Vec<f64>,
    /// Median requests.
    pub requests: u64,
    /// Median bytes on the wire.
    pub wire_bytes: u64,
    /// Median bytes decoded.
    pub decoded_bytes: u64,
    /// Median errors.
    pub errors: u64,
    /// Loads in which the page itself did not load in this view.
    pub failed: u64,
}

/// A page load as the comparison reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct PageLoad {
    /// The page.
    pub url: String,
    /// Loads of the three views (`-n`).
    pub runs: usize,
    /// First, revalidate, cached.
    pub views: Vec<ViewNums>,
    /// A view stopped at the byte budget or the resource cap.
    pub truncated: bool,
}

/// True when `v` is a page report (`"format": "redline.page"`).
pub fn is_page(v: &Value) -> bool {
    v.get("format").and_then(Value::as_str) == Some("redline.page")
}

/// Reads the numbers of a page report (the JSON of `redline page -o json`,
/// or a saved page load). Err: what is wrong with it.
pub fn parse(v: &Value) -> Result<PageLoad, String> {
    if !is_page(v) {
        return Err("not a redline page report (no \"format\": \"redline.page\")".into());
    }
    let u = |x: Option<&Value>| x.and_then(Value::as_u64).unwrap_or(0);
    let summary = v
        .get("summary")
        .and_then(Value::as_array)
        .ok_or("the page report has no summary")?;
    let mut views = Vec::new();
    for s in summary {
        let view = s
            .get("view")
            .and_then(Value::as_str)
            .ok_or("a view without a name")?;
        // Page format 1 called the revalidate view `repeat`.
        let view = if view == "repeat" { "revalidate" } else { view }.to_string();
        views.push(ViewNums {
            view,
            elapsed_ms: s.get("elapsed_ms").and_then(Value::as_f64).unwrap_or(0.0),
            runs_ms: s
                .get("runs_ms")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default(),
            requests: u(s.get("requests")),
            wire_bytes: u(s.get("wire_bytes")),
            decoded_bytes: u(s.get("decoded_bytes")),
            errors: u(s.get("errors")),
            failed: u(s.get("failed")),
        });
    }
    let truncated = v.get("views").and_then(Value::as_array).is_some_and(|a| {
        a.iter()
            .any(|l| l.get("truncated") == Some(&Value::Bool(true)))
    });
    Ok(PageLoad {
        url: v
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        runs: u(v.get("runs")).max(1) as usize,
        views,
        truncated,
    })
}

fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else {
        format!("{v:.1} ms")
    }
}

fn pct(a: f64, b: f64) -> String {
    if a == b {
        "=".into()
    } else if a == 0.0 {
        "new".into()
    } else {
        format!("{:+.1}%", (b - a) / a * 100.0)
    }
}

fn view_name(v: &str) -> String {
    format!("{v} view")
}

/// The time verdict for one view.
fn time_verdict(a: &ViewNums, b: &ViewNums, ra: usize, rb: usize) -> String {
    if a.failed > 0 || b.failed > 0 {
        return "not compared (the page did not load in every load)".into();
    }
    if ra < MIN_LOADS || rb < MIN_LOADS {
        return if ra == 1 && rb == 1 {
            "not tested (single load each)".into()
        } else {
            format!("not tested ({ra} and {rb} loads; a test needs {MIN_LOADS} each)")
        };
    }
    let Some(p) = mann_whitney(&a.runs_ms, &b.runs_ms) else {
        return "not tested".into();
    };
    let change = if a.elapsed_ms > 0.0 {
        (b.elapsed_ms - a.elapsed_ms) / a.elapsed_ms * 100.0
    } else {
        0.0
    };
    if p < 1.0 - LEVEL && change.abs() >= MIN_EFFECT_PCT {
        format!(
            "{} (p = {p:.3})",
            if change < 0.0 { "better" } else { "worse" }
        )
    } else {
        format!("no significant change (p = {p:.3})")
    }
}

/// The comparison of page loads A (before) and B (after) as text.
pub fn text(a: &PageLoad, b: &PageLoad, name_a: &str, name_b: &str) -> String {
    // URLs, labels and header values come from outside.
    redline_report::escape::clean_text(&text_unescaped(a, b, name_a, name_b)).into_owned()
}

fn text_unescaped(a: &PageLoad, b: &PageLoad, name_a: &str, name_b: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Comparing page loads: A = {name_a}, B = {name_b}");
    for (n, p) in [("A", a), ("B", b)] {
        let _ = writeln!(
            s,
            "  {n}: {} ({} load{} of the three views)",
            p.url,
            p.runs,
            if p.runs == 1 { "" } else { "s" }
        );
    }
    if a.url != b.url {
        let _ = writeln!(
            s,
            "  warning: different pages: the numbers are not comparable"
        );
    }
    if a.truncated || b.truncated {
        let _ = writeln!(
            s,
            "  warning: a load stopped at its byte budget or resource cap: its numbers are a floor"
        );
    }
    let _ = writeln!(
        s,
        "\n  {:<12} {:<9} {:>11} {:>11} {:>8}  verdict",
        "view", "", "A", "B", "change"
    );
    for va in &a.views {
        let Some(vb) = b.views.iter().find(|v| v.view == va.view) else {
            continue;
        };
        let time = |v: &ViewNums, runs: usize| {
            if v.failed as usize >= runs {
                "failed".to_string()
            } else {
                ms(v.elapsed_ms)
            }
        };
        let tchange = if va.failed > 0 || vb.failed > 0 {
            "-".to_string()
        } else {
            pct(va.elapsed_ms, vb.elapsed_ms)
        };
        let _ = writeln!(
            s,
            "  {:<12} {:<9} {:>11} {:>11} {:>8}  {}",
            view_name(&va.view),
            "time",
            time(va, a.runs),
            time(vb, b.runs),
            tchange,
            time_verdict(va, vb, a.runs, b.runs)
        );
        let rows: [(&str, u64, u64, bool); 4] = [
            ("requests", va.requests, vb.requests, false),
            ("wire", va.wire_bytes, vb.wire_bytes, true),
            ("decoded", va.decoded_bytes, vb.decoded_bytes, true),
            ("errors", va.errors, vb.errors, false),
        ];
        for (what, x, y, is_bytes) in rows {
            let f = |n: u64| if is_bytes { bytes(n as f64) } else { count(n) };
            let _ = writeln!(
                s,
                "  {:<12} {:<9} {:>11} {:>11} {:>8}  counted",
                "",
                what,
                f(x),
                f(y),
                pct(x as f64, y as f64)
            );
        }
    }
    let _ = writeln!(s);
    if a.runs < MIN_LOADS || b.runs < MIN_LOADS {
        let _ = writeln!(
            s,
            "Times are not tested: {}. One page load is one sample; load both with `redline page -n {MIN_LOADS}` (or more) for a verdict.",
            if a.runs == 1 && b.runs == 1 {
                "single load each".to_string()
            } else {
                format!("{} and {} loads", a.runs, b.runs)
            }
        );
    } else {
        let _ = writeln!(
            s,
            "Times: medians of each side's loads; verdict by the Mann-Whitney U test on the per-load times (95 %, at least {MIN_EFFECT_PCT} % change)."
        );
    }
    let _ = writeln!(
        s,
        "Requests and bytes are counted, not sampled: a change there is the page's, no test needed."
    );
    s
}

/// A saved page load's summary as text (`redline show`).
pub fn show(p: &PageLoad) -> String {
    redline_report::escape::clean_text(&show_unescaped(p)).into_owned()
}

fn show_unescaped(p: &PageLoad) -> String {
    let mut s = format!(
        "Page: {} ({} load{} of the three views)\n",
        p.url,
        p.runs,
        if p.runs == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "  {:<12} {:>10} {:>9} {:>12} {:>12} {:>6}",
        "view", "time", "requests", "wire", "decoded", "errors"
    );
    for v in &p.views {
        let _ = writeln!(
            s,
            "  {:<12} {:>10} {:>9} {:>12} {:>12} {:>6}",
            view_name(&v.view),
            if v.failed as usize >= p.runs {
                "failed".to_string()
            } else {
                ms(v.elapsed_ms)
            },
            v.requests,
            bytes(v.wire_bytes as f64),
            bytes(v.decoded_bytes as f64),
            v.errors
        );
    }
    if p.truncated {
        s.push_str(
            "  (a view stopped at its byte budget or resource cap: its numbers are a floor)\n",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load(runs: usize, first: &[f64], wire: u64, failed_repeat: u64) -> Value {
        let med = {
            let mut v = first.to_vec();
            v.sort_by(f64::total_cmp);
            v[(v.len() - 1) / 2]
        };
        let view = |name: &str, t: f64, ts: Vec<f64>, w: u64, failed: u64| {
            json!({"view": name, "elapsed_ms": t, "runs_ms": ts, "requests": 10,
                "from_cache": 0, "not_modified": 0, "wire_bytes": w, "decoded_bytes": 2 * w,
                "connections": 1, "errors": 0, "failed": failed})
        };
        json!({"format": "redline.page", "url": "http://a.test/", "runs": runs,
            "summary": [view("first", med, first.to_vec(), wire, 0),
                view("revalidate", 5.0, vec![5.0; runs], 100, failed_repeat),
                view("cached", 1.0, vec![1.0; runs], 0, 0)],
            "views": []})
    }

    #[test]
    fn single_loads_get_no_verdict_and_say_so() {
        let a = parse(&load(1, &[100.0], 1000, 0)).unwrap();
        let b = parse(&load(1, &[50.0], 500, 0)).unwrap();
        let t = text(&a, &b, "run 1", "run 2");
        assert!(t.contains("not tested (single load each)"), "{t}");
        assert!(!t.contains("better") && !t.contains("worse"), "{t}");
        assert!(t.contains("-50.0%"), "{t}");
    }

    #[test]
    fn five_loads_each_get_a_tested_verdict() {
        let a = parse(&load(5, &[100.0, 101.0, 99.0, 102.0, 98.0], 1000, 0)).unwrap();
        let b = parse(&load(5, &[50.0, 51.0, 49.0, 52.0, 48.0], 1000, 0)).unwrap();
        let t = text(&a, &b, "a", "b");
        let first = t.lines().find(|l| l.contains("first view")).unwrap();
        assert!(first.contains("better (p = "), "{t}");
        let same = text(&a, &a, "a", "a");
        let first = same.lines().find(|l| l.contains("first view")).unwrap();
        assert!(first.contains("no significant change"), "{same}");
    }

    #[test]
    fn a_failed_view_is_not_compared() {
        let a = parse(&load(1, &[100.0], 1000, 0)).unwrap();
        let b = parse(&load(1, &[100.0], 1000, 1)).unwrap();
        let t = text(&a, &b, "a", "b");
        let rep = t.lines().find(|l| l.contains("revalidate view")).unwrap();
        assert!(
            rep.contains("failed") && rep.contains("not compared"),
            "{t}"
        );
        assert!(!rep.contains('x'), "{rep}");
    }

    #[test]
    fn format_1_records_with_a_repeat_view_still_load() {
        let mut old = load(1, &[100.0], 1000, 0);
        old["summary"][1]["view"] = json!("repeat");
        let a = parse(&old).unwrap();
        assert_eq!(a.views[1].view, "revalidate");
        let b = parse(&load(1, &[90.0], 1000, 0)).unwrap();
        let t = text(&a, &b, "old", "new");
        assert!(
            t.contains("revalidate view") && !t.contains("repeat"),
            "{t}"
        );
        assert!(show(&a).contains("revalidate view"), "{}", show(&a));
    }

    #[test]
    fn run_records_are_not_pages() {
        assert!(parse(&json!({"format": "redline.run"})).is_err());
    }
}
