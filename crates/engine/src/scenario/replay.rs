//! `redline replay` as a scenario: one named request per URL of the log's
//! breakdown and original status (plus one per method and status for the
//! URLs beyond it), and an [`Order`] that gives the schedule's `k`-th tick
//! the log's `k`-th request. The worker's per-iteration row counter (which
//! starts at the worker's index and advances by the worker count, exactly
//! as the pacer stripes the ticks) is the tick number, so the requests go
//! out in the log's order on any number of workers. Paths are set after
//! compiling (a logged `{{` is not a template): a URL of the breakdown is
//! prebuilt, the grouped rest is rendered per request from the order.

use super::file::{RequestEntry, ScenarioFile};
use super::{CompileArgs, Part, Scenario, Template, Vu};
use crate::plan::PlanError;
use crate::replay::Log;
use crate::tls::TlsArgs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Which request and path each tick of a replay sends.
#[derive(Debug)]
pub struct Order {
    /// Per tick: the named request and the path.
    ticks: Vec<(u32, u32)>,
    paths: Vec<Box<str>>,
    /// The variable the grouped requests' path is rendered from.
    var: usize,
    /// The named requests whose path comes from the order.
    per_tick: Vec<bool>,
}

impl Order {
    /// The request of tick `k` (`vu`'s path variable set when it varies).
    pub(super) fn pick(&self, k: u64, vu: &mut Vu) -> usize {
        let Some(&(g, p)) = self
            .ticks
            .get((k % self.ticks.len().max(1) as u64) as usize)
        else {
            return 0;
        };
        if self.per_tick.get(g as usize).copied().unwrap_or(false) {
            let path = self.paths.get(p as usize).map_or("/", |s| s);
            match vu.vars.get_mut(self.var) {
                Some(Some(s)) => {
                    s.clear();
                    s.push_str(path);
                }
                Some(slot) => *slot = Some(path.to_string()),
                None => {}
            }
        }
        g as usize
    }
}

/// What a replay scenario is built from.
pub struct ReplayArgs<'a> {
    /// BASE_URL: where requests without a `--host-map` entry go.
    pub base: &'a str,
    /// `--host-map` targets (URLs), in order: a group's target `i` is `hosts[i - 1]`.
    pub hosts: &'a [String],
    /// The log.
    pub log: &'a Log,
    /// BASE_URL's path, put before every logged path (empty for `/`).
    pub prefix: &'a str,
    /// TLS options for https targets.
    pub tls: &'a TlsArgs,
    /// Speak HTTP/1.0.
    pub http10: bool,
    /// `-H` headers.
    pub cli_headers: &'a [(String, String)],
    /// Response time-out.
    pub timeout: Duration,
}

impl Scenario {
    /// The scenario that replays `a.log`.
    pub fn replay(a: ReplayArgs<'_>) -> Result<Scenario, PlanError> {
        let mut file = ScenarioFile {
            name: Some("replay".into()),
            mode: Some("round-robin".into()),
            cookies: Some(false),
            ..ScenarioFile::default()
        };
        for (i, h) in a.hosts.iter().enumerate() {
            file.hosts.insert(format!("h{}", i + 1), h.clone());
        }
        for g in &a.log.groups {
            let mut name = g.name();
            if g.target > 0 {
                name = format!("{name} @{}", a.hosts.get(g.target - 1).map_or("", |s| s));
            }
            file.request.push(RequestEntry {
                name: Some(name),
                method: Some(g.method.clone()),
                path: Some("/".into()),
                host: (g.target > 0).then(|| format!("h{}", g.target)),
                ..RequestEntry::default()
            });
        }
        let path = Path::new(&a.log.summary.log);
        let mut s = Scenario::compile(CompileArgs {
            path,
            file: &file,
            text: "",
            base: a.base,
            allow_paths: false,
            tls: a.tls,
            http10: a.http10,
            cli_headers: a.cli_headers,
            timeout: a.timeout,
        })?;
        let var = s.vars.len();
        s.vars.push("\0replay-path".into());
        let mut per_tick = Vec::with_capacity(s.requests.len());
        for (i, g) in a.log.groups.iter().enumerate() {
            let r = &mut s.requests[i];
            r.fixed = None;
            let mut parts = Vec::new();
            if !a.prefix.is_empty() {
                parts.push(Part::Lit(a.prefix.as_bytes().to_vec()));
            }
            match &g.path {
                Some(p) => {
                    parts.push(Part::Lit(p.as_bytes().to_vec()));
                    r.url = format!("{}{p}", a.prefix);
                }
                None => {
                    parts.push(Part::Var(var));
                    r.url = "(other URLs)".into();
                }
            }
            r.path = Template { parts };
            per_tick.push(g.path.is_none());
        }
        // The breakdown's URLs are prebuilt, as a plain run's request.
        for (i, varies) in per_tick.iter().enumerate() {
            if !varies {
                s.requests[i].fixed = Some(s.prebuilt(i));
            }
        }
        s.replay = Some(Arc::new(Order {
            ticks: a.log.ticks.iter().map(|t| (t.group, t.path)).collect(),
            paths: a.log.paths.clone(),
            var,
            per_tick,
        }));
        s.file = a.log.summary.log.clone();
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::{LogFormat, Options};

    /// Tick k sends the log's k-th request, whichever worker takes it.
    #[test]
    fn ticks_send_the_logs_requests_in_order() {
        let mut text = String::new();
        let paths = ["/a", "/b?x={{y}}", "/a", "/c", "/d", "/a"];
        for (i, p) in paths.iter().enumerate() {
            text +=
                &format!("1.2.3.4 - - [26/Nov/2026:10:00:0{i} +0000] \"GET {p} HTTP/1.1\" 200 5\n");
        }
        let opts = Options {
            breakdown: 2,
            ..Options::default()
        };
        let log = Log::from_bytes(
            text.as_bytes(),
            "x.log",
            &LogFormat::default_format(),
            &opts,
        );
        let s = Scenario::replay(ReplayArgs {
            base: "http://127.0.0.1:9/app",
            hosts: &[],
            log: &log,
            prefix: "/app",
            tls: &TlsArgs::default(),
            http10: false,
            cli_headers: &[],
            timeout: Duration::from_secs(1),
        })
        .unwrap();
        let names: Vec<&str> = s.requests.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "GET /a (200)",
                "GET /b?x={{y}} (200)",
                "GET (other URLs) (200)"
            ]
        );
        let workers = 2u64;
        let mut sent = vec![String::new(); paths.len()];
        for w in 0..workers {
            let (mut rr, mut rows) = (w, w);
            let mut rng = redline_stats::rng::SplitMix64(1);
            let mut vu = s.new_vu(w);
            for _ in 0..paths.len() as u64 / workers {
                let k = rows;
                let r = s.choose(&mut vu, &mut rr, &mut rows, workers, &mut rng);
                s.prepare(r, &mut vu, false);
                let wire = String::from_utf8_lossy(s.wire(r, &vu, false)).into_owned();
                sent[k as usize] = wire.lines().next().unwrap().to_string();
            }
        }
        let want: Vec<String> = paths
            .iter()
            .map(|p| format!("GET /app{p} HTTP/1.1"))
            .collect();
        assert_eq!(sent, want);
    }
}
