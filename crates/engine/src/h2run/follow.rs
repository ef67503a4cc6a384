//! `-L/--follow-redirects` over HTTP/2, and the connections a stream keeps to
//! other origins ([`Away`]: a redirect's, or another host of a scenario).
//!
//! Redirects follow the HTTP/1 worker's rules ([`crate::redirect`]: curl's
//! method rules, credentials only to the original origin, `--max-redirs`);
//! each hop's request is rewritten from the original's spec by
//! [`crate::redirect::hop_spec`] (no HTTP/1 bytes are parsed). A hop on
//! the request's own origin is a new stream on the stream's own connection; a
//! hop to another origin goes over the stream's [`Away`] connection there,
//! whose protocol is that server's pick, as in a browser: HTTP/2 when it picks
//! `h2` by ALPN (or, in an h2c run, a cleartext origin by prior knowledge),
//! else HTTP/1.1 with the spec's HTTP/1 encoding, read by the engine's
//! [`ResponseReader`].
//!
//! A hop or request to another origin that an HTTP/2 server refused
//! unprocessed (GOAWAY, REFUSED_STREAM; RFC 9113 §8.7) is sent once more by
//! its stream, still in flight in the ledger (counted `retried`): on the
//! same connection after REFUSED_STREAM; after GOAWAY an own-origin hop goes
//! over the stream's [`Away`] connection to that origin, and an [`Away`]
//! connection that took GOAWAY is replaced.

use super::conn::{connect_to, Connected, Io, OpenGuard};
use super::errors::{io_message, Fail};
use super::exchange::{answer_by, timed_out, Fetched, Waited};
use super::wire::Unanswered;
use super::{Conn, ConnCtx, ConnectFail, Req, WorkerState};
use crate::h1::{Capture, Progress, ResponseReader};
use crate::plan::request::RequestSpec;
use crate::session::Want;
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A connection a stream keeps to another origin, reused while its
/// requests or redirects go there.
pub(super) struct Away {
    key: String,
    /// Where it goes (to connect again after GOAWAY).
    origin: Arc<crate::redirect::Origin>,
    pub(super) conn: AwayConn,
    pub(super) ctx: Rc<ConnCtx>,
}

impl Away {
    /// An HTTP/2 connection there that takes no more requests (closed, or
    /// GOAWAY received: a new one is made).
    fn dead(&self) -> bool {
        matches!(&self.conn, AwayConn::H2(c) if c.retiring())
    }
}

/// The protocol the other origin's server picked.
pub(super) enum AwayConn {
    /// HTTP/2: a stream per request.
    H2(Conn),
    /// HTTP/1.1: one request at a time on the socket.
    H1(Box<H1Conn>),
}

/// An HTTP/1.1 connection to another origin.
pub(super) struct H1Conn {
    io: Box<dyn Io>,
    reader: ResponseReader,
    buf: Box<[u8]>,
    _open: OpenGuard,
}

/// Sends `bytes` (an HTTP/1.1 request redline built) and reads the response
/// to its end; `capture`: what of it to keep (scenario runs). The caller drops
/// the connection when the response says it closes (`keep_alive` false).
pub(super) async fn h1_exchange(
    h: &mut H1Conn,
    bytes: &[u8],
    capture: Option<(bool, bool)>,
) -> Result<(Fetched, bool), Fail> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let io_fail = |e: std::io::Error| (ErrorKind::from_io(&e, false), io_message(&e));
    let head_request = bytes.starts_with(b"HEAD ");
    h.reader.reset();
    h.reader.want_location = true;
    h.reader.capture = capture.map(|(headers, body)| {
        Box::new(Capture {
            want_headers: headers,
            want_body: body,
            ..Capture::default()
        })
    });
    h.io.write_all(bytes).await.map_err(io_fail)?;
    h.io.flush().await.map_err(io_fail)?;
    let mut first_byte = None;
    // Each read makes progress or ends the response; the time-out bounds it.
    loop {
        let n = h.io.read(&mut h.buf).await.map_err(io_fail)?;
        if n == 0 {
            if h.reader.eof() {
                break;
            }
            return Err((
                ErrorKind::Closed,
                "connection closed before the response was complete".into(),
            ));
        }
        first_byte.get_or_insert_with(Instant::now);
        match h.reader.feed(&h.buf[..n], head_request) {
            Ok(Progress::Done { .. }) => break,
            Ok(Progress::NeedMore) => {}
            Err(m) => return Err((ErrorKind::Malformed(m.kind), Cow::Borrowed(m.message))),
        }
    }
    let fetched = Fetched {
        first_byte: first_byte.unwrap_or_else(Instant::now),
        status: h.reader.status,
        body_bytes: h.reader.body_bytes,
        server: None,
        location: h.reader.take_location(),
        capture: h.reader.capture.take(),
    };
    Ok((fetched, h.reader.keep_alive))
}

/// A request for another origin: its spec (encoded for the protocol the
/// server picks), and what reading the answer needs.
pub(super) struct Outgoing<'a> {
    /// The request.
    pub spec: &'a RequestSpec,
    /// `http` or `https` (`:scheme`).
    pub scheme: &'a str,
    /// Its time-out.
    pub timeout: Duration,
    /// What of the response to keep (headers, body).
    pub capture: Option<(bool, bool)>,
}

/// Sends `out` over the stream's [`Away`] connection: as HTTP/1.1 or as
/// HTTP/2, the server's pick; drops the connection when it may not carry
/// another request. `on_sent` runs when the request leaves.
/// `Err(Ok(fail))`: it failed before it was sent; `Err(Err(fail))` after.
/// `retry`: an HTTP/2 request the server refused unprocessed (GOAWAY,
/// REFUSED_STREAM) is sent once more (counted `retried`), after GOAWAY on a
/// new connection there (RFC 9113 §8.7); the time returned is that send's.
pub(super) async fn away_exchange(
    w: &Rc<WorkerState>,
    away: &mut Option<Away>,
    out: Outgoing<'_>,
    mut on_sent: impl FnMut(),
    mut retry: bool,
) -> Result<(Instant, Fetched), Result<Fail, Fail>> {
    let Outgoing {
        spec,
        scheme,
        timeout,
        capture,
    } = out;
    let mut first = true;
    // At most two turns: the second only for a refused request.
    for _ in 0..2 {
        let Some(a) = away.as_mut() else {
            return Err(Ok((ErrorKind::Other, "no connection to that host".into())));
        };
        let AwayConn::H2(conn) = &mut a.conn else {
            return away_h1(away, spec, timeout, capture, on_sent).await;
        };
        let req = Req::from_spec(spec, scheme).map_err(|e| Ok((ErrorKind::Other, e.into())))?;
        let want = Want {
            server: false,
            location: w.plan().follow.is_some(),
            capture,
        };
        let sent = Instant::now();
        let reply = send_when_ready(conn, &req, want, timeout)
            .await
            .map_err(|f| if first { Ok(f) } else { Err(f) })?;
        if first {
            on_sent();
            first = false;
        }
        let got = answer_by(sent + timeout, reply.refusable()).await;
        match got {
            Ok(f) => return Ok((sent, f)),
            Err(u) if u.unprocessed && retry => {
                retry = false;
                w.ledger.borrow_mut().count_retry();
                if conn.retiring() {
                    // A new connection there (`first` is false: a failed
                    // connect fails the request as sent).
                    let (key, origin) = (a.key.clone(), a.origin.clone());
                    *away = None;
                    away_conn(w, key, || Ok(origin), away).await.map_err(Err)?;
                }
            }
            Err(u) => return Err(Err(u.fail)),
        }
    }
    Err(Err(timed_out()))
}

/// [`away_exchange`] over an HTTP/1.1 connection.
async fn away_h1(
    away: &mut Option<Away>,
    spec: &RequestSpec,
    timeout: Duration,
    capture: Option<(bool, bool)>,
    mut on_sent: impl FnMut(),
) -> Result<(Instant, Fetched), Result<Fail, Fail>> {
    let Some(a) = away.as_mut() else {
        return Err(Ok((ErrorKind::Other, "no connection to that host".into())));
    };
    let r = match &mut a.conn {
        AwayConn::H2(_) => Err(Ok((ErrorKind::Other, "not an HTTP/1.1 connection".into()))),
        AwayConn::H1(h) => {
            let sent = Instant::now();
            on_sent();
            let h1 = spec.encode_h1(false);
            let r = tokio::time::timeout_at((sent + timeout).into(), h1_exchange(h, &h1, capture))
                .await
                .unwrap_or_else(|_| Err(timed_out()));
            match r {
                Ok((f, true)) => Ok((sent, f)),
                Ok((f, false)) => {
                    *away = None;
                    Ok((sent, f))
                }
                Err(e) => {
                    // Mid-response or broken: this socket carries nothing more.
                    *away = None;
                    Err(Err(e))
                }
            }
        }
    };
    r
}

/// `-L/--follow-redirects`: follows the redirect `first` (see the module
/// text). `own`: the stream's connection to the request's own origin, when
/// it has one (else that origin is reached through `away` too). Each hop
/// gets its own time-out; the final response is the request's.
pub(super) async fn follow(
    w: &Rc<WorkerState>,
    own_conn: Option<&Conn>,
    f: &crate::redirect::Follow,
    first: Fetched,
    away: &mut Option<Away>,
    mut req: Redirected<'_>,
) -> Result<Fetched, Fail> {
    use crate::redirect::{hop_spec, is_redirect, origin_key, resolve_location, Cookies};
    let own = req.own;
    let path = if req.orig.path.is_empty() {
        "/"
    } else {
        req.orig.path.as_str()
    };
    let mut base = url::Url::parse(&format!("{own}{path}")).map_err(|_| {
        (
            ErrorKind::BadRedirect,
            Cow::Borrowed("the redirected request's URL cannot be rebuilt"),
        )
    })?;
    let mut cur = first;
    let mut hops = 0u32;
    let mut was_get = false;
    while is_redirect(cur.status) {
        let Some(location) = cur.location.take() else {
            break;
        };
        if hops >= f.max {
            let msg = format!("more than {} redirects (--max-redirs)", f.max);
            return Err((ErrorKind::TooManyRedirects, Cow::Owned(msg)));
        }
        let to = resolve_location(&base, &location)
            .map_err(|m| (ErrorKind::BadRedirect, Cow::Borrowed(m)))?;
        let key = origin_key(&to);
        let same_origin = key == own;
        // A scenario's cookie jar takes the redirect's cookies and gives the
        // new host its own.
        let jar = req.jar.as_mut().and_then(|(s, r, vu)| {
            s.redirect_cookies(
                *r,
                vu,
                cur.capture.as_deref(),
                base.host_str().unwrap_or(""),
                to.host_str().unwrap_or(""),
            )
        });
        let cookies = match &jar {
            Some(j) => Cookies::Jar(j),
            None => Cookies::Given,
        };
        let (spec, get) = hop_spec(req.orig, cur.status, &to, same_origin, was_get, cookies);
        w.rec.borrow_mut().counters.redirects += 1;
        let deadline_after = req.timeout;
        // A hop the server refused unprocessed (GOAWAY, REFUSED_STREAM) is
        // sent once more (counted `retried`): on the stream's connection
        // unless it takes no new stream, else over a connection of the
        // stream's own there, as to another origin.
        let mut own_hop = own_conn.filter(|_| same_origin);
        let mut retry = true;
        cur = loop {
            if let Some(conn) = own_hop {
                let hop = Req::from_spec(&spec, to.scheme()).map_err(|_| {
                    (
                        ErrorKind::BadRedirect,
                        Cow::Borrowed("the redirected request cannot be rewritten"),
                    )
                })?;
                let sent = Instant::now();
                let want = Want {
                    server: false,
                    location: true,
                    capture: req.capture,
                };
                let answer = async {
                    let reply = send_when_ready(conn, &hop, want, deadline_after)
                        .await
                        .map_err(Unanswered::failed)?;
                    reply.refusable().await
                };
                let got = answer_by(sent + deadline_after, answer).await;
                match got {
                    Ok(f) => break f,
                    Err(u) if u.unprocessed && retry => {
                        retry = false;
                        w.ledger.borrow_mut().count_retry();
                        if conn.retiring() {
                            own_hop = None;
                        }
                        continue;
                    }
                    Err(u) => return Err(u.fail),
                }
            }
            let resolve = || {
                f.origin(&to).map_err(|e| {
                    let kind = if e.resolve {
                        ErrorKind::Resolve
                    } else {
                        ErrorKind::BadRedirect
                    };
                    (kind, Cow::Owned(e.message))
                })
            };
            away_conn(w, key.clone(), resolve, away).await?;
            let out = Outgoing {
                spec: &spec,
                scheme: to.scheme(),
                timeout: deadline_after,
                capture: req.capture,
            };
            match away_exchange(w, away, out, || {}, retry).await {
                Ok((_, f)) => break f,
                Err(Ok(e)) | Err(Err(e)) => return Err(e),
            }
        };
        hops += 1;
        was_get = get;
        base = to;
    }
    if let (Some((_, _, vu)), true) = (req.jar.as_mut(), hops > 0) {
        // The final response's cookies belong to the host it came from.
        vu.redirected_from = Some(base.host_str().unwrap_or("").to_ascii_lowercase());
    }
    Ok(cur)
}

/// Waits (at most `timeout`) for a stream on `conn` and submits `req` on it.
async fn send_when_ready(
    conn: &Conn,
    req: &super::Req,
    want: Want,
    timeout: Duration,
) -> Result<super::wire::Reply<super::Sess>, Fail> {
    let never = tokio::sync::Notify::new();
    match conn.ready(timeout, &never).await {
        Ok(()) => conn.send(req, want),
        Err(Waited::Failed(f)) => Err(f),
        Err(Waited::TimedOut | Waited::Stopped) => Err(timed_out()),
    }
}

/// A request being redirected: what it was sent as and where, and what a
/// hop needs of it.
pub(super) struct Redirected<'a> {
    /// The original request (hops are rewritten from its spec).
    pub orig: &'a RequestSpec,
    /// Its origin ([`crate::redirect::origin_key`]).
    pub own: &'a str,
    /// Each hop's `--timeout` (a scenario request's own).
    pub timeout: Duration,
    /// Scenario runs: what of each response to keep (headers, body).
    pub capture: Option<(bool, bool)>,
    /// Scenario runs: the request and the virtual user whose jar is used.
    pub jar: Option<(
        &'a crate::scenario::Scenario,
        usize,
        &'a mut crate::scenario::Vu,
    )>,
}

/// Makes sure the stream has a live connection to the origin `key` (made,
/// or made again with the `Origin` from `resolve`, when it has none there or
/// it died).
pub(super) async fn away_conn(
    w: &Rc<WorkerState>,
    key: String,
    resolve: impl FnOnce() -> Result<Arc<crate::redirect::Origin>, Fail>,
    away: &mut Option<Away>,
) -> Result<(), Fail> {
    if away
        .as_ref()
        .is_some_and(|a| a.key != key || a.ctx.dead.get() || a.dead())
    {
        *away = None;
    }
    if away.is_none() {
        let origin = resolve()?;
        let ctx = ConnCtx::new(0, None);
        let conn = match connect_to(w, &ctx, Some(&origin)).await {
            Ok(Connected::H2(sr)) => AwayConn::H2(sr),
            Ok(Connected::H1(io, open)) => AwayConn::H1(Box::new(H1Conn {
                io,
                reader: ResponseReader::new(),
                buf: vec![0u8; 16 * 1024].into_boxed_slice(),
                _open: open,
            })),
            Err(ConnectFail::Failed(k, m)) => return Err((k, m)),
            // The run is stopping: the request stays in flight until the
            // worker drops it (counted as in flight at the end).
            Err(ConnectFail::Stopped) => return std::future::pending().await,
        };
        *away = Some(Away {
            key,
            origin,
            conn,
            ctx,
        });
    }
    Ok(())
}
