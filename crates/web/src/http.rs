//! A small blocking HTTP/1.1 client for the page loader: one `Conn` per TCP
//! connection (keep-alive), over TLS for https (rustls, the engine's
//! verification: bundled and system roots, `--cacert`, `--insecure`), timing
//! per phase (DNS, connect, TLS, waiting, transfer), `Accept-Encoding: gzip,
//! br`, decoding with a cap on the decoded size, and the body kept only where
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
        let mut probe = (*base.config).clone();
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

/// Options for every request of a load.
#[derive(Clone, Debug)]
pub struct ClientOpts {
    /// Per-request time limit (also the socket read/write time-out).
    pub timeout: Duration,
    /// Connect time-out.
    pub connect_timeout: Duration,
    /// Extra request headers, sent on every request to the page's own host.
    pub headers: Vec<(String, String)>,
    /// The `User-Agent` sent.
    pub user_agent: String,
    /// TLS for https (none: verified against the bundled and system roots).
    pub tls: Option<Tls>,
    /// Offer only `http/1.1` in ALPN (`--http1.1`): no HTTP/2 even where offered.
    pub http1_only: bool,
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
            user_agent: concat!("redline/", env!("CARGO_PKG_VERSION")).to_string(),
            tls: None,
            http1_only: false,
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
    /// HTTP/2: the server did not process the request (its stream was above
    /// a GOAWAY's last stream id, was refused with REFUSED_STREAM, or was
    /// never sent because the connection had ended): safe to send again on
    /// a new connection, as a browser does.
    #[error("HTTP/2: {why}")]
    Unprocessed {
        /// What the server said.
        why: String,
        /// The refused stream's id (0: none was opened). Streams below it
        /// on that connection were processed.
        stream: u32,
    },
}

/// The `host:port` key connections are pooled by.
pub fn host_key(u: &Url) -> String {
    format!(
        "{}://{}:{}",
        u.scheme(),
        u.host_str().unwrap_or(""),
        u.port_or_known_default().unwrap_or(0)
    )
}

/// A URL for printing: user and password removed.
pub fn display_url(u: &Url) -> String {
    if u.username().is_empty() && u.password().is_none() {
        return u.to_string();
    }
    let mut c = u.clone();
    let _ = c.set_username("");
    let _ = c.set_password(None);
    c.to_string()
}

pub(crate) fn tcp(u: &Url, opts: &ClientOpts) -> Result<(TcpStream, f64, f64), FetchError> {
    tcp_timed(u, opts, &mut ConnectTimes::default())
}

/// [`tcp`], writing each phase's time into `times` as it ends, so a failed
/// lookup or connect still tells how long it took.
fn tcp_timed(
    u: &Url,
    opts: &ClientOpts,
    times: &mut ConnectTimes,
) -> Result<(TcpStream, f64, f64), FetchError> {
    let host = u.host_str().unwrap_or("").to_string();
    let port = u.port_or_known_default().unwrap_or(80);
    let t = Instant::now();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let resolved = (bare, port).to_socket_addrs();
    times.dns = ms(t.elapsed());
    let addrs: Vec<SocketAddr> = resolved
        .map_err(|_| FetchError::Dns(host.clone()))?
        .collect();
    if addrs.is_empty() {
        return Err(FetchError::Dns(host));
    }
    let dns = times.dns;
    let t = Instant::now();
    let mut last = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, opts.connect_timeout) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                let _ = s.set_read_timeout(Some(opts.timeout));
                let _ = s.set_write_timeout(Some(opts.timeout));
                return Ok((s, dns, ms(t.elapsed())));
            }
            Err(e) => last = Some(e),
        }
    }
    times.connect = ms(t.elapsed());
    let why = last.map(|e| e.to_string()).unwrap_or_default();
    Err(FetchError::Connect(format!("{host}:{port} ({why})")))
}

/// A handshake error in words, with what to do about an untrusted certificate.
pub(crate) fn tls_error(u: &Url, e: &std::io::Error) -> FetchError {
    let hp = format!(
        "{}:{}",
        u.host_str().unwrap_or(""),
        u.port_or_known_default().unwrap_or(443)
    );
    let inner = e
        .get_ref()
        .and_then(|i| i.downcast_ref::<rustls::Error>())
        .cloned();
    match inner {
        Some(rustls::Error::InvalidCertificate(c)) => FetchError::Tls(format!(
            "TLS handshake with {hp} failed: certificate not accepted ({}); trust its CA with --cacert FILE, or skip the check with --insecure",
            cert_error_words(&c)
        )),
        Some(other) => FetchError::Tls(format!("TLS handshake with {hp} failed: {other}")),
        None if e.kind() == std::io::ErrorKind::WouldBlock
            || e.kind() == std::io::ErrorKind::TimedOut =>
        {
            FetchError::Tls(format!("TLS handshake with {hp} timed out"))
        }
        None => FetchError::Tls(format!("TLS handshake with {hp} failed: {e}")),
    }
}

fn cert_error_words(c: &rustls::CertificateError) -> String {
    use rustls::CertificateError as C;
    match c {
        C::UnknownIssuer => "certificate signed by an unknown issuer".into(),
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "certificate not valid for this host name".into()
        }
        C::Expired | C::ExpiredContext { .. } => "certificate expired".into(),
        C::NotValidYet | C::NotValidYetContext { .. } => "certificate not valid yet".into(),
        C::Revoked => "certificate revoked".into(),
        C::BadSignature => "bad certificate signature".into(),
        other => format!("invalid peer certificate: {other:?}"),
    }
}

pub(crate) fn server_name(u: &Url) -> Result<ServerName<'static>, FetchError> {
    let host = u.host_str().unwrap_or("");
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_string())
        .map_err(|_| FetchError::Tls(format!("'{bare}' is not a valid TLS server name")))
}

/// Runs the TLS handshake on `sock` to completion (bounded by the socket's
/// time-outs), returning the session and what was negotiated.
fn handshake(
    u: &Url,
    config: Arc<rustls::ClientConfig>,
    mut sock: TcpStream,
    deadline: Instant,
) -> Result<
    (
        rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
        TlsInfo,
    ),
    FetchError,
> {
    let mut conn = rustls::ClientConnection::new(config, server_name(u)?)
        .map_err(|e| FetchError::Tls(format!("TLS setup: {e}")))?;
    for _ in 0..1000 {
        if !conn.is_handshaking() {
            break;
        }
        if Instant::now() > deadline {
            return Err(FetchError::Tls(format!(
                "TLS handshake with {} timed out",
                u.host_str().unwrap_or("")
            )));
        }
        match conn.complete_io(&mut sock) {
            Ok((0, 0)) if conn.is_handshaking() => {
                return Err(FetchError::Tls(format!(
                    "TLS handshake with {} failed: the server closed the connection",
                    u.host_str().unwrap_or("")
                )))
            }
            Ok(_) => {}
            Err(e) => return Err(tls_error(u, &e)),
        }
    }
    if conn.is_handshaking() {
        return Err(FetchError::Tls("TLS handshake did not finish".into()));
    }
    let info = tls_info(&conn);
    Ok((rustls::StreamOwned::new(conn, sock), info))
}

/// What the handshake settled: version, cipher suite and ALPN protocol.
pub(crate) fn tls_info(c: &rustls::ClientConnection) -> TlsInfo {
    TlsInfo {
        version: c
            .protocol_version()
            .map(|v| match v {
                rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_string(),
                rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_string(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default(),
        cipher: c
            .negotiated_cipher_suite()
            .map(|s| format!("{:?}", s.suite()))
            .unwrap_or_default(),
        alpn: c
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned()),
    }
}

pub(crate) fn tls_of(opts: &ClientOpts) -> Result<Tls, FetchError> {
    match &opts.tls {
        Some(t) => Ok(t.clone()),
        None => default_tls().map_err(FetchError::Tls),
    }
}

/// A new connection: HTTP/1.1, or HTTP/2 where the server chose `h2`.
pub enum Connected {
    /// HTTP/1.1 (plain http, `--http1.1`, or the server chose `http/1.1`).
    H1(Conn),
    /// HTTP/2: every request to the host goes over it as a stream.
    H2(crate::h2::H2Conn),
}

/// Opens a new connection to the URL's host, timing DNS, connect and (https)
/// the TLS handshake. An https connection offers `h2, http/1.1` in ALPN
/// unless `opts.http1_only`.
pub fn connect(
    u: &Url,
    opts: &ClientOpts,
    id: u64,
) -> Result<(Connected, ConnectTimes), FetchError> {
    connect_timed(u, opts, id, &mut ConnectTimes::default())
}

/// [`connect`], writing each phase's time into `spent` as it ends: when the
/// connection fails, `spent` holds how long the lookup, the TCP connect and
/// the TLS handshake took up to the failure (the waterfall shows it).
pub fn connect_timed(
    u: &Url,
    opts: &ClientOpts,
    id: u64,
    spent: &mut ConnectTimes,
) -> Result<(Connected, ConnectTimes), FetchError> {
    let https = match u.scheme() {
        "http" => false,
        "https" => true,
        s => return Err(FetchError::Scheme(s.to_string())),
    };
    let (sock, dns, connect) = tcp_timed(u, opts, spent)?;
    let mut times = ConnectTimes {
        dns,
        connect,
        tls: None,
    };
    let t_tls = Instant::now();
    let r = connect_tls_part(u, opts, id, sock, https, &mut times);
    if r.is_err() && https {
        spent.tls = Some(ms(t_tls.elapsed()));
    }
    r.map(|c| (c, times))
}

fn connect_tls_part(
    u: &Url,
    opts: &ClientOpts,
    id: u64,
    sock: TcpStream,
    https: bool,
    times: &mut ConnectTimes,
) -> Result<Connected, FetchError> {
    let mut info = ConnInfo {
        id,
        origin: host_key(u),
        protocol: "http/1.1".into(),
        alpn_offered: Vec::new(),
        tls: None,
    };
    let stream = if https && !opts.http1_only {
        let tls = tls_of(opts)?;
        info.alpn_offered = vec!["h2".into(), "http/1.1".into()];
        let (c, tls_ms) = crate::h2::connect_tls(u, opts, tls.probe, sock, info)?;
        times.tls = Some(tls_ms);
        return Ok(c);
    } else if https {
        let tls = tls_of(opts)?;
        let t = Instant::now();
        // The handshake is part of connecting: bounded by the connect time-out.
        let _ = sock.set_read_timeout(Some(opts.connect_timeout));
        let (s, ti) = handshake(u, tls.fetch, sock, t + opts.connect_timeout)?;
        times.tls = Some(ms(t.elapsed()));
        let _ = s.sock.set_read_timeout(Some(opts.timeout));
        info.alpn_offered = vec!["http/1.1".into()];
        info.tls = Some(ti);
        Stream::Tls(Box::new(s))
    } else {
        Stream::Plain(sock)
    };
    Ok(Connected::H1(Conn::new(stream, id, info)))
}

/// What an https origin answered to a browser-like ALPN offer (`h2, http/1.1`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct AlpnProbe {
    /// `https://host:port`.
    pub origin: String,
    /// Not the page's own site.
    pub third_party: bool,
    /// What the client offered.
    pub offered: Vec<String>,
    /// What the server chose (none: it ignored ALPN, which means HTTP/1.1).
    pub alpn: Option<String>,
    /// The server chose HTTP/2.
    pub h2: bool,
    /// The TLS version negotiated.
    pub tls_version: Option<String>,
    /// Why the probe failed.
    pub error: Option<String>,
    /// Learnt from a separate probe connection (`--http1.1`), not from the
    /// load's own connection.
    pub probed: bool,
}

/// Opens one TLS connection offering `h2` and `http/1.1` and records the
/// server's choice, then closes it (no request is sent).
pub fn probe_alpn(u: &Url, opts: &ClientOpts, third_party: bool) -> AlpnProbe {
    let mut p = AlpnProbe {
        origin: host_key(u),
        third_party,
        offered: vec!["h2".into(), "http/1.1".into()],
        alpn: None,
        h2: false,
        tls_version: None,
        error: None,
        probed: true,
    };
    let r = tls_of(opts).and_then(|tls| {
        let (sock, _, _) = tcp(u, opts)?;
        let _ = sock.set_read_timeout(Some(opts.connect_timeout));
        handshake(u, tls.probe, sock, Instant::now() + opts.connect_timeout)
    });
    match r {
        Ok((mut s, info)) => {
            s.conn.send_close_notify();
            let _ = s.conn.complete_io(&mut s.sock);
            p.h2 = info.alpn.as_deref() == Some("h2");
            p.alpn = info.alpn;
            p.tls_version = Some(info.version);
        }
        Err(e) => p.error = Some(e.to_string()),
    }
    p
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Builds the request bytes.
pub fn request_bytes(u: &Url, extra: &[(String, String)], opts: &ClientOpts) -> Vec<u8> {
    let mut path = u.path().to_string();
    if let Some(q) = u.query() {
        path.push('?');
        path.push_str(q);
    }
    let host = match u.port() {
        Some(p) => format!("{}:{p}", u.host_str().unwrap_or("")),
        None => u.host_str().unwrap_or("").to_string(),
    };
    let mut r = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {}\r\nAccept: */*\r\nAccept-Encoding: gzip, br\r\n",
        opts.user_agent
    );
    for (n, v) in opts.headers.iter().chain(extra.iter()) {
        r.push_str(n);
        r.push_str(": ");
        r.push_str(v);
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
        extra: &[(String, String)],
        opts: &ClientOpts,
    ) -> Result<(Response, bool), FetchError> {
        let req = request_bytes(u, extra, opts);
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
    let keep_cap = if is_text_type(&ctype) {
        KEEP_TEXT
    } else if ctype.starts_with("image/") || ctype.is_empty() {
        KEEP_IMAGE
    } else {
        0
    };
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

/// Media types whose bodies are kept (parsed or checked).
pub fn is_text_type(ctype: &str) -> bool {
    ctype.starts_with("text/")
        || ctype.contains("javascript")
        || ctype.contains("json")
        || ctype.contains("xml")
        || ctype.contains("ecmascript")
}

/// The result of content decoding.
pub struct Decoded {
    /// Decoded bytes counted (up to the cap).
    pub total: u64,
    /// The first `keep` decoded bytes.
    pub kept: Vec<u8>,
    /// Stopped at [`MAX_DECODED`].
    pub capped: bool,
    /// The coding was unknown or the data corrupt.
    pub error: Option<String>,
}

/// Decodes a body by its `Content-Encoding` (gzip, x-gzip, deflate, br,
/// identity), counting at most [`MAX_DECODED`] bytes and keeping `keep`.
pub fn decode(coding: &str, body: &[u8], keep: usize) -> Decoded {
    let mut reader: Box<dyn Read + '_> = match coding {
        "" | "identity" => Box::new(body),
        "gzip" | "x-gzip" => Box::new(flate2::read::MultiGzDecoder::new(body)),
        "br" => Box::new(brotli_decompressor::Decompressor::new(body, 4096)),
        "deflate" => {
            // RFC 9110 says zlib; some servers send raw deflate.
            if body.len() >= 2 && (u16::from(body[0]) << 8 | u16::from(body[1])) % 31 == 0 {
                Box::new(flate2::read::ZlibDecoder::new(body))
            } else {
                Box::new(flate2::read::DeflateDecoder::new(body))
            }
        }
        other => {
            return Decoded {
                total: body.len() as u64,
                kept: body[..body.len().min(keep)].to_vec(),
                capped: false,
                error: Some(format!("unknown content coding {other:?}")),
            }
        }
    };
    let mut out = Decoded {
        total: 0,
        kept: Vec::new(),
        capped: false,
        error: None,
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if out.kept.len() < keep {
                    let take = n.min(keep - out.kept.len());
                    out.kept.extend_from_slice(&buf[..take]);
                }
                out.total += n as u64;
                if out.total >= MAX_DECODED {
                    out.capped = true;
                    break;
                }
            }
            Err(e) => {
                out.error = Some(format!("{coding} data corrupt: {e}"));
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
