//! `ci/lab-switch`, the Ethernet switch of a lab of three or more hosts, on the host:
//! three ports speaking qemu's `stream` framing (4-byte big-endian length, then the
//! frame). It floods what it cannot place, learns where each MAC is, forwards there only,
//! and keeps a 9000-byte frame whole.

#![cfg(unix)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

struct Switch(Child);

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn connect(path: &Path) -> UnixStream {
    let start = Instant::now();
    loop {
        if let Ok(s) = UnixStream::connect(path) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no switch port at {path:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn frame(dst: u8, src: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0x52, 0x54, 0, 0, 1, dst, 0x52, 0x54, 0, 0, 1, src, 0x08, 0x00];
    f.resize(len, src);
    if dst == 0xff {
        f[..6].fill(0xff);
    }
    f
}

fn send(port: &mut UnixStream, f: &[u8]) {
    port.write_all(&(f.len() as u32).to_be_bytes()).unwrap();
    port.write_all(f).unwrap();
}

fn recv(port: &mut UnixStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    port.read_exact(&mut len).ok()?;
    let mut f = vec![0; u32::from_be_bytes(len) as usize];
    port.read_exact(&mut f).ok()?;
    Some(f)
}

fn nothing_waiting(port: &mut UnixStream) -> bool {
    port.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let got = recv(port).is_none();
    port.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    got
}

#[test]
fn the_switch_floods_learns_forwards_and_keeps_jumbo_frames_whole() {
    let dir = std::env::temp_dir().join(format!("rdmabench-switch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/lab-switch");
    let _switch = Switch(Command::new("python3").arg(script).arg(&dir).arg("3").spawn().unwrap());
    let mut ports: Vec<UnixStream> =
        (1..=3).map(|n| connect(&dir.join(format!("port{n}.sock")))).collect();
    // A connection is queued before the switch's thread accepts it; a frame for a port
    // not yet accepted is lost, as on a cable not yet plugged in.
    std::thread::sleep(Duration::from_millis(500));

    // Node 1 broadcasts (an ARP request, say): nodes 2 and 3 get it, node 1 not.
    let hello = frame(0xff, 1, 60);
    send(&mut ports[0], &hello);
    assert_eq!(recv(&mut ports[1]).as_deref(), Some(&hello[..]));
    assert_eq!(recv(&mut ports[2]).as_deref(), Some(&hello[..]));
    assert!(nothing_waiting(&mut ports[0]), "a port never gets its own frame back");

    // Node 2 answers node 1, whose MAC the switch has learned: only node 1 gets it, and a
    // 9000-byte frame (MTU 9000) arrives whole.
    let jumbo = frame(1, 2, 9014);
    send(&mut ports[1], &jumbo);
    assert_eq!(recv(&mut ports[0]).as_deref(), Some(&jumbo[..]));
    assert!(nothing_waiting(&mut ports[2]), "a learned destination is not flooded");

    // Node 3 writes to node 2 (learned from its answer).
    let to_two = frame(2, 3, 1514);
    send(&mut ports[2], &to_two);
    assert_eq!(recv(&mut ports[1]).as_deref(), Some(&to_two[..]));
    assert!(nothing_waiting(&mut ports[0]));

    // An oversized length drops that port alone; the others go on.
    ports[0].write_all(&(1u32 << 30).to_be_bytes()).unwrap();
    let after = frame(3, 2, 100);
    send(&mut ports[1], &after);
    assert_eq!(recv(&mut ports[2]).as_deref(), Some(&after[..]));
    let _ = std::fs::remove_dir_all(&dir);
}
