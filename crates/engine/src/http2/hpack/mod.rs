//! HPACK (RFC 7541) for the HTTP/2 client: the static table and integer
//! representation (here), Huffman code (`huffman.rs`), the response decoder
//! with its dynamic table (`decoder.rs`) and the request encoder, which
//! encodes a request's header block once (`encoder.rs`).

pub(crate) mod decoder;
pub mod encoder;
pub(crate) mod huffman;
#[cfg(test)]
mod tests;

pub use decoder::{Decoder, Sink};
pub use encoder::{encode_block, encode_indexed, IndexedBlocks};

/// The server's decoder table size until its SETTINGS says otherwise
/// (RFC 9113 §6.5.2).
pub const HPACK_DEFAULT_TABLE: u32 = 4096;

/// Why a header block cannot be decoded (a connection error:
/// COMPRESSION_ERROR, RFC 9113 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HpackError {
    /// The block ends inside a representation.
    Truncated,
    /// An integer too large for 32 bits.
    IntegerOverflow,
    /// An index past the static and dynamic tables.
    BadIndex,
    /// A Huffman string that breaks §5.2.
    Huffman,
    /// A dynamic table size update above the advertised limit, or not at
    /// the start of the block.
    BadSizeUpdate,
}

impl std::fmt::Display for HpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HpackError::Truncated => "HPACK block ends inside a field",
            HpackError::IntegerOverflow => "HPACK integer overflows",
            HpackError::BadIndex => "HPACK index past the tables",
            HpackError::Huffman => "invalid HPACK Huffman string",
            HpackError::BadSizeUpdate => "invalid HPACK dynamic table size update",
        })
    }
}

/// The static table (RFC 7541 Appendix A), index 1 first.
pub const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Decodes an integer with an `prefix`-bit prefix (§5.1) at `buf[*at]`,
/// moving `at` past it.
pub fn decode_int(buf: &[u8], at: &mut usize, prefix: u8) -> Result<u32, HpackError> {
    let mask = ((1u16 << prefix) - 1) as u8;
    let first = *buf.get(*at).ok_or(HpackError::Truncated)? & mask;
    *at += 1;
    if first < mask {
        return Ok(first as u32);
    }
    let mut v = mask as u64;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*at).ok_or(HpackError::Truncated)?;
        *at += 1;
        v += ((b & 0x7f) as u64) << shift;
        if v > u32::MAX as u64 {
            return Err(HpackError::IntegerOverflow);
        }
        if b & 0x80 == 0 {
            return Ok(v as u32);
        }
        shift += 7;
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
    }
}

/// Encodes `v` with an `prefix`-bit prefix, `high` holding the bits above
/// the prefix in the first byte (§5.1).
pub fn encode_int(v: u32, prefix: u8, high: u8, out: &mut Vec<u8>) {
    let mask = ((1u16 << prefix) - 1) as u32;
    if v < mask {
        out.push(high | v as u8);
        return;
    }
    out.push(high | mask as u8);
    let mut rest = v - mask;
    while rest >= 128 {
        out.push((rest % 128 + 128) as u8);
        rest /= 128;
    }
    out.push(rest as u8);
}
