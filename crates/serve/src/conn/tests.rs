//! Unit tests of `conn.rs`, kept in their own file so that file reads as its job.

use super::*;

#[test]
fn filler_is_alphabet() {
    assert_eq!(&FILLER[..28], b"abcdefghijklmnopqrstuvwxyzab");
}

#[test]
fn chunked_len() {
    for size in [0u64, 1, 15, 16, 16383, 16384, 16385, 100_000] {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < size {
            let n = (size - pos).min(CHUNK as u64);
            push_hex(&mut out, n);
            out.extend_from_slice(b"\r\n");
            out.resize(out.len() + n as usize, b'x');
            out.extend_from_slice(b"\r\n");
            pos += n;
        }
        out.extend_from_slice(b"0\r\n\r\n");
        assert_eq!(out.len() as u64, chunked_wire_len(size), "size {size}");
    }
}

#[test]
fn numbers() {
    let mut v = Vec::new();
    push_u64(&mut v, 0);
    v.push(b' ');
    push_u64(&mut v, 18446744073709551615);
    v.push(b' ');
    push_hex(&mut v, 0);
    v.push(b' ');
    push_hex(&mut v, 0x4000);
    assert_eq!(v, b"0 18446744073709551615 0 4000");
    assert_eq!(parse_chunk_size(b"1A;ext=1"), Some(26));
    assert_eq!(parse_chunk_size(b"0"), Some(0));
    assert_eq!(parse_chunk_size(b""), None);
    assert_eq!(parse_chunk_size(b"x"), None);
    assert_eq!(parse_chunk_size(b"11111111111111111"), None);
    assert_eq!(parse_decimal(b"123"), Some(123));
    assert_eq!(parse_decimal(b"+1"), None);
}

#[test]
fn head_parsing() {
    let mut extra = Vec::new();
    let Parsed::Complete(r) =
        parse_head(b"GET /?size=5 HTTP/1.1\r\nHost: x\r\n\r\nrest", &mut extra)
    else {
        panic!()
    };
    assert_eq!(r.head_len, 34);
    assert!(r.keep_alive && !r.http10 && !r.is_head);
    assert_eq!(r.body, Body::None);
    let Parsed::Complete(r) = parse_head(
        b"HEAD / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
        &mut extra,
    ) else {
        panic!()
    };
    assert!(r.keep_alive && r.http10 && r.is_head);
    let Parsed::Complete(r) = parse_head(b"GET / HTTP/1.0\r\n\r\n", &mut extra) else {
        panic!()
    };
    assert!(!r.keep_alive);
    let Parsed::Complete(r) = parse_head(
        b"POST / HTTP/1.1\r\nConnection: foo, close\r\nContent-Length: 7\r\n\r\n",
        &mut extra,
    ) else {
        panic!()
    };
    assert!(!r.keep_alive);
    assert_eq!(r.body, Body::Length(7));
    let Parsed::Complete(r) = parse_head(
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        &mut extra,
    ) else {
        panic!()
    };
    assert_eq!(r.body, Body::Chunked);
    assert!(matches!(
        parse_head(b"GET / HTTP/1.1\r\nHost: x\r\n", &mut extra),
        Parsed::Partial
    ));
    assert!(matches!(
        parse_head(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", &mut extra),
        Parsed::Error(400)
    ));
    assert!(matches!(
        parse_head(
            b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            &mut extra
        ),
        Parsed::Error(400)
    ));
    assert!(matches!(
        parse_head(
            b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            &mut extra
        ),
        Parsed::Error(400)
    ));
    assert!(matches!(
        parse_head(
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n",
            &mut extra
        ),
        Parsed::Error(400)
    ));
    assert!(matches!(
        parse_head(b"G@T / HTTP/1.1\r\n\r\n", &mut extra),
        Parsed::Error(400)
    ));
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert!(matches!(parse_head(&many, &mut extra), Parsed::Error(431)));
}
