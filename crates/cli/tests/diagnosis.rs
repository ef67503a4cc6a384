//! The diagnosis held to the server's own evidence (issue 30, point 6): one
//! test per real-server setup of `redline_testkit::setups`, each with one
//! known limit. Every test asserts (a) that the server's own evidence shows
//! the limit (its error-log line, its cgroup's OOM counters, the CPU it was
//! pinned to, tc's counters, the busy process's CPU time), so the setup
//! really has that bottleneck, and (b) that the run record's
//! `diagnosis.resource` names it.
//!
//! A missing server or tool skips the test with a note locally and fails it
//! under CI=true; so does a setup that needs root (cgroups, network
//! namespaces) when not root. The setups that pin CPUs, shape the link,
//! measure the client or read host-wide counters (the listen backlog's
//! ListenOverflows, which every other setup's run would also see) take the
//! lock exclusively, so nothing else of this file runs beside them; the
//! others share it.

use redline_testkit::setups::{self, Running};
use std::sync::RwLock;

static CPU: RwLock<()> = RwLock::new(());

fn check(name: &str) {
    let setup = setups::by_name(name).expect("a setup of that name");
    let _shared;
    let _alone;
    if setup.exclusive {
        _alone = CPU.write().unwrap_or_else(|e| e.into_inner());
    } else {
        _shared = CPU.read().unwrap_or_else(|e| e.into_inner());
    }
    let Some(mut running): Option<Running> = setup.start() else {
        return;
    };
    let redline = env!("CARGO_BIN_EXE_redline");
    let cmd = running.command_line(redline);
    let out = running.run(redline);
    let gone = running.gone();
    drop(running); // servers stopped, cgroups and namespaces removed
    assert!(
        !out.record.is_null(),
        "{name}: no run record from {cmd} (exit {:?}): {}",
        out.code,
        out.stderr
    );
    assert!(
        out.evidence.holds,
        "{name}: the server's own evidence does not show the limit: {}\n(run: {cmd}; servers all running at the end: {})",
        out.evidence.line,
        gone.is_none()
    );
    let d = &out.record["diagnosis"];
    assert_eq!(
        out.resource(),
        setup.expected,
        "{name}: the diagnosis names {:?}, the server's own evidence says {}: {}\ndiagnosis: {d}\nwarnings: {}\nrun: {cmd}",
        out.resource(),
        setup.expected,
        out.evidence.line,
        out.record["warnings"]
    );
}

#[test]
fn apache_prefork_pool() {
    check("apache_prefork_pool");
}

#[test]
fn apache_prefork_keepalive() {
    check("apache_prefork_keepalive");
}

#[test]
fn apache_event_keepalive() {
    check("apache_event_keepalive");
}

#[test]
fn nginx_worker_connections() {
    check("nginx_worker_connections");
}

#[test]
fn php_fpm_pool() {
    check("php_fpm_pool");
}

#[test]
fn php_fpm_cpu_pinned() {
    check("php_fpm_cpu_pinned");
}

#[test]
fn apache_cgroup_memory() {
    check("apache_cgroup_memory");
}

#[test]
fn nginx_proxy_slow_backend() {
    check("nginx_proxy_slow_backend");
}

#[test]
fn listen_backlog() {
    check("listen_backlog");
}

#[test]
fn shaped_link() {
    check("shaped_link");
}

#[test]
fn starved_client() {
    check("starved_client");
}

#[test]
fn nginx_cpu() {
    check("nginx_cpu");
}

/// Every setup has its test here (a new setup needs one).
#[test]
fn every_setup_has_a_test() {
    let me = include_str!("diagnosis.rs");
    for s in setups::all() {
        assert!(
            me.contains(&format!("fn {}()", s.name)),
            "no test for setup {}",
            s.name
        );
    }
}
