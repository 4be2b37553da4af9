//! The control channel between the two sides of a test.

pub mod protocol;
