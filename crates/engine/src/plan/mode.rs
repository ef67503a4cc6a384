//! The protocol of a run, decided once while the plan is built: [`Wire`]
//! (what goes on the wire: HTTP/1.0, HTTP/1.1, HTTP/2 over TLS, h2c), how it
//! was chosen ([`Alpn`]: fixed by a flag or the scheme, or the server's pick
//! when an https run leaves it open), and the one feature matrix
//! ([`Protocol::supports`]) of which engine runs which [`Mode`].

use super::args::PlanArgs;
use super::{usage, PlanError};

/// What a run speaks on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// HTTP/1.0 (`--http1.0`).
    Http10,
    /// HTTP/1.1.
    Http11,
    /// HTTP/2 over TLS, ALPN `h2` (`--http2`, or the server's pick).
    H2Tls,
    /// HTTP/2 over cleartext with prior knowledge (`--h2c`).
    H2c,
    /// HTTP/3 over QUIC, ALPN `h3` (`--http3`).
    H3,
}

impl Wire {
    /// The engine that runs it.
    pub fn protocol(self) -> Protocol {
        match self {
            Wire::Http10 | Wire::Http11 => Protocol::Http1,
            Wire::H2Tls | Wire::H2c => Protocol::Http2,
            Wire::H3 => Protocol::Http3,
        }
    }

    /// The run record's `config.http_version`.
    pub fn record_version(self) -> &'static str {
        match self {
            Wire::Http10 => "1.0",
            Wire::Http11 => "1.1",
            Wire::H2Tls | Wire::H2c => "2",
            Wire::H3 => "3",
        }
    }
}

/// How the run's [`Wire`] was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// Nothing to negotiate: a cleartext URL, or a flag fixed the version
    /// (`--http2` offers only `h2`, `--http1.1`/`--http1.0` only `http/1.1`).
    Fixed,
    /// An https run without a version flag whose server has not been asked
    /// yet: HTTP/1.1 unless the build asks the server
    /// ([`super::PlanArgs::ask_alpn`]), offering `h2, http/1.1`.
    Unasked,
    /// Asked once: the server picked `h2`.
    PickedH2,
    /// Asked once: the server picked `http/1.1` or nothing (or did not answer:
    /// the run then shows why, request by request).
    NotH2,
}

/// Most concurrent streams per HTTP/2 connection `--streams` accepts.
pub const MAX_STREAMS: u32 = 100_000;

/// The connections an HTTP/2 stage level of `level` concurrent streams needs
/// at `streams` per connection: ⌈level / streams⌉.
pub fn h2_connections(level: u64, streams: u32) -> u64 {
    level.div_ceil(u64::from(streams.max(1)))
}

/// The protocol a run speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 (and 1.0): the mio worker (`worker.rs`).
    Http1,
    /// HTTP/2, over TLS (ALPN) or cleartext (h2c): the `mux` driver.
    Http2,
    /// HTTP/3 over QUIC: the `mux` driver too (streams as HTTP/2's, each
    /// connection a QUIC connection on its own UDP socket).
    Http3,
}

/// A load mode (or request behaviour) that a protocol may or may not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `--scenario`: virtual users, cookies, extraction, checks, CSV.
    Scenario,
    /// `--stages`: closed-loop ramps, the knee.
    Stages,
    /// `--rate-stages`: open-loop ramps.
    RateStages,
    /// `-L/--follow-redirects`.
    FollowRedirects,
    /// `--scenario` in session mode with `--rate`: open-loop journeys.
    Journeys,
}

impl Mode {
    /// The flag that asks for the mode.
    pub fn flag(self) -> &'static str {
        match self {
            Mode::Scenario => "--scenario",
            Mode::Stages => "--stages",
            Mode::RateStages => "--rate-stages",
            Mode::FollowRedirects => "-L/--follow-redirects",
            Mode::Journeys => "--rate with a session scenario (open-loop journeys)",
        }
    }
}

impl Protocol {
    /// Whether this protocol's engine runs `mode`: the one feature matrix.
    /// The plan's refusals (`--http2`/`--h2c` with a mode HTTP/2 does not run)
    /// and the automatic ALPN upgrade of https runs (asked in [`super::Plan::build`]) both ask it.
    pub fn supports(self, mode: Mode) -> bool {
        match (self, mode) {
            (Protocol::Http1, _) => true,
            (Protocol::Http2, _) => true,
            (Protocol::Http3, _) => true,
        }
    }

    /// Requests go as streams multiplexed on connections (`--streams`):
    /// the `mux` driver runs it.
    pub fn multiplexed(self) -> bool {
        matches!(self, Protocol::Http2 | Protocol::Http3)
    }

    /// The first of `modes` this protocol does not run.
    pub fn first_unsupported(self, modes: &[Mode]) -> Option<Mode> {
        modes.iter().copied().find(|m| !self.supports(*m))
    }
}

impl PlanArgs {
    /// The modes these options ask for.
    pub fn modes(&self) -> Vec<Mode> {
        let mut m = Vec::new();
        if self.scenario.is_some() {
            m.push(Mode::Scenario);
        }
        match &self.stages {
            Some(s) if s.rate => m.push(Mode::RateStages),
            Some(_) => m.push(Mode::Stages),
            None => {}
        }
        if self.follow_redirects {
            m.push(Mode::FollowRedirects);
        }
        m
    }
}

/// Checks the version flags against each other and the URL's scheme: what
/// the run speaks, whether ALPN may still change it, and the HTTP/2 streams
/// per connection.
pub(super) fn choose(a: &PlanArgs, scheme: &str) -> Result<(Wire, Alpn, u32), PlanError> {
    if a.http2 && a.h2c {
        return Err(usage("--http2 and --h2c cannot be used together"));
    }
    if a.http3 && (a.http2 || a.h2c || a.http10 || a.http11) {
        return Err(usage(
            "--http3 cannot be combined with --http2, --h2c, --http1.1 or --http1.0",
        ));
    }
    if a.http3 && scheme != "https" {
        return Err(usage(
            "--http3 runs HTTP/3 over QUIC, which is always encrypted: it needs an https:// URL",
        ));
    }
    if a.http2 && scheme != "https" {
        return Err(usage(
            "--http2 negotiates HTTP/2 over TLS and needs an https:// URL (for cleartext HTTP/2 use --h2c)",
        ));
    }
    if a.h2c && scheme != "http" {
        return Err(usage(
            "--h2c is HTTP/2 over cleartext and needs an http:// URL (for https use --http2)",
        ));
    }
    if (a.http2 || a.h2c) && a.http10 {
        return Err(usage("--http1.0 cannot be combined with --http2 or --h2c"));
    }
    if a.http11 && (a.http2 || a.h2c || a.http10) {
        return Err(usage(
            "--http1.1 cannot be combined with --http2, --h2c or --http1.0",
        ));
    }
    let streams = match a.streams {
        Some(_) if !(a.http2 || a.h2c || a.http3) => return Err(usage(
            "--streams is for HTTP/2 and HTTP/3: add --http2 or --http3 (https) or --h2c (http)",
        )),
        Some(0) => return Err(usage("--streams must be at least 1")),
        Some(n) if n > MAX_STREAMS => {
            return Err(usage(format!(
                "--streams above {MAX_STREAMS} is not supported"
            )))
        }
        Some(n) => n,
        None => 1,
    };
    let (wire, alpn) = if a.http3 {
        (Wire::H3, Alpn::Fixed)
    } else if a.http2 {
        (Wire::H2Tls, Alpn::Fixed)
    } else if a.h2c {
        (Wire::H2c, Alpn::Fixed)
    } else if a.http10 {
        (Wire::Http10, Alpn::Fixed)
    } else if a.http11 || scheme != "https" {
        (Wire::Http11, Alpn::Fixed)
    } else {
        (Wire::Http11, a.alpn.unwrap_or(Alpn::Unasked))
    };
    if wire.protocol() == Protocol::Http2 {
        if let Some(m) = Protocol::Http2.first_unsupported(&a.modes()) {
            return Err(usage(format!(
                "{} does not run over HTTP/2 yet: drop --http2/--h2c (HTTP/1.1 runs it)",
                m.flag()
            )));
        }
    }
    Ok((wire, alpn, streams))
}
