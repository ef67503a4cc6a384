//! Unit tests of `size.rs`, kept in their own file so that file reads as its job.

use super::*;

fn p(pid: u32, ppid: u32, private: u64, pss: u64) -> ProcInfo {
    ProcInfo {
        pid,
        ppid,
        comm: "apache2".into(),
        private_kib: private,
        pss_kib: pss,
        rss_kib: pss * 3,
        ..Default::default()
    }
}

#[test]
fn from_a_run_record_same_arithmetic_as_live() {
    use redline_stats::watch::{NamedKib, ProcSample, WatchSample};
    let procs = [
        p(10, 1, 2000, 4000),
        p(11, 10, 1000, 1500),
        p(12, 10, 3000, 3500),
    ];
    let h = HostWatch {
        host: "web1".into(),
        targets: vec!["apache2".into()],
        cpus: 2,
        mem_total_kib: 1_000_000,
        process_names: vec!["apache2".into()],
        pss_exact: true,
        samples: vec![
            WatchSample {
                processes: 3,
                private_kib: 6000,
                ..Default::default()
            },
            WatchSample {
                t: 1.0,
                processes: 2,
                private_kib: 3000,
                ..Default::default()
            },
        ],
        peak_processes: procs
            .iter()
            .map(|x| ProcSample {
                pid: x.pid,
                ppid: x.ppid,
                name: x.comm.clone(),
                threads: 1,
                rss_kib: x.rss_kib,
                pss_kib: x.pss_kib,
                private_kib: x.private_kib,
                kernel_kib: x.kernel_kib,
            })
            .collect(),
        peak_others: vec![NamedKib {
            name: "mysqld".into(),
            kib: 100_000,
        }],
        ..Default::default()
    };
    let inp = input_from_watch(&h, Some(Budget::Kib(100_000)), None).unwrap();
    let r = compute(&inp).unwrap();
    assert_eq!(r.fixed_kib, 5000);
    assert_eq!(r.per_worker_private_kib, 3000);
    // 3000 KiB + 10 % margin = 3300 KiB per worker.
    assert_eq!(r.per_worker_cost_kib, 3300);
    assert_eq!(r.max_workers, 28);
    assert!(
        r.mpm.as_deref().unwrap().starts_with("prefork"),
        "{:?}",
        r.mpm
    );
    let r = compute(&input_from_watch(&h, None, None).unwrap()).unwrap();
    assert_eq!(r.budget_kib, 1_000_000 - 100_000 - 100_000);
    assert_eq!(r.others[0].name, "mysqld");

    // An older record: sized from the totals of the peak sample.
    let mut old = h.clone();
    old.peak_processes.clear();
    old.samples[0] = WatchSample {
        processes: 3,
        private_kib: 6000,
        pss_kib: 9000,
        max_process_private_kib: 3000,
        ..Default::default()
    };
    let inp = input_from_watch(&old, Some(Budget::Kib(100_000)), None).unwrap();
    let r = compute(&inp).unwrap();
    assert_eq!(r.per_worker_private_kib, 3000);
    assert_eq!(r.fixed_kib, 3000);
    assert_eq!(r.max_workers, (100_000 - 3000) / with_margin(3000));
    assert!(r.notes.iter().any(|n| n.contains("per-sample totals")));

    // Nothing seen: a clear error.
    let mut none = h.clone();
    none.samples.iter_mut().for_each(|s| s.processes = 0);
    assert!(input_from_watch(&none, None, None)
        .unwrap_err()
        .contains("no process"));
}

fn apache_input(mpm: Mpm, tpc: Option<u64>) -> SizeInput {
    SizeInput {
        server: vec![
            p(10, 1, 2000, 4000),
            p(11, 10, 10_000, 11_000),
            p(12, 10, 12_000, 12_500),
        ],
        others: vec![],
        machine: MachineInfo {
            mem_total_kib: 4_000_000,
            ..Default::default()
        },
        budget: Some(Budget::Kib(200_000)),
        kind: ServerKind::Apache,
        mpm: Some((mpm, "test".into())),
        threads_per_child: tpc,
        cpus: 2,
        evidence: vec![],
        source: None,
        load_cpu_percent: None,
        limits: None,
    }
}

#[test]
fn worker_and_event_give_server_limit_times_threads_per_child() {
    // fixed = parent PSS 4000 + shared (1000 + 500) = 5500;
    // processes = (200000 - 5500) / (12000 + 10 %) = 14.
    for (mpm, tpc, want_tpc) in [(Mpm::Event, Some(64), 64), (Mpm::Worker, None, 25)] {
        let r = compute(&apache_input(mpm, tpc)).unwrap();
        assert_eq!((r.fixed_kib, r.max_workers), (5500, 14));
        assert_eq!(r.threads_per_process, Some(want_tpc));
        let d: Vec<&str> = r.directives.iter().map(String::as_str).collect();
        let mrw = format!("MaxRequestWorkers {}", 14 * want_tpc);
        assert_eq!(
            &d[1..],
            &[
                "ServerLimit       14",
                &format!("ThreadsPerChild   {want_tpc}"),
                &mrw
            ],
            "{d:?}"
        );
        // The memory per process is in the comment and the arithmetic.
        assert!(
            d[0].starts_with('#') && d[0].contains("12.9 MiB each with margin"),
            "{}",
            d[0]
        );
        assert!(
            r.arithmetic.iter().any(|a| a.contains(&format!(
                "ServerLimit 14 × ThreadsPerChild {want_tpc} = {}",
                14 * want_tpc
            )) && a.contains("per process")),
            "{:?}",
            r.arithmetic
        );
        let text = render(&r);
        assert!(
            text.contains(&format!("One worker process ({want_tpc} threads)"))
                && text.contains(&mrw),
            "{text}"
        );
    }
    // Prefork: one request per process, no ThreadsPerChild.
    let r = compute(&apache_input(Mpm::Prefork, Some(64))).unwrap();
    assert_eq!(r.threads_per_process, None);
    assert!(r.directives.iter().any(|d| d == "MaxRequestWorkers 14"));
    assert!(!r.directives.iter().any(|d| d.contains("ThreadsPerChild")));
    // Every directive line pastes into an Apache config (no trailing comment).
    for d in &r.directives {
        assert!(d.starts_with('#') || !d.contains('#'), "{d}");
    }
}

#[test]
fn lighttpd_sizing() {
    let mut inp = apache_input(Mpm::Prefork, None);
    inp.kind = ServerKind::Lighttpd;
    inp.mpm = None;
    inp.server = vec![ProcInfo {
        pid: 20,
        ppid: 1,
        comm: "lighttpd".into(),
        private_kib: 4000,
        pss_kib: 5000,
        rss_kib: 9000,
        ..Default::default()
    }];
    let r = compute(&inp).unwrap();
    // One process, no workers: all of it per process, nothing paid once.
    assert_eq!((r.workers, r.fixed_kib, r.max_workers), (0, 0, 45));
    assert_eq!(
        r.directives[0].split("    #").next(),
        Some("server.max-worker = 0")
    );
    assert!(r
        .directives
        .iter()
        .any(|d| d.starts_with("server.max-connections = 1024")));
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("memory allows 45 such processes")),
        "{:?}",
        r.notes
    );
    let text = render(&r);
    assert!(
        text.contains("lighttpd") && text.contains("server.max-worker = 0"),
        "{text}"
    );
}

#[test]
fn budgets() {
    assert_eq!(parse_budget("50%").unwrap(), Budget::Share(0.5));
    assert_eq!(parse_budget("4GiB").unwrap(), Budget::Kib(4 * 1024 * 1024));
    assert_eq!(parse_budget("512M").unwrap(), Budget::Kib(512 * 1024));
    for bad in ["", "0%", "120%", "x", "4 parsecs", "0"] {
        assert!(parse_budget(bad).is_err(), "{bad}");
    }
}

#[test]
fn prefork_arithmetic() {
    let inp = SizeInput {
        server: vec![
            p(10, 1, 2000, 4000),
            p(11, 10, 1000, 1500),
            p(12, 10, 3000, 3500),
        ],
        others: vec![ProcInfo {
            pid: 5,
            comm: "mysqld".into(),
            pss_kib: 100_000,
            ..Default::default()
        }],
        machine: MachineInfo {
            mem_total_kib: 1_000_000,
            ..Default::default()
        },
        budget: Some(Budget::Kib(100_000)),
        kind: ServerKind::Apache,
        mpm: Some((Mpm::Prefork, "test".into())),
        threads_per_child: None,
        cpus: 2,
        evidence: vec![],
        source: None,
        load_cpu_percent: None,
        limits: None,
    };
    let r = compute(&inp).unwrap();
    // fixed = parent PSS 4000 + shared of workers (500 + 500) = 5000
    assert_eq!(r.fixed_kib, 5000);
    assert_eq!(r.per_worker_private_kib, 3000);
    assert_eq!(r.max_workers, (100_000 - 5000) / 3300);
    assert_eq!(r.directives[1], "MaxRequestWorkers 28");
    let mut d = inp.clone();
    d.budget = None;
    let r = compute(&d).unwrap();
    assert_eq!(r.budget_kib, 1_000_000 - 100_000 - 100_000);
    assert_eq!(r.others[0].name, "mysqld");
}

#[test]
fn safe_to_follow_kernel_margin_and_warnings() {
    // Workers with 300 KiB of page tables and one 16 KiB kernel stack each.
    let mut inp = apache_input(Mpm::Prefork, None);
    for w in inp.server.iter_mut() {
        w.kernel_kib = 300 + crate::procfs::KERNEL_STACK_KIB;
        w.threads = 1;
    }
    let k = 300 + crate::procfs::KERNEL_STACK_KIB;
    let r = compute(&inp).unwrap();
    assert_eq!(r.per_worker_kernel_kib, k);
    assert_eq!(r.per_worker_cost_kib, with_margin(12_000 + k));
    // The parent's kernel memory is paid once.
    assert_eq!(r.fixed_kib, 5500 + k);
    let n = (200_000 - 5500 - k) / with_margin(12_000 + k);
    assert_eq!(r.max_workers, n);
    assert!(r.directives.contains(&format!("MaxRequestWorkers {n}")));
    assert!(
        r.arithmetic.iter().any(|a| a.contains("kernel")
            && a.contains("page tables")
            && a.contains("10% safety margin")),
        "{:?}",
        r.arithmetic
    );
    let text = render(&r);
    assert!(
        text.contains("[--] kernel") && text.contains("safety margin"),
        "{text}"
    );
    // Nothing to warn about: a busy measurement, a sane count, limits above it.
    inp.load_cpu_percent = Some(80.0);
    inp.limits = Some(Limits {
        open_files: Some(1024),
        processes: Some(10_000),
    });
    let quiet = compute(&inp).unwrap();
    assert!(quiet.notes.is_empty(), "{:?}", quiet.notes);

    // Idle, absurd for 2 CPUs, above the user's process limit.
    let mut big = inp.clone();
    big.load_cpu_percent = Some(0.4);
    big.budget = Some(Budget::Kib(64 * 1024 * 1024));
    big.limits = Some(Limits {
        open_files: Some(1024),
        processes: Some(1000),
    });
    let r = compute(&big).unwrap();
    let notes = r.notes.join("\n");
    assert!(
        notes.contains("idle while measured (peak CPU 0.4%"),
        "{notes}"
    );
    assert!(notes.contains("absurd for this machine"), "{notes}");
    assert!(notes.contains("Max processes"), "{notes}");

    // Above Apache's compiled ceiling: capped, and said.
    let mut huge = inp.clone();
    huge.server = vec![p(10, 1, 10, 10), p(11, 10, 1, 1), p(12, 10, 1, 1)];
    huge.budget = Some(Budget::Kib(2 * 1024 * 1024 * 1024));
    let r = compute(&huge).unwrap();
    assert!(
        r.directives
            .contains(&"MaxRequestWorkers 200000".to_string()),
        "{:?}",
        r.directives
    );
    assert!(
        r.notes.iter().any(|n| n.contains("compiled ceiling")),
        "{:?}",
        r.notes
    );

    // Event with ThreadsPerChild above the default ThreadLimit: ThreadLimit is set;
    // nginx with 1024 connections per worker and 512 open files: worker_rlimit_nofile.
    let r = compute(&apache_input(Mpm::Event, Some(100))).unwrap();
    assert!(
        r.directives.contains(&"ThreadLimit       100".to_string()),
        "{:?}",
        r.directives
    );
    let mut ng = inp.clone();
    ng.kind = ServerKind::Nginx;
    ng.mpm = None;
    ng.limits = Some(Limits {
        open_files: Some(512),
        processes: None,
    });
    let r = compute(&ng).unwrap();
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("worker_rlimit_nofile 2048")),
        "{:?}",
        r.notes
    );
}

#[test]
fn tune_and_size_share_the_arithmetic() {
    // Prefork: budget / (cost + margin); threaded: processes × ThreadsPerChild.
    let w = apache_workers(100_000, 5000, 3000, None);
    assert_eq!(
        (w.processes, w.max_request_workers, w.server_limit),
        (28, 28, 28)
    );
    let w = apache_workers(100_000, 0, 3000, Some(25));
    assert_eq!((w.processes, w.max_request_workers), (30, 750));
    assert_eq!(apache_workers(10, 100, 3000, None).server_limit, 1);
    let w = apache_workers(u64::MAX / 2, 0, 1, Some(25));
    assert!(w.capped && w.server_limit == APACHE_THREADED_SERVER_LIMIT_MAX);
    // tune, given what `size` leaves for the workers, suggests what size prints.
    let inp = apache_input(Mpm::Prefork, None);
    let r = compute(&inp).unwrap();
    let tune_side = apache_workers(
        r.budget_kib - r.fixed_kib,
        0,
        r.per_worker_private_kib + r.per_worker_kernel_kib,
        None,
    );
    assert_eq!(tune_side.max_request_workers, r.max_workers);
}

fn watch_of(targets: &[&str], procs: &[ProcInfo]) -> HostWatch {
    use redline_stats::watch::{ProcSample, WatchSample};
    HostWatch {
        host: "web1".into(),
        targets: targets.iter().map(|t| t.to_string()).collect(),
        cpus: 2,
        mem_total_kib: 1_000_000,
        pss_exact: true,
        samples: vec![WatchSample {
            processes: procs.len() as u32,
            private_kib: procs.iter().map(|p| p.private_kib).sum(),
            ..Default::default()
        }],
        peak_processes: procs
            .iter()
            .map(|x| ProcSample {
                pid: x.pid,
                ppid: x.ppid,
                name: x.comm.clone(),
                threads: 1,
                rss_kib: x.rss_kib,
                pss_kib: x.pss_kib,
                private_kib: x.private_kib,
                kernel_kib: x.kernel_kib,
            })
            .collect(),
        ..Default::default()
    }
}

fn named(name: &str, pid: u32, ppid: u32, private: u64, pss: u64) -> ProcInfo {
    ProcInfo {
        comm: name.into(),
        exe: name.into(),
        ..p(pid, ppid, private, pss)
    }
}

/// `run --watch NGINXPID --watch FPMPID` keeps both servers in one entry:
/// `--instance` sizes the one asked for, from its own processes only, and
/// without it the entry is refused with its instances listed.
#[test]
fn instance_selects_one_server_of_several_watched_together() {
    let procs = [
        named("nginx", 7000, 1, 1000, 2000),
        named("nginx", 7001, 7000, 4000, 5000),
        named("php-fpm8.2", 8000, 1, 2000, 6000),
        named("php-fpm8.2", 8001, 8000, 30_000, 35_000),
        named("php-fpm8.2", 8002, 8000, 20_000, 25_000),
    ];
    let h = watch_of(&["7000", "8000"], &procs);
    let budget = Some(Budget::Kib(500_000));
    let err = input_from_watch(&h, budget, None).unwrap_err();
    assert!(
        err.contains("2 servers were watched together")
            && err.contains("nginx (pid 7000)")
            && err.contains("php-fpm8.2 (pid 8000)")
            && err.contains("--instance PID"),
        "{err}"
    );
    let fpm = compute(&input_from_watch(&h, budget, Some(8000)).unwrap()).unwrap();
    assert_eq!(fpm.server, "PHP-FPM");
    assert_eq!((fpm.processes, fpm.workers), (3, 2));
    assert_eq!(fpm.per_worker_private_kib, 30_000);
    assert!(
        fpm.directives[0].starts_with("pm.max_children = "),
        "{fpm:?}"
    );
    assert!(fpm.source.as_deref().unwrap().contains("instance pid 8000"));
    let ngx = compute(&input_from_watch(&h, budget, Some(7000)).unwrap()).unwrap();
    assert_eq!(ngx.server, "nginx");
    assert_eq!((ngx.processes, ngx.per_worker_private_kib), (2, 4000));
    let err = input_from_watch(&h, budget, Some(9999)).unwrap_err();
    assert!(
        err.contains("no process 9999") && err.contains("pid 8000"),
        "{err}"
    );
    // A worker's PID sizes that worker's subtree only: still a PID of the record.
    assert_eq!(instance_tree(&procs, 8001).len(), 1);
}

/// A zombie child (exited, not reaped) has no memory: it is not a 0 KiB
/// worker in the mean, nor a process in the count, and the report says so.
#[test]
fn zombies_are_not_processes_with_memory() {
    let live = vec![
        p(10, 1, 2000, 4000),
        p(11, 10, 3000, 3500),
        p(12, 10, 3000, 3500),
    ];
    let mut with_zombies = live.clone();
    for pid in [13, 14] {
        with_zombies.push(ProcInfo {
            state: 'Z',
            ..p(pid, 10, 0, 0)
        });
    }
    let inp = |server: Vec<ProcInfo>| SizeInput {
        server,
        budget: Some(Budget::Kib(100_000)),
        ..apache_input(Mpm::Prefork, None)
    };
    let a = compute(&inp(live)).unwrap();
    let b = compute(&inp(with_zombies.clone())).unwrap();
    assert_eq!(b.mean_worker_private_kib, 3000);
    assert_eq!((b.processes, b.workers), (3, 2));
    assert_eq!(
        (b.max_workers, b.fixed_kib, b.per_worker_cost_kib),
        (a.max_workers, a.fixed_kib, a.per_worker_cost_kib)
    );
    assert!(
        b.notes.iter().any(|n| n.contains("2 zombie processes")),
        "{:?}",
        b.notes
    );
    // Only zombies: nothing to size, said as such.
    let only: Vec<ProcInfo> = with_zombies
        .into_iter()
        .filter(|p| p.state == 'Z')
        .collect();
    assert!(compute(&inp(only)).unwrap_err().contains("zombies"));
}

/// `tune --watch` and `size` on the same measurement: the same number. The
/// issue's case: 60 configured, 63 fit without the margin, 57 with it.
#[test]
fn tune_says_what_size_says_at_the_margin() {
    let (w, over) = apache_fit(63_000, 0, 1000, None, 60);
    assert_eq!((w.max_request_workers, over), (57, true));
    assert!(!apache_fit(63_000, 0, 1000, None, 57).1);
    let dir = std::env::temp_dir().join(format!("redline-size-fit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("httpd.conf");
    std::fs::write(
        &conf,
        "LoadModule mpm_prefork_module modules/mod_mpm_prefork.so\nMaxRequestWorkers 60\n",
    )
    .unwrap();
    let r = crate::tune::analyze(
        &conf,
        &crate::tune::TuneOptions {
            server: Some(crate::tune::Server::Apache),
            budget_kib: Some(63_000),
            worker_private_kib: Some(1000),
            static_modules: Some(vec!["core.c".into()]),
            ..Default::default()
        },
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "max_request_workers_over_memory")
        .unwrap();
    assert_eq!(f.level, crate::tune::Level::Warn, "{f:#?}");
    assert!(f.message.contains("above the 57 that fit"), "{f:#?}");
    assert!(f.change.starts_with("MaxRequestWorkers 57\n"), "{f:#?}");
    // size, with the same budget left for the workers and the same worker: 57.
    let inp = SizeInput {
        server: vec![p(10, 1, 0, 0), p(11, 10, 1000, 1000)],
        budget: Some(Budget::Kib(63_000)),
        ..apache_input(Mpm::Prefork, None)
    };
    let s = compute(&inp).unwrap();
    assert_eq!((s.fixed_kib, s.max_workers), (0, 57), "{s:?}");
}
