//! The JSON sink: the run record itself (`--output json`), versioned and
//! schema-checked, written straight to the output.

use redline_stats::RunRecord;

/// The run record as pretty JSON (the `--output json` document).
pub fn json(rec: &RunRecord) -> String {
    let mut s = serde_json::to_string_pretty(rec).unwrap_or_else(|e| {
        format!("{{\"format\":\"redline.run\",\"error\":\"cannot serialize: {e}\"}}")
    });
    s.push('\n');
    s
}

/// Writes the run record as pretty JSON straight to `w` (no intermediate string,
/// so a long run's report costs no extra peak memory).
pub fn write_json(rec: &RunRecord, w: &mut impl std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, rec).map_err(std::io::Error::other)?;
    w.write_all(b"\n")
}
