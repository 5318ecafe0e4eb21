//! The file-system layer: every file operation of the engine goes through [`FileSystem`] and
//! [`File`]. No `std::fs` call exists outside this module.
//!
//! [`RealFs`] is the production implementation. The reliability work adds an in-memory
//! crash-simulating file system and a fault-injecting wrapper behind the same traits, which is
//! why the traits are object-safe and small: recovery, WAL, flush and manifest code cannot tell
//! which one they run on.

pub mod fault;
mod map;
mod real;
pub mod sim;

use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use fault::{Fault, FaultFs, OpKind, Rule};
pub use map::WriteMap;
pub use real::RealFs;
pub use sim::{CrashPolicy, FsyncFailMode, SimFs};

/// An open file. Positional reads and writes; no shared cursor, so a file can be used from
/// several threads.
pub trait File: Send + Sync + Debug {
    /// Read up to `buf.len()` bytes at `offset`; returns how many were read (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Write up to `buf.len()` bytes at `offset`; may be short.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Make the file's data (and the metadata needed to read it back) durable: fdatasync.
    fn sync_data(&self) -> io::Result<()>;
    /// Current length.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file has no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Reserve space up to `len` bytes without changing what reads return (fallocate with
    /// KEEP_SIZE semantics are not used: the file grows and the new bytes read as zeros).
    fn allocate(&self, len: u64) -> io::Result<()>;
    /// Cut or extend the file to `len` bytes.
    fn truncate(&self, len: u64) -> io::Result<()>;
    /// The raw descriptor, for io_uring; `None` for files that are not real.
    fn raw_fd(&self) -> Option<i32>;
    /// A shared writable map of `[offset, offset + len)` ([`WriteMap`]), or `None` where
    /// stores into a map could fail: files that are not real (whose writes must go through
    /// [`File::write_at`] to be simulated or faulted), a range past the file's end, or a file
    /// whose space was not all reserved by fallocate. `Some(Err)` when the map call failed.
    fn map_for_write(&self, offset: u64, len: usize) -> Option<io::Result<WriteMap>> {
        let _ = (offset, len);
        None
    }

    /// Fill `buf` from `offset`, failing with `UnexpectedEof` if the file is shorter.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `len` bytes from `offset` in a new vector, failing with `UnexpectedEof` if the file is
    /// shorter. This default zeroes the vector and reads through [`File::read_at`] (so
    /// simulated and fault-injecting files see every read); a real file reads into the
    /// vector's uninitialized capacity instead.
    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }

    /// Write all of `buf` at `offset`, continuing after short writes.
    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A held lock on a database directory; released on drop.
pub trait LockGuard: Send + Sync + Debug {}

/// A file system. Paths are absolute or relative to the process's working directory.
pub trait FileSystem: Send + Sync + Debug + 'static {
    /// Create a directory and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Create a new file for reading and writing; fails if it exists (O_CREAT|O_EXCL).
    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>>;
    /// Open an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn File>>;
    /// Atomically rename, replacing `to` if it exists. Durable only after `sync_dir`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Make `to` a new name of the file `from` (a hard link; `to` must not exist). Durable
    /// only after `sync_dir`. `Unsupported` where the file system has no links (the default),
    /// `CrossesDevices` across devices: callers then copy.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let _ = (from, to);
        Err(io::ErrorKind::Unsupported.into())
    }
    /// Remove a file. Durable only after `sync_dir`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Remove an empty directory (`DirectoryNotEmpty` if it holds anything). Durable only after
    /// `sync_dir` of its parent.
    fn remove_dir(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries of a directory, sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Whether a path exists.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Make the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Take an exclusive lock on `path` (created if missing); `WouldBlock` if another holder
    /// has it.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>>;
}

/// A shared handle to a file system.
pub type SharedFs = Arc<dyn FileSystem>;

/// Create `dir` and any missing parents, and make each new directory's entry durable by
/// syncing its parent: a directory created but never synced into its parent can vanish with a
/// power loss, taking every file in it — synced or not — along.
pub fn create_dir_durable(fs: &dyn FileSystem, dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut p = Some(dir);
    while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
        if fs.exists(d)? {
            break;
        }
        missing.push(d);
        p = d.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    fs.create_dir_all(dir)?;
    for d in missing.iter().rev() {
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)?;
        }
    }
    Ok(())
}

/// `dir/name`.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Adapter so an engine [`File`] can be read by the format crate.
#[derive(Debug, Clone)]
pub struct FormatSource(pub Arc<dyn File>);

impl cellar_format::ReadAt for FormatSource {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        self.0.read_vec_at(len, offset)
    }
    fn size(&self) -> io::Result<u64> {
        self.0.len()
    }
}

/// Adapter so the format crate's streaming writer can write into an engine [`File`].
#[derive(Debug)]
pub struct AppendWriter {
    file: Arc<dyn File>,
    offset: u64,
    /// CRC-32C of every byte written so far.
    crc: u32,
}

impl AppendWriter {
    /// Append from the start of `file`.
    pub fn new(file: Arc<dyn File>) -> Self {
        AppendWriter {
            file,
            offset: 0,
            crc: 0,
        }
    }

    /// The file written.
    pub fn file(&self) -> &Arc<dyn File> {
        &self.file
    }

    /// CRC-32C of the bytes written so far: of the whole file once the writer finished.
    pub fn crc(&self) -> u32 {
        self.crc
    }
}

impl io::Write for AppendWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write_all_at(buf, self.offset)?;
        self.offset += buf.len() as u64;
        self.crc = crc32c::crc32c_append(self.crc, buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
