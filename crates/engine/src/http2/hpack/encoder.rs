//! The HPACK encoder for requests: a request's header block is encoded once,
//! when the request is built, and copied as it is into every HEADERS frame.
//! Fields are "literal without indexing" (RFC 7541 §6.2.2) with the static
//! table's name index where there is one, or fully indexed when the static
//! table has the exact field (`:method GET`, `:path /`, `:scheme https`...);
//! credentials (Authorization, Proxy-Authorization, Cookie) are "never
//! indexed" (§6.2.3, §7.1.3). Nothing enters the server's dynamic table, so
//! the same bytes are valid on every stream of every connection.
//!
//! The run's own request also gets [`IndexedBlocks`] (`encode_indexed`):
//! its first block on a connection sends the literal fields "with
//! incremental indexing" (§6.2.1), so the server's decoder keeps them, and
//! every later block names them by their dynamic index (one or two bytes a
//! field), as browsers and h2load do: the server then decodes a few bytes
//! per request instead of every literal. The session decides which block a
//! stream gets (it knows what its connection's table holds).

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
    let mut out = Vec::new();
    request_fields(&mut out, [method, scheme, authority, path], fields, field);
    out
}

/// A request's fields in their order, each through `line` (HPACK's or
/// QPACK's field line): `:method`, `:scheme`, `:authority`, `:path`
/// (`pseudo`, in that order), then `fields`; `out` grown once.
pub fn request_fields(
    out: &mut Vec<u8>,
    pseudo: [&str; 4],
    fields: &[(String, String)],
    line: fn(&mut Vec<u8>, &str, &str),
) {
    out.reserve(
        64 + fields
            .iter()
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum::<usize>(),
    );
    for (name, value) in [":method", ":scheme", ":authority", ":path"]
        .into_iter()
        .zip(pseudo)
    {
        line(out, name, value);
    }
    for (k, v) in fields {
        line(out, k, v);
    }
}

/// A request's blocks for a connection whose dynamic table may hold its
/// fields (see the top of this file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedBlocks {
    /// The first block on a connection: literal fields with incremental indexing.
    pub first: Vec<u8>,
    /// Every later block: those fields by their dynamic-table index.
    pub again: Vec<u8>,
    /// What `first` adds to the server's table (§4.1: name + value + 32 each).
    pub table_size: usize,
}

/// Credentials are never indexed (§7.1.3).
fn secret(name: &str) -> bool {
    matches!(name, "authorization" | "proxy-authorization" | "cookie")
}

/// The static index of the exact field, if the table has it.
fn exact_static(name: &str, value: &str) -> Option<usize> {
    STATIC
        .iter()
        .position(|&(n, v)| n == name && v == value && !v.is_empty())
}

/// The request's [`IndexedBlocks`], or None when it has no field to index
/// or its fields would not fit in a table of `max_table` bytes (then the
/// plain block serves every stream).
pub fn encode_indexed(
    method: &str,
    scheme: &str,
    authority: &str,
    path: &str,
    fields: &[(String, String)],
    max_table: usize,
) -> Option<IndexedBlocks> {
    let all: Vec<(&str, &str)> = [
        (":method", method),
        (":scheme", scheme),
        (":authority", authority),
        (":path", path),
    ]
    .into_iter()
    .chain(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    .collect();
    let indexed = |n: &str, v: &str| !secret(n) && exact_static(n, v).is_none();
    let count = all.iter().filter(|(n, v)| indexed(n, v)).count();
    let table_size: usize = all
        .iter()
        .filter(|(n, v)| indexed(n, v))
        .map(|(n, v)| n.len() + v.len() + 32)
        .sum();
    if count == 0 || table_size > max_table {
        return None;
    }
    let mut first = Vec::with_capacity(64 + table_size);
    let mut again = Vec::with_capacity(64 + 2 * all.len());
    let mut k = 0usize;
    for (n, v) in all {
        if !indexed(n, v) {
            field(&mut first, n, v);
            field(&mut again, n, v);
            continue;
        }
        match STATIC.iter().position(|&(sn, _)| sn == n) {
            Some(i) => encode_int(i as u32 + 1, 6, 0x40, &mut first),
            None => {
                first.push(0x40);
                string(&mut first, n.as_bytes());
            }
        }
        string(&mut first, v.as_bytes());
        // The newest entry is index 62 (§2.3.3); the first inserted is the oldest.
        encode_int((62 + (count - 1 - k)) as u32, 7, 0x80, &mut again);
        k += 1;
    }
    Some(IndexedBlocks {
        first,
        again,
        table_size,
    })
}

/// Appends one field.
pub fn field(out: &mut Vec<u8>, name: &str, value: &str) {
    let secret = secret(name);
    if !secret {
        if let Some(i) = exact_static(name, value) {
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
