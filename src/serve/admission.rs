//! Who the server lets in, and when: a bounded set of connections still owing their
//! hello (a new one past the limit drops the oldest of the address with the most, so a
//! flood from one host cannot shut out another's clients), a bound on connection
//! threads, and one test at a time (while the running test measures, a client is told
//! the server is busy at once; once it is ending — its measuring over, its server side
//! tears down — a few clients may wait a little for it, as back-to-back clients do).

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind};

/// Connections owing their hello at most; past it one is dropped. A real client's hello
/// follows its connect within milliseconds.
pub const MAX_PENDING: usize = 64;
/// Connection threads at most (pending, waiting, running, being refused); past it a new
/// connection is closed at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Clients that may wait for an ending test's teardown; past it, `busy` at once.
pub const MAX_WAITING: usize = 4;

/// The server's admission state, shared by the threads of its connections.
#[derive(Default)]
pub struct Admission {
    pending: Mutex<Pending>,
    slot: Mutex<Slot>,
    /// Signalled when the test slot frees.
    freed: Condvar,
    connections: Mutex<usize>,
}

#[derive(Default)]
struct Pending {
    next: u64,
    waiting: VecDeque<(u64, SocketAddr, TcpStream)>,
}

#[derive(Default)]
struct Slot {
    running: Option<Running>,
    waiters: usize,
}

/// The test being run.
struct Running {
    test: String,
    since: Instant,
    /// Both sides said done: it tears down, and a client may wait for it.
    ending: bool,
}

/// A connection's thread; the count drops with it.
pub struct ConnectionTicket {
    admission: Arc<Admission>,
}

/// A connection that has not said its hello yet.
pub struct PendingTicket {
    admission: Arc<Admission>,
    id: u64,
}

/// The one test running; the slot frees when dropped.
pub struct RunningTicket {
    admission: Arc<Admission>,
}

impl Admission {
    /// Counts a new connection's thread, if there is room for one.
    pub fn connect(self: &Arc<Self>) -> Option<ConnectionTicket> {
        let mut n = lock(&self.connections);
        (*n < MAX_CONNECTIONS).then(|| {
            *n += 1;
            ConnectionTicket { admission: Arc::clone(self) }
        })
    }

    /// Registers a new connection (a second handle on its socket) as owing its hello;
    /// if [`MAX_PENDING`] already do, the oldest of the address with the most is shut
    /// down and its address returned.
    pub fn arrive(
        self: &Arc<Self>,
        stream: &TcpStream,
        peer: SocketAddr,
    ) -> (PendingTicket, Option<SocketAddr>) {
        let mut p = lock(&self.pending);
        let mut dropped = None;
        if p.waiting.len() >= MAX_PENDING {
            if let Some(k) = busiest(&p.waiting) {
                if let Some((_, addr, oldest)) = p.waiting.remove(k) {
                    // Its thread's read returns at once; it ends as a closed connection.
                    let _ = oldest.shutdown(Shutdown::Both);
                    dropped = Some(addr);
                }
            }
        }
        let id = p.next;
        p.next += 1;
        match stream.try_clone() {
            Ok(handle) => p.waiting.push_back((id, peer, handle)),
            // Out of descriptors: this one cannot be dropped later, so not at all.
            Err(_) => {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
        (PendingTicket { admission: Arc::clone(self), id }, dropped)
    }

    /// Takes the test slot for `test`. A test still measuring makes this `busy` at once;
    /// one ending (its server side may still be tearing down when the client that ran it
    /// starts the next) is waited for up to `wait`, if fewer than [`MAX_WAITING`] clients
    /// wait already.
    ///
    /// # Errors
    /// Kind `busy`, naming the test running and for how long (not its client).
    pub fn start(self: &Arc<Self>, test: &str, wait: Duration) -> Result<RunningTicket, Error> {
        let mut slot = lock(&self.slot);
        let ending = |s: &Slot| s.running.as_ref().is_some_and(|r| r.ending);
        if ending(&slot) && slot.waiters < MAX_WAITING {
            slot.waiters += 1;
            slot = self
                .freed
                .wait_timeout_while(slot, wait, |s| ending(s))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
            slot.waiters -= 1;
        }
        if let Some(r) = slot.running.as_ref() {
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "server busy: running {} since {} s ago; try again when it ends",
                    r.test,
                    r.since.elapsed().as_secs()
                ),
            ));
        }
        slot.running = Some(Running { test: test.into(), since: Instant::now(), ending: false });
        Ok(RunningTicket { admission: Arc::clone(self) })
    }

    /// How many connections owe their hello now.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        lock(&self.pending).waiting.len()
    }
}

/// The oldest connection of the address with the most connections owing a hello.
fn busiest(waiting: &VecDeque<(u64, SocketAddr, TcpStream)>) -> Option<usize> {
    let mut per_ip: HashMap<IpAddr, usize> = HashMap::new();
    for (_, addr, _) in waiting {
        *per_ip.entry(addr.ip()).or_default() += 1;
    }
    let (ip, _) = per_ip.into_iter().max_by_key(|&(_, n)| n)?;
    waiting.iter().position(|(_, addr, _)| addr.ip() == ip)
}

impl PendingTicket {
    /// The hello is in: the connection leaves the set. False if it was dropped meanwhile
    /// (a flood's eviction raced the hello): its socket is shut, so it cannot go on.
    pub fn said_hello(self) -> bool {
        let mut p = lock(&self.admission.pending);
        let before = p.waiting.len();
        p.waiting.retain(|(id, _, _)| *id != self.id);
        p.waiting.len() < before
    }
}

impl Drop for PendingTicket {
    fn drop(&mut self) {
        lock(&self.admission.pending).waiting.retain(|(id, _, _)| *id != self.id);
    }
}

impl RunningTicket {
    /// Both sides said done: the test tears down, and a client that comes now may wait
    /// for it rather than be told the server is busy.
    pub fn ending(&self) {
        if let Some(r) = lock(&self.admission.slot).running.as_mut() {
            r.ending = true;
        }
    }
}

impl Drop for RunningTicket {
    fn drop(&mut self) {
        lock(&self.admission.slot).running = None;
        self.admission.freed.notify_one();
    }
}

impl Drop for ConnectionTicket {
    fn drop(&mut self) {
        *lock(&self.admission.connections) -= 1;
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

    fn connection(l: &TcpListener) -> (TcpStream, SocketAddr, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, addr) = l.accept().unwrap();
        (s, addr, c)
    }

    #[test]
    fn past_the_limit_the_busiest_address_loses_its_oldest_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = Arc::new(Admission::default());
        let mut held = Vec::new();
        // One connection from "another host", then a flood from this one.
        let (other, _, _other_client) = connection(&l);
        let elsewhere: SocketAddr = "192.0.2.7:4000".parse().unwrap();
        let (t, _) = a.arrive(&other, elsewhere);
        held.push((t, other));
        let (first, first_addr, mut first_client) = connection(&l);
        let (t, dropped) = a.arrive(&first, first_addr);
        assert!(dropped.is_none());
        held.push((t, first));
        let mut clients = Vec::new();
        for _ in 2..MAX_PENDING {
            let (s, addr, c) = connection(&l);
            let (t, dropped) = a.arrive(&s, addr);
            assert!(dropped.is_none());
            held.push((t, s));
            clients.push(c);
        }
        assert_eq!(a.pending(), MAX_PENDING);
        let (s, addr, _c) = connection(&l);
        let (t, dropped) = a.arrive(&s, addr);
        assert_eq!(dropped, Some(first_addr), "the flooding address's oldest goes, not the other");
        assert_eq!(a.pending(), MAX_PENDING);
        // The dropped client sees its connection end; its ticket knows.
        let mut b = [0u8; 1];
        assert_eq!(first_client.read(&mut b).unwrap(), 0);
        let (first_ticket, _) = held.remove(1);
        assert!(!first_ticket.said_hello(), "dropped before its hello was read");
        let (other_ticket, _) = held.remove(0);
        assert!(other_ticket.said_hello());
        drop(t);
        assert_eq!(a.pending(), MAX_PENDING - 2);
    }

    #[test]
    fn one_test_at_a_time_a_few_wait_and_the_rest_are_told_at_once() {
        let a = Arc::new(Admission::default());
        let quick = Duration::from_millis(100);
        let t = a.start("write_bw", quick).unwrap();
        // While it measures: busy at once.
        let start = Instant::now();
        let e = a.start("tcp_bw", Duration::from_secs(10)).err().unwrap();
        assert!(start.elapsed() < Duration::from_secs(1), "told at once");
        assert_eq!(e.kind, ErrorKind::Busy);
        assert!(e.message.starts_with("server busy: running write_bw since "), "{e}");
        // Ending (tearing down): a client waits for it first.
        t.ending();
        let start = Instant::now();
        let e = a.start("tcp_bw", quick).err().unwrap();
        assert!(start.elapsed() >= quick, "it waited first");
        assert_eq!(e.kind, ErrorKind::Busy);
        // MAX_WAITING clients wait; one more is told at once.
        let long = Duration::from_secs(10);
        let waiters: Vec<_> = (0..MAX_WAITING)
            .map(|_| {
                let a = Arc::clone(&a);
                std::thread::spawn(move || a.start("tcp_lat", long).map(drop).is_ok())
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let start = Instant::now();
        assert!(a.start("tcp_lat", long).is_err());
        assert!(start.elapsed() < Duration::from_secs(1), "no room to wait: told at once");
        // A test that ends lets the waiting clients in, one after another.
        drop(t);
        for w in waiters {
            assert!(w.join().unwrap(), "each waiting client got the slot in turn");
        }
    }

    #[test]
    fn connection_threads_are_bounded() {
        let a = Arc::new(Admission::default());
        let tickets: Vec<_> = (0..MAX_CONNECTIONS).map(|_| a.connect().unwrap()).collect();
        assert!(a.connect().is_none());
        drop(tickets);
        assert!(a.connect().is_some());
    }
}
