//! Scenario runs: several named requests (with POST data, per-request headers,
//! time-outs and checks) chosen round-robin, by weight, or walked in order as a
//! session by each virtual user with think time, a cookie jar, values extracted
//! from responses and rows from a CSV file.
//!
//! A scenario file is compiled once ([`Scenario::compile`]): hosts are resolved,
//! templates (`{{name}}`) are split into literal and variable parts, requests
//! without variables or cookies are serialized once, as in a plain run. The
//! worker keeps one [`Vu`] per connection slot (a virtual user is a connection
//! in closed loop) and renders only the requests that need it.

pub mod file;

use crate::h1::Capture;
use crate::plan::{parse_duration, redact_raw_url, redact_url, PlanError};
use crate::tls::{TlsArgs, TlsSetup};
use file::{key, RequestEntry, ScenarioFile, Seg};
use redline_stats::rng::SplitMix64;
use redline_stats::RequestStats;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How the next request is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Each request in turn.
    RoundRobin,
    /// At random, by weight.
    Weighted,
    /// Each virtual user walks the steps in order, again and again.
    Session,
}

/// A think time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Think {
    /// Always this long.
    Fixed(Duration),
    /// Uniform between two bounds.
    Uniform(Duration, Duration),
    /// Exponential with this mean.
    Exp(Duration),
}

impl Think {
    /// Parses `1s`, `0.5s..2s` or `exp:1s`.
    pub fn parse(s: &str) -> Result<Think, String> {
        let s = s.trim();
        if let Some(m) = s.strip_prefix("exp:") {
            return Ok(Think::Exp(parse_duration(m)?));
        }
        if let Some((a, b)) = s.split_once("..") {
            let (a, b) = (parse_duration(a)?, parse_duration(b)?);
            if b < a {
                return Err(format!(
                    "think time '{s}': the upper bound is below the lower"
                ));
            }
            return Ok(Think::Uniform(a, b));
        }
        Ok(Think::Fixed(parse_duration(s)?))
    }

    /// One think time.
    pub fn sample(&self, rng: &mut SplitMix64) -> Duration {
        match *self {
            Think::Fixed(d) => d,
            Think::Uniform(a, b) => a + (b - a).mul_f64(rng.unit_open()),
            Think::Exp(m) => m.mul_f64(-rng.unit_open().ln()).min(m * 20),
        }
    }
}

/// A host requests go to.
#[derive(Debug, Clone)]
pub struct ScTarget {
    /// Its base URL, for display (credentials redacted).
    pub display: String,
    /// The `Host` header.
    pub host_header: String,
    /// The address connections go to.
    pub addr: SocketAddr,
    /// TLS for https hosts.
    pub tls: Option<TlsSetup>,
    /// The credentials of the URL (`user:pass@`), sent as basic auth.
    auth: Option<String>,
    /// `scheme://host:port` ([`crate::redirect::origin_key`]).
    pub origin: String,
    /// The host (as in the URL, lower case), for cookie scopes.
    host: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Lit(Vec<u8>),
    Var(usize),
    /// A generated value ([`crate::gen`]) and its name as written.
    Gen(crate::gen::Gen, String),
}

/// A text with `{{variables}}` in it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Template {
    parts: Vec<Part>,
}

impl Template {
    fn parse(s: &str, vars: &[String]) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = s;
        while let Some(p) = rest.find("{{") {
            if p > 0 {
                parts.push(Part::Lit(rest.as_bytes()[..p].to_vec()));
            }
            let after = &rest[p + 2..];
            let end = after
                .find("}}")
                .ok_or_else(|| format!("'{{{{' without a closing '}}}}' in '{s}'"))?;
            let name = after[..end].trim();
            // `{{"{{"}}` is a literal `{{`; variables come before generated
            // names (a data column may shadow one).
            if name == "\"{{\"" {
                parts.push(Part::Lit(b"{{".to_vec()));
                rest = &after[end + 2..];
                continue;
            }
            match vars.iter().position(|v| v == name) {
                Some(id) => parts.push(Part::Var(id)),
                None => match crate::gen::Gen::parse(name)? {
                    Some(g) => parts.push(Part::Gen(g, name.to_string())),
                    None => {
                        return Err(format!(
                            "unknown variable '{{{{{}}}}}' (not a data column, an extracted value, vu, iteration or a generated value: {})",
                            crate::gen::shown(name),
                            crate::gen::NAMES
                        ))
                    }
                },
            }
            rest = &after[end + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Lit(rest.as_bytes().to_vec()));
        }
        Ok(Template { parts })
    }

    fn is_static(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Lit(_)))
    }

    fn render(&self, vu: &Vu, gen: &mut crate::gen::GenState, out: &mut Vec<u8>) {
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.extend_from_slice(s),
                Part::Gen(g, _) => g.render(gen, out),
                Part::Var(0) => out.extend_from_slice(vu.id.to_string().as_bytes()),
                Part::Var(1) => out.extend_from_slice(vu.iteration.to_string().as_bytes()),
                Part::Var(i) => {
                    if let Some(v) = vu.vars.get(*i).and_then(|v| v.as_deref()) {
                        out.extend_from_slice(v.as_bytes());
                    }
                }
            }
        }
    }

    fn literal(&self) -> String {
        let mut v = Vec::new();
        for p in &self.parts {
            if let Part::Lit(s) = p {
                v.extend_from_slice(s);
            }
        }
        String::from_utf8_lossy(&v).into_owned()
    }
}

/// Where an extracted value comes from.
#[derive(Debug, Clone)]
enum From {
    Header(String),
    Cookie(String),
    Regex(regex::Regex),
    Json(String),
}

#[derive(Debug, Clone)]
struct Extractor {
    var: usize,
    from: From,
}

#[derive(Debug, Clone)]
enum CheckKind {
    Status(Vec<u16>),
    HeaderPresent(String),
    HeaderEquals(String, String),
    BodyContains(String),
    BodyRegex(regex::Regex),
    LatencyUnder(Duration),
}

/// One named request of a scenario, compiled.
#[derive(Debug, Clone)]
pub struct ScRequest {
    /// Its name.
    pub name: String,
    /// Method.
    pub method: String,
    /// Index into [`Scenario::targets`].
    pub target: usize,
    /// URL for reports (credentials redacted, variables as written).
    pub url: String,
    /// HEAD: the response has no body.
    pub head_request: bool,
    path: Template,
    headers: Vec<(String, Template)>,
    body: Option<Template>,
    content_type: Option<String>,
    /// Prebuilt bytes (keep-alive, close) when nothing varies.
    fixed: Option<[Vec<u8>; 2]>,
    /// Response time-out.
    pub timeout: Duration,
    weight: u32,
    /// Think time after it.
    pub think: Option<Think>,
    extract: Vec<Extractor>,
    checks: Vec<(String, CheckKind)>,
    /// Keep the response headers (checks, extraction, cookies).
    pub want_headers: bool,
    /// Keep the response body (checks, extraction).
    pub want_body: bool,
    /// Thresholds on this request's own numbers (parsed by the CLI).
    pub thresholds: Vec<String>,
    threshold_lines: Vec<Option<usize>>,
}

/// CSV rows fed to the virtual users.
#[derive(Debug, Clone)]
pub struct Data {
    columns: Vec<usize>,
    rows: Vec<Vec<String>>,
    per_iteration: bool,
}

/// A compiled scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// The file it came from, as given.
    pub file: String,
    /// How requests are chosen.
    pub mode: Mode,
    /// Hosts; index 0 is the base.
    pub targets: Vec<ScTarget>,
    /// The requests.
    pub requests: Vec<ScRequest>,
    vars: Vec<String>,
    data: Option<Data>,
    /// Keep a cookie jar per virtual user.
    pub cookies: bool,
    /// Thresholds on the whole run (parsed by the CLI).
    pub thresholds: Vec<String>,
    threshold_lines: Vec<Option<usize>>,
    cum_weights: Vec<u64>,
    http10: bool,
    user_agent: String,
    /// `--segment`: local virtual-user ids and data rows map to the whole
    /// run's numbering, so no two segments use the same id or row.
    pub segment: Option<redline_stats::segment::Segment>,
    /// The run's seed (`--seed`): each virtual user's generated values are
    /// drawn from it and the user's id.
    pub seed: u64,
}

/// What compiling needs besides the file.
pub struct CompileArgs<'a> {
    /// The scenario file.
    pub path: &'a Path,
    /// Its parsed contents.
    pub file: &'a ScenarioFile,
    /// Its text (for line numbers).
    pub text: &'a str,
    /// The base URL (command line or file).
    pub base: &'a str,
    /// Let body and data files live outside the scenario's folder.
    pub allow_paths: bool,
    /// TLS options for https hosts.
    pub tls: &'a TlsArgs,
    /// Speak HTTP/1.0.
    pub http10: bool,
    /// Headers from `-H` (added to every request).
    pub cli_headers: &'a [(String, String)],
    /// The default time-out.
    pub timeout: Duration,
}

/// Reads a scenario file.
pub fn load(path: &Path) -> Result<(ScenarioFile, String), PlanError> {
    let text =
        redline_stats::files::read_text(path, redline_stats::files::Kind::Scenario, "scenario")
            .map_err(PlanError::Invalid)?;
    let f = file::parse(&text, &path.display().to_string()).map_err(PlanError::Invalid)?;
    Ok((f, text))
}

fn header_ok(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b))
        && !value.contains('\r')
        && !value.contains('\n')
}

fn target(url: &str, tls: &TlsArgs) -> Result<(ScTarget, String), String> {
    let raw = url.trim();
    let with_scheme = if raw.contains("://") {
        raw.to_string()
    } else {
        format!("http://{raw}")
    };
    let u = url::Url::parse(&with_scheme)
        .map_err(|e| format!("invalid URL '{}': {e}", redact_raw_url(raw)))?;
    let display = redact_url(&u);
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err(format!(
            "unsupported scheme in '{display}' (expected http or https)"
        ));
    }
    let host = match u.host() {
        Some(url::Host::Domain(d)) => d.to_string(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(format!("no host in '{display}'")),
    };
    let port = u.port_or_known_default().unwrap_or(80);
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve host '{host}': {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve host '{host}': no addresses"))?;
    let host_header = match (u.host(), u.port()) {
        (Some(url::Host::Ipv6(ip)), Some(p)) => format!("[{ip}]:{p}"),
        (Some(url::Host::Ipv6(ip)), None) => format!("[{ip}]"),
        (_, Some(p)) => format!("{host}:{p}"),
        (_, None) => host.clone(),
    };
    let tls = if u.scheme() == "https" {
        Some(crate::tls::setup(&host, tls)?)
    } else {
        None
    };
    let auth = if u.username().is_empty() {
        None
    } else {
        use base64::Engine;
        let user = crate::plan::percent_decode(u.username());
        let pass = crate::plan::percent_decode(u.password().unwrap_or(""));
        Some(base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}")))
    };
    let mut path = u.path().to_string();
    if let Some(q) = u.query() {
        path.push('?');
        path.push_str(q);
    }
    Ok((
        ScTarget {
            display,
            host_header,
            addr,
            tls,
            auth,
            origin: crate::redirect::origin_key(&u),
            host: u.host_str().unwrap_or("").to_ascii_lowercase(),
        },
        path,
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
            seed: 0,
        };
        for i in 0..s.requests.len() {
            let r = &s.requests[i];
            if r.path.is_static()
                && r.headers.iter().all(|(_, v)| v.is_static())
                && r.body.as_ref().is_none_or(|b| b.is_static())
                && !s.cookies
            {
                let mut vu = Vu::new(0, s.vars.len());
                let mut ka = Vec::new();
                let mut cl = Vec::new();
                let mut scratch = Vec::new();
                s.render_into(i, &mut vu, false, &mut ka, &mut scratch);
                s.render_into(i, &mut vu, true, &mut cl, &mut scratch);
                s.requests[i].fixed = Some([ka, cl]);
            }
        }
        Ok(s)
    }

    /// Where a threshold of the file is, for the CLI's error about it:
    /// `file:line: thresholds` for the `i`-th top-level one, `file:line:
    /// request 'name'` for the `i`-th of request `request`.
    pub fn threshold_place(&self, request: Option<usize>, i: usize) -> String {
        let (line, whose) = match request {
            None => (self.threshold_lines.get(i), "thresholds".to_string()),
            Some(n) => {
                let r = &self.requests[n];
                (r.threshold_lines.get(i), format!("request '{}'", r.name))
            }
        };
        match line.copied().flatten() {
            Some(l) => format!("{}:{l}: {whose}", self.file),
            None => format!("{}: {whose}", self.file),
        }
    }

    /// The number of variables a virtual user holds.
    pub fn var_count(&self) -> usize {
        self.vars.len()
    }

    /// A virtual user with global id `id` (data row loaded when one per user).
    pub fn new_vu(&self, id: u64) -> Vu {
        let id = self.global(id);
        let mut vu = Vu::new(id, self.vars.len());
        vu.gen = crate::gen::GenState::new(self.seed, id);
        if let Some(d) = &self.data {
            if !d.per_iteration {
                let row = &d.rows[(id % d.rows.len() as u64) as usize];
                for (c, v) in d.columns.iter().zip(row) {
                    vu.vars[*c] = Some(v.clone());
                }
            }
        }
        vu
    }

    /// The whole run's number of this segment's `local` virtual user or row.
    fn global(&self, local: u64) -> u64 {
        self.segment.as_ref().map_or(local, |s| s.position(local))
    }

    /// Chooses the request a virtual user sends next. `rr` is the worker's
    /// round-robin counter, `rows` its data-row counter (advanced by `stride`).
    pub fn choose(
        &self,
        vu: &mut Vu,
        rr: &mut u64,
        rows: &mut u64,
        stride: u64,
        rng: &mut SplitMix64,
    ) -> usize {
        let n = self.requests.len();
        vu.gen.begin_request();
        let new_iteration = match self.mode {
            Mode::Session => vu.step == 0,
            _ => true,
        };
        if new_iteration {
            if vu.started {
                vu.iteration += 1;
            }
            vu.started = true;
            if self.mode == Mode::Session {
                // A new session: forget what the last one extracted and its cookies.
                let keep: Vec<usize> = self
                    .data
                    .as_ref()
                    .map(|d| d.columns.clone())
                    .unwrap_or_default();
                for (i, v) in vu.vars.iter_mut().enumerate() {
                    if i >= 2 && !keep.contains(&i) {
                        *v = None;
                    }
                }
                vu.jar.clear();
            }
            if let Some(d) = &self.data {
                if d.per_iteration {
                    let row = &d.rows[(self.global(*rows) % d.rows.len() as u64) as usize];
                    *rows += stride;
                    for (c, v) in d.columns.iter().zip(row) {
                        vu.vars[*c] = Some(v.clone());
                    }
                }
            }
        }
        match self.mode {
            Mode::RoundRobin => {
                let r = (*rr % n as u64) as usize;
                *rr += 1;
                r
            }
            Mode::Weighted => {
                let total = *self.cum_weights.last().unwrap_or(&1);
                let x = rng.below(total);
                self.cum_weights.partition_point(|c| *c <= x)
            }
            Mode::Session => {
                let r = vu.step;
                vu.step = (vu.step + 1) % n;
                r
            }
        }
    }

    /// Renders request `r` for virtual user `vu` into its buffer, unless the
    /// request is prebuilt (nothing in it varies).
    pub fn prepare(&self, r: usize, vu: &mut Vu, close: bool) {
        if self.requests[r].fixed.is_some() {
            return;
        }
        let mut buf = std::mem::take(&mut vu.buf);
        let mut scratch = std::mem::take(&mut vu.scratch);
        buf.clear();
        self.render_into(r, vu, close, &mut buf, &mut scratch);
        vu.buf = buf;
        vu.scratch = scratch;
    }

    /// The bytes of request `r` as [`Scenario::prepare`] left them.
    pub fn wire<'a>(&'a self, r: usize, vu: &'a Vu, close: bool) -> &'a [u8] {
        match &self.requests[r].fixed {
            Some(f) => &f[close as usize],
            None => &vu.buf,
        }
    }

    fn render_into(
        &self,
        r: usize,
        vu: &mut Vu,
        close: bool,
        out: &mut Vec<u8>,
        body: &mut Vec<u8>,
    ) {
        let mut gen = std::mem::take(&mut vu.gen);
        self.render_with(r, vu, &mut gen, close, out, body);
        vu.gen = gen;
    }

    fn render_with(
        &self,
        r: usize,
        vu: &Vu,
        gen: &mut crate::gen::GenState,
        close: bool,
        out: &mut Vec<u8>,
        body: &mut Vec<u8>,
    ) {
        let req = &self.requests[r];
        let t = &self.targets[req.target];
        body.clear();
        if let Some(b) = &req.body {
            b.render(vu, gen, body);
        }
        out.extend_from_slice(req.method.as_bytes());
        out.push(b' ');
        let before = out.len();
        req.path.render(vu, gen, out);
        if out.len() == before {
            out.push(b'/');
        }
        out.extend_from_slice(if self.http10 {
            b" HTTP/1.0\r\n"
        } else {
            b" HTTP/1.1\r\n"
        });
        let has = |n: &str| req.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        if !has("host") {
            out.extend_from_slice(b"Host: ");
            out.extend_from_slice(t.host_header.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if !has("user-agent") {
            out.extend_from_slice(b"User-Agent: ");
            out.extend_from_slice(self.user_agent.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if !has("accept") {
            out.extend_from_slice(b"Accept: */*\r\n");
        }
        if let Some(a) = &t.auth {
            if !has("authorization") {
                out.extend_from_slice(b"Authorization: Basic ");
                out.extend_from_slice(a.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
        for (k, v) in &req.headers {
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b": ");
            v.render(vu, gen, out);
            out.extend_from_slice(b"\r\n");
        }
        // The jar's cookies for this host only (a cookie goes where it came from).
        if self.cookies && vu.jar.iter().any(|c| c.matches(&t.host)) && !has("cookie") {
            out.extend_from_slice(b"Cookie: ");
            for (i, c) in vu.jar.iter().filter(|c| c.matches(&t.host)).enumerate() {
                if i > 0 {
                    out.extend_from_slice(b"; ");
                }
                out.extend_from_slice(c.name.as_bytes());
                out.push(b'=');
                out.extend_from_slice(c.value.as_bytes());
            }
            out.extend_from_slice(b"\r\n");
        }
        if req.body.is_some() {
            if let Some(ct) = &req.content_type {
                if !has("content-type") {
                    out.extend_from_slice(b"Content-Type: ");
                    out.extend_from_slice(ct.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
            }
        }
        if req.body.is_some() || matches!(req.method.as_str(), "POST" | "PUT" | "PATCH") {
            out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
        if close {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if self.http10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
    }

    /// What of the response to request `r` to keep.
    pub fn prepare_capture(&self, r: usize, cap: &mut Capture) {
        let q = &self.requests[r];
        cap.want_headers = q.want_headers || self.cookies;
        cap.want_body = q.want_body;
    }

    /// Handles a complete response to request `r`: cookies, extraction, checks.
    pub fn on_response(
        &self,
        r: usize,
        vu: &mut Vu,
        status: u16,
        latency: Duration,
        cap: Option<&Capture>,
        stats: &mut RequestStats,
    ) {
        let q = &self.requests[r];
        let empty = Capture::default();
        let cap = cap.unwrap_or(&empty);
        let redirected = vu.redirected_from.take();
        if self.cookies {
            let host = redirected
                .as_deref()
                .unwrap_or(&self.targets[q.target].host);
            for (k, v) in &cap.headers {
                if k.eq_ignore_ascii_case("set-cookie") {
                    set_cookie(&mut vu.jar, v, host);
                }
            }
        }
        for e in &q.extract {
            let got: Option<String> = match &e.from {
                From::Header(h) => cap.header(h).map(str::to_string),
                From::Cookie(c) => cap
                    .headers
                    .iter()
                    .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
                    .filter_map(|(_, v)| {
                        let pair = v.split(';').next()?;
                        let (n, val) = pair.split_once('=')?;
                        (n.trim() == c).then(|| val.trim().to_string())
                    })
                    .next(),
                From::Regex(re) => {
                    let text = String::from_utf8_lossy(&cap.body);
                    re.captures(&text).map(|m| {
                        m.get(1)
                            .or_else(|| m.get(0))
                            .map_or(String::new(), |x| x.as_str().to_string())
                    })
                }
                From::Json(ptr) => serde_json::from_slice::<serde_json::Value>(&cap.body)
                    .ok()
                    .and_then(|v| {
                        v.pointer(ptr).map(|x| match x {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                    }),
            };
            match got {
                Some(v) => vu.vars[e.var] = Some(v),
                None => stats.failed_extractions += 1,
            }
        }
        let mut any_failed = false;
        for (k, (_, c)) in q.checks.iter().enumerate() {
            let ok = match c {
                CheckKind::Status(codes) => codes.contains(&status),
                CheckKind::HeaderPresent(h) => cap.header(h).is_some(),
                CheckKind::HeaderEquals(h, v) => cap.header(h) == Some(v.as_str()),
                CheckKind::BodyContains(s) => memfind(&cap.body, s.as_bytes()),
                CheckKind::BodyRegex(re) => re.is_match(&String::from_utf8_lossy(&cap.body)),
                CheckKind::LatencyUnder(d) => latency < *d,
            };
            if let Some(cc) = stats.checks.get_mut(k) {
                if ok {
                    cc.passed += 1;
                } else {
                    cc.failed += 1;
                }
            }
            any_failed |= !ok;
        }
        if any_failed {
            stats.failed_checks += 1;
        }
    }

    /// `--follow-redirects`: the cookies of a hop of request `r` from
    /// `from_host` (whose redirect response is `cap`) to `to_host`. `None` when
    /// the request has its own `Cookie` header or no jar is kept (then the
    /// request's header is a credential, sent to its own origin only);
    /// otherwise the jar takes the redirect's `Set-Cookie`s and the hop
    /// carries the jar's cookies for `to_host`, as `name=value; …`.
    pub fn redirect_cookies(
        &self,
        r: usize,
        vu: &mut Vu,
        cap: Option<&Capture>,
        from_host: &str,
        to_host: &str,
    ) -> Option<String> {
        let q = &self.requests[r];
        if !self.cookies
            || q.headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("cookie"))
        {
            return None;
        }
        if let Some(cap) = cap {
            for (k, v) in &cap.headers {
                if k.eq_ignore_ascii_case("set-cookie") {
                    set_cookie(&mut vu.jar, v, from_host);
                }
            }
        }
        let mut out = String::new();
        for c in vu.jar.iter().filter(|c| c.matches(to_host)) {
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str(&c.name);
            out.push('=');
            out.push_str(&c.value);
        }
        Some(out)
    }

    /// Empty per-request numbers, one per request, in order.
    pub fn new_stats(&self) -> Vec<RequestStats> {
        self.requests
            .iter()
            .map(|r| {
                let labels: Vec<String> = r.checks.iter().map(|(l, _)| l.clone()).collect();
                RequestStats::new(&r.name, &r.method, &r.url, &labels)
            })
            .collect()
    }
}

fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// A cookie in a virtual user's jar, with the host that set it (or its `Domain`).
#[derive(Debug, Clone)]
struct JarCookie {
    name: String,
    value: String,
    /// The host that set it, or the `Domain` attribute (lower case, no leading dot).
    scope: String,
    /// `Domain` was given: subdomains of `scope` match too.
    domain: bool,
}

impl JarCookie {
    /// Whether the cookie goes to `host` (RFC 6265 §5.1.3 domain match).
    fn matches(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        host == self.scope
            || (self.domain
                && host.len() > self.scope.len()
                && host.ends_with(&self.scope)
                && host.as_bytes()[host.len() - self.scope.len() - 1] == b'.'
                && host.parse::<std::net::IpAddr>().is_err()
                && !host.starts_with('['))
    }
}

/// Applies one `Set-Cookie` header from `host` to a jar (name=value;
/// Max-Age=0 or an empty value deletes). A `Domain` that does not cover
/// `host` is ignored (the cookie is the host's own).
fn set_cookie(jar: &mut Vec<JarCookie>, header: &str, host: &str) {
    let mut parts = header.split(';');
    let Some((name, value)) = parts.next().and_then(|p| p.split_once('=')) else {
        return;
    };
    let (name, value) = (name.trim(), value.trim().trim_matches('"'));
    if name.is_empty() {
        return;
    }
    let host = host.to_ascii_lowercase();
    let mut delete = value.is_empty();
    let mut scope = (host.clone(), false);
    for a in parts {
        let a = a.trim().to_ascii_lowercase();
        if a == "max-age=0" || a.starts_with("max-age=-") {
            delete = true;
        } else if let Some(d) = a.strip_prefix("domain=") {
            let d = d.trim().trim_start_matches('.');
            let c = JarCookie {
                name: String::new(),
                value: String::new(),
                scope: d.to_string(),
                domain: true,
            };
            if !d.is_empty() && c.matches(&host) {
                scope = (d.to_string(), true);
            }
        }
    }
    jar.retain(|c| !(c.name == name && c.scope == scope.0));
    if !delete && jar.len() < 100 {
        jar.push(JarCookie {
            name: name.to_string(),
            value: value.to_string(),
            scope: scope.0,
            domain: scope.1,
        });
    }
}

/// One virtual user's state.
#[derive(Debug, Clone)]
pub struct Vu {
    /// Its global id (`{{vu}}`).
    pub id: u64,
    /// Its pass through the scenario (`{{iteration}}`).
    pub iteration: u64,
    /// Next step (session mode).
    pub step: usize,
    started: bool,
    /// Variable values by id.
    vars: Vec<Option<String>>,
    /// Cookies.
    jar: Vec<JarCookie>,
    /// The request chosen for the slot's current or next send.
    pub chosen: Option<usize>,
    /// The host its connection is open to.
    pub target: usize,
    /// Think time owed before the next request.
    pub think: Option<Duration>,
    /// Sleeping (thinking) now.
    pub sleeping: bool,
    /// `--follow-redirects`: the host the final response came from, when the
    /// request was redirected (its cookies belong to that host).
    pub redirected_from: Option<String>,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    /// Generated values (`{{uuid}}`, `{{seq}}`…): seeded per user.
    gen: crate::gen::GenState,
}

impl Vu {
    fn new(id: u64, vars: usize) -> Vu {
        Vu {
            gen: crate::gen::GenState::default(),
            id,
            iteration: 0,
            step: 0,
            started: false,
            vars: vec![None; vars],
            jar: Vec::new(),
            chosen: None,
            target: 0,
            think: None,
            sleeping: false,
            redirected_from: None,
            buf: Vec::new(),
            scratch: Vec::new(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn think_times_parse_in_their_three_forms() {
        assert_eq!(Think::parse("250ms"), Ok(Think::Fixed(ms(250))));
        assert_eq!(
            Think::parse(" 0.5s..2s "),
            Ok(Think::Uniform(ms(500), ms(2000)))
        );
        assert_eq!(Think::parse("exp:1s"), Ok(Think::Exp(ms(1000))));
        let e = Think::parse("2s..1s").unwrap_err();
        assert!(e.contains("upper bound is below"), "{e}");
        assert!(Think::parse("exp:soon").is_err());
        assert!(Think::parse("1s..").is_err());
    }

    #[test]
    fn uniform_think_stays_within_its_bounds_with_the_midpoint_mean() {
        let t = Think::parse("100ms..300ms").unwrap();
        let mut rng = SplitMix64(42);
        let n = 20_000u32;
        let mut sum = Duration::ZERO;
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for _ in 0..n {
            let d = t.sample(&mut rng);
            assert!((ms(100)..=ms(300)).contains(&d), "{d:?}");
            lo = lo.min(d);
            hi = hi.max(d);
            sum += d;
        }
        let mean = (sum / n).as_secs_f64();
        assert!((0.195..0.205).contains(&mean), "mean {mean}");
        // The draws spread over the whole range, not a corner of it.
        assert!(lo < ms(105) && hi > ms(295), "{lo:?}..{hi:?}");
        // Equal bounds: always that value.
        let t = Think::parse("50ms..50ms").unwrap();
        assert_eq!(t.sample(&mut rng), ms(50));
    }

    #[test]
    fn exponential_think_has_its_mean_and_a_capped_tail() {
        let t = Think::parse("exp:100ms").unwrap();
        let mut rng = SplitMix64(7);
        let n = 20_000u32;
        let mut sum = Duration::ZERO;
        let mut over_mean = 0u32;
        for _ in 0..n {
            let d = t.sample(&mut rng);
            assert!(d <= ms(2000), "capped at 20 means: {d:?}");
            if d > ms(100) {
                over_mean += 1;
            }
            sum += d;
        }
        let mean = (sum / n).as_secs_f64();
        assert!((0.095..0.105).contains(&mean), "mean {mean}");
        // P(X > mean) = 1/e ≈ 0.368 for an exponential (a uniform would give 0.5).
        let share = over_mean as f64 / n as f64;
        assert!((0.35..0.39).contains(&share), "share over the mean {share}");
        // A fixed think time is the same every time.
        let f = Think::parse("30ms").unwrap();
        assert_eq!(f.sample(&mut rng), ms(30));
    }
}
