//! Tests of the status page parsers (on pages captured from the real
//! servers), the reader and the watcher.

use super::*;

const APACHE_IDLE: &str = include_str!("../../fixtures/status/apache_auto.txt");
const APACHE_BUSY: &str = include_str!("../../fixtures/status/apache_auto_busy.txt");
const LIGHTTPD: &str = include_str!("../../fixtures/status/lighttpd_auto.txt");
const NGINX_IDLE: &str = include_str!("../../fixtures/status/nginx_stub.txt");
const NGINX_BUSY: &str = include_str!("../../fixtures/status/nginx_stub_busy.txt");
const FPM_IDLE: &str = include_str!("../../fixtures/status/fpm_status.txt");
const FPM_BUSY: &str = include_str!("../../fixtures/status/fpm_status_busy.txt");

#[test]
fn detects_each_format() {
    assert_eq!(StatusKind::detect(APACHE_IDLE), Some(StatusKind::Apache));
    assert_eq!(StatusKind::detect(APACHE_BUSY), Some(StatusKind::Apache));
    assert_eq!(StatusKind::detect(LIGHTTPD), Some(StatusKind::Lighttpd));
    assert_eq!(StatusKind::detect(NGINX_BUSY), Some(StatusKind::Nginx));
    assert_eq!(StatusKind::detect(FPM_BUSY), Some(StatusKind::PhpFpm));
    assert_eq!(StatusKind::detect("<html>It works</html>"), None);
}

/// Apache 2.4 prefork, MaxRequestWorkers 10, under `ab -k -c 8`.
#[test]
fn apache_auto() {
    let (s, slots) = parse_apache(APACHE_BUSY).unwrap();
    assert_eq!(s.busy, Some(3));
    assert_eq!(s.idle, Some(0));
    assert_eq!(s.keepalive, Some(1));
    assert_eq!(s.requests, Some(2930));
    assert_eq!(s.states.get("W"), Some(&2));
    assert_eq!(s.states.get("."), Some(&7));
    assert_eq!(slots, Some(10));
    let (s, _) = parse_apache(APACHE_IDLE).unwrap();
    assert_eq!((s.busy, s.idle, s.keepalive), (Some(1), Some(1), Some(0)));
    assert!(parse_apache("Total Accesses: 3\n").is_err());
}

/// Apache 2.4 event (ServerLimit 1, ThreadsPerChild 4, KeepAliveTimeout
/// 30) with three idle keep-alive clients: they hold no worker (the
/// scoreboard shows no `K`), only the event MPM's connection counts tell.
#[test]
fn apache_event_auto() {
    const EVENT: &str = include_str!("../../fixtures/status/apache_event_auto.txt");
    assert_eq!(StatusKind::detect(EVENT), Some(StatusKind::Apache));
    let (s, slots) = parse_apache(EVENT).unwrap();
    assert_eq!((s.busy, s.idle, s.keepalive), (Some(1), Some(3), Some(0)));
    assert_eq!(s.conns_total, Some(4));
    assert_eq!(s.async_keepalive, Some(3));
    assert_eq!(s.async_writing, Some(0));
    assert_eq!(s.async_closing, Some(1));
    assert_eq!((s.processes, s.stopping), (Some(1), Some(0)));
    assert_eq!(slots, Some(4));
    assert_eq!(apache_mpm(EVENT).as_deref(), Some("event"));
    // Prefork pages have no Conns* lines and older ones no ServerMPM.
    let (p, _) = parse_apache(APACHE_BUSY).unwrap();
    assert_eq!((p.conns_total, p.async_keepalive), (None, None));
    assert_eq!(apache_mpm("BusyWorkers: 1\n"), None);
    assert_eq!(apache_mpm("ServerMPM: <script>\n"), None);
}

#[test]
fn lighttpd_auto() {
    let (s, slots) = parse_lighttpd(LIGHTTPD).unwrap();
    assert_eq!((s.busy, s.idle, s.requests), (Some(1), Some(1364), Some(0)));
    assert_eq!(slots, Some(1365));
    assert_eq!(s.states.get("h"), Some(&1));
}

#[test]
fn nginx_stub_status() {
    let s = parse_nginx(NGINX_BUSY).unwrap();
    assert_eq!(s.active, Some(9));
    assert_eq!(
        (s.accepts, s.handled, s.requests),
        (Some(10), Some(10), Some(2641))
    );
    assert_eq!((s.busy, s.keepalive), (Some(1), Some(8)));
    let s = parse_nginx(NGINX_IDLE).unwrap();
    assert_eq!((s.busy, s.keepalive, s.active), (Some(1), Some(0), Some(1)));
    assert!(parse_nginx("Active connections: 1\n").is_err());
    assert!(parse_nginx("hello").is_err());
}

/// php-fpm 8.2, pm static with 3 children, 8 clients of a 0.2 s script.
#[test]
fn php_fpm_status() {
    let s = parse_php_fpm(FPM_BUSY).unwrap();
    assert_eq!((s.busy, s.idle, s.processes), (Some(3), Some(0), Some(3)));
    assert_eq!((s.listen_queue, s.max_children_reached), (Some(5), Some(0)));
    assert_eq!(s.requests, Some(16));
    let s = parse_php_fpm(FPM_IDLE).unwrap();
    assert_eq!((s.busy, s.idle), (Some(0), Some(3)));
}

/// A one-shot local server answering `answer` (in pieces `gap` apart).
fn serve(answer: &'static [u8], gap: Duration) -> StatusUrl {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut c, _)) = l.accept() {
            let mut req = [0u8; 1024];
            let _ = c.read(&mut req);
            for piece in answer.chunks(8) {
                if c.write_all(piece).is_err() {
                    return;
                }
                std::thread::sleep(gap);
            }
        }
    });
    StatusUrl {
        host: "127.0.0.1".into(),
        port,
        path: "/nginx_status".into(),
    }
}

#[test]
fn fetch_answers_and_refusals() {
    let ok: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nActive connections: 1 \nserver accepts handled requests\n 1 1 1 \nReading: 0 Writing: 1 Waiting: 0 \n";
    let u = serve(ok, Duration::ZERO);
    assert_eq!(probe(&u, Duration::from_secs(5)), Ok(StatusKind::Nginx));
    let u = serve(b"HTTP/1.1 403 Forbidden\r\n\r\nno", Duration::ZERO);
    assert!(fetch(&u, Duration::from_secs(5))
        .unwrap_err()
        .contains("HTTP 403"));
    let u = serve(
        b"HTTP/1.1 200 OK\r\n\r\n<html>It works</html>",
        Duration::ZERO,
    );
    assert!(probe(&u, Duration::from_secs(5))
        .unwrap_err()
        .contains("not a status page"));
    // A server trickling its answer is cut at the deadline.
    let u = serve(ok, Duration::from_millis(200));
    let t0 = Instant::now();
    let e = fetch(&u, Duration::from_millis(500)).unwrap_err();
    assert!(e.contains("no full answer"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(3));
}

#[test]
fn failed_reads_say_why() {
    // Nothing listening: refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let closed = StatusUrl {
        host: "127.0.0.1".into(),
        port,
        path: "/server-status?auto".into(),
    };
    let e = read_once(&closed, None, Duration::from_secs(2)).unwrap_err();
    assert_eq!(e.kind, FailKind::Refused, "{}", e.message);
    // A listener that never answers (its backlog holds the connection).
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = StatusUrl {
        host: "127.0.0.1".into(),
        port: l.local_addr().unwrap().port(),
        path: "/".into(),
    };
    let t0 = Instant::now();
    let e = read_once(&silent, None, Duration::from_millis(300)).unwrap_err();
    assert_eq!(e.kind, FailKind::Timeout, "{}", e.message);
    assert!(t0.elapsed() < Duration::from_secs(3));
    let u = serve(b"HTTP/1.1 200 OK\r\n\r\n<html>hi</html>", Duration::ZERO);
    let e = read_once(&u, None, Duration::from_secs(2)).unwrap_err();
    assert_eq!(e.kind, FailKind::NotStatus, "{}", e.message);
    drop(l);
}

/// A status page that cannot be read at first is tried again at every
/// interval; each failed read is kept with its time and why.
#[test]
fn the_watcher_keeps_trying_and_keeps_the_failures() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = StatusUrl {
        host: "127.0.0.1".into(),
        port: l.local_addr().unwrap().port(),
        path: "/nginx_status".into(),
    };
    drop(l);
    let w = StatusWatcher::start(url.clone(), None, Duration::from_millis(50));
    assert!(w.first_error().is_some());
    std::thread::sleep(Duration::from_millis(300));
    let seen = w.stop();
    assert!(seen.failed >= 3, "{seen:?}");
    assert_eq!(seen.failed as usize, seen.failures.len());
    assert!(seen.failures.iter().all(|f| f.kind == "refused"));
    assert!(seen.failures.windows(2).all(|p| p[0].t <= p[1].t));
    assert!(seen.samples.is_empty());
    assert_eq!(seen.server, "unknown");
}

#[test]
fn status_urls() {
    let u = StatusUrl::parse("http://127.0.0.1:8080/server-status?auto").unwrap();
    assert_eq!(
        (u.host.as_str(), u.port, u.path.as_str()),
        ("127.0.0.1", 8080, "/server-status?auto")
    );
    let u = StatusUrl::parse("http://[::1]/nginx_status").unwrap();
    assert_eq!((u.host.as_str(), u.port), ("::1", 80));
    assert_eq!(u.display(), "http://[::1]:80/nginx_status");
    assert_eq!(StatusUrl::parse("http://h").unwrap().path, "/");
    for bad in [
        "https://x/",
        "ftp://x",
        "http://u:secret@x/",
        "http://x:99999/",
        "http:///x",
    ] {
        let e = StatusUrl::parse(bad).unwrap_err();
        assert!(!e.contains("secret"), "{e}");
    }
}
