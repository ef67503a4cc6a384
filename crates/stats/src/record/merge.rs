//! Merging run records made at the same time (`a += &b`), and why a record
//! could not be read.

use super::*;

/// Why a run record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Not JSON, or not the expected shape.
    #[error("not a valid run record: {0}")]
    Json(serde_json::Error),
    /// JSON without `"format": "redline.run"`.
    #[error("not a redline run record (missing \"format\": \"redline.run\")")]
    NotARunRecord,
    /// Written by a newer redline.
    #[error("run record version {0} is newer than this redline understands ({FORMAT_VERSION}); upgrade redline")]
    NewerVersion(u64),
    /// A shape past the JSON bounds (`files::json_shape`): too many values
    /// or too long a string.
    #[error("not a valid run record: {0}")]
    Shape(String),
}

impl AddAssign<&RunRecord> for RunRecord {
    /// Merges a run made at the same time (e.g. from another machine): counts and
    /// histograms add exactly, the duration is the longer one, the load adds up.
    fn add_assign(&mut self, o: &RunRecord) {
        self.duration_s = self.duration_s.max(o.duration_s);
        self.interrupted |= o.interrupted;
        self.client_limited |= o.client_limited;
        self.merged_runs = self.merged_runs.saturating_add(o.merged_runs);
        if o.started_at < self.started_at {
            self.started_at = o.started_at.clone();
        }
        self.config.threads = self.config.threads.saturating_add(o.config.threads);
        self.config.insecure |= o.config.insecure;
        // Different segments merged: the result is no longer one segment.
        if self.config.segment != o.config.segment {
            self.config.segment = None;
        }
        // Shares of one replay schedule add up; anything else has none.
        let same = match (&mut self.config.schedule, &o.config.schedule) {
            (Some(a), Some(b)) => a.merge(b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.config.schedule = None;
        }
        match (&mut self.scheduled_start, &o.scheduled_start) {
            (Some(a), Some(b)) => {
                if b.at < a.at {
                    a.at = b.at.clone();
                }
                a.late_ms = a.late_ms.max(b.late_ms);
            }
            (None, Some(b)) => self.scheduled_start = Some(b.clone()),
            _ => {}
        }
        if self.server_config.is_none() {
            self.server_config = o.server_config.clone();
        }
        match (&mut self.config.load, &o.config.load) {
            (
                LoadModel::Closed {
                    connections: a,
                    requests: ra,
                    ..
                },
                LoadModel::Closed {
                    connections: b,
                    requests: rb,
                    ..
                },
            ) => {
                *a = a.saturating_add(*b);
                if let (Some(x), Some(y)) = (ra.as_mut(), rb) {
                    *x = x.saturating_add(*y);
                }
            }
            (
                LoadModel::Open {
                    rate: a,
                    max_connections: ca,
                    requests: ra,
                    ..
                },
                LoadModel::Open {
                    rate: b,
                    max_connections: cb,
                    requests: rb,
                    ..
                },
            ) => {
                *a += b;
                *ca = ca.saturating_add(*cb);
                if let (Some(x), Some(y)) = (ra.as_mut(), rb) {
                    *x = x.saturating_add(*y);
                }
            }
            _ => {}
        }
        if self.server.software.is_none() {
            self.server.software = o.server.software.clone();
        }
        if self.server.alt_svc.is_none() {
            self.server.alt_svc = o.server.alt_svc.clone();
        }
        if self.server.http3_endpoint.is_none() {
            self.server.http3_endpoint = o.server.http3_endpoint.clone();
        }
        if self.server.document_length.is_none() {
            self.server.document_length = o.server.document_length;
        }
        let mut saturated = self.counters.add_saturating(&o.counters);
        for (k, v) in &o.status_codes {
            saturated |= sat_add(self.status_codes.entry(k.clone()).or_insert(0), *v);
        }
        saturated |= merge_counts(&mut self.errors, &o.errors);
        self.latency.merge(&o.latency);
        self.service_time.merge(&o.service_time);
        self.scheduler_lag.merge(&o.scheduler_lag);
        self.connect.merge(&o.connect);
        self.tls.merge(&o.tls);
        self.waiting.merge(&o.waiting);
        self.transfer.merge(&o.transfer);
        merge_series(&mut self.series, &o.series);
        let (ta, tb) = (self.client.threads as f64, o.client.threads as f64);
        if ta + tb > 0.0 {
            self.client.cpu_share =
                (self.client.cpu_share * ta + o.client.cpu_share * tb) / (ta + tb);
        }
        self.client.user_s += o.client.user_s;
        self.client.sys_s += o.client.sys_s;
        self.client.threads = self.client.threads.saturating_add(o.client.threads);
        self.client.steal_s += o.client.steal_s;
        saturated |= sat_add(&mut self.client.syn_retransmits, o.client.syn_retransmits);
        saturated |= sat_add(&mut self.client.listen_overflows, o.client.listen_overflows);
        self.client.busiest_thread_share = self
            .client
            .busiest_thread_share
            .max(o.client.busiest_thread_share);
        for w in &o.warnings {
            if !self.warnings.contains(w) {
                self.warnings.push(w.clone());
            }
        }
        match (&mut self.server_watch, &o.server_watch) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => self.server_watch = Some(b.clone()),
            _ => {}
        }
        if self.server_status.is_none() {
            self.server_status = o.server_status.clone();
        }
        crate::requests::merge_requests(&mut self.requests, &o.requests);
        match (&mut self.replay, &o.replay) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => self.replay = Some(b.clone()),
            _ => {}
        }
        match (&mut self.journeys, &o.journeys) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => self.journeys = Some(b.clone()),
            _ => {}
        }
        // Stage plans add up like the load; summaries and the knee are then
        // recomputed from the merged series, so the merge stays exact.
        match (&mut self.config.stages, &o.config.stages) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => self.config.stages = Some(b.clone()),
            _ => {}
        }
        if saturated {
            self.warn(SATURATED, saturated_message());
        }
        self.derive();
        crate::stages::analyze(self);
    }
}
