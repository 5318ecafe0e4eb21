//! Writable shared maps of part of a file ([`File::map_for_write`](super::File::map_for_write)).
//!
//! Bytes copied into a [`WriteMap`] land in the OS's page cache at once, exactly where a
//! `pwrite` of them would have put them, and without a system call: they survive the process
//! (a crash, SIGKILL) as written bytes do, and an fdatasync of the file makes them durable as
//! it does for written bytes (the page cache is one; a page dirtied through a map is flushed by
//! fdatasync like any other dirty page of the file). The WAL copies its unsynced groups this
//! way: a `pwrite` of one put's record was a fifth of a single-threaded put's time.
//!
//! A store into a shared map cannot report an error: where a write would fail, the process
//! gets SIGBUS instead. So a map is only made over bytes that exist (within the file's length)
//! and whose blocks were reserved by a real fallocate (no store needs a block allocation that
//! could meet a full disk); the file systems that cannot promise that (the simulated and
//! fault-injecting ones, and real files whose space was extended without fallocate) give no
//! map and their callers write instead.
//!
//! Unsafe code: the map call, whose argument is at its site.
#![allow(unsafe_code)]

use std::io;
use std::ptr;
use std::sync::Arc;

/// Bytes past a copy that [`WriteMap::write`] prefetches (a put's WAL record of a 16-byte row
/// and a 100-byte value is about 140).
#[cfg(all(target_arch = "x86_64", not(miri)))]
const PREFETCH_AHEAD: usize = 192;

/// A shared, writable map of `[offset, offset + len)` of a file.
pub struct WriteMap {
    /// Shared with the prefault thread while it populates the window (`crate::prefault`).
    map: Arc<memmap2::MmapRaw>,
    offset: u64,
}

impl std::fmt::Debug for WriteMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteMap")
            .field("offset", &self.offset)
            .field("len", &self.map.len())
            .finish()
    }
}

impl WriteMap {
    /// Map `len` bytes of `file` from `offset`. The caller guarantees the range lies within
    /// the file and its blocks are reserved (module docs).
    pub(super) fn new(file: &std::fs::File, offset: u64, len: usize) -> io::Result<WriteMap> {
        // SAFETY: `map_mut` is unsafe because another process or map may change or truncate
        // the file while the map lives, which would make references into it unsound. No
        // reference into this map is ever made: `write` copies through a raw pointer and
        // nothing reads the map. A truncation under it (by another program: the database's
        // own files are written only by the database, whose directory lock keeps out a
        // second instance) would end the process with SIGBUS, not corrupt memory.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(offset)
                .len(len)
                .map_mut(file)?
        };
        // No read-around on a fault: the window's pages are only ever stored into, and a
        // fault's read-around (the device's read-ahead, 8 MiB on this project's build
        // machine) would zero the whole window inside the writer's first store, ahead of the
        // prefault thread that is to take those faults (`prefault_from`).
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::Random);
        Ok(WriteMap {
            map: Arc::new(map.into()),
            offset,
        })
    }

    /// Have the prefault thread fault in the window past file offset `from` (the writer's
    /// next store), so that the stores that follow meet mapped pages (`crate::prefault`).
    pub fn prefault_from(&self, from: u64) {
        let rel = from.saturating_sub(self.offset);
        let Ok(rel) = usize::try_from(rel) else {
            return;
        };
        // The page the writer stores into now is its own to fault (4 KiB: the smallest
        // page; the advice rounds to the real one).
        let start = (rel / 4096 + 1) * 4096;
        crate::prefault::prefault(&self.map, start, self.map.len().saturating_sub(start));
    }

    /// File offset of the map's first byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// File offset just past the map's last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.map.len() as u64
    }

    /// Copy `bytes` to file offset `at`; `false` (and nothing copied) when the range is not
    /// all inside the map.
    pub fn write(&mut self, at: u64, bytes: &[u8]) -> bool {
        let Some(rel) = at.checked_sub(self.offset) else {
            return false;
        };
        let Ok(rel) = usize::try_from(rel) else {
            return false;
        };
        if rel
            .checked_add(bytes.len())
            .is_none_or(|e| e > self.map.len())
        {
            return false;
        }
        // SAFETY: `[rel, rel + bytes.len())` is inside the map (checked above), which is
        // writable memory kept mapped by `self.map` for as long as `self` lives; `bytes` cannot
        // overlap it (no reference into the map exists).
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), self.map.as_mut_ptr().add(rel), bytes.len());
        }
        // The lines the next copy goes to, fetched now (a prefetch is dropped, not faulted,
        // on a page not yet mapped in): otherwise each copy's write misses stand in the
        // store buffer, and the next atomic instruction of the write path waits for them.
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let end = rel + bytes.len();
            let ahead = (self.map.len() - end).min(PREFETCH_AHEAD);
            let mut off = 0;
            while off < ahead {
                // SAFETY: a prefetch is a hint: it reads nothing the program sees and cannot
                // fault, whatever the address.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        self.map.as_ptr().wrapping_add(end + off).cast::<i8>(),
                    );
                }
                off += 64;
            }
        }
        true
    }
}
