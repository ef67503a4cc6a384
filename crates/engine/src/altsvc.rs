//! The `Alt-Svc` response header (RFC 7838 §3), parsed once for the whole
//! workspace: the load side reports an origin's HTTP/3 endpoint, `page`
//! follows it on a repeat view as Chromium does, `audit` checks it.
//! Self-contained (no other module of the crate), so it sits in the codec
//! layer.
//!
//! ```text
//! Alt-Svc       = clear / 1#alt-value
//! clear         = %s"clear"
//! alt-value     = alternative *( OWS ";" OWS parameter )
//! alternative   = protocol-id "=" alt-authority
//! protocol-id   = token                 ; percent-encoded ALPN name
//! alt-authority = quoted-string         ; [ uri-host ] ":" port
//! parameter     = token "=" ( token / quoted-string )
//! ```
//!
//! A value that breaks the grammar is an error naming what is wrong (a
//! client then ignores the whole header, as Chromium does; `audit` shows
//! the message). Unknown parameters are kept, not refused (§3: "MUST
//! ignore"); `persist` other than `1` is ignored (§3.1). Several header
//! lines are one comma list: join them with `", "` before [`parse`].

use std::fmt;

/// `ma` when the alternative has none: 24 hours (RFC 7838 §3.1).
pub const DEFAULT_MAX_AGE: u64 = 86_400;

/// A parsed `Alt-Svc` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AltSvc {
    /// `clear`: forget every alternative of this origin.
    Clear,
    /// One or more alternatives, in the server's order of preference.
    Alternatives(Vec<Alternative>),
}

/// One alternative service: `h3=":443"; ma=3600`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alternative {
    /// The ALPN protocol, percent-decoded (`h3`, `h2`, `h3-29`).
    pub protocol: String,
    /// The host, when the alternative names one (`"alt.example.com:443"`);
    /// `None` means the origin's own host. IPv6 literals keep their
    /// brackets (`[::1]`).
    pub host: Option<String>,
    /// The port, 1 to 65535.
    pub port: u16,
    /// `ma` in seconds, when given (see [`Alternative::max_age`]).
    pub ma: Option<u64>,
    /// `persist=1`: keep the entry across network changes.
    pub persist: bool,
    /// Parameters this parser does not know, as `(name, value)`, in order
    /// (names lower-cased, quoted values unquoted).
    pub unknown: Vec<(String, String)>,
}

impl Alternative {
    /// The freshness lifetime in seconds: `ma`, or 24 hours without it.
    pub fn max_age(&self) -> u64 {
        self.ma.unwrap_or(DEFAULT_MAX_AGE)
    }

    /// Whether this alternative is HTTP/3 as RFC 9114 names it (`h3`; the
    /// draft versions `h3-29` and the like are not).
    pub fn is_h3(&self) -> bool {
        self.protocol == "h3"
    }
}

impl AltSvc {
    /// The alternatives (none for `clear`).
    pub fn alternatives(&self) -> &[Alternative] {
        match self {
            AltSvc::Clear => &[],
            AltSvc::Alternatives(a) => a,
        }
    }

    /// The first `h3` alternative, the one a client would use.
    pub fn h3(&self) -> Option<&Alternative> {
        self.alternatives().iter().find(|a| a.is_h3())
    }
}

/// What is wrong with an `Alt-Svc` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AltSvcError(String);

impl fmt::Display for AltSvcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid Alt-Svc: {}", self.0)
    }
}

impl std::error::Error for AltSvcError {}

fn err<T>(msg: impl Into<String>) -> Result<T, AltSvcError> {
    Err(AltSvcError(msg.into()))
}

/// Parses an `Alt-Svc` field value (RFC 7838 §3).
pub fn parse(value: &str) -> Result<AltSvc, AltSvcError> {
    let v = value.trim_matches(is_ows);
    if v == "clear" {
        return Ok(AltSvc::Clear);
    }
    let mut cur = Cursor {
        s: v.as_bytes(),
        i: 0,
    };
    let mut out = Vec::new();
    loop {
        cur.skip_ows();
        if cur.eat(b',') {
            continue; // an empty list element (RFC 9110 §5.6.1.2)
        }
        if cur.done() {
            break;
        }
        out.push(alt_value(&mut cur)?);
        cur.skip_ows();
        if cur.done() {
            break;
        }
        if !cur.eat(b',') {
            return err(format!("expected ',' or ';' at byte {}", cur.i));
        }
    }
    if out.is_empty() {
        return err("empty value");
    }
    if out.iter().any(|a| a.protocol == "clear") {
        return err("\"clear\" must be the whole value");
    }
    Ok(AltSvc::Alternatives(out))
}

fn is_ows(c: char) -> bool {
    c == ' ' || c == '\t'
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn done(&self) -> bool {
        self.i >= self.s.len()
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.i += usize::from(hit);
        hit
    }
    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }
    fn token(&mut self) -> &str {
        let start = self.i;
        while self.peek().is_some_and(is_tchar) {
            self.i += 1;
        }
        // tchar is ASCII, so the slice is UTF-8.
        std::str::from_utf8(&self.s[start..self.i]).unwrap_or("")
    }
    /// A quoted-string, unquoted (`\x` is `x`); the cursor is on `"`.
    fn quoted(&mut self) -> Result<String, AltSvcError> {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return err(format!("unterminated quoted string at byte {start}")),
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).or_else(|_| err("quoted string is not UTF-8"));
                }
                Some(b'\\') => {
                    let Some(&c) = self.s.get(self.i + 1) else {
                        return err(format!("unterminated quoted string at byte {start}"));
                    };
                    out.push(c);
                    self.i += 2;
                }
                Some(c) if c == b'\t' || c == b' ' || (c >= 0x21 && c != 0x7f) => {
                    out.push(c);
                    self.i += 1;
                }
                Some(c) => return err(format!("control byte 0x{c:02x} in a quoted string")),
            }
        }
    }
}

/// `alternative *( OWS ";" OWS parameter )`.
fn alt_value(cur: &mut Cursor<'_>) -> Result<Alternative, AltSvcError> {
    let raw = cur.token().to_string();
    if raw.is_empty() {
        return err(format!(
            "expected a protocol name (like h3) at byte {}",
            cur.i
        ));
    }
    let protocol = percent_decode(&raw)?;
    if raw == "clear" && cur.peek() != Some(b'=') {
        // `clear` beside alternatives; [`parse`] names it.
        return Ok(Alternative {
            protocol,
            host: None,
            port: 1,
            ma: None,
            persist: false,
            unknown: Vec::new(),
        });
    }
    if !cur.eat(b'=') {
        return err(format!(
            "{raw}: expected '=\"host:port\"' after the protocol"
        ));
    }
    if cur.peek() != Some(b'"') {
        return err(format!(
            "{raw}: the alt-authority must be quoted (h3=\":443\")"
        ));
    }
    let authority = cur.quoted()?;
    let (host, port) =
        split_authority(&authority).map_err(|m| AltSvcError(format!("{raw}: {m}")))?;
    let mut alt = Alternative {
        protocol,
        host,
        port,
        ma: None,
        persist: false,
        unknown: Vec::new(),
    };
    loop {
        let save = cur.i;
        cur.skip_ows();
        if !cur.eat(b';') {
            cur.i = save;
            return Ok(alt);
        }
        cur.skip_ows();
        let name = cur.token().to_ascii_lowercase();
        if name.is_empty() {
            if matches!(cur.peek(), None | Some(b',')) {
                continue; // a trailing ';', tolerated as browsers do
            }
            return err(format!(
                "{raw}: expected a parameter name at byte {}",
                cur.i
            ));
        }
        if !cur.eat(b'=') {
            return err(format!("{raw}: parameter {name} has no '=value'"));
        }
        let value = if cur.peek() == Some(b'"') {
            cur.quoted()?
        } else {
            let t = cur.token();
            if t.is_empty() {
                return err(format!("{raw}: parameter {name} has an empty value"));
            }
            t.to_string()
        };
        match name.as_str() {
            "ma" => {
                if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                    return err(format!("{raw}: ma={value} is not a number of seconds"));
                }
                // delta-seconds too large saturate (RFC 9111 §1.2.2).
                alt.ma = Some(value.parse().unwrap_or(u64::from(u32::MAX >> 1)));
            }
            "persist" => alt.persist = value == "1",
            _ => alt.unknown.push((name, value)),
        }
    }
}

/// `[ uri-host ] ":" port` into its host (if any) and port.
fn split_authority(a: &str) -> Result<(Option<String>, u16), String> {
    let Some(colon) = a.rfind(':') else {
        return Err(format!("\"{a}\" has no ':port'"));
    };
    let (host, port) = (&a[..colon], &a[colon + 1..]);
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!("\"{a}\": an IPv6 host must be in brackets"));
    }
    if host
        .chars()
        .any(|c| c.is_whitespace() || c == '/' || c == '@')
    {
        return Err(format!("\"{a}\": bad host"));
    }
    let port: u16 = match port.parse() {
        Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => p,
        _ => return Err(format!("\"{a}\": port {port:?} is not 1 to 65535")),
    };
    Ok(((!host.is_empty()).then(|| host.to_string()), port))
}

/// A protocol-id is percent-encoded (RFC 7838 §3: `w%3Dx%3Ay` is `w=x:y`).
fn percent_decode(t: &str) -> Result<String, AltSvcError> {
    let b = t.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(v) => out.push(v),
                None => return err(format!("{t}: bad percent-encoding")),
            }
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).or_else(|_| err(format!("{t}: protocol is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: &str) -> Alternative {
        match parse(v).unwrap() {
            AltSvc::Alternatives(mut a) if a.len() == 1 => a.remove(0),
            other => panic!("{v}: {other:?}"),
        }
    }

    fn bad(v: &str) -> String {
        parse(v).unwrap_err().to_string()
    }

    #[test]
    fn caddy_default() {
        let a = one("h3=\":443\"; ma=2592000");
        assert_eq!(
            (a.protocol.as_str(), a.host.as_deref(), a.port),
            ("h3", None, 443)
        );
        assert_eq!(a.ma, Some(2_592_000));
        assert_eq!(a.max_age(), 2_592_000);
        assert!(a.is_h3() && !a.persist && a.unknown.is_empty());
    }

    #[test]
    fn quoted_alt_authority_with_host_and_escapes() {
        let a = one("h2=\"alt.example.com:8443\"");
        assert_eq!((a.host.as_deref(), a.port), (Some("alt.example.com"), 8443));
        assert_eq!(a.ma, None);
        assert_eq!(a.max_age(), DEFAULT_MAX_AGE);
        let a = one("h3=\"[::1]:4433\"");
        assert_eq!((a.host.as_deref(), a.port), (Some("[::1]"), 4433));
        // A quoted-pair stands for its character.
        let a = one(r#"h3="\:\4\4\3""#);
        assert_eq!((a.host, a.port), (None, 443));
    }

    #[test]
    fn several_alternatives_in_order() {
        let v = parse("h3=\":443\"; ma=86400, h3-29=\":443\"; ma=86400,h2=\"alt:443\"").unwrap();
        let p: Vec<_> = v
            .alternatives()
            .iter()
            .map(|a| a.protocol.as_str())
            .collect();
        assert_eq!(p, ["h3", "h3-29", "h2"]);
        assert_eq!(v.h3().unwrap().port, 443);
        // A draft version is not h3; the first real h3 is picked.
        let v = parse("h3-29=\":1\", h3=\":2\"").unwrap();
        assert_eq!(v.h3().unwrap().port, 2);
        // Empty list elements are skipped.
        assert_eq!(parse(" , h3=\":443\" ,, ").unwrap().alternatives().len(), 1);
        // No h3 at all.
        assert!(parse("h2=\":443\"").unwrap().h3().is_none());
    }

    #[test]
    fn clear() {
        assert_eq!(parse("clear").unwrap(), AltSvc::Clear);
        assert_eq!(parse("  clear ").unwrap(), AltSvc::Clear);
        assert!(parse("clear").unwrap().h3().is_none());
        // Case-sensitive, and alone.
        assert!(bad("CLEAR").contains("protocol"), "{}", bad("CLEAR"));
        assert!(bad("clear, h3=\":443\"").contains("whole value"));
    }

    #[test]
    fn max_age() {
        assert_eq!(one("h3=\":443\";ma=0").ma, Some(0));
        assert_eq!(one("h3=\":443\"; MA=60").ma, Some(60));
        assert_eq!(one("h3=\":443\"; ma=\"60\"").ma, Some(60));
        // Too large saturates instead of failing.
        assert_eq!(
            one("h3=\":443\"; ma=99999999999999999999999").ma,
            Some(2_147_483_647)
        );
        assert!(bad("h3=\":443\"; ma=-1").contains("ma=-1 is not a number"));
        assert!(bad("h3=\":443\"; ma=1d").contains("ma=1d"));
        assert!(bad("h3=\":443\"; ma=").contains("empty value"));
    }

    #[test]
    fn persist() {
        assert!(one("h3=\":443\"; persist=1").persist);
        // Values other than 1 are ignored (RFC 7838 §3.1).
        assert!(!one("h3=\":443\"; persist=0").persist);
        assert!(!one("h3=\":443\"; persist=yes").persist);
    }

    #[test]
    fn unknown_parameters_are_kept() {
        let a = one("h3=\":443\"; ma=10; v=\"1,2\"; Foo=bar; persist=1");
        assert_eq!(a.ma, Some(10));
        assert!(a.persist);
        let u: Vec<_> = a
            .unknown
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(u, [("v", "1,2"), ("foo", "bar")]);
        // A comma inside a quoted value does not split the list.
        assert_eq!(
            parse("h3=\":1\"; v=\"a,b\", h2=\":2\"")
                .unwrap()
                .alternatives()
                .len(),
            2
        );
        // A trailing ';' is tolerated.
        assert_eq!(one("h3=\":443\"; ma=5;").ma, Some(5));
    }

    #[test]
    fn percent_encoded_protocol() {
        assert_eq!(one("w%3Dx%3Ay=\":1\"").protocol, "w=x:y");
        assert!(bad("h%3=\":1\"").contains("percent"));
    }

    #[test]
    fn malformed_values_say_what_is_wrong() {
        for (v, says) in [
            ("", "empty value"),
            ("h3=:443", "must be quoted"),
            ("h3", "expected '=\"host:port\"'"),
            ("h3=\"443\"", "no ':port'"),
            ("h3=\":0\"", "not 1 to 65535"),
            ("h3=\":65536\"", "not 1 to 65535"),
            ("h3=\":+44\"", "not 1 to 65535"),
            ("h3=\"::1:443\"", "brackets"),
            ("h3=\":443", "unterminated"),
            ("h3=\":443\" x", "expected ','"),
            ("h3=\":443\"; ma", "no '=value'"),
            ("h3=\":443\"; =5", "parameter name"),
            ("=\":443\"", "protocol name"),
        ] {
            let e = bad(v);
            assert!(e.contains(says), "{v:?}: {e}");
            assert!(e.starts_with("invalid Alt-Svc: "), "{e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn never_panics_on_any_prefix() {
        let v = "h3=\"[::1]:443\"; ma=\"60\"; persist=1; x=\"a\\\"b\", h2=\":8443\"";
        for i in 0..=v.len() {
            let _ = parse(&v[..i]);
        }
        for b in 0u8..=255 {
            let s = String::from_utf8_lossy(&[b'h', b'3', b'=', b'"', b, b'"']).into_owned();
            let _ = parse(&s);
        }
    }
}
