//! HPACK tests: every RFC 7541 Appendix C example (C.1 integers, C.2 single
//! fields, C.3/C.4 requests plain and Huffman, C.5/C.6 responses plain and
//! Huffman with eviction), broken blocks, and encoder -> decoder round trips.

use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Keeps every field (values always decoded).
#[derive(Default)]
struct All(Vec<(String, String)>);

impl Sink for All {
    fn wants(&mut self, _: &[u8]) -> bool {
        true
    }
    fn field(&mut self, name: &[u8], value: Option<&[u8]>) {
        self.0.push((
            String::from_utf8(name.to_vec()).unwrap(),
            String::from_utf8(value.unwrap().to_vec()).unwrap(),
        ));
    }
}

fn decode(d: &mut Decoder, block: &str) -> Vec<(String, String)> {
    let mut all = All::default();
    d.decode(&hex(block), &mut all).unwrap();
    all.0
}

fn list(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn table(d: &Decoder) -> Vec<(String, String)> {
    d.entries()
        .map(|(n, v)| {
            (
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn c1_integers() {
    let mut at = 0;
    assert_eq!(decode_int(&[0b0000_1010], &mut at, 5), Ok(10));
    let mut at = 0;
    assert_eq!(decode_int(&hex("1f9a0a"), &mut at, 5), Ok(1337));
    assert_eq!(at, 3);
    let mut at = 0;
    assert_eq!(decode_int(&[42], &mut at, 8), Ok(42));
    let mut out = Vec::new();
    encode_int(1337, 5, 0, &mut out);
    assert_eq!(out, hex("1f9a0a"));
    for bad in [
        &b""[..],
        b"\x1f",
        b"\x1f\x80",
        b"\x1f\xff\xff\xff\xff\xff\xff",
    ] {
        let mut at = 0;
        assert!(decode_int(bad, &mut at, 5).is_err(), "{bad:?}");
    }
}

#[test]
fn c2_single_fields() {
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(
            &mut d,
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"
        ),
        list(&[("custom-key", "custom-header")])
    );
    assert_eq!(d.table_size(), 55);
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, "040c 2f73 616d 706c 652f 7061 7468"),
        list(&[(":path", "/sample/path")])
    );
    assert_eq!(d.table_size(), 0);
    assert_eq!(
        decode(&mut d, "1008 7061 7373 776f 7264 0673 6563 7265 74"),
        list(&[("password", "secret")])
    );
    assert_eq!(d.table_size(), 0);
    assert_eq!(decode(&mut d, "82"), list(&[(":method", "GET")]));
    assert_eq!(d.table_size(), 0);
}

const REQ1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];

fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, blocks[0]), list(REQ1));
    assert_eq!(table(&d), list(&[(":authority", "www.example.com")]));
    assert_eq!(d.table_size(), 57);
    assert_eq!(decode(&mut d, blocks[1]), list(REQ2));
    assert_eq!(
        table(&d),
        list(&[
            ("cache-control", "no-cache"),
            (":authority", "www.example.com")
        ])
    );
    assert_eq!(d.table_size(), 110);
    assert_eq!(decode(&mut d, blocks[2]), list(REQ3));
    assert_eq!(
        table(&d),
        list(&[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com")
        ])
    );
    assert_eq!(d.table_size(), 164);
}

#[test]
fn c3_requests_plain() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOC: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new(256);
    assert_eq!(
        decode(&mut d, blocks[0]),
        list(&[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", DATE1),
            ("location", LOC)
        ])
    );
    assert_eq!(
        table(&d),
        list(&[
            ("location", LOC),
            ("date", DATE1),
            ("cache-control", "private"),
            (":status", "302")
        ])
    );
    assert_eq!(d.table_size(), 222);
    assert_eq!(
        decode(&mut d, blocks[1]),
        list(&[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", DATE1),
            ("location", LOC)
        ])
    );
    assert_eq!(
        table(&d),
        list(&[
            (":status", "307"),
            ("location", LOC),
            ("date", DATE1),
            ("cache-control", "private")
        ])
    );
    assert_eq!(d.table_size(), 222);
    assert_eq!(
        decode(&mut d, blocks[2]),
        list(&[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", DATE2),
            ("location", LOC),
            ("content-encoding", "gzip"),
            ("set-cookie", COOKIE)
        ])
    );
    assert_eq!(
        table(&d),
        list(&[
            ("set-cookie", COOKIE),
            ("content-encoding", "gzip"),
            ("date", DATE2)
        ])
    );
    assert_eq!(d.table_size(), 215);
}

#[test]
fn c5_responses_plain_with_eviction() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
         3d31",
    ]);
}

#[test]
fn c6_responses_huffman_with_eviction() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn huffman_round_trips_every_byte_and_rejects_bad_padding_and_eos() {
    let all: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
    let mut enc = Vec::new();
    huffman::encode(&all, &mut enc);
    assert_eq!(enc.len(), huffman::encoded_len(&all));
    let mut dec = Vec::new();
    huffman::decode(&enc, &mut dec).unwrap();
    assert_eq!(dec, all);
    for bad in [&b"\xff\xff\xff\xff"[..], b"\x00", b"\x1f\xff"] {
        let mut out = Vec::new();
        assert!(huffman::decode(bad, &mut out).is_err(), "{bad:?}");
    }
}

#[test]
fn size_updates_are_bounded_and_only_at_the_start() {
    let mut d = Decoder::new(4096);
    decode(&mut d, "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d");
    assert_eq!(d.table_size(), 57);
    decode(&mut d, "20"); // size 0: the table empties
    assert_eq!(d.table_size(), 0);
    let mut over = Vec::new();
    encode_int(4097, 5, 0x20, &mut over);
    assert_eq!(
        d.decode(&over, &mut All::default()),
        Err(HpackError::BadSizeUpdate)
    );
    assert_eq!(
        d.decode(&hex("82 20"), &mut All::default()),
        Err(HpackError::BadSizeUpdate)
    );
    // An entry larger than the table empties it (§4.4).
    let mut d = Decoder::new(64);
    decode(&mut d, "4003 782d 6101 31"); // x-a: 1
    assert_eq!(d.table_size(), 36);
    let mut big = vec![0x40, 5];
    big.extend_from_slice(b"x-big");
    big.push(100);
    big.extend_from_slice(&[b'v'; 100]);
    d.decode(&big, &mut All::default()).unwrap();
    assert_eq!(d.table_size(), 0);
}

#[test]
fn broken_blocks_are_errors() {
    for bad in [
        "80",             // index 0
        "be",             // index 62, empty dynamic table
        "4005 6162",      // name cut short
        "4185 ff",        // Huffman value cut short
        "0081 0000",      // bad Huffman padding in the name
        "7fff ffff ff0f", // index past 32 bits
    ] {
        let mut d = Decoder::new(4096);
        assert!(d.decode(&hex(bad), &mut All::default()).is_err(), "{bad}");
    }
}

#[test]
fn encoder_blocks_decode_to_the_request() {
    let fields = vec![
        ("user-agent".to_string(), "redline/1.0".to_string()),
        ("accept".to_string(), "*/*".to_string()),
        (
            "authorization".to_string(),
            "Basic dXNlcjpwYXNz".to_string(),
        ),
        ("cookie".to_string(), "a=b".to_string()),
        ("x-custom".to_string(), "yes".to_string()),
        ("accept-encoding".to_string(), "gzip, deflate".to_string()),
    ];
    for (method, scheme, path) in [
        ("GET", "https", "/"),
        ("POST", "http", "/index.html"),
        ("DELETE", "http", "/a/b?c=d"),
    ] {
        let block = encode_block(method, scheme, "example.com:8443", path, &fields);
        let mut d = Decoder::new(4096);
        let mut all = All::default();
        d.decode(&block, &mut all).unwrap();
        let mut want = list(&[
            (":method", method),
            (":scheme", scheme),
            (":authority", "example.com:8443"),
            (":path", path),
        ]);
        want.extend(fields.iter().cloned());
        assert_eq!(all.0, want);
        // Nothing enters the server's table: the block is the same on every stream.
        assert_eq!(d.table_size(), 0);
    }
    // Credentials are never indexed (0001xxxx), with the static name index.
    let at = encode_block("GET", "http", "a", "/", &[]).len();
    let block = encode_block("GET", "http", "a", "/", &fields[2..3]);
    assert_eq!(block[at], 0x10 | 15);
    assert_eq!(block[at + 1], 8); // authorization = 23: 15 + 8
}

/// A Huffman-coded string literal (§5.2), shorter than 127 bytes coded.
fn huff_literal(s: &str, out: &mut Vec<u8>) {
    let mut coded = Vec::new();
    huffman::encode(s.as_bytes(), &mut coded);
    assert!(coded.len() < 127);
    out.push(0x80 | coded.len() as u8);
    out.extend_from_slice(&coded);
}

/// Repeated Huffman values (a server's `date` and `etag` in every answer)
/// decode from the decoder's memo of recent strings: more distinct values
/// than it keeps, in turn and repeated, indexed and not, each decoded as
/// the plain decoder does; a remembered string broken by EOS bits
/// appended is still refused.
#[test]
fn repeated_huffman_values_decode_the_same_as_fresh_ones() {
    // Same-length dates a second apart, and more values than the memo keeps.
    let mut values: Vec<String> = (0..24)
        .map(|s| format!("Sun, 29 Nov 2026 03:51:{s:02} GMT"))
        .collect();
    values.extend(["\"5f1a2b3c-1b8\"", "text/html", "nginx/1.22.1", "440"].map(String::from));
    let mut d = Decoder::new(4096);
    for round in 0..200usize {
        let v = values[(round * 7 / 3) % values.len()].as_str();
        let w = values[(round / 3) % values.len()].as_str();
        let mut block = Vec::new();
        // Literal with incremental indexing, new name; then without indexing.
        block.push(0x40);
        huff_literal("x-one", &mut block);
        huff_literal(v, &mut block);
        block.push(0x00);
        huff_literal("x-two", &mut block);
        huff_literal(w, &mut block);
        let mut all = All::default();
        d.decode(&block, &mut all).unwrap();
        assert_eq!(all.0, list(&[("x-one", v), ("x-two", w)]), "round {round}");
    }
    // The coded form of a remembered value with its last byte broken (an
    // EOS code inside): an error, not the remembered value.
    let mut coded = Vec::new();
    huffman::encode(values[27].as_bytes(), &mut coded);
    let mut block = vec![0x00];
    huff_literal("x-two", &mut block);
    let mut bad = coded.clone();
    *bad.last_mut().unwrap() = 0xff;
    bad.extend_from_slice(&[0xff, 0xff, 0xff]);
    block.push(0x80 | bad.len() as u8);
    block.extend_from_slice(&bad);
    assert!(d.decode(&block, &mut All::default()).is_err());
}

/// nginx's way: the table set to 0 bytes, then every answer's fields sent
/// "with incremental indexing". Each is reported whole and the table stays
/// empty (an indexed reference to it is an error), answer after answer.
#[test]
fn fields_indexed_into_an_empty_table_are_reported_and_not_kept() {
    let mut d = Decoder::new(4096);
    for round in 0..3 {
        let mut block = if round == 0 { vec![0x20] } else { Vec::new() };
        block.push(0x40 | 33); // date (static index 33), incremental indexing
        huff_literal("Sun, 29 Nov 2026 03:51:07 GMT", &mut block);
        block.push(0x40);
        huff_literal("x-new", &mut block);
        huff_literal("v", &mut block);
        let mut all = All::default();
        d.decode(&block, &mut all).unwrap();
        assert_eq!(
            all.0,
            list(&[("date", "Sun, 29 Nov 2026 03:51:07 GMT"), ("x-new", "v")])
        );
        assert_eq!(d.table_size(), 0, "round {round}");
        assert!(d.decode(&[0x80 | 62], &mut All::default()).is_err());
    }
}
