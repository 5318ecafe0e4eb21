//! Helpers shared by the `conformance_*` and `seeds_*` tests: a database in a temporary
//! directory with one table, and results rendered as exact strings (row, family, qualifier,
//! timestamp, type and value) so that assertions compare every field of every cell.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use cellar::format::CellType;
use cellar::{Cell, Db, FamilyDescriptor, Get, Options, Put, Row, Scan, Table, TableDescriptor};

/// A database in a temporary directory and one table of it.
#[derive(Debug)]
pub struct Env {
    /// The table.
    pub t: Table,
    /// The database.
    pub db: Db,
    /// Kept alive for the database's lifetime.
    pub dir: tempfile::TempDir,
}

/// Open a fresh database with table `t` holding `families`.
pub fn env(families: Vec<FamilyDescriptor>) -> Env {
    env_named("t", families)
}

/// Options of the conformance databases: no background compaction, so every compaction
/// happens where a case calls `major_compact` — in classic mode HBase's results depend on when
/// compactions run, and a case states that point explicitly.
pub fn opts() -> Options {
    let mut o = Options::default();
    o.compaction.threads = 0;
    o
}

/// Open a fresh database with table `name` holding `families`.
pub fn env_named(name: &str, families: Vec<FamilyDescriptor>) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), opts()).expect("open");
    let desc = families
        .into_iter()
        .fold(TableDescriptor::new(name), |d, f| d.family(f));
    db.create_table(desc).expect("create table");
    let t = db.table(name).expect("table");
    Env { t, db, dir }
}

/// Bytes as text: printable ASCII as is, anything else as `\xNN`.
pub fn text(b: &[u8]) -> String {
    b.iter()
        .map(|&c| {
            if (0x20..0x7f).contains(&c) {
                (c as char).to_string()
            } else {
                format!("\\x{c:02x}")
            }
        })
        .collect()
}

/// One cell as `row/family:qualifier@ts=value` (a put) or `row/family:qualifier@ts:Type`
/// (a marker).
pub fn cell_str(c: &Cell) -> String {
    render_cell(
        &c.row,
        &c.family,
        &c.qualifier,
        c.timestamp,
        c.cell_type,
        &c.value,
    )
}

/// The notation of [`cell_str`] from the cell's parts (shared with the differential test's
/// model, whose cells are not `Cell`s).
pub fn render_cell(
    row: &[u8],
    family: &str,
    qualifier: &[u8],
    ts: u64,
    ty: CellType,
    value: &[u8],
) -> String {
    if ty == CellType::Put {
        format!(
            "{}/{}:{}@{}={}",
            text(row),
            family,
            text(qualifier),
            ts,
            text(value)
        )
    } else {
        format!(
            "{}/{}:{}@{}:{}",
            text(row),
            family,
            text(qualifier),
            ts,
            ty.name()
        )
    }
}

/// Every cell of a row (none for `None`).
pub fn row_strs(row: Option<&Row>) -> Vec<String> {
    row.map(|r| {
        assert!(
            r.cells.iter().all(|c| c.row == r.key),
            "a cell of row {} has another row",
            text(&r.key)
        );
        r.cells.iter().map(cell_str).collect()
    })
    .unwrap_or_default()
}

/// Run a Get and render its cells. A returned row must not be empty.
pub fn get(t: &Table, g: &Get) -> Vec<String> {
    let row = t.get(g).expect("get");
    if let Some(r) = &row {
        assert!(!r.is_empty(), "get returned an empty row");
    }
    row_strs(row.as_ref())
}

/// Run a scan and collect its rows.
pub fn scan_rows(t: &Table, s: Scan) -> Vec<Row> {
    t.scan(s)
        .expect("scan")
        .collect::<cellar::Result<Vec<Row>>>()
        .expect("scan row")
}

/// Run a scan and render every cell of every row, in order.
pub fn scan(t: &Table, s: Scan) -> Vec<String> {
    scan_rows(t, s)
        .iter()
        .flat_map(|r| row_strs(Some(r)))
        .collect()
}

/// Run a scan and render the row keys only.
pub fn scan_keys(t: &Table, s: Scan) -> Vec<String> {
    scan_rows(t, s).iter().map(|r| text(&r.key)).collect()
}

/// Put one cell with an explicit timestamp.
pub fn put(t: &Table, row: &str, family: &str, qualifier: &str, ts: u64, value: &str) {
    t.put(Put::new(row).add_at(family, qualifier, ts, value))
        .expect("put");
}

/// Owned strings, for comparing with the helpers' output.
pub fn v(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}
