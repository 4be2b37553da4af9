//! The control channel between the two sides of a test: the frames and messages
//! ([`protocol`]), and opening it ([`connect`]).

pub mod connect;
pub mod protocol;
