//! The real file system: std files with positional I/O, fdatasync, fallocate and flock.
//! This is the one place in the engine that calls `std::fs`.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{File, FileSystem, LockGuard, WriteMap};

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

#[derive(Debug)]
struct RealFile {
    file: std::fs::File,
    /// Some allocation extended the file without reserving its blocks (no fallocate): a
    /// store into a map of it could meet a full disk, so it is never mapped.
    sparse: AtomicBool,
}

impl RealFile {
    /// `created`: the file was created empty by this handle, so every byte of it is one this
    /// handle wrote or allocated; a file opened otherwise may hold holes from before.
    fn shared(file: std::fs::File, created: bool) -> Arc<dyn File> {
        Arc::new(RealFile {
            file,
            sparse: AtomicBool::new(!created),
        })
    }
}

impl File for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }
    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        // pread into the vector's spare capacity: rustix sets the length to what the kernel
        // wrote, so no byte is ever exposed uninitialized, and the block is not zeroed first.
        let mut buf = Vec::with_capacity(len);
        while buf.len() < len {
            let at = offset + buf.len() as u64;
            match rustix::io::pread(&self.file, rustix::buffer::spare_capacity(&mut buf), at) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // The capacity may exceed `len`, and a read may then have gone past it.
        buf.truncate(len);
        Ok(buf)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.file.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        let cur = self.len()?;
        if len <= cur {
            return Ok(());
        }
        match rustix::fs::fallocate(
            &self.file,
            rustix::fs::FallocateFlags::empty(),
            cur,
            len - cur,
        ) {
            Ok(()) => Ok(()),
            // File systems without fallocate (tmpfs on old kernels, some FUSE): extend instead,
            // which still gives a zero-filled tail that readers treat as "no record".
            Err(rustix::io::Errno::OPNOTSUPP) => {
                self.sparse.store(true, Ordering::Relaxed);
                self.file.set_len(len)
            }
            Err(e) => Err(e.into()),
        }
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        if len > self.len()? {
            // Extending by truncation leaves a hole.
            self.sparse.store(true, Ordering::Relaxed);
        }
        self.file.set_len(len)
    }
    fn raw_fd(&self) -> Option<i32> {
        Some(self.file.as_raw_fd())
    }
    fn map_for_write(&self, offset: u64, len: usize) -> Option<io::Result<WriteMap>> {
        if self.sparse.load(Ordering::Relaxed) {
            return None;
        }
        // Every byte of the range must exist: a store past the end is a SIGBUS.
        match self.len() {
            Ok(n) if offset.checked_add(len as u64).is_some_and(|e| e <= n) => {}
            Ok(_) => return None,
            Err(e) => return Some(Err(e)),
        }
        Some(WriteMap::new(&self.file, offset, len))
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
        Ok(RealFile::shared(f, true))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        Ok(RealFile::shared(f, false))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::hard_link(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir(dir)
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

    /// The uninitialized read returns exactly what the zeroing one does, and fails the same
    /// way past the end.
    #[test]
    fn reads_into_fresh_vectors_match_the_zeroing_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r");
        let data: Vec<u8> = (0..70_000u32).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let f = RealFs.open(&p).unwrap();
        for (len, at) in [(0, 0), (1, 0), (16_384, 123), (70_000, 0), (9, 69_991)] {
            let got = f.read_vec_at(len, at).unwrap();
            assert_eq!(got.len(), len);
            assert_eq!(got, &data[at as usize..at as usize + len]);
            let mut z = vec![0u8; len];
            f.read_exact_at(&mut z, at).unwrap();
            assert_eq!(got, z);
        }
        for (len, at) in [(10, 69_991), (1, 70_000), (100, 1 << 40)] {
            let e = f.read_vec_at(len, at).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{len} at {at}");
        }
    }

    #[test]
    fn only_reserved_bytes_of_created_files_are_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFs;
        let p = dir.path().join("m");
        let f = fs.create(&p).unwrap();
        f.allocate(64 << 10).unwrap();
        let mut m = f.map_for_write(4000, 8192).unwrap().unwrap();
        assert_eq!((m.offset(), m.end()), (4000, 12192));
        assert!(m.write(4000, b"head"));
        assert!(m.write(12188, b"tail"));
        assert!(!m.write(12189, b"tail"), "past the window");
        assert!(!m.write(3999, b"x"), "before the window");
        drop(m);
        let mut b = [0u8; 4];
        f.read_exact_at(&mut b, 4000).unwrap();
        assert_eq!(&b, b"head");
        f.read_exact_at(&mut b, 12188).unwrap();
        assert_eq!(&b, b"tail");
        // Past the end: a store there would be a SIGBUS.
        assert!(f.map_for_write(60 << 10, 8 << 10).is_none());
        // Opened, not created here: its space may have holes.
        assert!(fs.open(&p).unwrap().map_for_write(0, 4096).is_none());
        // Extended by truncation: a hole.
        f.truncate(128 << 10).unwrap();
        assert!(f.map_for_write(0, 4096).is_none());
    }

    /// A window's pages past the first store are faulted in by the prefault thread, not by
    /// the thread that stores into them, and they keep exactly the bytes stored.
    #[test]
    fn a_mapped_window_is_prefaulted_ahead_of_its_writer() {
        let dir = tempfile::tempdir().unwrap();
        let f = RealFs.create(&dir.path().join("w")).unwrap();
        f.allocate(1 << 20).unwrap();
        let mut m = f.map_for_write(100, (1 << 20) - 100).unwrap().unwrap();
        assert!(m.write(100, b"first"));
        m.prefault_from(105);
        let on = crate::prefault::wait_idle();
        let before = crate::prefault::thread_faults();
        for at in (4096..1 << 20).step_by(4096) {
            assert!(m.write(at, &at.to_le_bytes()));
        }
        let faults = crate::prefault::thread_faults() - before;
        // 255 pages stored into: one fault each without the prefault thread.
        if on {
            assert!(faults < 16, "{faults} faults in the writer");
        }
        drop(m);
        let mut b = [0u8; 8];
        for at in (4096..1 << 20).step_by(4096) {
            f.read_exact_at(&mut b, at).unwrap();
            assert_eq!(b, at.to_le_bytes());
            f.read_exact_at(&mut b, at + 8).unwrap();
            assert_eq!(b, [0; 8]);
        }
    }

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
