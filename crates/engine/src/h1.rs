//! An incremental HTTP/1.x response reader that counts bodies instead of storing them.
//!
//! The head is parsed in place (by `crate::head`) straight from the worker's read
//! buffer; only a head split across reads is copied (into a small per-connection
//! buffer, bounded by [`MAX_HEAD`]). Bodies are framed by Content-Length, chunked
//! encoding or connection close, and only counted. 1xx responses are skipped.

use crate::head::{self, HeadError};
use redline_stats::MalformedKind;

/// The largest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// The most headers accepted in one response head.
pub const MAX_HEADERS: usize = 100;
/// The longest chunk-size line (with extensions) accepted.
const MAX_CHUNK_LINE: u32 = 16 * 1024;
/// The most trailer bytes accepted after the last chunk.
const MAX_TRAILERS: u32 = 64 * 1024;

/// The most body bytes a [`Capture`] keeps.
pub const MAX_CAPTURE: usize = 1 << 20;

/// Headers and body of a response, kept for scenario checks and extraction.
/// Plain runs have none, so their hot path only tests an `Option`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// Keep the final response's headers.
    pub want_headers: bool,
    /// Keep its body (up to `max` bytes).
    pub want_body: bool,
    /// The most body bytes kept ([`MAX_CAPTURE`] unless the request's
    /// `Want::capture_max` says otherwise).
    pub max: usize,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body (decoded from chunked framing, not from content codings).
    pub body: Vec<u8>,
    /// The body was longer than what was kept.
    pub truncated: bool,
}

impl Default for Capture {
    fn default() -> Capture {
        Capture {
            want_headers: false,
            want_body: false,
            max: MAX_CAPTURE,
            headers: Vec::new(),
            body: Vec::new(),
            truncated: false,
        }
    }
}

impl Capture {
    /// Keeps body bytes (when the body is wanted), up to `max`.
    pub fn keep_body(&mut self, data: &[u8]) {
        self.body(data)
    }

    fn body(&mut self, data: &[u8]) {
        if !self.want_body {
            return;
        }
        let room = self.max.saturating_sub(self.body.len());
        if data.len() > room {
            self.truncated = true;
        }
        self.body.extend_from_slice(&data[..data.len().min(room)]);
    }

    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A response that broke HTTP/1.x.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed {
    /// The kind of breakage.
    pub kind: MalformedKind,
    /// A short message.
    pub message: &'static str,
}

fn bad(kind: MalformedKind, message: &'static str) -> Malformed {
    Malformed { kind, message }
}

/// What a [`ResponseReader::feed`] call found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// All bytes were used; the response is not complete yet.
    NeedMore,
    /// The response is complete after `used` bytes of this input.
    Done {
        /// Bytes of the input that belonged to the response.
        used: usize,
    },
}

/// What a response head says about the response that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeadFacts {
    code: u16,
    keep_alive: bool,
    length: Option<u64>,
    chunked: bool,
    other_te: bool,
}

/// The last plain head a worker parsed, byte for byte, with what it said.
///
/// A server answering the same URL sends the same head again and again (nginx's
/// changes once a second, with its `Date`). Parsing is a function of the head's
/// bytes alone, and a head ends at its blank line, so a response that *starts
/// with* exactly these bytes has this head: one comparison replaces the scan
/// (which was more than half of the client's user-space work per request).
/// Used only when nothing is captured from the head (no `Server`, `Location`
/// or scenario headers wanted), and only for final (non-1xx) heads.
#[derive(Debug, Default)]
pub struct HeadMemo {
    bytes: Vec<u8>,
    facts: Option<HeadFacts>,
}

impl HeadMemo {
    /// Longest head kept (a longer one is parsed every time).
    const MAX: usize = 1024;

    /// An empty memo.
    pub fn new() -> HeadMemo {
        HeadMemo::default()
    }

    fn lookup(&self, data: &[u8]) -> Option<(HeadFacts, usize)> {
        let f = self.facts?;
        let n = self.bytes.len();
        (data.len() >= n && data[..n] == self.bytes[..]).then_some((f, n))
    }

    fn store(&mut self, head: &[u8], facts: HeadFacts) {
        if head.len() <= Self::MAX {
            self.bytes.clear();
            self.bytes.extend_from_slice(head);
            self.facts = Some(facts);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading hex digits of the chunk size.
    Size { size: u64, digits: u32 },
    /// Skipping a chunk extension up to the line end.
    Ext { size: u64, len: u32 },
    /// Saw CR after the size line, expecting LF.
    SizeLf { size: u64 },
    /// Inside chunk data.
    Data { left: u64 },
    /// Expecting CR after chunk data.
    DataCr,
    /// Expecting LF after chunk data.
    DataLf,
    /// Reading trailer lines after the last chunk; `line` bytes in the current line.
    Trailer { line: u32, total: u32, cr: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Body(Body),
}

/// Reads one response at a time from a connection.
#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    head: Vec<u8>,
    /// Status of the response being read (valid once the head is parsed).
    pub status: u16,
    /// Body bytes seen so far (decoded, i.e. without chunk framing).
    pub body_bytes: u64,
    /// Whether the connection may carry another request after this response.
    pub keep_alive: bool,
    /// The response head has been parsed.
    pub head_done: bool,
    /// The `Server` header (with `want_server`) and the `Location` of the
    /// last 3xx response (with `want_location`), boxed: rarely wanted, and
    /// a reader sits in each of 10,000 connection slots.
    kept: Option<Box<Kept>>,
    /// Capture the `Server` header of the next head.
    pub want_server: bool,
    /// Informational (1xx) responses skipped before the final one.
    pub informational: u32,
    /// Scenario runs: what of the response to keep.
    pub capture: Option<Box<Capture>>,
    /// `--follow-redirects`: keep the `Location` of a 3xx response.
    pub want_location: bool,
}

/// What a [`ResponseReader`] keeps of a head besides its facts.
#[derive(Debug, Default)]
struct Kept {
    server: Option<String>,
    alt_svc: Option<String>,
    location: Option<String>,
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader::new()
    }
}

impl ResponseReader {
    /// A reader waiting for a response head.
    pub fn new() -> ResponseReader {
        ResponseReader {
            state: State::Head,
            head: Vec::new(),
            status: 0,
            body_bytes: 0,
            keep_alive: true,
            head_done: false,
            kept: None,
            want_server: false,
            informational: 0,
            capture: None,
            want_location: false,
        }
    }

    /// Prepares for the next response.
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.head.clear();
        if self.head.capacity() > 4096 {
            self.head = Vec::new();
        }
        self.status = 0;
        self.body_bytes = 0;
        self.keep_alive = true;
        self.head_done = false;
        self.informational = 0;
        if let Some(k) = self.kept.as_deref_mut() {
            k.location = None;
        }
        if let Some(c) = self.capture.as_deref_mut() {
            c.headers.clear();
            c.body.clear();
            c.truncated = false;
        }
    }

    /// The `Server` header kept (with `want_server`), taken out.
    pub fn take_server(&mut self) -> Option<String> {
        self.kept.as_deref_mut().and_then(|k| k.server.take())
    }

    /// The `Alt-Svc` header kept (with `want_server`), taken out.
    pub fn take_alt_svc(&mut self) -> Option<String> {
        self.kept.as_deref_mut().and_then(|k| k.alt_svc.take())
    }

    /// The `Location` of the last 3xx response (with `want_location`), taken out.
    pub fn take_location(&mut self) -> Option<String> {
        self.kept.as_deref_mut().and_then(|k| k.location.take())
    }

    /// True when the body runs until the server closes the connection.
    pub fn until_close(&self) -> bool {
        matches!(self.state, State::Body(Body::UntilClose))
    }

    /// True once any byte of the response has been seen.
    pub fn started(&self) -> bool {
        self.head_done || !self.head.is_empty() || self.informational > 0
    }

    /// Feeds bytes read from the connection. `head_request` marks a HEAD request
    /// (its response has no body whatever its headers say).
    pub fn feed(&mut self, data: &[u8], head_request: bool) -> Result<Progress, Malformed> {
        self.feed_memo(data, head_request, None)
    }

    /// [`feed`](Self::feed) with the worker's [`HeadMemo`]: a head identical to
    /// the last one parsed is taken from the memo instead of scanned again.
    pub fn feed_memo(
        &mut self,
        mut data: &[u8],
        head_request: bool,
        mut memo: Option<&mut HeadMemo>,
    ) -> Result<Progress, Malformed> {
        let total = data.len();
        loop {
            match self.state {
                State::Head => {
                    let hit = match memo.as_deref() {
                        Some(m) if self.head.is_empty() && self.plain() => m.lookup(data),
                        _ => None,
                    };
                    let used = if let Some((facts, n)) = hit {
                        self.apply(facts, head_request);
                        n
                    } else if self.head.is_empty() {
                        match self.parse_head(data, head_request, memo.as_deref_mut())? {
                            Some(n) => n,
                            None => {
                                if data.len() > MAX_HEAD {
                                    return Err(bad(
                                        MalformedKind::HeadTooLarge,
                                        "response head larger than 64 KiB",
                                    ));
                                }
                                self.head.extend_from_slice(data);
                                return Ok(Progress::NeedMore);
                            }
                        }
                    } else {
                        let before = self.head.len();
                        let room = MAX_HEAD + 1 - before.min(MAX_HEAD + 1);
                        let take = data.len().min(room);
                        self.head.extend_from_slice(&data[..take]);
                        // Parse again only when a blank line may have arrived, so a
                        // head dripped byte by byte costs linear, not quadratic, work.
                        let tail = &self.head[before.saturating_sub(3)..];
                        if !has_blank_line(tail) {
                            if self.head.len() > MAX_HEAD {
                                return Err(bad(
                                    MalformedKind::HeadTooLarge,
                                    "response head larger than 64 KiB",
                                ));
                            }
                            return Ok(Progress::NeedMore);
                        }
                        let buf = std::mem::take(&mut self.head);
                        let r = self.parse_head(&buf, head_request, None);
                        self.head = buf;
                        match r? {
                            Some(n) => {
                                self.head.clear();
                                n - before
                            }
                            None => {
                                if self.head.len() > MAX_HEAD {
                                    return Err(bad(
                                        MalformedKind::HeadTooLarge,
                                        "response head larger than 64 KiB",
                                    ));
                                }
                                return Ok(Progress::NeedMore);
                            }
                        }
                    };
                    data = &data[used..];
                    if self.state == State::Head {
                        // A 1xx response was skipped: read the next head.
                        continue;
                    }
                    if let State::Body(Body::Length(0)) = self.state {
                        return Ok(Progress::Done {
                            used: total - data.len(),
                        });
                    }
                }
                State::Body(Body::Length(left)) => {
                    let n = (data.len() as u64).min(left);
                    self.body_bytes += n;
                    if let Some(c) = self.capture.as_deref_mut() {
                        c.body(&data[..n as usize]);
                    }
                    let left = left - n;
                    data = &data[n as usize..];
                    if left == 0 {
                        self.state = State::Body(Body::Length(0));
                        return Ok(Progress::Done {
                            used: total - data.len(),
                        });
                    }
                    self.state = State::Body(Body::Length(left));
                    return Ok(Progress::NeedMore);
                }
                State::Body(Body::UntilClose) => {
                    self.body_bytes += data.len() as u64;
                    if let Some(c) = self.capture.as_deref_mut() {
                        c.body(data);
                    }
                    return Ok(Progress::NeedMore);
                }
                State::Body(Body::Chunked(c)) => {
                    let (c, used, done) = self.chunked(c, data)?;
                    data = &data[used..];
                    self.state = State::Body(Body::Chunked(c));
                    if done {
                        return Ok(Progress::Done {
                            used: total - data.len(),
                        });
                    }
                    return Ok(Progress::NeedMore);
                }
            }
            if data.is_empty() {
                return Ok(Progress::NeedMore);
            }
        }
    }

    /// True once bytes of the final (non-1xx) response have been seen.
    pub fn final_started(&self) -> bool {
        self.head_done || !self.head.is_empty()
    }

    /// Ends the response at connection close: complete only for close-delimited bodies.
    pub fn eof(&mut self) -> bool {
        self.until_close()
    }

    /// True when nothing is to be taken from the next head beyond its facts,
    /// so a [`HeadMemo`] may stand in for parsing it.
    fn plain(&self) -> bool {
        !self.want_server && !self.want_location && self.capture.is_none()
    }

    /// Parses a complete head from `buf`; `Ok(None)` when more bytes are needed.
    /// A final head parsed while [`plain`](Self::plain) is kept in `memo`.
    fn parse_head(
        &mut self,
        buf: &[u8],
        head_request: bool,
        memo: Option<&mut HeadMemo>,
    ) -> Result<Option<usize>, Malformed> {
        let plain = self.plain();
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut other_te = false;
        // Connection tokens: close, keep-alive (HTTP/1.0 needs the latter).
        let mut conn_close = false;
        let mut conn_keep = false;
        let mut location = None;
        let mut server = None;
        let mut alt_svc = None;
        let want_server = self.want_server;
        let want_location = self.want_location;
        let mut captured = Vec::new();
        let want_headers = self.capture.as_ref().is_some_and(|c| c.want_headers);
        let mut on_header = |name: &[u8], value: &[u8]| -> Result<(), Malformed> {
            if want_headers {
                captured.push((
                    String::from_utf8_lossy(name).into_owned(),
                    String::from_utf8_lossy(value).into_owned(),
                ));
            }
            // Dispatch on length first: most headers match none of the five
            // names and are skipped without a byte comparison.
            match name.len() {
                14 if head::name_is(name, b"content-length") => {
                    let v = parse_len(value)
                        .ok_or(bad(MalformedKind::ContentLength, "invalid Content-Length"))?;
                    if length.is_some_and(|prev| prev != v) {
                        return Err(bad(
                            MalformedKind::ContentLength,
                            "conflicting Content-Length headers",
                        ));
                    }
                    length = Some(v);
                }
                17 if head::name_is(name, b"transfer-encoding") => {
                    // The final encoding decides the framing (RFC 9112 §6.3).
                    let last = value.rsplit(|b| *b == b',').next().map(trim).unwrap_or(b"");
                    if last.eq_ignore_ascii_case(b"chunked") {
                        chunked = true;
                        other_te = false;
                    } else if !trim(value).is_empty() {
                        chunked = false;
                        other_te = true;
                    }
                }
                10 if head::name_is(name, b"connection") => {
                    // `name_is` is exact for values too: they hold no CR.
                    if head::name_is(value, b"keep-alive") {
                        conn_keep = true;
                        return Ok(());
                    }
                    for tok in value.split(|b| *b == b',') {
                        let tok = trim(tok);
                        if tok.eq_ignore_ascii_case(b"close") {
                            conn_close = true;
                        } else if tok.eq_ignore_ascii_case(b"keep-alive") {
                            conn_keep = true;
                        }
                    }
                }
                8 if want_location && head::name_is(name, b"location") => {
                    location = Some(String::from_utf8_lossy(value).trim().to_string());
                }
                6 if want_server && server.is_none() && head::name_is(name, b"server") => {
                    server = Some(String::from_utf8_lossy(value).into_owned());
                }
                7 if want_server && head::name_is(name, b"alt-svc") => {
                    crate::head::join_kept(&mut alt_svc, &String::from_utf8_lossy(value));
                }
                _ => {}
            }
            Ok(())
        };
        // Most headers are of none of the five lengths: they cost no call.
        let parsed = head::parse(buf, MAX_HEADERS, |name, value| {
            if want_headers || matches!(name.len(), 6 | 8 | 10 | 14 | 17) || want_server {
                on_header(name, value)
            } else {
                Ok(())
            }
        });
        let line = match parsed {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(None),
            Err(head::Stop::Callback(m)) => return Err(m),
            Err(head::Stop::Head(e)) => {
                return Err(match e {
                    HeadError::TooManyHeaders => bad(
                        MalformedKind::HeadTooLarge,
                        "more than 100 response headers",
                    ),
                    HeadError::Version => bad(MalformedKind::StatusLine, "invalid HTTP version"),
                    HeadError::Status => bad(MalformedKind::StatusLine, "invalid status code"),
                    HeadError::HeaderName | HeadError::HeaderValue | HeadError::NewLine => {
                        bad(MalformedKind::Header, "invalid header line")
                    }
                })
            }
        };
        let (code, n) = (line.code, line.len);
        if !(100..=999).contains(&code) {
            return Err(bad(MalformedKind::StatusLine, "invalid status code"));
        }
        let http10 = line.minor == 0;
        let keep_alive = !conn_close && (!http10 || conn_keep);
        if want_location && (300..400).contains(&code) && location.is_some() {
            self.kept.get_or_insert_with(Box::default).location = location;
        }
        if alt_svc.is_some() {
            self.kept.get_or_insert_with(Box::default).alt_svc = alt_svc;
        }
        if server.is_some() {
            self.kept.get_or_insert_with(Box::default).server = server;
            self.want_server = false;
        }
        if (100..200).contains(&code) && code != 101 {
            // Informational: skip it, the final response follows.
            self.informational += 1;
            self.state = State::Head;
            return Ok(Some(n));
        }
        if let Some(c) = self.capture.as_deref_mut() {
            if c.want_headers {
                c.headers = captured;
            }
        }
        let facts = HeadFacts {
            code,
            keep_alive,
            length,
            chunked,
            other_te,
        };
        if let Some(m) = memo.filter(|_| plain) {
            m.store(&buf[..n], facts);
        }
        self.apply(facts, head_request);
        Ok(Some(n))
    }

    /// Takes a final head's facts: status, reuse, and how the body is framed.
    fn apply(&mut self, f: HeadFacts, head_request: bool) {
        self.status = f.code;
        self.head_done = true;
        self.keep_alive = f.keep_alive;
        let code = f.code;
        let no_body = head_request || code == 204 || code == 304 || code == 101;
        self.state = if no_body {
            State::Body(Body::Length(0))
        } else if f.chunked {
            State::Body(Body::Chunked(Chunk::Size { size: 0, digits: 0 }))
        } else if f.other_te {
            self.keep_alive = false;
            State::Body(Body::UntilClose)
        } else if let Some(len) = f.length {
            State::Body(Body::Length(len))
        } else {
            self.keep_alive = false;
            State::Body(Body::UntilClose)
        };
    }

    /// Advances the chunked decoder; returns the new state, bytes used and whether the body ended.
    fn chunked(&mut self, mut c: Chunk, data: &[u8]) -> Result<(Chunk, usize, bool), Malformed> {
        let mut i = 0;
        while i < data.len() {
            if let Chunk::Data { left } = c {
                let n = ((data.len() - i) as u64).min(left);
                self.body_bytes += n;
                if let Some(cap) = self.capture.as_deref_mut() {
                    cap.body(&data[i..i + n as usize]);
                }
                i += n as usize;
                c = if left == n {
                    Chunk::DataCr
                } else {
                    Chunk::Data { left: left - n }
                };
                continue;
            }
            let b = data[i];
            i += 1;
            c = match c {
                Chunk::Size { size, digits } => match hex(b) {
                    Some(d) => {
                        if digits >= 15 {
                            return Err(bad(MalformedKind::Chunked, "chunk size too large"));
                        }
                        Chunk::Size {
                            size: size * 16 + d as u64,
                            digits: digits + 1,
                        }
                    }
                    None if digits == 0 => {
                        return Err(bad(MalformedKind::Chunked, "invalid chunk size"))
                    }
                    None => match b {
                        b'\r' => Chunk::SizeLf { size },
                        b'\n' => self.after_size(size),
                        b';' | b' ' | b'\t' => Chunk::Ext { size, len: 0 },
                        _ => return Err(bad(MalformedKind::Chunked, "invalid chunk size")),
                    },
                },
                Chunk::Ext { size, len } => match b {
                    b'\r' => Chunk::SizeLf { size },
                    b'\n' => self.after_size(size),
                    _ if len >= MAX_CHUNK_LINE => {
                        return Err(bad(MalformedKind::Chunked, "chunk extension too long"))
                    }
                    _ => Chunk::Ext { size, len: len + 1 },
                },
                Chunk::SizeLf { size } => {
                    if b != b'\n' {
                        return Err(bad(MalformedKind::Chunked, "missing LF after chunk size"));
                    }
                    self.after_size(size)
                }
                Chunk::DataCr => match b {
                    b'\r' => Chunk::DataLf,
                    b'\n' => Chunk::Size { size: 0, digits: 0 },
                    _ => return Err(bad(MalformedKind::Chunked, "missing CRLF after chunk data")),
                },
                Chunk::DataLf => {
                    if b != b'\n' {
                        return Err(bad(MalformedKind::Chunked, "missing CRLF after chunk data"));
                    }
                    Chunk::Size { size: 0, digits: 0 }
                }
                Chunk::Trailer { line, total, cr } => {
                    if total >= MAX_TRAILERS {
                        return Err(bad(MalformedKind::Chunked, "trailers too large"));
                    }
                    match b {
                        b'\n' if line == 0 => return Ok((c, i, true)),
                        b'\n' => Chunk::Trailer {
                            line: 0,
                            total: total + 1,
                            cr: false,
                        },
                        b'\r' if line == 0 && !cr => Chunk::Trailer {
                            line,
                            total: total + 1,
                            cr: true,
                        },
                        _ => Chunk::Trailer {
                            line: line + 1,
                            total: total + 1,
                            cr: false,
                        },
                    }
                }
                Chunk::Data { .. } => unreachable!("handled above"),
            };
        }
        Ok((c, i, false))
    }

    fn after_size(&self, size: u64) -> Chunk {
        if size == 0 {
            Chunk::Trailer {
                line: 0,
                total: 0,
                cr: false,
            }
        } else {
            Chunk::Data { left: size }
        }
    }
}

fn has_blank_line(v: &[u8]) -> bool {
    v.windows(2).any(|w| w == b"\n\n") || v.windows(3).any(|w| w == b"\n\r\n")
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn trim(v: &[u8]) -> &[u8] {
    v.trim_ascii()
}

fn parse_len(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for b in v {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (b - b'0') as u64;
    }
    Some(n)
}

#[cfg(test)]
mod tests;
