//! Run history in an embedded SQLite database (issue 5). Work in progress.
#![deny(missing_docs)]
