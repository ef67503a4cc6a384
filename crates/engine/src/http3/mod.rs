//! redline's own sans-IO HTTP/3 client (RFC 9114, RFC 9204) on the QUIC
//! streams of `quinn-proto` (issue 32): varints and frames (`frame.rs`),
//! QPACK with the static table only (`qpack.rs`; HPACK's prefix integers and
//! Huffman code reused), requests encoded once (`request.rs`) and the
//! connection behind the session seam (`conn.rs`: [`Http3Session`], whose
//! bytes are UDP datagrams and which adds QUIC's timer). No socket, timer or
//! task lives here. Why not the `h3` crate: it is async (a runtime or a
//! no-op-waker adapter in the engine, a poll of every stream per call, as
//! the `h2` adapter had), where this layer is a few hundred lines over
//! quinn-proto's synchronous stream API.

pub(crate) mod conn;
pub mod frame;
pub mod qpack;
pub(crate) mod request;
#[cfg(test)]
mod tests;

pub use conn::{Http3Config, Http3Session};
pub use request::Http3Request;
