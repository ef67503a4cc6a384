//! `redline tune`: check a server's configuration and print or export the
//! findings.

use super::*;

pub(super) fn cmd_tune(a: TuneArgs) -> Exit {
    let budget: Option<Budget> = match a
        .memory_budget
        .as_deref()
        .map(size::parse_budget)
        .transpose()
    {
        Ok(b) => b,
        Err(e) => return fail(Exit::Usage, e),
    };
    let mut opts = TuneOptions {
        server: a.server,
        use_tools: !a.no_tools,
        server_test: !a.no_tools,
        htaccess: a.htaccess,
        ..Default::default()
    };
    let m = procfs::machine(&procfs::proc_root());
    opts.budget_kib = budget.map(|b| match b {
        Budget::Share(f) => (m.mem_total_kib as f64 * f) as u64,
        Budget::Kib(k) => k,
    });
    if !a.watch.is_empty() {
        // The same sizing as `redline size` (same budget, per-worker cost
        // and paid-once part); tune compares MaxRequestWorkers with what
        // remains for the workers, through the same `size::apache_fit`
        // (one verdict: "[OK] N fit" here is the N `size` prints).
        let inp = match live_size_input(&a.watch, "--watch", budget, false) {
            Ok(i) => i,
            Err((code, e)) => return fail(code, e),
        };
        match size::compute(&inp) {
            Ok(r) => {
                opts.worker_private_kib = Some(r.per_worker_private_kib + r.per_worker_kernel_kib);
                opts.budget_kib = Some(r.budget_kib.saturating_sub(r.fixed_kib));
            }
            Err(e) => return fail(Exit::Failure, e),
        }
    }
    let analyzed = match &a.server_root {
        Some(root) if !root.is_dir() => {
            return fail(
                Exit::Usage,
                format!(
                    "--server-root {}: not a directory (give the ServerRoot Apache would use, as apache2 -d)",
                    root.display()
                ),
            )
        }
        Some(root) => tune::apache::with_server_root(root, || tune::analyze(&a.config, &opts)),
        None => tune::analyze(&a.config, &opts),
    };
    let r = match analyzed {
        Ok(r) => r,
        Err(e) => return fail(Exit::Usage, e),
    };
    if let Some(p) = &a.junit {
        let limit = a.fail_on.map(|f| f.tune()).unwrap_or(tune::Level::Warn);
        if let Err(code) =
            crate::cmd_web::write_junit(p, "redline tune", &tune_cases(&r.findings, limit))
        {
            return code;
        }
    }
    let code = match a.output {
        Format::Text => print(&tune::render_text(&r)),
        Format::Json => print(&to_json(serde_json::to_value(&r))),
    };
    if code != Exit::Ok {
        return code;
    }
    let Some(threshold) = a.fail_on.map(|f| f.tune()) else {
        return Exit::Ok;
    };
    if r.findings.iter().any(|f| f.level >= threshold) {
        Exit::Findings
    } else {
        Exit::Ok
    }
}
