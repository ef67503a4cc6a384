//! The engine's layers, checked: every `crate::…` path in a module's code
//! (tests aside) must name a module of its own layer or a lower one, and the
//! drivers never name each other (the parts they share, `ioloop`, `defer`
//! and `tcp`, aside). The table below is the one in
//! docs/ARCHITECTURE.md ("Layers"); a new module gets a row here.

use std::path::Path;

/// The layers, lowest first.
const LAYERS: [&str; 7] = [
    "support", "codec", "session", "plan", "core", "driver", "run",
];

/// The layer of a module, from its path under `src/` (`http2/conn.rs`) or
/// from an import path after `crate::` (`http2::conn::Http2Session`).
fn layer(path: &str) -> Option<usize> {
    let mut parts = path.split(['/', ':']).filter(|p| !p.is_empty());
    let top = parts.next()?.trim_end_matches(".rs");
    let name = match top {
        "sys" | "timer" | "tls" => "support",
        "head" | "h1" | "field" | "altsvc" => "codec",
        // The HTTP/2 codec (frames, HPACK, requests) and its session.
        "http2" => match parts.next().map(|p| p.trim_end_matches(".rs")) {
            Some("conn" | "Http2Session") => "session",
            _ => "codec",
        },
        // The HTTP/3 codec (frames, QPACK, requests) and its session.
        "http3" => match parts.next().map(|p| p.trim_end_matches(".rs")) {
            Some("conn" | "Http3Session" | "Http3Config") => "session",
            _ => "codec",
        },
        "session" => "session",
        "plan" | "pacer" | "scenario" | "workload" | "redirect" | "gen" | "urls" | "har"
        | "replay" | "alpn" => "plan",
        "core" | "ledger" | "control" | "overdue" => "core",
        "worker" | "mux" | "ioloop" | "defer" | "tcp" => "driver",
        "run" | "lib" | "layers" => "run",
        _ => return None,
    };
    LAYERS.iter().position(|l| *l == name)
}

/// A file's code without its unit tests (a `tests.rs`, or the
/// `#[cfg(test)] mod tests` at its end).
fn code(text: &str) -> &str {
    let cut = [
        "#[cfg(test)]\nmod tests",
        "#[cfg(test)]\npub(crate) mod tests",
    ]
    .iter()
    .filter_map(|m| text.find(m))
    .min();
    &text[..cut.unwrap_or(text.len())]
}

/// Every `crate::a::b` path in `text` (its first two segments).
fn imports(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `redline_crate::…` and the like
        }
        let rest = &text[i + "crate::".len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let segs: Vec<&str> = rest[..end].split("::").take(2).collect();
        out.push(segs.join("::"));
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn imports_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    assert!(files.len() > 50, "{}", src.display());
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let name = f.file_name().unwrap().to_string_lossy();
        if name == "tests.rs" || name.ends_with("_tests.rs") || rel == "layers.rs" {
            continue;
        }
        let Some(from) = layer(&rel) else {
            wrong.push(format!(
                "{rel}: no layer (add it to layers.rs and ARCHITECTURE.md)"
            ));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for path in imports(code(&text)) {
            // Root re-exports (`crate::Plan`) are named in docs only.
            if path.starts_with(|c: char| c.is_ascii_uppercase()) {
                continue;
            }
            let Some(to) = layer(&path) else {
                wrong.push(format!("{rel}: crate::{path} has no layer"));
                continue;
            };
            let top = |p: &str| p.split(['/', ':']).next().unwrap_or("").replace(".rs", "");
            if to > from {
                wrong.push(format!(
                    "{rel} ({}) imports crate::{path} ({})",
                    LAYERS[from], LAYERS[to]
                ));
            } else if LAYERS[from] == "driver"
                && to == from
                && top(&rel) != top(&path)
                && !matches!(top(&path).as_str(), "ioloop" | "defer" | "tcp")
            {
                wrong.push(format!(
                    "{rel}: a driver imports the other driver (crate::{path})"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "upward imports:\n{}", wrong.join("\n"));
}

#[test]
fn the_checker_sees_an_upward_import() {
    assert_eq!(layer("http2/conn/recv.rs"), layer("session::Event"));
    assert!(layer("http2/frame.rs") < layer("http2::conn::X"));
    let text = "use crate::mux::MAX;\n#[cfg(test)]\nmod tests { use crate::run::x; }";
    assert_eq!(imports(code(text)), ["mux::MAX"]);
    assert!(layer("mux") > layer("http2/conn.rs"));
}
