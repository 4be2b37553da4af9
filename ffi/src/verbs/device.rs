//! `ibv_get_device_list(3)`: the RDMA devices this host's verbs library sees.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::path::PathBuf;
use std::ptr::NonNull;

use super::sys;
use super::{Context, Error};
use crate::types::Guid;

/// The device list, freed on drop. [`Device`]s borrow it; a [`Context`] opened from a
/// device does not, and outlives the list (libibverbs reference-counts the device).
pub struct DeviceList {
    list: NonNull<*mut sys::ibv_device>,
    len: usize,
}

impl DeviceList {
    /// Asks libibverbs for the devices.
    ///
    /// # Errors
    /// `ibv_get_device_list` with ENOSYS when the kernel has no RDMA support (see
    /// [`Error::is_no_rdma_stack`]). A stack with no device gives an empty list, not an
    /// error.
    pub fn new() -> Result<Self, Error> {
        let mut len: c_int = 0;
        // SAFETY: `len` is a valid out-pointer; the call returns NULL (errno set) or
        // a NULL-terminated array of `len` device pointers that we own until
        // ibv_free_device_list.
        let list = unsafe { sys::ibv_get_device_list(&mut len) };
        match NonNull::new(list) {
            Some(list) => Ok(DeviceList { list, len: usize::try_from(len).unwrap_or(0) }),
            None => Err(Error::last_os("ibv_get_device_list")),
        }
    }

    /// Number of devices.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no device was found.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th device.
    pub fn get(&self, i: usize) -> Option<Device<'_>> {
        if i >= self.len {
            return None;
        }
        // SAFETY: i < len, and the array holds `len` valid entries while `self` lives.
        let raw = unsafe { *self.list.as_ptr().add(i) };
        NonNull::new(raw).map(|raw| Device { raw, _list: PhantomData })
    }

    /// All devices, in the library's order.
    pub fn iter(&self) -> impl Iterator<Item = Device<'_>> + '_ {
        (0..self.len).filter_map(|i| self.get(i))
    }

    /// The device called `name` (e.g. `rxe0`, `mlx4_0`).
    pub fn find(&self, name: &str) -> Option<Device<'_>> {
        self.iter().find(|d| d.name() == name)
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the pointer came from ibv_get_device_list and is freed once; no
        // `Device` outlives `self` (they borrow it).
        unsafe { sys::ibv_free_device_list(self.list.as_ptr()) }
    }
}

/// One entry of a [`DeviceList`].
#[derive(Clone, Copy)]
pub struct Device<'list> {
    raw: NonNull<sys::ibv_device>,
    _list: PhantomData<&'list DeviceList>,
}

impl Device<'_> {
    /// Kernel name of the device (`rxe0`, `mlx4_0`).
    pub fn name(&self) -> String {
        // SAFETY: the device is valid while the list lives; the name is a
        // NUL-terminated string inside it.
        let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(self.raw.as_ptr())) };
        name.to_string_lossy().into_owned()
    }

    /// Node GUID, as `ibv_get_device_guid(3)` reports it.
    pub fn guid(&self) -> Guid {
        // SAFETY: valid device pointer, see `name`.
        Guid::from_be(unsafe { sys::ibv_get_device_guid(self.raw.as_ptr()) })
    }

    /// `enum ibv_node_type` code: 1 CA, 2 switch, 3 router, 4 RNIC, 5 usNIC, …
    pub fn node_type(&self) -> u32 {
        // SAFETY: valid device pointer, plain field read.
        unsafe { self.raw.as_ref() }.node_type as u32
    }

    /// `enum ibv_transport_type` code: 0 InfiniBand, 1 iWARP, 2 usNIC, …
    pub fn transport_type(&self) -> u32 {
        // SAFETY: valid device pointer, plain field read.
        unsafe { self.raw.as_ref() }.transport_type as u32
    }

    /// The device's sysfs folder, e.g. `/sys/class/infiniband/rxe0`.
    pub fn ibdev_path(&self) -> PathBuf {
        // SAFETY: valid device pointer; `ibdev_path` is a NUL-terminated char array.
        let path = unsafe { CStr::from_ptr(self.raw.as_ref().ibdev_path.as_ptr()) };
        PathBuf::from(path.to_string_lossy().into_owned())
    }

    /// Opens a verbs context on the device (`ibv_open_device(3)`).
    ///
    /// # Errors
    /// `ibv_open_device` with the errno it set (EACCES without access to
    /// `/dev/infiniband/uverbsN`, ENODEV when the device went away).
    pub fn open(&self) -> Result<Context, Error> {
        Context::open(self.raw, self.name())
    }
}
