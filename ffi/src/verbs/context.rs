//! `ibv_open_device(3)` and the queries on an open device: attributes, ports, GIDs.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;

use super::sys;
use super::Error;
use crate::types::{Gid, Guid};

/// An open device. Cloning is cheap and shares the same context; it closes when the
/// last clone (and every object created from it) is gone.
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    raw: NonNull<sys::ibv_context>,
    name: String,
}

// SAFETY: libibverbs contexts may be used from any thread; every verb on them is
// thread-safe (libibverbs "Thread safety" in ibv_open_device(3) and rdma-core docs).
unsafe impl Send for ContextInner {}
// SAFETY: as above; shared references only issue thread-safe verbs.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_open_device and is closed exactly once, after
        // every child object (each holds an Arc to this inner) is gone.
        let rc = unsafe { sys::ibv_close_device(self.raw.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_close_device({}) failed", self.name);
    }
}

/// A device's on-demand paging (`struct ibv_odp_caps`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OdpCaps {
    /// `IBV_ODP_SUPPORT`: the device pages memory in on demand at all.
    pub supported: bool,
    /// `IBV_ODP_SUPPORT_*` bits for RC: send 1, receive 2, write 4, read 8, atomic 16,
    /// SRQ receive 32.
    pub rc: u32,
    /// The same for UC.
    pub uc: u32,
    /// The same for UD.
    pub ud: u32,
}

/// Attributes of a device (`struct ibv_device_attr`), copied into plain Rust values.
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)] // field names and meanings are those of ibv_query_device(3)
pub struct DeviceAttr {
    pub fw_ver: String,
    pub node_guid: Guid,
    pub sys_image_guid: Guid,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: i32,
    pub max_qp_wr: i32,
    pub device_cap_flags: u32,
    pub max_sge: i32,
    pub max_sge_rd: i32,
    pub max_cq: i32,
    pub max_cqe: i32,
    pub max_mr: i32,
    pub max_pd: i32,
    pub max_qp_rd_atom: i32,
    pub max_qp_init_rd_atom: i32,
    pub max_res_rd_atom: i32,
    /// `enum ibv_atomic_cap`: 0 none, 1 HCA (atomic within this HCA), 2 global.
    pub atomic_cap: u32,
    pub max_mw: i32,
    pub max_ah: i32,
    pub max_srq: i32,
    pub max_srq_wr: i32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// Attributes of one port (`struct ibv_port_attr`), as plain values. Enum fields keep
/// the C codes; their meanings are in ibv_query_port(3).
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)]
pub struct PortAttr {
    /// `enum ibv_port_state`: 1 down, 2 init, 3 armed, 4 active, 5 active-defer.
    pub state: u32,
    /// `enum ibv_mtu`: 1 = 256 … 5 = 4096.
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: i32,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    /// IB width code: 1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x.
    pub active_width: u8,
    /// IB speed code: 1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR, 64 HDR, 128 NDR.
    pub active_speed: u8,
    /// Physical state: 1 sleep, 2 polling, 3 disabled, 4 training, 5 link up, …
    pub phys_state: u8,
    /// `IBV_LINK_LAYER_*`: 0 unspecified (= InfiniBand), 1 InfiniBand, 2 Ethernet.
    pub link_layer: u8,
}

/// One valid entry of a port's GID table (`struct ibv_gid_entry`).
#[derive(Clone, Debug)]
pub struct GidEntry {
    /// Port number (1-based).
    pub port: u8,
    /// Index in the port's GID table: what `-x` selects.
    pub index: u32,
    /// The GID.
    pub gid: Gid,
    /// `enum ibv_gid_type`: 0 IB, 1 RoCE v1, 2 RoCE v2.
    pub gid_type: u32,
    /// Name of the network device the GID belongs to (RoCE), if any.
    pub netdev: Option<String>,
}

impl Context {
    pub(crate) fn open(device: NonNull<sys::ibv_device>, name: String) -> Result<Self, Error> {
        // SAFETY: `device` is a live entry of a device list (the caller borrows it).
        let raw = unsafe { sys::ibv_open_device(device.as_ptr()) };
        let raw =
            NonNull::new(raw).ok_or_else(|| Error::last_os("ibv_open_device").on(name.clone()))?;
        Ok(Context { inner: Arc::new(ContextInner { raw, name }) })
    }

    /// The device name this context was opened on.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// What on-demand paging the device offers (`ibv_query_device_ex(3)`'s
    /// `odp_caps`).
    ///
    /// # Errors
    /// `ibv_query_device_ex` with its errno.
    pub fn odp_caps(&self) -> Result<OdpCaps, Error> {
        let mut attr = MaybeUninit::<sys::ibv_device_attr_ex>::zeroed();
        // SAFETY: live context; no input (a null `input` asks for the basic attributes
        // and odp_caps); `attr` is zeroed writable storage of the right type, so a
        // provider without the extended query leaves odp_caps at zero.
        let rc = unsafe {
            sys::ibv_query_device_ex(self.inner.raw.as_ptr(), std::ptr::null(), attr.as_mut_ptr())
        };
        if rc != 0 {
            return Err(Error::from_errno("ibv_query_device_ex", rc).on(self.name()));
        }
        // SAFETY: zeroed before, filled (or left zero) by the call.
        let odp = unsafe { attr.assume_init() }.odp_caps;
        let support = u64::from(sys::ibv_odp_general_caps::IBV_ODP_SUPPORT.0);
        Ok(OdpCaps {
            supported: odp.general_caps & support != 0,
            rc: odp.per_transport_caps.rc_odp_caps,
            uc: odp.per_transport_caps.uc_odp_caps,
            ud: odp.per_transport_caps.ud_odp_caps,
        })
    }

    /// `ibv_query_device(3)`.
    ///
    /// # Errors
    /// `ibv_query_device` with its errno.
    pub fn query_device(&self) -> Result<DeviceAttr, Error> {
        let mut attr = MaybeUninit::<sys::ibv_device_attr>::zeroed();
        // SAFETY: live context; `attr` is writable storage of the right type.
        let rc = unsafe { sys::ibv_query_device(self.inner.raw.as_ptr(), attr.as_mut_ptr()) };
        if rc != 0 {
            return Err(Error::from_errno("ibv_query_device", rc).on(self.name()));
        }
        // SAFETY: the call succeeded and filled the struct (it was zeroed before).
        let a = unsafe { attr.assume_init() };
        // SAFETY: fw_ver is a char array that the library NUL-terminates; the zeroed
        // storage guarantees a terminator even if it wrote nothing.
        let fw_ver = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) };
        Ok(DeviceAttr {
            fw_ver: fw_ver.to_string_lossy().into_owned(),
            node_guid: Guid::from_be(a.node_guid),
            sys_image_guid: Guid::from_be(a.sys_image_guid),
            max_mr_size: a.max_mr_size,
            page_size_cap: a.page_size_cap,
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            hw_ver: a.hw_ver,
            max_qp: a.max_qp,
            max_qp_wr: a.max_qp_wr,
            device_cap_flags: a.device_cap_flags,
            max_sge: a.max_sge,
            max_sge_rd: a.max_sge_rd,
            max_cq: a.max_cq,
            max_cqe: a.max_cqe,
            max_mr: a.max_mr,
            max_pd: a.max_pd,
            max_qp_rd_atom: a.max_qp_rd_atom,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom,
            max_res_rd_atom: a.max_res_rd_atom,
            atomic_cap: a.atomic_cap,
            max_mw: a.max_mw,
            max_ah: a.max_ah,
            max_srq: a.max_srq,
            max_srq_wr: a.max_srq_wr,
            max_pkeys: a.max_pkeys,
            local_ca_ack_delay: a.local_ca_ack_delay,
            phys_port_cnt: a.phys_port_cnt,
        })
    }

    /// `ibv_query_port(3)` for `port` (1-based).
    ///
    /// # Errors
    /// `ibv_query_port` with its errno (EINVAL for a port the device lacks).
    pub fn query_port(&self, port: u8) -> Result<PortAttr, Error> {
        let mut attr = MaybeUninit::<sys::ibv_port_attr>::zeroed();
        // SAFETY: live context; `attr` is zeroed storage of the full extended size,
        // which ___ibv_query_port passes to the provider as the buffer length.
        let rc =
            unsafe { sys::___ibv_query_port(self.inner.raw.as_ptr(), port, attr.as_mut_ptr()) };
        if rc != 0 {
            return Err(
                Error::from_errno("ibv_query_port", rc).on(format!("{} port {port}", self.name()))
            );
        }
        // SAFETY: the call succeeded and filled the (pre-zeroed) struct.
        let a = unsafe { attr.assume_init() };
        Ok(PortAttr {
            state: a.state,
            max_mtu: a.max_mtu,
            active_mtu: a.active_mtu,
            gid_tbl_len: a.gid_tbl_len,
            port_cap_flags: a.port_cap_flags,
            max_msg_sz: a.max_msg_sz,
            pkey_tbl_len: a.pkey_tbl_len,
            lid: a.lid,
            sm_lid: a.sm_lid,
            lmc: a.lmc,
            max_vl_num: a.max_vl_num,
            sm_sl: a.sm_sl,
            active_width: a.active_width,
            active_speed: a.active_speed,
            phys_state: a.phys_state,
            link_layer: a.link_layer,
        })
    }

    /// `ibv_query_gid(3)`: one GID (all zero for an unused RoCE slot).
    ///
    /// # Errors
    /// `ibv_query_gid` with errno (EINVAL for an index past the table).
    pub fn query_gid(&self, port: u8, index: u32) -> Result<Gid, Error> {
        let target = || format!("{} port {port} index {index}", self.name());
        let index = i32::try_from(index)
            .map_err(|_| Error::from_errno("ibv_query_gid", libc::EINVAL).on(target()))?;
        let mut gid = MaybeUninit::<sys::ibv_gid>::zeroed();
        // SAFETY: live context; `gid` is writable storage for one GID.
        let rc =
            unsafe { sys::ibv_query_gid(self.inner.raw.as_ptr(), port, index, gid.as_mut_ptr()) };
        if rc != 0 {
            return Err(Error::last_os("ibv_query_gid").on(target()));
        }
        // SAFETY: success; every bit pattern of the union is a valid `raw` array.
        Ok(Gid(unsafe { gid.assume_init().raw }))
    }

    /// `ibv_query_gid_table(3)`: the valid GIDs of every port, with type and netdev.
    /// `capacity` bounds the answer; pass the sum of the ports' `gid_tbl_len`.
    ///
    /// # Errors
    /// `ibv_query_gid_table` with its errno.
    pub fn query_gid_table(&self, capacity: usize) -> Result<Vec<GidEntry>, Error> {
        let mut entries: Vec<sys::ibv_gid_entry> = Vec::with_capacity(capacity);
        // SAFETY: live context; `entries` has room for `capacity` entries of the size
        // we pass, and the library writes at most that many.
        let n = unsafe {
            sys::_ibv_query_gid_table(
                self.inner.raw.as_ptr(),
                entries.as_mut_ptr(),
                capacity,
                0,
                std::mem::size_of::<sys::ibv_gid_entry>(),
            )
        };
        if n < 0 {
            let errno = i32::try_from(-n).unwrap_or(libc::EINVAL);
            return Err(Error::from_errno("ibv_query_gid_table", errno).on(self.name()));
        }
        // SAFETY: the library initialised the first `n` (≤ capacity) entries.
        unsafe { entries.set_len((n as usize).min(capacity)) };
        Ok(entries
            .iter()
            .map(|e| GidEntry {
                port: u8::try_from(e.port_num).unwrap_or(u8::MAX),
                index: e.gid_index,
                // SAFETY: any bit pattern of the union is a valid `raw` array.
                gid: Gid(unsafe { e.gid.raw }),
                gid_type: e.gid_type,
                netdev: netdev_name(e.ndev_ifindex),
            })
            .collect())
    }

    /// The GID index to use on `port` when none is given: `None` on InfiniBand (route
    /// by LID); on RoCE the RoCE v2 GID holding `ipv4` (or, without one, the first
    /// IPv4-mapped RoCE v2 GID), falling back to any RoCE v2 GID, then any GID. Both
    /// sides applying this rule pick the same kind of GID.
    ///
    /// # Errors
    /// The port or GID-table query failing; ENODATA when the port has no GID at all.
    pub fn pick_gid_index(
        &self,
        port: u8,
        ipv4: Option<std::net::Ipv4Addr>,
    ) -> Result<Option<u8>, Error> {
        let attr = self.query_port(port)?;
        if attr.link_layer != LINK_LAYER_ETHERNET {
            return Ok(None);
        }
        let table = self.query_gid_table(usize::try_from(attr.gid_tbl_len).unwrap_or(0))?;
        let entries: Vec<&GidEntry> =
            table.iter().filter(|e| e.port == port && !e.gid.is_zero()).collect();
        let chosen = pick_roce_gid(&entries, ipv4).ok_or_else(|| {
            Error::from_errno("ibv_query_gid_table", libc::ENODATA)
                .on(format!("{} port {port}", self.name()))
        })?;
        u8::try_from(chosen).map(Some).map_err(|_| {
            Error::invalid("GID index", format!("{chosen} does not fit perftest's 0-255 range"))
        })
    }

    /// The raw context pointer, for the other wrappers in this crate.
    pub(crate) fn as_ptr(&self) -> *mut sys::ibv_context {
        self.inner.raw.as_ptr()
    }
}

/// `IBV_LINK_LAYER_ETHERNET`: RoCE.
const LINK_LAYER_ETHERNET: u8 = 2;

/// The selection rule of [`Context::pick_gid_index`] over a port's valid entries.
fn pick_roce_gid(entries: &[&GidEntry], ipv4: Option<std::net::Ipv4Addr>) -> Option<u32> {
    const ROCE_V2: u32 = 2;
    let v2 = |e: &&&GidEntry| e.gid_type == ROCE_V2;
    let mapped =
        |e: &&&GidEntry| e.gid.to_ipv4_mapped().is_some_and(|a| ipv4.is_none_or(|want| a == want));
    entries
        .iter()
        .filter(v2)
        .find(mapped)
        .or_else(|| entries.iter().find(v2))
        .or_else(|| entries.first())
        .map(|e| e.index)
}

/// `if_indextoname(3)`; `None` for index 0 (no netdev) or an unknown index.
fn netdev_name(ifindex: u32) -> Option<String> {
    if ifindex == 0 {
        return None;
    }
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has IF_NAMESIZE bytes, as the call requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success the call wrote a NUL-terminated name into `buf`.
    Some(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u32, gid: &str, gid_type: u32) -> GidEntry {
        let ip: std::net::Ipv6Addr = gid.parse().unwrap();
        GidEntry { port: 1, index, gid: Gid(ip.octets()), gid_type, netdev: None }
    }

    #[test]
    fn gid_choice_prefers_ipv4_mapped_roce_v2() {
        let table = [
            entry(0, "fe80::1", 1),
            entry(1, "fe80::1", 2),
            entry(2, "::ffff:10.0.0.1", 1),
            entry(3, "::ffff:10.0.0.1", 2),
            entry(5, "::ffff:10.0.0.2", 2),
        ];
        let refs: Vec<&GidEntry> = table.iter().collect();
        assert_eq!(pick_roce_gid(&refs, None), Some(3));
        assert_eq!(pick_roce_gid(&refs, Some("10.0.0.2".parse().unwrap())), Some(5));
        // The address asked for is not there: any IPv4-mapped v2 would be wrong, so
        // fall back to the first v2 GID.
        assert_eq!(pick_roce_gid(&refs, Some("10.9.9.9".parse().unwrap())), Some(1));
        let v1_only = [entry(0, "fe80::1", 1), entry(1, "::ffff:10.0.0.1", 1)];
        let refs: Vec<&GidEntry> = v1_only.iter().collect();
        assert_eq!(pick_roce_gid(&refs, None), Some(0));
        assert_eq!(pick_roce_gid(&[], None), None);
    }

    #[test]
    fn netdev_name_resolves_loopback_and_rejects_zero() {
        assert_eq!(netdev_name(0), None);
        // SAFETY: a valid NUL-terminated name.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        assert_ne!(lo, 0, "every Linux host has a loopback interface");
        assert_eq!(netdev_name(lo).as_deref(), Some("lo"));
        assert_eq!(netdev_name(u32::MAX), None);
    }
}
