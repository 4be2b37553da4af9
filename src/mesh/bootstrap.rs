//! What a mesh needs from its launcher, and no more: rank and size, the host's name, one
//! all-gather of each rank's endpoint, the messages that end a round ("done", to rank
//! 0) and start the next ("go", from rank 0), and ending the whole job. MPI provides
//! it ([`Mpi`], cargo feature `mesh`); the tests use threads of one process.
//!
//! The round messages are polled, not waited on, so that rank 0 can give up on a rank
//! that does not report in time and name it, where a collective barrier would hang.
//!
//! Every length a peer announces is checked before anything is allocated for it: a rank's
//! record in the all-gather is at most [`MAX_RECORD`] bytes, a round's "done" or "go" at
//! most [`MAX_MESSAGE`]. Past them the job ends with one line naming the rank
//! ([`checked_lengths`], [`checked_length`]).

/// The most a rank's record in the all-gather may be (its endpoint and the mesh's
/// parameters: under 2 KiB).
pub const MAX_RECORD: usize = 64 * 1024;

/// The most a round's "done" (one rank's links, its flows' progress points and its
/// environment) or rank 0's "go" (the rechecks) may be: all-to-all's N−1 flows of 64
/// points each at N = 1,024 come to ~3 MiB.
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// The all-gather's lengths, as every rank announced them, checked against [`MAX_RECORD`]
/// before the records are received.
///
/// # Errors
/// A length below 0 or over the cap: the line names the first such rank.
pub fn checked_lengths(lens: &[i64]) -> Result<Vec<usize>, String> {
    lens.iter()
        .enumerate()
        .map(|(rank, &len)| checked_length(rank, len, MAX_RECORD, "an endpoint record"))
        .collect()
}

/// A message's length from `rank` (`what` it is), checked against `cap` before it is
/// received.
///
/// # Errors
/// Below 0 or over `cap`: one line naming the rank.
pub fn checked_length(rank: usize, len: i64, cap: usize, what: &str) -> Result<usize, String> {
    match usize::try_from(len) {
        Ok(n) if n <= cap => Ok(n),
        _ => Err(format!(
            "rank {rank} sent {what} of {len} bytes, over the {cap} one may be: the job ends"
        )),
    }
}

/// A launcher's services to one rank.
pub trait Bootstrap {
    /// This rank, from 0.
    fn rank(&self) -> usize;
    /// How many ranks.
    fn size(&self) -> usize;
    /// This host's name.
    fn host(&self) -> String;
    /// Every rank's `mine`, in rank order (a collective: every rank calls it).
    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>>;
    /// Tells rank 0 this rank is done with a round (`payload`: its results).
    fn send_done(&self, payload: &[u8]);
    /// At rank 0: a "done" that has arrived, with its sender, if any.
    fn poll_done(&self) -> Option<(usize, Vec<u8>)>;
    /// At rank 0: tells every other rank to go on.
    fn send_go(&self, payload: &[u8]);
    /// At ranks other than 0: rank 0's "go", if it has arrived.
    fn poll_go(&self) -> Option<Vec<u8>>;
    /// Ends every rank of the job with `code`.
    fn abort(&self, code: i32) -> !;
}

#[cfg(feature = "mesh")]
pub use self::mpi_launcher::Mpi;

#[cfg(feature = "mesh")]
mod mpi_launcher {
    use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
    use mpi::topology::{Communicator, SimpleCommunicator};
    use mpi::traits::*;
    use mpi::Count;

    use super::{checked_length, checked_lengths, MAX_MESSAGE};
    use crate::error::{Error, ErrorKind};

    const TAG_DONE: mpi::Tag = 1;
    const TAG_GO: mpi::Tag = 2;

    /// MPI as the mesh's bootstrap (Open MPI's mpirun, or srun with PMIx).
    pub struct Mpi {
        _universe: mpi::environment::Universe,
        world: SimpleCommunicator,
    }

    impl Mpi {
        /// Initialises MPI. Its own traffic is kept off the RDMA devices under test:
        /// unless the launcher's settings say otherwise, Open MPI uses its shared-memory
        /// and TCP transports (`pml ob1`, `btl self,vader,tcp`), not verbs or UCX.
        ///
        /// # Errors
        /// MPI was initialised already (kind `io`).
        pub fn init() -> Result<Mpi, Error> {
            for (name, value) in [("OMPI_MCA_pml", "ob1"), ("OMPI_MCA_btl", "self,vader,tcp")] {
                if std::env::var_os(name).is_none() {
                    std::env::set_var(name, value);
                }
            }
            let universe = mpi::initialize().ok_or_else(|| {
                Error::new(ErrorKind::Io, "MPI could not be initialised (it already was)")
            })?;
            let world = universe.world();
            Ok(Mpi { _universe: universe, world })
        }

        /// Started by a launcher (mpirun, srun): else MPI runs this process alone as
        /// rank 0 of 1 (a "singleton"), which a mesh cannot use.
        pub fn launched() -> bool {
            ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"]
                .iter()
                .any(|v| std::env::var_os(v).is_some())
        }
    }

    impl super::Bootstrap for Mpi {
        fn rank(&self) -> usize {
            usize::try_from(self.world.rank()).unwrap_or(0)
        }

        fn size(&self) -> usize {
            usize::try_from(self.world.size()).unwrap_or(0)
        }

        fn host(&self) -> String {
            mpi::environment::processor_name().unwrap_or_else(|_| "?".into())
        }

        fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
            let n = self.size();
            let len = Count::try_from(mine.len()).unwrap_or(Count::MAX);
            let mut lens = vec![0 as Count; n];
            self.world.all_gather_into(&len, &mut lens[..]);
            // Every rank has the same lengths, so every rank ends here alike (none is
            // left waiting in the collective below); rank 0 says why, the others give
            // it the time to.
            let wide: Vec<i64> = lens.iter().map(|&c| i64::from(c)).collect();
            let counts = match checked_lengths(&wide) {
                Ok(counts) => counts,
                Err(why) if self.world.rank() == 0 => self.end(&why),
                Err(_) => {
                    std::thread::sleep(std::time::Duration::from_secs(5));
                    self.world.abort(2)
                }
            };
            let mut displs = Vec::with_capacity(n);
            let mut at: Count = 0;
            for &c in &lens {
                displs.push(at);
                at = at.saturating_add(c);
            }
            let mut all = vec![0u8; counts.iter().sum()];
            {
                let mut part =
                    mpi::datatype::PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
                self.world.all_gather_varcount_into(mine, &mut part);
            }
            let mut out = Vec::with_capacity(n);
            let mut rest = &all[..];
            for c in counts {
                let (head, tail) = rest.split_at(c);
                out.push(head.to_vec());
                rest = tail;
            }
            out
        }

        fn send_done(&self, payload: &[u8]) {
            self.world.process_at_rank(0).send_with_tag(payload, TAG_DONE);
        }

        fn poll_done(&self) -> Option<(usize, Vec<u8>)> {
            let (message, status) =
                self.world.any_process().immediate_matched_probe_with_tag(TAG_DONE)?;
            let rank = usize::try_from(status.source_rank()).unwrap_or(usize::MAX);
            let len = i64::from(status.count(u8::equivalent_datatype()));
            if let Err(why) = checked_length(rank, len, MAX_MESSAGE, "a round's report") {
                self.end(&why);
            }
            Some((rank, (message, status).matched_receive_vec::<u8>().0))
        }

        fn send_go(&self, payload: &[u8]) {
            for rank in 1..self.world.size() {
                self.world.process_at_rank(rank).send_with_tag(payload, TAG_GO);
            }
        }

        fn poll_go(&self) -> Option<Vec<u8>> {
            let (message, status) =
                self.world.process_at_rank(0).immediate_matched_probe_with_tag(TAG_GO)?;
            let len = i64::from(status.count(u8::equivalent_datatype()));
            if let Err(why) = checked_length(0, len, MAX_MESSAGE, "a go") {
                self.end(&why);
            }
            Some((message, status).matched_receive_vec::<u8>().0)
        }

        fn abort(&self, code: i32) -> ! {
            self.world.abort(code)
        }
    }

    impl Mpi {
        /// A peer's length is over its cap: rank 0 (or the rank that read it) says so
        /// in one line, and the job ends with exit 2 (the caller's other errors' code).
        fn end(&self, why: &str) -> ! {
            eprintln!("rdmabench mesh: rank {}: {why}", self.world.rank());
            self.world.abort(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peers_length_is_checked_before_it_is_used() {
        assert_eq!(checked_lengths(&[120, 0, 65536]), Ok(vec![120, 0, 65536]));
        let over = checked_lengths(&[120, 65537, 7]).unwrap_err();
        assert_eq!(
            over,
            "rank 1 sent an endpoint record of 65537 bytes, over the 65536 one may be: the job ends"
        );
        let negative = checked_lengths(&[120, 5, -1]).unwrap_err();
        assert!(negative.starts_with("rank 2 sent "), "{negative}");
        assert_eq!(checked_length(3, 16 << 20, MAX_MESSAGE, "a round's report"), Ok(16 << 20));
        let done = checked_length(3, (16 << 20) + 1, MAX_MESSAGE, "a round's report").unwrap_err();
        assert!(done.starts_with("rank 3 sent a round's report of 16777217 bytes"), "{done}");
    }
}

/// Ranks as threads of one process, for the tests: every message goes through channels.
#[cfg(test)]
pub mod threads {
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::sync::{Arc, Barrier, Mutex};

    /// A message and its sender.
    type Sent = (usize, Vec<u8>);

    /// One thread's rank.
    pub struct ThreadRank {
        rank: usize,
        size: usize,
        gather: Arc<(Barrier, Mutex<Vec<Vec<u8>>>)>,
        done_to_root: Sender<Sent>,
        done_at_root: Option<Mutex<Receiver<Sent>>>,
        go_out: Vec<Sender<Vec<u8>>>,
        go_in: Option<Mutex<Receiver<Vec<u8>>>>,
    }

    /// `n` ranks, to be moved into a thread each.
    pub fn ranks(n: usize) -> Vec<ThreadRank> {
        let gather = Arc::new((Barrier::new(n), Mutex::new(vec![Vec::new(); n])));
        let (done_to_root, done_at_root) = channel();
        let (go_out, go_in): (Vec<_>, Vec<_>) = (1..n).map(|_| channel()).unzip();
        let mut go_in = go_in.into_iter();
        let mut done_at_root = Some(Mutex::new(done_at_root));
        (0..n)
            .map(|rank| ThreadRank {
                rank,
                size: n,
                gather: Arc::clone(&gather),
                done_to_root: done_to_root.clone(),
                done_at_root: if rank == 0 { done_at_root.take() } else { None },
                go_out: if rank == 0 { go_out.clone() } else { Vec::new() },
                go_in: if rank == 0 { None } else { go_in.next().map(Mutex::new) },
            })
            .collect()
    }

    impl super::Bootstrap for ThreadRank {
        fn rank(&self) -> usize {
            self.rank
        }
        fn size(&self) -> usize {
            self.size
        }
        fn host(&self) -> String {
            format!("thread{}", self.rank)
        }
        fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
            let (barrier, slots) = &*self.gather;
            slots.lock().unwrap()[self.rank] = mine.to_vec();
            barrier.wait();
            let all = slots.lock().unwrap().clone();
            barrier.wait();
            all
        }
        fn send_done(&self, payload: &[u8]) {
            let _ = self.done_to_root.send((self.rank, payload.to_vec()));
        }
        fn poll_done(&self) -> Option<(usize, Vec<u8>)> {
            self.done_at_root.as_ref()?.lock().unwrap().try_recv().ok()
        }
        fn send_go(&self, payload: &[u8]) {
            for tx in &self.go_out {
                let _ = tx.send(payload.to_vec());
            }
        }
        fn poll_go(&self) -> Option<Vec<u8>> {
            self.go_in.as_ref()?.lock().unwrap().try_recv().ok()
        }
        fn abort(&self, code: i32) -> ! {
            panic!("rank {} aborted the job with {code}", self.rank)
        }
    }
}
