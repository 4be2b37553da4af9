//! Reading local files a user names or a tree points at: a qualify profile, a
//! `--baseline`, the `/sys` and `/proc` files `doctor` judges (under `--root`, any tree).
//! Each is read by [`read_text`]: only a regular file, as the opened handle says (a
//! FIFO, a device or a socket is refused without blocking on its open), and at most a
//! limit of bytes, so `/dev/zero` or a FIFO named as a file gets one error line, never
//! all of memory or a hang. The limits are here, together.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// A qualify profile (TOML): the largest built-in one is a few KiB.
pub const PROFILE_LIMIT: u64 = 1 << 20;
/// A `--baseline` (a qualify JSON report).
pub const BASELINE_LIMIT: u64 = 64 << 20;
/// One system file: sysfs attributes are a page at most; `/proc/cpuinfo` of a large
/// host is some hundreds of KiB, a dpkg status some MiB.
pub const SYSTEM_FILE_LIMIT: u64 = 16 << 20;

/// Why a file was not read.
#[derive(Debug)]
pub enum FileError {
    /// It could not be opened or read (missing, no permission, not UTF-8, …).
    Io(PathBuf, io::Error),
    /// It is a FIFO, a device, a socket or a directory.
    NotRegular(PathBuf),
    /// It holds more than the limit.
    TooLarge(PathBuf, u64),
    /// Under a tree's root, it resolves (through a symbolic link) outside that root.
    Outside(PathBuf, PathBuf),
    /// Its text is refused (why): a CPU list over its bounds.
    Invalid(PathBuf, String),
}

impl FileError {
    /// Refused for what it is (not a regular file, too large), not for failing to
    /// read: what a missing sysfs attribute cannot be.
    pub fn refused(&self) -> bool {
        !matches!(self, FileError::Io(..))
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io(path, e) => write!(f, "{}: {e}", path.display()),
            FileError::NotRegular(path) => write!(f, "{}: not a regular file", path.display()),
            FileError::TooLarge(path, limit) => {
                write!(f, "{}: larger than {limit} bytes", path.display())
            }
            FileError::Invalid(path, why) => write!(f, "{}: {why}", path.display()),
            FileError::Outside(path, root) => {
                write!(f, "{}: a link out of the tree {}", path.display(), root.display())
            }
        }
    }
}

/// The text of regular file `path`, at most `limit` bytes.
///
/// # Errors
/// It cannot be opened or read, is not UTF-8, is not a regular file, or holds more than
/// `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, FileError> {
    String::from_utf8(read_bytes(path, limit)?).map_err(|e| {
        FileError::Io(
            path.to_path_buf(),
            io::Error::new(io::ErrorKind::InvalidData, e.utf8_error()),
        )
    })
}

/// The bytes of regular file `path`, at most `limit` of them (a key file, which need
/// not be text).
///
/// # Errors
/// It cannot be opened or read, is not a regular file, or holds more than `limit` bytes.
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let io_error = |e| FileError::Io(path.to_path_buf(), e);
    let file = open(path).map_err(io_error)?;
    // What was opened, not what the path names now.
    if !file.metadata().map_err(io_error)?.is_file() {
        return Err(FileError::NotRegular(path.to_path_buf()));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io_error)?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge(path.to_path_buf(), limit));
    }
    Ok(bytes)
}

/// Opens `path` for reading without waiting for a FIFO's writer: O_NONBLOCK changes
/// nothing for a regular file, and anything else is refused before it is read.
fn open(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    options.open(path)
}

/// Opens `path` to write a report into (created, emptied), without waiting for a FIFO's
/// reader: a FIFO that nobody reads is refused at once, one that is read is written
/// as a file is.
///
/// # Errors
/// It cannot be opened; a FIFO without a reader is `ErrorKind::NotConnected`, "a FIFO
/// with no reader".
pub fn create(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        let file = create_unblocked(&options, path)?;
        // A FIFO with its reader there: written as a file is, blocking when full.
        ffi::os::set_blocking(std::os::fd::AsFd::as_fd(&file))?;
        Ok(file)
    }
    #[cfg(not(unix))]
    options.open(path)
}

/// Writes `bytes` to the report file `path` whole or not at all: a regular file (or a
/// new one) is written beside it under a temporary name and renamed over it, so a
/// reader, or a process killed mid-write, never meets half a document; anything else (a
/// FIFO, `/dev/stdout`) is written as [`create`] opens it.
///
/// # Errors
/// It cannot be written.
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let regular = match std::fs::metadata(path) {
        Ok(m) => m.is_file(),
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    };
    let name = path.file_name().filter(|_| regular);
    let Some(name) = name else {
        return create(path)?.write_all(bytes);
    };
    let mut temporary = name.to_os_string();
    temporary.push(format!(".{}.partial", std::process::id()));
    let temporary = path.with_file_name(temporary);
    let written =
        std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        // A directory this user cannot add to, with a file in it that it may write.
        let _ = std::fs::remove_file(&temporary);
        return create(path)?.write_all(bytes);
    }
    Ok(())
}

/// Appends `line` and a newline to `path` in one write (`O_APPEND`): a process killed
/// between two lines leaves every line it wrote whole.
///
/// # Errors
/// It cannot be opened or written.
pub fn append_line(path: &Path, line: &str) -> io::Result<()> {
    use std::io::Write;
    let mut file = OpenOptions::new().append(true).create(true).open(path)?;
    file.write_all(format!("{line}\n").as_bytes())
}

/// `options` with `O_NONBLOCK`, a FIFO nobody reads refused by name.
#[cfg(unix)]
fn create_unblocked(options: &OpenOptions, path: &Path) -> io::Result<File> {
    let mut quick = options.clone();
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut quick, libc::O_NONBLOCK);
    quick.open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ENXIO) => io::Error::new(io::ErrorKind::NotConnected, "a FIFO with no reader"),
        _ => e,
    })
}

/// A directory tree of system files (`/`, or a capture of one) read file by file, each
/// through [`read_text`] with [`SYSTEM_FILE_LIMIT`]. A file that cannot be read reads as
/// absent, as a missing attribute does; the first one refused (a FIFO, a device, too
/// large, a link out of the tree) is kept, so the caller can fail with it once it is
/// done reading. Every path is resolved before it is opened, and read only when it
/// resolves under the root: sysfs's links within the tree are followed, a link out of
/// it is refused.
pub struct SystemTree {
    root: PathBuf,
    /// The root, resolved (`None` when it does not resolve: then nothing does).
    real_root: Option<PathBuf>,
    /// Folders resolved so far. A port's GID table is 128–1,024 files in one folder
    /// (rxe's 1,024 per port): resolving each file's whole path took ~12 `readlink`s,
    /// 52,000 system calls and 2.4 s of `doctor` in the lab, against one `lstat` a file
    /// with its folder resolved once.
    folders: RefCell<HashMap<PathBuf, PathBuf>>,
    refused: RefCell<Option<FileError>>,
}

impl SystemTree {
    /// The tree under `root`.
    pub fn new(root: &Path) -> SystemTree {
        SystemTree {
            root: root.to_path_buf(),
            real_root: root.canonicalize().ok(),
            folders: RefCell::new(HashMap::new()),
            refused: RefCell::new(None),
        }
    }

    /// `root/rel` resolved, when it resolves under the root.
    ///
    /// # Errors
    /// It does not resolve (missing), or it resolves outside the root.
    pub fn resolve(&self, rel: impl AsRef<Path>) -> Result<PathBuf, FileError> {
        let path = self.join(rel);
        let real = self.real_path(&path).map_err(|e| FileError::Io(path.clone(), e))?;
        match &self.real_root {
            Some(root) if real.starts_with(root) => Ok(real),
            _ => Err(FileError::Outside(path, self.root.clone())),
        }
    }

    /// `path` with every link followed, as `canonicalize` gives it: a file that is not a
    /// link is its folder's resolved path (cached) and its name.
    fn real_path(&self, path: &Path) -> io::Result<PathBuf> {
        let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
            return path.canonicalize();
        };
        if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
            return path.canonicalize();
        }
        if let Some(real) = self.folders.borrow().get(folder) {
            return Ok(real.join(name));
        }
        let real = folder.canonicalize()?;
        self.folders.borrow_mut().insert(folder.to_path_buf(), real.clone());
        Ok(real.join(name))
    }

    /// Its root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `root/rel`.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.root.join(rel)
    }

    /// The text of `root/rel`; `None` when it cannot be read or is refused.
    pub fn read(&self, rel: impl AsRef<Path>) -> Option<String> {
        let path = self.join(&rel);
        // What was resolved is read, named as the tree names it.
        let read = self.resolve(rel).and_then(|real| {
            read_text(&real, SYSTEM_FILE_LIMIT).map_err(|e| match e {
                FileError::Io(_, e) => FileError::Io(path.clone(), e),
                FileError::NotRegular(_) => FileError::NotRegular(path.clone()),
                FileError::TooLarge(_, limit) => FileError::TooLarge(path.clone(), limit),
                other => other,
            })
        });
        match read {
            Ok(text) => Some(text),
            Err(e) => {
                if e.refused() {
                    self.refused.borrow_mut().get_or_insert(e);
                }
                None
            }
        }
    }

    /// Refuses `root/rel` for what it holds (`why`): kept as a refused file is.
    pub fn refuse(&self, rel: impl AsRef<Path>, why: String) {
        self.refused.borrow_mut().get_or_insert(FileError::Invalid(self.join(rel), why));
    }

    /// The first file refused so far.
    pub fn refused(self) -> Option<FileError> {
        self.refused.into_inner()
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("rdmabench-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn reads_a_regular_file_up_to_its_limit() {
        let dir = scratch("regular");
        let path = dir.join("f");
        std::fs::write(&path, "0123456789").unwrap();
        assert_eq!(read_text(&path, 10).unwrap(), "0123456789");
        let e = read_text(&path, 9).unwrap_err();
        assert!(e.refused());
        assert_eq!(e.to_string(), format!("{}: larger than 9 bytes", path.display()));
        let e = read_text(&dir.join("missing"), 10).unwrap_err();
        assert!(!e.refused(), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_devices_fifos_and_directories_without_blocking() {
        let dir = scratch("special");
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        for path in [Path::new("/dev/zero"), &fifo, &dir] {
            let e = read_text(path, 1 << 20).unwrap_err();
            assert_eq!(e.to_string(), format!("{}: not a regular file", path.display()));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_report_goes_into_a_read_fifo_whole_and_a_fifo_nobody_reads_is_refused() {
        use std::io::Write;
        let dir = scratch("create");
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let e = create(&fifo).unwrap_err();
        assert_eq!(e.to_string(), "a FIFO with no reader");
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap().len())
        };
        let start = std::time::Instant::now();
        let mut file = loop {
            match create(&fifo) {
                Ok(f) => break f,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    assert!(start.elapsed().as_secs() < 5, "the reader never opened");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => panic!("{e}"),
            }
        };
        // More than a pipe holds: written blocking, as a file is.
        file.write_all(&vec![b'x'; 1 << 20]).unwrap();
        drop(file);
        assert_eq!(reader.join().unwrap(), 1 << 20);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tree_keeps_the_first_refusal_and_reads_on() {
        let dir = scratch("tree");
        std::fs::write(dir.join("a"), "1\n").unwrap();
        let made = std::process::Command::new("mkfifo").arg(dir.join("fifo")).status().unwrap();
        assert!(made.success());
        let tree = SystemTree::new(&dir);
        assert_eq!(tree.read("fifo"), None);
        assert_eq!(tree.read("missing"), None);
        assert_eq!(tree.read("a").as_deref(), Some("1\n"));
        let e = tree.refused().expect("the FIFO was refused");
        assert_eq!(e.to_string(), format!("{}: not a regular file", dir.join("fifo").display()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tree_follows_links_within_it_and_refuses_links_out_of_it() {
        let dir = scratch("links");
        let outside = scratch("links-outside");
        std::fs::write(outside.join("secret"), "secret\n").unwrap();
        std::fs::create_dir_all(dir.join("devices/x")).unwrap();
        std::fs::create_dir_all(dir.join("class")).unwrap();
        std::fs::write(dir.join("devices/x/fw_ver"), "2.42\n").unwrap();
        std::os::unix::fs::symlink("../devices/x", dir.join("class/x")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), dir.join("devices/x/board_id")).unwrap();
        let up = format!("../../../rdmabench-files-{}-links-outside", std::process::id());
        std::os::unix::fs::symlink(up, dir.join("devices/x/up")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("zero")).unwrap();
        let tree = SystemTree::new(&dir);
        assert_eq!(tree.read("class/x/fw_ver").as_deref(), Some("2.42\n"));
        assert_eq!(tree.read("class/x/board_id"), None);
        assert_eq!(tree.read("class/x/up/secret"), None);
        assert_eq!(tree.read("zero"), None);
        let e = tree.refused().expect("the link out was refused");
        assert_eq!(
            e.to_string(),
            format!(
                "{}: a link out of the tree {}",
                dir.join("class/x/board_id").display(),
                dir.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }
}
/// `-` as an output path (`--json -`, `--junit -`, `--csv -`): stdout, for every output
/// option of every command, as perftest-style tests' `--json -`.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// At most one of a command's outputs can be stdout: `flags` pairs each option with its
/// path.
///
/// # Errors
/// Two outputs given `-`.
pub fn one_stdout(flags: &[(&str, Option<&Path>)]) -> Result<bool, crate::error::Error> {
    let dashed: Vec<&str> =
        flags.iter().filter(|(_, p)| p.is_some_and(is_stdout)).map(|(f, _)| *f).collect();
    if dashed.len() > 1 {
        return Err(crate::error::Error::usage(format!(
            "{}: only one output can be stdout (-)",
            dashed.iter().map(|f| format!("{f} -")).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(!dashed.is_empty())
}

/// Writes `text` to `path`, or to stdout when `path` is `-` (a reader that went away,
/// `| head`, is not an error). `flag` names the option in the error.
///
/// # Errors
/// The file cannot be written, or stdout fails.
pub fn write_output(flag: &str, path: &Path, text: &str) -> Result<(), crate::error::Error> {
    use std::io::Write;
    let failed = |e: io::Error| crate::error::Error::io(format!("{flag} {}: {e}", path.display()));
    if !is_stdout(path) {
        return std::fs::write(path, text).map_err(failed);
    }
    let mut stdout = io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(failed(e)),
        _ => Ok(()),
    }
}
