//! An HTTP/3 request built once: its HEADERS frame (QPACK field section,
//! static table only) and its DATA frame header are encoded here, so a
//! submit hands the same shared bytes to the stream. The fields come from the
//! request's HTTP/2 form ([`Http2Request`]): HTTP/3 carries exactly the same
//! fields (RFC 9114 §4.2 forbids the same connection-specific ones), so the
//! checks are not written twice.

use super::frame::{self, put_header};
use super::qpack;
use crate::http2::Http2Request;
use bytes::Bytes;

/// A request in HTTP/3 form.
#[derive(Debug, Clone)]
pub struct Http3Request {
    /// The HEADERS frame (type, length, field section).
    pub headers: Bytes,
    /// The DATA frame header for `body` (empty when there is no body).
    pub data_head: Bytes,
    /// The body.
    pub body: Bytes,
    /// HEAD: the answer has no body.
    pub head: bool,
    /// May go in 0-RTT early data: a safe method (GET, HEAD, OPTIONS)
    /// without a body. Early data can be replayed by an attacker or a
    /// retrying server (RFC 9001 §9.2, RFC 8470), so anything else waits
    /// for the handshake.
    pub early: bool,
}

impl Http3Request {
    /// The HTTP/3 form of a request already checked for HTTP/2.
    pub fn from_h2(r: &Http2Request) -> Http3Request {
        let pseudo = [&*r.method, &*r.scheme, &*r.authority, &*r.path];
        let section = qpack::encode_request(pseudo, &r.headers);
        let mut headers = Vec::with_capacity(section.len() + 9);
        put_header(&mut headers, frame::HEADERS, section.len() as u64);
        headers.extend_from_slice(&section);
        let mut data_head = Vec::new();
        if !r.body.is_empty() {
            put_header(&mut data_head, frame::DATA, r.body.len() as u64);
        }
        Http3Request {
            headers: Bytes::from(headers),
            data_head: Bytes::from(data_head),
            body: r.body.clone(),
            head: r.is_head(),
            early: matches!(&*r.method, "GET" | "HEAD" | "OPTIONS") && r.body.is_empty(),
        }
    }
}
