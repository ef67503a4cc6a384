//! Markup helpers of the scanner: entity decoding, attribute parsing and
//! case-insensitive search in bytes.

pub(super) fn is_name_byte(b: u8) -> bool {
    !(b.is_ascii_whitespace() || b == b'>' || b == b'/' || b == b'=')
}

/// Decodes the few character references that occur in URLs.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let lim = (0..=rest.len().min(12))
            .rev()
            .find(|&k| rest.is_char_boundary(k))
            .unwrap_or(0);
        let end = rest[..lim].find(';');
        let rep = end.and_then(|e| {
            let ent = &rest[1..e];
            let c = match ent {
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "nbsp" => Some('\u{a0}'),
                _ if ent.starts_with("#x") || ent.starts_with("#X") => {
                    u32::from_str_radix(&ent[2..], 16)
                        .ok()
                        .and_then(char::from_u32)
                }
                _ if ent.starts_with('#') => ent[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            };
            c.map(|c| (c, e))
        });
        match rep {
            Some((c, e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Parses attributes from `s` (the inside of a tag after its name).
pub(super) fn parse_attrs(s: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = s.len();
    while i < n && out.len() < 256 {
        while i < n && (s[i].is_ascii_whitespace() || s[i] == b'/') {
            i += 1;
        }
        let start = i;
        while i < n && is_name_byte(s[i]) {
            i += 1;
        }
        if start == i {
            i += 1;
            continue;
        }
        let name = String::from_utf8_lossy(&s[start..i]).to_ascii_lowercase();
        while i < n && s[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < n && s[i] == b'=' {
            i += 1;
            while i < n && s[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < n && (s[i] == b'"' || s[i] == b'\'') {
                let q = s[i];
                i += 1;
                let vs = i;
                while i < n && s[i] != q {
                    i += 1;
                }
                value = String::from_utf8_lossy(&s[vs..i]).into_owned();
                i += 1;
            } else {
                let vs = i;
                while i < n && !s[i].is_ascii_whitespace() && s[i] != b'>' {
                    i += 1;
                }
                value = String::from_utf8_lossy(&s[vs..i]).into_owned();
            }
        }
        out.push((name, decode_entities(value.trim())));
    }
    out
}

pub(super) fn attr<'a>(a: &'a [(String, String)], name: &str) -> Option<&'a str> {
    a.iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

pub(super) fn dim(v: Option<&str>) -> Option<u32> {
    let v = v?.trim().trim_end_matches("px");
    v.parse::<u32>().ok().filter(|&x| x > 0)
}

pub(super) fn find_ci(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    (from..=hay.len() - needle.len())
        .find(|&i| hay[i..i + needle.len()].eq_ignore_ascii_case(needle))
}
