//! One agent's connection: registration with its plan fingerprint, the
//! thread that reads its messages, and telling every agent to stop or abort.

use super::*;

pub(super) enum Ev {
    Register(
        u64,
        String,
        protocol::PlanId,
        Arc<Mutex<TcpStream>>,
        mpsc::Sender<Result<(), String>>,
    ),
    Ready(u64, ReadyInfo),
    Progress(u64, u64, u64),
    Second(u64, u32, u64, u64, [u64; 5], String),
    Done(u64, f64, Option<Box<serde_json::Value>>, Option<String>),
    Gone(u64, String),
    Unregistered(u64),
    AuthFailed(String),
}

/// What an agent said when it was ready.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ReadyInfo {
    pub(super) offset_ms: f64,
    pub(super) rtt_ms: f64,
    pub(super) expected_s: Option<f64>,
    pub(super) requests: Option<u64>,
    pub(super) abort_on_fail: bool,
}

/// Reads one line of at most `max` bytes before `deadline` (the whole line,
/// not each read: a peer dribbling a byte at a time is cut off too).
pub(super) fn recv_before(
    r: &mut BufReader<TcpStream>,
    max: usize,
    deadline: Instant,
) -> std::io::Result<Option<Msg>> {
    use std::io::BufRead;
    let mut buf = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "did not register in time",
            ));
        }
        r.get_ref().set_read_timeout(Some(left))?;
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok(None);
        }
        let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > max + 1 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("registration line longer than {max} bytes"),
            ));
        }
        buf.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if end {
            return protocol::parse_line(&buf).map(Some);
        }
    }
}

/// Checks the numbers of a `ready` message (a hostile or broken agent's
/// NaN, negative or absurd values are refused, not used).
pub fn sane_ready(
    offset_ms: f64,
    rtt_ms: f64,
    expected_s: Option<f64>,
    requests: Option<u64>,
) -> Result<(), String> {
    const DAY_MS: f64 = 86_400_000.0;
    if !(offset_ms.is_finite() && offset_ms.abs() <= 10.0 * DAY_MS) {
        return Err(format!("an absurd clock offset ({offset_ms} ms)"));
    }
    if !(rtt_ms.is_finite() && (0.0..=60_000.0).contains(&rtt_ms)) {
        return Err(format!("an absurd round trip ({rtt_ms} ms)"));
    }
    if let Some(e) = expected_s {
        if !(e.is_finite() && (0.0..=30.0 * 86_400.0).contains(&e)) {
            return Err(format!("an absurd run length ({e} s)"));
        }
    }
    if requests.is_some_and(|n| n > 1u64 << 48) {
        return Err("an absurd request count".into());
    }
    Ok(())
}

pub(super) fn conn_thread(
    stream: TcpStream,
    tx: mpsc::Sender<Ev>,
    token: Option<protocol::Token>,
    pending: redline_stats::gate::Ticket,
) {
    let Ok(w) = stream.try_clone() else {
        return;
    };
    let writer = Arc::new(Mutex::new(w));
    let mut r = BufReader::new(stream);
    let send = |m: &Msg| {
        let mut g = writer.lock().unwrap_or_else(|p| p.into_inner());
        protocol::send(&mut *g, m)
    };
    let Ok(nonce) = protocol::nonce() else {
        return;
    };
    if send(&Msg::Hello {
        nonce: nonce.clone(),
        version: protocol::VERSION,
    })
    .is_err()
    {
        return;
    }
    // Registration first: one bounded line within REGISTER_TIMEOUT.
    let deadline = Instant::now() + REGISTER_TIMEOUT;
    let index = match recv_before(&mut r, protocol::MAX_HELLO_LINE, deadline) {
        Ok(Some(Msg::Register {
            index,
            total: _,
            host,
            version,
            auth,
            plan,
        })) => {
            if version != protocol::VERSION {
                let _ = send(&Msg::Refused {
                    reason: format!(
                        "agent {index} speaks protocol version {version}, the coordinator speaks {}: run the same redline version on both",
                        protocol::VERSION
                    ),
                });
                return;
            }
            let plan = plan.unwrap_or_default();
            if let Some(t) = &token {
                let ok = auth.as_deref().is_some_and(|p| {
                    protocol::auth_ok(t.bytes(), &nonce, index, &plan.fingerprint, p)
                });
                if !ok {
                    let reason =
                        format!("agent {index}: authentication failed (a wrong or missing token)");
                    let _ = send(&Msg::Refused {
                        reason: reason.clone(),
                    });
                    let _ = tx.send(Ev::AuthFailed(reason));
                    return;
                }
            }
            // Host names are shown: no control characters, bounded.
            let host: String = host.chars().filter(|c| !c.is_control()).take(128).collect();
            let (rtx, rrx) = mpsc::channel();
            if tx
                .send(Ev::Register(index, host, plan, writer.clone(), rtx))
                .is_err()
            {
                return;
            }
            match rrx.recv() {
                Ok(Ok(())) => {
                    if send(&Msg::Registered).is_err() {
                        let _ = tx.send(Ev::Unregistered(index));
                        return;
                    }
                    index
                }
                Ok(Err(reason)) => {
                    let _ = send(&Msg::Refused { reason });
                    return;
                }
                Err(_) => return,
            }
        }
        _ => return,
    };
    drop(pending);
    // After registration, reads wait as long as the run (silence is judged by the main loop).
    let _ = r.get_ref().set_read_timeout(None);
    let mut done = false;
    loop {
        match protocol::recv(&mut r) {
            Ok(Some(Msg::Ping { id })) => {
                if send(&Msg::Pong {
                    id,
                    now_ms: protocol::now_ms(),
                })
                .is_err()
                {
                    break;
                }
            }
            Ok(Some(Msg::Ready {
                offset_ms,
                rtt_ms,
                expected_s,
                requests,
                abort_on_fail,
            })) => {
                if let Err(why) = sane_ready(offset_ms, rtt_ms, expected_s, requests) {
                    let reason = format!("its ready message was refused: {why}");
                    let _ = send(&Msg::Abort {
                        reason: reason.clone(),
                    });
                    let _ = tx.send(Ev::Gone(index, reason));
                    return;
                }
                let _ = tx.send(Ev::Ready(
                    index,
                    ReadyInfo {
                        offset_ms,
                        rtt_ms,
                        expected_s,
                        requests,
                        abort_on_fail,
                    },
                ));
            }
            Ok(Some(Msg::Progress {
                completed, failed, ..
            })) => {
                let _ = tx.send(Ev::Progress(index, completed, failed));
            }
            Ok(Some(Msg::Second {
                t,
                requests,
                errors,
                status_classes,
                hist,
            })) => {
                let _ = tx.send(Ev::Second(index, t, requests, errors, status_classes, hist));
            }
            Ok(Some(Msg::Done {
                lateness_ms,
                record,
                note,
            })) => {
                done = true;
                // The main loop checks the record and answers (Ack or
                // Refused) before it shuts any connection.
                let _ = tx.send(Ev::Done(index, lateness_ms, record, note));
            }
            Ok(Some(Msg::Abort { reason })) => {
                if !done {
                    let _ = tx.send(Ev::Gone(index, format!("aborted: {reason}")));
                }
                return;
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                if !done {
                    let _ = tx.send(Ev::Gone(
                        index,
                        "its connection closed before it sent its record".into(),
                    ));
                }
                return;
            }
            Err(e) => {
                if !done {
                    let _ = tx.send(Ev::Gone(index, format!("its connection failed: {e}")));
                }
                return;
            }
        }
    }
    if !done {
        let _ = tx.send(Ev::Gone(index, "its connection failed".into()));
    }
}

pub(super) struct Slot {
    pub(super) host: String,
    pub(super) plan: protocol::PlanId,
    pub(super) writer: Arc<Mutex<TcpStream>>,
    pub(super) ready: Option<ReadyInfo>,
}

pub(super) fn abort_all(slots: &BTreeMap<u64, Slot>, reason: &str) {
    for s in slots.values() {
        let mut g = s.writer.lock().unwrap_or_else(|p| p.into_inner());
        let _ = protocol::send(
            &mut *g,
            &Msg::Abort {
                reason: reason.into(),
            },
        );
        let _ = g.shutdown(Shutdown::Both);
    }
}

pub(super) fn stop_all(slots: &BTreeMap<u64, Slot>, finished: &BTreeMap<u64, bool>, reason: &str) {
    for (i, s) in slots {
        if finished.get(i).copied().unwrap_or(true) {
            continue;
        }
        let mut g = s.writer.lock().unwrap_or_else(|p| p.into_inner());
        // An agent that cannot be told is caught by the silence time-out.
        let _ = protocol::send(
            &mut *g,
            &Msg::Stop {
                reason: reason.into(),
            },
        );
    }
}
