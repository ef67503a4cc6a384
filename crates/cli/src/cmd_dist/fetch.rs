//! `redline fetch URL`: download a coordinator's served record, check it,
//! save it to the history and print its report.

use super::*;

/// `redline fetch URL`: downloads the record a coordinator serves, checks
/// it, saves it to the history and prints its report.
pub(super) fn cmd_fetch(a: FetchArgs) -> Exit {
    use redline_dist::record_http::{self, FetchError, RecordUrl};
    let url = match RecordUrl::parse(&a.url) {
        Ok(u) => u,
        Err(e) => return fail(Exit::Usage, format!("fetch: {e}")),
    };
    let token = match resolve_token(
        a.token.as_ref().map(|t| t.0.as_str()),
        a.token_file.as_deref(),
    ) {
        Ok(t) => t,
        Err(e) => return fail(Exit::Usage, e),
    };
    let wait = a.wait.unwrap_or_default();
    let deadline = Instant::now() + wait;
    let mut said = false;
    let body = loop {
        match record_http::fetch(&url, token.as_ref(), a.timeout) {
            Ok(b) => break b,
            Err(e @ (FetchError::NotReady(_) | FetchError::Unreachable(_)))
                if Instant::now() + Duration::from_secs(1) < deadline =>
            {
                if !said {
                    eprintln!("redline fetch: waiting at most {wait:?} for the run record ({e})");
                    said = true;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => return fail(Exit::Failure, format!("fetch: {e}")),
        }
    };
    let shown = url.display();
    let text = match String::from_utf8(body) {
        Ok(t) => t,
        Err(_) => return fail(Exit::Failure, format!("fetch: {shown}: not UTF-8 text")),
    };
    let mut rec = match redline_stats::RunRecord::from_json(&text) {
        Ok(r) => r,
        Err(e) => return fail(Exit::Failure, format!("fetch: {shown}: {e}")),
    };
    drop(text);
    if let Err(e) = coordinator::check_consistent(&rec) {
        return fail(
            Exit::Failure,
            format!(
                "fetch: {shown}: not a consistent run record: {}",
                redline_report::escape::clean(&e)
            ),
        );
    }
    let save = crate::cmd_history::RunSaveArgs {
        no_save: a.no_save,
        db: a.db,
        label: a.label,
        note: a.note,
        html: None,
        live_json: None,
    };
    // Saved first, as `run` does; a failed save still prints the report.
    let saved = crate::cmd_history::after_run(&save, &mut rec);
    if let Ok(lines) = &saved {
        for l in lines {
            eprintln!("{l}");
        }
    }
    let code = match a.output {
        RecordFormat::Json => print_out(&redline_report::json(&rec)),
        RecordFormat::Text => print_out(&redline_report::text(&rec)),
    };
    match saved {
        Err(e) => fail(Exit::Failure, e),
        Ok(_) => code,
    }
}
