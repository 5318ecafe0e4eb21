//! The write path: resolve families and timestamps, wait out a stall, log to the WAL, insert
//! into the memstores, publish the batch to readers.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cellar_format::CellType;

use super::mutation::{DeleteOp, Mutation, PendingCell};
use super::options::WriteOptions;
use super::read::table_info;
use super::sv::{SuperVersion, TableInfo};
use super::DbInner;
use crate::batch::{self, MutationRef};
use crate::error::{Error, Poison, Result};
use crate::read::query::Get;
use crate::schema::TableName;
use crate::types::{FamilyId, SeqNo, Timestamp, LATEST_TIMESTAMP};
use crate::wal::{AppendError, Durability};

/// A cell for [`DbInner::put_cell`], borrowed.
#[derive(Debug, Clone, Copy)]
pub(super) struct CellPut<'a> {
    pub row: &'a [u8],
    pub family: &'a str,
    pub qualifier: &'a [u8],
    pub value: &'a [u8],
}

/// Strength order of durability levels (a database-wide floor raises a write to it).
fn rank(d: Durability) -> u8 {
    match d {
        Durability::SkipWal => 0,
        Durability::AsyncWal => 1,
        Durability::SyncWal => 2,
        Durability::FsyncWal => 3,
    }
}

impl DbInner {
    /// Apply a batch: lock its rows (see `rowlock`), then [`DbInner::write_locked`].
    pub(super) fn write(
        &self,
        items: &[(&TableName, &Mutation)],
        opts: WriteOptions,
    ) -> Result<SeqNo> {
        self.check_poisoned()?;
        if items.is_empty() {
            return Err(Error::InvalidArgument("empty write".into()));
        }
        // Stall before locking: a writer held back by flushes then blocks no other writer
        // whose rows share its stripes.
        self.stall_if_needed()?;
        // Held until the batch is visible (write_locked returns after `wait_visible`), so the
        // next holder of these rows reads this batch.
        let _rows = self.row_locks.lock(items.iter().map(|(_, m)| m.row()));
        self.write_locked(items, opts)
    }

    /// Apply a batch whose rows the caller has locked (`self.row_locks`) and holds until this
    /// returns; returns once the batch is visible. The caller stalls (`stall_if_needed`)
    /// before locking.
    pub(super) fn write_locked(
        &self,
        items: &[(&TableName, &Mutation)],
        opts: WriteOptions,
    ) -> Result<SeqNo> {
        self.check_poisoned()?;
        if items.is_empty() {
            return Err(Error::InvalidArgument("empty write".into()));
        }
        self.apply_write(opts, |sv, now| self.resolve(sv, items, now))
    }

    /// One put of one cell at the current time from borrowed bytes
    /// ([`Table::put_cell_with`](crate::Table::put_cell_with)): [`DbInner::write`] of
    /// `Put::new(row).add(family, qualifier, value)` without building the put, so without its
    /// four allocations (callgrind: 8.5% of a single-cell put's instructions).
    pub(super) fn put_cell(
        &self,
        table: &TableName,
        cell: CellPut<'_>,
        opts: WriteOptions,
    ) -> Result<SeqNo> {
        self.check_poisoned()?;
        self.stall_if_needed()?;
        let _row = self.row_locks.lock([cell.row]);
        self.check_poisoned()?;
        self.apply_write(opts, |sv, now| {
            let t = table_info(sv, table)?;
            let mut out = Batch::default();
            out.push(&MutationRef {
                family: family_id(t, cell.family)?,
                row: cell.row,
                qualifier: cell.qualifier,
                timestamp: now,
                cell_type: CellType::Put,
                value: cell.value,
                tags: &[],
            })?;
            Ok((out.payload, out.user_bytes))
        })
    }

    /// Log and apply the batch `resolve` encodes (its payload and user bytes) over the
    /// current super-version at time `now`; returns once the batch is visible. The caller
    /// holds the batch's row locks.
    fn apply_write(
        &self,
        opts: WriteOptions,
        resolve: impl FnOnce(&SuperVersion, Timestamp) -> Result<(Vec<u8>, usize)>,
    ) -> Result<SeqNo> {
        let mut d = opts.durability.unwrap_or(self.opts.default_durability);
        if rank(self.opts.min_durability) > rank(d) {
            d = self.opts.min_durability;
        }
        let now = self.opts.clock.now_ms();
        let (seq, bytes) = {
            let _shared = self.switch.shared();
            let sv = self.sv();
            let (payload, bytes) = resolve(&sv, now)?;
            // The memstore takes the batch from the very bytes the WAL logs (as a replay
            // does), shared instead of copied into owned mutations and a second buffer.
            let payload = Arc::new(payload);
            let logged_payload = payload.clone();
            let vis = self.visibility.clone();
            let apply = move |seq| {
                insert_batch(&sv, &payload, seq)?;
                vis.complete(seq);
                Ok(())
            };
            let logged = match d {
                // A waiting writer's group leader applies the batch (see
                // `wal::commit::Apply`): the writer wakes once, done.
                Durability::SyncWal | Durability::FsyncWal => {
                    self.wal.append_applied(logged_payload, d, apply)
                }
                Durability::SkipWal | Durability::AsyncWal => self
                    .wal
                    .append_shared(logged_payload, d)
                    .map_err(AppendError::Wal)
                    .and_then(|seq| apply(seq).map(|()| seq).map_err(AppendError::Apply)),
            };
            let seq = match logged {
                Ok(s) => s,
                Err(AppendError::Wal(e)) => {
                    // The caller gets the WAL's error (`NoSpace` for the group that hit a
                    // full disk); the database takes the WAL's poison with its cause.
                    if let Some(p) = self.wal.poison() {
                        self.poison(p);
                    }
                    return Err(e);
                }
                Err(AppendError::Apply(e)) => {
                    // Part of the batch is in the memstore and all of it in the WAL: the
                    // seq never completes, so no reader sees the torn part, and a reopen
                    // replays the batch whole into a fresh memstore.
                    self.poison(Poison::from_error("memstore insert failed", &e));
                    return Err(e);
                }
            };
            if d == Durability::SkipWal {
                self.unlogged.store(true, Ordering::Release);
            }
            (seq, bytes)
        };
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .user_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        if self.sv().memstore_bytes().0 >= self.opts.write_buffer_size {
            self.request_switch();
        }
        self.visibility.wait_visible(seq)?;
        Ok(seq)
    }

    /// Turn API mutations into the batch payload (`batch`, version 2) and its user bytes:
    /// tables and families resolved to ids, "latest" timestamps to `now`, a whole-row delete
    /// to one DeleteFamily per family, and a newest-version delete to the newest visible
    /// version's timestamp. Every mutation is checked against the cell limits; any error
    /// fails the whole batch before anything is logged.
    fn resolve(
        &self,
        sv: &SuperVersion,
        items: &[(&TableName, &Mutation)],
        now: Timestamp,
    ) -> Result<(Vec<u8>, usize)> {
        let mut out = Batch::default();
        for (table, m) in items {
            let t = table_info(sv, table)?;
            match m {
                Mutation::Put(p) => {
                    if p.cells.is_empty() {
                        return Err(Error::InvalidArgument(
                            "a put needs at least one cell".into(),
                        ));
                    }
                    let tags = p
                        .ttl_ms
                        .map(crate::tags::encode_cell_ttl)
                        .unwrap_or_default();
                    for c in &p.cells {
                        out.push(&cell(t, &p.row, c, now, &tags)?)?;
                    }
                }
                Mutation::Delete(d) => self.resolve_delete(sv, t, &d.row, &d.ops, now, &mut out)?,
            }
        }
        Ok((out.payload, out.user_bytes))
    }

    /// Turn one delete into markers. A `DeleteOp::Version` at LATEST (HBase's `addColumn`
    /// without a timestamp) becomes a Delete at the newest visible version's timestamp, found
    /// with a Get when the write is applied. That is race-free: the write holds the row's lock
    /// (`rowlock`), so every earlier write to the row is visible and no later one can slip in
    /// between the Get and the marker (see [`DbInner::newest_version_ts`]).
    #[allow(clippy::too_many_arguments, reason = "internal helper of resolve")]
    fn resolve_delete(
        &self,
        sv: &SuperVersion,
        t: &TableInfo,
        row: &[u8],
        ops: &[DeleteOp],
        now: Timestamp,
        out: &mut Batch,
    ) -> Result<()> {
        let at = |ts: Timestamp| if ts == LATEST_TIMESTAMP { now } else { ts };
        let whole_row = [DeleteOp::Row {
            ts: LATEST_TIMESTAMP,
        }];
        let ops = if ops.is_empty() { &whole_row[..] } else { ops };
        for op in ops {
            let (family, qualifier, ts, ty) = match op {
                DeleteOp::Row { ts } => {
                    for f in &t.families {
                        out.push(&marker(f.id, row, &[], at(*ts), CellType::DeleteFamily))?;
                    }
                    continue;
                }
                DeleteOp::Family { family, ts } => {
                    (family, &[][..], at(*ts), CellType::DeleteFamily)
                }
                DeleteOp::FamilyVersion { family, ts } => {
                    if *ts == LATEST_TIMESTAMP {
                        return Err(Error::InvalidArgument(
                            "a family-version delete needs a timestamp".into(),
                        ));
                    }
                    (family, &[][..], *ts, CellType::DeleteFamilyVersion)
                }
                DeleteOp::Columns {
                    family,
                    qualifier,
                    ts,
                } => (
                    family,
                    qualifier.as_slice(),
                    at(*ts),
                    CellType::DeleteColumn,
                ),
                DeleteOp::Version {
                    family,
                    qualifier,
                    ts,
                } => {
                    let ts = if *ts == LATEST_TIMESTAMP {
                        self.newest_version_ts(sv, t, row, family, qualifier)?
                            .unwrap_or(now)
                    } else {
                        *ts
                    };
                    (family, qualifier.as_slice(), ts, CellType::Delete)
                }
            };
            out.push(&marker(family_id(t, family)?, row, qualifier, ts, ty))?;
        }
        Ok(())
    }

    /// Timestamp of the newest visible version of a column (HBase resolves a delete of the
    /// latest version this way when it is applied).
    ///
    /// Race-free: the write resolving it holds the row's lock (`rowlock`), taken after every
    /// earlier write to the row became visible and before any later one can take a sequence
    /// number. So the version found is the newest one at the delete's place in sequence
    /// order, and a put racing with the delete is either older (found and deleted if newest)
    /// or newer (untouched) — never a version other than the newest one seen.
    fn newest_version_ts(
        &self,
        _sv: &SuperVersion,
        t: &TableInfo,
        row: &[u8],
        family: &str,
        qualifier: &[u8],
    ) -> Result<Option<Timestamp>> {
        family_id(t, family)?;
        let get = Get::new(row.to_vec()).column(family, qualifier.to_vec());
        let r = self.get(&t.descriptor.name, &get)?;
        Ok(r.and_then(|row| row.cells().first().map(|c| c.timestamp)))
    }

    /// Slow writers down, then stop them, while flushes are behind (RELIABILITY: never grow
    /// without bound). Each stall is counted, timed and logged with its cause.
    ///
    /// A writer stopped while flushes fail for lack of space gets `NoSpace` instead of waiting
    /// for space that may never come back.
    pub(super) fn stall_if_needed(&self) -> Result<()> {
        let mut stalled_since: Option<Instant> = None;
        let flush_failures = self.counters.flush_failures.load(Ordering::Acquire);
        loop {
            self.check_poisoned()?;
            let (active, frozen) = self.sv().memstore_bytes();
            let total = active + frozen;
            let gens = self.frozen_gens.load(Ordering::Acquire);
            let stop = if gens >= self.opts.max_frozen_generations {
                Some("too many memstore generations waiting for flush")
            } else if total >= self.opts.stop_write_buffer_size {
                Some("memstores over the stop limit")
            } else {
                None
            };
            match stop {
                Some(cause) => {
                    if stalled_since.is_none() {
                        stalled_since = Some(Instant::now());
                        self.counters.stalls.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            cause,
                            total_bytes = total,
                            generations = gens,
                            "write stalled"
                        );
                        if active > 0 && gens < self.opts.max_frozen_generations {
                            self.request_switch();
                        }
                    }
                    self.flush_no_space_since(flush_failures)?;
                    let mut g = self.frozen.lock();
                    self.flush_cv.wait_for(&mut g, Duration::from_millis(50));
                }
                None => {
                    if self.compaction_stall(&mut stalled_since) {
                        continue;
                    }
                    if let Some(since) = stalled_since {
                        let us = since.elapsed().as_micros() as u64;
                        self.counters.stall_micros.fetch_add(us, Ordering::Relaxed);
                        tracing::info!(stalled_us = us, "write resumed");
                    } else if total >= self.opts.slowdown_write_buffer_size {
                        self.counters.slowdowns.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    return Ok(());
                }
            }
        }
    }
}

/// A batch payload being encoded, and the user bytes of its mutations.
#[derive(Default)]
struct Batch {
    payload: Vec<u8>,
    user_bytes: usize,
}

impl Batch {
    /// Check `m` against the cell limits and append it.
    fn push(&mut self, m: &MutationRef<'_>) -> Result<()> {
        batch::validate_ref(m)?;
        self.payload.reserve(batch::encoded_len_bound(m));
        batch::encode_one(&mut self.payload, m);
        self.user_bytes += m.row.len() + m.qualifier.len() + m.value.len();
        Ok(())
    }
}

/// Insert a logged batch payload into the memstores of `sv` under `seq`.
fn insert_batch(sv: &SuperVersion, payload: &[u8], seq: SeqNo) -> Result<()> {
    for m in batch::mutations_v2(payload) {
        // The payload was encoded by `resolve` a moment ago: it cannot fail to decode.
        let m = m.map_err(|what| {
            Error::InvalidArgument(format!(
                "batch payload of seq {seq} does not decode: {what}"
            ))
        })?;
        // `resolve` only returns families present in this super-version.
        if let (Some(mems), Some(desc)) = (sv.mems.get(&m.family), sv.families.get(&m.family)) {
            mems.active
                .insert(&m.key(desc.name.as_bytes(), seq), m.value, m.tags)?;
        }
    }
    Ok(())
}

/// The id of `t`'s family `family`, or `FamilyNotFound`.
fn family_id(t: &TableInfo, family: &str) -> Result<FamilyId> {
    t.family(family)
        .map(|f| f.id)
        .ok_or_else(|| family_not_found(t, family))
}

fn family_not_found(t: &TableInfo, family: &str) -> Error {
    Error::FamilyNotFound {
        table: t.descriptor.name.to_string(),
        family: family.to_owned(),
    }
}

fn cell<'a>(
    t: &TableInfo,
    row: &'a [u8],
    c: &'a PendingCell,
    now: Timestamp,
    tags: &'a [u8],
) -> Result<MutationRef<'a>> {
    Ok(MutationRef {
        family: family_id(t, &c.family)?,
        row,
        qualifier: &c.qualifier,
        timestamp: if c.timestamp == LATEST_TIMESTAMP {
            now
        } else {
            c.timestamp
        },
        cell_type: c.cell_type,
        value: &c.value,
        tags,
    })
}

fn marker<'a>(
    family: u32,
    row: &'a [u8],
    qualifier: &'a [u8],
    ts: Timestamp,
    ty: CellType,
) -> MutationRef<'a> {
    MutationRef {
        family,
        row,
        qualifier,
        timestamp: ts,
        cell_type: ty,
        value: &[],
        tags: &[],
    }
}
