//! Byte-buffer tests of the HTTP/2 session: frames a server would send, written by hand.
