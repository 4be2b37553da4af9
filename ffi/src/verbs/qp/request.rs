//! Send work requests: what to post ([`SendRequest`]), the checks every request passes
//! before it reaches the library, and requests encoded once to be posted again
//! ([`PreparedSend`]).

use std::mem::MaybeUninit;
use std::ptr;

use super::super::{sys, AddressHandle, Error, LocalSlice};
use super::common::QpCore;
use super::QpType;
use crate::types::RemoteSlice;

/// Flags of one send work request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendFlags {
    /// Generate a completion.
    pub signaled: bool,
    /// Copy the payload into the work request (no lkey needed; up to `max_inline_data`).
    pub inline: bool,
    /// Set the solicited-event bit (wakes a peer armed with `solicited_only`).
    pub solicited: bool,
    /// Wait for earlier RDMA reads and atomics before starting.
    pub fence: bool,
}

impl SendFlags {
    pub(super) fn raw(self) -> u32 {
        use sys::ibv_send_flags as f;
        let mut bits = 0;
        if self.signaled {
            bits |= f::IBV_SEND_SIGNALED.0;
        }
        if self.inline {
            bits |= f::IBV_SEND_INLINE.0;
        }
        if self.solicited {
            bits |= f::IBV_SEND_SOLICITED.0;
        }
        if self.fence {
            bits |= f::IBV_SEND_FENCE.0;
        }
        bits
    }
}

/// The operation of a send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// Send (consumes a receive at the peer).
    Send,
    /// Send with 32-bit immediate data (host order here).
    SendImm(u32),
    /// RDMA write into the peer's memory.
    Write(RemoteSlice),
    /// RDMA write that also consumes a receive at the peer, carrying immediate data.
    WriteImm(RemoteSlice, u32),
    /// RDMA read from the peer's memory into the local SGEs.
    Read(RemoteSlice),
    /// 64-bit compare-and-swap at an 8-byte-aligned remote address; the old value
    /// lands in the one 8-byte local SGE.
    CompareSwap {
        /// Remote 8 bytes.
        remote: RemoteSlice,
        /// Expected value.
        compare: u64,
        /// New value if it matched.
        swap: u64,
    },
    /// 64-bit fetch-and-add; the old value lands in the one 8-byte local SGE.
    FetchAdd {
        /// Remote 8 bytes.
        remote: RemoteSlice,
        /// Addend.
        add: u64,
    },
}

/// Where a UD send goes.
#[derive(Clone, Copy)]
pub struct UdDest<'a> {
    /// Path to the peer's port.
    pub ah: &'a AddressHandle,
    /// Peer QP number.
    pub remote_qpn: u32,
    /// Peer Q_Key.
    pub remote_qkey: u32,
}

/// One send work request: operation, local SGEs (ranges of registered memory that
/// outlive the request), flags and, on UD, the destination.
#[derive(Clone, Copy)]
pub struct SendRequest<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// Local data: the payload, or where read/atomic results land.
    pub local: &'a [LocalSlice<'a>],
    /// Signaled, inline, solicited, fence.
    pub flags: SendFlags,
    /// UD destination (UD QPs only).
    pub ud: Option<UdDest<'a>>,
}

impl<'a> SendRequest<'a> {
    /// An unsignaled request; chain `.signaled()`, `.inline()`, `.to(…)`.
    pub fn new(wr_id: u64, op: SendOp, local: &'a [LocalSlice<'a>]) -> Self {
        SendRequest { wr_id, op, local, flags: SendFlags::default(), ud: None }
    }

    /// Ask for a completion.
    pub fn signaled(mut self) -> Self {
        self.flags.signaled = true;
        self
    }

    /// Send the payload inline.
    pub fn inline(mut self) -> Self {
        self.flags.inline = true;
        self
    }

    /// Set the solicited-event bit.
    pub fn solicited(mut self) -> Self {
        self.flags.solicited = true;
        self
    }

    /// UD destination.
    pub fn to(mut self, dest: UdDest<'a>) -> Self {
        self.ud = Some(dest);
        self
    }
}

impl QpCore {
    /// Everything the library would not check, or would check too late: SGE count and
    /// PD, inline size, operation against QP type, atomic shape.
    pub(super) fn check(&self, r: &SendRequest<'_>) -> Result<(), Error> {
        let refuse =
            |why: String| Error::invalid("ibv_post_send", why).on(format!("QP {}", self.qp_num()));
        if r.local.len() > self.caps.max_send_sge as usize {
            return Err(refuse(format!(
                "{} SGEs, the QP takes {}",
                r.local.len(),
                self.caps.max_send_sge
            )));
        }
        let mut total: u64 = 0;
        for (i, slice) in r.local.iter().enumerate() {
            self.check_pd(i, slice).map_err(refuse)?;
            total += u64::from(slice.len());
        }
        if r.flags.inline && total > u64::from(self.caps.max_inline_data) {
            return Err(refuse(format!(
                "{total} bytes inline, the QP takes {}",
                self.caps.max_inline_data
            )));
        }
        match (self.qp_type, &r.op, r.ud.is_some()) {
            (QpType::Ud, SendOp::Send | SendOp::SendImm(_), true) => {}
            (QpType::Ud, SendOp::Send | SendOp::SendImm(_), false) => {
                return Err(refuse(
                    "a UD send needs a destination (address handle, QPN, Q_Key)".into(),
                ))
            }
            (QpType::Ud, op, _) => {
                return Err(refuse(format!("{op:?} is not possible on a UD QP")))
            }
            (_, _, true) => return Err(refuse("only UD sends take a destination".into())),
            (
                QpType::Uc,
                SendOp::Read(_) | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. },
                _,
            ) => return Err(refuse("UC QPs do not do RDMA read or atomics".into())),
            _ => {}
        }
        if let SendOp::CompareSwap { remote, .. } | SendOp::FetchAdd { remote, .. } = &r.op {
            check_atomic(r, remote).map_err(refuse)?;
        }
        Ok(())
    }
}

fn check_atomic(r: &SendRequest<'_>, remote: &RemoteSlice) -> Result<(), String> {
    if r.local.len() != 1 || r.local[0].len() != 8 {
        return Err("an atomic needs exactly one 8-byte local SGE for the old value".into());
    }
    if remote.len() != 8 || remote.addr() % 8 != 0 {
        return Err(format!(
            "an atomic targets 8 aligned bytes, not {} at {:#x}",
            remote.len(),
            remote.addr()
        ));
    }
    if r.flags.inline {
        return Err("an atomic cannot be inline".into());
    }
    Ok(())
}

/// The C form of a checked request; `sg_list` is left for the caller.
pub(super) fn build_wr(r: &SendRequest<'_>) -> sys::ibv_send_wr {
    use sys::ibv_wr_opcode::*;
    // SAFETY: ibv_send_wr is plain data (null pointers, integers); all-zero is valid.
    let mut wr: sys::ibv_send_wr = unsafe { MaybeUninit::zeroed().assume_init() };
    wr.wr_id = r.wr_id;
    wr.num_sge = r.local.len() as i32;
    wr.send_flags = r.flags.raw();
    let rdma =
        |remote: &RemoteSlice| sys::rdma_t { remote_addr: remote.addr(), rkey: remote.rkey() };
    match r.op {
        SendOp::Send => wr.opcode = IBV_WR_SEND,
        SendOp::SendImm(imm) => {
            wr.opcode = IBV_WR_SEND_WITH_IMM;
            wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
        }
        SendOp::Write(remote) => {
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.wr.rdma = rdma(&remote);
        }
        SendOp::WriteImm(remote, imm) => {
            wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            wr.wr.rdma = rdma(&remote);
            wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
        }
        SendOp::Read(remote) => {
            wr.opcode = IBV_WR_RDMA_READ;
            wr.wr.rdma = rdma(&remote);
        }
        SendOp::CompareSwap { remote, compare, swap } => {
            wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
            wr.wr.atomic = sys::atomic_t {
                remote_addr: remote.addr(),
                compare_add: compare,
                swap,
                rkey: remote.rkey(),
            };
        }
        SendOp::FetchAdd { remote, add } => {
            wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
            wr.wr.atomic = sys::atomic_t {
                remote_addr: remote.addr(),
                compare_add: add,
                swap: 0,
                rkey: remote.rkey(),
            };
        }
    }
    if let Some(dest) = &r.ud {
        wr.wr.ud = sys::ud_t {
            ah: dest.ah.as_ptr(),
            remote_qpn: dest.remote_qpn,
            remote_qkey: dest.remote_qkey,
        };
    }
    wr
}

/// An operation's operands, and a UD request's destination, as the `ibv_wr_*` builders
/// and setters take them; those a request has not are 0 (null).
#[derive(Clone, Copy)]
pub(super) struct Operands {
    pub(super) rkey: u32,
    pub(super) addr: u64,
    /// Immediate data, in network order.
    pub(super) imm_be: u32,
    pub(super) compare_add: u64,
    pub(super) swap: u64,
    pub(super) ah: *mut sys::ibv_ah,
    pub(super) remote_qpn: u32,
    pub(super) remote_qkey: u32,
}

impl Operands {
    /// Those of `op`, to `ud` when given.
    pub(super) fn of(op: &SendOp, ud: Option<&UdDest<'_>>) -> Self {
        let none = Operands {
            rkey: 0,
            addr: 0,
            imm_be: 0,
            compare_add: 0,
            swap: 0,
            ah: ptr::null_mut(),
            remote_qpn: 0,
            remote_qkey: 0,
        };
        let to = match ud {
            Some(d) => Operands {
                ah: d.ah.as_ptr(),
                remote_qpn: d.remote_qpn,
                remote_qkey: d.remote_qkey,
                ..none
            },
            None => none,
        };
        let at = |t: &RemoteSlice| Operands { rkey: t.rkey(), addr: t.addr(), ..to };
        match *op {
            SendOp::Send => to,
            SendOp::SendImm(imm) => Operands { imm_be: imm.to_be(), ..to },
            SendOp::Write(t) | SendOp::Read(t) => at(&t),
            SendOp::WriteImm(t, imm) => Operands { imm_be: imm.to_be(), ..at(&t) },
            SendOp::CompareSwap { remote, compare, swap } => {
                Operands { compare_add: compare, swap, ..at(&remote) }
            }
            SendOp::FetchAdd { remote, add } => Operands { compare_add: add, ..at(&remote) },
        }
    }
}

/// The SGE of a request without data.
pub(super) const NO_SGE: sys::ibv_sge = sys::ibv_sge { addr: 0, length: 0, lkey: 0 };

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_flags_map_to_verbs_bits() {
        let f = SendFlags { signaled: true, inline: true, solicited: false, fence: false };
        assert_eq!(f.raw(), 2 | 8);
        assert_eq!(SendFlags::default().raw(), 0);
    }
}
