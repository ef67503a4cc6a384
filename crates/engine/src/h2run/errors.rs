//! HTTP/2, TLS and socket errors as an [`ErrorKind`] and a short message
//! (the same words as the HTTP/1 worker's for the same socket errors).

use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::io;

pub(super) type Fail = (ErrorKind, Cow<'static, str>);

/// Classifies an HTTP/2 error into an error kind and a short message.
pub(crate) fn classify(e: &h2::Error) -> Fail {
    let reason = e.reason().map(|r| format!("{r:?}"));
    let reason = reason.as_deref().unwrap_or("no reason");
    if e.is_go_away() {
        if e.is_remote() {
            return (
                ErrorKind::GoAway,
                Cow::Owned(format!("server sent GOAWAY ({reason})")),
            );
        }
        let text = e.to_string();
        if text.contains("header_list_way_too_large") || text.contains("too_many_continuations") {
            return head_too_large();
        }
        return (
            ErrorKind::Other,
            Cow::Owned(format!("HTTP/2 protocol error: {text}")),
        );
    }
    if e.is_reset() {
        if e.is_remote() {
            return (
                ErrorKind::StreamReset,
                Cow::Owned(format!("stream reset by the server ({reason})")),
            );
        }
        // h2 resets a stream itself when the response breaks the protocol; it
        // does not say which rule, so the message names the usual suspects.
        return (
            ErrorKind::Malformed(redline_stats::MalformedKind::Header),
            Cow::Owned(format!(
                "the response broke HTTP/2 ({reason}): a malformed or over-256 KiB header \
                 block, or a body that disagrees with content-length"
            )),
        );
    }
    if let Some(io) = e.get_io() {
        return match io.kind() {
            io::ErrorKind::BrokenPipe | io::ErrorKind::UnexpectedEof => (
                ErrorKind::Closed,
                "connection closed before the response was complete".into(),
            ),
            _ => (ErrorKind::from_io(io, false), io_message(io)),
        };
    }
    (ErrorKind::Other, Cow::Owned(format!("HTTP/2: {e}")))
}

/// The limit on a response's header block (h2's `max_header_list_size`).
pub(crate) const MAX_HEADER_LIST: u32 = 256 * 1024;

pub(super) fn head_too_large() -> Fail {
    (
        ErrorKind::Malformed(redline_stats::MalformedKind::HeadTooLarge),
        "response header block over 256 KiB".into(),
    )
}

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
    crate::worker::io_msg(e)
}
