//! Test fixtures of the audit: loads built by hand, shared by the audit's and its checks' unit tests.

use crate::discover::Kind;
use crate::load::{Entry, Load, View};

pub(crate) fn entry(url: &str, kind: Kind, ct: &str, wire: u64) -> Entry {
    Entry {
        url: url.into(),
        kind,
        parent: None,
        third_party: false,
        from_cache: false,
        conditional: false,
        start_ms: 0.0,
        phases: Default::default(),
        end_ms: 0.0,
        status: Some(200),
        error: None,
        wire_bytes: wire + 200,
        body_wire_bytes: wire,
        decoded_bytes: wire,
        decode_capped: false,
        content_type: ct.into(),
        content_encoding: None,
        cache_control: None,
        expires: None,
        etag: None,
        last_modified: None,
        vary: None,
        freshness: None,
        conn: Some(1),
        protocol: Some("http/1.1".into()),
        reused: false,
        retried: false,
        alt_svc: false,
        h3_fallback: None,
        after_load: false,
        redirect_to: None,
        html_size: None,
        intrinsic: None,
        by_script: None,
        headers: Vec::new(),
        request_headers: Vec::new(),
        body: None,
    }
}

pub(crate) fn page(img: Entry) -> Load {
    Load {
        view: View::First,
        entries: vec![
            entry("http://a.test/", Kind::Document, "text/html", 500),
            img,
        ],
        elapsed_ms: 1.0,
        render_ms: None,
        requests: 2,
        from_cache: 0,
        not_modified: 0,
        wire_bytes: 0,
        decoded_bytes: 0,
        connections: 1,
        conns: Vec::new(),
        hosts: Vec::new(),
        errors: 0,
        truncated: false,
        discovery: Default::default(),
        started_at: String::new(),
        budget_exhausted: false,
        budget_used: 0,
        alt_svc: Vec::new(),
    }
}
