//! Memory regions: one process-wide token table, locked while memory is copied, so a
//! region deregistered is never touched again; and the SGE checks, gathers and
//! scatters every transfer goes through.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use rdmabench_ffi::nd::status::*;
use rdmabench_ffi::nd::sys::*;

use crate::lock;
use crate::object::{state, Soft};
use crate::overlapped::{overlapped, Pending};

#[derive(Clone, Copy)]
pub(crate) struct Region {
    addr: usize,
    len: usize,
    flags: u32,
}

pub(crate) static REGIONS: Mutex<Option<HashMap<u32, Region>>> = Mutex::new(None);
static NEXT_TOKEN: AtomicU32 = AtomicU32::new(0x1000);

pub(crate) struct MrState(pub(crate) Mutex<Option<u32>>);
impl Soft for MrState {
    const IIDS: &'static [GUID] = &[IID_IND2MemoryRegion, IID_IND2Overlapped];
}

impl Drop for MrState {
    fn drop(&mut self) {
        if let Some(token) = lock(&self.0).take() {
            lock(&REGIONS).get_or_insert_with(HashMap::new).remove(&token);
        }
    }
}

unsafe extern "system" fn mr_register(
    this: *mut IND2MemoryRegion,
    buf: *const c_void,
    len: usize,
    flags: u32,
    ov: *mut OVERLAPPED,
) -> HRESULT {
    // SAFETY: a live MR object.
    let mr = unsafe { state::<MrState, _>(this) };
    let mut token = lock(&mr.0);
    if token.is_some() {
        return ND_INVALID_DEVICE_STATE;
    }
    if buf.is_null() || len == 0 {
        return ND_INVALID_PARAMETER_1;
    }
    let t = NEXT_TOKEN.fetch_add(1, Ordering::SeqCst);
    lock(&REGIONS)
        .get_or_insert_with(HashMap::new)
        .insert(t, Region { addr: buf as usize, len, flags });
    *token = Some(t);
    // Registration "pends" and is already done: callers take the asynchronous path.
    Pending::start(ov).complete(ND_SUCCESS);
    ND_PENDING
}

unsafe extern "system" fn mr_deregister(
    this: *mut IND2MemoryRegion,
    _ov: *mut OVERLAPPED,
) -> HRESULT {
    // SAFETY: a live MR object.
    let mr = unsafe { state::<MrState, _>(this) };
    match lock(&mr.0).take() {
        Some(t) => {
            lock(&REGIONS).get_or_insert_with(HashMap::new).remove(&t);
            ND_SUCCESS
        }
        None => ND_INVALID_DEVICE_STATE,
    }
}

unsafe extern "system" fn mr_token(this: *mut IND2MemoryRegion) -> u32 {
    // SAFETY: a live MR object.
    lock(&unsafe { state::<MrState, _>(this) }.0).unwrap_or(0)
}

pub(crate) static MR_VTBL: IND2MemoryRegionVtbl = IND2MemoryRegionVtbl {
    base: overlapped::<MrState>(),
    Register: mr_register,
    Deregister: mr_deregister,
    GetLocalToken: mr_token,
    GetRemoteToken: mr_token,
};

/// An SGE list checked against the token table.
#[derive(Clone, Copy)]
pub(crate) struct Sge {
    addr: usize,
    pub(crate) len: usize,
    token: u32,
}

/// Reads `n` SGEs of the caller.
///
/// # Safety
/// `sge` points to `n` entries (or `n` is 0).
pub(crate) unsafe fn read_sges(sge: *const ND2_SGE, n: u32) -> Vec<Sge> {
    (0..n as usize)
        .map(|i| {
            // SAFETY: caller's contract.
            let s = unsafe { *sge.add(i) };
            Sge {
                addr: s.Buffer as usize,
                len: s.BufferLength as usize,
                token: s.MemoryRegionToken,
            }
        })
        .collect()
}

pub(crate) fn covers(
    regions: &HashMap<u32, Region>,
    token: u32,
    addr: usize,
    len: usize,
    need: u32,
) -> bool {
    regions.get(&token).is_some_and(|r| {
        addr >= r.addr
            && addr.checked_add(len).is_some_and(|end| end <= r.addr + r.len)
            && r.flags & need == need
    })
}

/// Gathers the bytes the local SGEs name; `None` when one is not registered.
pub(crate) fn gather(regions: &HashMap<u32, Region>, sges: &[Sge]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(sges.iter().map(|s| s.len).sum());
    for s in sges {
        if !covers(regions, s.token, s.addr, s.len, 0) {
            return None;
        }
        // SAFETY: the range is inside a registered region (checked under REGIONS'
        // lock, which deregistration takes too).
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.len) });
    }
    Some(out)
}

/// Scatters `data` into local SGEs that must allow local writes.
pub(crate) fn scatter(
    regions: &HashMap<u32, Region>,
    sges: &[Sge],
    data: &[u8],
) -> Result<(), HRESULT> {
    if sges.iter().any(|s| !covers(regions, s.token, s.addr, s.len, ND_MR_FLAG_ALLOW_LOCAL_WRITE)) {
        return Err(ND_ACCESS_VIOLATION);
    }
    if sges.iter().map(|s| s.len).sum::<usize>() < data.len() {
        return Err(ND_DATA_OVERRUN);
    }
    let mut rest = data;
    for s in sges {
        let n = s.len.min(rest.len());
        // SAFETY: inside a registered, locally writable region (checked above under
        // the lock); `rest` is our own buffer.
        unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), s.addr as *mut u8, n) };
        rest = &rest[n..];
    }
    Ok(())
}
