//! Placeholder: filled by the purge work (see compaction/mod.rs).
