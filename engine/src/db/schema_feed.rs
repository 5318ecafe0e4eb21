//! Schema changes in the change feed (SPEC.md §16.10): every manifest edit that creates, alters,
//! replaces or drops a table or a namespace is followed by one WAL record that says what the
//! schema became, so a replica fed from the change feed follows the primary's schema as well
//! as its data (HBase's replication carries no schema changes; its operators create tables on
//! both sides by hand).
//!
//! ```text
//! record  := an ordinary BATCH record (§16.2, §18) whose mutations all have family id 0
//!            (never a family's: ids start at 1), type Put, timestamp 0, no tags, one per change:
//!   row = table name (ns:table) | qualifier "table"             | value = flags u8 | edit
//!   row = table name            | qualifier "table-dropped"     | value empty
//!   row = namespace             | qualifier "namespace"         | value empty (created)
//!   row = namespace             | qualifier "namespace-dropped" | value empty
//!   row = table name            | qualifier "rows-deleted"      | value = rows
//! rows    := ts varint64 | n varint32 | n × (family_id varint32 | family name bytes)
//!            | start bytes | stop bytes (empty = to the end)   (a row-range delete, §13 rule 8)
//! flags   := bit 0: the table's data was replaced (a family kept its name under a new id:
//!            a restored snapshot); the other bits 0
//! edit    := a version edit (§17.3) holding exactly one put_table: the table as it is now
//! ```
//!
//! Why it is built this way:
//! - State, not operations: a "table" change carries the whole descriptor after the edit, so
//!   applying one twice, or after a later one was lost, still converges (create or alter to
//!   match), and a consumer needs no history to apply it.
//! - A BATCH record of an unused family id needs no new record kind: recovery and every older
//!   build skip mutations of families they do not know, as they skip those of dropped
//!   families, so the log stays readable by them.
//! - The record is appended after the manifest edit is durable, under the same exclusive
//!   switch gate, with `FsyncWal`: its seq is above every write before the change and below
//!   every write after it, and it survives a power loss once the call returns.
//! - The edit carries the record's payload (`schema_record`, §17.3), with the highest seq in use
//!   when it was made: a crash between the edit and the record (or a failed append) leaves a
//!   log and manifest whose seqs stop at or below that, and the next open appends the record
//!   then, before any write (`Db::open`). Logging the record ahead of the edit, as row-range
//!   deletes are, would need recovery to redo the edit from it, which a clone or restore
//!   (files linked under new ids) cannot be.

use cellar_format::CellType;

use super::{Db, DbInner};
use crate::batch::{self, Mutation, MutationRef};
use crate::error::{Error, Result};
use crate::manifest::{ManifestState, TableEntry, VersionEdit};
use crate::schema::{TableDescriptor, TableName};
use crate::types::{FamilyId, Timestamp};
use crate::wal::Durability;
use cellar_format::coding::{put_varint32, put_varint64, Cursor};

/// The family id schema records use: no family has it.
pub const SCHEMA_FAMILY: FamilyId = 0;

const TABLE: &[u8] = b"table";
const TABLE_DROPPED: &[u8] = b"table-dropped";
const NAMESPACE: &[u8] = b"namespace";
const NAMESPACE_DROPPED: &[u8] = b"namespace-dropped";
const ROWS_DELETED: &[u8] = b"rows-deleted";
/// `flags` bit: the table's data was replaced.
const REPLACED: u8 = 1;

/// A schema change, as the change feed hands it out ([`crate::ChangeBatch::schema`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaChange {
    /// A table was created or altered, cloned from a snapshot, or restored: `descriptor` is
    /// what it is now.
    Table {
        /// The table after the change.
        descriptor: TableDescriptor,
        /// Its data was replaced (a snapshot restore): what a replica holds of it no longer
        /// applies, and the restored data is not in the feed (copy the table again).
        data_replaced: bool,
    },
    /// A table was dropped.
    TableDropped {
        /// Its name.
        name: TableName,
    },
    /// A namespace was created.
    Namespace {
        /// Its name.
        name: String,
    },
    /// A namespace was dropped.
    NamespaceDropped {
        /// Its name.
        name: String,
    },
    /// A row-range delete ([`crate::Table::delete_rows`]): unlike the other changes, an
    /// operation on the table's data, logged by the same kind of record because it too is
    /// applied to the manifest rather than to a memstore.
    RowsDeleted {
        /// The table.
        table: TableName,
        /// The families it applies to (every family of the table when it was written).
        families: Vec<String>,
        /// First row covered.
        start: Vec<u8>,
        /// First row past the range; empty for "to the end".
        stop: Vec<u8>,
        /// Cells at or below this timestamp are deleted.
        ts: Timestamp,
    },
}

/// A row-range delete as its record holds it: the families by id and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LoggedRangeDelete {
    pub table: TableName,
    pub families: Vec<(FamilyId, String)>,
    pub start: Vec<u8>,
    pub stop: Vec<u8>,
    pub ts: Timestamp,
}

impl LoggedRangeDelete {
    /// The batch payload of its record.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut value = Vec::new();
        put_varint64(&mut value, self.ts);
        put_varint32(&mut value, self.families.len() as u32);
        for (id, name) in &self.families {
            put_varint32(&mut value, *id);
            put_bytes(&mut value, name.as_bytes());
        }
        put_bytes(&mut value, &self.start);
        put_bytes(&mut value, &self.stop);
        batch::encode(&[Mutation {
            family: SCHEMA_FAMILY,
            row: self.table.to_string().into_bytes(),
            qualifier: ROWS_DELETED.to_vec(),
            timestamp: 0,
            cell_type: CellType::Put,
            value,
            tags: Vec::new(),
        }])
    }

    /// The delete a schema record's mutation holds, or `None` if it holds another change.
    pub(super) fn decode(m: &MutationRef<'_>) -> std::result::Result<Option<Self>, String> {
        if m.family != SCHEMA_FAMILY || m.qualifier != ROWS_DELETED {
            return Ok(None);
        }
        let bad = |what: &str| format!("a rows-deleted change: {what}");
        let row = std::str::from_utf8(m.row).map_err(|_| bad("table name not UTF-8"))?;
        let table = TableName::parse(row).map_err(|e| bad(&e.to_string()))?;
        let mut c = Cursor::new(m.value);
        let ts = c.varint64("ts").map_err(|e| bad(&e.0))?;
        let n = c.varint32("family count").map_err(|e| bad(&e.0))? as usize;
        if n > c.remaining() {
            return Err(bad("family count exceeds the bytes left"));
        }
        let mut families = Vec::with_capacity(n);
        for _ in 0..n {
            let id = c.varint32("family id").map_err(|e| bad(&e.0))?;
            let name = c.len_prefixed("family name").map_err(|e| bad(&e.0))?;
            let name = std::str::from_utf8(name).map_err(|_| bad("family name not UTF-8"))?;
            families.push((id, name.to_owned()));
        }
        let start = c.len_prefixed("start").map_err(|e| bad(&e.0))?.to_vec();
        let stop = c.len_prefixed("stop").map_err(|e| bad(&e.0))?.to_vec();
        if !c.is_empty() {
            return Err(bad("bytes after the stop row"));
        }
        if !stop.is_empty() && start >= stop {
            return Err(bad("an empty range"));
        }
        Ok(Some(LoggedRangeDelete {
            table,
            families,
            start,
            stop,
            ts,
        }))
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint32(out, b.len() as u32);
    out.extend_from_slice(b);
}

impl SchemaChange {
    /// The table the change is about, if it is about one.
    pub fn table(&self) -> Option<&TableName> {
        match self {
            SchemaChange::Table { descriptor, .. } => Some(&descriptor.name),
            SchemaChange::TableDropped { name } => Some(name),
            SchemaChange::RowsDeleted { table, .. } => Some(table),
            _ => None,
        }
    }
}

/// The changes `edit` makes to `state` (taken before it is applied), in the order the edit
/// applies them (§17.5): namespaces created, tables put, tables dropped, namespaces dropped.
pub(super) fn changes(state: &ManifestState, edit: &VersionEdit) -> Vec<SchemaChange> {
    let mut out: Vec<SchemaChange> = edit
        .create_namespaces
        .iter()
        .map(|n| SchemaChange::Namespace { name: n.clone() })
        .collect();
    for t in &edit.put_tables {
        let replaced = state.tables().get(&t.id).is_some_and(|old| {
            t.descriptor
                .families
                .iter()
                .zip(&t.family_ids)
                .any(|(f, id)| {
                    old.descriptor
                        .families
                        .iter()
                        .zip(&old.family_ids)
                        .any(|(of, oid)| of.name == f.name && oid != id)
                })
        });
        out.push(SchemaChange::Table {
            descriptor: t.descriptor.clone(),
            data_replaced: replaced,
        });
    }
    for id in &edit.drop_tables {
        if let Some(t) = state.tables().get(id) {
            out.push(SchemaChange::TableDropped {
                name: t.descriptor.name.clone(),
            });
        }
    }
    out.extend(
        edit.drop_namespaces
            .iter()
            .map(|n| SchemaChange::NamespaceDropped { name: n.clone() }),
    );
    out
}

/// The batch payload of a schema record.
pub(super) fn encode(changes: &[SchemaChange]) -> Vec<u8> {
    let muts: Vec<Mutation> = changes
        .iter()
        .map(|c| {
            let (row, qualifier, value) = match c {
                SchemaChange::Table {
                    descriptor,
                    data_replaced,
                } => {
                    let mut value = vec![if *data_replaced { REPLACED } else { 0 }];
                    value.extend_from_slice(
                        &VersionEdit {
                            put_tables: vec![TableEntry {
                                // Ids are the primary's own; a consumer goes by names.
                                id: 0,
                                descriptor: descriptor.clone(),
                                family_ids: (1..=descriptor.families.len() as FamilyId).collect(),
                            }],
                            ..VersionEdit::default()
                        }
                        .encode(),
                    );
                    (descriptor.name.to_string(), TABLE, value)
                }
                SchemaChange::TableDropped { name } => (name.to_string(), TABLE_DROPPED, vec![]),
                SchemaChange::Namespace { name } => (name.clone(), NAMESPACE, vec![]),
                SchemaChange::NamespaceDropped { name } => {
                    (name.clone(), NAMESPACE_DROPPED, vec![])
                }
                // Logged by `LoggedRangeDelete::encode` (with family ids), never here.
                SchemaChange::RowsDeleted { table, .. } => {
                    (table.to_string(), ROWS_DELETED, vec![])
                }
            };
            Mutation {
                family: SCHEMA_FAMILY,
                row: row.into_bytes(),
                qualifier: qualifier.to_vec(),
                timestamp: 0,
                cell_type: CellType::Put,
                value,
                tags: Vec::new(),
            }
        })
        .collect();
    batch::encode(&muts)
}

/// The change one mutation of a schema record holds; what is wrong otherwise.
pub(super) fn decode(m: &MutationRef<'_>) -> std::result::Result<SchemaChange, String> {
    let text = |b: &[u8]| {
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| "a schema change names something in bytes that are not UTF-8".to_owned())
    };
    if m.cell_type != CellType::Put || m.timestamp != 0 || !m.tags.is_empty() {
        return Err("a schema change that is not a Put at timestamp 0 without tags".into());
    }
    let row = text(m.row)?;
    let empty = |c: SchemaChange| {
        if m.value.is_empty() {
            Ok(c)
        } else {
            Err(format!("a {} change with a value", text(m.qualifier)?))
        }
    };
    match m.qualifier {
        TABLE => {
            let Some((&flags, edit)) = m.value.split_first() else {
                return Err("a table change without flags".into());
            };
            if flags & !REPLACED != 0 {
                return Err(format!("a table change with unknown flags {flags:#04x}"));
            }
            let edit = VersionEdit::decode(edit)
                .map_err(|e| format!("a table change's edit: {} at {}", e.what, e.offset))?;
            let [entry] = &edit.put_tables[..] else {
                return Err("a table change's edit holds no single table".into());
            };
            if entry.descriptor.name.to_string() != row {
                return Err(format!(
                    "a table change for {row} holds table {}",
                    entry.descriptor.name
                ));
            }
            entry
                .descriptor
                .validate()
                .map_err(|e| format!("a table change's descriptor: {e}"))?;
            Ok(SchemaChange::Table {
                descriptor: entry.descriptor.clone(),
                data_replaced: flags & REPLACED != 0,
            })
        }
        TABLE_DROPPED => empty(SchemaChange::TableDropped {
            name: TableName::parse(&row).map_err(|e| e.to_string())?,
        }),
        NAMESPACE => empty(SchemaChange::Namespace { name: row }),
        NAMESPACE_DROPPED => empty(SchemaChange::NamespaceDropped { name: row }),
        ROWS_DELETED => {
            let d = LoggedRangeDelete::decode(m)?.ok_or("a rows-deleted change misread")?;
            Ok(SchemaChange::RowsDeleted {
                table: d.table,
                families: d.families.into_iter().map(|(_, n)| n).collect(),
                start: d.start,
                stop: d.stop,
                ts: d.ts,
            })
        }
        q => Err(format!(
            "unknown schema change {:?}",
            String::from_utf8_lossy(q)
        )),
    }
}

impl DbInner {
    /// Log one schema record (`payload`, from [`encode`]): called under the exclusive switch
    /// gate, right after the manifest edit that made the changes (and carries the record) is
    /// durable. A failed append poisons the database (the record's seq would never become
    /// visible) but is not returned: the edit stands, callers undo their work when told it
    /// failed, and the next open appends the record from the edit.
    pub(super) fn log_schema_record(&self, payload: &[u8]) {
        match self.wal.append(payload, Durability::FsyncWal) {
            // Every write before holds the gate's shared side until it is visible, so the
            // read point reaches this seq at once.
            Ok(seq) => self.visibility.complete(seq),
            Err(e) => {
                tracing::error!(error = %e, "logging a schema change for the change feed failed");
                match self.wal.poison() {
                    Some(p) => self.poison(p),
                    None => self.poison(crate::Poison::from_error(
                        "logging a schema change failed",
                        &e,
                    )),
                }
            }
        }
    }
}

impl Db {
    /// Make this database's schema what `change` says (a replica applying a primary's change
    /// feed): create or alter a table to match the descriptor, drop a table, create or drop a
    /// namespace — each only where this database differs, so applying a change twice, or one
    /// already applied, does nothing. A table whose data was replaced on the primary
    /// (`data_replaced`) is dropped and created empty here: its data must be copied again
    /// (`Table::export_range`, `Table::ingest`).
    pub fn apply_schema_change(&self, change: &SchemaChange) -> Result<()> {
        match change {
            SchemaChange::Table {
                descriptor,
                data_replaced,
            } => {
                let name = descriptor.name.to_string();
                match self.describe(&name) {
                    Err(Error::TableNotFound(_)) => {
                        if !self.list_namespaces().contains(&descriptor.name.namespace) {
                            self.create_namespace(&descriptor.name.namespace)?;
                        }
                        self.create_table(descriptor.clone())
                    }
                    Err(e) => Err(e),
                    Ok(_) if *data_replaced => {
                        self.drop_table(&name)?;
                        self.create_table(descriptor.clone())
                    }
                    Ok(d) if d == *descriptor => Ok(()),
                    Ok(_) => self.alter_table(descriptor.clone()),
                }
            }
            SchemaChange::RowsDeleted {
                table,
                families,
                start,
                stop,
                ts,
            } => {
                let mut d = super::DeleteRows::new(start.clone(), stop.clone()).timestamp(*ts);
                for f in families {
                    d = d.family(f.clone());
                }
                self.table(&table.to_string())?
                    .delete_rows_with(d)
                    .map(|_| ())
            }
            SchemaChange::TableDropped { name } => match self.drop_table(&name.to_string()) {
                Err(Error::TableNotFound(_)) => Ok(()),
                r => r,
            },
            SchemaChange::Namespace { name } => {
                if self.list_namespaces().contains(name) {
                    Ok(())
                } else {
                    self.create_namespace(name)
                }
            }
            SchemaChange::NamespaceDropped { name } => {
                if self.list_namespaces().contains(name) {
                    self.drop_namespace(name)
                } else {
                    Ok(())
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::schema::FamilyDescriptor;

    fn sample() -> Vec<SchemaChange> {
        vec![
            SchemaChange::Namespace { name: "ns".into() },
            SchemaChange::Table {
                descriptor: TableDescriptor::new("ns:t")
                    .family(FamilyDescriptor::new("a").max_versions(7))
                    .family(FamilyDescriptor::new("b")),
                data_replaced: true,
            },
            SchemaChange::TableDropped {
                name: TableName::parse("old").unwrap(),
            },
            SchemaChange::NamespaceDropped {
                name: "gone".into(),
            },
        ]
    }

    #[test]
    fn round_trips() {
        let payload = encode(&sample());
        let got: Vec<SchemaChange> = batch::mutations_v2(&payload)
            .map(|m| decode(&m.unwrap()).unwrap())
            .collect();
        assert_eq!(got, sample());
    }

    /// A changed byte of a schema mutation's value never panics: a typed refusal, or (a byte
    /// of a setting) another valid descriptor.
    #[test]
    fn damaged_values_are_refused_or_still_valid() {
        let payload = encode(&sample()[1..2]);
        let m = batch::mutations_v2(&payload).next().unwrap().unwrap();
        for i in 0..m.value.len() {
            for bit in [0x01, 0x20, 0x80] {
                let mut v = m.value.to_vec();
                v[i] ^= bit;
                let d = MutationRef { value: &v, ..m };
                if let Ok(SchemaChange::Table { descriptor, .. }) = decode(&d) {
                    assert!(descriptor.validate().is_ok());
                }
            }
        }
        let bad = MutationRef {
            qualifier: b"tables",
            ..m
        };
        assert!(decode(&bad).unwrap_err().contains("unknown schema change"));
    }
}
