//! A man in the middle for the hostile tests: one connection relayed to a server, the
//! control frames of one direction rewritten (a client that forges its result, a server
//! whose endpoints lead elsewhere), the other direction copied as it comes.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread::JoinHandle;

use rdmabench::session::protocol::{decode_header, encode, HEADER_LEN};

/// Relays one connection on 127.0.0.1 (the port returned, with the relay's thread) to
/// `to`, passing each control frame the client sends (`client_frames`) or the server
/// sends through `rewrite`.
pub fn rewriting(
    to: String,
    client_frames: bool,
    mut rewrite: impl FnMut(&mut serde_json::Value) + Send + 'static,
) -> (String, JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let relay = std::thread::spawn(move || {
        let (client, _) = l.accept().unwrap();
        let server = TcpStream::connect(to).unwrap();
        let (mut from, mut into) = if client_frames { (client, server) } else { (server, client) };
        let (mut back_from, mut back_into) = (into.try_clone().unwrap(), from.try_clone().unwrap());
        let back = std::thread::spawn(move || {
            let _ = std::io::copy(&mut back_from, &mut back_into);
            let _ = back_into.shutdown(Shutdown::Both);
        });
        let mut header = [0u8; HEADER_LEN];
        while from.read_exact(&mut header).is_ok() {
            let mut payload = vec![0u8; decode_header(&header).unwrap() as usize];
            if from.read_exact(&mut payload).is_err() {
                break;
            }
            let mut msg: serde_json::Value = serde_json::from_slice(&payload).unwrap();
            rewrite(&mut msg);
            let frame = encode(&serde_json::to_vec(&msg).unwrap()).unwrap();
            if into.write_all(&frame).is_err() {
                break;
            }
        }
        let _ = into.shutdown(Shutdown::Both);
        back.join().unwrap();
    });
    (port, relay)
}
