//! Scenario templates (`{{vu}}`, `{{uuid}}`, `{{random_int(a,b)}}`…): any
//! text as a request's path, header value and body either compiles and
//! renders (bounded: a request never grows past its template's literal
//! text plus the generated values' limits) or is refused with one line
//! naming the file, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use redline_engine::scenario::{file, CompileArgs, Scenario};
use std::time::Duration;

fn toml_str(s: &str) -> String {
    redline_engine::har::toml_str(s)
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if s.len() > 4096 {
        return;
    }
    let text = format!(
        "[[request]]\nname = \"t\"\npath = {}\nbody = {}\nheaders = {{ X-T = {} }}\n",
        toml_str(&format!("/{s}")),
        toml_str(s),
        toml_str(s)
    );
    let Ok(f) = file::parse(&text, "fuzz.toml") else {
        return;
    };
    let tls = redline_engine::tls::TlsArgs::default();
    match Scenario::compile(CompileArgs {
        path: std::path::Path::new("fuzz.toml"),
        file: &f,
        text: &text,
        base: "http://127.0.0.1:9",
        allow_paths: false,
        tls: &tls,
        http10: false,
        cli_headers: &[],
        timeout: Duration::from_secs(1),
    }) {
        Ok(mut sc) => {
            sc.seed = 7;
            let mut vu = sc.new_vu(0);
            for close in [false, true] {
                sc.prepare(0, &mut vu, close);
                let wire = sc.wire(0, &vu, close);
                // Three copies of the text plus generated values (each at most
                // 64 KiB) plus the head.
                assert!(wire.len() < 3 * s.len() * 65_536 + 4096, "{}", wire.len());
            }
        }
        Err(e) => {
            let e = e.to_string();
            assert!(e.starts_with("fuzz.toml"), "{e}");
            assert!(!e.contains('\n'), "{e:?}");
        }
    }
});
