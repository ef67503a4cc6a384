//! HPACK Huffman code (RFC 7541 §5.2, Appendix B): the code table is spec
//! data; decoding walks a 4-bit state machine built once from it (each
//! nibble: next state, at most one symbol, or failure), so a string costs two
//! table lookups per byte and no allocation beyond the caller's buffer.

use std::sync::OnceLock;

/// The Huffman code of each byte value (RFC 7541 Appendix B), MSB-aligned
/// in the low `CODE_LENGTHS[i]` bits.
pub(crate) const CODES: [u32; 256] = [
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8,
    0xffffea, 0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed,
    0xfffffee, 0xfffffef, 0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4,
    0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb, 0x14, 0x3f8,
    0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18,
    0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb,
    0x3fc, 0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0,
    0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74, 0x75,
    0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78, 0x79, 0x7a, 0x7b, 0x7ffe,
    0x7fc, 0x3ffd, 0x1ffd, 0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4,
    0x3fffd5, 0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb,
    0x7fffdf, 0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3,
    0x7fffe4, 0x1fffdc, 0x3fffd8, 0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda,
    0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde, 0x7fffea, 0x3fffdd,
    0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0, 0x1fffe1, 0x3fffe0,
    0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4,
    0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7,
    0x7ffff2, 0x3fffe8, 0x1ffffec, 0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf,
    0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2, 0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7,
    0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4,
    0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3,
    0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb,
    0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb,
    0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee,
];

/// The bit length of each code in [`CODES`].
pub(crate) const CODE_LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
];

/// EOS (RFC 7541 Appendix B, symbol 256): 30 one bits.
const EOS_CODE: u32 = 0x3fff_ffff;
const EOS_LEN: u8 = 30;

const EMIT: u32 = 1 << 16;
const FAIL: u32 = 1 << 17;
/// A state where the string may end: only one bits read since the last
/// symbol, and fewer than 8 of them (the padding rule of §5.2).
const ACCEPT: u32 = 1 << 18;

/// The decoding state machine: for state `s` (an inner node of the code
/// tree, 0 the root) and nibble `n`, entry `s * 16 + n` holds the next state
/// (bits 0-7), the symbol (bits 8-15) when `EMIT`, `FAIL`, and `ACCEPT` for
/// the next state.
fn machine() -> &'static [u32] {
    static M: OnceLock<Vec<u32>> = OnceLock::new();
    M.get_or_init(build)
}

fn build() -> Vec<u32> {
    // The code tree: inner nodes with two children, each an inner node
    // (index) or a leaf (symbol | LEAF).
    const LEAF: u32 = 1 << 31;
    const NONE: u32 = u32::MAX;
    let mut nodes: Vec<[u32; 2]> = vec![[NONE, NONE]];
    let mut insert = |code: u32, len: u8, sym: u32| {
        let mut n = 0usize;
        for i in (0..len).rev() {
            let bit = ((code >> i) & 1) as usize;
            if i == 0 {
                nodes[n][bit] = sym | LEAF;
            } else {
                if nodes[n][bit] == NONE {
                    nodes.push([NONE, NONE]);
                    nodes[n][bit] = (nodes.len() - 1) as u32;
                }
                n = nodes[n][bit] as usize;
            }
        }
    };
    for s in 0..256 {
        insert(CODES[s], CODE_LENGTHS[s], s as u32);
    }
    insert(EOS_CODE, EOS_LEN, 256);
    debug_assert_eq!(nodes.len(), 256);
    // Accepting states: reached from the root by 0..=7 one bits.
    let mut accept = vec![false; nodes.len()];
    let mut n = 0usize;
    accept[0] = true;
    for _ in 0..7 {
        n = nodes[n][1] as usize;
        accept[n] = true;
    }
    let mut m = vec![0u32; nodes.len() * 16];
    for s in 0..nodes.len() {
        for nib in 0..16u32 {
            let mut n = s;
            let mut e = 0u32;
            for i in (0..4).rev() {
                let c = nodes[n][((nib >> i) & 1) as usize];
                if c & LEAF != 0 {
                    let sym = c & !LEAF;
                    if sym == 256 || e & EMIT != 0 {
                        // EOS in a string is an error (§5.2); two symbols
                        // in one nibble cannot happen (codes are >= 5 bits).
                        e |= FAIL;
                        break;
                    }
                    e |= EMIT | (sym << 8);
                    n = 0;
                } else {
                    n = c as usize;
                }
            }
            if accept[n] {
                e |= ACCEPT;
            }
            m[s * 16 + nib as usize] = e | n as u32;
        }
    }
    m
}

/// Why a Huffman string is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HuffmanError;

/// Decodes `src` (a Huffman-coded string) onto `out`.
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let m = machine();
    out.reserve(src.len() * 8 / 5 + 1);
    let mut state = 0usize;
    let mut accept = true;
    for &b in src {
        for nib in [b >> 4, b & 0xf] {
            let e = m[state * 16 + nib as usize];
            if e & FAIL != 0 {
                return Err(HuffmanError);
            }
            if e & EMIT != 0 {
                out.push((e >> 8) as u8);
            }
            state = (e & 0xff) as usize;
            accept = e & ACCEPT != 0;
        }
    }
    if accept {
        Ok(())
    } else {
        Err(HuffmanError)
    }
}

/// The Huffman-coded length of `src`, in bytes.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| CODE_LENGTHS[b as usize] as usize).sum();
    bits.div_ceil(8)
}

/// Encodes `src` onto `out` (padded with the EOS prefix, §5.2).
pub fn encode(src: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut n = 0u32;
    for &b in src {
        acc = (acc << CODE_LENGTHS[b as usize]) | CODES[b as usize] as u64;
        n += CODE_LENGTHS[b as usize] as u32;
        while n >= 8 {
            n -= 8;
            out.push((acc >> n) as u8);
        }
        acc &= (1u64 << n) - 1;
    }
    if n > 0 {
        out.push(((acc << (8 - n)) | (0xff >> n)) as u8);
    }
}
