//! One HTTP/1.1 connection: parsing, body discarding, responses.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::params::{parse_target, Params, Target};
use crate::Shared;

mod wire;
#[cfg(test)]
use wire::parse_decimal;
use wire::{
    chunked_wire_len, parse_chunk_size, parse_head, push_connection, push_hex, push_status_line,
    push_u64, strip_cr, write_all2, Body, ChunkState, Parsed, Request,
};

/// Initial read buffer size.
const INITIAL_BUF: usize = 4 * 1024;
/// Largest request head accepted (and the read buffer's largest size).
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// The read buffer grows to this while discarding a long request body.
const BODY_BUF: usize = 16 * 1024;
/// Longest chunk-size or trailer line accepted in a chunked request body.
const MAX_LINE: usize = 4 * 1024;
/// Most request headers accepted (more → 431).
const MAX_HEADERS: usize = 100;
/// Bodies up to this size are copied into the output buffer (one write per
/// response, several per write when pipelining); larger ones are written
/// straight from the static filler.
const INLINE_BODY: usize = 16 * 1024;
/// Largest chunk of a chunked response body.
const CHUNK: usize = 16 * 1024;
/// The output buffer is written out once it holds this much.
const FLUSH_AT: usize = 32 * 1024;
/// How long, and how many bytes, to keep reading (and discarding) after
/// half-closing a connection, so that unread request bytes do not turn the
/// close into a reset that could destroy the response in flight.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_MAX: usize = 1 << 20;

const SERVER: &[u8] =
    concat!("Server: redline-serve/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes();
const TEXT: &[u8] = b"Content-Type: text/plain\r\n";
const JSON: &[u8] = b"Content-Type: application/json\r\n";

/// Filler length: a multiple of 26 so that consecutive slices of a long
/// body continue the alphabet, and more than `CHUNK + 26` so that a chunk
/// can start at any offset of the alphabet.
const FILLER_LEN: usize = 26 * 2521;
const _: () = assert!(FILLER_LEN >= CHUNK + 26);
/// The body bytes: `abc…zabc…z…`.
static FILLER: [u8; FILLER_LEN] = {
    let mut a = [0u8; FILLER_LEN];
    let mut i = 0;
    while i < FILLER_LEN {
        a[i] = b'a' + (i % 26) as u8;
        i += 1;
    }
    a
};

/// One accepted connection.
pub(crate) struct Conn {
    stream: TcpStream,
    shared: Arc<Shared>,
    /// Read buffer; `buf[start..end]` holds unprocessed bytes.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Output buffer (response heads and small bodies), reused.
    out: Vec<u8>,
    /// Extra response headers of the current request, reused.
    extra: Vec<u8>,
    /// Counts not yet added to the shared counters. They are published
    /// before every write and every wait, so the shared counters are exact
    /// whenever this task is not running.
    requests: u64,
    bytes_in: u64,
    bytes_out: u64,
    /// Whether this connection is included in `connections` and
    /// `open_connections`.
    counted: bool,
    /// The reset epoch when `connections` was incremented for this
    /// connection.
    epoch: u64,
    /// No request parsed yet.
    first: bool,
    /// The peer's address, and the reset epoch in which it was last noted
    /// as a client (None: not yet).
    peer: Option<std::net::IpAddr>,
    peer_noted: Option<u64>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.publish();
        if self.counted {
            self.shared.open.fetch_sub(1, Relaxed);
        }
    }
}

impl Conn {
    /// Counts a newly accepted connection.
    pub(crate) fn new(stream: TcpStream, shared: Arc<Shared>) -> Conn {
        shared.connections.fetch_add(1, Relaxed);
        shared.open.fetch_add(1, Relaxed);
        let epoch = shared.epoch.load(Relaxed);
        let peer = stream.peer_addr().ok().map(|a| a.ip());
        Conn {
            peer,
            peer_noted: None,
            stream,
            shared,
            buf: vec![0; INITIAL_BUF],
            start: 0,
            end: 0,
            out: Vec::with_capacity(1024),
            extra: Vec::new(),
            requests: 0,
            bytes_in: 0,
            bytes_out: 0,
            counted: true,
            epoch,
            first: true,
        }
    }

    /// Serves the connection until it closes (errors just close it).
    pub(crate) async fn run(mut self) {
        let _ = self.serve().await;
    }

    fn publish(&mut self) {
        if self.requests != 0 {
            self.shared.requests.fetch_add(self.requests, Relaxed);
            self.requests = 0;
        }
        if self.bytes_in != 0 {
            self.shared.bytes_in.fetch_add(self.bytes_in, Relaxed);
            self.bytes_in = 0;
        }
        if self.bytes_out != 0 {
            self.shared.bytes_out.fetch_add(self.bytes_out, Relaxed);
            self.bytes_out = 0;
        }
    }

    /// Removes this connection from the counters (its first request was a
    /// control request).
    fn uncount(&mut self) {
        if !self.counted {
            return;
        }
        self.counted = false;
        self.shared.open.fetch_sub(1, Relaxed);
        if self.shared.epoch.load(Relaxed) == self.epoch {
            let _ = self
                .shared
                .connections
                .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        }
    }

    /// Counts this connection after all (a counted request after a control
    /// one).
    fn recount(&mut self) {
        self.counted = true;
        self.shared.connections.fetch_add(1, Relaxed);
        self.shared.open.fetch_add(1, Relaxed);
        self.epoch = self.shared.epoch.load(Relaxed);
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.publish();
        if !self.out.is_empty() {
            self.stream.write_all(&self.out).await?;
            self.out.clear();
        }
        Ok(())
    }

    /// Flushes pending output, then reads more input. Returns false on EOF.
    async fn fill(&mut self, grow_to: usize) -> io::Result<bool> {
        self.flush().await?;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.buf.len() && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < grow_to.min(MAX_HEAD)
            || (self.end == self.buf.len() && self.buf.len() < MAX_HEAD)
        {
            let n = (self.buf.len() * 2).max(grow_to).min(MAX_HEAD);
            self.buf.resize(n, 0);
        }
        if self.end == self.buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "read buffer full",
            ));
        }
        let n = self.stream.read(&mut self.buf[self.end..]).await?;
        if n == 0 {
            return Ok(false);
        }
        self.end += n;
        Ok(true)
    }

    fn consume(&mut self, n: usize, counted: bool) {
        self.start += n;
        if counted {
            self.bytes_in += n as u64;
        }
    }

    async fn serve(&mut self) -> io::Result<()> {
        loop {
            match parse_head(&self.buf[self.start..self.end], &mut self.extra) {
                Parsed::Complete(req) => {
                    if !self.handle(req).await? {
                        return self.close().await;
                    }
                    if self.out.len() >= FLUSH_AT {
                        self.flush().await?;
                    }
                    continue;
                }
                Parsed::Partial => {
                    if self.end - self.start >= MAX_HEAD {
                        self.error(431);
                        return self.close().await;
                    }
                }
                Parsed::Error(status) => {
                    self.error(status);
                    return self.close().await;
                }
            }
            if !self.fill(0).await? {
                return Ok(());
            }
        }
    }

    /// Sends what is pending, half-closes, and drains the input for a while.
    async fn close(&mut self) -> io::Result<()> {
        self.flush().await?;
        self.stream.shutdown().await?;
        let (stream, buf) = (&mut self.stream, &mut self.buf);
        let _ = tokio::time::timeout(LINGER, async {
            let mut total = 0;
            while let Ok(n @ 1..) = stream.read(buf).await {
                total += n;
                if total > LINGER_MAX {
                    break;
                }
            }
        })
        .await;
        Ok(())
    }

    /// Queues an error response to a malformed request (not counted).
    fn error(&mut self, status: u16) {
        let body: &[u8] = match status {
            431 => b"request header fields too large\n",
            _ => b"bad request\n",
        };
        self.simple(status, TEXT, body, false, false, false);
    }

    /// Queues a response with a small given body.
    fn simple(
        &mut self,
        status: u16,
        ctype: &[u8],
        body: &[u8],
        is_head: bool,
        keep_alive: bool,
        http10: bool,
    ) -> usize {
        let before = self.out.len();
        push_status_line(&mut self.out, status);
        self.out.extend_from_slice(SERVER);
        self.out.extend_from_slice(ctype);
        self.out.extend_from_slice(b"Content-Length: ");
        push_u64(&mut self.out, body.len() as u64);
        self.out.extend_from_slice(b"\r\n");
        push_connection(&mut self.out, keep_alive, http10);
        self.out.extend_from_slice(b"\r\n");
        if !is_head {
            self.out.extend_from_slice(body);
        }
        self.out.len() - before
    }

    /// Serves one request whose head has been parsed. Returns whether the
    /// connection stays open.
    async fn handle(&mut self, req: Request) -> io::Result<bool> {
        let counted = req.target.counted();
        if self.first {
            self.first = false;
            if !counted {
                self.uncount();
            }
        } else if counted && !self.counted {
            self.recount();
        }
        if counted {
            self.requests += 1;
            if let Some(ip) = self.peer {
                if self.peer_noted != Some(self.shared.epoch()) {
                    self.peer_noted = Some(self.shared.note_client(ip));
                }
            }
        }
        self.consume(req.head_len, counted);

        if req.body != Body::None {
            if req.expect_continue && !req.http10 {
                const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
                self.out.extend_from_slice(CONTINUE);
                if counted {
                    self.bytes_out += CONTINUE.len() as u64;
                }
            }
            let ok = match req.body {
                Body::Length(n) => self.discard_length(n, counted).await?,
                _ => self.discard_chunked(counted).await?,
            };
            if !ok {
                self.error(400);
                return Ok(false);
            }
        }

        let keep_alive = req.keep_alive;
        match req.target {
            Target::Normal(p) => return self.respond(&req, p).await,
            Target::BadParams(msg) => {
                self.wait_stall().await?;
                let n = self.simple(
                    400,
                    TEXT,
                    msg.as_bytes(),
                    req.is_head,
                    keep_alive,
                    req.http10,
                );
                self.bytes_out += n as u64;
            }
            Target::Stats => {
                self.publish();
                let s = self.shared.snapshot();
                let body = format!(
                    "{{\"connections\":{},\"requests\":{},\"open_connections\":{},\"bytes_in\":{},\"bytes_out\":{},\"logins\":{},\"sessions_ok\":{},\"sessions_denied\":{},\"clients\":{}}}",
                    s.connections, s.requests, s.open_connections, s.bytes_in, s.bytes_out, s.logins, s.sessions_ok, s.sessions_denied, s.clients
                );
                self.simple(
                    200,
                    JSON,
                    body.as_bytes(),
                    req.is_head,
                    keep_alive,
                    req.http10,
                );
            }
            Target::Stall(d) => {
                self.shared.stall(d);
                self.simple(200, TEXT, b"ok\n", req.is_head, keep_alive, req.http10);
            }
            Target::Reset => {
                self.publish();
                self.shared.reset();
                self.simple(200, TEXT, b"ok\n", req.is_head, keep_alive, req.http10);
            }
            Target::Login => {
                self.wait_stall().await?;
                let k = self.shared.logins.fetch_add(1, Relaxed) + 1;
                let body = format!("{{\"token\":\"T{k}\"}}\n");
                let before = self.out.len();
                push_status_line(&mut self.out, 200);
                self.out.extend_from_slice(SERVER);
                self.out.extend_from_slice(JSON);
                self.out.extend_from_slice(
                    format!("Set-Cookie: sid=S{k}; Path=/; HttpOnly\r\n").as_bytes(),
                );
                self.out.extend_from_slice(b"Content-Length: ");
                push_u64(&mut self.out, body.len() as u64);
                self.out.extend_from_slice(b"\r\n");
                push_connection(&mut self.out, keep_alive, req.http10);
                self.out.extend_from_slice(b"\r\n");
                if !req.is_head {
                    self.out.extend_from_slice(body.as_bytes());
                }
                self.bytes_out += (self.out.len() - before) as u64;
            }
            Target::Account(token) => {
                self.wait_stall().await?;
                let ok = token.is_some() && token == req.sid;
                let n = if ok {
                    self.shared.sessions_ok.fetch_add(1, Relaxed);
                    self.simple(
                        200,
                        TEXT,
                        b"welcome back\n",
                        req.is_head,
                        keep_alive,
                        req.http10,
                    )
                } else {
                    self.shared.sessions_denied.fetch_add(1, Relaxed);
                    self.simple(
                        401,
                        TEXT,
                        b"login first\n",
                        req.is_head,
                        keep_alive,
                        req.http10,
                    )
                };
                self.bytes_out += n as u64;
            }
            Target::BadControl(status, msg) => {
                self.simple(
                    status,
                    TEXT,
                    msg.as_bytes(),
                    req.is_head,
                    keep_alive,
                    req.http10,
                );
            }
        }
        Ok(keep_alive)
    }

    /// Waits while a stall is in effect.
    async fn wait_stall(&mut self) -> io::Result<()> {
        loop {
            let until = self.shared.stall_until.load(Relaxed);
            if until == 0 {
                return Ok(());
            }
            let now = self.shared.now_ns();
            if now >= until {
                let _ = self
                    .shared
                    .stall_until
                    .compare_exchange(until, 0, Relaxed, Relaxed);
                return Ok(());
            }
            self.flush().await?;
            tokio::time::sleep(Duration::from_nanos(until - now)).await;
        }
    }

    /// Responds to a normal request.
    async fn respond(&mut self, req: &Request, p: Params) -> io::Result<bool> {
        if !p.delay.is_zero() {
            self.flush().await?;
            tokio::time::sleep(p.delay).await;
        }
        self.wait_stall().await?;

        let keep_alive = req.keep_alive && !p.close;
        let no_body = p.status == 204 || p.status == 304;
        let chunked = p.chunked && !req.http10 && !no_body;
        let before = self.out.len();
        let out = &mut self.out;
        push_status_line(out, p.status);
        out.extend_from_slice(SERVER);
        out.extend_from_slice(TEXT);
        if no_body {
        } else if chunked {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
        } else {
            out.extend_from_slice(b"Content-Length: ");
            push_u64(out, p.size);
            out.extend_from_slice(b"\r\n");
        }
        push_connection(out, keep_alive, req.http10);
        out.extend_from_slice(&self.extra);
        out.extend_from_slice(b"\r\n");
        self.bytes_out += (out.len() - before) as u64;

        if !no_body && !req.is_head {
            // Sizes are capped at 100 MiB by the parameter parser.
            let size = p.size as usize;
            if chunked {
                self.bytes_out += chunked_wire_len(p.size);
                self.send_chunked(size).await?;
            } else {
                self.bytes_out += p.size;
                if size <= INLINE_BODY {
                    self.out.extend_from_slice(&FILLER[..size]);
                } else {
                    self.send_large(size).await?;
                }
            }
        }
        Ok(keep_alive)
    }

    /// Writes the pending output followed by a `size`-byte body, straight
    /// from the static filler.
    async fn send_large(&mut self, size: usize) -> io::Result<()> {
        self.publish();
        let first = size.min(FILLER_LEN);
        write_all2(&mut self.stream, &self.out, &FILLER[..first]).await?;
        self.out.clear();
        let mut rem = size - first;
        while rem > 0 {
            let n = rem.min(FILLER_LEN);
            self.stream.write_all(&FILLER[..n]).await?;
            rem -= n;
        }
        Ok(())
    }

    /// Writes (or queues, when small) a chunked body of `size` bytes.
    async fn send_chunked(&mut self, size: usize) -> io::Result<()> {
        let mut pos = 0;
        while pos < size {
            let n = (size - pos).min(CHUNK);
            push_hex(&mut self.out, n as u64);
            self.out.extend_from_slice(b"\r\n");
            let data = &FILLER[pos % 26..pos % 26 + n];
            if size <= INLINE_BODY {
                self.out.extend_from_slice(data);
            } else {
                self.publish();
                write_all2(&mut self.stream, &self.out, data).await?;
                self.out.clear();
            }
            self.out.extend_from_slice(b"\r\n");
            pos += n;
        }
        self.out.extend_from_slice(b"0\r\n\r\n");
        Ok(())
    }

    /// Reads and discards `n` body bytes. Returns false if the body is
    /// malformed (never, for this framing).
    async fn discard_length(&mut self, n: u64, counted: bool) -> io::Result<bool> {
        let mut rem = n;
        loop {
            let take = ((self.end - self.start) as u64).min(rem);
            self.consume(take as usize, counted);
            rem -= take;
            if rem == 0 {
                return Ok(true);
            }
            let grow_to = if rem > self.buf.len() as u64 {
                BODY_BUF
            } else {
                0
            };
            if !self.fill(grow_to).await? {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Reads and discards a chunked body (and its trailers). Returns false if
    /// it is malformed.
    async fn discard_chunked(&mut self, counted: bool) -> io::Result<bool> {
        let mut state = ChunkState::Size;
        loop {
            let avail = &self.buf[self.start..self.end];
            match state {
                ChunkState::Size => {
                    if let Some(i) = avail.iter().position(|&b| b == b'\n') {
                        let Some(size) = parse_chunk_size(strip_cr(&avail[..i])) else {
                            return Ok(false);
                        };
                        self.consume(i + 1, counted);
                        state = if size == 0 {
                            ChunkState::Trailer(0)
                        } else {
                            ChunkState::Data(size)
                        };
                        continue;
                    }
                    if avail.len() > MAX_LINE {
                        return Ok(false);
                    }
                }
                ChunkState::Data(n) => {
                    let take = (avail.len() as u64).min(n);
                    self.consume(take as usize, counted);
                    state = if take == n {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(n - take)
                    };
                    if take == n {
                        continue;
                    }
                }
                ChunkState::DataEnd => match avail {
                    [b'\r', b'\n', ..] => {
                        self.consume(2, counted);
                        state = ChunkState::Size;
                        continue;
                    }
                    [b'\n', ..] => {
                        self.consume(1, counted);
                        state = ChunkState::Size;
                        continue;
                    }
                    [] | [b'\r'] => {}
                    _ => return Ok(false),
                },
                ChunkState::Trailer(seen) => {
                    if let Some(i) = avail.iter().position(|&b| b == b'\n') {
                        let empty = strip_cr(&avail[..i]).is_empty();
                        self.consume(i + 1, counted);
                        if empty {
                            return Ok(true);
                        }
                        if seen + i + 1 > MAX_HEAD {
                            return Ok(false);
                        }
                        state = ChunkState::Trailer(seen + i + 1);
                        continue;
                    }
                    if avail.len() > MAX_LINE {
                        return Ok(false);
                    }
                }
            }
            let grow_to = if matches!(state, ChunkState::Data(n) if n > self.buf.len() as u64) {
                BODY_BUF
            } else {
                0
            };
            if !self.fill(grow_to).await? {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

#[cfg(test)]
mod tests;
