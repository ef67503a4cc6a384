//! Beyond one machine (issue 9): exact shares of a run ([`segment`]), a
//! coordinator and agents speaking line-delimited JSON over TCP
//! ([`protocol`], [`coordinator`], [`agent`]), and Kubernetes manifests for an
//! Indexed Job ([`k8s`], emitted as JSON or YAML by [`yaml`]); the merged
//! record served over HTTP after the run and fetched ([`record_http`]);
//! optional TLS between agents and coordinator ([`tls`]).
#![deny(missing_docs)]

pub mod agent;
pub mod coordinator;
pub mod k8s;
pub mod protocol;
pub mod record_http;
pub mod tls;
/// Exact shares of a run: moved to `redline-stats` so the engine uses the same arithmetic.
pub use redline_stats::segment;
pub mod yaml;
