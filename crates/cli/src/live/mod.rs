//! The live view (issue 21): a full-screen ratatui display on stderr while
//! `run`, `find` or `coordinate` goes on, in the alternate screen, left
//! before the report is printed.
//!
//! The engine never waits for it: the engine's progress callback (about
//! every 250 ms) only copies the snapshot into a [`Model`] behind a mutex;
//! a thread of its own draws at most 10 times a second, and only when the
//! model changed (about 4 times a second), and reads the keys.
//! `q` and Ctrl-C do what Ctrl-C does without the view
//! ([`crate::cli::interrupt`]: the first stops the run gracefully and the
//! report is printed marked interrupted, the second quits at once); for
//! `coordinate`, which has no graceful stop, they quit at once as Ctrl-C
//! always did. The terminal is restored on every way out: the view's drop,
//! a quit, a signal and a panic (a hook restores it before the message).
//!
//! Shown only when stderr is a terminal, `-q`/`--no-tui` are not given and
//! `TERM` is not `dumb`; otherwise the callers keep the one-line progress.

pub mod draw;
pub mod model;

pub use model::{Model, Second};

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The terminal is in the live view's state (raw, alternate screen).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Held while a frame is written, so a restore never interleaves with one.
static TERM: Mutex<()> = Mutex::new(());
/// The panic hook is installed once.
static HOOK: std::sync::Once = std::sync::Once::new();

/// At most this many frames a second.
const FRAME: Duration = Duration::from_millis(100);

/// Whether a live view is on the screen now (Ctrl-C's message is not printed then).
pub fn active() -> bool {
    ACTIVE.load(Ordering::SeqCst)
}

/// Puts the terminal back (main screen, cooked mode, cursor shown); does
/// nothing when no view is up. Safe from any thread, a panic hook included.
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    // A frame being written finishes first (bounded: a panic while drawing
    // holds the lock on this very thread).
    let mut guard = None;
    for _ in 0..20 {
        match TERM.try_lock() {
            Ok(g) => {
                guard = Some(g);
                break;
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                guard = Some(p.into_inner());
                break;
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                std::thread::sleep(Duration::from_millis(10))
            }
        }
    }
    let mut err = std::io::stderr();
    let _ = crossterm::execute!(
        err,
        crossterm::terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = err.flush();
    drop(guard);
}

/// Whether the live view should be shown: stderr is a terminal, it was not
/// turned off, and the terminal can draw.
pub fn wanted(off: bool) -> bool {
    use std::io::IsTerminal;
    !off && std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// What `q` and Ctrl-C do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnQuit {
    /// As Ctrl-C: the first stops gracefully, the second quits (run, find).
    Interrupt,
    /// Quit at once with exit code 130 (coordinate).
    Exit,
}

/// A live view on the screen; dropping it leaves the alternate screen.
pub struct LiveView {
    model: Arc<Mutex<Model>>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LiveView {
    /// Enters the alternate screen and starts the drawing thread; None when
    /// the terminal refuses (the caller keeps the progress line).
    pub fn start(mut model: Model, on_quit: OnQuit) -> Option<LiveView> {
        model.quit_at_once = on_quit == OnQuit::Exit;
        HOOK.call_once(|| {
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                prev(info);
            }));
        });
        if on_quit == OnQuit::Exit {
            // A signal (SIGINT from elsewhere, SIGTERM) quits as before, with
            // the terminal put back.
            let _ = ctrlc::set_handler(|| {
                restore();
                std::process::exit(crate::exit::Exit::Interrupted.code());
            });
        }
        crossterm::terminal::enable_raw_mode().ok()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut err = std::io::stderr();
        if crossterm::execute!(
            err,
            crossterm::terminal::EnterAlternateScreen,
            crossterm::cursor::Hide
        )
        .is_err()
        {
            restore();
            return None;
        }
        let backend = ratatui::backend::CrosstermBackend::new(std::io::stderr());
        let Ok(mut term) = ratatui::Terminal::new(backend) else {
            restore();
            return None;
        };
        let model = Arc::new(Mutex::new(model));
        let done = Arc::new(AtomicBool::new(false));
        let (m, d) = (model.clone(), done.clone());
        let thread = std::thread::Builder::new()
            .name("redline-live".into())
            .spawn(move || {
                let mut last_draw: Option<Instant> = None;
                // The model's change count last drawn (None: draw the next frame).
                let mut drawn: Option<u64> = None;
                while !d.load(Ordering::SeqCst) && active() {
                    if last_draw.is_none_or(|t| t.elapsed() >= FRAME) {
                        // The model is copied under its lock, drawn outside
                        // it, and only when it changed (snapshots come about
                        // every 250 ms: about 4 frames a second).
                        let snap = {
                            let mut g = lock(&m);
                            // A signal or --abort-on-fail stopped the run.
                            if on_quit == OnQuit::Interrupt
                                && !g.stopping
                                && crate::cli::stop_handle().is_stopped()
                            {
                                g.stopping = true;
                                g.changes += 1;
                            }
                            (drawn != Some(g.changes)).then(|| g.clone())
                        };
                        if let Some(snap) = snap {
                            let g = TERM.lock().unwrap_or_else(|p| p.into_inner());
                            if active() {
                                let _ = term.draw(|f| draw::draw(f, &snap));
                            }
                            drop(g);
                            drawn = Some(snap.changes);
                        }
                        last_draw = Some(Instant::now());
                    }
                    let wait = FRAME.saturating_sub(last_draw.map_or(FRAME, |t| t.elapsed()));
                    let polled = crossterm::event::poll(wait.max(Duration::from_millis(5)));
                    if polled.is_err() {
                        // The terminal is gone: no key can come; wait out the
                        // frame instead of asking again at once (a busy loop).
                        std::thread::sleep(wait.max(Duration::from_millis(5)));
                    }
                    if let Ok(true) = polled {
                        if let Ok(ev) = crossterm::event::read() {
                            if is_quit(&ev) {
                                let log: Vec<String> = {
                                    let mut g = lock(&m);
                                    g.stopping = true;
                                    g.changes += 1;
                                    let p = g.log_prefix.clone();
                                    g.log.iter().map(|l| format!("{p}{l}")).collect()
                                };
                                quit(on_quit, &log);
                            } else if matches!(ev, crossterm::event::Event::Resize(..)) {
                                // Drawn at the next frame (never more than 10 a second).
                                let _ = term.autoresize();
                                drawn = None;
                            }
                        }
                    }
                }
            });
        let Ok(thread) = thread else {
            restore();
            return None;
        };
        Some(LiveView {
            model,
            done,
            thread: Some(thread),
        })
    }

    /// The model, to feed (hold the guard briefly: the drawing thread waits).
    pub fn model(&self) -> MutexGuard<'_, Model> {
        lock(&self.model)
    }

    fn stop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        restore();
    }
}

impl Drop for LiveView {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock(m: &Mutex<Model>) -> MutexGuard<'_, Model> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `q`, `Q` or Ctrl-C (raw mode turns Ctrl-C into a key, not a signal).
fn is_quit(ev: &crossterm::event::Event) -> bool {
    use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
    match ev {
        Event::Key(k) if k.kind != KeyEventKind::Release => match k.code {
            KeyCode::Char('q') | KeyCode::Char('Q') => true,
            KeyCode::Char('c') | KeyCode::Char('C') => k.modifiers.contains(KeyModifiers::CONTROL),
            _ => false,
        },
        _ => false,
    }
}

/// `log`: the view's log lines, printed when it quits at once (they would
/// have been on the terminal without it).
fn quit(on_quit: OnQuit, log: &[String]) {
    match on_quit {
        OnQuit::Interrupt => crate::cli::interrupt(),
        OnQuit::Exit => {
            restore();
            for l in log {
                eprintln!("{l}");
            }
            eprintln!("redline: interrupted");
            std::process::exit(crate::exit::Exit::Interrupted.code());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};

    #[test]
    fn quit_keys() {
        let k = |c, m| Event::Key(KeyEvent::new(c, m));
        assert!(is_quit(&k(KeyCode::Char('q'), KeyModifiers::NONE)));
        assert!(is_quit(&k(KeyCode::Char('c'), KeyModifiers::CONTROL)));
        assert!(!is_quit(&k(KeyCode::Char('c'), KeyModifiers::NONE)));
        assert!(!is_quit(&k(KeyCode::Enter, KeyModifiers::NONE)));
    }

    #[test]
    fn restore_without_a_view_does_nothing() {
        restore();
        assert!(!active());
    }
}
