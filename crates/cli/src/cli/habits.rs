//! What a newcomer types by habit, caught before or after clap: a mistyped
//! subcommand ("did you mean"), another tool's flag (hey, oha, k6, wrk, ab,
//! curl) pointed to redline's, and the warnings for input that is accepted
//! but may not mean what was meant (a method no server knows, a latency
//! threshold without a unit). Each is one line on stderr.

/// Subcommands a mistyped first word is matched against: every visible one.
fn subcommand_names(cmd: &clap::Command) -> Vec<String> {
    let mut v: Vec<String> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect();
    v.push("help".into());
    v
}

/// Optimal string alignment distance (Levenshtein with transpositions as one
/// edit: "histroy" is one from "history").
fn osa(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// `redline WORD`: is WORD a mistyped subcommand rather than a host? Decided
/// by its shape, never by DNS: a host or URL has a dot, a colon or a slash
/// (or is `localhost`); a bare word within one edit (two for words longer
/// than four letters) of a subcommand is a typo. The one-line error, or None
/// (the word is the shorthand `redline URL`).
pub(crate) fn subcommand_typo(word: &str, cmd: &clap::Command) -> Option<String> {
    if word.is_empty()
        || word.starts_with('-')
        || word.contains(['.', ':', '/', '[', '@'])
        || word.eq_ignore_ascii_case("localhost")
        || !word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    let limit = if lower.chars().count() <= 4 { 1 } else { 2 };
    let (best, d) = subcommand_names(cmd)
        .into_iter()
        .map(|n| {
            let d = osa(&lower, &n);
            (n, d)
        })
        .min_by_key(|(_, d)| *d)?;
    (d <= limit).then(|| {
        format!(
            "unknown command '{word}': did you mean '{best}'? (for a host named {word}: redline run http://{word}/)"
        )
    })
}

/// Another tool's flag that redline spells differently: (flag, whose, what
/// to use instead). Only flags redline's `run` and `find` do not have.
const HABITS: &[(&str, &str, &str)] = &[
    ("-z", "hey/oha", "the duration is -d DURATION, e.g. -d 30s"),
    ("--json", "oha", "JSON output is -o json"),
    ("-j", "oha", "JSON output is -o json"),
    (
        "--vus",
        "k6",
        "closed-loop users are connections: -c N (an arrival rate is -r REQ/S)",
    ),
    (
        "-u",
        "k6",
        "closed-loop users are connections: -c N (an arrival rate is -r REQ/S)",
    ),
    ("--iterations", "k6", "the request count is -n N"),
    ("-i", "k6", "the request count is -n N"),
    ("--rps", "k6", "the rate is -r REQ/S"),
    ("--qps", "oha", "the rate is -r REQ/S"),
    (
        "--out",
        "k6",
        "the report format is -o json|csv; an HTML report is --html FILE",
    ),
    ("-D", "hey/oha", "a body from a file is --body-file FILE"),
    ("-A", "hey", "an Accept header is -H 'Accept: TYPE'"),
    ("-X", "curl", "the method is -m METHOD"),
    ("-h2", "hey", "HTTP/2 is --http2"),
    (
        "--latency",
        "wrk",
        "the latency distribution is always in the report: leave it out",
    ),
    (
        "-p",
        "ab",
        "a body from a file is --body-file FILE (its type -T TYPE)",
    ),
    (
        "-s",
        "wrk",
        "several requests are a scenario: --scenario FILE.toml",
    ),
    (
        "-x",
        "hey/curl",
        "redline does not send through a proxy: aim at the server itself",
    ),
];

/// Is `tok` the flag `flag`, alone or with its value attached (`-z10s`,
/// `--json=x`)?
fn is_flag(tok: &str, flag: &str) -> bool {
    if tok == flag {
        return true;
    }
    if flag.starts_with("--") {
        return tok
            .strip_prefix(flag)
            .is_some_and(|rest| rest.starts_with('='));
    }
    // A short flag with its value attached; `-h2` is its own.
    flag.len() == 2 && flag != "-h" && tok.starts_with(flag) && tok.len() > 2
}

/// The value of `-X VALUE`, `-XVALUE`, `--long VALUE` or `--long=VALUE` at
/// `args[i]`, if the token is that flag.
fn value_of<'a>(args: &'a [String], i: usize, short: &str, long: &str) -> Option<&'a str> {
    let tok = args[i].as_str();
    if tok == short || tok == long {
        return args.get(i + 1).map(String::as_str);
    }
    if let Some(v) = tok.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
        return Some(v);
    }
    if !short.is_empty() && tok.len() > 2 && tok.starts_with(short) {
        return Some(&tok[2..]);
    }
    None
}

/// A plain number (hey's and oha's `-q 100`).
fn is_number(s: &str) -> bool {
    !s.is_empty() && s.parse::<f64>().is_ok_and(f64::is_finite) && !s.contains(['e', 'E'])
}

/// The tokens of a `run` or `find` command line (after the subcommand), up
/// to a `--`.
fn run_tokens(args: &[String]) -> Option<&[String]> {
    let sub = args.get(1)?;
    if sub != "run" && sub != "find" {
        return None;
    }
    let rest = &args[2..];
    let end = rest.iter().position(|a| a == "--").unwrap_or(rest.len());
    Some(&rest[..end])
}

/// A habit that is a mistake whatever clap makes of it: `-q 100` (hey's and
/// oha's rate; redline's `-q` is quiet, so the number would become the
/// target) and hey's `-h2` (clap would read `-h` and print the help). The
/// one-line error.
pub(crate) fn before_parse(args: &[String]) -> Option<String> {
    let toks = run_tokens(args)?;
    if toks.iter().any(|t| t == "-h2") {
        return Some("unknown flag '-h2' (hey's): in redline HTTP/2 is --http2".into());
    }
    toks.iter().enumerate().find_map(|(i, t)| {
        (t == "-q" && toks.get(i + 1).is_some_and(|v| is_number(v))).then(|| {
            format!(
                "-q is quiet in redline; a rate (hey's and oha's -q {}) is -r REQ/S, e.g. -r {}",
                toks[i + 1],
                toks[i + 1]
            )
        })
    })
}

/// After clap refused a `run` or `find` command line: the other tool's habit
/// behind it, pointed to redline's flag (one line), if there is one.
pub(crate) fn after_error(args: &[String]) -> Option<String> {
    let toks = run_tokens(args)?;
    for (i, t) in toks.iter().enumerate() {
        if let Some(v) = value_of(toks, i, "-d", "--duration") {
            if redline_engine::parse_duration(v).is_err() {
                return Some(
                    "-d is the duration in redline (e.g. -d 30s); a request body (hey's and oha's -d) is -b BODY, or --body-file FILE"
                .to_string());
            }
        }
        if let Some((flag, who, what)) = HABITS.iter().find(|(f, _, _)| is_flag(t, f)) {
            return Some(format!(
                "unknown flag '{flag}' (a {who} flag): in redline {what}"
            ));
        }
    }
    None
}

/// clap's "unexpected argument" as one line, without its `-- -z` tip: the
/// argument, clap's suggestion if it has one, and where the flags are listed.
pub(crate) fn unknown_argument(e: &clap::Error, args: &[String]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    if e.kind() != clap::error::ErrorKind::UnknownArgument {
        return None;
    }
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => return None,
    };
    let hint = match e.get(ContextKind::SuggestedArg) {
        Some(ContextValue::String(s)) => format!(": did you mean '{s}'?"),
        _ => String::new(),
    };
    let sub = args
        .get(1)
        .filter(|s| !s.starts_with('-'))
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    Some(format!(
        "unexpected argument '{arg}'{hint} (the flags: redline{sub} --help)"
    ))
}

/// Any other clap error as one line (README: a usage error is always one
/// line): clap's message and its notes joined, without the usage block, the
/// "use `-- -z`" tip and the pointer to `--help`, which is named at the end.
pub(crate) fn one_line(e: &clap::Error, args: &[String]) -> String {
    let text = e.render().to_string();
    let mut parts = Vec::new();
    for block in text.split("\n\n") {
        let b = block.trim();
        if b.is_empty()
            || b.starts_with("Usage:")
            || b.starts_with("For more information")
            || (b.starts_with("tip: to pass") && b.contains("as a value"))
        {
            continue;
        }
        let joined: Vec<&str> = b.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        parts.push(joined.join(" "));
    }
    let msg = parts.join("; ");
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
    let sub = args
        .get(1)
        .filter(|s| !s.starts_with('-'))
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    format!("{msg} (see redline{sub} --help)")
}

/// Methods servers know (RFC 9110, PATCH, WebDAV, common extensions).
const METHODS: &[&str] = &[
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "DELETE",
    "CONNECT",
    "OPTIONS",
    "TRACE",
    "PATCH",
    "PROPFIND",
    "PROPPATCH",
    "MKCOL",
    "COPY",
    "MOVE",
    "LOCK",
    "UNLOCK",
    "REPORT",
    "SEARCH",
    "PURGE",
    "QUERY",
];

/// The warning for `-m METHOD` when the method is none servers know: it is
/// sent as given (custom methods exist), but a typo is named.
pub(crate) fn method_warning(method: &str) -> Option<String> {
    let m = method.to_ascii_uppercase();
    if METHODS.contains(&m.as_str()) {
        return None;
    }
    let near = METHODS
        .iter()
        .map(|k| (k, osa(&m, k)))
        .filter(|(_, d)| *d <= 2)
        .min_by_key(|(_, d)| *d)
        .map(|(k, _)| format!(" (did you mean {k}?)"))
        .unwrap_or_default();
    Some(format!(
        "warning: {m} is not a standard HTTP method{near}; it is sent as given"
    ))
}

/// The warning for a threshold whose bound has no unit where one is read
/// in: latency in milliseconds, errors in percent.
pub(crate) fn threshold_warning(expr: &str) -> Option<String> {
    let pos = expr.find(['<', '>'])?;
    let (name, rest) = expr.split_at(pos);
    let value = rest.trim_start_matches(['<', '>', '=']).trim();
    if !is_number(value) {
        return None;
    }
    let name = name.trim().to_ascii_lowercase();
    let latency = matches!(name.as_str(), "mean" | "avg" | "max")
        || (name.starts_with('p') && name[1..].parse::<f64>().is_ok());
    let (unit, shown) = if latency {
        ("ms", format!("{value} ms"))
    } else if name == "errors" || name == "error_rate" {
        ("%", format!("{value} %"))
    } else {
        return None;
    };
    let op = &rest[..rest.len() - rest.trim_start_matches(['<', '>', '=']).len()];
    Some(format!(
        "warning: threshold '{}' has no unit: read as {shown} (write '{}{op}{value}{unit}')",
        expr.trim(),
        name
    ))
}

/// The warnings of a command line clap accepted: methods and thresholds
/// (`--threshold`, `find`'s `--slo`, comma-separated).
pub(crate) fn warnings(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(toks) = run_tokens(args) {
        for i in 0..toks.len() {
            if let Some(m) = value_of(toks, i, "-m", "--method") {
                out.extend(method_warning(m));
            }
        }
    }
    let rest = args.get(2..).unwrap_or(&[]);
    let end = rest.iter().position(|a| a == "--").unwrap_or(rest.len());
    let rest = &rest[..end];
    for i in 0..rest.len() {
        let v = value_of(rest, i, "", "--threshold").or_else(|| value_of(rest, i, "", "--slo"));
        if let Some(v) = v {
            for t in v.split(',') {
                if t.parse::<redline_report::thresholds::Threshold>().is_ok() {
                    out.extend(threshold_warning(t));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn cmd() -> clap::Command {
        super::super::Cli::command()
    }

    #[test]
    fn typos_are_told_apart_from_hosts() {
        let c = cmd();
        for (w, want) in [
            ("histroy", "history"),
            ("hisotry", "history"),
            ("comapre", "compare"),
            ("serv", "serve"),
            ("audti", "audit"),
            ("compleitons", "completions"),
        ] {
            let e = subcommand_typo(w, &c).unwrap_or_else(|| panic!("{w}"));
            assert!(e.contains(&format!("did you mean '{want}'")), "{w}: {e}");
        }
        for host in [
            "localhost",
            "example.com",
            "histroy.local",
            "127.0.0.1:8080",
            "http://histroy",
            "nginx",
            "web",
            "api",
            "app",
            "backend",
        ] {
            assert_eq!(subcommand_typo(host, &c), None, "{host}");
        }
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn habits_point_to_redlines_flags() {
        let e = |v: &[&str]| after_error(&s(v)).unwrap_or_else(|| panic!("{v:?}"));
        assert!(e(&["redline", "run", "-z", "10s", "http://h/"]).contains("-d DURATION"));
        assert!(e(&["redline", "run", "-z10s", "http://h/"]).contains("-d DURATION"));
        assert!(e(&["redline", "run", "-d", "{\"a\":1}", "http://h/"]).contains("-b BODY"));
        assert!(e(&["redline", "run", "--json", "http://h/"]).contains("-o json"));
        assert!(e(&["redline", "run", "--vus", "10", "http://h/"]).contains("-c N"));
        assert!(e(&["redline", "find", "--rps", "10", "http://h/"]).contains("-r REQ/S"));
        assert_eq!(
            after_error(&s(&["redline", "run", "-d", "1m30s", "-Z"])),
            None
        );
        assert_eq!(after_error(&s(&["redline", "page", "-z"])), None);
        let q = before_parse(&s(&["redline", "run", "-q", "100", "http://h/"])).unwrap();
        assert!(q.contains("-r REQ/S"), "{q}");
        assert_eq!(
            before_parse(&s(&["redline", "run", "-q", "http://h/"])),
            None
        );
    }

    /// Every habit is a flag `run` and `find` do not have (else it would be
    /// taken, not pointed elsewhere).
    #[test]
    fn habits_are_not_redline_flags() {
        let c = cmd();
        for sub in ["run", "find"] {
            let sc = c.find_subcommand(sub).unwrap();
            for a in sc.get_arguments() {
                for (flag, _, _) in HABITS {
                    if let Some(l) = flag.strip_prefix("--") {
                        assert_ne!(a.get_long(), Some(l), "{sub} {flag}");
                    } else if flag.len() == 2 {
                        assert_ne!(a.get_short(), flag.chars().nth(1), "{sub} {flag}");
                    }
                }
            }
        }
    }

    #[test]
    fn warnings_for_methods_and_unitless_thresholds() {
        assert!(method_warning("GTE").unwrap().contains("did you mean GET?"));
        assert!(method_warning("BREW").unwrap().contains("sent as given"));
        assert_eq!(method_warning("get"), None);
        assert_eq!(method_warning("PROPFIND"), None);
        let w = threshold_warning("p99<250").unwrap();
        assert!(
            w.contains("read as 250 ms") && w.contains("p99<250ms"),
            "{w}"
        );
        assert!(threshold_warning("errors<1").unwrap().contains("1 %"));
        assert_eq!(threshold_warning("p99<250ms"), None);
        assert_eq!(threshold_warning("rps>1000"), None);
        let all = warnings(&s(&[
            "redline",
            "find",
            "http://h/",
            "--slo",
            "p99<200,errors<1%",
            "-m",
            "GTE",
        ]));
        assert_eq!(all.len(), 2, "{all:?}");
    }
}
