//! The measurements of a redline run and the record that carries them.
//!
//! Workers record into a [`Recorder`] each (no sharing on the hot path); when the
//! run ends the recorders are folded into one [`RunRecord`], the single result type
//! every report, the history and the merge of runs from several machines read.
//! Histograms are HDR log-linear histograms, so merging two records is exact.
#![deny(missing_docs)]

pub mod error;
pub mod files;
pub mod gate;
pub mod hist;
pub mod record;
pub mod recorder;
pub mod replay;
pub mod requests;
pub mod rng;
pub mod segment;
pub mod stages;
pub mod status;
pub mod time;
pub mod watch;

pub use error::{ErrorCount, ErrorKind, ErrorTally, MalformedKind};
pub use hist::{Hist, SeriesHist};
pub use record::{
    AltSvcSeen, ClientUsage, ConfigValue, Counters, Environment, Http3Endpoint, LoadModel,
    RunConfig, RunRecord, ScheduledStart, SegmentConfig, SeriesPoint, ServerConfig, ServerInfo,
    Warning, FORMAT, FORMAT_VERSION,
};
pub use recorder::{Recorder, Timing};
pub use requests::{CheckCount, Journeys, RequestStats};
pub use status::{ExpectStatus, ExpectStatusError};
pub use watch::ServerWatch;
