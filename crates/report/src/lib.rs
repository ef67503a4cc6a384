//! Reports are sinks: each one only reads [`RunRecord`]s and renders them;
//! none runs, measures or changes anything, and this crate depends on
//! `redline-stats` (the record) and `redline-watch` (the watched server's
//! part of the record) only.
//!
//! The sinks, one module each:
//! - [`text`]: the default human report (`--output text`);
//! - [`json`]: the run record itself, versioned and schema-checked (`--output json`);
//! - [`csv`]: the per-second series (`--output csv`);
//! - [`html`]: a self-contained HTML report of one run or two overlaid (`--html`, `report`);
//! - [`compare`]: before/after of two runs with a tested verdict (`compare`);
//! - [`requests`]: the per-request tables of a scenario run (part of `text`);
//! - [`replay`]: a replay's log, status codes and per-URL table (part of `text`);
//! - [`thresholds`]: `--threshold` bounds checked against a record;
//! - [`trial`]: a before/after trial's verdict over its rounds (`trial`), text, JSON and HTML;
//! - [`junit`]: JUnit XML for CI (`--junit`).
//!
//! [`Format`] and [`write`] pick the sink for `--output`. Page loads and
//! audits are rendered next to their types, in `redline-web` (`web::render`).
#![deny(missing_docs)]

pub mod compare;
pub mod csv;
pub mod escape;
pub mod html;
pub mod json;
pub mod junit;
pub mod replay;
pub mod requests;
pub mod text;
pub mod thresholds;
pub mod trial;

pub use json::{json, write_json};
pub use text::{knee_line, stages_line, text};

use redline_stats::RunRecord;

/// The `--output` formats of a run record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The human report ([`text()`]).
    Text,
    /// The run record ([`write_json`]).
    Json,
    /// The per-second series ([`csv::series`]).
    Csv,
}

/// Writes `rec` to `w` in `format`.
pub fn write(format: Format, rec: &RunRecord, w: &mut impl std::io::Write) -> std::io::Result<()> {
    match format {
        Format::Text => w.write_all(text(rec).as_bytes()),
        Format::Json => write_json(rec, w),
        Format::Csv => w.write_all(csv::series(rec).as_bytes()),
    }
}

/// Formats microseconds for people: `850µs`, `12.34ms`, `1.50s`.
pub fn dur_us(us: f64) -> String {
    if !us.is_finite() {
        return "-".into();
    }
    if us < 1000.0 {
        format!("{us:.0}µs")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else {
        format!("{:.2}s", us / 1_000_000.0)
    }
}

/// Formats a byte count: `440 B`, `12.3 KiB`, `4.56 MiB`.
pub fn bytes(n: f64) -> String {
    const K: f64 = 1024.0;
    if n < K {
        format!("{n:.0} B")
    } else if n < K * K {
        format!("{:.1} KiB", n / K)
    } else if n < K * K * K {
        format!("{:.2} MiB", n / K / K)
    } else {
        format!("{:.2} GiB", n / K / K / K)
    }
}

/// Groups thousands: `1234567` → `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
