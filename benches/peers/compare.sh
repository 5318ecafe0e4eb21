#!/usr/bin/env bash
# The side-by-side comparison with RocksDB, fjall and redb (issue 7), on a fresh Debian/Ubuntu
# machine: installs the system RocksDB (7.8, whose C API the `rocksdb` 0.20 crate binds) and
# libclang (bindgen), links against it instead of compiling RocksDB, and runs
#   cargo run --release -p cellar-benches --features peers -- compare "$@"
# Example: bash benches/peers/compare.sh --num 2000000 --markdown
set -euo pipefail
cd "$(dirname "$0")/../.."

need=()
[ -e /usr/include/rocksdb/c.h ] || need+=(librocksdb-dev)
# bindgen loads libclang.so itself (libclang-cpp.so, which librocksdb-dev may pull in, is not it).
compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null || compgen -G '/usr/lib/*/libclang-[0-9]*.so*' >/dev/null ||
    need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

lib=$(dirname "$(ls /usr/lib/*/librocksdb.so /usr/lib/librocksdb.so 2>/dev/null | head -1)")
export ROCKSDB_LIB_DIR="$lib"
exec cargo run --release -p cellar-benches --features peers -- compare "$@"
