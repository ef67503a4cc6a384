//! HTTP field syntax every codec shares (RFC 9110 §5): which header names and
//! values can be sent. The run's `-H`, a scenario's headers and an HTTP/2
//! request's fields are checked by this one rule.

/// Whether `name: value` can be sent as a header (a token name; no CR or LF
/// in the value): the run's `-H` and a scenario's headers are checked alike.
pub fn header_ok(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b))
        && !value.contains('\r')
        && !value.contains('\n')
}
