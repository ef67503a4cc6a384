//! Placeholder (issue 5).
