//! Compiling a scenario file: hosts resolved, paths checked, templates split,
//! static requests serialized once, CSV rows read; every error names the file
//! and line.

use super::*;

/// Reads a scenario file.
pub fn load(path: &Path) -> Result<(ScenarioFile, String), PlanError> {
    let text =
        redline_stats::files::read_text(path, redline_stats::files::Kind::Scenario, "scenario")
            .map_err(PlanError::Invalid)?;
    let f = file::parse(&text, &path.display().to_string()).map_err(PlanError::Invalid)?;
    Ok((f, text))
}

/// A scenario host's URL, resolved by the plan's own target resolution
/// ([`crate::plan::target::resolve`]: the same parsing, checks, wording,
/// `Host` value, credentials and TLS as the run's URL); and its path.
fn target(url: &str, tls: &TlsArgs) -> Result<(ScTarget, String), String> {
    let r = crate::plan::target::resolve(url, tls).map_err(|e| e.to_string())?;
    Ok((
        ScTarget {
            display: r.target.display,
            host_header: r.host_header,
            addr: r.target.addr,
            tls: r.tls,
            auth: r.basic_auth,
            origin: r.target.origin,
            host: r.url.host_str().unwrap_or("").to_ascii_lowercase(),
        },
        r.target.path,
    ))
}

/// Resolves a path in a scenario relative to its folder, refusing one that
/// leaves the folder unless allowed.
fn resolve_path(dir: &Path, p: &str, allow: bool) -> Result<PathBuf, String> {
    let joined = dir.join(p);
    let real = joined
        .canonicalize()
        .map_err(|e| format!("cannot read '{}': {e}", joined.display()))?;
    if !allow {
        let root = dir
            .canonicalize()
            .map_err(|e| format!("cannot read '{}': {e}", dir.display()))?;
        if !real.starts_with(&root) {
            return Err(format!(
                "'{p}' is outside the scenario's folder {}; pass --allow-paths to read it",
                root.display()
            ));
        }
    }
    Ok(real)
}

fn form_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Parses CSV text (RFC 4180 quoting) into rows of fields.
pub fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    let mut line = 1;
    let mut any = false;
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                '\n' => {
                    line += 1;
                    field.push(c)
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() => {
                quoted = true;
                any = true;
            }
            ',' => {
                row.push(std::mem::take(&mut field));
                any = true;
            }
            '\r' => {}
            '\n' => {
                if any || !field.is_empty() {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                any = false;
                line += 1;
            }
            _ => {
                field.push(c);
                any = true;
            }
        }
    }
    if quoted {
        return Err(format!("line {line}: a quoted field is not closed"));
    }
    if any || !field.is_empty() {
        row.push(field);
        rows.push(row);
    }
    Ok(rows)
}

impl Scenario {
    /// Compiles a parsed scenario file.
    pub fn compile(a: CompileArgs<'_>) -> Result<Scenario, PlanError> {
        let f = a.file;
        let fname = a.path.display().to_string();
        let dir = a
            .path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .unwrap_or(Path::new("."));
        let lines = file::Lines::new(a.text);
        let top = |msg: String| PlanError::Invalid(format!("{fname}: {msg}"));
        // An error at a key of the file: `file:line: message`.
        let top_at = |path: &[Seg], msg: String| {
            PlanError::Invalid(format!("{}: {msg}", lines.at(&fname, path)))
        };
        // An error in request `n` at `path` within it.
        let at = |n: usize, path: Vec<Seg>, msg: String| {
            let mut full = vec![key("request"), Seg::Idx(n)];
            full.extend(path);
            let place = match lines.line(&full).or_else(|| file::request_line(a.text, n)) {
                Some(l) => format!("{fname}:{l}"),
                None => fname.clone(),
            };
            let who = match &f.request[n].name {
                Some(name) => format!("request '{name}'"),
                None => format!("request #{}", n + 1),
            };
            let msg = msg.split_whitespace().collect::<Vec<_>>().join(" ");
            PlanError::Invalid(format!("{place}: {who}: {msg}"))
        };
        if f.request.is_empty() {
            return Err(top("no [[request]] (or [[step]]) in the scenario".into()));
        }
        if f.request.len() > 10_000 {
            return Err(top("more than 10,000 requests".into()));
        }
        let mode = match f.mode.as_deref().unwrap_or("round-robin") {
            "round-robin" | "roundrobin" | "rr" => Mode::RoundRobin,
            "weighted" | "random" => Mode::Weighted,
            "session" | "sequence" => Mode::Session,
            m => {
                return Err(top_at(
                    &[key("mode")],
                    format!("unknown mode '{m}' (expected round-robin, weighted or session)"),
                ))
            }
        };
        // Variables: built-ins, then data columns, then extracted names.
        let mut vars: Vec<String> = vec!["vu".into(), "iteration".into()];
        let mut data = None;
        if let Some(d) = &f.data {
            let data_at = |k: &str, msg: String| top_at(&[key("data"), key(k)], msg);
            let p = resolve_path(dir, &d.file, a.allow_paths)
                .map_err(|e| data_at("file", format!("[data] {e}")))?;
            let text = redline_stats::files::read_text(&p, redline_stats::files::Kind::Csv, "")
                .map_err(|e| data_at("file", format!("[data] {e}")))?;
            let mut rows =
                parse_csv(&text).map_err(|e| data_at("file", format!("[data] {}: {e}", d.file)))?;
            if rows.len() < 2 {
                return Err(data_at(
                    "file",
                    format!(
                        "[data] {}: needs a header line and at least one row",
                        d.file
                    ),
                ));
            }
            let header = rows.remove(0);
            for (i, r) in rows.iter().enumerate() {
                if r.len() != header.len() {
                    return Err(data_at(
                        "file",
                        format!(
                            "[data] {}: row {} has {} fields, the header {}",
                            d.file,
                            i + 2,
                            r.len(),
                            header.len()
                        ),
                    ));
                }
            }
            let mut columns = Vec::new();
            for h in header {
                let h = h.trim().to_string();
                if !vars.contains(&h) {
                    vars.push(h.clone());
                }
                columns.push(vars.iter().position(|v| *v == h).unwrap_or(0));
            }
            let per_iteration = match d.per.as_deref().unwrap_or("user") {
                "user" | "vu" => false,
                "iteration" => true,
                p => {
                    return Err(data_at(
                        "per",
                        format!("[data] unknown per = '{p}' (expected user or iteration)"),
                    ))
                }
            };
            data = Some(Data {
                columns,
                rows,
                per_iteration,
            });
        }
        for r in &f.request {
            for e in &r.extract {
                if !vars.contains(&e.name) {
                    vars.push(e.name.clone());
                }
            }
        }
        // Hosts.
        let (base_target, _) = target(a.base, a.tls).map_err(|e| {
            if f.base.as_deref().map(str::trim) == Some(a.base.trim()) {
                top_at(&[key("base")], format!("base: {e}"))
            } else {
                top(e)
            }
        })?;
        let mut targets = vec![base_target];
        let mut host_index = std::collections::BTreeMap::new();
        for (name, url) in &f.hosts {
            let (t, _) = target(url, a.tls)
                .map_err(|e| top_at(&[key("hosts"), key(name)], format!("[hosts] {name}: {e}")))?;
            host_index.insert(name.clone(), targets.len());
            targets.push(t);
        }
        let default_timeout = match &f.timeout {
            Some(t) => {
                parse_duration(t).map_err(|e| top_at(&[key("timeout")], format!("timeout: {e}")))?
            }
            None => a.timeout,
        };
        let default_think = match &f.think {
            Some(t) => {
                Some(Think::parse(t).map_err(|e| top_at(&[key("think")], format!("think: {e}")))?)
            }
            None => None,
        };
        let cookies = f.cookies.unwrap_or(mode == Mode::Session);
        let mut global_headers = Vec::new();
        for (k, v) in &f.headers {
            if !header_ok(k, v) {
                return Err(top_at(
                    &[key("headers"), key(k)],
                    format!("invalid header '{k}'"),
                ));
            }
            global_headers.push((k.clone(), v.clone()));
        }
        global_headers.extend(a.cli_headers.iter().cloned());

        let mut requests = Vec::new();
        let mut names = std::collections::HashSet::new();
        for (n, r) in f.request.iter().enumerate() {
            let req = compile_request(
                r,
                &RequestCtx {
                    vars: &vars,
                    host_index: &host_index,
                    dir,
                    allow_paths: a.allow_paths,
                    tls: a.tls,
                    default_timeout,
                    default_think,
                    global_headers: &global_headers,
                },
                &mut targets,
            )
            .map_err(|(path, e)| match path {
                // A template in the top-level headers.
                Where::Top(path) => top_at(&path, format!("headers: {e}")),
                Where::Request(path) => at(n, path, e),
            })?;
            if !names.insert(req.name.clone()) {
                return Err(at(
                    n,
                    vec![key("name")],
                    format!("a request named '{}' exists already", req.name),
                ));
            }
            requests.push(req);
        }
        let mut cum = Vec::new();
        let mut total = 0u64;
        for r in &requests {
            total += r.weight as u64;
            cum.push(total);
        }
        if mode == Mode::Weighted && total == 0 {
            return Err(top_at(&[key("mode")], "all weights are 0".into()));
        }
        let threshold_lines = (0..f.thresholds.len())
            .map(|i| lines.line(&[key("thresholds"), Seg::Idx(i)]))
            .collect();
        for (n, r) in requests.iter_mut().enumerate() {
            r.threshold_lines = (0..r.thresholds.len())
                .map(|i| lines.line(&[key("request"), Seg::Idx(n), key("thresholds"), Seg::Idx(i)]))
                .collect();
        }
        let mut s = Scenario {
            name: f.name.clone().unwrap_or_else(|| {
                a.path
                    .file_stem()
                    .map_or("scenario".into(), |s| s.to_string_lossy().into_owned())
            }),
            file: fname,
            mode,
            targets,
            requests,
            vars,
            data,
            cookies,
            thresholds: f.thresholds.clone(),
            threshold_lines,
            cum_weights: cum,
            http10: a.http10,
            user_agent: format!("redline/{}", env!("CARGO_PKG_VERSION")),
            segment: None,
            replay: None,
            seed: 0,
        };
        for i in 0..s.requests.len() {
            let r = &s.requests[i];
            if r.path.is_static()
                && r.headers.iter().all(|(_, v)| v.is_static())
                && r.body.as_ref().is_none_or(|b| b.is_static())
                && !s.cookies
            {
                s.requests[i].fixed = Some(s.prebuilt(i));
            }
        }
        Ok(s)
    }
}

struct RequestCtx<'a> {
    vars: &'a [String],
    host_index: &'a std::collections::BTreeMap<String, usize>,
    dir: &'a Path,
    allow_paths: bool,
    tls: &'a TlsArgs,
    default_timeout: Duration,
    default_think: Option<Think>,
    global_headers: &'a [(String, String)],
}

/// Where in the file an error of a request is: a path within the request,
/// or (for the top-level `headers` every request gets) within the file.
enum Where {
    Top(Vec<Seg>),
    Request(Vec<Seg>),
}

/// An error at `path` within the request.
fn rq(path: Vec<Seg>) -> impl FnOnce(String) -> (Where, String) {
    move |m| (Where::Request(path), m)
}

/// An error at the request's key `k`.
fn rk(k: &str) -> impl FnOnce(String) -> (Where, String) {
    rq(vec![key(k)])
}

fn compile_request(
    r: &RequestEntry,
    cx: &RequestCtx<'_>,
    targets: &mut Vec<ScTarget>,
) -> Result<ScRequest, (Where, String)> {
    let vars = cx.vars;
    if r.url.is_some() && (r.host.is_some() || r.path.is_some()) {
        return Err(rk("url")("give either url, or host and path".into()));
    }
    let (target_idx, path_text, url_display) = if let Some(u) = &r.url {
        if u.contains("{{") {
            return Err(rk("url")(
                "variables are allowed in path, headers and body, not in url".into(),
            ));
        }
        let (t, path) = target(u, cx.tls).map_err(rk("url"))?;
        let display = t.display.clone();
        // Reuse a host already known by address, name and scheme.
        let idx = match targets.iter().position(|x| {
            x.addr == t.addr && x.host_header == t.host_header && x.tls.is_some() == t.tls.is_some()
        }) {
            Some(i) => i,
            None => {
                targets.push(t);
                targets.len() - 1
            }
        };
        (idx, path, display)
    } else {
        let idx = match &r.host {
            Some(h) => *cx
                .host_index
                .get(h)
                .ok_or_else(|| rk("host")(format!("unknown host '{h}' (not in [hosts])")))?,
            None => 0,
        };
        let path = r.path.clone().unwrap_or_else(|| "/".into());
        if !path.starts_with('/') {
            return Err(rk("path")(format!("path '{path}' must start with '/'")));
        }
        if path.contains(' ') || path.contains('\r') || path.contains('\n') {
            return Err(rk("path")(format!(
                "path '{path}' has spaces or line breaks (percent-encode them)"
            )));
        }
        let d = format!("{}{}", targets[idx].display.trim_end_matches('/'), path);
        (idx, path, d)
    };
    let path = Template::parse(&path_text, vars).map_err(rk(if r.url.is_some() {
        "url"
    } else {
        "path"
    }))?;
    // Body: inline, file or form (one of them).
    let given = [r.body.is_some(), r.body_file.is_some(), r.form.is_some()]
        .iter()
        .filter(|x| **x)
        .count();
    if given > 1 {
        let second = if r.form.is_some() {
            "form"
        } else {
            "body_file"
        };
        return Err(rk(second)("give one of body, body_file and form".into()));
    }
    let mut content_type = r.content_type.clone();
    let body = if let Some(b) = &r.body {
        Some(Template::parse(b, vars).map_err(rk("body"))?)
    } else if let Some(bf) = &r.body_file {
        let p = resolve_path(cx.dir, bf, cx.allow_paths).map_err(rk("body_file"))?;
        let bytes = redline_stats::files::read(&p, redline_stats::files::Kind::Body, "body_file")
            .map_err(rk("body_file"))?;
        match String::from_utf8(bytes) {
            Ok(text) => Some(Template::parse(&text, vars).map_err(rk("body_file"))?),
            Err(e) => {
                // Binary bodies are sent as they are; no variables in them.
                let bytes = e.into_bytes();
                Some(Template {
                    parts: vec![Part::Lit(bytes)],
                })
            }
        }
    } else if let Some(form) = &r.form {
        if content_type.is_none() {
            content_type = Some("application/x-www-form-urlencoded".into());
        }
        let mut text = String::new();
        for (i, (k, v)) in form.iter().enumerate() {
            if i > 0 {
                text.push('&');
            }
            text.push_str(&form_encode(k));
            text.push('=');
            // Variables stay as written; literal parts are encoded.
            let t = Template::parse(v, vars).map_err(rq(vec![key("form"), key(k)]))?;
            for p in &t.parts {
                match p {
                    Part::Lit(s) => text.push_str(&form_encode(&String::from_utf8_lossy(s))),
                    Part::Var(id) => {
                        text.push_str("{{");
                        text.push_str(&vars[*id]);
                        text.push_str("}}");
                    }
                    Part::Gen(_, name) => {
                        text.push_str("{{");
                        text.push_str(name);
                        text.push_str("}}");
                    }
                }
            }
        }
        Some(Template::parse(&text, vars).map_err(rk("form"))?)
    } else {
        None
    };
    if body.is_some() && content_type.is_none() {
        content_type = Some("application/octet-stream".into());
    }
    let method = r
        .method
        .clone()
        .unwrap_or_else(|| if body.is_some() { "POST" } else { "GET" }.into())
        .to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
        return Err(rk("method")(format!("invalid method '{method}'")));
    }
    let mut headers = Vec::new();
    for (own, (k, v)) in cx
        .global_headers
        .iter()
        .map(|(k, v)| (false, (k, v)))
        .chain(r.headers.iter().map(|kv| (true, kv)))
    {
        let place = |m: String| {
            let path = vec![key("headers"), key(k)];
            if own {
                (Where::Request(path), m)
            } else {
                (Where::Top(path), m)
            }
        };
        if !header_ok(k, v) {
            return Err(place(format!("invalid header '{k}'")));
        }
        if k.eq_ignore_ascii_case("connection") || k.eq_ignore_ascii_case("content-length") {
            continue;
        }
        headers.retain(|(x, _): &(String, Template)| !x.eq_ignore_ascii_case(k));
        headers.push((k.clone(), Template::parse(v.trim(), vars).map_err(place)?));
    }
    let timeout = match &r.timeout {
        Some(t) => parse_duration(t).map_err(|e| rk("timeout")(format!("timeout: {e}")))?,
        None => cx.default_timeout,
    };
    if timeout.is_zero() {
        return Err(rk("timeout")("timeout must be greater than zero".into()));
    }
    let think = match &r.think {
        Some(t) => Some(Think::parse(t).map_err(|e| rk("think")(format!("think: {e}")))?),
        None => cx.default_think,
    };
    let mut extract = Vec::new();
    let mut want_headers = false;
    let mut want_body = false;
    for (i, e) in r.extract.iter().enumerate() {
        let ex = |k: &str| rq(vec![key("extract"), Seg::Idx(i), key(k)]);
        let var = vars.iter().position(|v| *v == e.name).unwrap_or(0);
        if var < 2 {
            return Err(ex("name")(format!(
                "cannot extract into the built-in '{}'",
                e.name
            )));
        }
        let n = [
            e.header.is_some(),
            e.cookie.is_some(),
            e.regex.is_some(),
            e.json.is_some(),
        ]
        .iter()
        .filter(|x| **x)
        .count();
        if n != 1 {
            return Err(rq(vec![key("extract"), Seg::Idx(i)])(format!(
                "extract '{}': give exactly one of header, cookie, regex and json",
                e.name
            )));
        }
        let from = if let Some(h) = &e.header {
            want_headers = true;
            From::Header(h.clone())
        } else if let Some(c) = &e.cookie {
            want_headers = true;
            From::Cookie(c.clone())
        } else if let Some(re) = &e.regex {
            want_body = true;
            From::Regex(
                regex::Regex::new(re)
                    .map_err(|x| ex("regex")(format!("extract '{}': bad regex: {x}", e.name)))?,
            )
        } else {
            want_body = true;
            let p = e.json.clone().unwrap_or_default();
            if !p.is_empty() && !p.starts_with('/') {
                return Err(ex("json")(format!(
                    "extract '{}': a JSON pointer starts with '/' (e.g. /data/token)",
                    e.name
                )));
            }
            From::Json(p)
        };
        extract.push(Extractor { var, from });
    }
    let mut checks = Vec::new();
    if let Some(c) = &r.check {
        if let Some(s) = &c.status {
            let codes = s.codes();
            if codes.is_empty() || codes.iter().any(|c| !(100..=999).contains(c)) {
                return Err(rq(vec![key("check"), key("status")])(
                    "check.status: codes must be within 100–999".into(),
                ));
            }
            let label = codes
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join("|");
            checks.push((format!("status {label}"), CheckKind::Status(codes)));
        }
        for h in &c.header {
            want_headers = true;
            checks.push((format!("header {h}"), CheckKind::HeaderPresent(h.clone())));
        }
        for (h, v) in &c.header_equals {
            want_headers = true;
            checks.push((
                format!("header {h}: {v}"),
                CheckKind::HeaderEquals(h.clone(), v.clone()),
            ));
        }
        if let Some(b) = &c.body_contains {
            want_body = true;
            checks.push((
                format!("body contains {b:?}"),
                CheckKind::BodyContains(b.clone()),
            ));
        }
        if let Some(re) = &c.body_regex {
            want_body = true;
            let rx = regex::Regex::new(re).map_err(|x| {
                rq(vec![key("check"), key("body_regex")])(format!("check.body_regex: {x}"))
            })?;
            checks.push((format!("body matches /{re}/"), CheckKind::BodyRegex(rx)));
        }
        if let Some(l) = &c.latency_under {
            let d = parse_duration(l).map_err(|e| {
                rq(vec![key("check"), key("latency_under")])(format!("check.latency_under: {e}"))
            })?;
            checks.push((format!("latency < {l}"), CheckKind::LatencyUnder(d)));
        }
    }
    let name = r
        .name
        .clone()
        .unwrap_or_else(|| format!("{method} {}", path.literal()));
    Ok(ScRequest {
        name,
        head_request: method == "HEAD",
        method,
        target: target_idx,
        url: url_display,
        path,
        headers,
        body,
        content_type,
        fixed: None,
        timeout,
        weight: r.weight.unwrap_or(1),
        think,
        extract,
        checks,
        want_headers,
        want_body,
        thresholds: r.thresholds.clone(),
        threshold_lines: Vec::new(),
    })
}
