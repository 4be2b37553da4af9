//! The NetworkDirect bindings against the C layout of `nddef.h`, `ndspi.h` and the
//! Winsock types they use (64-bit Windows, which is what the Windows build targets):
//! sizes, field offsets and vtable slot counts. These run on every host.

use std::mem::{offset_of, size_of};

use rdmabench_ffi::nd::sys::*;

fn slots<V>() -> usize {
    size_of::<V>() / size_of::<usize>()
}

#[test]
#[cfg(target_pointer_width = "64")]
fn structures_have_the_c_layout() {
    assert_eq!(size_of::<GUID>(), 16);
    assert_eq!(size_of::<OVERLAPPED>(), 32);
    assert_eq!(offset_of!(OVERLAPPED, hEvent), 24);

    assert_eq!(size_of::<ND2_ADAPTER_INFO>(), 96);
    assert_eq!(offset_of!(ND2_ADAPTER_INFO, VendorId), 4);
    assert_eq!(offset_of!(ND2_ADAPTER_INFO, DeviceId), 6);
    assert_eq!(offset_of!(ND2_ADAPTER_INFO, AdapterId), 8);
    assert_eq!(offset_of!(ND2_ADAPTER_INFO, MaxRegistrationSize), 16);
    assert_eq!(offset_of!(ND2_ADAPTER_INFO, MaxWindowSize), 24);
    assert_eq!(offset_of!(ND2_ADAPTER_INFO, MaxInitiatorSge), 32);
    assert_eq!(offset_of!(ND2_ADAPTER_INFO, MaxInlineDataSize), 48);
    assert_eq!(offset_of!(ND2_ADAPTER_INFO, MaxCompletionQueueDepth), 72);
    assert_eq!(offset_of!(ND2_ADAPTER_INFO, AdapterFlags), 92);

    assert_eq!(size_of::<ND2_RESULT>(), 32);
    assert_eq!(offset_of!(ND2_RESULT, BytesTransferred), 4);
    assert_eq!(offset_of!(ND2_RESULT, QueuePairContext), 8);
    assert_eq!(offset_of!(ND2_RESULT, RequestContext), 16);
    assert_eq!(offset_of!(ND2_RESULT, RequestType), 24);

    assert_eq!(size_of::<ND2_SGE>(), 16);
    assert_eq!(offset_of!(ND2_SGE, BufferLength), 8);
    assert_eq!(offset_of!(ND2_SGE, MemoryRegionToken), 12);

    assert_eq!(size_of::<SOCKADDR>(), 16);
    assert_eq!(size_of::<SOCKADDR_IN>(), 16);
    assert_eq!(size_of::<SOCKADDR_IN6>(), 28);
    assert_eq!(size_of::<SOCKET_ADDRESS>(), 16);
    assert_eq!(offset_of!(SOCKET_ADDRESS_LIST, Address), 8);

    assert_eq!(size_of::<WSAPROTOCOL_INFOW>(), 628);
    assert_eq!(offset_of!(WSAPROTOCOL_INFOW, ProviderId), 20);
    assert_eq!(offset_of!(WSAPROTOCOL_INFOW, iVersion), 72);
    assert_eq!(offset_of!(WSAPROTOCOL_INFOW, iSocketType), 88);
    assert_eq!(offset_of!(WSAPROTOCOL_INFOW, szProtocol), 116);
}

#[test]
fn vtables_have_the_header_slot_counts() {
    // IUnknown 3; IND2Overlapped adds 2.
    assert_eq!(slots::<IUnknownVtbl>(), 3);
    assert_eq!(slots::<IND2OverlappedVtbl>(), 5);
    assert_eq!(slots::<IND2CompletionQueueVtbl>(), 5 + 4);
    assert_eq!(slots::<IND2SharedReceiveQueueVtbl>(), 5 + 4);
    assert_eq!(slots::<IND2MemoryWindowVtbl>(), 3 + 1);
    assert_eq!(slots::<IND2MemoryRegionVtbl>(), 5 + 4);
    assert_eq!(slots::<IND2QueuePairVtbl>(), 3 + 7);
    assert_eq!(slots::<IND2ConnectorVtbl>(), 5 + 11);
    assert_eq!(slots::<IND2ListenerVtbl>(), 5 + 4);
    assert_eq!(slots::<IND2AdapterVtbl>(), 3 + 11);
    assert_eq!(slots::<IND2ProviderVtbl>(), 3 + 3);
    // Slots sit where the header declares them.
    assert_eq!(offset_of!(IND2CompletionQueueVtbl, GetResults) / size_of::<usize>(), 8);
    assert_eq!(offset_of!(IND2QueuePairVtbl, Write) / size_of::<usize>(), 9);
    assert_eq!(offset_of!(IND2ConnectorVtbl, Disconnect) / size_of::<usize>(), 15);
    assert_eq!(offset_of!(IND2AdapterVtbl, CreateQueuePair) / size_of::<usize>(), 10);
    assert_eq!(offset_of!(IND2ProviderVtbl, OpenAdapter) / size_of::<usize>(), 5);
}

#[test]
fn interface_ids_are_the_headers() {
    assert_eq!(IID_IND2Provider.to_string(), "{49EAE6C1-76C4-46D0-8003-5C2EAA2C9A8E}");
    assert_eq!(IID_IND2Adapter.to_string(), "{D89C798C-4823-4D69-846C-DFDCCFF9E5F3}");
    assert_eq!(IID_IND2MemoryWindow.to_string(), "{070FE1F5-0AB5-4361-88DB-974BA704D4B9}");
    assert_eq!(IID_IUnknown.to_string(), "{00000000-0000-0000-C000-000000000046}");
    let all = [
        IID_IND2Overlapped,
        IID_IND2CompletionQueue,
        IID_IND2SharedReceiveQueue,
        IID_IND2MemoryWindow,
        IID_IND2MemoryRegion,
        IID_IND2QueuePair,
        IID_IND2Connector,
        IID_IND2Listener,
        IID_IND2Adapter,
        IID_IND2Provider,
    ];
    for (i, a) in all.iter().enumerate() {
        assert!(all[i + 1..].iter().all(|b| a != b), "{a} twice");
    }
}

#[test]
fn flag_values_are_the_headers() {
    assert_eq!(
        ND_MR_FLAG_ALLOW_REMOTE_WRITE & ND_MR_FLAG_ALLOW_LOCAL_WRITE,
        ND_MR_FLAG_ALLOW_LOCAL_WRITE
    );
    assert_eq!(ND_OP_FLAG_INLINE, 0x20);
    assert_eq!(ND_VERSION_2, 0x20000);
    assert_eq!((Nd2RequestTypeReceive, Nd2RequestTypeWrite), (0, 5));
    assert_eq!((AF_INET, AF_INET6), (2, 23));
}
