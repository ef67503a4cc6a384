//! Unit tests of `run.rs` and `run/warnings.rs`: shares, `/proc` parsing.

use super::share;
use super::warnings as w;
#[test]
fn netstat_counters_are_found_by_name() {
    let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPSynRetrans TCPOrigDataSent\n\
                TcpExt: 0 17 17 42 9000\n\
                IpExt: InNoRoutes InTruncatedPkts\n\
                IpExt: 0 0\n";
    let c = w::parse_netstat(text).expect("counters");
    assert_eq!(c.syn_retransmits, 42);
    assert_eq!(c.listen_overflows, 17);
    // A kernel without the counter, or a garbled file, gives nothing.
    assert_eq!(
        w::parse_netstat("TcpExt: ListenOverflows\nTcpExt: 3\n"),
        None
    );
    assert_eq!(w::parse_netstat("TcpExt: TCPSynRetrans\nTcpExt: x\n"), None);
    assert_eq!(w::parse_netstat(""), None);
    // The live file has it (Linux).
    assert!(w::tcp_counters().is_some());
}

#[test]
fn steal_is_summed_over_the_allowed_cpus_only() {
    let stat = "cpu  2152767 129706 510652 1577953 19881 0 132736 320663 0 0\n\
                cpu0 1114066 56027 264106 802811 12048 0 68030 162304 0 0\n\
                cpu1 1082892 73678 250361 827181 7936 0 65926 159624 0 0\n\
                cpu2 1 2 3 4 5 6 7 1000 0 0\n\
                intr 123 4 5\nctxt 99\n";
    assert_eq!(w::steal_ticks(stat, |_| true), 162304 + 159624 + 1000);
    assert_eq!(w::steal_ticks(stat, |n| n == 1), 159624);
    assert_eq!(w::steal_ticks(stat, |_| false), 0);
    // A kernel too old to report steal (fewer fields) counts nothing.
    assert_eq!(w::steal_ticks("cpu0 1 2 3 4\n", |_| true), 0);
}

#[cfg(target_os = "linux")]
#[test]
fn steal_time_is_read_and_never_goes_back() {
    let a = w::steal_seconds().expect("/proc/stat has steal time");
    let b = w::steal_seconds().expect("/proc/stat has steal time");
    assert!(a >= 0.0 && b >= a, "{a} then {b}");
}

#[test]
fn shares_add_up() {
    for total in [0u64, 1, 7, 1000, 1001] {
        for parts in 1..9u64 {
            let s: u64 = (0..parts).map(|i| share(total, parts, i)).sum();
            assert_eq!(s, total);
        }
    }
}
