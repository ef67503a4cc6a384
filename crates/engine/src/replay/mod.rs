//! `redline replay`: an access log read ([`log`]) in the servers' own log
//! format syntax ([`format`], timestamps in [`time`]) and turned into an
//! open-loop schedule (one stage per second of the log, see
//! [`log::Log::stages`]) whose ticks send the log's requests in order (the
//! scenario hook in `scenario/replay.rs`).

pub mod format;
pub mod log;
pub mod time;

pub use format::LogFormat;
pub use log::{Group, Log, Options, Tick};
