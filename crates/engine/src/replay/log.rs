//! Reading an access log for `redline replay`: the file (plain or gzip, told
//! by its magic bytes) line by line with bounds (line length, text size,
//! requests kept), each line matched against the [`LogFormat`], methods
//! filtered, unparsable lines counted with the first few kept; then the
//! kept requests in time order, grouped per URL and original status for the
//! breakdown (the most requested URLs each, the others together), and the
//! log's per-second counts as the open-loop schedule's stages.

use super::format::LogFormat;
use crate::pacer::Stage;
use redline_stats::replay::{BadLine, ReplaySummary, MAX_BAD_EXAMPLES};
use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

/// The longest line read (longer ones are bad lines): Apache's request line
/// limit is 8 KiB, so a whole log line fits twice over.
pub const MAX_LINE: usize = 16 * 1024;
/// The most log text read (after decompression); beyond it the log is cut
/// and the rest counted as one bad line.
pub const MAX_TEXT: u64 = 1 << 30;
/// The most requests a replay keeps (later ones are counted as cut).
pub const MAX_REQUESTS: usize = 5_000_000;
/// The most URLs the per-URL breakdown lists by name.
pub const MAX_BREAKDOWN: usize = 1_000;
/// The most distinct methods (with `--methods all`).
const MAX_METHODS: usize = 64;
/// The most distinct hosts read from a log.
const MAX_HOSTS: usize = 10_000;

/// What to keep and how to group it.
#[derive(Debug, Clone)]
pub struct Options {
    /// Methods replayed (upper case); `None`: all.
    pub methods: Option<Vec<String>>,
    /// `-n`: the first N requests (by time) only.
    pub limit: Option<u64>,
    /// URLs listed by name in the breakdown (the rest grouped).
    pub breakdown: usize,
    /// `--host-map`: a logged host (lower case) and the target it goes to
    /// (1-based index into the map's targets; 0 is BASE_URL).
    pub host_map: Vec<(String, usize)>,
    /// `-d`: only the requests of the log's first N seconds (from the first
    /// request's second), applied before `limit`; the rest count as `cut`.
    pub window_s: Option<u64>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            methods: Some(vec!["GET".into(), "HEAD".into()]),
            limit: None,
            breakdown: 100,
            host_map: Vec::new(),
            window_s: None,
        }
    }
}

/// The requests of one URL (or of the URLs beyond the breakdown) with one
/// original status: one named request of the replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Its method.
    pub method: String,
    /// Its target (0: BASE_URL; else the `--host-map` entry's index + 1).
    pub target: usize,
    /// Path and query; `None` for the URLs beyond the breakdown.
    pub path: Option<String>,
    /// The status the log gave.
    pub original_status: u16,
    /// Its requests in the replay.
    pub requests: u64,
}

impl Group {
    /// Its name in the reports: `GET /a.html (200)`, `GET (other URLs) (404)`.
    pub fn name(&self) -> String {
        format!(
            "{} {} ({})",
            self.method,
            self.path.as_deref().unwrap_or("(other URLs)"),
            self.original_status
        )
    }
}

/// One request of the replay, in time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    /// Seconds after the first request's second.
    pub second: u64,
    /// Its group.
    pub group: u32,
    /// Its path and query ([`Log::paths`]).
    pub path: u32,
}

/// An access log read for a replay.
#[derive(Debug, Clone)]
pub struct Log {
    /// Lines, kept, skipped, bad lines, original statuses.
    pub summary: ReplaySummary,
    /// The named requests, most requests first.
    pub groups: Vec<Group>,
    /// The requests in time order.
    pub ticks: Vec<Tick>,
    /// Paths (with queries) the ticks name.
    pub paths: Vec<Box<str>>,
    /// The first request's time (Unix seconds, as logged).
    pub start: i64,
}

#[derive(Clone, Copy)]
struct Raw {
    time: i64,
    method: u8,
    target: u16,
    path: u32,
    status: u16,
}

/// Calls `f` with each line (without its `\n`) and its number; a line over
/// [`MAX_LINE`] comes as `Err(its length)`. Stops after `max` bytes (`Err`
/// with how much was read) or at a read error (`Err` with it).
fn for_each_line(
    mut r: impl BufRead,
    max: u64,
    mut f: impl FnMut(u64, Result<&[u8], usize>),
) -> Result<(), String> {
    let mut buf: Vec<u8> = Vec::new();
    let mut long: Option<usize> = None;
    let mut n = 0u64;
    let mut total = 0u64;
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("the log could not be read to its end: {e}")),
        };
        if avail.is_empty() {
            if long.is_some() || !buf.is_empty() {
                n += 1;
                match long {
                    Some(l) => f(n, Err(l)),
                    None => f(n, Ok(&buf)),
                }
            }
            return Ok(());
        }
        let (chunk, ends) = match avail.iter().position(|&c| c == b'\n') {
            Some(i) => (&avail[..i], true),
            None => (avail, false),
        };
        let used = chunk.len() + ends as usize;
        total += used as u64;
        match long.as_mut() {
            Some(l) => *l += chunk.len(),
            None if buf.len() + chunk.len() > MAX_LINE => {
                long = Some(buf.len() + chunk.len());
                buf.clear();
            }
            None => buf.extend_from_slice(chunk),
        }
        if ends {
            n += 1;
            match long.take() {
                Some(l) => f(n, Err(l)),
                None => f(n, Ok(&buf)),
            }
            buf.clear();
        }
        r.consume(used);
        if total > max {
            return Err(format!(
                "the log has more than {} MiB of text: the rest was not read",
                max >> 20
            ));
        }
    }
}

fn bad_example(line: u64, why: &str, text: &[u8]) -> BadLine {
    let cut = &text[..text.len().min(800)];
    BadLine {
        line,
        why: why.to_string(),
        text: String::from_utf8_lossy(cut).chars().take(200).collect(),
    }
}

impl Log {
    /// Reads the log at `path` (a regular file within the log size limit;
    /// gzip when it starts with gzip's magic bytes). Err: the file cannot be
    /// read (one line); lines that do not parse are counted, never an error.
    pub fn read(path: &Path, format: &LogFormat, opts: &Options) -> Result<Log, String> {
        let data = redline_stats::files::read(path, redline_stats::files::Kind::Log, "")?;
        Ok(Log::from_bytes(
            &data,
            &path.display().to_string(),
            format,
            opts,
        ))
    }

    /// Reads a log already in memory (plain or gzip).
    pub fn from_bytes(data: &[u8], name: &str, format: &LogFormat, opts: &Options) -> Log {
        if data.starts_with(&[0x1f, 0x8b]) {
            let gz = std::io::BufReader::new(flate2::bufread::MultiGzDecoder::new(data));
            let mut log = Log::from_reader(gz, name, format, opts);
            log.summary.gzip = true;
            log
        } else {
            Log::from_reader(data, name, format, opts)
        }
    }

    /// Reads a log from a reader of its text.
    pub fn from_reader(r: impl BufRead, name: &str, format: &LogFormat, opts: &Options) -> Log {
        let mut summary = ReplaySummary {
            log: name.to_string(),
            format: format.name.clone(),
            gzip: false,
            lines: 0,
            kept: 0,
            other_methods: 0,
            bad_lines: 0,
            bad_examples: Vec::new(),
            cut: 0,
            span_s: 0.0,
            speed: None,
            rate: None,
            original_statuses: BTreeMap::new(),
            other_urls: 0,
        };
        let mut methods: Vec<String> = Vec::new();
        let mut hosts: HashMap<String, u16> = HashMap::new();
        let mut path_ids: HashMap<Box<str>, u32> = HashMap::new();
        let mut paths: Vec<Box<str>> = Vec::new();
        let mut raws: Vec<Raw> = Vec::new();
        let bad = |s: &mut ReplaySummary, n: u64, why: &str, text: &[u8]| {
            s.bad_lines += 1;
            if s.bad_examples.len() < MAX_BAD_EXAMPLES {
                s.bad_examples.push(bad_example(n, why, text));
            }
        };
        let mut joined = String::new();
        let res = for_each_line(r, MAX_TEXT, |n, line| {
            summary.lines = n;
            let line = match line {
                Ok(l) => l,
                Err(len) => {
                    let why = format!("longer than {MAX_LINE} bytes ({len})");
                    return bad(&mut summary, n, &why, b"");
                }
            };
            if line.iter().all(|c| c.is_ascii_whitespace()) {
                return;
            }
            let x = match format.parse_line(line) {
                Ok(x) => x,
                Err(why) => return bad(&mut summary, n, &why, line),
            };
            let method_ok = match &opts.methods {
                None => true,
                Some(ms) => ms.iter().any(|m| m == x.method),
            };
            if !method_ok {
                summary.other_methods += 1;
                return;
            }
            if raws.len() >= MAX_REQUESTS {
                summary.cut += 1;
                return;
            }
            // An absolute-form target names its host.
            let (mut host, mut target) = (x.host, x.target);
            if let Some(rest) = target
                .strip_prefix("http://")
                .or_else(|| target.strip_prefix("https://"))
            {
                let cut = rest.find(['/', '?']).unwrap_or(rest.len());
                host = Some(&rest[..cut]);
                target = &rest[cut..];
            }
            joined.clear();
            if !target.starts_with('/') && target != "*" {
                joined.push('/');
            }
            joined.push_str(target);
            if !x.query.is_empty() {
                joined.push('?');
                joined.push_str(x.query);
            }
            let method = match methods.iter().position(|m| m == x.method) {
                Some(i) => i,
                None if methods.len() < MAX_METHODS => {
                    methods.push(x.method.to_string());
                    methods.len() - 1
                }
                None => return bad(&mut summary, n, "too many distinct methods", line),
            };
            let target_ix = match host {
                None => 0,
                Some(h) => {
                    let h = h.to_ascii_lowercase();
                    match hosts.get(&h) {
                        Some(t) => *t,
                        None if hosts.len() < MAX_HOSTS => {
                            let bare = h.rsplit_once(':').map_or(h.as_str(), |(b, _)| b);
                            let t = opts
                                .host_map
                                .iter()
                                .find(|(k, _)| *k == h || *k == bare)
                                .map_or(0, |(_, t)| *t) as u16;
                            hosts.insert(h, t);
                            t
                        }
                        None => 0,
                    }
                }
            };
            let path = match path_ids.get(joined.as_str()) {
                Some(p) => *p,
                None => {
                    let p = paths.len() as u32;
                    paths.push(joined.as_str().into());
                    path_ids.insert(joined.as_str().into(), p);
                    p
                }
            };
            raws.push(Raw {
                time: x.time,
                method: method as u8,
                target: target_ix,
                path,
                status: x.status,
            });
        });
        if let Err(e) = res {
            summary.bad_lines += 1;
            if summary.bad_examples.len() < MAX_BAD_EXAMPLES {
                summary.bad_examples.push(BadLine {
                    line: summary.lines + 1,
                    why: e,
                    text: String::new(),
                });
            }
        }
        drop(path_ids);
        // Time order; lines of one second keep their order in the file.
        raws.sort_by_key(|r| r.time);
        if let (Some(w), Some(first)) = (opts.window_s, raws.first().map(|r| r.time)) {
            let keep = raws.partition_point(|r| (r.time.saturating_sub(first) as u64) < w);
            summary.cut += (raws.len() - keep) as u64;
            raws.truncate(keep);
        }
        if let Some(n) = opts.limit {
            if (raws.len() as u64) > n {
                summary.cut += raws.len() as u64 - n;
                raws.truncate(n as usize);
            }
        }
        // The most requested URLs are listed by name.
        // (method, target, path) → (requests, first index).
        type Url = (u8, u16, u32);
        let mut per_url: HashMap<Url, (u64, usize)> = HashMap::new();
        for (i, r) in raws.iter().enumerate() {
            per_url
                .entry((r.method, r.target, r.path))
                .or_insert((0, i))
                .0 += 1;
        }
        let mut urls: Vec<(Url, (u64, usize))> = per_url.into_iter().collect();
        urls.sort_by_key(|(_, (count, first))| (std::cmp::Reverse(*count), *first));
        let shown = opts.breakdown.min(MAX_BREAKDOWN);
        summary.other_urls = urls.len().saturating_sub(shown) as u64;
        let named: std::collections::HashSet<Url> =
            urls.iter().take(shown).map(|(k, _)| *k).collect();
        // Groups: (method, target, path or none, status).
        type Key = (u8, u16, Option<u32>, u16);
        let key = |r: &Raw| -> Key {
            let url = (r.method, r.target, r.path);
            (
                r.method,
                r.target,
                named.contains(&url).then_some(r.path),
                r.status,
            )
        };
        let mut counts: HashMap<Key, (u64, usize)> = HashMap::new();
        for (i, r) in raws.iter().enumerate() {
            counts.entry(key(r)).or_insert((0, i)).0 += 1;
            *summary
                .original_statuses
                .entry(r.status.to_string())
                .or_insert(0) += 1;
        }
        let mut keys: Vec<(Key, (u64, usize))> = counts.into_iter().collect();
        // Named URLs first (most requested first), the grouped rest last.
        keys.sort_by_key(|((_, _, p, _), (count, first))| {
            (p.is_none(), std::cmp::Reverse(*count), *first)
        });
        let index: HashMap<Key, u32> = keys
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (*k, i as u32))
            .collect();
        let groups = keys
            .iter()
            .map(|((m, t, p, s), (count, _))| Group {
                method: methods[*m as usize].clone(),
                target: *t as usize,
                path: p.map(|p| paths[p as usize].to_string()),
                original_status: *s,
                requests: *count,
            })
            .collect();
        let first = raws.first().map_or(0, |r| r.time);
        let last = raws.last().map_or(0, |r| r.time);
        let ticks: Vec<Tick> = raws
            .iter()
            .map(|r| Tick {
                second: (r.time - first) as u64,
                group: index[&key(r)],
                path: r.path,
            })
            .collect();
        summary.kept = ticks.len() as u64;
        summary.span_s = if ticks.is_empty() {
            0.0
        } else {
            (last - first + 1) as f64
        };
        Log {
            summary,
            groups,
            ticks,
            paths,
            start: first,
        }
    }

    /// The longest stretch without a request: (its length in seconds, the
    /// log's second before it and after it, from [`Log::start`]); None with
    /// fewer than two seconds of requests. What a line dated 9999 or a
    /// `$msec` of 0 looks like.
    pub fn largest_gap(&self) -> Option<(u64, u64, u64)> {
        self.ticks
            .windows(2)
            .map(|w| (w[1].second - w[0].second, w[0].second, w[1].second))
            .filter(|g| g.0 > 0)
            .max_by_key(|g| g.0)
    }

    /// The open-loop schedule's stages at `speed`: each second of the log
    /// that has requests is a stage of `1/speed` s at `count × speed` req/s
    /// (so its requests are spread evenly over it), and each run of empty
    /// seconds one stage at 0.
    pub fn stages(&self, speed: f64) -> Vec<Stage> {
        let mut out: Vec<Stage> = Vec::new();
        // Stage ends from the log's seconds, so durations telescope (no drift
        // from rounding each one to nanoseconds).
        let at = |second: u64| Duration::from_secs_f64(second as f64 / speed);
        let mut next = 0u64;
        let mut i = 0;
        while i < self.ticks.len() {
            let s = self.ticks[i].second;
            let j = i + self.ticks[i..].iter().take_while(|t| t.second == s).count();
            if s > next {
                out.push(Stage {
                    duration: at(s) - at(next),
                    level: 0.0,
                });
            }
            // The stage holds a hair less than its count (1e-9 of it), so
            // float rounding of `level × duration` can never pull the next
            // second's first request into this one (across a gap, early).
            let d = at(s + 1) - at(s);
            out.push(Stage {
                duration: d,
                level: (j - i) as f64 / d.as_secs_f64().max(1e-9) * (1.0 - 1e-9),
            });
            next = s + 1;
            i = j;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacer::{Pacer, Profile};
    use crate::plan::Arrival;

    fn line(t: &str, m: &str, p: &str, s: u16) -> String {
        format!("127.0.0.1 - - [{t} +0000] \"{m} {p} HTTP/1.1\" {s} 12 \"-\" \"curl\"\n")
    }

    fn log_of(text: &str, opts: &Options) -> Log {
        Log::from_bytes(text.as_bytes(), "t.log", &LogFormat::default_format(), opts)
    }

    #[test]
    fn a_window_keeps_the_first_seconds_and_the_largest_gap_is_found() {
        let mut t = String::new();
        for (ts, p) in [
            ("26/Nov/2026:10:00:00", "/a"),
            ("26/Nov/2026:10:00:01", "/b"),
            ("26/Nov/2026:10:00:02", "/c"),
            ("31/Dec/9999:23:59:59", "/late"),
        ] {
            t += &line(ts, "GET", p, 200);
        }
        let log = log_of(&t, &Options::default());
        let (gap, before, after) = log.largest_gap().unwrap();
        assert_eq!((before, after), (2, gap + 2));
        assert!(gap > 200_000_000_000, "{gap}");
        assert!(log.summary.span_s > 2e11);
        let w = log_of(
            &t,
            &Options {
                window_s: Some(2),
                ..Options::default()
            },
        );
        let s = &w.summary;
        assert_eq!((s.kept, s.cut, s.span_s), (2, 2, 2.0));
        assert_eq!(s.original_statuses["200"], 2);
        assert_eq!(w.groups.iter().map(|g| g.requests).sum::<u64>(), 2);
        assert_eq!(w.largest_gap(), Some((1, 0, 1)));
    }

    #[test]
    fn lines_are_kept_counted_and_grouped() {
        let mut t = String::new();
        t += &line("26/Nov/2026:10:00:01", "GET", "/a", 200);
        t += &line("26/Nov/2026:10:00:00", "GET", "/a", 200);
        t += &line("26/Nov/2026:10:00:00", "POST", "/login", 302);
        t += "garbage \x1b[2J\n\n";
        t += &line("26/Nov/2026:10:00:03", "HEAD", "/b?x=1", 404);
        t += &line("26/Nov/2026:10:00:03", "GET", "/a", 304);
        let log = log_of(&t, &Options::default());
        let s = &log.summary;
        assert_eq!(
            (s.lines, s.kept, s.other_methods, s.bad_lines),
            (7, 4, 1, 1)
        );
        assert_eq!(s.bad_examples[0].line, 4);
        assert!(s.bad_examples[0].text.contains('\x1b'));
        assert_eq!(s.span_s, 4.0);
        assert_eq!(s.original_statuses["200"], 2);
        let names: Vec<String> = log.groups.iter().map(|g| g.name()).collect();
        assert_eq!(names, ["GET /a (200)", "HEAD /b?x=1 (404)", "GET /a (304)"]);
        let seconds: Vec<u64> = log.ticks.iter().map(|t| t.second).collect();
        assert_eq!(seconds, [0, 1, 3, 3]);
        // Only one URL by name: the others are grouped per method and status.
        let one = log_of(
            &t,
            &Options {
                breakdown: 1,
                ..Options::default()
            },
        );
        assert_eq!(one.summary.other_urls, 1);
        assert_eq!(one.groups.last().unwrap().name(), "HEAD (other URLs) (404)");
        let n2 = log_of(
            &t,
            &Options {
                limit: Some(2),
                ..Options::default()
            },
        );
        assert_eq!((n2.summary.kept, n2.summary.cut), (2, 2));
    }

    /// The schedule sends each second's requests evenly spread over it, at
    /// any speed, and exactly the log's count.
    #[test]
    fn stages_spread_each_second() {
        let mut t = String::new();
        for _ in 0..4 {
            t += &line("26/Nov/2026:10:00:00", "GET", "/", 200);
        }
        t += &line("26/Nov/2026:10:00:05", "GET", "/", 200);
        for _ in 0..2 {
            t += &line("26/Nov/2026:10:00:06", "GET", "/", 200);
        }
        let log = log_of(&t, &Options::default());
        for speed in [1.0, 2.0, 0.5, 3.0, 7.0, 0.3] {
            let prof = Profile::from_stages(&log.stages(speed), true);
            let mut p = Pacer::with_profile(Arrival::Constant, prof, 0, 1, Some(7), None, 1);
            let mut got = Vec::new();
            while let Some(at) = p.next_send() {
                got.push(at.as_secs_f64() * speed);
                assert!(got.len() <= 7);
            }
            let want = [0.0, 0.25, 0.5, 0.75, 5.0, 6.0, 6.5];
            assert_eq!(got.len(), 7, "{speed}");
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() < 1e-6, "{speed}: {got:?}");
            }
        }
    }

    #[test]
    fn long_lines_and_gzip() {
        let mut t = line("26/Nov/2026:10:00:00", "GET", "/", 200);
        t += &"x".repeat(MAX_LINE + 10);
        t += "\n";
        t += &line("26/Nov/2026:10:00:00", "GET", "/", 200);
        let mut gz = Vec::new();
        {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(&mut gz, flate2::Compression::fast());
            e.write_all(t.as_bytes()).unwrap();
            e.finish().unwrap();
        }
        for (data, gzip) in [(t.as_bytes(), false), (&gz[..], true)] {
            let log = Log::from_bytes(data, "x", &LogFormat::default_format(), &Options::default());
            assert_eq!(log.summary.gzip, gzip);
            assert_eq!((log.summary.kept, log.summary.bad_lines), (2, 1));
            assert!(log.summary.bad_examples[0].why.contains("longer than"));
        }
        // A gzip file cut short: what was read is kept, the rest is one bad line.
        let log = Log::from_bytes(
            &gz[..gz.len() - 8],
            "x",
            &LogFormat::default_format(),
            &Options::default(),
        );
        assert_eq!(log.summary.kept, 2);
        assert_eq!(log.summary.bad_lines, 2);
    }
}
