//! NDSPI v2 as C sees it: the structures of `nddef.h`, the interface vtables of
//! `ndspi.h` in header order, their IIDs, and the few Win32 types they use.
//!
//! Written by hand from Microsoft's public headers (microsoft/NetworkDirect,
//! `src/ndutil/ndspi.h`, `nddef.h`) so that they compile on every target: the layout
//! tests (sizes, offsets, slot counts) run in Linux CI, and the software provider of
//! the tests (the development crate `rdmabench-nd-soft`) fills these same vtables. `extern "system"` is `stdcall` on 32-bit
//! Windows and the C convention everywhere else, as `STDMETHOD` is.
//!
//! Names follow the header (`QueryInterface`, `GetResults`), so the header and the
//! Microsoft documentation of each method apply unchanged.
#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals, missing_docs)]

use std::ffi::c_void;

/// A COM status: negative values are failures (`FAILED(hr)`).
pub type HRESULT = i32;
/// A Win32 handle.
pub type HANDLE = *mut c_void;
/// A Win32 boolean (0 = false).
pub type BOOL = i32;
/// A processor affinity mask.
pub type KAFFINITY = usize;

/// A COM interface or class id.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GUID {
    pub data1: u32,
    pub data2: u16,
    pub data3: u16,
    pub data4: [u8; 8],
}

impl GUID {
    /// `DEFINE_GUID`'s argument order.
    pub const fn new(data1: u32, data2: u16, data3: u16, data4: [u8; 8]) -> Self {
        GUID { data1, data2, data3, data4 }
    }
}

impl std::fmt::Display for GUID {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = &self.data4;
        write!(
            f,
            "{{{:08X}-{:04X}-{:04X}-{:02X}{:02X}-{:02X}{:02X}{:02X}{:02X}{:02X}{:02X}}}",
            self.data1, self.data2, self.data3, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]
        )
    }
}

/// Win32 `OVERLAPPED`: the union of `Offset`/`OffsetHigh` and `Pointer` is kept as
/// its two 32-bit halves (the same size on both word sizes).
#[repr(C)]
#[derive(Debug)]
pub struct OVERLAPPED {
    /// The request's status (an NTSTATUS, which ND's codes are) once it completes.
    pub Internal: usize,
    /// Bytes transferred.
    pub InternalHigh: usize,
    pub Offset: u32,
    pub OffsetHigh: u32,
    /// Event signalled when a pending request completes (may be null).
    pub hEvent: HANDLE,
}

impl Default for OVERLAPPED {
    fn default() -> Self {
        OVERLAPPED {
            Internal: 0,
            InternalHigh: 0,
            Offset: 0,
            OffsetHigh: 0,
            hEvent: std::ptr::null_mut(),
        }
    }
}

/// Windows' address family numbers (they differ from Linux's: AF_INET6 is 23).
pub const AF_INET: u16 = 2;
/// Windows' `AF_INET6`.
pub const AF_INET6: u16 = 23;

/// Winsock `SOCKADDR` (no length byte on Windows).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SOCKADDR {
    pub sa_family: u16,
    pub sa_data: [u8; 14],
}

/// Winsock `SOCKADDR_IN`: port and address in network order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SOCKADDR_IN {
    pub sin_family: u16,
    pub sin_port: u16,
    pub sin_addr: [u8; 4],
    pub sin_zero: [u8; 8],
}

/// Winsock `SOCKADDR_IN6`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SOCKADDR_IN6 {
    pub sin6_family: u16,
    pub sin6_port: u16,
    pub sin6_flowinfo: u32,
    pub sin6_addr: [u8; 16],
    pub sin6_scope_id: u32,
}

/// Winsock `SOCKET_ADDRESS`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SOCKET_ADDRESS {
    pub lpSockaddr: *mut SOCKADDR,
    pub iSockaddrLength: i32,
}

/// Winsock `SOCKET_ADDRESS_LIST`: `iAddressCount` entries follow in one buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SOCKET_ADDRESS_LIST {
    pub iAddressCount: i32,
    pub Address: [SOCKET_ADDRESS; 1],
}

// nddef.h
pub const ND_VERSION_1: u32 = 0x1;
pub const ND_VERSION_2: u32 = 0x20000;

pub const ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED: u32 = 0x0000_0001;
pub const ND_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED: u32 = 0x0000_0004;
pub const ND_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED: u32 = 0x0000_0008;
pub const ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED: u32 = 0x0000_0100;
pub const ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED: u32 = 0x0001_0000;

pub const ND_CQ_NOTIFY_ERRORS: u32 = 0;
pub const ND_CQ_NOTIFY_ANY: u32 = 1;
pub const ND_CQ_NOTIFY_SOLICITED: u32 = 2;

pub const ND_MR_FLAG_ALLOW_LOCAL_WRITE: u32 = 0x0000_0001;
pub const ND_MR_FLAG_ALLOW_REMOTE_READ: u32 = 0x0000_0002;
/// Implies local write (5 = 4 | 1).
pub const ND_MR_FLAG_ALLOW_REMOTE_WRITE: u32 = 0x0000_0005;
pub const ND_MR_FLAG_RDMA_READ_SINK: u32 = 0x0000_0008;
pub const ND_MR_FLAG_DO_NOT_SECURE_VM: u32 = 0x8000_0000;

pub const ND_OP_FLAG_SILENT_SUCCESS: u32 = 0x0000_0001;
pub const ND_OP_FLAG_READ_FENCE: u32 = 0x0000_0002;
pub const ND_OP_FLAG_SEND_AND_SOLICIT_EVENT: u32 = 0x0000_0004;
pub const ND_OP_FLAG_ALLOW_READ: u32 = 0x0000_0008;
pub const ND_OP_FLAG_ALLOW_WRITE: u32 = 0x0000_0010;
pub const ND_OP_FLAG_INLINE: u32 = 0x0000_0020;

/// `ND2_ADAPTER_INFO`; the caller sets `InfoVersion` to [`ND_VERSION_2`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ND2_ADAPTER_INFO {
    pub InfoVersion: u32,
    pub VendorId: u16,
    pub DeviceId: u16,
    pub AdapterId: u64,
    pub MaxRegistrationSize: usize,
    pub MaxWindowSize: usize,
    pub MaxInitiatorSge: u32,
    pub MaxReceiveSge: u32,
    pub MaxReadSge: u32,
    pub MaxTransferLength: u32,
    pub MaxInlineDataSize: u32,
    pub MaxInboundReadLimit: u32,
    pub MaxOutboundReadLimit: u32,
    pub MaxReceiveQueueDepth: u32,
    pub MaxInitiatorQueueDepth: u32,
    pub MaxSharedReceiveQueueDepth: u32,
    pub MaxCompletionQueueDepth: u32,
    pub InlineRequestThreshold: u32,
    pub LargeRequestThreshold: u32,
    pub MaxCallerData: u32,
    pub MaxCalleeData: u32,
    pub AdapterFlags: u32,
}

/// `ND2_REQUEST_TYPE` (a C enum: 32 bits).
pub type ND2_REQUEST_TYPE = i32;
pub const Nd2RequestTypeReceive: ND2_REQUEST_TYPE = 0;
pub const Nd2RequestTypeSend: ND2_REQUEST_TYPE = 1;
pub const Nd2RequestTypeBind: ND2_REQUEST_TYPE = 2;
pub const Nd2RequestTypeInvalidate: ND2_REQUEST_TYPE = 3;
pub const Nd2RequestTypeRead: ND2_REQUEST_TYPE = 4;
pub const Nd2RequestTypeWrite: ND2_REQUEST_TYPE = 5;

/// `ND2_RESULT`: one completion.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ND2_RESULT {
    pub Status: HRESULT,
    pub BytesTransferred: u32,
    pub QueuePairContext: *mut c_void,
    pub RequestContext: *mut c_void,
    pub RequestType: ND2_REQUEST_TYPE,
}

impl Default for ND2_RESULT {
    fn default() -> Self {
        ND2_RESULT {
            Status: 0,
            BytesTransferred: 0,
            QueuePairContext: std::ptr::null_mut(),
            RequestContext: std::ptr::null_mut(),
            RequestType: 0,
        }
    }
}

/// `ND2_SGE`: one scatter/gather element.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ND2_SGE {
    pub Buffer: *mut c_void,
    pub BufferLength: u32,
    pub MemoryRegionToken: u32,
}

// Interface ids (ndspi.h, DEFINE_GUID).
pub const IID_IUnknown: GUID =
    GUID::new(0x0000_0000, 0x0000, 0x0000, [0xc0, 0, 0, 0, 0, 0, 0, 0x46]);
pub const IID_IND2Overlapped: GUID =
    GUID::new(0xabf72719, 0xb016, 0x4a40, [0xa6, 0xf7, 0x62, 0x27, 0x91, 0xa7, 0x04, 0x4c]);
pub const IID_IND2CompletionQueue: GUID =
    GUID::new(0x20cc445e, 0x64a0, 0x4cbb, [0xaa, 0x75, 0xf6, 0xa7, 0x25, 0x1f, 0xda, 0x9e]);
pub const IID_IND2SharedReceiveQueue: GUID =
    GUID::new(0xaabd67dc, 0x459a, 0x4db1, [0x82, 0x6b, 0x56, 0xcf, 0xcc, 0x27, 0x88, 0x83]);
pub const IID_IND2MemoryWindow: GUID =
    GUID::new(0x070fe1f5, 0x0ab5, 0x4361, [0x88, 0xdb, 0x97, 0x4b, 0xa7, 0x04, 0xd4, 0xb9]);
pub const IID_IND2MemoryRegion: GUID =
    GUID::new(0x55dfea2f, 0xbc56, 0x4982, [0x8a, 0x45, 0x03, 0x01, 0xbe, 0x46, 0xc4, 0x13]);
pub const IID_IND2QueuePair: GUID =
    GUID::new(0xeef2f332, 0xb75d, 0x4063, [0xbc, 0xe3, 0x3a, 0x0b, 0xad, 0x2d, 0x02, 0xce]);
pub const IID_IND2Connector: GUID =
    GUID::new(0x7dd615c4, 0x6b4c, 0x4866, [0x95, 0x0c, 0xf3, 0xb1, 0xd2, 0x5a, 0x53, 0x02]);
pub const IID_IND2Listener: GUID =
    GUID::new(0x65d23d83, 0x3a57, 0x4e02, [0x86, 0xa4, 0x35, 0x01, 0x65, 0xc2, 0xd1, 0x30]);
pub const IID_IND2Adapter: GUID =
    GUID::new(0xd89c798c, 0x4823, 0x4d69, [0x84, 0x6c, 0xdf, 0xdc, 0xcf, 0xf9, 0xe5, 0xf3]);
pub const IID_IND2Provider: GUID =
    GUID::new(0x49eae6c1, 0x76c4, 0x46d0, [0x80, 0x03, 0x5c, 0x2e, 0xaa, 0x2c, 0x9a, 0x8e]);

/// `IUnknown`: every interface's first three slots.
#[repr(C)]
pub struct IUnknownVtbl {
    pub QueryInterface: unsafe extern "system" fn(
        this: *mut IUnknown,
        riid: *const GUID,
        ppv: *mut *mut c_void,
    ) -> HRESULT,
    pub AddRef: unsafe extern "system" fn(this: *mut IUnknown) -> u32,
    pub Release: unsafe extern "system" fn(this: *mut IUnknown) -> u32,
}

/// An object as COM sees it: a pointer to its vtable first.
#[repr(C)]
pub struct IUnknown {
    pub lpVtbl: *const IUnknownVtbl,
}

/// `IND2Overlapped`: the base of objects with asynchronous requests.
#[repr(C)]
pub struct IND2OverlappedVtbl {
    pub base: IUnknownVtbl,
    pub CancelOverlappedRequests: unsafe extern "system" fn(this: *mut IND2Overlapped) -> HRESULT,
    pub GetOverlappedResult: unsafe extern "system" fn(
        this: *mut IND2Overlapped,
        pOverlapped: *mut OVERLAPPED,
        wait: BOOL,
    ) -> HRESULT,
}

#[repr(C)]
pub struct IND2Overlapped {
    pub lpVtbl: *const IND2OverlappedVtbl,
}

#[repr(C)]
pub struct IND2CompletionQueueVtbl {
    pub base: IND2OverlappedVtbl,
    pub GetNotifyAffinity: unsafe extern "system" fn(
        this: *mut IND2CompletionQueue,
        pGroup: *mut u16,
        pAffinity: *mut KAFFINITY,
    ) -> HRESULT,
    pub Resize:
        unsafe extern "system" fn(this: *mut IND2CompletionQueue, queueDepth: u32) -> HRESULT,
    pub Notify: unsafe extern "system" fn(
        this: *mut IND2CompletionQueue,
        r#type: u32,
        pOverlapped: *mut OVERLAPPED,
    ) -> HRESULT,
    pub GetResults: unsafe extern "system" fn(
        this: *mut IND2CompletionQueue,
        results: *mut ND2_RESULT,
        nResults: u32,
    ) -> u32,
}

#[repr(C)]
pub struct IND2CompletionQueue {
    pub lpVtbl: *const IND2CompletionQueueVtbl,
}

#[repr(C)]
pub struct IND2SharedReceiveQueueVtbl {
    pub base: IND2OverlappedVtbl,
    pub GetNotifyAffinity: unsafe extern "system" fn(
        this: *mut IND2SharedReceiveQueue,
        pGroup: *mut u16,
        pAffinity: *mut KAFFINITY,
    ) -> HRESULT,
    pub Modify: unsafe extern "system" fn(
        this: *mut IND2SharedReceiveQueue,
        queueDepth: u32,
        notifyThreshold: u32,
    ) -> HRESULT,
    pub Notify: unsafe extern "system" fn(
        this: *mut IND2SharedReceiveQueue,
        pOverlapped: *mut OVERLAPPED,
    ) -> HRESULT,
    pub Receive: unsafe extern "system" fn(
        this: *mut IND2SharedReceiveQueue,
        requestContext: *mut c_void,
        sge: *const ND2_SGE,
        nSge: u32,
    ) -> HRESULT,
}

#[repr(C)]
pub struct IND2SharedReceiveQueue {
    pub lpVtbl: *const IND2SharedReceiveQueueVtbl,
}

#[repr(C)]
pub struct IND2MemoryWindowVtbl {
    pub base: IUnknownVtbl,
    pub GetRemoteToken: unsafe extern "system" fn(this: *mut IND2MemoryWindow) -> u32,
}

#[repr(C)]
pub struct IND2MemoryWindow {
    pub lpVtbl: *const IND2MemoryWindowVtbl,
}

#[repr(C)]
pub struct IND2MemoryRegionVtbl {
    pub base: IND2OverlappedVtbl,
    pub Register: unsafe extern "system" fn(
        this: *mut IND2MemoryRegion,
        pBuffer: *const c_void,
        cbBuffer: usize,
        flags: u32,
        pOverlapped: *mut OVERLAPPED,
    ) -> HRESULT,
    pub Deregister: unsafe extern "system" fn(
        this: *mut IND2MemoryRegion,
        pOverlapped: *mut OVERLAPPED,
    ) -> HRESULT,
    pub GetLocalToken: unsafe extern "system" fn(this: *mut IND2MemoryRegion) -> u32,
    pub GetRemoteToken: unsafe extern "system" fn(this: *mut IND2MemoryRegion) -> u32,
}

#[repr(C)]
pub struct IND2MemoryRegion {
    pub lpVtbl: *const IND2MemoryRegionVtbl,
}

#[repr(C)]
pub struct IND2QueuePairVtbl {
    pub base: IUnknownVtbl,
    pub Flush: unsafe extern "system" fn(this: *mut IND2QueuePair) -> HRESULT,
    pub Send: unsafe extern "system" fn(
        this: *mut IND2QueuePair,
        requestContext: *mut c_void,
        sge: *const ND2_SGE,
        nSge: u32,
        flags: u32,
    ) -> HRESULT,
    pub Receive: unsafe extern "system" fn(
        this: *mut IND2QueuePair,
        requestContext: *mut c_void,
        sge: *const ND2_SGE,
        nSge: u32,
    ) -> HRESULT,
    pub Bind: unsafe extern "system" fn(
        this: *mut IND2QueuePair,
        requestContext: *mut c_void,
        pMemoryRegion: *mut IUnknown,
        pMemoryWindow: *mut IUnknown,
        pBuffer: *const c_void,
        cbBuffer: usize,
        flags: u32,
    ) -> HRESULT,
    pub Invalidate: unsafe extern "system" fn(
        this: *mut IND2QueuePair,
        requestContext: *mut c_void,
        pMemoryWindow: *mut IUnknown,
        flags: u32,
    ) -> HRESULT,
    pub Read: unsafe extern "system" fn(
        this: *mut IND2QueuePair,
        requestContext: *mut c_void,
        sge: *const ND2_SGE,
        nSge: u32,
        remoteAddress: u64,
        remoteToken: u32,
        flags: u32,
    ) -> HRESULT,
    pub Write: unsafe extern "system" fn(
        this: *mut IND2QueuePair,
        requestContext: *mut c_void,
        sge: *const ND2_SGE,
        nSge: u32,
        remoteAddress: u64,
        remoteToken: u32,
        flags: u32,
    ) -> HRESULT,
}

#[repr(C)]
pub struct IND2QueuePair {
    pub lpVtbl: *const IND2QueuePairVtbl,
}

#[repr(C)]
pub struct IND2ConnectorVtbl {
    pub base: IND2OverlappedVtbl,
    pub Bind: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pAddress: *const SOCKADDR,
        cbAddress: u32,
    ) -> HRESULT,
    pub Connect: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pQueuePair: *mut IUnknown,
        pDestAddress: *const SOCKADDR,
        cbDestAddress: u32,
        inboundReadLimit: u32,
        outboundReadLimit: u32,
        pPrivateData: *const c_void,
        cbPrivateData: u32,
        pOverlapped: *mut OVERLAPPED,
    ) -> HRESULT,
    pub CompleteConnect: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pOverlapped: *mut OVERLAPPED,
    ) -> HRESULT,
    pub Accept: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pQueuePair: *mut IUnknown,
        inboundReadLimit: u32,
        outboundReadLimit: u32,
        pPrivateData: *const c_void,
        cbPrivateData: u32,
        pOverlapped: *mut OVERLAPPED,
    ) -> HRESULT,
    pub Reject: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pPrivateData: *const c_void,
        cbPrivateData: u32,
    ) -> HRESULT,
    pub GetReadLimits: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pInboundReadLimit: *mut u32,
        pOutboundReadLimit: *mut u32,
    ) -> HRESULT,
    pub GetPrivateData: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pPrivateData: *mut c_void,
        pcbPrivateData: *mut u32,
    ) -> HRESULT,
    pub GetLocalAddress: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pAddress: *mut SOCKADDR,
        pcbAddress: *mut u32,
    ) -> HRESULT,
    pub GetPeerAddress: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pAddress: *mut SOCKADDR,
        pcbAddress: *mut u32,
    ) -> HRESULT,
    pub NotifyDisconnect: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pOverlapped: *mut OVERLAPPED,
    ) -> HRESULT,
    pub Disconnect: unsafe extern "system" fn(
        this: *mut IND2Connector,
        pOverlapped: *mut OVERLAPPED,
    ) -> HRESULT,
}

#[repr(C)]
pub struct IND2Connector {
    pub lpVtbl: *const IND2ConnectorVtbl,
}

#[repr(C)]
pub struct IND2ListenerVtbl {
    pub base: IND2OverlappedVtbl,
    pub Bind: unsafe extern "system" fn(
        this: *mut IND2Listener,
        pAddress: *const SOCKADDR,
        cbAddress: u32,
    ) -> HRESULT,
    pub Listen: unsafe extern "system" fn(this: *mut IND2Listener, backlog: u32) -> HRESULT,
    pub GetLocalAddress: unsafe extern "system" fn(
        this: *mut IND2Listener,
        pAddress: *mut SOCKADDR,
        pcbAddress: *mut u32,
    ) -> HRESULT,
    pub GetConnectionRequest: unsafe extern "system" fn(
        this: *mut IND2Listener,
        pConnector: *mut IUnknown,
        pOverlapped: *mut OVERLAPPED,
    ) -> HRESULT,
}

#[repr(C)]
pub struct IND2Listener {
    pub lpVtbl: *const IND2ListenerVtbl,
}

#[repr(C)]
pub struct IND2AdapterVtbl {
    pub base: IUnknownVtbl,
    pub CreateOverlappedFile:
        unsafe extern "system" fn(this: *mut IND2Adapter, phOverlappedFile: *mut HANDLE) -> HRESULT,
    pub Query: unsafe extern "system" fn(
        this: *mut IND2Adapter,
        pInfo: *mut ND2_ADAPTER_INFO,
        pcbInfo: *mut u32,
    ) -> HRESULT,
    pub QueryAddressList: unsafe extern "system" fn(
        this: *mut IND2Adapter,
        pAddressList: *mut SOCKET_ADDRESS_LIST,
        pcbAddressList: *mut u32,
    ) -> HRESULT,
    pub CreateCompletionQueue: unsafe extern "system" fn(
        this: *mut IND2Adapter,
        iid: *const GUID,
        hOverlappedFile: HANDLE,
        queueDepth: u32,
        group: u16,
        affinity: KAFFINITY,
        ppCompletionQueue: *mut *mut c_void,
    ) -> HRESULT,
    pub CreateMemoryRegion: unsafe extern "system" fn(
        this: *mut IND2Adapter,
        iid: *const GUID,
        hOverlappedFile: HANDLE,
        ppMemoryRegion: *mut *mut c_void,
    ) -> HRESULT,
    pub CreateMemoryWindow: unsafe extern "system" fn(
        this: *mut IND2Adapter,
        iid: *const GUID,
        ppMemoryWindow: *mut *mut c_void,
    ) -> HRESULT,
    pub CreateSharedReceiveQueue: unsafe extern "system" fn(
        this: *mut IND2Adapter,
        iid: *const GUID,
        hOverlappedFile: HANDLE,
        queueDepth: u32,
        maxRequestSge: u32,
        notifyThreshold: u32,
        group: u16,
        affinity: KAFFINITY,
        ppSharedReceiveQueue: *mut *mut c_void,
    ) -> HRESULT,
    pub CreateQueuePair: unsafe extern "system" fn(
        this: *mut IND2Adapter,
        iid: *const GUID,
        pReceiveCompletionQueue: *mut IUnknown,
        pInitiatorCompletionQueue: *mut IUnknown,
        context: *mut c_void,
        receiveQueueDepth: u32,
        initiatorQueueDepth: u32,
        maxReceiveRequestSge: u32,
        maxInitiatorRequestSge: u32,
        inlineDataSize: u32,
        ppQueuePair: *mut *mut c_void,
    ) -> HRESULT,
    pub CreateQueuePairWithSrq: unsafe extern "system" fn(
        this: *mut IND2Adapter,
        iid: *const GUID,
        pReceiveCompletionQueue: *mut IUnknown,
        pInitiatorCompletionQueue: *mut IUnknown,
        pSharedReceiveQueue: *mut IUnknown,
        context: *mut c_void,
        initiatorQueueDepth: u32,
        maxInitiatorRequestSge: u32,
        inlineDataSize: u32,
        ppQueuePair: *mut *mut c_void,
    ) -> HRESULT,
    pub CreateConnector: unsafe extern "system" fn(
        this: *mut IND2Adapter,
        iid: *const GUID,
        hOverlappedFile: HANDLE,
        ppConnector: *mut *mut c_void,
    ) -> HRESULT,
    pub CreateListener: unsafe extern "system" fn(
        this: *mut IND2Adapter,
        iid: *const GUID,
        hOverlappedFile: HANDLE,
        ppListener: *mut *mut c_void,
    ) -> HRESULT,
}

#[repr(C)]
pub struct IND2Adapter {
    pub lpVtbl: *const IND2AdapterVtbl,
}

#[repr(C)]
pub struct IND2ProviderVtbl {
    pub base: IUnknownVtbl,
    pub QueryAddressList: unsafe extern "system" fn(
        this: *mut IND2Provider,
        pAddressList: *mut SOCKET_ADDRESS_LIST,
        pcbAddressList: *mut u32,
    ) -> HRESULT,
    pub ResolveAddress: unsafe extern "system" fn(
        this: *mut IND2Provider,
        pAddress: *const SOCKADDR,
        cbAddress: u32,
        pAdapterId: *mut u64,
    ) -> HRESULT,
    pub OpenAdapter: unsafe extern "system" fn(
        this: *mut IND2Provider,
        iid: *const GUID,
        adapterId: u64,
        ppAdapter: *mut *mut c_void,
    ) -> HRESULT,
}

#[repr(C)]
pub struct IND2Provider {
    pub lpVtbl: *const IND2ProviderVtbl,
}

/// `DllGetClassObject`, the provider DLL's entry point.
pub type DllGetClassObjectFn = unsafe extern "system" fn(
    rclsid: *const GUID,
    riid: *const GUID,
    ppv: *mut *mut c_void,
) -> HRESULT;

// Winsock catalog (ws2spi.h / winsock2.h): how NetworkDirect providers are registered.
pub const XP1_GUARANTEED_DELIVERY: u32 = 0x0000_0002;
pub const XP1_GUARANTEED_ORDER: u32 = 0x0000_0004;
pub const XP1_MESSAGE_ORIENTED: u32 = 0x0000_0008;
pub const XP1_CONNECT_DATA: u32 = 0x0000_0080;
pub const PFL_HIDDEN: u32 = 0x0000_0004;
pub const PFL_NETWORKDIRECT_PROVIDER: u32 = 0x0000_0010;
pub const MAX_PROTOCOL_CHAIN: usize = 7;
pub const WSAPROTOCOL_LEN: usize = 255;

/// `WSAPROTOCOLCHAIN`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WSAPROTOCOLCHAIN {
    pub ChainLen: i32,
    pub ChainEntries: [u32; MAX_PROTOCOL_CHAIN],
}

/// `WSAPROTOCOL_INFOW`: one Winsock catalog entry.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WSAPROTOCOL_INFOW {
    pub dwServiceFlags1: u32,
    pub dwServiceFlags2: u32,
    pub dwServiceFlags3: u32,
    pub dwServiceFlags4: u32,
    pub dwProviderFlags: u32,
    pub ProviderId: GUID,
    pub dwCatalogEntryId: u32,
    pub ProtocolChain: WSAPROTOCOLCHAIN,
    pub iVersion: i32,
    pub iAddressFamily: i32,
    pub iMaxSockAddr: i32,
    pub iMinSockAddr: i32,
    pub iSocketType: i32,
    pub iProtocol: i32,
    pub iProtocolMaxOffset: i32,
    pub iNetworkByteOrder: i32,
    pub iSecurityScheme: i32,
    pub dwMessageSize: u32,
    pub dwProviderReserved: u32,
    pub szProtocol: [u16; WSAPROTOCOL_LEN + 1],
}
