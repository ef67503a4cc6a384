//! The page loader's HTTP/3 client against the testkit's HTTP/3 server (its
//! own quinn-proto and hand-written HTTP/3 side, independent of the
//! engine's codec): a server that sends GOAWAY after 3 requests on a
//! connection answers 3 of 10 concurrent GETs and the other 7 come back
//! unprocessed (the loader sends those again, as on HTTP/2), and a document
//! longer than the engine's 1 MiB load-run capture is read whole.

use redline_testkit::h3::{self, H3Options};
use redline_web::http::{Tls, TlsArgs};
use redline_web::load::{load, LoadOpts, View};
use std::sync::atomic::Ordering;

fn opts(pki: &redline_testkit::pki::Pki, tag: &str) -> LoadOpts {
    let ca = redline_testkit::tmpdir(tag).join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let mut o = LoadOpts::default();
    o.client.http3 = true;
    o.client.tls = Some(
        Tls::new(&TlsArgs {
            cacert: Some(ca),
            ..Default::default()
        })
        .unwrap(),
    );
    o.client.timeout = std::time::Duration::from_secs(10);
    o.client.connect_timeout = std::time::Duration::from_secs(3);
    o
}

#[test]
fn goaway_rejections_are_unprocessed_and_every_answer_counts() {
    use redline_web::h2::Multiplexed;
    use redline_web::h3::{connect, Endpoint};
    use redline_web::http::{ConnectTimes, Dest, FetchError};
    let pki = redline_testkit::pki::pki();
    let srv = h3::start(
        &pki,
        H3Options {
            goaway_after: Some(3),
            ..H3Options::body(100)
        }
        .delayed(std::time::Duration::from_millis(20)),
    );
    let url = url::Url::parse(&format!("https://127.0.0.1:{}/", srv.port)).unwrap();
    let o = opts(&pki, "h3-goaway").client;
    let (c, t) = connect(
        &url,
        &Endpoint::of(&url),
        &o,
        1,
        &mut ConnectTimes::default(),
    )
    .unwrap();
    assert_eq!(t.connect, 0.0, "QUIC: the handshake is all of it");
    assert!(t.tls.is_some_and(|h| h > 0.0));
    let get_all = |from: usize, n: usize| -> Vec<Result<u16, FetchError>> {
        std::thread::scope(|s| {
            let hs: Vec<_> = (from..from + n)
                .map(|i| {
                    let (c, o) = (c.clone(), o.clone());
                    let u = url.join(&format!("/r{i}")).unwrap();
                    s.spawn(move || c.get(&u, Dest::Image, &[], &o).map(|r| r.status))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    // 3 GETs at once: answered, then the server's GOAWAY.
    let first = get_all(0, 3);
    assert!(first.iter().all(|r| matches!(r, Ok(200))), "{first:?}");
    // 7 more at once: none processed, each said so (a loader sends those
    // again on a new connection, as on HTTP/2).
    let rest = get_all(3, 7);
    let refused = rest
        .iter()
        .filter(|r| matches!(r, Err(FetchError::Unprocessed { .. })))
        .count();
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let k = &srv.counts;
    let seen = (n(&k.answered), n(&k.rejected), n(&k.goaways));
    assert_eq!(refused, 7, "{rest:?} server {seen:?}");
    assert_eq!(srv.counts.answered.load(Ordering::Relaxed), 3);
    assert!(!c.alive(), "a connection after GOAWAY takes nothing more");
}

#[test]
fn a_page_past_the_first_mib_is_read_whole_over_http3() {
    let pki = redline_testkit::pki::pki();
    // An image linked after 1.1 MB of the document (a long comment): a
    // loader that kept only the body's first MiB (the engine's capture for
    // load runs) would not see it; Chromium does. The test server answers
    // every path with this body, written once within a stream's window.
    let mut body = b"<!doctype html><html><body><!--".to_vec();
    body.resize(1_100_000, b'x');
    body.extend_from_slice(b"--><img src=/late.png width=1 height=1></body></html>");
    let size = body.len() as u64;
    let srv = h3::start(
        &pki,
        H3Options {
            body,
            html: true,
            ..Default::default()
        },
    );
    let url = url::Url::parse(&format!("https://127.0.0.1:{}/", srv.port)).unwrap();
    let l = load(&url, View::First, None, &opts(&pki, "h3-big"), &mut |_| {});
    let doc = &l.entries[0];
    assert_eq!(doc.status, Some(200), "{:?}", doc.error);
    assert_eq!(doc.body_wire_bytes, size);
    assert_eq!(doc.decoded_bytes, size);
    let late = l
        .entries
        .iter()
        .find(|e| e.url.ends_with("/late.png"))
        .unwrap_or_else(|| {
            panic!(
                "no /late.png in {:?}",
                l.entries.iter().map(|e| &e.url).collect::<Vec<_>>()
            )
        });
    assert_eq!(late.status, Some(200), "{:?}", late.error);
    assert_eq!(late.body_wire_bytes, size);
}
