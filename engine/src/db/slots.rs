//! Feed slots: named change-feed positions kept across restarts, each holding the WAL from
//! where its consumer stands (SPEC.md §16.9) — PostgreSQL's replication slots, for the change
//! feed of `changes`.
//!
//! ```text
//! {dir}/FEED_SLOTS       every slot; the whole list, rewritten and renamed into place
//! {dir}/FEED_SLOTS.part  the next list while it is written
//!
//! FEED_SLOTS := record (manifest framing, §17.2: segment 0, seq 1) whose payload is
//!               format varint32 = 1 | count varint32 | slot * count
//! slot       := name_len varint32 | name (table-name rules) | acked varint64
//!               | segment varint64 | flags u8 (bit 0: lost; the others 0)
//! ```
//!
//! Why it is built this way:
//! - A live [`ChangeFeed`]'s pin lasts as long as the process; a consumer that reconnects
//!   after a restart (its own or the database's) needs the log held for it meanwhile, and a
//!   byte budget (`WalOptions::retain_bytes`) only guesses how long it may be away. A slot
//!   holds exactly what its consumer has yet to confirm.
//! - A slot stores `acked` (every batch at or below it is applied by the consumer) and
//!   `segment`, with the invariant: every logged batch above `acked` is in `segment` or a
//!   later one. Its pin holds `segment`, so the invariant keeps holding. Reading the feed
//!   from `segment` therefore needs no search and no gap check: a gap of `SkipWal` or ingested
//!   seqs cannot make a slot's feed look incomplete, as it can a plain `changes_since`.
//! - The file is written before any pin moves (an ack, a drop): a crash leaves either the
//!   old list, whose segments are still all on disk, or the new one. The open reads it before
//!   the WAL releases anything.
//! - Checkpoints and backups do not copy it: a copy is a new database, with consumers of its
//!   own.
//! - A consumer that stops for good would hold the log forever. `WalOptions::slot_max_bytes`
//!   bounds what one slot may hold: past it the slot is marked lost (durably) and lets go;
//!   its feed then fails with [`Error::FeedSlotLost`].

use std::collections::BTreeMap;
use std::path::Path;

use cellar_format::coding::{put_varint32, put_varint64, Cursor};

use super::changes::{ChangeFeed, ChangeFeedOptions};
use super::{framed, Db, DbInner};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::schema::validate_name;
use crate::types::SeqNo;
use crate::wal::{self, Wal, WalPin};

/// The feed slots' file, in the database directory.
pub const FEED_SLOTS: &str = "FEED_SLOTS";
/// The file while a new version is written.
const FEED_SLOTS_PART: &str = "FEED_SLOTS.part";
/// The layout this build writes and reads.
const FORMAT: u32 = 1;
/// `flags` bit: the slot is lost.
const LOST: u8 = 1;

/// One feed slot, as [`Db::feed_slots`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FeedSlotInfo {
    /// The slot's name.
    pub name: String,
    /// The last seq its consumer confirmed ([`Db::ack_feed_slot`]); its feed starts after it.
    pub acked: SeqNo,
    /// The WAL segment it holds (and every later one).
    pub segment: u64,
    /// The slot gave its segments up ([`Error::FeedSlotLost`]).
    pub lost: bool,
    /// Bytes of the WAL segments from its segment up to the live one (not counted): what
    /// [`crate::wal::WalOptions::slot_max_bytes`] bounds. 0 once lost.
    pub held_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    name: String,
    acked: SeqNo,
    segment: u64,
    lost: bool,
}

fn encode(slots: &[Stored]) -> Vec<u8> {
    let mut payload = Vec::new();
    put_varint32(&mut payload, FORMAT);
    put_varint32(&mut payload, slots.len() as u32);
    for s in slots {
        put_varint32(&mut payload, s.name.len() as u32);
        payload.extend_from_slice(s.name.as_bytes());
        put_varint64(&mut payload, s.acked);
        put_varint64(&mut payload, s.segment);
        payload.push(if s.lost { LOST } else { 0 });
    }
    framed::encode(&payload)
}

fn decode(path: &Path, data: &[u8]) -> Result<Vec<Stored>> {
    let payload = framed::payload(path, data, "feed slots")?;
    let at = framed::payload_at();
    let bad = |offset: usize, what: String| Error::Corruption {
        file: path.to_owned(),
        offset: offset as u64,
        what: format!("feed slots: {what}"),
    };
    let mut c = Cursor::new(payload);
    let fail = |c: &Cursor<'_>, what: String| bad(at + c.position(), what);
    let format = c.varint32("format").map_err(|m| fail(&c, m.0))?;
    if format != FORMAT {
        return Err(fail(
            &c,
            format!("format {format}, this build reads {FORMAT}"),
        ));
    }
    let count = c.varint32("count").map_err(|m| fail(&c, m.0))?;
    let mut out: Vec<Stored> = Vec::new();
    for _ in 0..count {
        let name = c.len_prefixed("name").map_err(|m| fail(&c, m.0))?;
        let name = std::str::from_utf8(name)
            .ok()
            .filter(|n| validate_name("feed slot", n).is_ok())
            .ok_or_else(|| fail(&c, format!("bad slot name {name:?}")))?
            .to_owned();
        if out.iter().any(|s| s.name == name) {
            return Err(fail(&c, format!("slot {name} twice")));
        }
        let acked = c.varint64("acked").map_err(|m| fail(&c, m.0))?;
        let segment = c.varint64("segment").map_err(|m| fail(&c, m.0))?;
        let flags = c.u8("flags").map_err(|m| fail(&c, m.0))?;
        if flags & !LOST != 0 {
            return Err(fail(&c, format!("unknown flags {flags:#04x}")));
        }
        out.push(Stored {
            name,
            acked,
            segment,
            lost: flags & LOST != 0,
        });
    }
    if c.remaining() != 0 {
        return Err(fail(
            &c,
            format!("{} bytes after the last slot", c.remaining()),
        ));
    }
    Ok(out)
}

/// The slots stored in database directory `dir` (none without a file).
fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<Stored>> {
    let path = dir.join(FEED_SLOTS);
    match framed::read(fs, &path, "reading the feed slots", "feed slots file")? {
        Some(data) => decode(&path, &data),
        None => Ok(Vec::new()),
    }
}

/// Replace the stored list with `slots`: written beside, synced, renamed, directory synced.
fn write(fs: &dyn FileSystem, dir: &Path, slots: &[Stored]) -> Result<()> {
    let part = dir.join(FEED_SLOTS_PART);
    // Left by a crash while writing: never renamed, so nothing refers to it.
    match fs.remove(&part) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(&part, "removing a stale feed slots file", e)),
    }
    let file = fs
        .create(&part)
        .map_err(|e| Error::io(&part, "creating the feed slots file", e))?;
    file.write_all_at(&encode(slots), 0)
        .and_then(|()| file.sync_data())
        .map_err(|e| Error::io(&part, "writing the feed slots file", e))?;
    drop(file);
    crate::kill_point!("feed_slots.before_rename");
    let path = dir.join(FEED_SLOTS);
    fs.rename(&part, &path)
        .and_then(|()| fs.sync_dir(dir))
        .map_err(|e| Error::io(&path, "installing the feed slots file", e))
}

/// Each WAL segment's number and length (0 where it cannot be read: the sizes only report
/// and bound, never decide what a reader needs).
fn segment_sizes(fs: &dyn FileSystem, wal_dir: &Path) -> Result<Vec<(u64, u64)>> {
    Ok(wal::list_segments(fs, wal_dir)?
        .into_iter()
        .map(|(n, path)| (n, fs.open(&path).and_then(|f| f.len()).unwrap_or(0)))
        .collect())
}

/// Bytes of the segments from `from` up to, not including, `current`.
fn held(sizes: &[(u64, u64)], from: u64, current: u64) -> u64 {
    sizes
        .iter()
        .filter(|(n, _)| (from..current).contains(n))
        .map(|(_, len)| len)
        .sum()
}

/// Every feed slot stored in database directory `dir`, read without opening the database
/// (`cellar verify`): `held_bytes` as the WAL directory `wal_dir` stands, counted up to its
/// newest segment.
pub fn read_feed_slots(
    fs: &dyn FileSystem,
    dir: &Path,
    wal_dir: &Path,
) -> Result<Vec<FeedSlotInfo>> {
    let stored = read(fs, dir)?;
    let sizes = segment_sizes(fs, wal_dir)?;
    let newest = sizes.last().map_or(0, |(n, _)| *n);
    Ok(stored
        .into_iter()
        .map(|s| FeedSlotInfo {
            held_bytes: if s.lost {
                0
            } else {
                held(&sizes, s.segment, newest)
            },
            name: s.name,
            acked: s.acked,
            segment: s.segment,
            lost: s.lost,
        })
        .collect())
}

/// The slots of an open database.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    map: BTreeMap<String, Slot>,
}

#[derive(Debug)]
struct Slot {
    stored: Stored,
    /// Holds `stored.segment`; none once lost.
    pin: Option<WalPin>,
}

impl Slots {
    /// Read the stored slots and pin their segments: at open, after the WAL opened and before
    /// it releases any segment. A slot whose segment is gone is marked lost (the file is
    /// rewritten): the database opens; the slot's consumer learns it at its next call.
    pub(crate) fn load(fs: &dyn FileSystem, dir: &Path, wal: &Wal) -> Result<Slots> {
        let stored = read(fs, dir)?;
        if stored.is_empty() {
            return Ok(Slots::default());
        }
        let present: Vec<u64> = wal::list_segments(fs, wal.dir())?
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let mut map = BTreeMap::new();
        let mut changed = false;
        for mut s in stored {
            if !s.lost && !present.contains(&s.segment) {
                tracing::error!(
                    slot = %s.name,
                    segment = s.segment,
                    "a feed slot's WAL segment is missing: the slot is lost"
                );
                s.lost = true;
                changed = true;
            }
            let pin = (!s.lost).then(|| wal.pin(s.segment).quiet_on_drop());
            map.insert(s.name.clone(), Slot { stored: s, pin });
        }
        let slots = Slots { map };
        if changed {
            write(fs, dir, &slots.stored())?;
        }
        Ok(slots)
    }

    fn stored(&self) -> Vec<Stored> {
        self.map.values().map(|s| s.stored.clone()).collect()
    }

    fn get_live(&mut self, name: &str) -> Result<&mut Slot> {
        let slot = self
            .map
            .get_mut(name)
            .ok_or_else(|| Error::FeedSlotNotFound(name.to_owned()))?;
        if slot.stored.lost {
            return Err(Error::FeedSlotLost(name.to_owned()));
        }
        Ok(slot)
    }
}

impl DbInner {
    /// Mark lost every slot holding more than `WalOptions::slot_max_bytes` (after segments
    /// were released). A failure to record it leaves the slots holding: logged, not returned,
    /// since the flush that calls this succeeded.
    pub(super) fn enforce_slot_limit(&self) {
        let max = self.opts.wal.slot_max_bytes;
        if max == 0 {
            return;
        }
        let mut slots = self.slots.lock();
        if slots.map.values().all(|s| s.stored.lost) {
            return;
        }
        let sizes = match segment_sizes(&*self.fs, self.wal.dir()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "listing the WAL for the feed slots' limit");
                return;
            }
        };
        let current = self.wal.current_segment();
        let over: Vec<(String, u64)> = slots
            .map
            .iter()
            .filter(|(_, s)| !s.stored.lost)
            .map(|(n, s)| (n.clone(), held(&sizes, s.stored.segment, current)))
            .filter(|(_, h)| *h > max)
            .collect();
        if over.is_empty() {
            return;
        }
        let mut next = slots.stored();
        for s in &mut next {
            if over.iter().any(|(n, _)| *n == s.name) {
                s.lost = true;
            }
        }
        if let Err(e) = write(&*self.fs, &self.dir, &next) {
            tracing::warn!(error = %e, "recording lost feed slots failed; they keep holding");
            return;
        }
        for (name, held) in over {
            tracing::warn!(
                slot = %name,
                held,
                max,
                "feed slot lost: its consumer fell further behind than slot_max_bytes"
            );
            if let Some(s) = slots.map.get_mut(&name) {
                s.stored.lost = true;
                if let Some(pin) = s.pin.take() {
                    pin.release();
                }
            }
        }
    }
}

impl Db {
    /// Create a feed slot: a named position in the change feed, kept across restarts, that
    /// holds the WAL from there on until its consumer confirms batches with
    /// [`Db::ack_feed_slot`]. It starts after `since`, as [`Db::changes_since`] would (the
    /// same `ChangesUnavailable` and `InvalidArgument` refusals); read it with
    /// [`Db::feed_slot_changes`].
    ///
    /// A slot holds log segments a flush would otherwise remove, for as long as its consumer
    /// lags: bound it with [`crate::wal::WalOptions::slot_max_bytes`], and drop slots no
    /// longer read.
    ///
    /// ```
    /// use cellar::{Db, FamilyDescriptor, Options, Put, TableDescriptor};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let db = Db::open(tmp.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// db.create_feed_slot("replica", db.flushed_seq())?;
    /// let seq = db.table("t")?.put(Put::new("r").add_at("cf", "q", 7, "v"))?;
    /// db.flush()?; // the slot keeps the flushed log
    /// let mut feed = db.feed_slot_changes("replica", Default::default())?;
    /// let batch = feed.next_batch()?.unwrap();
    /// assert_eq!(batch.seq, seq);
    /// // ... applied on the replica ...
    /// db.ack_feed_slot("replica", batch.seq)?; // the log up to here may go now
    /// # Ok::<(), cellar::Error>(())
    /// ```
    pub fn create_feed_slot(&self, name: &str, since: SeqNo) -> Result<()> {
        validate_name("feed slot", name)?;
        let inner = &self.inner;
        let mut slots = inner.slots.lock();
        if slots.map.contains_key(name) {
            return Err(Error::FeedSlotExists(name.to_owned()));
        }
        // Everything held while the start is searched and the slot recorded.
        let mut pin = inner.wal.pin(0);
        let (segment, _) = self.feed_start(since)?;
        pin.move_to(segment);
        let stored = Stored {
            name: name.to_owned(),
            acked: since,
            segment,
            lost: false,
        };
        let mut next = slots.stored();
        next.push(stored.clone());
        write(&*inner.fs, &inner.dir, &next)?;
        slots.map.insert(
            name.to_owned(),
            Slot {
                stored,
                pin: Some(pin.quiet_on_drop()),
            },
        );
        Ok(())
    }

    /// A feed of every batch after the slot's acked seq (see [`Db::changes_since_with`] for
    /// the options and what the feed hands out). Reading moves the slot nowhere: only
    /// [`Db::ack_feed_slot`] does, so a consumer that fails before its ack reads the same
    /// batches again.
    pub fn feed_slot_changes(&self, name: &str, opts: ChangeFeedOptions) -> Result<ChangeFeed> {
        let table = opts.check()?;
        let inner = &self.inner;
        let (pin, number, acked) = {
            let mut slots = inner.slots.lock();
            let slot = slots.get_live(name)?;
            // Taken under the slots' lock: the slot's own pin cannot move past it meanwhile.
            let pin = inner.wal.pin(slot.stored.segment);
            (pin, slot.stored.segment, slot.stored.acked)
        };
        let path = wal::list_segments(&*inner.fs, inner.wal.dir())?
            .into_iter()
            .find(|(n, _)| *n == number)
            .map(|(_, p)| p)
            .ok_or_else(|| Error::Corruption {
                file: inner.wal.dir().to_path_buf(),
                offset: 0,
                what: format!("feed slot {name} holds WAL segment {number}, which is missing"),
            })?;
        self.open_feed(pin, number, path, acked, opts, table)
    }

    /// The slot's consumer has applied every batch at or below `seq`: recorded durably, then
    /// the log segments that hold only such batches are let go. An ack at or below the
    /// slot's position changes nothing (a consumer repeating itself after a restart);
    /// `InvalidArgument` for a seq beyond every seq given out.
    pub fn ack_feed_slot(&self, name: &str, seq: SeqNo) -> Result<()> {
        let inner = &self.inner;
        let mut slots = inner.slots.lock();
        let slot = slots.get_live(name)?;
        if seq <= slot.stored.acked {
            return Ok(());
        }
        let given = inner.wal.watermarks().0.max(inner.visibility.read_point());
        if seq > given {
            return Err(Error::InvalidArgument(format!(
                "feed slot {name}: ack of seq {seq}, but no seq above {given} has been given out"
            )));
        }
        // The last segment whose first batch is at or below seq + 1: the ones before it hold
        // only batches at or below seq (seqs increase through the log).
        let mut segment = slot.stored.segment;
        for (n, path) in wal::list_segments(&*inner.fs, inner.wal.dir())? {
            if n <= slot.stored.segment {
                continue;
            }
            match self.first_seq(n, &path)? {
                Some(first) if first <= seq.saturating_add(1) => segment = n,
                Some(_) => break,
                None => {}
            }
        }
        let mut next = slots.stored();
        for s in &mut next {
            if s.name == name {
                s.acked = seq;
                s.segment = segment;
            }
        }
        write(&*inner.fs, &inner.dir, &next)?;
        let slot = slots.get_live(name)?;
        slot.stored.acked = seq;
        slot.stored.segment = segment;
        if let Some(pin) = &mut slot.pin {
            pin.move_to(segment);
        }
        Ok(())
    }

    /// Remove a slot; the log it held goes at once (what no other slot, feed or budget keeps).
    /// Works on lost slots too.
    pub fn drop_feed_slot(&self, name: &str) -> Result<()> {
        let inner = &self.inner;
        let mut slots = inner.slots.lock();
        if !slots.map.contains_key(name) {
            return Err(Error::FeedSlotNotFound(name.to_owned()));
        }
        let next: Vec<Stored> = slots
            .stored()
            .into_iter()
            .filter(|s| s.name != name)
            .collect();
        write(&*inner.fs, &inner.dir, &next)?;
        if let Some(pin) = slots.map.remove(name).and_then(|s| s.pin) {
            pin.release();
        }
        Ok(())
    }

    /// Every feed slot, by name.
    pub fn feed_slots(&self) -> Result<Vec<FeedSlotInfo>> {
        self.inner.slot_infos()
    }
}

impl DbInner {
    pub(super) fn slot_infos(&self) -> Result<Vec<FeedSlotInfo>> {
        let slots = self.slots.lock();
        if slots.map.is_empty() {
            return Ok(Vec::new());
        }
        let sizes = segment_sizes(&*self.fs, self.wal.dir())?;
        let current = self.wal.current_segment();
        Ok(slots
            .map
            .values()
            .map(|s| FeedSlotInfo {
                name: s.stored.name.clone(),
                acked: s.stored.acked,
                segment: s.stored.segment,
                lost: s.stored.lost,
                held_bytes: if s.stored.lost {
                    0
                } else {
                    held(&sizes, s.stored.segment, current)
                },
            })
            .collect())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn sample() -> Vec<Stored> {
        vec![
            Stored {
                name: "a".into(),
                acked: 0,
                segment: 1,
                lost: false,
            },
            Stored {
                name: "replica-2.x".into(),
                acked: u64::MAX,
                segment: 1 << 40,
                lost: true,
            },
        ]
    }

    #[test]
    fn round_trips() {
        let p = Path::new("FEED_SLOTS");
        assert_eq!(decode(p, &encode(&[])).unwrap(), []);
        assert_eq!(decode(p, &encode(&sample())).unwrap(), sample());
    }

    /// Every byte flip and every truncation is refused (the checksum covers it all), never a
    /// panic or a different list.
    #[test]
    fn damage_is_corruption() {
        let p = Path::new("FEED_SLOTS");
        let data = encode(&sample());
        for i in 0..data.len() {
            let mut d = data.clone();
            d[i] ^= 0x20;
            assert!(
                matches!(decode(p, &d), Err(Error::Corruption { .. })),
                "flip at {i}"
            );
            assert!(matches!(
                decode(p, &data[..i]),
                Err(Error::Corruption { .. })
            ));
        }
    }

    /// A well-framed payload with a bad field: refused with the field named.
    #[test]
    fn bad_fields_are_named() {
        let p = Path::new("FEED_SLOTS");
        let frame = framed::encode;
        let cases: [(&[u8], &str); 5] = [
            (&[2, 0], "format 2"),
            (&[1, 1, 2, b'.', b'a', 0, 1, 0], "bad slot name"),
            (&[1, 1, 1, b'a', 0, 1, 2], "unknown flags"),
            (&[1, 2, 1, b'a', 0, 1, 0, 1, b'a', 0, 1, 0], "twice"),
            (&[1, 0, 9], "after the last slot"),
        ];
        for (payload, want) in cases {
            let e = decode(p, &frame(payload)).unwrap_err().to_string();
            assert!(e.contains(want), "{e} lacks {want}");
        }
    }
}
