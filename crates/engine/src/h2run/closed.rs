//! The closed loop over HTTP/2: each connection slot runs `--streams`
//! stream tasks, each sending its next request as soon as its last ended;
//! `--stages` parks the streams above the level (see `set_level`). A request
//! the server refused unprocessed (GOAWAY, REFUSED_STREAM) waits in the
//! ledger; a stream takes it before new work, and a slot reconnecting after
//! GOAWAY takes the waiting ones first, so it goes out again on a new
//! connection with its original intended time.

use super::conn::connect;
use super::exchange::{exchange, no_stream, stream_ready, Waited};
use super::scenario;
use super::{set_level, Conn, ConnCtx, ConnectFail, Running, WorkerState};
use redline_stats::ErrorKind;
use std::rc::Rc;
use std::time::Instant;
use tokio::task::JoinSet;

// ---------------------------------------------------------------- closed loop

pub(super) fn start_closed(w: &Rc<WorkerState>) {
    let c = w.max_conns;
    let first = w.control.borrow_mut().first_level();
    if let Some(level) = first {
        set_level(w, level);
    }
    let mut holds = Vec::with_capacity(c as usize);
    match w.plan().requests_per_conn {
        Some(k) => {
            for ci in 0..c {
                let want = w.wanted(ci);
                holds.push(if want > 0 {
                    w.reserve_block(k, want)
                } else {
                    (None, 0)
                });
            }
        }
        None => {
            // Spread the first requests so every connection gets one before any
            // gets a second: `-n 5 -c 4 --streams 10` opens 4 connections.
            let b = w.ledger.borrow().budget();
            for ci in 0..c {
                let n = match b {
                    Some(b) => crate::pacer::share(b, c, ci).min(w.streams),
                    None => w.wanted(ci),
                };
                holds.push((None, w.take_n(n)));
            }
        }
    }
    for (ci, (quota, held)) in holds.into_iter().enumerate() {
        // With --stages a slot above the starting level waits for its rise.
        if held > 0 || w.staged {
            tokio::task::spawn_local(closed_conn(w.clone(), ci as u64, quota, held));
        }
    }
}

/// One closed-loop connection slot: connects, runs its streams, and reconnects
/// while there is work (after GOAWAY, a failure, or `--requests-per-conn`).
/// `held`: new requests taken for the next connection; `again`: refused
/// requests taken to be sent again on it (their intended times).
pub(super) async fn closed_conn(
    w: Rc<WorkerState>,
    ci: u64,
    mut quota: Option<u64>,
    mut held: u64,
) {
    let mut intended = w.start;
    let mut again: Vec<Instant> = Vec::new();
    let mut serial = 0;
    loop {
        if held == 0 && again.is_empty() {
            let want = w.wanted(ci);
            if want == 0 {
                // --stages: the level is below this connection; wait for a rise.
                if w.stopping() {
                    return;
                }
                tokio::select! {
                    _ = w.level_n.notified() => {}
                    _ = w.stop_n.notified() => {}
                }
                continue;
            }
            // Refused requests first (oldest first), then new ones.
            serial = w.next_serial();
            again = w.take_refused_n(want, serial);
            let rest = want - again.len() as u64;
            match w.plan().requests_per_conn {
                Some(k) if rest > 0 => (quota, held) = w.reserve_block(k, rest),
                Some(_) => (quota, held) = (Some(0), 0),
                None => held = w.take_n(rest),
            }
            if held == 0 && again.is_empty() {
                w.changed.notify_one();
                return;
            }
            intended = Instant::now();
        }
        if serial == 0 {
            serial = w.next_serial();
        }
        let ctx = ConnCtx::new(std::mem::take(&mut serial), quota);
        match connect(&w, &ctx).await {
            Err(ConnectFail::Stopped) => return, // held requests count as not sent
            Err(ConnectFail::Failed(kind, msg)) => {
                for _ in 0..held + again.len() as u64 {
                    w.fail_held(kind, msg.clone());
                }
                held = 0;
                again.clear();
                w.return_quota(&ctx);
                // A failure can be immediate (no socket, no port): let the rest run.
                tokio::task::yield_now().await;
            }
            Ok(conn) => {
                let mut set = JoinSet::new();
                let refused = again.len() as u64;
                for j in 0..w.streams {
                    let first = match again.get(j as usize) {
                        Some(&t) => Some((t, true)),
                        None => (j < refused + held).then_some((intended, false)),
                    };
                    let slot = ci * w.streams + j;
                    set.spawn_local(closed_stream(
                        w.clone(),
                        ctx.clone(),
                        conn.clone(),
                        first,
                        slot,
                    ));
                }
                drop(conn);
                held = 0;
                again.clear();
                while set.join_next().await.is_some() {}
                w.return_quota(&ctx);
            }
        }
        quota = None;
        if w.stopping() {
            return;
        }
    }
}

pub(super) async fn closed_stream(
    w: Rc<WorkerState>,
    ctx: Rc<ConnCtx>,
    conn: Conn,
    mut first: Option<(Instant, bool)>,
    slot: u64,
) {
    let mut away = None;
    let mut vu = w.sc.as_ref().map(|sc| sc.take_vu());
    let ci = slot / w.streams;
    let mut running = Some(Running::new(ctx.clone()));
    loop {
        if first.is_none() && w.parked(slot) {
            // --stages: above the level this stream parks. The connection
            // closes once none of its streams runs and none is wanted (or it
            // may take no more requests); a rise wakes the stream again.
            drop(running.take());
            loop {
                if w.stopping() || ctx.dead.get() {
                    return;
                }
                if !w.parked(slot) {
                    running = Some(Running::new(ctx.clone()));
                    break;
                }
                if ctx.running.get() == 0 && (w.wanted(ci) == 0 || ctx.quota.get() == Some(0)) {
                    ctx.closed.notify_waiters();
                    return;
                }
                tokio::select! {
                    _ = w.level_n.notified() => {}
                    _ = ctx.closed.notified() => {}
                    _ = w.stop_n.notified() => {}
                }
            }
        }
        let free_at = Instant::now();
        let ready = stream_ready(&w, &conn).await;
        let (intended, again) = match (first.take(), ready) {
            (Some(_), Err(Waited::Failed((k, m)))) => return w.fail_held(k, m),
            (Some(_), Err(Waited::TimedOut)) => {
                return w.fail_held(ErrorKind::Timeout, no_stream())
            }
            (Some(_), Err(Waited::Stopped)) => return, // held: not sent
            (Some(t), Ok(())) => t,
            // The connection is gone, allows no stream or the run stops:
            // nothing was taken; the connection is replaced when its streams end.
            (None, Err(_)) => return,
            // A refused request waiting to be sent again goes before new work.
            (None, Ok(())) => match w.take_refused_for(&ctx) {
                Some(t) => (t, true),
                None if w.take_for(&ctx) => (free_at, false),
                None => return,
            },
        };
        if w.stopping() {
            return; // held: not sent
        }
        match vu.as_mut() {
            None => exchange(&w, &conn, intended, again, &mut away).await,
            Some(user) => {
                let think =
                    scenario::exchange(&w, &conn, &ctx, intended, again, user, &mut away).await;
                // The virtual user thinks; its next request is due when it is done.
                if let Some(d) = think.filter(|d| !d.is_zero()) {
                    if w.stopping() {
                        return;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(d) => {}
                        _ = w.stop_n.notified() => return,
                    }
                }
            }
        }
    }
}
