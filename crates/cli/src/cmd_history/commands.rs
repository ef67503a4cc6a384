//! The history subcommands: `history` (the list), `show`, `export`, `rm`,
//! `compare`, `report` and `merge`.

use super::*;

pub(super) fn cmd_list(a: ListArgs) -> CmdResult {
    let since = match &a.since {
        Some(s) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            Some(redline_history::since_bound(s, now).map_err(|e| (Exit::Usage, e))?)
        }
        None => None,
    };
    let path = redline_history::resolve_path(a.db.db.as_deref()).map_err(history_err)?;
    if !path.exists() {
        return print(&format!(
            "No saved runs yet ({} does not exist).\n",
            path.display()
        ));
    }
    let store = Store::open_existing(&path).map_err(history_err)?;
    let rows = store
        .list(&Filter {
            url: a.url,
            label: a.label,
            since,
            limit: Some(a.limit),
        })
        .map_err(history_err)?;
    if rows.is_empty() {
        return print("No saved runs match.\n");
    }
    let mut o = format!(
        "{:>5}  {:<19}  {:<16}  {:<26}  {:>11}  {:>8}  {:>8}  {:>7}  url\n",
        "id", "started (UTC)", "label", "load", "req/s", "p50", "p99", "errors"
    );
    for r in &rows {
        let started: String = r.started_at.replace('T', " ").chars().take(19).collect();
        if r.kind == redline_history::KIND_PAGE {
            o.push_str(&format!(
                "{:>5}{} {:<19}  {:<16}  {:<26}  {:>11}  {:>8}  {:>8}  {:>7}  PAGE {}\n",
                r.id,
                if r.interrupted { "~" } else { " " },
                short(&started, 19),
                short(r.label.as_deref().unwrap_or("-"), 16),
                short(
                    &format!(
                        "page, first view {}",
                        redline_report::dur_us(r.p50_us as f64)
                    ),
                    26
                ),
                "-",
                "-",
                "-",
                redline_report::count(r.failed),
                r.url
            ));
            continue;
        }
        if r.kind == redline_history::KIND_TRIAL {
            o.push_str(&format!(
                "{:>5}{} {:<19}  {:<16}  {:<26}  {:>11.1}  {:>8}  {:>8}  {:>7}  TRIAL {}\n",
                r.id,
                if r.interrupted { "*" } else { " " },
                short(&started, 19),
                short(r.label.as_deref().unwrap_or("-"), 16),
                short(&compact_load(&r.load), 26),
                r.requests_per_sec,
                "-",
                "-",
                "-",
                r.url
            ));
            continue;
        }
        let flag = if r.interrupted {
            "*"
        } else if r.client_limited {
            "!"
        } else {
            " "
        };
        o.push_str(&format!(
            "{:>5}{flag} {:<19}  {:<16}  {:<26}  {:>11.1}  {:>8}  {:>8}  {:>7}  {} {}\n",
            r.id,
            short(&started, 19),
            short(r.label.as_deref().unwrap_or("-"), 16),
            short(&compact_load(&r.load), 26),
            r.requests_per_sec,
            redline_report::dur_us(r.p50_us as f64),
            redline_report::dur_us(r.p99_us as f64),
            redline_report::count(r.failed + r.non_2xx),
            r.method,
            r.url
        ));
    }
    if rows.iter().any(|r| r.client_limited || r.interrupted) {
        o.push_str("(! client-limited, * interrupted, ~ page load truncated at its budget)\n");
    }
    if rows.iter().any(|r| r.kind == redline_history::KIND_PAGE) {
        o.push_str("(PAGE: a page load of `redline page`; errors: the first view's)\n");
    }
    if rows.iter().any(|r| r.kind == redline_history::KIND_TRIAL) {
        o.push_str("(TRIAL: a before/after trial of `redline trial`, req/s: B's mean; `redline show ID`)\n");
    }
    print(&o)
}

pub(super) fn cmd_show(a: OneRun) -> CmdResult {
    let mut l = Loader::new(&a.db);
    let s = l.store()?;
    let id = s.resolve(&a.run).map_err(history_err)?;
    let rec = match s.get_saved(id).map_err(history_err)? {
        Saved::Page(json) => {
            let p = page_of(&json, &format!("saved page load {id}"))?;
            return print(&format!(
                "Page load {id}\n\n{}",
                redline_web::render::page_compare::show(&p)
            ));
        }
        Saved::Trial(json) => {
            let t = redline_report::trial::TrialRecord::from_json(&json)
                .map_err(|e| (Exit::Failure, format!("saved trial {id}: {e}")))?;
            return print(&format!(
                "Trial {id}\n\n{}",
                redline_report::trial::text(&t)
            ));
        }
        Saved::Run(rec) => rec,
    };
    let mut o = format!("Run {id}");
    if let Some(lb) = &rec.label {
        o.push_str(&format!(" ({})", redline_report::escape::clean(lb)));
    }
    o.push('\n');
    if let Some(n) = &rec.note {
        o.push_str(&format!("Note: {}\n", redline_report::escape::clean(n)));
    }
    o.push('\n');
    o.push_str(&redline_report::text(&rec));
    print(&o)
}

pub(super) fn cmd_export(a: ExportArgs) -> CmdResult {
    let mut l = Loader::new(&a.db);
    let s = l.store()?;
    let id = s.resolve(&a.run).map_err(history_err)?;
    let json = match s.get_saved(id).map_err(history_err)? {
        Saved::Page(json) | Saved::Trial(json) => json + "\n",
        Saved::Run(rec) => redline_report::json(&rec),
    };
    match &a.output {
        Some(p) => write_out(p, "the run record", &json),
        None => print(&json),
    }
}

pub(super) fn cmd_rm(a: RmArgs) -> CmdResult {
    let mut l = Loader::new(&a.db);
    // Resolve every reference first, so `rm last last~1` means the two newest.
    let mut ids = Vec::new();
    for r in &a.runs {
        let s = l.store()?;
        ids.push(s.resolve(r).map_err(history_err)?);
    }
    ids.dedup();
    let s = l.store()?;
    for id in ids {
        if s.remove(id).map_err(history_err)? {
            eprintln!("redline: removed run {id}");
        }
    }
    Ok(())
}

/// Saved runs with their ids.
pub(super) type Group = Vec<(i64, RunRecord)>;

/// Most runs of one label `compare` reads as samples (the newest ones).
pub(super) const MAX_GROUP: u64 = 200;

impl Loader {
    /// The saved runs with label `r` (oldest first, at most [`MAX_GROUP`],
    /// the newest), when `r` names no file, is not `last…` or an id, and at
    /// least two runs carry it; otherwise `None`.
    fn group(&mut self, r: &str) -> Result<Option<Group>, (Exit, String)> {
        let p = Path::new(r);
        if p.is_file() || r.ends_with(".json") || r.contains('/') || r.starts_with("last") {
            return Ok(None);
        }
        if r.parse::<i64>().is_ok() {
            return Ok(None);
        }
        let path = redline_history::resolve_path(self.db.as_deref()).map_err(history_err)?;
        if !path.exists() {
            return Ok(None);
        }
        let s = self.store()?;
        let rows = s
            .list(&Filter {
                label: Some(r.to_string()),
                limit: Some(MAX_GROUP),
                ..Filter::default()
            })
            .map_err(history_err)?;
        let ids: Vec<i64> = rows
            .iter()
            .filter(|x| x.kind == redline_history::KIND_RUN)
            .map(|x| x.id)
            .collect();
        if ids.len() < 2 {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(ids.len());
        for id in ids.into_iter().rev() {
            out.push((id, s.get(id).map_err(history_err)?));
        }
        Ok(Some(out))
    }
}

pub(super) fn group_name(label: &str, g: &[(i64, RunRecord)]) -> String {
    let ids: Vec<String> = g.iter().map(|x| x.0.to_string()).collect();
    let ids = if ids.len() > 8 {
        format!(
            "{} … {}",
            ids[..3].join(", "),
            ids[ids.len() - 2..].join(", ")
        )
    } else {
        ids.join(", ")
    };
    format!("label {label}, {} runs (ids {ids})", g.len())
}

pub(super) fn cmd_compare(a: CompareArgs) -> CmdResult {
    let mut l = Loader::new(&a.db);
    // A trial compares its own rounds: its verdict.
    let Some(b) = a.b.clone() else {
        return match l.trial(&a.a)? {
            Some((name, t)) => print(&format!("{name}\n\n{}", redline_report::trial::text(&t))),
            None => Err((
                Exit::Usage,
                format!(
                    "compare needs two runs (before, after), or one trial: {} is not a trial",
                    a.a
                ),
            )),
        };
    };
    for r in [&a.a, &b] {
        if let Some((name, _)) = l.trial(r)? {
            return Err((
                Exit::Usage,
                format!("{r} is {name}: `redline compare {r}` alone shows its verdict"),
            ));
        }
    }
    let a = (a.a, b);
    // Two labels with several runs each: the runs are the samples.
    let (ga, gb) = (l.group(&a.0)?, l.group(&a.1)?);
    for (side, g, other) in [("A", &ga, &gb), ("B", &gb, &ga)] {
        if let (Some(g), None) = (g, other) {
            eprintln!(
                "redline: note: {side} has {} runs with its label, the other side one: compared the newest of each as single runs (repeat both sides)",
                g.len()
            );
        }
    }
    if let (Some(ga), Some(gb)) = (ga, gb) {
        let (ra, rb): (Vec<RunRecord>, Vec<RunRecord>) = (
            ga.iter().map(|x| x.1.clone()).collect(),
            gb.iter().map(|x| x.1.clone()).collect(),
        );
        let c = redline_report::compare::compare_runs(&ra, &rb);
        let (na, nb) = (group_name(&a.0, &ga), group_name(&a.1, &gb));
        let (la, lb) = (&ra[ra.len() - 1], &rb[rb.len() - 1]);
        return print(&redline_report::compare::text(&c, la, lb, &na, &nb));
    }
    let (na, ra) = l.run_or_page(&a.0)?;
    let (nb, rb) = l.run_or_page(&a.1)?;
    match (ra, rb) {
        (Loaded::Run(ra), Loaded::Run(rb)) => {
            let c = redline_report::compare::compare(&ra, &rb);
            print(&redline_report::compare::text(&c, &ra, &rb, &na, &nb))
        }
        (Loaded::Page(pa), Loaded::Page(pb)) => {
            print(&redline_web::render::page_compare::text(&pa, &pb, &na, &nb))
        }
        _ => Err((
            Exit::Usage,
            format!("cannot compare {na} with {nb}: one is a run, the other a page load"),
        )),
    }
}

pub(super) fn cmd_report(a: ReportArgs) -> CmdResult {
    let mut l = Loader::new(&a.db);
    let trial = match a.run2 {
        None => l.trial(&a.run)?,
        Some(_) => None,
    };
    let (na, ra) = match trial {
        Some((_, t)) => return write_html(&a, &redline_report::trial::html(&t)),
        None => l.any(&a.run)?,
    };
    let second = match &a.run2 {
        Some(r) => Some(l.any(r)?),
        None => None,
    };
    let mut runs: Vec<(&str, &RunRecord)> = vec![(na.as_str(), &ra)];
    if let Some((nb, rb)) = &second {
        runs.push((nb.as_str(), rb));
    }
    let html = redline_report::html::report(&runs);
    write_html(&a, &html)
}

/// `report`'s page to `-o FILE` or standard output.
fn write_html(a: &ReportArgs, html: &str) -> CmdResult {
    match &a.output {
        Some(p) => {
            write_out(p, "the HTML report", html)?;
            if p != Path::new("-") {
                eprintln!("redline: wrote the HTML report to {}", p.display());
            }
            Ok(())
        }
        None => print(html),
    }
}

pub(super) fn cmd_merge(a: MergeArgs) -> CmdResult {
    let mut l = Loader::new(&a.db);
    let mut recs = Vec::with_capacity(a.runs.len());
    for r in &a.runs {
        recs.push(l.any(r)?.1);
    }
    let mut merged = redline_history::merge::merge_with(&recs, a.force)
        .map_err(|e| (Exit::Usage, e.to_string()))?;
    if let Some(lb) = &a.label {
        merged.label = Some(lb.clone());
    }
    let c = redline_report::compare::comparability(&recs[0], &recs[1]);
    for w in c
        .iter()
        .filter(|w| w.contains("URL") || w.contains("load model"))
    {
        eprintln!("redline: warning: {w}");
    }
    write_out(
        &a.output,
        "the merged run record",
        &redline_report::json(&merged),
    )?;
    if a.save {
        let mut s = open_store(a.db.db.as_deref(), true)?;
        let id = s.save(&merged).map_err(history_err)?;
        eprintln!("redline: saved the merged run as run {id}");
    }
    if a.output != Path::new("-") {
        eprintln!(
            "redline: merged {} runs into {}",
            recs.len(),
            a.output.display()
        );
    }
    Ok(())
}
