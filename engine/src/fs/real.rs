//! The real file system: std files with positional I/O, fdatasync, fallocate and flock.
//! This is the one place in the engine that calls `std::fs`.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use super::{File, FileSystem, LockGuard};

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

#[derive(Debug)]
struct RealFile(std::fs::File);

impl File for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        let cur = self.len()?;
        if len <= cur {
            return Ok(());
        }
        match rustix::fs::fallocate(&self.0, rustix::fs::FallocateFlags::empty(), cur, len - cur) {
            Ok(()) => Ok(()),
            // File systems without fallocate (tmpfs on old kernels, some FUSE): extend instead,
            // which still gives a zero-filled tail that readers treat as "no record".
            Err(rustix::io::Errno::OPNOTSUPP) => self.0.set_len(len),
            Err(e) => Err(e.into()),
        }
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn raw_fd(&self) -> Option<i32> {
        Some(self.0.as_raw_fd())
    }
}

#[derive(Debug)]
struct RealLock(#[allow(dead_code, reason = "held for its flock; released on drop")] std::fs::File);

impl LockGuard for RealLock {}

impl FileSystem for RealFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(path)?;
        Ok(Arc::new(RealFile(f)))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        Ok(Arc::new(RealFile(f)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for e in std::fs::read_dir(dir)? {
            if let Ok(name) = e?.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |e| {
                if e == rustix::io::Errno::WOULDBLOCK {
                    io::Error::from(io::ErrorKind::WouldBlock)
                } else {
                    e.into()
                }
            },
        )?;
        Ok(Box::new(RealLock(f)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_write_sync_read_rename_remove() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFs;
        let p = dir.path().join("a");
        let f = fs.create(&p).unwrap();
        assert!(fs.create(&p).is_err(), "create must not replace a file");
        f.write_all_at(b"hello", 0).unwrap();
        f.allocate(4096).unwrap();
        assert_eq!(f.len().unwrap(), 4096);
        f.sync_data().unwrap();
        let mut buf = [0u8; 5];
        f.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello");
        let q = dir.path().join("b");
        fs.rename(&p, &q).unwrap();
        fs.sync_dir(dir.path()).unwrap();
        assert_eq!(fs.list(dir.path()).unwrap(), vec!["b".to_string()]);
        fs.remove(&q).unwrap();
        assert!(!fs.exists(&q).unwrap());
    }

    #[test]
    fn second_lock_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFs;
        let p = dir.path().join("LOCK");
        let g = fs.lock(&p).unwrap();
        let e = fs.lock(&p).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        drop(g);
        assert!(fs.lock(&p).is_ok());
    }
}
