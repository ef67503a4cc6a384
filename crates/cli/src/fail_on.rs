//! `--fail-on LEVEL`, one parser for `audit` and `tune`: the level names
//! `info`, `warning` and `error` (documented), with `warn` accepted for
//! `warning` (tune's old spelling) and `--fail-on` exiting 3 when a finding
//! is at that level or worse. tune's findings go up to warning, so there
//! `error` means the same as `warning` (a CI job keeps failing on `[!!]`).

use clap::builder::PossibleValue;
use clap::ValueEnum;

/// A `--fail-on` level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FailOn {
    /// Any note or worse.
    Info,
    /// Any warning or worse (also spelled `warn`).
    Warning,
    /// Errors only.
    Error,
}

impl ValueEnum for FailOn {
    fn value_variants<'a>() -> &'a [Self] {
        &[FailOn::Info, FailOn::Warning, FailOn::Error]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            FailOn::Info => PossibleValue::new("info").help("any note, warning or error"),
            FailOn::Warning => PossibleValue::new("warning")
                .alias("warn")
                .help("any warning or error (also: warn)"),
            FailOn::Error => PossibleValue::new("error").help("errors only"),
        })
    }
}

impl FailOn {
    /// The audit severity at which `--fail-on` fires.
    pub fn audit(self) -> redline_web::audit::Severity {
        use redline_web::audit::Severity;
        match self {
            FailOn::Info => Severity::Info,
            FailOn::Warning => Severity::Warning,
            FailOn::Error => Severity::Error,
        }
    }

    /// The tune level at which `--fail-on` fires (tune has no level above warn).
    pub fn tune(self) -> redline_watch::tune::Level {
        use redline_watch::tune::Level;
        match self {
            FailOn::Info => Level::Info,
            FailOn::Warning | FailOn::Error => Level::Warn,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_parse_to_one_level() {
        assert_eq!(FailOn::from_str("warn", true), Ok(FailOn::Warning));
        assert_eq!(FailOn::from_str("warning", true), Ok(FailOn::Warning));
        assert_eq!(FailOn::from_str("info", true), Ok(FailOn::Info));
        assert_eq!(FailOn::from_str("error", true), Ok(FailOn::Error));
        assert!(FailOn::from_str("fatal", true).is_err());
    }
}
