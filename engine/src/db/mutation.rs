//! What callers write: `Put`, `Delete` (every HBase marker kind), `RowMutations` (atomic on a
//! row) and `WriteBatch` (atomic across rows and tables — stronger than HBase).

use cellar_format::CellType;

use crate::schema::TableName;
use crate::types::{Timestamp, LATEST_TIMESTAMP};

/// One cell of a put or one marker of a delete, before family names are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingCell {
    pub family: String,
    pub qualifier: Vec<u8>,
    pub timestamp: Timestamp,
    pub cell_type: CellType,
    pub value: Vec<u8>,
}

/// Writes new versions of cells of one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put {
    pub(crate) row: Vec<u8>,
    pub(crate) cells: Vec<PendingCell>,
    /// Per-cell TTL of every cell of this put, in ms after each cell's timestamp.
    pub(crate) ttl_ms: Option<u64>,
}

impl Put {
    /// A put on `row`.
    pub fn new(row: impl Into<Vec<u8>>) -> Self {
        Put {
            row: row.into(),
            cells: Vec::new(),
            ttl_ms: None,
        }
    }

    /// HBase's `Put.setTTL`: every cell of this put expires `ttl` after its timestamp. It can
    /// only shorten the family's TTL, never extend it, and MIN_VERSIONS does not keep a cell
    /// past it (SPEC.md §13 rule 7).
    pub fn ttl(mut self, ttl: std::time::Duration) -> Self {
        self.ttl_ms = Some(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// Add a value at the current time (resolved when the write is applied).
    pub fn add(
        self,
        family: &str,
        qualifier: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
    ) -> Self {
        self.add_at(family, qualifier, LATEST_TIMESTAMP, value)
    }

    /// Add a value with an explicit timestamp.
    pub fn add_at(
        mut self,
        family: &str,
        qualifier: impl Into<Vec<u8>>,
        timestamp: Timestamp,
        value: impl Into<Vec<u8>>,
    ) -> Self {
        self.cells.push(PendingCell {
            family: family.to_owned(),
            qualifier: qualifier.into(),
            timestamp,
            cell_type: CellType::Put,
            value: value.into(),
        });
        self
    }

    /// The row.
    pub fn row(&self) -> &[u8] {
        &self.row
    }
}

/// What a [`Delete`] removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeleteOp {
    /// Every family of the row at or below `ts` (one DeleteFamily per family).
    Row { ts: Timestamp },
    /// DeleteFamily.
    Family { family: String, ts: Timestamp },
    /// DeleteFamilyVersion.
    FamilyVersion { family: String, ts: Timestamp },
    /// DeleteColumn: every version at or below `ts`.
    Columns {
        family: String,
        qualifier: Vec<u8>,
        ts: Timestamp,
    },
    /// Delete: one version, at `ts`, or the newest one when `ts` is LATEST.
    Version {
        family: String,
        qualifier: Vec<u8>,
        ts: Timestamp,
    },
}

/// Writes delete markers on one row. With nothing added, deletes the whole row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    pub(crate) row: Vec<u8>,
    pub(crate) ops: Vec<DeleteOp>,
}

impl Delete {
    /// A delete of `row`: the whole row unless narrowed by the methods below.
    pub fn new(row: impl Into<Vec<u8>>) -> Self {
        Delete {
            row: row.into(),
            ops: Vec::new(),
        }
    }

    /// Every cell of the row at or below `ts` (HBase's Delete with a timestamp and no column).
    pub fn row_at(mut self, ts: Timestamp) -> Self {
        self.ops.push(DeleteOp::Row { ts });
        self
    }

    /// Every column of `family` (HBase `addFamily`): a DeleteFamily at the current time.
    pub fn family(self, family: &str) -> Self {
        self.family_at(family, LATEST_TIMESTAMP)
    }

    /// Every column of `family` at or below `ts`.
    pub fn family_at(mut self, family: &str, ts: Timestamp) -> Self {
        self.ops.push(DeleteOp::Family {
            family: family.to_owned(),
            ts,
        });
        self
    }

    /// Every column of `family` at exactly `ts` (HBase `addFamilyVersion`).
    pub fn family_version(mut self, family: &str, ts: Timestamp) -> Self {
        self.ops.push(DeleteOp::FamilyVersion {
            family: family.to_owned(),
            ts,
        });
        self
    }

    /// Every version of a column (HBase `addColumns`): a DeleteColumn at the current time.
    pub fn columns(self, family: &str, qualifier: impl Into<Vec<u8>>) -> Self {
        self.columns_at(family, qualifier, LATEST_TIMESTAMP)
    }

    /// Every version of a column at or below `ts`.
    pub fn columns_at(
        mut self,
        family: &str,
        qualifier: impl Into<Vec<u8>>,
        ts: Timestamp,
    ) -> Self {
        self.ops.push(DeleteOp::Columns {
            family: family.to_owned(),
            qualifier: qualifier.into(),
            ts,
        });
        self
    }

    /// The newest version of a column (HBase `addColumn` without a timestamp): its timestamp is
    /// resolved when the delete is applied.
    pub fn column(self, family: &str, qualifier: impl Into<Vec<u8>>) -> Self {
        self.column_at(family, qualifier, LATEST_TIMESTAMP)
    }

    /// The version of a column at exactly `ts`.
    pub fn column_at(mut self, family: &str, qualifier: impl Into<Vec<u8>>, ts: Timestamp) -> Self {
        self.ops.push(DeleteOp::Version {
            family: family.to_owned(),
            qualifier: qualifier.into(),
            ts,
        });
        self
    }

    /// The row.
    pub fn row(&self) -> &[u8] {
        &self.row
    }
}

/// A put or a delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// A put.
    Put(Put),
    /// A delete.
    Delete(Delete),
}

impl Mutation {
    pub(crate) fn row(&self) -> &[u8] {
        match self {
            Mutation::Put(p) => &p.row,
            Mutation::Delete(d) => &d.row,
        }
    }
}

impl From<Put> for Mutation {
    fn from(p: Put) -> Self {
        Mutation::Put(p)
    }
}

impl From<Delete> for Mutation {
    fn from(d: Delete) -> Self {
        Mutation::Delete(d)
    }
}

/// Mutations of one row, applied atomically (HBase's RowMutations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowMutations {
    pub(crate) row: Vec<u8>,
    pub(crate) mutations: Vec<Mutation>,
}

impl RowMutations {
    /// Mutations of `row`.
    pub fn new(row: impl Into<Vec<u8>>) -> Self {
        RowMutations {
            row: row.into(),
            mutations: Vec::new(),
        }
    }

    /// Add a put (its row must be this row).
    pub fn put(mut self, p: Put) -> Self {
        self.mutations.push(Mutation::Put(p));
        self
    }

    /// Add a delete (its row must be this row).
    pub fn delete(mut self, d: Delete) -> Self {
        self.mutations.push(Mutation::Delete(d));
        self
    }
}

/// Mutations of any rows of any tables, applied atomically as a whole: one WAL record, one
/// sequence number, visible together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) items: Vec<(String, Mutation)>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch::default()
    }

    /// Add a put on `table` (`ns:table` or `table`).
    pub fn put(mut self, table: &str, p: Put) -> Self {
        self.items.push((table.to_owned(), Mutation::Put(p)));
        self
    }

    /// Add a delete on `table`.
    pub fn delete(mut self, table: &str, d: Delete) -> Self {
        self.items.push((table.to_owned(), Mutation::Delete(d)));
        self
    }

    /// Number of mutations.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn resolve_tables(&self) -> crate::Result<Vec<(TableName, &Mutation)>> {
        self.items
            .iter()
            .map(|(t, m)| Ok((TableName::parse(t)?, m)))
            .collect()
    }
}
