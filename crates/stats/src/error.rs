//! Error kinds: every failed request is counted under exactly one kind, never by
//! free-form string keys, with a short message that groups like pounder.pl's
//! `File Not Found (100)`.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// What was wrong with a response the client could not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MalformedKind {
    /// The status line could not be parsed (bad version, bad code, garbage).
    StatusLine,
    /// A header line could not be parsed.
    Header,
    /// The response head exceeded the size or header-count limit.
    HeadTooLarge,
    /// Content-Length missing where required, unparsable, or given twice differently.
    ContentLength,
    /// The chunked encoding was broken (bad size, missing CRLF, oversized extension).
    Chunked,
    /// Bytes arrived that belong to no request (data after a complete response).
    UnexpectedData,
}

impl MalformedKind {
    /// A stable snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            MalformedKind::StatusLine => "status_line",
            MalformedKind::Header => "header",
            MalformedKind::HeadTooLarge => "head_too_large",
            MalformedKind::ContentLength => "content_length",
            MalformedKind::Chunked => "chunked",
            MalformedKind::UnexpectedData => "unexpected_data",
        }
    }
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "sub")]
pub enum ErrorKind {
    /// The server refused the connection (nothing listening, backlog full).
    Refused,
    /// The TCP connection was not established within `--connect-timeout`.
    ConnectTimeout,
    /// The peer reset the connection.
    Reset,
    /// No complete response within `--timeout`.
    Timeout,
    /// The server closed the connection before the response was complete.
    Closed,
    /// The response violated HTTP/1.x (or, for a few checks, HTTP/2).
    Malformed(MalformedKind),
    /// The client ran out of file descriptors (EMFILE/ENFILE): a client limit.
    TooManyOpenFiles,
    /// The client ran out of local addresses or ports (EADDRNOTAVAIL): a client limit.
    NoLocalAddress,
    /// The host name could not be resolved.
    Resolve,
    /// The TLS handshake or a TLS record failed (e.g. an untrusted certificate).
    Tls,
    /// HTTP/2: the server reset the request's stream (RST_STREAM; the message
    /// names the reason code, e.g. REFUSED_STREAM).
    StreamReset,
    /// HTTP/2: the server sent GOAWAY and the request's stream was not (or not
    /// completely) served; the connection is replaced.
    #[serde(rename = "goaway")]
    GoAway,
    /// HTTP/2 and HTTP/3: the server opened no stream for the request within
    /// `--timeout` (its `SETTINGS_MAX_CONCURRENT_STREAMS`, or QUIC's stream
    /// limit, left none free).
    NoStream,
    /// `--follow-redirects`: more redirects in a row than `--max-redirs`.
    TooManyRedirects,
    /// `--follow-redirects`: a redirect's `Location` is not a usable http(s)
    /// URL, or its host does not resolve.
    BadRedirect,
    /// QUIC: nothing came from the server within the idle time-out its
    /// transport parameters and ours agreed on (RFC 9000 §10.1).
    IdleTimeout,
    /// QUIC: the server answered with a stateless reset (RFC 9000 §10.3):
    /// it no longer knows the connection (restarted, or state lost).
    StatelessReset,
    /// QUIC: the server speaks none of the client's QUIC versions (Version
    /// Negotiation, RFC 9000 §6).
    VersionNegotiation,
    /// Anything else (the message says what).
    Other,
}

impl ErrorKind {
    /// A stable snake_case name, used in JSON and in the text report.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Closed => "closed",
            ErrorKind::Malformed(_) => "malformed",
            ErrorKind::TooManyOpenFiles => "too_many_open_files",
            ErrorKind::NoLocalAddress => "no_local_address",
            ErrorKind::Resolve => "resolve",
            ErrorKind::Tls => "tls",
            ErrorKind::StreamReset => "stream_reset",
            ErrorKind::GoAway => "goaway",
            ErrorKind::NoStream => "no_stream",
            ErrorKind::TooManyRedirects => "too_many_redirects",
            ErrorKind::BadRedirect => "bad_redirect",
            ErrorKind::IdleTimeout => "idle_timeout",
            ErrorKind::StatelessReset => "stateless_reset",
            ErrorKind::VersionNegotiation => "version_negotiation",
            ErrorKind::Other => "other",
        }
    }

    /// True for kinds that mean the client, not the server, was the limit.
    pub fn is_client_limit(self) -> bool {
        matches!(
            self,
            ErrorKind::TooManyOpenFiles | ErrorKind::NoLocalAddress
        )
    }

    /// Classifies an I/O error from a socket operation.
    pub fn from_io(e: &std::io::Error, connecting: bool) -> ErrorKind {
        use std::io::ErrorKind as K;
        match e.raw_os_error() {
            Some(libc_emfile) if libc_emfile == 24 || libc_emfile == 23 => {
                return ErrorKind::TooManyOpenFiles
            }
            Some(99) => return ErrorKind::NoLocalAddress, // EADDRNOTAVAIL
            _ => {}
        }
        match e.kind() {
            K::ConnectionRefused => ErrorKind::Refused,
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => ErrorKind::Reset,
            K::TimedOut if connecting => ErrorKind::ConnectTimeout,
            K::TimedOut => ErrorKind::Timeout,
            K::UnexpectedEof => ErrorKind::Closed,
            K::AddrNotAvailable => ErrorKind::NoLocalAddress,
            _ => ErrorKind::Other,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Malformed(m) => write!(f, "malformed/{}", m.name()),
            k => f.write_str(k.name()),
        }
    }
}

/// One group of errors: a kind, a message and how often it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCount {
    /// The kind.
    #[serde(flatten)]
    pub kind: ErrorKind,
    /// A short human message (e.g. "connection refused").
    pub message: String,
    /// How many requests failed this way.
    pub count: u64,
}

/// Per-worker error counts. Errors are the cold path: a short vector scanned
/// linearly keeps the common case (no errors) free of any allocation.
#[derive(Debug, Clone, Default)]
pub struct ErrorTally {
    groups: Vec<(ErrorKind, Cow<'static, str>, u64)>,
}

impl ErrorTally {
    /// Counts one error.
    pub fn add(&mut self, kind: ErrorKind, message: Cow<'static, str>) {
        self.add_n(kind, message, 1);
    }

    /// Counts `n` errors of one kind and message.
    pub fn add_n(&mut self, kind: ErrorKind, message: Cow<'static, str>, n: u64) {
        if let Some(g) = self
            .groups
            .iter_mut()
            .find(|g| g.0 == kind && g.1 == message)
        {
            g.2 += n;
        } else if self.groups.len() < 256 {
            self.groups.push((kind, message, n));
        } else {
            // Bound memory against a server that invents a new message per request.
            self.add_n(kind, Cow::Borrowed("(other messages)"), n);
        }
    }

    /// Total errors counted.
    pub fn total(&self) -> u64 {
        self.groups.iter().map(|g| g.2).sum()
    }

    /// Each group's kind and count (for live counts by kind; no allocation).
    pub fn kinds(&self) -> impl Iterator<Item = (ErrorKind, u64)> + '_ {
        self.groups.iter().map(|g| (g.0, g.2))
    }

    /// The groups, most frequent first.
    pub fn into_counts(self) -> Vec<ErrorCount> {
        let mut v: Vec<ErrorCount> = self
            .groups
            .into_iter()
            .map(|(kind, message, count)| ErrorCount {
                kind,
                message: message.into_owned(),
                count,
            })
            .collect();
        sort_counts(&mut v);
        v
    }
}

/// Merges error groups from `b` into `a` (by kind and message), most frequent
/// first; counts saturate at `u64::MAX` (true when one did).
pub fn merge_counts(a: &mut Vec<ErrorCount>, b: &[ErrorCount]) -> bool {
    let mut saturated = false;
    for e in b {
        if let Some(x) = a
            .iter_mut()
            .find(|x| x.kind == e.kind && x.message == e.message)
        {
            saturated |= crate::record::sat_add(&mut x.count, e.count);
        } else {
            a.push(e.clone());
        }
    }
    sort_counts(a);
    saturated
}

fn sort_counts(v: &mut [ErrorCount]) {
    v.sort_by(|x, y| {
        y.count
            .cmp(&x.count)
            .then(x.kind.cmp(&y.kind))
            .then(x.message.cmp(&y.message))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_groups_by_kind_and_message() {
        let mut t = ErrorTally::default();
        t.add(ErrorKind::Refused, "connection refused".into());
        t.add(ErrorKind::Refused, "connection refused".into());
        t.add(
            ErrorKind::Malformed(MalformedKind::StatusLine),
            "bad".into(),
        );
        let c = t.into_counts();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].kind, ErrorKind::Refused);
        assert_eq!(c[0].count, 2);
    }

    #[test]
    fn serde_shape() {
        let e = ErrorCount {
            kind: ErrorKind::Malformed(MalformedKind::Chunked),
            message: "bad chunk size".into(),
            count: 3,
        };
        let j = serde_json::to_value(&e).unwrap();
        assert_eq!(j["kind"], "malformed");
        assert_eq!(j["sub"], "chunked");
        let back: ErrorCount = serde_json::from_value(j).unwrap();
        assert_eq!(back, e);
        let r = serde_json::to_value(ErrorCount {
            kind: ErrorKind::Refused,
            message: "x".into(),
            count: 1,
        })
        .unwrap();
        assert_eq!(r["kind"], "refused");
        for k in [ErrorKind::StreamReset, ErrorKind::GoAway] {
            let j = serde_json::to_value(ErrorCount {
                kind: k,
                message: "x".into(),
                count: 1,
            })
            .unwrap();
            assert_eq!(j["kind"], k.name());
            let back: ErrorCount = serde_json::from_value(j).unwrap();
            assert_eq!(back.kind, k);
        }
    }

    #[test]
    fn io_classification() {
        let e = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(ErrorKind::from_io(&e, true), ErrorKind::Refused);
        let e = std::io::Error::from_raw_os_error(24);
        assert_eq!(ErrorKind::from_io(&e, true), ErrorKind::TooManyOpenFiles);
        let e = std::io::Error::from_raw_os_error(99);
        assert_eq!(ErrorKind::from_io(&e, true), ErrorKind::NoLocalAddress);
    }
}
