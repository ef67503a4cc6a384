//! A tiny blocking HTTP/1.1 client for the tests: every read has a timeout,
//! every loop is bounded.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use redline_serve::{ServeConfig, Server};

pub const TIMEOUT: Duration = Duration::from_secs(10);

pub fn start(threads: usize) -> Server {
    Server::start(ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        threads,
    })
    .expect("server starts")
}

/// The body the server produces for `size=n`.
pub fn filler(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Whether the body was chunked (and was decoded).
    pub chunked: bool,
    /// Sizes of the chunks, when chunked.
    pub chunks: Vec<usize>,
    /// Bytes of the whole response on the wire.
    pub wire_len: usize,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
    pub sent: usize,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, TIMEOUT).expect("connect");
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
            sent: 0,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
        self.sent += bytes.len();
    }

    /// Reads more bytes into the buffer; panics on EOF or timeout.
    fn more(&mut self) {
        let mut tmp = [0u8; 65536];
        let n = self.stream.read(&mut tmp).expect("read (timeout?)");
        assert!(n > 0, "unexpected EOF");
        self.buf.extend_from_slice(&tmp[..n]);
    }

    /// Ensures `n` bytes are buffered.
    fn need(&mut self, n: usize) {
        while self.buf.len() < n {
            self.more();
        }
    }

    /// Takes a line (including CRLF) from the buffer.
    fn line(&mut self) -> Vec<u8> {
        for _ in 0..10_000 {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                return self.buf.drain(..i + 2).collect();
            }
            self.more();
        }
        panic!("no line");
    }

    /// Reads one response. `head_request`: the request was HEAD (no body).
    pub fn response(&mut self, head_request: bool) -> Resp {
        // Head.
        let (status, headers, head_len) = loop {
            let mut hs = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut hs);
            match r.parse(&self.buf).expect("valid response head") {
                httparse::Status::Complete(n) => {
                    let headers = r
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_string(),
                                String::from_utf8(h.value.to_vec()).unwrap(),
                            )
                        })
                        .collect::<Vec<_>>();
                    break (r.code.unwrap(), headers, n);
                }
                httparse::Status::Partial => self.more(),
            }
        };
        self.buf.drain(..head_len);
        let mut resp = Resp {
            status,
            headers,
            body: Vec::new(),
            chunked: false,
            chunks: Vec::new(),
            wire_len: head_len,
        };
        if status == 100 {
            return resp;
        }
        if head_request || status == 204 || status == 304 {
            return resp;
        }
        if resp
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            resp.chunked = true;
            for _ in 0..100_000 {
                let line = self.line();
                resp.wire_len += line.len();
                let size = usize::from_str_radix(
                    std::str::from_utf8(&line[..line.len() - 2]).unwrap(),
                    16,
                )
                .unwrap();
                if size == 0 {
                    let end = self.line();
                    assert_eq!(end, b"\r\n", "no trailers expected");
                    resp.wire_len += 2;
                    return resp;
                }
                resp.chunks.push(size);
                self.need(size + 2);
                resp.body.extend(self.buf.drain(..size));
                let crlf: Vec<u8> = self.buf.drain(..2).collect();
                assert_eq!(crlf, b"\r\n");
                resp.wire_len += size + 2;
            }
            panic!("too many chunks");
        }
        let len: usize = resp
            .header("content-length")
            .expect("content-length")
            .parse()
            .unwrap();
        self.need(len);
        resp.body = self.buf.drain(..len).collect();
        resp.wire_len += len;
        resp
    }

    /// Sends a GET and reads its response.
    pub fn get(&mut self, path: &str) -> Resp {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
        self.response(false)
    }

    /// True if the server has closed the connection (EOF) with nothing
    /// more buffered.
    pub fn at_eof(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut tmp = [0u8; 1024];
        match self.stream.read(&mut tmp) {
            Ok(0) => true,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// GET /__stats on a fresh connection.
pub fn stats_json(addr: SocketAddr) -> serde_json::Value {
    let mut c = Client::connect(addr);
    let r = c.get("/__stats");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    serde_json::from_slice(&r.body).expect("stats JSON")
}
