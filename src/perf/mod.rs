//! The perftest-style tests: `write-bw read-bw send-bw atomic-bw write-lat read-lat
//! send-lat atomic-lat`, written once against the backend-neutral transport.

pub mod config;
pub mod loops;
pub mod report;
pub mod run;
