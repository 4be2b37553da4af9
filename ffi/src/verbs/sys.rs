//! The C surface: `rdma-sys` re-exported, plus the few libibverbs entry points its
//! bindings miss (rdma-sys 0.3 binds only names that start with `ibv_`).
#![allow(non_camel_case_types, missing_docs)]

pub use rdma_sys::*;

/// `struct ibv_gid_entry` (verbs.h, rdma-core ≥ 32).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    /// `enum ibv_gid_type`: 0 IB, 1 RoCE v1, 2 RoCE v2.
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

#[link(name = "ibverbs")]
extern "C" {
    /// `_ibv_query_gid_table(3)`: fills `entries` with the valid GIDs of every port;
    /// returns how many, or a negative errno.
    pub fn _ibv_query_gid_table(
        context: *mut ibv_context,
        entries: *mut ibv_gid_entry,
        max_entries: usize,
        flags: u32,
        entry_size: usize,
    ) -> isize;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_entry_layout_matches_verbs_h() {
        assert_eq!(std::mem::size_of::<ibv_gid_entry>(), 32);
        assert_eq!(std::mem::offset_of!(ibv_gid_entry, gid_index), 16);
        assert_eq!(std::mem::offset_of!(ibv_gid_entry, gid_type), 24);
        assert_eq!(std::mem::offset_of!(ibv_gid_entry, ndev_ifindex), 28);
    }
}
