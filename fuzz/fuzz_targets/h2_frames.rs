//! Any bytes from an HTTP/2 server, split anywhere, into a session with
//! three requests in flight (one with a body that waits for window): never a
//! panic, the output and the events stay bounded, and every request ends at
//! most once.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_engine::http2::{Http2Request, Http2Session};
use redline_engine::session::{Event, Session, Want};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let flags = data[0];
    let split = (data[1] as usize).max(1);
    let mut server = Vec::new();
    if flags & 0x80 != 0 {
        // Most inputs start past the preface: the server's empty SETTINGS.
        server.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    }
    server.extend_from_slice(&data[2..]);
    let want = Want {
        server: flags & 1 != 0,
        location: flags & 2 != 0,
        capture: (flags & 4 != 0).then_some((true, true)),
        ..Want::NOTHING
    };
    let get = Http2Request::from_parts("GET", "http", "t", "/", &[], Default::default()).unwrap();
    let head = Http2Request::from_parts("HEAD", "http", "t", "/h", &[], Default::default()).unwrap();
    let post = Http2Request::from_parts(
        "POST",
        "http",
        "t",
        "/p",
        &[("content-type".into(), "x/y".into())],
        vec![7u8; 100_000].into(),
    )
    .unwrap();
    let mut s = Http2Session::new();
    s.connect();
    let ids = [
        s.submit(&get, want).unwrap(),
        s.submit(&head, want).unwrap(),
        s.submit(&post, want).unwrap(),
    ];
    if flags & 8 != 0 {
        s.cancel(ids[0]);
    }
    let mut out = Vec::new();
    // Requests submitted, and how many times each ended.
    let mut ended: std::collections::HashMap<u64, u32> = ids.iter().map(|&i| (i, 0)).collect();
    for part in server.chunks(split) {
        s.bytes_in(part);
        out.clear();
        s.bytes_out(&mut out);
        // What the session writes is bounded by what it was given and sends.
        assert!(out.len() <= 2 * part.len() + 200_000);
        while let Some(ev) = s.poll_event() {
            match ev {
                Event::Head { id, status } => {
                    assert!((200..1000).contains(&status));
                    assert!(ended.contains_key(&id));
                }
                Event::Done { id, .. } | Event::Failed { id, .. } => {
                    *ended.get_mut(&id).expect("an event for a request never sent") += 1;
                }
            }
        }
        if flags & 0x10 != 0 && s.capacity() > 0 {
            if let Ok(id) = s.submit(&get, want) {
                ended.insert(id, 0);
            }
        }
    }
    if flags & 0x20 != 0 {
        s.eof();
        while let Some(ev) = s.poll_event() {
            if let Event::Done { id, .. } | Event::Failed { id, .. } = ev {
                *ended.get_mut(&id).expect("an event for a request never sent") += 1;
            }
        }
        assert!(s.is_closed());
    }
    assert!(ended.values().all(|&n| n <= 1), "{ended:?}");
    if s.is_closed() && flags & 0x20 != 0 {
        // After eof every request that was not cancelled has ended.
        let cancelled = u32::from(flags & 8 != 0);
        let open = ended.values().filter(|&&n| n == 0).count() as u32;
        assert!(open <= cancelled, "{ended:?}");
    }
});
