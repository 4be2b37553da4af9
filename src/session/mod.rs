//! The control channel between the two sides of a test: the frames and messages
//! ([`protocol`]), opening it ([`connect`]), and its optional authentication ([`auth`]).

pub mod auth;
pub mod connect;
pub mod protocol;
