//! One fetch of the loader: queueing a reference, the headers it sends,
//! and fetching it over a pooled HTTP/1.1 connection, a new connection, or
//! a stream of the origin's HTTP/2 or HTTP/3 connection; an `Alt-Svc: h3`
//! alternative races TCP and falls back to it, as Chromium's does (`race`).

use super::*;
use crate::h2::Multiplexed;

/// Queues what discovery found in entry `idx` (at iframe depth `depth`).
pub(super) fn enqueue(
    found: Vec<Found>,
    idx: usize,
    depth: u8,
    queue: &mut VecDeque<Job>,
    seen: &mut HashSet<String>,
    truncated: &mut bool,
    opts: &LoadOpts,
) {
    for f in found {
        if f.kind == Kind::Iframe && depth >= crate::discover::MAX_FRAME_DEPTH {
            continue;
        }
        if seen.len() >= opts.max_resources {
            *truncated = true;
            return;
        }
        if !seen.insert(f.url.to_string()) {
            continue;
        }
        queue.push_back(Job {
            url: f.url,
            kind: f.kind,
            parent: Some(idx),
            depth: if f.kind == Kind::Iframe {
                depth + 1
            } else {
                depth
            },
            redirects: 0,
            size: f.size,
            retried: false,
            sent_again: 0,
            after_load: false,
            by_script: None,
        });
    }
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The request headers a fetch sends, as [`crate::http::request_bytes`]
/// writes them (HTTP/2 sends the same fields, lower case), with the values
/// of credentials redacted.
pub(super) fn sent_headers(
    u: &Url,
    dest: Dest,
    extra: &[(String, String)],
    opts: &ClientOpts,
) -> Vec<(String, String)> {
    let host = match u.port() {
        Some(p) => format!("{}:{p}", u.host_str().unwrap_or("")),
        None => u.host_str().unwrap_or("").to_string(),
    };
    let mut h = vec![("Host".to_string(), host)];
    for (n, v) in crate::http::request_headers(dest, extra, opts) {
        let v = if redline_engine::redirect::is_credential(&n) {
            "[redacted]".to_string()
        } else {
            v
        };
        h.push((n, v));
    }
    h
}

pub(super) fn fetch_one(
    job: Job,
    via: Via,
    extra: &[(String, String)],
    opts: &ClientOpts,
    start_ms: f64,
    tx: &mpsc::Sender<Ev>,
    ids: &AtomicU64,
) -> Done {
    let conditional = !extra.is_empty();
    let began = Instant::now();
    let dest = job.kind.dest();
    let sent = sent_headers(&job.url, dest, extra, opts);
    let mut h3_fallback = None;
    let done = |job, result, dns_connect, new_conn, conn, mux_conn, alt_svc, h3_fallback| Done {
        job,
        start_ms,
        elapsed_ms: ms(began.elapsed()),
        sent_headers: sent.clone(),
        result,
        dns_connect,
        new_conn,
        conn,
        conditional,
        mux_conn,
        alt_svc,
        h3_fallback,
    };
    // A request on a multiplexed connection (`opened`: this fetch opened it).
    let on_mux = |job, result, opened: Option<(ConnectTimes, ConnInfo)>, id, alt, fell| {
        let (t, info) = opened.map_or((None, None), |(t, i)| (Some(t), Some(i)));
        done(job, result, t, info, None, Some(id), alt, fell)
    };
    let failed = |job, e, spent, fell| done(job, Err(e), spent, None, None, None, false, fell);
    let mut dns_connect = None;
    let mut new_conn = None;
    let mut spent = ConnectTimes::default();
    let mut via = via;
    // A TCP connection the race below already made (its number, result).
    let mut raced_tcp = None;
    if let Via::NewH3(id, to, H3Why::Forced, _) = &via {
        // `--http3`: QUIC only.
        let r = crate::h3::connect(&job.url, to, opts, *id, &mut spent);
        let _ = tx.send(Ev::H3(
            host_key(&job.url),
            r.as_ref().map(|(c, _)| c.clone()).map_err(Clone::clone),
        ));
        return match r {
            Ok((c, t)) => {
                let result = c.get(&job.url, dest, extra, opts);
                on_mux(job, result, Some((t, c.info.clone())), c.id, false, None)
            }
            Err(e) => failed(job, e, Some(spent), None),
        };
    }
    if let Via::NewH3(id, to, H3Why::AltSvc, worked) = via {
        match race(&job.url, &to, opts, id, &worked, ids, tx) {
            Raced::Quic(c, t) => {
                let result = c.get(&job.url, dest, extra, opts);
                return on_mux(job, result, Some((t, c.info.clone())), c.id, true, None);
            }
            Raced::Tcp { quic_failed, tcp } => {
                // The alternative failed first (h3_fallback says why), or
                // TCP was ready while QUIC still shook hands: TCP carries
                // this request.
                h3_fallback = quic_failed;
                match tcp {
                    Some((tcp_id, r, s)) => {
                        spent = s;
                        raced_tcp = Some(r);
                        via = Via::New(tcp_id);
                    }
                    None => via = Via::New(ids.fetch_add(1, Ordering::Relaxed) + 1),
                }
            }
        }
    }
    let as_reused = |r: Result<Response, FetchError>| {
        r.map(|mut r| {
            r.reused = true;
            r
        })
    };
    let mut conn = match via {
        Via::H3Failed(e) => return failed(job, e, None, None),
        Via::NewH3(..) => {
            let e = FetchError::Io("HTTP/3: the connection was not opened".into());
            return failed(job, e, None, None);
        }
        Via::H3(c) => {
            let result = as_reused(c.get(&job.url, dest, extra, opts));
            // HTTP/3 connections exist for `--http3` or an Alt-Svc alternative.
            return on_mux(job, result, None, c.id, !opts.http3, None);
        }
        Via::H2(c) => {
            let result = as_reused(c.get(&job.url, dest, extra, opts));
            return on_mux(job, result, None, c.id, false, h3_fallback);
        }
        Via::Reuse(c) => c,
        Via::New(id) => match raced_tcp
            .take()
            .unwrap_or_else(|| connect_timed(&job.url, opts, id, &mut spent))
        {
            Ok((Connected::H2(c), t)) => {
                let _ = tx.send(Ev::Ready(host_key(&job.url), Some(c.clone())));
                let result = c.get(&job.url, dest, extra, opts);
                return on_mux(
                    job,
                    result,
                    Some((t, c.info.clone())),
                    c.id,
                    false,
                    h3_fallback,
                );
            }
            Ok((Connected::H1(c), t)) => {
                if job.url.scheme() == "https" {
                    let _ = tx.send(Ev::Ready(host_key(&job.url), None));
                }
                dns_connect = Some(t);
                new_conn = Some(c.info.clone());
                c
            }
            Err(e) => return failed(job, e, Some(spent), h3_fallback),
        },
    };
    let reused = dns_connect.is_none();
    let mut result = conn.get(&job.url, dest, extra, opts);
    if reused && matches!(&result, Err(FetchError::Io(_))) {
        // The server closed an idle keep-alive connection: retry once on a
        // new one (a new number: it is another connection).
        let id = ids.fetch_add(1, Ordering::Relaxed) + 1;
        match connect_timed(&job.url, opts, id, &mut spent) {
            Ok((Connected::H1(c), t)) => {
                dns_connect = Some(t);
                new_conn = Some(c.info.clone());
                conn = c;
                result = conn.get(&job.url, dest, extra, opts);
            }
            Ok((Connected::H2(c), t)) => {
                // The host now picks h2: this request only; the pool stays HTTP/1.1.
                dns_connect = Some(t);
                new_conn = Some(c.info.clone());
                result = c.get(&job.url, dest, extra, opts).map(|r| (r, false));
            }
            Err(e) => {
                dns_connect = Some(spent);
                result = Err(e);
            }
        }
    }
    let (result, keep) = match result {
        Ok((r, keep)) => (Ok(r), keep),
        Err(e) => (Err(e), false),
    };
    done(
        job,
        result,
        dns_connect,
        new_conn,
        keep.then_some(conn),
        None,
        false,
        h3_fallback,
    )
}

/// How long TCP waits behind QUIC once a QUIC handshake has worked in the
/// load: Chromium's `QuicSessionPool::GetTimeDelayForWaitingJob` default
/// (300 ms; 1.5 × the server's smoothed RTT when it has QUIC figures for
/// it, which a fresh load does not).
pub(super) const TCP_WAIT_AFTER_QUIC_WORKED: Duration = Duration::from_millis(300);

/// How an `Alt-Svc` alternative's race with TCP ended.
enum Raced {
    /// QUIC was ready first: the request goes over it (a TCP connection
    /// the race started is dropped when ready).
    Quic(H3Conn, ConnectTimes),
    /// TCP carries the request: QUIC failed first (why), or was still
    /// shaking hands when TCP was ready (`None`: its verdict reaches the
    /// loader by itself). `tcp`: the connection the race made (its number,
    /// result, connect times spent on a failure), or `None` to connect now.
    Tcp {
        quic_failed: Option<String>,
        tcp: Option<(u64, TcpLeg, ConnectTimes)>,
    },
}

/// The TCP leg's connection, as [`connect_timed`] gives it.
type TcpLeg = Result<(Connected, ConnectTimes), FetchError>;

/// One leg of [`race`], as it ended.
enum Leg {
    Quic(Result<(H3Conn, ConnectTimes), FetchError>),
    Tcp(TcpLeg, ConnectTimes),
}

/// Chromium's race of an `Alt-Svc` alternative (`HttpStreamFactory::JobController`):
/// the QUIC connection (`to`) starts at once and TCP beside it, at once
/// until QUIC has `worked` in the session, then
/// [`TCP_WAIT_AFTER_QUIC_WORKED`] later unless QUIC failed by then
/// (`QuicSessionPool::GetTimeDelayForWaitingJob`); whichever connection is
/// ready first carries the request. The QUIC leg tells the loader its outcome itself (`Ev::H3`),
/// so a handshake that ends after TCP won still serves the later requests
/// (or marks the alternative broken). Bounded: each leg ends within its own
/// connect time-out and sends once; a leg that died ends the wait.
fn race(
    u: &Url,
    to: &crate::h3::Endpoint,
    opts: &ClientOpts,
    id: u64,
    worked: &Arc<AtomicBool>,
    ids: &AtomicU64,
    tx: &mpsc::Sender<Ev>,
) -> Raced {
    let wait = match worked.load(Ordering::Relaxed) {
        true => TCP_WAIT_AFTER_QUIC_WORKED,
        false => Duration::ZERO,
    };
    let (leg_tx, legs) = mpsc::channel();
    {
        let worked = worked.clone();
        let (u, to, opts, tx, leg_tx) = (
            u.clone(),
            to.clone(),
            opts.clone(),
            tx.clone(),
            leg_tx.clone(),
        );
        std::thread::spawn(move || {
            let mut spent = ConnectTimes::default();
            let r = crate::h3::connect(&u, &to, &opts, id, &mut spent);
            if r.is_ok() {
                worked.store(true, Ordering::Relaxed);
            }
            let seen = r.as_ref().map(|(c, _)| c.clone()).map_err(Clone::clone);
            let _ = tx.send(Ev::H3(host_key(&u), seen));
            let _ = leg_tx.send(Leg::Quic(r));
        });
    }
    let mut quic_failed = None;
    if !wait.is_zero() {
        match legs.recv_timeout(wait) {
            Ok(Leg::Quic(Ok((c, t)))) => return Raced::Quic(c, t),
            Ok(Leg::Quic(Err(e))) => quic_failed = Some(e.to_string()),
            _ => {}
        }
    }
    let tcp_id = ids.fetch_add(1, Ordering::Relaxed) + 1;
    {
        let (u, opts) = (u.clone(), opts.clone());
        std::thread::spawn(move || {
            let mut spent = ConnectTimes::default();
            let r = connect_timed(&u, &opts, tcp_id, &mut spent);
            let _ = leg_tx.send(Leg::Tcp(r, spent));
        });
    }
    for _ in 0..2 {
        match legs.recv() {
            Ok(Leg::Quic(Ok((c, t)))) => return Raced::Quic(c, t),
            Ok(Leg::Quic(Err(e))) => quic_failed = Some(e.to_string()),
            Ok(Leg::Tcp(r, spent)) => {
                return Raced::Tcp {
                    quic_failed,
                    tcp: Some((tcp_id, r, spent)),
                }
            }
            Err(_) => break,
        }
    }
    Raced::Tcp {
        quic_failed,
        tcp: None,
    }
}
