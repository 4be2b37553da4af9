//! Who the server lets in, and when: a bounded set of connections still owing their
//! hello (the oldest is dropped to make room, so a flood of idle connections cannot
//! shut real clients out), and one test at a time (a second client waits a little for
//! the first to end, as back-to-back clients do, then is told the server is busy, and by
//! whom).

use std::collections::VecDeque;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use std::time::Instant;

use crate::error::{Error, ErrorKind};

/// Connections owing their hello at most; past it the oldest is dropped. A real
/// client's hello follows its connect within milliseconds.
pub const MAX_PENDING: usize = 64;

/// The server's admission state, shared by the threads of its connections.
#[derive(Default)]
pub struct Admission {
    pending: Mutex<Pending>,
    running: Mutex<Option<Running>>,
    /// Signalled when the test slot frees.
    freed: Condvar,
}

#[derive(Default)]
struct Pending {
    next: u64,
    waiting: VecDeque<(u64, TcpStream)>,
}

/// The test being run.
struct Running {
    peer: String,
    test: String,
    since: Instant,
}

/// A connection that has not said its hello yet; dropped when it has (or failed).
pub struct PendingTicket {
    admission: Arc<Admission>,
    id: u64,
}

/// The one test running; the slot frees when dropped.
pub struct RunningTicket {
    admission: Arc<Admission>,
}

impl Admission {
    /// Registers a new connection (a second handle on its socket) as owing its hello;
    /// if [`MAX_PENDING`] already do, the oldest is shut down and its address returned.
    pub fn arrive(self: &Arc<Self>, stream: &TcpStream) -> (PendingTicket, Option<SocketAddr>) {
        let mut p = lock(&self.pending);
        let mut dropped = None;
        if p.waiting.len() >= MAX_PENDING {
            if let Some((_, oldest)) = p.waiting.pop_front() {
                dropped = oldest.peer_addr().ok();
                // Its thread's read returns at once; it ends as a closed connection.
                let _ = oldest.shutdown(Shutdown::Both);
            }
        }
        let id = p.next;
        p.next += 1;
        if let Ok(handle) = stream.try_clone() {
            p.waiting.push_back((id, handle));
        }
        (PendingTicket { admission: Arc::clone(self), id }, dropped)
    }

    /// Takes the test slot for `test` from `peer`, waiting up to `wait` for the test
    /// running now to end (its server side may still be tearing down when the client
    /// that ran it starts the next).
    ///
    /// # Errors
    /// Kind `busy`, naming the test running, its client and for how long.
    pub fn start(
        self: &Arc<Self>,
        peer: &str,
        test: &str,
        wait: Duration,
    ) -> Result<RunningTicket, Error> {
        let running = lock(&self.running);
        let (mut running, _) = self
            .freed
            .wait_timeout_while(running, wait, |r| r.is_some())
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = running.as_ref() {
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "server busy: running {} for {} since {} s ago; try again when it ends",
                    r.test,
                    r.peer,
                    r.since.elapsed().as_secs()
                ),
            ));
        }
        *running = Some(Running { peer: peer.into(), test: test.into(), since: Instant::now() });
        Ok(RunningTicket { admission: Arc::clone(self) })
    }

    /// How many connections owe their hello now.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        lock(&self.pending).waiting.len()
    }
}

impl Drop for PendingTicket {
    fn drop(&mut self) {
        lock(&self.admission.pending).waiting.retain(|(id, _)| *id != self.id);
    }
}

impl Drop for RunningTicket {
    fn drop(&mut self) {
        *lock(&self.admission.running) = None;
        self.admission.freed.notify_one();
    }
}

/// A poisoned lock only means another client's thread panicked; the state is whole.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    fn connection(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (l.accept().unwrap().0, c)
    }

    #[test]
    fn past_the_limit_the_oldest_waiting_connection_is_dropped() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = Arc::new(Admission::default());
        let mut held = Vec::new();
        let (first, mut first_client) = connection(&l);
        let first_addr = first.peer_addr().unwrap();
        let (t, dropped) = a.arrive(&first);
        assert!(dropped.is_none());
        held.push((t, first));
        for _ in 1..MAX_PENDING {
            let (s, c) = connection(&l);
            let (t, dropped) = a.arrive(&s);
            assert!(dropped.is_none());
            held.push((t, s));
            std::mem::forget(c);
        }
        assert_eq!(a.pending(), MAX_PENDING);
        let (s, _c) = connection(&l);
        let (t, dropped) = a.arrive(&s);
        assert_eq!(dropped, Some(first_addr), "the oldest goes");
        assert_eq!(a.pending(), MAX_PENDING);
        // The dropped client sees its connection end.
        let mut b = [0u8; 1];
        assert_eq!(first_client.read(&mut b).unwrap(), 0);
        drop(t);
        held.truncate(10);
        // Left: the tickets of the 2nd to 10th connections (the 1st was dropped).
        assert_eq!(a.pending(), 9, "a ticket leaves the set when dropped");
    }

    #[test]
    fn one_test_at_a_time_and_the_second_is_told_who_runs() {
        let a = Arc::new(Admission::default());
        let quick = Duration::from_millis(100);
        let t = a.start("192.0.2.1:5000", "write_bw", quick).unwrap();
        let start = std::time::Instant::now();
        let e = a.start("192.0.2.2:5000", "tcp_bw", quick).err().unwrap();
        assert!(start.elapsed() >= quick, "it waited first");
        assert_eq!(e.kind, ErrorKind::Busy);
        assert!(e.message.starts_with("server busy: running write_bw for 192.0.2.1:5000"), "{e}");
        // A test that ends while the next client waits lets it in.
        let waiter = {
            let a = Arc::clone(&a);
            std::thread::spawn(move || {
                a.start("192.0.2.3:5000", "tcp_lat", Duration::from_secs(10)).is_ok()
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        drop(t);
        assert!(waiter.join().unwrap(), "the waiting client got the slot");
    }
}
