//! Content decoding (gzip, br, deflate, zstd) with a cap on the decoded size, and
//! which content types are text.

use super::*;

/// Media types whose bodies are kept (parsed or checked).
pub fn is_text_type(ctype: &str) -> bool {
    ctype.starts_with("text/")
        || ctype.contains("javascript")
        || ctype.contains("json")
        || ctype.contains("xml")
        || ctype.contains("ecmascript")
}

/// The result of content decoding.
pub struct Decoded {
    /// Decoded bytes counted (up to the cap).
    pub total: u64,
    /// The first `keep` decoded bytes.
    pub kept: Vec<u8>,
    /// Stopped at [`MAX_DECODED`].
    pub capped: bool,
    /// The coding was unknown or the data corrupt.
    pub error: Option<String>,
}

/// Decodes a body by its `Content-Encoding` (gzip, x-gzip, deflate, br,
/// zstd, identity), counting at most [`MAX_DECODED`] bytes and keeping `keep`.
pub fn decode(coding: &str, body: &[u8], keep: usize) -> Decoded {
    let mut reader: Box<dyn Read + '_> = match coding {
        "" | "identity" => Box::new(body),
        "gzip" | "x-gzip" => Box::new(flate2::read::MultiGzDecoder::new(body)),
        "br" => Box::new(brotli_decompressor::Decompressor::new(body, 4096)),
        "zstd" => match ruzstd::decoding::StreamingDecoder::new(body) {
            Ok(d) => Box::new(d),
            Err(e) => {
                return Decoded {
                    total: 0,
                    kept: Vec::new(),
                    capped: false,
                    error: Some(format!("zstd data corrupt: {e}")),
                }
            }
        },
        "deflate" => {
            // RFC 9110 says zlib; some servers send raw deflate.
            if body.len() >= 2 && (u16::from(body[0]) << 8 | u16::from(body[1])) % 31 == 0 {
                Box::new(flate2::read::ZlibDecoder::new(body))
            } else {
                Box::new(flate2::read::DeflateDecoder::new(body))
            }
        }
        other => {
            return Decoded {
                total: body.len() as u64,
                kept: body[..body.len().min(keep)].to_vec(),
                capped: false,
                error: Some(format!("unknown content coding {other:?}")),
            }
        }
    };
    let mut out = Decoded {
        total: 0,
        kept: Vec::new(),
        capped: false,
        error: None,
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if out.kept.len() < keep {
                    let take = n.min(keep - out.kept.len());
                    out.kept.extend_from_slice(&buf[..take]);
                }
                out.total += n as u64;
                if out.total >= MAX_DECODED {
                    out.capped = true;
                    break;
                }
            }
            Err(e) => {
                out.error = Some(format!("{coding} data corrupt: {e}"));
                break;
            }
        }
    }
    out
}
