//! Micro-benchmarks of the per-request hot path: building a request (done once
//! per run, measured for completeness), reading responses, recording them,
//! one HTTP/1.1 GET through the worker's session ([`H1Session`], against
//! the bare reader it wraps) and one HTTP/2 GET through redline's own codec.
//! Run with `cargo bench -p redline-engine`; compare runs on the same machine.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use redline_engine::h1::{Progress, ResponseReader};
use redline_engine::{Plan, PlanArgs};
use redline_stats::{Recorder, Timing};
use std::hint::black_box;
use std::time::{Duration, Instant};

const NGINX_SMALL: &[u8] =
    b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 22 Nov 2026 02:00:00 GMT\r\n\
Content-Type: text/html\r\nContent-Length: 440\r\nLast-Modified: Sun, 22 Nov 2026 01:00:00 GMT\r\n\
Connection: keep-alive\r\nETag: \"6740d8a0-1b8\"\r\nAccept-Ranges: bytes\r\n\r\n";

fn small_response() -> Vec<u8> {
    let mut v = NGINX_SMALL.to_vec();
    v.extend(std::iter::repeat_n(b'x', 440));
    v
}

fn chunked_response() -> Vec<u8> {
    let mut v = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..4 {
        v.extend_from_slice(b"1000\r\n");
        v.extend(std::iter::repeat_n(b'y', 0x1000));
        v.extend_from_slice(b"\r\n");
    }
    v.extend_from_slice(b"0\r\n\r\n");
    v
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("response");
    let small = small_response();
    g.throughput(Throughput::Elements(1));
    g.bench_function("nginx_440B_one_read", |b| {
        let mut r = ResponseReader::new();
        b.iter(|| {
            r.reset();
            let p = r.feed(black_box(&small), false).unwrap();
            assert!(matches!(p, Progress::Done { .. }));
        })
    });
    g.bench_function("nginx_440B_split_head", |b| {
        let mut r = ResponseReader::new();
        let (a, rest) = small.split_at(60);
        b.iter(|| {
            r.reset();
            let _ = r.feed(black_box(a), false).unwrap();
            let p = r.feed(black_box(rest), false).unwrap();
            assert!(matches!(p, Progress::Done { .. }));
        })
    });
    let chunked = chunked_response();
    g.bench_function("chunked_16KiB", |b| {
        let mut r = ResponseReader::new();
        b.iter(|| {
            r.reset();
            let p = r.feed(black_box(&chunked), false).unwrap();
            assert!(matches!(p, Progress::Done { .. }));
        })
    });
    g.finish();
}

fn record(c: &mut Criterion) {
    let start = Instant::now();
    let mut rec = Recorder::new(start);
    let mut i = 0u64;
    c.bench_function("recorder_response", |b| {
        b.iter(|| {
            i = i.wrapping_add(7919);
            let sent = start + Duration::from_micros(i % 1_000_000);
            let t = Timing {
                intended: sent,
                sent,
                first_byte: sent + Duration::from_micros(50 + i % 200),
                done: sent + Duration::from_micros(80 + i % 400),
            };
            rec.response(black_box(&t), 200, 678, 440);
        })
    });
}

fn build(c: &mut Criterion) {
    c.bench_function("plan_build_request", |b| {
        b.iter(|| {
            let mut a = PlanArgs::new("http://127.0.0.1:8080/index.html?x=1");
            a.headers = vec!["X-Test: 1".into(), "Accept-Encoding: gzip".into()];
            a.requests = Some(1);
            black_box(Plan::build(a).unwrap().request.len())
        })
    });
}

/// nginx's answer to a GET of a 440-byte file in HTTP/2 on stream 1: HEADERS
/// with its usual fields (literal, static name index, Huffman values, as
/// nginx writes them) and one DATA frame with END_STREAM.
fn h2_answer() -> Vec<u8> {
    use redline_engine::http2::{frame, hpack};
    let mut block = Vec::new();
    for (k, v) in [
        (":status", "200"),
        ("server", "nginx/1.22.1"),
        ("date", "Sun, 22 Nov 2026 02:00:00 GMT"),
        ("content-type", "text/html"),
        ("content-length", "440"),
        ("last-modified", "Sun, 22 Nov 2026 01:00:00 GMT"),
        ("etag", "\"6740d8a0-1b8\""),
        ("accept-ranges", "bytes"),
    ] {
        hpack::encoder::field(&mut block, k, v);
    }
    let mut v = Vec::new();
    frame::write_head(&mut v, block.len(), frame::HEADERS, frame::END_HEADERS, 1);
    v.extend_from_slice(&block);
    frame::write_head(&mut v, 440, frame::DATA, frame::END_STREAM, 1);
    v.extend(std::iter::repeat_n(b'x', 440));
    v
}

/// Sets the stream id of the two frames of [`h2_answer`].
fn set_stream(answer: &mut [u8], sid: u32) {
    let at = 9 + (u32::from_be_bytes([0, answer[0], answer[1], answer[2]]) as usize);
    answer[5..9].copy_from_slice(&sid.to_be_bytes());
    answer[at + 5..at + 9].copy_from_slice(&sid.to_be_bytes());
}

/// One GET answered (submit, bytes out, the answer in, the events), on a
/// connected session of redline's own codec.
fn h2_session(c: &mut Criterion) {
    use redline_engine::session::{Event, Http2Request, Http2Session, Session, Want};
    let server_preface = [0u8, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0];
    let mut g = c.benchmark_group("h2_session");
    g.throughput(Throughput::Elements(1));
    let headers = vec![
        ("User-Agent".to_string(), "redline/1".to_string()),
        ("Accept".to_string(), "*/*".to_string()),
    ];
    let req = Http2Request::from_parts(
        "GET",
        "http",
        "127.0.0.1:8080",
        "/index.html",
        &headers,
        Default::default(),
    )
    .unwrap();
    g.bench_function("get_440B_own_codec", |b| {
        let mut s = Http2Session::new();
        s.connect();
        s.bytes_in(&server_preface);
        let mut answer = h2_answer();
        let mut out = Vec::with_capacity(1 << 16);
        let mut sid = 1u32;
        b.iter(|| {
            let id = s.submit(black_box(&req), Want::NOTHING).unwrap();
            out.clear();
            s.bytes_out(&mut out);
            set_stream(&mut answer, sid);
            sid += 2;
            s.bytes_in(black_box(&answer));
            let mut n = 0;
            while let Some(ev) = s.poll_event() {
                if let Event::Done {
                    id: d, body_bytes, ..
                } = ev
                {
                    assert_eq!((d, body_bytes), (id, 440));
                }
                n += 1;
            }
            assert_eq!(n, 2);
        })
    });
    g.finish();
}

/// One HTTP/1.1 GET answered the way the worker drives it: submit the
/// plan's shared bytes, write them from `pending_out`, feed the answer with
/// the worker's head memo, take the event; next to the bare reader with the
/// same memo (the session's cost is the difference).
fn h1_session(c: &mut Criterion) {
    use redline_engine::h1::HeadMemo;
    use redline_engine::session::{Event, H1Request, H1Session, Session, Want};
    let mut g = c.benchmark_group("h1_session");
    g.throughput(Throughput::Elements(1));
    let small = small_response();
    let req = H1Request {
        wire: bytes::Bytes::from_static(
            b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: redline/1\r\nAccept: */*\r\n\r\n",
        ),
        head: false,
    };
    g.bench_function("get_440B_session", |b| {
        let mut s = H1Session::new(1);
        let mut memo = HeadMemo::new();
        b.iter(|| {
            s.submit(black_box(&req), Want::NOTHING).unwrap();
            let n = s.pending_out().len();
            black_box(s.pending_out());
            s.consume_out(n);
            s.bytes_in_memo(black_box(&small), &mut memo);
            match s.poll_event() {
                Some(Event::Done { body_bytes, .. }) => assert_eq!(body_bytes, 440),
                other => panic!("{other:?}"),
            }
        })
    });
    g.bench_function("get_440B_bare_reader", |b| {
        let mut r = ResponseReader::new();
        let mut memo = HeadMemo::new();
        b.iter(|| {
            r.reset();
            black_box(&req.wire[..]);
            let p = r
                .feed_memo(black_box(&small), false, Some(&mut memo))
                .unwrap();
            assert!(matches!(p, Progress::Done { .. }));
            assert_eq!(r.body_bytes, 440);
        })
    });
    g.finish();
}

criterion_group!(benches, parse, record, build, h1_session, h2_session);
criterion_main!(benches);
