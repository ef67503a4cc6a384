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
    ctx: Rc<ConnCtx>,
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
) -> Result<Fetched, Fail> {
    use crate::redirect::{hop_request, is_redirect, origin_key, resolve_location, Cookies};
    let plan = w.plan();
    let own = &plan.target.origin;
    let mut base = url::Url::parse(&format!("{own}{}", plan.target.path)).map_err(|_| {
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
        let same_origin = key == *own;
        let rewritten = hop_request(
            &plan.request,
            cur.status,
            &to,
            same_origin,
            was_get,
            Cookies::Given,
        )
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
            away_conn(w, f, &to, key, away).await?
        };
        let sent = Instant::now();
        let deadline = sent + plan.timeout;
        let hop = async {
            poll_fn(|cx| hop_sr.poll_ready(cx))
                .await
                .map_err(|e| classify(&e))?;
            let end_of_stream = tpl.body.is_empty();
            let (resp, tx) = hop_sr
                .send_request(tpl.request(), end_of_stream)
                .map_err(|e| classify(&e))?;
            let body = (!end_of_stream).then(|| tpl.body.clone());
            fetch(resp, tx, body, false, true).await
        };
        cur = tokio::time::timeout_at(deadline.into(), hop)
            .await
            .unwrap_or_else(|_| Err(timed_out()))?;
        hops += 1;
        was_get = get;
        base = to;
    }
    Ok(cur)
}

/// This stream's connection to the redirect origin `key` of `to`, made (or
/// made again) when it has none there or it died.
async fn away_conn<'a>(
    w: &Rc<W>,
    f: &crate::redirect::Follow,
    to: &url::Url,
    key: String,
    away: &'a mut Option<Away>,
) -> Result<&'a mut SendRequest<Bytes>, Fail> {
    if away
        .as_ref()
        .is_some_and(|a| a.key != key || a.ctx.dead.get())
    {
        *away = None;
    }
    if away.is_none() {
        let origin = f.origin(to).map_err(|e| {
            let kind = if e.resolve {
                ErrorKind::Resolve
            } else {
                ErrorKind::BadRedirect
            };
            (kind, Cow::Owned(e.message))
        })?;
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
