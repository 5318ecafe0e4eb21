//! What a command prints: HBase's text layout, or one JSON object on one line.
//!
//! The JSON shapes are a contract (README.md, "Shell"): field names and types stay stable;
//! byte strings (rows, qualifiers, values) are escaped as in text mode (`toStringBinary`),
//! or converted as a get's or scan's converters and FORMATTER say (`convert.rs`), the same
//! text in both modes.

use std::time::Duration;

use cellar::types::RangeDelete;
use cellar::{BloomType, CompressionType, FamilyDescriptor, KeepDeletedCells};
use serde::Serialize;

use super::convert::Shown;
use super::ShellError;
use crate::text::{bin, Align, Table};

/// The result of a successful command.
#[derive(Debug)]
pub enum Output {
    /// A write or admin command with nothing to show: `{"ok":true}`.
    Done,
    /// As `Done`, with a line of text (`Created table t`).
    Message(String),
    /// Cells of a get or scan, in the order returned.
    Cells {
        /// `get` (COLUMN/CELL layout) rather than `scan` (ROW/COLUMN+CELL).
        get: bool,
        /// Rows returned.
        rows: usize,
        /// The cells, their bytes made text by the command's converters.
        cells: Vec<Shown>,
        /// MAXLENGTH: text mode cuts each cell's `timestamp=..., value=...` to this many
        /// characters.
        max_length: Option<usize>,
    },
    /// `count`.
    Count(u64),
    /// `list`, `list_namespace`, `list_namespace_tables`.
    Names {
        /// Text header (`TABLE`, `NAMESPACE`).
        header: &'static str,
        /// JSON field (`tables`, `namespaces`).
        field: &'static str,
        /// Names, sorted.
        names: Vec<String>,
        /// Print Ruby's `=> [...]` echo after the timing, as `list` does.
        echo: bool,
    },
    /// `exists`, `is_enabled`, `is_disabled`.
    Flag {
        /// JSON field.
        field: &'static str,
        /// The answer.
        value: bool,
        /// Text line.
        text: String,
    },
    /// `describe`.
    Describe {
        /// Table name.
        table: String,
        /// Whether the table is enabled.
        enabled: bool,
        /// Families in declaration order.
        families: Vec<FamilyDescriptor>,
    },
    /// `incr` and `get_counter` (`None`: no counter there).
    Counter(Option<i64>),
    /// `append`: the new value.
    Appended(Vec<u8>),
    /// `status`.
    Status {
        /// `Db::stats_report()`.
        report: String,
        /// The counters as JSON.
        stats: serde_json::Value,
    },
    /// `help`.
    Help(String),
    /// One named value: `version`, `describe_namespace`.
    Info {
        /// JSON field.
        field: &'static str,
        /// JSON value.
        value: String,
        /// Text form.
        text: String,
    },
    /// `explain`.
    Explain(Box<Explained>),
    /// `list_snapshots`, `list_table_snapshots`: by name.
    Snapshots(Vec<SnapshotJson>),
    /// `list_feed_slots`: by name.
    FeedSlots(Vec<cellar::FeedSlotInfo>),
    /// `list_range_deletes`: (family, delete), in seq order.
    RangeDeletes(Vec<(String, RangeDelete)>),
    /// `approxsize`: the range's estimate and the table's split point.
    ApproxSize {
        /// `Table::estimate_range`.
        estimate: cellar::RangeEstimate,
        /// `Table::split_point`.
        split_point: Option<Vec<u8>>,
    },
    /// `exit`.
    Exit,
}

/// One feed slot as `list_feed_slots` and `status` show it.
pub fn feed_slot_json(s: &cellar::FeedSlotInfo) -> serde_json::Value {
    serde_json::json!({
        "name": s.name,
        "acked": s.acked,
        "segment": s.segment,
        "held_bytes": s.held_bytes,
        "lost": s.lost,
    })
}

/// One row-range delete as `list_range_deletes` shows it.
#[derive(Debug, Serialize)]
struct RangeDeleteJson {
    family: String,
    start: String,
    /// Empty: to the end of the table.
    stop: String,
    timestamp: u64,
    seq: u64,
}

fn range_delete_json((family, d): &(String, RangeDelete)) -> RangeDeleteJson {
    RangeDeleteJson {
        family: family.clone(),
        start: bin(&d.start),
        stop: bin(&d.stop),
        timestamp: d.ts,
        seq: d.seq,
    }
}

/// One table snapshot as `list_snapshots` shows it.
#[derive(Debug, Serialize)]
pub struct SnapshotJson {
    /// Its name.
    pub name: String,
    /// The table it was taken of.
    pub table: String,
    /// When, in ms since the epoch.
    pub created_ms: u64,
    /// The database's last sequence number when its files were taken.
    pub seq: u64,
    /// HFiles in it.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl From<&cellar::TableSnapshotInfo> for SnapshotJson {
    fn from(i: &cellar::TableSnapshotInfo) -> Self {
        SnapshotJson {
            name: i.name.clone(),
            table: i.table.name.to_string(),
            created_ms: i.created_ms,
            seq: i.seq,
            files: i.files,
            bytes: i.bytes,
        }
    }
}

/// `ms` since the epoch as `YYYY-MM-DD hh:mm:ss UTC` (the civil calendar from a day count,
/// valid for every date after 1970).
pub fn utc_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 0000-03-01 in 400-year eras of 146,097 days.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// `explain`'s report, its bytes made text as a get's are.
#[derive(Debug, Serialize)]
pub struct Explained {
    /// The get's read point.
    pub read_point: u64,
    /// The clock reading TTLs were judged at.
    pub now_ms: u64,
    /// Each source, in the order the get considers them.
    pub sources: Vec<SourceJson>,
    /// Each cell of the row found, in key order.
    pub cells: Vec<ExplainedJson>,
    /// Rows the get returns (0 or 1).
    pub rows: usize,
    /// The cells the get returns.
    pub result: Vec<CellJson>,
}

/// One source of `explain`.
#[derive(Debug, Serialize)]
pub struct SourceJson {
    /// Its family.
    pub family: String,
    /// `memstore`, `frozen memstore N` or `file N`.
    pub source: String,
    /// For a file: level, key range, time range, cells (text mode's description).
    pub detail: String,
    /// `read`, or `skipped: key range` / `skipped: time range` / `skipped: bloom filter`.
    pub decision: String,
    /// Cells of the row read from it.
    pub cells: usize,
}

/// One cell of `explain`.
#[derive(Debug, Serialize)]
pub struct ExplainedJson {
    /// The cell as a get shows it.
    #[serde(flatten)]
    pub cell: CellJson,
    /// The sequence number of its write.
    pub seq: u64,
    /// Index of its source in `sources`.
    pub source: usize,
    /// Its fate: `returned`, `masked`, `marker`, `beyond VERSIONS`, ...
    pub verdict: &'static str,
    /// For a masked put: the index in `cells` of the marker that masks it.
    pub masked_by: Option<usize>,
}

/// Aligned columns (entries start with a space, as in the HBase shell), two spaces between.
fn columns(header: &[&str], rows: Vec<Vec<String>>, out: &mut String) {
    let mut t = Table::new(header, &vec![Align::Left; header.len()]);
    for r in rows {
        t.row(r);
    }
    t.render(0, out);
}

/// [`cell_text`] of a cell in its JSON form, uncut.
fn cell_json_text(c: &CellJson) -> String {
    timestamp_value(c.timestamp, c.kind, &c.value)
}

/// `timestamp=5, value=v` for a put (`kind` "Put"), `timestamp=5, type=DeleteColumn` for a
/// marker.
fn timestamp_value(timestamp: u64, kind: &str, value: &str) -> String {
    if kind == "Put" {
        format!("timestamp={timestamp}, value={value}")
    } else {
        format!("timestamp={timestamp}, type={kind}")
    }
}

impl Explained {
    fn text(&self, out: &mut String) {
        let sources: Vec<Vec<String>> = self
            .sources
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let decision = match s.decision.as_str() {
                    "read" => format!("read, {} cell(s)", s.cells),
                    d => d.to_owned(),
                };
                let what = if s.detail.is_empty() {
                    s.source.clone()
                } else {
                    format!("{} ({})", s.source, s.detail)
                };
                vec![format!(" #{i}"), s.family.clone(), what, decision]
            })
            .collect();
        columns(&["SOURCE", "FAMILY", "WHAT", "DECISION"], sources, out);
        let cells: Vec<Vec<String>> = self
            .cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let verdict = match c.masked_by {
                    Some(m) => format!("{} by #{m}", c.verdict),
                    None => c.verdict.to_owned(),
                };
                vec![
                    format!(" #{i}"),
                    c.cell.column.clone(),
                    cell_json_text(&c.cell),
                    c.seq.to_string(),
                    format!("#{}", c.source),
                    verdict,
                ]
            })
            .collect();
        columns(
            &[
                "CELL",
                "COLUMN",
                "TIMESTAMP+VALUE",
                "SEQ",
                "SOURCE",
                "VERDICT",
            ],
            cells,
            out,
        );
        out.push_str(&format!(
            "read point {}, clock {} ms\n",
            self.read_point, self.now_ms
        ));
        let result: Vec<(String, String)> = self
            .result
            .iter()
            .map(|c| (format!(" {}", c.column), cell_json_text(c)))
            .collect();
        two_columns(("COLUMN", "CELL"), &result, out);
        out.push_str(&format!("{} row(s)\n", self.rows));
    }
}

fn json<T: Serialize + ?Sized>(v: &T) -> String {
    // Plain data (strings, numbers, vectors, derived structs) always serializes.
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// A cell as JSON and text see it.
#[derive(Debug, Serialize)]
pub struct CellJson {
    row: String,
    column: String,
    timestamp: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    value: String,
}

/// The JSON (and text) form of a cell.
pub fn cell_json(c: &Shown) -> CellJson {
    CellJson {
        row: c.row.clone(),
        column: c.column.clone(),
        timestamp: c.timestamp,
        kind: c.cell_type.name(),
        value: c.value.clone(),
    }
}

/// `timestamp=5, value=v`, or `timestamp=5, type=DeleteColumn` for a marker (raw scans); cut
/// to `max` characters (MAXLENGTH) as HBase cuts it.
fn cell_text(c: &Shown, max: Option<usize>) -> String {
    let s = timestamp_value(c.timestamp, c.cell_type.name(), &c.value);
    match max {
        Some(n) => s.chars().take(n).collect(),
        None => s,
    }
}

/// Two columns, the first padded to its widest entry (entries start with a space, as in the
/// HBase shell), two spaces between.
fn two_columns(header: (&str, &str), rows: &[(String, String)], out: &mut String) {
    let w = rows
        .iter()
        .map(|r| r.0.chars().count())
        .chain(std::iter::once(header.0.len()))
        .max()
        .unwrap_or(0);
    let mut line = |a: &str, b: &str| {
        let pad = w.saturating_sub(a.chars().count());
        out.push_str(a);
        out.push_str(&" ".repeat(pad));
        out.push_str("  ");
        out.push_str(b);
        out.push('\n');
    };
    line(header.0, header.1);
    for (a, b) in rows {
        line(a, b);
    }
}

/// HBase's describe line of a family; every value quoted, as HBase prints (and as the parser
/// reads back).
pub fn family_text(f: &FamilyDescriptor) -> String {
    let ttl = match f.ttl {
        None => "FOREVER".to_owned(),
        Some(d) => d.as_secs().to_string(),
    };
    let (bloom, config) = bloom_names(f.bloom);
    let config = match config {
        Some(n) => format!(", CONFIGURATION => {{'RowPrefixBloomFilter.prefix_length' => '{n}'}}"),
        None => String::new(),
    };
    format!(
        "{{NAME => '{}', VERSIONS => '{}', MIN_VERSIONS => '{}', TTL => '{ttl}', KEEP_DELETED_CELLS => '{}', BLOOMFILTER => '{bloom}'{config}, COMPRESSION => '{}', BLOCKSIZE => '{}', NEW_VERSION_BEHAVIOR => '{}'}}",
        f.name,
        f.max_versions,
        f.min_versions,
        kdc_name(f.keep_deleted_cells),
        compression_name(f.compression),
        f.block_size,
        f.new_version_behavior
    )
}

fn kdc_name(k: KeepDeletedCells) -> &'static str {
    match k {
        KeepDeletedCells::False => "FALSE",
        KeepDeletedCells::True => "TRUE",
        KeepDeletedCells::Ttl => "TTL",
    }
}

fn bloom_names(b: BloomType) -> (&'static str, Option<u32>) {
    match b {
        BloomType::None => ("NONE", None),
        BloomType::Row => ("ROW", None),
        BloomType::RowCol => ("ROWCOL", None),
        BloomType::RowPrefix(n) => ("ROWPREFIX_FIXED_LENGTH", Some(n)),
    }
}

fn compression_name(c: CompressionType) -> &'static str {
    match c {
        CompressionType::None => "NONE",
        CompressionType::Lz4 => "LZ4",
    }
}

#[derive(Debug, Serialize)]
#[allow(
    non_snake_case,
    reason = "the keys are HBase's attribute names, as in describe"
)]
struct FamilyJson {
    NAME: String,
    VERSIONS: u32,
    MIN_VERSIONS: u32,
    /// Seconds, or the string "FOREVER".
    TTL: serde_json::Value,
    KEEP_DELETED_CELLS: &'static str,
    BLOOMFILTER: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    PREFIX_LENGTH: Option<u32>,
    COMPRESSION: &'static str,
    BLOCKSIZE: u32,
    NEW_VERSION_BEHAVIOR: bool,
}

fn family_json(f: &FamilyDescriptor) -> FamilyJson {
    let (bloom, prefix) = bloom_names(f.bloom);
    FamilyJson {
        NAME: f.name.clone(),
        VERSIONS: f.max_versions,
        MIN_VERSIONS: f.min_versions,
        TTL: match f.ttl {
            None => serde_json::Value::from("FOREVER"),
            Some(d) => serde_json::Value::from(d.as_secs()),
        },
        KEEP_DELETED_CELLS: kdc_name(f.keep_deleted_cells),
        BLOOMFILTER: bloom,
        PREFIX_LENGTH: prefix,
        COMPRESSION: compression_name(f.compression),
        BLOCKSIZE: f.block_size,
        NEW_VERSION_BEHAVIOR: f.new_version_behavior,
    }
}

fn ruby_list(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!("=> [{}]", quoted.join(", "))
}

impl Output {
    /// The text form; `took` is printed as HBase does, after the body. Lines that HBase
    /// prints after the timing (Ruby's `=> value` echo) come last.
    pub fn text(&self, took: Duration) -> String {
        let mut out = String::new();
        let mut tail = String::new();
        match self {
            Output::Done => {}
            Output::Message(m) => {
                out.push_str(m);
                out.push('\n');
            }
            Output::Cells {
                get,
                rows,
                cells,
                max_length,
            } => {
                let lines: Vec<(String, String)> = cells
                    .iter()
                    .map(|c| {
                        if *get {
                            (format!(" {}", c.column), cell_text(c, *max_length))
                        } else {
                            (
                                format!(" {}", c.row),
                                format!("column={}, {}", c.column, cell_text(c, *max_length)),
                            )
                        }
                    })
                    .collect();
                let header = if *get {
                    ("COLUMN", "CELL")
                } else {
                    ("ROW", "COLUMN+CELL")
                };
                two_columns(header, &lines, &mut out);
                out.push_str(&format!("{rows} row(s)\n"));
            }
            Output::Count(n) => out.push_str(&format!("{n} row(s)\n")),
            Output::Names {
                header,
                names,
                echo,
                ..
            } => {
                out.push_str(header);
                out.push('\n');
                for n in names {
                    out.push_str(n);
                    out.push('\n');
                }
                out.push_str(&format!("{} row(s)\n", names.len()));
                if *echo {
                    tail = format!("{}\n", ruby_list(names));
                }
            }
            Output::Flag { value, text, .. } => {
                out.push_str(text);
                out.push('\n');
                tail = format!("=> {value}\n");
            }
            Output::Describe {
                table,
                enabled,
                families,
            } => {
                let state = if *enabled { "ENABLED" } else { "DISABLED" };
                out.push_str(&format!(
                    "Table {table} is {state}\n{table}\nCOLUMN FAMILIES DESCRIPTION\n"
                ));
                for f in families {
                    out.push_str(&family_text(f));
                    out.push_str("\n\n");
                }
                out.push_str(&format!("{} row(s)\n", families.len()));
            }
            Output::Counter(Some(n)) => out.push_str(&format!("COUNTER VALUE = {n}\n")),
            Output::Counter(None) => {
                out.push_str("No counter found at specified coordinates\n");
            }
            Output::Appended(v) => out.push_str(&format!("CURRENT VALUE = {}\n", bin(v))),
            Output::Status { report, .. } => {
                out.push_str(report);
                if !report.ends_with('\n') {
                    out.push('\n');
                }
            }
            Output::Help(h) => return h.clone(),
            Output::Info { text, .. } => {
                out.push_str(text);
                out.push('\n');
            }
            Output::Explain(e) => e.text(&mut out),
            Output::Snapshots(list) => {
                // HBase's layout: the name, then the table and creation time.
                let width = list.iter().map(|s| s.name.len()).max().unwrap_or(0).max(8);
                out.push_str(&format!("{:<width$} TABLE + CREATION TIME\n", "SNAPSHOT"));
                for s in list {
                    out.push_str(&format!(
                        " {:<width$} {} ({}), {} file(s), {} bytes\n",
                        s.name,
                        s.table,
                        utc_time(s.created_ms),
                        s.files,
                        s.bytes
                    ));
                }
                out.push_str(&format!("{} row(s)\n", list.len()));
                let names: Vec<String> = list.iter().map(|s| s.name.clone()).collect();
                tail = format!("{}\n", ruby_list(&names));
            }
            Output::FeedSlots(list) => {
                let width = list.iter().map(|s| s.name.len()).max().unwrap_or(0).max(9);
                out.push_str(&format!("{:<width$} ACKED SEQ + WAL HELD\n", "FEED SLOT"));
                for s in list {
                    if s.lost {
                        out.push_str(&format!(
                            " {:<width$} {} LOST (drop it; its consumer starts again from a copy)\n",
                            s.name, s.acked
                        ));
                    } else {
                        out.push_str(&format!(
                            " {:<width$} {}, segment {} on, {} bytes\n",
                            s.name, s.acked, s.segment, s.held_bytes
                        ));
                    }
                }
                out.push_str(&format!("{} row(s)\n", list.len()));
            }
            Output::RangeDeletes(list) => {
                let rows = list
                    .iter()
                    .map(range_delete_json)
                    .map(|d| {
                        vec![
                            format!(" {}", d.family),
                            d.start,
                            d.stop,
                            d.timestamp.to_string(),
                            d.seq.to_string(),
                        ]
                    })
                    .collect();
                columns(
                    &["FAMILY", "START", "STOP", "TIMESTAMP", "SEQ"],
                    rows,
                    &mut out,
                );
                out.push_str(&format!("{} row(s)\n", list.len()));
            }
            Output::ApproxSize {
                estimate: e,
                split_point,
            } => {
                columns(
                    &["", "BYTES", "CELLS", "FILES"],
                    vec![
                        vec![
                            " files".into(),
                            e.bytes.to_string(),
                            e.cells.to_string(),
                            e.files.to_string(),
                        ],
                        vec![
                            " memstores".into(),
                            e.memstore_bytes.to_string(),
                            e.memstore_cells.to_string(),
                            String::new(),
                        ],
                    ],
                    &mut out,
                );
                match split_point {
                    Some(p) => out.push_str(&format!("split point: {}\n", bin(p))),
                    None => out.push_str("split point: none\n"),
                }
            }
            Output::Exit => return String::new(),
        }
        out.push_str(&format!("Took {:.4} seconds\n", took.as_secs_f64()));
        out.push_str(&tail);
        out
    }

    /// The JSON form: one object, no newline.
    pub fn json(&self) -> String {
        match self {
            Output::Done | Output::Message(_) | Output::Exit => r#"{"ok":true}"#.into(),
            Output::Cells { rows, cells, .. } => {
                #[derive(Serialize)]
                struct Shape {
                    ok: bool,
                    rows: usize,
                    cells: Vec<CellJson>,
                }
                json(&Shape {
                    ok: true,
                    rows: *rows,
                    cells: cells.iter().map(cell_json).collect(),
                })
            }
            Output::Count(n) => format!(r#"{{"ok":true,"count":{n}}}"#),
            Output::Names { field, names, .. } => {
                format!(r#"{{"ok":true,"{field}":{}}}"#, json(names))
            }
            Output::Flag { field, value, .. } => format!(r#"{{"ok":true,"{field}":{value}}}"#),
            Output::Describe {
                table,
                enabled,
                families,
            } => {
                #[derive(Serialize)]
                struct Shape {
                    ok: bool,
                    table: String,
                    enabled: bool,
                    families: Vec<FamilyJson>,
                }
                json(&Shape {
                    ok: true,
                    table: table.clone(),
                    enabled: *enabled,
                    families: families.iter().map(family_json).collect(),
                })
            }
            Output::Counter(v) => format!(r#"{{"ok":true,"value":{}}}"#, json(v)),
            Output::Appended(v) => format!(r#"{{"ok":true,"value":{}}}"#, json(&bin(v))),
            Output::Status { report, stats } => format!(
                r#"{{"ok":true,"stats":{},"report":{}}}"#,
                json(stats),
                json(report)
            ),
            Output::Help(h) => format!(r#"{{"ok":true,"help":{}}}"#, json(h)),
            Output::Explain(e) => {
                #[derive(Serialize)]
                struct Shape<'a> {
                    ok: bool,
                    #[serde(flatten)]
                    explained: &'a Explained,
                }
                json(&Shape {
                    ok: true,
                    explained: e,
                })
            }
            Output::Info { field, value, .. } => {
                format!(r#"{{"ok":true,"{field}":{}}}"#, json(value))
            }
            Output::Snapshots(list) => format!(r#"{{"ok":true,"snapshots":{}}}"#, json(list)),
            Output::FeedSlots(list) => {
                let list: Vec<_> = list.iter().map(feed_slot_json).collect();
                format!(r#"{{"ok":true,"feed_slots":{}}}"#, json(&list))
            }
            Output::RangeDeletes(list) => {
                let list: Vec<_> = list.iter().map(range_delete_json).collect();
                format!(r#"{{"ok":true,"range_deletes":{}}}"#, json(&list))
            }
            Output::ApproxSize {
                estimate: e,
                split_point,
            } => {
                #[derive(Serialize)]
                struct Shape {
                    ok: bool,
                    bytes: u64,
                    cells: u64,
                    files: u64,
                    memstore_bytes: u64,
                    memstore_cells: u64,
                    split_point: Option<String>,
                }
                json(&Shape {
                    ok: true,
                    bytes: e.bytes,
                    cells: e.cells,
                    files: e.files,
                    memstore_bytes: e.memstore_bytes,
                    memstore_cells: e.memstore_cells,
                    split_point: split_point.as_deref().map(bin),
                })
            }
        }
    }
}

/// `{"ok":false,"kind":"...","error":"..."}`.
pub fn error_json(e: &ShellError) -> String {
    #[derive(Serialize)]
    struct Shape<'a> {
        ok: bool,
        kind: &'a str,
        error: String,
    }
    json(&Shape {
        ok: false,
        kind: e.kind,
        error: e.to_string(),
    })
}

/// The JSON `kind` of an engine error: the variant's name, so scripts branch on it as Rust
/// callers branch on the variant.
pub fn error_kind(e: &cellar::Error) -> &'static str {
    use cellar::Error as E;
    match e {
        E::Io { .. } => "Io",
        E::NoSpace { .. } => "NoSpace",
        E::Corruption { .. } => "Corruption",
        E::Format(_) => "Format",
        E::Poisoned(_) => "Poisoned",
        E::Locked(_) => "Locked",
        E::TableNotFound(_) => "TableNotFound",
        E::TableExists(_) => "TableExists",
        E::SnapshotNotFound(_) => "SnapshotNotFound",
        E::SnapshotExists(_) => "SnapshotExists",
        E::NamespaceNotFound(_) => "NamespaceNotFound",
        E::FamilyNotFound { .. } => "FamilyNotFound",
        E::InvalidArgument(_) => "InvalidArgument",
        E::Closed => "Closed",
        E::MemstoreFull { .. } => "MemstoreFull",
        E::ChangesUnavailable { .. } => "ChangesUnavailable",
        E::FeedSlotNotFound(_) => "FeedSlotNotFound",
        E::FeedSlotExists(_) => "FeedSlotExists",
        E::FeedSlotLost(_) => "FeedSlotLost",
        _ => "Error",
    }
}

impl From<cellar::Error> for ShellError {
    fn from(e: cellar::Error) -> Self {
        ShellError::new(error_kind(&e), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::convert::Show;
    use cellar::format::CellType;
    use cellar::Cell;

    #[test]
    fn utc_times_follow_the_civil_calendar() {
        for (ms, want) in [
            (0, "1970-01-01 00:00:00 UTC"),
            (951_782_400_000, "2000-02-29 00:00:00 UTC"),
            (1_796_291_877_462, "2026-12-03 09:57:57 UTC"),
            (4_102_444_799_000, "2099-12-31 23:59:59 UTC"),
        ] {
            assert_eq!(utc_time(ms), want);
        }
    }

    #[test]
    fn scan_text_matches_the_hbase_layout() {
        let out = Output::Cells {
            get: false,
            rows: 1,
            cells: Show::default()
                .cells(&[
                    Cell::new("r1", "cf", "q", 123, CellType::Put, "v"),
                    Cell::new("r1", "cf", "", 99, CellType::DeleteFamily, ""),
                ])
                .unwrap(),
            max_length: None,
        };
        assert_eq!(
            out.text(Duration::from_micros(1200)),
            "ROW  COLUMN+CELL\n r1  column=cf:q, timestamp=123, value=v\n r1  column=cf:, timestamp=99, type=DeleteFamily\n1 row(s)\nTook 0.0012 seconds\n"
        );
        assert_eq!(
            out.json(),
            r#"{"ok":true,"rows":1,"cells":[{"row":"r1","column":"cf:q","timestamp":123,"type":"Put","value":"v"},{"row":"r1","column":"cf:","timestamp":99,"type":"DeleteFamily","value":""}]}"#
        );
    }

    #[test]
    fn approxsize_prints_files_and_memstores_and_one_json_line() {
        let mut estimate = cellar::RangeEstimate::default();
        (estimate.bytes, estimate.cells, estimate.files) = (4096, 100, 2);
        (estimate.memstore_bytes, estimate.memstore_cells) = (700, 5);
        let out = Output::ApproxSize {
            estimate,
            split_point: Some(b"r\xff".to_vec()),
        };
        assert_eq!(
            out.text(Duration::ZERO),
            "            BYTES  CELLS  FILES\n files      4096   100    2\n memstores  700    5\nsplit point: r\\xFF\nTook 0.0000 seconds\n"
        );
        assert_eq!(
            out.json(),
            r#"{"ok":true,"bytes":4096,"cells":100,"files":2,"memstore_bytes":700,"memstore_cells":5,"split_point":"r\\xFF"}"#
        );
        let none = Output::ApproxSize {
            estimate: cellar::RangeEstimate::default(),
            split_point: None,
        };
        assert!(none.json().ends_with(r#""split_point":null}"#));
        assert!(none.text(Duration::ZERO).contains("split point: none\n"));
    }

    #[test]
    fn range_deletes_print_as_a_table_and_one_json_line() {
        let d = |start: &[u8], stop: &[u8], seq| RangeDelete {
            start: start.to_vec(),
            stop: stop.to_vec(),
            ts: 123,
            seq,
        };
        let out = Output::RangeDeletes(vec![
            ("cf".into(), d(b"a", b"b\xff", 45)),
            ("meta".into(), d(b"\x00", b"", 46)),
        ]);
        assert_eq!(
            out.text(Duration::ZERO),
            "FAMILY  START  STOP   TIMESTAMP  SEQ\n cf     a      b\\xFF  123        45\n meta   \\x00          123        46\n2 row(s)\nTook 0.0000 seconds\n"
        );
        assert_eq!(
            out.json(),
            r#"{"ok":true,"range_deletes":[{"family":"cf","start":"a","stop":"b\\xFF","timestamp":123,"seq":45},{"family":"meta","start":"\\x00","stop":"","timestamp":123,"seq":46}]}"#
        );
        assert_eq!(
            Output::RangeDeletes(Vec::new()).json(),
            r#"{"ok":true,"range_deletes":[]}"#
        );
    }

    #[test]
    fn bytes_are_escaped_in_both_shapes() {
        let out = Output::Cells {
            get: true,
            rows: 1,
            cells: Show::default()
                .cells(&[Cell::new(
                    vec![0u8, b'r'],
                    "cf",
                    vec![0xffu8],
                    1,
                    CellType::Put,
                    "a\"b\n",
                )])
                .unwrap(),
            max_length: None,
        };
        assert_eq!(
            out.text(Duration::ZERO),
            "COLUMN    CELL\n cf:\\xFF  timestamp=1, value=a\"b\\x0A\n1 row(s)\nTook 0.0000 seconds\n"
        );
        assert!(
            out.json().contains(r#""row":"\\x00r","column":"cf:\\xFF""#),
            "{}",
            out.json()
        );
    }
}
