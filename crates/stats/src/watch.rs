//! What was seen of the server's processes and machine during a run (issue 8).
//! Placeholder: filled in by the server-watch work.

use serde::{Deserialize, Serialize};

/// Samples of the watched server processes and the machine during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerWatch {
    /// What was asked to be watched (PIDs or process names).
    pub targets: Vec<String>,
}
