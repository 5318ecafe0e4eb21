//! `cellar`: the embeddable engine (memstore, WAL, flush, manifest, compaction, cache, MVCC
//! read path, admin, recovery).
//!
//! **Not built yet.** This crate exists so the workspace has the layout of DEVELOPERS.md; the
//! write path is the next piece of work (see SPEC.md §16). Today it only re-exports the file
//! format, which is complete: [`format`].

pub use cellar_format as format;
