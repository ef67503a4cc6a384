//! One request and its response on a keep-alive [`Conn`]: the request bytes,
//! reading the head and body within the budget, and the timed phases.

use super::*;

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Builds the request bytes of a GET for `dest`.
pub fn request_bytes(
    u: &Url,
    dest: Dest,
    extra: &[(String, String)],
    opts: &ClientOpts,
) -> Vec<u8> {
    let mut path = u.path().to_string();
    if let Some(q) = u.query() {
        path.push('?');
        path.push_str(q);
    }
    let host = match u.port() {
        Some(p) => format!("{}:{p}", u.host_str().unwrap_or("")),
        None => u.host_str().unwrap_or("").to_string(),
    };
    let mut r = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n");
    for (n, v) in request_headers(dest, extra, opts) {
        r.push_str(&n);
        r.push_str(": ");
        r.push_str(&v);
        r.push_str("\r\n");
    }
    r.push_str("\r\n");
    r.into_bytes()
}

impl Conn {
    pub(crate) fn new(stream: Stream, id: u64, info: ConnInfo) -> Conn {
        Conn {
            stream,
            buf: Vec::new(),
            pos: 0,
            id,
            served: 0,
            info,
            budget: None,
            read_timeout: Duration::from_secs(30),
        }
    }

    fn fill(&mut self) -> std::io::Result<usize> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        let mut tmp = [0u8; 64 * 1024];
        let n = self.stream.read(&mut tmp)?;
        if let Some(b) = &self.budget {
            if !b.charge(n as u64) {
                return Err(std::io::Error::other(BUDGET_STOP));
            }
        }
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    fn avail(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Sends one GET and reads the response. `Err` leaves the connection unusable.
    /// Returns the response and whether the connection may be reused.
    pub fn get(
        &mut self,
        u: &Url,
        dest: Dest,
        extra: &[(String, String)],
        opts: &ClientOpts,
    ) -> Result<(Response, bool), FetchError> {
        let req = request_bytes(u, dest, extra, opts);
        self.budget = opts.budget.clone();
        self.read_timeout = opts.timeout;
        let t = opts.timeout;
        let io = move |e: std::io::Error| io_error(e, t, "read");
        let sent = Instant::now();
        self.stream
            .write_all(&req)
            .map_err(|e| io_error(e, t, "write"))?;
        let deadline = sent + opts.timeout;
        let mut wire: u64 = 0;
        let mut first_byte: Option<Instant> = None;
        // Head (skipping 1xx).
        let (status, headers, version) = loop {
            let parsed = {
                let mut hs = [httparse::EMPTY_HEADER; 128];
                let mut resp = httparse::Response::new(&mut hs);
                match resp.parse(self.avail()) {
                    Ok(httparse::Status::Complete(n)) => {
                        let hv: Vec<(String, String)> = resp
                            .headers
                            .iter()
                            .map(|h| {
                                (
                                    h.name.to_string(),
                                    String::from_utf8_lossy(h.value).trim().to_string(),
                                )
                            })
                            .collect();
                        Some((n, resp.code.unwrap_or(0), hv, resp.version.unwrap_or(1)))
                    }
                    Ok(httparse::Status::Partial) => None,
                    Err(e) => return Err(FetchError::Malformed(e.to_string())),
                }
            };
            match parsed {
                Some((n, code, hv, ver)) => {
                    self.pos += n;
                    wire += n as u64;
                    if (100..200).contains(&code) && code != 101 {
                        continue;
                    }
                    break (code, hv, ver);
                }
                None => {
                    if self.avail().len() > MAX_HEAD {
                        return Err(FetchError::Malformed("response head over 64 KiB".into()));
                    }
                    if Instant::now() > deadline {
                        return Err(FetchError::Io("timed out".into()));
                    }
                    let n = self.fill().map_err(io)?;
                    if first_byte.is_none() && n > 0 {
                        first_byte = Some(Instant::now());
                    }
                    if n == 0 {
                        return Err(FetchError::Io(if self.avail().is_empty() {
                            "connection closed before the response".into()
                        } else {
                            "connection closed in the response head".into()
                        }));
                    }
                }
            }
        };
        let first_byte = first_byte.unwrap_or_else(Instant::now);
        let mut keep = version == 1
            && !header(&headers, "connection")
                .map(|v| v.to_ascii_lowercase().contains("close"))
                .unwrap_or(false);
        let chunked = header(&headers, "transfer-encoding")
            .map(|v| v.to_ascii_lowercase().contains("chunked"))
            .unwrap_or(false);
        let clen: Option<usize> =
            header(&headers, "content-length").and_then(|v| v.trim().parse().ok());
        let mut body = Vec::new();
        if status == 204 || status == 304 {
            // no body
        } else if chunked {
            wire += self.read_chunked(&mut body, deadline)?;
        } else if let Some(n) = clen {
            if n > MAX_WIRE_BODY {
                return Err(FetchError::TooLarge);
            }
            // Room for the body at once (no doubling past its length),
            // within what the budget still allows.
            let room = opts.budget.as_ref().map_or(n as u64, |b| {
                (n as u64).min(b.limit().saturating_sub(b.used()) + 65536)
            });
            self.buf
                .reserve((room as usize).saturating_sub(self.avail().len()));
            while self.avail().len() < n {
                if Instant::now() > deadline {
                    return Err(FetchError::Io("timed out".into()));
                }
                if self.fill().map_err(io)? == 0 {
                    return Err(FetchError::Io("connection closed in the body".into()));
                }
            }
            // Move the body out of the read buffer rather than copy it: a
            // large body is held once, not twice.
            let mut rest = self.buf.split_off(self.pos);
            self.buf = rest.split_off(n);
            self.pos = 0;
            body = rest;
            wire += n as u64;
        } else {
            keep = false;
            loop {
                body.extend_from_slice(self.avail());
                self.pos = self.buf.len();
                if body.len() > MAX_WIRE_BODY {
                    return Err(FetchError::TooLarge);
                }
                if Instant::now() > deadline {
                    return Err(FetchError::Io("timed out".into()));
                }
                if self.fill().map_err(io)? == 0 {
                    break;
                }
            }
            wire += body.len() as u64;
        }
        let done = Instant::now();
        self.served += 1;
        let timing = (sent, first_byte, done);
        let resp = finish(
            status,
            headers,
            body,
            wire,
            timing,
            self.id,
            self.served > 1,
            "http/1.1",
        );
        Ok((resp, keep))
    }

    fn read_line(&mut self, deadline: Instant) -> Result<Vec<u8>, FetchError> {
        loop {
            if let Some(i) = self.avail().iter().position(|&b| b == b'\n') {
                let line = self.avail()[..i].to_vec();
                self.pos += i + 1;
                return Ok(line);
            }
            if self.avail().len() > 8192 {
                return Err(FetchError::Malformed("chunk line too long".into()));
            }
            if Instant::now() > deadline {
                return Err(FetchError::Io("timed out".into()));
            }
            if self
                .fill()
                .map_err(|e| io_error(e, self.read_timeout, "read"))?
                == 0
            {
                return Err(FetchError::Io("connection closed in a chunk".into()));
            }
        }
    }

    fn read_chunked(&mut self, body: &mut Vec<u8>, deadline: Instant) -> Result<u64, FetchError> {
        let mut wire = 0u64;
        for _ in 0..10_000_000u32 {
            let line = self.read_line(deadline)?;
            wire += line.len() as u64 + 1;
            let s = String::from_utf8_lossy(&line);
            let size_s = s.trim().split(';').next().unwrap_or("").trim().to_string();
            let size = usize::from_str_radix(&size_s, 16)
                .map_err(|_| FetchError::Malformed(format!("bad chunk size {size_s:?}")))?;
            if size == 0 {
                // trailers until an empty line
                for _ in 0..1000 {
                    let t = self.read_line(deadline)?;
                    wire += t.len() as u64 + 1;
                    if t.is_empty() || t == b"\r" {
                        return Ok(wire);
                    }
                }
                return Err(FetchError::Malformed("too many trailers".into()));
            }
            if body.len() + size > MAX_WIRE_BODY {
                return Err(FetchError::TooLarge);
            }
            while self.avail().len() < size + 2 {
                if Instant::now() > deadline {
                    return Err(FetchError::Io("timed out".into()));
                }
                if self
                    .fill()
                    .map_err(|e| io_error(e, self.read_timeout, "read"))?
                    == 0
                {
                    return Err(FetchError::Io("connection closed in a chunk".into()));
                }
            }
            body.extend_from_slice(&self.avail()[..size]);
            self.pos += size + 2;
            wire += size as u64 + 2;
        }
        Err(FetchError::Malformed("too many chunks".into()))
    }
}

/// How much of a decoded body of media type `ctype` (lower case, no
/// parameters) the loader keeps: text whole up to [`KEEP_TEXT`], images
/// the audit re-encodes up to [`KEEP_ENCODABLE`], other images (and an
/// unknown type) their first [`KEEP_IMAGE`] bytes, nothing else.
pub(crate) fn keep_cap(ctype: &str) -> usize {
    if is_text_type(ctype) {
        KEEP_TEXT
    } else if is_encodable(ctype) {
        KEEP_ENCODABLE
    } else if ctype.starts_with("image/") || ctype.is_empty() {
        KEEP_IMAGE
    } else {
        0
    }
}

/// Builds the [`Response`] from a complete body: decoding (bounded), the
/// part kept for later steps, and the timing (`sent`, first byte, done).
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish(
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    wire: u64,
    (sent, first_byte, done): (Instant, Instant, Instant),
    conn_id: u64,
    reused: bool,
    protocol: &'static str,
) -> Response {
    let ctype = header(&headers, "content-type")
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    let keep_cap = keep_cap(&ctype);
    let coding = header(&headers, "content-encoding")
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let body_len = body.len() as u64;
    let dec = if matches!(coding.as_str(), "" | "identity") && body.len() <= keep_cap {
        // Kept whole and not encoded: the body itself, moved, not copied.
        Decoded {
            total: body_len,
            kept: body,
            capped: false,
            error: None,
        }
    } else {
        decode(&coding, &body, keep_cap)
    };
    Response {
        status,
        headers,
        wire_bytes: wire,
        body_wire_bytes: body_len,
        decoded_bytes: dec.total,
        body: if keep_cap > 0 { Some(dec.kept) } else { None },
        decode_capped: dec.capped,
        decode_error: dec.error,
        phases: Phases {
            dns_ms: None,
            connect_ms: None,
            tls_ms: None,
            waiting_ms: ms(first_byte.saturating_duration_since(sent)),
            transfer_ms: ms(done.saturating_duration_since(first_byte)),
            total_ms: ms(done.saturating_duration_since(sent)),
        },
        conn_id,
        reused,
        received_at: std::time::SystemTime::now(),
        protocol,
    }
}
