//! HTTP/3 framing (RFC 9114 §7) and QUIC variable-length integers (RFC 9000
//! §16): frame types, the client's SETTINGS, a frame header read from bytes
//! that may arrive split anywhere ([`FrameReader`]), stream types of
//! unidirectional streams, and the names of HTTP/3 error codes.

/// DATA (§7.2.1).
pub const DATA: u64 = 0x00;
/// HEADERS (§7.2.2).
pub const HEADERS: u64 = 0x01;
/// CANCEL_PUSH (§7.2.3).
pub const CANCEL_PUSH: u64 = 0x03;
/// SETTINGS (§7.2.4).
pub const SETTINGS: u64 = 0x04;
/// PUSH_PROMISE (§7.2.5).
pub const PUSH_PROMISE: u64 = 0x05;
/// GOAWAY (§7.2.6).
pub const GOAWAY: u64 = 0x07;
/// MAX_PUSH_ID (§7.2.7).
pub const MAX_PUSH_ID: u64 = 0x0d;

/// Unidirectional stream type: control (§6.2.1).
pub const STREAM_CONTROL: u64 = 0x00;
/// Unidirectional stream type: push (§6.2.2).
pub const STREAM_PUSH: u64 = 0x01;
/// Unidirectional stream type: QPACK encoder (RFC 9204 §4.2).
pub const STREAM_QPACK_ENCODER: u64 = 0x02;
/// Unidirectional stream type: QPACK decoder (RFC 9204 §4.2).
pub const STREAM_QPACK_DECODER: u64 = 0x03;

/// SETTINGS_QPACK_MAX_TABLE_CAPACITY (RFC 9204 §5).
pub const SETTINGS_QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
/// SETTINGS_MAX_FIELD_SECTION_SIZE (§7.2.4.1).
pub const SETTINGS_MAX_FIELD_SECTION_SIZE: u64 = 0x06;
/// SETTINGS_QPACK_BLOCKED_STREAMS (RFC 9204 §5).
pub const SETTINGS_QPACK_BLOCKED_STREAMS: u64 = 0x07;

/// H3_NO_ERROR (§8.1).
pub const H3_NO_ERROR: u64 = 0x100;
/// H3_FRAME_UNEXPECTED.
pub const H3_FRAME_UNEXPECTED: u64 = 0x105;
/// H3_REQUEST_REJECTED: the server did not process the request.
pub const H3_REQUEST_REJECTED: u64 = 0x10b;
/// H3_REQUEST_CANCELLED: the client gave up on a request.
pub const H3_REQUEST_CANCELLED: u64 = 0x10c;

/// The largest value a QUIC varint holds.
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// The encoded length of `v` (at most [`VARINT_MAX`]).
pub fn varint_len(v: u64) -> usize {
    match v {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends `v` as a QUIC varint (values over [`VARINT_MAX`] are cut to it).
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    let v = v.min(VARINT_MAX);
    match varint_len(v) {
        1 => out.push(v as u8),
        2 => out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// Reads a varint at `buf[*at]`, moving `at` past it; None when `buf` ends
/// inside it.
pub fn get_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let first = *buf.get(*at)?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(*at..*at + len)?;
    let mut v = u64::from(first & 0x3f);
    for &b in &bytes[1..] {
        v = (v << 8) | u64::from(b);
    }
    *at += len;
    Some(v)
}

/// Appends a frame header (type, payload length).
pub fn put_header(out: &mut Vec<u8>, ty: u64, len: u64) {
    put_varint(out, ty);
    put_varint(out, len);
}

/// The client's control stream opening: its stream type and SETTINGS
/// (QPACK_MAX_TABLE_CAPACITY 0, QPACK_BLOCKED_STREAMS 0: no dynamic table;
/// MAX_FIELD_SECTION_SIZE `max_field_section`).
pub fn control_preface(max_field_section: u64) -> Vec<u8> {
    let mut settings = Vec::with_capacity(16);
    for (k, v) in [
        (SETTINGS_QPACK_MAX_TABLE_CAPACITY, 0),
        (SETTINGS_QPACK_BLOCKED_STREAMS, 0),
        (SETTINGS_MAX_FIELD_SECTION_SIZE, max_field_section),
    ] {
        put_varint(&mut settings, k);
        put_varint(&mut settings, v);
    }
    let mut out = Vec::with_capacity(settings.len() + 4);
    put_varint(&mut out, STREAM_CONTROL);
    put_header(&mut out, SETTINGS, settings.len() as u64);
    out.extend_from_slice(&settings);
    out
}

/// Reads frames from a stream whose bytes arrive in pieces: the header
/// (type and length varints, split anywhere) is gathered here, the payload
/// is handed out as it comes.
#[derive(Debug, Default, Clone)]
pub struct FrameReader {
    /// Header bytes gathered so far (a header is at most 16 bytes).
    hdr: [u8; 16],
    hdr_len: u8,
    /// The current frame: its type and the payload bytes still to come.
    cur: Option<(u64, u64)>,
}

/// What [`FrameReader::next`] found at the front of the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// A frame starts: its type and payload length.
    Start {
        /// The frame type.
        ty: u64,
        /// Its payload length.
        len: u64,
    },
    /// `n` payload bytes of the current frame (type `ty`) are at the front;
    /// `last`: they end it.
    Payload {
        /// The frame type.
        ty: u64,
        /// How many bytes.
        n: usize,
        /// The frame ends with them.
        last: bool,
    },
    /// The bytes ran out.
    NeedMore,
}

impl FrameReader {
    /// Starts afresh (a stream slot reused).
    pub fn reset(&mut self) {
        self.hdr_len = 0;
        self.cur = None;
    }

    /// Inside a frame or a frame header (a stream ending here is truncated).
    pub fn mid_frame(&self) -> bool {
        self.hdr_len > 0 || self.cur.is_some()
    }

    /// The next piece of `data[*at..]`, moving `at` past the bytes it used
    /// (a header's bytes; a payload piece's are left for the caller, who
    /// moves `at` by `n`).
    pub fn next(&mut self, data: &[u8], at: &mut usize) -> Piece {
        if let Some((ty, left)) = self.cur {
            if left == 0 {
                self.cur = None;
                return Piece::Payload {
                    ty,
                    n: 0,
                    last: true,
                };
            }
            let avail = (data.len() - *at) as u64;
            if avail == 0 {
                return Piece::NeedMore;
            }
            let n = left.min(avail);
            let rest = left - n;
            self.cur = if rest == 0 { None } else { Some((ty, rest)) };
            return Piece::Payload {
                ty,
                n: n as usize,
                last: rest == 0,
            };
        }
        // Gather the header: two varints.
        while *at < data.len() {
            let h = self.hdr_len as usize;
            self.hdr[h] = data[*at];
            *at += 1;
            self.hdr_len += 1;
            let mut p = 0;
            let ty = get_varint(&self.hdr[..=h], &mut p);
            let len = ty.and_then(|_| get_varint(&self.hdr[..=h], &mut p));
            if let (Some(ty), Some(len)) = (ty, len) {
                self.hdr_len = 0;
                self.cur = Some((ty, len));
                return Piece::Start { ty, len };
            }
        }
        Piece::NeedMore
    }
}

/// A frame type reserved for greasing (§7.2.8: 0x1f * N + 0x21), or any
/// type this client does not know: skipped.
pub fn is_known(ty: u64) -> bool {
    matches!(
        ty,
        DATA | HEADERS | CANCEL_PUSH | SETTINGS | PUSH_PROMISE | GOAWAY | MAX_PUSH_ID
    )
}

/// The name of an HTTP/3 (or QPACK) error code, for messages.
pub fn error_name(code: u64) -> &'static str {
    match code {
        0x100 => "H3_NO_ERROR",
        0x101 => "H3_GENERAL_PROTOCOL_ERROR",
        0x102 => "H3_INTERNAL_ERROR",
        0x103 => "H3_STREAM_CREATION_ERROR",
        0x104 => "H3_CLOSED_CRITICAL_STREAM",
        0x105 => "H3_FRAME_UNEXPECTED",
        0x106 => "H3_FRAME_ERROR",
        0x107 => "H3_EXCESSIVE_LOAD",
        0x108 => "H3_ID_ERROR",
        0x109 => "H3_SETTINGS_ERROR",
        0x10a => "H3_MISSING_SETTINGS",
        0x10b => "H3_REQUEST_REJECTED",
        0x10c => "H3_REQUEST_CANCELLED",
        0x10d => "H3_REQUEST_INCOMPLETE",
        0x10e => "H3_MESSAGE_ERROR",
        0x10f => "H3_CONNECT_ERROR",
        0x110 => "H3_VERSION_FALLBACK",
        0x200 => "QPACK_DECOMPRESSION_FAILED",
        0x201 => "QPACK_ENCODER_STREAM_ERROR",
        0x202 => "QPACK_DECODER_STREAM_ERROR",
        _ => "unknown error code",
    }
}
