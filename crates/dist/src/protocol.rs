//! The coordinator–agent protocol: one JSON object per line over TCP, each
//! with a `type`. Version 1.
//!
//! ```text
//! coordinator → agent   {"type":"hello","nonce":"9f…(64 hex)","version":1}   at once on connect
//! agent → coordinator   {"type":"register","index":1,"total":3,"host":"gen-1","version":1,
//!                        "auth":"HMAC-SHA256(token, nonce|index|plan) hex","plan":{"fingerprint":"…","fields":{…}}}
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
//! Authentication: the coordinator's `hello` carries a fresh random nonce;
//! the agent proves it knows the shared token with
//! `auth = hex(HMAC-SHA256(token, "redline-register|" nonce "|" index "|" plan fingerprint))`
//! ([`auth_proof`]), checked in constant time ([`auth_ok`]). The token itself
//! never crosses the network, and a proof cannot be replayed on another
//! connection (another nonce) or for another index or plan.
//!
//! Bounds: a line before registration is at most [`MAX_HELLO_LINE`] bytes, after
//! it [`MAX_LINE`]; a longer line ends the connection ([`recv_limited`]).
//!
//! Clock offset: NTP's estimate from the round trip with the smallest delay,
//! `offset = now_coordinator − (sent + received) / 2` on the agent's clock;
//! the agent starts at `at_ms − offset` on its own clock.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Read, Write};

/// Protocol version.
pub const VERSION: u32 = 1;

/// The longest line accepted from a registered peer: a run record with its
/// per-second series (about 3 KB a second: an hour's run is ~11 MB).
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// The longest line accepted before registration (the register message:
/// host name, proof and plan summary).
pub const MAX_HELLO_LINE: usize = 64 * 1024;

/// What an agent says about the plan it runs: a fingerprint (SHA-256 of the
/// canonical plan, hex) and the canonical fields it was computed from
/// (secrets left out), so a mismatch can be named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PlanId {
    /// SHA-256 of `fields` (canonical JSON), hex.
    pub fingerprint: String,
    /// The resolved plan's fields: flag → value(s), body and file hashes, segment sequence.
    pub fields: std::collections::BTreeMap<String, String>,
}

impl PlanId {
    /// The id of `fields`: their SHA-256 over canonical JSON.
    pub fn new(fields: std::collections::BTreeMap<String, String>) -> PlanId {
        let json = serde_json::to_vec(&fields).unwrap_or_default();
        PlanId {
            fingerprint: hex(ring::digest::digest(&ring::digest::SHA256, &json).as_ref()),
            fields,
        }
    }

    /// Names how `self` differs from `other` (at most 5 fields), or None when
    /// the fingerprints agree.
    pub fn differences(&self, other: &PlanId) -> Option<String> {
        if self.fingerprint == other.fingerprint {
            return None;
        }
        let keys: std::collections::BTreeSet<&String> =
            self.fields.keys().chain(other.fields.keys()).collect();
        let shown = |v: Option<&String>| -> String {
            v.map(|s| {
                let s: String = s.chars().filter(|c| !c.is_control()).take(80).collect();
                format!("{s:?}")
            })
            .unwrap_or_else(|| "(not given)".into())
        };
        let diffs: Vec<String> = keys
            .into_iter()
            .filter(|k| self.fields.get(*k) != other.fields.get(*k))
            .take(5)
            .map(|k| {
                let k2: String = k.chars().filter(|c| !c.is_control()).take(40).collect();
                format!(
                    "{k2} {} vs {}",
                    shown(self.fields.get(k)),
                    shown(other.fields.get(k))
                )
            })
            .collect();
        Some(if diffs.is_empty() {
            "the plan fingerprints differ".into()
        } else {
            diffs.join("; ")
        })
    }
}

/// The shared secret agents prove they know. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(Vec<u8>);

impl Token {
    /// A token from its text (surrounding white space, e.g. a file's
    /// newline, is not part of it). None when empty.
    pub fn new(s: &str) -> Option<Token> {
        let t = s.trim();
        (!t.is_empty()).then(|| Token(t.as_bytes().to_vec()))
    }

    /// The bytes (for the proof only).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token([redacted])")
    }
}

/// SHA-256 of `b`.
pub fn sha256(b: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, b).as_ref());
    out
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn auth_message(nonce: &str, index: u64, fingerprint: &str) -> Vec<u8> {
    format!("redline-register|{nonce}|{index}|{fingerprint}").into_bytes()
}

/// The registration proof: HMAC-SHA256 of the nonce, index and plan fingerprint under the token, hex.
pub fn auth_proof(token: &[u8], nonce: &str, index: u64, fingerprint: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token);
    hex(ring::hmac::sign(&key, &auth_message(nonce, index, fingerprint)).as_ref())
}

/// True when `proof` is the right one (compared in constant time by `ring::hmac::verify`).
pub fn auth_ok(token: &[u8], nonce: &str, index: u64, fingerprint: &str, proof: &str) -> bool {
    let Some(tag) = unhex(proof) else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token);
    ring::hmac::verify(&key, &auth_message(nonce, index, fingerprint), &tag).is_ok()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 128 || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A fresh random nonce (32 bytes, hex).
pub fn nonce() -> std::io::Result<String> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| std::io::Error::other("no randomness from the system"))?;
    Ok(hex(&b))
}

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    /// The coordinator greets a new connection with a nonce for the proof.
    Hello {
        /// 32 random bytes, hex.
        nonce: String,
        /// Protocol version.
        version: u32,
    },
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
        /// The proof that it knows the token ([`auth_proof`]); None without a token.
        #[serde(default)]
        auth: Option<String>,
        /// The plan it runs.
        #[serde(default)]
        plan: Option<PlanId>,
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

/// Reads one message; Ok(None) at end of stream. A line longer than
/// [`MAX_LINE`] or not a message is an error.
pub fn recv<R: BufRead>(r: &mut R) -> std::io::Result<Option<Msg>> {
    recv_limited(r, MAX_LINE)
}

/// [`recv`] with a line limit of `max` bytes: at most `max + 1` bytes are
/// buffered, whatever the peer sends.
pub fn recv_limited<R: BufRead>(r: &mut R, max: usize) -> std::io::Result<Option<Msg>> {
    let mut buf = Vec::new();
    let n = r
        .by_ref()
        .take(max as u64 + 1)
        .read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("message line longer than {max} bytes"),
        ));
    }
    if buf.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed in the middle of a message",
        ));
    }
    parse_line(&buf).map(Some)
}

/// Parses one protocol line (with or without its newline).
pub fn parse_line(line: &[u8]) -> std::io::Result<Msg> {
    serde_json::from_slice(line).map_err(|e| {
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
                auth: Some("ab".into()),
                plan: None,
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

    #[test]
    fn the_proof_binds_token_nonce_index_and_plan() {
        let p = auth_proof(b"tok", "n1", 3, "fp");
        assert_eq!(p.len(), 64);
        assert!(auth_ok(b"tok", "n1", 3, "fp", &p));
        assert!(!auth_ok(b"tok2", "n1", 3, "fp", &p), "another token");
        assert!(
            !auth_ok(b"tok", "n2", 3, "fp", &p),
            "replayed on another connection"
        );
        assert!(!auth_ok(b"tok", "n1", 4, "fp", &p), "for another index");
        assert!(!auth_ok(b"tok", "n1", 3, "fp2", &p), "for another plan");
        for bad in [
            "",
            "zz",
            "0",
            &"0".repeat(64),
            &"é".repeat(32),
            &"ab".repeat(100),
        ] {
            assert!(!auth_ok(b"tok", "n1", 3, "fp", bad), "{bad:?}");
        }
        assert_ne!(nonce().unwrap(), nonce().unwrap());
        assert_eq!(
            format!("{:?}", Token::new(" s3 \n").unwrap()),
            "Token([redacted])"
        );
        assert!(Token::new(" \n").is_none());
    }

    #[test]
    fn lines_are_bounded() {
        // A line without its end: at most max + 1 bytes are read, then an error.
        let long = vec![b'a'; 10_000];
        let mut r = std::io::BufReader::new(&long[..]);
        let e = recv_limited(&mut r, 100).unwrap_err();
        assert!(e.to_string().contains("longer than 100 bytes"), "{e}");
        let mut r = std::io::BufReader::new(&b"{\"type\":\"ack\"}\n"[..]);
        assert_eq!(recv_limited(&mut r, 16).unwrap(), Some(Msg::Ack));
        assert!(parse_line(b"{\"type\":\"start\",\"at_ms\":1e999}").is_err());
    }

    #[test]
    fn plan_differences_are_named() {
        let a = PlanId::new(
            [
                ("requests".into(), "100".into()),
                ("url".into(), "http://x/".into()),
            ]
            .into(),
        );
        let mut f = a.fields.clone();
        f.insert("requests".into(), "200".into());
        f.insert("method".into(), "POST\u{1b}[2J".into());
        let b = PlanId::new(f);
        assert_eq!(a.differences(&a.clone()), None);
        let d = b.differences(&a).unwrap();
        assert!(d.contains("requests \"200\" vs \"100\""), "{d}");
        assert!(d.contains("method \"POST[2J\" vs (not given)"), "{d}");
        assert!(!d.contains('\u{1b}'));
    }
}
