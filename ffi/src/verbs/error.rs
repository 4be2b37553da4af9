use std::fmt;
use std::io;

/// A failed verbs call: which verb, on what, and the errno it gave.
#[derive(Debug)]
pub struct Error {
    verb: &'static str,
    target: Option<String>,
    source: io::Error,
}

impl Error {
    /// Captures `errno` right after a call that reports failure through it.
    pub(crate) fn last_os(verb: &'static str) -> Self {
        Self::from_errno(verb, io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    /// For calls that return the errno value itself (`ibv_query_device`, …).
    pub(crate) fn from_errno(verb: &'static str, errno: i32) -> Self {
        Error {
            verb,
            target: None,
            source: io::Error::from_raw_os_error(errno),
        }
    }

    /// Names the object the verb was applied to (`rxe0`, `rxe0 port 1`).
    pub(crate) fn on(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// The C verb that failed, e.g. `ibv_open_device`.
    pub fn verb(&self) -> &'static str {
        self.verb
    }

    /// The errno value (0 if the library set none).
    pub fn errno(&self) -> i32 {
        self.source.raw_os_error().unwrap_or(0)
    }

    /// Whether the failure means "this machine has no RDMA stack": no kernel support
    /// (ENOSYS), no uverbs module or device files (ENOENT, ENODEV).
    pub fn is_no_rdma_stack(&self) -> bool {
        matches!(self.errno(), libc::ENOSYS | libc::ENOENT | libc::ENODEV)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Some(t) => write!(f, "{}({t}) failed: {}", self.verb, self.source),
            None => write!(f, "{} failed: {}", self.verb, self.source),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
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
        assert!(
            text.starts_with("ibv_query_port(rxe0 port 9) failed: "),
            "{text}"
        );
        assert!(text.contains("os error 22"), "{text}");
        assert!(!e.is_no_rdma_stack());
        assert!(Error::from_errno("ibv_get_device_list", libc::ENOSYS).is_no_rdma_stack());
    }
}
