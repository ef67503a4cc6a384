//! The protocol-free, socket-free core every driver shares: what a worker
//! is asked to do and what it hands back ([`spec`]). The request ledger
//! (`ledger.rs`), the control tick (`control.rs`) and the overdue count
//! (`overdue.rs`) belong to this layer too (see docs/ARCHITECTURE.md,
//! "Layers"); they move in here with the load modes (issue 31, point 1).

pub(crate) mod spec;
