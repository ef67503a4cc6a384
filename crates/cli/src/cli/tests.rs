//! Unit tests of `cli.rs`, kept in their own file so that file reads as its job.

use super::*;

/// clap's own checks over every command: the groups' `requires` and
/// `conflicts_with` name flags that exist wherever a group is flattened.
#[test]
fn the_command_line_is_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
    RunOnly::command().debug_assert();
}

/// `run` and `find` parse the shared groups into the same plan arguments.
#[test]
fn run_and_find_build_the_same_request() {
    let shared = [
        "-m",
        "PUT",
        "-H",
        "X-A: 1",
        "-b",
        "hi",
        "-T",
        "text/plain",
        "-a",
        "u:p",
        "-L",
        "--max-redirs",
        "3",
        "--h2c",
        "--streams",
        "4",
        "-c",
        "7",
        "-t",
        "1",
        "--no-keepalive",
        "--timeout",
        "5s",
        "--connect-timeout",
        "2s",
    ];
    let mut run_args = vec!["http://127.0.0.1:9/"];
    run_args.extend(shared);
    let run = RunOnly::try_parse_from(&run_args).unwrap().run;
    let from_run = run.plan_args().unwrap();
    let mut find_args = vec!["redline", "find", "http://127.0.0.1:9/", "--slo", "p99<1s"];
    find_args.extend(shared);
    let Command::Find(f) = Cli::try_parse_from(&find_args).unwrap().cmd else {
        panic!("not find");
    };
    let from_find = f.plan_args().unwrap();
    for pa in [&from_run, &from_find] {
        assert_eq!(pa.method.as_deref(), Some("PUT"));
        assert_eq!(pa.headers, vec!["X-A: 1".to_string()]);
        assert_eq!(pa.body.as_deref(), Some(&b"hi"[..]));
        assert_eq!(pa.content_type.as_deref(), Some("text/plain"));
        assert_eq!(pa.basic_auth.as_deref(), Some("u:p"));
        assert!(pa.follow_redirects && pa.max_redirs == Some(3));
        assert!(pa.h2c && pa.streams == Some(4));
        assert_eq!((pa.connections, pa.threads), (Some(7), Some(1)));
        assert!(!pa.keepalive);
        assert_eq!(pa.timeout, Duration::from_secs(5));
        assert_eq!(pa.connect_timeout, Duration::from_secs(2));
    }
}

/// The agent refuses what it sets itself and takes the rest as `run` does.
#[test]
fn the_agent_reads_run_arguments_with_runs_parser() {
    let seg = redline_stats::segment::Segment::parse("0/2", None).unwrap();
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let e = agent_run(&v(&["http://127.0.0.1:9/", "-q"]), seg.clone())
        .err()
        .unwrap();
    assert!(e.contains("-q/--quiet"), "{e}");
    let e = agent_run(&v(&["http://127.0.0.1:9/", "--bogus"]), seg.clone())
        .err()
        .unwrap();
    assert!(e.starts_with("run arguments: ") && !e.contains('\n'), "{e}");
    let r = agent_run(&v(&["http://127.0.0.1:9/", "-n", "10", "-c", "4"]), seg).unwrap();
    assert_eq!(
        r.plan.load,
        redline_engine::Load::Closed {
            connections: 2,
            requests: Some(5),
            duration: None
        }
    );
}

#[test]
fn shorthand_inserts_run() {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(normalize_args(v(&["redline", "http://x/"]))[1], "run");
    assert_eq!(normalize_args(v(&["redline", "-c", "3", "x"]))[1], "run");
    assert_eq!(normalize_args(v(&["redline", "serve"]))[1], "serve");
    assert_eq!(normalize_args(v(&["redline", "--help"]))[1], "--help");
    assert_eq!(normalize_args(v(&["redline", "demo"]))[1], "demo");
}
