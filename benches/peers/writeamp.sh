#!/usr/bin/env bash
# Cellar vs RocksDB on the same random-write load: write amplification, space amplification,
# throughput and peak RSS, one engine after the other on this machine.
#
#   benches/peers/writeamp.sh [--cells N] [--value-size B] [--key-space K] [--seed S]
#                             [--write-buffer BYTES] [--threads T] [--work-dir DIR]
#
# Defaults: 10,000,000 cells of 100-byte values, keys uniform over 10M (so overwrites happen,
# as in db_bench fillrandom), one writer, 64 MiB write buffers. Databases go to fresh
# directories under --work-dir (default $TMPDIR or /tmp) and are removed after each run; each
# engine's stderr (progress, stats report) is kept in the log directory printed at the end.
# Needs g++, librocksdb-dev (installed with apt-get when missing), cargo and python3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

args=()
work="${TMPDIR:-/tmp}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cells|--value-size|--key-space|--seed|--write-buffer|--threads)
      [[ $# -ge 2 ]] || { echo "missing value for $1" >&2; exit 2; }
      args+=("$1" "$2"); shift 2 ;;
    --work-dir) work="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# Tools and the system RocksDB (Debian bookworm: 7.8.3).
missing=()
command -v g++ >/dev/null || missing+=(g++)
[[ -f /usr/include/rocksdb/db.h ]] || missing+=(librocksdb-dev)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "installing ${missing[*]}" >&2
  sudo_=""; [[ $(id -u) -eq 0 ]] || sudo_="sudo"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}"
fi

logs="$(mktemp -d "$work/writeamp-logs.XXXXXX")"
peer="$logs/rocksdb_writeamp"
echo "building the RocksDB side" >&2
g++ -O2 -std=c++17 "$here/rocksdb_writeamp.cc" -o "$peer" -lrocksdb -lpthread
echo "building the Cellar side" >&2
(cd "$root" && cargo build --release -q -p cellar-benches --bin writeamp)
target="$(cd "$root" && cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
cellar="$target/release/writeamp"

# Both must write the very same cells: compare their first 1000 (key, value) pairs.
if ! cmp -s <("$cellar" --print-cells 1000 "${args[@]}") <("$peer" --print-cells 1000 "${args[@]}"); then
  echo "the two load generators disagree; not comparing" >&2
  exit 1
fi

run() { # engine binary
  local db; db="$(mktemp -d "$work/writeamp-$1.XXXXXX")"
  rmdir "$db" # both engines create it (RocksDB's error_if_exists refuses an existing one)
  echo "running $1 (stderr: $logs/$1.log)" >&2
  "$2" --dir "$db" "${args[@]}" >"$logs/$1.json" 2>"$logs/$1.log"
  rm -rf "$db"
}
unique="$("$cellar" --count-unique "${args[@]}")"
run cellar "$cellar"
run rocksdb "$peer"

cat "$logs/cellar.json" "$logs/rocksdb.json"
python3 - "$logs/cellar.json" "$logs/rocksdb.json" "$unique" <<'EOF'
import json, sys
c, r = (json.loads(open(p).read()) for p in sys.argv[1:3])
# Live table bytes over the key + value bytes of the distinct keys written: unlike space_amp
# (total / last level), this counts overwritten values an engine still keeps.
for e in (c, r):
    e["live_data_amp"] = e["live_table_bytes"] / (int(sys.argv[3]) * (16 + e["value_size"]))
print(f"distinct keys: {sys.argv[3]} of {c['cells']} cells")
print(f"{'':24}{'cellar':>14}{'rocksdb':>14}{'cellar/rocksdb':>16}")
for key, label in [("write_amp", "write amp"), ("space_amp", "space amp (total/last)"),
                   ("live_data_amp", "live bytes / data"),
                   ("cells_per_sec", "cells/s (incl. drain)"),
                   ("load_cells_per_sec", "cells/s (load only)"),
                   ("peak_rss_bytes", "peak RSS (MiB)")]:
    cv, rv = c[key], r[key]
    scale = 1 / 2**20 if key == "peak_rss_bytes" else 1
    ratio = f"{cv / rv:.2f}" if rv else "-"
    print(f"{label:24}{cv * scale:14.2f}{rv * scale:14.2f}{ratio:>16}")
EOF
echo "logs: $logs" >&2
