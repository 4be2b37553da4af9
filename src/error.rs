//! The one error type of a run, from the failing verb or socket to the exit status.
//!
//! Every failure has a [`ErrorKind`] that says *why* in a word a program can branch on
//! (`compare` stops at once when the server is gone, and keeps going past a point's own
//! failure), and one line for a person. The kind decides the exit status, here and
//! nowhere else; `--json` writes both as `"error": {"kind": …, "message": …}`.

use std::fmt;

use serde::{Deserialize, Serialize};

pub use crate::text::one_line;

/// Exit status for a run that failed for a reason the user can fix (bad input, no
/// device, peer gone): 2, as perftest and ripgrep use.
pub const EXIT_ERROR: u8 = 2;

/// Exit status for a run whose thresholds or validation failed.
pub const EXIT_VERDICT: u8 = 1;

/// How the error that ends a test at a time limit begins (a [`RunLimit`]: `serve
/// --max-time`, sent to its client, or a side's own `--max-time`): how a side tells that
/// end from other refusals (the kind on the wire is `refused`: a kind of its own would be
/// refused by older peers).
pub const OVERTIME: &str = "the test ran past";

/// How the error begins that a one-shot server's control channel gives when a
/// termination signal stops it ([`crate::session::protocol::Channel::stop_on_signal`]):
/// its own run drops it (a stop, not a failure: `stopped` says what), its client is
/// told it as the server's leaving (kind `peer_closed`).
pub const STOPPED: &str = "stopped by a signal";

/// Why a run failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Bad flags or a spec the rules refuse.
    Usage,
    /// No RDMA device (or no provider, or no kernel support).
    NoDevice,
    /// A verb or an adapter call failed.
    Device,
    /// Nothing answers at the peer's address.
    PeerUnreachable,
    /// The peer closed the control connection or a data connection.
    PeerClosed,
    /// The peer sent nothing, or nothing progressed, for the timeout.
    PeerSilent,
    /// The two sides asked for different parameters.
    Mismatch,
    /// The peer (or this side) refused what was asked: another protocol or
    /// version, an operation the backend lacks, a malformed message.
    Refused,
    /// Work completed with an error status (`IBV_WC_RETRY_EXC_ERR`, …).
    Completion,
    /// A `--min-bw` / `--max-lat` threshold failed.
    Threshold,
    /// `--validate` found corrupted bytes.
    Validation,
    /// A local file or socket failed.
    Io,
    /// `--auth-key`: the peer does not hold the key, or only one side has one.
    Auth,
    /// The server is running another client's test.
    Busy,
    /// This side's port went down: the cause of the completion error or silence seen.
    LinkDown,
}

impl ErrorKind {
    /// Its name in JSON and logs: `peer_closed`, …
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Usage => "usage",
            ErrorKind::NoDevice => "no_device",
            ErrorKind::Device => "device",
            ErrorKind::PeerUnreachable => "peer_unreachable",
            ErrorKind::PeerClosed => "peer_closed",
            ErrorKind::PeerSilent => "peer_silent",
            ErrorKind::Mismatch => "mismatch",
            ErrorKind::Refused => "refused",
            ErrorKind::Completion => "completion",
            ErrorKind::Threshold => "threshold",
            ErrorKind::Validation => "validation",
            ErrorKind::Io => "io",
            ErrorKind::Auth => "auth",
            ErrorKind::Busy => "busy",
            ErrorKind::LinkDown => "link_down",
        }
    }

    /// The process exit status: 1 for a verdict (threshold, validation), 2 for
    /// everything else, as perftest and ripgrep use.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Threshold | ErrorKind::Validation => EXIT_VERDICT,
            _ => EXIT_ERROR,
        }
    }

    /// Whether nothing more can run against the peer now: it is gone, it refuses this
    /// side's key, or it is busy with another client.
    pub fn peer_unavailable(self) -> bool {
        matches!(
            self,
            ErrorKind::PeerUnreachable | ErrorKind::PeerClosed | ErrorKind::Auth | ErrorKind::Busy
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failure: its kind, one line for a person, and (completion errors) the work
/// completion's status name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Error {
    /// Why, in a word.
    pub kind: ErrorKind,
    /// What, in one line.
    pub message: String,
    /// The work completion status (`IBV_WC_RETRY_EXC_ERR`) of a completion error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The rule that refused a test's input (kinds `usage` and `refused`): the same
    /// whether the command line or a program calling the library gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Box<Refusal>>,
}

/// Which rule refused a test, and the flags it names: what a program branches on
/// (JSON `error.refusal`, `{"rule": "range", "flag": "-s"}`). Made where the rule is,
/// in the spec's validation (or, for what a device lacks, where the device says so).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Refusal {
    /// A value outside what the flag takes: `-s 3G`, `-q 0`, `-s 16` on atomics.
    Range {
        /// `-s`.
        flag: String,
    },
    /// A flag this test does not take: `-b` on a latency test, `-I` on read_bw.
    NotThisTest {
        /// `-b`.
        flag: String,
        /// `write_lat`.
        test: String,
    },
    /// Two flags that exclude each other: `-D` with `-a`.
    Exclusive {
        /// `["-D", "-a"]`.
        flags: [String; 2],
    },
    /// A flag that needs another: `--run_infinitely` needs `-D`.
    Needs {
        /// `--run_infinitely`.
        flag: String,
        /// `-D`.
        needs: String,
    },
    /// A flag that does not go with a backend or a mode: `-R` with NetworkDirect.
    NotWith {
        /// `-R`.
        flag: String,
        /// `NetworkDirect`.
        with: String,
    },
    /// What the device cannot do: a message over its largest, no atomics.
    Device {
        /// `message size`, `atomics`.
        what: String,
    },
}

impl Refusal {
    /// `flag`'s value is out of range.
    pub fn range(flag: &str) -> Refusal {
        Refusal::Range { flag: flag.into() }
    }

    /// `test` does not take `flag`.
    pub fn not_this_test(flag: &str, test: &str) -> Refusal {
        Refusal::NotThisTest { flag: flag.into(), test: test.into() }
    }

    /// `a` and `b` exclude each other.
    pub fn exclusive(a: &str, b: &str) -> Refusal {
        Refusal::Exclusive { flags: [a.into(), b.into()] }
    }

    /// `flag` needs `needs`.
    pub fn needs(flag: &str, needs: &str) -> Refusal {
        Refusal::Needs { flag: flag.into(), needs: needs.into() }
    }

    /// `flag` does not go with `with`.
    pub fn not_with(flag: &str, with: &str) -> Refusal {
        Refusal::NotWith { flag: flag.into(), with: with.into() }
    }

    /// The kind of error it makes: the device's lack is `refused`, the rest `usage`
    /// (both exit 2).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Refusal::Device { .. } => ErrorKind::Refused,
            _ => ErrorKind::Usage,
        }
    }
}

impl Error {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: one_line(&message.into()), status: None, refusal: None }
    }

    /// Input refused by rule `r` (its kind: `usage`, or `refused` for a device's lack).
    pub fn refusal(r: Refusal, message: impl Into<String>) -> Self {
        let kind = r.kind();
        Error { refusal: Some(Box::new(r)), ..Error::new(kind, message) }
    }

    /// Bad input.
    pub fn usage(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Usage, message)
    }

    /// A local file or socket failed.
    pub fn io(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Io, message)
    }

    /// The control channel carried something that is not the protocol.
    pub fn refused(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Refused, message)
    }

    /// The same error with `context: ` in front of its message.
    pub fn context(mut self, context: &str) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The longest one test may run and whose limit that is: a side's deadline for every
/// loop and every read of a test, which no trickling or beating peer extends. The error
/// that ends a test there names the flag that set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLimit {
    /// From the test's start.
    pub after: std::time::Duration,
    /// `serve --max-time` (a served client's test), else this side's own `--max-time`.
    pub serve: bool,
}

impl fmt::Display for RunLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.after.as_secs_f64();
        if self.serve {
            write!(f, "this server's limit of {secs} s (serve --max-time)")
        } else {
            write!(f, "this side's limit of {secs} s (--max-time)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_exit_codes_and_names_once() {
        assert_eq!(ErrorKind::Threshold.exit_code(), 1);
        assert_eq!(ErrorKind::Validation.exit_code(), 1);
        assert_eq!(ErrorKind::PeerClosed.exit_code(), 2);
        assert_eq!(ErrorKind::Usage.exit_code(), 2);
        let json = serde_json::to_string(&ErrorKind::PeerUnreachable).unwrap();
        assert_eq!(json, "\"peer_unreachable\"");
        assert_eq!(ErrorKind::NoDevice.to_string(), "no_device");
        assert!(
            ErrorKind::PeerClosed.peer_unavailable() && !ErrorKind::Completion.peer_unavailable()
        );
    }

    #[test]
    fn messages_are_one_printable_line() {
        let e = Error::usage("bad\nline\x1b[31m red");
        assert_eq!(e.message, "bad line [31m red");
        let long = "x".repeat(600);
        assert_eq!(one_line(&long).chars().count(), 501);
        // Separators and bidi overrides would start a new line or reverse a log's text.
        let forged = "ok\u{2028}2026-12-01 fake ok\u{202E}kl\u{2066}x\u{200B}y\u{FEFF}";
        assert_eq!(one_line(forged), "ok 2026-12-01 fake ok kl x y ");
        assert_eq!(one_line("µs — ≥ 5 %"), "µs — ≥ 5 %", "ordinary text is kept");
        assert_eq!(
            Error::io("disk").context("writing out.json").to_string(),
            "writing out.json: disk"
        );
    }
}
