//! The one rule for which answers succeeded (`--expect-status`).
//!
//! An answer with a status the rule accepts succeeded; any other answer is
//! counted as a failed request by every judgment: thresholds (`errors<1%`),
//! "Succeeded" in the text report, the per-request tables, JUnit, metrics and
//! `find`'s SLO. By default 2xx and 3xx succeed, as k6 and vegeta accept
//! (a redirect or a `304 Not Modified` is the server's right answer);
//! `--expect-status 200-299` narrows it. `redline ab` keeps ab's own rule
//! (non-2xx answers counted apart, `Counters::non_2xx`), not this one.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which statuses count as success: inclusive ranges of codes, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ExpectStatus {
    ranges: Vec<(u16, u16)>,
}

impl Default for ExpectStatus {
    /// 2xx and 3xx.
    fn default() -> Self {
        ExpectStatus {
            ranges: vec![(200, 399)],
        }
    }
}

impl ExpectStatus {
    /// Does an answer with this status count as success?
    #[inline]
    pub fn ok(&self, status: u16) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= status && status <= b)
    }

    /// Is this the default rule (2xx and 3xx)?
    pub fn is_default(&self) -> bool {
        *self == ExpectStatus::default()
    }

    /// The rule of a record's `config.expect_status` (the default when absent
    /// or unreadable: records are checked when they are read).
    pub fn of(config: Option<&str>) -> ExpectStatus {
        config.and_then(|s| s.parse().ok()).unwrap_or_default()
    }

    /// Counts the answers this rule refuses among `(status, count)` pairs.
    pub fn refused<I: IntoIterator<Item = (u16, u64)>>(&self, codes: I) -> u64 {
        codes
            .into_iter()
            .filter(|&(s, _)| !self.ok(s))
            .fold(0u64, |a, (_, n)| a.saturating_add(n))
    }

    /// Counts the answers this rule refuses in a map keyed by the status as
    /// text (a record's `status_codes`, a request's `statuses`).
    pub fn refused_in(&self, by_code: &std::collections::BTreeMap<String, u64>) -> u64 {
        self.refused(
            by_code
                .iter()
                .filter_map(|(k, n)| Some((k.parse::<u16>().ok()?, *n))),
        )
    }

    /// The refused answers among per-class counts (1xx..5xx), for seconds
    /// recorded before the per-second codes were kept: a class counts as
    /// refused when the rule refuses its first code (exact for rules made of
    /// whole classes, as the default).
    pub fn refused_classes(&self, classes: &[u64; 5]) -> u64 {
        classes
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.ok((*i as u16 + 1) * 100))
            .fold(0u64, |a, (_, n)| a.saturating_add(*n))
    }
}

/// A rule that does not parse: the one line shown to the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--expect-status {given:?}: {why} (give codes and ranges such as 200-299,301)")]
pub struct ExpectStatusError {
    given: String,
    why: String,
}

impl std::str::FromStr for ExpectStatus {
    type Err = ExpectStatusError;

    /// `200-299,301`, `2xx,3xx`, `200`: codes 100–999, ranges low-high.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: String| ExpectStatusError {
            given: s.to_string(),
            why,
        };
        let code = |t: &str| -> Result<u16, ExpectStatusError> {
            match t.trim().parse::<u16>() {
                Ok(c) if (100..=999).contains(&c) => Ok(c),
                _ => Err(bad(format!("{:?} is not a status code 100-999", t.trim()))),
            }
        };
        let mut ranges = Vec::new();
        for part in s.split(',') {
            let p = part.trim();
            if p.is_empty() {
                return Err(bad("an empty item".into()));
            }
            let lower = p.to_ascii_lowercase();
            let r = if let Some(d) = lower.strip_suffix("xx") {
                let c = code(&format!("{d}00"))?;
                (c, c + 99)
            } else if let Some((a, b)) = p.split_once('-') {
                let (a, b) = (code(a)?, code(b)?);
                if a > b {
                    return Err(bad(format!("{p:?} runs backwards")));
                }
                (a, b)
            } else {
                let c = code(p)?;
                (c, c)
            };
            ranges.push(r);
        }
        ranges.sort_unstable();
        Ok(ExpectStatus { ranges })
    }
}

impl fmt::Display for ExpectStatus {
    /// The canonical form: `200-299,301`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

impl TryFrom<String> for ExpectStatus {
    type Error = ExpectStatusError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ExpectStatus> for String {
    fn from(e: ExpectStatus) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_accepts_2xx_and_3xx_only() {
        let r = ExpectStatus::default();
        assert!(r.ok(200) && r.ok(204) && r.ok(301) && r.ok(304) && r.ok(399));
        assert!(!r.ok(199) && !r.ok(400) && !r.ok(404) && !r.ok(500));
        assert_eq!(r.to_string(), "200-399");
    }

    #[test]
    fn parses_codes_ranges_and_classes() {
        let r: ExpectStatus = "200-299, 301".parse().unwrap();
        assert!(r.ok(200) && r.ok(299) && r.ok(301));
        assert!(!r.ok(302) && !r.ok(304));
        assert_eq!(r.to_string(), "200-299,301");
        let c: ExpectStatus = "2xx,404".parse().unwrap();
        assert!(c.ok(250) && c.ok(404) && !c.ok(301));
        assert_eq!(r.refused([(200, 5), (301, 2), (304, 3), (500, 1)]), 4);
    }

    #[test]
    fn bad_rules_are_one_clear_line() {
        for bad in [
            "", "abc", "200-", "299-200", "99", "1000", "200,,301", "9xx9",
        ] {
            let e = bad.parse::<ExpectStatus>().unwrap_err().to_string();
            assert!(e.starts_with("--expect-status"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn classes_follow_the_rule() {
        let d = ExpectStatus::default();
        assert_eq!(d.refused_classes(&[1, 10, 5, 2, 3]), 6);
        let n: ExpectStatus = "200-299".parse().unwrap();
        assert_eq!(n.refused_classes(&[0, 10, 5, 2, 3]), 10);
    }
}
