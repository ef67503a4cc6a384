//! Opening a connection: TCP (timed, per resolved address), the TLS
//! handshake and its errors in words, ALPN (`h2` or HTTP/1.1) and the ALPN
//! probe of the audit.

use super::*;

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
pub(super) fn tcp_timed(
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

pub(super) fn cert_error_words(c: &rustls::CertificateError) -> String {
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
pub(super) fn handshake(
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

pub(super) fn connect_tls_part(
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
