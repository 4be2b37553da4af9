//! The Win32 and Winsock calls NetworkDirect needs on Windows: events for pending
//! requests, and provider discovery in the Winsock catalog (`WSCEnumProtocols`,
//! `WSCGetProviderPath`, `LoadLibraryExW`, `DllGetClassObject`), as Microsoft's
//! `ndutil` does it (`ndfrmwrk.cpp`, `ndprov.cpp`).

use std::ffi::c_void;
use std::time::Duration;

use super::com::ComPtr;
use super::status::{NdError, ND_INTERNAL_ERROR};
use super::sys::{self, BOOL, GUID, HANDLE, WSAPROTOCOL_INFOW};

#[link(name = "kernel32")]
extern "system" {
    fn CreateEventW(
        attributes: *mut c_void,
        manual_reset: BOOL,
        initial: BOOL,
        name: *const u16,
    ) -> HANDLE;
    fn ResetEvent(event: HANDLE) -> BOOL;
    fn WaitForSingleObject(handle: HANDLE, millis: u32) -> u32;
    fn CloseHandle(handle: HANDLE) -> BOOL;
    fn LoadLibraryExW(name: *const u16, file: HANDLE, flags: u32) -> HANDLE;
    fn GetProcAddress(module: HANDLE, name: *const u8) -> *mut c_void;
    fn ExpandEnvironmentStringsW(src: *const u16, dst: *mut u16, size: u32) -> u32;
    fn GetLastError() -> u32;
}

#[link(name = "ws2_32")]
extern "system" {
    fn WSAStartup(version: u16, data: *mut WsaData) -> i32;
    fn WSCEnumProtocols(
        protocols: *const i32,
        buffer: *mut WSAPROTOCOL_INFOW,
        buffer_len: *mut u32,
        errno: *mut i32,
    ) -> i32;
    fn WSCGetProviderPath(
        id: *const GUID,
        path: *mut u16,
        path_len: *mut i32,
        errno: *mut i32,
    ) -> i32;
}

/// `WSADATA` is 408 bytes on 64-bit Windows; we never read it.
#[repr(C, align(8))]
struct WsaData([u8; 512]);

const WAIT_OBJECT_0: u32 = 0;
const WAIT_TIMEOUT: u32 = 0x102;
const WSAENOBUFS: i32 = 10055;
const MAX_PATH: usize = 260;

/// A manual-reset event for one `OVERLAPPED`.
pub(crate) struct Event(HANDLE);

impl Event {
    pub(crate) fn new() -> Result<Self, NdError> {
        // SAFETY: no security attributes, unnamed; the handle is owned by the Event.
        let h = unsafe { CreateEventW(std::ptr::null_mut(), 1, 0, std::ptr::null()) };
        if h.is_null() {
            return Err(NdError::new("CreateEventW", last_error_hresult()));
        }
        Ok(Event(h))
    }

    pub(crate) fn handle(&self) -> HANDLE {
        self.0
    }

    pub(crate) fn reset(&self) {
        // SAFETY: a live event handle we own.
        unsafe { ResetEvent(self.0) };
    }

    /// `true` when signalled within `timeout`.
    pub(crate) fn wait(&self, timeout: Duration) -> Result<bool, NdError> {
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX - 1);
        // SAFETY: a live event handle we own.
        match unsafe { WaitForSingleObject(self.0, ms) } {
            WAIT_OBJECT_0 => Ok(true),
            WAIT_TIMEOUT => Ok(false),
            _ => Err(NdError::new("WaitForSingleObject", last_error_hresult())),
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: owned handle, closed once.
        unsafe { CloseHandle(self.0) };
    }
}

/// Closes the adapter's overlapped file handle.
pub(crate) fn close_handle(h: HANDLE) {
    if !h.is_null() {
        // SAFETY: the handle came from CreateOverlappedFile and is closed once.
        unsafe { CloseHandle(h) };
    }
}

/// `HRESULT_FROM_WIN32(GetLastError())`.
fn last_error_hresult() -> sys::HRESULT {
    // SAFETY: no preconditions.
    let e = unsafe { GetLastError() };
    if e == 0 {
        ND_INTERNAL_ERROR
    } else {
        ((e & 0xFFFF) | 0x8007_0000) as sys::HRESULT
    }
}

fn from_wide(w: &[u16]) -> String {
    let end = w.iter().position(|&c| c == 0).unwrap_or(w.len());
    String::from_utf16_lossy(&w[..end])
}

/// Every entry of the Winsock catalog.
pub(crate) fn catalog() -> Result<Vec<WSAPROTOCOL_INFOW>, String> {
    let mut data = WsaData([0; 512]);
    // SAFETY: `data` is large enough for WSADATA.
    let rc = unsafe { WSAStartup(0x0202, &mut data) };
    if rc != 0 {
        return Err(format!("WSAStartup failed: error {rc}"));
    }
    let mut len: u32 = 0;
    let mut errno: i32 = 0;
    // SAFETY: a null buffer with length 0 asks for the size needed.
    let rc =
        unsafe { WSCEnumProtocols(std::ptr::null(), std::ptr::null_mut(), &mut len, &mut errno) };
    if rc != -1 || errno != WSAENOBUFS {
        return Ok(Vec::new());
    }
    let size = std::mem::size_of::<WSAPROTOCOL_INFOW>();
    let n = (len as usize).div_ceil(size);
    // SAFETY: WSAPROTOCOL_INFOW is plain data; all-zero is a valid value.
    let mut entries: Vec<WSAPROTOCOL_INFOW> = vec![unsafe { std::mem::zeroed() }; n];
    let mut len = (n * size) as u32;
    // SAFETY: `entries` has `len` writable bytes.
    let rc =
        unsafe { WSCEnumProtocols(std::ptr::null(), entries.as_mut_ptr(), &mut len, &mut errno) };
    if rc < 0 {
        return Err(format!("WSCEnumProtocols failed: Winsock error {errno}"));
    }
    entries.truncate(rc as usize);
    Ok(entries)
}

/// The catalog entry's display name.
pub(crate) fn entry_name(e: &WSAPROTOCOL_INFOW) -> String {
    from_wide(&e.szProtocol)
}

/// Loads the provider DLL of a catalog entry and asks it for `IND2Provider`.
pub(crate) fn load(id: &GUID) -> Result<(ComPtr<sys::IND2Provider>, String), String> {
    let mut raw = [0u16; MAX_PATH];
    let mut len = MAX_PATH as i32;
    let mut errno = 0;
    // SAFETY: `raw` has `len` u16 slots.
    if unsafe { WSCGetProviderPath(id, raw.as_mut_ptr(), &mut len, &mut errno) } != 0 {
        return Err(format!("WSCGetProviderPath({id}) failed: Winsock error {errno}"));
    }
    let mut path = [0u16; 1024];
    // SAFETY: `raw` is NUL-terminated; `path` has 1024 slots.
    let n = unsafe { ExpandEnvironmentStringsW(raw.as_ptr(), path.as_mut_ptr(), 1024) };
    if n == 0 || n > 1024 {
        return Err(format!("cannot expand the provider path {}", from_wide(&raw)));
    }
    let shown = from_wide(&path);
    // SAFETY: a NUL-terminated path; the module stays loaded for the process's life
    // (providers' objects may outlive any handle we keep).
    let module = unsafe { LoadLibraryExW(path.as_ptr(), std::ptr::null_mut(), 0) };
    if module.is_null() {
        return Err(format!(
            "cannot load {shown}: {}",
            NdError::new("LoadLibraryExW", last_error_hresult())
        ));
    }
    // SAFETY: a loaded module and a NUL-terminated name.
    let proc = unsafe { GetProcAddress(module, c"DllGetClassObject".as_ptr().cast()) };
    if proc.is_null() {
        return Err(format!("{shown} has no DllGetClassObject: not a NetworkDirect provider"));
    }
    // SAFETY: DllGetClassObject has this signature (combaseapi.h).
    let get: sys::DllGetClassObjectFn = unsafe { std::mem::transmute(proc) };
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid GUID pointers and out-pointer.
    let hr = unsafe { get(id, &sys::IID_IND2Provider, &mut out) };
    if hr < 0 {
        return Err(format!("{shown}: {}", NdError::new("DllGetClassObject(IND2Provider)", hr)));
    }
    // SAFETY: on success the DLL returned a counted IND2Provider reference.
    let p = unsafe { ComPtr::from_raw(out.cast::<sys::IND2Provider>()) }
        .ok_or_else(|| format!("{shown}: DllGetClassObject returned no object"))?;
    Ok((p, shown))
}
