//! An HTTP/2 request built once (from the plan's `RequestSpec`, whose
//! `Http2Request::from_spec` lives with the spec in `plan/request.rs` so the
//! codec imports nothing of the plan, or from parts for scenario steps and
//! redirect hops): its HPACK header block is encoded here, so submitting it
//! copies bytes and writes frame headers. [`h2_dropped`]: the fields HTTP/2
//! does not carry.

use super::hpack::{self, IndexedBlocks};
use crate::field::header_ok;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2) or expresses as pseudo-headers.
pub(crate) fn h2_dropped(name: &str) -> bool {
    matches!(
        name,
        "host" | "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade"
    )
}

/// Gives each request built [`Http2Request::with_indexing`] its own key.
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// A request in HTTP/2 form with its header block encoded. The fields say
/// what the block holds; changing one does not re-encode it (build another
/// request with [`Http2Request::from_parts`]).
#[derive(Debug, Clone)]
pub struct Http2Request {
    /// `:method`.
    pub method: String,
    /// `:scheme`.
    pub scheme: String,
    /// `:authority`.
    pub authority: String,
    /// `:path`.
    pub path: String,
    /// The fields sent (lower case, connection-specific ones dropped).
    pub headers: Vec<(String, String)>,
    /// DATA (empty: HEADERS ends the stream).
    pub body: Bytes,
    /// The HPACK block (RFC 7541), encoded once.
    pub block: Bytes,
    /// With [`Http2Request::with_indexing`]: the blocks that put the fields
    /// in a connection's dynamic table, then name them by index.
    pub indexed: Option<Arc<IndexedBlocks>>,
    /// Which request `indexed` belongs to (clones share it): a connection
    /// whose table holds this key's fields may send `indexed.again`.
    pub key: u64,
}

impl Http2Request {
    /// A request from its parts (scenario steps, redirect hops); `headers`
    /// in any case, `Host` and connection-specific ones dropped.
    pub fn from_parts(
        method: &str,
        scheme: &str,
        authority: &str,
        path: &str,
        headers: &[(String, String)],
        body: Bytes,
    ) -> Result<Http2Request, String> {
        let bad = |why: String| format!("cannot express the request in HTTP/2: {why}");
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad(format!("method '{}'", method.escape_debug())));
        }
        if authority.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(bad(
                "the authority holds a control character or space".into()
            ));
        }
        if path.is_empty() || path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(bad(
                "the path is empty or holds a control character or space".into(),
            ));
        }
        let mut fields = Vec::with_capacity(headers.len());
        for (k, v) in headers {
            let name = k.to_ascii_lowercase();
            if h2_dropped(&name) || (name == "te" && !v.eq_ignore_ascii_case("trailers")) {
                continue;
            }
            if !header_ok(&name, "") {
                return Err(bad(format!("header name '{}'", name.escape_debug())));
            }
            if v.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                return Err(bad(format!(
                    "the value of header '{name}' holds a control character"
                )));
            }
            fields.push((name, v.clone()));
        }
        let block = hpack::encode_block(method, scheme, authority, path, &fields);
        Ok(Http2Request {
            method: method.to_string(),
            scheme: scheme.to_string(),
            authority: authority.to_string(),
            path: path.to_string(),
            headers: fields,
            body,
            block: Bytes::from(block),
            indexed: None,
            key: 0,
        })
    }

    /// The same request, also encoded for a connection's dynamic table
    /// (the run's own request, sent again and again: see `hpack/encoder.rs`).
    /// A request whose fields would not fit in the default table (4,096
    /// bytes) keeps the plain block only.
    pub fn with_indexing(mut self) -> Http2Request {
        self.indexed = hpack::encode_indexed(
            &self.method,
            &self.scheme,
            &self.authority,
            &self.path,
            &self.headers,
            hpack::HPACK_DEFAULT_TABLE as usize,
        )
        .map(Arc::new);
        self.key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        self
    }

    /// HEAD: the response has no body.
    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }
}
