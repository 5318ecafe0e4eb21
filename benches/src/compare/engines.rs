//! The engines of the side-by-side comparison behind one small trait, each configured alike:
//! WAL on (written to the OS per write, no fsync) for the throughput runs, an fsync per write
//! for the synced runs, a bloom filter of 10 bits per key, LZ4, a block cache and a write
//! buffer of the same sizes. Peers are compiled only with the `peers` feature.
//!
//! The one asymmetry the engines force: fjall buffers its journal in the process by default,
//! so its adapter calls `persist(Buffer)` after each write to reach the OS as the others do.

use std::path::Path;

use anyhow::{Context, Result};

/// Settings every engine gets.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Block cache bytes.
    pub cache_bytes: usize,
    /// Write buffer (memtable / memstore) bytes.
    pub write_buffer_bytes: usize,
    /// Data block size of Cellar's family (peers keep their own defaults, 4 KiB).
    pub cellar_block_size: u32,
    /// Keep the whole write-ahead log after flushes, for a change feed read from its start
    /// (phase `changes`): Cellar's `WalOptions::retain_bytes`, RocksDB's WAL archive
    /// (`WAL_ttl_seconds`).
    pub keep_log: bool,
}

/// What the workloads need of an engine.
pub trait Engine: Send + Sync {
    /// Write one key; `sync`: durable on return (fsync), else in the OS.
    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()>;
    /// Whether `key` is present.
    fn get(&self, key: &[u8]) -> Result<bool>;
    /// Look up every key of `keys` in one batch; `found[i]` is whether `keys[i]` is present.
    /// The default reads them one by one (the engine has no batched read).
    fn multi_get(&self, keys: &[Vec<u8>], found: &mut [bool]) -> Result<()> {
        for (k, f) in keys.iter().zip(found.iter_mut()) {
            *f = self.get(k)?;
        }
        Ok(())
    }
    /// Position at the first key ≥ `key` and read up to `n` entries; how many were read.
    fn seek(&self, key: &[u8], n: usize) -> Result<usize>;
    /// Read every entry in order; how many.
    fn scan_all(&self) -> Result<u64>;
    /// Load entries untimed, for an engine measured on reads only.
    fn load(&self, items: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Result<()> {
        for (k, v) in items {
            self.put(&k, &v, false)?;
        }
        Ok(())
    }
    /// Flush write buffers and wait for background compaction to go quiet (untimed).
    fn settle(&self) -> Result<()>;
    /// Load `items` (ascending, distinct keys) through the engine's bulk path: an external file
    /// written and ingested (Cellar's `Table::ingest`, RocksDB's `SstFileWriter` and
    /// `IngestExternalFile`) or a sorted ingestion (fjall's `start_ingestion`); `scratch` is a
    /// directory for the external file. `false` where the engine has no bulk path.
    fn bulk_load(
        &self,
        _items: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
        _scratch: &Path,
    ) -> Result<bool> {
        Ok(false)
    }
    /// Records the engine's log has written and the fdatasyncs it issued, so far: how many
    /// writers' records an fsync carried. `None` where the engine does not tell.
    fn log_counters(&self) -> Option<(u64, u64)> {
        None
    }
    /// Whether the engine's timed write figures are measured (the B-tree is loaded in large
    /// transactions instead: its per-write commit is another workload).
    fn timed_writes(&self) -> bool {
        true
    }
    /// Read every committed write back from the log, from its start, touching each key and
    /// value (Cellar's `Db::changes_since`, RocksDB's `GetUpdatesSince`): `(batches, bytes of
    /// keys and values)`. `None` where the engine has no change feed.
    fn read_changes(&self) -> Result<Option<(u64, u64)>> {
        Ok(None)
    }
}

/// Every engine name the tool knows, in report order.
pub const ALL: [&str; 4] = ["cellar", "rocksdb", "fjall", "redb"];

/// The engines built into this binary.
pub fn available() -> Vec<&'static str> {
    if cfg!(feature = "peers") {
        ALL.to_vec()
    } else {
        vec!["cellar"]
    }
}

/// Open engine `name` on an empty directory `dir`.
pub fn open(name: &str, dir: &Path, cfg: &Config) -> Result<Box<dyn Engine>> {
    match name {
        "cellar" => Ok(Box::new(CellarEngine::open(dir, cfg)?)),
        #[cfg(feature = "peers")]
        "rocksdb" => Ok(Box::new(peers::Rocks::open(dir, cfg)?)),
        #[cfg(feature = "peers")]
        "fjall" => Ok(Box::new(peers::Fjall::open(dir, cfg)?)),
        #[cfg(feature = "peers")]
        "redb" => Ok(Box::new(peers::Redb::open(dir, cfg)?)),
        other => anyhow::bail!(
            "engine {other:?} is not built in (available: {}; peers need --features peers)",
            available().join(", ")
        ),
    }
}

const TABLE: &str = "bench";
const FAMILY: &str = "f";

/// Cellar: one table, one family keeping one version, the value under the empty qualifier.
struct CellarEngine {
    db: cellar::Db,
    table: cellar::Table,
    block_size: u32,
}

impl CellarEngine {
    fn open(dir: &Path, cfg: &Config) -> Result<Self> {
        let mut opts = cellar::Options::default().write_buffer_size(cfg.write_buffer_bytes);
        opts.block_cache_bytes = cfg.cache_bytes;
        if cfg.keep_log {
            opts.wal.retain_bytes = u64::MAX;
        }
        let db = cellar::Db::open(dir, opts).context("opening Cellar")?;
        db.create_table(
            cellar::TableDescriptor::new(TABLE).family(
                cellar::FamilyDescriptor::new(FAMILY)
                    .max_versions(1)
                    .bloom(cellar::format::bloom::BloomType::Row)
                    .compression(cellar::format::CompressionType::Lz4)
                    .block_size(cfg.cellar_block_size),
            ),
        )?;
        let table = db.table(TABLE)?;
        Ok(CellarEngine {
            db,
            table,
            block_size: cfg.cellar_block_size,
        })
    }
}

impl Engine for CellarEngine {
    fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        let d = if sync {
            cellar::Durability::FsyncWal
        } else {
            cellar::Durability::SyncWal
        };
        // One cell from borrowed bytes, as the peers' adapters pass their key and value.
        self.table
            .put_cell_with(key, FAMILY, b"", value, cellar::WriteOptions::durability(d))?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<bool> {
        // A borrowed row, as RocksDB's adapter pins its value (`get_pinned`).
        Ok(self.table.get_view(&cellar::Get::new(key), |row| {
            std::hint::black_box(row.and_then(|r| r.value(FAMILY, ""))).is_some()
        })?)
    }

    fn multi_get(&self, keys: &[Vec<u8>], found: &mut [bool]) -> Result<()> {
        let gets: Vec<cellar::Get> = keys
            .iter()
            .map(|k| cellar::Get::new(k.as_slice()))
            .collect();
        self.table.get_many_view(&gets, |i, row| {
            found[i] = std::hint::black_box(row.and_then(|r| r.value(FAMILY, ""))).is_some();
        })?;
        Ok(())
    }

    fn seek(&self, key: &[u8], n: usize) -> Result<usize> {
        let mut read = 0;
        // Borrowed rows, as the peers' iterators hand out slices.
        self.table
            .scan_each(cellar::Scan::new().start_row(key).limit(n), |row| {
                std::hint::black_box(row.value(FAMILY, ""));
                read += 1;
                std::ops::ControlFlow::Continue(())
            })?;
        Ok(read)
    }

    fn scan_all(&self) -> Result<u64> {
        let mut read = 0;
        self.table.scan_each(cellar::Scan::new(), |row| {
            std::hint::black_box(row.value(FAMILY, ""));
            read += 1;
            std::ops::ControlFlow::Continue(())
        })?;
        Ok(read)
    }

    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        self.db.wait_for_compactions()?;
        Ok(())
    }

    fn read_changes(&self) -> Result<Option<(u64, u64)>> {
        let mut feed = self.db.changes_since(0)?;
        let (mut batches, mut bytes) = (0u64, 0u64);
        while let Some(b) = feed.next_batch()? {
            // The table's creation is in the log too (a schema record): not a put.
            if b.cells.is_empty() {
                continue;
            }
            batches += 1;
            for c in &b.cells {
                bytes += (c.row.len() + c.value.len()) as u64;
            }
        }
        Ok(Some((batches, bytes)))
    }

    fn log_counters(&self) -> Option<(u64, u64)> {
        let w = self.db.stats().wal;
        Some((w.records, w.syncs))
    }

    fn bulk_load(
        &self,
        items: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
        scratch: &Path,
    ) -> Result<bool> {
        use cellar::format::{CellType, HFileWriter, KeyRef, WriterOptions};
        let path = scratch.join("load.hfile");
        // The family's settings, as an operator building files for it would choose.
        let mut o = WriterOptions::new(FAMILY);
        o.compression = cellar::format::CompressionType::Lz4;
        o.block_size = self.block_size as usize;
        o.bloom.bloom_type = cellar::format::bloom::BloomType::Row;
        let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
        let mut w = HFileWriter::new(file, "load.hfile", o)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis() as u64;
        for (k, v) in items {
            let key = KeyRef {
                row: &k,
                family: FAMILY.as_bytes(),
                qualifier: b"",
                timestamp: now,
                type_code: CellType::Put as u8,
                seq: 0,
            };
            w.append(&key, &v)?;
        }
        let (file, _) = w.finish()?;
        file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        // The file is the loader's to give away, as RocksDB's adapter moves its SST.
        let moved = cellar::IngestOptions::default().move_files(true);
        self.table.ingest_with(FAMILY, &[&path], moved)?;
        Ok(true)
    }
}

#[cfg(feature = "peers")]
mod peers {
    use super::*;
    use redb::{ReadableDatabase, ReadableTable};
    use std::time::Duration;

    /// RocksDB through the `rocksdb` crate: leveled compaction with dynamic level bytes, as
    /// Cellar's.
    pub struct Rocks {
        db: rocksdb::DB,
        // The options the database was opened with, for `SstFileWriter`.
        opts: rocksdb::Options,
        // Kept alive as long as the options that point at it.
        _cache: rocksdb::Cache,
    }

    impl Rocks {
        pub fn open(dir: &Path, cfg: &Config) -> Result<Self> {
            let cache = rocksdb::Cache::new_lru_cache(cfg.cache_bytes)?;
            let mut table = rocksdb::BlockBasedOptions::default();
            table.set_bloom_filter(10.0, false);
            table.set_block_cache(&cache);
            let mut o = rocksdb::Options::default();
            o.create_if_missing(true);
            o.set_write_buffer_size(cfg.write_buffer_bytes);
            o.set_compression_type(rocksdb::DBCompressionType::Lz4);
            o.set_level_compaction_dynamic_level_bytes(true);
            o.set_block_based_table_factory(&table);
            if cfg.keep_log {
                // Flushed logs go to the archive, where `GetUpdatesSince` still reads them.
                o.set_wal_ttl_seconds(3600);
            }
            // The default column family opened by descriptor, so `multi_get` has its handle.
            // Its options must be given again: `open_cf` by name gives a family default
            // options (no bloom, cache or LZ4; readrandom fell from 170k to 66k).
            let cf = rocksdb::ColumnFamilyDescriptor::new("default", o.clone());
            let db = rocksdb::DB::open_cf_descriptors(&o, dir, [cf]).context("opening RocksDB")?;
            Ok(Rocks {
                db,
                opts: o,
                _cache: cache,
            })
        }
    }

    impl Engine for Rocks {
        fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
            let mut w = rocksdb::WriteOptions::default();
            w.set_sync(sync);
            Ok(self.db.put_opt(key, value, &w)?)
        }

        fn read_changes(&self) -> Result<Option<(u64, u64)>> {
            struct Touch(u64);
            impl rocksdb::WriteBatchIterator for Touch {
                fn put(&mut self, key: Box<[u8]>, value: Box<[u8]>) {
                    self.0 += (key.len() + value.len()) as u64;
                }
                fn delete(&mut self, key: Box<[u8]>) {
                    self.0 += key.len() as u64;
                }
            }
            let (mut batches, mut touch) = (0u64, Touch(0));
            for item in self.db.get_updates_since(0)? {
                let (_, batch) = item?;
                batch.iterate(&mut touch);
                batches += 1;
            }
            Ok(Some((batches, touch.0)))
        }

        fn get(&self, key: &[u8]) -> Result<bool> {
            Ok(self.db.get_pinned(key)?.is_some())
        }

        fn multi_get(&self, keys: &[Vec<u8>], found: &mut [bool]) -> Result<()> {
            // RocksDB's batched MultiGet (pinned values, the keys sorted inside).
            let cf = self
                .db
                .cf_handle("default")
                .context("RocksDB's default column family")?;
            let values = self.db.batched_multi_get_cf(cf, keys, false);
            for (v, f) in values.into_iter().zip(found.iter_mut()) {
                *f = v?.is_some();
            }
            Ok(())
        }

        fn seek(&self, key: &[u8], n: usize) -> Result<usize> {
            let mut it = self.db.raw_iterator();
            it.seek(key);
            let mut read = 0;
            while it.valid() && read < n {
                std::hint::black_box(it.value());
                read += 1;
                it.next();
            }
            it.status()?;
            Ok(read)
        }

        fn scan_all(&self) -> Result<u64> {
            let mut it = self.db.raw_iterator();
            it.seek_to_first();
            let mut read = 0;
            while it.valid() {
                std::hint::black_box(it.value());
                read += 1;
                it.next();
            }
            it.status()?;
            Ok(read)
        }

        fn bulk_load(
            &self,
            items: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
            scratch: &Path,
        ) -> Result<bool> {
            let path = scratch.join("load.sst");
            let mut w = rocksdb::SstFileWriter::create(&self.opts);
            w.open(&path)?;
            for (k, v) in items {
                w.put(&k, &v)?;
            }
            // Syncs the file (RocksDB's `SstFileWriter::Finish`).
            w.finish()?;
            let mut o = rocksdb::IngestExternalFileOptions::default();
            o.set_move_files(true);
            self.db.ingest_external_file_opts(&o, vec![path])?;
            Ok(true)
        }

        fn settle(&self) -> Result<()> {
            self.db.flush()?;
            loop {
                let pending = self
                    .db
                    .property_int_value("rocksdb.compaction-pending")?
                    .unwrap_or(0);
                let running = self
                    .db
                    .property_int_value("rocksdb.num-running-compactions")?
                    .unwrap_or(0);
                if pending == 0 && running == 0 {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// fjall 3: one keyspace, default (LZ4, bloom) table settings.
    pub struct Fjall {
        db: fjall::Database,
        ks: fjall::Keyspace,
    }

    impl Fjall {
        pub fn open(dir: &Path, cfg: &Config) -> Result<Self> {
            let db = fjall::Database::builder(dir)
                .cache_size(cfg.cache_bytes as u64)
                .open()
                .context("opening fjall")?;
            let wb = cfg.write_buffer_bytes as u64;
            let ks = db.keyspace("bench", move || {
                fjall::KeyspaceCreateOptions::default().max_memtable_size(wb)
            })?;
            Ok(Fjall { db, ks })
        }
    }

    impl Engine for Fjall {
        fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
            self.ks.insert(key, value)?;
            let mode = if sync {
                fjall::PersistMode::SyncData
            } else {
                fjall::PersistMode::Buffer
            };
            Ok(self.db.persist(mode)?)
        }

        fn get(&self, key: &[u8]) -> Result<bool> {
            Ok(self.ks.get(key)?.is_some())
        }

        fn seek(&self, key: &[u8], n: usize) -> Result<usize> {
            let mut read = 0;
            for kv in self.ks.range(key..).take(n) {
                std::hint::black_box(kv.into_inner()?);
                read += 1;
            }
            Ok(read)
        }

        fn scan_all(&self) -> Result<u64> {
            let mut read = 0;
            for kv in self.ks.iter() {
                std::hint::black_box(kv.into_inner()?);
                read += 1;
            }
            Ok(read)
        }

        fn bulk_load(
            &self,
            items: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
            _scratch: &Path,
        ) -> Result<bool> {
            let mut ing = self.ks.start_ingestion()?;
            for (k, v) in items {
                ing.write(k, v)?;
            }
            ing.finish()?;
            Ok(true)
        }

        fn settle(&self) -> Result<()> {
            self.ks.rotate_memtable_and_wait()?;
            while self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(())
        }
    }

    const REDB_TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("bench");

    /// redb, a copy-on-write B-tree: measured on reads after an untimed load.
    pub struct Redb {
        db: redb::Database,
    }

    impl Redb {
        pub fn open(dir: &Path, cfg: &Config) -> Result<Self> {
            std::fs::create_dir_all(dir)?;
            let db = redb::Database::builder()
                .set_cache_size(cfg.cache_bytes)
                .create(dir.join("bench.redb"))
                .context("opening redb")?;
            let w = db.begin_write()?;
            w.open_table(REDB_TABLE)?;
            w.commit()?;
            Ok(Redb { db })
        }
    }

    impl Engine for Redb {
        fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
            let mut w = self.db.begin_write()?;
            if !sync {
                w.set_durability(redb::Durability::None)?;
            }
            w.open_table(REDB_TABLE)?.insert(key, value)?;
            w.commit()?;
            Ok(())
        }

        fn load(&self, items: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Result<()> {
            let mut items = items.peekable();
            while items.peek().is_some() {
                let w = self.db.begin_write()?;
                {
                    let mut t = w.open_table(REDB_TABLE)?;
                    for (k, v) in items.by_ref().take(100_000) {
                        t.insert(k.as_slice(), v.as_slice())?;
                    }
                }
                w.commit()?;
            }
            Ok(())
        }

        fn get(&self, key: &[u8]) -> Result<bool> {
            let r = self.db.begin_read()?;
            let t = r.open_table(REDB_TABLE)?;
            Ok(t.get(key)?.is_some())
        }

        fn multi_get(&self, keys: &[Vec<u8>], found: &mut [bool]) -> Result<()> {
            // One read transaction for the batch, as Cellar's batch reads one snapshot.
            let r = self.db.begin_read()?;
            let t = r.open_table(REDB_TABLE)?;
            for (k, f) in keys.iter().zip(found.iter_mut()) {
                *f = t.get(k.as_slice())?.is_some();
            }
            Ok(())
        }

        fn seek(&self, key: &[u8], n: usize) -> Result<usize> {
            let r = self.db.begin_read()?;
            let t = r.open_table(REDB_TABLE)?;
            let mut read = 0;
            for kv in t.range(key..)?.take(n) {
                let (_, v) = kv?;
                std::hint::black_box(v.value());
                read += 1;
            }
            Ok(read)
        }

        fn scan_all(&self) -> Result<u64> {
            let r = self.db.begin_read()?;
            let t = r.open_table(REDB_TABLE)?;
            let mut read = 0;
            for kv in t.iter()? {
                let (_, v) = kv?;
                std::hint::black_box(v.value());
                read += 1;
            }
            Ok(read)
        }

        fn settle(&self) -> Result<()> {
            Ok(())
        }

        fn timed_writes(&self) -> bool {
            false
        }
    }
}
