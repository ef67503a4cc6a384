//! The process exit codes: one enum every command returns, its meaning for
//! the README's table (checked by a unit test), and [`fail`], the one-line
//! error on stderr that goes with a code.

/// How a `redline` command ended; the process exits with [`Exit::code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok,
    /// A runtime failure: the engine could not start, the output could not be
    /// written, the page could not be loaded, no request got an answer.
    Failure,
    /// Bad input: a flag, URL, header, file, host or run name.
    Usage,
    /// `audit`/`tune --fail-on`: findings at or above the level.
    Findings,
    /// A `--threshold` (or `find`'s SLO) did not hold, or `--abort-on-fail` stopped the run.
    Threshold,
    /// Interrupted by Ctrl-C (the report is still printed).
    Interrupted,
    /// `redline ab`: the target refused the connection (ab's own exit code,
    /// the errno ECONNREFUSED).
    Refused,
}

impl Exit {
    /// Every exit code, in order.
    pub const ALL: [Exit; 7] = [
        Exit::Ok,
        Exit::Failure,
        Exit::Usage,
        Exit::Findings,
        Exit::Threshold,
        Exit::Refused,
        Exit::Interrupted,
    ];

    /// The process exit status.
    pub fn code(self) -> i32 {
        match self {
            Exit::Ok => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Findings => 3,
            Exit::Threshold => 4,
            Exit::Interrupted => 130,
            Exit::Refused => 111,
        }
    }

    /// The one-line summary in `--help`.
    pub fn help_line() -> String {
        let short = |e: Exit| match e {
            Exit::Ok => "ok",
            Exit::Failure => "runtime failure",
            Exit::Usage => "usage error",
            Exit::Findings => "findings (audit/tune --fail-on)",
            Exit::Threshold => "a --threshold failed",
            Exit::Interrupted => "interrupted (report still printed)",
            Exit::Refused => "redline ab: connection refused, as ab",
        };
        let parts: Vec<String> = Exit::ALL
            .iter()
            .map(|&e| format!("{} {}", e.code(), short(e)))
            .collect();
        format!("Exit codes: {}.", parts.join(", "))
    }
}

/// The README's words for each code; only the unit test below reads them,
/// so the README cannot drift from the enum.
#[cfg(test)]
impl Exit {
    /// What the code means, as the README's exit-code table says it.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Failure => {
                "runtime failure: the engine could not start, the report could not be written, \
                 the page could not be loaded, the run or page load could not be saved to the \
                 history, `--html` or `--junit` could not be written, or no request of the run got an answer \
                 at all (the report is still printed)"
            }
            Exit::Usage => {
                "usage error (bad flag, URL, header, unreadable file, a file that is not a \
                 regular file or is over its size limit, unresolvable host, unknown run, a run \
                 history that is not redline's or fails `PRAGMA quick_check`: nothing is written \
                 to it), always with a one-line message"
            }
            Exit::Findings => "findings at or above `--fail-on` (`audit`, `tune`)",
            Exit::Threshold => {
                "a `--threshold` did not hold (or `--abort-on-fail` stopped the run; \
                 `find`: no step met the SLO)"
            }
            Exit::Interrupted => {
                "interrupted by Ctrl-C, or `q`/Ctrl-C in the live view (the report is still \
                 printed, marked *interrupted*; a second Ctrl-C quits at once)"
            }
            Exit::Refused => {
                "`redline ab` only: the target refused the connection; as ab, \
                 `apr_socket_recv: Connection refused (111)` on stderr and no report \
                 (`redline wrk` exits 1 with wrk's `unable to connect to HOST:PORT Connection refused`)"
            }
        }
    }

    /// The README's exit-code table (Markdown), generated from this enum.
    pub fn readme_table() -> String {
        let mut s = String::from("| Exit code | Meaning |\n|---|---|\n");
        for e in Exit::ALL {
            s.push_str(&format!("| {} | {} |\n", e.code(), e.meaning()));
        }
        s
    }
}

/// Prints a one-line error and returns the exit code.
pub fn fail(code: Exit, msg: impl std::fmt::Display) -> Exit {
    // One line, whatever the message carries from outside (a file name, a
    // server's words): control characters are shown escaped.
    eprintln!(
        "redline: error: {}",
        redline_report::escape::clean(&msg.to_string())
    );
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's table is the enum's: a new or changed code fails here
    /// until the README says so (paste `Exit::readme_table()` between the markers).
    #[test]
    fn readme_table_matches_the_enum() {
        let readme = include_str!("../../../README.md");
        let start = "<!-- exit-codes: generated from crates/cli/src/exit.rs -->\n";
        let end = "<!-- /exit-codes -->";
        let from = readme
            .find(start)
            .expect("README has the exit-code markers")
            + start.len();
        let to = from + readme[from..].find(end).expect("closing marker");
        assert_eq!(&readme[from..to], Exit::readme_table());
    }

    #[test]
    fn codes_are_distinct() {
        let mut v: Vec<i32> = Exit::ALL.iter().map(|e| e.code()).collect();
        v.sort();
        v.dedup();
        assert_eq!(v.len(), Exit::ALL.len());
    }
}
