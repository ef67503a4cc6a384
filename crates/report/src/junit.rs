//! JUnit XML for CI (`--junit FILE`): the one writer of the
//! testsuites > testsuite > testcase format that Jenkins and GitLab read
//! (schema: `crates/report/tests/junit.xsd`). Every text is XML-escaped and
//! stripped of control characters; the values come from records, which are
//! redacted already, so no secret reaches the file.

use crate::thresholds::Outcome;
use redline_stats::RunRecord;

/// How one test case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// It held.
    Pass,
    /// It did not hold: a one-line message and the details.
    Failure {
        /// One line (the `message` attribute).
        message: String,
        /// The details (the element's text).
        text: String,
    },
    /// It did not apply (N/A): why.
    Skipped(String),
}

/// One `<testcase>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// What was checked (`p99<250ms`, a check's id).
    pub name: String,
    /// The group (`redline.run`, `redline.audit`, ...).
    pub classname: String,
    /// Seconds.
    pub time_s: f64,
    /// How it ended.
    pub verdict: Verdict,
    /// Extra output shown next to the case (`<system-out>`), if any.
    pub system_out: Option<String>,
}

/// Text for XML: `&<>"'` escaped; control characters removed (XML 1.0 cannot
/// carry most of them), `\n` and `\t` kept only when `keep_newlines`.
pub fn escape(s: &str, keep_newlines: bool) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\n' | '\t' if keep_newlines => o.push(c),
            '\n' | '\t' | '\r' => o.push(' '),
            c if c.is_control() => {}
            // Not characters in XML 1.0.
            '\u{fffe}' | '\u{ffff}' => {}
            c => o.push(c),
        }
    }
    o
}

fn secs(t: f64) -> String {
    if t.is_finite() && t >= 0.0 {
        format!("{t:.3}")
    } else {
        "0.000".into()
    }
}

/// One suite named `suite` that took `time_s` seconds holding `cases`,
/// wrapped in `<testsuites>`.
pub fn xml(suite: &str, time_s: f64, cases: &[Case]) -> String {
    let failures = cases
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Failure { .. }))
        .count();
    let skipped = cases
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Skipped(_)))
        .count();
    let counts = format!(
        "tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{}\"",
        cases.len(),
        secs(time_s)
    );
    let name = escape(suite, false);
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    o.push_str(&format!("<testsuites name=\"{name}\" {counts}>\n"));
    o.push_str(&format!("  <testsuite name=\"{name}\" {counts}>\n"));
    for c in cases {
        o.push_str(&format!(
            "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
            escape(&c.name, false),
            escape(&c.classname, false),
            secs(c.time_s)
        ));
        if c.verdict == Verdict::Pass && c.system_out.is_none() {
            o.push_str("/>\n");
            continue;
        }
        o.push_str(">\n");
        match &c.verdict {
            Verdict::Pass => {}
            Verdict::Failure { message, text } => o.push_str(&format!(
                "      <failure message=\"{}\" type=\"failure\">{}</failure>\n",
                escape(message, false),
                escape(text, true)
            )),
            Verdict::Skipped(why) => o.push_str(&format!(
                "      <skipped message=\"{}\"/>\n",
                escape(why, false)
            )),
        }
        if let Some(s) = &c.system_out {
            o.push_str(&format!(
                "      <system-out>{}</system-out>\n",
                escape(s, true)
            ));
        }
        o.push_str("    </testcase>\n");
    }
    o.push_str("  </testsuite>\n</testsuites>\n");
    o
}

/// A run's cases: one per threshold outcome (failing with the measured
/// value), or with none one case "run completed", failing when no request
/// was answered.
pub fn run_cases(rec: &RunRecord, outcomes: &[Outcome]) -> Vec<Case> {
    let time_s = rec.duration_s;
    if outcomes.is_empty() {
        let c = &rec.counters;
        let unanswered = c.in_flight_at_end + c.not_sent;
        let verdict = if c.scheduled > 0 && c.completed == 0 {
            Verdict::Failure {
                message: "no request was answered".into(),
                text: format!(
                    "no request was answered ({} failed, {unanswered} unanswered)",
                    c.failed
                ),
            }
        } else {
            Verdict::Pass
        };
        return vec![Case {
            name: "run completed".into(),
            classname: "redline.run".into(),
            time_s,
            verdict,
            system_out: Some(format!(
                "{} requests answered, {} failed, {:.1} req/s",
                c.completed, c.failed, rec.requests_per_sec
            )),
        }];
    }
    outcomes
        .iter()
        .map(|o| Case {
            name: o.threshold.text.clone(),
            classname: "redline.run.threshold".into(),
            time_s,
            verdict: if o.pass {
                Verdict::Pass
            } else {
                Verdict::Failure {
                    message: o.to_string(),
                    text: o.to_string(),
                }
            },
            system_out: Some(o.to_string()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_strips_controls() {
        assert_eq!(
            escape("a<b>&\"'\x1b[2J\r\n", false),
            "a&lt;b&gt;&amp;&quot;&apos;[2J  "
        );
        assert_eq!(escape("x\ny\u{7}", true), "x\ny");
    }

    #[test]
    fn counts_follow_the_cases() {
        let cases = vec![
            Case {
                name: "p99<1ms".into(),
                classname: "c".into(),
                time_s: 1.0,
                verdict: Verdict::Failure {
                    message: "FAIL".into(),
                    text: "measured 2ms".into(),
                },
                system_out: None,
            },
            Case {
                name: "n/a".into(),
                classname: "c".into(),
                time_s: 0.5,
                verdict: Verdict::Skipped("N/A".into()),
                system_out: None,
            },
        ];
        let x = xml("s", 1.5, &cases);
        assert!(x.contains("tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"1\" time=\"1.500\""));
        assert!(x.contains("<failure message=\"FAIL\" type=\"failure\">measured 2ms</failure>"));
    }
}
