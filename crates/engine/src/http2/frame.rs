//! HTTP/2 frames (RFC 9113 §4, §6): the 9-byte header, frame types and
//! flags, writing the frames a client sends, and the names of error codes
//! (§7). Payloads are parsed where they are used (`conn.rs`).

/// DATA (§6.1).
pub const DATA: u8 = 0x0;
/// HEADERS (§6.2).
pub const HEADERS: u8 = 0x1;
/// PRIORITY (§6.3).
pub const PRIORITY: u8 = 0x2;
/// RST_STREAM (§6.4).
pub const RST_STREAM: u8 = 0x3;
/// SETTINGS (§6.5).
pub const SETTINGS: u8 = 0x4;
/// PUSH_PROMISE (§6.6).
pub const PUSH_PROMISE: u8 = 0x5;
/// PING (§6.7).
pub const PING: u8 = 0x6;
/// GOAWAY (§6.8).
pub const GOAWAY: u8 = 0x7;
/// WINDOW_UPDATE (§6.9).
pub const WINDOW_UPDATE: u8 = 0x8;
/// CONTINUATION (§6.10).
pub const CONTINUATION: u8 = 0x9;

/// END_STREAM (DATA, HEADERS).
pub const END_STREAM: u8 = 0x1;
/// ACK (SETTINGS, PING).
pub const ACK: u8 = 0x1;
/// END_HEADERS (HEADERS, CONTINUATION).
pub const END_HEADERS: u8 = 0x4;
/// PADDED (DATA, HEADERS).
pub const PADDED: u8 = 0x8;
/// PRIORITY (HEADERS).
pub const PRIORITY_FLAG: u8 = 0x20;

/// SETTINGS identifiers (§6.5.2).
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
/// SETTINGS_ENABLE_PUSH.
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
/// SETTINGS_MAX_CONCURRENT_STREAMS.
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
/// SETTINGS_INITIAL_WINDOW_SIZE.
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
/// SETTINGS_MAX_FRAME_SIZE.
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
/// SETTINGS_MAX_HEADER_LIST_SIZE.
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// Error codes (§7).
pub const NO_ERROR: u32 = 0x0;
/// PROTOCOL_ERROR.
pub const PROTOCOL_ERROR: u32 = 0x1;
/// FLOW_CONTROL_ERROR.
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
/// FRAME_SIZE_ERROR.
pub const FRAME_SIZE_ERROR: u32 = 0x6;
/// REFUSED_STREAM.
pub const REFUSED_STREAM: u32 = 0x7;
/// CANCEL.
pub const CANCEL: u32 = 0x8;
/// COMPRESSION_ERROR.
pub const COMPRESSION_ERROR: u32 = 0x9;

/// The client connection preface (§3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The smallest (and default) SETTINGS_MAX_FRAME_SIZE (§6.5.2).
pub const MIN_MAX_FRAME: u32 = 16_384;

/// The RFC name of an HTTP/2 error code (§7), `UNKNOWN` for others.
pub fn error_name(code: u32) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => "UNKNOWN",
    }
}

/// A frame header (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Payload length (24 bits).
    pub len: u32,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (the reserved bit cleared).
    pub stream: u32,
}

impl Head {
    /// Parses the first 9 bytes of `b` (the caller checked there are 9).
    #[inline]
    pub fn parse(b: &[u8]) -> Head {
        Head {
            len: (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32,
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }
}

/// Appends a frame header.
#[inline]
pub fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let s = stream.to_be_bytes();
    out.extend_from_slice(&[
        (len >> 16) as u8,
        (len >> 8) as u8,
        len as u8,
        kind,
        flags,
        s[0],
        s[1],
        s[2],
        s[3],
    ]);
}

/// Appends a SETTINGS frame with `pairs`.
pub fn write_settings(out: &mut Vec<u8>, pairs: &[(u16, u32)]) {
    write_head(out, pairs.len() * 6, SETTINGS, 0, 0);
    for (id, v) in pairs {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Appends a WINDOW_UPDATE frame.
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// Appends a RST_STREAM frame.
pub fn write_rst(out: &mut Vec<u8>, stream: u32, code: u32) {
    write_head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends a GOAWAY frame (the client never accepts streams: last id 0).
pub fn write_goaway(out: &mut Vec<u8>, code: u32) {
    write_head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

/// The payload of a PADDED frame without its padding (§6.1, §6.2); None
/// when the pad length is not below the payload's length.
pub fn unpad(flags: u8, payload: &[u8]) -> Option<&[u8]> {
    if flags & PADDED == 0 {
        return Some(payload);
    }
    let pad = *payload.first()? as usize;
    let rest = &payload[1..];
    if pad > rest.len() {
        return None;
    }
    Some(&rest[..rest.len() - pad])
}
