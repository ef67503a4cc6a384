//! The redline load engine.
//!
//! A [`Plan`] (validated options, prebuilt request bytes) is run by
//! [`execute`] on thread-per-core workers, each with its own poller,
//! connections and recorder (HTTP/2 runs on the HTTP/2 driver's workers,
//! one tokio runtime per thread); both drivers keep their requests in the
//! request ledger and run the [`control::Control`] tick.
//! The result is one [`redline_stats::RunRecord`].
#![deny(missing_docs)]

// The modules by layer, lowest first; a module imports only its own layer
// and those below it (docs/ARCHITECTURE.md, "Layers"; checked by the test
// in `layers.rs`). `pub` only what other crates, the engine's tests, benches
// and the fuzz targets use.

// support: the OS and TLS.
pub(crate) mod sys;
mod timer;
pub mod tls;
// codec: bytes <-> HTTP messages (`http2::{frame, hpack, request}` too).
mod field;
pub mod h1;
pub(crate) mod head;
pub mod http2;
// session: the sans-IO protocol seam (`http2::conn` is HTTP/2's).
pub mod session;
// plan: what to run, built once (the schedule, scenarios and workload too).
pub(crate) mod alpn;
pub(crate) mod gen;
pub mod har;
pub mod pacer;
pub mod plan;
pub mod redirect;
pub mod replay;
pub mod scenario;
pub mod urls;
pub(crate) mod workload;
// core: protocol-free, socket-free state every driver shares.
pub mod control;
mod core;
pub(crate) mod ledger;
pub(crate) mod overdue;
// driver: event loops that move bytes (HTTP/1 on mio, HTTP/2 on tokio).
pub(crate) mod h2run;
pub(crate) mod worker;
// run: threads, the fd limit, the record.
#[cfg(test)]
mod layers;
pub mod run;

pub use plan::{
    parse_duration, Alpn, Arrival, Load, Mode, Plan, PlanArgs, PlanError, Protocol, RequestSpec,
    Wire,
};
pub use run::{execute, execute_watching, execute_with_series, EngineError, Snapshot, StopHandle};
