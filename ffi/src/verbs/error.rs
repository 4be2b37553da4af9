use std::fmt;
use std::io;

/// A failed verbs call: which verb, on what, and why (its errno, a request refused
/// before it reached the library, or a timeout). One pointer: a post's or poll's
/// `Result` travels in a register, so the hot paths inlined into a loop test a register
/// instead of storing, loading and testing a tag in memory.
#[derive(Debug)]
pub struct Error(Box<Failure>);

#[derive(Debug)]
struct Failure {
    verb: &'static str,
    target: Option<String>,
    cause: Cause,
}

#[derive(Debug)]
enum Cause {
    Os(io::Error),
    Invalid(String),
    Timeout(std::time::Duration),
}

impl Error {
    /// Captures `errno` right after a call that reports failure through it.
    pub(crate) fn last_os(verb: &'static str) -> Self {
        Self::from_errno(verb, io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    /// For calls that return the errno value itself (`ibv_query_device`, …).
    #[cold]
    pub(crate) fn from_errno(verb: &'static str, errno: i32) -> Self {
        Self::new(verb, Cause::Os(io::Error::from_raw_os_error(errno)))
    }

    /// A request refused before the library saw it (out-of-bounds SGE, wrong QP type).
    #[cold]
    pub(crate) fn invalid(verb: &'static str, why: impl Into<String>) -> Self {
        Self::new(verb, Cause::Invalid(why.into()))
    }

    /// A wait that ran out of time.
    pub(crate) fn timeout(verb: &'static str, after: std::time::Duration) -> Self {
        Self::new(verb, Cause::Timeout(after))
    }

    fn new(verb: &'static str, cause: Cause) -> Self {
        Error(Box::new(Failure { verb, target: None, cause }))
    }

    /// Names the object the verb was applied to (`rxe0`, `rxe0 port 1`).
    pub(crate) fn on(mut self, target: impl Into<String>) -> Self {
        self.0.target = Some(target.into());
        self
    }

    /// The C verb that failed, e.g. `ibv_open_device`.
    pub fn verb(&self) -> &'static str {
        self.0.verb
    }

    /// The errno value (0 when the failure was not an OS error).
    pub fn errno(&self) -> i32 {
        match &self.0.cause {
            Cause::Os(e) => e.raw_os_error().unwrap_or(0),
            _ => 0,
        }
    }

    /// Whether the request was refused before it reached the library.
    pub fn is_invalid_request(&self) -> bool {
        matches!(self.0.cause, Cause::Invalid(_))
    }

    /// Whether a wait timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self.0.cause, Cause::Timeout(_))
    }

    /// Whether the failure means "this machine has no RDMA stack": no kernel support
    /// (ENOSYS), no uverbs module or device files (ENOENT, ENODEV).
    pub fn is_no_rdma_stack(&self) -> bool {
        matches!(self.errno(), libc::ENOSYS | libc::ENOENT | libc::ENODEV)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.verb)?;
        if let Some(t) = &self.0.target {
            write!(f, "({t})")?;
        }
        match &self.0.cause {
            Cause::Os(e) => write!(f, " failed: {e}"),
            Cause::Invalid(why) => write!(f, " refused: {why}"),
            Cause::Timeout(after) => write!(f, " timed out after {after:?}"),
        }
    }
}

impl From<crate::types::RangeError> for Error {
    fn from(e: crate::types::RangeError) -> Self {
        Error::invalid(e.what, e.reason())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0.cause {
            Cause::Os(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_verb_target_and_errno() {
        let e = Error::from_errno("ibv_query_port", libc::EINVAL).on("rxe0 port 9");
        assert_eq!(e.verb(), "ibv_query_port");
        assert_eq!(e.errno(), libc::EINVAL);
        let text = e.to_string();
        assert!(text.starts_with("ibv_query_port(rxe0 port 9) failed: "), "{text}");
        assert!(text.contains("os error 22"), "{text}");
        assert!(!e.is_no_rdma_stack());
        assert!(Error::from_errno("ibv_get_device_list", libc::ENOSYS).is_no_rdma_stack());
    }

    #[test]
    fn refused_and_timed_out_requests_say_so() {
        let e = Error::invalid("ibv_post_send", "SGE 0 ends at 70 past the 64-byte region");
        assert!(e.is_invalid_request() && !e.is_timeout());
        assert_eq!(e.errno(), 0);
        assert_eq!(
            e.to_string(),
            "ibv_post_send refused: SGE 0 ends at 70 past the 64-byte region"
        );
        let e = Error::timeout("ibv_get_cq_event", std::time::Duration::from_millis(50));
        assert!(e.is_timeout());
        assert_eq!(e.to_string(), "ibv_get_cq_event timed out after 50ms");
    }
}
