//! Headless Chromium for the tests: find it, render a file and read the DOM
//! after its scripts ran and the browser's log ([`chromium_dump`], for the
//! HTML reports), or drive it over the DevTools protocol ([`DevTools`], for
//! what a real browser requests).

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// The flags every headless Chromium of the tests starts with: no sandbox
/// (tests may run as root), no GPU, no background traffic of its own, no
/// first-run dialogs, /tmp instead of a small /dev/shm.
pub const HEADLESS: [&str; 6] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
    "--no-first-run",
];

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
    cmd.args(HEADLESS).args([
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

/// The Chromium process of a [`DevTools`] session: killed by PID (through
/// its handle) and its profile removed when dropped, also when a test panics.
struct ChildGuard {
    child: Child,
    profile: PathBuf,
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Messages kept for [`DevTools::next_event`] at most (the oldest go first):
/// a long session's events cannot grow without bound.
const MAX_QUEUED: usize = 100_000;

/// How long one websocket read may block before the deadline is checked again.
const READ_SLICE: Duration = Duration::from_millis(200);

/// Headless Chromium driven over the DevTools protocol: started with
/// `--remote-debugging-port=0` and a fresh profile, its websocket address
/// read from its stderr (or its profile's `DevToolsActivePort`), commands
/// answered by id with a bounded wait. Events that arrive while a command
/// waits are queued for [`DevTools::next_event`].
pub struct DevTools {
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    queued: VecDeque<Value>,
    // Dropped last: the websocket closes before the process is killed.
    _child: ChildGuard,
}

impl DevTools {
    /// Starts headless Chromium on `about:blank` with a profile under the
    /// temporary folder (`tag` names it) and connects to its DevTools
    /// websocket. None, with a note, when Chromium is not installed (a
    /// failure under `CI=true`, see [`crate::need::missing`]). Panics when
    /// it does not start within 60 s.
    pub fn launch(tag: &str) -> Option<DevTools> {
        let browser = chromium();
        if !crate::need::require("chromium (apt-get install chromium)", browser.is_some()) {
            return None;
        }
        let profile = crate::tmpdir(&format!("chromium-{tag}"));
        let child = Command::new(browser?)
            .args(HEADLESS)
            .args([
                "--remote-debugging-port=0",
                &format!("--user-data-dir={}", profile.join("p").display()),
                "about:blank",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn chromium");
        let mut guard = ChildGuard { child, profile };
        let ws_url = devtools_address(&mut guard);
        let (ws, _) = tungstenite::connect(ws_url.as_str()).expect("DevTools websocket");
        if let MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(READ_SLICE))
                .expect("a read timeout on the DevTools socket");
        }
        Some(DevTools {
            ws,
            next_id: 0,
            queued: VecDeque::new(),
            _child: guard,
        })
    }

    /// Sends `method` with `params` (to the target session `session`, or to
    /// the browser) and waits at most 60 s for its answer, which it returns
    /// (`result`); panics on a DevTools error, a closed connection or no answer.
    pub fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws
            .send(Message::text(msg.to_string()))
            .unwrap_or_else(|e| panic!("DevTools {method}: sending failed: {e}"));
        let end = Instant::now() + Duration::from_secs(60);
        while Instant::now() < end {
            let v = match self.read(end) {
                Read::Message(v) => v,
                Read::TimedOut => break,
                Read::Closed(e) => panic!("DevTools {method}: the connection ended: {e}"),
            };
            if v["id"] == json!(id) {
                if let Some(e) = v.get("error") {
                    panic!("DevTools {method}: {e}");
                }
                return v["result"].clone();
            }
            if v.get("method").is_some() {
                if self.queued.len() >= MAX_QUEUED {
                    self.queued.pop_front();
                }
                self.queued.push_back(v);
            }
        }
        panic!("DevTools {method}: no answer within 60 s");
    }

    /// The next event (a message with a `method`): one queued while a
    /// command waited, else one read before `until`; None when none came by
    /// then or the connection ended.
    pub fn next_event(&mut self, until: Instant) -> Option<Value> {
        if let Some(v) = self.queued.pop_front() {
            return Some(v);
        }
        while Instant::now() < until {
            match self.read(until) {
                Read::Message(v) if v.get("method").is_some() => return Some(v),
                Read::Message(_) => {}
                Read::TimedOut | Read::Closed(_) => return None,
            }
        }
        None
    }

    /// Drops the queued events (e.g. between two page visits).
    pub fn clear_events(&mut self) {
        self.queued.clear();
    }

    /// Reads messages until the event `method` of target session `session`
    /// arrives (true) or `limit` passes (false).
    pub fn wait_event(&mut self, session: &str, method: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        for _ in 0..10_000_000 {
            let Some(v) = self.next_event(end) else {
                return false;
            };
            if v["method"] == json!(method) && v["sessionId"] == json!(session) {
                return true;
            }
        }
        false
    }

    /// Opens a new tab on `about:blank` and attaches to it: (target id,
    /// session id).
    pub fn new_tab(&mut self) -> (String, String) {
        let target = self.call(None, "Target.createTarget", json!({"url": "about:blank"}));
        let tid = target["targetId"]
            .as_str()
            .expect("Target.createTarget: a targetId")
            .to_string();
        let att = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": tid, "flatten": true}),
        );
        let sid = att["sessionId"]
            .as_str()
            .expect("Target.attachToTarget: a sessionId")
            .to_string();
        (tid, sid)
    }

    /// One message read before `until` (in slices of [`READ_SLICE`]).
    fn read(&mut self, until: Instant) -> Read {
        while Instant::now() < until {
            match self.ws.read() {
                Ok(m) => {
                    let Ok(text) = m.to_text() else { continue };
                    match serde_json::from_str::<Value>(text) {
                        Ok(v) => return Read::Message(v),
                        Err(_) => continue,
                    }
                }
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Read::Closed(e.to_string()),
            }
        }
        Read::TimedOut
    }
}

/// What one bounded read of the DevTools socket gave.
enum Read {
    Message(Value),
    TimedOut,
    Closed(String),
}

/// The DevTools websocket address of a Chromium just started with
/// `--remote-debugging-port=0`: from its stderr ("DevTools listening on
/// ws://…") or, when that line does not come, from the `DevToolsActivePort`
/// file in its profile (port, then path). Waits at most 60 s, watching the
/// process by PID: panics when it exits or the time passes.
fn devtools_address(guard: &mut ChildGuard) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = guard.child.stderr.take().expect("chromium's stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr)
            .lines()
            .take(10_000)
            .map_while(Result::ok)
        {
            if let Some(p) = line.find("ws://") {
                let _ = tx.send(line[p..].trim().to_string());
            }
        }
    });
    let port_file = guard.profile.join("p").join("DevToolsActivePort");
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        if let Ok(url) = rx.recv_timeout(Duration::from_millis(100)) {
            return url;
        }
        if let Ok(text) = std::fs::read_to_string(&port_file) {
            let mut lines = text.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                if port.trim().parse::<u16>().is_ok() && path.starts_with('/') {
                    return format!("ws://127.0.0.1:{}{}", port.trim(), path.trim());
                }
            }
        }
        if let Ok(Some(status)) = guard.child.try_wait() {
            panic!("chromium exited ({status}) before it printed its DevTools address");
        }
    }
    panic!("chromium did not print its DevTools address within 60 s");
}
