//! The HPACK decoder for response header blocks (RFC 7541 §3, §6): static
//! and dynamic table (bounded by the table size the client advertises,
//! size updates, eviction), literal and indexed fields, Huffman strings.
//! Fields go to a [`Sink`] as borrowed slices: nothing is allocated per
//! block except dynamic-table entries; a value the sink does not want is
//! not even Huffman-decoded (unless it enters the dynamic table).

use super::{decode_int, huffman, HpackError, STATIC};
use std::collections::VecDeque;

/// Where decoded fields go.
pub trait Sink {
    /// Whether the value of a field named `name` is wanted (when not, the
    /// field is reported with `None` and its Huffman string not decoded).
    fn wants(&mut self, name: &[u8]) -> bool;
    /// One field, in block order.
    fn field(&mut self, name: &[u8], value: Option<&[u8]>);
}

/// A dynamic table entry: name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// One connection's decoding state (the dynamic table).
#[derive(Debug)]
pub struct Decoder {
    /// Newest first.
    table: VecDeque<Entry>,
    /// Sum of entry sizes (name + value + 32, §4.1).
    size: usize,
    /// The size the server chose (size update), at most `limit`.
    max: usize,
    /// SETTINGS_HEADER_TABLE_SIZE as advertised.
    limit: usize,
    name: Vec<u8>,
    value: Vec<u8>,
    /// Huffman strings decoded lately (see [`HuffMemo`]).
    memo: HuffMemo,
}

/// The last few Huffman strings decoded, coded and decoded: a server sends
/// the same values again and again (nginx: `date`, `last-modified`, `etag`
/// with incremental indexing in every answer, so they are decoded every
/// time), and a comparison of a few bytes replaces the bit-by-bit decode
/// (it was a third of an h2c request's user-space instructions). Decoding
/// is a pure function of the coded bytes, so a hit is exact.
#[derive(Debug, Default)]
struct HuffMemo {
    /// (coded, decoded) pairs.
    slots: [(Vec<u8>, Vec<u8>); HuffMemo::SLOTS],
    /// The slot the next miss fills.
    next: usize,
}

impl HuffMemo {
    /// More than a server's usual answer headers (nginx: 6 coded values), or
    /// round-robin replacement would miss every time.
    const SLOTS: usize = 16;
    /// Longer strings are decoded each time (cookies, long values).
    const MAX: usize = 128;

    /// Decodes `raw` into `out` (cleared first), from the memo when it was seen lately.
    fn decode(&mut self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), huffman::HuffmanError> {
        out.clear();
        if raw.len() > Self::MAX {
            return huffman::decode(raw, out);
        }
        if let Some((_, d)) = self
            .slots
            .iter()
            .find(|(c, _)| c[..] == *raw && !c.is_empty())
        {
            out.extend_from_slice(d);
            return Ok(());
        }
        huffman::decode(raw, out)?;
        let slot = &mut self.slots[self.next];
        self.next = (self.next + 1) % Self::SLOTS;
        slot.0.clear();
        slot.0.extend_from_slice(raw);
        slot.1.clear();
        slot.1.extend_from_slice(out);
        Ok(())
    }
}

impl Decoder {
    /// A decoder whose table is bounded by `limit` bytes (the
    /// SETTINGS_HEADER_TABLE_SIZE the client advertises).
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: limit,
            limit,
            name: Vec::new(),
            value: Vec::new(),
            memo: HuffMemo::default(),
        }
    }

    /// The dynamic table's size now (§4.1).
    pub fn table_size(&self) -> usize {
        self.size
    }

    /// The dynamic table's entries, newest first.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.table.iter().map(|(n, v)| (&n[..], &v[..]))
    }

    /// Decodes one whole header block into `sink`; returns the header
    /// list's size (§4.1 of RFC 7541 sizes: name + value + 32 per field;
    /// for a value not decoded, its Huffman length's upper bound).
    pub fn decode(&mut self, block: &[u8], sink: &mut impl Sink) -> Result<usize, HpackError> {
        let mut at = 0;
        let mut list = 0usize;
        let mut fields = false;
        while at < block.len() {
            let b = block[at];
            if b & 0x80 != 0 {
                let i = decode_int(block, &mut at, 7)?;
                let (n, v) = lookup(&self.table, i)?;
                list += n.len() + v.len() + 32;
                sink.field(n, Some(v));
                fields = true;
            } else if b & 0x40 != 0 {
                let i = decode_int(block, &mut at, 6)?;
                let name = if i == 0 {
                    string(block, &mut at, &mut self.name, &mut self.memo, true)?
                        .unwrap_or_default()
                } else {
                    lookup(&self.table, i)?.0
                };
                let value = string(block, &mut at, &mut self.value, &mut self.memo, true)?
                    .unwrap_or_default();
                let size = name.len() + value.len() + 32;
                list += size;
                sink.field(name, Some(value));
                if size > self.max {
                    // §4.4: an entry larger than the table empties it (nginx
                    // sets the table to 0 bytes and indexes every answer's
                    // fields: nothing to copy).
                    self.table.clear();
                    self.size = 0;
                } else {
                    let entry: Entry = (name.into(), value.into());
                    self.insert(entry);
                }
                fields = true;
            } else if b & 0x20 != 0 {
                if fields {
                    return Err(HpackError::BadSizeUpdate);
                }
                let n = decode_int(block, &mut at, 5)? as usize;
                if n > self.limit {
                    return Err(HpackError::BadSizeUpdate);
                }
                self.max = n;
                self.evict(0);
            } else {
                // Literal without indexing (0000) or never indexed (0001).
                let i = decode_int(block, &mut at, 4)?;
                let name = if i == 0 {
                    string(block, &mut at, &mut self.name, &mut self.memo, true)?
                        .unwrap_or_default()
                } else {
                    lookup(&self.table, i)?.0
                };
                let want = sink.wants(name);
                let start = at;
                let value = string(block, &mut at, &mut self.value, &mut self.memo, want)?;
                list += name.len()
                    + 32
                    + match value {
                        Some(v) => v.len(),
                        None => (at - start) * 8 / 5,
                    };
                sink.field(name, value);
                fields = true;
            }
        }
        Ok(list)
    }

    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some((n, v)) => self.size -= n.len() + v.len() + 32,
                None => break,
            }
        }
    }

    /// Adds an entry that fits in the table (evicting the oldest as needed).
    fn insert(&mut self, entry: Entry) {
        let size = entry.0.len() + entry.1.len() + 32;
        self.evict(size);
        self.size += size;
        self.table.push_front(entry);
    }
}

/// The field at `index` (1-based: the static table, then the dynamic one).
fn lookup(table: &VecDeque<Entry>, index: u32) -> Result<(&[u8], &[u8]), HpackError> {
    let i = index as usize;
    if i == 0 {
        return Err(HpackError::BadIndex);
    }
    if i <= STATIC.len() {
        let (n, v) = STATIC[i - 1];
        return Ok((n.as_bytes(), v.as_bytes()));
    }
    table
        .get(i - STATIC.len() - 1)
        .map(|(n, v)| (&n[..], &v[..]))
        .ok_or(HpackError::BadIndex)
}

/// A string literal (§5.2) at `block[*at]`: a slice of the block, or
/// Huffman-decoded into `scratch`; None when `decode` is false and the
/// string is Huffman-coded (skipped, but checked to be in the block).
fn string<'a>(
    block: &'a [u8],
    at: &mut usize,
    scratch: &'a mut Vec<u8>,
    memo: &mut HuffMemo,
    decode: bool,
) -> Result<Option<&'a [u8]>, HpackError> {
    let huff = block.get(*at).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = decode_int(block, at, 7)? as usize;
    let raw = block.get(*at..*at + len).ok_or(HpackError::Truncated)?;
    *at += len;
    if !huff {
        return Ok(Some(raw));
    }
    if !decode {
        return Ok(None);
    }
    memo.decode(raw, scratch).map_err(|_| HpackError::Huffman)?;
    Ok(Some(&scratch[..]))
}
