//! Replays Lighthouse's render-blocking audit on the trace and DevTools log
//! Lighthouse itself saved (`lighthouse --save-assets`): redline's port of
//! Lantern's graph (`audit::fcp_graph`) on Lighthouse's own Chromium load,
//! printed as JSON (`[[url, ms], …]`), so `bench/lighthouse/replay.py` can
//! hold it to Lighthouse's own list. Usage:
//! `lighthouse_replay TRACE.json DEVTOOLSLOG.json [--mobile]`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(trace), Some(log)) = (args.first(), args.get(1)) else {
        eprintln!("usage: lighthouse_replay TRACE.json DEVTOOLSLOG.json [--mobile]");
        return ExitCode::from(2);
    };
    let read = |p: &str| -> Result<serde_json::Value, String> {
        let b = std::fs::read(p).map_err(|e| format!("{p}: {e}"))?;
        serde_json::from_slice(&b).map_err(|e| format!("{p}: {e}"))
    };
    let (t, l) = match (read(trace), read(log)) {
        (Ok(t), Ok(l)) => (t, l),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("lighthouse_replay: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(pt) = redline_web::trace::from_lighthouse(&t, &l) else {
        eprintln!("lighthouse_replay: no page trace in {trace} and {log}");
        return ExitCode::from(1);
    };
    let mobile = args.iter().any(|a| a == "--mobile");
    let list = redline_web::audit::lighthouse_list(&pt, mobile);
    println!("{}", serde_json::to_string(&list).unwrap_or_default());
    ExitCode::SUCCESS
}
