//! The WAL writer: the only code that writes segment files after `Wal::open`, run by whichever
//! thread is the group-commit leader (see `commit`).
//!
//! Per batch: frame its records into one buffer, write it with one device call (plus an
//! fdatasync linked after it when the batch needs durability, or a direct write in its place:
//! `uring`) and report the watermarks. After
//! the first failure `commit` calls it no more: the batch that failed and every later one are
//! dropped, their waiters get `Poisoned`.
//!
//! Segment roll: before a record that would push the current segment past `segment_size` (unless
//! the segment is still empty: an oversized record goes alone into a fresh segment), and at a
//! `Roll` request. The old segment's pending bytes are written *and fdatasynced* before the new
//! segment is created, whenever it has unsynced bytes. That keeps the prefix rule across files
//! (an fsync acknowledgement in the new segment never depends on an unsynced older one), and it
//! guarantees that only the newest segment can ever end in a torn write, which is what lets
//! replay accept a torn tail in the last segment only.
//!
//! Unsynced groups (`SyncWal`, `AsyncWal`) are copied into the segment through a shared map of
//! its preallocated space (`WriteMap`, when [`Writer::mapped_writes`] and the file allows it)
//! instead of a device write (except a segment's LINK written alone, see `copy_mapped`): the
//! bytes are in the OS as after a `pwrite`, at the cost of a
//! memcpy instead of a system call (a fifth of a single-threaded put's time). The map is a
//! window from the group's offset to the end of the preallocated space (about one
//! [`PREALLOC_STEP`]), replaced when a group passes its end, so at most that much of the
//! segment is mapped (mapped pages count in the process's resident set). A new window's pages
//! past the first are faulted in by the prefault thread (`crate::prefault`) while the writer
//! goes on, instead of one fault per page inside its later groups. Synced groups go
//! through the device, whose fdatasync covers the pages written through the map as well (one
//! page cache); bytes written both ways in one page are coherent for the same reason.
//!
//! Every record carries `synced_upto`: the offset of its segment up to which an fdatasync had
//! completed when its group was framed ([`Segment::synced`]; 0 in a fresh segment). After the
//! final fdatasync of a clean close, a SEAL attests that offset when no record does yet, so
//! replay can tell damage to synced bytes from a torn unsynced write (see `reader`), and the
//! next segment is started with its LINK alone, so that the sealed segment's end is attested
//! by a LINK as an older segment's is (`Writer::close_with_link`).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::commit::{Batch, BatchWriter, Item, Published};
use super::device::WalDevice;
use super::reader::segment_file_name;
use super::record::{encode_link, encode_seal, encode_wal, link_framed_len, wal_framed_len};
use super::StatsInner;
use crate::error::{Error, Result};
use crate::fs::{File, FileSystem, SharedFs, WriteMap};

/// The segment being appended to.
#[derive(Debug)]
pub(crate) struct Segment {
    pub number: u64,
    pub path: PathBuf,
    pub file: Arc<dyn File>,
    /// Where the next byte goes.
    pub offset: u64,
    /// Whether bytes were written since the last fdatasync.
    pub dirty: bool,
    /// Offset up to which an fdatasync has completed: the `synced_upto` of the next group.
    pub synced: u64,
    /// The highest `synced_upto` written into the segment so far.
    pub attested: u64,
    /// Bytes preallocated so far (grows in [`PREALLOC_STEP`]s up to the segment size).
    pub allocated: u64,
    /// Up to here the preallocated space holds no block left unwritten for a synced group to
    /// convert: zeros written and synced past a synced group's last block, and groups' bytes
    /// below it ([`Writer::zero_fill`]).
    pub zeroed: u64,
    /// The LINK still to be written at the head of the segment, with its first group: the
    /// previous segment's number and where its data ended.
    pub pending_link: Option<(u64, u64)>,
    /// Bytes of the LINK at the head of the segment (0 without one): a segment holding no more
    /// than that is still empty for the roll rule.
    pub head: u64,
    /// The window unsynced groups are copied into (module docs).
    pub map: Option<WriteMap>,
    /// The file gave no map (or the map call failed): the device writes every group.
    pub unmappable: bool,
}

impl Segment {
    /// Open the segment with a LINK to segment `previous`, whose data ends at `previous_end`.
    pub(crate) fn link_to(&mut self, previous: u64, previous_end: u64) {
        self.pending_link = Some((previous, previous_end));
        self.head = link_framed_len() as u64;
    }
}

/// Segments are preallocated this much at a time, not whole: an idle or lightly used database
/// then holds at most this much of zeros instead of a whole 64 MiB segment (it was most of a
/// small database's size on disk), while an fdatasync still updates the file's size at most
/// once per step.
pub(crate) const PREALLOC_STEP: u64 = 1 << 20;

/// [`Writer::zero_fill`] starts at a multiple of this: the block size of direct writes.
const ZERO_ALIGN: u64 = 4096;

/// Create segment `number`, preallocate its first step and make its directory entry durable,
/// so that no record in it is acknowledged while the file itself could vanish in a crash.
pub(crate) fn create_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    size: u64,
) -> Result<Segment> {
    let path = dir.join(segment_file_name(number));
    let file = fs
        .create(&path)
        .map_err(|e| Error::io(&path, "creating WAL segment", e))?;
    let allocated = size.min(PREALLOC_STEP);
    file.allocate(allocated)
        .map_err(|e| Error::io(&path, "preallocating WAL segment", e))?;
    // Persist the new size now so later fdatasyncs carry only data, not metadata.
    file.sync_data()
        .map_err(|e| Error::io(&path, "syncing a new WAL segment", e))?;
    fs.sync_dir(dir)
        .map_err(|e| Error::io(dir, "syncing the WAL directory", e))?;
    Ok(Segment {
        number,
        path,
        file,
        offset: 0,
        dirty: false,
        synced: 0,
        attested: 0,
        allocated,
        zeroed: 0,
        pending_link: None,
        head: 0,
        map: None,
        unmappable: false,
    })
}

#[derive(Debug)]
pub(crate) struct Writer {
    pub fs: SharedFs,
    pub dir: PathBuf,
    pub segment_size: u64,
    pub device: Box<dyn WalDevice>,
    pub seg: Segment,
    pub stats: Arc<StatsInner>,
    pub buf: Vec<u8>,
    /// Seq of the last record whose bytes reached the device.
    pub last_written_seq: u64,
    /// Seq of the last record framed into `buf`.
    pub buf_last_seq: u64,
    /// Copy unsynced groups through a map of the segment (module docs).
    pub mapped_writes: bool,
}

impl BatchWriter for Writer {
    fn write_batch(&mut self, batch: Batch) -> Result<Published> {
        self.process(batch)
    }

    fn finish(&mut self) {
        // Closing: everything was written and synced by the last batch.
        self.seal();
        self.close_with_link();
    }
}

impl Writer {
    /// Attest the segment's final fdatasync with a synced SEAL, unless a record already does.
    /// Not needed for durability (the data is synced), so a failure only warns: what fails is
    /// a write past the synced data, which stays as it is.
    fn seal(&mut self) {
        if self.seg.dirty || self.seg.synced <= self.seg.attested {
            return;
        }
        self.buf.clear();
        encode_seal(self.seg.number, self.seg.synced, &mut self.buf);
        match self
            .device
            .write(&self.seg.file, self.seg.offset, &self.buf, true)
        {
            Ok(()) => {
                self.seg.offset += self.buf.len() as u64;
                self.seg.attested = self.seg.synced;
                self.seg.synced = self.seg.offset;
                StatsInner::add(&self.stats.syncs, 1);
            }
            Err(e) => tracing::warn!(
                error = %e,
                path = %self.seg.path.display(),
                "could not seal the WAL segment at close"
            ),
        }
        self.buf.clear();
    }

    /// After the SEAL of a clean close, start the next segment with its LINK alone, written
    /// and fdatasynced: the sealed segment is then no longer the newest, so damage at its end
    /// is mid-log damage (`Corruption`), attested by the LINK, instead of the one damage the
    /// torn-tail rule cannot tell from an interrupted write — the SEAL and a run of records up
    /// to the last, all damaged (SPEC §16.6). Skipped when the segment holds nothing or is not
    /// all synced; a failure only warns: the sealed segment is intact, and a LINK-less or
    /// half-written new segment reads as an empty newest segment.
    fn close_with_link(&mut self) {
        if self.seg.offset == 0 || self.seg.dirty {
            return;
        }
        let (previous, end) = (self.seg.number, self.seg.offset);
        let number = previous + 1;
        self.buf.clear();
        encode_link(number, previous, end, &mut self.buf);
        let written =
            create_segment(&*self.fs, &self.dir, number, self.buf.len() as u64).and_then(|next| {
                self.device
                    .write(&next.file, 0, &self.buf, true)
                    .map_err(|e| Error::io(&next.path, "writing the closing WAL LINK", e))
            });
        match written {
            Ok(()) => {
                StatsInner::add(&self.stats.syncs, 1);
                tracing::debug!(segment = number, previous, end, "WAL closed with a LINK");
            }
            Err(e) => tracing::warn!(
                error = %e,
                segment = number,
                "could not start the closing WAL segment"
            ),
        }
        self.buf.clear();
    }

    fn process(&mut self, batch: Batch) -> Result<Published> {
        let mut rolls = Vec::new();
        let mut synced_by_roll = None;
        let (mut records, mut bytes) = (0u64, 0u64);
        self.buf.clear();
        self.frame_link();
        for item in batch.items {
            match item {
                Item::Record { seq, payload } => {
                    // The length depends on the varints of seq and `synced_upto`; a roll
                    // resets the latter, so measure again after one.
                    let need = |w: &Self| wal_framed_len(seq, w.seg.synced, payload.len()) as u64;
                    let used = self.seg.offset + self.buf.len() as u64;
                    if used > self.seg.head && used + need(self) > self.segment_size {
                        synced_by_roll = self.roll()?.or(synced_by_roll);
                    }
                    let need = need(self);
                    encode_wal(
                        self.seg.number,
                        seq,
                        self.seg.synced,
                        &payload,
                        &mut self.buf,
                    );
                    self.seg.attested = self.seg.synced;
                    self.buf_last_seq = seq;
                    records += 1;
                    bytes += need;
                }
                Item::Roll { ticket } => {
                    synced_by_roll = self.roll()?.or(synced_by_roll);
                    rolls.push((ticket, self.seg.number));
                }
            }
        }
        self.flush(batch.sync)?;
        let st = &self.stats;
        if records > 0 {
            StatsInner::add(&st.records, records);
            StatsInner::add(&st.bytes, bytes);
            StatsInner::add(&st.groups, 1);
            StatsInner::raise(&st.max_group, records);
        }
        let synced = if batch.sync {
            Some(batch.upto)
        } else {
            synced_by_roll
        };
        Ok(Published {
            written: batch.upto,
            synced,
            rolls,
            end: Some((self.seg.number, self.seg.offset)),
        })
    }

    /// Write `buf` to the current segment; with `sync`, also make the segment durable (skipped
    /// when nothing in it is unsynced).
    fn flush(&mut self, sync: bool) -> Result<()> {
        let has_data = !self.buf.is_empty();
        let do_sync = sync && (has_data || self.seg.dirty);
        if !has_data && !do_sync {
            return Ok(());
        }
        let end = self.seg.offset + self.buf.len() as u64;
        if end > self.seg.allocated {
            // The next step (or as much as this write needs, for an oversized record); the
            // fdatasync that follows, if any, makes the new size durable with the data.
            let target = end
                .div_ceil(PREALLOC_STEP)
                .saturating_mul(PREALLOC_STEP)
                .min(self.segment_size.max(end));
            self.seg
                .file
                .allocate(target)
                .map_err(|e| Error::io(&self.seg.path, "preallocating WAL segment", e))?;
            self.seg.allocated = target;
        }
        if do_sync {
            self.zero_fill(end)?;
        }
        if do_sync || !self.copy_mapped() {
            let doing = if do_sync {
                "writing and syncing the WAL"
            } else {
                "writing the WAL"
            };
            self.device
                .write(&self.seg.file, self.seg.offset, &self.buf, do_sync)
                .map_err(|e| Error::io(&self.seg.path, doing, e))?;
        }
        self.seg.offset += self.buf.len() as u64;
        if has_data {
            self.seg.dirty = true;
            self.last_written_seq = self.buf_last_seq;
            // An unsynced group (SyncWal only) stops here with its bytes in the OS; a synced
            // one has the point inside the device, between write and fdatasync.
            if !do_sync {
                crate::kill_point!("wal.after_write");
            }
        }
        if do_sync {
            crate::kill_point!("wal.after_sync");
            self.seg.dirty = false;
            self.seg.synced = self.seg.offset;
            StatsInner::add(&self.stats.syncs, 1);
            self.stats
                .direct_groups
                .store(self.device.direct_writes(), Ordering::Relaxed);
        }
        self.buf.clear();
        Ok(())
    }

    /// Before a synced group ending at `end`: write zeros over the preallocated space past the
    /// group's last block, up to the end of the preallocation, and fdatasync them, unless that
    /// was done or the segment takes unsynced groups through a map.
    ///
    /// Why: `fallocate` leaves *unwritten* extents. The first write into one converts it, a
    /// change of the file's metadata that the group's fdatasync (or `O_DSYNC` direct write)
    /// must then commit to the file system's journal with it, one journal commit per synced
    /// group. Written once with zeros, the space takes later synced groups as pure data writes
    /// (raw `O_DIRECT|O_DSYNC` 4 KiB writes on the project's machine, ext4: one thread 4.8–5.1k
    /// against 6.9–9.6k/s, eight threads 12k against 41k). The cost is one write and one
    /// fdatasync per [`PREALLOC_STEP`] of log, in the group that reaches the step. Segments
    /// that take unsynced groups through a map are not zero-filled: their window's pages are
    /// dirtied with zeros by the prefault anyway, and their groups wait for no fdatasync.
    /// The bytes are what the preallocated space reads as, so nothing changes on disk for a
    /// reader (SPEC.md §16.1).
    fn zero_fill(&mut self, end: u64) -> Result<()> {
        if self.seg.map.is_some() || self.seg.zeroed >= self.seg.allocated {
            return Ok(());
        }
        // Past the group's last block: a direct write rewrites that block whole.
        let from = self.seg.zeroed.max(end.next_multiple_of(ZERO_ALIGN));
        let to = self.seg.allocated;
        if from < to {
            let len = usize::try_from(to - from).unwrap_or(usize::MAX);
            let zeros = vec![0u8; len];
            let path = &self.seg.path;
            self.seg
                .file
                .write_all_at(&zeros, from)
                .map_err(|e| Error::io(path, "zero-filling the WAL segment", e))?;
            self.seg
                .file
                .sync_data()
                .map_err(|e| Error::io(path, "syncing the WAL segment's zero-filled space", e))?;
        }
        self.seg.zeroed = to;
        Ok(())
    }

    /// Copy `buf` (unsynced, inside the preallocated space) to the segment's offset through
    /// its map, opening a new window when the current one does not hold it; `false` when the
    /// device must write it instead (mapping off, or this file gives no map).
    fn copy_mapped(&mut self) -> bool {
        if !self.mapped_writes || self.seg.unmappable || self.buf.is_empty() {
            return false;
        }
        if self.seg.offset == 0 && self.buf.len() as u64 == self.seg.head {
            // The segment's LINK alone (an explicit roll, once per memstore flush): one pwrite.
            // Mapping the segment for it would bar its synced groups from direct writes
            // (`WalDevice::mapping`).
            return false;
        }
        let at = self.seg.offset;
        if let Some(m) = &mut self.seg.map {
            if m.write(at, &self.buf) {
                StatsInner::add(&self.stats.mapped_groups, 1);
                return true;
            }
        }
        // The old window first: one window mapped at a time.
        self.seg.map = None;
        let len = self.seg.allocated.saturating_sub(at);
        let Ok(len) = usize::try_from(len) else {
            return false;
        };
        self.device.mapping(&self.seg.file);
        match self.seg.file.map_for_write(at, len) {
            None => self.seg.unmappable = true,
            Some(Err(e)) => {
                tracing::warn!(
                    error = %e,
                    path = %self.seg.path.display(),
                    "could not map the WAL segment; writing it instead"
                );
                self.seg.unmappable = true;
            }
            Some(Ok(mut m)) => {
                let ok = m.write(at, &self.buf);
                m.prefault_from(at + self.buf.len() as u64);
                self.seg.map = Some(m);
                if ok {
                    StatsInner::add(&self.stats.mapped_groups, 1);
                    return true;
                }
            }
        }
        false
    }

    /// Frame the segment's LINK ahead of its first group's records, if not written yet.
    fn frame_link(&mut self) {
        if let Some((previous, end)) = self.seg.pending_link.take() {
            encode_link(self.seg.number, previous, end, &mut self.buf);
        }
    }

    /// Finish the current segment (written and synced) and switch to a new one. Returns the seq
    /// now known durable if a sync happened.
    fn roll(&mut self) -> Result<Option<u64>> {
        let had_unsynced = self.seg.dirty || !self.buf.is_empty();
        self.flush(true)?;
        let mut next =
            create_segment(&*self.fs, &self.dir, self.seg.number + 1, self.segment_size)?;
        next.link_to(self.seg.number, self.seg.offset);
        tracing::debug!(segment = next.number, "WAL segment rolled");
        self.seg = next;
        self.frame_link();
        self.stats
            .current_segment
            .store(self.seg.number, Ordering::Relaxed);
        Ok(had_unsynced.then_some(self.last_written_seq))
    }
}
