//! `--urls` target lists: parsed or refused with `line N: …` (or "no
//! targets"), one line without control characters, never a panic; a parsed
//! list always becomes a scenario with one uniquely named request per target.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_engine::urls::{parse, to_scenario, Order};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match parse(s) {
        Ok(t) => {
            let f = to_scenario(&t, Order::RoundRobin);
            assert_eq!(f.request.len(), t.len());
            let mut names = std::collections::HashSet::new();
            assert!(f.request.iter().all(|r| names.insert(r.name.clone())));
        }
        Err(e) => {
            assert!(e.starts_with("line ") || e.starts_with("no targets"), "{e}");
            assert!(
                !e.contains('\n') && !e.chars().any(char::is_control),
                "{e:?}"
            );
        }
    }
});
