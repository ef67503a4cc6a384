//! Unit tests of `http.rs`, kept in their own file so that file reads as its job.

use super::*;
use std::io::Write;

#[test]
fn decodes_gzip_and_caps_a_bomb() {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(b"hello hello hello").unwrap();
    let gz = e.finish().unwrap();
    let d = decode("gzip", &gz, 100);
    assert_eq!(d.kept, b"hello hello hello");
    assert_eq!(d.total, 17);
    // 60 MB of zeros compress to ~60 KB: decoding stops at the cap.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..60 {
        e.write_all(&zeros).unwrap();
    }
    let bomb = e.finish().unwrap();
    let d = decode("gzip", &bomb, 10);
    assert!(d.capped);
    assert!(d.total >= MAX_DECODED && d.total < MAX_DECODED + 65536 * 2);
    assert_eq!(d.kept.len(), 10);
}

#[test]
fn unknown_and_corrupt_codings_are_flagged() {
    assert!(decode("zstd", b"abc", 10).error.is_some());
    assert!(decode("compress", b"abc", 10)
        .error
        .is_some_and(|e| e.contains("unknown content coding")));
    assert!(decode("gzip", b"not gzip", 10).error.is_some());
    let d = decode(
        "deflate",
        &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
        10,
    );
    assert!(d.error.is_none(), "{:?}", d.error);
}

#[test]
fn the_budget_refuses_past_its_limit() {
    let b = Budget::new(100);
    assert!(b.charge(60) && b.charge(40));
    assert!(!b.exhausted());
    assert!(!b.charge(1));
    assert!(b.exhausted());
    assert_eq!(b.used(), 101);
}

#[test]
fn display_url_hides_credentials() {
    let u = Url::parse("http://user:secret@example.test/x").unwrap();
    assert_eq!(display_url(&u), "http://example.test/x");
}

/// zstd as the reference `zstd` tool writes it (Chromium asks for zstd, so a
/// server may send it): decoded whole, and a zstd bomb stops at the cap.
#[test]
fn decodes_what_the_zstd_tool_writes() {
    let zstd = |input: &[u8]| -> Option<Vec<u8>> {
        let mut child = std::process::Command::new("zstd")
            .args(["-q", "-c", "-19"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        let mut stdin = child.stdin.take()?;
        let data = input.to_vec();
        let w = std::thread::spawn(move || stdin.write_all(&data));
        let out = child.wait_with_output().ok()?;
        w.join().ok()?.ok()?;
        out.status.success().then_some(out.stdout)
    };
    let text: Vec<u8> = (0..2000)
        .flat_map(|i| format!("line {i} of a stylesheet {{color:red}}\n").into_bytes())
        .collect();
    let Some(z) = zstd(&text) else {
        redline_testkit::need::missing("zstd (apt-get install zstd)");
        return;
    };
    assert!(z.len() < text.len() / 5, "{} of {}", z.len(), text.len());
    let d = decode("zstd", &z, usize::MAX);
    assert_eq!(d.error, None);
    assert_eq!(d.total, text.len() as u64);
    assert_eq!(d.kept, text);
    let bomb = zstd(&vec![0u8; 60 * 1024 * 1024]).expect("zstd ran before");
    let d = decode("zstd", &bomb, 10);
    assert!(d.capped && d.total >= MAX_DECODED, "{}", d.total);
}
