//! A virtual user's state (variables, cookie jar, step) and what an answer does
//! to it: cookies stored, values extracted, checks judged.

use super::*;

impl Scenario {
    /// Handles a complete response to request `r`: cookies, extraction,
    /// checks. False when a check failed.
    pub fn on_response(
        &self,
        r: usize,
        vu: &mut Vu,
        status: u16,
        latency: Duration,
        cap: Option<&Capture>,
        stats: &mut RequestStats,
    ) -> bool {
        stats.count_status(status);
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
        !any_failed
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
}

pub(super) fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// A cookie in a virtual user's jar, with the host that set it (or its `Domain`).
#[derive(Debug, Clone)]
pub(super) struct JarCookie {
    pub(super) name: String,
    pub(super) value: String,
    /// The host that set it, or the `Domain` attribute (lower case, no leading dot).
    scope: String,
    /// `Domain` was given: subdomains of `scope` match too.
    domain: bool,
}

impl JarCookie {
    /// Whether the cookie goes to `host` (RFC 6265 §5.1.3 domain match).
    pub(super) fn matches(&self, host: &str) -> bool {
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
pub(super) fn set_cookie(jar: &mut Vec<JarCookie>, header: &str, host: &str) {
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
    pub(super) started: bool,
    /// Variable values by id.
    pub(super) vars: Vec<Option<String>>,
    /// Cookies.
    pub(super) jar: Vec<JarCookie>,
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
    /// Open-loop sessions: the journey this user is walking.
    pub journey: Option<crate::workload::Journey>,
    /// The current request's spec and HTTP/1 bytes ([`Scenario::prepare`]).
    pub(super) spec: crate::plan::RequestSpec,
    pub(super) buf: Vec<u8>,
    pub(super) scratch: Vec<u8>,
    /// Generated values (`{{uuid}}`, `{{seq}}`…): seeded per user.
    pub(super) gen: crate::gen::GenState,
}

impl Vu {
    pub(super) fn new(id: u64, vars: usize) -> Vu {
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
            journey: None,
            spec: crate::plan::RequestSpec::default(),
            buf: Vec::new(),
            scratch: Vec::new(),
        }
    }
}
