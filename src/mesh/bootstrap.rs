//! What a mesh needs from its launcher, and no more: rank and size, the host's name, one
//! all-gather of each rank's endpoint, the messages that end a round ("done", to rank
//! 0) and start the next ("go", from rank 0), and ending the whole job. MPI provides
//! it ([`Mpi`], cargo feature `mesh`); the tests use threads of one process.
//!
//! The round messages are polled, not waited on, so that rank 0 can give up on a rank
//! that does not report in time and name it, where a collective barrier would hang.

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
            let counts: Vec<usize> =
                lens.iter().map(|&c| usize::try_from(c).unwrap_or(0)).collect();
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
            let probed = self.world.any_process().immediate_matched_probe_with_tag(TAG_DONE)?;
            let (data, status) = probed.matched_receive_vec::<u8>();
            Some((usize::try_from(status.source_rank()).unwrap_or(usize::MAX), data))
        }

        fn send_go(&self, payload: &[u8]) {
            for rank in 1..self.world.size() {
                self.world.process_at_rank(rank).send_with_tag(payload, TAG_GO);
            }
        }

        fn poll_go(&self) -> Option<Vec<u8>> {
            let probed = self.world.process_at_rank(0).immediate_matched_probe_with_tag(TAG_GO)?;
            Some(probed.matched_receive_vec::<u8>().0)
        }

        fn abort(&self, code: i32) -> ! {
            self.world.abort(code)
        }
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
