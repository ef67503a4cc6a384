//! Renderers of what `page` and `audit` produce, kept next to the types they
//! read so `redline-report` (run-record sinks) depends on `stats` only:
//! [`audit_html`] draws the audit and page-load HTML, [`page_compare`]
//! compares two saved page loads. Both reuse the report crate's formatting
//! helpers (`esc`, `bytes`, `count`, the Mann-Whitney test).

pub mod audit_html;
pub mod page_compare;
