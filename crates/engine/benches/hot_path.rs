//! Micro-benchmarks of the per-request hot path: building a request (done once
//! per run, measured for completeness), reading responses, recording them.
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

criterion_group!(benches, parse, record, build);
criterion_main!(benches);
