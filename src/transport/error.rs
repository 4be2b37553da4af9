//! Why a transport call failed ([`TransportError`]), and the kind of error each cause
//! becomes for the run.

use std::fmt;

/// Why a transport call failed.
#[derive(Debug)]
pub enum TransportError {
    /// No such device or adapter (or no provider at all).
    NoDevice(String),
    /// The backend cannot do this.
    Unsupported(String),
    /// The peer closed a data connection.
    PeerClosed(String),
    /// Nothing moved on a data connection for the timeout.
    PeerSilent(String),
    /// A local or remote range does not fit its buffer.
    Range(ffi::types::RangeError),
    /// The verbs layer failed.
    #[cfg(target_os = "linux")]
    Verbs(ffi::verbs::Error),
    /// A NetworkDirect call failed.
    Nd(ffi::nd::NdError),
    /// The connection is broken (its state says why).
    Broken(String),
    /// The test ran past its end ([`super::tcp::StreamOptions::end`]), set `limit` before.
    Overtime {
        /// The limit the end came from.
        limit: crate::error::RunLimit,
    },
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::NoDevice(why)
            | TransportError::Unsupported(why)
            | TransportError::PeerClosed(why)
            | TransportError::PeerSilent(why)
            | TransportError::Broken(why) => f.write_str(why),
            TransportError::Range(e) => write!(f, "{e}"),
            #[cfg(target_os = "linux")]
            TransportError::Verbs(e) => write!(f, "{e}"),
            TransportError::Nd(e) => write!(f, "{e}"),
            TransportError::Overtime { limit } => write!(f, "the test ran past {limit}"),
        }
    }
}

impl std::error::Error for TransportError {}

impl From<TransportError> for crate::error::Error {
    fn from(e: TransportError) -> Self {
        use crate::error::ErrorKind;
        let kind = match &e {
            TransportError::NoDevice(_) => ErrorKind::NoDevice,
            TransportError::Unsupported(_) | TransportError::Overtime { .. } => ErrorKind::Refused,
            TransportError::PeerClosed(_) => ErrorKind::PeerClosed,
            TransportError::PeerSilent(_) => ErrorKind::PeerSilent,
            TransportError::Range(_) | TransportError::Nd(_) | TransportError::Broken(_) => {
                ErrorKind::Device
            }
            #[cfg(target_os = "linux")]
            TransportError::Verbs(_) => ErrorKind::Device,
        };
        crate::error::Error::new(kind, e.to_string())
    }
}

impl From<ffi::types::RangeError> for TransportError {
    fn from(e: ffi::types::RangeError) -> Self {
        TransportError::Range(e)
    }
}
