//! NetworkDirect status codes (`ndstatus.mc`): HRESULTs whose values are the NTSTATUS
//! codes of similar names, with their names and what they mean in a benchmark.

use std::fmt;

use super::sys::HRESULT;

const fn success(code: u32) -> HRESULT {
    code as HRESULT
}
const fn warning(code: u32) -> HRESULT {
    (0x8000_0000 | code) as HRESULT
}
const fn error(code: u32) -> HRESULT {
    (0xC000_0000 | code) as HRESULT
}

macro_rules! statuses {
    ($($name:ident = $value:expr, $meaning:literal;)*) => {
        $(
            #[doc = $meaning]
            pub const $name: HRESULT = $value;
        )*
        /// Every status of `ndstatus.mc`: value, name, meaning.
        pub const ALL: &[(HRESULT, &str, &str)] = &[$(($name, stringify!($name), $meaning)),*];
    };
}

statuses! {
    ND_SUCCESS = success(0x0000), "the request completed";
    ND_TIMEOUT = success(0x0102), "the wait timed out";
    ND_PENDING = success(0x0103), "the request is pending and completes through its OVERLAPPED";
    ND_BUFFER_OVERFLOW = warning(0x0005), "the buffer is too small; the size needed was returned";
    ND_DEVICE_BUSY = warning(0x0011), "the device is busy";
    ND_NO_MORE_ENTRIES = warning(0x001A), "no more entries";
    ND_UNSUCCESSFUL = error(0x0001), "the operation failed";
    ND_ACCESS_VIOLATION = error(0x0005), "memory access outside a registered region, or a wrong token";
    ND_INVALID_HANDLE = error(0x0008), "an invalid handle";
    ND_INVALID_DEVICE_REQUEST = error(0x0010), "a request the device does not accept";
    ND_INVALID_PARAMETER = error(0x000D), "an invalid parameter";
    ND_NO_MEMORY = error(0x0017), "out of memory";
    ND_INVALID_PARAMETER_MIX = error(0x0030), "parameters that do not go together";
    ND_DATA_OVERRUN = error(0x003C), "the data does not fit the receive buffer";
    ND_SHARING_VIOLATION = error(0x0043), "the object is in use";
    ND_INSUFFICIENT_RESOURCES = error(0x009A), "queue full or out of adapter resources";
    ND_DEVICE_NOT_READY = error(0x00A3), "the device is not ready";
    ND_IO_TIMEOUT = error(0x00B5), "the I/O timed out";
    ND_NOT_SUPPORTED = error(0x00BB), "not supported by this provider";
    ND_INTERNAL_ERROR = error(0x00E5), "an internal provider error";
    ND_INVALID_PARAMETER_1 = error(0x00EF), "the first parameter is invalid";
    ND_INVALID_PARAMETER_2 = error(0x00F0), "the second parameter is invalid";
    ND_INVALID_PARAMETER_3 = error(0x00F1), "the third parameter is invalid";
    ND_INVALID_PARAMETER_4 = error(0x00F2), "the fourth parameter is invalid";
    ND_INVALID_PARAMETER_5 = error(0x00F3), "the fifth parameter is invalid";
    ND_INVALID_PARAMETER_6 = error(0x00F4), "the sixth parameter is invalid";
    ND_INVALID_PARAMETER_7 = error(0x00F5), "the seventh parameter is invalid";
    ND_INVALID_PARAMETER_8 = error(0x00F6), "the eighth parameter is invalid";
    ND_INVALID_PARAMETER_9 = error(0x00F7), "the ninth parameter is invalid";
    ND_INVALID_PARAMETER_10 = error(0x00F8), "the tenth parameter is invalid";
    ND_CANCELED = error(0x0120), "the request was canceled (flushed)";
    ND_REMOTE_ERROR = error(0x013D), "the peer reported an error (remote access or operation)";
    ND_INVALID_ADDRESS = error(0x0141), "an invalid address";
    ND_INVALID_DEVICE_STATE = error(0x0184), "the object is in the wrong state for this request";
    ND_INVALID_BUFFER_SIZE = error(0x0206), "an invalid buffer size";
    ND_TOO_MANY_ADDRESSES = error(0x0209), "too many addresses";
    ND_ADDRESS_ALREADY_EXISTS = error(0x020A), "the address is already in use";
    ND_CONNECTION_REFUSED = error(0x0236), "the peer refused the connection (nobody listens, or it rejected)";
    ND_CONNECTION_INVALID = error(0x023A), "the connection is not established";
    ND_CONNECTION_ACTIVE = error(0x023B), "the connection is already established";
    ND_NETWORK_UNREACHABLE = error(0x023C), "the network is unreachable";
    ND_HOST_UNREACHABLE = error(0x023D), "the host is unreachable";
    ND_CONNECTION_ABORTED = error(0x0241), "the connection was aborted (the peer disconnected)";
    ND_DEVICE_REMOVED = error(0x02B6), "the device was removed";
}

/// Whether `hr` is a failure, as `FAILED(hr)`.
pub fn failed(hr: HRESULT) -> bool {
    hr < 0
}

/// The name and meaning of a status, if it is one of ND's.
pub fn describe(hr: HRESULT) -> Option<(&'static str, &'static str)> {
    ALL.iter().find(|(v, _, _)| *v == hr).map(|&(_, name, meaning)| (name, meaning))
}

/// A failed NetworkDirect call: which call, and the status with its ND name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NdError {
    /// The interface method (`IND2Adapter::CreateQueuePair`) or step that failed.
    pub call: &'static str,
    /// The status it returned.
    pub status: HRESULT,
}

impl NdError {
    /// `call` returned `status`.
    pub fn new(call: &'static str, status: HRESULT) -> Self {
        NdError { call, status }
    }

    /// The status's ND name, or `HRESULT 0x…` for a status ND does not define.
    pub fn name(&self) -> String {
        status_name(self.status)
    }
}

/// `ND_ACCESS_VIOLATION`, or `HRESULT 0x80004005` for codes outside ND's list.
pub fn status_name(hr: HRESULT) -> String {
    match describe(hr) {
        Some((name, _)) => name.to_string(),
        None => format!("HRESULT {:#010x}", hr as u32),
    }
}

impl fmt::Display for NdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match describe(self.status) {
            Some((name, meaning)) => {
                write!(f, "{} failed: {name} ({:#010x}: {meaning})", self.call, self.status as u32)
            }
            None => write!(f, "{} failed: HRESULT {:#010x}", self.call, self.status as u32),
        }
    }
}

impl std::error::Error for NdError {}

/// `Ok` for success codes (pending included), the error otherwise.
pub fn check(call: &'static str, hr: HRESULT) -> Result<HRESULT, NdError> {
    if failed(hr) {
        Err(NdError::new(call, hr))
    } else {
        Ok(hr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_the_ntstatus_codes() {
        assert_eq!(ND_PENDING, 0x103);
        assert_eq!(ND_BUFFER_OVERFLOW as u32, 0x8000_0005);
        assert_eq!(ND_ACCESS_VIOLATION as u32, 0xC000_0005);
        assert_eq!(ND_CONNECTION_REFUSED as u32, 0xC000_0236);
        assert_eq!(ND_DEVICE_REMOVED as u32, 0xC000_02B6);
        assert!(failed(ND_CANCELED) && !failed(ND_PENDING) && !failed(ND_TIMEOUT));
    }

    #[test]
    fn names_are_unique_and_errors_name_their_status() {
        let mut values: Vec<HRESULT> = ALL.iter().map(|a| a.0).collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), ALL.len(), "two statuses share a value");
        let e = NdError::new("IND2QueuePair::Write", ND_ACCESS_VIOLATION);
        assert_eq!(
            e.to_string(),
            "IND2QueuePair::Write failed: ND_ACCESS_VIOLATION (0xc0000005: memory access outside \
             a registered region, or a wrong token)"
        );
        let e = NdError::new("DllGetClassObject", 0x8000_4005_u32 as i32);
        assert_eq!(e.to_string(), "DllGetClassObject failed: HRESULT 0x80004005");
        assert_eq!(e.name(), "HRESULT 0x80004005");
    }
}
