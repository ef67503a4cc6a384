//! Generated values in scenario templates: `{{uuid}}`, `{{random_int(a,b)}}`,
//! `{{random_string(n)}}`, `{{seq}}` and `{{now_ms}}`. A name is parsed once,
//! when the scenario is compiled (bad arguments are errors there, with the
//! file and line); each virtual user renders from its own [`GenState`],
//! seeded from the run's `--seed` and the user's id, so the same seed gives
//! the same values (all but `now_ms`, the clock) and no lock or shared
//! counter is touched per request.

use redline_stats::rng::SplitMix64;

/// The longest `random_string(n)`: a request stays bounded.
pub const MAX_STRING: usize = 65_536;

/// The generated names, for error messages and docs.
pub const NAMES: &str = "uuid, random_int(a,b), random_string(n), seq, now_ms";

/// One generated value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gen {
    /// A random (version 4) UUID.
    Uuid,
    /// A uniform integer in `a..=b`.
    RandomInt(i64, i64),
    /// `n` random characters from `A-Za-z0-9`.
    RandomString(usize),
    /// The virtual user's request number: 0, 1, 2… (`{{vu}}-{{seq}}` is unique in a run).
    Seq,
    /// Milliseconds since the Unix epoch, when the request is built.
    NowMs,
}

/// A virtual user's generator state.
#[derive(Debug, Clone, Default)]
pub struct GenState {
    rng: SplitMix64Default,
    /// `{{seq}}` of the request being built.
    seq: u64,
    /// Requests chosen so far.
    next: u64,
}

/// [`SplitMix64`] with a `Default` (for `std::mem::take`).
#[derive(Debug, Clone)]
struct SplitMix64Default(SplitMix64);

impl Default for SplitMix64Default {
    fn default() -> Self {
        SplitMix64Default(SplitMix64(0))
    }
}

impl GenState {
    /// The state of virtual user `vu` in a run seeded with `seed`.
    pub fn new(seed: u64, vu: u64) -> GenState {
        let mut rng = SplitMix64(seed ^ (vu.wrapping_add(1)).wrapping_mul(0xD1B5_4A32_D192_ED03));
        // Mix once so neighbouring ids start far apart.
        let s = rng.next_u64();
        GenState {
            rng: SplitMix64Default(SplitMix64(s)),
            seq: 0,
            next: 0,
        }
    }

    /// A new request was chosen for this user: the next `{{seq}}` (a request
    /// built again, e.g. on a new connection, keeps its number).
    pub fn begin_request(&mut self) {
        self.seq = self.next;
        self.next += 1;
    }
}

/// Text from a file, for a one-line message: control characters escaped
/// (`\u{1b}`, `\n`…), cut to 80 characters.
pub fn shown(s: &str) -> String {
    let mut out: String = s.chars().flat_map(char::escape_debug).take(80).collect();
    if s.chars().flat_map(char::escape_debug).nth(80).is_some() {
        out.push('…');
    }
    out
}

fn is_ident(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Gen {
    /// Parses a template name. `Ok(None)`: not a generator (a variable,
    /// perhaps); `Err`: a generator with bad arguments.
    pub fn parse(name: &str) -> Result<Option<Gen>, String> {
        let raw = name.trim();
        let name = shown(raw);
        let name = name.as_str();
        let (func, args) = match raw.split_once('(') {
            Some((f, rest)) => {
                let Some(args) = rest.strip_suffix(')') else {
                    return Err(format!("'{{{{{name}}}}}': expected ')' at the end"));
                };
                (f.trim(), Some(args))
            }
            None => (name, None),
        };
        let ints = |want: usize| -> Result<Vec<i64>, String> {
            let args = args.unwrap_or("");
            let v: Vec<&str> = if args.trim().is_empty() {
                Vec::new()
            } else {
                args.split(',').map(str::trim).collect()
            };
            if v.len() != want {
                return Err(format!(
                    "'{{{{{name}}}}}': {func} takes {want} integer argument{}",
                    if want == 1 { "" } else { "s" }
                ));
            }
            v.iter()
                .map(|a| {
                    a.parse::<i64>()
                        .map_err(|_| format!("'{{{{{name}}}}}': '{}' is not an integer", shown(a)))
                })
                .collect()
        };
        let plain = |g: Gen| -> Result<Option<Gen>, String> {
            match args {
                None => Ok(Some(g)),
                Some(_) => Err(format!("'{{{{{name}}}}}': {func} takes no arguments")),
            }
        };
        match func {
            "uuid" => plain(Gen::Uuid),
            "seq" => plain(Gen::Seq),
            "now_ms" => plain(Gen::NowMs),
            "random_int" => {
                let v = ints(2)?;
                if v[0] > v[1] {
                    return Err(format!(
                        "'{{{{{name}}}}}': the lower bound is above the upper"
                    ));
                }
                Ok(Some(Gen::RandomInt(v[0], v[1])))
            }
            "random_string" => {
                let v = ints(1)?;
                if !(1..=MAX_STRING as i64).contains(&v[0]) {
                    return Err(format!(
                        "'{{{{{name}}}}}': the length must be within 1–{MAX_STRING}"
                    ));
                }
                Ok(Some(Gen::RandomString(v[0] as usize)))
            }
            _ if args.is_some() && is_ident(func) => Err(format!(
                "unknown function '{func}' in '{{{{{name}}}}}' (generated values: {NAMES})"
            )),
            _ => Ok(None),
        }
    }

    /// Appends a value to `out`.
    pub fn render(&self, st: &mut GenState, out: &mut Vec<u8>) {
        let rng = &mut st.rng.0;
        match *self {
            Gen::Uuid => {
                let (a, b) = (rng.next_u64(), rng.next_u64());
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&a.to_be_bytes());
                bytes[8..].copy_from_slice(&b.to_be_bytes());
                bytes[6] = (bytes[6] & 0x0f) | 0x40;
                bytes[8] = (bytes[8] & 0x3f) | 0x80;
                const HEX: &[u8; 16] = b"0123456789abcdef";
                for (i, x) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        out.push(b'-');
                    }
                    out.push(HEX[(x >> 4) as usize]);
                    out.push(HEX[(x & 15) as usize]);
                }
            }
            Gen::RandomInt(a, b) => {
                let span = (b as i128 - a as i128 + 1) as u128;
                let x = if span > u64::MAX as u128 {
                    rng.next_u64()
                } else {
                    rng.below(span as u64)
                };
                let v = (a as i128 + x as i128) as i64;
                out.extend_from_slice(v.to_string().as_bytes());
            }
            Gen::RandomString(n) => {
                const ABC: &[u8; 62] =
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
                out.reserve(n);
                for _ in 0..n {
                    out.push(ABC[rng.below(62) as usize]);
                }
            }
            Gen::Seq => out.extend_from_slice(st.seq.to_string().as_bytes()),
            Gen::NowMs => {
                let ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis());
                out.extend_from_slice(ms.to_string().as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(g: &Gen, st: &mut GenState) -> String {
        let mut v = Vec::new();
        g.render(st, &mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn names_parse_and_bad_arguments_are_refused() {
        assert_eq!(Gen::parse("uuid"), Ok(Some(Gen::Uuid)));
        assert_eq!(Gen::parse(" seq "), Ok(Some(Gen::Seq)));
        assert_eq!(
            Gen::parse("random_int( -5 , 10 )"),
            Ok(Some(Gen::RandomInt(-5, 10)))
        );
        assert_eq!(
            Gen::parse("random_string(8)"),
            Ok(Some(Gen::RandomString(8)))
        );
        assert_eq!(Gen::parse("user_id"), Ok(None));
        for bad in [
            "random_int(5,1)",
            "random_int(1)",
            "random_int(a,b)",
            "random_string(0)",
            "random_string(99999999)",
            "uuid()",
            "random_int(1,2",
            "nosuch(1)",
        ] {
            assert!(Gen::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_have_their_shape_and_repeat_with_the_seed() {
        let mut st = GenState::new(42, 3);
        let u = render(&Gen::Uuid, &mut st);
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4", "{u}");
        assert!("89ab".contains(&u[19..20]), "{u}");
        let s = render(&Gen::RandomString(20), &mut st);
        assert!(s.len() == 20 && s.bytes().all(|b| b.is_ascii_alphanumeric()));
        for _ in 0..1000 {
            let v: i64 = render(&Gen::RandomInt(-3, 3), &mut st).parse().unwrap();
            assert!((-3..=3).contains(&v));
        }
        let full: i64 = render(&Gen::RandomInt(i64::MIN, i64::MAX), &mut st)
            .parse()
            .unwrap();
        let _ = full;
        // Same seed and user: same values; another seed or user: others.
        let seq = |seed, vu| {
            let mut st = GenState::new(seed, vu);
            (0..4)
                .map(|_| render(&Gen::Uuid, &mut st))
                .collect::<Vec<_>>()
        };
        assert_eq!(seq(7, 1), seq(7, 1));
        assert_ne!(seq(7, 1), seq(8, 1));
        assert_ne!(seq(7, 1), seq(7, 2));
        let a = seq(7, 1);
        assert_ne!(a[0], a[1]);
    }
}
