//! Conditional GET: did the revalidate view's requests get 304, and when
//! not, why. The cause is read from the two responses (first view, revalidate
//! view) of the same URL: an ETag with a compression suffix (Apache
//! mod_deflate's `-gzip`, mod_brotli's `-br`) that the server does not match
//! in `If-None-Match`, an ETag that changes between requests, a
//! Last-Modified that changes on every request, no validator at all, or a
//! server that ignores the conditional headers. Each cause has its own fix.

use super::{check, finding, pct, Check, Ctx, Fix, Severity};
use crate::load::Entry;
use crate::page::bytes;

/// Why a revalidation did not get 304.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The ETag carries the content coding as a suffix (`"…-gzip"`), added
    /// by the compression filter; the server compares `If-None-Match` with
    /// the file's own ETag (no suffix) and misses.
    CodingSuffix(&'static str),
    /// The ETag differs between two requests of an unchanged resource.
    EtagChanged,
    /// Only Last-Modified, and it changes on every request.
    LastModifiedChanges,
    /// Neither ETag nor Last-Modified: nothing to revalidate with.
    NoValidator,
    /// The same validator came back, but the server ignores the conditions.
    Ignored,
}

/// The coding suffix of an ETag (`"abc-gzip"` → `gzip`), if any.
fn coding_suffix(etag: &str) -> Option<&'static str> {
    let t = etag.trim().trim_end_matches('"');
    [("-gzip", "gzip"), ("-br", "br"), ("-deflate", "deflate")]
        .into_iter()
        .find(|(s, _)| t.ends_with(s))
        .map(|(_, c)| c)
}

/// The cause, from what the first view stored (`sent`) and what the revalidate
/// view's full answer carried (`got`).
pub(crate) fn cause(sent: &Entry, got: &Entry) -> Cause {
    match (&sent.etag, &got.etag) {
        (Some(a), Some(b)) if a != b => return Cause::EtagChanged,
        (Some(a), _) => {
            // The suffix matters only where the response was compressed.
            if let Some(c) = coding_suffix(a) {
                if sent.content_encoding.as_deref().is_some_and(|e| e == c) {
                    return Cause::CodingSuffix(c);
                }
            }
            return Cause::Ignored;
        }
        (None, _) => {}
    }
    match (&sent.last_modified, &got.last_modified) {
        (Some(a), Some(b)) if a != b => Cause::LastModifiedChanges,
        (Some(_), _) => Cause::Ignored,
        (None, _) => Cause::NoValidator,
    }
}

impl Cause {
    fn explain(self) -> String {
        match self {
            Cause::CodingSuffix(c) => format!(
                "the ETag ends in -{c}, added by the compression filter; the server compares If-None-Match with the uncompressed file's ETag (no suffix), never matches, and sends the whole body again (Apache mod_{} does this)",
                if c == "br" { "brotli" } else { "deflate" }
            ),
            Cause::EtagChanged => "the ETag changed between two requests of an unchanged resource (ETag from the inode on several servers behind a balancer, or generated per request)".into(),
            Cause::LastModifiedChanges => "no ETag, and Last-Modified changes on every request (a generated page stamping the current time): If-Modified-Since never matches".into(),
            Cause::NoValidator => "neither ETag nor Last-Modified: the browser has nothing to revalidate with".into(),
            Cause::Ignored => "the same validator came back with the whole body: the server (often a script) ignores If-None-Match and If-Modified-Since".into(),
        }
    }

    fn fix(self) -> Fix {
        match self {
            Cause::CodingSuffix("br") => FIX_BROTLI_SUFFIX,
            Cause::CodingSuffix(_) => FIX_DEFLATE_SUFFIX,
            Cause::EtagChanged => FIX_ETAG_CHANGED,
            Cause::LastModifiedChanges => FIX_LM_CHANGES,
            Cause::NoValidator => FIX_NO_VALIDATOR,
            Cause::Ignored => FIX_IGNORED,
        }
    }
}

/// Apache 2.4.58 and newer (Debian 13 ships 2.4.6x): mod_deflate keeps the
/// ETag, so If-None-Match matches. nginx's gzip turns a strong ETag weak
/// (`W/"…"`) and still answers 304; lighttpd's mod_deflate matches its own
/// suffixed ETags.
pub(crate) const FIX_DEFLATE_SUFFIX: Fix = Fix {
    apache: "# Apache 2.4.58 and newer: keep the ETag when mod_deflate compresses\nDeflateAlterETag NoChange",
    nginx: "# nginx's gzip makes strong ETags weak (W/\"...\") and still answers If-None-Match with 304:\n# nothing to change in nginx; a proxy in front that adds a suffix must keep the ETag\netag on;",
    lighttpd: "# lighttpd's mod_deflate matches its own suffixed ETags: nothing to change in lighttpd\nstatic-file.etags := \"enable\"",
};

/// As [`FIX_DEFLATE_SUFFIX`], for mod_brotli (`BrotliAlterETag`, 2.4.26+).
pub(crate) const FIX_BROTLI_SUFFIX: Fix = Fix {
    apache: "# keep the ETag when mod_brotli compresses\nBrotliAlterETag NoChange",
    nginx: FIX_DEFLATE_SUFFIX.nginx,
    lighttpd: FIX_DEFLATE_SUFFIX.lighttpd,
};

pub(crate) const FIX_ETAG_CHANGED: Fix = Fix {
    apache: "# the same file must get the same ETag on every server: no inode in it\nFileETag MTime Size",
    nginx: "# nginx's ETag is the file's mtime and size: deploy with the same mtimes on every server\n# (rsync -t, tar), or leave revalidation to Last-Modified:\netag off;",
    lighttpd: "# the same file must get the same ETag on every server: no inode in it\netag.use-inode := \"disable\"",
};

pub(crate) const FIX_LM_CHANGES: Fix = Fix {
    apache: "# not a server setting: the application must send the content's own date (or an ETag of the\n# content) and answer If-Modified-Since / If-None-Match with 304",
    nginx: "# not a server setting: the application must send the content's own date (or an ETag of the\n# content) and answer If-Modified-Since / If-None-Match with 304",
    lighttpd: "# not a server setting: the application must send the content's own date (or an ETag of the\n# content) and answer If-Modified-Since / If-None-Match with 304",
};

pub(crate) const FIX_NO_VALIDATOR: Fix = Fix {
    apache: "FileETag MTime Size\n# dynamic pages (CGI, PHP) must send ETag or Last-Modified themselves",
    nginx: "etag on;   # the default for static files; proxied apps must send their own",
    lighttpd: "static-file.etags := \"enable\"\netag.use-mtime := \"enable\"\netag.use-size := \"enable\"\netag.use-inode := \"disable\"",
};

pub(crate) const FIX_IGNORED: Fix = Fix {
    apache: "# static files get 304 by default; CGI/PHP must compare If-None-Match and If-Modified-Since\n# with their ETag/Last-Modified and answer 304 themselves",
    nginx: "# static files get 304 by default; proxied apps must answer 304 themselves, or let nginx cache them:\nif_modified_since exact;",
    lighttpd: "# static files get 304 by default; FastCGI/CGI apps must answer 304 themselves\nstatic-file.etags := \"enable\"",
};

/// The conditional-GET check over the revalidate view.
pub(crate) fn conditional_get(cx: &Ctx) -> Check {
    const TITLE: &str = "Conditional GET answered with 304";
    const THRESHOLD: &str = "a revalidating request with If-None-Match/If-Modified-Since should get 304 (checked by sending them; the cause of each miss is named)";
    let Some(rep) = cx.revalidate else {
        return check(
            "conditional-get",
            TITLE,
            THRESHOLD,
            None,
            "not applicable: no revalidate view".into(),
            Vec::new(),
            FIX_IGNORED,
        );
    };
    let mut f = Vec::new();
    let (mut n, mut ok, mut waste) = (0, 0, 0u64);
    let mut causes: Vec<Cause> = Vec::new();
    for e in rep.entries.iter().filter(|e| !e.from_cache) {
        // The first view's answer for the same URL: what the cache stored.
        let Some(sent) = cx
            .first
            .entries
            .iter()
            .find(|s| s.url == e.url && !s.from_cache && s.status == Some(200))
        else {
            continue;
        };
        if !e.conditional && !matches!(e.status, Some(200)) {
            continue;
        }
        let got304 = e.status == Some(304);
        if !e.third_party {
            n += 1;
            ok += usize::from(got304);
        }
        if got304 || e.status != Some(200) {
            continue;
        }
        let c = if e.conditional {
            cause(sent, e)
        } else {
            Cause::NoValidator
        };
        if !e.third_party {
            waste += e.body_wire_bytes;
            causes.push(c);
        }
        let sent_what = [
            sent.etag.as_ref().map(|t| format!("If-None-Match: {t}")),
            sent.last_modified
                .as_ref()
                .map(|t| format!("If-Modified-Since: {t}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" and ");
        let (t, mut fi) = finding(
            if c == Cause::NoValidator {
                Severity::Warning
            } else {
                Severity::Error
            },
            e,
            if e.conditional {
                format!(
                    "sent {sent_what}; got 200 with the whole body again{}: {}",
                    match (&sent.etag, &e.etag) {
                        (Some(a), Some(b)) if a != b => format!(" (ETag now {b})"),
                        _ => String::new(),
                    },
                    c.explain()
                )
            } else {
                format!("got 200 with the whole body again: {}", c.explain())
            },
        );
        fi.saving_bytes = Some(e.body_wire_bytes);
        f.push((t, fi));
    }
    // The fix for the most frequent cause on the page's own site.
    let main = causes
        .iter()
        .max_by_key(|c| causes.iter().filter(|d| d == c).count())
        .copied()
        .unwrap_or(Cause::Ignored);
    check(
        "conditional-get",
        TITLE,
        THRESHOLD,
        pct(ok, n),
        if waste > 0 {
            format!(
                "{ok} of {n} revalidations got 304; {} sent again for nothing",
                bytes(waste)
            )
        } else {
            format!("{ok} of {n} revalidations got 304")
        },
        f,
        main.fix(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes() {
        assert_eq!(coding_suffix("\"2905-661011c14c3a6-gzip\""), Some("gzip"));
        assert_eq!(coding_suffix("\"abc-br\""), Some("br"));
        assert_eq!(coding_suffix("W/\"abc\""), None);
        assert_eq!(coding_suffix("\"abc-gzipx\""), None);
    }
}

#[cfg(test)]
mod cause_tests {
    use super::super::fixtures::entry;
    use super::*;
    use crate::discover::Kind;

    fn css(etag: Option<&str>, lm: Option<&str>, coding: Option<&str>) -> Entry {
        let mut e = entry("http://a.test/s.css", Kind::Stylesheet, "text/css", 5000);
        e.etag = etag.map(str::to_string);
        e.last_modified = lm.map(str::to_string);
        e.content_encoding = coding.map(str::to_string);
        e
    }

    #[test]
    fn each_cause_from_the_two_answers() {
        let lm = Some("Tue, 24 Nov 2026 08:00:00 GMT");
        let lm2 = Some("Tue, 24 Nov 2026 08:00:01 GMT");
        let gz = css(Some("\"2905-66-gzip\""), lm, Some("gzip"));
        assert_eq!(cause(&gz, &gz.clone()), Cause::CodingSuffix("gzip"));
        let br = css(Some("\"2905-66-br\""), lm, Some("br"));
        assert_eq!(cause(&br, &br.clone()), Cause::CodingSuffix("br"));
        // A -gzip suffix on an uncompressed response is just an ETag.
        let odd = css(Some("\"abc-gzip\""), lm, None);
        assert_eq!(cause(&odd, &odd.clone()), Cause::Ignored);
        assert_eq!(
            cause(&css(Some("\"1\""), lm, None), &css(Some("\"2\""), lm, None)),
            Cause::EtagChanged
        );
        assert_eq!(
            cause(&css(None, lm, None), &css(None, lm2, None)),
            Cause::LastModifiedChanges
        );
        assert_eq!(
            cause(&css(None, lm, None), &css(None, lm, None)),
            Cause::Ignored
        );
        assert_eq!(
            cause(&css(None, None, None), &css(None, None, None)),
            Cause::NoValidator
        );
        // Each cause its own fix.
        assert!(Cause::CodingSuffix("gzip")
            .fix()
            .apache
            .contains("DeflateAlterETag NoChange"));
        assert!(Cause::CodingSuffix("br")
            .fix()
            .apache
            .contains("BrotliAlterETag NoChange"));
        assert!(Cause::EtagChanged.fix().lighttpd.contains("etag.use-inode"));
    }
}
