//! Page loader and HTTP tuning audit (issue 7). Work in progress.
#![deny(missing_docs)]
