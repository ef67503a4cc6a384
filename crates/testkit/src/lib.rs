//! Test support shared by the crates' integration tests (a dev-dependency
//! only, never published): one copy of what the test binaries used to carry
//! each on their own.
//!
//! - [`alloc`]: a counting global allocator for allocation tests;
//! - [`need`]: a real server or browser a test needs is missing: a note and
//!   a skip locally, a failure under `CI=true` ([`need::missing`], [`need::require`]);
//! - [`proc`]: run a binary with a hard time limit, its history in a
//!   temporary database, and parse its `-o json` run record;
//! - [`script`]: scripted TCP/HTTP servers on 127.0.0.1:0 whose every loop is bounded;
//! - [`pki`]: a test CA and a leaf for `localhost`/`127.0.0.1` (rcgen);
//! - [`caddy`]: Debian's Caddy (HTTP/3 on by default) on a free port with
//!   the testkit's certificate and a JSON access log;
//! - [`h3`]: a test HTTP/3 server (quinn-proto, a hand-written HTTP/3
//!   side) counting what it does, with resets and GOAWAY on demand; a UDP
//!   black hole and a closed UDP port;
//! - [`nginx`]: Debian's nginx on a free loopback port with its own prefix;
//! - [`setups`]: real servers with one known limit each, for the diagnosis
//!   (issue 30): started, run against, their own evidence read, cleaned up;
//! - [`timing`]: retrying a test whose numbers depend on the host's timing;
//! - [`chromium`]: headless Chromium: a page rendered to its DOM, or driven
//!   over DevTools ([`chromium::DevTools`]).
//!
//! Every loop here is bounded in count and time; servers are watched by PID.
#![warn(missing_docs)]

pub mod alloc;
pub mod caddy;
pub mod chromium;
pub mod h3;
pub mod need;
pub mod nginx;
pub mod pki;
pub mod proc;
pub mod script;
pub mod setups;
pub mod timing;

/// A loopback port that was free a moment ago (for servers that cannot bind
/// port 0), never one this process was given before: tests run in parallel,
/// and the kernel may hand a port just released to the next `bind(0)`, so two
/// servers could be told the same port and one test talk to the other's.
pub fn free_port() -> u16 {
    use std::sync::Mutex;
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    // Bounded: the ephemeral range has thousands of ports.
    for _ in 0..1_000 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = l.local_addr().expect("local address").port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
    panic!("no loopback port this process was not given before");
}

/// A fresh temporary directory for one test's files (unique in this
/// process by a counter, across processes by the process id).
pub fn tmpdir(tag: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "redline-test-{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create the test directory");
    d
}
