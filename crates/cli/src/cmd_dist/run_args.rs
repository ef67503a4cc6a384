//! The run arguments `k8s` and the agent pass on: parsed with the real
//! `run` parser, rendered back, and which of them carry secrets.

/// One argument of a `redline run` command line as the real parser (clap,
/// the `run` subcommand's own definition) saw it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RunArg {
    /// Its id (the field name in `RunArgs`, e.g. `basic_auth`, `headers`, `url`).
    pub(super) id: String,
    pub(super) long: Option<String>,
    pub(super) short: Option<char>,
    pub(super) positional: bool,
    /// Its values, one per occurrence (empty for a flag).
    pub(super) values: Vec<String>,
}

/// Parses `redline run` arguments (without `run`) with the real parser.
/// Err: the parser's first line (never the whole help).
pub(super) fn parse_run(args: &[String]) -> Result<Vec<RunArg>, String> {
    let cmd = crate::cli::run_command();
    let m = cmd
        .clone()
        .try_get_matches_from(std::iter::once("run".to_string()).chain(args.iter().cloned()))
        .map_err(|e| {
            let t = e.render().to_string();
            let first = t.lines().next().unwrap_or("").trim_start_matches("error: ");
            format!("the run arguments: {first}")
        })?;
    let mut out = Vec::new();
    for a in cmd.get_arguments() {
        let id = a.get_id().as_str();
        if m.value_source(id) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        let values: Vec<String> = if a.get_action().takes_values() {
            m.get_raw(id)
                .map(|v| v.map(|x| x.to_string_lossy().into_owned()).collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        out.push(RunArg {
            id: id.to_string(),
            long: a.get_long().map(String::from),
            short: a.get_short(),
            positional: a.is_positional(),
            values,
        });
    }
    Ok(out)
}

/// Writes parsed arguments back as a command line: `--long=value` for each
/// value (a value may start with `-`), flags as `--long`, positionals last
/// (after `--` when one starts with `-`).
pub(super) fn render_run(items: &[RunArg]) -> Vec<String> {
    let mut opts = Vec::new();
    let mut pos = Vec::new();
    for a in items {
        if a.positional {
            pos.extend(a.values.iter().cloned());
            continue;
        }
        match (&a.long, a.short) {
            (Some(l), _) if a.values.is_empty() => opts.push(format!("--{l}")),
            (Some(l), _) => opts.extend(a.values.iter().map(|v| format!("--{l}={v}"))),
            (None, Some(c)) if a.values.is_empty() => opts.push(format!("-{c}")),
            (None, Some(c)) => {
                for v in &a.values {
                    opts.push(format!("-{c}"));
                    opts.push(v.clone());
                }
            }
            (None, None) => {}
        }
    }
    if pos.iter().any(|p| p.starts_with('-')) {
        opts.push("--".into());
    }
    opts.extend(pos);
    opts
}

/// A header whose value is a credential: Authorization, Cookie, or a name
/// that looks like a token (`X-Api-Key`, `X-Auth-Token`, `X-Session`, …), or
/// a value that starts like one (`Bearer …`, `Basic …`).
pub(super) fn secret_header(h: &str) -> bool {
    let (name, value) = h.split_once(':').unwrap_or((h, ""));
    let n = name.trim().to_ascii_lowercase();
    let v = value.trim().to_ascii_lowercase();
    [
        "auth",
        "cookie",
        "token",
        "key",
        "secret",
        "session",
        "passw",
        "credential",
        "signature",
        "jwt",
        "csrf",
        "xsrf",
        "bearer",
    ]
    .iter()
    .any(|w| n.contains(w))
        || ["bearer ", "basic ", "token ", "digest ", "negotiate "]
            .iter()
            .any(|p| v.starts_with(p))
}

/// A URL that carries a credential: `user:pass@` (or `user@`) in its
/// authority, or a query parameter named like one (`token`, `api_key`, `sig`, …).
pub(super) fn secret_url(u: &str) -> bool {
    let rest = u.split_once("://").map_or(u, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return true;
    }
    let query = rest.split_once('?').map_or("", |(_, q)| q);
    query.split('&').any(|kv| {
        let k = kv.split('=').next().unwrap_or("").to_ascii_lowercase();
        [
            "token", "key", "secret", "passw", "auth", "sig", "session", "jwt",
        ]
        .iter()
        .any(|w| k.contains(w))
    })
}
