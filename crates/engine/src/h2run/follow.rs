//! `-L/--follow-redirects` over HTTP/2: the HTTP/1 worker's rules
//! ([`crate::redirect`]: curl's method rules, credentials only to the original
//! origin, `--max-redirs`), each hop's HTTP/1 bytes from
//! [`crate::redirect::hop_request`] turned into HTTP/2 by `to_h2`; a hop on
//! the run's origin is a new stream on the stream's own connection, a hop to
//! another origin goes over the stream's [`Away`] connection there.

use super::{
    classify, connect_to, fetch, timed_out, to_h2, ConnCtx, ConnectFail, Fail, Fetched, W,
};
use bytes::Bytes;
use h2::client::SendRequest;
use redline_stats::ErrorKind;
use std::borrow::Cow;
use std::future::poll_fn;
use std::rc::Rc;
use std::time::Instant;

/// A connection a stream keeps to the origin its last redirect led to
/// (`-L`), reused while later redirects lead there too.
pub(super) struct Away {
    key: String,
    sr: SendRequest<Bytes>,
    pub(super) ctx: Rc<ConnCtx>,
}

/// `-L/--follow-redirects`: follows the redirect `first` with the HTTP/1
/// worker's rules ([`crate::redirect`]: curl's method rules, credentials only
/// to the original origin, `--max-redirs`). A hop on the run's origin is a
/// new stream on the same connection; a hop to another origin goes over a
/// connection of this stream's to that origin ([`Away`], HTTP/2 over TLS for
/// https, prior knowledge for http), made on first use. Each hop gets its own
/// `--timeout`; the final response is the request's.
pub(super) async fn follow(
    w: &Rc<W>,
    sr: &mut SendRequest<Bytes>,
    f: &crate::redirect::Follow,
    first: Fetched,
    away: &mut Option<Away>,
    mut req: Redirected<'_>,
) -> Result<Fetched, Fail> {
    use crate::redirect::{hop_request, is_redirect, origin_key, resolve_location, Cookies};
    let own = req.own;
    let path = crate::redirect::request_path(req.orig).unwrap_or("/");
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
        let rewritten = hop_request(req.orig, cur.status, &to, same_origin, was_get, cookies)
            .and_then(|(bytes, get)| {
                to_h2(&bytes, to.scheme(), to.host_str().unwrap_or(""))
                    .ok()
                    .map(|t| (t, get))
            });
        let Some((tpl, get)) = rewritten else {
            return Err((
                ErrorKind::BadRedirect,
                "the redirected request cannot be rewritten".into(),
            ));
        };
        w.rec.borrow_mut().counters.redirects += 1;
        let hop_sr = if same_origin {
            &mut *sr
        } else {
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
            away_conn(w, key, resolve, away).await?
        };
        let sent = Instant::now();
        let deadline = sent + req.timeout;
        let capture = req.capture;
        let hop = async {
            poll_fn(|cx| hop_sr.poll_ready(cx))
                .await
                .map_err(|e| classify(&e))?;
            let end_of_stream = tpl.body.is_empty();
            let (resp, tx) = hop_sr
                .send_request(tpl.request(), end_of_stream)
                .map_err(|e| classify(&e))?;
            let body = (!end_of_stream).then(|| tpl.body.clone());
            fetch(resp, tx, body, false, true, capture).await
        };
        cur = tokio::time::timeout_at(deadline.into(), hop)
            .await
            .unwrap_or_else(|_| Err(timed_out()))?;
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

/// A request being redirected: what it was sent as and where, and what a
/// hop needs of it.
pub(super) struct Redirected<'a> {
    /// The original request's HTTP/1 bytes (hops are rewritten from them).
    pub orig: &'a [u8],
    /// Its origin ([`crate::redirect::origin_key`]).
    pub own: &'a str,
    /// Each hop's `--timeout` (a scenario request's own).
    pub timeout: std::time::Duration,
    /// Scenario runs: what of each response to keep (headers, body).
    pub capture: Option<(bool, bool)>,
    /// Scenario runs: the request and the virtual user whose jar is used.
    pub jar: Option<(
        &'a crate::scenario::Scenario,
        usize,
        &'a mut crate::scenario::Vu,
    )>,
}

/// This stream's connection to the origin `key` (a redirect's, or a
/// scenario host other than the run's), made (or made again, with the
/// `Origin` from `resolve`) when it has none there or it died.
pub(super) async fn away_conn<'a>(
    w: &Rc<W>,
    key: String,
    resolve: impl FnOnce() -> Result<std::sync::Arc<crate::redirect::Origin>, Fail>,
    away: &'a mut Option<Away>,
) -> Result<&'a mut SendRequest<Bytes>, Fail> {
    if away
        .as_ref()
        .is_some_and(|a| a.key != key || a.ctx.dead.get())
    {
        *away = None;
    }
    if away.is_none() {
        let origin = resolve()?;
        let ctx = ConnCtx::new(None);
        let sr = match connect_to(w, &ctx, Some(&origin)).await {
            Ok(sr) => sr,
            Err(ConnectFail::Failed(k, m)) => return Err((k, m)),
            // The run is stopping: the request stays in flight until the
            // worker drops it (counted as in flight at the end).
            Err(ConnectFail::Stopped) => return std::future::pending().await,
        };
        *away = Some(Away { key, sr, ctx });
    }
    match away.as_mut() {
        Some(a) => Ok(&mut a.sr),
        None => Err((ErrorKind::Other, "no connection for the redirect".into())),
    }
}
