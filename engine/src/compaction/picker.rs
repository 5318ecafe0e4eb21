//! Placeholder: filled by the picker work (see compaction/mod.rs).
