//! What the server's own error log said during a run (`run --watch`,
//! `--server-config`): the lines that name a limit it hit, counted by the
//! resource and the directive that sets it, with one example line each
//! (shortened, query strings and credentials removed).

use serde::{Deserialize, Serialize};

/// The server's error log(s) over the run: what was appended to them
/// between the run's start and its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerLog {
    /// The log files read (absolute paths).
    pub paths: Vec<String>,
    /// Bytes read from them (what the run appended; at most the last 8 MiB
    /// of each).
    pub bytes_read: u64,
    /// The lines that name a limit, one entry per (resource, directive,
    /// message), most frequent first.
    #[serde(default)]
    pub findings: Vec<LogFinding>,
}

/// Lines of an error log that say the same limit was hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LogFinding {
    /// What ran out: `worker_pool` (workers or connection slots: Apache
    /// MaxRequestWorkers, nginx worker_connections, php-fpm pm.max_children,
    /// lighttpd server.max-connections), `fds` (file descriptors),
    /// `upstream` (the backend behind a proxy) or `memory`.
    pub resource: String,
    /// The directive (or setting) that sets the limit, as the server's
    /// documentation spells it (`MaxRequestWorkers`, `worker_connections`,
    /// `pm.max_children`, ...).
    pub directive: String,
    /// What the lines say, in the server's words (the pattern matched, e.g.
    /// `server reached MaxRequestWorkers setting`).
    pub message: String,
    /// Matching lines.
    pub count: u64,
    /// When the first one was written, in seconds since the run started,
    /// when its time stamp could be read (whole seconds for nginx, php-fpm
    /// and lighttpd).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_t: Option<f64>,
    /// The first such line, at most 240 characters, with query strings
    /// (`?…`) and credentials removed.
    pub example: String,
    /// The log it was read from.
    #[serde(default)]
    pub path: String,
}
