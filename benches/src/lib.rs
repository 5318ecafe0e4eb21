//! Benchmarks for Cellar; see benches/.
