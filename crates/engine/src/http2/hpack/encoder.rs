//! The HPACK encoder for requests: a request's header block is encoded once,
//! when the request is built, and copied as it is into every HEADERS frame.
//! Fields are "literal without indexing" (RFC 7541 §6.2.2) with the static
//! table's name index where there is one, or fully indexed when the static
//! table has the exact field (`:method GET`, `:path /`, `:scheme https`...);
//! credentials (Authorization, Proxy-Authorization, Cookie) are "never
//! indexed" (§6.2.3, §7.1.3). Nothing enters the server's dynamic table, so
//! the same bytes are valid on every stream of every connection.

use super::{encode_int, huffman, STATIC};

/// The header block for a request: pseudo-headers first (RFC 9113 §8.3.1),
/// then `fields` (names lower case, connection-specific ones already gone).
pub fn encode_block(
    method: &str,
    scheme: &str,
    authority: &str,
    path: &str,
    fields: &[(String, String)],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        64 + fields
            .iter()
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum::<usize>(),
    );
    field(&mut out, ":method", method);
    field(&mut out, ":scheme", scheme);
    field(&mut out, ":authority", authority);
    field(&mut out, ":path", path);
    for (k, v) in fields {
        field(&mut out, k, v);
    }
    out
}

/// Appends one field.
pub fn field(out: &mut Vec<u8>, name: &str, value: &str) {
    let secret = matches!(name, "authorization" | "proxy-authorization" | "cookie");
    if !secret {
        if let Some(i) = STATIC
            .iter()
            .position(|&(n, v)| n == name && v == value && !v.is_empty())
        {
            encode_int(i as u32 + 1, 7, 0x80, out);
            return;
        }
    }
    let high = if secret { 0x10 } else { 0x00 };
    match STATIC.iter().position(|&(n, _)| n == name) {
        Some(i) => encode_int(i as u32 + 1, 4, high, out),
        None => {
            out.push(high);
            string(out, name.as_bytes());
        }
    }
    string(out, value.as_bytes());
}

/// A string literal, Huffman-coded when that is shorter (§5.2).
fn string(out: &mut Vec<u8>, s: &[u8]) {
    let h = huffman::encoded_len(s);
    if h < s.len() {
        encode_int(h as u32, 7, 0x80, out);
        huffman::encode(s, out);
    } else {
        encode_int(s.len() as u32, 7, 0, out);
        out.extend_from_slice(s);
    }
}
