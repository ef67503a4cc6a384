//! The load modes on the core alone, with a scripted fake connection (no
//! socket, no thread, no clock: every `now` is made up): the closed loop's
//! exact count, `--requests-per-conn` blocks, redirects, failed connects,
//! the open loop's release and connection cap, stage levels and the stop's
//! accounting. The HTTP/1 driver runs every mode on this core
//! (`crate::worker`); the CLI tests keep what only a real server shows.

use super::spec::WorkerSpec;
use super::*;
use crate::control::Live;
use crate::pacer::{Levels, Pacer};
use crate::plan::{Arrival, Plan, PlanArgs, StageArgs};
use crate::session::Answer;
use redline_stats::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};

/// A fake driver: connects at once (or never, or refused), takes every
/// request, answers only when the test says.
struct Fake {
    states: Vec<ConnState>,
    /// Every request submitted: its slot and what it was.
    sent: Vec<(u32, Outgoing)>,
    connects: u32,
    /// Connects are refused.
    refuse: bool,
    /// Connects never finish.
    hang: bool,
}

impl Fake {
    fn new(slots: usize) -> Fake {
        Fake {
            states: vec![ConnState::Closed; slots],
            sent: Vec::new(),
            connects: 0,
            refuse: false,
            hang: false,
        }
    }

    fn open(&self) -> usize {
        self.states
            .iter()
            .filter(|s| **s != ConnState::Closed)
            .count()
    }
}

impl Link for Fake {
    fn state(&self, i: u32) -> ConnState {
        self.states[i as usize]
    }
    fn connect(&mut self, core: &mut Core<'_>, i: u32, now: Instant) {
        let _ = core.destination(i);
        self.connects += 1;
        core.waiting();
        core.socket_opened();
        self.states[i as usize] = ConnState::Connecting;
        if self.hang {
            return;
        }
        if self.refuse {
            return core.connect_failed(self, i, ErrorKind::Refused, "refused".into(), now);
        }
        core.connected(i, Duration::from_micros(50));
        self.states[i as usize] = ConnState::Idle;
        core.connection_ready(self, i, now);
    }
    fn submit(
        &mut self,
        _core: &mut Core<'_>,
        i: u32,
        what: Outgoing,
        _t: Duration,
        _now: Instant,
    ) {
        self.states[i as usize] = ConnState::Reading;
        self.sent.push((i, what));
    }
    fn close(&mut self, core: &mut Core<'_>, i: u32) {
        if self.states[i as usize] != ConnState::Closed {
            core.open -= 1;
        }
        self.states[i as usize] = ConnState::Closed;
    }
    fn settle(&mut self, _i: u32) {}
    fn idle(&mut self, i: u32) {
        self.states[i as usize] = ConnState::Idle;
    }
    fn expire(&mut self, _core: &mut Core<'_>, _now: Instant) {}
    fn reusable(&self, _i: u32) -> bool {
        true
    }
    fn recycle(&mut self, _i: u32, _a: Box<Answer>) {}
}

fn plan(f: impl FnOnce(&mut PlanArgs)) -> Plan {
    let mut a = PlanArgs::new("http://127.0.0.1:9/");
    f(&mut a);
    Plan::build(a).expect("plan")
}

fn spec(start: Instant, connections: u64, budget: Option<u64>) -> WorkerSpec {
    WorkerSpec {
        index: 0,
        first_vu: 0,
        start,
        connections,
        budget,
        deadline: None,
        pacer: None,
        stop: Arc::new(AtomicBool::new(false)),
        live: Arc::new(Live::default()),
        levels: None,
    }
}

/// Runs the core's control loop on the fake link: a pass every `step` of
/// made-up time (at most `passes`), then `each` (the test's server); true
/// when the worker finished.
fn drive(
    core: &mut Core<'_>,
    link: &mut Fake,
    t0: Instant,
    passes: usize,
    step: Duration,
    mut each: impl FnMut(&mut Core<'_>, &mut Fake, Instant),
) -> bool {
    let mut now = t0;
    for _ in 0..passes {
        if core.tick(link, now) {
            return true;
        }
        now += step;
        each(core, link, now);
    }
    false
}

/// Answers every request on the wire with `status` (a `Location` of
/// `location` when given) at `now`; how many it answered.
fn answer_all(
    core: &mut Core<'_>,
    link: &mut Fake,
    now: Instant,
    status: u16,
    location: Option<&str>,
) -> usize {
    let busy: Vec<u32> = (0..link.states.len() as u32)
        .filter(|&i| link.states[i as usize].busy())
        .collect();
    for &i in &busy {
        let answer = location.map(|l| {
            Box::new(Answer {
                location: Some(l.to_string()),
                ..Answer::default()
            })
        });
        let a = Answered {
            status,
            body_bytes: 10,
            answer,
            sent: now,
            first_byte: Some(now),
            wire: 100,
        };
        core.complete(link, i, now, a);
    }
    busy.len()
}

#[test]
fn closed_loop_sends_exactly_n_on_c_connections() {
    let p = plan(|a| a.requests = Some(10));
    let t0 = Instant::now();
    let mut core = Core::new(&p, spec(t0, 3, Some(10)), 3);
    let mut link = Fake::new(3);
    core.start();
    drive(
        &mut core,
        &mut link,
        t0,
        100,
        Duration::from_millis(1),
        |core, link, now| {
            answer_all(core, link, now, 200, None);
        },
    );
    assert_eq!(link.sent.len(), 10);
    assert_eq!(link.connects, 3, "keep-alive: one connection per slot");
    assert!(link
        .sent
        .iter()
        .all(|(_, w)| *w == Outgoing::Plan { close: false }));
    let r = core.finish(&link);
    let c = &r.recorder.counters;
    assert_eq!((c.sent, c.completed, c.failed, c.not_sent), (10, 10, 0, 0));
}

#[test]
fn requests_per_conn_makes_ceil_n_over_k_connections() {
    let p = plan(|a| {
        a.requests = Some(10);
        a.requests_per_conn = Some(3);
    });
    let t0 = Instant::now();
    let mut core = Core::new(&p, spec(t0, 2, Some(10)), 2);
    let mut link = Fake::new(2);
    core.start();
    drive(
        &mut core,
        &mut link,
        t0,
        200,
        Duration::from_millis(1),
        |core, link, now| {
            answer_all(core, link, now, 200, None);
        },
    );
    assert_eq!(link.sent.len(), 10);
    assert_eq!(link.connects, 4, "⌈10/3⌉ connections");
    // The third request on each connection asks to close it.
    let closing = link
        .sent
        .iter()
        .filter(|(_, w)| *w == Outgoing::Plan { close: true })
        .count();
    assert_eq!(closing, 3, "{:?}", link.sent);
    let r = core.finish(&link);
    assert_eq!(r.recorder.counters.completed, 10);
}

#[test]
fn redirects_are_followed_as_one_request() {
    let p = plan(|a| {
        a.requests = Some(4);
        a.follow_redirects = true;
    });
    let t0 = Instant::now();
    let mut core = Core::new(&p, spec(t0, 2, Some(4)), 2);
    let mut link = Fake::new(2);
    core.start();
    let mut now = t0;
    for _ in 0..100 {
        if core.tick(&mut link, now) {
            break;
        }
        now += Duration::from_millis(1);
        // Every first answer redirects, every hop's answer is final.
        let hop: Vec<bool> = (0..2).map(|i| core.slots[i].redir.is_some()).collect();
        for i in 0..2u32 {
            if !link.states[i as usize].busy() {
                continue;
            }
            let (status, answer) = if hop[i as usize] {
                (200, None)
            } else {
                let a = Answer {
                    location: Some("/next".into()),
                    ..Answer::default()
                };
                (301, Some(Box::new(a)))
            };
            let a = Answered {
                status,
                body_bytes: 0,
                answer,
                sent: now,
                first_byte: Some(now),
                wire: 50,
            };
            core.complete(&mut link, i, now, a);
        }
    }
    let hops = link
        .sent
        .iter()
        .filter(|(_, w)| *w == Outgoing::Hop)
        .count();
    assert_eq!((link.sent.len(), hops), (8, 4), "{:?}", link.sent);
    let r = core.finish(&link);
    let c = &r.recorder.counters;
    assert_eq!((c.sent, c.completed, c.redirects), (4, 4, 4));
    assert_eq!(link.connects, 2, "same-origin hops reuse the connection");
}

#[test]
fn too_many_redirects_fail_the_request_once() {
    let p = plan(|a| {
        a.requests = Some(2);
        a.follow_redirects = true;
        a.max_redirs = Some(2);
    });
    let t0 = Instant::now();
    let mut core = Core::new(&p, spec(t0, 1, Some(2)), 1);
    let mut link = Fake::new(1);
    core.start();
    drive(
        &mut core,
        &mut link,
        t0,
        100,
        Duration::from_millis(1),
        |core, link, now| {
            answer_all(core, link, now, 302, Some("/loop"));
        },
    );
    let r = core.finish(&link);
    let c = &r.recorder.counters;
    assert_eq!((c.sent, c.completed, c.failed), (2, 0, 2));
    assert_eq!(link.sent.len(), 6, "each request: itself and 2 hops");
}

#[test]
fn refused_connects_fail_the_held_requests() {
    let p = plan(|a| a.requests = Some(5));
    let t0 = Instant::now();
    let mut core = Core::new(&p, spec(t0, 1, Some(5)), 1);
    let mut link = Fake::new(1);
    link.refuse = true;
    core.start();
    let mut now = t0;
    for _ in 0..100 {
        if core.tick(&mut link, now) {
            break;
        }
        now += Duration::from_millis(1);
    }
    let r = core.finish(&link);
    let c = &r.recorder.counters;
    assert_eq!((c.sent, c.failed, c.not_sent), (0, 5, 0));
    assert_eq!(link.connects, 5);
    assert_eq!(core_open_after(&link), 0);
}

fn core_open_after(link: &Fake) -> usize {
    link.open()
}

#[test]
fn a_stop_counts_held_requests_as_not_sent() {
    let p = plan(|a| a.requests = Some(100));
    let t0 = Instant::now();
    let s = spec(t0, 3, Some(100));
    let stop = s.stop.clone();
    let mut core = Core::new(&p, s, 3);
    let mut link = Fake::new(3);
    link.hang = true;
    core.start();
    assert!(!core.tick(&mut link, t0));
    assert_eq!(link.connects, 3);
    stop.store(true, Ordering::Relaxed);
    let mut now = t0;
    let mut done = false;
    for _ in 0..100 {
        now += Duration::from_millis(10);
        if core.tick(&mut link, now) {
            done = true;
            break;
        }
    }
    assert!(done, "a stop with nothing in flight ends the worker");
    let r = core.finish(&link);
    let c = &r.recorder.counters;
    assert_eq!((c.sent, c.not_sent, c.in_flight_at_end), (0, 3, 0));
    assert!(r.interrupted);
}

#[test]
fn open_loop_releases_on_schedule_within_the_connection_cap() {
    let p = plan(|a| a.rate = Some(1000.0));
    let t0 = Instant::now();
    let mut s = spec(t0, 4, None);
    s.pacer = Some(Pacer::new(
        Arrival::Constant,
        1000.0,
        0,
        1,
        Some(20),
        None,
        1,
    ));
    let mut core = Core::new(&p, s, 4);
    let mut link = Fake::new(4);
    core.start();
    let mut now = t0;
    let mut most_busy = 0;
    for step in 0..400 {
        if core.tick(&mut link, now) {
            break;
        }
        most_busy = most_busy.max(link.states.iter().filter(|s| s.busy()).count());
        now += Duration::from_micros(250);
        // The server answers every 5 ms: requests queue for a connection.
        if step % 20 == 19 {
            answer_all(&mut core, &mut link, now, 200, None);
        }
    }
    assert!(most_busy <= 4, "never more requests out than connections");
    let r = core.finish(&link);
    let c = &r.recorder.counters;
    assert_eq!(
        (c.scheduled, c.completed, c.failed, c.not_sent),
        (20, 20, 0, 0)
    );
    assert!(
        c.waited_for_connection > 0,
        "a slow server makes requests wait"
    );
    assert_eq!(r.peak_open, 4);
}

#[test]
fn stage_levels_start_and_park_slots() {
    let p = plan(|a| {
        a.requests = None;
        a.stages = Some(StageArgs {
            stages: crate::pacer::parse_stages("2s:4,2s:1").expect("stages"),
            rate: false,
            step: true,
        });
    });
    let t0 = Instant::now();
    let staged = p.staged.as_ref().expect("staged");
    let mut s = spec(t0, 4, None);
    s.levels = Some(Levels::new(staged.profile.clone(), 0, 1));
    s.deadline = Some(t0 + Duration::from_secs(4));
    let mut core = Core::new(&p, s, 4);
    let mut link = Fake::new(4);
    core.start();
    let mut now = t0;
    let mut busy_at = Vec::new();
    for _ in 0..1000 {
        if core.tick(&mut link, now) {
            break;
        }
        busy_at.push((now - t0, link.states.iter().filter(|s| s.busy()).count()));
        now += Duration::from_millis(10);
        answer_all(&mut core, &mut link, now, 200, None);
    }
    let at = |secs: f64| {
        busy_at
            .iter()
            .rev()
            .find(|(t, _)| t.as_secs_f64() <= secs)
            .map(|x| x.1)
    };
    assert_eq!(at(1.5), Some(4), "{busy_at:?}");
    assert_eq!(at(3.5), Some(1), "the level fell: slots park");
    let r = core.finish(&link);
    assert_eq!(r.recorder.counters.failed, 0, "parking is not an error");
}

/// Refuses every request on the wire (HTTP/2 GOAWAY or REFUSED_STREAM: not
/// processed); how many.
fn refuse_all(core: &mut Core<'_>, link: &mut Fake, now: Instant) -> usize {
    let busy: Vec<u32> = (0..link.states.len() as u32)
        .filter(|&i| link.states[i as usize].busy())
        .collect();
    for &i in &busy {
        core.refused(link, i, ErrorKind::GoAway, "refused".into(), now);
    }
    busy.len()
}

#[test]
fn a_refused_request_goes_again_once_and_counts_once() {
    let p = plan(|a| a.requests = Some(3));
    let t0 = Instant::now();
    let mut core = Core::new(&p, spec(t0, 1, Some(3)), 1);
    let mut link = Fake::new(1);
    core.start();
    let mut now = t0;
    let mut refuse_next = true;
    for _ in 0..100 {
        if core.tick(&mut link, now) {
            break;
        }
        now += Duration::from_millis(1);
        // Every request is refused once, then answered.
        if refuse_next {
            if refuse_all(&mut core, &mut link, now) > 0 {
                refuse_next = false;
            }
        } else if answer_all(&mut core, &mut link, now, 200, None) > 0 {
            refuse_next = true;
        }
    }
    assert_eq!(link.sent.len(), 6, "each request twice on the wire");
    assert_eq!(link.connects, 4, "a new connection after each refusal");
    let r = core.finish(&link);
    let c = &r.recorder.counters;
    assert_eq!((c.sent, c.completed, c.failed, c.not_sent), (3, 3, 0, 0));
    assert_eq!(c.retried, 3);
}

#[test]
fn a_request_refused_twice_fails_once() {
    let p = plan(|a| a.requests = Some(2));
    let t0 = Instant::now();
    let mut core = Core::new(&p, spec(t0, 1, Some(2)), 1);
    let mut link = Fake::new(1);
    core.start();
    drive(
        &mut core,
        &mut link,
        t0,
        100,
        Duration::from_millis(1),
        |core, link, now| {
            refuse_all(core, link, now);
        },
    );
    let r = core.finish(&link);
    let c = &r.recorder.counters;
    assert_eq!((c.sent, c.completed, c.failed, c.retried), (2, 0, 2, 2));
    assert_eq!(link.sent.len(), 4);
}

/// A scenario file for the tests (two requests, the second after a think time).
fn scenario_file(name: &str, body: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("redline-core-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let f = dir.join("s.toml");
    std::fs::write(&f, body).expect("write");
    f
}

#[test]
fn scenario_users_think_between_requests() {
    let f = scenario_file(
        "think",
        "mode = \"session\"\n[[step]]\nname = \"a\"\npath = \"/a\"\nthink = \"100ms\"\n\
         [[step]]\nname = \"b\"\npath = \"/b\"\n",
    );
    let p = plan(|a| {
        a.requests = Some(4);
        a.scenario = Some((f.clone(), false));
    });
    let t0 = Instant::now();
    let mut core = Core::new(&p, spec(t0, 1, Some(4)), 1);
    let mut link = Fake::new(1);
    core.start();
    let mut now = t0;
    let mut sent_at = Vec::new();
    for _ in 0..1000 {
        if core.tick(&mut link, now) {
            break;
        }
        while sent_at.len() < link.sent.len() {
            sent_at.push(now - t0);
        }
        now += Duration::from_millis(10);
        answer_all(&mut core, &mut link, now, 200, None);
    }
    let _ = std::fs::remove_dir_all(f.parent().expect("dir"));
    let names: Vec<usize> = link
        .sent
        .iter()
        .map(|(_, w)| match w {
            Outgoing::Scenario { r, .. } => *r,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(names, [0, 1, 0, 1], "a, then b, in order");
    // b goes 100 ms (the think time) after a's answer, a right after b's.
    let gap = |k: usize| sent_at[k] - sent_at[k - 1];
    assert!(gap(1) >= Duration::from_millis(100), "{sent_at:?}");
    assert!(gap(2) < Duration::from_millis(50), "{sent_at:?}");
    let r = core.finish(&link);
    assert_eq!(r.recorder.counters.completed, 4);
    let per: Vec<u64> = r.requests.iter().map(|s| s.completed).collect();
    assert_eq!(per, [2, 2], "per-request numbers");
}
