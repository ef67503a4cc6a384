//! TLS test material and Debian's nginx, from the shared test-support crate
//! (`redline-testkit`): kept as a module so tests name `common::nginx::…`.

pub use redline_testkit::nginx::*;
pub use redline_testkit::pki::*;
pub use redline_testkit::{free_port, tmpdir};
