//! redline's own sans-IO HTTP/2 client (RFC 9113, RFC 7541; issue 18):
//! frames (`frame.rs`), HPACK (`hpack/`), requests encoded once
//! (`request.rs`) and the connection state behind the session seam
//! (`conn.rs`: [`Http2Session`]). No socket, timer or task lives here.

pub(crate) mod conn;
pub mod frame;
pub mod hpack;
pub(crate) mod request;
#[cfg(test)]
mod tests;

pub use conn::Http2Session;
pub use frame::error_name;
pub use request::Http2Request;
