//! One fetch of the loader: queueing a reference, the headers it sends,
//! and fetching it over a pooled HTTP/1.1 connection, a new connection, or
//! a stream of the origin's HTTP/2 or HTTP/3 connection; an `Alt-Svc: h3`
//! alternative that cannot be reached falls back to TCP, as Chromium's does.

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
    if let Via::NewH3(id, to, why) = via {
        match crate::h3::connect(&job.url, &to, opts, id, &mut spent) {
            Ok((c, t)) => {
                let _ = tx.send(Ev::H3(host_key(&job.url), Ok(c.clone())));
                let result = c.get(&job.url, dest, extra, opts);
                let alt = why == H3Why::AltSvc;
                return on_mux(job, result, Some((t, c.info.clone())), c.id, alt, None);
            }
            Err(e) => {
                let _ = tx.send(Ev::H3(host_key(&job.url), Err(e.clone())));
                if why == H3Why::Forced {
                    return failed(job, e, Some(spent), None);
                }
                // The alternative is broken: TCP, on a new connection.
                h3_fallback = Some(e.to_string());
                spent = ConnectTimes::default();
                via = Via::New(ids.fetch_add(1, Ordering::Relaxed) + 1);
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
        Via::New(id) => match connect_timed(&job.url, opts, id, &mut spent) {
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
