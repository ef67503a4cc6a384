//! The redline load engine.
//!
//! A [`Plan`] (validated options, prebuilt request bytes) is run by
//! [`execute`] on thread-per-core workers, each with its own poller,
//! connections and recorder; the load modes are written once in the
//! protocol-free core (`core/`), which drives a byte-moving driver per
//! protocol (`worker/` for HTTP/1.1, `mux/` for HTTP/2) through one seam.
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
pub mod altsvc;
mod field;
pub mod h1;
pub(crate) mod head;
pub mod http2;
pub mod http3;
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
// core: the load modes, protocol-free and socket-free (the `Link` seam).
pub mod control;
mod core;
pub(crate) mod ledger;
pub(crate) mod overdue;
// driver: event loops that move bytes (HTTP/1.1, and HTTP/2 with its
// other-origin HTTP/1.1 connections), both on mio.
pub(crate) mod defer;
pub(crate) mod ioloop;
pub(crate) mod mux;
pub(crate) mod tcp;
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
