//! The perftest-style loops and what they report: [`loops`] (written once against
//! the transport's `Connection`), [`header`] (perftest's header, the
//! verdict), [`table`] (the results table), [`finish`] (table, JSON, exit status) and
//! [`stored`] (a run recorded in the results store, `--store`).

pub mod finish;
pub mod header;
pub mod loops;
pub mod payload;
pub mod stored;
pub mod table;
