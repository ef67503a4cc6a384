//! What a request would take on Lighthouse's reference link instead of the
//! link the page was loaded over: Lighthouse's throttling presets (desktop
//! 40 ms / 10 Mbit/s, mobile 150 ms / 1.6 Mbit/s) and the TCP model of its
//! simulator, Lantern (`TCPConnection.simulateDownloadUntil`, read from
//! Lighthouse 12.8's trace engine): DNS, TCP and TLS round trips on a new
//! connection, one round trip and the server's own time to the first byte,
//! then slow start from 10 segments of 1,460 bytes, doubling each round
//! trip up to what the link's share carries in one. On loopback every
//! render-blocking resource loads in a few milliseconds; this is what it
//! costs a visitor on an ordinary link, and what Lighthouse charges it.

/// A reference link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// Round-trip time (ms).
    pub rtt_ms: f64,
    /// Throughput (kilobits per second, Lighthouse's 1,024 bits).
    pub kbps: f64,
    /// How much slower the CPU is than the traced one (Lighthouse's
    /// `cpuSlowdownMultiplier`).
    pub cpu_slowdown: f64,
    /// How the reports name it.
    pub name: &'static str,
}

/// Lighthouse's desktop preset (`desktopDense4G`).
pub const DESKTOP: Link = Link {
    rtt_ms: 40.0,
    kbps: 10_240.0,
    cpu_slowdown: 1.0,
    name: "a 40 ms / 10 Mbit/s link (Lighthouse's desktop throttling)",
};

/// Lighthouse's mobile preset (`mobileSlow4G`).
pub const MOBILE: Link = Link {
    rtt_ms: 150.0,
    kbps: 1_638.4,
    cpu_slowdown: 4.0,
    name: "a 150 ms / 1.6 Mbit/s link (Lighthouse's mobile throttling)",
};

/// Lantern's initial congestion window (segments).
const INITIAL_CWND: u32 = 10;
const SEGMENT: f64 = 1460.0;
/// Lantern's server response time when it has none from the load.
pub const DEFAULT_SERVER_MS: f64 = 30.0;
/// Lantern's DNS lookup: two round trips, once per host.
const DNS_RTTS: f64 = 2.0;
/// Connections Lantern opens per HTTP/1.1 origin.
const H1_CONNECTIONS: usize = 6;
/// Lantern's cap on requests in flight.
const MAX_CONCURRENT: usize = 10;
/// A layout task slows down half as much as the CPU (Lantern's
/// `DEFAULT_LAYOUT_TASK_MULTIPLIER`).
const LAYOUT_MULTIPLIER: f64 = 0.5;
/// A task longer than this is not CPU-bound (Lantern's cap, ms).
const MAX_CPU_MS: f64 = 10_000.0;

/// One TCP connection's state (Lantern's `TCPConnection`).
#[derive(Clone, Debug)]
struct Conn {
    warm: bool,
    tls: bool,
    h2: bool,
    cwnd: u32,
    server_ms: f64,
    /// The link's share this connection has (bits per second).
    throughput: f64,
    /// HTTP/2: bytes of the next response already received.
    h2_overflow: f64,
    in_use: bool,
}

/// What `download_until` reports.
struct Step {
    elapsed: f64,
    bytes: f64,
    extra: f64,
    cwnd: u32,
}

impl Conn {
    fn max_cwnd(&self, rtt: f64) -> u32 {
        let bytes_per_rtt = self.throughput / 8.0 * rtt / 1000.0;
        (bytes_per_rtt / SEGMENT).floor() as u32
    }

    /// Lantern's `simulateDownloadUntil`: `bytes` more over this
    /// connection, `already` ms into the request, at most `max` ms more.
    fn download_until(&self, rtt: f64, bytes: f64, already: f64, max: f64, dns: f64) -> Step {
        let mut bytes = bytes;
        if self.warm && self.h2 {
            bytes -= self.h2_overflow;
        }
        let one_way = rtt / 2.0;
        let max_cwnd = self.max_cwnd(rtt);
        let handshake_and_request = if self.warm {
            one_way
        } else {
            dns + 3.0 * one_way + if self.tls { rtt } else { 0.0 }
        };
        let ttfb = if self.warm && self.h2 {
            0.0
        } else {
            handshake_and_request + self.server_ms + one_way
        };
        let for_ttfb = (ttfb - already).max(0.0);
        let max_download = max - for_ttfb;
        let mut cwnd = self.cwnd.min(max_cwnd);
        let mut total = if for_ttfb > 0.0 {
            f64::from(cwnd) * SEGMENT
        } else {
            0.0
        };
        let mut download = 0.0;
        let mut left = bytes - total;
        // Bounded: the window is at least one segment a round trip.
        let mut rounds = 0u32;
        while left > 0.0 && download <= max_download && rounds < 10_000_000 {
            rounds += 1;
            download += rtt;
            cwnd = cwnd.saturating_mul(2).min(max_cwnd).max(1);
            let got = f64::from(cwnd) * SEGMENT;
            total += got;
            left -= got;
        }
        Step {
            elapsed: for_ttfb + download,
            bytes: total.min(bytes).max(0.0),
            extra: if self.h2 {
                (total - bytes).max(0.0)
            } else {
                0.0
            },
            cwnd,
        }
    }
}

/// A request of the simulated load.
#[derive(Clone, Debug)]
pub struct Req {
    /// Scheme, host and port.
    pub origin: String,
    /// Host name (one DNS lookup each).
    pub host: String,
    /// https.
    pub tls: bool,
    /// Fetched over HTTP/2.
    pub h2: bool,
    /// Bytes on the wire, head and body.
    pub bytes: u64,
    /// The request it waits for (index; the first request waits for none).
    pub after: Option<usize>,
    /// Where it starts among those ready at once: the load's own start
    /// time plus Lantern's priority penalty (ms).
    pub order: f64,
    /// The server's own time to answer (ms).
    pub server_ms: f64,
    /// A main-thread task of this long runs after the request it waits
    /// for has ended, and this request waits for it too: a script waits
    /// for the parser's task that found it (Lantern links scripts to the
    /// CPU task that sent them), a stylesheet for nothing (0).
    pub delay_ms: f64,
}

/// What a parser task takes before the scripts it finds are requested
/// when there is no trace to read it from (Lantern takes it from the
/// trace; without `--browser` redline has none): a nominal 1 ms.
pub const PARSE_MS: f64 = 1.0;

/// The priority penalty Lantern adds to a request's start position: a
/// stylesheet (very high) none, a head script (high) 250 ms.
pub fn order(start_ms: f64, script: bool) -> f64 {
    start_ms + if script { 250.0 } else { 0.0 }
}

/// What a node of the simulated graph is.
#[derive(Clone, Debug)]
pub enum Work {
    /// A request: origin, host, https, HTTP/2, bytes, the server's time.
    Net {
        /// Scheme, host and port.
        origin: String,
        /// Host name (one DNS lookup each).
        host: String,
        /// https.
        tls: bool,
        /// Fetched over HTTP/2.
        h2: bool,
        /// Bytes on the wire, head and body.
        bytes: u64,
        /// The server's own time to answer (ms).
        server_ms: f64,
    },
    /// A main-thread task (Lantern's CPU node): its duration as traced
    /// (ms); a task that laid the page out runs at half the CPU slowdown.
    Cpu {
        /// Traced duration (ms).
        ms: f64,
        /// It ran a layout.
        layout: bool,
    },
}

/// A node of the simulated graph (Lantern's `BaseNode`): the work, the
/// nodes it waits for, and where it starts among those ready at once.
#[derive(Clone, Debug)]
pub struct Node {
    /// What it does.
    pub work: Work,
    /// The nodes (indices) that must end before it starts.
    pub deps: Vec<usize>,
    /// Its start position (ms): a task's traced start, a request's start
    /// plus Lantern's priority penalty ([`order`]).
    pub order: f64,
}

struct Flight {
    node: usize,
    conn: Option<(usize, usize)>,
    start: f64,
    elapsed: f64,
    overshoot: f64,
    bytes: f64,
    estimate: f64,
}

impl Link {
    fn max_concurrent(&self) -> usize {
        let bytes_per_s = 1000.0 / self.rtt_ms * SEGMENT;
        let saturated = (self.kbps * 1024.0 / (bytes_per_s * 8.0)).floor() as usize;
        saturated.clamp(1, MAX_CONCURRENT)
    }

    /// (start, end) in ms of each of `reqs` on this link: a request starts
    /// when the one it waits for has ended (and, with a `delay_ms`, a
    /// main-thread task of that length after it), as [`Link::simulate_graph`].
    pub fn simulate(&self, reqs: &[Req]) -> Option<Vec<(f64, f64)>> {
        let mut nodes: Vec<Node> = reqs
            .iter()
            .map(|r| Node {
                work: Work::Net {
                    origin: r.origin.clone(),
                    host: r.host.clone(),
                    tls: r.tls,
                    h2: r.h2,
                    bytes: r.bytes,
                    server_ms: r.server_ms,
                },
                deps: r.after.into_iter().collect(),
                order: r.order,
            })
            .collect();
        for (i, r) in reqs.iter().enumerate() {
            if r.delay_ms > 0.0 {
                nodes.push(Node {
                    work: Work::Cpu {
                        ms: r.delay_ms,
                        layout: false,
                    },
                    deps: r.after.into_iter().collect(),
                    order: 0.0,
                });
                let cpu = nodes.len() - 1;
                nodes[i].deps.push(cpu);
            }
        }
        let mut t = self.simulate_graph(&nodes, &[])?;
        t.truncate(reqs.len());
        t.into_iter().collect()
    }

    /// (start, end) in ms of each node of `nodes` on this link (none: not
    /// reached), Lantern's `Simulator.simulate`: the first node without
    /// dependencies starts at 0; a node is ready when every node it waits
    /// for has ended; the ready ones start in start-position order, a
    /// task when no other task runs (one main thread), a request when
    /// fewer than ten are in flight and its origin has a free connection
    /// (six per HTTP/1.1 origin, one per HTTP/2 origin; the one with the
    /// largest window, a connection's window and warmth carried from
    /// request to request), the link shared evenly by the requests in
    /// flight. `connections` overrides the connections of an origin
    /// (Lantern opens one per request it estimates went over a new
    /// connection, at least six, or one on HTTP/2). None when the nodes do
    /// not form such a graph.
    pub fn simulate_graph(
        &self,
        nodes: &[Node],
        connections: &[(String, usize)],
    ) -> Option<Vec<Option<(f64, f64)>>> {
        let rtt = self.rtt_ms;
        let bps = self.kbps * 1024.0;
        // Connections by origin.
        let mut origins: Vec<String> = Vec::new();
        let mut pools: Vec<Vec<Conn>> = Vec::new();
        for n in nodes {
            let Work::Net {
                origin,
                tls,
                h2,
                server_ms,
                ..
            } = &n.work
            else {
                continue;
            };
            if origins.contains(origin) {
                continue;
            }
            let c = Conn {
                warm: false,
                tls: *tls,
                h2: *h2,
                cwnd: INITIAL_CWND,
                server_ms: *server_ms,
                throughput: bps,
                h2_overflow: 0.0,
                in_use: false,
            };
            let least = if *h2 { 1 } else { H1_CONNECTIONS };
            let n = connections
                .iter()
                .find(|(o, _)| o == origin)
                .map_or(least, |(_, n)| (*n).max(least));
            origins.push(origin.clone());
            pools.push(vec![c; n]);
        }
        let pool_of = |o: &str| origins.iter().position(|x| x == o).unwrap_or(0);
        let mut dns: Vec<(String, f64)> = Vec::new();
        let lookup = |host: &str, at: f64, dns: &mut Vec<(String, f64)>| -> f64 {
            let full = DNS_RTTS * rtt;
            match dns.iter_mut().find(|(h, _)| h == host) {
                Some((_, resolved)) => {
                    let t = (*resolved - at).max(0.0).min(full);
                    *resolved = resolved.min(at + t);
                    t
                }
                None => {
                    dns.push((host.to_string(), at + full));
                    full
                }
            }
        };
        let cpu_ms = |ms: f64, layout: bool| {
            let m = if layout {
                self.cpu_slowdown * LAYOUT_MULTIPLIER
            } else {
                self.cpu_slowdown
            };
            (ms * m).round().min(MAX_CPU_MS)
        };
        let mut out: Vec<Option<(f64, f64)>> = vec![None; nodes.len()];
        let mut done = vec![false; nodes.len()];
        // The root: the first node that waits for none.
        let root = nodes.iter().position(|n| n.deps.is_empty())?;
        let mut ready: Vec<usize> = vec![root];
        let mut flying: Vec<Flight> = Vec::new();
        let mut now = 0.0;
        for _ in 0..100_000 {
            if ready.is_empty() && flying.is_empty() {
                break;
            }
            ready.sort_by(|&a, &b| nodes[a].order.total_cmp(&nodes[b].order));
            let mut k = 0;
            while k < ready.len() {
                let i = ready[k];
                let conn = match &nodes[i].work {
                    Work::Cpu { .. } => {
                        if flying.iter().any(|f| f.conn.is_none()) {
                            k += 1;
                            continue;
                        }
                        None
                    }
                    Work::Net { origin, .. } => {
                        let in_flight = flying.iter().filter(|f| f.conn.is_some()).count();
                        if in_flight >= self.max_concurrent() {
                            k += 1;
                            continue;
                        }
                        let p = pool_of(origin);
                        let best = pools[p]
                            .iter()
                            .enumerate()
                            .filter(|(_, c)| !c.in_use)
                            .max_by_key(|(n, c)| (c.cwnd, std::cmp::Reverse(*n)))
                            .map(|(n, _)| n);
                        match best {
                            Some(c) => {
                                pools[p][c].in_use = true;
                                Some((p, c))
                            }
                            None => {
                                k += 1;
                                continue;
                            }
                        }
                    }
                };
                flying.push(Flight {
                    node: i,
                    conn,
                    start: now,
                    elapsed: 0.0,
                    overshoot: 0.0,
                    bytes: 0.0,
                    estimate: 0.0,
                });
                ready.remove(k);
            }
            if flying.is_empty() {
                return None;
            }
            let in_flight = flying.iter().filter(|f| f.conn.is_some()).count();
            let share = bps / in_flight.max(1) as f64;
            for f in &flying {
                if let Some((p, c)) = f.conn {
                    pools[p][c].throughput = share;
                }
            }
            let mut min = f64::INFINITY;
            for f in &mut flying {
                f.estimate = match (&nodes[f.node].work, f.conn) {
                    (Work::Cpu { ms, layout }, _) => cpu_ms(*ms, *layout) - f.elapsed,
                    (Work::Net { host, bytes, .. }, Some((p, c))) => {
                        let d = lookup(host, f.start, &mut dns);
                        let s = pools[p][c].download_until(
                            rtt,
                            *bytes as f64 - f.bytes,
                            f.elapsed,
                            f64::INFINITY,
                            d,
                        );
                        s.elapsed + f.overshoot
                    }
                    (Work::Net { .. }, None) => return None,
                };
                min = min.min(f.estimate);
            }
            if !min.is_finite() {
                return None;
            }
            now += min;
            let mut k = 0;
            while k < flying.len() {
                let f = &mut flying[k];
                let finished = f.estimate == min;
                if let (Work::Net { host, bytes, .. }, Some((p, c))) = (&nodes[f.node].work, f.conn)
                {
                    let d = lookup(host, f.start, &mut dns);
                    let conn = &mut pools[p][c];
                    let s = conn.download_until(
                        rtt,
                        *bytes as f64 - f.bytes,
                        f.elapsed,
                        min - f.overshoot,
                        d,
                    );
                    conn.cwnd = s.cwnd;
                    if conn.h2 {
                        conn.h2_overflow = s.extra;
                    }
                    if finished {
                        conn.warm = true;
                        conn.in_use = false;
                    } else {
                        f.elapsed += s.elapsed;
                        f.overshoot += s.elapsed - min;
                        f.bytes += s.bytes;
                    }
                } else if !finished {
                    f.elapsed += min;
                }
                if !finished {
                    k += 1;
                    continue;
                }
                let f = flying.remove(k);
                out[f.node] = Some((f.start, now));
                done[f.node] = true;
                for (j, o) in nodes.iter().enumerate() {
                    if o.deps.contains(&f.node)
                        && !done[j]
                        && !ready.contains(&j)
                        && !flying.iter().any(|g| g.node == j)
                        && o.deps.iter().all(|&d| done[d])
                    {
                        ready.push(j);
                    }
                }
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(origin: &str, bytes: u64, after: Option<usize>, order: f64, server_ms: f64) -> Req {
        Req {
            origin: origin.to_string(),
            host: origin.rsplit('/').next().unwrap_or_default().to_string(),
            tls: origin.starts_with("https"),
            h2: false,
            bytes,
            after,
            order,
            server_ms,
            delay_ms: 0.0,
        }
    }

    /// Lighthouse 12.8.2 (desktop) on a page whose head has a 26,204-byte
    /// stylesheet and a 46,203-byte script, served over loopback by a
    /// server answering in 9 ms: 89 ms for the sheet (on the page's warm
    /// connection) and 169 ms for the script (a new one).
    #[test]
    fn lighthouse_desktop_figures() {
        let o = "http://127.0.0.1:1";
        let reqs = [
            req(o, 600, None, 0.0, 9.0),
            req(o, 26_204, Some(0), 1.0, 9.0),
            req(o, 46_203, Some(0), order(2.0, true), 9.0),
        ];
        let t = DESKTOP.simulate(&reqs).expect("simulated");
        let ms: Vec<f64> = t.iter().map(|(s, e)| (e - s).round()).collect();
        assert_eq!(ms[1..], [89.0, 169.0]);
        // They start when the page has arrived.
        assert_eq!(t[1].0, t[0].1);
    }

    /// Lighthouse 12.8.2's own simulation of a page (printed from its
    /// render-blocking audit): an 831-byte page, a 51,328-byte stylesheet
    /// and a 64,214-byte script found by a 20 ms parser task, a server
    /// answering in 28.24 ms: the sheet from 188.2 to 336.5 ms on the
    /// page's connection, the script from 208.2 to 396.5 on a new one,
    /// sharing the link while both load.
    #[test]
    fn lighthouse_simulation_with_a_parser_task() {
        let o = "http://127.0.0.1:1";
        let mut script = req(o, 64_214, Some(0), order(1.0, true), 28.2391);
        script.delay_ms = 20.0;
        let reqs = [
            req(o, 831, None, 0.0, 28.2391),
            req(o, 51_328, Some(0), 0.0, 28.2391),
            script,
        ];
        let t = DESKTOP.simulate(&reqs).expect("simulated");
        let r = |v: f64| (v * 10.0).round() / 10.0;
        let got: Vec<(f64, f64)> = t.iter().map(|(s, e)| (r(*s), r(*e))).collect();
        assert_eq!(got, [(0.0, 188.2), (188.2, 336.5), (208.2, 396.5)]);
    }

    #[test]
    fn handshakes_slow_start_and_waiting() {
        let o = "https://a.test";
        // One window: DNS (2 RTT), TCP (1.5), TLS (1), request (0.5).
        let t = DESKTOP.simulate(&[req(o, 14_600, None, 0.0, 0.0)]).unwrap();
        assert_eq!(t[0], (0.0, 200.0));
        // One byte more: another round trip.
        let t = DESKTOP.simulate(&[req(o, 14_601, None, 0.0, 0.0)]).unwrap();
        assert_eq!(t[0].1, 240.0);
        // A chain: the second starts when the first ends, warm.
        let t = DESKTOP
            .simulate(&[
                req(o, 1_000, None, 0.0, 0.0),
                req(o, 1_000, Some(0), 0.0, 0.0),
            ])
            .unwrap();
        assert_eq!(t[1], (200.0, 240.0));
        // A phone's link: 150 ms round trips.
        let t = MOBILE
            .simulate(&[req("http://b.test", 1_000, None, 0.0, 0.0)])
            .unwrap();
        assert_eq!(t[0].1, 300.0 + 300.0);
        // Nothing to start with: not a load.
        assert!(DESKTOP.simulate(&[req(o, 1, Some(0), 0.0, 0.0)]).is_none());
    }

    #[test]
    fn seven_requests_share_six_connections() {
        let o = "http://a.test";
        let mut reqs = vec![req(o, 1_000, None, 0.0, 0.0)];
        for k in 0..7 {
            reqs.push(req(o, 1_000, Some(0), f64::from(k), 0.0));
        }
        let t = DESKTOP.simulate(&reqs).unwrap();
        // Six at once (one on the page's warm connection); the seventh
        // waits for the first free one, the warm one.
        let page_end = t[0].1;
        assert!(t[1..7].iter().all(|(s, _)| *s == page_end), "{t:?}");
        assert_eq!(t[7].0, page_end + 40.0, "{t:?}");
    }
}
