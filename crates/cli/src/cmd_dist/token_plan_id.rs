//! The coordinator's token (flag, file, environment) and the plan
//! fingerprint an agent registers with.

use super::*;

/// Reads a file the user named: a regular file of at most `max` bytes (one
/// clear error otherwise: a FIFO, `/dev/zero` or a directory is refused).
pub(super) fn read_bounded(
    path: &std::path::Path,
    max: u64,
    what: &str,
) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{what} {}: not a regular file", path.display()));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    let mut v = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut v)
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if v.len() as u64 > max {
        return Err(format!(
            "{what} {}: larger than {max} bytes",
            path.display()
        ));
    }
    Ok(v)
}

/// The longest token file.
pub(super) const MAX_TOKEN_FILE: u64 = 4096;

/// The coordinator token, from `--token`, else `--token-file`, else
/// `REDLINE_TOKEN`. Err: a usage error (never showing the token).
pub(super) fn resolve_token(
    flag: Option<&str>,
    file: Option<&std::path::Path>,
) -> Result<Option<redline_dist::protocol::Token>, String> {
    use redline_dist::protocol::Token;
    if let Some(t) = flag {
        return Token::new(t)
            .map(Some)
            .ok_or_else(|| "--token is empty".to_string());
    }
    if let Some(p) = file {
        let b = read_bounded(p, MAX_TOKEN_FILE, "--token-file")?;
        let s = String::from_utf8(b)
            .map_err(|_| format!("--token-file {}: not UTF-8 text", p.display()))?;
        return Token::new(&s)
            .map(Some)
            .ok_or_else(|| format!("--token-file {}: empty", p.display()));
    }
    match std::env::var("REDLINE_TOKEN") {
        Ok(t) if !t.trim().is_empty() => Ok(Token::new(&t)),
        _ => Ok(None),
    }
}

/// Run arguments that are not part of what every agent must agree on
/// (output, saving, watching this machine, the agent's own segment).
pub(super) const NOT_PLAN: &[&str] = &[
    "output",
    "quiet",
    "live_seconds",
    "segment",
    "segment_sequence",
    "start_at",
    "no_save",
    "db",
    "label",
    "note",
    "html",
    "live_json",
    "watch",
    "watch_interval",
    "server_status",
    "server_config",
    "thresholds",
    "abort_on_fail",
    "metrics_listen",
    "prometheus_rw",
    "otlp",
    "otlp_histogram",
    "metrics_interval",
    "metrics_linger",
];

/// Run arguments naming files whose contents are part of the plan.
pub(super) const PLAN_FILES: &[&str] = &["body_file", "scenario", "urls", "cacert", "cert"];

pub(super) fn sha256_hex(b: &[u8]) -> String {
    redline_dist::protocol::hex(&redline_dist::protocol::sha256(b))
}

/// The plan every agent must run, as fields (secrets left out, bodies and
/// files by their SHA-256) and their fingerprint.
pub(super) fn plan_id(
    run: &[String],
    seq: &segment::Sequence,
    total: u64,
) -> Result<redline_dist::protocol::PlanId, String> {
    let items = parse_run(run)?;
    let mut f = std::collections::BTreeMap::new();
    for a in &items {
        if NOT_PLAN.contains(&a.id.as_str()) {
            continue;
        }
        let v = match a.id.as_str() {
            "basic_auth" => "(secret)".to_string(),
            "key" => "(given)".to_string(),
            "headers" => a
                .values
                .iter()
                .map(|h| {
                    if secret_header(h) {
                        format!("{}: (secret)", h.split(':').next().unwrap_or("").trim())
                    } else {
                        h.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"),
            "url" => a
                .values
                .iter()
                .map(|u| {
                    if secret_url(u) {
                        format!(
                            "(a URL with a credential, sha256 {})",
                            &sha256_hex(u.as_bytes())[..16]
                        )
                    } else {
                        u.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
            "body" => format!("sha256 {}", sha256_hex(a.values.concat().as_bytes())),
            id if PLAN_FILES.contains(&id) => a
                .values
                .iter()
                .map(
                    |p| match read_bounded(std::path::Path::new(p), 256 << 20, "") {
                        Ok(b) => format!("sha256 {}", sha256_hex(&b)),
                        Err(_) => "(unreadable)".into(),
                    },
                )
                .collect::<Vec<_>>()
                .join(" "),
            _ if a.values.is_empty() => "true".to_string(),
            _ => a.values.join("\n"),
        };
        f.insert(a.id.clone(), v);
    }
    f.insert("segment_sequence".into(), seq.to_string());
    f.insert("agents".into(), total.to_string());
    Ok(redline_dist::protocol::PlanId::new(f))
}
