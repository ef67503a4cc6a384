//! Headless Chromium for the HTML reports: find it, render a file, read the
//! DOM after its scripts ran and the browser's log.

use std::process::{Command, Stdio};
use std::time::Duration;

/// The installed Chromium (or Chrome), if any.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        })
}

/// Renders an HTML file in headless Chromium (profile under `dir`, optional
/// screenshot) and returns (the DOM after its scripts ran, the browser's log);
/// None, with a note, when no Chromium is installed.
pub fn chromium_dump(
    page: &std::path::Path,
    dir: &std::path::Path,
    screenshot: Option<&std::path::Path>,
) -> Option<(String, String)> {
    let Some(browser) = chromium() else {
        crate::need::missing("chromium (apt-get install chromium)");
        return None;
    };
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--enable-logging=stderr",
        "--v=0",
        &format!("--user-data-dir={}", dir.join("profile").display()),
        "--window-size=1280,2000",
    ]);
    if let Some(shot) = screenshot {
        cmd.arg(format!("--screenshot={}", shot.display()));
    }
    // To files, not pipes: a DOM over the pipe's 64 KiB would block the
    // browser while nothing reads until it exits.
    let (dom_path, log_path) = (dir.join("chromium-dom.html"), dir.join("chromium.log"));
    let child = cmd
        .args(["--dump-dom", &format!("file://{}", page.display())])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&dom_path).expect("DOM file"))
        .stderr(std::fs::File::create(&log_path).expect("log file"))
        .spawn()
        .expect("spawn chromium");
    crate::proc::wait_limit(child, Duration::from_secs(90));
    let read = |p: &std::path::Path| {
        String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
    };
    Some((read(&dom_path), read(&log_path)))
}
