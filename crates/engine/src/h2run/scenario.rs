//! `--scenario` over HTTP/2: a virtual user per stream, driven by the same
//! [`Scenario`] calls as the HTTP/1 worker's (`choose`, `prepare`/`wire`,
//! `prepare_capture`, `on_response`, `redirect_cookies`), so sessions,
//! cookies, extraction, checks, CSV rows and think times mean the same. Each
//! request's HTTP/1 bytes become HTTP/2 by `to_h2`; a request to the run's
//! own host is a stream on the stream's connection, one to another host of
//! the scenario goes over the stream's [`Away`] connection there (HTTP/2:
//! TLS with ALPN `h2` for https, prior knowledge for http).
//!
//! Virtual users outlive their stream task (a connection replaced after
//! GOAWAY keeps its users' cookies and session steps): a stream takes one
//! from the worker's pool and gives it back when it ends. Their ids are the
//! worker's index plus multiples of the worker count, so no two workers
//! share one (data rows per user stay distinct).

use super::errors::{classify, Fail};
use super::exchange::{fetch, timed_out};
use super::follow::{away_conn, away_exchange, follow, Away, Outgoing, Redirected};
use super::{to_h2, ConnCtx, WorkerState};
use crate::h1::Capture;
use crate::scenario::{Scenario, Vu};
use bytes::Bytes;
use h2::client::SendRequest;
use redline_stats::rng::SplitMix64;
use redline_stats::{ErrorKind, RequestStats, Timing};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A worker's scenario state: the per-request numbers, the request choice
/// counters, and the virtual users not in a stream now.
pub(super) struct ScWorker {
    s: Arc<Scenario>,
    stats: RefCell<Vec<RequestStats>>,
    pick: RefCell<Pick>,
    /// Data rows advance by the worker count (as the HTTP/1 worker's).
    stride: u64,
    pool: RefCell<Vec<Vu>>,
    next_id: Cell<u64>,
    closed_loop: bool,
}

struct Pick {
    rr: u64,
    rows: u64,
    rng: SplitMix64,
}

impl ScWorker {
    /// Worker `index` of `threads`.
    pub(super) fn new(
        s: Arc<Scenario>,
        index: usize,
        threads: usize,
        seed: u64,
        closed_loop: bool,
    ) -> ScWorker {
        ScWorker {
            stats: RefCell::new(s.new_stats()),
            pick: RefCell::new(Pick {
                rr: index as u64,
                rows: index as u64,
                rng: SplitMix64(seed ^ (index as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D)),
            }),
            stride: threads.max(1) as u64,
            pool: RefCell::new(Vec::new()),
            next_id: Cell::new(index as u64),
            closed_loop,
            s,
        }
    }

    /// A virtual user for a stream: one that waits in the pool, or a new one.
    pub(super) fn take_vu(self: &Rc<Self>) -> VuSlot {
        let vu = self.pool.borrow_mut().pop().unwrap_or_else(|| {
            let id = self.next_id.get();
            self.next_id.set(id + self.stride);
            self.s.new_vu(id)
        });
        VuSlot {
            sc: self.clone(),
            vu: Some(vu),
        }
    }

    /// The per-request numbers (at the end of the run).
    pub(super) fn take_stats(&self) -> Vec<RequestStats> {
        std::mem::take(&mut *self.stats.borrow_mut())
    }
}

/// A stream's virtual user, given back to the pool when the stream ends.
pub(super) struct VuSlot {
    sc: Rc<ScWorker>,
    vu: Option<Vu>,
}

impl Drop for VuSlot {
    fn drop(&mut self) {
        if let Some(mut vu) = self.vu.take() {
            // A request chosen but never sent is chosen again next time.
            vu.redirected_from = None;
            self.sc.pool.borrow_mut().push(vu);
        }
    }
}

/// Sends the virtual user's next request (held by the caller) and reads the
/// answer; with `-L` follows its redirects with the user's cookie jar.
/// Returns the think time owed before the next one (closed loop).
pub(super) async fn exchange(
    w: &Rc<WorkerState>,
    sr: &mut SendRequest<Bytes>,
    ctx: &ConnCtx,
    intended: Instant,
    slot: &mut VuSlot,
    away: &mut Option<Away>,
) -> Option<Duration> {
    let sc = slot.sc.clone();
    let vu = slot.vu.as_mut()?;
    let s: &Scenario = &sc.s;
    let r = match vu.chosen {
        Some(r) => r,
        None => {
            let mut p = sc.pick.borrow_mut();
            let Pick { rr, rows, rng } = &mut *p;
            let r = s.choose(vu, rr, rows, sc.stride, rng);
            vu.chosen = Some(r);
            r
        }
    };
    let q = &s.requests[r];
    let t = &s.targets[q.target];
    let plan = w.plan();
    let own = t.origin == plan.target.origin;
    let result = send(w, sr, s, r, vu, own, away).await;
    // The connection this request went over was made for it: its connect time.
    let made = match (own, away.as_ref()) {
        (true, _) => ctx.connect_took.take(),
        (false, Some(a)) => a.ctx.connect_took.take(),
        (false, None) => None,
    };
    if let Some(d) = made {
        sc.stats.borrow_mut()[r].connect.record(d);
    }
    vu.chosen = None;
    match result {
        Err(Unsent(kind, msg)) => {
            sc.stats.borrow_mut()[r].errors += 1;
            w.fail_held(kind, msg);
        }
        Ok((sent, Err((kind, msg)))) => {
            let _ = sent;
            sc.stats.borrow_mut()[r].errors += 1;
            w.fail_in_flight(kind, msg);
        }
        Ok((sent, Ok(f))) => {
            let now = Instant::now();
            let wire = w.unattributed.replace(0);
            let t = Timing {
                intended,
                sent,
                first_byte: f.first_byte,
                done: now,
            };
            {
                let mut rec = w.rec.borrow_mut();
                if let Some(sv) = f.server.clone() {
                    rec.server_software = Some(sv);
                    w.want_server.set(false);
                }
                rec.bytes_read(wire);
                rec.response(&t, f.status, wire, f.body_bytes);
            }
            let mut stats = sc.stats.borrow_mut();
            let st = &mut stats[r];
            st.completed += 1;
            if f.status >= 400 {
                st.bad_status += 1;
            }
            let latency = now.saturating_duration_since(intended);
            st.latency.record(latency);
            st.waiting
                .record(f.first_byte.saturating_duration_since(sent));
            st.transfer
                .record(now.saturating_duration_since(f.first_byte));
            s.on_response(r, vu, f.status, latency, f.capture.as_deref(), st);
            drop(stats);
            w.ledger.borrow_mut().finish_completed();
            w.ended(now);
        }
    }
    if !sc.closed_loop {
        return None;
    }
    let think = q.think?;
    let d = think.sample(&mut sc.pick.borrow_mut().rng);
    Some(d)
}

/// A request that failed before it was sent (still held).
struct Unsent(ErrorKind, Cow<'static, str>);

/// Sends request `r` and reads its answer (and its redirects): when it was
/// sent and how it ended, or why it could not be sent.
async fn send(
    w: &Rc<WorkerState>,
    sr: &mut SendRequest<Bytes>,
    s: &Scenario,
    r: usize,
    vu: &mut Vu,
    own: bool,
    away: &mut Option<Away>,
) -> Result<(Instant, Result<super::exchange::Fetched, Fail>), Unsent> {
    let q = &s.requests[r];
    let t = &s.targets[q.target];
    s.prepare(r, vu, false);
    let scheme = if t.tls.is_some() { "https" } else { "http" };
    let mut cap = Capture::default();
    s.prepare_capture(r, &mut cap);
    let want = Some((cap.want_headers, cap.want_body));
    let follow_on = w.plan().follow.as_deref();
    let counted_sent = || {
        w.sent();
        if let Some(sc) = w.sc.as_ref() {
            sc.stats.borrow_mut()[r].sent += 1;
        }
    };
    let (sent, got) = if own {
        let tpl = to_h2(s.wire(r, vu, false), scheme, &t.host_header)
            .map_err(|e| Unsent(ErrorKind::Other, Cow::Owned(e)))?;
        let end_of_stream = tpl.body.is_empty();
        let sent = Instant::now();
        let (resp, tx) = sr.send_request(tpl.request(), end_of_stream).map_err(|e| {
            let (k, m) = classify(&e);
            Unsent(k, m)
        })?;
        counted_sent();
        let body = (!end_of_stream).then(|| tpl.body.clone());
        let got = tokio::time::timeout_at(
            (sent + q.timeout).into(),
            fetch(
                resp,
                tx,
                body,
                w.want_server.get(),
                follow_on.is_some(),
                want,
            ),
        )
        .await
        .unwrap_or_else(|_| Err(timed_out()));
        (sent, got)
    } else {
        // Another host of the scenario: this stream's connection there, in
        // the protocol that server picked.
        let resolve = || -> Result<Arc<crate::redirect::Origin>, Fail> {
            Ok(Arc::new(crate::redirect::Origin {
                key: t.origin.clone(),
                host_header: t.host_header.clone(),
                addr: t.addr,
                tls: t.tls.clone(),
            }))
        };
        away_conn(w, t.origin.clone(), resolve, away)
            .await
            .map_err(|(k, m)| Unsent(k, m))?;
        let host = t.host_header.clone();
        let out = Outgoing {
            h1: s.wire(r, vu, false),
            scheme,
            host: &host,
            timeout: q.timeout,
            capture: want,
        };
        let r = away_exchange(w, away, out, counted_sent).await;
        match r {
            Ok((sent, f)) => (sent, Ok(f)),
            Err(Ok((k, m))) => return Err(Unsent(k, m)),
            Err(Err(e)) => (Instant::now(), Err(e)),
        }
    };
    let got = match (got, follow_on) {
        (Ok(f), Some(fo)) if crate::redirect::is_redirect(f.status) && f.location.is_some() => {
            let orig = s.wire(r, vu, false).to_vec();
            let req = Redirected {
                orig: &orig,
                own: &t.origin,
                timeout: q.timeout,
                capture: want,
                jar: Some((s, r, vu)),
            };
            follow(w, own.then_some(sr), fo, f, away, req).await
        }
        (got, _) => got,
    };
    Ok((sent, got))
}
