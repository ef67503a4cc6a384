//! The audit rendered as text for the terminal.

use super::*;

/// Renders the audit as text: the page's own status first, then the
/// checks that apply, then (apart) the ones with nothing to judge.
pub fn render_text(a: &Audit) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nAudit of {}: grade {} ({}/100)",
        a.url, a.grade, a.score
    );
    if !a.page.ok {
        let _ = writeln!(
            s,
            "THE PAGE ITSELF FAILED: {} answered {}; the audit fails (grade F)",
            if a.page.url.is_empty() {
                &a.url
            } else {
                &a.page.url
            },
            a.page
                .status
                .map_or("nothing".to_string(), |c| c.to_string())
        );
    }
    let _ = writeln!(s);
    if a.insecure {
        let _ = writeln!(
            s,
            "certificate verification OFF (--insecure): the server's identity was not checked\n"
        );
    }
    for v in &a.views {
        let _ = writeln!(
            s,
            "  {:<12} {:>10}  {:>3} requests  {:>3} from cache  {:>3} × 304  {}",
            v.view.name(),
            millis(v.elapsed_ms),
            v.requests,
            v.from_cache,
            v.not_modified,
            bytes(v.wire_bytes)
        );
    }
    if !a.third_party.is_empty() {
        let origins: Vec<&str> = a.third_party.iter().map(|t| t.origin.as_str()).collect();
        let _ = writeln!(s, "  third-party origins: {}", origins.join(", "));
    }
    if !a.deferred.is_empty() {
        let _ = writeln!(
            s,
            "  {} loading=lazy resource{} below the first screen not counted in the first view",
            a.deferred.len(),
            if a.deferred.len() == 1 { "" } else { "s" }
        );
    }
    let _ = writeln!(s);
    for c in a.checks.iter().filter(|c| c.applicable) {
        let _ = writeln!(
            s,
            "[{}] {:<8} {:<48} {}",
            c.grade,
            c.severity.name(),
            c.title,
            c.summary
        );
        for fi in &c.findings {
            let mut line = format!("      {}: ", fi.severity.name());
            if let Some(u) = &fi.url {
                let _ = write!(line, "{u}: ");
            }
            line.push_str(&fi.evidence);
            if let Some(b) = fi.saving_bytes {
                let _ = write!(line, " [saves {}]", bytes(b));
            }
            if let Some(m) = fi.saving_ms {
                let _ = write!(line, " [saves {}]", millis(m));
            }
            let _ = writeln!(s, "{line}");
        }
        if !c.third_party.is_empty() {
            let _ = writeln!(
                s,
                "      third-party hosts (not graded; tell their owners):"
            );
            for fi in &c.third_party {
                let _ = writeln!(
                    s,
                    "        {}: {}",
                    fi.url.as_deref().unwrap_or("-"),
                    fi.evidence
                );
            }
        }
        if let Some(fix) = &c.fix {
            let _ = writeln!(s, "      threshold: {}", c.threshold);
            for (name, cfg) in [
                ("Apache", fix.apache),
                ("nginx", fix.nginx),
                ("lighttpd", fix.lighttpd),
            ] {
                let _ = writeln!(s, "      fix ({name}):");
                for l in cfg.lines() {
                    let _ = writeln!(s, "          {l}");
                }
            }
        }
    }
    let na: Vec<&Check> = a.checks.iter().filter(|c| !c.applicable).collect();
    if !na.is_empty() {
        let _ = writeln!(s, "\nNot applicable (nothing to judge; not in the score):");
        for c in na {
            let _ = writeln!(s, "[-] {:<57} {}", c.title, c.summary);
        }
    }
    s
}
