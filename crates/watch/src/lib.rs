//! Server side of redline (issue 8): watch the server's processes and machine
//! during a run ([`sampler`], reading [`procfs`] by hand), size the worker
//! count from measured memory ([`size`]), and read Apache, nginx and lighttpd
//! configurations to say what to tune ([`tune`]), and read the server's
//! error log for the lines that name a limit it hit ([`errlog`]).
#![deny(missing_docs)]

pub mod cgroup;
pub mod detect;
pub mod effective;
pub mod errlog;
pub mod glob;
pub mod procfs;
pub mod render;
pub mod resources;
pub mod sampler;
pub mod size;
pub mod status;
pub mod tune;

pub use procfs::Target;
pub use render::{render_text, render_windows};
pub use sampler::{Sampler, Watcher};
