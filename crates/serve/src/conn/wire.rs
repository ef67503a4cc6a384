//! The bytes of HTTP/1.1 on this server's connections: parsing a request
//! head and chunk sizes, writing status lines, lengths and headers.

use super::*;

/// How the request body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    None,
    Length(u64),
    Chunked,
}

/// What we keep of a parsed request head (owned, so the read buffer can be
/// reused while the request is served).
#[derive(Debug)]
pub(super) struct Request {
    pub(super) head_len: usize,
    pub(super) is_head: bool,
    pub(super) http10: bool,
    pub(super) keep_alive: bool,
    pub(super) body: Body,
    pub(super) expect_continue: bool,
    pub(super) target: Target,
    /// The session number of a `sid=S<k>` cookie (the built-in login app).
    pub(super) sid: Option<u64>,
}

pub(super) enum Parsed {
    Complete(Request),
    Partial,
    /// Malformed: answer with this status and close.
    Error(u16),
}

pub(super) fn trim(v: &[u8]) -> &[u8] {
    v.trim_ascii()
}

pub(super) fn parse_decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

pub(super) fn parse_head(buf: &[u8], extra: &mut Vec<u8>) -> Parsed {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let head_len = match req.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => return Parsed::Error(431),
        Err(_) => return Parsed::Error(400),
    };
    let http10 = req.version == Some(0);
    let mut conn_close = false;
    let mut conn_keep_alive = false;
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut chunked = false;
    let mut expect_continue = false;
    let mut sid = None;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let Some(n) = parse_decimal(trim(h.value)) else {
                return Parsed::Error(400);
            };
            if content_length.is_some_and(|m| m != n) {
                return Parsed::Error(400);
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = true;
            // Only the last coding matters: the body is chunked iff it is
            // `chunked`.
            if let Some(last) = h
                .value
                .split(|&b| b == b',')
                .map(trim)
                .rev()
                .find(|t| !t.is_empty())
            {
                chunked = last.eq_ignore_ascii_case(b"chunked");
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in h.value.split(|&b| b == b',').map(trim) {
                if token.eq_ignore_ascii_case(b"close") {
                    conn_close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    conn_keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            expect_continue = trim(h.value).eq_ignore_ascii_case(b"100-continue");
        } else if name.eq_ignore_ascii_case(b"cookie") {
            for c in h.value.split(|&b| b == b';').map(trim) {
                if let Some(v) = c.strip_prefix(b"sid=S") {
                    sid = parse_decimal(v);
                }
            }
        }
    }
    let body = if transfer_encoding {
        // A request whose length cannot be determined, or that is framed
        // two ways (request smuggling material), is rejected.
        if !chunked || content_length.is_some() {
            return Parsed::Error(400);
        }
        Body::Chunked
    } else {
        match content_length {
            None | Some(0) => Body::None,
            Some(n) => Body::Length(n),
        }
    };
    let keep_alive = !conn_close && (!http10 || conn_keep_alive);
    let target = parse_target(req.path.unwrap_or("/"), extra);
    Parsed::Complete(Request {
        head_len,
        is_head: req.method == Some("HEAD"),
        http10,
        keep_alive,
        body,
        expect_continue,
        target,
        sid,
    })
}

pub(super) fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut b = [0u8; 20];
    let mut i = b.len();
    loop {
        i -= 1;
        b[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&b[i..]);
}

pub(super) fn push_hex(out: &mut Vec<u8>, mut n: u64) {
    let mut b = [0u8; 16];
    let mut i = b.len();
    loop {
        i -= 1;
        b[i] = b"0123456789abcdef"[(n & 15) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&b[i..]);
}

pub(super) fn hex_len(mut n: u64) -> u64 {
    let mut l = 1;
    while n >= 16 {
        n >>= 4;
        l += 1;
    }
    l
}

/// Bytes on the wire of a chunked body of `size` payload bytes.
pub(super) fn chunked_wire_len(size: u64) -> u64 {
    let chunk = CHUNK as u64;
    let (full, rem) = (size / chunk, size % chunk);
    let mut n = full * (hex_len(chunk) + 2 + chunk + 2) + 5;
    if rem > 0 {
        n += hex_len(rem) + 2 + rem + 2;
    }
    n
}

pub(super) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

pub(super) fn push_status_line(out: &mut Vec<u8>, status: u16) {
    if status == 200 {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        out.extend_from_slice(b"HTTP/1.1 ");
        push_u64(out, u64::from(status));
        out.push(b' ');
        out.extend_from_slice(reason(status).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

pub(super) fn push_connection(out: &mut Vec<u8>, keep_alive: bool, http10: bool) {
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
}

/// Writes `a` then `b`, with vectored writes.
pub(super) async fn write_all2(
    stream: &mut TcpStream,
    mut a: &[u8],
    mut b: &[u8],
) -> io::Result<()> {
    while !a.is_empty() {
        let n = stream
            .write_vectored(&[IoSlice::new(a), IoSlice::new(b)])
            .await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        if n < a.len() {
            a = &a[n..];
        } else {
            b = &b[n - a.len()..];
            a = &[];
        }
    }
    stream.write_all(b).await
}

/// The parsing state of a chunked request body.
pub(super) enum ChunkState {
    Size,
    Data(u64),
    DataEnd,
    Trailer(usize),
}

/// Parses a chunk-size line (without its line ending): hex digits, then
/// optional whitespace and `;extensions`.
pub(super) fn parse_chunk_size(line: &[u8]) -> Option<u64> {
    let digits = match line.iter().position(|&b| b == b';') {
        Some(i) => &line[..i],
        None => line,
    };
    let digits = trim(digits);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    let mut n = 0u64;
    for &d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        n = n << 4 | u64::from(v);
    }
    Some(n)
}

pub(super) fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}
