//! The text exposition of [`Metrics`]: Prometheus text format 0.0.4, or
//! OpenMetrics 1.0 when the scraper asks for it (Prometheus does by default).

use crate::model::{Kind, Metrics, Value, LATENCY_BUCKETS_S};
use std::fmt::Write;

/// The two text formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for.
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The Content-Type of the answer.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A label value escaped for both formats (backslash, quote, newline).
pub fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A number as both formats write it.
pub fn number(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.is_nan() {
        "NaN".into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn labels(out: &mut String, common: &[(&str, String)], own: &[(&str, String)], le: Option<&str>) {
    out.push('{');
    let mut first = true;
    for (k, v) in common.iter().chain(own.iter()) {
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "{k}=\"{}\"", escape(v));
    }
    if let Some(le) = le {
        if !first {
            out.push(',');
        }
        let _ = write!(out, "le=\"{le}\"");
    }
    out.push('}');
}

/// Renders `m` in `f`.
pub fn render(m: &Metrics, f: Format) -> String {
    let mut out = String::with_capacity(8192);
    for fam in &m.families {
        let (kind, sample) = match fam.kind {
            Kind::Counter => ("counter", format!("{}_total", fam.name)),
            Kind::Gauge => ("gauge", fam.name.to_string()),
            Kind::Histogram => ("histogram", fam.name.to_string()),
        };
        let head = match (f, fam.kind) {
            (Format::Prometheus, Kind::Counter) => sample.as_str(),
            _ => fam.name,
        };
        let _ = writeln!(out, "# HELP {head} {}", fam.help);
        let _ = writeln!(out, "# TYPE {head} {kind}");
        for s in &fam.series {
            match &s.value {
                Value::Num(v) => {
                    out.push_str(&sample);
                    labels(&mut out, &m.labels, &s.labels, None);
                    let _ = writeln!(out, " {}", number(*v));
                }
                Value::Hist(h) => {
                    for (b, c) in LATENCY_BUCKETS_S.iter().zip(&h.buckets) {
                        let _ = write!(out, "{}_bucket", fam.name);
                        labels(&mut out, &m.labels, &s.labels, Some(&number_le(*b)));
                        let _ = writeln!(out, " {c}");
                    }
                    let _ = write!(out, "{}_bucket", fam.name);
                    labels(&mut out, &m.labels, &s.labels, Some("+Inf"));
                    let _ = writeln!(out, " {}", h.count);
                    let _ = write!(out, "{}_sum", fam.name);
                    labels(&mut out, &m.labels, &s.labels, None);
                    let _ = writeln!(out, " {}", number(h.sum_s));
                    let _ = write!(out, "{}_count", fam.name);
                    labels(&mut out, &m.labels, &s.labels, None);
                    let _ = writeln!(out, " {}", h.count);
                }
            }
        }
    }
    if f == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// A bucket bound as `le` (always with a decimal point, as client libraries write it).
pub fn number_le(b: f64) -> String {
    let s = format!("{b}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Tracker;

    #[test]
    fn both_formats_name_counters_and_end_right() {
        let t = Tracker::new("http://u:p@127.0.0.1:8080/x?k=secret", None);
        let m = t.metrics();
        let p = render(&m, Format::Prometheus);
        assert!(p.contains("# TYPE redline_requests_sent_total counter\n"));
        assert!(p.contains(
            "redline_responses_total{target=\"http://127.0.0.1:8080/x\",class=\"2xx\"} 0\n"
        ));
        assert!(p.contains(
            "redline_latency_seconds_bucket{target=\"http://127.0.0.1:8080/x\",le=\"0.0001\"} 0\n"
        ));
        assert!(p.contains("le=\"+Inf\"} 0\n"));
        assert!(!p.contains("secret") && !p.contains("u:p"));
        assert!(!p.contains("# EOF"));
        let o = render(&m, Format::OpenMetrics);
        assert!(o.contains("# TYPE redline_requests_sent counter\n"));
        assert!(o.contains("redline_requests_sent_total{"));
        assert!(o.ends_with("# EOF\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(number_le(1.0), "1.0");
        assert_eq!(number_le(0.025), "0.025");
        assert_eq!(number(3.0), "3");
    }
}
