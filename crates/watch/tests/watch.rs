//! The sampler on fixture trees of `/proc` and `/sys/fs/cgroup` (written
//! here from proc(5) and the kernel's cgroup-v2 documentation): the server's
//! own cgroup v2 (found from a PID or named as a systemd unit), a cgroup
//! shared with other programs (not used), reaped children's CPU, zombies and
//! several instances of one server. The real kernel paths (a cgroup made
//! for a real Apache, a CGI load) are tested in crates/cli/tests/server.rs.

use redline_watch::procfs::{self, Target};
use redline_watch::sampler::{split_instances, Sampler};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Tmp(PathBuf);

impl Tmp {
    fn new(name: &str) -> Tmp {
        let d = std::env::temp_dir().join(format!("redline-watch-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        Tmp(d)
    }
    fn proc(&self) -> PathBuf {
        self.0.join("proc")
    }
    fn cg(&self) -> PathBuf {
        self.0.join("cgroup")
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn write(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// A process: `stat` with utime 0, stime `ticks`, cstime `child_ticks`.
fn process(root: &Path, pid: u32, ppid: u32, state: char, ticks: u64, child_ticks: u64) {
    let d = root.join(pid.to_string());
    write(
        &d.join("stat"),
        &format!("{pid} (apache2) {state} {ppid} {pid} {pid} 0 -1 0 0 0 0 0 0 {ticks} 0 {child_ticks} 20 0 1 0 100 1000 200 0\n"),
    );
    write(&d.join("cmdline"), "/usr/sbin/apache2\0-k\0start\0");
    if state == 'Z' {
        // A zombie's memory files read empty.
        write(&d.join("smaps_rollup"), "");
        write(&d.join("status"), "Name:\tapache2\nState:\tZ (zombie)\n");
        return;
    }
    write(
        &d.join("smaps_rollup"),
        "Rss: 3000 kB\nPss: 2000 kB\nPrivate_Clean: 0 kB\nPrivate_Dirty: 1000 kB\nSwap: 0 kB\n",
    );
    write(
        &d.join("status"),
        "Name:\tapache2\nVmRSS:\t3000 kB\nVmPTE:\t120 kB\nThreads:\t1\n",
    );
}

fn machine(root: &Path) {
    write(
        &root.join("meminfo"),
        "MemTotal: 4000000 kB\nMemAvailable: 3000000 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
    );
    write(&root.join("vmstat"), "pswpin 0\npswpout 0\n");
    write(&root.join("loadavg"), "0.10 0.10 0.10 1/100 42\n");
}

/// A v2 root (pure unified) with one group: processes, memory and CPU.
fn v2_group(cg: &Path, path: &str, pids: &[u32], usage_usec: u64) {
    write(&cg.join("cgroup.controllers"), "cpu memory pids\n");
    let d = cg.join(path.trim_start_matches('/'));
    let procs: String = pids.iter().map(|p| format!("{p}\n")).collect();
    write(&d.join("cgroup.procs"), &procs);
    write(
        &d.join("memory.current"),
        &format!("{}\n", 50 * 1024 * 1024),
    );
    write(&d.join("memory.peak"), &format!("{}\n", 80 * 1024 * 1024));
    write(
        &d.join("cpu.stat"),
        &format!("usage_usec {usage_usec}\nuser_usec 0\nsystem_usec 0\n"),
    );
    write(&d.join("pids.current"), &format!("{}\n", pids.len()));
    write(&d.join("pids.peak"), "31\n");
}

fn sampler(t: &Tmp, targets: Vec<Target>) -> Sampler {
    Sampler::with_root(t.proc(), targets, Duration::from_millis(100)).with_cgroup_root(t.cg())
}

#[test]
fn own_cgroup_v2_gives_processes_cpu_and_memory() {
    let t = Tmp::new("v2");
    let (p, cg) = (t.proc(), t.cg());
    machine(&p);
    let unit = "/system.slice/apache2.service";
    for (pid, ppid, state) in [(100, 1, 'S'), (101, 100, 'S'), (102, 100, 'Z')] {
        process(&p, pid, ppid, state, 5, 0);
        write(&p.join(format!("{pid}/cgroup")), &format!("0::{unit}\n"));
    }
    // PID 103 is in the cgroup but exited between listing and reading (no /proc entry).
    v2_group(&cg, unit, &[100, 101, 102, 103], 1_000_000);

    for target in [Target::Pid(100), Target::Unit("apache2.service".into())] {
        let mut s = sampler(&t, vec![target.clone()]);
        s.sample();
        // Half a CPU-second more in the group: the CPU of the interval comes from it.
        v2_group(&cg, unit, &[100, 101, 102, 103], 1_500_000);
        std::thread::sleep(Duration::from_millis(20));
        let s2 = s.sample().clone();
        v2_group(&cg, unit, &[100, 101, 102, 103], 1_000_000);
        let w = s.finish();
        let h = &w.hosts[0];
        assert_eq!(
            h.cgroup.as_deref(),
            Some(&*format!("v2 {unit}")),
            "{target:?}"
        );
        // Processes from cgroup.procs: the short-lived one the /proc listing missed too.
        assert_eq!(s2.processes, 4);
        assert_eq!(s2.cgroup_memory_kib, Some(50 * 1024));
        assert_eq!(h.cgroup_memory_peak_kib, Some(80 * 1024));
        assert_eq!(h.cgroup_tasks_peak, Some(31));
        let dt = s2.t - h.samples[0].t;
        let want = 0.5 / dt * 100.0;
        assert!(
            (s2.cpu_percent - want).abs() < 1e-6,
            "{} vs {want}",
            s2.cpu_percent
        );
        // The zombie has no memory left, and nothing was estimated.
        assert!(h.pss_exact, "a zombie must not mark the watch estimated");
        assert_eq!(s2.private_kib, 2000);
        let text = redline_watch::render_text(&w);
        assert!(
            text.contains("cgroup          v2 /system.slice/apache2.service"),
            "{text}"
        );
        assert!(!text.contains("estimated"), "{text}");
    }
}

#[test]
fn a_cgroup_shared_with_other_programs_is_not_the_servers() {
    let t = Tmp::new("shared");
    let (p, cg) = (t.proc(), t.cg());
    machine(&p);
    let path = "/user.slice/session-1.scope";
    process(&p, 100, 1, 'S', 5, 0);
    process(&p, 101, 100, 'S', 5, 0);
    // A shell in the same group, not the server's child.
    process(&p, 200, 1, 'S', 5, 0);
    for pid in [100, 101, 200] {
        write(&p.join(format!("{pid}/cgroup")), &format!("0::{path}\n"));
    }
    v2_group(&cg, path, &[100, 101, 200], 1_000_000);
    let mut s = sampler(&t, vec![Target::Pid(100)]);
    s.sample();
    let s2 = s.sample().clone();
    let w = s.finish();
    assert_eq!(w.hosts[0].cgroup, None);
    assert_eq!(s2.processes, 2);
    assert_eq!(s2.cgroup_memory_kib, None);
    // The root cgroup is nobody's own either.
    write(&p.join("100/cgroup"), "0::/\n");
    write(&p.join("101/cgroup"), "0::/\n");
    let mut s = sampler(&t, vec![Target::Pid(100)]);
    s.sample();
    assert_eq!(s.finish().hosts[0].cgroup, None);
}

#[test]
fn reaped_children_cpu_is_counted_once() {
    let t = Tmp::new("reaped");
    let p = t.proc();
    machine(&p);
    process(&p, 100, 1, 'S', 10, 0);
    process(&p, 101, 100, 'S', 5, 0);
    let mut s = sampler(&t, vec![Target::Pid(100)]);
    let t0 = s.sample().t;
    // Worker 101 used 7 more ticks and exited; the parent reaped it (5 + 7)
    // and a CGI child that lived 20 ticks between the samples.
    fs::remove_dir_all(p.join("101")).unwrap();
    process(&p, 100, 1, 'S', 10, 12 + 20);
    std::thread::sleep(Duration::from_millis(20));
    let s2 = s.sample().clone();
    let ticks = procfs::clock_ticks() as f64;
    let used = s2.cpu_percent / 100.0 * (s2.t - t0) * ticks;
    assert!((used - 27.0).abs() < 1e-6, "{used} ticks counted, 27 used");
    assert_eq!(s2.processes, 1);
}

#[test]
fn kernel_memory_is_read_per_process() {
    let t = Tmp::new("kernel");
    let p = t.proc();
    process(&p, 100, 1, 'S', 0, 0);
    process(&p, 101, 100, 'Z', 0, 0);
    let a = procfs::read_process(&p, 100).unwrap();
    assert_eq!(a.kernel_kib, 120 + procfs::KERNEL_STACK_KIB);
    assert!(a.exact);
    let z = procfs::read_process(&p, 101).unwrap();
    assert_eq!(
        (z.state, z.private_kib, z.kernel_kib, z.exact),
        ('Z', 0, 0, true)
    );
    // Gone: skipped.
    assert!(procfs::read_process(&p, 555).is_none());
}

#[test]
fn several_instances_are_kept_apart_with_their_addresses() {
    let t = Tmp::new("instances");
    let p = t.proc();
    machine(&p);
    for (pid, ppid) in [(200, 1), (201, 200), (300, 1), (301, 300), (302, 300)] {
        process(&p, pid, ppid, 'S', 0, 0);
    }
    // 127.0.0.1:8080 and [::]:80, each held by one main process.
    write(
        &p.join("net/tcp"),
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7001 1 0 100 0 0 10 0\n",
    );
    write(
        &p.join("net/tcp6"),
        "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7002 1 0 100 0 0 10 0\n",
    );
    for (pid, inode) in [(200, 7001), (300, 7002)] {
        let fd = p.join(format!("{pid}/fd"));
        fs::create_dir_all(&fd).unwrap();
        std::os::unix::fs::symlink(format!("socket:[{inode}]"), fd.join("3")).unwrap();
    }
    let all = procfs::all_processes(&p);
    let inst = procfs::instances(&p, &all, "apache2");
    assert_eq!(inst.len(), 2);
    assert_eq!(inst[0].describe(), "pid 200 (parent 1, 127.0.0.1:8080)");
    assert_eq!(inst[1].describe(), "pid 300 (parent 1, [::]:80)");
    let groups = split_instances(&p, &all, &[Target::Name("apache2".into())]);
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].0, vec![Target::Pid(200)]);
    assert_eq!(
        groups[1].1,
        vec!["apache2 pid 300 (parent 1, [::]:80)".to_string()]
    );
    // Each instance's processes, kept apart.
    let mut a = Sampler::with_labels(
        p.clone(),
        groups[1].0.clone(),
        groups[1].1.clone(),
        Duration::from_millis(100),
    )
    .with_cgroup_root(t.cg());
    assert_eq!(a.sample().processes, 3);
    // One instance: not split.
    let one = split_instances(&p, &all, &[Target::Pid(200), Target::Name("nginx".into())]);
    assert_eq!(one.len(), 1);
}

/// The server's own cgroup v2 gives its limits and saturation: memory.max,
/// memory.events (oom_kill, max, high), cpu.max and throttled_usec, its own
/// PSI files (the machine's are not read then), and the CPUs its processes
/// may use from their affinity; counters count per interval.
#[test]
fn cgroup_v2_limits_oom_kills_throttling_and_its_own_pressure() {
    let t = Tmp::new("v2-sat");
    let (p, cg) = (t.proc(), t.cg());
    machine(&p);
    // The machine's PSI, which must not be read for a server with its own.
    write(
        &p.join("pressure/cpu"),
        "some avg10=90.00 avg60=0 avg300=0 total=999999999\n",
    );
    let unit = "/system.slice/apache2.service";
    for pid in [100, 101] {
        process(&p, pid, if pid == 100 { 1 } else { 100 }, 'S', 5, 0);
        write(&p.join(format!("{pid}/cgroup")), &format!("0::{unit}\n"));
        write(
            &p.join(format!("{pid}/status")),
            "Name:\tapache2\nVmRSS:\t3000 kB\nThreads:\t1\nCpus_allowed_list:\t2-3\n",
        );
        write(&p.join(format!("{pid}/task/{pid}/schedstat")), "1000 0 5\n");
    }
    v2_group(&cg, unit, &[100, 101], 1_000_000);
    let d = cg.join(unit.trim_start_matches('/'));
    let at = |oom: u64, max: u64, thr: u64, psi_cpu: u64, psi_mem: u64, delay: u64| {
        write(&d.join("memory.max"), &format!("{}\n", 160 * 1024 * 1024));
        write(
            &d.join("memory.events"),
            &format!("low 0\nhigh 0\nmax {max}\noom 3\noom_kill {oom}\n"),
        );
        write(&d.join("cpu.max"), "150000 100000\n");
        write(
            &d.join("cpu.stat"),
            &format!("usage_usec 1000000\nuser_usec 0\nsystem_usec 0\nnr_throttled 4\nthrottled_usec {thr}\n"),
        );
        write(
            &d.join("cpu.pressure"),
            &format!("some avg10=0 avg60=0 avg300=0 total={psi_cpu}\nfull avg10=0 avg60=0 avg300=0 total=0\n"),
        );
        write(
            &d.join("memory.pressure"),
            &format!("some avg10=0 avg60=0 avg300=0 total={psi_mem}\nfull avg10=0 avg60=0 avg300=0 total=0\n"),
        );
        for pid in [100, 101] {
            write(
                &p.join(format!("{pid}/task/{pid}/schedstat")),
                &format!("1000 {delay} 5\n"),
            );
        }
    };
    at(2, 10, 0, 0, 0, 0);
    let mut s = sampler(&t, vec![Target::Pid(100)]);
    s.sample();
    std::thread::sleep(Duration::from_millis(50));
    at(7, 25, 20_000, 30_000, 10_000, 40_000_000);
    let s2 = s.sample().clone();
    let w = s.finish();
    let h = &w.hosts[0];
    let dt = s2.t - h.samples[0].t;
    assert_eq!(h.cgroup_memory_limit_kib, Some(160 * 1024));
    assert_eq!(h.cpu_quota, Some(1.5));
    assert_eq!(h.cpus_allowed.as_deref(), Some("2-3"));
    assert_eq!(h.cpu_capacity(), 1.5);
    assert_eq!(h.psi_source.as_deref(), Some("cgroup"));
    assert_eq!(s2.oom_kills, 5);
    assert_eq!(s2.memory_limit_hits, 15);
    let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-6 * b.max(1.0);
    assert!(
        close(s2.throttled_per_s, 0.02 / dt),
        "{:?}",
        s2.throttled_per_s
    );
    assert!(close(s2.psi_cpu, (3.0 / dt).min(100.0)), "{:?}", s2.psi_cpu);
    assert!(
        close(s2.psi_memory, (1.0 / dt).min(100.0)),
        "{:?}",
        s2.psi_memory
    );
    // Two threads waited 40 ms each.
    assert!(
        close(s2.run_delay_per_s, 0.08 / dt),
        "{:?}",
        s2.run_delay_per_s
    );
    let text = redline_watch::render_text(&w);
    assert!(
        text.contains("it may use CPUs 2-3, quota 1.50 CPUs"),
        "{text}"
    );
    assert!(
        text.contains("limit 160.0 MiB, 5 OOM kills, 15 limit hits"),
        "{text}"
    );
}

/// cgroup v1 (a hybrid host: memory, cpu and cpuacct controllers apart):
/// memory.limit_in_bytes, memory.oom_control's oom_kill, memory.failcnt,
/// cpu.cfs_quota_us / cpu.cfs_period_us and cpu.stat's throttled_time.
#[test]
fn cgroup_v1_limits_oom_kills_and_quota() {
    let t = Tmp::new("v1-sat");
    let (p, cg) = (t.proc(), t.cg());
    machine(&p);
    let path = "/redline-test";
    for pid in [100, 101] {
        process(&p, pid, if pid == 100 { 1 } else { 100 }, 'S', 5, 0);
        write(
            &p.join(format!("{pid}/cgroup")),
            &format!("7:memory:{path}\n6:cpu:{path}\n5:cpuacct:{path}\n0::/\n"),
        );
    }
    for ctl in ["memory", "cpu", "cpuacct"] {
        write(&cg.join(ctl).join("cgroup.procs"), "1\n");
        write(
            &cg.join(ctl).join("redline-test/cgroup.procs"),
            "100\n101\n",
        );
    }
    let m = cg.join("memory/redline-test");
    let c = cg.join("cpu/redline-test");
    write(
        &m.join("memory.usage_in_bytes"),
        &format!("{}\n", 150 * 1024 * 1024),
    );
    write(
        &m.join("memory.limit_in_bytes"),
        &format!("{}\n", 160 * 1024 * 1024),
    );
    write(
        &cg.join("cpuacct/redline-test/cpuacct.usage"),
        "1000000000\n",
    );
    write(&c.join("cpu.cfs_period_us"), "100000\n");
    write(&c.join("cpu.cfs_quota_us"), "50000\n");
    let at = |oom: u64, fail: u64, thr_ns: u64| {
        write(
            &m.join("memory.oom_control"),
            &format!("oom_kill_disable 0\nunder_oom 0\noom_kill {oom}\n"),
        );
        write(&m.join("memory.failcnt"), &format!("{fail}\n"));
        write(
            &c.join("cpu.stat"),
            &format!("nr_periods 10\nnr_throttled 3\nthrottled_time {thr_ns}\n"),
        );
    };
    at(0, 100, 0);
    let mut s = sampler(&t, vec![Target::Pid(100)]);
    s.sample();
    std::thread::sleep(Duration::from_millis(50));
    at(227, 5100, 30_000_000);
    let s2 = s.sample().clone();
    let w = s.finish();
    let h = &w.hosts[0];
    assert_eq!(h.cgroup_memory_limit_kib, Some(160 * 1024));
    assert_eq!(h.cpu_quota, Some(0.5));
    assert_eq!(s2.oom_kills, 227);
    assert_eq!(s2.memory_limit_hits, 5000);
    let dt = s2.t - h.samples[0].t;
    assert!((s2.throttled_per_s.unwrap() - 0.03 / dt).abs() < 1e-6);
    assert_eq!(h.psi_source.as_deref(), Some("machine"));
    // An unlimited v1 group (the page-rounded i64::MAX) has no limit.
    write(&m.join("memory.limit_in_bytes"), "9223372036854771712\n");
    let mut s = sampler(&t, vec![Target::Pid(100)]);
    s.sample();
    assert_eq!(s.finish().hosts[0].cgroup_memory_limit_kib, None);
}
