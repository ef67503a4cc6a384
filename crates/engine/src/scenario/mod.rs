//! Scenario runs: several named requests (with POST data, per-request headers,
//! time-outs and checks) chosen round-robin, by weight, or walked in order as a
//! session by each virtual user with think time, a cookie jar, values extracted
//! from responses and rows from a CSV file.
//!
//! A scenario file is compiled once ([`Scenario::compile`]): hosts are resolved,
//! templates (`{{name}}`) are split into literal and variable parts, requests
//! without variables or cookies are serialized once, as in a plain run. The
//! worker keeps one [`Vu`] per connection slot (a virtual user is a connection
//! in closed loop) and renders only the requests that need it: into the
//! user's [`RequestSpec`] ([`Scenario::spec`], what any protocol encodes),
//! then into HTTP/1 bytes by the plan's one encoder ([`Scenario::wire`]).
//!
//! Files: this one holds the compiled types, templates and what to send
//! next; `compile.rs` turns a file into a [`Scenario`]; `vu.rs` is a
//! virtual user and what an answer does to it; `file.rs` the TOML as written;
//! `render_tests.rs` checks the specs' bytes against the former renderer.

mod compile;
pub mod file;
#[cfg(test)]
mod render_tests;
pub(crate) mod replay;
mod vu;

pub use compile::{load, parse_csv};
pub use vu::Vu;

use crate::h1::Capture;
use crate::plan::{header_ok, parse_duration, PlanError, RequestSpec};
use crate::tls::{TlsArgs, TlsSetup};
use file::{key, RequestEntry, ScenarioFile, Seg};
use redline_stats::rng::SplitMix64;
use redline_stats::RequestStats;
use std::net::SocketAddr;
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
    /// Prebuilt spec and bytes when nothing varies.
    fixed: Option<Box<Fixed>>,
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

/// A request nothing varies in, built once: its spec and its bytes
/// (keep-alive, close).
#[derive(Debug, Clone)]
struct Fixed {
    spec: RequestSpec,
    wire: [bytes::Bytes; 2],
}

/// A spec's header list refilled in place: each field reuses the strings of
/// the one at its place last time.
struct Fields<'a> {
    list: &'a mut Vec<(String, String)>,
    n: usize,
}

impl Fields<'_> {
    /// The next field, named `name`, with an empty value to fill.
    fn slot(&mut self, name: &str) -> &mut String {
        if self.n == self.list.len() {
            self.list.push(Default::default());
        }
        let (k, v) = &mut self.list[self.n];
        self.n += 1;
        k.clear();
        k.push_str(name);
        v.clear();
        v
    }

    /// Drops the fields left from a longer request.
    fn done(self) {
        self.list.truncate(self.n);
    }
}

/// Appends rendered text (UTF-8: templates, data and extracted values are
/// text; anything else is replaced, never sent raw).
fn push_text(out: &mut String, b: &[u8]) {
    match std::str::from_utf8(b) {
        Ok(t) => out.push_str(t),
        Err(_) => out.push_str(&String::from_utf8_lossy(b)),
    }
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
    /// `redline replay`: which request each tick sends.
    pub replay: Option<std::sync::Arc<replay::Order>>,
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

impl Scenario {
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

    /// The method the record shows for the run: the requests' one method,
    /// or `mixed`.
    pub fn method_shown(&self) -> String {
        match self.requests.first() {
            Some(f) if self.requests.iter().all(|r| r.method == f.method) => f.method.clone(),
            Some(_) => "mixed".into(),
            None => String::new(),
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
        if let Some(o) = &self.replay {
            let k = self.global(*rows);
            *rows += stride;
            return o.pick(k, vu);
        }
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

    /// Renders request `r` for virtual user `vu`: its spec, then its HTTP/1
    /// bytes (the one encoder, [`RequestSpec::encode_h1_into`]), both kept in
    /// the user's buffers; nothing when the request is prebuilt (nothing in
    /// it varies). No allocation once the buffers have grown.
    pub fn prepare(&self, r: usize, vu: &mut Vu, close: bool) {
        if self.requests[r].fixed.is_some() {
            return;
        }
        let mut spec = std::mem::take(&mut vu.spec);
        let mut scratch = std::mem::take(&mut vu.scratch);
        let mut gen = std::mem::take(&mut vu.gen);
        self.render_spec(r, vu, &mut gen, &mut spec, &mut scratch);
        vu.buf.clear();
        spec.encode_h1_into(close, &mut vu.buf);
        vu.spec = spec;
        vu.scratch = scratch;
        vu.gen = gen;
    }

    /// The bytes of request `r` as [`Scenario::prepare`] left them.
    pub fn wire<'a>(&'a self, r: usize, vu: &'a Vu, close: bool) -> &'a [u8] {
        match &self.requests[r].fixed {
            Some(f) => &f.wire[close as usize],
            None => &vu.buf,
        }
    }

    /// [`Scenario::wire`] as a request for an [`crate::session::H1Session`]:
    /// a fixed request's shared bytes, or a copy of the user's rendering.
    pub fn h1_request(&self, r: usize, vu: &Vu, close: bool) -> crate::session::H1Request {
        let q = &self.requests[r];
        crate::session::H1Request {
            wire: match &q.fixed {
                Some(f) => f.wire[close as usize].clone(),
                None => bytes::Bytes::copy_from_slice(&vu.buf),
            },
            head: q.head_request,
        }
    }

    /// What of the answer to request `r` to keep, as [`crate::session::Want::capture`]
    /// asks it: (headers, body).
    pub fn capture_want(&self, r: usize) -> (bool, bool) {
        let q = &self.requests[r];
        (q.want_headers || self.cookies, q.want_body)
    }

    /// The spec of request `r` as [`Scenario::prepare`] left it: what a
    /// driver encodes in its own protocol (HTTP/2: [`RequestSpec::to_h2`])
    /// without parsing the HTTP/1 bytes; and what redirect hops are rewritten
    /// from ([`crate::redirect::hop_spec`]).
    pub fn spec<'a>(&'a self, r: usize, vu: &'a Vu) -> &'a RequestSpec {
        match &self.requests[r].fixed {
            Some(f) => &f.spec,
            None => &vu.spec,
        }
    }

    /// Request `r` prebuilt (for one that nothing varies in): its spec and
    /// its bytes, keep-alive and close.
    fn prebuilt(&self, r: usize) -> Box<Fixed> {
        let mut vu = Vu::new(0, self.vars.len());
        let mut spec = RequestSpec::default();
        let mut scratch = Vec::new();
        let mut gen = std::mem::take(&mut vu.gen);
        self.render_spec(r, &vu, &mut gen, &mut spec, &mut scratch);
        let wire = [spec.encode_h1(false).into(), spec.encode_h1(true).into()];
        Box::new(Fixed { spec, wire })
    }

    /// Fills `spec` with request `r` as virtual user `vu` sends it: templates
    /// rendered (the body first, then the path and headers: generated values
    /// are drawn in that order), the fields in the order HTTP/1 writes them
    /// (`Host`, `User-Agent`, `Accept`, basic auth, the request's headers,
    /// the jar's `Cookie`, `Content-Type`, `Content-Length`). Its strings and
    /// vectors are reused.
    fn render_spec(
        &self,
        r: usize,
        vu: &Vu,
        gen: &mut crate::gen::GenState,
        spec: &mut RequestSpec,
        scratch: &mut Vec<u8>,
    ) {
        use std::fmt::Write;
        let req = &self.requests[r];
        let t = &self.targets[req.target];
        spec.body.clear();
        if let Some(b) = &req.body {
            b.render(vu, gen, &mut spec.body);
        }
        spec.method.clear();
        spec.method.push_str(&req.method);
        scratch.clear();
        req.path.render(vu, gen, scratch);
        if scratch.is_empty() {
            scratch.push(b'/');
        }
        spec.path.clear();
        push_text(&mut spec.path, scratch);
        spec.http10 = self.http10;
        spec.chunked = false;
        let has = |n: &str| req.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        let mut f = Fields {
            list: &mut spec.headers,
            n: 0,
        };
        if !has("host") {
            f.slot("Host").push_str(&t.host_header);
        }
        if !has("user-agent") {
            f.slot("User-Agent").push_str(&self.user_agent);
        }
        if !has("accept") {
            f.slot("Accept").push_str("*/*");
        }
        if let Some(a) = &t.auth {
            if !has("authorization") {
                let v = f.slot("Authorization");
                v.push_str("Basic ");
                v.push_str(a);
            }
        }
        for (k, v) in &req.headers {
            scratch.clear();
            v.render(vu, gen, scratch);
            push_text(f.slot(k), scratch);
        }
        // The jar's cookies for this host only (a cookie goes where it came from).
        if self.cookies && vu.jar.iter().any(|c| c.matches(&t.host)) && !has("cookie") {
            let v = f.slot("Cookie");
            for (i, c) in vu.jar.iter().filter(|c| c.matches(&t.host)).enumerate() {
                if i > 0 {
                    v.push_str("; ");
                }
                v.push_str(&c.name);
                v.push('=');
                v.push_str(&c.value);
            }
        }
        if req.body.is_some() {
            if let Some(ct) = &req.content_type {
                if !has("content-type") {
                    f.slot("Content-Type").push_str(ct);
                }
            }
        }
        if req.body.is_some() || matches!(req.method.as_str(), "POST" | "PUT" | "PATCH") {
            let _ = write!(f.slot("Content-Length"), "{}", spec.body.len());
        }
        f.done();
        // A `Host` given by the request is where it goes (HTTP/2's `:authority`).
        spec.authority.clear();
        let host = spec
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("host"))
            .map_or(t.host_header.as_str(), |(_, v)| v.as_str());
        spec.authority.push_str(host);
    }

    /// What of the response to request `r` to keep.
    pub fn prepare_capture(&self, r: usize, cap: &mut Capture) {
        (cap.want_headers, cap.want_body) = self.capture_want(r);
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
