//! TLS and socket errors of HTTP/2 connections as an [`ErrorKind`] and a
//! short message (the same words as the HTTP/1 worker's for the same socket
//! errors); HTTP/2's own errors come classified in the session's events
//! (`crate::http2`).

use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::io;

pub(super) type Fail = (ErrorKind, Cow<'static, str>);

pub(super) fn tls_error(e: &io::Error) -> Fail {
    match e.kind() {
        io::ErrorKind::InvalidData => (ErrorKind::Tls, Cow::Owned(e.to_string())),
        io::ErrorKind::UnexpectedEof => (
            ErrorKind::Tls,
            "connection closed during the TLS handshake".into(),
        ),
        _ => (ErrorKind::from_io(e, true), io_message(e)),
    }
}

/// The same words as the HTTP/1 engine for the same socket errors.
pub(super) fn io_message(e: &io::Error) -> Cow<'static, str> {
    crate::sys::io_msg(e)
}
