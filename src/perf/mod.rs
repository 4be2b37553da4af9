//! The perftest-style loops and what they report: [`loops`] (written once against
//! the transport's `Connection`), [`report`] (the model, perftest's header, the
//! verdict), [`table`] (the results table) and [`finish`] (table, JSON, exit status).

pub mod finish;
pub mod loops;
pub mod pattern;
pub mod report;
pub mod table;
