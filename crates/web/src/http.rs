//! A small blocking HTTP/1.1 client for the page loader: one `Conn` per TCP
//! connection (keep-alive), over TLS for https (rustls, the engine's
//! verification: bundled and system roots, `--cacert`, `--insecure`), timing
//! per phase (DNS, connect, TLS, waiting, transfer), the request headers
//! Chromium sends ([`request_headers`]: its User-Agent, `Accept` per
//! destination, `Accept-Encoding: gzip, deflate, br, zstd`; a media source
//! `Accept-Encoding: identity` and `Range: bytes=0-`), decoding with a
//! cap on the decoded size, and the body kept only where
//! a later step reads it (HTML, CSS, JS and other text; the first bytes of
//! images for their intrinsic size). An https connection offers `h2,
//! http/1.1` in ALPN like a browser (`--http1.1`: `http/1.1` only); when the
//! server picks `h2` the connection is handed to [`crate::h2`] and carries
//! every request to that host as concurrent streams. [`probe_alpn`] asks an
//! origin the load did not offer `h2` to (`--http1.1`) what it supports.

use rustls::pki_types::ServerName;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use url::Url;

pub use redline_engine::tls::TlsArgs;

mod connect;
mod decode;
mod exchange;
mod trust;
pub use connect::{
    connect, connect_timed, display_url, host_key, probe_alpn, AlpnProbe, Connected,
};
pub(crate) use connect::{server_name, tls_error, tls_info, tls_of};
pub use decode::{decode, is_text_type, Decoded};
pub use exchange::request_bytes;
pub(crate) use exchange::{finish, ms};
pub(crate) use trust::verifier;

/// The TLS client configurations of a load: one offering ALPN `http/1.1`
/// only (`--http1.1`) and one offering `h2, http/1.1`, like a browser (fetch
/// connections by default, and the ALPN probe).
#[derive(Clone, Debug)]
pub struct Tls {
    /// ALPN `http/1.1` only.
    pub fetch: Arc<rustls::ClientConfig>,
    /// ALPN `h2, http/1.1`.
    pub probe: Arc<rustls::ClientConfig>,
    /// Certificate verification is off (`--insecure`).
    pub insecure: bool,
}

impl Tls {
    /// Builds both configurations from the command-line options (the
    /// engine's verification rules). Err: a message for the user (a
    /// `--cacert` file that cannot be read, …).
    pub fn new(args: &TlsArgs) -> Result<Tls, String> {
        // The engine checks the host as a server name; any valid one will do
        // here, since every connection names its own host.
        let base = redline_engine::tls::setup("localhost", args)?;
        let mut fetch = (*base.config).clone();
        fetch.alpn_protocols = vec![b"http/1.1".to_vec()];
        if !args.insecure {
            // The engine's roots, and a self-signed --cacert certificate
            // the server presents trusted as curl trusts it.
            let v = verifier(args, fetch.crypto_provider().clone())?;
            fetch.dangerous().set_certificate_verifier(v);
        }
        let mut probe = fetch.clone();
        probe.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Tls {
            fetch: Arc::new(fetch),
            probe: Arc::new(probe),
            insecure: args.insecure,
        })
    }
}

fn default_tls() -> Result<Tls, String> {
    static TLS: OnceLock<Result<Tls, String>> = OnceLock::new();
    TLS.get_or_init(|| Tls::new(&TlsArgs::default())).clone()
}

/// Bodies above this many bytes on the wire are refused (the fetch fails).
pub const MAX_WIRE_BODY: usize = 100 * 1024 * 1024;
/// Decoding stops here and the response is flagged (a gzip bomb, or just huge).
pub const MAX_DECODED: u64 = 50 * 1024 * 1024;
/// Text bodies (HTML, CSS, JS, …) are kept up to this size for parsing and checks.
pub const KEEP_TEXT: usize = 10 * 1024 * 1024;
/// Images: this many leading bytes are kept to read the intrinsic size.
pub const KEEP_IMAGE: usize = 256 * 1024;
/// JPEG, PNG and BMP images up to this size are kept whole, for the
/// audit's re-encoding (Lighthouse's `MAX_RESOURCE_SIZE_TO_ENCODE`).
pub const KEEP_ENCODABLE: usize = 2000 * 1024;

/// A type the audit re-encodes as WebP and JPEG (Lighthouse's
/// `image/((x|ms|x-ms)-)?(png|bmp|jpeg)`).
pub fn is_encodable(ctype: &str) -> bool {
    let t = ctype.strip_prefix("image/").unwrap_or("");
    let t = ["x-ms-", "ms-", "x-"]
        .iter()
        .find_map(|p| t.strip_prefix(p))
        .unwrap_or(t);
    matches!(t, "png" | "bmp" | "jpeg")
}
const MAX_HEAD: usize = 64 * 1024;
/// The default byte budget of one view of a page load (`--max-bytes`).
pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// The byte budget of one view of a page load: every byte read from the
/// network, and every decoded byte kept for parsing, is charged to it; once
/// it is used up, reads fail and no more requests start, so a page linking
/// gigabytes ends with a truncated, marked result instead of growing memory.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: AtomicU64,
}

/// The message of a read stopped by the [`Budget`].
pub const BUDGET_STOP: &str = "stopped: the view's byte budget (--max-bytes) is used up";

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            used: AtomicU64::new(0),
        })
    }
    /// Charges `n` bytes; false when the budget is (now) exceeded.
    pub fn charge(&self, n: u64) -> bool {
        let before = self.used.fetch_add(n, Ordering::Relaxed);
        before.saturating_add(n) <= self.limit
    }
    /// Bytes charged so far.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }
    /// More than the limit was asked for.
    pub fn exhausted(&self) -> bool {
        self.used() > self.limit
    }
}

/// Chromium's desktop User-Agent on Linux (reduced form: minor versions
/// zeroed), the loader's default; the major version is the Chromium the
/// oracle tests run (`crates/web/tests/browser.rs` compares it).
pub const CHROME_DESKTOP_UA: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36";
/// Chromium's reduced Android User-Agent (`--mobile`).
pub const CHROME_MOBILE_UA: &str = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Mobile Safari/537.36";
/// The `Accept-Encoding` Chromium sends (every destination but media: [`Dest::accept_encoding`]), on
/// http and https alike: every coding [`decode`] reads.
pub const ACCEPT_ENCODING: &str = "gzip, deflate, br, zstd";

/// What a request is for (the Fetch standard's destination): it picks the
/// `Accept` header, as Chromium sends it, so a server that negotiates by
/// `Accept` (WebP/AVIF for images) answers redline as it answers a browser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// A page or an iframe's document.
    Document,
    /// A stylesheet.
    Style,
    /// A script.
    Script,
    /// An image (and the favicon).
    Image,
    /// A font.
    Font,
    /// A `<video>`/`<audio>` source: Chromium's media requests ask for the
    /// whole resource as a range and no content coding ([`Dest::extra`]).
    Media,
    /// Anything else (`fetch`, a preload of another type).
    Other,
}

impl Dest {
    /// The `Accept` header Chromium 156 sends for this destination (read
    /// from its requests to a recording server).
    pub fn accept(self) -> &'static str {
        match self {
            Dest::Document => "text/html,application/xhtml+xml,application/xml;q=0.9,image/jxl,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
            Dest::Style => "text/css,*/*;q=0.1",
            Dest::Image => "image/jxl,image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8",
            Dest::Script | Dest::Font | Dest::Media | Dest::Other => "*/*",
        }
    }

    /// The `Accept-Encoding` Chromium sends for this destination: media
    /// (which it reads by byte ranges) takes no content coding.
    pub fn accept_encoding(self) -> &'static str {
        match self {
            Dest::Media => "identity",
            _ => ACCEPT_ENCODING,
        }
    }

    /// Header fields Chromium adds for this destination after
    /// `Accept-Encoding`: `Range: bytes=0-` on a media request.
    pub fn extra(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Dest::Media => &[("Range", "bytes=0-")],
            _ => &[],
        }
    }
}

/// The header fields of a GET for `dest` after `Host`, in the order they are
/// sent: User-Agent, Accept, Accept-Encoding, the user's headers, then
/// `extra` (validators). HTTP/1.1 and HTTP/2 send this one list.
pub fn request_headers(
    dest: Dest,
    extra: &[(String, String)],
    opts: &ClientOpts,
) -> Vec<(String, String)> {
    let mut h = vec![
        ("User-Agent".to_string(), opts.user_agent.clone()),
        ("Accept".to_string(), dest.accept().to_string()),
        (
            "Accept-Encoding".to_string(),
            dest.accept_encoding().to_string(),
        ),
    ];
    h.extend(
        dest.extra()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string())),
    );
    h.extend(opts.headers.iter().chain(extra.iter()).cloned());
    h
}

/// Options for every request of a load.
#[derive(Clone, Debug)]
pub struct ClientOpts {
    /// Per-request time limit (also the socket read/write time-out).
    pub timeout: Duration,
    /// Connect time-out.
    pub connect_timeout: Duration,
    /// Extra request headers, sent on every request to the page's own host.
    pub headers: Vec<(String, String)>,
    /// The `User-Agent` sent (default [`CHROME_DESKTOP_UA`]).
    pub user_agent: String,
    /// TLS for https (none: verified against the bundled and system roots).
    pub tls: Option<Tls>,
    /// Offer only `http/1.1` in ALPN (`--http1.1`): no HTTP/2 even where offered.
    pub http1_only: bool,
    /// Every request to an https origin over HTTP/3 (`--http3`, QUIC on UDP).
    pub http3: bool,
    /// The byte budget reads are charged to (none: unbounded but for the
    /// per-response caps).
    pub budget: Option<Arc<Budget>>,
}

impl Default for ClientOpts {
    fn default() -> Self {
        ClientOpts {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            headers: Vec::new(),
            user_agent: CHROME_DESKTOP_UA.to_string(),
            tls: None,
            http1_only: false,
            http3: false,
            budget: None,
        }
    }
}

pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            // A peer that closes without close_notify ends the body like a
            // plain close would (servers do it; the length checks still apply).
            Stream::Tls(s) => match s.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            },
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// What a TLS connection negotiated.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TlsInfo {
    /// `TLSv1.3`, `TLSv1.2`.
    pub version: String,
    /// The cipher suite.
    pub cipher: String,
    /// The ALPN protocol the server chose (none: the server ignored ALPN).
    pub alpn: Option<String>,
}

/// One connection of a load, for the waterfall and the audit.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ConnInfo {
    /// Connection number within the load (1-based).
    pub id: u64,
    /// `scheme://host:port`.
    pub origin: String,
    /// The protocol requests were sent with (`http/1.1` or `h2`).
    pub protocol: String,
    /// What the client offered in ALPN (https only; empty for http).
    pub alpn_offered: Vec<String>,
    /// TLS details (https only).
    pub tls: Option<TlsInfo>,
}

/// How long opening a connection took, per phase (ms).
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnectTimes {
    /// Name resolution.
    pub dns: f64,
    /// TCP connect.
    pub connect: f64,
    /// TLS handshake (https only).
    pub tls: Option<f64>,
}

/// An open HTTP/1.1 connection.
pub struct Conn {
    stream: Stream,
    buf: Vec<u8>,
    pos: usize,
    /// Connection number within the load (1-based), for the waterfall.
    pub id: u64,
    /// Requests this connection has answered.
    pub served: u32,
    /// What it is (origin, protocol, TLS).
    pub info: ConnInfo,
    /// The budget the current request's reads are charged to.
    budget: Option<Arc<Budget>>,
    /// The socket's read time-out (`--timeout`), for the error that says so.
    read_timeout: Duration,
}

/// An I/O error of a request in words: a read that hit the socket's time-out
/// (`EAGAIN`, "Resource temporarily unavailable") says so and for how long.
fn io_error(e: std::io::Error, read_timeout: Duration, what: &str) -> FetchError {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            FetchError::Io(format!("{what} timed out after {read_timeout:?}"))
        }
        _ => FetchError::Io(e.to_string()),
    }
}

/// What one fetch measured, in milliseconds from its own start.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Phases {
    /// Name resolution (new connections only).
    pub dns_ms: Option<f64>,
    /// TCP connect (new connections only).
    pub connect_ms: Option<f64>,
    /// TLS handshake (new https connections only).
    pub tls_ms: Option<f64>,
    /// Request sent → first response byte (time to first byte).
    pub waiting_ms: f64,
    /// First → last response byte.
    pub transfer_ms: f64,
    /// The whole fetch.
    pub total_ms: f64,
}

/// A response as the loader needs it.
#[derive(Clone, Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Header fields in order (names as sent).
    pub headers: Vec<(String, String)>,
    /// Bytes read from the socket for this response (head and body).
    pub wire_bytes: u64,
    /// Body bytes on the wire (after de-chunking, before content decoding).
    pub body_wire_bytes: u64,
    /// Body bytes after content decoding (as far as decoding went).
    pub decoded_bytes: u64,
    /// The decoded body, or its first bytes, when kept (text, images).
    pub body: Option<Vec<u8>>,
    /// Decoding stopped at [`MAX_DECODED`] (or failed): `decoded_bytes` is a floor.
    pub decode_capped: bool,
    /// The content coding could not be decoded.
    pub decode_error: Option<String>,
    /// Timing.
    pub phases: Phases,
    /// Connection number that carried it.
    pub conn_id: u64,
    /// True if the connection was already open (reused).
    pub reused: bool,
    /// When the response arrived (for cache age), as a system time.
    pub received_at: std::time::SystemTime,
    /// The protocol it came over: `http/1.1` or `h2`.
    pub protocol: &'static str,
}

impl Response {
    /// The first value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
    /// The media type, lower case, without parameters.
    pub fn media_type(&self) -> String {
        self.header("content-type")
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default()
    }
}

/// The first value of a header in a list (case-insensitive name).
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Why a fetch failed.
#[derive(Debug, thiserror::Error, Clone)]
pub enum FetchError {
    /// The host name did not resolve.
    #[error("cannot resolve {0}")]
    Dns(String),
    /// No connection could be made.
    #[error("cannot connect to {0}")]
    Connect(String),
    /// The TLS handshake failed (certificate not trusted, no common version, …).
    #[error("{0}")]
    Tls(String),
    /// The scheme is neither http nor https.
    #[error("unsupported URL scheme {0}")]
    Scheme(String),
    /// The server's answer was not valid HTTP/1.x.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// Timed out or reset while reading.
    #[error("{0}")]
    Io(String),
    /// The body was larger than the client accepts.
    #[error("response body over {MAX_WIRE_BODY} bytes")]
    TooLarge,
    /// HTTP/2 or HTTP/3: the server did not process the request (its stream
    /// was above a GOAWAY's last stream id, was refused with REFUSED_STREAM
    /// or H3_REQUEST_REJECTED, or was never sent because the connection had
    /// ended): safe to send again on a new connection, as a browser does.
    #[error("{why}")]
    Unprocessed {
        /// What the server said.
        why: String,
        /// The refused stream's id (0: none was opened). Streams below it
        /// on that connection were processed.
        stream: u32,
    },
}

#[cfg(test)]
mod tests;
