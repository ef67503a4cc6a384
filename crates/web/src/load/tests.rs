//! Unit tests of `load.rs`, kept in their own file so that file reads as its job.

use super::*;

#[test]
fn sites() {
    assert!(same_site("www.example.com", "static.example.com"));
    assert!(!same_site("example.com", "cdn.other.net"));
    assert!(same_site("127.0.0.1", "127.0.0.1"));
    assert!(!same_site("127.0.0.1", "127.0.0.2"));
}
