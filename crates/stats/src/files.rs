//! The one way redline reads a file named by the user: only a regular file (a
//! directory, FIFO, socket or device such as `/dev/zero` is refused without
//! blocking on it), and at most a documented size per kind of file, checked
//! before and while reading, so a wrong path never grows memory until killed.
//! Every error is one line that names the file and what it was for.

use std::io::Read;
use std::path::Path;

/// What a file is for; each kind has its size limit ([`Kind::limit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `--body-file` and a scenario's `body_file`: 256 MiB.
    Body,
    /// A scenario file (TOML/JSON): 16 MiB.
    Scenario,
    /// A scenario's CSV data file: 256 MiB.
    Csv,
    /// `--cacert`, `--cert`, `--key` (PEM): 1 MiB.
    Pem,
    /// A server configuration (`tune`, `size`, `--server-config`): 16 MiB.
    Config,
    /// A run record or page report (JSON) for `compare`, `merge`, `report`: 256 MiB.
    Record,
    /// A HAR file or other JSON input: 256 MiB.
    Har,
    /// A server's error log (`size --error-log`): 256 MiB.
    Log,
    /// An arguments file and other small text: 1 MiB.
    Text,
}

impl Kind {
    /// The largest file of this kind that is read, in bytes.
    pub const fn limit(self) -> u64 {
        match self {
            Kind::Body | Kind::Csv | Kind::Record | Kind::Har | Kind::Log => 256 << 20,
            Kind::Scenario | Kind::Config => 16 << 20,
            Kind::Pem | Kind::Text => 1 << 20,
        }
    }
    fn what(self) -> &'static str {
        match self {
            Kind::Body => "a body file",
            Kind::Scenario => "a scenario file",
            Kind::Csv => "a CSV file",
            Kind::Pem => "a PEM file",
            Kind::Config => "a configuration file",
            Kind::Record => "a run record",
            Kind::Har => "a HAR file",
            Kind::Log => "a log file",
            Kind::Text => "an input file",
        }
    }
}

fn human(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{} MiB", n >> 20)
    } else {
        format!("{} KiB", n >> 10)
    }
}

/// Reads `p` whole as bytes after checking it is a regular file within
/// `kind`'s limit. `label` says what it was given as (`--body-file`); Err is
/// one line naming it.
pub fn read(p: &Path, kind: Kind, label: &str) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = if label.is_empty() {
        p.display().to_string()
    } else {
        format!("{label} {}", p.display())
    };
    // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let md = f
        .metadata()
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if md.is_dir() {
        return Err(format!("{shown} is a directory, not {}", kind.what()));
    }
    if !md.is_file() {
        return Err(format!(
            "{shown} is not a regular file (a FIFO, socket or device): not read"
        ));
    }
    let limit = kind.limit();
    let too_big = |n: u64| {
        format!(
            "{shown} is {n} bytes, more than {} may be ({} at most): not read",
            kind.what(),
            human(limit)
        )
    };
    if md.len() > limit {
        return Err(too_big(md.len()));
    }
    let mut b = Vec::with_capacity(md.len() as usize);
    f.take(limit + 1)
        .read_to_end(&mut b)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if b.len() as u64 > limit {
        return Err(too_big(b.len() as u64));
    }
    Ok(b)
}

/// [`read`] as UTF-8 text; invalid UTF-8 is an error naming the file. JSON
/// kinds (a run record, a HAR file) must also pass [`json_shape`] before
/// any parser sees them.
pub fn read_text(p: &Path, kind: Kind, label: &str) -> Result<String, String> {
    let b = read(p, kind, label)?;
    let shown = || {
        let sep = if label.is_empty() { "" } else { " " };
        format!("{label}{sep}{}", p.display())
    };
    if matches!(kind, Kind::Record | Kind::Har) {
        json_shape(&b).map_err(|e| format!("{}: {e}", shown()))?;
    }
    String::from_utf8(b).map_err(|_| format!("{} is not UTF-8 text", shown()))
}

/// What reading a JSON input may cost beyond its text, estimated from its
/// shape before parsing: 512 MiB. Parsed into `serde_json::Value` a number,
/// string, key or array costs up to [`JSON_VALUE_COST`] bytes (its slot,
/// with a vector's spare room), an object [`JSON_OBJECT_COST`] more (its
/// map's first node); string bytes come on top and are at most the text's.
/// So a JSON reader of a 256 MiB file holds at most about 2 × 256 MiB +
/// 512 MiB = 1 GiB (4 × the file limit), whatever the shape.
pub const MAX_JSON_COST: u64 = 512 << 20;
/// The estimated cost of one JSON value (see [`MAX_JSON_COST`]).
pub const JSON_VALUE_COST: u64 = 64;
/// The estimated extra cost of one JSON object (see [`MAX_JSON_COST`]).
pub const JSON_OBJECT_COST: u64 = 640;
/// The longest JSON string (raw bytes between its quotes): 32 MiB. A run
/// record's longest strings are histograms of a few KiB; a HAR holding a
/// larger response body is refused (export it without content).
pub const MAX_JSON_STRING: u64 = 32 << 20;

/// Checks a JSON text's shape before any parser materializes it, in one
/// pass without allocating: its estimated cost at most [`MAX_JSON_COST`]
/// and no string longer than [`MAX_JSON_STRING`]. So every JSON reader of a
/// file (`merge`, `report`, `compare`, `fetch`, `import har`, `size
/// --from`) stays within about 4 × its file's size limit in memory,
/// whatever the file's shape: a 240 MiB record of `[0,0,0,…]` (126 million
/// values, 3 GiB when parsed) or 8 MiB of `[{"a":0},…]` (1 GB) are refused
/// at once. Err: one line saying what and where.
pub fn json_shape(b: &[u8]) -> Result<(), String> {
    // One value per separator or opening outside strings (an upper bound of
    // the values), an object's map on top.
    let mut cost: u64 = JSON_VALUE_COST;
    let mut in_str = false;
    let mut escaped = false;
    let mut str_start = 0usize;
    for (i, &c) in b.iter().enumerate() {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_str = false;
            } else if (i - str_start) as u64 > MAX_JSON_STRING {
                return Err(format!(
                    "a JSON string at byte {str_start} is longer than {} (at most): not read",
                    human(MAX_JSON_STRING)
                ));
            }
            continue;
        }
        match c {
            b'"' => {
                in_str = true;
                str_start = i;
            }
            b',' | b'[' | b'{' | b':' => {
                cost += JSON_VALUE_COST + if c == b'{' { JSON_OBJECT_COST } else { 0 };
                if cost > MAX_JSON_COST {
                    return Err(format!(
                        "a JSON structure that would take more than {} to read (at byte {i}): not read",
                        human(MAX_JSON_COST)
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shapes_past_the_bounds_are_refused_in_one_line() {
        assert!(json_shape(br#"{"a": [1, 2, {"b": "x,y[{"}], "c": "\"["}"#).is_ok());
        let values = (MAX_JSON_COST / JSON_VALUE_COST) as usize;
        let mut many = b"[0".to_vec();
        many.extend(b",0".repeat(values - 2));
        many.push(b']');
        assert!(json_shape(&many).is_ok());
        many.pop();
        many.extend(b",0]");
        let e = json_shape(&many).unwrap_err();
        assert!(
            e.contains("a JSON structure that would take more than 512 MiB to read")
                && !e.contains('\n'),
            "{e}"
        );
        // Objects cost their map too.
        let objects = (MAX_JSON_COST / (JSON_OBJECT_COST + 3 * JSON_VALUE_COST)) as usize;
        let mut o = b"[".to_vec();
        o.extend(b"{\"a\":0},".repeat(objects + 1));
        o.extend(b"0]");
        assert!(json_shape(&o).is_err());
        // Separators inside strings are not values.
        let mut s = b"[\"".to_vec();
        s.extend(b",".repeat(values + 10));
        s.extend(b"\"]");
        assert!(json_shape(&s).is_ok());
        let mut long = b"{\"k\": \"".to_vec();
        long.extend(std::iter::repeat_n(b'a', MAX_JSON_STRING as usize + 2));
        long.extend(b"\"}");
        let e = json_shape(&long).unwrap_err();
        assert!(
            e.contains("a JSON string at byte 6 is longer than 32 MiB"),
            "{e}"
        );
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_at_once() {
        for (p, want) in [
            ("/dev/zero", "not a regular file"),
            ("/dev/null", "not a regular file"),
            ("/", "is a directory"),
        ] {
            for k in [Kind::Body, Kind::Scenario, Kind::Pem, Kind::Record] {
                let e = read(Path::new(p), k, "--x").unwrap_err();
                assert!(e.contains(want), "{p} {k:?}: {e}");
                assert!(!e.contains('\n'));
            }
        }
        let d = std::env::temp_dir().join(format!("redline-files-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&d);
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        let e = read(&fifo, Kind::Text, "--x").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let big = d.join("big");
        std::fs::write(&big, vec![b'a'; (Kind::Pem.limit() + 1) as usize]).unwrap();
        let e = read(&big, Kind::Pem, "--cacert").unwrap_err();
        assert!(e.contains("1 MiB at most"), "{e}");
        std::fs::write(&big, b"ok").unwrap();
        assert_eq!(read_text(&big, Kind::Pem, "--cacert").unwrap(), "ok");
        let _ = std::fs::remove_dir_all(&d);
    }
}
