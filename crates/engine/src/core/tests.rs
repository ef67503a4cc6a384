//! Every load mode on every protocol, without a socket (issue 31, point 5):
//! the core over the real HTTP/1 driver (`worker/`, slot = connection) and
//! the real multiplexing driver (`mux/`, slots as streams on `i % C`
//! connections, private connections to other origins) over HTTP/2 and over
//! HTTP/3 (QUIC sessions exchanging datagrams with a `quinn-proto` server,
//! QUIC's timers included), each on its own sans-IO sessions, against the
//! scripted in-memory server of `wire_tests.rs`, in made-up time (a pass
//! every `step`: the core's tick, then the network's). Each test is written
//! once, generic over the driver, and runs as `<test>::http1`,
//! `<test>::http2` and `<test>::http3`; what only a multiplexed protocol
//! says (a refused stream, GOAWAY, the server's stream cap, a server
//! allowing no stream) follows as `<test>::http2` and `<test>::http3`, and
//! QUIC's own timers (loss recovery, the idle time-out) at the end. Every
//! run checks the ledger's identity (each scheduled request ended once:
//! completed, failed, not sent or in flight at the end) and the counts a
//! user reads. The CLI tests (`crates/cli/tests`) keep what only a real
//! server or process shows; a mode's behaviour is tested here.

use super::spec::WorkerResult;
use super::wire_tests::{go_offline, plan, spec, Connects, Net, Reply, Req, Server};
use super::Core;
use crate::control::Live;
use crate::mux::wire_tests::H3Net;
use crate::plan::{Load, Plan, PlanArgs, StageArgs};
use crate::worker::H1Link;
use redline_stats::{Counters, ErrorKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MS: Duration = Duration::from_millis(1);

/// Runs each generic test on each protocol listed (`[name: Net, …]`): a
/// module per test, a `#[test]` per protocol in it (`<test>::http3`).
macro_rules! on {
    ($protos:tt $($name:ident),* $(,)?) => {
        $(on!(@one $name $protos);)*
    };
    (@one $name:ident [$($proto:ident: $net:ty),*]) => {
        mod $name {
            $(#[test]
            fn $proto() {
                super::$name::<$net>()
            })*
        }
    };
}

on!(
    [
        http1: crate::worker::H1Link,
        http2: crate::mux::MuxLink,
        http3: crate::mux::wire_tests::H3Net
    ]
    closed_loop_sends_exactly_n_on_c_connections,
    requests_per_conn_caps_each_connection,
    without_keepalive_each_request_has_its_connection,
    a_duration_run_stops_sending_and_drains,
    the_drain_ends_at_the_grace_with_requests_in_flight,
    a_stop_drains_and_counts_held_requests_as_not_sent,
    open_loop_releases_on_schedule_within_the_connection_cap,
    open_loop_latency_counts_from_the_intended_send_time,
    stage_levels_start_and_park_slots,
    a_linear_ramp_adds_slots_over_time,
    rate_stages_release_each_stage_at_its_rate,
    scenario_users_think_between_requests,
    scenario_requests_go_to_their_hosts,
    journeys_overdue_steps_are_published,
    journeys_thinking_at_the_deadline_are_stopped_with_nothing_unanswered,
    a_server_stall_shows_in_the_later_steps_of_journeys,
    redirects_are_followed_as_one_request,
    a_redirect_to_another_origin_goes_there,
    timed_redirect_runs_account_for_every_request,
    too_many_redirects_fail_the_request_once,
    live_seconds_count_what_completed,
    refused_connects_fail_the_held_requests,
    hanging_connects_time_out,
    unanswered_requests_time_out,
    a_reused_connection_closed_by_the_server,
);

/// One worker on driver `N`, its clock and its server's network.
struct Run<'p, N: Net> {
    core: Core<'p>,
    link: N,
    t0: Instant,
    now: Instant,
    live: Arc<Live>,
    stop: Arc<AtomicBool>,
}

impl<'p, N: Net> Run<'p, N> {
    /// The worker of `plan` (counting journeys overdue past `ages`), started.
    fn new(plan: &'p Plan, ages: &[Duration]) -> Run<'p, N> {
        go_offline();
        let t0 = Instant::now();
        let s = spec(plan, t0, ages);
        let (live, stop) = (s.live.clone(), s.stop.clone());
        let (link, slots) = N::build(plan, &s);
        let mut core = Core::new(plan, s, slots);
        core.start();
        Run {
            core,
            link,
            t0,
            now: t0,
            live,
            stop,
        }
    }

    /// A pass every `step` (the core's tick, then the network's) until the
    /// worker is done or `limit` of made-up time passed; `watch` sees each
    /// pass (with the time since the start). True when done.
    fn until(
        &mut self,
        srv: &mut Server,
        step: Duration,
        limit: Duration,
        mut watch: impl FnMut(&Core<'_>, &N, Duration),
    ) -> bool {
        let end = self.now + limit;
        while self.now <= end {
            if self.core.tick(&mut self.link, self.now) {
                return true;
            }
            self.link.serve(&mut self.core, srv, self.now);
            watch(&self.core, &self.link, self.now - self.t0);
            self.now += step;
        }
        false
    }

    /// Runs to the end (at most a minute of made-up time), a pass every
    /// millisecond; the worker must finish.
    fn run_to_end(mut self, srv: &mut Server) -> WorkerResult {
        let done = self.until(srv, MS, Duration::from_secs(60), |_, _, _| {});
        assert!(done, "{}: the worker did not finish", N::NAME);
        self.finish()
    }

    fn elapsed(&self) -> Duration {
        self.now - self.t0
    }

    fn finish(self) -> WorkerResult {
        self.core.finish(&self.link)
    }
}

/// HTTP/2 and HTTP/3 with `n` streams per connection (HTTP/1.1: one
/// request per connection anyway).
fn streams<N: Net>(a: &mut PlanArgs, n: u32) {
    if N::NAME != H1Link::NAME {
        a.streams = Some(n);
    }
}

/// The counters, after checking the ledger's identity: every request
/// scheduled ended exactly once.
fn ledger(r: &WorkerResult) -> &Counters {
    let c = &r.recorder.counters;
    assert_eq!(
        c.scheduled,
        c.completed + c.failed + c.not_sent + c.in_flight_at_end,
        "{c:?}"
    );
    c
}

/// Errors of `kind`.
fn errors(r: &WorkerResult, kind: ErrorKind) -> u64 {
    r.recorder
        .errors
        .kinds()
        .filter(|(k, _)| *k == kind)
        .map(|(_, n)| n)
        .sum()
}

/// A script that answers each request `after` its arrival with `status`.
fn slow(status: u16, after: Duration) -> impl FnMut(&Req, Instant) -> Reply {
    move |r, now| {
        if now - r.at >= after {
            Reply::Answer(status, None)
        } else {
            Reply::Wait
        }
    }
}

fn closed_loop_sends_exactly_n_on_c_connections<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(10);
        a.connections = Some(3);
    });
    let mut srv = Server::answering(200);
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed, c.not_sent), (10, 10, 0, 0));
    assert_eq!(srv.seen.len(), 10, "the server read each request once");
    assert!(srv.seen.iter().all(|q| q.method == "GET" && q.path == "/"));
    assert_eq!(srv.accepted, 3, "keep-alive: -c connections, each reused");
    assert_eq!(c.connections_opened, 3);
    assert_eq!((c.non_2xx, c.body_bytes), (0, 100), "ten 10-byte bodies");
    if N::NAME == H3Net::NAME {
        assert_eq!(c.quic_handshakes, 3, "each connection's QUIC handshake");
    }
}

fn requests_per_conn_caps_each_connection<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(10);
        a.connections = Some(2);
        a.requests_per_conn = Some(3);
    });
    let mut srv = Server::answering(200);
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed), (10, 10, 0));
    for conn in 0..srv.accepted {
        let on = srv.seen.iter().filter(|q| q.conn == conn).count();
        assert!(on <= 3, "connection {conn} carried {on} requests");
    }
    assert_eq!(srv.accepted, 4, "⌈10/3⌉ connections");
    if N::NAME == H1Link::NAME {
        // The third request on a connection asks the server to close it.
        let closing: Vec<u32> = srv.seen.iter().filter(|q| q.close).map(|q| q.nth).collect();
        assert_eq!(closing, [2, 2, 2], "{:?}", srv.seen);
    }
}

fn without_keepalive_each_request_has_its_connection<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(12);
        a.connections = Some(3);
        a.keepalive = false;
    });
    let mut srv = Server::answering(200);
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed), (12, 12, 0));
    assert_eq!(srv.accepted, 12);
    assert_eq!(c.connections_opened, 12);
    assert!(srv.seen.iter().all(|q| q.nth == 0));
}

fn a_duration_run_stops_sending_and_drains<N: Net>() {
    let p = plan::<N>(|a| {
        a.duration = Some(Duration::from_secs(1));
        a.connections = Some(2);
        streams::<N>(a, 2);
    });
    // Answers take 300 ms: each slot sends at 0, 0.3, 0.6 and 0.9 s; the
    // last ones are answered in the drain after the deadline.
    let mut srv = Server::new(slow(200, 300 * MS));
    let mut run = Run::<N>::new(&p, &[]);
    let slots = run.core.slots.len() as u64;
    assert!(run.until(&mut srv, MS, Duration::from_secs(3), |_, _, _| {}));
    let took = run.elapsed();
    let r = run.finish();
    let c = ledger(&r);
    assert_eq!(c.completed, 4 * slots, "{c:?}");
    assert_eq!((c.failed, c.not_sent, c.in_flight_at_end), (0, 0, 0));
    assert!(srv
        .seen
        .iter()
        .all(|q| q.at - srv.seen[0].at < Duration::from_secs(1)));
    assert!(
        took >= Duration::from_millis(1200) && took < Duration::from_millis(1250),
        "done when the last answer came: {took:?}"
    );
}

fn the_drain_ends_at_the_grace_with_requests_in_flight<N: Net>() {
    let p = plan::<N>(|a| {
        a.duration = Some(Duration::from_millis(500));
        a.connections = Some(2);
    });
    let mut srv = Server::new(|_, _| Reply::Wait);
    let mut run = Run::<N>::new(&p, &[]);
    let slots = run.core.slots.len() as u64;
    assert!(run.until(&mut srv, MS, Duration::from_secs(3), |_, _, _| {}));
    let took = run.elapsed();
    let r = run.finish();
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed), (slots, 0, 0));
    assert_eq!(
        c.in_flight_at_end, slots,
        "unanswered at the end, not failed"
    );
    // The grace is min(1 s, --timeout) after the deadline.
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_millis(1510),
        "{took:?}"
    );
}

fn a_stop_drains_and_counts_held_requests_as_not_sent<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(1000);
        a.connections = Some(4);
    });
    // Two connects finish, the others never; answers take 50 ms.
    let mut srv = Server::new(slow(200, 50 * MS));
    srv.accept_only = Some(2);
    let mut run = Run::<N>::new(&p, &[]);
    let mut held = 0;
    assert!(!run.until(&mut srv, MS, 220 * MS, |core, link, _| {
        held = (0..core.slots.len() as u32)
            .filter(|&i| core.slots[i as usize].has_request && link.state(i).opening())
            .count() as u64;
    }));
    let out = run.core.ledger.in_flight();
    assert!(held > 0 && out > 0, "held {held}, in flight {out}");
    // Ctrl-C (or --abort-on-fail, or another worker's fatal error).
    run.stop.store(true, Ordering::Relaxed);
    let stopped = run.t0 + run.elapsed();
    assert!(run.until(&mut srv, MS, Duration::from_secs(2), |_, _, _| {}));
    let took = run.elapsed();
    let r = run.finish();
    let c = ledger(&r);
    assert!(r.interrupted);
    assert_eq!(
        c.not_sent, held,
        "requests waiting for a connect were not sent"
    );
    assert_eq!(
        (c.failed, c.in_flight_at_end),
        (0, 0),
        "the drain answered the rest"
    );
    assert_eq!(c.completed, c.sent);
    assert!(
        srv.seen.iter().all(|q| q.at <= stopped),
        "nothing sent after the stop"
    );
    assert!(took < 280 * MS, "done when the last answer came: {took:?}");
}

fn open_loop_releases_on_schedule_within_the_connection_cap<N: Net>() {
    let p = plan::<N>(|a| {
        a.rate = Some(1000.0);
        a.requests = Some(20);
        a.connections = Some(4);
        streams::<N>(a, 1);
    });
    // The server answers 5 ms after each request: at 1,000 req/s five
    // would be out at once, the cap allows four, so requests wait.
    let mut srv = Server::new(slow(200, 5 * MS));
    let mut run = Run::<N>::new(&p, &[]);
    let mut most = 0;
    assert!(
        run.until(&mut srv, MS / 4, Duration::from_secs(2), |core, _, _| {
            most = most.max(core.ledger.in_flight());
        })
    );
    let r = run.finish();
    let c = ledger(&r);
    assert_eq!(
        (c.scheduled, c.completed, c.failed, c.not_sent),
        (20, 20, 0, 0)
    );
    assert!(most <= 4, "never more requests out than the cap: {most}");
    assert!(
        c.waited_for_connection > 0,
        "a slow server makes requests wait"
    );
    assert!(srv.most_open <= 4, "{}", srv.most_open);
    assert_eq!(srv.accepted, 4);
}

fn open_loop_latency_counts_from_the_intended_send_time<N: Net>() {
    let p = plan::<N>(|a| {
        a.rate = Some(100.0);
        a.requests = Some(10);
        a.connections = Some(1);
        streams::<N>(a, 1);
    });
    // One connection, 25 ms per answer, a request every 10 ms: the queue
    // grows; the tenth request is answered about 160 ms after its
    // intended time although each took 25 ms on the wire.
    let mut srv = Server::new(slow(200, 25 * MS));
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.completed, c.failed), (10, 0));
    let max_latency = Duration::from_micros(r.recorder.latency.max());
    let max_service = Duration::from_micros(r.recorder.service.max());
    assert!(max_latency >= 150 * MS, "{max_latency:?}");
    assert!(max_service < 30 * MS, "{max_service:?}");
}

/// `--stages` (`rate`: `--rate-stages`; `step`: `--step`).
fn stages(a: &mut PlanArgs, stages: &str, rate: bool, step: bool) {
    a.stages = Some(StageArgs {
        stages: crate::pacer::parse_stages(stages).expect("stages"),
        rate,
        step,
    });
}

fn stage_levels_start_and_park_slots<N: Net>() {
    let p = plan::<N>(|a| {
        stages(a, "1s:4,1s:1,1s:3", false, true);
        streams::<N>(a, 2);
    });
    let mut srv = Server::new(slow(200, 10 * MS));
    let mut run = Run::<N>::new(&p, &[]);
    let mut at = Vec::new();
    assert!(
        run.until(&mut srv, MS, Duration::from_secs(5), |core, _, t| {
            at.push((t, core.ledger.in_flight()));
        })
    );
    let level = |secs: f64| {
        let w: Vec<u64> = at
            .iter()
            .filter(|(t, _)| (t.as_secs_f64() - secs).abs() < 0.1)
            .map(|x| x.1)
            .collect();
        *w.iter().max().expect("samples")
    };
    assert_eq!(level(0.5), 4, "first stage: 4 at once");
    assert_eq!(level(1.5), 1, "the level fell: slots park");
    assert_eq!(level(2.5), 3, "and it rose again");
    let r = run.finish();
    let c = ledger(&r);
    assert_eq!(c.failed, 0, "parking is not an error");
    assert_eq!(c.in_flight_at_end, 0);
    if N::NAME == H1Link::NAME {
        // 4 at the start, 2 more reopened for the last step.
        assert_eq!(c.connections_opened, 6);
    } else {
        // Levels count streams: 2 connections of 2 streams, kept while
        // their slots park.
        assert_eq!(c.connections_opened, 2);
    }
}

fn a_linear_ramp_adds_slots_over_time<N: Net>() {
    let p = plan::<N>(|a| {
        stages(a, "2s:8", false, false);
        streams::<N>(a, 4);
    });
    let mut srv = Server::new(slow(200, 10 * MS));
    let mut run = Run::<N>::new(&p, &[]);
    let mut at = vec![0u64; 21];
    assert!(
        run.until(&mut srv, MS, Duration::from_secs(4), |core, _, t| {
            let k = (t.as_millis() / 100) as usize;
            if k < at.len() {
                at[k] = at[k].max(core.ledger.in_flight());
            }
        })
    );
    assert!(at[1] <= 2, "{at:?}");
    assert!(at[19] >= 7, "{at:?}");
    assert!(
        at[..20].windows(2).all(|w| w[0] <= w[1]),
        "up, never down: {at:?}"
    );
    let r = run.finish();
    assert_eq!(ledger(&r).failed, 0);
}

fn rate_stages_release_each_stage_at_its_rate<N: Net>() {
    let p = plan::<N>(|a| {
        stages(a, "1s:50,1s:200", true, true);
        a.connections = Some(8);
    });
    let mut srv = Server::answering(200);
    let mut run = Run::<N>::new(&p, &[]);
    assert!(run.until(&mut srv, MS, Duration::from_secs(4), |_, _, _| {}));
    let t0 = run.t0;
    let r = run.finish();
    let c = ledger(&r);
    let in_second = |s: u64| {
        srv.seen
            .iter()
            .filter(|q| (q.at - t0).as_secs() == s)
            .count()
    };
    assert!((49..=51).contains(&in_second(0)), "{}", in_second(0));
    assert!((199..=201).contains(&in_second(1)), "{}", in_second(1));
    assert_eq!(c.completed, 250);
}

/// A scenario file for a test (removed by the caller).
fn scenario_file(name: &str, body: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "redline-modes-{}-{name}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    let f = dir.join("s.toml");
    std::fs::write(&f, body).expect("write");
    f
}

fn scenario_users_think_between_requests<N: Net>() {
    let f = scenario_file(
        "think",
        "mode = \"session\"\n[[step]]\nname = \"a\"\npath = \"/a\"\nthink = \"100ms\"\n\
         [[step]]\nname = \"b\"\npath = \"/b\"\n",
    );
    let p = plan::<N>(|a| {
        a.requests = Some(4);
        a.connections = Some(1);
        a.scenario = Some((f.clone(), false));
    });
    let _ = std::fs::remove_dir_all(f.parent().expect("dir"));
    let mut srv = Server::answering(200);
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let paths: Vec<&str> = srv.seen.iter().map(|q| q.path.as_str()).collect();
    assert_eq!(paths, ["/a", "/b", "/a", "/b"], "a, then b, in order");
    // b goes 100 ms (the think time) after a's answer, a right after b's.
    let gap = |k: usize| srv.seen[k].at - srv.seen[k - 1].at;
    assert!(gap(1) >= 100 * MS && gap(1) < 110 * MS, "{:?}", gap(1));
    assert!(gap(2) < 5 * MS, "{:?}", gap(2));
    let c = ledger(&r);
    assert_eq!(c.completed, 4);
    let per: Vec<u64> = r.requests.iter().map(|s| s.completed).collect();
    assert_eq!(per, [2, 2], "per-request numbers");
}

fn scenario_requests_go_to_their_hosts<N: Net>() {
    let f = scenario_file(
        "hosts",
        "mode = \"session\"\n[hosts]\napi = \"http://127.0.0.2:9\"\n\
         [[step]]\nname = \"web\"\npath = \"/web\"\n\
         [[step]]\nname = \"api\"\nhost = \"api\"\npath = \"/api\"\n",
    );
    let p = plan::<N>(|a| {
        a.requests = Some(4);
        a.connections = Some(1);
        a.scenario = Some((f.clone(), false));
    });
    let _ = std::fs::remove_dir_all(f.parent().expect("dir"));
    let mut srv = Server::answering(200);
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.completed, c.failed), (4, 0));
    let went: Vec<(String, String)> = srv
        .seen
        .iter()
        .map(|q| (q.path.clone(), q.addr.ip().to_string()))
        .collect();
    let web = ("/web".to_string(), "127.0.0.1".to_string());
    let api = ("/api".to_string(), "127.0.0.2".to_string());
    assert_eq!(went, [web.clone(), api.clone(), web, api]);
    if N::NAME == H1Link::NAME {
        assert_eq!(srv.accepted, 4, "a new connection at each change of host");
    } else {
        assert_eq!(
            srv.accepted, 2,
            "the run's connection and one kept for the other host"
        );
    }
}

fn journeys_overdue_steps_are_published<N: Net>() {
    let f = scenario_file(
        "journeys",
        "mode = \"session\"\n[[step]]\nname = \"a\"\npath = \"/a\"\n\
         [[step]]\nname = \"b\"\npath = \"/b\"\n",
    );
    // A journey arrives every 125 ms; the server never answers its second step.
    let p = plan::<N>(|a| {
        a.rate = Some(8.0);
        a.duration = Some(Duration::from_secs(2));
        a.connections = Some(50);
        a.scenario = Some((f.clone(), false));
        streams::<N>(a, 1);
    });
    let _ = std::fs::remove_dir_all(f.parent().expect("dir"));
    let ages = [100 * MS, Duration::from_secs(1)];
    let mut srv = Server::new(|r, _| match r.path.as_str() {
        "/a" => Reply::Answer(200, None),
        _ => Reply::Wait,
    });
    let mut run = Run::<N>::new(&p, &ages);
    assert!(!run.until(&mut srv, MS, 500 * MS, |_, _, _| {}));
    // Published at 500 ms: the steps of the journeys that began at 0, 125,
    // 250 and 375 ms are over 100 ms late, none over 1 s.
    let overdue = run.live.journey_overdue.lock().expect("lock").clone();
    assert_eq!(overdue, [4, 0], "{:?}", srv.seen);
    assert!(run.until(&mut srv, MS, Duration::from_secs(5), |_, _, _| {}));
    let r = run.finish();
    let c = ledger(&r);
    assert_eq!(c.completed as usize, srv.count("/a"));
    assert_eq!(c.in_flight_at_end as usize, srv.count("/b"));
    let j = r.journeys.expect("journeys");
    assert_eq!(j.completed, 0, "{j:?}");
}

/// A session scenario of three steps with `think` between them.
fn three_steps(tag: &str, think: &str) -> std::path::PathBuf {
    scenario_file(
        tag,
        &format!(
            "mode = \"session\"\nthink = \"{think}\"\n\
             [[step]]\nname = \"a\"\npath = \"/a\"\n\
             [[step]]\nname = \"b\"\npath = \"/b\"\n\
             [[step]]\nname = \"c\"\npath = \"/c\"\n"
        ),
    )
}

fn journeys_thinking_at_the_deadline_are_stopped_with_nothing_unanswered<N: Net>() {
    let f = three_steps("deadline", "1s");
    // (Enough connections that no arrival waits for one.)
    let p = plan::<N>(|a| {
        a.rate = Some(10.0);
        a.duration = Some(Duration::from_secs(4));
        a.connections = Some(40);
        a.scenario = Some((f.clone(), false));
        streams::<N>(a, 5);
    });
    let _ = std::fs::remove_dir_all(f.parent().expect("dir"));
    let mut srv = Server::new(slow(200, 20 * MS));
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    // A user still thinking at the deadline has its journey stopped: its
    // next step was never due, so it is no request at all.
    assert_eq!(
        (c.not_sent, c.in_flight_at_end, c.failed),
        (0, 0, 0),
        "{c:?}"
    );
    let j = r.journeys.expect("journeys");
    assert_eq!((j.arrived, j.started, j.not_started), (40, 40, 0), "{j:?}");
    // Those that arrived in the first 2 s did their three steps (the last
    // 2 s after the arrival), the others were stopped.
    assert_eq!((j.completed, j.abandoned_stop), (20, 20), "{j:?}");
    assert_eq!(j.completed + j.abandoned, j.started, "{j:?}");
    // Each step's latency runs from its intended time (the journey's start
    // and the think times before it), not from the arrival (from which
    // step c would take over 2 s).
    for q in &r.requests {
        assert_eq!(q.sent, q.completed, "{}", q.name);
        assert!(q.latency.max() < 100_000, "{}: {}", q.name, q.latency.max());
    }
}

fn a_server_stall_shows_in_the_later_steps_of_journeys<N: Net>() {
    let f = three_steps("stall", "100ms");
    let p = plan::<N>(|a| {
        a.rate = Some(20.0);
        a.duration = Some(Duration::from_secs(3));
        a.connections = Some(100);
        a.scenario = Some((f.clone(), false));
        streams::<N>(a, 1);
    });
    let _ = std::fs::remove_dir_all(f.parent().expect("dir"));
    let run = Run::<N>::new(&p, &[]);
    // The server answers in 5 ms, but nothing between 1.2 s and 2.2 s.
    let t0 = run.t0;
    let mut srv = Server::new(move |r, now| {
        let stalled = (1200 * MS..2200 * MS).contains(&(now - t0));
        if stalled || now - r.at < 5 * MS {
            Reply::Wait
        } else {
            Reply::Answer(200, None)
        }
    });
    let r = run.run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.failed, c.in_flight_at_end), (0, 0), "{c:?}");
    // Step c of every journey the stall held is timed from the journey's
    // start plus its think times: the stall shows in it for the journeys
    // that arrived (every 50 ms) from 1.0 s, whose step c was due at the
    // stall's start, to 1.8 s, whose step c went 400 ms late after it.
    let last = &r.requests[2];
    let slow: u64 = last
        .latency
        .inner()
        .iter_recorded()
        .filter(|x| x.value_iterated_to() >= 400_000)
        .map(|x| x.count_at_value())
        .sum();
    assert!(
        (16..=17).contains(&slow),
        "{slow} of {} step c over 400 ms",
        last.completed
    );
}

/// `-n requests -c connections -L` against a server whose `/` redirects
/// with `status` to `to` and which answers anything else with 200: the
/// worker's result and the server.
fn followed<N: Net>(
    requests: u64,
    connections: u64,
    status: u16,
    to: &'static str,
) -> (WorkerResult, Server) {
    let p = plan::<N>(|a| {
        a.requests = Some(requests);
        a.connections = Some(connections);
        a.follow_redirects = true;
    });
    let mut srv = Server::new(move |r, _| match r.path.as_str() {
        "/" => Reply::Answer(status, Some(to.into())),
        _ => Reply::Answer(200, None),
    });
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    (r, srv)
}

fn redirects_are_followed_as_one_request<N: Net>() {
    let (r, srv) = followed::<N>(4, 2, 301, "/next");
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.redirects), (4, 4, 4));
    assert_eq!((srv.count("/"), srv.count("/next")), (4, 4));
    assert_eq!(srv.accepted, 2, "same-origin hops reuse the connection");
    assert_eq!(c.non_2xx, 0, "the final answers count, not the redirects");
}

fn a_redirect_to_another_origin_goes_there<N: Net>() {
    let (r, srv) = followed::<N>(3, 1, 302, "http://127.0.0.2:9/there");
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed, c.redirects), (3, 3, 0, 3));
    let there: Vec<String> = srv
        .seen
        .iter()
        .filter(|q| q.path == "/there")
        .map(|q| q.addr.to_string())
        .collect();
    assert_eq!(there, ["127.0.0.2:9"; 3]);
    assert!(srv
        .seen
        .iter()
        .filter(|q| q.path == "/")
        .all(|q| q.addr.to_string() == "127.0.0.1:9"));
}

fn timed_redirect_runs_account_for_every_request<N: Net>() {
    for open in [false, true] {
        let p = plan::<N>(|a| {
            a.duration = Some(Duration::from_secs(1));
            a.follow_redirects = true;
            a.connections = Some(if open { 8 } else { 4 });
            a.rate = open.then_some(300.0);
            streams::<N>(a, 1);
        });
        // Each request goes to another origin and is answered there 5 ms later.
        let mut srv = Server::new(|r, now| match r.path.as_str() {
            "/" => Reply::Answer(302, Some("http://127.0.0.2:9/end".into())),
            _ if now - r.at >= 5 * MS => Reply::Answer(200, None),
            _ => Reply::Wait,
        });
        let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
        let c = ledger(&r);
        assert_eq!(c.failed, 0, "open loop {open}: {c:?}");
        assert!(c.completed > 100, "open loop {open}: {c:?}");
        // One hop per completed request, and per request still out after its hop.
        assert!(
            c.completed <= c.redirects && c.redirects <= c.completed + c.in_flight_at_end,
            "open loop {open}: {c:?}"
        );
        assert_eq!(c.non_2xx, 0, "the final answers count");
        assert_eq!(srv.count("/end") as u64, c.completed + c.in_flight_at_end);
    }
}

fn too_many_redirects_fail_the_request_once<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(2);
        a.connections = Some(1);
        a.follow_redirects = true;
        a.max_redirs = Some(2);
    });
    let mut srv = Server::new(|_, _| Reply::Answer(302, Some("/loop".into())));
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed), (2, 0, 2));
    assert_eq!(errors(&r, ErrorKind::TooManyRedirects), 2);
    assert_eq!(srv.seen.len(), 6, "each request: itself and 2 hops");
}

fn live_seconds_count_what_completed<N: Net>() {
    let p = plan::<N>(|a| {
        a.duration = Some(Duration::from_secs(3));
        a.connections = Some(1);
        streams::<N>(a, 1);
    });
    let mut srv = Server::new(slow(200, 10 * MS));
    let mut run = Run::<N>::new(&p, &[]);
    assert!(!run.until(&mut srv, MS, 2500 * MS, |_, _, _| {}));
    let live: Vec<u64> = run
        .live
        .seconds
        .lock()
        .expect("lock")
        .iter()
        .map(|s| s.requests)
        .collect();
    // A request every 10 ms (and the pass after its answer).
    assert_eq!(live.len(), 2, "finished seconds only: {live:?}");
    assert!(live.iter().all(|&n| (90..=100).contains(&n)), "{live:?}");
    assert_eq!(
        run.live.completed.load(Ordering::Relaxed),
        run.core.rec.counters.completed
    );
    assert!(run.until(&mut srv, MS, Duration::from_secs(2), |_, _, _| {}));
    let r = run.finish();
    ledger(&r);
}

fn refused_connects_fail_the_held_requests<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(5);
        a.connections = Some(1);
    });
    let mut srv = Server::answering(200);
    srv.connects = Connects::Refuse;
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.sent, c.failed, c.not_sent), (0, 5, 0));
    assert_eq!(errors(&r, ErrorKind::Refused), 5);
    assert_eq!(srv.refused, 5, "a connect per request");
}

fn hanging_connects_time_out<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(2);
        a.connections = Some(1);
        a.connect_timeout = Duration::from_millis(200);
    });
    let mut srv = Server::answering(200);
    srv.connects = Connects::Hang;
    let mut run = Run::<N>::new(&p, &[]);
    assert!(run.until(&mut srv, MS, Duration::from_secs(2), |_, _, _| {}));
    let took = run.elapsed();
    let r = run.finish();
    let c = ledger(&r);
    assert_eq!((c.sent, c.failed), (0, 2));
    assert_eq!(errors(&r, ErrorKind::ConnectTimeout), 2);
    assert!(
        took >= 400 * MS && took < 410 * MS,
        "one after the other: {took:?}"
    );
    if N::NAME == H3Net::NAME {
        // A QUIC handshake that never finishes: its datagrams went out
        // (Initial packets), none came back.
        assert!(c.bytes_written > 0 && c.bytes_read == 0, "{c:?}");
        assert_eq!(c.quic_handshakes, 0);
    }
}

fn unanswered_requests_time_out<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(3);
        a.connections = Some(1);
        a.timeout = Duration::from_millis(100);
    });
    // The second request is never answered.
    let mut srv = Server::new(|r, _| match r.nth {
        1 => Reply::Wait,
        _ => Reply::Answer(200, None),
    });
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed), (3, 2, 1));
    assert_eq!(errors(&r, ErrorKind::Timeout), 1);
    let conns = srv.accepted;
    if N::NAME == H1Link::NAME {
        assert_eq!(
            conns, 2,
            "HTTP/1.1 cannot take a request back: a new connection"
        );
    } else {
        assert_eq!(
            conns, 1,
            "HTTP/2 and HTTP/3 reset the stream, the connection stays"
        );
    }
}

fn a_reused_connection_closed_by_the_server<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(4);
        a.connections = Some(1);
    });
    // Each connection's second request meets the server's close.
    let mut srv = Server::new(|r, _| match r.nth {
        0 => Reply::Answer(200, None),
        _ => Reply::Close,
    });
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    // On every protocol a GET sent as the server closed goes again once, on
    // a new connection (RFC 9110 §9.2.2; HTTP/3: the server's
    // CONNECTION_CLOSE with H3_NO_ERROR left it unprocessed).
    assert_eq!((c.sent, c.completed, c.failed, c.retried), (4, 4, 0, 3));
    assert_eq!(srv.accepted, 4);
}

// HTTP/2 and HTTP/3: what an HTTP/1.1 server cannot say (a stream refused,
// GOAWAY, a stream cap).

on!(
    [
        http2: crate::mux::MuxLink,
        http3: crate::mux::wire_tests::H3Net
    ]
    a_refused_stream_goes_again_once,
    a_stream_refused_twice_fails_once,
    goaway_sends_unprocessed_streams_on_a_new_connection,
    requests_wait_for_a_stream_under_the_servers_cap,
    a_server_allowing_no_stream_fails_requests_at_the_timeout,
    a_server_allowing_no_stream_ends_every_load_on_time,
    open_loop_through_goaways_ends_every_request_once,
);

/// HTTP/2's REFUSED_STREAM, HTTP/3's H3_REQUEST_REJECTED: not processed,
/// sent again once.
fn a_refused_stream_goes_again_once<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(3);
        a.connections = Some(1);
    });
    let mut first = true;
    let mut srv = Server::new(move |_, _| {
        if std::mem::take(&mut first) {
            Reply::Refuse
        } else {
            Reply::Answer(200, None)
        }
    });
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed, c.retried), (3, 3, 0, 1));
    assert_eq!(srv.seen.len(), 4);
}

fn a_stream_refused_twice_fails_once<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(2);
        a.connections = Some(1);
        a.streams = Some(1);
    });
    let mut srv = Server::new(|_, _| Reply::Refuse);
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed, c.retried), (2, 0, 2, 2));
    assert_eq!(errors(&r, ErrorKind::StreamReset), 2);
    assert_eq!(srv.seen.len(), 4);
}

fn goaway_sends_unprocessed_streams_on_a_new_connection<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(6);
        a.connections = Some(1);
        a.streams = Some(2);
    });
    // The first connection's second stream meets GOAWAY (HTTP/2: last
    // stream 1; HTTP/3: naming the second stream).
    let mut srv = Server::new(|r, _| match (r.conn, r.nth) {
        (0, 1) => Reply::GoAway,
        _ => Reply::Answer(200, None),
    });
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed, c.retried), (6, 6, 0, 1));
    assert_eq!(srv.accepted, 2, "the group's connection replaced once");
    assert_eq!(c.connections_opened, 2);
}

fn requests_wait_for_a_stream_under_the_servers_cap<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(20);
        a.connections = Some(1);
        a.streams = Some(10);
    });
    let mut srv = Server::new(slow(200, 5 * MS));
    srv.max_streams = Some(2);
    let mut run = Run::<N>::new(&p, &[]);
    let mut most = 0;
    assert!(
        run.until(&mut srv, MS, Duration::from_secs(2), |core, _, _| {
            most = most.max(core.ledger.in_flight());
        })
    );
    let r = run.finish();
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed), (20, 20, 0));
    assert_eq!(most, 10, "ten slots have a request out");
    assert_eq!(
        srv.most_waiting, 2,
        "the server never had more than 2 streams"
    );
    if N::NAME == H3Net::NAME {
        // QUIC's stream limit comes with the handshake: the client never
        // opens a stream over it, the rest wait for MAX_STREAMS.
        assert_eq!((srv.refused_streams, c.retried), (0, 0));
    } else {
        // The first flight went before the server's SETTINGS: 8 of its 10
        // streams were refused and went again, waiting for a free stream.
        assert_eq!((srv.refused_streams, c.retried), (8, 8));
    }
    assert_eq!(srv.accepted, 1);
}

fn a_server_allowing_no_stream_fails_requests_at_the_timeout<N: Net>() {
    let p = plan::<N>(|a| {
        a.requests = Some(2);
        a.connections = Some(1);
        a.streams = Some(2);
        a.timeout = Duration::from_millis(300);
    });
    let mut srv = Server::answering(200);
    srv.max_streams = Some(0);
    let mut run = Run::<N>::new(&p, &[]);
    assert!(run.until(&mut srv, MS, Duration::from_secs(2), |_, _, _| {}));
    let took = run.elapsed();
    let r = run.finish();
    let c = ledger(&r);
    assert_eq!((c.completed, c.failed), (0, 2));
    assert_eq!(errors(&r, ErrorKind::NoStream), 2);
    assert!(srv.seen.is_empty());
    // HTTP/2's first flight goes before the server's SETTINGS (refused,
    // sent again); QUIC's limit of 0 is known from the handshake.
    let refused = if N::NAME == H3Net::NAME { 0 } else { 2 };
    assert_eq!(
        (u64::from(srv.refused_streams), c.retried),
        (refused, refused)
    );
    // (HTTP/3: the requests wait from the end of the handshake, 2 passes.)
    assert!(took >= 300 * MS && took < 310 * MS, "{took:?}");
}

/// Sets a test's load on the plan's arguments.
type SetLoad = fn(&mut PlanArgs);

/// A server that never allows a stream does not hold the run past its end
/// and `--timeout`, in any load: requests waiting for a stream fail (or are
/// not sent, or in flight, at the end).
fn a_server_allowing_no_stream_ends_every_load_on_time<N: Net>() {
    let loads: [(&str, SetLoad); 4] = [
        ("-n 6 -c 2", |a| {
            a.requests = Some(6);
            a.connections = Some(2);
        }),
        ("-n 6 -c 1 --streams 4", |a| {
            a.requests = Some(6);
            a.connections = Some(1);
            a.streams = Some(4);
        }),
        ("-d 2s -c 2", |a| {
            a.duration = Some(Duration::from_secs(2));
            a.connections = Some(2);
        }),
        ("-d 2s -r 20", |a| {
            a.duration = Some(Duration::from_secs(2));
            a.rate = Some(20.0);
        }),
    ];
    for (load, set) in loads {
        let p = plan::<N>(|a| {
            set(a);
            a.timeout = Duration::from_millis(500);
        });
        let mut srv = Server::answering(200);
        srv.max_streams = Some(0);
        let mut run = Run::<N>::new(&p, &[]);
        assert!(run.until(&mut srv, MS, Duration::from_secs(10), |_, _, _| {}));
        let took = run.elapsed();
        let r = run.finish();
        let c = ledger(&r);
        assert_eq!(c.completed, 0, "{load}");
        assert!(errors(&r, ErrorKind::NoStream) >= 1, "{load}: {c:?}");
        // -n: each waiting request fails at its time-out (those of one
        // connection one after the other); -d: the end and one time-out.
        let most = match p.load {
            Load::Closed {
                duration: Some(d), ..
            }
            | Load::Open {
                duration: Some(d), ..
            } => d + 600 * MS,
            _ => 6 * 500 * MS + 10 * MS,
        };
        assert!(took < most, "{load}: {took:?}");
    }
}

/// Open loop, every connection retired by GOAWAY after a few streams:
/// refused requests go again on new connections while new arrivals take
/// free slots; every request ends once, each answered.
fn open_loop_through_goaways_ends_every_request_once<N: Net>() {
    let p = plan::<N>(|a| {
        a.rate = Some(2000.0);
        a.requests = Some(200);
        a.connections = Some(4);
        a.streams = Some(4);
    });
    let mut srv = Server::new(|r, _| match r.nth % 5 {
        4 => Reply::GoAway,
        _ => Reply::Answer(200, None),
    });
    let r = Run::<N>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!(c.scheduled, 200);
    assert_eq!(
        c.completed + c.failed + c.not_sent + c.in_flight_at_end,
        200
    );
    assert_eq!(
        c.completed, 200,
        "refused once, answered on the next connection"
    );
    assert!(c.retried > 0, "{c:?}");
}

// HTTP/3 only: QUIC's own timers, in made-up time.

/// Datagrams lost both ways (every 5th): QUIC's loss detection and probe
/// timers send them again, and every request is answered once.
#[test]
fn http3_lost_datagrams_are_sent_again() {
    let p = plan::<H3Net>(|a| {
        a.requests = Some(100);
        a.connections = Some(2);
        a.streams = Some(5);
    });
    let mut srv = Server::answering(200);
    srv.drop_every = Some(5);
    let mut run = Run::<H3Net>::new(&p, &[]);
    assert!(run.until(&mut srv, MS, Duration::from_secs(30), |_, _, _| {}));
    let r = run.finish();
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed, c.retried), (100, 100, 0, 0));
    assert_eq!(srv.seen.len(), 100, "each request read once");
    assert_eq!(c.quic_handshakes, 2);
    assert!(srv.dropped >= 20, "{} datagrams lost", srv.dropped);
}

/// A path that goes dark after the handshake: nothing answers, nothing is
/// acknowledged; QUIC's idle time-out (30 s of made-up time, probes sent
/// meanwhile) ends the connection and its requests as `idle_timeout`.
#[test]
fn http3_a_path_gone_dark_ends_at_the_idle_timeout() {
    let p = plan::<H3Net>(|a| {
        a.requests = Some(2);
        a.connections = Some(1);
        a.streams = Some(2);
        a.timeout = Duration::from_secs(60);
    });
    let mut srv = Server::answering(200);
    let mut run = Run::<H3Net>::new(&p, &[]);
    // The handshake, a pass at a time; then darkness before the requests
    // (submitted as it completed) go out.
    for _ in 0..10 {
        if run.core.rec.counters.quic_handshakes > 0 {
            break;
        }
        assert!(!run.until(&mut srv, MS, Duration::ZERO, |_, _, _| {}));
    }
    assert_eq!(run.core.rec.counters.quic_handshakes, 1);
    srv.dark = true;
    let written = run.core.rec.counters.bytes_written;
    assert!(run.until(&mut srv, 10 * MS, Duration::from_secs(40), |_, _, _| {}));
    let took = run.elapsed();
    let probes = run.core.rec.counters.bytes_written - written;
    let r = run.finish();
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed), (2, 0, 2), "{c:?}");
    assert_eq!(errors(&r, ErrorKind::IdleTimeout), 2);
    assert!(srv.seen.is_empty());
    assert!(
        took >= Duration::from_secs(30) && took < Duration::from_secs(31),
        "{took:?}"
    );
    assert!(probes > 0, "the requests and QUIC's probes went out");
}

/// Connections after the first resume its TLS session and, as the server's
/// tickets allow early data, make their slots ready at once: the request
/// goes in 0-RTT before the handshake completes, and the server takes it.
#[test]
fn http3_resumed_connections_send_requests_in_0rtt() {
    let p = plan::<H3Net>(|a| {
        a.requests = Some(6);
        a.connections = Some(1);
        a.keepalive = false;
    });
    let mut srv = Server::answering(200);
    srv.early_data = true;
    let r = Run::<H3Net>::new(&p, &[]).run_to_end(&mut srv);
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed, c.retried), (6, 6, 0, 0));
    assert_eq!((srv.accepted, c.connections_opened), (6, 6));
    assert_eq!(c.quic_handshakes, 6, "every connection counted once");
    // Every resumed connection sent its request in early data, accepted.
    // (Not all resume: a connection closed by its only answer may end
    // before the server's new ticket reached it.)
    assert!(c.quic_resumed >= 3, "{c:?}");
    assert_eq!(
        (c.quic_0rtt, c.quic_0rtt_accepted),
        (c.quic_resumed, c.quic_resumed),
        "{c:?}"
    );
    assert_eq!(
        u64::from(srv.early_requests),
        c.quic_0rtt,
        "the server saw them early"
    );
}

// HTTP/3: several connections on the worker's one QUIC endpoint
// (`mux/endpoint.rs`), as the driver shares it: the server's datagrams of
// every connection come back in one interleaved read and are routed by the
// endpoint (`mux/wire_tests.rs`).

/// Three connections of four streams each on one endpoint, under load and
/// run through `watch`: a request that ends on another connection than its
/// own would fail its QUIC packet's decryption there and never be answered.
/// Returns the result, the server, and the most connections routed at once.
fn http3_shared(
    requests: u64,
    script: impl FnMut(&Req, Instant) -> Reply + 'static,
) -> (WorkerResult, Server, usize) {
    let p = plan::<H3Net>(|a| {
        a.requests = Some(requests);
        a.connections = Some(3);
        a.streams = Some(4);
    });
    let mut srv = Server::new(script);
    let mut run = Run::<H3Net>::new(&p, &[]);
    let mut most = 0;
    let mut wrong = Vec::new();
    let done = run.until(&mut srv, MS, Duration::from_secs(30), |_, link, t| {
        // Every open QUIC connection is routed, and no other: one that
        // went was forgotten by the endpoint (once: the endpoint knows no
        // more connections than it routes).
        let (routed, known) = link.endpoint();
        most = most.max(routed);
        if routed != link.quic_open() || known > routed {
            wrong.push((t, routed, known, link.quic_open()));
        }
    });
    assert!(done, "the worker did not finish");
    assert!(wrong.is_empty(), "(time, routed, known, open): {wrong:?}");
    (run.finish(), srv, most)
}

/// Answers reach the right connection: every request answered once, each
/// connection carrying its share.
#[test]
fn http3_connections_on_one_endpoint_get_their_own_answers() {
    let (r, srv, most) = http3_shared(300, |_, _| Reply::Answer(200, None));
    let c = ledger(&r);
    assert_eq!((c.sent, c.completed, c.failed, c.retried), (300, 300, 0, 0));
    assert_eq!(srv.seen.len(), 300, "each request read once");
    assert_eq!((srv.accepted, most, c.quic_handshakes), (3, 3, 3));
    for k in 0..3 {
        let n = srv.seen.iter().filter(|r| r.conn == k).count();
        assert!(n >= 50, "connection {k} carried {n} requests");
    }
}

/// Connection 1's 20th request meets `reply` (a close or a reset) while
/// connections 0 and 2 are busy: checked that they went on untouched, that
/// connection 1 carried nothing more and that one new connection replaced
/// it; the result and the server for the rest.
fn http3_one_connection_ends(reply: Reply) -> (WorkerResult, Server) {
    let when = std::rc::Rc::new(std::cell::Cell::new(None));
    let at = when.clone();
    let (r, srv, most) = http3_shared(300, move |r, now| {
        if (r.conn, r.nth) == (1, 20) {
            at.set(Some(now));
            return reply.clone();
        }
        Reply::Answer(200, None)
    });
    let c = ledger(&r);
    assert_eq!(c.sent, 300, "{c:?}");
    assert_eq!(
        c.completed + c.failed,
        300,
        "every request ended once: {c:?}"
    );
    assert_eq!((srv.accepted, c.quic_handshakes), (4, 4), "one replacement");
    assert!(most <= 4);
    let when = when.get().expect("the script's reply came");
    let after: [usize; 3] = std::array::from_fn(|k| {
        let later = |r: &&Req| r.conn == k as u32 && r.at > when;
        srv.seen.iter().filter(later).count()
    });
    assert_eq!(after[1], 0, "the connection ended carried nothing more");
    assert!(
        after[0] > 0 && after[2] > 0,
        "the others went on: {after:?}"
    );
    (r, srv)
}

/// One connection closed by the server (CONNECTION_CLOSE, H3_NO_ERROR, at
/// its 20th request): its unanswered requests go again on a new
/// connection, the other two run on untouched, and every request ends
/// once.
#[test]
fn http3_one_connection_closed_leaves_the_others_running() {
    let (r, srv) = http3_one_connection_ends(Reply::Close);
    let c = ledger(&r);
    assert_eq!((c.completed, c.failed), (300, 0), "{c:?}");
    assert!(c.retried >= 1, "the request met by the close went again");
    assert_eq!(
        srv.seen.len() as u64,
        300 + c.retried,
        "the others read once"
    );
}

/// One connection reset (the server lost its state: the client's next
/// datagrams meet a stateless reset, which the worker's endpoint must know
/// the token of): its requests end, the other two run on untouched, and
/// every request ends once.
#[test]
fn http3_one_connection_reset_leaves_the_others_running() {
    let (r, _) = http3_one_connection_ends(Reply::Reset);
    let c = ledger(&r);
    // Those in flight on it (its four streams at most) failed as reset.
    assert!((1..=4).contains(&c.failed), "{c:?}");
    assert_eq!(errors(&r, ErrorKind::StatelessReset), c.failed);
}
