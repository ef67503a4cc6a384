//! Unit tests of the HTTP/1 response reader (`h1.rs`): every split of
//! every framing, informational heads, captures, malformed answers.

use super::*;

/// The reader's observable outcome after feeding `parts` in turn.
fn outcome(
    r: &mut ResponseReader,
    parts: &[&[u8]],
    head: bool,
    memo: Option<&mut HeadMemo>,
) -> String {
    let mut memo = memo;
    let mut out = Vec::new();
    for p in parts {
        let res = r.feed_memo(p, head, memo.as_deref_mut());
        out.push(format!("{res:?}"));
        if !matches!(res, Ok(Progress::NeedMore)) {
            break;
        }
    }
    format!(
        "{out:?} status={} keep_alive={} body={} head_done={} info={} state={:?}",
        r.status, r.keep_alive, r.body_bytes, r.head_done, r.informational, r.state
    )
}

/// A response taken from the head memo ends exactly as one parsed: same
/// progress, status, reuse, body framing and error, over a stream of
/// repeated, changed and broken responses fed whole or split.
#[test]
fn head_memo_gives_the_verdict_of_a_full_parse() {
    let mut corpus = crate::head::tests::corpus();
    corpus.extend(
        [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\n"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz",
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
        ]
        .iter()
        .map(|s| s.to_vec()),
    );
    let special = [b'\r', b'\n', 0, b' ', b':', b'0', b'9', b'a'];
    let mut rng = redline_stats::rng::SplitMix64(11);
    let mut memo = HeadMemo::new();
    let (mut hits, mut last) = (0, 0usize);
    for _ in 0..30_000 {
        // Mostly the same response again (as from a server under load).
        let pick = if rng.next_u64().is_multiple_of(3) {
            (rng.next_u64() as usize) % corpus.len()
        } else {
            last
        };
        last = pick;
        let mut m = corpus[pick].clone();
        if rng.next_u64().is_multiple_of(4) && !m.is_empty() {
            let at = (rng.next_u64() as usize) % m.len();
            m[at] = special[(rng.next_u64() as usize) % special.len()];
        }
        let cut = (rng.next_u64() as usize) % (m.len() + 1);
        let parts: Vec<&[u8]> = if rng.next_u64().is_multiple_of(2) {
            vec![&m[..]]
        } else {
            vec![&m[..cut], &m[cut..]]
        };
        let head = rng.next_u64().is_multiple_of(8);
        if memo.lookup(parts[0]).is_some() {
            hits += 1;
        }
        let plain = outcome(&mut ResponseReader::new(), &parts, head, None);
        let memoed = outcome(&mut ResponseReader::new(), &parts, head, Some(&mut memo));
        assert_eq!(plain, memoed, "{:?}", String::from_utf8_lossy(&m));
    }
    assert!(hits > 1_000, "the memo was hit only {hits} times");
}

/// Nothing is taken from the memo while something is wanted from the head.
#[test]
fn head_memo_is_not_used_when_the_head_is_captured() {
    let msg = b"HTTP/1.1 301 Moved\r\nServer: s1\r\nLocation: /a\r\nContent-Length: 0\r\n\r\n";
    let mut memo = HeadMemo::new();
    let mut r = ResponseReader::new();
    r.feed_memo(msg, false, Some(&mut memo)).unwrap();
    assert!(memo.lookup(msg).is_some());
    let mut r = ResponseReader::new();
    r.want_server = true;
    r.want_location = true;
    r.feed_memo(msg, false, Some(&mut memo)).unwrap();
    assert_eq!(r.take_server().as_deref(), Some("s1"));
    assert_eq!(r.take_location().as_deref(), Some("/a"));
}

fn read_all(input: &[u8], split: usize) -> Result<(ResponseReader, usize), Malformed> {
    let mut r = ResponseReader::new();
    let mut used_total = 0;
    for part in input.chunks(split.max(1)) {
        match r.feed(part, false)? {
            Progress::Done { used } => return Ok((r, used_total + used)),
            Progress::NeedMore => used_total += part.len(),
        }
    }
    Err(bad(MalformedKind::Header, "incomplete"))
}

#[test]
fn content_length_any_split() {
    let msg = b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 5\r\n\r\nhello";
    for split in [1, 2, 3, 7, 64] {
        let (r, used) = read_all(msg, split).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body_bytes, 5);
        assert_eq!(used, msg.len());
        assert!(r.keep_alive);
    }
}

#[test]
fn chunked_any_split_with_ext_and_trailers() {
    let msg = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nX-T: 1\r\n\r\n";
    for split in [1, 2, 5, 13, 1000] {
        let (r, used) = read_all(msg, split).unwrap();
        assert_eq!(r.body_bytes, 21, "split {split}");
        assert_eq!(used, msg.len());
    }
}

#[test]
fn capture_keeps_headers_and_body_any_split() {
    let msg = b"HTTP/1.1 200 OK\r\nSet-Cookie: sid=1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\n!!!\r\n0\r\n\r\n";
    for split in [1, 4, 1000] {
        let mut r = ResponseReader::new();
        r.capture = Some(Box::new(Capture {
            want_headers: true,
            want_body: true,
            ..Capture::default()
        }));
        let mut done = false;
        for part in msg.chunks(split) {
            if let Progress::Done { .. } = r.feed(part, false).unwrap() {
                done = true;
            }
        }
        assert!(done);
        let c = r.capture.as_ref().unwrap();
        assert_eq!(c.header("set-cookie"), Some("sid=1"));
        assert_eq!(c.body, b"hello!!!");
        r.reset();
        assert!(r.capture.as_ref().unwrap().body.is_empty());
    }
}

#[test]
fn extra_bytes_are_left_over() {
    let msg = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n";
    let mut r = ResponseReader::new();
    assert_eq!(r.feed(msg, false).unwrap(), Progress::Done { used: 40 });
}

#[test]
fn informational_skipped() {
    let msg = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
    let (r, _) = read_all(msg, 3).unwrap();
    assert_eq!(r.status, 201);
    assert_eq!(r.informational, 2);
}

#[test]
fn close_delimited_and_http10() {
    let mut r = ResponseReader::new();
    let msg = b"HTTP/1.0 200 OK\r\n\r\nabc";
    assert_eq!(r.feed(msg, false).unwrap(), Progress::NeedMore);
    assert!(r.eof());
    assert_eq!(r.body_bytes, 3);
    assert!(!r.keep_alive);
    let mut r = ResponseReader::new();
    let msg = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx";
    assert!(matches!(r.feed(msg, false), Ok(Progress::Done { .. })));
    assert!(r.keep_alive);
}

#[test]
fn no_body_for_head_204_304() {
    for (msg, head) in [
        (&b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"[..], true),
        (&b"HTTP/1.1 204 No Content\r\n\r\n"[..], false),
        (
            &b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"[..],
            false,
        ),
    ] {
        let mut r = ResponseReader::new();
        assert!(matches!(r.feed(msg, head), Ok(Progress::Done { .. })));
        assert_eq!(r.body_bytes, 0);
    }
}

#[test]
fn malformed_cases() {
    let cases: &[(&[u8], MalformedKind)] = &[
        (b"HTTX/1.1 200 OK\r\n\r\n", MalformedKind::StatusLine),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", MalformedKind::StatusLine),
        (b"HTTP/1.1 001 Odd\r\n\r\n", MalformedKind::StatusLine),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            MalformedKind::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n",
            MalformedKind::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            MalformedKind::Chunked,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
            MalformedKind::Chunked,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxyz",
            MalformedKind::Chunked,
        ),
    ];
    for (msg, kind) in cases {
        let mut r = ResponseReader::new();
        let e = r.feed(msg, false).expect_err(&String::from_utf8_lossy(msg));
        assert_eq!(e.kind, *kind, "{}", String::from_utf8_lossy(msg));
    }
}

#[test]
fn huge_heads_are_refused_bounded() {
    let mut r = ResponseReader::new();
    let mut got = None;
    let line = b"X-Big: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    let _ = r.feed(b"HTTP/1.1 200 OK\r\n", false);
    for _ in 0..20_000 {
        if let Err(e) = r.feed(line, false) {
            got = Some(e.kind);
            break;
        }
    }
    assert_eq!(got, Some(MalformedKind::HeadTooLarge));
    assert!(r.head.len() <= MAX_HEAD + 1);
}
