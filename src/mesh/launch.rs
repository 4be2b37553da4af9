//! `rdmabench mesh` as a program under mpirun or srun: MPI up, this rank's endpoint, the
//! mesh, rank 0's reports. Whatever stops a rank ends the whole job (`MPI_Abort`) after
//! one line naming the cause, so no rank is left waiting; a termination signal (the
//! launcher ending the job because a rank died) is reported with what this rank was
//! doing, and rank 0 keeps the rounds that ended in its files.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::report::MeshReport;
#[cfg(feature = "mesh")]
use super::Endpoint;
use super::MeshSpec;
use crate::error::Error;
use crate::spec::Local;
use crate::transport::Backend;

/// What `rdmabench mesh` runs with, checked (the command line builds it: cli/mesh.rs).
#[derive(Clone, Debug)]
pub struct MeshOptions {
    /// The mesh every rank runs.
    pub mesh: MeshSpec,
    /// This rank's own settings (device, port, GID index, control port, timeouts).
    pub local: Local,
    /// Over TCP instead of RDMA.
    pub tcp: bool,
    /// The RDMA interface.
    pub backend: Backend,
    /// This rank's control address (None: the device's RoCE address, else the host's).
    pub address: Option<IpAddr>,
    /// Rank 0's JSON report.
    pub json: Option<PathBuf>,
    /// Rank 0's CSV report.
    pub csv: Option<PathBuf>,
    /// Rank 0's HTML report.
    pub html: Option<PathBuf>,
}

/// Runs `rdmabench mesh` on this rank; the exit status is rank 0's verdict (0 pass,
/// 1 a link confirmed slow, 2 an error).
///
/// # Errors
/// A build without MPI, or no launcher (before anything starts).
pub fn command(args: &MeshOptions, out: &mut dyn Write) -> Result<u8, Error> {
    launch(args, &args.mesh, out)
}

#[cfg(not(feature = "mesh"))]
fn launch(_: &MeshOptions, _: &MeshSpec, _: &mut dyn Write) -> Result<u8, Error> {
    Err(Error::usage(
        "this rdmabench was built without MPI: build it with `--features mesh` \
         (needs an MPI library, e.g. Debian's libopenmpi-dev; docs/mesh.md)",
    ))
}

#[cfg(feature = "mesh")]
fn launch(args: &MeshOptions, mesh: &MeshSpec, out: &mut dyn Write) -> Result<u8, Error> {
    use super::bootstrap::{Bootstrap, Mpi};
    use std::sync::{Arc, Mutex};

    if !Mpi::launched() {
        return Err(Error::usage(
            "start the mesh under a launcher: mpirun -np N rdmabench mesh … or srun -n N rdmabench mesh …",
        ));
    }
    let boot = Mpi::init()?;
    let rank = boot.rank();
    let status = super::Status::default();
    let last: Arc<Mutex<Option<MeshReport>>> = Arc::default();
    watch_termination(rank, status.clone(), Arc::clone(&last), args.clone());
    let local = args.local.clone();
    let result = endpoint(args, &local).and_then(|endpoint| {
        if rank == 0 {
            clear_outputs(args)?;
        }
        let mut progress = |r: &MeshReport| {
            if let Ok(mut l) = last.lock() {
                *l = Some(r.clone());
            }
            // A file is rewritten after every round; stdout gets the last report only.
            if let Some(path) = args.json.as_ref().filter(|p| !crate::files::is_stdout(p)) {
                let _ = write_file(path, &crate::report::to_json(r));
            }
        };
        super::run(&boot, mesh, &local, &endpoint, &status, &mut progress, out)
    });
    match result {
        Ok(Some(report)) => {
            let _ = write!(out, "{}", report.text());
            let _ = out.flush();
            write_outputs(args, &report)?;
            Ok(report.exit_code())
        }
        Ok(None) => Ok(0),
        Err(e) => {
            eprintln!("rdmabench mesh: rank {rank}: {e}");
            if let Some(mut r) = last.lock().ok().and_then(|mut l| l.take()) {
                r.stopped(&e.to_string());
                let _ = write_outputs(args, &r);
            }
            boot.abort(2)
        }
    }
}

/// This rank's address and device name. (With `--address`, its RoCE GID follows: the
/// pair tests connect from that address, and the engine takes the GID of the control
/// connection's address unless `-x` chose one.)
#[cfg(feature = "mesh")]
fn endpoint(args: &MeshOptions, local: &Local) -> Result<Endpoint, Error> {
    if args.tcp {
        let address = match args.address {
            Some(a) => a,
            None => host_address()?,
        };
        return Ok(Endpoint { address, device: "tcp".into() });
    }
    let inventory = crate::inventory::collect(local.device.as_deref(), args.backend)?;
    let device = inventory.devices.first().ok_or_else(|| {
        Error::new(crate::error::ErrorKind::NoDevice, "no RDMA device on this rank's host")
    })?;
    let address = match args.address {
        Some(a) => a,
        // The device's own address: the first IPv4 RoCE v2 GID of its port.
        None => match device
            .ports
            .iter()
            .filter(|p| p.port == local.ib_port)
            .flat_map(|p| p.gids.iter())
            .filter(|g| g.gid_type == "RoCE v2")
            .find_map(|g| g.gid.strip_prefix("::ffff:").and_then(|a| a.parse().ok()))
        {
            Some(a) => a,
            None => host_address()?,
        },
    };
    Ok(Endpoint { address, device: device.name.clone() })
}

/// The host name's first address.
#[cfg(feature = "mesh")]
fn host_address() -> Result<std::net::IpAddr, Error> {
    use std::net::ToSocketAddrs;
    let host = mpi::environment::processor_name().unwrap_or_default();
    (host.as_str(), 0).to_socket_addrs().ok().and_then(|mut a| a.next()).map(|a| a.ip()).ok_or_else(
        || {
            Error::usage(format!(
                "cannot tell this rank's address ('{host}' does not resolve): give --address"
            ))
        },
    )
}

/// From now on a termination signal ends this rank with a line saying what it was
/// doing; rank 0 first writes the rounds that ended, marked as stopped.
#[cfg(feature = "mesh")]
fn watch_termination(
    rank: usize,
    status: super::Status,
    last: std::sync::Arc<std::sync::Mutex<Option<MeshReport>>>,
    args: MeshOptions,
) {
    if ffi::os::watch_termination().is_err() {
        return;
    }
    std::thread::spawn(move || {
        let Some(signal) = ffi::os::wait_termination() else { return };
        let name = match signal {
            1 => "SIGHUP",
            2 => "SIGINT",
            15 => "SIGTERM",
            _ => "a termination signal",
        };
        let line = format!(
            "stopped by {name} during {} (mpirun and srun stop every rank when one dies or is killed: their message names it)",
            status.get()
        );
        // The line first: a launcher's SIGKILL follows within milliseconds.
        eprintln!("rdmabench mesh: rank {rank}: {line}");
        if let Some(mut r) = last.lock().ok().and_then(|mut l| l.take()) {
            r.stopped(&line);
            let _ = write_outputs(&args, &r);
        }
        std::process::exit(2);
    });
}

/// Rank 0 empties its output files before the first round: a bad path fails at once,
/// and no older file reads as this run's. `-` (stdout) has nothing to empty.
#[cfg_attr(not(feature = "mesh"), allow(dead_code))]
fn clear_outputs(args: &MeshOptions) -> Result<(), Error> {
    let files = [&args.json, &args.csv, &args.html].into_iter().flatten();
    for path in files.filter(|p| !crate::files::is_stdout(p)) {
        write_file(path, "")?;
    }
    Ok(())
}

#[cfg_attr(not(feature = "mesh"), allow(dead_code))]
fn write_outputs(args: &MeshOptions, report: &MeshReport) -> Result<(), Error> {
    if let Some(path) = &args.json {
        put("--json", path, &crate::report::to_json(report))?;
    }
    if let Some(path) = &args.csv {
        let csv = report.csv().map_err(|e| Error::io(format!("--csv: {e}")))?;
        put("--csv", path, &csv)?;
    }
    if let Some(path) = &args.html {
        put("--html", path, &report.html())?;
    }
    Ok(())
}

/// One output: onto stdout for `-`, else into its file whole ([`write_file`]).
fn put(flag: &str, path: &Path, text: &str) -> Result<(), Error> {
    if crate::files::is_stdout(path) {
        return crate::files::write_output(flag, path, text);
    }
    write_file(path, text)
}

impl MeshOptions {
    /// Whether one of rank 0's outputs is stdout (`-`): its text then goes to stderr.
    pub fn to_stdout(&self) -> bool {
        [&self.json, &self.csv, &self.html]
            .into_iter()
            .flatten()
            .any(|p| crate::files::is_stdout(p))
    }
}

/// Writes `text` to a file beside `path`, then renames it there: a rank killed while it
/// writes leaves the previous file whole.
fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    let mut part = path.as_os_str().to_owned();
    part.push(".part");
    std::fs::write(&part, text)
        .and_then(|()| std::fs::rename(&part, path))
        .map_err(|e| Error::io(format!("{}: {e}", path.display())))
}
