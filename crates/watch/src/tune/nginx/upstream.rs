//! Upstream keep-alive that is never used: an `upstream` block with
//! `keepalive N` keeps idle connections to its servers only for requests
//! nginx sends with HTTP/1.1 and without `Connection: close` (the
//! `ngx_http_upstream_module` docs: "For HTTP, the proxy_http_version
//! directive should be set to “1.1” and the “Connection” header field should
//! be cleared"). nginx proxies with HTTP/1.0 and `Connection: close` by
//! default, so each location that proxies to such an upstream is checked
//! for both, with nginx's inheritance (the innermost level with any
//! `proxy_set_header` replaces all the outer ones).

use super::{at, describe, effective, fix_into, Block, Stmt};
use crate::tune::{Finding, Fix, Level};

/// The upstream a `proxy_pass` names (`http://NAME`, `https://NAME/path`),
/// without a port: what an `upstream NAME {}` block matches.
fn target(arg: &str) -> Option<&str> {
    let rest = arg
        .strip_prefix("http://")
        .or_else(|| arg.strip_prefix("https://"))?;
    let host = rest.split('/').next()?;
    (!host.is_empty() && !host.contains(':') && !host.contains('$')).then_some(host)
}

/// The findings: per location proxying to an upstream with `keepalive`,
/// one for HTTP/1.0 and one for the `Connection` header, each with a fix
/// placed where nginx's inheritance makes it count and no other header is
/// lost.
pub(super) fn checks(s: &[Stmt], blocks: &[Block]) -> Vec<Finding> {
    let mut f = Vec::new();
    // upstream name -> its `keepalive N` statement.
    let pools: Vec<(&str, &Stmt)> = blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.name == "upstream")
        .filter_map(|(i, b)| {
            let name = b.args.first()?;
            let ka = s
                .iter()
                .find(|x| x.parent == Some(i) && x.name == "keepalive")?;
            Some((name.as_str(), ka))
        })
        .collect();
    if pools.is_empty() {
        return f;
    }
    for pp in s.iter().filter(|x| x.name == "proxy_pass") {
        let Some(name) = pp.args.first().and_then(|a| target(a)) else {
            continue;
        };
        let Some((_, ka)) = pools.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        let here = pp.parent;
        let ctx = describe(s, blocks, here);
        let pool = format!(
            "upstream {name} keeps idle connections ({}",
            ka.source.trim_end_matches(';')
        );
        // The block whose proxy_set_header set is in effect here (a new
        // one anywhere else would hide it); none: the proxy_pass's own.
        let headers = effective(s, blocks, here, "proxy_set_header");
        let header_block = headers.first().map(|x| x.parent).unwrap_or(here);

        // HTTP/1.1.
        let version = effective(s, blocks, here, "proxy_http_version");
        match version.last() {
            Some(v) if v.args.first().is_some_and(|a| a == "1.1") => {}
            Some(v) => f.push(
                Finding::new(
                    Level::Warn,
                    "upstream_keepalive_unused",
                    at(v),
                    format!("{pool}), but this location proxies to it with {}: no connection is reused", v.source.trim_end_matches(';')),
                )
                .why("nginx opens a new connection to the upstream for every request (HTTP/1.0 closes it), so the keepalive pool stays empty")
                .context(describe(s, blocks, v.parent))
                .fix(Fix::replace(
                    &v.file,
                    &describe(s, blocks, v.parent),
                    (v.line, v.end_line),
                    &v.source,
                    "proxy_http_version 1.1;",
                )),
            ),
            None => {
                let fi = Finding::new(
                    Level::Warn,
                    "upstream_keepalive_unused",
                    at(pp),
                    format!("{pool}), but `{}` proxies with HTTP/1.0, nginx's default: no connection is reused", pp.source.trim_end_matches(';')),
                )
                .why("nginx opens a new connection to the upstream for every request (HTTP/1.0 closes it), so the keepalive pool stays empty")
                .context(ctx.clone())
                .change("proxy_http_version 1.1;");
                let fix = header_block.and_then(|b| fix_into(s, blocks, b, "proxy_http_version 1.1;"));
                f.push(match fix {
                    Some(x) => fi.fix(x),
                    None => fi,
                });
            }
        }

        // An empty Connection header (nginx's default sends `close`).
        let conn = headers.iter().find(|x| {
            x.args
                .first()
                .is_some_and(|a| a.eq_ignore_ascii_case("connection"))
        });
        let closes = match conn {
            None => true,
            Some(x) => x
                .args
                .get(1)
                .is_some_and(|v| v.eq_ignore_ascii_case("close")),
        };
        if !closes {
            continue;
        }
        let text = "proxy_set_header Connection \"\";";
        let fi = Finding::new(
            Level::Warn,
            "upstream_keepalive_unused",
            conn.map(|x| at(x)).unwrap_or(at(pp)),
            match conn {
                Some(x) => format!("{pool}), but this location sends it `{}`: no connection is reused", x.source.trim_end_matches(';')),
                None => format!("{pool}), but `{}` sends it `Connection: close`, nginx's default: no connection is reused", pp.source.trim_end_matches(';')),
            },
        )
        .why("the upstream closes each connection after one response, so the keepalive pool stays empty")
        .context(ctx.clone())
        .change(text);
        let fix = match conn {
            Some(x) => Some(Fix::replace(
                &x.file,
                &describe(s, blocks, x.parent),
                (x.line, x.end_line),
                &x.source,
                text,
            )),
            // Beside the proxy_set_header lines in effect (a new one in an
            // inner block would drop them), else in the proxying block.
            None => header_block.and_then(|b| fix_into(s, blocks, b, text)),
        };
        f.push(match fix {
            Some(x) => fi.fix(x),
            None => fi,
        });
    }
    f
}
