//! The coordinator–agent protocol: one JSON object per line over TCP, each
//! with a `type`. Version 1.
//!
//! ```text
//! agent → coordinator   {"type":"register","index":1,"total":3,"host":"gen-1","version":1}
//! coordinator → agent   {"type":"registered"}            or {"type":"refused","reason":"…"}
//! agent → coordinator   {"type":"ping","id":0}          ×8, each answered at once:
//! coordinator → agent   {"type":"pong","id":0,"now_ms":1767225600123.5}
//! agent → coordinator   {"type":"ready","offset_ms":-0.4,"rtt_ms":0.1,"expected_s":10.0,"requests":null,"abort_on_fail":false}
//! coordinator → agent   {"type":"start","at_ms":1767225602123.5}   (coordinator clock)
//! agent → coordinator   {"type":"progress","t":1,"completed":…,"failed":…,"open":…}   every second
//! agent → coordinator   {"type":"second","t":0,"requests":…,"errors":…,"status_classes":[0,…,0],"hist":"HISTFAAA…"}  per second of the run
//! coordinator → agent   {"type":"stop","reason":"…"}    stop early, as Ctrl-C would; the record follows as usual
//! agent → coordinator   {"type":"done","lateness_ms":0.3,"record":{…run record…}}
//! coordinator → agent   {"type":"ack"}
//! either way            {"type":"abort","reason":"…"}
//! ```
//!
//! `stop` is the graceful path (`--abort-on-fail` on the merged run): the
//! agent stops sending, in-flight requests get their grace, and it sends its
//! record. `abort` gives up: no record is expected. Fields added after the
//! first version (`requests`, `abort_on_fail`, `status_classes`) may be left
//! out.
//!
//! Clock offset: NTP's estimate from the round trip with the smallest delay,
//! `offset = now_coordinator − (sent + received) / 2` on the agent's clock;
//! the agent starts at `at_ms − offset` on its own clock.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Read, Write};

/// Protocol version.
pub const VERSION: u32 = 1;

/// The longest line accepted (a run record with a long series fits easily).
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    /// An agent announces itself.
    Register {
        /// Its index, 0-based.
        index: u64,
        /// The number of agents it expects.
        total: u64,
        /// Its host name.
        host: String,
        /// Protocol version.
        version: u32,
    },
    /// The coordinator accepted the registration.
    Registered,
    /// The coordinator refused the registration (duplicate index, wrong total…).
    Refused {
        /// Why.
        reason: String,
    },
    /// A clock probe.
    Ping {
        /// Echoed in the pong.
        id: u64,
    },
    /// The answer to a ping: the coordinator's wall clock.
    Pong {
        /// The ping's id.
        id: u64,
        /// Milliseconds since the Unix epoch on the coordinator.
        now_ms: f64,
    },
    /// The agent is ready to start.
    Ready {
        /// Coordinator clock minus agent clock, ms.
        offset_ms: f64,
        /// The smallest round trip seen, ms.
        rtt_ms: f64,
        /// How long its run should last (None: until its request count is done).
        expected_s: Option<f64>,
        /// Its share of the requests, when the run is bounded by count.
        #[serde(default)]
        requests: Option<u64>,
        /// The run arguments asked for `--abort-on-fail` (left to the coordinator).
        #[serde(default)]
        abort_on_fail: bool,
    },
    /// Start at this instant of the coordinator's clock.
    Start {
        /// Milliseconds since the Unix epoch on the coordinator.
        at_ms: f64,
    },
    /// Live counters (cumulative since the start).
    Progress {
        /// Seconds since the start.
        t: u64,
        /// Completed responses.
        completed: u64,
        /// Failed requests.
        failed: u64,
        /// Connections open.
        open: u64,
    },
    /// One second of the agent's run: counts and the second's latency
    /// histogram (HdrHistogram V2, deflate, base64).
    Second {
        /// Seconds since the start.
        t: u32,
        /// Responses completed in that second.
        requests: u64,
        /// Errors in that second.
        errors: u64,
        /// Responses by status class in that second: 1xx, 2xx, 3xx, 4xx, 5xx.
        #[serde(default)]
        status_classes: [u64; 5],
        /// The histogram.
        hist: String,
    },
    /// The agent's run is over: its whole record.
    Done {
        /// How late the agent started against the common start, ms.
        lateness_ms: f64,
        /// The run record (`redline.run`), or None when its share was empty.
        record: Option<Box<serde_json::Value>>,
        /// Why there is no record (an empty share, a failed run).
        note: Option<String>,
    },
    /// The coordinator has the record.
    Ack,
    /// Stop the run early, gracefully (as Ctrl-C would): stop sending, give
    /// in-flight requests their grace, then send the record as usual.
    Stop {
        /// Why (e.g. a threshold that can no longer pass).
        reason: String,
    },
    /// Give up (either side).
    Abort {
        /// Why.
        reason: String,
    },
}

/// Writes one message as a line.
pub fn send(w: &mut impl Write, m: &Msg) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(m).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)?;
    w.flush()
}

/// Reads one message; Ok(None) at end of stream. A line that is too long or
/// not a message is an error.
pub fn recv<R: BufRead>(r: &mut R) -> std::io::Result<Option<Msg>> {
    let mut buf = Vec::new();
    let n = r
        .by_ref()
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > MAX_LINE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "message line too long",
        ));
    }
    if buf.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed in the middle of a message",
        ));
    }
    serde_json::from_slice(&buf).map(Some).map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad message: {e}"))
    })
}

/// Milliseconds since the Unix epoch, as a float (sub-millisecond).
pub fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// NTP's estimate from probes `(sent_ms, coordinator_ms, received_ms)` on the
/// agent's clock: the offset of the probe with the smallest round trip, and
/// that round trip. None without probes.
pub fn clock_offset(probes: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    probes
        .iter()
        .map(|&(t0, tc, t1)| (tc - (t0 + t1) / 2.0, (t1 - t0).max(0.0)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_errors() {
        let msgs = vec![
            Msg::Register {
                index: 1,
                total: 3,
                host: "h".into(),
                version: VERSION,
            },
            Msg::Pong { id: 2, now_ms: 5.5 },
            Msg::Stop {
                reason: "threshold 'p99<5ms' can no longer pass".into(),
            },
            Msg::Done {
                lateness_ms: 0.5,
                record: None,
                note: Some("empty share".into()),
            },
        ];
        let mut buf = Vec::new();
        for m in &msgs {
            send(&mut buf, m).unwrap();
        }
        assert!(String::from_utf8_lossy(&buf).starts_with("{\"type\":\"register\""));
        let mut r = std::io::BufReader::new(&buf[..]);
        for m in &msgs {
            assert_eq!(recv(&mut r).unwrap().as_ref(), Some(m));
        }
        assert_eq!(recv(&mut r).unwrap(), None);
        let mut r = std::io::BufReader::new(&b"{\"type\":\"nope\"}\n"[..]);
        assert!(recv(&mut r).is_err());
        let mut r = std::io::BufReader::new(&b"{\"type\":\"ack\""[..]);
        assert!(recv(&mut r).is_err());
        // A first-version agent's lines still read (the later fields default).
        let old = b"{\"type\":\"ready\",\"offset_ms\":1.0,\"rtt_ms\":0.5,\"expected_s\":null}\n{\"type\":\"second\",\"t\":0,\"requests\":3,\"errors\":0,\"hist\":\"x\"}\n";
        let mut r = std::io::BufReader::new(&old[..]);
        assert!(matches!(
            recv(&mut r).unwrap(),
            Some(Msg::Ready {
                requests: None,
                abort_on_fail: false,
                ..
            })
        ));
        assert!(matches!(
            recv(&mut r).unwrap(),
            Some(Msg::Second {
                status_classes: [0, 0, 0, 0, 0],
                ..
            })
        ));
    }

    #[test]
    fn offset_from_the_fastest_probe() {
        // Agent clock 100 ms behind the coordinator; the slow probe is skewed.
        let probes = [(0.0, 130.0, 40.0), (50.0, 151.0, 52.0), (60.0, 170.0, 70.0)];
        let (off, rtt) = clock_offset(&probes).unwrap();
        assert_eq!(rtt, 2.0);
        assert_eq!(off, 100.0);
        assert_eq!(clock_offset(&[]), None);
    }
}
