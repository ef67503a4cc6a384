//! One request on one HTTP/2 stream: waiting for a stream slot, sending the
//! request (and its body under flow control), reading the answer to the end
//! and recording it (with `-L`, its redirects).

use super::errors::{classify, Fail};
use super::follow::{self, follow, Away};
use super::WorkerState;
use crate::h1::Capture;
use bytes::Bytes;
use h2::client::SendRequest;
use redline_stats::{ErrorKind, Timing};
use std::borrow::Cow;
use std::future::poll_fn;
use std::rc::Rc;
use std::time::Instant;

/// Why a stream could not be opened.
pub(super) enum Waited {
    /// The connection failed.
    Failed(h2::Error),
    /// No stream within `--timeout` (a server whose
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` is 0, or whose streams never end).
    TimedOut,
    /// The run is stopping.
    Stopped,
}

/// Waits until the connection may open a stream, at most `--timeout` and not
/// past the run's stop: a server that allows no stream must not hold the run.
pub(super) async fn stream_ready(
    w: &WorkerState,
    sr: &mut SendRequest<Bytes>,
) -> Result<(), Waited> {
    if w.stopping() {
        return Err(Waited::Stopped);
    }
    // Nearly always ready at once: then no timer or notification is set up.
    if let std::task::Poll::Ready(r) = poll_fn(|cx| std::task::Poll::Ready(sr.poll_ready(cx))).await
    {
        return r.map_err(Waited::Failed);
    }
    tokio::select! {
        r = poll_fn(|cx| sr.poll_ready(cx)) => r.map_err(Waited::Failed),
        _ = tokio::time::sleep(w.plan().timeout) => Err(Waited::TimedOut),
        _ = w.stop_n.notified() => Err(Waited::Stopped),
    }
}

pub(super) fn no_stream() -> Cow<'static, str> {
    "no stream within --timeout: the server allowed no new HTTP/2 stream (SETTINGS_MAX_CONCURRENT_STREAMS)"
        .into()
}

/// Sends one request (held by the caller) and reads its response to the end;
/// with `-L` follows its redirects (see [`follow`]).
pub(super) async fn exchange(
    w: &Rc<WorkerState>,
    sr: &mut SendRequest<Bytes>,
    intended: Instant,
    away: &mut Option<Away>,
) {
    let tpl = &w.s.template;
    let end_of_stream = tpl.body.is_empty();
    let sent = Instant::now();
    let (resp, tx) = match sr.send_request(tpl.request(), end_of_stream) {
        Ok(x) => x,
        Err(e) => {
            let (k, m) = classify(&e);
            return w.fail_held(k, m);
        }
    };
    w.sent();
    let body = (!end_of_stream).then(|| tpl.body.clone());
    let deadline = sent + w.plan().timeout;
    let follow_on = w.plan().follow.as_deref();
    let r = tokio::time::timeout_at(
        deadline.into(),
        fetch(
            resp,
            tx,
            body,
            w.want_server.get(),
            follow_on.is_some(),
            None,
        ),
    )
    .await
    .unwrap_or_else(|_| Err(timed_out()));
    let r = match (r, follow_on) {
        (Ok(f), Some(fo)) if crate::redirect::is_redirect(f.status) && f.location.is_some() => {
            let plan = w.plan();
            let req = follow::Redirected {
                orig: &plan.request,
                own: &plan.target.origin,
                timeout: plan.timeout,
                capture: None,
                jar: None,
            };
            follow(w, Some(sr), fo, f, away, req).await
        }
        (r, _) => r,
    };
    let now = Instant::now();
    match r {
        Ok(f) => {
            let wire = w.unattributed.replace(0);
            let mut rec = w.rec.borrow_mut();
            if let Some(s) = f.server {
                rec.server_software = Some(s);
                w.want_server.set(false);
            }
            rec.bytes_read(wire);
            let t = Timing {
                intended,
                sent,
                first_byte: f.first_byte,
                done: now,
            };
            rec.response(&t, f.status, wire, f.body_bytes);
            drop(rec);
            w.ledger.borrow_mut().finish_completed();
            w.ended(now);
        }
        Err(e) => w.fail_in_flight(e.0, e.1),
    }
}

/// Dropping a stream's handles resets it (CANCEL); the connection stays.
pub(super) fn timed_out() -> Fail {
    (
        ErrorKind::Timeout,
        "no complete response within --timeout".into(),
    )
}

pub(super) struct Fetched {
    pub(super) first_byte: Instant,
    pub(super) status: u16,
    pub(super) body_bytes: u64,
    pub(super) server: Option<String>,
    /// The `Location` of a 3xx (with `-L`).
    pub(super) location: Option<String>,
    /// Scenario runs: the response's headers and body, as asked.
    pub(super) capture: Option<Box<Capture>>,
}

pub(super) async fn fetch(
    resp: h2::client::ResponseFuture,
    mut tx: h2::SendStream<Bytes>,
    body: Option<Bytes>,
    want_server: bool,
    want_location: bool,
    want_capture: Option<(bool, bool)>,
) -> Result<Fetched, Fail> {
    if let Some(mut data) = body {
        // Flow control: send what the peer's window allows, as it opens.
        while !data.is_empty() {
            tx.reserve_capacity(data.len());
            let cap = match poll_fn(|cx| tx.poll_capacity(cx)).await {
                Some(Ok(n)) => n,
                Some(Err(e)) => return Err(classify(&e)),
                None => {
                    return Err((
                        ErrorKind::Closed,
                        "stream closed while sending the body".into(),
                    ))
                }
            };
            if cap == 0 {
                continue;
            }
            let chunk = data.split_to(cap.min(data.len()));
            tx.send_data(chunk, data.is_empty())
                .map_err(|e| classify(&e))?;
        }
    }
    let resp = resp.await.map_err(|e| classify(&e))?;
    let first_byte = Instant::now();
    let status = resp.status().as_u16();
    let server = if want_server {
        resp.headers().get(http::header::SERVER).map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .chars()
                .take(200)
                .collect()
        })
    } else {
        None
    };
    let location = if want_location && (300..400).contains(&status) {
        resp.headers()
            .get(http::header::LOCATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    } else {
        None
    };
    // Scenario runs: what the checks, extractions and cookie jar read
    // (headers; the body up to `h1::MAX_CAPTURE`, as over HTTP/1).
    let mut capture = want_capture.map(|(headers, body)| {
        let mut c = Box::new(Capture {
            want_headers: headers,
            want_body: body,
            ..Capture::default()
        });
        if headers {
            for (k, v) in resp.headers() {
                c.headers.push((
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                ));
            }
        }
        c
    });
    let mut rx = resp.into_body();
    let mut body_bytes = 0u64;
    while let Some(chunk) = rx.data().await {
        let chunk = chunk.map_err(|e| classify(&e))?;
        body_bytes += chunk.len() as u64;
        if let Some(c) = capture.as_deref_mut().filter(|c| c.want_body) {
            let room = crate::h1::MAX_CAPTURE.saturating_sub(c.body.len());
            c.truncated |= chunk.len() > room;
            c.body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        let _ = rx.flow_control().release_capacity(chunk.len());
    }
    rx.trailers().await.map_err(|e| classify(&e))?;
    Ok(Fetched {
        first_byte,
        status,
        body_bytes,
        server,
        location,
        capture,
    })
}
