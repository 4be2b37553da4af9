//! The perftest-style loops and what they report: [`loops`] (written once against
//! the transport's `Connection`), [`report`] (the model, perftest's header, the
//! verdict), [`table`] (the results table), [`finish`] (table, JSON, exit status) and
//! [`stored`] (a run recorded in the results store, `--store`).

pub mod finish;
pub mod loops;
pub mod pattern;
pub mod report;
pub mod stored;
pub mod table;
