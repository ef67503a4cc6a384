//! Latency histograms: HDR log-linear, microsecond units, exact merge.
//!
//! In JSON a histogram is a readable summary (count, min, mean, percentiles…)
//! plus `hdr`, the full histogram in the standard HdrHistogram V2 compressed
//! encoding (base64), which other HdrHistogram tools read. Only `hdr` is read
//! back, so the summary can never disagree with the data.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer as SerdeDe, Serialize, Serializer as SerdeSer};
use std::time::Duration;

/// Significant digits of the run-wide histograms (0.1 % relative error).
pub const SIGFIG: u8 = 3;
/// Significant digits of the per-second histograms (1 % relative error, far smaller).
pub const SERIES_SIGFIG: u8 = 2;

/// The largest value recorded: one day in µs (larger values are clamped).
pub const MAX_US: u64 = 86_400_000_000;

/// The percentiles every summary reports.
pub const PERCENTILES: [f64; 7] = [50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99];

/// A latency histogram in microseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Hist {
    h: Histogram<u64>,
}

impl Default for Hist {
    fn default() -> Self {
        Hist::new()
    }
}

impl Hist {
    /// An empty auto-resizing histogram with 3 significant digits.
    pub fn new() -> Hist {
        Hist::with_sigfig(SIGFIG)
    }

    /// An empty auto-resizing histogram with the given significant digits.
    pub fn with_sigfig(sigfig: u8) -> Hist {
        // SIGFIG constants are in hdrhistogram's valid range 0..=5.
        let h = Histogram::new(sigfig.min(5)).expect("valid sigfig");
        Hist { h }
    }

    /// Records one value in microseconds.
    #[inline]
    pub fn record_us(&mut self, us: u64) {
        // `record` grows the auto-resizing histogram; values are capped at one
        // day so a bogus clock cannot make it allocate without bound.
        let _ = self.h.record(us.min(MAX_US));
    }

    /// Records `n` occurrences of one value in microseconds.
    pub fn record_n_us(&mut self, us: u64, n: u64) {
        let _ = self.h.record_n(us.min(MAX_US), n);
    }

    /// Records one duration (rounded down to whole microseconds).
    #[inline]
    pub fn record(&mut self, d: Duration) {
        self.record_us(d.as_micros().min(u64::MAX as u128) as u64);
    }

    /// Adds every value of `other` (exact for histograms of equal precision).
    pub fn merge(&mut self, other: &Hist) {
        // Auto-resizing histograms cannot fail to add; fall back to re-recording
        // bucket by bucket if they ever did.
        if self.h.add(&other.h).is_err() {
            for v in other.h.iter_recorded() {
                let _ = self
                    .h
                    .record_n(v.value_iterated_to().min(MAX_US), v.count_at_value());
            }
        }
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.h.len()
    }
    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }
    /// Smallest value (0 when empty).
    pub fn min(&self) -> u64 {
        if self.h.is_empty() {
            0
        } else {
            self.h.min()
        }
    }
    /// Largest value (highest equivalent of its bucket).
    pub fn max(&self) -> u64 {
        self.h.max()
    }
    /// Mean in microseconds.
    pub fn mean(&self) -> f64 {
        self.h.mean()
    }
    /// Standard deviation in microseconds.
    pub fn stdev(&self) -> f64 {
        self.h.stdev()
    }
    /// The value at percentile `p` (0–100).
    pub fn percentile(&self, p: f64) -> u64 {
        if self.h.is_empty() {
            return 0;
        }
        self.h.value_at_quantile((p / 100.0).clamp(0.0, 1.0))
    }
    /// The underlying HdrHistogram.
    pub fn inner(&self) -> &Histogram<u64> {
        &self.h
    }

    /// HdrHistogram V2 + deflate, base64 (the format of HdrHistogram logs).
    pub fn to_base64(&self) -> String {
        let mut buf = Vec::new();
        // Serializing into a Vec cannot fail for a valid histogram.
        let _ = V2DeflateSerializer::new().serialize(&self.h, &mut buf);
        base64::engine::general_purpose::STANDARD.encode(buf)
    }

    /// Parses [`Hist::to_base64`] output.
    pub fn from_base64(s: &str) -> Result<Hist, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .map_err(|e| format!("histogram is not base64: {e}"))?;
        let plain = bounded_v2(&bytes)?;
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &plain[..])
            .map_err(|e| format!("histogram is not HdrHistogram V2: {e:?}"))?;
        h.auto(true);
        Ok(Hist { h })
    }

    /// The readable summary written next to the encoded histogram.
    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count(),
            min_us: self.min(),
            mean_us: round3(self.mean()),
            stdev_us: round3(self.stdev()),
            max_us: self.max(),
            percentiles_us: PERCENTILES
                .iter()
                .map(|p| (format!("p{p}"), self.percentile(*p)))
                .collect(),
        }
    }
}

fn round3(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1000.0).round() / 1000.0
    } else {
        0.0
    }
}

/// The readable part of a serialized histogram.
#[derive(Debug, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// Minimum, µs.
    pub min_us: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Standard deviation, µs.
    pub stdev_us: f64,
    /// Maximum, µs.
    pub max_us: u64,
    /// p50, p75, p90, p95, p99, p99.9, p99.99 in µs.
    pub percentiles_us: std::collections::BTreeMap<String, u64>,
}

#[derive(Serialize)]
struct HistOut<'a> {
    #[serde(flatten)]
    summary: Summary,
    hdr: &'a str,
}

#[derive(Deserialize)]
struct HistIn {
    hdr: String,
}

impl Serialize for Hist {
    fn serialize<S: SerdeSer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let hdr = self.to_base64();
        HistOut {
            summary: self.summary(),
            hdr: &hdr,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Hist {
    fn deserialize<D: SerdeDe<'de>>(d: D) -> Result<Self, D::Error> {
        let h = HistIn::deserialize(d)?;
        Hist::from_base64(&h.hdr).map_err(D::Error::custom)
    }
}

/// A per-second histogram kept encoded: a long run keeps one per second, so
/// it must cost bytes, not kilobytes. Serialized as a bare base64 string.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SeriesHist {
    b64: String,
}

impl SeriesHist {
    /// Encodes a histogram. Plain V2 (run-length varints, no deflate): a
    /// second's sparse histogram is already small, and deflate's state (some
    /// hundred KB, kept by each thread's allocator arena) made a long run's peak
    /// RSS 11 % above a short run's.
    pub fn from_hist(h: &Hist) -> SeriesHist {
        if h.is_empty() {
            return SeriesHist { b64: String::new() };
        }
        let mut buf = Vec::new();
        let _ = V2Serializer::new().serialize(&h.h, &mut buf);
        SeriesHist {
            b64: base64::engine::general_purpose::STANDARD.encode(buf),
        }
    }
    /// Decompresses it (an empty histogram when nothing was recorded).
    pub fn to_hist(&self) -> Hist {
        if self.b64.is_empty() {
            return Hist::with_sigfig(SERIES_SIGFIG);
        }
        Hist::from_base64(&self.b64).unwrap_or_else(|_| Hist::with_sigfig(SERIES_SIGFIG))
    }
    /// The encoded form.
    pub fn as_str(&self) -> &str {
        &self.b64
    }
}

impl Serialize for SeriesHist {
    fn serialize<S: SerdeSer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.b64)
    }
}

impl<'de> Deserialize<'de> for SeriesHist {
    fn deserialize<D: SerdeDe<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if !s.is_empty() {
            Hist::from_base64(&s).map_err(D::Error::custom)?;
        }
        Ok(SeriesHist { b64: s })
    }
}

/// HdrHistogram V2 cookies (as the `hdrhistogram` crate writes them).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// The largest decompressed V2 histogram read (4 MiB). One redline writes is
/// at most ~60k counters of a few varint bytes each (3 digits over 64-bit
/// values: ~0.5 MiB); the V2 header's lengths come from outside, so they are
/// checked against this and against the bytes really there before the
/// `hdrhistogram` crate allocates by them.
pub const MAX_V2_BYTES: usize = 4 << 20;
/// The most significant digits a histogram read may have (redline writes 2
/// and 3): the counts array grows tenfold with each digit.
pub const MAX_READ_SIGFIG: u32 = 3;

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The plain V2 bytes of an encoded histogram, every length in its headers
/// checked before anything is allocated by it: a compressed payload is
/// inflated at most to [`MAX_V2_BYTES`], the payload length must match the
/// bytes present, and the precision is at most [`MAX_READ_SIGFIG`].
fn bounded_v2(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    use std::io::Read;
    let bad = |m: String| Err(format!("histogram is not HdrHistogram V2: {m}"));
    let Some(cookie) = be32(bytes, 0) else {
        return bad("too short".into());
    };
    let plain: std::borrow::Cow<'_, [u8]> = match cookie {
        V2_COMPRESSED_COOKIE => {
            let claimed = be32(bytes, 4).unwrap_or(0) as usize;
            let have = bytes.len().saturating_sub(8);
            if claimed > have {
                return bad(format!(
                    "its header claims {claimed} compressed bytes, {have} are there"
                ));
            }
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(&bytes[8..8 + claimed])
                .take(MAX_V2_BYTES as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("histogram is not HdrHistogram V2: {e}"))?;
            if out.len() > MAX_V2_BYTES {
                return bad(format!(
                    "it inflates to more than {} MiB",
                    MAX_V2_BYTES >> 20
                ));
            }
            std::borrow::Cow::Owned(out)
        }
        V2_COOKIE => std::borrow::Cow::Borrowed(bytes),
        c => return bad(format!("unknown cookie {c:#x}")),
    };
    if be32(&plain, 0) != Some(V2_COOKIE) {
        return bad("wrong inner cookie".into());
    }
    const HEADER: usize = 40;
    let (Some(payload), Some(digits)) = (be32(&plain, 4), be32(&plain, 12)) else {
        return bad("too short".into());
    };
    let have = plain.len().saturating_sub(HEADER);
    if payload as usize > have {
        return bad(format!(
            "its header claims a {payload}-byte payload, {have} bytes are there"
        ));
    }
    if digits > MAX_READ_SIGFIG {
        return bad(format!(
            "{digits} significant digits; redline reads at most {MAX_READ_SIGFIG}"
        ));
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_merge() {
        let mut a = Hist::new();
        let mut b = Hist::new();
        let mut all = Hist::new();
        for i in 0..10_000u64 {
            let v = (i * 7919) % 250_000;
            if i % 3 == 0 {
                a.record_us(v);
            } else {
                b.record_us(v);
            }
            all.record_us(v);
        }
        a.merge(&b);
        assert_eq!(a, all);
        let j = serde_json::to_string(&a).unwrap();
        let back: Hist = serde_json::from_str(&j).unwrap();
        assert_eq!(back.count(), all.count());
        assert_eq!(back.percentile(99.0), all.percentile(99.0));
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert!(v["percentiles_us"]["p99"].as_u64().unwrap() > 0);
    }

    #[test]
    fn lengths_in_the_header_are_checked_before_allocation() {
        let mut h = Hist::new();
        h.record(Duration::from_micros(1234));
        let b64 = h.to_base64();
        let good = base64::engine::general_purpose::STANDARD
            .decode(&b64)
            .unwrap();
        assert!(Hist::from_base64(&b64).is_ok());
        // The compressed length claims 4 GiB.
        let mut c = good.clone();
        c[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let e =
            Hist::from_base64(&base64::engine::general_purpose::STANDARD.encode(&c)).unwrap_err();
        assert!(e.contains("claims 4294967295 compressed bytes"), "{e}");
        // A plain V2 histogram whose payload length claims 4 GiB.
        let mut plain = Vec::new();
        V2Serializer::new().serialize(&h.h, &mut plain).unwrap();
        plain[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let e = Hist::from_base64(&base64::engine::general_purpose::STANDARD.encode(&plain))
            .unwrap_err();
        assert!(e.contains("4294967295-byte payload"), "{e}");
        // Precision beyond what redline writes.
        let mut plain = Vec::new();
        V2Serializer::new().serialize(&h.h, &mut plain).unwrap();
        plain[12..16].copy_from_slice(&5u32.to_be_bytes());
        let e = Hist::from_base64(&base64::engine::general_purpose::STANDARD.encode(&plain))
            .unwrap_err();
        assert!(e.contains("5 significant digits"), "{e}");
    }

    #[test]
    fn bad_base64_is_an_error() {
        assert!(Hist::from_base64("!!!").is_err());
        assert!(Hist::from_base64("aGVsbG8=").is_err());
    }

    #[test]
    fn percentile_within_precision() {
        let mut h = Hist::new();
        for v in 1..=100_000u64 {
            h.record_us(v);
        }
        let p50 = h.percentile(50.0) as f64;
        assert!((p50 - 50_000.0).abs() / 50_000.0 < 0.001, "{p50}");
        assert!(h.percentile(90.0) <= h.percentile(99.0));
    }
}
