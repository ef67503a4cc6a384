//! The one escaping of text from outside (labels, notes, host names, server
//! headers, URLs, error messages) for every text, HTML and CSV output: control
//! characters (C0, DEL, C1) are shown as `\r`, `\n`, `\t` or `\xNN`/`\u{NN}`
//! instead of reaching a terminal or a log raw, so a label or a `Server:`
//! header cannot move the cursor, recolour, rewrite a line (`\r`) or forge one.
//! JSON needs none of this: serde escapes control characters itself.

use std::borrow::Cow;

fn is_control(c: char, keep_newlines: bool) -> bool {
    if keep_newlines && (c == '\n' || c == '\t') {
        return false;
    }
    c.is_control()
}

/// Escapes control characters; `keep_newlines` leaves `\n` and `\t` (for a
/// whole report, whose own lines they are). Borrows when there is none.
pub fn escape_controls(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_control(c, keep_newlines)) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !is_control(c, keep_newlines) {
            o.push(c);
            continue;
        }
        match c {
            '\r' => o.push_str("\\r"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x100 => o.push_str(&format!("\\x{:02x}", c as u32)),
            c => o.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(o)
}

/// One field from outside (a label, a note, a header, a host name): every
/// control character escaped, newlines included.
pub fn clean(s: &str) -> Cow<'_, str> {
    escape_controls(s, false)
}

/// A whole text report: control characters escaped, its own line breaks kept.
pub fn clean_text(s: &str) -> Cow<'_, str> {
    escape_controls(s, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_not_sent() {
        assert!(matches!(clean("plain label ü"), Cow::Borrowed(_)));
        assert_eq!(clean("a\x1b[2Jb\rc\nd"), "a\\x1b[2Jb\\rc\\nd");
        assert_eq!(clean("\u{9b}31m\u{7f}"), "\\x9b31m\\x7f");
        assert_eq!(
            clean_text("line\x1b[1m\n\tnext\r"),
            "line\\x1b[1m\n\tnext\\r"
        );
    }
}
