//! Finding NetworkDirect providers and opening the adapter that owns an address.

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;

use super::addr::{query_list, SockAddr};
use super::com::ComPtr;
use super::status::{check, NdError};
use super::sys::{self, WSAPROTOCOL_INFOW};

/// A loaded NetworkDirect provider (`IND2Provider`).
#[derive(Clone, Debug)]
pub struct Provider {
    pub(super) ptr: ComPtr<sys::IND2Provider>,
    name: String,
}

impl Provider {
    /// Wraps a provider object; `name` is what users see (catalog name, DLL path).
    pub fn new(ptr: ComPtr<sys::IND2Provider>, name: impl Into<String>) -> Self {
        Provider { ptr, name: name.into() }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw object.
    pub fn as_com(&self) -> &ComPtr<sys::IND2Provider> {
        &self.ptr
    }

    /// Every local address its adapters own.
    ///
    /// # Errors
    /// `QueryAddressList` failing.
    pub fn addresses(&self) -> Result<Vec<SocketAddr>, NdError> {
        let p = &self.ptr;
        query_list("IND2Provider::QueryAddressList", |list, len| {
            // SAFETY: live provider; `list` is null or has `*len` writable bytes.
            unsafe { (p.vtbl().QueryAddressList)(p.as_raw(), list, len) }
        })
    }

    /// The id of the adapter that owns local address `ip`.
    ///
    /// # Errors
    /// `ND_INVALID_ADDRESS` when no adapter of this provider has it.
    pub fn resolve(&self, ip: IpAddr) -> Result<u64, NdError> {
        let a = SockAddr::from(SocketAddr::new(ip, 0));
        let mut id = 0u64;
        // SAFETY: live provider; the address and out-pointer are valid for the call.
        let hr = unsafe {
            (self.ptr.vtbl().ResolveAddress)(self.ptr.as_raw(), a.as_ptr(), a.len(), &mut id)
        };
        check("IND2Provider::ResolveAddress", hr)?;
        Ok(id)
    }
}

/// Whether a Winsock catalog entry is a NetworkDirect v2 provider, by the fields
/// the NetworkDirect SPI documents for its registration.
pub fn is_nd2_entry(e: &WSAPROTOCOL_INFOW) -> bool {
    let service = sys::XP1_GUARANTEED_DELIVERY
        | sys::XP1_GUARANTEED_ORDER
        | sys::XP1_MESSAGE_ORIENTED
        | sys::XP1_CONNECT_DATA;
    let flags = sys::PFL_HIDDEN | sys::PFL_NETWORKDIRECT_PROVIDER;
    e.dwServiceFlags1 & service == service
        && e.iVersion as u32 == sys::ND_VERSION_2
        && e.dwProviderFlags & flags == flags
        && (e.iAddressFamily == i32::from(sys::AF_INET)
            || e.iAddressFamily == i32::from(sys::AF_INET6))
        && e.iSocketType == -1
        && e.iProtocol == 0
        && e.iProtocolMaxOffset == 0
}

/// Providers made in this process (the test provider), seen by [`discover`] first.
static IN_PROCESS: Mutex<Vec<Provider>> = Mutex::new(Vec::new());

/// Makes `provider` visible to [`discover`] in this process, before the Winsock
/// catalog's: the in-process registration hook. The software provider of the tests
/// (the development crate `rdmabench-nd-soft`) stands in for a Winsock-registered one
/// this way; any `IND2Provider` object made in-process can (wrap it with
/// [`Provider::new`]).
pub fn register(provider: Provider) {
    IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner()).push(provider);
}

/// What discovery found: the providers that loaded, and why others did not.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Loaded providers.
    pub providers: Vec<Provider>,
    /// One line per catalog entry that looked like a provider but did not load.
    pub problems: Vec<String>,
}

/// Every NetworkDirect v2 provider: those registered in this process, then (on
/// Windows) those of the Winsock catalog.
pub fn discover() -> Discovery {
    #[allow(unused_mut)] // only Windows adds catalog providers
    let mut d = Discovery {
        providers: IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        problems: Vec::new(),
    };
    #[cfg(windows)]
    match super::win::catalog() {
        Ok(entries) => {
            let mut seen = Vec::new();
            for e in entries.iter().filter(|e| is_nd2_entry(e)) {
                if seen.contains(&e.ProviderId) {
                    continue; // one provider registered for IPv4 and IPv6
                }
                seen.push(e.ProviderId);
                match super::win::load(&e.ProviderId) {
                    Ok((p, path)) => d
                        .providers
                        .push(Provider::new(p, format!("{} ({path})", super::win::entry_name(e)))),
                    Err(why) => d.problems.push(why),
                }
            }
        }
        Err(why) => d.problems.push(why),
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> WSAPROTOCOL_INFOW {
        // SAFETY: plain data; all-zero is valid.
        let mut e: WSAPROTOCOL_INFOW = unsafe { std::mem::zeroed() };
        e.dwServiceFlags1 = 0x8e | 0x2000;
        e.dwProviderFlags = sys::PFL_HIDDEN | sys::PFL_NETWORKDIRECT_PROVIDER;
        e.iVersion = sys::ND_VERSION_2 as i32;
        e.iAddressFamily = i32::from(sys::AF_INET6);
        e.iSocketType = -1;
        e
    }

    #[test]
    fn catalog_entries_are_recognised_by_the_documented_fields() {
        assert!(is_nd2_entry(&entry()));
        let mut v1 = entry();
        v1.iVersion = 1;
        assert!(!is_nd2_entry(&v1), "ND v1 providers have no IND2Provider");
        let mut tcp = entry();
        tcp.iSocketType = 1;
        tcp.iProtocol = 6;
        assert!(!is_nd2_entry(&tcp), "an ordinary TCP entry");
        let mut shown = entry();
        shown.dwProviderFlags = sys::PFL_NETWORKDIRECT_PROVIDER;
        assert!(!is_nd2_entry(&shown), "v2 providers are hidden");
        let mut no_connect_data = entry();
        no_connect_data.dwServiceFlags1 = 0x0e;
        assert!(!is_nd2_entry(&no_connect_data));
    }
}
