//! The NetworkDirect wrappers driven end to end through the software provider: the
//! same vtables a vendor DLL fills, over in-process memory. Bytes moved, completion
//! contents, error statuses by name, and every object released at the end.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rdmabench_ffi::nd::{
    self, status, Adapter, CompletionQueue, Connector, MemoryRegion, MrFlags, NdCompletion,
    OpFlags, QpCaps, QueuePair, RequestKind,
};
use rdmabench_nd_soft as soft;

/// The provider's object count is process-wide: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn adapter() -> Adapter {
    soft::install();
    nd::open_adapter(soft::ADDRESS).expect("the soft provider owns 127.0.0.1")
}

struct Side {
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
    conn: Connector,
}

fn side(a: &Adapter, ctx: u64) -> Side {
    let cq = a.create_cq(64).unwrap();
    let mr = a.register(4096, MrFlags::ALL).unwrap();
    let caps = QpCaps {
        receive_depth: 16,
        initiator_depth: 16,
        receive_sge: 2,
        initiator_sge: 2,
        inline_data: 64,
    };
    let qp = a.create_qp(&cq, &cq, caps, ctx).unwrap();
    let conn = a.create_connector().unwrap();
    Side { cq, mr, qp, conn }
}

/// A connected client/server pair; the server accepts with private data "srv".
fn connected(a: &Adapter) -> (Side, Side) {
    let mut listener = a.listen(SocketAddr::new(soft::ADDRESS, 0), 4).unwrap();
    let at = listener.local_address().unwrap();
    assert_eq!(at.ip(), soft::ADDRESS);
    assert_ne!(at.port(), 0, "the provider picks a port");
    let mut client = side(a, 1);
    let mut server = side(a, 2);
    let server = std::thread::scope(|s| {
        let h = s.spawn(move || {
            listener.get_request(&mut server.conn, Duration::from_secs(5)).unwrap();
            assert_eq!(server.conn.private_data().unwrap(), b"qp-0");
            server.conn.accept(&server.qp, (4, 4), b"srv", Duration::from_secs(5)).unwrap();
            server
        });
        client.conn.connect(&client.qp, at, (4, 4), b"qp-0", Duration::from_secs(5)).unwrap();
        h.join().unwrap()
    });
    assert_eq!(client.conn.private_data().unwrap(), b"srv");
    assert_eq!(client.conn.peer_address().unwrap(), at);
    assert_eq!(client.conn.read_limits().unwrap(), (4, 4));
    (client, server)
}

fn poll_one(cq: &mut CompletionQueue) -> NdCompletion {
    let mut out = [NdCompletion::default(); 4];
    for _ in 0..1000 {
        if cq.poll(&mut out[..1]) == 1 {
            return out[0];
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("no completion within a second");
}

#[test]
fn discovery_finds_the_provider_and_its_adapter() {
    let _g = serial();
    soft::install();
    let d = nd::discover();
    assert!(d.providers.iter().any(|p| p.name().contains("software provider")), "{d:?}");
    let a = adapter();
    assert_eq!(a.info().AdapterId, soft::ADAPTER_ID);
    assert_eq!(a.info().MaxInlineDataSize, soft::MAX_INLINE);
    assert_eq!(a.addresses().unwrap(), vec![SocketAddr::new(soft::ADDRESS, 0)]);
    assert_eq!(a.flag_names(), vec!["in-order DMA", "loopback connections"]);
    let e = nd::open_adapter(IpAddr::from([10, 9, 8, 7])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no NetworkDirect adapter has address 10.9.8.7 (adapter addresses: 127.0.0.1)"
    );
}

#[test]
fn registration_gives_tokens_and_a_remote_view() {
    let _g = serial();
    let a = adapter();
    let mr = a.register(10_000, MrFlags::ALL).unwrap();
    let other = a.register(1, MrFlags::LOCAL_WRITE).unwrap();
    assert_ne!(mr.local_token(), 0);
    assert_ne!(mr.local_token(), other.local_token());
    let r = mr.remote();
    assert_eq!((r.addr, r.len, r.rkey), (mr.addr(), 10_000, mr.remote_token()));
    assert_eq!(mr.addr() % 4096, 0, "page-aligned");
    assert!(mr.as_slice().iter().all(|&b| b == 0));
    let e = a.register(0, MrFlags::ALL).err().unwrap();
    assert_eq!(e.name(), "ND_INVALID_BUFFER_SIZE");
    assert!(mr.slice(4096, 10_000).is_err());
}

#[test]
fn write_read_and_send_move_the_bytes() {
    let _g = serial();
    soft::install(); // the registered provider lives as long as the process
    let before = soft::live_objects();
    {
        let a = adapter();
        let (mut c, mut s) = connected(&a);
        // RDMA write: client bytes 0..5 land at server offset 100.
        c.mr.as_mut_slice()[..5].copy_from_slice(b"hello");
        let dst = s.mr.remote().slice(100, 5).unwrap();
        c.qp.write(7, &[c.mr.slice(0, 5).unwrap()], dst, OpFlags::new(true, false)).unwrap();
        let r = poll_one(&mut c.cq);
        assert_eq!((r.status(), r.bytes(), r.kind()), (status::ND_SUCCESS, 5, RequestKind::Write));
        assert_eq!((r.context(), r.qp_context()), (7, 1));
        assert_eq!(&s.mr.as_slice()[100..105], b"hello");

        // RDMA read: server bytes 200..203 come back to client offset 50.
        s.mr.as_mut_slice()[200..203].copy_from_slice(b"abc");
        let src = s.mr.remote().slice(200, 3).unwrap();
        c.qp.read(8, &[c.mr.slice(50, 3).unwrap()], src, OpFlags::new(true, false)).unwrap();
        let r = poll_one(&mut c.cq);
        assert_eq!((r.status(), r.kind(), r.context()), (status::ND_SUCCESS, RequestKind::Read, 8));
        assert_eq!(&c.mr.as_slice()[50..53], b"abc");

        // Send before the receive is posted: it waits for it, as RC retries would.
        c.mr.as_mut_slice()[..4].copy_from_slice(b"ping");
        c.qp.send(
            9,
            &[c.mr.slice(0, 2).unwrap(), c.mr.slice(2, 2).unwrap()],
            OpFlags::new(true, true),
        )
        .unwrap();
        let mut none = [NdCompletion::default(); 1];
        assert_eq!(c.cq.poll(&mut none), 0, "no send completion before a receive took it");
        s.qp.receive(11, &[s.mr.slice(1000, 64).unwrap()]).unwrap();
        let r = poll_one(&mut s.cq);
        assert_eq!(
            (r.status(), r.bytes(), r.kind()),
            (status::ND_SUCCESS, 4, RequestKind::Receive)
        );
        assert_eq!((r.context(), r.qp_context()), (11, 2));
        assert_eq!(&s.mr.as_slice()[1000..1004], b"ping");
        let r = poll_one(&mut c.cq);
        assert_eq!((r.status(), r.kind(), r.context()), (status::ND_SUCCESS, RequestKind::Send, 9));

        // Silent success: nothing to poll.
        c.qp.write(12, &[c.mr.slice(0, 1).unwrap()], dst, OpFlags::new(false, false)).unwrap();
        assert_eq!(c.cq.poll(&mut none), 0);
    }
    assert_eq!(soft::live_objects(), before, "every object released");
}

#[test]
fn errors_complete_with_their_nd_status() {
    let _g = serial();
    soft::install(); // the registered provider lives as long as the process
    let before = soft::live_objects();
    {
        let a = adapter();
        let (mut c, mut s) = connected(&a);
        // A wrong token.
        let bad = s.mr.remote().with_rkey(0xdead).slice(0, 8).unwrap();
        c.qp.write(1, &[c.mr.slice(0, 8).unwrap()], bad, OpFlags::new(false, false)).unwrap();
        let r = poll_one(&mut c.cq);
        assert_eq!(
            status::status_name(r.status()),
            "ND_ACCESS_VIOLATION",
            "silent success still reports failures"
        );
        // A receive too small: overrun there, remote error here.
        s.qp.receive(2, &[s.mr.slice(0, 2).unwrap()]).unwrap();
        c.qp.send(3, &[c.mr.slice(0, 16).unwrap()], OpFlags::new(true, false)).unwrap();
        assert_eq!(status::status_name(poll_one(&mut s.cq).status()), "ND_DATA_OVERRUN");
        assert_eq!(status::status_name(poll_one(&mut c.cq).status()), "ND_REMOTE_ERROR");
        // Inline beyond the queue pair's inline size is refused at once.
        let e = c.qp.send(4, &[c.mr.slice(0, 100).unwrap()], OpFlags::new(true, true)).unwrap_err();
        assert_eq!(e.name(), "ND_INVALID_PARAMETER_MIX");
        // The server disconnects: the client hears it; its work then fails.
        s.qp.receive(5, &[s.mr.slice(0, 8).unwrap()]).unwrap();
        s.conn.disconnect().unwrap();
        let r = poll_one(&mut s.cq);
        assert_eq!(
            (status::status_name(r.status()), r.context()),
            ("ND_CANCELED".into(), 5),
            "receives flushed"
        );
        assert!(c.conn.wait_disconnect(Duration::from_secs(1)).unwrap());
        c.qp.write(
            6,
            &[c.mr.slice(0, 8).unwrap()],
            s.mr.remote().slice(0, 8).unwrap(),
            OpFlags::new(true, false),
        )
        .unwrap();
        assert_eq!(status::status_name(poll_one(&mut c.cq).status()), "ND_CONNECTION_ABORTED");
    }
    assert_eq!(soft::live_objects(), before, "every object released");
}

#[test]
fn connection_set_up_fails_cleanly() {
    let _g = serial();
    soft::install(); // the registered provider lives as long as the process
    let before = soft::live_objects();
    {
        let a = adapter();
        // Nobody listens.
        let mut c = side(&a, 1);
        let nobody = SocketAddr::new(soft::ADDRESS, 1);
        let e = c.conn.connect(&c.qp, nobody, (1, 1), &[], Duration::from_secs(1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "IND2Connector::Connect failed: ND_CONNECTION_REFUSED (0xc0000236: the peer refused \
                                   the connection (nobody listens, or it rejected))"
        );
        // Nobody connects: the wait ends with ND_IO_TIMEOUT, the request canceled.
        let mut listener = a.listen(SocketAddr::new(soft::ADDRESS, 0), 1).unwrap();
        let mut s = side(&a, 2);
        let e = listener.get_request(&mut s.conn, Duration::from_millis(50)).unwrap_err();
        assert_eq!(e.name(), "ND_IO_TIMEOUT");
        // The server rejects, saying why.
        let at = listener.local_address().unwrap();
        let (r, back) = std::thread::scope(|sc| {
            let h = sc.spawn(move || {
                listener.get_request(&mut s.conn, Duration::from_secs(5)).unwrap();
                s.conn.reject(b"busy").unwrap();
                (listener, s)
            });
            let r = c.conn.connect(&c.qp, at, (1, 1), b"hi", Duration::from_secs(5));
            (r, h.join().unwrap())
        });
        let (_listener, _s) = back;
        assert_eq!(r.unwrap_err().name(), "ND_CONNECTION_REFUSED");
        assert_eq!(c.conn.private_data().unwrap(), b"busy");
        // The port stays taken while the listener lives.
        let e = a.listen(at, 1).err().unwrap();
        assert_eq!(e.name(), "ND_SHARING_VIOLATION");
    }
    assert_eq!(soft::live_objects(), before, "every object released");
}

#[test]
fn completion_events_wake_a_waiter() {
    let _g = serial();
    let a = adapter();
    let (c, s) = connected(&a);
    let Side { mut cq, mr, qp, conn: _conn } = c;
    cq.arm().unwrap();
    assert!(!cq.wait(Duration::from_millis(20)).unwrap(), "nothing completed yet");
    let dst = s.mr.remote().slice(0, 8).unwrap();
    let poster = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        qp.write(1, &[mr.slice(0, 8).unwrap()], dst, OpFlags::new(true, false)).unwrap();
        (qp, mr)
    });
    assert!(cq.wait(Duration::from_secs(2)).unwrap(), "the write's completion fired the event");
    assert_eq!(poll_one(&mut cq).context(), 1);
    let _ = poster.join().unwrap();
}
