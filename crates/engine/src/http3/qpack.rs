//! QPACK (RFC 9204) with the static table only: the client advertises a
//! dynamic table capacity of 0 and no blocked streams, so a field section
//! never refers to a dynamic table and needs no encoder or decoder stream.
//! Requests are encoded once (static references where the table has the
//! field or its name, literals otherwise, Huffman when shorter; credentials
//! "never indexed"); answers are decoded into the HPACK decoder's
//! [`Sink`] without allocating (a value nobody wants is not even
//! Huffman-decoded). The prefix integers and the Huffman code are HPACK's
//! (`http2/hpack`): QPACK uses the same ones.

use crate::http2::hpack::encoder::request_fields;
use crate::http2::hpack::{decode_int, encode_int, huffman, Sink};

/// The static table (RFC 9204 Appendix A), index 0 first.
pub const STATIC: [(&str, &str); 99] = [
    (":authority", ""),
    (":path", "/"),
    ("age", "0"),
    ("content-disposition", ""),
    ("content-length", "0"),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("referer", ""),
    ("set-cookie", ""),
    (":method", "CONNECT"),
    (":method", "DELETE"),
    (":method", "GET"),
    (":method", "HEAD"),
    (":method", "OPTIONS"),
    (":method", "POST"),
    (":method", "PUT"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "103"),
    (":status", "200"),
    (":status", "304"),
    (":status", "404"),
    (":status", "503"),
    ("accept", "*/*"),
    ("accept", "application/dns-message"),
    ("accept-encoding", "gzip, deflate, br"),
    ("accept-ranges", "bytes"),
    ("access-control-allow-headers", "cache-control"),
    ("access-control-allow-headers", "content-type"),
    ("access-control-allow-origin", "*"),
    ("cache-control", "max-age=0"),
    ("cache-control", "max-age=2592000"),
    ("cache-control", "max-age=604800"),
    ("cache-control", "no-cache"),
    ("cache-control", "no-store"),
    ("cache-control", "public, max-age=31536000"),
    ("content-encoding", "br"),
    ("content-encoding", "gzip"),
    ("content-type", "application/dns-message"),
    ("content-type", "application/javascript"),
    ("content-type", "application/json"),
    ("content-type", "application/x-www-form-urlencoded"),
    ("content-type", "image/gif"),
    ("content-type", "image/jpeg"),
    ("content-type", "image/png"),
    ("content-type", "text/css"),
    ("content-type", "text/html; charset=utf-8"),
    ("content-type", "text/plain"),
    ("content-type", "text/plain;charset=utf-8"),
    ("range", "bytes=0-"),
    ("strict-transport-security", "max-age=31536000"),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains",
    ),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains; preload",
    ),
    ("vary", "accept-encoding"),
    ("vary", "origin"),
    ("x-content-type-options", "nosniff"),
    ("x-xss-protection", "1; mode=block"),
    (":status", "100"),
    (":status", "204"),
    (":status", "206"),
    (":status", "302"),
    (":status", "400"),
    (":status", "403"),
    (":status", "421"),
    (":status", "425"),
    (":status", "500"),
    ("accept-language", ""),
    ("access-control-allow-credentials", "FALSE"),
    ("access-control-allow-credentials", "TRUE"),
    ("access-control-allow-headers", "*"),
    ("access-control-allow-methods", "get"),
    ("access-control-allow-methods", "get, post, options"),
    ("access-control-allow-methods", "options"),
    ("access-control-expose-headers", "content-length"),
    ("access-control-request-headers", "content-type"),
    ("access-control-request-method", "get"),
    ("access-control-request-method", "post"),
    ("alt-svc", "clear"),
    ("authorization", ""),
    (
        "content-security-policy",
        "script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    ("early-data", "1"),
    ("expect-ct", ""),
    ("forwarded", ""),
    ("if-range", ""),
    ("origin", ""),
    ("purpose", "prefetch"),
    ("server", ""),
    ("timing-allow-origin", "*"),
    ("upgrade-insecure-requests", "1"),
    ("user-agent", ""),
    ("x-forwarded-for", ""),
    ("x-frame-options", "deny"),
    ("x-frame-options", "sameorigin"),
];

/// Why a field section cannot be decoded (QPACK_DECOMPRESSION_FAILED).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpackError {
    /// The section ends inside a representation.
    Truncated,
    /// An integer too large.
    IntegerOverflow,
    /// A static index past the table.
    BadIndex,
    /// A reference to the dynamic table, whose capacity the client set to 0.
    Dynamic,
    /// A Huffman string that breaks RFC 7541 §5.2.
    Huffman,
}

impl std::fmt::Display for QpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            QpackError::Truncated => "QPACK field section ends inside a field",
            QpackError::IntegerOverflow => "QPACK integer overflows",
            QpackError::BadIndex => "QPACK static index past the table",
            QpackError::Dynamic => {
                "QPACK dynamic table reference (the client allows no dynamic table)"
            }
            QpackError::Huffman => "invalid QPACK Huffman string",
        })
    }
}

impl From<crate::http2::hpack::HpackError> for QpackError {
    fn from(e: crate::http2::hpack::HpackError) -> QpackError {
        use crate::http2::hpack::HpackError as H;
        match e {
            H::Truncated => QpackError::Truncated,
            H::Huffman => QpackError::Huffman,
            H::BadIndex | H::BadSizeUpdate => QpackError::BadIndex,
            H::IntegerOverflow => QpackError::IntegerOverflow,
        }
    }
}

/// Credentials: "never indexed" literals (RFC 9204 §7.1.3: the N bit).
fn secret(name: &str) -> bool {
    matches!(
        name,
        "authorization" | "proxy-authorization" | "cookie" | "x-api-key"
    )
}

/// A string literal with an `prefix`-bit length prefix whose H bit is
/// `0x80 >> (7 - prefix)` relative to the prefix; `high` holds the bits above
/// the H bit. Huffman-coded when that is shorter.
fn string(out: &mut Vec<u8>, s: &[u8], prefix: u8, high: u8) {
    let h = huffman::encoded_len(s);
    let hbit = 1u8 << prefix;
    if h < s.len() {
        encode_int(h as u32, prefix, high | hbit, out);
        huffman::encode(s, out);
    } else {
        encode_int(s.len() as u32, prefix, high, out);
        out.extend_from_slice(s);
    }
}

/// Appends one field line (§4.5): an indexed static line when the table has
/// the exact field (credentials aside), a literal with a static name
/// reference when it has the name, else a literal with a literal name.
pub fn field(out: &mut Vec<u8>, name: &str, value: &str) {
    let never = secret(name);
    if !never {
        if let Some(i) = STATIC.iter().position(|&(n, v)| n == name && v == value) {
            // 1 T=1 index(6)
            encode_int(i as u32, 6, 0xc0, out);
            return;
        }
    }
    let n = if never { 0x20 } else { 0 };
    match STATIC.iter().position(|&(n, _)| n == name) {
        // 01 N T=1 index(4)
        Some(i) => encode_int(i as u32, 4, 0x40 | n | 0x10, out),
        None => {
            // 001 N H namelen(3)
            string(out, name.as_bytes(), 3, 0x20 | (n >> 1));
        }
    }
    string(out, value.as_bytes(), 7, 0);
}

/// A request's field section: the prefix (Required Insert Count 0, Base 0),
/// the pseudo-headers (`:method`, `:scheme`, `:authority`, `:path`: RFC 9114
/// §4.3.1), then `fields` (lower case, connection-specific ones already gone).
pub fn encode_request(pseudo: [&str; 4], fields: &[(String, String)]) -> Vec<u8> {
    let mut out = vec![0, 0];
    request_fields(&mut out, pseudo, fields, field);
    out
}

/// Decodes a field section into `sink` with two scratch buffers for Huffman
/// strings (kept by the caller, so nothing is allocated once they have
/// grown); returns the field section's size (name + value + 32 per field,
/// RFC 9114 §4.2.2; a value not decoded counts its Huffman upper bound).
pub fn decode(
    block: &[u8],
    sink: &mut impl Sink,
    name_buf: &mut Vec<u8>,
    value_buf: &mut Vec<u8>,
) -> Result<usize, QpackError> {
    let mut at = 0;
    // The prefix: Required Insert Count (8-bit prefix), then S + Delta Base.
    let ric = decode_int(block, &mut at, 8)?;
    if ric != 0 {
        return Err(QpackError::Dynamic);
    }
    decode_int(block, &mut at, 7)?;
    let mut size = 0usize;
    while at < block.len() {
        let b = block[at];
        if b & 0x80 != 0 {
            // Indexed field line: 1 T index(6).
            if b & 0x40 == 0 {
                return Err(QpackError::Dynamic);
            }
            let i = decode_int(block, &mut at, 6)? as usize;
            let &(n, v) = STATIC.get(i).ok_or(QpackError::BadIndex)?;
            size += n.len() + v.len() + 32;
            sink.field(n.as_bytes(), Some(v.as_bytes()));
        } else if b & 0x40 != 0 {
            // Literal with name reference: 01 N T index(4).
            if b & 0x10 == 0 {
                return Err(QpackError::Dynamic);
            }
            let i = decode_int(block, &mut at, 4)? as usize;
            let name = STATIC.get(i).ok_or(QpackError::BadIndex)?.0.as_bytes();
            size += value(block, &mut at, name, sink, value_buf)?;
        } else if b & 0x20 != 0 {
            // Literal with literal name: 001 N H namelen(3).
            let (huff, raw) = literal(block, &mut at, 3)?;
            let name = plain(huff, raw, name_buf)?;
            size += value(block, &mut at, name, sink, value_buf)?;
        } else {
            // 0001: indexed with post-base index; 0000: literal with
            // post-base name reference. Both name the dynamic table.
            return Err(QpackError::Dynamic);
        }
    }
    Ok(size)
}

/// Reads a value string (H + 7-bit length) for field `name` and hands the
/// field to `sink`; returns the field's size.
fn value(
    block: &[u8],
    at: &mut usize,
    name: &[u8],
    sink: &mut impl Sink,
    buf: &mut Vec<u8>,
) -> Result<usize, QpackError> {
    let (huff, raw) = literal(block, at, 7)?;
    if !sink.wants(name) {
        sink.field(name, None);
        let bound = if huff { raw.len() * 8 / 5 } else { raw.len() };
        return Ok(name.len() + bound + 32);
    }
    let v = plain(huff, raw, buf)?;
    sink.field(name, Some(v));
    Ok(name.len() + v.len() + 32)
}

/// A string literal at `block[*at]` with a `prefix`-bit length whose H bit
/// (Huffman) sits just above it: whether it is Huffman-coded, and its bytes.
fn literal<'a>(
    block: &'a [u8],
    at: &mut usize,
    prefix: u8,
) -> Result<(bool, &'a [u8]), QpackError> {
    let huff = block.get(*at).ok_or(QpackError::Truncated)? & (1 << prefix) != 0;
    let len = decode_int(block, at, prefix)? as usize;
    let raw = block.get(*at..*at + len).ok_or(QpackError::Truncated)?;
    *at += len;
    Ok((huff, raw))
}

/// A literal's text: `raw` itself, or Huffman-decoded into `buf`.
fn plain<'a>(huff: bool, raw: &'a [u8], buf: &'a mut Vec<u8>) -> Result<&'a [u8], QpackError> {
    if !huff {
        return Ok(raw);
    }
    buf.clear();
    huffman::decode(raw, buf).map_err(|_| QpackError::Huffman)?;
    Ok(buf)
}
