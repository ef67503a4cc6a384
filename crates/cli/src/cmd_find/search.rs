//! The rules of `redline find` without sockets: a step's verdict from what
//! its record says, the next rate of the search, and the answer in words.
//!
//! A step that broke the SLO (`thresholds::check`, as `run --threshold`
//! judges) or whose rate the server did not take because it held every
//! connection has FAILED, whatever else its record says; when the client was
//! limited too, the step says so but still counts as a failure. A step that
//! met the SLO while the client was the limit is CLIENT-LIMITED: neither pass
//! nor fail. While no step has passed, a client-limited step is tried again at
//! half its rate (at most [`CLIENT_RETRIES`] times); otherwise the search
//! stops there. The answer never says "no step failed" after a step failed or
//! was client-limited, and never calls a client-limited search "no answer".

/// How many times a client-limited step is tried again at half its rate
/// while no step has passed.
pub const CLIENT_RETRIES: u32 = 3;
/// The lowest rate the search tries (req/s).
const MIN_RATE: f64 = 0.1;
/// The highest rate the search tries (req/s), as `--start-rate` allows.
const MAX_RATE: f64 = 10_000_000.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    ClientLimited,
}

impl Verdict {
    /// The step's verdict: `slo_met` (every threshold held), `server_held`
    /// (the server held every connection while the rate waited for one) and
    /// `client_limited` (one of the client's own warnings). A broken SLO or a
    /// held server is a failure whatever the client did.
    pub fn of(slo_met: bool, server_held: bool, client_limited: bool) -> Verdict {
        if !slo_met || server_held {
            Verdict::Fail
        } else if client_limited {
            Verdict::ClientLimited
        } else {
            Verdict::Pass
        }
    }

    /// The JSON name.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::ClientLimited => "client_limited",
        }
    }
}

/// Why the search stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    Precision,
    MaxSteps,
    TimeBudget,
    ClientLimited,
    NoPass,
    Interrupted,
}

impl Stopped {
    /// The JSON name (`stopped`).
    pub fn name(self) -> &'static str {
        match self {
            Stopped::Precision => "precision",
            Stopped::MaxSteps => "max_steps",
            Stopped::TimeBudget => "time_budget",
            Stopped::ClientLimited => "client_limited",
            Stopped::NoPass => "no_pass",
            Stopped::Interrupted => "interrupted",
        }
    }

    /// The words after "search stopped: ".
    pub fn why(self) -> &'static str {
        match self {
            Stopped::Precision => "the bracket is within --precision",
            Stopped::MaxSteps => "--max-steps reached",
            Stopped::TimeBudget => "the next step would overrun --time-budget",
            Stopped::ClientLimited => {
                "the client, not the server, was the limit at the last step: the server's \
                 capacity may be higher; give redline more threads (-t), cores or machines"
            }
            Stopped::Interrupted => "interrupted",
            Stopped::NoPass => "no rate passed",
        }
    }
}

/// What the search does after a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// The next step's rate.
    Rate(f64),
    /// The step was client-limited before any pass: the same search again
    /// at this lower rate.
    Retry(f64),
    /// The search is over.
    Stop(Stopped),
}

/// One judged step as the search sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen {
    rate: f64,
    verdict: Verdict,
    /// The client was limited too (a FAIL step with a client warning).
    client_also: bool,
}

/// The state of the search: the bracket, the client-limited steps.
#[derive(Debug, Clone)]
pub struct Search {
    precision: f64,
    /// The highest rate that passed.
    pub pass: Option<f64>,
    /// The lowest rate that failed.
    pub failed: Option<f64>,
    retries: u32,
    seen: Vec<Seen>,
}

impl Search {
    /// A search that stops bisecting when the bracket is within `precision`
    /// (a share: 0.05 is 5 %).
    pub fn new(precision: f64) -> Search {
        Search {
            precision,
            pass: None,
            failed: None,
            retries: 0,
            seen: Vec::new(),
        }
    }

    /// Takes one step's verdict at `rate` (`client_also`: the client was
    /// limited too); says what comes next.
    pub fn record(&mut self, rate: f64, verdict: Verdict, client_also: bool) -> Next {
        self.seen.push(Seen {
            rate,
            verdict,
            client_also: client_also || verdict == Verdict::ClientLimited,
        });
        match verdict {
            Verdict::ClientLimited => {
                let lower = rate / 2.0;
                if self.pass.is_none() && self.retries < CLIENT_RETRIES && lower >= MIN_RATE {
                    self.retries += 1;
                    return Next::Retry(lower);
                }
                return Next::Stop(Stopped::ClientLimited);
            }
            Verdict::Pass => self.pass = Some(self.pass.map_or(rate, |p| p.max(rate))),
            Verdict::Fail => self.failed = Some(self.failed.map_or(rate, |f| f.min(rate))),
        }
        let next = match (self.pass, self.failed) {
            (Some(p), None) => p * 2.0,
            (None, Some(f)) => {
                if f / 2.0 < MIN_RATE {
                    return Next::Stop(Stopped::NoPass);
                }
                f / 2.0
            }
            (Some(p), Some(f)) => {
                if (f - p) / p <= self.precision {
                    return Next::Stop(Stopped::Precision);
                }
                (p + f) / 2.0
            }
            (None, None) => return Next::Stop(Stopped::NoPass),
        };
        if next > MAX_RATE {
            return Next::Stop(Stopped::MaxSteps);
        }
        Next::Rate(next)
    }

    /// The client-limited rates, in the order run.
    fn client_limited(&self) -> impl Iterator<Item = f64> + '_ {
        self.seen
            .iter()
            .filter(|s| s.verdict == Verdict::ClientLimited)
            .map(|s| s.rate)
    }

    /// The last step, when it was client-limited: the search ended on it.
    fn ended_client_limited(&self) -> Option<f64> {
        self.seen
            .last()
            .filter(|s| s.verdict == Verdict::ClientLimited)
            .map(|s| s.rate)
    }

    /// Whether the failing step at `rate` had the client limited too.
    fn failed_with_client(&self, rate: f64) -> bool {
        self.seen
            .iter()
            .any(|s| s.verdict == Verdict::Fail && s.rate == rate && s.client_also)
    }

    /// Whether the client was the limit before any step passed: no answer
    /// the server's (exit 1).
    pub fn client_before_any_pass(&self) -> bool {
        self.pass.is_none() && self.ended_client_limited().is_some()
    }

    /// The answer line, true to every step the search ran.
    pub fn answer(&self, stopped: Stopped) -> String {
        let r = super::fmt_rate;
        let ended_cl = self.ended_client_limited();
        match (self.pass, self.failed) {
            (Some(p), Some(f)) => {
                let mut s = format!(
                    "max rate meeting SLO: {} req/s (between {} and {} req/s",
                    r(p),
                    r(p),
                    r(f)
                );
                if self.failed_with_client(f) {
                    s.push_str(&format!(
                        "; at {} req/s the client was also limited, so the server may take more",
                        r(f)
                    ));
                }
                if let Some(c) = ended_cl {
                    s.push_str(&format!(
                        "; the step at {} req/s was client-limited: redline could not send it here",
                        r(c)
                    ));
                }
                s + ")"
            }
            (Some(p), None) => {
                let above = self
                    .client_limited()
                    .filter(|c| *c > p)
                    .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.min(c))));
                let tail = match (ended_cl, above) {
                    (Some(c), _) => format!(
                        "the next step, {} req/s, was client-limited: redline could not send it here",
                        r(c)
                    ),
                    (None, Some(c)) => format!(
                        "no step above it was judged: the step at {} req/s was client-limited",
                        r(c)
                    ),
                    (None, None) if self.client_limited().next().is_some() => {
                        match self.client_limited().count() {
                            1 => "the search stopped before a step failed; 1 client-limited \
                                  step was not judged"
                                .to_string(),
                            n => format!(
                                "the search stopped before a step failed; {n} client-limited \
                                 steps were not judged"
                            ),
                        }
                    }
                    (None, None) if stopped == Stopped::Interrupted => {
                        "interrupted before a step failed".to_string()
                    }
                    (None, None) => "no step failed".to_string(),
                };
                format!("max rate meeting SLO: at least {} req/s ({tail})", r(p))
            }
            (None, Some(f)) => {
                let mut s = format!("no rate met the SLO (down to {} req/s", r(f));
                if self.failed_with_client(f) {
                    s.push_str(&format!("; the client was also limited at {} req/s", r(f)));
                }
                if let Some(c) = ended_cl {
                    s.push_str(&format!(
                        "; below it the step at {} req/s was client-limited: redline itself was \
                         the limit there",
                        r(c)
                    ));
                }
                s + ")"
            }
            (None, None) => match self.client_limited().fold(None, |m: Option<f64>, c| {
                Some(m.map_or(c, |m: f64| m.min(c)))
            }) {
                Some(c) => format!(
                    "the first step was client-limited {}{} req/s: redline could not drive this \
                     rate from this machine; give it more threads (-t), cores or machines, or \
                     lift the client's limit named above",
                    if self.client_limited().count() > 1 {
                        "even at "
                    } else {
                        "at "
                    },
                    r(c)
                ),
                None if stopped == Stopped::Interrupted => {
                    "interrupted before a step ended: no answer".to_string()
                }
                None => "no step ended: no answer".to_string(),
            },
        }
    }
}
