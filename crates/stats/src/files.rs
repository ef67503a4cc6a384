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

/// [`read`] as UTF-8 text; invalid UTF-8 is an error naming the file.
pub fn read_text(p: &Path, kind: Kind, label: &str) -> Result<String, String> {
    let b = read(p, kind, label)?;
    String::from_utf8(b).map_err(|_| {
        let sep = if label.is_empty() { "" } else { " " };
        format!("{label}{sep}{} is not UTF-8 text", p.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
