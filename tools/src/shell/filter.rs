//! HBase's filter language (`"PrefixFilter('u1') AND ValueFilter(=, 'binary:abc')"`) for the
//! filters the engine has, by recursive descent:
//!
//! ```text
//! expr    := and ("OR" and)*
//! and     := primary ("AND" primary)*
//! primary := "(" expr ")" | ("SKIP" | "WHILE") primary | NAME "(" [arg ("," arg)*] ")"
//! arg     := 'quoted' ('' is a quote) | integer | true | false | = | != | < | <= | > | >=
//! ```
//!
//! The text is bytes: the shell's own string escapes (`\xNN`) were resolved when the FILTER
//! string was read, so arguments are taken as they are here, with no second escape pass.
//!
//! Comparators: `binary:` maps to the engine's byte comparison; `binaryprefix:` is rewritten
//! into byte comparisons against the prefix and the first key past it, which select exactly the
//! same cells. `substring:` and `regexstring:` become the engine's matchers (RowMatch,
//! QualifierMatch, ValueMatch, SingleColumnValueMatch) under `=` and `!=`; HBase also accepts
//! them under `<` and the others, where they mean "passes everything" or "nothing" or the
//! negation by an accident of its comparison code, so those are refused here.

use cellar::{CompareOp, Filter, Matcher};

/// The filters this build parses (`show_filters`), sorted.
pub const FILTERS: &[&str] = &[
    "ColumnCountGetFilter",
    "ColumnPaginationFilter",
    "ColumnPrefixFilter",
    "ColumnRangeFilter",
    "ColumnValueFilter",
    "DependentColumnFilter",
    "FamilyFilter",
    "FirstKeyOnlyFilter",
    "InclusiveStopFilter",
    "KeyOnlyFilter",
    "MultiRowRangeFilter",
    "MultipleColumnPrefixFilter",
    "PageFilter",
    "PrefixFilter",
    "QualifierFilter",
    "RowFilter",
    "SingleColumnValueExcludeFilter",
    "SingleColumnValueFilter",
    "TimestampsFilter",
    "ValueFilter",
];

/// Parse a filter string. Errors carry the byte offset (0-based) into the string.
pub fn parse_filter(src: &[u8]) -> Result<Filter, FilterError> {
    let mut p = Parser { s: src, i: 0 };
    let f = p.expr(0)?;
    p.ws();
    if p.i < p.s.len() {
        return Err(p.err("expected AND, OR or the end of the filter"));
    }
    Ok(f)
}

/// Why a filter string was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// Byte offset in the filter string.
    pub offset: usize,
    /// What is wrong.
    pub msg: String,
    /// The filter or comparator exists in HBase but not in this engine.
    pub unsupported: bool,
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

#[derive(Debug)]
enum Arg {
    Bytes(Vec<u8>),
    Int(i64),
    Bool(bool),
    Op(CompareOp),
}

/// Deepest nesting of parentheses: recursion is bounded so no input can overflow the stack.
const MAX_DEPTH: usize = 64;

impl Parser<'_> {
    fn err(&self, msg: &str) -> FilterError {
        FilterError {
            offset: self.i,
            msg: msg.to_owned(),
            unsupported: false,
        }
    }

    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    /// Consume `kw` when it is the next word (case-insensitive, as HBase).
    fn keyword(&mut self, kw: &str) -> bool {
        self.ws();
        let end = self.i + kw.len();
        let Some(w) = self.s.get(self.i..end) else {
            return false;
        };
        let boundary = !self
            .s
            .get(end)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
        if w.eq_ignore_ascii_case(kw.as_bytes()) && boundary {
            self.i = end;
            true
        } else {
            false
        }
    }

    fn expr(&mut self, depth: usize) -> Result<Filter, FilterError> {
        let mut parts = vec![self.and(depth)?];
        while self.keyword("OR") {
            parts.push(self.and(depth)?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Filter::Or(parts)
        })
    }

    fn and(&mut self, depth: usize) -> Result<Filter, FilterError> {
        let mut parts = vec![self.primary(depth)?];
        while self.keyword("AND") {
            parts.push(self.primary(depth)?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Filter::And(parts)
        })
    }

    fn primary(&mut self, depth: usize) -> Result<Filter, FilterError> {
        if depth >= MAX_DEPTH {
            return Err(self.err("filter nested too deeply"));
        }
        if self.peek() == Some(b'(') {
            self.i += 1;
            let f = self.expr(depth + 1)?;
            if self.peek() != Some(b')') {
                return Err(self.err("expected ')'"));
            }
            self.i += 1;
            return Ok(f);
        }
        // SKIP and WHILE bind tighter than AND and OR, to the filter or parentheses after them.
        if self.keyword("SKIP") {
            return Ok(Filter::Skip(Box::new(self.primary(depth + 1)?)));
        }
        if self.keyword("WHILE") {
            return Ok(Filter::While(Box::new(self.primary(depth + 1)?)));
        }
        let start = self.i;
        let name_end = self.s[self.i..]
            .iter()
            .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
            .map_or(self.s.len(), |n| self.i + n);
        if name_end == self.i {
            return Err(self.err("expected a filter such as PrefixFilter('abc')"));
        }
        let name = String::from_utf8_lossy(&self.s[self.i..name_end]).into_owned();
        self.i = name_end;
        if self.peek() != Some(b'(') {
            return Err(self.err(&format!("expected '(' after {name}")));
        }
        self.i += 1;
        let mut args: Vec<(usize, Arg)> = Vec::new();
        if self.peek() == Some(b')') {
            self.i += 1;
        } else {
            loop {
                self.ws();
                let at = self.i;
                args.push((at, self.arg()?));
                match self.peek() {
                    Some(b',') => self.i += 1,
                    Some(b')') => {
                        self.i += 1;
                        break;
                    }
                    _ => return Err(self.err("expected ',' or ')'")),
                }
            }
        }
        build(&name, start, args)
    }

    fn arg(&mut self) -> Result<Arg, FilterError> {
        let c = self
            .peek()
            .ok_or_else(|| self.err("expected an argument"))?;
        match c {
            b'\'' => {
                self.i += 1;
                let mut out = Vec::new();
                loop {
                    match self.s.get(self.i) {
                        None => return Err(self.err("unterminated quoted argument")),
                        Some(b'\'') if self.s.get(self.i + 1) == Some(&b'\'') => {
                            out.push(b'\'');
                            self.i += 2;
                        }
                        Some(b'\'') => {
                            self.i += 1;
                            return Ok(Arg::Bytes(out));
                        }
                        Some(&b) => {
                            out.push(b);
                            self.i += 1;
                        }
                    }
                }
            }
            b'=' | b'!' | b'<' | b'>' => {
                let two = self.s.get(self.i..self.i + 2);
                let (op, len) = match (c, two) {
                    (_, Some(b"!=")) => (CompareOp::NotEqual, 2),
                    (_, Some(b"<=")) => (CompareOp::LessOrEqual, 2),
                    (_, Some(b">=")) => (CompareOp::GreaterOrEqual, 2),
                    (b'=', _) => (CompareOp::Equal, 1),
                    (b'<', _) => (CompareOp::Less, 1),
                    (b'>', _) => (CompareOp::Greater, 1),
                    _ => return Err(self.err("expected a comparison: = != < <= > >=")),
                };
                self.i += len;
                Ok(Arg::Op(op))
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                self.i += 1;
                while self.s.get(self.i).is_some_and(|c| c.is_ascii_digit()) {
                    self.i += 1;
                }
                let text = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                text.parse::<i64>().map(Arg::Int).map_err(|_| FilterError {
                    offset: start,
                    msg: format!("bad integer {text}"),
                    unsupported: false,
                })
            }
            _ if self.keyword("true") => Ok(Arg::Bool(true)),
            _ if self.keyword("false") => Ok(Arg::Bool(false)),
            _ => {
                Err(self.err("expected a 'quoted' argument, a number, true/false or a comparison"))
            }
        }
    }
}

fn unsupported(offset: usize, msg: &str) -> FilterError {
    FilterError {
        offset,
        msg: msg.to_owned(),
        unsupported: true,
    }
}

fn bad(offset: usize, msg: String) -> FilterError {
    FilterError {
        offset,
        msg,
        unsupported: false,
    }
}

/// The filter named `name` from its arguments; `at` is where the name starts.
fn build(name: &str, at: usize, args: Vec<(usize, Arg)>) -> Result<Filter, FilterError> {
    let usage = |u: &str| bad(at, format!("usage: {u}"));
    let bytes = |a: &(usize, Arg), what: &str| match a {
        (_, Arg::Bytes(b)) => Ok(b.clone()),
        (o, _) => Err(bad(*o, format!("expected {what} in quotes"))),
    };
    let op = |a: &(usize, Arg)| match a {
        (_, Arg::Op(op)) => Ok(*op),
        (o, _) => Err(bad(*o, "expected a comparison: = != < <= > >=".into())),
    };
    match name {
        "PrefixFilter" => match args.as_slice() {
            [a] => Ok(Filter::RowPrefix(bytes(a, "a row prefix")?)),
            _ => Err(usage("PrefixFilter('prefix')")),
        },
        "ColumnPrefixFilter" => match args.as_slice() {
            [a] => Ok(Filter::ColumnPrefix(bytes(a, "a qualifier prefix")?)),
            _ => Err(usage("ColumnPrefixFilter('prefix')")),
        },
        "MultipleColumnPrefixFilter" => {
            if args.is_empty() {
                return Err(usage("MultipleColumnPrefixFilter('p1', 'p2', ...)"));
            }
            let ps = args
                .iter()
                .map(|a| bytes(a, "a qualifier prefix").map(Filter::ColumnPrefix))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Filter::Or(ps))
        }
        "QualifierFilter" | "ValueFilter" | "RowFilter" | "FamilyFilter" => match args.as_slice() {
            [o, c] => {
                let op = op(o)?;
                let (kind, operand) = comparator(c)?;
                if let Some(m) = matcher(op, o.0, kind, operand.clone())? {
                    return Ok(match name {
                        "QualifierFilter" => Filter::QualifierMatch(m),
                        "ValueFilter" => Filter::ValueMatch(m),
                        "FamilyFilter" => Filter::FamilyMatch(m),
                        _ => Filter::RowMatch(m),
                    });
                }
                let leaf: fn(CompareOp, Vec<u8>) -> Filter = match name {
                    "QualifierFilter" => |op, v| Filter::Qualifier(op, v),
                    "ValueFilter" => |op, v| Filter::Value(op, v),
                    "FamilyFilter" => |op, v| Filter::Family(op, v),
                    _ => row_compare,
                };
                Ok(compare(op, kind, operand, leaf))
            }
            _ => Err(usage(&format!("{name}(=, 'binary:abc')"))),
        },
        "SingleColumnValueFilter" | "SingleColumnValueExcludeFilter" => {
            let (fam, q, o, c, if_missing, latest) = match args.as_slice() {
                [f, q, o, c] => (f, q, o, c, false, true),
                [f, q, o, c, (mo, m), (lo, l)] => {
                    let (Arg::Bool(m), Arg::Bool(l)) = (m, l) else {
                        let o = if matches!(m, Arg::Bool(_)) { *lo } else { *mo };
                        return Err(bad(o, "expected true or false".into()));
                    };
                    (f, q, o, c, *m, *l)
                }
                _ => {
                    return Err(usage(&format!(
                        "{name}('cf', 'q', =, 'binary:v'[, filterIfMissing, latestVersionOnly])"
                    )))
                }
            };
            if !latest {
                return Err(unsupported(
                    at,
                    &format!("{name} with latestVersionOnly false is not supported by this build (it tests the newest version)"),
                ));
            }
            let family = String::from_utf8(bytes(fam, "a family")?)
                .map_err(|_| bad(fam.0, "family names are text".into()))?;
            let qualifier = bytes(q, "a qualifier")?;
            let op = op(o)?;
            let (kind, operand) = comparator(c)?;
            // The exclude form drops the tested column from what it returns: every cell but
            // those of family `fam` and qualifier `q`.
            let exclude = (name == "SingleColumnValueExcludeFilter").then(|| {
                Filter::Or(vec![
                    Filter::Family(CompareOp::NotEqual, family.clone().into_bytes()),
                    Filter::Qualifier(CompareOp::NotEqual, qualifier.clone()),
                ])
            });
            let test = match matcher(op, o.0, kind, operand.clone())? {
                Some(matcher) => Filter::SingleColumnValueMatch {
                    family: family.clone(),
                    qualifier: qualifier.clone(),
                    matcher,
                    filter_if_missing: if_missing,
                },
                None => compare(op, kind, operand, |op, value| Filter::SingleColumnValue {
                    family: family.clone(),
                    qualifier: qualifier.clone(),
                    op,
                    value,
                    filter_if_missing: if_missing,
                }),
            };
            Ok(match exclude {
                Some(x) => Filter::And(vec![test, x]),
                None => test,
            })
        }
        "ColumnRangeFilter" => {
            let u = "ColumnRangeFilter('minColumn', minInclusive, 'maxColumn', maxInclusive)";
            let [min, (mo, mi), max, (xo, xi)] = args.as_slice() else {
                return Err(usage(u));
            };
            let (Arg::Bool(min_in), Arg::Bool(max_in)) = (mi, xi) else {
                let o = if matches!(mi, Arg::Bool(_)) { *xo } else { *mo };
                return Err(bad(o, "expected true or false".into()));
            };
            let (min, max) = (bytes(min, "a qualifier")?, bytes(max, "a qualifier")?);
            // An empty bound is open, as a null one is in HBase.
            let mut parts = Vec::new();
            if !min.is_empty() {
                let op = if *min_in { CompareOp::GreaterOrEqual } else { CompareOp::Greater };
                parts.push(Filter::Qualifier(op, min));
            }
            if !max.is_empty() {
                let op = if *max_in { CompareOp::LessOrEqual } else { CompareOp::Less };
                parts.push(Filter::Qualifier(op, max));
            }
            Ok(match parts.len() {
                0 => Filter::ColumnPrefix(Vec::new()),
                1 => parts.remove(0),
                _ => Filter::And(parts),
            })
        }
        "ColumnCountGetFilter" => match args.as_slice() {
            // HBase's is meant for Gets: in a scan it ends the whole scan at the first row
            // with more columns. Here it keeps each row's first n columns (one version each).
            [(_, Arg::Int(n))] if *n >= 0 => Ok(Filter::ColumnPage {
                limit: *n as usize,
                offset: 0,
            }),
            _ => Err(usage("ColumnCountGetFilter(n)")),
        },
        "ColumnValueFilter" => {
            let [fam, q, o, c] = args.as_slice() else {
                return Err(usage("ColumnValueFilter('cf', 'q', =, 'binary:v')"));
            };
            let family = bytes(fam, "a family")?;
            let qualifier = bytes(q, "a qualifier")?;
            // Only the tested column's cells whose value passes.
            let value = value_test(op(o)?, o.0, c)?;
            Ok(Filter::And(vec![
                Filter::Family(CompareOp::Equal, family),
                Filter::Qualifier(CompareOp::Equal, qualifier),
                value,
            ]))
        }
        "DependentColumnFilter" => {
            let u = "DependentColumnFilter('cf', 'q'[, dropDependentColumn[, =, 'binary:v']])";
            let (fam, q, rest) = match args.as_slice() {
                [f, q, rest @ ..] if rest.len() <= 3 && rest.len() != 2 => (f, q, rest),
                _ => return Err(usage(u)),
            };
            let family = String::from_utf8(bytes(fam, "a family")?)
                .map_err(|_| bad(fam.0, "family names are text".into()))?;
            let qualifier = bytes(q, "a qualifier")?;
            let drop_reference = match rest.first() {
                None => false,
                Some((_, Arg::Bool(b))) => *b,
                Some((o, _)) => return Err(bad(*o, "expected true or false".into())),
            };
            let value = match rest {
                [_, o, c] => {
                    Some(Box::new(value_test(op(o)?, o.0, c)?))
                }
                _ => None,
            };
            Ok(Filter::DependentColumn {
                family,
                qualifier,
                drop_reference,
                value,
            })
        }
        "ColumnPaginationFilter" => match args.as_slice() {
            [(_, Arg::Int(l)), (_, Arg::Int(o))] if *l >= 0 && *o >= 0 => Ok(Filter::ColumnPage {
                limit: *l as usize,
                offset: *o as usize,
            }),
            [_, (o, Arg::Bytes(_))] => Err(unsupported(
                *o,
                "ColumnPaginationFilter with a column offset (a qualifier) is not supported by this build (give a number of columns)",
            )),
            _ => Err(usage("ColumnPaginationFilter(limit, offset)")),
        },
        "TimestampsFilter" => {
            let ts = args
                .iter()
                .map(|a| match a {
                    (_, Arg::Int(n)) if *n >= 0 => Ok(*n as u64),
                    (o, _) => Err(bad(
                        *o,
                        "expected a timestamp (a non-negative integer)".into(),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Filter::Timestamps(ts))
        }
        "PageFilter" => match args.as_slice() {
            [(_, Arg::Int(n))] if *n >= 0 => Ok(Filter::Page(*n as usize)),
            _ => Err(usage("PageFilter(n)")),
        },
        "FirstKeyOnlyFilter" => match args.as_slice() {
            [] => Ok(Filter::FirstKeyOnly),
            _ => Err(usage("FirstKeyOnlyFilter()")),
        },
        "KeyOnlyFilter" => match args.as_slice() {
            [] | [(_, Arg::Bool(false))] => Ok(Filter::KeyOnly),
            [(o, Arg::Bool(true))] => Err(unsupported(
                *o,
                "KeyOnlyFilter(true) (value lengths as values) is not supported by this build",
            )),
            _ => Err(usage("KeyOnlyFilter()")),
        },
        "InclusiveStopFilter" => match args.as_slice() {
            [a] => {
                let mut stop = bytes(a, "a stop row")?;
                stop.push(0);
                Ok(Filter::RowRanges(vec![(Vec::new(), stop)]))
            }
            _ => Err(usage("InclusiveStopFilter('stoprow')")),
        },
        "MultiRowRangeFilter" => {
            let u = "MultiRowRangeFilter('start', startInclusive, 'stop', stopInclusive, ...)";
            if args.is_empty() || args.len() % 4 != 0 {
                return Err(usage(u));
            }
            let mut ranges = Vec::new();
            for chunk in args.chunks(4) {
                let [s, (_, Arg::Bool(si)), e, (_, Arg::Bool(ei))] = chunk else {
                    return Err(usage(u));
                };
                let mut start = bytes(s, "a start row")?;
                let mut stop = bytes(e, "a stop row")?;
                // The engine's ranges are [start, stop): the next key after a row turns an
                // exclusive start or an inclusive stop into that form.
                if !si {
                    start.push(0);
                }
                if *ei && !stop.is_empty() {
                    stop.push(0);
                }
                ranges.push((start, stop));
            }
            Ok(Filter::RowRanges(ranges))
        }
        "FirstKeyValueMatchingQualifiersFilter"
        | "FuzzyRowFilter"
        | "RandomRowFilter" => Err(unsupported(
            at,
            &format!("{name} is not supported by this build"),
        )),
        other => Err(bad(at, format!("unknown filter {other}"))),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparator {
    Binary,
    BinaryPrefix,
    Substring,
    Regex,
}

/// A cell filter on values: `value OP comparator` (a ValueFilter's meaning).
fn value_test(op: CompareOp, op_at: usize, c: &(usize, Arg)) -> Result<Filter, FilterError> {
    let (kind, operand) = comparator(c)?;
    Ok(match matcher(op, op_at, kind, operand.clone())? {
        Some(m) => Filter::ValueMatch(m),
        None => compare(op, kind, operand, Filter::Value),
    })
}

/// A regular expression's bytes as the engine's text: the shell already turned `\xNN` into
/// bytes, so a byte that is not UTF-8 goes back to the expression's own `\xNN`, which the
/// engine's byte-wise expressions match as that byte.
fn regex_text(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        out.push_str(chunk.valid());
        for x in chunk.invalid() {
            out.push_str(&format!("\\x{x:02X}"));
        }
    }
    out
}

/// A `substring:` or `regexstring:` comparator under `=` or `!=` as the engine's matcher;
/// `None` for the byte comparators.
fn matcher(
    op: CompareOp,
    op_at: usize,
    kind: Comparator,
    operand: Vec<u8>,
) -> Result<Option<Matcher>, FilterError> {
    let m = match kind {
        Comparator::Binary | Comparator::BinaryPrefix => return Ok(None),
        Comparator::Substring => Matcher::substring(operand),
        Comparator::Regex => Matcher::regex(regex_text(&operand)),
    };
    match op {
        CompareOp::Equal => Ok(Some(m)),
        CompareOp::NotEqual => Ok(Some(m.negated())),
        _ => Err(bad(
            op_at,
            "substring: and regexstring: comparators take = or != only".into(),
        )),
    }
}

fn comparator(a: &(usize, Arg)) -> Result<(Comparator, Vec<u8>), FilterError> {
    let (o, Arg::Bytes(b)) = a else {
        return Err(bad(
            a.0,
            "expected a comparator such as 'binary:abc'".into(),
        ));
    };
    let Some(colon) = b.iter().position(|&c| c == b':') else {
        return Err(bad(*o, "expected a comparator such as 'binary:abc'".into()));
    };
    let kind = String::from_utf8_lossy(&b[..colon]).to_ascii_lowercase();
    let operand = b[colon + 1..].to_vec();
    match kind.as_str() {
        "binary" => Ok((Comparator::Binary, operand)),
        "binaryprefix" => Ok((Comparator::BinaryPrefix, operand)),
        "substring" => Ok((Comparator::Substring, operand)),
        "regexstring" => Ok((Comparator::Regex, operand)),
        "null" | "long" | "bit" => Err(unsupported(
            *o,
            &format!("the {kind}: comparator is not supported by this build (use binary:, binaryprefix:, substring: or regexstring:)"),
        )),
        _ => Err(bad(*o, format!("unknown comparator {kind}:"))),
    }
}

/// `actual OP operand` through byte comparisons only. For `binaryprefix:p` HBase compares the
/// first `len(p)` bytes of the actual value with `p`; that prefix is `< p`, `== p` or `> p`
/// exactly when the whole value is `< p`, in `[p, end)` or `>= end`, where `end` is the first
/// key past every key starting with `p` — so each operator becomes one or two binary tests.
fn compare(
    op: CompareOp,
    kind: Comparator,
    operand: Vec<u8>,
    leaf: impl Fn(CompareOp, Vec<u8>) -> Filter,
) -> Filter {
    use CompareOp::*;
    if kind == Comparator::Binary {
        return leaf(op, operand);
    }
    let end = cellar::read::query::prefix_end(&operand);
    // "Nothing matches" and "everything matches" in the same vocabulary: no value is below
    // the empty string, every value is at or above it.
    let nothing = || leaf(Less, Vec::new());
    let everything = || leaf(GreaterOrEqual, Vec::new());
    match (op, end) {
        (Equal, Some(end)) => Filter::And(vec![leaf(GreaterOrEqual, operand), leaf(Less, end)]),
        (Equal, None) => leaf(GreaterOrEqual, operand),
        (NotEqual, Some(end)) => Filter::Or(vec![leaf(Less, operand), leaf(GreaterOrEqual, end)]),
        (NotEqual, None) => leaf(Less, operand),
        (Less, _) => leaf(Less, operand),
        (LessOrEqual, Some(end)) => leaf(Less, end),
        (LessOrEqual, None) => everything(),
        (Greater, Some(end)) => leaf(GreaterOrEqual, end),
        (Greater, None) => nothing(),
        (GreaterOrEqual, _) => leaf(GreaterOrEqual, operand),
    }
}

/// A row-key comparison as row ranges (`[start, stop)`, empty stop = open), the engine's
/// row-key filter; the key right after `k` is `k` followed by a zero byte.
fn row_compare(op: CompareOp, k: Vec<u8>) -> Filter {
    use CompareOp::*;
    let next = |k: &[u8]| {
        let mut n = k.to_vec();
        n.push(0);
        n
    };
    match op {
        // Nothing is below the empty key: a range that selects no row.
        Less if k.is_empty() => Filter::Value(Less, Vec::new()),
        Less => Filter::RowRanges(vec![(Vec::new(), k)]),
        LessOrEqual => Filter::RowRanges(vec![(Vec::new(), next(&k))]),
        Equal => Filter::RowRanges(vec![(k.clone(), next(&k))]),
        NotEqual if k.is_empty() => Filter::RowRanges(vec![(next(&k), Vec::new())]),
        NotEqual => Filter::RowRanges(vec![(Vec::new(), k.clone()), (next(&k), Vec::new())]),
        Greater => Filter::RowRanges(vec![(next(&k), Vec::new())]),
        GreaterOrEqual => Filter::RowRanges(vec![(k, Vec::new())]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Filter, FilterError> {
        parse_filter(s.as_bytes())
    }

    #[test]
    fn combinations_and_precedence() {
        assert_eq!(
            p("PrefixFilter('u1') AND ValueFilter(=, 'binary:abc')").unwrap(),
            Filter::And(vec![
                Filter::RowPrefix(b"u1".to_vec()),
                Filter::Value(CompareOp::Equal, b"abc".to_vec())
            ])
        );
        assert_eq!(
            p("KeyOnlyFilter() OR FirstKeyOnlyFilter() and PageFilter(2)").unwrap(),
            Filter::Or(vec![
                Filter::KeyOnly,
                Filter::And(vec![Filter::FirstKeyOnly, Filter::Page(2)])
            ])
        );
        assert_eq!(
            p("(PrefixFilter('a') OR PrefixFilter('b')) AND TimestampsFilter(1, 2)").unwrap(),
            Filter::And(vec![
                Filter::Or(vec![
                    Filter::RowPrefix(b"a".to_vec()),
                    Filter::RowPrefix(b"b".to_vec())
                ]),
                Filter::Timestamps(vec![1, 2])
            ])
        );
        assert_eq!(
            p("PrefixFilter('it''s')").unwrap(),
            Filter::RowPrefix(b"it's".to_vec())
        );
    }

    #[test]
    fn single_column_value_and_prefix_comparators() {
        assert_eq!(
            p("SingleColumnValueFilter('cf', 'q', >=, 'binary:5', true, true)").unwrap(),
            Filter::SingleColumnValue {
                family: "cf".into(),
                qualifier: b"q".to_vec(),
                op: CompareOp::GreaterOrEqual,
                value: b"5".to_vec(),
                filter_if_missing: true
            }
        );
        assert_eq!(
            p("QualifierFilter(=, 'binaryprefix:ab')").unwrap(),
            Filter::And(vec![
                Filter::Qualifier(CompareOp::GreaterOrEqual, b"ab".to_vec()),
                Filter::Qualifier(CompareOp::Less, b"ac".to_vec())
            ])
        );
        assert_eq!(
            p("RowFilter(=, 'binary:r1')").unwrap(),
            Filter::RowRanges(vec![(b"r1".to_vec(), b"r1\0".to_vec())])
        );
    }

    #[test]
    fn binaryprefix_rewrite_agrees_with_the_prefix_comparison() {
        // Each rewrite must select exactly the values whose first len(p) bytes compare as asked.
        let values: Vec<&[u8]> = vec![b"", b"a", b"ab", b"abc", b"abd", b"ac", b"b", b"\xff"];
        for prefix in [&b"ab"[..], b"a\xff", b"\xff", b""] {
            for op in [
                CompareOp::Less,
                CompareOp::LessOrEqual,
                CompareOp::Equal,
                CompareOp::NotEqual,
                CompareOp::GreaterOrEqual,
                CompareOp::Greater,
            ] {
                let f = compare(op, Comparator::BinaryPrefix, prefix.to_vec(), |o, v| {
                    Filter::Value(o, v)
                });
                for v in &values {
                    let head = &v[..v.len().min(prefix.len())];
                    assert_eq!(
                        eval(&f, v),
                        op.matches(head, prefix),
                        "{op:?} {prefix:?} {v:?}"
                    );
                }
            }
        }
    }

    fn eval(f: &Filter, v: &[u8]) -> bool {
        match f {
            Filter::Value(op, x) => op.matches(v, x),
            Filter::And(fs) => fs.iter().all(|f| eval(f, v)),
            Filter::Or(fs) => fs.iter().any(|f| eval(f, v)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn substring_and_regex_comparators_become_matchers() {
        assert_eq!(
            p("ValueFilter(=, 'substring:Abc')").unwrap(),
            Filter::ValueMatch(Matcher::substring("Abc"))
        );
        assert_eq!(
            p("RowFilter(!=, 'regexstring:^u[0-9]+$')").unwrap(),
            Filter::RowMatch(Matcher::regex("^u[0-9]+$").negated())
        );
        assert_eq!(
            parse_filter(b"ValueFilter(=, 'regexstring:caf\xC3\xA9|\xE9')").unwrap(),
            Filter::ValueMatch(Matcher::regex("café|\\xE9"))
        );
        assert_eq!(
            p("QualifierFilter(=, 'regexstring:a|b')").unwrap(),
            Filter::QualifierMatch(Matcher::regex("a|b"))
        );
        assert_eq!(
            p("SingleColumnValueFilter('cf', 'q', =, 'substring:x', true, true)").unwrap(),
            Filter::SingleColumnValueMatch {
                family: "cf".into(),
                qualifier: b"q".to_vec(),
                matcher: Matcher::substring("x"),
                filter_if_missing: true,
            }
        );
    }

    #[test]
    fn family_range_pagination_and_exclude_filters() {
        assert_eq!(
            p("FamilyFilter(!=, 'binary:cf')").unwrap(),
            Filter::Family(CompareOp::NotEqual, b"cf".to_vec())
        );
        assert_eq!(
            p("ColumnRangeFilter('b', true, 'd', false)").unwrap(),
            Filter::And(vec![
                Filter::Qualifier(CompareOp::GreaterOrEqual, b"b".to_vec()),
                Filter::Qualifier(CompareOp::Less, b"d".to_vec()),
            ])
        );
        assert_eq!(
            p("ColumnRangeFilter('', true, 'd', true)").unwrap(),
            Filter::Qualifier(CompareOp::LessOrEqual, b"d".to_vec())
        );
        assert_eq!(
            p("ColumnPaginationFilter(2, 1)").unwrap(),
            Filter::ColumnPage {
                limit: 2,
                offset: 1
            }
        );
        assert!(p("ColumnPaginationFilter(2, 'q')").unwrap_err().unsupported);
        assert_eq!(
            p("DependentColumnFilter('cf', 'q', true, =, 'binary:v')").unwrap(),
            Filter::DependentColumn {
                family: "cf".into(),
                qualifier: b"q".to_vec(),
                drop_reference: true,
                value: Some(Box::new(Filter::Value(CompareOp::Equal, b"v".to_vec()))),
            }
        );
        assert!(p("DependentColumnFilter('cf', 'q', true, =)").is_err());
        assert_eq!(
            p("ColumnCountGetFilter(3)").unwrap(),
            Filter::ColumnPage {
                limit: 3,
                offset: 0
            }
        );
        assert_eq!(
            p("ColumnValueFilter('cf', 'q', =, 'substring:v')").unwrap(),
            Filter::And(vec![
                Filter::Family(CompareOp::Equal, b"cf".to_vec()),
                Filter::Qualifier(CompareOp::Equal, b"q".to_vec()),
                Filter::ValueMatch(Matcher::substring("v")),
            ])
        );
        let Filter::And(parts) =
            p("SingleColumnValueExcludeFilter('cf', 'q', =, 'binary:v')").unwrap()
        else {
            panic!("not an And");
        };
        assert!(matches!(parts[0], Filter::SingleColumnValue { .. }));
    }

    #[test]
    fn show_filters_lists_exactly_the_filters_parsed() {
        let mut sorted = FILTERS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, FILTERS);
        for name in FILTERS {
            // No arguments: a usage error or a filter, never "unknown filter".
            match p(&format!("{name}()")) {
                Ok(_) => {}
                Err(e) => assert!(!e.msg.contains("unknown filter"), "{name}: {e:?}"),
            }
        }
        // The match arms name no filter that the list leaves out.
        let src = include_str!("filter.rs");
        let body =
            &src[src.find("    match name {").unwrap()..src.find("        other =>").unwrap()];
        for word in body
            .split('"')
            .filter(|w| w.ends_with("Filter") && !w.contains(' '))
        {
            let refused = p(&format!("{word}()")).is_err_and(|e| e.unsupported);
            assert!(
                FILTERS.contains(&word) || refused,
                "{word} is parsed but not listed"
            );
        }
    }

    #[test]
    fn skip_and_while_bind_tighter_than_and() {
        let v = || Filter::Value(CompareOp::NotEqual, b"0".to_vec());
        assert_eq!(
            p("SKIP ValueFilter(!=, 'binary:0') AND PrefixFilter('a')").unwrap(),
            Filter::And(vec![
                Filter::Skip(Box::new(v())),
                Filter::RowPrefix(b"a".to_vec())
            ])
        );
        assert_eq!(
            p("while (ValueFilter(!=, 'binary:0') OR KeyOnlyFilter())").unwrap(),
            Filter::While(Box::new(Filter::Or(vec![v(), Filter::KeyOnly])))
        );
        assert!(p("SKIP").is_err());
    }

    #[test]
    fn errors_point_into_the_string() {
        let e = p("PrefixFilter('a') AND").unwrap_err();
        assert_eq!(e.offset, 21);
        let e = p("ValueFilter(=, 'long:abc')").unwrap_err();
        assert!(e.unsupported && e.offset == 15, "{e:?}");
        let e = p("ValueFilter(<, 'substring:abc')").unwrap_err();
        assert!(!e.unsupported && e.offset == 12, "{e:?}");
        let e = p("NoSuchFilter()").unwrap_err();
        assert_eq!((e.offset, e.unsupported), (0, false));
        let e = p("PrefixFilter('a'").unwrap_err();
        assert_eq!(e.msg, "expected ',' or ')'");
        assert!(p(&"(".repeat(10_000)).is_err());
    }
}
