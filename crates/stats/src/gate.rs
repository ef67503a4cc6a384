//! The admission gate every listener redline opens shares (the metrics
//! scrape endpoint, the record server, the coordinator's agent port): each
//! connection is served on its own thread, and at most `cap` connections may
//! be waiting for their request head (or registration line) at once. When a
//! new one arrives at the cap, the *oldest* waiting one is shut down, not the
//! new one: a flood of slow or idle clients only ever evicts itself, and a
//! legitimate client that sends its head in milliseconds gets through unless
//! `cap` newer connections arrive while it is sending it. Connections past
//! their head are counted separately against `cap * 4` (their answers have a
//! write time-out), so threads stay bounded too.

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};

/// The gate of one listener (see the module docs).
pub struct Gate {
    cap: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    /// Connections still sending their head, oldest first.
    waiting: VecDeque<(u64, TcpStream)>,
    /// Connections admitted and not yet ended (waiting or answered).
    live: usize,
}

/// One admitted connection; dropping it (the connection ended) frees its place.
pub struct Ticket {
    gate: Arc<Gate>,
    id: u64,
    heading: bool,
}

impl Gate {
    /// A gate letting at most `cap` connections wait for their head (`cap >= 1`).
    pub fn new(cap: usize) -> Arc<Gate> {
        Arc::new(Gate {
            cap: cap.max(1),
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits `s`: at the cap, the oldest connection still sending its head
    /// is shut down (its thread sees the end and returns). None when even
    /// answered connections fill `cap * 4` places (the new one is refused).
    pub fn admit(self: &Arc<Self>, s: &TcpStream) -> Option<Ticket> {
        let mut g = self.lock();
        if g.live >= self.cap * 4 && g.waiting.is_empty() {
            return None;
        }
        if g.waiting.len() >= self.cap || g.live >= self.cap * 4 {
            if let Some((_, old)) = g.waiting.pop_front() {
                let _ = old.shutdown(Shutdown::Both);
                // Its ticket still counts in `live` until its thread ends;
                // one place over the bound for a moment, never more.
            }
        }
        let id = g.next;
        g.next += 1;
        if let Ok(c) = s.try_clone() {
            g.waiting.push_back((id, c));
        }
        g.live += 1;
        Some(Ticket {
            gate: self.clone(),
            id,
            heading: true,
        })
    }

    /// Connections waiting for their head now (for tests and docs).
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }
}

impl Ticket {
    /// The head (or registration) arrived: the connection can no longer be
    /// evicted by newcomers.
    pub fn headed(&mut self) {
        if self.heading {
            self.heading = false;
            let id = self.id;
            self.gate.lock().waiting.retain(|(i, _)| *i != id);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let id = self.id;
        let mut g = self.gate.lock();
        if self.heading {
            g.waiting.retain(|(i, _)| *i != id);
        }
        g.live = g.live.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn the_oldest_waiting_connection_is_evicted_not_the_new_one() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let gate = Gate::new(2);
        let mut clients = Vec::new();
        let mut tickets = Vec::new();
        let mut served = Vec::new();
        for _ in 0..3 {
            clients.push(TcpStream::connect(a).unwrap());
            let (s, _) = l.accept().unwrap();
            tickets.push(gate.admit(&s).unwrap());
            served.push(s);
        }
        assert_eq!(gate.waiting(), 2);
        // The first one was shut down: its client reads the end at once.
        clients[0]
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        assert_eq!(clients[0].read(&mut [0u8; 8]).unwrap(), 0);
        // A headed connection is never evicted.
        tickets[2].headed();
        clients.push(TcpStream::connect(a).unwrap());
        let (s, _) = l.accept().unwrap();
        tickets.push(gate.admit(&s).unwrap());
        assert_eq!(gate.waiting(), 2);
        clients.push(TcpStream::connect(a).unwrap());
        let (s, _) = l.accept().unwrap();
        tickets.push(gate.admit(&s).unwrap());
        clients[2]
            .set_read_timeout(Some(std::time::Duration::from_millis(200)))
            .unwrap();
        assert!(clients[2].read(&mut [0u8; 8]).is_err(), "still open");
        drop(tickets);
        assert_eq!(gate.waiting(), 0);
        assert_eq!(gate.lock().live, 0);
    }
}
