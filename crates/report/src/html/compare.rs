//! Before/after (`report A B`): the comparison the report starts with, one
//! row per metric with both values, the change in % and the verdict of
//! `compare::compare` (the same significance tests as `redline compare`),
//! under a warning when the runs differ in what they measured (URL,
//! request, load).

use super::*;

/// The comparison table and its warnings; empty unless two runs are given.
pub(super) fn comparison(runs: &[(&str, &RunRecord)]) -> String {
    let [(na, a), (nb, b)] = runs else {
        return String::new();
    };
    let c = crate::compare::compare(a, b);
    let mut s = String::new();
    if a.config.url != b.config.url {
        let _ = writeln!(
            s,
            "<p class=\"warn\" data-warning=\"different-urls\"><b>Different URLs:</b> {} is {} but {} is {}: the change below may be the target's, not the server's.</p>",
            esc(na),
            esc(&a.config.url),
            esc(nb),
            esc(&b.config.url)
        );
    }
    let others: Vec<&String> = c
        .warnings
        .iter()
        .filter(|w| !w.starts_with("different URLs"))
        .collect();
    if !others.is_empty() {
        s.push_str("<div class=\"warn\"><b>May not be comparable:</b><ul>");
        for w in others {
            let _ = write!(s, "<li>{}</li>", esc(w));
        }
        s.push_str("</ul></div>\n");
    }
    let _ = write!(
        s,
        "<h2>Comparison</h2>\n<table class=\"summary compare\"><thead><tr><th></th><th>{}</th><th>{}</th><th>change</th><th>verdict</th></tr></thead><tbody>",
        esc(na),
        esc(nb)
    );
    for r in &c.rows {
        let class = match r.verdict {
            crate::compare::Verdict::Better => " class=\"better\"",
            crate::compare::Verdict::Worse => " class=\"worse\"",
            _ => "",
        };
        let _ = write!(
            s,
            "<tr{class}><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td class=\"verdict\">{}</td></tr>",
            esc(r.metric),
            esc(&crate::compare::show(r.unit, r.a, a)),
            esc(&crate::compare::show(r.unit, r.b, b)),
            r.change_pct
                .map_or("-".to_string(), |p| format!("{p:+.1}%")),
            esc(r.verdict.words())
        );
    }
    s.push_str("</tbody></table>\n<p class=\"note\">Change: (B − A) / A. A verdict needs 95 % confidence and a change above run-to-run noise (see <code>redline compare</code>).</p>\n");
    s
}
