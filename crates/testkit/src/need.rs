//! What a test needs from the machine: a real server or browser that is
//! missing is a note and a skip locally and a failure in CI (`CI` set to
//! anything but empty, `false` or `0`, where `.ci/run` installs them), so a
//! broken install step cannot turn the suite green by skipping.

/// True under CI.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `what` is missing: a note locally, a panic in CI.
pub fn missing(what: &str) {
    if in_ci() {
        panic!("{what} is not installed, and CI must run this test (.ci/run installs it)");
    }
    eprintln!("NOTE: {what} is not installed; skipped");
}

/// `present`, after [`missing`] when it is not.
pub fn require(what: &str, present: bool) -> bool {
    if !present {
        missing(what);
    }
    present
}
