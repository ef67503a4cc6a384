//! Redaction: what every output shows of a secret (header values that carry
//! credentials, a URL's password). The plan redacts its recorded config
//! here, so nothing downstream can leak a secret.

/// The text that replaces a secret in every output.
pub const REDACTED: &str = "[redacted]";

fn is_secret_header(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase();
    matches!(
        n.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie" | "x-api-key"
    )
}

/// Redacts the value of a `Name: value` header if it carries a secret.
pub fn redact_header(h: &str) -> String {
    match h.split_once(':') {
        Some((name, _)) if is_secret_header(name) => format!("{}: {REDACTED}", name.trim()),
        _ => h.to_string(),
    }
}

/// What an error may show of a header flag that is not `Name: value`: only the
/// name-like start, since a mistyped `-H 'Authorization Bearer …'` carries a secret.
pub fn redact_bad_header(h: &str) -> String {
    let end = h
        .find(|c: char| c == ':' || c.is_whitespace())
        .unwrap_or(h.len())
        .min(40);
    let end = (0..=end)
        .rev()
        .find(|i| h.is_char_boundary(*i))
        .unwrap_or(0);
    if end < h.len() {
        format!("{} …", &h[..end])
    } else {
        h.to_string()
    }
}

/// Redacts the password (and user) of a URL for display.
pub fn redact_url(u: &url::Url) -> String {
    let mut u = u.clone();
    if u.password().is_some() {
        let _ = u.set_password(Some(REDACTED));
    }
    u.to_string().replace("%5Bredacted%5D", REDACTED)
}

/// Redacts any `user:pass@` in a string that failed to parse as a URL.
pub fn redact_raw_url(s: &str) -> String {
    match (s.find("://"), s.rfind('@')) {
        (Some(p), Some(at)) if at > p => {
            let userinfo = &s[p + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{}:{REDACTED}{}", &s[..p + 3], user, &s[at..]),
                None => s.to_string(),
            }
        }
        _ => s.to_string(),
    }
}
