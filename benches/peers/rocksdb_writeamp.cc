// The RocksDB side of Cellar's write-amplification load (benches/src/bin/writeamp.rs): the
// same cells in the same order, the same settings where the engines share one, and the same
// JSON fields. benches/peers/writeamp.sh builds and runs both.
//
// Build: g++ -O2 -std=c++17 rocksdb_writeamp.cc -o rocksdb_writeamp -lrocksdb -lpthread
//
// Generator (must match writeamp.rs exactly; the script diffs `--print-cells` of both):
//   splitmix64 as a counter: output n is mix(seed + (n + 1) * GAMMA); cell i consumes outputs
//   i*(1+W) .. (i+1)*(1+W), W = ceil(value_size / 8): the key is "%016x" of
//   (output % key_space), the value the next W outputs' little-endian bytes, truncated.
//
// Definitions (same as the Cellar side):
//   user bytes  = cells * (16 + value_size)
//   write amp   = (FLUSH_WRITE_BYTES + COMPACT_WRITE_BYTES) / user bytes (WAL not counted)
//   space amp   = live SST bytes / bytes of the last non-empty level

#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/metadata.h>
#include <rocksdb/options.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ULL;

uint64_t splitmix(uint64_t seed, uint64_t n) {
  uint64_t z = seed + (n + 1) * kGamma;  // unsigned: wraps like Rust's wrapping_*
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Key (16 hex digits) and value of cell i.
void cell(uint64_t seed, uint64_t key_space, size_t value_size, uint64_t i, char key[17],
          std::string* value) {
  const uint64_t words = (value_size + 7) / 8;
  const uint64_t base = i * (1 + words);
  const uint64_t k = splitmix(seed, base) % key_space;
  std::snprintf(key, 17, "%016" PRIx64, k);
  value->resize(value_size);
  for (uint64_t j = 0; j < words; j++) {
    uint64_t w = splitmix(seed, base + 1 + j);
    for (size_t b = 0; b < 8 && j * 8 + b < value_size; b++) {
      (*value)[j * 8 + b] = static_cast<char>((w >> (8 * b)) & 0xff);  // little-endian
    }
  }
}

uint64_t peak_rss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

uint64_t int_property(rocksdb::DB* db, const char* name) {
  uint64_t v = 0;
  db->GetIntProperty(name, &v);
  return v;
}

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr,
               "%s\nusage: rocksdb_writeamp --dir DIR [--cells N] [--value-size B] "
               "[--key-space K] [--seed S] [--write-buffer BYTES] [--threads T] "
               "[--print-cells N]\n",
               msg);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t cells = 10000000, key_space = 0, seed = 42, threads = 1, print_cells = 0;
  size_t value_size = 100, write_buffer = 64 << 20;
  bool print = false;
  std::string dir;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value for " + a).c_str());
    const char* v = argv[++i];
    if (a == "--cells") cells = std::strtoull(v, nullptr, 10);
    else if (a == "--value-size") value_size = std::strtoull(v, nullptr, 10);
    else if (a == "--key-space") key_space = std::strtoull(v, nullptr, 10);
    else if (a == "--seed") seed = std::strtoull(v, nullptr, 10);
    else if (a == "--dir") dir = v;
    else if (a == "--write-buffer") write_buffer = std::strtoull(v, nullptr, 10);
    else if (a == "--threads") threads = std::strtoull(v, nullptr, 10);
    else if (a == "--print-cells") { print = true; print_cells = std::strtoull(v, nullptr, 10); }
    else usage(("unknown argument " + a).c_str());
  }
  if (key_space == 0) key_space = cells == 0 ? 1 : cells;
  if (threads == 0) usage("--threads must be at least 1");

  if (print) {
    char key[17];
    std::string value;
    for (uint64_t i = 0; i < print_cells && i < cells; i++) {
      cell(seed, key_space, value_size, i, key, &value);
      std::printf("%s ", key);
      for (unsigned char c : value) std::printf("%02x", c);
      std::printf("\n");
    }
    return 0;
  }
  if (dir.empty()) usage("--dir is required");

  rocksdb::Options o;
  o.create_if_missing = true;
  o.error_if_exists = true;
  o.compaction_style = rocksdb::kCompactionStyleLevel;
  o.level_compaction_dynamic_level_bytes = true;
  o.write_buffer_size = write_buffer;
  o.target_file_size_base = 64 << 20;
  o.max_bytes_for_level_base = 256 << 20;
  // Cellar's family default is COMPRESSION NONE; RocksDB's default would be Snappy.
  o.compression = rocksdb::kNoCompression;
  o.statistics = rocksdb::CreateDBStatistics();
  // Cellar's family defaults: 64 KiB blocks and a row bloom filter at 10 bits per key (the row
  // is the whole RocksDB key here). RocksDB's defaults (4 KiB, no filter) would make its files
  // differ in index and filter bytes for reasons unrelated to compaction.
  rocksdb::BlockBasedTableOptions t;
  t.block_size = 64 << 10;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));

  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, dir, &db);
  if (!s.ok()) {
    std::fprintf(stderr, "open %s: %s\n", dir.c_str(), s.ToString().c_str());
    return 1;
  }

  // Default WriteOptions: WAL on, sync = false: each write reaches the OS, no fsync — what
  // Cellar's SyncWal does.
  const rocksdb::WriteOptions wo;
  const auto start = std::chrono::steady_clock::now();
  auto secs_since = [&](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::atomic<uint64_t> done{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> writers;
  for (uint64_t t = 0; t < threads; t++) {
    writers.emplace_back([&, t] {
      char key[17];
      std::string value;
      for (uint64_t i = t; i < cells && !failed; i += threads) {
        cell(seed, key_space, value_size, i, key, &value);
        rocksdb::Status ws = db->Put(wo, rocksdb::Slice(key, 16), value);
        if (!ws.ok()) {
          std::fprintf(stderr, "put: %s\n", ws.ToString().c_str());
          failed = true;
          return;
        }
        uint64_t n = done.fetch_add(1) + 1;
        if (n % 1000000 == 0) {
          double el = secs_since(start);
          std::fprintf(stderr, "rocksdb: %" PRIu64 " cells, %.1f s, %.0f cells/s, peak RSS %" PRIu64
                       " MiB\n", n, el, n / el, peak_rss() >> 20);
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  if (failed) return 1;
  const double load_secs = secs_since(start);
  std::fprintf(stderr, "rocksdb: load done in %.1f s; flushing and draining compactions\n",
               load_secs);

  s = db->Flush(rocksdb::FlushOptions());
  if (!s.ok()) {
    std::fprintf(stderr, "flush: %s\n", s.ToString().c_str());
    return 1;
  }
  // RocksDB 7.8 has no WaitForCompact (8.x does): poll until nothing runs and nothing is due,
  // twice in a row so a compaction scheduled by the one that just ended is not missed.
  for (int quiet = 0; quiet < 2;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    bool busy = int_property(db, "rocksdb.num-running-compactions") ||
                int_property(db, "rocksdb.compaction-pending") ||
                int_property(db, "rocksdb.num-running-flushes") ||
                int_property(db, "rocksdb.mem-table-flush-pending");
    quiet = busy ? 0 : quiet + 1;
  }
  const double elapsed = secs_since(start);

  const uint64_t flush_bytes = o.statistics->getTickerCount(rocksdb::FLUSH_WRITE_BYTES);
  const uint64_t compact_bytes = o.statistics->getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
  const uint64_t wal_bytes = o.statistics->getTickerCount(rocksdb::WAL_FILE_BYTES);
  rocksdb::ColumnFamilyMetaData meta;
  db->GetColumnFamilyMetaData(&meta);
  uint64_t live = 0, last = 0;
  for (const auto& l : meta.levels) {
    live += l.size;
    if (l.size > 0) last = l.size;  // levels are in order: the last non-empty one wins
  }
  std::string stats;
  db->GetProperty("rocksdb.stats", &stats);
  std::fprintf(stderr, "%s\n", stats.c_str());

  const uint64_t user_bytes = cells * (16 + value_size);
  const uint64_t disk = flush_bytes + compact_bytes;
  std::printf(
      "{\"engine\":\"rocksdb\",\"cells\":%" PRIu64 ",\"key_space\":%" PRIu64
      ",\"value_size\":%zu,\"threads\":%" PRIu64 ",\"durability\":\"sync\",\"seed\":%" PRIu64 ",\"user_bytes\":%" PRIu64
      ",\"flush_bytes_written\":%" PRIu64 ",\"compaction_bytes_written\":%" PRIu64
      ",\"disk_bytes_written\":%" PRIu64 ",\"write_amp\":%.4f,\"space_amp\":%.4f"
      ",\"live_table_bytes\":%" PRIu64 ",\"wal_bytes\":%" PRIu64 ",\"peak_rss_bytes\":%" PRIu64
      ",\"load_secs\":%.3f,\"elapsed_secs\":%.3f,\"cells_per_sec\":%.1f"
      ",\"load_cells_per_sec\":%.1f,\"rocksdb_version\":\"%d.%d.%d\"}\n",
      cells, key_space, value_size, threads, seed, user_bytes, flush_bytes, compact_bytes, disk,
      user_bytes ? double(disk) / double(user_bytes) : 0.0,
      last ? double(live) / double(last) : 0.0, live, wal_bytes, peak_rss(), load_secs, elapsed,
      cells / elapsed, cells / load_secs, ROCKSDB_MAJOR, ROCKSDB_MINOR, ROCKSDB_PATCH);
  std::fflush(stdout);
  delete db;
  return 0;
}
