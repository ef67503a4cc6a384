//! Access-log formats: the servers' own syntax (Apache `LogFormat` `%`
//! directives, nginx `log_format` `$variables`) compiled once into literals
//! and fields, and one log line matched against it. Only what a replay
//! needs is read (time, request line or method + URI, status, host); every
//! other directive is a field that is skipped.

use super::time;

/// What a field of the format holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// Apache `%t`: `[10/Oct/2000:13:55:36 -0700]`, brackets included.
    TimeBracketed,
    /// nginx `$time_local` (and Apache `%{%d/%b/%Y:%H:%M:%S %z}t`):
    /// `10/Oct/2000:13:55:36 -0700`.
    TimeClf,
    /// nginx `$time_iso8601`: `2000-10-10T13:55:36-07:00`.
    TimeIso,
    /// Seconds since the epoch, maybe with a fraction (`%{sec}t`, nginx `$msec`).
    TimeSec,
    /// Milliseconds since the epoch (`%{msec}t`).
    TimeMsec,
    /// Microseconds since the epoch (`%{usec}t`).
    TimeUsec,
    /// The request line (`%r`, `$request`).
    Request,
    /// The method (`%m`, `$request_method`).
    Method,
    /// Path and query (`$request_uri`).
    RequestUri,
    /// The path (`%U`, `$uri`).
    Path,
    /// The query string with its `?` (`%q`).
    QueryWithMark,
    /// The query string without `?` (`$args`, `$query_string`).
    Query,
    /// The final status (`%>s`, `%s`, `$status`).
    Status,
    /// The host the request was for (`%v`, `%V`, `%{Host}i`, `$host`, `$http_host`, `$server_name`).
    Host,
    /// Anything else: read over and ignored.
    Skip,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Lit(Vec<u8>),
    Field(Field),
}

/// A compiled log format.
#[derive(Debug, Clone)]
pub struct LogFormat {
    parts: Vec<Part>,
    /// What was given (`combined`, or the format string), for reports.
    pub name: String,
    /// Text after the last field is ignored (the default, so that `common`
    /// also reads `combined` and its extensions).
    trailing_ignored: bool,
    /// The directives that are read over (documented in docs/replay.md).
    pub skipped: Vec<String>,
}

/// Apache's `common` (CLF).
pub const COMMON: &str = "%h %l %u %t \"%r\" %>s %b";
/// Apache's and nginx's `combined`.
pub const COMBINED: &str = "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-Agent}i\"";
/// Debian's Apache `vhost_combined`.
pub const VHOST_COMBINED: &str =
    "%v:%p %h %l %u %t \"%r\" %>s %O \"%{Referer}i\" \"%{User-Agent}i\"";

/// The fields one line gave (borrowed from the line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields<'a> {
    /// Seconds since the Unix epoch (UTC).
    pub time: i64,
    /// The method.
    pub method: &'a str,
    /// The request target: a path with its query, or an absolute URL.
    pub target: &'a str,
    /// Only for formats with `%U%q`-style parts: the query after the path.
    pub query: &'a str,
    /// The final status.
    pub status: u16,
    /// The host, when the format logs one.
    pub host: Option<&'a str>,
}

impl LogFormat {
    /// The default: Common Log Format, anything after it ignored (so
    /// Apache's and nginx's `combined` read as well).
    pub fn default_format() -> LogFormat {
        let mut f = LogFormat::apache(COMMON).expect("the built-in format compiles");
        f.trailing_ignored = true;
        f.name = "common/combined".into();
        f
    }

    /// `--log-format`: a name (`common`, `combined`, `vhost_combined`), or a
    /// format in Apache's `LogFormat` or nginx's `log_format` syntax (told
    /// apart by their `%` or `$`; `apache:` or `nginx:` before it says which).
    pub fn parse(spec: &str) -> Result<LogFormat, String> {
        let s = spec.trim();
        let named = match s {
            "common" | "clf" => Some(COMMON),
            "combined" => Some(COMBINED),
            "vhost_combined" => Some(VHOST_COMBINED),
            _ => None,
        };
        let mut f = if let Some(n) = named {
            LogFormat::apache(n)?
        } else if let Some(rest) = s.strip_prefix("apache:") {
            LogFormat::apache(rest)?
        } else if let Some(rest) = s.strip_prefix("nginx:") {
            LogFormat::nginx(rest)?
        } else if looks_like_nginx(s) {
            LogFormat::nginx(s)?
        } else {
            LogFormat::apache(s)?
        };
        f.name = s.chars().take(200).collect();
        Ok(f)
    }

    /// Compiles an Apache `LogFormat` string.
    pub fn apache(spec: &str) -> Result<LogFormat, String> {
        LogFormat::compile(spec, b'%', apache_directive)
    }

    /// Compiles an nginx `log_format` string.
    pub fn nginx(spec: &str) -> Result<LogFormat, String> {
        LogFormat::compile(spec, b'$', nginx_directive)
    }

    /// The one scanner of both syntaxes: the bytes between directives are
    /// literals; at each `sigil`, `directive` reads what stands there (from
    /// the sigil's index) and says what it is and where the next byte is.
    fn compile(spec: &str, sigil: u8, directive: ReadDirective) -> Result<LogFormat, String> {
        let spec = unescape(spec);
        let b = spec.as_bytes();
        let mut parts = Vec::new();
        let mut skipped = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] != sigil {
                lit.push(b[i]);
                i += 1;
                continue;
            }
            let (step, next) = directive(b, i)?;
            i = next;
            let field = match step {
                Step::Literal(c) => {
                    lit.push(c);
                    continue;
                }
                Step::Field(f) => f,
                Step::Skipped(text) => {
                    skipped.push(text);
                    Field::Skip
                }
            };
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(&mut lit)));
            }
            parts.push(Part::Field(field));
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        LogFormat::check(parts, skipped, spec.to_string())
    }

    fn check(parts: Vec<Part>, skipped: Vec<String>, name: String) -> Result<LogFormat, String> {
        let has = |f: Field| parts.contains(&Part::Field(f));
        let times = [
            Field::TimeBracketed,
            Field::TimeClf,
            Field::TimeIso,
            Field::TimeSec,
            Field::TimeMsec,
            Field::TimeUsec,
        ];
        if !times.iter().any(|t| has(*t)) {
            return Err(
                "--log-format has no time (Apache %t, %{sec}t, %{msec}t, %{usec}t; nginx $time_local, $time_iso8601, $msec)"
                    .into(),
            );
        }
        if !has(Field::Request)
            && !(has(Field::Method) && (has(Field::RequestUri) || has(Field::Path)))
        {
            return Err(
                "--log-format has no request (Apache %r, or %m with %U; nginx $request, or $request_method with $request_uri)"
                    .into(),
            );
        }
        if !has(Field::Status) {
            return Err("--log-format has no status (Apache %>s or %s; nginx $status)".into());
        }
        // Two fields in a row cannot be told apart.
        for w in parts.windows(2) {
            if let [Part::Field(_), Part::Field(_)] = w {
                return Err(
                    "--log-format has two directives with nothing between them: a line could not be split"
                        .into(),
                );
            }
        }
        Ok(LogFormat {
            parts,
            name,
            trailing_ignored: false,
            skipped,
        })
    }

    /// Matches one line (without its line break). Err: why it does not match.
    pub fn parse_line<'a>(&self, line: &'a [u8]) -> Result<Fields<'a>, String> {
        let line = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_string())?;
        let line = line.strip_suffix('\r').unwrap_or(line);
        let b = line.as_bytes();
        let mut p = 0;
        let mut time = None;
        let (mut method, mut target, mut query, mut status, mut host) =
            (None, None, "", None, None);
        let mut request_line = None;
        for (k, part) in self.parts.iter().enumerate() {
            match part {
                Part::Lit(l) => {
                    if !b[p..].starts_with(l) {
                        return Err(format!(
                            "expected '{}' at column {}",
                            String::from_utf8_lossy(l),
                            p + 1
                        ));
                    }
                    p += l.len();
                }
                Part::Field(f) => {
                    let value = match f {
                        Field::TimeBracketed => {
                            if b.get(p) != Some(&b'[') {
                                return Err(format!(
                                    "expected '[' of the time at column {}",
                                    p + 1
                                ));
                            }
                            let end = b[p..]
                                .iter()
                                .position(|&c| c == b']')
                                .ok_or("the time has no closing ']'")?;
                            let v = &line[p + 1..p + end];
                            p += end + 1;
                            v
                        }
                        Field::TimeClf => {
                            // `dd/Mon/yyyy:HH:MM:SS +zzzz`: 26 bytes, a space inside.
                            let v = line.get(p..p + 26).ok_or("the time is cut short")?;
                            p += 26;
                            v
                        }
                        _ => {
                            let end = match self.parts.get(k + 1) {
                                Some(Part::Lit(l)) => {
                                    find_unescaped(&b[p..], l).ok_or_else(|| {
                                        format!(
                                            "expected '{}' after column {}",
                                            String::from_utf8_lossy(l),
                                            p + 1
                                        )
                                    })?
                                }
                                _ if self.trailing_ignored => b[p..]
                                    .iter()
                                    .position(|&c| c == b' ')
                                    .unwrap_or(b.len() - p),
                                _ => b.len() - p,
                            };
                            let v = &line[p..p + end];
                            p += end;
                            v
                        }
                    };
                    match f {
                        Field::TimeBracketed | Field::TimeClf => time = Some(time::clf(value)?),
                        Field::TimeIso => time = Some(time::iso8601(value)?),
                        Field::TimeSec => time = Some(time::epoch(value, 1)?),
                        Field::TimeMsec => time = Some(time::epoch(value, 1_000)?),
                        Field::TimeUsec => time = Some(time::epoch(value, 1_000_000)?),
                        Field::Request => request_line = Some(value),
                        Field::Method => method = Some(value),
                        Field::RequestUri | Field::Path => target = Some(value),
                        Field::QueryWithMark => query = value,
                        Field::Query => query = value,
                        Field::Status => status = Some(parse_status(value)?),
                        Field::Host => host = (!value.is_empty() && value != "-").then_some(value),
                        Field::Skip => {}
                    }
                }
            }
        }
        if p < b.len() && !self.trailing_ignored {
            return Err(format!("unexpected text at column {}", p + 1));
        }
        if let Some(r) = request_line {
            let mut it = r.split(' ');
            let (m, t) = match (it.next(), it.next(), it.next(), it.next()) {
                (Some(m), Some(t), _, None) if !m.is_empty() && !t.is_empty() => (m, t),
                _ => return Err("the request line is not 'METHOD TARGET PROTOCOL'".into()),
            };
            method = Some(m);
            target = Some(t);
        }
        let method = method.ok_or("no method")?;
        if method.is_empty() || !method.bytes().all(|c| c.is_ascii_alphabetic() || c == b'-') {
            return Err("the method is not a method name".into());
        }
        let target = target.ok_or("no request target")?;
        if !(target.starts_with('/')
            || target.starts_with("http://")
            || target.starts_with("https://")
            || target == "*")
        {
            return Err("the request target is not a path or an http(s) URL".into());
        }
        let query = query.strip_prefix('?').unwrap_or(query);
        let query = if query == "-" { "" } else { query };
        for s in [target, query] {
            if !s.bytes().all(|c| c.is_ascii_graphic()) {
                return Err(
                    "the request target has spaces, control characters or non-ASCII bytes".into(),
                );
            }
        }
        Ok(Fields {
            time: time.ok_or("no time")?,
            method,
            target,
            query,
            status: status.ok_or("no status")?,
            host,
        })
    }
}

fn parse_status(v: &str) -> Result<u16, String> {
    match v.parse::<u16>() {
        Ok(s) if (100..=999).contains(&s) && v.len() == 3 => Ok(s),
        _ => Err("the status is not a 3-digit code".into()),
    }
}

/// nginx syntax: `$name` and no Apache `%` directive.
fn looks_like_nginx(s: &str) -> bool {
    let b = s.as_bytes();
    let dollar = b
        .windows(2)
        .any(|w| w[0] == b'$' && (w[1].is_ascii_alphabetic() || w[1] == b'{' || w[1] == b'_'));
    let percent = b.windows(2).any(|w| {
        w[0] == b'%' && (w[1].is_ascii_alphabetic() || matches!(w[1], b'>' | b'<' | b'{' | b'!'))
    });
    dollar && !percent
}

/// Reads the directive at a sigil's index: what it is and the index after it.
type ReadDirective = fn(&[u8], usize) -> Result<(Step, usize), String>;

/// What one directive of a log format is: a literal byte (`%%`, a lone
/// `$`), a field redline reads, or one it passes over (its text, to report).
enum Step {
    Literal(u8),
    Field(Field),
    Skipped(String),
}

/// The Apache directive at `b[start]` (a `%`) and the index after it.
fn apache_directive(b: &[u8], start: usize) -> Result<(Step, usize), String> {
    let mut i = start + 1;
    if b.get(i) == Some(&b'%') {
        return Ok((Step::Literal(b'%'), i + 1));
    }
    // Status conditions (`%400,501{…}i`, `%!200r`) and `<`/`>`.
    while i < b.len() && (b[i] == b'!' || b[i] == b',' || b[i].is_ascii_digit()) {
        i += 1;
    }
    // `%>s` (final) and `%<s` (original) are both read as the status.
    while i < b.len() && (b[i] == b'<' || b[i] == b'>') {
        i += 1;
    }
    let mut arg = None;
    if b.get(i) == Some(&b'{') {
        let end = b[i..]
            .iter()
            .position(|&c| c == b'}')
            .ok_or_else(|| format!("'{{' without '}}' in --log-format at column {}", i + 1))?;
        arg = Some(String::from_utf8_lossy(&b[i + 1..i + end]).into_owned());
        i += end + 1;
    }
    let Some(&d) = b.get(i) else {
        return Err("--log-format ends in the middle of a % directive".into());
    };
    i += 1;
    let field = match (d, arg.as_deref()) {
        (b't', None) => Field::TimeBracketed,
        (b't', Some("sec")) => Field::TimeSec,
        (b't', Some("msec")) => Field::TimeMsec,
        (b't', Some("usec")) => Field::TimeUsec,
        (b't', Some(f))
            if f.trim_start_matches("begin:").trim_start_matches("end:")
                == "%d/%b/%Y:%H:%M:%S %z" =>
        {
            Field::TimeClf
        }
        (b'r', None) => Field::Request,
        (b'm', None) => Field::Method,
        (b'U', None) => Field::Path,
        (b'q', None) => Field::QueryWithMark,
        (b's', None) => Field::Status,
        (b'v' | b'V', None) => Field::Host,
        (b'i', Some(h)) if h.eq_ignore_ascii_case("host") => Field::Host,
        (d, _) if d.is_ascii_alphabetic() => {
            let text = String::from_utf8_lossy(&b[start..i]).into_owned();
            return Ok((Step::Skipped(text), i));
        }
        (d, _) => {
            return Err(format!(
                "unknown directive '%{}' in --log-format at column {}",
                (d as char).escape_debug(),
                i
            ))
        }
    };
    Ok((Step::Field(field), i))
}

/// The nginx variable at `b[start]` (a `$`, alone or before `name` or
/// `{name}`) and the index after it.
fn nginx_directive(b: &[u8], start: usize) -> Result<(Step, usize), String> {
    let i = start;
    let (name, next) = if b.get(i + 1) == Some(&b'{') {
        let end = b[i..]
            .iter()
            .position(|&c| c == b'}')
            .ok_or_else(|| format!("'${{' without '}}' in --log-format at column {}", i + 1))?;
        (
            String::from_utf8_lossy(&b[i + 2..i + end]).into_owned(),
            i + end + 1,
        )
    } else {
        let n = b[i + 1..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
            .count();
        if n == 0 {
            return Ok((Step::Literal(b'$'), i + 1));
        }
        (
            String::from_utf8_lossy(&b[i + 1..i + 1 + n]).into_owned(),
            i + 1 + n,
        )
    };
    let field = match name.as_str() {
        "time_local" => Field::TimeClf,
        "time_iso8601" => Field::TimeIso,
        "msec" => Field::TimeSec,
        "request" => Field::Request,
        "request_method" => Field::Method,
        "request_uri" => Field::RequestUri,
        "uri" | "document_uri" => Field::Path,
        "args" | "query_string" => Field::Query,
        "status" => Field::Status,
        "host" | "http_host" | "server_name" => Field::Host,
        _ => return Ok((Step::Skipped(format!("${name}")), next)),
    };
    Ok((Step::Field(field), next))
}

/// A format as written in a config file: `\"` is `"`, `\\` is `\`, `\t` a tab.
fn unescape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('"') => o.push('"'),
                Some('\\') => o.push('\\'),
                Some('t') => o.push('\t'),
                Some(x) => {
                    o.push('\\');
                    o.push(x);
                }
                None => o.push('\\'),
            }
        } else {
            o.push(c);
        }
    }
    o
}

/// The first `needle` in `hay` not inside a backslash escape (servers log a
/// `"` inside a field as `\"` or `\x22`).
fn find_unescaped(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        if hay[i] == b'\\' {
            i += 2;
            continue;
        }
        if hay[i..].starts_with(needle) {
            return Some(i);
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLF: &[u8] =
        b"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif HTTP/1.0\" 200 2326";

    #[test]
    fn common_and_combined_lines() {
        let f = LogFormat::default_format();
        let x = f.parse_line(CLF).unwrap();
        assert_eq!(x.method, "GET");
        assert_eq!(x.target, "/apache_pb.gif");
        assert_eq!(x.status, 200);
        assert_eq!(x.time, 971_211_336);
        let combined = b"1.2.3.4 - - [10/Oct/2000:13:55:36 +0000] \"HEAD /a?b=1 HTTP/1.1\" 404 0 \"http://x/\" \"Mozilla \\\"5\\\"\"";
        let x = f.parse_line(combined).unwrap();
        assert_eq!((x.method, x.target, x.status), ("HEAD", "/a?b=1", 404));
        let c = LogFormat::parse("combined").unwrap();
        assert_eq!(c.parse_line(combined).unwrap().target, "/a?b=1");
        assert!(c.parse_line(CLF).is_err());
    }

    #[test]
    fn nginx_custom_format() {
        let f = LogFormat::parse(
            r#"$host $remote_addr [$time_local] "$request_method $request_uri" $status $request_time"#,
        )
        .unwrap();
        assert_eq!(f.skipped, vec!["$remote_addr", "$request_time"]);
        let x = f
            .parse_line(b"example.com 10.0.0.1 [26/Nov/2026:03:04:05 +0100] \"GET /x?y\" 301 0.001")
            .unwrap();
        assert_eq!(x.host, Some("example.com"));
        assert_eq!((x.method, x.target, x.status), ("GET", "/x?y", 301));
        assert_eq!(x.time, 1_795_662_245 - 3600);
    }

    #[test]
    fn apache_custom_format() {
        let f = LogFormat::parse(r#"%{sec}t %v \"%m %U%q\" %>s %D"#);
        // %U%q: two directives in a row cannot be split.
        assert!(f.is_err());
        let f = LogFormat::parse(r#"%{sec}t %{Host}i \"%m %U\" %q %>s %D"#).unwrap();
        let x = f
            .parse_line(b"1795658645 www.example.org \"POST /login\" ?next=1 200 1234")
            .unwrap();
        assert_eq!((x.method, x.target, x.query), ("POST", "/login", "next=1"));
        assert_eq!(x.time, 1_795_658_645);
    }

    #[test]
    fn bad_lines_say_why() {
        let f = LogFormat::default_format();
        for (line, why) in [
            (&b""[..], "expected"),
            (
                b"x - - [10/Oct/2000:13:55:36 -0700] \"-\" 400 0",
                "request line",
            ),
            (
                b"x - - [10/Oct/2000:13:55:36 -0700] \"GET /a HTTP/1.1\" 2000 0",
                "status",
            ),
            (
                b"x - - [32/Foo/2000:13:55:36 -0700] \"GET /a HTTP/1.1\" 200 0",
                "time",
            ),
            (
                b"x - - [10/Oct/2000:13:55:36 -0700] \"GET a HTTP/1.1\" 200 0",
                "target",
            ),
            (
                b"x - - [10/Oct/2000:13:55:36 -0700] \"GET /\x1b[2J HTTP/1.1\" 200 0",
                "control",
            ),
        ] {
            let e = f.parse_line(line).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        for bad in ["%h %r %>s", "%t %>s", "%t %r", "%t %r %>s %{x"] {
            assert!(LogFormat::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn both_syntaxes_keep_literals_name_skipped_fields_and_bad_directives() {
        // Apache: `%%` is a literal `%`; a conditional directive is skipped as written.
        let f = LogFormat::parse(r#"%t \"%r\" %>s 100%% %400,501{Referer}i"#).unwrap();
        assert_eq!(f.skipped, vec!["%400,501{Referer}i"]);
        let x = f
            .parse_line(b"[10/Oct/2000:13:55:36 -0700] \"GET /a HTTP/1.0\" 200 100% -")
            .unwrap();
        assert_eq!((x.method, x.target, x.status), ("GET", "/a", 200));
        // nginx: a lone `$` is a literal; `${name}` is a variable.
        let f =
            LogFormat::parse(r#"$time_local "$request" ${status} $ ${body_bytes_sent}"#).unwrap();
        assert_eq!(f.skipped, vec!["$body_bytes_sent"]);
        let x = f
            .parse_line(b"10/Oct/2000:13:55:36 -0700 \"GET /b HTTP/1.1\" 404 $ 12")
            .unwrap();
        assert_eq!((x.method, x.target, x.status), ("GET", "/b", 404));
        for (bad, why) in [
            ("%t %r %>s %{x", "'{' without '}'"),
            ("%t %r %>s %", "ends in the middle of a % directive"),
            ("%t %r %>s %?", "unknown directive '%?'"),
            ("nginx:$time_local $request $status ${x", "'${' without '}'"),
        ] {
            let e = LogFormat::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
