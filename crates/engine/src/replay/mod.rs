//! `redline replay`: an access log read (`log`) in the servers' own log
//! format syntax ([`format`], timestamps in `time`) and turned into an
//! open-loop schedule (one stage per second of the log, see
//! `log::Log::stages`) whose ticks send the log's requests in order (the
//! scenario hook in `scenario/replay.rs`).

pub(crate) mod format;
pub(crate) mod log;
pub(crate) mod time;

pub use format::LogFormat;
pub use log::{Group, Log, Options, Tick};
