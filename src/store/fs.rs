//! Which journal a store's file system can hold: SQLite's write-ahead log needs shared
//! memory beside the file (`-shm`), which network and virtual file systems do not give
//! (NFS, 9p, SMB, sshfs), so a store there keeps a rollback journal. The file system is
//! read from `/proc/self/mountinfo` (no `statfs`: `src/` holds no `unsafe`).

use std::path::{Path, PathBuf};

/// File systems whose shared memory SQLite cannot rely on (mountinfo's fstype names).
const NO_SHARED_MEMORY: [&str; 9] =
    ["nfs", "nfs4", "9p", "cifs", "smb3", "smbfs", "fuse.sshfs", "afs", "ncpfs"];

/// The journal a new store at `path` keeps, and the file system that chose it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Journal {
    /// Write-ahead logging (`WAL`), or a rollback journal (`DELETE`).
    pub wal: bool,
    /// The file system's type, when known (`nfs4`).
    pub fstype: Option<String>,
}

/// The journal for a store at `path` on this machine.
pub fn journal_for(path: &Path) -> Journal {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mountinfo =
        if cfg!(target_os = "linux") { crate::facts::system::mountinfo() } else { String::new() };
    journal_in(&mountinfo, &dir)
}

/// The journal for a store in directory `dir` (resolved), given mountinfo's text.
pub fn journal_in(mountinfo: &str, dir: &Path) -> Journal {
    let fstype = fstype(mountinfo, dir);
    let wal = !fstype.as_deref().is_some_and(|t| NO_SHARED_MEMORY.contains(&t));
    Journal { wal, fstype }
}

/// The type of the file system `dir` is on: the last-mounted of the longest mount
/// points that hold it.
pub fn fstype(mountinfo: &str, dir: &Path) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines() {
        // `36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw`
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let Some(point) = left.split(' ').nth(4) else { continue };
        let Some(kind) = right.split(' ').next() else { continue };
        let point = unescape(point);
        if dir.starts_with(&point) {
            let depth = point.components().count();
            if best.as_ref().is_none_or(|(d, _)| depth >= *d) {
                best = Some((depth, kind.to_string()));
            }
        }
    }
    best.map(|(_, kind)| kind)
}

/// mountinfo's octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let b = field.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (b[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    PathBuf::from(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /home rw,relatime shared:2 - nfs4 server:/home rw,vers=4.2
31 30 8:2 / /home/local\\040disk rw,relatime shared:3 - xfs /dev/sda2 rw
32 22 0:27 / /mnt/share rw - 9p share rw,trans=virtio
33 22 0:28 / /mnt/share rw - tmpfs tmpfs rw
";

    #[test]
    fn the_journal_follows_the_file_system_under_the_store() {
        let j = |dir: &str| journal_in(MOUNTINFO, Path::new(dir));
        assert_eq!(j("/var/lib"), Journal { wal: true, fstype: Some("ext4".into()) });
        assert_eq!(
            j("/home/me/.local/share/rdmabench"),
            Journal { wal: false, fstype: Some("nfs4".into()) }
        );
        // A mount inside the NFS home, its name escaped; and a name that only starts alike.
        assert_eq!(j("/home/local disk/x").fstype.as_deref(), Some("xfs"));
        assert!(j("/home/local disk/x").wal);
        assert_eq!(j("/home2").fstype.as_deref(), Some("ext4"));
        // The later of two mounts on one point hides the first.
        assert_eq!(j("/mnt/share/db").fstype.as_deref(), Some("tmpfs"));
        let only_9p: String = MOUNTINFO.lines().take(4).map(|l| format!("{l}\n")).collect();
        assert!(!journal_in(&only_9p, Path::new("/mnt/share/db")).wal);
        // Nothing known: WAL, as before.
        assert_eq!(journal_in("", Path::new("/x")), Journal { wal: true, fstype: None });
    }
}
