//! Row-range deletes (SPEC.md §13 rule 8, §16.10, §17.3, §20.2): `Table::delete_rows` masks
//! every row in `[start, stop)` as one DeleteFamily marker per row would, at the cost of one
//! logged record and one manifest edit, whatever the number of rows.
//!
//! Why it is built this way:
//! - The delete lives in the manifest, per family, not in files: reads find it in the
//!   super-version beside the files, so no HFile format change, no fragmenting across file
//!   boundaries, and a Get whose bloom filters skip every file still meets it. The price is
//!   that reads look the live deletes up (an index cut at their bounds, `read/range_index.rs`),
//!   so they are meant to be short-lived: one leaves with the compaction after which no file
//!   may hold a cell of it, or a major compaction (SPEC.md §20.2 rule 4).
//! - Write-ahead, like every write: the record is logged (`FsyncWal`) first, and its seq is
//!   the delete's; then the manifest edit. A crash between the two leaves the record in the
//!   log, and recovery adds what the manifest lacks. The record is also the change feed's
//!   (`SchemaChange::RowsDeleted`), so a replica always receives it.
//! - Both steps run under the exclusive switch gate: its seq sits between the writes before
//!   and after it, and no other edit comes between the record and the edit. The edit raises
//!   `last_seq` to the delete's seq, so recovery adds a logged delete exactly when its seq is
//!   above the manifest's `last_seq` (a delete a major compaction removed since is not
//!   brought back).

pub(super) use super::schema_feed::LoggedRangeDelete;
use super::sv::SuperVersion;
use super::{Db, DbInner, Table};
use crate::error::{Error, Result};
use crate::manifest::{ManifestState, VersionEdit};
use crate::schema::TableName;
use crate::types::{FamilyId, RangeDelete, SeqNo, Timestamp, LATEST_TIMESTAMP};
use crate::wal::Durability;
use cellar_format::cell::MAX_ROW_LEN;

/// A row-range delete to write ([`Table::delete_rows_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRows {
    start: Vec<u8>,
    stop: Vec<u8>,
    ts: Option<Timestamp>,
    families: Option<Vec<String>>,
}

impl DeleteRows {
    /// Every row in `[start, stop)`; an empty `stop` runs to the end of the table (and an empty
    /// `start` from its beginning). Every family, every cell at or below the current time.
    pub fn new(start: impl Into<Vec<u8>>, stop: impl Into<Vec<u8>>) -> Self {
        DeleteRows {
            start: start.into(),
            stop: stop.into(),
            ts: None,
            families: None,
        }
    }

    /// Cells at or below `ts` instead of the current time (HBase's delete timestamp: in classic
    /// mode, later writes with a timestamp at or below it are masked too).
    pub fn timestamp(mut self, ts: Timestamp) -> Self {
        self.ts = Some(ts);
        self
    }

    /// Only this family (call again for more); every family when never called.
    pub fn family(mut self, name: impl Into<String>) -> Self {
        self.families.get_or_insert_with(Vec::new).push(name.into());
        self
    }

    fn validate(&self) -> Result<()> {
        for (what, row) in [("start", &self.start), ("stop", &self.stop)] {
            if row.len() > MAX_ROW_LEN {
                return Err(Error::InvalidArgument(format!(
                    "delete_rows {what} row of {} bytes exceeds {MAX_ROW_LEN}",
                    row.len()
                )));
            }
        }
        if !self.stop.is_empty() && self.start >= self.stop {
            return Err(Error::InvalidArgument(
                "delete_rows needs start < stop (or an empty stop for the end of the table)".into(),
            ));
        }
        if self.ts == Some(LATEST_TIMESTAMP) {
            return Err(Error::InvalidArgument(
                "delete_rows timestamp u64::MAX is reserved (leave it unset for now)".into(),
            ));
        }
        Ok(())
    }
}

impl Table {
    /// Delete every row in `[start, stop)` (an empty `stop`: to the end of the table), in every
    /// family, at the current time: what one `deleteall` of each row would do, in one write
    /// that costs the same for one row or a billion. Durable (`FsyncWal`) when it returns;
    /// returns its seq. Raw reads do not show it (it is no cell); `Db::range_deletes` lists
    /// the live ones.
    pub fn delete_rows(&self, start: &[u8], stop: &[u8]) -> Result<SeqNo> {
        self.delete_rows_with(DeleteRows::new(start, stop))
    }

    /// [`Table::delete_rows`] with a timestamp or a choice of families.
    pub fn delete_rows_with(&self, d: DeleteRows) -> Result<SeqNo> {
        self.db.inner.delete_rows(&self.name, &d)
    }
}

impl Db {
    /// The live row-range deletes of `table`, per family name, in seq order. A major
    /// compaction removes those whose masked cells it dropped (SPEC.md §20.2).
    pub fn range_deletes(&self, table: &str) -> Result<Vec<(String, RangeDelete)>> {
        let name = TableName::parse(table)?;
        let m = self.inner.manifest.lock();
        let state = &m.1;
        let entry = state
            .table_by_name(&name)
            .ok_or_else(|| Error::TableNotFound(name.to_string()))?;
        let mut out = Vec::new();
        for (f, id) in entry.descriptor.families.iter().zip(&entry.family_ids) {
            for d in state.range_deletes(*id) {
                out.push((f.name.clone(), d.clone()));
            }
        }
        out.sort_by_key(|(_, d)| d.seq);
        Ok(out)
    }
}

impl DbInner {
    fn delete_rows(&self, table: &TableName, d: &DeleteRows) -> Result<SeqNo> {
        d.validate()?;
        self.check_poisoned()?;
        let ts = d.ts.unwrap_or_else(|| self.opts.clock.now_ms());
        let _w = self.switch.exclusive();
        let logged = {
            let m = self.manifest.lock();
            let entry =
                m.1.table_by_name(table)
                    .ok_or_else(|| Error::TableNotFound(table.to_string()))?;
            let all = entry.descriptor.families.iter().zip(&entry.family_ids);
            let families: Vec<(FamilyId, String)> = match &d.families {
                None => all.map(|(f, id)| (*id, f.name.clone())).collect(),
                Some(names) => {
                    let mut out = Vec::new();
                    for n in names {
                        let (f, id) = all.clone().find(|(f, _)| &f.name == n).ok_or_else(|| {
                            Error::FamilyNotFound {
                                table: table.to_string(),
                                family: n.clone(),
                            }
                        })?;
                        if !out.iter().any(|(i, _)| i == id) {
                            out.push((*id, f.name.clone()));
                        }
                    }
                    out
                }
            };
            LoggedRangeDelete {
                table: table.clone(),
                families,
                start: d.start.clone(),
                stop: d.stop.clone(),
                ts,
            }
        };
        let seq = match self.wal.append(&logged.encode(), Durability::FsyncWal) {
            Ok(seq) => seq,
            Err(e) => {
                if let Some(p) = self.wal.poison() {
                    self.poison(p);
                }
                return Err(e);
            }
        };
        // From here the delete is logged: an error leaves it to recovery (as a write whose
        // acknowledgement failed may still be replayed).
        crate::kill_point!("range_delete.after_log");
        let mut m = self.manifest.lock();
        let (man, state) = &mut *m;
        let edit = range_delete_edit(state, &logged, seq);
        if let Err(e) = man.log_and_apply(state, edit) {
            self.poison(
                man.poison_reason()
                    .cloned()
                    .unwrap_or_else(|| crate::Poison::from_error("logging a range delete", &e)),
            );
            return Err(e);
        }
        let mut sv = self.sv.write();
        *sv = std::sync::Arc::new(SuperVersion::build(state, Some(&sv)));
        drop((sv, m));
        // Every write before holds the gate's shared side until it is visible, so the read
        // point reaches this seq at once (the super-version holding the delete is installed
        // first: a reader takes the read point, then the super-version).
        self.visibility.complete(seq);
        Ok(seq)
    }
}

/// The edit adding `logged` at `seq` to the families of it still live in `state` and not yet
/// holding it (recovery's check; a fresh delete passes it whole).
pub(super) fn range_delete_edit(
    state: &ManifestState,
    logged: &LoggedRangeDelete,
    seq: SeqNo,
) -> VersionEdit {
    let range_deletes = logged
        .families
        .iter()
        .filter(|(id, _)| {
            // The edit sets `last_seq` to the delete's seq, and nothing else can raise it past
            // the seq before the edit is made (the gate is held; a failed edit poisons the
            // manifest): at or below it, the edit was made, and the delete may since have been
            // removed by a major compaction.
            seq > state.last_seq()
                && state.family(*id).is_some()
                && !state.range_deletes(*id).iter().any(|d| d.seq == seq)
        })
        .map(|(id, _)| {
            (
                *id,
                RangeDelete {
                    start: logged.start.clone(),
                    stop: logged.stop.clone(),
                    ts: logged.ts,
                    seq,
                },
            )
        })
        .collect();
    VersionEdit {
        range_deletes,
        last_seq: Some(seq.max(state.last_seq())),
        ..VersionEdit::default()
    }
}
