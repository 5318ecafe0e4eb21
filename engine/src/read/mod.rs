//! The read path's pure parts: merging sources, the query and result types, and version
//! resolution.
//!
//! A read merges the family's memstores and files ([`merge::MergeIter`]) into one stream in key
//! order (SPEC.md §3.2), cuts it into rows and families, and feeds each family's cells to a
//! [`resolve::RowResolver`], which decides cell by cell what the reader sees (SPEC.md §13). The
//! resolver knows nothing of where cells come from, so compaction reuses it.

pub mod filter;
pub mod merge;
pub mod query;
pub mod range_index;
pub mod resolve;
pub mod view;

pub use filter::{CompareOp, Filter, FilterEval, Matcher, Pattern, RowCheck};
pub use merge::{HFileCellIter, MergeIter, VecCellIter};
pub use query::{Cell, Get, Row, Scan, Selection, TimeRange};
pub use resolve::{resolve_cells, ReadParams, RowResolver, Verdict};
pub use view::{CellRef, RowView};
