//! What a response head needs, collected from the HPACK decoder: `:status`,
//! `content-length`, and what [`Want`] asks (`server`, `location`, every
//! header for a scenario); it counts the list size itself so a huge list is
//! never kept.

use crate::h1::Capture;
use crate::http2::hpack::Sink;
use crate::session::{Answer, Want};

/// Collects what a response head needs: `:status`, `content-length`, and
/// what [`Want`] asks; counts the list size itself so a huge list is not kept.
pub(crate) struct HeadSink {
    pub(crate) want: Want,
    pub(crate) status: Option<u16>,
    pub(crate) bad: bool,
    pub(crate) content_length: Option<u64>,
    server: Option<String>,
    alt_svc: Option<String>,
    location: Option<String>,
    headers: Vec<(String, String)>,
    size: usize,
    pub(crate) over: bool,
}

impl HeadSink {
    pub(crate) fn new(want: Want) -> HeadSink {
        HeadSink {
            want,
            status: None,
            bad: false,
            content_length: None,
            server: None,
            alt_svc: None,
            location: None,
            headers: Vec::new(),
            size: 0,
            over: false,
        }
    }

    fn capture_headers(&self) -> bool {
        matches!(self.want.capture, Some((true, _)))
    }

    pub(crate) fn answer(&mut self, want: Want, status: u16) -> Answer {
        Answer {
            server: self.server.take(),
            alt_svc: self.alt_svc.take(),
            location: self
                .location
                .take()
                .filter(|_| (300..400).contains(&status)),
            capture: want.capture.map(|(want_headers, want_body)| {
                Box::new(Capture {
                    want_headers,
                    want_body,
                    max: want.capture_max,
                    headers: std::mem::take(&mut self.headers),
                    ..Default::default()
                })
            }),
        }
    }
}

impl Sink for HeadSink {
    fn wants(&mut self, name: &[u8]) -> bool {
        match name {
            b":status" | b"content-length" => true,
            b"server" | b"alt-svc" => self.want.server,
            b"location" => self.want.location,
            _ => self.capture_headers(),
        }
    }

    fn field(&mut self, name: &[u8], value: Option<&[u8]>) {
        self.size += name.len() + value.map_or(0, <[u8]>::len) + 32;
        if self.size > super::MAX_HEADER_LIST as usize {
            self.over = true;
            return;
        }
        let Some(v) = value else { return };
        match name {
            b":status" => {
                let ok = v.len() == 3 && v.iter().all(u8::is_ascii_digit);
                if !ok || self.status.is_some() {
                    self.bad = true;
                } else {
                    self.status = Some(
                        (v[0] - b'0') as u16 * 100
                            + (v[1] - b'0') as u16 * 10
                            + (v[2] - b'0') as u16,
                    );
                }
                return;
            }
            b"content-length" => {
                let n = std::str::from_utf8(v)
                    .ok()
                    .and_then(|t| t.parse::<u64>().ok());
                match (n, self.content_length) {
                    (Some(n), None) => self.content_length = Some(n),
                    (Some(n), Some(m)) if n == m => {}
                    _ => self.bad = true,
                }
            }
            b"server" if self.want.server && self.server.is_none() => {
                self.server = Some(String::from_utf8_lossy(v).chars().take(200).collect());
            }
            b"alt-svc" if self.want.server => {
                crate::head::join_kept(&mut self.alt_svc, &String::from_utf8_lossy(v));
            }
            b"location" if self.want.location && self.location.is_none() => {
                self.location = Some(String::from_utf8_lossy(v).into_owned());
            }
            _ => {}
        }
        if name.first() != Some(&b':') && self.capture_headers() {
            self.headers.push((
                String::from_utf8_lossy(name).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
        }
    }
}
