//! The open loop over HTTP/2: the pacer releases intended send times onto the
//! ledger's queue, idle streams take them, and connections open (up to the
//! cap) only while the queue is longer than what idle streams can take.
//! A request refused unprocessed (GOAWAY, REFUSED_STREAM) waits in the
//! ledger and is taken before the queue, with its original intended time;
//! a parked journey (`h2run/scenario.rs`) is taken before both.

use super::conn::connect;
use super::exchange::{exchange, no_stream, stream_ready, Waited};
use super::scenario;
use super::{Conn, ConnCtx, ConnectFail, WorkerState};
use crate::timer::{sleep_until, FineTimer};
use redline_stats::ErrorKind;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// The pacer wakes at most once per this much time and then releases every
/// send that is due: at 20,000 req/s a wake-up per send (a context switch
/// and a timer re-arm each) was most of the worker's CPU. The lag this adds
/// (at most this) is measured as scheduler lag, and latency counts from the
/// intended time either way.
pub(crate) const PACE_QUANTUM: Duration = Duration::from_micros(200);

// ------------------------------------------------------------------ open loop

/// Open loop: releases requests at their intended times onto the queue.
pub(super) async fn pace(w: Rc<WorkerState>) {
    let timer = FineTimer::new();
    let mut burst = 0u32;
    let mut last_wake = Instant::now();
    loop {
        // (Once stopping, the ledger counted the sends due before the stop.)
        let next = w.ledger.borrow().next_due();
        let Some(t) = next.filter(|_| !w.stopping()) else {
            break;
        };
        let now = Instant::now();
        if now < t {
            burst = 0;
            let wake = t.max(last_wake + PACE_QUANTUM);
            tokio::select! {
                _ = sleep_until(timer.as_ref(), wake) => {}
                _ = w.stop_n.notified() => {}
            }
            last_wake = Instant::now();
            continue; // check the stop again before releasing
        }
        // Behind schedule: release what is due, but let the streams run.
        burst += 1;
        if burst.is_multiple_of(64) {
            tokio::task::yield_now().await;
            continue;
        }
        {
            let mut ledger = w.ledger.borrow_mut();
            let Some(t) = ledger.release_due(now) else {
                continue;
            };
            let mut rec = w.rec.borrow_mut();
            rec.released(now.saturating_duration_since(t));
            if ledger.pending() as u64 >= w.idle.get() {
                rec.counters.waited_for_connection += 1;
            }
            ledger.enqueue(t);
        }
        w.work.notify_one();
        maybe_connect(&w);
    }
    w.changed.notify_one();
}

/// Open loop: opens connections while the queue is longer than what idle
/// streams and connections being set up will take, up to the cap.
pub(super) fn maybe_connect(w: &Rc<WorkerState>) {
    // (A request refused after GOAWAY waits for a connection newer than
    // the refusal: one is opened for it even when older ones idle.)
    // Parked journeys wait likewise (see `h2run/scenario.rs`).
    let wanted = |w: &WorkerState| {
        let ledger = w.ledger.borrow();
        let (parked, parked_new) =
            w.sc.as_ref()
                .map_or((0, 0), |sc| sc.parked(w.serials.get()));
        ledger.pending() as u64 + ledger.refused() as u64 + parked
            > w.idle.get() + w.connecting.get() * w.streams
            || ledger.refused_for_new(w.serials.get()) as u64 + parked_new > 0
    };
    while !w.stopping() && wanted(w) && w.conns_live.get() < w.max_conns {
        w.conns_live.set(w.conns_live.get() + 1);
        w.connecting.set(w.connecting.get() + 1);
        let ctx = ConnCtx::new(w.next_serial(), w.plan().requests_per_conn);
        tokio::task::spawn_local(open_conn(w.clone(), ctx));
    }
}

pub(super) async fn open_conn(w: Rc<WorkerState>, ctx: Rc<ConnCtx>) {
    let r = connect(&w, &ctx).await;
    w.connecting.set(w.connecting.get() - 1);
    match r {
        Err(ConnectFail::Stopped) => {}
        Err(ConnectFail::Failed(kind, msg)) => {
            // The connect was for the oldest waiting request: it fails with it.
            let failed = w.ledger.borrow_mut().fail_pending();
            if failed {
                w.failed(kind, msg);
                if let Some(sc) = w.sc.as_ref() {
                    sc.journey_failed_to_start();
                }
            } else if w.ledger.borrow_mut().take_refused(ctx.serial).is_some() {
                // It was for a refused request waiting for a new connection.
                w.fail_held(kind, msg);
            } else if let Some(sc) = w.sc.as_ref() {
                // Or for a parked journey: it fails with its step.
                sc.fail_parked(&w, ctx.serial, kind, msg);
            }
            tokio::task::yield_now().await;
        }
        Ok(conn) => {
            let mut set = JoinSet::new();
            for _ in 0..w.streams {
                set.spawn_local(open_stream(w.clone(), ctx.clone(), conn.clone()));
            }
            drop(conn);
            while set.join_next().await.is_some() {}
        }
    }
    w.conns_live.set(w.conns_live.get() - 1);
    maybe_connect(&w);
}

pub(super) async fn open_stream(w: Rc<WorkerState>, ctx: Rc<ConnCtx>, conn: Conn) {
    let mut away = None;
    let mut vu = w.sc.as_ref().map(|sc| sc.take_vu());
    loop {
        if ctx.quota.get() == Some(0) {
            return; // --requests-per-conn reached: the connection closes
        }
        let (t, again) = loop {
            // A connection that takes no new stream (after GOAWAY) takes no
            // work: its streams end and it is replaced; a wake-up meant for
            // work goes on to another stream.
            if w.stopping() || ctx.dead.get() || conn.retiring() {
                let ledger = w.ledger.borrow();
                let parked = w.sc.as_ref().map_or(0, |sc| sc.parked(0).0);
                if ledger.pending() + ledger.refused() > 0 || parked > 0 {
                    w.work.notify_one();
                }
                return;
            }
            // A parked journey first: its step is held already.
            let parked =
                w.sc.as_ref()
                    .and_then(|sc| sc.take_parked(ctx.serial, w.stopping()));
            if let (Some(p), Some(user)) = (parked, vu.as_mut()) {
                if let Some(q) = ctx.quota.get() {
                    ctx.quota.set(Some(q.saturating_sub(1)));
                }
                scenario::resume(&w, &conn, &ctx, p, user, &mut away).await;
                continue;
            }
            let next = {
                let mut ledger = w.ledger.borrow_mut();
                match ledger.take_refused(ctx.serial) {
                    Some(t) => Some((t, true)),
                    None => ledger.dequeue().map(|t| (t, false)),
                }
            };
            if let Some(next) = next {
                break next;
            }
            w.idle.set(w.idle.get() + 1);
            tokio::select! {
                _ = w.work.notified() => {}
                _ = ctx.closed.notified() => {}
                _ = w.stop_n.notified() => {}
            }
            w.idle.set(w.idle.get() - 1);
        };
        if let Some(q) = ctx.quota.get() {
            ctx.quota.set(Some(q - 1));
        }
        if let Some(user) = vu.as_ref() {
            user.pending_step(Some(t)); // an arrival waiting for a stream
        }
        match stream_ready(&w, &conn).await {
            Ok(()) => {}
            Err(Waited::Stopped) => return, // held: not sent
            Err(e) => {
                let (k, m) = match e {
                    Waited::Failed(f) => f,
                    _ => (ErrorKind::Timeout, no_stream()),
                };
                w.fail_held(k, m);
                // A connection that went away (or allows no stream) may leave
                // queued work without a stream.
                maybe_connect(&w);
                return;
            }
        }
        if w.stopping() {
            return;
        }
        match vu.as_mut() {
            None => exchange(&w, &conn, t, again, &mut away).await,
            Some(user) => scenario::arrival(&w, &conn, &ctx, t, again, user, &mut away).await,
        }
    }
}
