//! The redline load engine.
//!
//! A [`Plan`] (validated options, prebuilt request bytes) is run by
//! [`execute`] on thread-per-core workers, each with its own poller,
//! connections and recorder (HTTP/2 runs on
//! [`h2run`] workers, one tokio runtime per thread); both drivers keep their
//! requests in a [`ledger::Ledger`] and run the [`control::Control`] tick.
//! The result is one [`redline_stats::RunRecord`].
#![deny(missing_docs)]

pub mod alpn;
pub mod control;
pub mod gen;
pub mod h1;
pub mod h2run;
pub mod har;
pub mod head;
pub mod http2;
pub mod ledger;
pub mod overdue;
pub mod pacer;
pub mod plan;
pub mod redirect;
pub mod replay;
pub mod run;
pub mod scenario;
pub mod session;
pub mod sys;
mod timer;
pub mod tls;
pub mod urls;
pub mod worker;
pub mod workload;

pub use plan::{
    parse_duration, Alpn, Arrival, Load, Mode, Plan, PlanArgs, PlanError, Protocol, RequestSpec,
    Wire,
};
pub use run::{execute, execute_watching, execute_with_series, EngineError, Snapshot, StopHandle};
