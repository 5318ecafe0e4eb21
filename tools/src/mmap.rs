//! An optional memory-mapped source for the tools (`hfile-verify --mmap`).
//!
//! Never the default, and never used by the engine: reading a mapped page past the end of a
//! file that was truncated meanwhile, or one the disk fails to read, raises SIGBUS, which kills
//! the process instead of returning an error — the opposite of what a verifier of damaged files
//! is for. It exists because a sequential verify of a large, healthy, local file is faster when
//! the kernel can map it instead of copying every block.

use std::fs::File;
use std::io;

use cellar_format::ReadAt;

/// A whole file mapped read-only.
#[derive(Debug)]
pub struct MmapFile {
    map: memmap2::Mmap,
}

impl MmapFile {
    /// Map `file` read-only.
    pub fn map(file: &File) -> io::Result<MmapFile> {
        #[allow(
            unsafe_code,
            reason = "memmap2's constructor is unsafe by nature; see SAFETY"
        )]
        // SAFETY: the map is read-only and only read through bounds-checked slices. The one
        // hazard left is another process truncating or rewriting the file while it is mapped
        // (SIGBUS or changing bytes); that is why this source is opt-in (`--mmap`) and the
        // module docs say so. No reference into the map outlives `MmapFile`.
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(MmapFile { map })
    }
}

impl ReadAt for MmapFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.map[..].read_exact_at(buf, offset)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.map.len() as u64)
    }
}
