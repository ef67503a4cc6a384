//! `trial --from-tune ID`: a `tune` finding's fix as state B. The finding is
//! found by its code (CODE:LINE when several have it), its fix applied to a
//! copy of the file (`FILE.redline-fixed`, beside it so relative includes
//! still resolve), and the configuration with the fix checked by the
//! server's own config test (`tune::servertest`) before any round runs.

use super::{FromTuneSwitch, Switch};
use crate::exit::Exit;
use redline_report::trial::FromTune;
use redline_watch::tune::{self, servertest, Level, TuneOptions};
use std::path::{Path, PathBuf};

/// The fix of finding `id` in the configuration `config`, checked, with the
/// switch between the original and the fixed file. Err: the exit code and one line.
pub(super) fn prepare(
    id: &str,
    config: &Path,
    reload: &str,
) -> Result<FromTuneSwitch, (Exit, String)> {
    let usage = |m: String| (Exit::Usage, m);
    let (code, line) = match id.rsplit_once(':') {
        Some((c, l)) => match l.parse::<usize>() {
            Ok(l) => (c, Some(l)),
            Err(_) => return Err(usage(format!("--from-tune {id:?}: give CODE or CODE:LINE"))),
        },
        None => (id, None),
    };
    let opts = TuneOptions {
        use_tools: true,
        ..Default::default()
    };
    let r = tune::analyze(config, &opts).map_err(|e| usage(format!("--server-config: {e}")))?;
    let with_fix: Vec<&tune::Finding> = r
        .findings
        .iter()
        .filter(|f| f.level != Level::Ok && f.fix.is_some())
        .collect();
    let found: Vec<&tune::Finding> = with_fix
        .iter()
        .copied()
        .filter(|f| f.code == code && line.is_none_or(|l| f.line == l))
        .collect();
    let f = match found.as_slice() {
        [f] => *f,
        [] => {
            let mut codes: Vec<String> = with_fix
                .iter()
                .map(|f| format!("{}:{}", f.code, f.line))
                .collect();
            codes.dedup();
            return Err(usage(format!(
                "no tune finding {id:?} with a fix in {}: {}",
                config.display(),
                if codes.is_empty() {
                    "tune has no fix to try there".to_string()
                } else {
                    format!("those with one: {}", codes.join(", "))
                }
            )));
        }
        many => {
            let at: Vec<String> = many.iter().map(|f| format!("{code}:{}", f.line)).collect();
            return Err(usage(format!(
                "{} findings {code}: give one as {}",
                many.len(),
                at.join(" or ")
            )));
        }
    };
    let fix = f.fix.as_ref().expect("filtered on fix");
    let file = PathBuf::from(&fix.file);
    let original = std::fs::read(&file).map_err(|e| {
        (
            Exit::Failure,
            format!("cannot read {}: {e}", file.display()),
        )
    })?;
    let text = String::from_utf8_lossy(&original).into_owned();
    let fixed = fix.apply(&text).ok_or_else(|| {
        (
            Exit::Failure,
            format!(
                "the fix of {id} no longer fits {}: it changed since tune read it",
                file.display()
            ),
        )
    })?;
    let mut copy = file.clone().into_os_string();
    copy.push(".redline-fixed");
    let copy = PathBuf::from(copy);
    std::fs::write(&copy, &fixed).map_err(|e| {
        (
            Exit::Failure,
            format!("cannot write {}: {e}", copy.display()),
        )
    })?;
    let said = check(r.server, config, &file, &copy, &original, &fixed)?;
    eprintln!(
        "redline: trial: B is tune's fix {id} ({}), in {}: {said}",
        f.message,
        copy.display()
    );
    Ok((
        Switch::Files {
            file: file.clone(),
            a: original,
            b: fixed.into_bytes(),
            reload: reload.to_string(),
        },
        FromTune {
            id: id.to_string(),
            message: f.message.clone(),
            file: file.display().to_string(),
            fixed_copy: copy.display().to_string(),
            config_test: said,
        },
    ))
}

/// The server's own config test of the configuration with the fix: the
/// fixed copy itself when the fix is in the main file; otherwise the main
/// file with the fixed text put in the included file for the test and the
/// original put back at once. Err when it refuses or cannot run.
fn check(
    server: tune::Server,
    config: &Path,
    file: &Path,
    copy: &Path,
    original: &[u8],
    fixed: &str,
) -> Result<String, (Exit, String)> {
    let same = std::fs::canonicalize(config).ok() == std::fs::canonicalize(file).ok();
    let (test, why) = if same {
        servertest::run(server, copy, fixed)
    } else {
        let main = tune::read_config(config).map_err(|e| (Exit::Usage, e))?;
        super::write_replacing(file, fixed.as_bytes()).map_err(|e| (Exit::Failure, e))?;
        let r = servertest::run(server, config, &main);
        super::write_replacing(file, original).map_err(|e| (Exit::Failure, e))?;
        r
    };
    match (test, why) {
        (Some(t), _) if t.accepted => Ok(format!("{} accepts it", t.command)),
        (Some(t), _) => {
            let first = t
                .findings
                .iter()
                .find(|f| f.level == Level::Warn)
                .map(|f| f.message.clone())
                .unwrap_or_default();
            Err((
                Exit::Failure,
                format!(
                    "{} refuses the fixed copy {}: {first}",
                    t.command,
                    copy.display()
                ),
            ))
        }
        (None, Some(why)) => Err((
            Exit::Failure,
            format!("cannot check the fixed copy with the server's config test: {why}"),
        )),
        (None, None) => Err((
            Exit::Failure,
            "cannot check the fixed copy: the server is not installed on this machine (its config test is needed)".into(),
        )),
    }
}
