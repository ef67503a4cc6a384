//! HPACK tests: RFC 7541 Appendix C vectors and encoder round trips.
