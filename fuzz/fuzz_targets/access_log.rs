//! Access logs for `redline replay`: any bytes (plain or gzip) under any log
//! format read without a panic; every line is counted once (kept, other
//! method or bad); each kept request is in one group and its path is visible
//! ASCII, so nothing from the log can break the request line it is sent in;
//! the pacer sends exactly the kept requests, each within its logged second; a format string
//! from the input compiles or is refused with a one-line message.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_engine::pacer::{Pacer, Profile};
use redline_engine::plan::Arrival;
use redline_engine::replay::{Log, LogFormat, Options};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    // The first line may be a format of its own (selector 4 or 5).
    let (format, body) = match sel % 6 {
        0 => (LogFormat::default_format(), rest),
        1 => (LogFormat::parse("combined").unwrap(), rest),
        2 => (
            LogFormat::parse("$msec $status \"$request_method $request_uri\" $host").unwrap(),
            rest,
        ),
        3 => (
            LogFormat::parse("[%{sec}t] %>s \\\"%r\\\" %D %{Host}i").unwrap(),
            rest,
        ),
        k => {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            let spec = String::from_utf8_lossy(&rest[..end]);
            let spec = if k == 4 {
                format!("apache:{spec}")
            } else {
                format!("nginx:{spec}")
            };
            match LogFormat::parse(&spec) {
                Ok(f) => (f, &rest[(end + 1).min(rest.len())..]),
                Err(e) => {
                    assert!(!e.contains('\n'), "{e}");
                    return;
                }
            }
        }
    };
    let opts = Options {
        methods: if sel & 0x80 != 0 { None } else { Options::default().methods },
        limit: (sel & 0x40 != 0).then_some(5),
        breakdown: 1 + (sel as usize >> 3 & 3),
        host_map: vec![("example.com".into(), 1)],
        window_s: (sel & 0x20 != 0).then_some(3),
    };
    let log = Log::from_bytes(body, "fuzz.log", &format, &opts);
    let s = &log.summary;
    assert!(s.kept + s.cut + s.other_methods + s.bad_lines <= s.lines + 1);
    assert!(s.bad_examples.len() <= s.bad_lines as usize);
    assert_eq!(s.kept as usize, log.ticks.len());
    let per_group: u64 = log.groups.iter().map(|g| g.requests).sum();
    assert_eq!(per_group, s.kept);
    for t in &log.ticks {
        assert!((t.group as usize) < log.groups.len());
        let p = &log.paths[t.path as usize];
        assert!(p.bytes().all(|c| c.is_ascii_graphic()), "{p:?}");
    }
    for g in &log.groups {
        assert!(g.method.bytes().all(|c| c.is_ascii_alphabetic() || c == b'-'));
    }
    // The schedule sends exactly the kept requests, each within its own
    // second of the log (at the replay's speed).
    if !log.ticks.is_empty() && log.ticks.len() <= 20_000 {
        let speed = [1.0, 2.0, 3.0, 0.5, 7.0][sel as usize % 5];
        let profile = Profile::from_stages(&log.stages(speed), true);
        let n = log.ticks.len() as u64;
        let mut p = Pacer::with_profile(Arrival::Constant, profile, 0, 1, Some(n), None, 1);
        let mut k = 0usize;
        while let Some(at) = p.next_send() {
            let t = at.as_secs_f64() * speed;
            let want = log.ticks[k].second as f64;
            assert!(t >= want - 1e-3 && t < want + 1.0 + 1e-3, "tick {k} at {t}, second {want}");
            k += 1;
            assert!(k <= log.ticks.len());
        }
        assert_eq!(k, log.ticks.len());
    }
});
