//! The two push encodings of [`Metrics`]: Prometheus remote write 1.0
//! (a protobuf `WriteRequest`, snappy block-compressed; the message types are
//! declared here with `prost`, as Prometheus' `prompb/remote.proto` and
//! `types.proto` define them) and OTLP/HTTP metrics (an
//! `ExportMetricsServiceRequest` from the official `opentelemetry-proto`
//! types), counters as cumulative monotonic sums and latency as exponential
//! (or explicit-bucket) histograms.

use crate::model::{Kind, Metrics, Value, LATENCY_BUCKETS_S};
use crate::text::number_le;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1 as otm;
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

/// Prometheus remote write 1.0 messages (`prompb`).
pub mod prompb {
    /// `prometheus.WriteRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct WriteRequest {
        /// The series.
        #[prost(message, repeated, tag = "1")]
        pub timeseries: Vec<TimeSeries>,
    }
    /// `prometheus.TimeSeries`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TimeSeries {
        /// Labels, sorted by name, `__name__` among them.
        #[prost(message, repeated, tag = "1")]
        pub labels: Vec<Label>,
        /// Samples, oldest first.
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<Sample>,
    }
    /// `prometheus.Label`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        /// Name.
        #[prost(string, tag = "1")]
        pub name: String,
        /// Value.
        #[prost(string, tag = "2")]
        pub value: String,
    }
    /// `prometheus.Sample`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        /// The value.
        #[prost(double, tag = "1")]
        pub value: f64,
        /// Unix milliseconds.
        #[prost(int64, tag = "2")]
        pub timestamp: i64,
    }
}

/// The remote-write series of `m` (one sample each, at `m.time_ms`), with
/// `job="redline"` added.
pub fn write_request(m: &Metrics) -> prompb::WriteRequest {
    let mut out = Vec::new();
    let ts = m.time_ms as i64;
    let mut push = |name: String, own: &[(&'static str, String)], le: Option<String>, v: f64| {
        let mut labels: Vec<prompb::Label> = vec![
            prompb::Label {
                name: "__name__".into(),
                value: name,
            },
            prompb::Label {
                name: "job".into(),
                value: "redline".into(),
            },
        ];
        for (k, v) in m.labels.iter().chain(own.iter()) {
            labels.push(prompb::Label {
                name: (*k).into(),
                value: v.clone(),
            });
        }
        if let Some(le) = le {
            labels.push(prompb::Label {
                name: "le".into(),
                value: le,
            });
        }
        labels.sort_by(|a, b| a.name.cmp(&b.name));
        out.push(prompb::TimeSeries {
            labels,
            samples: vec![prompb::Sample {
                value: v,
                timestamp: ts,
            }],
        });
    };
    for fam in &m.families {
        for s in &fam.series {
            match &s.value {
                Value::Num(v) => {
                    let name = match fam.kind {
                        Kind::Counter => format!("{}_total", fam.name),
                        _ => fam.name.to_string(),
                    };
                    push(name, &s.labels, None, *v);
                }
                Value::Hist(h) => {
                    let b = format!("{}_bucket", fam.name);
                    for (le, c) in LATENCY_BUCKETS_S.iter().zip(&h.buckets) {
                        push(b.clone(), &s.labels, Some(number_le(*le)), *c as f64);
                    }
                    push(b, &s.labels, Some("+Inf".into()), h.count as f64);
                    push(format!("{}_sum", fam.name), &s.labels, None, h.sum_s);
                    push(
                        format!("{}_count", fam.name),
                        &s.labels,
                        None,
                        h.count as f64,
                    );
                }
            }
        }
    }
    prompb::WriteRequest { timeseries: out }
}

/// The remote-write body: the protobuf, snappy block format.
pub fn remote_write_body(m: &Metrics) -> Vec<u8> {
    let raw = write_request(m).encode_to_vec();
    snap::raw::Encoder::new()
        .compress_vec(&raw)
        .unwrap_or_default()
}

/// How OTLP histograms are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpHistogram {
    /// Base-2 exponential buckets (OTLP `ExponentialHistogram`), from the
    /// run's own distribution: fine-grained whatever the latencies.
    Exponential,
    /// The explicit buckets of the text format (for receivers that take no
    /// exponential histograms).
    Explicit,
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

/// Most buckets an exponential histogram gets (OpenTelemetry SDKs' default).
const MAX_EXP_BUCKETS: i64 = 160;

/// The exponential buckets of `h` (µs): the scale (at most 8) that fits the
/// run's range in [`MAX_EXP_BUCKETS`] buckets, zero count, offset, counts.
pub fn exponential(h: &redline_stats::Hist) -> (i32, u64, i32, Vec<u64>) {
    let inner = h.inner();
    let mut values: Vec<(f64, u64)> = Vec::new();
    let mut zero = 0;
    if !h.is_empty() {
        for v in inner.iter_recorded() {
            let us = inner.median_equivalent(v.value_iterated_to());
            if us == 0 {
                zero += v.count_at_value();
            } else {
                values.push((us as f64 / 1e6, v.count_at_value()));
            }
        }
    }
    if values.is_empty() {
        return (0, zero, 0, Vec::new());
    }
    let index = |v: f64, scale: i32| -> i64 { (v.log2() * 2f64.powi(scale)).ceil() as i64 - 1 };
    let (lo, hi) = (values[0].0, values[values.len() - 1].0);
    let mut scale = 8;
    while scale > -4 && index(hi, scale) - index(lo, scale) + 1 > MAX_EXP_BUCKETS {
        scale -= 1;
    }
    let offset = index(lo, scale);
    let mut counts = vec![0u64; (index(hi, scale) - offset + 1) as usize];
    for (v, c) in values {
        let i = (index(v, scale) - offset) as usize;
        if let Some(x) = counts.get_mut(i) {
            *x += c;
        }
    }
    (scale, zero, offset as i32, counts)
}

/// The OTLP request for `m`.
pub fn otlp_request(m: &Metrics, hist: OtlpHistogram) -> ExportMetricsServiceRequest {
    let start = m.start_ms * 1_000_000;
    let time = m.time_ms * 1_000_000;
    let attrs = |own: &[(&'static str, String)]| -> Vec<KeyValue> {
        m.labels
            .iter()
            .chain(own.iter())
            .map(|(k, v)| kv(k, v))
            .collect()
    };
    let mut metrics = Vec::new();
    for fam in &m.families {
        let number_points = || -> Vec<otm::NumberDataPoint> {
            fam.series
                .iter()
                .filter_map(|s| match s.value {
                    Value::Num(v) => Some(otm::NumberDataPoint {
                        attributes: attrs(&s.labels),
                        start_time_unix_nano: start,
                        time_unix_nano: time,
                        value: Some(otm::number_data_point::Value::AsInt(v as i64)),
                        ..Default::default()
                    }),
                    _ => None,
                })
                .collect()
        };
        let data = match fam.kind {
            Kind::Counter => otm::metric::Data::Sum(otm::Sum {
                data_points: number_points(),
                aggregation_temporality: otm::AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            }),
            Kind::Gauge => otm::metric::Data::Gauge(otm::Gauge {
                data_points: number_points(),
            }),
            Kind::Histogram => {
                let hists = fam.series.iter().filter_map(|s| match &s.value {
                    Value::Hist(h) => Some((s, h)),
                    _ => None,
                });
                match hist {
                    OtlpHistogram::Exponential => {
                        otm::metric::Data::ExponentialHistogram(otm::ExponentialHistogram {
                            data_points: hists
                                .map(|(s, h)| {
                                    let (scale, zero, offset, counts) = exponential(&h.hist);
                                    let e = !h.hist.is_empty();
                                    otm::ExponentialHistogramDataPoint {
                                        attributes: attrs(&s.labels),
                                        start_time_unix_nano: start,
                                        time_unix_nano: time,
                                        count: h.count,
                                        sum: Some(h.sum_s),
                                        scale,
                                        zero_count: zero,
                                        positive: Some(
                                            otm::exponential_histogram_data_point::Buckets {
                                                offset,
                                                bucket_counts: counts,
                                            },
                                        ),
                                        min: e.then(|| h.hist.min() as f64 / 1e6),
                                        max: e.then(|| h.hist.max() as f64 / 1e6),
                                        ..Default::default()
                                    }
                                })
                                .collect(),
                            aggregation_temporality: otm::AggregationTemporality::Cumulative as i32,
                        })
                    }
                    OtlpHistogram::Explicit => otm::metric::Data::Histogram(otm::Histogram {
                        data_points: hists
                            .map(|(s, h)| {
                                // OTLP wants per-bucket counts, not cumulative ones.
                                let mut counts = Vec::with_capacity(h.buckets.len() + 1);
                                let mut prev = 0;
                                for c in h.buckets.iter().chain(std::iter::once(&h.count)) {
                                    counts.push(c.saturating_sub(prev));
                                    prev = *c;
                                }
                                let e = !h.hist.is_empty();
                                otm::HistogramDataPoint {
                                    attributes: attrs(&s.labels),
                                    start_time_unix_nano: start,
                                    time_unix_nano: time,
                                    count: h.count,
                                    sum: Some(h.sum_s),
                                    bucket_counts: counts,
                                    explicit_bounds: LATENCY_BUCKETS_S.to_vec(),
                                    min: e.then(|| h.hist.min() as f64 / 1e6),
                                    max: e.then(|| h.hist.max() as f64 / 1e6),
                                    ..Default::default()
                                }
                            })
                            .collect(),
                        aggregation_temporality: otm::AggregationTemporality::Cumulative as i32,
                    }),
                }
            }
        };
        metrics.push(otm::Metric {
            name: fam.name.into(),
            description: fam.help.into(),
            unit: if fam.kind == Kind::Histogram {
                "s".into()
            } else {
                String::new()
            },
            data: Some(data),
            ..Default::default()
        });
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![otm::ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "redline")],
                ..Default::default()
            }),
            scope_metrics: vec![otm::ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "redline".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The OTLP/HTTP body (binary protobuf).
pub fn otlp_body(m: &Metrics, hist: OtlpHistogram) -> Vec<u8> {
    otlp_request(m, hist).encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_buckets_hold_every_value() {
        let mut h = redline_stats::Hist::with_sigfig(2);
        for us in [0, 150, 1_000, 1_000, 9_000, 2_000_000] {
            h.record_us(us);
        }
        let (scale, zero, offset, counts) = exponential(&h);
        assert_eq!(zero, 1);
        assert_eq!(counts.iter().sum::<u64>(), 5);
        assert!(counts.len() as i64 <= MAX_EXP_BUCKETS);
        // 1 ms lies in bucket i where base^i < v <= base^(i+1).
        let base = 2f64.powf(2f64.powi(-scale));
        let i = ((0.001f64).log2() * 2f64.powi(scale)).ceil() as i32 - 1;
        assert!(base.powi(i) < 0.001 && 0.001 <= base.powi(i + 1) * 1.0000001);
        assert_eq!(counts[(i - offset) as usize], 2);
    }

    #[test]
    fn otlp_explicit_buckets_are_per_bucket_and_add_up() {
        let mut t = crate::model::Tracker::new("http://127.0.0.1:1/", None);
        let cfg = redline_stats::record::RunConfig::get(
            "http://127.0.0.1:1/",
            redline_stats::record::LoadModel::Closed {
                connections: 1,
                requests: Some(5),
                duration_s: None,
            },
        );
        let mut rec =
            redline_stats::RunRecord::new(cfg, Default::default(), "2026-01-01T00:00:00Z".into());
        let mut h = redline_stats::Hist::with_sigfig(2);
        for us in [210, 700, 700, 3_000, 90_000_000] {
            h.record_us(us);
        }
        let mut p = redline_stats::SeriesPoint::new(0, 5, 0, 100, &h);
        p.status_classes = [0, 5, 0, 0, 0];
        rec.series.push(p);
        rec.counters.completed = 5;
        t.finish(&rec);
        let r = otlp_request(&t.metrics(), OtlpHistogram::Explicit);
        let m = &r.resource_metrics[0].scope_metrics[0].metrics;
        let lat = m
            .iter()
            .find(|m| m.name == "redline_latency_seconds")
            .unwrap();
        let Some(otm::metric::Data::Histogram(hist)) = &lat.data else {
            panic!("{lat:?}");
        };
        let d = &hist.data_points[0];
        assert_eq!(d.count, 5);
        assert_eq!(d.bucket_counts.len(), LATENCY_BUCKETS_S.len() + 1);
        assert_eq!(d.bucket_counts.iter().sum::<u64>(), 5);
        let bucket = |s: f64| LATENCY_BUCKETS_S.iter().position(|b| *b >= s).unwrap();
        assert_eq!(d.bucket_counts[bucket(0.00021)], 1, "0.21 ms");
        assert_eq!(d.bucket_counts[bucket(0.0007)], 2, "0.7 ms");
        assert_eq!(d.bucket_counts[bucket(0.003)], 1, "3 ms");
        assert_eq!(*d.bucket_counts.last().unwrap(), 1, "90 s: over 60 s");
        let done = m.iter().find(|m| m.name == "redline_run_finished").unwrap();
        assert!(matches!(done.data, Some(otm::metric::Data::Gauge(_))));
    }

    #[test]
    fn remote_write_round_trips_through_snappy() {
        let t = crate::model::Tracker::new("http://127.0.0.1:1/", None);
        let m = t.metrics();
        let body = remote_write_body(&m);
        let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
        let w = prompb::WriteRequest::decode(raw.as_slice()).unwrap();
        let s = w
            .timeseries
            .iter()
            .find(|s| {
                s.labels
                    .iter()
                    .any(|l| l.name == "__name__" && l.value == "redline_requests_sent_total")
            })
            .unwrap();
        let names: Vec<&str> = s.labels.iter().map(|l| l.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "labels sorted by name");
        assert!(names.contains(&"job") && names.contains(&"target"));
    }
}
