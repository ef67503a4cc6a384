//! Unit tests of `lib.rs`, kept in their own file so that file reads as its job.

use super::*;
use redline_stats::{Environment, LoadModel, RunConfig};

pub(crate) fn rec(url: &str, label: Option<&str>, started: &str) -> RunRecord {
    let cfg = RunConfig::get(
        url,
        LoadModel::Closed {
            connections: 4,
            requests: Some(100),
            duration_s: None,
        },
    );
    let mut r = RunRecord::new(cfg, Environment::default(), started.into());
    r.label = label.map(String::from);
    r.latency.record_us(1000);
    r.counters.completed = 1;
    r
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "redline-history-test-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.join("sub").join("history.db")
}

#[test]
fn save_list_resolve_get_remove() {
    let p = tmp("basic");
    let mut s = Store::open(&p).unwrap();
    let a = s
        .save(&rec(
            "http://a/",
            Some("before"),
            "2025-01-01T00:00:00.000Z",
        ))
        .unwrap();
    let b = s
        .save(&rec("http://b/", Some("after"), "2025-01-02T00:00:00.000Z"))
        .unwrap();
    let c = s
        .save(&rec(
            "http://a/",
            Some("before"),
            "2025-01-03T00:00:00.000Z",
        ))
        .unwrap();
    assert_eq!((a, b, c), (1, 2, 3));
    assert_eq!(s.resolve("last").unwrap(), c);
    assert_eq!(s.resolve("last~1").unwrap(), b);
    assert_eq!(s.resolve("last~2").unwrap(), a);
    assert!(matches!(
        s.resolve("last~3"),
        Err(HistoryError::NotFound(_))
    ));
    assert!(matches!(s.resolve("last~x"), Err(HistoryError::BadRef(_))));
    assert_eq!(s.resolve("before").unwrap(), c);
    assert_eq!(s.resolve("2").unwrap(), b);
    assert!(matches!(s.resolve("99"), Err(HistoryError::NotFound(_))));
    let all = s.list(&Filter::default()).unwrap();
    assert_eq!(all.iter().map(|r| r.id).collect::<Vec<_>>(), vec![3, 2, 1]);
    let f = Filter {
        url: Some("//a".into()),
        ..Filter::default()
    };
    assert_eq!(s.list(&f).unwrap().len(), 2);
    let f = Filter {
        since: Some("2025-01-02".into()),
        limit: Some(1),
        ..Filter::default()
    };
    assert_eq!(s.list(&f).unwrap()[0].id, 3);
    let r = s.get(b).unwrap();
    assert_eq!(r.config.url, "http://b/");
    assert_eq!(r.label.as_deref(), Some("after"));
    assert!(s.remove(b).unwrap());
    assert!(!s.remove(b).unwrap());
    assert!(matches!(s.get(b), Err(HistoryError::NotFound(_))));
    drop(s);
    // Reopening keeps everything and does not migrate again.
    let s = Store::open_existing(&p).unwrap();
    assert_eq!(s.list(&Filter::default()).unwrap().len(), 2);
}

#[test]
fn corrupt_foreign_and_newer_databases_are_refused_untouched() {
    let p = tmp("bad");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let junk = b"this is not a database at all, just some text that is long enough...".repeat(100);
    std::fs::write(&p, &junk).unwrap();
    let e = Store::open(&p).unwrap_err();
    assert!(matches!(e, HistoryError::Corrupt { .. }), "{e}");
    assert!(e.is_usage());
    assert_eq!(std::fs::read(&p).unwrap(), junk, "file was changed");

    let p2 = p.with_file_name("foreign.db");
    {
        let c = Connection::open(&p2).unwrap();
        c.execute_batch("CREATE TABLE other (x INTEGER);").unwrap();
    }
    let before = std::fs::read(&p2).unwrap();
    let e = Store::open(&p2).unwrap_err();
    assert!(matches!(e, HistoryError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("1 table(s) (other)"), "{e}");
    // Untouched: not even switched to WAL.
    assert_eq!(
        std::fs::read(&p2).unwrap(),
        before,
        "foreign file was changed"
    );
    // A foreign database that happens to have a user_version and a runs table.
    let p4 = p.with_file_name("foreign-runs.db");
    {
        let c = Connection::open(&p4).unwrap();
        c.execute_batch("CREATE TABLE runs (x INTEGER); PRAGMA user_version = 1;")
            .unwrap();
    }
    let before = std::fs::read(&p4).unwrap();
    let e = Store::open(&p4).unwrap_err();
    assert!(e.to_string().contains("not redline's"), "{e}");
    assert!(e.to_string().contains("left untouched"), "{e}");
    assert_eq!(
        std::fs::read(&p4).unwrap(),
        before,
        "foreign file was changed"
    );
    // redline's own database, damaged inside: quick_check fails, nothing is written.
    let p5 = p.with_file_name("damaged.db");
    {
        let mut s = Store::open(&p5).unwrap();
        for i in 0..200 {
            s.save(&rec(&format!("http://d/{i}"), None, "2026-01-01T00:00:00Z"))
                .unwrap();
        }
    }
    let mut bytes = std::fs::read(&p5).unwrap();
    let page = 4096;
    assert!(bytes.len() > 4 * page);
    for b in &mut bytes[2 * page..3 * page] {
        *b = 0xa5;
    }
    std::fs::write(&p5, &bytes).unwrap();
    let e = Store::open(&p5).unwrap_err();
    assert!(matches!(e, HistoryError::Corrupt { .. }), "{e}");
    assert_eq!(
        std::fs::read(&p5).unwrap(),
        bytes,
        "damaged file was written to"
    );

    let p3 = p.with_file_name("newer.db");
    drop(Store::open(&p3).unwrap());
    {
        let c = Connection::open(&p3).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    let e = Store::open(&p3).unwrap_err();
    assert!(matches!(e, HistoryError::Newer { found: 99, .. }), "{e}");
    assert!(e.to_string().contains("upgrade redline"));

    let missing = p.with_file_name("none.db");
    assert!(matches!(
        Store::open_existing(&missing),
        Err(HistoryError::Missing(_))
    ));
    assert!(!missing.exists());
}

#[test]
fn concurrent_writers_all_land() {
    let p = tmp("conc");
    drop(Store::open(&p).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let p = p.clone();
            std::thread::spawn(move || {
                let mut s = Store::open(&p).unwrap();
                for i in 0..25 {
                    s.save(&rec(
                        &format!("http://t{t}/{i}"),
                        None,
                        "2025-01-01T00:00:00.000Z",
                    ))
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = Store::open(&p).unwrap();
    assert_eq!(s.list(&Filter::default()).unwrap().len(), 100);
}

#[test]
fn page_loads_share_the_ids_and_are_kept_apart_from_runs() {
    let p = tmp("pages");
    let mut s = Store::open(&p).unwrap();
    let a = s
        .save(&rec("http://a/", None, "2025-01-01T00:00:00.000Z"))
        .unwrap();
    let json = r#"{"format":"redline.page","url":"http://a/"}"#;
    let b = s
        .save_page(&PageSave {
            started_at: "2025-01-02T00:00:00.000Z",
            url: "http://a/",
            label: Some("before"),
            note: None,
            runs: 1,
            first_view_ms: 123.4,
            requests: 7,
            errors: 1,
            truncated: false,
            record: json,
        })
        .unwrap();
    assert_eq!((a, b), (1, 2));
    assert_eq!(s.resolve("before").unwrap(), b);
    let rows = s.list(&Filter::default()).unwrap();
    assert_eq!(rows[0].kind, KIND_PAGE);
    assert_eq!(rows[0].completed, 7);
    assert_eq!(rows[0].p50_us, 123_400);
    assert_eq!(rows[1].kind, KIND_RUN);
    assert!(matches!(s.get_saved(b).unwrap(), Saved::Page(j) if j == json));
    let e = s.get(b).unwrap_err();
    assert!(
        matches!(e, HistoryError::WrongKind { .. }) && e.is_usage(),
        "{e}"
    );
    assert!(matches!(s.get_saved(a).unwrap(), Saved::Run(_)));
    // Run-only commands: `last` and labels skip page loads.
    assert_eq!(s.resolve("last").unwrap(), b);
    assert_eq!(s.resolve_run("last").unwrap(), a);
    assert!(matches!(
        s.resolve_run("before"),
        Err(HistoryError::NotFound(_))
    ));
}

#[test]
fn a_version_1_history_is_migrated_and_keeps_its_runs() {
    let p = tmp("v1");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        let json = serde_json::to_string(&rec("http://old/", None, "2024")).unwrap();
        c.execute(
            "INSERT INTO runs (saved_at, started_at, url, method, load_model, load,
                    duration_s, requests_per_sec, completed, failed, non_2xx, p50_us, p99_us,
                    client_limited, interrupted, merged_runs, record)
                 VALUES ('x', '2024', 'http://old/', 'GET', 'closed', 'l', 1, 1, 1, 0, 0, 1, 1,
                    0, 0, 1, ?1)",
            [json],
        )
        .unwrap();
    }
    let s = Store::open(&p).unwrap();
    assert_eq!(s.user_version().unwrap(), SCHEMA_VERSION);
    let rows = s.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].kind, KIND_RUN);
    assert_eq!(s.get(1).unwrap().config.url, "http://old/");
}

#[test]
fn since_parses_dates_and_ages() {
    assert_eq!(since_bound("2025-05-01", 0).unwrap(), "2025-05-01");
    assert_eq!(
        since_bound("2025-05-01 12:00", 0).unwrap(),
        "2025-05-01T12:00"
    );
    assert_eq!(
        since_bound("1d", 86_400 * 2).unwrap(),
        "1970-01-02T00:00:00.000Z"
    );
    assert!(since_bound("yesterday", 0).is_err());
    assert!(since_bound("5y", 0).is_err());
}

#[test]
fn a_trial_is_one_entry_apart_from_its_rounds() {
    let p = tmp("trials");
    let mut s = Store::open(&p).unwrap();
    let a = s
        .save(&rec("http://a/", Some("t:A"), "2025-01-01T00:00:00.000Z"))
        .unwrap();
    let json = r#"{"format":"redline-trial"}"#;
    let t = s
        .save_trial(&TrialSave {
            started_at: "2025-01-01T00:00:00.000Z",
            url: "http://a/",
            method: "GET",
            load: "trial, 3+3 rounds",
            label: "t",
            note: None,
            duration_s: 12.0,
            requests_per_sec: 50.0,
            completed: 600,
            interrupted: false,
            record: json,
        })
        .unwrap();
    assert_eq!(s.resolve("t").unwrap(), t);
    assert!(matches!(s.get_saved(t).unwrap(), Saved::Trial(j) if j == json));
    let e = s.get(t).unwrap_err();
    assert!(
        matches!(e, HistoryError::WrongKind { found: "trial", .. }),
        "{e}"
    );
    // Run-only references skip the trial: its rounds stay runs.
    assert_eq!(s.resolve_run("last").unwrap(), a);
    let rows = s.list(&Filter::default()).unwrap();
    assert_eq!(
        (rows[0].kind.as_str(), rows[0].completed),
        (KIND_TRIAL, 600)
    );
}
