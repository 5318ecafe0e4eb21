//! Atomic read-modify-write on a row: check-and-mutate, increment and append (MISSION rule 11).
//!
//! Each operation locks the row (`rowlock`), reads the newest values with the ordinary Get
//! path, computes, and writes one batch with [`DbInner::write_locked`] before unlocking. Every
//! write to a row takes the same lock and holds it until its batch is visible, so the read sees
//! every earlier write to the row and no write to it can land between the read and the batch.
//!
//! # Timestamps of increment and append
//! The new version of a column gets `max(now, previous version's timestamp + 1)`. A plain
//! `now` would not do when the previous version is at or after it (same millisecond, a clock
//! step back, or an explicit future timestamp): at an equal timestamp the new version would
//! merely replace the old one as the same version, and a Delete marker on that version (which
//! in classic mode masks every put at its timestamp, later ones too) would hide the new value;
//! below it, the new value would not even be the newest. One millisecond past the previous
//! version keeps each result its own, newest version. (HBase does the same.)
//!
//! Known limitation, as in HBase: a DeleteColumn or DeleteFamily marker at or above the new
//! timestamp (one with a future timestamp, or one written at "now" in the same millisecond)
//! also masks the new version, which a Get cannot see; the operation then returns a value a
//! Get does not return.

use std::collections::BTreeMap;

use super::mutation::{Mutation, Put, RowMutations};
use super::options::WriteOptions;
use super::DbInner;
use crate::error::{Error, Result};
use crate::read::query::{Cell, Get, Row};
use crate::schema::TableName;
use crate::types::{Timestamp, LATEST_TIMESTAMP};
use cellar_format::display::to_string_binary;
use cellar_format::CellType;

/// Comparisons read *current value* `op` *given value*, bytewise — the same operator type
/// as the read filters'. (HBase's `checkAndMutate` reads its operator the other way round,
/// "given `op` current", a well-known trap; this API states the natural order instead.)
pub use crate::read::filter::CompareOp;

/// One condition of a [`CheckAndMutate`] on the newest visible version of a column.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Condition {
    /// The column has no visible version.
    Absent { family: String, qualifier: Vec<u8> },
    /// The column has a visible version and `value op given` holds. An absent column fails
    /// every comparison, `NotEqual` included (as HBase, when the given value is not null).
    Compare {
        family: String,
        qualifier: Vec<u8>,
        op: CompareOp,
        value: Vec<u8>,
    },
}

impl Condition {
    fn column(&self) -> (&str, &[u8]) {
        match self {
            Condition::Absent { family, qualifier }
            | Condition::Compare {
                family, qualifier, ..
            } => (family, qualifier),
        }
    }

    fn holds(&self, row: Option<&Row>) -> bool {
        let (family, qualifier) = self.column();
        let current = row.and_then(|r| r.value(family, qualifier));
        match self {
            Condition::Absent { .. } => current.is_none(),
            Condition::Compare { op, value, .. } => current.is_some_and(|c| op.matches(c, value)),
        }
    }
}

/// Apply mutations of a row only if conditions on its current values hold, atomically
/// (HBase's `checkAndMutate`).
///
/// ```
/// use cellar::{CheckAndMutate, Put, RowMutations};
/// let cam = CheckAndMutate::row("u#42")
///     .if_equals("info", "lang", "rust")
///     .then(RowMutations::new("u#42").put(Put::new("u#42").add("info", "lang", "rust+c")));
/// # let _ = cam;
/// ```
///
/// Several conditions must all hold. At least one condition and one mutation are required.
/// The mutations keep their own timestamps (LATEST resolves to the current time), so, as any
/// write, a put in the same millisecond as an earlier DeleteColumn or DeleteFamily at "now"
/// is masked by it (HBase semantics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckAndMutate {
    row: Vec<u8>,
    conditions: Vec<Condition>,
    mutations: Option<RowMutations>,
}

impl CheckAndMutate {
    /// A check on `row`.
    pub fn row(row: impl Into<Vec<u8>>) -> Self {
        CheckAndMutate {
            row: row.into(),
            conditions: Vec::new(),
            mutations: None,
        }
    }

    /// Require the column's newest value to equal `value`.
    pub fn if_equals(
        self,
        family: &str,
        qualifier: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
    ) -> Self {
        self.if_matches(family, qualifier, CompareOp::Equal, value)
    }

    /// Require the column to have no visible version.
    pub fn if_absent(mut self, family: &str, qualifier: impl Into<Vec<u8>>) -> Self {
        self.conditions.push(Condition::Absent {
            family: family.to_owned(),
            qualifier: qualifier.into(),
        });
        self
    }

    /// Require `newest value op value` (see [`CompareOp`]); an absent column fails.
    pub fn if_matches(
        mut self,
        family: &str,
        qualifier: impl Into<Vec<u8>>,
        op: CompareOp,
        value: impl Into<Vec<u8>>,
    ) -> Self {
        self.conditions.push(Condition::Compare {
            family: family.to_owned(),
            qualifier: qualifier.into(),
            op,
            value: value.into(),
        });
        self
    }

    /// The mutations applied when every condition holds (their row must be this row).
    pub fn then(mut self, mutations: RowMutations) -> Self {
        self.mutations = Some(mutations);
        self
    }

    /// The row.
    pub fn row_key(&self) -> &[u8] {
        &self.row
    }
}

/// Add to 8-byte big-endian signed counters of a row, atomically (HBase's `Increment`).
///
/// An absent column counts as 0; a column whose value is not 8 bytes is refused with
/// [`Error::InvalidArgument`], and so is a result that overflows `i64` (HBase throws too),
/// with nothing written. The same column named twice gets the sum of its amounts. A column
/// with a total amount of 0 is read, not written (as HBase).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Increment {
    row: Vec<u8>,
    columns: Vec<(String, Vec<u8>, i64)>,
}

impl Increment {
    /// An increment of `row`.
    pub fn new(row: impl Into<Vec<u8>>) -> Self {
        Increment {
            row: row.into(),
            columns: Vec::new(),
        }
    }

    /// Add `amount` (may be negative) to a column.
    pub fn add(mut self, family: &str, qualifier: impl Into<Vec<u8>>, amount: i64) -> Self {
        self.columns
            .push((family.to_owned(), qualifier.into(), amount));
        self
    }

    /// The row.
    pub fn row(&self) -> &[u8] {
        &self.row
    }
}

/// Append bytes to the newest values of columns of a row, atomically (HBase's `Append`). An
/// absent column starts empty; the same column named twice gets both suffixes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    row: Vec<u8>,
    columns: Vec<(String, Vec<u8>, Vec<u8>)>,
}

impl Append {
    /// An append to `row`.
    pub fn new(row: impl Into<Vec<u8>>) -> Self {
        Append {
            row: row.into(),
            columns: Vec::new(),
        }
    }

    /// Append `suffix` to a column.
    pub fn add(
        mut self,
        family: &str,
        qualifier: impl Into<Vec<u8>>,
        suffix: impl Into<Vec<u8>>,
    ) -> Self {
        self.columns
            .push((family.to_owned(), qualifier.into(), suffix.into()));
        self
    }

    /// The row.
    pub fn row(&self) -> &[u8] {
        &self.row
    }
}

/// A column, ordered as cells are in a row (family, then qualifier).
type Column = (String, Vec<u8>);

impl DbInner {
    /// See [`CheckAndMutate`]; true when the conditions held and the mutations were written.
    pub(super) fn check_and_mutate(
        &self,
        table: &TableName,
        cam: CheckAndMutate,
        opts: WriteOptions,
    ) -> Result<bool> {
        let rm = cam
            .mutations
            .ok_or_else(|| Error::InvalidArgument("check-and-mutate without mutations".into()))?;
        if cam.conditions.is_empty() {
            return Err(Error::InvalidArgument(
                "check-and-mutate without a condition (use mutate_row)".into(),
            ));
        }
        if rm.mutations.is_empty() {
            return Err(Error::InvalidArgument(
                "check-and-mutate with no mutation".into(),
            ));
        }
        if let Some(bad) = std::iter::once(rm.row.as_slice())
            .chain(rm.mutations.iter().map(Mutation::row))
            .find(|r| *r != cam.row.as_slice())
        {
            return Err(Error::InvalidArgument(format!(
                "check-and-mutate on {} holds a mutation of row {}",
                to_string_binary(&cam.row),
                to_string_binary(bad)
            )));
        }
        let get = cam
            .conditions
            .iter()
            .fold(Get::new(cam.row.clone()), |g, c| {
                let (f, q) = c.column();
                g.column(f, q.to_vec())
            });
        self.check_poisoned()?;
        self.stall_if_needed()?;
        let _row = self.row_locks.lock([cam.row.as_slice()]);
        let current = self.get(table, &get)?;
        if !cam.conditions.iter().all(|c| c.holds(current.as_ref())) {
            return Ok(false);
        }
        let items: Vec<(&TableName, &Mutation)> = rm.mutations.iter().map(|m| (table, m)).collect();
        self.write_locked(&items, opts)?;
        Ok(true)
    }

    /// See [`Increment`]; returns the new value of every column named.
    pub(super) fn increment(
        &self,
        table: &TableName,
        inc: Increment,
        opts: WriteOptions,
    ) -> Result<Row> {
        let mut amounts: BTreeMap<Column, i64> = BTreeMap::new();
        for (f, q, a) in inc.columns {
            let slot = amounts.entry((f, q)).or_insert(0);
            *slot = slot.checked_add(a).ok_or_else(|| {
                Error::InvalidArgument("increment amounts of one column overflow i64".into())
            })?;
        }
        self.read_modify_write(table, &inc.row, amounts, opts, |col, amount, current| {
            let old = match current {
                None => 0,
                Some(v) => i64::from_be_bytes(v.try_into().map_err(|_| {
                    Error::InvalidArgument(format!(
                        "increment of {}:{}: the value is {} bytes, not an 8-byte counter",
                        col.0,
                        to_string_binary(&col.1),
                        v.len()
                    ))
                })?),
            };
            let new = old.checked_add(amount).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "increment of {}:{} by {amount} overflows i64 (value {old})",
                    col.0,
                    to_string_binary(&col.1)
                ))
            })?;
            // Amount 0 reads without writing a version (HBase does the same).
            Ok((new.to_be_bytes().to_vec(), amount != 0))
        })
    }

    /// See [`Append`]; returns the new value of every column named.
    pub(super) fn append(&self, table: &TableName, app: Append, opts: WriteOptions) -> Result<Row> {
        let mut suffixes: BTreeMap<Column, Vec<u8>> = BTreeMap::new();
        for (f, q, s) in app.columns {
            suffixes.entry((f, q)).or_default().extend_from_slice(&s);
        }
        self.read_modify_write(table, &app.row, suffixes, opts, |_, suffix, current| {
            let mut v = current.map(<[u8]>::to_vec).unwrap_or_default();
            v.extend_from_slice(&suffix);
            Ok((v, true))
        })
    }

    /// Lock `row`, read the newest version of each column of `args`, compute each new value
    /// with `f(column, arg, current) -> (value, write?)`, write the ones to write as one batch,
    /// and return every new value as a row. Nothing is written if any `f` fails.
    fn read_modify_write<A>(
        &self,
        table: &TableName,
        row: &[u8],
        args: BTreeMap<Column, A>,
        opts: WriteOptions,
        f: impl Fn(&Column, A, Option<&[u8]>) -> Result<(Vec<u8>, bool)>,
    ) -> Result<Row> {
        if args.is_empty() {
            return Err(Error::InvalidArgument(
                "read-modify-write of no column".into(),
            ));
        }
        let get = args.keys().fold(Get::new(row.to_vec()), |g, (fam, q)| {
            g.column(fam.as_str(), q.clone())
        });
        self.check_poisoned()?;
        self.stall_if_needed()?;
        let _row = self.row_locks.lock([row]);
        let current = self.get(table, &get)?;
        let now = self.opts.clock.now_ms();
        let mut put = Put::new(row.to_vec());
        let mut any = false;
        let mut cells = Vec::with_capacity(args.len());
        for (col, arg) in args {
            let prev = current.as_ref().and_then(|r| {
                r.cells().iter().find(|c| {
                    c.cell_type == CellType::Put && c.family == col.0 && c.qualifier == col.1
                })
            });
            let (value, write) = f(&col, arg, prev.map(|c| c.value.as_slice()))?;
            let ts = if write {
                let ts = next_timestamp(now, prev.map(|c| c.timestamp))?;
                put = put.add_at(&col.0, col.1.clone(), ts, value.clone());
                any = true;
                ts
            } else {
                // Not written: report the version it was read from.
                prev.map_or(now, |c| c.timestamp)
            };
            cells.push(Cell::new(row, col.0, col.1, ts, CellType::Put, value));
        }
        if any {
            let m = Mutation::Put(put);
            self.write_locked(&[(table, &m)], opts)?;
        }
        Ok(Row::new(row.to_vec(), cells))
    }
}

/// Timestamp of a new version: `now`, but past the previous version (see the module docs).
fn next_timestamp(now: Timestamp, prev: Option<Timestamp>) -> Result<Timestamp> {
    let ts = match prev {
        None => now,
        Some(p) => now.max(p.checked_add(1).unwrap_or(LATEST_TIMESTAMP)),
    };
    // LATEST is "now" to the write path, never a stored timestamp.
    if ts == LATEST_TIMESTAMP {
        return Err(Error::InvalidArgument(
            "the previous version's timestamp leaves no room for a newer one".into(),
        ));
    }
    Ok(ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_ops_read_current_op_given() {
        use CompareOp::*;
        let cases = [
            (Less, b"a", b"b", true),
            (Less, b"b", b"b", false),
            (LessOrEqual, b"b", b"b", true),
            (LessOrEqual, b"c", b"b", false),
            (Equal, b"b", b"b", true),
            (Equal, b"a", b"b", false),
            (NotEqual, b"a", b"b", true),
            (NotEqual, b"b", b"b", false),
            (GreaterOrEqual, b"b", b"b", true),
            (GreaterOrEqual, b"a", b"b", false),
            (Greater, b"c", b"b", true),
            (Greater, b"b", b"b", false),
        ];
        for (op, cur, given, want) in cases {
            assert_eq!(op.matches(cur, given), want, "{op:?} {cur:?} {given:?}");
        }
        // Bytewise and unsigned: a prefix is smaller, 0xff is large.
        assert!(Less.matches(b"ab", b"abc"));
        assert!(Greater.matches(&[0xff], &[0x01, 0x00]));
    }

    #[test]
    fn next_timestamp_is_now_or_past_the_previous_version() {
        assert_eq!(next_timestamp(100, None).ok(), Some(100));
        assert_eq!(next_timestamp(100, Some(50)).ok(), Some(100));
        assert_eq!(next_timestamp(100, Some(100)).ok(), Some(101));
        assert_eq!(next_timestamp(100, Some(500)).ok(), Some(501));
        assert!(next_timestamp(100, Some(LATEST_TIMESTAMP - 1)).is_err());
    }
}
