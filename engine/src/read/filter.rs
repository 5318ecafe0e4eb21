//! Scan and Get filters (HBase's filter family), evaluated inside the read path.
//!
//! A [`Filter`] is a tree; [`FilterEval`] is its per-read state. Every filter, nested or not,
//! has one meaning: the set of a row's resolved cells it lets through. Row-key filters let
//! through all cells of a row or none, cell filters decide cell by cell, [`Filter::And`] is the
//! intersection and [`Filter::Or`] the union. A row whose set is empty is not returned.
//!
//! # Stages (where each filter acts)
//! 1. **Row key, before any cell of the row is read** ([`FilterEval::check_row`]):
//!    [`Filter::RowPrefix`], [`Filter::RowRanges`] and [`Filter::Page`] decide here, and so do
//!    And/Or whenever their row-key parts settle the answer (an And with one failing row-key
//!    child, an Or whose children all fail). A failing row comes with a *seek hint*, the next
//!    row that can match, or "no later row can match"; the scan seeks there (one index descent
//!    per file) instead of reading what lies between, or ends.
//! 2. **Cells, after version resolution** ([`FilterEval::finish_row`]): [`Filter::ColumnPrefix`],
//!    [`Filter::Qualifier`], [`Filter::Value`], [`Filter::Family`], [`Filter::QualifierMatch`],
//!    [`Filter::FamilyMatch`],
//!    [`Filter::ValueMatch`] and [`Filter::Timestamps`] look at each resolved cell. As the
//!    brief of this engine asks, they see what resolution returns: with `max_versions(1)` a
//!    `Timestamps([5])` filter matches only when version 5 is the newest visible one (HBase
//!    runs filters before version counting and would return version 5). [`Filter::RowMatch`]
//!    is decided at stage 1 but takes effect here: a row it rejects is read, not sought past.
//! 3. **Row post-check**, on the row's resolved cells: [`Filter::SingleColumnValue`] and
//!    [`Filter::SingleColumnValueMatch`] (the newest returned put of the column; the column
//!    must be in the read's selection, as in HBase), [`Filter::DependentColumn`] (the
//!    reference column's timestamps, which its cells are then judged by), [`Filter::Skip`]
//!    and [`Filter::While`] (whether the inner filter takes every cell of the row; a failing
//!    row also ends a While, at the next row's row-key stage), and the And/Or combination of
//!    everything.
//! 4. **Transforms**: [`Filter::FirstKeyOnly`] keeps the first cell of the row that reaches it
//!    (in an And, the first that passed the children before it), [`Filter::ColumnPage`] the
//!    first cell of each column in its window of those that reach it; [`Filter::KeyOnly`] empties
//!    the values of the cells it lets through; [`Filter::Page`] ends the scan once `n` rows
//!    have been accepted by the whole filter (a Page inside an Or only stops contributing).
//!
//! # Reversed scans
//! A reversed scan meets rows in descending order, so the row-key stage's hints point the
//! other way: a failing row's hint is then an exclusive *upper* bound, "no row at or after
//! this one can match", and the scan seeks to the last row before it. [`FilterEval::reversed`]
//! makes the evaluation direction-aware: a RowPrefix row past the prefix hints at the end of
//! the prefix's rows, a row before it ends the scan; RowRanges hint at the stop of the nearest
//! range below; an And takes its lowest hint and an Or its highest (the furthest and nearest
//! in the direction of travel). Page counts rows in the order they are returned. The cell,
//! post-row and transform stages see one row at a time, in forward cell order, and do not
//! depend on direction.
//!
//! And evaluates its children in order and stops at the first that rejects a cell; Or asks
//! every child (so each child's state, e.g. FirstKeyOnly's, sees every cell).

use crate::read::query::{prefix_end, Cell};
use cellar_format::CellType;
use std::sync::Arc;

/// A bytewise comparison (HBase's `CompareOperator` with a `BinaryComparator`): a cell passes
/// when `actual OP operand` holds in lexicographic byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `actual < operand`.
    Less,
    /// `actual <= operand`.
    LessOrEqual,
    /// `actual == operand`.
    Equal,
    /// `actual != operand`.
    NotEqual,
    /// `actual >= operand`.
    GreaterOrEqual,
    /// `actual > operand`.
    Greater,
}

impl CompareOp {
    /// True when `actual OP operand`.
    pub fn matches(self, actual: &[u8], operand: &[u8]) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let ord = actual.cmp(operand);
        match self {
            CompareOp::Less => ord == Less,
            CompareOp::LessOrEqual => ord != Greater,
            CompareOp::Equal => ord == Equal,
            CompareOp::NotEqual => ord != Equal,
            CompareOp::GreaterOrEqual => ord != Less,
            CompareOp::Greater => ord == Greater,
        }
    }
}

/// What a matching filter ([`Filter::RowMatch`], [`Filter::QualifierMatch`],
/// [`Filter::ValueMatch`], [`Filter::SingleColumnValueMatch`]) looks for in bytes: HBase's
/// SubstringComparator and RegexStringComparator.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pattern {
    /// The bytes contain this text, ignoring case: both sides read as UTF-8 (invalid
    /// sequences replaced) and lower-cased, as HBase's SubstringComparator does.
    Substring(Vec<u8>),
    /// The regular expression matches somewhere in the bytes (a search, not a whole-value
    /// match), as HBase's RegexStringComparator does with its defaults: each byte is one
    /// character (HBase reads ISO-8859-1), `.` matches a newline too (DOTALL). The syntax is
    /// the `regex` crate's with Unicode off (`\xE9` is the byte 0xE9; `(?i)` folds ASCII);
    /// an invalid expression fails the read with `InvalidArgument`.
    Regex(String),
}

/// A [`Pattern`], or its negation (HBase's comparator under `=` and `!=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    /// What to look for.
    pub pattern: Pattern,
    /// Pass what does *not* match (`!=`).
    pub negate: bool,
}

impl Matcher {
    /// Bytes containing `text`, ignoring case.
    pub fn substring(text: impl Into<Vec<u8>>) -> Matcher {
        Matcher {
            pattern: Pattern::Substring(text.into()),
            negate: false,
        }
    }

    /// Bytes in which `expr` finds a match.
    pub fn regex(expr: impl Into<String>) -> Matcher {
        Matcher {
            pattern: Pattern::Regex(expr.into()),
            negate: false,
        }
    }

    /// The negation: what this does not match.
    pub fn negated(mut self) -> Matcher {
        self.negate = !self.negate;
        self
    }
}

/// A [`Matcher`] ready to test bytes.
#[derive(Debug, Clone)]
struct Compiled {
    how: How,
    negate: bool,
    /// Bytes every passing value starts with (`^abc...`, not negated); empty when none are
    /// known.
    prefix: Vec<u8>,
}

#[derive(Debug, Clone)]
enum How {
    /// Lower-cased needle.
    Substring(String),
    Regex(std::sync::Arc<regex::bytes::Regex>),
}

impl Compiled {
    fn new(m: &Matcher) -> crate::Result<Compiled> {
        let (how, prefix) = match &m.pattern {
            Pattern::Substring(t) => (
                How::Substring(String::from_utf8_lossy(t).to_lowercase()),
                Vec::new(),
            ),
            Pattern::Regex(e) => {
                let (r, prefix) = compiled_regex(e)?;
                (How::Regex(r), if m.negate { Vec::new() } else { prefix })
            }
        };
        Ok(Compiled {
            how,
            negate: m.negate,
            prefix,
        })
    }

    fn matches(&self, b: &[u8]) -> bool {
        let found = match &self.how {
            How::Substring(needle) => contains_ignoring_case(b, needle),
            How::Regex(r) => r.is_match(b),
        };
        found != self.negate
    }
}

/// Expressions compiled lately, newest last. A filter is compiled for every read, and a
/// program that runs many Gets with one regex filter would otherwise compile the expression
/// each time: several times the cost of a cached Get. Shared behind an `Arc` rather than
/// cloned: a clone of a `Regex` gets a new pool of search caches, which its first search
/// fills again.
static REGEX_CACHE: parking_lot::Mutex<Vec<(String, CachedRegex)>> =
    parking_lot::Mutex::new(Vec::new());

/// A compiled expression and the literal prefix it anchors every match on.
type CachedRegex = (Arc<regex::bytes::Regex>, Vec<u8>);

/// Expressions [`REGEX_CACHE`] keeps.
const REGEX_CACHE_LEN: usize = 16;

fn compiled_regex(e: &str) -> crate::Result<CachedRegex> {
    {
        let mut cache = REGEX_CACHE.lock();
        if let Some(i) = cache.iter().position(|(k, _)| k == e) {
            let hit = cache.remove(i);
            let r = hit.1.clone();
            cache.push(hit);
            return Ok(r);
        }
    }
    // Compiled outside the lock: an expensive expression does not hold up other reads.
    let regex = regex::bytes::RegexBuilder::new(e)
        .unicode(false)
        .dot_matches_new_line(true)
        .build()
        .map_err(|err| {
            crate::Error::InvalidArgument(format!("regular expression {e:?} of a filter: {err}"))
        })?;
    let r = (Arc::new(regex), anchored_prefix(e));
    let mut cache = REGEX_CACHE.lock();
    if !cache.iter().any(|(k, _)| k == e) {
        if cache.len() >= REGEX_CACHE_LEN {
            cache.remove(0);
        }
        cache.push((e.to_owned(), r.clone()));
    }
    Ok(r)
}

/// The literal bytes every match of `e` begins the haystack with: `abc` for `^abc[0-9]`, empty
/// for `^(?i)abc`, `abc|^x` or `(?m)^abc`. Parsed as the matcher compiles it (bytes, no
/// Unicode, DOTALL).
fn anchored_prefix(e: &str) -> Vec<u8> {
    use regex_syntax::hir::{HirKind, Look};
    let Ok(hir) = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .dot_matches_new_line(true)
        .build()
        .parse(e)
    else {
        return Vec::new();
    };
    let HirKind::Concat(parts) = hir.kind() else {
        return Vec::new();
    };
    let mut parts = parts.iter();
    if !matches!(
        parts.next().map(|h| h.kind()),
        Some(HirKind::Look(Look::Start))
    ) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for h in parts {
        match h.kind() {
            HirKind::Literal(l) => out.extend_from_slice(&l.0),
            _ => break,
        }
    }
    out
}

/// `hay`, read as UTF-8 and lower-cased, contains `needle` (already lower case). ASCII text
/// is compared in place; anything else takes Unicode's lower case (the Kelvin sign, for one,
/// lower-cases to an ASCII `k`).
fn contains_ignoring_case(hay: &[u8], needle: &str) -> bool {
    let n = needle.as_bytes();
    if n.is_empty() {
        return true;
    }
    if hay.is_ascii() && n.is_ascii() {
        return hay
            .windows(n.len())
            .any(|w| w.iter().zip(n).all(|(a, b)| a.to_ascii_lowercase() == *b));
    }
    String::from_utf8_lossy(hay).to_lowercase().contains(needle)
}

/// A read filter. See the module docs for when each kind acts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Filter {
    /// Rows whose key starts with the prefix.
    RowPrefix(Vec<u8>),
    /// Rows in any of the half-open ranges `[start, stop)` (an empty stop is open), given in
    /// any order; overlapping ranges merge (HBase's MultiRowRangeFilter).
    RowRanges(Vec<(Vec<u8>, Vec<u8>)>),
    /// Cells whose qualifier starts with the prefix.
    ColumnPrefix(Vec<u8>),
    /// Cells whose qualifier compares as asked with the operand.
    Qualifier(CompareOp, Vec<u8>),
    /// Cells whose value compares as asked with the operand.
    Value(CompareOp, Vec<u8>),
    /// Rows whose column `family:qualifier` has a newest returned value comparing as asked;
    /// a row without the column passes unless `filter_if_missing`.
    SingleColumnValue {
        /// Family of the tested column.
        family: String,
        /// Qualifier of the tested column.
        qualifier: Vec<u8>,
        /// Comparison: the row passes when `value OP operand`.
        op: CompareOp,
        /// The operand.
        value: Vec<u8>,
        /// Drop rows that lack the column (HBase's `setFilterIfMissing`).
        filter_if_missing: bool,
    },
    /// Rows whose key the matcher passes (HBase's RowFilter with a substring or regex
    /// comparator).
    RowMatch(Matcher),
    /// Cells whose qualifier the matcher passes.
    QualifierMatch(Matcher),
    /// Cells whose family name compares as asked with the operand (HBase's FamilyFilter).
    Family(CompareOp, Vec<u8>),
    /// Cells whose family name the matcher passes.
    FamilyMatch(Matcher),
    /// Cells whose value the matcher passes.
    ValueMatch(Matcher),
    /// As [`Filter::SingleColumnValue`], testing the newest returned value with a matcher.
    SingleColumnValueMatch {
        /// Family of the tested column.
        family: String,
        /// Qualifier of the tested column.
        qualifier: Vec<u8>,
        /// The test.
        matcher: Matcher,
        /// Drop rows that lack the column (HBase's `setFilterIfMissing`).
        filter_if_missing: bool,
    },
    /// Cells at the timestamps of a reference column (HBase's DependentColumnFilter): the
    /// row's returned cells of `family:qualifier` that `value` lets through (all of them when
    /// `None`) give a set of timestamps; a cell passes when its timestamp is in the set,
    /// unless it is of the reference column and `drop_reference`. So a reference cell passes
    /// when `value` let it through — except in a raw read that returns two cells of the column
    /// at one timestamp, where both go with the set. A row without such a reference cell
    /// returns nothing.
    DependentColumn {
        /// Family of the reference column.
        family: String,
        /// Qualifier of the reference column.
        qualifier: Vec<u8>,
        /// Leave the reference column's own cells out.
        drop_reference: bool,
        /// A cell filter the reference cells must pass (`Value`, `ValueMatch`, or And/Or of
        /// them: what HBase's comparator on the reference value does).
        value: Option<Box<Filter>>,
    },
    /// Cells with one of these timestamps.
    Timestamps(Vec<u64>),
    /// At most `n` rows in all.
    Page(usize),
    /// The first cell of each row only.
    FirstKeyOnly,
    /// Of each row's columns (family and qualifier) that reach it, skip the first `offset`
    /// and keep the `limit` after them, one cell each: the column's first (its newest
    /// version), as HBase's ColumnPaginationFilter includes a cell and moves to the next
    /// column whatever the read's VERSIONS.
    ColumnPage {
        /// Columns to keep.
        limit: usize,
        /// Columns to skip first.
        offset: usize,
    },
    /// Keys only: values come back empty.
    KeyOnly,
    /// A row whole or not at all: all its cells when the inner filter lets every one of them
    /// through (and its row key), none otherwise (HBase's `SKIP`, SkipFilter).
    Skip(Box<Filter>),
    /// Rows while the inner filter lets them through whole: the scan ends at the first row
    /// with cells to return whose key or any of whose resolved cells the inner filter rejects,
    /// and that row is not returned (HBase's `WHILE`, WhileMatchFilter, may return the part of
    /// that row before the rejected cell, and may stop at a row whose cells are all deleted).
    While(Box<Filter>),
    /// Cells every child lets through.
    And(Vec<Filter>),
    /// Cells any child lets through.
    Or(Vec<Filter>),
}

impl Filter {
    /// `And` of `filters`.
    pub fn and(filters: impl IntoIterator<Item = Filter>) -> Filter {
        Filter::And(filters.into_iter().collect())
    }

    /// `Or` of `filters`.
    pub fn or(filters: impl IntoIterator<Item = Filter>) -> Filter {
        Filter::Or(filters.into_iter().collect())
    }
}

/// What the row-key stage says of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowCheck {
    /// The row may match: read and resolve it.
    Include,
    /// The row cannot match, nor can any row before this one (always after the row checked).
    /// In a reversed evaluation: no row at or after this one can match (always at or before
    /// the row checked); the scan continues with the last row before it.
    SeekTo(Vec<u8>),
    /// Neither this row nor any later one (in the direction of travel) can match: the scan is
    /// over.
    Done,
}

/// Row-key-stage state of a node for the current row.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RowState {
    /// Every cell of the row passes this node.
    Pass,
    /// No cell passes; the next row that can is the hint (`None`: none can).
    Fail(Option<Vec<u8>>),
    /// Decided per cell or after the row.
    Maybe,
}

#[derive(Debug, Clone)]
enum Kind {
    RowPrefix(Vec<u8>),
    /// Sorted by start, disjoint, non-empty; an empty stop is open.
    RowRanges(Vec<(Vec<u8>, Vec<u8>)>),
    /// Decided when the row starts, but held back to the cell stage: a failing row reads its
    /// cells rather than seek past them (a seek per rejected row re-positions every source).
    /// A row outside the literal prefix the expression is anchored on (`^abc`) fails at once,
    /// with the prefix's seek hint.
    RowMatch(Compiled),
    ColumnPrefix(Vec<u8>),
    Qualifier(Test),
    Family(Test),
    Value(Test),
    Scv {
        family: String,
        qualifier: Vec<u8>,
        test: Test,
        filter_if_missing: bool,
    },
    Dependent {
        family: String,
        qualifier: Vec<u8>,
        drop_reference: bool,
        value: Option<Box<Node>>,
        /// Timestamps of the current row's passing reference cells, sorted.
        stamps: Vec<u64>,
    },
    /// Sorted, deduplicated.
    Timestamps(Vec<u64>),
    Page(usize),
    FirstKeyOnly {
        seen: bool,
    },
    ColumnPage {
        limit: usize,
        offset: usize,
        /// Columns met in this row so far, the current one included.
        columns: usize,
        /// The current column.
        last: Option<(String, Vec<u8>)>,
    },
    KeyOnly,
    Skip(Box<Node>),
    While {
        inner: Box<Node>,
        /// A row failed: no later row passes.
        stopped: bool,
        /// The inner filter rejected this row's key. The scan stops only if the row has
        /// cells to return: a row that resolves to nothing (deleted, expired, outside the
        /// time range) is invisible, and whether its keys are still stored must not change
        /// what a read returns.
        key_failed: bool,
    },
    And(Vec<Node>),
    Or(Vec<Node>),
}

/// A comparison or a match, on a qualifier or value.
#[derive(Debug, Clone)]
enum Test {
    Compare(CompareOp, Vec<u8>),
    Match(Compiled),
}

impl Test {
    fn passes(&self, b: &[u8]) -> bool {
        match self {
            Test::Compare(op, v) => op.matches(b, v),
            Test::Match(m) => m.matches(b),
        }
    }
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    row: RowState,
}

/// The state of a row without prefix `p`: a failure, with the hint of the prefix's rows when
/// they lie ahead in the direction of travel.
fn prefix_miss(p: &[u8], row: &[u8], reversed: bool) -> RowState {
    if (row < p) != reversed {
        // Before the prefix's rows going forward, after them going backward.
        if reversed {
            // `prefix_end` is `None` only when every row after the prefix has it, which this
            // row does not: unreachable, but skipping just this row is the safe answer.
            RowState::Fail(Some(prefix_end(p).unwrap_or_else(|| row.to_vec())))
        } else {
            RowState::Fail(Some(p.to_vec()))
        }
    } else {
        // Past every row with the prefix in the direction of travel.
        RowState::Fail(None)
    }
}

/// Sort, drop empty ranges and merge overlapping or touching ones.
fn normalize_ranges(ranges: &[(Vec<u8>, Vec<u8>)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rs: Vec<(Vec<u8>, Vec<u8>)> = ranges
        .iter()
        .filter(|(start, stop)| stop.is_empty() || start < stop)
        .cloned()
        .collect();
    rs.sort();
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(rs.len());
    for (start, stop) in rs {
        if let Some(last) = out.last_mut() {
            let open = last.1.is_empty();
            if open || start <= last.1 {
                if !open && (stop.is_empty() || stop > last.1) {
                    last.1 = stop;
                }
                continue;
            }
        }
        out.push((start, stop));
    }
    out
}

impl Node {
    fn compile(f: &Filter) -> crate::Result<Node> {
        let kind = match f {
            Filter::RowPrefix(p) => Kind::RowPrefix(p.clone()),
            Filter::RowRanges(r) => Kind::RowRanges(normalize_ranges(r)),
            Filter::RowMatch(m) => Kind::RowMatch(Compiled::new(m)?),
            Filter::ColumnPrefix(p) => Kind::ColumnPrefix(p.clone()),
            Filter::Qualifier(op, v) => Kind::Qualifier(Test::Compare(*op, v.clone())),
            Filter::QualifierMatch(m) => Kind::Qualifier(Test::Match(Compiled::new(m)?)),
            Filter::Family(op, v) => Kind::Family(Test::Compare(*op, v.clone())),
            Filter::FamilyMatch(m) => Kind::Family(Test::Match(Compiled::new(m)?)),
            Filter::Value(op, v) => Kind::Value(Test::Compare(*op, v.clone())),
            Filter::ValueMatch(m) => Kind::Value(Test::Match(Compiled::new(m)?)),
            Filter::SingleColumnValue {
                family,
                qualifier,
                op,
                value,
                filter_if_missing,
            } => Kind::Scv {
                family: family.clone(),
                qualifier: qualifier.clone(),
                test: Test::Compare(*op, value.clone()),
                filter_if_missing: *filter_if_missing,
            },
            Filter::SingleColumnValueMatch {
                family,
                qualifier,
                matcher,
                filter_if_missing,
            } => Kind::Scv {
                family: family.clone(),
                qualifier: qualifier.clone(),
                test: Test::Match(Compiled::new(matcher)?),
                filter_if_missing: *filter_if_missing,
            },
            Filter::DependentColumn {
                family,
                qualifier,
                drop_reference,
                value,
            } => Kind::Dependent {
                family: family.clone(),
                qualifier: qualifier.clone(),
                drop_reference: *drop_reference,
                value: match value {
                    Some(f) => Some(Box::new(Node::compile(f)?)),
                    None => None,
                },
                stamps: Vec::new(),
            },
            Filter::Timestamps(ts) => {
                let mut ts = ts.clone();
                ts.sort_unstable();
                ts.dedup();
                Kind::Timestamps(ts)
            }
            Filter::Page(n) => Kind::Page(*n),
            Filter::FirstKeyOnly => Kind::FirstKeyOnly { seen: false },
            Filter::ColumnPage { limit, offset } => Kind::ColumnPage {
                limit: *limit,
                offset: *offset,
                columns: 0,
                last: None,
            },
            Filter::KeyOnly => Kind::KeyOnly,
            Filter::Skip(f) => Kind::Skip(Box::new(Node::compile(f)?)),
            Filter::While(f) => Kind::While {
                inner: Box::new(Node::compile(f)?),
                stopped: false,
                key_failed: false,
            },
            Filter::And(fs) => Kind::And(fs.iter().map(Node::compile).collect::<Result<_, _>>()?),
            Filter::Or(fs) => Kind::Or(fs.iter().map(Node::compile).collect::<Result<_, _>>()?),
        };
        Ok(Node {
            kind,
            row: RowState::Maybe,
        })
    }

    /// Row-key stage: set and return this node's state for `row`; `accepted` is the number of
    /// rows the whole filter has accepted so far (for Page). Also resets per-row state. When
    /// `reversed`, a failure's hint is an exclusive upper bound (see the module docs).
    fn check_row(&mut self, row: &[u8], accepted: usize, reversed: bool) -> RowState {
        let state = match &mut self.kind {
            Kind::RowPrefix(p) => {
                if row.starts_with(p) {
                    RowState::Pass
                } else {
                    prefix_miss(p, row, reversed)
                }
            }
            Kind::RowRanges(ranges) if reversed => {
                // Last range starting at or before `row` (starts ascend).
                let i = ranges.partition_point(|(start, _)| start.as_slice() <= row);
                match i.checked_sub(1).and_then(|i| ranges.get(i)) {
                    None => RowState::Fail(None),
                    Some((_, stop)) if stop.is_empty() || row < stop.as_slice() => RowState::Pass,
                    Some((_, stop)) => RowState::Fail(Some(stop.clone())),
                }
            }
            Kind::RowRanges(ranges) => {
                // First range whose stop is after `row` (stops ascend since ranges are
                // disjoint and sorted; an open stop is last).
                let i =
                    ranges.partition_point(|(_, stop)| !stop.is_empty() && stop.as_slice() <= row);
                match ranges.get(i) {
                    None => RowState::Fail(None),
                    Some((start, _)) if start.as_slice() <= row => RowState::Pass,
                    Some((start, _)) => RowState::Fail(Some(start.clone())),
                }
            }
            Kind::Page(n) => {
                if accepted < *n {
                    RowState::Pass
                } else {
                    // The count never falls, so no later row passes either.
                    RowState::Fail(None)
                }
            }
            Kind::KeyOnly => RowState::Pass,
            // A row that fails stays Maybe: its cells are read and the cell stage rejects them
            // all (`row_pass` is false), which costs less than a seek past one row.
            // An expression anchored on a literal prefix seeks as a PrefixFilter does.
            Kind::RowMatch(m) if !row.starts_with(&m.prefix) => {
                prefix_miss(&m.prefix, row, reversed)
            }
            Kind::RowMatch(m) if m.matches(row) => RowState::Pass,
            Kind::RowMatch(_) => RowState::Maybe,
            Kind::FirstKeyOnly { seen } => {
                *seen = false;
                RowState::Maybe
            }
            Kind::ColumnPage { columns, last, .. } => {
                *columns = 0;
                *last = None;
                RowState::Maybe
            }
            // A row-key failure of the inner filter fails every cell, so its hint holds here
            // too; a pass or a maybe is settled on the cells.
            Kind::Skip(inner) => match inner.check_row(row, accepted, reversed) {
                RowState::Fail(hint) => RowState::Fail(hint),
                RowState::Pass | RowState::Maybe => RowState::Maybe,
            },
            Kind::While { stopped: true, .. } => RowState::Fail(None),
            Kind::While {
                inner, key_failed, ..
            } => {
                *key_failed = matches!(inner.check_row(row, accepted, reversed), RowState::Fail(_));
                RowState::Maybe
            }
            Kind::Dependent { value, stamps, .. } => {
                stamps.clear();
                if let Some(v) = value {
                    v.check_row(row, accepted, reversed);
                }
                RowState::Maybe
            }
            Kind::ColumnPrefix(_)
            | Kind::Qualifier(..)
            | Kind::Family(..)
            | Kind::Value(..)
            | Kind::Timestamps(_)
            | Kind::Scv { .. } => RowState::Maybe,
            Kind::And(children) => {
                let mut all_pass = true;
                let mut fail: Option<Option<Vec<u8>>> = None;
                for c in children.iter_mut() {
                    match c.check_row(row, accepted, reversed) {
                        RowState::Pass => {}
                        RowState::Maybe => all_pass = false,
                        RowState::Fail(hint) => {
                            // Rows before the furthest hint (in the direction of travel) fail
                            // that child, so fail the And.
                            fail = Some(match (fail.take(), hint) {
                                (None, h) => h,
                                (Some(None), _) | (Some(_), None) => None,
                                (Some(Some(a)), Some(b)) if reversed => Some(a.min(b)),
                                (Some(Some(a)), Some(b)) => Some(a.max(b)),
                            });
                        }
                    }
                }
                match fail {
                    Some(h) => RowState::Fail(h),
                    None if all_pass => RowState::Pass,
                    None => RowState::Maybe,
                }
            }
            Kind::Or(children) => {
                let mut any_pass = false;
                let mut all_fail = true;
                // Nearest hint among failing children; `None` = none can match again.
                let mut hint: Option<Vec<u8>> = None;
                for c in children.iter_mut() {
                    match c.check_row(row, accepted, reversed) {
                        RowState::Pass => {
                            any_pass = true;
                            all_fail = false;
                        }
                        RowState::Maybe => all_fail = false,
                        RowState::Fail(h) => {
                            if let Some(h) = h {
                                hint = Some(match hint.take() {
                                    Some(cur) if reversed => cur.max(h),
                                    Some(cur) => cur.min(h),
                                    None => h,
                                });
                            }
                        }
                    }
                }
                if any_pass {
                    RowState::Pass
                } else if all_fail && !children.is_empty() {
                    RowState::Fail(hint)
                } else if children.is_empty() {
                    // An empty Or lets nothing through (the union of nothing).
                    RowState::Fail(None)
                } else {
                    RowState::Maybe
                }
            }
        };
        self.row = state.clone();
        state
    }

    /// Row post-stage: settle SingleColumnValue nodes from the row's resolved cells.
    fn settle(&mut self, cells: &[Cell]) {
        let settled = match &mut self.kind {
            Kind::Scv {
                family,
                qualifier,
                test,
                filter_if_missing,
            } => {
                // Cells of a column come newest first: the first put is the newest value.
                let newest = cells.iter().find(|c| {
                    c.cell_type == CellType::Put && c.family == *family && c.qualifier == *qualifier
                });
                let pass = match newest {
                    Some(c) => test.passes(&c.value),
                    None => !*filter_if_missing,
                };
                // The hint is irrelevant here: the row's cells are already read.
                Some(if pass {
                    RowState::Pass
                } else {
                    RowState::Fail(None)
                })
            }
            Kind::Skip(inner) => {
                // Only a row still undecided by its key comes here.
                if self.row != RowState::Maybe {
                    return;
                }
                inner.settle(cells);
                let whole = cells.iter().all(|c| inner.eval(c).0);
                Some(if whole {
                    RowState::Pass
                } else {
                    RowState::Fail(None)
                })
            }
            Kind::While {
                inner,
                stopped,
                key_failed,
            } => {
                if self.row != RowState::Maybe {
                    return;
                }
                let whole = !*key_failed && {
                    inner.settle(cells);
                    cells.iter().all(|c| inner.eval(c).0)
                };
                *stopped |= !whole;
                Some(if whole {
                    RowState::Pass
                } else {
                    RowState::Fail(None)
                })
            }
            Kind::Dependent {
                family,
                qualifier,
                value,
                stamps,
                ..
            } => {
                if let Some(v) = value.as_deref_mut() {
                    v.settle(cells);
                }
                for c in cells {
                    if c.family == *family
                        && c.qualifier == *qualifier
                        && value.as_deref_mut().is_none_or(|v| v.eval(c).0)
                    {
                        stamps.push(c.timestamp);
                    }
                }
                stamps.sort_unstable();
                None
            }
            Kind::And(children) | Kind::Or(children) => {
                for c in children.iter_mut() {
                    c.settle(cells);
                }
                None
            }
            _ => None,
        };
        if let Some(state) = settled {
            self.row = state;
        }
    }

    /// Cell stage: whether `cell` passes, and whether its value is to be emptied.
    fn eval(&mut self, cell: &Cell) -> (bool, bool) {
        let row_pass = self.row == RowState::Pass;
        match &mut self.kind {
            Kind::And(children) => {
                let mut strip = false;
                for c in children.iter_mut() {
                    let (pass, s) = c.eval(cell);
                    if !pass {
                        return (false, false);
                    }
                    strip |= s;
                }
                (true, strip)
            }
            Kind::Or(children) => {
                let (mut any, mut strip) = (false, false);
                for c in children.iter_mut() {
                    let (pass, s) = c.eval(cell);
                    if pass {
                        any = true;
                        strip |= s;
                    }
                }
                (any, strip)
            }
            Kind::KeyOnly => (true, true),
            Kind::FirstKeyOnly { seen } => {
                let first = !*seen;
                *seen = true;
                (first, false)
            }
            Kind::ColumnPrefix(p) => (cell.qualifier.starts_with(p), false),
            Kind::Qualifier(t) => (t.passes(&cell.qualifier), false),
            Kind::Family(t) => (t.passes(cell.family.as_bytes()), false),
            Kind::ColumnPage {
                limit,
                offset,
                columns,
                last,
            } => {
                let same = last
                    .as_ref()
                    .is_some_and(|(f, q)| *f == cell.family && *q == cell.qualifier);
                if !same {
                    *columns += 1;
                    *last = Some((cell.family.clone(), cell.qualifier.clone()));
                }
                let i = *columns - 1;
                (!same && i >= *offset && i - *offset < *limit, false)
            }
            Kind::Value(t) => (t.passes(&cell.value), false),
            Kind::Timestamps(ts) => (ts.binary_search(&cell.timestamp).is_ok(), false),
            Kind::Dependent {
                family,
                qualifier,
                drop_reference,
                stamps,
                ..
            } => {
                let reference = cell.family == *family && cell.qualifier == *qualifier;
                let stamped = stamps.binary_search(&cell.timestamp).is_ok();
                (stamped && !(reference && *drop_reference), false)
            }
            Kind::RowPrefix(_)
            | Kind::RowRanges(_)
            | Kind::RowMatch(_)
            | Kind::Page(_)
            | Kind::Skip(_)
            | Kind::While { .. }
            | Kind::Scv { .. } => (row_pass, false),
        }
    }
}

/// A filter's evaluation state over one read: call [`FilterEval::check_row`] when a row
/// starts (before reading its cells) and [`FilterEval::finish_row`] with its resolved cells.
#[derive(Debug, Clone)]
pub struct FilterEval {
    root: Node,
    /// Rows the filter has accepted (returned non-empty), for Page.
    accepted: usize,
    /// Rows come in descending order: hints bound from above.
    reversed: bool,
}

impl FilterEval {
    /// Fresh state for `filter`; `InvalidArgument` when a regular expression in it does not
    /// compile.
    pub fn new(filter: &Filter) -> crate::Result<Self> {
        Ok(FilterEval {
            root: Node::compile(filter)?,
            accepted: 0,
            reversed: false,
        })
    }

    /// Fresh state for `filter` in a reversed scan (see the module docs).
    pub fn reversed(filter: &Filter) -> crate::Result<Self> {
        Ok(FilterEval {
            reversed: true,
            ..FilterEval::new(filter)?
        })
    }

    /// Rows accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted
    }

    /// Row-key stage for a row about to be read.
    pub fn check_row(&mut self, row: &[u8]) -> RowCheck {
        match self.root.check_row(row, self.accepted, self.reversed) {
            RowState::Pass | RowState::Maybe => RowCheck::Include,
            RowState::Fail(Some(h)) if self.reversed => {
                // A hint must move backward; skipping just this row is always safe.
                RowCheck::SeekTo(if h.as_slice() <= row { h } else { row.to_vec() })
            }
            RowState::Fail(Some(h)) if h.as_slice() > row => RowCheck::SeekTo(h),
            RowState::Fail(Some(_)) => {
                // Defensive: a hint must move forward; fall back to the next possible row.
                let mut next = row.to_vec();
                next.push(0);
                RowCheck::SeekTo(next)
            }
            RowState::Fail(None) => RowCheck::Done,
        }
    }

    /// Cell, post-row and transform stages over the resolved cells of a row that passed
    /// [`FilterEval::check_row`]: the cells returned (empty when the row is filtered out).
    pub fn finish_row(&mut self, cells: Vec<Cell>) -> Vec<Cell> {
        if cells.is_empty() {
            return cells;
        }
        self.root.settle(&cells);
        let mut out = Vec::with_capacity(cells.len());
        for mut c in cells {
            let (pass, strip) = self.root.eval(&c);
            if pass {
                if strip {
                    c.value = Vec::new();
                }
                out.push(c);
            }
        }
        if !out.is_empty() {
            self.accepted += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(q: &str, ts: u64, v: &str) -> Cell {
        Cell::new("r", "cf", q, ts, CellType::Put, v)
    }

    #[test]
    fn substrings_ignore_case_as_hbase_lower_cases_both_sides() {
        let m = |t: &str| Compiled::new(&Matcher::substring(t)).unwrap();
        assert!(m("ABC").matches(b"xxabcxx"));
        assert!(m("abc").matches(b"xxAbCxx"));
        assert!(!m("abd").matches(b"xxabcxx"));
        assert!(m("").matches(b""));
        // Not ASCII: Unicode's lower case, on text read from UTF-8.
        assert!(m("ÉTÉ").matches("un été".as_bytes()));
        assert!(
            m("k").matches("\u{212A}".as_bytes()),
            "the Kelvin sign lower-cases to k"
        );
        assert!(!Compiled::new(&Matcher::substring("a").negated())
            .unwrap()
            .matches(b"A"));
    }

    #[test]
    fn regexes_search_bytes_with_dotall() {
        let m = |e: &str| Compiled::new(&Matcher::regex(e)).unwrap();
        assert!(m("b.d").matches(b"ab\nde"), "DOTALL");
        assert!(m("^ab").matches(b"abc") && !m("^ab").matches(b"cab"));
        assert!(m("\\xE9").matches(&[b'x', 0xE9]), "a byte is a character");
        assert!(m("(?i)ABC").matches(b"xabc"));
        assert!(
            m("café").matches("un café".as_bytes()),
            "text is its UTF-8 bytes"
        );
        assert!(Compiled::new(&Matcher::regex("1$").negated())
            .unwrap()
            .matches(b"v12"));
        let e = FilterEval::new(&Filter::ValueMatch(Matcher::regex("(unclosed"))).unwrap_err();
        assert!(
            matches!(&e, crate::Error::InvalidArgument(m) if m.contains("(unclosed")),
            "{e}"
        );
    }

    #[test]
    fn a_repeated_expression_is_compiled_once() {
        let a = compiled_regex("^cached expression [0-9]+$").unwrap().0;
        let b = compiled_regex("^cached expression [0-9]+$").unwrap().0;
        assert!(Arc::ptr_eq(&a, &b));
        for i in 0..REGEX_CACHE_LEN {
            compiled_regex(&format!("^other {i}$")).unwrap();
        }
        let c = compiled_regex("^cached expression [0-9]+$").unwrap().0;
        assert!(
            !Arc::ptr_eq(&a, &c),
            "evicted after {REGEX_CACHE_LEN} others"
        );
        assert!(REGEX_CACHE.lock().len() <= REGEX_CACHE_LEN);
        assert!(compiled_regex("(").is_err());
    }

    #[test]
    fn anchored_literal_prefixes_are_found() {
        assert_eq!(anchored_prefix("^user1[0-9]+$"), b"user1");
        assert_eq!(anchored_prefix("^u"), b"u");
        assert_eq!(anchored_prefix("\\Au\\x00v"), b"u\0v");
        for none in [
            "u1", "^(?i)u1", "^u1|x", "(?m)^u1", "^", "^.u", "^[ab]c", "(^u)",
        ] {
            assert_eq!(anchored_prefix(none), b"", "{none}");
        }
        let f = Filter::RowMatch(Matcher::regex("^m[0-9]"));
        let mut e = FilterEval::new(&f).unwrap();
        assert_eq!(e.check_row(b"a"), RowCheck::SeekTo(b"m".to_vec()));
        assert_eq!(e.check_row(b"m5"), RowCheck::Include);
        assert_eq!(e.check_row(b"n"), RowCheck::Done);
        let mut e = FilterEval::reversed(&f).unwrap();
        assert_eq!(e.check_row(b"z"), RowCheck::SeekTo(b"n".to_vec()));
        assert_eq!(e.check_row(b"a"), RowCheck::Done);
        // Negated, the prefix says nothing about the rows that pass.
        let mut e = FilterEval::new(&Filter::RowMatch(Matcher::regex("^m").negated())).unwrap();
        assert_eq!(e.check_row(b"a"), RowCheck::Include);
    }

    #[test]
    fn a_row_match_decides_the_row_at_the_cell_stage() {
        let f = Filter::Or(vec![
            Filter::RowMatch(Matcher::regex("^r1")),
            Filter::ValueMatch(Matcher::substring("KEEP")),
        ]);
        let mut e = FilterEval::new(&f).unwrap();
        assert_eq!(
            e.check_row(b"r2"),
            RowCheck::Include,
            "no seek past a failing row"
        );
        let cells = vec![cell("a", 1, "keep me"), cell("b", 1, "drop")];
        assert_eq!(e.finish_row(cells.clone()), vec![cells[0].clone()]);
        assert_eq!(e.check_row(b"r10"), RowCheck::Include);
        assert_eq!(e.finish_row(cells.clone()), cells);
    }

    #[test]
    fn column_pages_count_columns_not_versions() {
        let mut e = FilterEval::new(&Filter::ColumnPage {
            limit: 2,
            offset: 1,
        })
        .unwrap();
        let cells = vec![
            cell("a", 2, "a2"),
            cell("a", 1, "a1"),
            cell("b", 1, "b"),
            cell("c", 2, "c2"),
            cell("c", 1, "c1"),
            cell("d", 1, "d"),
        ];
        assert_eq!(e.check_row(b"r"), RowCheck::Include);
        let kept: Vec<String> = e
            .finish_row(cells.clone())
            .iter()
            .map(|c| String::from_utf8(c.value.clone()).unwrap())
            .collect();
        assert_eq!(kept, ["b", "c2"]);
        // The count starts again on the next row.
        assert_eq!(e.check_row(b"s"), RowCheck::Include);
        assert_eq!(e.finish_row(cells).len(), 2);
        let mut f = FilterEval::new(&Filter::Family(CompareOp::NotEqual, b"cf".to_vec())).unwrap();
        assert_eq!(f.check_row(b"r"), RowCheck::Include);
        assert!(f.finish_row(vec![cell("a", 1, "x")]).is_empty());
    }

    #[test]
    fn dependent_column_keeps_cells_at_the_reference_timestamps() {
        let f = |drop: bool, value: Option<Filter>| Filter::DependentColumn {
            family: "cf".into(),
            qualifier: b"ref".to_vec(),
            drop_reference: drop,
            value: value.map(Box::new),
        };
        let cells = vec![
            cell("a", 3, "a3"),
            cell("a", 2, "a2"),
            cell("b", 1, "b1"),
            cell("ref", 3, "yes"),
            cell("ref", 1, "no"),
        ];
        let run = |filter: Filter| {
            let mut e = FilterEval::new(&filter).unwrap();
            assert_eq!(e.check_row(b"r"), RowCheck::Include);
            e.finish_row(cells.clone())
                .iter()
                .map(|c| String::from_utf8(c.value.clone()).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(f(false, None)), ["a3", "b1", "yes", "no"]);
        assert_eq!(run(f(true, None)), ["a3", "b1"]);
        let yes = Filter::Value(CompareOp::Equal, b"yes".to_vec());
        assert_eq!(run(f(false, Some(yes.clone()))), ["a3", "yes"]);
        assert_eq!(run(f(true, Some(yes))), ["a3"]);
        // No reference cell: nothing.
        let mut e = FilterEval::new(&f(false, None)).unwrap();
        e.check_row(b"s");
        assert!(e.finish_row(vec![cell("a", 3, "a3")]).is_empty());
    }

    #[test]
    fn skip_takes_rows_whole_and_while_ends_the_scan() {
        let not_zero = || Filter::Value(CompareOp::NotEqual, b"0".to_vec());
        let mut e = FilterEval::new(&Filter::Skip(Box::new(not_zero()))).unwrap();
        assert_eq!(e.check_row(b"a"), RowCheck::Include);
        assert_eq!(
            e.finish_row(vec![cell("q", 1, "1"), cell("r", 1, "0")]),
            vec![]
        );
        assert_eq!(e.check_row(b"b"), RowCheck::Include);
        assert_eq!(e.finish_row(vec![cell("q", 1, "1")]).len(), 1);
        // A row key the inner filter rejects keeps its seek hint.
        let mut e =
            FilterEval::new(&Filter::Skip(Box::new(Filter::RowPrefix(b"m".to_vec())))).unwrap();
        assert_eq!(e.check_row(b"a"), RowCheck::SeekTo(b"m".to_vec()));

        let mut e = FilterEval::new(&Filter::While(Box::new(not_zero()))).unwrap();
        assert_eq!(e.check_row(b"a"), RowCheck::Include);
        assert_eq!(e.finish_row(vec![cell("q", 1, "1")]).len(), 1);
        assert_eq!(e.check_row(b"b"), RowCheck::Include);
        assert_eq!(
            e.finish_row(vec![cell("q", 1, "1"), cell("r", 1, "0")]),
            vec![]
        );
        assert_eq!(e.check_row(b"c"), RowCheck::Done);
        let mut e =
            FilterEval::new(&Filter::While(Box::new(Filter::RowPrefix(b"a".to_vec())))).unwrap();
        assert_eq!(e.check_row(b"a1"), RowCheck::Include);
        assert_eq!(e.finish_row(vec![cell("q", 1, "1")]).len(), 1);
        // A row the inner filter rejects by key but that has nothing to return goes unseen.
        assert_eq!(e.check_row(b"b"), RowCheck::Include);
        assert_eq!(e.finish_row(vec![]), vec![]);
        assert_eq!(e.check_row(b"c"), RowCheck::Include);
        assert_eq!(e.finish_row(vec![cell("q", 1, "1")]), vec![]);
        assert_eq!(e.check_row(b"d"), RowCheck::Done);
    }

    #[test]
    fn compare_ops() {
        assert!(CompareOp::Less.matches(b"a", b"b"));
        assert!(!CompareOp::Less.matches(b"b", b"b"));
        assert!(CompareOp::LessOrEqual.matches(b"b", b"b"));
        assert!(CompareOp::NotEqual.matches(b"ab", b"a"));
        assert!(CompareOp::Greater.matches(b"ab", b"a"));
        assert!(CompareOp::GreaterOrEqual.matches(b"a", b"a"));
        assert!(CompareOp::Equal.matches(b"", b""));
    }

    #[test]
    fn ranges_merge_and_hint() {
        let f = Filter::RowRanges(vec![
            (b"m".to_vec(), b"p".to_vec()),
            (b"c".to_vec(), b"e".to_vec()),
            (b"d".to_vec(), b"f".to_vec()),
            (b"x".to_vec(), b"x".to_vec()),
            (b"f".to_vec(), b"g".to_vec()),
        ]);
        let mut e = FilterEval::new(&f).unwrap();
        assert_eq!(e.check_row(b"a"), RowCheck::SeekTo(b"c".to_vec()));
        assert_eq!(e.check_row(b"f5"), RowCheck::Include);
        assert_eq!(e.check_row(b"g"), RowCheck::SeekTo(b"m".to_vec()));
        assert_eq!(e.check_row(b"p"), RowCheck::Done);
        let open = Filter::RowRanges(vec![
            (b"k".to_vec(), Vec::new()),
            (b"b".to_vec(), b"c".to_vec()),
        ]);
        let mut e = FilterEval::new(&open).unwrap();
        assert_eq!(e.check_row(b"zzz"), RowCheck::Include);
        assert_eq!(e.check_row(b"c"), RowCheck::SeekTo(b"k".to_vec()));
    }

    #[test]
    fn and_or_row_hints() {
        let and = Filter::and([
            Filter::RowPrefix(b"b".to_vec()),
            Filter::RowRanges(vec![(b"b5".to_vec(), b"b7".to_vec())]),
        ]);
        let mut e = FilterEval::new(&and).unwrap();
        assert_eq!(e.check_row(b"a"), RowCheck::SeekTo(b"b5".to_vec()));
        assert_eq!(e.check_row(b"b6"), RowCheck::Include);
        assert_eq!(e.check_row(b"b8"), RowCheck::Done);
        let or = Filter::or([
            Filter::RowPrefix(b"b".to_vec()),
            Filter::RowPrefix(b"d".to_vec()),
        ]);
        let mut e = FilterEval::new(&or).unwrap();
        assert_eq!(e.check_row(b"a"), RowCheck::SeekTo(b"b".to_vec()));
        assert_eq!(e.check_row(b"c"), RowCheck::SeekTo(b"d".to_vec()));
        assert_eq!(e.check_row(b"e"), RowCheck::Done);
        // A cell-level child keeps the Or undecided.
        let or = Filter::or([
            Filter::RowPrefix(b"b".to_vec()),
            Filter::Value(CompareOp::Equal, b"x".to_vec()),
        ]);
        let mut e = FilterEval::new(&or).unwrap();
        assert_eq!(e.check_row(b"z"), RowCheck::Include);
        let out = e.finish_row(vec![cell("a", 1, "x"), cell("b", 1, "y")]);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn reversed_hints_bound_from_above() {
        let mut e = FilterEval::reversed(&Filter::RowPrefix(b"b".to_vec())).unwrap();
        assert_eq!(e.check_row(b"c"), RowCheck::SeekTo(b"c".to_vec()));
        assert_eq!(e.check_row(b"c5"), RowCheck::SeekTo(b"c".to_vec()));
        assert_eq!(e.check_row(b"b9"), RowCheck::Include);
        assert_eq!(e.check_row(b"a"), RowCheck::Done);
        let ranges = Filter::RowRanges(vec![
            (b"c".to_vec(), b"e".to_vec()),
            (b"m".to_vec(), b"p".to_vec()),
        ]);
        let mut e = FilterEval::reversed(&ranges).unwrap();
        assert_eq!(e.check_row(b"z"), RowCheck::SeekTo(b"p".to_vec()));
        assert_eq!(e.check_row(b"o"), RowCheck::Include);
        assert_eq!(e.check_row(b"g"), RowCheck::SeekTo(b"e".to_vec()));
        assert_eq!(e.check_row(b"c"), RowCheck::Include);
        assert_eq!(e.check_row(b"b"), RowCheck::Done);
        // And: the lowest hint; Or: the highest.
        let and = Filter::and([
            Filter::RowPrefix(b"b".to_vec()),
            Filter::RowRanges(vec![(b"b5".to_vec(), b"b7".to_vec())]),
        ]);
        let mut e = FilterEval::reversed(&and).unwrap();
        assert_eq!(e.check_row(b"z"), RowCheck::SeekTo(b"b7".to_vec()));
        assert_eq!(e.check_row(b"b6"), RowCheck::Include);
        assert_eq!(e.check_row(b"b4"), RowCheck::Done);
        let or = Filter::or([
            Filter::RowPrefix(b"b".to_vec()),
            Filter::RowPrefix(b"d".to_vec()),
        ]);
        let mut e = FilterEval::reversed(&or).unwrap();
        assert_eq!(e.check_row(b"z"), RowCheck::SeekTo(b"e".to_vec()));
        assert_eq!(e.check_row(b"c"), RowCheck::SeekTo(b"c".to_vec()));
        assert_eq!(e.check_row(b"a"), RowCheck::Done);
    }

    #[test]
    fn cell_stage_and_transforms() {
        let f = Filter::and([Filter::ColumnPrefix(b"a".to_vec()), Filter::KeyOnly]);
        let mut e = FilterEval::new(&f).unwrap();
        assert_eq!(e.check_row(b"r"), RowCheck::Include);
        let out = e.finish_row(vec![cell("a1", 1, "v"), cell("b", 1, "v")]);
        assert_eq!(out.len(), 1);
        assert!(out.iter().all(|c| c.value.is_empty()));
        let mut e = FilterEval::new(&Filter::FirstKeyOnly).unwrap();
        e.check_row(b"r");
        assert_eq!(
            e.finish_row(vec![cell("a", 1, "v"), cell("b", 1, "v")])
                .len(),
            1
        );
        e.check_row(b"s");
        assert_eq!(
            e.finish_row(vec![cell("a", 1, "v"), cell("b", 1, "v")])
                .len(),
            1
        );
        let mut e = FilterEval::new(&Filter::Page(1)).unwrap();
        assert_eq!(e.check_row(b"r"), RowCheck::Include);
        assert_eq!(e.finish_row(vec![cell("a", 1, "v")]).len(), 1);
        assert_eq!(e.check_row(b"s"), RowCheck::Done);
    }

    #[test]
    fn single_column_value() {
        let scv = |missing| Filter::SingleColumnValue {
            family: "cf".into(),
            qualifier: b"s".to_vec(),
            op: CompareOp::Equal,
            value: b"on".to_vec(),
            filter_if_missing: missing,
        };
        let mut e = FilterEval::new(&scv(false)).unwrap();
        e.check_row(b"r");
        assert_eq!(
            e.finish_row(vec![cell("a", 1, "v"), cell("s", 2, "on")])
                .len(),
            2
        );
        e.check_row(b"r2");
        assert!(e
            .finish_row(vec![cell("a", 1, "v"), cell("s", 2, "off")])
            .is_empty());
        e.check_row(b"r3");
        assert_eq!(e.finish_row(vec![cell("a", 1, "v")]).len(), 1);
        let mut e = FilterEval::new(&scv(true)).unwrap();
        e.check_row(b"r3");
        assert!(e.finish_row(vec![cell("a", 1, "v")]).is_empty());
    }
}
