//! The portable WAL device: positional write then fdatasync, both through the [`File`] trait.
//! Also the device for files without a raw descriptor (simulated or fault-injecting file
//! systems), which is what makes the WAL testable under fault injection.

use std::io;
use std::sync::Arc;

use super::device::{BackendKind, WalDevice};
use crate::fs::File;

/// `write_all_at` + `sync_data`.
#[derive(Debug, Default)]
pub struct SyncDevice;

impl WalDevice for SyncDevice {
    fn write(
        &mut self,
        file: &Arc<dyn File>,
        offset: u64,
        buf: &[u8],
        sync: bool,
    ) -> io::Result<()> {
        file.write_all_at(buf, offset)?;
        if sync {
            // Between the write and its fdatasync (the writer marks the point after an
            // unsynced group itself; io_uring links the two, so there it has no "between").
            crate::kill_point!("wal.after_write");
            // Ordered after the write by construction: write_all_at returned first.
            file.sync_data()?;
        }
        Ok(())
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Sync
    }
}
