//! One request on one HTTP/2 stream: waiting for a stream slot, submitting
//! the request (the session sends its body under flow control), awaiting the
//! answer the connection task delivers, and recording it (with `-L`, its
//! redirects). A request the server refused unprocessed (GOAWAY naming a
//! lower last stream id, or REFUSED_STREAM) goes back to the ledger to be
//! sent again once (RFC 9113 §8.7), keeping its intended time; refused a
//! second time, it fails (`goaway` / `stream_reset`).

use super::errors::Fail;
use super::follow::{self, follow, Away};
pub(super) use super::wire::{Fetched, Unanswered, Waited};
use super::{Conn, WorkerState};
use crate::session::Want;
use redline_stats::{ErrorKind, Timing};
use std::borrow::Cow;
use std::rc::Rc;
use std::time::Instant;

/// Waits until the connection may open a stream, at most `--timeout` and not
/// past the run's stop: a server that allows no stream must not hold the run.
pub(super) async fn stream_ready(w: &WorkerState, conn: &Conn) -> Result<(), Waited> {
    if w.stopping() {
        return Err(Waited::Stopped);
    }
    conn.ready(w.plan().timeout, &w.stop_n).await
}

pub(super) fn no_stream() -> Cow<'static, str> {
    "no stream within --timeout: the server allowed no new HTTP/2 stream (SETTINGS_MAX_CONCURRENT_STREAMS)"
        .into()
}

/// Sends one request (held by the caller) and reads its response to the end;
/// with `-L` follows its redirects (see [`follow`]). `again`: it is a refused
/// request sent a second time (not counted `sent` again, not retried again).
/// Latency counts from `intended` (for a retry: its first intended time);
/// service, waiting and transfer from this attempt's send.
pub(super) async fn exchange(
    w: &Rc<WorkerState>,
    conn: &Conn,
    intended: Instant,
    again: bool,
    away: &mut Option<Away>,
) {
    let follow_on = w.plan().follow.as_deref();
    let want = Want {
        server: w.want_server.get(),
        location: follow_on.is_some(),
        capture: None,
    };
    let sent = Instant::now();
    let reply = match conn.send(&w.s.request, want) {
        Ok(r) => r,
        Err((k, m)) => return w.fail_held(k, m),
    };
    w.sent(again);
    let deadline = sent + w.plan().timeout;
    let r = answer_by(deadline, reply.refusable()).await;
    let r = match r {
        Ok(f) => Ok(f),
        Err(u) if u.unprocessed && !again => return w.refuse(intended, conn.retiring()),
        Err(u) => Err(u.fail),
    };
    let r = match (r, follow_on) {
        (Ok(f), Some(fo)) if crate::redirect::is_redirect(f.status) && f.location.is_some() => {
            let plan = w.plan();
            let req = follow::Redirected {
                orig: &plan.spec,
                own: &plan.target.origin,
                timeout: plan.timeout,
                capture: None,
                jar: None,
            };
            follow(w, Some(conn), fo, f, away, req).await
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

/// A request given up on: its stream is reset (CANCEL); the connection stays.
/// Waits for `answer` until `deadline`; past it, a time-out (which the
/// server did not refuse: not sent again).
pub(super) async fn answer_by(
    deadline: Instant,
    answer: impl std::future::Future<Output = Result<Fetched, Unanswered>>,
) -> Result<Fetched, Unanswered> {
    tokio::time::timeout_at(deadline.into(), answer)
        .await
        .unwrap_or_else(|_| Err(Unanswered::failed(timed_out())))
}

pub(super) fn timed_out() -> Fail {
    (
        ErrorKind::Timeout,
        "no complete response within --timeout".into(),
    )
}
