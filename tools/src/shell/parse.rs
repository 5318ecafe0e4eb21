//! Statements of the HBase shell into typed [`Command`]s.
//!
//! Two steps: the tokens of a statement become generic values ([`Val`]: strings, integers,
//! bare words, `{K => V}` maps, `[..]` lists — Ruby's trailing `K => V, ...` without braces
//! too), then each command takes its arguments from those values, so that every error names
//! what was expected and where: `line 1, column 14: expected a table name string`.

use std::collections::VecDeque;
use std::time::Duration;

use cellar::{
    BloomType, CompressionType, FamilyDescriptor, Filter, Get, KeepDeletedCells, Scan,
    TableDescriptor, TableName,
};

use super::convert::{check_class, Converter, Show, NAMES};
use super::filter::parse_filter;
use super::lexer::{tokenize, Tok, Token};
use super::{kind, Pos, ShellError};

/// A generic argument value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    /// A quoted string.
    Str(Vec<u8>),
    /// An integer.
    Int(i64),
    /// A bare word (`VERSIONS`, `true`, `nil`).
    Word(String),
    /// `{K => V, ...}`.
    Map(Vec<(Arg, Arg)>),
    /// `[a, b]`.
    List(Vec<Arg>),
}

/// A value and where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// The value.
    pub val: Val,
    /// Its first character.
    pub pos: Pos,
}

/// A column named `'cf:q'` (qualifier `Some`) or `'cf'` (a whole family).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    /// Family.
    pub family: String,
    /// Qualifier, absent for a whole family.
    pub qualifier: Option<Vec<u8>>,
    /// `'cf:q:toLong'`: how get and scan print this column's values.
    pub converter: Option<Converter>,
}

/// The marker `delete` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteKind {
    /// HBase shell's default for `'cf:q'`: every version at or below ts (DeleteColumn).
    Column,
    /// `'cf'` alone, or `TYPE => 'FAMILY'`: every column of the family at or below ts.
    Family,
    /// `TYPE => 'VERSION'`: one version at exactly ts, the newest when ts is omitted (Delete).
    Version,
    /// `TYPE => 'FAMILY_VERSION'`: every column of the family at exactly ts.
    FamilyVersion,
}

/// A change of `alter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterOp {
    /// Add the family, or change the named attributes of an existing one.
    Family(FamilyPatch),
    /// Remove the family and its data.
    Delete(String),
}

/// Family attributes as written: only those given are set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FamilyPatch {
    /// NAME.
    pub name: String,
    /// VERSIONS.
    pub max_versions: Option<u32>,
    /// MIN_VERSIONS.
    pub min_versions: Option<u32>,
    /// TTL (`Some(None)` is FOREVER).
    pub ttl: Option<Option<Duration>>,
    /// KEEP_DELETED_CELLS.
    pub keep_deleted_cells: Option<KeepDeletedCells>,
    /// BLOOMFILTER.
    pub bloom: Option<BloomType>,
    /// COMPRESSION.
    pub compression: Option<CompressionType>,
    /// BLOCKSIZE.
    pub block_size: Option<u32>,
    /// NEW_VERSION_BEHAVIOR.
    pub new_version_behavior: Option<bool>,
}

impl FamilyPatch {
    /// Apply to `f`.
    pub fn apply(&self, mut f: FamilyDescriptor) -> FamilyDescriptor {
        if let Some(v) = self.max_versions {
            f.max_versions = v;
        }
        if let Some(v) = self.min_versions {
            f.min_versions = v;
        }
        if let Some(v) = self.ttl {
            f.ttl = v;
        }
        if let Some(v) = self.keep_deleted_cells {
            f.keep_deleted_cells = v;
        }
        if let Some(v) = self.bloom {
            f.bloom = v;
        }
        if let Some(v) = self.compression {
            f.compression = v;
        }
        if let Some(v) = self.block_size {
            f.block_size = v;
        }
        if let Some(v) = self.new_version_behavior {
            f.new_version_behavior = v;
        }
        f
    }
}

/// Rows `deleteall` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowSel {
    /// One row.
    Row(Vec<u8>),
    /// Every row starting with the prefix (`{ROWPREFIXFILTER => 'p'}`).
    Prefix(Vec<u8>),
}

/// A parsed shell command.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    missing_docs,
    reason = "fields are named as the HBase shell arguments they hold"
)]
pub enum Command {
    CreateNamespace {
        name: String,
    },
    DropNamespace {
        name: String,
    },
    ListNamespace {
        pattern: Option<String>,
    },
    ListNamespaceTables {
        namespace: String,
    },
    Create {
        desc: TableDescriptor,
    },
    Alter {
        table: String,
        ops: Vec<AlterOp>,
    },
    Describe {
        table: String,
    },
    List {
        pattern: Option<String>,
    },
    Exists {
        table: String,
    },
    Disable {
        table: String,
    },
    Enable {
        table: String,
    },
    IsEnabled {
        table: String,
    },
    IsDisabled {
        table: String,
    },
    Drop {
        table: String,
    },
    Truncate {
        table: String,
    },
    /// `clone_table_schema 'src', 'dst'`: a new, empty table with `src`'s families.
    CloneTableSchema {
        src: String,
        dst: String,
    },
    Put {
        table: String,
        row: Vec<u8>,
        family: String,
        qualifier: Vec<u8>,
        value: Vec<u8>,
        ts: Option<u64>,
        /// Per-cell TTL (`{TTL => ms}`).
        ttl_ms: Option<u64>,
    },
    Get {
        table: String,
        get: Box<Get>,
        show: Box<Show>,
    },
    /// `explain`: a get taken apart (`Table::explain`).
    Explain {
        table: String,
        get: Box<Get>,
        show: Box<Show>,
    },
    Scan {
        table: String,
        scan: Box<Scan>,
        show: Box<Show>,
    },
    Delete {
        table: String,
        row: Vec<u8>,
        column: ColumnSpec,
        ts: Option<u64>,
        kind: DeleteKind,
    },
    DeleteAll {
        table: String,
        rows: RowSel,
        column: Option<ColumnSpec>,
        ts: Option<u64>,
    },
    /// `delete_rows 't', {...}`: one row-range delete (`Table::delete_rows_with`); an empty
    /// `stop` runs to the end of the table, `families: None` is every family.
    DeleteRows {
        table: String,
        start: Vec<u8>,
        stop: Vec<u8>,
        families: Option<Vec<String>>,
        ts: Option<u64>,
    },
    /// `list_range_deletes 't'`: the table's live row-range deletes (`Db::range_deletes`).
    ListRangeDeletes {
        table: String,
    },
    /// `approxsize 't'[, {...}]`: `Table::estimate_range` over `[start, stop)` (an empty
    /// `stop`: to the end) and the table's `Table::split_point`.
    ApproxSize {
        table: String,
        start: Vec<u8>,
        stop: Vec<u8>,
    },
    Incr {
        table: String,
        row: Vec<u8>,
        family: String,
        qualifier: Vec<u8>,
        amount: i64,
    },
    GetCounter {
        table: String,
        row: Vec<u8>,
        family: String,
        qualifier: Vec<u8>,
    },
    Append {
        table: String,
        row: Vec<u8>,
        family: String,
        qualifier: Vec<u8>,
        value: Vec<u8>,
    },
    Count {
        table: String,
        interval: u64,
        filter: Option<Filter>,
    },
    Flush {
        table: Option<String>,
    },
    Compact {
        table: String,
        family: Option<String>,
    },
    MajorCompact {
        table: String,
        family: Option<String>,
    },
    Status,
    ShowFilters,
    /// `snapshot 't', 'name'[, {SKIP_FLUSH => true}]`.
    Snapshot {
        table: String,
        name: String,
        skip_flush: bool,
    },
    /// `clone_snapshot 'name', 't'`.
    CloneSnapshot {
        name: String,
        table: String,
    },
    /// `restore_snapshot 'name'`.
    RestoreSnapshot {
        name: String,
    },
    /// `list_snapshots ['regex']`, `list_table_snapshots 'table regex'[, 'regex']`.
    ListSnapshots {
        table_pattern: Option<String>,
        pattern: Option<String>,
    },
    /// `list_feed_slots`.
    ListFeedSlots,
    /// `create_feed_slot 'name'[, since]`.
    CreateFeedSlot {
        name: String,
        since: Option<u64>,
    },
    /// `drop_feed_slot 'name'`.
    DropFeedSlot {
        name: String,
    },
    /// `delete_snapshot 'name'`.
    DeleteSnapshot {
        name: String,
    },
    /// `delete_all_snapshot 'regex'`, `delete_table_snapshots 'table regex'[, 'regex']`.
    DeleteSnapshots {
        table_pattern: Option<String>,
        pattern: Option<String>,
    },
    DescribeNamespace {
        name: String,
    },
    Version,
    Help {
        command: Option<String>,
    },
    Exit,
}

/// Commands of HBase's shell that have no counterpart here, and why: an operator who types
/// one gets `Unsupported` with the reason (and what to use instead) rather than "unknown
/// command".
const HBASE_ONLY: &[(&str, &str)] = &[
    ("split", "an embedded table is one region"),
    ("merge_region", "an embedded table is one region"),
    ("move", "an embedded database has no region servers"),
    ("assign", "an embedded database has no region servers"),
    ("unassign", "an embedded database has no region servers"),
    ("balancer", "an embedded database has no region servers"),
    (
        "balance_switch",
        "an embedded database has no region servers",
    ),
    ("list_regions", "an embedded table is one region"),
    ("locate_region", "an embedded table is one region"),
    ("get_splits", "an embedded table is one region"),
    ("grant", "an embedded database has no users or permissions"),
    ("revoke", "an embedded database has no users or permissions"),
    (
        "user_permission",
        "an embedded database has no users or permissions",
    ),
    ("add_peer", "an embedded database has no replication"),
    ("list_peers", "an embedded database has no replication"),
    ("remove_peer", "an embedded database has no replication"),
    (
        "enable_table_replication",
        "an embedded database has no replication",
    ),
    (
        "disable_table_replication",
        "an embedded database has no replication",
    ),
];

/// A command and where its statement starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// The command.
    pub command: Command,
    /// Its first character.
    pub pos: Pos,
}

/// Every command: name, usage, one-line description (for `help` and for usage errors).
pub const COMMANDS: &[(&str, &str, &str)] = &[
    ("create_namespace", "create_namespace 'ns'", "Create a namespace"),
    ("drop_namespace", "drop_namespace 'ns'", "Drop an empty namespace"),
    ("list_namespace", "list_namespace ['regex']", "List namespaces"),
    ("describe_namespace", "describe_namespace 'ns'", "Show a namespace (it has no properties here)"),
    ("list_namespace_tables", "list_namespace_tables 'ns'", "List the tables of a namespace"),
    ("create", "create 't', 'cf1'[, {NAME => 'cf2', VERSIONS => 3, MIN_VERSIONS => 0, TTL => secs, KEEP_DELETED_CELLS => false, BLOOMFILTER => 'ROW', COMPRESSION => 'LZ4', BLOCKSIZE => 65536, NEW_VERSION_BEHAVIOR => false}, ...]", "Create a table"),
    ("alter", "alter 't', {NAME => 'cf', VERSIONS => 5} | 'cf' | {NAME => 'cf', METHOD => 'delete'} | 'delete' => 'cf'", "Add, change or remove families"),
    ("describe", "describe 't'", "Show a table's families (also: desc)"),
    ("list", "list ['regex']", "List tables"),
    ("exists", "exists 't'", "Does the table exist"),
    ("disable", "disable 't'", "Disable a table (refuses reads and writes; needed before drop)"),
    ("enable", "enable 't'", "Enable a disabled table"),
    ("is_enabled", "is_enabled 't'", "Is the table enabled"),
    ("is_disabled", "is_disabled 't'", "Is the table disabled"),
    ("drop", "drop 't'", "Drop a disabled table"),
    ("truncate", "truncate 't'", "Drop and recreate a table with the same families"),
    ("truncate_preserve", "truncate_preserve 't'", "As truncate (there are no region boundaries to keep)"),
    ("clone_table_schema", "clone_table_schema 'src', 'dst'[, true|false]", "Create an empty table with another table's families (the flag, HBase's preserve_splits, has no regions to keep)"),
    ("put", "put 't', 'row', 'cf:q', 'value'[, ts][, {TTL => ms}]", "Write a cell"),
    ("get", "get 't', 'row'[, 'cf:q[:toLong]' | {COLUMN => 'cf:q' | COLUMNS => ['cf', 'cf:q'], VERSIONS => n, TIMERANGE => [min, max], TIMESTAMP => ts, FILTER => \"...\", FORMATTER => 'toString', MAXLENGTH => n}]", "Read a row"),
    ("explain", "explain 't', 'row'[, the options of get]", "Show how a get is answered: each memstore and file read or skipped (and why), every cell of the row with its fate (returned, masked and by which marker, beyond VERSIONS, expired, out of the time range, ...), and the result (a Cellar extension)"),
    ("scan", "scan 't'[, {STARTROW => 'a', STOPROW => 'b', ROWPREFIXFILTER => 'p', LIMIT => n, REVERSED => true, RAW => true, VERSIONS => n, COLUMNS => [...], TIMERANGE => [min, max], TIMESTAMP => ts, BATCH => n, FILTER => \"...\", FORMATTER => 'toString', MAXLENGTH => n}]", "Read rows"),
    ("delete", "delete 't', 'row', 'cf:q' | 'cf'[, ts][, {TYPE => 'VERSION' | 'FAMILY_VERSION'}]", "Write a delete marker"),
    ("deleteall", "deleteall 't', 'row' | {ROWPREFIXFILTER => 'p'}[, 'cf:q' | 'cf'][, ts]", "Delete rows or columns"),
    ("delete_rows", "delete_rows 't', {STARTROW => 'a', STOPROW => 'b' | ROWPREFIXFILTER => 'p', COLUMN => 'cf' | COLUMNS => ['cf1', 'cf2'], TIMESTAMP => ts} ({} deletes every row)", "Delete a range of rows with one write, whatever their number (a Cellar extension)"),
    ("list_range_deletes", "list_range_deletes 't'", "List a table's live row-range deletes (a Cellar extension)"),
    ("approxsize", "approxsize 't'[, {STARTROW => 'a', STOPROW => 'b' | ROWPREFIXFILTER => 'p'}]", "Estimate the bytes and cells of a range of rows, in the files (from their indexes) and apart in the memstores, and give the table's split point (ldb's approxsize; a Cellar extension)"),
    ("incr", "incr 't', 'row', 'cf:q'[, n]", "Add to a counter"),
    ("get_counter", "get_counter 't', 'row', 'cf:q'", "Read a counter"),
    ("append", "append 't', 'row', 'cf:q', 'value'", "Append to a value"),
    ("show_filters", "show_filters", "List the filters FILTER strings may use"),
    ("count", "count 't'[, {INTERVAL => 1000, FILTER => \"...\"}]", "Count rows"),
    ("flush", "flush ['t']", "Flush memstores to files (the whole database)"),
    ("compact", "compact 't'[, 'cf']", "Run the compactions that are due"),
    ("major_compact", "major_compact 't'[, 'cf']", "Rewrite a table or family into the last level"),
    ("snapshot", "snapshot 't', 'name'[, {SKIP_FLUSH => true}]", "Keep the table's files as they are now under a name (flushed first unless SKIP_FLUSH; hard links, no copy)"),
    ("clone_snapshot", "clone_snapshot 'name', 't'", "Create a new table from a snapshot"),
    ("restore_snapshot", "restore_snapshot 'name'", "Put a disabled (or dropped) table back as its snapshot has it"),
    ("list_snapshots", "list_snapshots ['regex']", "List snapshots with their tables and creation times"),
    ("list_table_snapshots", "list_table_snapshots 'table regex'[, 'snapshot regex']", "List the snapshots of matching tables"),
    ("delete_snapshot", "delete_snapshot 'name'", "Delete a snapshot"),
    ("delete_all_snapshot", "delete_all_snapshot 'regex'", "Delete every snapshot whose name matches"),
    ("delete_table_snapshots", "delete_table_snapshots 'table regex'[, 'snapshot regex']", "Delete the snapshots of matching tables"),
    ("list_feed_slots", "list_feed_slots", "List the change feed's slots: each consumer's acknowledged seq and the WAL it holds"),
    ("create_feed_slot", "create_feed_slot 'name'[, since_seq]", "Keep the WAL after a seq (default: the last one given) for a consumer, across restarts"),
    ("drop_feed_slot", "drop_feed_slot 'name'", "Remove a feed slot; the WAL it held goes"),
    ("status", "status ['simple' | 'summary' | 'detailed']", "Levels, files, sizes and counters (one report, whichever detail is asked)"),
    ("version", "version", "The version of Cellar"),
    ("help", "help ['command']", "This list, or one command's usage"),
    ("exit", "exit", "Leave the shell (also: quit)"),
];

/// The usage line of `cmd`.
pub fn usage(cmd: &str) -> &'static str {
    COMMANDS.iter().find(|c| c.0 == cmd).map_or("", |c| c.1)
}

/// True when `src` stops in the middle of a statement (unclosed bracket, trailing comma).
pub fn is_incomplete(src: &str) -> bool {
    tokenize(src)
        .iter()
        .any(|t| matches!(&t.tok, Tok::Error(e) if e.is_incomplete()))
}

/// Parse a script: one result per statement, in order; a bad statement does not stop the
/// ones after it.
pub fn parse_script(src: &str) -> Vec<Result<Statement, ShellError>> {
    let toks = tokenize(src);
    let mut p = Parser { toks, i: 0 };
    let mut out = Vec::new();
    loop {
        while p.peek().tok == Tok::Sep {
            p.i += 1;
        }
        if p.peek().tok == Tok::Eof {
            break;
        }
        let r = p.statement();
        if r.is_err() {
            // Resynchronise at the next statement.
            while !matches!(p.peek().tok, Tok::Sep | Tok::Eof) {
                p.i += 1;
            }
        }
        out.push(r);
    }
    out
}

struct Parser {
    toks: Vec<Token>,
    i: usize,
}

/// Deepest nesting of `{}`/`[]`: recursion stays bounded whatever the input.
const MAX_DEPTH: usize = 32;

impl Parser {
    fn peek(&self) -> &Token {
        // tokenize always ends with Eof and the parser never moves past it.
        let last = self.toks.len().saturating_sub(1);
        &self.toks[self.i.min(last)]
    }

    fn next(&mut self) -> Result<Token, ShellError> {
        let t = self.peek().clone();
        if let Tok::Error(e) = t.tok {
            return Err(e);
        }
        if t.tok != Tok::Eof {
            self.i += 1;
        }
        Ok(t)
    }

    fn expected(&self, what: &str) -> ShellError {
        let t = self.peek();
        if let Tok::Error(e) = &t.tok {
            return e.clone();
        }
        ShellError::parse(
            t.pos,
            format!("expected {what}, found {}", t.tok.describe()),
        )
    }

    fn statement(&mut self) -> Result<Statement, ShellError> {
        let t = self.next()?;
        let Tok::Word(name) = t.tok else {
            return Err(ShellError::parse(
                t.pos,
                format!("expected a command name, found {}", t.tok.describe()),
            ));
        };
        let paren = self.peek().tok == Tok::LParen;
        if paren {
            self.i += 1;
        }
        let close = if paren { Tok::RParen } else { Tok::Sep };
        let mut items = Vec::new();
        let at_end = |t: &Tok| *t == close || *t == Tok::Eof || *t == Tok::Sep;
        if !at_end(&self.peek().tok) {
            loop {
                let v = self.value(0)?;
                if self.peek().tok == Tok::Arrow {
                    // Ruby's brace-less trailing hash: `alter 't', NAME => 'cf', VERSIONS => 5`.
                    let pos = v.pos;
                    self.i += 1;
                    let mut pairs = vec![(v, self.value(0)?)];
                    while self.peek().tok == Tok::Comma {
                        self.i += 1;
                        let k = self.value(0)?;
                        if self.next()?.tok != Tok::Arrow {
                            return Err(ShellError::parse(k.pos, "expected '=>' after this key (arguments after KEY => value pairs must be pairs too)".into()));
                        }
                        pairs.push((k, self.value(0)?));
                    }
                    items.push(Arg {
                        val: Val::Map(pairs),
                        pos,
                    });
                    break;
                }
                items.push(v);
                if self.peek().tok == Tok::Comma {
                    self.i += 1;
                } else {
                    break;
                }
            }
        }
        if paren {
            if self.peek().tok != Tok::RParen {
                return Err(self.expected("',' or ')'"));
            }
            self.i += 1;
        }
        let end = self.peek().pos;
        if !matches!(self.peek().tok, Tok::Sep | Tok::Eof) {
            return Err(self.expected("',' or the end of the command"));
        }
        let args = Args {
            cmd: name.clone(),
            items: items.into(),
            end,
        };
        Ok(Statement {
            command: command(&name, t.pos, args)?,
            pos: t.pos,
        })
    }

    fn value(&mut self, depth: usize) -> Result<Arg, ShellError> {
        if depth > MAX_DEPTH {
            return Err(self.expected("less nesting"));
        }
        let t = self.peek().clone();
        let pos = t.pos;
        let val = match t.tok {
            Tok::Str(s) => {
                self.i += 1;
                Val::Str(s)
            }
            Tok::Int(n) => {
                self.i += 1;
                Val::Int(n)
            }
            Tok::Word(w) => {
                self.i += 1;
                Val::Word(w)
            }
            Tok::LBracket => {
                self.i += 1;
                let mut items = Vec::new();
                while self.peek().tok != Tok::RBracket {
                    items.push(self.value(depth + 1)?);
                    match self.peek().tok {
                        Tok::Comma => self.i += 1,
                        Tok::RBracket => {}
                        _ => return Err(self.expected("',' or ']'")),
                    }
                }
                self.i += 1;
                Val::List(items)
            }
            Tok::LBrace => {
                self.i += 1;
                let mut pairs = Vec::new();
                while self.peek().tok != Tok::RBrace {
                    let k = self.value(depth + 1)?;
                    if self.peek().tok != Tok::Arrow {
                        return Err(self.expected("'=>'"));
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    pairs.push((k, v));
                    match self.peek().tok {
                        Tok::Comma => self.i += 1,
                        Tok::RBrace => {}
                        _ => return Err(self.expected("',' or '}'")),
                    }
                }
                self.i += 1;
                Val::Map(pairs)
            }
            _ => return Err(self.expected("a value")),
        };
        Ok(Arg { val, pos })
    }
}

/// The positional arguments of one command, taken front to back.
struct Args {
    cmd: String,
    items: VecDeque<Arg>,
    /// Where the statement ends: missing arguments are reported there.
    end: Pos,
}

fn err(pos: Pos, msg: impl Into<String>) -> ShellError {
    ShellError::parse(pos, msg.into())
}

impl Args {
    fn usage_err(&self, pos: Pos, what: &str) -> ShellError {
        err(
            pos,
            format!("expected {what} (usage: {})", usage(&self.cmd)),
        )
    }

    fn required(&mut self, what: &str) -> Result<Arg, ShellError> {
        let end = self.end;
        self.items
            .pop_front()
            .ok_or_else(|| self.usage_err(end, what))
    }

    fn bytes(&mut self, what: &str) -> Result<Vec<u8>, ShellError> {
        let a = self.required(what)?;
        match a.val {
            Val::Str(s) => Ok(s),
            _ => Err(self.usage_err(a.pos, what)),
        }
    }

    fn table(&mut self) -> Result<String, ShellError> {
        let a = self.required("a table name string")?;
        table_name(&a).map_err(|e| match e {
            None => self.usage_err(a.pos, "a table name string"),
            Some(e) => e,
        })
    }

    fn text(&mut self, what: &str) -> Result<String, ShellError> {
        let a = self.required(what)?;
        match &a.val {
            Val::Str(s) => {
                String::from_utf8(s.clone()).map_err(|_| err(a.pos, format!("{what} must be text")))
            }
            _ => Err(self.usage_err(a.pos, what)),
        }
    }

    fn opt_u64(&mut self, what: &str) -> Result<Option<u64>, ShellError> {
        match self.items.pop_front() {
            None => Ok(None),
            Some(a) => nonneg(&a, what).map(Some),
        }
    }

    fn opt_text(&mut self, what: &str) -> Result<Option<String>, ShellError> {
        if self.items.is_empty() {
            Ok(None)
        } else {
            self.text(what).map(Some)
        }
    }

    /// The one cell's column of `put`, `incr`, `append` and `get_counter`. A family alone
    /// names its empty qualifier, as in HBase's shell (its `addColumn(family, null)`).
    fn column(&mut self) -> Result<(String, Vec<u8>), ShellError> {
        let a = self.required("a column 'family:qualifier'")?;
        let c = column_spec(&a)?;
        Ok((c.family, c.qualifier.unwrap_or_default()))
    }

    fn opt_timestamp(&mut self) -> Result<Option<u64>, ShellError> {
        match self.items.front() {
            Some(Arg {
                val: Val::Int(_), ..
            }) => {
                let a = self
                    .items
                    .pop_front()
                    .ok_or_else(|| self.usage_err(self.end, "a timestamp"))?;
                timestamp(&a).map(Some)
            }
            _ => Ok(None),
        }
    }

    fn opt_map(&mut self) -> Result<Option<MapArgs>, ShellError> {
        match self.items.front() {
            Some(Arg {
                val: Val::Map(_), ..
            }) => {
                let Some(Arg {
                    val: Val::Map(pairs),
                    ..
                }) = self.items.pop_front()
                else {
                    return Ok(None);
                };
                MapArgs::new(pairs, &self.cmd).map(Some)
            }
            _ => Ok(None),
        }
    }

    fn done(mut self) -> Result<(), ShellError> {
        match self.items.pop_front() {
            None => Ok(()),
            Some(a) => Err(err(
                a.pos,
                format!("unexpected argument (usage: {})", usage(&self.cmd)),
            )),
        }
    }
}

/// A table name: `None` when the value is not a string, `Some(e)` when the name is invalid.
fn table_name(a: &Arg) -> Result<String, Option<ShellError>> {
    let Val::Str(s) = &a.val else {
        return Err(None);
    };
    let s = String::from_utf8(s.clone()).map_err(|_| Some(err(a.pos, "table names are text")))?;
    TableName::parse(&s).map_err(|e| Some(err(a.pos, e.to_string())))?;
    Ok(s)
}

fn column_spec(a: &Arg) -> Result<ColumnSpec, ShellError> {
    let Val::Str(s) = &a.val else {
        return Err(err(
            a.pos,
            "expected a column string such as 'cf:q' or 'cf'",
        ));
    };
    let (fam, mut q) = match s.iter().position(|&c| c == b':') {
        Some(i) => (&s[..i], Some(s[i + 1..].to_vec())),
        None => (&s[..], None),
    };
    // HBase's `FAMILY:QUALIFIER:CONVERTER`: a known converter after the qualifier's first `:`
    // (any other text there stays part of the qualifier).
    let mut converter = None;
    if let Some(qual) = &q {
        if let Some(i) = qual.iter().position(|&c| c == b':') {
            converter = Converter::from_column_suffix(&qual[i + 1..]).map_err(|e| {
                let mut e = err(a.pos, e);
                e.kind = kind::UNSUPPORTED;
                e
            })?;
            if converter.is_some() {
                q = Some(qual[..i].to_vec());
            }
        }
    }
    let family = String::from_utf8(fam.to_vec())
        .ok()
        .filter(|f| cellar::schema::validate_name("family", f).is_ok())
        .ok_or_else(|| {
            err(
                a.pos,
                format!(
                    "bad family name {:?} in column",
                    String::from_utf8_lossy(fam)
                ),
            )
        })?;
    Ok(ColumnSpec {
        family,
        qualifier: q,
        converter,
    })
}

fn int(a: &Arg, what: &str) -> Result<i64, ShellError> {
    match &a.val {
        Val::Int(n) => Ok(*n),
        // HBase's describe prints numbers quoted (VERSIONS => '3'): accept them back.
        Val::Str(s) => std::str::from_utf8(s)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| err(a.pos, format!("expected {what}"))),
        _ => Err(err(a.pos, format!("expected {what}"))),
    }
}

fn nonneg(a: &Arg, what: &str) -> Result<u64, ShellError> {
    let n = int(a, what)?;
    u64::try_from(n).map_err(|_| err(a.pos, format!("expected {what}, not a negative number")))
}

fn u32_arg(a: &Arg, what: &str) -> Result<u32, ShellError> {
    let n = nonneg(a, what)?;
    u32::try_from(n).map_err(|_| err(a.pos, format!("{what} {n} is too large")))
}

fn timestamp(a: &Arg) -> Result<u64, ShellError> {
    nonneg(a, "a timestamp (milliseconds)")
}

fn boolean(a: &Arg, what: &str) -> Result<bool, ShellError> {
    let s = match &a.val {
        Val::Word(w) => w.clone(),
        Val::Str(s) => String::from_utf8_lossy(s).into_owned(),
        _ => String::new(),
    };
    match s.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(err(a.pos, format!("expected true or false for {what}"))),
    }
}

/// A constant written bare or quoted (`ROW`, `'ROW'`), upper-cased.
fn constant(a: &Arg, what: &str) -> Result<String, ShellError> {
    match &a.val {
        Val::Word(w) => Ok(w.to_ascii_uppercase()),
        Val::Str(s) => Ok(String::from_utf8_lossy(s).to_ascii_uppercase()),
        _ => Err(err(a.pos, format!("expected {what}"))),
    }
}

fn bytes_of(a: &Arg, what: &str) -> Result<Vec<u8>, ShellError> {
    match &a.val {
        Val::Str(s) => Ok(s.clone()),
        _ => Err(err(a.pos, format!("expected {what} string"))),
    }
}

fn columns_of(a: &Arg) -> Result<Vec<ColumnSpec>, ShellError> {
    match &a.val {
        Val::List(items) => items.iter().map(column_spec).collect(),
        _ => Ok(vec![column_spec(a)?]),
    }
}

fn filter_of(a: &Arg) -> Result<Filter, ShellError> {
    let Val::Str(s) = &a.val else {
        return Err(err(
            a.pos,
            "expected a filter string such as \"PrefixFilter('a')\"",
        ));
    };
    parse_filter(s).map_err(|e| {
        let mut se = err(
            a.pos,
            format!("in FILTER at offset {}: {}", e.offset, e.msg),
        );
        if e.unsupported {
            se.kind = kind::UNSUPPORTED;
        }
        se
    })
}

fn time_range(a: &Arg) -> Result<(u64, u64), ShellError> {
    match &a.val {
        Val::List(v) if v.len() == 2 => Ok((timestamp(&v[0])?, timestamp(&v[1])?)),
        _ => Err(err(a.pos, "expected TIMERANGE => [min, max]")),
    }
}

/// The `{K => V}` options of a command; keys are matched by name and each may appear once.
struct MapArgs {
    pairs: Vec<(String, Arg, Pos)>,
    cmd: String,
}

impl MapArgs {
    fn new(pairs: Vec<(Arg, Arg)>, cmd: &str) -> Result<Self, ShellError> {
        let mut out: Vec<(String, Arg, Pos)> = Vec::new();
        for (k, v) in pairs {
            let Some(key) = map_key(&k) else {
                return Err(err(k.pos, "expected a key such as NAME or VERSIONS"));
            };
            if out.iter().any(|(o, _, _)| *o == key) {
                return Err(err(k.pos, format!("{key} given twice")));
            }
            out.push((key, v, k.pos));
        }
        Ok(MapArgs {
            pairs: out,
            cmd: cmd.to_owned(),
        })
    }

    fn take(&mut self, key: &str) -> Option<Arg> {
        let i = self.pairs.iter().position(|(k, _, _)| k == key)?;
        Some(self.pairs.remove(i).1)
    }

    /// Refuse what is left: a key HBase knows but this build does not is `Unsupported`.
    fn done(self, unsupported: &[&str]) -> Result<(), ShellError> {
        if let Some((k, _, pos)) = self.pairs.into_iter().next() {
            if unsupported.contains(&k.as_str()) {
                let mut e = err(pos, format!("{k} is not supported by this build"));
                e.kind = kind::UNSUPPORTED;
                return Err(e);
            }
            return Err(err(
                pos,
                format!(
                    "unknown key {k} for {} (usage: {})",
                    self.cmd,
                    usage(&self.cmd)
                ),
            ));
        }
        Ok(())
    }
}

const FAMILY_KEYS_UNSUPPORTED: &[&str] = &[
    "IN_MEMORY",
    "BLOCKCACHE",
    "DATA_BLOCK_ENCODING",
    "REPLICATION_SCOPE",
    "CACHE_DATA_ON_WRITE",
    "CACHE_INDEX_ON_WRITE",
    "CACHE_BLOOMS_ON_WRITE",
    "EVICT_BLOCKS_ON_CLOSE",
    "PREFETCH_BLOCKS_ON_OPEN",
    "MOB_THRESHOLD",
    "IS_MOB",
    "COMPRESSION_COMPACT",
    "ENCRYPTION",
    "STORAGE_POLICY",
    "DFS_REPLICATION",
    "METADATA",
];

/// Keys of a table (not a family) that HBase's `create` takes and that only shape regions:
/// an embedded table is one region, so they are checked and have nothing to do.
const TABLE_REGION_KEYS: &[&str] = &[
    "SPLITS",
    "SPLITS_FILE",
    "NUMREGIONS",
    "SPLITALGO",
    "REGION_REPLICATION",
];

/// Table keys of HBase's `create` that ask for what this build does not do.
const TABLE_KEYS_UNSUPPORTED: &[&str] = &[
    "MAX_FILESIZE",
    "READONLY",
    "MEMSTORE_FLUSHSIZE",
    "DURABILITY",
    "COMPACTION_ENABLED",
    "SPLIT_ENABLED",
    "MERGE_ENABLED",
    "NORMALIZATION_ENABLED",
    "NORMALIZER_TARGET_REGION_COUNT",
    "NORMALIZER_TARGET_REGION_SIZE",
    "OWNER",
    "PRIORITY",
    "FLUSH_POLICY",
    "REGION_MEMSTORE_REPLICATION",
    "METADATA",
    "CONFIGURATION",
];

/// A map key as written, bare (`NAME`) or quoted (`'NAME'`); `None` for any other value.
fn map_key(k: &Arg) -> Option<String> {
    match &k.val {
        Val::Word(w) => Some(w.clone()),
        Val::Str(s) => Some(String::from_utf8_lossy(s).into_owned()),
        _ => None,
    }
}

/// A `{...}` of `create` with no NAME and a table key: the table's options, not a family.
fn is_table_options(a: &Arg) -> bool {
    let Val::Map(pairs) = &a.val else {
        return false;
    };
    let keys: Vec<String> = pairs.iter().filter_map(|(k, _)| map_key(k)).collect();
    !keys.iter().any(|k| k == "NAME")
        && keys.iter().any(|k| {
            TABLE_REGION_KEYS.contains(&k.as_str()) || TABLE_KEYS_UNSUPPORTED.contains(&k.as_str())
        })
}

/// Check `create`'s table options: region keys are well formed (and have no effect), the
/// others are refused.
fn table_options(a: Arg) -> Result<(), ShellError> {
    let Val::Map(pairs) = a.val else {
        return Err(err(a.pos, "expected table options {SPLITS => [...], ...}"));
    };
    let mut m = MapArgs::new(pairs, "create")?;
    if let Some(v) = m.take("SPLITS") {
        let Val::List(items) = &v.val else {
            return Err(err(v.pos, "expected SPLITS => ['key', ...]"));
        };
        if let Some(bad) = items.iter().find(|i| !matches!(i.val, Val::Str(_))) {
            return Err(err(bad.pos, "a split point is a row key string"));
        }
    }
    for key in ["SPLITS_FILE", "SPLITALGO"] {
        if let Some(v) = m.take(key) {
            if !matches!(v.val, Val::Str(_)) {
                return Err(err(v.pos, format!("expected {key} => 'a name'")));
            }
        }
    }
    for key in ["NUMREGIONS", "REGION_REPLICATION"] {
        if let Some(v) = m.take(key) {
            u32_arg(&v, &format!("{key} (a number)"))?;
        }
    }
    m.done(TABLE_KEYS_UNSUPPORTED)
}

/// `'cf'` or `{NAME => 'cf', ...}` of `create`/`alter`.
fn family_patch(a: Arg, cmd: &str) -> Result<FamilyPatch, ShellError> {
    let pairs = match a.val {
        Val::Str(_) => {
            return Ok(FamilyPatch {
                name: family_name(&a)?,
                ..FamilyPatch::default()
            })
        }
        Val::Map(pairs) => pairs,
        _ => {
            return Err(err(
                a.pos,
                format!(
                    "expected a family name or {{NAME => 'cf', ...}} (usage: {})",
                    usage(cmd)
                ),
            ))
        }
    };
    let mut m = MapArgs::new(pairs, cmd)?;
    let name = m
        .take("NAME")
        .ok_or_else(|| err(a.pos, "a family needs NAME => 'cf'"))?;
    let mut p = FamilyPatch {
        name: family_name(&name)?,
        ..FamilyPatch::default()
    };
    if let Some(v) = m.take("VERSIONS") {
        p.max_versions = Some(u32_arg(&v, "VERSIONS (a number)")?);
    }
    if let Some(v) = m.take("MIN_VERSIONS") {
        p.min_versions = Some(u32_arg(&v, "MIN_VERSIONS (a number)")?);
    }
    if let Some(v) = m.take("TTL") {
        p.ttl = Some(match &v.val {
            Val::Str(s) if s.eq_ignore_ascii_case(b"FOREVER") => None,
            Val::Word(w) if w.eq_ignore_ascii_case("FOREVER") => None,
            _ => {
                let secs = nonneg(&v, "TTL in seconds or 'FOREVER'")?;
                if secs >= i32::MAX as u64 {
                    None // HBase's FOREVER is Integer.MAX_VALUE seconds.
                } else {
                    Some(Duration::from_secs(secs))
                }
            }
        });
    }
    if let Some(v) = m.take("KEEP_DELETED_CELLS") {
        p.keep_deleted_cells = Some(match constant(&v, "KEEP_DELETED_CELLS")?.as_str() {
            "FALSE" => KeepDeletedCells::False,
            "TRUE" => KeepDeletedCells::True,
            "TTL" => KeepDeletedCells::Ttl,
            _ => {
                return Err(err(
                    v.pos,
                    "expected KEEP_DELETED_CELLS => true, false or 'TTL'",
                ))
            }
        });
    }
    let prefix_len = match m.take("CONFIGURATION") {
        None => None,
        Some(c) => {
            let Val::Map(pairs) = c.val else {
                return Err(err(
                    c.pos,
                    "expected CONFIGURATION => {'RowPrefixBloomFilter.prefix_length' => 'n'}",
                ));
            };
            let mut cm = MapArgs::new(pairs, cmd)?;
            let n = cm
                .take("RowPrefixBloomFilter.prefix_length")
                .map(|v| u32_arg(&v, "a prefix length"))
                .transpose()?;
            cm.done(&[])?;
            n
        }
    };
    if let Some(v) = m.take("BLOOMFILTER") {
        p.bloom = Some(match constant(&v, "BLOOMFILTER")?.as_str() {
            "NONE" => BloomType::None,
            "ROW" => BloomType::Row,
            "ROWCOL" => BloomType::RowCol,
            "ROWPREFIX_FIXED_LENGTH" => BloomType::RowPrefix(prefix_len.ok_or_else(|| {
                err(v.pos, "ROWPREFIX_FIXED_LENGTH needs CONFIGURATION => {'RowPrefixBloomFilter.prefix_length' => 'n'}")
            })?),
            _ => return Err(err(v.pos, "expected BLOOMFILTER => 'NONE', 'ROW', 'ROWCOL' or 'ROWPREFIX_FIXED_LENGTH'")),
        });
    }
    if let Some(v) = m.take("COMPRESSION") {
        p.compression = Some(match constant(&v, "COMPRESSION")?.as_str() {
            "NONE" => CompressionType::None,
            "LZ4" => CompressionType::Lz4,
            "GZ" | "SNAPPY" | "LZO" | "ZSTD" | "BZIP2" | "LZMA" => {
                let mut e = err(
                    v.pos,
                    "only NONE and LZ4 compression are supported by this build",
                );
                e.kind = kind::UNSUPPORTED;
                return Err(e);
            }
            _ => return Err(err(v.pos, "expected COMPRESSION => 'NONE' or 'LZ4'")),
        });
    }
    if let Some(v) = m.take("BLOCKSIZE") {
        p.block_size = Some(u32_arg(&v, "BLOCKSIZE in bytes")?);
    }
    if let Some(v) = m.take("NEW_VERSION_BEHAVIOR") {
        p.new_version_behavior = Some(boolean(&v, "NEW_VERSION_BEHAVIOR")?);
    }
    m.done(FAMILY_KEYS_UNSUPPORTED)?;
    Ok(p)
}

fn family_name(a: &Arg) -> Result<String, ShellError> {
    let Val::Str(s) = &a.val else {
        return Err(err(a.pos, "expected a family name string"));
    };
    let s = String::from_utf8(s.clone()).map_err(|_| err(a.pos, "family names are text"))?;
    cellar::schema::validate_name("family", &s).map_err(|e| err(a.pos, e.to_string()))?;
    Ok(s)
}

fn command(name: &str, pos: Pos, mut a: Args) -> Result<Command, ShellError> {
    let c = match name {
        "create_namespace" => {
            let name = a.text("a namespace name string")?;
            if let Some(m) = a.opt_map()? {
                m.done(&[])?;
            }
            Command::CreateNamespace { name }
        }
        "drop_namespace" => Command::DropNamespace {
            name: a.text("a namespace name string")?,
        },
        "list_namespace" => Command::ListNamespace {
            pattern: a.opt_text("a regular expression string")?,
        },
        "list_namespace_tables" => Command::ListNamespaceTables {
            namespace: a.text("a namespace name string")?,
        },
        "create" => {
            let table = a.table()?;
            let mut desc = TableDescriptor::new(&table);
            if a.items.is_empty() {
                return Err(a.usage_err(a.end, "at least one column family"));
            }
            while let Some(f) = a.items.pop_front() {
                let fpos = f.pos;
                if is_table_options(&f) {
                    table_options(f)?;
                    continue;
                }
                let p = family_patch(f, "create")?;
                if desc.get_family(&p.name).is_some() {
                    return Err(err(fpos, format!("family {} declared twice", p.name)));
                }
                let fd = p.apply(FamilyDescriptor::new(p.name.clone()));
                fd.validate().map_err(|e| err(fpos, e.to_string()))?;
                desc = desc.family(fd);
            }
            Command::Create { desc }
        }
        "alter" => {
            let table = a.table()?;
            let mut ops = Vec::new();
            if a.items.is_empty() {
                return Err(a.usage_err(a.end, "a family change"));
            }
            while let Some(f) = a.items.pop_front() {
                ops.extend(alter_ops(f)?);
            }
            Command::Alter { table, ops }
        }
        "describe" | "desc" => Command::Describe { table: a.table()? },
        "list" => Command::List {
            pattern: a.opt_text("a regular expression string")?,
        },
        "exists" | "exists?" => Command::Exists { table: a.table()? },
        "disable" => Command::Disable { table: a.table()? },
        "enable" => Command::Enable { table: a.table()? },
        "is_enabled" => Command::IsEnabled { table: a.table()? },
        "is_disabled" => Command::IsDisabled { table: a.table()? },
        "drop" => Command::Drop { table: a.table()? },
        // No regions here, so nothing to preserve: the same as truncate.
        "truncate" | "truncate_preserve" => Command::Truncate { table: a.table()? },
        "clone_table_schema" => {
            let src = a.table()?;
            let dst = a.table()?;
            if let Some(flag) = a.items.pop_front() {
                boolean(&flag, "preserve_splits")?;
            }
            Command::CloneTableSchema { src, dst }
        }
        "describe_namespace" => Command::DescribeNamespace {
            name: a.text("a namespace name string")?,
        },
        "version" => Command::Version,
        "put" => {
            let table = a.table()?;
            let row = a.bytes("a row key string")?;
            let (family, qualifier) = a.column()?;
            let value = a.bytes("a value string")?;
            let ts = a.opt_timestamp()?;
            // HBase's put attributes: TTL in milliseconds (a per-cell TTL).
            let mut ttl_ms = None;
            if let Some(mut m) = a.opt_map()? {
                if let Some(t) = m.take("TTL") {
                    ttl_ms = Some(nonneg(&t, "TTL (milliseconds)")?);
                }
                m.done(&["ATTRIBUTES", "VISIBILITY", "AUTHORIZATIONS"])?;
            }
            Command::Put {
                table,
                row,
                family,
                qualifier,
                value,
                ts,
                ttl_ms,
            }
        }
        "get" => get(&mut a)?,
        "explain" => match get(&mut a)? {
            Command::Get { table, get, show } => Command::Explain { table, get, show },
            other => other,
        },
        "scan" => scan(&mut a)?,
        "delete" => {
            let table = a.table()?;
            let row = a.bytes("a row key string")?;
            let carg = a.required("a column 'cf:q' or family 'cf'")?;
            let column = column_spec(&carg)?;
            let ts = a.opt_timestamp()?;
            let mut kind = if column.qualifier.is_some() {
                DeleteKind::Column
            } else {
                DeleteKind::Family
            };
            if let Some(mut m) = a.opt_map()? {
                if let Some(t) = m.take("TYPE") {
                    kind = match constant(&t, "TYPE")?.as_str() {
                        "VERSION" | "DELETE" => DeleteKind::Version,
                        "COLUMN" | "DELETECOLUMN" => DeleteKind::Column,
                        "FAMILY" | "DELETEFAMILY" => DeleteKind::Family,
                        "FAMILY_VERSION" | "DELETEFAMILYVERSION" => DeleteKind::FamilyVersion,
                        _ => return Err(err(
                            t.pos,
                            "expected TYPE => 'VERSION', 'COLUMN', 'FAMILY' or 'FAMILY_VERSION'",
                        )),
                    };
                    let needs_q = matches!(kind, DeleteKind::Version | DeleteKind::Column);
                    if needs_q != column.qualifier.is_some() {
                        let want = if needs_q {
                            "a column 'cf:q'"
                        } else {
                            "a family 'cf' without a qualifier"
                        };
                        return Err(err(carg.pos, format!("this TYPE deletes {want}")));
                    }
                    if kind == DeleteKind::FamilyVersion && ts.is_none() {
                        return Err(err(t.pos, "TYPE => 'FAMILY_VERSION' needs a timestamp"));
                    }
                }
                m.done(&["VISIBILITY", "ATTRIBUTES"])?;
            }
            a.done()?;
            return Ok(Command::Delete {
                table,
                row,
                column,
                ts,
                kind,
            });
        }
        "deleteall" => {
            let table = a.table()?;
            let r = a.required("a row key string or {ROWPREFIXFILTER => 'prefix'}")?;
            let rows = match r.val {
                Val::Str(s) => RowSel::Row(s),
                Val::Map(pairs) => {
                    let mut m = MapArgs::new(pairs, "deleteall")?;
                    let p = m
                        .take("ROWPREFIXFILTER")
                        .ok_or_else(|| err(r.pos, "expected {ROWPREFIXFILTER => 'prefix'}"))?;
                    let p = bytes_of(&p, "a row prefix")?;
                    m.done(&["CACHE"])?;
                    RowSel::Prefix(p)
                }
                _ => return Err(a.usage_err(r.pos, "a row key string")),
            };
            let column = match a.items.front() {
                Some(Arg {
                    val: Val::Str(_), ..
                }) => {
                    let c = a.required("a column")?;
                    Some(column_spec(&c)?)
                }
                _ => None,
            };
            let ts = a.opt_timestamp()?;
            Command::DeleteAll {
                table,
                rows,
                column,
                ts,
            }
        }
        "delete_rows" => delete_rows(&mut a)?,
        "list_range_deletes" => Command::ListRangeDeletes { table: a.table()? },
        "approxsize" => {
            let table = a.table()?;
            let (start, stop) = match a.opt_map()? {
                Some(mut m) => {
                    let range = row_range(&mut m)?;
                    m.done(&[])?;
                    range
                }
                None => (Vec::new(), Vec::new()),
            };
            Command::ApproxSize { table, start, stop }
        }
        "incr" => {
            let table = a.table()?;
            let row = a.bytes("a row key string")?;
            let (family, qualifier) = a.column()?;
            let amount = match a.items.pop_front() {
                None => 1,
                Some(v) => int(&v, "an increment amount (an integer)")?,
            };
            Command::Incr {
                table,
                row,
                family,
                qualifier,
                amount,
            }
        }
        "get_counter" => {
            let table = a.table()?;
            let row = a.bytes("a row key string")?;
            let (family, qualifier) = a.column()?;
            Command::GetCounter {
                table,
                row,
                family,
                qualifier,
            }
        }
        "append" => {
            let table = a.table()?;
            let row = a.bytes("a row key string")?;
            let (family, qualifier) = a.column()?;
            let value = a.bytes("a value string")?;
            Command::Append {
                table,
                row,
                family,
                qualifier,
                value,
            }
        }
        "count" => {
            let table = a.table()?;
            let mut interval = 1000;
            let mut filter = None;
            if let Some(mut m) = a.opt_map()? {
                if let Some(v) = m.take("INTERVAL") {
                    interval = nonneg(&v, "INTERVAL (a number of rows)")?.max(1);
                }
                if let Some(v) = m.take("FILTER") {
                    filter = Some(filter_of(&v)?);
                }
                // CACHE is a fetch size for region servers: nothing to tune in an embedded read.
                let _ = m.take("CACHE");
                m.done(&[])?;
            }
            Command::Count {
                table,
                interval,
                filter,
            }
        }
        "flush" => {
            let table = match a.items.is_empty() {
                true => None,
                false => Some(a.table()?),
            };
            Command::Flush { table }
        }
        "compact" | "major_compact" => {
            let table = a.table()?;
            let family = match a.items.front() {
                Some(
                    f @ Arg {
                        val: Val::Str(_), ..
                    },
                ) => {
                    let f = family_name(f)?;
                    a.items.pop_front();
                    Some(f)
                }
                _ => None,
            };
            if name == "compact" {
                Command::Compact { table, family }
            } else {
                Command::MajorCompact { table, family }
            }
        }
        "status" => {
            // HBase's 'simple' / 'summary' / 'detailed' choose cluster detail; there is one
            // report here. Its 'replication' and 'tasks' report what an embedded database
            // does not have, and anything else is a typo, not a request for the report.
            if let Some(arg) = a.items.pop_front() {
                let what = "'simple', 'summary' or 'detailed'";
                let Val::Str(v) = &arg.val else {
                    return Err(a.usage_err(arg.pos, what));
                };
                match v.as_slice() {
                    b"simple" | b"summary" | b"detailed" => {}
                    b"replication" | b"tasks" => {
                        let mut e = err(
                            arg.pos,
                            format!(
                                "status '{}' is not supported: an embedded database has no \
                                 replication or cluster tasks",
                                String::from_utf8_lossy(v)
                            ),
                        );
                        e.kind = kind::UNSUPPORTED;
                        return Err(e);
                    }
                    _ => return Err(a.usage_err(arg.pos, what)),
                }
            }
            Command::Status
        }
        "help" => Command::Help {
            command: a.opt_text("a command name string")?,
        },
        "show_filters" => Command::ShowFilters,
        "snapshot" => {
            let table = a.table()?;
            let name = a.text("a snapshot name string")?;
            let mut skip_flush = false;
            if let Some(mut m) = a.opt_map()? {
                if let Some(v) = m.take("SKIP_FLUSH") {
                    skip_flush = boolean(&v, "SKIP_FLUSH")?;
                }
                m.done(&["TTL", "MAX_FILESIZE"])?;
            }
            Command::Snapshot {
                table,
                name,
                skip_flush,
            }
        }
        "clone_snapshot" => {
            let name = a.text("a snapshot name string")?;
            let table = a.table()?;
            if let Some(m) = a.opt_map()? {
                m.done(&["RESTORE_ACL", "CLONE_SFT"])?;
            }
            Command::CloneSnapshot { name, table }
        }
        "restore_snapshot" => {
            let name = a.text("a snapshot name string")?;
            if let Some(m) = a.opt_map()? {
                m.done(&["RESTORE_ACL"])?;
            }
            Command::RestoreSnapshot { name }
        }
        "list_snapshots" => Command::ListSnapshots {
            table_pattern: None,
            pattern: a.opt_text("a regular expression string")?,
        },
        "list_table_snapshots" => Command::ListSnapshots {
            table_pattern: Some(a.text("a table name regular expression string")?),
            pattern: a.opt_text("a snapshot name regular expression string")?,
        },
        "list_feed_slots" => Command::ListFeedSlots,
        "create_feed_slot" => Command::CreateFeedSlot {
            name: a.text("a feed slot name string")?,
            since: a.opt_u64("a sequence number")?,
        },
        "drop_feed_slot" => Command::DropFeedSlot {
            name: a.text("a feed slot name string")?,
        },
        "delete_snapshot" => Command::DeleteSnapshot {
            name: a.text("a snapshot name string")?,
        },
        "delete_all_snapshot" => Command::DeleteSnapshots {
            table_pattern: None,
            pattern: Some(a.text("a regular expression string")?),
        },
        "delete_table_snapshots" => Command::DeleteSnapshots {
            table_pattern: Some(a.text("a table name regular expression string")?),
            pattern: a.opt_text("a snapshot name regular expression string")?,
        },
        "exit" | "quit" => Command::Exit,
        other => {
            let known = COMMANDS.iter().any(|c| c.0 == other);
            debug_assert!(!known, "{other} listed but not parsed");
            if let Some((_, why)) = HBASE_ONLY.iter().find(|c| c.0 == other) {
                let mut e = err(pos, format!("{other} is not supported here: {why}"));
                e.kind = kind::UNSUPPORTED;
                return Err(e);
            }
            return Err(err(
                pos,
                format!("unknown command '{other}'; enter 'help' for the list"),
            ));
        }
    };
    a.done()?;
    Ok(c)
}

fn alter_ops(f: Arg) -> Result<Vec<AlterOp>, ShellError> {
    let Val::Map(pairs) = &f.val else {
        return Ok(vec![AlterOp::Family(family_patch(f, "alter")?)]);
    };
    // `'delete' => 'cf'` and `METHOD => 'delete'` remove a family (HBase's two spellings).
    if let Some((_, v)) = pairs
        .iter()
        .find(|(k, _)| matches!(&k.val, Val::Str(s) if s == b"delete"))
    {
        if pairs.len() != 1 {
            return Err(err(f.pos, "'delete' => 'cf' stands alone in its {...}"));
        }
        let names = match &v.val {
            Val::List(items) => items
                .iter()
                .map(family_name)
                .collect::<Result<Vec<_>, _>>()?,
            _ => vec![family_name(v)?],
        };
        return Ok(names.into_iter().map(AlterOp::Delete).collect());
    }
    let method = pairs
        .iter()
        .find(|(k, _)| matches!(&k.val, Val::Word(w) if w == "METHOD"));
    if let Some((_, m)) = method {
        if constant(m, "METHOD")? != "DELETE" {
            return Err(err(m.pos, "expected METHOD => 'delete'"));
        }
        let name = pairs
            .iter()
            .find(|(k, _)| matches!(&k.val, Val::Word(w) if w == "NAME"))
            .ok_or_else(|| err(f.pos, "METHOD => 'delete' needs NAME => 'cf'"))?;
        if pairs.len() != 2 {
            return Err(err(f.pos, "METHOD => 'delete' takes only NAME"));
        }
        return Ok(vec![AlterOp::Delete(family_name(&name.1)?)]);
    }
    Ok(vec![AlterOp::Family(family_patch(f, "alter")?)])
}

fn get(a: &mut Args) -> Result<Command, ShellError> {
    let table = a.table()?;
    let row = a.bytes("a row key string")?;
    let mut g = Get::new(row);
    let mut show = Show::default();
    let mut cols: Vec<ColumnSpec> = Vec::new();
    while let Some(x) = a.items.pop_front() {
        match &x.val {
            Val::Str(_) | Val::List(_) => cols.extend(columns_of(&x)?),
            Val::Map(pairs) => {
                let mut m = MapArgs::new(pairs.clone(), "get")?;
                for key in ["COLUMN", "COLUMNS"] {
                    if let Some(v) = m.take(key) {
                        cols.extend(columns_of(&v)?);
                    }
                }
                if let Some(v) = m.take("VERSIONS") {
                    g = g.max_versions(u32_arg(&v, "VERSIONS (a number)")?);
                }
                if let Some(v) = m.take("TIMERANGE") {
                    let (lo, hi) = time_range(&v)?;
                    g = g.time_range(lo, hi);
                }
                if let Some(v) = m.take("TIMESTAMP") {
                    g = g.timestamp(timestamp(&v)?);
                }
                if let Some(v) = m.take("FILTER") {
                    g = g.filter(filter_of(&v)?);
                }
                show_options(&mut m, &mut show)?;
                m.done(&[
                    "AUTHORIZATIONS",
                    "CONSISTENCY",
                    "REGION_REPLICA_ID",
                    "ATTRIBUTES",
                ])?;
            }
            _ => {
                return Err(err(
                    x.pos,
                    format!(
                        "expected a column or {{...}} options (usage: {})",
                        usage("get")
                    ),
                ))
            }
        }
    }
    for c in cols {
        note_converter(&mut show, &c);
        g = match c.qualifier {
            Some(q) => g.column(c.family, q),
            None => g.family(c.family),
        };
    }
    Ok(Command::Get {
        table,
        get: Box::new(g),
        show: Box::new(show),
    })
}

fn scan(a: &mut Args) -> Result<Command, ShellError> {
    let table = a.table()?;
    let mut s = Scan::new();
    let mut show = Show::default();
    if let Some(mut m) = a.opt_map()? {
        if let Some(v) = m.take("ROWPREFIXFILTER") {
            s = s.prefix(bytes_of(&v, "a row prefix")?);
        }
        for key in ["STARTROW", "STARTKEY"] {
            if let Some(v) = m.take(key) {
                s = s.start_row(bytes_of(&v, "a start row")?);
            }
        }
        // HBase's shell defines the constant ENDROW as "STOPROW".
        for key in ["STOPROW", "ENDROW", "ENDKEY"] {
            if let Some(v) = m.take(key) {
                s = s.stop_row(bytes_of(&v, "a stop row")?);
            }
        }
        if let Some(v) = m.take("LIMIT") {
            s = s.limit(nonneg(&v, "LIMIT (a number of rows)")? as usize);
        }
        if let Some(v) = m.take("BATCH") {
            s = s.batch(nonneg(&v, "BATCH (cells per result)")? as usize);
        }
        if let Some(v) = m.take("RAW") {
            if boolean(&v, "RAW")? {
                s = s.raw();
            }
        }
        if let Some(v) = m.take("VERSIONS") {
            s = s.max_versions(u32_arg(&v, "VERSIONS (a number)")?);
        }
        if let Some(v) = m.take("COLUMNS").or_else(|| m.take("COLUMN")) {
            for c in columns_of(&v)? {
                note_converter(&mut show, &c);
                s = match c.qualifier {
                    Some(q) => s.column(c.family, q),
                    None => s.family(c.family),
                };
            }
        }
        if let Some(v) = m.take("TIMERANGE") {
            let (lo, hi) = time_range(&v)?;
            s = s.time_range(lo, hi);
        }
        if let Some(v) = m.take("TIMESTAMP") {
            s = s.timestamp(timestamp(&v)?);
        }
        if let Some(v) = m.take("FILTER") {
            s = s.filter(filter_of(&v)?);
        }
        // CACHE and CACHE_BLOCKS tune region-server fetches; nothing to do in an embedded read.
        let _ = m.take("CACHE");
        let _ = m.take("CACHE_BLOCKS");
        if let Some(v) = m.take("REVERSED") {
            if boolean(&v, "REVERSED")? {
                s = s.reversed();
            }
        }
        show_options(&mut m, &mut show)?;
        m.done(&[
            "ALL_METRICS",
            "METRICS",
            "AUTHORIZATIONS",
            "CONSISTENCY",
            "ISOLATION_LEVEL",
            "ATTRIBUTES",
            "REGION_REPLICA_ID",
        ])?;
    }
    Ok(Command::Scan {
        table,
        scan: Box::new(s),
        show: Box::new(show),
    })
}

/// `delete_rows`. The options map is required even when empty: deleting every row of a table
/// takes an explicit `{}`, not a forgotten argument.
fn delete_rows(a: &mut Args) -> Result<Command, ShellError> {
    let table = a.table()?;
    let what = "{STARTROW => 'a', STOPROW => 'b'}, {ROWPREFIXFILTER => 'p'}, or {} for every row";
    let r = a.required(what)?;
    let Val::Map(pairs) = r.val else {
        return Err(a.usage_err(r.pos, what));
    };
    let mut m = MapArgs::new(pairs, "delete_rows")?;
    let (start, stop) = row_range(&mut m)?;
    let mut families: Option<Vec<String>> = None;
    for key in ["COLUMN", "COLUMNS"] {
        let Some(v) = m.take(key) else { continue };
        let list = match &v.val {
            Val::List(items) if items.is_empty() => {
                return Err(err(v.pos, format!("{key} names no family")));
            }
            Val::List(items) => items
                .iter()
                .map(delete_rows_family)
                .collect::<Result<_, _>>()?,
            _ => vec![delete_rows_family(&v)?],
        };
        families.get_or_insert_with(Vec::new).extend(list);
    }
    let ts = m.take("TIMESTAMP").map(|v| timestamp(&v)).transpose()?;
    m.done(&[])?;
    Ok(Command::DeleteRows {
        table,
        start,
        stop,
        families,
        ts,
    })
}

/// The rows `[start, stop)` of `delete_rows` and `approxsize` (an empty stop: to the end of the
/// table): `STARTROW`/`STOPROW` with scan's spellings, so a scan's range can be pasted as is,
/// or `ROWPREFIXFILTER` alone.
fn row_range(m: &mut MapArgs) -> Result<(Vec<u8>, Vec<u8>), ShellError> {
    let start = take_alias(m, &["STARTROW", "STARTKEY"])?;
    let stop = take_alias(m, &["STOPROW", "ENDROW", "ENDKEY"])?;
    let prefix = m.take("ROWPREFIXFILTER");
    Ok(match prefix {
        Some(p) => {
            if start.is_some() || stop.is_some() {
                return Err(err(
                    p.pos,
                    "ROWPREFIXFILTER cannot be combined with STARTROW or STOPROW",
                ));
            }
            let p = bytes_of(&p, "a row prefix")?;
            // No end (an empty or all-0xFF prefix): to the end of the table, an empty stop.
            let end = cellar::read::query::prefix_end(&p).unwrap_or_default();
            (p, end)
        }
        None => {
            let start = start
                .map(|v| bytes_of(&v, "a start row"))
                .transpose()?
                .unwrap_or_default();
            let stop = match stop {
                None => Vec::new(),
                Some(v) => {
                    let stop = bytes_of(&v, "a stop row")?;
                    if !stop.is_empty() && start >= stop {
                        return Err(err(
                            v.pos,
                            "STOPROW must be after STARTROW (leave it out, or '', for the end of the table)",
                        ));
                    }
                    stop
                }
            };
            (start, stop)
        }
    })
}

/// The value of whichever of `keys` (spellings of one option) is given; two of them is an error.
fn take_alias(m: &mut MapArgs, keys: &[&str]) -> Result<Option<Arg>, ShellError> {
    let mut found: Option<(&str, Arg)> = None;
    for &k in keys {
        if let Some(v) = m.take(k) {
            if let Some((first, _)) = &found {
                return Err(err(v.pos, format!("{k} and {first} are the same option")));
            }
            found = Some((k, v));
        }
    }
    Ok(found.map(|(_, v)| v))
}

/// A family of `delete_rows`' COLUMNS: `'cf'` or `'cf:'`. A qualifier is refused rather than
/// widened to its family: the delete masks whole rows of a family.
fn delete_rows_family(a: &Arg) -> Result<String, ShellError> {
    let Val::Str(s) = &a.val else {
        return Err(err(a.pos, "expected a family name string such as 'cf'"));
    };
    let name = s.strip_suffix(b":").unwrap_or(s);
    if name.contains(&b':') {
        return Err(err(
            a.pos,
            format!(
                "delete_rows deletes whole families; {:?} names a column (give its family alone)",
                String::from_utf8_lossy(s)
            ),
        ));
    }
    family_name(&Arg {
        val: Val::Str(name.to_vec()),
        pos: a.pos,
    })
}

/// A column's converter, for the cells of that column (a whole family has none: HBase keys
/// converters by `family:qualifier`).
fn note_converter(show: &mut Show, c: &ColumnSpec) {
    if let (Some(q), Some(conv)) = (&c.qualifier, c.converter) {
        show.columns.insert((c.family.clone(), q.clone()), conv);
    }
}

/// FORMATTER, FORMATTER_CLASS and MAXLENGTH, which get and scan share.
fn show_options(m: &mut MapArgs, show: &mut Show) -> Result<(), ShellError> {
    let unsupported = |pos: Pos, msg: String| {
        let mut e = err(pos, msg);
        e.kind = kind::UNSUPPORTED;
        e
    };
    if let Some(v) = m.take("FORMATTER") {
        let name = text_of(&v, "FORMATTER (a converter name such as 'toString')")?;
        show.formatter = Converter::by_name(&name).ok_or_else(|| {
            unsupported(v.pos, format!("unknown FORMATTER {name} (known: {NAMES})"))
        })?;
    }
    if let Some(v) = m.take("FORMATTER_CLASS") {
        let class = text_of(&v, "FORMATTER_CLASS (a class name)")?;
        check_class(&class).map_err(|e| unsupported(v.pos, e))?;
    }
    if let Some(v) = m.take("MAXLENGTH") {
        let n = nonneg(&v, "MAXLENGTH (a number of characters)")?;
        show.max_length = Some(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok(())
}

fn text_of(a: &Arg, what: &str) -> Result<String, ShellError> {
    match &a.val {
        Val::Str(s) => {
            String::from_utf8(s.clone()).map_err(|_| err(a.pos, format!("expected {what}")))
        }
        Val::Word(w) => Ok(w.clone()),
        _ => Err(err(a.pos, format!("expected {what}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(src: &str) -> Result<Command, ShellError> {
        let mut v = parse_script(src);
        assert_eq!(v.len(), 1, "{src}: {v:?}");
        v.remove(0).map(|s| s.command)
    }

    fn err_text(src: &str) -> String {
        one(src).unwrap_err().to_string()
    }

    #[test]
    fn endrow_is_hbases_name_for_stoprow() {
        assert_eq!(
            one("scan 't', {STARTROW => 'a', ENDROW => 'c'}").unwrap(),
            one("scan 't', {STARTROW => 'a', STOPROW => 'c'}").unwrap()
        );
        assert_ne!(
            one("scan 't', {STARTROW => 'a', ENDROW => 'c'}").unwrap(),
            one("scan 't', {STARTROW => 'a'}").unwrap()
        );
    }

    #[test]
    fn webtable_create_with_family_dicts() {
        let c = one("create 'webtable', {NAME => 'contents', VERSIONS => 3}, 'anchor'").unwrap();
        let Command::Create { desc } = c else {
            panic!()
        };
        assert_eq!(desc.families.len(), 2);
        assert_eq!(desc.families[0].max_versions, 3);
        assert_eq!(desc.families[1].name, "anchor");
        let c = one("create 'ns:t', {NAME => 'f', TTL => '86400', BLOOMFILTER => ROWCOL, COMPRESSION => 'lz4', KEEP_DELETED_CELLS => true, BLOCKSIZE => 4096, MIN_VERSIONS => 1, NEW_VERSION_BEHAVIOR => 'false'}").unwrap();
        let Command::Create { desc } = c else {
            panic!()
        };
        let f = &desc.families[0];
        assert_eq!(f.ttl, Some(Duration::from_secs(86400)));
        assert_eq!(f.bloom, BloomType::RowCol);
        assert_eq!(f.compression, CompressionType::Lz4);
        assert_eq!(f.keep_deleted_cells, KeepDeletedCells::True);
        assert_eq!((f.block_size, f.min_versions), (4096, 1));
    }

    #[test]
    fn puts_gets_and_deletes() {
        assert_eq!(
            one("put 't', \"r\\x00\", 'cf:q', 'v', 42").unwrap(),
            Command::Put {
                table: "t".into(),
                row: b"r\0".to_vec(),
                family: "cf".into(),
                qualifier: b"q".to_vec(),
                value: b"v".to_vec(),
                ts: Some(42),
                ttl_ms: None,
            }
        );
        let Command::Put { ts, ttl_ms, .. } =
            one("put 't', 'r', 'cf:q', 'v', {TTL => 500}").unwrap()
        else {
            panic!("not a put")
        };
        assert_eq!((ts, ttl_ms), (None, Some(500)));
        assert!(one("put 't', 'r', 'cf:q', 'v', {TTL => -1}").is_err());
        assert!(one("put 't', 'r', 'cf:q', 'v', {NOPE => 1}").is_err());
        let Command::Get { get, .. } =
            one("get 't', 'r', {COLUMN => 'cf:q', VERSIONS => 3, TIMERANGE => [1, 9]}").unwrap()
        else {
            panic!()
        };
        assert_eq!(get.max_versions, 3);
        assert_eq!((get.time_range.min, get.time_range.max), (1, 9));
        let Command::Get { show, .. } =
            one("get 't', 'r', {COLUMNS => ['cf:n:toLong', 'cf:a:b', 'cf'], FORMATTER => 'toHex'}")
                .unwrap()
        else {
            panic!()
        };
        assert_eq!(show.formatter, Converter::Hex);
        assert_eq!(
            show.columns.get(&("cf".to_owned(), b"n".to_vec())),
            Some(&Converter::Long)
        );
        assert_eq!(show.columns.len(), 1, "{show:?}");
        let e = one("scan 't', {COLUMNS => 'cf:n:c(Money).toLong'}").unwrap_err();
        assert_eq!(e.kind, kind::UNSUPPORTED);
        assert!(e.to_string().contains("Money"), "{e}");
        let d = |s| match one(s).unwrap() {
            Command::Delete { kind, ts, .. } => (kind, ts),
            c => panic!("{c:?}"),
        };
        assert_eq!(d("delete 't', 'r', 'cf:q'"), (DeleteKind::Column, None));
        assert_eq!(d("delete 't', 'r', 'cf', 5"), (DeleteKind::Family, Some(5)));
        assert_eq!(
            d("delete 't', 'r', 'cf:q', {TYPE => 'VERSION'}"),
            (DeleteKind::Version, None)
        );
        assert_eq!(
            d("delete 't', 'r', 'cf', 7, {TYPE => 'FAMILY_VERSION'}"),
            (DeleteKind::FamilyVersion, Some(7))
        );
        assert!(
            err_text("delete 't', 'r', 'cf', {TYPE => 'FAMILY_VERSION'}")
                .contains("needs a timestamp")
        );
    }

    #[test]
    fn trailing_hash_parens_and_alter() {
        let c = one("alter 't', NAME => 'cf', VERSIONS => 5").unwrap();
        let Command::Alter { ops, .. } = c else {
            panic!()
        };
        assert!(matches!(&ops[0], AlterOp::Family(p) if p.max_versions == Some(5)));
        let c = one("alter 't', 'delete' => 'cf'").unwrap();
        assert_eq!(
            c,
            Command::Alter {
                table: "t".into(),
                ops: vec![AlterOp::Delete("cf".into())]
            }
        );
        let c = one("alter('t', {NAME => 'cf', METHOD => 'delete'})").unwrap();
        assert_eq!(
            c,
            Command::Alter {
                table: "t".into(),
                ops: vec![AlterOp::Delete("cf".into())]
            }
        );
        assert!(
            matches!(one("scan 't', LIMIT => 2").unwrap(), Command::Scan { scan, .. } if scan.limit == Some(2))
        );
    }

    #[test]
    fn errors_name_what_was_expected_and_where() {
        assert_eq!(
            err_text("put 't', 'r'"),
            "line 1, column 13: expected a column 'family:qualifier' (usage: put 't', 'row', 'cf:q', 'value'[, ts][, {TTL => ms}])"
        );
        assert_eq!(
            err_text("get 42, 'r'"),
            "line 1, column 5: expected a table name string (usage: get 't', 'row'[, 'cf:q[:toLong]' | {COLUMN => 'cf:q' | COLUMNS => ['cf', 'cf:q'], VERSIONS => n, TIMERANGE => [min, max], TIMESTAMP => ts, FILTER => \"...\", FORMATTER => 'toString', MAXLENGTH => n}])"
        );
        assert_eq!(
            err_text("frobnicate 't'"),
            "line 1, column 1: unknown command 'frobnicate'; enter 'help' for the list"
        );
        assert_eq!(
            err_text("scan 't', {LIMIT => 1,, }"),
            "line 1, column 23: expected a value, found ','"
        );
        assert_eq!(
            err_text("scan 't' 'x'"),
            "line 1, column 10: expected ',' or the end of the command, found a string"
        );
        assert!(one("scan 't', {REVERSED => true}").is_ok());
        let e = one("scan 't', {FILTER => \"ValueFilter(=, 'long:x')\"}").unwrap_err();
        assert_eq!(e.kind, kind::UNSUPPORTED);
        assert!(err_text("create 't', {NAME => 'cf', VERSIONS => 0}")
            .contains("VERSIONS must be at least 1"));
        assert!(err_text("create 'a:b:c', 'cf'")
            .starts_with("line 1, column 8: invalid argument: bad table name"));
    }

    #[test]
    fn delete_rows_takes_a_range_a_prefix_or_an_explicit_everything() {
        let rows = |src: &str| match one(src).unwrap() {
            Command::DeleteRows {
                table,
                start,
                stop,
                families,
                ts,
            } => (table, start, stop, families, ts),
            c => panic!("{c:?}"),
        };
        assert_eq!(
            rows("delete_rows 't', {STARTROW => 'a', STOPROW => 'b'}"),
            ("t".into(), b"a".to_vec(), b"b".to_vec(), None, None)
        );
        // Everything is explicit: `{}` (or a lone bound) runs from the start or to the end.
        assert_eq!(
            rows("delete_rows 't', {}"),
            ("t".into(), vec![], vec![], None, None)
        );
        assert_eq!(rows("delete_rows 't', STARTROW => 'm'").2, b"");
        assert_eq!(rows("delete_rows 't', {STOPROW => 'm'}").1, b"");
        assert_eq!(
            rows("delete_rows 't', {STARTROW => 'm', STOPROW => ''}").2,
            b""
        );
        // ENDROW is HBase's spelling of STOPROW, as in scan.
        assert_eq!(
            one("delete_rows 't', {STARTKEY => 'a', ENDROW => 'b'}").unwrap(),
            one("delete_rows 't', {STARTROW => 'a', STOPROW => 'b'}").unwrap()
        );
        let p = rows("delete_rows 't', {ROWPREFIXFILTER => \"p\\xff\", TIMESTAMP => 9}");
        assert_eq!((p.1, p.2, p.4), (b"p\xff".to_vec(), b"q".to_vec(), Some(9)));
        // No row follows every row starting with 0xFF bytes: to the end of the table.
        let p = rows("delete_rows 't', {ROWPREFIXFILTER => \"\\xff\\xff\"}");
        assert_eq!((p.1, p.2), (b"\xff\xff".to_vec(), vec![]));
        assert_eq!(
            rows("delete_rows 't', {COLUMNS => ['cf1', 'cf2:'], COLUMN => 'cf3'}").3,
            Some(vec!["cf3".to_owned(), "cf1".to_owned(), "cf2".to_owned()])
        );
        assert_eq!(
            rows("delete_rows 't', {COLUMN => 'cf:'}").3,
            Some(vec!["cf".to_owned()])
        );
        assert_eq!(
            one("list_range_deletes 'ns:t'").unwrap(),
            Command::ListRangeDeletes {
                table: "ns:t".into()
            }
        );
    }

    #[test]
    fn approxsize_takes_a_table_and_an_optional_row_range() {
        let range = |src: &str| match one(src).unwrap() {
            Command::ApproxSize { table, start, stop } => (table, start, stop),
            c => panic!("{c:?}"),
        };
        assert_eq!(range("approxsize 't'"), ("t".into(), vec![], vec![]));
        assert_eq!(
            range("approxsize 'ns:t', {}"),
            ("ns:t".into(), vec![], vec![])
        );
        assert_eq!(
            range("approxsize 't', {STARTROW => 'a', ENDROW => 'b'}"),
            ("t".into(), b"a".to_vec(), b"b".to_vec())
        );
        assert_eq!(
            range("approxsize 't', {ROWPREFIXFILTER => 'r1'}"),
            ("t".into(), b"r1".to_vec(), b"r2".to_vec())
        );
        let usage = usage("approxsize");
        assert_eq!(
            err_text("approxsize 't', {STARTROW => 'b', STOPROW => 'a'}"),
            "line 1, column 46: STOPROW must be after STARTROW (leave it out, or '', for the end of the table)"
        );
        assert_eq!(
            err_text("approxsize 't', {LIMIT => 1}"),
            format!("line 1, column 18: unknown key LIMIT for approxsize (usage: {usage})")
        );
        assert_eq!(
            err_text("approxsize 't', 'a'"),
            format!("line 1, column 17: unexpected argument (usage: {usage})")
        );
        assert_eq!(
            err_text("approxsize"),
            format!("line 1, column 11: expected a table name string (usage: {usage})")
        );
    }

    #[test]
    fn delete_rows_errors_name_the_position() {
        let usage = usage("delete_rows");
        assert_eq!(
            err_text("delete_rows 't'"),
            format!("line 1, column 16: expected {{STARTROW => 'a', STOPROW => 'b'}}, {{ROWPREFIXFILTER => 'p'}}, or {{}} for every row (usage: {usage})")
        );
        assert_eq!(
            err_text("delete_rows 't', 'a'"),
            format!("line 1, column 18: expected {{STARTROW => 'a', STOPROW => 'b'}}, {{ROWPREFIXFILTER => 'p'}}, or {{}} for every row (usage: {usage})")
        );
        assert_eq!(
            err_text("delete_rows 't', {STARTROW => 'b', STOPROW => 'a'}"),
            "line 1, column 47: STOPROW must be after STARTROW (leave it out, or '', for the end of the table)"
        );
        assert!(
            err_text("delete_rows 't', {STARTROW => 'a', STOPROW => 'a'}")
                .starts_with("line 1, column 47: STOPROW must be after STARTROW")
        );
        assert_eq!(
            err_text("delete_rows 't', {STARTROW => 'a', ROWPREFIXFILTER => 'p'}"),
            "line 1, column 55: ROWPREFIXFILTER cannot be combined with STARTROW or STOPROW"
        );
        assert_eq!(
            err_text("delete_rows 't', {COLUMNS => ['cf', 'cf:q']}"),
            "line 1, column 37: delete_rows deletes whole families; \"cf:q\" names a column (give its family alone)"
        );
        assert_eq!(
            err_text("delete_rows 't', {COLUMNS => []}"),
            "line 1, column 30: COLUMNS names no family"
        );
        assert_eq!(
            err_text("delete_rows 't', {STOPROW => 'a', ENDROW => 'b'}"),
            "line 1, column 45: ENDROW and STOPROW are the same option"
        );
        assert_eq!(
            err_text("delete_rows 't', {LIMIT => 1}"),
            format!("line 1, column 19: unknown key LIMIT for delete_rows (usage: {usage})")
        );
        assert_eq!(
            err_text("delete_rows 't', {TIMESTAMP => -1}"),
            "line 1, column 32: expected a timestamp (milliseconds), not a negative number"
        );
        assert_eq!(
            err_text("delete_rows 't', {}, 5"),
            format!("line 1, column 22: unexpected argument (usage: {usage})")
        );
        assert_eq!(
            err_text("list_range_deletes"),
            "line 1, column 19: expected a table name string (usage: list_range_deletes 't')"
        );
    }

    #[test]
    fn a_bad_statement_does_not_stop_the_next() {
        let v = parse_script("list\nput 't'\n  scan 't', {LIMIT => 'x'}; exists 't'\n'oops\nlist");
        let oks: Vec<bool> = v.iter().map(|r| r.is_ok()).collect();
        assert_eq!(oks, [true, false, false, true, false, true]);
        assert_eq!(
            v[2].as_ref().unwrap_err().pos,
            Some(Pos { line: 3, col: 23 })
        );
        assert_eq!(
            v[4].as_ref().unwrap_err().pos,
            Some(Pos { line: 4, col: 1 })
        );
    }

    #[test]
    fn incomplete_input_is_recognised() {
        assert!(is_incomplete("create 't', {NAME => 'cf',"));
        assert!(is_incomplete("put 't',"));
        assert!(!is_incomplete("put 't'"));
        assert!(!is_incomplete("put 't', 'a"));
    }

    proptest::proptest! {
        #[test]
        fn random_input_never_panics(s in "\\PC{0,80}") {
            let _ = parse_script(&s);
        }

        #[test]
        fn random_shell_like_input_never_panics(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "put", "get", "scan", "create", "delete", "alter", "'t'", "\"r\\x00\"", "'cf:q'", ",", "=>",
                "{", "}", "[", "]", "(", ")", "1", "-5", "NAME", "VERSIONS", "FILTER", "\"PrefixFilter('a') AND (\"",
                ";", "\n", "'", "\\x", "nil", "true", "# c", "REVERSED", "TYPE", "'VERSION'",
            ]), 0..30)
        ) {
            let src = parts.join(" ");
            let _ = parse_script(&src);
            let _ = is_incomplete(&src);
        }
    }
}
