//! Page loader and HTTP tuning audit (issue 7): `redline page` loads a page
//! with everything it embeds the way a browser does (first, revalidate and cached
//! views, a waterfall), and `redline audit` checks the HTTP-level advice
//! (caching, validators, compression, keep-alive, image sizes, weight) and
//! says how to fix each finding in Apache, nginx and lighttpd.
#![deny(missing_docs)]

pub mod audit;
pub mod browser;
pub mod cache;
pub mod css;
pub mod discover;
pub mod dom;
pub mod h2;
pub mod h3;
pub mod har;
pub mod http;
pub mod load;
pub mod modules;
pub mod page;
pub mod render;
pub mod srcset;
pub mod trace;
pub mod viewport;

/// The `url` crate, re-exported so callers use the same `Url` type.
pub use url;
