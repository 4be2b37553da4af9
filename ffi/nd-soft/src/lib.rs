//! A NetworkDirect provider in software, for tests: it fills the same vtables a
//! vendor DLL does (`rdmabench_ffi::nd::sys`), over in-process memory, so the ND
//! wrappers and the test loops run over ND in Linux CI. A development crate of the
//! workspace, never published: the production crate `rdmabench-ffi` holds no test
//! double.
//!
//! One loopback adapter owns `127.0.0.1`. Registration hands out tokens from one
//! process-wide table; queue pairs copy at once on write and read, and a send lands in
//! the peer's oldest posted receive (or waits for one, as RC's retries would);
//! completions go to the queues given at creation, overlapped requests complete
//! through the `OVERLAPPED` the caller passed, and a listener's requests are matched
//! to connectors by port. Checks a real adapter makes are made here too: a wrong or
//! stale token, a range outside its region or missing rights complete with
//! `ND_ACCESS_VIOLATION`; a receive too small with `ND_DATA_OVERRUN`; work on a queue
//! pair that is not (or no longer) connected with `ND_CONNECTION_ABORTED`.
//! [`live_objects`] counts objects not yet released, so tests can check that every
//! reference was given back.
//!
//! [`install`] registers it through `rdmabench_ffi::nd::register`, the in-process
//! registration hook, so `rdmabench_ffi::nd::discover` finds it as it would find a
//! vendor DLL in the Winsock catalog.
#![deny(missing_docs, unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Mutex, MutexGuard, OnceLock};

use rdmabench_ffi::nd::com::ComPtr;
use rdmabench_ffi::nd::sys::IND2Provider;
use rdmabench_ffi::nd::{register, Provider};

use object::new_object;
use provider::{ProviderState, PROVIDER_VTBL};

mod adapter;
mod connector;
mod cq;
mod listener;
mod mr;
mod object;
mod overlapped;
mod provider;
mod qp;

pub use adapter::adapter_info;
pub use object::live_objects;

/// The address the soft adapter owns.
pub const ADDRESS: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Its adapter id.
pub const ADAPTER_ID: u64 = 0x50F7;
/// Largest inline payload it accepts.
pub const MAX_INLINE: u32 = 128;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The provider, as `DllGetClassObject` would return it.
pub fn provider() -> Provider {
    let raw = new_object(&PROVIDER_VTBL, ProviderState);
    // SAFETY: a fresh object with one reference, which the ComPtr takes.
    let ptr = unsafe { ComPtr::from_raw(raw.cast::<IND2Provider>()) }.expect("allocated above");
    Provider::new(ptr, "rdmabench software provider (in-process, tests only)")
}

/// Registers the provider with [`rdmabench_ffi::nd::discover`] once per process.
pub fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| register(provider()));
}
